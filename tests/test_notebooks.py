"""Every notebook runs as a test: library notebooks through nbdev's test runner, experiment
notebooks (10-89) through papermill with their default parameters, so each runs once per CI run.

Experiment notebooks share trained tiny models through the artifact cache ($COMPATREPRO_CACHE).
"""
import os, re, subprocess, time
from pathlib import Path
import pytest
from notebook_lanes import LaneRunner, lanes_for, left_out

ROOT = Path(__file__).resolve().parent.parent
NBS = ROOT/'nbs'
EXPERIMENT = re.compile(r'^[1-8][0-9]_')
library = sorted(p.name for p in NBS.glob('*.ipynb') if not EXPERIMENT.match(p.name))
experiments = sorted(p.name for p in NBS.glob('*.ipynb') if EXPERIMENT.match(p.name))
# `#| slow` cells run too unless COMPATREPRO_FAST=1 (a quick local loop)
FLAGS = '' if os.environ.get('COMPATREPRO_FAST') == '1' else 'slow'


def _run(cmd, **kw):
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, **kw)


@pytest.mark.parametrize('nb', library)
def test_library_notebook(nb):
    r = _run(['nbdev_test', '--path', f'nbs/{nb}', '--flags', FLAGS])
    assert r.returncode == 0, f'nbdev_test failed on {nb}:\n{r.stdout[-6000:]}\n{r.stderr[-6000:]}'


def test_lanes_cover_every_notebook_once():
    lanes, last = lanes_for(experiments)
    flat = [n for lane in lanes for n in lane] + last
    assert sorted(flat) == sorted(experiments) and len(flat) == len(set(flat))
    lanes, last = lanes_for(['20_fastfill_imagenet.ipynb', '29_fastfill_claims.ipynb', '30_ract_new.ipynb'])
    assert lanes == [['20_fastfill_imagenet.ipynb'], ['30_ract_new.ipynb']] and last == ['29_fastfill_claims.ipynb']


def test_a_notebook_waits_for_the_one_that_trains_its_models(tmp_path):
    "27 (lane B) starts only once 20 (lane A) has finished, however fast lane B is."
    log = []
    class Fake(LaneRunner):
        def _execute(self, nb):
            log.append(('start', nb)); time.sleep(0.3 if nb.startswith('20') else 0); log.append(('end', nb))
            return subprocess.CompletedProcess([], 0, '', '')
    r = Fake(tmp_path, ['20_fastfill_imagenet.ipynb', '27_fastfill_side_info.ipynb'])
    assert r.result('27_fastfill_side_info.ipynb')[0].returncode == 0
    assert log.index(('end', '20_fastfill_imagenet.ipynb')) < log.index(('start', '27_fastfill_side_info.ipynb'))


@pytest.fixture(scope='module')
def runner(request, tmp_path_factory):
    "One results folder for the experiment notebooks selected in this session, run as `compatrepro reproduce` would (29_ reads the others')."
    chosen = [it.callspec.params['nb'] for it in request.session.items
              if getattr(it, 'originalname', None) == 'test_experiment_notebook_runs_with_defaults' and left_out(it.callspec.params['nb']) is None]
    from compatrepro.data import glyph_universe
    glyph_universe()   # made once here, not once per lane
    r = LaneRunner(tmp_path_factory.mktemp('results'), chosen)
    yield r
    r.stop()


@pytest.mark.parametrize('nb', experiments)
def test_experiment_notebook_runs_with_defaults(nb, runner):
    "papermill with the notebook's own defaults (tiny scale); results go to a temporary folder."
    if why := left_out(nb): pytest.skip(f'{nb} is left out of the test session: {why} (COMPATREPRO_ALL_NOTEBOOKS=1 runs it)')
    r, seconds = runner.result(nb)
    print(f'{nb}: {seconds:.0f} s')
    assert r.returncode == 0, f'papermill failed on {nb}:\n{r.stderr[-8000:]}'
    records = runner.results_dir/'tiny'/'records'/f'{Path(nb).stem}.seed0.csv'
    assert records.exists(), f'{nb} ran but wrote no result records ({records})'


def test_notebooks_and_package_agree(tmp_path):
    "nbdev_export from the notebooks reproduces compatrepro/ exactly (the package is never hand-edited)."
    before = {p.name: p.read_bytes() for p in (ROOT/'compatrepro').glob('*.py')}
    r = _run(['nbdev_export'])
    assert r.returncode == 0, r.stderr
    after = {p.name: p.read_bytes() for p in (ROOT/'compatrepro').glob('*.py')}
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    assert not changed, f'nbdev_export changed {changed}: export the notebooks and commit the modules'
