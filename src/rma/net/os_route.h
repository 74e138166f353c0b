/*
 * Request routes between nodes (paper 004, multinode cooperation): which
 * process a request or reply goes to next on its way to its destination.
 * Pure functions of the job's layout (no MPI, no network), so that the
 * forwarding engine (forward.c), the memory model the benchmark prints
 * for thousands of processes, and the unit tests all use the same code.
 *
 * Processes and nodes: MPI_COMM_WORLD ranks, and the (real or virtual) node
 * of each. A node's communication server is its first process. Nodes are
 * numbered in the order of their first processes; cooperative groups are G
 * consecutive nodes (the last group may be smaller).
 *
 *   direct       origin -> target
 *   server       origin -> its node's server -> the target node's server
 *                -> target
 *   cooperative  as server, but between groups a request enters the target's
 *                group through one gateway server, the one the origin's node
 *                is assigned to there (node index modulo the group's size),
 *                which forwards it to the target node's server
 *
 * A hop to the process itself is skipped (an origin that is its node's
 * server hands nothing to itself). Replies travel the same function from
 * the target back to the origin, so no process keeps per-request state.
 */
#ifndef OS_ROUTE_H
#define OS_ROUTE_H

#include <stddef.h>
#include <stdint.h>

#include "../../util/os_util.h"

typedef enum { OS_ROUTE_DIRECT = 0, OS_ROUTE_SERVER = 1, OS_ROUTE_COOPERATIVE = 2 } os_route_t;

typedef struct {
    int nprocs, nnodes, group_size;
    int *node_of; /* process -> node */
    int *server;  /* node -> its first process */
} os_route_topo_t;

/* From each process's server (its node's first process): server_of[p] for
 * every p of nprocs. group_size < 1 counts as 1. */
os_status_t os_route_topo_init(os_route_topo_t *t, int nprocs, const int *server_of,
                               int group_size);
/* Consecutive nodes of node_size processes (the last may be smaller). */
os_status_t os_route_topo_uniform(os_route_topo_t *t, int nprocs, int node_size, int group_size);
void os_route_topo_free(os_route_topo_t *t);

/* The process a message at `at`, bound for `dst`, goes to next (dst when it
 * arrives with this hop; never `at` itself unless at == dst). */
int os_route_next(const os_route_topo_t *t, os_route_t r, int at, int dst);
/* The group of a node, and the gateway node of group g for origin node a. */
int os_route_group(const os_route_topo_t *t, int node);
int os_route_gateway(const os_route_topo_t *t, int group, int from_node);

/* Connection state the route needs when every process sends requests to
 * every process of every other node (and gets their replies): peers[p] =
 * the number of distinct processes p exchanges messages with, and
 * out_peers[p] = those p sends to (where a forwarding process holds an
 * aggregation buffer). Walks every (origin, target) pair through
 * os_route_next; memory: nprocs^2 bits. Either array may be NULL. */
os_status_t os_route_peers(const os_route_topo_t *t, os_route_t r, int *peers, int *out_peers);

const char *os_route_name(os_route_t r);

#endif
