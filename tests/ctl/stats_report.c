/*
 * stats_report.c - dpm_stats_print output: valid, complete, consistent.
 *
 * Proves: the JSON report ("J") parses with `python3 -m json.tool`, has
 * every key docs/stats.md lists (checked by check_stats.py) and is
 * internally consistent (totals.allocated == the arenas' small + large
 * allocated minus cached bytes; active >= allocated; curregs == nmalloc -
 * ndalloc per bin; ...); totals.allocated grows by what the test allocated
 * (64 MiB large + 20000 small blocks, within 10 %) and falls back when it
 * frees them, and equals "stats.allocated" read after an epoch; the text
 * report has every section name; each option letter (g m a b l x t) omits
 * exactly its section in JSON and in text, alone and all together; with
 * DPMALLOC_CONF=stats_print:true a program prints the report on stderr at
 * exit (text, or JSON with stats_print_opts:J), and nothing without it.
 *
 * usage: test_ctl_stats <check_stats.py>   (re-executes itself for the
 * at-exit checks)
 */
#include "test.h"
#include "ctl_util.h"

#include <stdbool.h>

static const char *self_path = "/proc/self/exe";
static char self_exe[4096];
static const char *checker;
static const char *python;

struct sbuf {
    char *text;
    size_t len, cap;
};

static void sbuf_write(void *opaque, const char *s)
{
    struct sbuf *b = opaque;
    size_t n = strlen(s);
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 65536;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *t = realloc(b->text, cap);   /* libc realloc: dpmalloc_plain leaves it alone */
        if (t == NULL)
            return;
        b->text = t;
        b->cap = cap;
    }
    memcpy(b->text + b->len, s, n + 1);
    b->len += n;
}

static char *report(const char *opts)
{
    struct sbuf b = {0};
    dpm_stats_print(sbuf_write, &b, opts);
    return b.text != NULL ? b.text : strdup("");
}

static bool write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return false;
    bool ok = fputs(text, f) >= 0;
    return fclose(f) == 0 && ok;
}

static struct spawn_result res;

/* Runs json.tool and check_stats.py on text; returns check_stats output. */
static bool check_json(const char *text, const char *mode, char *out, size_t outlen)
{
    char path[] = "/tmp/dpm_stats_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) {
        TEST_FAIL("mkstemp: %s", strerror(errno));
        return false;
    }
    close(fd);
    if (!write_file(path, text)) {
        TEST_FAIL("cannot write %s", path);
        unlink(path);
        return false;
    }
    bool ok = true;
    char *jt[] = {(char *)python, "-m", "json.tool", path, NULL};
    spawn_capture(jt, NULL, 30, &res);
    if (!WIFEXITED(res.status) || WEXITSTATUS(res.status) != 0) {
        TEST_FAIL("python3 -m json.tool rejects the report (opts \"%s\"):\n%s\n--- report ---\n%.4000s", mode,
                  res.err, text);
        ok = false;
    }
    char *cs[] = {(char *)python, (char *)checker, path, (char *)mode, NULL};
    spawn_capture(cs, NULL, 30, &res);
    if (!WIFEXITED(res.status) || WEXITSTATUS(res.status) != 0) {
        TEST_FAIL("check_stats.py (opts \"%s\"):\n%s%s", mode, res.out, res.err);
        ok = false;
    }
    if (out != NULL)
        snprintf(out, outlen, "%s", res.out);
    unlink(path);
    return ok;
}

static unsigned long long kv_u64(const char *text, const char *key)
{
    char v[64];
    if (!find_kv(text, key, v, sizeof v)) {
        TEST_FAIL("%s missing from check_stats output:\n%s", key, text);
        return 0;
    }
    return strtoull(v, NULL, 10);
}

TEST(json_valid_and_tracks_allocations)
{
    static char out[65536];
    /* names that need escaping must not break the JSON */
    const char *odd = "q\"uote\\back\ttab";
    unsigned odd_arena = 0;
    size_t olen = sizeof odd_arena;
    EXPECT_CTL(dpm_ctl("arenas.create", &odd_arena, &olen, &odd, sizeof odd), 0);
    void *odd_block = dpm_malloc_arena(odd_arena, 100, 0);
    void *odd_typed = dpm_malloc_typed("type \"with\" quotes\n", 64, 0);
    char *t0 = report("J");
    check_json(t0, "", out, sizeof out);
    EXPECT(strstr(t0, "\"q\\\"uote\\\\back\\u0009tab\"") != NULL ||
               strstr(t0, "\"q\\\"uote\\\\back\\ttab\"") != NULL,
           "escaped arena name not in the JSON");
    free(t0);
    dpm_free(odd_block);
    dpm_free(odd_typed);
    EXPECT_CTL(ctl_action(ctl_name("arena.%u.destroy", odd_arena)), 0);
    ctl_action("thread.tcache.flush");
    t0 = report("J");
    check_json(t0, "", out, sizeof out);
    unsigned long long alloc0 = kv_u64(out, "totals.allocated");
    free(t0);

    enum { NLARGE = 32, NSMALL = 20000 };
    static void *large[NLARGE], *small[NSMALL];
    unsigned long long want = 0;
    for (int i = 0; i < NLARGE; i++) {
        large[i] = dpm_malloc((size_t)2 << 20);
        want += dpm_usable_size(large[i]);
    }
    for (int i = 0; i < NSMALL; i++) {
        small[i] = dpm_malloc(100);
        want += dpm_usable_size(small[i]);
    }
    char *t1 = report("J");
    bool ok = check_json(t1, "", out, sizeof out);
    free(t1);
    unsigned long long alloc1 = kv_u64(out, "totals.allocated");
    EXPECT(ok && alloc1 >= alloc0 + want && alloc1 <= alloc0 + want + want / 10,
           "totals.allocated %llu -> %llu after allocating %llu bytes (expected +%llu .. +10 %%)", alloc0, alloc1,
           want, want);
    /* the same snapshot through dpm_ctl */
    ctl_refresh();
    size_t via_ctl = CTL_SIZE("stats.allocated");
    EXPECT(via_ctl + 65536 >= alloc1 && via_ctl <= alloc1 + 65536, "stats.allocated %zu vs JSON %llu", via_ctl,
           alloc1);
    for (int i = 0; i < NLARGE; i++)
        dpm_free(large[i]);
    for (int i = 0; i < NSMALL; i++)
        dpm_free(small[i]);
    ctl_action("thread.tcache.flush");
    char *t2 = report("J");
    check_json(t2, "", out, sizeof out);
    free(t2);
    unsigned long long alloc2 = kv_u64(out, "totals.allocated");
    EXPECT(alloc2 + want <= alloc1 + 65536, "totals.allocated %llu -> %llu after freeing %llu bytes", alloc1,
           alloc2, want);
}

/* Section headers end their line; "arenas:" alone would also match the
 * "narenas: 1" line, hence the newlines. */
static const char *const text_sections[] = {
    "___ dpmalloc statistics ___:\n", "version: ", "epoch: ", "options:\n", "totals:\n", "types:\n",
    "arenas:\n", "arena 0:\n", "page_runs:\n", "free_runs:\n", "arena_lock:\n", "bin_locks:\n", "bins:\n",
    "large:\n",
};

TEST(text_has_every_section)
{
    void *keep = dpm_malloc(1 << 20), *keep2 = dpm_malloc(40);
    void *typed = dpm_malloc_typed("stats_report", 100, 0);
    char *t = report(NULL);
    for (size_t i = 0; i < sizeof text_sections / sizeof text_sections[0]; i++)
        EXPECT(strstr(t, text_sections[i]) != NULL, "text report lacks \"%s\"", text_sections[i]);
    static const char *const words[] = {"allocated", "resident", "retained", "metadata", "nthreads", "pdirty",
                                        "pmuzzy", "curregs", "tc_hit_rate", "lock_wait_ns", "curlextents",
                                        "stats_report", "dirty_decay_ms", "hit_rate", "considered_per_search"};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        EXPECT(strstr(t, words[i]) != NULL, "text report lacks \"%s\"", words[i]);
    EXPECT(strchr(t, '{') == NULL, "text report contains JSON braces");
    free(t);
    dpm_free(keep);
    dpm_free(keep2);
    dpm_free(typed);
}

/* Each letter: what it must remove from the text report. */
static const struct {
    char letter;
    const char *gone[4];
    const char *stays;
} letters[] = {
    {'g', {"version: ", "options:\n", "ncpus", NULL}, "totals:\n"},
    {'m', {"totals:\n", NULL}, "arenas:\n"},
    {'a', {"arenas:\n", "arena 0:\n", "bins:\n", "page_runs:\n"}, "totals:\n"},
    {'b', {"bins:\n", "tc_hit_rate", NULL}, "large:\n"},
    {'l', {"large:\n", "curlextents", NULL}, "bins:\n"},
    {'x', {"arena_lock:\n", "bin_locks:\n", "lock_wait_ns", NULL}, "bins:\n"},
    {'t', {"types:\n", "live_blocks", NULL}, "totals:\n"},
};

TEST(option_letters_omit_sections)
{
    void *keep = dpm_malloc(1 << 20), *keep2 = dpm_malloc(40);
    void *typed = dpm_malloc_typed("stats_letters", 100, 0);
    for (size_t i = 0; i < sizeof letters / sizeof letters[0]; i++) {
        char opts[4] = {letters[i].letter, '\0'};
        char *t = report(opts);
        for (int k = 0; k < 4 && letters[i].gone[k] != NULL; k++)
            EXPECT(strstr(t, letters[i].gone[k]) == NULL, "opts \"%s\": text still has \"%s\"", opts,
                   letters[i].gone[k]);
        EXPECT(strstr(t, letters[i].stays) != NULL, "opts \"%s\": text lost \"%s\"", opts, letters[i].stays);
        free(t);
        char jopts[4] = {'J', letters[i].letter, '\0'};
        t = report(jopts);
        check_json(t, opts, NULL, 0);
        free(t);
    }
    char *all = report("Jgmablxt");
    check_json(all, "gmablxt", NULL, 0);
    free(all);
    all = report("gmablxt");
    EXPECT(strstr(all, "___ dpmalloc statistics ___") != NULL && strstr(all, "totals:\n") == NULL &&
               strstr(all, "arenas:\n") == NULL && strstr(all, "types:\n") == NULL,
           "text with every section omitted:\n%s", all);
    free(all);
    dpm_free(keep);
    dpm_free(keep2);
    dpm_free(typed);
}

/* ---- at exit ---- */

static int exit_child(void)
{
    void *p = dpm_malloc(5000), *q = dpm_malloc_typed("at_exit_type", 64, 0);
    memset(p, 1, 5000);
    (void)q;   /* left live on purpose: it shows in the report */
    dpm_free(p);
    return 0;
}

TEST(stats_print_at_exit)
{
    char *argv[] = {self_exe, "--exit-child", NULL};
    const char *env_on[] = {"DPMALLOC_CONF=stats_print:true", NULL};
    spawn_capture(argv, env_on, 30, &res);
    if (SPAWN_OK(&res)) {
        EXPECT(strstr(res.err, "___ dpmalloc statistics ___") != NULL && strstr(res.err, "totals:") != NULL &&
                   strstr(res.err, "at_exit_type") != NULL,
               "stats_print:true: stderr at exit:\n%.3000s", res.err);
        EXPECT(res.outlen == 0, "stats went to stdout:\n%.1000s", res.out);
    }
    const char *env_json[] = {"DPMALLOC_CONF=stats_print:true,stats_print_opts:J", NULL};
    spawn_capture(argv, env_json, 30, &res);
    if (SPAWN_OK(&res)) {
        static char err_copy[sizeof res.err];
        memcpy(err_copy, res.err, sizeof err_copy);
        EXPECT(err_copy[0] == '{', "stats_print_opts:J: stderr does not start with JSON:\n%.500s", err_copy);
        check_json(err_copy, "", NULL, 0);
    }
    const char *env_some[] = {"DPMALLOC_CONF=stats_print:true,stats_print_opts:gab", NULL};
    spawn_capture(argv, env_some, 30, &res);
    if (SPAWN_OK(&res))
        EXPECT(strstr(res.err, "totals:\n") != NULL && strstr(res.err, "options:\n") == NULL &&
                   strstr(res.err, "arenas:\n") == NULL,
               "stats_print_opts:gab: stderr at exit:\n%.3000s", res.err);
    const char *env_off[] = {"-DPMALLOC_CONF", NULL};
    spawn_capture(argv, env_off, 30, &res);
    if (SPAWN_OK(&res))
        EXPECT(res.errlen == 0, "no stats_print, yet stderr:\n%.1000s", res.err);
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "--exit-child") == 0)
        return exit_child();
    if (argc < 2) {
        fprintf(stderr, "usage: %s <check_stats.py>\n", argv[0]);
        return 2;
    }
    checker = argv[1];
    python = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "/usr/local/bin/python3";
    ssize_t n = readlink(self_path, self_exe, sizeof self_exe - 1);
    if (n <= 0) {
        fprintf(stderr, "readlink %s failed\n", self_path);
        return 2;
    }
    self_exe[n] = '\0';
    RUN(json_valid_and_tracks_allocations);
    RUN(text_has_every_section);
    RUN(option_letters_omit_sections);
    RUN(stats_print_at_exit);
    return test_done();
}
