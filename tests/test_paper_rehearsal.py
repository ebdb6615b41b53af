"""The paper-scale rehearsal (`compatrepro.rehearsal`, `compatrepro rehearse`): every experiment notebook runs end to
end at `scale='paper'` on a generated tree of every paper dataset in its real layout, training cut short (`epochs=1`,
`batch_size=4`) and, on CI's CPU, the backbones cut too (`CI_CUTS`: every backbone reads 64 px images and every ResNet
has base width 16, `ExperimentParams.fit`), through the project's notebook runner; and the pre-flight check that stops
`compatrepro reproduce --scale paper` before anything runs when a dataset folder is missing. docs/paper_scale.md gives
the measured time of each notebook, on a CPU at these cuts and on a GPU at the recipes' sizes."""
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

CI_CUTS = dict(image_size=64, width=16)   # a 4-image ResNet-50 step: 0.15 s against 6.3 s at 224 px and width 64 (one CPU thread)
EXPERIMENTS = [p.stem for p in experiment_notebooks(NBS)]


@pytest.fixture(scope='module')
def rehearsal(tmp_path_factory):
    "One rehearsal of every experiment notebook into a temporary folder (its tree, cache and results all inside it)."
    out = tmp_path_factory.mktemp('rehearsal')
    table = rehearse(out, device='cpu', jobs=2, threads=1, timeout=1200, **CI_CUTS)
    print(table.to_string())
    return out, table.set_index('notebook')


def test_every_notebook_is_rehearsed(rehearsal):
    assert sorted(rehearsal[1].index) == sorted(EXPERIMENTS)


@pytest.mark.parametrize('nb', EXPERIMENTS)
def test_notebook_runs_end_to_end_at_paper_scale(rehearsal, nb):
    out, t = rehearsal
    r = t.loc[nb]
    print(f'{nb}: {r.seconds} s at epochs={r.epochs}')
    assert r.ok, f'{nb} failed at paper scale: {r.cause}\n(executed notebook: {out}/paper/notebooks/{nb}.seed0.ipynb)'
    assert r.records > 0
    recs = pd.read_csv(out/'paper'/'records'/f'{nb}.seed0.csv')
    assert set(recs.scale) == {'paper'} and recs.value.notna().all()
    prov = json.loads((out/'paper'/'runs'/f'{nb}.seed0.json').read_text())
    assert prov['finished'] and prov['scale'] == 'paper' and prov['rehearsal']['note'] == REHEARSAL_NOTE
    assert prov['params']['epochs'] == r.epochs and prov['params']['batch_size'] == 4
    assert {k: prov['rehearsal'][k] for k in CI_CUTS} == CI_CUTS
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
    # at a rehearsal's width the files fit the narrowed ResNets that `ExperimentParams.fit` makes, and only them
    write_rehearsal_tree(tmp_path/'w', datasets=['pretrained'], width=16)
    narrow = EmbeddingModel('resnet50', 512, class_ids=range(3), scale='paper', width=16)
    assert load_pretrained(narrow, tmp_path/'w'/'pretrained'/'resnet50.pth').backbone.conv1.weight.shape[0] == 16
    with pytest.raises(ValueError, match='do not fit a resnet50 body'):
        load_pretrained(EmbeddingModel('resnet50', 512, class_ids=range(3), scale='paper'), tmp_path/'w'/'pretrained'/'resnet50.pth')


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


def test_rehearse_refuses_a_batch_larger_than_a_split(tmp_path):
    "A batch larger than a training split of the tree is refused before any notebook starts, naming the split."
    with pytest.raises(ValueError, match=r'batch_size=8 is more than the 4 training images of vggface2-863'):
        rehearse(tmp_path, only=['^24_'], batch_size=8)
    assert not (tmp_path/'paper'/'records').exists()
    # each recipe's own batch (batch_size=None, `--batch-size recipe`): the tree must hold the largest, 1024
    with pytest.raises(ValueError, match=r"the recipes' batches \(up to 1024\) are more than the 4 training images of vggface2-863"):
        rehearse(tmp_path/'recipe', only=['^24_'], batch_size=None)
    assert main(['rehearse', '--batch-size', 'recipe', '--out', str(tmp_path/'cli'), '--only', '^24_']) == 2
