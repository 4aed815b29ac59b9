/*
 * team.c - starts a team of pinned threads together and times them, for the
 * multi-threaded workloads.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>

#include "dpmbench.h"

struct launch {
    const struct thread_team *team;
    struct member *m;
    pthread_barrier_t *start;
};

static void *member_main(void *arg)
{
    struct launch *l = arg;
    pin_to_cpu_index(l->m->index);
    pthread_barrier_wait(l->start);
    l->m->begin = now_seconds();
    l->team->body(l->m);
    l->m->end = now_seconds();
    return NULL;
}

static struct member *member_at(const struct thread_team *team, int i)
{
    return (struct member *)((char *)team->args + (size_t)i * team->arg_size);
}

double run_team(const struct thread_team *team)
{
    pthread_t *tid = calloc((size_t)team->count, sizeof *tid);
    struct launch *l = calloc((size_t)team->count, sizeof *l);
    pthread_barrier_t start;
    if (!tid || !l)
        fail("out of memory for the thread team");
    pthread_barrier_init(&start, NULL, (unsigned)team->count);
    for (int i = 0; i < team->count; i++) {
        l[i] = (struct launch){team, member_at(team, i), &start};
        l[i].m->index = i;
        if (pthread_create(&tid[i], NULL, member_main, &l[i]) != 0)
            fail("pthread_create failed");
    }
    for (int i = 0; i < team->count; i++)
        pthread_join(tid[i], NULL);
    pthread_barrier_destroy(&start);
    double first = member_at(team, 0)->begin, last = member_at(team, 0)->end;
    for (int i = 1; i < team->count; i++) {
        struct member *m = member_at(team, i);
        first = m->begin < first ? m->begin : first;
        last = m->end > last ? m->end : last;
    }
    free(tid);
    free(l);
    return last - first;
}
