"""ArtifactCache.get_or_make between processes: two runs that miss the same key at once make it once (the second waits
on the key's file lock and loads what the first saved), and a run killed while it holds the lock does not block the next."""
import json, os, signal, subprocess, sys, textwrap, time
from pathlib import Path

SCRIPT = textwrap.dedent('''
    import json, os, sys, time
    from pathlib import Path
    from compatrepro.runtime import ArtifactCache
    root, marker, go, sleep = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), float(sys.argv[4])
    Path(f'{go}.ready.{os.getpid()}').touch()          # imported: ready to start
    while not go.exists(): time.sleep(0.01)            # every process calls get_or_make at the same moment
    def make():
        t0 = time.time()
        with open(marker, 'a') as f: f.write(f'{os.getpid()} start\\n'); f.flush()
        time.sleep(sleep)
        with open(marker, 'a') as f: f.write(f'{os.getpid()} end\\n')
        return {'value': 42, 'maker': os.getpid(), 'make_start': t0, 'make_end': time.time()}
    t_call = time.time()
    art = ArtifactCache(root).get_or_make('thing', {'a': 1}, make)
    print('ARTIFACT ' + json.dumps(dict(art, pid=os.getpid(), t_call=t_call)), flush=True)
''')


def _start(tmp_path, n, sleep):
    "`n` processes running SCRIPT on one cache; returns them once each has imported the package (none has started yet)."
    script = tmp_path/'run.py'; script.write_text(SCRIPT)
    go = tmp_path/'go'
    env = dict(os.environ, COMPATREPRO_PROGRESS='0', OMP_NUM_THREADS='1')
    procs = [subprocess.Popen([sys.executable, str(script), str(tmp_path/'cache'), str(tmp_path/'marker'), str(go), str(sleep)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for _ in range(n)]
    deadline = time.time() + 300
    while len(list(tmp_path.glob('go.ready.*'))) < n:
        assert time.time() < deadline and all(p.poll() is None for p in procs), \
            'a process did not start: ' + ' | '.join(p.communicate()[1][-2000:] for p in procs if p.poll() is not None)
        time.sleep(0.05)
    return procs, go


def _finish(p, timeout):
    "stdout, stderr of `p`, which must end by itself within `timeout` seconds and succeed."
    try: out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill(); out, err = p.communicate()
        raise AssertionError(f'process {p.pid} still runs after {timeout} s (waiting for the lock forever?):\n{err[-3000:]}')
    assert p.returncode == 0, err[-3000:]
    line = [l for l in out.splitlines() if l.startswith('ARTIFACT ')]
    assert len(line) == 1, out
    return json.loads(line[0][len('ARTIFACT '):])


def test_two_processes_make_an_artifact_once(tmp_path):
    procs, go = _start(tmp_path, 2, sleep=2.0)
    go.touch()
    arts = [_finish(p, 300) for p in procs]
    marker = (tmp_path/'marker').read_text().splitlines()
    assert len(marker) == 2 and marker[0].endswith(' start') and marker[1].endswith(' end'), marker   # one make, whole
    maker = int(marker[0].split()[0])
    assert {a['pid'] for a in arts} == {p.pid for p in procs} and maker in {p.pid for p in procs}
    assert all(a['value'] == 42 and a['maker'] == maker for a in arts), arts   # both got the one artifact
    # the test means something only if the other process asked while the artifact was being made
    other = next(a for a in arts if a['pid'] != maker)
    assert other['t_call'] < other['make_end'], (other['t_call'], other['make_end'])


def test_a_killed_holder_does_not_block_the_next_run(tmp_path):
    (holder,), go = _start(tmp_path, 1, sleep=600.0)
    go.touch()
    marker = tmp_path/'marker'
    deadline = time.time() + 120
    while not (marker.exists() and marker.read_text().endswith(' start\n')):   # it holds the lock, inside make()
        assert time.time() < deadline and holder.poll() is None, holder.communicate()[1][-3000:]
        time.sleep(0.05)
    holder.send_signal(signal.SIGKILL); holder.communicate()
    assert holder.returncode == -signal.SIGKILL
    assert not list((tmp_path/'cache'/'thing').glob('*.pt'))      # nothing was saved by the killed run
    go.unlink()
    for f in tmp_path.glob('go.ready.*'): f.unlink()
    (nxt,), go = _start(tmp_path, 1, sleep=0.5)
    go.touch()
    art = _finish(nxt, 120)                                        # a lock left held would make this time out
    assert art['maker'] == nxt.pid and art['value'] == 42          # it made the artifact itself
    lines = marker.read_text().splitlines()
    assert lines == [f'{holder.pid} start', f'{nxt.pid} start', f'{nxt.pid} end'], lines
    assert len(list((tmp_path/'cache'/'thing').glob('*.pt'))) == 1
