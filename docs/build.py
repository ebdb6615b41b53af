#!/usr/bin/env python
"""Build the compatrepro docs site from the notebooks in `nbs/`: `python docs/build.py`.

Output: `docs/_site/index.html` (static, works offline: MathJax ships inside the site).

What happens, in order:

1. **Library notebooks** (those with `#| default_exp`) are executed here, cell by cell, exactly as
   `nbdev_test` runs them (in `nbs/`, skipping cells tagged with settings.ini's `tst_flags`, and
   `#| gpu` cells when no GPU is visible); their outputs on the site are real. Results are cached in
   `docs/_build/exec/` under a hash of the notebook, the library source and this script, so a
   second build re-executes only what changed.
2. **Experiment notebooks** (`[1-8][0-9]_*.ipynb`) are never executed here. Their page shows the
   executed copy that `compatrepro reproduce` wrote to `results/<scale>/notebooks/<name>.ipynb`
   (the paper-scale run if there is one, else the tiny one), with a banner saying which scale,
   seeds and device made it, and the records of that run beside the paper's numbers. A notebook
   not run yet gets its page all the same, marked "not yet run".
3. Every page goes through nbdev's own notebook processors (`nbdev.processors.FilterDefaults`, the
   ones `nbdev_proc_nbs` applies): `#| hide` and `#| export` cells disappear, exported functions
   and classes get their `show_doc`, the title cell becomes the page title.
4. The results overview is made from `docs/paper_items.csv` (every table and figure of the four
   papers) and the tidy records in `results/<scale>/records/*.csv`.
5. Sphinx with myst-nb renders all of it into `docs/_site/`.

Nothing here needs a per-notebook list: whatever notebooks exist in `nbs/` are on the site.
"""
from __future__ import annotations
import argparse, hashlib, html, json, os, re, shutil, subprocess, sys, time
from concurrent.futures import ThreadPoolExecutor
from configparser import ConfigParser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT/'docs'
BUILD = DOCS/'_build'
SRC = BUILD/'src'           # the Sphinx source tree this script generates
EXEC = BUILD/'exec'         # cache of executed + processed library notebooks
SITE = DOCS/'_site'
NBS = ROOT/'nbs'
RESULTS = ROOT/'results'
BUILD_VERSION = '3'         # bump to invalidate the execution cache when this script's processing changes

EXP_RE = re.compile(r'^[1-8][0-9]_')
SCALE_ORDER = ('paper', 'tiny')                  # the page of an experiment shows the first scale that ran
SCALE_WORDS = {'tiny': 'tiny scale: the embedded Glyphs stand-in dataset, CPU, minutes',
               'paper': "paper scale: the paper's own datasets, models and schedule"}
PAPERS = {  # short name -> (title, file in shared/papers, keyword in notebook names)
    'BCT': ('Shen, Xiong, Xia, Soatto. *Towards Backward-Compatible Representation Learning*. CVPR 2020', 'bct'),
    'RACT': ('Zhang et al. *Hot-Refresh Model Upgrades with Regression-Alleviating Compatible Training in Image Retrieval*. ICLR 2022', 'ract'),
    'FastFill': ('Jaeckle, Faghri, Farhadi, Tuzel, Pouransari. *FastFill: Efficient Compatible Model Update*. ICLR 2023 (with its baseline FCT)', 'fastfill|fct'),
    'RM': ('Seo, Uzunbas, Han, Cao, Lim. *Metric Compatible Training for Online Backfilling in Large-Scale Retrieval* (rank merge)', 'rm'),
}
_PAPER_ALIASES = {'bct': 'BCT', 'ract': 'RACT', 'fastfill': 'FastFill', 'fct': 'FastFill', 'fastfill/fct': 'FastFill',
                  'rm': 'RM', 'rankmerge': 'RM', 'rank merge': 'RM', 'mct': 'RM'}


def log(msg): print(f'[docs] {msg}', flush=True)

# ----------------------------------------------------------------------------- notebooks

def settings() -> dict:
    cfg = ConfigParser(delimiters=['=']); cfg.read(ROOT/'settings.ini', encoding='utf-8')
    return dict(cfg['DEFAULT'])

def notebooks() -> list[Path]:
    "Every notebook in nbs/ that gets a page (all but index.ipynb, which is the README's source, and _/. files)."
    return sorted(p for p in NBS.glob('*.ipynb') if p.name[0] not in '_.' and p.stem != 'index')

def is_experiment(p: Path) -> bool: return bool(EXP_RE.match(p.name))

_re_default_exp = re.compile(r'^\s*#\|\s*default_exp\s+(\S+)', re.MULTILINE)
def default_exp(p: Path) -> str|None:
    nb = json.loads(p.read_text(encoding='utf-8'))
    for c in nb['cells']:
        if c['cell_type'] == 'code':
            m = _re_default_exp.search(''.join(c['source']))
            if m: return m.group(1)
    return None

def paper_of(name: str) -> str|None:
    "Which paper an experiment notebook belongs to, from the keyword in its name (20_fastfill_imagenet -> FastFill)."
    parts = name.lower().split('_')
    for short, (_, kw) in PAPERS.items():
        if any(part in kw.split('|') for part in parts): return short
    return None

def _sha(*parts: bytes) -> str:
    h = hashlib.sha256()
    for b in parts: h.update(b); h.update(b'\0')
    return h.hexdigest()

def lib_hash() -> str:
    files = sorted((ROOT/'compatrepro').rglob('*.py'))
    return _sha(*[f.relative_to(ROOT).as_posix().encode() + f.read_bytes() for f in files],
                (ROOT/'settings.ini').read_bytes(), _worker_source().encode(), BUILD_VERSION.encode())

def _worker_source() -> str:
    "The part of this script that executes and processes notebooks: editing it invalidates the execution cache."
    s = Path(__file__).read_text(encoding='utf-8')
    return s[s.index('# ---' + '-- the worker'):s.index('# ---' + '-- records')]

def write_if_changed(path: Path, text: str):
    "Write only when the content differs, so Sphinx's incremental build re-reads only changed pages."
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text(encoding='utf-8') != text: path.write_text(text, encoding='utf-8')

# ----- the worker (runs in a subprocess)

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

def _to_myst(nb, title_fallback: str, banner: str|None, footer: str|None):
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
        if c.cell_type == 'code':
            d, c.source = _strip_directives(c.source)
            tags = list(c.metadata.get('tags', []))
            if d.get('echo') == 'false': tags.append('remove-input')
            if d.get('output') == 'false': tags.append('remove-output')
            if d.get('include') == 'false': continue
            if tags: c.metadata['tags'] = sorted(set(tags))
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
                    if not data: continue
                outs.append(o)
            c.outputs = outs
            if not c.source.strip() and not outs: continue
        cells.append(c)
    title = fm.get('title') or title_fallback
    head = f'# {title}\n'
    if fm.get('description'): head += f"\n*{fm['description']}*\n"
    new = [mk_cell(head, 'markdown')]
    if banner: new.append(mk_cell(banner, 'markdown'))
    new += cells
    if footer: new.append(mk_cell(footer, 'markdown'))
    keep = {'markdown': ('cell_type', 'metadata', 'source'), 'raw': ('cell_type', 'metadata', 'source'),
            'code': ('cell_type', 'metadata', 'source', 'outputs', 'execution_count')}
    clean = []
    for i, c in enumerate(new):    # valid nbformat 4.5 cells: no processor attributes, a stable id each
        d = {k: c.get(k) for k in keep[c.cell_type]}
        d['metadata'] = dict(d.get('metadata') or {})
        if c.cell_type == 'code': d['outputs'] = list(d.get('outputs') or []); d['execution_count'] = None
        d['id'] = hashlib.sha1(f'{i}:{d["source"]}'.encode()).hexdigest()[:8]
        clean.append(d)
    nb.cells = clean
    nb['nbformat'], nb['nbformat_minor'] = 4, 5
    nb.metadata.pop('widgets', None)          # no widget state: myst-nb would then load widget JS from a CDN
    nb.metadata['kernelspec'] = {'name': 'python3', 'display_name': 'Python 3', 'language': 'python'}
    return title


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
        if rest and any(l.strip() for l in rest):
            c.source = '\n'.join(head).strip()
            nb.cells.insert(i + 1, mk_cell('\n'.join(rest).strip(), 'markdown'))
        return


class _RunShowDocs:
    "Run the `show_doc` cells (nbdev's, and those nbdev's `add_show_docs` inserted) in the shell that ran the notebook."
    def __init__(self, k, nb): self.k, self.nb = k, nb
    def begin(self): self.k.run_cell('from nbdev.showdoc import show_doc')
    def __call__(self, cell):
        from nbdev.processors import _is_showdoc
        if cell.cell_type != 'code' or not cell.source or not _is_showdoc(cell): return
        self.k.cell(cell)
        if self.k.exc: raise Exception(f'show_doc failed in cell {cell.idx_}:\n{cell.source}') from self.k.exc


def worker(job: dict) -> dict:
    "Execute (library notebooks only) and process one notebook; write the page notebook to job['dst']."
    os.environ.setdefault('COMPATREPRO_PROGRESS', '0')      # no progress-bar widgets in pages
    os.environ.setdefault('MPLBACKEND', 'Agg')
    from execnb.nbio import read_nb, write_nb
    from execnb.shell import CaptureShell
    from fastcore.xtras import dict2obj
    from nbdev.process import NBProcessor
    from nbdev.processors import FilterDefaults, add_links, insert_warning, exec_show_docs
    src, dst = Path(job['src']), Path(job['dst'])
    nb = read_nb(src)
    _split_title_cell(nb)
    t0, skipped = time.time(), 0
    if job.get('execute'):
        flags = set(job['skip_flags'])
        proc = NBProcessor(nb=nb, rm_directives=False)        # parses `#|` directives, leaves sources as they are
        skipped_flags = {}
        def no_eval(cell):
            if cell.cell_type != 'code': return True
            if 'nbdev_export' + '(' in cell.source: return True
            d = getattr(cell, 'directives_', {}) or {}
            if d.get('eval:', [''])[0].lower() == 'false': return True
            hit = flags & d.keys()
            if hit: skipped_flags[cell.idx_] = sorted(hit)
            return bool(hit)
        k = CaptureShell(src)
        cwd = os.getcwd(); os.chdir(src.parent)
        try: k.run_all(proc.nb, exc_stop=True, preproc=no_eval)
        except Exception:
            sys.stderr.write(k.prettytb(fname=src) + '\n')
            return {'ok': False, 'error': f'{src.name} failed while executing (traceback above)'}
        finally: os.chdir(cwd)
        for c in proc.nb.cells:
            if c.idx_ in skipped_flags:
                tags = ', '.join(f'`#| {t}`' for t in skipped_flags[c.idx_])
                c.outputs = [dict2obj({'output_type': 'stream', 'name': 'stdout',
                              'text': [f'[not run in the docs build: this cell is tagged {tags.replace("`", "")}; '
                                       f'run it with nbdev_test --flags {" ".join(skipped_flags[c.idx_])}]\n']})]
        skipped = len(skipped_flags)
        nb = proc.nb
        for c in nb.cells:   # directives were kept for execution; nbdev's processors parse them again
            c.pop('directives_', None)
    # nbdev's docs processors, as `nbdev_proc_nbs` applies them, minus the two that target Quarto's site:
    # add_links writes links to the published nbdev site (not this one), insert_warning an HTML comment.
    procs = [p for p in FilterDefaults().procs() if p not in (add_links, insert_warning)]
    if job.get('execute'):
        # The notebook ran whole in `k`: its show_doc cells run there too, instead of in the fresh shell of
        # nbdev's exec_show_docs that replays only imports and exports (it fails on test cells that mix an
        # import with code using earlier names, which nbdev_test accepts).
        procs = [_RunShowDocs(k, nb) if p is exec_show_docs else p for p in procs]
    cwd = os.getcwd(); os.chdir(src.parent)
    try: NBProcessor(nb=nb, procs=procs, process=True)
    finally: os.chdir(cwd)
    title = _to_myst(nb, job['title'], job.get('banner'), job.get('footer'))
    dst.parent.mkdir(parents=True, exist_ok=True)
    write_nb(nb, dst)
    return {'ok': True, 'title': title, 'seconds': round(time.time() - t0, 1), 'skipped': skipped}


def run_worker(job: dict, timeout: int) -> dict:
    "Run `worker(job)` in a fresh Python process (each notebook gets its own interpreter, as under nbdev_test)."
    cmd = [sys.executable, str(Path(__file__).resolve()), '--worker', json.dumps(job)]
    try: r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {'ok': False, 'error': f"{Path(job['src']).name}: still running after {timeout}s (--timeout)"}
    lines = [l for l in r.stdout.splitlines() if l.startswith('{"ok"')]
    if r.returncode != 0 or not lines:
        return {'ok': False, 'error': f"{Path(job['src']).name}: worker exited {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-6000:]}"}
    res = json.loads(lines[-1])
    if not res['ok']: res['error'] += '\n' + r.stderr[-6000:]
    return res

# ----- records and paper items

def norm_paper(p) -> str:
    s = str(p).strip()
    return _PAPER_ALIASES.get(s.lower().replace('-', ' ').strip(), s)

_RE_ITEM = re.compile(r'^\s*(tab(?:le)?|fig(?:ure)?)\.?\s*(\d+)', re.IGNORECASE)
def norm_item(item) -> str:
    "'Fig. 3a' -> 'Figure 3', 'table 2 (b)' -> 'Table 2': sub-panels count for their table or figure."
    m = _RE_ITEM.match(str(item))
    if not m: return str(item).strip()
    return ('Table' if m.group(1).lower().startswith('tab') else 'Figure') + ' ' + m.group(2)

def load_records():
    "All records under results/<scale>/records/, with the notebook that wrote each (from the file name)."
    import pandas as pd
    frames = []
    for f in sorted(RESULTS.glob('*/records/*.csv')):
        try: df = pd.read_csv(f)
        except Exception as e:
            log(f'warning: cannot read {f.relative_to(ROOT)}: {e}'); continue
        if df.empty: continue
        df['notebook'] = re.sub(r'[._]seed-?\d+$', '', f.stem)
        df['file'] = f.relative_to(ROOT).as_posix()
        frames.append(df)
    if not frames:
        return pd.DataFrame(columns='paper item dataset scale method seed metric value paper_value notebook file'.split())
    df = pd.concat(frames, ignore_index=True)
    df['paper_n'] = df['paper'].map(norm_paper); df['item_n'] = df['item'].map(norm_item)
    return df

def _fmt(v) -> str:
    try: v = float(v)
    except (TypeError, ValueError): return ''
    if v != v: return ''
    return f'{v:.4g}' if abs(v) < 1e4 else f'{v:.3e}'

def _md_escape(s) -> str: return str(s).replace('|', '\\|').replace('\n', ' ')

def records_table(df) -> str:
    "Markdown table: mean +- std over seeds of each (paper, item, dataset, method, metric), beside the paper's value."
    if df.empty: return ''
    g = df.groupby(['paper', 'item', 'dataset', 'scale', 'method', 'metric'], sort=True, dropna=False)
    rows = ['| paper | item | dataset | scale | method | metric | reproduced (mean ± std) | seeds | paper |',
            '|---|---|---|---|---|---|---|---|---|']
    for (paper, item, dataset, scale, method, metric), x in g:
        v = x['value'].astype(float)
        rep = _fmt(v.mean()) + (f' ± {_fmt(v.std(ddof=1))}' if len(v) > 1 else '')
        pv = x['paper_value'].dropna()
        rows.append('| ' + ' | '.join(_md_escape(s) for s in (paper, item, dataset, scale, method, metric, rep,
                                                             ', '.join(str(s) for s in sorted(x['seed'].unique())),
                                                             _fmt(pv.iloc[0]) if len(pv) else '–')) + ' |')
    return '\n'.join(rows)

def paper_items():
    import csv
    with open(DOCS/'paper_items.csv', encoding='utf-8') as f: return list(csv.DictReader(f))

# ----------------------------------------------------------------------------- pages

def exp_banner(name: str, scale: str|None, run_nb: Path|None, other: list[str], recs) -> str:
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
    r = recs[(recs['notebook'] == name) & (recs['scale'] == scale)] if not recs.empty else recs
    if not r.empty:
        lines.append('- datasets in its records: ' + '; '.join(sorted(map(str, r['dataset'].unique()))))
        lines.append('- seeds with records: ' + ', '.join(str(s) for s in sorted(r['seed'].unique()))
                     + ' (the page shows the latest run; the table at the bottom aggregates all seeds)')
    if meta.get('exception'):
        lines.append('- **this run raised an exception**: its outputs stop where it failed')
    for o in other:
        lines.append(f'- the same notebook at {o} scale: [{name} ({o})]({name}__{o}.ipynb)')
    if 'paper' not in [scale] + other:
        lines.append('- not yet run at paper scale: see [Running at paper scale](../paper_scale.md)')
    kind = 'warning' if meta.get('exception') else 'note'
    return f'```{{admonition}} Which run made these numbers\n:class: {kind}\n' + '\n'.join(lines) + '\n```\n'

def exp_footer(name: str, scale: str|None, recs) -> str|None:
    if scale is None or recs.empty: return None
    r = recs[(recs['notebook'] == name) & (recs['scale'] == scale)]
    if r.empty: return None
    return ('## Records of this notebook beside the paper\n\n'
            f'All seeds in `results/{scale}/records/{name}.seed*.csv`, aggregated (mean ± sample std over seeds); '
            "*paper* is the paper's own number where it prints one.\n\n" + records_table(r) + '\n')

def lib_banner(executed: bool, skipped: int) -> str:
    if not executed: return ''
    s = (f' {skipped} cell(s) tagged `#| slow`/`#| gpu` were not run; they say so.' if skipped else '')
    return ('```{admonition} Outputs\n:class: note\nThe outputs on this page were made by executing this notebook '
            f'while building the site (CPU, small cases computable by hand; no paper-scale data).{s}\n```\n')

def results_overview(items, recs, pages: dict) -> str:
    import pandas as pd
    out = ['# Results overview', '',
           'Every table and figure of the four papers, and where the package stands on each: reproduced at '
           '**tiny** scale (the Glyphs stand-in, CPU), at **paper** scale (the paper\'s data), or not yet. '
           'An item counts as reproduced at a scale when records for it exist under `results/<scale>/records/`; '
           'the link goes to the notebook page whose run wrote them. Figures that only illustrate a method '
           'have nothing to reproduce. The list of items is `docs/paper_items.csv`, made by reading the papers.', '']
    res = [i for i in items if i['kind'] == 'result']
    for scale in ('tiny', 'paper'):
        n = sum(1 for i in res if not recs.empty and ((recs['paper_n'] == i['paper']) & (recs['item_n'] == i['item']) & (recs['scale'] == scale)).any())
        out.append(f'- {scale} scale: **{n} of {len(res)}** result tables and figures have records')
    out.append('')
    for paper, (title, _) in PAPERS.items():
        out += [f'## {paper}', '', title, '', '| item | what | tiny | paper |', '|---|---|---|---|']
        for i in (x for x in items if x['paper'] == paper):
            cells = []
            for scale in ('tiny', 'paper'):
                if i['kind'] != 'result': cells.append('illustration'); continue
                r = recs[(recs['paper_n'] == paper) & (recs['item_n'] == i['item']) & (recs['scale'] == scale)] if not recs.empty else recs
                if r.empty: cells.append('not yet'); continue
                links = []
                for nbname in sorted(r['notebook'].unique()):
                    rr = r[r['notebook'] == nbname]
                    page = pages.get((nbname, scale))
                    txt = f'{len(rr)} records, {rr["seed"].nunique()} seed(s): ' + '; '.join(sorted(map(str, rr['dataset'].unique())))
                    links.append(f'[{nbname}]({page}) ({_md_escape(txt)})' if page else f'`{nbname}` ({_md_escape(txt)})')
                cells.append('yes: ' + '<br>'.join(links))
            out.append(f"| {i['item']} | {_md_escape(i['caption'])} | {cells[0]} | {cells[1]} |")
        out.append('')
    if not recs.empty:
        known = {(i['paper'], i['item']) for i in items}
        odd = recs[[(p, it) not in known for p, it in zip(recs['paper_n'], recs['item_n'])]]
        if not odd.empty:
            out += ['## Records that name no table or figure of the papers', '',
                    'These records exist but their (paper, item) is not in `docs/paper_items.csv`:', '',
                    records_table(odd), '']
        out += ['## All records', '', 'Every record under `results/`, aggregated over seeds, with the paper\'s number:', '',
                records_table(recs), '']
    return '\n'.join(out) + '\n'

def data_layouts() -> str:
    "data_prep/README.md (the data code's own layout description), its title dropped and its headings one level down."
    f = ROOT/'data_prep'/'README.md'
    if not f.exists(): return '*(data_prep/README.md has not landed yet: the layouts will appear here.)*'
    lines = f.read_text(encoding='utf-8').splitlines()
    if lines and lines[0].startswith('# '): lines = lines[1:]
    return '\n'.join('#' + l if re.match(r'^#{1,5} ', l) else l for l in lines).strip() + '\n'

def cli_help() -> str:
    "The real `compatrepro reproduce --help`, when the CLI exists, so the home page never drifts from it."
    try:
        r = subprocess.run([sys.executable, '-m', 'compatrepro.cli', 'reproduce', '--help'], cwd=ROOT,
                           capture_output=True, text=True, timeout=120)
        if r.returncode == 0 and r.stdout.strip(): return r.stdout
        r = subprocess.run([sys.executable, '-c', 'import sys; from compatrepro.cli import main; sys.exit(main(["reproduce", "--help"]))'],
                           cwd=ROOT, capture_output=True, text=True, timeout=120)
        if r.stdout.strip(): return r.stdout
    except Exception: pass
    return ''

# ----------------------------------------------------------------------------- main

def build(jobs: int = 2, timeout: int = 900, force: bool = False, strict: bool = True) -> Path:
    "Build the site into docs/_site; return the path of its index.html."
    t0 = time.time()
    cfg = settings()
    skip_flags = sorted(set(cfg.get('tst_flags', '').split()) | ({'gpu'} if not _has_gpu() else set()))
    if force and BUILD.exists(): shutil.rmtree(BUILD)
    SRC.mkdir(parents=True, exist_ok=True); EXEC.mkdir(parents=True, exist_ok=True)
    recs = load_records()
    nbs = notebooks()
    lib = [p for p in nbs if not is_experiment(p)]
    exp = [p for p in nbs if is_experiment(p)]
    wanted = set()                                          # generated files this build, relative to SRC

    # -- library (and other non-experiment) notebooks
    lhash = lib_hash()
    todo, lib_pages = [], []
    for p in lib:
        execute = default_exp(p) is not None
        key = _sha(p.read_bytes(), lhash.encode(), json.dumps(skip_flags).encode(), str(execute).encode())
        cached, meta = EXEC/p.name, EXEC/(p.stem + '.json')
        rel = f'api/{p.name}'
        wanted.add(rel); lib_pages.append((p, rel))
        if cached.exists() and meta.exists() and json.loads(meta.read_text()).get('key') == key and not force: continue
        todo.append(dict(src=str(p), dst=str(cached), execute=execute, skip_flags=skip_flags,
                         title=p.stem, key=key, meta=str(meta)))
    if todo: log(f'executing and processing {len(todo)} library notebook(s) with {jobs} worker(s): ' + ', '.join(Path(j['src']).name for j in todo))
    errors = []
    def one(job):
        t = time.time(); res = run_worker(job, timeout)
        if res['ok']:
            Path(job['meta']).write_text(json.dumps({'key': job['key'], 'title': res['title'], 'executed': job['execute'],
                                                     'skipped': res['skipped'], 'seconds': res['seconds']}))
            log(f"  {Path(job['src']).name}: {time.time()-t:.0f}s" + (' (executed)' if job['execute'] else ''))
        else: errors.append(res['error'])
    with ThreadPoolExecutor(max(1, jobs)) as ex: list(ex.map(one, todo))
    if errors:
        msg = '\n\n'.join(errors)
        if strict: raise SystemExit(f'[docs] build failed:\n{msg}')
        log(f'warning: {len(errors)} notebook(s) failed and are left out:\n{msg}')
    lib_meta = {}
    for p, rel in lib_pages:
        cached, meta = EXEC/p.name, EXEC/(p.stem + '.json')
        if not cached.exists(): wanted.discard(rel); continue
        m = json.loads(meta.read_text()); lib_meta[p.stem] = m
        nb = json.loads(cached.read_text(encoding='utf-8'))
        banner = lib_banner(m['executed'], m['skipped'])
        if banner:   # insert after the title cell
            nb['cells'].insert(1, {'cell_type': 'markdown', 'id': 'outputs-banner', 'metadata': {}, 'source': banner})
        write_if_changed(SRC/rel, json.dumps(nb, indent=1, ensure_ascii=False, sort_keys=True) + '\n')

    # -- experiment notebooks: executed copies from results/, never executed here
    pages, exp_entries, ejobs = {}, [], []
    for p in exp:
        name = p.stem
        runs = {s: RESULTS/s/'notebooks'/p.name for s in SCALE_ORDER if (RESULTS/s/'notebooks'/p.name).exists()}
        scales = [s for s in SCALE_ORDER if s in runs] or [None]
        for i, scale in enumerate(scales):
            rel = f'papers/{name}.ipynb' if i == 0 else f'papers/{name}__{scale}.ipynb'
            others = [s for s in scales if s != scale and s is not None]
            src = runs.get(scale, p)
            ejobs.append(dict(src=str(src), dst=str(SRC/rel), execute=False, title=name,
                              banner=exp_banner(name, scale, runs.get(scale), others, recs),
                              footer=exp_footer(name, scale, recs)))
            wanted.add(rel)
            if scale: pages[(name, scale)] = rel
            exp_entries.append((p, rel, scale, i == 0))
    if ejobs: log(f'processing {len(ejobs)} experiment page(s) (executed copies from results/, not re-run)')
    # processing only (no execution): one process does them all, with a lighter import
    if ejobs:
        r = subprocess.run([sys.executable, str(Path(__file__).resolve()), '--worker-many', json.dumps(ejobs)],
                           cwd=ROOT, capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0: raise SystemExit(f'[docs] processing experiment notebooks failed:\n{r.stdout[-3000:]}\n{r.stderr[-6000:]}')

    # -- generated pages
    lines = ['# Library', '', 'One page per library notebook: the API (signatures and docstrings made by nbdev\'s `show_doc`), '
             'the paper equation each function implements, and the notebook\'s own tests with their outputs.', '',
             '```{toctree}', ':maxdepth: 1', ''] + [rel[len('api/'):] for p, rel in lib_pages if rel in wanted] + ['```', '']
    write_if_changed(SRC/'api/index.md', '\n'.join(lines)); wanted.add('api/index.md')
    lines = ['# Paper sections', '', 'One page per experiment notebook (one paper section each). A page shows the executed '
             'copy that `compatrepro reproduce` wrote, says which scale, dataset and seeds made its numbers, and ends '
             "with its records beside the paper's own numbers. See also the [results overview](../results.md).", '']
    by_paper: dict = {}
    for p, rel, scale, primary in exp_entries:
        by_paper.setdefault(paper_of(p.stem) or 'Other', []).append((p, rel, scale, primary))
    hidden = []
    for paper in list(PAPERS) + ['Other']:
        ents = by_paper.get(paper)
        if not ents: continue
        lines += [f'## {paper}', '', '| notebook | shown run | other runs |', '|---|---|---|']
        for p, rel, scale, primary in ents:
            if not primary: hidden.append(rel[len('papers/'):]); continue
            others = [f'[{s}]({e[1][len("papers/"):]})' for e in ents if e[0] == p and not e[3] for s in [e[2]]]
            lines.append(f"| [{p.stem}]({rel[len('papers/'):]}) | {scale or 'not yet run'} | {', '.join(others) or '–'} |")
        lines += ['', '```{toctree}', ':hidden:', ':maxdepth: 1', '']
        lines += [rel[len('papers/'):] for p, rel, scale, primary in ents if primary] + ['```', '']
    if not exp_entries: lines += ['No experiment notebook has landed in `nbs/` yet.', '']
    if hidden: lines += ['```{toctree}', ':hidden:', ''] + hidden + ['```', '']
    write_if_changed(SRC/'papers/index.md', '\n'.join(lines)); wanted.add('papers/index.md')
    write_if_changed(SRC/'results.md', results_overview(paper_items(), recs, {k: v for k, v in pages.items()})); wanted.add('results.md')
    help_txt = cli_help()
    home = (DOCS/'index.md').read_text(encoding='utf-8')
    home = home.replace('{{CLI_HELP}}', ('```text\n' + help_txt.rstrip() + '\n```') if help_txt else
                        '*(the `compatrepro` command has not landed yet)*')
    write_if_changed(SRC/'index.md', home); wanted.add('index.md')
    write_if_changed(SRC/'paper_scale.md', (DOCS/'paper_scale.md').read_text(encoding='utf-8')
                     .replace('{{DATA_LAYOUTS}}', data_layouts())); wanted.add('paper_scale.md')
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

def _has_gpu() -> bool:
    try:
        import torch; return torch.cuda.is_available()
    except Exception: return False

def main(argv=None):
    ap = argparse.ArgumentParser(description='Build the compatrepro docs site into docs/_site from the notebooks in nbs/.')
    ap.add_argument('--jobs', type=int, default=min(2, os.cpu_count() or 1), help='notebooks executed at once')
    ap.add_argument('--timeout', type=int, default=900, help='seconds one notebook may take')
    ap.add_argument('--force', action='store_true', help='forget the execution cache and rebuild everything')
    ap.add_argument('--keep-going', action='store_true', help='leave out a library notebook that fails instead of stopping')
    ap.add_argument('--worker', help=argparse.SUPPRESS)
    ap.add_argument('--worker-many', help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        print(json.dumps(worker(json.loads(a.worker)))); return 0
    if a.worker_many:
        for job in json.loads(a.worker_many):
            res = worker(job)
            if not res['ok']: print(res['error'], file=sys.stderr); return 1
        return 0
    build(jobs=a.jobs, timeout=a.timeout, force=a.force, strict=not a.keep_going)
    return 0

if __name__ == '__main__': sys.exit(main())
