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

# warm_memory GIB: writes GIB GiB of zeros into /dev/shm on every core and removes them, so that the guest
# pages the timed runs will get are already backed by the hypervisor. In a freshly started VM the first
# touch of each guest page is a fault taken by the host as well, and a run at many threads or jobs touches
# several GiB that a one-thread run never does (on the GPU machine's host the four paper sweeps at 16 jobs
# took 1.03–1.38x longer the first time after the machine started than the second; docs/speed.md).
# At most a quarter of the available memory. WARMUP=0 skips it; a tmpfs too small for GIB, or none, is
# reported and skipped.
warm_memory() {
  local gib=$1 n i pids=()
  [[ ${WARMUP:-1} == 0 ]] && return 0
  local avail mem
  mem=$(awk '/^MemAvailable:/ { print int($2 / 4 / 1048576) }' /proc/meminfo)  # at most a quarter of it
  ((gib > mem)) && gib=$mem
  ((gib > 0)) || return 0
  avail=$(df -k --output=avail /dev/shm 2>/dev/null | tail -1 || echo 0)
  if ((avail < gib * 1024 * 1024 + 1024 * 1024)); then
    echo "warm-up skipped: /dev/shm has $((avail / 1024)) MiB free, $gib GiB wanted"
    return 0
  fi
  n=$(nproc)
  local files=/dev/shm/pasa-warm.$$  # this process's own files, removed also when it is interrupted
  trap 'rm -f "$files".*; exit 130' INT TERM
  for ((i = 0; i < n; ++i)); do
    dd if=/dev/zero of="$files.$i" bs=1M count=$((gib * 1024 / n)) status=none &
    pids+=($!)
  done
  for i in "${pids[@]}"; do wait "$i" || true; done
  rm -f "$files".*
  trap - INT TERM
  echo "warm-up: $gib GiB written and freed in /dev/shm on $n cores"
}
