/* Shareable regions: MPI_Alloc_mem blocks, large ones each in a memfd of
 * its own and small ones cut from shared arenas, and the program's own
 * memory under a window, made shareable in place (remap.c), so that other
 * processes of the node can map them. Needs no MPI. */
#define _GNU_SOURCE
#include "os_shm.h"
#include "shm_remap.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* Live regions: few and long-lived (window memory), so a list will do. */
static os_shm_region_t *regions;
static size_t nregions, capregions;
/* Freed regions kept for reuse: a program that allocates window memory per
 * object frees and allocates the same sizes again, and a new memfd costs
 * three system calls and page faults on first touch, and each peer an open
 * and an mmap (a spare keeps its id, so peers' cached mappings of it stay
 * good). As many as the default limit of live regions
 * (ONESIDED_ALLOC_MEM_MAX_REGIONS), which spares count against: 400 windows
 * freed and made again over MPI_Alloc_mem memory map nothing new. */
enum { SPARES_MAX = 256 };
#define SPARE_BYTES_MAX ((size_t)64 << 20)
static os_shm_region_t spares[SPARES_MAX];
static size_t nspares, spare_bytes;
static uint64_t next_id;
static pthread_mutex_t regions_lock = PTHREAD_MUTEX_INITIALIZER;
/* Descriptors the table is grown for beyond regions (control slabs, the
 * host's and UCX's own). */
enum { RESERVE_SLACK_FDS = 128 };

/* Small blocks (up to ARENA_BLOCK_MAX) are cut from arenas: regions of
 * ARENA_BYTES, each serving one power-of-two block size. A memfd per block
 * cost every window over one, at its creation, each node-mate's open of
 * /proc/<pid>/fd and mmap: 6.5 us of a first MPI_Win_create over a 4 KB
 * block (Debian's MPICH 4.0.2), where native MPICH's whole creation takes
 * 15; and a descriptor each, so that past ONESIDED_ALLOC_MEM_MAX_REGIONS
 * blocks the host's memory served and windows over it took CMA. A node-mate
 * maps an arena once, at the first window over any of its blocks, and
 * keeps the mapping (os_shm_region_map_peer). Its pages cost memory when
 * first touched, as a malloc's do. */
enum { ARENA_BYTES = 1 << 20, ARENA_MIN_SHIFT = 6, ARENA_MAX_SHIFT = 16,
       ARENA_CLASSES = ARENA_MAX_SHIFT - ARENA_MIN_SHIFT + 1 };
#define ARENA_BLOCK_MAX ((size_t)1 << ARENA_MAX_SHIFT)
typedef struct arena {
    char *base;          /* its region's */
    size_t block;        /* bytes of each block */
    uint32_t nblocks, nfree;
    uint64_t *free_bits; /* bit i: block i free */
    struct arena *next;  /* the next arena of its size, made later */
} arena_t;
static arena_t *arenas[ARENA_CLASSES]; /* [log2(block) - ARENA_MIN_SHIFT] */

static void spare_take(size_t i, os_shm_region_t *out)
{
    *out = spares[i];
    spare_bytes -= spares[i].size;
    spares[i] = spares[--nspares];
}

static void region_close(os_shm_region_t *r)
{
    munmap(r->base, r->size);
    close(r->fd);
}

/* A fork()ed child must not share the parent's regions: each becomes a
 * private mapping of its memfd there (copy-on-write, no copy made now, so
 * that fork + exec stays cheap), and the child, no process of the parent's
 * windows, forgets the table. The lock is held across fork so that the
 * child finds the table whole. */
static void fork_prepare(void)
{
    pthread_mutex_lock(&regions_lock);
}

static void fork_parent(void)
{
    pthread_mutex_unlock(&regions_lock);
}

static void fork_child(void)
{
    for (size_t i = 0; i < nregions; i++) {
        os_shm_region_t *r = &regions[i];
        (void)mmap(r->base, r->size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED, r->fd, 0);
        close(r->fd);
    }
    nregions = 0;
    for (int c = 0; c < ARENA_CLASSES; c++)
        while (arenas[c]) {
            arena_t *a = arenas[c];
            arenas[c] = a->next;
            free(a->free_bits);
            free(a);
        }
    while (nspares) {
        os_shm_region_t gone;
        spare_take(0, &gone);
        region_close(&gone);
    }
    pthread_mutex_unlock(&regions_lock);
}

static void fork_handlers_install(void)
{
    pthread_atfork(fork_prepare, fork_parent, fork_child);
}

static void fork_handlers_once(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, fork_handlers_install);
}

/* Room for one more live region. */
static bool table_room(void)
{
    if (nregions < capregions)
        return true;
    size_t cap = capregions ? 2 * capregions : 16;
    os_shm_region_t *r = realloc(regions, cap * sizeof *r);
    if (!r)
        return false;
    regions = r;
    capregions = cap;
    return true;
}

/* Unique across processes that may reuse this pid: a peer's cached mapping
 * of (pid, id) must never stand for another region. */
static uint64_t new_id(void)
{
    if (!next_id) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        next_id = ((uint64_t)ts.tv_sec << 30 ^ (uint64_t)ts.tv_nsec) << 16;
    }
    return ++next_id;
}

static void arenas_drop_empty_locked(void);

static void *region_alloc_locked(size_t size, int max_live)
{
    long page = sysconf(_SC_PAGESIZE);
    size_t bytes = OS_ALIGN_UP(size ? size : 1, (size_t)page);
    if (!table_room())
        return NULL;
    fork_handlers_once();
    /* The smallest spare that fits without wasting more than its size. */
    size_t best = nspares;
    for (size_t i = 0; i < nspares; i++)
        if (spares[i].size >= bytes && spares[i].size <= 2 * bytes &&
            (best == nspares || spares[i].size < spares[best].size))
            best = i;
    if (best < nspares) {
        spare_take(best, &regions[nregions]);
        return regions[nregions++].base;
    }
    /* Spares, then empty arenas, give their descriptors back before the
     * limit refuses. */
    while ((int)(nregions + nspares) >= max_live && nspares) {
        os_shm_region_t gone;
        spare_take(0, &gone);
        region_close(&gone);
    }
    if ((int)nregions >= max_live)
        arenas_drop_empty_locked();
    if ((int)nregions >= max_live) {
        errno = EMFILE;
        return NULL;
    }
    int fd = memfd_create("onesided-alloc-mem", MFD_CLOEXEC);
    if (fd < 0)
        return NULL;
    void *addr = MAP_FAILED;
    if (ftruncate(fd, (off_t)bytes) == 0)
        addr = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (addr == MAP_FAILED) {
        int e = errno;
        close(fd);
        errno = e;
        return NULL;
    }
    regions[nregions++] = (os_shm_region_t){ addr, bytes, fd, new_id(), false, 0 };
    return addr;
}

/* Linux grows a process's descriptor table by doubling, and where threads
 * share the table (every MPI process after MPI_Init: the host's and UCX's
 * threads) each growth waits for an RCU grace period before freeing the old
 * table (fs/file.c, expand_fdtable). Regions hold a descriptor each, so the
 * window that took descriptor 256 waited 7-31 ms on this machine (Debian's
 * MPICH 4.0.2, MPI_Alloc_mem + MPI_Win_create, its node-mate's open of
 * /proc/<pid>/fd as long), about 30 us on each of the first 1000 windows,
 * against 16 us for the host's whole cold creation. A table never shrinks:
 * grown here, before the host MPI starts its threads, it costs a
 * reallocation and nothing later. */
void os_shm_region_reserve_fds(int max_live)
{
    struct rlimit lim;
    int lowest = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (lowest < 0)
        return;
    /* Live and spare regions, and as many adopted ones, past what is open. */
    long want = (long)lowest + 2L * (max_live > 0 ? max_live : 0) + RESERVE_SLACK_FDS;
    if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY &&
        want >= (long)lim.rlim_cur)
        want = (long)lim.rlim_cur - 1;
    if (want > lowest) {
        /* The lowest free descriptor from `want` on: the table grows to hold it. */
        int high = fcntl(lowest, F_DUPFD_CLOEXEC, (int)want);
        if (high >= 0)
            close(high);
        else
            OS_DEBUG("descriptor table not grown to %ld: %s", want, strerror(errno));
    }
    close(lowest);
}

/* A block of `size` (at most ARENA_BLOCK_MAX) from an arena of its size
 * class, a new arena (a region) when every one is full; NULL when no region
 * can be made. */
static void *arena_alloc_locked(size_t size, int max_live)
{
    int shift = ARENA_MIN_SHIFT;
    while (((size_t)1 << shift) < size)
        shift++;
    /* The oldest arena with room first: the newer ones empty out and go. */
    arena_t **at = &arenas[shift - ARENA_MIN_SHIFT], *a;
    while ((a = *at) && !a->nfree)
        at = &a->next;
    if (!a) {
        const uint32_t n = (uint32_t)(ARENA_BYTES >> shift);
        const size_t words = (n + 63) / 64;
        a = calloc(1, sizeof *a);
        uint64_t *bits = malloc(words * sizeof *bits);
        char *base = a && bits ? region_alloc_locked(ARENA_BYTES, max_live) : NULL;
        if (!base) {
            free(bits);
            free(a);
            return NULL;
        }
        memset(bits, 0xff, words * sizeof *bits);
        *a = (arena_t){ base, (size_t)1 << shift, n, n, bits, NULL };
        *at = a;
    }
    uint32_t w = 0;
    while (!a->free_bits[w])
        w++;
    const uint32_t i = w * 64 + (uint32_t)__builtin_ctzll(a->free_bits[w]);
    a->free_bits[w] &= ~((uint64_t)1 << (i % 64));
    a->nfree--;
    return a->base + (size_t)i * a->block;
}

void *os_shm_region_alloc(size_t size, int max_live)
{
    pthread_mutex_lock(&regions_lock);
    void *p = size <= ARENA_BLOCK_MAX ? arena_alloc_locked(size ? size : 1, max_live)
                                     : region_alloc_locked(size, max_live);
    pthread_mutex_unlock(&regions_lock);
    return p;
}

/* Take live region i off the table: kept as a spare where there is room,
 * else into *gone for the caller to close after unlocking (false: nothing
 * to close). */
static bool region_free_locked(size_t i, os_shm_region_t *gone)
{
    *gone = regions[i];
    memmove(&regions[i], &regions[i + 1], (nregions - i - 1) * sizeof *regions);
    nregions--;
    if (nspares < SPARES_MAX && spare_bytes + gone->size <= SPARE_BYTES_MAX) {
        spares[nspares++] = *gone;
        spare_bytes += gone->size;
        return false;
    }
    return true;
}

/* Empty arenas of every size go back with their regions, closed at once
 * (under the lock: the caller needs the descriptors now). */
static void arenas_drop_empty_locked(void)
{
    for (int c = 0; c < ARENA_CLASSES; c++)
        for (arena_t **at = &arenas[c], *a; (a = *at);) {
            if (a->nfree < a->nblocks) {
                at = &a->next;
                continue;
            }
            *at = a->next;
            for (size_t r = 0; r < nregions; r++)
                if (regions[r].base == a->base) {
                    os_shm_region_t gone = regions[r];
                    memmove(&regions[r], &regions[r + 1], (nregions - r - 1) * sizeof *regions);
                    nregions--;
                    region_close(&gone);
                    break;
                }
            free(a->free_bits);
            free(a);
        }
}

/* Give an arena's block back. An arena left empty goes back too, unless it
 * is the only one of its size with room. */
static os_shm_free_t arena_free_locked(void *p, os_shm_region_t *gone, bool *close_it)
{
    for (int c = 0; c < ARENA_CLASSES; c++)
        for (arena_t **at = &arenas[c], *a; (a = *at); at = &a->next) {
            if ((char *)p < a->base || (char *)p >= a->base + ARENA_BYTES)
                continue;
            const size_t i = (size_t)((char *)p - a->base) / a->block;
            if (a->base + i * a->block != (char *)p || (a->free_bits[i / 64] >> (i % 64) & 1))
                return OS_SHM_FREE_INVALID; /* not a block's start, or freed already */
            a->free_bits[i / 64] |= (uint64_t)1 << (i % 64);
            if (++a->nfree < a->nblocks)
                return OS_SHM_FREED;
            bool other_room = false;
            for (const arena_t *o = arenas[c]; o; o = o->next)
                other_room |= o != a && o->nfree > 0;
            if (!other_room)
                return OS_SHM_FREED;
            *at = a->next;
            for (size_t r = 0; r < nregions; r++)
                if (regions[r].base == a->base) {
                    *close_it = region_free_locked(r, gone);
                    break;
                }
            free(a->free_bits);
            free(a);
            return OS_SHM_FREED;
        }
    return OS_SHM_FREE_NOT_OURS;
}

os_shm_free_t os_shm_region_free(void *base)
{
    os_shm_region_t gone = { 0 };
    bool close_it = false;
    pthread_mutex_lock(&regions_lock);
    os_shm_free_t r = arena_free_locked(base, &gone, &close_it);
    for (size_t i = 0; i < nregions && r == OS_SHM_FREE_NOT_OURS; i++) {
        if (regions[i].base == base && !regions[i].adopted) {
            close_it = region_free_locked(i, &gone);
            r = OS_SHM_FREED;
        }
    }
    pthread_mutex_unlock(&regions_lock);
    if (close_it)
        region_close(&gone);
    return r;
}

static os_shm_region_t *find_locked(const void *addr, size_t len)
{
    const char *a = addr;
    for (size_t i = 0; i < nregions; i++)
        if (a >= regions[i].base && a - regions[i].base <= (ptrdiff_t)regions[i].size &&
            len <= regions[i].size - (size_t)(a - regions[i].base))
            return &regions[i];
    return NULL;
}

bool os_shm_region_find(const void *addr, size_t len, os_shm_region_t *out)
{
    pthread_mutex_lock(&regions_lock);
    const os_shm_region_t *r = find_locked(addr, len);
    if (r)
        *out = *r;
    pthread_mutex_unlock(&regions_lock);
    return r != NULL;
}

/* The name adopted regions' memfds carry, by which Win_free recognizes the
 * mapping as still the one it made (shm_still_mapped). */
#define ADOPTED_NAME "onesided-win-create"

static bool overlaps_locked(uintptr_t lo, uintptr_t hi)
{
    for (size_t i = 0; i < nregions; i++)
        if ((uintptr_t)regions[i].base < hi && lo < (uintptr_t)regions[i].base + regions[i].size)
            return true;
    return false;
}

bool os_shm_region_adopt(const void *addr, size_t len, int max_live, os_shm_region_t *out)
{
    uintptr_t lo, hi;
    bool ok = false;
    pthread_mutex_lock(&regions_lock);
    os_shm_region_t *r = find_locked(addr, len);
    if (r) {
        /* MPI_Alloc_mem memory, or memory an earlier window adopted. */
        r->refs += r->adopted;
        *out = *r;
        ok = true;
        goto out;
    }
    /* Memory that part of another region holds cannot become a second,
     * unless that region is exactly its inside, made so for an earlier
     * window over the same heap block. */
    if (!shm_pages_for(addr, len, &lo, &hi))
        goto out;
    for (size_t i = 0; i < nregions; i++)
        if (regions[i].adopted && (uintptr_t)regions[i].base == lo &&
            regions[i].size == hi - lo) {
            regions[i].refs++;
            *out = regions[i];
            ok = true;
            goto out;
        }
    if (overlaps_locked(lo, hi) || !shm_private_anonymous(lo, hi) || !table_room())
        goto out;
    size_t adopted = 0;
    for (size_t i = 0; i < nregions; i++)
        adopted += regions[i].adopted;
    if ((int)adopted >= max_live)
        goto out;
    fork_handlers_once();
    int fd = memfd_create(ADOPTED_NAME, MFD_CLOEXEC);
    if (fd < 0)
        goto out;
    if (ftruncate(fd, (off_t)(hi - lo)) || !shm_remap_shared(lo, hi - lo, fd)) {
        close(fd);
        goto out;
    }
    regions[nregions] = (os_shm_region_t){ (char *)lo, hi - lo, fd, new_id(), true, 1 };
    *out = regions[nregions++];
    ok = true;
out:
    pthread_mutex_unlock(&regions_lock);
    return ok;
}

void os_shm_region_unadopt(void *base)
{
    pthread_mutex_lock(&regions_lock);
    for (size_t i = 0; i < nregions; i++) {
        os_shm_region_t *r = &regions[i];
        if (r->base != base || !r->adopted)
            continue;
        if (--r->refs == 0) {
            /* Private again, unless the program unmapped or replaced the
             * memory first (erroneous, but then nothing of ours is there to
             * give back). */
            uintptr_t lo = (uintptr_t)r->base, hi = lo + r->size;
            if (shm_still_mapped(lo, hi, ADOPTED_NAME) && !shm_remap_private(lo, r->size))
                os_log(1, "the memory of a freed window at %p stays shared (%zu bytes): it "
                       "could not be made private again", (void *)lo, r->size);
            close(r->fd);
            *r = regions[--nregions];
        }
        break;
    }
    pthread_mutex_unlock(&regions_lock);
}

/* Set once at MPI_Init (os_shm_probe), read by every later window: here,
 * with the mappings it governs, because this file needs no MPI. */
static os_shm_access_t access_now = { .cma = true, .peer_fd = true };

void os_shm_access_set(os_shm_access_t a)
{
    access_now = a;
}

os_shm_access_t os_shm_access(void)
{
    return access_now;
}

/* Mappings of other processes' regions, kept after their window is freed:
 * mapping costs an open of /proc/<pid>/fd/<fd> and an mmap, and programs
 * create windows over the same MPI_Alloc_mem memory again and again. A
 * cached mapping of a region its owner has since closed only keeps that
 * memory alive; ids are never reused, so it is never handed out again. */
enum { PEER_MAPS = 256 };
static struct {
    pid_t pid;
    uint64_t id;
    size_t size;
    void *addr;
    int refs;
    uint64_t used; /* for eviction: the least recently used goes first */
} peer_maps[PEER_MAPS];
static uint64_t peer_clock;
static pthread_mutex_t peer_lock = PTHREAD_MUTEX_INITIALIZER;

void *os_shm_region_map_peer(pid_t pid, int fd, size_t size, uint64_t id, bool cache)
{
    void *addr = NULL;
    pthread_mutex_lock(&peer_lock);
    for (int i = 0; i < PEER_MAPS && !addr && cache; i++)
        if (peer_maps[i].addr && peer_maps[i].pid == pid && peer_maps[i].id == id &&
            peer_maps[i].size == size) {
            peer_maps[i].refs++;
            peer_maps[i].used = ++peer_clock;
            addr = peer_maps[i].addr;
        }
    pthread_mutex_unlock(&peer_lock);
    if (addr)
        return addr;
    if (!os_shm_access().peer_fd)
        return NULL;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)pid, fd);
    int my = open(path, O_RDWR | O_CLOEXEC);
    if (my < 0)
        return NULL;
    addr = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, my, 0);
    close(my); /* the mapping keeps the memory */
    if (addr == MAP_FAILED)
        return NULL;
    if (!cache)
        return addr; /* unmapped when given back */
    pthread_mutex_lock(&peer_lock);
    int slot = -1;
    for (int i = 0; i < PEER_MAPS; i++)
        if (!peer_maps[i].refs && (slot < 0 || !peer_maps[i].addr ||
                                   (peer_maps[slot].addr && peer_maps[i].used < peer_maps[slot].used)))
            slot = i;
    if (slot >= 0) {
        if (peer_maps[slot].addr)
            munmap(peer_maps[slot].addr, peer_maps[slot].size);
        peer_maps[slot].pid = pid;
        peer_maps[slot].id = id;
        peer_maps[slot].size = size;
        peer_maps[slot].addr = addr;
        peer_maps[slot].refs = 1;
        peer_maps[slot].used = ++peer_clock;
    }
    pthread_mutex_unlock(&peer_lock);
    return addr; /* uncached when every slot is in use: unmapped when given back */
}

void os_shm_region_unmap_peer(void *addr, size_t size)
{
    bool cached = false;
    pthread_mutex_lock(&peer_lock);
    for (int i = 0; i < PEER_MAPS && !cached; i++)
        if (peer_maps[i].addr == addr && peer_maps[i].refs > 0) {
            peer_maps[i].refs--;
            cached = true;
        }
    pthread_mutex_unlock(&peer_lock);
    if (!cached)
        munmap(addr, size);
}
