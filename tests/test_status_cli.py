"""`compatrepro status` on the committed results: a summary that fits one screen by default, every claim in full with
`--claims`, one paper's with `--paper` (`98_cli`)."""
import contextlib, io, re
from pathlib import Path

import pytest

from compatrepro.cli import STATUS_WIDTH, main
from compatrepro.runs import item_claims, status_table

ROOT = Path(__file__).resolve().parent.parent
WHERE = ['--results', str(ROOT/'results'), '--nbs', str(ROOT/'nbs')]


def _status(*args, where=None) -> tuple[int, str, str]:
    "`compatrepro status ARGS` on the committed results (or those of `where`): exit code, stdout, stderr."
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(['status', *args, *(where or WHERE)])
    return rc, out.getvalue(), err.getvalue()


@pytest.fixture(scope='module')
def table():
    "The status table of the committed tiny results, and their claims."
    t = status_table('tiny', ROOT/'results', ROOT/'nbs')
    return t, item_claims(ROOT/'results'/'tiny', ROOT/'docs'/'claims.csv')


@pytest.fixture(scope='module')
def claims_text():
    rc, out, _ = _status('--claims')
    assert rc == 0
    return out


def _flat(text: str) -> str:
    "`text` with every run of whitespace one space: a reason wrapped over lines reads as it was written."
    return ' '.join(text.split())


def test_default_fits_one_screen(table):
    rc, out, _ = _status()
    lines = out.splitlines()
    assert rc == 0 and len(lines) <= 50, f'{len(lines)} lines:\n{out}'
    assert max(map(len, lines)) <= STATUS_WIDTH == 120, [l for l in lines if len(l) > 120]
    t, _ = table
    for paper, g in t[t.status != 'illustration'].groupby('paper', sort=False):
        head = next(l for l in lines if l.startswith(f'{paper}, '))        # the counts of every state, zeros too
        for state in ('reproduced', 'stale', 'missing'):
            assert f'{(g.status == state).sum()} {state}' in head, head
        assert all(item in _flat(out) for item in g.item), paper          # every item named, under its state
    assert re.search(r'^  findings that hold: \d+ of \d+', out, re.M), out
    assert 'Re-runs pending: ' in out and 'compatrepro status --claims' in out


def test_paper_lists_its_claims_in_any_case(tmp_path):
    """`--paper`, in any letter case, lists every claim of the paper that does not hold: on a copy of the committed
    tiny results stamped current, since a stale item lists its re-run's reason instead (every run may be pending)."""
    from _doubles import scratch_repo
    res = scratch_repo(tmp_path)/'results'/'tiny'
    where = ['--results', str(tmp_path/'results'), '--nbs', str(tmp_path/'nbs')]
    claims = item_claims(res, ROOT/'docs'/'claims.csv')
    rc, out, _ = _status('--paper', 'rm', where=where)
    assert rc == 0 and out.startswith('RM at tiny scale: ') and 'BCT at tiny scale' not in out, out[:300]
    failing = claims[(claims.paper == 'RM') & (claims.verdict != 'holds')].claim.unique()
    missing = [c for c in failing if _flat(c) not in _flat(out)]
    assert len(failing) and not missing, missing[:3]
    assert _status('--paper', 'Rm', where=where)[1] == out


def test_unknown_paper_is_one_line_naming_the_papers():
    rc, out, err = _status('--paper', 'nosuch')
    assert rc == 2 and out == '' and err.count('\n') == 1, (out, err)
    assert all(p in err for p in ('BCT', 'RACT', 'FastFill', 'RM')) and "'nosuch'" in err, err


def test_claims_give_every_reason_in_full(table, claims_text):
    t, _ = table
    lines = claims_text.splitlines()
    assert max(map(len, lines)) <= STATUS_WIDTH, [l for l in lines if len(l) > STATUS_WIDTH][:3]
    flat = _flat(claims_text)
    reasons = {x for r in t.itertuples() if r.reasons for x in r.reasons.split(' | ')}
    cut = [x for x in reasons if _flat(x) not in flat]
    assert reasons and not cut, f'{len(cut)} reason(s) not printed whole, e.g. {cut[0][:300]}'


def test_claims_never_end_a_reason_mid_word(table, claims_text):
    "Each reason printed is a whole reason: it ends where its text ends, never cut inside a word or a sentence."
    entries, cur = [], None
    for line in claims_text.splitlines():
        if line.startswith(('      not holding: ', '      stale: ', '      note: ')): cur = [line]; entries.append(cur)
        elif line.startswith(' ' * 8) and cur is not None: cur.append(line)      # its continuation
        else: cur = None
    t, _ = table
    whole = {_flat(x) for r in t.itertuples() for x in r.reasons.split(' | ')}
    printed = [_flat(' '.join(e)).split(': ', 1)[1] for e in entries]
    assert printed and all(x in whole for x in printed), next(x for x in printed if x not in whole)


def test_status_into_a_closed_pipe_ends_quietly():
    """`compatrepro status | head`: when the reader stops reading, the command stops without a traceback."""
    import subprocess, sys
    p = subprocess.Popen([sys.executable, '-c', 'import sys; from compatrepro.cli import main; sys.exit(main())', 'status'],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    p.stdout.close()            # before status has printed anything: it takes seconds to table the results
    err, rc = p.stderr.read(), p.wait()
    assert 'Traceback' not in err and rc == 0, err[-2000:]
