"""An experiment's docs page shows the notebook's current markdown beside its run's outputs (issue 41, item 8):
`docs/build.py`'s `with_current_text` puts the markdown of `nbs/` into the executed copy when the code cells are the
same, and keeps the executed copy as it is, with a warning naming it, when they differ (a stale run). No Sphinx."""
import copy, importlib.util, json
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope='module')
def B():
    spec = importlib.util.spec_from_file_location('docs_build', ROOT/'docs'/'build.py')
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
    return m


def _notebooks(tmp_path):
    "A notebook as nbs/ has it now, and the executed copy papermill wrote from an older text of it (same code)."
    v4 = nbformat.v4
    cur = v4.new_notebook(cells=[v4.new_markdown_cell('# Title\n\n> What it shows, as the text says now.'),
                                 v4.new_code_cell('seed = 0', metadata={'tags': ['parameters']}),
                                 v4.new_markdown_cell('A paragraph added since the run.'),
                                 v4.new_code_cell('print(seed + 1)'),
                                 v4.new_markdown_cell('The current closing words.')])
    ex = v4.new_notebook(cells=[v4.new_markdown_cell('# Title\n\n> What it shows. Before issue 15 it was otherwise.'),
                                v4.new_code_cell('seed = 0', metadata={'tags': ['parameters']}),
                                v4.new_code_cell('# Parameters\nseed = 3\n', metadata={'tags': ['injected-parameters']}),
                                v4.new_code_cell('print(seed + 1)', outputs=[v4.new_output('stream', name='stdout', text='4\n')]),
                                v4.new_markdown_cell('The closing words of issue 19.')])
    for nb, f in ((cur, tmp_path/'nbs'/'20_x.ipynb'), (ex, tmp_path/'results'/'20_x.ipynb')):
        f.parent.mkdir(exist_ok=True); nbformat.write(nb, f)
    return tmp_path/'nbs'/'20_x.ipynb', tmp_path/'results'/'20_x.ipynb'


def _load(f): return json.loads(Path(f).read_text(encoding='utf-8'))
def _text(nb, kind): return [''.join(c['source']) for c in nb['cells'] if c['cell_type'] == kind]


def test_current_markdown_when_the_code_matches(B, tmp_path, capsys):
    cur, ex = _notebooks(tmp_path)
    out = B.with_current_text(_load(ex), _load(cur), 'results/20_x.ipynb')
    assert _text(out, 'markdown') == _text(_load(cur), 'markdown')                       # today's text, all of it
    assert 'issue' not in json.dumps(out)
    assert _text(out, 'code') == _text(_load(ex), 'code')                                # the run's code cells, in order,
    assert out['cells'][2]['metadata']['tags'] == ['injected-parameters']                # its parameters after `seed = 0`
    assert ''.join(out['cells'][4]['outputs'][0]['text']) == '4\n'                              # and their outputs
    assert 'warning' not in capsys.readouterr().out
    # through the page maker: the page written has the current text and the run's output
    page = tmp_path/'page.ipynb'
    B.process(ex, page, '20_x', current=cur)
    text = page.read_text(encoding='utf-8')
    assert 'A paragraph added since the run.' in text and 'The current closing words.' in text and '4\\n' in text
    assert 'issue 15' not in text and 'issue 19' not in text


def test_a_stale_run_keeps_its_text(B, tmp_path, capsys):
    cur, ex = _notebooks(tmp_path)
    nb = _load(cur); nb['cells'][3]['source'] = 'print(seed + 2)'                         # the code changed since the run
    executed = _load(ex)
    out = B.with_current_text(copy.deepcopy(executed), nb, 'results/20_x.ipynb')
    assert out == executed
    assert 'warning: results/20_x.ipynb: its code differs' in capsys.readouterr().out
    nb['cells'].append(nbformat.v4.new_code_cell('print(1)'))                           # one code cell more: the same
    assert B.with_current_text(copy.deepcopy(executed), nb, 'x') == executed
