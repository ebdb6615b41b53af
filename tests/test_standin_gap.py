"""The stand-in must separate an old and a new model: ResNet-18 on 'imagenet-500' (old half of the classes) and on
'imagenet-1k' (all classes), tiny recipe, CMC top-1 on the 'imagenet-1k' eval set (query = gallery, the query removed,
l2) at least 10 points apart, neither above 95%. A real training run (minutes); it uses the default artifact cache,
so later notebooks reuse both models."""
import json, os, time
import torch, pytest

from compatrepro.features import get_features
from compatrepro.metrics import retrieval_metrics
from compatrepro import train as T


pytestmark = pytest.mark.usefixtures('one_thread')


def test_standin_gap():
    old, new = T.backbone_spec('imagenet-500', 'tiny', seed=0), T.backbone_spec('imagenet-1k', 'tiny', seed=0)
    arts = {k: T.train_backbone(s, device='cpu', show_progress=False) for k, s in (('old', old), ('new', new))}
    top1 = {}
    for k, s in (('old', old), ('new', new)):
        f = get_features(s, 'imagenet-1k', 'eval', device='cpu', show_progress=False)
        top1[k] = retrieval_metrics(f['features'], f['features'], f['labels'], f['labels'], metrics=('top1',),
                                    distance='l2', query_is_gallery=True)['top1']
    report = {k: dict(top1=round(top1[k], 2), train_seconds=round(arts[k]['train_seconds'], 1),
                      epochs=len(arts[k]['history']), final_loss=round(arts[k]['history'][-1]['loss'], 3)) for k in top1}
    print(json.dumps(report))
    assert max(top1.values()) <= 95, report
    assert top1['new'] - top1['old'] >= 10, report
