/*
 * Shared-memory transport: segments that every process of a node maps, and
 * single-copy access to another process's private memory (Linux CMA).
 */
#ifndef OS_SHM_H
#define OS_SHM_H

#include <mpi.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "../../util/os_util.h"

typedef struct {
    void *addr;
    size_t size;
} os_shm_seg_t;

/* Collective over node_comm (all processes on one node): node rank 0 creates a
 * segment of `size` bytes (zero-filled), every process maps it. The name is
 * unlinked before return, so nothing leaks if a process dies later. */
os_status_t os_shm_create(MPI_Comm node_comm, size_t size, os_shm_seg_t *seg);
void os_shm_destroy(os_shm_seg_t *seg);

/* Shareable private memory: MPI_Alloc_mem hands out blocks in regions backed
 * by a memfd (a large block has one of its own, small ones share arenas),
 * so that a window later created over them can be mapped by the other
 * processes of the node (through /proc/<pid>/fd/<fd>) instead of being
 * reached by CMA. The descriptor stays open while the region lives. These
 * calls are thread-safe (programs allocate from several threads). A fork()ed
 * child gets every region as a private copy-on-write mapping, as it would
 * private memory (its pages not yet written show the parent's later
 * writes): nothing it writes reaches the parent. */
typedef struct {
    char *base;
    size_t size; /* mapped bytes, a whole number of pages */
    int fd;
    uint64_t id; /* unique to this region in this process's life: a peer's cache key */
    bool adopted; /* the program's own memory, made shareable for windows over it */
    int refs;     /* adopted: the windows over it */
} os_shm_region_t;

/* A block of at least `size` bytes, or NULL (errno set) when it needs a new
 * region and the limit of regions (live and spare: each holds a
 * descriptor) is reached, or the system refuses. Like malloc, it is not
 * zeroed when it reuses freed memory. */
void *os_shm_region_alloc(size_t size, int max_live);
/* Grow the process's descriptor table now for max_live regions (and as many
 * adopted ones), so that it never grows while threads share it (region.c).
 * Call before the host MPI starts threads; where the table cannot grow (the
 * descriptor limit), regions still work. */
void os_shm_region_reserve_fds(int max_live);
/* Release a block. A few freed regions are kept as spares for the next
 * allocations of their size. */
typedef enum {
    OS_SHM_FREED,
    OS_SHM_FREE_NOT_OURS, /* in no region: another allocator's */
    OS_SHM_FREE_INVALID   /* inside an arena but not a live block's start */
} os_shm_free_t;
os_shm_free_t os_shm_region_free(void *base);
/* Copy out the region holding [addr, addr+len); false when there is none. */
bool os_shm_region_find(const void *addr, size_t len, os_shm_region_t *out);
/* MPI_Win_create over the program's own memory (remap.c): the region that
 * holds [addr, addr + len), made shareable in place if it is not in one yet,
 * where that is safe: its whole pages, or the pages of a glibc mmapped
 * chunk, all private anonymous memory; failing that, a region of the whole
 * pages inside it only (a block in the heap shares its first and last page
 * with other objects), which then does not hold all of it. Returns false
 * (nothing changed) for other memory, when the limit of descriptors is
 * reached or the system refuses. An adopted region (out->adopted) is counted per window: give it
 * back with os_shm_region_unadopt, which makes the pages private again
 * when the last window over them is freed. */
bool os_shm_region_adopt(const void *addr, size_t len, int max_live, os_shm_region_t *out);
void os_shm_region_unadopt(void *base);
/* Map another process's region (descriptor fd, unique id); NULL when it
 * cannot be opened. With `cache`, mappings are kept by (pid, id) and reused
 * by the next window over the same region (MPI_Alloc_mem blocks live on;
 * adopted regions do not, so their mappings are not kept); give each back
 * with os_shm_region_unmap_peer. */
void *os_shm_region_map_peer(pid_t pid, int fd, size_t size, uint64_t id, bool cache);
void os_shm_region_unmap_peer(void *addr, size_t size);

/* Allow other processes of the same user to use CMA on this one, where a Yama
 * policy would otherwise restrict it to descendants. */
void os_cma_enable(void);

/* What the kernel lets the node's processes do to each other's memory:
 * cross-memory attach (process_vm_readv/writev), and opening each other's
 * descriptors through /proc/<pid>/fd (to map MPI_Alloc_mem regions). A
 * container's seccomp profile, Yama's ptrace_scope or a missing
 * CAP_SYS_PTRACE can refuse either, at any time of the program's life but
 * in practice for all of it, which is why MPICH and Open MPI test once. */
typedef struct {
    bool cma;
    bool peer_fd;
    int cma_errno, peer_fd_errno; /* why not, where this process found out */
} os_shm_access_t;

/* Collective over node_comm: each process tries both on the next process of
 * the node (a probe word in a memfd of its own); the answers are and-ed over
 * the node. A node of one process has nothing to refuse: both true. */
os_shm_access_t os_shm_probe(MPI_Comm node_comm);
/* Fix what this process may use (agreed beforehand by all the processes that
 * share windows). Refused, CMA calls fail at once with OS_ERR_UNSUPPORTED
 * and peers' regions are not mapped; the RMA engine keeps its windows off
 * both. Allowed until set. */
void os_shm_access_set(os_shm_access_t a);
os_shm_access_t os_shm_access(void);

/* Copy between local iovecs and another process's memory. Loops over partial
 * transfers and over IOV_MAX batches; returns OS_ERR_OTHER with errno text on failure. */
os_status_t os_cma_write(pid_t pid, const struct iovec *local, size_t nlocal,
                         const struct iovec *remote, size_t nremote);
os_status_t os_cma_read(pid_t pid, const struct iovec *local, size_t nlocal,
                        const struct iovec *remote, size_t nremote);
/* One contiguous run each way; the common case. */
os_status_t os_cma_put(pid_t pid, void *remote, const void *local, size_t len);
os_status_t os_cma_get(pid_t pid, void *local, const void *remote, size_t len);

#endif
