#!/usr/bin/env python3
"""Each 8-byte row by where the job's stack landed in its page.

A fresh job of the same binary places its stack at a random page offset
(address space randomization), while the windows, the library's own
structures and the host MPI's queues land at the same offsets in every
job, so some placements of the stack make a path slower in every
repetition of that job (most likely 4K aliasing: a load whose address
matches an earlier, still pending store's in its low 12 bits waits for
it; docs/benchmarks.md). This sweep turns
randomization off (setarch -R) and moves the stack 16 bytes at a time
with an argument of growing length, RUNS jobs at each of the 256
placements, and reports per row and implementation the placements slow
in every run: a job slow for where its stack landed, told apart from a
job slow for the machine (slow at a placement in one run only).

  bench/stack_offsets.py BUILD [--host mpich|openmpi|mpich5|openmpi5]
                         [--rows put+flush,...] [--runs N] [--slow 1.15]

BUILD is a build folder (its bench/os_microbench). The host decides the
launcher (scripts/hosts.sh, ONESIDED_HOSTS_DIR for the PyPI ones). 256 x
RUNS jobs: about 20 s per run on MPICH, 5 min on Open MPI 5.0.11, whose
launcher starts slowly. Open MPI 4.1.4's own RMA crashes on this program:
there set BENCH_IMPLS=onesided (forwarded), and only onesided's rows run.
"""
import argparse
import collections
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
ROWS = "put+flush,get+flush,accumulate+flush,fetch_and_op,compare_and_swap,lock-put-unlock"


def launcher(host):
    sh = f'source "{ROOT}/scripts/hosts.sh"; host_launcher {host}'
    cmd = subprocess.run(["bash", "-c", sh], capture_output=True, text=True, check=True).stdout.strip()
    if host in ("openmpi", "openmpi5"):
        forward = ["-x", "BENCH_IMPLS"] if "BENCH_IMPLS" in os.environ else []
        return [cmd, "--oversubscribe", "--allow-run-as-root"] + forward
    return [cmd]


def one_job(cmd):
    """(stack page offset, {(row, column): median µs}) of one job."""
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if out.returncode or "origin stack page offset" not in out.stdout:
        sys.exit(f"stack_offsets: {' '.join(cmd[:6])} ... failed:\n{out.stdout}{out.stderr}")
    offset, rows = None, {}
    for line in out.stdout.splitlines():
        m = re.match(r"origin stack page offset (0x[0-9a-f]+)", line)
        if m:
            offset = int(m.group(1), 16)
        elif line.startswith("samples "):
            f = line.split()
            rows[(f[1], f[2])] = statistics.median(float(x) for x in f[3:])
    return offset, rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build")
    ap.add_argument("--host", default="mpich")
    ap.add_argument("--rows", default=ROWS)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--slow", type=float, default=1.15,
                    help="a placement is slow when its fastest run is this much above the row's median")
    a = ap.parse_args()
    binary = os.path.join(os.path.abspath(a.build), "bench", "os_microbench")
    base = ["setarch", os.uname().machine, "-R"] + launcher(a.host) + ["-n", "2", binary,
            "--flavor", "allocate", "--iters", "2000", "--reps", "3", "--only", a.rows, "--samples"]
    times = collections.defaultdict(lambda: collections.defaultdict(list))
    for _ in range(a.runs):
        for pad in range(0, 4096, 16):
            offset, rows = one_job(base + ["--pad", "x" * pad])
            for key, us in rows.items():
                times[key][offset].append(us)
    print(f"{a.host}: {a.runs} runs at each stack placement (address randomization off); per row, "
          f"µs median over all jobs, the slowest placements (their fastest run / median), and the "
          f"placements slow in every run (> {a.slow}x)")
    for key in sorted(times):
        by = times[key]
        med = statistics.median(x for v in by.values() for x in v)
        worst = sorted(((min(v) / med, off) for off, v in by.items()), reverse=True)
        slow = [f"{off:#05x}" for r, off in worst if r > a.slow]
        print(f"{key[0]:18s} {key[1]:8s} {med:8.4f}  " +
              ", ".join(f"{off:#05x} {r:.2f}" for r, off in worst[:3]) +
              f"  slow: {len(slow)} of {len(by)} {' '.join(slow)}")


if __name__ == "__main__":
    main()
