"""`compatrepro --help` and `compatrepro <command> --help` answer at once: building the parsers imports none of the
package's modules but `cli` and `upgrade_inputs`, nor numpy or pandas; each subcommand imports what it needs when it
runs (`98_cli`). The arrays of `upgrade` come from `upgrade_inputs`, which imports nothing; the few other values the
parsers need are written out in `compatrepro.cli` and must equal the library's own. `status` and `reproduce --plan`
read the committed results without importing torch: the reproduction layer they use (`core`, `standin`, `report`,
`runs`) imports none, and reads the registered versions from the artifact cache (`12_report`'s `package_versions`).

How it fails: were `compatrepro/cli.py` to import `compatrepro.runs` at its top again, the first test reports
`compatrepro --help imported torch, ...` with the heavy modules it loaded; were a scale added to `core.SCALES` only,
the second reports the two values."""
import json, subprocess, sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = ['reproduce', 'pending', 'status', 'rehearse', 'upgrade']
HEAVY = ('torch', 'numpy', 'pandas')

HELP = '''
import contextlib, io, json, sys
import compatrepro.cli as c
helps = {}
for cmd in ([], *([name] for name in sys.argv[2:])):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try: c.main([*cmd, '--help'])
        except SystemExit as e: code = e.code
    helps[' '.join(cmd) or '(top)'] = dict(code=code, text=out.getvalue())
loaded = sorted(m for m in sys.modules if m.split('.')[0] in sys.argv[1].split(',') or m.startswith('compatrepro.'))
print(json.dumps(dict(helps=helps, loaded=loaded)))
'''


def test_help_imports_no_torch():
    "Every --help, in a fresh interpreter: each prints its usage and exits 0, and none imports torch, numpy or pandas."
    r = subprocess.run([sys.executable, '-c', HELP, ','.join(HEAVY), *COMMANDS], capture_output=True, text=True,
                       cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    for cmd, h in got['helps'].items():
        assert h['code'] == 0 and h['text'].startswith('usage: compatrepro'), (cmd, h)
    assert got['helps']['upgrade']['text'].count('gallery_old') >= 2, 'upgrade --help lists the arrays of the .npz'
    heavy = sorted({m if m.startswith('compatrepro.') else m.split('.')[0] for m in got['loaded']}
                   - {'compatrepro.cli', 'compatrepro.upgrade_inputs'})   # torch, numpy, pandas, heavy modules
    assert 'torch' not in got['loaded'], f'compatrepro --help imported torch, and with it: {heavy}'
    assert not heavy, f'compatrepro --help imported {heavy}: import them in the function that runs the subcommand'


READ = '''
import contextlib, io, json, sys
import compatrepro.cli as c
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try: c.main(sys.argv[1:])
    except SystemExit as e: code = e.code
print(json.dumps(dict(text=out.getvalue(), torch='torch' in sys.modules,
                      loaded=sorted(m for m in sys.modules if m.startswith('compatrepro.')))))
'''


@pytest.mark.parametrize('args', [['status'], ['reproduce', '--plan']])
def test_reading_the_results_imports_no_torch(args):
    "`status` and `reproduce --plan`, in a fresh interpreter: each prints its answer and never imports torch."
    r = subprocess.run([sys.executable, '-c', READ, *args], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert 'findings' in got['text'] or 'run(s)' in got['text'], got['text'][-2000:]
    assert not got['torch'], (f"compatrepro {' '.join(args)} imported torch; the package modules it loaded: "
                              f"{got['loaded']}: a module of the reproduction layer imports a library module")


@pytest.mark.parametrize('mine, module, theirs', [
    ('_SCALES', 'core', 'SCALES'),
    ('_ITEM_STATES', 'runs', 'ITEM_STATES'),
    ('_DISTANCES', 'retrieval', 'DISTANCES'),
])
def test_cli_constants_are_the_library_ones(mine, module, theirs):
    "The values `compatrepro.cli` writes out for its parsers equal the library's, in the same order."
    import importlib
    import compatrepro.cli as cli
    lib = getattr(importlib.import_module(f'compatrepro.{module}'), theirs)
    ours = getattr(cli, mine)
    as_list = lambda v: list(v.items()) if isinstance(v, dict) else list(v)
    assert as_list(ours) == as_list(lib), (f'compatrepro.cli.{mine} = {ours!r} but compatrepro.{module}.{theirs} = '
                                           f'{lib!r}: write the library\'s value into 98_cli\'s cell and nbdev_export')
