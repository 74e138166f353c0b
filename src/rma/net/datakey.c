/* Other nodes' keys to their MPI_Win_allocate data: segments UCX allocated
 * (shell_data.c), a window's own or a slab whose pieces many windows take.
 * Unpacking a key to a segment UCX's shared-memory transport maps attaches
 * it (shmat), and destroying the key detaches it (shmdt and munmap, with a
 * TLB shootdown on every thread of the process): between virtual nodes
 * that was 2-4 us of each MPI_Win_free's 5-9 on MPICH 5.0.2, against 2-3 us
 * for the host's whole free, and about 5 us of each first MPI_Win_allocate.
 * So a key is unpacked once per segment in this process and shared by every
 * window that reaches the segment, counted (a segment's serial names it in
 * the job: its owner and a count of the owner's). The windows' shells hold
 * the references: a shell's next window is over the same communicator, and
 * its owners' shells keep their data for it too (every process decides
 * alike, shell.c), so the key is used again while the owner's serial says
 * it is the same segment. A key to a segment its owner has since given
 * back holds that memory until the last shell holding it moves on: the
 * owner gives a segment back only as windows over its communicator are
 * made or as shells go, which this process's shells follow. */
#include "os_net.h"

#include <pthread.h>
#include <stdlib.h>

/* A shell's reference to rank r's segment (os_shell_t.peer_data_keys). */
struct os_peer_data_key {
    uint64_t serial; /* the owner's segment (0: none held) */
    int owner;       /* whose endpoint the key was unpacked for */
    void *rkey;
};

/* The key to one segment, shared by the shells that hold it. */
typedef struct {
    void *rkey;
    int owner;
    int refs;
} shared_key_t;

static pthread_mutex_t keys_lock = PTHREAD_MUTEX_INITIALIZER;
static os_hmap_t keys_by_serial; /* serial -> shared_key_t */

/* A reference to the owner's segment `serial`: its key, unpacked here on
 * first use. Sets *reused where another shell's reference had it. */
static os_status_t key_hold(int owner, uint64_t serial, const void *packed, void **rkey,
                            bool *reused)
{
    os_status_t st = OS_OK;
    pthread_mutex_lock(&keys_lock);
    shared_key_t *k = os_hmap_get(&keys_by_serial, (uintptr_t)serial);
    *reused = k && k->owner == owner;
    if (!*reused) {
        if (k) {
            /* A serial names one segment in the job and its owner's
             * endpoint is always the same: never seen, and not trusted. */
            st = OS_ERR(OS_ERR_OTHER, "segment %llx from %d, known from %d",
                        (unsigned long long)serial, owner, k->owner);
            goto out;
        }
        if (!(k = calloc(1, sizeof *k))) {
            st = OS_ERR(OS_ERR_NOMEM, "data key");
            goto out;
        }
        if ((st = os_ucx_rkey_unpack(owner, packed, &k->rkey)) ||
            (st = os_hmap_put(&keys_by_serial, (uintptr_t)serial, k))) {
            os_ucx_rkey_destroy(k->rkey);
            free(k);
            goto out;
        }
        k->owner = owner;
    }
    k->refs++;
    *rkey = k->rkey;
out:
    pthread_mutex_unlock(&keys_lock);
    return st;
}

static void key_drop(uint64_t serial)
{
    pthread_mutex_lock(&keys_lock);
    shared_key_t *k = os_hmap_get(&keys_by_serial, (uintptr_t)serial);
    if (k && --k->refs == 0) {
        os_hmap_del(&keys_by_serial, (uintptr_t)serial);
        os_ucx_rkey_destroy(k->rkey);
        free(k);
    }
    pthread_mutex_unlock(&keys_lock);
}

bool os_data_key_kept(const os_win_t *w, int r)
{
    const struct os_peer_data_key *k = w->shell->peer_data_keys;
    return k && k[r].rkey && k[r].rkey == w->peers[r].rkey;
}

os_status_t os_data_key(os_win_t *w, int r, uint64_t serial, const void *packed)
{
    os_shell_t *sh = w->shell;
    os_peer_t *p = &w->peers[r];
    struct os_peer_data_key *k = sh->peer_data_keys;
    bool reused;
    if (k && k[r].rkey && serial && k[r].serial == serial && k[r].owner == p->rdma_world) {
        p->rkey = k[r].rkey;
        OS_STAT(w, DATA_KEYS_REUSED, 1);
        return OS_OK;
    }
    if (k && k[r].rkey) { /* the owner's data is another segment now */
        key_drop(k[r].serial);
        k[r].rkey = NULL;
    }
    if (!serial) /* a segment its owner does not keep: this window's alone */
        return os_ucx_rkey_unpack(p->rdma_world, packed, &p->rkey);
    if (!k && (k = sh->peer_data_keys = calloc((size_t)w->nranks, sizeof *k)) == NULL)
        return OS_ERR(OS_ERR_NOMEM, "data keys of %d processes", w->nranks);
    os_status_t st = key_hold(p->rdma_world, serial, packed, &p->rkey, &reused);
    if (st)
        return st;
    if (reused)
        OS_STAT(w, DATA_KEYS_REUSED, 1);
    k[r] = (struct os_peer_data_key){ serial, p->rdma_world, p->rkey };
    return OS_OK;
}

void os_remote_shell_release(os_shell_t *s)
{
    for (int r = 0; s->peer_data_keys && r < s->nranks; r++)
        if (s->peer_data_keys[r].rkey)
            key_drop(s->peer_data_keys[r].serial);
    free(s->peer_data_keys);
    s->peer_data_keys = NULL;
}

void os_data_key_finalize(void)
{
    /* Every shell gave its references back (os_shell_finalize came first)
     * but those of windows the program never freed: their keys go now,
     * before the endpoints close. (A slot without a value is empty.) */
    pthread_mutex_lock(&keys_lock);
    for (size_t i = 0; i < keys_by_serial.cap; i++) {
        shared_key_t *k = keys_by_serial.vals[i];
        if (k) {
            os_ucx_rkey_destroy(k->rkey);
            free(k);
        }
    }
    os_hmap_destroy(&keys_by_serial);
    pthread_mutex_unlock(&keys_lock);
}
