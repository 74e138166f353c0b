/* Window creation, free, attributes, info, shared queries, dynamic memory. */
#include "os_mpi.h"

#include <stdlib.h>
#include <string.h>

/* The window's hints: onesided's own keys go to its configuration. The
 * standard keys (and any others) are the host MPI's business: they are given
 * to the host MPI's rules for what MPI_Win_get_info reports (win_info.c). */
static os_status_t read_info(MPI_Info info, os_config_t *cfg, bool *noncontig)
{
    int nkeys = 0, flag, len;
    char key[MPI_MAX_INFO_KEY + 1], *val = NULL;
    os_status_t st = OS_OK;

    if (info == MPI_INFO_NULL)
        return OS_OK;
    PMPI_Info_get_nkeys(info, &nkeys);
    for (int i = 0; i < nkeys && !st; i++) {
        PMPI_Info_get_nthkey(info, i, key);
        PMPI_Info_get_valuelen(info, key, &len, &flag);
        if (!flag)
            continue;
        char *grown = realloc(val, (size_t)len + 1);
        if (!grown) {
            st = OS_ERR(OS_ERR_NOMEM, "info value");
            break;
        }
        val = grown;
        PMPI_Info_get(info, key, len, val, &flag);
        val[len] = 0;
        st = os_config_apply_info(cfg, key, val);
        if (!strcmp(key, "alloc_shared_noncontig"))
            *noncontig = !strcmp(val, "true");
        /* Paper 003: a window that will not be locked needs no progress thread. */
        if (!strcmp(key, "no_locks") && !strcmp(val, "true"))
            cfg->progress = 0;
    }
    free(val);
    return st;
}

static int create(const char *call, os_flavor_t flavor, void *base, MPI_Aint size,
                  MPI_Aint disp_unit, MPI_Info info, MPI_Comm comm, void *baseptr, MPI_Win *win)
{
    static const int mpi_flavor[] = { MPI_WIN_FLAVOR_CREATE, MPI_WIN_FLAVOR_ALLOCATE,
                                      MPI_WIN_FLAVOR_SHARED, MPI_WIN_FLAVOR_DYNAMIC };
    os_status_t st = OS_OK;
    os_config_t cfg;
    bool noncontig = false;
    os_win_t *w = NULL;

    os_mpi_init(comm);
    cfg = os_config;
    if (comm == MPI_COMM_NULL)
        return os_mpi_raise_comm(MPI_COMM_NULL, call, OS_ERR(OS_ERR_COMM, "MPI_COMM_NULL"));
    if (size < 0) {
        st = OS_ERR(OS_ERR_SIZE, "window size %ld is negative", (long)size);
        goto fail;
    }
    if (disp_unit <= 0 || disp_unit > 0x7fffffff) {
        st = OS_ERR(OS_ERR_DISP, "displacement unit %ld is not positive", (long)disp_unit);
        goto fail;
    }
    if (!win || ((flavor == OS_FLAVOR_ALLOCATE || flavor == OS_FLAVOR_SHARED) && !baseptr)) {
        st = OS_ERR(OS_ERR_ARG, "NULL output argument");
        goto fail;
    }
    if ((st = read_info(info, &cfg, &noncontig)))
        goto fail;
    if ((st = os_win_create(flavor, base, size, (int)disp_unit, &cfg, noncontig, info, comm, &w)))
        goto fail;
    w->attr_flavor = mpi_flavor[flavor];
    w->attr_model = MPI_WIN_UNIFIED;
    w->host_info = MPI_INFO_NULL;
    if ((st = os_mpi_info_created(w, info)) || (st = os_mpi_win_register(w))) {
        os_mpi_info_free(w);
        os_win_free(w);
        goto fail;
    }
    if (baseptr && (flavor == OS_FLAVOR_ALLOCATE || flavor == OS_FLAVOR_SHARED))
        *(void **)baseptr = w->base;
    *win = w->handle;
    return MPI_SUCCESS;
fail:
    return os_mpi_raise_comm(comm, call, st);
}

int MPI_Win_create(void *base, MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm,
                   MPI_Win *win)
{
    return create("MPI_Win_create", OS_FLAVOR_CREATE, base, size, disp_unit, info, comm, NULL, win);
}

int MPI_Win_create_c(void *base, MPI_Aint size, MPI_Aint disp_unit, MPI_Info info,
                     MPI_Comm comm, MPI_Win *win)
{
    return create("MPI_Win_create_c", OS_FLAVOR_CREATE, base, size, disp_unit, info, comm, NULL, win);
}

int MPI_Win_allocate(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, void *baseptr,
                     MPI_Win *win)
{
    return create("MPI_Win_allocate", OS_FLAVOR_ALLOCATE, NULL, size, disp_unit, info, comm,
                  baseptr, win);
}

int MPI_Win_allocate_c(MPI_Aint size, MPI_Aint disp_unit, MPI_Info info, MPI_Comm comm,
                       void *baseptr, MPI_Win *win)
{
    return create("MPI_Win_allocate_c", OS_FLAVOR_ALLOCATE, NULL, size, disp_unit, info, comm,
                  baseptr, win);
}

int MPI_Win_allocate_shared(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm,
                            void *baseptr, MPI_Win *win)
{
    return create("MPI_Win_allocate_shared", OS_FLAVOR_SHARED, NULL, size, disp_unit, info,
                  comm, baseptr, win);
}

int MPI_Win_allocate_shared_c(MPI_Aint size, MPI_Aint disp_unit, MPI_Info info, MPI_Comm comm,
                              void *baseptr, MPI_Win *win)
{
    return create("MPI_Win_allocate_shared_c", OS_FLAVOR_SHARED, NULL, size, disp_unit, info,
                  comm, baseptr, win);
}

int MPI_Win_create_dynamic(MPI_Info info, MPI_Comm comm, MPI_Win *win)
{
    return create("MPI_Win_create_dynamic", OS_FLAVOR_DYNAMIC, NULL, 0, 1, info, comm, NULL, win);
}

int MPI_Win_free(MPI_Win *win)
{
    os_win_t *w = win ? os_mpi_win(*win) : NULL;
    if (!w)
        return PMPI_Win_free(win); /* not a window of ours: the host MPI reports it */
    MPI_Win handle = *win;
    os_status_t st = os_win_can_free(w);
    if (st)
        return os_mpi_raise_win(handle, "MPI_Win_free", st);
    /* The host handle outlives the window (it serves the next one): the
     * program's attributes are deleted now, their callbacks called, as
     * MPI_Win_free does. */
    for (int i = 0; i < w->nattr_keys; i++)
        PMPI_Win_delete_attr(handle, w->attr_keys[i]);
    os_mpi_stats_collect(w, handle);
    os_mpi_win_unregister(w);
    os_mpi_info_free(w);
    os_win_free(w);
    *win = MPI_WIN_NULL;
    return MPI_SUCCESS;
}

int MPI_Win_get_attr(MPI_Win win, int keyval, void *attribute_val, int *flag)
{
    os_win_t *w = os_mpi_win(win);
    if (w) {
        /* MPI returns pointers to values for these, the base itself for BASE. */
        if (keyval == MPI_WIN_BASE) {
            *(void **)attribute_val = w->base;
            *flag = 1;
            return MPI_SUCCESS;
        }
        if (keyval == MPI_WIN_SIZE) {
            *(MPI_Aint **)attribute_val = &w->size;
            *flag = 1;
            return MPI_SUCCESS;
        }
        if (keyval == MPI_WIN_DISP_UNIT) {
            *(int **)attribute_val = &w->disp_unit;
            *flag = 1;
            return MPI_SUCCESS;
        }
        if (keyval == MPI_WIN_CREATE_FLAVOR) {
            *(int **)attribute_val = &w->attr_flavor;
            *flag = 1;
            return MPI_SUCCESS;
        }
        if (keyval == MPI_WIN_MODEL) {
            *(int **)attribute_val = &w->attr_model;
            *flag = 1;
            return MPI_SUCCESS;
        }
    }
    return PMPI_Win_get_attr(win, keyval, attribute_val, flag);
}

int MPI_Win_set_attr(MPI_Win win, int keyval, void *attribute_val)
{
    OS_WIN_ENTER(w, win);
    int rc = PMPI_Win_set_attr(win, keyval, attribute_val);
    if (rc != MPI_SUCCESS || !w)
        return rc;
    /* Remember the keyval, once, for MPI_Win_free. */
    for (int i = 0; i < w->nattr_keys; i++)
        if (w->attr_keys[i] == keyval)
            return rc;
    if (w->nattr_keys == w->capattr_keys) {
        int cap = w->capattr_keys ? 2 * w->capattr_keys : 4;
        int *k = realloc(w->attr_keys, sizeof *k * (size_t)cap);
        if (!k)
            return os_mpi_raise_win(win, "MPI_Win_set_attr",
                                    OS_ERR(OS_ERR_NOMEM, "attribute keys"));
        w->attr_keys = k;
        w->capattr_keys = cap;
    }
    w->attr_keys[w->nattr_keys++] = keyval;
    return rc;
}

int MPI_Win_delete_attr(MPI_Win win, int keyval)
{
    OS_WIN_ENTER(w, win);
    int rc = PMPI_Win_delete_attr(win, keyval);
    for (int i = 0; w && rc == MPI_SUCCESS && i < w->nattr_keys; i++)
        if (w->attr_keys[i] == keyval) {
            w->attr_keys[i] = w->attr_keys[--w->nattr_keys];
            break;
        }
    return rc;
}

/* From the window, not the host handle, which may span this process alone
 * (shell.c: where the host can make no window over the communicator). */
int MPI_Win_get_group(MPI_Win win, MPI_Group *group)
{
    os_win_t *w = os_mpi_win(win);
    if (!w)
        return PMPI_Win_get_group(win, group);
    if (!group)
        return os_mpi_raise_win(win, "MPI_Win_get_group", OS_ERR(OS_ERR_ARG, "NULL group"));
    return PMPI_Comm_group(w->comm, group);
}

static void put_info(const char *key, const char *value, void *ctx)
{
    PMPI_Info_set(*(MPI_Info *)ctx, key, value);
}

int MPI_Win_get_info(MPI_Win win, MPI_Info *info_used)
{
    OS_WIN_ENTER(w, win);
    if (!w)
        return PMPI_Win_get_info(win, info_used);
    int rc = os_mpi_info_get(w, info_used);
    if (rc != MPI_SUCCESS)
        return rc;
    os_config_each_info(&w->cfg, put_info, info_used);
    return MPI_SUCCESS;
}

int MPI_Win_set_info(MPI_Win win, MPI_Info info)
{
    OS_WIN_ENTER(w, win);
    if (!w)
        return PMPI_Win_set_info(win, info);
    os_config_t cfg = w->cfg;
    bool noncontig = w->noncontig;
    os_status_t st = read_info(info, &cfg, &noncontig);
    if (st)
        return os_mpi_raise_win(win, "MPI_Win_set_info", st);
    int rc = PMPI_Win_set_info(w->handle, info);
    if (rc != MPI_SUCCESS)
        return rc;
    os_shell_hints_from_program(w->shell);
    if ((st = os_mpi_info_set(w, info)))
        return os_mpi_raise_win(win, "MPI_Win_set_info", st);
    /* Fixed at creation, because every process must make the same choice
     * and they were agreed on then: the region tables' layout, the fence
     * choice, the lock design and its policy, direct accumulate and with it
     * the bulk threshold. */
    cfg.fence_defer = w->cfg.fence_defer;
    cfg.lock = w->cfg.lock;
    cfg.lock_policy = w->cfg.lock_policy;
    cfg.lock_streak = w->cfg.lock_streak;
    cfg.acc_direct = w->cfg.acc_direct;
    if (w->cfg.acc_direct)
        cfg.acc_bulk_min = w->cfg.acc_bulk_min;
    w->cfg = cfg;
    if (!w->cfg.acc_direct)
        w->acc_bulk_bytes = os_acc_bulk_bytes(w, cfg.acc_bulk_min);
    return MPI_SUCCESS;
}

static int shared_query(const char *call, MPI_Win win, int rank, MPI_Aint *size, int *disp_unit,
                        void *baseptr)
{
    os_win_t *w = os_mpi_win(win);
    if (!w)
        return os_mpi_raise_win(win, call, OS_ERR(OS_ERR_WIN, "not a window"));
    os_status_t st = os_win_shared_query(w, rank, size, disp_unit, (void **)baseptr);
    return st ? os_mpi_raise_win(win, call, st) : MPI_SUCCESS;
}

int MPI_Win_shared_query(MPI_Win win, int rank, MPI_Aint *size, int *disp_unit, void *baseptr)
{
    return shared_query("MPI_Win_shared_query", win, rank, size, disp_unit, baseptr);
}

int MPI_Win_shared_query_c(MPI_Win win, int rank, MPI_Aint *size, MPI_Aint *disp_unit,
                           void *baseptr)
{
    int du = 0;
    int rc = shared_query("MPI_Win_shared_query_c", win, rank, size, &du, baseptr);
    if (rc == MPI_SUCCESS)
        *disp_unit = du;
    return rc;
}

int MPI_Win_attach(MPI_Win win, void *base, MPI_Aint size)
{
    OS_WIN_ENTER(w, win);
    if (!w)
        return os_mpi_raise_win(win, "MPI_Win_attach", OS_ERR(OS_ERR_WIN, "not a window"));
    os_status_t st = os_win_attach(w, base, size);
    return st ? os_mpi_raise_win(win, "MPI_Win_attach", st) : MPI_SUCCESS;
}

int MPI_Win_detach(MPI_Win win, const void *base)
{
    OS_WIN_ENTER(w, win);
    if (!w)
        return os_mpi_raise_win(win, "MPI_Win_detach", OS_ERR(OS_ERR_WIN, "not a window"));
    os_status_t st = os_win_detach(w, base);
    return st ? os_mpi_raise_win(win, "MPI_Win_detach", st) : MPI_SUCCESS;
}
