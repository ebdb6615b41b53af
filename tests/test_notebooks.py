"""Every notebook runs as a test: library notebooks through nbdev's test runner, experiment
notebooks (10-89) through papermill with their default parameters, so each runs once per CI run.

Experiment notebooks share trained tiny models through the artifact cache ($COMPATREPRO_CACHE).
"""
import os, re, subprocess, sys, threading, time
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parent.parent
NBS = ROOT/'nbs'
EXPERIMENT = re.compile(r'^[1-8][0-9]_')
library = sorted(p.name for p in NBS.glob('*.ipynb') if not EXPERIMENT.match(p.name))
experiments = sorted(p.name for p in NBS.glob('*.ipynb') if EXPERIMENT.match(p.name))
# `#| slow` cells run too unless COMPATREPRO_FAST=1 (a quick local loop)
FLAGS = '' if os.environ.get('COMPATREPRO_FAST') == '1' else 'slow'


def _run(cmd, **kw):
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, **kw)


@pytest.mark.parametrize('nb', library)
def test_library_notebook(nb):
    r = _run(['nbdev_test', '--path', f'nbs/{nb}', '--flags', FLAGS])
    assert r.returncode == 0, f'nbdev_test failed on {nb}:\n{r.stdout[-6000:]}\n{r.stderr[-6000:]}'


# Experiment notebooks run in two lanes at once, each kernel with one intra-op thread. On the 2-core CI machine a
# ResNet-18 step takes 0.37 s with 2 threads, 0.56 s with 1 alone (benchmarks/bench_lanes.py) and 0.62 s in each of
# two busy lanes, so two lanes do about 1.2x the work of one notebook at a time. Notebooks that share trained models sit in one lane, so the cache
# never trains a model twice, except where AFTER makes a notebook in the other lane wait for the one that trains its
# models (27 uses 20's old and new models; it sits in the shorter lane, which reaches it long after 20 has finished).
# Notebooks that read the others' records (the claims) run after both lanes.
LANES = (('20_fastfill_imagenet', '21_fastfill_ablation', '26_fastfill_unseen', '24_fastfill_biased'),
         ('22_fastfill_places', '23_fastfill_vggface2', '27_fastfill_side_info'))
AFTER = {'27_fastfill_side_info': '20_fastfill_imagenet'}
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


def test_lanes_cover_every_notebook_once():
    lanes, last = lanes_for(experiments)
    flat = [n for lane in lanes for n in lane] + last
    assert sorted(flat) == sorted(experiments) and len(flat) == len(set(flat))
    lanes, last = lanes_for(['20_fastfill_imagenet.ipynb', '29_fastfill_claims.ipynb', '30_ract_new.ipynb'])
    assert lanes == [['20_fastfill_imagenet.ipynb'], ['30_ract_new.ipynb']] and last == ['29_fastfill_claims.ipynb']


def test_a_notebook_waits_for_the_one_that_trains_its_models(tmp_path):
    "27 (lane B) starts only once 20 (lane A) has finished, however fast lane B is."
    log = []
    class Fake(LaneRunner):
        def _execute(self, nb):
            log.append(('start', nb)); time.sleep(0.3 if nb.startswith('20') else 0); log.append(('end', nb))
            return subprocess.CompletedProcess([], 0, '', '')
    r = Fake(tmp_path, ['20_fastfill_imagenet.ipynb', '27_fastfill_side_info.ipynb'])
    assert r.result('27_fastfill_side_info.ipynb')[0].returncode == 0
    assert log.index(('end', '20_fastfill_imagenet.ipynb')) < log.index(('start', '27_fastfill_side_info.ipynb'))


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


@pytest.fixture(scope='module')
def runner(request, tmp_path_factory):
    "One results folder for the experiment notebooks selected in this session, run as `compatrepro reproduce` would (29_ reads the others')."
    chosen = [it.callspec.params['nb'] for it in request.session.items
              if getattr(it, 'originalname', None) == 'test_experiment_notebook_runs_with_defaults']
    from compatrepro.data import glyph_universe
    glyph_universe()   # made once here, not once per lane
    r = LaneRunner(tmp_path_factory.mktemp('results'), chosen)
    yield r
    r.stop()


@pytest.mark.parametrize('nb', experiments)
def test_experiment_notebook_runs_with_defaults(nb, runner):
    "papermill with the notebook's own defaults (tiny scale); results go to a temporary folder."
    r, seconds = runner.result(nb)
    print(f'{nb}: {seconds:.0f} s')
    assert r.returncode == 0, f'papermill failed on {nb}:\n{r.stderr[-8000:]}'
    records = runner.results_dir/'tiny'/'records'/f'{Path(nb).stem}.seed0.csv'
    assert records.exists(), f'{nb} ran but wrote no result records ({records})'


def test_notebooks_and_package_agree(tmp_path):
    "nbdev_export from the notebooks reproduces compatrepro/ exactly (the package is never hand-edited)."
    before = {p.name: p.read_bytes() for p in (ROOT/'compatrepro').glob('*.py')}
    r = _run(['nbdev_export'])
    assert r.returncode == 0, r.stderr
    after = {p.name: p.read_bytes() for p in (ROOT/'compatrepro').glob('*.py')}
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    assert not changed, f'nbdev_export changed {changed}: export the notebooks and commit the modules'
