"""Every claim declared by an experiment notebook, recomputed from the committed tiny-scale records, must reach the
verdict written beside it; and editing a committed record so that a claim flips must be caught."""
import json, shutil
from pathlib import Path

import pandas as pd
import pytest

from compatrepro.core import PAPER_DECADES, paper_of_notebook
from compatrepro.report import claims_table

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT/'results'/'tiny'


def _claims_and_records(res: Path, paper: str):
    claims = [c for f in sorted((res/'claims').glob('*.json')) if paper_of_notebook(f.stem + '.ipynb') == paper
              for c in json.loads(f.read_text())]
    recs = pd.concat([pd.read_csv(f).assign(notebook=f.name.split('.seed')[0]) for f in sorted((res/'records').glob('*.csv'))],
                     ignore_index=True)
    return claims, recs[recs.paper == paper]


def _disagreements(res: Path, paper: str) -> pd.DataFrame:
    claims, recs = _claims_and_records(res, paper)
    t = claims_table(claims, recs)
    return t[~t.agrees]


@pytest.mark.parametrize('paper', [p for d, p in PAPER_DECADES.items() if list(ROOT.glob(f'nbs/{d}9_*_claims.ipynb'))])
def test_committed_verdicts_agree_with_what_is_written(paper):
    claims, _ = _claims_and_records(RESULTS, paper)
    assert claims, f'no claims of {paper} are committed under {RESULTS}/claims: run its notebooks'
    bad = _disagreements(RESULTS, paper)
    assert bad.empty, ('verdicts that differ from the one written beside the claim (update the notebook\'s expect/reason '
                       'or find out why the result changed):\n' + bad[['claim', 'notebook', 'margin', 'verdict', 'written']].to_string())


def test_a_flipped_record_is_caught(tmp_path):
    "Copy the committed results, swap the two numbers a claim that holds compares, on every seed: the check must fail."
    res = tmp_path/'tiny'
    shutil.copytree(RESULTS/'records', res/'records'); shutil.copytree(RESULTS/'claims', res/'claims')
    claims, _ = _claims_and_records(res, 'FastFill')
    c = next(c for c in claims if c['expect'] == 'holds' and len(c['margin']) == 1 and len(c['margin'][0]['refs']) == 2)
    (item, a, metric, _), (_, b, _, _) = c['margin'][0]['refs']
    for f in (res/'records').glob(f"{c['notebook']}.seed*.csv"):
        df = pd.read_csv(f)
        ia = (df['item'] == item) & (df.method == a) & (df.metric == metric)
        ib = (df['item'] == item) & (df.method == b) & (df.metric == metric)
        df.loc[ia, 'value'], df.loc[ib, 'value'] = df.loc[ib, 'value'].values, df.loc[ia, 'value'].values
        df.to_csv(f, index=False)
    bad = _disagreements(res, 'FastFill')
    assert c['text'] in bad.claim.tolist(), f"swapping {a} and {b} in {item} did not flip {c['text']!r}"
    assert bad.set_index('claim').loc[c['text'], 'verdict'] == 'fails'
