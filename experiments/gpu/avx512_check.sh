#!/bin/bash
# experiments/gpu/avx512_check.sh STAGE: the AVX-512 code paths (the fused tiles, the golden's 8-lane code,
# the narrow rounding registers) built and tested on the GPU machine's host CPU, for a development machine
# without AVX-512, where they are not compiled (`#if defined(__AVX512F__)`). Carry ["build-debs"]
# (experiments/gpu/fetch_debs.sh). Logs in $OUT.
#   build: every default target (-march=native), into build-avx512/ (kept while the machine stays warm)
#   test:  the C++ tests (ctest -LE long, no Python or packaging), the storage and property tests by name,
#          pasa-bench-golden and pasa-bench-long at 16 threads
#   hashes: scripts/output_hashes.py (every preset x algorithm on three shapes, the paper sweeps' first rows)
#          of this tree and of another commit's (build-head-src.tar.gz, carried), both built here: the
#          fused path's bits against the other commit's
#   long:  pasa-bench-long (prefill and decode at 16 threads) and pasa-bench-attention (1-2 threads) of
#          the hashes stage's other commit and of this tree, alternating (run the hashes stage first)
#   paired: the given ctest tests (PASA_TESTS, a regex) with their output; pasa-bench-attention (wide and
#          --narrow) and pasa-bench-golden of this tree against another commit's (build-head-src.tar.gz: `git
#          archive` of it, carried), alternating
cd "$(dirname "$0")/../.."
OUT=${OUT:-avx512_out}; mkdir -p "$OUT"
export PASA_BUILD_DIR=build-avx512 PASA_JOBS=16
case "$1" in
  build)
    { grep -o -m1 'avx512[a-z_]*' /proc/cpuinfo | sort -u | head -3; nproc; lscpu | grep 'Model name'; } > "$OUT/build.txt"
    . experiments/gpu/device_build.sh all >> "$OUT/build.txt" 2>&1 && echo "built" >> "$OUT/build.txt"
    grep -c "AVX512F__" build-avx512/make.log >> "$OUT/build.txt" || true ;;
  test)
    . experiments/gpu/device_build.sh all > "$OUT/test.txt" 2>&1 || exit 1
    ctest --test-dir build-avx512 -LE long -E "python|packaging|mutation|memory_estimates" -j16 --timeout 900 >> "$OUT/test.txt" 2>&1
    echo "ctest rc $?" >> "$OUT/test.txt"
    build-avx512/pasa-tests "[storage]" >> "$OUT/test.txt" 2>&1; echo "storage rc $?" >> "$OUT/test.txt"
    build-avx512/pasa-bench-golden --threads 16 > "$OUT/bench_golden.txt" 2>&1
    build-avx512/pasa-bench-golden --threads 1 >> "$OUT/bench_golden.txt" 2>&1
    for t in 16 1; do build-avx512/pasa-bench-long --threads $t --heads 4 --lengths 8192,16384 --modes prefill >> "$OUT/bench_long.txt" 2>&1; done
    build-avx512/pasa-bench-long --threads 16 --lengths 32768,131072 --modes decode >> "$OUT/bench_long.txt" 2>&1 ;;
  hashes)
    . experiments/gpu/device_build.sh pasa-attn pasa-sweep > "$OUT/hashes.txt" 2>&1 || exit 1
    H=/tmp/head-src; rm -rf "$H"; mkdir -p "$H" && tar xzf build-head-src.tar.gz -C "$H" || exit 1
    (cd "$H" && PASA_BUILD_DIR=$H/build . "$OLDPWD/experiments/gpu/device_build.sh" pasa-attn pasa-sweep pasa-bench-long pasa-bench-attention) >> "$OUT/hashes.txt" 2>&1 || exit 1
    python3 scripts/output_hashes.py build-avx512 > "$OUT/hashes_tree.txt" 2>> "$OUT/hashes.txt" &
    python3 scripts/output_hashes.py "$H/build" > "$OUT/hashes_head.txt" 2>> "$OUT/hashes.txt"; wait
    wc -l "$OUT/hashes_tree.txt" "$OUT/hashes_head.txt" >> "$OUT/hashes.txt"
    diff "$OUT/hashes_head.txt" "$OUT/hashes_tree.txt" >> "$OUT/hashes.txt"; echo "hash diff rc $?" >> "$OUT/hashes.txt" ;;
  paired)
    . experiments/gpu/device_build.sh all > "$OUT/paired.txt" 2>&1 || exit 1
    ctest --test-dir build-avx512 -R "${PASA_TESTS:-^$}" -j4 --output-on-failure > "$OUT/tests.txt" 2>&1
    echo "ctest rc $?" >> "$OUT/tests.txt"
    H=/tmp/head-src; rm -rf "$H"; mkdir -p "$H" && tar xzf build-head-src.tar.gz -C "$H" || exit 1
    (cd "$H" && PASA_BUILD_DIR=$H/build . "$OLDPWD/experiments/gpu/device_build.sh" pasa-bench-golden pasa-bench-attention) >> "$OUT/paired.txt" 2>&1 || exit 1
    # the engines against sgemm: wide and narrow inputs in this build, wide in the other, alternating
    for r in 1 2; do
      for run in "$H/build/pasa-bench-attention" "build-avx512/pasa-bench-attention" "build-avx512/pasa-bench-attention --narrow"; do
        echo "== round $r $run"; $run --heads 8 --threads 1,2 --reps 3 | grep -E "threads [12]:|of BLAS \(goal"
      done
    done > "$OUT/engines.txt" 2>&1
    for r in 1 2; do
      for b in "$H/build" build-avx512; do
        for t in 1 16; do echo "== round $r $b threads $t"; "$b/pasa-bench-golden" --threads $t | grep -E "baseline\)|golden, all"; done
      done
    done >> "$OUT/paired.txt" 2>&1 ;;
  long)
    # pasa-bench-long (prefill 4 heads 8k-32k, decode B 8 32/8 at 32k and 128k, 16 threads) and the engines
    # against sgemm at 1-2 threads, for another commit's build (the hashes stage's) and this tree's, alternating
    H=/tmp/head-src
    for b in "$H/build" build-avx512; do
      echo "== $b"
      "$b/pasa-bench-long" --threads 16 --heads 4 --lengths 8192,16384,32768 --modes prefill
      "$b/pasa-bench-long" --threads 16 --lengths 32768,131072 --modes decode
    done > "$OUT/bench_long.txt" 2>&1
    for r in 1 2; do
      for run in "$H/build/pasa-bench-attention" "build-avx512/pasa-bench-attention" "build-avx512/pasa-bench-attention --narrow"; do
        echo "== round $r $run"; $run --heads 8 --threads 1,2 --reps 3 | grep -E "threads [12]:|of BLAS \(goal"
      done
    done > "$OUT/engines.txt" 2>&1 ;;
  *) echo "usage: $0 build|test|hashes|paired|long" >&2; exit 2 ;;
esac
