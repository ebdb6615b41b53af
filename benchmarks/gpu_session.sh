#!/bin/bash
# One GPU session for issue 48, prepared to run once on one H200 (16 cores, torch 2.11 cu130, torchvision 0.26, Python 3.12,
# no internet) from the repository root with the carried wheels in .whl/ and an output folder $OUT:
#   a. install the carried wheels (papermill, nbformat, ipykernel, faiss-cpu and what they need that the image lacks)
#   a3. compatrepro upgrade's metrics and curves on the GPU, timed (a few seconds), and a3b. its transformations trained there
#   a2. benchmarks/gpu_loader_check.py: the decoder's race with the caller's stream (torchvision's decoder as it is, the
#       library's drained decode_jpegs, the bench's side stream), one batch against the reference, training steps on each path
#   b. bench_train_steps.py: ResNet-50, batch 256, --loader cpu, gpu, gpu-side-stream, --synthetic (2 epochs of 100 steps)
#   c. compatrepro rehearse --device cuda on the six notebooks no GPU has rehearsed to the end (41, 42, 45, 54, 55, 56;
#      the other 19 ran there on 2026-11-28), at the same time as
#   d. compatrepro reproduce --scale tiny --device cuda --seeds 0 of RACT's six notebooks (40-45), timed
#   (2026-11-28, one H200: the drain confirmed and put into decode_jpegs; b2, the CPU side of the reference path, measured
#    there and dropped; all 25 rehearsals beside all 29 tiny runs left 6 rehearsals and every tiny run unfinished)
# The wheels (Python 3.12, x86-64) are those of benchmarks/gpu_wheels.txt; on the development machine, once:
#   echo /.whl/ >> .git/info/exclude
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
#     --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl -r benchmarks/gpu_wheels.txt
# and the device call carries ".whl" (23 MB; jedi, parso and debugpy are left out to stay under the 64 MiB a call).
# Everything ends by about 560 s after the start; each step writes to $OUT as it goes (at most 8 files come back).
set -u -o pipefail
T0=$(date +%s)
OUT=${OUT:-/tmp/out}; export OUT; mkdir -p "$OUT"
exec > >(tee -a "$OUT/00_session.log") 2>&1
mark() { echo "=== [$(date -u +%H:%M:%S) +$(( $(date +%s) - T0 ))s] $*"; }
left() { echo $(( ${1:-560} - ($(date +%s) - T0) )); }

mark "a. install the carried wheels"
timeout 90 python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
echo "pip exit $?"
export PYTHONPATH=/tmp/site:$PWD
export JUPYTER_RUNTIME_DIR=/tmp/jupyter/runtime JUPYTER_DATA_DIR=/tmp/jupyter/data JUPYTER_CONFIG_DIR=/tmp/jupyter/config MPLCONFIGDIR=/tmp/mpl
mkdir -p /tmp/jupyter/runtime /tmp/jupyter/data /tmp/jupyter/config /tmp/mpl
timeout 60 python3 -c 'import papermill, nbformat, ipykernel, faiss, compatrepro, torch, torchvision; print("imports ok:", compatrepro.__file__, "torch", torch.__version__, "torchvision", torchvision.__version__, "cuda", torch.cuda.is_available())' || { mark "imports FAILED: stopping"; exit 1; }
timeout 60 python3 -c 'from jupyter_client.kernelspec import KernelSpecManager as K; print("kernels:", K().find_kernel_specs())'
timeout 60 python3 -c 'import torch; from compatrepro.loaders import device_decode_available, loader_choice; print("decode on cuda:", device_decode_available("cuda"), "| auto ->", loader_choice("cuda"))'
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; nproc

mark "a3. compatrepro upgrade on the GPU: 20,000 made-up images, d=128 (on 2 CPU cores 26 s, mAP of (new, old) 99.302)"
timeout 90 python3 -c 'import time, torch; from compatrepro.upgrade import example_upgrade, upgrade_report; E = example_upgrade(0, 1000 if torch.cuda.is_available() else 10, 20, 128); E.pop("gallery_logits"); upgrade_report(E, distance="cosine"); t = time.time(); R = upgrade_report(E, distance="cosine"); print("upgrade_report,", len(E["gallery_old"]), "images, cuda" if torch.cuda.is_available() else "images, cpu", round(time.time() - t, 2), "s; mAP of (new, old)", round(R.compatibility.loc["mAP", "(new, old)"], 3))'

mark "a3b. compatrepro upgrade --transform on the GPU: FCT, FastFill and RM trained on 2,000 made-up images, 5 epochs each"
timeout 120 python3 -c 'import time, torch; from compatrepro.upgrade import example_upgrade, upgrade_report; U = example_upgrade(incompatible=True, train_per_class=100); t = time.time(); R = upgrade_report(U, distance="cosine", transforms=("FCT", "FastFill", "RM"), show_progress=False, epochs=5); print("upgrade_report with transforms on", "cuda" if torch.cuda.is_available() else "cpu", round(time.time() - t, 2), "s; training s", {m: round(a["train_seconds"], 2) for m, a in R.transformations.items()}, "| top1", R.compatibility.loc["top1"].round(1).to_dict())'

mark "a2. the device data path on the GPU: one batch against the CPU and the reference, then training steps on each path"
timeout 150 python3 benchmarks/gpu_loader_check.py 2>&1 | grep -v Warning | tail -60 > "$OUT/loader_check.log"; cat "$OUT/loader_check.log"

mark "b. bench: ResNet-50, batch 256, 2 epochs of 100 steps, 14 workers"
mkdir -p /tmp/bench   # its JSON files travel in extras.tar.gz (at most 8 files come back)
for mode in cpu gpu gpu-side-stream synthetic; do
  if [ $mode = synthetic ]; then flag=--synthetic; else flag="--loader $mode"; fi
  mark "b. bench $mode"
  timeout 75 python3 benchmarks/bench_train_steps.py --arch resnet50 --batch 256 --steps 100 --workers 14 $flag \
    --device cuda --out "/tmp/bench/bench_$mode.json" 2>&1 | grep -v 'it/s\]' | tail -20
  echo "bench $mode exit $?"
done

mark "c+d. rehearse 41, 42, 45, 54, 55, 56 (jobs 6) and reproduce tiny seed 0 of RACT (jobs 6), side by side, until +555s"
R=$(left 555); echo "seconds left for c and d: $R"
export COMPATREPRO_PROGRESS=0
nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv -l 5 > /tmp/smi.csv 2>&1 & SMI=$!
( timeout -k 5 $R python3 -m compatrepro rehearse --device cuda --jobs 6 --threads 1 --out /tmp/rehearsal --only '^4[125]_' '^5[456]_' \
    --timeout $(( R - 25 )) 2>&1; echo "rehearse exit $?" ) > "$OUT/rehearse.log" 2>&1 & REH=$!
( timeout -k 5 $R python3 -m compatrepro reproduce --scale tiny --device cuda --seeds 0 --jobs 6 --threads 1 --only '^4[0-5]_' \
    --out /tmp/gpu_results --cache /tmp/gpu_cache 2>&1; echo "reproduce exit $?" ) > "$OUT/reproduce.log" 2>&1 & REP=$!
while kill -0 $REH 2>/dev/null || kill -0 $REP 2>/dev/null; do sleep 30; mark "running: rehearse $(kill -0 $REH 2>/dev/null && echo on || echo done), reproduce $(kill -0 $REP 2>/dev/null && echo on || echo done)"; done
wait $REH; wait $REP
kill $SMI 2>/dev/null
tail -3 "$OUT/rehearse.log"; tail -3 "$OUT/reproduce.log"

mark "summary"
timeout 20 python3 - > "$OUT/summary.txt" 2>&1 <<'PY'
import glob, json, os
for title, pat in (('reproduce --scale tiny --device cuda --seeds 0 (RACT)', '/tmp/gpu_results/tiny/runs/*.json'),
                   ('rehearse --device cuda', '/tmp/rehearsal/**/runs/*.json')):
    fs = sorted(glob.glob(pat, recursive=True)); print(f'## {title}: {len(fs)} run records')
    tot = 0
    for f in fs:
        try: d = json.load(open(f))
        except Exception as e: print(os.path.basename(f), 'unreadable', e); continue
        tot += d.get('duration') or 0
        print(f"{os.path.basename(f):45s} finished={d.get('finished')} duration={d.get('duration')} device={d.get('device')}")
    print(f'sum of durations: {tot:.0f} s\n')
for f in sorted(glob.glob('/tmp/bench/bench_*.json')):
    d = json.load(open(f)); print(os.path.basename(f), d.get('data'), d.get('images_per_s_epoch1'), d.get('images_per_s_epoch2'), d.get('device'))
PY
cat "$OUT/summary.txt"
timeout 20 tar czf "$OUT/extras.tar.gz" --ignore-failed-read /tmp/smi.csv /tmp/bench /tmp/gpu_results/tiny/runs \
  $(find /tmp/rehearsal -path '*runs/*.json' 2>/dev/null | head -200) 2>/dev/null
ls -la "$OUT"; mark "done"
