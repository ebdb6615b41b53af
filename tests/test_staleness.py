"""No silent staleness: on a scratch copy of the package, the notebooks and the committed tiny results, a change to an
evaluation function's result makes `compatrepro status --check` report exactly the runs that reach that function as
stale, and a comment or docstring edit of it reports nothing. (Training changes are caught by
tests/test_artifact_fingerprints.py, since the cache would serve the models made before.)"""
import json, os, re, subprocess, sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _doubles import scratch_repo   # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT/'results'/'tiny'


def _scratch(tmp: Path) -> Path: return scratch_repo(tmp)


def _stale_runs(root: Path) -> set[tuple[str, int]]:
    "The runs `compatrepro status --check` reports stale, run with the scratch copy's package."
    r = subprocess.run([sys.executable, '-m', 'compatrepro', 'status', '--check'], cwd=root, capture_output=True, text=True,
                       env=os.environ | {'PYTHONPATH': str(root)})
    stale = {(m.group(1), int(m.group(2))) for m in re.finditer(r'^\s*- (\S+) seed (\d+) is stale', r.stdout, re.M)}
    assert (r.returncode == 0) == (not stale), r.stdout[-3000:] + r.stderr[-3000:]
    return stale


def _edit(f: Path, old: str, new: str):
    s = f.read_text(); assert s.count(old) == 1, old; f.write_text(s.replace(old, new))


def test_an_evaluation_change_makes_exactly_its_runs_stale_and_a_comment_nothing(tmp_path):
    root = _scratch(tmp_path)
    metrics = root/'compatrepro'/'metrics.py'
    runs = list((root/'results'/'tiny'/'runs').glob('*.json'))
    reach = {(p['notebook'], p['seed']) for p in (json.loads(f.read_text()) for f in runs) if 'nfr' in p.get('library', {})}
    assert reach and len(reach) < len(runs), 'nfr should be reached by some runs, not all'

    _edit(metrics, '    "RACT eq. 12 in percent: share of the reference\'s successes that fail in `hits`."',
          '    "RACT eq. 12, in percent."   # a comment and a docstring: no number changes')
    assert _stale_runs(root) == set()

    _edit(metrics, 'return 100 * float((r & ~h).sum() / r.sum())', 'return 99 * float((r & ~h).sum() / r.sum())')
    assert _stale_runs(root) == reach


def test_a_change_to_the_paper_scale_data_path_stales_no_standin_run(tmp_path):
    """Every training notebook reaches `decode_jpegs` (the GPU data path) through `iter_batches`, yet no tiny run executes
    it, so changing it stales none of them (`standin_unreached`; tests/test_notebooks.py checks that no stand-in run
    executes it); a change to `iter_batches` itself, which they do execute, stales every run that reaches it."""
    root = _scratch(tmp_path)
    loaders = root/'compatrepro'/'loaders.py'
    provs = [json.loads(f.read_text()) for f in (root/'results'/'tiny'/'runs').glob('*.json')]
    reach = lambda name: {(p['notebook'], p['seed']) for p in provs if name in p.get('library', {})}
    assert len(reach('decode_jpegs')) > len(provs)//2, 'most runs should reach decode_jpegs'

    _edit(loaders, '    try:\n        return list(decode_jpeg(list(data), mode=ImageReadMode.RGB, device=device))',
          '    if device.type == "cuda":\n        torch.cuda.current_stream(device).synchronize()\n'
          '    try:\n        return list(decode_jpeg(list(data), mode=ImageReadMode.RGB, device=device))')
    assert _stale_runs(root) == set()

    _edit(loaders, 'raise ValueError("views > 1 needs train=True: un-augmented views would all be equal")',
          'raise ValueError("views > 1 needs train=True")')
    assert _stale_runs(root) == reach('iter_batches') != set()
