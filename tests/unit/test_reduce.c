/* Reduction ops on every representation, plain and atomic, and validity. */
#include "rma/os_reduce.h"
#include "unit.h"

#include <complex.h>
#include <pthread.h>
#include <string.h>

static void test_integers(void)
{
    int32_t t[4] = { 5, -3, 7, 0 }, o[4] = { 2, 4, -7, 9 };
    os_reduce(OS_OP_SUM, OS_B_INT32, 4, t, o, 4);
    CHECK(t[0] == 7 && t[1] == 1 && t[2] == 0 && t[3] == 9, "sum");
    os_reduce(OS_OP_MAX, OS_B_INT32, 4, t, o, 4);
    CHECK(t[0] == 7 && t[1] == 4 && t[2] == 0 && t[3] == 9, "max");
    os_reduce(OS_OP_MIN, OS_B_INT32, 4, t, o, 4);
    CHECK(t[0] == 2 && t[1] == 4 && t[2] == -7 && t[3] == 9, "min");
    uint8_t a[3] = { 0xf0, 0x0f, 0xff }, b[3] = { 0x3c, 0x3c, 0x00 };
    os_reduce(OS_OP_BXOR, OS_B_UINT8, 1, a, b, 3);
    CHECK(a[0] == 0xcc && a[1] == 0x33 && a[2] == 0xff, "bxor");
    int64_t l[2] = { 0, 3 }, m[2] = { 5, 0 };
    os_reduce(OS_OP_LAND, OS_B_INT64, 8, l, m, 2);
    CHECK(l[0] == 0 && l[1] == 0, "land");
    int64_t x[2] = { 0, 3 };
    os_reduce(OS_OP_LXOR, OS_B_INT64, 8, x, m, 2);
    CHECK(x[0] == 1 && x[1] == 1, "lxor");
    /* Signed overflow wraps (no undefined behaviour). */
    int32_t big = INT32_MAX, one = 1;
    os_reduce(OS_OP_SUM, OS_B_INT32, 4, &big, &one, 1);
    CHECK(big == INT32_MIN, "wrapping sum");
    int16_t p = 300, q = 300;
    os_reduce(OS_OP_PROD, OS_B_INT16, 2, &p, &q, 1);
    CHECK(p == (int16_t)(uint16_t)90000u, "wrapping prod");
}

static void test_floats_complex(void)
{
    double d[2] = { 1.5, -2 }, e[2] = { 2, 3 };
    os_reduce(OS_OP_PROD, OS_B_DOUBLE, 8, d, e, 2);
    CHECK(d[0] == 3 && d[1] == -6, "prod");
    double complex c = 1 + 2 * I, f = 3 - I;
    os_reduce(OS_OP_PROD, OS_B_C_DOUBLE_COMPLEX, sizeof c, &c, &f, 1);
    CHECK(creal(c) == 5 && cimag(c) == 5, "complex prod");
    long double ld = 1.25L, le = 2;
    os_reduce(OS_OP_SUM, OS_B_LONG_DOUBLE, sizeof ld, &ld, &le, 1);
    CHECK(ld == 3.25L, "long double sum");
}

static void test_pairs(void)
{
    struct { double v; int i; } t[3] = { { 1, 5 }, { 2, 5 }, { 3, 1 } }, o[3] = { { 1, 2 }, { 1, 0 }, { 4, 9 } };
    /* Stored element by element at their data size (12 bytes) in packed form. */
    char pt[36], po[36];
    for (int k = 0; k < 3; k++) {
        memcpy(pt + 12 * k, &t[k], 12);
        memcpy(po + 12 * k, &o[k], 12);
    }
    os_reduce(OS_OP_MAXLOC, OS_B_DOUBLE_INT, 12, pt, po, 3);
    for (int k = 0; k < 3; k++)
        memcpy(&t[k], pt + 12 * k, 12);
    CHECK(t[0].v == 1 && t[0].i == 2, "tie takes the smaller index");
    CHECK(t[1].v == 2 && t[1].i == 5, "larger value stays");
    CHECK(t[2].v == 4 && t[2].i == 9, "larger value wins");
    struct { int v, i; } a = { 3, 7 }, b = { 3, 2 };
    os_reduce(OS_OP_MINLOC, OS_B_2INT, 8, &a, &b, 1);
    CHECK(a.v == 3 && a.i == 2, "minloc tie");
    /* short-int: 8 bytes with padding; the padding stays untouched. */
    unsigned char si[8], so[8];
    memset(si, 0xAB, 8);
    memset(so, 0xCD, 8);
    short sv = 4, ov = 9;
    int sidx = 1, oidx = 2;
    memcpy(si, &sv, 2); memcpy(si + 4, &sidx, 4);
    memcpy(so, &ov, 2); memcpy(so + 4, &oidx, 4);
    os_reduce(OS_OP_MAXLOC, OS_B_SHORT_INT, 8, si, so, 1);
    memcpy(&sv, si, 2); memcpy(&sidx, si + 4, 4);
    CHECK(sv == 9 && sidx == 2, "short-int maxloc");
}

static void test_logical(void)
{
    uint8_t b[3] = { 0, 2, 1 }, c[3] = { 1, 1, 0 };
    os_reduce(OS_OP_LOR, OS_B_BOOL, 1, b, c, 3);
    CHECK(b[0] == 1 && b[1] == 1 && b[2] == 1, "bool lor normalizes to 1");
    int32_t f[2] = { 1, 0 }, g[2] = { 1, 1 };
    os_reduce(OS_OP_LXOR, OS_B_LOGICAL, 4, f, g, 2);
    CHECK(f[0] == 0 && f[1] == 1, "logical lxor");
}

static void test_replace_noop(void)
{
    double t[2] = { 1, 2 }, o[2] = { 3, 4 };
    os_reduce(OS_OP_NO_OP, OS_B_DOUBLE, 8, t, o, 2);
    CHECK(t[0] == 1 && t[1] == 2, "no_op leaves the target");
    os_reduce(OS_OP_REPLACE, OS_B_DOUBLE, 8, t, o, 2);
    CHECK(t[0] == 3 && t[1] == 4, "replace");
}

static void test_validity(void)
{
    CHECK(os_op_valid(OS_OP_SUM, OS_CLASS_COMPLEX), "sum on complex");
    CHECK(!os_op_valid(OS_OP_MAX, OS_CLASS_COMPLEX), "no max on complex");
    CHECK(!os_op_valid(OS_OP_BAND, OS_CLASS_FLOAT), "no band on float");
    /* Fortran integers the host takes the logical ops on are classed as C
     * integers (src/mpi/datatype.c asks the host); the class itself never. */
    CHECK(!os_op_valid(OS_OP_LAND, OS_CLASS_FINT), "no land on Fortran integer class");
    CHECK(os_op_valid(OS_OP_SUM, OS_CLASS_FINT), "sum on Fortran integer");
    os_op_host = (os_op_host_t){ .byte_arith = false, .byte_logical = false };
    CHECK(!os_op_valid(OS_OP_SUM, OS_CLASS_BYTE) && !os_op_valid(OS_OP_LOR, OS_CLASS_BYTE),
          "no sum or lor on byte, as MPICH");
    os_op_host = (os_op_host_t){ .byte_arith = true, .byte_logical = true };
    CHECK(os_op_valid(OS_OP_SUM, OS_CLASS_BYTE) && os_op_valid(OS_OP_LOR, OS_CLASS_BYTE),
          "sum and lor on byte, as Open MPI");
    os_op_host = (os_op_host_t){ 0 };
    CHECK(os_op_valid(OS_OP_LAND, OS_CLASS_LOGICAL), "land on logical");
    CHECK(!os_op_valid(OS_OP_SUM, OS_CLASS_LOGICAL), "no sum on logical");
    CHECK(os_op_valid(OS_OP_BOR, OS_CLASS_BYTE), "bor on byte");
    CHECK(!os_op_valid(OS_OP_MAXLOC, OS_CLASS_CINT), "maxloc needs pairs");
    CHECK(os_op_valid(OS_OP_MINLOC, OS_CLASS_PAIR), "minloc on pairs");
    CHECK(!os_op_valid(OS_OP_SUM, OS_CLASS_PAIR), "no sum on pairs");
    CHECK(os_op_valid(OS_OP_REPLACE, OS_CLASS_NONE) && os_op_valid(OS_OP_NO_OP, OS_CLASS_PAIR),
          "replace and no_op on anything");
}

/* Atomic forms: many threads hammer one element; totals must be exact. */
enum { THREADS = 4, ROUNDS = 20000 };
static int64_t counter;
static double fsum;
static uint8_t byte_or;
static int64_t maxv;
static int32_t counter32;
static uint64_t xor64;
static uint16_t and16 = 0xffff;

static void *hammer(void *arg)
{
    long id = (long)arg;
    int64_t one = 1;
    double half = 0.5;
    for (int i = 0; i < ROUNDS; i++) {
        os_reduce_atomic(OS_OP_SUM, OS_B_INT64, 8, &counter, &one, NULL, 1);
        os_reduce_atomic(OS_OP_SUM, OS_B_DOUBLE, 8, &fsum, &half, NULL, 1);
        int64_t v = id * ROUNDS + i;
        os_reduce_atomic(OS_OP_MAX, OS_B_INT64, 8, &maxv, &v, NULL, 1);
        /* The forms without a fetch (a bare locked instruction). */
        int32_t one32 = 1;
        os_reduce_atomic(OS_OP_SUM, OS_B_INT32, 4, &counter32, &one32, NULL, 1);
        uint64_t flip = 0x0101010101010101ull << id;
        os_reduce_atomic(OS_OP_BXOR, OS_B_UINT64, 8, &xor64, &flip, NULL, 1);
    }
    /* One more flip for odd ids: their bits end set, even ids' end clear. */
    uint64_t flip = 0x0101010101010101ull << id;
    if (id % 2)
        os_reduce_atomic(OS_OP_BXOR, OS_B_UINT64, 8, &xor64, &flip, NULL, 1);
    uint16_t clear = (uint16_t)~(1u << id);
    os_reduce_atomic(OS_OP_BAND, OS_B_UINT16, 2, &and16, &clear, NULL, 1);
    uint8_t bit = (uint8_t)(1u << id);
    os_reduce_atomic(OS_OP_BOR, OS_B_UINT8, 1, &byte_or, &bit, NULL, 1);
    return NULL;
}

static void test_atomic(void)
{
    pthread_t th[THREADS];
    for (long i = 0; i < THREADS; i++)
        pthread_create(&th[i], NULL, hammer, (void *)i);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    CHECK(counter == THREADS * ROUNDS, "atomic sum %lld", (long long)counter);
    CHECK(fsum == THREADS * ROUNDS * 0.5, "atomic float sum %f", fsum);
    CHECK(byte_or == 0x0f, "atomic bor %x", byte_or);
    CHECK(maxv == THREADS * ROUNDS - 1, "atomic max %lld", (long long)maxv);
    CHECK(counter32 == THREADS * ROUNDS, "atomic sum without fetch %d", counter32);
    CHECK(xor64 == 0x0a0a0a0a0a0a0a0aull, "atomic bxor without fetch %llx",
          (unsigned long long)xor64);
    CHECK(and16 == 0xfff0, "atomic band without fetch %x", and16);
    /* Fetch returns the previous values. */
    int32_t t[3] = { 1, 2, 3 }, o[3] = { 10, 20, 30 }, f[3];
    os_reduce_atomic(OS_OP_SUM, OS_B_INT32, 4, t, o, f, 3);
    CHECK(f[0] == 1 && f[1] == 2 && f[2] == 3 && t[2] == 33, "fetch");
    os_reduce_atomic(OS_OP_NO_OP, OS_B_INT32, 4, t, NULL, f, 1);
    CHECK(f[0] == 11 && t[0] == 11, "atomic no_op fetches");
    int64_t c = 7, cmp = 7, sw = 9, old;
    os_cas_atomic(8, &c, &cmp, &sw, &old);
    CHECK(c == 9 && old == 7, "cas hit");
    os_cas_atomic(8, &c, &cmp, &sw, &old);
    CHECK(c == 9 && old == 9, "cas miss");
    CHECK(os_reduce_atomic_ok(8, &c) && !os_reduce_atomic_ok(8, (char *)&c + 4) &&
          !os_reduce_atomic_ok(16, &c), "atomic eligibility");
}

/* os_reduce_runs against the element-by-element reference (os_reduce in run
 * order, fetch before each update): scattered single elements (more runs
 * than it prefetches ahead, one element hit twice), runs of several
 * elements, the integer ops it loops over itself and ones it hands on, with
 * and without atomics and fetch, plain ones also misaligned by a byte;
 * elements outside the runs untouched. */
enum { RUN_TABLE = 512, RUN_COUNT = 100 };

static void check_runs(os_op_t op, os_basic_t basic, size_t esize, size_t per_run, bool atomic,
                       bool fetch, size_t skew)
{
    _Alignas(16) unsigned char table[RUN_TABLE * 8], ref[RUN_TABLE * 8];
    unsigned char origin[RUN_COUNT * 3 * 8], got[RUN_COUNT * 3 * 8], want[RUN_COUNT * 3 * 8];
    os_block_t runs[RUN_COUNT];
    const size_t slots = (sizeof table - skew) / esize / per_run;
    uint64_t x = 88172645463325252ull + (uint64_t)op * 131 + esize;
    for (size_t i = 0; i < sizeof table; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        table[i] = ref[i] = (unsigned char)(x >> 24);
    }
    if (basic == OS_B_DOUBLE) /* small whole numbers: sums stay exact in any order */
        for (size_t i = 0; i < RUN_TABLE; i++) {
            double d = (double)(i % 17);
            memcpy(table + 8 * i, &d, 8);
            memcpy(ref + 8 * i, &d, 8);
        }
    for (size_t i = 0; i < RUN_COUNT; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        size_t slot = i == RUN_COUNT - 1 ? (size_t)runs[3].disp / (esize * per_run) : x % slots;
        runs[i] = (os_block_t){ (ptrdiff_t)(slot * esize * per_run), esize * per_run };
    }
    const size_t bytes = RUN_COUNT * esize * per_run;
    for (size_t i = 0; i < bytes; i++)
        origin[i] = (unsigned char)(i * 37 + 11);
    if (basic == OS_B_DOUBLE)
        for (size_t i = 0; i < bytes / 8; i++) {
            double d = (double)(i % 5);
            memcpy(origin + 8 * i, &d, 8);
        }
    size_t pos = 0;
    for (size_t i = 0; i < RUN_COUNT; i++)
        for (size_t j = 0; j < per_run; j++, pos += esize) {
            unsigned char *t = ref + skew + runs[i].disp + j * esize;
            memcpy(want + pos, t, esize);
            if (op != OS_OP_NO_OP)
                os_reduce(op, basic, esize, t, origin + pos, 1);
        }
    memset(got, 0, sizeof got);
    os_reduce_runs(op, basic, esize, (char *)table + skew, runs, RUN_COUNT,
                   op == OS_OP_NO_OP ? NULL : (const char *)origin, fetch ? (char *)got : NULL,
                   atomic);
    CHECK(!memcmp(table, ref, sizeof table), "runs: %s on %s x%zu (%s%s%s): table",
          os_op_name(op), os_basic_name(basic), per_run, atomic ? "atomic" : "plain",
          fetch ? ", fetch" : "", skew ? ", misaligned" : "");
    if (fetch)
        CHECK(!memcmp(got, want, bytes), "runs: %s on %s x%zu (%s): fetched", os_op_name(op),
              os_basic_name(basic), per_run, atomic ? "atomic" : "plain");
}

typedef struct {
    uint64_t *table;
    const os_block_t *runs;
} runs_arg_t;

static void *runs_thread(void *p)
{
    const runs_arg_t *a = p;
    uint64_t ones[RUN_COUNT];
    for (size_t i = 0; i < RUN_COUNT; i++)
        ones[i] = 1;
    for (int r = 0; r < 2000; r++)
        os_reduce_runs(OS_OP_SUM, OS_B_UINT64, 8, (char *)a->table, a->runs, RUN_COUNT,
                       (const char *)ones, NULL, true);
    return NULL;
}

static void test_runs(void)
{
    static const os_op_t ops[] = { OS_OP_SUM, OS_OP_BAND, OS_OP_BOR, OS_OP_BXOR, OS_OP_MAX,
                                   OS_OP_REPLACE, OS_OP_NO_OP };
    static const struct { os_basic_t b; size_t e; } types[] = {
        { OS_B_INT64, 8 }, { OS_B_UINT64, 8 }, { OS_B_INT32, 4 }, { OS_B_UINT16, 2 },
        { OS_B_DOUBLE, 8 },
    };
    for (size_t o = 0; o < sizeof ops / sizeof *ops; o++)
        for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
            if (types[t].b == OS_B_DOUBLE && ops[o] != OS_OP_SUM && ops[o] != OS_OP_MAX &&
                ops[o] != OS_OP_REPLACE && ops[o] != OS_OP_NO_OP)
                continue;
            for (size_t per_run = 1; per_run <= 3; per_run += 2)
                for (int atomic = 0; atomic < 2; atomic++)
                    for (int fetch = 0; fetch < 2; fetch++)
                        if (ops[o] != OS_OP_NO_OP || fetch) {
                            check_runs(ops[o], types[t].b, types[t].e, per_run, atomic, fetch, 0);
                            /* Plain updates need no alignment (the mutex's path). */
                            if (!atomic)
                                check_runs(ops[o], types[t].b, types[t].e, per_run, false,
                                           fetch, 1);
                        }
        }
    /* Atomic: four threads adding 1 to the same scattered words lose nothing
     * (the run list hits word 3's slot twice). */
    enum { THREADS = 4 };
    static uint64_t table[RUN_TABLE];
    os_block_t runs[RUN_COUNT];
    for (size_t i = 0; i < RUN_COUNT; i++)
        runs[i] = (os_block_t){ (ptrdiff_t)(8 * ((i * 151) % RUN_TABLE)), 8 };
    runs[RUN_COUNT - 1] = runs[3];
    runs_arg_t a = { table, runs };
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++)
        pthread_create(&th[i], NULL, runs_thread, &a);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    CHECK(table[runs[0].disp / 8] == THREADS * 2000 && table[runs[3].disp / 8] == 2 * THREADS * 2000,
          "atomic runs from %d threads: %llu, %llu", THREADS,
          (unsigned long long)table[runs[0].disp / 8], (unsigned long long)table[runs[3].disp / 8]);
}

int main(void)
{
    test_integers();
    test_floats_complex();
    test_pairs();
    test_logical();
    test_replace_noop();
    test_validity();
    test_atomic();
    test_runs();
    return UNIT_REPORT();
}
