"""Why is the face paragon trained on all of IMDB-Face's identities below the one trained on half of them at the low
false-accept points?

`32_bct_chain` finds φ*3 (trained on all 480 identities of the stand-in's IMDB-Face, 25 images each) below φ*2 (the
first 240) on TAR@FAR=1e-4 and TPIR@FPIR=1e-2 on every seed; they are `30_bct_ijbc`'s new* and old, and there new* is
below (old, old) on seed 0. On the recipe, a model trained on more identities of the same images per identity also
takes twice the optimizer steps (96 epochs over twice the images). Two levers, one at a time, on the paragon's
self-test (a model against itself) on IJB-C:

- identities, at the recipe's epochs: IMDB-Face's 25 %, 50 %, 90 % and 100 % splits (120, 240, 432, 480 identities);
- optimizer steps, at fixed identities: all identities for half the epochs (the steps of the 50 % model), half of them
  for twice the epochs (the steps of the 100 % model).

If the low false-accept points fall with steps at fixed identities, the recipe over-trains the face model for them (its
tail of impostor scores grows as the training images are fitted); if they fall with identities at fixed steps, the
stand-in's identities are the cause. A third lever needs no training: IJB-C's templates pool image features
unnormalised (`template_features`, as insightface does by default), so a model whose feature norms vary more lets some
images outweigh the others; the same points with each image feature made unit-length first are recorded beside them
(a lever added after the first four models of seed 0 showed single-image retrieval rising with the identities while
the template points fell). Each row: a model, its identities, epochs and optimizer steps, BCT's points (TAR@FAR,
TPIR@FPIR at every rate of Table 8, rank-1), the same pooled from unit-length image features, the coefficient of
variation of the feature norms on IJB-C's images, and the rank-1 of leave-one-out retrieval (cosine) on the training
images of the 25 % identities, which every model trained on (seen), and on IJB-C's 1:1 images (unseen).

    python benchmarks/bct_paragon_identities.py --seeds 0 1 2 --out benchmarks/bct_paragon_identities.csv
    python benchmarks/bct_paragon_identities.py --models ids50-e/2 ids50-e/4 ids100-e/4 --seeds 0 1 2 \\
        --out benchmarks/bct_paragon_epochs.csv
    python benchmarks/bct_paragon_identities.py --models ids25-e/2 ids25-e*2 ids90-e/2 ids90-e*5/9 --seeds 0 1 2 \\
        --out benchmarks/bct_paragon_rules.csv
    python benchmarks/bct_paragon_identities.py --summary benchmarks/bct_paragon_identities.csv \\
        benchmarks/bct_paragon_epochs.csv benchmarks/bct_paragon_rules.csv

The models of the recipe's epochs are those `compatrepro reproduce` trains for 30-32 (read from the artifact cache,
$COMPATREPRO_CACHE); those of other epochs train there first (5 to 10 minutes each on one thread). The second command
adds the epochs ladder of 30's old and new model (the recipe's, half and a quarter of its epochs), which chooses the
face recipe's epochs from the models' own accuracy; the third, the two rules such a recipe could follow (half the
epochs for every face model, or the 50 % model's optimizer steps for each) on the other two splits."""

import sys

import numpy as np, pandas as pd, torch

from bct_face_probe import rank1
from probe_args import apply_probe_arguments, probe_arguments, probe_seeds

SPLITS = {'imdbface-25': 25, 'imdbface-50': 50, 'imdbface-90': 90, 'imdbface': 100}
# key -> (name, split, epochs as a multiple of the recipe's): the identity ladder, the steps lever, then the epochs
# ladder of 30's old and new model (imdbface-50, imdbface) that chooses the face recipe's epochs from the models alone
MODELS = {f'ids{pct}': (f'{split}, recipe epochs', split, 1.) for split, pct in SPLITS.items()} | {
    'ids100-e/2': ('imdbface, half the epochs (the steps of imdbface-50)', 'imdbface', .5),
    'ids50-e*2': ('imdbface-50, twice the epochs (the steps of imdbface)', 'imdbface-50', 2.),
    'ids50-e/2': ('imdbface-50, half the epochs', 'imdbface-50', .5),
    'ids50-e/4': ('imdbface-50, a quarter of the epochs', 'imdbface-50', .25),
    'ids100-e/4': ('imdbface, a quarter of the epochs', 'imdbface', .25),
    # the two rules a face recipe could follow, on the splits the ladder above leaves open: every face model at half
    # the recipe's epochs, or at the 50 % model's optimizer steps (96 epochs x 6,000 images / the split's images)
    'ids25-e/2': ('imdbface-25, half the epochs', 'imdbface-25', .5),
    'ids25-e*2': ('imdbface-25, twice the epochs (the steps of imdbface-50)', 'imdbface-25', 2.),
    'ids90-e/2': ('imdbface-90, half the epochs', 'imdbface-90', .5),
    'ids90-e*5/9': ('imdbface-90, 5/9 of the epochs (the steps of imdbface-50)', 'imdbface-90', 5/9),
}
LEVERS = [f'ids{p}' for p in SPLITS.values()] + ['ids100-e/2', 'ids50-e*2']   # the identity ladder, the steps lever
LADDER = ['ids50-e/2', 'ids50-e/4', 'ids100-e/4']            # the epochs ladder of 30's models
RULES = ['ids25-e/2', 'ids25-e*2', 'ids90-e/2', 'ids90-e*5/9']   # the face recipe's two rules on the other splits
REFERENCE = MODELS['ids50'][0]   # 30's old model, 32's φ*2


def probe_seed(seed: int, scale: str = 'tiny', models=LEVERS) -> list:
    from compatrepro.bct import face_data, face_features, face_points, face_test
    from compatrepro.data import get_split
    from compatrepro.pipeline import get_features
    from compatrepro.runtime import ExperimentParams, RunContext, set_context
    from compatrepro.specs import STANDIN_RECIPES, backbone_spec

    P = ExperimentParams(seed=seed, scale=scale, device='cpu')
    recipe_epochs = STANDIN_RECIPES[scale][0]['epochs']   # the rows' "recipe epochs": the recipe's 96, not the face
                                                          # schedule that this experiment chose (`06a_specs`)
    set_context(RunContext.from_env(device='cpu', progress=False))
    data = face_data(P)
    allowed = face_points(P, data)['allowed']
    rows = []
    for name, split, times in (MODELS[k] for k in models):
        epochs = max(1, round(times*P.overrides.get('epochs', recipe_epochs)))
        spec = P.fit(backbone_spec(split, P.scale, P.seed, **(P.overrides | {'epochs': epochs})))
        labels = np.asarray(get_split(split, 'train', P.scale, P.data_root).labels)
        images = len(labels)
        F = face_features(spec)
        t = face_test(F, F, data)
        unit = {k: torch.nn.functional.normalize(torch.as_tensor(v).float(), dim=1) for k, v in F.items()}
        t_unit = face_test(unit, unit, data)
        norms = torch.as_tensor(F['eval']).float().norm(dim=1)
        seen = get_features(spec, 'imdbface-25', 'train')
        unseen = get_features(spec, 'ijbc', 'eval')
        row = dict(seed=seed, model=name, identities=len(np.unique(labels)), epochs=spec.epochs,
                   steps=spec.epochs*int(np.ceil(images/spec.batch_size)))
        row |= {k: v for k, v in t.items() if k.startswith(('TAR@', 'TPIR@', 'rank'))}
        row |= {f'{k} (unit images)': v for k, v in t_unit.items() if k.startswith(('TAR@', 'TPIR@', 'rank'))}
        row['norm cv (IJB-C)'] = float(norms.std()/norms.mean())
        row |= {f'allowed {k}': v for k, v in allowed.items()}
        row['rank1 seen (25 %)'] = rank1(seen['features'], seen['features'], seen['labels'].numpy(), seed)
        row['rank1 unseen'] = rank1(unseen['features'], unseen['features'], unseen['labels'].numpy(), seed)
        rows.append(row)
        print(f'seed {seed} | {name:55s} ' + ' '.join(f'{k} {v:.2f}' if isinstance(v, float) else f'{k} {v}'
                                                       for k, v in row.items() if k not in ('seed', 'model')
                                                       and not k.startswith('allowed') and 'unit' not in k),
              flush=True)
    return rows


SUMMARY_POINTS = ('TAR@FAR=1e-4', 'TAR@FAR=1e-2', 'TPIR@FPIR=1e-2', 'rank1', 'TAR@FAR=1e-4 (unit images)',
                  'TPIR@FPIR=1e-2 (unit images)', 'norm cv (IJB-C)', 'rank1 seen (25 %)', 'rank1 unseen')


def summary(*paths) -> str:
    """The table docs/suspects.md shows: per model, its identities, epochs and steps, the mean over seeds of BCT's
    points (pooled as the package does and from unit-length image features), the feature norms' coefficient of variation
    and leave-one-out rank-1, and on how many seeds TAR@FAR=1e-4 is above the 50 % model's at the recipe."""
    d = pd.concat([pd.read_csv(p) for p in paths], ignore_index=True)
    ref = d[d['model'] == REFERENCE].set_index('seed')['TAR@FAR=1e-4']
    out = ['| model | identities | epochs | steps | seeds | ' + ' | '.join(SUMMARY_POINTS)
           + ' | TAR@FAR=1e-4 above the 50 % model |', '|' + '---|' * (len(SUMMARY_POINTS) + 6)]
    for name, _, _ in sorted(MODELS.values(), key=lambda m: (SPLITS[m[1]], m[2])):
        g = d[d['model'] == name]
        if g.empty:
            continue
        above = (g.set_index('seed')['TAR@FAR=1e-4'] > ref.reindex(g['seed'])).sum()
        out.append(f"| {name} | {g['identities'].iloc[0]} | {g['epochs'].iloc[0]} | {g['steps'].iloc[0]} | "
                   f"{','.join(map(str, sorted(g.seed)))} | "
                   + ' | '.join(f"{g[c].mean():.{2 if 'cv' in c else 1}f}" for c in SUMMARY_POINTS)
                   + (' | |' if name == REFERENCE else f' | {above}/{len(g)} |'))
    return '\n'.join(out)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ['--summary']:
        print(summary(*argv[1:]))
        return
    ap = probe_arguments(__doc__, 'benchmarks/bct_paragon_identities.csv')
    ap.add_argument('--models', nargs='+', default=LEVERS, choices=list(MODELS),
                    help='which models (default: the identity ladder and the steps lever)')
    a = ap.parse_args(argv)
    apply_probe_arguments(a)
    probe_seeds(a, probe_seed, a.models)
    print(summary(a.out))


if __name__ == '__main__':
    main()
