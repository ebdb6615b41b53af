"""The docs' tables that benchmark scripts make from their committed CSVs, each between `<!-- name -->` and
`<!-- /name -->` in its page: written by the scripts' own summaries, never by hand.

    python benchmarks/docs_tables.py           # rewrite every block from the committed CSVs
    python benchmarks/docs_tables.py --check   # exit 1, naming the blocks, if a page is not what its CSVs give

`tests/test_screens.py` runs the check."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / 'benchmarks'


def tables() -> dict:
    "(page, block name) -> the table its script makes now from the committed CSVs."
    import bct_face_probe, bct_feature_lengths, bct_l2_probe, bct_paragon_identities, doubling_noise, family_identities
    import fastfill_parts
    import rm_epochs_ladder
    import simclr_screen
    import old_seen_unseen, ract_upgrade_probe, seed_cost, vit_screen
    from standin_regime import coverage_table, doubling_table, seed_moves_table, summary

    screens = [str(p) for p in sorted((BENCH / 'recipe_screen').glob('*.csv'))]
    convergence = [str(p) for p in sorted((BENCH / 'convergence').glob('*.csv'))]
    identities = [str(p) for p in sorted((BENCH / 'family_identities').glob('*.csv'))]
    return {('docs/standin_regime.md', 'recipe screen'): doubling_table(screens),
            ('docs/standin_regime.md', 'convergence'): doubling_table(convergence, today=True),
            ('docs/standin_regime.md', 'convergence per seed'): seed_moves_table(convergence),
            ('docs/standin_regime.md', 'seed cost'): seed_cost.table(screens),
            ('docs/standin_regime.md', 'old seen unseen'):
                old_seen_unseen.summary(sorted((BENCH / 'old_seen_unseen').glob('*.csv'))),
            ('docs/standin_regime.md', 'doubling noise'): doubling_noise.table(screens, convergence),
            ('docs/standin_regime.md', 'convergence coverage'):
                coverage_table(convergence, ROOT / 'results' / 'tiny' / 'runs'),
            ('docs/standin_regime.md', 'simclr screen'): simclr_screen.summary(BENCH / 'simclr_screen.csv'),
            ('docs/standin_regime.md', 'vit screen'): vit_screen.summary(BENCH / 'vit_screen.csv'),
            ('docs/standin_regime.md', 'rm ladder'): rm_epochs_ladder.summary(BENCH / 'rm_epochs_ladder.csv'),
            ('docs/standin_regime.md', 'rm ladder recipe'):
                rm_epochs_ladder.summary(BENCH / 'rm_epochs_ladder_recipe.csv'),
            ('docs/standin_regime.md', 'family identities'): family_identities.summary(identities),
            ('docs/standin_regime.md', 'ract upgrade'): ract_upgrade_probe.summary(BENCH / 'ract_upgrade_probe.csv'),
            ('docs/suspects.md', 'l2 readings'): bct_l2_probe.summary(BENCH / 'bct_l2_probe.csv'),
            ('docs/suspects.md', 'identity lever'):
                bct_face_probe.identity_summary(BENCH / 'bct_face_probe.csv', BENCH / 'bct_face_identities.csv'),
            ('docs/suspects.md', 'paragon identities'):
                bct_paragon_identities.summary(*(BENCH / f'bct_paragon_{n}.csv'
                                                 for n in ('identities', 'epochs', 'rules'))),
            ('docs/suspects.md', 'fastfill parts'): fastfill_parts.summary(BENCH / 'fastfill_parts'),
            ('docs/suspects.md', 'bct feature lengths'): bct_feature_lengths.summary(BENCH / 'bct_feature_lengths.csv'),
            ('docs/suspects.md', 'face schedule premise'):
                summary([BENCH / 'standin_regime' / f'library-face-e{e}.csv' for e in (48, 96)]),
            ('docs/suspects.md', 'market identity lever'):
                family_identities.summary([BENCH / 'bct_market_identities.csv'])}


def block_span(text: str, page: str, name: str) -> tuple[int, int]:
    "Where the block `name` of `page`'s `text` starts and ends (its markers excluded)."
    start, end = f'<!-- {name} -->\n', f'<!-- /{name} -->'
    if start not in text or end not in text:
        raise ValueError(f"{page} has no {name!r} block: put '{start.strip()}' and '{end}' where its table goes")
    a = text.index(start) + len(start)
    return a, text.index(end, a)


def read_block(page: str, name: str) -> str:
    "The table in the block `name` of `page` (a path relative to the repository)."
    text = (ROOT / page).read_text(encoding='utf-8')
    a, b = block_span(text, page, name)
    return text[a:b].strip()


def write_block(page: str, name: str, table: str) -> None:
    text = (ROOT / page).read_text(encoding='utf-8')
    a, b = block_span(text, page, name)
    (ROOT / page).write_text(text[:a] + table.strip() + '\n' + text[b:], encoding='utf-8')


def stale_blocks() -> list[str]:
    "The blocks whose table is not what their CSVs give now."
    return [f'{page}: {name}' for (page, name), t in tables().items() if read_block(page, name) != t.strip()]


if __name__ == '__main__':
    sys.path.insert(0, str(BENCH))
    if sys.argv[1:] == ['--check']:
        stale = stale_blocks()
        print('\n'.join(stale) or 'every table is current')
        sys.exit(1 if stale else 0)
    for (page, name), t in tables().items():
        write_block(page, name, t)
