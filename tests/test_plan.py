"""`compatrepro reproduce --plan` on the committed results (`14_runs`): a seed never run is estimated from the other
seeds' recorded costs, runs all current still say what running them again costs from an empty cache, and the plan
reads the repository's runs from any working folder."""
import contextlib, io, json, re
from pathlib import Path

import numpy as np
import pytest

from compatrepro.cli import main
from compatrepro.runs import experiment_notebooks, run_outcome, run_state
from compatrepro.ledger import own_seconds, paper_factors, pending_runs
from compatrepro.report import paper_of_notebook

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT/'results'/'tiny'
WHERE = ['--out', str(ROOT/'results'), '--nbs', str(ROOT/'nbs')]


def _plan(*args) -> str:
    "What `compatrepro reproduce --plan ARGS` prints."
    out = io.StringIO()
    with contextlib.redirect_stdout(out): assert main(['reproduce', '--plan', *args]) == 0
    return out.getvalue()


def _runs(nb: str) -> dict[int, dict]:
    "seed -> provenance of the finished runs of `nb`, those on today's code (not in the re-run ledger) if any."
    every = {p['seed']: p for p in (json.loads(f.read_text()) for f in TINY.glob(f'runs/{nb}.seed*.json'))
             if p.get('finished') and p.get('duration') is not None}
    listed = pending_runs(TINY)
    return {s: p for s, p in every.items() if (nb, s) not in listed} or every


def _cost_s(prov: dict, scale: dict|None = None) -> float:
    """A run's cost from an empty cache: its own seconds and the making of every artifact it used, each part times
    `scale` of it ('own', or the artifact's kind), where given."""
    scale = scale or {}
    return own_seconds(prov)*scale.get('own', 1.) + sum((v or 0.)*scale.get(a.split('/')[0], 1.)
                                                         for a, v in (prov.get('artifacts') or {}).items())


def _total(text: str, label: str) -> float:
    "The hours of one thread a plan prints after `label` ('from an empty cache', 'with the cache here')."
    return float(re.search(rf'^  {label}: (?:at least )?([\d.]+) of one thread', text, re.M).group(1))


@pytest.mark.parametrize('nb', ['30_bct_ijbc', '21_fastfill_ablation'])
def test_a_seed_never_run_costs_the_mean_of_the_others(nb):
    runs = _runs(nb)
    assert runs, f'{nb} has no finished run recorded'
    unseen = max(runs) + 5
    text = _plan('--only', f'^{nb}$', '--seeds', str(unseen), *WHERE)
    row = re.search(rf'^\s*{nb}\s+{unseen}\s+([\d.]+)\s+([\d.]+)\s+(.+)$', text, re.M)
    assert row, text
    here, empty, basis = float(row.group(1)), float(row.group(2)), row.group(3)
    # runs on older code whose versions changed: as the re-runs so far cost over theirs (the paper's own where it has
    # enough of them)
    factors = paper_factors(TINY, paper_of_notebook(f'{nb}.ipynb'))
    scale = factors[0] if factors and 'scaled as' in basis else None
    want = np.mean([_cost_s(p, scale) for p in runs.values()])/60
    # a new seed makes its own models, whatever the cache holds: the same with it and from an empty one
    assert want > 0 and abs(here - want) <= 0.051 and abs(empty - want) <= 0.051, (here, empty, want)
    seeds = sorted(runs)
    in_a_row = len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1))
    said = f'{seeds[0]}-{seeds[-1]}' if in_a_row else ' '.join(map(str, seeds))
    want_basis = f'estimated from seed {said}' if len(seeds) == 1 else f'estimated from seeds {said} (their mean)'
    assert basis.startswith(want_basis), basis
    assert 'never ran' not in text and abs(_total(text, 'from an empty cache') - want/60) <= 0.051, text


def test_runs_all_current_still_cost_their_rerun_from_an_empty_cache(tmp_path):
    """On a copy of the committed tiny runs stamped current (they may all be pending a re-run): a plan of runs all
    current says that nothing is to run, and what running them again would cost from an empty cache."""
    from _doubles import scratch_repo
    tiny, nbs = scratch_repo(tmp_path)/'results'/'tiny', tmp_path/'nbs'
    current = [nb.stem for nb in experiment_notebooks(nbs)
               if run_state(tiny, nb.stem, 0, nbs)[0] == 'current' and run_outcome(tiny, nb.stem, 0) is True]
    assert current, 'no notebook has a finished seed 0 in the committed results'
    provs = [json.loads((tiny/'runs'/f'{nb}.seed0.json').read_text()) for nb in current]
    # each model is made once for the seed, at the time the first run that used it recorded, as the plan charges it
    # (runs of other days record the same model's making from their own cache)
    made = {}
    for p in provs:
        for k, v in (p.get('artifacts') or {}).items():
            made.setdefault(k, v)
    want = (sum(own_seconds(p) for p in provs) + sum(v or 0. for v in made.values()))/3600
    text = _plan('--only', *(f'^{nb}$' for nb in current), '--seeds', '0', '--out', str(tmp_path/'results'),
                 '--nbs', str(nbs))
    assert text.startswith(f'Nothing to run: the {len(current)} run(s) chosen (seed 0 of '), text
    empty, here = _total(text, 'from an empty cache'), _total(text, 'with the cache here')
    assert empty > 0 and abs(empty - want) <= 0.051 and here <= empty, (empty, here, want, text)


def test_the_plan_reads_the_repository_runs_from_any_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)          # no results/ here: every run would be made, estimated from the repository's
    text = _plan('--only', '^30_bct_ijbc$', '--seeds', '0')
    assert 'never ran' not in text and f'estimated from the runs recorded under {TINY}' in text, text
    assert f'The runs would write under {tmp_path/"results"/"tiny"}, which holds no run yet' in text, text
    assert _total(text, 'from an empty cache') > 0, text


def test_a_plan_carries_recorded_times_to_this_machine(tmp_path):
    """A run that recorded its machine's yardstick (1 s) is planned at three times its time on a machine whose
    yardstick is 3 s, and at its own time within the yardstick's scatter (1.2 s); a run that recorded none keeps its
    time and, recorded on another CPU than this one (`this_cpu`), is named in the plan as that machine's. Without this
    machine's yardstick nothing is scaled; without its name nothing is named."""
    from compatrepro.ledger import MACHINE_SCATTER, plan_runs
    from compatrepro.runs import print_plan
    assert 1.2 < MACHINE_SCATTER < 3
    (tmp_path/'runs').mkdir()
    def run(stem, **kw):
        prov = dict(notebook=f'{stem}.ipynb', seed=0, finished=True, duration=600., artifacts={'backbone/k': 300.},
                    made={'backbone/k': 300.}) | kw
        (tmp_path/'runs'/f'{stem}.seed0.json').write_text(json.dumps(prov))
    run('20_a', runner=dict(threads=1, machine_seconds=1.), cpu='This CPU', cpu_capability='AVX2')
    run('21_b', runner=dict(threads=1), cpu='Other CPU', cpu_capability='AVX512')
    runs = [('20_a', 0), ('21_b', 0)]
    here = 'Yet another CPU (AVX2)'
    plain = plan_runs(tmp_path, runs, empty_cache=True)
    slow, near = (plan_runs(tmp_path, runs, empty_cache=True, machine=m, this_cpu=here) for m in (3., 1.2))
    assert plain.minutes[0] == pytest.approx(10.) and (plain.other_machine == '').all()
    assert slow.minutes[0] == pytest.approx(30.) and 'x3.00 for this machine' in slow.basis[0]
    assert slow.minutes[1] == pytest.approx(plain.minutes[1]) and slow.other_machine[1] == 'Other CPU (AVX512)'
    assert slow.other_machine[0] == '' and near.minutes[0] == pytest.approx(10.)
    assert 'for this machine' not in near.basis[0]
    assert near.other_machine[0] == ''   # it recorded a yardstick: not named, on whatever CPU
    out = io.StringIO()
    with contextlib.redirect_stdout(out): print_plan(tmp_path, runs, 1, machine=3., this_cpu=here)
    assert 'recorded on Other CPU (AVX512)' in out.getvalue() and f', on this machine ({here})' in out.getvalue()
    from compatrepro.runs import _yardsticks   # a plan measures this machine only where a run has a yardstick
    assert _yardsticks(tmp_path)
    (tmp_path/'runs'/'20_a.seed0.json').unlink()
    assert not _yardsticks(tmp_path)
    run('20_a', runner=dict(threads=1, machine_seconds=1.), cpu='This CPU', cpu_capability='AVX2')
    same = plan_runs(tmp_path, runs, empty_cache=True, this_cpu='Other CPU (AVX512)')   # no yardstick here: none
    assert same.minutes[0] == pytest.approx(10.) and same.other_machine[1] == '' and same.other_machine[0] != ''


def test_a_finished_run_records_its_machine_yardstick(tmp_path):
    "The runner writes the yardstick it measured into the run's provenance, beside its threads; without one, none."
    from types import SimpleNamespace
    from compatrepro.runs import _mark_finished
    (tmp_path/'runs').mkdir()
    for machine in (0.25, None):
        (tmp_path/'runs'/'20_a.seed0.json').write_text(json.dumps(dict(seed=0)))
        job = SimpleNamespace(nb=Path('20_a.ipynb'), ok=True, seconds=12.34, threads=1)
        _mark_finished(tmp_path, job, 0, machine=machine)
        prov = json.loads((tmp_path/'runs'/'20_a.seed0.json').read_text())
        assert prov['finished'] and prov['duration'] == 12.3
        assert prov['runner'] == (dict(threads=1, machine_seconds=0.25) if machine else dict(threads=1))


def test_the_yardstick_is_measured_in_a_child_process():
    "On a CPU, a positive time of a few steps (and this process loads no torch for it); for a GPU run, none."
    import sys
    from compatrepro.ledger import machine_seconds_here
    had_torch = 'torch' in sys.modules
    s = machine_seconds_here('cpu')
    assert s is not None and 0 < s < 60, s
    assert machine_seconds_here('cuda') is None
    assert ('torch' in sys.modules) == had_torch
