/*
 * The MPI front end: MPI_* one-sided entry points over the RMA engine, with
 * handle lookups, datatype decoding and error reporting through the window's
 * error handler. Everything not one-sided goes to the host MPI through PMPI.
 */
#ifndef OS_MPI_H
#define OS_MPI_H

#include <mpi.h>

#include "../rma/os_rma.h"

/* MPI-4 sessions: MPI-4 libraries, and Open MPI 5, which implements them
 * while its mpi.h says MPI 3.1. */
#if MPI_VERSION >= 4 || (defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5)
#define OS_HAVE_SESSIONS 1
#else
#define OS_HAVE_SESSIONS 0
#endif

/* Idempotent: configuration, predefined datatypes, the network, the
 * finalize hook. comm: the communicator of a window being created (the
 * first one starts onesided in a program of MPI-4 sessions only), or
 * MPI_COMM_NULL. */
void os_mpi_init(MPI_Comm comm);

/* Window handle -> engine window; NULL when the handle is not ours. Each
 * thread remembers the last window it looked up (most programs use one at a
 * time), valid while no window has come or gone since (handles are
 * reused): the check is inline, a few instructions on every RMA call. */
typedef struct {
    MPI_Win handle;
    os_win_t *win;
    uint64_t gen;
} os_win_cache_t;
extern _Thread_local os_win_cache_t os_win_cache;
extern _Atomic uint64_t os_windows_gen;
/* Out of line, so that the inline check stays a few instructions. */
__attribute__((noinline)) os_win_t *os_mpi_win_lookup(MPI_Win handle);
static inline os_win_t *os_mpi_win(MPI_Win handle)
{
    if (handle == os_win_cache.handle &&
        atomic_load_explicit(&os_windows_gen, memory_order_acquire) == os_win_cache.gen)
        return os_win_cache.win;
    return os_mpi_win_lookup(handle);
}
/* The same without the lookup: NULL unless handle is the cached window. */
static inline os_win_t *os_mpi_win_cached(MPI_Win handle)
{
    if (handle == os_win_cache.handle &&
        atomic_load_explicit(&os_windows_gen, memory_order_acquire) == os_win_cache.gen)
        return os_win_cache.win;
    return NULL;
}

/* The window of a handle, entered for one MPI call: under
 * MPI_THREAD_MULTIPLE its mutex is held until the variable goes out of
 * scope (given up only while the call yields in a wait). Threads of one
 * process may then issue operations, flushes and lock epochs on one window
 * at once; the window's state changes under its mutex. */
#define OS_WIN_ENTER(var, handle)                                                              \
    os_win_t *var __attribute__((cleanup(os_mpi_win_leave))) = os_mpi_win_enter(handle)
void os_mpi_win_lock(os_win_t *w);
void os_mpi_win_unlock(os_win_t *w);
/* Inline: a single-threaded program pays one branch per call. */
static inline os_win_t *os_mpi_win_enter(MPI_Win handle)
{
    os_win_t *w = os_mpi_win(handle);
    if (w && os_threaded)
        os_mpi_win_lock(w);
    return w;
}
static inline void os_mpi_win_leave(os_win_t **w)
{
    if (*w && os_threaded)
        os_mpi_win_unlock(*w);
}
os_status_t os_mpi_win_register(os_win_t *w);
void os_mpi_win_unregister(os_win_t *w);

/* Datatype handle -> flattened type (borrowed; cached until MPI_Type_free).
 * A derived type met for the first time is decoded, unless a type of the
 * same constructor and arguments was decoded before (layout cache, for
 * programs that create, use and free the same type in a loop); how, when not
 * NULL, tells which. */
typedef enum { OS_DTYPE_CACHED, OS_DTYPE_DECODED, OS_DTYPE_REUSED } os_dtype_how_t;
__attribute__((noinline)) os_status_t os_mpi_dtype_lookup(MPI_Datatype dt, os_dtype_t **out,
                                                        os_dtype_how_t *how);
/* As with windows, each thread remembers the last type it looked up, valid
 * until any type leaves the cache (MPI_Type_free; handles are reused). */
typedef struct {
    MPI_Datatype handle;
    os_dtype_t *type;
    uint64_t gen;
} os_dtype_cache_t;
extern _Thread_local os_dtype_cache_t os_dtype_cache;
extern _Atomic uint64_t os_types_gen;
static inline os_status_t os_mpi_dtype(MPI_Datatype dt, os_dtype_t **out, os_dtype_how_t *how)
{
    if (dt == os_dtype_cache.handle &&
        atomic_load_explicit(&os_types_gen, memory_order_acquire) == os_dtype_cache.gen) {
        *out = os_dtype_cache.type;
        if (how)
            *how = OS_DTYPE_CACHED;
        return OS_OK;
    }
    return os_mpi_dtype_lookup(dt, out, how);
}
void os_mpi_dtype_init(void);
/* MPI_Op -> os_op_t, or -1 for a user-defined or invalid op. */
int os_mpi_op(MPI_Op op);

/* Map a status to its MPI error class. */
int os_mpi_error_class(os_status_t st);
/* Report an error: under MPI_ERRORS_ARE_FATAL print a readable message and
 * abort; otherwise call the object's error handler. Returns the error class. */
int os_mpi_raise_win(MPI_Win handle, const char *call, os_status_t st);
int os_mpi_raise_comm(MPI_Comm comm, const char *call, os_status_t st);

/* win_info.c: what MPI_Win_get_info reports, as the host MPI does for its
 * own window of the same flavor and hints (both set on the host handle
 * under MPICH, kept in w->host_info under Open MPI). */
os_status_t os_mpi_info_created(os_win_t *w, MPI_Info hints);
os_status_t os_mpi_info_set(os_win_t *w, MPI_Info hints);
int os_mpi_info_get(os_win_t *w, MPI_Info *out);
void os_mpi_info_free(os_win_t *w);

/* Statistics: collect a window's counters when it is freed (collective). */
void os_mpi_stats_collect(os_win_t *w, MPI_Win handle);
void os_mpi_stats_report(void);

/* host_finalize.c: MPI_Finalize has begun (the host MPI's endpoint closes
 * that follow are left to its ucp_worker_destroy). */
void os_mpi_host_finalize_begin(void);
/* The host MPI's poll loop serves other nodes' requests (host_progress.c):
 * started once the network is up, stopped before it goes down. */
void os_mpi_host_progress_start(void);
void os_mpi_host_progress_stop(void);
/* Whether the host's progress runs onesided's callback (Open MPI's
 * opal_progress), which completes R* requests left in flight
 * (os_mpi_requests_poll, rma.c; it returns how many it completed). */
bool os_mpi_host_progress_completes_requests(void);
int os_mpi_requests_poll(void);

#endif
