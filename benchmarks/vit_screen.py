"""Does RM's stand-in ViT learn with the small-data ViT levers?

`52_rm_cifar`'s heterogeneous upgrade ResNet -> ViT (Figure 7b) trains the stand-in's ViT (`05_models`: 6 layers of
width 192, 8-pixel patches, so a 32-pixel glyph is 16 tokens) with the stand-in's transformer recipe (`06a_specs`:
Adam at 2e-4, a 2-epoch warm-up, 15 epochs), and its new model retrieves at 6.9-8.6 % top-1 on CIFAR-100's stand-in
where the old ResNet retrieves at 67-70 %: no upgrade. The levers known to make a ViT learn from little data (Dosovitskiy
et al. sec. 4; "ViT for small datasets", Lee et al. 2021; DeiT's recipe, Touvron et al. 2021) are screened one at a
time on 52's new spec (seed, split, head, epochs: the notebook's), each judged as 52 judges the new model (retrieval of
its features on CIFAR-100's evaluation images, query = gallery, top-1 and mAP; Euclidean distance where 52 uses
cosine, so the recipe's rows differ from 52's records by up to 0.2 point) beside the old model's:

- 'recipe': the library's (52's own model, from the cache);
- 'lr 1e-3': five times the learning rate (DeiT's 5e-4 per 512 images, at the recipe's batch), the recipe's warm-up;
- 'patch 4': 4-pixel patches, 64 tokens of a glyph (the recipe's rate);
- 'patch 4, lr 1e-3': both;
- 'epochs x4': four times the recipe's epochs (60), its rate and warm-up: small-data ViTs train for hundreds of
  epochs (DeiT trains for 300);
- 'epochs x8': eight times (120), the doubling test of 'epochs x4';
- 'epochs x2': twice the recipe's epochs, the doubling test of today's recipe.

The variants multiply the library's epochs of the day (the `epochs` column says what each row trained): the rows of
'epochs x4' and 'epochs x8' were made when the recipe trained 15 epochs on the former images, before the recipe of
2026-11-30 (60 epochs, the harder images, the width-16 old ResNet), so 'epochs x2' on today's recipe trains the 120
epochs of the former 'epochs x8'.

    python benchmarks/vit_screen.py --seeds 0 --out benchmarks/vit_screen.csv

A variant other than the recipe changes the model this process builds (`make_backbone` replaced for 'vit_b_32') or
the spec's rate, and trains in a cache of its own (`--cache-root`): the patch size is not in a spec's cache key."""

import sys
from dataclasses import replace

import pandas as pd

from probe_args import apply_probe_arguments, probe_arguments, run_variants, variant_arguments

VARIANTS = {'recipe': dict(), 'lr 1e-3': dict(lr=1e-3), 'patch 4': dict(patch=4), 'patch 4, lr 1e-3': dict(patch=4, lr=1e-3),
            'epochs x4': dict(epochs_times=4), 'epochs x8': dict(epochs_times=8),
            'epochs x2': dict(epochs_times=2)}
RECIPE = 'recipe'


def use_patch(patch: int) -> None:
    "This process's stand-in ViT cuts a glyph into `patch`-pixel patches (the library's: 8)."
    import torch.nn as nn
    from torchvision.models.vision_transformer import VisionTransformer
    from compatrepro import models

    library = models.make_backbone
    def make_backbone(arch='resnet18', scale='paper', image_size=None, width=64, pooling='avg'):
        if arch != 'vit_b_32' or scale == 'paper': return library(arch, scale, image_size, width, pooling)
        m = VisionTransformer(image_size=image_size or 32, patch_size=patch, num_layers=6, num_heads=3,
                              hidden_dim=192, mlp_dim=768)
        w = m.hidden_dim; m.heads = nn.Identity()
        return m, w
    models.make_backbone = make_backbone
    models._skeleton.cache_clear()   # loads reuse a skeleton built per config: none of the library's ViT may stay


def measure(seed: int, variant: str, scale: str) -> dict:
    "The variant's ViT (trained now or from its cache) and the old model, by retrieval on CIFAR-100's evaluation set."
    from compatrepro.runtime import ExperimentParams, RunContext, set_context
    from compatrepro.rm import RM_DATASETS, rm_specs
    from compatrepro.pipeline import cached_backbone, get_features
    from compatrepro.metrics import retrieval_metrics

    set_context(RunContext.from_env(device='cpu', progress=False))
    P = ExperimentParams(seed=seed, scale=scale, device='cpu')
    specs = rm_specs(P, RM_DATASETS['CIFAR-100'], baselines=(), upgrade='vit')
    v = VARIANTS[variant]
    new = replace(specs['new'], lr=v.get('lr', specs['new'].lr),   # at the recipe's batch (lr_batch = batch)
                  epochs=specs['new'].epochs * v.get('epochs_times', 1))
    art = cached_backbone(new)
    row = dict(seed=seed, variant=variant, epochs=new.epochs, lr=new.lr)
    for name, s in (('new', new), ('old', specs['old'])):
        f = get_features(s, 'cifar-100', 'eval')
        m = retrieval_metrics(f['features'], f['features'], f['labels'], f['labels'], metrics=('top1', 'mAP'))
        row |= {f'{name}_top1': m['top1'], f'{name}_mAP': m['mAP']}
    loss = [h['loss'] for h in art['history']]
    return row | dict(first_loss=loss[0], last_loss=loss[-1], train_seconds=art.get('train_seconds', float('nan')))


def summary(path: str) -> str:
    "The table docs/standin_regime.md shows: per variant, the means over seeds, and the new model's lead on the old."
    d = pd.read_csv(path)
    out = ['| ViT variant | seeds | new: top-1 / mAP | old ResNet: top-1 / mAP | new minus old, top-1 | loss, first -> last '
           'epoch | train min |', '|---|---|---|---|---|---|---|']
    for v, g in d.groupby('variant', sort=False):
        out.append(f"| {v} | {','.join(map(str, sorted(g.seed)))} | {g.new_top1.mean():.1f} / {g.new_mAP.mean():.1f} | "
                   f"{g.old_top1.mean():.1f} / {g.old_mAP.mean():.1f} | {(g.new_top1 - g.old_top1).mean():+.1f} | "
                   f"{g.first_loss.mean():.2f} -> {g.last_loss.mean():.2f} | {g.train_seconds.mean()/60:.1f} |")
    return '\n'.join(out)


def main(argv=None):
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == '--summary':
        print(summary(sys.argv[2])); return
    ap = variant_arguments(probe_arguments(__doc__, 'benchmarks/vit_screen.csv'), VARIANTS, '/tmp/vit_screen')
    a = ap.parse_args(argv)
    apply_probe_arguments(a)
    # the patch last: it replaces the model this process builds
    run_variants(a, RECIPE, lambda v: 'patch' in VARIANTS[v] and use_patch(VARIANTS[v]['patch']), measure, summary,
                 order=lambda v: ('patch' in VARIANTS[v], v != RECIPE))


if __name__ == '__main__':
    main()
