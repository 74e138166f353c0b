#include "os_dtype.h"

#include <stdlib.h>
#include <string.h>

static os_dtype_t *alloc_type(size_t nblocks)
{
    os_dtype_t *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->blocks = nblocks ? malloc(nblocks * sizeof *t->blocks) : NULL;
    if (nblocks && !t->blocks) {
        free(t);
        return NULL;
    }
    atomic_init(&t->refs, 1);
    return t;
}

static void finish(os_dtype_t *t)
{
    ptrdiff_t lo = PTRDIFF_MAX, hi = PTRDIFF_MIN;
    size_t size = 0;
    for (size_t i = 0; i < t->nblocks; i++) {
        os_block_t *b = &t->blocks[i];
        size += b->len;
        if (b->disp < lo)
            lo = b->disp;
        if (b->disp + (ptrdiff_t)b->len > hi)
            hi = b->disp + (ptrdiff_t)b->len;
    }
    t->size = size;
    t->true_lb = t->nblocks ? lo : 0;
    t->true_extent = t->nblocks ? hi - lo : 0;
    t->contig = t->nblocks == 1 && (ptrdiff_t)t->blocks[0].len == t->extent;
}

os_dtype_t *os_dtype_new_basic(os_basic_t basic, os_class_t cls, size_t size, ptrdiff_t extent)
{
    os_dtype_t *t = alloc_type(size ? 1 : 0);
    if (!t)
        return NULL;
    if (size) {
        t->blocks[0] = (os_block_t){ 0, size };
        t->nblocks = 1;
    }
    t->basic = (uint8_t)basic;
    t->cls = (uint8_t)cls;
    t->basic_size = (uint16_t)size;
    t->lb = 0;
    t->extent = extent;
    t->predefined = true;
    finish(t);
    return t;
}

/* Append a block, merging it with the previous one when they touch. */
static void push_block(os_dtype_t *t, ptrdiff_t disp, size_t len)
{
    if (!len)
        return;
    if (t->nblocks) {
        os_block_t *last = &t->blocks[t->nblocks - 1];
        if (last->disp + (ptrdiff_t)last->len == disp) {
            last->len += len;
            return;
        }
    }
    t->blocks[t->nblocks++] = (os_block_t){ disp, len };
}

os_status_t os_dtype_new_struct(size_t count, const size_t *blocklens, const ptrdiff_t *displs,
                                os_dtype_t *const *children, os_dtype_t **out)
{
    size_t nblocks = 0;
    int basic = OS_B_NONE, cls = OS_CLASS_NONE, basic_size = 0;
    ptrdiff_t lb = PTRDIFF_MAX, ub = PTRDIFF_MIN;
    bool any = false;

    for (size_t i = 0; i < count; i++) {
        const os_dtype_t *c = children[i];
        if (!blocklens[i])
            continue;
        /* Contiguous children of a block merge into a single run per block. */
        nblocks += c->contig ? 1 : blocklens[i] * c->nblocks;
        /* Bounds of the first and the last copy cover the block, whatever the
         * sign of the child's extent. */
        for (size_t r = 0; r < 2; r++) {
            ptrdiff_t a = displs[i] + c->lb + (ptrdiff_t)(r ? blocklens[i] - 1 : 0) * c->extent;
            ptrdiff_t b = a + c->extent;
            if ((a < b ? a : b) < lb)
                lb = a < b ? a : b;
            if ((a > b ? a : b) > ub)
                ub = a > b ? a : b;
        }
        if (c->size == 0)
            continue;
        if (!any) {
            basic = c->basic;
            cls = c->cls;
            basic_size = c->basic_size;
            any = true;
        } else if (basic != c->basic || cls != c->cls) {
            basic = OS_B_MIXED;
        }
    }
    os_dtype_t *t = alloc_type(nblocks);
    if (!t)
        return OS_ERR(OS_ERR_NOMEM, "datatype with %zu blocks", nblocks);
    for (size_t i = 0; i < count; i++) {
        const os_dtype_t *c = children[i];
        if (c->contig) {
            push_block(t, displs[i] + c->blocks[0].disp, blocklens[i] * c->size);
            continue;
        }
        for (size_t r = 0; r < blocklens[i]; r++)
            for (size_t b = 0; b < c->nblocks; b++)
                push_block(t, displs[i] + (ptrdiff_t)r * c->extent + c->blocks[b].disp,
                           c->blocks[b].len);
    }
    t->basic = (uint8_t)(any ? basic : OS_B_NONE);
    t->cls = (uint8_t)cls;
    t->basic_size = (uint16_t)basic_size;
    t->lb = any || lb != PTRDIFF_MAX ? lb : 0;
    t->extent = lb != PTRDIFF_MAX ? ub - lb : 0;
    finish(t);
    *out = t;
    return OS_OK;
}

os_status_t os_dtype_new_contiguous(size_t count, os_dtype_t *child, os_dtype_t **out)
{
    return os_dtype_new_hvector(count, 1, child->extent, child, out);
}

os_status_t os_dtype_new_hvector(size_t count, size_t blocklen, ptrdiff_t stride,
                                 os_dtype_t *child, os_dtype_t **out)
{
    size_t *lens = malloc((count ? count : 1) * sizeof *lens);
    ptrdiff_t *displs = malloc((count ? count : 1) * sizeof *displs);
    os_dtype_t **kids = malloc((count ? count : 1) * sizeof *kids);
    os_status_t st = OS_OK;
    if (!lens || !displs || !kids) {
        st = OS_ERR(OS_ERR_NOMEM, "vector of %zu blocks", count);
        goto out;
    }
    for (size_t i = 0; i < count; i++) {
        lens[i] = blocklen;
        displs[i] = (ptrdiff_t)i * stride;
        kids[i] = child;
    }
    st = os_dtype_new_struct(count, lens, displs, kids, out);
out:
    free(lens);
    free(displs);
    free(kids);
    return st;
}

/* Indexed types of a contiguous element (the common case, and the one
 * programs build for every batch, like RandomAccess's aggregation) are
 * flattened directly: one run per block, no per-block child lookups. */
os_status_t os_dtype_new_hindexed(size_t count, const size_t *blocklens, const ptrdiff_t *displs,
                                  os_dtype_t *child, os_dtype_t **out)
{
    if (child->contig && child->size && child->extent > 0) {
        size_t nblocks = 0;
        ptrdiff_t lb = PTRDIFF_MAX, ub = PTRDIFF_MIN;
        for (size_t i = 0; i < count; i++) {
            if (!blocklens[i])
                continue;
            nblocks++;
            /* Copies lie at displs[i] + r * extent: the first and the last
             * bound the block (positive extent). */
            ptrdiff_t a = displs[i] + child->lb;
            ptrdiff_t b = a + (ptrdiff_t)blocklens[i] * child->extent;
            lb = a < lb ? a : lb;
            ub = b > ub ? b : ub;
        }
        os_dtype_t *t = alloc_type(nblocks);
        if (!t)
            return OS_ERR(OS_ERR_NOMEM, "indexed type of %zu blocks", count);
        for (size_t i = 0; i < count; i++)
            push_block(t, displs[i] + child->blocks[0].disp, blocklens[i] * child->size);
        /* As os_dtype_new_struct: no element at all has no element type. */
        t->basic = nblocks ? child->basic : OS_B_NONE;
        t->cls = nblocks ? child->cls : OS_CLASS_NONE;
        t->basic_size = nblocks ? child->basic_size : 0;
        t->lb = nblocks ? lb : 0;
        t->extent = nblocks ? ub - lb : 0;
        finish(t);
        *out = t;
        return OS_OK;
    }
    os_dtype_t **kids = malloc((count ? count : 1) * sizeof *kids);
    if (!kids)
        return OS_ERR(OS_ERR_NOMEM, "indexed type of %zu blocks", count);
    for (size_t i = 0; i < count; i++)
        kids[i] = child;
    os_status_t st = os_dtype_new_struct(count, blocklens, displs, kids, out);
    free(kids);
    return st;
}

os_status_t os_dtype_new_resized(os_dtype_t *child, ptrdiff_t lb, ptrdiff_t extent,
                                 os_dtype_t **out)
{
    os_dtype_t *t = alloc_type(child->nblocks);
    if (!t)
        return OS_ERR(OS_ERR_NOMEM, "resized type");
    memcpy(t->blocks, child->blocks, child->nblocks * sizeof *t->blocks);
    t->nblocks = child->nblocks;
    t->basic = child->basic;
    t->cls = child->cls;
    t->basic_size = child->basic_size;
    t->lb = lb;
    t->extent = extent;
    finish(t);
    *out = t;
    return OS_OK;
}

os_status_t os_dtype_new_subarray(int ndims, const int *sizes, const int *subsizes,
                                  const int *starts, int fortran_order, os_dtype_t *child,
                                  os_dtype_t **out)
{
    /* Build from the fastest-varying dimension outwards: each dimension is an
     * hvector of the one inside it, then the whole is shifted to its start and
     * resized to the full array, as MPI defines the subarray type. */
    os_status_t st = OS_OK;
    os_dtype_t *cur = child, *next = NULL;
    ptrdiff_t stride = child->extent, offset = 0, full = child->extent;
    os_dtype_retain(child);
    for (int k = 0; k < ndims; k++) {
        int d = fortran_order ? k : ndims - 1 - k;
        st = os_dtype_new_hvector((size_t)subsizes[d], 1, stride, cur, &next);
        os_dtype_release(cur);
        if (st)
            goto out;
        cur = next;
        offset += (ptrdiff_t)starts[d] * stride;
        stride *= sizes[d];
        full *= sizes[d];
    }
    {
        size_t one = 1;
        st = os_dtype_new_struct(1, &one, &offset, &cur, &next);
        os_dtype_release(cur);
        if (st)
            goto out;
        cur = next;
    }
    st = os_dtype_new_resized(cur, 0, full, out);
    os_dtype_release(cur);
out:
    return st;
}

void os_dtype_set_bounds(os_dtype_t *t, ptrdiff_t lb, ptrdiff_t extent)
{
    t->lb = lb;
    t->extent = extent;
    t->contig = t->nblocks == 1 && (ptrdiff_t)t->blocks[0].len == t->extent;
}

os_dtype_t *os_dtype_byte(void)
{
    static os_block_t block = { 0, 1 };
    static os_dtype_t byte = { .size = 1, .extent = 1, .true_extent = 1, .nblocks = 1,
                               .blocks = &block, .basic = OS_B_UINT8, .cls = OS_CLASS_BYTE,
                               .basic_size = 1, .contig = true, .predefined = true };
    return &byte;
}

void os_dtype_retain(os_dtype_t *t)
{
    if (!t->predefined)
        atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
}

void os_dtype_release(os_dtype_t *t)
{
    if (!t || t->predefined)
        return;
    if (atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) == 1) {
        free(t->blocks);
        free(t);
    }
}

void os_dtype_span(const os_dtype_t *t, size_t count, ptrdiff_t *lo, ptrdiff_t *hi)
{
    if (!count || !t->size) {
        *lo = *hi = 0;
        return;
    }
    ptrdiff_t last = (ptrdiff_t)(count - 1) * t->extent;
    ptrdiff_t a = t->true_lb, b = t->true_lb + last;
    *lo = a < b ? a : b;
    *hi = (a > b ? a : b) + t->true_extent;
}

void os_cursor_init(os_cursor_t *c, const os_dtype_t *t, const void *base, size_t count)
{
    c->t = t;
    c->base = (char *)base;
    c->count = t->size ? count : 0;
    c->rep = c->blk = c->off = 0;
    c->contig_left = t->contig ? count * t->size : 0;
}

size_t os_cursor_next(os_cursor_t *c, size_t max, char **ptr)
{
    const os_dtype_t *t = c->t;
    if (t->contig) {
        size_t done = c->count * t->size - c->contig_left;
        size_t len = c->contig_left < max ? c->contig_left : max;
        *ptr = c->base + t->blocks[0].disp + (ptrdiff_t)done;
        c->contig_left -= len;
        return len;
    }
    if (c->rep >= c->count)
        return 0;
    const os_block_t *b = &t->blocks[c->blk];
    size_t left = b->len - c->off;
    size_t len = left < max ? left : max;
    *ptr = c->base + (ptrdiff_t)c->rep * t->extent + b->disp + (ptrdiff_t)c->off;
    c->off += len;
    if (c->off == b->len) {
        c->off = 0;
        if (++c->blk == t->nblocks) {
            c->blk = 0;
            c->rep++;
        }
    }
    return len;
}

void os_dtype_pack(char *dst, const os_dtype_t *t, const void *buf, size_t count, size_t bytes)
{
    os_cursor_t c;
    char *p;
    size_t n;
    os_cursor_init(&c, t, buf, count);
    while (bytes && (n = os_cursor_next(&c, bytes, &p))) {
        os_copy(dst, p, n);
        dst += n;
        bytes -= n;
    }
}

void os_dtype_unpack(void *buf, const os_dtype_t *t, size_t count, const char *src, size_t bytes)
{
    os_cursor_t c;
    char *p;
    size_t n;
    os_cursor_init(&c, t, buf, count);
    while (bytes && (n = os_cursor_next(&c, bytes, &p))) {
        os_copy(p, src, n);
        src += n;
        bytes -= n;
    }
}

os_status_t os_dtype_view(const void *addr, const os_dtype_t *t, size_t count, size_t bytes,
                          const char **view, char **tmp)
{
    *tmp = NULL;
    if (t->contig || count * t->size == 0) {
        *view = (const char *)addr + (t->nblocks ? t->blocks[0].disp : 0);
        return OS_OK;
    }
    *tmp = malloc(bytes ? bytes : 1);
    if (!*tmp)
        return OS_ERR(OS_ERR_NOMEM, "packing %zu bytes", bytes);
    os_dtype_pack(*tmp, t, addr, count, bytes);
    *view = *tmp;
    return OS_OK;
}
