"Checkpoint/resume of the backbone trainer: a run killed after epoch k and resumed equals an uninterrupted run."
import pytest, torch

from compatrepro.core import ArtifactCache
from compatrepro.features import _TinyDS
from compatrepro import train as T


pytestmark = pytest.mark.usefixtures('one_thread')


def _spec(**kw):
    return T.BackboneSpec(**dict(split='imagenet-500', scale='tiny', seed=5, arch='resnet18', emb_dim=8, epochs=3,
                                 batch_size=8, lr=0.8, lr_batch=1024, warmup_epochs=1) | kw)


def _weights(art): return art['model']['state_dict']


def _simclr(**kw): return _spec(objective='simclr', augment=True, label_smoothing=0., **kw)


@pytest.mark.parametrize('make_spec', [_spec, _simclr], ids=['supervised', 'simclr'])
def test_resume_is_exact(tmp_path, make_spec):
    ds = _TinyDS(n=32, c=4, size=16)
    spec = make_spec()
    full = T.train_backbone(spec, ArtifactCache(tmp_path/'a'), device='cpu', dataset=ds, show_progress=False)
    cache_b = ArtifactCache(tmp_path/'b')
    with pytest.raises(T.TrainingInterrupted):
        T.train_backbone(spec, cache_b, device='cpu', dataset=ds, stop_after=1, show_progress=False)
    ck = T.checkpoint_path(cache_b, 'backbone', T.backbone_key(spec))
    assert ck.exists() and torch.load(ck, weights_only=False)['epoch'] == 1
    assert ('backbone', T.backbone_key(spec)) not in cache_b          # an interrupted run is not cached
    resumed = T.train_backbone(spec, cache_b, device='cpu', dataset=ds, show_progress=False)
    assert not ck.exists()                                             # the checkpoint goes once the artifact is cached
    assert [h['epoch'] for h in resumed['history']] == [1, 2, 3]
    wa, wb = _weights(full), _weights(resumed)
    assert wa.keys() == wb.keys()
    for k in wa: assert torch.equal(wa[k], wb[k]), k
    # the weights moved (the test would pass trivially if training did nothing)
    init = T.EmbeddingModel('resnet18', 8, range(4), scale='tiny').state_dict()
    assert not torch.equal(init['embedding.weight'], wa['embedding.weight'])
    assert [round(h['loss'], 6) for h in full['history']] == [round(h['loss'], 6) for h in resumed['history']]


def test_cache_hit_does_not_train(tmp_path, monkeypatch):
    ds = _TinyDS(n=16, c=4, size=16)
    spec, cache = _spec(epochs=1), ArtifactCache(tmp_path)
    a = T.train_backbone(spec, cache, device='cpu', dataset=ds, show_progress=False)
    monkeypatch.setattr(T, '_fit_backbone', lambda *a, **k: (_ for _ in ()).throw(AssertionError('trained again')))
    b = T.train_backbone(spec, cache, device='cpu', dataset=ds, show_progress=False)
    for k in _weights(a): assert torch.equal(_weights(a)[k], _weights(b)[k])
    # another seed is another artifact
    with pytest.raises(AssertionError, match='trained again'):
        T.train_backbone(_spec(epochs=1, seed=6), cache, device='cpu', dataset=ds, show_progress=False)


def test_different_seeds_differ(tmp_path):
    ds = _TinyDS(n=16, c=4, size=16)
    a = T.train_backbone(_spec(epochs=1), ArtifactCache(tmp_path), device='cpu', dataset=ds, show_progress=False)
    b = T.train_backbone(_spec(epochs=1, seed=6), ArtifactCache(tmp_path), device='cpu', dataset=ds, show_progress=False)
    assert not torch.equal(_weights(a)['embedding.weight'], _weights(b)['embedding.weight'])


def test_simclr_never_reads_labels(tmp_path):
    "SimCLR (side-information models; its resume is checked by test_resume_is_exact): the labels are never read, and the NT-Xent loss falls."
    ds = _TinyDS(n=32, c=4, size=16)
    spec = _simclr()
    full = T.train_backbone(spec, ArtifactCache(tmp_path/'a'), device='cpu', dataset=ds, show_progress=False)
    wa = _weights(full)
    relabelled = _TinyDS(n=32, c=4, size=16); relabelled.labels = (relabelled.labels + 1) % 4
    wc = _weights(T.train_backbone(spec, ArtifactCache(tmp_path/'c'), device='cpu', dataset=relabelled, show_progress=False))
    for k in wa: assert torch.equal(wa[k], wc[k]), k
    losses = [h['loss'] for h in full['history']]
    assert losses[-1] < losses[0], losses
    # the supervised model of the same spec is another model
    sup = T.train_backbone(_spec(), ArtifactCache(tmp_path/'d'), device='cpu', dataset=ds, show_progress=False)
    assert not torch.equal(_weights(sup)['embedding.weight'], wa['embedding.weight'])


def test_two_views_are_two_augmentations_of_the_same_images():
    ds = _TinyDS(n=32, c=4, size=16)
    (x1, y1), = list(T.iter_batches(ds, 32, 0, 5, 'cpu'))
    (x2, y2), = list(T.iter_batches(ds, 32, 0, 5, 'cpu', views=2))
    assert x2.shape == (32, 2, 3, 16, 16) and torch.equal(y1, y2)           # the same images in the same order
    assert torch.equal(x1, x2[:, 0])                                         # the first view is the usual batch
    assert not torch.equal(x2[:, 0], x2[:, 1])                               # the second is another draw
    assert (x2[:, 0] - x2[:, 1]).abs().max() < 0.1                           # ... of the same images (noise 0.01)
    with pytest.raises(ValueError, match='views > 1 needs train=True'):
        next(T.iter_batches(ds, 32, 0, 5, 'cpu', train=False, views=2))

    class Files(torch.utils.data.Dataset):   # the DataLoader path (paper scale): a random transform per item
        def __len__(self): return 8
        def __getitem__(self, i): return torch.full((3, 4, 4), float(i)) + torch.rand(3, 4, 4), i
    (xf, yf), = list(T.iter_batches(Files(), 8, 0, 5, 'cpu', num_workers=0, views=2))
    assert xf.shape == (8, 2, 3, 4, 4) and not torch.equal(xf[:, 0], xf[:, 1])
    assert torch.equal(xf[:, 0].floor().flatten(1)[:, 0], yf.float())      # both views are of the labelled image
    assert torch.equal(xf[:, 1].floor().flatten(1)[:, 0], yf.float())
