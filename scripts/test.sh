#!/usr/bin/env bash
# Builds (Release) and runs the default test set: every test but those labelled "long".
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
ctest --test-dir build -LE long --output-on-failure -j"$(nproc)"
