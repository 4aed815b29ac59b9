/*
 * conf_jemalloc.c - options in jemalloc's dialect: the MALLOC_CONF
 * environment variable and a program's `const char *malloc_conf`, which
 * conf.c reads (MALLOC_CONF only when DPMALLOC_CONF is absent, and not
 * under AT_SECURE). Each jemalloc name that dpmalloc has with the same
 * meaning is translated, item by item, into a dpmalloc "key:value" that
 * conf.c hands to conf_parse, which applies it or warns about its value;
 * any other name gets conf.c's one-line "unknown option" warning here.
 * docs/config.md ("MALLOC_CONF") lists the map.
 *
 * Runs inside conf_init, before the heap exists: no allocation. Called
 * by conf.c and calls nothing of it (the rooms stay one way).
 * May call: error (warnings).
 */
#include "conf.h"
#include "error.h"

#include <string.h>

/* jemalloc's own definition is weak too; a program may define it. */
extern const char *malloc_conf __attribute__((weak));

typedef struct je_name {
    const char *je;       /* jemalloc's name */
    const char *dpm;      /* dpmalloc's */
} je_name_t;

/* Same meaning, same value syntax (bools true/false, sizes in bytes,
 * times in ms, thp default/always/never). The heap-profile names are
 * passed on as they are: conf_parse knows them where dpmalloc has them. */
static const je_name_t same_names[] = {
    {"narenas", "narenas"},
    {"tcache", "tcache"},
    {"tcache_max", "tcache_max"},
    {"tcache_nslots_small_min", "tcache_nslots_small_min"},
    {"tcache_nslots_small_max", "tcache_nslots_small_max"},
    {"tcache_nslots_large", "tcache_nslots_large"},
    {"lg_tcache_nslots_mul", "lg_tcache_nslots_mul"},
    {"dirty_decay_ms", "dirty_decay_ms"},
    {"muzzy_decay_ms", "muzzy_decay_ms"},
    {"background_thread", "background_thread"},
    {"stats_print", "stats_print"},
    {"stats_print_opts", "stats_print_opts"},
    {"zero", "zero"},
    {"oversize_threshold", "oversize_threshold"},
    {"thp", "thp"},
    {"prof", "prof"},
    {"prof_active", "prof_active"},
    {"lg_prof_sample", "lg_prof_sample"},
    {"prof_prefix", "prof_prefix"},
    {"prof_final", "prof_final"},
    {"prof_leak", "prof_leak"},
};

static bool is(const char *p, size_t len, const char *s) { return strlen(s) == len && memcmp(p, s, len) == 0; }

/* "key:value" into out (room for 160 bytes); false if it does not fit. */
static bool join(char *out, size_t room, const char *k, size_t klen, const char *v, size_t vlen, bool has_v)
{
    if (klen + vlen + 2 > room)
        return false;
    memcpy(out, k, klen);
    size_t at = klen;
    if (has_v) {
        out[at++] = ':';
        memcpy(out + at, v, vlen);
        at += vlen;
    }
    out[at] = '\0';
    return true;
}

static unsigned decimal(char *out, unsigned long long v)
{
    char tmp[24];
    unsigned n = 0;
    do
        tmp[n++] = (char)('0' + v % 10);
    while ((v /= 10) != 0);
    for (unsigned i = 0; i < n; i++)
        out[i] = tmp[n - 1 - i];
    out[n] = '\0';
    return n;
}

/* One jemalloc item, k:v (has_v false: no colon), into out (room bytes)
 * in dpmalloc's names; "" after warning about a name dpmalloc has not. */
static void translate(const char *k, size_t klen, const char *v, size_t vlen, bool has_v, char *out, size_t room)
{
    char num[24];
    out[0] = '\0';
    /* jemalloc's junk: true/false, or alloc/free for one side; dpmalloc's
     * junk fills on both sides */
    if (is(k, klen, "junk") && has_v && (is(v, vlen, "alloc") || is(v, vlen, "free"))) {
        join(out, room, "junk", 4, "true", 4, true);
        return;
    }
    /* lg_tcache_max: log2 of tcache_max. N up to 62 becomes tcache_max:2^N,
     * which conf_parse bounds as it bounds tcache_max itself (its usual
     * warning above 8 MiB, default kept); any other value is this name's
     * bad value, never tcache_max:N bytes. */
    if (is(k, klen, "lg_tcache_max")) {
        unsigned lg = 0;
        bool ok = has_v && vlen > 0 && vlen <= 2;
        for (size_t i = 0; ok && i < vlen; i++) {
            ok = v[i] >= '0' && v[i] <= '9';
            lg = lg * 10 + (unsigned)(v[i] - '0');
        }
        if (ok && lg <= 62) {
            decimal(num, 1ull << lg);
            join(out, room, "tcache_max", 10, num, strlen(num), true);
            return;
        }
        char line[160];
        if (!join(line, sizeof(line), k, klen, v, vlen, has_v))
            join(line, sizeof(line), k, klen, NULL, 0, false);
        dpm_warn3("bad value for option ", line, " (ignored, default kept)");
        return;
    }
    const char *dpm = is(k, klen, "junk") ? "junk" : NULL;
    for (unsigned i = 0; dpm == NULL && i < ARRAY_LEN(same_names); i++)
        if (is(k, klen, same_names[i].je))
            dpm = same_names[i].dpm;
    if (dpm != NULL && join(out, room, dpm, strlen(dpm), v, vlen, has_v))
        return;
    /* a jemalloc name dpmalloc has not: the warning conf_parse gives an
     * unknown name, in the same words */
    char line[160];
    if (!join(line, sizeof(line), k, klen, v, vlen, has_v))
        join(line, sizeof(line), k, klen < 64 ? klen : 64, NULL, 0, false);
    dpm_warn3(dpm != NULL ? "bad value for option " : "unknown option ", line, " (ignored, default kept)");
}

bool conf_jemalloc_item(const char **cursor, char *out, size_t room)
{
    const char *p = *cursor;
    if (p == NULL || *p == '\0')
        return false;
    const char *end = strchr(p, ',');
    size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
    const char *colon = memchr(p, ':', len);
    size_t klen = colon != NULL ? (size_t)(colon - p) : len;
    out[0] = '\0';
    if (len != 0)
        translate(p, klen, colon != NULL ? colon + 1 : NULL, colon != NULL ? len - klen - 1 : 0, colon != NULL, out,
                  room);
    *cursor = end != NULL ? end + 1 : p + len;
    return true;
}

const char *conf_jemalloc_program(void) { return &malloc_conf != NULL ? malloc_conf : NULL; }
