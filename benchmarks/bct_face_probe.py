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

Models come from the artifact cache ($COMPATREPRO_CACHE; trained there first: about 25 minutes a seed on one thread)."""

from dataclasses import replace

import numpy as np, pandas as pd

from probe_args import apply_probe_arguments, probe_arguments

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


def probe_seed(seed: int, scale: str = 'tiny') -> list:
    from compatrepro.core import ExperimentParams, RunContext, set_context
    from compatrepro.experiments import update_specs, BASELINES
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


def main(argv=None):
    a = probe_arguments(__doc__, 'benchmarks/bct_face_probe.csv').parse_args(argv)
    apply_probe_arguments(a)
    rows = []
    for s in a.seeds:
        rows += probe_seed(s, a.scale)
        pd.DataFrame(rows).to_csv(a.out, index=False, float_format='%.4f')  # each finished seed is kept


if __name__ == '__main__':
    main()
