#!/bin/bash
# experiments/gpu/open_checks.sh: the device checks that need a GPU machine, in one call of about 9 minutes
# (`run` with carry ["build-debs", "build-sage"]; build-debs from fetch_debs.sh, build-sage a thu-ml/
# SageAttention checkout at d1a57a5 holding sageattention/, csrc/ and setup.py). $OUT gets at most 8 files:
#   log.txt             every step's log, in order: the image (OS, glibc, compilers, Python, torch), the build
#                       of SageAttention's sm90 extensions (sage_setup.py, in the background from the start),
#                       pasa's build, torch_emulate, sage_capture (SA2), pasa-bench-long at 16 threads (the
#                       golden against the emulated kernel at long context)
#   torch_emulate.json  pasa.torch on torch 2.11 / transformers (experiments/gpu/torch_emulate)
#   sage_manifest.json, sage_captures*.npz   sage_capture.py: SA1 and, where the build finished, SA2
# Each step has its own time limit, so that a slow one leaves the others' results.
cd "$(dirname "$0")/../.."
OUT=${OUT:-open_checks_out}
mkdir -p "$OUT"
t0=$(date +%s)
L="$OUT/log.txt"
stamp() { echo "== $(( $(date +%s) - t0 ))s $*" | tee -a "$L"; }
{ cat /etc/os-release | head -3; ldd --version | head -1; gcc --version | head -1; nvcc --version | tail -2
  python3 -c "import sys, torch, triton; print(sys.version); print('torch', torch.__version__, 'triton', triton.__version__)"
  nproc; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } >> "$L" 2>&1
stamp "env"
if [ -d build-sage/csrc ]; then
  (cd build-sage && MAX_JOBS=2 timeout "${SAGE_BUILD_S:-470}" python3 ../experiments/gpu/kernels/sage_setup.py \
     build_ext --inplace > /tmp/sage_build.log 2>&1; echo "rc=$?" >> /tmp/sage_build.log) &
  sage_pid=$!
fi
PASA_JOBS=14 . experiments/gpu/device_build.sh pasa_python pasa-bench-long >> "$L" 2>&1
stamp "pasa build rc=$?"
if python3 -c "import pasa" 2>> "$L"; then
  timeout 150 python3 experiments/gpu/torch_emulate/torch_emulate.py >> "$L" 2>&1
  stamp "torch_emulate rc=$?"
fi
if [ -n "${sage_pid:-}" ]; then wait "$sage_pid"; tail -c 12000 /tmp/sage_build.log >> "$L"; stamp "sage build"; fi
# SA1 is pinned already (results/hardware/sage): the capture runs SA2 only, leaving time for the benchmark
left=$(( ${TOTAL_S:-570} - ($(date +%s) - t0) - 100 ))
if [ -d build-sage/sageattention ] && [ "$left" -gt 30 ]; then
  timeout "$left" python3 experiments/gpu/kernels/sage_capture.py --sage build-sage --out "$OUT" --which sa2 \
    --deadline $(( left - 20 )) >> "$L" 2>&1
  stamp "sage capture rc=$?"
fi
# last, alone on the machine: 16 threads would be timed against the compilers otherwise
left=$(( ${TOTAL_S:-570} - ($(date +%s) - t0) ))
if [ -x build/pasa-bench-long ] && [ "$left" -gt 40 ]; then
  timeout $(( left * 2 / 3 )) build/pasa-bench-long --threads 16 --lengths 8192,16384,32768 --modes prefill >> "$L" 2>&1
  stamp "bench-long prefill rc=$?"
  left=$(( ${TOTAL_S:-570} - ($(date +%s) - t0) ))
  timeout $(( left - 5 )) build/pasa-bench-long --threads 16 --lengths 32768,65536,131072 --modes decode >> "$L" 2>&1
  stamp "bench-long decode rc=$?"
fi
