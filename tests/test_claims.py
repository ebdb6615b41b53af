"""The claims and their expected verdicts. Every claim a paper's claims notebook declared, recomputed from the committed
tiny-scale records, must reach its expected verdict (`docs/claims.csv`: the paper's, 'holds', unless its row says
otherwise) or be a verdict that `docs/differing_verdicts.csv` explains with its measured reason; no finding may rest on
a margin that is the same on every seed, and no claim may be missing its numbers once its notebook's runs are current.
Every claim has exactly one row of the data file and every row a claim, and each row was declared before the runs it
judges. A flipped record (in any paper), an unknown or duplicate key, a constant finding and a malformed row must each
be caught: those are shown on copies of the committed records and on small made-up runs."""
import ast, json, re, shutil, subprocess, sys
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from compatrepro.report import PAPER_DECADES, paper_of_notebook
from compatrepro.ledger import pending_notebooks
from compatrepro.claims import (CLAIMS_COLUMNS, DIFFERING_VERDICTS_COLUMNS, ClaimSet, above, claims_problems,
                                claims_table, declared_claims, diff, differing_verdicts, load_claims)

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT/'results'/'tiny'
DECLARED = ROOT/'docs'/'claims.csv'
DIFFERING = ROOT/'docs'/'differing_verdicts.csv'
PAPERS = [p for d, p in PAPER_DECADES.items() if list(ROOT.glob(f'nbs/{d}9_*_claims.ipynb'))]
NO_DIFFERING = pd.DataFrame(columns=DIFFERING_VERDICTS_COLUMNS)          # no disagreement explained


def _claims_and_records(res: Path, paper: str, skip_pending: bool = True):
    "`paper`'s saved claims and its records under `res`, less those of notebooks whose re-runs are pending (`skip_pending`)."
    pending = pending_notebooks(res) if skip_pending else set()
    claims = [c for f in sorted((res/'claims').glob('*.json')) if paper_of_notebook(f.stem + '.ipynb') == paper
              and f.stem not in pending for c in load_claims(f)]
    recs = pd.concat([pd.read_csv(f).assign(notebook=f.name.split('.seed')[0]) for f in sorted((res/'records').glob('*.csv'))],
                     ignore_index=True)
    return claims, recs[(recs.paper == paper) & ~recs.notebook.isin(pending)]


def _rows_of(paper: str, declared=DECLARED) -> pd.DataFrame:
    dc = declared_claims(declared)
    return dc[dc.notebook.map(lambda nb: paper_of_notebook(nb + '.ipynb')) == paper]


# The committed results and the data file, as they are.

@pytest.mark.parametrize('paper', PAPERS)
def test_committed_verdicts_are_the_expected_ones(paper):
    """Every committed claim of `paper` on current runs reaches its expected verdict, no finding has a constant margin,
    and none is missing its numbers."""
    claims, recs = _claims_and_records(RESULTS, paper)
    if not claims:      # every notebook of the paper has its re-runs pending: judged once they land
        assert _claims_and_records(RESULTS, paper, skip_pending=False)[0], f'no claims of {paper} are saved under {RESULTS}/claims'
        return
    judged = {c['notebook'] for c in claims}   # a notebook whose re-runs are pending is judged once they land
    rows = _rows_of(paper)
    rows = rows[rows.notebook.isin(judged)]
    differing = differing_verdicts(DIFFERING)
    bad = claims_problems(claims_table(claims, recs, declared=rows, differing=differing[differing.notebook.isin(judged)]))
    assert not bad, ('claims that do not reach their expected verdict without a measured reason, reasons for a verdict '
                     'that moved or for a disagreement that is gone, findings whose margin does not move between seeds, or '
                     f'claims without their numbers (an expected verdict other than the paper\'s is written in '
                     f'{DECLARED.relative_to(ROOT)} before the runs it judges; a verdict a run found is a row of '
                     f'{DIFFERING.relative_to(ROOT)}, with its measured reason):\n' + '\n'.join(bad))


@pytest.mark.parametrize('paper', PAPERS)
def test_every_claim_has_one_row_and_every_row_a_claim(paper):
    """The saved claims of `paper` (its claims notebook's last run) and the rows of docs/claims.csv name the same
    (notebook, key) pairs, pending re-runs or not: the claims notebook re-runs from records in seconds."""
    claims, _ = _claims_and_records(RESULTS, paper, skip_pending=False)
    have = {(c['notebook'], c['key']) for c in claims}
    rows = set(zip(*_rows_of(paper)[['notebook', 'key']].values.T)) if len(_rows_of(paper)) else set()
    assert not have - rows, f'claims without a row of {DECLARED.relative_to(ROOT)}: {sorted(have - rows)}'
    assert not rows - have, (f'rows of {DECLARED.relative_to(ROOT)} that no saved claim has (re-run the claims notebook, '
                             f'which writes the file): {sorted(rows - have)}')


DECLARATIONS = """
import json, os, sys
from pathlib import Path
nb = Path(sys.argv[1]).resolve()
os.environ['COMPATREPRO_NOTEBOOK'] = str(nb); os.chdir(nb.parent)
cells = [''.join(c['source']) for c in json.loads(nb.read_text())['cells'] if c['cell_type'] == 'code']
g = {'__name__': '__main__'}
for i, src in enumerate(cells):
    if 'claims_overview(book' in src: break
    exec(compile(src, f'<{nb.name} code cell {i}>', 'exec'), g)
print('@@' + json.dumps(dict(rows=g['C'].rows(sys.argv[2]).values.tolist(),
                             claims=[[c['notebook'], c['key']] for c in g['C'].claims])))
"""


def _claims_notebook(paper: str) -> Path:
    return next(ROOT.glob(f'nbs/{[d for d, p in PAPER_DECADES.items() if p == paper][0]}9_*_claims.ipynb'))


def _declarations(paper: str) -> dict:
    """What `paper`'s claims notebook declares, run up to its judging cell in a process of its own (the declarations
    read only the committed records): {'rows': its rows of docs/claims.csv, 'claims': [(notebook, key)]}."""
    nb = _claims_notebook(paper)
    r = subprocess.run([sys.executable, '-c', DECLARATIONS, str(nb), str(DECLARED)], capture_output=True, text=True,
                       cwd=ROOT, timeout=600)
    assert r.returncode == 0, f'{nb.name} did not declare its claims:\n{r.stderr[-3000:]}'
    return json.loads(r.stdout.split('@@')[-1])


@pytest.mark.parametrize('paper', PAPERS)
def test_the_data_file_is_what_the_claims_notebook_declares(paper):
    """docs/claims.csv is made by the claims notebooks (`write_claims`), never edited by hand: `paper`'s rows are, in
    order, the claims its notebook declares with their words, kinds, expectations and reasons as written there."""
    rows = _rows_of(paper)
    made = pd.DataFrame(_declarations(paper)['rows'], columns=CLAIMS_COLUMNS)
    made = made.sort_values('notebook', kind='stable').reset_index(drop=True)
    assert made.values.tolist() == rows.reset_index(drop=True).values.tolist(), (
        f'{DECLARED.relative_to(ROOT)} is not what the claims notebook of {paper} declares: re-run it (compatrepro '
        f'reproduce --only {_claims_notebook(paper).stem} --seeds 0 1 2), which writes the file')


@pytest.mark.parametrize('paper', PAPERS)
def test_each_claim_key_is_written_out_once(paper):
    """Each claim's key appears in its paper's claims notebook as a string of its own, once per notebook whose claim it
    names (a key shared by several experiment notebooks, once for each): a search for the key finds its words and its
    margin, never a key built by code alone."""
    nb = _claims_notebook(paper)
    strings = Counter()
    for c in json.loads(nb.read_text())['cells']:
        if c['cell_type'] == 'code':
            strings.update(n.value for n in ast.walk(ast.parse(''.join(c['source'])))
                           if isinstance(n, ast.Constant) and isinstance(n.value, str))
    declared = Counter(k for _, k in _declarations(paper)['claims'])
    wrong = {k: (strings[k], n) for k, n in declared.items() if strings[k] != n}
    assert not wrong, (f'claim keys of {nb.name} not written out once per notebook that declares them '
                       f'(key: (times written, notebooks)): {wrong}; write each in C.claim or C.declare')


ABBREVIATIONS = ('App.', 'sec.', 'eq.', 'Eq.', 'eqs.', 'Fig.', 'e.g.', 'i.e.', 'vs.', 'cf.', 'al.', 'No.')


def _sentences(text: str) -> list[str]:
    "`text` cut after each '.' or ';' outside parentheses and abbreviations (and not inside a number)."
    out, cur, depth = [], '', 0
    for tok in re.split(r'(\s+)', text):
        depth += tok.count('(') - tok.count(')')
        cur += tok
        if (depth <= 0 and tok.strip() and tok[-1] in '.;' and not tok.endswith(ABBREVIATIONS)
                and not re.fullmatch(r'[A-Z]?\d*\.\d*\.?|\d+\.', tok)):
            out.append(cur.strip()[:-1]); cur = ''
    return out + ([cur.strip()] if cur.strip() else [])


def _pasted(texts) -> dict:
    "{sentence (its start): [names]} of the sentences of 150 characters or more that several of `texts` ((name, text)) hold."
    where = {}
    for name, text in texts:
        for s in _sentences(text):
            if len(s) >= 150 and '{shared:' not in s:
                where.setdefault(s, []).append(name)
    return {s[:80] + '...': w for s, w in where.items() if len(w) > 1}


def test_a_shared_reason_is_written_once():
    """A sentence of 150 characters or more that explains several differing verdicts is written once, in
    docs/shared_reasons.csv, and referred to as {shared:name} (`differing_verdicts` writes it out): pasted into two rows,
    the copies drift apart when one is re-measured."""
    raw = differing_verdicts(DIFFERING, expand=False)
    shared = pd.read_csv(ROOT/'docs'/'shared_reasons.csv', dtype=str, keep_default_na=False)
    twice = _pasted([*((f'{r.notebook} {r.key}', r.reason) for r in raw.itertuples()),
                     *((f'shared {r.name}', r.reason) for r in shared.itertuples())])
    assert not twice, f'sentences written in several places (write each once in docs/shared_reasons.csv): {twice}'


def test_a_reason_pasted_twice_is_caught():
    long = ', '.join(['the old model trains on all 120 classes as App. B.1 does (eq. 2; 12-15 points of room)'] * 2)
    assert list(_pasted([('a', f'{long}. On top1'), ('b', f'So: {long}; on mAP')]).values()) == []   # not a whole sentence of b
    assert list(_pasted([('a', f'{long}. On top1'), ('b', f'On mAP. {long}')]).values()) == [['a', 'b']]
    assert len(_sentences('A first one (eq. 2; see App. B.1). A second, 0.5 long; a third')) == 3


def test_the_data_files_are_well_formed():
    assert list(declared_claims(DECLARED).columns) == CLAIMS_COLUMNS
    keys = {tuple(k) for k in declared_claims(DECLARED)[['notebook', 'key']].values}
    dv = pd.read_csv(DIFFERING, dtype=str, keep_default_na=False)
    assert list(dv.columns) == DIFFERING_VERDICTS_COLUMNS
    assert not [k for k in zip(dv.notebook, dv.key) if k not in keys], 'rows of docs/differing_verdicts.csv naming no claim'


def _git(*args) -> str:
    return subprocess.run(['git', '-C', str(ROOT), *args], capture_output=True, text=True).stdout.strip()


@pytest.mark.skipif(not (ROOT/'.git').exists(), reason='needs the repository history')
def test_claims_were_declared_before_the_runs_they_judge():
    """Each row's `declared` is a commit of this repository's history, made before every committed run of its notebook
    started: an expectation written after seeing the numbers it judges is not evidence of anything."""
    late, pending = [], pending_notebooks(RESULTS)
    first_run = {}
    for r in declared_claims(DECLARED).itertuples():
        if r.notebook in pending: continue      # the runs that will judge it are still to come
        when = re.fullmatch('[0-9a-f]{7,40}', r.declared) and _git('show', '-s', '--format=%cI', f'{r.declared}^{{commit}}')
        if not when:
            late.append(f'{r.notebook} {r.key!r}: declared={r.declared!r} is not a commit of this repository'); continue
        if r.notebook not in first_run:
            first_run[r.notebook] = min((json.loads(f.read_text())['started'] for f in (RESULTS/'runs').glob(f'{r.notebook}.seed*.json')), default=None)
        first = first_run[r.notebook]
        if first is None or pd.Timestamp(when) > pd.Timestamp(first):
            late.append(f'{r.notebook} {r.key!r}: declared in {r.declared} ({when}), after its runs started ({first})')
    assert not late, 'claims not declared before their runs:\n' + '\n'.join(late)


# What the tests above must catch.

@pytest.mark.parametrize('paper', PAPERS)
def test_a_flipped_record_is_caught(tmp_path, paper):
    """Copy the committed results, take a finding of `paper` that holds and compares two numbers, and swap the two
    numbers on every seed: the agreement test must then report it as failing. The copy is judged with every claim
    expected to hold and no differing verdict, pending re-runs or not: the mechanism, not the committed verdicts, is under test."""
    res = tmp_path/'tiny'
    shutil.copytree(RESULTS/'records', res/'records'); shutil.copytree(RESULTS/'claims', res/'claims')
    claims, recs = _claims_and_records(res, paper, skip_pending=False)
    rows = _rows_of(paper).assign(expect='holds', reason='')
    t = claims_table(claims, recs, declared=rows, differing=NO_DIFFERING, strict=False).set_index(['notebook', 'key'])
    c = next((c for c in claims if t.loc[(c['notebook'], c['key']), 'kind'] == 'finding'
              and t.loc[(c['notebook'], c['key']), 'verdict'] == 'holds' and not t.loc[(c['notebook'], c['key']), 'constant']
              and len(c['margin']) == 1 and len(c['margin'][0]['refs']) == 2 and c['margin'][0]['const'] == 0), None)
    assert c, f'no committed finding of {paper} holds on a difference of two numbers: nothing to flip'
    ra, rb = (tuple(r[:3]) for r in c['margin'][0]['refs'])
    for f in (res/'records').glob(f"{c['notebook']}.seed*.csv"):
        df = pd.read_csv(f)
        ia, ib = ((df['item'] == i) & (df.method == m) & (df.metric == k) for i, m, k in (ra, rb))
        df.loc[ia, 'value'], df.loc[ib, 'value'] = df.loc[ib, 'value'].values, df.loc[ia, 'value'].values
        df.to_csv(f, index=False)
    claims, recs = _claims_and_records(res, paper, skip_pending=False)
    bad = claims_problems(claims_table(claims, recs, declared=rows, differing=NO_DIFFERING, strict=False))
    assert any(p.startswith(f"{c['notebook']} {c['key']!r}:") and ' fails (margin ' in p for p in bad), \
        f"swapping {ra} and {rb} did not flip {c['key']!r}"


def _made_up(tmp_path: Path) -> tuple[list, pd.DataFrame]:
    """Three seeds of a made-up FastFill notebook: A at 60, 61, 62 and B at 50 on every seed; claims 'a-b' (A > B,
    +10 ± 1) and 'b-49' (B above 49, +1 on every seed)."""
    recs = pd.DataFrame([dict(notebook='20_made_up', paper='FastFill', seed=s, item='Table 1', method=m, metric='top1', value=v)
                         for s in range(3) for m, v in (('A', 60. + s), ('B', 50.))])
    C = ClaimSet().of('20_made_up')
    C.claim('a-b', diff(('Table 1', 'A', 'top1'), ('Table 1', 'B', 'top1')))
    C.claim('b-49', above(('Table 1', 'B', 'top1'), 49.))
    C.save(tmp_path/'claims')
    return [c for f in sorted((tmp_path/'claims').glob('*.json')) for c in load_claims(f)], recs


def _declared(tmp_path: Path, *rows) -> Path:
    f = tmp_path/'claims.csv'
    pd.DataFrame(rows, columns=CLAIMS_COLUMNS).to_csv(f, index=False)
    return f


A_B = ('20_made_up', 'a-b', 'Table 1: A > B', 'finding', 'holds', '', 'prerun')
B_49_CHECK = ('20_made_up', 'b-49', 'Table 1: B above 49', 'check', 'holds', '', 'prerun')


def test_a_written_verdict_is_read_from_the_data_file(tmp_path):
    claims, recs = _made_up(tmp_path)
    assert claims_problems(claims_table(claims, recs, declared=_declared(tmp_path, A_B, B_49_CHECK), differing=NO_DIFFERING)) == []
    f = _declared(tmp_path, A_B[:4] + ('fails', 'made up', 'prerun'), B_49_CHECK)
    bad = claims_problems(claims_table(claims, recs, declared=f, differing=NO_DIFFERING))
    assert len(bad) == 1 and bad[0].startswith("20_made_up 'a-b': 'Table 1: A > B' holds (margin +11.00 ± 1.00), expected fails"), bad


@pytest.mark.parametrize('key', ['a-c', 'a-b ', 'A-B'])   # an unknown key, a trailing space, another case
def test_an_unknown_key_is_rejected(tmp_path, key):
    claims, recs = _made_up(tmp_path)
    f = _declared(tmp_path, A_B, B_49_CHECK, ('20_made_up', key, 'Table 1: A > C', 'finding', 'holds', '', 'prerun'))
    with pytest.raises(ValueError, match='no claims notebook declares|without spaces'):
        claims_table(claims, recs, declared=f, differing=NO_DIFFERING)


def test_a_claim_without_a_row_is_rejected(tmp_path):
    claims, recs = _made_up(tmp_path)
    with pytest.raises(ValueError, match="'b-49': declared by a claims notebook, but docs/claims.csv has no row"):
        claims_table(claims, recs, declared=_declared(tmp_path, A_B), differing=NO_DIFFERING)


def test_a_key_declared_twice_is_rejected(tmp_path):
    with pytest.raises(ValueError, match='line 3.*declared twice'): declared_claims(_declared(tmp_path, A_B, A_B))
    C = ClaimSet().of('20_made_up'); C.claim('a-b', above(('Table 1', 'A', 'top1'), 0.))
    with pytest.raises(ValueError, match='declared twice'): C.claim('a-b', above(('Table 1', 'B', 'top1'), 0.))


def test_a_constant_finding_fails_and_a_constant_check_does_not(tmp_path):
    claims, recs = _made_up(tmp_path)
    bad = claims_problems(claims_table(claims, recs, declared=_declared(tmp_path, A_B, B_49_CHECK[:3] + ('finding',) + B_49_CHECK[4:]),
                                       differing=NO_DIFFERING))
    assert len(bad) == 1 and bad[0].startswith("20_made_up 'b-49': a finding with the same margin +1.00 ± 0.00"), bad
    assert claims_problems(claims_table(claims, recs, declared=_declared(tmp_path, A_B, B_49_CHECK), differing=NO_DIFFERING)) == []


def test_a_missing_claim_is_a_problem_once_its_runs_are_current(tmp_path):
    claims, recs = _made_up(tmp_path)
    C = ClaimSet().of('20_made_up'); C.claim('a-b-top5', diff(('Table 1', 'A', 'top5'), ('Table 1', 'B', 'top5')))
    t = claims_table(claims + C.claims, recs, differing=NO_DIFFERING,
                     declared=_declared(tmp_path, A_B, B_49_CHECK, ('20_made_up', 'a-b-top5', 'Table 1: A > B on top5', 'finding', 'holds', '', 'prerun')))
    assert t.set_index('key').loc['a-b-top5', 'verdict'] == 'missing'
    assert claims_problems(t, missing_ok={'20_made_up'}) == []     # its re-run is pending: it will record them
    assert len(claims_problems(t)) == 1 and 'no seed has its records' in claims_problems(t)[0]


@pytest.mark.parametrize('row, message', [
    (A_B[:4] + ('fails', '', 'prerun'), 'without a reason'),
    (A_B[:4] + ('fails', '  ', 'prerun'), 'without a reason'),
    (A_B[:6] + ('',), 'declared is empty'),
    (A_B[:4] + ('failed', 'made up', 'prerun'), "expect='failed'"),
    (A_B[:3] + ('sanity',) + A_B[4:], "kind='sanity'"),
    (A_B[:2] + ('',) + A_B[3:], 'the claim is empty'),
    (('20_made_up.ipynb',) + A_B[1:], 'stem'),
    (('20_made_up', 'a,b') + A_B[2:], 'without spaces'),
])
def test_a_malformed_row_is_rejected(tmp_path, row, message):
    with pytest.raises(ValueError, match=f'line 3.*{message}'): declared_claims(_declared(tmp_path, B_49_CHECK, row))
