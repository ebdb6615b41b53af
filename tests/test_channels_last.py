"""The oneDNN guard of `runs_channels_last` (`05_models`) and the neutral change it is declared as
(`NEUTRAL_CHANGES`, `12a_provenance`): oneDNN's backward pass of a strided 1x1 convolution on a channels-last input with
fewer channels than its kernel's channel block writes past its workspace (uxlfoundation/oneDNN#6035), so on the CPU
such a network keeps the default layout. The committed stand-in runs stay current across that change because none of
their networks has such a convolution, which the first test checks on every backbone they trained."""
import json
from pathlib import Path

import pytest
import torch
from torch import nn

from compatrepro.models import EmbeddingModel, onednn_nhwc_hazard, runs_channels_last, to_device
from compatrepro.provenance import NEUTRAL_CHANGES, library_definitions, name_digest

ROOT = Path(__file__).resolve().parents[1]
RUNS = sorted((ROOT / 'results').glob('*/runs/*.json'))
GUARD = next(c for c in NEUTRAL_CHANGES if c['name'] == 'runs_channels_last')


def _backbone_specs(run: dict) -> list[dict]:
    return [m['spec'] for k, m in run.get('models', {}).items()
            if k.startswith('backbone/') and 'arch' in m.get('spec', {})]


def test_no_standin_network_meets_the_onednn_guard():
    "Every backbone of every committed run recorded under the guard's `before` keeps channels-last on the CPU."
    built, runs = {}, 0
    for p in RUNS:
        run = json.loads(p.read_text())
        if run.get('library', {}).get('runs_channels_last') != GUARD['before']: continue
        runs += 1
        for s in _backbone_specs(run):
            key = (s['arch'], s.get('width', 64), s['scale'], s.get('image_size'))
            if key in built: continue
            vit = s['arch'].startswith('vit')
            model = EmbeddingModel(s['arch'], 8, 2, scale=s['scale'], width=s.get('width', 64),
                                   image_size=(s.get('image_size') or 32) if vit else None)
            built[key] = (onednn_nhwc_hazard(model), runs_channels_last(model), vit)
    assert runs > 0 and built, 'no committed run recorded under the guard: remove its NEUTRAL_CHANGES entry'
    hazards = sorted(k for k, (hazard, _, _) in built.items() if hazard)
    assert not hazards, f'committed runs trained networks the guard changes: {hazards}; they must be re-run'
    assert all(cl != vit for _, cl, vit in built.values())   # the layout is the one they ran with
    assert {k[0] for k in built} >= {'resnet10'}


def test_the_guard_keeps_narrow_cpu_networks_in_the_default_layout():
    narrow = to_device(EmbeddingModel('resnet10', 8, 3, scale='tiny', width=4), 'cpu')
    assert onednn_nhwc_hazard(narrow) and not runs_channels_last(narrow)
    assert narrow.backbone.layer2[0].downsample[0].weight.is_contiguous()
    wide = to_device(EmbeddingModel('resnet10', 8, 3, scale='tiny', width=16), 'cpu')
    assert not onednn_nhwc_hazard(wide) and runs_channels_last(wide)
    # only the strided 1x1 convolution over < 16 channels counts
    assert onednn_nhwc_hazard(nn.Sequential(nn.Conv2d(15, 32, 1, stride=2)))
    assert not onednn_nhwc_hazard(nn.Sequential(nn.Conv2d(16, 32, 1, stride=2)))
    assert not onednn_nhwc_hazard(nn.Sequential(nn.Conv2d(4, 32, 1, stride=1), nn.Conv2d(4, 8, 3, stride=2)))
    # off the CPU the layout is channels-last whatever the width (the meta device runs no kernel)
    assert runs_channels_last(EmbeddingModel('resnet10', 8, 3, scale='tiny', width=4).to('meta'))


def test_narrow_networks_train_in_the_default_layout():
    "A training step of a narrow network gives the gradient of the contiguous computation (float64 as reference)."
    torch.manual_seed(0)
    model = to_device(EmbeddingModel('resnet10', 8, 3, scale='tiny', width=4), 'cpu').train()
    x = torch.randn(18, 3, 16, 16)
    ref = EmbeddingModel('resnet10', 8, 3, scale='tiny', width=4).double().train()
    ref.load_state_dict({k: v.double() for k, v in model.state_dict().items()})
    for m, xx in ((model, x), (ref, x.double())):
        f = m(xx)
        (f[0] if isinstance(f, tuple) else f).square().sum().backward()
    w, w_ref = model.backbone.layer2[0].downsample[0].weight.grad, ref.backbone.layer2[0].downsample[0].weight.grad
    torch.testing.assert_close(w.double(), w_ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize('change', NEUTRAL_CHANGES, ids=lambda c: c['name'])
def test_every_neutral_change_is_todays_code_and_has_its_test(change):
    defs = library_definitions()
    assert change['name'] in defs, f"{change['name']} is gone: remove its NEUTRAL_CHANGES entry"
    assert name_digest(defs[change['name']]) == change['after'], (
        f"{change['name']} changed again since its neutral change: the entry no longer applies; remove it (the runs it "
        "kept current go stale) or, if this change too is shown neutral, declare it as another entry")
    path, _, test = change['test'].partition('::')
    assert test and f'def {test}(' in (ROOT / path).read_text(), f"{change['test']} does not exist"
    assert change['why'] and change['before'] != change['after']
