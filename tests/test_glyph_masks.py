"""The probe and screen tests seed each scratch cache with the glyph masks rendered once per session
(`tests/_glyph_masks.py`): a seeded cache must find them and render none, else the seeding saves nothing."""
import pytest

from _glyph_masks import caches_of, seed_glyph_masks


def test_a_seeded_cache_renders_no_masks(tmp_path, monkeypatch):
    import compatrepro.glyphs as G
    from compatrepro.standin import STANDIN_CONFIGS
    seed_glyph_masks(tmp_path)
    monkeypatch.setattr(G, '_render_all_masks', lambda *a: pytest.fail('a seeded cache rendered the glyph masks'))
    assert G.glyph_classes(STANDIN_CONFIGS['smoke'], cache_root=str(tmp_path)).chars


def test_the_caches_of_a_script_run(tmp_path):
    from pathlib import Path
    args = ['--seeds', '0', '--cache', 'a', '--models', 'old', '--cache', 'b']
    assert caches_of(args, tmp_path) == [Path('a'), Path('b'), tmp_path]
    assert caches_of(['--cache']) == []   # a flag with no folder after it names none
    assert caches_of(['--cache-root', 'r'], variants=['lr 1e-3', 'patch 4, lr 1e-3']) == [Path('r/lr-1e-3'),
                                                                                          Path('r/patch-4-lr-1e-3')]
