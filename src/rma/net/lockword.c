/* Network lock words: one per window in every process, taken by other
 * processes with network atomics (lock.c). UCX allocates them, so that a
 * shared-memory transport maps them in the peers and does those atomics
 * with CPU atomics, without this process. A UCX allocation is a System V
 * segment: shmget and shmat here, shmat in every peer that unpacks its key,
 * shmdt and IPC_RMID at free. With a segment per window that was most of
 * MPI_Win_create's and MPI_Win_free's time between virtual nodes (3.2x and
 * 7.7x native MPICH's). So words come from blocks kept until MPI_Finalize,
 * a unit of OS_NL_UNIT_LINES cache lines each (the lock word's line and
 * the bulk handshake's, os_rma.h), and a peer's key to a block is unpacked
 * once per process. A word goes back to its block when its window is freed: after
 * MPI_Win_free's barrier, and after this process stopped serving the
 * window, nobody touches it until the next window that takes it has
 * cleared it and handed out its key. */
#include "os_net.h"

#include <pthread.h>
#include <stdlib.h>

enum { WORDS_PER_BLOCK = 64, UNIT_BYTES = OS_NL_UNIT_LINES * OS_CACHELINE };

struct os_lockword_block {
    os_ucx_reg_t reg;
    char *base;
    struct os_lockword_block *next;
};

/* A free word and the block it belongs to (for its key). */
typedef struct {
    _Atomic uint64_t *word;
    os_lockword_block_t *block;
} free_word_t;

/* A peer's block whose key was unpacked here. */
typedef struct peer_key {
    uint64_t block;
    void *rkey;
    struct peer_key *next; /* the same peer's other blocks */
    struct peer_key *all;  /* every key, for MPI_Finalize */
} peer_key_t;

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static os_lockword_block_t *blocks;
static free_word_t *free_words;
static size_t nfree, nwords; /* free_words has room for every word */
static os_hmap_t peer_keys; /* world rank + 1 -> peer_key_t list */
static peer_key_t *all_keys;

static os_status_t add_block(void)
{
    os_lockword_block_t *b = calloc(1, sizeof *b);
    void *base;
    os_status_t st;
    if (!b)
        return OS_ERR(OS_ERR_NOMEM, "lock word block");
    /* Room for every word there is, so that os_lockword_put never fails. */
    free_word_t *f = realloc(free_words, sizeof *f * (nwords + WORDS_PER_BLOCK));
    if (!f) {
        free(b);
        return OS_ERR(OS_ERR_NOMEM, "lock word list");
    }
    free_words = f;
    if ((st = os_ucx_mem_alloc(WORDS_PER_BLOCK * UNIT_BYTES, &b->reg, &base))) {
        free(b);
        return st;
    }
    nwords += WORDS_PER_BLOCK;
    b->base = base;
    b->next = blocks;
    blocks = b;
    /* Handed out from the block's start. */
    for (int i = WORDS_PER_BLOCK - 1; i >= 0; i--)
        free_words[nfree++] = (free_word_t){ (_Atomic uint64_t *)(b->base + i * UNIT_BYTES), b };
    return OS_OK;
}

os_status_t os_lockword_get(_Atomic uint64_t **word, os_lockword_block_t **block)
{
    os_status_t st = OS_OK;
    pthread_mutex_lock(&pool_lock);
    if (!nfree && (st = add_block()))
        goto out;
    nfree--;
    *word = free_words[nfree].word;
    *block = free_words[nfree].block;
out:
    pthread_mutex_unlock(&pool_lock);
    return st;
}

void os_lockword_put(_Atomic uint64_t *word, os_lockword_block_t *block)
{
    if (!word)
        return;
    pthread_mutex_lock(&pool_lock);
    /* Room was made when its block came. */
    free_words[nfree++] = (free_word_t){ word, block };
    pthread_mutex_unlock(&pool_lock);
}

void os_lockword_key(const os_lockword_block_t *b, const void **key, size_t *len,
                     uint64_t *block_addr)
{
    *key = b->reg.rkey_buf;
    *len = b->reg.rkey_len;
    *block_addr = (uint64_t)(uintptr_t)b->base;
}

os_status_t os_lockword_rkey(int peer, uint64_t block_addr, const void *key, void **rkey)
{
    os_status_t st = OS_OK;
    pthread_mutex_lock(&pool_lock);
    peer_key_t *head = os_hmap_get(&peer_keys, (uintptr_t)peer + 1), *k;
    for (k = head; k && k->block != block_addr; k = k->next)
        ;
    if (!k) {
        /* A peer's blocks live until it finalizes, as this cache does: an
         * address names one block. */
        if (!(k = calloc(1, sizeof *k))) {
            st = OS_ERR(OS_ERR_NOMEM, "lock word key");
            goto out;
        }
        if ((st = os_ucx_rkey_unpack(peer, key, &k->rkey)) ||
            (st = os_hmap_put(&peer_keys, (uintptr_t)peer + 1, k))) {
            os_ucx_rkey_destroy(k->rkey);
            free(k);
            goto out;
        }
        k->block = block_addr;
        k->next = head;
        k->all = all_keys;
        all_keys = k;
    }
    *rkey = k->rkey;
out:
    pthread_mutex_unlock(&pool_lock);
    return st;
}

void os_lockword_finalize(void)
{
    pthread_mutex_lock(&pool_lock);
    for (peer_key_t *k = all_keys, *next; k; k = next) {
        next = k->all;
        os_ucx_rkey_destroy(k->rkey);
        free(k);
    }
    all_keys = NULL;
    os_hmap_destroy(&peer_keys);
    for (os_lockword_block_t *b = blocks, *next; b; b = next) {
        next = b->next;
        os_ucx_mem_unmap(&b->reg);
        free(b);
    }
    blocks = NULL;
    free(free_words);
    free_words = NULL;
    nfree = nwords = 0;
    pthread_mutex_unlock(&pool_lock);
}
