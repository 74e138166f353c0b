/* What MPI_Win_get_info reports: the keys the host MPI reports for its own
 * window of the same flavor, hints and history of MPI_Win_set_info, with
 * onesided's own keys (onesided_*) on top.
 *
 * MPICH reports its window's hints over a table of defaults, whatever its
 * flavor. The host handle, given the window's hints at creation
 * (os_shell_set_hints) and each MPI_Win_set_info after, reports exactly
 * that, so MPICH answers for itself.
 *
 * Open MPI 4.1 cannot answer through the handle: what it reports depends on
 * the osc component serving the window, and the handle is one component's
 * window whatever the flavor of ours (osc/rdma's dynamic window, or osc/sm's
 * over one process). Its rules, read from Debian's 4.1.4 and checked key by
 * key against its own windows in test_windows:
 *   - at creation, every hint as given, plus each key the component
 *     subscribes to, with the hint's value or the component's default:
 *     osc/sm (MPI_Win_allocate_shared, and MPI_Win_allocate over one
 *     process) alloc_shared_noncontig=false and blocking_fence=true, osc/rdma
 *     (every other window) no_locks=false;
 *   - at MPI_Win_set_info, a subscribed key takes the new value, and any
 *     other key given stops being reported (Open MPI keeps it internal).
 * osc/sm's reported blocking_fence is racy in Open MPI itself (processes
 * other than the first read it from shared state the first may not have
 * written yet); onesided reports the first process's value everywhere.
 *
 * Open MPI 5.0 (read from 5.0.11's own windows key by key, with osc/ucx off
 * as onesided leaves it; checked in test_windows):
 *   - at creation each component reports only the keys it knows, with the
 *     hint's value, or its default where it has one: osc/sm (MPI_Win_allocate
 *     and MPI_Win_allocate_shared on one host) accumulate_ops,
 *     alloc_shared_noncontig and blocking_fence, none by default; osc/rdma
 *     no_locks (default false), accumulate_ops, same_size and
 *     same_disp_unit;
 *   - at MPI_Win_set_info osc/rdma's no_locks takes the new value, and any
 *     other key given stops being reported. */
#include "os_mpi.h"

#include <stdlib.h>
#include <string.h>

#ifdef OMPI_MAJOR_VERSION
/* A key a component reports: its default (NULL: only when given), and
 * whether MPI_Win_set_info gives it the new value (else a new value stops
 * its report). */
typedef struct {
    const char *key, *dflt;
    bool updated;
} subscribed_t;

#if OMPI_MAJOR_VERSION >= 5
static const subscribed_t osc_sm_keys[] = { { "accumulate_ops", NULL, false },
                                            { "alloc_shared_noncontig", NULL, false },
                                            { "blocking_fence", NULL, false },
                                            { NULL, NULL, false } };
static const subscribed_t osc_rdma_keys[] = { { "no_locks", "false", true },
                                              { "accumulate_ops", NULL, false },
                                              { "same_size", NULL, false },
                                              { "same_disp_unit", NULL, false },
                                              { NULL, NULL, false } };
/* Hints beyond the components' keys are not reported. */
enum { HINTS_REPORTED = 0 };
#else
static const subscribed_t osc_sm_keys[] = { { "alloc_shared_noncontig", "false", true },
                                            { "blocking_fence", "true", true },
                                            { NULL, NULL, false } };
static const subscribed_t osc_rdma_keys[] = { { "no_locks", "false", true },
                                              { NULL, NULL, false } };
/* Every hint is reported as given. */
enum { HINTS_REPORTED = 1 };
#endif

static const subscribed_t *component_keys(const os_win_t *w)
{
    /* 5.0's osc/sm takes MPI_Win_allocate where every process is on one
     * host (across hosts osc/rdma does); 4.1's only over one process. */
    bool sm = w->flavor == OS_FLAVOR_SHARED ||
              (w->flavor == OS_FLAVOR_ALLOCATE &&
               (w->nranks == 1 || (OMPI_MAJOR_VERSION >= 5 && w->one_host)));
    return sm ? osc_sm_keys : osc_rdma_keys;
}

/* Whether MPI_Win_set_info gives key its new value in the report. */
static bool updated(const subscribed_t *keys, const char *key)
{
    for (; keys->key; keys++)
        if (!strcmp(keys->key, key))
            return keys->updated;
    return false;
}

/* Copies `key` of `from` into `to` (set) or removes it from `to`. */
static os_status_t copy_key(MPI_Info from, MPI_Info to, const char *key, bool keep)
{
    int len, flag;
    PMPI_Info_get_valuelen(from, key, &len, &flag);
    if (!flag)
        return OS_OK;
    if (!keep) {
        PMPI_Info_get_valuelen(to, key, &len, &flag);
        if (flag)
            PMPI_Info_delete(to, key);
        return OS_OK;
    }
    char *val = malloc((size_t)len + 1);
    if (!val)
        return OS_ERR(OS_ERR_NOMEM, "info value");
    PMPI_Info_get(from, key, len, val, &flag);
    val[len] = 0;
    PMPI_Info_set(to, key, val);
    free(val);
    return OS_OK;
}
#endif

os_status_t os_mpi_info_created(os_win_t *w, MPI_Info hints)
{
#ifdef OMPI_MAJOR_VERSION
    os_status_t st = OS_OK;
    int flag, len;
    if (hints == MPI_INFO_NULL || !HINTS_REPORTED)
        PMPI_Info_create(&w->host_info);
    else
        PMPI_Info_dup(hints, &w->host_info);
    /* The component's keys: as given (when the hints were not copied
     * whole), or its default. */
    for (const subscribed_t *k = component_keys(w); k->key && !st; k++) {
        PMPI_Info_get_valuelen(w->host_info, k->key, &len, &flag);
        if (flag)
            continue;
        if (hints != MPI_INFO_NULL)
            PMPI_Info_get_valuelen(hints, k->key, &len, &flag);
        if (flag)
            st = copy_key(hints, w->host_info, k->key, true);
        else if (k->dflt)
            PMPI_Info_set(w->host_info, k->key, k->dflt);
    }
    return st;
#else
    (void)w, (void)hints;
    return OS_OK;
#endif
}

os_status_t os_mpi_info_set(os_win_t *w, MPI_Info hints)
{
#ifdef OMPI_MAJOR_VERSION
    os_status_t st = OS_OK;
    char key[MPI_MAX_INFO_KEY + 1];
    int n = 0;
    if (hints != MPI_INFO_NULL)
        PMPI_Info_get_nkeys(hints, &n);
    const subscribed_t *keys = component_keys(w);
    for (int i = 0; i < n && !st; i++) {
        PMPI_Info_get_nthkey(hints, i, key);
        st = copy_key(hints, w->host_info, key, updated(keys, key));
    }
    return st;
#else
    (void)w, (void)hints;
    return OS_OK;
#endif
}

int os_mpi_info_get(os_win_t *w, MPI_Info *out)
{
#ifdef OMPI_MAJOR_VERSION
    return PMPI_Info_dup(w->host_info, out);
#else
    return PMPI_Win_get_info(w->handle, out);
#endif
}

void os_mpi_info_free(os_win_t *w)
{
    if (w->host_info != MPI_INFO_NULL)
        PMPI_Info_free(&w->host_info);
}
