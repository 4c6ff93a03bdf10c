#!/usr/bin/env python3
"""Mutation testing of src/pasa.

Applies each mutant of mutants/*.txt (a file, an exact text found exactly once in it, and its replacement) to
the source tree, builds the test binary incrementally in a separate build folder (ccache), runs the default
tests (those of `ctest -LE long`), and reports per mutant whether a test failed (killed) or not (survived).
The source is restored after each mutant, also on Ctrl-C / SIGTERM. Exits 1 when a mutant survives.

  tests/mutation/run_mutants.py [--source DIR] [--build-dir DIR] [--only NAME ...] [--report FILE]
                                [--screen-only] [--jobs N]

A mutant is first run against a quick screen (the reference emulator, algorithm and golden tests); only
mutants that pass the screen get the whole default run. A mutant whose build fails is reported as
"stillborn" (not counted as killed). Registered in CTest as `mutation` (labels mutation and long, so the
default run, ctest -LE long, leaves it out): ctest -L mutation.
"""
import argparse
import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# Quick screen, in order, each stopping at its first failure (-a): the fast, sharp tests first.
SCREEN = ["[#test_reference_emulator]", "[#test_golden_claim]", "[#test_algorithms],[#test_golden]"]


def parse_mutants(path):
    """Blocks of `[name]`, `file = ...`, `find = ...`, `replace = ...` (\\n in find/replace is a newline), from a
    file or from every *.txt of a folder, in name order (mutants/: one file per group of topics)."""
    if os.path.isdir(path):
        mutants = []
        for name in sorted(n for n in os.listdir(path) if n.endswith(".txt")):
            mutants += parse_mutants(os.path.join(path, name))
        names = [m["name"] for m in mutants]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            sys.exit(f"{path}: mutant names used twice: {', '.join(dup)}")
        return mutants
    mutants, cur = [], None
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            if line.startswith("[") and line.endswith("]"):
                cur = {"name": line[1:-1], "line": lineno, "path": os.path.relpath(path, HERE)}
                mutants.append(cur)
                continue
            key, sep, value = line.partition(" = ")
            if not sep or cur is None or key not in ("file", "find", "replace", "why"):
                sys.exit(f"{path}:{lineno}: expected [name] or file/find/replace/why = value, got: {line}")
            cur[key] = value.replace("\\n", "\n") if key in ("find", "replace") else value
    for m in mutants:
        for key in ("file", "find", "replace"):
            if key not in m:
                sys.exit(f"{path}:{m['line']}: mutant {m['name']} has no '{key} = ...'")
    return mutants


class Restorer:
    """Holds the original text of the file being mutated; puts it back on exit or signal."""

    def __init__(self):
        self.path, self.text = None, None

    def save(self, path, text):
        self.path, self.text = path, text

    def restore(self):
        if self.path is not None:
            with open(self.path, "w", encoding="utf-8") as f:
                f.write(self.text)
            self.path, self.text = None, None


def run(cmd, cwd, timeout):
    t0 = time.time()
    try:
        p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
        return p.returncode, p.stdout, time.time() - t0
    except subprocess.TimeoutExpired as e:
        return 124, (e.stdout or "") if isinstance(e.stdout, str) else "", time.time() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", default=os.path.dirname(os.path.dirname(HERE)))
    ap.add_argument("--build-dir", default=None, help="default: <source>/build-mutation")
    ap.add_argument("--mutants", default=os.path.join(HERE, "mutants"),
                    help="a mutants file, or a folder of them (default: tests/mutation/mutants/)")
    ap.add_argument("--only", nargs="*", default=None, help="run only these mutants (by name)")
    ap.add_argument("--shard", default=None, help="K/N: run only the mutants whose index %% N == K")
    ap.add_argument("--report", default=None, help="write the markdown table here too")
    ap.add_argument("--screen-only", action="store_true", help="skip the whole default run for screen survivors")
    ap.add_argument("--jobs", default="2")
    ap.add_argument("--timeout", type=int, default=1800)
    ap.add_argument("--check", action="store_true",
                    help="only check that each mutant's find text occurs exactly once in its file (no build)")
    a = ap.parse_args()
    src = os.path.abspath(a.source)
    build = os.path.abspath(a.build_dir or os.path.join(src, "build-mutation"))
    mutants = parse_mutants(a.mutants)
    if a.only:
        unknown = set(a.only) - {m["name"] for m in mutants}
        if unknown:
            sys.exit(f"unknown mutants: {', '.join(sorted(unknown))}")
        by_name = {m["name"]: m for m in mutants}
        mutants = [by_name[n] for n in a.only]  # in the order given

    if a.shard:
        k, n = (int(x) for x in a.shard.split("/"))
        mutants = [m for i, m in enumerate(mutants) if i % n == k]

    if a.check:
        bad = 0
        for m in mutants:
            with open(os.path.join(src, m["file"]), encoding="utf-8") as f:
                count = f.read().count(m["find"])
            if count != 1:
                bad += 1
                print(f"{m['name']}: find text occurs {count} times in {m['file']} ({m['path']} line {m['line']})")
        print(f"{len(mutants) - bad} of {len(mutants)} mutants apply")
        sys.exit(1 if bad else 0)

    restorer = Restorer()

    def on_signal(signum, _frame):
        restorer.restore()
        sys.exit(f"interrupted by signal {signum}; source restored")

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)

    env_ok = run(["cmake", "-S", src, "-B", build, "-DCMAKE_BUILD_TYPE=Release"], src, 600)
    if env_ok[0] != 0:
        sys.exit("configure failed:\n" + env_ok[1][-3000:])
    rc, out, _ = run(["cmake", "--build", build, "-j", a.jobs], src, a.timeout)
    if rc != 0:
        sys.exit("the unmutated source does not build:\n" + out[-3000:])
    tests = os.path.join(build, "pasa-tests")

    results = []
    try:
        for m in mutants:
            path = os.path.join(src, m["file"])
            with open(path, encoding="utf-8") as f:
                text = f.read()
            count = text.count(m["find"])
            if count != 1:
                results.append((m, "invalid", f"find text occurs {count} times", 0))
                print(f"{m['name']}: invalid (find text occurs {count} times in {m['file']})", flush=True)
                continue
            restorer.save(path, text)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text.replace(m["find"], m["replace"]))
            t0 = time.time()
            rc, out, _ = run(["cmake", "--build", build, "-j", a.jobs, "--target", "pasa-tests"], src, a.timeout)
            if rc != 0:
                verdict, detail = "stillborn", "build failed"
            else:
                killer = None
                for tags in SCREEN:
                    rc, out, _ = run([tests, "-a", "--filenames-as-tags", tags + "~[long]"], src, a.timeout)
                    if rc != 0:
                        killer = tags
                        break
                if killer:
                    verdict, detail = "killed", killer.replace("[#", "").replace("]", "")
                elif a.screen_only:
                    verdict, detail = "survived", "screen only"
                else:
                    # The default run includes tests of the programs (doc_commands, the CLI tests): build them
                    # too, or a missing program would "kill" the mutant.
                    rc, out, _ = run(["cmake", "--build", build, "-j", a.jobs], src, a.timeout)
                    if rc != 0:
                        verdict, detail = "stillborn", "build of the programs failed"
                    else:
                        rc, out, _ = run(["ctest", "--test-dir", build, "-LE", "long", "-j", a.jobs], src, a.timeout)
                        if rc != 0:
                            failing = [l.strip() for l in out.splitlines() if "(Failed)" in l or "(Timeout)" in l]
                            verdict, detail = "killed", "default run: " + "; ".join(failing)[:200]
                        else:
                            verdict, detail = "survived", "default run passed"
            restorer.restore()
            dt = time.time() - t0
            results.append((m, verdict, detail, dt))
            print(f"{m['name']}: {verdict} ({detail}, {dt:.0f} s)", flush=True)
    finally:
        restorer.restore()
        # Rebuild the unmutated programs so the build folder matches the source.
        run(["cmake", "--build", build, "-j", a.jobs], src, a.timeout)

    killed = sum(1 for r in results if r[1] == "killed")
    survived = [r for r in results if r[1] == "survived"]
    lines = ["| mutant | file | verdict | by |", "|---|---|---|---|"]
    for m, verdict, detail, _ in results:
        lines.append(f"| {m['name']} | {m['file'].replace('src/pasa/', '')} | {verdict} | {detail} |")
    lines.append("")
    lines.append(f"{killed} of {len(results)} killed, {len(survived)} survived, "
                 f"{sum(1 for r in results if r[1] in ('invalid', 'stillborn'))} invalid or stillborn.")
    table = "\n".join(lines)
    print(table)
    if a.report:
        with open(a.report, "w", encoding="utf-8") as f:
            f.write(table + "\n")
    sys.exit(1 if survived or any(r[1] in ("invalid", "stillborn") for r in results) else 0)


if __name__ == "__main__":
    main()
