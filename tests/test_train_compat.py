"Compatible backbone training and transformation training end to end on a tiny synthetic stand-in (every method runs, learns, caches)."
import numpy as np, pytest, torch

import compatrepro.data
from compatrepro.core import ArtifactCache
from compatrepro.features import _TinyDS, get_features
from compatrepro.models import load_model, load_transformation
from compatrepro import train as T


pytestmark = pytest.mark.usefixtures('one_thread')


class _Split(_TinyDS):
    "A synthetic split: 'imagenet-500' holds classes 0-1 of 4, anything else all 4."
    def __init__(self, name, part):
        super().__init__(n=32, c=4, size=16, seed=0 if part == 'train' else 1)
        if name == 'imagenet-500':
            keep = self.labels < 2
            self.images, self.labels = self.images[torch.from_numpy(keep)], self.labels[keep]
            self.classes = np.unique(self.labels)


@pytest.fixture
def fake_data(monkeypatch):
    monkeypatch.setattr(compatrepro.data, 'get_split', lambda name, part, scale='tiny', data_root=None, seed=0, **kw: _Split(name, part))


def _b(split, **kw):
    return T.BackboneSpec(**dict(split=split, scale='tiny', seed=0, arch='resnet18', emb_dim=8, epochs=1, batch_size=8,
                                 lr=0.4, warmup_epochs=0) | kw)


@pytest.fixture(scope='module')
def cache_dir(tmp_path_factory): return tmp_path_factory.mktemp('cache')


@pytest.mark.parametrize('method', T.COMPAT_METHODS)
def test_compatible_training_runs(method, fake_data, cache_dir):
    cache = ArtifactCache(cache_dir)
    old = _b('imagenet-500')
    spec = _b('imagenet-1k', compat=T.CompatSpec(method, old, weight=1.0, tau=0.5))
    art = T.train_backbone(spec, cache, device='cpu', show_progress=False)
    assert ('backbone', T.backbone_key(old)) in cache           # the old model was trained and cached first
    assert np.isfinite(art['history'][-1]['loss'])
    m = load_model(art)
    assert m.class_ids.tolist() == [0, 1, 2, 3]
    # the compat term changed training: same spec without it gives other weights
    plain = T.train_backbone(_b('imagenet-1k'), cache, device='cpu', show_progress=False)
    assert not torch.equal(art['model']['state_dict']['embedding.weight'], plain['model']['state_dict']['embedding.weight'])


@pytest.mark.parametrize('objective,extra', [('l2+disc+uncert', {}), ('disc', {}), ('mcl', dict(rho_blocks=2)), ('rqt', {})])
def test_transformation_trains_and_resumes(objective, extra, fake_data, cache_dir, tmp_path):
    cache = ArtifactCache(cache_dir)
    old, new = _b('imagenet-500'), _b('imagenet-1k', seed=1)
    spec = T.transformation_spec(old, new, objective, epochs=6, batch_size=8, inner_dim=16, hidden=16, lr=1e-2, **extra)
    art = T.train_transformation(spec, cache, device='cpu', show_progress=False)
    h = art['history']
    assert len(h) == 6 and h[-1]['loss'] < h[0]['loss'], h              # it learns on its training features
    net = load_transformation(art)
    fo = get_features(old, 'imagenet-1k', 'train', cache, device='cpu', show_progress=False)['features']
    fn = get_features(new, 'imagenet-1k', 'train', cache, device='cpu', show_progress=False)['features']
    out = T.apply_transformation(net, fo if spec.kind == 'fct' else fn)
    if objective.endswith('uncert'): assert out[0].shape == (32, 8) and out[1].shape == (32,)
    elif spec.kind == 'rm': assert out[0].shape == (32, 8) and out[1].shape == (32, 8)
    else: assert out.shape == (32, 8)
    # exact resume: a run stopped after epoch 3 and resumed ends with the same weights
    c2 = ArtifactCache(tmp_path)
    for s in (old, new): c2.save('backbone', T.backbone_key(s), cache.load('backbone', T.backbone_key(s)))
    with pytest.raises(T.TrainingInterrupted): T.train_transformation(spec, c2, device='cpu', stop_after=3, show_progress=False)
    r = T.train_transformation(spec, c2, device='cpu', show_progress=False)
    for k, v in art['transformation']['state_dict'].items(): assert torch.equal(v, r['transformation']['state_dict'][k]), k
