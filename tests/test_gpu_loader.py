"""The device data path for JPEG file datasets (issue 48) on the CPU: `iter_batches` takes it when asked, gives the
reference path's labels in its order and (from the same generator state) its crops within one uint8 level, and
`benchmarks/bench_train_steps.py --loader gpu` runs end to end. The notebook 06b_loaders checks the same on a smaller set."""
import json, os, subprocess, sys
import numpy as np, pandas as pd, pytest, torch
from PIL import Image

from compatrepro import loaders as LD
from compatrepro.manifests import ManifestDataset

ROOT = __import__('pathlib').Path(__file__).resolve().parent.parent


def _tree(tmp_path, n=12):
    rng, rows = np.random.default_rng(1), []
    for i in range(n):
        h, w = int(rng.integers(40, 120)), int(rng.integers(40, 120))
        yy, xx = np.mgrid[0:h, 0:w]
        a = np.stack([xx*255/w, yy*255/h, (xx + yy)*127/(h + w) + 60], -1) + rng.normal(0, 4, (h, w, 3))
        im = Image.fromarray(np.clip(a, 0, 255).astype(np.uint8))
        im = im.convert('L') if i % 5 == 2 else im.convert('CMYK') if i % 5 == 4 else im
        im.save(tmp_path/f'{i}.JPEG', quality=92); rows.append((f'{i}.JPEG', i % 4))
    df = pd.DataFrame(rows, columns=['path', 'label'])
    return lambda train: ManifestDataset(tmp_path, df, list('abcd'), name='t', part='train' if train else 'eval',
                                         description='t', family='imagenet', train=train, image_size=40)


def _batches(ds, loader, monkeypatch, epoch=0):
    monkeypatch.setenv('COMPATREPRO_LOADER', loader)
    return list(LD.iter_batches(ds, 4, epoch, 3, 'cpu', num_workers=0))


def test_device_path_matches_reference(tmp_path, monkeypatch, one_thread):
    mk = _tree(tmp_path)
    calls = []
    real = LD.iter_device_batches
    monkeypatch.setattr(LD, 'iter_device_batches', lambda *a, **k: (calls.append(1), (yield from real(*a, **k)))[1])
    for train in (False, True):
        ds = mk(train)
        ref, dev = _batches(ds, 'cpu', monkeypatch), _batches(ds, 'gpu', monkeypatch)
        assert len(ref) == len(dev) == 3
        for (xr, yr), (xd, yd) in zip(ref, dev):
            assert torch.equal(yr, yd) and yd.dtype == torch.int64          # (a) labels and order
            assert xr.shape == xd.shape and xd.dtype == xr.dtype == torch.float32
            if not train:                                                      # (b) eval: no randomness
                err = (xr - xd).abs()
                assert err.mean() < 0.01 and err.max() < 0.04, (err.mean(), err.max())
    assert len(calls) == 2                                                     # the device path ran, only when asked
    ds = mk(True)                                                              # (b) train: the same draws
    files = LD.JpegFiles(ds.root, ds.paths, ds.labels)
    for i in range(len(ds)):
        torch.manual_seed(i); ref = ds.transform(ds.image(i))
        torch.manual_seed(i); dev = LD.device_train_transform(LD.decode_jpegs([files[i][0]], 'cpu'), 40)[0]
        err = (ref - dev).abs()
        assert err.mean() < 0.01 and err.max() < 0.04, (i, err.mean(), err.max())


def test_loader_choice(monkeypatch):
    monkeypatch.delenv('COMPATREPRO_LOADER', raising=False)
    assert LD.loader_choice('cpu') == 'cpu'                    # auto: the CPU keeps the reference
    monkeypatch.setenv('COMPATREPRO_LOADER', 'gpu'); assert LD.loader_choice('cpu') == 'gpu'
    monkeypatch.setenv('COMPATREPRO_LOADER', 'nvjpeg')
    with pytest.raises(ValueError, match='choose one of'): LD.loader_choice('cpu')
    monkeypatch.setenv('COMPATREPRO_LOADER', 'auto'); assert LD.loader_choice('cuda') == 'cpu'   # the faster on an H200 with 16 cores


def test_decode_waits_for_the_callers_stream_first(monkeypatch):
    """On CUDA, `decode_jpegs` drains the caller's stream before nvJPEG writes (pytorch/vision#9606), also before a
    file-by-file retry; on the CPU it touches no CUDA stream. CUDA is faked: only the order of the calls is checked."""
    import torchvision.io
    calls = []
    class Stream:
        def synchronize(self): calls.append('wait')
    def fake_decode(data, mode=None, device=None):
        calls.append('decode')
        if isinstance(data, list) and len(data) > 1: raise RuntimeError('batch refused')   # forces the retry
        return torch.zeros(3, 2, 2, dtype=torch.uint8) if not isinstance(data, list) else [torch.zeros(3, 2, 2, dtype=torch.uint8)]
    monkeypatch.setattr(torch.cuda, 'current_stream', lambda device=None: calls.append(('stream', str(device))) or Stream())
    monkeypatch.setattr(torchvision.io, 'decode_jpeg', fake_decode)
    out = LD.decode_jpegs([torch.zeros(4, dtype=torch.uint8)]*2, 'cuda:0')
    assert len(out) == 2 and calls == [('stream', 'cuda:0'), 'wait', 'decode', 'decode', 'decode'], calls
    calls.clear(); LD.decode_jpegs([torch.zeros(4, dtype=torch.uint8)], 'cpu')
    assert calls == ['decode'], calls


@pytest.mark.parametrize('loader', ['gpu', 'gpu-side-stream'])
def test_bench_loader_gpu_smoke(tmp_path, loader):
    out = tmp_path/'b.json'
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get('PYTHONPATH', ''), COMPATREPRO_PROGRESS='0',
               OMP_NUM_THREADS='1')
    r = subprocess.run([sys.executable, str(ROOT/'benchmarks/bench_train_steps.py'), '--arch', 'resnet18', '--batch', '8',
                        '--steps', '2', '--workers', '0', '--loader', loader, '--device', 'cpu', '--classes', '4',
                        '--per-class', '4', '--out', str(out)], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads(out.read_text())
    assert res['loader'] == loader and res['images_per_s_epoch2'] > 0
    assert res['data'].endswith('decoded on a side stream') == (loader == 'gpu-side-stream')


def test_use_loader_switches_and_undoes_the_side_stream(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT/'benchmarks'))
    monkeypatch.setattr(LD, 'decode_jpegs', LD.decode_jpegs)   # restored after the test
    monkeypatch.setenv('COMPATREPRO_LOADER', 'auto')   # recorded, so the test's own setting is undone after it
    from bench_train_steps import use_loader
    library = LD.decode_jpegs
    use_loader('gpu-side-stream')
    assert os.environ['COMPATREPRO_LOADER'] == 'gpu' and LD.decode_jpegs.side_stream and LD.decode_jpegs.library is library
    use_loader('gpu-side-stream'); assert LD.decode_jpegs.library is library   # not wrapped twice
    use_loader('cpu')
    assert os.environ['COMPATREPRO_LOADER'] == 'cpu' and LD.decode_jpegs is library
    with pytest.raises(ValueError, match='choose one of'): use_loader('nvjpeg')


def test_gpu_session_checks_run_here():
    """The one-line Python checks of benchmarks/gpu_session.sh run on this machine (on the CPU, where CUDA is absent):
    the GPU session is rare and prepared in advance, and a name that moved (e.g. `device_decode_available` from
    `compatrepro.train` to `compatrepro.loaders`) would otherwise be found there, on its minutes."""
    import re
    script = (ROOT/'benchmarks'/'gpu_session.sh').read_text()
    checks = re.findall(r"python3 -c '([^']*)'", script)
    assert len(checks) >= 3, f'expected the session\'s import checks in gpu_session.sh, found {len(checks)}'
    for code in checks:
        r = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=120, cwd=ROOT)
        assert r.returncode == 0, f'gpu_session.sh check fails here:\n{code}\n{r.stderr[-2000:]}'
