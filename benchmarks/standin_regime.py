"""Does a stand-in regime keep the papers' premise? The acceptance test of the stand-in, from the models alone.

The four papers rest on one premise: constraining a new model to be compatible with an old one costs it some accuracy
(BCT Table 2: the paragon new*/new* above every compatible variant). This benchmark trains, for each seed, the models
of two updates with the library's own trainer and pipeline, under a candidate regime (network width, optimiser,
augmentation, epochs, and the stand-in's knobs), and checks, before any claim is looked at:

1. the independent new model's self-test is above every compatible model's self-test (BCT, RACT), top-1 and mAP;
2. old/old and new/new top-1 are at most 90 % and at least 10 points apart;
3. the independent new/old top-1 is at chance (at most three times 1/classes);
4. converged by the doubling test (`--double`): every model trained on a schedule twice as long moves by at most
   `--tolerance` points of top-1 and of mAP (a compatible model keeps its old model of the shorter schedule).

The updates: FastFill's ImageNet pair (old on ImageNet-500, new on ImageNet-1k, evaluated on ImageNet-1k's evaluation
images, query = gallery) and BCT's IMDB-Face pair (old on half of IMDB-Face's identities, new on all of them,
evaluated on the IJB-C stand-in's images, query = gallery, subjects no model trains on), with the backbones the
notebooks give them (ImageNet: ml-fct's embedding, as every FastFill notebook). The convergence table adds `arch`,
`25_fastfill_arch`'s upgrade across architectures (old ResNet-10, new ResNet-18, both on ImageNet-1k). Each candidate
gets its own artifact cache, since a changed stand-in knob is not part of the models' cache keys inside one process;
the library's own regime (no knob or recipe flag) can read the cache of `compatrepro reproduce`, whose notebooks
train the same models:

    python benchmarks/standin_regime.py --cache ~/.cache/compatrepro --seeds 0 1 2 --out benchmarks/standin_regime/library.csv

    python benchmarks/standin_regime.py --width 8 --optimizer sgd --lr 0.1 --momentum 0.9 --weight-decay 5e-4 \\
        --augment --epochs 32 --n-train 300 --clutter 3 --noise 0 0.08 --seeds 0 1 2 --double \\
        --out benchmarks/standin_regime/w8-sgd-e32.csv

`--identities N --images M` gives the pairs' family N training identities of M images each (the identity lever of
`family_identities.py`, the other families as they were; its evaluation identities as many as the stand-in's; the
knobs column says `identities` and `n_train`, the family's), e.g. the face pair at 480 of 25:

    python benchmarks/standin_regime.py --pairs imdbface --models old new --identities 480 --images 25 --double \
        --seeds 0 1 2 --cache /tmp/face-480 --out benchmarks/recipe_screen/face-480x25-e48.csv

Rows: candidate, recipe, knobs, seed, pair, model, epochs, top1, mAP, chance, train_seconds, cpu_seconds, artifact (the
model's artifact name in the cache, blank for a cross-test; rows written before 2026-12-02 have none, so the
convergence table cannot show them to be today's models). `--summary FILE...` prints the lever table (mean and per
seed, and each criterion's verdict per seed) that docs/standin_regime.md shows; `--doubling FILE...` the doubling test
per model with its CPU minutes (the recipe screen's table there).
"""
import argparse, csv, json, os, sys, time
from dataclasses import fields, replace
from pathlib import Path

import torch

from probe_args import identities_together, identity_arguments, set_family_identities
from standin_convergence import knob_args   # the stand-in's knobs as flags (this folder is on the path)

# (old split, new split, evaluation split, both backbones' keyword arguments): as 20_fastfill_imagenet (ml-fct's
# embedding), 30_bct_ijbc and 25_fastfill_arch define them, so that with the library's regime and its cache the models
# are the notebooks' own
PAIRS = {'imagenet': ('imagenet-500', 'imagenet-1k', 'imagenet-1k', {'embedding': 'mlfct'}),
         'imdbface': ('imdbface-50', 'imdbface', 'ijbc', {}),
         'arch': ('imagenet-1k', 'imagenet-1k', 'imagenet-1k', {'embedding': 'mlfct'})}
PAIR_FAMILY = {'imagenet': 'imagenet', 'imdbface': 'imdbface', 'arch': 'imagenet'}   # whose identities --identities sets
PAIR_ARCHS = {'arch': ('resnet10', 'resnet18')}   # (old, new): 25's stand-in upgrade across architectures
PREMISE_PAIRS = ('imagenet', 'imdbface')          # the premise screen's updates (--pairs' default)
COMPATIBLE = ('BCT', 'RACT')
# transformations h(phi_old) -> phi_new (FastFill's notebooks' objectives); judged by new queries against the
# transformed old gallery, the backfilling curve's start
TRANSFORMATIONS = {'FCT': 'l2', 'FastFill': 'l2+disc+uncert'}


def pair_specs(pair: str, scale: str, seed: int, models, over: dict | None = None) -> dict:
    """{model: backbone spec at the schedule E} of `models` (old, new, the notebooks' `BASELINES`) for `pair`, as its
    notebook builds them, with the candidate's recipe `over`; the old and new specs are always there (the others and
    the transformations need them)."""
    from compatrepro.specs import backbone_spec
    from compatrepro.updates import BASELINES
    old_split, new_split, _, kw = PAIRS[pair]
    archs = [{'arch': a} for a in PAIR_ARCHS.get(pair, ())] or [{}, {}]
    old = backbone_spec(old_split, scale, seed, **(kw | archs[0] | (over or {})))
    new = backbone_spec(new_split, scale, seed, **(kw | archs[1] | (over or {})))
    return {'old': old, 'new': new} | {m: replace(new, compat=BASELINES[m](old)) for m in models if m in BASELINES}


def doubled(s):
    "`s` on twice its schedule: a compatible model keeps its old model of E epochs, a transformation its backbones."
    if hasattr(s, 'milestones'):
        return replace(s, epochs=2*s.epochs, warmup_epochs=2*s.warmup_epochs, milestones=tuple(2*m for m in s.milestones))
    return replace(s, epochs=2*s.epochs, warmup_epochs=2*s.warmup_epochs,
                   freeze_bn_epoch=None if s.freeze_bn_epoch is None else 2*s.freeze_bn_epoch)


def transformation_specs(specs: dict, seed: int, models) -> dict:
    "{transformation: its spec at its schedule E} of `models`' transformations, on the backbones of E epochs."
    from compatrepro.specs import transformation_spec
    return {m: transformation_spec(specs['old'], specs['new'], TRANSFORMATIONS[m], seed=seed)
            for m in models if m in TRANSFORMATIONS}


# The convergence table (`benchmarks/convergence/`): each pair is one notebook's update, its models that notebook's own.
CONVERGENCE_NOTEBOOKS = {'imagenet': '20_fastfill_imagenet', 'imdbface': '30_bct_ijbc', 'arch': '25_fastfill_arch'}
CONVERGENCE_MODELS = {'imagenet': ['old', 'new', 'BCT', 'RACT', 'FCT', 'FastFill'],
                      'arch': ['old', 'new', 'BCT', 'RACT', 'FCT', 'FastFill'],
                      'imdbface': ['old', 'new', 'new-l2 (MSE)', 'new-LwF', 'new-β', 'new-β-kd', 'new-β-sys']}


def unmeasured(pair: str, seed: int) -> dict:
    """{name: (spec, why)} of the models that the pair's notebook trains at tiny scale and the convergence table does
    not measure, each with the reason."""
    from compatrepro.fastfill import lr_sweep, psi_grad_default, ract_sweep_lrs
    if pair == 'arch': return {}   # 25 trains no other model
    specs = pair_specs(pair, 'tiny', seed, CONVERGENCE_MODELS[pair] + ['new-l2'])
    if pair == 'imdbface':
        return {'new-l2 (eq. 3)': (specs['new-l2'], "eq. 3's l2 at lambda = 1, whose training 30 records and tests "
                                  "nothing of (it diverges on seed 0)")}
    sweep = {f'RACT {k}': (s, "RACT at another rate of FastFill's sweep (App. A.2); the RACT row is the recipe's rate")
             for k, s in lr_sweep(specs['RACT'], ract_sweep_lrs(specs['RACT'])).items() if s != specs['RACT']}
    t = transformation_specs(specs, seed, ['FastFill'])['FastFill']
    return sweep | {'FastFill (other reading)': (replace(t, psi_grad_to_h=not psi_grad_default()),
                                                 "FastFill's transformation under eq. 5's other reading; the FastFill "
                                                 "row is the default reading the claims read")}


def pair_artifacts(pair: str, seed: int) -> tuple[dict, set]:
    """({model: its artifact name} of the convergence table's models at E of `pair` on `seed`, the artifact names of
    the models its notebook trains that `unmeasured` names)."""
    models = CONVERGENCE_MODELS[pair]
    specs = {k: v for k, v in pair_specs(pair, 'tiny', seed, models).items() if k in models}
    table = artifact_names(specs | transformation_specs(specs, seed, models))
    return table, set(artifact_names({k: v[0] for k, v in unmeasured(pair, seed).items()}).values())


def measured_name(model: str) -> str:
    """The model a convergence row measures: a self-test's or cross-test's query ('BCT/BCT', 'BCT/old': BCT), a
    transformation's name ('new/FCT(old)': FCT)."""
    q, gal = model.split('/')
    return gal[:-len('(old)')] if gal.endswith('(old)') else q


def measured_models(d) -> dict:
    """{(pair, seed): {model: the artifact name it recorded at E}} of the models the convergence rows `d` doubled (a
    self-test's model, or a transformation's), from the `artifact` column that every row written since 2026-12-02
    carries; rows written before it name no artifact, so they measure models of the code of their day."""
    if 'artifact' not in d: return {}
    out = {}
    for (pair, seed), g in d[d.artifact.notna()].groupby(['pair', 'seed']):
        for model, m in g.groupby('model'):
            q, gal = model.split('/')
            if q != gal and not gal.endswith('(old)'): continue   # a cross-test trains nothing of its own
            if not (m.epochs == 2*m.epochs.min()).any(): continue   # not doubled (yet): not measured
            out.setdefault((pair, int(seed)), {})[measured_name(model)] = m[m.epochs == m.epochs.min()].artifact.iloc[0]
    return out


def todays_models(d) -> set:
    """The (pair, seed, model)s of the convergence rows `d` that measure today's model at E: the artifact name its rows
    recorded is the one `pair_artifacts` gives it now. Rows of an older recipe, or of code that changed a model's spec
    since, measure models no notebook of today uses. A session can so land part of a pair's models."""
    out = set()
    for (pair, seed), got in measured_models(d).items():
        if pair not in CONVERGENCE_NOTEBOOKS: continue
        table = pair_artifacts(pair, seed)[0]
        out |= {(pair, seed, m) for m, a in got.items() if table.get(m) == a}
    return out


def todays_pairs(d) -> set:
    "The (pair, seed)s of the convergence rows `d` that measure every model of the pair as today's (`todays_models`)."
    models = todays_models(d)
    return {(p, s) for p, s, _ in models if all((p, s, m) in models for m in CONVERGENCE_MODELS[p])}


def measured_artifacts(paths) -> set:
    """The artifact names ('backbone/<key>', 'transformation/<key>') of the models at E of the convergence CSVs
    `paths` that are today's models (`todays_models`), and, where a pair's every model is (`todays_pairs`), of the
    models its notebook trains that `unmeasured` names."""
    import pandas as pd
    d = pd.concat([pd.read_csv(p) for p in paths], ignore_index=True)
    names = {}
    def of(pair, seed):
        if (pair, seed) not in names: names[pair, seed] = pair_artifacts(pair, seed)
        return names[pair, seed]
    out = {of(pair, seed)[0][m] for pair, seed, m in todays_models(d)}
    for pair, seed in todays_pairs(d):
        out |= of(pair, seed)[1]
    return out


def unconverged(d, tolerance: float = 1.0) -> dict:
    """{(pair, seed, model): its largest move} of today's models (`todays_models`) in the convergence rows `d` that
    doubling moves by more than `tolerance` (top-1 or mAP points) in any of their rows: a compatible model's self-test
    and its test against the old model ('BCT/BCT', 'BCT/old'), a transformation's 'new/FCT(old)'."""
    out = {}
    for pair, seed, name in todays_models(d):
        mine = d[(d.pair == pair) & (d.seed == seed) & (d.model.map(measured_name) == name)]
        E = mine[mine.artifact.notna()].epochs.min()   # today's schedule: the rows that name today's artifact
        moves = [abs(b[k].iloc[0] - a[k].iloc[0]) for _, m in mine.groupby('model')
                 for a, b in [(m[m.epochs == E], m[m.epochs == 2*E])] if len(a) and len(b) for k in ('top1', 'mAP')]
        if max(moves) > tolerance: out[pair, seed, name] = max(moves)
    return out


def read_convergence(paths):
    """The rows of the convergence CSVs `paths`, with `today`: whether the row measures today's model
    (`todays_models`). A file written before rows named their artifacts is older code, whatever its rows."""
    import pandas as pd
    d = pd.concat([pd.read_csv(f).assign(named=lambda x: 'artifact' in x) for f in paths], ignore_index=True)
    current = todays_models(d)
    d['today'] = [n and (p, int(s), measured_name(m)) in current
                  for p, s, m, n in zip(d.pair, d.seed, d.model, d.named)]
    return d.drop(columns='named')


def seed_moves_table(paths, tolerance: float = 1.0) -> str:
    """Each seed's doubling of today's models (`todays_models`) in the convergence CSVs `paths`, a row per pair and
    test ('BCT/BCT', 'BCT/old', 'new/FCT(old)'): top-1 and mAP at E and at 2E on each seed, the seed's largest move
    in bold where it is over `tolerance`; what the docs' prose would otherwise quote by hand."""
    d = read_convergence(paths)
    d = d[d.today]
    seeds = sorted(d.seed.unique())
    out = [f"| pair | test | E | {' | '.join(f'seed {s}: top-1, mAP at E → 2E (move)' for s in seeds)} |",
           '|---|---|---|' + '---|'*len(seeds)]
    named = d[d.artifact.notna()]   # a cross-test ('BCT/old') names no artifact: its model's rows give E
    Es = named.groupby([named.pair, named.model.map(measured_name)]).epochs.min()
    for (pair, model), m in d.groupby(['pair', 'model'], sort=False):
        E = int(Es[pair, measured_name(model)])
        cells = []
        for s in seeds:
            a, b = m[(m.seed == s) & (m.epochs == E)], m[(m.seed == s) & (m.epochs == 2*E)]
            if a.empty or b.empty: cells.append(''); continue
            a, b = a.iloc[0], b.iloc[0]
            move = max(abs(b.top1 - a.top1), abs(b.mAP - a.mAP))
            cells.append(f"{a.top1:.1f} → {b.top1:.1f}, {a.mAP:.1f} → {b.mAP:.1f} "
                         f"({f'**{move:.1f}**' if move > tolerance else f'{move:.1f}'})")
        if any(cells):   # 'new/old' is tested at E only
            out.append(f"| {pair} | {model} | {E} | {' | '.join(cells)} |")
    return '\n'.join(out)


def coverage_table(paths, runs: Path, tolerance: float = 1.0) -> str:
    """How much of what the tiny runs train the convergence table measures: per notebook, the backbones and
    transformations its committed runs of seeds 0-2 (`runs`: results/tiny/runs) used, how many of them are in the
    table (`measured_artifacts` of `paths`), and which of those doubling still moves by more than `tolerance`
    (`unconverged`), so that each notebook says which of its measured models are short of converged."""
    import pandas as pd
    done = measured_artifacts(paths)
    d = pd.concat([pd.read_csv(p) for p in paths], ignore_index=True)
    short = {}   # {artifact: 'model (seed s)'} of the measured models not converged
    for (pair, seed, name), move in sorted(unconverged(d, tolerance).items()):
        short[pair_artifacts(pair, seed)[0][name]] = f'{name} of {pair} (seed {seed}: {move:.1f})'
    used = {}
    for f in sorted(runs.glob('*.seed[012].json')):
        arts = json.loads(f.read_text())['artifacts']
        used.setdefault(f.name.split('.seed')[0], set()).update(
            k for k in arts if k.split('/')[0] in ('backbone', 'transformation'))
    out = ['| notebook | models its runs of seeds 0-2 use | in the convergence table | not converged (largest move) | '
           'not yet |', '|---|---|---|---|---|']
    for nb, a in used.items():
        if a: out.append(f"| {nb} | {len(a)} | {len(a & done)} | {', '.join(sorted(short[k] for k in a & set(short)))} "
                         f"| {len(a - done)} |")
    every = set().union(*used.values())
    out.append(f'| **all** (a model shared by notebooks once) | **{len(every)}** | **{len(every & done)}** | '
               f'**{len(every & set(short))}** | **{len(every - done)}** |')
    return '\n'.join(out)


def artifact_names(specs: dict) -> dict:
    """{model: the artifact cache's name of its spec ('backbone/<key>', 'transformation/<key>'), as a run's provenance
    lists what it used}."""
    from compatrepro.core import spec_key
    from compatrepro.specs import TransformationSpec, backbone_key, transformation_key
    return {k: (f"transformation/{spec_key('transformation', transformation_key(s))}" if isinstance(s, TransformationSpec)
                else f"backbone/{spec_key('backbone', backbone_key(s))}") for k, s in specs.items()}


def verdicts(d, tolerance: float = 1.0) -> list[dict]:
    "Per candidate, seed and pair: the acceptance criteria (the library's `premise_criteria`), each True/False/None, and the doubling test."
    from compatrepro.runs import premise_criteria
    d = d[~d.model.str.contains('(', regex=False)]   # a transformation's rows have their own schedule
    out = []
    for (cand, seed, pair), g in d.groupby(['candidate', 'seed', 'pair'], sort=False):
        base = g[g.epochs == g.epochs.min()].set_index('model')
        v = lambda m, k: float(base.loc[m, k]) if m in base.index else float('nan')
        comp = [f'{m}/{m}' for m in COMPATIBLE if f'{m}/{m}' in base.index]
        crit = premise_criteria(v, 'new/new', 'old/old', 'new/old' if 'new/old' in base.index else None, comp,
                                ('top1', 'mAP'), float(base['chance'].iloc[0]))
        c = {(r['criterion'], r['metric']): r for r in crit}
        row = dict(candidate=cand, seed=seed, pair=pair,
                   premise=(c['premise', 'top1']['holds'] and c['premise', 'mAP']['holds']) if comp else None,
                   cost_top1=c['premise', 'top1']['margin'] if comp else float('nan'),
                   cost_mAP=c['premise', 'mAP']['margin'] if comp else float('nan'),
                   spread=c['spread', 'top1']['holds'], gap=c['spread', 'top1']['margin'],
                   chance=c['chance', 'top1']['holds'] if ('chance', 'top1') in c else None)
        longer = g[g.epochs == g.epochs.max()].set_index('model')
        if g.epochs.nunique() > 1:   # every self-test doubled: top-1 and mAP each move by at most `tolerance`
            moves = [float(longer.loc[m, k]) - v(m, k) for m in longer.index if m in base.index and m.split('/')[0] == m.split('/')[1]
                     for k in ('top1', 'mAP')]
            row['doubling_gain'] = max(moves, key=abs)
            row['converged'] = abs(row['doubling_gain']) <= tolerance
        out.append(row)
    return out


def summary(paths, tolerance: float = 1.0) -> str:
    "The lever table: per candidate and pair, each model's top-1 / mAP (mean over seeds) and the criteria per seed."
    import pandas as pd
    d = pd.concat([pd.read_csv(f) for f in paths], ignore_index=True)
    V = pd.DataFrame(verdicts(d, tolerance))
    out = ['| candidate | pair | seeds | old/old | new/new | BCT/BCT | RACT/RACT | new/old | premise (new above BCT, RACT) | '
           'old, new top-1 <= 90, >= 10 apart | new/old at chance | converged (doubling) | train min/model |', '|---|---|---|---|---|---|---|---|---|---|---|---|---|']
    if V.empty: return '\n'.join(out)   # no backbone's rows (transformations alone): nothing to judge
    for (cand, pair), g in d.groupby(['candidate', 'pair'], sort=False):
        base = g[g.epochs == g.epochs.min()]
        cell = lambda m: (lambda r: f"{r.top1.mean():.1f} / {r.mAP.mean():.1f}" if len(r) else '')(base[base.model == m])
        vv = V[(V.candidate == cand) & (V.pair == pair)]
        yes = lambda c: f"{int((vv[c] == True).sum())}/{int(vv[c].notna().sum())}"
        dbl = (f"{yes('converged')} (largest move {vv.doubling_gain.abs().max():.1f})" if 'doubling_gain' in vv and vv.doubling_gain.notna().any()
               else 'not run')
        mins = base[base.train_seconds > 0].train_seconds.mean()/60
        out.append(f"| {cand} | {pair} | {','.join(map(str, sorted(g.seed.unique())))} | {cell('old/old')} | {cell('new/new')} | "
                   f"{cell('BCT/BCT')} | {cell('RACT/RACT')} | {cell('new/old')} | {yes('premise')} (cost {vv.cost_top1.mean():+.1f} / "
                   f"{vv.cost_mAP.mean():+.1f}) | {yes('spread')} (gap {vv.gap.mean():.1f}) | {yes('chance')} | {dbl} | {mins:.1f} |")
    return '\n'.join(out)


def by_schedule(m) -> list:
    """[(E, the rows at E, the rows at 2E), ...] of one model's rows `m` of doubling runs, each indexed by seed, one per
    schedule E, a seed's shortest: the convergence table holds seeds of an older recipe (E=48) beside the recipe's."""
    first = m.groupby('seed').epochs.transform('min')
    return [(E, g[g.epochs == E].set_index('seed'), g[g.epochs == 2*E].set_index('seed'))
            for E, g in m.groupby(first, sort=True)]


def schedules(m):
    "(E, the rows at E, the rows at 2E) of one model's rows `m` of a doubling run on one schedule, indexed by seed."
    (one, *more) = by_schedule(m)
    if more:
        raise ValueError(f"rows of {m.model.iloc[0]} mix the schedules {[E for E, *_ in (one, *more)]}: "
                         "read them with by_schedule")
    return one


def doubling_table(paths, tolerance: float = 1.0, today: bool = False) -> str:
    """The doubling test per candidate and model (mean over seeds): top-1 / mAP at the model's schedule E and at 2E,
    the largest move of either on any seed, and the CPU minutes of one thread that the model took at E (`cpu_seconds`;
    0 where the model came from the cache); a candidate's last row: whether every model is converged, and the CPU
    minutes of its models at E. A model is every row trained at E and 2E: a self-test, a compatible model against the
    old model of E epochs ('BCT/old'), new queries against a transformed old gallery ('new/FCT(old)').
    `today` (the convergence table): the rows of models that are not today's (`todays_models`) say 'older code' in
    the recipe column instead of the candidate's recipe."""
    import pandas as pd
    d = read_convergence(paths) if today else pd.concat([pd.read_csv(f) for f in paths], ignore_index=True)
    out = ['| candidate | recipe | model | seeds | top-1 / mAP at E | at 2E | largest move | CPU min at E |',
           '|---|---|---|---|---|---|---|---|']
    # today's rows and an older recipe's are two blocks, each with its own verdict
    older = ~d.today if today else pd.Series(False, index=d.index)
    for (cand, old), g in d.groupby([d.candidate, older], sort=False):
        levers = json.loads(g.recipe.iloc[0]) | json.loads(g.knobs.iloc[0])   # the stand-in's knobs too (n_train)
        recipe = 'older code' if old else (', '.join(f'{k}={v}' for k, v in levers.items() if k != 'warmup_epochs')
                                           or 'library')
        pairs = today or g.pair.nunique() > 1 or (g.pair != 'imagenet').any()   # any pair but the screen's own
        moves, cpu = [], 0.
        for (pair, model), m in g.groupby(['pair', 'model'], sort=False):
            for E, a, b in by_schedule(m):
                if b.empty: continue   # a cross-test at E only (new/old)
                move = max(((b[k] - a[k]).abs().max() for k in ('top1', 'mAP')), default=float('nan'))
                c = a.cpu_seconds.mean()/60   # nan: every seed's model came from the cache
                moves.append(move); cpu += 0 if pd.isna(c) else c
                cross = (a.cpu_seconds == 0).all()   # a cross-test ('BCT/old') trains nothing; a cached model is blank
                out.append(f"| {cand} | {recipe} (E={E}) | {model}{f' ({pair})' if pairs else ''} | "
                           f"{','.join(map(str, sorted(a.index)))} | {a.top1.mean():.1f} / {a.mAP.mean():.1f} | "
                           f"{b.top1.mean():.1f} / {b.mAP.mean():.1f} | {move:.1f} | "
                           f"{'' if cross else 'cached' if pd.isna(c) else f'{c:.1f}'} |")
        ok = all(m <= tolerance for m in moves)
        verdict = 'converged' if ok else 'not converged'
        out.append(f"| {cand} |{' older code' if old else ''} | **all** | | | | **{verdict}** "
                   f"(largest {max(moves):.1f}) | **{cpu:.1f}** |")
    return '\n'.join(out)


def main(argv=None):
    if argv is None and len(sys.argv) > 1 and sys.argv[1] in ('--summary', '--doubling'):
        print((summary if sys.argv[1] == '--summary' else doubling_table)(sys.argv[2:])); return
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--arch', default=None, help="default: the stand-in's (STANDIN_ARCH)")
    p.add_argument('--width', type=int, default=None, help="a ResNet's base width (default: the recipe's)")
    p.add_argument('--optimizer', choices=['sgd', 'adam'], default=None)
    p.add_argument('--lr', type=float, default=None, help='learning rate at --lr-batch')
    p.add_argument('--lr-batch', type=int, default=None)
    p.add_argument('--momentum', type=float, default=None)
    p.add_argument('--weight-decay', type=float, default=None)
    p.add_argument('--batch-size', type=int, default=None)
    p.add_argument('--epochs', type=int, default=None)
    p.add_argument('--warmup-epochs', type=float, default=None, help="linear warm-up, every pair's (IMDB-Face's stand-in recipe has none)")
    p.add_argument('--augment', action='store_true', help="train with the stand-in's augmentation")
    p.add_argument('--label-smoothing', type=float, default=None)
    # levers that are no BackboneSpec field (benchmarks/speedrun_levers.py patches the trainer in this process; the
    # candidate's own cache keeps these models apart)
    p.add_argument('--nesterov', action='store_true', help="SGD with Nesterov momentum")
    p.add_argument('--ema', type=float, default=None, metavar='DECAY',
                   help="the model is the EMA of its weights and BatchNorm statistics (decay per step)")
    p.add_argument('--lookahead', type=int, default=None, metavar='K', help="Lookahead every K steps (alpha 0.5)")
    p.add_argument('--whitened-stem', action='store_true',
                   help="the first convolution set to the whitening of the training images' patches, and frozen")
    p.add_argument('--pairs', nargs='+', default=list(PREMISE_PAIRS), choices=list(PAIRS))
    p.add_argument('--models', nargs='+', default=['old', 'new', *COMPATIBLE],
                   help="old, new, a compatible model of the notebooks' `BASELINES` (BCT, RACT, new-l2, ...) or a "
                        "transformation of the old model to the new one: " + ', '.join(TRANSFORMATIONS))
    p.add_argument('--seeds', type=int, nargs='+', default=[0])
    p.add_argument('--double', action='store_true', help='also train every model of --models on a schedule twice as long (doubling test)')
    p.add_argument('--tolerance', type=float, default=1.0, help='the doubling test: the largest move (top-1 or mAP points) of a converged model')
    p.add_argument('--threads', type=int, default=1)
    p.add_argument('--smoke', action='store_true', help="the smoke scale (a quick check that it runs; --scale is a glyph knob)")
    p.add_argument('--cache', default=None, help='artifact cache of this candidate (default: beside --out)')
    p.add_argument('--candidate', default=None, help="the regime's name in the table (default: the stem of --out)")
    p.add_argument('--out', required=True)
    knob_args(p)
    identity_arguments(p, "the pairs' family's")
    a = p.parse_args(argv)
    identities_together(p, a, '--identities 480 --images 25')
    families = {PAIR_FAMILY[q] for q in a.pairs}
    if a.identities is not None and len(families) > 1:
        p.error(f"--identities gives one family its identities: give --pairs of one family (these are {sorted(families)})")
    torch.set_num_threads(a.threads)
    out = Path(a.out); out.parent.mkdir(parents=True, exist_ok=True)
    os.environ['COMPATREPRO_CACHE'] = str(Path(a.cache or out.with_suffix('.cache')).resolve())
    os.environ.setdefault('COMPATREPRO_PROGRESS', '0')
    from compatrepro import standin
    from compatrepro.updates import BASELINES
    from compatrepro.metrics import retrieval_metrics
    from compatrepro.pipeline import cached_backbone, cached_transformation, get_features
    from compatrepro.train import apply_transformation
    from compatrepro.models import load_transformation
    from compatrepro.runtime import current_context

    scale = 'smoke' if a.smoke else 'tiny'
    knobs = {f.name: (tuple(v) if isinstance(v, list) else v) for f in fields(standin.GlyphConfig)
             if (v := getattr(a, f.name, None)) is not None}
    standin.STANDIN_CONFIGS[scale] = replace(standin.STANDIN_CONFIGS[scale], **knobs)   # this process only: own cache
    if a.identities is not None:   # the identity lever (its own cache: the default one beside --out, or --cache)
        set_family_identities(scale, families.pop(), a.identities, a.images)
        knobs |= {'identities': a.identities, 'n_train': a.images}
    over = {k: v for k, v in dict(arch=a.arch, width=a.width, optimizer=a.optimizer, lr=a.lr, lr_batch=a.lr_batch,
                                  momentum=a.momentum, weight_decay=a.weight_decay, batch_size=a.batch_size,
                                  epochs=a.epochs, warmup_epochs=a.warmup_epochs, label_smoothing=a.label_smoothing).items()
            if v is not None}
    if a.augment: over['augment'] = True
    import speedrun_levers
    if sum([a.nesterov, a.ema is not None, a.lookahead is not None, a.whitened_stem]) > 1:
        p.error("--nesterov, --ema, --lookahead and --whitened-stem each patch the trainer: screen one at a time")
    over_flags = {}   # levers that are no BackboneSpec field: written into the recipe column only
    if a.nesterov: speedrun_levers.nesterov(); over_flags['nesterov'] = True
    if a.ema is not None: speedrun_levers.ema(a.ema); over_flags['ema'] = a.ema
    if a.lookahead is not None: speedrun_levers.lookahead(a.lookahead); over_flags['lookahead'] = a.lookahead
    if a.whitened_stem: speedrun_levers.whitened_stem(); over_flags['whitened_stem'] = True
    cand = a.candidate or out.stem
    meta = dict(candidate=cand, recipe=json.dumps(over | over_flags), knobs=json.dumps(knobs))
    rows = []

    def save():   # after every model: an interrupted run keeps what it measured
        with open(out, 'w', newline='') as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0])); w.writeheader(); w.writerows(rows)

    def made_here(make):
        "(make()'s artifact, the CPU seconds of making it here; nan for one from the cache)"
        c0, n_made = time.process_time(), len(current_context().cache.made)
        art = make()
        return art, (time.process_time() - c0 if len(current_context().cache.made) > n_made else float('nan'))

    unknown = [m for m in a.models if m not in ('old', 'new', *BASELINES, *TRANSFORMATIONS)]
    if unknown:
        p.error(f"--models {' '.join(unknown)}: use old, new, {', '.join(BASELINES)} or {', '.join(TRANSFORMATIONS)}")
    for seed in a.seeds:
        for pair in a.pairs:
            ev = PAIRS[pair][2]
            specs = pair_specs(pair, scale, seed, a.models, over)
            old, new = specs['old'], specs['new']
            specs = {k: v for k, v in specs.items() if k in a.models}
            runs = [(k, s, s.epochs) for k, s in specs.items()]
            # the doubled models first: a notebook run beside this one (same cache) is making those of E meanwhile
            if a.double: runs = [(k, doubled(s), 2*s.epochs) for k, s in specs.items()] + runs
            feats = {}
            for name, spec, E in runs:
                t0 = time.time()
                art, cpu = made_here(lambda: cached_backbone(spec))   # the first model also renders the stand-in
                sec = art.get('train_seconds', time.time() - t0)
                f = get_features(spec, ev, 'eval')
                feats[(name, E)] = f['features']; labels = f['labels']
                chance = 100/len(labels.unique())
                m = retrieval_metrics(f['features'], f['features'], labels, labels, metrics=('top1', 'mAP'))
                rows.append(dict(**meta, seed=seed, pair=pair, model=f'{name}/{name}', epochs=E, top1=round(m['top1'], 2),
                                 mAP=round(m['mAP'], 2), chance=round(chance, 3), train_images=0, train_seconds=round(sec, 1),
                                 cpu_seconds=round(cpu, 1), artifact=artifact_names({name: spec})[name]))
                print(f"{cand} seed {seed} {pair:8s} {name:4s} {E:3d} epochs: top-1 {m['top1']:6.2f}  mAP {m['mAP']:6.2f}  "
                      f"({sec/60:.1f} min)", flush=True)
                save()
            # cross-tests against the old model of E epochs: new/old at E, each compatible model at E and 2E
            crosses = [(q, E) for q, E in feats if q in BASELINES or (q == 'new' and E == new.epochs)]
            if crosses:
                fo = get_features(old, ev, 'eval')['features']
                for q, E in crosses:
                    m = retrieval_metrics(feats[(q, E)], fo, labels, labels, metrics=('top1', 'mAP'))
                    rows.append(dict(**meta, seed=seed, pair=pair, model=f'{q}/old', epochs=E, top1=round(m['top1'], 2),
                                     mAP=round(m['mAP'], 2), chance=round(chance, 3), train_images=0, train_seconds=0,
                                     cpu_seconds=0, artifact=''))   # trains nothing of its own
            transformations = transformation_specs({'old': old, 'new': new}, seed, a.models)
            if transformations:
                fo, fn = get_features(old, ev, 'eval'), get_features(new, ev, 'eval')
                labels = fn['labels']; chance = 100/len(labels.unique())
            for name, t in transformations.items():
                # h trained on the backbones of E epochs, its own schedule doubled; new queries, h(old) gallery
                tt = [(t, t.epochs)] + ([(doubled(t), 2*t.epochs)] if a.double else [])
                for spec, E in tt:
                    art, cpu = made_here(lambda: cached_transformation(spec))
                    h = apply_transformation(load_transformation(art['transformation']), fo['features'])
                    h = h[0] if isinstance(h, tuple) else h
                    m = retrieval_metrics(fn['features'], h, labels, labels, metrics=('top1', 'mAP'))
                    rows.append(dict(**meta, seed=seed, pair=pair, model=f'new/{name}(old)', epochs=E,
                                     top1=round(m['top1'], 2), mAP=round(m['mAP'], 2), chance=round(chance, 3),
                                     train_images=0, train_seconds=round(art.get('train_seconds', 0.), 1),
                                     cpu_seconds=round(cpu, 1), artifact=artifact_names({name: spec})[name]))
                    print(f"{cand} seed {seed} {pair:8s} {name} {E:3d} epochs: new/h(old) top-1 {m['top1']:6.2f}  "
                          f"mAP {m['mAP']:6.2f}", flush=True)
                    save()
            save()
    print(summary([out], a.tolerance))
    if a.double: print(doubling_table([out], a.tolerance))


if __name__ == '__main__':
    main()
