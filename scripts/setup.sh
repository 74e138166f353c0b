#!/usr/bin/env bash
# Install what onesided needs on a Debian machine. Safe to run again.
set -euo pipefail
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
PKGS="mpich libmpich-dev libucx-dev cmake ninja-build gcc make python3 python3-dev python3-venv"
missing=""
for p in $PKGS; do
    dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "setup: installing$missing"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
fi
# Other MPI packages (Open MPI comes with hpcc) switch /usr/bin/mpicc; the
# build and the scripts call mpicc.mpich and mpiexec.mpich by name instead.
command -v mpicc.mpich >/dev/null && command -v mpiexec.mpich >/dev/null
