#!/bin/sh
# experiments/gpu/device_build.sh: builds pasa on the GPU machine into build/. That machine's image has CMake,
# a compiler, PyTorch and pybind11 but not MPFR, GMP, CLI11, fmt, nlohmann_json, Boost's headers or Catch2,
# and it cannot download. So Debian 12's own packages are fetched here (experiments/gpu/fetch_debs.sh puts
# them in build-debs/), carried with `run` (carry: ["build-debs"]), unpacked under /opt/pasa-deps (never into
# /, where they could replace the image's libraries) and named to CMake and the compiler.
#
#   . experiments/gpu/device_build.sh [TARGET ...]   (from the repository root; default: pasa_python pasa-attn)
#
# Sourced, it leaves PATH, LD_LIBRARY_PATH and PYTHONPATH set for the module it built.
P=/opt/pasa-deps
A=x86_64-linux-gnu
if [ ! -f "$P/usr/include/mpfr.h" ]; then
  mkdir -p "$P"
  for f in build-debs/*.deb; do dpkg -x "$f" "$P"; done
  for f in build-debs/*.tar.gz; do tar xzf "$f" -C "$P"; done  # boost-subset.tar.gz (fetch_debs.sh)
  # the runtime libraries (libmpfr6, libgmp10, zlib1g) are the image's own (its gcc needs them), so the
  # development links of the -dev packages point there
  for l in "$P/usr/lib/$A"/*.so; do
    t=$(ls "/usr/lib/$A/${l##*/}".* "/lib/$A/${l##*/}".* 2>/dev/null | head -1)
    [ -e "$l" ] || [ -z "$t" ] || ln -sf "$t" "$l"  # (libgmpxx has none: pasa does not use it)
  done
fi
export CPATH="$P/usr/include:$P/usr/include/$A${CPATH:+:$CPATH}"  # gmp.h is under the multiarch folder
export LIBRARY_PATH="$P/usr/lib/$A${LIBRARY_PATH:+:$LIBRARY_PATH}"
export LD_LIBRARY_PATH="$P/usr/lib/$A${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PKG_CONFIG_LIBDIR="$P/usr/lib/$A/pkgconfig:$P/usr/share/pkgconfig"
export PKG_CONFIG_SYSROOT_DIR="$P"
command -v pkg-config > /dev/null || export PATH="$P/usr/bin:$PATH"
B=${PASA_BUILD_DIR:-build}
case "$B" in /*) ;; *) B="$PWD/$B" ;; esac
mkdir -p "$B"
PY=$(command -v python3)
PB=$("$PY" -m pybind11 --cmakedir 2>/dev/null)  # pip's pybind11; Debian's pybind11-dev is found without it
cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$P/usr" -DPython3_EXECUTABLE="$PY" \
  ${PB:+-Dpybind11_DIR="$PB"} > "$B/configure.log" 2>&1 || { tail -30 "$B/configure.log"; return 1 2>/dev/null || exit 1; }
if [ $# -eq 0 ]; then set -- pasa_python pasa-attn; fi
cmake --build "$B" -j"${PASA_JOBS:-$(nproc)}" --target "$@" > "$B/make.log" 2>&1 || { tail -40 "$B/make.log"; return 1 2>/dev/null || exit 1; }
export PYTHONPATH="$B/python${PYTHONPATH:+:$PYTHONPATH}"
