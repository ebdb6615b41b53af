"""Checkpoint/resume of the backbone trainer: a run stopped after epoch k and resumed equals an uninterrupted run.
The trainer is pure (it always trains); the artifact cache and its checkpoint files belong to the pipeline."""
import pytest, torch

from compatrepro.runtime import RunContext, using_context
from compatrepro import pipeline as P
from compatrepro import loaders as LD, specs as SP, train as T
from _doubles import TinyDataset


pytestmark = pytest.mark.usefixtures('one_thread')


def _spec(**kw):
    return SP.BackboneSpec(**dict(split='imagenet-500', scale='tiny', seed=5, arch='resnet18', emb_dim=8, epochs=3,
                                 batch_size=8, lr=0.8, lr_batch=1024, warmup_epochs=1) | kw)


def _weights(art): return art['model']['state_dict']


def _simclr(**kw): return _spec(objective='simclr', augment=True, label_smoothing=0., **kw)


def _train(spec, ds, old=None, **kw): return T.train_backbone(spec, ds, old, device='cpu', show_progress=False, **kw)


def _assert_same_weights(a, b):
    wa, wb = _weights(a), _weights(b)
    assert wa.keys() == wb.keys()
    for k in wa: assert torch.equal(wa[k], wb[k]), k


@pytest.fixture
def ctx(tmp_path):
    "A run context on an empty cache under tmp_path (CPU, no bars)."
    with using_context(RunContext(cache=tmp_path/'cache', device='cpu', progress=False)) as c: yield c


@pytest.fixture
def fake_split(monkeypatch):
    "The pipeline's data: every split is the same small synthetic set."
    ds = TinyDataset(n=32, c=4, size=16)
    monkeypatch.setattr(P, 'get_split', lambda name, part, scale='tiny', data_root=None, seed=0, **kw: ds)
    return ds


@pytest.mark.parametrize('make_spec', [_spec, _simclr], ids=['supervised', 'simclr'])
def test_resume_is_exact(tmp_path, make_spec):
    ds = TinyDataset(n=32, c=4, size=16)
    spec = make_spec()
    full = _train(spec, ds)
    ck = tmp_path/'ck'/'backbone.pt'
    with pytest.raises(T.TrainingInterrupted):
        _train(spec, ds, checkpoint=ck, stop_after=1)
    state = torch.load(ck, weights_only=False)
    assert state['epoch'] == 1 and [h['epoch'] for h in state['history']] == [1]
    resumed = _train(spec, ds, checkpoint=ck)
    assert [h['epoch'] for h in resumed['history']] == [1, 2, 3]          # epochs 2 and 3 only were trained now
    assert torch.load(ck, weights_only=False)['epoch'] == 3
    _assert_same_weights(full, resumed)
    # the weights moved (the test would pass trivially if training did nothing)
    init = T.EmbeddingModel('resnet18', 8, range(4), scale='tiny').state_dict()
    assert not torch.equal(init['embedding.weight'], _weights(full)['embedding.weight'])
    assert [round(h['loss'], 6) for h in full['history']] == [round(h['loss'], 6) for h in resumed['history']]


def test_resume_starts_from_the_checkpoint(tmp_path):
    "A checkpoint of another run's epoch 1 is what the trainer resumes from: it does not silently start over."
    ds = TinyDataset(n=32, c=4, size=16)
    ck = tmp_path/'ck.pt'
    with pytest.raises(T.TrainingInterrupted): _train(_spec(), ds, checkpoint=ck, stop_after=1)
    state = torch.load(ck, weights_only=False)
    state['model'] = {k: torch.zeros_like(v) if k == 'embedding.weight' else v for k, v in state['model'].items()}
    torch.save(state, ck)
    resumed = _train(_spec(), ds, checkpoint=ck)
    assert [h['epoch'] for h in resumed['history']] == [1, 2, 3]
    assert not torch.equal(_weights(resumed)['embedding.weight'], _weights(_train(_spec(), ds))['embedding.weight'])


def test_pipeline_resumes_an_interrupted_training(ctx, fake_split, monkeypatch):
    "The pipeline checkpoints into the cache's checkpoint path; an interrupted run is not cached; the next call resumes it."
    spec = _spec()
    key = SP.backbone_key(spec)
    ck = ctx.cache.checkpoint_path('backbone', key)
    real = P.train_backbone
    monkeypatch.setattr(P, 'train_backbone', lambda *a, **k: real(*a, **(k | dict(stop_after=1))))
    with pytest.raises(T.TrainingInterrupted):
        P.cached_backbone(spec)
    assert ck.exists() and torch.load(ck, weights_only=False)['epoch'] == 1
    assert ('backbone', key) not in ctx.cache                          # an interrupted run is not cached
    calls = []
    monkeypatch.setattr(P, 'train_backbone', lambda *a, **k: calls.append(k['checkpoint']) or real(*a, **k))
    resumed = P.cached_backbone(spec)
    assert calls == [ck]
    assert [h['epoch'] for h in resumed['history']] == [1, 2, 3]
    assert ('backbone', key) in ctx.cache and not ck.exists()         # the checkpoint goes once the artifact is cached
    _assert_same_weights(_train(spec, fake_split), resumed)


def test_cache_hit_does_not_train(ctx, fake_split, monkeypatch):
    spec = _spec(epochs=1)
    a = P.cached_backbone(spec)
    assert ('backbone', SP.backbone_key(spec)) in ctx.cache
    monkeypatch.setattr(P, 'train_backbone', lambda *a, **k: (_ for _ in ()).throw(AssertionError('trained again')))
    _assert_same_weights(a, P.cached_backbone(spec))
    m = P.get_backbone(spec)                                           # the model, from the same artifact
    assert torch.equal(m.state_dict()['embedding.weight'], _weights(a)['embedding.weight']) and not m.training
    # another seed is another artifact
    with pytest.raises(AssertionError, match='trained again'):
        P.cached_backbone(_spec(epochs=1, seed=6))


def test_different_seeds_differ():
    ds = TinyDataset(n=16, c=4, size=16)
    a, b = _train(_spec(epochs=1), ds), _train(_spec(epochs=1, seed=6), ds)
    assert not torch.equal(_weights(a)['embedding.weight'], _weights(b)['embedding.weight'])


def test_old_model_exactly_when_compat():
    ds = TinyDataset(n=16, c=4, size=16)
    old = T.EmbeddingModel('resnet18', 8, range(4), scale='tiny')
    with pytest.raises(ValueError, match='exactly when the spec has a compatibility term'):
        _train(_spec(epochs=1), ds, old)
    with pytest.raises(ValueError, match='exactly when the spec has a compatibility term'):
        _train(_spec(epochs=1, compat=SP.CompatSpec('l2', _spec(epochs=1))), ds)


def test_simclr_never_reads_labels():
    "SimCLR (side-information models; its resume is checked by test_resume_is_exact): the labels are never read, and the NT-Xent loss falls."
    ds = TinyDataset(n=32, c=4, size=16)
    spec = _simclr(epochs=6)   # with SimCLR's colour distortion the loss first rises a little on these noise images
    full = _train(spec, ds)
    relabelled = TinyDataset(n=32, c=4, size=16); relabelled.labels = (relabelled.labels + 1) % 4
    _assert_same_weights(full, _train(spec, relabelled))
    losses = [h['loss'] for h in full['history']]
    assert losses[-1] < losses[0], losses
    # the supervised model of the same spec is another model
    sup = _train(_spec(), ds)
    assert not torch.equal(_weights(sup)['embedding.weight'], _weights(full)['embedding.weight'])


def test_two_views_are_two_augmentations_of_the_same_images():
    ds = TinyDataset(n=32, c=4, size=16)
    (x1, y1), = list(LD.iter_batches(ds, 32, 0, 5, 'cpu'))
    (x2, y2), = list(LD.iter_batches(ds, 32, 0, 5, 'cpu', views=2))
    assert x2.shape == (32, 2, 3, 16, 16) and torch.equal(y1, y2)           # the same images in the same order
    assert torch.equal(x1, x2[:, 0])                                         # the first view is the usual batch
    assert not torch.equal(x2[:, 0], x2[:, 1])                               # the second is another draw
    assert (x2[:, 0] - x2[:, 1]).abs().max() < 0.1                           # ... of the same images (noise 0.01)
    with pytest.raises(ValueError, match='views > 1 needs train=True'):
        next(LD.iter_batches(ds, 32, 0, 5, 'cpu', train=False, views=2))

    class Files(torch.utils.data.Dataset):   # the DataLoader path (paper scale): a random transform per item
        def __len__(self): return 8
        def __getitem__(self, i): return torch.full((3, 4, 4), float(i)) + torch.rand(3, 4, 4), i
    (xf, yf), = list(LD.iter_batches(Files(), 8, 0, 5, 'cpu', num_workers=0, views=2))
    assert xf.shape == (8, 2, 3, 4, 4) and not torch.equal(xf[:, 0], xf[:, 1])
    assert torch.equal(xf[:, 0].floor().flatten(1)[:, 0], yf.float())      # both views are of the labelled image
    assert torch.equal(xf[:, 1].floor().flatten(1)[:, 0], yf.float())
