/* Making a process's own private memory shareable in place, and private
 * again: the page mechanics behind os_shm_region_adopt (region.c keeps the
 * table). Needs no MPI.
 *
 * A window over memory the program allocated itself (malloc, a numpy array,
 * a Fortran allocatable) is private anonymous memory, which the node's other
 * processes can reach only by a system call per access (CMA). Its pages can
 * be made shareable without moving them: copy them into a memfd and map the
 * memfd over the same addresses (MAP_FIXED). The program's pointers stay
 * valid and see the same bytes; peers map the memfd too and reach the
 * window by load, store and CPU atomics, as MPI_Alloc_mem memory. At
 * MPI_Win_free the pages become private anonymous memory again (copied
 * into fresh pages moved over the range with mremap).
 *
 * Hazard: a write by another thread to the pages between the copy and the
 * remap would be lost. Only pages that hold nothing but the window's memory
 * are therefore remapped (shm_pages_for), and MPI
 * forbids the program to access a window's memory during the collective
 * that creates it; pages shared with other objects (the first and last
 * page of a block in the heap, a small malloc) stay private. */
#define _GNU_SOURCE
#include "shm_remap.h"

#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

/* UCX's memory-hook notice (ucm/api/ucm.h), where UCX is loaded. */
extern void ucm_vm_munmap(void *addr, size_t length) __attribute__((weak));

/* Copy and remap in pieces: the memfd's copy and the old pages coexist only
 * for one piece, not for the whole window. */
#define PIECE ((size_t)64 << 20)

static size_t page_size(void)
{
    static size_t page;
    if (!page)
        page = (size_t)sysconf(_SC_PAGESIZE);
    return page;
}

/* glibc serves large allocations (M_MMAP_THRESHOLD, 128 KiB and up) from an
 * mmap of their own: a chunk of whole pages whose first 16 bytes are its
 * header (prev_size 0, size | IS_MMAPPED) and whose tail after the user's
 * bytes is unused. Those pages belong to that allocation alone. The header
 * lies before the program's pointer, in the same page (mapped): plain
 * aligned loads, which an address sanitizer (whose allocator keeps a
 * redzone there) must not check. */
__attribute__((no_sanitize("address")))
static bool glibc_mmapped_chunk(uintptr_t a, size_t len, uintptr_t *lo, uintptr_t *hi)
{
    const size_t page = page_size();
    if (a < 16 || (a - 16) % page)
        return false;
    const uint64_t prev = *(const volatile uint64_t *)(a - 16);
    const uint64_t size = *(const volatile uint64_t *)(a - 8);
    const uint64_t bytes = size & ~(uint64_t)7;
    if (prev != 0 || (size & 7) != 2 || bytes % page || bytes < len + 16)
        return false;
    *lo = a - 16;
    *hi = a - 16 + bytes;
    return true;
}

/* One mapping of /proc/self/maps: its permissions, inode and path (the
 * first word of it: memfds show as "/memfd:<name> (deleted)"). */
typedef struct {
    char perms[8];
    unsigned long inode;
    char path[256];
} maps_entry_t;

/* PROCMAP_QUERY (Linux 6.11): one mapping of /proc/self/maps by address,
 * without reading the whole text; as in <linux/fs.h>, which older headers
 * lack. */
struct os_procmap_query {
    uint64_t size, query_flags, query_addr, vma_start, vma_end, vma_flags, vma_page_size,
        vma_offset, inode;
    uint32_t dev_major, dev_minor, vma_name_size, build_id_size;
    uint64_t vma_name_addr, build_id_addr;
};
#define OS_PROCMAP_QUERY _IOWR('f', 17, struct os_procmap_query)
enum { VMA_R = 1, VMA_W = 2, VMA_X = 4, VMA_SHARED = 8 };

static bool text_only; /* shm_maps_force_text */

void shm_maps_force_text(bool on)
{
    text_only = on;
}

/* The mapping holding addr, by ioctl: 1 found, 0 none there, -1 the kernel
 * has no PROCMAP_QUERY. */
static int maps_query(int fd, uintptr_t addr, unsigned long *start, unsigned long *end,
                      maps_entry_t *e)
{
    struct os_procmap_query q = { .size = sizeof q, .query_addr = addr,
                                  .vma_name_size = sizeof e->path,
                                  .vma_name_addr = (uint64_t)(uintptr_t)e->path };
    e->path[0] = 0;
    if (text_only)
        return -1;
    if (ioctl(fd, OS_PROCMAP_QUERY, &q))
        return errno == ENOENT ? 0 : -1;
    *start = q.vma_start;
    *end = q.vma_end;
    e->inode = q.inode;
    snprintf(e->perms, sizeof e->perms, "%c%c%c%c", q.vma_flags & VMA_R ? 'r' : '-',
             q.vma_flags & VMA_W ? 'w' : '-', q.vma_flags & VMA_X ? 'x' : '-',
             q.vma_flags & VMA_SHARED ? 's' : 'p');
    if (!q.vma_name_size)
        e->path[0] = 0;
    char *space = strchr(e->path, ' '); /* the first word, as in the text */
    if (space)
        *space = 0;
    return 1;
}

/* Whether every page of [lo, hi) lies in mappings `ok` accepts; false too
 * when /proc/self/maps cannot be read. By PROCMAP_QUERY where the kernel
 * has it (a few microseconds), else by reading the text (hundreds of lines
 * in an MPI process). */
static bool maps_cover(uintptr_t lo, uintptr_t hi, bool (*ok)(const maps_entry_t *, const void *),
                       const void *arg)
{
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f)
        return false;
    uintptr_t covered = lo;
    unsigned long start, end;
    maps_entry_t e;
    int found = maps_query(fileno(f), covered, &start, &end, &e);
    while (found == 1 && covered < hi && start <= covered && ok(&e, arg)) {
        covered = end;
        if (covered < hi)
            found = maps_query(fileno(f), covered, &start, &end, &e);
    }
    if (found < 0) {
        char line[512];
        while (covered < hi && fgets(line, sizeof line, f)) {
            e = (maps_entry_t){ .path = "" };
            if (sscanf(line, "%lx-%lx %7s %*s %*s %lu %255s", &start, &end, e.perms, &e.inode,
                       e.path) < 4)
                continue;
            if (end <= covered || start > covered)
                continue;
            if (!ok(&e, arg))
                break;
            covered = end;
        }
    }
    fclose(f);
    return covered >= hi;
}

/* Private anonymous read-write memory: named regions other than the heap
 * and stacks are files or special. */
static bool is_private_anonymous(const maps_entry_t *e, const void *arg)
{
    (void)arg;
    return !strcmp(e->perms, "rw-p") && !e->inode &&
           (!e->path[0] || !strcmp(e->path, "[heap]") || !strncmp(e->path, "[stack", 6));
}

static bool private_anonymous(uintptr_t lo, uintptr_t hi)
{
    return maps_cover(lo, hi, is_private_anonymous, NULL);
}

bool shm_pages_for(const void *addr, size_t len, uintptr_t *lo, uintptr_t *hi)
{
    const uintptr_t a = (uintptr_t)addr, page = page_size();
    if (!len)
        return false;
    if (a % page == 0 && (a + len) % page == 0) {
        *lo = a;
        *hi = a + len;
        return true;
    }
    if (glibc_mmapped_chunk(a, len, lo, hi))
        return true;
    *lo = (a + page - 1) / page * page;
    *hi = (a + len) / page * page;
    return *hi > *lo;
}

bool shm_private_anonymous(uintptr_t lo, uintptr_t hi)
{
    return private_anonymous(lo, hi);
}

/* Give back pieces [lo, lo + done) their private pages (after a failure). */
static void unshare_done(uintptr_t lo, size_t done);

bool shm_remap_shared(uintptr_t lo, size_t len, int fd)
{
    size_t done = 0;
    while (done < len) {
        const size_t n = len - done < PIECE ? len - done : PIECE;
        char *at = (char *)(lo + done);
        /* The memfd gets the bytes first; then its pages replace the old. */
        ssize_t w = pwrite(fd, at, n, (off_t)done);
        if (w != (ssize_t)n)
            goto undo;
        if (mmap(at, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, (off_t)done) ==
            MAP_FAILED) {
            /* MAP_FIXED may have unmapped the old pages before it failed;
             * the memfd holds their bytes: once more, then give up loudly. */
            if (mmap(at, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, (off_t)done) ==
                MAP_FAILED) {
                os_log(1, "the program's memory at %p (%zu bytes) is lost: it could not be "
                       "mapped back (%s)", (void *)at, n, strerror(errno));
                abort();
            }
            done += n;
            goto undo;
        }
        done += n;
    }
    return true;
undo:
    unshare_done(lo, done);
    return false;
}

bool shm_remap_private(uintptr_t lo, size_t len)
{
    size_t done = 0;
    while (done < len) {
        const size_t n = len - done < PIECE ? len - done : PIECE;
        char *at = (char *)(lo + done);
        /* Populated at once: one fault per page would double the cost. */
        void *fresh = mmap(NULL, n, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
        if (fresh == MAP_FAILED)
            return false;
        memcpy(fresh, at, n);
        /* Moves the fresh pages over the shared ones in one step: the range
         * is never unmapped in between. The system call itself: UCX before
         * 1.14 hooks mremap() without its fifth argument (UCX issue 8820),
         * so MREMAP_FIXED would move the pages to a garbage address. UCX's
         * memory hooks then miss the change: tell them (registration
         * caches must forget those pages). */
        if ((void *)syscall(SYS_mremap, fresh, n, n, MREMAP_MAYMOVE | MREMAP_FIXED, at) ==
            MAP_FAILED) {
            munmap(fresh, n);
            return false;
        }
        if (ucm_vm_munmap)
            ucm_vm_munmap(at, n);
        done += n;
    }
    return true;
}

static void unshare_done(uintptr_t lo, size_t done)
{
    if (done && !shm_remap_private(lo, done))
        os_log(1, "window memory at %p stays shared after a failed remap", (void *)lo);
}

static bool is_memfd_named(const maps_entry_t *e, const void *name)
{
    return !strncmp(e->path, "/memfd:", 7) && !strcmp(e->path + 7, name);
}

bool shm_still_mapped(uintptr_t lo, uintptr_t hi, const char *name)
{
    return maps_cover(lo, hi, is_memfd_named, name);
}
