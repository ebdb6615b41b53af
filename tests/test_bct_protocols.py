"""BCT's model and protocol prerequisites: the ReLU after the embedding (Table 3, phi^ReLU), equal optimizer
steps per architecture on the stand-in, the IJB-C style face protocols at the template level (1:1 verification with
one model per side, 1:N open-set search over two disjoint galleries) and the partial-backfilling curve of BCT Figure 3."""
from dataclasses import replace

import numpy as np
import pytest
import torch

from compatrepro.core import spec_key
from compatrepro.models import EmbeddingModel, load_model
from compatrepro.specs import BackboneSpec, backbone_key, backbone_spec
from compatrepro.train import train_backbone


class _TinyDS(torch.utils.data.Dataset):
    "Eight random 32x32 images of two classes (ids 3 and 7): enough for one short epoch through the DataLoader path."
    classes = np.array([3, 7])
    def __init__(self):
        g = torch.Generator().manual_seed(0)
        self.x, self.y = torch.randn(8, 3, 32, 32, generator=g), [3, 7] * 4
    def __len__(self): return 8
    def __getitem__(self, i): return self.x[i], self.y[i]


def test_embedding_relu_features_are_nonnegative_and_default_unchanged():
    torch.manual_seed(0)
    plain = EmbeddingModel('resnet10', emb_dim=16, class_ids=4, scale='tiny').eval()
    relu = EmbeddingModel('resnet10', emb_dim=16, class_ids=4, scale='tiny', embedding_relu=True).eval()
    relu.load_state_dict(plain.state_dict())
    x = torch.randn(5, 3, 32, 32)
    with torch.no_grad():
        f, fr = plain(x), relu(x)
        assert (f < 0).any()                                                   # without it: the linear layer's output
        torch.testing.assert_close(f, plain.embedding(torch.flatten(plain.backbone(x), 1)))
        assert (fr >= 0).all()
        torch.testing.assert_close(fr, torch.relu(f))


def test_embedding_relu_spec_trains_a_relu_model_and_keeps_default_keys():
    spec = BackboneSpec(split='imagenet-500', scale='smoke', arch='resnet10', emb_dim=8, epochs=1, batch_size=4,
                        warmup_epochs=0., optimizer='adam', lr=1e-3, lr_batch=4, augment=False, embedding_relu=True)
    art = train_backbone(spec, _TinyDS(), device='cpu', num_workers=0, show_progress=False)
    assert art['model']['config']['embedding_relu'] is True
    with torch.no_grad(): f = load_model(art)(_TinyDS().x)
    assert (f >= 0).all()
    # phi^ReLU is another model: an address of its own (06a_specs pins the default spec's address)
    t = backbone_spec('imagenet-500', 'tiny')
    assert spec_key('backbone', backbone_key(replace(t, embedding_relu=True))) != spec_key('backbone', backbone_key(t))


def test_steps_like_gives_every_architecture_the_same_optimizer_steps():
    from compatrepro.models import ARCHS
    from compatrepro.specs import STANDIN_RECIPES, TINY_ARCH_RECIPES
    ref = backbone_spec('imagenet-1k', 'tiny', arch='resnet18')
    for arch in ARCHS:
        s = backbone_spec('imagenet-1k', 'tiny', arch=arch, steps_like='resnet18')
        warmup = TINY_ARCH_RECIPES.get(arch, {}).get('warmup_epochs', ref.warmup_epochs)   # the ViT keeps its own warm-up
        assert (s.arch, s.epochs, s.batch_size, s.warmup_epochs) == (arch, ref.epochs, ref.batch_size, warmup)
    # without steps_like, a deeper model keeps the recipe's own (fewer) epochs
    assert backbone_spec('imagenet-1k', 'tiny', arch='resnet152').epochs == STANDIN_RECIPES['tiny'][1]['resnet152']
    with pytest.raises(ValueError, match='not an architecture'): backbone_spec('imagenet-1k', 'tiny', steps_like='r18')


# ---- face protocols at the template level (10_metrics) ----
from sklearn.metrics import roc_curve
from compatrepro.metrics import (open_set_search, pair_verification, tar_far_points, template_features, template_labels,
                                 tpir_at_fpir)


def _unit(x): return x / np.linalg.norm(x, axis=1, keepdims=True)


def _random_templates(rng, n_img=120, n_tpl=30, n_id=8, d=4):
    tid = rng.permutation(np.r_[np.arange(n_tpl), rng.integers(0, n_tpl, n_img - n_tpl)])   # every template has an image
    ident = rng.integers(0, n_id, n_tpl)
    centers = rng.normal(size=(n_id, d))
    new = centers[ident[tid]] + 0.8 * rng.normal(size=(n_img, d))
    old = centers[ident[tid]] @ rng.normal(size=(d, d)) * 0.3 + 0.8 * rng.normal(size=(n_img, d))
    return tid, ident, new, old


def test_template_features_is_the_normalised_mean():
    rng = np.random.default_rng(1)
    tid, ident, new, _ = _random_templates(rng)
    ids, T = template_features(new, tid)
    ref = _unit(np.stack([new[tid == t].mean(0) for t in ids]))
    np.testing.assert_allclose(T.numpy(), ref, rtol=1e-5, atol=1e-6)
    assert template_labels(tid, ident[tid])[1].tolist() == ident[ids].tolist()
    with pytest.raises(ValueError, match='NaN'): template_features(np.where(new > 2, np.nan, new), tid)


@pytest.mark.parametrize('seed', [0, 1, 2])
def test_pair_verification_matches_sklearn_roc(seed):
    rng = np.random.default_rng(seed)
    tid, ident, new, old = _random_templates(rng, n_img=300, n_tpl=80)
    tn, to = template_features(new, tid), template_features(old, tid)
    pairs = rng.integers(0, 80, size=(600, 2))
    gen = ident[pairs[:, 0]] == ident[pairs[:, 1]]
    scores = (_unit(tn[1].numpy())[pairs[:, 0]] * _unit(to[1].numpy())[pairs[:, 1]]).sum(1)   # cos(phi_new(a), phi_old(b))
    fars = (0.0, 1e-3, 1e-2, 0.1, 0.5)
    r = pair_verification(tn, to, pairs, gen, fars)
    fpr, tpr, thr = roc_curve(gen, scores, drop_intermediate=False)
    for f in fars:
        i = np.nonzero(fpr <= f + 1e-12)[0][-1]
        assert r[f'TAR@FAR={f:g}'] == pytest.approx(100 * tpr[i], abs=1e-9)
        assert r[f'false_accepts@FAR={f:g}'] == round(fpr[i] * (~gen).sum())
        assert r[f'false_accepts@FAR={f:g}'] <= f * (~gen).sum() + 1e-9
    assert (r['n_impostor'], r['n_genuine']) == (int((~gen).sum()), int(gen.sum()))
    # the ids are template ids, not rows: shuffling the templates' order changes nothing
    perm = rng.permutation(80)
    r2 = pair_verification((tn[0][perm], tn[1][perm]), to, pairs, gen, fars)
    assert r2 == pytest.approx(r)


def test_pair_verification_errors_say_what_is_wrong():
    ids, T = np.array([10, 11]), np.eye(2)
    with pytest.raises(ValueError, match=r'template ids \[12\]'): pair_verification((ids, T), (ids, T), [[10, 12]], [True])
    with pytest.raises(ValueError, match=r'\(P, 2\)'): pair_verification((ids, T), (ids, T), [10, 11], [True])
    with pytest.raises(ValueError, match='NaN'): pair_verification((ids, T * np.nan), (ids, T), [[10, 11], [11, 11]], [False, True])
    with pytest.raises(TypeError, match='boolean'): tar_far_points([0.1, 0.2], [0.5, 1.0])


def _brute_tpir(P, pl, G, gl, f, k=1):
    "TPIR@FPIR and rank-k by the definitions, one probe at a time (ties: an impostor at equal score ranks first)."
    P, G = _unit(P), _unit(G)
    S = P @ G.T
    mated = np.isin(pl, gl)
    best = S.max(1)
    nm = np.sort(best[~mated])[::-1]                               # non-mated best scores, high to low
    allowed = int(np.floor(f * len(nm) + 1e-9))
    thr = nm[allowed] if allowed < len(nm) else -np.inf            # accept a score strictly above thr
    tp, hitk = 0, 0
    for i in np.nonzero(mated)[0]:
        s_mate = S[i, gl == pl[i]].max(); s_imp = S[i, gl != pl[i]].max(initial=-np.inf)
        if s_mate > s_imp and s_mate > thr: tp += 1
        if (S[i, gl != pl[i]] >= s_mate).sum() < k: hitk += 1
    return 100 * tp / mated.sum(), 100 * hitk / mated.sum()


@pytest.mark.parametrize('seed', [0, 1])
def test_open_set_search_two_galleries_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    tid, ident, new, old = _random_templates(rng, n_img=400, n_tpl=120, n_id=20, d=6)
    ids, Tn = template_features(new, tid); _, To = template_features(old, tid)
    lab = template_labels(tid, ident[tid])[1]
    # gallery: the first template of each identity; G1 holds identities 0-9, G2 10-19; probes: all other templates
    first = np.array([np.nonzero(lab == c)[0][0] for c in np.unique(lab)])
    probes = np.setdiff1d(np.arange(len(ids)), first)
    parts = np.where(lab[first] < 10, 'G1', 'G2')
    r = open_set_search(Tn[probes], lab[probes], To[first], lab[first], parts, fpir=(0.0, 0.1, 0.3), ranks=(1, 3))
    for f in (0.0, 0.1, 0.3):
        per = []
        for g in ('G1', 'G2'):
            tpir, _ = _brute_tpir(Tn[probes].numpy(), lab[probes], To[first][parts == g].numpy(), lab[first][parts == g], f)
            assert r[f'{g}/TPIR@FPIR={f:g}'] == pytest.approx(tpir)
            per.append(tpir)
        assert r[f'TPIR@FPIR={f:g}'] == pytest.approx(np.mean(per))
    for g in ('G1', 'G2'):
        _, r3 = _brute_tpir(Tn[probes].numpy(), lab[probes], To[first][parts == g].numpy(), lab[first][parts == g], 0., k=3)
        assert r[f'{g}/rank3'] == pytest.approx(r3)
        assert r[f'{g}/n_mated'] + r[f'{g}/n_nonmated'] == len(probes)


# ---- partial backfilling by class, BCT Figure 3 (11_backfill) ----
from compatrepro.backfill import backfill_curve, class_backfill_masks, class_backfill_search, class_mixed_gallery, class_order


def test_class_backfill_masks_backfill_whole_classes_in_growing_sets():
    rng = np.random.default_rng(0)
    lab = rng.integers(0, 50, 300)
    fr = np.round(np.arange(51) * 0.02, 10)
    mask, k = class_backfill_masks(lab, fr, seed=4)
    C = len(np.unique(lab))
    assert k.tolist() == np.floor(np.round(fr * C, 9)).astype(int).tolist()
    assert not mask[0].any() and mask[-1].all()
    assert (mask[1:] >= mask[:-1]).all()                                      # once new, a template stays new
    for m, kk in zip(mask, k):
        assert len(np.unique(lab[m])) == kk                                  # exactly the first k classes ...
        assert all(len(set(m[lab == c])) == 1 for c in np.unique(lab))      # ... each one whole
    # the classes come in class_order's order
    o = class_order(lab, 4)
    seq = list(dict.fromkeys(lab[o].tolist()))
    assert set(lab[mask[10]].tolist()) == set(seq[:k[10]])


def test_class_backfill_search_is_the_search_on_each_mixed_gallery():
    tid, ident, new, old = _random_templates(np.random.default_rng(3), n_img=500, n_tpl=150, n_id=24, d=6)
    ids, Tn = template_features(new, tid); _, To = template_features(old, tid)
    lab = template_labels(tid, ident[tid])[1]
    gal = np.array([np.nonzero(lab == c)[0][0] for c in np.unique(lab)])
    probes = np.setdiff1d(np.arange(len(ids)), gal)
    parts = np.where(lab[gal] % 2 == 0, 'G1', 'G2')
    fr = [0.0, 0.3, 0.5, 1.0]
    cb = class_backfill_search(Tn[probes], lab[probes], To[gal], Tn[gal], lab[gal], parts, fractions=fr, seed=7, fpir=(0.05, 0.2))
    for f in fr:
        g = class_mixed_gallery(To[gal], Tn[gal], lab[gal], f, seed=7)
        ref = open_set_search(Tn[probes], lab[probes], g, lab[gal], parts, fpir=(0.05, 0.2))
        for key, v in ref.items(): assert cb.loc[f, key] == pytest.approx(v), (f, key)
    # the ends: the cross-model test (new probes, old gallery) and the paragon (new, new)
    assert cb.loc[0.0, 'TPIR@FPIR=0.05'] == pytest.approx(open_set_search(Tn[probes], lab[probes], To[gal], lab[gal], parts, fpir=(0.05,))['TPIR@FPIR=0.05'])
    assert cb.loc[1.0, 'rank1'] == pytest.approx(open_set_search(Tn[probes], lab[probes], Tn[gal], lab[gal], parts)['rank1'])
    # one template per class (as IJB-C's galleries): the class fraction is the template fraction, and rank-1 of one gallery
    # is backfill_curve's top-1 of the mated probes under the same class order
    g1 = gal[parts == 'G1']
    cb1 = class_backfill_search(Tn[probes], lab[probes], To[g1], Tn[g1], lab[g1], fractions=fr, seed=7)
    mated = np.isin(lab[probes], lab[g1])
    bc = backfill_curve(Tn[probes][mated], To[g1], Tn[g1], lab[probes][mated], lab[g1], class_order(lab[g1], 7), fr,
                        ('top1', 'top5'), 'cosine', query_is_gallery=False)
    np.testing.assert_allclose(cb1['rank1'].to_numpy(), bc['top1'].to_numpy()); np.testing.assert_allclose(cb1['rank5'].to_numpy(), bc['top5'].to_numpy())
    assert cb1['n_templates_backfilled'].tolist() == [int(np.floor(np.round(f * len(g1), 9))) for f in fr]
    assert 0 < cb1.loc[0.3, 'n_classes_backfilled'] < len(g1)
