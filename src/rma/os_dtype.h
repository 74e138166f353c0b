/*
 * Flattened datatypes: a type map reduced to a list of contiguous byte blocks
 * in type-map order, plus what accumulate needs to know about its elements.
 * Built once per MPI datatype (the front end decodes MPI types into these
 * constructors and caches the result); pure C, unit-tested without MPI.
 */
#ifndef OS_DTYPE_H
#define OS_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../util/os_util.h"

/* How an element is represented in memory: what reduction code operates on. */
typedef enum {
    OS_B_NONE = 0,
    OS_B_INT8, OS_B_INT16, OS_B_INT32, OS_B_INT64,
    OS_B_UINT8, OS_B_UINT16, OS_B_UINT32, OS_B_UINT64,
    OS_B_FLOAT, OS_B_DOUBLE, OS_B_LONG_DOUBLE,
    OS_B_C_FLOAT_COMPLEX, OS_B_C_DOUBLE_COMPLEX, OS_B_C_LONG_DOUBLE_COMPLEX,
    OS_B_BOOL,      /* C _Bool / C++ bool, one byte */
    OS_B_LOGICAL,   /* Fortran LOGICAL: an int, zero is false */
    OS_B_FLOAT_INT, OS_B_DOUBLE_INT, OS_B_LONG_INT, OS_B_2INT, OS_B_SHORT_INT,
    OS_B_LONG_DOUBLE_INT, OS_B_2FLOAT, OS_B_2DOUBLE,
    OS_B_OPAQUE,    /* a predefined type with no arithmetic here: REPLACE / NO_OP only */
    OS_B_MIXED,     /* a derived type whose elements are not all of one type */
    OS_B_COUNT
} os_basic_t;

/* The MPI-3.1 5.9.2 group of a predefined type: decides which ops are allowed. */
typedef enum {
    OS_CLASS_NONE = 0, /* MPI_PACKED, MPI_CHARACTER, ...: REPLACE / NO_OP only */
    OS_CLASS_CINT,     /* C integer (and multi-language MPI_AINT, MPI_OFFSET, MPI_COUNT) */
    OS_CLASS_FINT,     /* Fortran integer */
    OS_CLASS_FLOAT,    /* floating point */
    OS_CLASS_LOGICAL,  /* logical */
    OS_CLASS_COMPLEX,  /* complex */
    OS_CLASS_BYTE,     /* MPI_BYTE */
    OS_CLASS_PAIR,     /* MINLOC/MAXLOC pair types */
    OS_CLASS_CHAR,     /* MPI_CHAR: MPICH treats it as a C integer for reductions */
} os_class_t;

typedef struct {
    ptrdiff_t disp; /* from the buffer address */
    size_t len;
} os_block_t;

typedef struct os_dtype {
    atomic_int refs;
    size_t size;             /* data bytes in one element of this type */
    ptrdiff_t lb, extent;    /* MPI lower bound and extent */
    ptrdiff_t true_lb;       /* lowest data byte */
    ptrdiff_t true_extent;   /* highest data byte + 1 - true_lb */
    size_t nblocks;
    os_block_t *blocks;      /* type-map order, adjacent blocks merged */
    uint8_t basic;           /* os_basic_t shared by every element, or OS_B_MIXED */
    uint8_t cls;             /* os_class_t of those elements */
    uint16_t basic_size;     /* bytes of one basic element (data, no padding) */
    bool contig;             /* count copies of the type form one contiguous block */
    bool predefined;         /* never freed */
} os_dtype_t;

/* A predefined type: `size` data bytes, `extent` bytes apart. */
os_dtype_t *os_dtype_new_basic(os_basic_t basic, os_class_t cls, size_t size, ptrdiff_t extent);
/* The general constructor every MPI combiner reduces to: block i is
 * blocklens[i] consecutive copies of children[i] at byte displacement displs[i].
 * lb/extent follow the MPI rules without alignment padding; the front end
 * overrides them with the host MPI's values (os_dtype_set_bounds). */
os_status_t os_dtype_new_struct(size_t count, const size_t *blocklens, const ptrdiff_t *displs,
                                os_dtype_t *const *children, os_dtype_t **out);
os_status_t os_dtype_new_contiguous(size_t count, os_dtype_t *child, os_dtype_t **out);
os_status_t os_dtype_new_hvector(size_t count, size_t blocklen, ptrdiff_t stride_bytes,
                                 os_dtype_t *child, os_dtype_t **out);
os_status_t os_dtype_new_hindexed(size_t count, const size_t *blocklens,
                                  const ptrdiff_t *displs_bytes, os_dtype_t *child,
                                  os_dtype_t **out);
/* MPI_Type_create_subarray; order is 0 for C order, 1 for Fortran order. */
os_status_t os_dtype_new_subarray(int ndims, const int *sizes, const int *subsizes,
                                  const int *starts, int fortran_order, os_dtype_t *child,
                                  os_dtype_t **out);
os_status_t os_dtype_new_resized(os_dtype_t *child, ptrdiff_t lb, ptrdiff_t extent,
                                 os_dtype_t **out);
void os_dtype_set_bounds(os_dtype_t *t, ptrdiff_t lb, ptrdiff_t extent);
/* Plain bytes (a static predefined type): the packed side of copies. */
os_dtype_t *os_dtype_byte(void);
void os_dtype_retain(os_dtype_t *t);
void os_dtype_release(os_dtype_t *t);

/* Byte span [lo, hi) touched by `count` elements of t, relative to the buffer. */
void os_dtype_span(const os_dtype_t *t, size_t count, ptrdiff_t *lo, ptrdiff_t *hi);

/* Walks the contiguous runs of `count` elements of a type at `base`. */
typedef struct {
    const os_dtype_t *t;
    char *base;
    size_t count, rep, blk, off;
    size_t contig_left; /* contiguous types: bytes left in the one run */
} os_cursor_t;
void os_cursor_init(os_cursor_t *c, const os_dtype_t *t, const void *base, size_t count);
/* Next run of at most max bytes: sets *ptr, returns its length, 0 at the end. */
size_t os_cursor_next(os_cursor_t *c, size_t max, char **ptr);
/* Copy at most `bytes` bytes of `count` elements of t at buf into the
 * contiguous dst (pack), or from src into them (unpack), in type-map order. */
void os_dtype_pack(char *dst, const os_dtype_t *t, const void *buf, size_t count, size_t bytes);
/* The bytes of `count` elements of t at addr in one contiguous piece: addr
 * itself for a contiguous type, else packed into *tmp (the caller frees it;
 * NULL when nothing was packed). */
os_status_t os_dtype_view(const void *addr, const os_dtype_t *t, size_t count, size_t bytes,
                          const char **view, char **tmp);
void os_dtype_unpack(void *buf, const os_dtype_t *t, size_t count, const char *src, size_t bytes);

#endif
