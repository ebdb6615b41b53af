"""RACT's paper-scale path (notebooks 40-49) to its first training steps, and its evaluation at GLDv2-test's size.

1. On tiny fake GLDv2 (GLDv2-clean + GLDv2-test), ROxford and RParis trees and a torchvision ResNet-50 weights file at
   `<data_root>/pretrained/resnet50.pth`, `ract_specs(P, 'open-class', 'R50', ('ours',))` trains the old and the new
   (RA-Comp, two views) model from that file, and `ract_eval` / `ract_curve` / `ract_old_point` score all three test
   sets. R50 only: a ResNet-101 at 224 px is too slow on one CPU core; the R101 specs are checked without training.
   The paper's 90 epochs of 480-image batches are shortened as a user shortens them, `ExperimentParams(epochs=1,
   batch_size=4)` (papermill's `-p epochs 1 -p batch_size 4`).
2. `backfill_curve` at GLDv2-test's size (750 queries, 761,757 index images) on synthetic features, in a fresh
   process whose peak RSS is measured: it works query block by query block and never holds an m x n matrix."""
import json, os, pickle, subprocess, sys, textwrap
from pathlib import Path

import numpy as np, pandas as pd, pytest, torch, torchvision

from compatrepro import train as T
from compatrepro.runtime import ExperimentParams
from compatrepro.data import get_split
from compatrepro.ract import RACT_FRACTIONS, RACT_READINGS, RACT_TESTS, ract_curve, ract_eval, ract_old_point, ract_readings, ract_specs
from compatrepro.metrics import retrieval_hits, retrieval_metrics
from compatrepro.pipeline import cached_backbone, get_backbone
from test_data_paper import img
from test_rm_paper_scale import _fake_gldv2
from test_train_paper_scale import _context

pytestmark = pytest.mark.usefixtures('one_thread')

# (query names, gallery names, per query its easy / hard / junk gallery indices); medium protocol: easy + hard
REVISITED = (['q0', 'q1'], ['g0', 'g1', 'g2', 'g3', 'g4'],
             [{'easy': [0], 'hard': [1], 'junk': [2]}, {'easy': [3], 'hard': [], 'junk': []}])


def _fake_revisited(root, name):
    "ROxford5k / RParis6k as the revisitop download lays them out: gnd_<name>.pkl and jpg/<image>.jpg."
    d, (qs, gs, gnd) = root/name, REVISITED
    for k, n in enumerate(qs + gs): img(d/'jpg'/f'{n}.jpg', (35*k, 90 if name == 'roxford5k' else 160, 40*(k % 3)))
    pickle.dump({'qimlist': qs, 'imlist': gs, 'gnd': [g | {'bbx': [0, 0, 20, 16]} for g in gnd]}, open(d/f'gnd_{name}.pkl', 'wb'))


def _pretrained_file(root, arch='resnet50', seed=1234):
    "torchvision's ImageNet weights file of `arch` (random weights here; its fc.* keys included, as torchvision ships them)."
    (root/'pretrained').mkdir(parents=True, exist_ok=True)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed); sd = getattr(torchvision.models, arch)(weights=None).state_dict()
    torch.save(sd, root/'pretrained'/f'{arch}.pth')
    return root/'pretrained'/f'{arch}.pth'


def _fake_ract_trees(root):
    _fake_gldv2(root)                  # 6 landmarks x 3 images; GLDv2-test: 2 queries, 6 index images, positives [0, 1], [2]
    for name in ('roxford5k', 'rparis6k'): _fake_revisited(root, name)
    _pretrained_file(root)
    return root


def test_ract_paper_scale_trains_and_evaluates(tmp_path, monkeypatch):
    "Notebooks 40-41 at paper scale: old R50 and new R50 (ours) from torchvision weights; GLDv2-test, ROxford, RParis."
    loaded = []
    real_load = T.load_pretrained
    def record_load(model, source):
        loaded.append((model.config.arch, str(source))); return real_load(model, source)
    monkeypatch.setattr(T, 'load_pretrained', record_load)
    with _context(tmp_path, _fake_ract_trees) as ctx:
        root = Path(ctx.data_root)
        weights = str(root/'pretrained'/'resnet50.pth')
        P = ExperimentParams(scale='paper', data_root=str(root), epochs=1, batch_size=4)
        specs = ract_specs(P, 'open-class', 'R50', ('ours',))
        old, new = specs['old'], specs['ours']
        assert set(specs) == {'old', 'ours'}
        assert (old.split, new.split) == ('gldv2-open-class-old', 'gldv2-open-class-new')
        assert all((s.arch, s.emb_dim, s.epochs, s.batch_size, s.augment, s.optimizer, s.warmup_epochs, s.pretrained) ==
                   ('resnet50', 512, 1, 4, True, 'adam', 0., weights) for s in (old, new))      # App. A.1, shortened
        assert all((s.pooling, s.head_bias) == ('gem', False) for s in (old, new))           # OpenCompatible's Resnet_GeM
        assert (old.compat, old.compat_views) == (None, 1)
        assert new.compat_views == 2 and new.compat.method == 'ra-comp' and new.compat.old == old and new.compat.tau == 0.05
        r101 = ract_specs(P, 'open-class', 'R101', ('ours',))['ours']                          # specs only: too slow on CPU
        assert (r101.arch, r101.pretrained, r101.compat.old.arch) == ('resnet101', str(root/'pretrained'/'resnet101.pth'), 'resnet50')

        # (a) both models train one epoch at paper scale; (b) both bodies start from the weights file
        arts = {k: cached_backbone(s) for k, s in specs.items()}
        assert all(len(a['history']) == 1 and np.isfinite(a['history'][0]['loss']) for a in arts.values())
        assert loaded == [('resnet50', weights)]*2                                             # old, then new
        file_sd = torch.load(weights, weights_only=True)
        for k, s in specs.items():
            body = get_backbone(s, device='cpu').backbone.state_dict()
            assert 'fc.weight' not in body
            for w in ('conv1.weight', 'layer4.2.conv3.weight'):   # a few Adam steps of lr 0.01*4/480 from the file's weights
                assert torch.allclose(body[w], file_sd[w], atol=2e-3), (k, w)
                assert not torch.allclose(body[w], file_sd[w], atol=1e-7), (k, w)              # ... and it did train
        fresh = torchvision.models.resnet50(weights=None).state_dict()['conv1.weight']
        assert not torch.allclose(fresh, file_sd['conv1.weight'], atol=2e-3)                   # a random start would fail above

        # (c) the three test sets, the curves of the new model and the old system's point
        n_gallery = {'GLDv2-test': 6, 'ROxford': 5, 'RParis': 5}
        relevance = {'GLDv2-test': [[0, 1], [2]], 'ROxford': [[0, 1], [3]], 'RParis': [[0, 1], [3]]}
        junk = {'GLDv2-test': [[], []], 'ROxford': [[2], []], 'RParis': [[2], []]}
        order = np.random.default_rng(0).permutation(6)
        for test, (split, metric) in RACT_TESTS.items():
            E = ract_eval(specs, test, P)
            n = n_gallery[test]
            assert E.metric == metric and len(E.query_labels) == 2 and len(E.gallery_labels) == n
            assert all(F[k].shape == (m, 512) for F, m in ((E.query, 2), (E.gallery, n)) for k in specs)
            assert not torch.equal(E.gallery['old'], E.gallery['ours'])
            assert [p.tolist() for p, _ in E.relevance] == relevance[test] and [j.tolist() for _, j in E.relevance] == junk[test]
            assert E.old_hits.dtype == bool and E.old_hits.shape == (2,)
            assert np.array_equal(E.old_hits, retrieval_hits(E.query['old'], E.gallery['old'], E.query_labels, E.gallery_labels, 1,
                                                             'cosine', False, E.relevance))   # one search gives the hits and the star
            c = ract_curve(E, 'ours', order[order < n])
            assert isinstance(c, pd.DataFrame) and list(c.columns) == [metric, 'NFR@1']
            assert np.allclose(c.index, RACT_FRACTIONS) and len(c) == 11 and c.index[0] == 0 and c.index[-1] == 1
            assert np.isfinite(c.to_numpy()).all() and ((c >= 0) & (c <= 100)).all().all()
            new_new = retrieval_metrics(E.query['ours'], E.gallery['ours'], metrics=(metric,), distance='cosine',
                                        query_is_gallery=False, relevance=E.relevance)[metric]
            assert np.isclose(c[metric].iloc[-1], new_new)                                      # 100 % backfilled: new/new
            mixed = retrieval_metrics(E.query['ours'], E.gallery['old'], metrics=(metric,), distance='cosine',
                                      query_is_gallery=False, relevance=E.relevance)[metric]
            assert np.isclose(c[metric].iloc[0], mixed)                                         # 0 %: new queries, old gallery
            old_old = ract_old_point(E)
            assert 0 <= old_old <= 100 and np.isclose(old_old, retrieval_metrics(
                E.query['old'], E.gallery['old'], metrics=(metric,), distance='cosine', query_is_gallery=False,
                relevance=E.relevance)[metric])
            if test == 'GLDv2-test': assert E.hard_relevance is None
            else:   # the hard protocol: hard images positive, junk and easy ones ignored; the labelled readings of Table 2's cells
                assert [p.tolist() for p, _ in E.hard_relevance] == [[1], []] and [j.tolist() for _, j in E.hard_relevance] == [[2, 0], [3]]
                rd = ract_readings(E, ('ours',))
                assert list(rd) == ['old', 'ours'] and all(list(v) == list(RACT_READINGS) and all(0 <= x <= 100 for x in v.values()) for v in rd.values())
        assert loaded == [('resnet50', weights)]*2                                             # evaluation trained nothing more
        for name in ('roxford5k', 'rparis6k'):   # revisitop crops the queries to their boxes; gallery images stay whole
            q, g = (get_split(name, part, 'paper', str(root)) for part in ('query', 'gallery'))
            assert q.image(0).size == (20, 16) and g.boxes == [None]*len(g) and g.image(0).size != (20, 16)


def test_ract_spec_takes_the_epoch_and_batch_overrides(tmp_path):
    "`ExperimentParams(epochs=1, batch_size=4)` shortens RACT's recipe as it does every other paper's (papermill parameters)."
    P = ExperimentParams(scale='paper', data_root=str(tmp_path), epochs=1, batch_size=4)
    specs = ract_specs(P, 'open-class', 'R50', ('ours',))
    assert all((s.epochs, s.batch_size, s.warmup_epochs, s.milestones) == (1, 4, 0., (1/3, 2/3)) for s in specs.values())
    full = ract_specs(ExperimentParams(scale='paper', data_root=str(tmp_path)), 'open-class', 'R101', ('ours',))
    assert (full['old'].epochs, full['old'].batch_size, full['ours'].batch_size) == (90, 480, 384)   # App. A.1: 6 x 80, 6 x 64


# ---- 2. evaluation at GLDv2-test's size in bounded memory ------------------------------------------------------------

GLDV2_TEST = dict(m=750, n=761_757)   # GLDv2-test: its 750 Private queries (RACT sec. 5.1), 761,757 index images
MEASURE = textwrap.dedent('''
    import json, resource, sys, time
    import numpy as np, torch
    torch.set_num_threads(1)
    from compatrepro.backfill import backfill_curve, random_order
    from compatrepro.retrieval import block_rows
    m, n, d = (int(a) for a in sys.argv[1:4])
    rss = lambda: int(open('/proc/self/statm').read().split()[1])*resource.getpagesize()
    maxrss = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss*1024   # Linux: KiB
    rng = np.random.default_rng(0)
    q = rng.standard_normal((m, d), dtype=np.float32)
    go, gn = np.empty((n, d), np.float32), np.empty((n, d), np.float32)     # filled in chunks: no big temporaries
    for s in range(0, n, 1 << 16):
        e = min(s + (1 << 16), n)
        go[s:e] = rng.standard_normal((e - s, d), dtype=np.float32)
        gn[s:e] = go[s:e] + 0.01*rng.standard_normal((e - s, d), dtype=np.float32)   # the new model: close to the old
    pos = rng.permutation(n)[:3*m].reshape(m, 3)            # 3 positives per query, planted as its nearest items
    go[pos] = q[:, None] + 0.05*rng.standard_normal((m, 3, d), dtype=np.float32)
    gn[pos] = go[pos] + 0.01*rng.standard_normal((m, 3, d), dtype=np.float32)
    broken = np.arange(m) < m//3                               # the new model throws these queries' positives to the far end
    gn[pos[broken]] = -q[broken][:, None] + 0.05*rng.standard_normal((int(broken.sum()), 3, d), dtype=np.float32)
    order = random_order(n, 0)
    relevance = [(p, np.array([], np.int64)) for p in pos]     # as ract_eval builds GLDv2-test's from its solution
    before, peak_before = rss(), maxrss()
    t = time.time()
    c = backfill_curve(q, go, gn, None, None, order, [0.5], metrics=('mAP@100', 'NFR@1'), distance='cosine',
                       query_is_gallery=False, reference_hits=np.ones(m, bool), relevance=relevance)
    seconds, peak = time.time() - t, maxrss()
    new = np.zeros(n, bool); new[order[:n//2]] = True          # floor(0.5 n) items of the order are new
    near = np.where(broken, 3 - new[pos].sum(1), 3)            # positives still at the top of the query's ranking
    print(json.dumps(dict(mAP=float(c['mAP@100'].iloc[0]), NFR=float(c['NFR@1'].iloc[0]), want_mAP=100*float((near/3).mean()),
                          want_NFR=100*float((near == 0).mean()), attrs=c.attrs, seconds=seconds, before=before,
                          peak_before=peak_before, peak=peak, block=block_rows(m, n, 64), features=go.nbytes + gn.nbytes + q.nbytes)))
''')


def test_backfill_curve_at_gldv2_test_size_in_bounded_memory():
    """One point of a RACT curve (mAP@100, NFR@1) with GLDv2-test's 750 queries x 761,757 index images, d = 128.
    Exact values: every query's 3 positives are planted as its nearest items in the old gallery and stay so in the new
    one, except for a third of the queries, whose new positives point away from the query (ranked last): at 50 % such
    a query keeps the AP@100 of its old positives (k/3) and loses its top-1 when all three were backfilled.
    Memory: the features stay outside (the baseline); `backfill_curve` holds l2-normalised copies of them (cosine) and a
    query block's distances, sized by `block_rows`' budget (COMPATREPRO_BLOCK_BYTES, 128 MiB): far below one dense
    750 x 761,757 float32 distance matrix (2.1 GiB), let alone the old and the new one together."""
    m, n, d = GLDV2_TEST['m'], GLDV2_TEST['n'], 128
    env = {k: v for k, v in os.environ.items() if k != 'COMPATREPRO_BLOCK_BYTES'} | {'COMPATREPRO_PROGRESS': '0'}
    out = subprocess.run([sys.executable, '-c', MEASURE, str(m), str(n), str(d)], capture_output=True, text=True, env=env, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    r = json.loads(out.stdout.strip().splitlines()[-1])
    gib = 2**30
    extra = r['peak'] - r['before']        # peak RSS during the call above the RSS with the inputs built (an upper bound)
    print(f"backfill_curve at {m} x {n}, d={d}: {r['seconds']:.1f} s, {r['block']} query rows a block, features "
          f"{r['features']/gib:.2f} GiB, peak RSS {r['peak']/gib:.2f} GiB, {extra/gib:.2f} GiB above the inputs")
    assert r['attrs']['n'] == n and r['attrs']['n_queries'] == m and r['attrs']['n_skipped'] == 0
    assert r['attrs']['n_backfilled'] == [n//2]
    assert np.isclose(r['mAP'], r['want_mAP']) and 75 < r['mAP'] < 90                 # ~ 100 - 100/3 * 1/2
    assert np.isclose(r['NFR'], r['want_NFR']) and 2 < r['NFR'] < 7                     # ~ 100/3 * 1/8
    normalised = r['features']                                 # the cosine copies of the query and both galleries
    assert extra < normalised + 1*gib, f"{extra/gib:.2f} GiB above the inputs"
    assert extra < m*n*4                                       # not even one dense float32 distance matrix
