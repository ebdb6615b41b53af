"Compatible backbone training and transformation training end to end on a tiny synthetic stand-in (every method runs, learns, caches)."
import numpy as np, pytest, torch

from compatrepro.runtime import RunContext, using_context
from compatrepro.models import load_model, load_transformation
from compatrepro import pipeline as P
from compatrepro import specs as SP, train as T
from _doubles import HalfClassesSplit, small_backbone_spec


pytestmark = pytest.mark.usefixtures('one_thread')


@pytest.fixture
def fake_data(monkeypatch):
    "The pipeline's data (it imports get_split by name: that is the name to replace)."
    monkeypatch.setattr(P, 'get_split', lambda name, part, scale='tiny', data_root=None, seed=0, **kw: HalfClassesSplit(name, part))


@pytest.fixture(scope='module')
def cache_dir(tmp_path_factory): return tmp_path_factory.mktemp('cache')


@pytest.fixture
def ctx(cache_dir):
    "One run context on the module's cache: the old models are trained once for all methods."
    with using_context(RunContext(cache=cache_dir, device='cpu', progress=False)) as c: yield c


@pytest.fixture
def trainings(monkeypatch, ctx):
    "Every backbone training the pipeline starts: (split, compat method, was the old model cached then, the old model given)."
    log, real = [], P.train_backbone
    def spy(spec, ds, old=None, **kw):
        cached = spec.compat is not None and ('backbone', SP.backbone_key(spec.compat.old)) in ctx.cache
        log.append(dict(split=spec.split, method=spec.compat and spec.compat.method, old_cached=cached, old=old))
        return real(spec, ds, old, **kw)
    monkeypatch.setattr(P, 'train_backbone', spy)
    return log


@pytest.mark.parametrize('method', SP.COMPAT_METHODS)
def test_compatible_training_runs(method, fake_data, ctx, trainings):
    old = small_backbone_spec('imagenet-500')
    spec = small_backbone_spec('imagenet-1k', compat=SP.CompatSpec(method, old, weight=1.0, tau=0.5))
    art = P.cached_backbone(spec)
    assert ('backbone', SP.backbone_key(old)) in ctx.cache          # the old model was trained and cached first
    new_runs = [t for t in trainings if t['method'] == method]
    assert len(new_runs) == 1 and new_runs[0]['old_cached'], trainings
    given = new_runs[0]['old']                                       # ... and it is the old model the new one saw
    ref = ctx.cache.load('backbone', SP.backbone_key(old))['model']['state_dict']
    assert given.class_ids.tolist() == [0, 1]
    for k, v in given.state_dict().items(): assert torch.equal(v.cpu(), ref[k]), k
    assert ('backbone', SP.backbone_key(spec)) in ctx.cache
    assert np.isfinite(art['history'][-1]['loss'])
    m = load_model(art)
    assert m.class_ids.tolist() == [0, 1, 2, 3]
    # the compat term changed training: same spec without it gives other weights
    plain = P.cached_backbone(small_backbone_spec('imagenet-1k'))
    assert not torch.equal(art['model']['state_dict']['embedding.weight'], plain['model']['state_dict']['embedding.weight'])


def test_old_model_is_trained_once(fake_data, ctx, trainings):
    "Two compat specs with the same old model (and a cache hit on the old model itself) train it at most once."
    old = small_backbone_spec('imagenet-500', seed=3)
    for m in ('l2', 'bct'): P.cached_backbone(small_backbone_spec('imagenet-1k', seed=3, compat=SP.CompatSpec(m, old)))
    P.cached_backbone(old)
    assert [t['split'] for t in trainings] == ['imagenet-500', 'imagenet-1k', 'imagenet-1k'], trainings
    assert [t['method'] for t in trainings] == [None, 'l2', 'bct']


@pytest.mark.parametrize('objective,extra', [('l2+disc+uncert', {}), ('disc', {}), ('mcl', dict(rho_blocks=2)), ('rqt', {})])
def test_transformation_trains_and_resumes(objective, extra, fake_data, ctx, tmp_path, monkeypatch):
    old, new = small_backbone_spec('imagenet-500'), small_backbone_spec('imagenet-1k', seed=1)
    spec = SP.transformation_spec(old, new, objective, epochs=6, batch_size=8, inner_dim=16, hidden=16, lr=1e-2, **extra)
    art = P.cached_transformation(spec)
    assert ('transformation', SP.transformation_key(spec)) in ctx.cache
    h = art['history']
    assert len(h) == 6 and h[-1]['loss'] < h[0]['loss'], h              # it learns on its training features
    net = load_transformation(art)
    fo = P.get_features(old, 'imagenet-1k', 'train')['features']
    fn = P.get_features(new, 'imagenet-1k', 'train')['features']
    labels = P.get_features(new, 'imagenet-1k', 'train')['labels']
    out = T.apply_transformation(net, fo if spec.kind == 'fct' else fn)
    if objective.endswith('uncert'): assert out[0].shape == (32, 8) and out[1].shape == (32,)
    elif spec.kind == 'rm': assert out[0].shape == (32, 8) and out[1].shape == (32, 8)
    else: assert out.shape == (32, 8)
    # a cache hit: the same network, no training
    monkeypatch.setattr(P, 'train_transformation', lambda *a, **k: (_ for _ in ()).throw(AssertionError('trained again')))
    again = P.get_transformation(spec)
    for k, v in net.state_dict().items(): assert torch.equal(v, again.state_dict()[k]), k
    # exact resume of the pure trainer: a run stopped after epoch 3 and resumed ends with the pipeline's weights (on the
    # pipeline's inputs: RM's transformations train on the stand-in's augmented views, `spec.views` of them)
    head = P.get_backbone(new).head
    ck = tmp_path/'t.pt'
    views = lambda b: (torch.stack([P.get_features(b, 'imagenet-1k', 'train', view=v)['features'] for v in range(spec.views)])
                       if spec.views else P.get_features(b, 'imagenet-1k', 'train')['features'])
    to, tn = views(old), views(new)
    with pytest.raises(T.TrainingInterrupted):
        T.train_transformation(spec, to, tn, labels, head, checkpoint=ck, device='cpu', stop_after=3, show_progress=False)
    assert torch.load(ck, weights_only=False)['epoch'] == 3
    r = T.train_transformation(spec, to, tn, labels, head, checkpoint=ck, device='cpu', show_progress=False)
    assert [e['epoch'] for e in r['history']] == list(range(1, 7))
    for k, v in art['transformation']['state_dict'].items(): assert torch.equal(v, r['transformation']['state_dict'][k]), k
