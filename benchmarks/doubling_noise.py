"""How noisy is the doubling test? The scatter of one training run, read off the committed doubling runs.

A model kind is converged, by the regime issue's rule, when training it on twice its schedule moves its top-1 and mAP
by at most a point on every seed. Across seeds 0-2 the stand-in's images are the same (`BackboneSpec.data_seed` is 0
for every seed): a seed changes only the initial weights, the batches' order and the augmentations. So the spread of
one kind's numbers over the seeds, at one schedule, is the scatter of a training run itself, and a doubling move,
the difference of two runs of one seed on two schedules (which part from the first step), carries about sqrt(2)
times that scatter even when the model has nothing left to learn.

For each model's self-test ('new/new': a model's queries against its own gallery; a cross-test such as 'BCT/old' keeps
the old model of E in both runs, and a transformation its backbones, so their moves share part of the scatter) with
both schedules on at least three seeds (the convergence table's and the recipe screen's CSVs), the table gives: the
seeds' standard deviation at E and at 2E, pooled (sigma, top-1 / mAP); the mean move over the seeds
with its standard error; the largest move on any seed (the rule's number); the chance that a kind whose true move is
zero passes the rule on that many seeds, and the mean rule below, if each move is normal with standard deviation
sqrt(2) sigma (the larger of top-1's and mAP's chance of failing counts: the rule asks both); and the two rules'
verdicts: the mean rule (the mean move over the seeds within a point, top-1 and mAP), which the recipe's decision
applies since the per-seed rule fails most converged kinds at this scatter, and the per-seed rule beside it:

    python benchmarks/doubling_noise.py benchmarks/recipe_screen/*.csv --convergence benchmarks/convergence/*.csv
"""
import math
import sys

import pandas as pd

from standin_regime import by_schedule   # this folder is on the path

TOLERANCE = 1.0   # the rule's largest move, in points


def _pass_chance(sigma: float, seeds: int, tolerance: float = TOLERANCE) -> float:
    "The chance that `seeds` moves, each normal with mean 0 and standard deviation sqrt(2) `sigma`, are all within."
    if sigma == 0: return 1.0
    one = math.erf(tolerance / (2 * sigma))   # P(|N(0, 2 sigma^2)| <= t) = erf(t / (sqrt(2) * sqrt(2) sigma))
    return one ** seeds


def _mean_pass_chance(sigma: float, seeds: int, tolerance: float = TOLERANCE) -> float:
    "The chance that the mean of `seeds` such moves is within: its standard deviation is sqrt(2 / seeds) `sigma`."
    if sigma == 0: return 1.0
    return math.erf(tolerance / (2 * sigma / math.sqrt(seeds)))


def noise_rows(d: pd.DataFrame) -> pd.DataFrame:
    "Per candidate, pair and self-test with E and 2E on at least three common seeds: the scatter and the moves."
    rows = []
    for (cand, pair, model), m in d.groupby(['candidate', 'pair', 'model'], sort=False):
        query, _, gallery = model.partition('/')
        if query != gallery: continue   # a cross-test or a transformation: its two runs share a model
        for E, a, b in by_schedule(m):
            seeds = sorted(set(a.index) & set(b.index))
            if len(seeds) < 3: continue
            a, b = a.loc[seeds], b.loc[seeds]
            row = dict(candidate=cand, pair=pair, model=model, E=int(E), seeds=len(seeds))
            chance = mean_chance = 1.0
            for k in ('top1', 'mAP'):
                sigma = math.sqrt((a[k].var(ddof=1) + b[k].var(ddof=1)) / 2)   # pooled over the two schedules
                move = b[k] - a[k]
                row |= {f'sigma_{k}': sigma, f'mean_move_{k}': move.mean(),
                        f'se_move_{k}': move.std(ddof=1) / math.sqrt(len(seeds)), f'largest_move_{k}': move.abs().max()}
                chance = min(chance, _pass_chance(sigma, len(seeds)))
                mean_chance = min(mean_chance, _mean_pass_chance(sigma, len(seeds)))
            row['pass_chance_if_converged'] = chance
            row['mean_pass_chance_if_converged'] = mean_chance
            row['converged_mean'] = all(abs(row[f'mean_move_{k}']) <= TOLERANCE for k in ('top1', 'mAP'))
            row['converged_every_seed'] = all(row[f'largest_move_{k}'] <= TOLERANCE for k in ('top1', 'mAP'))
            rows.append(row)
    return pd.DataFrame(rows)


def convergence_rows(paths) -> pd.DataFrame:
    """The convergence table's rows, those of models that are not today's (`todays_models`) under the candidate
    'library (older code)', so that a pair re-measured in part pools no seed of older code with today's."""
    from standin_regime import read_convergence
    d = read_convergence(paths)
    d.loc[~d.today, 'candidate'] = d.candidate[~d.today] + ' (older code)'
    return d.drop(columns='today')


def table(paths, convergence=()) -> str:
    """The markdown table docs/standin_regime.md shows (E: the schedule a row doubles; one recipe's rows are a block):
    of the convergence CSVs `convergence` (today's models apart from older code's) and the screens' CSVs `paths`."""
    d = pd.concat(([convergence_rows(convergence)] if convergence else []) + [pd.read_csv(p) for p in paths],
                  ignore_index=True)
    r = noise_rows(d)
    out = ['| candidate | model | E | seeds | sigma of a run, top-1 / mAP | mean move (± s.e.), top-1 | '
           'mean move (± s.e.), mAP | largest move | chance a converged kind passes, every seed (mean rule) | '
           'converged: mean rule (every seed) |',
           '|---|---|---|---|---|---|---|---|---|---|']
    yes = {True: 'yes', False: 'no'}
    for x in r.itertuples():
        pair = '' if x.pair == 'imagenet' else f' ({x.pair})'
        out.append(f'| {x.candidate} | {x.model}{pair} | {x.E} | {x.seeds} | {x.sigma_top1:.1f} / {x.sigma_mAP:.1f} | '
                   f'{x.mean_move_top1:+.1f} (± {x.se_move_top1:.1f}) | '
                   f'{x.mean_move_mAP:+.1f} (± {x.se_move_mAP:.1f}) | '
                   f'{max(x.largest_move_top1, x.largest_move_mAP):.1f} | {x.pass_chance_if_converged:.0%} '
                   f'({x.mean_pass_chance_if_converged:.0%}) | '
                   f'{yes[x.converged_mean]} ({yes[x.converged_every_seed]}) |')
    return '\n'.join(out)


if __name__ == '__main__':
    if len(sys.argv) < 2: sys.exit(__doc__)
    args = sys.argv[1:]
    i = args.index('--convergence') if '--convergence' in args else len(args)
    print(table(args[:i], args[i + 1:]))
