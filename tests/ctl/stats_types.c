/*
 * stats_types.c - the per-type statistics of typed allocation are exact.
 *
 * Proves: for blocks allocated with dpm_malloc_typed / dpm_zmalloc_typed /
 * dpm_calloc_typed / dpm_realloc_typed under three type names, small and
 * large, default and 64-byte aligned, the "types" table of
 * dpm_stats_print (JSON) shows per name live_blocks == the blocks alive,
 * live_bytes == the sum of dpm_usable_size of those blocks, nalloc and
 * nfree == the calls made; freeing half (some from another thread) brings
 * the numbers down exactly; dpm_realloc_typed moves a block's bytes to the
 * new name; a reset of a manual arena that held typed blocks leaves no
 * live bytes behind; the text report lists the same numbers; at most
 * 1023 names are counted, later names allocate untagged blocks that free
 * normally.
 * dpm_ API only (links dpmalloc_plain; label sanitize).
 */
#include "test.h"
#include "ctl_util.h"

#include <pthread.h>
#include <stdbool.h>

struct sbuf {
    char *text;
    size_t len, cap;
};

static void sbuf_write(void *opaque, const char *s)
{
    struct sbuf *b = opaque;
    size_t n = strlen(s);
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 65536;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *t = realloc(b->text, cap);   /* libc: never the allocator under test */
        if (t == NULL)
            return;
        b->text = t;
        b->cap = cap;
    }
    memcpy(b->text + b->len, s, n + 1);
    b->len += n;
}

struct type_row {
    bool found;
    unsigned long long live_bytes, live_blocks, nalloc, nfree;
};

/* Finds the row of type name in the JSON "types" table. */
static struct type_row type_row(const char *name)
{
    struct type_row r = {0};
    struct sbuf b = {0};
    dpm_stats_print(sbuf_write, &b, "Jgma");
    char key[128];
    snprintf(key, sizeof key, "\"type\": \"%s\",", name);
    const char *p = b.text ? strstr(b.text, key) : NULL;
    if (p != NULL &&
        sscanf(p + strlen(key), " \"live_bytes\": %llu, \"live_blocks\": %llu, \"nalloc\": %llu, \"nfree\": %llu",
               &r.live_bytes, &r.live_blocks, &r.nalloc, &r.nfree) == 4)
        r.found = true;
    if (!r.found)
        fprintf(stderr, "type %s not found in:\n%s\n", name, b.text ? b.text : "(nothing)");
    free(b.text);
    return r;
}

struct expect_type {
    const char *name;
    unsigned long long bytes, blocks, nalloc, nfree;
};

static void check_type(const struct expect_type *e, int line)
{
    struct type_row r = type_row(e->name);
    if (!r.found) {
        TEST_FAIL_AT(__FILE__, line, "type %s missing from the types table", e->name);
        return;
    }
    if (r.live_bytes != e->bytes || r.live_blocks != e->blocks || r.nalloc != e->nalloc || r.nfree != e->nfree)
        TEST_FAIL_AT(__FILE__, line,
                     "type %s: live_bytes %llu live_blocks %llu nalloc %llu nfree %llu; expected %llu %llu %llu "
                     "%llu",
                     e->name, r.live_bytes, r.live_blocks, r.nalloc, r.nfree, e->bytes, e->blocks, e->nalloc,
                     e->nfree);
}

enum { N = 120 };
static void *blocks[3][N];
static struct expect_type want[3] = {{"pkt_buf", 0, 0, 0, 0}, {"flow_entry", 0, 0, 0, 0}, {"timer_wheel", 0, 0, 0, 0}};

static void *alloc_one(int t, int i)
{
    size_t sizes[] = {24, 200, 1500, 9000, 20000, 70000};
    size_t size = sizes[(i + t) % 6];
    size_t align = i % 4 == 1 ? 64 : 0;
    switch (i % 3) {
    case 0: return dpm_malloc_typed(want[t].name, size, align);
    case 1: return dpm_zmalloc_typed(want[t].name, size, align);
    default: return dpm_calloc_typed(want[t].name, 1, size, align);
    }
}

static void *free_odd_blocks(void *arg)
{
    int t = (int)(intptr_t)arg;
    for (int i = 1; i < N; i += 2) {
        dpm_free(blocks[t][i]);
        blocks[t][i] = NULL;
    }
    return NULL;
}

TEST(type_totals_exact)
{
    for (int t = 0; t < 3; t++)
        for (int i = 0; i < N; i++) {
            blocks[t][i] = alloc_one(t, i);
            if (blocks[t][i] == NULL) {
                TEST_FAIL("typed allocation %d of %s failed", i, want[t].name);
                continue;
            }
            want[t].bytes += dpm_usable_size(blocks[t][i]);
            want[t].blocks++;
            want[t].nalloc++;
        }
    for (int t = 0; t < 3; t++)
        check_type(&want[t], __LINE__);
    /* free the even half here, the odd half of type 0 from another thread */
    for (int t = 0; t < 3; t++)
        for (int i = 0; i < N; i += 2) {
            want[t].bytes -= dpm_usable_size(blocks[t][i]);
            want[t].blocks--;
            want[t].nfree++;
            dpm_free(blocks[t][i]);
            blocks[t][i] = NULL;
        }
    for (int t = 0; t < 3; t++)
        check_type(&want[t], __LINE__);
    for (int i = 1; i < N; i += 2) {
        want[0].bytes -= dpm_usable_size(blocks[0][i]);
        want[0].blocks--;
        want[0].nfree++;
    }
    pthread_t th;
    pthread_create(&th, NULL, free_odd_blocks, (void *)(intptr_t)0);
    pthread_join(th, NULL);
    check_type(&want[0], __LINE__);
    /* realloc_typed: a flow_entry block becomes a timer_wheel block */
    void *p = blocks[1][1];
    want[1].bytes -= dpm_usable_size(p);
    want[1].blocks--;
    want[1].nfree++;
    void *q = dpm_realloc_typed(want[2].name, p, 3000, 0);
    EXPECT_NONNULL(q);
    blocks[1][1] = NULL;
    if (q != NULL) {
        want[2].bytes += dpm_usable_size(q);
        want[2].blocks++;
        want[2].nalloc++;
    }
    check_type(&want[1], __LINE__);
    check_type(&want[2], __LINE__);
    /* the rest, and the text report agrees */
    want[2].bytes -= q ? dpm_usable_size(q) : 0;
    dpm_free(q);
    for (int t = 1; t < 3; t++)
        for (int i = 1; i < N; i += 2)
            if (blocks[t][i] != NULL)
                dpm_free(blocks[t][i]);
    struct type_row r1 = type_row(want[1].name), r2 = type_row(want[2].name);
    EXPECT(r1.live_bytes == 0 && r1.live_blocks == 0 && r2.live_bytes == 0 && r2.live_blocks == 0,
           "after freeing everything: %s %llu bytes / %llu blocks, %s %llu / %llu", want[1].name, r1.live_bytes,
           r1.live_blocks, want[2].name, r2.live_bytes, r2.live_blocks);
    struct sbuf b = {0};
    dpm_stats_print(sbuf_write, &b, "gma");
    EXPECT(b.text != NULL && strstr(b.text, "types:") && strstr(b.text, "pkt_buf") && strstr(b.text, "live_bytes"),
           "text report without the types table:\n%s", b.text ? b.text : "");
    free(b.text);
}

TEST(reset_releases_typed_bytes)
{
    unsigned m = 0, home = 0;
    EXPECT_CTL(ctl_get("arenas.create", &m, sizeof m), 0);
    EXPECT_CTL(ctl_get("thread.arena", &home, sizeof home), 0);
    EXPECT_CTL(ctl_set("thread.arena", &m, sizeof m), 0);
    unsigned long long bytes = 0;
    for (int i = 0; i < 40; i++) {
        void *p = dpm_malloc_typed("reset_me", i % 2 ? 100 : 50000, 0);
        EXPECT_NONNULL(p);
        bytes += dpm_usable_size(p);
    }
    struct expect_type e = {"reset_me", bytes, 40, 40, 0};
    check_type(&e, __LINE__);
    EXPECT_CTL(ctl_set("thread.arena", &home, sizeof home), 0);
    EXPECT_CTL(ctl_action(ctl_name("arena.%u.reset", m)), 0);
    struct type_row r = type_row("reset_me");
    EXPECT(r.live_bytes == 0 && r.live_blocks == 0, "after arena.%u.reset: reset_me %llu bytes, %llu blocks", m,
           r.live_bytes, r.live_blocks);
    EXPECT_CTL(ctl_action(ctl_name("arena.%u.destroy", m)), 0);
}

static unsigned count_type_rows(void)
{
    struct sbuf b = {0};
    dpm_stats_print(sbuf_write, &b, "Jgma");
    unsigned n = 0;
    for (const char *p = b.text; p != NULL && (p = strstr(p, "{\"type\": ")) != NULL; p++)
        n++;
    free(b.text);
    return n;
}

/* At most 1023 names are counted; beyond that blocks are allocated
 * untagged (and freed fine); names are cut to 47 characters. */
TEST(type_name_limits)
{
    char name[64];
    static void *p[1100];
    for (int i = 0; i < 1100; i++) {
        snprintf(name, sizeof name, "limit_type_%04d", i);
        p[i] = dpm_malloc_typed(name, 32, 0);
        EXPECT_NONNULL(p[i]);
    }
    unsigned rows = count_type_rows();
    EXPECT(rows == 1023, "%u rows in the types table after 1100+ distinct names, expected 1023", rows);
    struct type_row r = type_row("limit_type_0000");
    EXPECT(r.found && r.live_blocks == 1, "first limit type: found %d, %llu live", r.found, r.live_blocks);
    for (int i = 0; i < 1100; i++)
        dpm_free(p[i]);
    r = type_row("limit_type_0000");
    EXPECT(r.found && r.live_blocks == 0 && r.nfree == 1, "first limit type after free: %llu live, %llu freed",
           r.live_blocks, r.nfree);
}

/* Names count by their first 47 characters. */
TEST(type_name_prefix)
{
    const char *a = "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstu-first";
    const char *b = "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstu-second";
    void *p = dpm_malloc_typed(a, 100, 0), *q = dpm_malloc_typed(b, 100, 0);
    struct type_row r = type_row("abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstu");
    EXPECT(r.found && r.live_blocks == 2 && r.live_bytes == dpm_usable_size(p) + dpm_usable_size(q),
           "47-character prefix row: found %d, %llu blocks, %llu bytes", r.found, r.live_blocks, r.live_bytes);
    dpm_free(p);
    dpm_free(q);
}

int main(void)
{
    RUN(type_totals_exact);
    RUN(reset_releases_typed_bytes);
    RUN(type_name_prefix);
    RUN(type_name_limits);
    return test_done();
}
