/* Open-addressing hash map from MPI handles to onesided objects. */
#include "os_util.h"

#include <stdlib.h>

#define TOMB ((uintptr_t)-1)

static size_t slot_of(uintptr_t key, size_t cap)
{
    uint64_t h = (uint64_t)key * 0x9E3779B97F4A7C15ull; /* Fibonacci hashing */
    return (size_t)(h >> 17) & (cap - 1);
}

void *os_hmap_get(const os_hmap_t *m, uintptr_t key)
{
    if (!m->cap)
        return NULL;
    for (size_t i = slot_of(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
        if (m->keys[i] == key)
            return m->vals[i];
        if (m->keys[i] == 0)
            return NULL;
    }
}

static os_status_t grow(os_hmap_t *m)
{
    size_t cap = m->cap ? m->cap * 2 : 64;
    if (m->used < m->cap / 4 && m->cap)
        cap = m->cap; /* mostly tombstones: rehash at the same size */
    uintptr_t *keys = calloc(cap, sizeof *keys);
    void **vals = calloc(cap, sizeof *vals);
    if (!keys || !vals) {
        free(keys);
        free(vals);
        return OS_ERR(OS_ERR_NOMEM, "hash map of %zu slots", cap);
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (m->keys[i] && m->keys[i] != TOMB) {
            size_t j = slot_of(m->keys[i], cap);
            while (keys[j])
                j = (j + 1) & (cap - 1);
            keys[j] = m->keys[i];
            vals[j] = m->vals[i];
        }
    }
    free(m->keys);
    free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->cap = cap;
    m->tombs = 0;
    return OS_OK;
}

os_status_t os_hmap_put(os_hmap_t *m, uintptr_t key, void *val)
{
    if ((m->used + m->tombs + 1) * 2 > m->cap) {
        os_status_t st = grow(m);
        if (st)
            return st;
    }
    size_t tomb = SIZE_MAX;
    for (size_t i = slot_of(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
        if (m->keys[i] == key) {
            m->vals[i] = val;
            return OS_OK;
        }
        if (m->keys[i] == TOMB && tomb == SIZE_MAX)
            tomb = i;
        if (m->keys[i] == 0) {
            if (tomb != SIZE_MAX) {
                i = tomb;
                m->tombs--;
            }
            m->keys[i] = key;
            m->vals[i] = val;
            m->used++;
            return OS_OK;
        }
    }
}

void *os_hmap_del(os_hmap_t *m, uintptr_t key)
{
    if (!m->cap)
        return NULL;
    for (size_t i = slot_of(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
        if (m->keys[i] == key) {
            void *v = m->vals[i];
            m->keys[i] = TOMB;
            m->vals[i] = NULL;
            m->used--;
            m->tombs++;
            return v;
        }
        if (m->keys[i] == 0)
            return NULL;
    }
}

void os_hmap_destroy(os_hmap_t *m)
{
    free(m->keys);
    free(m->vals);
    *m = (os_hmap_t){ 0 };
}
