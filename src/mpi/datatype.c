/* MPI datatypes -> flattened types. Predefined types come from a table built
 * at init; derived types are decoded once through MPI_Type_get_envelope and
 * MPI_Type_get_contents and cached, and an attribute's delete callback drops
 * the cache entry when the program frees the type (handles are reused). */
#define _GNU_SOURCE /* PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP */
#include "os_mpi.h"

#include <stdlib.h>
#include <string.h>

static os_hmap_t types; /* handle -> os_dtype_t* (predefined and cached) */
/* Under MPI_THREAD_MULTIPLE: the cache changes under this lock. Recursive,
 * because freeing a type while decoding may call cache_delete. */
static pthread_mutex_t types_lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;

static void types_lock_take(void)
{
    if (os_threaded)
        pthread_mutex_lock(&types_lock);
}

static void types_lock_give(void)
{
    if (os_threaded)
        pthread_mutex_unlock(&types_lock);
}
static int cache_keyval = MPI_KEYVAL_INVALID;
/* Moved on when a type leaves the cache: retires every thread's last lookup. */
_Atomic uint64_t os_types_gen = 1;
_Thread_local os_dtype_cache_t os_dtype_cache;

static uintptr_t key_of(MPI_Datatype dt)
{
    /* MPICH handles are ints, Open MPI's pointers; 0 must never be a key. */
    return (uintptr_t)dt ^ (uintptr_t)0x5a5a0000u;
}

static os_basic_t int_basic(int size, bool is_signed)
{
    switch (size) {
    case 1: return is_signed ? OS_B_INT8 : OS_B_UINT8;
    case 2: return is_signed ? OS_B_INT16 : OS_B_UINT16;
    case 4: return is_signed ? OS_B_INT32 : OS_B_UINT32;
    case 8: return is_signed ? OS_B_INT64 : OS_B_UINT64;
    default: return OS_B_OPAQUE;
    }
}

static os_basic_t float_basic(int size, bool is_long_double)
{
    if (is_long_double)
        return OS_B_LONG_DOUBLE;
    return size == 4 ? OS_B_FLOAT : size == 8 ? OS_B_DOUBLE : OS_B_OPAQUE;
}

static os_basic_t complex_basic(int size, bool is_long_double)
{
    if (is_long_double)
        return OS_B_C_LONG_DOUBLE_COMPLEX;
    return size == 8 ? OS_B_C_FLOAT_COMPLEX : size == 16 ? OS_B_C_DOUBLE_COMPLEX : OS_B_OPAQUE;
}

enum kind { K_TEXT, K_SINT, K_UINT, K_CHAR, K_FINT, K_FLOAT, K_LDOUBLE, K_COMPLEX, K_LDCOMPLEX,
            K_BOOL, K_LOGICAL, K_BYTE, K_OPAQUE, K_PAIR };

static void add(MPI_Datatype dt, enum kind k, os_basic_t pair, size_t pair_size)
{
    int size;
    MPI_Aint lb, extent;
    if (dt == MPI_DATATYPE_NULL || os_hmap_get(&types, key_of(dt)))
        return;
    PMPI_Type_size(dt, &size);
    PMPI_Type_get_extent(dt, &lb, &extent);
    os_basic_t b = OS_B_OPAQUE;
    os_class_t c = OS_CLASS_NONE;
    switch (k) {
    case K_TEXT: b = int_basic(size, false); c = OS_CLASS_NONE; break;
    case K_SINT: b = int_basic(size, true); c = OS_CLASS_CINT; break;
    case K_UINT: b = int_basic(size, false); c = OS_CLASS_CINT; break;
    case K_CHAR: b = int_basic(size, true); c = OS_CLASS_CHAR; break;
    case K_FINT: b = int_basic(size, true); c = OS_CLASS_FINT; break;
    case K_FLOAT: b = float_basic(size, false); c = OS_CLASS_FLOAT; break;
    case K_LDOUBLE: b = float_basic(size, true); c = OS_CLASS_FLOAT; break;
    case K_COMPLEX: b = complex_basic(size, false); c = OS_CLASS_COMPLEX; break;
    case K_LDCOMPLEX: b = complex_basic(size, true); c = OS_CLASS_COMPLEX; break;
    case K_BOOL: b = OS_B_BOOL; c = OS_CLASS_LOGICAL; break;
    case K_LOGICAL: b = size == 4 ? OS_B_LOGICAL : OS_B_OPAQUE; c = OS_CLASS_LOGICAL; break;
    case K_BYTE: b = OS_B_UINT8; c = OS_CLASS_BYTE; break;
    case K_OPAQUE: b = OS_B_OPAQUE; c = OS_CLASS_NONE; break;
    case K_PAIR: b = pair; c = OS_CLASS_PAIR; size = (int)pair_size; break;
    }
    if (b == OS_B_OPAQUE)
        c = OS_CLASS_NONE; /* no arithmetic on representations we do not know */
    os_dtype_t *t = os_dtype_new_basic(b, c, (size_t)size, extent);
    if (t)
        os_hmap_put(&types, key_of(dt), t);
}

/* Whether the host's own reductions take op on dt: MPI_Reduce_local on one
 * element, its errors returned (MPI-3 libraries raise them on
 * MPI_COMM_WORLD, MPI-4 ones on MPI_COMM_SELF). A program of sessions
 * only has neither handle to quiet: there the answer is the host's
 * documented one (MPICH 5 and the MPI-5 ABI: MPI's list; MPICH 4 and Open
 * MPI: Fortran integers take the logical ops, MPI_BYTE everything on Open
 * MPI). */
static bool host_takes(MPI_Op op, MPI_Datatype dt)
{
    if (dt == MPI_DATATYPE_NULL)
        return false;
    /* Intel MPI 2021 (reached through the MPI-5 ABI) ends the job on an
     * MPI_Reduce_local error whatever either handler says (2021.19), so it
     * is not asked. Its answers, measured op by op in separate jobs, are
     * MPICH 4.0's: Fortran integers and MPI_CHARACTER take every op,
     * MPI_BYTE neither arithmetic nor logical ones. */
    static int intel = -1;
    if (intel < 0) {
        char v[MPI_MAX_LIBRARY_VERSION_STRING];
        int n = 0;
        intel = PMPI_Get_library_version(v, &n) == MPI_SUCCESS && !strncmp(v, "Intel(R) MPI", 12);
    }
    if (intel)
        return dt != MPI_BYTE;
    if (os_world != MPI_COMM_WORLD) {
#if defined(OMPI_MAJOR_VERSION)
        return dt == MPI_BYTE || (dt != MPI_INTEGER && dt != MPI_INTEGER4);
#elif defined(MPICH_VERSION) && MPI_VERSION < 5
        return dt != MPI_BYTE; /* Fortran integers, MPI_CHARACTER */
#else
        return false;
#endif
    }
    MPI_Errhandler world, self;
    PMPI_Comm_get_errhandler(MPI_COMM_WORLD, &world);
    PMPI_Comm_get_errhandler(MPI_COMM_SELF, &self);
    PMPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    PMPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    _Alignas(16) char in[32] = { 0 }, inout[32] = { 0 };
    const bool ok = PMPI_Reduce_local(in, inout, 1, dt, op) == MPI_SUCCESS;
    PMPI_Comm_set_errhandler(MPI_COMM_WORLD, world);
    PMPI_Comm_set_errhandler(MPI_COMM_SELF, self);
    PMPI_Errhandler_free(&world);
    PMPI_Errhandler_free(&self);
    return ok;
}

/* Data bytes of a pair type: up to the end of its index field. */
#define PAIR_DATA(V, I) (offsetof(struct { V v; I i; }, i) + sizeof(I))

void os_mpi_dtype_init(void)
{
    add(MPI_CHAR, K_CHAR, 0, 0);
    add(MPI_SIGNED_CHAR, K_SINT, 0, 0);
    add(MPI_UNSIGNED_CHAR, K_UINT, 0, 0);
    add(MPI_WCHAR, K_TEXT, 0, 0); /* characters: no arithmetic, as in MPICH */
    add(MPI_SHORT, K_SINT, 0, 0);
    add(MPI_UNSIGNED_SHORT, K_UINT, 0, 0);
    add(MPI_INT, K_SINT, 0, 0);
    add(MPI_UNSIGNED, K_UINT, 0, 0);
    add(MPI_LONG, K_SINT, 0, 0);
    add(MPI_UNSIGNED_LONG, K_UINT, 0, 0);
    add(MPI_LONG_LONG_INT, K_SINT, 0, 0);
    add(MPI_LONG_LONG, K_SINT, 0, 0);
    add(MPI_UNSIGNED_LONG_LONG, K_UINT, 0, 0);
    add(MPI_INT8_T, K_SINT, 0, 0);
    add(MPI_INT16_T, K_SINT, 0, 0);
    add(MPI_INT32_T, K_SINT, 0, 0);
    add(MPI_INT64_T, K_SINT, 0, 0);
    add(MPI_UINT8_T, K_UINT, 0, 0);
    add(MPI_UINT16_T, K_UINT, 0, 0);
    add(MPI_UINT32_T, K_UINT, 0, 0);
    add(MPI_UINT64_T, K_UINT, 0, 0);
    add(MPI_AINT, K_SINT, 0, 0);
    add(MPI_OFFSET, K_SINT, 0, 0);
    add(MPI_COUNT, K_SINT, 0, 0);
    add(MPI_FLOAT, K_FLOAT, 0, 0);
    add(MPI_DOUBLE, K_FLOAT, 0, 0);
    add(MPI_LONG_DOUBLE, K_LDOUBLE, 0, 0);
    add(MPI_C_BOOL, K_BOOL, 0, 0);
    add(MPI_C_FLOAT_COMPLEX, K_COMPLEX, 0, 0);
    add(MPI_C_COMPLEX, K_COMPLEX, 0, 0);
    add(MPI_C_DOUBLE_COMPLEX, K_COMPLEX, 0, 0);
    add(MPI_C_LONG_DOUBLE_COMPLEX, K_LDCOMPLEX, 0, 0);
    add(MPI_BYTE, K_BYTE, 0, 0);
    add(MPI_PACKED, K_OPAQUE, 0, 0);
    add(MPI_FLOAT_INT, K_PAIR, OS_B_FLOAT_INT, PAIR_DATA(float, int));
    add(MPI_DOUBLE_INT, K_PAIR, OS_B_DOUBLE_INT, PAIR_DATA(double, int));
    add(MPI_LONG_INT, K_PAIR, OS_B_LONG_INT, PAIR_DATA(long, int));
    add(MPI_2INT, K_PAIR, OS_B_2INT, PAIR_DATA(int, int));
    add(MPI_SHORT_INT, K_PAIR, OS_B_SHORT_INT, PAIR_DATA(short, int));
    add(MPI_LONG_DOUBLE_INT, K_PAIR, OS_B_LONG_DOUBLE_INT, PAIR_DATA(long double, int));
#ifdef MPI_CXX_BOOL
    add(MPI_CXX_BOOL, K_BOOL, 0, 0);
    add(MPI_CXX_FLOAT_COMPLEX, K_COMPLEX, 0, 0);
    add(MPI_CXX_DOUBLE_COMPLEX, K_COMPLEX, 0, 0);
    add(MPI_CXX_LONG_DOUBLE_COMPLEX, K_LDCOMPLEX, 0, 0);
#endif
    /* Fortran types: the handles exist even when no Fortran program runs. */
    /* MPICH 4.0 reduces it as a C char, MPICH 5.0 not at all. */
    add(MPI_CHARACTER, host_takes(MPI_SUM, MPI_CHARACTER) ? K_CHAR : K_TEXT, 0, 0);
    /* Fortran integers take the logical ops where the host does (MPICH
     * 4.0 on all; Open MPI 4.1 on the sized ones but MPI_INTEGER and
     * MPI_INTEGER4; MPICH 5.0 on none): classed as C integers then. */
    const MPI_Datatype fints[] = { MPI_INTEGER, MPI_INTEGER1, MPI_INTEGER2, MPI_INTEGER4,
                                   MPI_INTEGER8 };
    for (size_t i = 0; i < sizeof fints / sizeof *fints; i++)
        add(fints[i], host_takes(MPI_LAND, fints[i]) ? K_SINT : K_FINT, 0, 0);
    os_op_host.byte_arith = host_takes(MPI_SUM, MPI_BYTE);
    os_op_host.byte_logical = host_takes(MPI_LAND, MPI_BYTE);
    add(MPI_REAL, K_FLOAT, 0, 0);
    add(MPI_DOUBLE_PRECISION, K_FLOAT, 0, 0);
    add(MPI_REAL4, K_FLOAT, 0, 0);
    add(MPI_REAL8, K_FLOAT, 0, 0);
    add(MPI_REAL16, K_OPAQUE, 0, 0); /* quad precision: no arithmetic here */
    add(MPI_COMPLEX, K_COMPLEX, 0, 0);
    add(MPI_DOUBLE_COMPLEX, K_COMPLEX, 0, 0);
    add(MPI_COMPLEX8, K_COMPLEX, 0, 0);
    add(MPI_COMPLEX16, K_COMPLEX, 0, 0);
    add(MPI_COMPLEX32, K_OPAQUE, 0, 0);
    add(MPI_LOGICAL, K_LOGICAL, 0, 0);
    add(MPI_2INTEGER, K_PAIR, OS_B_2INT, PAIR_DATA(int, int));
    add(MPI_2REAL, K_PAIR, OS_B_2FLOAT, PAIR_DATA(float, float));
    add(MPI_2DOUBLE_PRECISION, K_PAIR, OS_B_2DOUBLE, PAIR_DATA(double, double));
}

static int cache_delete(MPI_Datatype dt, int keyval, void *val, void *extra)
{
    (void)keyval;
    (void)extra;
    types_lock_take();
    os_dtype_t *t = os_hmap_del(&types, key_of(dt));
    atomic_fetch_add_explicit(&os_types_gen, 1, memory_order_release);
    types_lock_give();
    os_dtype_release(t ? t : val);
    return MPI_SUCCESS;
}

static os_status_t decode(MPI_Datatype dt, os_dtype_t **out, os_dtype_how_t *how);

/* Largest true extent recovered by decode_by_unpack (its work buffers scale with it). */
#define UNPACK_DECODE_MAX ((MPI_Aint)64 << 20)

/* Any type the host MPI can unpack, whatever its combiner (darray): recover
 * the type map from MPI_Unpack itself. Pass p unpacks a stream whose byte k
 * holds byte p of (k + 1); four passes give, for every memory byte, its
 * position in the packed stream (0: not data). Exact by construction and
 * done once per type; `elem` gives the element type for accumulate. */
static os_status_t decode_by_unpack(MPI_Datatype dt, const os_dtype_t *elem, os_dtype_t **out)
{
    os_status_t st = OS_OK;
    int size;
    MPI_Aint tlb, text, lb, extent;
    uint32_t *pos = NULL;
    unsigned char *stream = NULL, *img = NULL;
    ptrdiff_t *where = NULL;
    size_t *lens = NULL;

    PMPI_Type_size(dt, &size);
    PMPI_Type_get_true_extent(dt, &tlb, &text);
    PMPI_Type_get_extent(dt, &lb, &extent);
    if (text > UNPACK_DECODE_MAX)
        return OS_ERR(OS_ERR_UNSUPPORTED, "a datatype spanning %ld bytes is too large to decode "
                      "(limit %ld)", (long)text, (long)UNPACK_DECODE_MAX);
    pos = calloc((size_t)text + 1, sizeof *pos);
    stream = malloc((size_t)size + 1);
    img = malloc((size_t)text + 1);
    where = malloc(sizeof *where * ((size_t)size + 1));
    lens = malloc(sizeof *lens * ((size_t)size + 1));
    if (!pos || !stream || !img || !where || !lens) {
        st = OS_ERR(OS_ERR_NOMEM, "decoding a datatype of %ld bytes", (long)text);
        goto out;
    }
    for (int pass = 0; pass < 4; pass++) {
        for (int k = 0; k < size; k++)
            stream[k] = (unsigned char)(((uint32_t)k + 1) >> (8 * pass));
        memset(img, 0, (size_t)text);
        int at = 0;
        /* Displacements lie in [tlb, tlb + text): shift the image by -tlb. */
        void *origin = (void *)((uintptr_t)img - (uintptr_t)tlb);
        if (PMPI_Unpack(stream, size, &at, origin, 1, dt, os_self) != MPI_SUCCESS) {
            st = OS_ERR(OS_ERR_TYPE, "the host MPI cannot unpack this datatype");
            goto out;
        }
        for (MPI_Aint m = 0; m < text; m++)
            pos[m] |= (uint32_t)img[m] << (8 * pass);
    }
    for (MPI_Aint m = 0; m < text; m++)
        if (pos[m])
            where[pos[m] - 1] = tlb + m;
    /* Consecutive stream bytes at consecutive addresses form one block;
     * blocks are compacted in place (block n never passes byte k). */
    size_t n = 0;
    ptrdiff_t prev = 0;
    for (int k = 0; k < size; k++) {
        ptrdiff_t addr = where[k];
        if (n && addr == prev + 1) {
            lens[n - 1]++;
        } else {
            where[n] = addr;
            lens[n++] = 1;
        }
        prev = addr;
    }
    if ((st = os_dtype_new_hindexed(n, lens, where, os_dtype_byte(), out)))
        goto out;
    (*out)->basic = elem->basic;
    (*out)->cls = elem->cls;
    (*out)->basic_size = elem->basic_size;
    os_dtype_set_bounds(*out, lb, extent);
out:
    free(pos);
    free(stream);
    free(img);
    free(where);
    free(lens);
    return st;
}

/* A predefined type of an F90 combiner: the matching type by size. */
static os_status_t decode_f90(MPI_Datatype dt, int combiner, os_dtype_t **out)
{
    int size;
    MPI_Aint lb, extent;
    PMPI_Type_size(dt, &size);
    PMPI_Type_get_extent(dt, &lb, &extent);
    os_basic_t b = combiner == MPI_COMBINER_F90_INTEGER ? int_basic(size, true)
                   : combiner == MPI_COMBINER_F90_REAL  ? float_basic(size, false)
                                                        : complex_basic(size, false);
    os_class_t c = b == OS_B_OPAQUE                       ? OS_CLASS_NONE
                   : combiner == MPI_COMBINER_F90_INTEGER ? OS_CLASS_FINT
                   : combiner == MPI_COMBINER_F90_REAL    ? OS_CLASS_FLOAT
                                                          : OS_CLASS_COMPLEX;
    os_dtype_t *t = os_dtype_new_basic(b, c, (size_t)size, extent);
    if (!t)
        return OS_ERR(OS_ERR_NOMEM, "F90 datatype");
    t->predefined = false;
    *out = t;
    return OS_OK;
}

/* Layout cache. Programs often create, commit, use and free the same type
 * in every iteration of a loop (a halo's vector, a transposed block), and
 * each new handle would be decoded again. A type is identified by what
 * MPI_Type_get_contents returns: its combiner, its integer and address
 * arguments and its element types, the latter by their flattened forms
 * (which the entry keeps a reference to, so that a freed child's memory
 * cannot be mistaken for a new one). A small direct-mapped table, so that
 * programs whose types never repeat (RandomAccess's per-batch indexed types)
 * pay one hash and one copy of the arguments per type. Under types_lock. */
#define LAYOUT_SLOTS 64
#define LAYOUT_MAX_ARGS 4096 /* larger argument lists are decoded every time */
typedef struct {
    uint64_t hash;
    int comb, ni, na, nd;
    int *ints;
    MPI_Aint *aints;
    os_dtype_t **sub;
    os_dtype_t *t; /* NULL: empty slot */
} layout_t;
static layout_t layouts[LAYOUT_SLOTS];

/* Eight bytes at a time: argument lists run to thousands of bytes (an
 * indexed type of 1024 blocks), hashed for every type created. */
static uint64_t mix(uint64_t h, const void *p, size_t bytes)
{
    const unsigned char *b = p;
    for (; bytes >= 8; b += 8, bytes -= 8) {
        uint64_t w;
        memcpy(&w, b, 8);
        h = (h ^ w) * 0x9e3779b97f4a7c15ull;
        h ^= h >> 32;
    }
    for (; bytes; b++, bytes--)
        h = (h ^ *b) * 0x100000001b3ull;
    return h;
}

static uint64_t layout_hash(int comb, int ni, int na, int nd, const int *ints,
                            const MPI_Aint *aints, os_dtype_t *const *sub)
{
    int head[4] = { comb, ni, na, nd };
    uint64_t h = mix(0xcbf29ce484222325ull, head, sizeof head);
    h = mix(h, ints, sizeof *ints * (size_t)ni);
    h = mix(h, aints, sizeof *aints * (size_t)na);
    return mix(h, sub, sizeof *sub * (size_t)nd);
}

static void layout_clear(layout_t *l)
{
    if (!l->t)
        return;
    os_dtype_release(l->t);
    for (int i = 0; i < l->nd; i++)
        os_dtype_release(l->sub[i]);
    free(l->ints);
    free(l->aints);
    free(l->sub);
    memset(l, 0, sizeof *l);
}

static os_dtype_t *layout_find(uint64_t h, int comb, int ni, int na, int nd, const int *ints,
                               const MPI_Aint *aints, os_dtype_t *const *sub)
{
    const layout_t *l = &layouts[h % LAYOUT_SLOTS];
    if (!l->t || l->hash != h || l->comb != comb || l->ni != ni || l->na != na || l->nd != nd ||
        memcmp(l->ints, ints, sizeof *ints * (size_t)ni) ||
        memcmp(l->aints, aints, sizeof *aints * (size_t)na) ||
        memcmp(l->sub, sub, sizeof *sub * (size_t)nd))
        return NULL;
    return l->t;
}

/* Best effort: a type that does not fit is simply not cached. */
static void layout_put(uint64_t h, int comb, int ni, int na, int nd, const int *ints,
                       const MPI_Aint *aints, os_dtype_t *const *sub, os_dtype_t *t)
{
    layout_t *l = &layouts[h % LAYOUT_SLOTS], n = { .hash = h, .comb = comb, .ni = ni,
                                                    .na = na, .nd = nd, .t = t };
    n.ints = malloc(sizeof *ints * (size_t)(ni + 1));
    n.aints = malloc(sizeof *aints * (size_t)(na + 1));
    n.sub = malloc(sizeof *sub * (size_t)(nd + 1));
    if (!n.ints || !n.aints || !n.sub) {
        free(n.ints);
        free(n.aints);
        free(n.sub);
        return;
    }
    memcpy(n.ints, ints, sizeof *ints * (size_t)ni);
    memcpy(n.aints, aints, sizeof *aints * (size_t)na);
    memcpy(n.sub, sub, sizeof *sub * (size_t)nd);
    os_dtype_retain(t);
    for (int i = 0; i < nd; i++)
        os_dtype_retain(sub[i]);
    layout_clear(l);
    *l = n;
}

/* Build from the type's constructor arguments; returns a new reference.
 * how (may be NULL) tells whether it was built or found in the layout cache. */
static os_status_t decode(MPI_Datatype dt, os_dtype_t **out, os_dtype_how_t *how)
{
    os_status_t st = OS_OK;
    int ni, na, nd, comb;
    int *ints = NULL;
    MPI_Aint *aints = NULL;
    MPI_Datatype *kids = NULL;
    os_dtype_t **sub = NULL;
    size_t *lens = NULL;
    ptrdiff_t *displs = NULL;
    int nsub = 0;

    os_dtype_t *known = os_hmap_get(&types, key_of(dt));
    if (known) {
        os_dtype_retain(known);
        *out = known;
        return OS_OK;
    }
    if (PMPI_Type_get_envelope(dt, &ni, &na, &nd, &comb) != MPI_SUCCESS)
        return OS_ERR(OS_ERR_TYPE, "not a datatype");
    if (comb == MPI_COMBINER_NAMED)
        return OS_ERR(OS_ERR_TYPE, "predefined datatype unknown to onesided");
    if (comb == MPI_COMBINER_F90_INTEGER || comb == MPI_COMBINER_F90_REAL ||
        comb == MPI_COMBINER_F90_COMPLEX)
        return decode_f90(dt, comb, out);

    ints = malloc(sizeof *ints * (size_t)(ni + 1));
    aints = malloc(sizeof *aints * (size_t)(na + 1));
    kids = malloc(sizeof *kids * (size_t)(nd + 1));
    sub = calloc((size_t)nd + 1, sizeof *sub);
    if (!ints || !aints || !kids || !sub) {
        st = OS_ERR(OS_ERR_NOMEM, "decoding a datatype");
        goto out;
    }
    PMPI_Type_get_contents(dt, ni, na, nd, ints, aints, kids);
    for (nsub = 0; nsub < nd; nsub++) {
        st = decode(kids[nsub], &sub[nsub], NULL);
        if (st) {
            nsub++;
            goto out;
        }
    }
    const bool cacheable = comb != MPI_COMBINER_DUP && ni + na <= LAYOUT_MAX_ARGS;
    uint64_t hash = 0;
    if (cacheable) {
        hash = layout_hash(comb, ni, na, nd, ints, aints, sub);
        os_dtype_t *same = layout_find(hash, comb, ni, na, nd, ints, aints, sub);
        if (same) {
            os_dtype_retain(same);
            *out = same;
            if (how)
                *how = OS_DTYPE_REUSED;
            goto out;
        }
    }
    if (how)
        *how = OS_DTYPE_DECODED;
    size_t count = ni ? (size_t)(ints[0] < 0 ? 0 : ints[0]) : 0;
    lens = malloc(sizeof *lens * (count + 1));
    displs = malloc(sizeof *displs * (count + 1));
    if (!lens || !displs) {
        st = OS_ERR(OS_ERR_NOMEM, "decoding a datatype");
        goto out;
    }
    os_dtype_t *c0 = nd ? sub[0] : NULL;
    switch (comb) {
    case MPI_COMBINER_DUP:
        os_dtype_retain(c0);
        *out = c0;
        goto out;
    case MPI_COMBINER_CONTIGUOUS:
        st = os_dtype_new_contiguous(count, c0, out);
        break;
    case MPI_COMBINER_VECTOR:
        st = os_dtype_new_hvector(count, (size_t)ints[1], (ptrdiff_t)ints[2] * c0->extent, c0, out);
        break;
    case MPI_COMBINER_HVECTOR:
        st = os_dtype_new_hvector(count, (size_t)ints[1], aints[0], c0, out);
        break;
    case MPI_COMBINER_INDEXED:
        for (size_t i = 0; i < count; i++) {
            lens[i] = (size_t)ints[1 + i];
            displs[i] = (ptrdiff_t)ints[1 + count + i] * c0->extent;
        }
        st = os_dtype_new_hindexed(count, lens, displs, c0, out);
        break;
    case MPI_COMBINER_HINDEXED:
        for (size_t i = 0; i < count; i++) {
            lens[i] = (size_t)ints[1 + i];
            displs[i] = aints[i];
        }
        st = os_dtype_new_hindexed(count, lens, displs, c0, out);
        break;
    case MPI_COMBINER_INDEXED_BLOCK:
        for (size_t i = 0; i < count; i++) {
            lens[i] = (size_t)ints[1];
            displs[i] = (ptrdiff_t)ints[2 + i] * c0->extent;
        }
        st = os_dtype_new_hindexed(count, lens, displs, c0, out);
        break;
    case MPI_COMBINER_HINDEXED_BLOCK:
        for (size_t i = 0; i < count; i++) {
            lens[i] = (size_t)ints[1];
            displs[i] = aints[i];
        }
        st = os_dtype_new_hindexed(count, lens, displs, c0, out);
        break;
    case MPI_COMBINER_STRUCT:
        for (size_t i = 0; i < count; i++) {
            lens[i] = (size_t)ints[1 + i];
            displs[i] = aints[i];
        }
        st = os_dtype_new_struct(count, lens, displs, sub, out);
        break;
    case MPI_COMBINER_SUBARRAY: {
        int n = ints[0];
        st = os_dtype_new_subarray(n, ints + 1, ints + 1 + n, ints + 1 + 2 * n,
                                   ints[1 + 3 * n] == MPI_ORDER_FORTRAN, c0, out);
        break;
    }
    case MPI_COMBINER_RESIZED:
        st = os_dtype_new_resized(c0, aints[0], aints[1], out);
        break;
    default: /* darray, and any combiner added later */
        if (!c0) {
            st = OS_ERR(OS_ERR_TYPE, "datatype combiner %d without an element type", comb);
            break;
        }
        st = decode_by_unpack(dt, c0, out);
        goto built; /* bounds already set */
    }
    if (!st) {
        /* The host MPI's bounds are authoritative (alignment padding of structs). */
        MPI_Aint lb, extent;
        PMPI_Type_get_extent(dt, &lb, &extent);
        os_dtype_set_bounds(*out, lb, extent);
    }
built:
    if (!st && cacheable)
        layout_put(hash, comb, ni, na, nd, ints, aints, sub, *out);
out:
    for (int i = 0; i < nsub; i++) {
        int a, b, c, k;
        os_dtype_release(sub[i]);
        PMPI_Type_get_envelope(kids[i], &a, &b, &c, &k);
        if (k != MPI_COMBINER_NAMED)
            PMPI_Type_free(&kids[i]);
    }
    free(ints);
    free(aints);
    free(kids);
    free(sub);
    free(lens);
    free(displs);
    return st;
}

os_status_t os_mpi_dtype_lookup(MPI_Datatype dt, os_dtype_t **out, os_dtype_how_t *how)
{
    os_status_t st = OS_OK;
    os_dtype_how_t h = OS_DTYPE_CACHED;
    /* Read before the lookup: a type freed meanwhile leaves a stale entry
     * that the next check already refuses. */
    uint64_t gen = atomic_load_explicit(&os_types_gen, memory_order_acquire);
    types_lock_take();
    os_dtype_t *t = os_hmap_get(&types, key_of(dt));
    if (t)
        goto out;
    if (dt == MPI_DATATYPE_NULL) {
        st = OS_ERR(OS_ERR_TYPE, "MPI_DATATYPE_NULL");
        goto out;
    }
    if ((st = decode(dt, &t, &h)))
        goto out;
    if (cache_keyval == MPI_KEYVAL_INVALID)
        PMPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, cache_delete, &cache_keyval, NULL);
    if ((st = os_hmap_put(&types, key_of(dt), t))) {
        os_dtype_release(t);
        goto out;
    }
    /* The cache holds this reference until the program frees the type. */
    PMPI_Type_set_attr(dt, cache_keyval, t);
out:
    types_lock_give();
    if (how)
        *how = h;
    if (!st) {
        *out = t;
        os_dtype_cache.handle = dt;
        os_dtype_cache.type = t;
        os_dtype_cache.gen = gen;
    }
    return st;
}

int os_mpi_op(MPI_Op op)
{
    static const struct { MPI_Op mpi; os_op_t os; } map[] = {
        { MPI_SUM, OS_OP_SUM }, { MPI_PROD, OS_OP_PROD }, { MPI_MIN, OS_OP_MIN },
        { MPI_MAX, OS_OP_MAX }, { MPI_LAND, OS_OP_LAND }, { MPI_LOR, OS_OP_LOR },
        { MPI_LXOR, OS_OP_LXOR }, { MPI_BAND, OS_OP_BAND }, { MPI_BOR, OS_OP_BOR },
        { MPI_BXOR, OS_OP_BXOR }, { MPI_MAXLOC, OS_OP_MAXLOC }, { MPI_MINLOC, OS_OP_MINLOC },
        { MPI_REPLACE, OS_OP_REPLACE }, { MPI_NO_OP, OS_OP_NO_OP },
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (map[i].mpi == op)
            return (int)map[i].os;
    return -1;
}
