"""The paper-scale rehearsal (`compatrepro.rehearsal`, `compatrepro rehearse`): experiment notebooks run end to end at
`scale='paper'` on a generated tree of every paper dataset in its real layout, training cut short (`epochs=1`,
`batch_size=4`), through the project's notebook runner; and the pre-flight check that stops
`compatrepro reproduce --scale paper` before anything runs when a dataset folder is missing.

Which notebooks CI rehearses, and why not the others: on a CPU the paper-scale models are torchvision ResNets at 224 px
(112 px for faces) and no notebook parameter makes the images smaller; and the paper-scale transformations of FastFill
and RM keep their recipe (80 and 50 epochs of 1024-image batches, each step one view through both backbones), which
`epochs` and `batch_size` do not reach, so on the tree they stop for want of 1024 training images. `REHEARSED` is
what fits CI's budget (about 10 minutes for this file, two notebooks at a time, one thread each): BCT's, RACT's and
RM's notebooks that end in time, and the claims notebooks after them (7.2 minutes measured). `NOT_IN_CI` gives for
every other notebook why, and what a rehearsal of it took on a shared 2-core CPU (docs/paper_scale.md has the table).
Every experiment notebook is in exactly one of the two (`test_every_notebook_is_accounted_for`), so a new notebook must
be placed; `compatrepro rehearse` runs all of them where there is time (or a GPU)."""
import contextlib, io, json
from pathlib import Path

import pandas as pd
import pytest
import torch, torchvision

from compatrepro.cli import main
from compatrepro.core import default_out_dir
from compatrepro.models import EmbeddingModel
from compatrepro.rehearsal import (PRETRAINED_ARCHS, REHEARSAL_NOTE, missing_datasets, notebook_datasets, rehearse,
                                   write_rehearsal_tree)
from compatrepro.runs import experiment_notebooks
from compatrepro.train import load_pretrained

ROOT = Path(__file__).resolve().parent.parent
NBS = ROOT/'nbs'

# rehearsed here, with the seconds each took in a CI-like run (2 jobs of 1 thread, shared 2-core CPU)
REHEARSED = {
    '30_bct_ijbc': 285,            # 8 ResNet-101s at 112 px on IMDB-Face (1 epoch), IJB-C's templates, 1:1 and 1:N protocols
    '33_bct_market': 90,           # ResNet-18s at 224 px on Market-1501 (5 epochs: the recipe's warm-up), its camera rule
    '40_ract_data': 30,            # GLDv2-clean, GLDv2-test (retrieval solution), ROxford and RParis read from their files
    '44_ract_sequential': 175,     # ResNet-50s from pretrained/resnet50.pth on GLDv2 (1 epoch), the three RACT test sets
    '50_rm_cost': 16,              # MACs of RM's paper-scale ResNet-18 at 224 px and of its transformation (no data)
    '39_bct_claims': 29,           # the claims notebooks, over the rehearsal's records of their paper
    '49_ract_claims': 30,
    '59_rm_claims': 27,
}
NOT_IN_CI = {
    # FastFill and RM: the paper-scale transformations keep their batch of 1024 images (drop-last), which `batch_size`
    # does not reach, so on the tree they stop with "fewer than one batch of 1024" (see docs/paper_scale.md); their
    # backbones need 5 epochs (the recipe's warm-up). Seconds until that stop in brackets.
    '20_fastfill_imagenet': 'first transformation needs 1024 images (stopped at the 600 s limit before it)',
    '21_fastfill_ablation': 'first transformation needs 1024 images (116 s)',
    '22_fastfill_places': 'first transformation needs 1024 images (183 s)',
    '23_fastfill_vggface2': 'first transformation needs 1024 images (477 s)',
    '24_fastfill_biased': 'first transformation needs 1024 images (43 s)',
    '25_fastfill_arch': 'first transformation needs 1024 images (188 s)',
    '26_fastfill_unseen': 'first transformation needs 1024 images (368 s)',
    '27_fastfill_side_info': 'first transformation needs 1024 images (81 s)',
    '29_fastfill_claims': 'needs a FastFill notebook to have declared claims (none runs to its end)',
    '51_rm_imagenet': 'first transformation needs 1024 images (92 s)',
    '52_rm_cifar': 'first transformation needs 1024 images (158 s)',
    '53_rm_places': 'first transformation needs 1024 images (122 s)',
    '54_rm_market': 'first transformation needs 1024 images (62 s)',
    '55_rm_open_cifar': 'first transformation needs 1024 images (88 s)',
    '56_rm_open_gldv2': 'first transformation needs 1024 images (94 s)',
    # BCT and RACT: they run, but take longer than CI's budget leaves
    '31_bct_robustness': 'ResNet-152 and ResNet-101 new models: stopped at the 420 s limit',
    '32_bct_chain': 'a chain of ResNet-101s: 152 s after 30 and 31 had trained the models it shares, more alone',
    '41_ract_hot_refresh': 'ResNet-101 new models at 224 px (two views) for every allocation: stopped at the 420 s limit',
    '42_ract_uncertainty': 'as 41: stopped at the 420 s limit',
    '43_ract_ablations': 'a dozen ResNet-101 new models: 379 s',
    '45_ract_related': 'as 41: stopped at the 420 s limit',
}


def test_every_notebook_is_accounted_for():
    have = sorted(p.stem for p in experiment_notebooks(NBS))
    assert not set(REHEARSED) & set(NOT_IN_CI)
    assert sorted({**REHEARSED, **NOT_IN_CI}) == have, 'place every experiment notebook in REHEARSED or NOT_IN_CI'


@pytest.fixture(scope='module')
def rehearsal(tmp_path_factory):
    "One rehearsal of `REHEARSED` into a temporary folder (its tree, cache and results all inside it)."
    out = tmp_path_factory.mktemp('rehearsal')
    table = rehearse(out, only=[f'^{n}$' for n in REHEARSED], device='cpu', jobs=2, threads=1, timeout=1200)
    print(table.to_string())
    return out, table.set_index('notebook')


@pytest.mark.parametrize('nb', list(REHEARSED))
def test_notebook_runs_end_to_end_at_paper_scale(rehearsal, nb):
    out, t = rehearsal
    r = t.loc[nb]
    print(f'{nb}: {r.seconds} s at epochs={r.epochs} (CI budget line: {REHEARSED[nb]} s)')
    assert r.ok, f'{nb} failed at paper scale: {r.cause}\n(executed notebook: {out}/paper/notebooks/{nb}.seed0.ipynb)'
    assert r.records > 0
    recs = pd.read_csv(out/'paper'/'records'/f'{nb}.seed0.csv')
    assert set(recs.scale) == {'paper'} and recs.value.notna().all()
    prov = json.loads((out/'paper'/'runs'/f'{nb}.seed0.json').read_text())
    assert prov['finished'] and prov['scale'] == 'paper' and prov['rehearsal']['note'] == REHEARSAL_NOTE
    assert prov['params']['epochs'] == r.epochs and prov['params']['batch_size'] == 4
    # the notebook saw only the dataset folders `notebook_datasets` names: a folder it needs but was not given fails it
    given = sorted(p.name for p in (out/'roots'/nb).iterdir())
    assert given == sorted(notebook_datasets(NBS/f'{nb}.ipynb'))


def test_rehearsal_is_never_a_result(rehearsal):
    out, _ = rehearsal
    assert 'rehearsal' in (out/'paper'/'REHEARSAL.md').read_text().lower()
    assert (out/'cache').is_dir()        # its own artifact cache: no rehearsal model in the user's
    with pytest.raises(ValueError, match='never writes into the results folder'):
        rehearse(default_out_dir(), only=['^50_'])
    with pytest.raises(ValueError, match='never writes into the results folder'):
        rehearse(default_out_dir()/'sub', only=['^50_'])


def test_pretrained_files_are_torchvision_state_dicts(tmp_path):
    "pretrained/<arch>.pth have torchvision's keys and shapes (random weights): RACT's loader takes their body."
    write_rehearsal_tree(tmp_path, datasets=['pretrained'])
    assert sorted(p.name for p in (tmp_path/'pretrained').iterdir()) == sorted(f'{a}.pth' for a in PRETRAINED_ARCHS)
    sd = torch.load(tmp_path/'pretrained'/'resnet50.pth', weights_only=True)
    want = torchvision.models.resnet50(weights=None).state_dict()
    assert sd.keys() == want.keys() and all(sd[k].shape == want[k].shape for k in sd)
    m = load_pretrained(EmbeddingModel('resnet50', 512, class_ids=range(3), scale='paper'), tmp_path/'pretrained'/'resnet50.pth')
    assert torch.equal(m.backbone.state_dict()['conv1.weight'], sd['conv1.weight'])


def test_reproduce_refuses_missing_data_before_running(tmp_path):
    "`compatrepro reproduce --scale paper --only 30_ --data-root /nonexistent`: one line per missing folder, nothing runs."
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = main(['reproduce', '--scale', 'paper', '--only', '30_', '--data-root', '/nonexistent', '--out', str(tmp_path)])
    lines = err.getvalue().splitlines()
    assert rc == 2 and lines == [
        'compatrepro: ijbc is expected in /nonexistent/ijbc, which does not exist (needed by 30_bct_ijbc); see data_prep/README.md for its layout',
        'compatrepro: imdbface is expected in /nonexistent/imdbface, which does not exist (needed by 30_bct_ijbc); see data_prep/README.md for its layout']
    assert not (tmp_path/'paper').exists()                                            # nothing started
    (tmp_path/'data'/'pretrained').mkdir(parents=True)
    m = missing_datasets([NBS/'41_ract_hot_refresh.ipynb'], tmp_path/'data')
    assert [p.name for p in m] == ['gldv2', 'roxford5k', 'rparis6k', 'resnet50.pth', 'resnet101.pth']
