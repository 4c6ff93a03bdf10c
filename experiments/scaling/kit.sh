# Shared by run_scaling.sh and run_sweep_scaling.sh (sourced, not run).

# pack_programs BUILD_DIR KIT_DIR PROGRAM...: copies the programs and the shared libraries they load (but the
# C library, libm and the loader, which the other machine has) into KIT_DIR and KIT_DIR/lib, so that the kit
# can be carried to a machine without our build dependencies.
pack_programs() {
  local build=$1 kit=$2 p lib
  shift 2
  mkdir -p "$kit/lib"
  for p in "$@"; do
    [[ -x $build/$p ]] || { echo "$build/$p: not built (cmake --build $build --target $p)" >&2; exit 1; }
    cp "$build/$p" "$kit/"
    ldd "$build/$p" | awk '/=> \// { print $3 }' | while read -r lib; do
      case $(basename "$lib") in libc.so.* | libm.so.* | ld-linux*) continue ;; esac
      cp -L "$lib" "$kit/lib/"
    done
  done
}

# machine_info: the host, its CPU topology (lscpu: threads per core, since 16 logical CPUs that are 8 cores
# with two hyperthreads each cannot scale 16x) and memory, on stdout.
machine_info() {
  echo "host $(uname -n), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), load $(cut -d' ' -f1 /proc/loadavg)"
  lscpu 2>/dev/null | grep -E '^(CPU\(s\)|Thread\(s\) per core|Core\(s\) per socket|Socket\(s\)|NUMA node\(s\)|L3 cache|CPU max MHz|Model name|Hypervisor vendor):' || true
  grep -E '^(MemTotal|MemAvailable):' /proc/meminfo
}
