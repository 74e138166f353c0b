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
    char *b = os_shm_region_map_peer(getpid(), r.fd, r.size);
    CHECK(b != NULL && b != a, "peer mapping");
    if (b) {
        strcpy(a + 5, "shared");
        CHECK(!strcmp(b + 5, "shared"), "the peer sees the bytes");
        b[0] = 42;
        CHECK(a[0] == 42, "and the other way round");
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
    test_threads();
    return UNIT_REPORT();
}
