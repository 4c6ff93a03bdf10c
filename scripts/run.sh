#!/usr/bin/env bash
# Installs what is missing, builds in Release (the programs and the Python module build/python/pasa*.so) and
# runs the main job: pasa-sweep on its built-in default.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
rm -rf sweep-out/default   # a fresh run each time (pasa-sweep never overwrites results without --resume)
./build/pasa-sweep         # built-in default: FA-FP16/FP32 overflows to NaN at x0 = 30, PASA-FP16 does not
