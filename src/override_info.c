/*
 * override_info.c - glibc's questions about the heap, answered from
 * dpmalloc's statistics when dpmalloc overrides libc (DPM_OVERRIDE_LIBC):
 * mallinfo2, mallinfo, malloc_stats, malloc_info, and mallopt for the
 * parameters that mean something here. docs/libc.md gives every field's
 * and parameter's mapping.
 *
 * mallinfo reads counters only (stats_brief: no snapshot, no list walk);
 * malloc_stats and malloc_info render a snapshot into a buffer under the
 * stats lock and write it to the stream after releasing it.
 * May call: stats, arena, conf.
 */
#include "arena.h"
#include "conf.h"
#include "global.h"
#include "stats.h"

#include <dpmalloc.h>
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>
#include <string.h>

#if DPM_OVERRIDE_LIBC

/* ---- mallinfo2 / mallinfo ---------------------------------------------- */

DPM_EXPORT struct mallinfo2 mallinfo2(void)
{
    stats_brief_t b;
    stats_brief(&b);
    struct mallinfo2 mi;
    memset(&mi, 0, sizeof(mi));
    mi.arena = b.mapped;
    mi.ordblks = b.free_runs;
    mi.smblks = b.tcache_blocks;
    mi.fsmblks = b.tcache_bytes;
    mi.uordblks = b.allocated;
    mi.fordblks = b.mapped > b.allocated ? b.mapped - b.allocated : 0;
    mi.keepcost = b.free_resident;
    /* hblks, hblkhd, usmblks: 0 (docs/libc.md says why) */
    return mi;
}

static int saturate(size_t v) { return v > INT_MAX ? INT_MAX : (int)v; }

DPM_EXPORT struct mallinfo mallinfo(void)
{
    struct mallinfo2 m = mallinfo2();
    struct mallinfo mi = {
        .arena = saturate(m.arena),
        .ordblks = saturate(m.ordblks),
        .smblks = saturate(m.smblks),
        .hblks = saturate(m.hblks),
        .hblkhd = saturate(m.hblkhd),
        .usmblks = saturate(m.usmblks),
        .fsmblks = saturate(m.fsmblks),
        .uordblks = saturate(m.uordblks),
        .fordblks = saturate(m.fordblks),
        .keepcost = saturate(m.keepcost),
    };
    return mi;
}

/* ---- malloc_stats ------------------------------------------------------- */

static size_t arena_in_use(const arena_snap_t *o)
{
    size_t held = o->small_allocated + o->large_allocated;
    return held > o->tcache_bytes ? held - o->tcache_bytes : 0;
}

static void render_stats(const stats_snap_t *s, text_buf_t *b, void *arg)
{
    (void)arg;
    for (unsigned i = 0; i < s->narenas; i++) {
        const arena_snap_t *o = &s->arenas[i];
        if (!o->exists)
            continue;
        if (o->manual)
            text_buf_printf(b, "Arena %u (%s):\n", o->index, o->name);
        else
            text_buf_printf(b, "Arena %u:\n", o->index);
        text_buf_printf(b, "system bytes     = %10zu\n", o->mapped);
        text_buf_printf(b, "in use bytes     = %10zu\n", arena_in_use(o));
    }
    text_buf_printf(b, "Total:\n");
    text_buf_printf(b, "system bytes     = %10zu\n", s->mapped);
    text_buf_printf(b, "in use bytes     = %10zu\n", s->allocated);
    text_buf_printf(b, "thread caches    = %10zu\n", s->tcache_bytes);
    text_buf_printf(b, "metadata bytes   = %10zu\n", s->metadata);
}

DPM_EXPORT void malloc_stats(void)
{
    text_buf_t buf;
    stats_render(render_stats, NULL, &buf);
    if (buf.text != NULL)
        fwrite(buf.text, 1, buf.len, stderr);
    text_buf_release(&buf);
}

/* ---- malloc_info --------------------------------------------------------- */

/* Arena names come from the program: escaped for an XML attribute. */
static void xml_escaped(char *out, size_t cap, const char *in)
{
    size_t n = 0;
    for (; *in != '\0' && n + 7 < cap; in++) {
        const char *rep = NULL;
        switch (*in) {
        case '&': rep = "&amp;"; break;
        case '<': rep = "&lt;"; break;
        case '>': rep = "&gt;"; break;
        case '"': rep = "&quot;"; break;
        case '\'': rep = "&apos;"; break;
        }
        if (rep != NULL) {
            memcpy(out + n, rep, strlen(rep));
            n += strlen(rep);
        } else if ((unsigned char)*in >= 0x20 && (unsigned char)*in < 0x7f) {
            out[n++] = *in;
        } else {
            out[n++] = '?';   /* control and non-ASCII bytes: not always valid XML */
        }
    }
    out[n] = '\0';
}

typedef struct info_totals {
    size_t slab_free_count, slab_free_bytes, runs, run_bytes;
} info_totals_t;

/* One <heap>: free slots of each slab class (glibc lists free chunks by
 * size), free page runs, thread-cached bytes and what the arena maps. */
static void render_heap(const arena_snap_t *o, text_buf_t *b, info_totals_t *t)
{
    char name[4 * ARENA_NAME_MAX + 8];
    xml_escaped(name, sizeof(name), o->name);
    text_buf_printf(b, "<heap nr=\"%u\" name=\"%s\" manual=\"%d\">\n<sizes>\n", o->index, name, o->manual);
    size_t count = 0, bytes = 0;
    for (unsigned i = 0; i < o->nbins; i++) {
        const bin_snap_t *bs = &o->bins[i];
        size_t slots = bs->curslabs * bs->slab_objs;
        size_t nfree = slots > bs->curobjs ? slots - bs->curobjs : 0;
        if (nfree == 0)
            continue;
        text_buf_printf(b, "  <size from=\"%zu\" to=\"%zu\" total=\"%zu\" count=\"%zu\" phase=\"%u\"/>\n",
                        bs->size_class == 0 ? 1 : sc_size(bs->size_class - 1) + 1, bs->objsize,
                        nfree * bs->objsize, nfree, bs->phase);
        count += nfree;
        bytes += nfree * bs->objsize;
    }
    text_buf_printf(b, "</sizes>\n");
    size_t runs = 0, pages = 0;
    for (int st = 0; st < RUN_NSTATES; st++) {
        runs += o->runs[st].nruns;
        pages += o->runs[st].npages;
    }
    text_buf_printf(b, "<total type=\"slab\" count=\"%zu\" size=\"%zu\"/>\n", count, bytes);
    text_buf_printf(b, "<total type=\"runs\" count=\"%zu\" size=\"%zu\"/>\n", runs, pages << LG_PAGE);
    text_buf_printf(b, "<total type=\"tcache\" size=\"%zu\"/>\n", o->tcache_bytes);
    text_buf_printf(b, "<total type=\"allocated\" size=\"%zu\"/>\n", arena_in_use(o));
    text_buf_printf(b, "<system type=\"current\" size=\"%zu\"/>\n", o->mapped);
    text_buf_printf(b, "<aspace type=\"total\" size=\"%zu\"/>\n", o->mapped);
    text_buf_printf(b, "</heap>\n");
    t->slab_free_count += count;
    t->slab_free_bytes += bytes;
    t->runs += runs;
    t->run_bytes += pages << LG_PAGE;
}

static void render_info(const stats_snap_t *s, text_buf_t *b, void *arg)
{
    (void)arg;
    info_totals_t t = {0};
    text_buf_printf(b, "<malloc version=\"dpmalloc-%s\">\n", DPMALLOC_VERSION);
    for (unsigned i = 0; i < s->narenas; i++)
        if (s->arenas[i].exists)
            render_heap(&s->arenas[i], b, &t);
    text_buf_printf(b, "<total type=\"slab\" count=\"%zu\" size=\"%zu\"/>\n", t.slab_free_count,
                    t.slab_free_bytes);
    text_buf_printf(b, "<total type=\"runs\" count=\"%zu\" size=\"%zu\"/>\n", t.runs, t.run_bytes);
    text_buf_printf(b, "<total type=\"tcache\" size=\"%zu\"/>\n", s->tcache_bytes);
    text_buf_printf(b, "<total type=\"allocated\" size=\"%zu\"/>\n", s->allocated);
    text_buf_printf(b, "<system type=\"current\" size=\"%zu\"/>\n", s->mapped);
    text_buf_printf(b, "<system type=\"metadata\" size=\"%zu\"/>\n", s->metadata);
    text_buf_printf(b, "<aspace type=\"total\" size=\"%zu\"/>\n", s->mapped);
    text_buf_printf(b, "</malloc>\n");
}

/* As glibc's: the error value is returned (not -1 and errno). */
DPM_EXPORT int malloc_info(int options, FILE *fp)
{
    if (options != 0 || fp == NULL)
        return EINVAL;
    text_buf_t buf;
    bool ok = stats_render(render_info, NULL, &buf);
    if (ok)
        fwrite(buf.text, 1, buf.len, fp);
    text_buf_release(&buf);
    return ok ? 0 : ENOMEM;
}

/* ---- mallopt ------------------------------------------------------------- */

/* 1 if the parameter was applied, 0 otherwise, as glibc's. */
DPM_EXPORT int mallopt(int param, int value)
{
    if (!dpm_ready())
        return 0;
    switch (param) {
    case M_ARENA_MAX:
        return value > 0 && arena_set_auto_count((unsigned)value);
    case M_MMAP_THRESHOLD:
        /* glibc: blocks this big are unmapped when freed. dpmalloc: freed
         * blocks this big are purged at once. 0 in glibc sends every
         * block there; dpmalloc's 0 would turn the purge off. */
        if (value < 0)
            return 0;
        __atomic_store_n(&opt.oversize_threshold, value == 0 ? (size_t)1 : (size_t)value, __ATOMIC_RELAXED);
        return 1;
    default:
        return 0;
    }
}

#endif
