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
echo "== 8-byte latency, native MPICH RMA vs onesided, 2 processes on one node"
mpiexec.mpich -n 2 build-release/bench/os_microbench --csv results/microbench.csv "$@"
echo "results written to results/microbench.csv"
