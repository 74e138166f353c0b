/* The single configuration table: defaults, environment, window info keys. */
#include "os_util.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

os_config_t os_config;

/* Names accepted for integer tunables, by variable or info key. */
static const struct {
    const char *key, *name;
    int value;
} named[] = {
    { "lock", "hybrid", OS_LOCK_HYBRID },    { "lock", "manager", OS_LOCK_MANAGER },
    { "lock", "network", OS_LOCK_NETWORK },  { "lock_policy", "paper", 0 },
    { "lock_policy", "history", 1 },         { "lock_policy", "random", 2 },
    { "route", "direct", 0 },                { "route", "server", 1 },
    { "route", "cooperative", 2 },
};

/* "ONESIDED_LOCK_POLICY" and "onesided_lock_policy" both name "lock_policy". */
static bool names_key(const char *name, const char *key)
{
    size_t skip = strncmp(name, "ONESIDED_", 9) && strncmp(name, "onesided_", 9) ? 0 : 9;
    return !strcasecmp(name + skip, key);
}

static const char *value_name(const char *key, int value)
{
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++)
        if (!strcmp(named[i].key, key) && named[i].value == value)
            return named[i].name;
    return NULL;
}

static os_status_t parse_int(const char *name, const char *text, int *out)
{
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++)
        if (names_key(name, named[i].key) && !strcmp(text, named[i].name)) {
            *out = named[i].value;
            return OS_OK;
        }
    char *end;
    errno = 0;
    long v = strtol(text, &end, 0);
    while (*end == ' ')
        end++;
    if (errno || end == text || *end || v < INT_MIN || v > INT_MAX) {
        /* Booleans spelled out are accepted for every integer tunable. */
        if (!strcmp(text, "true") || !strcmp(text, "yes") || !strcmp(text, "on")) {
            *out = 1;
            return OS_OK;
        }
        if (!strcmp(text, "false") || !strcmp(text, "no") || !strcmp(text, "off")) {
            *out = 0;
            return OS_OK;
        }
        return OS_ERR(OS_ERR_INFO, "%s: '%s' is not an integer or a known name", name, text);
    }
    *out = (int)v;
    return OS_OK;
}

void os_config_load(void)
{
#define OS_CONFIG_LOAD(field, type, env, info, def, help)                                     \
    {                                                                                          \
        const char *v = getenv(env);                                                           \
        (void)parse_int(env, def, &os_config.field);                                           \
        if (v && *v && parse_int(env, v, &os_config.field) != OS_OK)                           \
            os_log(1, "ignoring %s=%s: not an integer or a known name, using %s", env, v, def);                \
    }
    OS_CONFIG_TABLE(OS_CONFIG_LOAD)
#undef OS_CONFIG_LOAD
    os_log_level = os_config.verbose;
}

os_status_t os_config_apply_info(os_config_t *cfg, const char *key, const char *value)
{
#define OS_CONFIG_INFO(field, type, env, info, def, help)                                     \
    if (info && !strcmp(key, info ? info : ""))                                                \
        return parse_int(info ? info : "", value, &cfg->field);
    OS_CONFIG_TABLE(OS_CONFIG_INFO)
#undef OS_CONFIG_INFO
    return OS_OK;
}

void os_config_each_info(const os_config_t *cfg, os_config_info_fn fn, void *ctx)
{
    char buf[32];
#define OS_CONFIG_EACH(field, type, env, info, def, help)                                     \
    if (info) {                                                                                \
        const char *name = value_name(#field, cfg->field);                                     \
        snprintf(buf, sizeof buf, "%d", cfg->field);                                           \
        fn(info ? info : "", name ? name : buf, ctx);                                          \
    }
    OS_CONFIG_TABLE(OS_CONFIG_EACH)
#undef OS_CONFIG_EACH
}

void os_config_print(FILE *out)
{
    fprintf(out, "onesided tunables (environment variable / window info key: current [default])\n");
#define OS_CONFIG_PRINT(field, type, env, info, def, help)                                    \
    fprintf(out, "  %s%s%s: %d [%s]\n      %s\n", env, info ? " / " : "", info ? info : "",   \
            os_config.field, def, help);
    OS_CONFIG_TABLE(OS_CONFIG_PRINT)
#undef OS_CONFIG_PRINT
}
