"""Is the l2 baseline more compatible than BCT on unseen subjects because of how the package reads it?

`30_bct_ijbc` finds the l2 baseline (`new-l2 (MSE)`) closer to (old, old) than new-β on IJB-C's unseen subjects, the
reverse of BCT's Table 1. The loss conformance found the package's l2 term to differ from openBCT's and
OpenCompatible's in two ways (`docs/conformance.md`): both codes take the MSE of L2-normalised features, where the
package took eq. 3 on the features as the models give them (the face stand-in's are not of unit length: its CosFace
head normalises inside the head), and openBCT applies it to every sample of the batch, where the package applied it to
the samples of the old model's classes. This probe trains `new-l2 (MSE)` of 30's specs under each of the four
readings, one change at a time:

- 'raw, old classes': the package's reading before l2's version 2 (the committed CSV: 30's own model, from the cache);
- 'unit, old classes': the features L2-normalised before the MSE;
- 'raw, every sample': the term on every sample of the batch;
- 'unit, every sample': both, openBCT's `--l2 --use-feat` (and OpenCompatible's `l2`): the package's reading since
  l2's version 2, the fix this probe found.

and measures, as `bct_face_probe.py` does, (old, old), (new*, new*), (new-β, old) and each (l2 reading, old) at 30's
points (TAR@FAR=1e-4, TPIR@FPIR=1e-2, rank-1 of IJB-C's 1:N search), eq. 2 (model, old) minus (old, old), and the
rank-1 of leave-one-out retrieval on the old model's identities (seen) and on IJB-C's (unseen).

    python benchmarks/bct_l2_probe.py --seeds 0 1 2 --out benchmarks/bct_l2_probe.csv

The readings other than the package's (today's) are a subprocess's only (`l2_reading_term` in place of
`compatrepro.train.CompatTerm`), and a
reading's model has the same spec as the package's: each reading trains in a cache of its own (`--cache-root`, one
folder per reading), into which 30's old and new models are copied from $COMPATREPRO_CACHE when it has them.
`--summary FILE` prints the table docs/suspects.md shows."""

import os, shutil, sys
from pathlib import Path

import pandas as pd

from bct_face_probe import POINTS, rank1
from probe_args import apply_probe_arguments, probe_arguments, variant_cache

L2 = 'new-l2 (MSE)'
READINGS = {'raw, old classes': (False, False), 'unit, old classes': (True, False),
            'raw, every sample': (False, True), 'unit, every sample': (True, True)}
PACKAGE = 'unit, every sample'      # the package's reading since l2's version 2 (`07_train`)
MEASURES_ALL = 'raw, old classes'   # the reading whose run also measures old, new* and new-β (the same models under
                                    # every reading)


def l2_reading_term(unit: bool, every_sample: bool):
    """`compatrepro.train.CompatTerm` with its l2 term read as (`unit` features, `every_sample` of the batch); the
    package's reading is (True, True) since l2's version 2, (False, False) before. `tests/test_loss_conformance.py`
    checks (True, True) against openBCT's."""
    import torch.nn.functional as F
    from compatrepro import losses as L, train

    class L2Reading(train.CompatTerm):
        def __call__(self, x, labels, phi_new, new_head=None):
            if self.method != 'l2': return super().__call__(x, labels, phi_new, new_head)
            phi_new, phi_old = phi_new.float(), self.old_features(x)
            if unit: phi_new, phi_old = F.normalize(phi_new, dim=1), F.normalize(phi_old, dim=1)
            if every_sample: return L.l2_regression_loss(phi_new, phi_old)
            keep = self.rows(labels) >= 0
            return L.l2_regression_loss(phi_new[keep], phi_old[keep]) if bool(keep.any()) else phi_new.sum()*0

    return L2Reading


def seed_models(seed: int, scale: str):
    "30's specs of `seed` (old, new, new-β, new-l2 (MSE)) and the data of its face tests."
    from compatrepro.runtime import ExperimentParams
    from compatrepro.updates import update_specs
    from compatrepro.bct import face_data

    P = ExperimentParams(seed=seed, scale=scale, device='cpu')
    return update_specs(P, 'imdbface-50', 'imdbface', ['new-β', L2]), face_data(P)


def copy_models(specs: dict, src: Path, dst: Path) -> None:
    "Copy the cached artifacts of `specs` (old, new: the reading does not change them) from `src` into `dst`."
    from compatrepro.core import spec_key
    from compatrepro.specs import backbone_key

    for s in specs.values():
        for ext in ('.pt', '.json'):
            f = src/'backbone'/f"{spec_key('backbone', backbone_key(s))}{ext}"
            if f.exists() and not (dst/'backbone'/f.name).exists():
                (dst/'backbone').mkdir(parents=True, exist_ok=True); shutil.copy2(f, dst/'backbone'/f.name)


def measure(seed: int, reading: str, specs: dict, data: dict, names) -> list:
    "Rows of the pairs `names` ((model, old) pairs and the two self-pairs) under this process's reading."
    from compatrepro.runtime import RunContext, set_context
    from compatrepro.pipeline import get_features
    from compatrepro.bct import face_features, face_test

    set_context(RunContext.from_env(device='cpu', progress=False))
    F = {k: face_features(specs[k]) for k in names}
    seen = {k: get_features(specs[k], 'imdbface-50', 'train') for k in names}
    unseen = {k: get_features(specs[k], 'ijbc', 'eval') for k in names}
    T = {'old / old': face_test(F['old'], F['old'], data)}
    if 'new' in names: T['new* / new*'] = face_test(F['new'], F['new'], data)
    T |= {f'{m} / old': face_test(F[m], F['old'], data) for m in names if m not in ('old', 'new')}
    rows = []
    for pair, t in T.items():
        a, b = (('new' if x == 'new*' else x) for x in pair.split(' / '))
        row = dict(seed=seed, reading=reading, pair=pair, **{p: t[p] for p in POINTS})
        if b == 'old' and a != 'old': row |= {f'eq. 2 ({p})': t[p] - T['old / old'][p] for p in POINTS}
        row['rank1 seen'] = rank1(seen[a]['features'], seen[b]['features'], seen[a]['labels'].numpy(), seed)
        row['rank1 unseen'] = rank1(unseen[a]['features'], unseen[b]['features'], unseen[a]['labels'].numpy(), seed)
        rows.append(row)
        print(f"seed {seed} | {reading} | {pair:18s} " + ' '.join(f'{k} {v:6.2f}' for k, v in row.items()
                                                                  if k not in ('seed', 'reading', 'pair')), flush=True)
    return rows


def summary(path: str) -> str:
    """The readings as docs/suspects.md shows them: per pair, the means over seeds of 30's points and of rank-1 on seen
    and unseen subjects, and on how many seeds eq. 2 holds at each point."""
    d = pd.read_csv(path)
    cols = [*POINTS, 'rank1 seen', 'rank1 unseen']
    out = ['| pair | l2 reading | seeds | ' + ' | '.join(cols) + ' | eq. 2 holds (' + ', '.join(POINTS) + ') |',
           '|' + '---|' * (len(cols) + 4)]
    for (pair, reading), r in d.groupby(['pair', 'reading'], sort=False):
        if pair != f'{L2} / old' and reading != MEASURES_ALL: continue   # the same models under every reading
        compat = pair.endswith(' / old') and pair != 'old / old'
        holds = ', '.join(f"{int((r[f'eq. 2 ({p})'] >= 0).sum())}/{len(r)}" for p in POINTS) if compat else ''
        out.append(f"| {pair} | {reading if pair == f'{L2} / old' else ''} | {','.join(map(str, sorted(r.seed)))} | "
                   + ' | '.join(f'{r[c].mean():.1f}' for c in cols) + f' | {holds} |')
    return '\n'.join(out)


def main(argv=None):
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == '--summary':
        print(summary(sys.argv[2])); return
    ap = probe_arguments(__doc__, 'benchmarks/bct_l2_probe.csv')
    ap.add_argument('--reading', choices=list(READINGS), help='(internal) train and measure this reading only')
    ap.add_argument('--cache-root', default='/tmp/bct_l2_probe', help="a cache per reading other than the package's")
    a = ap.parse_args(argv)
    if a.reading is not None:   # one reading in this process: its patch stays in it
        if a.reading != PACKAGE:   # this process trains with the reading
            from compatrepro import train
            train.CompatTerm = l2_reading_term(*READINGS[a.reading])
        apply_probe_arguments(a)
        rows = []
        for s in a.seeds:
            specs, data = seed_models(s, a.scale)
            names = ['old', 'new', 'new-β', L2] if a.reading == MEASURES_ALL else ['old', L2]
            rows += measure(s, a.reading, specs, data, names)
            pd.DataFrame(rows).to_csv(a.out, index=False, float_format='%.4f')
        return
    import subprocess
    apply_probe_arguments(a)
    main_cache = Path(os.environ.get('COMPATREPRO_CACHE', Path.home()/'.cache'/'compatrepro')).expanduser()
    parts = []
    for reading in READINGS:
        cache = main_cache if reading == PACKAGE else variant_cache(a.cache_root, reading)
        if reading != PACKAGE:
            for s in a.seeds: copy_models({k: v for k, v in seed_models(s, a.scale)[0].items() if k in ('old', 'new')},
                                          main_cache, cache)
        part = Path(a.out).with_suffix(f'.{variant_cache("", reading).name}.csv')
        cmd = [sys.executable, __file__, '--reading', reading, '--cache', str(cache), '--out', str(part),
               '--threads', str(a.threads), '--scale', a.scale, '--seeds', *map(str, a.seeds)]
        subprocess.run(cmd, check=True)
        parts.append(part)
        pd.concat([pd.read_csv(p) for p in parts]).to_csv(a.out, index=False, float_format='%.4f')
    for p in parts: p.unlink()
    print(summary(a.out))


if __name__ == '__main__':
    main()
