"""The papers' numbers live once, in docs/paper_values.csv: every row is read by some notebook (a committed record
carries it), every value is printed in its paper, and every item of docs/paper_items.csv is in its paper."""
import csv, functools, os, re
from pathlib import Path

import numpy as np
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


def _quoted_by_a_reason(row) -> bool:
    "Whether a differing verdict marks `row`'s value as its paper's ('paper: +0.1') and reads or names its item."
    from compatrepro.report import paper_of_notebook
    from test_reason_numbers import _at_precision
    return any(paper_of_notebook(nb + '.ipynb') == row.paper and row.item in items
               and _at_precision(x, np.array([float(row.value)])) for nb, _, x, _, items in _marked())


@functools.cache
def _marked():
    from test_reason_numbers import marked_papers_numbers
    return marked_papers_numbers()


def test_every_paper_value_is_read_by_a_notebook():
    """Every row is in a committed record, unless its item is one that runs pending a re-run produce (their notebooks
    may read rows their stale records predate: the test holds them to it once they are current), or a differing
    verdict quotes it as the paper's number beside the stand-in's (a number of the paper's prose no table shows)."""
    from compatrepro.runs import norm_item
    from compatrepro.ledger import pending_notebooks
    tiny = ROOT/'results'/'tiny'
    recs = pd.concat([pd.read_csv(f).assign(notebook=f.name.split('.seed')[0]) for f in (tiny/'records').glob('*.csv')],
                     ignore_index=True)
    have = set(zip(recs.paper, recs['item'], recs.method, recs.metric))
    waiting = recs[recs.notebook.isin(pending_notebooks(tiny))]
    awaited = set(zip(waiting.paper, waiting['item'].map(norm_item)))
    unread = [r for r in VALUES.itertuples() if (r.paper, r.item, r.method, r.metric) not in have
              and (r.paper, norm_item(r.item)) not in awaited and not _quoted_by_a_reason(r)]
    assert not unread, (f'{len(unread)} row(s) of docs/paper_values.csv are read by no notebook and quoted as the '
                        f"paper's by no differing verdict: {unread[:5]}")
    with_pv = recs.dropna(subset=['paper_value'])
    read = set(zip(with_pv.paper, with_pv['item'], with_pv.method, with_pv.metric))
    rows = set(zip(VALUES.paper, VALUES['item'], VALUES.method, VALUES.metric))
    assert read <= rows, f'records carry paper values docs/paper_values.csv does not hold: {sorted(read - rows)[:5]}'


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
