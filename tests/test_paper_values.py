"""The papers' numbers live once, in docs/paper_values.csv: every row is read by some notebook (a committed record
carries it), every value is printed in its paper, and every item of docs/paper_items.csv is in its paper."""
import csv, os, re
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parent.parent
PAPERS = ROOT.parent/'shared'/'papers'
FILES = {'FastFill': ['000'], 'RM': ['004', '001'], 'BCT': ['002'], 'RACT': ['003']}   # shared/papers/README.md


def _text(paper):
    if not PAPERS.is_dir():
        if os.environ.get('CI') == 'true': pytest.fail(f'{PAPERS} is missing: CI runs with shared/ beside the clone')
        pytest.skip(f'{PAPERS} is not here')
    return '\n'.join(p.read_text(encoding='utf-8') for k in FILES[paper] for p in PAPERS.glob(f'{k}_*.txt'))


VALUES = pd.read_csv(ROOT/'docs'/'paper_values.csv', keep_default_na=False)


def test_every_paper_value_is_read_by_a_notebook():
    recs = pd.concat([pd.read_csv(f) for f in (ROOT/'results'/'tiny'/'records').glob('*.csv')], ignore_index=True)
    have = set(zip(recs.paper, recs['item'], recs.method, recs.metric))
    unread = [r for r in VALUES.itertuples() if (r.paper, r.item, r.method, r.metric) not in have]
    assert not unread, f'{len(unread)} row(s) of docs/paper_values.csv are read by no notebook: {unread[:5]}'
    with_pv = recs.dropna(subset=['paper_value'])
    assert len(set(zip(with_pv.paper, with_pv['item'], with_pv.method, with_pv.metric))) == len(VALUES)


@pytest.mark.parametrize('paper', sorted(VALUES.paper.unique()))
def test_every_paper_value_is_printed_in_its_paper(paper):
    text = _text(paper)
    def printed(v):
        forms = {f'{v:.2f}', f'{v:.1f}', f'{v:g}'} | ({f'{v:,.0f}'} if v == int(v) else set())   # counts: '1,580,470'
        return any(re.search(r'(?<![\d.])' + re.escape(f) + r'(?![\d])', text) for f in forms)
    missing = [(r.item, r.method, r.metric, r.value) for r in VALUES[VALUES.paper == paper].itertuples() if not printed(float(r.value))]
    assert not missing, f'values not found in the text of {paper}: {missing}'


def test_every_paper_item_is_in_its_paper():
    with open(ROOT/'docs'/'paper_items.csv', encoding='utf-8') as f: items = list(csv.DictReader(f))
    missing = [(i['paper'], i['item']) for i in items if not re.search(re.escape(i['item']) + r'\b', _text(i['paper']))]
    assert not missing, f'items of docs/paper_items.csv that their paper does not have: {missing}'
