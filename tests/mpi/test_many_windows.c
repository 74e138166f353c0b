/* Host resources per window. MPICH has 2048 communicator contexts, and a
 * native window costs one; a program keeping a window per object (Global
 * Arrays) must be able to hold as many with onesided.
 *   - 1000 windows of each flavor alive at once on one communicator, every
 *     one of them working (a put to the right neighbour, read back);
 *   - freeing them, and then the communicator, gives back every context:
 *     the count of free contexts (probed by duplicating MPI_COMM_WORLD until
 *     the host refuses) is where it was;
 *   - 1000 create/free cycles leave the count where it was;
 *   - every other window freed and made again: past the 128 idle shells
 *     kept, the new windows' control areas (lock words, fence and PSCW
 *     counters) are ones that served freed windows, and a fence and a PSCW
 *     epoch on every window, before and after, must still be exact;
 *   - other nodes' keys to MPI_Win_allocate data are kept while the data
 *     is the same, past the idle shells too (data_keys);
 *   - MPI_Win_allocate data given back by shells past the spares, written
 *     whole, reads zero in the windows that take it next (data_recycled);
 *   - the descriptor table (/proc/self/status FDSize) holds every region's
 *     descriptor from MPI_Init on and never grows under the windows: a
 *     table shared by threads grows only after an RCU grace period, 7-31 ms
 *     of the window creation that met it (shm/region.c).
 * argv[1]: windows per flavor (default 1000). */
#include "common.h"

#include <onesided.h>
#include <sys/resource.h>
#include <unistd.h>

/* Free communicator contexts of the host MPI, as duplicates it still makes. */
static int free_contexts(void)
{
    enum { MAX = 4096 };
    static MPI_Comm dups[MAX];
    int n = 0;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    while (n < MAX && MPI_Comm_dup(MPI_COMM_WORLD, &dups[n]) == MPI_SUCCESS)
        n++;
    for (int i = 0; i < n; i++)
        MPI_Comm_free(&dups[i]);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    return n;
}

/* This process's descriptor table size (FDSize), or -1 where /proc says
 * nothing. */
static int fd_table_size(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    int n = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "FDSize: %d", &n) == 1)
            break;
    if (f)
        fclose(f);
    return n;
}

typedef struct {
    MPI_Win win;
    int64_t *mem; /* this process's 2 words */
    void *own;
    MPI_Aint disp0; /* displacement of word 0 at the right neighbour */
} many_t;

static int make(int flavor, MPI_Comm comm, many_t *m)
{
    const MPI_Aint bytes = 2 * sizeof(int64_t);
    int rc = MPI_SUCCESS;
    m->own = NULL;
    m->disp0 = 0;
    switch (flavor) {
    case F_ALLOCATE:
        rc = MPI_Win_allocate(bytes, 1, MPI_INFO_NULL, comm, &m->mem, &m->win);
        break;
    case F_SHARED:
        rc = MPI_Win_allocate_shared(bytes, 1, MPI_INFO_NULL, comm, &m->mem, &m->win);
        break;
    case F_CREATE:
        m->own = m->mem = calloc(1, (size_t)bytes);
        rc = MPI_Win_create(m->mem, bytes, 1, MPI_INFO_NULL, comm, &m->win);
        break;
    case F_ALLOCMEM:
        MPI_Alloc_mem(bytes, MPI_INFO_NULL, &m->mem);
        rc = MPI_Win_create(m->mem, bytes, 1, MPI_INFO_NULL, comm, &m->win);
        break;
    case F_CREATE_BIG: {
        /* A whole page of the program's own: made shareable in place, up to
         * the limit of regions (ONESIDED_ALLOC_MEM_MAX_REGIONS), then CMA. */
        const size_t page = (size_t)sysconf(_SC_PAGESIZE);
        m->own = m->mem = aligned_alloc(page, page);
        rc = MPI_Win_create(m->mem, (MPI_Aint)page, 1, MPI_INFO_NULL, comm, &m->win);
        break;
    }
    case F_DYNAMIC: {
        m->own = m->mem = calloc(1, (size_t)bytes);
        rc = MPI_Win_create_dynamic(MPI_INFO_NULL, comm, &m->win);
        if (rc == MPI_SUCCESS)
            rc = MPI_Win_attach(m->win, m->mem, bytes);
        MPI_Aint mine, *all = malloc(sizeof(MPI_Aint) * (size_t)t_size);
        MPI_Get_address(m->mem, &mine);
        MPI_Allgather(&mine, 1, MPI_AINT, all, 1, MPI_AINT, comm);
        m->disp0 = all[(t_rank + 1) % t_size];
        free(all);
        break;
    }
    }
    if (rc == MPI_SUCCESS)
        m->mem[0] = m->mem[1] = -1;
    return rc;
}

static void unmake(int flavor, many_t *m)
{
    if (flavor == F_DYNAMIC)
        MPI_Win_detach(m->win, m->mem);
    MPI_Win_free(&m->win);
    if (flavor == F_ALLOCMEM)
        MPI_Free_mem(m->mem);
    free(m->own);
}

/* A fence epoch and a PSCW epoch on each window: each puts a value of its
 * own to the right neighbour, which must hold it after the epoch. */
static int epochs(many_t *w, int n, int round)
{
    const int right = (t_rank + 1) % t_size, left = (t_rank + t_size - 1) % t_size;
    MPI_Group all, to, from;
    MPI_Win_get_group(w[0].win, &all);
    MPI_Group_incl(all, 1, &right, &to);
    MPI_Group_incl(all, 1, &left, &from);
    int wrong = 0;
    for (int i = 0; i < n; i++) {
        int64_t v = (int64_t)i * 1000 + t_rank + 100 * round;
        MPI_Win_fence(0, w[i].win);
        MPI_Put(&v, 1, MPI_INT64_T, right, w[i].disp0, 1, MPI_INT64_T, w[i].win);
        MPI_Win_fence(0, w[i].win);
        wrong += w[i].mem[0] != (int64_t)i * 1000 + left + 100 * round;
        v += 50;
        MPI_Win_post(from, 0, w[i].win);
        MPI_Win_start(to, 0, w[i].win);
        MPI_Put(&v, 1, MPI_INT64_T, right, w[i].disp0 + 8, 1, MPI_INT64_T, w[i].win);
        MPI_Win_complete(w[i].win);
        MPI_Win_wait(w[i].win);
        wrong += w[i].mem[1] != (int64_t)i * 1000 + left + 100 * round + 50;
    }
    MPI_Group_free(&to);
    MPI_Group_free(&from);
    MPI_Group_free(&all);
    return wrong;
}

/* n windows of one flavor alive at once; each carries its own value. */
static void live_windows(int flavor, int n)
{
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    many_t *w = calloc((size_t)n, sizeof *w);
    int made = 0, right = (t_rank + 1) % t_size, left = (t_rank + t_size - 1) % t_size;
    while (made < n && make(flavor, comm, &w[made]) == MPI_SUCCESS)
        made++;
    CHECK(made == n, "%s: %d of %d windows alive at once on one communicator",
          flavor_name[flavor], made, n);
    MPI_Barrier(comm);
    for (int i = 0; i < made; i++) {
        int64_t v = (int64_t)i * 1000 + t_rank;
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, right, 0, w[i].win);
        MPI_Put(&v, 1, MPI_INT64_T, right, w[i].disp0, 1, MPI_INT64_T, w[i].win);
        MPI_Win_unlock(right, w[i].win);
    }
    MPI_Barrier(comm);
    int wrong = 0;
    for (int i = 0; i < made; i++) {
        MPI_Win_lock(MPI_LOCK_SHARED, t_rank, 0, w[i].win);
        wrong += w[i].mem[0] != (int64_t)i * 1000 + left || w[i].mem[1] != -1;
        MPI_Win_unlock(t_rank, w[i].win);
    }
    CHECK(wrong == 0, "%s: %d of %d windows hold the wrong value", flavor_name[flavor], wrong,
          made);
    if (made == n) {
        wrong = epochs(w, made, 1);
        CHECK(wrong == 0, "%s: %d wrong values after fence and PSCW epochs", flavor_name[flavor],
              wrong);
        int remade = 0;
        for (int i = 0; i < made; i += 2)
            unmake(flavor, &w[i]);
        for (int i = 0; i < made; i += 2)
            remade += make(flavor, comm, &w[i]) == MPI_SUCCESS;
        CHECK(remade == (made + 1) / 2, "%s: %d of %d windows made again", flavor_name[flavor],
              remade, (made + 1) / 2);
        if (remade == (made + 1) / 2) {
            wrong = epochs(w, made, 2);
            CHECK(wrong == 0, "%s: %d wrong values after fence and PSCW epochs on windows "
                  "made again over freed windows' control areas", flavor_name[flavor], wrong);
        }
    }
    for (int i = made - 1; i >= 0; i--)
        unmake(flavor, &w[i]);
    free(w);
    MPI_Comm_free(&comm);
}

/* A put of this window's own values to the right neighbour, at the first
 * and the last word, which the neighbour checks; then the window's count of
 * other nodes' data keys kept from an earlier window over the communicator
 * (stat data_keys_reused) must be `kept`. */
static void keys_check(const char *what, int i, MPI_Win win, int64_t *mem, MPI_Aint bytes,
                       uint64_t kept)
{
    const int right = (t_rank + 1) % t_size, left = (t_rank + t_size - 1) % t_size;
    const MPI_Aint last = bytes / 8 - 1;
    int64_t v[2] = { 1000 * i + t_rank, -(1000 * i + t_rank) };
    MPI_Win_lock_all(0, win);
    MPI_Put(&v[0], 1, MPI_INT64_T, right, 0, 1, MPI_INT64_T, win);
    MPI_Put(&v[1], 1, MPI_INT64_T, right, last, 1, MPI_INT64_T, win);
    MPI_Win_unlock_all(win);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_lock(MPI_LOCK_SHARED, t_rank, 0, win); /* the memory model: a local view */
    CHECK(mem[0] == 1000 * i + left && mem[last] == -(1000 * i + left),
          "%s %d of %ld bytes: %lld and %lld from rank %d, expected %d and %d", what, i,
          (long)bytes, (long long)mem[0], (long long)mem[last], left, 1000 * i + left,
          -(1000 * i + left));
    MPI_Win_unlock(t_rank, win);
    onesided_win_stats_t st;
    if (onesided_win_get_stats(win, &st) == MPI_SUCCESS)
        CHECK(st.counter[ONESIDED_STAT_DATA_KEYS_REUSED] == kept,
              "%s %d of %ld bytes: %llu data keys kept from an earlier window, expected %llu",
              what, i, (long)bytes, (unsigned long long)st.counter[ONESIDED_STAT_DATA_KEYS_REUSED],
              (unsigned long long)kept);
}

/* Other nodes' keys to a process's MPI_Win_allocate data are unpacked once
 * per segment in each process: kept from one window to the next over the
 * same communicator (one per process on another node) while the data is
 * the same segment, and shared by every window whose data is a piece of
 * the same slab (64 pieces of one size, shell_data.c) and by the processes
 * of one node, whose data is one piece. A bigger window takes a piece of
 * another slab, at whose far end and start every process's puts must land.
 * Past the 128 idle shells a freed window's shell is a spare without its
 * host handle, which keeps its data and keys too: 200 windows alive, freed,
 * and made again all keep theirs. */
static void data_keys(void)
{
    enum { PIECES = 64 };
    const int k = t_virtual_node_size();
    const int node_ranks = k ? (t_rank / k * k + k <= t_size ? k : t_size - t_rank / k * k)
                             : t_size;
    const int nodes = k ? (t_size + k - 1) / k : 1;
    const uint64_t remote = (uint64_t)(t_size - node_ranks);
    /* A new slab: one key unpacked per other node, its other processes'
     * data share it. */
    const uint64_t fresh = remote - (uint64_t)(nodes - 1);
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    /* 4 KB windows, then 64 KB ones (a new slab), then 64 KB again. */
    const MPI_Aint sizes[] = { 4096, 4096, 4096, 65536, 65536 };
    const uint64_t expect[] = { fresh, remote, remote, fresh, remote };
    for (int i = 0; i < 5; i++) {
        int64_t *mem;
        MPI_Win win;
        MPI_Win_allocate(sizes[i], 8, MPI_INFO_NULL, comm, &mem, &win);
        keys_check("window", i, win, mem, sizes[i], expect[i]);
        MPI_Win_free(&win);
    }
    enum { LIVE = 200 };
    MPI_Win wins[LIVE];
    int64_t *mems[LIVE];
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < LIVE; i++)
            MPI_Win_allocate(4096, 8, MPI_INFO_NULL, comm, &mems[i], &wins[i]);
        /* The first round's first window takes the last 64 KB shell (whose
         * data is big enough); the rest are new, a new slab every PIECES
         * (the 4 KB one went as the 64 KB window took its only piece). */
        for (int i = 0; i < LIVE; i++)
            keys_check(round ? "live window again" : "live window", i, wins[i], mems[i], 4096,
                       round || i == 0 || (i - 1) % PIECES ? remote : fresh);
        for (int i = 0; i < LIVE; i++)
            MPI_Win_free(&wins[i]);
    }
    MPI_Comm_free(&comm);
}

/* Past the 128 idle shells and the 1024 spares a freed window's shell goes,
 * and its data with it: between virtual nodes a piece of a slab, whose
 * other pieces the kept shells hold, so it goes back to the slab for the
 * next new shell (shell_data.c). Each process zeroes its part of a kept
 * shell's data as the next window takes the shell; a shell that goes
 * zeroes it then. LIVE windows, each written whole by its owner and put to
 * by the left neighbour, are freed and made again: every byte must read
 * zero, and the neighbour's puts land. */
static void data_recycled(void)
{
    enum { LIVE = 128 + 1024 + 40, BYTES = 4096 };
    const int right = (t_rank + 1) % t_size;
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Win *wins = malloc(sizeof *wins * LIVE);
    int64_t **mems = malloc(sizeof *mems * LIVE);
    for (int round = 0; round < 2; round++) {
        int nonzero = 0;
        for (int i = 0; i < LIVE; i++) {
            MPI_Win_allocate(BYTES, 8, MPI_INFO_NULL, comm, &mems[i], &wins[i]);
            for (int b = 0; b < BYTES / 8; b++)
                nonzero += mems[i][b] != 0;
        }
        CHECK(nonzero == 0, "recycled data, round %d: %d words of %d windows not zero", round,
              nonzero, LIVE);
        for (int i = 0; i < LIVE; i++)
            memset(mems[i], 0x3d, BYTES);
        MPI_Barrier(comm);
        const int64_t v = 77;
        for (int i = 0; i < LIVE; i++) {
            MPI_Win_lock(MPI_LOCK_EXCLUSIVE, right, 0, wins[i]);
            MPI_Put(&v, 1, MPI_INT64_T, right, BYTES / 8 - 1, 1, MPI_INT64_T, wins[i]);
            MPI_Win_unlock(right, wins[i]);
        }
        MPI_Barrier(comm);
        int wrong = 0;
        for (int i = 0; i < LIVE; i++) {
            MPI_Win_lock(MPI_LOCK_SHARED, t_rank, 0, wins[i]);
            wrong += mems[i][BYTES / 8 - 1] != 77 || mems[i][0] != 0x3d3d3d3d3d3d3d3dll;
            MPI_Win_unlock(t_rank, wins[i]);
        }
        CHECK(wrong == 0, "recycled data, round %d: %d of %d windows hold the wrong values",
              round, wrong, LIVE);
        /* Last made first: the shells that go are the first windows',
         * whose pieces share their slab with pieces spares keep (slabs of
         * 64 in creation order), so the slab stays and the next round's new
         * shells take them. */
        for (int i = LIVE - 1; i >= 0; i--)
            MPI_Win_free(&wins[i]);
    }
    free(wins);
    free(mems);
    MPI_Comm_free(&comm);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    const int n = argc > 1 ? atoi(argv[1]) : 1000;
    /* Room for the default 256 regions and as many adopted ones: 512
     * descriptors past those open (a table of 1024 or more) unless the
     * descriptor limit is lower. */
    const int fds_at_init = fd_table_size();
    struct rlimit lim;
    const bool room = getrlimit(RLIMIT_NOFILE, &lim) == 0 &&
                      (lim.rlim_cur == RLIM_INFINITY || lim.rlim_cur >= 1024);
    const char *alloc_mem = getenv("ONESIDED_ALLOC_MEM"), *share = getenv("ONESIDED_CREATE_SHARE");
    const bool regions_off = alloc_mem && !strcmp(alloc_mem, "0") && share && !strcmp(share, "0");
    if (fds_at_init > 0 && room && !regions_off && !getenv("ONESIDED_ALLOC_MEM_MAX_REGIONS"))
        CHECK(fds_at_init >= 1024, "descriptor table of %d at MPI_Init, not grown for regions",
              fds_at_init);
    data_keys();
    data_recycled();
    const int before = free_contexts();
    T_FOR_EACH_FLAVOR(f) {
        live_windows(f, n);
        if (fds_at_init > 0 && room)
            CHECK(fd_table_size() == fds_at_init, "%s: the descriptor table grew from %d to %d",
                  flavor_name[f], fds_at_init, fd_table_size());
        int now = free_contexts();
        CHECK(now == before, "%s: %d free communicator contexts after the windows and their "
              "communicator were freed, %d before", flavor_name[f], now, before);
    }
    /* Create/free cycles on one communicator: the first window of each
     * flavor builds what the communicator's windows of its kind share (the
     * node communicator of its kind of nodes: where CMA is refused, windows
     * over private memory have nodes of their own), then nothing more may
     * be taken. */
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    many_t m;
    make(F_ALLOCATE, comm, &m);
    unmake(F_ALLOCATE, &m);
    make(F_CREATE, comm, &m);
    unmake(F_CREATE, &m);
    const int warm = free_contexts();
    for (int i = 0; i < n; i++) {
        make(i % 2 ? F_CREATE : F_ALLOCATE, comm, &m);
        unmake(i % 2 ? F_CREATE : F_ALLOCATE, &m);
    }
    const int after = free_contexts();
    CHECK(after == warm, "%d create/free cycles: %d free contexts after, %d before", n, after,
          warm);
    MPI_Comm_free(&comm);
    if (t_rank == 0)
        printf("free communicator contexts: %d at start, %d beside a communicator's cached "
               "windows\n", before, warm);
    return t_finish("test_many_windows");
}
