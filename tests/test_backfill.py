"""The backfilling engine equals a brute-force recomputation: materialise the gallery at each fraction
(mixed) or the merged distance list (rank merge), rank it, score each query with scikit-learn."""
import os
os.environ.setdefault('COMPATREPRO_PROGRESS', '0')

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st, HealthCheck
from scipy.spatial.distance import cdist
from sklearn.metrics import average_precision_score

from compatrepro.backfill import (backfill_curve, step_curve, step_hits, backfill_counts,
                                  random_order)
from compatrepro.metrics import tie_features, retrieval_hits

KS, MAPK = (1, 2, 5), (3,)


def brute_rows(Q, Qo, Go, Gn, order, k, distance):
    """(m, n) distances of the gallery after k backfilled items: mixed (Qo None) or rank merge."""
    metric = 'sqeuclidean' if distance == 'l2' else 'cosine'
    if Qo is None:
        return cdist(Q, _mix(Go, Gn, order, k), metric)
    new = np.zeros(len(Go), bool); new[order[:k]] = True
    return np.where(new[None], cdist(Q, Gn, metric), cdist(Qo, Go, metric))


def _mix(Go, Gn, order, k):
    G = Go.copy(); G[order[:k]] = Gn[order[:k]]; return G


def brute_metrics(D, ql, gl, query_is_gallery):
    res = {f'top{k}': [] for k in KS} | {'mAP': []} | {f'mAP@{k}': [] for k in MAPK}
    hits1 = np.zeros(len(D), bool)
    for i in range(len(D)):
        keep = np.ones(D.shape[1], bool)
        if query_is_gallery: keep[i] = False
        d, y = D[i, keep], gl[keep] == ql[i]
        if not y.any(): continue
        order = np.lexsort((y, d))                 # irrelevant first among equal distances
        for k in KS: res[f'top{k}'].append(y[order][:k].any())
        hits1[i] = y[order][0]
        res['mAP'].append(average_precision_score(y, -d))
        for k in MAPK:
            ap = sum((y & (d <= d[j])).sum() / (d <= d[j]).sum() for j in np.nonzero(y)[0] if (d <= d[j]).sum() <= k)
            res[f'mAP@{k}'].append(ap / min(y.sum(), k))
    return {k: 100 * float(np.mean(v)) if v else 0.0 for k, v in res.items()}, hits1


def cosine_safe(X):
    X = X.copy(); X[(X == 0).all(1), 0] = 1.; return X


case = st.fixed_dictionaries(dict(
    seed=st.integers(0, 2**31 - 1), n=st.integers(2, 24), n_labels=st.integers(1, 6),
    distance=st.sampled_from(['l2', 'cosine']), rank_merge=st.booleans(), query_is_gallery=st.booleans(),
    n_frac=st.integers(1, 5), block=st.integers(1, 9)))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case)
def test_curve_equals_brute_force(c):
    rng = np.random.default_rng(c['seed']); n = c['n']; d = 3 if c['distance'] == 'l2' else 4
    feats = lambda k: cosine_safe(tie_features(rng, k, c['distance'], d))
    Go, Gn = feats(n), feats(n)
    Gn[: n // 3] = Go[: n // 3]                     # some items identical in both models: exact cross ties
    gl = rng.integers(0, c['n_labels'], n)
    if c['query_is_gallery']: Q, ql = Gn.copy(), gl
    else:
        m = int(rng.integers(1, 12)); Q, ql = feats(m), rng.integers(0, c['n_labels'] + 1, m)   # label n_labels: no positive
    Qo = feats(len(Q)) if c['rank_merge'] else None
    order = rng.permutation(n)
    fr = np.r_[rng.random(c['n_frac']), rng.choice([0., 1.], 2)]
    metrics = [f'top{k}' for k in KS] + ['mAP'] + [f'mAP@{k}' for k in MAPK] + ['pos_flips@1', 'neg_flips@1']
    df = backfill_curve(Q, Go, Gn, ql, gl, order, fr, metrics, c['distance'], c['query_is_gallery'], Qo,
                        block_size=c['block'])
    _, h0 = brute_metrics(brute_rows(Q, Qo, Go, Gn, order, 0, c['distance']), ql, gl, c['query_is_gallery'])
    steps = step_curve(Q, Go, Gn, ql, gl, order, c['distance'], c['query_is_gallery'], Qo, block_size=c['block'])
    nvalid = max(1, len(Q) - df.attrs['n_skipped'])
    for f, k in zip(fr, backfill_counts(fr, n)):
        ref, h = brute_metrics(brute_rows(Q, Qo, Go, Gn, order, k, c['distance']), ql, gl, c['query_is_gallery'])
        row = df.iloc[list(fr).index(f)]
        for name, v in ref.items():
            assert row[name] == pytest.approx(v, abs=1e-9), (name, f, k)
        assert row['pos_flips@1'] == pytest.approx(100 * (h & ~h0).sum() / nvalid)
        assert row['neg_flips@1'] == pytest.approx(100 * (~h & h0).sum() / nvalid)
        assert steps.loc[k, 'top1'] == pytest.approx(ref['top1'], abs=1e-9)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**31 - 1), st.sampled_from(['l2', 'cosine']), st.booleans())
def test_top1_at_every_step(seed, distance, rank_merge):
    rng = np.random.default_rng(seed); n = int(rng.integers(2, 16))
    feats = lambda k: cosine_safe(tie_features(rng, k, distance))
    Go, Gn, gl = feats(n), feats(n), rng.integers(0, 3, n)
    Qo = feats(n) if rank_merge else None
    order = rng.permutation(n)
    H = step_hits(Gn, Go, Gn, gl, gl, order, None, distance, True, Qo, block_size=int(rng.integers(1, 5)))
    for k in range(n + 1):
        _, h = brute_metrics(brute_rows(Gn, Qo, Go, Gn, order, k, distance), gl, gl, True)
        np.testing.assert_array_equal(H[:, k], h)
    ref = retrieval_hits(Gn, Go, gl, gl, 1, distance)          # new-to-old top-1 as the NFR reference
    sc = step_curve(Gn, Go, Gn, gl, gl, order, distance, True, Qo, reference_hits=ref)
    if ref.any():
        np.testing.assert_allclose(sc['NFR@1'], 100 * (ref[:, None] & ~H).sum(0) / ref.sum())


def test_nfr_in_curve_matches_steps():
    rng = np.random.default_rng(0); n = 200
    Go, Gn, Gq = rng.normal(size=(n, 6)), rng.normal(size=(n, 6)), rng.normal(size=(n, 6))
    y = rng.integers(0, 8, n); order = random_order(n, 1)
    ref = retrieval_hits(Gq, Go, y, y)                              # old-old successes: RACT's Q^+
    df = backfill_curve(Gn, Go, Gn, y, y, order, np.linspace(0, 1, 11), ('top1', 'NFR@1'), reference_hits=ref)
    sc = step_curve(Gn, Go, Gn, y, y, order, reference_hits=ref)
    np.testing.assert_allclose(df['NFR@1'].to_numpy(), sc.loc[backfill_counts(df.index, n), 'NFR@1'].to_numpy())
    np.testing.assert_allclose(df['top1'].to_numpy(), sc.loc[backfill_counts(df.index, n), 'top1'].to_numpy())


def test_torch_inputs_and_fraction_order():
    rng = np.random.default_rng(1); n = 50
    Go, Gn, y = rng.normal(size=(n, 5)), rng.normal(size=(n, 5)), rng.integers(0, 5, n)
    fr = [1.0, 0.0, 0.5, 0.5]
    a = backfill_curve(Gn, Go, Gn, y, y, random_order(n), fr)
    b = backfill_curve(torch.tensor(Gn), torch.tensor(Go), torch.tensor(Gn), torch.tensor(y), y,
                       torch.tensor(random_order(n)), fr)
    assert list(a.index) == fr and a.equals(b)
    assert a.iloc[2].equals(a.iloc[3])


def test_float32_block_independence():
    rng = np.random.default_rng(2); n = 300
    Go, Gn = rng.normal(size=(n, 16)).astype(np.float32), rng.normal(size=(n, 16)).astype(np.float32)
    y = rng.integers(0, 20, n); o = random_order(n, 3); fr = np.linspace(0, 1, 11)
    a = backfill_curve(Gn, Go, Gn, y, y, o, fr, ('top1', 'top5', 'mAP', 'mAP@100'), block_size=7)
    b = backfill_curve(Gn, Go, Gn, y, y, o, fr, ('top1', 'top5', 'mAP', 'mAP@100'), block_size=300)
    np.testing.assert_allclose(a.to_numpy(), b.to_numpy(), atol=1e-9)


@pytest.mark.parametrize('bad, msg', [
    (dict(order=np.r_[0, 0, np.arange(2, 10)]), 'not a permutation'),
    (dict(fractions=[-0.1]), '[0, 1]'),
    (dict(gallery_new=np.full((10, 3), np.inf)), 'NaN or infinite'),
    (dict(gallery_labels=np.zeros(9)), 'gallery_labels has 9 entries'),
    (dict(gallery_new=np.zeros((10, 4))), 'gallery_new has shape'),
    (dict(metrics=('top1', 'AUC')), 'unknown metric'),
    (dict(distance='euclid'), 'is not one of'),
])
def test_clear_errors(bad, msg):
    rng = np.random.default_rng(0)
    kw = dict(query=rng.normal(size=(10, 3)), gallery_old=rng.normal(size=(10, 3)), gallery_new=rng.normal(size=(10, 3)),
              query_labels=np.arange(10) % 2, gallery_labels=np.arange(10) % 2, order=np.arange(10), fractions=[0, 1])
    kw.update(bad)
    with pytest.raises((ValueError, TypeError)) as e:
        backfill_curve(**kw)
    assert msg in str(e.value)


def test_plots_return_figures_with_areas():
    import matplotlib; matplotlib.use('Agg')
    from compatrepro.backfill import plot_backfill_curves, plot_nfr_curves, plot_flips
    from compatrepro.metrics import m_tilde
    rng = np.random.default_rng(0); n = 60
    Go, Gn, y = rng.normal(size=(n, 4)), rng.normal(size=(n, 4)), rng.integers(0, 4, n)
    fr = np.linspace(0, 1, 11)
    curves = {'random': backfill_curve(Gn, Go, Gn, y, y, random_order(n), fr, ('top1', 'NFR@1'),
                                       reference_hits=retrieval_hits(Go, Go, y, y))}
    fig = plot_backfill_curves(curves, 'top1', title='Synthetic, tiny scale')
    ax = fig.axes[0]
    assert ax.get_title() == 'Synthetic, tiny scale'
    assert f"({m_tilde(curves['random']['top1']):.2f})" in ax.get_legend().get_texts()[0].get_text()
    fig = plot_backfill_curves(curves, 'top1', title='t', area='auc')
    assert fig.axes[0].get_legend() is not None
    assert plot_nfr_curves(curves, title='t').axes[0].get_ylabel().startswith('NFR@1')
    sc = {'random': step_curve(Gn, Go, Gn, y, y, random_order(n))}
    assert len(plot_flips(sc, title='t').axes[0].lines) == 2
    with pytest.raises(KeyError, match='no column'):
        plot_backfill_curves(curves, 'mAP', title='t')
