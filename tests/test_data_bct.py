"BCT's data on the Glyphs stand-in: IMDB-Face without the IJB-C subjects, IJB-C's open-set layout and its counts, Market-1501's cameras."
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from compatrepro.runtime import ArtifactCache
from compatrepro.standin import GlyphConfig, family_images, family_sizes, standin_config
from compatrepro.data import _ijbc_standin, false_alarms_allowed, get_split, ijbc_protocol_counts, split_versions
from compatrepro.metrics import tar_at_far, tpir_at_fpir, verification_scores

# 8 IJB-C subjects of 10 images: 1 gallery + 1 probe template (5 + 5)
CFG = GlyphConfig(n_classes=40, n_unseen=30, ijbc_subjects=8, ijbc_images=10, n_train=6, n_eval=4)


@pytest.fixture(scope='module')
def cache(tmp_path_factory):
    return ArtifactCache(tmp_path_factory.mktemp('cache'))


def split(name, part, cache, seed=0):
    return get_split(name, part, config=CFG, cache=cache, seed=seed)


def template_means(ds):
    "Mean of each template's flattened pixels (a stand-in for template features), with its label, G1/G2 and id."
    x = ds.normalize(ds.tensors()[0]).flatten(1).numpy()
    t = pd.DataFrame(x).groupby(ds.templates).mean()
    first = pd.DataFrame(dict(label=ds.labels, half=ds.gallery_set)).groupby(ds.templates).first()
    return t.to_numpy(np.float32), first.label.to_numpy(), first.half.to_numpy(), t.index.to_numpy()


def names(ds) -> set:
    return {ds.class_names[c] for c in ds.classes}


def test_imdbface_never_trains_on_ijbc_subjects(cache):
    ij = split('ijbc', 'eval', cache)
    subjects = names(ij)
    assert ij.classes.tolist() == list(range(8)) and len(subjects) == 8    # a family of its own: 8 subjects
    for n in ('imdbface', 'imdbface-90', 'imdbface-50', 'imdbface-25'):
        assert not subjects & names(split(n, 'train', cache))
    im = split('imdbface', 'train', cache)
    assert len(im.classes) == 40
    assert not set(''.join(s[:2] for s in subjects)) & set(''.join(s[:2] for s in names(im)))   # not even a character


def test_ijbc_is_open_set(cache):
    q, g, ev = (split('ijbc', p, cache) for p in ('query', 'gallery', 'eval'))
    halves = pd.Series(g.gallery_set).groupby(g.labels).nunique()
    assert (halves == 1).all() and sorted(np.bincount(g.gallery_set, minlength=3)[1:]) == [20, 20]   # 4 + 4 subjects
    assert not set(q.templates) & set(g.templates)
    assert {x.numpy().tobytes() for x in q.images}.isdisjoint({x.numpy().tobytes() for x in g.images})
    c = ijbc_protocol_counts(q, g, ev)
    assert c == dict(gallery_templates=8, probe_templates=8, genuine=8, impostor=56,
                     mated_G1=4, non_mated_G1=4, mated_G2=4, non_mated_G2=4, non_mated=8)
    # each half is searched on its own: both mated and non-mated probes, so tpir_at_fpir measures (it raised before)
    pf, pl, _, _ = template_means(q); gf, gl, gh, _ = template_means(g)
    for h in (1, 2):
        out = tpir_at_fpir(pf, pl, gf[gh == h], gl[gh == h], fpir=(0.25, 0.5))
        assert {'TPIR@FPIR=0.25', 'TPIR@FPIR=0.5', 'rank1', 'rank5'} <= set(out) and out['n_nonmated'] > 0
    with pytest.raises(ValueError, match='non-mated'):
        tpir_at_fpir(pf, pl, gf, gl)                                        # G1 + G2 together: every probe mated
    # 1:1: the pairs' genuine flag is "same subject", and TAR@FAR is measurable
    ef, _, _, eid = template_means(ev); row = {t: i for i, t in enumerate(eid)}
    a, b, y = ev.template_pairs.T
    lab = dict(zip(ev.templates.tolist(), ev.labels.tolist()))
    assert all((lab[i] == lab[j]) == bool(s) for i, j, s in ev.template_pairs)
    s = verification_scores(ef[[row[i] for i in a]], ef[[row[j] for j in b]])
    assert 0 <= tar_at_far(s, y.astype(bool), 0.1) <= 100


def test_ijbc_layout_is_fixed_and_needs_enough_images(cache):
    a, b = split('ijbc', 'eval', cache), split('ijbc', 'eval', cache, seed=1)
    assert np.array_equal(a.templates, b.templates) and np.array_equal(a.template_pairs, b.template_pairs)
    with pytest.raises(ValueError, match='more images per subject'):
        get_split('ijbc', 'eval', config=GlyphConfig(n_classes=40, ijbc_subjects=8, ijbc_images=7), cache=cache)


def test_tiny_ijbc_rests_bct_headline_points_on_ten_negatives():
    "At tiny scale TAR@FAR=1e-4 and TPIR@FPIR=1e-2 (each gallery half) rest on >= 10 negatives; counted from the layout, nothing rendered."
    cfg = standin_config('tiny')
    S, n = family_sizes(cfg)['ijbc'][1], family_images(cfg, 'ijbc')[1]
    ev = pd.DataFrame(dict(label=np.repeat(np.arange(S), n), split='val', src=-1 - np.arange(S*n)))
    rows, pairs = _ijbc_standin(ev)
    part = lambda sp: rows[rows.split == sp]
    ns = lambda d, **kw: SimpleNamespace(labels=d.label.to_numpy(), templates=d.template.to_numpy(), **kw)
    c = ijbc_protocol_counts(ns(part('query')), ns(part('gallery'), gallery_set=part('gallery').gallery_set.to_numpy()),
                             ns(part('test'), template_pairs=pairs))
    assert c['impostor'] >= 100_000 and min(c['non_mated_G1'], c['non_mated_G2']) >= 1_000
    assert false_alarms_allowed(c['impostor'], 1e-4)[1e-4] >= 10
    assert false_alarms_allowed(min(c['non_mated_G1'], c['non_mated_G2']), 1e-2)[1e-2] >= 10
    assert c == dict(gallery_templates=240, probe_templates=2400, genuine=2400, impostor=573600,
                     mated_G1=1200, non_mated_G1=1200, mated_G2=1200, non_mated_G2=1200, non_mated=2400)


def test_family_versions():
    assert split_versions('imdbface-25') == {'splits:imdbface': 3} and split_versions('ijbc') == {'splits:ijbc': 3}
    assert split_versions('vggface2-863') == {} and split_versions('gldv2-open-data-old') == {'splits:gldv2': 4}   # GLDv2-test's own classes


def test_market_cameras_leave_every_query_a_cross_camera_positive(cache):
    q, g, t = (split('market-1501', p, cache) for p in ('query', 'gallery', 'train'))
    assert q.cameras is not None and g.cameras is not None and t.cameras is not None
    assert set(t.cameras) == set(range(6)) and set(g.cameras) <= set(range(6))
    for l, c in zip(q.labels, q.cameras):
        pos = g.labels == l
        assert (pos & (g.cameras != c)).any()                    # not only same-camera (junk) positives
    assert split_versions('market-1501') == {'splits:market1501': 3}


def test_imdbface_90_is_nested(cache):
    ids = {n: set(split(n, 'train', cache, seed=2).classes) for n in ('imdbface-25', 'imdbface-50', 'imdbface-90', 'imdbface')}
    assert [len(v) for v in ids.values()] == [10, 20, 36, 40]
    assert ids['imdbface-25'] < ids['imdbface-50'] < ids['imdbface-90'] < ids['imdbface']
