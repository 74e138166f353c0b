#!/bin/sh
# Every MPI function the library exports starts on a 64-byte line
# (-falign-functions=64, CMakeLists.txt): the 8-byte paths' time moved with
# where the linker happened to put them (docs/benchmarks.md, stop 80).
# Usage: functions_aligned.sh LIBRARY
set -eu
lib=$1
nm -D --defined-only "$lib" | awk '
  $2 == "T" && $3 ~ /^MPI_/ {
    n++
    addr = 0; h = tolower($1)
    # the low 6 bits are the last two hex digits
    for (i = length(h) - 1; i <= length(h); i++)
      addr = addr * 16 + index("0123456789abcdef", substr(h, i, 1)) - 1
    if (addr % 64) { bad++; printf "%s starts %d bytes into a line\n", $3, addr % 64 }
  }
  END {
    if (n == 0) { print "no exported MPI functions found"; exit 1 }
    printf "%d of %d exported MPI functions start on a 64-byte line\n", n - bad, n
    exit bad > 0
  }'
