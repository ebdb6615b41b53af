"""RM's evaluation through the experiment helpers: rank-merge curves of an `UpdateSetup` with `query_old`,
their AUC (RM sec. 3.2), and the transformation cost in MACs (RM App. B.3)."""
import os
os.environ.setdefault('COMPATREPRO_PROGRESS', '0')

import numpy as np
import pandas as pd
import pytest
import torch
import torchvision
from scipy.spatial.distance import cdist

from compatrepro.backfill import backfill_curve, step_curve, random_order
from compatrepro.runtime import ExperimentParams
from compatrepro.updates import UpdateSetup, update_curves
from compatrepro.experiments import record_curves
from compatrepro.backfill import curve_auc
from compatrepro.metrics import retrieval_metrics
from compatrepro.models import count_macs, RMTransformation
from compatrepro.book import RecordBook


def _ang(*deg):
    return torch.tensor([[np.cos(np.radians(a)), np.sin(np.radians(a))] for a in deg], dtype=torch.float64)


# the hand-computed gallery of 13_experiments: features as angles, cosine distance
Q, QO = _ang(0, 180), _ang(60, 180)
GO, GN = _ang(50, 75, 5, 90), _ang(10, 80, 30, 60)
YG, YQ, FR = np.array([0, 0, 1, 1]), np.array([0, 1]), [0, .25, .5, .75, 1]


def _curves(setups, **kw):
    return update_curves(setups, YQ, FR, ('top1', 'top5', 'mAP'), 'cosine', query_is_gallery=False, gallery_labels=YG, **kw)


def test_no_query_old_is_todays_computation():
    """query_old=None: update_curves gives exactly what backfill_curve / step_curve give without query_old."""
    rng = np.random.default_rng(0)
    X_old, X_new, y = rng.normal(size=(40, 6)), rng.normal(size=(40, 6)), rng.integers(0, 5, 40)
    o = random_order(40, 1)
    for dist in ('l2', 'cosine'):
        cs, st = update_curves({'a': UpdateSetup(X_new, X_old, X_new, o)}, y, distance=dist)
        ref = backfill_curve(X_new, X_old, X_new, y, y, o, np.linspace(0, 1, 21), metrics=('top1', 'top5', 'mAP'), distance=dist)
        pd.testing.assert_frame_equal(cs['a'], ref, check_exact=True)
        pd.testing.assert_frame_equal(st['a'], step_curve(X_new, X_old, X_new, y, y, o, distance=dist), check_exact=True)
        assert cs['a'].attrs['mode'] == 'mixed'


def test_merge_endpoints_and_hand_values():
    cs, st = _curves({'merge': UpdateSetup(Q, GO, GN, np.arange(4), QO), 'mixed': UpdateSetup(Q, GO, GN, np.arange(4))})
    assert cs['merge'].attrs['mode'] == 'rank_merge'
    for m in ('top1', 'top5', 'mAP'):   # t=0: old query / old gallery; t=1: new / new (RM eqs. 6-7 with equality)
        old = retrieval_metrics(QO, GO, YQ, YG, (m,), 'cosine', query_is_gallery=False)[m]
        new = retrieval_metrics(Q, GN, YQ, YG, (m,), 'cosine', query_is_gallery=False)[m]
        assert cs['merge'].loc[0.0, m] == pytest.approx(old, abs=1e-9)
        assert cs['merge'].loc[1.0, m] == pytest.approx(new, abs=1e-9)
    np.testing.assert_allclose(cs['merge']['top1'], [100, 100, 100, 100, 50])
    np.testing.assert_allclose(cs['mixed']['top1'], [50, 50, 50, 100, 50])
    np.testing.assert_allclose(st['merge']['top1'].values, cs['merge']['top1'].values)


def test_merge_by_similarity_exp_minus_dist_is_merge_by_distance():
    """RM's s = exp(-dist), ranked descending, merges exactly as dist ascending: top-1 of a brute-force merge by s."""
    rng = np.random.default_rng(4)
    Qn, Qo, Go, Gn = (rng.normal(size=(30, 5)) for _ in range(4))
    y = rng.integers(0, 4, 30); o = random_order(30, 2)
    st = step_curve(Qn, Go, Gn, y, y, o, 'cosine', query_is_gallery=False, query_old=Qo)
    for k in (0, 7, 15, 30):
        new = np.zeros(30, bool); new[o[:k]] = True
        s = np.exp(-np.where(new[None], cdist(Qn, Gn, 'cosine'), cdist(Qo, Go, 'cosine')))
        top1 = 100 * np.mean(y[s.argmax(1)] == y)
        assert st.loc[k, 'top1'] == pytest.approx(top1)


def test_auc_of_constant_and_recorded(tmp_path):
    c = pd.DataFrame({'mAP': [42.] * 11}, index=pd.Index(np.linspace(0, 1, 11), name='fraction'))
    assert curve_auc(c, 'mAP') == pytest.approx(42.)
    cs, st = _curves({'merge': UpdateSetup(Q, GO, GN, np.arange(4), QO)})
    assert curve_auc(cs['merge'], 'top1') == pytest.approx(93.75)   # trapezoid over steps of 1/4
    book = RecordBook('RM', '50_rm', ExperimentParams(out_dir=str(tmp_path)), 'toy')
    record_curves(book, 'toy', cs, st)                               # default: no AUC, as before
    assert {r['metric'] for r in book.records} == {'top1~', 'mAP~'}
    record_curves(book, 'toy', cs, st, auc=True)
    got = {r['metric']: r['value'] for r in book.records}
    assert got['AUC_top1'] == pytest.approx(93.75) and got['AUC_mAP'] == pytest.approx(curve_auc(cs['merge'], 'mAP'))
    with pytest.raises(ValueError, match='include 0 and 1'): curve_auc(cs['merge'].iloc[1:], 'top1')
    with pytest.raises(ValueError, match='no column'): curve_auc(cs['merge'], 'NFR@1')
    with pytest.raises(ValueError, match='query_old has 1 rows'): UpdateSetup(Q, GO, GN, np.arange(4), QO[:1])


def test_count_macs_linear_and_resnet18(capsys):
    for d_in, d_out in ((7, 5), (128, 256)):
        assert count_macs(torch.nn.Linear(d_in, d_out), (1, d_in)) == d_in * d_out   # per sample
        assert count_macs(torch.nn.Linear(d_in, d_out), (4, d_in)) == 4 * d_in * d_out
    assert count_macs(RMTransformation(128, 128), (1, 128)) == 2 * (128 * 256 + 256 * 128)
    r18 = count_macs(torchvision.models.resnet18(), (1, 3, 224, 224))
    print(f"ResNet-18 at 224x224: {r18} MACs")
    assert r18 == pytest.approx(1.8e9, rel=0.02)    # RM App. B.3: "ResNet-18, which takes 1.8G of ... MACs"
    with pytest.raises(ValueError, match='positive ints'): count_macs(torch.nn.Linear(3, 2), (0, 3))
