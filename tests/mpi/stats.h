/* onesided's per-window statistics, for the multi-process tests that check
 * which path an operation took. */
#ifndef TEST_STATS_H
#define TEST_STATS_H

#include "common.h"
#include "onesided.h"

/* This process's count of `which` (an ONESIDED_STAT_*) on win. */
static inline uint64_t t_stat(MPI_Win win, int which)
{
    onesided_win_stats_t st;
    if (onesided_win_get_stats(win, &st) != MPI_SUCCESS) {
        CHECK(false, "onesided_win_get_stats");
        return 0;
    }
    return st.counter[which];
}

#endif
