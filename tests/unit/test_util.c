/* Configuration table and hash map. */
#include "util/os_util.h"
#include "unit.h"

#include <stdlib.h>

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
    return UNIT_REPORT();
}
