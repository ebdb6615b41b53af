"""The stand-in regime (`docs/standin_regime.md`), checked on the committed tiny results of notebook 20 for every seed there is: the
new model (on 'imagenet-1k', all classes) is at least 10 points of CMC top-1 above the old one (on 'imagenet-500', the
old half of the classes), neither is above 90 % (a saturated stand-in compresses every difference), and the
independently trained new model retrieves from the old gallery at chance (at most three times a random ranking's
top-1): the two models share no initial weights. It reads the records that `compatrepro reproduce --scale tiny`
wrote; it trains nothing."""
import re
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parent.parent
RECORDS = ROOT/'results'/'tiny'/'records'
FILES = sorted(RECORDS.glob('20_fastfill_imagenet.seed*.csv'))


def test_there_are_records():
    assert FILES, f'no committed records of 20_fastfill_imagenet in {RECORDS}: run compatrepro reproduce --scale tiny'


@pytest.mark.parametrize('path', FILES, ids=[p.name for p in FILES])
def test_new_model_is_clearly_better_but_not_saturated(path):
    seed = int(re.search(r'\.seed(\d+)\.csv$', path.name).group(1))
    df = pd.read_csv(path)
    rows = df[(df['item'] == 'Models') & (df['metric'] == 'top1')]
    top1 = {}
    for method in ('old / old', 'new / new', 'new / old (independent)'):
        r = rows[rows['method'] == method]
        assert len(r) == 1, f'{path.name}: {len(r)} Models/{method}/top1 records, expected one'
        assert r['scale'].item() == 'tiny' and r['seed'].item() == seed, r
        top1[method] = float(r['value'].item())
    old, new = top1['old / old'], top1['new / new']
    assert max(old, new) <= 90, f'seed {seed}: top-1 old {old}, new {new}: the stand-in is saturated'
    assert new - old >= 10, f'seed {seed}: top-1 old {old}, new {new}: the new model is not 10 points better'
    from compatrepro.glyphs import standin_config
    cfg = standin_config('tiny')   # query = gallery, the query left out: a random ranking's top-1 is (k-1)/(n-1)
    cross, chance = top1['new / old (independent)'], 100*(cfg.n_eval - 1)/(cfg.n_classes*cfg.n_eval - 1)
    assert cross <= 3*chance, f'seed {seed}: independent new/old top-1 {cross} against chance {chance}: the models are not independent'
