"""Single-gallery metrics against scikit-learn / scipy references on random cases with ties."""
import os
os.environ.setdefault('COMPATREPRO_PROGRESS', '0')

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st
from scipy.stats import kendalltau
from sklearn.metrics import roc_curve
from sklearn.neighbors import NearestNeighbors

from compatrepro.metrics import (retrieval_metrics, brute_force_metrics, tie_features, tar_at_far, kendall_tau,
                                 order_ranks, roxford_relevance, nfr, flips, m_tilde, auc, update_gain)
from compatrepro.retrieval import knn


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**31 - 1), st.sampled_from(['l2', 'cosine']), st.booleans(), st.integers(1, 8))
def test_retrieval_metrics_equal_sklearn(seed, distance, qig, block):
    rng = np.random.default_rng(seed); n = int(rng.integers(2, 40))
    G = tie_features(rng, n, distance); G[(G == 0).all(1), 0] = 1
    gl = rng.integers(0, int(rng.integers(1, 8)), n)
    if qig: Q, ql = G, gl
    else:
        m = int(rng.integers(1, 15)); Q = tie_features(rng, m, distance); Q[(Q == 0).all(1), 0] = 1
        ql = rng.integers(0, 9, m)
    names = ('top1', 'top3', 'mAP', 'mAP@4')
    ours = retrieval_metrics(Q, G, ql, gl, names, distance, qig, block_size=block)
    ref = brute_force_metrics(Q, G, ql, gl, distance, qig, ks=(1, 3), map_k=(4,))
    if ours['n_skipped'] == len(Q):
        assert all(ours[k] == 0 for k in names); return
    for k in names: assert ours[k] == pytest.approx(ref[k], abs=1e-9), k


def test_per_query_and_skipped():
    X = np.array([[0.], [1.], [5.]]); y = ['a', 'a', 'b']
    pq = retrieval_metrics(X, X, y, y, ('top1', 'mAP'), per_query=True)
    assert pq['top1'].tolist()[:2] == [100., 100.] and np.isnan(pq['top1'][2])
    r = retrieval_metrics(X, X, y, y)
    assert (r['n_queries'], r['n_skipped'], r['top1']) == (3, 1, 100.)


def test_roxford_junk_is_ignored():
    G = np.array([[0.], [1.], [2.], [3.]]); Q = np.array([[0.]])
    gnd = [dict(easy=[2], hard=[3], junk=[0, 1])]
    r = retrieval_metrics(Q, G, metrics=('rmAP',), query_is_gallery=False, relevance=roxford_relevance(gnd))
    assert r['rmAP'] == pytest.approx(100.)            # both relevant items rank first once junk is removed
    h = retrieval_metrics(Q, G, metrics=('rmAP',), query_is_gallery=False, relevance=roxford_relevance(gnd, 'hard'))
    assert h['rmAP'] == pytest.approx(100.)            # hard: the easy image (rank 0 once junk goes) is junk too


def test_tar_at_far_matches_roc():
    rng = np.random.default_rng(0)
    s = rng.integers(0, 50, 3000) / 7.; y = rng.random(3000) < 0.2
    fpr, tpr, _ = roc_curve(y, s, drop_intermediate=False)
    for f in (1e-4, 1e-3, 1e-2, 0.3):
        assert tar_at_far(s, y, f) == pytest.approx(100 * tpr[fpr <= f].max())


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 300), st.integers(0, 2**31 - 1))
def test_kendall_tau_matches_scipy(n, seed):
    rng = np.random.default_rng(seed); a, b = rng.permutation(n), rng.permutation(n)
    assert kendall_tau(a, b) == pytest.approx(kendalltau(order_ranks(a), order_ranks(b)).statistic, abs=1e-12)


def test_kendall_tau_large_is_fast():
    rng = np.random.default_rng(0); n = 50_000
    s = rng.normal(size=n); a = np.argsort(s); b = np.argsort(s + rng.normal(size=n))
    assert kendall_tau(a, b) == pytest.approx(kendalltau(order_ranks(a), order_ranks(b)).statistic, abs=1e-12)


@pytest.mark.parametrize('backend', ['torch', 'faiss'])
@pytest.mark.parametrize('distance', ['l2', 'cosine'])
def test_knn_matches_sklearn(backend, distance):
    rng = np.random.default_rng(1); G = rng.normal(size=(500, 12)).astype(np.float32); Q = G[:50] + 0.01
    ref = NearestNeighbors(n_neighbors=10, algorithm='brute', metric='euclidean' if distance == 'l2' else 'cosine').fit(G)
    rd, ri = ref.kneighbors(Q)
    d, i = knn(torch.tensor(Q), G, 10, distance, backend=backend, block_size=13)
    np.testing.assert_array_equal(i.numpy(), ri); np.testing.assert_allclose(d.numpy(), rd, atol=1e-4)


def test_small_helpers():
    assert nfr(np.array([1, 1, 0], bool), np.array([0, 1, 1], bool)) == pytest.approx(50.)
    assert flips(np.array([1, 1, 0], bool), np.array([0, 1, 1], bool)) == (1, 1)
    with pytest.raises(TypeError, match='boolean'): nfr([1, 0], [1, 1])
    assert m_tilde([0, 50, 100]) == 50. and auc([0, 50, 100], [0, .5, 1]) == 50.
    with pytest.raises(ValueError, match='fails BCT eq. 2'): update_gain(1., 2., 3.)
