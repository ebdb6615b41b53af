"""Conformance of the training losses, and of FCT's training loop, with values computed by the authors' own code.

Each `tests/conformance/losses_<paper>.json` holds the recipe of the inputs (numpy statements run here with `exec`),
fingerprints of the arrays it makes, and per case the values the authors' code gave on them: the loss, and its
gradient with respect to the new features (or the weights after FCT's epoch). They were computed outside the project
(the file's `source` says which repository, commit, paths and exact calls, and how the code was run). FastFill has no
public code: its file holds eqs. 3-5 transcribed literally, with gradients derived by hand; RM has none either:
its file holds eqs. 9-14 written as loops over anchors, with gradients by central differences. Where the package follows
another reading than the authors' code, the case holds the package's current values and the reason (`difference`),
and the test asserts those and that they still differ from the authors' (so a change on either side is noticed).
"""

import json
import math
import os
import tempfile
from dataclasses import replace
from pathlib import Path

os.environ.setdefault('COMPATREPRO_PROGRESS', '0')

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import compatrepro.losses as L
from compatrepro.specs import backbone_spec, transformation_spec
from compatrepro.train import TrainingInterrupted, _fit_transformation
from test_metric_conformance import fingerprint

HERE = Path(__file__).resolve().parent / 'conformance'
TOL = 1e-12  # float64 cases: every agreeing value matches to ~1e-14


def load(stem: str) -> tuple[dict, dict]:
    "The fixture `<stem>.json` and its regenerated inputs (bit-identical to the authors' run, by fingerprint)."
    doc = json.loads((HERE / f'{stem}.json').read_text())
    ns = {'np': np}
    exec('\n'.join(doc['recipe']), ns)
    for k, fp in doc['fingerprints'].items():
        assert fingerprint(ns[k]) == fp, (
            f"the recipe of {stem}.json no longer regenerates {k} (numpy changed its streams?)"
        )
    return doc, ns


def state_fingerprint(model) -> str:
    "The fingerprint of a network's state, every tensor in order (the fixtures' `initial_state_fingerprint`)."
    return fingerprint(np.concatenate([v.double().numpy().ravel() for v in model.state_dict().values()]))


def mse_of_unit(f, old):
    "nn.MSELoss of the L2-normalised features, as 2/d times eq. 3 of unit ones (both authors' l2 baselines)."
    d = f.shape[1]
    return 2 / d * L.l2_regression_loss(F.normalize(f, dim=1), F.normalize(old, dim=1))


def package_l2(feat_old, labels):
    """The package's l2 term (`CompatTerm`) at new-l2 (MSE)'s weight 2/d, with an old model whose features are its
    inputs (in float64, as the fixtures); the term computes in float32, so it agrees to float32's precision."""
    from compatrepro.specs import CompatSpec
    from compatrepro.train import CompatTerm, _IdentityBackbone

    d, classes = feat_old.shape[1], torch.arange(int(labels.max()) + 1)
    term = CompatTerm(CompatSpec('l2', backbone_spec('imdbface-50', 'smoke')), _IdentityBackbone(d, classes).double(),
                      classes)
    term.old_features = lambda x: x.double()
    return lambda f: 2 / d * term(feat_old, labels, f)


def case(doc: dict, name: str) -> dict:
    return next(c for c in doc['cases'] if c['name'] == name)


def value_and_grad(fn, x: np.ndarray) -> tuple[float, np.ndarray]:
    "fn's value at x (float64) and its gradient d fn / d x."
    t = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    v = fn(t)
    v.backward()
    return float(v.detach()), t.grad.numpy()


def assert_agrees(ours: tuple, authors: dict, grad_key: str = 'grad_feat_new', value_key: str = 'loss', tol=TOL):
    v, g = ours
    assert v == pytest.approx(authors[value_key], abs=tol)
    np.testing.assert_allclose(g, authors[grad_key], rtol=0, atol=tol)


def assert_still_differs(ours: tuple, c: dict, grad_key: str = 'grad_feat_new', value_key: str = 'loss'):
    "The package's values are the ones recorded, and they differ from the authors' in value or in gradient."
    v, g = ours
    now = c['package_current']
    assert v == pytest.approx(now[value_key], abs=TOL)
    np.testing.assert_allclose(g, now[grad_key], rtol=0, atol=TOL)
    a = c['authors']
    same = math.isclose(v, a[value_key], abs_tol=1e-9) and np.allclose(g, a[grad_key], rtol=0, atol=1e-9)
    assert not same, f"{c['name']}: the package now agrees with the authors' code; move the case to the agreeing tests"


# ---------------------------------------------------------------- RACT: TencentARC/OpenCompatible
RACT, R = load('losses_ract')
R_T = lambda k: torch.tensor(R[k])
R_Y = torch.tensor(R['labels'])
RACT_AGREE = {
    'contra_tau0.05': lambda f: L.comp_loss(f, R_T('feat_old'), R_Y, tau=0.05),
    'contra_tau0.01_gather_all': lambda f: L.comp_loss(f, R_T('feat_old'), R_Y, tau=0.01),
    'contra_ract_tau0.05': lambda f: L.ra_comp_loss(f, R_T('feat_old'), R_Y, tau=0.05),
    'bct_point2center': lambda f: L.bct_influence_loss(f, R_T('W_old'), R_Y),
    'lwf_temp0.01': lambda f: L.lwf_loss(f @ R_T('W_old').T, R_T('feat_old') @ R_T('W_old').T, T=0.01),
    'lwf_temp2': lambda f: L.lwf_loss(f @ R_T('W_old').T, R_T('feat_old') @ R_T('W_old').T, T=2.0),
    'fd_alpha1_beta5': lambda f: L.focal_distillation_loss(
        f, R_T('feat_old'), (f @ R_T('W_new').T).argmax(1) == R_Y, alpha=1.0, beta=5.0
    ),
}
RACT_DIFFER = {
    'contra_ract_tau0.05_gather_all': lambda f: L.ra_comp_loss(f, R_T('feat_old'), R_Y, tau=0.05),
    'triplet_top3': lambda f: L.comp_triplet_loss(f, R_T('feat_old'), R_Y, m=0.8),
    'triplet_ract_top3': lambda f: L.ra_comp_triplet_loss(f, R_T('feat_old'), R_Y, m=0.8),
}


@pytest.mark.parametrize('name', RACT_AGREE)
def test_ract_loss_agrees_with_opencompatible(name):
    assert_agrees(value_and_grad(RACT_AGREE[name], R['feat_new']), case(RACT, name)['authors'])


@pytest.mark.parametrize('name', RACT_DIFFER)
def test_ract_loss_reading_differs_from_opencompatible(name):
    assert_still_differs(value_and_grad(RACT_DIFFER[name], R['feat_new']), case(RACT, name))


def test_ra_comp_with_detached_keys_is_opencompatibles_gather_all():
    "The one difference of eq. 6 under gather_all: OpenCompatible's all_gather gives the new-to-new keys no gradient."

    def detached_keys(f):
        return L.ra_comp_loss(f, R_T('feat_old'), R_Y, tau=0.05, keys=(f.detach(), R_T('feat_old'), R_Y))

    assert_agrees(value_and_grad(detached_keys, R['feat_new']), case(RACT, 'contra_ract_tau0.05_gather_all')['authors'])


def test_ract_l2_is_mse_of_unit_features():
    """OpenCompatible's l2 is nn.MSELoss of unit features: 2/d times eq. 3's half squared distance of unit features,
    which is the package's l2 term at that weight."""
    c = case(RACT, 'l2')['authors']
    assert_agrees(value_and_grad(lambda f: mse_of_unit(f, R_T('feat_old')), R['feat_new']), c)
    assert_agrees(value_and_grad(package_l2(R_T('feat_old'), R_Y), R['feat_new']), c, tol=1e-7)


# ---------------------------------------------------------------- BCT: YantaoShen/openBCT
BCT, B = load('losses_bct')
B_T = lambda k: torch.tensor(B[k])
B_Y = torch.tensor(B['labels'])
C_OLD = len(B['old_of_new'])


def new_ce(f):
    "openBCT's criterion(output, target): the new classifier's cross-entropy, part of the loss whose gradient it gives."
    return F.cross_entropy(L.linear_logits(f, B_T('W_new'), B_T('b_new')), B_Y)


def test_bct_influence_on_old_classes_agrees_with_openbct():
    "eq. 8 with the old classifier (weight, bias) on the samples of old classes, mapped new -> old as n2o_map does."
    old = B_Y < C_OLD
    rows = B_T('old_of_new')[B_Y[old]]
    c = case(BCT, 'influence_old_classifier_old_classes')['authors']
    v, g = value_and_grad(
        lambda f: new_ce(f) + L.bct_influence_loss(f[old], B_T('W_old'), rows, B_T('b_old')), B['feat_new']
    )
    assert v == pytest.approx(c['ce_new'] + c['influence'], abs=TOL)
    np.testing.assert_allclose(g, c['grad_feat_new'], rtol=0, atol=TOL)


def test_bct_synthesised_classifier_agrees_with_openbct():
    "sec. 2.5: the class means of the old model's L2-normalised features (openBCT's ClassifierGenerator), every class."
    c = case(BCT, 'influence_synthesised_every_class')['authors']
    W = L.synthesized_classifier(B_T('feat_old'), B_Y, range(len(c['W_syn'])), normalize=True)
    np.testing.assert_allclose(W.numpy(), c['W_syn'], rtol=0, atol=TOL)
    W32 = W.float().double()  # openBCT loads the .npy with .float(): its old_fc holds float32-rounded weights
    v, g = value_and_grad(lambda f: new_ce(f) + L.bct_influence_loss(f, W32, B_Y), B['feat_new'])
    assert v == pytest.approx(c['ce_new'] + c['influence'], abs=TOL)
    np.testing.assert_allclose(g, c['grad_feat_new'], rtol=0, atol=TOL)


def test_bct_lwf_agrees_with_openbct():
    "openBCT's --lwf: plain softmax (T = 1) of the frozen old classifier on phi_new against it on the unit phi_old."
    c = case(BCT, 'lwf')['authors']
    z_old = L.linear_logits(F.normalize(B_T('feat_old'), dim=1), B_T('W_old'), B_T('b_old'))

    def loss(f):
        return new_ce(f) + L.lwf_loss(L.linear_logits(f, B_T('W_old'), B_T('b_old')), z_old, T=1.0)

    v, g = value_and_grad(loss, B['feat_new'])
    assert v == pytest.approx(c['ce_new'] + c['lwf'], abs=TOL)  # openBCT's value of the LwF term: its 'Old Loss' meter
    np.testing.assert_allclose(g, c['grad_feat_new'], rtol=0, atol=TOL)


def test_bct_l2_is_mse_of_unit_features():
    """openBCT's l2 (--l2 --use-feat) is nn.MSELoss of unit features over every sample, and so is the package's l2 term
    at new-l2 (MSE)'s weight 2/d; eq. 3 on raw features, the package's reading before, is not."""
    c = case(BCT, 'l2_same_dims')
    d = B['feat_new'].shape[1]
    assert_agrees(value_and_grad(lambda f: mse_of_unit(f, B_T('feat_old')), B['feat_new']), c['authors'], value_key='l2')
    assert_agrees(value_and_grad(package_l2(B_T('feat_old'), B_Y), B['feat_new']), c['authors'], value_key='l2',
                  tol=1e-7)
    raw = value_and_grad(lambda f: 2 / d * L.l2_regression_loss(f, B_T('feat_old')), B['feat_new'])[0]
    assert not math.isclose(raw, c['authors']['l2'], abs_tol=1e-6)


def test_bct_l2_probe_reading_is_openbcts():
    """The l2 reading that `benchmarks/bct_l2_probe.py` trains as openBCT's ('unit, every sample') gives openBCT's l2
    value and gradient, through a `CompatTerm` (the old model's features are its inputs) at new-l2 (MSE)'s weight 2/d;
    its 'raw, old classes' reading gives eq. 3 on the batch's old classes, the package's reading before l2's version 2."""
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / 'benchmarks'))
    from bct_l2_probe import l2_reading_term
    from compatrepro.specs import CompatSpec
    from compatrepro.train import _IdentityBackbone

    d = B['feat_new'].shape[1]
    old = _IdentityBackbone(d, torch.arange(C_OLD)).double()
    term = l2_reading_term(True, True)(CompatSpec('l2', backbone_spec('imdbface-50', 'smoke')), old, torch.arange(6))
    old_features = lambda x: x.double()   # the identity old model, in float64 as the fixture
    term.old_features = old_features
    # the term computes in float32 (`phi_new.float()`, as every CompatTerm): agreement to float32's precision
    assert_agrees(value_and_grad(lambda f: 2 / d * term(B_T('feat_old'), B_Y, f), B['feat_new']),
                  case(BCT, 'l2_same_dims')['authors'], value_key='l2', tol=1e-7)
    raw = l2_reading_term(False, False)(CompatSpec('l2', backbone_spec('imdbface-50', 'smoke')), old, torch.arange(6))
    raw.old_features = old_features
    known = B_Y < C_OLD
    v = value_and_grad(lambda f: raw(B_T('feat_old'), B_Y, f), B['feat_new'])[0]
    assert v == pytest.approx(float(L.l2_regression_loss(B_T('feat_new')[known], B_T('feat_old')[known])), abs=1e-6)


# ---------------------------------------------------------------- FastFill: eqs. 3-5 (no public code)
FF, FFI = load('losses_fastfill')


def test_fastfill_eq5_agrees_with_the_equation():
    c = case(FF, 'eq5_l2_disc_uncert')['authors']
    h = torch.tensor(FFI['h'], requires_grad=True)
    s = torch.tensor(FFI['log_sigma2'], requires_grad=True)
    per = L.l2_disc_loss(
        h,
        torch.tensor(FFI['phi_new']),
        L.linear_logits(h, torch.tensor(FFI['W']), torch.tensor(FFI['b'])),
        torch.tensor(FFI['y']),
        eps=FFI['eps'],
        reduction='none',
    )
    np.testing.assert_allclose(
        L.fct_l2_loss(h, torch.tensor(FFI['phi_new']), reduction='none').detach().numpy(), c['l2'], rtol=0, atol=TOL
    )
    loss = L.fastfill_uncertainty_loss(per, s, d=FFI['d'])
    assert L.fastfill_lambda(FFI['d']) == pytest.approx(FFI['lam'])
    loss.backward()
    assert float(loss) == pytest.approx(c['loss'], abs=TOL)
    np.testing.assert_allclose(h.grad.numpy(), c['grad_h'], rtol=0, atol=TOL)
    np.testing.assert_allclose(s.grad.numpy(), c['grad_log_sigma2'], rtol=0, atol=TOL)


def test_fastfill_eq4_agrees_with_the_equation():
    c = case(FF, 'eq4_l2_uncert')['authors']
    s = torch.tensor(FFI['log_sigma2'])

    def eq4(h):
        return L.fastfill_uncertainty_loss(
            L.fct_l2_loss(h, torch.tensor(FFI['phi_new']), reduction='none'), s, d=FFI['d']
        )

    assert_agrees(value_and_grad(eq4, FFI['h']), c, grad_key='grad_h')


# ---------------------------------------------------------------- RM: eqs. 9-14 (no public code)
RM, RMI = load('losses_rm')
RM_TERMS = {
    'rqt': lambda r, n, y, kw: L.rqt_loss(r, n.new_tensor(RMI['phi_old']), dist=kw['dist']),
    'cl': lambda r, n, y, kw: L.cl_loss(r, r.new_tensor(RMI['phi_old']), y, **kw),
    'cl_m': lambda r, n, y, kw: L.cl_m_loss(r, r.new_tensor(RMI['phi_old']), n, y, **kw),
    'mcl': lambda r, n, y, kw: L.mcl_loss(r, r.new_tensor(RMI['phi_old']), n, y, **kw),
}


@pytest.mark.parametrize('term', RM_TERMS)
@pytest.mark.parametrize('name', [c['name'] for c in RM['cases']])
def test_rm_loss_agrees_with_the_equations(name, term):
    "Value to 1e-12; gradients to 1e-8, the reference's being central differences."
    c = case(RM, name)
    a = c['authors'][term]
    r = torch.tensor(RMI['phi_rev'], requires_grad=True)
    n = torch.tensor(RMI['phi_new'], requires_grad=True)
    v = RM_TERMS[term](r, n, torch.tensor(RMI['y']), dict(dist=c['dist'], tau=RMI['tau'], mine=c['mine']))
    v.backward()
    assert float(v) == pytest.approx(a['loss'], abs=TOL)
    np.testing.assert_allclose(r.grad.numpy(), a['grad_phi_rev'], rtol=0, atol=1e-8)
    np.testing.assert_allclose(
        np.zeros_like(RMI['phi_new']) if n.grad is None else n.grad.numpy(), a['grad_phi_new'], rtol=0, atol=1e-8
    )


# ---------------------------------------------------------------- FCT: apple/ml-fct, the loss and one epoch of its loop
FCT, FI = load('losses_fct')


def fct_spec():
    "The package's FCT recipe (FastFill App. A.2 / ml-fct's config) for a 4 -> 4 transformation 8 wide, batches of 16."
    old, new = backbone_spec('imagenet-500', 'paper'), backbone_spec('imagenet-1000', 'paper')
    return transformation_spec(old, new, 'l2', inner_dim=8, side_info=old, batch_size=16)


def test_fct_recipe_is_mlfcts():
    s = fct_spec()
    assert (s.optimizer, s.lr, s.weight_decay, s.epochs, s.warmup_epochs, s.freeze_bn_epoch, s.lr_steps_per) == (
        'adam',
        5e-4,
        3.0517578125e-05,
        80,
        5.0,
        40,
        'epoch',
    )  # configs/*_transformation.yaml, train_transformation.py


def test_fct_loss_of_the_recipe_is_mlfcts_mse():
    """ml-fct's criterion is nn.MSELoss (a mean over the d dimensions too), and so is the recipe's (`l2_dims='mean'`);
    FastFill's eq. 4 as written (`dims='sum'`) is d times it."""
    c = case(FCT, 'loss_first_batch')
    o, n, s = (torch.tensor(FI[k][:16]) for k in ('phi_old', 'phi_new', 'side'))
    import compatrepro.models as M
    from compatrepro.runtime import seed_everything

    seed_everything(fct_spec().seed)
    net = M.make_transformation('fct', old_dim=4, new_dim=4, side_dim=4, inner_dim=8).train()
    assert state_fingerprint(net) == FCT['initial_state_fingerprint'], (
        "the package draws other initial weights: remake the fixture"
    )
    h = net(o, s)
    assert fct_spec().l2_dims == 'mean'
    assert float(L.fct_l2_loss(h, n, dims=fct_spec().l2_dims)) == pytest.approx(c['authors']['loss'], rel=1e-6)
    summed = float(L.fct_l2_loss(h, n, dims='sum'))
    assert summed == pytest.approx(FI['D'] * c['authors']['loss'], rel=1e-6)
    assert summed == pytest.approx(c['package_current']['loss'], rel=1e-6)


def fct_epoch_state(spec) -> dict:
    "The package's trainer loop (`_fit_transformation`) for one epoch of the fixture's three batches, in their order."
    T = lambda k, i: torch.tensor(FI[k][i : i + 16])

    def batches(epoch):
        for i in range(0, 48, 16):
            yield T('phi_old', i), T('phi_new', i), torch.tensor(FI['labels'][i : i + 16]), T('side', i)

    ck = Path(tempfile.mkdtemp()) / 'fct.pt'
    with pytest.raises(TrainingInterrupted):  # stop_after=1 checkpoints the epoch and stops
        _fit_transformation(spec, (4, 4, 4), 3, batches, None, ck, torch.device('cpu'), 1, False)
    return torch.load(ck, weights_only=False)


def test_fct_epoch_equals_mlfcts_loop():
    """The loop (Adam, weight decay, epoch 0's warm-up lr, BatchNorm in training mode) and, in the recipe, the criterion
    are ml-fct's; under eq. 4's sum the package's loop is ml-fct's loop with the squared norm as criterion."""
    mse, sq = case(FCT, 'one_epoch_mse'), case(FCT, 'one_epoch_squared_norm')
    gap = lambda ck, c: max(
        float(np.abs(ck['model'][k].double().numpy() - np.array(v)).max())
        for k, v in c['authors']['state_after'].items()
    )
    recipe, summed = fct_epoch_state(fct_spec()), fct_epoch_state(replace(fct_spec(), l2_dims='sum'))
    for ck, c in ((recipe, mse), (summed, sq)):
        assert ck['history'][0]['loss'] == pytest.approx(c['authors']['epoch_loss'], rel=1e-6)
        assert set(c['authors']['state_after']) == set(ck['model'])
        assert gap(ck, c) <= 2e-7  # float32 rounding: the same three steps
    assert gap(summed, mse) >= 3e-7  # the two readings differ: weight decay weighs d times more under the mean
    assert gap(summed, mse) == pytest.approx(mse['package_current']['max_abs_weight_difference'], rel=0.05)


# ---------------------------------------------------------------- BCT: one training step of openBCT's train()
STEP, SI = load('bct_step_openbct')


def test_bct_step_equals_openbcts_train():
    "new-beta's first SGD step (CE + eq. 8 on the old classes' samples, momentum, weight decay): same start and batch."
    from _doubles import TinyDataset
    from compatrepro.specs import CompatSpec, BackboneSpec
    from compatrepro.train import initial_model, train_backbone

    def dataset(old_classes_only: bool):
        ds = TinyDataset(n=18, c=6, size=16)
        ds.images, ds.labels = torch.from_numpy(SI['images']), SI['labels']
        if old_classes_only:
            keep = ds.labels < 3
            ds.images, ds.labels = ds.images[torch.from_numpy(keep)], ds.labels[keep]
        ds.classes = np.unique(ds.labels)
        return ds

    common = STEP['specs']['common']
    old_spec = BackboneSpec(split='imagenet-500', **common)
    spec = BackboneSpec(split='imagenet-1k', compat=CompatSpec('bct', old_spec), **common)
    new0 = initial_model(spec, dataset(False))
    assert state_fingerprint(new0) == STEP['initial_state_fingerprint'], (
        "the package draws other initial weights: remake the fixture"
    )
    art = train_backbone(
        spec,
        dataset(False),
        initial_model(old_spec, dataset(True)).eval(),
        device='cpu',
        num_workers=0,
        show_progress=False,
    )
    assert art['history'][0]['loss'] == pytest.approx(
        STEP['authors']['ce_new'] + STEP['authors']['influence'], rel=1e-6
    )
    ref = np.load(HERE / 'bct_step_openbct.npz')
    sd = art['model']['state_dict']
    assert set(ref.files) == set(sd)
    for k in ref.files:
        np.testing.assert_allclose(sd[k].double().numpy(), ref[k], rtol=0, atol=2e-7, err_msg=k)
    moved = max(float(np.abs(sd[k].double().numpy() - new0.state_dict()[k].double().numpy()).max()) for k in ref.files)
    assert moved > 1e-3  # the step moved the weights far more than the tolerance


def test_bct_syn_builds_another_classifier_than_openbct():
    """openBCT's --generate-cls synthesises every class's row, old classes too; the package's bct-syn keeps the old
    model's learned rows for the old classes and appends the new classes' synthesised rows at the learned rows' mean
    norm (docs/conformance.md). Same loss on the same classifier; another classifier."""
    from compatrepro.specs import CompatSpec
    from compatrepro.train import CompatTerm, _IdentityBackbone

    W_syn = np.array(case(BCT, 'influence_synthesised_every_class')['authors']['W_syn'])
    old = _IdentityBackbone(B['feat_old'].shape[1], range(C_OLD))
    with torch.no_grad():
        old.head.weight.copy_(B_T('W_old'))
        old.head.bias.copy_(B_T('b_old'))

    class Train:
        classes = np.arange(len(W_syn))

    term = CompatTerm(
        CompatSpec('bct-syn', backbone_spec('imagenet-500', 'tiny')),
        old,
        torch.arange(len(W_syn)),
        Train(),
        feature_fn=lambda model, ds: (B_T('feat_old'), B_Y),
    )
    W = term.W.double().numpy()
    np.testing.assert_allclose(W[:C_OLD], B['W_old'], rtol=0, atol=1e-6)  # the learned rows, not synthesised ones
    assert np.abs(W[:C_OLD] - W_syn[:C_OLD]).max() > 0.1
    unit = W_syn[C_OLD:] / np.linalg.norm(W_syn[C_OLD:], axis=1, keepdims=True)
    np.testing.assert_allclose(W[C_OLD:], unit * np.linalg.norm(B['W_old'], axis=1).mean(), rtol=0, atol=1e-5)
