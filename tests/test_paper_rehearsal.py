"""The paper-scale rehearsal (`compatrepro.rehearsal`, `compatrepro rehearse`): experiment notebooks run end to end at
`scale='paper'` on a generated tree of every paper dataset in its real layout, training cut short (`epochs=1`,
`batch_size=4`), through the project's notebook runner; and the pre-flight check that stops
`compatrepro reproduce --scale paper` before anything runs when a dataset folder is missing.

Which notebooks CI rehearses, and why not the others: on a CPU the paper-scale models are torchvision ResNets at 224 px
(112 px for faces), no notebook parameter makes the images smaller, and the paper-scale transformations of FastFill and
RM train their full schedule (80 and 50 epochs, each step one view through both backbones), which `epochs` does not
shorten. `REHEARSED` is what fits CI's budget (about 10 minutes for this file, two notebooks at a time, one thread
each): a notebook of every paper's decade but FastFill's, and the claims notebooks after them. `NOT_IN_CI` gives for
every other notebook what a rehearsal of it took on a shared 2-core CPU (docs/paper_scale.md has the whole table).
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
    '40_ract_data': 30,            # GLDv2-clean, GLDv2-test (retrieval solution), ROxford and RParis read from their files
    '44_ract_sequential': 175,     # ResNet-50s from pretrained/resnet50.pth on GLDv2 (1 epoch), the three RACT test sets
    '50_rm_cost': 16,              # MACs of RM's paper-scale ResNet-18 at 224 px and of its transformation (no data)
    '39_bct_claims': 29,           # the claims notebooks, over the rehearsal's records of their paper
    '49_ract_claims': 30,
    '59_rm_claims': 27,
}
# every other notebook: why not here, and the seconds its rehearsal took (or ran before it was stopped), see the docs
NOT_IN_CI = {
    '20_fastfill_imagenet': 'ResNet-50s at 224 px, 5 epochs (the recipe warm-up), and 80-epoch paper-scale transformations',
    '21_fastfill_ablation': 'as 20, with a transformation per ablation row',
    '22_fastfill_places': 'as 20, on Places-365',
    '23_fastfill_vggface2': 'ArcFace ResNets, 5 epochs, and 80-epoch transformations',
    '24_fastfill_biased': 'as 23, on VGGFace2-Gender',
    '25_fastfill_arch': 'several architectures at 224 px (ResNet-50 to ViT-B/32), and their transformations',
    '26_fastfill_unseen': 'as 20, three ImageNet splits',
    '27_fastfill_side_info': 'a SimCLR ResNet-50 (two views), and 80-epoch transformations through three models',
    '29_fastfill_claims': 'needs a FastFill notebook to have declared claims (none of them fits)',
    '31_bct_robustness': 'ResNet-152 and ResNet-101 new models: more than 7 minutes',
    '32_bct_chain': 'a chain of ResNet-101s: with 30 it exceeds the budget',
    '33_bct_market': 'ResNet-18s at 224 px, 5 epochs (the recipe warm-up)',
    '41_ract_hot_refresh': 'ResNet-101 new models at 224 px (two views) for every allocation: more than 7 minutes',
    '42_ract_uncertainty': 'as 41',
    '43_ract_ablations': 'a dozen ResNet-101 new models: about 6 minutes',
    '45_ract_related': 'as 41',
    '51_rm_imagenet': 'ResNet-50s, 5 epochs, a SimCLR side model and 50-80-epoch transformations',
    '52_rm_cifar': 'as 51, ResNet-18s',
    '53_rm_places': 'as 52, on Places-365',
    '54_rm_market': 'as 52, on Market-1501',
    '55_rm_open_cifar': 'as 52, open-class',
    '56_rm_open_gldv2': 'as 52, on GLDv2',
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
