#include "os_reduce.h"

#include <complex.h>
#include <string.h>

/* Element types with alignment 1: window memory and origin buffers may hold
 * elements at any address (displacement unit 1), and UBSan rightly rejects
 * misaligned loads through ordinary pointers. */
#define U(T) T __attribute__((aligned(1), may_alias))
typedef U(int8_t) u_int8;
typedef U(int16_t) u_int16;
typedef U(int32_t) u_int32;
typedef U(int64_t) u_int64;
typedef U(uint8_t) u_uint8;
typedef U(uint16_t) u_uint16;
typedef U(uint32_t) u_uint32;
typedef U(uint64_t) u_uint64;
typedef U(float) u_float;
typedef U(double) u_double;
typedef U(long double) u_ldouble;
typedef U(float _Complex) u_cfloat;
typedef U(double _Complex) u_cdouble;
typedef U(long double _Complex) u_cldouble;

/* MINLOC/MAXLOC pairs, laid out as MPI defines them. */
typedef struct { float v; int i; } p_float_int;
typedef struct { double v; int i; } p_double_int;
typedef struct { long v; int i; } p_long_int;
typedef struct { int v; int i; } p_2int;
typedef struct { short v; int i; } p_short_int;
typedef struct { long double v; int i; } p_ldouble_int;
typedef struct { float v; float i; } p_2float;
typedef struct { double v; double i; } p_2double;


/* The loops also in AVX2, picked at load time where the CPU has it (as
 * Open MPI 5's op/avx component does): twice SSE2's width, for the plain
 * reductions of bulk accumulates, where a 4 KB sum of longs took 10% more
 * than Open MPI's.
 *
 * Not under ThreadSanitizer: a clone's resolver runs while the dynamic
 * linker relocates, before the TSan runtime is up, and its instrumented
 * code then faults (unit_test_reduce crashed in CI). */
#if defined(__x86_64__) && defined(__has_attribute) && !defined(__SANITIZE_THREAD__)
#if __has_attribute(target_clones)
#define LOOP_CLONES __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef LOOP_CLONES
#define LOOP_CLONES
#endif

#define LOOP(NAME, UT, EXPR)                                                                  \
    LOOP_CLONES static void NAME(void *tv, const void *ov, size_t n)                          \
    {                                                                                          \
        UT *t = tv;                                                                            \
        const UT *o = ov;                                                                      \
        for (size_t i = 0; i < n; i++) {                                                      \
            UT a = t[i], b = o[i];                                                             \
            t[i] = (EXPR);                                                                     \
        }                                                                                      \
    }

/* Integers: every op but the pair ops. Comparisons, logical and bitwise ops
 * are the same for signed and unsigned types; SUM and PROD differ below. */
#define INT_COMMON_OPS(S, UT)                                                                  \
    LOOP(min_##S, UT, b < a ? b : a)                                                           \
    LOOP(max_##S, UT, b > a ? b : a)                                                           \
    LOOP(land_##S, UT, (a && b))                                                               \
    LOOP(lor_##S, UT, (a || b))                                                                \
    LOOP(lxor_##S, UT, (!a != !b))                                                             \
    LOOP(band_##S, UT, a & b)                                                                  \
    LOOP(bor_##S, UT, a | b)                                                                   \
    LOOP(bxor_##S, UT, a ^ b)
#define INT_OPS(S, UT)                                                                         \
    LOOP(sum_##S, UT, a + b)                                                                   \
    LOOP(prod_##S, UT, a * b)                                                                  \
    INT_COMMON_OPS(S, UT)
/* Signed integer overflow must wrap as MPICH's reductions do, without
 * undefined behaviour: SUM and PROD compute in the unsigned type UU. */
#define SINT_OPS(S, UT, UU)                                                                    \
    LOOP(sum_##S, UT, (UT)((UU)a + (UU)b))                                                     \
    LOOP(prod_##S, UT, (UT)((UU)a * (UU)b))                                                    \
    INT_COMMON_OPS(S, UT)

SINT_OPS(i8, u_int8, uint8_t)
SINT_OPS(i16, u_int16, uint16_t)
SINT_OPS(i32, u_int32, uint32_t)
SINT_OPS(i64, u_int64, uint64_t)
INT_OPS(u8, u_uint8)
INT_OPS(u16, u_uint16)
INT_OPS(u32, u_uint32)
INT_OPS(u64, u_uint64)

#define FLOAT_OPS(S, UT)                                                                       \
    LOOP(sum_##S, UT, a + b)                                                                   \
    LOOP(prod_##S, UT, a * b)                                                                  \
    LOOP(min_##S, UT, b < a ? b : a)                                                           \
    LOOP(max_##S, UT, b > a ? b : a)
FLOAT_OPS(f, u_float)
FLOAT_OPS(d, u_double)
FLOAT_OPS(ld, u_ldouble)

#define COMPLEX_OPS(S, UT)                                                                     \
    LOOP(sum_##S, UT, a + b)                                                                   \
    LOOP(prod_##S, UT, a * b)
COMPLEX_OPS(cf, u_cfloat)
COMPLEX_OPS(cd, u_cdouble)
COMPLEX_OPS(cld, u_cldouble)

/* C bool: one byte, any non-zero value is true; results are 0 or 1. */
LOOP(land_b, u_uint8, (uint8_t)(a && b))
LOOP(lor_b, u_uint8, (uint8_t)(a || b))
LOOP(lxor_b, u_uint8, (uint8_t)(!a != !b))
/* Fortran LOGICAL: an int; gfortran's .TRUE. is 1. */
LOOP(land_l, u_int32, (a && b))
LOOP(lor_l, u_int32, (a || b))
LOOP(lxor_l, u_int32, (!a != !b))

/* MAXLOC/MINLOC: the larger (smaller) value wins; on a tie the smaller index. */
#define PAIR_OPS(S, PT)                                                                        \
    static void maxloc_##S(void *tv, const void *ov, size_t n)                                \
    {                                                                                          \
        for (size_t i = 0; i < n; i++) {                                                      \
            PT a, b;                                                                           \
            memcpy(&a, (char *)tv + i * sizeof(PT), sizeof a);                                 \
            memcpy(&b, (const char *)ov + i * sizeof(PT), sizeof b);                           \
            if (b.v > a.v || (b.v == a.v && b.i < a.i)) {                                      \
                a.v = b.v;                                                                     \
                a.i = b.i;                                                                     \
            }                                                                                  \
            memcpy((char *)tv + i * sizeof(PT), &a, sizeof a);                                 \
        }                                                                                      \
    }                                                                                          \
    static void minloc_##S(void *tv, const void *ov, size_t n)                                \
    {                                                                                          \
        for (size_t i = 0; i < n; i++) {                                                      \
            PT a, b;                                                                           \
            memcpy(&a, (char *)tv + i * sizeof(PT), sizeof a);                                 \
            memcpy(&b, (const char *)ov + i * sizeof(PT), sizeof b);                           \
            if (b.v < a.v || (b.v == a.v && b.i < a.i)) {                                      \
                a.v = b.v;                                                                     \
                a.i = b.i;                                                                     \
            }                                                                                  \
            memcpy((char *)tv + i * sizeof(PT), &a, sizeof a);                                 \
        }                                                                                      \
    }
PAIR_OPS(fi, p_float_int)
PAIR_OPS(di, p_double_int)
PAIR_OPS(li, p_long_int)
PAIR_OPS(ii, p_2int)
PAIR_OPS(si, p_short_int)
PAIR_OPS(ldi, p_ldouble_int)
PAIR_OPS(ff, p_2float)
PAIR_OPS(dd, p_2double)

/* Pair elements are copied by their full C size (padding included) in the
 * loops above, so their element stride is sizeof(struct). */
#define INT_ROW(S)                                                                             \
    { [OS_OP_SUM] = sum_##S, [OS_OP_PROD] = prod_##S, [OS_OP_MIN] = min_##S,                  \
      [OS_OP_MAX] = max_##S, [OS_OP_LAND] = land_##S, [OS_OP_LOR] = lor_##S,                  \
      [OS_OP_LXOR] = lxor_##S, [OS_OP_BAND] = band_##S, [OS_OP_BOR] = bor_##S,                \
      [OS_OP_BXOR] = bxor_##S }
#define FLOAT_ROW(S)                                                                           \
    { [OS_OP_SUM] = sum_##S, [OS_OP_PROD] = prod_##S, [OS_OP_MIN] = min_##S,                  \
      [OS_OP_MAX] = max_##S }
#define COMPLEX_ROW(S) { [OS_OP_SUM] = sum_##S, [OS_OP_PROD] = prod_##S }
#define PAIR_ROW(S) { [OS_OP_MAXLOC] = maxloc_##S, [OS_OP_MINLOC] = minloc_##S }

static const os_reduce_fn table[OS_B_COUNT][OS_OP_COUNT] = {
    [OS_B_INT8] = INT_ROW(i8),
    [OS_B_INT16] = INT_ROW(i16),
    [OS_B_INT32] = INT_ROW(i32),
    [OS_B_INT64] = INT_ROW(i64),
    [OS_B_UINT8] = INT_ROW(u8),
    [OS_B_UINT16] = INT_ROW(u16),
    [OS_B_UINT32] = INT_ROW(u32),
    [OS_B_UINT64] = INT_ROW(u64),
    [OS_B_FLOAT] = FLOAT_ROW(f),
    [OS_B_DOUBLE] = FLOAT_ROW(d),
    [OS_B_LONG_DOUBLE] = FLOAT_ROW(ld),
    [OS_B_C_FLOAT_COMPLEX] = COMPLEX_ROW(cf),
    [OS_B_C_DOUBLE_COMPLEX] = COMPLEX_ROW(cd),
    [OS_B_C_LONG_DOUBLE_COMPLEX] = COMPLEX_ROW(cld),
    [OS_B_BOOL] = { [OS_OP_LAND] = land_b, [OS_OP_LOR] = lor_b, [OS_OP_LXOR] = lxor_b },
    [OS_B_LOGICAL] = { [OS_OP_LAND] = land_l, [OS_OP_LOR] = lor_l, [OS_OP_LXOR] = lxor_l },
    [OS_B_FLOAT_INT] = PAIR_ROW(fi),
    [OS_B_DOUBLE_INT] = PAIR_ROW(di),
    [OS_B_LONG_INT] = PAIR_ROW(li),
    [OS_B_2INT] = PAIR_ROW(ii),
    [OS_B_SHORT_INT] = PAIR_ROW(si),
    [OS_B_LONG_DOUBLE_INT] = PAIR_ROW(ldi),
    [OS_B_2FLOAT] = PAIR_ROW(ff),
    [OS_B_2DOUBLE] = PAIR_ROW(dd),
};

/* Size of one element as the loops step through memory. */
static size_t elem_stride(os_basic_t b)
{
    switch (b) {
    case OS_B_INT8: case OS_B_UINT8: case OS_B_BOOL: return 1;
    case OS_B_INT16: case OS_B_UINT16: return 2;
    case OS_B_INT32: case OS_B_UINT32: case OS_B_FLOAT: case OS_B_LOGICAL: return 4;
    case OS_B_INT64: case OS_B_UINT64: case OS_B_DOUBLE: return 8;
    case OS_B_LONG_DOUBLE: return sizeof(long double);
    case OS_B_C_FLOAT_COMPLEX: return sizeof(float _Complex);
    case OS_B_C_DOUBLE_COMPLEX: return sizeof(double _Complex);
    case OS_B_C_LONG_DOUBLE_COMPLEX: return sizeof(long double _Complex);
    case OS_B_FLOAT_INT: return sizeof(p_float_int);
    case OS_B_DOUBLE_INT: return sizeof(p_double_int);
    case OS_B_LONG_INT: return sizeof(p_long_int);
    case OS_B_2INT: return sizeof(p_2int);
    case OS_B_SHORT_INT: return sizeof(p_short_int);
    case OS_B_LONG_DOUBLE_INT: return sizeof(p_ldouble_int);
    case OS_B_2FLOAT: return sizeof(p_2float);
    case OS_B_2DOUBLE: return sizeof(p_2double);
    default: return 1;
    }
}

const char *os_op_name(os_op_t op)
{
    static const char *const names[OS_OP_COUNT] = {
        "MPI_SUM", "MPI_PROD", "MPI_MIN", "MPI_MAX", "MPI_LAND", "MPI_LOR", "MPI_LXOR",
        "MPI_BAND", "MPI_BOR", "MPI_BXOR", "MPI_MAXLOC", "MPI_MINLOC", "MPI_REPLACE", "MPI_NO_OP",
    };
    return (unsigned)op < OS_OP_COUNT ? names[op] : "unknown op";
}

const char *os_basic_name(os_basic_t b)
{
    static const char *const names[OS_B_COUNT] = {
        "none", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
        "float", "double", "long double", "float complex", "double complex",
        "long double complex", "bool", "logical", "float-int", "double-int", "long-int",
        "int-int", "short-int", "long-double-int", "float-float", "double-double", "opaque",
        "mixed",
    };
    return (unsigned)b < OS_B_COUNT ? names[b] : "unknown";
}

os_op_host_t os_op_host;

os_reduce_fn os_reduce_loop(os_op_t op, os_basic_t basic, size_t esize)
{
    if ((unsigned)op >= OS_OP_COUNT || (unsigned)basic >= OS_B_COUNT ||
        esize != elem_stride(basic))
        return NULL;
    return table[basic][op];
}

void os_reduce(os_op_t op, os_basic_t basic, size_t esize, void *target, const void *origin,
               size_t n)
{
    if (op == OS_OP_NO_OP)
        return;
    if (op == OS_OP_REPLACE) {
        memmove(target, origin, n * esize);
        return;
    }
    os_reduce_fn f = table[basic][op];
    if (esize == elem_stride(basic)) {
        f(target, origin, n);
        return;
    }
    /* Pair types whose data is shorter than their C struct (double-int: 12
     * of 16 bytes): run each element through a full-size private copy so that
     * no byte beyond the element's data is read or written. */
    char *t = target;
    const char *o = origin;
    for (size_t i = 0; i < n; i++, t += esize, o += esize) {
        _Alignas(16) char a[64] = { 0 }, b[64] = { 0 };
        memcpy(a, t, esize);
        memcpy(b, o, esize);
        f(a, b, 1);
        memcpy(t, a, esize);
    }
}

/* One element, one atomic read-modify-write. Integer ops that the CPU has as
 * a single instruction use it; everything else is a compare-and-swap loop
 * around the plain reduction applied to a private copy.
 *
 * Without a fetch the old value is not computed at all: x86 has no
 * fetch-and-xor (or -and, -or) instruction, so a fetching form compiles to a
 * load and a compare-and-swap loop, while the bare `lock xor` does one locked
 * access. On scattered elements (RandomAccess) that is 35 against 23 ns per
 * element, and 15 ns when the caller prefetches ahead (measured on this
 * machine's CPU, 256 MB table, one thread). */
#define ATOMIC_ELEM(W, UT)                                                                     \
    static void atomic_##W(os_op_t op, os_basic_t basic, void *tv, const void *ov, void *fv) \
    {                                                                                          \
        UT *t = tv, o = 0, old;                                                                \
        if (op != OS_OP_NO_OP) /* NO_OP ignores the origin, which may be NULL */               \
            memcpy(&o, ov, sizeof o);                                                          \
        bool is_int = basic >= OS_B_INT8 && basic <= OS_B_UINT64;                              \
        if (!fv && is_int) {                                                                   \
            switch (op) {                                                                      \
            case OS_OP_SUM: (void)__atomic_add_fetch(t, o, __ATOMIC_ACQ_REL); return;         \
            case OS_OP_BAND: (void)__atomic_and_fetch(t, o, __ATOMIC_ACQ_REL); return;        \
            case OS_OP_BOR: (void)__atomic_or_fetch(t, o, __ATOMIC_ACQ_REL); return;          \
            case OS_OP_BXOR: (void)__atomic_xor_fetch(t, o, __ATOMIC_ACQ_REL); return;        \
            default: break;                                                                    \
            }                                                                                  \
        }                                                                                      \
        if (op == OS_OP_REPLACE) {                                                             \
            old = __atomic_exchange_n(t, o, __ATOMIC_ACQ_REL);                                 \
        } else if (op == OS_OP_NO_OP) {                                                        \
            old = __atomic_load_n(t, __ATOMIC_ACQUIRE);                                        \
        } else if (is_int && op == OS_OP_SUM) {                                                \
            old = __atomic_fetch_add(t, o, __ATOMIC_ACQ_REL);                                  \
        } else if (is_int && op == OS_OP_BAND) {                                               \
            old = __atomic_fetch_and(t, o, __ATOMIC_ACQ_REL);                                  \
        } else if (is_int && op == OS_OP_BOR) {                                                \
            old = __atomic_fetch_or(t, o, __ATOMIC_ACQ_REL);                                   \
        } else if (is_int && op == OS_OP_BXOR) {                                               \
            old = __atomic_fetch_xor(t, o, __ATOMIC_ACQ_REL);                                  \
        } else {                                                                               \
            os_reduce_fn f = table[basic][op];                                                 \
            old = __atomic_load_n(t, __ATOMIC_RELAXED);                                        \
            UT nv;                                                                             \
            do {                                                                               \
                nv = old;                                                                      \
                f(&nv, &o, 1);                                                                 \
            } while (!__atomic_compare_exchange_n(t, &old, nv, true, __ATOMIC_ACQ_REL,         \
                                                  __ATOMIC_RELAXED));                          \
        }                                                                                      \
        if (fv)                                                                                \
            memcpy(fv, &old, sizeof old);                                                      \
    }
ATOMIC_ELEM(1, uint8_t)
ATOMIC_ELEM(2, uint16_t)
ATOMIC_ELEM(4, uint32_t)
ATOMIC_ELEM(8, uint64_t)

void os_reduce_atomic(os_op_t op, os_basic_t basic, size_t elem_size, void *target,
                      const void *origin, void *fetch, size_t n)
{
    char *t = target, *f = fetch;
    const char *o = origin;
    for (size_t i = 0; i < n; i++, t += elem_size) {
        switch (elem_size) {
        case 1: atomic_1(op, basic, t, o, f); break;
        case 2: atomic_2(op, basic, t, o, f); break;
        case 4: atomic_4(op, basic, t, o, f); break;
        default: atomic_8(op, basic, t, o, f); break;
        }
        if (f)
            f += elem_size;
        if (o)
            o += elem_size;
    }
}

/* ------------------------------------------------------------ scattered runs */

/* How many runs ahead the target's memory is prefetched. Scattered elements
 * (RandomAccess's aggregated updates in an 8 MB table) miss in cache:
 * without a prefetch the loop ran at 54 ns per element, 8 runs ahead at 22,
 * 16 ahead at 16 (this machine's CPU, a lone process). */
enum { RUNS_AHEAD = 16 };

/* The integer ops the CPU has as one instruction, on W-byte elements, with
 * no fetch: one loop over every run, the op chosen once. The sum is taken in
 * unsigned arithmetic (the same bits as the signed one, without overflow).
 * Plain updates go through memcpy: the caller's runs need no alignment
 * there (the accumulate mutex's path); atomic ones are aligned. */
#define RUNS_INT_LOOP(UT, ATOMIC_FETCH, PLAIN_OP)                                              \
    for (size_t i = 0; i < nruns; i++) {                                                       \
        if (i + RUNS_AHEAD < nruns)                                                            \
            __builtin_prefetch(base + runs[i + RUNS_AHEAD].disp, 1, 3);                        \
        char *t = base + runs[i].disp;                                                         \
        const size_t n = runs[i].len / sizeof(UT);                                             \
        for (size_t j = 0; j < n; j++, t += sizeof(UT), o += sizeof(UT)) {                     \
            UT v, x;                                                                           \
            memcpy(&v, o, sizeof v);                                                           \
            if (atomic) {                                                                      \
                (void)ATOMIC_FETCH((UT *)(void *)t, v, __ATOMIC_ACQ_REL);                      \
            } else {                                                                           \
                memcpy(&x, t, sizeof x);                                                       \
                x PLAIN_OP v;                                                                  \
                memcpy(t, &x, sizeof x);                                                       \
            }                                                                                  \
        }                                                                                      \
    }

#define RUNS_INT_OPS(UT)                                                                       \
    switch (op) {                                                                              \
    case OS_OP_SUM: RUNS_INT_LOOP(UT, __atomic_add_fetch, +=) return true;                     \
    case OS_OP_BAND: RUNS_INT_LOOP(UT, __atomic_and_fetch, &=) return true;                    \
    case OS_OP_BOR: RUNS_INT_LOOP(UT, __atomic_or_fetch, |=) return true;                      \
    case OS_OP_BXOR: RUNS_INT_LOOP(UT, __atomic_xor_fetch, ^=) return true;                    \
    default: return false;                                                                     \
    }

static bool runs_int(os_op_t op, size_t esize, char *base, const os_block_t *runs, size_t nruns,
                     const char *o, bool atomic)
{
    switch (esize) {
    case 4: RUNS_INT_OPS(uint32_t)
    case 8: RUNS_INT_OPS(uint64_t)
    default: return false;
    }
}

bool os_reduce_atomic_ok_type(const os_dtype_t *t, const char *addr)
{
    const size_t e = t->basic_size;
    if (!os_reduce_atomic_ok(e, addr))
        return false;
    for (size_t i = 0; i < t->nblocks; i++)
        if ((t->blocks[i].disp | (ptrdiff_t)t->blocks[i].len) & (ptrdiff_t)(e - 1))
            return false;
    return !(t->extent & (ptrdiff_t)(e - 1));
}

void os_reduce_runs(os_op_t op, os_basic_t basic, size_t esize, char *base,
                    const os_block_t *runs, size_t nruns, const char *origin, char *fetch,
                    bool atomic)
{
    if (op == OS_OP_NO_OP && !fetch)
        return;
    if (!fetch && origin && basic >= OS_B_INT8 && basic <= OS_B_UINT64 &&
        runs_int(op, esize, base, runs, nruns, origin, atomic))
        return;
    size_t pos = 0;
    for (size_t i = 0; i < nruns; pos += runs[i].len, i++) {
        if (i + RUNS_AHEAD < nruns)
            __builtin_prefetch(base + runs[i + RUNS_AHEAD].disp, 1, 3);
        char *t = base + runs[i].disp;
        const size_t n = runs[i].len / esize;
        const char *o = origin ? origin + pos : NULL;
        char *f = fetch ? fetch + pos : NULL;
        if (atomic) {
            os_reduce_atomic(op, basic, esize, t, o, f, n);
        } else {
            if (f)
                os_copy(f, t, runs[i].len);
            if (o && op != OS_OP_NO_OP)
                os_reduce(op, basic, esize, t, o, n);
        }
    }
}

#define CAS_ELEM(W, UT)                                                                        \
    case W: {                                                                                  \
        UT c, s;                                                                               \
        memcpy(&c, compare, W);                                                                \
        memcpy(&s, swap, W);                                                                   \
        __atomic_compare_exchange_n((UT *)target, &c, s, false, __ATOMIC_ACQ_REL,              \
                                    __ATOMIC_ACQUIRE);                                         \
        memcpy(fetch, &c, W); /* c now holds the value found */                               \
        break;                                                                                 \
    }

void os_cas_atomic(size_t elem_size, void *target, const void *compare, const void *swap,
                   void *fetch)
{
    switch (elem_size) {
        CAS_ELEM(1, uint8_t)
        CAS_ELEM(2, uint16_t)
        CAS_ELEM(4, uint32_t)
        CAS_ELEM(8, uint64_t)
    default:
        break;
    }
}
