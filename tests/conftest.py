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
RUN_LAST = ('test_notebooks_and_package_agree',)   # rewrites compatrepro/*.py: never while a notebook kernel imports it


def pytest_collection_modifyitems(session, config, items):
    "The experiment-notebook tests (which only wait for their lane) go last, so every other test runs while the lanes work."
    key = lambda it: (getattr(it, 'originalname', it.name) == EXPERIMENT_TEST) + 2*(getattr(it, 'originalname', it.name) in RUN_LAST)
    items.sort(key=key)   # stable: the order within each group is kept


@pytest.fixture(scope='session', autouse=True)
def notebook_lanes(request, tmp_path_factory):
    "Start the experiment notebooks of this session in their lanes (tests/notebook_lanes.py) when the session starts."
    from notebook_lanes import LaneRunner, left_out
    chosen = [it.callspec.params['nb'] for it in request.session.items if getattr(it, 'originalname', None) == EXPERIMENT_TEST]
    chosen = [nb for nb in chosen if left_out(nb) is None]
    if not chosen:
        yield None; return
    from compatrepro.data import glyph_universe
    glyph_universe()   # made once here, not once per lane
    r = LaneRunner(tmp_path_factory.mktemp('results'), chosen)
    yield r
    r.stop()
