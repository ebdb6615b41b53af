"""data_prep/resize_copy.py: a copy of a dataset with short sides cut, which `get_split` reads as it reads the original."""
import importlib.util
from pathlib import Path

import numpy as np
from PIL import Image

from compatrepro.data import get_split

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location('resize_copy', ROOT/'data_prep'/'resize_copy.py')
rc = importlib.util.module_from_spec(spec); spec.loader.exec_module(rc)


def _tree(root: Path) -> Path:
    "ImageNet's layout: 2 classes of 3 training and 2 validation images of several sizes, one PNG, one small image."
    rng = np.random.default_rng(0)
    sizes = [(120, 90), (64, 200), (40, 30)]     # (w, h): landscape, portrait, already small
    for part, k in (('train', 3), ('val', 2)):
        for c in range(2):
            d = root/'imagenet'/part/f'n{c:08d}'; d.mkdir(parents=True)
            for i in range(k):
                w, h = sizes[i % 3]
                Image.fromarray(rng.integers(0, 255, (h, w, 3), dtype=np.uint8)).save(d/f'n{c:08d}_{i}.JPEG', quality=90)
    Image.fromarray(rng.integers(0, 255, (80, 60, 3), dtype=np.uint8)).save(root/'imagenet'/'train'/'n00000000'/'extra.png')
    (root/'imagenet'/'LOC_synset_mapping.txt').write_text('n00000000 zero\nn00000001 one\n')
    return root


def test_resized_size():
    assert rc.resized_size(500, 375, 256) == (341, 256) and rc.resized_size(375, 500, 256) == (256, 341)
    assert rc.resized_size(200, 100, 256) == (200, 100)      # already small: unchanged


def test_a_resized_copy_reads_as_the_original(tmp_path):
    src = _tree(tmp_path/'orig')/'imagenet'
    dst = tmp_path/'small'/'imagenet'
    assert rc.main(['imagenet', str(src), str(dst), '--short-side', '32', '--jobs', '1']) == 0
    for p in src.rglob('*'):
        if not p.is_file(): continue
        q = dst/p.relative_to(src); assert q.exists(), q
        if p.suffix.lower() in ('.jpeg', '.png'):
            with Image.open(p) as a, Image.open(q) as b:
                assert b.size == rc.resized_size(*a.size, 32) and b.format == a.format, (p, a.size, b.size)
        else: assert q.read_bytes() == p.read_bytes()
    a = get_split('imagenet-1k', 'train', 'paper', data_root=tmp_path/'orig')
    b = get_split('imagenet-1k', 'train', 'paper', data_root=tmp_path/'small')
    assert list(a.paths) == list(b.paths) and list(a.labels) == list(b.labels)
    mtimes = {q: q.stat().st_mtime_ns for q in dst.rglob('*') if q.is_file()}
    assert rc.main(['imagenet', str(src), str(dst), '--short-side', '32', '--jobs', '1']) == 0   # resumes: nothing rewritten
    assert {q: q.stat().st_mtime_ns for q in dst.rglob('*') if q.is_file()} == mtimes


def test_boxed_datasets_and_bad_arguments_are_refused(tmp_path, capsys):
    src = _tree(tmp_path/'orig')/'imagenet'
    assert rc.main(['roxford5k', str(src), str(tmp_path/'x')]) == 2 and 'query boxes' in capsys.readouterr().err
    assert rc.main(['imagenet', str(src), str(src/'inside')]) == 2 and 'outside' in capsys.readouterr().err
    assert rc.main(['imagenet', str(tmp_path/'none'), str(tmp_path/'x')]) == 2 and 'not a folder' in capsys.readouterr().err


def test_bench_data_path_measures_both_trees():
    """benchmarks/bench_data_path.py (what the copy buys the reference data path per worker) runs end to end on a few
    images: it makes the tree, the copy through this script, and prints a rate for each and their ratio."""
    import subprocess, sys
    r = subprocess.run([sys.executable, str(ROOT/'benchmarks'/'bench_data_path.py'), '--images', '20', '--batch', '10',
                        '--workers', '0', '--size', '400x300'], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    assert '400x300' in r.stdout and 'resized copy 341x256' in r.stdout, r.stdout     # short side 300 cut to 256
    row = [l.split() for l in r.stdout.splitlines() if l.split() and l.split()[0] == '0']
    assert len(row) == 1 and all(float(v) > 0 for v in row[0][1:]), r.stdout
