/* Shareable regions: MPI_Alloc_mem's (allocation, lookup, a second mapping
 * that sees the same bytes, the live limit, small blocks sharing arenas,
 * thread safety of the registry) and the program's own memory made
 * shareable in place for MPI_Win_create (which memory, the bytes kept,
 * private again after, fork). */
#define _GNU_SOURCE
#include "transport/shm/os_shm.h"
#include "transport/shm/shm_remap.h"
#include "unit.h"
#include "../maps.h"

#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

/* Blocks past the arenas' largest have a region of their own. */
#define BIG ((size_t)128 << 10)

static void test_basic(void)
{
    char *a = os_shm_region_alloc(BIG, 8);
    CHECK(a != NULL, "alloc");
    CHECK(a[0] == 0 && a[BIG - 1] == 0, "zero-filled");
    os_shm_region_t r;
    CHECK(os_shm_region_find(a + 10, 50, &r) && r.base == a && r.size >= BIG, "find inside");
    CHECK(!os_shm_region_find(a + 10, 1 << 20, &r), "a range past the end is not inside");
    /* Another mapping of the same memory, as a peer process makes it. */
    char *b = os_shm_region_map_peer(getpid(), r.fd, r.size, r.id, true);
    CHECK(b != NULL && b != a, "peer mapping");
    if (b) {
        strcpy(a + 5, "shared");
        CHECK(!strcmp(b + 5, "shared"), "the peer sees the bytes");
        b[0] = 42;
        CHECK(a[0] == 42, "and the other way round");
        /* Given back, the mapping stays cached for the next window. */
        os_shm_region_unmap_peer(b, r.size);
        CHECK(os_shm_region_map_peer(getpid(), r.fd, r.size, r.id, true) == b, "cached mapping");
        os_shm_region_unmap_peer(b, r.size);
    }
    CHECK(os_shm_region_free(a) == OS_SHM_FREED, "free");
    CHECK(os_shm_region_free(a) == OS_SHM_FREE_NOT_OURS, "second free is not ours");
    CHECK(!os_shm_region_find(a, 1, &r), "gone");
    int x;
    CHECK(os_shm_region_free(&x) == OS_SHM_FREE_NOT_OURS, "foreign memory is not ours");
}

static void test_limit(void)
{
    void *p[4];
    for (int i = 0; i < 3; i++)
        p[i] = os_shm_region_alloc(BIG, 3);
    p[3] = os_shm_region_alloc(BIG, 3);
    CHECK(p[0] && p[1] && p[2] && !p[3], "live limit of 3");
    for (int i = 0; i < 3; i++)
        os_shm_region_free(p[i]);
}

/* Small blocks: many share one region, each its own bytes; a peer's one
 * mapping of the region sees every block; a block freed is reused; a
 * second free or a pointer inside a block is refused; an arena left empty
 * beside another with room goes back; the limit counts arenas. */
static void test_arenas(void)
{
    enum { N = 600 };
    static char *b[N];
    os_shm_region_t r0, r;
    size_t regions_seen = 0;
    uint64_t last_id = 0;
    for (int i = 0; i < N; i++) {
        b[i] = os_shm_region_alloc(4000, 8);
        CHECK(b[i] != NULL, "block %d", i);
        if (!b[i])
            return;
        memset(b[i], (char)i, 4000);
        CHECK(os_shm_region_find(b[i], 4000, &r) && r.base <= b[i] &&
              b[i] + 4000 <= r.base + r.size, "block %d lies in its region", i);
        if (r.id != last_id)
            regions_seen++;
        last_id = r.id;
    }
    CHECK(regions_seen <= N * 4096 / (1 << 20) + 1, "%d blocks of 4000 bytes in %zu regions", N,
          regions_seen);
    int intact = 0;
    for (int i = 0; i < N; i++)
        intact += b[i][0] == (char)i && b[i][3999] == (char)i;
    CHECK(intact == N, "%d of %d blocks kept their bytes", intact, N);
    CHECK(os_shm_region_find(b[0], 1, &r0), "first block's region");
    char *peer = os_shm_region_map_peer(getpid(), r0.fd, r0.size, r0.id, true);
    CHECK(peer != NULL, "a peer maps the arena");
    if (peer) {
        int seen = 0;
        for (int i = 0; i < N; i++)
            if (os_shm_region_find(b[i], 1, &r) && r.id == r0.id)
                seen += peer[b[i] - r0.base] == (char)i;
        CHECK(seen >= 200, "the peer's one mapping sees the arena's blocks (%d)", seen);
        os_shm_region_unmap_peer(peer, r0.size);
    }
    CHECK(os_shm_region_free(b[7] + 8) == OS_SHM_FREE_INVALID, "inside a block: refused");
    CHECK(os_shm_region_free(b[7]) == OS_SHM_FREED, "free");
    CHECK(os_shm_region_free(b[7]) == OS_SHM_FREE_INVALID, "second free: refused");
    char *again = os_shm_region_alloc(3000, 8);
    CHECK(again == b[7], "a freed block is reused");
    b[7] = again;
    for (int i = 0; i < N; i++)
        CHECK(os_shm_region_free(b[i]) == OS_SHM_FREED, "free %d", i);
    /* Every arena of the size is empty now; all but one went back. */
    char *one = os_shm_region_alloc(4000, 8);
    CHECK(one && os_shm_region_find(one, 1, &r), "one arena stays");
    /* A new size needs a new arena, which counts against the limit of
     * regions; an empty arena gives its descriptor back first. */
    char *big = os_shm_region_alloc(BIG, 2);
    char *small = os_shm_region_alloc(100, 2);
    CHECK(big && !small, "at the limit with an arena in use: refused");
    os_shm_region_free(one);
    small = os_shm_region_alloc(100, 2);
    CHECK(small != NULL, "the empty arena made room");
    CHECK(!os_shm_region_find(one, 1, &r), "and went back");
    os_shm_region_free(big);
    os_shm_region_free(small);
}

/* Freed regions are kept as spares: the next allocation of a fitting size
 * gets one back (same memory, same id), a much smaller or larger one does
 * not, and spares give their descriptors back before the limit refuses. */
static void test_spares(void)
{
    os_shm_region_t r1, r2;
    char *a = os_shm_region_alloc(3 * BIG, 100);
    CHECK(a && os_shm_region_find(a, 1, &r1), "alloc");
    CHECK(os_shm_region_free(a) == OS_SHM_FREED, "free");
    char *b = os_shm_region_alloc(2 * BIG + 1, 100);
    CHECK(b == a && os_shm_region_find(b, 1, &r2) && r2.id == r1.id && r2.fd == r1.fd,
          "a fitting allocation reuses the spare");
    os_shm_region_free(b);
    char *c = os_shm_region_alloc(BIG, 100); /* the 3-fold spare would waste */
    CHECK(c && c != a, "a much smaller allocation gets a new region");
    char *d = os_shm_region_alloc(8 * BIG, 100);
    CHECK(d && d != a, "a larger allocation gets a new region");
    os_shm_region_t rc;
    CHECK(os_shm_region_find(c, 1, &rc) && rc.id != r1.id, "ids differ");
    os_shm_region_free(c);
    os_shm_region_free(d);
    /* Now spares of 1, 3 and 8 units: a limit of 2 live regions still
     * gives two allocations of 20, by closing spares. */
    char *e = os_shm_region_alloc(20 * BIG, 2), *f = os_shm_region_alloc(20 * BIG, 2);
    CHECK(e && f, "spares closed to make room under the limit");
    os_shm_region_free(e);
    os_shm_region_free(f);
}

enum { THREADS = 4, ROUNDS = 300 };
static _Atomic int errors;

static void *churn(void *arg)
{
    long id = (long)arg;
    for (int i = 0; i < ROUNDS; i++) {
        char *m = os_shm_region_alloc(64 + (size_t)i, 1000);
        if (!m) {
            errors++;
            continue;
        }
        memset(m, (int)id, 64);
        os_shm_region_t r;
        if (!os_shm_region_find(m + 1, 8, &r) || r.base > m || m[63] != (char)id)
            errors++;
        if (os_shm_region_free(m) != OS_SHM_FREED)
            errors++;
    }
    return NULL;
}

static void test_threads(void)
{
    pthread_t th[THREADS];
    for (long i = 0; i < THREADS; i++)
        pthread_create(&th[i], NULL, churn, (void *)i);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    CHECK(errors == 0, "%d errors with %d threads allocating and freeing", (int)errors, THREADS);
}

static void fill(char *p, size_t n, char seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (char)(seed + i * 7);
}

static bool same(const char *p, size_t n, char seed)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != (char)(seed + i * 7))
            return false;
    return true;
}

/* A window's memory made shareable: the same bytes at the same address, a
 * second mapping (a peer's) coherent with it, private again after. */
static void adopt_case(const char *what, char *mem, size_t n, bool whole_pages)
{
    fill(mem, n, 3);
    os_shm_region_t r;
    CHECK(os_shm_region_adopt(mem, n, 16, &r) && r.adopted, "%s: adopted", what);
    if (!r.adopted)
        return;
    CHECK((char *)r.base <= mem && mem + n <= r.base + r.size, "%s: the region holds it", what);
    if ((char *)r.base > mem || mem + n > r.base + r.size)
        return;
    CHECK(!whole_pages || (r.base == mem && r.size == n), "%s: exactly its pages", what);
    CHECK(t_mapping_of(mem) == 's' && t_mapping_of(mem + n - 1) == 's', "%s: shared now", what);
    CHECK(same(mem, n, 3), "%s: the bytes kept", what);
    char *peer = os_shm_region_map_peer(getpid(), r.fd, r.size, r.id, false);
    CHECK(peer != NULL, "%s: a peer maps it", what);
    if (peer) {
        char *pm = peer + (mem - r.base);
        CHECK(same(pm, n, 3), "%s: the peer sees the bytes", what);
        pm[n / 2] = 'X';
        CHECK(mem[n / 2] == 'X', "%s: the owner sees the peer's store", what);
        mem[n / 2] = (char)(3 + (n / 2) * 7);
        os_shm_region_unmap_peer(peer, r.size);
    }
    /* A second window over the same memory shares the region. */
    os_shm_region_t r2;
    CHECK(os_shm_region_adopt(mem, n, 16, &r2) && r2.id == r.id, "%s: one region", what);
    os_shm_region_unadopt(r.base);
    CHECK(t_mapping_of(mem) == 's', "%s: shared while a window is left", what);
    /* A fork()ed child writes its own copy. */
    pid_t child = fork();
    if (child == 0) {
        mem[0] = 'C';
        _exit(mem[0] == 'C' ? 0 : 1);
    }
    int status = -1;
    waitpid(child, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: the child ran", what);
    CHECK(mem[0] == 3, "%s: the child's write stays in the child", what);
    os_shm_region_unadopt(r.base);
    CHECK(t_mapping_of(mem) == 'p' && t_mapping_of(mem + n - 1) == 'p', "%s: private again", what);
    CHECK(same(mem, n, 3), "%s: the bytes kept after", what);
    CHECK(!os_shm_region_find(mem, 1, &r), "%s: no region left", what);
}

static void test_adopt(void)
{
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    char *aligned = aligned_alloc(page, 4 * page);
    adopt_case("4 aligned pages", aligned, 4 * page, true);
    free(aligned);
    /* glibc serves 1 MB from an mmap of its own: header and tail go too.
     * (ASan's malloc puts its own header there instead.) */
    char *big;
#ifndef __SANITIZE_ADDRESS__
    big = malloc(1 << 20);
    adopt_case("malloc(1 MB)", big, 1 << 20, false);
    free(big); /* glibc unmaps it: the chunk is whole again */
#endif
    /* A block in the heap shares its first and last page with other
     * objects: only the whole pages inside it are adopted. (Made by hand:
     * a sanitizer's malloc hands out page-aligned blocks.) */
    char *pages = mmap(NULL, 18 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *heap = pages + 100;
    const size_t hb = 16 * page;
    fill(pages, 18 * page, 5);
    os_shm_region_t in, in2;
    CHECK(os_shm_region_adopt(heap, hb, 16, &in) && in.adopted, "heap block: adopted");
    CHECK(in.base == pages + page && in.size == 15 * page,
          "heap block: its inside only (%p + %zu in %p + %zu)", (void *)in.base, in.size,
          (void *)heap, hb);
    CHECK(t_mapping_of(heap) == 'p' && t_mapping_of(in.base) == 's' && t_mapping_of(heap + hb - 1) == 'p',
          "heap block: edges private, inside shared");
    CHECK(same(pages, 18 * page, 5), "heap block: the bytes kept");
    CHECK(os_shm_region_adopt(heap, hb, 16, &in2) && in2.id == in.id,
          "heap block: a second window shares the region");
    os_shm_region_unadopt(in.base);
    os_shm_region_unadopt(in.base);
    CHECK(t_mapping_of(in.base) == 'p' && same(pages, 18 * page, 5), "heap block: private again");
    munmap(pages, 18 * page);
    /* A small malloc shares its page with other objects: not adopted. */
    char *small = malloc(128);
    os_shm_region_t r;
    CHECK(!os_shm_region_adopt(small, 128, 16, &r), "a small malloc is not adopted");
    CHECK(t_mapping_of(small) == 'p', "and stays private");
    free(small);
    /* The interior of a large allocation, not page-aligned: not adopted. */
    big = malloc(1 << 20);
    CHECK(!os_shm_region_adopt(big + 100, 5000, 16, &r), "a piece of a chunk is not adopted");
    free(big);
    /* A file mapping keeps writing to its file; read-only memory stays so. */
    char path[] = "/tmp/test_regions_XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0 && ftruncate(fd, (off_t)page) == 0) {
        char *file = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
        CHECK(file != MAP_FAILED && !os_shm_region_adopt(file, page, 16, &r),
              "a file mapping is not adopted");
        munmap(file, page);
    }
    if (fd >= 0) {
        close(fd);
        unlink(path);
    }
    char *ro = mmap(NULL, page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(!os_shm_region_adopt(ro, page, 16, &r), "read-only memory is not adopted");
    munmap(ro, page);
    /* Memory inside an MPI_Alloc_mem region is that region (not counted). */
    char *am = os_shm_region_alloc(page, 16);
    CHECK(os_shm_region_adopt(am, page, 16, &r) && !r.adopted && r.base <= am &&
              am + page <= r.base + r.size,
          "MPI_Alloc_mem memory keeps its region");
    os_shm_region_free(am);
    /* The limit of adopted regions. */
    char *p1 = aligned_alloc(page, page), *p2 = aligned_alloc(page, page);
    CHECK(os_shm_region_adopt(p1, page, 1, &r), "first under a limit of 1");
    CHECK(!os_shm_region_adopt(p2, page, 1, &r), "second refused");
    os_shm_region_unadopt(p1);
    free(p1);
    free(p2);
    /* Unmapped by the program before the window's end (erroneous): the
     * give-back leaves whatever is there alone. */
    char *gone = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(os_shm_region_adopt(gone, 2 * page, 16, &r), "adopted before munmap");
    munmap(gone, 2 * page);
    char *again = mmap(gone, 2 * page, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    again[0] = 'N';
    os_shm_region_unadopt(gone);
    CHECK(again[0] == 'N' && t_mapping_of(again) == 'p', "a new mapping there is left alone");
    munmap(again, 2 * page);
}

int main(void)
{
    mallopt(M_MMAP_THRESHOLD, 128 * 1024); /* fixed: 1 MB is always its own mmap */
    test_adopt();
    shm_maps_force_text(true); /* kernels before 6.11 */
    test_adopt();
    shm_maps_force_text(false);
    test_basic();
    test_limit();
    test_spares();
    test_arenas();
    test_threads();
    return UNIT_REPORT();
}
