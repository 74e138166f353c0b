/* How the kernel maps an address of this process, from /proc/self/maps:
 * 's' shared, 'p' private, 0 not at all. For the tests of windows over
 * the program's own memory (made shareable in place, private again). */
#ifndef TESTS_MAPS_H
#define TESTS_MAPS_H

#include <stdio.h>

static inline char t_mapping_of(const void *addr)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512], kind = 0, perms[8];
    unsigned long a = (unsigned long)addr, lo, hi;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3 && lo <= a && a < hi)
            kind = perms[3];
    if (f)
        fclose(f);
    return kind;
}

#endif
