"""The recipe screens (benchmarks/standin_regime.py with its doubling test, benchmarks/rm_epochs_ladder.py) still run on
the library as it is, at smoke scale on a scratch cache; the committed CSVs they made at tiny scale are whole and agree
with themselves (each doubling's difference, verdict and rung), so that docs/standin_regime.md reads what was measured."""

import os, subprocess, sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parent.parent
SCREENS = sorted((ROOT / 'benchmarks' / 'recipe_screen').glob('*.csv'))
LADDER = ROOT / 'benchmarks' / 'rm_epochs_ladder.csv'
sys.path.insert(0, str(ROOT / 'benchmarks'))


def run_script(name: str, tmp_path: Path, *args: str) -> pd.DataFrame:
    "Run benchmarks/<name>.py on seed 0 with a scratch cache and read the CSV it writes."
    out = tmp_path / f'{name}.csv'
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get('PYTHONPATH', ''),
               COMPATREPRO_PROGRESS='0', COMPATREPRO_CACHE=str(tmp_path / 'cache'))
    cmd = [sys.executable, str(ROOT / 'benchmarks' / f'{name}.py'), '--seeds', '0', '--out', str(out), *args]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT / 'benchmarks', timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    return pd.read_csv(out)


def screen_rows_ok(d: pd.DataFrame):
    "Old and new (and any other model) at the schedule E and at 2E, each new model against the old at E, the verdicts."
    from standin_regime import doubling_table, verdicts

    for (cand, seed, pair), g in d.groupby(['candidate', 'seed', 'pair']):
        E = g.epochs.min()
        selves = {m for m in g.model if m.split('/')[0] == m.split('/')[1]}
        assert {'old/old', 'new/new'} <= selves, f"{cand} seed {seed} {pair}: trained only {sorted(selves)}"
        for m in selves:
            got = set(g[g.model == m].epochs)
            assert got == {E, 2*E}, f"{cand} seed {seed} {pair}: {m} trained at {sorted(got)}, not at {E} and {2*E}"
        crosses = {f"{m.split('/')[0]}/old" for m in selves} - {'old/old'}
        assert crosses <= set(g[g.epochs == E].model), f"{cand} seed {seed}: cross-model rows missing"
    v = pd.DataFrame(verdicts(d))
    assert v.converged.notna().all() and v.doubling_gain.notna().all()
    assert 'nan' not in doubling_table_of(d, doubling_table)


def doubling_table_of(d: pd.DataFrame, table) -> str:
    "`table` (standin_regime's doubling table) of a data frame, through a scratch CSV as the script reads it."
    import tempfile

    with tempfile.NamedTemporaryFile('w', suffix='.csv', delete=False) as fh:
        d.to_csv(fh, index=False)
    try:
        return table([fh.name])
    finally:
        os.unlink(fh.name)


def ladder_rows_ok(d: pd.DataFrame, tol: float):
    "Each rung's difference and verdict follow from its values; a rung's 2n is the next rung's n, from the cache."
    assert ((d.at_2n - d.at_n - d.difference).abs() <= 2e-3).all()
    assert (d.converged == (d.difference.abs() <= tol)).all()
    for (seed, dataset, metric), g in d.groupby(['seed', 'dataset', 'metric']):
        g = g.set_index('epochs')
        for n in g.index:
            if 2*n in g.index:
                assert abs(g.at_2n[n] - g.at_n[2*n]) <= 1e-3, f"{dataset} seed {seed} {metric}: {2*n} epochs twice, unequal"


def test_standin_regime_screen_runs(tmp_path):
    d = run_script('standin_regime', tmp_path, '--smoke', '--pairs', 'imagenet', '--models', 'old', 'new', 'BCT',
                   '--double', '--nesterov', '--label-smoothing', '0.2', '--epochs', '1', '--warmup-epochs', '0')
    screen_rows_ok(d)
    assert d.recipe.str.contains('"nesterov": true').all() and d.recipe.str.contains('"label_smoothing": 0.2').all()


def test_rm_epochs_ladder_runs(tmp_path):
    from compatrepro.rm import RM_CONVERGENCE_TOL

    d = run_script('rm_epochs_ladder', tmp_path, '--scale', 'smoke', '--datasets', 'Market-1501', '--epochs', '1', '2')
    assert len(d) == 4 and set(d.epochs) == {1, 2} and set(d.metric) == {'AUC_top1', 'AUC_mAP'}
    ladder_rows_ok(d, RM_CONVERGENCE_TOL)


@pytest.mark.parametrize('path', SCREENS, ids=[p.stem for p in SCREENS])
def test_committed_screens_are_whole(path):
    screen_rows_ok(pd.read_csv(path))


def test_committed_rm_ladder_is_consistent():
    from compatrepro.rm import RM_CONVERGENCE_TOL

    d = pd.read_csv(LADDER)
    assert {0} <= set(d.seed) and {25, 50, 100} <= set(d.epochs)
    ladder_rows_ok(d, RM_CONVERGENCE_TOL)


def docs_block(name: str) -> str:
    "The generated table between `<!-- name -->` and `<!-- /name -->` in docs/standin_regime.md."
    text = (ROOT / 'docs' / 'standin_regime.md').read_text(encoding='utf-8')
    start, end = f'<!-- {name} -->\n', f'<!-- /{name} -->'
    assert start in text and end in text, f"docs/standin_regime.md has no {name!r} block"
    return text.split(start, 1)[1].split(end, 1)[0].strip()


def test_docs_show_the_committed_screens():
    "The docs' tables are the scripts' own summaries of the committed CSVs, not numbers typed by hand."
    import rm_epochs_ladder
    from standin_regime import doubling_table

    assert docs_block('recipe screen') == doubling_table([str(p) for p in SCREENS]).strip()
    assert docs_block('rm ladder') == rm_epochs_ladder.summary(LADDER).strip()
