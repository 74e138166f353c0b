/* os_membarrier: the slow side of an asymmetric handshake. A process that
 * registered lets every other process run a memory barrier on its running
 * threads, so that its own side of a Dekker handshake needs no fence of its
 * own (rma/os_rma.h, os_acc_atomic_try_enter). */
#include "os_util.h"

#include <errno.h>
#include <linux/membarrier.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static _Atomic bool registered;

static int membarrier_call(int cmd)
{
#ifdef __NR_membarrier
    return (int)syscall(__NR_membarrier, cmd, 0, 0);
#else
    errno = ENOSYS;
    return -1;
#endif
}

bool os_membarrier_register(bool warn)
{
    /* The query tells whether the kernel has the command at all (Linux 4.16
     * and later); where it does, registering fails only where a filter
     * refuses. */
    const int have = membarrier_call(MEMBARRIER_CMD_QUERY);
    int err = 0;
    if (have < 0)
        err = errno;
    else if (!(have & MEMBARRIER_CMD_GLOBAL_EXPEDITED))
        err = ENOSYS;
    else if (membarrier_call(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) != 0)
        err = errno;
    if (err) {
        if (warn)
            OS_WARN("membarrier %s (%s): CPU-atomic accumulates fence with a locked "
                    "instruction each",
                    err == ENOSYS ? "unavailable" : "refused", strerror(err));
        return false;
    }
    atomic_store_explicit(&registered, true, memory_order_relaxed);
    return true;
}

bool os_membarrier_registered(void)
{
    return atomic_load_explicit(&registered, memory_order_relaxed);
}

bool os_membarrier(void)
{
    return membarrier_call(MEMBARRIER_CMD_GLOBAL_EXPEDITED) == 0;
}
