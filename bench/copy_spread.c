/*
 * The machine's own spread of one large copy between buffers, no MPI: how
 * far apart two windows' 1 MB copies can be before either library does
 * anything.
 *
 *   copy_spread [--bytes B] [--buffers N] [--reps R] [--csv FILE]
 *
 * Each of N buffers is a fresh shared mapping, the memory both a host's
 * window and onesided's are (pages the kernel picks, 4 KB each). For each
 * buffer, the median over R repetitions of B-byte copies from a malloc
 * buffer into it ("put") and from it into the malloc buffer ("get"), the
 * way an RMA put and get on a node copy; the buffers are taken in turn,
 * repetition by repetition, so that all see the same machine. The page
 * offsets are the same for every buffer; the physical pages, which decide
 * where the 1 MB lands in the L2 cache (2 MB a core on this project's Xeon
 * guest), are the kernel's choice: the four main jobs of 2026-12-07 read
 * 28.1-34.3 GB/s across the 16 buffers, slowest / fastest 0.873-0.910 in
 * each, a buffer fast one way fast the other. An RMA benchmark compares two
 * windows, two draws of this spread; the main job (bench/run_all.py) sets
 * its 1 MB rows beside it.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    size_t bytes = 1 << 20;
    int nbuf = 16, reps = 9;
    const char *csv = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--bytes") && i + 1 < argc)
            bytes = (size_t)atol(argv[++i]);
        else if (!strcmp(argv[i], "--buffers") && i + 1 < argc)
            nbuf = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--csv") && i + 1 < argc)
            csv = argv[++i];
        else {
            fprintf(stderr, "usage: copy_spread [--bytes B] [--buffers N] [--reps R] [--csv FILE]\n");
            return 2;
        }
    }
    if (bytes < 4096 || nbuf < 2 || reps < 1) {
        fprintf(stderr, "copy_spread: needs --bytes >= 4096, --buffers >= 2, --reps >= 1\n");
        return 2;
    }
    /* As the benchmarks' own buffers: malloc, a page plus 16 bytes. */
    char *user = malloc(bytes);
    char **win = calloc((size_t)nbuf, sizeof *win);
    double *rate = calloc((size_t)nbuf * 2 * (size_t)reps, sizeof *rate);
    if (!user || !win || !rate)
        return 1;
    memset(user, 1, bytes);
    for (int b = 0; b < nbuf; b++) {
        win[b] = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (win[b] == MAP_FAILED) {
            perror("copy_spread: mmap");
            return 1;
        }
        memset(win[b], 2, bytes);
    }
    /* About 32 MB a sample: 1 MB copies take 30-45 us here. */
    const int copies = (int)((32u << 20) / bytes) + 1;
    for (int r = 0; r < reps; r++)
        for (int b = 0; b < nbuf; b++)
            for (int dir = 0; dir < 2; dir++) {
                char *dst = dir ? user : win[b], *src = dir ? win[b] : user;
                double t0 = now();
                for (int c = 0; c < copies; c++) {
                    memcpy(dst, src, bytes);
                    __asm__ volatile("" : : "r"(dst) : "memory"); /* every copy happens */
                }
                rate[((size_t)b * 2 + (size_t)dir) * (size_t)reps + (size_t)r] =
                    (double)bytes * copies / (now() - t0) * 1e-9;
            }
    FILE *f = csv ? fopen(csv, "w") : NULL;
    if (f)
        fprintf(f, "direction,buffer,bytes,GBps\n");
    printf("%zu-byte memcpy between a malloc buffer and each of %d shared mappings, "
           "GB/s (median of %d):\n", bytes, nbuf, reps);
    for (int dir = 0; dir < 2; dir++) {
        double lo = 0, hi = 0;
        printf("  %s:", dir ? "get" : "put");
        for (int b = 0; b < nbuf; b++) {
            double *s = rate + ((size_t)b * 2 + (size_t)dir) * (size_t)reps;
            qsort(s, (size_t)reps, sizeof *s, cmp_double);
            double m = s[reps / 2];
            lo = b && lo < m ? lo : m;
            hi = hi > m ? hi : m;
            printf(" %.1f", m);
            if (f)
                fprintf(f, "%s,%d,%zu,%.3f\n", dir ? "get" : "put", b, bytes, m);
        }
        printf("  (slowest / fastest %.3f)\n", lo / hi);
    }
    if (f)
        fclose(f);
    for (int b = 0; b < nbuf; b++)
        munmap(win[b], bytes);
    free(rate);
    free(win);
    free(user);
    return 0;
}
