"""Do the person and face families' models learn identities that carry over to unseen ones? The identity lever.

BCT's IMDB-Face stand-in learned its 120 identities and carried little of it to IJB-C's unseen subjects; four times the
identities at the same number of images (480 of 25 instead of 120 of 100) made every model retrieve the unseen
subjects better (`bct_face_probe.py --identities`, docs/suspects.md). This probe asks the same of the other families
whose test identities no model trains on, each with the split pair of the notebook that trains it:

- VGGFace2 (`23_fastfill_vggface2`): old on `vggface2-863` (the first tenth of the training identities, as many
  optimizer steps as the new model), new on `vggface2-8631`, ml-fct's embedding; evaluated on VGGFace2's test
  identities (the `eval` images, query = gallery, leave-one-out);
- Market-1501 (`33_bct_market`, `54_rm_market`): old on `market-1501-375` (half the training identities), new on
  `market-1501`; evaluated on the test identities' query and gallery images (same-camera matches junk, as 33 does);
- GLDv2 (`41_ract_hot_refresh`, `56_rm_open_gldv2`): RACT's expansion allocation, the old R50 on `gldv2-expansion-old`
  (30 % of the images), the independent new R101 on `gldv2-expansion-new` (all of them), each `ract_spec`'s (fine-tuned
  from the stand-in's pre-trained model); evaluated on GLDv2-test (landmarks no model trains on, the other evaluation
  images distractors) by its metric, mAP@100; `--epochs` gives both models that many (the other levers are not wired).

Each is judged by the old and new models' own retrieval (cosine) of the unseen identities: top-1 and mAP. The
stand-in's counts are the default; `--identities N --images M` gives the family N training identities of M images each
(its test identities as many as the stand-in's), in a cache of its own (a stand-in knob is not in the models' cache
keys):

    python benchmarks/family_identities.py --family vggface2 --seeds 0 1 2 --cache ~/.cache/compatrepro \\
        --out benchmarks/family_identities/vggface2-96x100.csv
    python benchmarks/family_identities.py --family vggface2 --identities 384 --images 25 --cache /tmp/vgg-384 \\
        --seeds 0 1 2 --out benchmarks/family_identities/vggface2-384x25.csv

A margin head's recipe (ArcFace on VGGFace2) is screened with `--head-scale`, `--head-margin`, `--lr` and `--epochs`,
given to both models of the family (they are spec fields, so such models share the family's cache):

    python benchmarks/family_identities.py --family vggface2 --identities 384 --images 25 --cache /tmp/vgg-384 \\
        --head-scale 32 --out benchmarks/family_identities/vggface2-384x25-s32.csv

`--bct` adds BCT's new-β model and the compatibility tests of both new models against the old one (their queries
against the old model's gallery: BCT's eq. 2 holds where `new-β / old` is above `old`):

    python benchmarks/family_identities.py --family market1501 --bct --seeds 0 1 2 --cache ~/.cache/compatrepro \\
        --out /tmp/market-60x100-bct.csv
    python benchmarks/family_identities.py --family market1501 --bct --identities 240 --images 25 --seeds 0 1 2 \\
        --cache /tmp/market-240 --out /tmp/market-240x25-bct.csv

(`benchmarks/bct_market_identities.csv` holds the two, as docs/suspects.md shows them).

`--summary FILE...` prints the table docs/standin_regime.md shows."""

import sys

import pandas as pd

from probe_args import apply_identity_arguments, apply_probe_arguments, identity_arguments, probe_arguments, probe_seeds

# family: (old split, new split, the specs' keyword arguments, as the notebook gives them)
FAMILIES = {'vggface2': ('vggface2-863', 'vggface2-8631', dict(old_steps_like_new=True, embedding='mlfct')),
            'market1501': ('market-1501-375', 'market-1501', {}),
            'gldv2': ('gldv2-expansion-old', 'gldv2-expansion-new', {})}


def ract_test_retrieval(spec, test: str, gallery_spec=None) -> dict:
    """top-1 and `test`'s metric (`RACT_TESTS`: mAP@100 on GLDv2-test, rmAP on ROxford and RParis) of `spec`'s
    queries against `gallery_spec`'s gallery (default: its own), as {'top1', 'metric', 'value'}."""
    from compatrepro.data import get_split
    from compatrepro.metrics import query_relevance, retrieval_metrics
    from compatrepro.pipeline import get_features
    from compatrepro.ract import RACT_TESTS

    split, metric = RACT_TESTS[test]
    q, g = get_features(spec, split, 'query'), get_features(gallery_spec or spec, split, 'gallery')
    Q = get_split(split, 'query', spec.scale, None, seed=spec.data_seed)
    r = retrieval_metrics(q['features'], g['features'], q['labels'], g['labels'], metrics=(metric, 'top1'),
                          distance='cosine', query_is_gallery=False, relevance=query_relevance(Q))
    return {'top1': r['top1'], 'metric': metric, 'value': r[metric]}


def unseen_retrieval(spec, family: str, gallery_spec=None) -> dict:
    """top-1 and mAP (cosine) of `spec`'s features on `family`'s test identities, no model's training identities;
    with `gallery_spec`, its features are the gallery's (a compatibility test, BCT's eq. 2: `spec` embeds the queries)."""
    from compatrepro.metrics import market_relevance, retrieval_metrics
    from compatrepro.pipeline import get_features
    from compatrepro.data import get_split

    metrics = ('top1', 'mAP')
    new_split = FAMILIES[family][1]
    gallery_spec = gallery_spec or spec
    if family == 'gldv2':
        r = ract_test_retrieval(spec, 'GLDv2-test', gallery_spec)
        return {'top1': r['top1'], 'mAP': r['value']}
    if family == 'vggface2':
        f, fg = get_features(spec, new_split, 'eval'), get_features(gallery_spec, new_split, 'eval')
        r = retrieval_metrics(f['features'], fg['features'], f['labels'], f['labels'], metrics=metrics,
                              distance='cosine')
    else:
        q, g = get_features(spec, new_split, 'query'), get_features(gallery_spec, new_split, 'gallery')
        Q, G = (get_split(new_split, part, spec.scale, None, seed=spec.data_seed) for part in ('query', 'gallery'))
        r = retrieval_metrics(q['features'], g['features'], metrics=metrics, distance='cosine', query_is_gallery=False,
                              relevance=market_relevance(Q.labels, Q.cameras, G.labels, G.cameras))
    return {m: r[m] for m in metrics}


RECIPE_LEVERS = ('head_scale', 'head_margin', 'lr', 'epochs')   # the options that change the family's recipe


def recipe_name(over: dict) -> str:
    "The recipe column: 'library', or the changed fields ('head_scale=32.0, lr=0.05')."
    return ', '.join(f'{k}={v}' for k, v in over.items()) or 'library'


def probe_seed(seed: int, scale: str, family: str, over: dict | None = None, baselines=()) -> list:
    """The old and the new model of `family`'s update on `seed` (trained now or from the cache), on unseen identities;
    `over`: spec fields of both models that differ from the notebook's (`RECIPE_LEVERS`); `baselines`: compatible new
    models too (`updates.BASELINES`, 'new-β' for BCT), and every new model's compatibility test against the old one
    ('new-β / old': its queries against the old model's gallery, BCT's eq. 2)."""
    from compatrepro.pipeline import cached_backbone
    from compatrepro.runtime import ExperimentParams, RunContext, set_context
    from compatrepro.standin import family_images, family_sizes, standin_config
    from compatrepro.updates import update_specs

    set_context(RunContext.from_env(device='cpu', progress=False))
    old_split, new_split, kw = FAMILIES[family]
    over, P = over or {}, ExperimentParams(seed=seed, scale=scale, device='cpu')
    if family == 'gldv2':   # RACT's schedule has no warm-up, so --epochs is the one lever wired
        from compatrepro.ract import ract_spec
        if set(over) - {'epochs'} or baselines:
            raise SystemExit("gldv2: of the recipe levers only --epochs is wired to RACT's models, and --bct is not")
        specs = {'old': ract_spec(P, old_split, 'R50', **over), 'new': ract_spec(P, new_split, 'R101', **over)}
    else:
        if 'epochs' in over:   # the warm-up keeps its share of the schedule, as the doubling test's
            recipe = update_specs(P, old_split, new_split, (), **kw)['new']
            kw = kw | {'warmup_epochs': recipe.warmup_epochs * over['epochs'] / recipe.epochs}
        specs = update_specs(P, old_split, new_split, baselines, **kw, **over)
    cfg = standin_config(scale)
    trained, unseen = family_sizes(cfg)[family]
    rows = []
    for name, spec in specs.items():
        art = cached_backbone(spec)
        loss = [h['loss'] for h in art['history']]   # a training that stalls shows here
        rows.append(dict(family=family, identities=trained, images=family_images(cfg, family)[0], unseen_identities=unseen,
                         recipe=recipe_name(over), seed=seed, model=name, epochs=spec.epochs,
                         **unseen_retrieval(spec, family), first_loss=loss[0], last_loss=loss[-1],
                         train_seconds=art.get('train_seconds', float('nan'))))
    for name in [k for k in specs if k != 'old' and baselines]:   # cross-tests: `name`'s queries, the old gallery
        rows.append(dict(rows[0], model=f'{name} / old', epochs=specs[name].epochs, first_loss=float('nan'),
                         last_loss=float('nan'), train_seconds=0.,
                         **unseen_retrieval(specs[name], family, gallery_spec=specs['old'])))
    return rows


def summary(paths) -> str:
    """Per family, stand-in and model: top-1 and mAP on unseen identities (the mean over seeds, and per seed: a model
    that fails to train on one seed shows), and the training loss of the first and last epoch."""
    d = pd.concat([pd.read_csv(p) for p in paths], ignore_index=True)
    d['recipe'] = d['recipe'].fillna('library') if 'recipe' in d else 'library'   # CSVs from before the levers
    # the stand-in's counts first, then the library's recipe, then the levers as the files give them
    d = d.assign(lever=d['recipe'] != 'library').sort_values(['family', 'identities', 'lever'], kind='stable')
    out = ['| family | training identities x images | recipe | model | seeds | unseen top-1 (per seed) | '
           'unseen mAP (per seed) | loss, first -> last epoch | train min |', '|---|---|---|---|---|---|---|---|---|']
    for (f, n, m, r, model), g in d.groupby(['family', 'identities', 'images', 'recipe', 'model'], sort=False):
        g = g.sort_values('seed')
        out.append(f"| {f} | {n} x {m} | {r} | {model} | {','.join(map(str, g.seed))} | "
                   f"{g.top1.mean():.1f} ({'/'.join(f'{x:.1f}' for x in g.top1)}) | "
                   f"{g.mAP.mean():.1f} ({'/'.join(f'{x:.1f}' for x in g.mAP)}) | "
                   + (f"{g.first_loss.mean():.2f} -> {g.last_loss.mean():.2f} | {g.train_seconds.mean()/60:.1f} |"
                      if g.first_loss.notna().any() else '| |'))   # a compatibility test trains nothing
    return '\n'.join(out)


def main(argv=None):
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == '--summary':
        print(summary(sys.argv[2:]))
        return
    ap = probe_arguments(__doc__, 'benchmarks/family_identities.csv')
    ap.add_argument('--family', required=True, choices=list(FAMILIES))
    ap.add_argument('--head-scale', type=float, help="the margin head's scale s (default: the family's recipe)")
    ap.add_argument('--head-margin', type=float, help="the margin head's margin m (default: the family's recipe)")
    ap.add_argument('--lr', type=float, help="the learning rate (default: the family's recipe)")
    ap.add_argument('--epochs', type=int, help="the new model's epochs (VGGFace2's old model: as many steps)")
    ap.add_argument('--bct', action='store_true',
                    help="also BCT's new-β model and the compatibility tests (new / old, new-β / old): BCT's eq. 2")
    a = identity_arguments(ap, "the family's").parse_args(argv)
    apply_probe_arguments(a)
    apply_identity_arguments(ap, a, a.family, '--identities 384 --images 25')
    probe_seeds(a, probe_seed, a.family, {k: getattr(a, k) for k in RECIPE_LEVERS if getattr(a, k) is not None},
                ('new-β',) if a.bct else ())
    print(summary([a.out]))


if __name__ == '__main__':
    main()
