"The paper-scale path to its first training steps: a fake ImageNet-style image tree, a DataLoader, 224x224 crops."
from dataclasses import replace
import numpy as np, pytest, torch
from PIL import Image

from compatrepro.runtime import RunContext, using_context
from compatrepro.models import load_model
from compatrepro.pipeline import cached_backbone, cached_transformation, get_features
from compatrepro import specs as SP, train as T


pytestmark = pytest.mark.usefixtures('one_thread')


def _fake_imagenet(root, n_classes=4, n_train=4, n_val=2):
    rng = np.random.default_rng(0)
    for part, k in (('train', n_train), ('val', n_val)):
        for c in range(n_classes):
            d = root/'imagenet'/part/f'n{c:08d}'; d.mkdir(parents=True)
            for i in range(k):
                Image.fromarray(rng.integers(0, 255, (48, 64, 3), dtype=np.uint8)).save(d/f'n{c:08d}_{i}.JPEG')
    return root


SMALL = dict(epochs=1, batch_size=4, warmup_epochs=0, arch='resnet18')   # the paper's recipe, one epoch of 4-image batches


def _context(tmp_path, make_tree):
    "A run context on a fake dataset tree (`make_tree`) and an empty artifact cache under `tmp_path` (CPU, no workers)."
    return using_context(RunContext(cache=tmp_path/'cache', device='cpu', data_root=str(make_tree(tmp_path/'data')),
                                    workers=0, progress=False))


@pytest.fixture
def imagenet(tmp_path):
    with _context(tmp_path, _fake_imagenet) as ctx: yield ctx


def test_paper_scale_trains_a_few_steps(imagenet):
    spec = SP.backbone_spec('imagenet-500', 'paper', seed=0, **SMALL)
    assert spec.emb_dim == 128 and spec.momentum == 0.875 and spec.label_smoothing == 0.1   # the paper's recipe, smaller
    art = cached_backbone(spec)
    assert len(art['history']) == 1 and np.isfinite(art['history'][0]['loss'])
    m = load_model(art)
    assert m.class_ids.tolist() == [0, 1]                       # the first half of the 4 synsets: 'imagenet-500'
    assert m.backbone.conv1.kernel_size == (7, 7)               # the ImageNet stem, not the tiny one
    init = T.EmbeddingModel('resnet18', 128, [0, 1]).state_dict()['embedding.weight']
    assert not torch.equal(art['model']['state_dict']['embedding.weight'], init)
    f = get_features(spec, 'imagenet-1k', 'eval', logits=True)
    assert f['features'].shape == (8, 128) and f['labels'].tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    assert f['logits'].shape == (8, 2)


def _fake_vggface2(root, n_train=8, n_test=3, per_id=4):
    "VGGFace2's layout: train/<id>/*.jpg, test/<id>/*.jpg and identity_meta.csv."
    rng = np.random.default_rng(1)
    ids = [f'n{i:06d}' for i in range(n_train + n_test)]
    for part, sel in (('train', ids[:n_train]), ('test', ids[n_train:])):
        for c in sel:
            d = root/'vggface2'/part/c; d.mkdir(parents=True)
            for i in range(per_id):
                Image.fromarray(rng.integers(0, 255, (60, 50, 3), dtype=np.uint8)).save(d/f'{i:04d}_01.jpg')
    (root/'vggface2'/'identity_meta.csv').write_text('Class_ID, Name, Sample_Num, Flag, Gender\n' +
        ''.join(f'{c}, "N{i}", {per_id}, 1, {"m" if i % 2 else "f"}\n' for i, c in enumerate(ids)))
    return root


@pytest.fixture
def vggface2(tmp_path):
    with _context(tmp_path, _fake_vggface2) as ctx: yield ctx


def test_paper_scale_vggface2_path(vggface2):
    "Notebook 23's path at paper scale: ArcFace ResNet-18 (old), RACT against it, FastFill's h and psi with ArcFace L_disc."
    old = SP.backbone_spec('vggface2-863', 'paper', seed=0, **SMALL)
    new = SP.backbone_spec('vggface2-8631', 'paper', seed=0, **SMALL)
    assert old.head == 'arcface' and old.head_margin == 0.5 and old.head_scale == 64. and old.normalize   # FastFill A.2
    ract = replace(new, compat=SP.ract_compat(old, 'fastfill'))
    for spec in (old, ract):
        art = cached_backbone(spec)
        assert np.isfinite(art['history'][0]['loss'])
    f = get_features(ract, 'vggface2-8631', 'eval')
    assert f['features'].shape == (12, 128) and sorted(set(f['labels'].tolist())) == [8, 9, 10]   # unseen identities
    assert torch.allclose(f['features'].norm(dim=1), torch.ones(12), atol=1e-4)                   # ArcFace features on the sphere
    tspec = SP.transformation_spec(old, new, 'l2+disc+uncert', epochs=1, batch_size=8, warmup_epochs=0, freeze_bn_epoch=None)
    net = cached_transformation(tspec)
    assert np.isfinite(net['history'][-1]['loss'])


def _fake_imdbface_ijbc(root, n_ids=6, per_id=3, n_subjects=4, per_subject=4):
    "IMDB-Face's layout (imdbface/<identity>/*.jpg) and IJB-C's (images/ and the four protocol files of the 1:1 and 1:N tests)."
    rng = np.random.default_rng(2)
    for i in range(n_ids):
        d = root/'imdbface'/f'id{i}'; d.mkdir(parents=True)
        for k in range(per_id): Image.fromarray(rng.integers(0, 255, (60, 50, 3), dtype=np.uint8)).save(d/f'{k}.jpg')
    j = root/'ijbc'; (j/'images').mkdir(parents=True); (j/'protocols').mkdir()
    head = 'TEMPLATE_ID,SUBJECT_ID,FILENAME\n'
    g1, g2, probe = head, head, head
    for s_ in range(n_subjects):   # template 10*s (gallery: G1 for the first half, G2 for the rest), 10*s+1 (probe)
        for k in range(per_subject):
            f = f's{s_}_{k}.jpg'; Image.fromarray(rng.integers(0, 255, (60, 50, 3), dtype=np.uint8)).save(j/'images'/f)
            line = f'{10*s_ + (k >= 2)},{100 + s_},{f}\n'
            if k >= 2: probe += line
            elif s_ < n_subjects//2: g1 += line
            else: g2 += line
    for name, text in (('ijbc_1N_gallery_G1.csv', g1), ('ijbc_1N_gallery_G2.csv', g2), ('ijbc_1N_probe_mixed.csv', probe)):
        (j/'protocols'/name).write_text(text)
    (j/'protocols'/'ijbc_11_G1_G2_matches.csv').write_text(''.join(f'{10*a},{10*b + 1}\n' for a in range(n_subjects) for b in range(n_subjects)))
    return root


@pytest.fixture
def faces(tmp_path):
    with _context(tmp_path, _fake_imdbface_ijbc) as ctx: yield ctx


def test_paper_scale_bct_path(faces):
    "Notebook 30's path at paper scale: BCT's CosFace old model on half of IMDB-Face, a BCT new model, IJB-C's 1:1 and 1:N tests."
    from compatrepro.runtime import ExperimentParams
    from compatrepro.updates import update_specs
    from compatrepro.specs import backbone_spec
    from compatrepro.bct import face_features, face_data, face_test
    P = ExperimentParams(scale='paper', data_root=faces.data_root, epochs=1, batch_size=4)
    specs = update_specs(P, 'imdbface-50', 'imdbface', ['new-β'], arch='resnet18')
    assert specs['old'].head == 'cosface' and specs['old'].head_scale == 32.   # BCT sec. 3.2
    assert backbone_spec('imdbface-50', 'paper').milestones == (8, 12, 14)     # of 16 epochs; a 1-epoch run at the same fractions
    assert specs['old'].milestones == tuple(round(m / 16, 2) for m in (8, 12, 14))
    for k in ('old', 'new-β'):
        assert np.isfinite(cached_backbone(specs[k])['history'][0]['loss'])
    data = face_data(P)
    assert data['gallery'].gallery_set.tolist() == [1]*4 + [2]*4   # per image, from the G1 and G2 protocol files
    t = face_test(face_features(specs['new-β']), face_features(specs['old']), data, fars=(0.25,), fpirs=(0.5,))
    assert set(t) == {'TAR@FAR=2.5e-1', 'false accepts@FAR=2.5e-1', 'TPIR@FPIR=5e-1', 'false alarms@FPIR=5e-1', 'rank1', 'rank5'}
    assert all(np.isfinite(v) for v in t.values())


def test_paper_scale_bct_robustness_and_chain_paths(faces):
    """Notebooks 31 and 32 at paper scale: a NormSoftmax old model, a 256-d ReLU new model whose first 128 dimensions
    meet the old classifier, and a chain phi_1 (25 %) -> phi_2 (50 %, BCT) -> phi_3 (100 %, BCT towards phi_2)."""
    from compatrepro.runtime import ExperimentParams
    from compatrepro.updates import update_specs, BASELINES
    from compatrepro.bct import face_features, face_data, face_test
    P = ExperimentParams(scale='paper', data_root=faces.data_root, epochs=1, batch_size=4)
    ns = update_specs(P, 'imdbface', 'imdbface', ['new-β'], old_kw=dict(head='norm_softmax'), arch='resnet18')
    wide = replace(ns['new-β'], emb_dim=256, embedding_relu=True)
    s12 = update_specs(P, 'imdbface-25', 'imdbface-50', ['new-β'], arch='resnet18')
    phi3 = replace(update_specs(P, 'imdbface-50', 'imdbface', [], arch='resnet18')['new'], compat=BASELINES['new-β'](s12['new-β']))
    for spec in (ns['old'], wide, s12['new-β'], phi3):
        assert np.isfinite(cached_backbone(spec)['history'][0]['loss'])
    f = face_features(wide)
    assert f['eval'].shape[1] == 256 and (f['eval'] >= 0).all()                       # the ReLU embedding
    t = face_test({p: x[:, :128] for p, x in f.items()}, face_features(ns['old']), face_data(P), fars=(0.25,), fpirs=(0.5,))
    assert all(np.isfinite(v) for v in t.values())


def _fake_market(root, n_train=4, n_test=3, per_id=4):
    "Market-1501's layout: bounding_box_train/, bounding_box_test/ (with a distractor and a junk image) and query/."
    rng = np.random.default_rng(3)
    d = root/'market1501'/'Market-1501-v15.09.15'
    def put(folder, pid, cam, k):
        (d/folder).mkdir(parents=True, exist_ok=True)
        Image.fromarray(rng.integers(0, 255, (64, 32, 3), dtype=np.uint8)).save(d/folder/f'{pid:04d}_c{cam}s1_{k:06d}_00.jpg'.replace('-001', '-1'))
    for pid in range(1, n_train + 1):
        for k in range(per_id): put('bounding_box_train', pid, 1 + k % 3, k)
    for pid in range(n_train + 1, n_train + n_test + 1):
        put('query', pid, 1, 0)
        for k in range(1, per_id): put('bounding_box_test', pid, 1 + k % 3, k)
    put('bounding_box_test', 0, 2, 99); put('bounding_box_test', -1, 2, 98)
    return root


@pytest.fixture
def market(tmp_path):
    with _context(tmp_path, _fake_market) as ctx: yield ctx


def test_paper_scale_bct_market_path(market):
    "Notebook 33 at paper scale: an old model on half of Market-1501's training identities, a BCT new model, person search."
    from compatrepro.runtime import ExperimentParams
    from compatrepro.data import get_split
    from compatrepro.updates import update_specs
    from compatrepro.metrics import market_relevance, retrieval_metrics
    P = ExperimentParams(scale='paper', data_root=market.data_root, epochs=1, batch_size=4)
    specs = update_specs(P, 'market-1501-375', 'market-1501', ['new-β'], arch='resnet18', warmup_epochs=0)
    for k in ('old', 'new-β'):
        assert np.isfinite(cached_backbone(specs[k])['history'][0]['loss'])
    q, g = (get_split('market-1501', p, 'paper', market.data_root) for p in ('query', 'gallery'))
    rel = market_relevance(q.labels, q.cameras, g.labels, g.cameras)
    Fq, Fg = get_features(specs['new-β'], 'market-1501', 'query'), get_features(specs['old'], 'market-1501', 'gallery')
    r = retrieval_metrics(Fq['features'], Fg['features'], metrics=('mAP', 'top1'), distance='cosine', query_is_gallery=False, relevance=rel)
    assert 0 <= r['mAP'] <= 100 and len(g) == 3*3 + 1                                    # the junk image (-1) is not in the gallery


def test_paper_scale_side_information_path(imagenet):
    "Notebook 27's path at paper scale: a SimCLR ResNet on ImageNet-500 (two views through SimCLR's augmentation), then FCT's h with it."
    side = SP.simclr_spec('imagenet-500', 'paper', seed=0, **SMALL)
    art = cached_backbone(side)
    assert np.isfinite(art['history'][0]['loss']) and art['history'][0]['loss'] > 0
    old, new = (SP.backbone_spec(s, 'paper', seed=0, **SMALL) for s in ('imagenet-500', 'imagenet-1k'))
    tspec = SP.transformation_spec(old, new, 'l2', side_info=side, epochs=1, batch_size=8, warmup_epochs=0, freeze_bn_epoch=None)
    net = cached_transformation(tspec)
    assert np.isfinite(net['history'][-1]['loss'])
    assert net['transformation']['build_args']['side_dim'] == 128


def test_paper_scale_transformation_learns_from_one_view(imagenet, monkeypatch):
    "FastFill/FCT at paper scale: old and new features of an image come from the same augmented view (as apple/ml-fct)."
    from compatrepro import pipeline
    from compatrepro.data import get_split
    old, new = (SP.backbone_spec(s, 'paper', seed=0, **SMALL) for s in ('imagenet-500', 'imagenet-1k'))
    m = load_model(cached_backbone(old))
    ds = get_split('imagenet-1k', 'train', 'paper', imagenet.data_root)
    assert not torch.equal(ds[0][0], ds[0][0])                  # the training split is augmented: each read is a new crop
    fo, fn, y, side = next(T.same_view_batches(m, m, ds, 4, epoch=0, seed=0, device='cpu', num_workers=0))
    assert torch.equal(fo, fn) and fo.shape == (4, 128) and side is None   # one view through both models
    real_get_features = pipeline.get_features
    def no_train_features(spec, split, part='eval', **kw):
        assert part != 'train', "paper scale must not pair features extracted in two separate augmented passes"
        return real_get_features(spec, split, part, **kw)
    monkeypatch.setattr(pipeline, 'get_features', no_train_features)
    tspec = SP.transformation_spec(old, new, 'l2+disc+uncert', epochs=1, batch_size=8, warmup_epochs=0, freeze_bn_epoch=None)
    art = cached_transformation(tspec)
    assert len(art['history']) == 1 and np.isfinite(art['history'][0]['loss'])
