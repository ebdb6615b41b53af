"""How many epochs does RM's transformation need on the stand-in? The doubling test at every rung of a ladder.

The stand-in trained RM's psi/rho for 200 epochs on every dataset (`STANDIN_TRANSFORMATION_RECIPES['tiny']['epochs_rm']`;
since this ladder, some datasets have their own, `RMData.standin_epochs`),
and that is most of a seed's cost (53's 512-d psi/rho alone is about two hours of one thread). The notebooks' own
doubling test (`rm_convergence`: the merge's AUC after the recipe's epochs and after twice as many) shows that
doubling 200 does not help on any dataset and costs up to 4 AUC points on Market. This script runs that same test,
the library's `rm_convergence` unchanged, with the recipe's epochs set in turn to each rung of `--epochs` (25, 50,
100 by default), so that a rung's "twice" is the next rung's "recipe" and comes from the cache. A rung is converged
as `doubling_check` says: each AUC moves by less than `--tolerance` (RM_CONVERGENCE_TOL, the notebooks' 0.5 point;
the regime's rule is at most 1).

    python benchmarks/rm_epochs_ladder.py --seeds 0 --datasets ImageNet-1K CIFAR-100 Market-1501 \\
        --out benchmarks/rm_epochs_ladder.csv

Rows: seed, dataset, epochs (the rung n), metric, the value at n and at 2n, their difference, converged (by
--tolerance), and the CPU seconds of the rung's new transformation (2n; the first rung also trains n and the
backbones). Rows are appended after every rung, so an interrupted run keeps what it measured. `--summary FILE` prints
the table docs/standin_regime.md shows:

    python benchmarks/rm_epochs_ladder.py --summary benchmarks/rm_epochs_ladder.csv"""

import csv, sys, time
from pathlib import Path

from probe_args import apply_probe_arguments, probe_arguments


def ladder(dataset: str, seed: int, rungs, scale: str, tol: float):
    "Yield one row per rung and metric: `rm_convergence` with the stand-in's RM epochs set to each rung in turn."
    from compatrepro import specs
    from compatrepro.runtime import ExperimentParams
    from compatrepro.rm_records import rm_convergence
    from compatrepro.rm import rm_data, rm_upgrade

    class Rows:   # the record book `rm_convergence` writes into: kept, not saved
        def add(self, *row): pass

    data, params = rm_data(dataset), ExperimentParams(seed=seed, scale=scale)
    recipe = specs.STANDIN_TRANSFORMATION_RECIPES[scale]
    c0 = time.process_time()
    up = rm_upgrade(params, data, baselines=())   # old and new backbones and their features only
    for n in rungs:
        saved = recipe['epochs_rm']
        recipe['epochs_rm'] = n   # this process only; the specs (and cache keys) say the epochs
        try:   # the dataset's own stand-in epochs (`RMData.standin_epochs`) set to the rung too
            r = rm_convergence(Rows(), 'ladder', up, data._replace(standin_epochs=n), params, tol=tol)
        finally:
            recipe['epochs_rm'] = saved
        cpu, c0 = time.process_time() - c0, time.process_time()
        for metric, row in r.iterrows():
            yield dict(seed=seed, dataset=dataset, epochs=n, metric=metric, at_n=round(float(row[f'at {n}']), 3),
                       at_2n=round(float(row[f'at {2*n}']), 3), difference=round(float(row['difference']), 3),
                       converged=bool(row['converged']), cpu_seconds=round(cpu, 1))


def summary(path) -> str:
    """A markdown table of a ladder CSV: per dataset and rung, each AUC at n -> 2n (mean over seeds, and the seeds'
    largest move), and the fewest epochs from which every measured doubling moves by at most half a point (the
    notebooks' RM_CONVERGENCE_TOL) and by at most one (the regime's rule)."""
    import pandas as pd

    d = pd.read_csv(path)
    rungs = sorted(d.epochs.unique())
    head = ['dataset', 'metric', 'seeds'] + [f'{n} -> {2*n}' for n in rungs] + ['converged from (0.5 / 1 point)']

    def converged_from(g, tol):   # the fewest epochs from which every measured doubling moves by at most tol
        moves = {n: g[g.epochs == n].difference.abs().max() for n in rungs if len(g[g.epochs == n])}
        ok = [n for n in moves if all(m <= tol for k, m in moves.items() if k >= n)]
        return str(min(ok)) if ok else 'none'

    out = ['| ' + ' | '.join(head) + ' |', '|' + '---|'*len(head)]
    for (dataset, metric), g in d.groupby(['dataset', 'metric'], sort=False):
        cells = []
        for n in rungs:
            r = g[g.epochs == n]
            cells.append(f"{r.at_n.mean():.2f} -> {r.at_2n.mean():.2f} (largest move {r.difference.abs().max():.2f})"
                         if len(r) else '')
        seeds = ','.join(map(str, sorted(g.seed.unique())))
        out.append(f"| {dataset} | {metric} | {seeds} | " + ' | '.join(cells)
                   + f" | {converged_from(g, 0.5)} / {converged_from(g, 1.0)} |")
    return '\n'.join(out)


def main(argv=None):
    if argv is None and len(sys.argv) > 2 and sys.argv[1] == '--summary':
        print(summary(sys.argv[2]))
        return
    ap = probe_arguments(__doc__, 'benchmarks/rm_epochs_ladder.csv')
    ap.add_argument('--datasets', nargs='+', default=['ImageNet-1K', 'CIFAR-100', 'Market-1501'])
    ap.add_argument('--epochs', type=int, nargs='+', default=[25, 50, 100], help='the rungs n (each trains n and 2n)')
    ap.add_argument('--tolerance', type=float, default=None, help='default: the notebooks\' RM_CONVERGENCE_TOL')
    a = ap.parse_args(argv)
    apply_probe_arguments(a)
    from compatrepro.rm import RM_CONVERGENCE_TOL

    tol = RM_CONVERGENCE_TOL if a.tolerance is None else a.tolerance
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    done = set()
    if out.exists():   # resume: skip the (seed, dataset, rung) already measured
        with open(out) as fh:
            done = {(int(r['seed']), r['dataset'], int(r['epochs'])) for r in csv.DictReader(fh)}
    for seed in a.seeds:
        for dataset in a.datasets:
            rungs = [n for n in a.epochs if (seed, dataset, n) not in done]
            for row in ladder(dataset, seed, rungs, a.scale, tol) if rungs else ():
                new = not out.exists()
                with open(out, 'a', newline='') as fh:
                    w = csv.DictWriter(fh, fieldnames=list(row))
                    if new: w.writeheader()
                    w.writerow(row)
                print(f"{dataset} seed {seed} epochs {row['epochs']:4d} -> {2*row['epochs']:4d}: {row['metric']:12s} "
                      f"{row['at_n']:7.2f} -> {row['at_2n']:7.2f} ({row['difference']:+.2f}) "
                      f"{'converged' if row['converged'] else 'moves'}  [{row['cpu_seconds']/60:.1f} min]", flush=True)


if __name__ == '__main__':
    main()
