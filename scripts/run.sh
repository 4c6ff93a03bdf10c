#!/usr/bin/env bash
# Installs what is missing, builds in Release and runs the main job on its built-in default.
# (For now the main job demonstrates the rounding layer; the sweep driver will replace it.)
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
./build/pasa-round --list-formats
echo
echo "0.1 rounded to each 16- and 8-bit format (value, storage bits):"
for f in fp16 bf16 fp8_e4m3 fp8_e5m2; do
  printf '%-9s ' "$f"
  ./build/pasa-round --format "$f" 0.1
done
echo
echo "65520 (the fp16 overflow threshold) to fp16: IEEE, then saturating:"
./build/pasa-round --format fp16 65520
./build/pasa-round --format fp16 --overflow saturate 65520
