#!/bin/sh
# experiments/gpu/torch_emulate/run.sh: pasa.torch on a GPU machine (torch >= 2.5, transformers 5.x): builds
# the Python module into build/ where `import pasa` does not work yet, then runs torch_emulate.py, which
# writes torch_emulate.json to $OUT (or ./torch_emulate_out). About a minute once the module is built.
set -e
cd "$(dirname "$0")/../../.."
if ! PYTHONPATH=build/python python3 -c "import pasa" 2>/dev/null; then
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release > /dev/null
  cmake --build build -j"$(nproc)" --target pasa_python > /dev/null
fi
PYTHONPATH=build/python exec python3 experiments/gpu/torch_emulate/torch_emulate.py "$@"
