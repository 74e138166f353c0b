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
 * written yet); onesided reports the first process's value everywhere. */
#include "os_mpi.h"

#include <stdlib.h>
#include <string.h>

#ifdef OMPI_MAJOR_VERSION
typedef struct {
    const char *key, *dflt;
} subscribed_t;

#if OMPI_MAJOR_VERSION >= 5
/* Open MPI 5.0 reports neither the hints a window was given nor, from
 * osc/sm (which takes MPI_Win_allocate on one host too), any key. */
static const subscribed_t osc_sm_keys[] = { { NULL, NULL } };
enum { HINTS_REPORTED = 0 };
#else
static const subscribed_t osc_sm_keys[] = { { "alloc_shared_noncontig", "false" },
                                            { "blocking_fence", "true" },
                                            { NULL, NULL } };
enum { HINTS_REPORTED = 1 };
#endif
static const subscribed_t osc_rdma_keys[] = { { "no_locks", "false" }, { NULL, NULL } };

static const subscribed_t *component_keys(const os_win_t *w)
{
    bool sm = w->flavor == OS_FLAVOR_SHARED ||
              (w->flavor == OS_FLAVOR_ALLOCATE && (w->nranks == 1 || OMPI_MAJOR_VERSION >= 5));
    return sm ? osc_sm_keys : osc_rdma_keys;
}

static bool subscribed(const subscribed_t *keys, const char *key)
{
    for (; keys->key; keys++)
        if (!strcmp(keys->key, key))
            return true;
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
    int flag, len;
    if (hints == MPI_INFO_NULL || !HINTS_REPORTED)
        PMPI_Info_create(&w->host_info);
    else
        PMPI_Info_dup(hints, &w->host_info);
    for (const subscribed_t *k = component_keys(w); k->key; k++) {
        PMPI_Info_get_valuelen(w->host_info, k->key, &len, &flag);
        if (!flag)
            PMPI_Info_set(w->host_info, k->key, k->dflt);
    }
    return OS_OK;
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
        st = copy_key(hints, w->host_info, key, subscribed(keys, key));
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
