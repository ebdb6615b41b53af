"""The command line the suspect probes share (`fastfill_disc_probe.py`, `bct_face_probe.py`, `ract_keys_probe.py`):
seeds, artifact cache, output, torch threads and scale."""

import argparse, os


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
