"""RM's paper-scale path (notebooks 50-56) to its first training steps, on small fake dataset trees.

For ImageNet-1K, CIFAR-100, Places-365, Market-1501 and the open-class CIFAR-100 and GLDv2-test upgrades, `rm_specs`
gives the paper's architectures (RM App. B.2, sec. 5.3), the old and new backbones train one epoch at paper scale and
`rm_eval` gives features of the evaluation parts. On CIFAR-100 (with an ImageNet tree beside it for FCT's
side-information model) the whole row set of Table 1 runs end to end: orders, setups, curves at t = 0, 0.1, ..., 1;
the transformations train on one augmented view through both frozen models, RM's in class-balanced batches of 4 per
class. The heterogeneous upgrades (deeper, ViT) are checked as specs only: a ViT-B/32 is too slow on a CPU.
GLDv2-test is scored by its retrieval solution (the query split's positives), not by its all -1 labels."""
import pickle

import numpy as np, pandas as pd, pytest, torch

from compatrepro import loaders as LD, pipeline, rm as RM, specs as SP, updates as U
from compatrepro.runtime import ExperimentParams
from compatrepro.data import get_split
from compatrepro.backfill import curve_auc
from compatrepro.rm import RM_DATASETS, RM_FRACTIONS, RM_TABLE1, rm_curves, rm_eval, rm_orders, rm_setups, rm_specs
from compatrepro.metrics import retrieval_metrics
from compatrepro.models import load_model
from compatrepro.pipeline import cached_backbone, cached_transformation
from test_data_paper import img
from test_train_paper_scale import _context, _fake_imagenet, _fake_market

pytestmark = pytest.mark.usefixtures('one_thread')


def _fake_cifar100(root, n_classes=6, n_train=4, n_test=2):
    "CIFAR-100's python version: cifar-100-python/{train,test,meta} pickles."
    d = root/'cifar100'/'cifar-100-python'; d.mkdir(parents=True)
    rng = np.random.default_rng(4)
    for part, k in (('train', n_train), ('test', n_test)):
        n = n_classes*k
        pickle.dump({'data': rng.integers(0, 255, (n, 3072), dtype=np.uint8), 'fine_labels': [i % n_classes for i in range(n)]},
                    open(d/part, 'wb'))
    pickle.dump({'fine_label_names': [f'c{i}' for i in range(n_classes)]}, open(d/'meta', 'wb'))


def _fake_places365(root, n_train=4, n_val=2):
    "Places-365's layout: the category list, the train and val file lists, data_256/ and val_256/."
    d, cats = root/'places365', ['/a/airfield', '/b/bakery', '/c/canyon', '/d/dock']
    tr, va = [], []
    for c, cat in enumerate(cats):
        for k in range(n_train): img(d/'data_256'/cat[1:]/f'{k:08d}.jpg', (60*c, 40*k, 90)); tr.append(f'{cat}/{k:08d}.jpg {c}')
        for k in range(n_val):
            img(d/'val_256'/f'Places365_val_{c}{k}.jpg', (60*c, 40*k + 20, 90)); va.append(f'Places365_val_{c}{k}.jpg {c}')
    (d/'categories_places365.txt').write_text(''.join(f'{cat} {c}\n' for c, cat in enumerate(cats)))
    (d/'places365_train_standard.txt').write_text('\n'.join(tr)); (d/'places365_val.txt').write_text('\n'.join(va))


def _fake_gldv2(root, n_landmarks=6, per_landmark=3, n_index=6):
    "GLDv2-clean (train_clean.csv, train/a/b/c/<id>.jpg) and GLDv2-test (test/ queries, index/, index.csv, the solution)."
    d = root/'gldv2'
    at = lambda folder, i: d/folder/i[0]/i[1]/i[2]/f'{i}.jpg'
    rows = []
    for l in range(n_landmarks):
        ims = [f'{l:x}{k:x}f0a1' for k in range(per_landmark)]
        for k, i in enumerate(ims): img(at('train', i), (40*l, 80*k, 60))
        rows.append((100 + l, ' '.join(ims)))
    pd.DataFrame(rows, columns=['landmark_id', 'images']).to_csv(d/'train_clean.csv', index=False)
    index = [f'ab{k:x}0c1' for k in range(n_index)]
    for k, i in enumerate(index): img(at('index', i), (30*k, 10, 200))
    for k in range(4): img(at('test', f'cd{k}9e2'), (30*k, 10, 200))
    pd.DataFrame({'id': index}).to_csv(d/'index.csv', index=False)
    # Kaggle's layout: two Private queries (GLDv2-test), a Public one and an ignored one (images None), all left out
    solution = {'id': ['cd09e2', 'cd29e2', 'cd19e2', 'cd39e2'], 'images': [' '.join(index[:2]), index[3], index[2], 'None'],
                'Usage': ['Private', 'Public', 'Private', 'Ignored']}   # the Private positives: index 0 and 1; index 2
    pd.DataFrame(solution).to_csv(d/'retrieval_solution_v2.1.csv', index=False)


def _fake_rm_trees(root):
    "The five datasets of RM's paper-scale notebooks under one data root (ImageNet also for FCT's side-information model)."
    _fake_market(_fake_imagenet(root))
    for make in (_fake_cifar100, _fake_places365, _fake_gldv2): make(root)
    return root


@pytest.fixture(scope='module')
def rm_root(tmp_path_factory):
    "One data root and one artifact cache for the module: the end-to-end test reuses the CIFAR-100 backbones."
    with _context(tmp_path_factory.mktemp('rm'), _fake_rm_trees) as ctx: yield ctx


class _OneEpoch(ExperimentParams):
    """`ExperimentParams(epochs=1, batch_size=4)` with no warmup: at paper scale `backbone_spec` keeps the recipe's 5
    warmup epochs under an `epochs` override, and `BackboneSpec` refuses warmup_epochs > epochs."""
    @property
    def overrides(self) -> dict: return super().overrides | {'warmup_epochs': 0}


def _params(ctx): return _OneEpoch(scale='paper', data_root=ctx.data_root, epochs=1, batch_size=4)


@pytest.mark.parametrize('name, arch, dim, n_query, n_gallery', [
    ('ImageNet-1K', 'resnet50', 128, 8, 8), ('CIFAR-100', 'resnet18', 128, 12, 12), ('Places-365', 'resnet18', 512, 8, 8),
    ('Market-1501', 'resnet18', 128, 3, 10), ('CIFAR-100 open-class', 'resnet18', 128, 12, 12),
    ('GLDv2-test open-class', 'resnet18', 128, 2, 6)])
def test_rm_backbones_train_and_evaluate(rm_root, name, arch, dim, n_query, n_gallery):
    "Notebooks 51-56 at paper scale: the paper's backbones, one epoch each, and the features of the evaluation parts."
    data, P = RM_DATASETS[name], _params(rm_root)
    specs = rm_specs(P, data, baselines=('BCT',))
    assert {k: (s.arch, s.emb_dim, s.epochs, s.batch_size) for k, s in specs.items() if k != 'side'} == \
           dict.fromkeys(('old', 'new', 'BCT'), (arch, dim, 1, 4))                      # RM App. B.2 / sec. 5.3, one epoch
    assert specs['BCT'].compat.old == specs['old'] and specs['BCT'].split == data.new
    assert (specs['side'].objective, specs['side'].split, specs['side'].arch) == ('simclr', 'imagenet-500', 'resnet50')
    arts = {k: cached_backbone(specs[k]) for k in ('old', 'new')}
    assert all(len(a['history']) == 1 and np.isfinite(a['history'][0]['loss']) for a in arts.values())
    old_ids, new_ids = (set(load_model(arts[k]).class_ids.tolist()) for k in ('old', 'new'))
    assert (not old_ids & new_ids) if 'open-class' in name else old_ids < new_ids    # open-class: disjoint; else extended
    E = rm_eval({k: specs[k] for k in ('old', 'new')}, data, P)
    assert E.query_is_gallery == (data.parts == ('eval',)) and len(E.query_labels) == n_query and len(E.gallery_labels) == n_gallery
    assert all(F[k].shape == (n, dim) for F, n in ((E.query, n_query), (E.gallery, n_gallery)) for k in ('old', 'new'))
    assert not torch.equal(E.gallery['old'], E.gallery['new'])
    if data.relevance == 'market':   # 3 queries on camera 1, each with 3 gallery images (cameras 2, 3, 1) and a distractor
        assert [(len(p), len(j)) for p, j in E.relevance] == [(2, 1)]*3


def test_rm_gldv2_is_scored_by_its_retrieval_solution(rm_root):
    "Notebook 56 at paper scale: GLDv2-test's mAP@100 counts only the index images of each query's solution row."
    data, P = RM_DATASETS['GLDv2-test open-class'], _params(rm_root)
    specs = {k: s for k, s in rm_specs(P, data, baselines=()).items() if k in ('old', 'new')}
    E = rm_eval(specs, data, P)
    positives = get_split(data.new, 'query', 'paper', rm_root.data_root).positives
    assert [p.tolist() for p in positives] == [[0, 1], [2]]                          # as _fake_gldv2 writes the solution
    want = retrieval_metrics(E.query['new'], E.gallery['new'], metrics=('top1', 'mAP@100'), distance='cosine',
                             query_is_gallery=False, relevance=[(p, []) for p in positives])
    assert want['mAP@100'] < 100                                                    # this fake data does not score 100 by chance
    curves, _ = rm_curves(rm_setups(specs, data, E, P, np.arange(6), methods=('new',)), data, E)
    assert np.isclose(curves['new']['mAP@100'].iloc[-1], want['mAP@100']) and np.isclose(curves['new']['top1'].iloc[-1], want['top1'])


FAST_TRANSFORMATION = dict(epochs=1, batch_size=8, warmup_epochs=0, freeze_bn_epoch=None)


def test_rm_table1_rows_end_to_end(rm_root, monkeypatch):
    "Every row of Table 1 on CIFAR-100 at paper scale, its transformations shortened to one epoch of 8-image batches."
    made, batches, asked = [], [], []
    def short_recipe(*a, **kw):   # rm_setups asks for the paper's schedule (50-80 epochs of 1024 images)
        asked.append({k: kw.get(k) for k in ('epochs', 'batch_size')})
        made.append(SP.transformation_spec(*a, **(kw | FAST_TRANSFORMATION))); return made[-1]
    real_rows = LD.class_balanced_rows
    def record_rows(labels, *a):
        rows = real_rows(labels, *a); batches.extend(torch.as_tensor(np.asarray(labels))[rows]); return rows
    def two_views(*a, **kw): raise AssertionError("paper scale must train transformations on one view (train_transformation_same_view)")
    monkeypatch.setattr(U, 'transformation_spec', short_recipe)    # FCT's and BiCT's h (transform_old)
    monkeypatch.setattr(RM, 'transformation_spec', short_recipe)   # RM's psi and rho (rm_transform)
    monkeypatch.setattr(LD, 'class_balanced_rows', record_rows)
    monkeypatch.setattr(pipeline, 'train_transformation', two_views)
    data, P = RM_DATASETS['CIFAR-100'], _params(rm_root)
    specs = rm_specs(P, data)
    E = rm_eval(specs, data, P)
    orders = rm_orders(specs, E, P.seed)
    assert set(orders) == {'old classifier', 'centroid', 'random'} and all(sorted(o) == list(range(12)) for o in orders.values())
    setups = rm_setups(specs, data, E, P, orders['old classifier'], methods=RM_TABLE1)
    assert setups['RM'].query_old is not None and setups['FCT'].query_old is None
    curves, _ = rm_curves(setups, data, E)
    assert list(curves) == list(RM_TABLE1)
    for c in curves.values():
        assert np.allclose(c.index, RM_FRACTIONS) and all(np.isfinite(curve_auc(c, m)) for m in ('top1', 'mAP'))
    naive, old, new = (curves[k]['mAP'] for k in ('RM naive', 'old', 'new'))
    assert np.isclose(naive.iloc[0], old.iloc[0]) and np.isclose(naive.iloc[-1], new.iloc[-1])   # the merge's ends: old, new
    bct, bict = curves['BCT']['mAP'], curves['BiCT']['mAP']
    assert np.allclose(bct, bct.iloc[0]) and np.isclose(bict.iloc[0], bct.iloc[0])   # BCT backfill-free; BiCT starts there
    assert asked and all(a == {'epochs': 1, 'batch_size': 4} for a in asked)   # the notebook's epochs and batch size reach every transformation
    assert sorted((s.objective, s.side_info is not None, s.new.compat is not None) for s in made) == \
           [('l2', False, False), ('l2', False, True), ('l2', True, False), ('mcl', False, False)]   # FCT, BiCT, FCT (side-info), RM
    rm = next(s for s in made if s.objective == 'mcl')
    assert rm.per_class == 4 and rm.psi_blocks == rm.rho_blocks == data.blocks
    art = cached_transformation(rm)
    assert art['spec']['per_class'] == 4 and len(art['history']) == 1 and np.isfinite(art['history'][0]['loss'])
    assert batches and all((torch.bincount(y) % 4 == 0).all() for y in batches)   # class-balanced: 4 images of each class


def test_rm_heterogeneous_upgrade_specs(tmp_path):
    "Sec. 5.3 / Figure 7 at paper scale: ResNet-18 -> ResNet-50 ('deeper') and ResNet-18 -> ViT-B/32 ('vit')."
    P, data = ExperimentParams(scale='paper', data_root=str(tmp_path)), RM_DATASETS['CIFAR-100']   # the paper's schedule
    deeper = rm_specs(P, data, upgrade='deeper')
    assert [deeper[k].arch for k in ('old', 'new', 'BCT', 'RACT')] == ['resnet18', 'resnet50', 'resnet50', 'resnet50']
    assert deeper['RACT'].compat.tau == 0.5                                         # the RACT that learns (18_rm)
    assert deeper['BCT'].compat.old == deeper['old'] and deeper['new'].emb_dim == deeper['old'].emb_dim == 128
    vit = rm_specs(P, data, baselines=(), upgrade='vit')
    assert (vit['old'], vit['new'].arch) == (deeper['old'], 'vit_b_32') and set(vit) == {'old', 'new', 'side'}
    with pytest.raises(ValueError, match='upgrade'):
        rm_specs(P, data, upgrade='wider')
