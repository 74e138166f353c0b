/* The data of MPI_Win_allocate windows spanning nodes, allocated through
 * UCX: the node's first process allocates it (UCP_MEM_MAP_ALLOCATE puts it
 * in a System V or POSIX shared-memory segment), the others map it with
 * ucp_rkey_ptr, and other nodes get the packed key (os_remote_win_setup).
 * Memory UCX allocated is memory its transports reach from the origin
 * alone: shared memory between processes of one host (virtual nodes),
 * registered memory for RDMA hardware. Memory it did not allocate it can
 * only reach through the target's own progress (a request served by its
 * worker). Node-mates share nothing here but what UCX itself maps, which
 * keeps virtual nodes honest.
 *
 * Small data is a piece of a slab: one UCX allocation of up to PIECES
 * pieces of one power-of-two size (16 of 64 KiB to 64 of 4 KiB), per
 * communicator and node kind (shell.c's cache), which the node-mates map
 * once and other nodes' processes unpack the key of once (net/datakey.c,
 * by the slab's serial). With a segment per window, UCX allocating it
 * (shmget, shmat and their page faults, about 7 us) and each peer
 * attaching it as it unpacked the key (about 5) were most of the first
 * MPI_Win_allocate of 1000 between virtual nodes (MPICH 5.0.2 with the
 * host on UCX: 37.4 us, now 13.9, against the host's 18-19, whose own
 * window registers 4 KB of its heap and maps nothing). Which piece a shell
 * takes, and when a slab is made or goes, follow the order of window
 * creations and frees on the communicator, as shells do, so every process
 * of the node takes the same piece. A piece given back is zero: each
 * process clears its part of the last window first (shell.c's
 * data_release, since a shell always keeps a piece for its next window)
 * and no window used the rest; and no process of the node touches it
 * before the collectives of the next window that takes it. A slab goes
 * when its last piece comes back; a key to it that another node keeps
 * holds the memory until that node lets it go, as with a window's own
 * segment (net/datakey.c). */
#include "os_rma.h"

#include <stdlib.h>
#include <string.h>

#define PAGE 4096
/* Pieces per slab (its bitmap's bits), and no more bytes than SLAB_BYTES:
 * memory UCX allocated for RDMA hardware is registered, pinned whole. */
enum { PIECES = 64 };
#define SLAB_BYTES ((size_t)1 << 20)
/* Larger data takes a segment of its own (a slab of one piece, on no list):
 * a slab of such pieces would hold megabytes nobody may ever ask for. */
#define PIECE_MAX ((size_t)64 << 10)

struct os_data_slab {
    os_ucx_reg_t reg;     /* the node's first process: UCX's allocation */
    void *rkey;           /* the others: its key, unpacked; holds their mapping */
    char *key;            /* every process: the packed key, for other nodes */
    size_t key_len;
    uint64_t owner_addr;  /* the segment's address in its owner, which the key is valid for */
    char *addr;           /* ... and in this process */
    uint64_t serial;      /* names the segment in the job */
    size_t piece_bytes;
    int npieces;
    uint64_t free;        /* bit i: piece i is free */
    struct os_data_slab *next;
    struct os_data_slab **list; /* the cache's list it is on; NULL for a window's own segment */
};

static void slab_destroy(os_data_slab_t *slab)
{
    os_ucx_mem_unmap(&slab->reg); /* (nothing where this process allocated nothing) */
    os_ucx_rkey_destroy(slab->rkey);
    free(slab->key);
    free(slab);
}

/* A new segment of npieces * piece_bytes for the node (collective over it),
 * or NULL in every process of the node when UCX cannot allocate shareable
 * memory on every one of them: the caller falls back to our own segment,
 * reached by emulated RDMA.
 *
 * Whether a process can map the segment, each one that needs to finds out
 * itself: a node-mate here, a process of another node when it unpacks the
 * key (net/datakey.c). The first process does not ask its own key through
 * its endpoint to itself first: that unpack attached the segment and its
 * destruction detached it, 4-5 us of each new window's 35 between virtual
 * nodes (MPICH 5.0.2, 1000 live windows, the first round), and nobody
 * used the answer the mappings do not give (UCX's heap allocation, its
 * last resort, is refused by every process's ucp_rkey_ptr alike). */
static os_data_slab_t *slab_create(const os_shell_t *s, size_t piece_bytes, int npieces)
{
    /* The serial names the segment in the job: its owner's MPI_COMM_WORLD
     * rank and a count of its own (atomic: threads create windows over
     * different communicators at once). Other nodes keep their key to it
     * across windows while it is the same (net/datakey.c); an address
     * cannot tell, since a new segment may be mapped where an old one was. */
    static _Atomic uint32_t segments_made;
    const size_t bytes = piece_bytes * (size_t)npieces;
    os_data_slab_t *slab = calloc(1, sizeof *slab);
    struct { int len; uint64_t addr, serial; } d = { 0, 0, 0 };
    void *addr = NULL;
    int ok;
    if (slab && s->node_rank == 0 && os_ucx_mem_alloc(bytes, &slab->reg, &addr) == OS_OK) {
        d.len = (int)slab->reg.rkey_len;
        d.addr = (uint64_t)(uintptr_t)addr;
        d.serial = (uint64_t)(s->node_first + 1) << 32 | (atomic_fetch_add(&segments_made, 1) + 1);
    }
    /* Every process takes part in every collective, also one that could
     * not allocate what it needs (it refuses in the reduction). */
    PMPI_Bcast(&d, sizeof d, MPI_BYTE, 0, s->node);
    ok = d.len > 0 && slab;
    if (d.len > 0) {
        /* The key, in chunks: a process that cannot hold it still takes
         * part in the broadcast. */
        char sink[256];
        char *key = slab ? malloc((size_t)d.len) : NULL;
        if (!key)
            ok = 0;
        else if (s->node_rank == 0)
            memcpy(key, slab->reg.rkey_buf, (size_t)d.len);
        for (int off = 0; off < d.len; off += (int)sizeof sink) {
            int n = d.len - off < (int)sizeof sink ? d.len - off : (int)sizeof sink;
            PMPI_Bcast(key ? key + off : sink, n, MPI_BYTE, 0, s->node);
        }
        if (slab)
            slab->key = key;
    }
    if (ok && s->node_rank != 0)
        ok = os_ucx_rkey_unpack(s->node_first, slab->key, &slab->rkey) == OS_OK &&
             (addr = os_ucx_rkey_ptr(slab->rkey, d.addr)) != NULL;
    PMPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, s->node);
    if (!ok) {
        if (slab)
            slab_destroy(slab);
        return NULL;
    }
    slab->key_len = (size_t)d.len;
    slab->owner_addr = d.addr;
    slab->addr = addr;
    slab->serial = d.serial;
    slab->piece_bytes = piece_bytes;
    slab->npieces = npieces;
    slab->free = os_low_bits(npieces);
    return slab;
}

bool os_shell_data_ucx(os_shell_t *s, os_data_slab_t **list, size_t bytes)
{
    /* Collective over the node; `bytes` (a multiple of PAGE) is the same in
     * all its processes, and so is `list`'s state. */
    os_data_slab_t *slab = NULL;
    size_t piece = bytes;
    if (bytes <= PIECE_MAX) {
        piece = PAGE;
        while (piece < bytes)
            piece *= 2;
        for (slab = *list; slab; slab = slab->next)
            if (slab->free && slab->piece_bytes == piece)
                break;
    }
    if (!slab) {
        const int n = bytes > PIECE_MAX       ? 1
                      : SLAB_BYTES / piece < PIECES ? (int)(SLAB_BYTES / piece)
                                                    : PIECES;
        if (!(slab = slab_create(s, piece, n)))
            return false;
        if (n > 1) {
            slab->list = list;
            slab->next = *list;
            *list = slab;
        }
    }
    const int i = __builtin_ctzll(slab->free);
    slab->free &= ~((uint64_t)1 << i);
    s->data_slab = slab;
    s->data_piece = i;
    s->data_ucx = true;
    s->data = (os_shm_seg_t){ .addr = slab->addr + (size_t)i * piece, .size = piece };
    s->data_key = slab->key;
    s->data_key_len = slab->key_len;
    s->data_key_addr = slab->owner_addr + (uint64_t)i * piece;
    s->data_serial = slab->serial;
    return true;
}

bool os_shell_data_ucx_last(const os_shell_t *s)
{
    const os_data_slab_t *slab = s->data_slab;
    return (slab->free | (uint64_t)1 << s->data_piece) == os_low_bits(slab->npieces);
}

void os_shell_data_ucx_release(os_shell_t *s)
{
    os_data_slab_t *slab = s->data_slab;
    if (!slab)
        return;
    s->data_slab = NULL;
    slab->free |= (uint64_t)1 << s->data_piece;
    if (slab->free != os_low_bits(slab->npieces))
        return;
    for (os_data_slab_t **p = slab->list; p && *p; p = &(*p)->next)
        if (*p == slab) {
            *p = slab->next;
            break;
        }
    slab_destroy(slab);
}
