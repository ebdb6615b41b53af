"""How far the stand-in's old and new models are from convergence, and how hard the stand-in is at convergence.

For each seed it trains the old model (ImageNet-500 stand-in) and the new model (ImageNet-1k stand-in) with the tiny
recipe (Adam, the recipe's learning rate and batch) for `--epochs` epochs of one schedule, with independent initial
weights (drawn per model, `init_seed`), and after every epoch measures retrieval top-1 on the ImageNet-1k stand-in's evaluation
images (query = gallery, leave-one-out), as the experiment notebooks do. At the end it measures new/old (new queries
against the old gallery: the independent, incompatible baseline) and the seconds per epoch. The stand-in's knobs
(`GlyphConfig` fields) are flags, so that candidate regimes can be compared before one is chosen:

    python benchmarks/standin_convergence.py --arch resnet10 --epochs 40 --seeds 0 --n-train 15 --noise 0 0.1 \\
        --out benchmarks/standin_convergence/resnet10-n15-noise10.csv

Rows: seed, model, epoch, top1, seconds (of that epoch), and the knobs; the last rows per seed are `new/old`.
Choose the regime from these curves alone, before looking at any claim. `--summary FILE...` prints a markdown table of
measured files (what `docs/standin_regime.md` shows):

    python benchmarks/standin_convergence.py --summary benchmarks/standin_convergence/*.csv
"""
import argparse, csv, json, os, sys, tempfile, time
from dataclasses import asdict, fields, replace
from pathlib import Path

import torch


def knob_args(p: argparse.ArgumentParser):
    "A flag for each knob of `GlyphConfig` that is a number or a (low, high) pair (not `class_seed`, not the class table)."
    from compatrepro.standin import GlyphConfig
    for f in fields(GlyphConfig):
        if f.name == 'class_seed': continue
        if isinstance(f.default, tuple) and len(f.default) == 2:
            p.add_argument('--' + f.name.replace('_', '-'), type=float, nargs=2, default=None)
        elif isinstance(f.default, (int, float, str)):
            p.add_argument('--' + f.name.replace('_', '-'), type=type(f.default), default=None)


def summary(paths) -> str:
    "A markdown table of measured curves: per file and model, top-1 at a few epochs, the last epoch's gain, s/epoch."
    import pandas as pd
    out = ['| run | model | seeds | train images | top-1 at epochs ... (mean over seeds) | last (per seed) | last-epoch gain | s/epoch |',
           '|---|---|---|---|---|---|---|---|']
    for f in paths:
        d = pd.read_csv(f)
        for m, g in d.groupby('model', sort=False):
            mean = g.groupby('epoch').top1.mean()
            seeds = ','.join(map(str, sorted(g.seed.unique())))
            E = int(mean.index.max())
            last = f'{mean.loc[E]:.2f}' + (f" ({', '.join(f'{v:.1f}' for v in g[g.epoch == E].sort_values('seed').top1)})" if g.seed.nunique() > 1 else '')
            if m == 'new/old':
                out.append(f'| {Path(f).stem} | new/old (independent) | {seeds} | | | {last} | | |'); continue
            pts = sorted({e for e in (1, E//4, E//2, 3*E//4, E) if e >= 1})
            gain = mean.loc[E] - mean.loc[E-1] if E > 1 else float('nan')
            out.append(f"| {Path(f).stem} | {m} | {seeds} | {int(g.train_images.iloc[0])} | "
                       + ', '.join(f'{e}: {mean.loc[e]:.1f}' for e in pts) + f" | {last} | {gain:+.2f} | {g.seconds.mean():.0f} |")
    return '\n'.join(out)


def main(argv=None):
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == '--summary':
        print(summary(sys.argv[2:])); return
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--arch', default='resnet18')
    p.add_argument('--epochs', type=int, default=40)
    p.add_argument('--batch-size', type=int, default=None)
    p.add_argument('--lr', type=float, default=None)
    p.add_argument('--seeds', type=int, nargs='+', default=[0])
    p.add_argument('--models', nargs='+', default=['old', 'new'], choices=['old', 'new'])
    p.add_argument('--threads', type=int, default=None)
    p.add_argument('--augment', action='store_true', help="train with the stand-in's augmentation (the tiny recipe has none)")
    p.add_argument('--embedding', default=None, choices=['linear', 'mlfct'], help="the embedding block (default: the recipe's)")
    p.add_argument('--out', required=True)
    knob_args(p)
    a = p.parse_args(argv)
    if a.threads: torch.set_num_threads(a.threads)
    from compatrepro.runtime import seed_everything
    from compatrepro.data import get_split
    from compatrepro.features import extract_features
    from compatrepro.standin import standin_config
    from compatrepro.metrics import retrieval_metrics
    from compatrepro.specs import backbone_spec
    from compatrepro.train import TrainingInterrupted, initial_model, train_backbone

    knobs = {f.name: (tuple(v) if isinstance(v, list) else v) for f in fields(standin_config('tiny'))
             if (v := getattr(a, f.name, None)) is not None}
    cfg = replace(standin_config('tiny'), **knobs)
    splits = {'old': 'imagenet-500', 'new': 'imagenet-1k'}
    ev = get_split('imagenet-1k', 'eval', 'tiny', config=cfg)
    labels = torch.as_tensor(ev.labels)
    out = Path(a.out); out.parent.mkdir(parents=True, exist_ok=True)
    meta = dict(arch=a.arch, epochs=a.epochs, augment=a.augment, **({'embedding': a.embedding} if a.embedding else {}), **{k: json.dumps(v) for k, v in knobs.items()})
    rows = []
    print(f"stand-in {knobs or 'as tiny'}; {len(ev)} evaluation images of {len(labels.unique())} classes; {a.arch}, {a.epochs} epochs")

    def top1(fq, fg=None):
        return retrieval_metrics(fq, fq if fg is None else fg, labels, labels, metrics=('top1',))['top1']

    for seed in a.seeds:
        final = {}
        for name in a.models:
            ds = get_split(splits[name], 'train', 'tiny', config=cfg)
            over = dict(arch=a.arch, epochs=a.epochs, augment=a.augment)
            if a.batch_size: over['batch_size'] = a.batch_size
            if a.lr: over['lr'] = a.lr
            if a.embedding: over['embedding'] = a.embedding
            spec = backbone_spec(splits[name], 'tiny', seed, **over)
            with tempfile.TemporaryDirectory() as tmp:
                ck = Path(tmp)/'ckpt.pt'
                for e in range(1, a.epochs + 1):
                    t0 = time.time()
                    try: train_backbone(spec, ds, checkpoint=ck, stop_after=e, device='cpu', show_progress=False)
                    except TrainingInterrupted: pass
                    sec = time.time() - t0
                    seed_everything(seed)
                    model = initial_model(spec, ds)
                    model.load_state_dict(torch.load(ck, map_location='cpu', weights_only=False)['model'])
                    f = extract_features(model, ev, device='cpu', show_progress=False)['features']
                    rows.append(dict(seed=seed, model=name, epoch=e, top1=round(top1(f), 2), seconds=round(sec, 1),
                                     train_images=len(ds), **meta))
                    print(f"seed {seed} {name:3s} epoch {e:3d}/{a.epochs}: top-1 {rows[-1]['top1']:6.2f}  ({sec:5.1f} s)", flush=True)
                final[name] = f
            with open(out, 'w', newline='') as fh:   # after every model: an interrupted run keeps what it measured
                w = csv.DictWriter(fh, fieldnames=list(rows[0])); w.writeheader(); w.writerows(rows)
        if {'old', 'new'} <= set(final):
            v = top1(final['new'], final['old'])
            rows.append(dict(seed=seed, model='new/old', epoch=a.epochs, top1=round(v, 2), seconds=0, train_images=0, **meta))
            print(f"seed {seed} new/old (independent): top-1 {v:.2f} (chance {100/len(labels.unique()):.2f})")
    with open(out, 'w', newline='') as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0])); w.writeheader(); w.writerows(rows)
    print('wrote', out)


if __name__ == '__main__':
    main()
