/* Window objects: flavors, attributes, shared queries, info, names, groups,
 * sub-communicators, dynamic attach/detach, many windows at once. */
#include "common.h"
#include "../maps.h"
#include "onesided.h"

#include <sys/mman.h>
#include <sys/sysinfo.h>
#include <unistd.h>

static void attributes(void)
{
    static const int flavors[F_COUNT] = { MPI_WIN_FLAVOR_ALLOCATE, MPI_WIN_FLAVOR_SHARED,
                                          MPI_WIN_FLAVOR_CREATE, MPI_WIN_FLAVOR_CREATE,
                                          MPI_WIN_FLAVOR_DYNAMIC, MPI_WIN_FLAVOR_CREATE };
    T_FOR_EACH_FLAVOR(f) {
        t_win_t t = t_win_make(f, 96, MPI_INFO_NULL);
        void *base;
        MPI_Aint *size;
        int *du, *flavor, *model, flag;
        MPI_Win_get_attr(t.win, MPI_WIN_BASE, &base, &flag);
        CHECK(flag && (f == F_DYNAMIC ? base == NULL : base == t.base), "%s: MPI_WIN_BASE", flavor_name[f]);
        MPI_Win_get_attr(t.win, MPI_WIN_SIZE, &size, &flag);
        CHECK(flag && *size == (f == F_DYNAMIC ? 0 : 96), "%s: MPI_WIN_SIZE %ld", flavor_name[f], (long)*size);
        MPI_Win_get_attr(t.win, MPI_WIN_DISP_UNIT, &du, &flag);
        CHECK(flag && *du == 1, "%s: MPI_WIN_DISP_UNIT", flavor_name[f]);
        MPI_Win_get_attr(t.win, MPI_WIN_CREATE_FLAVOR, &flavor, &flag);
        CHECK(flag && *flavor == flavors[f], "%s: MPI_WIN_CREATE_FLAVOR %d", flavor_name[f], *flavor);
        MPI_Win_get_attr(t.win, MPI_WIN_MODEL, &model, &flag);
        CHECK(flag && *model == MPI_WIN_UNIFIED, "%s: MPI_WIN_MODEL", flavor_name[f]);

        /* Name, group, user attributes and info go through the same handle. */
        char name[MPI_MAX_OBJECT_NAME];
        int len;
        MPI_Win_set_name(t.win, "test window");
        MPI_Win_get_name(t.win, name, &len);
        CHECK(!strcmp(name, "test window"), "%s: name '%s'", flavor_name[f], name);
        MPI_Group g, wg;
        int cmp;
        MPI_Win_get_group(t.win, &g);
        MPI_Comm_group(MPI_COMM_WORLD, &wg);
        MPI_Group_compare(g, wg, &cmp);
        CHECK(cmp == MPI_IDENT, "%s: group", flavor_name[f]);
        MPI_Group_free(&g);
        MPI_Group_free(&wg);
        int key, val = 77, *got;
        MPI_Win_create_keyval(MPI_WIN_NULL_COPY_FN, MPI_WIN_NULL_DELETE_FN, &key, NULL);
        MPI_Win_set_attr(t.win, key, &val);
        MPI_Win_get_attr(t.win, key, &got, &flag);
        CHECK(flag && *got == 77, "%s: user attribute", flavor_name[f]);
        MPI_Win_delete_attr(t.win, key);
        MPI_Win_free_keyval(&key);
        t_win_free(&t);
        CHECK(t.win == MPI_WIN_NULL, "%s: MPI_Win_free sets MPI_WIN_NULL", flavor_name[f]);
    }
}

static void shared_memory(void)
{
    /* Rank r contributes r+1 ints (rank 0 with zero, to test the empty case). */
    MPI_Aint mine = t_rank ? (MPI_Aint)(t_rank * sizeof(int)) : 0;
    int *base;
    MPI_Win win;
    MPI_Win_allocate_shared(mine, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    MPI_Aint sz;
    int du;
    int *p, *first;
    MPI_Win_shared_query(win, MPI_PROC_NULL, &sz, &du, &first);
    CHECK(sz == (t_size > 1 ? (MPI_Aint)sizeof(int) : 0) && du == (int)sizeof(int),
          "PROC_NULL query gives the first non-empty segment (%ld)", (long)sz);
    int contiguous = 1;
    char *expect = NULL;
    for (int r = 0; r < t_size; r++) {
        MPI_Win_shared_query(win, r, &sz, &du, &p);
        if (r == 1)
            expect = (char *)p;
        if (r > 1)
            contiguous &= (char *)p == expect;
        expect = (char *)p + sz;
        CHECK(sz == (MPI_Aint)(r * sizeof(int)), "size of rank %d: %ld", r, (long)sz);
        /* A process without memory has a NULL base, as from MPICH. */
        CHECK(r || p == NULL, "shared_query of rank 0, which has no memory, gave %p", (void *)p);
    }
    CHECK(t_rank || base == NULL, "MPI_Win_allocate_shared of 0 bytes returned %p", (void *)base);
    CHECK(contiguous, "allocate_shared memory is contiguous across ranks");
    /* Direct stores into the neighbour's memory, made visible by sync + barrier. */
    int right = (t_rank + 1) % t_size;
    MPI_Win_lock_all(0, win);
    MPI_Win_shared_query(win, right, &sz, &du, &p);
    for (int i = 0; i < right; i++)
        p[i] = 1000 * t_rank + i;
    MPI_Win_sync(win);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_sync(win);
    int ok = 1, left = (t_rank + t_size - 1) % t_size;
    for (int i = 0; i < t_rank; i++)
        ok &= base[i] == 1000 * left + i;
    CHECK(ok, "load/store through shared_query pointers");
    MPI_Win_unlock_all(win);
    MPI_Win_free(&win);

    /* Noncontiguous, the last process without memory: NULL for it too. */
    MPI_Info nc;
    MPI_Info_create(&nc);
    MPI_Info_set(nc, "alloc_shared_noncontig", "true");
    mine = t_rank == t_size - 1 ? 0 : 64;
    MPI_Win_allocate_shared(mine, 1, nc, MPI_COMM_WORLD, &base, &win);
    MPI_Info_free(&nc);
    for (int r = 0; r < t_size; r++) {
        MPI_Win_shared_query(win, r, &sz, &du, &p);
        bool empty = r == t_size - 1;
        CHECK(sz == (empty ? 0 : 64) && (empty ? p == NULL : p != NULL),
              "noncontig: rank %d's segment: size %ld at %p", r, (long)sz, (void *)p);
    }
    MPI_Win_free(&win);

    /* Non-contiguous: each rank's piece stands on its own pages. */
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "alloc_shared_noncontig", "true");
    MPI_Win_allocate_shared(24, 8, info, MPI_COMM_WORLD, &base, &win);
    MPI_Win_shared_query(win, t_rank, &sz, &du, &p);
    CHECK(p == base && sz == 24 && du == 8 && ((uintptr_t)base & 4095) == 0, "noncontig piece");
    MPI_Info used;
    char v[64];
    int flag;
    MPI_Win_get_info(win, &used);
    MPI_Info_get(used, "alloc_shared_noncontig", 63, v, &flag);
    CHECK(flag && !strcmp(v, "true"), "info reports alloc_shared_noncontig");
    MPI_Info_free(&used);
    MPI_Info_free(&info);
    MPI_Win_free(&win);
}

/* MPI_Win_get_info reports every key as the host MPI does for the same
 * window: a host-MPI window made with PMPI_* beside ours, the same hints,
 * every flavor, before and after MPI_Win_set_info, over MPI_COMM_WORLD
 * (handles that served earlier windows) and over a new duplicate for each
 * window (a new handle, which onesided leaves with the host's defaults).
 * onesided's own keys (onesided_*) come on top. */
static int info_keys_differ(MPI_Info ours, MPI_Info host, const char *what)
{
    int n_ours, n_host, differ = 0, flag;
    char key[MPI_MAX_INFO_KEY + 1], a[MPI_MAX_INFO_VAL + 1], b[MPI_MAX_INFO_VAL + 1];
    MPI_Info_get_nkeys(host, &n_host);
    for (int i = 0; i < n_host; i++) {
        MPI_Info_get_nthkey(host, i, key);
        MPI_Info_get(host, key, MPI_MAX_INFO_VAL, b, &flag);
        MPI_Info_get(ours, key, MPI_MAX_INFO_VAL, a, &flag);
#ifdef OMPI_MAJOR_VERSION
        /* Open MPI's osc/sm reports blocking_fence from shared state that
         * only the first process writes, without waiting for it: elsewhere
         * its own value is a race. */
        if (flag && t_rank != 0 && !strcmp(key, "blocking_fence"))
            continue;
#endif
        if (!flag || strcmp(a, b)) {
            differ++;
            fprintf(stderr, "[rank %d] %s: info %s is %s, the host MPI says %s\n", t_rank, what,
                    key, flag ? a : "(absent)", b);
        }
    }
    MPI_Info_get_nkeys(ours, &n_ours);
    for (int i = 0; i < n_ours; i++) {
        MPI_Info_get_nthkey(ours, i, key);
        MPI_Info_get(host, key, MPI_MAX_INFO_VAL, b, &flag);
        if (!flag && strncmp(key, "onesided_", 9)) {
            differ++;
            fprintf(stderr, "[rank %d] %s: info %s is not the host MPI's\n", t_rank, what, key);
        }
    }
    return differ;
}

static void info_like_host(bool fresh)
{
    static char buf[2][256];
    for (int given = 0; given < 2; given++) {
        MPI_Info in = MPI_INFO_NULL;
        if (given) {
            MPI_Info_create(&in);
            MPI_Info_set(in, "no_locks", "true");
            MPI_Info_set(in, "accumulate_ops", "same_op");
            MPI_Info_set(in, "alloc_shared_noncontig", "true");
            MPI_Info_set(in, "same_size", "true");
            MPI_Info_set(in, "not_a_standard_key", "1");
        }
        for (int f = 0; f < 4; f++) {
            static const char *const fname[] = { "allocate", "allocate_shared", "create",
                                                 "dynamic" };
            MPI_Win ours, host;
            MPI_Comm comm = MPI_COMM_WORLD;
            void *b1, *b2;
            int rc = MPI_SUCCESS;
            if (f == 1 && t_hosts > 1)
                continue; /* no memory is shared across hosts */
            if (fresh)
                MPI_Comm_dup(MPI_COMM_WORLD, &comm);
            /* Open MPI 4.1 makes no window at all across hosts over TCP (no
             * osc component takes it); there is nothing to compare with. */
            MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
            switch (f) {
            case 0:
                MPI_Win_allocate(64, 1, in, comm, &b1, &ours);
                rc = PMPI_Win_allocate(64, 1, in, comm, &b2, &host);
                break;
            case 1:
                MPI_Win_allocate_shared(64, 1, in, comm, &b1, &ours);
                rc = PMPI_Win_allocate_shared(64, 1, in, comm, &b2, &host);
                break;
            case 2:
                MPI_Win_create(buf[0], 64, 1, in, comm, &ours);
                rc = PMPI_Win_create(buf[1], 64, 1, in, comm, &host);
                break;
            case 3:
                MPI_Win_create_dynamic(in, comm, &ours);
                rc = PMPI_Win_create_dynamic(in, comm, &host);
                break;
            }
            MPI_Comm_set_errhandler(comm, MPI_ERRORS_ARE_FATAL);
            if (rc != MPI_SUCCESS) {
                CHECK(t_hosts > 1, "the host MPI could not make a window on one host");
                MPI_Win_free(&ours);
                if (fresh)
                    MPI_Comm_free(&comm);
                continue;
            }
            char what[96];
            for (int step = 0; step < 2; step++) {
                if (step) {
                    MPI_Info upd;
                    MPI_Info_create(&upd);
                    MPI_Info_set(upd, "no_locks", "false");
                    MPI_Info_set(upd, "accumulate_ordering", "none");
                    MPI_Win_set_info(ours, upd);
                    PMPI_Win_set_info(host, upd);
                    MPI_Info_free(&upd);
                }
                MPI_Info a, b;
                MPI_Win_get_info(ours, &a);
                PMPI_Win_get_info(host, &b);
                snprintf(what, sizeof what, "%s%s%s%s", fname[f], given ? " with hints" : "",
                         step ? " after MPI_Win_set_info" : "", fresh ? " (new handle)" : "");
                CHECK(!info_keys_differ(a, b, what), "%s: MPI_Win_get_info differs from the "
                      "host MPI's", what);
                MPI_Info_free(&a);
                MPI_Info_free(&b);
            }
            MPI_Win_free(&ours);
            PMPI_Win_free(&host);
            if (fresh)
                MPI_Comm_free(&comm);
        }
        if (in != MPI_INFO_NULL)
            MPI_Info_free(&in);
    }
}

/* A window's creation gives the host handle its hints only where the
 * handle holds others (MPI_Win_set_info on it, 2-2.5 us on MPICH 5.0.2):
 * a new handle made for MPI_Win_allocate holds them already, and Open
 * MPI's handle gets only a program's own, its hints being read nowhere
 * (win_info.c). What MPI_Win_get_info reports is info_like_host's check. */
static void handle_hints(void)
{
    static char buf[64];
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm); /* a new shell, hence a new handle */
    for (int step = 0; step < 4; step++) {
        static const char *const what[] = { "MPI_Win_allocate over a new handle",
                                            "MPI_Win_allocate over its handle again",
                                            "MPI_Win_create over that handle",
                                            "MPI_Win_allocate with hints" };
        MPI_Info hints = MPI_INFO_NULL;
        MPI_Win win;
        void *base;
        if (step == 3) {
            MPI_Info_create(&hints);
            MPI_Info_set(hints, "no_locks", "false");
        }
        if (step == 2)
            MPI_Win_create(buf, sizeof buf, 1, MPI_INFO_NULL, comm, &win);
        else
            MPI_Win_allocate(64, 1, hints, comm, &base, &win);
        onesided_win_stats_t st;
        CHECK(onesided_win_get_stats(win, &st) == MPI_SUCCESS, "stats");
        const uint64_t set = st.counter[ONESIDED_STAT_HANDLE_HINTS_SET];
        /* MPICH's handle held alloc_shm at step 2, unless that window took
         * a shell of another kind (where the kernel refuses CMA). */
#ifdef OMPI_MAJOR_VERSION
        const bool ok = set == (step == 3);
#else
        const bool ok = step == 2 ? set <= 1 : set == (step == 3);
#endif
        CHECK(ok, "%s: the handle's hints were set %llu times", what[step],
              (unsigned long long)set);
        MPI_Win_free(&win);
        if (hints != MPI_INFO_NULL)
            MPI_Info_free(&hints);
    }
    MPI_Comm_free(&comm);
}

static void displacement_units_and_info(void)
{
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "onesided_fence_defer", "true");
    MPI_Info_set(info, "no_locks", "false");
    double *base;
    MPI_Win win;
    MPI_Win_allocate(8 * sizeof(double), sizeof(double), info, MPI_COMM_WORLD, &base, &win);
    MPI_Info_free(&info);
    for (int i = 0; i < 8; i++)
        base[i] = -1;
    MPI_Info used;
    char v[64];
    int flag;
    MPI_Win_get_info(win, &used);
    MPI_Info_get(used, "onesided_fence_defer", 63, v, &flag);
    CHECK(flag && !strcmp(v, "1"), "our info key reads back");
#if !defined(OMPI_MAJOR_VERSION) || OMPI_MAJOR_VERSION < 5
    /* Open MPI 5's osc/sm does not report no_locks (win_info.c); the
     * comparison with its own windows (info_like_host) checks it there. */
    MPI_Info_get(used, "no_locks", 63, v, &flag);
    CHECK(flag && !strcmp(v, "false"), "standard key reads back");
#endif
    MPI_Info_free(&used);
    /* The fence choice is agreed at creation and stays; standard hints change. */
    MPI_Info_create(&info);
    MPI_Info_set(info, "onesided_fence_defer", "0");
    MPI_Info_set(info, "accumulate_ordering", "none");
    MPI_Win_set_info(win, info);
    MPI_Info_free(&info);
    MPI_Win_get_info(win, &used);
    MPI_Info_get(used, "onesided_fence_defer", 63, v, &flag);
    CHECK(flag && !strcmp(v, "1"), "onesided_fence_defer is fixed at creation, reads %s", v);
#ifdef MPICH_VERSION
    /* As MPICH's own windows do; Open MPI's report only their creation
     * hints, which info_like_host checks onesided follows there. */
    MPI_Info_get(used, "accumulate_ordering", 63, v, &flag);
    CHECK(flag && !strcmp(v, "none"), "MPI_Win_set_info changes a standard hint");
#endif
    MPI_Info_free(&used);

    int right = (t_rank + 1) % t_size;
    double x = t_rank + 0.25;
    MPI_Win_fence(0, win);
    MPI_Put(&x, 1, MPI_DOUBLE, right, 5, 1, MPI_DOUBLE, win); /* element 5, not byte 5 */
    MPI_Win_fence(0, win);
    int left = (t_rank + t_size - 1) % t_size;
    CHECK(base[5] == left + 0.25 && base[4] == -1 && base[6] == -1, "displacement unit 8");
    MPI_Win_fence(MPI_MODE_NOSUCCEED, win);
    MPI_Win_free(&win);
}

static void subcommunicator(void)
{
    /* Windows over half the processes use ranks of that communicator. */
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, t_rank % 2, -t_rank, &half);
    int hr, hs;
    MPI_Comm_rank(half, &hr);
    MPI_Comm_size(half, &hs);
    int *base;
    MPI_Win win;
    MPI_Win_allocate(sizeof(int), sizeof(int), MPI_INFO_NULL, half, &base, &win);
    *base = -1;
    MPI_Win_fence(0, win);
    int v = t_rank;
    MPI_Put(&v, 1, MPI_INT, (hr + 1) % hs, 0, 1, MPI_INT, win);
    MPI_Win_fence(MPI_MODE_NOSUCCEED, win);
    int *all = malloc(sizeof(int) * (size_t)hs), left_world;
    MPI_Allgather(&t_rank, 1, MPI_INT, all, 1, MPI_INT, half);
    left_world = all[(hr + hs - 1) % hs];
    CHECK(*base == left_world, "sub-communicator window got %d, expected %d", *base, left_world);
    /* PSCW groups are translated from the communicator's group. */
    MPI_Group hg, peer;
    int target = (hr + 1) % hs, origin = (hr + hs - 1) % hs;
    MPI_Comm_group(half, &hg);
    MPI_Group_incl(hg, 1, &origin, &peer);
    MPI_Win_post(peer, 0, win);
    MPI_Group_free(&peer);
    MPI_Group_incl(hg, 1, &target, &peer);
    MPI_Win_start(peer, 0, win);
    v = t_rank + 100;
    MPI_Put(&v, 1, MPI_INT, target, 0, 1, MPI_INT, win);
    MPI_Win_complete(win);
    MPI_Win_wait(win);
    CHECK(*base == left_world + 100, "sub-communicator PSCW got %d", *base);
    MPI_Group_free(&peer);
    MPI_Group_free(&hg);
    free(all);
    MPI_Win_free(&win);
    MPI_Comm_free(&half);
}

static void dynamic_regions(void)
{
    MPI_Win win;
    MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
    enum { NR = 5 };
    long *regions[NR];
    MPI_Aint addr[NR], *all = malloc(sizeof(MPI_Aint) * NR * (size_t)t_size);
    for (int i = 0; i < NR; i++) {
        regions[i] = calloc(4 + i, sizeof(long));
        MPI_Win_attach(win, regions[i], (MPI_Aint)((4 + i) * sizeof(long)));
        MPI_Get_address(regions[i], &addr[i]);
    }
    MPI_Allgather(addr, NR, MPI_AINT, all, NR, MPI_AINT, MPI_COMM_WORLD);
    int right = (t_rank + 1) % t_size, left = (t_rank + t_size - 1) % t_size;
    MPI_Win_lock_all(0, win);
    for (int i = 0; i < NR; i++) {
        long v = 10 * t_rank + i;
        MPI_Put(&v, 1, MPI_LONG, right, all[right * NR + i] + (MPI_Aint)((3 + i) * sizeof(long)), 1, MPI_LONG, win);
    }
    /* Across the end of a region: an error, nothing written. */
    long two[2] = { 1, 2 };
    int rc = MPI_Put(two, 2, MPI_LONG, right, all[right * NR] + 3 * (MPI_Aint)sizeof(long), 2, MPI_LONG, win);
    int c;
    MPI_Error_class(rc, &c);
    CHECK(c == MPI_ERR_RMA_RANGE, "put across a region's end: class %d", c);
    MPI_Win_unlock_all(win);
    MPI_Barrier(MPI_COMM_WORLD);
    int ok = 1;
    for (int i = 0; i < NR; i++)
        ok &= regions[i][3 + i] == 10 * left + i;
    CHECK(ok, "puts into five attached regions");
    /* Detach two regions: accesses to them now fail, the rest still work. */
    MPI_Win_detach(win, regions[1]);
    MPI_Win_detach(win, regions[3]);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_lock_all(0, win);
    long v = 5;
    rc = MPI_Put(&v, 1, MPI_LONG, right, all[right * NR + 1], 1, MPI_LONG, win);
    MPI_Error_class(rc, &c);
    CHECK(c == MPI_ERR_RMA_RANGE, "put into detached memory: class %d", c);
    rc = MPI_Put(&v, 1, MPI_LONG, right, all[right * NR + 4], 1, MPI_LONG, win);
    CHECK(rc == MPI_SUCCESS, "put into a region still attached");
    MPI_Win_unlock_all(win);
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < NR; i++) {
        if (i != 1 && i != 3)
            MPI_Win_detach(win, regions[i]);
        free(regions[i]);
    }
    free(all);
    MPI_Win_free(&win);
}

static void many_windows(void)
{
    enum { NW = 12 };
    MPI_Win w[NW];
    int *b[NW];
    for (int i = 0; i < NW; i++) {
        MPI_Win_allocate(sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &b[i], &w[i]);
        *b[i] = -1;
    }
    MPI_Barrier(MPI_COMM_WORLD); /* nobody puts before every window is initialized */
    int right = (t_rank + 1) % t_size, left = (t_rank + t_size - 1) % t_size;
    for (int i = 0; i < NW; i++)
        MPI_Win_lock_all(0, w[i]);
    for (int i = 0; i < NW; i++) {
        int v = 100 * i + t_rank;
        MPI_Put(&v, 1, MPI_INT, right, 0, 1, MPI_INT, w[i]);
    }
    for (int i = NW - 1; i >= 0; i--)
        MPI_Win_unlock_all(w[i]);
    MPI_Barrier(MPI_COMM_WORLD);
    int ok = 1;
    for (int i = 0; i < NW; i++)
        ok &= *b[i] == 100 * i + left;
    CHECK(ok, "twelve windows kept apart");
    for (int i = 0; i < NW; i++)
        MPI_Win_free(&w[i]);
}

/* A freed window's shell serves the next window over the same communicator:
 * nothing of the old window may show through (name, error handler,
 * attributes, which are deleted with their callback at MPI_Win_free, lock
 * and PSCW state), over every kind of communicator, freed in between. */
static int deleted;
static int count_delete(MPI_Win win, int key, void *val, void *extra)
{
    (void)win, (void)key, (void)val, (void)extra;
    deleted++;
    return MPI_SUCCESS;
}

static void shell_reuse(void)
{
    int key;
    MPI_Win_create_keyval(MPI_WIN_NULL_COPY_FN, count_delete, &key, NULL);
    for (int kind = 0; kind < 5; kind++) {
        MPI_Comm comm = MPI_COMM_WORLD;
        if (kind == 1)
            MPI_Comm_dup(MPI_COMM_WORLD, &comm);
        else if (kind == 2)
            MPI_Comm_split(MPI_COMM_WORLD, 0, t_size - t_rank, &comm); /* reversed */
        else if (kind == 3)
            MPI_Comm_split(MPI_COMM_WORLD, t_rank % 2, t_rank, &comm);
        else if (kind == 4)
            comm = MPI_COMM_SELF;
        int rank, size;
        MPI_Comm_rank(comm, &rank);
        MPI_Comm_size(comm, &size);
        int right = (rank + 1) % size;
        for (int round = 0; round < 3; round++) {
            int *base;
            MPI_Win win;
            MPI_Win_allocate(64, sizeof(int), MPI_INFO_NULL, comm, &base, &win);
            char name[MPI_MAX_OBJECT_NAME];
            int len, flag;
            void *val;
            MPI_Errhandler eh;
            MPI_Win_get_name(win, name, &len);
            MPI_Win_get_attr(win, key, &val, &flag);
            MPI_Win_get_errhandler(win, &eh);
            /* A new window's name is the one the host gives its own windows:
             * none in MPICH, "rdma window N" in Open MPI's osc/rdma. */
#ifdef OMPI_MAJOR_VERSION
            bool host_name = !len || !strncmp(name, "rdma window ", 12);
#else
            bool host_name = !len;
#endif
            CHECK(host_name && !flag && eh == MPI_ERRORS_ARE_FATAL,
                  "comm kind %d round %d: a new window shows its predecessor's name '%s', "
                  "attribute %d or error handler", kind, round, name, flag);
            if (eh != MPI_ERRHANDLER_NULL && eh != MPI_ERRORS_ARE_FATAL)
                MPI_Errhandler_free(&eh);
            MPI_Win_set_name(win, "old");
            MPI_Win_set_attr(win, key, &deleted);
            MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
            for (int i = 0; i < 16; i++)
                base[i] = -1;
            /* fence, PSCW and lock state, each left idle as MPI requires */
            MPI_Win_fence(0, win);
            int v = 100 * round + rank;
            MPI_Put(&v, 1, MPI_INT, right, 0, 1, MPI_INT, win);
            MPI_Win_fence(0, win);
            MPI_Group g, peers;
            MPI_Win_get_group(win, &g);
            int both[2] = { (rank + size - 1) % size, right };
            MPI_Group_incl(g, size == 1 ? 1 : (both[0] == both[1] ? 1 : 2), both, &peers);
            MPI_Win_post(peers, 0, win);
            MPI_Win_start(peers, 0, win);
            MPI_Put(&v, 1, MPI_INT, right, 1, 1, MPI_INT, win);
            MPI_Win_complete(win);
            MPI_Win_wait(win);
            MPI_Win_lock(MPI_LOCK_EXCLUSIVE, right, 0, win);
            MPI_Accumulate(&v, 1, MPI_INT, right, 2, 1, MPI_INT, MPI_SUM, win);
            MPI_Win_unlock(right, win);
            MPI_Barrier(comm);
            int left = (rank + size - 1) % size, want = 100 * round + left;
            CHECK(base[0] == want && base[1] == want && base[2] == want - 1,
                  "comm kind %d round %d: %d %d %d, expected %d %d %d", kind, round, base[0],
                  base[1], base[2], want, want, want - 1);
            MPI_Group_free(&peers);
            MPI_Group_free(&g);
            int before = deleted;
            MPI_Win_free(&win);
            CHECK(deleted == before + 1, "comm kind %d: MPI_Win_free did not delete the "
                  "window's attribute", kind);
        }
        if (kind >= 1 && kind <= 3)
            MPI_Comm_free(&comm);
    }
    MPI_Win_free_keyval(&key);
}

/* A freed window's data is kept for the next window over the same
 * communicator, which must find it zeroed as a new segment would read:
 * every byte, whether this process wrote it, another process put it, or
 * nobody touched its page. The next window over the shell clears only the
 * pages someone touched (shell.c's zero_part): after a window whose memory
 * was mostly never touched, those pages are still not in memory when the
 * next window is made (mincore on the memory the shell kept; checked where
 * that holds: no swap, mincore allowed; reading a page of shared memory
 * brings it in too, so the check comes before the second window is read).
 * The next rounds read every byte, write every byte, and find it zero in
 * the window after: the third window's creation finds all pages present,
 * the fourth's clears them without the check. A size no earlier window of
 * this program used, so the first window's memory is new. */
static void kept_data_zeroed(void)
{
    enum { PAGES = 600 };
    const long page = sysconf(_SC_PAGESIZE);
    const MPI_Aint bytes = PAGES * page;
    const int right = (t_rank + 1) % t_size;
    struct sysinfo si;
    const bool check_absent = sysinfo(&si) == 0 && si.totalswap == 0 &&
                              !getenv("ONESIDED_TEST_NO_MINCORE");
    for (int round = 0; round < 4; round++) {
        unsigned char *base;
        MPI_Win win;
        MPI_Win_allocate(bytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
        if (check_absent && round == 1) {
            /* About 320 of this process's 600 pages nobody touched.
             * Clearing every byte, as before the check, brought all in. */
            static unsigned char vec[PAGES + 1];
            const uintptr_t first = (uintptr_t)base & ~(uintptr_t)(page - 1);
            int absent = -1;
            if (mincore((void *)first, (uintptr_t)base + bytes - first, vec) == 0) {
                absent = 0;
                for (int p = 0; p < PAGES; p++)
                    absent += !(vec[p] & 1);
            }
            CHECK(absent >= PAGES / 4, "kept data: the next window made, %d of %d pages are "
                  "absent (-1: mincore failed), most untouched ones should be", absent, PAGES);
        }
        if (round > 0) {
            size_t nonzero = 0;
            for (MPI_Aint i = 0; i < bytes; i++)
                nonzero += base[i] != 0;
            CHECK(nonzero == 0, "kept data round %d: %zu bytes of the window not zero", round,
                  nonzero);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        if (round == 0) {
            /* Every third page written here, every fifth put by the left
             * neighbour, a few bytes at an odd offset. */
            for (int p = 0; p < PAGES; p += 3)
                memset(base + p * page + 7, 0xa5, 100);
            unsigned char v[9] = { 1, 2, 3, 4, 5, 6, 7, 8, 9 };
            MPI_Win_lock(MPI_LOCK_EXCLUSIVE, right, 0, win);
            for (int p = 1; p < PAGES; p += 5)
                MPI_Put(v, 9, MPI_BYTE, right, p * page + page - 9, 9, MPI_BYTE, win);
            MPI_Win_unlock(right, win);
        } else if (round < 3) {
            memset(base, 0x5a, (size_t)bytes);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Win_free(&win);
    }
}

/* Pages of base[0, bytes) that mincore reports present, or -1. */
static int pages_present(const void *base, size_t bytes)
{
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t first = (uintptr_t)base & ~(page - 1);
    const size_t n = ((uintptr_t)base + bytes - first + page - 1) / page;
    unsigned char vec[8];
    if (n > sizeof vec || mincore((void *)first, n * page, vec) != 0)
        return -1;
    int present = 0;
    for (size_t i = 0; i < n; i++)
        present += vec[i] & 1;
    return present;
}

/* The part of a window's data the shell keeps is zeroed as the next
 * window takes the shell, not by MPI_Win_free, which touches no page of
 * it; and zeroing never brings in a page nobody wrote (shell.c's
 * zero_part: a small part used to be cleared whole from its second time
 * on, a fault of 3-4 us on a KVM guest). A new communicator, so that the
 * window gets a new shell, whose data no earlier window touched: its page
 * stays absent through three windows and their frees. Then the part,
 * written, is found zero by the next window. */
static void small_part_zeroed(void)
{
    const long page = sysconf(_SC_PAGESIZE);
    struct sysinfo si;
    const bool check_pages = sysinfo(&si) == 0 && si.totalswap == 0 &&
                             !getenv("ONESIDED_TEST_NO_MINCORE");
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    unsigned char *first = NULL;
    for (int round = 0; round < 4; round++) {
        unsigned char *base;
        MPI_Win win;
        MPI_Win_allocate(page, 1, MPI_INFO_NULL, comm, &base, &win);
        if (round == 0)
            first = base;
        CHECK(base == first, "small part round %d: the window moved (%p, first %p), so the "
              "shell was not kept", round, (void *)base, (void *)first);
        if (check_pages) {
            const int present = pages_present(base, (size_t)page);
            CHECK(present == (round == 3 ? 1 : 0), "small part: window %d made with %d pages "
                  "present (want %d; -1: mincore failed)", round, present, round == 3 ? 1 : 0);
        }
        if (round == 3) {
            size_t nonzero = 0;
            for (long i = 0; i < page; i++)
                nonzero += base[i] != 0;
            CHECK(nonzero == 0, "small part: %zu bytes not zero after a written window", nonzero);
        }
        MPI_Barrier(comm);
        if (round == 2)
            memset(base, 0x3c, (size_t)page);
        MPI_Barrier(comm);
        MPI_Win_free(&win);
        if (check_pages && round < 2) { /* (after round 2 it was written) */
            const int present = pages_present(base, (size_t)page);
            CHECK(present == 0, "small part: after free %d, %d pages present (want 0; -1: "
                  "mincore failed)", round, present);
        }
    }
    MPI_Comm_free(&comm);
}

/* Small MPI_Win_allocate data spanning nodes is a piece of a slab (between
 * virtual nodes; one node's windows have a segment of their own, and the
 * steps hold there too). A piece one window wrote whole, given back as a
 * bigger window took its shell, is the next new window's: it must read
 * zero, and the windows alive beside it keep their own memory. A (4 KB) and
 * B (4 KB) are written whole by their owner and their first and last word
 * put by the left neighbour, then freed (B first); C (8 KB) takes A's shell
 * and a bigger piece, giving A's back; D (4 KB) takes B's shell and piece;
 * E (4 KB) is a new shell, which takes the free piece, A's. */
static void pieces_recycled(void)
{
    enum { SMALL = 4096 };
    const int right = (t_rank + 1) % t_size, left = (t_rank + t_size - 1) % t_size;
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Win win[5];
    int64_t *mem[5];
    const MPI_Aint bytes[5] = { SMALL, SMALL, 2 * SMALL, SMALL, SMALL };
    /* The word each window's neighbour puts first and last. */
    int64_t mark[5];
    int64_t *a_base = NULL;
    for (int i = 0; i < 5; i++) {
        if (i == 2) { /* A and B written whole and freed, B first */
            a_base = mem[0];
            for (int j = 0; j < 2; j++)
                memset(mem[j], 0x6b, (size_t)bytes[j]);
            MPI_Barrier(comm);
            MPI_Win_free(&win[1]);
            MPI_Win_free(&win[0]);
        }
        MPI_Win_allocate(bytes[i], 8, MPI_INFO_NULL, comm, &mem[i], &win[i]);
        size_t nonzero = 0;
        for (MPI_Aint b = 0; b < bytes[i] / 8; b++)
            nonzero += mem[i][b] != 0;
        CHECK(nonzero == 0, "recycled pieces: window %c has %zu of %ld words not zero", 'A' + i,
              nonzero, (long)(bytes[i] / 8));
        /* Between virtual nodes the piece is A's (the recycling this is
         * about), the first free one of the slab. */
        if (i == 4 && t_virtual_node_size() > 0)
            CHECK(mem[4] == a_base, "recycled pieces: E's memory %p is not A's %p",
                  (void *)mem[4], (void *)a_base);
        MPI_Barrier(comm);
        const int64_t v = 100 * i + t_rank;
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, right, 0, win[i]);
        MPI_Put(&v, 1, MPI_INT64_T, right, 0, 1, MPI_INT64_T, win[i]);
        MPI_Put(&v, 1, MPI_INT64_T, right, bytes[i] / 8 - 1, 1, MPI_INT64_T, win[i]);
        MPI_Win_unlock(right, win[i]);
        mark[i] = 100 * i + left;
    }
    MPI_Barrier(comm);
    for (int i = 2; i < 5; i++) {
        MPI_Win_lock(MPI_LOCK_SHARED, t_rank, 0, win[i]);
        CHECK(mem[i][0] == mark[i] && mem[i][bytes[i] / 8 - 1] == mark[i],
              "recycled pieces: window %c holds %lld and %lld, expected %lld (memory shared "
              "with another window?)", 'A' + i, (long long)mem[i][0],
              (long long)mem[i][bytes[i] / 8 - 1], (long long)mark[i]);
        MPI_Win_unlock(t_rank, win[i]);
    }
    MPI_Barrier(comm);
    for (int i = 4; i >= 2; i--)
        MPI_Win_free(&win[i]);
    MPI_Comm_free(&comm);
}

/* A freed window's data segment is kept for the next one only up to 64 MiB
 * per node. Windows above that, one after another on one communicator,
 * each get a new segment (the second used to find a released one). */
static void large_windows(void)
{
    const MPI_Aint bytes = ((MPI_Aint)80 << 20) / t_size; /* node-wide: above the 64 MiB kept */
    const int right = (t_rank + 1) % t_size, left = (t_rank + t_size - 1) % t_size;
    for (int round = 0; round < 3; round++) {
        char *base;
        MPI_Win win;
        MPI_Win_allocate(bytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
        CHECK(base != NULL, "large window %d: no memory", round);
        if (!base) {
            MPI_Win_free(&win);
            continue;
        }
        memset(base, round, (size_t)bytes);
        MPI_Barrier(MPI_COMM_WORLD); /* every window filled before anyone puts */
        int v = round * 100 + t_rank;
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, right, 0, win);
        MPI_Put(&v, 1, MPI_INT, right, bytes - (MPI_Aint)sizeof v, 1, MPI_INT, win);
        MPI_Win_unlock(right, win);
        MPI_Barrier(MPI_COMM_WORLD);
        int got;
        memcpy(&got, base + bytes - (MPI_Aint)sizeof got, sizeof got);
        CHECK(got == round * 100 + left && base[0] == round,
              "large window %d: last word %d (want %d), first byte %d", round, got,
              round * 100 + left, base[0]);
        MPI_Win_free(&win);
    }
}

static void create_edge_cases(void)
{
    /* Zero-size contributions with a NULL base, and a window on the stack. */
    int stack[4] = { 0, 0, 0, 0 };
    MPI_Win win;
    int odd = t_rank % 2;
    MPI_Win_create(odd ? stack : NULL, odd ? (MPI_Aint)sizeof stack : 0, sizeof(int),
                   MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Win_fence(0, win);
    if (!odd && t_rank + 1 < t_size) {
        int v[2] = { 7, t_rank };
        MPI_Put(v, 2, MPI_INT, t_rank + 1, 2, 2, MPI_INT, win);
    }
    MPI_Win_fence(MPI_MODE_NOSUCCEED, win);
    if (odd)
        CHECK(stack[2] == 7 && stack[3] == t_rank - 1 && stack[0] == 0, "stack window");
    MPI_Win_free(&win);
}

/* Which path served the operations: MPI_Alloc_mem memory is mapped (no CMA,
 * accumulates by CPU atomics), malloc'd memory is reached by CMA, or where
 * the kernel refuses CMA, over UCX as another node's would be. Between
 * virtual nodes, MPI_Win_allocate memory comes from UCX and is reached
 * without the target (remote_rdma); other memory UCX only emulates. */
static void access_paths(void)
{
    for (int f = F_ALLOCATE; f < F_COUNT; f++) {
        if (f == F_SHARED || f == F_DYNAMIC)
            continue;
        t_win_t t = t_win_make(f, 64, MPI_INFO_NULL);
        int right = (t_rank + 1) % t_size;
        int64_t one = 1, old;
        MPI_Win_lock_all(0, t.win);
        MPI_Put(&one, 1, MPI_INT64_T, right, 0, 1, MPI_INT64_T, t.win);
        MPI_Fetch_and_op(&one, &old, MPI_INT64_T, right, 8, MPI_SUM, t.win);
        MPI_Win_unlock_all(t.win);
        onesided_win_stats_t s;
        CHECK(onesided_win_get_stats(t.win, &s) == MPI_SUCCESS, "stats");
        uint64_t cma = s.counter[ONESIDED_STAT_FALLBACK_CMA];
        uint64_t mutex = s.counter[ONESIDED_STAT_FALLBACK_ACC_MUTEX];
        uint64_t atomic = s.counter[ONESIDED_STAT_ACC_ATOMIC_ELEMS];
        if (t_virtual_node_size()) {
            /* Virtual nodes: the right neighbour may be on another node. */
            uint64_t rdma = s.counter[ONESIDED_STAT_REMOTE_RDMA];
            uint64_t mapped = s.counter[ONESIDED_STAT_REMOTE_MAPPED];
            uint64_t am = s.counter[ONESIDED_STAT_FALLBACK_AM];
            uint64_t direct = s.counter[ONESIDED_STAT_ACC_DIRECT];
            uint64_t emulated = s.counter[ONESIDED_STAT_FALLBACK_REMOTE_EMULATED];
            /* Alone on its node, the owner maps its memory: the fetch-add is
             * a direct accumulate (one network atomic), not a request; on
             * memory UCX allocated, the put and the atomic are zero-copy,
             * and the put is this CPU's copy into the mapping (remote_mapped). */
            /* (Across real hosts, UCX over TCP reaches no memory without
             * the target: the small put goes as a request,
             * onesided_remote_request_max, and so does the fetch-add under
             * lock_all, where requests are held and leave together,
             * onesided_remote_batch_bytes.) */
            const uint64_t zc = f == F_ALLOCATE && t_hosts == 1;
            const uint64_t tcp = t_hosts > 1;
            if (f == F_CREATE_BIG) {
                t_win_free(&t);
                continue; /* as F_CREATE: UCX emulates RDMA to memory it did not allocate */
            }
            if (t_virtual_node_size() == 1)
                CHECK(rdma == zc && mapped == zc && emulated == (tcp ? 0 : 2 * (1 - zc)) &&
                          direct == !tcp && am == 2 * tcp,
                      "virtual nodes of 1, flavor %d: rdma %llu mapped %llu emulated %llu "
                      "direct %llu am %llu", f, (unsigned long long)rdma,
                      (unsigned long long)mapped, (unsigned long long)emulated,
                      (unsigned long long)direct, (unsigned long long)am);
        } else if (t_cma_refused() && t_node_size_of(f) == 1 && t_size > 1) {
            /* Each process a node of its own: the neighbour's memory is
             * reached as another node's (UCX emulates the put for memory it
             * did not allocate; the fetch-add is one network atomic). */
            uint64_t nocma = s.counter[ONESIDED_STAT_FALLBACK_NO_CMA];
            uint64_t emulated = s.counter[ONESIDED_STAT_FALLBACK_REMOTE_EMULATED];
            uint64_t direct = s.counter[ONESIDED_STAT_ACC_DIRECT];
            CHECK(nocma == 1 && cma == 0 && emulated == 2 && direct == 1,
                  "malloc window, CMA refused: fallback_no_cma %llu cma %llu emulated %llu "
                  "direct %llu", (unsigned long long)nocma, (unsigned long long)cma,
                  (unsigned long long)emulated, (unsigned long long)direct);
        } else if (f == F_ALLOCATE) {
            CHECK(cma == 0 && mutex == 0 && atomic == 1, "allocated window: cma %llu mutex %llu "
                  "atomic %llu", (unsigned long long)cma, (unsigned long long)mutex,
                  (unsigned long long)atomic);
        } else if (f == F_ALLOCMEM || (f == F_CREATE_BIG && t_flavor_mapped(f))) {
            CHECK(cma == 0 && mutex == 0 && atomic == 1,
                  "%s window: cma %llu mutex %llu atomic %llu", flavor_name[f],
                  (unsigned long long)cma, (unsigned long long)mutex, (unsigned long long)atomic);
        }
        else if (t_size > 1) {
            /* Each of the two operations by CMA (the fetch-add under the
             * mutex), or applied by the neighbour as a node request while
             * it polled (inside MPI_Win_unlock_all's wait, say). */
            uint64_t nreq = s.counter[ONESIDED_STAT_NODE_REQUESTS];
            CHECK(nreq <= 2 && mutex <= 1 && nreq + mutex >= 1 && (nreq == 2 || cma >= 1) &&
                      (nreq < 2 || (cma == 0 && mutex == 0)),
                  "malloc window: cma %llu mutex %llu node requests %llu",
                  (unsigned long long)cma, (unsigned long long)mutex, (unsigned long long)nreq);
        }
        t_win_free(&t);
    }
    /* Beyond the configured limit, MPI_Alloc_mem falls back and still works. */
    void *blocks[300];
    int n = 0;
    for (; n < 300; n++)
        if (MPI_Alloc_mem(64, MPI_INFO_NULL, &blocks[n]) != MPI_SUCCESS)
            break;
    CHECK(n == 300, "300 MPI_Alloc_mem blocks (limit 256 shareable), got %d", n);
    for (int i = 0; i < n; i++) {
        memset(blocks[i], i, 64);
        MPI_Free_mem(blocks[i]);
    }
}

/* MPI_Win_create over the program's own large allocation: the bytes it held
 * before are what the others read, their puts are what it reads, a second
 * window over the same memory outlives the first, and after the last free
 * the memory is private again (onesided_create_share=0: never shared). */
static void own_memory(void)
{
    enum { N = 1 << 17 }; /* 1 MB of int64: glibc's own mmap */
    int64_t *mem = t_big_calloc(sizeof *mem * N);
    for (int i = 0; i < N; i++)
        mem[i] = (int64_t)t_rank << 32 | i;
    const int right = (t_rank + 1) % t_size, left = (t_rank + t_size - 1) % t_size;
    const bool share = t_create_share() && t_node_size_of(F_CREATE_BIG) != 1;
    MPI_Win w1, w2;
    MPI_Win_create(mem, sizeof *mem * N, sizeof *mem, MPI_INFO_NULL, MPI_COMM_WORLD, &w1);
    MPI_Win_create(mem, sizeof *mem * N, sizeof *mem, MPI_INFO_NULL, MPI_COMM_WORLD, &w2);
    onesided_win_stats_t s;
    onesided_win_get_stats(w1, &s);
    const uint64_t shared = s.counter[ONESIDED_STAT_CREATE_SHARED_BYTES];
    /* All of it from glibc's own mmap; the pages inside the block else. */
    const uint64_t least = sizeof *mem * N - (T_GLIBC_MALLOC ? 0 : 8192);
    CHECK(share ? shared >= least : shared == 0, "own memory: %llu bytes shared",
          (unsigned long long)shared);
    if (t_virtual_node_size() == 0)
        CHECK(t_mapping_of(mem + N / 2) == (share ? 's' : 'p'),
              "own memory: mapped '%c' while windows are over it", t_mapping_of(mem + N / 2));
    /* The others read what the owner wrote before MPI_Win_create. */
    const int at[3] = { 0, N / 2, N - 1 };
    int64_t got[3];
    MPI_Win_lock(MPI_LOCK_SHARED, right, 0, w1);
    for (int k = 0; k < 3; k++)
        MPI_Get(&got[k], 1, MPI_INT64_T, right, at[k], 1, MPI_INT64_T, w1);
    MPI_Win_unlock(right, w1);
    for (int k = 0; k < 3; k++)
        CHECK(got[k] == ((int64_t)right << 32 | at[k]), "own memory: word %d of rank %d reads "
              "%llx", at[k], right, (unsigned long long)got[k]);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_free(&w1);
    /* The second window still reaches the same bytes, both ways. */
    int64_t v = -t_rank - 1, old = 0;
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, right, 0, w2);
    MPI_Put(&v, 1, MPI_INT64_T, right, N - 1, 1, MPI_INT64_T, w2);
    MPI_Fetch_and_op(&v, &old, MPI_INT64_T, right, 0, MPI_SUM, w2);
    MPI_Win_unlock(right, w2);
    CHECK(old == ((int64_t)right << 32), "own memory: fetch_and_op read %llx",
          (unsigned long long)old);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_lock(MPI_LOCK_SHARED, t_rank, 0, w2);
    CHECK(mem[N - 1] == -left - 1 && mem[0] == ((int64_t)t_rank << 32) - left - 1,
          "own memory: the owner reads %lld, %llx", (long long)mem[N - 1],
          (unsigned long long)mem[0]);
    MPI_Win_unlock(t_rank, w2);
    MPI_Win_free(&w2);
    CHECK(t_mapping_of(mem + N / 2) == 'p', "own memory: private again after the last free");
    CHECK(mem[1] == ((int64_t)t_rank << 32 | 1) && mem[N - 1] == -left - 1,
          "own memory: the bytes stay after the free");
    free(mem);
    /* Asked not to share: CMA (or the no-CMA fallback) serves, nothing shared. */
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "onesided_create_share", "0");
    mem = t_big_calloc(sizeof *mem * N);
    MPI_Win_create(mem, sizeof *mem * N, sizeof *mem, info, MPI_COMM_WORLD, &w1);
    onesided_win_get_stats(w1, &s);
    CHECK(s.counter[ONESIDED_STAT_CREATE_SHARED_BYTES] == 0 && t_mapping_of(mem) == 'p',
          "onesided_create_share=0: %llu bytes shared",
          (unsigned long long)s.counter[ONESIDED_STAT_CREATE_SHARED_BYTES]);
    MPI_Win_free(&w1);
    MPI_Info_free(&info);
    free(mem);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    attributes();
    if (t_hosts == 1) /* no memory is shared across hosts */
        shared_memory();
    info_like_host(false);
    info_like_host(true);
    handle_hints();
    displacement_units_and_info();
    subcommunicator();
    dynamic_regions();
    many_windows();
    shell_reuse();
    kept_data_zeroed();
    small_part_zeroed();
    pieces_recycled();
    large_windows();
    create_edge_cases();
    access_paths();
    own_memory();
    return t_finish("test_windows");
}
