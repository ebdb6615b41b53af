"""The re-run ledger (`results/<scale>/pending.csv`, `14_runs`): a change lands before its re-runs by listing them.

- On a scratch copy of the package, the notebooks and the committed tiny results (stamped current), a training change
  (FCT's loss, with the version bump the artifact fingerprints ask for) makes `compatrepro status --check` fail on
  exactly the runs that reach it; `compatrepro pending --declare` lists
  exactly those, and the check passes; taking a row off the ledger fails it again, and so does a row for a current run.
- On throw-away notebooks, `reproduce --pending --only NB --seeds 0` re-runs that seed alone, takes it off the ledger
  and leaves the others listed, with the item stale and the ledger's reason until the last seed is current;
  `--plan` estimates each run before anything runs; a run that stops before its end stays listed."""
import contextlib, io, json, os, re, shutil, subprocess, sys
from pathlib import Path

import nbformat
import pandas as pd

from compatrepro.cli import main
from compatrepro.runs import check_results, reproduce, status_table
from compatrepro.ledger import pending_path, read_pending, rerun_factors

sys.path.insert(0, str(Path(__file__).parent))
from _doubles import scratch_repo   # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT/'results'/'tiny'


def _scratch(tmp: Path) -> Path: return scratch_repo(tmp)


def _cli(root: Path, *args) -> subprocess.CompletedProcess:
    "`python -m compatrepro ARGS` with the scratch copy's package."
    return subprocess.run([sys.executable, '-m', 'compatrepro', *args], cwd=root, capture_output=True, text=True,
                          env=os.environ | {'PYTHONPATH': str(root)})


def _problem_runs(r: subprocess.CompletedProcess) -> set[tuple[str, int]]:
    return {(m.group(1), int(m.group(2))) for m in re.finditer(r'^\s*- (\S+) seed (\d+) is (?:stale|missing)', r.stdout, re.M)}


def _listed(root: Path) -> set[tuple[str, int]]:
    return {(r.notebook, s) for r in read_pending(root/'results'/'tiny').itertuples() for s in r.seeds}


def test_a_training_change_lands_with_exactly_its_runs_in_the_ledger(tmp_path):
    root = _scratch(tmp_path)
    assert _listed(root) == set() and _cli(root, 'status', '--check').returncode == 0, 'the copy starts current, with no ledger'
    runs = list((root/'results'/'tiny'/'runs').glob('*.json'))
    bumped = {f'objective:{o}' for o in ('l2', 'l2+disc', 'l2+uncert', 'l2+disc+uncert')}    # every objective with the l2 term
    reach = {(p['notebook'], p['seed']) for p in (json.loads(f.read_text()) for f in runs)
             if {'fct_l2_loss', 'OBJECTIVE_VERSIONS'} & set(p.get('library', {})) or bumped & set(p.get('versions', {}))}
    assert reach and len(reach) < len(runs), 'fct_l2_loss should be reached by some runs (FastFill and RM train with it), not all'

    losses, specs = root/'compatrepro'/'losses.py', root/'compatrepro'/'specs.py'
    s = losses.read_text(); old = "return _reduce(sq.sum(1) if dims == 'sum' else sq.mean(1), reduction, fn)"
    assert s.count(old) == 1
    losses.write_text(s.replace(old, "return _reduce((sq.sum(1) if dims == 'sum' else sq.mean(1)) * 2, reduction, fn)"))
    t = specs.read_text(); old_v = "OBJECTIVE_VERSIONS = {}"                           # the bump the fingerprints ask for
    assert t.count(old_v) == 1
    specs.write_text(t.replace(old_v, "OBJECTIVE_VERSIONS = {o: 2 for o in ('l2', 'l2+disc', 'l2+uncert', 'l2+disc+uncert')}"))
    r = _cli(root, 'status', '--check')
    assert r.returncode == 1 and _problem_runs(r) == reach, r.stdout[-3000:]

    r = _cli(root, 'pending', '--declare', "FCT's l2 loss doubled", '--commit', 'abcdef1')
    assert r.returncode == 0, r.stdout + r.stderr
    assert _listed(root) == reach
    assert _cli(root, 'status', '--check').returncode == 0
    table = _cli(root, 'status').stdout
    assert "re-run pending since abcdef1: FCT's l2 loss doubled" in table, table[-2000:]

    ledger = read_pending(root/'results'/'tiny')
    nb = sorted(reach)[0][0]
    ledger[ledger.notebook != nb].assign(seeds=lambda d: d.seeds.map(lambda s: ' '.join(map(str, s)))) \
        .to_csv(pending_path(root/'results'/'tiny'), index=False)                  # a row taken off: its runs fail again
    r = _cli(root, 'status', '--check')
    assert r.returncode == 1 and {n for n, _ in _problem_runs(r)} == {nb}, r.stdout[-3000:]

    losses.write_text(s); specs.write_text(t)                                      # the change undone: listed runs current
    r = _cli(root, 'status', '--check')
    assert r.returncode == 1 and 'which is current: take it off' in r.stdout, r.stdout[-3000:]


def _nb(code: str) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell('seed, scale, data_root, device, out_dir = 0, "tiny", None, "auto", None',
                                           metadata={'tags': ['parameters']}),
                nbformat.v4.new_code_cell('from compatrepro.experiments import start_experiment\nP, book, DATASET, WHERE = start_experiment(globals())'),
                nbformat.v4.new_code_cell(code)]
    nb.metadata['kernelspec'] = {'name': 'python3', 'display_name': 'Python 3', 'language': 'python'}
    return nb


def test_pending_reruns_land_seed_by_seed(tmp_path, monkeypatch):
    d = tmp_path; (d/'nbs').mkdir(); (d/'docs').mkdir()
    for f in ('paper_items.csv', 'claims.csv', 'differing_verdicts.csv', 'shared_reasons.csv'): shutil.copy(ROOT/'docs'/f, d/'docs')
    code = "book.add('Table 1', 'FCT', 'top1~', 50 + P.seed, dataset='Glyphs stand-in for ImageNet-1k')"
    nbformat.write(_nb(code), d/'nbs'/'20_one.ipynb')
    res, args = d/'results'/'tiny', ('tiny', d/'results', d/'nbs')
    monkeypatch.setenv('COMPATREPRO_CACHE', str(d/'cache'))
    st = reproduce(seeds=[0, 1], nbs=d/'nbs', out=d/'results', jobs=2, threads=1, show=False)
    assert not any(st.values()), st
    assert check_results(*args, min_seeds=2) == []

    nbformat.write(_nb(code + '\nedited = 1'), d/'nbs'/'20_one.ipynb')                # the change: both seeds stale
    assert len(check_results(*args, min_seeds=2)) == 3     # each stale seed, and too few current seeds
    assert main(['pending', '--declare', 'the notebook changed', '--commit', 'abcdef1', '--min-seeds', '2',
                 '--results', str(d/'results'), '--nbs', str(d/'nbs')]) == 0
    assert read_pending(res).seeds.tolist() == [(0, 1)] and check_results(*args, min_seeds=2) == []

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(['reproduce', '--pending', '--plan', '--out', str(d/'results'), '--nbs', str(d/'nbs')]) == 0
    plan = out.getvalue()
    assert re.search(r'20_one\s+0\s', plan) and re.search(r'20_one\s+1\s', plan) and '2 run(s)' in plan, plan
    assert (res/'runs'/'20_one.seed0.json').read_text().count('edited') == 0     # --plan ran nothing
    out = io.StringIO()      # a new results folder (the README's first command) is planned from the runs it is compared with
    with contextlib.redirect_stdout(out):
        assert main(['reproduce', '--plan', '--out', str(d/'fresh'), '--compare-with', str(d/'results'), '--nbs', str(d/'nbs')]) == 0
    plan = out.getvalue()
    assert 'never ran' not in plan and f"estimated from the runs recorded under {res}" in plan, plan
    assert not (d/'fresh'/'tiny'/'runs').exists() or not list((d/'fresh'/'tiny'/'runs').iterdir())   # --plan ran nothing

    st = reproduce(seeds=[0], only=['20_one'], nbs=d/'nbs', out=d/'results', threads=1, show=False, pending=True)
    assert list(st) == [('20_one', 0)] and st[('20_one', 0)] is None, st
    assert read_pending(res).seeds.tolist() == [(1,)]                               # seed 0 landed, seed 1 still listed
    prov = json.loads((res/'runs'/'20_one.seed0.json').read_text())     # and keeps what the run it replaced cost
    assert prov['replaced_cost']['own'] > 0 and rerun_factors(res)[1] == 1, prov
    assert check_results(*args, min_seeds=2) == []
    row = status_table(*args).set_index(['paper', 'item']).loc[('FastFill', 'Table 1')]
    assert row.status == 'stale' and 'seed 1: re-run pending since abcdef1: the notebook changed' in row.reasons, row.reasons

    st = reproduce(nbs=d/'nbs', out=d/'results', threads=1, show=False, pending=True, seeds=None)
    assert list(st) == [('20_one', 1)] and st[('20_one', 1)] is None, st
    assert read_pending(res).empty and check_results(*args, min_seeds=2) == []
    assert status_table(*args).set_index(['paper', 'item']).loc[('FastFill', 'Table 1'), 'status'] == 'runs'

    # a run that stops before its end (here on an error; a killed one alike) has written records of today's code: it
    # is listed as it starts, and stays listed until a re-run finishes
    nbformat.write(_nb(code + '\nedited = 1\nbook.save()\nraise RuntimeError("stopped")'), d/'nbs'/'20_one.ipynb')
    git = ['git', '-c', 'user.name=t', '-c', 'user.email=t@t', '-c', 'commit.gpgsign=false']
    for c in (['init', '-q'], ['add', '-A'], ['commit', '-qm', 'the notebook that stops']):   # the ledger names a commit
        subprocess.run(git + c, cwd=d, check=True, capture_output=True)
    st = reproduce(seeds=[0], nbs=d/'nbs', out=d/'results', threads=1, show=False)
    assert st[('20_one', 0)], st
    ledger = read_pending(res)
    assert ledger.seeds.tolist() == [(0,)] and 'not yet finished' in ledger.reason[0], ledger
    assert not [p for p in check_results(*args, min_seeds=2) if '20_one seed 0' in p]   # listed: accepted as pending
    nbformat.write(_nb(code + '\nedited = 1'), d/'nbs'/'20_one.ipynb')               # back to what made seed 1
    st = reproduce(seeds=[0], nbs=d/'nbs', out=d/'results', threads=1, show=False, pending=True)
    assert st == {('20_one', 0): None} and read_pending(res).empty, (st, read_pending(res))
    assert check_results(*args, min_seeds=2) == []
