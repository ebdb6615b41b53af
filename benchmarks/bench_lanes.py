"""Why CI runs the experiment notebooks in two lanes of one thread each: the throughput of tiny-scale training
(ResNet-18 steps at batch 64 on 32x32 images, as the tiny recipe) run as one process with all threads, against two
processes at once with one thread each. Prints steps per second of each and their ratio.

    python benchmarks/bench_lanes.py --steps 30
"""
import argparse, os, subprocess, sys, time

WORKER = r'''
import sys, time, torch
from compatrepro.models import make_backbone
torch.manual_seed(0)
net, _ = make_backbone(sys.argv[1], scale='tiny', image_size=32)
opt = torch.optim.Adam(net.parameters(), 1e-3)
x, n = torch.randn(64, 3, 32, 32), int(sys.argv[2])
for i in range(n + 1):
    if i == 1: t = time.perf_counter()   # the first step warms up the allocator and kernels
    loss = net(x).pow(2).mean(); opt.zero_grad(); loss.backward(); opt.step()
print(n/(time.perf_counter() - t))
'''

def run(threads: int, jobs: int, arch: str, steps: int) -> float:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    procs = [subprocess.Popen([sys.executable, '-c', WORKER, arch, str(steps)], env=env, stdout=subprocess.PIPE, text=True)
             for _ in range(jobs)]
    rates = [float(p.communicate()[0]) for p in procs]
    return sum(rates)

if __name__ == '__main__':
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--arch', default='resnet18'); ap.add_argument('--steps', type=int, default=30)
    a = ap.parse_args()
    cores = os.cpu_count()
    one = run(cores, 1, a.arch, a.steps)
    lanes = run(1, cores, a.arch, a.steps)
    print(f'{a.arch}, batch 64, 32x32, {cores} cores')
    print(f'one process, {cores} threads: {one:.2f} steps/s')
    print(f'{cores} processes, 1 thread each: {lanes:.2f} steps/s in all')
    print(f'RATIO lanes / one = {lanes/one:.2f}x')
