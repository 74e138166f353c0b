/* The transport's network atomics on memory that UCX allocated (the lock
 * words live there), between processes of different virtual nodes: every op
 * of os_ucx_atomic at 8 and 4 bytes returns the old value and leaves the
 * right new one. UCX 1.13's shared-memory transports ignore the operand of
 * fetching AND/OR/XOR on such memory; a network writer's WANT bit was then
 * lost and a hybrid lock in shared mode never learned that a writer waited
 * (test_busy_target hung on virtual nodes of 2). Runs on virtual nodes only:
 * it calls the transport directly, as the lock code does. */
#include "common.h"

#include "transport/ucx/os_ucx.h"

static void check_op(int peer, uint64_t addr, void *rkey, int op, size_t size, uint64_t before,
                     uint64_t value, uint64_t after, const char *name)
{
    uint64_t old = 0, now = 0;
    /* Set the word, apply the op, read it back (ADD 0 fetches). */
    CHECK(!os_ucx_atomic(peer, OS_UCX_AMO_SWAP, size, before, NULL, addr, rkey), "%s: set", name);
    uint64_t in = op == OS_UCX_AMO_CSWAP ? before : 0;
    old = in;
    CHECK(!os_ucx_atomic(peer, op, size, value, &old, addr, rkey), "%s: op", name);
    CHECK(!os_ucx_atomic(peer, OS_UCX_AMO_ADD, size, 0, &now, addr, rkey), "%s: read", name);
    CHECK(old == before, "%s/%zu: old value %llx, expected %llx", name, size,
          (unsigned long long)old, (unsigned long long)before);
    CHECK(now == after, "%s/%zu: new value %llx, expected %llx", name, size,
          (unsigned long long)now, (unsigned long long)after);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    if (!os_ucx_active()) {
        if (t_rank == 0)
            printf("test_ucx_atomics: needs virtual nodes (ONESIDED_NODE_SIZE)\n");
        MPI_Finalize();
        return 1;
    }
    /* Over TCP the atomics are done by the target's worker: let the
     * progress thread serve it while rank 0 waits in the host MPI. */
    CHECK(!os_ucx_progress_thread_start(), "progress thread");
    /* Rank 0 owns a UCX-allocated block; the last rank works on it. */
    os_ucx_reg_t reg = { 0 };
    uint64_t *block = NULL;
    unsigned long long base = 0;
    int klen = 0;
    if (t_rank == 0) {
        CHECK(!os_ucx_mem_alloc(64, &reg, (void **)&block), "allocate");
        memset(block, 0, 64);
        base = (unsigned long long)(uintptr_t)block;
        klen = (int)reg.rkey_len;
    }
    MPI_Bcast(&klen, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Bcast(&base, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
    char *kbuf = malloc((size_t)klen);
    if (t_rank == 0)
        memcpy(kbuf, reg.rkey_buf, (size_t)klen);
    MPI_Bcast(kbuf, klen, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (t_rank == t_size - 1) {
        void *rkey = NULL;
        CHECK(!os_ucx_rkey_unpack(0, kbuf, &rkey), "unpack");
        const uint64_t w8 = base, w4 = base + 8;
        const uint64_t hi = 0x1000000000000000ull, want = 0x2000000000000000ull;
        check_op(0, w8, rkey, OS_UCX_AMO_OR, 8, hi, want, hi | want, "or");
        check_op(0, w8, rkey, OS_UCX_AMO_AND, 8, hi | 0xff, 0xf0, 0xf0, "and");
        check_op(0, w8, rkey, OS_UCX_AMO_XOR, 8, hi | 0xff, hi | 0x0f, 0xf0, "xor");
        check_op(0, w8, rkey, OS_UCX_AMO_ADD, 8, 5, (uint64_t)-7, (uint64_t)-2, "add");
        check_op(0, w8, rkey, OS_UCX_AMO_SWAP, 8, 5, 9, 9, "swap");
        check_op(0, w8, rkey, OS_UCX_AMO_CSWAP, 8, 5, 9, 9, "cswap");
        check_op(0, w4, rkey, OS_UCX_AMO_OR, 4, 0x10000000, 0x20000000, 0x30000000, "or");
        check_op(0, w4, rkey, OS_UCX_AMO_AND, 4, 0x100000ff, 0xf0, 0xf0, "and");
        check_op(0, w4, rkey, OS_UCX_AMO_XOR, 4, 0xff, 0x0f, 0xf0, "xor");
        check_op(0, w4, rkey, OS_UCX_AMO_ADD, 4, 5, 0xfffffff9u, 0xfffffffeu, "add");
        os_ucx_rkey_destroy(rkey);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (t_rank == 0) {
        /* The 4-byte ops left the word beside them alone. */
        CHECK(block[1] == 0xfffffffeull, "4-byte word's neighbour: %llx",
              (unsigned long long)block[1]);
        os_ucx_mem_unmap(&reg);
    }
    free(kbuf);
    return t_finish("test_ucx_atomics");
}
