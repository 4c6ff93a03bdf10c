#!/usr/bin/env bash
# The README's install, as a user does it in a fresh clone, offline, with Debian's Python packages:
#   python3 -m venv --system-site-packages v && v/bin/pip install --no-build-isolation . && v/bin/python -c "import pasa"
# in a temporary copy of the tree (the files git tracks or would track: a fresh clone's, plus the work not yet
# committed). Then the installed package is checked (its metadata, version, extension, stubs, a computation,
# that it is the installed copy that is imported) and uninstalled. The CMake build inside pip builds the
# module target only, through ccache where installed (CCACHE_BASEDIR makes the temporary paths relative, so a
# second run hits the cache).
# Usage: pip_install.sh SOURCE_DIR PYTHON
set -euo pipefail
src=$(cd "$1" && pwd)
python=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/pasa-pip.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "pip_install: $*" >&2; exit 1; }

tree=$work/clone  # (not "pasa": a folder of that name in the working directory would import as a namespace package)
mkdir -p "$tree"
if git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  (cd "$src" && git ls-files -z --cached --others --exclude-standard | xargs -0 -I{} sh -c '[ -e "{}" ] && printf "%s\0" "{}"' |
     tar --null -T - -cf -) | tar -C "$tree" -xf -
else
  (cd "$src" && tar --exclude='./build*' -cf - .) | tar -C "$tree" -xf -
fi
[[ -f $tree/pyproject.toml ]] || fail "pyproject.toml is missing from the copy"

cd "$work"
"$python" -m venv --system-site-packages v || fail "$python -m venv failed (Debian: apt-get install python3-venv)"
export CCACHE_BASEDIR=$work CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2} PIP_NO_INDEX=1
(cd "$tree" && "$work/v/bin/pip" install --no-build-isolation .) >"$work/pip.log" 2>&1 ||
  { tail -40 "$work/pip.log"; fail "pip install --no-build-isolation . failed"; }

# Outside the tree, so that nothing but the installed package can be imported.
cd "$work"
v/bin/python - "$src" <<'PY' || fail "the installed package does not work"
import inspect, pathlib, re, sys
import numpy as np
import pasa
src = pathlib.Path(sys.argv[1])
where = pathlib.Path(pasa.__file__).resolve()
assert "site-packages" in where.parts, f"pasa imported from {where}, not from the venv"
version = re.search(r"project\(\s*pasa\s+VERSION\s+([0-9.]+)", (src / "CMakeLists.txt").read_text()).group(1)
assert pasa.__version__ == version, (pasa.__version__, version)
assert (where.parent / "__init__.pyi").is_file() and (where.parent / "py.typed").is_file(), "stubs not installed"
assert list(inspect.signature(pasa.round).parameters)[:2] == ["x", "format"]
h = pasa.round(np.array([0.1, 1 / 3]), "float16", dtype=np.float16)
assert h.dtype == np.float16 and np.array_equal(h, np.array([0.1, 1 / 3]).astype(np.float16)), h
print("pasa", pasa.__version__, "from", where.parent)
PY
v/bin/pip show pasa >"$work/show.txt" || fail "pip show pasa failed"
grep -qx "Name: pasa" "$work/show.txt" && grep -q "^Version: $(v/bin/python -c 'import pasa; print(pasa.__version__)')$" "$work/show.txt" &&
  grep -q "^License: Apache-2.0" "$work/show.txt" || { cat "$work/show.txt"; fail "pip show pasa: wrong metadata"; }
v/bin/pip uninstall -y pasa >/dev/null || fail "pip uninstall pasa failed"
if v/bin/python -c "import pasa" 2>/dev/null; then fail "pasa is still importable after pip uninstall"; fi
echo "pip_install: installed, checked and uninstalled pasa $(grep '^Version' "$work/show.txt")"
