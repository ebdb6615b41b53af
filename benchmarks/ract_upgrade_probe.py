"""Why is RACT's stand-in upgrade no upgrade? The pre-trained start of the deeper network, measured.

RACT's new R101 (the stand-in's ResNet-18) retrieves GLDv2-test's unseen landmarks no better than the old R50 (the
ResNet-10) at 10, 20 or 40 epochs of fine-tuning (`family_identities.py --family gldv2`, docs/standin_regime.md).
Both were fine-tuned from the stand-in's pre-trained model of their architecture (`ract_pretrained`: `glyph-pretrain`,
seed 0), trained for `TINY_EPOCHS_BY_ARCH`'s epochs: 48 for the ResNet-10, 24 for the ResNet-18. This probe gives the
ResNet-18 each start, of its own 24 epochs and of the ResNet-10's 48 (`backbone_spec`'s `steps_like`), and
fine-tunes RACT's old and new models from each start as `41_ract_hot_refresh` does (expansion allocation,
independent models; `ract_spec`'s `pretrained=`), on seeds 0-2; it records every model's own retrieval on the three
test sets, the pre-trained models' too:

    python benchmarks/ract_upgrade_probe.py --seeds 0 1 2 --cache ~/.cache/compatrepro \\
        --out benchmarks/ract_upgrade_probe.csv

Each start is a spec of its own (its epochs differ), so both share the library's cache. Since 2026-11-30
`ract_pretrained` gives every architecture the ResNet-10's steps (`17_ract`): the second start is the library's.
`--summary FILE` prints the table docs/standin_regime.md shows."""
import sys

import pandas as pd

from family_identities import ract_test_retrieval
from probe_args import apply_probe_arguments, probe_arguments

# start -> the ResNet-18 pre-training's `steps_like` (backbone_spec's: that architecture's epochs)
STARTS = {'ResNet-18 start of 24 epochs': 'resnet18', "ResNet-18 start with the ResNet-10's epochs": 'resnet10'}


def probe_seed(seed: int, scale: str, start: str) -> list:
    "RACT's old R50 and new R101 of the expansion allocation on `seed`, fine-tuned from `start`; the starts too."
    from compatrepro.ract import RACT_ALLOCATIONS, RACT_TESTS, ract_spec
    from compatrepro.runtime import ExperimentParams, RunContext, set_context
    from compatrepro.specs import backbone_spec

    set_context(RunContext.from_env(device='cpu', progress=False))
    P = ExperimentParams(seed=seed, scale=scale, device='cpu')
    # the ResNet-18's start with `start`'s epochs; the ResNet-10's is ract_pretrained's
    start_r18 = backbone_spec('glyph-pretrain', scale, seed=0, arch='resnet18', steps_like=STARTS[start])
    old_split, new_split = RACT_ALLOCATIONS['expansion']
    models = {'old R50': ract_spec(P, old_split, 'R50'),
              'new R101': ract_spec(P, new_split, 'R101', pretrained=start_r18)}
    models |= {f'start of {k}': m.pretrained for k, m in models.items()}
    return [dict(start=start, seed=seed, model=name, epochs=spec.epochs, test=test, **ract_test_retrieval(spec, test))
            for name, spec in models.items() for test in RACT_TESTS]


def summary(path) -> str:
    "Per start, model and test: top-1 and the test's metric, the mean over seeds and each seed's."
    d = pd.read_csv(path)
    out = ['| start | model | test | seeds | top-1 (per seed) | metric (per seed) |', '|---|---|---|---|---|---|']
    for (start, model, test), g in d.groupby(['start', 'model', 'test'], sort=False):
        g = g.sort_values('seed')
        out.append(f"| {start} | {model} | {test} | {','.join(map(str, g.seed))} | "
                   f"{g.top1.mean():.1f} ({'/'.join(f'{x:.1f}' for x in g.top1)}) | {g.metric.iloc[0]} "
                   f"{g.value.mean():.1f} ({'/'.join(f'{x:.1f}' for x in g.value)}) |")
    return '\n'.join(out)


def main(argv=None):
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == '--summary':
        print(summary(sys.argv[2])); return
    a = probe_arguments(__doc__, 'benchmarks/ract_upgrade_probe.csv').parse_args(argv)
    apply_probe_arguments(a)
    rows = []
    for start in STARTS:
        for s in a.seeds:
            rows += probe_seed(s, a.scale, start)
            pd.DataFrame(rows).to_csv(a.out, index=False, float_format='%.4f')   # each finished seed is kept
    print(summary(a.out))


if __name__ == '__main__':
    main()
