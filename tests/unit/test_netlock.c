/* Locks between nodes (os_netlock.h): the network lock word's state machine,
 * the hybrid lock's manager and its migration policies; transitions one by
 * one, then the races under real threads. C11 atomics stand in for the
 * network's atomic unit (UCX's "cpu" atomic mode does the same). */
#include "rma/os_netlock.h"
#include "unit.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

/* Run an atomic the state machine asks for; returns the old value. */
static uint64_t amo(_Atomic uint64_t *word, const os_nl_amo_t *a)
{
    switch (a->op) {
    case OS_NL_ADD:
        return atomic_fetch_add(word, a->value);
    case OS_NL_OR:
        return atomic_fetch_or(word, a->value);
    default: {
        uint64_t old = a->compare;
        atomic_compare_exchange_strong(word, &old, a->value);
        return old;
    }
    }
}

/* Acquire with the state machine; returns OS_NL_DO_GOT or OS_NL_DO_PARKED. */
static os_nl_action_t nl_acquire(_Atomic uint64_t *word, bool excl, int max_rounds)
{
    os_nl_fsm_t f;
    os_nl_amo_t a;
    os_nl_action_t act;
    os_nl_start(&f, excl);
    for (int i = 0; max_rounds < 0 || i < max_rounds; i++) {
        act = os_nl_next(&f, &a);
        if (act == OS_NL_DO_AMO)
            os_nl_feed(&f, amo(word, &a));
        else if (act == OS_NL_DO_BACKOFF)
            unit_wait_step();
        else
            return act;
    }
    return OS_NL_DO_BACKOFF; /* still trying */
}

static void nl_release(_Atomic uint64_t *word, bool excl)
{
    os_nl_amo_t a = os_nl_release(excl);
    amo(word, &a);
}

static void test_nl_transitions(void)
{
    _Atomic uint64_t w = 0;
    CHECK(nl_acquire(&w, true, 10) == OS_NL_DO_GOT && w == OS_NL_WRITER, "free word: exclusive");
    /* A reader is refused by the writer and undoes its increment. */
    CHECK(nl_acquire(&w, false, 3) != OS_NL_DO_GOT, "reader refused while a writer holds");
    CHECK(w == OS_NL_WRITER, "reader took its +1 back: %llx", (unsigned long long)w);
    /* A second writer announces itself with WANT and keeps trying. */
    CHECK(nl_acquire(&w, true, 4) != OS_NL_DO_GOT, "second writer waits");
    CHECK(w == (OS_NL_WRITER | OS_NL_WANT), "WANT set: %llx", (unsigned long long)w);
    nl_release(&w, true);
    CHECK(w == OS_NL_WANT, "release keeps WANT");
    CHECK(nl_acquire(&w, false, 3) != OS_NL_DO_GOT && w == OS_NL_WANT,
          "a new reader holds off for the waiting writer");
    CHECK(nl_acquire(&w, true, 10) == OS_NL_DO_GOT && w == OS_NL_WRITER,
          "the writer takes it and clears WANT");
    nl_release(&w, true);
    CHECK(nl_acquire(&w, false, 3) == OS_NL_DO_GOT && nl_acquire(&w, false, 3) == OS_NL_DO_GOT &&
              w == 2, "two readers");
    nl_release(&w, false);
    nl_release(&w, false);
    CHECK(w == 0, "free again");
    /* Parked: both kinds report it, and leave the word as they found it. */
    w = OS_NL_PARKED;
    CHECK(nl_acquire(&w, true, 10) == OS_NL_DO_PARKED && w == OS_NL_PARKED, "writer sees PARKED");
    CHECK(nl_acquire(&w, false, 10) == OS_NL_DO_PARKED && w == OS_NL_PARKED, "reader sees PARKED");
}

static void test_policies(void)
{
    uint64_t rng = 1;
    CHECK(os_lock_policy_migrate(OS_LOCK_POLICY_PAPER, 1, 4, &rng), "paper: migrate at once");
    CHECK(os_lock_policy_migrate(OS_LOCK_POLICY_PAPER, 0, 4, &rng), "paper: migrate with no history");
    CHECK(!os_lock_policy_migrate(OS_LOCK_POLICY_HISTORY, 3, 4, &rng) &&
              os_lock_policy_migrate(OS_LOCK_POLICY_HISTORY, 4, 4, &rng), "history: after a streak");
    int yes = 0;
    for (int i = 0; i < 1000; i++)
        yes += os_lock_policy_migrate(OS_LOCK_POLICY_RANDOM, 0, 4, &rng);
    CHECK(yes > 400 && yes < 600, "random: about half (%d of 1000)", yes);
}

/* The hybrid manager's transitions, one by one, including both races. */
static void test_hybrid_transitions(void)
{
    os_lockword_t cpu = 0;
    _Atomic uint64_t mode, count, net;
    os_hyb_mgr_t m;
    os_hyb_init(&m, &cpu, &mode, &count, &net, 7);
    CHECK(mode == OS_LOCKMODE_CPU && net == OS_NL_PARKED, "starts in CPU mode, word parked");

    /* Race 1: a migration against a local locker. The local holds the CPU
     * lock when the remote request arrives: the migration waits for it. */
    os_lock_acquire_excl(&cpu, NULL);
    CHECK(os_hyb_request(&m, true, true, OS_LOCK_POLICY_PAPER, 4) == OS_HYB_R_MIGRATING,
          "remote request migrates (paper policy)");
    CHECK(os_hyb_poll(&m) == OS_HYB_EV_NONE && mode == OS_LOCKMODE_CPU,
          "migration waits for the local holder");
    CHECK(os_hyb_request(&m, false, true, OS_LOCK_POLICY_PAPER, 4) == OS_HYB_R_WAIT,
          "a second remote request waits for the migration");
    os_lock_release_excl(&cpu);
    CHECK(os_hyb_poll(&m) == OS_HYB_EV_NET_READY && mode == OS_LOCKMODE_NET,
          "network mode once the local left");
    CHECK(net == OS_NL_WRITER, "the migrating requester holds the word exclusively");
    CHECK(os_hyb_request(&m, false, true, OS_LOCK_POLICY_PAPER, 4) == OS_HYB_R_RETRY,
          "in network mode a stale request is told to retry");
    CHECK(os_hyb_poll(&m) == OS_HYB_EV_NONE, "nothing to do without local lockers");

    /* Race 2: a migration back against a remote locker. A local draws a
     * ticket; the remote still holds the word, so the migration waits, and
     * new network lockers see PARKED. */
    uint16_t t = os_lock_ticket(&cpu);
    CHECK(!os_lock_excl_ready(&cpu, t), "local waits behind the park ticket");
    CHECK(os_hyb_poll(&m) == OS_HYB_EV_NONE && m.state == OS_HYB_TO_CPU, "migration back starts");
    CHECK(nl_acquire(&net, false, 10) == OS_NL_DO_PARKED, "new remote reader is sent to the manager");
    CHECK(os_hyb_request(&m, false, true, OS_LOCK_POLICY_PAPER, 4) == OS_HYB_R_MANAGER,
          "and queues on the CPU lock behind the local");
    uint16_t rt = os_hyb_last_ticket(&m);
    nl_release(&net, true); /* the remote holder leaves */
    CHECK(os_hyb_poll(&m) == OS_HYB_EV_CPU_READY && mode == OS_LOCKMODE_CPU && net == OS_NL_PARKED,
          "CPU mode again");
    CHECK(os_lock_excl_ready(&cpu, t) && !os_lock_shared_ready(&cpu, rt), "the local goes in first");
    os_lock_release_excl(&cpu);
    CHECK(os_lock_shared_enter(&cpu, rt), "then the remote reader");
    os_lock_release_shared(&cpu);
    CHECK(m.to_net == 1 && m.to_cpu == 1, "two migrations counted");

    /* History policy: a remote streak broken by local lockers never migrates. */
    for (int i = 0; i < 20; i++) {
        os_lock_acquire_shared(&cpu, NULL); /* a local locker */
        os_lock_release_shared(&cpu);
        os_hyb_reply_t r = os_hyb_request(&m, true, true, OS_LOCK_POLICY_HISTORY, 2);
        CHECK(r == OS_HYB_R_MANAGER, "mixed traffic: served by the manager (round %d)", i);
        uint16_t mt = os_hyb_last_ticket(&m);
        CHECK(os_lock_excl_ready(&cpu, mt), "manager ticket ready");
        os_lock_release_excl(&cpu);
    }
    os_lock_acquire_shared(&cpu, NULL); /* a local locker breaks the streak */
    os_lock_release_shared(&cpu);
    CHECK(os_hyb_request(&m, true, true, OS_LOCK_POLICY_HISTORY, 2) == OS_HYB_R_MANAGER,
          "streak of one");
    os_lock_release_excl(&cpu);
    CHECK(os_hyb_request(&m, true, true, OS_LOCK_POLICY_HISTORY, 2) == OS_HYB_R_MIGRATING,
          "streak of two migrates");
    CHECK(os_hyb_poll(&m) == OS_HYB_EV_NET_READY, "network mode");
    nl_release(&net, true);
    CHECK(os_hyb_request(&m, true, false, OS_LOCK_POLICY_PAPER, 2) == OS_HYB_R_RETRY, "retry");
}

/* Readers never wait for readers, whichever side they are on and whatever
 * migration is under way: a program whose readers hold the lock while they
 * wait for each other (mpi4py's condition variables spin under lock_all)
 * deadlocked when a migration made a reader wait behind a reader. */
static void test_hybrid_readers(void)
{
    os_lockword_t cpu = 0;
    _Atomic uint64_t mode, count, net;
    os_hyb_mgr_t m;
    os_hyb_init(&m, &cpu, &mode, &count, &net, 7);

    /* A node's reader holds the lock; a remote reader migrates it. */
    uint16_t l1 = os_lock_ticket(&cpu);
    CHECK(os_lock_shared_enter(&cpu, l1), "node reader 1 in");
    CHECK(os_hyb_request(&m, false, true, OS_LOCK_POLICY_PAPER, 4) == OS_HYB_R_MIGRATING,
          "a remote reader migrates the lock");
    CHECK(os_hyb_poll(&m) == OS_HYB_EV_NET_READY && m.state == OS_HYB_SHARED,
          "shared mode at once: the remote reader does not wait for the node's reader");
    CHECK(net == (OS_NL_BRIDGE | 1) && mode == OS_LOCKMODE_CPU,
          "the word holds the remote reader beside the node's (%llx)", (unsigned long long)net);
    uint16_t l2 = os_lock_ticket(&cpu);
    CHECK(os_lock_shared_enter(&cpu, l2), "a new node reader goes in on the CPU lock");
    CHECK(nl_acquire(&net, false, 3) == OS_NL_DO_GOT, "a new remote reader goes in one-sidedly");
    CHECK(os_hyb_poll(&m) == OS_HYB_EV_NONE && m.state == OS_HYB_SHARED, "readers: nothing moves");

    /* A network writer waits for every reader: the lock goes back to the
     * CPU side, where the writer queues behind the readers of both sides. */
    CHECK(nl_acquire(&net, true, 4) != OS_NL_DO_GOT && (net & OS_NL_WANT), "network writer waits");
    CHECK(os_hyb_poll(&m) == OS_HYB_EV_NONE && m.state == OS_HYB_TO_CPU, "the word closes");
    uint16_t l3 = os_lock_ticket(&cpu);
    CHECK(os_lock_shared_enter(&cpu, l3), "a node reader still goes in");
    CHECK(nl_acquire(&net, true, 4) == OS_NL_DO_PARKED, "the writer is sent to the manager");
    CHECK(os_hyb_request(&m, true, true, OS_LOCK_POLICY_PAPER, 4) == OS_HYB_R_MANAGER,
          "and queued on the CPU lock");
    uint16_t wt = os_hyb_last_ticket(&m);
    nl_release(&net, false);
    CHECK(os_hyb_poll(&m) == OS_HYB_EV_NONE, "one network reader still holds");
    nl_release(&net, false);
    CHECK(os_hyb_poll(&m) == OS_HYB_EV_CPU_READY && net == OS_NL_PARKED, "CPU mode");
    CHECK(!os_lock_excl_ready(&cpu, wt), "the writer waits for the node readers");
    for (int i = 0; i < 3; i++)
        os_lock_release_shared(&cpu);
    CHECK(os_lock_excl_ready(&cpu, wt), "then goes in");
    os_lock_release_excl(&cpu);

    /* Network mode, a network reader holds; a node's reader brings the lock
     * back without waiting for it, and a remote reader then joins them. */
    CHECK(os_hyb_request(&m, true, true, OS_LOCK_POLICY_PAPER, 4) == OS_HYB_R_MIGRATING &&
              os_hyb_poll(&m) == OS_HYB_EV_NET_READY && m.state == OS_HYB_NET, "network mode");
    nl_release(&net, true);
    CHECK(nl_acquire(&net, false, 3) == OS_NL_DO_GOT, "a network reader holds");
    uint16_t l4 = os_lock_ticket(&cpu);
    CHECK(os_hyb_poll(&m) == OS_HYB_EV_NONE && m.state == OS_HYB_TO_CPU, "migration back starts");
    CHECK(os_lock_shared_enter(&cpu, l4) && mode == OS_LOCKMODE_CPU,
          "the node reader goes in while the network reader holds");
    CHECK(os_hyb_request(&m, false, true, OS_LOCK_POLICY_PAPER, 4) == OS_HYB_R_MANAGER &&
              os_lock_shared_enter(&cpu, os_hyb_last_ticket(&m)), "a remote reader goes in too");
    uint16_t l5 = os_lock_ticket(&cpu);
    CHECK(!os_lock_excl_ready(&cpu, l5), "a node writer waits for all three");
    os_lock_release_shared(&cpu);
    os_lock_release_shared(&cpu);
    CHECK(os_hyb_poll(&m) == OS_HYB_EV_NONE && !os_lock_excl_ready(&cpu, l5),
          "and for the network reader");
    nl_release(&net, false);
    CHECK(os_hyb_poll(&m) == OS_HYB_EV_CPU_READY && os_lock_excl_ready(&cpu, l5), "then goes in");
    os_lock_release_excl(&cpu);

    /* Shared mode, a node writer arrives: the word closes and drains. */
    CHECK(os_hyb_request(&m, false, true, OS_LOCK_POLICY_PAPER, 4) == OS_HYB_R_MIGRATING &&
              os_hyb_poll(&m) == OS_HYB_EV_NET_READY && m.state == OS_HYB_SHARED, "shared mode");
    uint16_t l6 = os_lock_ticket(&cpu);
    CHECK(os_hyb_poll(&m) == OS_HYB_EV_NONE && m.state == OS_HYB_SHARED, "one poll of grace");
    CHECK(os_hyb_poll(&m) == OS_HYB_EV_NONE && m.state == OS_HYB_TO_CPU, "then the word closes");
    CHECK(nl_acquire(&net, false, 3) == OS_NL_DO_PARKED, "new network readers go to the manager");
    nl_release(&net, false); /* the migrating remote reader leaves */
    CHECK(os_hyb_poll(&m) == OS_HYB_EV_CPU_READY && os_lock_excl_ready(&cpu, l6),
          "the node writer goes in");
    os_lock_release_excl(&cpu);

    /* Shared mode, nobody of the node holds it, a network writer waits: the
     * manager takes the CPU lock outright. */
    CHECK(os_hyb_request(&m, false, true, OS_LOCK_POLICY_PAPER, 4) == OS_HYB_R_MIGRATING &&
              os_hyb_poll(&m) == OS_HYB_EV_NET_READY, "shared mode");
    CHECK(nl_acquire(&net, true, 4) != OS_NL_DO_GOT, "network writer waits for the reader");
    CHECK(os_hyb_poll(&m) == OS_HYB_EV_NONE && m.state == OS_HYB_NET && !(net & OS_NL_BRIDGE),
          "network mode without queueing");
    nl_release(&net, false);
    CHECK(nl_acquire(&net, true, 10) == OS_NL_DO_GOT && net == OS_NL_WRITER, "the writer is in");
    nl_release(&net, true);
    CHECK(m.to_net == 4 && m.to_cpu == 3, "migrations counted (%llu, %llu)",
          (unsigned long long)m.to_net, (unsigned long long)m.to_cpu);
}

/* ---------------------------------------------------------- the races */

enum { LOCALS = 3, REMOTES = 3, ROUNDS = 4000 };
static os_lockword_t cpu_lock;
static _Atomic uint64_t mode_var, local_count, net_word;
static os_hyb_mgr_t mgr;
static pthread_mutex_t mgr_mutex = PTHREAD_MUTEX_INITIALIZER;
static volatile long counter;
static _Atomic long writers_in, readers_in, overlap, exclusive_done;
static _Atomic int stop_manager;
static os_lock_policy_t policy;

typedef enum { HOLD_CPU, HOLD_NET, HOLD_MGR } hold_t;

/* A request to the manager, answered synchronously here (the real one
 * answers by message; the manager's decisions are the same). */
static hold_t remote_lock(bool excl)
{
    for (;;) {
        if (nl_acquire(&net_word, excl, -1) == OS_NL_DO_GOT)
            return HOLD_NET;
        pthread_mutex_lock(&mgr_mutex);
        os_hyb_reply_t r = os_hyb_request(&mgr, excl, true, policy, 2);
        uint16_t t = os_hyb_last_ticket(&mgr);
        pthread_mutex_unlock(&mgr_mutex);
        if (r == OS_HYB_R_MANAGER) {
            while (!(excl ? os_lock_excl_ready(&cpu_lock, t) : os_lock_shared_enter(&cpu_lock, t)))
                unit_wait_step();
            return HOLD_MGR;
        }
        if (r == OS_HYB_R_MIGRATING) {
            for (;;) { /* granted when the manager reaches NET */
                pthread_mutex_lock(&mgr_mutex);
                bool done = !os_hyb_migrating(&mgr);
                pthread_mutex_unlock(&mgr_mutex);
                if (done)
                    return HOLD_NET;
                unit_wait_step();
            }
        }
        unit_wait_step(); /* WAIT or RETRY: try the network word again */
    }
}

static hold_t local_lock(bool excl, uint64_t *rng)
{
    for (;;) {
        if (atomic_load(&mode_var) == OS_LOCKMODE_NET &&
            !os_lock_policy_migrate(policy, atomic_load(&local_count), 2, rng)) {
            if (nl_acquire(&net_word, excl, -1) == OS_NL_DO_GOT) {
                atomic_fetch_add(&local_count, 1);
                return HOLD_NET;
            }
            unit_wait_step();
            continue;
        }
        if (excl)
            os_lock_acquire_excl(&cpu_lock, NULL);
        else
            os_lock_acquire_shared(&cpu_lock, NULL);
        return HOLD_CPU;
    }
}

static void unlock(hold_t h, bool excl)
{
    if (h == HOLD_NET)
        nl_release(&net_word, excl);
    else if (excl)
        os_lock_release_excl(&cpu_lock);
    else
        os_lock_release_shared(&cpu_lock);
}

static void *locker(void *arg)
{
    long id = (long)arg;
    bool remote = id >= LOCALS;
    uint64_t rng = (uint64_t)id * 2654435761u + 1;
    for (int i = 0; i < ROUNDS; i++) {
        bool excl = (i + id) % 3 != 0;
        hold_t h = remote ? remote_lock(excl) : local_lock(excl, &rng);
        if (excl) {
            if (atomic_fetch_add(&writers_in, 1) || atomic_load(&readers_in))
                atomic_fetch_add(&overlap, 1);
            long v = counter;
            unit_wait_step(); /* widen the window a second writer would need */
            counter = v + 1;
            atomic_fetch_add(&exclusive_done, 1);
            atomic_fetch_sub(&writers_in, 1);
        } else {
            atomic_fetch_add(&readers_in, 1);
            if (atomic_load(&writers_in))
                atomic_fetch_add(&overlap, 1);
            atomic_fetch_sub(&readers_in, 1);
        }
        unlock(h, excl);
    }
    return NULL;
}

static void *manager(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop_manager)) {
        pthread_mutex_lock(&mgr_mutex);
        os_hyb_poll(&mgr);
        pthread_mutex_unlock(&mgr_mutex);
        unit_wait_step();
    }
    return NULL;
}

static void race(os_lock_policy_t p)
{
    policy = p;
    cpu_lock = 0;
    counter = 0;
    exclusive_done = overlap = 0;
    stop_manager = 0;
    os_hyb_init(&mgr, &cpu_lock, &mode_var, &local_count, &net_word, 42);
    pthread_t m, t[LOCALS + REMOTES];
    pthread_create(&m, NULL, manager, NULL);
    for (long i = 0; i < LOCALS + REMOTES; i++)
        pthread_create(&t[i], NULL, locker, (void *)i);
    for (int i = 0; i < LOCALS + REMOTES; i++)
        pthread_join(t[i], NULL);
    atomic_store(&stop_manager, 1);
    pthread_join(m, NULL);
    CHECK(overlap == 0, "policy %d: no holder overlapped a writer (%ld overlaps)", p, (long)overlap);
    CHECK(counter == exclusive_done, "policy %d: counter %ld after %ld exclusive sections", p,
          counter, (long)exclusive_done);
    CHECK(mgr.to_net > 0 && mgr.to_cpu > 0, "policy %d: migrated both ways (%llu, %llu)", p,
          (unsigned long long)mgr.to_net, (unsigned long long)mgr.to_cpu);
    printf("  policy %d: %llu migrations to network, %llu back\n", p,
           (unsigned long long)mgr.to_net, (unsigned long long)mgr.to_cpu);
}

/* Readers that wait for each other inside the lock (a lock_all held across
 * a spin on a flag), with a writer between rounds to move the lock around:
 * each round one thread takes the lock exclusively, then every thread takes
 * it shared and waits in it until all are in. A migration that made a reader
 * wait for a reader hangs here (the watchdog then fails the test). */
enum { READER_ROUNDS = 600 };
static _Atomic int round_gate[3];

static void gate(int which, int round)
{
    atomic_fetch_add(&round_gate[which], 1);
    while (atomic_load(&round_gate[which]) < (round + 1) * (LOCALS + REMOTES))
        unit_wait_step();
}

static void *reader(void *arg)
{
    long id = (long)arg;
    bool remote = id >= LOCALS;
    uint64_t rng = (uint64_t)id * 2654435761u + 1;
    for (int r = 0; r < READER_ROUNDS; r++) {
        gate(0, r);
        if (r % (LOCALS + REMOTES) == id) {
            hold_t h = remote ? remote_lock(true) : local_lock(true, &rng);
            counter++;
            unlock(h, true);
        }
        gate(1, r);
        hold_t h = remote ? remote_lock(false) : local_lock(false, &rng);
        gate(2, r); /* every reader holds the lock at once */
        unlock(h, false);
    }
    return NULL;
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "test_netlock: readers waiting for each other deadlocked\n";
    if (write(2, msg, sizeof msg - 1) < 0)
        _exit(2);
    _exit(1);
}

static void readers_race(os_lock_policy_t p)
{
    policy = p;
    cpu_lock = 0;
    counter = 0;
    stop_manager = 0;
    for (int i = 0; i < 3; i++)
        round_gate[i] = 0;
    os_hyb_init(&mgr, &cpu_lock, &mode_var, &local_count, &net_word, 43);
    signal(SIGALRM, on_alarm);
    alarm(120);
    pthread_t m, t[LOCALS + REMOTES];
    pthread_create(&m, NULL, manager, NULL);
    for (long i = 0; i < LOCALS + REMOTES; i++)
        pthread_create(&t[i], NULL, reader, (void *)i);
    for (int i = 0; i < LOCALS + REMOTES; i++)
        pthread_join(t[i], NULL);
    alarm(0);
    atomic_store(&stop_manager, 1);
    pthread_join(m, NULL);
    CHECK(counter == READER_ROUNDS, "policy %d: %ld writes of %d", p, counter, READER_ROUNDS);
    CHECK(mgr.to_net > 0 && mgr.to_cpu > 0, "policy %d: migrated both ways (%llu, %llu)", p,
          (unsigned long long)mgr.to_net, (unsigned long long)mgr.to_cpu);
    printf("  readers, policy %d: %llu migrations to network, %llu back\n", p,
           (unsigned long long)mgr.to_net, (unsigned long long)mgr.to_cpu);
}

int main(void)
{
    os_backoff_hook = unit_wait_step; /* the library's waits step like the tests' own */
    test_nl_transitions();
    test_policies();
    test_hybrid_transitions();
    test_hybrid_readers();
    race(OS_LOCK_POLICY_PAPER);
    race(OS_LOCK_POLICY_HISTORY);
    race(OS_LOCK_POLICY_RANDOM);
    readers_race(OS_LOCK_POLICY_PAPER);
    readers_race(OS_LOCK_POLICY_HISTORY);
    readers_race(OS_LOCK_POLICY_RANDOM);
    return UNIT_REPORT();
}
