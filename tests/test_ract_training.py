"RACT's training prerequisites: several compatibility terms in one model (RACT Figure 18, 'BCT + ra-comp') and eq. 13's `ra-comp-split` as a training method."
import copy, dataclasses, math
from dataclasses import replace

import numpy as np, pytest, torch
import torch.nn.functional as F

from compatrepro.runtime import RunContext, using_context

from compatrepro.core import spec_key
from compatrepro.data import get_split
from compatrepro import losses as L
from compatrepro import pipeline as P
from compatrepro import specs as SP, train as T
from _doubles import TinyDataset


pytestmark = pytest.mark.usefixtures('one_thread')

OLD = SP.backbone_spec('imagenet-500', 'smoke')
NEW = SP.backbone_spec('imagenet-1k', 'smoke')


def _batch():
    "A 2-d old model whose features are its inputs (classes 0, 1), and a batch with old classes 0, 1 and new class 5."
    old = T._IdentityBackbone(2, [0, 1])
    with torch.no_grad(): old.head.weight.copy_(2*torch.eye(2)); old.head.bias.zero_()
    x = torch.tensor([[1., 0.], [0., 2.], [1., 1.], [2., -1.]])
    y = torch.tensor([1, 5, 0, 1])
    phi_new = torch.tensor([[0., 1.], [3., 3.], [1., -1.], [1., 2.]], requires_grad=True)
    return old, x, y, phi_new, torch.tensor([0, 1, 5])


def test_tuple_of_one_term_is_the_term():
    old, x, y, p, ids = _batch()
    c = SP.CompatSpec('ra-comp', OLD, weight=0.7, tau=0.5)
    one = T.CompatTerms((c,), old, ids)(x, y, p)
    assert torch.equal(one, 0.7*T.CompatTerm(c, old, ids)(x, y, p))
    s1, s = replace(NEW, compat=(c,)), replace(NEW, compat=c)
    assert s1.compat == c and s1 == s                               # stored as the single term ...
    assert SP.backbone_key(s1) == SP.backbone_key(s)                # ... under today's cache key
    assert spec_key('backbone', SP.backbone_key(s1)) == spec_key('backbone', SP.backbone_key(s))


def test_two_terms_sum_their_weighted_losses():
    "RACT Figure 18: L = L_cls + lambda1 L_bct + lambda2 L_ra-comp, each term as computed alone."
    old, x, y, p, ids = _batch()
    bct, ra = SP.CompatSpec('bct', OLD, weight=0.3), SP.CompatSpec('ra-comp', OLD, weight=2.0, tau=0.5)
    both = T.CompatTerms((bct, ra), old, ids)(x, y, p)
    l_bct = F.cross_entropy(p.detach()[[0, 2, 3]] @ (2*torch.eye(2)).T, torch.tensor([1, 0, 1]))   # old classes only
    l_ra = L.ra_comp_loss(p.detach(), x, y, tau=0.5)
    assert torch.allclose(both, 0.3*l_bct + 2.0*l_ra, atol=1e-6)
    both.backward(); assert p.grad is not None and p.grad.abs().sum() > 0
    spec = replace(NEW, compat=(bct, ra))
    assert SP.compat_methods(spec) == ('bct', 'ra-comp') and SP.compat_old(spec) == OLD
    assert SP.BackboneSpec(**dataclasses.asdict(spec)) == spec                # a stored spec reads back
    assert spec_key('backbone', SP.backbone_key(spec)) != spec_key('backbone', SP.backbone_key(replace(NEW, compat=ra)))
    v = P.backbone_versions(spec)                                   # the pipeline records every method and the old model's versions
    assert {'compat:bct', 'compat:ra-comp'} <= set(v) and set(P.backbone_versions(OLD)) <= set(v)


def test_terms_with_different_old_models_are_refused():
    with pytest.raises(ValueError, match='same `old` spec'):
        replace(NEW, compat=(SP.CompatSpec('bct', OLD), SP.CompatSpec('ra-comp', replace(OLD, seed=1))))
    with pytest.raises(ValueError, match='CompatSpecs only'):
        replace(NEW, compat=(SP.CompatSpec('bct', OLD), 'ra-comp'))
    with pytest.raises(ValueError, match='pass None'):
        replace(NEW, compat=())


def _eq13(pn, po, y, eta, tau):
    "RACT eq. 13 written out: -[log(e^{s_no(x,x)} / (e^{s_no(x,x)} + sum_k e^{s_no(x,k)})) + eta log(e^{s_no(x,x)} / (e^{s_no(x,x)} + sum_k e^{s_nn(x,k)}))], k over other classes."
    pn, po = F.normalize(pn.double(), dim=1), F.normalize(po.double(), dim=1)
    out = []
    for i in range(len(y)):
        pos = math.exp(float(pn[i] @ po[i])/tau)
        neg = [k for k in range(len(y)) if y[k] != y[i]]
        d_no = pos + sum(math.exp(float(pn[i] @ po[k])/tau) for k in neg)
        d_nn = pos + sum(math.exp(float(pn[i] @ pn[k])/tau) for k in neg)
        out.append(-(math.log(pos/d_no) + eta*math.log(pos/d_nn)))
    return sum(out)/len(out)


@pytest.mark.parametrize('eta', [0.0, 0.2, 1.0, 5.0])
def test_ra_comp_split_term_is_eq13(eta):
    old, x, y, p, ids = _batch()
    c = SP.CompatSpec('ra-comp-split', OLD, tau=0.5, eta=eta)
    assert 'ra-comp-split' in SP.COMPAT_METHODS
    assert abs(float(T.CompatTerm(c, old, ids)(x, y, p).detach()) - _eq13(p.detach(), x, y, eta, 0.5)) < 1e-5


def test_eta_is_part_of_the_key():
    "Another eta is another model (RACT eq. 13)."
    k = lambda e: spec_key('backbone', SP.backbone_key(replace(NEW, compat=SP.CompatSpec('ra-comp-split', OLD, eta=e))))
    assert k(1.0) != k(2.0)


def _one_step(ds, n):
    "The first `n` images of a stand-in split (all its classes kept for the head): one training step at batch `n`."
    ds = copy.copy(ds); ds.images, ds.labels = ds.images[:n], ds.labels[:n]
    return ds


@pytest.mark.parametrize('compat', ['ra-comp-split', 'bct+ra-comp'])
def test_one_training_step_on_the_smoke_standin(compat):
    old_ds, new_ds = get_split('imagenet-500', 'train', 'smoke'), get_split('imagenet-1k', 'train', 'smoke')
    old = T.initial_model(OLD, old_ds).eval()
    terms = (SP.CompatSpec('ra-comp-split', OLD, tau=0.5, eta=2.0) if compat == 'ra-comp-split'
             else (SP.CompatSpec('bct', OLD, weight=0.5), SP.CompatSpec('ra-comp', OLD, tau=0.5)))
    ds = _one_step(new_ds, 32)
    spec = replace(NEW, compat=terms, batch_size=32, warmup_epochs=0.)
    art = T.train_backbone(spec, ds, old, device='cpu', show_progress=False)
    assert len(art['history']) == 1 and np.isfinite(art['history'][0]['loss'])
    plain = T.train_backbone(replace(spec, compat=None), ds, device='cpu', show_progress=False)
    w = lambda a: a['model']['state_dict']['embedding.weight']
    assert not torch.equal(w(art), w(plain))                         # the term entered the step
    assert SP.BackboneSpec(**art['spec']) == spec


def test_pipeline_trains_two_terms_against_the_one_old_model(monkeypatch, tmp_path):
    "cached_backbone of a 'bct + ra-comp' spec: its old model is trained (once) and handed to the trainer; both methods' versions are noted."
    def split(name, part, scale='tiny', data_root=None, seed=0, **kw):
        ds = TinyDataset(n=32, c=4, size=16, seed=0)
        if name == 'imagenet-500':
            keep = ds.labels < 2
            ds.images, ds.labels = ds.images[torch.from_numpy(keep)], ds.labels[keep]; ds.classes = np.unique(ds.labels)
        return ds
    monkeypatch.setattr(P, 'get_split', split)
    b = lambda s, **kw: SP.BackboneSpec(**dict(split=s, scale='tiny', arch='resnet18', emb_dim=8, epochs=1, batch_size=8, lr=0.4,
                                               warmup_epochs=0) | kw)
    old = b('imagenet-500')
    spec = b('imagenet-1k', compat=(SP.CompatSpec('bct', old, weight=0.5), SP.CompatSpec('ra-comp', old, tau=0.5)))
    seen, real = [], P.train_backbone
    monkeypatch.setattr(P, 'train_backbone', lambda s, ds, o=None, **kw: (seen.append((s.split, o)), real(s, ds, o, **kw))[1])
    with using_context(RunContext(cache=tmp_path, device='cpu', progress=False)) as ctx:
        art = P.cached_backbone(spec)
        assert [s for s, _ in seen] == ['imagenet-500', 'imagenet-1k'] and seen[1][1].class_ids.tolist() == [0, 1]
        assert {'compat:bct', 'compat:ra-comp'} <= set(ctx.used)
        assert ('backbone', SP.backbone_key(spec)) in ctx.cache and np.isfinite(art['history'][-1]['loss'])
