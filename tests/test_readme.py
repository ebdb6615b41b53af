"The README's status table is what `compatrepro status` says about the committed results."
from pathlib import Path
from compatrepro.cli import README_END, README_START, status_markdown

ROOT = Path(__file__).resolve().parent.parent


def test_readme_status_is_current():
    text = (ROOT/'README.md').read_text(encoding='utf-8')
    block = text.split(README_START, 1)[1].split(README_END, 1)[0].strip()
    want = status_markdown(ROOT/'results', ROOT/'nbs')
    assert block == want, f'the README status table is out of date: run `compatrepro status --write-readme README.md`\n{want}'
