"""Every notebook runs as a test, through the project's one notebook runner (`compatrepro.runs`):

- library notebooks (00-19, 98, 99) with papermill, two at a time, each checks its own module;
- experiment notebooks (20-89) once, as `compatrepro reproduce --scale smoke --seeds 0` runs them (two at a time,
  the claims notebooks last): every one of them, none left out. Smoke is a small slice of the Glyphs stand-in that
  exercises every line of a notebook in seconds; its numbers mean nothing. `test_smoke_writes_what_tiny_writes`
  checks that it writes every record and figure the committed tiny run has, so smoke leaves no part untested.

Trained smoke models are shared between the notebooks through an artifact cache of their own, empty at the start."""
import json, os, re, shutil, subprocess, sys
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from compatrepro.report import is_claims_notebook, paper_of_notebook
from compatrepro.provenance import library_definitions, notebook_code, standin_unreached, traced_definitions
from compatrepro.runs import check_results, experiment_notebooks, library_notebooks, reproduce, run_state
from compatrepro.ledger import pending_runs

ROOT = Path(__file__).resolve().parent.parent
NBS = ROOT/'nbs'
TINY = ROOT/'results'/'tiny'
LIBRARY = [p.name for p in library_notebooks(NBS)]
EXPERIMENTS = [p.stem for p in experiment_notebooks(NBS)]
RECORD_KEY = ['paper', 'item', 'dataset', 'method', 'metric']
SEED_PNG = re.compile(r'\.seed\d+\.png$')


def test_every_notebook_is_a_test():
    "Library and experiment notebooks together are all the notebooks (a notebook of neither kind would go untested)."
    every = sorted(p.name for p in NBS.glob('*.ipynb') if p.name[0] not in '_.')
    assert sorted(LIBRARY + [f'{s}.ipynb' for s in EXPERIMENTS]) == every
    assert EXPERIMENTS and LIBRARY


# ---- library notebooks ---------------------------------------------------------------------------------------------

@pytest.fixture(scope='module')
def library_runs():
    """Every library notebook, run once through `run_notebooks` by the docs build's execution step (`python docs/build.py
    --execute-only`: each notebook with nbdev's show_doc cells added, two at a time, working folder nbs/). The executed
    copies land in the build's cache, so building the site (tests/test_docs_site.py) executes nothing again."""
    r = subprocess.run([sys.executable, 'docs/build.py', '--execute-only', '--jobs', '2', '--timeout', '1800'], cwd=ROOT,
                       capture_output=True, text=True)
    print(r.stdout[-3000:])
    summary = ROOT/'docs'/'_build'/'exec'/'summary.json'
    assert summary.exists(), f'docs/build.py --execute-only wrote no summary:\n{r.stdout[-3000:]}\n{r.stderr[-6000:]}'
    return json.loads(summary.read_text())


@pytest.mark.parametrize('nb', LIBRARY)
def test_library_notebook(nb, library_runs):
    run = library_runs.get(Path(nb).stem)
    assert run is not None, f'{nb} was not executed (does it lack a #| default_exp cell?)'
    print(f"{nb}: {run.get('seconds')} s")
    assert run['ok'], f"{nb} failed:\n{run['error']}"


# ---- experiment notebooks, at smoke scale --------------------------------------------------------------------------

@pytest.fixture(scope='module')
def smoke(tmp_path_factory):
    """One `reproduce(scale='smoke', seeds=[0])` of every experiment notebook into a temporary results folder, each
    kernel recording the package definitions it executes into `trace` (`trace_definitions`, started by an IPython
    startup file). Its artifact cache starts empty, so that every model is trained under the trace whatever ran before."""
    out, trace, cache, ipython = (tmp_path_factory.mktemp(d) for d in ('results', 'trace', 'cache', 'ipython'))
    startup = ipython/'profile_default'/'startup'
    startup.mkdir(parents=True)
    (startup/'00-trace.py').write_text('from compatrepro.provenance import trace_definitions\n'
                                       f'trace_definitions({str(trace)!r})\n')
    env = dict(IPYTHONDIR=str(ipython), COMPATREPRO_CACHE=str(cache))   # the kernels inherit them
    before = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try: status = reproduce(scale='smoke', seeds=[0], out=out, nbs=NBS, jobs=2, show=True)
    finally:
        for k, v in before.items():
            if v is None: del os.environ[k]
            else: os.environ[k] = v
    return SimpleNamespace(dir=out/'smoke', status=status, trace=trace, cache=cache)


def _seconds(smoke, nb):
    p = smoke.dir/'runs'/f'{nb}.seed0.json'
    try: return json.loads(p.read_text()).get('duration')
    except (OSError, ValueError): return None


@pytest.mark.parametrize('nb', EXPERIMENTS)
def test_experiment_notebook_runs_at_smoke_scale(nb, smoke):
    s = _seconds(smoke, nb)
    print(f'{nb}: {"?" if s is None else f"{s:.0f}"} s')
    assert (nb, 0) in smoke.status, f'reproduce did not run {nb}: it ran {sorted(smoke.status)}'
    err = smoke.status[(nb, 0)]
    assert err is None, f'{nb} failed at smoke scale (executed notebook and log in {smoke.dir/"notebooks"}):\n{err}'
    rec = smoke.dir/'records'/f'{nb}.seed0.csv'
    assert rec.exists(), f'{nb} ran but wrote no records ({rec})'
    df = pd.read_csv(rec)
    assert len(df) and set(df.scale) == {'smoke'} and set(df.seed) == {0}, df.head()
    prov = smoke.dir/'runs'/f'{nb}.seed0.json'
    assert prov.exists(), f'{nb} ran but wrote no provenance ({prov})'
    p = json.loads(prov.read_text())
    assert (p.get('notebook'), p.get('seed'), p.get('scale'), p.get('finished')) == (nb, 0, 'smoke', True), p
    assert run_state(smoke.dir, nb, 0, NBS) == ('current', []), 'a run just made is not current'


def test_standin_runs_never_execute_the_paper_scale_path(smoke):
    """A run on the stand-in is not made stale by a change to a definition its notebook reaches only through the paper
    scale's data path (`standin_unreached`, `run_library_changes`): that holds because no such run executes one. Every
    smoke run recorded the definitions it executed; none of them may be one of those (smoke and tiny take the same path:
    both are `STANDIN_SCALES`, whose datasets are tensors in memory)."""
    traced = traced_definitions(smoke.trace)
    assert len(traced) >= len(EXPERIMENTS), f'{len(traced)} kernels recorded what they executed, for {len(EXPERIMENTS)} notebooks'
    executed = {d.split('.', 1)[1] for ds in traced.values() for d in ds}
    assert {'get_split', 'iter_batches', 'RecordBook', 'backfill_curve'} <= executed, 'the trace misses what every run executes'
    defs = library_definitions()
    unreached = {nb: standin_unreached(notebook_code(NBS/f'{nb}.ipynb')[1], defs) for nb in EXPERIMENTS}
    assert {'decode_jpegs', 'build_manifest', '_paper_split'} <= set().union(*unreached.values()), 'the paper path is not left out'
    wrong = {nb: sorted(u & executed) for nb, u in unreached.items() if u & executed}
    assert not wrong, f'stand-in runs executed what PAPER_SCALE_ONLY says they never enter: {wrong}'


def _record_keys(path):
    return set(map(tuple, pd.read_csv(path)[RECORD_KEY].astype(str).itertuples(index=False)))


# BCT eq. 9's update gain is recorded only where the paragon beats (old, old) (bct.compatibility: the equation means
# nothing below it), which depends on the run's numbers: either scale may have one the other lacks
DEFINED_WHERE_REACHED = re.compile(r'^update gain \(')

def _differences(smoke_keys, tiny_keys):
    "(only in smoke, only in tiny) record keys, less the records that exist only where a run's numbers reach them."
    keep = lambda ks: sorted(k for k in ks if not DEFINED_WHERE_REACHED.match(k[-1]))
    return keep(smoke_keys - tiny_keys), keep(tiny_keys - smoke_keys)


def _figures(folder, nb):
    return {SEED_PNG.sub('', p.name) for p in Path(folder).glob(f'{nb}_*.seed*.png')}


def _claim_keys(folder, paper):
    return {(f.stem, c['key']) for f in Path(folder).glob('*.json') if paper_of_notebook(f.stem + '.ipynb') == paper
            for c in json.loads(f.read_text())}


def test_smoke_and_tiny_may_differ_only_in_the_update_gains_their_numbers_reach():
    k = lambda m: ('BCT', 'Table 1', 'ijbc', 'new / old', m)
    tiny = {k('TAR@FAR=1e-4'), k('update gain (TAR@FAR=1e-4)')}
    assert _differences({k('TAR@FAR=1e-4')}, tiny) == ([], [])
    assert _differences(tiny | {k('update gain (rank1)')}, tiny) == ([], [])
    assert _differences({k('update gain (TAR@FAR=1e-4)')}, tiny) == ([], [k('TAR@FAR=1e-4')])
    assert _differences(tiny | {k('rank1')}, tiny) == ([k('rank1')], [])


@pytest.mark.parametrize('nb', EXPERIMENTS)
def test_smoke_writes_what_tiny_writes(nb, smoke):
    """Smoke writes the records (paper, item, dataset, method, metric) and figures that the committed tiny run has,
    once that run is current (a run the re-run ledger lists was made by older code, which may have written others).
    A claims notebook records the margin of each claim whose numbers its paper's runs have made, which differ between
    the smoke runs and committed runs pending a re-run: it must declare the same claims at both scales."""
    rec = smoke.dir/'records'/f'{nb}.seed0.csv'
    tiny = TINY/'records'/f'{nb}.seed0.csv'
    assert rec.exists(), f'{nb} wrote no smoke records (see test_experiment_notebook_runs_at_smoke_scale)'
    if (nb, 0) in pending_runs(TINY): return   # its tiny run predates today's code: compared once it is re-run
    if is_claims_notebook(nb + '.ipynb'):
        a, b = _claim_keys(smoke.dir/'claims', paper_of_notebook(nb + '.ipynb')), _claim_keys(TINY/'claims', paper_of_notebook(nb + '.ipynb'))
        assert a == b, f'{nb}: smoke and tiny claims differ\nonly in smoke: {sorted(a - b)}\nonly in tiny: {sorted(b - a)}'
        return
    assert tiny.exists(), f'no committed tiny records of {nb} ({tiny}): compatrepro reproduce --scale tiny --only {nb}'
    only_smoke, only_tiny = _differences(_record_keys(rec), _record_keys(tiny))
    assert not only_smoke and not only_tiny, (f'{nb}: smoke and tiny records differ\nonly in smoke: {only_smoke}\n'
                                              f'only in the committed tiny ones: {only_tiny}')
    fa = _figures(smoke.dir/'figures', nb)
    fb = {SEED_PNG.sub('', f) for f in json.loads((TINY/'runs'/f'{nb}.seed0.json').read_text()).get('figures', {}).values()}   # what that run drew
    assert fa == fb, f'{nb}: smoke and tiny figures differ\nonly in smoke: {sorted(fa - fb)}\nonly in tiny: {sorted(fb - fa)}'


def test_a_rerun_is_compared_with_the_records_it_should_reproduce(smoke, tmp_path, monkeypatch):
    """`reproduce --out ELSEWHERE --compare-with RESULTS`, as the README's first command runs it: a smoke re-run of one
    notebook from the same cache, into another folder, reports every value equal to the first run's."""
    nb = '24_fastfill_biased'
    monkeypatch.setenv('COMPATREPRO_CACHE', str(smoke.cache))
    st = reproduce(scale='smoke', seeds=[0], out=tmp_path, nbs=NBS, only=[f'^{nb}$'], jobs=1, compare_with=smoke.dir.parent, show=False)
    assert st == {(nb, 0): None}, st
    cmp = pd.read_csv(tmp_path/'smoke'/'rerun_comparison.csv').set_index('notebook')
    row = cmp.loc[nb]
    assert row['values'] > 0 and row['equal'] == row['values'], row
    assert row['only_before'] == row['only_after'] == 0, row


# ---- the package and the committed results -------------------------------------------------------------------------

def test_notebooks_and_package_agree(tmp_path):
    """nbdev_export from the notebooks reproduces compatrepro/ exactly, no module more or less (the package is never
    hand-edited). It exports copies of nbs/ and settings.ini into an empty folder: the working tree is never written."""
    shutil.copytree(NBS, tmp_path/'nbs'); shutil.copy(ROOT/'settings.ini', tmp_path)
    nbdev_export = Path(sys.executable).parent/'nbdev_export'
    r = subprocess.run([str(nbdev_export) if nbdev_export.exists() else 'nbdev_export'], cwd=tmp_path,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    before = {p.name: p.read_bytes() for p in (ROOT/'compatrepro').glob('*.py')}
    after = {p.name: p.read_bytes() for p in (tmp_path/'compatrepro').glob('*.py')}
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    assert not changed, f'nbdev_export makes {changed} otherwise (or not at all): export the notebooks and commit the modules'


def test_committed_results_are_current():
    "Every experiment notebook has 3 current seeds of tiny results committed, and no committed run is stale."
    problems = check_results('tiny', ROOT/'results', NBS)
    assert not problems, f'{len(problems)} problem(s) with the committed tiny results:\n' + '\n'.join(problems)


def test_editing_a_notebook_makes_only_its_items_stale(tmp_path):
    """On a copy of the committed tiny results (stamped current: they may all be pending a re-run) and the notebooks: one
    edited code cell of 21 makes `status --check` fail for 21's runs and the status matrix call exactly the items 21
    produces stale, nothing else."""
    import nbformat
    from compatrepro.runs import status_table
    from _doubles import scratch_repo
    scratch_repo(tmp_path)
    args = ('tiny', tmp_path/'results', tmp_path/'nbs')
    assert check_results(*args) == []
    before = status_table(*args)
    f = tmp_path/'nbs'/'21_fastfill_ablation.ipynb'
    nb = nbformat.read(str(f), as_version=4)
    next(c for c in nb.cells if c.cell_type == 'code' and 'parameters' not in c.metadata.get('tags', [])).source += '\n_edited = 1'
    nbformat.write(nb, str(f))
    problems = check_results(*args)
    assert problems and all(p.startswith('21_fastfill_ablation') for p in problems), problems
    after = status_table(*args)
    stale = set(after[after.status == 'stale'].item)
    of_21 = set(before[before.notebooks.str.split().map(lambda n: '21_fastfill_ablation' in n)].item)
    assert stale and stale == of_21, (stale, of_21)
    assert set(before[before.status == 'stale'].item) == set()
