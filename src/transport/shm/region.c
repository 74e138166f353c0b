/* Shareable regions for MPI_Alloc_mem: each block in its own memfd, so that
 * other processes of the node can map it. Needs no MPI. */
#define _GNU_SOURCE
#include "os_shm.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Live regions: few and long-lived (window memory), so a list will do. */
static os_shm_region_t *regions;
static size_t nregions, capregions;
static pthread_mutex_t regions_lock = PTHREAD_MUTEX_INITIALIZER;

static void *region_alloc_locked(size_t size, int max_live)
{
    long page = sysconf(_SC_PAGESIZE);
    size_t bytes = OS_ALIGN_UP(size ? size : 1, (size_t)page);
    if ((int)nregions >= max_live) {
        errno = EMFILE;
        return NULL;
    }
    if (nregions == capregions) {
        size_t cap = capregions ? 2 * capregions : 16;
        os_shm_region_t *r = realloc(regions, cap * sizeof *r);
        if (!r)
            return NULL;
        regions = r;
        capregions = cap;
    }
    int fd = memfd_create("onesided-alloc-mem", MFD_CLOEXEC);
    if (fd < 0)
        return NULL;
    void *addr = MAP_FAILED;
    if (ftruncate(fd, (off_t)bytes) == 0)
        addr = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (addr == MAP_FAILED) {
        int e = errno;
        close(fd);
        errno = e;
        return NULL;
    }
    regions[nregions++] = (os_shm_region_t){ addr, bytes, fd };
    return addr;
}

void *os_shm_region_alloc(size_t size, int max_live)
{
    pthread_mutex_lock(&regions_lock);
    void *p = region_alloc_locked(size, max_live);
    pthread_mutex_unlock(&regions_lock);
    return p;
}

bool os_shm_region_free(void *base)
{
    os_shm_region_t gone = { 0 };
    bool found = false;
    pthread_mutex_lock(&regions_lock);
    for (size_t i = 0; i < nregions && !found; i++) {
        if (regions[i].base == base) {
            gone = regions[i];
            memmove(&regions[i], &regions[i + 1], (nregions - i - 1) * sizeof *regions);
            nregions--;
            found = true;
        }
    }
    pthread_mutex_unlock(&regions_lock);
    if (found) {
        munmap(gone.base, gone.size);
        close(gone.fd);
    }
    return found;
}

bool os_shm_region_find(const void *addr, size_t len, os_shm_region_t *out)
{
    const char *a = addr;
    bool found = false;
    pthread_mutex_lock(&regions_lock);
    for (size_t i = 0; i < nregions && !found; i++) {
        if (a >= regions[i].base && a - regions[i].base <= (ptrdiff_t)regions[i].size &&
            len <= regions[i].size - (size_t)(a - regions[i].base)) {
            *out = regions[i];
            found = true;
        }
    }
    pthread_mutex_unlock(&regions_lock);
    return found;
}

void *os_shm_region_map_peer(pid_t pid, int fd, size_t size)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)pid, fd);
    int my = open(path, O_RDWR | O_CLOEXEC);
    if (my < 0)
        return NULL;
    void *addr = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, my, 0);
    close(my); /* the mapping keeps the memory */
    return addr == MAP_FAILED ? NULL : addr;
}

