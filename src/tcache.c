/*
 * tcache.c - slow halves of the thread cache (see tcache.h), the size ->
 * bin-offset table, the tags the arenas give cached classes, the
 * counters of exited threads' caches, and the per-thread state both front
 * ends start from (tls_thread: the thread's cache and the CPU-cache table
 * its sequences index, tcache.h).
 */
#include "tcache.h"
#include "cpu_cache.h"
#include "numa.h"
#include "os.h"
#include "conf.h"
#include "error.h"
#include "global.h"

#include <errno.h>
#include <string.h>

/* Not in .bss: its leaf_key must match no pointer (free_fast reads it). */
__thread thread_hot_t tls_thread = {
    .leaf_key = TC_NO_LEAF, .tcache = &tcache_empty, .cpu_table = cpu_cache_none_table, .pop_table = cpu_cache_none_table};
__thread arena_t *tls_arena;
__thread uint8_t tls_state;
/* All bins zero: empty and full. */
tcache_t tcache_empty;

static dpm_mutex_t tcaches_lock = DPM_MUTEX_INITIALIZER;
static list_t tcaches_live;       /* every thread's cache, for stats and fork */
static list_t tcaches_exited;     /* caches of exited threads, for reuse */
/* Counters of exited threads' caches by arena index, made at the first
 * exit from that arena (metadata, never freed); under tcaches_lock. */
static tc_exited_t *exited_by_arena[MAX_ARENAS];

unsigned tcache_classes_for(size_t tcache_max)
{
    if (tcache_max == 0)
        return 0;
    unsigned n = sc_compute(tcache_max) + 1;
    if (sc_size(n - 1) > tcache_max)
        n--;
    return n > NSMALL ? NSMALL : n;   /* large classes: the large cache */
}

static unsigned nslots_for_class(unsigned c)
{
    unsigned n = sc_table[c].slab_objs << opt.lg_tcache_nslots_mul;
    if (n < opt.tcache_nslots_small_min)
        n = opt.tcache_nslots_small_min;
    if (n > opt.tcache_nslots_small_max)
        n = opt.tcache_nslots_small_max;
    return n > TC_NCACHED_LIMIT ? TC_NCACHED_LIMIT : n;
}

/* A page source's callback may not change its own thread's cache or
 * binding (thread.arena, thread.tcache.enabled, .flush, .ncached_max,
 * a reset that flushes it): the call that ran the callback may be in the
 * middle of a fill, a flush or a rebind of that very cache. */
static bool in_source_callback(void) { return ph_source_calls_here != 0; }

/* ---- bin layout -------------------------------------------------------- */

static uint16_t low16(void **p) { return (uint16_t)(uintptr_t)p; }

/* Bin c of tc, empty, with slots ending at top, holding at most ncached_max. */
static void bin_layout(tcache_t *tc, unsigned c, void **top, unsigned ncached_max)
{
    tc_bin_t *b = &tc->bins[c];
    tc->stats[c].fresh = 0;
    b->ncached_max = (uint16_t)ncached_max;
    /* the marks before head, which publishes them: another thread's
     * lookup (bin_holds) that reads a head reads its top */
    __atomic_store_n(&b->top_lo, low16(top), __ATOMIC_RELAXED);
    b->low_lo = low16(top);
    b->full_lo = low16(top - ncached_max);
    __atomic_store_n(&b->head, top, __ATOMIC_RELEASE);   /* NULL: no slots, empty and full */
    b->hot = top != NULL ? *top : NULL;
}

void tcache_prefault(void)
{
    if (tls_state != THREAD_CACHED || tcache_mine() == &tcache_empty)
        return;
    tcache_t *tc = tls_thread.tcache;
    os_populate(tc, sizeof(*tc));
    for (unsigned c = 0; c < g.tcache_nclasses; c++)
        if (tc->stats[c].cap != 0)
            os_populate(tc_bin_top(&tc->bins[c]) - tc->stats[c].cap, (tc->stats[c].cap + 1) * sizeof(void *));
}

/* Set at init when the CPU caches hold the small blocks: a thread's cache
 * gets slots for its small bins only when the thread uses them
 * (tcache_ensure_slots), so that a thread costs no slot memory. */
static bool small_slots_lazy;

void tcache_set_small_slots_lazy(bool lazy) { small_slots_lazy = lazy; }

/* Gives bin c of tc its default number of slots, empty. */
static bool give_slots(tcache_t *tc, unsigned c)
{
    unsigned n = nslots_for_class(c);
    /* one more slot: *top stays NULL, so a pop of the empty bin may read it */
    void **slots = base_alloc((n + 1) * sizeof(void *), CACHELINE);
    if (slots == NULL)
        return false;
    tc->stats[c].cap = n;
    bin_layout(tc, c, slots + n, n);
    return true;
}

static bool tcache_alloc_slots(tcache_t *tc)
{
    for (unsigned c = 0; c < g.tcache_nclasses; c++) {
        if (small_slots_lazy) {
            tc->stats[c].cap = 0;
            bin_layout(tc, c, NULL, 0);
        } else if (!give_slots(tc, c)) {
            return false;
        }
    }
    return true;
}

bool tcache_ensure_slots(tcache_t *tc)
{
    for (unsigned c = 0; c < g.tcache_nclasses; c++)
        if (tc->stats[c].cap == 0 && !give_slots(tc, c))
            return false;
    return true;
}

static void tcache_set_arena(tcache_t *tc, arena_t *a)
{
    __atomic_store_n(&tc->arena, a, __ATOMIC_RELAXED);   /* statistics read it from other threads */
    tc->arena_manual = a != NULL && a->manual;
}

/* A cache with fresh counters; slots of a reused cache are kept. */
static void tcache_reset(tcache_t *tc, arena_t *arena)
{
    for (unsigned c = 0; c < g.tcache_nclasses; c++) {
        tc_bin_t *b = &tc->bins[c];
        uint32_t cap = tc->stats[c].cap;
        tc->stats[c] = (tc_bin_stats_t){.cap = cap};
        bin_layout(tc, c, cap != 0 ? tc_bin_top(b) : NULL, nslots_for_class(c) <= cap ? nslots_for_class(c) : cap);
        __atomic_store_n(&b->nrequests, 0, __ATOMIC_RELAXED);
    }
    tc->samples = (slow_samples_t){0};
    for (unsigned k = 0; k < TC_PHASED_STASHES; k++)
        tc->stashes[k] = (phased_stash_t){0};
    tcache_set_arena(tc, arena);
    tc->events = tc->gc_next = 0;
    tc->large_tuned = false;
}

/* The key's value makes its destructor run at thread exit: the thread's
 * cache, or &tcache_empty for a thread that has an arena but no cache. */
static void ensure_exit_hook(void)
{
    if (pthread_getspecific(g.thread_key) == NULL)
        pthread_setspecific(g.thread_key, &tcache_empty);
}

/* nthreads counts the threads whose allocations go to an arena (assigned
 * at its first allocation or bound with thread.arena), cached or not. A thread leaves
 * its arena only once its cache holds none of the arena's blocks: a
 * manual arena can be reset or destroyed as soon as its count allows. */
static void leave_thread_arena(void)
{
    arena_t *old = tls_arena;
    tls_arena = NULL;
    if (old != NULL)
        arena_unbind_thread(old);
}

/* A bound thread's arena is never destroyed under it (destroy waits for
 * nthreads 0), so tls_arena, once set, stays valid. */
arena_t *thread_arena(void)
{
    arena_t *a = tls_arena;
    if (likely(a != NULL))
        return a;
    /* numa:true: the arena of the node the thread runs on now, chosen
     * once (a thread that migrates keeps it; thread.arena rebinds) */
    a = opt.numa ? numa_thread_arena() : NULL;
    bool counted = false;
    if (a == NULL) {
        /* past the exit hook nothing would uncount the thread */
        a = arena_choose(tls_state != THREAD_EXITING);
        counted = true;
    }
    if (tls_state == THREAD_EXITING || a == NULL)
        return a;
    /* automatic and node arenas are never destroyed: no need for arena_bind_thread */
    if (!counted)
        __atomic_fetch_add(&a->nthreads, 1, __ATOMIC_RELAXED);
    tls_arena = a;
    ensure_exit_hook();
    return a;
}

static void attach(tcache_t *tc);

/* A cache for the calling thread, on the live list and its exit key
 * (an exited thread's, reused, or a new one), or NULL without memory. */
static tcache_t *cache_make(arena_t *arena)
{
    mutex_lock(&tcaches_lock);
    tcache_t *tc = list_item(list_pop_front(&tcaches_exited), tcache_t, link);
    mutex_unlock(&tcaches_lock);
    if (tc == NULL) {
        tc = base_alloc(sizeof(tcache_t), CACHELINE);
        if (tc == NULL || !tcache_alloc_slots(tc))
            return NULL;
    }
    tcache_reset(tc, arena);
    mutex_lock(&tcaches_lock);
    list_push_front(&tcaches_live, &tc->link);
    mutex_unlock(&tcaches_lock);
    pthread_setspecific(g.thread_key, tc);
    return tc;
}

/* Where the CPU caches hold the small blocks (small_slots_lazy), a
 * thread starts caching with no cache of its own: it costs no memory
 * until it asks for what only its own cache gives (tcache_make_own). */
bool tcache_create_for_thread(void)
{
    if (tls_state != THREAD_NEW || !opt.tcache || (g.tcache_nclasses == 0 && g.secure_nclasses == 0) ||
        mutex_all_held_here)
        return false;
    arena_t *arena = thread_arena();   /* also arms the exit hook */
    if (arena == NULL)
        return false;
    tcache_t *tc = NULL;
    if (!small_slots_lazy && (tc = cache_make(arena)) == NULL)
        return false;
    tls_state = THREAD_CACHED;
    if (tc != NULL)
        attach(tc);
    return true;
}

tcache_t *tcache_make_own(void)
{
    if (tls_state != THREAD_CACHED)
        return NULL;
    if (tcache_mine() != &tcache_empty)
        return tcache_mine();
    arena_t *arena = thread_arena();
    tcache_t *tc = arena != NULL && !mutex_all_held_here ? cache_make(arena) : NULL;
    if (tc == NULL)
        return NULL;
    attach(tc);
    return tc;
}

/* The calling thread starts using its cache tc. */
static void attach(tcache_t *tc) { tls_thread.tcache = tc; }

/* ---- the size -> bin table --------------------------------------------- */

uint16_t tc_bin_offset_of_size[TC_LOOKUP_MAX + 1];

/* Like sizeclass's lookup table, filled before main by a constructor (the
 * fast path of threads racing the first initialisation reads settled
 * values) and at init (allocations made before constructors run); the
 * last entry, written last and never 0, says it is done. */
void tcache_fill_lookup(void)
{
    if (__atomic_load_n(&tc_bin_offset_of_size[TC_LOOKUP_MAX], __ATOMIC_ACQUIRE) != 0)
        return;
    for (size_t size = 0; size <= TC_LOOKUP_MAX; size++)
        __atomic_store_n(&tc_bin_offset_of_size[size], (uint16_t)(sc_compute(size) * sizeof(tc_bin_t)),
                         __ATOMIC_RELEASE);
}

__attribute__((constructor)) static void fill_lookup_before_main(void) { tcache_fill_lookup(); }

void tcache_init_bin_tags(void)
{
    uint8_t tags[ARENA_TAG_SETS][NSMALL];
    for (unsigned c = 0; c < NSMALL; c++) {
        bool cached = c < g.tcache_nclasses;
        tags[0][c] = cached ? (uint8_t)c : TC_NONE;
        tags[1][c] = cached ? (uint8_t)(c + TC_MANUAL_BASE) : TC_NONE;
        for (unsigned k = 0; k < TC_NODE_GROUPS; k++)
            tags[2 + k][c] = cached ? (uint8_t)tc_node_class(k, c) : TC_NONE;
    }
    arena_set_bin_tags(tags);
}

/* ---- the free key ------------------------------------------------------ */

/* True if p sits in [head, top) of bin `bin` of tc. Another thread's bin
 * is read racily: its owner pushes and pops without a lock. A block that
 * a correct program is freeing is in no cache, so a racy view can miss a
 * double free that is under way in another thread, never invent one. */
static bool bin_holds(const tcache_t *tc, unsigned bin, const void *p)
{
    const tc_bin_t *b = &tc->bins[bin];
    void **head = __atomic_load_n(&b->head, __ATOMIC_ACQUIRE);   /* pairs with tc_bin_push */
    if (head == NULL)
        return false;
    uint16_t top_lo = __atomic_load_n(&b->top_lo, __ATOMIC_RELAXED);
    void **top = (void **)((uintptr_t)head + (uint16_t)(top_lo - (uint16_t)(uintptr_t)head));
    for (void **h = head; h < top; h++)
        if (__atomic_load_n(h, __ATOMIC_RELAXED) == p)
            return true;
    return false;
}

bool tcache_holds_block(const void *p, unsigned bin)
{
    tcache_t *own = tcache_mine();
    if (own != &tcache_empty && bin_holds(own, bin, p))
        return true;
    bool found = false;
    mutex_lock(&tcaches_lock);
    list_for_each(const tcache_t, tc, &tcaches_live, link) {
        if (tc != own && bin_holds(tc, bin, p)) {
            found = true;
            break;
        }
    }
    mutex_unlock(&tcaches_lock);
    return found;
}

/* ---- fill and flush ---------------------------------------------------- */

static void send_home(void **objs, unsigned n, unsigned c);

/* Most blocks one fill brings: its buffers are on the stack, and malloc
 * must fit a signal handler's alternate stack (docs/design.md, "Stack"). */
#define TC_FILL_MAX 64

/* The rest of a fill of bin c beyond its first TC_FILL_MAX blocks, a
 * chunk at a time on top of what the first pushed (outside the slots
 * tc_bin_stats_t.fresh counts, so their pops clear the key as any
 * push's do), keyed blocks on top; stops when the source gives less
 * than asked or the bin has no room (the rest goes home). */
static void fill_more(tcache_t *tc, unsigned c, unsigned left)
{
    tc_bin_t *b = &tc->bins[c];
    void *batch[TC_FILL_MAX];
    uint8_t keyed[TC_FILL_MAX];
    while (left > 0) {
        unsigned ask = left < TC_FILL_MAX ? left : TC_FILL_MAX;
        unsigned got = arena_bin_fill(&tc->arena->bins[c], batch, ask, keyed);
        unsigned count = tc_bin_count(b), room = b->ncached_max > count ? b->ncached_max - count : 0;
        unsigned pushed = 0;
        for (int pass = 0; pass < 2; pass++)   /* unkeyed, then keyed: popped first */
            for (unsigned i = got; i-- > 0;)
                if (keyed[i] == pass && pushed < room) {
                    tc_bin_push(b, batch[i]);
                    batch[i] = NULL;
                    pushed++;
                }
        if (pushed < got) {   /* a callback's pushes took the room: the rest home */
            unsigned n = 0;
            for (unsigned i = 0; i < got; i++)
                if (batch[i] != NULL)
                    batch[n++] = batch[i];
            send_home(batch, n, c);
            return;
        }
        if (got < ask)
            return;
        left -= got;
    }
}

void *tcache_alloc_miss(tcache_t *tc, unsigned c)
{
    tc_bin_t *b = &tc->bins[c];
    counter_add(&tc->stats[c].nmisses, 1);
    unsigned want = b->ncached_max / 2 + 1;
    void *batch[TC_FILL_MAX];
    unsigned ask = want < ARRAY_LEN(batch) ? want : ARRAY_LEN(batch);
    uint8_t keyed[ARRAY_LEN(batch)];
    unsigned got = arena_bin_fill(&tc->arena->bins[c], batch, ask, keyed);
    if (got == 0)
        return NULL;
    counter_add(&tc->stats[c].nfills, 1);
    /* Blocks that a flush sent home hold the key (a double free of one
     * that this fill brings back must still be found), and go first, each
     * cleared when handed out; the others hold none, and none of them is
     * written here or when popped: a handout that stored into each block
     * would pull a cold line (and its page's TLB entry) per block of a big
     * class (docs/design.md, "The free key and fills"). batch[0] goes to
     * the caller; the rest are pushed so that, within each group, the
     * lowest addresses are popped first. */
    void *order[ARRAY_LEN(batch)];
    unsigned nkeyed = 0, k = 0;
    for (unsigned i = 0; i < got; i++)
        if (keyed[i])
            order[k++] = batch[i];
    nkeyed = k;
    for (unsigned i = 0; i < got; i++)
        if (!keyed[i])
            order[k++] = batch[i];
    /* a page source's callback that the fill ran may have pushed blocks
     * meanwhile: what no longer fits goes home (after the pushes: sending
     * may run callbacks again, whose frees see a full bin as such) */
    unsigned count = tc_bin_count(b), room = b->ncached_max > count ? b->ncached_max - count : 0;
    unsigned push = got - 1 < room ? got - 1 : room;
    bool was_empty = count == 0;
    for (unsigned i = push + 1; i-- > 1;)
        tc_bin_push(b, order[i]);
    if (push == got - 1 && got == ask && want > got)
        fill_more(tc, c, want - got);
    b->low_lo = low16(b->head);
    unsigned clean = got - (nkeyed > 1 ? nkeyed : 1);   /* unkeyed blocks pushed, at the top */
    tc->stats[c].fresh = was_empty ? (uint16_t)(clean * sizeof(void *)) : 0;
    if (nkeyed != 0)
        tc_block_handed_out(order[0]);
    else
        DPM_ANN_OPEN_KEY(order[0]);
    if (push < got - 1)
        send_home(order + 1 + push, got - 1 - push, c);
    return order[0];
}

/* Returns n cached blocks of class c to their slabs or page heaps. Small
 * blocks keep the free key (their slab marks them, span_t.keyed_bits, so
 * a double free after a fill brought one back is still found). */
static void send_home(void **objs, unsigned n, unsigned c)
{
    if (c < NSMALL) {
        arena_bin_flush(objs, n);
        return;
    }
    /* page runs keep no record of the key: it leaves with the block */
    for (unsigned i = 0; i < n; i++) {
        DPM_ANN_OPEN_KEY(objs[i]);
        *tc_key_word(objs[i]) = 0;
        DPM_ANN_CLOSE_KEY(objs[i]);
        arena_free_large(span_of(objs[i]));
    }
}

/* Returns the n oldest blocks of bin c (the end of the stack next to top)
 * to their homes and slides the rest up. Blocks leave the bin before they
 * are sent home: sending home may run a page source's callbacks (user
 * code) on this thread, and those may malloc, free or flush this very
 * cache (arena.<i>.purge flushes the caller's small bins). So whenever
 * user code can run, the bin holds exactly the blocks that are cached,
 * and this loop goes on until the bin is down to the count it keeps,
 * whatever such calls did to it meanwhile. At most FLUSH_CHUNK blocks
 * leave per step (a bounded stack buffer; a bin holds up to
 * TC_NCACHED_LIMIT). */
#define FLUSH_CHUNK 64

/* Moves the k oldest blocks of bin c (k <= its count) to out and slides
 * the rest up, leaving the bin whole with what it still holds. */
static void take_oldest(tcache_t *tc, unsigned c, unsigned k, void **out)
{
    tc_bin_t *b = &tc->bins[c];
    unsigned count = tc_bin_count(b);
    void **top = tc_bin_top(b);
    memcpy(out, top - k, k * sizeof(void *));
    unsigned rest = count - k;
    /* slide the rest up; slots are read by other threads (tcache.h) */
    for (unsigned i = rest; i-- > 0;)
        __atomic_store_n(&top[-(ptrdiff_t)rest + i], b->head[i], __ATOMIC_RELAXED);
    /* release: a reader that sees the new head sees the slid slots */
    __atomic_store_n(&b->head, top - rest, __ATOMIC_RELEASE);
    b->hot = top[-(ptrdiff_t)rest];
    b->low_lo = low16(b->head);
    tc->stats[c].fresh = 0;   /* slid slots hold pushed blocks */
}

/* Sends at most n of bin c's oldest blocks home. A page source's callback
 * that send_home runs may push blocks into this very bin (its frees, in
 * a thread bound to the source's arena): the loop counts what it took,
 * so a callback that frees as fast as the flush sends home cannot keep
 * it going. */
static void flush_oldest(tcache_t *tc, unsigned c, unsigned n)
{
    tc_bin_t *b = &tc->bins[c];
    unsigned count = tc_bin_count(b);
    if (n > count)
        n = count;
    if (n == 0)
        return;
    void *out[FLUSH_CHUNK];
    while (n > 0 && (count = tc_bin_count(b)) > 0) {
        unsigned k = n < count ? n : count;
        if (k > FLUSH_CHUNK)
            k = FLUSH_CHUNK;
        take_oldest(tc, c, k, out);
        send_home(out, k, c);
        n -= k;
    }
    counter_add(&tc->stats[c].nflushes, 1);
}

void tcache_free_full(tcache_t *tc, unsigned c, void *p)
{
    tc_bin_t *b = &tc->bins[c];
    if (b->ncached_max == 0) {   /* holds nothing (tuned so): straight home */
        send_home(&p, 1, c);
        return;
    }
    flush_oldest(tc, c, (b->ncached_max + 1) / 2);
    if (tc_bin_full(b) || b->ncached_max == 0) {   /* a callback meanwhile retuned the bin */
        send_home(&p, 1, c);
        return;
    }
    tc_bin_push(b, p);
}

/* Empties the stash before its blocks go home (a callback run by the
 * flush may use the stashes; see flush_oldest). */
static unsigned stash_take(phased_stash_t *st, void **out)
{
    unsigned n = st->n;
    memcpy(out, st->objs, n * sizeof(void *));
    st->n = 0;
    st->bin = NULL;
    __atomic_store_n(&st->bytes, 0, __ATOMIC_RELAXED);
    return n;
}

static void stash_flush(phased_stash_t *st)
{
    void *out[TC_PHASED_BATCH];
    unsigned n = stash_take(st, out);
    if (n != 0)
        arena_bin_flush(out, n);
}

void *tcache_phased_alloc(tcache_t *tc, bin_t *bin)
{
    /* A page source's callback takes its block straight from the bin: the
     * call that ran it may be in the middle of a stash's flush or fill,
     * with the stash's bin and blocks about to be rewritten. */
    if (in_source_callback()) {
        void *p;
        if (arena_bin_fill(bin, &p, 1, NULL) != 1)
            return NULL;
        if (bin->tcache_class != TC_NONE)
            tc_block_handed_out(p);
        return p;
    }
    phased_stash_t *st = NULL;
    for (unsigned k = 0; k < TC_PHASED_STASHES && st == NULL; k++)
        if (tc->stashes[k].bin == bin)
            st = &tc->stashes[k];
    if (st == NULL) {
        st = &tc->stashes[tc->stash_next++ % TC_PHASED_STASHES];
        stash_flush(st);
        st->bin = bin;
    }
    if (st->n == 0) {
        /* take them in address order: the lowest comes out first */
        void *batch[TC_PHASED_BATCH];
        size_t want = bin->size_class >= NSMALL ? 1 : TC_STASH_BYTES / bin->objsize;
        want = want == 0 ? 1 : want > TC_PHASED_BATCH ? TC_PHASED_BATCH : want;
        unsigned got = arena_bin_fill(bin, batch, (unsigned)want, NULL);
        for (unsigned i = 0; i < got; i++)
            st->objs[i] = batch[got - 1 - i];
        st->n = got;
        if (got == 0)
            return NULL;
    }
    st->used = true;
    /* the blocks left are the thread cache's (stats.tcache_bytes), not
     * the program's */
    __atomic_store_n(&st->bytes, (size_t)(st->n - 1) * bin->objsize, __ATOMIC_RELAXED);
    void *p = st->objs[--st->n];
    /* a CPU cache's flush may have sent a tagged bin's block home with
     * the free key (an untagged bin's never hold it, and may lie at odd
     * addresses, where the key's word would be misaligned) */
    if (bin->tcache_class != TC_NONE)
        tc_block_handed_out(p);
    return p;
}

void tcache_flush_all(tcache_t *tc)
{
    for (unsigned c = 0; c < g.tcache_nclasses; c++)
        flush_oldest(tc, c, tc_bin_count(&tc->bins[c]));
    for (unsigned k = 0; k < TC_PHASED_STASHES; k++)
        stash_flush(&tc->stashes[k]);
}

/* The calling thread's cache tc, emptied by its owner so that it holds no
 * block afterwards: the flush may run a page source's callbacks on this
 * thread, and what they allocate and free must not land in the cache
 * being emptied (a bin refilled from the arena the thread is about to
 * leave or reset would outlive the flush). The thread runs uncached
 * meanwhile, as one whose cache is disabled; the caller puts the cache
 * back (cache_resume) or leaves it disabled. */
static void cache_suspend(void)
{
    __atomic_store_n(&tls_thread.tcache, &tcache_empty, __ATOMIC_RELAXED);
    tls_state = THREAD_NOCACHE;
}

static void flush_own_uncached(tcache_t *tc)
{
    cache_suspend();
    tcache_flush_all(tc);
}

static void cache_resume(tcache_t *tc)
{
    tls_state = THREAD_CACHED;
    attach(tc);
}

int tcache_flush_mine(void)
{
    if (in_source_callback())
        return EBUSY;
    if (tls_state != THREAD_CACHED || tcache_mine() == &tcache_empty)
        return 0;
    tcache_t *tc = tcache_mine();
    flush_own_uncached(tc);
    cache_resume(tc);
    return 0;
}

/* Blocks the bin held unused since its last trim: the ones below the
 * low-water mark. */
static unsigned unused_since_trim(const tc_bin_t *b)
{
    uint16_t span = (uint16_t)(b->top_lo - b->low_lo);
    return span / sizeof(void *);
}

void tcache_event(tcache_t *tc)
{
    if (++tc->events % TC_GC_EVERY != 0 || g.tcache_nclasses == 0)
        return;
    unsigned c = tc->gc_next++ % g.tcache_nclasses;
    if (c == 0) {   /* once per round over the bins: idle stashes go home */
        for (unsigned k = 0; k < TC_PHASED_STASHES; k++) {
            phased_stash_t *st = &tc->stashes[k];
            if (!st->used)
                stash_flush(st);
            st->used = false;
        }
    }
    tc_bin_t *b = &tc->bins[c];
    unsigned idle = unused_since_trim(b);
    if (idle > tc_bin_count(b))
        idle = tc_bin_count(b);
    flush_oldest(tc, c, (idle * 3 + 3) / 4);
    /* slots from the old low water up were not pushed to since the fill;
     * those below it may have been, and the new mark would let low-water
     * pops reach them */
    uint16_t unpushed = (uint16_t)(b->top_lo - b->low_lo);
    if (tc->stats[c].fresh > unpushed)
        tc->stats[c].fresh = unpushed;
    b->low_lo = low16(b->head);
}

/* ---- binding and tuning ------------------------------------------------ */

/* The arena a rebind under way has counted the thread in, until it is
 * tls_arena: a fork from a page source's callback during the rebind's
 * flush leaves the child bound to both (tcaches_postfork_child). */
static __thread arena_t *tls_arena_joining;

/* Counted in a first (refused if a is gone), then the cache gives back
 * the old arena's blocks, then the old arena is left: at no point does
 * the cache hold blocks of an arena that does not count the thread. */
int thread_bind_arena(arena_t *a)
{
    if (in_source_callback())
        return EBUSY;
    if (!arena_bind_thread(a))
        return EINVAL;
    tls_arena_joining = a;
    /* a thread without a cache of its own makes one on the new arena
     * (thread_front_keep_own) */
    if (tls_state == THREAD_CACHED && tcache_mine() != &tcache_empty) {
        tcache_t *tc = tcache_mine();
        flush_own_uncached(tc);
        tcache_set_arena(tc, a);
        cache_resume(tc);
    } else if (tls_state == THREAD_NOCACHE) {
        tcache_t *tc = pthread_getspecific(g.thread_key);
        if (tc != NULL && tc != &tcache_empty)
            tcache_set_arena(tc, a);
    }
    leave_thread_arena();
    tls_arena = a;
    tls_arena_joining = NULL;
    ensure_exit_hook();
    return 0;
}

int thread_tcache_enable(bool on)
{
    if (in_source_callback())
        return EBUSY;
    /* The key keeps the cache while it is disabled: stats, thread exit. */
    tcache_t *tc = tls_state == THREAD_NEW ? NULL : pthread_getspecific(g.thread_key);
    if (tc == &tcache_empty)
        tc = NULL;
    if (!on) {
        if (tls_state == THREAD_CACHED && tc != NULL)
            flush_own_uncached(tc);
        if (tls_state != THREAD_EXITING)
            tls_state = THREAD_NOCACHE;
        return 0;
    }
    if (tls_state == THREAD_NOCACHE && tc != NULL) {
        tls_state = THREAD_CACHED;
        attach(tc);
    } else if (tls_state == THREAD_NOCACHE || tls_state == THREAD_NEW) {
        tls_state = THREAD_NEW;
        tls_thread.leaf_key = TC_NO_LEAF;   /* the next free may make the cache */
        tcache_create_for_thread();
    }
    return 0;
}

int thread_ncached_max_get(size_t size, size_t *out)
{
    if (size == 0 || size > ALLOC_MAX)
        return EINVAL;
    unsigned c = sc_compute(size);
    if (tls_state != THREAD_CACHED)
        *out = 0;
    else if (c < NSMALL)
        /* a bin without slots yet (tcache_ensure_slots) gets the default */
        *out = c >= g.tcache_nclasses           ? 0
               : tcache_mine()->stats[c].cap == 0 ? nslots_for_class(c)
                                                  : tcache_mine()->bins[c].ncached_max;
    else if (large_cache_default_slots(size) == 0)
        *out = 0;
    else
        *out = tcache_mine()->large_tuned ? tcache_mine()->large_max[large_cache_class_index(size)]
                                          : large_cache_default_slots(size);
    return 0;
}

/* The thread's own limits for the large classes with a size in [lo, hi]
 * (the others keep tcache_nslots_large), applied by its puts into the
 * CPUs' large caches. */
static void large_limits_set(tcache_t *tc, size_t lo, size_t hi, unsigned n)
{
    for (unsigned k = 0; k < LARGE_CACHE_CLASSES; k++) {
        size_t size = sc_size(NSMALL + k);
        if (!tc->large_tuned)
            tc->large_max[k] = (uint8_t)large_cache_default_slots(size);
        if (size >= lo && size <= hi && large_cache_default_slots(size) != 0)
            tc->large_max[k] = (uint8_t)n;
    }
    tc->large_tuned = true;
}

int thread_ncached_max_set(size_t size_lo, size_t size_hi, unsigned n)
{
    if (size_lo == 0 || size_hi < size_lo || n > TC_NCACHED_LIMIT)
        return EINVAL;
    if (in_source_callback())
        return EBUSY;
    if (tls_state == THREAD_NEW)
        tcache_create_for_thread();
    if (tls_state != THREAD_CACHED)
        return EPERM;
    if (tcache_make_own() == NULL)
        return ENOMEM;
    /* A large cache holds LARGE_SLOTS_MAX blocks in all: a larger n for a
     * class it holds is refused before anything changes, never cut down
     * to what fits. */
    bool large = large_cache_range_cached(size_lo, size_hi);
    if (large && n > LARGE_SLOTS_MAX)
        return EINVAL;
    tcache_t *tc = tcache_mine();
    if (large)   /* each large class in the range: its own limit */
        large_limits_set(tc, size_lo, size_hi, n);
    /* uncached while a bin is emptied and laid out again: a page source's
     * callback run by the flush must not push blocks into it */
    cache_suspend();
    int err = 0;
    for (unsigned c = 0; c < g.tcache_nclasses && err == 0; c++) {
        if (sc_size(c) < size_lo || sc_size(c) > size_hi)
            continue;
        flush_oldest(tc, c, tc_bin_count(&tc->bins[c]));
        void **top = tc_bin_top(&tc->bins[c]);
        if (n > tc->stats[c].cap) {
            /* Grow the bin's slots; the old ones stay with the metadata. */
            void **slots = base_alloc((n + 1) * sizeof(void *), CACHELINE);
            if (slots == NULL) {
                err = ENOMEM;
                break;
            }
            tc->stats[c].cap = n;
            top = slots + n;
        }
        bin_layout(tc, c, top, n);
    }
    cache_resume(tc);
    return err;
}

/* ---- thread exit, stats, fork ------------------------------------------ */

/* The counters of an exiting cache live on with its arena's index, for
 * the arena's current life; tcaches_lock held. The thread is still bound
 * to the arena, so the arena is not destroyed and reused meanwhile.
 * Without metadata memory for the table the counters are dropped. */
static void absorb_stats(const tcache_t *tc)
{
    const arena_t *a = tc->arena;
    tc_exited_t *e = exited_by_arena[a->index];
    if (e == NULL) {
        e = base_alloc(sizeof(*e), CACHELINE);
        if (e == NULL)
            return;
        e->incarnation = a->incarnation;
        exited_by_arena[a->index] = e;
    }
    if (e->incarnation != a->incarnation) {
        memset(e, 0, sizeof(*e));
        e->incarnation = a->incarnation;
    }
    for (unsigned c = 0; c < g.tcache_nclasses; c++) {
        tc_totals_t *t = &e->totals[c];
        t->nrequests += tc->bins[c].nrequests;
        t->nmisses += tc->stats[c].nmisses;
        t->nfills += tc->stats[c].nfills;
        t->nflushes += tc->stats[c].nflushes;
    }
    e->samples.alloc_n += tc->samples.alloc_n;
    e->samples.alloc_cycles += tc->samples.alloc_cycles;
    e->samples.free_n += tc->samples.free_n;
    e->samples.free_cycles += tc->samples.free_cycles;
}

/* The cache the calling thread is flushing on its way out: a fork from a
 * page source's callback during that flush leaves the child's thread
 * still flushing it (tcaches_postfork_child keeps it live). */
static __thread tcache_t *tls_exiting_cache;

/* The cache is flushed and its counters absorbed before the thread
 * leaves its arena, which may be destroyed from then on. */
void tcache_thread_exit(void *arg)
{
    tcache_t *tc = arg;
    __atomic_store_n(&tls_thread.tcache, &tcache_empty, __ATOMIC_RELAXED);
    tls_state = THREAD_EXITING;
    if (tc != NULL && tc != &tcache_empty) {
        tls_exiting_cache = tc;
        tcache_flush_all(tc);
        mutex_lock(&tcaches_lock);
        absorb_stats(tc);
        list_remove(&tcaches_live, &tc->link);
        list_push_front(&tcaches_exited, &tc->link);
        mutex_unlock(&tcaches_lock);
        tls_exiting_cache = NULL;
    }
    leave_thread_arena();
}

void tcaches_for_each(void (*fn)(const tcache_t *, void *), void *arg)
{
    mutex_lock(&tcaches_lock);
    list_for_each(const tcache_t, tc, &tcaches_live, link)
        fn(tc, arg);
    mutex_unlock(&tcaches_lock);
}

void tcaches_for_each_exited(void (*fn)(unsigned arena_index, const tc_exited_t *, void *), void *arg)
{
    unsigned n = __atomic_load_n(&narenas_total, __ATOMIC_ACQUIRE);
    mutex_lock(&tcaches_lock);
    for (unsigned i = 0; i < n; i++)
        if (exited_by_arena[i] != NULL)
            fn(i, exited_by_arena[i], arg);
    mutex_unlock(&tcaches_lock);
}

/* Sends tc's small bins and phased stashes home; the bytes. The owner
 * only. */
static size_t flush_small(tcache_t *tc)
{
    size_t bytes = 0;
    for (unsigned c = 0; c < g.tcache_nclasses; c++) {
        unsigned n = tc_bin_count(&tc->bins[c]);
        bytes += (size_t)n * sc_size(c);
        flush_oldest(tc, c, n);
    }
    for (unsigned k = 0; k < TC_PHASED_STASHES; k++) {
        phased_stash_t *st = &tc->stashes[k];
        if (st->bin != NULL)
            bytes += (size_t)st->n * st->bin->objsize;
        stash_flush(st);
    }
    return bytes;
}

size_t tcache_reclaim_mine(void)
{
    /* Not from inside a page source's callback (one may ask for
     * arena.<i>.purge): the slabs the flush empties become runs whose
     * purge calls the source again, whose callback asks again, and so
     * on without end. The cache is flushed by the next call made outside. */
    if (tls_state != THREAD_CACHED || tcache_mine() == &tcache_empty || ph_source_calls_here != 0)
        return 0;
    return flush_small(tcache_mine());
}

/* The list lock: the child must not inherit it held. */
void tcaches_prefork(void) { mutex_lock(&tcaches_lock); }

void tcaches_postfork_parent(void) { mutex_unlock(&tcaches_lock); }

void tcaches_postfork_child(void)
{
    mutex_init(&tcaches_lock);
    /* Only the forking thread lives on. The other threads' small bins
     * may have been in the middle of a push or pop: those blocks are lost
     * to the child, as in every thread-caching allocator, and the caches
     * are reused empty. */
    tcache_t *survivor = tls_exiting_cache;
    if (tls_state == THREAD_CACHED || tls_state == THREAD_NOCACHE) {
        tcache_t *tc = pthread_getspecific(g.thread_key);
        if (tc != NULL && tc != &tcache_empty)
            survivor = tc;
    }
    list_t dead = tcaches_live;
    tcaches_live = (list_t){0};
    list_node_t *n;
    while ((n = list_pop_front(&dead)) != NULL) {
        tcache_t *tc = list_item(n, tcache_t, link);
        if (tc == survivor) {
            list_push_front(&tcaches_live, &tc->link);
            continue;
        }
        list_push_front(&tcaches_exited, &tc->link);
    }
    /* arenas_postfork_child zeroed the counts: the thread's own arena,
     * and the one a rebind under way counted it in, count it again */
    if (tls_arena != NULL)
        tls_arena->nthreads = 1;
    if (tls_arena_joining != NULL)   /* a rebind to its own arena counted it twice */
        tls_arena_joining->nthreads = tls_arena_joining == tls_arena ? 2 : 1;
}

/* For dpmalloc-stat (anchor.h): where the live caches and the exited
 * ones' counters are. */
extern const list_t *const anchor_ref_tcaches_live;
extern tc_exited_t *const *const anchor_ref_tcaches_exited;
const list_t *const anchor_ref_tcaches_live = &tcaches_live;
tc_exited_t *const *const anchor_ref_tcaches_exited = exited_by_arena;
