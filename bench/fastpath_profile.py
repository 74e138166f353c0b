#!/usr/bin/env python3
"""Where the time of an 8-byte put + flush goes, nanosecond by nanosecond.

Runs os_microbench's put+flush row (MPI_Win_allocate, 2 processes, the
target waiting inside MPI) once per implementation, with the origin under
`perf record`, and splits the measured time per iteration among the pieces
of the path by the share of the origin's samples that fell in each:

  bench/fastpath_profile.py BUILD [--host mpich|openmpi|mpich5|openmpi5]
                            [--rows put+flush,...] [--iters N] [--reps R]

BUILD is a build folder (its bench/os_microbench). The host decides the
launcher (scripts/hosts.sh, ONESIDED_HOSTS_DIR for the PyPI ones). Needs
perf(1). Samples outside the timed loop (start-up, the barriers between
repetitions) are kept small by many iterations and are listed as "other".
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# Pieces of the path, first match wins: (label, symbol regex, dso regex).
PIECES = [
    ("application loop and timer", r"^(main|__vdso_.*|clock_gettime|gettimeofday)$", r""),
    ("PLT stubs (calls across libraries)", r"@plt$", r""),
    ("window and datatype handle lookups (out of line)",
     r"^(os_mpi_win|os_mpi_win_lookup|os_hmap_get|os_mpi_win_lock|os_mpi_win_unlock|"
     r"os_mpi_dtype|os_mpi_dtype_lookup|dtype)(\..*)?$", r"onesided"),
    ("MPI_Put front end (arguments, operation record)", r"^(MPI_Put|issue|fast_lane)(\..*)?$",
     r"onesided"),
    ("engine: single-element path (checks, counters, the store)",
     r"^(os_rma_issue|os_rma_fast|fast_path|count_op|copy_element)(\..*)?$", r"onesided"),
    ("MPI_Win_flush front end", r"^MPI_Win_flush$", r"onesided"),
    ("flush: engine (pending accumulates, network, barrier)",
     r"^(os_win_flush|os_acc_drain|os_remote_flush|os_wait_.*)(\..*)?$", r"onesided"),
    ("onesided, other", r".", r"onesided"),
    ("host MPI", r".", r"libmpi|libopen-|libpmix|libucs|libucp|libuct|libprrte|libhwloc"),
    ("C library (memcpy, ...)", r".", r"libc\.so|libc-"),
]


def launcher(host):
    env = dict(os.environ)
    sh = (f'source "{ROOT}/scripts/hosts.sh"; host_launcher {host}')
    cmd = subprocess.run(["bash", "-c", sh], capture_output=True, text=True, env=env,
                         check=True).stdout.strip()
    if host in ("openmpi", "openmpi5"):
        return [cmd, "--oversubscribe", "--allow-run-as-root", "-x", "BENCH_IMPLS"]
    return [cmd]


def run(build, host, impl, rows, iters, reps, tmp):
    data = os.path.join(tmp, f"perf.{impl}.data")
    wrap = os.path.join(tmp, "wrap.sh")
    with open(wrap, "w") as f:
        f.write('#!/bin/bash\nr=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}\n'
                f'if [ "$r" = 0 ]; then exec perf record -q -F 20000 --all-user -o {data} "$@"; '
                'else exec "$@"; fi\n')
    os.chmod(wrap, 0o755)
    env = dict(os.environ, BENCH_IMPLS=impl)
    out = subprocess.run(launcher(host) + ["-n", "2", wrap, os.path.join(build, "bench",
                         "os_microbench"), "--only", rows, "--iters", str(iters), "--reps",
                         str(reps)], capture_output=True, text=True, env=env)
    if out.returncode:
        sys.exit(f"fastpath_profile: the run failed:\n{out.stdout}\n{out.stderr}")
    col = 1 if impl == "native" else 2
    usec = {}
    for line in out.stdout.splitlines():
        for row in rows.split(","):
            if line.startswith(row + " "):
                usec[row] = float(line[len(row):].split()[col - 1])
    rep = subprocess.run(["perf", "report", "-i", data, "--no-children", "--stdio", "--sort",
                          "dso,sym", "-F", "overhead,dso,sym"], capture_output=True, text=True)
    samples = []
    for line in rep.stdout.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+(\S+)\s+\[.\]\s+(.*\S)", line)
        if m:
            samples.append((float(m.group(1)), m.group(2), m.group(3)))
    return usec, samples


def split(samples):
    shares = {p[0]: 0.0 for p in PIECES}
    shares["other"] = 0.0
    for pct, dso, sym in samples:
        for label, sym_re, dso_re in PIECES:
            if re.search(sym_re, sym) and (not dso_re or re.search(dso_re, dso)):
                shares[label] += pct
                break
        else:
            shares["other"] += pct
    return shares


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build")
    ap.add_argument("--host", default="mpich")
    ap.add_argument("--rows", default="put+flush")
    ap.add_argument("--iters", type=int, default=100000)
    ap.add_argument("--reps", type=int, default=31)
    ap.add_argument("--impls", default="native,onesided")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for impl in a.impls.split(","):
            usec, samples = run(a.build, a.host, impl, a.rows, a.iters, a.reps, tmp)
            total = sum(usec.values()) * 1000.0
            shares = split(samples)
            print(f"\n{impl} on {a.host}: "
                  + ", ".join(f"{r} {v * 1000:.1f} ns" for r, v in usec.items()))
            print(f"| piece | share of samples | ns per iteration |")
            print(f"|---|---:|---:|")
            for label, pct in sorted(shares.items(), key=lambda kv: -kv[1]):
                if pct >= 0.5:
                    print(f"| {label} | {pct:.1f}% | {pct / 100 * total:.1f} |")


if __name__ == "__main__":
    main()
