"""Benchmark: what the reference data path can feed a GPU, per CPU worker, and what a pre-resized copy buys it.

The paper-scale training path decodes and augments every JPEG in the DataLoader workers (PIL, then torchvision's
RandomResizedCrop(224), flip and normalisation: `compatrepro.loaders.iter_batches`), and on one H200 that fed
ResNet-50 a third of what it trains (docs/benchmarks.md). That path runs on the CPU alone, so its rate per worker can
be measured on any machine, without a model: this writes a fake ImageNet tree of JPEGs at ImageNet's typical size,
a copy made by `data_prep/resize_copy.py` (short side 256), and times `iter_batches` over each with 0 workers (the
main process) and with `--workers` workers, printing images per second over an epoch, the copy's rate as a ratio to
the original's, and the seconds to the epoch's first batch (the workers' start, which every epoch pays again). `--content photo` (the default) draws smooth random images with grain (`bench_train_steps.fake_image`), whose files average about 108 KB at
500x375 and quality 90, as ImageNet-1k's do (138 GB over 1.28 M training images): decoding a JPEG costs by its pixels
and its coded bits; `--content noise` draws the pixel noise of `bench_train_steps.py`'s tree, which decodes slowest.

    python benchmarks/bench_data_path.py                      # 2,000 images, 0 and 1 workers
    python benchmarks/bench_data_path.py --workers 2 --content noise

A bound, not a prediction: the workers of a GPU machine share its cores with the training process, and its cores
are not these. This is a benchmark, not a test: nothing here is asserted in CI. (2026-11-28, the 2-core development
machine, 3,000 images, three runs: 394-484 images/s per core, 558-772 for the copy, 1.41-1.59 times; docs/benchmarks.md.)
"""
from __future__ import annotations
import argparse, os, subprocess, sys, tempfile, time
from pathlib import Path

import numpy as np
import torch
from PIL import Image

os.environ.setdefault('COMPATREPRO_PROGRESS', '0')
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from compatrepro.data import get_split          # noqa: E402
from compatrepro.loaders import iter_batches    # noqa: E402
sys.path.insert(0, str(Path(__file__).parent))
from bench_train_steps import fake_imagenet     # noqa: E402


def images_per_s(root: Path, batch: int, workers: int, epochs: int = 2) -> tuple[float, float]:
    """(images per second over the epoch, seconds to its first batch) of `iter_batches` over the tree's training split
    on the CPU, in the last of `epochs` epochs. The workers start afresh each epoch, as training starts them, and decode
    ahead while they do: the rate counts the whole epoch, start included."""
    ds = get_split('imagenet-1k', 'train', 'paper', str(root))
    for e in range(epochs):
        t, n = [time.perf_counter()], 0
        for x, _ in iter_batches(ds, batch, e, 0, 'cpu', num_workers=workers, train=True):
            t.append(time.perf_counter()); n += len(x)
    return n/(t[-1] - t[0]), t[1] - t[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--images', type=int, default=2000, help='training images in the tree (10 classes)')
    ap.add_argument('--size', default='500x375', help="the JPEGs' WxH (ImageNet's typical 500x375)")
    ap.add_argument('--content', choices=('photo', 'noise'), default='photo')
    ap.add_argument('--workers', type=int, default=1, help='DataLoader workers of the second measurement')
    ap.add_argument('--batch', type=int, default=100)
    a = ap.parse_args()
    torch.set_num_threads(1)
    w, h = (int(v) for v in a.size.lower().split('x'))
    with tempfile.TemporaryDirectory() as d:
        orig, small = Path(d)/'orig', Path(d)/'small'
        fake_imagenet(orig, 10, a.images//10, size=(w, h), content=a.content)
        subprocess.run([sys.executable, str(ROOT/'data_prep'/'resize_copy.py'), 'imagenet', str(orig), str(small)],
                       check=True, capture_output=True, cwd=ROOT)
        kb = lambda r: np.mean([p.stat().st_size for p in (r/'imagenet'/'train').rglob('*.JPEG')])/1024
        with Image.open(next((small/'imagenet'/'train').rglob('*.JPEG'))) as im: ws, hs = im.size
        print(f'{a.images} {a.content} JPEGs (quality 90): {w}x{h}, {kb(orig):.0f} KB; resized copy {ws}x{hs}, {kb(small):.0f} KB')
        print(f"{'workers':>7s} {'original img/s':>15s} {'resized img/s':>14s} {'ratio':>6s} {'first batch s (original, resized)':>34s}")
        for k in sorted({0, a.workers}):
            (r0, f0), (r1, f1) = images_per_s(orig, a.batch, k), images_per_s(small, a.batch, k)
            print(f'{k:7d} {r0:15.0f} {r1:14.0f} {r1/r0:6.2f} {f0:17.2f} {f1:16.2f}')


if __name__ == '__main__':
    main()
