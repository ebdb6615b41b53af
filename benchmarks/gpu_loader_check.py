"""The device data path on a GPU: first `allocator_race`, whether a decode on the GPU overwrites a block that kernels
still queued on the caller's stream have yet to read, for torchvision's decoder as it is, for the library's
`decode_jpegs` (which drains the caller's stream first) and for the bench's side-stream variant; then one batch of a
fake ImageNet tree through the device path on the GPU, the same batch on the CPU, and the reference path, compared
(finite values, ranges, per-image differences), one bf16 forward/backward of a ResNet-18 on each, then a few SGD
steps of a ResNet-50 through `iter_batches` on each of the bench's paths, stopping at the first non-finite loss.
Prints everything; asserts nothing. (One H200, 2026-11-27: the one-batch part was finite, yet every training through
the device path became nan; 2026-11-28: the decoder as it was corrupted queued sums in 49 of 50 trials, drained 0 of
50, and the drain went into `decode_jpegs`.)

    python benchmarks/gpu_loader_check.py            # on a machine with a GPU
"""
import sys, tempfile
from pathlib import Path

import torch
sys.path.insert(0, str(Path(__file__).parent))
from bench_train_steps import LOADERS, fake_imagenet, use_loader  # noqa: E402
from compatrepro.data import get_split                           # noqa: E402
from compatrepro import loaders as LD                             # noqa: E402


def stats(name, x):
    x = x.float()
    print(f'{name:28s} shape={tuple(x.shape)} nan={int(x.isnan().sum())} inf={int(x.isinf().sum())} '
          f'min={x.nan_to_num().min():.3f} max={x.nan_to_num().max():.3f} mean={x.nan_to_num().mean():.4f}')


def raw_decode(data, device):
    "torchvision's decoder as it is, without the library's wait for the caller's stream."
    from torchvision.io import ImageReadMode, decode_jpeg
    return decode_jpeg(list(data), mode=ImageReadMode.RGB, device=device)


def allocator_race(data, decode, trials=50, n=32):
    """How many of `trials` times `decode(data, 'cuda')` changed tensors that kernels queued before it were still
    reading: each trial fills `n` tensors with a known value, queues a long matrix product and then one sum per tensor,
    frees the tensors (their blocks go back to the allocator while the sums are queued), decodes, and checks the sums."""
    cuda, bad = torch.device('cuda'), 0
    a = torch.randn(4096, 4096, device=cuda)
    for t in range(trials):
        ts = [torch.full((3*500*375,), 1, device=cuda, dtype=torch.uint8) for _ in range(n)]   # blocks of a decoded image's size
        torch.cuda.synchronize()
        for _ in range(8): a = (a @ a).clamp_(-1, 1)           # ~tens of ms queued ahead of the sums
        sums = [x.sum(dtype=torch.int64) for x in ts]
        del ts                                                  # freed while the sums are still queued
        decode(data, cuda)
        torch.cuda.synchronize()
        bad += any(s.item() != 3*500*375 for s in sums)
    return bad


def step(name, x, y, n_classes):
    torch.manual_seed(0)
    import torchvision
    m = torchvision.models.resnet18(num_classes=n_classes).to(x.device).to(memory_format=torch.channels_last)
    with torch.autocast(x.device.type, dtype=torch.bfloat16, enabled=x.device.type == 'cuda'):
        loss = torch.nn.functional.cross_entropy(m(x.contiguous(memory_format=torch.channels_last)), y)
    loss.backward()
    g = sum(p.grad.float().norm()**2 for p in m.parameters() if p.grad is not None)**0.5
    print(f'{name:28s} loss={loss.item():.4f} grad_norm={g.item():.4f}')


with tempfile.TemporaryDirectory() as d:
    root = fake_imagenet(Path(d), n_classes=4, per_class=40)
    ds = get_split('imagenet-1k', 'train', 'paper', data_root=root)
    print('dataset', type(ds).__name__, len(ds), 'applies:', LD.device_loader_applies(ds), 'train:', getattr(ds, 'train', None))
    order = torch.arange(16)
    cuda = torch.device('cuda')
    data, y = LD.collate_jpeg_bytes([LD.JpegFiles(ds.root, ds.paths, ds.labels)[i] for i in range(16)])
    print('labels', y.tolist(), 'classes', len(ds.classes))
    use_loader('gpu-side-stream'); side = LD.decode_jpegs; use_loader('gpu')
    for name, decode in (("torchvision's decode_jpeg as it is", raw_decode), ("the library's decode_jpegs (drained)", LD.decode_jpegs),
                         ('decoded on a side stream (the bench\'s gpu-side-stream)', side)):
        try: print(f'allocator race, {name}: corrupted sums in', allocator_race(data, decode), 'of 50 trials')
        except Exception as e: print(f'allocator race, {name}: failed: {type(e).__name__}: {e}')   # the checks after it still run
    dec_gpu, dec_cpu = LD.decode_jpegs(data, cuda), LD.decode_jpegs(data, 'cpu')
    torch.cuda.synchronize()
    for i, (a, b) in enumerate(zip(dec_gpu, dec_cpu)):
        if i < 4 or a.shape != b.shape: print(f'image {i}: gpu {tuple(a.shape)} {a.dtype} cpu {tuple(b.shape)}; '
                                             f'max |gpu - cpu| {(a.cpu().int() - b.int()).abs().max().item() if a.shape == b.shape else "shape differs"}')
    for dev in (cuda, torch.device('cpu')):
        g = torch.Generator().manual_seed(1)
        x = LD.device_train_transform(LD.decode_jpegs(data, dev), 224, g)
        stats(f'train transform on {dev.type}', x)
        x = LD.device_eval_transform(LD.decode_jpegs(data, dev), 224)
        stats(f'eval transform on {dev.type}', x)
    xb, yb = next(iter(LD.iter_device_batches(ds, 16, order, cuda, 2, 0)))
    stats('iter_device_batches cuda', xb); print('labels out', yb.tolist())
    ref = torch.stack([ds[i][0] for i in range(16)])
    stats('reference (CPU workers)', ref)
    step('reference on cuda', ref.to(cuda), y.to(cuda), len(ds.classes))
    step('device path on cuda', xb, yb, len(ds.classes))

    # --- a few training steps through iter_batches on each path: where does the loss stop being finite?
    def train_steps(loader):
        use_loader(loader)
        torch.manual_seed(0)
        import torchvision
        m = torchvision.models.resnet50(num_classes=len(ds.classes)).to(cuda).to(memory_format=torch.channels_last)
        opt = torch.optim.SGD(m.parameters(), lr=1e-3, momentum=0.9)
        for i, (xb, yb) in enumerate(LD.iter_batches(ds, 32, 0, 0, cuda, num_workers=4)):
            with torch.autocast('cuda', dtype=torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(m(xb.contiguous(memory_format=torch.channels_last)), yb)
            opt.zero_grad(set_to_none=True); loss.backward(); opt.step()
            bad = not torch.isfinite(loss).item()
            print(f'{loader} step {i}: loss {loss.item():.4f} x finite {bool(torch.isfinite(xb).all())} '
                  f'x range [{xb.min().item():.2f}, {xb.max().item():.2f}] dtype {xb.dtype} labels {yb.min().item()}-{yb.max().item()} '
                  f'contiguous {xb.is_contiguous()}')
            if bad: break

    for loader in LOADERS:
        try: train_steps(loader)
        except Exception as e: print(f'{loader}: training steps failed: {type(e).__name__}: {e}')
