"""The probe and screen tests run their scripts on one cache of the session and put its glyph masks and images into
each cache of a script's own (`tests/_script_caches.py`): a seeded cache must find them and make none, else the seeding
saves nothing."""
import pytest

from _script_caches import caches_of, seed_glyphs, shared_cache


def test_a_seeded_cache_renders_no_masks(tmp_path, monkeypatch):
    import compatrepro.glyphs as G
    from compatrepro.standin import STANDIN_CONFIGS
    seed_glyphs(tmp_path)
    monkeypatch.setattr(G, '_render_all_masks', lambda *a: pytest.fail('a seeded cache rendered the glyph masks'))
    assert G.glyph_classes(STANDIN_CONFIGS['smoke'], cache_root=str(tmp_path)).chars


def test_a_seeded_cache_makes_no_images(tmp_path, monkeypatch):
    "A family's images made in the shared cache are found in a cache seeded after, under the same key."
    import compatrepro.glyphs as G
    from compatrepro.runtime import ArtifactCache
    from compatrepro.standin import STANDIN_CONFIGS
    cfg = STANDIN_CONFIGS['smoke']
    monkeypatch.setenv('COMPATREPRO_CACHE', str(shared_cache()))   # the masks the images are drawn from
    made = G.glyph_universe(cfg, 0, ArtifactCache(str(shared_cache())), family='places365')
    seed_glyphs(tmp_path)
    monkeypatch.setattr(G, 'make_glyph_universe', lambda *a: pytest.fail('a seeded cache made the images again'))
    found = G.glyph_universe(cfg, 0, ArtifactCache(str(tmp_path)), family='places365')
    assert (found['train'] == made['train']).all() and (found['eval_labels'] == made['eval_labels']).all()


def test_the_caches_of_a_script_run(tmp_path):
    from pathlib import Path
    args = ['--seeds', '0', '--cache', 'a', '--models', 'old', '--cache', 'b']
    assert caches_of(args, tmp_path) == [Path('a'), Path('b'), tmp_path]
    assert caches_of(['--cache']) == []   # a flag with no folder after it names none
    assert caches_of(['--cache-root', 'r'], variants=['lr 1e-3', 'patch 4, lr 1e-3']) == [Path('r/lr-1e-3'),
                                                                                          Path('r/patch-4-lr-1e-3')]
