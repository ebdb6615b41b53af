#!/usr/bin/env python
"""Build the compatrepro docs site from the notebooks in `nbs/`: `python docs/build.py`.

Output: `docs/_site/index.html` (static, works offline: MathJax ships inside the site).

What happens, in order:

1. **Library notebooks** (every notebook that is not an experiment, `compatrepro.core.is_experiment_notebook`)
   are prepared and executed. The prepared copy (in `docs/_build/prep/`) has the `show_doc` cells that
   nbdev's public processor `nbdev.processors.add_show_docs` inserts after exported definitions, a hidden
   `from nbdev.showdoc import show_doc` cell before the first code cell, and, in place of each cell tagged
   with a skip flag (settings.ini's `tst_flags` except `slow`, so `#| notest`; and `#| gpu` when no GPU is
   visible), a cell that prints that it was not run and why. `#| slow` cells run, so the pages show their real
   outputs. The copies are executed by the package's one notebook runner,
   `compatrepro.runs.run_notebooks` (papermill in a subprocess, `--jobs` at a time, in `nbs/`). A notebook
   that fails fails the build with the traceback from its executed copy. Executed copies are cached in
   `docs/_build/exec/` under a hash of the notebook, the library source, settings.ini and the part of this
   script that prepares them, so a second build re-executes only what changed.
2. **Experiment notebooks** are never executed here. Their page shows the executed copy that
   `compatrepro reproduce` wrote to `results/<scale>/notebooks/<name>.ipynb` (the paper-scale run if there is
   one, else the tiny one; smoke runs are never shown) with the notebook's current markdown in place of the text
   it ran with, where its code cells are those of `nbs/` (a prose edit stales no run; where the code differs, the
   run is stale and keeps its own text, with a warning: `with_current_text`), a banner saying which scale, seeds and
   device made it and what each run's provenance (`results/<scale>/runs/<name>.seed<k>.json`) says, checked by
   `compatrepro.runs.run_state`: code current or stale, threads, device, torch. A notebook not run yet gets
   its page all the same, marked "not yet run". The paper of a notebook comes from its decade
   (`compatrepro.core.paper_of_notebook`). The page shows the parameters once: the notebook's parameters cell
   with the values papermill injected, which the run used (`one_parameters_cell`). It shows the figures the run
   saved (the executed copies hold none: figures are saved by the record book and shown under the Agg backend,
   which outputs nothing): the files that the provenance of the shown seed names under `figures`, copied from
   `results/<scale>/figures/` into the Sphinx source tree, each right after the code cell that saved it
   (`saving_cell`, `with_figures`). It ends with the records beside the paper's numbers (`exp_footer`).
3. Every page then goes through nbdev's own notebook processors (`nbdev.processors.FilterDefaults`, as
   `nbdev_proc_nbs` applies them) minus `add_show_docs` and `exec_show_docs` (the show_doc cells were added
   and executed in step 1), `add_links` and `insert_warning` (they target nbdev's Quarto site): `#| hide` and
   `#| export` cells disappear, show_doc output is shown as markdown, the title cell becomes the page title.
   A table longer than `TABLE_FOLD_AFTER` rows (a page's records, a DataFrame output) shows its first
   `TABLE_ROWS_SHOWN` rows and folds the others into a <details> element; `docs/_static/compatrepro.css` wraps
   long lines of code and of printed output.
4. The results overview is made from `compatrepro.runs.status_table` at tiny and at paper scale; the hand-written
   pages are every `docs/*.md` (with the real `compatrepro ... --help` and `data_prep/README.md` filled in).
5. Sphinx with myst-nb renders all of it into `docs/_site/`.

Only public nbdev and execnb API is used here. Nothing here needs a per-notebook list: whatever notebooks
exist in `nbs/` are on the site.
"""
from __future__ import annotations
import argparse, hashlib, json, os, re, shutil, subprocess, sys, time
from configparser import ConfigParser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT/'docs'
BUILD = DOCS/'_build'
SRC = BUILD/'src'           # the Sphinx source tree this script generates
PREP = BUILD/'prep'         # library notebooks prepared for execution
EXEC = BUILD/'exec'         # cache of executed library notebooks (and a .json of what made each)
SITE = DOCS/'_site'
NBS = ROOT/'nbs'
RESULTS = ROOT/'results'
BUILD_VERSION = '4'         # bump to invalidate the execution cache by hand

if str(ROOT) not in sys.path: sys.path.insert(0, str(ROOT))
os.environ.setdefault('COMPATREPRO_PROGRESS', '0')      # no progress-bar widgets in pages
os.environ.setdefault('MPLBACKEND', 'Agg')
from compatrepro.report import is_experiment_notebook, paper_of_notebook   # noqa: E402
from compatrepro import runs as R                                          # noqa: E402

SCALE_ORDER = ('paper', 'tiny')     # an experiment's page shows the first scale that ran; smoke runs are never shown
SCALE_WORDS = {'tiny': 'tiny scale: the embedded Glyphs stand-in dataset, CPU, minutes',
               'paper': "paper scale: the paper's own datasets, models and schedule"}
PAPER_TITLES = {   # short name (as in compatrepro.core.PAPER_DECADES and docs/paper_items.csv) -> citation
    'BCT': 'Shen, Xiong, Xia, Soatto. *Towards Backward-Compatible Representation Learning*. CVPR 2020',
    'RACT': 'Zhang et al. *Hot-Refresh Model Upgrades with Regression-Alleviating Compatible Training in Image Retrieval*. ICLR 2022',
    'FastFill': 'Jaeckle, Faghri, Farhadi, Tuzel, Pouransari. *FastFill: Efficient Compatible Model Update*. ICLR 2023 (with its baseline FCT)',
    'RM': 'Seo, Uzunbas, Han, Cao, Lim. *Metric Compatible Training for Online Backfilling in Large-Scale Retrieval* (rank merge)',
}
MARK = 'compatrepro_docs'    # cell metadata key the prepared copies use to mark the cells this script changed


def log(msg): print(f'[docs] {msg}', flush=True)

# ----------------------------------------------------------------------------- notebooks

def settings() -> dict:
    cfg = ConfigParser(delimiters=['=']); cfg.read(ROOT/'settings.ini', encoding='utf-8')
    return dict(cfg['DEFAULT'])

def notebooks() -> list[Path]:
    "Every notebook in nbs/ that gets a page (all but index.ipynb, which is the README's source, and _/. files)."
    return sorted(p for p in NBS.glob('*.ipynb') if p.name[0] not in '_.' and p.stem != 'index')

_re_default_exp = re.compile(r'^\s*#\|\s*default_exp\s+(\S+)', re.MULTILINE)
def default_exp(p: Path) -> str|None:
    nb = json.loads(p.read_text(encoding='utf-8'))
    for c in nb['cells']:
        if c['cell_type'] == 'code':
            m = _re_default_exp.search(''.join(c['source']))
            if m: return m.group(1)
    return None

def _paper(p: Path) -> str:
    try: return paper_of_notebook(p)
    except ValueError: return 'Other'

def _sha(*parts: bytes) -> str:
    h = hashlib.sha256()
    for b in parts: h.update(b); h.update(b'\0')
    return h.hexdigest()

def lib_hash() -> str:
    "The library source, settings.ini and the preparing part of this script: a change to any re-executes every notebook."
    files = sorted((ROOT/'compatrepro').rglob('*.py'))
    return _sha(*[f.relative_to(ROOT).as_posix().encode() + f.read_bytes() for f in files],
                (ROOT/'settings.ini').read_bytes(), _prep_source().encode(), BUILD_VERSION.encode())

def _prep_source() -> str:
    "The part of this script that prepares notebooks for execution: editing it invalidates the execution cache."
    s = Path(__file__).read_text(encoding='utf-8')
    return s[s.index('# ---' + '-- preparing'):s.index('# ---' + '-- processing')]

def write_if_changed(path: Path, text: str):
    "Write only when the content differs, so Sphinx's incremental build re-reads only changed pages."
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text(encoding='utf-8') != text: path.write_text(text, encoding='utf-8')

# ----- preparing library notebooks for execution (this part of the script is in the execution cache's key)

def _nb_dict(nb) -> dict:
    "An execnb notebook as a valid nbformat 4.5 dict: only nbformat's keys, a stable id per cell."
    keep = {'markdown': ('cell_type', 'metadata', 'source'), 'raw': ('cell_type', 'metadata', 'source'),
            'code': ('cell_type', 'metadata', 'source', 'outputs', 'execution_count')}
    cells = []
    for i, c in enumerate(nb['cells']):
        d = {k: c.get(k) for k in keep[c['cell_type']]}
        src = d.get('source') or ''
        d['source'] = ''.join(src) if isinstance(src, list) else src
        d['metadata'] = json.loads(json.dumps(dict(d.get('metadata') or {})))
        if c['cell_type'] == 'code':
            d['outputs'] = json.loads(json.dumps(list(d.get('outputs') or []))); d['execution_count'] = None
        d['id'] = hashlib.sha1(f'{i}:{d["source"]}'.encode()).hexdigest()[:8]
        cells.append(d)
    meta = json.loads(json.dumps(dict(nb.get('metadata') or {})))
    meta.pop('widgets', None)          # no widget state: myst-nb would then load widget JS from a CDN
    meta['kernelspec'] = {'name': 'python3', 'display_name': 'Python 3', 'language': 'python'}
    meta.setdefault('language_info', {'name': 'python'})
    return {'cells': cells, 'metadata': meta, 'nbformat': 4, 'nbformat_minor': 5}

def _write_nb(nb, path: Path):
    import nbformat
    d = nbformat.from_dict(_nb_dict(nb))
    nbformat.validate(d)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_if_changed(path, nbformat.writes(d) + '\n')

def _split_title_cell(nb):
    "nbdev turns the whole first `# Title` cell into front matter: keep any prose after title/description as its own cell."
    from execnb.nbio import mk_cell
    for i, c in enumerate(nb.cells):
        if c.cell_type != 'markdown': continue
        lines = c.source.splitlines()
        if not any(re.match(r'^#\s+\S', l) for l in lines): return
        head, rest, in_head = [], [], True
        for l in lines:
            if in_head and (re.match(r'^#\s+\S', l) or re.match(r'^>\s', l) or re.match(r'^-\s+\S.*:', l) or not l.strip()):
                head.append(l)
            else: in_head = False; rest.append(l)
        merged = []       # nbdev's front matter reads one `>` line as the description: join a quote that wraps
        for l in head:
            if merged and re.match(r'^>\s', l) and re.match(r'^>\s', merged[-1]): merged[-1] += ' ' + l[1:].strip()
            else: merged.append(l)
        c.source = '\n'.join(merged).strip()
        if rest and any(l.strip() for l in rest):
            nb.cells.insert(i + 1, mk_cell('\n'.join(rest).strip(), 'markdown'))
        return

SKIP_WHY = {'notest': 'it is tagged #| notest (run it with nbdev_test --flags notest)',
            'gpu': 'it is tagged #| gpu and no GPU is visible to the docs build'}

def skip_flags(cfg: dict, has_gpu: bool) -> list[str]:
    "The flags whose cells the docs build does not run: settings.ini's tst_flags but `slow`, and `gpu` without a GPU."
    return sorted((set(cfg.get('tst_flags', '').split()) - {'slow'}) | (set() if has_gpu else {'gpu'}))

def prepare(src: Path, dst: Path, flags: list[str]) -> int:
    """Write the copy of library notebook `src` that the build executes: nbdev's show_doc cells added, cells
    tagged with one of `flags` replaced by a print saying why they did not run, cells nbdev_test never runs
    (`#| eval: false`, `nbdev_export()`) emptied. The original sources travel in the cells' metadata and are put
    back after execution. Returns the number of cells skipped for a flag."""
    from execnb.nbio import read_nb, mk_cell
    from nbdev.process import NBProcessor
    from nbdev.processors import add_show_docs
    nb = read_nb(src)
    cwd = os.getcwd(); os.chdir(src.parent)            # nbdev reads settings.ini from the working folder up
    try: NBProcessor(nb=nb, procs=[add_show_docs], rm_directives=False, process=True)
    finally: os.chdir(cwd)
    _split_title_cell(nb)
    # add_show_docs inserts each name of a cell right after it, so a cell defining f, g, h gets h, g, f: put them back
    # in the order the cell defines them
    i = 0
    while i < len(nb.cells):
        j = i
        while j < len(nb.cells) and getattr(nb.cells[j], 'has_sd', False): j += 1
        if j - i > 1: nb.cells[i:j] = nb.cells[i:j][::-1]
        i = max(j, i + 1)
    skipped = 0
    for c in nb.cells:
        if c.cell_type != 'code': continue
        if getattr(c, 'has_sd', False): c.metadata[MARK] = {'show_doc': True}; continue
        d = getattr(c, 'directives_', None) or {}
        hit = sorted(set(flags) & d.keys())
        if hit:
            why = '; '.join(SKIP_WHY.get(f, f'it is tagged #| {f}') for f in hit)
            c.metadata[MARK] = {'source': c.source}
            c.source = f'print({f"[not run in the docs build: {why}]"!r})'
            skipped += 1
        elif 'nbdev_export' + '(' in c.source or d.get('eval:', [''])[0].lower() == 'false':
            c.metadata[MARK] = {'source': c.source}
            c.source = ''
    first_code = next((i for i, c in enumerate(nb.cells) if c.cell_type == 'code'), len(nb.cells))
    nb.cells.insert(first_code, mk_cell('#| hide\nfrom nbdev.showdoc import show_doc'))
    _write_nb(nb, dst)
    return skipped

def restore(nb):
    "Undo what `prepare` did to the cells of an executed copy: original sources back, show_doc cells marked for nbdev."
    for c in nb.cells:
        m = c.get('metadata', {}).pop(MARK, None)
        if not m: continue
        if 'source' in m: c.source = m['source']
        if m.get('show_doc'): c.has_sd = True             # what nbdev's mv_exports looks for
        for k in ('papermill', 'execution'): c.metadata.pop(k, None)

def _strip_ansi(s: str) -> str: return re.sub(r'\x1b\[[0-9;]*[A-Za-z]', '', s)

def traceback_of(executed: Path) -> str|None:
    "The failing cell and its traceback, from an executed copy papermill wrote."
    if not executed.exists(): return None
    nb = json.loads(executed.read_text(encoding='utf-8'))
    for c in nb['cells']:
        for o in c.get('outputs', []):
            if o.get('output_type') == 'error':
                src = ''.join(c['source']) if isinstance(c['source'], list) else c['source']
                tb = '\n'.join(o.get('traceback') or []) or f"{o.get('ename')}: {o.get('evalue')}"
                return f'in the cell\n{src}\n\n{_strip_ansi(tb)}'
    return None

# ----- processing

def nbdev_procs():
    "nbdev's docs processors (FilterDefaults) minus those that add or run show_doc cells and those for nbdev's Quarto site."
    from nbdev.processors import FilterDefaults, add_show_docs, exec_show_docs, add_links, insert_warning
    drop = (add_show_docs, exec_show_docs, add_links, insert_warning)
    return [p for p in FilterDefaults().procs() if p not in drop]

_DIR_RE = re.compile(r'^\s*#\|\s*([\w-]+)\s*:?\s*(.*?)\s*$')

def _strip_directives(src: str) -> tuple[dict, str]:
    "Leading `#| key: value` lines of a code cell -> (dict, remaining source)."
    lines, d = src.splitlines(), {}
    i = 0
    while i < len(lines) and (lines[i].strip() == '' or _DIR_RE.match(lines[i])):
        m = _DIR_RE.match(lines[i])
        if m: d[m.group(1)] = m.group(2)
        i += 1
    return d, '\n'.join(lines[i:]).strip('\n')

_RE_SOURCE_LINK = re.compile(r'^\[source\]\([^)]*\)(\{[^}]*\})?\s*$', re.MULTILINE)

def _to_myst(nb, title_fallback: str, banner: str|None, footer: str|None) -> str:
    """Turn an nbdev-processed notebook (Quarto-flavoured) into one myst-nb renders the same way:
    front matter -> title, Quarto cell options -> myst-nb tags, widget outputs -> their text."""
    import yaml
    from execnb.nbio import mk_cell
    cells, fm = [], {}
    for c in nb.cells:
        if c.cell_type == 'raw' and c.source.strip().startswith('---'):
            try: fm.update(yaml.safe_load(c.source.strip().strip('-')) or {})
            except Exception: pass
            continue
        tags = list((c.get('metadata') or {}).get('tags', []))
        c.metadata = {}
        if c.cell_type == 'code':
            d, c.source = _strip_directives(c.source)
            if d.get('echo') == 'false': tags.append('remove-input')
            if d.get('output') == 'false': tags.append('remove-output')
            if d.get('include') == 'false': continue
            outs = []
            for o in c.get('outputs', []):
                data = o.get('data')
                if data is not None:
                    data.pop('application/vnd.jupyter.widget-view+json', None)
                    if 'text/markdown' in data:   # show_doc's source link points at a site that is not this one
                        md = ''.join(data['text/markdown']) if isinstance(data['text/markdown'], list) else data['text/markdown']
                        md = _RE_SOURCE_LINK.sub('', md)
                        # show_doc opens with a '---' rule: a docutils transition, not allowed inside an output
                        data['text/markdown'] = re.sub(r'\A\s*---\s*\n', '', md)
                    if 'text/html' in data:   # a long table shows its first rows and folds the others
                        h = data['text/html']
                        data['text/html'] = folded_html_table(''.join(h) if isinstance(h, list) else h)
                    if not data: continue
                outs.append(o)
            c.outputs = outs
            if not c.source.strip() and not outs: continue
        if tags: c.metadata['tags'] = sorted(set(tags))
        cells.append(c)
    title = fm.get('title') or title_fallback
    head = f'# {title}\n'
    if fm.get('description'): head += f"\n*{fm['description']}*\n"
    new = [mk_cell(head, 'markdown')]
    if banner: new.append(mk_cell(banner, 'markdown'))
    new += cells
    if footer: new.append(mk_cell(footer, 'markdown'))
    nb.cells = new
    return title

def with_current_text(executed: dict, current: dict, name: str = '') -> dict:
    """The executed copy `executed` (a notebook dict, as papermill wrote it) with the markdown and raw cells of `current`
    (the notebook in nbs/ now) in place of its own, when their code cells correspond: as many, each with the same
    source, in order (papermill's injected-parameters cell aside). A prose edit rightly stales no run, so the executed
    copies keep the text they ran with; the page shows today's text beside the run's outputs. Where the code differs
    (the run is stale), `executed` comes back as it is, with a warning that names `name`."""
    text = lambda c: (''.join(c['source']) if isinstance(c['source'], list) else c['source']).rstrip()
    injected = lambda c: 'injected-parameters' in (c.get('metadata') or {}).get('tags', [])
    lead, groups = [], []            # executed code cells, each with the injected cells that follow it
    for c in executed['cells']:
        if c['cell_type'] != 'code': continue
        if injected(c): (groups[-1] if groups else lead).append(c)
        else: groups.append([c])
    code = [c for c in current['cells'] if c['cell_type'] == 'code']
    if [text(g[0]) for g in groups] != [text(c) for c in code]:
        log(f'warning: {name}: its code differs from the notebook in nbs/ (a stale run): its page keeps the text it ran with')
        return executed
    cells, k = list(lead), 0
    for c in current['cells']:
        if c['cell_type'] == 'code': cells += groups[k]; k += 1
        else: cells.append(json.loads(json.dumps(c)))
    return dict(executed, cells=cells)

# ----- what a paper page adds to its executed copy: one parameters cell, its figures, long tables folded

PARAMS_NOTE = "# parameters of this run: papermill's values in the notebook's cell"

def _comment_start(line: str) -> int:
    "Where the `# comment` of a line of Python starts (its length when it has none), strings respected."
    import io, tokenize
    try:
        for t in tokenize.generate_tokens(io.StringIO(line).readline):
            if t.type == tokenize.COMMENT: return t.start[1]
    except (tokenize.TokenError, SyntaxError): pass
    return len(line)

def merge_parameters(params: str, injected: str) -> str:
    """The notebook's parameters cell `params` with each assignment that papermill's `injected` cell makes given the
    injected value (the value the run used), the notebook's comment kept; injected names `params` lacks are appended."""
    assign = re.compile(r'^(\w+)\s*=\s*(.*?)\s*$')
    given = {m.group(1): m.group(2) for m in map(assign.match, injected.splitlines()) if m}
    lines, done = [PARAMS_NOTE], set()
    for line in params.splitlines():
        m = assign.match(line[:_comment_start(line)])
        if m and m.group(1) in given:
            name, cut = m.group(1), _comment_start(line)
            new = f'{name} = {given[name]}'
            line = new + (' ' * max(1, cut - len(new)) + line[cut:] if cut < len(line) else '')
            done.add(name)
        lines.append(line)
    return '\n'.join(lines + [f'{k} = {v}' for k, v in given.items() if k not in done])

def one_parameters_cell(nb: dict) -> dict:
    """The executed copy `nb` (a notebook dict) with its parameters in one cell instead of two: papermill keeps the
    notebook's `parameters` cell (its defaults: `seed = 0`) and adds an `injected-parameters` cell (`seed = 2`).
    We keep the notebook's cell, its values replaced by the injected ones (`merge_parameters`), so the page shows
    the values the run used with the notebook's comments, and drop the injected cell."""
    tags = lambda c: (c.get('metadata') or {}).get('tags', [])
    cells = nb['cells']
    i = next((k for k, c in enumerate(cells) if c['cell_type'] == 'code' and 'parameters' in tags(c)), None)
    j = next((k for k, c in enumerate(cells) if c['cell_type'] == 'code' and 'injected-parameters' in tags(c)), None)
    if i is None or j is None: return nb
    src = lambda c: ''.join(c['source']) if isinstance(c['source'], list) else c['source']
    merged = dict(cells[i], source=merge_parameters(src(cells[i]), src(cells[j])))
    return dict(nb, cells=[merged if k == i else c for k, c in enumerate(cells) if k != j])

TABLE_ROWS_SHOWN = 15      # a table longer than TABLE_FOLD_AFTER rows shows its first TABLE_ROWS_SHOWN ...
TABLE_FOLD_AFTER = 25      # ... and the others in a <details> element ("show all"), no JavaScript

def _summary(n_rows: int) -> str:
    return f'<summary>show all {n_rows} rows ({n_rows - TABLE_ROWS_SHOWN} more)</summary>'

def folded_md_table(table: str) -> str:
    """A markdown table (a header line, a rule line, one line a row) of more than TABLE_FOLD_AFTER rows as its first
    TABLE_ROWS_SHOWN rows, then the others (under the same header) inside a <details> element; a shorter one as it
    is."""
    lines = table.strip('\n').splitlines()
    head, rows = lines[:2], lines[2:]
    if len(rows) <= TABLE_FOLD_AFTER: return table
    return '\n'.join(head + rows[:TABLE_ROWS_SHOWN] + ['', '<details class="folded-table">', _summary(len(rows)), '']
                     + head + rows[TABLE_ROWS_SHOWN:] + ['', '</details>'])

def _row_splits(rows: list[str]) -> list[int]:
    "Indices of the rows of an HTML table body where no `rowspan` cell of an earlier row is still open."
    ok, open_until = [], 0
    for i, r in enumerate(rows):
        if i >= open_until: ok.append(i)
        spans = [int(s) for s in re.findall(r'rowspan="(\d+)"', r)]
        open_until = max([open_until] + [i + s for s in spans])
    return ok

def folded_html_table(text: str) -> str:
    """An HTML output holding one table (pandas' `to_html`) of more than TABLE_FOLD_AFTER body rows as its first
    TABLE_ROWS_SHOWN rows (or a few more, so as not to split a `rowspan` group), then the others, under the same
    header, inside a <details> element. Anything else comes back as it is."""
    if text.count('<table') != 1 or text.count('<tbody>') != 1: return text
    start, end = text.index('<tbody>') + len('<tbody>'), text.index('</tbody>')
    rows = re.findall(r'<tr\b.*?</tr>', text[start:end], re.S)
    if len(rows) <= TABLE_FOLD_AFTER: return text
    cut = next((i for i in _row_splits(rows) if i >= TABLE_ROWS_SHOWN), len(rows))
    if cut >= len(rows): return text
    t0 = text.rindex('<table', 0, start)
    t1 = text.index('</table>', end) + len('</table>')
    open_tag, thead = text[t0:text.index('>', t0) + 1], text[text.index('>', t0) + 1:start - len('<tbody>')]
    rest = (f'<details class="folded-table">{_summary(len(rows))}{open_tag}{thead}<tbody>\n'
            + '\n'.join(rows[cut:]) + '\n</tbody></table></details>')
    first = text[t0:start] + '\n' + '\n'.join(rows[:cut]) + '\n</tbody></table>'
    return text[:t0] + first + rest + text[t1:]

_FIGURE_KEY = re.compile(r'^Fig(?:ure|\.)?s?\s+([A-Z]?)(\d+)([a-z]*)\b(.*)$')

def figure_key(item: str) -> tuple:
    "Sort key and identity of a figure item: 'Figure A10a' -> ('A', 10, 'a', ''), 'Figure 3 top' -> ('', 3, '', ' top')"
    m = _FIGURE_KEY.match(item.strip())
    return (m.group(1), int(m.group(2)), m.group(3), m.group(4)) if m else ('~', 0, '', item)

def figures_named(heading: str) -> set[tuple]:
    """The figures a heading names, as (prefix, number, letter): 'Figures 3-5 and 8-10: ...' -> 3, 4, 5, 8, 9, 10;
    'Figure 7a, Table A2 and Figure A10a' -> 7a, A10a. Asides in parentheses ('(App. C.3)', '(top)') are skipped."""
    text, out = re.sub(r'\([^)]*\)', ' ', heading), set()
    tok = r'([A-Z]?)(\d+)([a-z]*)'
    for run in re.finditer(r'\bFig(?:ure|\.)?s?\s+(' + tok + r'(?:\s*(?:[-–,/&]|and|to)\s*' + tok + r')*)', text):
        parts = re.findall(tok + r'(?:\s*[-–]\s*' + tok + r')?', run.group(1))
        for p, a, s, q, b, _ in parts:
            if b and q == p: out |= {(p, n, '') for n in range(int(a), int(b) + 1)}
            else: out.add((p, int(a), s))
    return out

def _names(heading_figures: set, item: str) -> bool:
    "Whether a heading naming `heading_figures` (`figures_named`) names `item` (a letter must agree if both have one)."
    p, n, s, _ = figure_key(item)
    return any(hp == p and hn == n and (not hs or not s or hs == s) for hp, hn, hs in heading_figures)

def _source(c) -> str: return ''.join(c['source']) if isinstance(c['source'], list) else c['source']

def _cell_headings(cells: list) -> list[set]:
    "For each cell, the figures named by the last `##`-or-deeper heading above it (`figures_named`)."
    out, cur = [], set()
    for c in cells:
        out.append(cur)
        if c['cell_type'] == 'markdown':
            for line in _source(c).splitlines():
                if re.match(r'^#{2,6}\s', line): cur = figures_named(line)
    return out

def saving_cell(cells: list, item: str) -> int|None:
    """Index of the code cell of `cells` (notebook dict cells) that saves the figure of `item` with the record book:
    1. a cell naming it as a string literal where a figure is saved (`save_figure(fig, 'Figure 2')`, a library
       function's `figure='Figure 8a'`), else one whose f-string there starts like it (`f'Figure 11 {sub}'`), else a
       call naming it first (`rm_loss_ablation(book, 'Figure 8a', ...)`, `compare('Figure 14', ...)`; not `book.add`);
    2. else a cell that saves a figure whose name is a variable (`save_figure(fig, item)`): the first under a heading
       that names this figure ('Figures 3-5 and 8-10'), else the first under a heading that names no other figure.
    None when no cell fits."""
    q = re.escape(item)
    code = [(i, _source(c)) for i, c in enumerate(cells) if c['cell_type'] == 'code']
    literal = [rf'''save_figure\([^,()]*,\s*['"]{q}['"]''', rf'''\bfigure\s*=\s*['"]{q}['"]''']
    call = [rf'''(?:^|[^\w.])\w+\(\s*(?:book\s*,\s*)?['"]{q}['"]''']     # f('item', ...), f(book, 'item', ...)
    for pats in (literal, None, call):
        for i, s in code:
            if pats is None:
                prefixes = re.findall(r'''(?:save_figure\([^,()]*,|\bfigure\s*=)\s*f['"]([^'"{]+)\{''', s)
                if any(item.startswith(p) for p in prefixes): return i
            elif any(re.search(p, s) for p in pats): return i
    heads = _cell_headings(cells)
    by_var = [i for i, s in code if re.search(r'''save_figure\([^,()]*,\s*(?!f?['"])''', s)]
    for ok in (lambda h: _names(h, item), lambda h: not h):
        hit = [i for i in by_var if ok(heads[i])]
        if hit: return hit[0]
    return None

def figure_markdown(items: tuple[str, ...], seed: int, path: str, file: str) -> str:
    """The markdown cell that shows one saved figure file: `path` relative to the page, `file` as the reader finds it in
    the repository, `items` the figures the run saved to it (two when their names differ only in punctuation)."""
    what = ' and '.join(items)
    note = (f'; the run saved {what} to this one file, which holds the one saved last (its title says which)'
            if len(items) > 1 else '')
    return (f'```{{figure}} {path}\n:alt: {what}, as the run of seed {seed} drew it\n:class: saved-figure\n\n'
            f'{what}, seed {seed} (`{file}`, saved by this run{note})\n```')

def with_figures(nb: dict, figures: list[tuple[tuple, str, str]], seed: int) -> dict:
    """The notebook dict `nb` with a markdown cell showing each of `figures` (items, path from the page, repository
    path) right after the code cell that saved it (`saving_cell`), in the order of the figure numbers; a figure no cell
    fits goes under a heading 'Figures' at the end. The executed copies hold no figure themselves: the notebooks save
    them with the record book and show them under matplotlib's Agg backend, which outputs nothing."""
    after: dict = {}
    for items, path, file in sorted(figures, key=lambda f: figure_key(f[0][0])):
        after.setdefault(saving_cell(nb['cells'], items[0]), []).append(figure_markdown(items, seed, path, file))
    md = lambda s: {'cell_type': 'markdown', 'metadata': {}, 'source': s}
    cells = []
    for i, c in enumerate(nb['cells']):
        cells.append(c)
        cells += [md(s) for s in after.get(i, [])]
    if after.get(None):
        cells.append(md('## Figures\n\nThe figures this run saved that no code cell above names.'))
        cells += [md(s) for s in after[None]]
    return dict(nb, cells=cells)

def shown_figures(name: str, scale: str, seed: int) -> list[tuple[str, Path]]:
    """The figures the run of `name` with `seed` at `scale` saved, as its provenance names them
    (`results/<scale>/runs/<name>.seed<k>.json`, `figures`: item -> file in `results/<scale>/figures/`)."""
    f = RESULTS/scale/'runs'/f'{name}.seed{seed}.json'
    named = (json.loads(f.read_text(encoding='utf-8')).get('figures') or {}) if f.exists() else {}
    out = [(item, RESULTS/scale/'figures'/file) for item, file in named.items()]
    for item, p in out:
        if not p.exists(): log(f'warning: {name}: the figure {item!r} its seed {seed} run saved is missing ({p})')
    return [(item, p) for item, p in out if p.exists()]

def shown_seed(run_nb: Path) -> int|None:
    "The seed of the run whose executed copy `run_nb` a page shows (papermill's parameters in its metadata)."
    meta = json.loads(run_nb.read_text(encoding='utf-8')).get('metadata', {}).get('papermill') or {}
    seed = (meta.get('parameters') or {}).get('seed')
    return int(seed) if seed is not None else None

def page_figures(name: str, scale: str, run_nb: Path, wanted: set) -> tuple[int, list]|None:
    """The figures for the page of `name` at `scale` (`process`'s `figures`): the files its shown run saved
    (`shown_figures`), each once with the items saved to it, copied into the Sphinx source tree
    (`papers/figures/<scale>/`, added to `wanted`) so the site needs nothing outside itself. None when the run has no
    seed parameter."""
    seed = shown_seed(run_nb)
    if seed is None: return None
    items: dict = {}
    for item, f in shown_figures(name, scale, seed): items.setdefault(f, []).append(item)
    out = []
    for f, its in items.items():
        rel = f'papers/figures/{scale}/{f.name}'; wanted.add(rel)     # a scale each: the file names repeat
        d = SRC/rel; d.parent.mkdir(parents=True, exist_ok=True)
        if not d.exists() or d.read_bytes() != f.read_bytes(): shutil.copyfile(f, d)
        out.append((tuple(sorted(its, key=figure_key)), rel[len('papers/'):], f.relative_to(ROOT).as_posix()))
    return seed, out

def process(src: Path, dst: Path, title: str, banner: str|None = None, footer: str|None = None,
            prepared: Path|None = None, current: Path|None = None, figures: list|None = None) -> str:
    """The page notebook of `src` (a notebook, or an executed copy papermill wrote), or of `prepared`, the executed
    copy of `src` that `prepare` made, through nbdev's processors and `_to_myst`, written to `dst`. Returns the title.
    `current`: the notebook in nbs/ that the executed copy `src` ran, whose markdown the page shows
    (`with_current_text`). Such a page shows its parameters once (`one_parameters_cell`) and `figures`, (seed,
    [(items, path from the page, repository path)]), the figures that run saved, each after the cell that saved it
    (`with_figures`)."""
    from execnb.nbio import read_nb, dict2nb
    from nbdev.process import NBProcessor
    if current is not None:
        read = lambda f: json.loads(f.read_text(encoding='utf-8'))
        where = src.relative_to(ROOT).as_posix() if src.is_relative_to(ROOT) else str(src)
        d = one_parameters_cell(with_current_text(read(src), read(current), where))
        if figures: d = with_figures(d, figures[1], figures[0])
        nb = dict2nb(d)
    else: nb = read_nb(prepared or src)
    if prepared is not None: restore(nb)               # `prepare` already split the title cell
    else: _split_title_cell(nb)
    nb['path_'] = str(src)                                 # nbdev's front matter names the page after the source
    cwd = os.getcwd(); os.chdir(NBS)
    try: NBProcessor(nb=nb, procs=nbdev_procs(), process=True)
    finally: os.chdir(cwd)
    t = _to_myst(nb, title, banner, footer)
    _write_nb(nb, dst)
    return t

# ----------------------------------------------------------------------------- pages

def _fmt(v) -> str:
    try: v = float(v)
    except (TypeError, ValueError): return ''
    if v != v: return ''
    return f'{v:.4g}' if abs(v) < 1e4 else f'{v:.3e}'

def _md_escape(s) -> str: return str(s).replace('|', '\\|').replace('\n', ' ')

def records_of(name: str, scale: str):
    "The records every seed of experiment notebook `name` wrote at `scale` (results/<scale>/records/<name>.seed<k>.csv)."
    import pandas as pd
    files = sorted((RESULTS/scale/'records').glob(f'{name}.seed*.csv'))
    frames = [pd.read_csv(f) for f in files]
    frames = [f for f in frames if not f.empty]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

def records_table(df) -> str:
    "Markdown table: mean ± std over seeds of each (item, dataset, method, metric), beside the paper's value."
    if df.empty: return ''
    g = df.groupby(['item', 'dataset', 'method', 'metric'], sort=True, dropna=False)
    rows = ['| item | dataset | method | metric | reproduced (mean ± std) | seeds | paper |', '|---|---|---|---|---|---|---|']
    for (item, dataset, method, metric), x in g:
        v = x['value'].astype(float)
        rep = _fmt(v.mean()) + (f' ± {_fmt(v.std(ddof=1))}' if len(v) > 1 else '')
        pv = x['paper_value'].dropna()
        rows.append('| ' + ' | '.join(_md_escape(s) for s in (item, dataset, method, metric, rep,
                                                             ', '.join(str(s) for s in sorted(x['seed'].unique())),
                                                             _fmt(pv.iloc[0]) if len(pv) else '–')) + ' |')
    return '\n'.join(rows)

def provenance_rows(name: str, scale: str) -> list[dict]:
    "Per seed with records at `scale`: what `compatrepro.runs.run_state` says and what the provenance file records."
    res = RESULTS/scale
    runs = R.runs_of(res)
    out = []
    for seed in sorted(runs[runs.notebook == name].seed):
        state, why = R.run_state(res, name, int(seed), NBS)
        f = res/'runs'/f'{name}.seed{seed}.json'
        prov = json.loads(f.read_text(encoding='utf-8')) if f.exists() else {}
        out.append(dict(seed=int(seed), state=state, why=why, prov=prov, file=f))
    return out

def _provenance_table(rows: list[dict]) -> str:
    lines = ['| seed | code and versions | threads | device | torch | finished |', '|---|---|---|---|---|---|']
    for r in rows:
        p = r['prov']
        if r['state'] == 'current': st = f"current (code {p.get('code_hash', '?')}, {len(p.get('library', {}))} library definitions)"
        else: st = f"**{r['state']}**: " + '; '.join(r['why'])
        dur = p.get('duration')
        fin = (p.get('updated', '')[:16].replace('T', ' ') + (f' UTC, {dur:.0f} s' if isinstance(dur, (int, float)) else ' UTC')
               if p else '–')
        if p and p.get('finished') is False: fin = f'**did not finish** (last wrote {fin})'
        threads = p.get('runner', {}).get('threads') or p.get('threads')
        dev = p.get('device', '–') + (f", {p['cpu']}, {p['cpu_capability']}" if p.get('cpu') else '')
        lines.append('| ' + ' | '.join(_md_escape(x) for x in (r['seed'], st, threads or '–', dev,
                                                                 p.get('torch', '–'), fin)) + ' |')
    return '\n'.join(lines)

def exp_banner(name: str, scale: str|None, run_nb: Path|None, other: list[str], prov: list[dict]) -> str:
    "The page's banner: which run made its outputs, and each seed's state (`prov`: `provenance_rows`)."
    if scale is None:
        return ('```{admonition} Not yet run\n:class: warning\n'
                f'No executed copy of this notebook exists yet (`results/<scale>/notebooks/{name}.ipynb`): '
                'the code is shown without outputs. Run it with\n'
                f'`compatrepro reproduce --only {name}` (tiny scale, minutes on a CPU) or at paper scale, '
                'see [Running at paper scale](../paper_scale.md).\n```\n')
    meta = json.loads(run_nb.read_text(encoding='utf-8')).get('metadata', {}).get('papermill', {}) or {}
    params = meta.get('parameters', {}) or {}
    lines = [f'**Outputs on this page come from a real run at {SCALE_WORDS.get(scale, scale)}.**', '']
    lines.append(f'- executed copy: `{run_nb.relative_to(ROOT).as_posix()}`'
                 + (f", by papermill, {meta['end_time'][:19].replace('T', ' ')} UTC" if meta.get('end_time') else '')
                 + (f", {meta['duration']:.0f} s" if isinstance(meta.get('duration'), (int, float)) else ''))
    if params:
        lines.append('- parameters: ' + ', '.join(f'`{k}={v!r}`' for k, v in params.items()))
    r = records_of(name, scale)
    if not r.empty:
        lines.append('- datasets in its records: ' + '; '.join(sorted(map(str, r['dataset'].unique()))))
        lines.append('- seeds with records: ' + ', '.join(str(s) for s in sorted(r['seed'].unique()))
                     + ' (the page shows the latest run; the table at the bottom aggregates the current seeds)')
    if meta.get('exception'):
        lines.append('- **this run raised an exception**: its outputs stop where it failed')
    for o in other:
        lines.append(f'- the same notebook at {o} scale: [{name} ({o})]({name}__{o}.ipynb)')
    if 'paper' not in [scale] + other:
        lines.append('- not yet run at paper scale: see [Running at paper scale](../paper_scale.md)')
    stale = [p for p in prov if p['state'] != 'current']
    if prov and not any(p['prov'] for p in prov):
        lines.append(f'- **stale**: no run of it recorded its provenance (`results/{scale}/runs/{name}.seed<k>.json`: '
                     'code hash, versions used, threads, device, torch); they were made before runs did, so '
                     '`compatrepro status` cannot tell that they match this code, and counts them as stale until they '
                     f'are rerun (`compatrepro reproduce --only {name} --seeds ' + ' '.join(str(p['seed']) for p in prov) + '`)')
    elif prov:
        lines += ['', f'What each run recorded about itself (`results/{scale}/runs/{name}.seed<k>.json`), checked against '
                  'the code and versions of this checkout (`compatrepro status`):', '', _provenance_table(prov)]
    kind = 'warning' if meta.get('exception') or stale else 'note'
    return f'````{{admonition}} Which run made these numbers\n:class: {kind}\n' + '\n'.join(lines) + '\n````\n'

def exp_footer(name: str, scale: str|None, prov: list[dict]) -> str|None:
    """The records of the current seeds aggregated beside the paper's numbers; a stale seed's records (`prov`:
    `provenance_rows`) are left out, and named, so that a re-run in progress never averages old code with new."""
    if scale is None: return None
    r = records_of(name, scale)
    if r.empty: return None
    stale = sorted(p['seed'] for p in prov if p['state'] != 'current')
    current = r[~r['seed'].isin(stale)]
    left = (f" Left out: the records of seed{'s' if len(stale) > 1 else ''} {', '.join(map(str, stale))}, whose "
            "run is stale (see the banner above) until it is re-run." if stale else '')
    return ('## Records of this notebook beside the paper\n\n'
            f'The current seeds in `results/{scale}/records/{name}.seed*.csv`, aggregated (mean ± sample std over seeds); '
            "*paper* is the paper's own number where it prints one." + left + '\n\n'
            + (folded_md_table(records_table(current)) if not current.empty else 'No seed of it is current.') + '\n')

def lib_banner(skipped: int, seconds: float) -> str:
    s = (f' {skipped} cell(s) tagged `#| notest` or `#| gpu` were not run; each says so in its output.' if skipped else '')
    return ('```{admonition} Outputs\n:class: note\nThe outputs on this page were made by executing this notebook with '
            f'papermill while building the site (CPU, small cases computable by hand; no paper-scale data; '
            f'{seconds:.0f} s). Cells tagged `#| slow` ran too.{s}\n```\n')

def _status_cell(row, scale: str, pages: dict) -> str:
    "One status cell of the results overview, from a row of `compatrepro.runs.status_table`."
    def link(nb):
        page = pages.get((nb, scale))
        return f'[{nb}]({page})' if page else f'`{nb}`'
    nbs = row.notebooks.split() if isinstance(row.notebooks, str) else []
    if row.status == 'illustration': return 'illustration'
    if row.status == 'missing': return 'missing'
    if row.status in ('reproduced', 'partly', 'differs', 'runs'):
        held = R.findings_text(row) + (f' (checks {row.checks_holding}/{row.checks})' if row.checks else '')
        return f'**{row.status}**, {held}, seeds {row.seeds.replace(" ", ", ")}: ' + ', '.join(link(n) for n in nbs)
    # stale: '<nb> seed <k>: <why>' parts, grouped by reason and seeds, so notebooks with the same story share a line
    seeds: dict = {}
    for part in str(row.reasons).split(' | '):
        m = re.match(r'^(\S+) seed (\d+): (.*)$', part)
        if m: seeds.setdefault((m.group(1), m.group(3)), []).append(m.group(2))
    groups: dict = {}
    for (nb, w), ss in seeds.items(): groups.setdefault((w, tuple(ss)), []).append(nb)
    why = [f'{", ".join(link(nb) for nb in nbs)} seed{"s" if len(ss) > 1 else ""} {", ".join(ss)}: {_md_escape(w)}'
           for (w, ss), nbs in groups.items()]
    cur = f' (current seeds: {row.seeds.replace(" ", ", ")})' if isinstance(row.seeds, str) and row.seeds.strip() else ''
    return f'**stale**{cur}: ' + '<br>'.join(why)

OVERVIEW_FIGURE = 'results_overview.svg'
VERDICT_COLOURS = {'holds': '#4c9a5b', 'within noise': '#b8b8b8', 'fails': '#c8553d', 'missing': '#ffffff'}
STATE_COLOURS = {'reproduced': '#4c9a5b', 'partly': '#a7c957', 'differs': '#c8553d', 'runs': '#b8b8b8',
                 'stale': '#e9c46a', 'missing': '#ffffff'}

def overview_figure(tiny) -> str:
    """results_overview's picture (SVG text, its text kept as text): per paper at tiny scale, its findings by verdict
    over the seeds, and its result tables and figures by state (`tiny`: the overview's `status_table` at tiny scale)."""
    import io
    import matplotlib; matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    claims = R.item_claims(RESULTS/'tiny', DOCS/'claims.csv').drop_duplicates(['notebook', 'key'])
    findings = claims[claims.kind == 'finding']
    t = tiny[tiny.kind == 'result']
    papers = list(dict.fromkeys(tiny.paper))[::-1]     # in docs/paper_items.csv's order, the first paper on top
    panels = ((findings, 'verdict', VERDICT_COLOURS, 'findings of the paper, by verdict over the seeds'),
              (t, 'status', STATE_COLOURS, 'result tables and figures, by state'))
    with plt.rc_context({'svg.fonttype': 'none', 'svg.hashsalt': 'compatrepro', 'font.size': 9}):
        fig, axes = plt.subplots(1, 2, figsize=(10, 2.6), constrained_layout=True)
        for ax, (df, col, colours, title) in zip(axes, panels):
            counts = {p: df[df.paper == p][col].value_counts() for p in papers}
            left = [0]*len(papers)
            for name, colour in colours.items():
                n = [int(counts[p].get(name, 0)) for p in papers]
                if not any(n): continue
                ax.barh(papers, n, left=left, color=colour, edgecolor='#555555', linewidth=0.5, label=name)
                left = [a + b for a, b in zip(left, n)]
            for y, p in enumerate(papers):
                h, tot = int(counts[p].get('holds' if col == 'verdict' else 'reproduced', 0)), int(counts[p].sum())
                ax.text(left[y], y, f' {h} of {tot}', va='center')
            ax.set_title(title, loc='left'); ax.set_xlim(0, max(left)*1.18)
            ax.spines[['top', 'right']].set_visible(False)
            ax.legend(ncols=len(ax.get_legend_handles_labels()[1]), loc='lower left', bbox_to_anchor=(0, -0.42), frameon=False)
        buf = io.StringIO(); fig.savefig(buf, format='svg', metadata={'Date': None}); plt.close(fig)
    return buf.getvalue()

def results_overview(pages: dict, tabs: dict) -> str:
    """results.md: every item of docs/paper_items.csv with its status at tiny and paper scale (`tabs`: scale ->
    compatrepro.runs.status_table)."""
    kinds = {(i['paper'], i['item']): i['kind'] for i in R.paper_items(ROOT)}
    out = ['# Results overview', '',
           'Every table and figure of the four papers, and where the package stands on each, at **tiny** scale (the '
           'Glyphs stand-in, CPU) and at **paper** scale (the papers\' data). This page is `compatrepro status` '
           '(`compatrepro.runs.status_table`) for both scales:', '',
           '- **reproduced**: records for the item exist under `results/<scale>/records/`, every run that wrote '
           'them is current (its notebook\'s code, the library code it reaches, the versions of the methods and recipes '
           'it used and the records it read are those of this checkout: its provenance, '
           '`results/<scale>/runs/<notebook>.seed<k>.json`), and every finding of the paper declared on its numbers holds '
           'over the seeds (checks, what holds by construction, are counted apart and never make an item reproduced). The seeds are those current runs; the link goes to the notebook page.',
           '- **partly** / **differs**: current, and some / none of its findings hold; the claims notebook of the paper '
           'gives, beside each one that does not hold, the reason written for it in `docs/claims.csv` (expected before '
           'the runs) or `docs/differing_verdicts.csv` (measured after them); a finding whose numbers no run has made yet '
           'is missing, and does not hold.',
           '- **runs**: current, but no finding is declared on its numbers, so nothing says yet whether they show what the '
           'paper shows; or a table of the setup (a data allocation), which carries checks, never a finding.',
           '- An item on which the paper makes its findings together with another item that shows the same runs (a '
           'figure of a table\'s curves, an appendix table repeating a main one at more operating points) takes the state '
           'and counts of the findings declared on that item, named in its cell (`findings_on` in `docs/paper_items.csv`).',
           '- **stale**: records exist, but some run that wrote them no longer matches the code; the reason is given. '
           '`compatrepro reproduce --scale <scale> --only <notebook> --seeds ...` makes them current again.',
           '- **missing**: no records yet.',
           '- **illustration**: a figure that shows the method rather than a result: nothing to compute.', '',
           'Smoke-scale runs (a few seconds per notebook, to check that the code runs) are never committed and never '
           'shown. The list of items is `docs/paper_items.csv`, made by reading the papers; each notebook page ends '
           'with its records beside the paper\'s numbers.', '',
           f':::{{figure}} {OVERVIEW_FIGURE}', ':alt: per paper, bars of its findings by verdict and of its tables and figures by state', '',
           'At tiny scale, per paper: its findings by verdict over the seeds (beside each bar, how many hold of all) and its '
           'result tables and figures by state (how many are reproduced of all).', ':::', '']
    for scale, t in tabs.items():
        res = t[t.kind == 'result']
        n = res.status.value_counts()
        out.append(f'- {scale} scale: **{n.get("reproduced", 0)} of {len(res)}** result tables and figures reproduced, '
                   f'{n.get("partly", 0)} partly, {n.get("differs", 0)} differ, {n.get("runs", 0)} run without a claim, '
                   f'{n.get("stale", 0)} stale, {n.get("missing", 0)} missing')
    out.append('')
    tiny, paper = tabs['tiny'], tabs['paper']
    key = lambda t: {(r.paper, r.item): r for r in t.itertuples()}
    kt, kp = key(tiny), key(paper)
    papers = list(dict.fromkeys(i['paper'] for i in R.paper_items(ROOT)))
    for p in papers:
        out += [f'## {p}', '', PAPER_TITLES.get(p, ''), '', ':::{container} status-table', '| item | what | tiny | paper |', '|---|---|---|---|']
        for (pp, item), kind in kinds.items():
            if pp != p: continue
            rt, rp = kt[(pp, item)], kp[(pp, item)]
            out.append(f'| {item} | {_md_escape(rt.caption)} | {_status_cell(rt, "tiny", pages)} | {_status_cell(rp, "paper", pages)} |')
        out += [':::', '']
    extra = [k for k in list(kt) + [k for k in kp if k not in kt] if k not in kinds]
    if extra:
        out += ['## Records that name no numbered item', '',
                'Some notebooks also record numbers the papers do not put in a numbered table or figure (the trained '
                'models\' own accuracy, the checks of the papers\' claims):', '',
                ':::{container} status-table', '| paper | item | tiny scale | paper scale |', '|---|---|---|---|']
        for k in extra:
            cells = [_status_cell(t[k], s, pages) if k in t else 'missing' for t, s in ((kt, 'tiny'), (kp, 'paper'))]
            out.append(f'| {k[0]} | {_md_escape(k[1])} | {cells[0]} | {cells[1]} |')
        out += [':::', '']
    return '\n'.join(out) + '\n'

def data_layouts() -> str:
    "data_prep/README.md (the data code's own layout description), its title dropped and its headings one level down."
    f = ROOT/'data_prep'/'README.md'
    if not f.exists(): return '*(data_prep/README.md has not landed yet: the layouts will appear here.)*'
    lines = f.read_text(encoding='utf-8').splitlines()
    if lines and lines[0].startswith('# '): lines = lines[1:]
    return '\n'.join('#' + l if re.match(r'^#{1,5} ', l) else l for l in lines).strip() + '\n'

def _help_block(*args: str) -> str:
    txt = cli_help(*args)
    return ('```text\n' + txt.rstrip() + '\n```') if txt else '*(the `compatrepro` command is missing)*'

def cli_help(*args: str) -> str:
    "The real `compatrepro <args>`, so the pages never drift from it."
    try:
        r = subprocess.run([sys.executable, '-c', 'import sys; from compatrepro.cli import main; sys.exit(main(sys.argv[1:]))',
                            *args], cwd=ROOT, capture_output=True, text=True, timeout=300)
        if r.stdout.strip(): return r.stdout
    except Exception: pass
    return ''

# ----------------------------------------------------------------------------- main

def _has_gpu() -> bool:
    try:
        import torch; return torch.cuda.is_available()
    except Exception: return False

def execute_library(lib: list[Path], flags: list[str], jobs: int, timeout: int, force: bool, strict: bool) -> dict:
    "Prepare and execute (through compatrepro.runs.run_notebooks) the library notebooks whose cache is stale; return their metas."
    lhash = lib_hash()
    todo, metas = [], {}
    for p in lib:
        key = _sha(p.read_bytes(), lhash.encode(), json.dumps(flags).encode())
        out, meta = EXEC/p.name, EXEC/(p.stem + '.json')
        if not force and out.exists() and meta.exists() and json.loads(meta.read_text()).get('key') == key:
            metas[p.stem] = json.loads(meta.read_text()); continue
        skipped = prepare(p, PREP/p.name, flags)
        todo.append((p, R.NotebookJob(PREP/p.name, EXEC/'run'/p.name, {}, name=p.stem, cwd=NBS, timeout=timeout),
                     dict(key=key, skipped=skipped)))
    if not todo:
        _write_summary(lib, metas, {}); return metas
    log(f'executing {len(todo)} library notebook(s) with papermill, {jobs} at a time: ' + ', '.join(p.stem for p, _, _ in todo))
    R.run_notebooks([j for _, j, _ in todo], n_jobs=jobs, show=True)
    errors, failed = [], {}
    for p, job, m in todo:
        if job.ok:
            shutil.copyfile(job.out, EXEC/p.name)
            m.update(seconds=round(job.seconds, 1), threads=job.threads)
            (EXEC/(p.stem + '.json')).write_text(json.dumps(m))
            metas[p.stem] = m
        else:
            tb = traceback_of(job.out) or job.error
            errors.append(f'{p.name} failed (executed copy: {job.out.relative_to(ROOT)}, log: '
                          f'{job.out.with_suffix(".log").relative_to(ROOT)}):\n{tb}')
            failed[p.stem] = errors[-1]
    _write_summary(lib, metas, failed)
    if errors:
        msg = '\n\n'.join(errors)
        if strict: raise SystemExit(f'[docs] build failed: {len(errors)} library notebook(s) failed\n\n{msg}')
        log(f'warning: {len(errors)} notebook(s) failed and are left out:\n{msg}')
    return metas

def _write_summary(lib, metas, failed):
    "exec/summary.json: for each library notebook, whether its executed copy is there (ok) or why not (the tests read it)."
    summary = {p.stem: (dict(ok=True, seconds=metas[p.stem].get('seconds')) if p.stem in metas
                        else dict(ok=False, error=failed.get(p.stem, 'not executed'))) for p in lib}
    (EXEC/'summary.json').write_text(json.dumps(summary, indent=1))

def execute_only(jobs: int = 2, timeout: int = 900, force: bool = False) -> dict:
    """Prepare and execute every library notebook into the build's execution cache, without stopping at a failure, and
    return exec/summary.json. The tests run this, so that building the site afterwards executes nothing again."""
    flags = skip_flags(settings(), _has_gpu())
    for d in (PREP, EXEC): d.mkdir(parents=True, exist_ok=True)
    lib = [p for p in notebooks() if not is_experiment_notebook(p) and default_exp(p) is not None]
    execute_library(lib, flags, jobs, timeout, force, strict=False)
    return json.loads((EXEC/'summary.json').read_text())

def build(jobs: int = 2, timeout: int = 900, force: bool = False, strict: bool = True) -> Path:
    "Build the site into docs/_site; return the path of its index.html."
    t0 = time.time()
    flags = skip_flags(settings(), _has_gpu())
    if force and BUILD.exists(): shutil.rmtree(BUILD)
    for d in (SRC, PREP, EXEC): d.mkdir(parents=True, exist_ok=True)
    nbs = notebooks()
    lib = [p for p in nbs if not is_experiment_notebook(p)]
    exp = [p for p in nbs if is_experiment_notebook(p)]
    wanted = set()                                          # generated files this build, relative to SRC

    # -- library (and other non-experiment) notebooks: executed (cached), then processed
    to_run = [p for p in lib if default_exp(p) is not None]
    metas = execute_library(to_run, flags, jobs, timeout, force, strict)
    lib_pages = []
    t1 = time.time()
    for p in lib:
        rel = f'api/{p.name}'
        if p in to_run and p.stem not in metas: continue     # failed with --keep-going
        m = metas.get(p.stem)
        process(p, SRC/rel, p.stem, banner=lib_banner(m['skipped'], m['seconds']) if m else None,
                prepared=EXEC/p.name if m else None)
        wanted.add(rel); lib_pages.append((p, rel))

    # -- experiment notebooks: executed copies from results/, never executed here
    pages, exp_entries = {}, []
    for p in exp:
        name = p.stem
        runs = {s: RESULTS/s/'notebooks'/p.name for s in SCALE_ORDER if (RESULTS/s/'notebooks'/p.name).exists()}
        scales = [s for s in SCALE_ORDER if s in runs] or [None]
        for i, scale in enumerate(scales):
            rel = f'papers/{name}.ipynb' if i == 0 else f'papers/{name}__{scale}.ipynb'
            others = [s for s in scales if s != scale and s is not None]
            prov = provenance_rows(name, scale) if scale else []
            figures = page_figures(name, scale, runs[scale], wanted) if scale else None
            process(runs.get(scale, p), SRC/rel, name, banner=exp_banner(name, scale, runs.get(scale), others, prov),
                    footer=exp_footer(name, scale, prov), current=p if scale else None, figures=figures)
            wanted.add(rel)
            if scale: pages[(name, scale)] = rel
            exp_entries.append((p, rel, scale, i == 0))
    log(f'processed {len(lib_pages)} library and {len(exp_entries)} experiment page(s) in {time.time()-t1:.0f}s')

    # -- generated pages
    lines = ['# Library', '', 'One page per library notebook: the API (signatures and docstrings made by nbdev\'s `show_doc`), '
             'the paper equation each function implements, and the notebook\'s own tests with their outputs.', '',
             '```{toctree}', ':maxdepth: 1', ''] + [rel[len('api/'):] for p, rel in lib_pages] + ['```', '']
    write_if_changed(SRC/'api/index.md', '\n'.join(lines)); wanted.add('api/index.md')
    lines = ['# Paper sections', '', 'One page per experiment notebook (one paper section each; the notebook\'s decade says '
             'which paper: 20-29 FastFill, 30-39 BCT, 40-49 RACT, 50-59 RM, each ending with its claims notebook). A page '
             'shows the executed copy that `compatrepro reproduce` wrote, says which scale, dataset and seeds made its '
             'numbers and whether each run is still current, and ends with its records beside the paper\'s own '
             'numbers. See also the [results overview](../results.md).', '']
    by_paper: dict = {}
    for p, rel, scale, primary in exp_entries:
        by_paper.setdefault(_paper(p), []).append((p, rel, scale, primary))
    hidden = []
    for paper in list(PAPER_TITLES) + ['Other']:
        ents = by_paper.get(paper)
        if not ents: continue
        lines += [f'## {paper}', '', '| notebook | shown run | other runs |', '|---|---|---|']
        for p, rel, scale, primary in ents:
            if not primary: hidden.append(rel[len('papers/'):]); continue
            others = [f'[{e[2]}]({e[1][len("papers/"):]})' for e in ents if e[0] == p and not e[3]]
            lines.append(f"| [{p.stem}]({rel[len('papers/'):]}) | {scale or 'not yet run'} | {', '.join(others) or '–'} |")
        lines += ['', '```{toctree}', ':hidden:', ':maxdepth: 1', '']
        lines += [rel[len('papers/'):] for p, rel, scale, primary in ents if primary] + ['```', '']
    if not exp_entries: lines += ['No experiment notebook has landed in `nbs/` yet.', '']
    if hidden: lines += ['```{toctree}', ':hidden:', ''] + hidden + ['```', '']
    write_if_changed(SRC/'papers/index.md', '\n'.join(lines)); wanted.add('papers/index.md')
    tabs = {s: R.status_table(s, RESULTS, NBS) for s in ('tiny', 'paper')}     # read once for the page and its picture
    write_if_changed(SRC/'results.md', results_overview(pages, tabs)); wanted.add('results.md')
    write_if_changed(SRC/OVERVIEW_FIGURE, overview_figure(tabs['tiny'])); wanted.add(OVERVIEW_FIGURE)
    # hand-written pages: every docs/*.md, with the real command-line help and data layouts filled in
    fills = {'{{CLI_HELP}}': lambda: _help_block('reproduce', '--help'), '{{STATUS_HELP}}': lambda: _help_block('status', '--help'),
             '{{DATA_LAYOUTS}}': data_layouts}
    for f in sorted(DOCS.glob('*.md')):
        text = f.read_text(encoding='utf-8')
        for tag, fill in fills.items():
            if tag in text: text = text.replace(tag, fill())
        write_if_changed(SRC/f.name, text); wanted.add(f.name)
    if (DOCS/'_static').exists():
        for f in (DOCS/'_static').rglob('*'):
            if f.is_file():
                rel = f.relative_to(DOCS).as_posix(); wanted.add(rel)
                d = SRC/rel; d.parent.mkdir(parents=True, exist_ok=True)
                if not d.exists() or d.read_bytes() != f.read_bytes(): shutil.copy2(f, d)
    for f in list(SRC.rglob('*')):                         # pages of notebooks that are gone
        if f.is_file() and f.relative_to(SRC).as_posix() not in wanted: f.unlink()

    # -- Sphinx
    log('rendering with Sphinx + myst-nb')
    # -E: read every page afresh, so a link to a page that appeared since the last build resolves (Sphinx's
    # incremental mode re-reads only changed files); writing pages is still skipped for unchanged output.
    t1 = time.time()
    # Sphinx writes into docs/_build/html (myst-nb puts its extracted images beside its output folder, which
    # must not be docs/ itself); the finished site is then copied to docs/_site.
    html_out = BUILD/'html'
    cmd = [sys.executable, '-m', 'sphinx', '-b', 'html', '-E', '-c', str(DOCS), '-d', str(BUILD/'doctrees'),
           '-q', str(SRC), str(html_out)]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    (BUILD/'sphinx-warnings.txt').write_text(r.stderr)
    if r.returncode != 0: raise SystemExit(f'[docs] sphinx failed:\n{r.stdout[-3000:]}\n{r.stderr[-6000:]}')
    nwarn = len([l for l in r.stderr.splitlines() if 'WARNING' in l])
    log(f'Sphinx took {time.time()-t1:.0f}s' + (f', {nwarn} warning(s): see {(BUILD/"sphinx-warnings.txt").relative_to(ROOT)}' if nwarn else ''))
    if SITE.exists(): shutil.rmtree(SITE)
    shutil.copytree(html_out, SITE, ignore=shutil.ignore_patterns('.buildinfo', '.doctrees'))
    (SITE/'.nojekyll').touch()
    log(f'built {SITE.relative_to(ROOT)}/index.html: {len(lib_pages)} library page(s), {len(exp_entries)} paper page(s), '
        f'in {time.time()-t0:.0f}s')
    return SITE/'index.html'

def main(argv=None):
    ap = argparse.ArgumentParser(description='Build the compatrepro docs site into docs/_site from the notebooks in nbs/.')
    ap.add_argument('--jobs', type=int, default=2, help='library notebooks executed at once (default 2)')
    ap.add_argument('--timeout', type=int, default=900, help='seconds one notebook may take')
    ap.add_argument('--force', action='store_true', help='forget the execution cache and rebuild everything')
    ap.add_argument('--keep-going', action='store_true', help='leave out a library notebook that fails instead of stopping')
    ap.add_argument('--execute-only', action='store_true', help='only execute the library notebooks into the cache (and write exec/summary.json)')
    a = ap.parse_args(argv)
    if a.execute_only:
        summary = execute_only(a.jobs, a.timeout, a.force)
        bad = [k for k, v in summary.items() if not v['ok']]
        log(f'{len(summary) - len(bad)} of {len(summary)} library notebook(s) executed' + (f'; failed: {", ".join(bad)}' if bad else ''))
        return 1 if bad else 0
    build(jobs=a.jobs, timeout=a.timeout, force=a.force, strict=not a.keep_going)
    return 0

if __name__ == '__main__': sys.exit(main())
