/*
 * no_cma: run a command (and everything it starts) where the kernel refuses
 * cross-memory attach, as Docker's default seccomp profile does:
 * process_vm_readv, process_vm_writev and pidfd_getfd fail with EPERM.
 *
 *   no_cma COMMAND [ARG...]
 *
 *   no_cma --mincore COMMAND [ARG...]     mincore refused too (EPERM)
 *   no_cma --membarrier COMMAND [ARG...]  membarrier refused too (EPERM)
 *
 * The filter is inherited across fork and exec and cannot be lifted, so a
 * whole test suite (ctest, mpiexec, its proxies, every rank) runs under it.
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define ARCH AUDIT_ARCH_AARCH64
#else
#error "no_cma: add this architecture's AUDIT_ARCH value"
#endif

#ifndef __NR_pidfd_getfd
#define __NR_pidfd_getfd 438 /* the same number on every architecture */
#endif

#define REFUSE(nr)                                                                  \
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1),                                \
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA))

int main(int argc, char **argv)
{
    bool mincore_too = false, membarrier_too = false, unknown = false;
    for (; argc > 1 && !strncmp(argv[1], "--", 2); argv++, argc--) {
        if (!strcmp(argv[1], "--mincore"))
            mincore_too = true;
        else if (!strcmp(argv[1], "--membarrier"))
            membarrier_too = true;
        else
            unknown = true;
    }
    if (unknown || argc < 2) {
        fprintf(stderr, "usage: no_cma [--mincore] [--membarrier] COMMAND [ARG...]\n"
                        "Runs COMMAND with process_vm_readv/writev and pidfd_getfd refused "
                        "(EPERM), as in a Docker container.\n");
        return 2;
    }
    struct sock_filter filter[] = {
        /* Another architecture's system call numbers mean other calls:
         * refuse them all rather than let one slip through. */
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        REFUSE(__NR_process_vm_readv),
        REFUSE(__NR_process_vm_writev),
        REFUSE(__NR_pidfd_getfd),
        /* The optional refusals: without their option the compare (with
         * ~0) never matches and jumps over it. */
        REFUSE(mincore_too ? (unsigned)__NR_mincore : ~0u),
        REFUSE(membarrier_too ? (unsigned)__NR_membarrier : ~0u),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = { .len = sizeof filter / sizeof filter[0], .filter = filter };
    /* Without it an unprivileged process may not install a filter. */
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) {
        fprintf(stderr, "no_cma: cannot install the seccomp filter: %s\n", strerror(errno));
        return 2;
    }
    /* For the tests' expectations of which path served (tests/mpi/common.h);
     * onesided itself finds out by probing. */
    setenv("ONESIDED_TEST_NO_CMA", "1", 1);
    if (mincore_too)
        setenv("ONESIDED_TEST_NO_MINCORE", "1", 1);
    if (membarrier_too)
        setenv("ONESIDED_TEST_NO_MEMBARRIER", "1", 1);
    execvp(argv[1], argv + 1);
    fprintf(stderr, "no_cma: %s: %s\n", argv[1], strerror(errno));
    return 127;
}
