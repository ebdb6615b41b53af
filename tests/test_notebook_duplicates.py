"""No two experiment notebooks share a block of six code lines (CONTRIBUTING.md): what two notebooks share belongs in
the library. Lines are compared after folding white space; blank lines, comments, import lines, lone brackets and the
papermill parameters cell (the same interface in every notebook, by design) do not count."""
import itertools, json, re
from pathlib import Path

import pytest

from compatrepro.runs import experiment_notebooks

NBS = Path(__file__).resolve().parent.parent/'nbs'
MIN_LINES = 6
# Pairs that still share a block, each to be reshaped when its notebooks are next re-run on three seeds (their models
# are retrained then anyway); a pair here that no longer shares a block fails the test, so the list only shrinks.
PENDING = set()


def code_lines(path: Path) -> list[str]:
    "The lines of a notebook's code cells that count (see above), white space folded."
    out = []
    for c in json.loads(path.read_text(encoding='utf-8'))['cells']:
        if c['cell_type'] != 'code' or 'parameters' in c.get('metadata', {}).get('tags', []): continue
        src = c['source'] if isinstance(c['source'], str) else ''.join(c['source'])
        for line in src.splitlines():
            s = ' '.join(line.split())
            if not s or s.startswith('#') or re.match(r'^(from \S+ )?import ', s) or re.fullmatch(r'[()\[\]{},:]+', s): continue
            out.append(s)
    return out


def shared_blocks(a: list[str], b: list[str], n: int = MIN_LINES) -> list[list[str]]:
    "The runs of `n` consecutive lines of `a` that stand in `b` too (a longer shared block gives one run per `n` lines)."
    in_b = {tuple(b[j:j + n]) for j in range(len(b) - n + 1)}
    out, i = [], 0
    while i <= len(a) - n:
        if tuple(a[i:i + n]) in in_b: out.append(a[i:i + n]); i += n
        else: i += 1
    return out


def test_the_checker_finds_a_block_and_ignores_what_does_not_count():
    a = ['x = 1'] + [f'y{i} = f({i})' for i in range(6)] + ['z = 2']
    b = ['w = 0'] + [f'y{i} = f({i})' for i in range(6)]
    assert shared_blocks(a, b) == [a[1:7]]
    assert shared_blocks(a, b[:-1]) == []                                    # five lines: allowed
    assert shared_blocks(a[:4] + ['v = 3'] + a[4:], b) == []                 # interrupted: two short runs


def _pairs():
    lines = {p.stem: code_lines(p) for p in experiment_notebooks(NBS)}
    for x, y in itertools.combinations(sorted(lines), 2):
        yield x, y, shared_blocks(lines[x], lines[y])


def test_no_two_experiment_notebooks_share_six_lines():
    bad = {(x, y): blocks for x, y, blocks in _pairs() if blocks and (x, y) not in PENDING}
    assert not bad, 'experiment notebooks that share a block (move it into the library):\n' + '\n'.join(
        f'{x} ~ {y}: ' + ' | '.join(b[0][:80] for b in blocks) for (x, y), blocks in bad.items())


def test_pending_pairs_still_share_a_block():
    sharing = {(x, y) for x, y, blocks in _pairs() if blocks}
    assert not PENDING - sharing, f'no longer share a block: remove from PENDING {sorted(PENDING - sharing)}'
