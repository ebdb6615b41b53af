"""The command line the suspect probes share (`fastfill_disc_probe.py`, `bct_face_probe.py`, `ract_keys_probe.py`):
seeds, artifact cache, output, torch threads and scale."""

import argparse, os
from pathlib import Path


def probe_arguments(doc: str, out: str, out_help: str = 'the CSV file to write') -> argparse.ArgumentParser:
    "The probes' common options; a probe adds its own before parsing."
    ap = argparse.ArgumentParser(description=doc.split('\n\n')[0])
    ap.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2])
    ap.add_argument('--cache', help='artifact cache (default: $COMPATREPRO_CACHE)')
    ap.add_argument('--out', default=out, help=out_help)
    ap.add_argument('--threads', type=int, default=1, help='torch threads (1, as compatrepro reproduce trains)')
    ap.add_argument('--scale', default='tiny', choices=('tiny', 'smoke'), help="'smoke': a quick check that it runs")
    return ap


def apply_probe_arguments(a: argparse.Namespace) -> None:
    "Point the package at `--cache` (before it makes its run context) and give torch `--threads`."
    if a.cache:
        os.environ['COMPATREPRO_CACHE'] = os.path.expanduser(a.cache)
    import torch

    torch.set_num_threads(a.threads)


def probe_seeds(a: argparse.Namespace, probe_seed, *args) -> list:
    """The rows of `probe_seed(seed, a.scale, *args)` for each of `a.seeds`, the CSV `a.out` rewritten after each seed
    (a seed finished is kept if a later one is interrupted)."""
    import pandas as pd

    rows = []
    for s in a.seeds:
        rows += probe_seed(s, a.scale, *args)
        pd.DataFrame(rows).to_csv(a.out, index=False, float_format='%.4f')
    return rows


def variant_cache(root, variant: str) -> Path:
    "The cache of a variant (or a reading) other than the library's: a folder of `root` named after it."
    return Path(root)/variant.replace(', ', '-').replace(' ', '-')


def variant_arguments(ap: argparse.ArgumentParser, variants, cache_root: str) -> argparse.ArgumentParser:
    "The options of a screen of variants (`simclr_screen.py`, `vit_screen.py`): which variants, and their caches."
    ap.add_argument('--cache-root', default=cache_root, help="a cache per variant other than the library's")
    ap.add_argument('--variants', nargs='+', default=list(variants), choices=list(variants))
    return ap


def run_variants(a: argparse.Namespace, library: str, prepare, measure, summary, order=None) -> None:
    """Each variant of `a.variants` in turn (`order`: a sort key; default: the library's first), `prepare(variant)`
    patching this process, then `measure(seed, variant, scale)` -> a row for each seed, the CSV `a.out` rewritten
    after each row; a variant other than the `library` one trains in a cache of its own under `a.cache_root` (its
    spec is the library's, so its models must not meet the library's), and the library's uses $COMPATREPRO_CACHE."""
    import pandas as pd

    main_cache = os.environ.get('COMPATREPRO_CACHE')
    rows = []
    for v in sorted(a.variants, key=order or (lambda v: v != library)):
        if v != library:
            os.environ['COMPATREPRO_CACHE'] = str(variant_cache(a.cache_root, v))
        elif main_cache is not None:
            os.environ['COMPATREPRO_CACHE'] = main_cache
        prepare(v)
        for s in a.seeds:
            rows.append(measure(s, v, a.scale))
            print(' '.join(f'{k} {x:.3f}' if isinstance(x, float) else f'{k} {x}' for k, x in rows[-1].items()),
                  flush=True)
            pd.DataFrame(rows).to_csv(a.out, index=False, float_format='%.4f')
    print(summary(a.out))


def set_family_identities(scale: str, family: str, identities: int, images: int) -> None:
    """This process's stand-in: `family` with `identities` training identities of `images` training images each (the
    other families as they were), its evaluation-only identities as many as the stand-in's. A stand-in knob is not in
    the models' cache keys: the caller gives the process a cache of its own."""
    from dataclasses import replace

    from compatrepro import standin

    cfg = standin.STANDIN_CONFIGS[scale]
    unseen = standin.family_sizes(cfg)[family][1]
    others = tuple(e for e in cfg.family_classes if e[0] != family)
    standin.STANDIN_CONFIGS[scale] = replace(cfg, family_classes=others + ((family, identities, unseen, images),))


def identity_arguments(ap: argparse.ArgumentParser, whose: str) -> argparse.ArgumentParser:
    "The identity lever's options: `whose` training identities (`--identities`) of `--images` images each."
    ap.add_argument('--identities', type=int,
                    help=f"{whose} training identities (with --images; default: the stand-in's)")
    ap.add_argument('--images', type=int, help='training images per identity (with --identities)')
    return ap


def identities_together(ap: argparse.ArgumentParser, a: argparse.Namespace, example: str) -> None:
    "Refuse `--identities` without `--images` or the other way round; `example`: the pair the error suggests."
    if (a.identities is None) != (a.images is None):
        ap.error(f'give --identities and --images together (e.g. {example})')


def apply_identity_arguments(ap: argparse.ArgumentParser, a: argparse.Namespace, family: str, example: str) -> None:
    """Refuse `--identities` without `--images` (or the other way round) or without a cache of its own; then give this
    process's stand-in `family` with that many (`set_family_identities`). `example`: the pair the error suggests."""
    identities_together(ap, a, example)
    if a.identities is not None and not a.cache:
        ap.error('--identities changes the stand-in, whose knobs are not in the cache keys: give it its own --cache')
    if a.identities is not None:
        set_family_identities(a.scale, family, a.identities, a.images)
