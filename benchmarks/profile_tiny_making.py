"""Where the making of one tiny model goes: `train_backbone` on the stand-in's ImageNet-1k, on one thread, for a few
epochs of the recipe (`backbone_spec('imagenet-1k', 'tiny')`, with `--embedding mlfct` as FastFill's notebooks build
it), under cProfile. Prints the seconds of each epoch, the images per second, and the functions that took the most
time, so that the rate can be set beside `bench_tiny_train.py`'s training step:

    python benchmarks/profile_tiny_making.py --embedding linear --epochs 4
    python benchmarks/profile_tiny_making.py --embedding mlfct --epochs 4
    python benchmarks/profile_tiny_making.py --embedding mlfct --epochs 4 --channels-last

`--channels-last` trains the model in the channels-last layout, which `train_backbone` uses on a GPU only, by
patching this process's `compatrepro.train.initial_model` (a convolution with channels-last weights gives
channels-last outputs on the CPU): what it would save the tiny training.
"""
import argparse, cProfile, pstats, tempfile, time


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--embedding', default='linear', help="the spec's embedding: 'linear' (the recipe's) or 'mlfct'")
    ap.add_argument('--epochs', type=int, default=4, help='epochs to train (of the recipe\'s 48-epoch schedule)')
    ap.add_argument('--top', type=int, default=12, help='functions to list')
    ap.add_argument('--channels-last', action='store_true', help="train in the channels-last layout (this process only)")
    a = ap.parse_args()
    import torch
    torch.set_num_threads(1)
    from compatrepro.data import get_split
    from compatrepro.specs import backbone_spec
    import compatrepro.train as T
    from compatrepro.train import TrainingInterrupted, train_backbone
    if a.channels_last:
        made = T.initial_model
        T.initial_model = lambda spec, ds: made(spec, ds).to(memory_format=torch.channels_last)
    spec = backbone_spec('imagenet-1k', 'tiny', embedding=a.embedding)
    ds = get_split('imagenet-1k', 'train', 'tiny')
    with tempfile.TemporaryDirectory() as d:
        prof, t0 = cProfile.Profile(), time.perf_counter()
        prof.enable()
        try: train_backbone(spec, ds, device='cpu', stop_after=a.epochs, checkpoint=f'{d}/ck.pt', show_progress=False)
        except TrainingInterrupted: pass   # stopped after a.epochs of the schedule, as asked
        prof.disable()
        wall = time.perf_counter() - t0
        history = torch.load(f'{d}/ck.pt', weights_only=False)['history']
    per = [h['seconds'] for h in history]
    images = (len(ds)//spec.batch_size)*spec.batch_size
    print(f'{spec.arch} width {spec.width}, embedding {a.embedding}, {"channels-last, " if a.channels_last else ""}'
          f'{images} images an epoch, torch {torch.__version__}, 1 thread')
    print('seconds per epoch:', ' '.join(f'{s:.2f}' for s in per), f'| {images*len(per)/sum(per):.0f} images/s | '
          f'{spec.epochs} epochs would take {spec.epochs*sum(per)/len(per):.0f} s | wall {wall:.1f} s')
    pstats.Stats(prof).sort_stats('tottime').print_stats(a.top)


if __name__ == '__main__':
    main()
