#!/usr/bin/env bash
# The main job: build onesided and its benchmarks, then run every benchmark
# with the host MPI's own RMA and with onesided in the same processes.
# Tables on the terminal; CSV, JSON and PNG figures under results/.
#   scripts/bench.sh [--smoke] [--np N] [--log2-local K] [--reps R] [--out DIR] [--no-hpcc]
# (all flags go to bench/run_all.py; --help lists them)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build-release -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
targets="os_microbench rma_sweep ghost_exchange randomaccess busy_epochs rget_overlap lock_bench cooperation"
# linalg exists when ScaLAPACK and OpenBLAS were found (setup.sh installs them)
grep -q "bench/linalg:" build-release/build.ninja && targets="$targets linalg"
cmake --build build-release --target $targets
# matplotlib from PyPI, in a private environment
if [ ! -x build-release/venv/bin/python ]; then
    python3 -m venv build-release/venv
fi
build-release/venv/bin/python -c 'import matplotlib' 2>/dev/null ||
    build-release/venv/bin/pip install -q matplotlib
exec build-release/venv/bin/python bench/run_all.py "$@"
