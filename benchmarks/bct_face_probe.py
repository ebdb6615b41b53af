"""Does BCT's criterion (eq. 2) fail on the face stand-in because the old model is not trained to the end?

`30_bct_ijbc` finds M(new-β, old) < M(old, old) on IJB-C on every seed, and the l2 baseline more compatible than BCT on
unseen subjects, the reverse of BCT's Table 1. `bct_seen_unseen.csv` shows the influence loss compatible on the old
model's own identities and not on IJB-C's. One change at a time, on 30's specs:

- the old model trained for twice its epochs (the stand-in's regime stops short of convergence; doubling moved
  ImageNet's old model by 10 top-1), and each compatible model trained against it;
- the influence loss on the old classes only (new-β, eq. 8) against every class with synthesised rows for the new ones
  (new-β-sys, sec. 2.5), at the recipe's epochs.

For each old model it writes, per seed, the pairs (old, old), (new*, new*) and (model, old) of new-β, new-β-sys and
new-l2 (MSE) on 30's points (TAR@FAR=1e-4, TPIR@FPIR=1e-2, rank-1 of IJB-C's 1:N search), eq. 2 (model, old) minus
(old, old) on each, and the rank-1 of leave-one-out retrieval (cosine) on the old model's training identities (seen)
and on IJB-C's 1:1 images (unseen), as `bct_seen_unseen.py` measures it.

    python benchmarks/bct_face_probe.py --seeds 0 1 2 --out benchmarks/bct_face_probe.csv

A third change, the stand-in's identities: `--identities N --images M` gives IMDB-Face's stand-in N identities of M
training images each (the old model trains on the first half), with the recipe's old model only; 120 of 100 is the
committed stand-in, 480 of 25 the same 12,000 images over four times the identities. It needs a cache of its own (a
stand-in knob is not in the models' cache keys):

    python benchmarks/bct_face_probe.py --identities 480 --images 25 --cache /tmp/faces-480 \\
        --out benchmarks/bct_face_identities.csv

and `--identity-summary` prints the table docs/suspects.md shows:

    python benchmarks/bct_face_probe.py --identity-summary benchmarks/bct_face_probe.csv benchmarks/bct_face_identities.csv

Models come from the artifact cache ($COMPATREPRO_CACHE; trained there first: about 25 minutes a seed on one thread)."""

import sys
from dataclasses import replace

import numpy as np, pandas as pd

from probe_args import apply_identity_arguments, apply_probe_arguments, identity_arguments, probe_arguments, probe_seeds

MODELS = ('new-β', 'new-β-sys', 'new-l2 (MSE)')
POINTS = ('TAR@FAR=1e-4', 'TPIR@FPIR=1e-2', 'rank1')


def rank1(query, gallery, labels, seed: int, max_images: int = 3000) -> float:
    "Leave-one-out rank-1 (cosine) of `query` features against `gallery` features of the same images, in percent."
    from compatrepro.metrics import retrieval_hits

    keep = np.sort(np.random.default_rng(seed).permutation(len(labels))[:max_images])
    hits = retrieval_hits(
        query[keep], gallery[keep], labels[keep], labels[keep], k=1, distance='cosine', query_is_gallery=True
    )
    return 100 * float(hits.mean())


def probe_seed(seed: int, scale: str = 'tiny', identities: tuple | None = None) -> list:
    from compatrepro.runtime import ExperimentParams, RunContext, set_context
    from compatrepro.updates import update_specs, BASELINES
    from compatrepro.pipeline import get_features
    from compatrepro.bct import face_features, face_data, face_test

    P = ExperimentParams(seed=seed, scale=scale, device='cpu')
    set_context(RunContext.from_env(device='cpu', progress=False))
    specs = update_specs(P, 'imdbface-50', 'imdbface', list(MODELS))  # 30's specs
    old2 = replace(specs['old'], epochs=2 * specs['old'].epochs)
    olds = {
        f"old, {specs['old'].epochs} epochs (the recipe)": specs,
        f"old, {old2.epochs} epochs": {'old': old2, 'new': specs['new']}
        | {m: replace(specs['new'], compat=BASELINES[m](old2)) for m in MODELS},
    }
    if identities is not None:  # the identity lever: the recipe's old model only
        olds = dict(list(olds.items())[:1])
    data = face_data(P)
    rows = []
    for old_name, S in olds.items():
        F = {k: face_features(s) for k, s in S.items()}
        seen = {k: get_features(s, 'imdbface-50', 'train') for k, s in S.items()}
        unseen = {k: get_features(s, 'ijbc', 'eval') for k, s in S.items()}
        T = {'old / old': face_test(F['old'], F['old'], data), 'new* / new*': face_test(F['new'], F['new'], data)}
        T |= {f'{m} / old': face_test(F[m], F['old'], data) for m in MODELS}
        for pair, t in T.items():
            a, b = pair.split(' / ')
            a, b = ('new' if a == 'new*' else a), ('new' if b == 'new*' else b)
            row = dict(seed=seed, old_model=old_name, pair=pair, **{p: t[p] for p in POINTS})
            if identities is not None:
                row = dict(identities=identities[0], images=identities[1]) | row
            if b == 'old' and a != 'old':
                row |= {f'eq. 2 ({p})': t[p] - T['old / old'][p] for p in POINTS}
            row['rank1 seen'] = rank1(seen[a]['features'], seen[b]['features'], seen[a]['labels'].numpy(), seed)
            row['rank1 unseen'] = rank1(unseen[a]['features'], unseen[b]['features'], unseen[a]['labels'].numpy(), seed)
            rows.append(row)
            print(
                f"seed {seed} | {old_name} | {pair:22s} "
                + ' '.join(f'{k} {v:6.2f}' for k, v in row.items() if k not in ('seed', 'old_model', 'pair')),
                flush=True,
            )
    return rows


def identity_summary(committed: str, identities: str) -> str:
    """The identity lever as docs/suspects.md shows it: per stand-in (the committed probe's recipe old model, 120
    identities of 100 images, and each `--identities` run) and pair, the means over seeds of 30's points and of
    rank-1 on unseen subjects, and on how many seeds eq. 2 holds at each point."""
    a = pd.read_csv(committed)
    a = a[a['old_model'].str.contains('recipe')].assign(identities=120, images=100)
    d = pd.concat([a, pd.read_csv(identities)], ignore_index=True)
    cols = [*POINTS, 'rank1 unseen']
    out = ['| stand-in | pair | seeds | ' + ' | '.join(cols) + ' | eq. 2 holds (' + ', '.join(POINTS) + ') |',
           '|' + '---|' * (len(cols) + 4)]
    for (n, m), g in d.groupby(['identities', 'images'], sort=False):
        for pair, r in g.groupby('pair', sort=False):
            compat = pair.endswith(' / old') and pair != 'old / old'
            holds = ', '.join(f"{int((r[f'eq. 2 ({p})'] >= 0).sum())}/{len(r)}" for p in POINTS) if compat else ''
            out.append(f"| {n} identities of {m} images | {pair} | {','.join(map(str, sorted(r.seed)))} | "
                       + ' | '.join(f'{r[c].mean():.1f}' for c in cols) + f' | {holds} |')
    return '\n'.join(out)


def main(argv=None):
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == '--identity-summary':
        print(identity_summary(*sys.argv[2:4]))
        return
    ap = probe_arguments(__doc__, 'benchmarks/bct_face_probe.csv')
    a = identity_arguments(ap, "IMDB-Face's").parse_args(argv)
    apply_probe_arguments(a)
    apply_identity_arguments(ap, a, 'imdbface', '--identities 480 --images 25')
    probe_seeds(a, probe_seed, None if a.identities is None else (a.identities, a.images))


if __name__ == '__main__':
    main()
