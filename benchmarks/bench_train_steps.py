"""Images per second of compatrepro's paper-scale training path: the paper's recipe (FastFill App. A.2) for a ResNet on
224x224 crops, JPEGs decoded and augmented by the DataLoader workers, AMP (bf16) and channels-last on a GPU, optionally
with BCT's or RACT's compatibility term, and under `torchrun` with DDP. No dataset can be fetched here, so it writes a
small fake ImageNet tree (random JPEGs of ImageNet's typical size) and repeats it to fill the requested steps; decoding
noise JPEGs costs a little more than natural photos.

    python benchmarks/bench_train_steps.py --arch resnet50 --batch 256 --steps 200           # one GPU
    python benchmarks/bench_train_steps.py --arch resnet50 --batch 256 --steps 200 --compat ract
    torchrun --nproc_per_node=1 benchmarks/bench_train_steps.py --arch resnet50 --batch 256 --steps 200   # DDP
    python benchmarks/bench_train_steps.py --arch resnet50 --batch 256 --steps 200 --synthetic   # without the data path
    python benchmarks/bench_train_steps.py --arch resnet50 --batch 256 --steps 200 --loader gpu   # JPEGs decoded on the GPU
    python benchmarks/bench_train_steps.py --arch resnet50 --batch 256 --steps 200 --loader gpu-side-stream   # decoded on a side stream
    python benchmarks/bench_train_steps.py --arch resnet18 --batch 8 --steps 3 --workers 0   # a CPU smoke run
    python benchmarks/bench_train_steps.py --arch resnet18 --batch 8 --steps 3 --workers 0 --loader gpu --device cpu   # its device path

`--loader cpu` (the default) is the reference data path (PIL decoding and torchvision's transforms in the workers);
`--loader gpu` the device path of `compatrepro.loaders.iter_device_batches` (the workers read the files' bytes, the
batch is decoded by `torchvision.io.decode_jpeg` on the training device, after the training stream has drained, and
cropped there), on whatever `--device` is; `--loader gpu-side-stream` the same with each batch decoded on a CUDA stream
of its own instead of after the drain (`decode_on_side_stream`).
It trains two epochs of `--steps` steps each and prints the images per second of each; the second is the steady rate
(the first includes cuDNN's autotuning and the workers' start). `--out f.json` also writes them.
"""
import argparse, copy, json, os, shutil, tempfile, time
from dataclasses import replace
from pathlib import Path

import numpy as np, torch
from PIL import Image

from compatrepro.runtime import RunContext, default_workers, get_device
from compatrepro.data import get_split
from compatrepro.pipeline import get_backbone
from compatrepro import specs as SP, train as T


def fake_image(rng, w: int, h: int, content: str = 'noise') -> Image.Image:
    """A random RGB image: 'noise' (uniform pixels, the slowest to decode) or 'photo' (a smooth field of coarse colours
    plus grain of std 27, whose JPEGs at 500x375 and quality 90 average about 108 KB, as ImageNet-1k's do)."""
    if content == 'noise': return Image.fromarray(rng.integers(0, 255, (h, w, 3), dtype=np.uint8))
    small = rng.uniform(0, 255, (6, 8, 3)).astype(np.uint8)               # coarse colours, upsampled smoothly
    field = np.asarray(Image.fromarray(small).resize((w, h), Image.BICUBIC), dtype=np.float32)
    return Image.fromarray(np.clip(field + rng.normal(0, 27, field.shape), 0, 255).astype(np.uint8))


def fake_imagenet(root: Path, n_classes: int, per_class: int, seed: int = 0, size=(500, 375), content: str = 'noise') -> Path:
    """ImageNet's layout (train/<wnid>/*.JPEG, val/<wnid>/*.JPEG) with random JPEGs (`fake_image`'s `content`) of `size`
    (w, h; ImageNet's typical 500x375)."""
    rng = np.random.default_rng(seed)
    for part, k in (('train', per_class), ('val', 2)):
        for c in range(n_classes):
            d = root/'imagenet'/part/f'n{c:08d}'; d.mkdir(parents=True, exist_ok=True)
            for i in range(k): fake_image(rng, *size, content).save(d/f'n{c:08d}_{i}.JPEG', quality=90)
    return root


class Synthetic:
    """`n` random uint8 images of `ds`'s classes and size, held in memory and fed through `iter_batches`' tensor path
    (copied to the device per batch, scaled there, no decoding or augmentation): the step's cost without the data path."""
    def __init__(self, ds, n, pool: int = 512):
        g = torch.Generator().manual_seed(0)
        h, w = ds.image_size if isinstance(ds.image_size, tuple) else (ds.image_size, ds.image_size)
        x = torch.randint(0, 256, (pool, 3, h, w), dtype=torch.uint8, generator=g)
        self.x, self.y = x[torch.arange(n) % pool], torch.randint(0, len(ds.classes), (n,), generator=g)
        self.classes, self.image_size = ds.classes, ds.image_size
    def __len__(self): return len(self.y)
    def tensors(self): return self.x, self.y
    def augment(self, x, generator=None): return x.float()/255
    def normalize(self, x): return x.float()/255


class Repeated(torch.utils.data.Dataset):
    """`ds` read cyclically, in a fixed shuffled order so that any `n` items mix the classes, up to `n` items (the images
    stay in the page cache; decoding and augmentation run each time)."""
    def __init__(self, ds, n):
        self.ds, self.n, self.classes, self.image_size = ds, n, ds.classes, ds.image_size
        self.order = torch.randperm(len(ds), generator=torch.Generator().manual_seed(0)).tolist()
    def __len__(self): return self.n
    def __getitem__(self, i): return self.ds[self.order[i % len(self.ds)]]


def repeated_files(ds, n):
    """`Repeated(ds, n)` as a `ManifestDataset` (the same files in the same order, as a list of paths), which the device
    data path reads (it reads a file dataset's paths, not its items)."""
    order = Repeated(ds, n).order
    out = copy.copy(ds)
    out.paths = [ds.paths[order[i % len(ds)]] for i in range(n)]; out.labels = ds.labels[[order[i % len(ds)] for i in range(n)]]
    return out


def decode_on_side_stream():
    """Make the device data path decode each batch on a CUDA stream of its own (a no-op on the CPU), a candidate to
    replace the library's drain. `compatrepro.loaders.decode_jpegs` waits for the training stream to drain before each
    decode (`wait_for_caller_stream`: nvJPEG ignores streams and overwrote blocks that queued kernels had yet to read,
    2026-11-28), so the GPU idles while the next batch decodes. Here the decode runs with a side stream current: its
    outputs come from that stream's pool, which blocks freed on the training stream never enter, and the drain it
    does is of the side stream (the decodes alone); each output is marked as used by the training stream
    (`record_stream`), so its block returns to the side pool only after the step that reads it has run, and the
    training stream waits for the side stream by an event, not on the host. Whether that keeps the GPU busy, and
    trains as the drained path does, is what the bench measures; it patches the benchmark's process only."""
    from compatrepro import loaders as LD
    if getattr(LD.decode_jpegs, 'side_stream', False): return
    decode, streams = LD.decode_jpegs, {}
    def on_side_stream(data, device):
        device = torch.device(device)
        if device.type != 'cuda': return decode(data, device)
        main = torch.cuda.current_stream(device)
        side = streams.setdefault(str(device), torch.cuda.Stream(device))
        with torch.cuda.stream(side): images = decode(data, device)
        main.wait_stream(side)
        for x in images: x.record_stream(main)
        return images
    on_side_stream.side_stream, on_side_stream.library = True, decode
    LD.decode_jpegs = on_side_stream   # iter_device_batches looks the name up in its module at each batch


LOADERS = ('cpu', 'gpu', 'gpu-side-stream')


def use_loader(name):
    """Choose the JPEG data path of this process: 'cpu', 'gpu' (`$COMPATREPRO_LOADER`, read by `iter_batches`) or
    'gpu-side-stream' ('gpu' with `decode_on_side_stream`); a later call undoes an earlier 'gpu-side-stream'."""
    if name not in LOADERS: raise ValueError(f'loader={name!r}: choose one of {LOADERS}')
    from compatrepro import loaders as LD
    LD.decode_jpegs = getattr(LD.decode_jpegs, 'library', LD.decode_jpegs)
    os.environ['COMPATREPRO_LOADER'] = 'cpu' if name == 'cpu' else 'gpu'
    if name == 'gpu-side-stream': decode_on_side_stream()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--arch', default='resnet50'); ap.add_argument('--batch', type=int, default=256, help='global batch')
    ap.add_argument('--steps', type=int, default=200, help='steps per epoch (two epochs run)')
    ap.add_argument('--workers', type=int, default=None, help='DataLoader workers per process (default: compatrepro.core.default_workers(), the cores less one)')
    ap.add_argument('--compat', choices=('none', 'bct', 'ract'), default='none',
                    help="train against an old model (a 1-epoch ResNet of --arch on the first half of the classes)")
    ap.add_argument('--classes', type=int, default=10); ap.add_argument('--per-class', type=int, default=32)
    ap.add_argument('--fake-size', default='500x375', help="the fake JPEGs' WxH (341x256: a copy data_prep/resize_copy.py made)")
    ap.add_argument('--synthetic', action='store_true', help='random tensors in memory instead of decoded, augmented JPEGs')
    ap.add_argument('--loader', choices=LOADERS, default='cpu',
                    help="the JPEG data path: 'cpu', decoding and augmentation in the DataLoader workers (the reference); "
                         "'gpu', the workers read bytes and the training device decodes and augments; 'gpu-side-stream', "
                         "the same with each batch decoded on a CUDA stream of its own")
    ap.add_argument('--device', default='auto'); ap.add_argument('--out', default=None)
    a = ap.parse_args()
    if a.synthetic and a.compat != 'none':
        ap.error('--synthetic times the plain step (the compatibility terms read images from the tree): drop --compat or --synthetic')
    if a.synthetic and a.loader != 'cpu': ap.error('--synthetic reads no JPEG: drop --loader or --synthetic')
    use_loader(a.loader)
    rank, world = int(os.environ.get('RANK', '0')), int(os.environ.get('WORLD_SIZE', '1'))
    # one folder for all processes of a torchrun launch (they share MASTER_PORT), removed at the end
    tmp = Path(tempfile.gettempdir())/f"compatrepro_bench_{os.environ.get('MASTER_PORT', os.getpid())}"
    done = tmp/'tree_written'
    try:
        if rank == 0: fake_imagenet(tmp/'data', a.classes, a.per_class, size=tuple(int(v) for v in a.fake_size.lower().split('x'))); done.touch()
        while not done.exists(): time.sleep(0.5)   # the other ranks wait for rank 0's tree
        root = str(tmp/'data')
        ctx = RunContext(cache=tmp/'cache', device=a.device, data_root=root, workers=a.workers, progress=rank == 0)
        small = dict(arch=a.arch, batch_size=a.batch, epochs=2, warmup_epochs=0, lr=1e-3)   # a low rate: random data at the recipe's rate without its warm-up diverges, and speed does not depend on it
        spec = SP.backbone_spec('imagenet-1k', 'paper', seed=0, **small)
        if a.compat != 'none':   # the old model trains first, on the small tree as it is (not timed)
            old = SP.backbone_spec('imagenet-500', 'paper', seed=0, **dict(small, epochs=1, batch_size=min(a.batch, 8*world)))
            spec = replace(spec, compat=SP.CompatSpec('bct-syn', old) if a.compat == 'bct' else SP.ract_compat(old, 'fastfill'))
        pool = get_split('imagenet-1k', 'train', 'paper', root)
        if a.compat == 'bct' and a.steps*a.batch < len(pool):
            raise SystemExit(f"--compat bct synthesizes classifier rows from every class's images, so the {a.steps} steps of "
                             f"{a.batch} must cover the tree's {len(pool)} images: raise --steps or lower --per-class")
        ds = (Synthetic(pool, a.steps*a.batch) if a.synthetic else Repeated(pool, a.steps*a.batch) if a.loader == 'cpu'
              else repeated_files(pool, a.steps*a.batch))
        old = get_backbone(spec.compat.old, ctx=ctx) if spec.compat is not None else None   # trained here, not timed
        art = T.train_backbone(spec, ds, old, device=a.device, num_workers=a.workers, show_progress=rank == 0)
    finally:
        if torch.distributed.is_initialized(): torch.distributed.barrier()
        if rank == 0: shutil.rmtree(tmp, ignore_errors=True)
    if rank != 0: return
    dev = get_device(a.device)
    rates = [a.steps*a.batch/h['seconds'] for h in art['history']]
    res = dict(arch=a.arch, global_batch=a.batch, steps_per_epoch=a.steps, compat=a.compat,
               data='synthetic tensors' if a.synthetic else 'JPEG decode + augmentation' + (' in the workers' if a.loader == 'cpu' else ' on the device')
                    + (', decoded on a side stream' if a.loader == 'gpu-side-stream' else ''),
               loader='none' if a.synthetic else a.loader,
               processes=world, workers=a.workers if a.workers is not None else default_workers(),
               device=torch.cuda.get_device_name(dev) if dev.type == 'cuda' else f'cpu ({os.cpu_count()} cores)',
               amp=('bf16' if torch.cuda.is_bf16_supported() else 'fp16') if dev.type == 'cuda' else 'off (fp32)',
               images_per_s_epoch1=round(rates[0], 1), images_per_s_epoch2=round(rates[1], 1),
               final_loss=round(art['history'][-1]['loss'], 4), torch=torch.__version__)
    for k, v in res.items(): print(f'{k}: {v}')
    if a.out: Path(a.out).write_text(json.dumps(res, indent=1))


if __name__ == '__main__':
    main()
