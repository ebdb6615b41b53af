"""The CPU benchmarks of the tiny recipe's training (benchmarks/bench_tiny_train.py, benchmarks/profile_tiny_making.py)
still run on the library as it is: each builds the recipe's model and optimiser through the library's own functions,
so a change there that breaks them fails here, with a few steps on the stand-in's ImageNet-1k (no number asserted)."""
import os, subprocess, sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ENV = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get('PYTHONPATH', ''), COMPATREPRO_PROGRESS='0',
           OMP_NUM_THREADS='1')


@pytest.mark.parametrize('variant', ['real', 'channels-last-synthetic'])
def test_bench_tiny_train_times_a_step(variant):
    r = subprocess.run([sys.executable, str(ROOT/'benchmarks'/'bench_tiny_train.py'), '--one', variant, '--steps', '3',
                        '--warmup', '1'], capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert float(r.stdout.strip().splitlines()[-1]) > 0, r.stdout     # images per second


@pytest.mark.parametrize('flags', [[], ['--channels-last']])
def test_profile_tiny_making_profiles_an_epoch(flags):
    r = subprocess.run([sys.executable, str(ROOT/'benchmarks'/'profile_tiny_making.py'), '--epochs', '1', '--top', '3', *flags],
                       capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    line = next((l for l in r.stdout.splitlines() if l.startswith('seconds per epoch:')), None)
    assert line is not None and float(line.split()[3]) > 0, r.stdout     # one epoch's seconds
    assert ('channels-last' in r.stdout) == bool(flags), r.stdout
