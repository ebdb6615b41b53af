"""Rewrite the per-seed quotes of the differing verdicts' reasons and of the notebooks' prose after a re-run.

    python tests/requote.py --before 42a4f22 32_bct_chain            # print what would change
    python tests/requote.py --before 42a4f22 32_bct_chain --write    # and write it

Each quote ('-0.38/-1.12/-0.83') of a reason of the notebooks named (or of a reason that cites one of them, or of a
shared reason such a row refers to), and of a markdown cell of theirs or citing them, is looked up among the
candidates that the records committed at `--before` give it, by `test_reason_numbers`' rules, and replaced by the same
candidate of today's records, at the same precision and sign style (a quote today's records already give is kept).
A quote no candidate gives, or whose candidates now give different quotes, is left as it was and printed.
Only numbers change: read every reason it rewrites, since its words ('on every seed', 'far above') may no longer hold.
"""
import argparse
import csv
import io
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
import test_reason_numbers as T  # noqa: E402
from compatrepro.claims import SHARED_REASON, expand_reason, shared_reasons  # noqa: E402
from compatrepro.runs import RECORD_ID  # noqa: E402

DOCS = T.ROOT/'docs'


def formatted_like(quote: str, values) -> str:
    """`values` (one per seed) written as `quote` is: each at its number's decimals, with a '+' before the positive
    ones where the quote writes signs."""
    parts, out = quote.split('/'), []
    signed = any(p[0] in '+-' for p in parts)
    for p, v in zip(parts, values):
        s = f"{v:.{len(p.split('.')[1]) if '.' in p else 0}f}"
        s = s[1:] if s.startswith('-') and float(s) == 0 else s     # no '-0.00'
        out.append('+' + s if signed and not s.startswith('-') and float(s) != 0 else s)
    return '/'.join(out)


def requoted(quote: str, before: list[np.ndarray], after: list[np.ndarray]) -> set[str]:
    """The quotes `after` gives where `before` gives `quote`: `before` and `after` are groups of candidate arrays (n x
    3, seeds 0-2) made by the same rules from the records before and after a re-run, row for row, the likeliest
    source first; the first group with a candidate that gives `quote` decides. Empty: no candidate gives `quote`;
    more than one: that group's candidates now disagree."""
    parts = quote.split('/')
    target, tol = np.array([float(x) for x in parts]), T.quote_tolerance(parts)
    for b, a in zip(before, after):
        b, a = np.asarray(b, float).reshape(-1, 3), np.asarray(a, float).reshape(-1, 3)
        if b.shape != a.shape:
            raise ValueError(f'the records before and after give {len(b)} and {len(a)} candidates: a re-run that adds '
                             'or drops records cannot be requoted row for row')
        out = set()
        for scale in (1, 100):   # a share quoted in percent, as `quoted` allows
            rows = np.nonzero((np.abs(b*scale - target) <= tol).all(axis=1))[0]
            out |= {formatted_like(quote, a[i]*scale) for i in rows}
        if out:
            return out
    return set()


class CandidateGroups:
    """Candidate groups of one tiny results folder for a quote: `QuoteSources.candidate_groups`, those of any quote
    and then those of a quote with decimals or of a whole number, as `QuoteSources.traced` reads them."""

    def __init__(self, results: Path):
        self.sources = sources_at(results)

    def groups(self, notebook: str, text: str, key: str, quote: str) -> list[np.ndarray]:
        found, whole, decimal = self.sources.candidate_groups(notebook, text, key)
        return found + (decimal if '.' in quote else whole)


def sources_at(results: Path) -> 'T.QuoteSources':
    "`QuoteSources` of the tiny results folder `results` (records, claims and ledger)."
    saved, T.RESULTS = T.RESULTS, results
    try:
        return T.QuoteSources()
    finally:
        T.RESULTS = saved


def results_at(commit: str, dest: Path) -> Path:
    "The committed tiny records, claims and ledger at `commit`, extracted under `dest`; returns its results folder."
    blob = subprocess.run(['git', 'archive', commit, 'results/tiny/records', 'results/tiny/claims',
                           'results/tiny/pending.csv'], cwd=T.ROOT, check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(blob)) as t:
        t.extractall(dest, filter='data')
    return dest/'results'/'tiny'


def aligned(before: Path, after: Path, dest: Path) -> tuple[Path, Path]:
    """Copies of the results folders `before` and `after` under `dest` whose records hold the same values, those with
    a number on both sides (a value undefined on one side, an update gain say, is dropped on both), so that the
    candidates made from them match row for row."""
    out = []
    for side, src in (('before', before), ('after', after)):
        d = dest/side
        shutil.copytree(src/'claims', d/'claims')
        shutil.copy(src/'pending.csv', d/'pending.csv')
        (d/'records').mkdir()
        out.append(d)
    key = list(RECORD_ID)
    for f in sorted(p.name for p in (before/'records').glob('*.csv') if (after/'records'/p.name).exists()):
        b, a = (pd.read_csv(s/'records'/f) for s in (before, after))
        both = b.dropna(subset=['value'])[key].merge(a.dropna(subset=['value'])[key], on=key)
        for side, d in zip((b, a), out):
            side.merge(both, on=key).to_csv(d/'records'/f, index=False)
    return out[0], out[1]


def requote_text(text: str, context: str, notebook: str, key: str, before, after, log: list) -> str:
    """`text` (a reason, or a shared reason read as `context`, the row's expanded reason) with each quote rewritten
    by `requoted`, all at once where the quotes stand (a new quote is never rewritten again); what could not be is
    appended to `log`."""
    new_of = {}
    for q in dict.fromkeys(T.per_seed_quotes(text)):
        try:
            now = after.groups(notebook, context, key, q)
            new = requoted(q, before.groups(notebook, context, key, q), now)
            if not new and requoted(q, now, now) == {q}: continue    # rewritten already: today's records give it
        except ValueError as e:
            log.append(f'{notebook} {key!r}: {q}: {e}'); continue
        if len(new) == 1:
            new_of[q] = new.pop()
        else:
            why = 'no candidate gives it' if not new else 'its candidates now disagree: ' + ', '.join(sorted(new))
            log.append(f'{notebook} {key!r}: {q}: {why}')
    return T.PER_SEED.sub(lambda m: new_of.get(m.group(0), m.group(0)), text)


def _rows(path: Path) -> list[list[str]]:
    return list(csv.reader(io.StringIO(path.read_text())))


def _write(path: Path, rows: list[list[str]]):
    s = io.StringIO()
    csv.writer(s, lineterminator='\n').writerows(rows)
    path.write_text(s.getvalue())


def requote_reasons(named: set, before: CandidateGroups, after: CandidateGroups, log: list):
    """The rows of `docs/differing_verdicts.csv` and `docs/shared_reasons.csv` with the quotes of the reasons that are
    of a notebook of `named` or cite one rewritten (`requote_text`); each change printed."""
    shared = shared_reasons(DOCS/'shared_reasons.csv')
    rows, done_shared = _rows(DOCS/'differing_verdicts.csv'), {}
    nb_i, key_i, reason_i = (rows[0].index(c) for c in ('notebook', 'key', 'reason'))
    for r in rows[1:]:
        nb, key, reason = r[nb_i], r[key_i], r[reason_i]
        if not {nb, *after.sources.cited(nb, reason)} & named: continue
        context = expand_reason(reason, shared)
        new = requote_text(reason, context, nb, key, before, after, log)
        for name in SHARED_REASON.findall(reason):
            if name not in done_shared:
                done_shared[name] = requote_text(shared[name], context, nb, key, before, after, log)
        if new != reason:
            print(f'{nb} {key!r}:\n  - {reason}\n  + {new}\n')
            r[reason_i] = new
    srows = _rows(DOCS/'shared_reasons.csv')
    for r in srows[1:]:
        if r[0] in done_shared and done_shared[r[0]] != r[1]:
            print(f'shared {r[0]!r}:\n  - {r[1]}\n  + {done_shared[r[0]]}\n')
            r[1] = done_shared[r[0]]
    return rows, srows


def requote_prose(named: set, before: CandidateGroups, after: CandidateGroups, log: list) -> dict:
    """{notebook path: its JSON} of the experiment and claims notebooks with the quotes of each markdown cell that is of
    a notebook of `named` or cites one rewritten (`requote_text`, the cell as its context); each change printed."""
    out = {}
    for path in sorted((T.ROOT/'nbs').glob('[2-5][0-9]_*.ipynb')):
        nb, doc, changed = path.stem, json.loads(path.read_text()), False
        for c in doc['cells']:
            text = ''.join(c['source'])
            if c['cell_type'] != 'markdown' or not T.per_seed_quotes(text): continue
            if not {nb, *after.sources.cited(nb, text)} & named: continue
            new = requote_text(text, text, nb, None, before, after, log)
            if new != text:
                print(f'{path.name}, markdown cell {c.get("id")}:\n' + '\n'.join(
                    f'  {q} -> {n}' for q, n in zip(T.per_seed_quotes(text), T.per_seed_quotes(new)) if q != n) + '\n')
                c['source'], changed = new.splitlines(keepends=True), True
        if changed:
            out[path] = doc
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('notebooks', nargs='+', help='notebooks (stems) whose re-run moved the records')
    p.add_argument('--before', required=True, help='a commit whose committed records the reasons quote')
    p.add_argument('--write', action='store_true', help='write the rewritten reasons and notebooks')
    a = p.parse_args(argv)
    log = []
    with tempfile.TemporaryDirectory() as tmp:
        b, a_ = aligned(results_at(a.before, Path(tmp)/'commit'), T.RESULTS, Path(tmp)/'aligned')
        before, after = CandidateGroups(b), CandidateGroups(a_)
        rows, srows = requote_reasons(set(a.notebooks), before, after, log)
        notebooks = requote_prose(set(a.notebooks), before, after, log)
    if log:
        print('Left as they were (rewrite them by hand):\n' + '\n'.join('  ' + x for x in log))
    if a.write:
        _write(DOCS/'differing_verdicts.csv', rows)
        _write(DOCS/'shared_reasons.csv', srows)
        for path, doc in notebooks.items():
            path.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + '\n')


if __name__ == '__main__':
    main()
