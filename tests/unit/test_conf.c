/*
 * test_conf.c - the option parser: valid strings set every kind of option,
 * unknown keys and bad values warn on stderr (one line each, naming the
 * key) and keep the default, and nothing misparses.
 */
#include "conf.h"
#include "unit.h"

#include <string.h>
#include <unistd.h>

/* Runs conf_parse with stderr captured into buf. */
static int parse_capturing(const char *s, char *buf, size_t len)
{
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    int saved = dup(2);
    dup2(fds[1], 2);
    int errors = conf_parse(s);
    dup2(saved, 2);
    close(saved);
    close(fds[1]);
    ssize_t n = read(fds[0], buf, len - 1);
    buf[n > 0 ? n : 0] = '\0';
    close(fds[0]);
    return errors;
}

int main(void)
{
    conf_init();
    char err[1024];
    EXPECT_EQ_U(opt.dirty_decay_ms, 10000);
    EXPECT_TRUE(opt.tcache, "tcache on by default");

    EXPECT_EQ_U(parse_capturing("narenas:3,dirty_decay_ms:-1,muzzy_decay_ms:250,tcache:false,tcache_max:65536", err,
                                sizeof(err)),
                0);
    EXPECT_EQ_U(opt.narenas, 3);
    EXPECT_TRUE(opt.dirty_decay_ms == -1, "dirty_decay_ms %lld", (long long)opt.dirty_decay_ms);
    EXPECT_EQ_U(opt.muzzy_decay_ms, 250);
    EXPECT_TRUE(!opt.tcache, "tcache:false ignored");
    EXPECT_EQ_U(opt.tcache_max, 65536);
    EXPECT_TRUE(err[0] == '\0', "unexpected warning: %s", err);

    EXPECT_EQ_U(parse_capturing("bogus_key:1", err, sizeof(err)), 1);
    EXPECT_TRUE(strstr(err, "unknown option bogus_key") != NULL, "warning was: %s", err);

    EXPECT_EQ_U(parse_capturing("narenas:12abc", err, sizeof(err)), 1);
    EXPECT_EQ_U(opt.narenas, 3);
    EXPECT_TRUE(strstr(err, "bad value for option narenas:12abc") != NULL, "warning was: %s", err);

    EXPECT_EQ_U(parse_capturing("dirty_decay_ms:-5,tcache:maybe,narenas", err, sizeof(err)), 3);
    EXPECT_TRUE(opt.dirty_decay_ms == -1, "bad value changed dirty_decay_ms");

    EXPECT_EQ_U(parse_capturing("slab_sizes:1-64:2|4096-4096:8,thp:never", err, sizeof(err)), 0);
    EXPECT_EQ_U(opt.slab_pages[0], 2);
    EXPECT_EQ_U(opt.slab_pages[3], 2);
    EXPECT_EQ_U(opt.slab_pages[sc_compute(4096)], 8);
    EXPECT_EQ_U(opt.slab_pages[sc_compute(128)], 0);
    EXPECT_EQ_U(opt.thp, THP_NEVER);
    EXPECT_EQ_U(parse_capturing("slab_sizes:64-1:2", err, sizeof(err)), 1);
    EXPECT_EQ_U(parse_capturing(",,", err, sizeof(err)), 0);
    return unit_finish("test_conf");
}
