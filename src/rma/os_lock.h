/*
 * A fair (FIFO) reader-writer ticket lock on one 64-bit word in shared memory,
 * taken with CPU atomics only: the process that owns the window never takes
 * part, so a target busy computing cannot delay a locker.
 *
 * Word layout, three 16-bit counters (wrapping):
 *   bits  0-15  write:  the ticket an exclusive locker waits for
 *   bits 16-31  read:   the ticket a shared locker waits for
 *   bits 32-47  next:   the next ticket to hand out (bits 48-63 take the carry)
 * Every locker draws a ticket with one fetch-add on `next`, so requests are
 * served in arrival order and a steady stream of readers cannot starve a
 * writer (the test-and-set spin lock this replaces had no such order).
 *   shared:    wait read == me; read++ (lets the next ticket in if it is a reader)
 *              unlock: write++
 *   exclusive: wait write == me;           unlock: write++, read++
 * Only the holder whose turn it is changes `read`/`write`, but other lockers
 * fetch-add `next` at the same time, so those updates are CAS loops on the
 * whole word that keep the counters from carrying into each other.
 * Up to 65535 lockers may wait on one lock at once.
 */
#ifndef OS_LOCK_H
#define OS_LOCK_H

#include "../util/os_util.h"

typedef _Atomic uint64_t os_lockword_t;

#define OS_LOCK_NEXT_ONE (1ull << 32)

static inline uint16_t os_lock_write_field(uint64_t w) { return (uint16_t)w; }
static inline uint16_t os_lock_read_field(uint64_t w) { return (uint16_t)(w >> 16); }
static inline uint16_t os_lock_next_field(uint64_t w) { return (uint16_t)(w >> 32); }

/* Add (dw, dr) to the write and read counters, each modulo 2^16. */
static inline void os_lock_bump(os_lockword_t *l, unsigned dw, unsigned dr)
{
    uint64_t old = atomic_load_explicit(l, memory_order_relaxed), nw;
    do {
        uint64_t w = (uint16_t)(os_lock_write_field(old) + dw);
        uint64_t r = (uint16_t)(os_lock_read_field(old) + dr);
        nw = (old & ~0xffffffffull) | (r << 16) | w;
    } while (!atomic_compare_exchange_weak_explicit(l, &old, nw, memory_order_acq_rel,
                                                    memory_order_relaxed));
}

/* Draw a ticket. Returns it; the caller then waits for its turn. */
static inline uint16_t os_lock_ticket(os_lockword_t *l)
{
    return os_lock_next_field(atomic_fetch_add_explicit(l, OS_LOCK_NEXT_ONE, memory_order_acq_rel));
}

/* Returns true when the ticket's turn has come (acquire ordering). */
static inline bool os_lock_excl_ready(os_lockword_t *l, uint16_t me)
{
    return os_lock_write_field(atomic_load_explicit(l, memory_order_acquire)) == me;
}
static inline bool os_lock_shared_ready(os_lockword_t *l, uint16_t me)
{
    return os_lock_read_field(atomic_load_explicit(l, memory_order_acquire)) == me;
}

/* A reader's ticket: go in if its turn has come, admitting the next ticket
 * if that is a reader too. Returns false (and changes nothing) otherwise. */
static inline bool os_lock_shared_enter(os_lockword_t *l, uint16_t me)
{
    if (!os_lock_shared_ready(l, me))
        return false;
    os_lock_bump(l, 0, 1);
    return true;
}

/* Blocking forms; `contended` (may be NULL) is set when the lock was not free.
 * The wait forms take a ticket drawn already (so that a caller can show it). */
static inline void os_lock_wait_excl(os_lockword_t *l, uint16_t me, bool *contended)
{
    os_backoff_t b = OS_BACKOFF_INIT;
    bool waited = false;
    while (!os_lock_excl_ready(l, me)) {
        waited = true;
        os_backoff_wait(&b);
    }
    if (contended)
        *contended = waited;
}

static inline void os_lock_acquire_excl(os_lockword_t *l, bool *contended)
{
    os_lock_wait_excl(l, os_lock_ticket(l), contended);
}

static inline void os_lock_release_excl(os_lockword_t *l)
{
    os_lock_bump(l, 1, 1);
}

static inline void os_lock_wait_shared(os_lockword_t *l, uint16_t me, bool *contended)
{
    os_backoff_t b = OS_BACKOFF_INIT;
    bool waited = false;
    while (!os_lock_shared_enter(l, me)) {
        waited = true;
        os_backoff_wait(&b);
    }
    if (contended)
        *contended = waited;
}

static inline void os_lock_acquire_shared(os_lockword_t *l, bool *contended)
{
    os_lock_wait_shared(l, os_lock_ticket(l), contended);
}

static inline void os_lock_release_shared(os_lockword_t *l)
{
    os_lock_bump(l, 1, 0);
}

/* os_lock_release_excl for a word only CPU atomics touch (a window of one
 * node: no network atomics on it), as one plain store. While a ticket is
 * held exclusively nobody else writes the low half (the write and read
 * fields): earlier tickets are all released, later ones only wait (a reader
 * enters when read reaches its ticket, which only this release does), and
 * arrivals add to next, the high half. So a 32-bit release store of the low
 * half frees the lock without the read-modify-write of os_lock_bump and
 * without losing a concurrent arrival (x86-64 and AArch64 keep accesses of
 * different sizes to one word coherent; the little-endian low half is the
 * first 4 bytes). */
static inline void os_lock_release_excl_local(os_lockword_t *l)
{
    _Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the low half comes first");
    uint64_t w = atomic_load_explicit(l, memory_order_relaxed);
    uint32_t low = ((uint32_t)(uint16_t)(os_lock_read_field(w) + 1) << 16) |
                   (uint16_t)(os_lock_write_field(w) + 1);
    __atomic_store_n((uint32_t *)(void *)l, low, __ATOMIC_RELEASE);
}

/* The exclusive holder becomes a shared one: readers queued behind it go in,
 * writers keep waiting. Release it with os_lock_release_shared. */
static inline void os_lock_downgrade(os_lockword_t *l)
{
    os_lock_bump(l, 0, 1);
}

/* The shared holder of ticket `me` becomes the exclusive one, if nobody else
 * holds or waits for the lock: every earlier ticket is released (write == me)
 * and none was drawn after it (next == me + 1); only `read` still shows the
 * ticket as a reader's. Never waits. Release with os_lock_release_excl. */
static inline bool os_lock_try_upgrade(os_lockword_t *l, uint16_t me)
{
    uint64_t w = atomic_load_explicit(l, memory_order_acquire);
    if (os_lock_write_field(w) != me || os_lock_next_field(w) != (uint16_t)(me + 1))
        return false;
    uint64_t nw = (w & ~(0xffffull << 16)) | ((uint64_t)me << 16);
    return atomic_compare_exchange_strong_explicit(l, &w, nw, memory_order_acq_rel,
                                                   memory_order_acquire);
}

/* Take the lock exclusively only if nobody holds or waits for it; never
 * waits (for code that runs inside network progress). */
static inline bool os_lock_try_excl(os_lockword_t *l)
{
    uint64_t w = atomic_load_explicit(l, memory_order_relaxed);
    if (os_lock_write_field(w) != os_lock_next_field(w))
        return false;
    return atomic_compare_exchange_strong_explicit(l, &w, w + OS_LOCK_NEXT_ONE,
                                                   memory_order_acq_rel, memory_order_relaxed);
}

/* True when nobody holds or waits for the lock. */
static inline bool os_lock_idle(os_lockword_t *l)
{
    uint64_t w = atomic_load_explicit(l, memory_order_acquire);
    return os_lock_write_field(w) == os_lock_next_field(w);
}

#endif
