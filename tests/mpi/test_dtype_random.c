/* Randomized datatype conformance: random nested derived datatypes (every
 * combiner, negative strides, displacements and lower bounds, resized
 * extents, zero-length blocks), used as origin, target and result types of
 * put, get, accumulate and get_accumulate, checked against the host MPI's
 * own MPI_Pack, MPI_Unpack and MPI_Reduce_local.
 *
 *   test_dtype_random [--cases N] [--seed S]     (defaults: 400 cases, seed 1)
 *
 * Every process draws the same types from the seed. For each case the
 * processes take turns as origin to their right neighbour, under a lock;
 * each target then compares its window with the image the host MPI
 * computes, and each origin its fetched buffers. A failure prints the seed
 * and case, so that a soak run's finding can be replayed. */
#include "common.h"

#define AREA 65536   /* bytes of every buffer; types are placed in its middle */
#define MIDDLE (AREA / 2)
#define MAX_DEPTH 3

static uint64_t rng;
static uint32_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}
static int rnd_in(int lo, int hi) /* inclusive */
{
    return lo + (int)(rnd() % (uint32_t)(hi - lo + 1));
}

/* A random type of MPI_INT elements (so that it is valid for accumulate);
 * *desc gets a short description for failure reports. */
static MPI_Datatype random_type(int depth, char *desc, size_t len)
{
    MPI_Datatype inner = MPI_INT, t = MPI_DATATYPE_NULL;
    char sub[512] = "int";
    int isz;
    if (depth < MAX_DEPTH && rnd() % 3)
        inner = random_type(depth + 1, sub, sizeof sub);
    MPI_Aint lb, ext;
    MPI_Type_get_extent(inner, &lb, &ext);
    MPI_Type_size(inner, &isz);
    if (ext <= 0)
        ext = 4;
    int kind = rnd_in(0, 11);
    switch (kind) {
    case 0: {
        int n = rnd_in(0, 3);
        MPI_Type_contiguous(n, inner, &t);
        snprintf(desc, len, "contig(%d,%s)", n, sub);
        break;
    }
    case 1: {
        int n = rnd_in(1, 3), bl = rnd_in(0, 2), stride = rnd_in(-3, 3);
        if (stride >= 0 && stride < bl)
            stride = bl; /* blocks of one vector never overlap */
        if (stride < 0 && -stride < bl)
            stride = -bl;
        MPI_Type_vector(n, bl, stride, inner, &t);
        snprintf(desc, len, "vector(%d,%d,%d,%s)", n, bl, stride, sub);
        break;
    }
    case 2: {
        int n = rnd_in(1, 3), bl = rnd_in(0, 2);
        MPI_Aint stride = (MPI_Aint)rnd_in(bl, bl + 2) * ext * (rnd() % 2 ? 1 : -1);
        MPI_Type_create_hvector(n, bl, stride, inner, &t);
        snprintf(desc, len, "hvector(%d,%d,%ld,%s)", n, bl, (long)stride, sub);
        break;
    }
    case 3:
    case 4:
    case 5:
    case 6: {
        /* indexed family: disjoint blocks in a shuffled order, some empty,
         * displacements may be negative */
        int n = rnd_in(1, 4), bl[4], d[4], pos = rnd_in(-4, 0);
        for (int i = 0; i < n; i++) {
            bl[i] = kind == 5 || kind == 6 ? 2 : rnd_in(0, 3);
            d[i] = pos;
            pos += bl[i] + rnd_in(0, 2);
        }
        for (int i = n - 1; i > 0; i--) { /* shuffle blocks with their lengths */
            int j = rnd_in(0, i), tb = bl[i], td = d[i];
            bl[i] = bl[j], d[i] = d[j], bl[j] = tb, d[j] = td;
        }
        MPI_Aint hd[4];
        for (int i = 0; i < n; i++)
            hd[i] = (MPI_Aint)d[i] * ext;
        const char *name = "";
        switch (kind) {
        case 3: MPI_Type_indexed(n, bl, d, inner, &t); name = "indexed"; break;
        case 4: MPI_Type_create_hindexed(n, bl, hd, inner, &t); name = "hindexed"; break;
        case 5: MPI_Type_create_indexed_block(n, 2, d, inner, &t); name = "indexed_block"; break;
        case 6: MPI_Type_create_hindexed_block(n, 2, hd, inner, &t); name = "hindexed_block"; break;
        }
        snprintf(desc, len, "%s(%d,d0=%d,%s)", name, n, d[0], sub);
        break;
    }
    case 7: {
        /* struct of the inner type and plain ints, disjoint */
        int bl[2] = { rnd_in(0, 2), rnd_in(0, 3) };
        MPI_Aint d[2];
        MPI_Datatype ty[2] = { inner, MPI_INT };
        d[0] = (MPI_Aint)rnd_in(-2, 2) * 4;
        d[1] = d[0] + (MPI_Aint)bl[0] * ext + lb + (MPI_Aint)rnd_in(0, 2) * 4;
        if (d[1] < d[0] + lb + (MPI_Aint)bl[0] * ext)
            d[1] = d[0] + lb + (MPI_Aint)bl[0] * ext;
        if (bl[0] && ext < isz) /* an inner type whose extent hides its size: keep it alone */
            bl[1] = 0;
        if (rnd() % 2) { /* the struct's entries in the other order */
            MPI_Aint td = d[0];
            d[0] = d[1], d[1] = td;
            int tb = bl[0];
            bl[0] = bl[1], bl[1] = tb;
            ty[0] = MPI_INT, ty[1] = inner;
        }
        MPI_Type_create_struct(2, bl, d, ty, &t);
        snprintf(desc, len, "struct(%d,%d,%s)", bl[0], bl[1], sub);
        break;
    }
    case 8: {
        int nd = rnd_in(1, 3), sizes[3], subs[3], starts[3];
        for (int i = 0; i < nd; i++) {
            sizes[i] = rnd_in(1, 4);
            /* MPI-3.1 4.1.3: a subsize below 1 is erroneous (Open MPI
             * refuses it; MPICH takes 0). */
            subs[i] = rnd_in(1, sizes[i]);
            starts[i] = rnd_in(0, sizes[i] - subs[i]);
        }
        int order = rnd() % 2 ? MPI_ORDER_C : MPI_ORDER_FORTRAN;
        MPI_Type_create_subarray(nd, sizes, subs, starts, order, inner, &t);
        snprintf(desc, len, "subarray(%dd,%s,%s)", nd, order == MPI_ORDER_C ? "C" : "F", sub);
        break;
    }
    case 9: {
        /* resized: a lower bound that may be negative, an extent that keeps
         * consecutive copies disjoint (at least the true extent) */
        MPI_Aint tlb, text;
        MPI_Type_get_true_extent(inner, &tlb, &text);
        MPI_Aint nlb = tlb - (MPI_Aint)rnd_in(0, 3) * 4, next = text + (MPI_Aint)rnd_in(0, 3) * 4;
        if (text == 0)
            next = (MPI_Aint)rnd_in(0, 2) * 4;
        MPI_Type_create_resized(inner, nlb, next, &t);
        snprintf(desc, len, "resized(lb=%ld,ext=%ld,%s)", (long)nlb, (long)next, sub);
        break;
    }
    case 10: {
        MPI_Type_dup(inner, &t);
        snprintf(desc, len, "dup(%s)", sub);
        break;
    }
    case 11: {
        /* darray: one process's piece of a block / cyclic / undistributed grid */
        static const int dist[3] = { MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_CYCLIC,
                                     MPI_DISTRIBUTE_NONE };
        int nd = rnd_in(1, 2), gs[2], ds[2], da[2], ps[2], nprocs = 1;
        for (int i = 0; i < nd; i++) {
            ds[i] = dist[rnd_in(0, 2)];
            ps[i] = ds[i] == MPI_DISTRIBUTE_NONE ? 1 : rnd_in(1, 2);
            gs[i] = rnd_in(1, 5);
            da[i] = ds[i] == MPI_DISTRIBUTE_CYCLIC ? rnd_in(1, 2) : MPI_DISTRIBUTE_DFLT_DARG;
            nprocs *= ps[i];
        }
        int order = rnd() % 2 ? MPI_ORDER_C : MPI_ORDER_FORTRAN, me = rnd_in(0, nprocs - 1);
        MPI_Type_create_darray(nprocs, me, nd, gs, ds, da, ps, order, inner, &t);
        snprintf(desc, len, "darray(%dd,proc %d of %d,%s)", nd, me, nprocs, sub);
        break;
    }
    }
    if (inner != MPI_INT)
        MPI_Type_free(&inner);
    /* MPICH 4.0's pack engine (yaksa) divides by zero on an empty type
     * nested in another: its own MPI_Unpack crashes, so the oracle cannot
     * judge such types. Empty blocks inside non-empty types stay. */
    int tsize;
    MPI_Type_size(t, &tsize);
    if (tsize == 0) {
        MPI_Type_free(&t);
        MPI_Type_contiguous(1, MPI_INT, &t);
        snprintf(desc, len, "int");
    }
    MPI_Type_commit(&t);
    return t;
}

/* Which ints of `count` copies of t at MIDDLE does the type map touch, and
 * how many times? The host MPI's own unpack of a counting stream says. */
static bool disjoint_and_inside(MPI_Datatype t, int count, int *nints)
{
    int size;
    MPI_Type_size(t, &size);
    *nints = size / 4 * count;
    MPI_Aint tlb, text, lb, ext;
    MPI_Type_get_true_extent(t, &tlb, &text);
    MPI_Type_get_extent(t, &lb, &ext);
    MPI_Aint lo = tlb + (ext < 0 ? ext * (count - 1) : 0);
    MPI_Aint hi = tlb + text + (ext > 0 ? ext * (count - 1) : 0);
    if (MIDDLE + lo < 0 || MIDDLE + hi > AREA || *nints > 2048)
        return false;
    static int canvas[AREA / 4], stream[2048];
    memset(canvas, 0, sizeof canvas);
    for (int i = 0; i < *nints; i++)
        stream[i] = 1;
    /* Unpack adds nothing; write a marker per element and count hits by
     * accumulating locally with MPI_SUM into a zeroed canvas. */
    int pos = 0, packed_size;
    MPI_Pack_size(count, t, MPI_COMM_SELF, &packed_size);
    char *tmp = malloc((size_t)packed_size + 1);
    MPI_Pack(stream, *nints, MPI_INT, tmp, packed_size, &pos, MPI_COMM_SELF);
    pos = 0;
    MPI_Unpack(tmp, packed_size, &pos, (char *)canvas + MIDDLE, count, t, MPI_COMM_SELF);
    int touched = 0;
    for (int i = 0; i < AREA / 4; i++)
        touched += canvas[i] != 0;
    free(tmp);
    return touched == *nints; /* an overlap writes fewer distinct places */
}

/* The host MPI's image: unpack(pack(src, st), dt) over dst, or with op
 * folded in through MPI_Reduce_local. */
static void host_image(char *dst, MPI_Datatype dt, int dc, const char *src, MPI_Datatype st,
                       int sc, int nints, MPI_Op op)
{
    int ps, pos = 0;
    MPI_Pack_size(sc, st, MPI_COMM_SELF, &ps);
    char *in = malloc((size_t)ps + 4), *cur = malloc((size_t)ps + 4);
    MPI_Pack(src + MIDDLE, sc, st, in, ps, &pos, MPI_COMM_SELF);
    if (op != MPI_REPLACE) {
        int ps2, pos2 = 0;
        MPI_Pack_size(dc, dt, MPI_COMM_SELF, &ps2);
        MPI_Pack(dst + MIDDLE, dc, dt, cur, ps2, &pos2, MPI_COMM_SELF);
        MPI_Reduce_local(in, cur, nints, MPI_INT, op);
        memcpy(in, cur, (size_t)nints * 4);
    }
    pos = 0;
    MPI_Unpack(in, ps, &pos, dst + MIDDLE, dc, dt, MPI_COMM_SELF);
    free(in);
    free(cur);
}

static void fill(int *buf, int salt)
{
    for (int i = 0; i < AREA / 4; i++)
        buf[i] = (int)(((uint32_t)i * 2654435761u) >> 12) + salt;
}

static long gcd(long a, long b)
{
    while (b) {
        long t = a % b;
        a = b, b = t;
    }
    return a;
}
static long lcm(long a, long b)
{
    return a / gcd(a, b) * b;
}

/* The first int where two AREA buffers differ, or -1. */
static int first_difference(const int *a, const int *b)
{
    for (int i = 0; i < AREA / 4; i++)
        if (a[i] != b[i])
            return i;
    return -1;
}

enum { OP_PUT, OP_GET, OP_ACC, OP_GACC, OP_NKINDS };
static const char *const opname[OP_NKINDS] = { "put", "get", "accumulate", "get_accumulate" };

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    int cases = 400;
    uint64_t seed = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--cases") && i + 1 < argc)
            cases = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 0);
    }
    rng = seed * 0x9e3779b97f4a7c15ull + 1;
    int *init = malloc(AREA), *origin = malloc(AREA), *result = malloc(AREA);
    int *want = malloc(AREA), *want_result = malloc(AREA), *src_all = malloc(AREA);
    static const MPI_Op ops[] = { MPI_SUM, MPI_MAX, MPI_REPLACE, MPI_BXOR };
    static const char *const op_names[] = { "SUM", "MAX", "REPLACE", "BXOR" };
    int done = 0, skipped = 0;
    /* The cases are shared among three kinds of window memory: mapped
     * (allocate), reached by CMA (create over malloc), and dynamic. */
    static const int flavors[] = { F_ALLOCATE, F_CREATE, F_DYNAMIC };
    t_win_t tw;
    int *base = NULL, cur_flavor = -1;
    MPI_Win win = MPI_WIN_NULL;
    for (int c = 0; c < cases; c++) {
        int flavor = flavors[c * 3 / cases];
        if (flavor != cur_flavor) {
            if (cur_flavor >= 0)
                t_win_free(&tw);
            tw = t_win_make(flavor, AREA, MPI_INFO_NULL);
            win = tw.win;
            base = (int *)tw.base;
            MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
            cur_flavor = flavor;
        }
        char tdesc[512], odesc[512], rdesc[512];
        MPI_Datatype tt = random_type(0, tdesc, sizeof tdesc);
        MPI_Datatype ot = random_type(0, odesc, sizeof odesc);
        MPI_Datatype rt = random_type(0, rdesc, sizeof rdesc);
        int kind = rnd_in(0, OP_NKINDS - 1), opi = rnd_in(0, 3), tn, on, rn;
        int ts, os, rs;
        MPI_Type_size(tt, &ts);
        MPI_Type_size(ot, &os);
        MPI_Type_size(rt, &rs);
        ts /= 4, os /= 4, rs /= 4;
        /* Counts that make the three sides carry the same number of ints:
         * a multiple of the least common multiple of their sizes. */
        long l = ts && os ? lcm(ts, os) : 0;
        if (kind == OP_GACC)
            l = l && rs ? lcm(l, rs) : 0;
        l *= rnd_in(1, 2);
        int tc = l ? (int)(l / ts) : 0, oc = l ? (int)(l / os) : 0;
        int rc = l && kind == OP_GACC ? (int)(l / rs) : 0;
        bool ok = l > 0 && l <= 1024 && disjoint_and_inside(tt, tc, &tn) &&
                  disjoint_and_inside(ot, oc, &on) &&
                  (kind != OP_GACC || disjoint_and_inside(rt, rc, &rn));
        if (!ok) {
            skipped++;
            MPI_Type_free(&tt), MPI_Type_free(&ot), MPI_Type_free(&rt);
            continue;
        }
        for (int turn = 0; turn < t_size; turn++) {
            /* Process `turn` is the origin, its right neighbour the target. */
            int o = turn, t = (turn + 1) % t_size;
            const MPI_Aint td = t_disp(&tw, t, MIDDLE);
            fill(init, 1000 * c + t);
            memcpy(base, init, AREA);
            fill(origin, 77 * c + o);
            memset(result, 0x33, AREA);
            MPI_Barrier(MPI_COMM_WORLD);
            int rc_call = MPI_SUCCESS;
            if (t_rank == o) {
                MPI_Win_lock(MPI_LOCK_EXCLUSIVE, t, 0, win);
                switch (kind) {
                case OP_PUT:
                    rc_call = MPI_Put((char *)origin + MIDDLE, oc, ot, t, td, tc, tt, win);
                    break;
                case OP_GET:
                    rc_call = MPI_Get((char *)result + MIDDLE, oc, ot, t, td, tc, tt, win);
                    break;
                case OP_ACC:
                    rc_call = MPI_Accumulate((char *)origin + MIDDLE, oc, ot, t, td, tc, tt,
                                             ops[opi], win);
                    break;
                case OP_GACC:
                    rc_call = MPI_Get_accumulate((char *)origin + MIDDLE, oc, ot,
                                                 (char *)result + MIDDLE, rc, rt, t, td, tc,
                                                 tt, ops[opi], win);
                    break;
                }
                MPI_Win_unlock(t, win);
            }
            MPI_Barrier(MPI_COMM_WORLD);
            char what[1700];
            snprintf(what, sizeof what, "seed %llu case %d (%s window): %s%s%s, target %d x %s, "
                     "origin %d x %s%s%s", (unsigned long long)seed, c, flavor_name[flavor],
                     opname[kind], kind >= OP_ACC ? " " : "",
                     kind >= OP_ACC ? op_names[opi] : "", tc, tdesc, oc, odesc,
                     kind == OP_GACC ? ", result " : "", kind == OP_GACC ? rdesc : "");
            if (t_rank == o)
                CHECK(rc_call == MPI_SUCCESS, "%s: the call failed (%d)", what, rc_call);
            if (t_rank == t) {
                /* The target's window against the host MPI's image. */
                memcpy(want, init, AREA);
                fill(src_all, 77 * c + o);
                if (kind == OP_PUT)
                    host_image((char *)want, tt, tc, (char *)src_all, ot, oc, tn, MPI_REPLACE);
                else if (kind >= OP_ACC)
                    host_image((char *)want, tt, tc, (char *)src_all, ot, oc, tn, ops[opi]);
                int bad = first_difference(base, want);
                CHECK(bad < 0, "%s: target int %d is %d, the host MPI says %d", what,
                      bad - MIDDLE / 4, bad < 0 ? 0 : base[bad], bad < 0 ? 0 : want[bad]);
            }
            if (t_rank == o && (kind == OP_GET || kind == OP_GACC)) {
                /* The fetched data against the host MPI's image of the
                 * target's memory before the operation. */
                memset(want_result, 0x33, AREA);
                fill(init, 1000 * c + t);
                if (kind == OP_GET)
                    host_image((char *)want_result, ot, oc, (char *)init, tt, tc, tn, MPI_REPLACE);
                else
                    host_image((char *)want_result, rt, rc, (char *)init, tt, tc, tn, MPI_REPLACE);
                int bad = first_difference(result, want_result);
                CHECK(bad < 0, "%s: fetched int %d is %d, the host MPI says %d", what,
                      bad - MIDDLE / 4, bad < 0 ? 0 : result[bad], bad < 0 ? 0 : want_result[bad]);
            }
        }
        done++;
        MPI_Type_free(&tt), MPI_Type_free(&ot), MPI_Type_free(&rt);
    }
    if (t_rank == 0)
        printf("test_dtype_random: seed %llu, %d cases run, %d drawn types overlapped or "
               "did not fit\n", (unsigned long long)seed, done, skipped);
    CHECK(done >= cases / 4, "only %d of %d cases were usable", done, cases);
    if (cur_flavor >= 0)
        t_win_free(&tw);
    free(init), free(origin), free(result), free(want), free(want_result), free(src_all);
    return t_finish("test_dtype_random");
}
