/* Request routes (paper 004): every route arrives, takes the hops its
 * design allows, keeps one path per origin and target (same-origin
 * ordering), and needs the connection state the design promises, for even
 * and uneven node and group sizes. */
#include "rma/net/os_route.h"
#include "unit.h"

#include <stdlib.h>

/* The path from o to d; returns the hop count, -1 when it does not arrive. */
static int path(const os_route_topo_t *t, os_route_t r, int o, int d, int *hops)
{
    int n = 0;
    for (int at = o; at != d;) {
        int next = os_route_next(t, r, at, d);
        if (next == at || n >= 8)
            return -1;
        hops[n++] = at = next;
    }
    return n;
}

static bool is_server(const os_route_topo_t *t, int p)
{
    return t->server[t->node_of[p]] == p;
}

/* Every pair of processes on different nodes, under every route. */
static void check_all_paths(const os_route_topo_t *t, const char *what)
{
    for (int r = OS_ROUTE_DIRECT; r <= OS_ROUTE_COOPERATIVE; r++)
        for (int o = 0; o < t->nprocs; o++)
            for (int d = 0; d < t->nprocs; d++) {
                if (t->node_of[o] == t->node_of[d])
                    continue;
                int hops[8], n = path(t, (os_route_t)r, o, d, hops);
                const int most = r == OS_ROUTE_DIRECT ? 1 : r == OS_ROUTE_SERVER ? 3 : 4;
                if (n < 1 || n > most || hops[n - 1] != d) {
                    CHECK(0, "%s, route %s: %d -> %d took %d hops", what,
                          os_route_name((os_route_t)r), o, d, n);
                    return;
                }
                /* Every intermediate process is a server; between nodes
                 * only servers talk (except direct). */
                for (int i = 0; i + 1 < n && r != OS_ROUTE_DIRECT; i++)
                    if (!is_server(t, hops[i])) {
                        CHECK(0, "%s: %d -> %d passes non-server %d", what, o, d, hops[i]);
                        return;
                    }
                /* Cooperative: a hop between groups enters the target's
                 * group at the gateway assigned to the sender's node. */
                int prev = o;
                for (int i = 0; i < n && r == OS_ROUTE_COOPERATIVE; prev = hops[i], i++) {
                    int gp = os_route_group(t, t->node_of[prev]);
                    int gh = os_route_group(t, t->node_of[hops[i]]);
                    if (gp != gh &&
                        t->node_of[hops[i]] !=
                            os_route_gateway(t, gh, t->node_of[prev])) {
                        CHECK(0, "%s: %d -> %d enters group %d at node %d", what, o, d, gh,
                              t->node_of[hops[i]]);
                        return;
                    }
                }
            }
    CHECK(1, "%s", what);
}

static void check_uniform(int n, int k, int g)
{
    os_route_topo_t t;
    char what[64];
    snprintf(what, sizeof what, "N=%d K=%d G=%d", n, k, g);
    CHECK(os_route_topo_uniform(&t, n, k, g) == OS_OK, "%s: table", what);
    CHECK(t.nnodes == (n + k - 1) / k, "%s: %d nodes", what, t.nnodes);
    check_all_paths(&t, what);
    int *peers = malloc(sizeof(int) * (size_t)n), *server = malloc(sizeof(int) * (size_t)n);
    int *coop = malloc(sizeof(int) * (size_t)n);
    CHECK(os_route_peers(&t, OS_ROUTE_DIRECT, peers, NULL) == OS_OK &&
              os_route_peers(&t, OS_ROUTE_SERVER, server, NULL) == OS_OK &&
              os_route_peers(&t, OS_ROUTE_COOPERATIVE, coop, NULL) == OS_OK,
          "%s: peers", what);
    const int m = t.nnodes;
    for (int p = 0; p < n; p++) {
        const int node = t.node_of[p], ksize = node == m - 1 ? n - node * k : k;
        /* direct: every process of every other node */
        CHECK(peers[p] == n - ksize, "%s: direct peers of %d = %d", what, p, peers[p]);
        /* server: a non-server talks to its server only; a server to its
         * node and to every other server */
        int want = is_server(&t, p) ? (ksize - 1) + (m - 1) : 1;
        CHECK(server[p] == want, "%s: server peers of %d = %d, want %d", what, p, server[p],
              want);
        /* cooperative: never more than server, and a server's share of
         * other nodes is its group, one gateway per other group, and the
         * outside nodes assigned to it (at most ceil(m / group size)) */
        int bound = is_server(&t, p) ? (ksize - 1) + (g - 1) + 2 * ((m + g - 1) / g) : 1;
        CHECK(coop[p] <= server[p] && coop[p] <= bound, "%s: cooperative peers of %d = %d "
              "(server %d, bound %d)", what, p, coop[p], server[p], bound);
    }
    free(peers);
    free(server);
    free(coop);
    os_route_topo_free(&t);
}

int main(void)
{
    /* Even and uneven: nodes of 1, 2, 3 and 16; groups of 1, 2, 3 and one
     * smaller last group; a last node with fewer processes. */
    const int cases[][3] = { { 2, 1, 1 }, { 3, 1, 2 }, { 8, 1, 3 }, { 10, 2, 2 }, { 11, 2, 3 },
                             { 12, 3, 2 }, { 7, 3, 3 }, { 64, 4, 4 }, { 100, 8, 3 },
                             { 96, 16, 2 }, { 4, 2, 5 } };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_uniform(cases[i][0], cases[i][1], cases[i][2]);

    /* Worked by hand: 10 processes, nodes of 2 (servers 0 2 4 6 8), groups
     * {0,1} {2,3} {4}. 9 -> 1: 9's server 8, then the gateway of group 0
     * for node 4 (node 0 + 4 mod 2 = node 0: process 0), then 1. */
    os_route_topo_t t;
    int hops[8];
    CHECK(os_route_topo_uniform(&t, 10, 2, 2) == OS_OK, "table");
    CHECK(path(&t, OS_ROUTE_COOPERATIVE, 9, 1, hops) == 3 && hops[0] == 8 && hops[1] == 0 &&
              hops[2] == 1, "9 -> 8 -> 0 -> 1");
    /* 5 -> 3: server 4, gateway of group 0 for node 2 is node 0 (process
     * 0), which forwards inside its group to node 1's server 2, then 3. */
    CHECK(path(&t, OS_ROUTE_COOPERATIVE, 5, 3, hops) == 4 && hops[0] == 4 && hops[1] == 0 &&
              hops[2] == 2 && hops[3] == 3, "5 -> 4 -> 0 -> 2 -> 3");
    CHECK(path(&t, OS_ROUTE_SERVER, 5, 3, hops) == 3 && hops[0] == 4 && hops[1] == 2 &&
              hops[2] == 3, "server: 5 -> 4 -> 2 -> 3");
    CHECK(path(&t, OS_ROUTE_SERVER, 4, 2, hops) == 1 && hops[0] == 2,
          "servers talk directly");
    CHECK(path(&t, OS_ROUTE_DIRECT, 5, 3, hops) == 1 && hops[0] == 3, "direct");
    os_route_topo_free(&t);

    /* Irregular nodes (sizes 3, 1, 2, 1), as a communicator split by host
     * gives them. */
    const int server_of[] = { 0, 0, 0, 3, 4, 4, 6 };
    CHECK(os_route_topo_init(&t, 7, server_of, 2) == OS_OK && t.nnodes == 4, "irregular table");
    check_all_paths(&t, "irregular nodes 3,1,2,1, G=2");
    os_route_topo_free(&t);
    const int bad[] = { 0, 2, 2 };
    CHECK(os_route_topo_init(&t, 3, bad, 1) != OS_OK, "a server after its process is refused");

    /* At scale: N = 1024, K = 16 (64 nodes), G = 4. The server route gives
     * each server its node plus every other server, O(N/K); cooperation
     * divides the outside part by about G (the bench prints N = 4096). */
    CHECK(os_route_topo_uniform(&t, 1024, 16, 4) == OS_OK, "1024 table");
    int *srv = malloc(sizeof(int) * 1024), *coop = malloc(sizeof(int) * 1024);
    CHECK(os_route_peers(&t, OS_ROUTE_SERVER, srv, NULL) == OS_OK &&
              os_route_peers(&t, OS_ROUTE_COOPERATIVE, coop, NULL) == OS_OK, "1024 peers");
    CHECK(srv[0] == 15 + 63, "1024: a server's peers under server = %d", srv[0]);
    /* its node, its group, and one server per other group, which are also
     * the outside nodes it is the gateway for: 15 + 3 + 15 */
    CHECK(coop[0] == 15 + 3 + 15, "1024: cooperative = %d", coop[0]);
    free(srv);
    free(coop);
    os_route_topo_free(&t);
    return UNIT_REPORT();
}
