/* One UCX per process: onesided and its host MPI map the same libucp,
 * libuct, libucs and libucm, even when LD_LIBRARY_PATH names a directory of
 * another UCX (ctest sets one up: the system's, where the host brings its
 * own). Two copies in one process would each install memory hooks and
 * open transports of their own. */
#include "common.h"

static const char *const libs[] = { "libucp.so", "libuct.so", "libucs.so", "libucm.so" };

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    MPI_Win win;
    int *base;
    MPI_Win_allocate(64, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    MPI_Win_fence(0, win);
    MPI_Win_fence(0, win);
    char dir0[512] = "";
    for (size_t l = 0; l < sizeof libs / sizeof *libs; l++) {
        char first[512] = "", line[1024];
        int copies = 0;
        FILE *f = fopen("/proc/self/maps", "r");
        while (f && fgets(line, sizeof line, f)) {
            char *path = strchr(line, '/');
            if (!path || !strstr(path, libs[l]))
                continue;
            path[strcspn(path, "\n")] = 0;
            if (!first[0])
                snprintf(first, sizeof first, "%s", path);
            else if (strcmp(first, path) && copies++ == 0)
                fprintf(stderr, "[rank %d] %s and %s both mapped\n", t_rank, first, path);
        }
        if (f)
            fclose(f);
        CHECK(copies == 0, "%s mapped from %d more places than one", libs[l], copies);
        /* And all four from one directory: a libucp of one UCX over the
         * libuct of another is two UCXs too. */
        char *slash = strrchr(first, '/');
        if (slash)
            *slash = 0;
        if (!dir0[0])
            snprintf(dir0, sizeof dir0, "%s", first);
        else if (first[0])
            CHECK(!strcmp(dir0, first), "%s from %s, libucp.so from %s", libs[l], first, dir0);
    }
    MPI_Win_free(&win);
    return t_finish("test_one_ucx");
}
