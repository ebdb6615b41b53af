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


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    "In CI (CI=true) no test may skip: a skip there means a part of the suite did not run, so it fails instead."
    outcome = yield
    rep = outcome.get_result()
    if os.environ.get('CI') == 'true' and rep.skipped and not hasattr(rep, 'wasxfail'):
        rep.outcome = 'failed'
        rep.longrepr = f'skipped in CI, where every test must run: {rep.longrepr}'


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    "The same for a whole module that skips itself at collection (e.g. without Chromium)."
    outcome = yield
    rep = outcome.get_result()
    if os.environ.get('CI') == 'true' and rep.skipped:
        rep.outcome = 'failed'
        rep.longrepr = f'skipped in CI, where every test must run: {rep.longrepr}'
