"""The committed `results/tiny/summary.csv` and `summary.md` are what the committed records give (`write_summary`:
every item's table beside the papers' numbers). The summary was written by the code of the runs that made the records,
so this is also what shows `paper_table`'s one-pass rewrite (2026-12-03) to be a neutral change for them
(`NEUTRAL_CHANGES`): it gives every item's table exactly as the earlier code did."""
import filecmp, shutil
from pathlib import Path

from compatrepro.report import write_summary

TINY = Path(__file__).resolve().parents[1] / 'results' / 'tiny'


def test_committed_summary_is_what_the_records_give(tmp_path):
    shutil.copytree(TINY / 'records', tmp_path / 'tiny' / 'records')
    made = write_summary(tmp_path / 'tiny')
    for f in made:
        assert filecmp.cmp(f, TINY / f.name, shallow=False), (
            f'results/tiny/{f.name} is not what the committed records give: a run landed without its summary, or '
            "the summary's code changed what it writes; `compatrepro reproduce` writes it after each run")
