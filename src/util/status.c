/* The status type's names, the per-thread error message, and logging. */
#include "os_util.h"

#include <stdarg.h>
#include <string.h>
#include <unistd.h>

int os_log_level = 0;
static int log_rank = -1;

static _Thread_local char last_error[512];

const char *os_status_name(os_status_t st)
{
    static const char *const names[] = {
        [OS_OK] = "success",
        [OS_ERR_ARG] = "invalid argument",
        [OS_ERR_COMM] = "invalid communicator",
        [OS_ERR_RANK] = "invalid rank",
        [OS_ERR_COUNT] = "invalid count",
        [OS_ERR_TYPE] = "invalid datatype",
        [OS_ERR_OP] = "invalid reduction operation",
        [OS_ERR_DISP] = "invalid displacement unit",
        [OS_ERR_SIZE] = "invalid size",
        [OS_ERR_INFO] = "invalid info value",
        [OS_ERR_ASSERT] = "invalid assert",
        [OS_ERR_LOCKTYPE] = "invalid lock type",
        [OS_ERR_WIN] = "invalid window",
        [OS_ERR_RANGE] = "access outside the target window",
        [OS_ERR_TRUNCATE] = "message truncated",
        [OS_ERR_SYNC] = "wrong synchronization of RMA calls",
        [OS_ERR_CONFLICT] = "conflicting epochs",
        [OS_ERR_ATTACH] = "dynamic window attach/detach failed",
        [OS_ERR_SHARED] = "memory cannot be shared",
        [OS_ERR_BASE] = "not a block MPI_Alloc_mem gave out",
        [OS_ERR_FLAVOR] = "wrong window flavor",
        [OS_ERR_NOMEM] = "out of memory",
        [OS_ERR_UNSUPPORTED] = "not supported by onesided",
        [OS_ERR_OTHER] = "system error",
    };
    if ((unsigned)st < sizeof names / sizeof names[0] && names[st])
        return names[st];
    return "unknown status";
}

os_status_t os_error_set(os_status_t st, const char *where, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    if (os_log_level >= 2)
        os_log(2, "%s: %s (%s)", where, last_error, os_status_name(st));
    return st;
}

const char *os_error_message(void)
{
    return last_error;
}

void os_log_set_rank(int rank)
{
    log_rank = rank;
}

void os_log(int level, const char *fmt, ...)
{
    static const char *const tag[] = { "", "warning", "error", "debug" };
    char line[768];
    const char *t = tag[level > 3 ? 3 : level];
    int n = snprintf(line, sizeof line, "onesided[%d]%s%s: ", log_rank, *t ? " " : "", t);
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < sizeof line)
        n += vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof line - 1)
        n = (int)sizeof line - 2;
    line[n++] = '\n';
    /* One write per line so that lines of different ranks do not interleave. */
    ssize_t ignored = write(STDERR_FILENO, line, (size_t)n);
    (void)ignored;
}
