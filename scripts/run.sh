#!/usr/bin/env bash
# Installs what is missing, builds in Release and runs the main job on its built-in default.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
./build/pasa-round --list-formats
