"""The claims and their expected verdicts. Every claim declared by an experiment notebook, recomputed from the committed
tiny-scale records, must reach its expected verdict (the paper's, 'holds', unless `docs/expected_verdicts.csv` says
otherwise) or be a verdict that `docs/differing_verdicts.csv` explains with its measured reason, and no finding may rest
on a margin that is the same on every seed; every row of the expected verdicts must name a declared claim and say why
and by which commit. Editing a record so that a finding flips, an unknown key,
a constant finding and a row without its reason or commit must each be caught: those are shown on copies of the
committed records and on small made-up runs."""
import json, re, shutil, subprocess
from pathlib import Path

import pandas as pd
import pytest

from compatrepro.core import PAPER_DECADES, ExperimentParams, paper_of_notebook
from compatrepro.runs import pending_notebooks
from compatrepro.report import (DIFFERING_VERDICTS_COLUMNS, EXPECTED_VERDICTS_COLUMNS, RecordBook, above, claims_problems, claims_table, diff,
                                expected_verdicts, load_claims)

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT/'results'/'tiny'
VERDICTS = ROOT/'docs'/'expected_verdicts.csv'
DIFFERING = ROOT/'docs'/'differing_verdicts.csv'
PAPERS = [p for d, p in PAPER_DECADES.items() if list(ROOT.glob(f'nbs/{d}9_*_claims.ipynb'))]
NO_WRITTEN_VERDICT = pd.DataFrame(columns=EXPECTED_VERDICTS_COLUMNS)   # every claim expected to hold
NO_DIFFERING = pd.DataFrame(columns=DIFFERING_VERDICTS_COLUMNS)          # no disagreement explained


def _claims_and_records(res: Path, paper: str):
    "`paper`'s claims and records under `res`, less those of notebooks whose re-runs are pending."
    pending = pending_notebooks(res)
    claims = [c for f in sorted((res/'claims').glob('*.json')) if paper_of_notebook(f.stem + '.ipynb') == paper
              and f.stem not in pending for c in load_claims(f)]
    recs = pd.concat([pd.read_csv(f).assign(notebook=f.name.split('.seed')[0]) for f in sorted((res/'records').glob('*.csv'))],
                     ignore_index=True)
    return claims, recs[(recs.paper == paper) & ~recs.notebook.isin(pending)]


def _problems(res: Path, paper: str, verdicts=VERDICTS, differing=None) -> list[str]:
    "What the agreement test finds wrong with `paper`'s claims under the results folder `res` (one scale)."
    claims, recs = _claims_and_records(res, paper)
    return claims_problems(claims_table(claims, recs, verdicts=verdicts, differing=differing))


# The committed results, as they are.

@pytest.mark.parametrize('paper', PAPERS)
def test_committed_verdicts_are_the_expected_ones(paper):
    "Every committed claim of `paper` reaches its expected verdict, and no finding has a constant margin."
    claims, _ = _claims_and_records(RESULTS, paper)
    if not claims:      # every notebook of the paper that declares claims has its re-runs pending
        mine = {f.stem for f in (RESULTS/'claims').glob('*.json') if paper_of_notebook(f.stem + '.ipynb') == paper}
        assert mine and mine <= pending_notebooks(RESULTS), f'no claims of {paper} are committed under {RESULTS}/claims: run its notebooks'
        return
    bad = _problems(RESULTS, paper)
    assert not bad, ('claims that do not reach their expected verdict without a measured reason, reasons for a verdict '
                     'that moved or for a disagreement that is gone, or findings whose margin does not move between seeds '
                     f'(an expected verdict other than the paper\'s is a row of {VERDICTS.relative_to(ROOT)}, declared '
                     f'before the run it judges; a verdict a run found is a row of {DIFFERING.relative_to(ROOT)}, with its '
                     'measured reason):\n' + '\n'.join(bad))


def test_committed_expected_verdicts_name_declared_claims():
    "Every row of docs/expected_verdicts.csv names a claim that its notebook declared in the committed results."
    declared = {(c['notebook'], c['text']) for f in sorted((RESULTS/'claims').glob('*.json')) for c in load_claims(f)}
    pending = pending_notebooks(RESULTS)     # their claims may have changed with the notebook: judged once re-run
    unknown = [(r.notebook, r.claim) for r in expected_verdicts(VERDICTS).itertuples()
               if (r.notebook, r.claim) not in declared and r.notebook not in pending]
    assert not unknown, f'rows of {VERDICTS.relative_to(ROOT)} that name no declared claim (renamed? removed?): {unknown}'


def test_the_expected_verdicts_file_is_well_formed():
    assert list(expected_verdicts(VERDICTS).columns) == EXPECTED_VERDICTS_COLUMNS


def _git(*args) -> str:
    return subprocess.run(['git', '-C', str(ROOT), *args], capture_output=True, text=True).stdout.strip()


@pytest.mark.skipif(not (ROOT/'.git').exists(), reason='needs the repository history')
def test_expected_verdicts_were_declared_before_the_runs_they_judge():
    """Each row's `declared` is a commit of this repository's history, made before every committed run of its notebook
    started: an expectation written after seeing the numbers it judges is not evidence of anything."""
    late, pending = [], pending_notebooks(RESULTS)
    for r in expected_verdicts(VERDICTS).itertuples():
        if r.notebook in pending: continue      # the runs that will judge it are still to come
        when = re.fullmatch('[0-9a-f]{7,40}', r.declared) and _git('show', '-s', '--format=%cI', f'{r.declared}^{{commit}}')
        if not when:
            late.append(f'{r.notebook}: {r.claim!r} declared={r.declared!r} is not a commit of this repository'); continue
        runs = [json.loads(f.read_text())['started'] for f in (RESULTS/'runs').glob(f'{r.notebook}.seed*.json')]
        first = min(runs, default=None)
        if first is None or pd.Timestamp(when) > pd.Timestamp(first):
            late.append(f'{r.notebook}: {r.claim!r} declared in {r.declared} ({when}), after its runs started ({first})')
    assert not late, 'expected verdicts not declared before their runs:\n' + '\n'.join(late)


# What the tests above must catch.

def test_a_flipped_record_is_caught(tmp_path):
    """Copy the committed results, take a finding that holds and compares two numbers, and swap the two numbers on every
    seed: the agreement test must then report it as failing. The copy has no ledger (its runs may all be pending) and
    is judged with no written or differing verdict: the mechanism, not the committed verdicts, is under test."""
    res = tmp_path/'tiny'
    shutil.copytree(RESULTS/'records', res/'records'); shutil.copytree(RESULTS/'claims', res/'claims')
    for paper in PAPERS:
        claims, recs = _claims_and_records(res, paper)
        t = claims_table(claims, recs, verdicts=NO_WRITTEN_VERDICT).set_index('claim')
        c = next((c for c in claims if c['kind'] == 'finding' and t.loc[c['text'], 'verdict'] == 'holds'
                  and not t.loc[c['text'], 'constant'] and len(c['margin']) == 1 and len(c['margin'][0]['refs']) == 2
                  and c['margin'][0]['const'] == 0), None)
        if c: break
    assert c, 'no committed finding holds on a difference of two numbers: nothing to flip'
    assert not [p for p in _problems(res, paper, NO_WRITTEN_VERDICT, NO_DIFFERING) if p.startswith(f"{c['notebook']}: {c['text']!r}")]
    (item, a, metric, _), (_, b, _, _) = c['margin'][0]['refs']
    for f in (res/'records').glob(f"{c['notebook']}.seed*.csv"):
        df = pd.read_csv(f)
        ia = (df['item'] == item) & (df.method == a) & (df.metric == metric)
        ib = (df['item'] == item) & (df.method == b) & (df.metric == metric)
        df.loc[ia, 'value'], df.loc[ib, 'value'] = df.loc[ib, 'value'].values, df.loc[ia, 'value'].values
        df.to_csv(f, index=False)
    bad = _problems(res, paper, NO_WRITTEN_VERDICT, NO_DIFFERING)
    assert f"{c['notebook']}: {c['text']!r} fails" in ' | '.join(bad), f"swapping {a} and {b} in {item} did not flip {c['text']!r}"


def _made_up_runs(tmp_path: Path, kind: str = 'finding') -> Path:
    """Three seeds of a made-up FastFill notebook: A at 60, 61, 62 and B at 50 on every seed; findings 'A > B' (+10 ± 1)
    and 'B above 49' (+1 on every seed, declared as `kind`)."""
    for seed in range(3):
        book = RecordBook('FastFill', '20_made_up', ExperimentParams(seed=seed, out_dir=tmp_path), 'toy')
        book.add('Table 1', 'A', 'top1', 60. + seed); book.add('Table 1', 'B', 'top1', 50.)
        book.claim('Table 1: A > B', diff(('Table 1', 'A', 'top1'), ('Table 1', 'B', 'top1')))
        book.claim('Table 1: B above 49', above(('Table 1', 'B', 'top1'), 49.), kind=kind)
    return tmp_path/'tiny'


def _verdicts(tmp_path: Path, *rows) -> Path:
    f = tmp_path/'expected_verdicts.csv'
    pd.DataFrame(rows, columns=EXPECTED_VERDICTS_COLUMNS).to_csv(f, index=False)
    return f


def test_a_written_verdict_is_read_from_the_data_file(tmp_path):
    res = _made_up_runs(tmp_path, kind='check')
    assert _problems(res, 'FastFill', _verdicts(tmp_path)) == []
    f = _verdicts(tmp_path, ('20_made_up', 'Table 1: A > B', 'fails', 'made up', 'prerun'))
    bad = _problems(res, 'FastFill', f)
    assert len(bad) == 1 and bad[0].startswith("20_made_up: 'Table 1: A > B' holds (margin +11.00 ± 1.00), expected fails"), bad


def test_an_unknown_claim_key_is_rejected(tmp_path):
    res = _made_up_runs(tmp_path, kind='check')
    for nb, claim in [('20_made_up', 'Table 1: A > C'), ('20_made_up', 'Table 1: A > B ')]:   # a typo, a trailing space
        f = _verdicts(tmp_path, ('20_made_up', 'Table 1: A > B', 'fails', 'made up', 'prerun'), (nb, claim, 'fails', 'made up', 'prerun'))
        with pytest.raises(ValueError, match='no notebook declares'): _problems(res, 'FastFill', f)


def test_a_constant_finding_fails_and_a_constant_check_does_not(tmp_path):
    res = _made_up_runs(tmp_path/'finding', kind='finding')
    bad = _problems(res, 'FastFill', _verdicts(tmp_path))
    assert len(bad) == 1 and bad[0].startswith("20_made_up: 'Table 1: B above 49' is a finding with the same margin +1.00 ± 0.00"), bad
    assert _problems(_made_up_runs(tmp_path/'check', kind='check'), 'FastFill', _verdicts(tmp_path)) == []


@pytest.mark.parametrize('row, message', [
    (('20_made_up', 'Table 1: A > B', 'fails', '', 'prerun'), 'no reason'),
    (('20_made_up', 'Table 1: A > B', 'fails', '  ', 'prerun'), 'no reason'),
    (('20_made_up', 'Table 1: A > B', 'fails', 'made up', ''), 'declared is empty'),
    (('20_made_up', 'Table 1: A > B', 'holds', 'made up', 'prerun'), 'delete the row'),
    (('20_made_up', 'Table 1: A > B', 'failed', 'made up', 'prerun'), "expect='failed'"),
    (('20_made_up.ipynb', 'Table 1: A > B', 'fails', 'made up', 'prerun'), "stem"),
])
def test_a_malformed_row_is_rejected(tmp_path, row, message):
    f = _verdicts(tmp_path, ('20_made_up', 'Table 1: B above 49', 'fails', 'made up', 'prerun'), row)
    with pytest.raises(ValueError, match=f'line 3.*{message}'): expected_verdicts(f)
    with pytest.raises(ValueError, match=message): _problems(_made_up_runs(tmp_path, kind='check'), 'FastFill', f)
