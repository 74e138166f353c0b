/* MPI_Alloc_mem / MPI_Free_mem: shareable memory for windows.
 *
 * MPI advises programs to allocate window memory with MPI_Alloc_mem. Memory
 * from here lives in its own memfd, so MPI_Win_create over it is mapped by
 * every process of the node: load/store and CPU atomics, as for
 * MPI_Win_allocate, instead of one CMA system call per access. */
#include "os_mpi.h"

#include <errno.h>
#include <string.h>

static atomic_bool warned;

int MPI_Alloc_mem(MPI_Aint size, MPI_Info info, void *baseptr)
{
    os_mpi_init(MPI_COMM_NULL);
    if (os_config.alloc_mem_shared && size > 0) {
        void *p = os_shm_region_alloc((size_t)size, os_config.alloc_mem_max_regions);
        if (p) {
            *(void **)baseptr = p;
            return MPI_SUCCESS;
        }
        /* A slower path from here on: windows over this block use CMA. */
        if (!atomic_exchange(&warned, true)) {
            OS_WARN("MPI_Alloc_mem of %ld bytes falls back to the host MPI (%s); windows "
                    "created over such memory use CMA", (long)size, strerror(errno));
        }
    }
    return PMPI_Alloc_mem(size, info, baseptr);
}

int MPI_Free_mem(void *base)
{
    switch (os_shm_region_free(base)) {
    case OS_SHM_FREED:
        return MPI_SUCCESS;
    case OS_SHM_FREE_INVALID:
        /* Freed twice, or a pointer inside a block: the host would hand it
         * to free(), which aborts the process. */
        return os_mpi_raise_comm(MPI_COMM_WORLD, "MPI_Free_mem",
                                 OS_ERR(OS_ERR_BASE, "%p is not the start of a block "
                                                     "MPI_Alloc_mem gave out and not freed yet",
                                        base));
    case OS_SHM_FREE_NOT_OURS:
        break;
    }
    return PMPI_Free_mem(base);
}
