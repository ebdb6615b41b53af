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


def test_the_records_table_leaves_out_stale_seeds(B, tmp_path, monkeypatch):
    """A page's records table aggregates the current seeds only: while a notebook is re-run seed by seed, averaging a
    re-run seed with seeds of the old code would show numbers that no code made. The stale seed is named instead."""
    rec = tmp_path/'tiny'/'records'; rec.mkdir(parents=True)
    for seed, value in ((0, 10.), (1, 30.), (2, 50.)):
        (rec/f'20_x.seed{seed}.csv').write_text('item,dataset,method,metric,value,paper_value,seed\n'
                                               f'Table 1,Glyphs,FCT,top1,{value},70.0,{seed}\n')
    monkeypatch.setattr(B, 'RESULTS', tmp_path)
    prov = [dict(seed=0, state='current'), dict(seed=1, state='stale'), dict(seed=2, state='current')]
    text = B.exp_footer('20_x', 'tiny', prov)
    assert 'Left out: the records of seed 1, whose run is stale' in text
    assert '| Table 1 | Glyphs | FCT | top1 | 30 ± 28.28 | 0, 2 | 70 |' in text, text
    everything = B.exp_footer('20_x', 'tiny', [dict(seed=s, state='current') for s in range(3)])
    assert 'Left out' not in everything and '| 30 ± 20 | 0, 1, 2 |' in everything, everything
    none = B.exp_footer('20_x', 'tiny', [dict(seed=s, state='stale') for s in range(3)])
    assert 'No seed of it is current.' in none and 'seeds 0, 1, 2' in none


def test_the_parameters_show_once_with_the_values_the_run_used(B, tmp_path):
    "A paper page shows one parameters cell: the notebook's, with papermill's injected values, its comments kept."
    merged = B.merge_parameters("seed = 0\nscale = 'tiny'   # 'smoke', 'tiny' or 'paper'\nepochs = None",
                                '# Parameters\nseed = 2\nscale = "tiny"\ndevice = "cpu"\n')
    assert merged.splitlines() == [B.PARAMS_NOTE, 'seed = 2', """scale = "tiny"   # 'smoke', 'tiny' or 'paper'""",
                                   'epochs = None', 'device = "cpu"']
    cur, ex = _notebooks(tmp_path)
    page = tmp_path/'page.ipynb'
    B.process(ex, page, '20_x', current=cur)
    code = [c for c in _load(page)['cells'] if c['cell_type'] == 'code']
    params = [''.join(c['source']) for c in code if 'seed =' in ''.join(c['source'])]
    assert params == [B.PARAMS_NOTE + '\nseed = 3'], params
    assert not any('injected-parameters' in c['metadata'].get('tags', []) for c in code)


def test_each_figure_goes_after_the_cell_that_saved_it(B):
    """`saving_cell`: a literal save, a library function's `figure=`, an f-string's prefix, a call naming the item,
    then a save by variable under a heading naming the figure (or naming none); `figures_named` reads ranges."""
    md = lambda s: {'cell_type': 'markdown', 'source': s, 'metadata': {}}
    code = lambda s: {'cell_type': 'code', 'source': s, 'metadata': {}, 'outputs': []}
    cells = [md('# Title: Figures 2-9'), code("F7 = 'Figure 7'\nbook.add('Figure 4', 'x', 'y', 1)"),     # 0, 1
             md('## Table 1 and Figure 3 (top)'), code("report_update(book, 'Table 1', c, s, figure='Figure 3 top')"),
             code("record_curve_points(book, 'Figure 3 top', c)"), code("book.save_figure(fig, 'Figure 4')"),   # 4, 5
             code("for s in S: book.save_figure(fig, f'Figure 11 {s}')"), code("rm_loss_ablation(book, 'Figure 8a')"),
             md('## Figures 5-6 and 8: the curves'), code('for item in FIGURES: book.save_figure(fig, item)'),  # 8, 9
             md('## Figure 7'), code('book.save_figure(fig, F7)')]                                          # 10, 11
    where = {i: B.saving_cell(cells, i) for i in ('Figure 3 top', 'Figure 4', 'Figure 11 [:500]', 'Figure 8a',
                                                   'Figure 6', 'Figure 7', 'Figure 12')}
    assert where == {'Figure 3 top': 3, 'Figure 4': 5, 'Figure 11 [:500]': 6, 'Figure 8a': 7, 'Figure 6': 9,
                     'Figure 7': 11, 'Figure 12': None}, where     # 12: each saving cell is under other figures
    assert B.figures_named('## Figures 3-5 and 8a (App. C.3)') == {('', 3, ''), ('', 4, ''), ('', 5, ''), ('', 8, 'a')}
    assert B.figures_named('## Figure 7a, Table A2 and Figure A10a') == {('', 7, 'a'), ('A', 10, 'a')}
    nb = B.with_figures({'cells': cells}, [(('Figure 4',), 'figures/x.png', 'results/tiny/figures/x.png'),
                                           (('Figure 99',), 'figures/y.png', 'results/tiny/figures/y.png')], seed=2)
    src = [c['source'] for c in nb['cells']]
    assert src[6].startswith('```{figure} figures/x.png') and 'seed 2' in src[6]     # right after cell 5
    assert src[-2].startswith('## Figures') and src[-1].startswith('```{figure} figures/y.png')   # no cell fits


def test_a_long_table_shows_its_first_rows_and_folds_the_others(B):
    head = ['| a | b |', '|---|---|']
    rows = [f'| {i} | x |' for i in range(B.TABLE_FOLD_AFTER + 5)]
    short = '\n'.join(head + rows[:B.TABLE_FOLD_AFTER])
    assert B.folded_md_table(short) == short
    folded = B.folded_md_table('\n'.join(head + rows)).split('<details class="folded-table">')
    assert folded[0].count('| x |') == B.TABLE_ROWS_SHOWN and folded[1].count('| x |') == len(rows) - B.TABLE_ROWS_SHOWN
    assert folded[1].count('| a | b |') == 1 and folded[1].rstrip().endswith('</details>')
    # an HTML table (pandas' to_html) never splits a rowspan group
    trs = ['<tr><th rowspan="4">g</th><td>0</td></tr>'] + [f'<tr><td>{i}</td></tr>' for i in range(1, 40)]
    trs[B.TABLE_ROWS_SHOWN - 2] = '<tr><th rowspan="4">h</th><td>x</td></tr>'
    html = ('<p>t</p><table class="dataframe"><thead><tr><th>v</th></tr></thead><tbody>' + ''.join(trs)
            + '</tbody></table>')
    first, rest = B.folded_html_table(html).split('<details class="folded-table">')
    assert first.count('<tr>') - 1 == B.TABLE_ROWS_SHOWN + 2 and rest.count('<tr>') - 1 == 40 - B.TABLE_ROWS_SHOWN - 2
    assert first.startswith('<p>t</p><table class="dataframe"><thead>') and '<thead>' in rest


def test_no_issue_numbers_in_what_readers_read():
    "The docs and the notebooks' text say what and why, not which tracker issue: a reader has no tracker."
    import re
    pat = re.compile(r'\bissues? \d+', re.I)
    found = [f"{f.relative_to(ROOT)}: {m.group()}" for f in sorted((ROOT/'docs').glob('*.md')) + sorted((ROOT/'docs').glob('*.csv'))
             + [ROOT/'README.md'] for m in pat.finditer(f.read_text(encoding='utf-8'))]
    for f in sorted((ROOT/'nbs').glob('*.ipynb')):
        found += [f"{f.relative_to(ROOT)}: {m.group()}" for c in _load(f)['cells'] if c['cell_type'] == 'markdown'
                  for m in pat.finditer(''.join(c['source']))]
    assert not found, 'tracker issue numbers in the docs: ' + '; '.join(found)


def test_no_per_seed_results_typed_into_the_notebooks_text():
    """An experiment notebook's text says what its runs show, not their numbers: three numbers joined by '/' (a result
    per seed, '70.2/70.0/67.2') typed into a markdown cell go stale with the next re-run; the records the notebook shows
    have them."""
    from test_reason_numbers import per_seed_quotes   # the same pattern that the reasons' quotes are checked by
    found = [f"{f.name}: {q}" for f in sorted((ROOT/'nbs').glob('[2-5][0-9]_*.ipynb'))
             for c in _load(f)['cells'] if c['cell_type'] == 'markdown' for q in per_seed_quotes(''.join(c['source']))]
    assert not found, 'per-seed results typed into experiment notebooks\' text: ' + '; '.join(found)
