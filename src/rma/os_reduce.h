/*
 * Reduction operations of accumulate: every MPI predefined op on every
 * element representation, plain and atomic per element. Pure C.
 */
#ifndef OS_REDUCE_H
#define OS_REDUCE_H

#include "os_dtype.h"

typedef enum {
    OS_OP_SUM, OS_OP_PROD, OS_OP_MIN, OS_OP_MAX,
    OS_OP_LAND, OS_OP_LOR, OS_OP_LXOR,
    OS_OP_BAND, OS_OP_BOR, OS_OP_BXOR,
    OS_OP_MAXLOC, OS_OP_MINLOC,
    OS_OP_REPLACE, OS_OP_NO_OP,
    OS_OP_COUNT
} os_op_t;

const char *os_op_name(os_op_t op);
const char *os_basic_name(os_basic_t b);
/* Where MPI-3.1 5.9.2 leaves room, programs may rely on what their host MPI
 * accepts, so onesided accepts the same. Hosts differ, and not only by
 * family: MPICH 4.0 takes the logical ops on Fortran integers, MPICH 5.0
 * does not; Open MPI takes MPI_BYTE (as unsigned bytes) for every
 * arithmetic and logical op. The front end asks the host (MPI_Reduce_local)
 * once at initialization: Fortran integer types the host takes the logical
 * ops on are classed as C integers, and these flags say what MPI_BYTE
 * takes. */
typedef struct {
    bool byte_arith;   /* MIN, MAX, SUM, PROD on MPI_BYTE */
    bool byte_logical; /* LAND, LOR, LXOR on MPI_BYTE */
} os_op_host_t;
extern os_op_host_t os_op_host;
/* Is op allowed on elements of this class (MPI-3.1 5.9.2, plus REPLACE/NO_OP
 * on any, plus the host's additions above)? */
static inline bool os_op_valid(os_op_t op, os_class_t cls)
{
    switch (op) {
    case OS_OP_REPLACE:
    case OS_OP_NO_OP:
        return true;
    case OS_OP_MIN:
    case OS_OP_MAX:
        return cls == OS_CLASS_CINT || cls == OS_CLASS_FINT || cls == OS_CLASS_FLOAT ||
               cls == OS_CLASS_CHAR || (os_op_host.byte_arith && cls == OS_CLASS_BYTE);
    case OS_OP_SUM:
    case OS_OP_PROD:
        return cls == OS_CLASS_CINT || cls == OS_CLASS_FINT || cls == OS_CLASS_FLOAT ||
               cls == OS_CLASS_COMPLEX || cls == OS_CLASS_CHAR ||
               (os_op_host.byte_arith && cls == OS_CLASS_BYTE);
    case OS_OP_LAND:
    case OS_OP_LOR:
    case OS_OP_LXOR:
        /* MPI-3.1 lists C integers; Fortran integers the host takes them
         * on are classed as C integers (os_op_host). */
        return cls == OS_CLASS_CINT || cls == OS_CLASS_LOGICAL || cls == OS_CLASS_CHAR ||
               (os_op_host.byte_logical && cls == OS_CLASS_BYTE);
    case OS_OP_BAND:
    case OS_OP_BOR:
    case OS_OP_BXOR:
        return cls == OS_CLASS_CINT || cls == OS_CLASS_FINT || cls == OS_CLASS_BYTE ||
               cls == OS_CLASS_CHAR;
    case OS_OP_MAXLOC:
    case OS_OP_MINLOC:
        return cls == OS_CLASS_PAIR;
    default:
        return false;
    }
}
/* target[i] = target[i] op origin[i] for n elements of esize data bytes each
 * (os_dtype_t.basic_size); buffers need no alignment. */
void os_reduce(os_op_t op, os_basic_t basic, size_t esize, void *target, const void *origin,
               size_t n);
/* The plain loop os_reduce runs for contiguous elements of esize data
 * bytes: target[i] = target[i] op origin[i], no alignment needed. NULL
 * where os_reduce does more (pair types whose C struct is wider than
 * their data) or nothing fits (REPLACE, NO_OP, an op the type does not
 * take). Looked up once, it saves a small accumulate os_reduce's
 * dispatch. */
typedef void (*os_reduce_fn)(void *target, const void *origin, size_t n);
os_reduce_fn os_reduce_loop(os_op_t op, os_basic_t basic, size_t esize);
/* Can elements of this size at this address be updated with one CPU atomic? */
static inline bool os_reduce_atomic_ok(size_t elem_size, const void *addr)
{
    /* 1, 2, 4 or 8: a power of two (0 wraps to a large elem_size - 1) of
     * at most 8, tested without a branch per size (13 instructions of an
     * 8-byte fetch_and_op's path as four compares, callgrind). */
    const size_t mask = elem_size - 1;
    return mask < 8 && !(elem_size & mask) && !((uintptr_t)addr & mask);
}
/* The same for every element of any number of copies of t at addr: t's
 * element size takes a CPU atomic, and every run, and the extent, keep the
 * elements aligned for it. */
bool os_reduce_atomic_ok_type(const os_dtype_t *t, const char *addr);
/* Element-wise atomic form: each element of target is updated with one atomic
 * read-modify-write (fetch-op or a compare-and-swap loop); when fetch is not
 * NULL it receives the values the target held before. Requires
 * os_reduce_atomic_ok(elem_size, target). */
void os_reduce_atomic(os_op_t op, os_basic_t basic, size_t elem_size, void *target,
                      const void *origin, void *fetch, size_t n);
/* An accumulate over scattered runs of the target: runs[i].len bytes at
 * base + runs[i].disp, each a whole number of elements, the origin's data
 * (NULL for NO_OP) and the fetched data (NULL when none is wanted) packed in
 * run order. atomic: one CPU atomic per element (requires
 * os_reduce_atomic_ok for every run); else plain loads and stores, the
 * caller holding off every other writer. One call per accumulate, the op
 * chosen once, the target prefetched a few runs ahead. */
void os_reduce_runs(os_op_t op, os_basic_t basic, size_t esize, char *base,
                    const os_block_t *runs, size_t nruns, const char *origin, char *fetch,
                    bool atomic);
/* Atomic compare-and-swap of one element: fetch gets the old value. */
void os_cas_atomic(size_t elem_size, void *target, const void *compare, const void *swap,
                   void *fetch);

#endif
