"""The fonts' glyph masks, rendered once per test session and put into the scratch caches of the scripts a test runs.

Every fresh artifact cache renders the masks of every candidate character in every font before it can make a Glyphs
image (`glyph-masks`, about 15 s of one thread, 58 MB), and the probe and screen tests run each script on a scratch
cache of its own. The masks depend on the fonts and `GLYPH_VERSION` alone, so one rendering serves every cache; a
seeded cache reads them as if it had made them (same key, same file). A script whose knobs ask for other masks (a
render size of its own) misses them and renders its own, as before."""
import atexit, shutil, sys, tempfile
from pathlib import Path

_made: Path | None = None   # this session's masks: <root>/glyph-masks/<key>.{pt,json}
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / 'benchmarks'))   # probe_args, the scripts


def _session_masks() -> Path:
    "Render the smoke scale's masks once, in a folder of this session's."
    global _made
    if _made is None:
        from compatrepro.glyphs import glyph_classes
        from compatrepro.standin import STANDIN_CONFIGS
        root = Path(tempfile.mkdtemp(prefix='compatrepro-glyph-masks-'))
        atexit.register(shutil.rmtree, root, True)   # 58 MB: gone with the session
        glyph_classes(STANDIN_CONFIGS['smoke'], cache_root=str(root))
        _made = root / 'glyph-masks'
    return _made


def seed_glyph_masks(*caches: Path) -> None:
    "Put this session's glyph masks into each of `caches` that does not hold them yet."
    src = _session_masks()
    for cache in caches:
        dst = Path(cache) / 'glyph-masks'
        dst.mkdir(parents=True, exist_ok=True)
        for f in src.iterdir():
            if not (dst / f.name).exists():
                shutil.copy2(f, dst / f.name)


def caches_of(args, *more: Path, variants=()) -> list[Path]:
    """The caches a script run may use: the folder after each `--cache` in its `args`, each of `variants`' own under
    a `--cache-root` (`probe_args.variant_cache`), and `more`."""
    from probe_args import variant_cache
    pairs = list(zip(args, args[1:]))
    return ([Path(x) for flag, x in pairs if flag == '--cache']
            + [variant_cache(x, v) for flag, x in pairs if flag == '--cache-root' for v in variants] + list(more))


def variants_of(script: str) -> list[str]:
    "The variants (or readings) of benchmarks/<script>.py that train in caches of their own under its --cache-root."
    import importlib
    m = importlib.import_module(script)
    return list(getattr(m, 'VARIANTS', None) or getattr(m, 'READINGS', None) or ())


def seed_script_caches(script: str, args, *more: Path) -> None:
    "Seed every cache a run of benchmarks/<script>.py with `args` may use (`caches_of`), and `more`."
    seed_glyph_masks(*caches_of(args, *more, variants=variants_of(script)))
