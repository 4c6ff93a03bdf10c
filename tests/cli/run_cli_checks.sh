#!/usr/bin/env bash
# Command-line hardening checks: every program, given a hostile but realistic argument or file,
# ends promptly with exit status 2 and a message naming the mistake (never a hang, a crash, exit 3
# "internal error", or a partial output), or does what was asked. Each check is one line below; a failure
# prints the check, the status and the program's output, and the script exits 1 after running them all.
#
# Usage: run_cli_checks.sh BUILD_DIR
set -uo pipefail
build=$(cd "$1" && pwd) || exit 2
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd) || exit 2
export PATH="$build:$PATH"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 2
failures=0
out=""

# expect STATUS REGEX CMD...: runs CMD (60 s at most) and checks its exit status and that its output
# (stdout + stderr) matches REGEX.
expect() {
  local want=$1 regex=$2
  shift 2
  out=$(timeout 60 "$@" 2>&1)
  local got=$?
  if [[ $got != "$want" ]] || ! grep -Eq -- "$regex" <<<"$out"; then
    echo "FAIL: $* (exit $got, expected $want and /$regex/)"
    sed 's/^/    /' <<<"$out" | head -n 12
    failures=$((failures + 1))
  fi
}
# absent PATH...: none of the paths exists.
absent() {
  for p in "$@"; do
    if [[ -e $p ]]; then
      echo "FAIL: $p exists (a partial output)"
      failures=$((failures + 1))
    fi
  done
}

# first_line REGEX: the first line of the last command's output matches REGEX.
first_line() {
  if ! head -n 1 <<<"$out" | grep -Eq -- "$1"; then
    echo "FAIL: first line of the last output is not /$1/: $(head -n 1 <<<"$out")"
    failures=$((failures + 1))
  fi
}

small=(--heads 1 --seq 16 --dim 8)
# 1. uniform interval that is empty in double (x0 - am == x0 + am): no hang
expect 0 "rmse" pasa-attn "${small[@]}" --x0 20 --am 1e-15 --algorithm fa2 --alloc fa_fp32
# 2. generator range beyond double; deep JSON nesting
expect 2 "leave double's range" pasa-attn "${small[@]}" --x0 1e308 --am 1e308
python3 -c 'print("[" * 200000 + "]" * 200000)' >deep.json
expect 2 "nested more than 256 levels" pasa-sweep deep.json
# A folder where a file is expected: refused naming it (std::ifstream opens a folder on Linux, then fails
# to read it), not an internal error.
mkdir -p a_folder
expect 2 "a_folder: is a folder, not a file" pasa-attn --problem a_folder
expect 2 "a_folder: is a folder, not a file" pasa-attribute --problem a_folder
expect 2 "(is a folder, not a file|is actually a directory): a_folder|a_folder: is a folder" pasa-sweep a_folder
expect 2 "a_folder: is a folder, not a file" pasa-attn --q a_folder --k a_folder --v a_folder
# Work first: a benchmark size that would run for days is refused with its figure.
expect 2 "GFLOP per configuration; this benchmark takes at most" pasa-bench-every-op --seq 2147483648
# 3. grids refused by their size before anything runs
cat >grid.json <<'J'
{"problem": {"shape": {"Sq": 16, "D": 8}, "seed": "$seed", "generator": {"x0": "$a", "am": "$b", "p": "$c", "noise": "$d", "wavelength": "$e"}},
 "grid": {"a": {"from": 0, "to": 99999, "step": 1}, "b": {"from": 0, "to": 99999, "step": 1}, "c": {"from": 0, "to": 99999, "step": 1},
          "d": {"from": 0, "to": 99999, "step": 1}, "e": {"from": 1, "to": 100000, "step": 1}},
 "algorithms": [{"name": "fa2"}], "outputs": {"dir": "grid-out"}}
J
expect 2 "more than 2\^64 cases" pasa-sweep grid.json
absent grid-out
# 4. block sizes larger than the sequence are clamped (no 2 GB of tiles for 256 tokens)
expect 0 "s2 4000000" pasa-attn --heads 1 --seq 256 --dim 8 --s2 4000000 --max-memory 200M
# 5. size first: refused with the estimate before anything is allocated or created; negative sizes. (About
# 1 TiB: more than any machine this runs on has; 200,000 tokens, 25 GiB with inputs at fp16's width, ran on
# the GPU machine's 128 GiB host.)
expect 2 "needs about .* of memory" pasa-attn --heads 64 --seq 4000000 --dim 128 --out-npy big.npy
absent big.npy
expect 2 "needs about .* of memory" pasa-attn "${small[@]}" --max-memory 1M
expect 2 "not an integer" pasa-attn --heads 1 --seq -5 --dim 8
# 6. the golden's precision is validated with the config; nothing is created
cat >prec.json <<'J'
{"problem": {"shape": {"Sq": 16, "D": 8}, "seed": "$seed"}, "algorithms": [{"name": "fa2"}],
 "golden": {"precision_bits": 64}, "outputs": {"dir": "prec-out"}}
J
expect 2 "precision_bits: 64 is outside \[106, 4096\]" pasa-sweep prec.json
absent prec-out
# 7. output names: not the config, not a partial file, distinct
sed 's/"dir": "prec-out"/"dir": "names-out", "summary": "config.json"/; s/"precision_bits": 64/"precision_bits": 128/' prec.json >names.json
expect 2 "outputs/summary: .*config.json" pasa-sweep names.json
absent names-out
# 8. two outputs: both or neither; unwritable outputs found before the work
expect 2 "--bits-output /proc/b.npy" pasa-round --output o.npy --bits-output /proc/b.npy 1 2
absent o.npy
expect 2 "--golden-npy /proc/g.npy" pasa-attn "${small[@]}" --out-npy a.npy --golden-npy /proc/g.npy
absent a.npy
expect 2 "--json /proc/x.json" pasa-beta --beta 0.99 --csv b.csv --json /proc/x.json
absent b.csv
printf '{"shape": {"Sq": 16, "D": 8}}\n' >p.json
expect 2 "--s1: .*not an integer" pasa-attribute --problem p.json --s1 0
expect 2 "beta: expected a number in \[0, 1\)" pasa-attribute --problem p.json --beta 1.5
expect 2 "--csv /proc/x.csv" pasa-attribute --problem p.json --csv /proc/x.csv
expect 2 "No such file|cannot" pasa-tables --repo no-such-repo --out tables-out
absent tables-out
# 9. numbers with a sign are numbers, not options; 1e-400 says it became 0
expect 0 "^-inf +-> -inf +0xfc00" pasa-round -inf
expect 0 "^nan +-> nan" pasa-round -nan 1
first_line "^nan +-> nan"  # (in the order given)
expect 0 "warning: .*1e-400.* reads as 0" pasa-round 1e-400
expect 0 "0x1p-3|0\.125" pasa-round -f fp32 -- -0x1p-3
# a word among the numbers is named by its place (it was "number 1"); an int beyond range as written (was p=-1)
expect 2 'command line: number 4 \("abc"\)' pasa-round 1 2 3 abc
expect 2 'command line: number 2 \("x"\)' pasa-round -f bf16 1 x -2
expect 2 "p=99999999999999999999 is outside \[2, 53\]" pasa-round --format p=99999999999999999999,emax=15 1
# 10. user mistakes are exit 2, not "internal error"
expect 2 "/proc/x" pasa-sweep --out /proc/x
printf '{"shape": {"Sq": 1e999}}\n' >inf.json
expect 2 "number overflow" pasa-attn --problem inf.json
cat >label.json <<'J'
{"problem": {"shape": {"Sq": 16, "D": 8}, "seed": "$seed"}, "algorithms": [{"name": "fa2", "label": "a\nb"}], "outputs": {"dir": "label-out"}}
J
expect 2 "label: .*control character" pasa-sweep label.json
cat >rmse.json <<'J'
{"problem": {"shape": {"Sq": 16, "D": 8}, "seed": "$seed", "generator": {"x0": "$rmse"}}, "grid": {"rmse": [1, 2]},
 "algorithms": [{"name": "fa2"}], "outputs": {"dir": "rmse-out"}}
J
expect 2 "grid/rmse: .*also the name of a column" pasa-sweep rmse.json
absent label-out rmse-out
# 11. values in messages are the values given
cat >seed.json <<'J'
{"problem": {"shape": {"Sq": 8, "D": 4}, "seed": "$seed"}, "seeds": [18446744073709551615], "algorithms": [{"name": "fa2"}], "outputs": {"dir": "seed-out"}}
J
expect 0 "1 cases run" pasa-sweep seed.json
mkdir -p shard && cp seed.json shard/config.json && touch shard/results.shard-99999999999999999999-of-2.csv
expect 2 "not a non-negative integer|is not" pasa-sweep merge shard
expect 2 "--beta: .*not a finite number" pasa-attn "${small[@]}" --algorithm pasa --beta nan
printf '{"generator": {"kind": "hybrid", "p": 99999999999999999999}}\n' >gp.json
expect 2 "/generator/p: must lie in \[0, 1\] \(got 1e\+20\)" pasa-attn --problem gp.json
# 12. accepted silently no more
expect 2 "--seed: .*not an integer" pasa-attn "${small[@]}" --seed -1
expect 2 "--seed: .*not an integer" pasa-attn "${small[@]}" --seed 1e23
expect 2 "--threads: .*not an integer" pasa-attn "${small[@]}" --threads 0
expect 2 "--threads: .*not an integer" pasa-sweep --threads -1
expect 2 "--jobs: .*not an integer" pasa-sweep --jobs 0
# pasa-sweep --jobs: problems side by side give the table of one at a time (the timing columns aside)
cat >jobs.json <<'J'
{"problem": {"shape": {"Nq": 2, "Sq": 64, "D": 16}, "seed": "$seed", "generator": {"kind": "uniform", "x0": "$x0"}}, "grid": {"x0": [1, 5, 9]}, "seeds": [1, 2], "algorithms": [{"name": "fa2", "alloc": "fa_fp16_fp32", "s1": 16, "s2": 16}, {"name": "pasa", "alloc": "pasa_fp16", "s1": 16, "s2": 16}]}
J
expect 0 "12 cases run" pasa-sweep jobs.json --out jobs1 --jobs 1 --threads 1
expect 0 "12 cases run" pasa-sweep jobs.json --out jobs3 --jobs 3 --threads 3
expect 0 "same 13 lines" python3 -c '
import csv, sys
t = [[r for r in csv.reader(open(d + "/results.csv"))] for d in sys.argv[1:]]
keep = [i for i, h in enumerate(t[0][0]) if h not in ("golden_time_s", "time_s")]
a, b = ([[r[i] for i in keep] for r in x] for x in t)
print("same %d lines" % len(a) if a == b and len(a) == 13 else "tables differ")' jobs1 jobs3
expect 2 "--with-sqrt-d: .*not an integer" pasa-beta --beta 0.9 --with-sqrt-d 0
printf '{"shape": {"Sq": 16, "Sq": 32}}\n' >dup.json
expect 2 "key \"Sq\" appears twice" pasa-attn --problem dup.json
expect 2 "PASA options do not apply to algorithm \"fa2\"" pasa-attn "${small[@]}" --algorithm fa2 --beta 0.9
expect 2 "name the same file" pasa-attn "${small[@]}" --out-npy same.npy --golden-npy ./same.npy
absent same.npy
mkdir -p locked
(flock locked/.pasa-sweep.lock sleep 30) &
locker=$!
sleep 0.5
expect 2 "in use by another pasa-sweep run" pasa-sweep seed.json --out locked
kill "$locker" 2>/dev/null
wait "$locker" 2>/dev/null
absent locked/config.json
# 13. a golden exactly zero is an exact answer
printf '{"shape": {"B": 1, "Sq": 4, "D": 4}, "kv_len": [0]}\n' >zero.json
expect 0 "rmse \(Eq. 19\) +0$" pasa-attn --problem zero.json
expect 0 "cosine similarity +1$" pasa-attn --problem zero.json
# NaN/inf inputs: refused by default, accepted with --allow-nonfinite (the golden is NaN where IEEE says so)
python3 - <<'P'
import struct
def npy(name, shape, vals):
    h = "{'descr': '<f8', 'fortran_order': False, 'shape': (%s), }" % ", ".join(map(str, shape))
    h += " " * ((64 - (10 + len(h) + 1) % 64) % 64) + "\n"
    open(name, "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode() + struct.pack("<%dd" % len(vals), *vals))
n = 4 * 2
npy("q.npy", (4, 2), [0.5] * n)
npy("k.npy", (4, 2), [0.25] * n)
npy("v.npy", (4, 2), [1.0, float("inf")] + [2.0] * (n - 2))
P
expect 2 "needs about .* from .npy" pasa-attn --q q.npy --k k.npy --v v.npy --max-memory 1K  # sized from the headers
expect 2 "non-finite element inf .*--allow-nonfinite" pasa-attn --q q.npy --k k.npy --v v.npy
expect 0 "inf %  +0$" pasa-attn --q q.npy --k k.npy --v v.npy --allow-nonfinite --algorithm fa2 --alloc fa_fp32

# Issue 23: outputs. A device or FIFO is written through (never replaced by a regular file, even as root), a
# symlink is followed and stays a link, a folder is refused; output and input paths are checked before work.
is_kind() {  # is_kind TEST PATH: `test TEST PATH` holds after the last command
  if ! test "$1" "$2"; then
    echo "FAIL: $2 fails test $1 after the last command: $(ls -ld "$2" 2>&1)"
    failures=$((failures + 1))
  fi
}
expect 0 "rmse" pasa-attn "${small[@]}" --out-npy /dev/null --golden-npy /dev/null
is_kind -c /dev/null
mkfifo out.fifo
cat out.fifo >from-fifo.npy &
reader=$!
expect 0 "rmse" pasa-attn "${small[@]}" --out-npy out.fifo
wait "$reader"
is_kind -p out.fifo
is_kind -s from-fifo.npy
mkdir -p real && ln -s real/target.npy link.npy
expect 0 "rmse" pasa-attn "${small[@]}" --out-npy link.npy
is_kind -L link.npy
is_kind -s real/target.npy
expect 2 "--out-npy real: is a folder; give a file name" pasa-attn "${small[@]}" --out-npy real
expect 2 "--output real: is a folder" pasa-round 1.5 --format fp16 --output real
expect 2 "--out nodir/x.csv: the folder .*nodir does not exist" pasa-fdpp --lengths 512 --out nodir/x.csv
if grep -q "recomputed" <<<"$out"; then
  echo "FAIL: pasa-fdpp computed before refusing its --out"
  failures=$((failures + 1))
fi
expect 2 "--out nodir/a.csv: the folder .*nodir does not exist" pasa-hwcompare attention --gpu-dir . --configs . --out nodir/a.csv
expect 2 "no-such-hw.csv: cannot open for reading" pasa-tables --repo "$repo" --out tables-out --hardware no-such-hw.csv
absent tables-out

# Issue 37: an output never replaces an input (the same name, a symlink, a hard link), refused before any
# work with the input left as it was; non-regular inputs refused at once (a FIFO's open() would block
# forever, /dev/zero never ends); --input-format without .npy inputs; scale 0; pasa-gemm's model and size.
python3 - <<'P'
import struct
def npy(name, shape, vals, code="<f8"):
    h = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (code, ", ".join(map(str, shape)) + ("," if len(shape) == 1 else ""))
    h += " " * ((64 - (10 + len(h) + 1) % 64) % 64) + "\n"
    open(name, "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode() + struct.pack("<%dd" % len(vals), *vals))
npy("q37.npy", (8, 4), [0.5 + i / 64 for i in range(32)])
npy("k37.npy", (8, 4), [0.25 - i / 64 for i in range(32)])
npy("v37.npy", (8, 4), [1.0 + i / 32 for i in range(32)])
npy("b37.npy", (4, 8), [1.0 - i / 32 for i in range(32)])
npy("wide_a.npy", (40000, 1), [0.0] * 40000)
npy("wide_b.npy", (1, 40000), [0.0] * 40000)
P
qkv37=(--q q37.npy --k k37.npy --v v37.npy)
cp q37.npy q37.orig && ln -sf q37.npy q37.link && ln -f q37.npy q37.hard
for o in q37.npy q37.link q37.hard ./q37.npy; do
  expect 2 "--out-npy $o: is the same file as the input --q q37.npy" pasa-attn "${qkv37[@]}" --out-npy "$o"
  expect 2 "--golden-npy $o: is the same file as the input --q" pasa-attn "${qkv37[@]}" --golden-npy "$o"
  expect 2 "--out $o: is the same file as the input --a q37.npy" pasa-gemm --a q37.npy --b k37.npy --out "$o"
done
expect 2 "--out-npy v37.npy: is the same file as the input --v" pasa-attn "${qkv37[@]}" --out-npy v37.npy
expect 2 "--output q37.npy: is the same file as the input --input" pasa-round --format fp16 -i q37.npy -o q37.npy
cmp -s q37.npy q37.orig || { echo "FAIL: q37.npy changed"; failures=$((failures + 1)); }
printf '{"shape": {"B": 1, "Nq": 1, "Sq": 8, "D": 4}, "kv_len": {"npy": "kvl.npy"}}\n' >p37.json
python3 -c 'import struct; h="{'"'"'descr'"'"': '"'"'<i8'"'"', '"'"'fortran_order'"'"': False, '"'"'shape'"'"': (1,), }"; h+=" "*((64-(10+len(h)+1)%64)%64)+"\n"; open("kvl.npy","wb").write(b"\x93NUMPY\x01\x00"+struct.pack("<H",len(h))+h.encode()+struct.pack("<q",5))'
expect 2 "--out-npy kvl.npy: is the same file as the input p37.json:/kv_len/npy" pasa-attn --problem p37.json --out-npy kvl.npy
expect 2 "--json p37.json: is the same file as the input --problem" pasa-attribute --problem p37.json --json p37.json
mkfifo in.fifo
expect 2 "in.fifo: is a FIFO .*regular files only" pasa-attn --q in.fifo --k k37.npy --v v37.npy
expect 2 "in.fifo: is a FIFO" pasa-attn "${small[@]}" --pse in.fifo
expect 2 "in.fifo: is a FIFO" pasa-attn --problem in.fifo
expect 2 "in.fifo: is a FIFO" pasa-sweep in.fifo
expect 2 "/dev/zero: is a character device" pasa-attn --problem /dev/zero
expect 2 "/dev/zero: is a character device" pasa-gemm --a /dev/zero --b k37.npy --out c37.npy
expect 2 "no-such.npy: cannot open for reading: No such file or directory" pasa-attn --q no-such.npy --k k37.npy --v v37.npy
ln -sf loop1 loop2 && ln -sf loop2 loop1
expect 2 "loop1: cannot open for reading: Too many levels of symbolic links" pasa-attn --problem loop1
expect 2 "--input-format bf16: applies to the .npy inputs" pasa-attn "${small[@]}" --input-format bf16
expect 2 "--scale 0: must be > 0" pasa-attn "${small[@]}" --scale 0
printf '{"shape": {"B": 1, "Nq": 1, "Sq": 8, "D": 4}, "scale": 0}\n' >s0.json
expect 2 "s0.json:/scale: must be > 0 \\(got 0\\); omit it" pasa-attn --problem s0.json
expect 2 "--model h100: a tensor-core model takes operands of at most 26 bits.*B is fp64" \
  pasa-gemm --a q37.npy --b b37.npy --a-format fp16 --b-format fp64 --out c37.npy --model h100
expect 2 "--model h100_fp16: a tensor-core model .*A is fp64" pasa-gemm --a q37.npy --b b37.npy --out c37.npy --model h100_fp16
expect 2 "this GEMM needs about .*GiB of memory .*C \\(1 x 40000 x 40000\\).*--max-memory" \
  pasa-gemm --a wide_a.npy --b wide_b.npy --out c37.npy --max-memory 1G
absent c37.npy
long_name=$(printf 'o%.0s' $(seq 1 250)).npy  # 254 bytes: a legal name, with a temporary file beside it
expect 0 "rmse" pasa-attn "${small[@]}" --out-npy "$long_name"
is_kind -s "$long_name"

# Out of memory after the size check passed (here: --max-memory above what `ulimit -v` leaves, the inputs at
# fp16 alone 384 MiB and the output 512 MiB, whichever path runs; in the wild,
# an estimate that was low): its own exit status 4 and a message naming --max-memory, not exit 3. At 16
# threads a thread's stack is among what cannot be had: the loop goes on with the threads it has
# (core/parallel.hpp), where it used to abort (exit 134).
# Not under AddressSanitizer (PASA_SANITIZED, set by CMake): it cannot start under `ulimit -v` (its shadow
# memory reserves terabytes of address space), and its operator new reports an allocation it cannot serve as
# a fatal error instead of throwing std::bad_alloc, whatever allocator_may_return_null says.
if [[ -n ${PASA_SANITIZED:-} ]]; then
  echo "skipped under AddressSanitizer: the out-of-memory exit status (ulimit -v)"
else
  expect 4 "error: out of memory: the run needed more memory than was available.*--max-memory" \
    bash -c 'ulimit -v 600000 && exec pasa-attn --heads 32 --seq 16384 --dim 128 --max-memory 64G --threads 16'
fi

if ((failures > 0)); then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all CLI checks passed"
