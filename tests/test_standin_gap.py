"""The stand-in must separate an old and a new model: in the committed tiny results of notebook 20, the new model
(ResNet-18 on 'imagenet-1k', all classes) is at least 10 points of CMC top-1 above the old one (on 'imagenet-500', the
old half of the classes), and neither is above 95% (a saturated stand-in could not show an update's gain), for every
seed there is. It reads the records that `compatrepro reproduce --scale tiny` wrote; it trains nothing."""
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
    for method in ('old / old', 'new / new'):
        r = rows[rows['method'] == method]
        assert len(r) == 1, f'{path.name}: {len(r)} Models/{method}/top1 records, expected one'
        assert r['scale'].item() == 'tiny' and r['seed'].item() == seed, r
        top1[method] = float(r['value'].item())
    old, new = top1['old / old'], top1['new / new']
    assert max(old, new) <= 95, f'seed {seed}: top-1 old {old}, new {new}: the stand-in is saturated'
    assert new - old >= 10, f'seed {seed}: top-1 old {old}, new {new}: the new model is not 10 points better'
