#!/usr/bin/env python3
"""Predicted efficiency of `pasa-sweep --jobs J --threads J` from a one-job run (docs/speed.md, "Sweeps side
by side"), for a host with more cores than the one at hand.

Reads the results.csv of a sweep run at one job and takes each problem's time as its golden_time_s plus its
algorithms' time_s plus OTHER seconds (input generation, baseline, score statistics: 0.2 s a paper problem on
the 2-core VM). Deals the problems as schedule_problems (src/pasa/study/sweep.cpp) does — in problem order
(a paper sweep's problems all cost the same), the last n mod J on t threads each, t minimising rounds ·
(1 + F·(t − 1)) / t — and runs them on J slots taken in dealing order, a problem on t threads taking its time
· (1 + F·(t − 1)) / t (Amdahl, F the serial part of one problem: 0.1, measured at 2 threads). Prints the
efficiency T1 / (J · makespan) at each J, and that of whole problems on one thread each (the schedule
before the split).

Usage: sweep_schedule_model.py RESULTS_CSV... [--jobs 2,4,8,16] [--serial 0.1] [--other 0.2]
"""
import argparse
import csv
import heapq


def tail_threads(n, jobs, serial):
    tail = n % jobs
    best, best_time = 1, None
    for t in range(1, jobs + 1):
        at_once = min(jobs, jobs // t)
        rounds = -(-tail // at_once)
        time = rounds * (1 + serial * (t - 1)) / t
        if best_time is None or time < best_time * (1 - 1e-9):
            best, best_time = t, time
    return [1] * (n - tail) + [best] * tail


def makespan(durations, threads, slots, serial):
    free, now, running, i = slots, 0.0, [], 0
    while i < len(durations) or running:
        while i < len(durations) and free >= threads[i]:
            t = threads[i]
            heapq.heappush(running, (now + durations[i] * (1 + serial * (t - 1)) / t, t))
            free -= t
            i += 1
        now, t = heapq.heappop(running)
        free += t
    return now


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", nargs="+")
    ap.add_argument("--jobs", default="2,4,8,16")
    ap.add_argument("--serial", type=float, default=0.1)
    ap.add_argument("--other", type=float, default=0.2)
    a = ap.parse_args()
    jobs = [int(j) for j in a.jobs.split(",")]
    for path in a.csv:
        per = {}
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                p = int(r["problem_id"])
                g, s = per.get(p, (0.0, 0.0))
                per[p] = (float(r["golden_time_s"]), s + float(r["time_s"]))
        d = [g + s + a.other for _, (g, s) in sorted(per.items())]
        t1 = sum(d)
        cells = []
        for j in jobs:
            split = t1 / j / makespan(d, tail_threads(len(d), j, a.serial), j, a.serial)
            whole = t1 / j / makespan(d, [1] * len(d), j, a.serial)
            cells.append(f"{j} jobs {split:.2f} (whole problems {whole:.2f})")
        print(f"{path}: {len(d)} problems, {t1:.1f} s at one job; " + ", ".join(cells))


if __name__ == "__main__":
    main()
