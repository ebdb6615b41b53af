"""Does the stand-in's SimCLR side-information model learn with the augmentations SimCLR needs?

`27_fastfill_side_info` trains FastFill's side-information model (App. B.2: SimCLR on the old model's training split,
`simclr_spec`) and finds it retrieving at about an untrained network's level. At paper scale the trainer applies
SimCLR's augmentation (`simclr_transform`: a random resized crop, colour jitter, grey, blur); at the stand-in's scales
the two views come from the stand-in's own training augmentation (`GlyphDataset.augment`: a small affine and a
brightness jitter), which leaves every view of a glyph its colours: the shortcut contrastive learning is known to take
(SimCLR sec. 3: without colour distortion, the colour histograms alone tell the views apart from the others).

This screen trains 27's SimCLR spec (seed, split, epochs, temperature: the notebook's) with each augmentation of the
two views, one lever added at a time, SimCLR's own (Chen et al. 2020, App. A) on the 32-pixel tensors:

- 'stand-in': the stand-in's own views (the library's until 2026-11-30);
- 'crop': a random resized crop (scale 0.2-1, aspect 3/4-4/3) with the stand-in's small rotation;
- 'crop+colour': and colour jitter (brightness, contrast, saturation 0.4, hue 0.1, p = 0.8) and grey (p = 0.2);
- 'crop+colour+blur': and a Gaussian blur (3x3, sigma 0.1-2, p = 0.5), SimCLR's full set;
- then levers beside the augmentation: crops of at least half the image (a 32-pixel glyph cropped to a fifth of
  its area may lose the glyph), four times the epochs (SimCLR trains for hundreds of epochs; 27's spec has 24), both,
  and no crop at all: the stand-in's small affine with SimCLR's colour and blur ('affine+colour+blur').

'affine+colour+blur (no crop), 4x the epochs' is the library's SimCLR on the stand-in since 2026-11-30
(`compatrepro.train.standin_simclr`, twice the recipe's epochs in `simclr_spec`): 27's own model, from the cache.

Each model is judged as 27 judges it: retrieval of its features on ImageNet-1k's evaluation images (query = gallery,
top-1 and mAP) against an untrained network of the same architecture and against chance; the aim (issue: "at least
10 times chance") is read off, not tuned for. It also records the NT-Xent loss of the first and last epochs.

    python benchmarks/simclr_screen.py --seeds 0 --out benchmarks/simclr_screen.csv

The augmentations other than the library's are this process's only (`GlyphDataset.augment` replaced, and
`standin_simclr` made the identity, while the variant trains), and a variant's model has the library's spec: each
variant trains in a cache of its own (`--cache-root`)."""

import math, sys

import pandas as pd
import torch
import torch.nn.functional as F

from probe_args import apply_probe_arguments, probe_arguments, run_variants, variant_arguments

FULL = ('crop', 'colour', 'blur')
# name: (levers, the crop's smallest share of the image, epochs as a multiple of 27's)
VARIANTS = {'stand-in': ((), 0.2, 1), 'crop': (('crop',), 0.2, 1), 'crop+colour': (('crop', 'colour'), 0.2, 1),
            'crop+colour+blur': (FULL, 0.2, 1), 'crop+colour+blur, crops of at least half': (FULL, 0.5, 1),
            'crop+colour+blur, 4x the epochs': (FULL, 0.2, 4),
            'crop+colour+blur, crops of at least half, 4x the epochs': (FULL, 0.5, 4),
            'affine+colour+blur (no crop)': (('affine', 'colour', 'blur'), 0.2, 1),
            'affine+colour+blur (no crop), 4x the epochs': (('affine', 'colour', 'blur'), 0.2, 4)}
LIBRARY_AUGMENT = []   # the library's GlyphDataset.augment, kept when a variant replaces it
LIBRARY = 'affine+colour+blur (no crop), 4x the epochs'   # the library's views and epochs since 2026-11-30 (27's own)


def simclr_views(ds, levers, x: torch.Tensor, generator=None, min_area: float = 0.2) -> torch.Tensor:
    """uint8 batch [B, 3, H, W] -> one SimCLR view per image, normalised as the dataset normalises: each lever of
    `levers` ('crop', 'colour', 'blur'; 'affine': the stand-in's own small affine and brightness jitter instead of a
    crop) with its own random parameters per image; a crop keeps at least `min_area` of
    the image (SimCLR's 0.08 is for 224-pixel photographs; 0.2 is the usual choice on 32-pixel CIFAR)."""
    B, dev = x.shape[0], x.device
    u = lambda *s: torch.rand(*s, generator=generator, device=generator.device if generator else dev).to(dev)
    y = x.float()/255
    if 'affine' in levers:
        y = LIBRARY_AUGMENT[0](ds, x, generator)*ds.std.to(dev) + ds.mean.to(dev)
    if 'crop' in levers:   # random resized crop as an affine map of the output grid onto a part of the image
        area = min_area + (1 - min_area)*u(B)
        ratio = torch.exp(math.log(3/4) + (math.log(4/3) - math.log(3/4))*u(B))
        w, h = (area*ratio).sqrt().clamp(max=1.), (area/ratio).sqrt().clamp(max=1.)
        cx, cy = (1 - w)*(2*u(B) - 1), (1 - h)*(2*u(B) - 1)
        ang = (2*u(B) - 1)*math.radians(ds.aug['rotation'])
        A = torch.stack([torch.stack([w*torch.cos(ang), -h*torch.sin(ang), cx], 1),
                         torch.stack([w*torch.sin(ang), h*torch.cos(ang), cy], 1)], 1)
        y = F.grid_sample(y, F.affine_grid(A, list(y.shape), align_corners=False), align_corners=False,
                          padding_mode='border')
    from compatrepro.train import simclr_distort
    y = simclr_distort(y, generator, colour='colour' in levers, blur='blur' in levers)
    return (y.clamp(0, 1) - ds.mean.to(dev))/ds.std.to(dev)


def use_views(levers, min_area: float) -> None:
    """This process's stand-in datasets make SimCLR's views with `levers` (`simclr_views`; none: the stand-in's own
    augmentation), in place of the library's (`compatrepro.train.standin_simclr`)."""
    from compatrepro import glyphs, train
    train.standin_simclr = lambda ds: ds
    if not levers: return
    if not LIBRARY_AUGMENT: LIBRARY_AUGMENT.append(glyphs.GlyphDataset.augment)
    glyphs.GlyphDataset.augment = lambda self, x, generator=None: simclr_views(self, levers, x, generator, min_area)


def measure(seed: int, variant: str, scale: str) -> dict:
    "The variant's side model (trained now or from its cache), its retrieval, the untrained network's, chance."
    from compatrepro.runtime import RunContext, set_context
    from compatrepro.specs import STANDIN_RECIPES, simclr_spec
    from compatrepro.pipeline import cached_backbone, get_features
    from compatrepro.metrics import retrieval_metrics
    from compatrepro.models import EmbeddingModel
    from compatrepro.features import extract_features
    from compatrepro.data import get_split
    from compatrepro.train import model_input

    set_context(RunContext.from_env(device='cpu', progress=False))
    # 1x: the epochs of 27's spec when this screen was made, half the old model's; the library's variant: its own
    base = max(1, STANDIN_RECIPES[scale][0]['epochs']//2)
    spec = simclr_spec('imagenet-500', scale, seed, **({} if variant == LIBRARY else {'epochs': base*VARIANTS[variant][2]}))
    art = cached_backbone(spec)
    f = get_features(spec, 'imagenet-1k', 'eval')
    y = f['labels']
    m = retrieval_metrics(f['features'], f['features'], y, y, metrics=('top1', 'mAP'))
    torch.manual_seed(seed)
    untrained = EmbeddingModel(spec.arch, spec.emb_dim, range(2), scale=scale, width=spec.width).eval()
    fu = extract_features(untrained, model_input(get_split('imagenet-1k', 'eval', scale), spec), device='cpu',
                          augment=False, show_progress=False)['features']
    mu = retrieval_metrics(fu, fu, y, y, metrics=('top1', 'mAP'))
    loss = [h['loss'] for h in art['history']]
    return dict(seed=seed, variant=variant, epochs=spec.epochs, top1=m['top1'], mAP=m['mAP'],
                untrained_top1=mu['top1'], untrained_mAP=mu['mAP'], chance=100/len(y.unique()),
                first_loss=loss[0], last_loss=loss[-1], train_seconds=art.get('train_seconds', float('nan')))


def summary(path: str) -> str:
    "The table docs/standin_regime.md shows: per variant, the means over seeds, and top-1 in multiples of chance."
    d = pd.read_csv(path)
    out = ['| augmentation of the two views | seeds | top-1 / mAP | untrained network | top-1 / chance | '
           'NT-Xent loss, first -> last epoch |', '|---|---|---|---|---|---|']
    for v, g in d.groupby('variant', sort=False):
        out.append(f"| {v} | {','.join(map(str, sorted(g.seed)))} | {g.top1.mean():.2f} / {g.mAP.mean():.2f} | "
                   f"{g.untrained_top1.mean():.2f} / {g.untrained_mAP.mean():.2f} | {(g.top1/g.chance).mean():.1f} | "
                   f"{g.first_loss.mean():.3f} -> {g.last_loss.mean():.3f} |")
    return '\n'.join(out)


def main(argv=None):
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == '--summary':
        print(summary(sys.argv[2])); return
    ap = variant_arguments(probe_arguments(__doc__, 'benchmarks/simclr_screen.csv'), VARIANTS, '/tmp/simclr_screen')
    a = ap.parse_args(argv)
    apply_probe_arguments(a)
    run_variants(a, LIBRARY, lambda v: v != LIBRARY and use_views(*VARIANTS[v][:2]), measure, summary)


if __name__ == '__main__':
    main()
