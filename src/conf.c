/*
 * conf.c - option table and parser (see conf.h). The parser works on the
 * raw string without allocating: it runs before the heap exists.
 */
#include "conf.h"
#include "error.h"

#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>

#ifndef DPM_DEFAULT_CONF
#define DPM_DEFAULT_CONF ""
#endif

dpm_opts_t opt;

/* An application may define: const char *dpm_conf = "narenas:2"; */
extern const char *dpm_conf __attribute__((weak));

static char thp_text[16] = "default";

const opt_desc_t opt_table[] = {
    {"narenas", OPT_UNSIGNED, &opt.narenas, 0, OPT_NARENAS_MAX},
    {"tcache", OPT_BOOL, &opt.tcache, 0, 1},
    {"tcache_max", OPT_SIZE, &opt.tcache_max, 0, (int64_t)8 << 20},
    {"percpu", OPT_BOOL, &opt.percpu, 0, 1},
    {"percpu_bytes", OPT_SIZE, &opt.percpu_bytes, 0, (int64_t)1 << 30},
    {"tcache_nslots_small_min", OPT_UNSIGNED, &opt.tcache_nslots_small_min, 1, 2048},
    {"tcache_nslots_small_max", OPT_UNSIGNED, &opt.tcache_nslots_small_max, 1, 2048},
    {"tcache_nslots_large", OPT_UNSIGNED, &opt.tcache_nslots_large, 0, 64},
    {"tcache_large_bytes", OPT_SIZE, &opt.tcache_large_bytes, 0, (int64_t)1 << 30},
    {"lg_tcache_nslots_mul", OPT_UNSIGNED, &opt.lg_tcache_nslots_mul, 0, 8},
    {"oversize_threshold", OPT_SIZE, &opt.oversize_threshold, 0, (int64_t)1 << 46},
    {"dirty_decay_ms", OPT_SSIZE, &opt.dirty_decay_ms, -1, INT32_MAX},
    {"muzzy_decay_ms", OPT_SSIZE, &opt.muzzy_decay_ms, -1, INT32_MAX},
    {"background_thread", OPT_BOOL, &opt.background_thread, 0, 1},
    {"stats_print", OPT_BOOL, &opt.stats_print, 0, 1},
    {"stats_cycles", OPT_BOOL, &opt.stats_cycles, 0, 1},
    {"stats_print_opts", OPT_STRING, opt.stats_print_opts, 0, sizeof(opt.stats_print_opts)},
    {"junk", OPT_BOOL, &opt.junk, 0, 1},
    {"zero", OPT_BOOL, &opt.zero, 0, 1},
    {"secure", OPT_BOOL, &opt.secure, 0, 1},
    {"guard_sample", OPT_SIZE, &opt.guard_sample, 0, (int64_t)1 << 40},
    {"hugepages", OPT_BOOL, &opt.hugepages, 0, 1},
    {"thp", OPT_STRING, thp_text, 0, sizeof(thp_text)},
    {"numa", OPT_BOOL, &opt.numa, 0, 1},
    {"reserve_mb", OPT_SIZE, &opt.reserve_mb, 0, (int64_t)1 << 26},
    {"slab_sizes", OPT_STRING, opt.slab_sizes, 0, sizeof(opt.slab_sizes)},
    {"pcv_slots", OPT_UNSIGNED, &opt.pcv_slots, 0, 4096},
    {"pcv_size", OPT_SIZE, &opt.pcv_size, (int64_t)64 << 10, (int64_t)256 << 20},
    {"prof", OPT_BOOL, &opt.prof, 0, 1},
    {"prof_active", OPT_BOOL, &opt.prof_active, 0, 1},
    {"prof_final", OPT_BOOL, &opt.prof_final, 0, 1},
    {"prof_leak", OPT_BOOL, &opt.prof_leak, 0, 1},
    {"lg_prof_sample", OPT_SIZE, &opt.lg_prof_sample, 0, 62},
    {"prof_prefix", OPT_STRING, opt.prof_prefix, 0, sizeof(opt.prof_prefix)},
    {"memory_limit_mb", OPT_SIZE, &opt.memory_limit_mb, 0, (int64_t)1 << 26},
    {"memory_soft_limit_mb", OPT_SIZE, &opt.memory_soft_limit_mb, 0, (int64_t)1 << 26},
};
const unsigned opt_table_len = ARRAY_LEN(opt_table);

static void set_defaults(void)
{
    memset(&opt, 0, sizeof(opt));
    opt.tcache = true;
    opt.tcache_max = (size_t)4 << 20;
    opt.percpu = true;
    opt.percpu_bytes = (size_t)1 << 20;
    opt.tcache_nslots_small_min = 20;
    opt.tcache_nslots_small_max = 200;
    opt.tcache_nslots_large = 16;
    opt.tcache_large_bytes = (size_t)4 << 20;
    opt.lg_tcache_nslots_mul = 1;
    opt.oversize_threshold = (size_t)32 << 20;
    opt.dirty_decay_ms = 10000;
    opt.muzzy_decay_ms = 0;
    opt.background_thread_auto = true;
    opt.lg_hugepage = 21;
    opt.pcv_size = (size_t)1 << 20;
    opt.prof_active = true;
    opt.lg_prof_sample = 19;
    memcpy(opt.prof_prefix, "dpmprof", sizeof("dpmprof"));
}

typedef struct token {
    const char *p;
    size_t len;
} token_t;

static bool token_is(token_t t, const char *s) { return strlen(s) == t.len && memcmp(t.p, s, t.len) == 0; }

static void warn_token(const char *what, token_t key, token_t val)
{
    char k[64], v[96];
    size_t kl = key.len < sizeof(k) - 1 ? key.len : sizeof(k) - 1;
    size_t vl = val.len < sizeof(v) - 1 ? val.len : sizeof(v) - 1;
    memcpy(k, key.p, kl);
    k[kl] = '\0';
    if (val.p != NULL)
        memcpy(v, val.p, vl);
    v[val.p != NULL ? vl : 0] = '\0';
    char msg[200] = "";
    strcat(msg, k);
    if (val.p != NULL) {
        strcat(msg, ":");
        strcat(msg, v);
    }
    dpm_warn3(what, msg, " (ignored, default kept)");
}

/* Whole-token signed decimal; false on junk or overflow. */
static bool parse_int(token_t t, int64_t *out)
{
    size_t i = 0;
    bool neg = false;
    if (t.len > 0 && (t.p[0] == '-' || t.p[0] == '+'))
        neg = t.p[i++] == '-';
    if (i == t.len)
        return false;
    uint64_t v = 0;
    for (; i < t.len; i++) {
        if (t.p[i] < '0' || t.p[i] > '9' || v > (UINT64_C(1) << 62) / 10)
            return false;
        v = v * 10 + (uint64_t)(t.p[i] - '0');
    }
    if (v > (UINT64_C(1) << 62))
        return false;
    *out = neg ? -(int64_t)v : (int64_t)v;
    return true;
}

static bool parse_bool(token_t t, bool *out)
{
    if (token_is(t, "true") || token_is(t, "1"))
        return *out = true, true;
    if (token_is(t, "false") || token_is(t, "0"))
        return *out = false, true;
    return false;
}

/* "lo-hi:pages|lo-hi:pages" -> opt.slab_pages for the classes in range. */
static bool parse_slab_sizes(token_t t)
{
    uint32_t pages[NSMALL];
    memcpy(pages, opt.slab_pages, sizeof(pages));
    size_t i = 0;
    while (i < t.len) {
        size_t j = i;
        while (j < t.len && t.p[j] != '|')
            j++;
        token_t part = {t.p + i, j - i};
        const char *dash = memchr(part.p, '-', part.len);
        const char *colon = memchr(part.p, ':', part.len);
        int64_t lo, hi, np;
        if (dash == NULL || colon == NULL || colon < dash ||
            !parse_int((token_t){part.p, (size_t)(dash - part.p)}, &lo) ||
            !parse_int((token_t){dash + 1, (size_t)(colon - dash - 1)}, &hi) ||
            !parse_int((token_t){colon + 1, (size_t)(part.p + part.len - colon - 1)}, &np) || lo < 1 ||
            hi < lo || np < 1 || np > SLAB_MAX_PAGES)
            return false;
        for (unsigned c = 0; c < NSMALL; c++) {
            size_t sz = sc_formula_size(c);
            if ((int64_t)sz >= lo && (int64_t)sz <= hi)
                pages[c] = (uint32_t)np;
        }
        i = j + 1;
    }
    memcpy(opt.slab_pages, pages, sizeof(pages));
    return true;
}

static bool parse_string_option(const opt_desc_t *d, token_t val)
{
    if (val.len + 1 > (size_t)d->max)
        return false;
    if (d->value == opt.slab_sizes && !parse_slab_sizes(val))
        return false;
    if (d->value == thp_text) {
        if (token_is(val, "default"))
            opt.thp = THP_DEFAULT;
        else if (token_is(val, "always"))
            opt.thp = THP_ALWAYS;
        else if (token_is(val, "never"))
            opt.thp = THP_NEVER;
        else
            return false;
    }
    memcpy(d->value, val.p, val.len);
    ((char *)d->value)[val.len] = '\0';
    return true;
}

static bool apply_option(const opt_desc_t *d, token_t val)
{
    int64_t v;
    bool b;
    switch (d->type) {
    case OPT_BOOL:
        if (d->value == &opt.hugepages && (token_is(val, "1g") || token_is(val, "2m"))) {
            opt.hugepages = true;
            opt.lg_hugepage = token_is(val, "1g") ? 30 : 21;
            return true;
        }
        if (!parse_bool(val, &b))
            return false;
        *(bool *)d->value = b;
        if (d->value == &opt.background_thread)
            opt.background_thread_auto = false;
        return true;
    case OPT_STRING:
        return parse_string_option(d, val);
    default:
        if (!parse_int(val, &v) || v < d->min || v > d->max)
            return false;
        if (d->type == OPT_UNSIGNED)
            *(unsigned *)d->value = (unsigned)v;
        else if (d->type == OPT_SIZE)
            *(size_t *)d->value = (size_t)v;
        else
            *(int64_t *)d->value = v;
        return true;
    }
}

static const opt_desc_t *find_option(token_t key)
{
    for (unsigned i = 0; i < opt_table_len; i++)
        if (token_is(key, opt_table[i].name))
            return &opt_table[i];
    return NULL;
}

int conf_parse(const char *conf)
{
    int errors = 0;
    const char *p = conf;
    while (p != NULL && *p != '\0') {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *colon = memchr(p, ':', len);
        token_t key = {p, colon ? (size_t)(colon - p) : len};
        token_t val = {colon ? colon + 1 : NULL, colon ? len - key.len - 1 : 0};
        if (len != 0) {
            const opt_desc_t *d = find_option(key);
            if (d == NULL) {
                warn_token("unknown option ", key, val);
                errors++;
            } else if (colon == NULL || !apply_option(d, val)) {
                warn_token("bad value for option ", key, val);
                errors++;
            }
        }
        p = end ? end + 1 : NULL;
    }
    return errors;
}

/* DPMALLOC_CONF is ignored when the program runs with more privileges
 * than its invoker (setuid, setgid, file capabilities: AT_SECURE), as
 * glibc ignores MALLOC_*: an unprivileged user must not retune a
 * privileged program's heap (secure:false over the program's dpm_conf,
 * stats_print showing its heap layout). glibc >= 2.17 has secure_getenv;
 * elsewhere the aux vector says. */
const char *conf_secure_getenv(const char *name)
{
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 17))
    return secure_getenv(name);
#else
    return getauxval(AT_SECURE) != 0 ? NULL : getenv(name);
#endif
}

static const char *conf_env(void) { return conf_secure_getenv("DPMALLOC_CONF"); }

/* A string in jemalloc's names (malloc_conf, MALLOC_CONF), item by item
 * in dpmalloc's (conf_jemalloc.c). */
static void conf_parse_jemalloc(const char *conf)
{
    char item[256];
    while (conf_jemalloc_item(&conf, item, sizeof(item)))
        conf_parse(item);
}

void conf_init(void)
{
    set_defaults();
    conf_parse(DPM_DEFAULT_CONF);
    if (&dpm_conf != NULL && dpm_conf != NULL)
        conf_parse(dpm_conf);
    conf_parse_jemalloc(conf_jemalloc_program());
    if (conf_env() == NULL)
        conf_parse_jemalloc(conf_secure_getenv("MALLOC_CONF"));
    conf_parse(conf_env());
    if (opt.tcache_nslots_small_min > opt.tcache_nslots_small_max)
        opt.tcache_nslots_small_min = opt.tcache_nslots_small_max;
    sc_init(opt.slab_pages);
}
