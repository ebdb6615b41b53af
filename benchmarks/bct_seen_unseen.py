"""Why BCT's compatible models fail eq. 2 on the face stand-in: is the new model compatible with the old one on the
identities both were trained on, and not on IJB-C's, which no model trains on?

BCT's claim (Table 1) is M(new-β, old) > M(old, old) on IJB-C. On the stand-in `30_bct_ijbc` finds the opposite on
every seed. BCT's influence loss ties φ_new to the old classifier's rows, which exist only for the old model's training
identities; compatibility on new identities has to generalise from them. The self-tests (a model against itself) show
where compatibility costs the new model accuracy. This script measures, with the models that
`compatrepro reproduce` trained (read from its artifact cache; nothing is trained), the rank-1 of leave-one-out
retrieval (query = gallery, cosine) for each comparison pair on two image sets:

- seen: the training images of the old model's identities (`imdbface-50`, part 'train'): both models trained on them;
- unseen: IJB-C's 1:1 images (`ijbc`, part 'eval'): subjects no model trains on (the notebook's test set).

The same for `32_bct_chain`'s chain (φ1 on 25 % of IMDB-Face, φ2 on 50 % with BCT towards φ1, φ3 on all of it with BCT
towards φ2): (φ2, φ1) and (φ3, φ1) on φ1's training images (`imdbface-25`, 'train'), (φ3, φ2) on φ2's (`imdbface-50`).

    python benchmarks/bct_seen_unseen.py --cache ~/.cache/compatrepro --seeds 0 1 2

A pair (a, b) embeds the queries with a and the gallery with b. Rows: seed, set, pair, rank1 (percent)."""
import argparse, os

import numpy as np, pandas as pd

PAIRS = [('old', 'old'), ('new', 'old'), ('new-l2 (MSE)', 'old'), ('new-β', 'old'), ('new-β-kd', 'old'),
         ('new-β-sys', 'old'), ('new-β', 'new-β'), ('new-β-kd', 'new-β-kd'), ('new-β-sys', 'new-β-sys'), ('new', 'new')]
CHAIN = [('φ1', 'φ1'), ('φ2', 'φ1'), ('φ3', 'φ1'), ('φ2', 'φ2'), ('φ3', 'φ2'), ('φ3', 'φ3')]   # 32_bct_chain's Table 4
SETS = {'seen (imdbface-50 train)': ('imdbface-50', 'train', PAIRS + [('φ2', 'φ2'), ('φ3', 'φ2')]),
        'seen by φ1 (imdbface-25 train)': ('imdbface-25', 'train', [('φ1', 'φ1'), ('φ2', 'φ1'), ('φ3', 'φ1')]),
        'unseen (IJB-C eval)': ('ijbc', 'eval', PAIRS + CHAIN)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--cache', help='artifact cache of compatrepro reproduce (default: $COMPATREPRO_CACHE or ~/.cache/compatrepro)')
    ap.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2])
    ap.add_argument('--max-images', type=int, default=3000, help='images of each set used (a fixed random subset)')
    ap.add_argument('--out', help='write the rows to this CSV')
    a = ap.parse_args(argv)
    if a.cache: os.environ['COMPATREPRO_CACHE'] = os.path.expanduser(a.cache)
    from compatrepro.runtime import ExperimentParams
    from dataclasses import replace
    from compatrepro.updates import update_specs, BASELINES
    from compatrepro.metrics import retrieval_hits
    from compatrepro.pipeline import get_features
    rows = []
    for seed in a.seeds:
        specs = update_specs(ExperimentParams(seed=seed, scale='tiny'), 'imdbface-50', 'imdbface',
                             ['new-l2 (MSE)', 'new-β', 'new-β-kd', 'new-β-sys'])
        s12 = update_specs(ExperimentParams(seed=seed, scale='tiny'), 'imdbface-25', 'imdbface-50', ['new-β'])   # as 32_bct_chain
        specs |= {'φ1': s12['old'], 'φ2': s12['new-β'], 'φ3': replace(specs['new'], compat=BASELINES['new-β'](s12['new-β']))}
        for name, (split, part, pairs) in SETS.items():
            F = {k: get_features(specs[k], split, part) for k in {m for p in pairs for m in p}}
            y = next(iter(F.values()))['labels'].numpy()
            keep = np.sort(np.random.default_rng(seed).permutation(len(y))[:a.max_images])
            for q, g in pairs:
                hits = retrieval_hits(F[q]['features'][keep], F[g]['features'][keep], y[keep], y[keep], k=1,
                                      distance='cosine', query_is_gallery=True)
                rows.append(dict(seed=seed, set=name, pair=f'{q} / {g}', rank1=100*float(hits.mean())))
                print(f'seed {seed}  {name:26s} {q + " / " + g:26s} rank-1 {rows[-1]["rank1"]:6.2f}', flush=True)
    df = pd.DataFrame(rows)
    if a.out: df.to_csv(a.out, index=False)
    print('\nmean over seeds (rank-1, percent):')
    print(df.pivot_table(index='pair', columns='set', values='rank1', aggfunc='mean').reindex(list(dict.fromkeys(f'{q} / {g}' for q, g in PAIRS + CHAIN))).round(2).to_string())


if __name__ == '__main__':
    main()
