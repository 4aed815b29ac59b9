/*
 * conf_test.c - DPMALLOC_CONF and the dpm_conf symbol, end to end.
 *
 * Proves, by running helper programs (conf_child) with DPMALLOC_CONF in
 * their environment: with no configuration every option reads back (via
 * dpm_ctl "opt.<key>") as its documented default and nothing is printed;
 * every key can be set and reads back, at both ends of its range, and the
 * settings take effect (narenas, tcache on/off, slab_sizes, tcache slot
 * counts); a value just outside a range, a malformed value, a negative
 * value for an unsigned key, a huge number, a missing colon or an empty
 * value give exactly one line "dpmalloc: bad value for option ..." naming
 * the key, and the default is kept while the other keys of the string still
 * apply; an unknown key gives exactly one "dpmalloc: unknown option ..."
 * line; garbage strings (empty, commas only, colons, very long, control
 * characters) never crash; the last of duplicated keys wins; a program that
 * defines `const char *dpm_conf` gets those settings, with DPMALLOC_CONF
 * overriding them key by key; thp:always / thp:never show up as the
 * hg / nh VmFlags of the allocator's mappings.
 *
 * Defaults and ranges are those documented in docs/config.md.
 *
 * usage: test_ctl_conf <conf_child> <conf_symbol_child> <docs/config.md>
 *                      [<conf_child linked with dpmalloc_static>
 *                       <conf_symbol_child linked with the shared dpmalloc>]
 */
#include "test.h"
#include "ctl_util.h"

static const char *child_path, *symbol_child_path;
static const char *override_child_path, *shared_symbol_child_path;   /* optional */

/* Defaults and numeric ranges, read from docs/config.md (the table
 * "| `key` | type | default | range | meaning |"): the documentation is
 * what the test holds the implementation to. */
#define MAX_KEYS 64
static const char *config_md;
static char defaults[MAX_KEYS][2][96];   /* "opt.<key>", default as printed by conf_child */
static size_t ndefaults;
static struct {
    char key[64];
    long long lo, hi;
} ranges[MAX_KEYS];
static size_t nranges;
#define NDEFAULTS ndefaults

static bool load_config_md(void)
{
    FILE *f = fopen(config_md, "r");
    if (f == NULL) {
        fprintf(stderr, "cannot open %s\n", config_md);
        return false;
    }
    char line[2048];
    while (fgets(line, sizeof line, f) != NULL && ndefaults < MAX_KEYS) {
        if (strncmp(line, "| `", 3) != 0)
            continue;
        char *cell[4], *p = line + 1;
        int n = 0;
        for (; n < 4; n++) {
            char *bar = strchr(p, '|');
            if (bar == NULL)
                break;
            *bar = '\0';
            cell[n] = p;
            p = bar + 1;
        }
        if (n < 4)
            continue;
        for (int i = 0; i < 4; i++)
            trim_chars(cell[i], " `");
        const char *def = cell[2];
        if (strcmp(def, "true") == 0)
            def = "1";
        else if (strcmp(def, "false") == 0)
            def = "0";
        else if (strcmp(def, "\"\"") == 0)
            def = "";
        snprintf(defaults[ndefaults][0], sizeof defaults[0][0], "opt.%s", cell[0]);
        snprintf(defaults[ndefaults][1], sizeof defaults[0][1], "%s", def);
        ndefaults++;
        long long lo, hi;
        if (sscanf(cell[3], "%lld .. %lld", &lo, &hi) == 2 && nranges < MAX_KEYS) {
            snprintf(ranges[nranges].key, sizeof ranges[0].key, "%s", cell[0]);
            ranges[nranges].lo = lo;
            ranges[nranges].hi = hi;
            nranges++;
        }
    }
    fclose(f);
    return ndefaults > 0;
}

static const char *default_of(const char *key)
{
    for (size_t i = 0; i < NDEFAULTS; i++)
        if (strcmp(defaults[i][0], key) == 0)
            return defaults[i][1];
    return NULL;
}

/* Runs the helper with DPMALLOC_CONF=conf (NULL: unset). */
static void run_conf(const char *path, const char *conf, struct spawn_result *r)
{
    char envbuf[8192];
    const char *env[2] = {NULL, NULL};
    if (conf != NULL) {
        snprintf(envbuf, sizeof envbuf, "DPMALLOC_CONF=%s", conf);
        env[0] = envbuf;
    } else {
        env[0] = "-DPMALLOC_CONF";
    }
    char *argv[] = {(char *)path, NULL};
    spawn_capture(argv, env, 20, r);
}

static struct spawn_result res;   /* large: keep off the stack */

#define EXPECT_KV(r, key, want)                                                \
    do {                                                                       \
        char v_[512];                                                          \
        if (!find_kv((r)->out, (key), v_, sizeof v_))                          \
            TEST_FAIL("%s missing from helper output:\n%s", (key), (r)->out);  \
        else if (strcmp(v_, (want)) != 0)                                      \
            TEST_FAIL("%s: expected \"%s\", got \"%s\"", (key), (want), v_);   \
    } while (0)

static void expect_no_stderr(const struct spawn_result *r, const char *conf)
{
    EXPECT(r->errlen == 0, "DPMALLOC_CONF=\"%s\": unexpected stderr:\n%s", conf ? conf : "(unset)", r->err);
}

static void expect_all_defaults_except(const struct spawn_result *r, const char *except)
{
    for (size_t i = 0; i < NDEFAULTS; i++) {
        if (except != NULL && strcmp(defaults[i][0], except) == 0)
            continue;
        EXPECT_KV(r, defaults[i][0], defaults[i][1]);
    }
}

TEST(defaults_without_conf)
{
    run_conf(child_path, NULL, &res);
    if (!SPAWN_OK(&res))
        return;
    expect_no_stderr(&res, NULL);
    expect_all_defaults_except(&res, NULL);
    /* every opt.* the table knows has a documented default here */
    for (const char *l = res.out; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        if (strncmp(l, "opt.", 4) != 0)
            continue;
        char key[64];
        size_t k = strcspn(l, "=");
        snprintf(key, sizeof key, "%.*s", (int)k, l);
        EXPECT(default_of(key) != NULL, "option %s is not documented in %s", key, config_md);
    }
    EXPECT_KV(&res, "tcache.enabled", "1");
}

TEST(empty_and_separator_only_strings)
{
    static const char *const confs[] = {"", ",", ",,,,,,", ",,narenas:2,,", "narenas:2,"};
    for (size_t i = 0; i < sizeof confs / sizeof confs[0]; i++) {
        run_conf(child_path, confs[i], &res);
        if (!SPAWN_OK(&res))
            continue;
        expect_no_stderr(&res, confs[i]);
        const char *want = strstr(confs[i], "narenas:2") ? "2" : "0";
        EXPECT_KV(&res, "opt.narenas", want);
        expect_all_defaults_except(&res, "opt.narenas");
    }
}

TEST(every_key_set_and_read_back)
{
    const char *conf = "narenas:3,tcache:true,tcache_max:4096,tcache_nslots_small_min:5,"
                       "tcache_nslots_small_max:100,tcache_nslots_large:7,lg_tcache_nslots_mul:2,"
                       "dirty_decay_ms:1234,muzzy_decay_ms:-1,background_thread:false,stats_print:false,"
                       "stats_cycles:true,stats_print_opts:Jgx,junk:true,zero:false,thp:never,"
                       "slab_sizes:1-32:2";
    run_conf(child_path, conf, &res);
    if (!SPAWN_OK(&res))
        return;
    expect_no_stderr(&res, conf);
    EXPECT_KV(&res, "opt.narenas", "3");
    EXPECT_KV(&res, "opt.tcache", "1");
    EXPECT_KV(&res, "opt.tcache_max", "4096");
    EXPECT_KV(&res, "opt.tcache_nslots_small_min", "5");
    EXPECT_KV(&res, "opt.tcache_nslots_small_max", "100");
    EXPECT_KV(&res, "opt.tcache_nslots_large", "7");
    EXPECT_KV(&res, "opt.lg_tcache_nslots_mul", "2");
    EXPECT_KV(&res, "opt.dirty_decay_ms", "1234");
    EXPECT_KV(&res, "opt.muzzy_decay_ms", "-1");
    EXPECT_KV(&res, "opt.background_thread", "0");
    EXPECT_KV(&res, "opt.stats_print", "0");
    EXPECT_KV(&res, "opt.stats_cycles", "1");
    EXPECT_KV(&res, "opt.stats_print_opts", "Jgx");
    EXPECT_KV(&res, "opt.junk", "1");
    EXPECT_KV(&res, "opt.zero", "0");
    EXPECT_KV(&res, "opt.thp", "never");
    EXPECT_KV(&res, "opt.slab_sizes", "1-32:2");
    /* effects: 3 automatic arenas; classes 16 and 32 (bins 0, 1) get
     * 2-page slabs */
    EXPECT_KV(&res, "narenas", "3");
    EXPECT_KV(&res, "bin.0.slab_size", "8192");
    EXPECT_KV(&res, "bin.1.slab_size", "8192");
}

TEST(settings_take_effect)
{
    /* tcache off: the thread has no cache, nothing is cached */
    run_conf(child_path, "tcache:false", &res);
    if (SPAWN_OK(&res)) {
        expect_no_stderr(&res, "tcache:false");
        EXPECT_KV(&res, "opt.tcache", "0");
        EXPECT_KV(&res, "tcache.enabled", "0");
        EXPECT_KV(&res, "ncached.64", "0");
    }
    /* tcache_max bounds which sizes are cached */
    run_conf(child_path, "tcache_max:1024", &res);
    if (SPAWN_OK(&res)) {
        char v[64] = "";
        find_kv(res.out, "ncached.1024", v, sizeof v);
        EXPECT(strtoul(v, NULL, 10) > 0, "ncached.1024 = \"%s\", expected > 0 with tcache_max:1024", v);
        EXPECT_KV(&res, "ncached.4096", "0");
        EXPECT_KV(&res, "ncached.65536", "0");
    }
    /* slot counts: small classes clamp to [min, max]; cached large classes
     * report the large cache's slots */
    run_conf(child_path, "tcache_nslots_small_min:3,tcache_nslots_small_max:3,tcache_nslots_large:9", &res);
    if (SPAWN_OK(&res)) {
        EXPECT_KV(&res, "ncached.16", "3");
        EXPECT_KV(&res, "ncached.1024", "3");
        EXPECT_KV(&res, "ncached.32768", "9");
    }
    /* integer bools */
    run_conf(child_path, "tcache:0,junk:1", &res);
    if (SPAWN_OK(&res)) {
        expect_no_stderr(&res, "tcache:0,junk:1");
        EXPECT_KV(&res, "opt.tcache", "0");
        EXPECT_KV(&res, "opt.junk", "1");
    }
}

TEST(range_ends_accepted)
{
    static const char *const cases[][3] = {
        {"narenas:3072", "opt.narenas", "3072"},
        {"narenas:1", "opt.narenas", "1"},
        {"tcache_max:0", "opt.tcache_max", "0"},
        {"tcache_max:8388608", "opt.tcache_max", "8388608"},
        {"tcache_nslots_small_min:1", "opt.tcache_nslots_small_min", "1"},
        {"tcache_nslots_small_max:2048", "opt.tcache_nslots_small_max", "2048"},
        {"tcache_nslots_large:0", "opt.tcache_nslots_large", "0"},
        {"tcache_nslots_large:64", "opt.tcache_nslots_large", "64"},
        {"tcache_large_bytes:0", "opt.tcache_large_bytes", "0"},
        {"tcache_large_bytes:1073741824", "opt.tcache_large_bytes", "1073741824"},
        {"lg_tcache_nslots_mul:0", "opt.lg_tcache_nslots_mul", "0"},
        {"lg_tcache_nslots_mul:8", "opt.lg_tcache_nslots_mul", "8"},
        {"dirty_decay_ms:-1", "opt.dirty_decay_ms", "-1"},
        {"dirty_decay_ms:0", "opt.dirty_decay_ms", "0"},
        {"dirty_decay_ms:2147483647", "opt.dirty_decay_ms", "2147483647"},
        {"muzzy_decay_ms:2147483647", "opt.muzzy_decay_ms", "2147483647"},
        {"thp:always", "opt.thp", "always"},
        {"thp:default", "opt.thp", "default"},
        {"stats_print_opts:Jgmablxt", "opt.stats_print_opts", "Jgmablxt"},
        {"slab_sizes:1-4096:1|8192-16384:4", "opt.slab_sizes", "1-4096:1|8192-16384:4"},
        {"narenas:+7", "opt.narenas", "7"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        run_conf(child_path, cases[i][0], &res);
        if (!SPAWN_OK(&res))
            continue;
        expect_no_stderr(&res, cases[i][0]);
        EXPECT_KV(&res, cases[i][1], cases[i][2]);
    }
}

/* Every numeric range documented in docs/config.md: both ends accepted and
 * read back, one past either end refused with one warning. */
TEST(documented_ranges)
{
    EXPECT(nranges >= 8, "only %zu numeric ranges found in %s", nranges, config_md);
    for (size_t i = 0; i < nranges; i++) {
        long long ends[4] = {ranges[i].lo, ranges[i].hi, ranges[i].lo - 1, ranges[i].hi + 1};
        for (int k = 0; k < 4; k++) {
            char conf[128], optkey[96], want[64], shown[160];
            snprintf(conf, sizeof conf, "%.60s:%lld", ranges[i].key, ends[k]);
            /* small_min is lowered to small_max when above it (documented) */
            char full[160];
            snprintf(full, sizeof full, "%s%s", conf,
                     strcmp(ranges[i].key, "tcache_nslots_small_min") == 0 ? ",tcache_nslots_small_max:2048" : "");
            snprintf(optkey, sizeof optkey, "opt.%.60s", ranges[i].key);
            run_conf(child_path, full, &res);
            if (!SPAWN_OK(&res))
                continue;
            if (k < 2) {
                expect_no_stderr(&res, full);
                snprintf(want, sizeof want, "%lld", ends[k]);
                EXPECT_KV(&res, optkey, want);
            } else {
                snprintf(shown, sizeof shown, "bad value for option %s", conf);
                EXPECT(count_lines_with(res.err, shown) == 1 && count_lines_with(res.err, "dpmalloc: ") == 1,
                       "DPMALLOC_CONF=%s (outside the documented range): stderr\n%s", conf, res.err);
                EXPECT_KV(&res, optkey, default_of(optkey));
            }
        }
    }
}

/* conf gives one bad value for key: one warning line naming it, default kept. */
static void expect_bad_value(const char *conf, const char *key, const char *shown)
{
    run_conf(child_path, conf, &res);
    if (!SPAWN_OK(&res))
        return;
    char want[512], optkey[80];
    snprintf(want, sizeof want, "dpmalloc: bad value for option %s (ignored, default kept)\n", shown);
    EXPECT(strcmp(res.err, want) == 0, "DPMALLOC_CONF=\"%s\": stderr should be exactly\n%s  got\n%s", conf, want,
           res.err);
    snprintf(optkey, sizeof optkey, "opt.%s", key);
    EXPECT_KV(&res, optkey, default_of(optkey));
}

TEST(bad_values_warn_once_and_keep_default)
{
    static const char *const cases[][3] = {
        /* conf, key, text shown in the warning */
        {"narenas:abc", "narenas", "narenas:abc"},
        {"narenas:-1", "narenas", "narenas:-1"},
        {"narenas:3073", "narenas", "narenas:3073"},
        {"narenas:99999999999999999999999999", "narenas", "narenas:99999999999999999999999999"},
        {"narenas:18446744073709551617", "narenas", "narenas:18446744073709551617"},
        {"narenas:3x", "narenas", "narenas:3x"},
        {"narenas:", "narenas", "narenas:"},
        {"narenas", "narenas", "narenas"},
        {"narenas:-", "narenas", "narenas:-"},
        {"narenas:4:5", "narenas", "narenas:4:5"},
        {"tcache:yes", "tcache", "tcache:yes"},
        {"tcache:2", "tcache", "tcache:2"},
        {"tcache:", "tcache", "tcache:"},
        {"tcache_max:-5", "tcache_max", "tcache_max:-5"},
        {"tcache_max:8388609", "tcache_max", "tcache_max:8388609"},
        {"tcache_nslots_small_min:0", "tcache_nslots_small_min", "tcache_nslots_small_min:0"},
        {"tcache_nslots_small_max:2049", "tcache_nslots_small_max", "tcache_nslots_small_max:2049"},
        {"tcache_nslots_large:65", "tcache_nslots_large", "tcache_nslots_large:65"},
        {"tcache_large_bytes:1073741825", "tcache_large_bytes", "tcache_large_bytes:1073741825"},
        {"lg_tcache_nslots_mul:9", "lg_tcache_nslots_mul", "lg_tcache_nslots_mul:9"},
        {"dirty_decay_ms:-2", "dirty_decay_ms", "dirty_decay_ms:-2"},
        {"dirty_decay_ms:2147483648", "dirty_decay_ms", "dirty_decay_ms:2147483648"},
        {"dirty_decay_ms:1e3", "dirty_decay_ms", "dirty_decay_ms:1e3"},
        {"muzzy_decay_ms:0.5", "muzzy_decay_ms", "muzzy_decay_ms:0.5"},
        {"background_thread:on", "background_thread", "background_thread:on"},
        {"stats_print:TRUE", "stats_print", "stats_print:TRUE"},
        {"thp:sometimes", "thp", "thp:sometimes"},
        {"stats_print_opts:0123456789012345678901234567890123456789", "stats_print_opts",
         "stats_print_opts:0123456789012345678901234567890123456789"},
        {"slab_sizes:garbage", "slab_sizes", "slab_sizes:garbage"},
        {"slab_sizes:64-1:1", "slab_sizes", "slab_sizes:64-1:1"},
        {"slab_sizes:1-64:0", "slab_sizes", "slab_sizes:1-64:0"},
        {"slab_sizes:1-64:65", "slab_sizes", "slab_sizes:1-64:65"},
        {"slab_sizes:1-64:2||", "slab_sizes", "slab_sizes:1-64:2||"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_bad_value(cases[i][0], cases[i][1], cases[i][2]);
    /* a bad slab_sizes leaves the slab shapes alone */
    run_conf(child_path, NULL, &res);
    char def0[64] = "";
    if (SPAWN_OK(&res))
        find_kv(res.out, "bin.0.slab_size", def0, sizeof def0);
    run_conf(child_path, "slab_sizes:1-64:2|nonsense", &res);
    if (SPAWN_OK(&res)) {
        EXPECT_EQ_U(count_lines_with(res.err, "bad value for option slab_sizes"), 1);
        EXPECT_KV(&res, "bin.0.slab_size", def0);
        EXPECT_KV(&res, "opt.slab_sizes", "");
    }
}

TEST(bad_value_does_not_stop_other_keys)
{
    const char *conf = "narenas:abc,tcache_max:4096,bogus:1,dirty_decay_ms:5";
    run_conf(child_path, conf, &res);
    if (!SPAWN_OK(&res))
        return;
    EXPECT_EQ_U(count_lines_with(res.err, "dpmalloc: "), 2);
    EXPECT_EQ_U(count_lines_with(res.err, "bad value for option narenas:abc"), 1);
    EXPECT_EQ_U(count_lines_with(res.err, "unknown option bogus:1"), 1);
    EXPECT_KV(&res, "opt.narenas", "0");
    EXPECT_KV(&res, "opt.tcache_max", "4096");
    EXPECT_KV(&res, "opt.dirty_decay_ms", "5");
}

TEST(unknown_keys_warn_once)
{
    static const char *const cases[][2] = {
        {"foo:1", "dpmalloc: unknown option foo:1 (ignored, default kept)\n"},
        {"foo", "dpmalloc: unknown option foo (ignored, default kept)\n"},
        {"NARENAS:2", "dpmalloc: unknown option NARENAS:2 (ignored, default kept)\n"},
        {"opt.narenas:2", "dpmalloc: unknown option opt.narenas:2 (ignored, default kept)\n"},
        {" narenas:2", "dpmalloc: unknown option  narenas:2 (ignored, default kept)\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        run_conf(child_path, cases[i][0], &res);
        if (!SPAWN_OK(&res))
            continue;
        EXPECT(strcmp(res.err, cases[i][1]) == 0, "DPMALLOC_CONF=\"%s\": stderr should be exactly\n%s  got\n%s",
               cases[i][0], cases[i][1], res.err);
        expect_all_defaults_except(&res, NULL);
    }
}

TEST(garbage_never_crashes)
{
    static char longkey[6000], longval[6000], many[6000];
    memset(longkey, 'k', sizeof longkey - 1);
    snprintf(longval, sizeof longval, "narenas:");
    memset(longval + 8, '9', sizeof longval - 9);
    size_t n = 0;
    for (int i = 0; n + 12 < sizeof many; i++)
        n += (size_t)snprintf(many + n, sizeof many - n, "%s", i % 2 ? "x:," : "narenas:2,");
    struct {
        const char *conf;
        unsigned warnings;   /* exact number of warning lines */
    } cases[] = {
        {":", 1},
        {"::::", 1},
        {":,:,:", 3},
        {"a,b,,c:", 3},
        {",:1", 1},
        {"narenas::", 1},
        {"\x01\x02\x7f:\xff", 1},
        {"narenas:\t2", 1},
        {longkey, 1},
        {longval, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        run_conf(child_path, cases[i].conf, &res);
        if (!SPAWN_OK(&res))
            continue;
        unsigned lines = count_lines_with(res.err, "dpmalloc: ");
        EXPECT(lines == cases[i].warnings, "conf #%zu (%.40s...): %u warning lines, expected %u:\n%s", i,
               cases[i].conf, lines, cases[i].warnings, res.err);
        EXPECT_KV(&res, "opt.narenas", "0");
        /* each warning is a whole line of bounded length */
        EXPECT(res.errlen == 0 || res.err[res.errlen - 1] == '\n', "stderr does not end in a newline");
    }
    run_conf(child_path, many, &res);
    if (SPAWN_OK(&res)) {
        EXPECT_KV(&res, "opt.narenas", "2");
        EXPECT(count_lines_with(res.err, "unknown option x:") > 100, "expected one warning per bogus key");
    }
}

TEST(last_duplicate_wins)
{
    run_conf(child_path, "narenas:2,narenas:5,tcache_max:1024,tcache_max:2048", &res);
    if (!SPAWN_OK(&res))
        return;
    expect_no_stderr(&res, "duplicates");
    EXPECT_KV(&res, "opt.narenas", "5");
    EXPECT_KV(&res, "opt.tcache_max", "2048");
}

TEST(small_min_above_max_is_clamped)
{
    run_conf(child_path, "tcache_nslots_small_min:50,tcache_nslots_small_max:10", &res);
    if (!SPAWN_OK(&res))
        return;
    EXPECT_KV(&res, "opt.tcache_nslots_small_max", "10");
    char v[64] = "";
    find_kv(res.out, "ncached.16", v, sizeof v);
    EXPECT(strcmp(v, "10") == 0, "ncached.16 = \"%s\", expected the max, 10", v);
}

TEST(dpm_conf_symbol)
{
    run_conf(symbol_child_path, NULL, &res);
    if (SPAWN_OK(&res)) {
        EXPECT_KV(&res, "opt.narenas", "3");
        EXPECT_KV(&res, "opt.tcache_max", "4096");
        EXPECT_KV(&res, "opt.dirty_decay_ms", "777");
        EXPECT_KV(&res, "narenas", "3");
        EXPECT(strcmp(res.err, "dpmalloc: unknown option no_such_key:1 (ignored, default kept)\n") == 0,
               "stderr:\n%s", res.err);
    }
    /* DPMALLOC_CONF is parsed after dpm_conf: it wins where it speaks */
    run_conf(symbol_child_path, "narenas:5,muzzy_decay_ms:100", &res);
    if (SPAWN_OK(&res)) {
        EXPECT_KV(&res, "opt.narenas", "5");
        EXPECT_KV(&res, "opt.tcache_max", "4096");
        EXPECT_KV(&res, "opt.dirty_decay_ms", "777");
        EXPECT_KV(&res, "opt.muzzy_decay_ms", "100");
    }
}

/* The same parsing when dpmalloc is the process's malloc (static
 * libc-overriding library: it initialises before main, from libc's own
 * first allocation) and when the dpm_conf symbol lives in a program linked
 * against the shared library. */
TEST(overriding_builds)
{
    if (override_child_path == NULL || shared_symbol_child_path == NULL) {
        fprintf(stderr, "    (override / shared helpers not given: skipped)\n");
        return;
    }
    run_conf(override_child_path, NULL, &res);
    if (SPAWN_OK(&res)) {
        expect_no_stderr(&res, NULL);
        expect_all_defaults_except(&res, NULL);
    }
    run_conf(override_child_path, "narenas:abc,tcache_max:4096,bogus:1", &res);
    if (SPAWN_OK(&res)) {
        EXPECT(strcmp(res.err, "dpmalloc: bad value for option narenas:abc (ignored, default kept)\n"
                               "dpmalloc: unknown option bogus:1 (ignored, default kept)\n") == 0,
               "override build, stderr:\n%s", res.err);
        EXPECT_KV(&res, "opt.tcache_max", "4096");
        EXPECT_KV(&res, "opt.narenas", "0");
    }
    run_conf(shared_symbol_child_path, NULL, &res);
    if (SPAWN_OK(&res)) {
        EXPECT_KV(&res, "opt.narenas", "3");
        EXPECT_KV(&res, "opt.tcache_max", "4096");
        EXPECT_KV(&res, "opt.dirty_decay_ms", "777");
    }
    run_conf(shared_symbol_child_path, "narenas:5", &res);
    if (SPAWN_OK(&res)) {
        EXPECT_KV(&res, "opt.narenas", "5");
        EXPECT_KV(&res, "opt.tcache_max", "4096");
    }
}

/* thp:always / thp:never must reach the kernel as MADV_HUGEPAGE /
 * MADV_NOHUGEPAGE on the allocator's segments ("hg" / "nh" in the VmFlags
 * of /proc/self/smaps for the mapping holding an 8 MiB block). */
TEST(thp_reaches_the_kernel)
{
    static const char *const cases[][3] = {{"thp:always", " hg ", " nh "}, {"thp:never", " nh ", " hg "}};
    for (size_t i = 0; i < 2; i++) {
        run_conf(child_path, cases[i][0], &res);
        if (!SPAWN_OK(&res))
            continue;
        char flags[512];
        if (!find_kv(res.out, "vmflags", flags, sizeof flags)) {
            TEST_FAIL("%s: no VmFlags for the block's mapping in /proc/self/smaps", cases[i][0]);
            continue;
        }
        EXPECT(strstr(flags, cases[i][1]) != NULL && strstr(flags, cases[i][2]) == NULL,
               "%s: VmFlags of the segment \"%s\" lack \"%s\"", cases[i][0], flags, cases[i][1]);
    }
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s <conf_child> <conf_symbol_child> <docs/config.md> [...]\n", argv[0]);
        return 2;
    }
    child_path = argv[1];
    symbol_child_path = argv[2];
    config_md = argv[3];
    if (argc >= 6) {
        override_child_path = argv[4];
        shared_symbol_child_path = argv[5];
    }
    if (!load_config_md())
        return 2;
    RUN(defaults_without_conf);
    RUN(empty_and_separator_only_strings);
    RUN(every_key_set_and_read_back);
    RUN(settings_take_effect);
    RUN(range_ends_accepted);
    RUN(documented_ranges);
    RUN(bad_values_warn_once_and_keep_default);
    RUN(bad_value_does_not_stop_other_keys);
    RUN(unknown_keys_warn_once);
    RUN(garbage_never_crashes);
    RUN(last_duplicate_wins);
    RUN(small_min_above_max_is_clamped);
    RUN(dpm_conf_symbol);
    RUN(overriding_builds);
    RUN(thp_reaches_the_kernel);
    return test_done();
}
