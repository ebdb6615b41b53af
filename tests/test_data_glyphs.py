"The Glyphs stand-in through get_split, on a small configuration in a temporary cache."
import hashlib, os, subprocess, sys

import numpy as np
import pytest
import torch

from compatrepro.runtime import ArtifactCache
from compatrepro.standin import STANDIN_FAMILIES, GlyphConfig, family_sizes
from compatrepro.glyphs import glyph_classes
from compatrepro.data import SPLITS, get_split, list_splits, describe_split

CFG = GlyphConfig(n_classes=40, n_unseen=30, ijbc_subjects=8, ijbc_images=11, n_train=6, n_eval=4)

# the evaluation-only sets, each with the paper(s) that test on it: no model of any paper trains on their classes
EVAL_ONLY_SETS = {'GLDv2-test (RACT; RM open-class)': [('gldv2', 'query'), ('gldv2', 'gallery'), ('gldv2-open-class-old', 'query')],
                  'ROxford (RACT)': [('roxford5k', 'query'), ('roxford5k', 'gallery')],
                  'RParis (RACT)': [('rparis6k', 'query'), ('rparis6k', 'gallery')],
                  'IJB-C (BCT)': [('ijbc', 'eval'), ('ijbc', 'query'), ('ijbc', 'gallery')],
                  'Market-1501 test identities (BCT; RM)': [('market-1501', 'query'), ('market-1501', 'gallery')],
                  'VGGFace2 test identities (FastFill)': [('vggface2-8631', 'eval'), ('vggface2-863', 'eval')]}


@pytest.fixture(scope='module')
def cache(tmp_path_factory):
    return ArtifactCache(tmp_path_factory.mktemp('cache'))


def names(ds) -> set:
    "The classes of a split, by name (labels are each family's own: only names compare across families)."
    return {ds.class_names[c] for c in ds.classes}


def test_bars_of_the_default_classes():
    cfg = GlyphConfig()
    gc, sizes = glyph_classes(cfg), family_sizes(cfg)
    assert len(gc.chars) == sum(t + e for t, e in sizes.values()) and len(set(gc.chars)) == len(gc.chars)
    assert sizes['imagenet'] == (cfg.n_classes, 0) == (120, 0) and sizes['ijbc'] == (0, 240) and sizes['gldv2'] == (120, 120)
    assert sum(c in gc.symbols for c in 'A\u0391\u0410') <= 1            # Latin / Greek / Cyrillic A are one character
    for f, (s, t, e) in gc.spans.items():
        assert (t, e) == sizes[f]
        for a, b in ((s, s + t), (s + t, s + t + e)):                  # half from each script group, in each role
            assert np.bincount(gc.groups[a:b], minlength=2).tolist() == [(b - a + 1)//2, (b - a)//2]
    pools = [set(gc.pools[f]) for f in STANDIN_FAMILIES]
    assert sum(len(p & q) for i, p in enumerate(pools) for q in pools[i + 1:]) == 0   # no character in two families


def test_seed_determinism_and_disjoint_pools(cache):
    a = get_split('imagenet-1k', 'train', config=CFG, cache=cache, seed=5).tensors()[0].clone()
    b = get_split('imagenet-1k', 'train', config=CFG, cache=ArtifactCache(cache.root/'other'), seed=5).tensors()[0]
    c = get_split('imagenet-1k', 'train', config=CFG, cache=cache, seed=6).tensors()[0]
    assert torch.equal(a, b) and not torch.equal(a, c)
    ev = get_split('imagenet-1k', 'eval', config=CFG, cache=cache, seed=5).tensors()[0]
    assert not {x.numpy().tobytes() for x in a} & {x.numpy().tobytes() for x in ev}


def test_same_images_in_another_process(cache, tmp_path):
    "Same config and seed, same images, in a fresh process with another hash seed (no set or dict order leaks in)."
    code = ("import hashlib; from compatrepro.runtime import ArtifactCache; from compatrepro.standin import GlyphConfig; "
            "from compatrepro.data import get_split; "
            f"cfg = GlyphConfig(n_classes=40, n_unseen=30, ijbc_subjects=8, ijbc_images=11, n_train=6, n_eval=4); "
            f"ds = get_split('rparis6k', 'gallery', config=cfg, cache=ArtifactCache({str(tmp_path)!r}), seed=3); "
            "print(hashlib.sha256(ds.images.numpy().tobytes() + ds.labels.tobytes()).hexdigest(), ds.class_names[0])")
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, env={**os.environ, 'PYTHONHASHSEED': '123'})
    assert out.returncode == 0, out.stderr
    ds = get_split('rparis6k', 'gallery', config=CFG, cache=cache, seed=3)
    assert out.stdout.split()[0] == hashlib.sha256(ds.images.numpy().tobytes() + ds.labels.tobytes()).hexdigest()
    assert out.stdout.strip().split(' ', 1)[1] == ds.class_names[0]


def test_contract_on_every_name(cache):
    sizes = family_sizes(CFG)
    for n in list_splits():
        for p in describe_split(n)['parts']:
            ds = get_split(n, p, config=CFG, cache=cache)
            assert ds.description.startswith('Glyphs stand-in for ') and '(tiny scale)' in ds.description
            assert ds.labels.dtype == np.int64 and len(ds.labels) == len(ds) > 0
            assert ds.classes.tolist() == sorted(set(ds.labels.tolist()) - {-1})
            assert len(ds.class_names) == sum(sizes[SPLITS[n].family]) and ds.groups.shape == ds.labels.shape
            assert (ds.name, ds.part, ds.scale, ds.image_size) == (n, p, 'tiny', (32, 32))
            x, y = ds[0]
            assert x.dtype == torch.float32 and tuple(x.shape) == (3, 32, 32) and y == ds.labels[0]


def test_no_two_paper_datasets_share_a_class_or_an_image(cache):
    classes, images = {}, {}
    for n in list_splits():
        f = SPLITS[n].family
        for p in describe_split(n)['parts']:
            ds = get_split(n, p, config=CFG, cache=cache)
            classes.setdefault(f, set()).update(names(ds))
            images.setdefault(f, set()).update(hashlib.blake2b(x.numpy().tobytes(), digest_size=16).digest() for x in ds.images)
    assert sorted(classes) == sorted(STANDIN_FAMILIES)
    fams = sorted(classes)
    for i, a in enumerate(fams):
        for b in fams[i + 1:]:
            assert not classes[a] & classes[b], (a, b)
            assert not images[a] & images[b], (a, b)
            assert not set(''.join(c[:2] for c in classes[a])) & set(''.join(c[:2] for c in classes[b])), (a, b)   # no shared character


def test_evaluation_only_sets_share_no_class_with_a_training_split(cache):
    trained = set().union(*(names(get_split(n, 'train', config=CFG, cache=cache)) for n in list_splits() if 'train' in SPLITS[n].parts))
    for what, sets in EVAL_ONLY_SETS.items():
        ev = set().union(*(names(get_split(n, p, config=CFG, cache=cache)) for n, p in sets))
        assert ev and not ev & trained, what
    # GLDv2-test's classes: the GLDv2 family's evaluation-only ones, none of the 40 its splits train on
    q = get_split('gldv2', 'query', config=CFG, cache=cache)
    assert set(get_split('gldv2', 'gallery', config=CFG, cache=cache).classes) == set(range(40, 70)) and set(q.classes) < set(range(40, 70))


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
