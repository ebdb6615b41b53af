#!/usr/bin/env python
"""Write a copy of a paper dataset with every image's short side cut to 256 pixels, so that a GPU is not held back by
decoding full-size JPEGs (docs/benchmarks.md: on one H200 the reference data path fed ResNet-50 a third of what it
trains on).

    python data_prep/resize_copy.py imagenet /data/imagenet /fast/imagenet-256            # then --data-root /fast
    python data_prep/resize_copy.py places365 /data/places365 /fast/places365-256 --jobs 16

The copy keeps the folder layout and every other file (lists, CSVs, meta files, the manifest), so `get_split` reads it
as it reads the original. Images whose short side is already at most `--short-side` are copied as they are; larger
ones are resized with PIL's antialiased bilinear filter, aspect kept, and written in their own format (JPEG at
`--quality`). The papers' evaluation transform reads the short side at 256 anyway (Resize(256), CenterCrop(224)), but
their training crops (RandomResizedCrop from the full image) then see fewer pixels: a run on such a copy is a
speed choice, not the papers' recipe, and its provenance names its data root. ROxford and RParis are refused: their
query boxes are in the original images' pixels. Re-running resumes: a file already in the copy is skipped.
"""
import argparse, os, shutil, sys
from concurrent.futures import ProcessPoolExecutor
from contextlib import nullcontext
from pathlib import Path

from compatrepro.manifests import FAMILY_DIRS, IMAGE_EXTS

BOXED = {'roxford5k', 'rparis6k'}   # revisitop's query boxes are in the original pixels


def resized_size(w: int, h: int, short_side: int) -> tuple[int, int]:
    "(w, h) with the short side cut to `short_side`, aspect kept (unchanged when it is already at most that)."
    s = min(w, h)
    if s <= short_side: return w, h
    return (short_side, round(h*short_side/w)) if w <= h else (round(w*short_side/h), short_side)


def copy_one(src: Path, dst: Path, short_side: int, quality: int) -> str:
    "Copy `src` to `dst`, resized if it is a larger image; 'resized', 'copied' or 'skipped' (already there)."
    if dst.exists() and dst.stat().st_mtime >= src.stat().st_mtime: return 'skipped'
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(dst.name + '.part')
    if src.suffix.lower() in IMAGE_EXTS:
        from PIL import Image
        with Image.open(src) as im:
            size = resized_size(*im.size, short_side)
            if size != im.size:
                fmt = im.format
                out = im.convert('RGB') if fmt == 'JPEG' and im.mode not in ('RGB', 'L') else im
                out.resize(size, Image.BILINEAR).save(tmp, format=fmt, **({'quality': quality} if fmt == 'JPEG' else {}))
                os.replace(tmp, dst); return 'resized'
    shutil.copy2(src, tmp); os.replace(tmp, dst)
    return 'copied'


def _job(args): return copy_one(*args)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('dataset', choices=sorted(FAMILY_DIRS), help='which dataset the folder holds')
    ap.add_argument('src', help='the dataset folder')
    ap.add_argument('dst', help='the folder to write the copy to (get_split reads <data_root>/<dataset>: name it so)')
    ap.add_argument('--short-side', type=int, default=256, help='the short side of the copied images, in pixels (default 256)')
    ap.add_argument('--quality', type=int, default=90, help='JPEG quality of the resized images (default 90)')
    ap.add_argument('--jobs', type=int, default=os.cpu_count() or 1, help='processes (default: one per core)')
    a = ap.parse_args(argv)
    src, dst = Path(a.src).resolve(), Path(a.dst).resolve()
    if a.dataset in BOXED:
        print(f'error: {a.dataset} is not resized: its query boxes (revisitop gnd file) are in the original pixels', file=sys.stderr)
        return 2
    if not src.is_dir(): print(f'error: {src} is not a folder', file=sys.stderr); return 2
    if dst == src or src in dst.parents: print(f'error: write the copy outside {src}', file=sys.stderr); return 2
    if a.short_side < 1: print('error: --short-side must be a positive number of pixels', file=sys.stderr); return 2
    files = sorted(p for p in src.rglob('*') if p.is_file())
    work = [(p, dst/p.relative_to(src), a.short_side, a.quality) for p in files]
    from tqdm.auto import tqdm
    counts = {}
    with ProcessPoolExecutor(a.jobs) if a.jobs > 1 else nullcontext() as ex:
        done = ex.map(_job, work, chunksize=64) if ex else map(_job, work)
        for r in tqdm(done, total=len(work), desc=f'{a.dataset} -> {dst}', unit='file'):
            counts[r] = counts.get(r, 0) + 1
    print(f'{a.dataset}: {len(work)} files under {dst}: ' + ', '.join(f'{v} {k}' for k, v in sorted(counts.items())))
    return 0


if __name__ == '__main__':
    sys.exit(main())
