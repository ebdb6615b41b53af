"""Why FastFill's L_disc alone is far worse than L_l2 on the stand-in (21's Table 5), where the paper finds them close.

`21_fastfill_ablation` trains FastFill's transformation h on ImageNet's stand-in with each objective and measures the
backfilling curve in random order. On seeds 0-2, (L_disc)-random is 18.7-20.0 mAP~ below (L_l2)-random; the paper's
Table 5 has it 1.02 below. This script trains the same transformations (the notebook's specs, on the same training
features, nothing cached) and changes one thing at a time:

- the objective: L_l2, L_disc, L_l2 + L_disc (21's rows);
- L_disc's label smoothing: 0.1 (the recipe, FastFill sec. 4.2) against 0;
- the weights of the terms: L_l2 / d, which is ml-fct's criterion nn.MSELoss (a mean over the d dimensions too, where
  the package sums them: docs/conformance.md), alone and with L_disc, and L_l2 + L_disc / d;
- the evaluation distance: l2 (FastFill's) against cosine.

Per transformation it writes the loss terms its objective has, per epoch (means over the epoch's batches), and on
the evaluation images: mAP~ and top1~ of the random-order curve (21's measure), the mean L_l2 and
L_disc, kappa_new's top-1 on h(phi_old), the mean norms of h(phi_old) and phi_new, their mean cosine, and the share of
each one's variance that lies within the classes.

    python benchmarks/fastfill_disc_probe.py --seeds 0 1 2 --out benchmarks/fastfill_disc_probe

writes `<out>.csv` (one row per seed and variant) and `<out>_epochs.csv` (one row per seed, variant and epoch). The
backbones come from the artifact cache ($COMPATREPRO_CACHE; trained there first if missing: about 5 minutes a seed on
one thread); each transformation trains in about 20 s."""

from contextlib import contextmanager

import numpy as np, pandas as pd

from probe_args import apply_probe_arguments, probe_arguments

EVALS = ('l2', 'cosine')


def variants(d: int) -> dict:
    """{name: (objective, TransformationSpec overrides, weight of L_l2, weight of L_disc)}: each differs from a row of
    21 in one thing. ml-fct's criterion, nn.MSELoss, is L_l2 / d (docs/conformance.md)."""
    return {
        'L_l2': ('l2', {}, 1.0, 1.0),
        'L_disc': ('disc', {}, 1.0, 1.0),
        'L_l2+disc': ('l2+disc', {}, 1.0, 1.0),
        'L_disc, no label smoothing': ('disc', {'label_smoothing': 0.0}, 1.0, 1.0),
        'L_l2/d (ml-fct MSE)': ('l2', {}, 1.0 / d, 1.0),
        'L_l2/d + L_disc (ml-fct MSE)': ('l2+disc', {}, 1.0 / d, 1.0),
        'L_l2 + L_disc/d': ('l2+disc', {}, 1.0, 1.0 / d),
    }


@contextmanager
def recorded_terms(w_l2: float, w_disc: float, log: list):
    """While training: L_l2 and L_disc weighted by `w_l2` and `w_disc` in the objective, and every batch's mean L_l2 and
    L_disc logged unweighted (the package's loss functions, wrapped in `compatrepro.train`'s namespace only)."""
    import compatrepro.train as T

    losses = T.L

    class Wrapped:
        def __getattr__(self, k):
            return getattr(losses, k)

        def fct_l2_loss(self, *a, **k):
            v = losses.fct_l2_loss(*a, **k)
            log.append(('L_l2', float(v.detach().mean())))
            return w_l2 * v

        def label_smoothing_ce(self, *a, **k):
            v = losses.label_smoothing_ce(*a, **k)
            log.append(('L_disc', float(v.detach().mean())))
            return w_disc * v

    T.L = Wrapped()
    try:
        yield
    finally:
        T.L = losses


def within_class_share(x, labels) -> float:
    "The share of the features' variance within the classes (1: the classes overlap; 0: each collapsed to a point)."
    import torch

    centres = torch.stack([x[labels == c].mean(0) for c in labels.unique()])[
        torch.unique(labels, return_inverse=True)[1]
    ]
    return float((x - centres).pow(2).sum() / (x - x.mean(0)).pow(2).sum())


def probe_seed(seed: int, scale: str = 'tiny') -> tuple[list, list]:
    import torch
    from compatrepro.runtime import ExperimentParams, RunContext, set_context
    from compatrepro.pipeline import get_backbone, get_features
    from compatrepro.updates import update_specs, run_transformation_spec, UpdateSetup, update_curves, curve_tilde
    from compatrepro.pipeline import eval_features
    from compatrepro.train import train_transformation, apply_transformation
    from compatrepro.models import load_transformation
    from compatrepro.fastfill import alignment_losses
    from compatrepro.backfill import random_order

    P = ExperimentParams(seed=seed, scale=scale, device='cpu')
    set_context(RunContext.from_env(device='cpu', progress=False))
    old_spec, new_spec = update_specs(P, 'imagenet-500', 'imagenet-1k', [], embedding='mlfct').values()  # as 21
    F, labels = eval_features({'old': old_spec, 'new': new_spec}, 'imagenet-1k', 'eval')
    tr_old, tr_new = (get_features(s, 'imagenet-1k', 'train') for s in (old_spec, new_spec))
    head = get_backbone(new_spec, 'cpu').head
    order = random_order(len(labels), seed=P.seed)
    rows, epochs = [], []
    for name, (objective, overrides, w_l2, w) in variants(F['new'].shape[1]).items():
        spec = run_transformation_spec(old_spec, new_spec, objective, P, **overrides)
        log = []
        with recorded_terms(w_l2, w, log):
            art = train_transformation(
                spec, tr_old['features'], tr_new['features'], tr_old['labels'], head, show_progress=False
            )
        steps = len(log) // spec.epochs // (2 if objective == 'l2+disc' else 1)
        per_epoch = (
            pd.DataFrame(log, columns=['term', 'value'])
            .assign(epoch=lambda t: t.groupby('term').cumcount() // steps + 1)
            .groupby(['epoch', 'term'])['value']
            .mean()
            .unstack()
        )
        for e, r in per_epoch.iterrows():
            epochs.append(
                dict(seed=seed, variant=name, epoch=e, **r.to_dict(), objective_loss=art['history'][e - 1]['loss'])
            )
        h = apply_transformation(load_transformation(art['transformation']), F['old'])
        h = h[0] if isinstance(h, tuple) else h
        terms = alignment_losses(h, F['new'], head, labels, eps=spec.label_smoothing)
        with torch.no_grad():
            pred = head.class_ids[head(h).argmax(1)]
        base = dict(
            seed=seed,
            variant=name,
            objective=objective,
            l2_weight=w_l2,
            disc_weight=w,
            label_smoothing=spec.label_smoothing,
            epochs=spec.epochs,
            eval_L_l2=float(terms['L_l2'].mean()),
            eval_L_disc=float(terms['L_disc'].mean()),
            kappa_new_top1_on_h=float((pred == labels).float().mean() * 100),
            norm_h=float(h.norm(dim=1).mean()),
            norm_phi_new=float(F['new'].norm(dim=1).mean()),
            cos_h_phi_new=float(torch.nn.functional.cosine_similarity(h, F['new']).mean()),
            within_class_share_h=within_class_share(h, labels),
            within_class_share_phi_new=within_class_share(F['new'], labels),
        )
        for dist in EVALS:
            curves, stepc = update_curves(
                {name: UpdateSetup(F['new'], h, F['new'], order)}, labels, metrics=('top1', 'mAP'), distance=dist
            )
            rows.append(
                base
                | dict(
                    distance=dist,
                    **{f'{m}~': curve_tilde(name, curves[name], stepc, m) for m in ('top1', 'mAP')},
                    **{f'{m} at 0%': float(curves[name][m].iloc[0]) for m in ('top1', 'mAP')},
                )
            )
        print(f"seed {seed} {name}: mAP~ {rows[-2]['mAP~']:.2f} (l2), {rows[-1]['mAP~']:.2f} (cosine)", flush=True)
    return rows, epochs


def main(argv=None):
    a = probe_arguments(__doc__, 'benchmarks/fastfill_disc_probe', 'prefix of the two CSV files').parse_args(argv)
    apply_probe_arguments(a)
    rows, epochs = [], []
    for s in a.seeds:
        r, e = probe_seed(s, a.scale)
        rows += r
        epochs += e
        pd.DataFrame(rows).to_csv(f'{a.out}.csv', index=False, float_format='%.4f')  # each finished seed is kept
        pd.DataFrame(epochs).to_csv(f'{a.out}_epochs.csv', index=False, float_format='%.5f')


if __name__ == '__main__':
    main()
