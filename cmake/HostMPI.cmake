# The host MPI onesided is built for, and the UCX it must share with it.
#
# A user names the MPI the cluster already has in one of two ways:
#   -DHOST_MPICC=<prefix>/bin/mpicc     any MPI by its wrapper (PyPI's MPICH 5
#                                       or Open MPI 5, a module's MPI, ...);
#                                       mpicc_abi builds for the MPI-5 ABI
#   -DONESIDED_HOST_MPI=mpich|openmpi   Debian's packages (mpicc.mpich, the
#                                       default; mpicc.openmpi)
# The family (mpich, openmpi, abi) is read from the wrapper's mpi.h, the
# launcher is the wrapper's neighbour unless MPIEXEC_EXECUTABLE says, and the
# version is printed. Sets ONESIDED_HOST_MPI (the family), ONESIDED_HOST_NAME,
# ONESIDED_HOST_VERSION, ONESIDED_HOST_LAUNCHER_KIND (hydra or prte: how the
# launcher forwards environment) and the target onesided_ucx.

set(ONESIDED_HOST_MPI "" CACHE STRING
  "Host MPI family: mpich or openmpi (Debian's, by wrapper name), abi; empty: read from HOST_MPICC's mpi.h")
set_property(CACHE ONESIDED_HOST_MPI PROPERTY STRINGS "" mpich openmpi abi)
set(_asked "${ONESIDED_HOST_MPI}")

if(NOT HOST_MPICC)
  if(_asked STREQUAL "openmpi")
    find_program(HOST_MPICC NAMES mpicc.openmpi)
    find_program(MPIEXEC_EXECUTABLE NAMES mpirun.openmpi)
    set(_pkg "openmpi-bin libopenmpi-dev")
  elseif(_asked STREQUAL "" OR _asked STREQUAL "mpich")
    find_program(HOST_MPICC NAMES mpicc.mpich)
    find_program(MPIEXEC_EXECUTABLE NAMES mpiexec.mpich)
    set(_pkg "mpich libmpich-dev")
  elseif(_asked STREQUAL "abi")
    message(FATAL_ERROR "ONESIDED_HOST_MPI=abi: name the MPI-5 ABI wrapper, "
      "-DHOST_MPICC=<prefix>/bin/mpicc_abi (MPICH 5.0's, say: pip install mpich)")
  else()
    message(FATAL_ERROR "ONESIDED_HOST_MPI=${_asked}: the family must be mpich, openmpi or abi")
  endif()
  if(NOT HOST_MPICC)
    message(FATAL_ERROR "The host MPI's compiler wrapper was not found. On Debian: "
      "apt-get install ${_pkg} (scripts/setup.sh does); or name any MPI's wrapper with "
      "-DHOST_MPICC=<prefix>/bin/mpicc (scripts/setup.sh --host mpich5|openmpi5 installs PyPI's)")
  endif()
endif()
if(NOT MPIEXEC_EXECUTABLE)
  get_filename_component(_bindir "${HOST_MPICC}" DIRECTORY)
  find_program(MPIEXEC_EXECUTABLE NAMES mpiexec mpirun PATHS "${_bindir}" NO_DEFAULT_PATH)
endif()
if(NOT MPIEXEC_EXECUTABLE)
  message(FATAL_ERROR "No launcher beside ${HOST_MPICC}: pass -DMPIEXEC_EXECUTABLE=...")
endif()

set(MPI_C_COMPILER ${HOST_MPICC})
find_package(MPI COMPONENTS C)
if(NOT MPI_C_FOUND)
  message(FATAL_ERROR "${HOST_MPICC} does not build MPI programs (are its development "
    "files installed? On Debian: apt-get install libmpich-dev or libopenmpi-dev)")
endif()

# The family, from the macros the wrapper's mpi.h defines (with the
# wrapper's own -D flags: mpicc_abi passes -DMPI_ABI). Checked afresh on
# every configure, so that a changed HOST_MPICC is not judged by old results.
include(CheckSymbolExists)
set(CMAKE_REQUIRED_INCLUDES ${MPI_C_INCLUDE_DIRS})
set(CMAKE_REQUIRED_DEFINITIONS)
foreach(d ${MPI_C_COMPILE_DEFINITIONS})
  list(APPEND CMAKE_REQUIRED_DEFINITIONS -D${d})
endforeach()
set(CMAKE_REQUIRED_QUIET ON)
set(_family "")
foreach(pair "abi:MPI_ABI_VERSION" "openmpi:OMPI_MAJOR_VERSION" "mpich:MPICH_VERSION")
  string(REPLACE ":" ";" pair "${pair}")
  list(GET pair 0 _fam)
  list(GET pair 1 _macro)
  unset(_onesided_has_${_fam} CACHE)
  check_symbol_exists(${_macro} mpi.h _onesided_has_${_fam})
  if(_onesided_has_${_fam})
    set(_family ${_fam})
    break()
  endif()
endforeach()
unset(CMAKE_REQUIRED_INCLUDES)
unset(CMAKE_REQUIRED_DEFINITIONS)
unset(CMAKE_REQUIRED_QUIET)
if(NOT _family)
  message(FATAL_ERROR "The mpi.h of ${HOST_MPICC} (${MPI_C_INCLUDE_DIRS}) is neither MPICH's, "
    "Open MPI's nor the MPI-5 ABI's: onesided supports those (Intel MPI through the MPICH ABI "
    "or the MPI-5 ABI)")
endif()
if(_asked AND NOT _asked STREQUAL _family)
  message(FATAL_ERROR "ONESIDED_HOST_MPI=${_asked}, but the mpi.h of ${HOST_MPICC} is ${_family}'s")
endif()
set(ONESIDED_HOST_MPI ${_family} CACHE STRING "" FORCE)

# The version, for the configure line and the installed files.
set(_mpih "")
foreach(dir ${MPI_C_INCLUDE_DIRS})
  if(EXISTS "${dir}/mpi.h")
    set(_mpih "${dir}/mpi.h")
    break()
  endif()
endforeach()
macro(_onesided_header_value file name out)
  set(${out} "")
  if(EXISTS "${file}")
    file(STRINGS "${file}" _line REGEX "^#define[ \t]+${name}[ \t]")
    if(_line)
      string(REGEX REPLACE "^#define[ \t]+${name}[ \t]+\"?([^\" \t]*)\"?.*" "\\1" ${out} "${_line}")
    endif()
  endif()
endmacro()
if(_family STREQUAL "mpich")
  _onesided_header_value("${_mpih}" MPICH_VERSION _v)
  set(ONESIDED_HOST_NAME "MPICH")
  set(ONESIDED_HOST_LAUNCHER_KIND hydra)
elseif(_family STREQUAL "openmpi")
  _onesided_header_value("${_mpih}" OMPI_MAJOR_VERSION _ma)
  _onesided_header_value("${_mpih}" OMPI_MINOR_VERSION _mi)
  _onesided_header_value("${_mpih}" OMPI_RELEASE_VERSION _re)
  set(_v "${_ma}.${_mi}.${_re}")
  set(ONESIDED_HOST_NAME "Open MPI")
  set(ONESIDED_HOST_LAUNCHER_KIND prte)
else()
  get_filename_component(_incdir "${_mpih}" DIRECTORY)
  _onesided_header_value("${_incdir}/mpi_abi.h" MPI_ABI_VERSION _ma)
  _onesided_header_value("${_incdir}/mpi_abi.h" MPI_ABI_SUBVERSION _mi)
  set(_v "${_ma}.${_mi}")
  set(ONESIDED_HOST_NAME "the MPI-5 ABI")
  # Both MPIs that implement the ABI here (MPICH 5, Intel MPI) launch with
  # hydra; the library runs under whichever libmpi_abi.so.1 is found first.
  set(ONESIDED_HOST_LAUNCHER_KIND hydra)
endif()
set(ONESIDED_HOST_VERSION "${_v}")

# The MPI library the wrapper links (a linker script on PyPI's wheels:
# INPUT(libmpi.so.12)), resolved to the shared object the loader maps.
set(_mpi_so "")
foreach(lib ${MPI_C_LIBRARIES})
  get_filename_component(_name "${lib}" NAME)
  if(_name MATCHES "^lib(mpi|mpich|mpi_abi)\\.so")
    get_filename_component(_mpi_so "${lib}" REALPATH)
    break()
  endif()
endforeach()
if(_mpi_so)
  file(READ "${_mpi_so}" _head LIMIT 64)
  if(_head MATCHES "INPUT\\(([^ )]+)")
    get_filename_component(_dir "${_mpi_so}" DIRECTORY)
    get_filename_component(_mpi_so "${_dir}/${CMAKE_MATCH_1}" REALPATH)
  endif()
endif()

# One UCX per process. onesided's own worker must use the libucp its host
# MPI loads: two copies (PyPI's MPIs carry UCX 1.20 in lib/mpich or
# lib/openmpi, Debian has 1.13 in /usr/lib) would each bring their own
# memory hooks, transports and configuration into one process. So the
# library links the libucp the host's libmpi resolves to and finds it
# again at run time by DT_RPATH, which, unlike RUNPATH, the loader tries
# before LD_LIBRARY_PATH; whichever of onesided
# and libmpi loads first, the other's NEEDED libucp.so.0 then finds that
# copy by its soname. Where libmpi links no UCX (Debian's Open MPI loads
# it in a plugin, from the system's path; an MPI over OFI), the system's
# UCX is used. Headers are the system's libucx-dev: UCP's API is
# compatible across 1.x, and the run-time version is printed
# (ONESIDED_HELP=1).
find_package(PkgConfig REQUIRED)
pkg_check_modules(UCX ucx)
if(NOT UCX_FOUND)
  message(FATAL_ERROR "UCX's development files were not found (pkg-config ucx): onesided's "
    "network layer needs them. On Debian: apt-get install libucx-dev (scripts/setup.sh does)")
endif()
set(ONESIDED_UCX_DIR "")
if(_mpi_so)
  execute_process(COMMAND ldd "${_mpi_so}" OUTPUT_VARIABLE _ldd ERROR_QUIET)
  if(_ldd MATCHES "libucp\\.so\\.0 => ([^ \t\n]+)")
    get_filename_component(ONESIDED_UCX_DIR "${CMAKE_MATCH_1}" DIRECTORY)
  endif()
endif()
add_library(onesided_ucx INTERFACE)
target_include_directories(onesided_ucx INTERFACE ${UCX_INCLUDE_DIRS})
if(ONESIDED_UCX_DIR)
  # All four, though onesided calls only UCP and UCS: each becomes a NEEDED
  # entry found by onesided's DT_RPATH. libucp's own RUNPATH ($ORIGIN) ranks
  # below LD_LIBRARY_PATH, so left to it, a user's LD_LIBRARY_PATH would
  # bring the system's libuct under the host's libucp.
  set(_ucx_libs "")
  foreach(l ucp uct ucs ucm)
    if(EXISTS "${ONESIDED_UCX_DIR}/lib${l}.so.0")
      list(APPEND _ucx_libs "${ONESIDED_UCX_DIR}/lib${l}.so.0")
    endif()
  endforeach()
  target_link_libraries(onesided_ucx INTERFACE -Wl,--no-as-needed ${_ucx_libs} -Wl,--as-needed)
  # The version of that copy, not of the headers: the one the processes run.
  try_run(_ucx_ran _ucx_built ${CMAKE_BINARY_DIR}/ucx-version
    ${CMAKE_CURRENT_LIST_DIR}/ucx_version.c
    CMAKE_FLAGS "-DINCLUDE_DIRECTORIES=${UCX_INCLUDE_DIRS}"
    LINK_OPTIONS "-Wl,-rpath,${ONESIDED_UCX_DIR}" "-Wl,--disable-new-dtags"
    LINK_LIBRARIES ${_ucx_libs}
    RUN_OUTPUT_VARIABLE ONESIDED_UCX_VERSION)
  if(NOT _ucx_built OR NOT _ucx_ran EQUAL 0)
    set(ONESIDED_UCX_VERSION "unknown")
  endif()
  set(_ucx_from "the host MPI's, ${ONESIDED_UCX_VERSION}, ${ONESIDED_UCX_DIR}")
else()
  target_link_directories(onesided_ucx INTERFACE ${UCX_LIBRARY_DIRS})
  target_link_libraries(onesided_ucx INTERFACE ucp uct ucs ucm)
  set(ONESIDED_UCX_VERSION "${UCX_VERSION}")
  set(_ucx_from "the system's (${UCX_VERSION}; the host's libmpi links none)")
endif()

message(STATUS "onesided: host MPI ${ONESIDED_HOST_NAME} ${ONESIDED_HOST_VERSION} "
  "(${ONESIDED_HOST_MPI}), ${HOST_MPICC}, launcher ${MPIEXEC_EXECUTABLE}, library ${_mpi_so}")
message(STATUS "onesided: UCX ${_ucx_from}; headers ${UCX_VERSION}")
