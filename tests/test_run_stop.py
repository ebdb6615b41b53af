"""A run of `compatrepro reproduce` that is interrupted (Ctrl-C, or SIGTERM from a scheduler or `kill`) stops its
notebooks' kernels with it, instead of leaving them training on unseen, and keeps the executed notebook it would have
replaced; a notebook past its timeout is stopped the same way (`14_runs`)."""
import os, re, signal, subprocess, sys, textwrap, time
from pathlib import Path

import nbformat

from compatrepro.runs import NotebookJob, execute_notebook

ROOT = Path(__file__).resolve().parent.parent


def sleeper(tmp_path: Path, name: str = 'sleeper') -> Path:
    "A notebook `name` whose kernel writes its pid to `name`.pid, then sleeps two minutes."
    nb = tmp_path/f'{name}.ipynb'
    pid = tmp_path/f'{name}.pid'
    code = f"import os, time\nopen({str(pid)!r}, 'w').write(str(os.getpid()))\ntime.sleep(120)"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)]), nb)
    return nb


def kernel_pid(tmp_path: Path, within: float = 120., name: str = 'sleeper') -> int:
    "The pid of sleeper `name`'s kernel, once it has started."
    f, t0 = tmp_path/f'{name}.pid', time.time()
    while time.time() - t0 < within:
        if f.exists() and f.read_text():
            return int(f.read_text())
        time.sleep(0.5)
    raise AssertionError('the kernel did not start')


def alive(pid: int) -> bool:
    "Whether process `pid` runs (a zombie waiting to be reaped does not)."
    try:
        return 'State:\tZ' not in Path(f'/proc/{pid}/status').read_text()
    except FileNotFoundError:
        return False


def test_sigterm_stops_the_kernels_and_keeps_the_notebooks_they_would_replace(tmp_path):
    "Two notebooks at a time, both stopped with their kernels."
    names = ['sleeper', 'other']
    nbs, outs = [sleeper(tmp_path, n) for n in names], [tmp_path/'out'/f'{n}.seed0.ipynb' for n in names]
    outs[0].parent.mkdir()
    for out in outs:
        out.write_text('the committed run')
    jobs = ', '.join(f'NotebookJob(Path({str(nb)!r}), Path({str(out)!r}), name={nb.stem!r})'
                     for nb, out in zip(nbs, outs))
    runner = textwrap.dedent(f"""
        from pathlib import Path
        from compatrepro.runs import NotebookJob, run_notebooks
        done = lambda job: Path({str(tmp_path/'on_done')!r}).write_text(job.name)
        try:
            run_notebooks([{jobs}], n_jobs=2, show=False, on_done=done)
        except KeyboardInterrupt:
            raise SystemExit(130)
        """)
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get('PYTHONPATH', ''))
    p = subprocess.Popen([sys.executable, '-c', runner], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True)
    pids = [kernel_pid(tmp_path, name=n) for n in names]
    p.send_signal(signal.SIGTERM)
    log, _ = p.communicate(timeout=90)
    assert p.returncode == 130, log
    assert re.search(r'interrupted: stopped (sleeper, other|other, sleeper);', log), log
    time.sleep(1)
    assert not any(alive(pid) for pid in pids), 'a kernel outlived the run'
    assert all(out.read_text() == 'the committed run' for out in outs)
    assert not (tmp_path/'on_done').exists(), 'a stopped run was reported as finished'
    assert not list(outs[0].parent.glob('.*.tmp')), 'a temporary file was left beside the notebooks'


def test_a_notebook_past_its_timeout_is_stopped_with_its_kernel(tmp_path):
    nb = sleeper(tmp_path)
    job = NotebookJob(nb, tmp_path/'out.ipynb', name='sleeper', timeout=40)
    execute_notebook(job)
    pid = kernel_pid(tmp_path, within=1)
    assert job.ok is False and job.error == 'still running after 40 s: stopped', job.error
    time.sleep(1)
    assert not alive(pid), 'the kernel outlived its timeout'
    assert (tmp_path/'out.ipynb').exists()   # written as far as it ran, to show where it stopped
