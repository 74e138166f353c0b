/*
 * The MPI front end: MPI_* one-sided entry points over the RMA engine, with
 * handle lookups, datatype decoding and error reporting through the window's
 * error handler. Everything not one-sided goes to the host MPI through PMPI.
 */
#ifndef OS_MPI_H
#define OS_MPI_H

#include <mpi.h>

#include "../rma/os_rma.h"

/* Idempotent: configuration, predefined datatypes, the finalize hook. */
void os_mpi_init(void);

/* Window handle -> engine window; NULL when the handle is not ours. */
os_win_t *os_mpi_win(MPI_Win handle);
os_status_t os_mpi_win_register(os_win_t *w);
void os_mpi_win_unregister(os_win_t *w);

/* Datatype handle -> flattened type (borrowed; cached until MPI_Type_free). */
os_status_t os_mpi_dtype(MPI_Datatype dt, os_dtype_t **out);
void os_mpi_dtype_init(void);
/* MPI_Op -> os_op_t, or -1 for a user-defined or invalid op. */
int os_mpi_op(MPI_Op op);

/* Map a status to its MPI error class. */
int os_mpi_error_class(os_status_t st);
/* Report an error: under MPI_ERRORS_ARE_FATAL print a readable message and
 * abort; otherwise call the object's error handler. Returns the error class. */
int os_mpi_raise_win(MPI_Win handle, const char *call, os_status_t st);
int os_mpi_raise_comm(MPI_Comm comm, const char *call, os_status_t st);

/* Statistics: collect a window's counters when it is freed (collective). */
void os_mpi_stats_collect(os_win_t *w, MPI_Win handle);
void os_mpi_stats_report(void);

#endif
