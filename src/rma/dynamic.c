/* Dynamic windows: the memory each process attaches, and the check that an
 * access lies inside it.
 *
 * The owner keeps its attached regions in a private array sorted by base
 * address, grown as needed: MPI sets no limit on how many regions a process
 * attaches. Origins of the owner's node must read it without the owner's
 * help, so the owner publishes, under a sequence lock in its control block:
 * the count, the array's address in its own process, and while the count
 * fits, a copy of the array in the node segment (w->regions). Origins read
 * the copy with plain loads, or the owner's array with one CMA read when the
 * owner has more regions than the copy holds, and retry if the version moved.
 * Origins on other nodes send requests; the owner checks them itself.
 *
 * An access may span regions that are adjacent in the owner's address space:
 * the check walks the sorted regions and asks that their union cover it. */
#include "os_rma.h"

#include <stdlib.h>
#include <string.h>

os_status_t os_dyn_init(os_win_t *w)
{
    if (pthread_mutex_init(&w->dyn.lock, NULL))
        return OS_ERR(OS_ERR_OTHER, "dynamic window: cannot create a mutex");
    w->dyn.ready = true;
    return OS_OK;
}

void os_dyn_fini(os_win_t *w)
{
    if (!w->dyn.ready)
        return;
    pthread_mutex_destroy(&w->dyn.lock);
    free(w->dyn.v);
    w->dyn = (os_dyn_table_t){ 0 };
}

/* Does the union of n regions sorted by base cover [lo, lo+len)? */
static bool covers(const os_dyn_region_t *v, size_t n, uint64_t lo, uint64_t len)
{
    if (!len)
        return true;
    if (lo + len < lo)
        return false;
    uint64_t reach = lo, hi = lo + len;
    for (size_t i = 0; i < n && v[i].base <= reach; i++) {
        if (v[i].base + v[i].size > reach)
            reach = v[i].base + v[i].size;
        if (reach >= hi)
            return true;
    }
    return false;
}

/* Owner side, version odd: copy the table where the node's origins read it. */
static void publish(os_win_t *w)
{
    os_rank_ctl_t *c = &w->ctl[w->rank];
    os_region_t *tab = &w->regions[(size_t)w->rank * (size_t)w->inline_regions];
    size_t n = w->dyn.n;
    if (n <= (size_t)w->inline_regions)
        for (size_t i = 0; i < n; i++) {
            atomic_store_explicit(&tab[i].base, w->dyn.v[i].base, memory_order_relaxed);
            atomic_store_explicit(&tab[i].size, w->dyn.v[i].size, memory_order_relaxed);
        }
    atomic_store_explicit(&c->dyn_table, (uint64_t)(uintptr_t)w->dyn.v, memory_order_relaxed);
    atomic_store_explicit(&c->dyn_count, n, memory_order_relaxed);
}

/* Sequence lock, writer side: the version is odd while the table changes.
 * Release on the way out: a reader that sees the even version sees the table. */
static void write_begin(os_win_t *w)
{
    atomic_fetch_add_explicit(&w->ctl[w->rank].dyn_version, 1, memory_order_acq_rel);
    atomic_thread_fence(memory_order_release);
}

static void write_end(os_win_t *w)
{
    publish(w);
    atomic_fetch_add_explicit(&w->ctl[w->rank].dyn_version, 1, memory_order_release);
}

os_status_t os_win_attach(os_win_t *w, void *base, MPI_Aint size)
{
    os_status_t st = OS_OK;
    if (w->flavor != OS_FLAVOR_DYNAMIC)
        return OS_ERR(OS_ERR_FLAVOR, "MPI_Win_attach on a window not created dynamic");
    if (size < 0)
        return OS_ERR(OS_ERR_SIZE, "MPI_Win_attach of %ld bytes", (long)size);
    if (size > 0 && !base)
        return OS_ERR(OS_ERR_ARG, "MPI_Win_attach of a NULL base");
    os_dyn_region_t r = { (uint64_t)(uintptr_t)base, (uint64_t)size };
    pthread_mutex_lock(&w->dyn.lock);
    /* The version goes odd before the array may move: a reader copying the
     * old array by CMA sees the version change and reads again. */
    write_begin(w);
    if (w->dyn.n == w->dyn.cap) {
        size_t cap = w->dyn.cap ? 2 * w->dyn.cap : 16;
        os_dyn_region_t *v = realloc(w->dyn.v, cap * sizeof *v);
        if (!v) {
            st = OS_ERR(OS_ERR_NOMEM, "MPI_Win_attach: a table of %zu regions", cap);
            goto out;
        }
        w->dyn.v = v;
        w->dyn.cap = cap;
    }
    size_t lo = 0, hi = w->dyn.n; /* first region with a larger base */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (w->dyn.v[mid].base <= r.base)
            lo = mid + 1;
        else
            hi = mid;
    }
    memmove(&w->dyn.v[lo + 1], &w->dyn.v[lo], (w->dyn.n - lo) * sizeof r);
    w->dyn.v[lo] = r;
    w->dyn.n++;
out:
    write_end(w);
    pthread_mutex_unlock(&w->dyn.lock);
    return st;
}

os_status_t os_win_detach(os_win_t *w, const void *base)
{
    os_status_t st = OS_OK;
    if (w->flavor != OS_FLAVOR_DYNAMIC)
        return OS_ERR(OS_ERR_FLAVOR, "MPI_Win_detach on a window not created dynamic");
    uint64_t b = (uint64_t)(uintptr_t)base;
    pthread_mutex_lock(&w->dyn.lock);
    size_t i = 0;
    while (i < w->dyn.n && w->dyn.v[i].base != b)
        i++;
    if (i == w->dyn.n) {
        st = OS_ERR(OS_ERR_ATTACH, "MPI_Win_detach of %p, which is not attached", base);
        goto out;
    }
    write_begin(w);
    memmove(&w->dyn.v[i], &w->dyn.v[i + 1], (w->dyn.n - i - 1) * sizeof w->dyn.v[0]);
    w->dyn.n--;
    write_end(w);
out:
    pthread_mutex_unlock(&w->dyn.lock);
    return st;
}

/* Read a node-mate's table under its sequence lock. */
static bool find_in_peer(os_win_t *w, int target, uint64_t addr, uint64_t len)
{
    os_rank_ctl_t *c = &w->ctl[target];
    const os_region_t *tab = &w->regions[(size_t)target * (size_t)w->inline_regions];
    os_dyn_region_t *copy = NULL;
    size_t copy_cap = 0;
    bool found = false;
    os_backoff_t b = OS_BACKOFF_INIT;
    for (;;) {
        uint64_t v1 = atomic_load_explicit(&c->dyn_version, memory_order_acquire);
        if (v1 & 1) {
            os_backoff_wait(&b);
            continue;
        }
        size_t n = atomic_load_explicit(&c->dyn_count, memory_order_relaxed);
        bool read_ok = true;
        if (n > copy_cap) {
            free(copy);
            copy_cap = n;
            copy = malloc(copy_cap * sizeof *copy);
            if (!copy)
                return false;
        }
        if (n <= (size_t)w->inline_regions) {
            for (size_t i = 0; i < n; i++) {
                copy[i].base = atomic_load_explicit(&tab[i].base, memory_order_relaxed);
                copy[i].size = atomic_load_explicit(&tab[i].size, memory_order_relaxed);
            }
        } else {
            /* More regions than the node segment holds: read the owner's own
             * array. It may be moving; the version check below says so. */
            uint64_t at = atomic_load_explicit(&c->dyn_table, memory_order_relaxed);
            read_ok = os_cma_get(w->peers[target].pid, copy, (void *)(uintptr_t)at,
                                 n * sizeof *copy) == OS_OK;
            OS_STAT(w, FALLBACK_DYN_TABLE_CMA, 1);
        }
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&c->dyn_version, memory_order_relaxed) != v1)
            continue;
        found = read_ok && covers(copy, n, addr, len);
        break;
    }
    free(copy);
    return found;
}

bool os_dyn_find(os_win_t *w, int target, uint64_t addr, uint64_t len)
{
    if (target != w->rank)
        return find_in_peer(w, target, addr, len);
    /* The owner's own table: the application thread may attach while the
     * progress thread checks a request from another node. */
    pthread_mutex_lock(&w->dyn.lock);
    bool found = covers(w->dyn.v, w->dyn.n, addr, len);
    pthread_mutex_unlock(&w->dyn.lock);
    return found;
}
