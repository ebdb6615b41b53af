"""The numbers in the prose of the experiment and claims notebooks, checked against the records and the papers' table.

Every number with decimals in a markdown cell of `nbs/2*`-`nbs/5*`, and every per-seed quote ('3.1/2.4/5.0'), is
one of:

- a reference (sec. 5.2, eq. 4, Table 2) or a setting written as one (`tau = 0.08`, `\\le 0.5`); numbers inside code
  (backticks) or inside mathematics (`$...$`) are neither results nor the paper's and are not read;
- **the paper's**, marked as the differing verdicts mark it (`test_reason_numbers.PAPER_SPAN`: 'paper 64.51 / 42.05
  against 62.80 / 40.47'), or by 'paper' a few words before it in its clause ("the paper's own lead is 0.40 point
  (53.88 against 53.48)", `PAPER_CLAUSE`), or quoted from the paper's text in double quotes: then
  it must be a number of that paper's rows in `docs/paper_values.csv` (of the tables and figures the cell names, or
  of every row of the paper where it names none), or the difference of two rows of one item and metric;
- **a result quoted per seed** ('3.1/2.4/5.0'): then the committed records must give it, by the rules
  `test_reason_numbers` applies to the reasons of the differing verdicts (the notebook's records, their differences
  and curve statistics, its claims' margins, the notebooks and benchmarks the cell names); not while the cell draws
  on a notebook whose re-run is under way, as a reason is not (`test_reason_numbers.rerun_under_way`);
- listed in `docs/notebook_numbers.csv`, with what it is: `setting` (a value of the recipe or of a rule written in
  words: 'label smoothing 0.1', "the noise rule's 0.5-point band"), `derived` (computed from the paper's numbers but
  not printed by it: a gap between two of its rows of different metrics, a claim's margin on its numbers) or
  `untraced` (a result the records cannot check: a benchmark's log, a single seed's number, a range over the seeds).
  The list must be exactly what the notebooks hold, and its untraced rows may only shrink (`UNTRACED_AT_MOST`, lowered
  as they go): a result quoted anew is quoted per seed, and a re-run that moves a per-seed quote fails here instead
  of leaving the prose silently wrong.

A range over seeds ('1.7-3.0 AUC') cannot be checked: its two ends among one notebook's records are matched by so many
rows that, moving one end by five units in its last place, 84 of 159 such variants of the notebooks' 42 ranges still
matched some row of the notebook's records alone (135 with the reasons' wider rules). So a range is listed as untraced,
and the prose that quotes it is rewritten per seed when its notebook is re-run.

Whole numbers that are not part of a per-seed quote (counts of queries, epochs, identities) are not read: among so many
records they would match by chance."""
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from compatrepro.report import paper_of_notebook
from test_reason_numbers import PAPER_SPAN, PER_SEED, SINGLE, QuoteSources, _at_precision, papers_numbers

ROOT = Path(__file__).resolve().parent.parent
LISTED = ROOT/'docs'/'notebook_numbers.csv'
NOTEBOOKS = sorted(p for p in (ROOT/'nbs').glob('[2-5][0-9]_*.ipynb'))
KINDS = ('setting', 'derived', 'untraced')
UNTRACED_AT_MOST = 48   # the untraced results of 2026-12-01; lower it as they are quoted per seed

DECIMAL = re.compile(r'(?<![\w./])[-+]?\d+\.\d+(?![\w/]|\.\d)')
RANGE = re.compile(r'(?<![\w./-])(\d+\.\d+)-(\d+\.\d+)(?![\w/]|\.\d)')
# what a reference or a setting looks like just before its number
REFERENCE = re.compile(r'(?:secs?\.|Sec\.|Apps?\.|eqs?\.|Eqs?\.|Tables?|Figures?|Fig\.|Alg\.|[Ss]ections?|Appendix|'
                       r'rows?)\s*$')
SETTING = re.compile(r'(?:=|\\le|\\ge|<|>|\\approx|\\leq|\\geq)\s*\$?\s*$')
# what is not prose: code spans and mathematics (replaced by blanks of their length, so that positions hold)
NOT_PROSE = re.compile(r'`[^`]*`|\$\$.*?\$\$|\$[^$]*\$', re.S)
QUOTATION = re.compile(r'"[^"]{0,600}"|“[^”]{0,600}”')   # a quotation of the paper may run over lines
# prose may put a few words between the mark and the number: "the paper's own lead is 0.40 point (53.88 against 53.48)"
PAPER_CLAUSE = re.compile(r"\bpaper(?:'s)?\b(?:[^\d);.]|(?<=[A-Za-z])\d+|(?<=\d)[.:]\d+){0,80}?(?<![\w.:])(?=[-+]?\d)"
                          r"((?:[^);:.]|[.:](?=\S))*)")   # ends at ')', ';', ': ' or '. '; 'R101' and '1:N' are words
ITEM = re.compile(r'\b(?:Table|Figure) A?\d+[a-z]?\b')


def markdown_cells(path: Path) -> list[str]:
    "The markdown cells' texts of notebook `path`, in order."
    return [''.join(c['source']) for c in json.loads(path.read_text())['cells'] if c['cell_type'] == 'markdown']


def _blank(text: str, pattern: re.Pattern) -> str:
    "`text` with every match of `pattern` replaced by spaces of its length."
    return pattern.sub(lambda m: ' ' * len(m.group()), text)


def _before(text: str, at: int, words: int = 5) -> str:
    "The last `words` words before position `at` of `text`, whitespace made single: a listed number's address."
    return ' '.join(text[:at].split()[-words:])


def read_numbers(text: str) -> dict[str, list]:
    """The numbers of one markdown cell's `text`, sorted by what they claim to be: {'paper': [number], 'seeds':
    [per-seed quote], 'ranges': [(low, high)], 'other': [(number, the words before it)]}; references and settings
    dropped."""
    prose = _blank(text, NOT_PROSE)
    paper = [(m.start(1), m.end(1)) for pattern in (PAPER_SPAN, PAPER_CLAUSE) for m in pattern.finditer(prose)]
    paper += [(m.start(), m.end()) for m in QUOTATION.finditer(prose)]
    out = {'paper': [], 'seeds': [], 'ranges': [], 'other': []}
    taken = set()
    for m in PER_SEED.finditer(prose):
        (out['paper'] if any(a <= m.start() < b for a, b in paper) else out['seeds']).append(m.group())
        taken |= set(range(m.start(), m.end()))
    for m in RANGE.finditer(prose):
        if m.start() in taken: continue
        taken |= set(range(m.start(), m.end()))
        if REFERENCE.search(prose[:m.start()]): continue
        if any(a <= m.start() < b for a, b in paper): out['paper'] += [m.group(1), m.group(2)]
        else: out['ranges'].append((m.group(1), m.group(2)))
    for m in DECIMAL.finditer(prose):
        if m.start() in taken: continue
        before = prose[max(0, m.start() - 14):m.start()]
        if REFERENCE.search(before) or SETTING.search(before): continue
        if any(a <= m.start() < b for a, b in paper): out['paper'].append(m.group())
        else: out['other'].append((m.group(), _before(prose, m.start())))
    return out


def scan() -> tuple[list, list, set, set]:
    """(the paper's numbers that its rows do not give, the results the records do not give or cannot check, every
    other number as (notebook, number, before), the per-seed quotes not checked because their cell draws on a re-run
    under way (`test_reason_numbers.rerun_under_way`)) of the notebooks' prose."""
    values = pd.read_csv(ROOT/'docs'/'paper_values.csv', keep_default_na=False)
    values = values.assign(table=values.item.str.replace(r' \(.*\)$', '', regex=True))   # 'Table 1 (CIFAR-100)'
    sources = None   # the records are read only if a notebook quotes a result per seed
    bad_paper, bad_result, other, deferred = [], [], set(), set()
    for path in NOTEBOOKS:
        nb, paper = path.stem, paper_of_notebook(path.name)
        rows = values[values.paper == paper]
        for text in markdown_cells(path):
            found = read_numbers(text)
            items = set(ITEM.findall(text)) & set(rows.table)
            pv = papers_numbers(rows[rows.table.isin(items)] if items else rows)
            for q in found['paper']:
                if not all(_at_precision(x, pv) for x in SINGLE.findall(q)): bad_paper.append((nb, q))
            bad_result += [(nb, f'{a}-{b}') for a, b in found['ranges']]   # no record can check a range
            if found['seeds']:
                sources = sources or QuoteSources()
                if sources.deferred(nb, text):
                    deferred |= {(nb, q) for q in found['seeds']}
                else:
                    c = sources.candidates(nb, text)
                    bad_result += [(nb, q) for q in found['seeds'] if not sources.traced(q, c)]
            other |= {(nb, x, before) for x, before in found['other']}
    return bad_paper, bad_result, other, deferred


@pytest.fixture(scope='module')
def scanned():
    return scan()


def test_the_papers_numbers_in_notebooks_are_the_papers(scanned):
    bad = scanned[0]
    assert not bad, ("numbers a notebook's prose marks as the paper's ('paper 64.51', or in a quotation of the paper) "
                     "that no row of that paper in docs/paper_values.csv gives (of the tables and figures the cell "
                     "names), nor the difference of two: correct them, or add the paper's number to "
                     "docs/paper_values.csv with where the paper prints it:\n"
                     + '\n'.join(f'  {n}: {q}' for n, q in bad))


QUOTE = re.compile(r'[\d.]+-[\d.]+|[^/]+/[^/]+/[^/]+')   # a listed row's number that is a range or a per-seed quote


def _listed() -> pd.DataFrame:
    listed = pd.read_csv(LISTED, dtype=str, keep_default_na=False)
    assert list(listed.columns) == ['notebook', 'number', 'before', 'kind']
    assert set(listed.kind) <= set(KINDS), f'kinds are {KINDS}'
    return listed.assign(quote=listed.number.map(lambda x: bool(QUOTE.fullmatch(x))))


def test_notebook_results_are_what_the_records_give(scanned):
    listed = _listed()
    untraced = {(r.notebook, r.number) for r in listed[listed.quote].itertuples() if r.kind == 'untraced'}
    new, gone = set(scanned[1]) - untraced, untraced - set(scanned[1]) - scanned[3]
    n = int((listed.kind == 'untraced').sum())
    assert n <= UNTRACED_AT_MOST, (
        f'{n} untraced results in {LISTED.relative_to(ROOT)}, more than the {UNTRACED_AT_MOST} it may hold: quote a '
        'new result per seed (the records then check it) instead of listing it')
    assert not new, ("results quoted in a notebook's prose (per seed, or as a range over seeds 0-2) that the committed "
                     "records do not give: re-measure them (a re-run moved them?), quote a range per seed, or, where "
                     f"no record reaches (a log), list them in {LISTED.relative_to(ROOT)} as untraced:\n"
                     + '\n'.join(f'  {n}: {q}' for n, q in sorted(new)))
    assert not gone, (f'untraced results of {LISTED.relative_to(ROOT)} that the records now give, or that no notebook '
                      'quotes: delete them:\n' + '\n'.join(f'  {n}: {q}' for n, q in sorted(gone)))


def test_every_other_number_is_listed(scanned):
    listed = _listed()
    rows = {(r.notebook, r.number, r.before) for r in listed[~listed.quote].itertuples()}
    new, gone = scanned[2] - rows, rows - scanned[2]
    assert not new, ("numbers in a notebook's prose that are no reference, no marked paper's number and no result "
                     "quoted per seed: mark a paper's number ('paper 64.51'), quote a result per seed, or list it in "
                     f"{LISTED.relative_to(ROOT)} as a setting or as untraced (notebook, number, the five words "
                     'before it, kind):\n' + '\n'.join(f'  {n},{x},{b}' for n, x, b in sorted(new)))
    assert not gone, (f'rows of {LISTED.relative_to(ROOT)} that no notebook holds any more: delete them:\n'
                      + '\n'.join(f'  {n},{x},{b}' for n, x, b in sorted(gone)))


@pytest.mark.parametrize('text, kind, expected', [
    ('gains (paper 64.51 / 42.05 against 62.80); then', 'paper', ['64.51', '42.05', '62.80']),
    ('"by over 3.5%" here', 'paper', ['3.5']),
    ("the paper's own lead is 0.40 point (53.88 against 53.48), below the 0.5 band", 'paper',
     ['0.40', '53.88', '53.48']),
    ("the paper's ten points. Then 0.5", 'paper', []),
    ('RM leads (by 1.7-3.0 AUC)', 'ranges', [('1.7', '3.0')]),
    ('ends -0.89/-2.02/-2.59 below', 'seeds', ['-0.89/-2.02/-2.59']),
    ('secs. 5.1-5.3 and sec. 3.1', 'ranges', []),
    ('at $\\tau = 0.08$ and `lr=0.1`, smoothing 0.1', 'other', [('0.1', 'at and , smoothing')]),
])
def test_a_number_is_read_as_what_it_claims_to_be(text, kind, expected):
    assert read_numbers(text)[kind] == expected


def test_a_per_seed_quote_in_prose_is_traced_to_the_records():
    "A notebook's record quoted per seed traces; moved by a unit in its last place on one seed, it does not."
    frames = [pd.read_csv(ROOT/'results'/'tiny'/'records'/f'20_fastfill_imagenet.seed{s}.csv') for s in (0, 1, 2)]
    row = frames[0].iloc[0]
    at = [f[(f['item'] == row['item']) & (f['metric'] == row['metric']) & (f['method'] == row['method'])]['value']
          .iloc[0] for f in frames]
    quote = '/'.join(f'{v:.2f}' for v in at)
    moved = '/'.join(f'{v + (0.01 if i == 1 else 0):.2f}' for i, v in enumerate(at))
    sources = QuoteSources()
    for q, expected in ((quote, True), (moved, False)):
        text = f'the curve ends at {q} on seeds 0-2'
        assert read_numbers(text)['seeds'] == [q]
        assert sources.traced(q, sources.candidates('20_fastfill_imagenet', text)) is expected
