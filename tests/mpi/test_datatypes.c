/* Derived datatypes on the origin and target sides of put, get and
 * accumulate. The expected bytes come from the host MPI's own pack/unpack:
 * put(o, ot) into (t, tt) must equal unpack(pack(o, ot), tt). */
#include "common.h"

#include "onesided.h"

enum { NT = 13, AREA = 4096 };
static MPI_Datatype types[NT];
static const char *names[NT];
static int counts[NT];

static void make_types(void)
{
    int n = 0;
    MPI_Datatype t, s;
#define ADD(name, dt, cnt) do { names[n] = name; types[n] = dt; counts[n] = cnt; MPI_Type_commit(&types[n]); n++; } while (0)
    MPI_Type_contiguous(6, MPI_INT, &t); ADD("contiguous", t, 2);
    MPI_Type_vector(3, 2, 5, MPI_INT, &t); ADD("vector", t, 2);
    MPI_Type_create_hvector(3, 1, 12, MPI_INT, &t); ADD("hvector", t, 3);
    { int bl[3] = { 2, 1, 3 }, d[3] = { 7, 0, 12 }; MPI_Type_indexed(3, bl, d, MPI_INT, &t); ADD("indexed", t, 2); }
    { int bl[2] = { 1, 2 }; MPI_Aint d[2] = { 20, 4 }; MPI_Type_create_hindexed(2, bl, d, MPI_INT, &t); ADD("hindexed", t, 3); }
    { int d[3] = { 9, 1, 5 }; MPI_Type_create_indexed_block(3, 2, d, MPI_INT, &t); ADD("indexed_block", t, 2); }
    { MPI_Aint d[2] = { 32, 0 }; MPI_Type_create_hindexed_block(2, 3, d, MPI_INT, &t); ADD("hindexed_block", t, 2); }
    { int bl[2] = { 2, 1 }; MPI_Aint d[2] = { 0, 16 }; MPI_Datatype ty[2] = { MPI_INT, MPI_INT };
      MPI_Type_create_struct(2, bl, d, ty, &t); ADD("struct", t, 3); }
    { int sz[2] = { 6, 7 }, sub[2] = { 3, 2 }, st[2] = { 2, 4 };
      MPI_Type_create_subarray(2, sz, sub, st, MPI_ORDER_C, MPI_INT, &t); ADD("subarray_c", t, 1); }
    { int sz[3] = { 4, 3, 5 }, sub[3] = { 2, 2, 3 }, st[3] = { 1, 0, 2 };
      MPI_Type_create_subarray(3, sz, sub, st, MPI_ORDER_FORTRAN, MPI_INT, &t); ADD("subarray_f", t, 1); }
    MPI_Type_vector(2, 1, 3, MPI_INT, &s);
    MPI_Type_create_resized(s, 0, 8, &t); MPI_Type_free(&s); ADD("resized", t, 5);
    { /* nested: contiguous of a vector of a resized struct, then dup */
      MPI_Datatype r, v, c;
      int bl[1] = { 1 }; MPI_Aint d[1] = { 4 }; MPI_Datatype ty[1] = { MPI_INT };
      MPI_Type_create_struct(1, bl, d, ty, &s);
      MPI_Type_create_resized(s, 0, 12, &r);
      MPI_Type_vector(2, 2, 3, r, &v);
      MPI_Type_contiguous(2, v, &c);
      MPI_Type_dup(c, &t);
      MPI_Type_free(&s); MPI_Type_free(&r); MPI_Type_free(&v); MPI_Type_free(&c);
      ADD("nested", t, 1); }
    { /* darray: rank 1 of a 2x2 grid, rows cyclic(2), columns block, of an 8x6 int array */
      int gs[2] = { 8, 6 }, dist[2] = { MPI_DISTRIBUTE_CYCLIC, MPI_DISTRIBUTE_BLOCK },
          darg[2] = { 2, MPI_DISTRIBUTE_DFLT_DARG }, ps[2] = { 2, 2 };
      MPI_Type_create_darray(4, 1, 2, gs, dist, darg, ps, MPI_ORDER_C, MPI_INT, &t);
      ADD("darray", t, 1); }
}

static int type_ints(int i)
{
    int size;
    MPI_Type_size(types[i], &size);
    return size / 4 * counts[i];
}

/* Expected image: unpack(pack(src, st x sc), dt x dc) over `base`, with an
 * optional SUM against what `base` held. */
static void expected(char *base, const char *src, int si, int di, int sum)
{
    int ssize, pos = 0, n = type_ints(si);
    MPI_Pack_size(counts[si], types[si], MPI_COMM_WORLD, &ssize);
    char *packed = malloc((size_t)ssize), *cur = malloc((size_t)ssize);
    MPI_Pack(src, counts[si], types[si], packed, ssize, &pos, MPI_COMM_WORLD);
    if (sum) {
        int p2 = 0;
        MPI_Pack(base, counts[di], types[di], cur, ssize, &p2, MPI_COMM_WORLD);
        MPI_Reduce_local(packed, cur, n, MPI_INT, MPI_SUM);
        memcpy(packed, cur, (size_t)ssize);
    }
    pos = 0;
    MPI_Unpack(packed, ssize, &pos, base, counts[di], types[di], MPI_COMM_WORLD);
    free(packed);
    free(cur);
}

static void fill(int *p, int n, int seed)
{
    for (int i = 0; i < n; i++)
        p[i] = seed * 100000 + i;
}

static void run(int flavor)
{
    t_win_t t = t_win_make(flavor, AREA, MPI_INFO_NULL);
    const int right = (t_rank + 1) % t_size, left = (t_rank + t_size - 1) % t_size;
    int *origin = malloc(AREA), *want = malloc(AREA), *tgt_init = malloc(AREA);
    for (int oi = 0; oi < NT; oi++) {
        for (int ti = 0; ti < NT; ti++) {
            if (type_ints(oi) != type_ints(ti))
                continue; /* signatures must match */
            for (int kind = 0; kind < 3; kind++) { /* put, accumulate, get */
                fill(tgt_init, AREA / 4, t_rank + 7 * kind);
                memcpy(t.base, tgt_init, AREA);
                fill(origin, AREA / 4, 1000 + t_rank);
                MPI_Barrier(MPI_COMM_WORLD);
                MPI_Win_lock(MPI_LOCK_EXCLUSIVE, right, 0, t.win);
                if (kind == 0)
                    MPI_Put(origin, counts[oi], types[oi], right, t_disp(&t, right, 0), counts[ti], types[ti], t.win);
                else if (kind == 1)
                    MPI_Accumulate(origin, counts[oi], types[oi], right, t_disp(&t, right, 0), counts[ti], types[ti], MPI_SUM, t.win);
                else
                    MPI_Get(origin, counts[oi], types[oi], right, t_disp(&t, right, 0), counts[ti], types[ti], t.win);
                MPI_Win_unlock(right, t.win);
                MPI_Barrier(MPI_COMM_WORLD);
                if (kind < 2) {
                    /* I am the target of `left`: rebuild its origin buffer. */
                    int *lorigin = malloc(AREA);
                    fill(lorigin, AREA / 4, 1000 + left);
                    memcpy(want, tgt_init, AREA);
                    expected((char *)want, (char *)lorigin, oi, ti, kind == 1);
                    free(lorigin);
                    CHECK(!memcmp(want, t.base, AREA), "%s: %s %s -> %s", flavor_name[flavor],
                          kind ? "accumulate" : "put", names[oi], names[ti]);
                } else {
                    int *rtarget = malloc(AREA), *mine = malloc(AREA);
                    fill(rtarget, AREA / 4, right + 7 * kind);
                    fill(mine, AREA / 4, 1000 + t_rank);
                    expected((char *)mine, (char *)rtarget, ti, oi, 0);
                    CHECK(!memcmp(mine, origin, AREA), "%s: get %s <- %s", flavor_name[flavor],
                          names[oi], names[ti]);
                    free(rtarget);
                    free(mine);
                }
            }
        }
    }
    free(origin);
    free(want);
    free(tgt_init);
    t_win_free(&t);
}

/* A datatype freed right after a fence-epoch operation stays valid until the fence. */
static void freed_before_fence(void)
{
    /* Queued: inside a node only the paper's queued fence design defers them. */
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "onesided_fence_defer", "1");
    t_win_t t = t_win_make(F_ALLOCATE, 256, info);
    MPI_Info_free(&info);
    const int right = (t_rank + 1) % t_size, left = (t_rank + t_size - 1) % t_size;
    MPI_Datatype v;
    int src[8];
    for (int i = 0; i < 8; i++)
        src[i] = t_rank * 10 + i;
    MPI_Type_vector(4, 1, 2, MPI_INT, &v);
    MPI_Type_commit(&v);
    MPI_Win_fence(MPI_MODE_NOPRECEDE, t.win); /* operations queue to the closing fence */
    MPI_Put(src, 1, v, right, 0, 1, v, t.win);
    MPI_Type_free(&v);
    MPI_Win_fence(MPI_MODE_NOSUCCEED, t.win);
    const int *w = (const int *)t.base;
    CHECK(w[0] == left * 10 && w[2] == left * 10 + 2 && w[6] == left * 10 + 6 && w[1] == 0,
          "vector put queued across MPI_Type_free: %d %d %d %d", w[0], w[1], w[2], w[6]);
    t_win_free(&t);
}

/* Types created, used and freed in a loop are flattened once per layout
 * (dtype_reused); a type of the same constructor arguments over a
 * different element type, or over a child of a different layout, must not
 * be taken for it. */
static void layout_cache(void)
{
    enum { ROUNDS = 20, NI = 64 };
    t_win_t t = t_win_make(F_ALLOCATE, NI * 8 * 3, MPI_INFO_NULL);
    const int right = (t_rank + 1) % t_size;
    int src[NI];
    for (int i = 0; i < NI; i++)
        src[i] = 1;
    for (int r = 0; r < ROUNDS; r++) {
        MPI_Datatype v;
        MPI_Type_vector(4, 1, 3, MPI_INT, &v);
        MPI_Type_commit(&v);
        MPI_Win_lock(MPI_LOCK_SHARED, right, 0, t.win);
        MPI_Accumulate(src, 1, v, right, 0, 1, v, MPI_SUM, t.win);
        MPI_Win_unlock(right, t.win);
        MPI_Type_free(&v);
    }
    /* Same vector arguments over MPI_FLOAT: a float sum, not an int one. */
    float fsrc[4] = { 0.5f, 0.5f, 0.5f, 0.5f };
    MPI_Datatype fv;
    MPI_Type_vector(4, 1, 3, MPI_FLOAT, &fv);
    MPI_Type_commit(&fv);
    MPI_Win_lock(MPI_LOCK_SHARED, right, 0, t.win);
    MPI_Accumulate(fsrc, 4, MPI_FLOAT, right, 256, 1, fv, MPI_SUM, t.win);
    MPI_Win_unlock(right, t.win);
    MPI_Type_free(&fv);
    /* Same outer arguments over children of different extents. */
    for (int ext = 8; ext <= 12; ext += 4) {
        MPI_Datatype child, outer;
        MPI_Type_create_resized(MPI_INT, 0, ext, &child);
        MPI_Type_vector(3, 1, 2, child, &outer);
        MPI_Type_commit(&outer);
        int one[3] = { ext, ext, ext };
        MPI_Win_lock(MPI_LOCK_SHARED, right, 0, t.win);
        MPI_Accumulate(one, 3, MPI_INT, right, 512, 1, outer, MPI_SUM, t.win);
        MPI_Win_unlock(right, t.win);
        MPI_Type_free(&outer);
        MPI_Type_free(&child);
    }
    onesided_win_stats_t st;
    onesided_win_get_stats(t.win, &st);
    MPI_Barrier(MPI_COMM_WORLD);
    const int *w = (const int *)t.base;
    int ok = 1;
    for (int i = 0; i < 12; i++)
        ok &= w[i] == (i % 3 ? 0 : ROUNDS);
    CHECK(ok, "layout cache: vector accumulated %d rounds: %d %d %d %d", ROUNDS, w[0], w[1], w[3],
          w[9]);
    const float *f = (const float *)(t.base + 256);
    CHECK(f[0] == 0.5f && f[3] == 0.5f && f[1] == 0.0f,
          "layout cache: float vector after an int one: %g %g %g", f[0], f[3], f[1]);
    const int *o = (const int *)(t.base + 512); /* strides of 16 and 24 bytes */
    int want[16] = { 0 };
    for (int k = 0; k < 3; k++) {
        want[k * 4] += 8;
        want[k * 6] += 12;
    }
    ok = 1;
    for (int i = 0; i < 16; i++)
        ok &= o[i] == want[i];
    CHECK(ok, "layout cache: vectors over children of extent 8 and 12: %d %d %d %d", o[0], o[4],
          o[6], o[12]);
    CHECK(st.counter[ONESIDED_STAT_DTYPE_REUSED] >= ROUNDS - 1,
          "layout cache: %llu of %d identical vectors reused, %llu decoded",
          (unsigned long long)st.counter[ONESIDED_STAT_DTYPE_REUSED], ROUNDS,
          (unsigned long long)st.counter[ONESIDED_STAT_DTYPE_DECODED]);
    t_win_free(&t);
}

/* Types of more runs than one CMA system call takes (1024 iovecs): memory
 * reached by process_vm_readv/writev is moved in several batches, for put,
 * get and accumulate alike; mapped memory is the control. */
static void many_runs(int flavor)
{
    enum { N = 2500 }; /* every other int: 2500 runs */
    t_win_t t = t_win_make(flavor, N * 2 * sizeof(int), MPI_INFO_NULL);
    const int right = (t_rank + 1) % t_size, left = (t_rank + t_size - 1) % t_size;
    int *disp = malloc(sizeof(int) * N), *src = malloc(sizeof(int) * N),
        *back = malloc(sizeof(int) * N);
    for (int i = 0; i < N; i++) {
        disp[i] = 2 * i;
        src[i] = t_rank * 100000 + i;
    }
    MPI_Datatype tt;
    MPI_Type_create_indexed_block(N, 1, disp, MPI_INT, &tt);
    MPI_Type_commit(&tt);
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, right, 0, t.win);
    MPI_Put(src, N, MPI_INT, right, t_disp(&t, right, 0), 1, tt, t.win);
    MPI_Win_unlock(right, t.win);
    MPI_Win_lock(MPI_LOCK_SHARED, right, 0, t.win);
    MPI_Accumulate(src, N, MPI_INT, right, t_disp(&t, right, 0), 1, tt, MPI_SUM, t.win);
    MPI_Win_unlock(right, t.win);
    MPI_Barrier(MPI_COMM_WORLD);
    const int *w = (const int *)t.base;
    int ok = 1;
    for (int i = 0; i < N && ok; i++)
        ok = w[2 * i] == 2 * (left * 100000 + i) && w[2 * i + 1] == 0;
    CHECK(ok, "%s: put and accumulate of %d runs", flavor_name[flavor], N);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_lock(MPI_LOCK_SHARED, right, 0, t.win);
    MPI_Get(back, N, MPI_INT, right, t_disp(&t, right, 0), 1, tt, t.win);
    MPI_Win_unlock(right, t.win);
    ok = 1;
    for (int i = 0; i < N && ok; i++)
        ok = back[i] == 2 * (t_rank * 100000 + i);
    CHECK(ok, "%s: get of %d runs", flavor_name[flavor], N);
    MPI_Type_free(&tt);
    free(disp);
    free(src);
    free(back);
    t_win_free(&t);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    make_types();
    T_FOR_EACH_FLAVOR(f)
        run(f);
    freed_before_fence();
    layout_cache();
    many_runs(F_ALLOCATE);
    many_runs(F_CREATE);
    for (int i = 0; i < NT; i++)
        MPI_Type_free(&types[i]);
    return t_finish("test_datatypes");
}
