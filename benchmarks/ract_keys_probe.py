"""Does it matter that OpenCompatible's ra-comp gives the new-to-new keys no gradient?

The loss conformance (docs/conformance.md) found one difference in RACT's eq. 6: with `gather_all`, its config's
setting, OpenCompatible takes the keys phi_new(k) of the new-to-new negatives from `torch.distributed.all_gather`,
which carries no gradient, so only the anchor phi_new(x) learns from them; the package differentiates through the
keys, as eq. 6 is written. This script trains RACT's 'ours' (ra-comp) new model both ways on 41's specs (R50 -> R50,
each data allocation) and measures the hot-refresh curve on each test set in 41's random order:

- the package's reading, from the artifact cache as `41_ract_hot_refresh` trains it;
- OpenCompatible's, trained on a scratch copy of the cache with `compatrepro.train.ract_keys` returning the batch's
  keys detached (which gives OpenCompatible's gradient exactly: `tests/test_loss_conformance.py`).

'vanilla' (comp, eq. 5, whose keys are old features and carry no gradient either way) is measured beside them.

    python benchmarks/ract_keys_probe.py --seeds 0 1 2 --out benchmarks/ract_keys_probe.csv

Rows: seed, allocation, test, model, reading, the curve's mean metric and mean NFR@1, and the metric at 0 % and 100 %.
The models come from the artifact cache ($COMPATREPRO_CACHE; trained there first: a few minutes a seed)."""

import shutil, tempfile
from contextlib import contextmanager
from pathlib import Path

from probe_args import apply_probe_arguments, probe_arguments, probe_seeds

PACKAGE, AUTHORS = 'keys with gradient (package, eq. 6)', 'keys without gradient (OpenCompatible, gather_all)'


@contextmanager
def detached_keys():
    "While training: RACT's keys are the batch's features without gradient, as OpenCompatible's all_gather gives them."
    import compatrepro.train as T

    real = T.ract_keys
    T.ract_keys = lambda phi_new, phi_old, labels: (phi_new.detach(), phi_old, labels)
    try:
        yield
    finally:
        T.ract_keys = real


def curve_rows(curves: dict, metric: str, **where) -> list:
    return [
        dict(
            **where,
            model=m,
            **{
                f'mean {metric}': c[metric].mean(),
                'mean NFR@1': c['NFR@1'].mean(),
                f'{metric} at 0%': c[metric].iloc[0],
                f'{metric} at 100%': c[metric].iloc[-1],
            },
        )
        for m, c in curves.items()
    ]


def probe_seed(seed: int, scale: str, allocations) -> list:
    from compatrepro.runtime import ExperimentParams, RunContext, current_context, set_context
    from compatrepro.specs import backbone_key
    from compatrepro.ract import RACT_TESTS, ract_random_curves, ract_specs

    P = ExperimentParams(seed=seed, scale=scale, device='cpu')
    set_context(RunContext.from_env(device='cpu', progress=False))
    main = current_context().cache.root
    specs = {alloc: ract_specs(P, alloc, 'R50', ('vanilla', 'ours')) for alloc in allocations}  # 41's R50 -> R50
    rows = []

    def measure(models: list, reading: str):
        for alloc, S in specs.items():
            for test, (_, metric) in RACT_TESTS.items():
                curves, _ = ract_random_curves(S, test, P, models)
                rows.extend(curve_rows(curves, metric, seed=seed, allocation=alloc, test=test, reading=reading))

    measure(['vanilla', 'ours'], PACKAGE)
    with tempfile.TemporaryDirectory() as tmp:  # one copy of the cache without 'ours' and without any features
        scratch = Path(tmp) / 'cache'
        shutil.copytree(main, scratch, ignore=shutil.ignore_patterns('features', 'checkpoints', 'locks'))
        set_context(RunContext(cache=scratch, device='cpu', progress=False))
        for S in specs.values():
            current_context().cache.path('backbone', backbone_key(S['ours'])).unlink()
        with detached_keys():
            measure(['ours'], AUTHORS)
        set_context(RunContext(cache=main, device='cpu', progress=False))
    for r in rows:
        print(
            f"seed {seed} {r['allocation']} {r['test']:10s} {r['model']:7s} {r['reading'][:22]:22s} "
            + ' '.join(f'{k} {v:.2f}' for k, v in r.items() if k.startswith(('mean', 'mAP', 'rmAP'))),
            flush=True,
        )
    return rows


def main(argv=None):
    from compatrepro.ract import RACT_ALLOCATIONS

    ap = probe_arguments(__doc__, 'benchmarks/ract_keys_probe.csv')
    ap.add_argument('--allocations', nargs='+', default=list(RACT_ALLOCATIONS), choices=list(RACT_ALLOCATIONS))
    a = ap.parse_args(argv)
    apply_probe_arguments(a)
    probe_seeds(a, probe_seed, a.allocations)


if __name__ == '__main__':
    main()
