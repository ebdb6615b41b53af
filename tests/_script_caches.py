"""The artifact caches of the benchmark scripts that the probe and screen tests run at smoke scale.

A fresh cache renders the fonts' glyph masks before it can make a Glyphs image (`glyph-masks`, about 15 s of one thread,
58 MB), then makes the images of each family a script reads (`glyphs`, about 5 s a script), while a smoke model
trains in under a second (measured on 2026-12-03). So the scripts share one cache for the session (`shared_cache`, their
`$COMPATREPRO_CACHE`), as they share `~/.cache/compatrepro` in use: its keys are content, so a model or an image set that
another script made there is the one this script would make. A run that asks for caches of its own (`--cache`, a
variant's under `--cache-root`: there a knob outside the cache key trains) gets the masks and the shared cache's images
linked into them (same key, same file); what it trains there is its own."""
import atexit, os, shutil, sys, tempfile
from pathlib import Path

_made: Path | None = None   # this session's shared cache
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / 'benchmarks'))   # probe_args, the scripts
SEEDED = ('glyph-masks', 'glyphs')   # the kinds put into a script's own caches


def shared_cache() -> Path:
    "The session's cache of the scripts, its glyph masks rendered at the smoke scale; removed when the session ends."
    global _made
    if _made is None:
        from compatrepro.glyphs import glyph_classes
        from compatrepro.standin import STANDIN_CONFIGS
        root = Path(tempfile.mkdtemp(prefix='compatrepro-script-cache-'))
        atexit.register(shutil.rmtree, root, True)
        glyph_classes(STANDIN_CONFIGS['smoke'], cache_root=str(root))
        _made = root
    return _made


def seed_glyphs(*caches: Path, kinds=SEEDED) -> None:
    "Put the shared cache's glyph masks and images into each of `caches` that does not hold them yet."
    src = shared_cache()
    for cache in caches:
        if Path(cache).resolve() == src.resolve(): continue
        for kind in kinds:
            if not (src / kind).is_dir(): continue
            dst = Path(cache) / kind
            dst.mkdir(parents=True, exist_ok=True)
            for f in (src / kind).iterdir():
                if not (dst / f.name).exists():
                    _link_or_copy(f, dst / f.name)


def _link_or_copy(src: Path, dst: Path) -> None:
    "A hard link (a copy across file systems): the cache replaces a file by renaming a new one, never writes into it."
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


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
    "Seed every cache of its own that a run of benchmarks/<script>.py with `args` may use (`caches_of`), and `more`."
    seed_glyphs(*caches_of(args, *more, variants=variants_of(script)))
