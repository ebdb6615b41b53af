"""The experiment notebooks' lanes: which notebooks run side by side under papermill in a test session, and the runner
(`tests/test_notebooks.py` starts it when it reaches the first experiment notebook)."""
import os, re, subprocess, threading, time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Experiment notebooks run in two lanes at once, each kernel with one intra-op thread. On the 2-core CI machine a
# ResNet-18 step takes 0.37 s with 2 threads, 0.56 s with 1 alone (benchmarks/bench_lanes.py) and 0.62 s in each of
# two busy lanes, so two lanes do about 1.2x the work of one notebook at a time. Notebooks that share trained models sit
# in one lane, so the cache never trains a model twice, except where AFTER makes a notebook in the other lane wait for
# the one that trains its models (27 uses 20's old and new models; it sits in the shorter lane, which reaches it long
# after 20 has finished). Notebooks that read the others' records (the claims) run after both lanes. The lanes start
# only after the other tests of test_notebooks.py and those before it, not with the session: test_standin_gap trains
# 20's old and new models into the shared cache, and beside the lanes it would train them a second time. Starting the
# lanes with the session anyway (with test_standin_gap moved after them) was measured slower: CI took 4899 s against
# 4776 s, because the other tests (docs build, Chromium, DDP, library notebooks' kernels) leave no core idle (8885c72).
LANES = (('20_fastfill_imagenet', '21_fastfill_ablation', '26_fastfill_unseen', '24_fastfill_biased'),
         ('22_fastfill_places', '23_fastfill_vggface2', '27_fastfill_side_info'))
AFTER = {'27_fastfill_side_info': '20_fastfill_imagenet', '25_fastfill_arch': '20_fastfill_imagenet'}
# Notebooks a test session leaves out unless COMPATREPRO_ALL_NOTEBOOKS=1, and why (`compatrepro reproduce` runs them all).
LEFT_OUT = {'25_fastfill_arch': "it trains three models of its own (1094 s on the 2-core CI machine alone, about twice that "
                                "in a lane), which the 90-minute CI budget cannot hold beside the other notebooks; its "
                                "committed results come from `compatrepro reproduce`"}


def left_out(name):
    "Why the notebook `name` is left out of this test session, or None when it runs."
    return None if os.environ.get('COMPATREPRO_ALL_NOTEBOOKS') == '1' else LEFT_OUT.get(Path(name).stem)


LAST = re.compile(r'_claims')


def lanes_for(names):
    "LANES restricted to `names`, every other notebook added to the shortest lane, and the notebooks to run last."
    names = [n for n in names]
    stems = {Path(n).stem: n for n in names}
    last = [n for n in names if LAST.search(n)]
    lanes = [[stems[s] for s in lane if s in stems] for lane in LANES]
    placed = {n for lane in lanes for n in lane} | set(last)
    for n in names:
        if n not in placed: min(lanes, key=len).append(n)
    return lanes, last


class LaneRunner:
    "Runs notebooks with papermill in lanes (a thread per lane, one process at a time in each); `result(nb)` waits for one."
    def __init__(self, results_dir, names):
        self.results_dir, self.done, self.results = results_dir, {n: threading.Event() for n in names}, {}
        self.lanes, self.last = lanes_for(names)
        self.env = dict(os.environ, OMP_NUM_THREADS='1', MKL_NUM_THREADS='1')
        self.procs, self.stopped = set(), False
        self.threads = [threading.Thread(target=self._lane, args=(lane,), daemon=True) for lane in self.lanes]
        for t in self.threads: t.start()
        threading.Thread(target=self._last, daemon=True).start()

    def _run(self, nb):
        dep = next((d for d in self.done if Path(d).stem == AFTER.get(Path(nb).stem)), None)
        if dep is not None: self.done[dep].wait()   # its models are trained by `dep`
        t0 = time.time()
        try:
            if self.stopped: raise RuntimeError('the test session ended before this notebook started')
            r = self._execute(nb)
        except Exception as e:   # reported on the notebook's own test instead of hanging it
            r = subprocess.CompletedProcess([], 1, '', repr(e))
        self.results[nb] = (r, time.time() - t0)
        self.done[nb].set()

    def _execute(self, nb):
        p = subprocess.Popen(['papermill', f'nbs/{nb}', str(self.results_dir/nb), '-p', 'out_dir', str(self.results_dir),
                              '--cwd', 'nbs', '-k', 'python3', '--no-progress-bar'],
                             cwd=ROOT, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.procs.add(p)
        out, err = p.communicate()
        self.procs.discard(p)
        return subprocess.CompletedProcess(p.args, p.returncode, out, err)

    def _lane(self, lane):
        for nb in lane: self._run(nb)

    def _last(self):
        for t in self.threads: t.join()
        for nb in self.last: self._run(nb)

    def result(self, nb):
        self.done[nb].wait()
        return self.results[nb]

    def stop(self):
        "End the run: kill what is still running (e.g. after Ctrl-C, or when only some notebooks were selected)."
        self.stopped = True
        for p in list(self.procs): p.kill()
