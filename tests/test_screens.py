"""The recipe screens (benchmarks/standin_regime.py with its doubling test, benchmarks/rm_epochs_ladder.py) still run on
the library as it is, at smoke scale on the scripts' cache of the session (`tests/_script_caches.py`; each screen of
standin_regime.py on a cache of its own); the committed CSVs they made at tiny scale are whole and agree with
themselves (each doubling's difference, verdict and rung), the convergence table measures the notebooks' own models
and every model they train is in it or named with the reason it is not, and the docs' tables are what they give."""

import json, os, subprocess, sys
from pathlib import Path

import pandas as pd
import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
SCREENS = sorted((ROOT / 'benchmarks' / 'recipe_screen').glob('*.csv'))
LADDER = ROOT / 'benchmarks' / 'rm_epochs_ladder.csv'
CONVERGENCE = sorted((ROOT / 'benchmarks' / 'convergence').glob('*.csv'))
sys.path.insert(0, str(ROOT / 'benchmarks'))
from _script_caches import seed_script_caches, shared_cache  # noqa: E402


def run_script(name: str, tmp_path: Path, *args: str) -> Path:
    "Run benchmarks/<name>.py on seed 0 with the scripts' shared cache; the CSV it writes."
    out = tmp_path / f'{name}.csv'
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get('PYTHONPATH', ''),
               COMPATREPRO_PROGRESS='0', COMPATREPRO_CACHE=str(shared_cache()))
    cmd = [sys.executable, str(ROOT / 'benchmarks' / f'{name}.py'), '--seeds', '0', '--out', str(out), *args]
    # standin_regime's default cache is beside its --out: a candidate's knobs are not all in the cache key
    seed_script_caches(name, args, out.with_suffix('.cache'))
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT / 'benchmarks', timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    return out


def screen_rows_ok(path: Path) -> pd.DataFrame:
    "Old and new (and any other model) at the schedule E and at 2E, each new model against the old at E, the verdicts."
    from standin_regime import doubling_table, verdicts

    d = pd.read_csv(path)
    for (cand, seed, pair), g in d.groupby(['candidate', 'seed', 'pair']):
        E = g.epochs.min()
        selves = {m for m in g.model if m.split('/')[0] == m.split('/')[1]}
        # the old model, or (a screen of compatible models only: `--models BCT`) each against the old model
        assert 'old/old' in selves or (selves and all(m.split('/')[0] not in ('old', 'new') for m in selves)), \
            f"{cand} seed {seed} {pair}: trained only {sorted(selves)}"
        for m in selves:
            got = set(g[g.model == m].epochs)
            assert got == {E, 2*E}, f"{cand} seed {seed} {pair}: {m} trained at {sorted(got)}, not at {E} and {2*E}"
        crosses = {f"{m.split('/')[0]}/old" for m in selves} - {'old/old'}
        assert crosses <= set(g[g.epochs == E].model), f"{cand} seed {seed}: cross-model rows missing"
    v = pd.DataFrame(verdicts(d))
    assert v.converged.notna().all() and v.doubling_gain.notna().all()
    assert 'nan' not in doubling_table([path])
    return d


def ladder_rows_ok(d: pd.DataFrame, tol: float):
    "Each rung's difference and verdict follow from its values; a rung's 2n is the next rung's n, from the cache."
    assert ((d.at_2n - d.at_n - d.difference).abs() <= 2e-3).all()
    assert (d.converged == (d.difference.abs() < tol)).all()   # doubling_check's verdict
    for (seed, dataset, metric), g in d.groupby(['seed', 'dataset', 'metric']):
        g = g.set_index('epochs')
        for n in g.index:
            if 2*n in g.index:
                assert abs(g.at_2n[n] - g.at_n[2*n]) <= 1e-3, f"{dataset} seed {seed} {metric}: {2*n} epochs twice, unequal"


def test_standin_regime_screen_runs(tmp_path):
    args = ['--smoke', '--pairs', 'imagenet', '--models', 'old', 'new', 'BCT', 'FCT', '--double', '--nesterov',
            '--label-smoothing', '0.2', '--epochs', '1', '--warmup-epochs', '0']
    d = screen_rows_ok(run_script('standin_regime', tmp_path, *args))
    assert d.recipe.str.contains('"nesterov": true').all() and d.recipe.str.contains('"label_smoothing": 0.2').all()
    convergence_rows_ok(d)
    q, g = d.model.str.split('/').str[0], d.model.str.split('/').str[1]
    assert d[q == g].artifact.str.startswith('backbone/').all()        # each row names the model it measured
    assert d[g.str.endswith('(old)')].artifact.str.startswith('transformation/').all()


def test_standin_regime_runs_a_transformation_alone(tmp_path):
    """A transformation doubled on its own (the convergence table is measured model by model) ends without the lever
    table, which reads backbones, and writes its two rows."""
    args = ['--smoke', '--pairs', 'imagenet', '--models', 'FCT', '--double', '--epochs', '1', '--warmup-epochs', '0']
    d = pd.read_csv(run_script('standin_regime', tmp_path, *args))   # a screen's checks ask for old and new rows
    assert list(d.model) == ['new/FCT(old)'] * 2 and d.artifact.str.startswith('transformation/').all()


def test_old_seen_unseen_splits_the_screens_models(tmp_path):
    """The probe rebuilds the screen's models from its CSV's recipe and knobs and finds them in its cache (it trains
    nothing); its 'all' rows are the screen's own numbers, and the two halves' queries add up to them."""
    args = ['--smoke', '--pairs', 'imagenet', '--models', 'old', 'new', '--double', '--epochs', '1', '--warmup-epochs',
            '0', '--width', '4', '--clutter', '2', '--cache', str(tmp_path / 'cache')]
    screen = run_script('standin_regime', tmp_path, *args)
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get('PYTHONPATH', ''))
    out = tmp_path / 'halves.csv'
    r = subprocess.run([sys.executable, str(ROOT / 'benchmarks' / 'old_seen_unseen.py'), str(screen), '--smoke',
                        '--cache', str(tmp_path / 'cache'), '--out', str(out)],
                       capture_output=True, text=True, env=env, cwd=ROOT / 'benchmarks', timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    assert 'training' not in r.stderr
    h, s = pd.read_csv(out), pd.read_csv(screen)
    for x in h[h.classes == 'all'].itertuples():
        y = s[(s.model == x.model) & (s.epochs == x.epochs)].iloc[0]
        assert (x.top1, x.mAP) == pytest.approx((y.top1, y.mAP), abs=0.011)
    n = h.pivot_table(index=['model', 'epochs'], columns='classes', values='queries')
    assert (n.seen + n.unseen == n['all']).all() and (n.seen > 0).all() and (n.unseen > 0).all()


@pytest.mark.parametrize('lever', [['--ema', '0.9'], ['--lookahead', '2'], ['--whitened-stem']])
def test_speedrun_levers_run_in_the_screen(tmp_path, lever):
    args = ['--smoke', '--pairs', 'imagenet', '--models', 'old', 'new', '--double', '--epochs', '1', '--warmup-epochs', '0',
            *lever]
    d = screen_rows_ok(run_script('standin_regime', tmp_path, *args))
    assert d.recipe.str.contains(f'"{lever[0][2:].replace("-", "_")}": ').all()


@pytest.fixture
def levers(monkeypatch):
    "benchmarks/speedrun_levers.py, with the trainer it patches restored after the test"
    from compatrepro import train
    import speedrun_levers
    for name in ('_make_optimizer', 'initial_model'):
        monkeypatch.setattr(train, name, getattr(train, name))
    return speedrun_levers, train


def _plain_sgd():
    from types import SimpleNamespace
    return SimpleNamespace(optimizer='sgd', base_lr=1., momentum=0., weight_decay=0.)


def test_lookahead_by_hand(levers):
    L, train = levers
    p = torch.nn.Parameter(torch.zeros(1))
    L.lookahead(k=2, alpha=0.5)
    opt = train._make_optimizer(_plain_sgd(), [p])
    # the gradient is 1: fast 0 -> -1 -> -2, then slow 0 + 0.5*(-2 - 0) = -1 and fast restarts there; -2 -> -3, slow
    # -1 + 0.5*(-3 - -1) = -2
    for expected in (-1., -1., -2., -2.):
        p.grad = torch.ones(1); opt.step()
        assert p.item() == expected


def test_ema_by_hand(levers):
    L, train = levers
    model = torch.nn.Linear(1, 1, bias=False)
    with torch.no_grad(): model.weight.fill_(0.)
    L.ema(0.5)
    L._made[:] = [model]   # as initial_model() leaves it for the optimiser made next
    opt = train._make_optimizer(_plain_sgd(), list(model.parameters()))
    for _ in range(2):   # weights 0 -> -1 -> -2; their average 0 -> -0.5 -> -1.25
        model.weight.grad = torch.ones(1, 1); opt.step()
    assert model.weight.item() == -2.
    model.eval()
    assert model.weight.item() == -1.25


def test_whitening_filters_decorrelate_patches(levers):
    L, _ = levers
    x = torch.randn(32, 3, 8, 8, generator=torch.Generator().manual_seed(0)) * torch.tensor([1., 2., 3.]).view(1, 3, 1, 1)
    w = L.whitening_filters(x, 3, 8, eps=0.)
    assert w.shape == (8, 3, 3, 3) and torch.equal(w[4:], -w[:4])
    y = torch.nn.functional.conv2d(x, w[:4]).permute(0, 2, 3, 1).reshape(-1, 4)
    assert torch.allclose(torch.cov(y.T, correction=0), torch.eye(4), atol=1e-3)


def test_simclr_screen_runs(tmp_path):
    import simclr_screen

    d = pd.read_csv(run_script('simclr_screen', tmp_path, '--scale', 'smoke', '--cache-root', str(tmp_path / 'variants')))
    assert sorted(d.variant) == sorted(simclr_screen.VARIANTS)   # the library's variant first
    assert d[['top1', 'mAP', 'untrained_top1', 'first_loss']].notna().all().all()
    # a variant of more epochs has the same first epoch (the warm-up is the spec's), not the same last one
    assert len(d[['first_loss', 'last_loss']].drop_duplicates()) == len(d), "every variant trains a model of its own"


def test_committed_simclr_screen_is_whole():
    import simclr_screen

    d = pd.read_csv(ROOT / 'benchmarks' / 'simclr_screen.csv')
    assert set(d.variant) == set(simclr_screen.VARIANTS)
    assert (d.groupby('variant').seed.apply(sorted).map(list) == [[0, 1, 2]]*d.variant.nunique()).all()
    assert d[['top1', 'mAP', 'untrained_top1', 'chance', 'first_loss', 'last_loss']].notna().all().all()
    same = d.groupby('seed')[['untrained_top1', 'chance']].nunique()
    assert (same == 1).all().all(), "every variant is judged against the same untrained network and chance"


def test_vit_screen_runs(tmp_path):
    import vit_screen

    d = pd.read_csv(run_script('vit_screen', tmp_path, '--scale', 'smoke', '--cache-root', str(tmp_path / 'variants')))
    assert set(d.variant) == set(vit_screen.VARIANTS) and d[['new_top1', 'old_top1', 'first_loss']].notna().all().all()
    assert len(set(zip(d.first_loss, d.last_loss))) == len(d), "every variant trains a model of its own"
    assert d.old_top1.nunique() == 1, "the old model is the recipe's in every variant"


def test_rm_epochs_ladder_runs(tmp_path):
    from compatrepro.rm import RM_CONVERGENCE_TOL

    d = pd.read_csv(run_script('rm_epochs_ladder', tmp_path, '--scale', 'smoke', '--datasets', 'Market-1501',
                               '--epochs', '1', '2'))
    assert len(d) == 4 and set(d.epochs) == {1, 2} and set(d.metric) == {'AUC_top1', 'AUC_mAP'}
    ladder_rows_ok(d, RM_CONVERGENCE_TOL)


def convergence_rows_ok(d: pd.DataFrame):
    """Every model trained at E is trained at 2E too (a transformation on its own schedule), and each compatible model is
    tested against the old model of E epochs at both."""
    for (seed, pair, model), g in d.groupby(['seed', 'pair', 'model']):
        q, gal = model.split('/')
        if q == gal or gal.endswith('(old)'):   # a self-test, or new queries against a transformed old gallery
            E = g.epochs.min()
            assert set(g.epochs) == {E, 2*E}, f"seed {seed} {pair}: {model} at {sorted(set(g.epochs))}"
            if q == gal and q not in ('old', 'new'):
                cross = d[(d.seed == seed) & (d.pair == pair) & (d.model == f'{q}/old')]
                assert set(cross.epochs) == {E, 2*E}, f"seed {seed} {pair}: {q}/old at {sorted(set(cross.epochs))}"


@pytest.mark.parametrize('path', CONVERGENCE, ids=[p.stem for p in CONVERGENCE])
def test_committed_convergence_is_whole(path):
    d = pd.read_csv(path)
    convergence_rows_ok(d)
    assert 'nan' not in doubling_table_of(path)


def doubling_table_of(path):
    from standin_regime import doubling_table
    return doubling_table([path])


def test_convergence_table_measures_the_notebooks_models():
    """The convergence table's models at E are the ones their notebook's tiny runs used (the same artifact: the same
    spec, the same cache key), on every seed it has of each pair (seed 0 at least); and every model those runs used
    is in the table or named in `unmeasured` with the reason. A run pending a re-run is compared once it is re-run."""
    from standin_regime import CONVERGENCE_MODELS, CONVERGENCE_NOTEBOOKS, pair_artifacts

    from compatrepro.ledger import pending_runs
    d = pd.concat([pd.read_csv(p) for p in CONVERGENCE], ignore_index=True)
    pending = pending_runs(ROOT / 'results' / 'tiny')
    for pair, nb in CONVERGENCE_NOTEBOOKS.items():
        seeds = sorted(set(d[d.pair == pair].seed))
        assert 0 in seeds, f"{pair}: the table has seeds {seeds}"
        for seed in seeds:
            models = CONVERGENCE_MODELS[pair]
            got = d[(d.pair == pair) & (d.seed == seed)]
            names = {g[:-len('(old)')] if g.endswith('(old)') else q for q, g in got.model.str.split('/')}
            assert set(models) <= names, f"{pair} seed {seed}: no rows for {sorted(set(models) - names)}"
            if (nb, seed) in pending: continue   # made by older code: its models' keys may differ from today's
            table, named = pair_artifacts(pair, seed)
            used = {k for k in json.loads((ROOT / 'results' / 'tiny' / 'runs' / f'{nb}.seed{seed}.json').read_text())['artifacts']
                    if k.split('/')[0] in ('backbone', 'transformation')}
            assert set(table.values()) <= used, f"{nb} seed {seed} used no {[k for k, v in table.items() if v not in used]}"
            assert used - set(table.values()) <= named, f"{nb} seed {seed}: models neither in the table nor named"


def test_convergence_rows_of_older_code_are_not_counted():
    """A convergence row measures today's model only if it names the artifact that today's code makes for it: the
    imagenet pair's models of seed 0 under today's names count (coverage and the table's recipe column), a model whose
    name changed does not (the pair's others still do), nor do rows with no names (written before the column was). The
    committed table's rows are labelled 'older code' exactly where their models are not today's."""
    from standin_regime import (CONVERGENCE_MODELS, doubling_table, measured_artifacts, measured_name, pair_artifacts,
                                todays_models, todays_pairs)
    table, named = pair_artifacts('imagenet', 0)
    rows = [dict(candidate='library', recipe='{}', knobs='{}', seed=0, pair='imagenet',
                 model=f'new/{m}(old)' if m in ('FCT', 'FastFill') else f'{m}/{m}', epochs=E,
                 top1=50., mAP=40., chance=0.8, train_images=0, train_seconds=1., cpu_seconds=1.,
                 artifact=table[m] if E == 10 else 'backbone/0') for m in CONVERGENCE_MODELS['imagenet'] for E in (10, 20)]
    d = pd.DataFrame(rows)
    every = {('imagenet', 0, m) for m in CONVERGENCE_MODELS['imagenet']}
    assert todays_pairs(d) == {('imagenet', 0)} and todays_models(d) == every
    changed = d.copy(); changed.loc[(changed.model == 'BCT/BCT') & (changed.epochs == 10), 'artifact'] = 'backbone/0'
    assert todays_pairs(changed) == set() and todays_pairs(d.drop(columns='artifact')) == set()
    assert todays_models(changed) == every - {('imagenet', 0, 'BCT')}   # the others count: a pair lands in parts
    not_doubled = d[(d.model != 'RACT/RACT') | (d.epochs == 10)]
    assert todays_models(not_doubled) == every - {('imagenet', 0, 'RACT')}
    assert measured_name('BCT/old') == 'BCT' and measured_name('new/FastFill(old)') == 'FastFill'
    committed = pd.concat([pd.read_csv(p).assign(named=lambda x: 'artifact' in x) for p in CONVERGENCE],
                          ignore_index=True)
    current = todays_models(committed[committed.named])
    lines = [l.split(' | ') for l in doubling_table([str(p) for p in CONVERGENCE], today=True).splitlines()[2:]]
    for pair in committed.pair.unique():
        mine = [l for l in lines if l[2].endswith(f'({pair})')]
        assert mine, pair
        for l in mine:
            model, seeds = l[2][:-len(f' ({pair})')], [int(x) for x in l[3].split(',')]
            today = all((pair, s, measured_name(model)) in current for s in seeds)
            assert ('older code' in l[1]) == (not today), l
    assert measured_artifacts([str(p) for p in CONVERGENCE]) == (
        {pair_artifacts(p, s)[0][m] for p, s, m in current}
        | set().union(*(pair_artifacts(p, s)[1] for p, s in todays_pairs(committed[committed.named]))))


def test_today_and_older_schedules_are_apart(tmp_path):
    """A pair re-measured on today's recipe for seed 0 (E=10, today's names) beside seeds 1 and 2 of an older recipe
    (E=5, no names): each model has one row per schedule with that schedule's seeds, and the two are two blocks of
    the convergence table, each with its own verdict (today's converged, the older not); `schedules` refuses the mix."""
    from standin_regime import CONVERGENCE_MODELS, by_schedule, doubling_table, pair_artifacts, schedules
    table, _ = pair_artifacts('imagenet', 0)
    row = dict(candidate='library', recipe='{}', knobs='{}', pair='imagenet', chance=0.8, train_images=0,
               train_seconds=1., cpu_seconds=1.)
    rows = [row | dict(seed=s, model=f'new/{m}(old)' if m in ('FCT', 'FastFill') else f'{m}/{m}', epochs=E,
                       top1=50. + (E == 2*E0) * (0.5 if s == 0 else 3.), mAP=40.,
                       artifact=table[m] if (s, E) == (0, 10) else 'backbone/2E' if s == 0 else '')
            for m in CONVERGENCE_MODELS['imagenet'] for s, E0 in ((0, 10), (1, 5), (2, 5)) for E in (E0, 2*E0)]
    d = pd.DataFrame(rows)
    groups = by_schedule(d[d.model == 'new/new'])
    assert [(E, sorted(a.index), sorted(b.index)) for E, a, b in groups] == [(5, [1, 2], [1, 2]), (10, [0], [0])]
    with pytest.raises(ValueError, match='mix the schedules'):
        schedules(d[d.model == 'new/new'])
    d.to_csv(tmp_path / 'mixed.csv', index=False)
    lines = doubling_table([str(tmp_path / 'mixed.csv')], today=True).splitlines()[2:]
    n = len(CONVERGENCE_MODELS['imagenet'])
    today = [l for l in lines if '(E=10)' in l]
    older = [l for l in lines if '(E=5)' in l]
    assert len(today) == len(older) == n and not any('older code' in l for l in today)
    assert all('older code' in l for l in older)
    verdicts = [l for l in lines if '**all**' in l]
    assert len(verdicts) == 2 and sum('older code' in l and 'not converged' in l for l in verdicts) == 1
    assert sum('older code' not in l and '**converged**' in l for l in verdicts) == 1


@pytest.mark.parametrize('path', SCREENS, ids=[p.stem for p in SCREENS])
def test_committed_screens_are_whole(path):
    screen_rows_ok(path)


def test_committed_rm_ladder_is_consistent():
    from compatrepro.rm import RM_CONVERGENCE_TOL

    d = pd.read_csv(LADDER)
    assert {0} <= set(d.seed) and {25, 50, 100} <= set(d.epochs)
    ladder_rows_ok(d, RM_CONVERGENCE_TOL)


def test_committed_rm_ladder_on_the_recipe_is_consistent():
    "The ladder on the recipe's models (`51`'s of seeds 1 and 2): every rung whole, each 2n the next rung's n."
    from compatrepro.rm import RM_CONVERGENCE_TOL

    d = pd.read_csv(ROOT / 'benchmarks' / 'rm_epochs_ladder_recipe.csv')
    assert {1, 2} <= set(d.seed) and {25, 50, 100} <= set(d.epochs)
    ladder_rows_ok(d, RM_CONVERGENCE_TOL)



def test_doubling_noise_by_hand():
    """The doubling test's noise: a run's scatter pooled over the two schedules, self-tests only, and the chance that a
    kind with no true move passes the rule (one move's standard deviation 1 point: 68.3 % a seed, 31.8 % on three)."""
    import doubling_noise as N

    assert N._pass_chance(2 ** -0.5, 1) == pytest.approx(0.6827, abs=1e-4)
    assert N._pass_chance(2 ** -0.5, 3) == pytest.approx(0.6827 ** 3, abs=1e-4)
    rows = [dict(candidate='c', pair='imagenet', model=m, epochs=e, seed=s, top1=t + s, mAP=t + 2 * s)
            for m in ('new/new', 'BCT/old') for e, t in ((10, 50.), (20, 53.)) for s in (0, 1, 2)]
    r = N.noise_rows(pd.DataFrame(rows))
    assert list(r.model) == ['new/new']                  # a cross-test shares its old model between the runs
    x = r.iloc[0]
    assert x.sigma_top1 == pytest.approx(1.0) and x.sigma_mAP == pytest.approx(2.0)   # seeds 0, 1, 2 apart
    assert x.mean_move_top1 == pytest.approx(3.0) and x.se_move_top1 == pytest.approx(0.0)
    assert x.largest_move_mAP == pytest.approx(3.0)
    assert x.pass_chance_if_converged == pytest.approx(N._pass_chance(2.0, 3))   # the noisier metric decides
    assert not x.converged_mean and not x.converged_every_seed   # +3 points on every seed
    assert N._mean_pass_chance(2 ** -0.5 * 3 ** 0.5, 3) == pytest.approx(0.6827, abs=1e-4)   # the mean's sd: 1 point
    rows = [dict(candidate='c', pair='imagenet', model='new/new', epochs=e, seed=s, top1=50. + m, mAP=40. + m)
            for s, moves in enumerate(((0.,) * 2, (0., 1.5), (0., -0.6))) for e, m in zip((10, 20), moves)]
    y = N.noise_rows(pd.DataFrame(rows)).iloc[0]   # moves 0, +1.5, -0.6: mean +0.3, one seed past a point
    assert y.mean_move_mAP == pytest.approx(0.3) and y.converged_mean and not y.converged_every_seed


def test_doubling_noise_pools_no_older_code_with_today(tmp_path):
    """A pair re-measured in part: the new model's seeds 0 and 1 under today's names, seed 2 of older code (no name).
    The noise table pools no seed of one with the other: neither has three seeds, so the kind has no row; with seed 2
    named too it has one, under 'library'; a file written before the names is 'library (older code)'."""
    import doubling_noise as N
    from standin_regime import pair_artifacts

    def rows(named_seeds):
        return [dict(candidate='library', recipe='{}', knobs='{}', pair='imagenet', model='new/new', epochs=E,
                     seed=s, top1=50. + s + (E == 20), mAP=40., artifact=pair_artifacts('imagenet', s)[0]['new']
                     if s in named_seeds and E == 10 else 'backbone/2E' if s in named_seeds else None)
                for s in (0, 1, 2) for E in (10, 20)]
    pd.DataFrame(rows({0, 1})).to_csv(tmp_path / 'part.csv', index=False)
    assert len(N.table([], [tmp_path / 'part.csv']).splitlines()) == 2   # the header only
    pd.DataFrame(rows({0, 1, 2})).to_csv(tmp_path / 'whole.csv', index=False)
    assert N.table([], [tmp_path / 'whole.csv']).splitlines()[2].startswith('| library | new/new | 10 | 3 |')
    pd.DataFrame(rows(set())).drop(columns='artifact').to_csv(tmp_path / 'older.csv', index=False)
    assert N.table([], [tmp_path / 'older.csv']).splitlines()[2].startswith('| library (older code) | new/new | 10 |')


def test_seed_cost_by_hand(tmp_path):
    """A seed's hours count each artifact once (the first run that made it) and are the mean over the seeds; the
    backbones scale by the candidate's CPU at E over the library's, the rest stays."""
    import seed_cost

    runs = [('20', 0, {'backbone/a': 3600., 'transformation/t': 1800.}), ('21', 0, {'backbone/a': 3600.}),
            ('20', 1, {'backbone/b': 7200., 'transformation/t': 1800., 'glyphs/g': None})]
    for nb, seed, made in runs:   # each run also spends 720 s of its own
        duration = sum(v for v in made.values() if v) + 720.
        (tmp_path / f'{nb}.seed{seed}.json').write_text(json.dumps(dict(seed=seed, made=made, duration=duration)))
    hours = seed_cost.record_hours(tmp_path)
    assert hours == pytest.approx({'backbone': 1.5, 'transformation': 0.5, 'evaluation': 0.3})
    rows = [dict(candidate=c, pair='imagenet', model=m, epochs=e, seed=0, cpu_seconds=cpu)
            for c, k in (('library-e48', 1), ('w16', 2)) for m in ('old/old', 'new/new')
            for e, cpu in ((10, 50. * k), (20, 999.))]
    pd.DataFrame(rows).to_csv(tmp_path / 'screen.csv', index=False)
    assert seed_cost.table([tmp_path / 'screen.csv'], tmp_path).splitlines()[-1] == '| w16 | 2.00 | 3.0 | 0.8 | 3.8 |'
    log = ['[compatrepro] training the mcl transformation places-182 -> places-365 (tiny, seed 1)\n',
           '[compatrepro] made mcl transformation (transformation t) in 1800.0s\n']   # RM's psi/rho on Places
    cells = [dict(outputs=[dict(text=[line])]) for line in log]
    (tmp_path / '20.seed1.ipynb').write_text(json.dumps(dict(cells=cells)))
    from compatrepro.rm import RM_DATASETS
    from compatrepro.specs import STANDIN_TRANSFORMATION_RECIPES
    cut = RM_DATASETS['Places-365'].standin_epochs / STANDIN_TRANSFORMATION_RECIPES['tiny']['epochs_rm']
    assert seed_cost.rm_epoch_cut(tmp_path / '20.seed1.ipynb') == {'transformation/t': cut}
    assert seed_cost.record_hours(tmp_path, tmp_path)['transformation'] == pytest.approx((0.5 + 0.5 * cut) / 2)


def test_docs_show_the_committed_screens():
    """The docs' tables (the recipe screen, RM's ladder, BCT's identity lever) are the scripts' own summaries of the
    committed CSVs, not numbers typed by hand: `python benchmarks/docs_tables.py` rewrites them."""
    import docs_tables

    assert not docs_tables.stale_blocks(), 'run python benchmarks/docs_tables.py'


def test_seed_moves_show_each_seed_of_todays_models(tmp_path):
    """The per-seed table of the convergence rows: one row per test of today's models, each seed's top-1 and mAP at E
    and 2E with its largest move, in bold only past the point (here BCT's self-test moves 3 on seed 0, its test against
    the old model 0.5, FCT 0.5); a model whose artifact is not today's has no row, and 'new/old' (tested at E only)
    none."""
    from standin_regime import pair_artifacts, seed_moves_table
    table, _ = pair_artifacts('imagenet', 0)
    moves = {'BCT/BCT': 3., 'BCT/old': .5, 'new/FCT(old)': .5}
    rows = [dict(candidate='library', recipe='{}', knobs='{}', seed=0, pair='imagenet', model=model, epochs=E,
                 top1=50. + (E == 20) * moves.get(model, 0.), mAP=40., chance=0.8, train_images=0, train_seconds=1.,
                 cpu_seconds=1., artifact=None if '/old' in model else table[m] if E == 10 else 'x/2E')
            for m, tests in (('BCT', ['BCT/BCT', 'BCT/old']), ('FCT', ['new/FCT(old)']),
                             ('new', ['new/new', 'new/old']), ('RACT', ['RACT/RACT']))
            for model in tests for E in ((10,) if model == 'new/old' else (10, 20))]
    d = pd.DataFrame(rows)
    d.loc[(d.model == 'RACT/RACT') & (d.epochs == 10), 'artifact'] = 'backbone/older'   # not today's RACT
    d.to_csv(tmp_path / 'conv.csv', index=False)
    lines = seed_moves_table([tmp_path / 'conv.csv']).splitlines()
    assert lines[0] == '| pair | test | E | seed 0: top-1, mAP at E → 2E (move) |'
    assert lines[2:] == ['| imagenet | BCT/BCT | 10 | 50.0 → 53.0, 40.0 → 40.0 (**3.0**) |',
                         '| imagenet | BCT/old | 10 | 50.0 → 50.5, 40.0 → 40.0 (0.5) |',
                         '| imagenet | new/FCT(old) | 10 | 50.0 → 50.5, 40.0 → 40.0 (0.5) |',
                         '| imagenet | new/new | 10 | 50.0 → 50.0, 40.0 → 40.0 (0.0) |']


def test_coverage_names_the_measured_models_short_of_converged(tmp_path):
    """A measured model whose doubling moves any of its rows by more than the point is named in the coverage table of
    each notebook whose runs use it (with its largest move), one within the point is not: here the new model moves its
    self-test by 3, BCT its test against the old model by 2 (its self-test by 0.5), FCT by 0.5; a notebook that uses
    none of them names none."""
    from standin_regime import CONVERGENCE_MODELS, coverage_table, pair_artifacts, unconverged
    table, _ = pair_artifacts('imagenet', 0)
    moves = {'new/new': 3., 'BCT/old': 2., 'BCT/BCT': .5, 'new/FCT(old)': .5}
    rows = [dict(candidate='library', recipe='{}', knobs='{}', seed=0, pair='imagenet', model=model, epochs=E,
                 top1=50. + (E == 20) * moves.get(model, 0.), mAP=40., chance=0.8, train_images=0, train_seconds=1.,
                 cpu_seconds=1., artifact='' if model == 'BCT/old' else table[m] if E == 10 else 'backbone/2E')
            for m in CONVERGENCE_MODELS['imagenet']
            for model in ([f'new/{m}(old)'] if m in ('FCT', 'FastFill') else [f'{m}/{m}', f'{m}/old'][:1 + (m == 'BCT')])
            for E in (10, 20)]
    d = pd.DataFrame(rows).replace({'artifact': {'': None}})
    assert unconverged(d) == {('imagenet', 0, 'new'): 3., ('imagenet', 0, 'BCT'): 2.}
    assert unconverged(d, tolerance=2.5) == {('imagenet', 0, 'new'): 3.}
    d.to_csv(tmp_path / 'conv.csv', index=False)
    runs = tmp_path / 'runs'; runs.mkdir()
    (runs / '20_fastfill_imagenet.seed0.json').write_text(json.dumps({'artifacts': {a: {} for a in table.values()}}))
    (runs / '30_bct_ijbc.seed0.json').write_text(json.dumps({'artifacts': {'backbone/other': {}}}))
    lines = coverage_table([tmp_path / 'conv.csv'], runs).splitlines()
    assert lines[2] == ('| 20_fastfill_imagenet | 6 | 6 | BCT of imagenet (seed 0: 2.0), new of imagenet (seed 0: 3.0) '
                        '| 0 |')
    assert lines[3] == '| 30_bct_ijbc | 1 | 0 |  | 1 |'
    assert lines[4] == '| **all** (a model shared by notebooks once) | **7** | **6** | **2** | **1** |'
