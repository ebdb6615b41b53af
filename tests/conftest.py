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
