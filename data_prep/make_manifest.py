#!/usr/bin/env python
"""Write the manifest of a paper dataset the user already has, so that `get_split(..., scale='paper')` loads fast.

    python data_prep/make_manifest.py imagenet /data/imagenet            # writes /data/imagenet/compatrepro_manifest.csv.gz
    python data_prep/make_manifest.py vggface2 /data/vggface2 --verify   # also opens every image (finds corrupt files)

The folder layouts are in data_prep/README.md.
"""
import argparse, sys
from pathlib import Path

from compatrepro.manifests import FAMILY_DIRS, MANIFEST_NAME, build_manifest, write_manifest


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('dataset', choices=sorted(FAMILY_DIRS), help='which dataset the folder holds')
    ap.add_argument('folder', help='the dataset folder (get_split expects it at <data_root>/<dataset>)')
    ap.add_argument('--out', default=None, help=f'where to write the manifest (default: <folder>/{MANIFEST_NAME})')
    ap.add_argument('--verify', action='store_true', help='open every image; a corrupt one stops with its name')
    a = ap.parse_args(argv)
    try:
        df = build_manifest(a.dataset, a.folder, verify=a.verify)
    except (FileNotFoundError, ValueError, RuntimeError) as e:
        print(f'error: {e}', file=sys.stderr); return 2
    out = write_manifest(df, a.out or Path(a.folder)/MANIFEST_NAME)
    counts = df.groupby('split').size().to_dict()
    print(f'{a.dataset}: {len(df)} images, {df.label[df.label >= 0].nunique()} classes, splits {counts} -> {out}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
