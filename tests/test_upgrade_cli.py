"""`compatrepro upgrade` in a process of its own, as a user runs it (issue 67, part 5): tqdm's bars on a terminal, and
none when its stderr is piped, where they would fill the output; the lines of its stages either way. The made-up
upgrade, one transformation trained for one epoch: seconds each."""
import fcntl, os, pty, struct, subprocess, sys, termios
from pathlib import Path

import numpy as np

from compatrepro.upgrade import example_upgrade

ROOT = Path(__file__).resolve().parent.parent


def _stderr_of(args: list, cwd: Path, terminal: bool) -> str:
    "What `compatrepro upgrade args` writes to its stderr: a pipe, or a pseudo-terminal when `terminal`."
    env = {k: v for k, v in os.environ.items() if k != 'COMPATREPRO_PROGRESS'}    # a user's shell: bars by default
    path = os.pathsep.join([str(ROOT), env.get('PYTHONPATH', '')]).rstrip(os.pathsep)
    env |= dict(PYTHONPATH=path, OMP_NUM_THREADS='1')
    cmd = [sys.executable, '-m', 'compatrepro', 'upgrade', *args]
    if not terminal:
        r = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                           timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        return r.stderr
    reader, writer = pty.openpty()
    fcntl.ioctl(writer, termios.TIOCSWINSZ, struct.pack('HHHH', 24, 100, 0, 0))   # 100 columns: a new one has none
    p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=writer)
    os.close(writer)
    out = []
    while True:     # read while it writes, until it closes the terminal (EIO)
        try: chunk = os.read(reader, 4096)
        except OSError: break
        if not chunk: break
        out.append(chunk)
    os.close(reader)
    text = b''.join(out).decode(errors='replace')
    assert p.wait(timeout=300) == 0, text[-3000:]
    return text


def test_upgrade_draws_bars_on_a_terminal_only(tmp_path):
    np.savez(tmp_path/'ex.npz', **example_upgrade(train_per_class=10))
    args = ['ex.npz', '--points', '3', '--transform', 'FCT', '--transform-epochs', '1', '--device', 'cpu']
    shown = _stderr_of([*args, '--out', 'shown'], tmp_path, terminal=True)
    piped = _stderr_of([*args, '--out', 'piped'], tmp_path, terminal=False)
    assert 'l2 epoch 1/1' in shown and '%|' in shown, shown[-3000:]          # the training epoch's bar, on a terminal
    assert '%|' not in piped and '\r' not in piped, piped[-3000:]            # none in a pipe
    for err in (shown, piped): assert '[compatrepro] training the FCT transformation' in err, err[-3000:]
