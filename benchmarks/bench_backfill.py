"""Benchmark: compatrepro's backfilling-curve engine against the FCT authors' evaluation functions.

Runs, in one process and on the same synthetic features, an 11-point backfilling curve (top-1, top-5, mAP)
with `compatrepro.backfill.backfill_curve` and with apple/ml-fct's `utils/eval_utils.py` (`cmc` and `mean_ap`,
called once per fraction on the materialised mixed gallery, distances by its `l2_distance_matrix`), checks that
the numbers agree and prints the time ratio. The anchor is read from a checkout outside this repository:

    git --git-dir=<mirror of apple/ml-fct> archive HEAD | tar -x -C /tmp/ml-fct
    python benchmarks/bench_backfill.py --anchor /tmp/ml-fct --n 10000
    python benchmarks/bench_backfill.py --n 50000            # engine only: the anchor cannot hold 50k x 50k

Peak memory is the process's maximum resident set size (resource.getrusage), read after the engine ran and
before the anchor runs. This is a benchmark, not a test: nothing here is asserted in CI.
"""
from __future__ import annotations
import argparse, importlib.util, os, resource, sys, time
from pathlib import Path

import numpy as np
import torch

os.environ.setdefault('COMPATREPRO_PROGRESS', '0')
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from compatrepro.backfill import backfill_curve, step_curve, random_order, backfill_counts  # noqa: E402


def synthetic_features(n: int, d: int, n_classes: int, seed: int = 0):
    "Gaussian classes: new = class mean + noise; old (transformed) = new + a per-item error (float32)."
    rng = np.random.default_rng(seed)
    mu = rng.normal(size=(n_classes, d)).astype(np.float32)
    y = rng.integers(0, n_classes, n)
    new = mu[y] + 1.8 * rng.normal(size=(n, d)).astype(np.float32)
    old = new + 1.8 * rng.gamma(1.0, 1.0, size=(n, 1)).astype(np.float32) * rng.normal(size=(n, d)).astype(np.float32)
    return new.astype(np.float32), old.astype(np.float32), y


def peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20   # Linux: KiB


def load_anchor(path: str):
    "Import only ml-fct's utils/eval_utils.py (it needs numpy, torch, sklearn, tqdm)."
    f = Path(path) / 'utils' / 'eval_utils.py'
    if not f.exists(): sys.exit(f"--anchor {path}: no utils/eval_utils.py there; pass an apple/ml-fct checkout")
    spec = importlib.util.spec_from_file_location('mlfct_eval_utils', f)
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
    return mod


def run_anchor(ev, new, old, y, order, fractions):
    q = torch.from_numpy(new); labels = torch.from_numpy(y)
    rows = []
    for k in backfill_counts(fractions, len(new)):
        g = old.copy(); g[order[:k]] = new[order[:k]]
        distmat = ev.l2_distance_matrix(q, torch.from_numpy(g))
        c = ev.cmc(distmat, query_ids=labels, gallery_ids=labels, topk=5, single_gallery_shot=False,
                   first_match_break=True)
        m = ev.mean_ap(distmat, query_ids=labels, gallery_ids=labels)
        rows.append((100 * c[0], 100 * c[4], 100 * m))
        del distmat
    return np.array(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--anchor', help='path of an apple/ml-fct checkout (omit to time the engine only)')
    ap.add_argument('--n', type=int, default=10_000, help='query = gallery size')
    ap.add_argument('--d', type=int, default=128)
    ap.add_argument('--per-class', type=int, default=50, help='items per class (ImageNet val: 50)')
    ap.add_argument('--fractions', type=int, default=11)
    ap.add_argument('--device', default='cpu')
    ap.add_argument('--threads', type=int, default=None, help='torch CPU threads (default: torch default)')
    ap.add_argument('--block-bytes', type=int, default=None, help='COMPATREPRO_BLOCK_BYTES for the engine')
    ap.add_argument('--repeat', type=int, default=1, help='time the engine this many times and keep the fastest '
                    '(the anchor runs once: it takes minutes)')
    ap.add_argument('--steps', action='store_true', help='also time top-1/flips at every one of the n+1 steps')
    a = ap.parse_args()
    if a.threads: torch.set_num_threads(a.threads)
    if a.block_bytes: os.environ['COMPATREPRO_BLOCK_BYTES'] = str(a.block_bytes)
    new, old, y = synthetic_features(a.n, a.d, max(2, a.n // a.per_class))
    order = random_order(a.n, 0); fr = np.linspace(0, 1, a.fractions)
    print(f"n = {a.n}, d = {a.d}, classes = {max(2, a.n // a.per_class)}, fractions = {a.fractions}, device = {a.device}, "
          f"torch threads = {torch.get_num_threads()}, torch {torch.__version__}")
    dev = torch.device(a.device)
    tn, to = torch.from_numpy(new).to(dev), torch.from_numpy(old).to(dev)
    if dev.type == 'cuda':   # warm-up (CUDA context, kernels)
        backfill_curve(tn[:256], to, tn, y[:256], y, order, fr, query_is_gallery=False); torch.cuda.synchronize()
    times = []
    for _ in range(a.repeat):
        t0 = time.perf_counter()
        ours = backfill_curve(tn, to, tn, y, y, order, fr, metrics=('top1', 'top5', 'mAP'), distance='l2')
        if dev.type == 'cuda': torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    t_ours = min(times)
    print(f"engine wall times: {', '.join(f'{t:.2f}' for t in times)} s; load average {os.getloadavg()}")
    print(f"\ncompatrepro backfill_curve: {t_ours:.2f} s for the {a.fractions}-point curve "
          f"(peak RSS so far {peak_rss_gib():.2f} GiB" +
          (f", peak CUDA memory {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB" if dev.type == 'cuda' else '') + ")")
    print(ours.round(3).to_string())
    if a.steps:
        t0 = time.perf_counter()
        sc = step_curve(tn, to, tn, y, y, order)
        if dev.type == 'cuda': torch.cuda.synchronize()
        print(f"\nstep_curve (top-1, flips at all {a.n + 1} steps): {time.perf_counter() - t0:.2f} s; "
              f"top-1 at the curve's fractions equal: {np.allclose(sc.loc[backfill_counts(fr, a.n), 'top1'], ours['top1'])}")
    if not a.anchor: return
    ev = load_anchor(a.anchor)
    t0 = time.perf_counter()
    anchor = run_anchor(ev, new, old, y, order, fr)
    t_anchor = time.perf_counter() - t0
    diff = np.abs(anchor - ours[['top1', 'top5', 'mAP']].to_numpy()).max()
    print(f"\nml-fct eval_utils (cmc + mean_ap once per fraction): {t_anchor:.1f} s; load average {os.getloadavg()}")
    print("anchor values (top1, top5, mAP):\n" + np.array2string(anchor.round(3)))
    print(f"\nmax |ours - anchor| = {diff:.2e} percentage points")
    print(f"RATIO anchor / ours = {t_anchor / t_ours:.1f}x  (n = {a.n}, {a.fractions} fractions, top1+top5+mAP)")


if __name__ == '__main__':
    main()
