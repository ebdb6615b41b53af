"""Sphinx configuration of the compatrepro docs site. Built by `python docs/build.py` (not by hand):
that script generates the source tree in docs/_build/src and calls Sphinx with `-c docs`."""
from configparser import ConfigParser
from pathlib import Path

_cfg = ConfigParser(delimiters=['=']); _cfg.read(Path(__file__).resolve().parents[1]/'settings.ini', encoding='utf-8')
_d = _cfg['DEFAULT']
project = _d.get('title', 'compatrepro')
author = _d.get('author', '')
copyright = _d.get('copyright', '')
release = version = _d.get('version', '')

extensions = [
    'myst_nb',                  # notebooks (with their stored outputs) and MyST markdown
    'sphinx.ext.mathjax',       # math via MathJax ...
    'sphinx-mathjax-offline',   # ... served from the site itself (MathJax 3 shipped by this PyPI package), no CDN
]
myst_enable_extensions = ['dollarmath', 'amsmath', 'colon_fence', 'deflist']
myst_heading_anchors = 3
myst_dmath_double_inline = True
suppress_warnings = ['myst.header', 'mystnb.unknown_mime_type']

nb_execution_mode = 'off'          # pages show outputs of real runs made before Sphinx (see docs/build.py)
nb_render_markdown_format = 'myst' # show_doc output and markdown outputs may hold $math$
nb_ipywidgets_js = {}              # never load widget JavaScript (it would come from a CDN)
nb_merge_streams = True

html_theme = 'furo'
html_title = f'{project} {version}'
html_static_path = ['_static']
html_css_files = ['compatrepro.css']
html_show_sourcelink = False
html_copy_source = False
html_permalinks_icon = '#'
exclude_patterns = ['_build', '_site', '**.ipynb_checkpoints']
# A TeX error must show as an error (the browser test looks for MathJax's merror): without `noundefined`,
# an unknown macro is an "Undefined control sequence" error instead of silently printed in red.
mathjax3_config = {'tex': {'packages': {'[-]': ['noundefined']}}}
