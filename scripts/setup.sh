#!/usr/bin/env bash
# Install what onesided needs on a Debian machine. Safe to run again.
#   scripts/setup.sh [--host NAME ...]
# --host mpich5 / openmpi5 also installs PyPI's MPICH 5.0 or Open MPI 5.0
# into a virtual environment of its own (scripts/hosts.sh); build for it
# with cmake -DHOST_MPICC=build-hosts/NAME/bin/mpicc (mpicc_abi of mpich5
# for the MPI-5 ABI: --host abi). --host impi installs Intel MPI 2021.19's
# run time (and mpich5, whose libfabric it uses).
set -euo pipefail
. "$(dirname "$0")/hosts.sh"
extra_hosts=()
while [ $# -gt 0 ]; do
    case "$1" in
    --host) host_known "$2" || { echo "setup.sh: unknown host '$2'" >&2; exit 2; }
        extra_hosts+=("$2"); shift 2 ;;
    *) echo "setup.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
PKGS="mpich libmpich-dev libucx-dev cmake ninja-build gcc make python3 python3-dev python3-venv pkg-config"
# The namespace test cluster (scripts/cluster.sh): namespaces, veth and a
# bridge, an sshd per host, and what its test script uses.
PKGS="$PKGS iproute2 util-linux procps openssh-server openssh-client bc"
# hpcc: the reference HPCC RandomAccess the main job compares with (it runs on Open MPI).
PKGS="$PKGS hpcc libopenblas0-pthread"
# Open MPI as a second host MPI (cmake -DONESIDED_HOST_MPI=openmpi), with
# the ScaLAPACK built for it.
PKGS="$PKGS openmpi-bin libopenmpi-dev libscalapack-openmpi-dev"
# ScaLAPACK (MPICH build) and OpenBLAS: the references of the linalg benchmark (paper 002).
PKGS="$PKGS libscalapack-mpich-dev libopenblas-dev"
missing=""
for p in $PKGS; do
    dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "setup: installing$missing"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
fi
# Open MPI (it comes with hpcc) switches /usr/bin/mpicc and mpiexec: pin
# MPICH back. The build and the scripts also call mpicc.mpich and
# mpiexec.mpich by name.
if [ -e /usr/bin/mpicc.mpich ] && [ "$(readlink -f /etc/alternatives/mpi 2>/dev/null)" != /usr/bin/mpicc.mpich ]; then
    $SUDO update-alternatives --set mpi /usr/bin/mpicc.mpich >/dev/null
    $SUDO update-alternatives --set mpirun /usr/bin/mpirun.mpich >/dev/null
fi
command -v mpicc.mpich >/dev/null && command -v mpiexec.mpich >/dev/null
for h in ${extra_hosts[@]+"${extra_hosts[@]}"}; do
    host_install "$h"
done
