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
    CHECK(os_op_valid(OS_OP_LAND, OS_CLASS_FINT), "land on Fortran integer, as MPICH");
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

int main(void)
{
    test_integers();
    test_floats_complex();
    test_pairs();
    test_logical();
    test_replace_noop();
    test_validity();
    test_atomic();
    return UNIT_REPORT();
}
