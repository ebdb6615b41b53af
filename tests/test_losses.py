"""Property tests of compatrepro.losses against slow, loop-by-loop references written from the papers' equations."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings, strategies as st

from compatrepro import losses as L

SETTINGS = settings(max_examples=25, deadline=None)


def batch(seed, n, d, n_cls):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(n, d, generator=g, dtype=torch.float64), torch.randn(n, d, generator=g, dtype=torch.float64),
            torch.randn(n, d, generator=g, dtype=torch.float64), torch.randint(0, n_cls, (n,), generator=g))


def cos(a, b): return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


# ---- RACT eqs. (5), (6), (13): a per-anchor loop over k in B \ p(x) ----
def ract_ref(pn, po, y, tau, kind, eta=1.):
    pn, po, y = pn.numpy(), po.numpy(), y.numpy()
    out = []
    for i in range(len(y)):
        pos = math.exp(cos(pn[i], po[i]) / tau)
        negs = [k for k in range(len(y)) if y[k] != y[i]]
        n2o = sum(math.exp(cos(pn[i], po[k]) / tau) for k in negs)
        n2n = sum(math.exp(cos(pn[i], pn[k]) / tau) for k in negs)
        if kind == 'comp': out.append(-math.log(pos / (pos + n2o)))
        if kind == 'ra': out.append(-math.log(pos / (pos + n2o + n2n)))
        if kind == 'split': out.append(-math.log(pos / (pos + n2o)) - eta * math.log(pos / (pos + n2n)))
    return torch.tensor(out, dtype=torch.float64)


@SETTINGS
@given(seed=st.integers(0, 10**6), n=st.integers(1, 7), n_cls=st.integers(1, 4), tau=st.sampled_from([0.05, 0.5, 1.0]))
def test_ract_contrastive_match_loop_reference(seed, n, n_cls, tau):
    pn, po, _, y = batch(seed, n, 3, n_cls)
    torch.testing.assert_close(L.comp_loss(pn, po, y, tau=tau, reduction='none'), ract_ref(pn, po, y, tau, 'comp'))
    torch.testing.assert_close(L.ra_comp_loss(pn, po, y, tau=tau, reduction='none'), ract_ref(pn, po, y, tau, 'ra'))
    torch.testing.assert_close(L.ra_comp_split_loss(pn, po, y, eta=0.7, tau=tau, reduction='none'),
                               ract_ref(pn, po, y, tau, 'split', eta=0.7))


@SETTINGS
@given(seed=st.integers(0, 10**6), n=st.integers(2, 7), scale=st.floats(0.1, 10.))
def test_ract_losses_scale_invariant_and_ra_not_below_comp(seed, n, scale):
    pn, po, _, y = batch(seed, n, 4, 3)
    for f in (L.comp_loss, L.ra_comp_loss, L.comp_triplet_loss, L.ra_comp_triplet_loss):
        torch.testing.assert_close(f(pn * scale, po / scale, y), f(pn, po, y))
    assert (L.ra_comp_loss(pn, po, y, reduction='none') >= L.comp_loss(pn, po, y, reduction='none') - 1e-12).all()


def triplet_ref(pn, po, y, m, ra):
    pn, po, y = pn.numpy(), po.numpy(), y.numpy()
    out = []
    for i in range(len(y)):
        negs = [k for k in range(len(y)) if y[k] != y[i]]
        p = cos(pn[i], po[i])
        terms = [max(cos(pn[i], po[k]) - p + m, 0) + (max(cos(pn[i], pn[k]) - p + m, 0) if ra else 0) for k in negs]
        out.append(sum(terms) / len(negs) if negs else 0.)
    return torch.tensor(out, dtype=torch.float64)


@SETTINGS
@given(seed=st.integers(0, 10**6), n=st.integers(1, 7), m=st.sampled_from([0.2, 0.8]))
def test_ract_triplet_match_loop_reference(seed, n, m):
    pn, po, _, y = batch(seed, n, 3, 3)
    torch.testing.assert_close(L.comp_triplet_loss(pn, po, y, m=m, reduction='none'), triplet_ref(pn, po, y, m, False))
    torch.testing.assert_close(L.ra_comp_triplet_loss(pn, po, y, m=m, reduction='none'), triplet_ref(pn, po, y, m, True))


# ---- RM eqs. (10), (14), (11) with the half/half hard mining, per anchor ----
def rm_ref(rev, old, new, y, kind, mine, tau=1.):
    rev, old, new, y = rev.numpy(), old.numpy(), new.numpy(), y.numpy()
    n = len(y)
    def dist(a, b): return 1 - cos(a, b)
    def pick(ds, largest):
        ds = sorted(ds, key=lambda t: -t[1] if largest else t[1])
        return ds[:(len(ds) + 1) // 2] if mine else ds
    out = []
    for i in range(n):
        do = [(k, dist(rev[i], old[k])) for k in range(n)]
        dn = [(k, dist(new[i], new[k])) for k in range(n)]
        Po = pick([t for t in do if y[t[0]] == y[i]], True)                 # self pair kept: cross-model
        No = pick([t for t in do if y[t[0]] != y[i]], False)
        Pn = pick([t for t in dn if y[t[0]] == y[i] and t[0] != i], True)   # self pair dropped: trivial
        Nn = pick([t for t in dn if y[t[0]] != y[i]], False)
        S = lambda ts: sum(math.exp(-d / tau) for _, d in ts)
        def term(P, N, extra): return -math.log(S(P) / (S(P) + S(N) + extra)) if P else 0.
        if kind == 'cl': out.append(term(Po, No, 0.))
        if kind == 'clm': out.append(term(Po, No, 0.) + term(Pn, Nn, 0.))
        if kind == 'mcl': out.append(term(Po, No, S(Nn)) + term(Pn, Nn, S(No)))
    return torch.tensor(out, dtype=torch.float64)


@SETTINGS
@given(seed=st.integers(0, 10**6), n=st.integers(1, 8), n_cls=st.integers(1, 4), mine=st.booleans(),
       tau=st.sampled_from([1.0, 0.1]))
def test_rm_losses_match_loop_reference(seed, n, n_cls, mine, tau):
    rev, old, new, y = batch(seed, n, 3, n_cls)
    kw = dict(mine=mine, tau=tau, reduction='none')
    torch.testing.assert_close(L.cl_loss(rev, old, y, **kw), rm_ref(rev, old, new, y, 'cl', mine, tau))
    torch.testing.assert_close(L.cl_m_loss(rev, old, new, y, **kw), rm_ref(rev, old, new, y, 'clm', mine, tau))
    torch.testing.assert_close(L.mcl_loss(rev, old, new, y, **kw), rm_ref(rev, old, new, y, 'mcl', mine, tau))


@pytest.mark.parametrize('y', [[0], [0, 0, 0], [0, 1, 2], [0, 0, 1]])
def test_degenerate_batches_give_finite_gradients(y):
    y = torch.tensor(y); n = len(y)
    for f in (L.cl_m_loss, L.mcl_loss):
        rev, new = torch.randn(n, 3, requires_grad=True), torch.randn(n, 3, requires_grad=True)
        f(rev, torch.randn(n, 3), new, y).backward()
        assert torch.isfinite(rev.grad).all() and torch.isfinite(new.grad).all()
    for f in (L.comp_loss, L.ra_comp_loss, L.ra_comp_split_loss, L.comp_triplet_loss, L.ra_comp_triplet_loss):
        pn = torch.randn(n, 3, requires_grad=True)
        f(pn, torch.randn(n, 3), y).backward()
        assert torch.isfinite(pn.grad).all()


# ---- heads, CE, BCT, FastFill ----
@SETTINGS
@given(seed=st.integers(0, 10**6), eps=st.sampled_from([0., 0.1, 0.3]))
def test_label_smoothing_ce_formula(seed, eps):
    z, _, _, _ = batch(seed, 5, 4, 4)
    y = torch.arange(5) % 4
    logp = F.log_softmax(z, 1)
    ref = -(1 - eps) * logp[torch.arange(5), y] - eps * logp.mean(1)
    torch.testing.assert_close(L.label_smoothing_ce(z, y, eps=eps, reduction='none'), ref)


@SETTINGS
@given(m=st.floats(0.05, 1.0))
def test_arcface_target_logit_decreases_with_angle(m):
    # the ArcFace target logit must be monotone (non-increasing) in theta over [0, pi], guard included
    th = torch.linspace(0, math.pi, 200, dtype=torch.float64)
    f = torch.stack([torch.cos(th), torch.sin(th)], 1)
    z = L.arcface_logits(f, torch.tensor([[1., 0.]], dtype=torch.float64), torch.zeros(200, dtype=torch.long), s=1., m=m)[:, 0]
    assert (z[1:] <= z[:-1] + 1e-9).all()
    # sin(theta) is clamped at 1e-6 (finite gradient at theta = 0), hence atol 1e-5
    torch.testing.assert_close(z[th + m <= math.pi], torch.cos(th[th + m <= math.pi] + m), atol=1e-5, rtol=0)


def test_bct_influence_linear_is_ce_on_truncated_features():
    pn, _, _, _ = batch(0, 6, 5, 3)
    W, b = torch.randn(4, 3, dtype=torch.float64), torch.randn(4, dtype=torch.float64)
    y = torch.tensor([0, 1, 2, 3, 0, 1])
    torch.testing.assert_close(L.bct_influence_loss(pn, W, y, b), F.cross_entropy(pn[:, :3] @ W.T + b, y))


def test_bct_kd_influence_splits_old_and_new_classes():
    pn, po, _, _ = batch(1, 4, 3, 2)
    W = torch.randn(2, 3, dtype=torch.float64)
    y = torch.tensor([0, 3, 1, 2])          # 0, 1 old classes; 2, 3 new classes
    out = L.bct_kd_influence_loss(pn, po, W, y, reduction='none')
    torch.testing.assert_close(out[[0, 2]], L.bct_influence_loss(pn[[0, 2]], W, y[[0, 2]], reduction='none'))
    torch.testing.assert_close(out[[1, 3]], L.bct_kd_loss(pn[[1, 3]], po[[1, 3]], W, reduction='none'))


@SETTINGS
@given(seed=st.integers(0, 10**6), d=st.sampled_from([1, 16, 128]))
def test_fastfill_optimal_sigma_is_lambda_times_loss(seed, d):
    g = torch.Generator().manual_seed(seed)
    loss = torch.rand(6, generator=g, dtype=torch.float64) * 5 + 0.01
    s = torch.linspace(-12, 6, 4001, dtype=torch.float64)
    vals = L.fastfill_uncertainty_loss(loss[:, None].expand(6, len(s)).reshape(-1), s.repeat(6), d=d,
                                       reduction='none').reshape(6, -1)
    best = s[vals.argmin(1)]
    torch.testing.assert_close(best, torch.log(loss / d), atol=0.01, rtol=0)
    # the sigma ordering follows the loss ordering, for losses the grid can tell apart (their log-ratio spans
    # more than two grid steps; seed 253 drew 3.9716 and 3.9602, 0.003 apart in log, less than one step)
    step = float(s[1] - s[0])
    gap = torch.log(loss)[:, None] - torch.log(loss)[None, :]
    apart = gap.abs() > 2*step
    assert torch.equal(torch.sign(best[:, None] - best[None, :])[apart], torch.sign(gap)[apart])


def test_frozen_inputs_get_no_gradient():
    pn, po, pw, y = (t.float() if t.is_floating_point() else t for t in batch(2, 6, 4, 3))
    new = pn.clone().requires_grad_(); old = po.clone().requires_grad_(); W = torch.randn(3, 4, requires_grad=True)
    total = (L.bct_influence_loss(new, W, y) + L.l2_regression_loss(new, old) + L.comp_loss(new, old, y)
             + L.ra_comp_loss(new, old, y) + L.fct_l2_loss(new, old) + L.rqt_loss(new, old) + L.mcl_loss(new, old, new, y)
             + L.bct_kd_loss(new, old, W) + L.lwf_loss(new[:, :3], old[:, :3])
             + L.focal_distillation_loss(new, old, torch.ones(6, dtype=torch.bool)))
    total.backward()
    assert old.grad is None and W.grad is None and new.grad.abs().sum() > 0


def test_clear_errors():
    with pytest.raises(ValueError, match='out of range for 3 classes'):
        L.bct_influence_loss(torch.zeros(2, 4), torch.zeros(3, 4), torch.tensor([0, 3]))
    with pytest.raises(ValueError, match='has 3 rows but phi_new has 2'):
        L.ra_comp_loss(torch.zeros(2, 4), torch.zeros(3, 4), torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="reduction='max' is not one of"):
        L.fct_l2_loss(torch.zeros(2, 4), torch.zeros(2, 4), reduction='max')
    with pytest.raises(ValueError, match='compute them with reduction'):
        L.fastfill_uncertainty_loss(torch.zeros(2, 4), torch.zeros(2), d=4)
