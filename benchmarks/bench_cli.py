"""How long the command line takes to answer: each command in a fresh interpreter, several times, the median wall
seconds, and the load average it ran under (the 2-core machine is shared, and a loaded machine answers later).

    python benchmarks/bench_cli.py --repeat 3

`--help` builds the parsers only; `status` and `reproduce --plan` read the committed results through the reproduction
layer, which imports no torch (`tests/test_cli_speed.py` checks both). Run `compatrepro status` once first: the first
call after a change of the package parses it and reads its versions again (see docs/benchmarks.md)."""

import argparse, os, statistics, subprocess, sys, time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = (['--help'], ['status', '--help'], ['status'], ['reproduce', '--plan'])


def seconds(args: list[str]) -> float:
    "Wall seconds of `compatrepro ARGS` in a fresh interpreter, from the repository root."
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, '-m', 'compatrepro', *args], cwd=ROOT, capture_output=True, text=True)
    if r.returncode not in (0, 1):
        raise RuntimeError(f"compatrepro {' '.join(args)} failed ({r.returncode}): {r.stderr[-2000:]}")
    return time.perf_counter() - t0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--repeat', type=int, default=3)
    a = ap.parse_args(argv)
    print(f'load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores')
    base = None
    for args in COMMANDS:
        t = statistics.median(seconds(args) for _ in range(a.repeat))
        base = base or t
        print(f"compatrepro {' '.join(args):22s} {t:6.2f} s (median of {a.repeat}; {t/base:5.1f}x --help)")
    print(f'load average after: {os.getloadavg()[0]:.1f}')


if __name__ == '__main__':
    main()
