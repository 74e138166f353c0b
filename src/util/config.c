/* The single configuration table: defaults, environment, window info keys. */
#include "os_util.h"

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

os_config_t os_config;
int os_spin_limit = 2000;
void (*os_backoff_hook)(void);

static os_status_t parse_int(const char *name, const char *text, int *out)
{
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
        return OS_ERR(OS_ERR_INFO, "%s: '%s' is not an integer", name, text);
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
            os_log(1, "ignoring %s=%s: not an integer, using %s", env, v, def);                \
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
        snprintf(buf, sizeof buf, "%d", cfg->field);                                           \
        fn(info ? info : "", buf, ctx);                                                        \
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

void os_backoff_yield(void)
{
    sched_yield();
}
