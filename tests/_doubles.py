"""Test doubles shared by the pytest tests (imported as `from _doubles import ...`: pytest puts tests/ on the path)."""
import numpy as np, torch

from compatrepro.specs import BackboneSpec


class TinyDataset:
    "A minimal in-memory dataset with the stand-in's contract (for checks): N images, labels = i % C."
    def __init__(self, n: int = 10, c: int = 3, size: int = 8, seed: int = 0):
        g = torch.Generator().manual_seed(seed)
        self.images = torch.randint(0, 256, (n, 3, size, size), generator=g, dtype=torch.uint8)
        self.labels = np.arange(n) % c; self.classes = np.arange(c); self.image_size = (size, size)
        self.name, self.part, self.scale, self.description = 'tinyds', 'train', 'tiny', 'synthetic check set'
        self.mean, self.std = torch.zeros(3, 1, 1), torch.ones(3, 1, 1)   # normalize's: pixels / 255
    def __len__(self): return len(self.labels)
    def tensors(self): return self.images, torch.from_numpy(self.labels)
    def normalize(self, x): return x.float()/255
    def augment(self, x, generator=None):
        return (x.float()/255 + 0.01*torch.randn(x.shape, generator=generator, device=generator.device if generator is not None else 'cpu').to(x.device))
    def __getitem__(self, i): return self.normalize(self.images[i:i+1])[0], int(self.labels[i])


class HalfClassesSplit(TinyDataset):
    "A synthetic split: 'imagenet-500' holds classes 0-1 of 4 (the old model knows half the classes), any other all 4."
    def __init__(self, name, part):
        super().__init__(n=32, c=4, size=16, seed=0 if part == 'train' else 1)
        if name == 'imagenet-500':
            keep = self.labels < 2
            self.images, self.labels = self.images[torch.from_numpy(keep)], self.labels[keep]
            self.classes = np.unique(self.labels)


def small_backbone_spec(split, **kw):
    "A one-epoch ResNet-18 spec with an 8-d embedding: trains in a second on `HalfClassesSplit`."
    return BackboneSpec(**dict(split=split, scale='tiny', seed=0, arch='resnet18', emb_dim=8, epochs=1, batch_size=8,
                               lr=0.4, warmup_epochs=0) | kw)


def make_runs_current(res_dir, nbs_dir, pkg_dir) -> int:
    """Stamp every run under `res_dir` (one scale of a scratch copy) as made by today's code: its notebook's code hash and
    library digests from `nbs_dir` and `pkg_dir`, today's registered versions, its inputs' digests as they are; and empty
    the re-run ledger. Tests of staleness start from such a copy, whatever the committed runs' state (they may all be
    pending a re-run). Returns how many runs were stamped."""
    import json
    from pathlib import Path
    from compatrepro.core import registered_versions
    from compatrepro.pipeline import backbone_versions   # noqa: F401  (registers every method's version)
    from compatrepro.provenance import file_digest, run_dependencies
    res_dir, nbs_dir, reg, n = Path(res_dir), Path(nbs_dir), registered_versions(), 0
    for f in sorted((res_dir/'runs').glob('*.json')):
        p = json.loads(f.read_text())
        src = nbs_dir/f"{p['notebook']}.ipynb"
        if not src.exists(): continue
        p |= run_dependencies(src, pkg_dir)
        p['versions'] = {k: reg[k] for k in p.get('versions', {}) if k in reg}
        p['inputs'] = {k: file_digest(res_dir/'records'/k) for k in p.get('inputs', {}) if (res_dir/'records'/k).exists()}
        f.write_text(json.dumps(p, indent=1) + '\n'); n += 1
    (res_dir/'pending.csv').unlink(missing_ok=True)
    return n


def scratch_repo(tmp):
    """A scratch copy under `tmp` of the package, the notebooks, the docs and the committed tiny results (records, runs,
    claims; no ledger), its runs stamped current (`make_runs_current`): the staleness and ledger tests change it."""
    import shutil
    from pathlib import Path
    root, tmp = Path(__file__).resolve().parent.parent, Path(tmp)
    tiny = root/'results'/'tiny'
    shutil.copytree(root/'compatrepro', tmp/'compatrepro', ignore=shutil.ignore_patterns('__pycache__'))
    shutil.copytree(root/'nbs', tmp/'nbs', ignore=shutil.ignore_patterns('.ipynb_checkpoints'))
    shutil.copytree(root/'docs', tmp/'docs', ignore=shutil.ignore_patterns('_build', '_site', 'jupyter_execute'))
    shutil.copy(root/'settings.ini', tmp)
    for d in ('records', 'runs', 'claims'): shutil.copytree(tiny/d, tmp/'results'/'tiny'/d)
    assert make_runs_current(tmp/'results'/'tiny', tmp/'nbs', tmp/'compatrepro')
    return tmp
