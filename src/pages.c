/*
 * pages.c - page-run allocator (see pages.h). All functions run under the
 * owning arena's lock (ph_purge_run excepted), except the radix writes,
 * which take a global lock because leaves are shared between arenas.
 */
#include "pages.h"

#include "error.h"
#include "memlimit.h"
#include "mutex.h"
#include "os.h"
#include "annotate.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

static dpm_mutex_t radix_write_lock = DPM_MUTEX_INITIALIZER;

void ph_init(page_heap_t *ph, struct arena *arena, const page_options_t *options)
{
    *ph = (page_heap_t){0};
    ph->arena = arena;
    ph->options = *options;
    for (int s = 0; s < RUN_NSTATES; s++)
        runs_init(&ph->free_runs[s]);
    pool_init(&ph->spans, sizeof(span_t));
    pool_init(&ph->type_arrays, SLAB_MAX_OBJS * sizeof(uint16_t));
}

/* ---- memory limit ------------------------------------------------------ */

/* Brings the memory limit's charge in line with the heap after a change:
 * every mapped page but the clean ones. Grows only by pages a free made
 * countable (none while a limit is set: see mergeable) or a segment's
 * header; shrinks as purges and unmaps give pages back. */
static DPM_NOINLINE void charge_apply(page_heap_t *ph, size_t target)
{
    if (ph->options.sourced)
        return;
    if (target > ph->charged_pages)
        memlimit_force_charge((target - ph->charged_pages) << LG_PAGE);
    else
        memlimit_uncharge((ph->charged_pages - target) << LG_PAGE);
    ph->charged_pages = target;
}

/* Inline: most calls (a slab made from or freed into resident pages)
 * change nothing. */
DPM_INLINE void charge_sync(page_heap_t *ph)
{
    size_t target = (ph->mapped_bytes >> LG_PAGE) - ph->free_runs[RUN_CLEAN].npages;
    if (unlikely(target != ph->charged_pages))
        charge_apply(ph, target);
}

/* npages of a clean run are about to be handed out: charged first, or
 * refused at the hard limit. The charge_sync that follows the change
 * finds them already counted. */
static bool charge_clean(page_heap_t *ph, size_t npages)
{
    if (ph->options.sourced)
        return true;
    if (!memlimit_try_charge(npages << LG_PAGE))
        return false;
    ph->charged_pages += npages;
    return true;
}

/* ---- page map ---------------------------------------------------------- */

static void map_page(uintptr_t addr, span_t *s)
{
    dpm_assert(radix_covered(addr));
    radix_set(addr, span_entry(s));
}

static void map_ends(span_t *s)
{
    map_page(s->start, s);
    map_page(span_end(s) - PAGE, s);
}

void ph_map_all_pages(span_t *s)
{
    for (size_t i = 0; i < s->npages; i++)
        map_page(s->start + (i << LG_PAGE), s);
}

void ph_set_tcache_class(span_t *s, uint8_t tcache_class)
{
    s->tcache_class = tcache_class;
    if (s->kind == SPAN_SLAB)
        ph_map_all_pages(s);
    else
        map_ends(s);
}

void ph_unmap_inner_pages(span_t *s)
{
    for (size_t i = 1; i + 1 < s->npages; i++)
        map_page(s->start + (i << LG_PAGE), NULL);
}

/* ---- lists ------------------------------------------------------------- */

static bool state_decays(unsigned state) { return state == RUN_DIRTY || state == RUN_MUZZY; }

/* A free run enters or leaves both its index and (dirty/muzzy) its LRU. */
static void run_file(page_heap_t *ph, span_t *r)
{
    dpm_assert(r->state < RUN_NSTATES);
    runs_insert(&ph->free_runs[r->state], r);
    if (state_decays(r->state))
        list_push_back(&ph->lru[r->state], &r->lru);
}

/* The same for a run split off an older one: it keeps its place at the
 * head of the decay order. */
static void run_file_oldest(page_heap_t *ph, span_t *r)
{
    runs_insert(&ph->free_runs[r->state], r);
    if (state_decays(r->state))
        list_push_front(&ph->lru[r->state], &r->lru);
}

static void run_unfile(page_heap_t *ph, span_t *r)
{
    runs_remove(&ph->free_runs[r->state], r);
    if (state_decays(r->state))
        list_remove(&ph->lru[r->state], &r->lru);
}

/* Makes s a fresh descriptor of [start, start + npages pages) of kind with
 * every page-level field cleared. Only the first two cache lines are
 * written: the slab-only fields behind them (counts, bitmap, list mark)
 * are set by bin.c when a span becomes a slab, and untouched lines stay
 * out of the cache on cold large-block paths. Large blocks get bitmap word
 * 0 cleared, since the free fast path tests "block 0 is free". */
static void span_reset(span_t *s, const page_heap_t *ph, segment_t *seg, enum span_kind kind, uintptr_t start,
                       size_t npages)
{
    memset(s, 0, offsetof(span_t, nfree));
    s->seg = seg;
    s->arena = ph->arena;
    s->tcache_class = TC_NONE;
    s->kind = (uint8_t)kind;
    s->start = start;
    s->npages = npages;
    if (kind == SPAN_LARGE)
        s->free_bits[0] = 0;
}

static span_t *span_new(page_heap_t *ph, segment_t *seg, uintptr_t start, size_t npages)
{
    span_t *s = pool_get(&ph->spans);
    if (s != NULL)
        span_reset(s, ph, seg, 0, start, npages);
    return s;
}

/* ---- segments ---------------------------------------------------------- */

static size_t header_pages(void)
{
    return pages_of(sizeof(segment_t));
}

/* Smallest multiple of SEG_UNIT whose pages minus its header hold
 * usable_pages; 0 if that overflows. */
static size_t segment_size_for(size_t usable_pages)
{
    if (usable_pages > ((size_t)1 << (RADIX_LG_VA - LG_PAGE)))
        return 0;
    size_t size = round_up((usable_pages + header_pages()) << LG_PAGE, SEG_UNIT);
    while ((size >> LG_PAGE) - header_pages() < usable_pages)
        size += SEG_UNIT;
    return size;
}

static void segment_link(page_heap_t *ph, segment_t *seg)
{
    list_push_front(&ph->segments, &seg->link);
    ph->nsegments++;
    ph->mapped_bytes += seg->size;
    ph->nsegments_mapped++;
}

static void segment_unlink(page_heap_t *ph, segment_t *seg)
{
    list_remove(&ph->segments, &seg->link);
    ph->nsegments--;
    ph->mapped_bytes -= seg->size;
    ph->nsegments_unmapped++;
}

/* Leaves for the segment's pages; the entries themselves are written as
 * spans come and go (and are all NULL before the segment is unmapped). */
static bool radix_publish(segment_t *seg)
{
    mutex_lock(&radix_write_lock);
    bool ok = radix_cover(seg->base, seg->size);
    mutex_unlock(&radix_write_lock);
    return ok;
}

/* Segments grow geometrically with the arena (4, 8, ... 64 MiB of address
 * space; only touched pages cost memory): fewer mappings, and room for
 * large blocks to grow in place on realloc. */
#define SEG_GROWTH_MAX_SHIFT 4

static size_t segment_growth_size(const page_heap_t *ph)
{
    uint64_t n = ph->nsegments_mapped < SEG_GROWTH_MAX_SHIFT ? ph->nsegments_mapped : SEG_GROWTH_MAX_SHIFT;
    return SEG_UNIT << n;
}

/* hugepages:true: segments from the system's huge page pool; a segment
 * the pool cannot supply comes from ordinary pages (one warning). */
static segment_t *map_huge_segment(size_t size, unsigned lg_hugepage)
{
    static bool warned;
    segment_t *seg = os_map_huge_sized(size, SEG_UNIT, lg_hugepage);
    if (seg == NULL && !__atomic_exchange_n(&warned, true, __ATOMIC_RELAXED))
        dpm_warn3("hugepages: no huge pages available (vm.nr_hugepages), using normal pages", NULL, NULL);
    return seg;
}

/* Node arenas: segments mbind'ed to their node. A node the kernel does
 * not know (no NUMA support, a made-up topology) leaves them unbound,
 * with one warning. */
static void bind_to_node(void *seg, size_t size, int node)
{
    static bool warned;
    if (!os_bind_node(seg, size, node) && !__atomic_exchange_n(&warned, true, __ATOMIC_RELAXED))
        dpm_warn3("numa: mbind to a node failed (no such node or no NUMA support), using unbound pages", NULL,
                  NULL);
}

/* The size of the next segment for a request of usable_pages; 0 if that
 * overflows. 1 GiB huge pages make segments whole huge pages. */
static size_t next_segment_size(const page_heap_t *ph, size_t usable_pages)
{
    size_t size = segment_size_for(usable_pages);
    if (size == 0)
        return 0;
    if (size < segment_growth_size(ph))
        size = segment_growth_size(ph);
    if (ph->options.hugepages && !ph->options.sourced) {
        size_t huge = (size_t)1 << ph->options.lg_hugepage;
        size = huge > SEG_UNIT ? round_up(size, huge) : size;
    }
    return size;
}

/* Makes mem (size bytes) a segment of ph with one free run over its
 * pages: clean if it reads as zero, else retained (resident, contents
 * unknown: reused before clean runs, never purged by decay until a
 * neighbour's free makes it dirty). */
static span_t *segment_init(page_heap_t *ph, void *mem, size_t size, bool zeroed, unsigned lg_hugepage,
                            bool sourced, bool reserved)
{
    segment_t *seg = mem;
    if (!zeroed)
        memset(seg, 0, sizeof(*seg));
    seg->hugetlb = lg_hugepage != 0;
    seg->lg_hugepage = (uint8_t)lg_hugepage;
    seg->sourced = sourced;
    seg->reserved = reserved;
    seg->base = (uintptr_t)seg;
    seg->size = size;
    seg->npages = size >> LG_PAGE;
    seg->first_page = header_pages();
    seg->arena = ph->arena;
    size_t npages = seg->npages - seg->first_page;
    span_t *run = span_new(ph, seg, seg->base + (seg->first_page << LG_PAGE), npages);
    if (run == NULL || !radix_publish(seg)) {
        if (run != NULL)
            pool_put(&ph->spans, run);
        errno = ENOMEM;
        return NULL;
    }
    seg->free_pages = npages;
    run->kind = SPAN_FREE;
    run->state = zeroed && !reserved ? RUN_CLEAN : RUN_RETAINED;
    map_ends(run);
    run_file(ph, run);
    segment_link(ph, seg);
    if (reserved)
        ph->reserved_bytes += size;
    return run;
}

/* A new segment with one clean free run of at least usable_pages pages. */
static span_t *segment_create(page_heap_t *ph, size_t usable_pages)
{
    size_t size = next_segment_size(ph, usable_pages);
    if (size == 0)
        return NULL;
    unsigned lg_huge = 0;
    segment_t *seg = NULL;
    if (ph->options.hugepages && (seg = map_huge_segment(size, ph->options.lg_hugepage)) != NULL)
        lg_huge = ph->options.lg_hugepage;
    if (seg == NULL && (seg = os_map_aligned(size, SEG_UNIT)) == NULL)
        return NULL;
    if (ph->options.node >= 0)
        bind_to_node(seg, size, ph->options.node);
    /* under a hard memory limit the charge counts base pages while a
     * transparent huge page faults 2 MiB at once: no THP for the heap
     * (docs/design.md "Memory limit") */
    if (lg_huge == 0 && memlimit_get() != 0)
        os_hint_hugepage(seg, size, false);
    else if (ph->options.thp != 0 && lg_huge == 0)
        os_hint_hugepage(seg, size, ph->options.thp > 0);
    span_t *run = segment_init(ph, seg, size, true, lg_huge, false, false);
    if (run == NULL)
        os_unmap(seg, size);
    return run;
}

void ph_no_thp(page_heap_t *ph)
{
    list_for_each(segment_t, seg, &ph->segments, link)
        if (!seg->hugetlb && !seg->sourced)
            os_hint_hugepage((void *)seg->base, seg->size, false);
}

__thread uint32_t ph_source_calls_here;

/* The source's calls, counted in ph_source_calls_here while they run.
 * Memory crossing between dpmalloc and the source carries no poison of
 * dpmalloc's (ASan build: freed blocks are poisoned, src/annotate.h):
 * the source may write to what it gets back, and a range it hands out
 * again may hold what dpmalloc once poisoned. */
static void *source_alloc(const page_source_t *src, size_t size, bool *zeroed)
{
    ph_source_calls_here++;
    void *mem = src->alloc(src->ctx, size, SEG_UNIT, zeroed);
    ph_source_calls_here--;
    if (mem != NULL)
        DPM_ANN_UNMAP(mem, size);
    return mem;
}

static void source_free(const page_source_t *src, void *addr, size_t size)
{
    DPM_ANN_UNMAP(addr, size);
    ph_source_calls_here++;
    src->free(src->ctx, addr, size);
    ph_source_calls_here--;
}

static bool source_purge(const page_source_t *src, void *addr, size_t size)
{
    DPM_ANN_UNMAP(addr, size);
    ph_source_calls_here++;
    bool zeroed = src->purge(src->ctx, addr, size);
    ph_source_calls_here--;
    return zeroed;
}

void *ph_source_alloc(const page_source_t *src, size_t size, bool *zeroed)
{
    *zeroed = false;
    void *mem = source_alloc(src, size, zeroed);
    if (mem != NULL && ((uintptr_t)mem & (SEG_UNIT - 1)) != 0) {
        dpm_warn3("page source: alloc returned a range not aligned to 4 MiB; given back", NULL, NULL);
        if (src->free != NULL)
            source_free(src, mem, size);
        mem = NULL;
    }
    if (mem == NULL)
        errno = ENOMEM;
    return mem;
}

bool ph_add_segment(page_heap_t *ph, void *mem, size_t size, bool zeroed, bool sourced, bool reserved)
{
    bool ok = segment_init(ph, mem, size, zeroed, 0, sourced, reserved) != NULL;
    if (ok && reserved && !ph->options.sourced)
        ph->charged_pages += size >> LG_PAGE;   /* charged by the caller */
    charge_sync(ph);
    return ok;
}

void ph_take_given_back(page_heap_t *ph, list_t *out)
{
    for (list_node_t *n; (n = list_pop_front(&ph->to_give_back)) != NULL;)
        list_push_back(out, n);
}

void ph_source_free(const page_source_t *src, void *mem, size_t size)
{
    if (src->free != NULL)
        source_free(src, mem, size);
}

void ph_source_give_back(const page_source_t *src, list_t *list)
{
    for (list_node_t *n; (n = list_pop_front(list)) != NULL;) {
        segment_t *seg = list_item(n, segment_t, link);
        void *addr = (void *)seg->base;
        size_t size = seg->size;   /* read before the header goes back with the memory */
        if (src->free != NULL)
            source_free(src, addr, size);
    }
}

/* Gives an unlinked segment back: to the kernel, or (sourced) onto the
 * list the caller hands to ph_source_give_back once its locks are
 * dropped. */
static void segment_let_go(page_heap_t *ph, segment_t *seg)
{
    if (seg->sourced)
        list_push_back(&ph->to_give_back, &seg->link);
    else
        os_unmap(seg, seg->size);
}

/* Unmaps seg if every page of it is free and none of its runs waits for
 * decay (dirty, muzzy) or is being purged: its runs are clean or
 * retained, and need not have merged (a hugetlb segment keeps retained
 * runs beside clean ones). Walks the segment's runs only when all of its
 * pages are free. */
static bool segment_release_if_idle(page_heap_t *ph, segment_t *seg)
{
    if (seg->reserved || seg->free_pages != seg->npages - seg->first_page)
        return false;
    for (size_t i = seg->first_page; i < seg->npages;) {
        const span_t *r = radix_span(seg->base + (i << LG_PAGE));
        if (state_decays(r->state) || r->state == RUN_BUSY)
            return false;
        i += r->npages;
    }
    for (size_t i = seg->first_page; i < seg->npages;) {
        span_t *r = radix_span(seg->base + (i << LG_PAGE));
        i += r->npages;
        run_unfile(ph, r);
        map_page(r->start, NULL);
        map_page(span_end(r) - PAGE, NULL);
        pool_put(&ph->spans, r);
    }
    segment_unlink(ph, seg);
    segment_let_go(ph, seg);
    return true;
}

/* ---- coalescing -------------------------------------------------------- */

static uint64_t blend_time(const span_t *a, const span_t *b)
{
    __uint128_t w = (__uint128_t)a->freed_at_ns * a->npages + (__uint128_t)b->freed_at_ns * b->npages;
    return (uint64_t)(w / (a->npages + b->npages));
}

/* Runs of one state merge; a dirty run also takes in retained ones (both
 * resident, contents unknown), so a retained run gets one more purge
 * attempt only when a neighbour is freed, never once per decay pass. A
 * freshly freed (dirty) run also takes in clean neighbours: kept apart,
 * clean islands purged ahead of decay (a realloc's purged cut, a huge
 * free) between dirty runs would split the free space into pieces no
 * request fits, and the heap would map new segments instead; merged, the
 * run is dirty (contents unknown) and decay purges it again, cheaply where
 * its pages were already given back. Muzzy neighbours stay apart (their
 * lazy purge is under way; re-dirtied, they would start decay over).
 * Runs that decay settles merge by state only, or a purged piece of a
 * long run would melt back into its dirty rest. Busy runs merge with
 * nothing. */
static bool mergeable(unsigned state, unsigned neighbour_state, bool fresh)
{
    if (state == RUN_BUSY || neighbour_state == RUN_BUSY)
        return false;
    /* Under a memory limit a fresh run keeps its clean neighbours apart:
     * merged, their pages would count as resident (memlimit.h) until
     * decay purged them again. */
    return neighbour_state == state ||
           (state == RUN_DIRTY && (neighbour_state == RUN_RETAINED ||
                                   (fresh && neighbour_state == RUN_CLEAN && !memlimit_any())));
}

static span_t *free_neighbour(span_t *r, uintptr_t addr, bool fresh)
{
    segment_t *seg = r->seg;
    if (addr < seg->base + (seg->first_page << LG_PAGE) || addr >= seg->base + seg->size)
        return NULL;
    span_t *n = radix_span(addr);
    if (n == NULL || n->kind != SPAN_FREE || !mergeable(r->state, n->state, fresh))
        return NULL;
    return n;
}

/* r is free, not filed; absorbs mergeable free neighbours (fresh: r was
 * just freed, dirty), then is filed. */
static span_t *coalesce_and_file(page_heap_t *ph, span_t *r, bool fresh)
{
    /* A fresh run may take in a run of another state whose far side is a
     * run of its own state: keep going, so that no two runs that may merge
     * are left side by side (each step consumes one run). */
    span_t *left;
    while ((left = free_neighbour(r, r->start - PAGE, fresh)) != NULL) {
        run_unfile(ph, left);
        map_page(r->start - PAGE, NULL);
        map_page(r->start, NULL);
        if (left->state != RUN_CLEAN)   /* a clean run's pages decay no more: r's age stays */
            r->freed_at_ns = blend_time(r, left);
        r->start = left->start;
        r->npages += left->npages;
        pool_put(&ph->spans, left);
    }
    span_t *right;
    while ((right = free_neighbour(r, span_end(r), fresh)) != NULL) {
        run_unfile(ph, right);
        map_page(span_end(r) - PAGE, NULL);
        map_page(right->start, NULL);
        if (right->state != RUN_CLEAN)
            r->freed_at_ns = blend_time(r, right);
        r->npages += right->npages;
        pool_put(&ph->spans, right);
    }
    map_ends(r);
    run_file(ph, r);
    return r;
}

/* ---- allocation -------------------------------------------------------- */

static span_t *find_run(page_heap_t *ph, size_t need, bool zero)
{
    static const uint8_t reuse_order[RUN_NSTATES] = {RUN_DIRTY, RUN_RETAINED, RUN_MUZZY, RUN_CLEAN};
    static const uint8_t zero_order[RUN_NSTATES] = {RUN_CLEAN, RUN_DIRTY, RUN_RETAINED, RUN_MUZZY};
    /* With a reserve, zeroing resident pages beats faulting clean ones in. */
    const uint8_t *order = zero && ph->reserved_bytes == 0 ? zero_order : reuse_order;
    ph->nsearches++;
    for (int k = 0; k < RUN_NSTATES; k++) {
        span_t *r = runs_find(&ph->free_runs[order[k]], need);
        if (r != NULL) {
            ph->nsearch_hits++;
            ph->ncandidates++;
            return r;
        }
    }
    return NULL;
}

/* Splits [from, from+npages) off free run r, which stays filed, as a new
 * free run of r's state and age: right behind r in the decay order. */
static void split_off_free(page_heap_t *ph, span_t *piece, span_t *r, uintptr_t from, size_t npages)
{
    span_reset(piece, ph, r->seg, SPAN_FREE, from, npages);
    piece->state = r->state;
    piece->freed_at_ns = r->freed_at_ns;
    map_ends(piece);
    runs_insert(&ph->free_runs[r->state], piece);
    if (state_decays(r->state))
        list_insert_after(&ph->lru[r->state], &r->lru, &piece->lru);
}

span_t *ph_alloc(page_heap_t *ph, const page_request_t *req, bool *zeroed)
{
    size_t need_bytes;
    return ph_alloc_or_ask(ph, req, zeroed, &need_bytes);
}

span_t *ph_alloc_or_ask(page_heap_t *ph, const page_request_t *req, bool *zeroed, size_t *need_bytes)
{
    *need_bytes = 0;
    dpm_check(req->npages >= 1);
    size_t slack = req->align > PAGE ? (req->align >> LG_PAGE) - 1 : 0;
    size_t need = req->npages + slack;
    if (need < req->npages) {
        errno = ENOMEM;
        return NULL;
    }
    /* Holes first: a fitting free run of any state before a new segment.
     * No room is reserved for realloc; ph_grow takes a free neighbour when
     * a block actually grows. */
    span_t *r = find_run(ph, need, req->zero);
    if (r == NULL && ph->options.sourced) {
        *need_bytes = next_segment_size(ph, need);
        errno = *need_bytes != 0 ? EAGAIN : ENOMEM;
        return NULL;
    }
    bool charged = false;
    if (r == NULL) {
        /* the charge first: a refused request maps nothing */
        if (!charge_clean(ph, req->npages)) {
            errno = ENOMEM;
            return NULL;
        }
        charged = true;
        r = segment_create(ph, need);
    }
    if (r == NULL) {
        charge_sync(ph);   /* takes back what charge_clean counted */
        errno = ENOMEM;
        return NULL;
    }
    if (!charged && r->state == RUN_CLEAN && !charge_clean(ph, req->npages)) {
        /* at the limit: a zeroed request may still take resident pages
         * (find_run prefers clean ones for it) and clear them */
        span_t *other = req->zero ? find_run(ph, need, false) : NULL;
        if (other == NULL || other->state == RUN_CLEAN) {
            errno = ENOMEM;
            return NULL;
        }
        r = other;
    }
    uintptr_t start = r->start + ((req->phase - r->start) & (req->align - 1));
    size_t head_pages = (start - r->start) >> LG_PAGE;
    size_t tail_pages = r->npages - head_pages - req->npages;
    segment_t *seg = r->seg;
    *zeroed = r->state == RUN_CLEAN;
    span_t *block = r;
    if (head_pages != 0 || tail_pages != 0) {
        /* r stays filed as the first piece left over (its head, else its
         * tail), keeping its place in the decay order and, unless its
         * length slot changes, in its index list: a carve then writes one
         * fresh descriptor (the block's) and the page-map entries of the
         * new ends only, whatever the alignment. */
        block = pool_get(&ph->spans);
        span_t *tail = head_pages != 0 && tail_pages != 0 ? pool_get(&ph->spans) : NULL;
        if (block == NULL || (head_pages != 0 && tail_pages != 0 && tail == NULL)) {
            if (block != NULL)
                pool_put(&ph->spans, block);
            charge_sync(ph);   /* takes back the pages charge_clean counted */
            errno = ENOMEM;
            return NULL;
        }
        if (tail != NULL)
            split_off_free(ph, tail, r, start + (req->npages << LG_PAGE), tail_pages);
        if (head_pages != 0) {
            runs_resize(&ph->free_runs[r->state], r, head_pages);
            map_page(span_end(r) - PAGE, r);
        } else {
            r->start = start + (req->npages << LG_PAGE);
            runs_resize(&ph->free_runs[r->state], r, tail_pages);
            map_page(r->start, r);
        }
    } else {
        run_unfile(ph, r);
    }
    span_reset(block, ph, seg, SPAN_LARGE, start, req->npages);
    map_ends(block);
    seg->free_pages -= req->npages;
    ph->active_pages += req->npages;
    charge_sync(ph);
    return block;
}

static span_t *free_as(page_heap_t *ph, span_t *s, uint64_t now_ns, bool clean, size_t uncharged)
{
    if (s->type_ids != NULL)
        pool_put(&ph->type_arrays, s->type_ids);
    s->seg->free_pages += s->npages;
    ph->active_pages -= s->npages;
    segment_t *seg = s->seg;
    uintptr_t start = s->start;
    size_t npages = s->npages;
    span_reset(s, ph, seg, SPAN_FREE, start, npages);
    s->freed_at_ns = now_ns;
    span_t *r;
    if (clean) {
        /* the caller took these pages out of the charge already */
        if (!ph->options.sourced)
            ph->charged_pages -= uncharged;
        s->state = RUN_CLEAN;
        r = coalesce_and_file(ph, s, false);
    } else {
        s->state = RUN_DIRTY;
        r = coalesce_and_file(ph, s, true);
    }
    charge_sync(ph);
    return r;
}

span_t *ph_free(page_heap_t *ph, span_t *s, uint64_t now_ns) { return free_as(ph, s, now_ns, false, 0); }

span_t *ph_free_clean(page_heap_t *ph, span_t *s, uint64_t now_ns, size_t uncharged)
{
    return free_as(ph, s, now_ns, true, uncharged);
}

bool ph_grow(page_heap_t *ph, span_t *s, size_t npages)
{
    size_t extra = npages - s->npages;
    uintptr_t end = span_end(s);
    segment_t *seg = s->seg;
    if (end >= seg->base + seg->size)
        return false;
    span_t *next = radix_span(end);
    if (next == NULL || next->kind != SPAN_FREE || next->state == RUN_BUSY || next->npages < extra)
        return false;
    if (next->state == RUN_CLEAN && !charge_clean(ph, extra))
        return false;
    run_unfile(ph, next);
    if (s->npages > 1)
        map_page(end - PAGE, NULL);
    map_page(end, NULL);
    if (next->npages > extra) {
        next->start += extra << LG_PAGE;
        next->npages -= extra;
        map_ends(next);
        run_file(ph, next);
    } else {
        pool_put(&ph->spans, next);
    }
    s->npages = npages;
    s->usable = span_end(s) - s->base;
    map_ends(s);
    seg->free_pages -= extra;
    ph->active_pages += extra;
    charge_sync(ph);
    return true;
}

span_t *ph_shrink(page_heap_t *ph, span_t *s, size_t npages, uint64_t now_ns)
{
    size_t cut = s->npages - npages;
    if (cut == 0)
        return NULL;
    span_t *t = pool_get(&ph->spans);
    if (t == NULL)
        return NULL;
    if (s->npages > 1)
        map_page(span_end(s) - PAGE, NULL);
    s->npages = npages;
    /* A block whose slack is cut (large_cache.h) keeps its usable size;
     * its holder may be reading it meanwhile, so it is not rewritten. */
    if (s->usable != span_end(s) - s->base)
        s->usable = span_end(s) - s->base;
    map_ends(s);
    span_reset(t, ph, s->seg, SPAN_FREE, span_end(s), cut);
    t->state = RUN_DIRTY;
    t->freed_at_ns = now_ns;
    s->seg->free_pages += cut;
    ph->active_pages -= cut;
    span_t *r = coalesce_and_file(ph, t, true);
    charge_sync(ph);
    return r;
}

void ph_release_all(page_heap_t *ph, void (*forget)(const span_t *))
{
    dpm_check(ph->busy_pages == 0);
    while (!list_empty(&ph->segments)) {
        segment_t *seg = list_item(list_first(&ph->segments), segment_t, link);
        for (size_t i = seg->first_page; i < seg->npages;) {
            span_t *s = radix_span(seg->base + (i << LG_PAGE));
            i += s->npages;
            if (s->kind == SPAN_SLAB)
                ph_unmap_inner_pages(s);
            map_page(s->start, NULL);
            map_page(span_end(s) - PAGE, NULL);
            if (s->kind == SPAN_FREE)
                run_unfile(ph, s);
            else
                forget(s);
            if (s->type_ids != NULL)
                pool_put(&ph->type_arrays, s->type_ids);
            pool_put(&ph->spans, s);
        }
        segment_unlink(ph, seg);
        if (seg->reserved)
            ph->reserved_bytes -= seg->size;
        segment_let_go(ph, seg);
    }
    ph->active_pages = 0;
    charge_sync(ph);
}

/* ---- decay ------------------------------------------------------------- */

static bool old_enough(const span_t *r, uint64_t now_ns, int64_t ms)
{
    return ms >= 0 && now_ns >= r->freed_at_ns && now_ns - r->freed_at_ns >= (uint64_t)ms * 1000000u;
}


/* Out of the indexes, busy, with npages of its pages at most: the rest
 * stays filed where it was in the decay order. False if no descriptor
 * for the rest could be had. */
static bool take_busy(page_heap_t *ph, span_t *r, size_t npages)
{
    span_t *rest = NULL;
    if (npages < r->npages && (rest = pool_get(&ph->spans)) == NULL)
        return false;
    run_unfile(ph, r);
    if (rest != NULL) {
        span_reset(rest, ph, r->seg, SPAN_FREE, r->start + (npages << LG_PAGE), r->npages - npages);
        rest->state = r->state;
        rest->freed_at_ns = r->freed_at_ns;
        map_ends(rest);
        run_file_oldest(ph, rest);   /* its ends now map r's old last page */
        r->npages = npages;
        map_ends(r);
    }
    r->state = RUN_BUSY;
    ph->busy_pages += r->npages;
    return true;
}

/* What the kernel can be asked to drop of r: all of it, or in a hugetlb
 * segment only the whole huge pages inside it (a hugetlb madvise with an
 * unaligned start fails, and with a short length does nothing or, on
 * kernels 5.18 to 6.2, drops the rest of the huge page). False if none. */
static bool purgeable_range(const page_heap_t *ph, const span_t *r, uintptr_t *from, size_t *bytes)
{
    uintptr_t lo = r->start, hi = span_end(r);
    const segment_t *seg = r->seg;
    /* reserved memory stays faulted in; a source without purge is pinned */
    if (seg->reserved || (seg->sourced && ph->options.source.purge == NULL))
        return false;
    if (seg->hugetlb) {
        uintptr_t huge = (uintptr_t)1 << (seg->lg_hugepage != 0 ? seg->lg_hugepage : 21);
        lo = (lo + huge - 1) & ~(huge - 1);
        hi &= ~(huge - 1);
    }
    if (hi <= lo)
        return false;
    *from = lo;
    *bytes = hi - lo;
    return true;
}

/* Files r (purged or given up on), and unmaps its segment if decay has
 * nothing left to do there. */
static void settle(page_heap_t *ph, span_t *r)
{
    r = coalesce_and_file(ph, r, false);
    if (!state_decays(r->state))
        segment_release_if_idle(ph, r->seg);
}

/* Refiles r (not filed) as retained: decay has given up on it. */
static void retain(page_heap_t *ph, span_t *r)
{
    r->state = RUN_RETAINED;
    ph->nretained++;
    settle(ph, r);
}

/* Takes the oldest run of lru if it is due; false when none is (or the
 * batch or page budget is spent). */
static bool take_one(page_heap_t *ph, list_t *lru, uint64_t now_ns, int64_t ms, bool lazy, size_t *budget,
                     purge_batch_t *b)
{
    span_t *r = list_item(list_first(lru), span_t, lru);
    if (r == NULL || *budget == 0 || b->n == PH_PURGE_MAX_RUNS || !old_enough(r, now_ns, ms))
        return false;
    uintptr_t from;
    size_t bytes;
    if (!purgeable_range(ph, r, &from, &bytes)) {
        run_unfile(ph, r);
        retain(ph, r);
        return true;
    }
    size_t npages = r->npages < *budget ? r->npages : *budget;
    if (!take_busy(ph, r, npages))
        return false;
    if (!purgeable_range(ph, r, &from, &bytes)) {   /* the cut left no whole huge page */
        ph->busy_pages -= r->npages;
        retain(ph, r);
        return true;
    }
    *budget -= npages;
    b->item[b->n++] = (purge_item_t){.run = r, .from = from, .bytes = bytes,
                                     .lazy = lazy && !r->seg->hugetlb && !r->seg->sourced, .got = PURGE_NONE};
    return true;
}

size_t ph_purge_take_run(page_heap_t *ph, span_t *r, size_t min_bytes, purge_batch_t *b)
{
    size_t taken = 0;
    b->n = 0;
    b->source = ph->options.sourced ? &ph->options.source : NULL;
    if (r == NULL || r->kind != SPAN_FREE || r->state != RUN_DIRTY || span_bytes(r) < min_bytes)
        return 0;
    while (r != NULL && b->n < PH_PURGE_MAX_RUNS) {
        uintptr_t from, rest_start;
        size_t bytes;
        if (!purgeable_range(ph, r, &from, &bytes))
            break;
        size_t npages = r->npages < PH_PURGE_MAX_PAGES ? r->npages : PH_PURGE_MAX_PAGES;
        bool more = npages < r->npages;
        rest_start = r->start + (npages << LG_PAGE);
        if (!take_busy(ph, r, npages))
            break;
        if (!purgeable_range(ph, r, &from, &bytes)) {   /* the cut left no whole huge page */
            ph->busy_pages -= r->npages;
            retain(ph, r);
            break;
        }
        b->item[b->n++] = (purge_item_t){.run = r, .from = from, .bytes = bytes, .lazy = false, .got = PURGE_NONE};
        taken += npages;
        r = more ? radix_span(rest_start) : NULL;   /* the rest is a run of its own, first page mapped */
        if (r != NULL && (r->kind != SPAN_FREE || r->state != RUN_DIRTY))
            r = NULL;
    }
    return taken;
}

size_t ph_purge_take(page_heap_t *ph, uint64_t now_ns, int64_t dirty_ms, int64_t muzzy_ms, size_t max_pages,
                     purge_batch_t *b)
{
    size_t budget = max_pages < PH_PURGE_MAX_PAGES ? max_pages : PH_PURGE_MAX_PAGES;
    size_t start = budget;
    b->n = 0;
    b->source = ph->options.sourced ? &ph->options.source : NULL;
    ph->npurge_passes++;
    while (take_one(ph, &ph->lru[RUN_DIRTY], now_ns, dirty_ms, muzzy_ms != 0, &budget, b))
        ;
    while (take_one(ph, &ph->lru[RUN_MUZZY], now_ns, muzzy_ms, false, &budget, b))
        ;
    return start - budget;
}

void ph_purge_run(purge_batch_t *b)
{
    for (unsigned i = 0; i < b->n; i++) {
        purge_item_t *it = &b->item[i];
        if (b->source != NULL) {
            bool zeroed = source_purge(b->source, (void *)it->from, it->bytes);
            it->got = zeroed ? PURGE_ZEROED : PURGE_LAZY;
            continue;
        }
        it->got = (uint8_t)(it->lazy ? os_purge_lazy((void *)it->from, it->bytes)
                                     : os_purge_now((void *)it->from, it->bytes));
    }
}

static bool in_batches(const span_t *r, const purge_batch_t *const *batches, unsigned n)
{
    for (unsigned k = 0; k < n; k++)
        for (unsigned i = 0; i < batches[k]->n; i++)
            if (batches[k]->item[i].run == r)
                return true;
    return false;
}

void ph_postfork_reclaim_busy(page_heap_t *ph, const purge_batch_t *const *live, unsigned nlive)
{
    /* collected first: filing a run may merge it with its neighbours and
     * let its segment go, which a walk could not survive (a busy run is
     * on no list, so its lru link is free) */
    list_t orphans = {0};
    list_for_each(segment_t, seg, &ph->segments, link)
        for (size_t i = seg->first_page; i < seg->npages;) {
            span_t *s = radix_span(seg->base + (i << LG_PAGE));
            i += s->npages;
            if (s->kind == SPAN_FREE && s->state == RUN_BUSY && !in_batches(s, live, nlive))
                list_push_front(&orphans, &s->lru);
        }
    list_node_t *n;
    while ((n = list_pop_front(&orphans)) != NULL) {
        span_t *s = list_item(n, span_t, lru);
        ph->busy_pages -= s->npages;
        retain(ph, s);
    }
    charge_sync(ph);
}

/* A run ends clean only if the kernel zeroed all of it; a lazy purge
 * leaves it muzzy; a refused or partial one (kernel pages larger than
 * ours, hugetlb edges) leaves it retained, out of decay's way. */
size_t ph_purge_finish(page_heap_t *ph, purge_batch_t *b, uint64_t now_ns)
{
    size_t released = 0;
    for (unsigned i = 0; i < b->n; i++) {
        const purge_item_t *it = &b->item[i];
        span_t *r = it->run;
        size_t pages = it->bytes >> LG_PAGE;
        dpm_assert(r->state == RUN_BUSY);
        ph->busy_pages -= r->npages;
        ph->npurge_calls++;
        if (it->got == PURGE_NONE) {
            retain(ph, r);
            continue;
        }
        released += pages;
        bool whole = it->from == r->start && it->bytes == span_bytes(r);
        if (it->got == PURGE_ZEROED && whole) {
            r->state = RUN_CLEAN;
            ph->npurged_now += pages;
        } else if (it->lazy) {
            r->state = RUN_MUZZY;
            ph->npurged_lazy += pages;
        } else {
            r->state = RUN_RETAINED;
            ph->nretained++;
            ph->npurged_now += pages;
        }
        r->freed_at_ns = now_ns;
        settle(ph, r);
    }
    b->n = 0;
    charge_sync(ph);
    return released;
}

size_t ph_decay(page_heap_t *ph, uint64_t now_ns, int64_t dirty_ms, int64_t muzzy_ms)
{
    purge_batch_t batch;
    size_t released = 0;
    /* Ends: every pass moves the runs it takes along (dirty -> muzzy ->
     * clean or retained), stamped with now, so a muzzy run made here is
     * due again only if muzzy_ms is 0, and then it leaves decay. */
    for (;;) {
        ph_purge_take(ph, now_ns, dirty_ms, muzzy_ms, SIZE_MAX, &batch);
        if (batch.n == 0)
            return released;
        ph_purge_run(&batch);
        released += ph_purge_finish(ph, &batch, now_ns);
    }
}

/* ---- invariant check --------------------------------------------------- */

static bool check_fail(const char *rule)
{
    dpm_warn3("page heap check failed: ", rule, NULL);
    return false;
}

static bool check_span_mapping(const span_t *s)
{
    for (size_t i = 0; i < s->npages; i++) {
        uintptr_t e = radix_entry(s->start + (i << LG_PAGE));
        bool end_page = i == 0 || i + 1 == s->npages;
        if (s->kind == SPAN_SLAB || end_page ? radix_entry_span(e) != s : e != 0)
            return check_fail("page map entry breaks the mapping rule");
        if (e != 0 && e != span_entry(s))
            return check_fail("page map tag differs from the span's tcache_class");
    }
    return true;
}

static bool check_segment(const page_heap_t *ph, const segment_t *seg, size_t *active, size_t *busy)
{
    size_t free_pages = 0;
    const span_t *prev = NULL;
    for (size_t i = seg->first_page; i < seg->npages;) {
        const span_t *s = radix_span(seg->base + (i << LG_PAGE));
        if (s == NULL || s->start != seg->base + (i << LG_PAGE) || s->seg != seg || s->npages == 0)
            return check_fail("spans do not tile the segment");
        if (!check_span_mapping(s))
            return false;
        if (s->kind == SPAN_FREE) {
            free_pages += s->npages;
            if (s->state == RUN_BUSY)
                *busy += s->npages;
            else if (s->state >= RUN_NSTATES)
                return check_fail("free run of unknown state");
            else if (prev != NULL && prev->kind == SPAN_FREE && prev->state == s->state)
                return check_fail("two free runs of one state left uncoalesced");
        } else if (s->kind == SPAN_SLAB || s->kind == SPAN_LARGE) {
            *active += s->npages;
        } else {
            return check_fail("span of unknown kind");
        }
        if (s->arena != ph->arena)
            return check_fail("span of another arena");
        prev = s;
        i += s->npages;
    }
    if (free_pages != seg->free_pages)
        return check_fail("segment free-page count is wrong");
    return true;
}

/* The decay lists hold exactly the dirty and muzzy runs, oldest first as
 * far as splits and merges keep it (merged runs blend their times). */
static bool check_lru(const page_heap_t *ph, unsigned st)
{
    long n = list_check(&ph->lru[st]);
    if (n < 0)
        return check_fail("broken decay list back link or tail");
    list_for_each(const span_t, r, &ph->lru[st], lru)
        if (r->kind != SPAN_FREE || r->state != st)
            return check_fail("decay list holds a run of another state");
    if ((size_t)n != ph->free_runs[st].nruns)
        return check_fail("decay list and index disagree");
    return true;
}

bool ph_check(page_heap_t *ph)
{
    for (int st = 0; st < RUN_NSTATES; st++)
        if (!runs_check(&ph->free_runs[st], (uint8_t)st))
            return false;
    if (!check_lru(ph, RUN_DIRTY) || !check_lru(ph, RUN_MUZZY))
        return false;
    size_t active = 0, busy = 0, n = 0;
    if (list_check(&ph->segments) < 0)
        return check_fail("broken segment list link");
    list_for_each(const segment_t, seg, &ph->segments, link) {
        n++;
        if (!radix_covered(seg->base) || !radix_covered(seg->base + seg->size - 1) || radix_span(seg->base) != NULL)
            return check_fail("segment missing from the address map");
        if (!check_segment(ph, seg, &active, &busy))
            return false;
    }
    if (n != ph->nsegments)
        return check_fail("segment count is wrong");
    size_t charged = ph->options.sourced ? 0 : (ph->mapped_bytes >> LG_PAGE) - ph->free_runs[RUN_CLEAN].npages;
    if (ph->charged_pages != charged)
        return check_fail("memory limit charge is not mapped minus clean pages");
    if (active != ph->active_pages)
        return check_fail("active page count is wrong");
    if (busy != ph->busy_pages)
        return check_fail("busy page count is wrong");
    return true;
}

/* Makes every page of ph's slabs and large blocks resident: a reserve's
 * promise (allocations take no fault) covers the blocks of slabs made
 * before it, which a CPU cache's fill hands out untouched. MADV_POPULATE_WRITE
 * only: these pages are live, so the touch fallback of os_prefault, a read
 * and a write back, could undo another thread's store. */
void ph_populate_active(page_heap_t *ph)
{
    list_for_each(const segment_t, seg, &ph->segments, link) {
        for (size_t i = seg->first_page; i < seg->npages;) {
            const span_t *s = radix_span(seg->base + (i << LG_PAGE));
            if (s->kind == SPAN_SLAB || s->kind == SPAN_LARGE)
                os_populate((void *)s->start, s->npages << LG_PAGE);
            i += s->npages;
        }
    }
}

/* ---- fork -------------------------------------------------------------- */

void pages_prefork(void) { mutex_lock(&radix_write_lock); }
void pages_postfork_parent(void) { mutex_unlock(&radix_write_lock); }
void pages_postfork_child(void) { mutex_init(&radix_write_lock); }
