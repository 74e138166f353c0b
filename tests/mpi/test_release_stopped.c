/* A lock epoch's release waits for the epoch's RDMA even where the RDMA and
 * the lock word are served by two different processes.
 *
 * Across hosts, MPI_Win_allocate memory comes from UCX, and its key belongs
 * to the node's first process: RDMA to any process of that node goes to that
 * process, whose worker applies it when UCX emulates it (TCP), while the
 * target's own worker applies the lock word's atomics. No transport orders
 * two processes, so an unlock that posts the release right behind its puts
 * (a fence, then the atomic) can let the next locker in before the puts are
 * applied; across 2 hosts a reader saw half a writer's epoch once in ~200
 * runs of test_concurrency.
 *
 * Here the order is forced rather than waited for. Ranks 2 and 3 share a
 * host (mpiexec -ppn 2 on 2 hosts); rank 3 is the target, rank 2 owns the
 * key. Rank 2 stops itself (SIGSTOP: its worker and progress thread too);
 * rank 3 sees it stopped, lets the others go, and resumes it half a second
 * later, noting the time (CLOCK_MONOTONIC, which network namespaces share).
 *   1. Rank 0 takes the lock exclusively, puts a value (stuck at rank 2),
 *      tells rank 1, and unlocks. Rank 1 then locks shared: that may succeed
 *      only after rank 2 resumed, and it must read the value.
 *   2. Rank 1 locks shared and gets (stuck at rank 2), tells rank 0, and
 *      unlocks. Rank 0 then locks exclusively: not before rank 2 resumed.
 * A wrong order fails whatever the load; a slow machine can only hide it.
 * Every lock design; run by tests/across_hosts.sh with
 * ONESIDED_REMOTE_REQUEST_MAX=0: by default these puts and gets, small and
 * over TCP, are requests the target applies itself (nothing then waits for
 * the key owner, and the lock may be granted before it resumes). */
#define _GNU_SOURCE
#include "common.h"

#include <signal.h>
#include <time.h>
#include <unistd.h>

enum { TARGET = 3, KEY_OWNER = 2, WRITER = 0, READER = 1, TAG = 7 };

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static bool stopped(pid_t pid)
{
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *s = strrchr(buf, ')'); /* "pid (comm) S ..." */
    return s && s[1] == ' ' && s[2] == 'T';
}

/* Rank 2 stops; rank 3 releases the others once it is stopped and resumes
 * it 0.5 s later. Returns, on every rank, when rank 3 resumed it. */
static double stop_key_owner(pid_t owner_pid)
{
    double resumed = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    if (t_rank == KEY_OWNER) {
        raise(SIGSTOP);
    } else if (t_rank == TARGET) {
        while (!stopped(owner_pid))
            usleep(1000);
        int go = 1;
        MPI_Send(&go, 1, MPI_INT, WRITER, TAG, MPI_COMM_WORLD);
        MPI_Send(&go, 1, MPI_INT, READER, TAG, MPI_COMM_WORLD);
        usleep(500 * 1000);
        resumed = now();
        kill(owner_pid, SIGCONT);
    } else {
        int go;
        MPI_Recv(&go, 1, MPI_INT, TARGET, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    return resumed;
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    if (t_size != 4 || t_host_block != 2) {
        if (!t_rank)
            fprintf(stderr, "test_release_stopped runs on 4 processes on 2 hosts "
                            "(mpiexec -ppn 2)\n");
        MPI_Finalize();
        return 1;
    }
    pid_t pids[4], me = getpid();
    MPI_Allgather(&me, sizeof me, MPI_BYTE, pids, sizeof me, MPI_BYTE, MPI_COMM_WORLD);
    int64_t *base;
    MPI_Win win;
    MPI_Win_allocate(16, 8, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    base[0] = base[1] = 0;
    MPI_Barrier(MPI_COMM_WORLD);

    /* Warm up: the epochs below take the lock as they will then (a hybrid
     * lock migrates to the network word at the first remote request). */
    for (int i = 0; i < 3; i++) {
        if (t_rank == WRITER || t_rank == READER) {
            int64_t v[2];
            MPI_Win_lock(t_rank == WRITER ? MPI_LOCK_EXCLUSIVE : MPI_LOCK_SHARED, TARGET, 0, win);
            MPI_Get(v, 2, MPI_INT64_T, TARGET, 0, 2, MPI_INT64_T, win);
            MPI_Win_unlock(TARGET, win);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }

    /* 1. A writer's put stuck at the key owner. */
    double resumed = stop_key_owner(pids[KEY_OWNER]), granted = 0;
    int64_t marker = 42, seen[2] = { -1, -1 };
    int note = 1;
    if (t_rank == WRITER) {
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, TARGET, 0, win);
        MPI_Put(&marker, 1, MPI_INT64_T, TARGET, 0, 1, MPI_INT64_T, win);
        MPI_Put(&marker, 1, MPI_INT64_T, TARGET, 1, 1, MPI_INT64_T, win);
        MPI_Send(&note, 1, MPI_INT, READER, TAG, MPI_COMM_WORLD);
        MPI_Win_unlock(TARGET, win);
    } else if (t_rank == READER) {
        MPI_Recv(&note, 1, MPI_INT, WRITER, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Win_lock(MPI_LOCK_SHARED, TARGET, 0, win);
        granted = now();
        MPI_Get(seen, 2, MPI_INT64_T, TARGET, 0, 2, MPI_INT64_T, win);
        MPI_Win_unlock(TARGET, win);
    }
    MPI_Bcast(&resumed, 1, MPI_DOUBLE, TARGET, MPI_COMM_WORLD);
    if (t_rank == READER) {
        CHECK(granted > resumed, "a shared lock was granted %.3f s before the writer's puts "
              "could be applied", resumed - granted);
        CHECK(seen[0] == marker && seen[1] == marker, "the reader saw %lld %lld, not %lld",
              (long long)seen[0], (long long)seen[1], (long long)marker);
    }

    /* 2. A reader's get stuck at the key owner. */
    resumed = stop_key_owner(pids[KEY_OWNER]);
    granted = 0;
    if (t_rank == READER) {
        MPI_Win_lock(MPI_LOCK_SHARED, TARGET, 0, win);
        MPI_Get(seen, 2, MPI_INT64_T, TARGET, 0, 2, MPI_INT64_T, win);
        MPI_Send(&note, 1, MPI_INT, WRITER, TAG, MPI_COMM_WORLD);
        MPI_Win_unlock(TARGET, win);
    } else if (t_rank == WRITER) {
        MPI_Recv(&note, 1, MPI_INT, READER, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, TARGET, 0, win);
        granted = now();
        marker = 43;
        MPI_Put(&marker, 1, MPI_INT64_T, TARGET, 0, 1, MPI_INT64_T, win);
        MPI_Win_unlock(TARGET, win);
    }
    MPI_Bcast(&resumed, 1, MPI_DOUBLE, TARGET, MPI_COMM_WORLD);
    if (t_rank == WRITER)
        CHECK(granted > resumed, "an exclusive lock was granted %.3f s before the reader's "
              "gets could be applied", resumed - granted);
    if (t_rank == READER)
        CHECK(seen[0] == 42 && seen[1] == 42, "the reader saw %lld %lld, not 42 42",
              (long long)seen[0], (long long)seen[1]);
    MPI_Win_free(&win);
    return t_finish("test_release_stopped");
}
