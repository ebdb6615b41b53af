"""Every notebook runs as a test: library notebooks through nbdev's test runner, experiment
notebooks (10-89) through papermill with their default parameters, so each runs once per CI run.

Experiment notebooks share trained tiny models through the artifact cache ($COMPATREPRO_CACHE).
"""
import os, re, subprocess, sys
from pathlib import Path
import pytest

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


@pytest.fixture(scope='module')
def results_dir(tmp_path_factory):
    "One results folder for all experiment notebooks of the run, as `compatrepro reproduce` has (29_ reads the others')."
    return tmp_path_factory.mktemp('results')


@pytest.mark.parametrize('nb', experiments)
def test_experiment_notebook_runs_with_defaults(nb, results_dir):
    "papermill with the notebook's own defaults (tiny scale); results go to a temporary folder."
    out_nb = results_dir/nb
    r = _run(['papermill', f'nbs/{nb}', str(out_nb), '-p', 'out_dir', str(results_dir),
              '--cwd', 'nbs', '-k', 'python3', '--no-progress-bar'])
    assert r.returncode == 0, f'papermill failed on {nb}:\n{r.stderr[-8000:]}'
    records = results_dir/'tiny'/'records'/f'{Path(nb).stem}.seed0.csv'
    assert records.exists(), f'{nb} ran but wrote no result records ({records})'


def test_notebooks_and_package_agree(tmp_path):
    "nbdev_export from the notebooks reproduces compatrepro/ exactly (the package is never hand-edited)."
    before = {p.name: p.read_bytes() for p in (ROOT/'compatrepro').glob('*.py')}
    r = _run(['nbdev_export'])
    assert r.returncode == 0, r.stderr
    after = {p.name: p.read_bytes() for p in (ROOT/'compatrepro').glob('*.py')}
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    assert not changed, f'nbdev_export changed {changed}: export the notebooks and commit the modules'
