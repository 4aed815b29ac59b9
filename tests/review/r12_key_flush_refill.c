/*
 * r12_key_flush_refill.c - a double free of a block that sits in a thread
 * cache must abort, however the block got there (docs/design.md, "Misuse
 * checks": "a second free or a realloc of a block that sits in any
 * thread's cache, however many frees came between").
 *
 * The pattern: p is freed (cached, key written), the cache is flushed
 * (p goes home to its slab), the next fill brings p back into a cache
 * without handing it out, and the program frees p again. Until the fill
 * change, the flush left the key in p, so the second free found it and
 * the lookup found p in the bin: "free(): double free of 0x...". Since
 * send_home clears the key, p sits in the bin with no key and is
 * neither free in its slab: the second free passes every check, p is
 * cached twice, and two later mallocs return the same block.
 *
 * Each case runs in a child; the parent checks that it died by SIGABRT
 * with the exact message naming the pointer. Cases (argv[1]):
 *   ctl <size>      flush by thread.tcache.flush, refill in the same thread
 *   churn <size>    flush by overflowing the bin with other frees
 *   remote <size>   refill into another live thread's cache, freed by main
 *   realloc <size>  realloc of the refilled block ("use after free of")
 *   validate <size> no misuse: dpm_rte_malloc_validate of the refilled
 *                   (freed) block must say -1, not a live block
 * A third argument holds that many blocks first, so that the misused
 * block sits past the objects its slab tracks (span_t.keyed_bits).
 * Exit 0: every case aborted as it must.
 */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dpmalloc.h"
#include "dpmalloc/rte_compat.h"
#include "test.h"

static volatile uintptr_t *shared_ptr;   /* the pointer the child misuses */

static void *launder(void *p)
{
    __asm__ volatile("" : "+r"(p));
    return p;
}

enum { N = 4 };

/* Run in a fresh thread (its bins are empty), with the bin of size's
 * class limited to 8 blocks (a fill brings 5): a first block pins a fresh
 * slab; v[0..N-1] follow it in that slab, are freed (each gets the key)
 * and sent home by a flush; one malloc then refills the bin from the
 * slab, lowest address first: it returns v[0] and caches v[1..N-1]
 * without handing them out. Returns 0, or 4 if the layout was not the
 * expected one (the case would prove nothing). */
static unsigned the_skip;   /* blocks held before v[]: v past the slab's tracked objects */

static int free_flush_refill(size_t size, void **v)
{
    char spec[64];
    snprintf(spec, sizeof spec, "%zu-%zu:8", size, size);
    const char *sp = spec;
    if (dpm_ctl("thread.tcache.ncached_max.write", NULL, NULL, &sp, sizeof sp) != 0)
        return 3;
    void *pin = dpm_malloc(size);
    if (pin == NULL)
        return 3;
    for (unsigned i = 0; i < the_skip; i++)
        if (dpm_malloc(size) == NULL)   /* held for the child's life */
            return 3;
    for (int i = 0; i < N; i++)
        if ((v[i] = dpm_malloc(size)) == NULL)
            return 3;
    size_t step = dpm_usable_size(v[0]);
    for (int i = 1; i < N; i++)
        if ((uintptr_t)v[i] != (uintptr_t)v[0] + (uintptr_t)i * step)
            return 4;
    for (int i = 0; i < N; i++)
        dpm_free(v[i]);
    if (dpm_ctl("thread.tcache.flush", NULL, NULL, NULL, 0) != 0)
        return 3;
    void *q = dpm_malloc(size);
    if (q != v[0])
        return 4;
    return 0;
}

static size_t the_size;
static const char *the_case;
static int verdict;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int stage;

static void *same_thread(void *arg)
{
    (void)arg;
    void *v[N];
    if ((verdict = free_flush_refill(the_size, v)) != 0)
        return NULL;
    *shared_ptr = (uintptr_t)v[N - 1];
    if (strcmp(the_case, "validate") == 0) {
        size_t sz = 0;
        verdict = dpm_rte_malloc_validate(v[N - 1], &sz) == -1 ? 0 : 5;
        if (verdict != 0)
            fprintf(stderr, "validate: freed block %p reported live (%zu bytes)\n", v[N - 1], sz);
        return NULL;
    }
    if (strcmp(the_case, "realloc") == 0) {
        void *volatile r = dpm_realloc(launder(v[N - 1]), the_size / 2 + 1);
        (void)r;
    } else {
        dpm_free(launder(v[N - 1]));   /* its second free */
        /* not caught: the block is cached twice */
        void *a = dpm_malloc(the_size), *b = dpm_malloc(the_size), *c = dpm_malloc(the_size);
        void *d = dpm_malloc(the_size);
        if (a == b || a == c || a == d || b == c || b == d || c == d)
            fprintf(stderr, "the same block was handed out twice\n");
    }
    verdict = 0;
    return NULL;
}

/* The refill lands in this thread's cache, which keeps it while main
 * frees the block a second time. */
static void *holder(void *arg)
{
    void **v = arg;
    verdict = free_flush_refill(the_size, v);
    pthread_mutex_lock(&mu);
    stage = 1;
    pthread_cond_broadcast(&cv);
    while (stage != 2)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    return NULL;
}

static int child(void *arg)
{
    (void)arg;
    pthread_t t;
    if (strcmp(the_case, "remote") == 0) {
        static void *v[N];
        if (pthread_create(&t, NULL, holder, v) != 0)
            return 3;
        pthread_mutex_lock(&mu);
        while (stage != 1)
            pthread_cond_wait(&cv, &mu);
        pthread_mutex_unlock(&mu);
        if (verdict != 0)
            return verdict;
        *shared_ptr = (uintptr_t)v[N - 1];
        dpm_free(launder(v[N - 1]));   /* its second free, by main */
        pthread_mutex_lock(&mu);
        stage = 2;
        pthread_cond_broadcast(&cv);
        pthread_mutex_unlock(&mu);
        pthread_join(t, NULL);
        return 0;
    }
    if (pthread_create(&t, NULL, same_thread, NULL) != 0)
        return 3;
    pthread_join(t, NULL);
    return verdict;
}

int main(int argc, char **argv)
{
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: %s ctl|remote|realloc|validate <size> [blocks held first]\n", argv[0]);
        return 2;
    }
    the_case = argv[1];
    the_size = strtoul(argv[2], NULL, 0);
    the_skip = argc == 4 ? (unsigned)strtoul(argv[3], NULL, 0) : 0;
    shared_ptr = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared_ptr == MAP_FAILED)
        return 3;
    const char *want = strcmp(the_case, "realloc") == 0 ? "dpmalloc: realloc(): use after free of 0x"
                                                        : "dpmalloc: free(): double free of 0x";
    if (strcmp(the_case, "validate") == 0)
        return child(NULL) == 0 ? 0 : 1;
    struct test_child out;
    if (test_run_child(child, NULL, &out, 30) != 0)
        return 3;
    char how[128];
    test_describe_status(out.status, how, sizeof how);
    if (WIFEXITED(out.status) && WEXITSTATUS(out.status) == 4) {
        fprintf(stderr, "%s %zu: the blocks were not laid out as the case needs\n", the_case, the_size);
        return 1;
    }
    bool ok = WIFSIGNALED(out.status) && WTERMSIG(out.status) == SIGABRT && strstr(out.err, want) != NULL &&
              test_text_has_pointer(out.err, *shared_ptr);
    if (!ok) {
        fprintf(stderr, "%s %zu: child %s, stderr \"%s\"; want SIGABRT and \"%s%lx\"\n", the_case, the_size, how,
                out.err, want, (unsigned long)*shared_ptr);
        return 1;
    }
    printf("%s %zu: %s", the_case, the_size, out.err);
    return 0;
}
