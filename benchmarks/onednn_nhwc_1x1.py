"""oneDNN's strided 1x1 convolution, backward to the weights, on a channels-last input with few channels
(uxlfoundation/oneDNN#6035): why `runs_channels_last` keeps a CPU network with such a convolution over fewer than 16
channels in the default layout (`05_models`).

Each case runs in a child process, since the bug corrupts the heap: a conv2d(IC -> 2 IC, 1x1, stride 2) on
N x IC x HW x HW, its weight gradient channels-last in float32 against the default layout in float64, five times. It
prints the worst relative error, or how the child died. `--isa` caps oneDNN's instruction set (ONEDNN_MAX_CPU_ISA),
so that one machine shows both kernels with the bug: AVX2 (channel block 8) and AVX-512 (16).

    python benchmarks/onednn_nhwc_1x1.py                     # the default grid, about a minute
    python benchmarks/onednn_nhwc_1x1.py --isa AVX2 --ic 4 8 16
"""
import argparse, os, subprocess, sys

CHILD = r'''
import sys, torch
ic, hw, n, threads, layout = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
torch.set_num_threads(threads); torch.manual_seed(0)
x, w = torch.randn(n, ic, hw, hw), torch.randn(2 * ic, ic, 1, 1)
def grad(dtype, channels_last):
    xx, ww = x.to(dtype), w.to(dtype)
    if channels_last:
        xx, ww = xx.contiguous(memory_format=torch.channels_last), ww.contiguous(memory_format=torch.channels_last)
    ww = ww.clone().requires_grad_()
    torch.nn.functional.conv2d(xx, ww, stride=2).square().sum().backward()
    return ww.grad.double()
ref = grad(torch.float64, False)
print(max(float((grad(torch.float32, layout == 'nhwc') - ref).abs().max() / ref.abs().max()) for _ in range(5)))
'''


def case(ic: int, hw: int, n: int, threads: int, layout: str, isa: str, timeout: float) -> str:
    env = dict(os.environ) | ({'ONEDNN_MAX_CPU_ISA': isa} if isa != 'DEFAULT' else {})
    try:
        r = subprocess.run([sys.executable, '-c', CHILD, str(ic), str(hw), str(n), str(threads), layout], env=env,
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f'hung (> {timeout:.0f} s)'
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ['?'])[-1][:40]
        return f'died ({r.returncode}): {last}'
    err = float(r.stdout.split()[-1])
    return f'{err:.1e}' + ('  WRONG' if err > 1e-4 else '')


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--isa', nargs='+', default=['DEFAULT', 'AVX2'], help='ONEDNN_MAX_CPU_ISA values (DEFAULT: none)')
    ap.add_argument('--ic', nargs='+', type=int, default=[2, 4, 8, 12, 16, 32], help='input channels')
    ap.add_argument('--hw', nargs='+', type=int, default=[8, 32], help='input height = width')
    ap.add_argument('--n', type=int, default=64, help='batch size')
    ap.add_argument('--threads', type=int, default=1)
    ap.add_argument('--timeout', type=float, default=30.)
    a = ap.parse_args(argv)
    print(f'| ISA | IC | HW | default layout | channels-last |\n|---|---|---|---|---|')
    for isa in a.isa:
        for ic in a.ic:
            for hw in a.hw:
                row = [case(ic, hw, a.n, a.threads, layout, isa, a.timeout) for layout in ('nchw', 'nhwc')]
                print(f'| {isa} | {ic} | {hw} | ' + ' | '.join(row) + ' |', flush=True)


if __name__ == '__main__':
    main()
