"""Shared pytest settings: the artifact cache is shared by every test and notebook of a run."""
import os
import pytest
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault('COMPATREPRO_PROGRESS', '0')


@pytest.fixture
def one_thread():
    "One intra-op thread: on a shared 2-core machine OpenMP's spin-waits make 2 threads up to 8x slower."
    import torch
    n = torch.get_num_threads(); torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


EXPERIMENT_TEST = 'test_experiment_notebook_runs_with_defaults'
WAITS_FOR_NOTEBOOKS = (EXPERIMENT_TEST, 'test_standin_gap')   # they wait for a lane (the gap test for 20's models)
RUN_LAST = ('test_notebooks_and_package_agree',)   # rewrites compatrepro/*.py: never while a notebook kernel imports it


def _name(item): return getattr(item, 'originalname', item.name)


def pytest_collection_modifyitems(session, config, items):
    "Tests that wait for the notebook lanes go last, so every other test runs while the lanes work (stable sort)."
    items.sort(key=lambda it: (_name(it) in WAITS_FOR_NOTEBOOKS) + 2*(_name(it) in RUN_LAST))


@pytest.fixture(scope='session', autouse=True)
def notebook_lanes(request, tmp_path_factory):
    """Start this session's experiment notebooks in their lanes (tests/notebook_lanes.py) with the session; None if none.
    Meanwhile this process and the tests' subprocesses use one intra-op thread, so the 2 cores are not oversubscribed."""
    from notebook_lanes import LaneRunner, left_out
    chosen = [it.callspec.params['nb'] for it in request.session.items if _name(it) == EXPERIMENT_TEST]
    chosen = [nb for nb in chosen if left_out(nb) is None]
    if not chosen:
        yield None; return
    import torch
    from compatrepro.data import glyph_universe
    glyph_universe()   # made once here, not once per lane
    threads, omp = torch.get_num_threads(), os.environ.get('OMP_NUM_THREADS')
    torch.set_num_threads(1); os.environ['OMP_NUM_THREADS'] = '1'
    r = LaneRunner(tmp_path_factory.mktemp('results'), chosen)
    yield r
    r.stop()
    torch.set_num_threads(threads)
    if omp is None: os.environ.pop('OMP_NUM_THREADS', None)
    else: os.environ['OMP_NUM_THREADS'] = omp
