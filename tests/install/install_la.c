/*
 * install_la: a program linked against an installed libonesided_la (CMake's
 * onesided::la, or pkg-config's onesided-la). Links and loads it, and reads
 * its counters: nothing has been multiplied yet.
 */
#include <mpi.h>
#include <onesided_la.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    onesided_la_stats_t st;
    MPI_Init(&argc, &argv);
    onesided_la_get_stats(&st);
    int ok = st.pdgemm_calls == 0 && st.pdgetrf_calls == 0;
    printf("install_la: %s\n", ok ? "passed" : "FAILED");
    MPI_Finalize();
    return !ok;
}
