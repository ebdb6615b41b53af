"""Images per second of the tiny recipe's training step (`backbone_spec('imagenet-1k', 'tiny')`: its backbone, batch,
optimiser and label-smoothed cross-entropy, on the Glyphs stand-in's ImageNet-1k training set) on this machine's CPU,
and what changes it:

- the real data path (`iter_batches`: the stand-in's uint8 tensors, augmented and normalised per batch, inside the
  timed loop) against the same model fed synthetic tensors made beforehand (what the data path costs);
- 1 thread against all cores, channels-last, and optionally `torch.compile` (`--compile`: compilation takes minutes);
- two 1-thread processes at once against one process with all threads (what `compatrepro reproduce --jobs 2
  --threads 1` does on two cores).

It prints images per second and ratios against the 1-thread baseline. Each variant runs in its own process, after
`--warmup` steps, for `--steps` steps:

    python benchmarks/bench_tiny_train.py --steps 60
    python benchmarks/bench_tiny_train.py --steps 60 --width 16     # a candidate recipe's width
"""
import argparse, json, os, subprocess, sys, time


def recipe_spec(width: int | None = None):
    "The tiny recipe's ImageNet-1k backbone spec, at `width` if given (a candidate recipe's)."
    from compatrepro.specs import backbone_spec
    return backbone_spec('imagenet-1k', 'tiny', **({} if width is None else {'width': width}))


def one(variant: str, threads: int, steps: int, warmup: int, width: int | None = None) -> float:
    "Images per second of `variant` in this process."
    import torch
    torch.set_num_threads(threads)
    from compatrepro.runtime import seed_everything
    from compatrepro.data import get_split
    from compatrepro.loaders import iter_batches
    from compatrepro.train import _make_optimizer, initial_model
    from compatrepro import losses as L
    spec = recipe_spec(width)
    ds = get_split('imagenet-1k', 'train', 'tiny')
    seed_everything(0)
    m = initial_model(spec, ds).train()             # as train_backbone builds it (the recipe's width)
    opt = _make_optimizer(spec, m.parameters())    # the recipe's (SGD with momentum and weight decay today)
    def real_batches():   # the data path, timed with the steps
        for epoch in range(10**6):
            for x, y in iter_batches(ds, spec.batch_size, epoch, 0, 'cpu', train=spec.augment):
                yield (x.contiguous(memory_format=torch.channels_last) if cl else x), y
    cl = variant.startswith('channels-last')
    if variant.endswith('synthetic'):
        x0, y0 = next(real_batches())
        fixed = [(torch.randn_like(x0), y0) for _ in range(warmup + steps)]
        batches = iter(fixed)
    else: batches = real_batches()
    if cl: m = m.to(memory_format=torch.channels_last)
    def step(x, y):
        loss = L.label_smoothing_ce(m.head(m(x), y).float(), m.head.targets(y), eps=spec.label_smoothing)
        opt.zero_grad(set_to_none=True); loss.backward(); opt.step()
        return loss.detach()
    if variant == 'compile': step = torch.compile(step)
    for _ in range(warmup): step(*next(batches))
    t0 = time.perf_counter()
    for _ in range(steps): step(*next(batches))
    return steps*spec.batch_size/(time.perf_counter() - t0)


def run(variant, threads, a, n_procs=1):
    "Start `n_procs` processes of `variant` at once; their images per second."
    cmd = [sys.executable, __file__, '--one', variant, '--threads', str(threads), '--steps', str(a.steps), '--warmup', str(a.warmup)]
    cmd += [] if a.width is None else ['--width', str(a.width)]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    ps = [subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env) for _ in range(n_procs)]
    return [float(p.communicate()[0].strip().splitlines()[-1]) for p in ps]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--steps', type=int, default=60); ap.add_argument('--warmup', type=int, default=5)
    ap.add_argument('--compile', action='store_true', help='also time torch.compile (minutes of compilation)')
    ap.add_argument('--out', default=None, help='write the numbers to this JSON file')
    ap.add_argument('--width', type=int, default=None, help="the ResNet's base width (default: the recipe's)")
    ap.add_argument('--one', default=None, help=argparse.SUPPRESS); ap.add_argument('--threads', type=int, default=1, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        print(one(a.one, a.threads, a.steps, a.warmup, a.width)); return
    cores = os.cpu_count() or 1
    rows = [('real batches, 1 thread', run('real', 1, a)[0]),
            ('synthetic tensors, 1 thread', run('synthetic', 1, a)[0]),
            ('channels-last, 1 thread', run('channels-last', 1, a)[0]),
            ('channels-last, synthetic tensors, 1 thread', run('channels-last-synthetic', 1, a)[0]),
            (f'real batches, {cores} threads', run('real', cores, a)[0])]
    if a.compile: rows.append(('torch.compile, 1 thread', run('compile', 1, a)[0]))
    together = run('real', 1, a, n_procs=cores)
    rows.append((f'{cores} one-thread processes at once (sum)', sum(together)))
    rows.append((f'{cores} one-thread channels-last processes at once (sum)',
                 sum(run('channels-last', 1, a, n_procs=cores))))   # how compatrepro reproduce would run them
    base = rows[0][1]
    import torch
    spec = recipe_spec(a.width)
    print(f'tiny recipe training step, {spec.arch} width {spec.width}, batch {spec.batch_size}, {spec.optimizer}, '
          f'torch {torch.__version__}, {cores} cores')
    for name, v in rows: print(f'{name:42s} {v:8.1f} img/s   {v/base:5.2f}x')
    print(f'{cores} one-thread processes / one {cores}-thread process: {sum(together)/dict(rows)[f"real batches, {cores} threads"]:.2f}x')
    if a.out:
        with open(a.out, 'w') as f: json.dump({name: round(v, 1) for name, v in rows}, f, indent=1)


if __name__ == '__main__':
    main()
