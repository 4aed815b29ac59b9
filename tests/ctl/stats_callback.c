/*
 * stats_callback.c - dpm_stats_print's callback is user code: it runs with
 * no allocator lock held.
 *
 * Proves, each in a fresh single-threaded child (the state in which locks
 * may be elided) that must finish within its time limit:
 * - a callback that calls dpm_ctl("epoch") (a stats refresh, which takes
 *   the stats lock) returns, and so does the report, also once the
 *   process has had a second thread;
 * - a callback that creates threads which allocate, free, refresh the
 *   epoch and print statistics themselves, and joins them, returns; after
 *   it, statistics, allocation and a second report still work from several
 *   threads at once (a lock left held, or two threads inside one critical
 *   section, shows here as a hang or a crash);
 * - a callback that calls dpm_stats_print recursively returns;
 * - long reports reach the callback in pieces no longer than 4 KiB whose
 *   concatenation is the whole report (one JSON document).
 */
#include "test.h"
#include "ctl_util.h"

#include <pthread.h>
#include <stdbool.h>

static void *churn_and_report(void *arg)
{
    (void)arg;
    for (int round = 0; round < 200; round++) {
        void *blocks[64];
        for (int i = 0; i < 64; i++)
            blocks[i] = dpm_malloc((size_t)(16 + (i * 37 + round) % 3000));
        for (int i = 0; i < 64; i++)
            dpm_free(blocks[i]);
        void *big = dpm_malloc((size_t)1 << 20);
        dpm_free(big);
        if (round % 50 == 0) {
            uint64_t e = 1;
            size_t len = sizeof(e);
            dpm_ctl("epoch", &e, &len, &e, sizeof(e));
        }
    }
    return NULL;
}

static void count_chars(void *opaque, const char *text) { *(size_t *)opaque += strlen(text); }

static void churn_threads(int n)
{
    pthread_t t[4];
    for (int i = 0; i < n; i++)
        pthread_create(&t[i], NULL, churn_and_report, NULL);
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
}

static void *print_report(void *arg)
{
    size_t chars = 0;
    (void)arg;
    dpm_stats_print(count_chars, &chars, "J");
    return chars > 0 ? NULL : (void *)1;
}

/* ---- callback bodies ---- */

static int calls;

static void cb_epoch(void *opaque, const char *text)
{
    (void)opaque, (void)text;
    uint64_t e = 1;
    size_t len = sizeof(e);
    if (calls++ < 3)
        dpm_ctl("epoch", &e, &len, &e, sizeof(e));
}

static void cb_threads(void *opaque, const char *text)
{
    (void)opaque, (void)text;
    if (calls++ == 0) {
        churn_threads(2);
        pthread_t t;
        pthread_create(&t, NULL, print_report, NULL);
        pthread_join(t, NULL);
    }
}

static void cb_recursive(void *opaque, const char *text)
{
    (void)opaque, (void)text;
    size_t chars = 0;
    if (calls++ == 0)
        dpm_stats_print(count_chars, &chars, "");
}

static int child_epoch(void *arg)
{
    (void)arg;
    dpm_free(dpm_malloc(100));
    dpm_stats_print(cb_epoch, NULL, "J");
    return calls > 0 ? 0 : 3;
}

/* The same once the process has threads: the locks are real then. */
static int child_epoch_threaded(void *arg)
{
    pthread_t t;
    pthread_create(&t, NULL, churn_and_report, NULL);
    pthread_join(t, NULL);
    return child_epoch(arg);
}

static int child_threads(void *arg)
{
    (void)arg;
    dpm_free(dpm_malloc(100));
    dpm_stats_print(cb_threads, NULL, "");
    /* Everything must still work, from several threads at once. */
    pthread_t t[3];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, churn_and_report, NULL);
    pthread_create(&t[2], NULL, print_report, NULL);
    void *bad = NULL;
    for (int i = 0; i < 3; i++) {
        void *r;
        pthread_join(t[i], &r);
        bad = bad != NULL ? bad : r;
    }
    size_t chars = 0;
    dpm_stats_print(count_chars, &chars, "");
    return bad == NULL && chars > 0 ? 0 : 4;
}

static int child_recursive(void *arg)
{
    (void)arg;
    dpm_free(dpm_malloc(100));
    dpm_stats_print(cb_recursive, NULL, "");
    return calls > 0 ? 0 : 5;
}

static void expect_child_returns(int (*fn)(void *), const char *what)
{
    struct test_child c;
    char desc[128];
    if (test_run_child(fn, NULL, &c, 20) != 0) {
        TEST_FAIL("%s: could not run a child", what);
        return;
    }
    if (!WIFEXITED(c.status) || WEXITSTATUS(c.status) != 0)
        TEST_FAIL("%s: child %s (a hang is killed after 20 s); stderr: %s", what,
                  test_describe_status(c.status, desc, sizeof desc), c.err);
}

TEST(callback_may_refresh_epoch)
{
    expect_child_returns(child_epoch, "callback calls epoch");
    expect_child_returns(child_epoch_threaded, "callback calls epoch (threaded process)");
}
TEST(callback_may_create_threads) { expect_child_returns(child_threads, "callback creates threads"); }
TEST(callback_may_print_stats) { expect_child_returns(child_recursive, "callback prints stats"); }

struct pieces {
    size_t longest, total, n;
    char *all;
    size_t cap;
};

static void collect(void *opaque, const char *text)
{
    struct pieces *p = opaque;
    size_t n = strlen(text);
    if (n > p->longest)
        p->longest = n;
    if (p->total + n + 1 > p->cap) {
        p->cap = (p->total + n + 1) * 2;
        p->all = realloc(p->all, p->cap);
    }
    memcpy(p->all + p->total, text, n + 1);
    p->total += n;
    p->n++;
}

TEST(report_arrives_in_bounded_pieces)
{
    struct pieces p = {0};
    /* enough arenas and bins in use for a report well over 4 KiB */
    for (int i = 0; i < 2000; i++)
        dpm_free(dpm_malloc((size_t)(16 + i * 8)));
    dpm_stats_print(collect, &p, "J");
    EXPECT_TRUE(p.n >= 2);
    EXPECT_TRUE(p.longest <= 4096);
    EXPECT_TRUE(p.total > 4096);
    /* one document: opens with '{' and closes with '}' */
    EXPECT_TRUE(p.all != NULL && p.all[0] == '{');
    size_t end = p.total;
    while (end > 0 && (p.all[end - 1] == '\n' || p.all[end - 1] == ' '))
        end--;
    EXPECT_TRUE(end > 0 && p.all[end - 1] == '}');
    free(p.all);
}

int main(void)
{
    RUN(callback_may_refresh_epoch);
    RUN(callback_may_create_threads);
    RUN(callback_may_print_stats);
    RUN(report_arrives_in_bounded_pieces);
    return test_done();
}
