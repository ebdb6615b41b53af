"""A notebook run by hand with papermill shows what it does in papermill's terminal (issue 41, item 7): `stage` and
`progress` write their lines to the kernel's original stderr, which ipykernel does not copy into the notebook, and
`COMPATREPRO_PROGRESS=0` turns them off; with a plan (`COMPATREPRO_PLANNED_SECONDS`, as `compatrepro reproduce` hands
its kernels) the lines count the notebook's time down from it. A two-cell notebook, no training: a few seconds (the
kernel's start-up)."""
import json, os, subprocess, sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent

CELLS = ["import os\nimport compatrepro.experiments\nfrom compatrepro.core import stage, progress",
         "with stage('training a tiny model'):\n"
         "    for _ in progress(range(3), desc='tiny epoch 1/2'): pass\n"
         "os.environ['COMPATREPRO_PROGRESS'] = '0'\n"
         "with stage('training a silent model'): pass"]


def test_papermill_shows_progress_on_its_stderr(tmp_path):
    nb = nbformat.v4.new_notebook(); nb.cells = [nbformat.v4.new_code_cell(c) for c in CELLS]
    nbformat.write(nb, tmp_path/'probe.ipynb')
    # as a user's shell has it: not under pytest (ipykernel leaves fd 2 alone there) nor `compatrepro reproduce`
    env = {k: v for k, v in os.environ.items() if k not in ('PYTEST_CURRENT_TEST', 'COMPATREPRO_STATUS_FILE', 'COMPATREPRO_NOTEBOOK')}
    env |= dict(COMPATREPRO_PROGRESS='1', PYTHONPATH=os.pathsep.join([str(ROOT), env.get('PYTHONPATH', '')]).rstrip(os.pathsep),
                OMP_NUM_THREADS='1', COMPATREPRO_PLANNED_SECONDS='600')
    r = subprocess.run([sys.executable, '-m', 'papermill', 'probe.ipynb', 'out.ipynb', '-k', 'python3'], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert '[compatrepro] probe: training a tiny model, 00:00 elapsed' in r.stderr, r.stderr
    assert '[compatrepro] probe: done: training a tiny model in 00:00' in r.stderr, r.stderr
    assert 'left of 10:00' in r.stderr, r.stderr                      # the notebook's time left, of its plan
    assert 'silent' not in r.stderr                                   # COMPATREPRO_PROGRESS=0: no lines
    outputs = json.dumps([c.get('outputs', []) for c in json.loads((tmp_path/'out.ipynb').read_text())['cells']])
    assert 'done: training' not in outputs and 'probe: training' not in outputs   # the notebook gets none of them
