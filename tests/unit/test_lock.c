/* The reader-writer ticket lock: transitions, FIFO order, and exclusion
 * under real threads (the same code runs on shared memory across processes). */
#include "rma/os_lock.h"
#include "unit.h"

#include <pthread.h>

static void test_transitions(void)
{
    os_lockword_t l = 0;
    CHECK(os_lock_idle(&l), "new lock is idle");
    os_lock_acquire_shared(&l, NULL);
    os_lock_acquire_shared(&l, NULL);
    CHECK(os_lock_read_field(l) == 2 && os_lock_write_field(l) == 0, "two readers admitted");
    /* A writer draws ticket 2 and must wait for both readers. */
    uint16_t w = os_lock_ticket(&l);
    CHECK(w == 2 && !os_lock_excl_ready(&l, w), "writer waits behind readers");
    /* A reader arriving after the writer queues behind it (no reader preference). */
    uint16_t r = os_lock_ticket(&l);
    CHECK(r == 3 && !os_lock_shared_ready(&l, r), "late reader waits behind the writer");
    os_lock_release_shared(&l);
    CHECK(!os_lock_excl_ready(&l, w), "one reader still in");
    os_lock_release_shared(&l);
    CHECK(os_lock_excl_ready(&l, w), "writer admitted when readers leave");
    CHECK(!os_lock_shared_ready(&l, r), "reader still waits while writer holds");
    os_lock_release_excl(&l);
    CHECK(os_lock_shared_enter(&l, r), "reader admitted after writer");
    os_lock_release_shared(&l);
    CHECK(os_lock_idle(&l), "idle again");
}

/* Changing a hold's kind without releasing it (the hybrid lock's manager). */
static void test_downgrade_upgrade(void)
{
    os_lockword_t l = 0;
    uint16_t w = os_lock_ticket(&l), r1 = os_lock_ticket(&l), x = os_lock_ticket(&l);
    CHECK(os_lock_excl_ready(&l, w) && !os_lock_shared_enter(&l, r1), "writer in, reader waits");
    os_lock_downgrade(&l);
    CHECK(os_lock_shared_enter(&l, r1), "downgraded: the reader behind goes in");
    CHECK(!os_lock_excl_ready(&l, x), "a writer behind still waits");
    os_lock_release_shared(&l); /* the downgraded hold */
    os_lock_release_shared(&l); /* the reader */
    CHECK(os_lock_excl_ready(&l, x), "then the writer goes in");
    os_lock_release_excl(&l);
    CHECK(os_lock_idle(&l), "idle after downgrade");

    uint16_t s = os_lock_ticket(&l), r2 = os_lock_ticket(&l);
    CHECK(os_lock_shared_enter(&l, s) && os_lock_shared_enter(&l, r2), "two readers");
    CHECK(!os_lock_try_upgrade(&l, s), "no upgrade while another reader holds");
    os_lock_release_shared(&l);
    CHECK(!os_lock_try_upgrade(&l, s), "no upgrade: the other reader's release is counted, "
                                       "not ours, and a ticket was drawn after ours");
    os_lock_release_shared(&l); /* s leaves too: the lock is free */
    uint16_t u = os_lock_ticket(&l);
    CHECK(os_lock_shared_enter(&l, u) && os_lock_try_upgrade(&l, u), "sole reader upgrades");
    uint16_t late = os_lock_ticket(&l);
    CHECK(!os_lock_shared_enter(&l, late), "a reader after the upgrade waits");
    os_lock_release_excl(&l);
    CHECK(os_lock_shared_enter(&l, late), "and goes in at the release");
    os_lock_release_shared(&l);
    CHECK(os_lock_idle(&l), "idle after upgrade");
}

static void test_wraparound(void)
{
    /* Counters near 2^16 must wrap without carrying into their neighbours. */
    os_lockword_t l = ((uint64_t)0xfffe << 32) | ((uint64_t)0xfffe << 16) | 0xfffe;
    for (int i = 0; i < 4; i++) {
        os_lock_acquire_excl(&l, NULL);
        os_lock_release_excl(&l);
        os_lock_acquire_shared(&l, NULL);
        os_lock_release_shared(&l);
    }
    CHECK(os_lock_idle(&l), "idle after wrapping, word %llx", (unsigned long long)l);
    CHECK(os_lock_write_field(l) == 6 && os_lock_read_field(l) == 6, "wrapped counters");
}

enum { THREADS = 6, ROUNDS = 20000 };
static os_lockword_t lock;
static volatile long counter, pair_a, pair_b;
static _Atomic long torn, readers_in, writers_in, bad_overlap;

static void *worker(void *arg)
{
    long id = (long)arg;
    for (int i = 0; i < ROUNDS; i++) {
        if ((i + id) % 3) {
            os_lock_acquire_excl(&lock, NULL);
            if (atomic_fetch_add(&writers_in, 1) || atomic_load(&readers_in))
                atomic_fetch_add(&bad_overlap, 1);
            long v = counter;
            pair_a = v + 1;
            counter = v + 1;
            pair_b = v + 1;
            atomic_fetch_sub(&writers_in, 1);
            os_lock_release_excl(&lock);
        } else {
            os_lock_acquire_shared(&lock, NULL);
            atomic_fetch_add(&readers_in, 1);
            if (atomic_load(&writers_in))
                atomic_fetch_add(&bad_overlap, 1);
            if (pair_a != pair_b)
                atomic_fetch_add(&torn, 1);
            atomic_fetch_sub(&readers_in, 1);
            os_lock_release_shared(&lock);
        }
    }
    return NULL;
}

static void test_threads(void)
{
    pthread_t th[THREADS];
    long writes = 0;
    for (long i = 0; i < THREADS; i++) {
        pthread_create(&th[i], NULL, worker, (void *)i);
        for (int k = 0; k < ROUNDS; k++)
            writes += (k + i) % 3 != 0;
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    CHECK(counter == writes, "exclusive increments exact: %ld of %ld", counter, writes);
    CHECK(torn == 0, "readers saw %ld torn pairs", (long)torn);
    CHECK(bad_overlap == 0, "%ld overlaps of a writer with anyone", (long)bad_overlap);
    CHECK(os_lock_idle(&lock), "idle at the end");
}

int main(void)
{
    os_spin_limit = 64;
    os_backoff_hook = unit_wait_step; /* the library's waits step like the tests' own */
    test_transitions();
    test_downgrade_upgrade();
    test_wraparound();
    test_threads();
    return UNIT_REPORT();
}
