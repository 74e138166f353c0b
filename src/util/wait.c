/*
 * Waiting: every loop of onesided that waits for another process backs off
 * here (os_backoff_wait in os_util.h): it spins a while, then yields the
 * core on every poll. The hang watchdog speaks from here too.
 */
#include "os_util.h"

#include <sched.h>
#include <stdio.h>

int os_spin_limit = 2000;
bool os_oversubscribed;
void (*os_backoff_hook)(void);

_Thread_local const os_wait_site_t *os_wait_top;

static void watchdog_report(double waited)
{
    char detail[512] = "";
    const os_wait_site_t *s = os_wait_top;
    if (s && s->describe)
        s->describe(s, detail, sizeof detail);
    char target[32] = "";
    if (s && s->target >= 0)
        snprintf(target, sizeof target, " (target %d)", s->target);
    os_log(0, "watchdog: waited %.1f s in %s%s%s%s; still waiting", waited,
           s ? s->call : "a wait inside onesided", target, *detail ? ": " : "", detail);
}

bool os_threaded;
_Thread_local bool os_main_thread;
_Thread_local pthread_mutex_t *os_call_mutex;
_Thread_local pthread_mutex_t *os_wait_mutex;

/* The slow path of every waiting loop: the clock is read only here. A wait
 * never holds the process's other locks (reg_lock, the transport's), so
 * giving the window's mutex up here cannot invert a lock order. */
void os_backoff_yield(os_backoff_t *b)
{
    pthread_mutex_t *m = os_wait_mutex;
    if (m)
        pthread_mutex_unlock(m);
    sched_yield();
    if (m)
        pthread_mutex_lock(m);
    if (os_config.watchdog <= 0 || b->reported)
        return;
    double now = os_now();
    if (b->since == 0) {
        b->since = now;
    } else if (now - b->since > os_config.watchdog) {
        b->reported = true;
        watchdog_report(now - b->since);
    }
}
