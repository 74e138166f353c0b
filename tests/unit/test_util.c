/* Configuration table, hash map, and the data copy. */
#include "util/os_util.h"
#include "unit.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static int seen;
static void count_keys(const char *k, const char *v, void *ctx)
{
    (void)k;
    (void)v;
    (void)ctx;
    seen++;
}

int main(void)
{
    setenv("ONESIDED_FENCE_DEFER", "1", 1);
    setenv("ONESIDED_SPIN_COUNT", "bogus", 1);
    os_config_load();
    CHECK(os_config.fence_defer == 1, "environment read");
    CHECK(os_config.spin_count == -1, "malformed value falls back to the default");
    CHECK(os_config.dynamic_inline_regions == 256, "default");
    os_config_t cfg = os_config;
    CHECK(os_config_apply_info(&cfg, "onesided_acc_coalesce_max", "8") == OS_OK &&
          cfg.acc_coalesce_max == 8, "info key");
    CHECK(os_config_apply_info(&cfg, "onesided_fence_defer", "false") == OS_OK &&
          cfg.fence_defer == 0, "boolean spelled out");
    CHECK(os_config_apply_info(&cfg, "onesided_fence_defer", "maybe") == OS_ERR_INFO,
          "malformed info value rejected");
    CHECK(os_config_apply_info(&cfg, "unrelated_key", "x") == OS_OK, "unknown keys ignored");
    CHECK(os_config_apply_info(&cfg, "onesided_acc_coalesce", "-1") == OS_OK &&
          cfg.acc_coalesce == -1, "negative info value");
    os_config_each_info(&cfg, count_keys, NULL);
    /* every X(...) row of the table with an info key, and only those */
    int want = 0;
#define COUNT_INFO(field, type, env, info, def, help) want += info != NULL;
    OS_CONFIG_TABLE(COUNT_INFO)
#undef COUNT_INFO
    CHECK(seen == want && want >= 5, "%d window-level keys, saw %d", want, seen);

    /* Ticks: before os_clock_init nanoseconds; after it, the same or the
     * TSC, at a rate that agrees with the monotonic clock. */
    CHECK(!os_clock_tsc && os_ticks_per_us == 1000, "ticks are nanoseconds until chosen");
    os_clock_init();
    CHECK(os_ticks_per_us > 0, "a rate");
    {
        const double t0 = os_now();
        const uint64_t k0 = os_ticks();
        struct timespec ms20 = { 0, 20000000 };
        nanosleep(&ms20, NULL);
        const uint64_t k1 = os_ticks();
        const double us = (os_now() - t0) * 1e6, by_ticks = (double)(k1 - k0) / (double)os_ticks_per_us;
        CHECK(k1 > k0 && by_ticks > 0.95 * us && by_ticks < 1.05 * us,
              "%.0f us by ticks (%s, %llu per us) against %.0f us by the clock", by_ticks,
              os_clock_tsc ? "TSC" : "ns", (unsigned long long)os_ticks_per_us, us);
        CHECK(os_us_to_ticks(7) == 7 * os_ticks_per_us, "conversion");
    }

    os_hmap_t m = { 0 };
    for (uintptr_t k = 1; k <= 5000; k++)
        CHECK(os_hmap_put(&m, k * 7919, (void *)k) == OS_OK || 1, "put");
    int ok = 1;
    for (uintptr_t k = 1; k <= 5000; k++)
        ok &= os_hmap_get(&m, k * 7919) == (void *)k;
    CHECK(ok, "all found");
    for (uintptr_t k = 1; k <= 5000; k += 2)
        os_hmap_del(&m, k * 7919);
    ok = 1;
    for (uintptr_t k = 1; k <= 5000; k++)
        ok &= os_hmap_get(&m, k * 7919) == (k % 2 ? NULL : (void *)k);
    CHECK(ok, "deleted keys gone, others stay");
    /* Churn: tombstones must not fill the table. */
    for (int round = 0; round < 50; round++) {
        for (uintptr_t k = 1; k <= 200; k++)
            os_hmap_put(&m, 1000000 + k, (void *)k);
        for (uintptr_t k = 1; k <= 200; k++)
            os_hmap_del(&m, 1000000 + k);
    }
    CHECK(m.used == 2500, "used %zu", m.used);
    os_hmap_destroy(&m);

    /* os_copy: every length around the 2 KB bound, the 32-byte vectors of
     * the backward copy, Intel's bound of the backward copy and the L2
     * bound, at page-offset distances inside and outside the 1-63 bytes
     * either way that take another copy, at every destination alignment;
     * the 64 bytes either side of the destination stay untouched. */
    const size_t lens[] = { 0, 1, 63, 2047, 2048, 2049, 2049 + 31, 2048 + 127, 2048 + 128,
                            4095, 4096, 6145, 16384, 16385, 65536 + 13, 262144, 700001,
                            2100000 };
    const size_t span = 2100000 + 3 * 4096;
    unsigned char *src = malloc(span), *dst = malloc(span);
    for (size_t i = 0; i < span; i++)
        src[i] = (unsigned char)(i * 131 + (i >> 9));
    ok = 1;
    for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++)
        for (size_t so = 0; so < 128; so += 40)
            for (long dist = -99; dist <= 99; dist += (dist >= -70 && dist < 70 ? 1 : 29)) {
                /* dst + doff sits dist bytes past src + so within a page */
                uintptr_t at = (uintptr_t)src + so + (uintptr_t)dist;
                size_t doff = 4096 + ((at - (uintptr_t)dst) & 4095);
                memset(dst, 0xA5, lens[l] + doff + 64);
                os_copy(dst + doff, src + so, lens[l]);
                for (size_t g = 1; g <= 64; g++)
                    ok &= dst[doff - g] == 0xA5 && dst[doff + lens[l] + g - 1] == 0xA5;
                ok &= !memcmp(dst + doff, src + so, lens[l]);
            }
    CHECK(ok, "os_copy copies exactly the bytes asked for at every distance");
    free(src);
    free(dst);
    return UNIT_REPORT();
}
