#!/usr/bin/env bash
# The installed tree as other builds use it (ctest: install_tree).
#   install_test.sh BUILD_DIR SOURCE_DIR MPICC MPIEXEC HOST_NAME
# Installs BUILD_DIR into a fresh prefix, then builds tests/install's
# programs against it twice, with find_package(onesided) and with
# pkg-config (-lonesided before the MPI library the wrapper adds), runs
# them on 2 processes, and checks that onesided-run --version names the host
# MPI and the installed library.
set -euo pipefail
build=$1 src=$2 mpicc=$3 mpiexec=$4 host=$5
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

cmake --install "$build" --prefix "$prefix" >/dev/null
for f in lib/libonesided.so include/onesided.h bin/onesided-run lib/pkgconfig/onesided.pc \
         lib/cmake/onesided/onesidedConfig.cmake lib/cmake/onesided/onesidedTargets.cmake; do
    [ -e "$prefix/$f" ] || { echo "install_test: $f not installed"; exit 1; }
done

# onesided-run --version: the host MPI, and the library beside it.
version=$("$prefix/bin/onesided-run" --version)
echo "$version"
grep -q "^host MPI: $host" <<<"$version" || { echo "install_test: --version does not name $host"; exit 1; }
grep -qF "library: $prefix/lib/libonesided.so" <<<"$version" ||
    { echo "install_test: --version does not name the installed library"; exit 1; }
grep -q "host_mpi=$host" "$prefix/lib/pkgconfig/onesided.pc" ||
    { echo "install_test: onesided.pc does not name $host"; exit 1; }

# CMake: find_package(onesided) from the prefix.
cmake -S "$src/tests/install" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/cmake" >/dev/null
"$mpiexec" -n 2 "$work/cmake/install_prog"
[ -x "$work/cmake/install_la" ] && "$mpiexec" -n 1 "$work/cmake/install_la"

# pkg-config, as the README tells users: the wrapper adds libmpi last.
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
"$mpicc" "$src/tests/install/install_prog.c" $(pkg-config --cflags --libs onesided) -o "$work/pc_prog"
readelf -d "$work/pc_prog" | grep -q "NEEDED.*libonesided.so" ||
    { echo "install_test: pkg-config's program does not link libonesided"; exit 1; }
"$mpiexec" -n 2 "$work/pc_prog"
if [ -e "$prefix/lib/pkgconfig/onesided-la.pc" ]; then
    "$mpicc" "$src/tests/install/install_la.c" $(pkg-config --cflags --libs onesided-la) -o "$work/pc_la"
    "$mpiexec" -n 1 "$work/pc_la"
fi
echo "install_test: passed"
