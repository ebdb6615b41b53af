"""The per-seed numbers quoted in the reasons of the differing verdicts, checked against the records.

A reason measured after a run quotes that run's numbers, one per seed ('-0.89/-2.02/-2.59'). At the precision quoted,
each such quote must be one of:

- a record of the row's notebook on seeds 0-2, or the margin of one of its claims ('fails, -5.34/-6.62/-0.64');
- the difference of two records of one item and metric, of one item and method (a curve's end minus its start), or of
  one metric across two items;
- what a reason reads off a curve, per seed (its lowest point, its largest step, its mean, the largest gap between two
  methods' curves: `_curve_statistics`), or off RACT's curves averaged over the allocations;
- for a quote with decimals, a record minus the midpoint of two others of its item and metric, or of its item and
  method, or that midpoint itself (`_midpoints`);
- a count of queries, where the reason names how many there are ('of the 2,400 queries'): one of the above times
  that number, a whole number of queries; or a whole percentage, one record over another of its item and metric;
- such a number or margin of a notebook the reason cites ("27's Models records"), or the difference of a record of
  the row's notebook and one of that notebook of the same metric; for a quote with decimals, such a number of
  another notebook of the same paper (whole numbers would match by chance among so many);
- where the reason names a benchmark (`benchmarks/<name>.py` or `.csv`), a column of its committed CSVs on seeds
  0-2 or the difference of two of its rows.

A re-run that moves the numbers makes the quote fail here instead of leaving the reason silently wrong. How loose the
rules are was measured on the quotes they trace: moving one seed's number by five units in its last place, 9 to 14
of the 1,691 quotes with decimals still trace (the seed moved: 9/12/14; the midpoints add most of them, quotes
under a point such as '+0.09/+0.01/+0.07'), and 2 to 5 of the 51 whole numbers. A quote the records cannot give (a
number only a benchmark's log or another notebook's output holds) is listed in `docs/untraced_numbers.csv`, and the
list may only shrink: a quote that becomes traceable, or disappears, must leave it.

A re-run longer than a working session lands in pieces (docs/ci.md): while the ledger lists some of a notebook's
committed seeds and not the others (`rerun_under_way`), its records mix the runs being replaced with those replacing
them, and a quote drawn from it (a reason of that notebook, or one that cites it) is not checked; it is checked again,
in full, as soon as the notebook's last seed lands and leaves the ledger, so the session that lands it rewrites the
quotes."""
import glob
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from compatrepro.claims import claim_margins, claim_refs, differing_verdicts, load_claims
from compatrepro.ledger import pending_runs
from compatrepro.report import paper_of_notebook

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT/'results'/'tiny'
UNTRACED = ROOT/'docs'/'untraced_numbers.csv'
NUM = r'[-+]?\d+(?:\.\d+)?'
# not positions ('t=0.6/0.7/0.7'), nor three of a longer list ('15.87/15.14/13.73/13.28')
PER_SEED = re.compile(rf'(?<![\w./])(?<!t=){NUM}/{NUM}/{NUM}(?![\w/]|\.\d)')
SEEDS = (0, 1, 2)


def per_seed_quotes(text: str) -> list[str]:
    "The quotes of one number per seed of seeds 0-2 in `text`: three numbers joined by '/'."
    return PER_SEED.findall(text)


def quote_tolerance(parts: list[str]) -> np.ndarray:
    "How far a value may be from each number of a quote (`parts`) and still round to it, at its number's precision."
    return 10.0 ** -np.array([len(x.split('.')[1]) if '.' in x else 0 for x in parts]) * 0.51 + 1e-9


def quoted(quote: str, candidates: np.ndarray) -> bool:
    """Whether a row of `candidates` (n x 3, seeds 0-2) rounds to `quote` at the precision of each of its numbers, or
    does so in percent (a share quoted as a percentage)."""
    xs = quote.split('/')
    target, tol = np.array([float(x) for x in xs]), quote_tolerance(xs)
    c = np.asarray(candidates, dtype=float).reshape(-1, 3)
    return bool(len(c)) and bool((np.abs(c - target) <= tol).all(axis=1).any()
                                 or (np.abs(c * 100 - target) <= tol).all(axis=1).any())


def _differences(v: np.ndarray) -> np.ndarray:
    "Every row of `v` (n x 3) minus every row, per seed."
    return (v[:, None, :] - v[None, :, :]).reshape(-1, 3)


# a curve's point: 'top1 at t=0.3', 'rmAP at 20%', or a bare backfilled share ('20%', RACT's tables)
CURVE = re.compile(r'^(?:(?P<family>.+) at )?(?P<position>t=[\d.]+|[\d.]+%)$')


def _curve_statistics(p: pd.DataFrame) -> list[np.ndarray]:
    """What a reason reads off a curve (`p`: records on seeds 0-2 indexed by item, metric, method), per seed, where
    the position differs by seed: each curve's lowest and highest point, their distance from its start and from its end,
    its largest and smallest step, its mean over its points ('its six-fraction mean'), and, for two methods' curves of
    one item, their largest and smallest difference."""
    d = p.reset_index()
    m = d.metric.str.extract(CURVE.pattern)
    d = d.assign(family=m.family.fillna(''), at=m.position.str.strip('t=%').astype(float)).dropna(subset=['at'])
    curves = {}
    for (item, family, method), g in d.groupby(['item', 'family', 'method']):
        curves.setdefault((item, family), {})[method] = g.sort_values('at')[list(SEEDS)].values   # positions x seeds
    out = []
    for by_method in curves.values():
        for v in by_method.values():
            steps = np.diff(v, axis=0) if len(v) > 1 else np.zeros((1, 3))
            out.append(np.stack([v.min(0), v.max(0), v.min(0) - v[0], v.max(0) - v[0], v[-1] - v.min(0),
                                 v[-1] - v.max(0), steps.min(0), steps.max(0), v.mean(0)]))
        same = [v for v in by_method.values() if len(v) == len(next(iter(by_method.values())))]
        for a in same:
            for b in same:
                if a is not b: out.append(np.stack([(a - b).max(0), (a - b).min(0)]))
    return out


ALLOCATION = re.compile(r'^(?P<base>.+) \((?P<allocation>[\w-]+), (?P<test>[^,()]+)\)$')


def _allocation_means(p: pd.DataFrame) -> pd.DataFrame:
    """RACT's curves averaged over the allocations ('ours, random (expansion, ROxford)' and its open-class and open-data
    twins: 'ours, random (ROxford)'), as 42's claims read them; `p` as `_on_seeds` gives it."""
    d = p.reset_index()
    m = d.method.str.extract(ALLOCATION.pattern)
    d = d.assign(method=m.base + ' (' + m.test + ')').dropna(subset=['method'])
    return d.groupby(['item', 'metric', 'method'])[list(SEEDS)].mean()


def _on_seeds(records: pd.DataFrame) -> pd.DataFrame:
    "One notebook's `records` on seeds 0-2 (columns), indexed by item, metric and method; empty without those seeds."
    p = records.pivot_table(index=['item', 'metric', 'method'], columns='seed', values='value', aggfunc='first')
    return p[list(SEEDS)].dropna() if set(SEEDS) <= set(p.columns) else p.iloc[:0, :0]


def _by_metric(p: pd.DataFrame) -> dict:
    "{metric: its records on seeds 0-2 (n x 3)} of one notebook's records on seeds 0-2 (`_on_seeds`)."
    return {m: g.values for m, g in p.groupby(level=1)}


def _across(a: dict, b: dict) -> list[np.ndarray]:
    "Every record of `a` minus every record of `b` of the same metric (`_by_metric` of two notebooks), per seed."
    return [(a[m][:, None, :] - b[m][None, :, :]).reshape(-1, 3) for m in set(a) & set(b)]


def _source_groups(p: pd.DataFrame) -> list[np.ndarray]:
    """What one notebook's records on seeds 0-2 (`_on_seeds`) give a quote, in four groups, the likeliest source
    first: its records; the difference of every two records of one item and metric, and of one item and method (a
    curve's end minus its start); what a reason reads off a curve (`_curve_statistics`); the difference of every two
    records of one metric across the notebook's items (too many for a whole number to mean anything)."""
    if p.empty: return [np.zeros((0, 3))] * 4
    within = [_differences(g.values) for level in ([0, 1], [0, 2]) for _, g in p.groupby(level=level)]
    means = _allocation_means(p)
    metrics = _by_metric(p)
    return [p.values, np.concatenate(within), np.concatenate([*_curve_statistics(p), means.values,
                                                             *_curve_statistics(means)]),
            np.concatenate([np.zeros((0, 3)), *_across(metrics, metrics)])]


def _sources(groups: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """A notebook's `_source_groups` as (all of them, those a count of queries may be read from: all but the
    differences across items)."""
    close = np.concatenate(groups[:3])
    return np.concatenate([close, groups[3]]), close


def _midpoints(p: pd.DataFrame) -> np.ndarray:
    """The midpoint of every two records of one item and metric, or of one item and method, and every record of that
    group minus it, either way ('the self-test minus the midpoint of (old, old) and new*', 'mAP~ 1.03 below the straight
    line between its ends'); of one notebook's records on seeds 0-2 (`_on_seeds`). Only for a quote with decimals:
    whole numbers would match by chance among so many."""
    out = []
    for level in ([0, 1], [0, 2]):
        for _, g in p.groupby(level=level):
            v = g.values
            i, j = np.triu_indices(len(v), 1)
            mid = (v[i] + v[j]) / 2
            d = (v[:, None, :] - mid[None, :, :]).reshape(-1, 3)
            out += [mid, d, -d]
    return np.concatenate(out) if out else np.zeros((0, 3))


def _ratios(p: pd.DataFrame) -> np.ndarray:
    """Every record of one notebook on seeds 0-2 (`_on_seeds`) over every other of its item and metric: a whole
    percentage ('(new-l2, old) is 58/61/127 % of (old, old)'); not for a quote with decimals, which so many ratios would
    match by chance."""
    groups = [g.values for _, g in p.groupby(level=[0, 1])]
    with np.errstate(divide='ignore', invalid='ignore'):
        out = [(v[:, None, :] / v[None, :, :])[~np.eye(len(v), dtype=bool)] for v in groups]
    return np.concatenate(out) if out else np.zeros((0, 3))


def _counts(shares: np.ndarray, reason: str) -> np.ndarray:
    """The numbers of queries that `shares` (in percent) are of every query total the reason names ('of the 2,400
    queries'), where each is a whole number."""
    totals = {int(n.replace(',', '')) for n in re.findall(r'(\d[\d,]*) queries', reason)}
    counts = np.concatenate([shares * n / 100 for n in totals]) if totals else np.zeros((0, 3))
    counts = counts[(np.abs(counts - counts.round()) < 1e-6).all(axis=1)]   # a share of n queries: whole queries
    return np.concatenate([counts, np.abs(counts)])   # '(19/101/48 queries)' of -0.79/+4.21/+2.00


BENCHMARK = re.compile(r'benchmarks/([\w/]+)\.(?:csv|py)')
NOTEBOOK = re.compile(r"(?<![\w.])(\d\d)(?:_[a-z0-9_]+\b|'s\b)")   # '27_fastfill_side_info', "27's Models records"


STAND_IN_COUNTS = ('seed', 'identities', 'images')   # numbers that name a row (a stand-in's counts), not values


def _benchmark_sources(name: str) -> np.ndarray:
    """Each numeric column of the committed CSVs of benchmark `name` (`benchmarks/<name>.csv` and `<name>*.csv`) that
    have a seed column, per row of the other columns (and of the stand-in's counts) on seeds 0-2, and the difference
    of every two such rows."""
    out = []
    for f in dict.fromkeys([ROOT/'benchmarks'/f'{name}.csv', *sorted((ROOT/'benchmarks').glob(f'{name}*.csv'))]):
        d = pd.read_csv(f) if f.exists() else pd.DataFrame()
        if 'seed' not in d: continue
        numeric = [c for c in d.columns if c not in STAND_IN_COUNTS and pd.api.types.is_numeric_dtype(d[c])]
        keys = [c for c in d.columns if c not in numeric and c != 'seed']
        for c in numeric if keys else []:
            p = d.pivot_table(index=keys, columns='seed', values=c, aggfunc='first')
            if set(SEEDS) <= set(p.columns):
                v = p[list(SEEDS)].dropna().values
                out += [v, _differences(v)]
    return np.concatenate(out) if out else np.zeros((0, 3))


def _claims() -> dict:
    "{(notebook, key): claim} of the committed tiny claims."
    return {(c['notebook'], c['key']): c for f in sorted((RESULTS/'claims').glob('*.json')) for c in load_claims(f)}


def _margins(claims: dict, records: pd.DataFrame) -> dict:
    "{notebook: {key: its claim's margins on seeds 0-2 (1 x 3)}} of `claims` ({(notebook, key): claim}) on `records`."
    out = {}
    for (nb, key), c in claims.items():
        m = claim_margins(c, records[records.notebook == nb], skip_incomplete=True)
        if set(SEEDS) <= set(m): out.setdefault(nb, {})[key] = np.array([[m[s] for s in SEEDS]])
    return out


def rerun_under_way(results: Path = RESULTS) -> set[str]:
    """The notebooks whose re-run is under way in `results`: the ledger lists some of their committed seeds (those with
    records), not all of them."""
    listed, committed = {}, {}
    for nb, seed in pending_runs(results):
        listed.setdefault(nb, set()).add(seed)
    for f in (Path(results)/'records').glob('*.seed*.csv'):
        nb, seed = f.name.split('.seed')
        committed.setdefault(nb, set()).add(int(seed.split('.')[0]))
    return {nb for nb, seeds in listed.items() if seeds < committed.get(nb, set())}


class QuoteSources:
    """What the committed tiny records on seeds 0-2 give a text of one notebook to quote (the rules above): built once,
    asked per text (`candidates`)."""

    def __init__(self):
        records = pd.concat([pd.read_csv(f).assign(notebook=Path(f).name.split('.seed')[0])
                             for f in sorted(glob.glob(str(RESULTS/'records'/'*.csv')))], ignore_index=True)
        on_seeds = {nb: _on_seeds(g) for nb, g in records.groupby('notebook')}   # each notebook pivoted once
        self.groups = {nb: _source_groups(p) for nb, p in on_seeds.items()}
        self.notebooks = {nb: _sources(g) for nb, g in self.groups.items()}
        self.metrics = {nb: _by_metric(p) for nb, p in on_seeds.items()}
        self.ratios = {nb: _ratios(p) for nb, p in on_seeds.items()}
        self.midpoints = {nb: _midpoints(p) for nb, p in on_seeds.items()}
        self.margins = _margins(_claims(), records)
        self.papers = {p: np.concatenate([v[0] for nb, v in self.notebooks.items()
                                          if paper_of_notebook(nb + '.ipynb') == p])
                       for p in {paper_of_notebook(nb + '.ipynb') for nb in self.notebooks}}
        self.benchmarks = {}
        self.under_way = rerun_under_way()

    def cited(self, notebook: str, text: str) -> list[str]:
        "The other notebooks `text` of `notebook` cites ('27_fastfill_side_info', \"27's Models records\")."
        return [nb for nb in self.notebooks if nb[:2] in set(NOTEBOOK.findall(text)) and nb != notebook]

    def deferred(self, notebook: str, text: str) -> bool:
        "Whether `text` of `notebook` draws on a notebook whose re-run is under way (`rerun_under_way`): not checked."
        return bool({notebook, *self.cited(notebook, text)} & self.under_way)

    def candidate_groups(self, notebook: str, text: str, key: str = None) -> tuple[list, list, list]:
        """The candidates (n x 3, seeds 0-2) for `text` of `notebook`, about its claim `key` when it is a reason, as
        (any quote's, a whole number's, a quote with decimals') lists of groups, the likeliest source of a quote first:
        a record of the notebook, its claim's margin, a difference of two of its records, what a curve gives, another
        claim's margin of it or of a notebook it cites, a difference across its items, a cited notebook's, a named
        benchmark's; a count of queries, a percentage; a midpoint, the paper's other notebooks (`tests/requote.py`
        follows a quote through a re-run by them)."""
        none = np.zeros((0, 3))
        margin = self.margins.get(notebook, {}).get(key, none)
        named = set(BENCHMARK.findall(text))
        self.benchmarks |= {n: _benchmark_sources(n) for n in named - set(self.benchmarks)}
        cited = self.cited(notebook, text)
        records, within, curves, across = self.groups.get(notebook, [none] * 4)
        others = [m for nb in [notebook, *cited] for k, m in self.margins.get(nb, {}).items()   # 'x fails, -5.34/..'
                  if (nb, k) != (notebook, key)]
        mine = self.metrics.get(notebook, {})
        elsewhere = [*(self.notebooks[nb][0] for nb in cited),
                     *(d for nb in cited for d in _across(mine, self.metrics[nb]))]
        cat = lambda xs: np.concatenate([none, *xs])
        found = [records, margin, within, curves, cat(others), across, cat(elsewhere),
                 cat(self.benchmarks[n] for n in named)]
        close = self.notebooks.get(notebook, (none, none))[1]
        whole = [_counts(np.concatenate([close, margin]), text), self.ratios.get(notebook, none)]
        decimal = [self.midpoints.get(notebook, none), self.papers.get(paper_of_notebook(notebook + '.ipynb'), none)]
        return found, whole, decimal

    def candidates(self, notebook: str, text: str, key: str = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(any quote's, a whole number's, a quote with decimals') candidates (n x 3, seeds 0-2) for `text` of
        `notebook`, about its claim `key` when it is a reason: `candidate_groups`, each list in one array."""
        return tuple(np.concatenate(g) for g in self.candidate_groups(notebook, text, key))

    def traced(self, quote: str, candidates: tuple[np.ndarray, np.ndarray, np.ndarray], match=None) -> bool:
        "Whether `quote` is one of `candidates` (`candidates`' three) by `match` (default `quoted`) and its rules."
        match = match or quoted
        found, whole, decimal = candidates
        return (match(quote, found) or ('.' in quote and match(quote, decimal))
                or ('.' not in quote and match(quote, whole)))


def untraced_quotes() -> tuple[set[tuple], set[tuple]]:
    """(notebook, key, quote) of every per-seed quote of the differing verdicts that the committed records cannot give,
    and of every quote not checked because its reason draws on a re-run under way (`QuoteSources.deferred`)."""
    sources, out, deferred = QuoteSources(), set(), set()
    for r in differing_verdicts(ROOT/'docs'/'differing_verdicts.csv').itertuples():
        quotes = per_seed_quotes(r.reason)
        if not quotes: continue
        if sources.deferred(r.notebook, r.reason):
            deferred |= {(r.notebook, r.key, q) for q in quotes}; continue
        c = sources.candidates(r.notebook, r.reason, r.key)
        out |= {(r.notebook, r.key, q) for q in quotes if not sources.traced(q, c)}
    return out, deferred


def test_quotes_are_what_the_records_give():
    listed = pd.read_csv(UNTRACED, dtype=str, keep_default_na=False)
    assert list(listed.columns) == ['notebook', 'key', 'quote']
    listed = set(map(tuple, listed.values))
    found, deferred = untraced_quotes()
    new, gone = found - listed, listed - found - deferred
    assert not new, ('per-seed numbers in docs/differing_verdicts.csv (or the shared reasons it refers to) that no '
                     'rule of this module traces to the records on seeds 0-2: re-measure them (a re-run moved them?), '
                     'or, if they come from where no record reaches (a log), add them to '
                     f'{UNTRACED.relative_to(ROOT)}:\n' + '\n'.join(f'  {n} {k!r}: {q}' for n, k, q in sorted(new)))
    assert not gone, (f'rows of {UNTRACED.relative_to(ROOT)} that the records now give, or that no reason quotes: '
                      'delete them:\n' + '\n'.join(f'  {n} {k!r}: {q}' for n, k, q in sorted(gone)))


@pytest.mark.parametrize('quote, candidates, expected', [
    ('-0.89/-2.02/-2.59', [[-0.891, -2.0249, -2.5851]], True),
    ('-0.89/-2.02/-2.59', [[-0.891, -2.03, -2.5851]], False),          # seed 1 moved by a hundredth
    ('18.7/18.9/20.0', [[18.74, 18.91, 19.96]], True),
    ('4.96/5.47/4.28', [[0.0496, 0.0547, 0.0428]], True),               # a share, quoted in percent
    ('8/12/14', [[8.6, 12., 14.]], False),                           # 8.6 is quoted as 9
])
def test_a_quote_is_checked_at_its_precision(quote, candidates, expected):
    assert quoted(quote, np.array(candidates)) is expected
    assert per_seed_quotes(f'is {quote} on seeds 0-2') == [quote]


# A paper's number is marked as the paper's by the word before it: 'paper +1.89', "the paper's 0.1-point lead (90.0
# against 89.9)", "paper's Table 5: +1.71, 64.51 against 62.80"; every number up to the clause's end is the paper's.
PAPER_SPAN = re.compile(r"\bpaper(?:'s)?(?: (?:Table|Figure) [\w.]+)?:? (?=[-+]?\d)([^);]*)")
SINGLE = re.compile(r'(?<![\w./])[-+]?\d+(?:\.\d+)?(?![\w/]|\.\d)')


def papers_numbers(values: pd.DataFrame) -> np.ndarray:
    """What a reason may quote as the paper's from its rows `values` of `docs/paper_values.csv`: a number, or the
    difference of two rows of one item and metric (not ratios: among so many pairs they would match by chance)."""
    out = [values.value.astype(float).values]
    for _, g in values.groupby(['item', 'metric']):
        v = g.value.astype(float).values
        out.append(np.abs(v[:, None] - v[None, :])[~np.eye(len(v), dtype=bool)])   # two rows, not one with itself
    return np.concatenate(out)


def marked_papers_numbers() -> list[tuple]:
    """(notebook, key, number, clause, items) of every number a reason marks as the paper's, with the items of the
    paper's table it may come from: those the row's claim reads and those the reason names ('Table 5')."""
    dv = differing_verdicts(ROOT/'docs'/'differing_verdicts.csv')
    values = pd.read_csv(ROOT/'docs'/'paper_values.csv', keep_default_na=False)
    claims = _claims()
    out = []
    for r in dv.itertuples():
        spans = list(PAPER_SPAN.finditer(r.reason))
        if not spans: continue
        c = claims.get((r.notebook, r.key))
        read = {i for i, _, _ in claim_refs(c)} if c else set()
        items = {i for i in values[values.paper == paper_of_notebook(r.notebook + '.ipynb')].item.unique()
                 if i in read or re.search(rf'\b{re.escape(i)}\b', r.reason)}
        out += [(r.notebook, r.key, x, m.group(0), items) for m in spans for x in SINGLE.findall(m.group(1))]
    return out


def _at_precision(x: str, candidates: np.ndarray) -> bool:
    "Whether one of `candidates` rounds to the number `x` in magnitude, at `x`'s precision."
    tol = 10.0 ** -(len(x.split('.')[1]) if '.' in x else 0) * 0.51 + 1e-9
    return bool((np.abs(np.abs(candidates) - abs(float(x))) <= tol).any())


def untraced_paper_numbers() -> list[tuple]:
    """(notebook, key, number, clause) of every number a reason marks as the paper's that the paper's rows of the items
    its claim reads, or that it names, do not give."""
    values = pd.read_csv(ROOT/'docs'/'paper_values.csv', keep_default_na=False)
    out = []
    for nb, key, x, clause, items in marked_papers_numbers():
        v = values[(values.paper == paper_of_notebook(nb + '.ipynb')) & values.item.isin(items)]
        if not _at_precision(x, papers_numbers(v)): out.append((nb, key, x, clause))
    return out


def test_the_papers_numbers_are_the_papers():
    bad = untraced_paper_numbers()
    assert not bad, ("numbers the differing verdicts mark as the paper's ('paper +1.89') that are no number of that "
                     "paper's rows in docs/paper_values.csv, nor the difference of two: "
                     'correct them, or add the missing paper number to docs/paper_values.csv with where the paper '
                     'prints it:\n' + '\n'.join(f'  {n} {k!r}: {x} in {c!r}' for n, k, x, c in bad))


@pytest.mark.parametrize('text, marked', [
    ('(paper +1.89), while', ['+1.89']),
    ("the paper's 0.1-point lead over RACT (90.0 against 89.9); on", ['0.1', '90.0', '89.9']),
    ("paper's Table 5: +1.71, 64.51 against 62.80). In", ['+1.71', '64.51', '62.80']),
    ('as the paper says, 3 of', []),                                    # no number right after 'paper': not marked
])
def test_a_papers_number_is_marked_by_the_word_before_it(text, marked):
    assert [x for m in PAPER_SPAN.finditer(text) for x in SINGLE.findall(m.group(1))] == marked


def test_a_rerun_under_way_defers_the_quotes_that_draw_on_it(tmp_path):
    "Seed 0 of 33 re-run, seeds 1-2 listed: quotes of 33 or citing it wait; once its last seed lands they are checked."
    notebooks = ('30_bct_ijbc', '33_bct_market', '39_bct_claims')
    (tmp_path/'records').mkdir()
    for nb in notebooks:
        for seed in SEEDS:
            (tmp_path/'records'/f'{nb}.seed{seed}.csv').write_text('value\n1\n')
    def ledger(rows):
        columns = ['notebook', 'seeds', 'reason', 'commit']
        pd.DataFrame(rows, columns=columns).to_csv(tmp_path/'pending.csv', index=False)
    ledger([('30_bct_ijbc', '0 1 2', 'a change', 'abc1234'), ('33_bct_market', '1 2', 'a change', 'abc1234'),
            ('39_bct_claims', '0 1 2', 'a change', 'abc1234')])
    assert rerun_under_way(tmp_path) == {'33_bct_market'}   # 30 and 39 not started: their quotes read the old runs
    sources = object.__new__(QuoteSources)   # only what `deferred` reads
    sources.notebooks, sources.under_way = dict.fromkeys(notebooks), rerun_under_way(tmp_path)
    assert sources.deferred('33_bct_market', 'its own records, 1.0/2.0/3.0')
    assert sources.deferred('39_bct_claims', "fails on 33's Table 5 records, 1.0/2.0/3.0")
    assert not sources.deferred('39_bct_claims', "fails on 30's records, 1.0/2.0/3.0")
    ledger([('30_bct_ijbc', '0 1 2', 'a change', 'abc1234'), ('39_bct_claims', '0 1 2', 'a change', 'abc1234')])
    assert rerun_under_way(tmp_path) == set()   # 33's last seed landed: its quotes are checked again, in full
