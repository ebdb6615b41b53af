"""The controlled experiments on suspect verdicts (benchmarks/fastfill_disc_probe.py, bct_face_probe.py,
bct_l2_probe.py, bct_paragon_identities.py, bct_feature_lengths.py, ract_keys_probe.py, family_identities.py,
ract_upgrade_probe.py and fastfill_parts.py) still
run on the library as it is: each at smoke scale on the scripts' cache of the session (`tests/_script_caches.py`), its
CSV holding every variant and pair it promises. The committed CSVs (made at tiny scale) are checked for the same
columns and rows: a probe and its results stay in step."""

import os, subprocess, sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / 'benchmarks'))
import bct_face_probe, bct_feature_lengths, bct_l2_probe, bct_paragon_identities  # noqa: E402
import fastfill_disc_probe, fastfill_parts, ract_keys_probe  # noqa: E402
from _script_caches import seed_script_caches, shared_cache  # noqa: E402


def run_probe(name: str, tmp_path: Path, *args: str) -> Path:
    "Run benchmarks/<name>.py at smoke scale on seed 0 and the scripts' shared cache; its output path without suffix."
    out = tmp_path / name
    env = dict(
        os.environ,
        PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get('PYTHONPATH', ''),
        COMPATREPRO_PROGRESS='0',
        COMPATREPRO_CACHE=str(shared_cache()),
    )
    out_arg = str(out) + ('' if name == 'fastfill_disc_probe' else '.csv')  # the disc probe writes two CSVs
    cmd = [
        sys.executable,
        str(ROOT / 'benchmarks' / f'{name}.py'),
        '--scale',
        'smoke',
        '--seeds',
        '0',
        '--out',
        out_arg,
    ]
    seed_script_caches(name, args)   # its own caches get the shared cache's glyph masks and images
    r = subprocess.run([*cmd, *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    return out


def disc_rows_ok(t: pd.DataFrame, e: pd.DataFrame, seeds):
    d = round(1 / t['l2_weight'].min())  # the embedding's size: L_l2/d is one of the variants
    assert set(t['variant']) == set(fastfill_disc_probe.variants(d))
    assert set(t['distance']) == set(fastfill_disc_probe.EVALS)
    assert len(t) == len(seeds) * len(fastfill_disc_probe.variants(d)) * len(fastfill_disc_probe.EVALS)
    assert t[['mAP~', 'top1~', 'cos_h_phi_new', 'within_class_share_h']].notna().all().all()
    assert set(e['variant']) == set(t['variant']) and (e['epoch'] >= 1).all()


def bct_rows_ok(t: pd.DataFrame, seeds, old_models: int = 2):
    assert t['old_model'].nunique() == old_models
    pairs = {'old / old', 'new* / new*'} | {f'{m} / old' for m in bct_face_probe.MODELS}
    assert set(t['pair']) == pairs and len(t) == len(seeds) * old_models * len(pairs)
    compat = t[t['pair'].str.endswith(' / old') & (t['pair'] != 'old / old')]
    assert compat[[f'eq. 2 ({p})' for p in bct_face_probe.POINTS]].notna().all().all()


def l2_rows_ok(t: pd.DataFrame, seeds):
    "The package's reading with the reference pairs, each other reading with (old, old) and its own l2 model, per seed."
    L2 = f'{bct_l2_probe.L2} / old'
    assert set(t['reading']) == set(bct_l2_probe.READINGS)
    for reading, g in t.groupby('reading'):
        pairs = {'old / old', 'new* / new*', 'new-β / old', L2} if reading == bct_l2_probe.MEASURES_ALL else {'old / old', L2}
        assert set(g['pair']) == pairs and len(g) == len(seeds) * len(pairs), reading
    same = t[t['pair'] == 'old / old'].groupby('seed')[list(bct_l2_probe.POINTS)].nunique()
    assert (same == 1).all().all(), "(old, old) differs between the readings: their old model is not the same"
    assert t[t['pair'] == L2][[f'eq. 2 ({p})' for p in bct_face_probe.POINTS]].notna().all().all()


def ract_rows_ok(t: pd.DataFrame, seeds, allocations):
    from compatrepro.ract import RACT_TESTS

    assert set(t['reading']) == {ract_keys_probe.PACKAGE, ract_keys_probe.AUTHORS}
    per = len(RACT_TESTS) * len(allocations)  # each test and allocation: vanilla and ours, then ours the other way
    assert len(t) == len(seeds) * 3 * per and set(t['allocation']) == set(allocations)
    assert (t[t['reading'] == ract_keys_probe.AUTHORS]['model'] == 'ours').all()
    assert t.filter(like='mean NFR@1').notna().all().all()


def test_fastfill_disc_probe_runs(tmp_path):
    out = run_probe('fastfill_disc_probe', tmp_path)
    disc_rows_ok(pd.read_csv(f'{out}.csv'), pd.read_csv(f'{out}_epochs.csv'), [0])


def test_bct_face_probe_runs(tmp_path):
    bct_rows_ok(pd.read_csv(run_probe('bct_face_probe', tmp_path).with_suffix('.csv')), [0])


def test_bct_face_probe_identities_run(tmp_path):
    "The identity lever: IMDB-Face's stand-in with other identities and images, the recipe's old model only."
    out = run_probe('bct_face_probe', tmp_path, '--identities', '48', '--images', '8', '--cache', str(tmp_path / 'c2'))
    t = pd.read_csv(out.with_suffix('.csv'))
    bct_rows_ok(t, [0], old_models=1)
    assert (t['identities'] == 48).all() and (t['images'] == 8).all()


@pytest.mark.parametrize('family, lever', [('vggface2', ('--head-scale', '32', '--lr', '0.05', '--epochs', '2')),
                                           ('market1501', ('--identities', '48', '--images', '4', '--bct')),
                                           ('gldv2', ()), ('gldv2', ('--epochs', '2'))])
def test_family_identities_probe_runs(tmp_path, family, lever):
    """The identity lever on the other families with unseen test identities, and a margin head's recipe levers: each
    family's old and new model, measured, the recipe named in its rows."""
    identities = '--identities' in lever
    cache = ('--cache', str(tmp_path / 'c2')) if identities else ()
    t = pd.read_csv(run_probe('family_identities', tmp_path, '--family', family, *lever, *cache).with_suffix('.csv'))
    models = ['old', 'new'] + (['new-β', 'new / old', 'new-β / old'] if '--bct' in lever else [])
    assert list(t['model']) == models and (t['family'] == family).all() and (t['seed'] == 0).all()
    assert t[['top1', 'mAP']].notna().all().all() and (t['mAP'] > 0).all()
    if identities:
        assert (t['identities'] == 48).all() and (t['images'] == 4).all() and (t['unseen_identities'] == 12).all()
    recipe = {'vggface2': 'head_scale=32.0, lr=0.05, epochs=2', 'gldv2': 'epochs=2'}.get(family, 'library')
    assert (t['recipe'] == (recipe if lever and not identities else 'library')).all()
    if family == 'gldv2' and lever:
        assert (t['epochs'] == 2).all()   # RACT's old and new model alike
    elif lever and not identities:
        old, new = t['epochs']
        assert new == 2 and old > new   # the old model, on a tenth of the identities: as many steps as the new one


@pytest.mark.parametrize('path', sorted((ROOT / 'benchmarks' / 'family_identities').glob('*.csv')), ids=lambda p: p.stem)
def test_committed_family_identities_are_whole(path):
    """Each committed run of the identity lever: one family, stand-in and recipe, its old and new model on seeds 0-2
    (with `--bct`, BCT's new-β model and the compatibility tests of both new models too)."""
    t = pd.read_csv(path)
    assert t[['family', 'identities', 'images']].nunique().max() == 1 and t.get('recipe', pd.Series([0])).nunique() == 1
    assert sorted(t['seed'].unique()) == [0, 1, 2]
    models = [['new', 'old'], ['new', 'new / old', 'new-β', 'new-β / old', 'old']]
    assert all(sorted(g['model']) == models['new-β' in set(t['model'])] for _, g in t.groupby('seed'))
    assert t[['top1', 'mAP']].notna().all().all()


def test_committed_bct_market_identities_are_whole():
    "BCT on Market-1501 under two stand-ins: per stand-in and seed 0-2, the three models and both compatibility tests."
    t = pd.read_csv(ROOT / 'benchmarks' / 'bct_market_identities.csv')
    assert set(t['family']) == {'market1501'} and t['recipe'].eq('library').all()
    for _, g in t.groupby(['identities', 'images']):
        assert sorted(g['seed'].unique()) == [0, 1, 2]
        assert all(sorted(s['model']) == ['new', 'new / old', 'new-β', 'new-β / old', 'old'] for _, s in g.groupby('seed'))
    assert t[['top1', 'mAP']].notna().all().all()


def test_committed_bct_identities_are_whole():
    t = pd.read_csv(ROOT / 'benchmarks' / 'bct_face_identities.csv')
    seeds = sorted(t['seed'].unique())
    assert 0 in seeds
    for _, g in t.groupby(['identities', 'images']):
        bct_rows_ok(g, seeds, old_models=1)


def test_bct_l2_probe_runs(tmp_path):
    out = run_probe('bct_l2_probe', tmp_path, '--cache-root', str(tmp_path / 'readings'))
    l2_rows_ok(pd.read_csv(out.with_suffix('.csv')), [0])


def test_ract_keys_probe_runs(tmp_path):
    out = run_probe('ract_keys_probe', tmp_path, '--allocations', 'expansion')
    ract_rows_ok(pd.read_csv(out.with_suffix('.csv')), [0], ['expansion'])


@pytest.mark.parametrize('name', ['fastfill_disc_probe', 'bct_face_probe', 'bct_l2_probe', 'ract_keys_probe'])
def test_committed_probe_results_are_whole(name):
    t = pd.read_csv(ROOT / 'benchmarks' / f'{name}.csv')
    assert (t['seed'].sort_values().unique() == [0, 1, 2]).all()
    if name == 'bct_face_probe':
        bct_rows_ok(t, [0, 1, 2])
    elif name == 'bct_l2_probe':
        l2_rows_ok(t, [0, 1, 2])
    elif name == 'ract_keys_probe':
        from compatrepro.ract import RACT_ALLOCATIONS

        ract_rows_ok(t, [0, 1, 2], list(RACT_ALLOCATIONS))
    else:
        disc_rows_ok(t, pd.read_csv(ROOT / 'benchmarks' / f'{name}_epochs.csv'), [0, 1, 2])


RACT_UPGRADE = ROOT / 'benchmarks' / 'ract_upgrade_probe.csv'


def ract_upgrade_rows_ok(t: pd.DataFrame, seeds) -> None:
    "Per start and seed: the old and new model and their starts, each on RACT's three test sets, measured."
    import ract_upgrade_probe

    assert set(t['start']) == set(ract_upgrade_probe.STARTS)
    for _, g in t.groupby(['start', 'seed']):
        assert sorted(g['model'].unique()) == ['new R101', 'old R50', 'start of new R101', 'start of old R50']
        assert (g.groupby('model')['test'].apply(sorted).map(tuple) == ('GLDv2-test', 'ROxford', 'RParis')).all()
    assert sorted(t['seed'].unique()) == list(seeds) and t[['top1', 'value']].notna().all().all()


def test_ract_upgrade_probe_runs(tmp_path):
    ract_upgrade_rows_ok(pd.read_csv(run_probe('ract_upgrade_probe', tmp_path).with_suffix('.csv')), [0])


@pytest.mark.skipif(not RACT_UPGRADE.exists(), reason='the tiny run of ract_upgrade_probe.py is not committed yet')
def test_committed_ract_upgrade_probe_is_whole():
    t = pd.read_csv(RACT_UPGRADE)
    ract_upgrade_rows_ok(t, [0, 1, 2])
    starts = t[t.model == 'start of new R101'].groupby('start')['epochs'].max()
    assert starts['ResNet-18 start of 24 epochs'] == 24 and starts["ResNet-18 start with the ResNet-10's epochs"] == 48



def paragon_rows_ok(t: pd.DataFrame, seeds, models) -> None:
    "Per seed, each model once, its identities, epochs and steps, and every point under both poolings, measured."
    P = bct_paragon_identities
    assert sorted(t['seed'].unique()) == list(seeds)
    assert all(sorted(g['model']) == sorted(P.MODELS[k][0] for k in models) for _, g in t.groupby('seed'))
    points = [c for c in t if c.startswith(('TAR@', 'TPIR@', 'rank')) and 'unit' not in c and 'seen' not in c]
    assert len(points) >= 8 and all(f'{c} (unit images)' in t for c in points)
    assert t[points + ['norm cv (IJB-C)', 'rank1 seen (25 %)', 'rank1 unseen']].notna().all().all()
    for k in models:   # the steps lever's models train for their multiple of the recipe's epochs, on their split
        name, split, times = P.MODELS[k]
        r = t[t['model'] == name]
        ref = t[t['model'] == P.MODELS[f'ids{P.SPLITS[split]}'][0]] if f'ids{P.SPLITS[split]}' in models else None
        if ref is not None and len(ref):
            assert (r['epochs'].to_numpy() == np.maximum(1, np.round(times*ref['epochs'].to_numpy()))).all(), name


def test_bct_paragon_identities_runs(tmp_path):
    out = run_probe('bct_paragon_identities', tmp_path, '--models', *bct_paragon_identities.MODELS)
    paragon_rows_ok(pd.read_csv(out.with_suffix('.csv')), [0], list(bct_paragon_identities.MODELS))


def test_committed_bct_paragon_identities_are_whole():
    """The identity ladder and steps lever, the epochs ladder and the recipe's two rules, each on seeds 0-2; every model
    of the script in one of them, and the summary reads the three files."""
    P, bench = bct_paragon_identities, ROOT / 'benchmarks'
    files = {'identities': P.LEVERS, 'epochs': P.LADDER, 'rules': P.RULES}
    assert sorted(k for models in files.values() for k in models) == sorted(P.MODELS)
    for name, models in files.items():
        paragon_rows_ok(pd.read_csv(bench / f'bct_paragon_{name}.csv'), [0, 1, 2], models)
    table = P.summary(*(bench / f'bct_paragon_{name}.csv' for name in files))
    assert len(table.splitlines()) == 2 + len(P.MODELS)


def feature_length_rows_ok(t: pd.DataFrame, seeds) -> None:
    "Per seed, each of 30's models once, both poolings' points and the lengths' measures; a spread is positive."
    L = bct_feature_lengths
    assert sorted(t['seed'].unique()) == list(seeds)
    assert all(sorted(g['model']) == sorted(L.MODELS) for _, g in t.groupby('seed'))
    cols = [f'{k} {w}' for k in L.POINTS for w in ('raw', 'unit')]
    assert t[cols + ['length-typicality correlation']].notna().all().all()
    assert (t['length cv'] > 0).all() and (t['length cv within templates'] > 0).all()


def test_length_spread_by_hand():
    """Lengths 1, 3 (template a) and 2, 2 (template b): cv over all 0.354 (std 0.707 / mean 2), within a 0.5, b 0."""
    f = np.array([[1., 0], [0, 3.], [2., 0], [0, 2.]])
    cv, within = bct_feature_lengths.length_spread(f, ['a', 'a', 'b', 'b'])
    assert np.isclose(cv, np.sqrt(.5)/2) and np.isclose(within, .25)


def test_length_typicality_by_hand():
    """In each label two long rows point the way the label's others do and a short one points away: length and
    typicality rank alike; made the longest, the atypical rows turn the correlation negative."""
    f = np.array([[3., 0], [3., .1], [0, 1.], [2., 0], [2., .1], [0, .5]])
    assert bct_feature_lengths.length_typicality(f, [0, 0, 0, 1, 1, 1]) > .5
    assert bct_feature_lengths.length_typicality(f*[[1], [1], [9], [1], [1], [9]], [0, 0, 0, 1, 1, 1]) < -.5


def test_bct_feature_lengths_runs(tmp_path):
    feature_length_rows_ok(pd.read_csv(run_probe('bct_feature_lengths', tmp_path).with_suffix('.csv')), [0])


def test_committed_bct_feature_lengths_are_whole():
    t = pd.read_csv(ROOT / 'benchmarks' / 'bct_feature_lengths.csv')
    feature_length_rows_ok(t, [0, 1, 2])
    assert len(bct_feature_lengths.summary(ROOT / 'benchmarks' / 'bct_feature_lengths.csv').splitlines()) \
        == 2 + len(bct_feature_lengths.MODELS) + 3


def parts_rows_ok(t: pd.DataFrame, summary: pd.DataFrame, seeds, dataset: str) -> None:
    "Per seed every h in every order (and BCT's curve on Places), the oracle's order its own (tau 1), both metrics' parts."
    hs = {'FCT', 'FastFill', 'FastFill (psi on stop-gradient h)'}
    per_seed = len(hs) * 4 + (dataset == 'places')
    assert sorted(t['seed'].unique()) == list(seeds) and len(t) == len(seeds) * per_seed
    assert set(t['h']) == hs | ({'BCT'} if dataset == 'places' else set())
    assert np.allclose(t[t['order'] == fastfill_parts.ORACLE]['tau_vs_oracle'], 1)
    assert t[['top1~', 'mAP~', 'top1 at 0%', 'mAP at 100%']].notna().all().all()
    assert len(summary) == 2 * len(seeds) and summary.notna().all().all()


def test_l2_oracle_order_by_hand():
    "Squared distances 1, 9, 4 to the new features: the oracle backfills item 1, then 2, then 0."
    import torch
    h, new = torch.tensor([[1., 0], [3., 0], [0, 2.]]), torch.zeros(3, 2)
    assert fastfill_parts.l2_oracle_order(h, new).tolist() == [1, 2, 0]


@pytest.mark.parametrize('dataset', ['places', 'vggface2'])
def test_fastfill_parts_runs(tmp_path, dataset):
    out = run_probe('fastfill_parts', tmp_path, '--dataset', dataset).with_suffix('.csv')
    parts_rows_ok(pd.read_csv(out), pd.read_csv(str(out).replace('.csv', '_summary.csv')), [0], dataset)


@pytest.mark.parametrize('dataset', ['places', 'vggface2'])
def test_committed_fastfill_parts_are_whole(dataset):
    base = ROOT / 'benchmarks' / f'fastfill_parts_{dataset}'
    summary = pd.read_csv(f'{base}_summary.csv')
    parts_rows_ok(pd.read_csv(f'{base}.csv'), summary, [0, 1, 2], dataset)
    # the probe rebuilt the notebook's curves: its whole is the notebook's FastFill minus FCT on every seed
    nb, item = {'places': ('22_fastfill_places', 'Table 3'), 'vggface2': ('23_fastfill_vggface2', 'Table 2')}[dataset]
    for seed in (0, 1, 2):
        r = pd.read_csv(ROOT / 'results' / 'tiny' / 'records' / f'{nb}.seed{seed}.csv')
        v = r[r['item'] == item].set_index(['method', 'metric'])['value']
        for m in ('top1~', 'mAP~'):
            whole = summary[(summary['seed'] == seed) & (summary['metric'] == m)]['whole'].item()
            assert abs(whole - (v[('FastFill', m)] - v[('FCT', m)])) < 1e-3, (seed, m)
