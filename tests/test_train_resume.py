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


def test_resume_is_exact(tmp_path):
    ds = _TinyDS(n=32, c=4, size=16)
    spec = _spec()
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
