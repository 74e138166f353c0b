/*
 * The remote engine's own header: the request protocol between an origin
 * on one node (remote.c) and the target process that serves it on another
 * (remote_serve.c), and what the two files share. Nothing outside them
 * includes it.
 */
#ifndef OS_REMOTE_H
#define OS_REMOTE_H

#include "os_rma.h"

enum { AM_REQUEST = 1, AM_REPLY = 2 };

typedef enum {
    K_ACC, K_FETCH, K_CAS, K_PUT, K_GET, K_LOCK, K_UNLOCK, K_POST, K_COMPLETE,
    K_LOCK_OP /* lock, one operation (an inner header and its data), unlock */
} req_kind_t;

typedef struct {
    uint64_t win;   /* window id, the same in every process */
    uint64_t token; /* origin's reply slot; 0 = none */
    int32_t src;    /* sender's rank in the window */
    uint8_t kind;   /* req_kind_t */
    uint8_t op;     /* os_op_t; K_LOCK, K_UNLOCK, K_LOCK_OP: 1 = exclusive */
    uint8_t basic;
    uint8_t ack;    /* reply by decrementing the sender's ack counter (token) */
    uint32_t esize;
    uint32_t nruns;
    uint64_t bytes; /* origin data bytes after the runs */
} req_hdr_t;

typedef struct {
    uint64_t token;
    int32_t status; /* os_status_t at the target */
    uint8_t ack;    /* token is an _Atomic int64_t counter to decrement */
    uint8_t grant;  /* K_LOCK: grant_t */
    uint8_t pad[2];
} reply_hdr_t;

/* How the lock manager answered a lock request (K_LOCK's `basic` is 1 for a
 * hybrid request, one that found the network word parked). */
typedef enum { GRANT_CPU, GRANT_NET, GRANT_RETRY } grant_t;

/* remote_serve.c: the target side. */
/* The active-message handler of requests. */
void os_serve_request(void *arg, void *reply, const void *hdr, size_t hlen, const void *data,
                      size_t dlen);
/* The transport's idle hook: retry kept requests; true while some wait. */
bool os_serve_retry(void);
/* Make w known to the request server (before any process can learn its
 * keys), and forget it (its hybrid lock no longer needs polling). */
os_status_t os_serve_register(os_win_t *w);
void os_serve_unregister(os_win_t *w);
/* The target-side counters of w into its statistics. */
void os_serve_stats_sync(os_win_t *w);

#endif
