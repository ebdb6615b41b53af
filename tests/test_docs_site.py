"""The docs site, tested as a reader would: build it with the documented command, serve it on
127.0.0.1, open every page in headless Chromium with the network shut, and fail on a broken internal
link, a missing image or other resource, math that did not render, a console error, or any request
that leaves the machine; and on every paper page, fail unless it shows the figure files its run saved for the seed
it shows, its parameters once, long lines wrapped at the box's edge and long tables folded. Screenshots of the home
page, the results overview, one paper page and one library page are written to docs/_site/_screenshots/ (the test
prints their paths).

Skipped only outside CI when Chromium (or the `docs` extra) is missing; with CI=true a missing browser fails.
"""
from __future__ import annotations
import contextlib, csv, functools, html, http.server, json, os, re, shutil, subprocess, sys, tempfile, threading, time
from pathlib import Path
from urllib.parse import urljoin, urlsplit, unquote

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS, SITE, NBS = ROOT/'docs', ROOT/'docs'/'_site', ROOT/'nbs'
SHOTS = SITE/'_screenshots'
IN_CI = os.environ.get('CI') == 'true'
CHROMIUM = shutil.which('chromium') or shutil.which('chromium-browser')

# The flags that keep Chromium off the network (with the request filter below as a second fence).
CHROMIUM_FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
                  '--disable-background-networking', '--disable-component-update', '--disable-sync',
                  '--disable-default-apps', '--disable-extensions', '--no-proxy-server',
                  '--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1']

def _missing_docs_extra():
    import importlib.util
    return [m for m in ('sphinx', 'myst_nb', 'furo', 'playwright') if importlib.util.find_spec(m) is None]

if not IN_CI:
    if not CHROMIUM: pytest.skip('chromium is not installed (apt-get install chromium); CI installs it', allow_module_level=True)
    if _missing_docs_extra(): pytest.skip(f'the docs extra is not installed: {_missing_docs_extra()}', allow_module_level=True)


@pytest.fixture(scope='module')
def site():
    "Build the site with the documented command, as a user would; return the notebooks that existed when it started."
    nbs = sorted(p.name for p in NBS.glob('*.ipynb') if p.name[0] not in '_.' and p.stem != 'index')
    t0 = time.time()
    r = subprocess.run([sys.executable, 'docs/build.py'], cwd=ROOT, capture_output=True, text=True, timeout=1800)
    print(r.stdout[-4000:])
    assert r.returncode == 0, f'python docs/build.py failed:\n{r.stdout[-4000:]}\n{r.stderr[-8000:]}'
    assert (SITE/'index.html').exists()
    print(f'site built in {time.time()-t0:.0f}s')
    return nbs


@pytest.fixture(scope='module')
def server(site):
    "Serve docs/_site on 127.0.0.1 only, on a free port."
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *a): pass
    httpd = http.server.ThreadingHTTPServer(('127.0.0.1', 0), functools.partial(Quiet, directory=str(SITE)))
    th = threading.Thread(target=httpd.serve_forever, daemon=True); th.start()
    yield f'http://127.0.0.1:{httpd.server_address[1]}/'
    httpd.shutdown(); httpd.server_close()


def _html_files(): return sorted(p for p in SITE.rglob('*.html') if '_screenshots' not in p.parts)

_re_remote_res = re.compile(r'''<(script|link|img|iframe|source|video|audio|embed)\b[^>]*?\b(src|href)\s*=\s*["'](https?:)?//''', re.I)
_re_css_remote = re.compile(r'''(@import\s+(url\()?\s*["']?|url\(\s*["']?)(https?:)?//''', re.I)

def test_no_outside_resources(site):
    "No page or stylesheet pulls a script, style, font, image or math from another host (no CDN)."
    bad = []
    for f in _html_files():
        for m in _re_remote_res.finditer(f.read_text(encoding='utf-8', errors='replace')):
            bad.append(f'{f.relative_to(SITE)}: {m.group(0)[:120]}')
    for f in SITE.rglob('*.css'):
        for m in _re_css_remote.finditer(f.read_text(encoding='utf-8', errors='replace')):
            bad.append(f'{f.relative_to(SITE)}: {m.group(0)[:120]}')
    assert not bad, 'resources from outside hosts:\n' + '\n'.join(bad[:50])
    # and the math engine is shipped inside the site
    assert list(SITE.glob('_static/mathjax/tex-chtml.js')), 'MathJax is not in the built site'


def test_every_notebook_has_a_page(site):
    "Whatever notebooks exist in nbs/ (when the build started) are on the site, with no list to maintain."
    assert site, 'no notebooks in nbs/'
    stems = [Path(n).stem for n in site]
    missing = [s for s in stems if not ((SITE/'api'/f'{s}.html').exists() or (SITE/'papers'/f'{s}.html').exists())]
    assert not missing, f'notebooks without a page: {missing}'


def test_build_uses_no_private_nbdev_api():
    "docs/build.py uses only public nbdev and execnb API (no `_name`, no execnb's CaptureShell): it executes through compatrepro.runs."
    src = (DOCS/'build.py').read_text(encoding='utf-8')
    bad = re.findall(r'\b(?:nbdev|execnb)(?:\.\w+)*\._\w+', src)
    for m in re.finditer(r'^\s*from\s+((?:nbdev|execnb)[\w.]*)\s+import\s+([^\n]+)$', src, re.M):
        bad += [f'{m.group(1)}.{n.strip()}' for n in m.group(2).split(',') if n.strip().startswith('_')]
    bad += ['CaptureShell'] * src.count('CaptureShell')
    assert not bad, f'docs/build.py uses private or execution API of nbdev/execnb: {bad}'
    assert 'run_notebooks' in src, 'docs/build.py must execute library notebooks through compatrepro.runs.run_notebooks'


def _sections(page: str) -> dict:
    sections = {}
    for chunk in page.split('<h2')[1:]:
        heading = html.unescape(re.sub(r'<[^>]+>', '', chunk.split('</h2>', 1)[0].split('>', 1)[1])).strip(' #\n')
        sections[heading] = chunk
    return sections

def _rows(chunk: str) -> list[list[str]]:
    rows = re.findall(r'<tr[^>]*>(.*?)</tr>', chunk, re.S)
    cells = [[html.unescape(re.sub(r'<[^>]+>', ' ', c)).strip() for c in re.findall(r'<td[^>]*>(.*?)</td>', r, re.S)] for r in rows]
    return [c for c in cells if c]


def test_results_overview_lists_every_paper_item(site):
    """The overview has one row per table and figure of docs/paper_items.csv, under its paper, and its status at tiny and
    paper scale is the one `compatrepro status` (compatrepro.runs.status_table) gives."""
    from compatrepro.runs import status_table
    items = list(csv.DictReader(open(DOCS/'paper_items.csv', encoding='utf-8')))
    status = {s: {(r.paper, r.item): r.status for r in status_table(s, ROOT/'results', NBS).itertuples()} for s in ('tiny', 'paper')}
    sections = _sections((SITE/'results.html').read_text(encoding='utf-8'))
    for paper in sorted({i['paper'] for i in items}):
        assert paper in sections, f'no section for {paper} in the results overview (sections: {list(sections)})'
        cells = _rows(sections[paper])
        want = [i for i in items if i['paper'] == paper]
        assert [c[0] for c in cells] == [i['item'] for i in want], f'{paper}: rows differ from docs/paper_items.csv'
        for c, i in zip(cells, want):
            for scale, shown in zip(('tiny', 'paper'), c[2:4]):
                word = shown.split()[0].strip(':,') if shown else ''
                assert word == status[scale][(paper, i['item'])], f"{paper} {i['item']} at {scale}: page says {shown!r}"
    assert 'results/smoke' not in (SITE/'results.html').read_text(encoding='utf-8'), 'the overview shows smoke runs'


def test_results_overview_has_its_picture(site):
    """The overview's picture is on the page and says, per paper, the findings that hold of all and the result items
    reproduced of all, as `compatrepro status` counts them (its text is kept as text in the SVG)."""
    from compatrepro.runs import item_claims, status_table
    assert 'results_overview.svg' in (SITE/'results.html').read_text(encoding='utf-8'), 'the overview page lost its picture'
    svg = [p for p in SITE.rglob('results_overview.svg')]
    assert svg, 'results_overview.svg is not in the built site'
    text = set(re.findall(r'>\s*([^<>]*?)\s*<', svg[0].read_text(encoding='utf-8')))
    claims = item_claims(ROOT/'results'/'tiny', DOCS/'claims.csv').drop_duplicates(['notebook', 'key'])
    findings = claims[claims.kind == 'finding']
    t = status_table('tiny', ROOT/'results', NBS)
    t = t[t.kind == 'result']
    for paper in sorted(set(findings.paper)):
        f, i = findings[findings.paper == paper], t[t.paper == paper]
        for want in (f"{(f.verdict == 'holds').sum()} of {len(f)}", f"{(i.status == 'reproduced').sum()} of {len(i)}"):
            assert want in text, f'{paper}: the picture does not say {want!r}'


def test_pages_show_real_outputs(site):
    "Library pages show nbdev's show_doc and the outputs of their execution; experiment pages say which run made them."
    core = (SITE/'api'/'00_core.html').read_text(encoding='utf-8')
    assert 'id="check-scale"' in core, 'the show_doc of check_scale is missing from the core page'
    assert 'executing this notebook with papermill' in core
    for f in (SITE/'api').glob('*.html'):
        t = f.read_text(encoding='utf-8')
        assert 'papermill-error-cell' not in t and 'An Exception was encountered' not in t, f'{f.relative_to(SITE)} shows a failed run'
    for f in (SITE/'papers').glob('*.html'):
        if f.name == 'index.html': continue
        t = f.read_text(encoding='utf-8')
        assert 'Which run made these numbers' in t or 'Not yet run' in t, f'{f.relative_to(SITE)} does not say which run made it'
        assert 'results/smoke/' not in t, f'{f.relative_to(SITE)} shows a smoke run'


def _crawl_targets(server):
    return [server + f.relative_to(SITE).as_posix() for f in _html_files()]


def _page_of(url: str, server: str) -> Path|None:
    path = unquote(urlsplit(url).path)
    f = SITE/path.lstrip('/')
    if path.endswith('/'): f = f/'index.html'
    return f


def test_site_in_chromium(server):
    "Every page, loaded in headless Chromium with the network shut: links, images, math, console, requests."
    from playwright.sync_api import sync_playwright
    assert CHROMIUM, 'chromium is not installed: CI must install it (apt-get install -y chromium)'
    SHOTS.mkdir(parents=True, exist_ok=True)
    problems, outside, pages_with_math = [], [], 0
    ids_cache: dict[Path, set] = {}

    def ids_of(f: Path) -> set:
        if f not in ids_cache:
            ids_cache[f] = set(re.findall(r'''\bid\s*=\s*["']([^"']+)["']''', f.read_text(encoding='utf-8', errors='replace')))
        return ids_cache[f]

    with tempfile.TemporaryDirectory() as profile, sync_playwright() as pw:
        # a fresh profile in a temporary folder (playwright passes it as --user-data-dir)
        ctx = pw.chromium.launch_persistent_context(profile, executable_path=CHROMIUM, args=CHROMIUM_FLAGS,
                                                    viewport={'width': 1280, 'height': 900}, service_workers='block')
        def route(r):
            u = r.request.url
            if u.startswith(server) or u.startswith('data:') or u.startswith('blob:'): r.continue_()
            else: outside.append(u); r.abort()
        ctx.route('**/*', route)
        page = ctx.pages[0] if ctx.pages else ctx.new_page()
        cur = {'url': ''}
        page.on('console', lambda m: problems.append(f"{cur['url']}: console {m.type}: {m.text}") if m.type == 'error' else None)
        page.on('pageerror', lambda e: problems.append(f"{cur['url']}: page error: {e}"))
        page.on('requestfailed', lambda r: problems.append(f"{cur['url']}: request failed: {r.url} ({r.failure})")
                if r.url.startswith(server) else None)
        page.on('response', lambda r: problems.append(f"{cur['url']}: HTTP {r.status} for {r.url}") if r.status >= 400 else None)

        targets = _crawl_targets(server)
        assert len(targets) >= 5, targets
        for url in targets:
            cur['url'] = url[len(server):]
            page.goto(url, wait_until='load')
            # math: every formula Sphinx marked must have been typeset by MathJax, without TeX errors
            n_math = page.locator('.math').count()
            if n_math:
                pages_with_math += 1
                page.wait_for_function('() => window.MathJax && MathJax.startup && MathJax.startup.promise', timeout=20000)
                page.evaluate('() => MathJax.startup.promise')
                # the fonts MathJax asked for once typeset: leaving the page earlier aborts their requests (a failure)
                page.evaluate('() => document.fonts.ready.then(() => true)')
                bad = page.evaluate('''() => [...document.querySelectorAll('.math')]
                    .filter(e => !e.querySelector('mjx-container') || e.querySelector('mjx-merror'))
                    .map(e => e.textContent.slice(0, 80))''')
                if bad: problems.append(f"{cur['url']}: {len(bad)} of {n_math} formulas not rendered: {bad[:3]}")
            # images: loaded and non-empty
            broken = page.evaluate('''() => [...document.images].filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src)''')
            for b in broken: problems.append(f"{cur['url']}: broken image {b}")
            # links: every internal link leads to a page that exists, and to an anchor that exists on it
            for href in page.evaluate('''() => [...document.querySelectorAll('a[href]')].map(a => a.href)'''):
                if not href.startswith(server): continue
                target = _page_of(href, server)
                if not target.exists():
                    problems.append(f"{cur['url']}: broken link {href[len(server):]}"); continue
                frag = unquote(urlsplit(href).fragment)
                if frag and target.suffix == '.html' and frag not in ids_of(target):
                    problems.append(f"{cur['url']}: broken anchor {href[len(server):]}")
        # screenshots: the home page and one paper page
        page.goto(server + 'index.html', wait_until='load'); page.evaluate('() => window.MathJax ? MathJax.startup.promise : null')
        home = SHOTS/'home.png'; page.screenshot(path=str(home), full_page=True)
        paper_pages = sorted(p for p in (SITE/'papers').glob('*.html') if p.name != 'index.html' and '__' not in p.name)
        target = paper_pages[0] if paper_pages else SITE/'papers'/'index.html'
        page.goto(server + target.relative_to(SITE).as_posix(), wait_until='load')
        page.evaluate('() => window.MathJax ? MathJax.startup.promise : null')
        shot = SHOTS/f'paper_{target.stem}.png'; page.screenshot(path=str(shot), full_page=True)
        shots = [home, shot]
        for rel, name in (('results.html', 'results.png'), ('api/00_core.html', 'library_00_core.png')):
            if (SITE/rel).exists():
                page.goto(server + rel, wait_until='load'); page.evaluate('() => window.MathJax ? MathJax.startup.promise : null')
                shots.append(SHOTS/name); page.screenshot(path=str(shots[-1]), full_page=True)
        ctx.close()
    print('\nscreenshots: ' + '\n             '.join(map(str, shots)))
    print(f'checked {len(targets)} pages, {pages_with_math} with math')
    assert pages_with_math >= 1, 'no page with math was found: the math check checked nothing'
    problems += [f'request to an outside host (blocked): {u}' for u in sorted(set(outside))]
    assert not problems, f'{len(problems)} problem(s):\n' + '\n'.join(problems[:60])
    for s in shots: assert s.exists() and s.stat().st_size > 10_000, f'screenshot {s} is empty'


def _paper_pages() -> list[Path]:
    "The built paper pages, one per experiment notebook (a notebook's other-scale page, `<name>__<scale>`, aside)."
    return sorted(p for p in (SITE/'papers').glob('*.html') if p.name != 'index.html' and '__' not in p.name)

def _shown_run(name: str):
    """(scale, seed) of the run a paper page shows, as the build chooses it (the paper-scale run if there is one,
    else the tiny one; the seed papermill gave the executed copy), or None when the notebook has not run."""
    for scale in ('paper', 'tiny'):
        nb = ROOT/'results'/scale/'notebooks'/f'{name}.ipynb'
        if nb.exists():
            meta = json.loads(nb.read_text(encoding='utf-8'))['metadata'].get('papermill', {})
            return scale, meta.get('parameters', {}).get('seed')
    return None

@contextlib.contextmanager
def _chromium(server):
    "A headless Chromium page on the served site with the network shut (the flags and the request filter above)."
    from playwright.sync_api import sync_playwright
    assert CHROMIUM, 'chromium is not installed: CI must install it (apt-get install -y chromium)'
    with tempfile.TemporaryDirectory() as profile, sync_playwright() as pw:
        ctx = pw.chromium.launch_persistent_context(profile, executable_path=CHROMIUM, args=CHROMIUM_FLAGS,
                                                    viewport={'width': 1280, 'height': 900}, service_workers='block')
        inside = lambda u: u.startswith(server) or u.startswith('data:') or u.startswith('blob:')
        ctx.route('**/*', lambda r: r.continue_() if inside(r.request.url) else r.abort())
        try: yield ctx.pages[0] if ctx.pages else ctx.new_page()
        finally: ctx.close()


def test_paper_pages_show_their_figures(server):
    """Every paper page shows, in the browser, as many images as its notebook's run wrote figure files for the seed
    the page shows (results/<scale>/figures/<notebook>_<item>.seed<k>.png), each loaded, and the same files."""
    problems, total = [], 0
    with _chromium(server) as page:
        for f in _paper_pages():
            run = _shown_run(f.stem)
            files = [] if run is None else sorted(
                p.name for p in (ROOT/'results'/run[0]/'figures').glob(f'{f.stem}_*.seed{run[1]}.png'))
            page.goto(server + f.relative_to(SITE).as_posix(), wait_until='load')
            imgs = page.evaluate('''() => [...document.querySelectorAll('article img')]
                .map(i => ({src: i.src, ok: i.complete && i.naturalWidth > 0}))''')
            shown = sorted(unquote(urlsplit(i['src']).path).rsplit('/', 1)[-1] for i in imgs)
            total += len(imgs)
            if len(imgs) != len(files):
                problems.append(f'{f.stem}: {len(imgs)} image(s) on the page, {len(files)} figure file(s) of seed '
                                f'{run and run[1]}: not shown {sorted(set(files) - set(shown))}, '
                                f'not a figure file {sorted(set(shown) - set(files))}')
            elif shown != files: problems.append(f'{f.stem}: the page shows {shown}, the run wrote {files}')
            problems += [f"{f.stem}: image not loaded: {i['src']}" for i in imgs if not i['ok']]
    print(f'{total} figure(s) on {len(_paper_pages())} paper pages')
    assert not problems, '\n'.join(problems)
    assert total > 0, 'no paper page shows a figure'


ROWS_AT_ONCE = 25      # docs/build.py's TABLE_FOLD_AFTER: a longer table shows its first rows and folds the others

def test_paper_pages_read_well(server):
    """Every paper page, in the browser: its parameters show once (one cell, with the seed of the run the page shows,
    no second cell of papermill's injected parameters); no line of code or printed output runs past its box (long
    lines wrap); no table shows more than ROWS_AT_ONCE rows unfolded, and a folded table's "show all" opens the rows
    it hides."""
    problems, folded = [], []
    with _chromium(server) as page:
        for f in _paper_pages():
            run = _shown_run(f.stem)
            page.goto(server + f.relative_to(SITE).as_posix(), wait_until='load')
            got = page.evaluate('''(most) => ({
                params: [...document.querySelectorAll('article div.cell.tag_parameters')].map(c => c.textContent),
                injected: document.querySelectorAll('article div.cell.tag_injected-parameters').length,
                cut: [...document.querySelectorAll('article div.cell_input pre, article div.cell_output pre')]
                     .filter(p => p.scrollWidth > p.clientWidth + 1).map(p => p.textContent.slice(0, 60)),
                long: [...document.querySelectorAll('article table')].filter(t => !t.closest('details'))
                      .map(t => t.querySelectorAll('tbody tr').length).filter(n => n > most),
                folded: document.querySelectorAll('article details.folded-table').length,
            })''', ROWS_AT_ONCE)
            if run:
                seeds = [m.group(1) for m in (re.search(r'^\s*seed\s*=\s*(\S+)', t, re.M) for t in got['params']) if m]
                if len(got['params']) != 1 or got['injected'] or seeds != [str(run[1])]:
                    problems.append(f"{f.stem}: {len(got['params'])} parameters cell(s) and {got['injected']} injected "
                                    f"one(s), seeds {seeds}; the run's seed is {run[1]}")
            problems += [f'{f.stem}: a line of code or output runs past its box: {t!r}' for t in got['cut']]
            problems += [f'{f.stem}: a table shows {n} rows unfolded' for n in got['long']]
            if got['folded']: folded.append(f)
        assert folded, 'no paper page folds a table: the records table of 20_fastfill_imagenet (100+ rows) should be'
        page.goto(server + folded[0].relative_to(SITE).as_posix(), wait_until='load')
        d = page.locator('article details.folded-table').first
        hidden = lambda: d.evaluate("e => [...e.querySelectorAll('tbody tr')].filter(r => !r.checkVisibility()).length")
        n = d.evaluate("e => e.querySelectorAll('tbody tr').length")
        if not (n and hidden() == n):
            problems.append(f'{folded[0].stem}: a folded table shows its rows before "show all"')
        d.locator('summary').click()
        if hidden(): problems.append(f'{folded[0].stem}: "show all" leaves {hidden()} of {n} rows hidden')
    assert not problems, '\n'.join(problems)
