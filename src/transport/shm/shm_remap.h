/* The shared-memory transport's page mechanics (remap.c), for region.c. */
#ifndef SHM_REMAP_H
#define SHM_REMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "os_shm.h"

/* The whole pages [*lo, *hi) a window over [addr, addr + len) may make
 * shareable, those that hold nothing but this memory: all of the window's
 * pages when it is made of whole pages or fills a glibc mmapped chunk,
 * else the whole pages strictly inside it (a block in the heap shares its
 * first and last page with other objects); false when there is none. */
bool shm_pages_for(const void *addr, size_t len, uintptr_t *lo, uintptr_t *hi);
/* Every page of [lo, hi) is private anonymous read-write memory (not a file
 * mapping, which must keep writing to its file, nor read-only memory). */
bool shm_private_anonymous(uintptr_t lo, uintptr_t hi);
/* Copy [lo, lo + len) into fd (sized already) and map fd over it. On false
 * nothing changed. */
bool shm_remap_shared(uintptr_t lo, size_t len, int fd);
/* Make [lo, lo + len) private anonymous memory again, with the same bytes. */
bool shm_remap_private(uintptr_t lo, size_t len);
/* [lo, hi) is still mapped from the memfd called name (the program has not
 * unmapped or replaced it); false when /proc/self/maps cannot tell. */
bool shm_still_mapped(uintptr_t lo, uintptr_t hi, const char *name);
/* Read /proc/self/maps as text even where PROCMAP_QUERY would answer (for
 * the unit test of both ways). */
void shm_maps_force_text(bool on);

#endif
