/* Shareable MPI_Alloc_mem regions: allocation, lookup, a second mapping that
 * sees the same bytes, the live limit, and thread safety of the registry. */
#include "transport/shm/os_shm.h"
#include "unit.h"

#include <pthread.h>
#include <string.h>
#include <unistd.h>

static void test_basic(void)
{
    char *a = os_shm_region_alloc(100, 8);
    CHECK(a != NULL, "alloc");
    CHECK(a[0] == 0 && a[99] == 0, "zero-filled");
    os_shm_region_t r;
    CHECK(os_shm_region_find(a + 10, 50, &r) && r.base == a && r.size >= 100, "find inside");
    CHECK(!os_shm_region_find(a + 10, 1 << 20, &r), "a range past the end is not inside");
    /* Another mapping of the same memory, as a peer process makes it. */
    char *b = os_shm_region_map_peer(getpid(), r.fd, r.size, r.id);
    CHECK(b != NULL && b != a, "peer mapping");
    if (b) {
        strcpy(a + 5, "shared");
        CHECK(!strcmp(b + 5, "shared"), "the peer sees the bytes");
        b[0] = 42;
        CHECK(a[0] == 42, "and the other way round");
        /* Given back, the mapping stays cached for the next window. */
        os_shm_region_unmap_peer(b, r.size);
        CHECK(os_shm_region_map_peer(getpid(), r.fd, r.size, r.id) == b, "cached mapping");
        os_shm_region_unmap_peer(b, r.size);
    }
    CHECK(os_shm_region_free(a), "free");
    CHECK(!os_shm_region_free(a), "second free is not ours");
    CHECK(!os_shm_region_find(a, 1, &r), "gone");
    int x;
    CHECK(!os_shm_region_free(&x), "foreign memory is not ours");
}

static void test_limit(void)
{
    void *p[4];
    for (int i = 0; i < 3; i++)
        p[i] = os_shm_region_alloc(10, 3);
    p[3] = os_shm_region_alloc(10, 3);
    CHECK(p[0] && p[1] && p[2] && !p[3], "live limit of 3");
    for (int i = 0; i < 3; i++)
        os_shm_region_free(p[i]);
}

/* Freed regions are kept as spares: the next allocation of a fitting size
 * gets one back (same memory, same id), a much smaller or larger one does
 * not, and spares give their descriptors back before the limit refuses. */
static void test_spares(void)
{
    os_shm_region_t r1, r2;
    char *a = os_shm_region_alloc(3 * 4096, 100);
    CHECK(a && os_shm_region_find(a, 1, &r1), "alloc");
    CHECK(os_shm_region_free(a), "free");
    char *b = os_shm_region_alloc(2 * 4096 + 1, 100);
    CHECK(b == a && os_shm_region_find(b, 1, &r2) && r2.id == r1.id && r2.fd == r1.fd,
          "a fitting allocation reuses the spare");
    os_shm_region_free(b);
    char *c = os_shm_region_alloc(100, 100); /* one page: the 3-page spare would waste */
    CHECK(c && c != a, "a much smaller allocation gets a new region");
    char *d = os_shm_region_alloc(8 * 4096, 100);
    CHECK(d && d != a, "a larger allocation gets a new region");
    os_shm_region_t rc;
    CHECK(os_shm_region_find(c, 1, &rc) && rc.id != r1.id, "ids differ");
    os_shm_region_free(c);
    os_shm_region_free(d);
    /* Now spares of 1, 3 and 8 pages: a limit of 2 live regions still
     * gives two allocations of 20 pages, by closing spares. */
    char *e = os_shm_region_alloc(20 * 4096, 2), *f = os_shm_region_alloc(20 * 4096, 2);
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
        if (!os_shm_region_find(m + 1, 8, &r) || r.base != m || m[63] != (char)id)
            errors++;
        if (!os_shm_region_free(m))
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

int main(void)
{
    test_basic();
    test_limit();
    test_spares();
    test_threads();
    return UNIT_REPORT();
}
