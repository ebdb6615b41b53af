"""Benchmark: where a training step of RM's transformation spends its time, at the embedding widths of the RM notebooks.

One training step of ψ and ρ as `compatrepro.train` runs it (the network of `make_transformation('rm', ...)`, RM's MCL
loss with mining, Adam), on random features of a batch of the recipe's size, on one thread as the tiny runs train:
the milliseconds of each part, the share of matrix products (torch's profiler), and each width's step time as a ratio
to the narrowest one's. The widths and blocks are those of `rm_transformation_spec` for each dataset's notebook.

    python benchmarks/bench_rm_transformation.py                       # ImageNet-1K (128-d) and Places-365 (512-d)
    python benchmarks/bench_rm_transformation.py --datasets CIFAR-100 Places-365 --steps 20

This is a benchmark, not a test: nothing here is asserted in CI. (2026-11-28, 2-core development machine, 20 steps: 25 ms a
step at 128-d, 169 ms at 512-d, ratio 6.7; matrix products 28 % and 78 % of the time.)
"""
from __future__ import annotations
import argparse, os, sys, time
from pathlib import Path

import numpy as np
import torch

os.environ.setdefault('COMPATREPRO_PROGRESS', '0')
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from compatrepro import losses as L                                       # noqa: E402
from compatrepro.runtime import ExperimentParams                           # noqa: E402
from compatrepro.models import make_transformation                        # noqa: E402
from compatrepro.rm import rm_data, rm_specs, rm_transformation_spec      # noqa: E402


def step_parts(spec, d_old: int, d_new: int, steps: int) -> tuple[np.ndarray, float, int]:
    """Milliseconds of forward, loss, backward and Adam per step (mean over `steps` after 5 warm-up steps), the share of
    `aten::mm`/`addmm` in the profiled steps, and the network's parameter count."""
    net = make_transformation('rm', new_dim=d_new, old_dim=d_old, psi_blocks=spec.psi_blocks, rho_blocks=spec.rho_blocks,
                              hidden=spec.hidden)
    opt = torch.optim.Adam(net.parameters(), lr=spec.lr)
    g = torch.Generator().manual_seed(0)
    xo, xn = torch.randn(spec.batch_size, d_old, generator=g), torch.randn(spec.batch_size, d_new, generator=g)
    y = torch.arange(spec.batch_size) // (spec.per_class or 4)
    def step():
        t = [time.perf_counter()]
        rho_new, rho_rev = net(xn); t.append(time.perf_counter())
        loss = L.mcl_loss(rho_rev, xo, rho_new, y, dist=spec.dist, tau=spec.tau, mine=spec.mine); t.append(time.perf_counter())
        opt.zero_grad(set_to_none=True); loss.backward(); t.append(time.perf_counter())
        opt.step(); t.append(time.perf_counter())
        return np.diff(t)
    for _ in range(5): step()
    ms = np.mean([step() for _ in range(steps)], 0)*1e3
    with torch.profiler.profile() as prof:
        for _ in range(min(steps, 10)): step()
    ev = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in ev)
    mm = sum(e.self_cpu_time_total for e in ev if e.key in ('aten::mm', 'aten::addmm'))
    return ms, mm/total, sum(p.numel() for p in net.parameters())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--datasets', nargs='+', default=['ImageNet-1K', 'Places-365'], help="RM datasets (rm_data's names)")
    ap.add_argument('--steps', type=int, default=40, help='timed steps per dataset')
    ap.add_argument('--threads', type=int, default=1, help='torch threads (the tiny runs train on one)')
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    p = ExperimentParams(seed=0, scale='tiny')
    rows = []
    for name in a.datasets:
        data = rm_data(name); specs = rm_specs(p, data)
        spec = rm_transformation_spec(specs, 'mcl', data, p)
        d_old, d_new = specs['old'].emb_dim, specs['new'].emb_dim
        ms, mm, n_params = step_parts(spec, d_old, d_new, a.steps)
        rows.append((name, d_old, d_new, n_params, ms, mm))
    base = min(r[4].sum() for r in rows)
    print(f"{'dataset':14s} {'d_old':>5s} {'d_new':>5s} {'params':>9s} {'fwd':>7s} {'loss':>7s} {'bwd':>7s} {'adam':>7s} "
          f"{'step ms':>8s} {'ratio':>6s} {'matmul':>7s}")
    for name, d_old, d_new, n_params, ms, mm in rows:
        print(f'{name:14s} {d_old:5d} {d_new:5d} {n_params:9,d} ' + ' '.join(f'{x:7.2f}' for x in ms)
              + f' {ms.sum():8.2f} {ms.sum()/base:6.2f} {mm:7.0%}')


if __name__ == '__main__':
    main()
