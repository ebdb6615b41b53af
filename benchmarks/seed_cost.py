"""What would one seed of the four papers cost under a candidate recipe? A projection from the committed records.

Each tiny run records the seconds it took to make every artifact it made (`made` in `results/tiny/runs/*.json`; an
artifact another notebook made first is read from the cache and counted once). Summed over a seed's runs, by kind,
they say where a seed's hours go at the library's recipe. A candidate backbone recipe changes the backbones' cost by
about the ratio of its old and new models' CPU at their schedule E to the library's (the recipe screen's
`cpu_seconds`, mean over its seeds); the transformations, features and the runs' own computing (a run's duration less
its artifacts' seconds) are taken as they are, except RM's psi/rho, which the records made at the epochs of
`epochs_rm` and which now train each dataset's `RMData.standin_epochs` (the doubling ladder's): their seconds are
scaled by that ratio, each transformation's objective and splits read from the log lines of the run's executed
notebook. A projection, not a measurement: the records' seconds are wall seconds of runs made two at a time, and the
ratio is measured on one pair (the ImageNet stand-in's ResNet-10s); the re-run measures the real cost.

    python benchmarks/seed_cost.py benchmarks/recipe_screen/*.csv
"""
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
RUNS = ROOT / 'results' / 'tiny' / 'runs'
NOTEBOOKS = ROOT / 'results' / 'tiny' / 'notebooks'
TRAINING = re.compile(r'training the (\S+) transformation (\S+) -> (\S+) \(tiny')
MADE = re.compile(r'made \S+ transformation \(transformation (\w+)\)')
LIBRARY = 'library-e48'   # the recipe screen's row of the library's own recipe


def rm_epoch_cut(notebook: Path) -> dict:
    """{'transformation/<key>': today's epochs over the recorded ones} of the RM psi/rho that the executed `notebook`
    made on a dataset whose stand-in epochs the ladder set (`RMData.standin_epochs`)."""
    from compatrepro.rm import RM_DATASETS
    from compatrepro.specs import RM_OBJECTIVES, STANDIN_TRANSFORMATION_RECIPES
    recorded = STANDIN_TRANSFORMATION_RECIPES['tiny']['epochs_rm']
    today = {(d.old, d.new): d.standin_epochs for d in RM_DATASETS.values() if d.standin_epochs}
    text = ''.join(''.join(o.get('text', '')) for c in json.loads(notebook.read_text())['cells']
                   for o in c.get('outputs', []))
    cut, last = {}, None
    for line in text.splitlines():
        if m := TRAINING.search(line): last = m.groups()
        elif (m := MADE.search(line)) and last:
            objective, old, new = last
            if objective in RM_OBJECTIVES and (old, new) in today:
                cut[f'transformation/{m.group(1)}'] = today[(old, new)] / recorded
            last = None
    return cut


def record_hours(runs: Path = RUNS, notebooks: Path = NOTEBOOKS) -> dict:
    """{artifact kind: hours of one seed}, each artifact counted once per seed, the mean over the seeds recorded; RM's
    psi/rho at today's stand-in epochs (`rm_epoch_cut` of the run's executed notebook, where there is one); and
    'evaluation': the runs' durations less what they spent making artifacts."""
    made, evaluation, seeds = defaultdict(dict), defaultdict(float), set()
    for p in sorted(runs.glob('*.json')):
        r = json.loads(p.read_text())
        seeds.add(r['seed'])
        nb = notebooks / f'{p.stem}.ipynb'
        cut = rm_epoch_cut(nb) if nb.exists() else {}
        made_here = 0.
        for key, seconds in (r.get('made') or {}).items():
            if seconds is None: continue
            made_here += seconds
            made[r['seed']].setdefault(key, seconds * cut.get(key, 1.))
        evaluation[r['seed']] += (r.get('duration') or made_here) - made_here   # the notebook's own computing
    hours = defaultdict(float)
    for seed in seeds:
        for key, seconds in made[seed].items():
            hours[key.split('/')[0]] += seconds / 3600 / len(seeds)
        hours['evaluation'] += evaluation[seed] / 3600 / len(seeds)
    return dict(hours)


def backbone_ratios(paths) -> pd.Series:
    """{candidate: its old and new models' CPU at E over the library's}, each the mean over the candidate's seeds; a
    candidate whose models at E came from another's cache, or that screened one of them only, is left out."""
    d = pd.concat([pd.read_csv(p) for p in paths], ignore_index=True)
    d = d[(d.pair == 'imagenet') & d.model.isin(['old/old', 'new/new'])]
    at_E = d[d.epochs == d.groupby('candidate').epochs.transform('min')]
    at_E = at_E[at_E.groupby('candidate').cpu_seconds.transform('min') > 0]   # not read from another's cache
    at_E = at_E[at_E.groupby('candidate').model.transform('nunique') == 2]   # both models screened
    cpu = at_E.groupby(['candidate', 'seed']).cpu_seconds.sum().groupby('candidate').mean()
    return (cpu / cpu[LIBRARY]).sort_values()


def table(paths, runs: Path = RUNS) -> str:
    "The markdown table docs/standin_regime.md shows: hours of one thread per seed, by candidate."
    h = record_hours(runs)
    other = sum(v for k, v in h.items() if k != 'backbone')
    out = ['| candidate | backbones\' CPU over the library\'s | backbones, h | the rest, h | one seed, h |',
           '|---|---|---|---|---|']
    for cand, ratio in backbone_ratios(paths).items():
        out.append(f"| {cand} | {ratio:.2f} | {h['backbone'] * ratio:.1f} | {other:.1f} | "
                   f"{h['backbone'] * ratio + other:.1f} |")
    return '\n'.join(out)


if __name__ == '__main__':
    if len(sys.argv) < 2: sys.exit(__doc__)
    print({k: round(v, 2) for k, v in record_hours().items()})
    print(table(sys.argv[1:]))
