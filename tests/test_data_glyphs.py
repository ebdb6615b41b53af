"The Glyphs stand-in through get_split, on a small configuration in a temporary cache."
import numpy as np
import pytest
import torch

from compatrepro.core import ArtifactCache
from compatrepro.glyphs import GlyphConfig, glyph_classes
from compatrepro.data import get_split, list_splits, describe_split

CFG = GlyphConfig(n_classes=40, n_train=6, n_eval=4)


@pytest.fixture(scope='module')
def cache(tmp_path_factory):
    return ArtifactCache(tmp_path_factory.mktemp('cache'))


def test_bars_of_the_default_classes():
    cfg = GlyphConfig()
    gc = glyph_classes(cfg)
    assert len(gc.chars) == cfg.n_classes == 120 and len(set(gc.chars)) == len(gc.chars)
    assert sum(c in gc.chars for c in 'A\u0391\u0410') <= 1            # Latin / Greek / Cyrillic A are one class
    assert np.bincount(gc.groups).tolist() == [60, 60]                # half from each script group


def test_seed_determinism_and_disjoint_pools(cache):
    a = get_split('imagenet-1k', 'train', config=CFG, cache=cache, seed=5).tensors()[0].clone()
    b = get_split('imagenet-1k', 'train', config=CFG, cache=ArtifactCache(cache.root/'other'), seed=5).tensors()[0]
    c = get_split('imagenet-1k', 'train', config=CFG, cache=cache, seed=6).tensors()[0]
    assert torch.equal(a, b) and not torch.equal(a, c)
    ev = get_split('imagenet-1k', 'eval', config=CFG, cache=cache, seed=5).tensors()[0]
    assert not {x.numpy().tobytes() for x in a} & {x.numpy().tobytes() for x in ev}


def test_contract_on_every_name(cache):
    for n in list_splits():
        for p in describe_split(n)['parts']:
            ds = get_split(n, p, config=CFG, cache=cache)
            assert ds.description.startswith('Glyphs stand-in for ') and '(tiny scale)' in ds.description
            assert ds.labels.dtype == np.int64 and len(ds.labels) == len(ds) > 0
            assert ds.classes.tolist() == sorted(set(ds.labels.tolist()) - {-1})
            assert len(ds.class_names) == 40 and ds.groups.shape == ds.labels.shape
            assert (ds.name, ds.part, ds.scale, ds.image_size) == (n, p, 'tiny', (32, 32))
            x, y = ds[0]
            assert x.dtype == torch.float32 and tuple(x.shape) == (3, 32, 32) and y == ds.labels[0]


def test_eval_sets_attributes(cache):
    q, g = get_split('roxford5k', 'query', config=CFG, cache=cache), get_split('roxford5k', 'gallery', config=CFG, cache=cache)
    assert len(q.gnd) == len(q) and all((g.labels[d['easy']] == l).all() for d, l in zip(q.gnd, q.labels))
    ev = get_split('ijbc', 'eval', config=CFG, cache=cache)
    t2l = dict(zip(ev.templates.tolist(), ev.labels.tolist()))
    assert all((t2l[a] == t2l[b]) == bool(s) for a, b, s in ev.template_pairs)
    mq, mg = get_split('market-1501', 'query', config=CFG, cache=cache), get_split('market-1501-375', 'train', config=CFG, cache=cache)
    assert not set(mq.classes) & set(mg.classes)


def test_no_flips_in_augmentation(cache):
    ds = get_split('imagenet-1k', 'train', config=CFG, cache=cache)
    x = ds.tensors()[0][:64]
    torch.manual_seed(0)
    aug = ds.augment(x); plain = ds.normalize(x)
    # an augmented image is closer to its original than to its mirror image (small affine, no flip)
    d_same = (aug - plain).abs().mean((1, 2, 3)); d_flip = (aug - plain.flip(-1)).abs().mean((1, 2, 3))
    assert (d_same < d_flip).float().mean() > 0.9
