"""Trained artifacts are served from the cache under keys that name the versions of the code that made them
(`compatrepro.pipeline`). A change to the training code (or to the stand-in's data) that alters what is made, while
no version is bumped, would keep serving the old models under the same keys and the committed results would not go
stale. This test makes a small artifact of every training path (a backbone per compatibility method, a transformation
per objective, features) and the smoke split of every dataset, and compares each with its fingerprint in
`artifact_fingerprints.json`:

- same key, other numbers: FAIL. Bump the version the change belongs to (`CODE_VERSION`, a `COMPAT_VERSIONS` or
  `OBJECTIVE_VERSIONS` entry, `SPLITS_VERSION`, `GLYPH_VERSION`, ...): the models are then retrained under new keys,
  and the committed runs that used them go stale; then re-record, commit, and `compatrepro pending --declare "why"`
  lists those runs in the re-run ledger, so the change lands before their re-runs (`docs/ci.md`).
- another key (a version was bumped, or a spec changed): FAIL until re-recorded, so the file always describes today's
  code: `python tests/test_artifact_fingerprints.py --write`.

Numbers are compared to 1e-3: a model after a few steps differs between CPUs only in rounding, far below that."""
import hashlib, json, sys
from pathlib import Path

import numpy as np
import pytest
import torch

from compatrepro.runtime import RunContext, using_context

from compatrepro.core import spec_key
from compatrepro.data import describe_split, get_split, list_splits, split_versions
from compatrepro.models import load_model, load_transformation
from compatrepro import pipeline as P
from compatrepro import specs as SP, train as T

sys.path.insert(0, str(Path(__file__).parent))
from _doubles import HalfClassesSplit, small_backbone_spec   # noqa: E402

FILE = Path(__file__).with_name('artifact_fingerprints.json')
ATOL = 1e-3


OLD, NEW = small_backbone_spec('imagenet-500'), small_backbone_spec('imagenet-1k', seed=1)
# FastFill's eq. (5) scales L_l2's gradient by 1/sigma^2, which grows as L_l2 falls: at 1e-2, two epochs of l2+uncert
# carry a rounding difference (one thread against two) to 2e-2, past ATOL, and CPUs differ in rounding; at 3e-3 to 6e-5
LR = {'l2+uncert': 3e-3}
PROBE = HalfClassesSplit('imagenet-1k', 'eval')


def _round(x) -> list:
    return [round(float(v), 5) for v in torch.as_tensor(x).flatten()[:64]]


def backbone_fingerprint(spec) -> dict:
    model = load_model(P.cached_backbone(spec), torch.device('cpu'))
    with torch.no_grad(): f = model(PROBE.normalize(PROBE.images))
    f = f[0] if isinstance(f, tuple) else f
    return dict(key=spec_key('backbone', SP.backbone_key(spec)), values=_round(f))


def transformation_fingerprint(spec) -> dict:
    net = load_transformation(P.cached_transformation(spec))
    x = P.get_features(spec.old if spec.kind == 'fct' else spec.new, 'imagenet-1k', 'eval')['features']
    out = T.apply_transformation(net, x)
    out = torch.cat([o.reshape(len(x), -1) for o in out], 1) if isinstance(out, tuple) else out
    return dict(key=spec_key('transformation', SP.transformation_key(spec)), values=_round(out))


def split_fingerprint(name) -> dict:
    "The smoke split's images and labels, per part: labels exactly, images to 1e-3 (their means per image)."
    out = {'key': spec_key('split', dict(name=name, versions=split_versions(name), scale='smoke')), 'values': []}
    for part in describe_split(name)['parts']:
        x, y = get_split(name, part, 'smoke').tensors()
        out[f'{part} labels'] = hashlib.sha256(np.asarray(y).tobytes()).hexdigest()[:16]
        out['values'] += _round(x.float().mean((1, 2, 3))[:32])
    return out


def fingerprints(cache_dir) -> dict:
    "Every fingerprint, made now (a fresh cache: nothing is served from an older one)."
    out = {}
    with using_context(RunContext(cache=cache_dir, device='cpu', progress=False)):
        real = P.get_split
        P.get_split = lambda name, part, scale='tiny', data_root=None, seed=0, **kw: HalfClassesSplit(name, part)
        try:
            out['backbone old'] = backbone_fingerprint(OLD)
            for m in SP.COMPAT_METHODS:
                out[f'backbone {m}'] = backbone_fingerprint(small_backbone_spec('imagenet-1k', compat=SP.CompatSpec(m, OLD, weight=1.0, tau=0.5)))
            for o in SP.FASTFILL_OBJECTIVES + SP.RM_OBJECTIVES:
                spec = SP.transformation_spec(OLD, NEW, o, epochs=2, batch_size=8, inner_dim=16, hidden=16,
                                             lr=LR.get(o, 1e-2),
                                             **(dict(rho_blocks=2) if o == 'mcl' else {}))
                out[f'transformation {o}'] = transformation_fingerprint(spec)
            f = P.get_features(NEW, 'imagenet-1k', 'eval')
            out['features'] = dict(key=spec_key('features', P.features_key(NEW, 'imagenet-1k', 'eval')), values=_round(f['features']))
        finally: P.get_split = real
    for name in list_splits(): out[f'split {name}'] = split_fingerprint(name)
    return out


def compare(recorded: dict, now: dict) -> list[str]:
    "What differs, each with what to do."
    bad = []
    for name in sorted(set(recorded) | set(now)):
        r, n = recorded.get(name), now.get(name)
        if r is None or n is None:
            bad.append(f'{name}: {"new" if r is None else "gone"}: re-record (python tests/test_artifact_fingerprints.py --write)')
        elif r['key'] != n['key']:
            bad.append(f'{name}: its key changed ({r["key"]} -> {n["key"]}): re-record (python tests/test_artifact_fingerprints.py --write)')
        else:
            same_labels = all(r.get(k) == n.get(k) for k in r if k.endswith('labels'))
            if not same_labels or len(r['values']) != len(n['values']) or not np.allclose(r['values'], n['values'], atol=ATOL, rtol=0):
                bad.append(f'{name}: made differently under the same key {r["key"]}: bump the version of what changed '
                           '(this retrains it and makes the runs that used it stale), then re-record, and list those runs in '
                           'the re-run ledger: compatrepro pending --declare "why"')
    return bad


def test_compare_names_what_to_do():
    rec = {'a': dict(key='k1', values=[1.0, 2.0]), 'b': dict(key='k2', values=[0.0])}
    assert compare(rec, rec) == []
    assert compare(rec, rec | {'a': dict(key='k1', values=[1.0, 2.0004])}) == []                      # rounding
    assert 'bump the version' in compare(rec, rec | {'a': dict(key='k1', values=[1.0, 2.1])})[0]      # same key, other model
    assert 're-record' in compare(rec, rec | {'a': dict(key='k9', values=[1.0, 2.1])})[0]             # a version was bumped
    assert 'gone' in compare(rec, {'a': rec['a']})[0]


@pytest.mark.usefixtures('one_thread')
def test_artifacts_match_their_fingerprints(tmp_path):
    assert FILE.exists(), f'{FILE.name} is missing: python tests/test_artifact_fingerprints.py --write'
    bad = compare(json.loads(FILE.read_text()), fingerprints(tmp_path))
    assert not bad, f'{len(bad)} artifact(s) differ from their fingerprints:\n' + '\n'.join(bad)


if __name__ == '__main__':
    import tempfile
    if sys.argv[1:] != ['--write']: sys.exit('usage: python tests/test_artifact_fingerprints.py --write')
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as d: fp = fingerprints(d)
    FILE.write_text(json.dumps(fp, indent=1, sort_keys=True) + '\n')
    print(f'wrote {len(fp)} fingerprints to {FILE}. Commit the change, then list the runs it made stale in the re-run '
          'ledger (results/tiny/pending.csv): compatrepro pending --declare "why, in one line"')
