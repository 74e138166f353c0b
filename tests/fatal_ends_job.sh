#!/usr/bin/env bash
# A fatal RMA error ends the whole job at once, with a non-zero status and
# onesided's message, whatever the other processes wait in.
#   fatal_ends_job.sh MPIEXEC NP PROGRAM MODE
# A job that is still running after LIMIT seconds has hung: the others never
# heard of the abort (they would have waited for the launcher's timeout).
set -u
mpiexec=$1 np=$2 prog=$3 mode=$4
limit=20
out=$(mktemp)
start=$(date +%s)
timeout -s KILL 60 "$mpiexec" -n "$np" "$prog" "$mode" >"$out" 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))
cat "$out"
fail=0
grep -q "onesided: fatal error in MPI_Put on rank 0: MPI_Put" "$out" ||
    { echo "FAIL: no onesided fatal-error message"; fail=1; }
grep -q "no error raised" "$out" && { echo "FAIL: the erroneous call returned"; fail=1; }
[ "$rc" != 0 ] || { echo "FAIL: the job exited with status 0"; fail=1; }
[ "$elapsed" -le "$limit" ] ||
    { echo "FAIL: the job took ${elapsed} s to end (hung after the abort)"; fail=1; }
rm -f "$out"
[ $fail = 0 ] && echo "fatal error ($mode, $np processes): job ended in ${elapsed} s, status $rc"
exit $fail
