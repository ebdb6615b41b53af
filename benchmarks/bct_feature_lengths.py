"""Do the BCT models' feature lengths spread more than the independent models', so that IJB-C's pooling of raw image
features lowers their own templates most?

`30_bct_ijbc` records Tables 1 and 2 under two poolings of a template's images (the package's: the features as the
models give them, insightface's default; the other: unit-length image features). The BCT models' self-tests are what
the package's pooling lowers most (new-β about 8 points of TAR@FAR=1e-4, new* about 2). The mechanism measured for the
overtrained face paragons (`bct_paragon_identities.py`) is the spread of the image features' lengths: a template's long
features outweigh its short ones. Expected, if that is the mechanism here too: the coefficient of variation of the
lengths, on IJB-C's images and within each template, is larger for every BCT model (new-β, new-β-kd, new-β-sys) than
for old and new*, on every seed, and a model's fall under raw pooling grows with it.

Each row: a model of 30 (read from the artifact cache, where `compatrepro reproduce` put them; none is trained here if
the cache holds them), its self-test at TAR@FAR=1e-4 and TPIR@FPIR=1e-2 pooled both ways, the coefficient of variation
of its features' lengths over IJB-C's 1:1 images, its mean within the 1:1 templates of two images or more, and the
rank correlation between an image's length and how typical it is of its identity (the cosine of its unit feature to the
mean unit feature of its identity's other 1:1 images): raw pooling helps a template where the long features are the
typical ones and hurts it where they are not. The correlation was added after the first run of seeds 0-2 showed the
spread alone does not set the BCT models apart from old (docs/suspects.md).

    python benchmarks/bct_feature_lengths.py --seeds 0 1 2 --out benchmarks/bct_feature_lengths.csv
    python benchmarks/bct_feature_lengths.py --summary benchmarks/bct_feature_lengths.csv"""

import sys, textwrap

import numpy as np, pandas as pd, torch

from probe_args import apply_probe_arguments, probe_arguments, probe_seeds

MODELS = ['old', 'new', 'new-l2 (MSE)', 'new-LwF', 'new-β', 'new-β-kd', 'new-β-sys']   # 30's Table 1 and 2 models
POINTS = ('TAR@FAR=1e-4', 'TPIR@FPIR=1e-2')


def length_spread(features, templates) -> tuple:
    """(coefficient of variation of the rows' lengths, its mean over the templates of two rows or more): how unequally
    raw pooling weighs images, overall and where it matters (inside a template)."""
    n = torch.as_tensor(features).float().norm(dim=1).numpy()
    g = pd.Series(n).groupby(np.asarray(templates))
    within = (g.std(ddof=0)/g.mean())[g.size() > 1]
    return float(n.std()/n.mean()), float(within.mean())


def length_typicality(features, labels) -> float:
    """Spearman correlation, over the rows, between a row's length and the cosine of its unit vector to the mean unit
    vector of the other rows of its label (rows alone in their label left out)."""
    f = torch.as_tensor(features).float()
    u = torch.nn.functional.normalize(f, dim=1)
    y = torch.as_tensor(np.asarray(labels))
    classes, idx = torch.unique(y, return_inverse=True)
    sums = torch.zeros(len(classes), u.shape[1]).index_add_(0, idx, u)
    counts = torch.bincount(idx, minlength=len(classes))[idx]
    keep = counts > 1
    others = sums[idx] - u                          # the sum of the label's other unit vectors: their mean's direction
    typical = (others*u).sum(1)/others.norm(dim=1).clamp(min=1e-12)
    s = pd.DataFrame({'length': f.norm(dim=1)[keep].numpy(), 'typical': typical[keep].numpy()})
    return float(s.corr(method='spearman').iloc[0, 1])


def probe_seed(seed: int, scale: str = 'tiny') -> list:
    from compatrepro.bct import face_data, face_features, face_test
    from compatrepro.runtime import ExperimentParams, RunContext, set_context
    from compatrepro.updates import update_specs

    P = ExperimentParams(seed=seed, scale=scale, device='cpu')
    set_context(RunContext.from_env(device='cpu', progress=False))
    data = face_data(P)
    specs = update_specs(P, 'imdbface-50', 'imdbface', MODELS[2:])   # as 30 makes them
    rows = []
    for name in MODELS:
        F = face_features(specs[name])
        raw, unit = face_test(F, F, data), face_test(F, F, data, normalize_images=True)
        cv, cv_within = length_spread(F['eval'], data['eval'].templates)
        row = ({'seed': seed, 'model': name} | {f'{k} raw': raw[k] for k in POINTS}
               | {f'{k} unit': unit[k] for k in POINTS}
               | {'length cv': cv, 'length cv within templates': cv_within,
                  'length-typicality correlation': length_typicality(F['eval'], data['eval'].labels)})
        rows.append(row)
        print(f'seed {seed} | {name:14s} ' + ' '.join(f'{k} {v:.3f}' for k, v in row.items()
                                                      if isinstance(v, float)), flush=True)
    return rows


def summary(path) -> str:
    """The table docs/suspects.md shows: per model, the means over seeds of its self-test pooled both ways and of its
    lengths' spread, and on how many seeds its spread within templates is above both old's and new*'s; then how the
    self-tests' fall under raw pooling ranks with that spread."""
    d = pd.read_csv(path)
    ref = d[d.model.isin(['old', 'new'])].groupby('seed')['length cv within templates'].max()
    cols = [f'{k} {w}' for k in POINTS for w in ('raw', 'unit')] + ['length cv', 'length cv within templates',
                                                                    'length-typicality correlation']
    out = ['| model | seeds | ' + ' | '.join(cols) + ' | spread within templates above old and new* |',
           '|' + '---|' * (len(cols) + 3)]
    for name in MODELS:
        g = d[d.model == name]
        if g.empty:
            continue
        above = (g.set_index('seed')['length cv within templates'] > ref.reindex(g.seed)).sum()
        label = 'new*' if name == 'new' else name
        out.append(f"| {label} | {','.join(map(str, sorted(g.seed)))} | "
                   + ' | '.join(f"{g[c].mean():.{2 if c.startswith(POINTS) else 3}f}" for c in cols)
                   + (' | |' if name in ('old', 'new') else f' | {above}/{len(g)} |'))
    fall = d['TAR@FAR=1e-4 unit'] - d['TAR@FAR=1e-4 raw']
    spread = d['length cv within templates']
    new = d.model != 'old'
    text = (f"Spearman correlation, over the {len(d)} (model, seed) rows, of a self-test's fall at TAR@FAR=1e-4 under "
            f"raw pooling (unit minus raw) with the spread of lengths within templates: "
            f"{fall.corr(spread, method='spearman'):.2f}; over the {int(new.sum())} rows of the new models: "
            f"{fall[new].corr(spread[new], method='spearman'):.2f}.")
    out.append('\n' + textwrap.fill(text, 120))
    return '\n'.join(out)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ['--summary']:
        print(summary(argv[1]))
        return
    a = probe_arguments(__doc__, 'benchmarks/bct_feature_lengths.csv').parse_args(argv)
    apply_probe_arguments(a)
    probe_seeds(a, probe_seed)
    print(summary(a.out))


if __name__ == '__main__':
    main()
