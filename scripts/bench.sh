#!/usr/bin/env bash
# The main job: build onesided and compare it with the host MPI's own RMA.
# Results go to results/ (CSV) and to the terminal.
#   scripts/bench.sh [--iters N] [--reps R]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build-release -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-release --target os_microbench
mkdir -p results
# Three ways of getting window memory: onesided maps the first and the third
# directly; MPI_Win_create over malloc'd memory is reached by CMA.
for flavor in allocate create_allocmem create; do
    echo "== 8-byte latency, native MPICH RMA vs onesided, 2 processes on one node"
    mpiexec.mpich -n 2 build-release/bench/os_microbench --flavor "$flavor" \
        --csv "results/microbench-$flavor.csv" "$@"
    echo
done
# The same passive-target operations while the target computes 100 us
# between MPI calls (paper 000, Figure 7): does the origin wait for it?
for flavor in allocate create; do
    echo "== the same with a busy target"
    mpiexec.mpich -n 2 build-release/bench/os_microbench --flavor "$flavor" --busy-target 100 \
        --iters 500 --reps 5 --csv "results/microbench-$flavor-busy.csv"
    echo
done
echo "results written to results/microbench-*.csv"
