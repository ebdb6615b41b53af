"""Where does a doubled model move: on the classes the old model trained on, or on the ones it never saw?

On FastFill's ImageNet pair the old model trains on the first half of the stand-in's ImageNet classes and is
evaluated, as the new model is, on the evaluation images of all of them (query = gallery). The recipe screen's
doubling test reads one number over both halves. This probe splits it: for a screened candidate (its CSV from
`standin_regime.py --pairs imagenet --double`, whose recipe and stand-in knobs it reads) it takes the old and new
models at E and 2E from the candidate's cache and gives top-1 and mAP over the queries of the old model's classes
(`seen`) and of the others (`unseen`), the gallery always whole:

    python benchmarks/old_seen_unseen.py benchmarks/recipe_screen/w16-midhard-e96-s0.csv --cache /tmp/midhard.cache \\
        --out benchmarks/old_seen_unseen/w16-midhard-e96-s0.csv

A model missing from the cache is trained (the candidate's CPU again); the models are the screen's own, so their
moves over both halves are the screen's.
"""
import argparse, json, os
from dataclasses import fields, replace
from pathlib import Path

import pandas as pd

from standin_regime import PAIRS, doubled, pair_specs, schedules   # this folder is on the path


def seen_unseen_rows(csv: Path, scale: str = 'tiny') -> list[dict]:
    "Per seed, model (old, new) and schedule (E, 2E) of the candidate's ImageNet rows: top-1 and mAP by class half."
    from compatrepro import standin
    from compatrepro.data import get_split
    from compatrepro.metrics import retrieval_metrics
    from compatrepro.pipeline import get_features
    from compatrepro.specs import BackboneSpec

    d = pd.read_csv(csv)
    d = d[(d.pair == 'imagenet') & d.model.isin(['old/old', 'new/new'])]
    cand, recipe, knobs = d.candidate.iloc[0], json.loads(d.recipe.iloc[0]), json.loads(d.knobs.iloc[0])
    unknown = set(recipe) - {f.name for f in fields(BackboneSpec)}
    if unknown:
        raise SystemExit(f"{csv}: the recipe has levers that patch the trainer ({sorted(unknown)}); this probe "
                         "rebuilds only BackboneSpec fields")
    knobs = {k: tuple(v) if isinstance(v, list) else v for k, v in knobs.items()}
    standin.STANDIN_CONFIGS[scale] = replace(standin.STANDIN_CONFIGS[scale], **knobs)   # this process only
    old_split, _, ev, _ = PAIRS['imagenet']
    rows = []
    for seed in sorted(d.seed.unique()):
        specs = pair_specs('imagenet', scale, int(seed), ['old', 'new'], recipe)
        seen = set(get_split(old_split, 'train', scale, seed=specs['old'].data_seed).labels.tolist())
        for name in sorted({m.split('/')[0] for m in d[d.seed == seed].model}, reverse=True):   # old, new
            for spec in (specs[name], doubled(specs[name])):
                f = get_features(spec, ev, 'eval')
                per = retrieval_metrics(f['features'], f['features'], f['labels'], f['labels'],
                                        metrics=('top1', 'mAP'), per_query=True)
                is_seen = pd.Series(list(map(int, f['labels']))).isin(seen).to_numpy()
                for half, mask in (('seen', is_seen), ('unseen', ~is_seen), ('all', is_seen | ~is_seen)):
                    rows.append(dict(candidate=cand, seed=int(seed), model=f'{name}/{name}', epochs=spec.epochs,
                                     classes=half, queries=int(mask.sum()), top1=round(per.top1[mask].mean(), 2),
                                     mAP=round(per.mAP[mask].mean(), 2)))
    return rows


def summary(paths) -> str:
    """Markdown: per candidate, model and class half, top-1 / mAP at E and 2E (mean over seeds), the mean move and the
    largest on any seed (top-1 or mAP)."""
    d = pd.concat([pd.read_csv(p) for p in paths], ignore_index=True)
    out = ['| candidate | model | classes | seeds | top-1 / mAP at E | at 2E | mean move, top-1 / mAP | largest move |',
           '|---|---|---|---|---|---|---|---|']
    for (cand, model, half), g in d.groupby(['candidate', 'model', 'classes'], sort=False):
        _, a, b = schedules(g)
        mv = b[['top1', 'mAP']] - a[['top1', 'mAP']]
        out.append(f"| {cand} | {model} | {half} | {','.join(map(str, sorted(a.index)))} | "
                   f"{a.top1.mean():.1f} / {a.mAP.mean():.1f} | {b.top1.mean():.1f} / {b.mAP.mean():.1f} | "
                   f"{mv.top1.mean():+.1f} / {mv.mAP.mean():+.1f} | {mv.abs().max().max():.1f} |")
    return '\n'.join(out)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('screen', nargs='?', help="a candidate's CSV of standin_regime.py (ImageNet pair, --double)")
    p.add_argument('--summary', nargs='+', metavar='CSV', help="print the table of this probe's CSVs and stop")
    p.add_argument('--cache', help="the candidate's artifact cache")
    p.add_argument('--out')
    p.add_argument('--smoke', action='store_true', help='the screen ran at the smoke scale (a check that this runs)')
    a = p.parse_args(argv)
    if a.summary:
        print(summary(a.summary)); return
    if not (a.screen and a.cache and a.out):
        p.error('give a screen CSV, --cache and --out (or --summary CSV...)')
    os.environ['COMPATREPRO_CACHE'] = str(Path(a.cache).resolve())
    os.environ.setdefault('COMPATREPRO_PROGRESS', '0')
    rows = seen_unseen_rows(Path(a.screen), 'smoke' if a.smoke else 'tiny')
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(a.out, index=False)
    print(summary([a.out]))


if __name__ == '__main__':
    main()
