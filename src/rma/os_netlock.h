/*
 * Passive-target locks between nodes (paper 000): the network lock word, the
 * hybrid lock's migration, and the migration policies, written as explicit
 * state machines over plain values so that they can be tested without MPI or
 * a network (tests/unit/test_netlock.c drives them with threads).
 *
 * The network lock word (64 bits, in memory registered with UCX, changed only
 * with network atomics by lockers and with CPU atomics by the owner's lock
 * manager; UCX's "cpu" atomic mode makes the two coherent):
 *   bit 63  PARKED  the lock lives on the CPU side (hybrid, CPU mode): a
 *                   network locker must ask the lock manager instead
 *   bit 62  WRITER  held exclusively
 *   bit 61  WANT    an exclusive locker waits: new shared lockers hold off,
 *                   so a stream of readers cannot starve a writer
 *   bit 60  BRIDGE  the node's side holds the lock shared (hybrid, shared
 *                   mode): network readers may enter, network writers wait
 *   bits 0-31       shared holders
 * Unlike the CPU ticket lock this one is not FIFO: a network locker cannot
 * wait for its turn without polling the target, so it retries with backoff.
 */
#ifndef OS_NETLOCK_H
#define OS_NETLOCK_H

#include "os_lock.h"

#define OS_NL_PARKED (1ull << 63)
#define OS_NL_WRITER (1ull << 62)
#define OS_NL_WANT (1ull << 61)
#define OS_NL_BRIDGE (1ull << 60)
#define OS_NL_READERS 0xffffffffull

/* One network atomic the state machine asks for (the transport's op codes). */
typedef enum { OS_NL_ADD, OS_NL_CSWAP, OS_NL_OR } os_nl_amo_op_t;
typedef struct {
    os_nl_amo_op_t op;
    uint64_t value;   /* ADD: addend (two's complement); OR: bits; CSWAP: new */
    uint64_t compare; /* CSWAP only */
} os_nl_amo_t;

/* ------------------------------------------------ acquiring the network lock */

typedef enum {
    OS_NL_S_EXCL_CAS,    /* exclusive: CAS(compare -> WRITER) */
    OS_NL_S_EXCL_WANT,   /* exclusive: OR(WANT), then back off */
    OS_NL_S_SHARED_ADD,  /* shared: ADD(+1) */
    OS_NL_S_SHARED_UNDO, /* shared: ADD(-1) after a refusal */
    OS_NL_S_GOT,         /* done: held */
    OS_NL_S_PARKED,      /* done: the lock is on the CPU side; ask the manager */
} os_nl_state_t;

/* What the caller does next. */
typedef enum { OS_NL_DO_AMO, OS_NL_DO_BACKOFF, OS_NL_DO_GOT, OS_NL_DO_PARKED } os_nl_action_t;

typedef struct {
    bool exclusive;
    os_nl_state_t state;
    uint64_t guess;   /* exclusive: the value the next CAS expects */
    bool saw_parked;  /* shared: the refusal was PARKED */
    bool backoff;     /* back off before the next atomic */
} os_nl_fsm_t;

static inline void os_nl_start(os_nl_fsm_t *f, bool exclusive)
{
    *f = (os_nl_fsm_t){ .exclusive = exclusive,
                        .state = exclusive ? OS_NL_S_EXCL_CAS : OS_NL_S_SHARED_ADD };
}

/* The next step: the atomic to do (then os_nl_feed its old value), a backoff
 * (then call again), or an end. */
static inline os_nl_action_t os_nl_next(os_nl_fsm_t *f, os_nl_amo_t *amo)
{
    if (f->backoff) {
        f->backoff = false;
        return OS_NL_DO_BACKOFF;
    }
    switch (f->state) {
    case OS_NL_S_EXCL_CAS:
        *amo = (os_nl_amo_t){ OS_NL_CSWAP, OS_NL_WRITER, f->guess };
        return OS_NL_DO_AMO;
    case OS_NL_S_EXCL_WANT:
        *amo = (os_nl_amo_t){ OS_NL_OR, OS_NL_WANT, 0 };
        return OS_NL_DO_AMO;
    case OS_NL_S_SHARED_ADD:
        *amo = (os_nl_amo_t){ OS_NL_ADD, 1, 0 };
        return OS_NL_DO_AMO;
    case OS_NL_S_SHARED_UNDO:
        *amo = (os_nl_amo_t){ OS_NL_ADD, (uint64_t)-1, 0 };
        return OS_NL_DO_AMO;
    case OS_NL_S_GOT:
        return OS_NL_DO_GOT;
    case OS_NL_S_PARKED:
    default:
        return OS_NL_DO_PARKED;
    }
}

/* The old value the atomic returned. */
static inline void os_nl_feed(os_nl_fsm_t *f, uint64_t old)
{
    switch (f->state) {
    case OS_NL_S_EXCL_CAS:
        if (old == f->guess) {
            f->state = OS_NL_S_GOT; /* free (maybe with our WANT): now ours */
        } else if (old & OS_NL_PARKED) {
            f->state = OS_NL_S_PARKED;
        } else if (!(old & ~OS_NL_WANT)) {
            f->guess = old; /* free, we guessed the WANT bit wrong: retry at once */
        } else if (!(old & OS_NL_WANT)) {
            f->state = OS_NL_S_EXCL_WANT; /* held: announce ourselves */
        } else {
            f->guess = OS_NL_WANT;
            f->backoff = true;
        }
        break;
    case OS_NL_S_EXCL_WANT:
        f->guess = OS_NL_WANT;
        f->state = (old & OS_NL_PARKED) ? OS_NL_S_PARKED : OS_NL_S_EXCL_CAS;
        f->backoff = f->state == OS_NL_S_EXCL_CAS;
        break;
    case OS_NL_S_SHARED_ADD:
        if (!(old & (OS_NL_WRITER | OS_NL_WANT | OS_NL_PARKED))) {
            f->state = OS_NL_S_GOT;
        } else {
            f->saw_parked = (old & OS_NL_PARKED) != 0;
            f->state = OS_NL_S_SHARED_UNDO;
        }
        break;
    case OS_NL_S_SHARED_UNDO:
        f->state = f->saw_parked ? OS_NL_S_PARKED : OS_NL_S_SHARED_ADD;
        f->backoff = !f->saw_parked;
        break;
    default:
        break;
    }
}

/* Releasing: one atomic, no answer needed. */
static inline os_nl_amo_t os_nl_release(bool exclusive)
{
    return (os_nl_amo_t){ OS_NL_ADD, exclusive ? (uint64_t)-OS_NL_WRITER : (uint64_t)-1, 0 };
}

/* ----------------------------------- the lock manager's side (CPU atomics) */

/* Unpark it, granting it to the requester that caused the migration in the
 * same atomic step: exclusively (network mode), or shared with BRIDGE set
 * (shared mode: the node's readers still hold the CPU lock). Shared lockers
 * that saw PARKED may still have their +1 in the count; each takes it back
 * itself. A WANT bit left from before the parking is dropped: its writer saw
 * PARKED and asked the manager. */
static inline void os_nl_unpark_grant(_Atomic uint64_t *word, bool exclusive)
{
    uint64_t old = atomic_load_explicit(word, memory_order_acquire), nw;
    do {
        nw = (old & OS_NL_READERS) + (exclusive ? OS_NL_WRITER : 1 + OS_NL_BRIDGE);
    } while (!atomic_compare_exchange_weak_explicit(word, &old, nw, memory_order_acq_rel,
                                                    memory_order_acquire));
}

/* --------------------------------------------------- migration policies */

typedef enum {
    OS_LOCK_POLICY_PAPER = 0,   /* paper 000: a request from the wrong side always migrates */
    OS_LOCK_POLICY_HISTORY = 1, /* migrate after `streak` requests in a row from the other side */
    OS_LOCK_POLICY_RANDOM = 2,  /* migrate with probability 1/2 (tests) */
} os_lock_policy_t;

/* Should a lock move to the other side for a request from that side?
 * `evidence` counts that side's requests:
 *   to network: the remote requests the manager saw since the last local
 *     locker (the ticket counter tells it about those);
 *   back to CPU: the local lockers that used the network word since the
 *     lock migrated there. Remote lockers in network mode are invisible to
 *     the node, so under mixed traffic the lock goes back to the CPU after
 *     `streak` local lockers and stays there, since remote requests never
 *     reach a streak: no ping-pong. */
static inline bool os_lock_policy_migrate(os_lock_policy_t p, uint64_t evidence,
                                          unsigned streak, uint64_t *rng)
{
    switch (p) {
    case OS_LOCK_POLICY_PAPER:
        return true;
    case OS_LOCK_POLICY_HISTORY:
        return evidence >= streak;
    default:
        *rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
        return (*rng >> 33) & 1;
    }
}

/* ------------------------------------------ the hybrid lock's manager */

/* The mode variable in node shared memory, read by the node's lockers:
 * CPU: take the CPU ticket lock; NET: take the network word (or draw a CPU
 * ticket, which asks the manager to bring the lock back). */
enum { OS_LOCKMODE_CPU = 0, OS_LOCKMODE_NET = 1 };

/*
 * The lock manager of one process's hybrid lock (paper 000, Figure 5), run by
 * that process (its progress thread). The lock is one reader-writer lock made
 * of two: the CPU ticket lock and the network word. The manager holds one of
 * them on behalf of the other side's lockers:
 *   CPU       the network word is PARKED: other nodes ask the manager, which
 *             draws CPU tickets for them
 *   NET       the manager holds the CPU lock exclusively (its "park" ticket);
 *             every locker may use the network word
 *   SHARED    the manager holds the CPU lock shared and the word has BRIDGE:
 *             readers of both sides go in one-sidedly, each on its own word;
 *             a writer of either side sends the lock back to the CPU side
 *             (or, for a network writer when the node holds nothing, on to
 *             NET)
 * and the transitions between them:
 *   TO_NET    an exclusive remote request migrates the lock: the park ticket
 *             waits for the node's holders ahead of it
 *   TO_SHARED a shared remote request migrates it: the manager's shared
 *             ticket waits for the node's writers ahead of it (not readers)
 *   TO_CPU    a node's locker waits behind the manager's CPU ticket: the word
 *             is PARKED (no new network locker) and the manager waits for the
 *             network holders; once no network writer holds it, the manager's
 *             hold is shared, so the node's readers go in at once
 *
 * The rule that keeps migration from deadlocking a correct program: a
 * migration never makes a locker wait for a holder it is compatible with.
 * A migration for a reader waits only for writers, and a node's reader that
 * brings the lock back waits only for network writers. A program whose
 * readers hold the lock while they wait for each other (a lock_all held
 * across a spin on a flag) therefore runs as it does on one plain
 * reader-writer lock, whichever side its processes are on.
 *
 * The invariant that makes this one lock: while anybody holds one side, the
 * manager holds the other on that holder's behalf, exclusively if a writer
 * may be among them, shared (BRIDGE, or a shared CPU ticket) while only
 * readers are. The mode variable only tells the node's lockers which side to
 * try; a stale read costs a retry (the word is PARKED) or a CPU ticket that
 * asks the manager to come back, never a wrong grant.
 */
typedef enum {
    OS_HYB_CPU,
    OS_HYB_TO_NET,
    OS_HYB_TO_SHARED,
    OS_HYB_NET,
    OS_HYB_SHARED,
    OS_HYB_TO_CPU,
} os_hyb_state_t;

typedef struct {
    os_lockword_t *cpu;            /* the CPU ticket lock */
    _Atomic uint64_t *mode;        /* OS_LOCKMODE_* */
    _Atomic uint64_t *local_count; /* local lockers that used the network lock */
    _Atomic uint64_t *net;         /* the network lock word */
    os_hyb_state_t state;
    uint16_t park;                 /* every state but CPU: the manager's CPU ticket */
    bool park_shared;              /* that ticket is held (or wanted) shared */
    uint16_t seen_next;            /* the ticket counter after the manager's last ticket */
    uint16_t stalled;              /* SHARED: the CPU ticket seen waiting at the last poll */
    bool stalled_seen;             /* ... and whether there was one */
    uint64_t remote_streak;        /* remote requests since the last local locker */
    uint64_t rng;
    uint64_t to_net, to_cpu;       /* migrations done (to_net: to NET or SHARED) */
} os_hyb_mgr_t;

/* How the manager answers a remote request that found the word PARKED. */
typedef enum {
    OS_HYB_R_MANAGER,   /* granted on the CPU lock: wait for os_hyb_last_ticket */
    OS_HYB_R_MIGRATING, /* it migrates the lock: granted with the network word once
                           os_hyb_migrating is false */
    OS_HYB_R_WAIT,      /* a migration is under way: answer "retry" when it ends */
    OS_HYB_R_RETRY,     /* the word is open: retry with network atomics */
} os_hyb_reply_t;

static inline void os_hyb_init(os_hyb_mgr_t *m, os_lockword_t *cpu, _Atomic uint64_t *mode,
                               _Atomic uint64_t *local_count, _Atomic uint64_t *net,
                               uint64_t seed)
{
    *m = (os_hyb_mgr_t){ .cpu = cpu, .mode = mode, .local_count = local_count, .net = net,
                         .state = OS_HYB_CPU, .rng = seed | 1 };
    atomic_store_explicit(net, OS_NL_PARKED, memory_order_relaxed);
    atomic_store_explicit(mode, OS_LOCKMODE_CPU, memory_order_release);
}

/* A migration to the network side waits for the CPU lock. */
static inline bool os_hyb_migrating(const os_hyb_mgr_t *m)
{
    return m->state == OS_HYB_TO_NET || m->state == OS_HYB_TO_SHARED;
}

/* A request from another node; `may_migrate` is false when the network side
 * could not be served without this process (no progress thread). */
static inline os_hyb_reply_t os_hyb_request(os_hyb_mgr_t *m, bool exclusive, bool may_migrate,
                                            os_lock_policy_t policy, unsigned streak)
{
    switch (m->state) {
    case OS_HYB_NET:
    case OS_HYB_SHARED:
        return OS_HYB_R_RETRY; /* a stale request: the word is not parked */
    case OS_HYB_TO_NET:
    case OS_HYB_TO_SHARED:
        return OS_HYB_R_WAIT; /* behind a writer of the node, as its ticket would be */
    case OS_HYB_TO_CPU:
        /* The node's lockers are coming back: queue with them, in order. */
        m->seen_next = (uint16_t)(os_lock_ticket(m->cpu) + 1);
        return OS_HYB_R_MANAGER;
    case OS_HYB_CPU:
    default:
        break;
    }
    uint16_t next = os_lock_next_field(atomic_load_explicit(m->cpu, memory_order_acquire));
    if (next != m->seen_next)
        m->remote_streak = 0; /* the node's own lockers came in between */
    m->remote_streak++;
    bool migrate = may_migrate && os_lock_policy_migrate(policy, m->remote_streak, streak, &m->rng);
    uint16_t ticket = os_lock_ticket(m->cpu);
    m->seen_next = (uint16_t)(ticket + 1);
    if (!migrate)
        return OS_HYB_R_MANAGER;
    m->park = ticket;
    m->park_shared = !exclusive;
    m->state = exclusive ? OS_HYB_TO_NET : OS_HYB_TO_SHARED;
    return OS_HYB_R_MIGRATING;
}

/* The ticket os_hyb_request drew for an R_MANAGER answer. */
static inline uint16_t os_hyb_last_ticket(const os_hyb_mgr_t *m)
{
    return (uint16_t)(m->seen_next - 1);
}

typedef enum { OS_HYB_EV_NONE, OS_HYB_EV_NET_READY, OS_HYB_EV_CPU_READY } os_hyb_event_t;

/* The manager holds the CPU lock exclusively: open the word to everybody. */
static inline void os_hyb_enter_net(os_hyb_mgr_t *m)
{
    m->park_shared = false;
    atomic_store_explicit(m->local_count, 0, memory_order_relaxed);
    atomic_store_explicit(m->mode, OS_LOCKMODE_NET, memory_order_release);
    atomic_fetch_and_explicit(m->net, ~OS_NL_BRIDGE, memory_order_acq_rel);
    m->state = OS_HYB_NET;
}

/* Network mode from the start, for a lock whose lockers all reach the word
 * as cheaply as the CPU lock (os_hyb_stays_on_word): as if a remote writer
 * had migrated it and left. Only before anybody can lock it (the CPU lock
 * is free, so the park ticket is served at once). */
static inline void os_hyb_start_net(os_hyb_mgr_t *m)
{
    m->park = os_lock_ticket(m->cpu);
    m->seen_next = (uint16_t)(m->park + 1);
    os_hyb_enter_net(m);
    atomic_store_explicit(m->net, 0, memory_order_release); /* open, nobody in */
    m->to_net++;
}

/* Advance the manager; called often (never blocks). NET_READY: a migration
 * to the network side is done and its requester holds the word (grant it;
 * answer the waiting ones "retry"). CPU_READY: back in CPU mode. */
static inline os_hyb_event_t os_hyb_poll(os_hyb_mgr_t *m)
{
    switch (m->state) {
    case OS_HYB_TO_NET:
        if (!os_lock_excl_ready(m->cpu, m->park))
            return OS_HYB_EV_NONE;
        /* Both locks are ours: the CPU lock by the park ticket, the network
         * word by PARKED. Publish the mode, then let the requester in. */
        os_hyb_enter_net(m);
        os_nl_unpark_grant(m->net, true);
        m->to_net++;
        return OS_HYB_EV_NET_READY;
    case OS_HYB_TO_SHARED:
        if (!os_lock_shared_enter(m->cpu, m->park))
            return OS_HYB_EV_NONE;
        /* The mode stays CPU: the node's lockers keep their own lock. */
        os_nl_unpark_grant(m->net, false);
        m->stalled_seen = false;
        m->state = OS_HYB_SHARED;
        m->to_net++;
        return OS_HYB_EV_NET_READY;
    case OS_HYB_SHARED: {
        uint64_t c = atomic_load_explicit(m->cpu, memory_order_acquire);
        uint16_t waiting = os_lock_read_field(c);
        if (waiting == os_lock_next_field(c)) {
            m->stalled_seen = false;
        } else if (m->stalled_seen && m->stalled == waiting) {
            /* The same ticket is still not admitted: a writer of the node
             * waits for the network readers (a reader would have gone in;
             * one poll of grace lets a reader that just drew its ticket
             * do so). Close the word to newcomers and drain it. */
            m->stalled_seen = false;
            atomic_fetch_or_explicit(m->net, OS_NL_PARKED, memory_order_acq_rel);
            m->state = OS_HYB_TO_CPU;
            return os_hyb_poll(m);
        } else {
            m->stalled_seen = true;
            m->stalled = waiting;
        }
        if (!(atomic_load_explicit(m->net, memory_order_acquire) & OS_NL_WANT))
            return OS_HYB_EV_NONE;
        /* A network writer waits: it needs the node's readers gone too. If
         * nobody of the node holds the CPU lock, take it outright. */
        if (os_lock_try_upgrade(m->cpu, m->park)) {
            os_hyb_enter_net(m);
            return OS_HYB_EV_NONE;
        }
        /* Otherwise go back to the CPU side: the writer sees PARKED and
         * queues on the CPU lock behind the node's readers. (Queueing a
         * writer's ticket for it while keeping the word open would let a
         * node writer ahead of that ticket in beside the network readers.) */
        atomic_fetch_or_explicit(m->net, OS_NL_PARKED, memory_order_acq_rel);
        m->state = OS_HYB_TO_CPU;
        return os_hyb_poll(m);
    }
    case OS_HYB_NET: {
        uint16_t next = os_lock_next_field(atomic_load_explicit(m->cpu, memory_order_acquire));
        if ((uint16_t)(next - m->park) == 1)
            return OS_HYB_EV_NONE; /* nobody of the node waits for the CPU lock */
        atomic_fetch_or_explicit(m->net, OS_NL_PARKED, memory_order_acq_rel);
        m->state = OS_HYB_TO_CPU;
    }
        /* fall through */
    case OS_HYB_TO_CPU: {
        /* PARKED is set, so no locker enters the word from here on; read it
         * after setting PARKED to see every writer that got in before. */
        uint64_t old = atomic_load_explicit(m->net, memory_order_acquire);
        if (!m->park_shared && !(old & OS_NL_WRITER)) {
            /* Only network readers remain: hold the CPU lock shared, so the
             * node's readers go in beside them; its writers still wait. */
            os_lock_downgrade(m->cpu);
            m->park_shared = true;
            atomic_store_explicit(m->mode, OS_LOCKMODE_CPU, memory_order_release);
        }
        if (old & ~(OS_NL_PARKED | OS_NL_WANT | OS_NL_BRIDGE))
            return OS_HYB_EV_NONE; /* network holders (or a reader's passing +1) */
        if (!atomic_compare_exchange_strong_explicit(m->net, &old, OS_NL_PARKED,
                                                     memory_order_acq_rel, memory_order_acquire))
            return OS_HYB_EV_NONE;
        atomic_store_explicit(m->mode, OS_LOCKMODE_CPU, memory_order_release);
        m->remote_streak = 0;
        m->seen_next = os_lock_next_field(atomic_load_explicit(m->cpu, memory_order_acquire));
        if (m->park_shared)
            os_lock_release_shared(m->cpu);
        else
            os_lock_release_excl(m->cpu);
        m->state = OS_HYB_CPU;
        m->to_cpu++;
        return OS_HYB_EV_CPU_READY;
    }
    case OS_HYB_CPU:
    default:
        return OS_HYB_EV_NONE;
    }
}

#endif
