/* Request routes (os_route.h): the routing function and the connection
 * state it implies. */
#include "os_route.h"

#include <stdlib.h>
#include <string.h>

const char *os_route_name(os_route_t r)
{
    return r == OS_ROUTE_SERVER ? "server" : r == OS_ROUTE_COOPERATIVE ? "cooperative" : "direct";
}

os_status_t os_route_topo_init(os_route_topo_t *t, int nprocs, const int *server_of,
                               int group_size)
{
    os_status_t st = OS_OK;
    memset(t, 0, sizeof *t);
    t->nprocs = nprocs;
    t->group_size = group_size < 1 ? 1 : group_size;
    t->node_of = malloc(sizeof(int) * (size_t)(nprocs ? nprocs : 1));
    t->server = malloc(sizeof(int) * (size_t)(nprocs ? nprocs : 1));
    if (!t->node_of || !t->server) {
        st = OS_ERR(OS_ERR_NOMEM, "route table of %d processes", nprocs);
        goto fail;
    }
    /* Nodes in the order of their first processes: a process that is its
     * own server opens a node; the others join their server's. */
    for (int p = 0; p < nprocs; p++) {
        const int s = server_of[p];
        if (s < 0 || s > p || server_of[s] != s) {
            st = OS_ERR(OS_ERR_OTHER, "route table: process %d names %d as its node's first "
                        "process", p, s);
            goto fail;
        }
        if (s == p) {
            t->server[t->nnodes] = p;
            t->node_of[p] = t->nnodes++;
        } else {
            t->node_of[p] = t->node_of[s];
        }
    }
    return OS_OK;
fail:
    os_route_topo_free(t);
    return st;
}

os_status_t os_route_topo_uniform(os_route_topo_t *t, int nprocs, int node_size, int group_size)
{
    int *server_of = malloc(sizeof(int) * (size_t)(nprocs ? nprocs : 1));
    if (!server_of)
        return OS_ERR(OS_ERR_NOMEM, "route table of %d processes", nprocs);
    for (int p = 0; p < nprocs; p++)
        server_of[p] = node_size > 0 ? p - p % node_size : 0;
    os_status_t st = os_route_topo_init(t, nprocs, server_of, group_size);
    free(server_of);
    return st;
}

void os_route_topo_free(os_route_topo_t *t)
{
    free(t->node_of);
    free(t->server);
    t->node_of = t->server = NULL;
    t->nprocs = t->nnodes = 0;
}

int os_route_group(const os_route_topo_t *t, int node)
{
    return node / t->group_size;
}

int os_route_gateway(const os_route_topo_t *t, int group, int from_node)
{
    const int first = group * t->group_size;
    int size = t->nnodes - first;
    if (size > t->group_size)
        size = t->group_size;
    return first + from_node % size;
}

int os_route_next(const os_route_topo_t *t, os_route_t r, int at, int dst)
{
    if (r == OS_ROUTE_DIRECT || at == dst)
        return dst;
    const int na = t->node_of[at], nd = t->node_of[dst];
    if (na == nd)
        return dst; /* inside a node: the node's own path (or the last hop) */
    if (at != t->server[na])
        return t->server[na]; /* to this node's server */
    if (r == OS_ROUTE_SERVER || os_route_group(t, na) == os_route_group(t, nd))
        return t->server[nd];
    return t->server[os_route_gateway(t, os_route_group(t, nd), na)];
}

os_status_t os_route_peers(const os_route_topo_t *t, os_route_t r, int *peers, int *out_peers)
{
    const size_t n = (size_t)t->nprocs, words = (n + 63) / 64;
    uint64_t *any = calloc(n * words, sizeof *any), *out = calloc(n * words, sizeof *out);
    if (!any || !out) {
        free(any);
        free(out);
        return OS_ERR(OS_ERR_NOMEM, "connection table of %zu processes", n);
    }
#define SET(m, a, b) ((m)[(size_t)(a) * words + (size_t)(b) / 64] |= 1ull << ((b) % 64))
    /* Requests from o to d and d's replies back to o, hop by hop. */
    for (int o = 0; o < t->nprocs; o++)
        for (int d = 0; d < t->nprocs; d++) {
            if (t->node_of[o] == t->node_of[d])
                continue;
            for (int leg = 0; leg < 2; leg++) {
                const int from = leg ? d : o, to = leg ? o : d;
                for (int at = from, hops = 0; at != to; hops++) {
                    const int next = os_route_next(t, r, at, to);
                    if (hops > 8 || next == at) {
                        free(any);
                        free(out);
                        return OS_ERR(OS_ERR_OTHER, "route %s from %d to %d does not arrive",
                                      os_route_name(r), from, to);
                    }
                    SET(any, at, next);
                    SET(any, next, at);
                    SET(out, at, next);
                    at = next;
                }
            }
        }
#undef SET
    for (size_t p = 0; p < n; p++) {
        int a = 0, b = 0;
        for (size_t w = 0; w < words; w++) {
            a += __builtin_popcountll(any[p * words + w]);
            b += __builtin_popcountll(out[p * words + w]);
        }
        if (peers)
            peers[p] = a;
        if (out_peers)
            out_peers[p] = b;
    }
    free(any);
    free(out);
    return OS_OK;
}
