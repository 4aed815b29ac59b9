/*
 * consumer.c - a program built against an installed dpmalloc (by
 * run_install_test.sh, once with pkg-config and once with
 * find_package(dpmalloc)). It proves the library it runs with is
 * dpmalloc of the installed header's version and, unless CONSUMER_PLAIN
 * (dpmalloc::dpmalloc_plain: dpm_ API only), that malloc is dpmalloc's:
 * an 8 MiB malloc shows up in stats.allocated.
 * Exit 0 and print "consumer ok ..." on success.
 */
#define _GNU_SOURCE
#include <dpmalloc.h>

#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char *what)
{
    fprintf(stderr, "consumer: %s\n", what);
    return 1;
}

static size_t allocated(void)
{
    uint64_t epoch = 1;
    size_t v = 0, len = sizeof v;
    if (dpm_ctl("epoch", NULL, NULL, &epoch, sizeof epoch) != 0 ||
        dpm_ctl("stats.allocated", &v, &len, NULL, 0) != 0)
        return 0;
    return v;
}

int main(void)
{
    const char *version = NULL;
    size_t len = sizeof version;
    if (dpm_ctl("version", &version, &len, NULL, 0) != 0 || version == NULL)
        return fail("dpm_ctl(\"version\") failed");
    if (strcmp(version, DPMALLOC_VERSION) != 0)
        return fail("library and installed header disagree on the version");

    const size_t big = (size_t)8 << 20;
    size_t before = allocated();
#ifdef CONSUMER_PLAIN
    char *p = dpm_malloc(big);
#else
    char *p = malloc(big);
#endif
    if (p == NULL)
        return fail("allocation failed");
    memset(p, 1, big);
    size_t after = allocated();
    if (after < before + big)
        return fail("an 8 MiB block is not in stats.allocated: not dpmalloc's heap");
    if (dpm_usable_size(p) < big)
        return fail("dpm_usable_size below the request");
#ifdef CONSUMER_PLAIN
    dpm_free(p);
#else
    if (malloc_usable_size(p) != dpm_usable_size(p))
        return fail("malloc_usable_size differs from dpm_usable_size");
    free(p);
#endif
    printf("consumer ok: dpmalloc %s, stats.allocated grew by %zu\n", version, after - before);
    return 0;
}
