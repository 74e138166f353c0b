#define _GNU_SOURCE
#include "os_shm.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

os_status_t os_shm_create(MPI_Comm node_comm, size_t size, os_shm_seg_t *seg)
{
    static unsigned counter;
    os_status_t st = OS_OK;
    int node_rank, ok = 1, all_ok = 0, fd = -1;
    char name[96];
    long info[2] = { 0, 0 }; /* creator pid, sequence number */
    void *addr = MAP_FAILED;

    seg->addr = NULL;
    seg->size = size;
    if (size == 0)
        return OS_OK;
    PMPI_Comm_rank(node_comm, &node_rank);
    if (node_rank == 0) {
        info[0] = (long)getpid();
        info[1] = (long)counter++;
        snprintf(name, sizeof name, "/onesided-%ld-%ld", info[0], info[1]);
        fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
        if (fd < 0 || ftruncate(fd, (off_t)size) != 0)
            ok = 0;
    }
    PMPI_Bcast(info, 2, MPI_LONG, 0, node_comm);
    PMPI_Bcast(&ok, 1, MPI_INT, 0, node_comm);
    if (!ok) {
        st = OS_ERR(OS_ERR_NOMEM, "cannot create a shared segment of %zu bytes: %s", size,
                    strerror(errno));
        goto out;
    }
    if (node_rank != 0) {
        snprintf(name, sizeof name, "/onesided-%ld-%ld", info[0], info[1]);
        fd = shm_open(name, O_RDWR, 0600);
    }
    if (fd >= 0)
        addr = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ok = addr != MAP_FAILED;
    PMPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, node_comm);
    if (node_rank == 0)
        shm_unlink(name); /* every process has opened it (or failed to) */
    if (!all_ok) {
        st = OS_ERR(OS_ERR_NOMEM, "cannot map a shared segment of %zu bytes", size);
        goto out;
    }
    seg->addr = addr;
    addr = MAP_FAILED;
out:
    if (addr != MAP_FAILED)
        munmap(addr, size);
    if (fd >= 0)
        close(fd);
    return st;
}

void os_shm_destroy(os_shm_seg_t *seg)
{
    if (seg->addr)
        munmap(seg->addr, seg->size);
    seg->addr = NULL;
}

void os_cma_enable(void)
{
#ifdef PR_SET_PTRACER
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
#endif
}

typedef ssize_t (*cma_fn)(pid_t, const struct iovec *, unsigned long, const struct iovec *,
                          unsigned long, unsigned long);

/* Move an (index, offset) position in an iovec array forward by `bytes`. */
static void advance(const struct iovec *v, size_t n, size_t *idx, size_t *off, size_t bytes)
{
    while (bytes && *idx < n) {
        size_t avail = v[*idx].iov_len - *off;
        if (bytes < avail) {
            *off += bytes;
            return;
        }
        bytes -= avail;
        (*idx)++;
        *off = 0;
    }
}

/* process_vm_{readv,writev} may stop early at a page it cannot access or at
 * IOV_MAX entries; walk both vectors until every byte is moved. */
static os_status_t cma_loop(cma_fn fn, const char *what, pid_t pid, const struct iovec *local,
                            size_t nlocal, const struct iovec *remote, size_t nremote)
{
    struct iovec l[64], r[64];
    size_t li = 0, ri = 0, loff = 0, roff = 0;
    while (li < nlocal && ri < nremote) {
        size_t nl = 0, nr = 0, bytes_l = 0, bytes_r = 0;
        for (size_t i = li; i < nlocal && nl < 64; i++, nl++) {
            size_t off = i == li ? loff : 0;
            l[nl].iov_base = (char *)local[i].iov_base + off;
            l[nl].iov_len = local[i].iov_len - off;
            bytes_l += l[nl].iov_len;
        }
        for (size_t i = ri; i < nremote && nr < 64; i++, nr++) {
            size_t off = i == ri ? roff : 0;
            r[nr].iov_base = (char *)remote[i].iov_base + off;
            r[nr].iov_len = remote[i].iov_len - off;
            bytes_r += r[nr].iov_len;
        }
        if (bytes_l == 0 && bytes_r == 0)
            break;
        ssize_t n = fn(pid, l, nl, r, nr, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return OS_ERR(OS_ERR_OTHER, "%s of process %d failed: %s", what, (int)pid,
                          strerror(errno));
        }
        if (n == 0)
            return OS_ERR(OS_ERR_OTHER, "%s of process %d made no progress", what, (int)pid);
        advance(local, nlocal, &li, &loff, (size_t)n);
        advance(remote, nremote, &ri, &roff, (size_t)n);
        while (li < nlocal && local[li].iov_len == 0)
            li++;
        while (ri < nremote && remote[ri].iov_len == 0)
            ri++;
    }
    return OS_OK;
}

os_status_t os_cma_write(pid_t pid, const struct iovec *local, size_t nlocal,
                         const struct iovec *remote, size_t nremote)
{
    return cma_loop(process_vm_writev, "process_vm_writev", pid, local, nlocal, remote, nremote);
}

os_status_t os_cma_read(pid_t pid, const struct iovec *local, size_t nlocal,
                        const struct iovec *remote, size_t nremote)
{
    return cma_loop(process_vm_readv, "process_vm_readv", pid, local, nlocal, remote, nremote);
}

os_status_t os_cma_put(pid_t pid, void *remote, const void *local, size_t len)
{
    struct iovec l = { (void *)local, len }, r = { remote, len };
    return os_cma_write(pid, &l, 1, &r, 1);
}

os_status_t os_cma_get(pid_t pid, void *local, const void *remote, size_t len)
{
    struct iovec l = { local, len }, r = { (void *)remote, len };
    return os_cma_read(pid, &l, 1, &r, 1);
}
