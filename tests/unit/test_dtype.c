/* Flattening of every combiner, cursors, spans: no MPI involved. */
#include "rma/os_dtype.h"
#include "unit.h"

#include <stdlib.h>
#include <string.h>

static os_dtype_t *dbl, *i32;

static int blocks_are(const os_dtype_t *t, size_t n, const os_block_t *want)
{
    if (t->nblocks != n)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (t->blocks[i].disp != want[i].disp || t->blocks[i].len != want[i].len)
            return 0;
    return 1;
}

static void test_contiguous(void)
{
    os_dtype_t *t;
    CHECK(os_dtype_new_contiguous(5, dbl, &t) == OS_OK, "contiguous");
    os_block_t want[] = { { 0, 40 } };
    CHECK(blocks_are(t, 1, want), "5 doubles merge into one block");
    CHECK(t->size == 40 && t->extent == 40 && t->contig, "size %zu extent %td", t->size, t->extent);
    CHECK(t->basic == OS_B_DOUBLE && t->basic_size == 8, "basic %d", t->basic);
    os_dtype_release(t);
}

static void test_vector(void)
{
    os_dtype_t *t;
    /* MPI_Type_vector(3, 2, 4, MPI_INT): blocks of 8 bytes every 16. */
    CHECK(os_dtype_new_hvector(3, 2, 16, i32, &t) == OS_OK, "vector");
    os_block_t want[] = { { 0, 8 }, { 16, 8 }, { 32, 8 } };
    CHECK(blocks_are(t, 3, want), "vector blocks");
    CHECK(t->size == 24 && t->lb == 0 && t->extent == 40 && !t->contig, "extent %td", t->extent);
    CHECK(t->true_lb == 0 && t->true_extent == 40, "true extent %td", t->true_extent);
    /* A vector whose blocks touch collapses to one run. */
    os_dtype_t *c;
    CHECK(os_dtype_new_hvector(4, 1, 4, i32, &c) == OS_OK && c->nblocks == 1 && c->contig,
          "touching vector merges");
    os_dtype_release(c);
    os_dtype_release(t);
}

static void test_negative_stride(void)
{
    os_dtype_t *t;
    CHECK(os_dtype_new_hvector(3, 1, -8, dbl, &t) == OS_OK, "negative stride");
    os_block_t want[] = { { 0, 8 }, { -8, 8 }, { -16, 8 } };
    CHECK(blocks_are(t, 3, want), "blocks in type-map order, not address order");
    CHECK(t->lb == -16 && t->extent == 24, "lb %td extent %td", t->lb, t->extent);
    CHECK(t->true_lb == -16 && t->true_extent == 24, "true lb %td", t->true_lb);
    os_dtype_release(t);
}

static void test_indexed_and_struct(void)
{
    os_dtype_t *t, *s;
    size_t lens[] = { 1, 3, 2 };
    ptrdiff_t displs[] = { 40, 0, 16 };
    CHECK(os_dtype_new_hindexed(3, lens, displs, i32, &t) == OS_OK, "hindexed");
    os_block_t want[] = { { 40, 4 }, { 0, 12 }, { 16, 8 } };
    CHECK(blocks_are(t, 3, want), "hindexed keeps order");
    CHECK(t->size == 24 && t->lb == 0 && t->extent == 44, "extent %td", t->extent);

    /* struct { int a; double b; } with the same element type check. */
    size_t slens[] = { 1, 1 };
    ptrdiff_t sdispl[] = { 0, 8 };
    os_dtype_t *kids[] = { i32, dbl };
    CHECK(os_dtype_new_struct(2, slens, sdispl, kids, &s) == OS_OK, "struct");
    CHECK(s->basic == OS_B_MIXED, "int+double struct is mixed");
    CHECK(s->size == 12 && s->extent == 16, "struct size %zu extent %td", s->size, s->extent);
    os_dtype_t *kids2[] = { i32, i32 };
    os_dtype_t *u;
    CHECK(os_dtype_new_struct(2, slens, sdispl, kids2, &u) == OS_OK && u->basic == OS_B_INT32,
          "int+int struct is uniform");
    os_dtype_release(u);
    os_dtype_release(s);
    os_dtype_release(t);
}

static void test_nested_and_resized(void)
{
    os_dtype_t *v, *r, *outer;
    CHECK(os_dtype_new_hvector(2, 1, 16, dbl, &v) == OS_OK, "inner vector");
    /* Resize to 8 bytes: copies interleave. */
    CHECK(os_dtype_new_resized(v, 0, 8, &r) == OS_OK, "resized");
    CHECK(r->extent == 8 && r->size == 16, "resized extent %td", r->extent);
    CHECK(os_dtype_new_contiguous(2, r, &outer) == OS_OK, "contiguous of resized");
    /* blocks: 0,16 then 8,24 -> 0..8 and 8..16 merge: (0,8)+(16,8)+(8,8)+(24,8) in map order */
    os_block_t want[] = { { 0, 8 }, { 16, 8 }, { 8, 8 }, { 24, 8 } };
    CHECK(blocks_are(outer, 4, want), "nested blocks in type-map order (n=%zu)", outer->nblocks);
    os_dtype_release(outer);
    os_dtype_release(r);
    os_dtype_release(v);
}

static void test_subarray(void)
{
    /* 4x5 array of ints, C order, 2x3 subarray starting at (1,2). */
    int sizes[] = { 4, 5 }, sub[] = { 2, 3 }, start[] = { 1, 2 };
    os_dtype_t *t;
    CHECK(os_dtype_new_subarray(2, sizes, sub, start, 0, i32, &t) == OS_OK, "subarray");
    os_block_t want[] = { { (1 * 5 + 2) * 4, 12 }, { (2 * 5 + 2) * 4, 12 } };
    CHECK(blocks_are(t, 2, want), "C-order subarray rows");
    CHECK(t->lb == 0 && t->extent == 80 && t->size == 24, "subarray extent %td", t->extent);
    os_dtype_release(t);
    /* Fortran order: first index fastest. */
    CHECK(os_dtype_new_subarray(2, sizes, sub, start, 1, i32, &t) == OS_OK, "subarray F");
    os_block_t wantf[] = { { (2 * 4 + 1) * 4, 8 }, { (3 * 4 + 1) * 4, 8 }, { (4 * 4 + 1) * 4, 8 } };
    CHECK(blocks_are(t, 3, wantf), "Fortran-order subarray columns");
    os_dtype_release(t);
}

static void test_cursor(void)
{
    os_dtype_t *v;
    char buf[256];
    CHECK(os_dtype_new_hvector(2, 1, 16, dbl, &v) == OS_OK, "vector");
    os_cursor_t c;
    os_cursor_init(&c, v, buf, 3); /* extent 24: runs at 0,16,24,40,48,64 */
    ptrdiff_t expect[] = { 0, 16, 24, 40, 48, 64 };
    char *p;
    size_t n, i = 0;
    while ((n = os_cursor_next(&c, SIZE_MAX, &p))) {
        CHECK(i < 6 && p - buf == expect[i] && n == 8, "run %zu at %td len %zu", i, p - buf, n);
        i++;
    }
    CHECK(i == 6, "six runs, got %zu", i);
    /* A bounded cursor splits runs. */
    os_dtype_t *c40;
    CHECK(os_dtype_new_contiguous(5, dbl, &c40) == OS_OK, "contig");
    os_cursor_init(&c, c40, buf, 2);
    size_t total = 0, runs = 0;
    while ((n = os_cursor_next(&c, 24, &p))) {
        CHECK(p == buf + total, "contiguous runs follow each other");
        total += n;
        runs++;
    }
    CHECK(total == 80 && runs == 4, "80 bytes in runs of at most 24: %zu in %zu", total, runs);
    ptrdiff_t lo, hi;
    os_dtype_span(v, 3, &lo, &hi);
    CHECK(lo == 0 && hi == 72, "span [%td,%td)", lo, hi);
    os_dtype_release(c40);
    os_dtype_release(v);
}

static void test_refcount(void)
{
    os_dtype_t *t;
    CHECK(os_dtype_new_contiguous(2, dbl, &t) == OS_OK, "contig");
    os_dtype_retain(t);
    os_dtype_release(t);
    CHECK(atomic_load(&t->refs) == 1, "one reference left");
    os_dtype_release(t);
}

/* Indexed types of a contiguous element take a direct path; it must build
 * exactly what the general struct path builds, for any lengths (zeros
 * included) and displacements (negative, overlapping, out of order). */
static void test_indexed_fast_path(void)
{
    srand(7);
    int same = 1;
    for (int c = 0; c < 500 && same; c++) {
        size_t n = (size_t)(rand() % 12), lens[12];
        ptrdiff_t displs[12];
        os_dtype_t *kids[12], *child = rand() % 2 ? i32 : dbl, *a, *b;
        for (size_t i = 0; i < n; i++) {
            lens[i] = (size_t)(rand() % 4);
            displs[i] = (ptrdiff_t)(rand() % 41 - 20) * 4;
            kids[i] = child;
        }
        if (os_dtype_new_hindexed(n, lens, displs, child, &a) ||
            os_dtype_new_struct(n, lens, displs, kids, &b)) {
            same = 0;
            break;
        }
        same = a->nblocks == b->nblocks && a->size == b->size && a->lb == b->lb &&
               a->extent == b->extent && a->true_lb == b->true_lb &&
               a->true_extent == b->true_extent && a->basic == b->basic && a->cls == b->cls &&
               a->basic_size == b->basic_size && a->contig == b->contig &&
               blocks_are(a, b->nblocks, b->blocks);
        os_dtype_release(a);
        os_dtype_release(b);
    }
    CHECK(same, "indexed direct path differs from the struct path");
}

/* Pack and unpack follow the type map, and stop at the byte count. */
static void test_pack_unpack(void)
{
    os_dtype_t *v;
    /* MPI_Type_vector(3, 1, 2, MPI_INT): ints 0, 2, 4 of each element. */
    CHECK(os_dtype_new_hvector(3, 1, 8, i32, &v) == OS_OK, "vector");
    int32_t src[10], back[10], packed[6];
    for (int i = 0; i < 10; i++)
        src[i] = 100 + i;
    os_dtype_pack((char *)packed, v, src, 2, 6 * sizeof(int32_t)); /* extent 20: ints 0,2,4,5,7,9 */
    const int32_t want[6] = { 100, 102, 104, 105, 107, 109 };
    CHECK(!memcmp(packed, want, sizeof want), "packed %d %d %d %d %d %d", packed[0], packed[1],
          packed[2], packed[3], packed[4], packed[5]);
    memset(back, 0, sizeof back);
    os_dtype_unpack(back, v, 2, (const char *)packed, 4 * sizeof(int32_t));
    CHECK(back[0] == 100 && back[2] == 102 && back[4] == 104 && back[5] == 105 && back[1] == 0 &&
              back[7] == 0,
          "unpacked the first four only: %d %d %d %d, %d %d", back[0], back[2], back[4], back[5],
          back[1], back[7]);
    os_dtype_release(v);
}

int main(void)
{
    dbl = os_dtype_new_basic(OS_B_DOUBLE, OS_CLASS_FLOAT, 8, 8);
    i32 = os_dtype_new_basic(OS_B_INT32, OS_CLASS_CINT, 4, 4);
    test_contiguous();
    test_vector();
    test_negative_stride();
    test_indexed_and_struct();
    test_indexed_fast_path();
    test_nested_and_resized();
    test_subarray();
    test_cursor();
    test_pack_unpack();
    test_refcount();
    return UNIT_REPORT();
}
