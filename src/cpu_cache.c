/*
 * cpu_cache.c - the slow halves of the CPU caches (see cpu_cache.h):
 * making a CPU's cache, locking it from its own CPU or from afar,
 * refilling and spilling bins through the transfer caches, draining.
 */
#include "cpu_cache.h"
#include "base.h"
#include "conf.h"
#include "global.h"
#include "numa.h"
#include "os.h"
#include "transfer.h"
#include "tcache.h"

#include <linux/futex.h>
#include <sched.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <string.h>

cpu_cache_t cpu_cache_locked;
cpu_cache_t *cpu_cache_table[CPU_SLOTS_MAX] = {[0 ... CPU_SLOTS_MAX - 1] = &cpu_cache_locked};
cpu_cache_t *const cpu_cache_none_table[CPU_SLOTS_MAX] = {[0 ... CPU_SLOTS_MAX - 1] = &cpu_cache_locked};
cpu_cache_t *cpu_cache_node_tables[TC_NODE_GROUPS][CPU_SLOTS_MAX] = {
    [0 ... TC_NODE_GROUPS - 1] = {[0 ... CPU_SLOTS_MAX - 1] = &cpu_cache_locked}};
bool cpu_caches_on;

/* CPU n's entry in its node's table (cpu_cache_node_tables), or
 * &no_node_entry for a CPU whose node has no tags: the lock sequence
 * stores &cpu_cache_locked through it either way, and nothing reads
 * no_node_entry. Set at init. */
static cpu_cache_t *no_node_entry;
static cpu_cache_t **node_entry[CPU_SLOTS_MAX];

/* The caches made so far, by CPU (never freed: a CPU may come back). */
static cpu_cache_t *caches[CPU_SLOTS_MAX];
static dpm_mutex_t make_lock = DPM_MUTEX_INITIALIZER;
/* Slots per class in every CPU cache. */
static unsigned class_cap[NSMALL];
static size_t slots_per_cache;
/* Bytes of each CPU's phased pool (cpu_cache.h): a tag's bin gets its
 * slots, up to CPU_PHASED_SLOTS of the reserve after the classes', when a
 * miss or an overflow of its tag first finds it without (locked_bin). */
static size_t phased_pool;
/* Object size of tag t's blocks: for a class's or a node's tag at init,
 * a phased tag's when its first bin gets slots (drain and stats count
 * bytes). */
static uint32_t tag_objsize[CPU_NTAGS];
/* CPU numbers below it exist (possible CPUs); caches are made for them only. */
static unsigned possible_cpus;

/* Whether caches have node bins at all (cpu_caches_init). */
static bool node_bins_on;

/* The node of CPU cpu if it has node tags, else CPU_NO_NODE. */
static unsigned node_of_cpu(unsigned cpu)
{
    if (!node_bins_on)
        return CPU_NO_NODE;
    unsigned node = numa_cpu_node(cpu);
    return node < TC_NODE_GROUPS ? node : CPU_NO_NODE;
}

/* The bins a cache may give slots to: i < NSMALL is class i of the
 * automatic arenas, NSMALL + c class c of the cache's node. Their
 * tcache_class, or TC_NONE for a bin without slots. */
#define CPU_BIN_KINDS (2 * NSMALL)
static unsigned bin_kind(const cpu_cache_t *cc, unsigned i)
{
    unsigned c = i % NSMALL;
    if (class_cap[c] == 0)
        return TC_NONE;
    if (i < NSMALL)
        return c;
    return cc->node != CPU_NO_NODE ? tc_node_class(cc->node, c) : TC_NONE;
}

/* The size class of cached tcache_class k, and its transfer stack. */
static unsigned class_of_kind(unsigned k) { return k < NSMALL ? k : tc_node_size_class(k); }
static unsigned stack_of_kind(unsigned k) { return k < NSMALL ? k : NSMALL + (k - TC_NODE_BASE); }

/* A cache's entry in its node's table: the cache moved down so that
 * tags[1] + class * 32 is the node's bin of the class. */
static cpu_cache_t *node_view(cpu_cache_t *cc)
{
    return (cpu_cache_t *)((char *)cc + (size_t)tc_node_class(cc->node, 0) * sizeof(cpu_bin_t));
}

/* Which CPUs' caches this thread holds locked, or may be about to, in any
 * of its frames: a signal handler that drains or forks must not wait for
 * the frame it interrupted. A bit is set before the lock is taken and
 * cleared after it is released (a handler that sees a bit of a lock not
 * taken yet, or not taken at all, skips that CPU: harmless); `claiming`
 * is the CPU (plus one) that lock_here's sequence is about to take,
 * written inside the sequence before its commit, so a restart on another
 * CPU leaves no stale claim behind. */
static __thread uint64_t held_bits[CPU_SLOTS_MAX / 64];
static __thread unsigned long claiming;
/* Forks this process has been the child of: a wait that spans one does
 * not undo its count of waiters, which the child cleared. */
static unsigned fork_generation;

static bool held_here(unsigned cpu)
{
    return (held_bits[cpu / 64] >> (cpu % 64) & 1) != 0 || claiming == cpu + 1;
}
static void held_set(unsigned cpu) { held_bits[cpu / 64] |= (uint64_t)1 << (cpu % 64); }
static void held_clear(unsigned cpu) { held_bits[cpu / 64] &= ~((uint64_t)1 << (cpu % 64)); }

/* ---- bounds -------------------------------------------------------------- */

/* The bins of the automatic arenas' classes only (size_classes). */
static size_t classes_bound(void)
{
    size_t bytes = 0;
    for (unsigned c = 0; c < NSMALL; c++)
        bytes += (size_t)class_cap[c] * sc_size(c);
    return bytes;
}

/* A CPU's cache holds at most opt.percpu_bytes of small blocks of the
 * automatic arenas: the phased tags' pool (percpu_bytes /
 * CPU_PHASED_POOL_DIV), and for each of the cached classes an equal
 * share of the rest, in whole blocks (at least one, at most
 * CPU_BATCH_MAX). Its node's bins, where its node has tags, get as many
 * slots again as the classes' bins: at most what the classes hold of the
 * node arena's blocks. cpu_cache_bound() is the exact sum for a cache
 * with all three. */
static void size_classes(unsigned nclasses)
{
    phased_pool = opt.percpu_bytes / CPU_PHASED_POOL_DIV;
    if (phased_pool > UINT32_MAX)
        phased_pool = UINT32_MAX;
    size_t rest = opt.percpu_bytes - phased_pool;
    size_t share = nclasses != 0 ? rest / nclasses : 0;
    slots_per_cache = 0;
    for (unsigned c = 0; c < NSMALL; c++) {
        size_t n = c < nclasses ? share / sc_size(c) : 0;
        if (c < nclasses && n == 0)
            n = 1;
        class_cap[c] = n > CPU_BATCH_MAX ? CPU_BATCH_MAX : (unsigned)n;
        slots_per_cache += class_cap[c];
        tag_objsize[c + 1] = (uint32_t)sc_size(c);
        for (unsigned node = 0; node < TC_NODE_GROUPS; node++)
            tag_objsize[tc_node_class(node, c) + 1] = (uint32_t)sc_size(c);
    }
}

/* Whether some CPU's node has tags: caches with node bins exist. */
static bool any_node_bins;

/* The slots phased tag k's bin gets in a cache whose pool has `left`
 * bytes: whole blocks of at most a quarter of the pool and of what is
 * left, up to CPU_PHASED_SLOTS; 0 (not cached on that CPU) if no block
 * fits. */
static unsigned phased_cap(unsigned k, size_t left)
{
    unsigned c = arena_phased_tag_class(k);
    if (c >= NSMALL)
        return 0;
    size_t bytes = phased_pool / 4 < left ? phased_pool / 4 : left;
    size_t n = bytes / sc_size(c);
    return n > CPU_PHASED_SLOTS ? CPU_PHASED_SLOTS : (unsigned)n;
}

size_t cpu_cache_bound(void) { return (any_node_bins ? 2 : 1) * classes_bound() + phased_pool; }

bool cpu_caches_init(unsigned nclasses, bool node_bins)
{
    cpu_caches_on = false;
    node_bins_on = node_bins;
#if DPM_THREAD_CACHES_ONLY
    return false;
#endif
    possible_cpus = os_possible_cpus();
    if (!opt.percpu || nclasses == 0 || possible_cpus > CPU_SLOTS_MAX || !rseq_init())
        return false;
    size_classes(nclasses);
    any_node_bins = false;
    for (unsigned cpu = 0; cpu < CPU_SLOTS_MAX; cpu++) {
        unsigned node = cpu < possible_cpus ? node_of_cpu(cpu) : CPU_NO_NODE;
        node_entry[cpu] = node != CPU_NO_NODE ? &cpu_cache_node_tables[node][cpu] : &no_node_entry;
        any_node_bins |= node != CPU_NO_NODE;
    }
    /* the transfer caches hold as much as half the CPUs' caches: all
     * CPUs' for the automatic arenas, the node's CPUs' for a node's */
    unsigned share = possible_cpus > 2 ? possible_cpus / 2 : 1;
    unsigned caps[TRANSFER_NSTACKS];
    for (unsigned j = 0; j < TRANSFER_NSTACKS; j++) {
        unsigned c = transfer_stack_class(j), node = j / NSMALL - 1;
        unsigned node_share = j >= NSMALL && numa_node_online(node) ? numa_node_ncpus(node) / 2 : 0;
        caps[j] = class_cap[c] * (j < NSMALL ? share : node_share > 1 ? node_share : 1);
        if (j >= NSMALL && !numa_node_online(node))
            caps[j] = 0;
    }
    if (!transfer_init(caps))
        return false;
    cpu_caches_on = true;
    return true;
}

/* ---- making and locking -------------------------------------------------- */

/* The slots of a cache's class and node bins: the node's bins double
 * them. The phased tags' reserve follows them. */
static size_t bin_slots(unsigned node) { return (node != CPU_NO_NODE ? 2 : 1) * slots_per_cache; }

/* A cache's bytes with its slots: the classes', the node's, then the
 * phased tags' reserve (CPU_PHASED_SLOTS for each tag, of which the pool
 * lets a few be used). */
static size_t cache_bytes(unsigned node)
{
    return sizeof(cpu_cache_t) + (bin_slots(node) + (size_t)TC_PHASED_NTAGS * CPU_PHASED_SLOTS) * sizeof(void *);
}

static cpu_cache_t *make_cache(unsigned cpu)
{
    mutex_lock(&make_lock);
    cpu_cache_t *cc = caches[cpu];
    if (cc == NULL) {
        unsigned node = node_of_cpu(cpu);
        cc = base_alloc(cache_bytes(node), CACHELINE);
        if (cc != NULL) {
            cc->cpu = cpu;
            cc->node = node;
            cc->phased_left = (uint32_t)phased_pool;
            void **next = (void **)(cc + 1);
            for (unsigned i = 0; i < CPU_BIN_KINDS; i++) {
                unsigned k = bin_kind(cc, i);
                if (k == TC_NONE)
                    continue;
                cpu_bin_t *b = &cc->tags[k + 1];
                b->low = next;
                b->top = b->head = next + class_cap[i % NSMALL];
                b->cap = class_cap[i % NSMALL];
                /* (secure mode's pops count their blocks less the canary) */
                b->usable = tag_objsize[k + 1];
                next += class_cap[i % NSMALL];
            }
            __atomic_store_n(&caches[cpu], cc, __ATOMIC_RELEASE);
            if (node != CPU_NO_NODE)
                __atomic_store_n(node_entry[cpu], node_view(cc), __ATOMIC_RELEASE);
            __atomic_store_n(&cpu_cache_table[cpu], cc, __ATOMIC_RELEASE);
        }
    }
    mutex_unlock(&make_lock);
    return cc;
}

/* Locks the cache of the CPU the caller runs on, in a sequence that
 * commits with the swap: no other sequence can be half-done on this CPU
 * when it succeeds. Returns the cache, or NULL (*cpu set) when it is
 * locked by someone else or not made yet. The claim is stored in the
 * sequence before the commit (see held_bits). */
static cpu_cache_t *lock_here(unsigned *cpu)
{
    unsigned long before = claiming;
#if DPM_HAVE_RSEQ
    cpu_cache_t *cc;
    unsigned long n;
    __asm__ goto(CPU_RSEQ_PROLOGUE("%[roff]")
                 "movl %%eax, %k[n]\n\t"
                 "leaq 1(%[n]), %%rax\n\t"
                 "movq %%rax, (%[claim])\n\t"
                 "movq (%[table], %[n], 8), %%rax\n\t"
                 "cmpq %[locked], %%rax\n\t"
                 "je %l[busy]\n\t"
                 "movq (%[nentry], %[n], 8), %%rdx\n\t"                /* the node's entry first */
                 "movq %[locked], (%%rdx)\n\t"
                 "lock cmpxchgq %[locked], (%[table], %[n], 8)\n\t"   /* commit */
                 "2:\n\t"
                 "jne %l[busy]\n\t"
                 : "=&a"(cc), [n] "=&r"(n)
                 : [roff] "r"(__rseq_offset), [table] "r"(cpu_cache_table), [locked] "r"(&cpu_cache_locked),
                   [claim] "r"(&claiming), [nentry] "r"(node_entry)
                 : "rdx", "memory", "cc"
                 : busy);
    *cpu = (unsigned)n;
    held_set((unsigned)n);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    claiming = before;
    return cc;
busy:
#endif
    claiming = before;
    *cpu = rseq_cpu_now() % CPU_SLOTS_MAX;
    return NULL;
}

static long futex(uint32_t *word, int op, uint32_t val)
{
    return syscall(SYS_futex, word, op, val, NULL, NULL, 0);
}

/* Locks CPU cpu's cache from any CPU: the swap, the node's entry, then
 * the fence that restarts a sequence begun on that CPU before them. wait: until its
 * holder lets go, asleep (a SCHED_FIFO waiter must let a holder of lower
 * priority run); otherwise NULL if it is held. NULL, too, for a cache
 * this thread holds or claims in an interrupted frame. */
static cpu_cache_t *lock_remote(unsigned cpu, bool wait)
{
    if (__atomic_load_n(&caches[cpu], __ATOMIC_ACQUIRE) == NULL || held_here(cpu))
        return NULL;
    held_set(cpu);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    cpu_cache_t *cc;
    for (;;) {
        /* read each time: a fork child may give the CPU a new cache while
         * a frame of its thread waits here (cpu_caches_postfork_child) */
        cc = __atomic_load_n(&caches[cpu], __ATOMIC_ACQUIRE);
        cpu_cache_t *expect = cc;
        if (__atomic_compare_exchange_n(&cpu_cache_table[cpu], &expect, &cpu_cache_locked, false, __ATOMIC_SEQ_CST,
                                        __ATOMIC_RELAXED))
            break;
        if (!wait) {
            held_clear(cpu);
            return NULL;
        }
        unsigned generation = fork_generation;
        uint32_t seq = __atomic_load_n(&cc->releases, __ATOMIC_SEQ_CST);
        __atomic_fetch_add(&cc->waiters, 1, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&cpu_cache_table[cpu], __ATOMIC_SEQ_CST) == &cpu_cache_locked)
            (void)futex(&cc->releases, FUTEX_WAIT_PRIVATE, seq);
        /* a fork since cleared the count in the child, this wait with it */
        if (generation == fork_generation)
            __atomic_fetch_sub(&cc->waiters, 1, __ATOMIC_SEQ_CST);
    }
    __atomic_store_n(node_entry[cpu], &cpu_cache_locked, __ATOMIC_SEQ_CST);
    rseq_fence((int)cpu);
    return cc;
}

/* A cache that a fork child replaced while a frame of its thread held it
 * (cpu_caches_postfork_child) is not put back in the table. */
static void unlock(cpu_cache_t *cc)
{
    if (__atomic_load_n(&caches[cc->cpu], __ATOMIC_ACQUIRE) == cc) {
        /* the node's entry first: the plain entry unlocked means unlocked */
        if (cc->node != CPU_NO_NODE)
            __atomic_store_n(node_entry[cc->cpu], node_view(cc), __ATOMIC_SEQ_CST);
        __atomic_store_n(&cpu_cache_table[cc->cpu], cc, __ATOMIC_SEQ_CST);
        __atomic_fetch_add(&cc->releases, 1, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&cc->waiters, __ATOMIC_SEQ_CST) != 0)
            (void)futex(&cc->releases, FUTEX_WAKE_PRIVATE, INT32_MAX);
    }
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    held_clear(cc->cpu);
}

/* lock_here, making the CPU's cache first if it has none. */
static cpu_cache_t *lock_here_made(void)
{
    unsigned cpu;
    cpu_cache_t *cc = lock_here(&cpu);
    if (cc == NULL && cpu < possible_cpus && __atomic_load_n(&caches[cpu], __ATOMIC_ACQUIRE) == NULL &&
        make_cache(cpu) != NULL)
        cc = lock_here(&cpu);
    return cc;
}

/* The bin of the locked cache cc for tcache_class k (a class, a node's
 * class or a phased tag), giving a phased tag's bin its slots the first
 * time (after the class and node bins' slots, bin_slots): a tag
 * is taken while caches run (arena.c), and a bin without slots is empty
 * and full to the sequences, so the first miss or overflow of each CPU
 * lands here under the lock. */
static cpu_bin_t *locked_bin(cpu_cache_t *cc, unsigned k)
{
    cpu_bin_t *b = &cc->tags[k + 1];
    if (b->top != NULL || !tc_class_is_phased(k))
        return b;
    unsigned cap = phased_cap(k, cc->phased_left);
    if (cap == 0)
        return b;
    cc->phased_left -= cap * (uint32_t)sc_size(arena_phased_tag_class(k));
    __atomic_store_n(&tag_objsize[k + 1], (uint32_t)sc_size(arena_phased_tag_class(k)), __ATOMIC_RELAXED);
    void **slots = (void **)(cc + 1) + bin_slots(cc->node) + (size_t)tc_phased_index(k) * CPU_PHASED_SLOTS;
    b->low = slots;
    b->cap = cap;
    b->top = slots + cap;
    /* last: readers that see a head see the bin's bounds (stats, lookups) */
    __atomic_store_n(&b->head, slots + cap, __ATOMIC_RELEASE);
    return b;
}

/* ---- refill and spill ---------------------------------------------------- */

/* Blocks of tcache_class k that found no room in a CPU cache: a class's
 * or a node's to its transfer cache, the rest home (a phased tag's all:
 * the transfer caches hold classes only). No lock held. */
static void spill(unsigned k, void **objs, unsigned n)
{
    unsigned kept = tc_class_is_phased(k) ? 0 : transfer_put(stack_of_kind(k), objs, n);
    if (kept < n)
        arena_bin_flush(objs + kept, n - kept);
}

/* A slot's block handed out: the key cleared unless it is fresh. */
static void *handout(void *slot)
{
    void *p = cpu_slot_block(slot);
    if (slot != p)
        DPM_ANN_OPEN_KEY(p);
    else
        tc_block_handed_out(p);
    return p;
}

/* Pushes batch[0..n) (keyed[i]: the block holds the free key) onto
 * tag k's bin of this CPU's cache, batch[0] on top so that the lowest
 * addresses go out first; returns how many found room. */
static unsigned push_fill(unsigned k, void *const *batch, const uint8_t *keyed, unsigned n)
{
    cpu_cache_t *cc = lock_here_made();   /* maybe another CPU's by now */
    if (cc == NULL)
        return 0;
    cpu_bin_t *b = locked_bin(cc, k);
    unsigned room = (unsigned)(b->head - b->low);
    unsigned pushed = n < room ? n : room;
    for (unsigned i = pushed; i-- > 0;)
        *--b->head = (void *)((uintptr_t)batch[i] | (keyed[i] ? 0 : CPU_FRESH));
    unlock(cc);
    return pushed;
}

/* Up to want blocks of tag k: from its transfer cache (classes, nodes;
 * slotless: one, as the cache's half-batch would only pass through),
 * else from bin. */
static unsigned refill(bin_t *bin, unsigned k, bool slotless, void **batch, uint8_t *keyed, unsigned want)
{
    unsigned got = tc_class_is_phased(k) ? 0 : transfer_take(stack_of_kind(k), batch, slotless ? 1 : want);
    if (got != 0)
        memset(keyed, 1, got);   /* freed blocks: keyed */
    else if (bin != NULL)
        got = arena_bin_fill(bin, batch, want, keyed);
    return got;
}

/* Tag k's bin (a class's, a node's or a phased tag's) was empty or
 * locked: the slot of a block (CPU_FRESH marks one fresh from its slab),
 * not handed out yet, refilled from k's transfer cache (classes, nodes)
 * or from bin, CPU_CHUNK blocks at a time (the stack stays small, see
 * CPU_CHUNK); NULL with no memory. */
static void *alloc_miss(bin_t *bin, unsigned k)
{
    bool phased = tc_class_is_phased(k);
    cpu_cache_t *cc = lock_here_made();
    unsigned want = 1;
    bool slotless = false;
    if (cc != NULL) {
        __atomic_store_n(&cc->events, cc->events + 1, __ATOMIC_RELAXED);
        cpu_bin_t *b = locked_bin(cc, k);
        if (b->head != b->top) {   /* a push since the failed pop, or another CPU now */
            void *slot = *b->head++;
            unlock(cc);
            return slot;
        }
        /* another node's CPU: no slots for k, whose blocks pass through
         * the transfer cache one at a time and come from the arena in
         * batches like a CPU's; a phased tag without slots here (its
         * blocks exceed what is left of the pool): one block */
        slotless = b->cap == 0;
        want = (slotless ? (phased ? 0 : class_cap[class_of_kind(k)]) : b->cap) / 2 + 1;
        unlock(cc);
    }
    /* no lock while the arena fills: a page source's callback may run */
    void *batch[CPU_CHUNK];
    uint8_t keyed[CPU_CHUNK];
    unsigned ask = want < CPU_CHUNK ? want : CPU_CHUNK;
    unsigned got = refill(bin, k, slotless, batch, keyed, ask);
    if (got == 0)
        return NULL;
    void *first = (void *)((uintptr_t)batch[0] | (keyed[0] ? 0 : CPU_FRESH));
    unsigned pushed = got > 1 ? push_fill(k, batch + 1, keyed + 1, got - 1) : 0;
    if (pushed < got - 1) {   /* no room (slotless, or pushes meanwhile): done */
        spill(k, batch + 1 + pushed, got - 1 - pushed);
        return first;
    }
    /* the rest of the half-bin, a chunk at a time (each on top of the
     * one before), while the source gives whole chunks and the bin has
     * room */
    for (want -= got; got == ask && want > 0; want -= got) {
        ask = want < CPU_CHUNK ? want : CPU_CHUNK;
        got = refill(bin, k, slotless, batch, keyed, ask);
        if (got == 0)
            break;
        pushed = push_fill(k, batch, keyed, got);
        if (pushed < got) {
            spill(k, batch + pushed, got - pushed);
            break;
        }
    }
    return first;
}

unsigned cpu_cache_fill_count(unsigned c) { return class_cap[c] / 2 + 1; }

void *cpu_cache_alloc_miss_slot(arena_t *a, unsigned k)
{
    return alloc_miss(a != NULL ? &a->bins[class_of_kind(k)] : NULL, k);
}

void *cpu_cache_alloc_miss(arena_t *a, unsigned k)
{
    void *slot = cpu_cache_alloc_miss_slot(a, k);
    return slot != NULL ? handout(slot) : NULL;
}

void *cpu_cache_phased_miss(bin_t *bin)
{
    void *slot = alloc_miss(bin, bin->tcache_class);
    return slot != NULL ? handout(slot) : NULL;
}

/* Moves the n oldest blocks of the locked bin b (next to top) to out
 * and slides the rest up. */
static void take_oldest(cpu_bin_t *b, void **out, unsigned n)
{
    unsigned count = (unsigned)(b->top - b->head);
    for (unsigned i = 0; i < n; i++)
        out[i] = cpu_slot_block(b->top[(ptrdiff_t)i - (ptrdiff_t)n]);
    memmove(b->head + n, b->head, (count - n) * sizeof(void *));
    b->head += n;
}

void cpu_cache_free_full(void *p, unsigned k)
{
    cpu_cache_t *cc = lock_here_made();
    if (cc == NULL) {
        arena_bin_flush(&p, 1);   /* locked by a drain: straight home */
        return;
    }
    __atomic_store_n(&cc->events, cc->events + 1, __ATOMIC_RELAXED);
    cpu_bin_t *b = locked_bin(cc, k);
    if (b->head != b->low) {
        *--b->head = p;
        unlock(cc);
        return;
    }
    if (b->cap == 0) {   /* another node's block (its transfer cache or home), or a phased tag's without slots (home) */
        unlock(cc);
        spill(k, &p, 1);
        return;
    }
    /* full: the older half (next to top) leaves, CPU_CHUNK blocks at a
     * time; each later chunk only while the bin (maybe another CPU's by
     * then) still holds more than the half it keeps */
    void *batch[CPU_CHUNK];
    unsigned left = b->cap / 2 > 0 ? b->cap / 2 : 1;
    unsigned n = left < CPU_CHUNK ? left : CPU_CHUNK;
    take_oldest(b, batch, n);
    *--b->head = p;
    unlock(cc);
    spill(k, batch, n);
    for (left -= n; left > 0; left -= n) {
        if ((cc = lock_here_made()) == NULL)
            return;
        b = locked_bin(cc, k);
        unsigned count = (unsigned)(b->top - b->head), keep = b->cap - b->cap / 2;
        n = count > keep ? count - keep : 0;
        n = n < left ? n : left;
        n = n < CPU_CHUNK ? n : CPU_CHUNK;
        if (n != 0)
            take_oldest(b, batch, n);
        unlock(cc);
        if (n == 0)
            return;
        spill(k, batch, n);
    }
}

/* ---- drain --------------------------------------------------------------- */

#define DRAIN_CHUNK 128   /* on the stack: see CPU_CHUNK */

/* Moves up to DRAIN_CHUNK blocks out of the locked cache cc into out;
 * returns how many, adding their bytes to *bytes. */
static unsigned take_some(cpu_cache_t *cc, void **out, size_t *bytes)
{
    unsigned n = 0;
    for (unsigned t = 1; t < CPU_NTAGS && n < DRAIN_CHUNK; t++) {
        cpu_bin_t *b = &cc->tags[t];
        while (b->head != b->top && n < DRAIN_CHUNK) {
            out[n++] = cpu_slot_block(*b->head++);
            *bytes += __atomic_load_n(&tag_objsize[t], __ATOMIC_RELAXED);
        }
    }
    return n;
}

static bool cache_empty(const cpu_cache_t *cc)
{
    for (unsigned t = 1; t < CPU_NTAGS; t++) {
        const cpu_bin_t *b = &cc->tags[t];
        if (__atomic_load_n(&b->head, __ATOMIC_RELAXED) != b->top)
            return false;
    }
    return true;
}

/* Sends cache `cpu`'s blocks home; idle_only: only if it took no slow
 * path since the previous such pass. */
static size_t drain_one(unsigned cpu, bool idle_only)
{
    cpu_cache_t *cc = __atomic_load_n(&caches[cpu], __ATOMIC_ACQUIRE);
    if (cc == NULL || cache_empty(cc))
        return 0;
    if (idle_only) {
        /* only the background thread passes idle_only: one writer */
        uint32_t events = __atomic_load_n(&cc->events, __ATOMIC_RELAXED);
        if (events != cc->events_seen) {
            cc->events_seen = events;
            return 0;
        }
    }
    size_t bytes = 0;
    void *chunk[DRAIN_CHUNK];
    /* the cache locked, not cc: a fork child may have replaced it */
    for (cpu_cache_t *held; (held = lock_remote(cpu, !idle_only)) != NULL;) {
        unsigned k = take_some(held, chunk, &bytes);
        unlock(held);
        if (k == 0)
            break;
        arena_bin_flush(chunk, k);
    }
    return bytes;
}

size_t cpu_caches_drain(bool idle_only)
{
    if (!cpu_caches_on)
        return 0;
    size_t bytes = 0;
    for (unsigned cpu = 0; cpu < CPU_SLOTS_MAX; cpu++)
        bytes += drain_one(cpu, idle_only);
    return bytes + transfer_drain(idle_only);
}

/* ---- stats and lookups --------------------------------------------------- */

/* Calls fn on every bin of every CPU's cache with its head, read racily
 * (statistics and lookups: a bin without slots has head NULL). */
static void for_each_bin(void (*fn)(const cpu_bin_t *b, void **head, unsigned tag, void *arg), void *arg)
{
    for (unsigned cpu = 0; cpu < CPU_SLOTS_MAX; cpu++) {
        const cpu_cache_t *cc = __atomic_load_n(&caches[cpu], __ATOMIC_ACQUIRE);
        if (cc == NULL)
            continue;
        for (unsigned t = 1; t < CPU_NTAGS; t++) {
            void **head = __atomic_load_n(&cc->tags[t].head, __ATOMIC_ACQUIRE);
            if (head != NULL)
                fn(&cc->tags[t], head, t, arg);
        }
    }
}

static void add_bin_bytes(const cpu_bin_t *b, void **head, unsigned tag, void *arg)
{
    *(size_t *)arg += (size_t)(b->top - head) * __atomic_load_n(&tag_objsize[tag], __ATOMIC_RELAXED);
}

size_t cpu_caches_bytes(void)
{
    size_t bytes = 0;
    for_each_bin(add_bin_bytes, &bytes);
    return bytes;
}

struct block_visit {
    void (*fn)(const void *p, void *arg);
    void *arg;
};

static void visit_bin_blocks(const cpu_bin_t *b, void **head, unsigned tag, void *arg)
{
    (void)tag;
    const struct block_visit *v = arg;
    for (void **s = head; s < b->top; s++)
        v->fn(cpu_slot_block(__atomic_load_n(s, __ATOMIC_RELAXED)), v->arg);
}

void cpu_caches_for_each_block(void (*fn)(const void *p, void *arg), void *arg)
{
    if (!cpu_caches_on)
        return;
    struct block_visit v = {fn, arg};
    for_each_bin(visit_bin_blocks, &v);
    transfer_for_each_block(fn, arg);
}

/* Every CPU the thread may run on: it may be moved between the reserve
 * and its allocations (hugepages_reserve found a fault on the CPU it was
 * moved to). A thread pinned to one CPU (a DPDK lcore) makes one. */
/* The sequences' descriptors and abort handlers (CPU_RSEQ_PROLOGUE) sit in
 * sections of their own in whichever object inlined them (this library,
 * or the program that linked it statically); the linker names their
 * bounds. The kernel reads a descriptor, and the signature before its
 * abort handler, when it preempts a thread inside that sequence: the
 * first such read of a page takes a minor fault, inside whatever the
 * thread was doing (a reserve promises none). Weak: a build whose
 * sequences were never inlined has no such sections. */
extern const char __start___rseq_cs[] __attribute__((weak, visibility("hidden")));
extern const char __stop___rseq_cs[] __attribute__((weak, visibility("hidden")));
extern const char __start___rseq_failure[] __attribute__((weak, visibility("hidden")));
extern const char __stop___rseq_failure[] __attribute__((weak, visibility("hidden")));

static void touch_pages(const char *lo, const char *hi)
{
    if (lo == NULL || hi == NULL)
        return;
    size_t kp = os_page_size();
    for (uintptr_t a = (uintptr_t)lo & ~(uintptr_t)(kp - 1); a < (uintptr_t)hi; a += kp)
        (void)*(const volatile char *)(a < (uintptr_t)lo ? lo : (const char *)a);
}

void cpu_cache_prefault(void)
{
    if (!cpu_caches_on)
        return;
    touch_pages(__start___rseq_cs, __stop___rseq_cs);
    touch_pages(__start___rseq_failure, __stop___rseq_failure);
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) {
        CPU_ZERO(&allowed);
        CPU_SET(rseq_cpu_now() % CPU_SETSIZE, &allowed);
    }
    for (unsigned cpu = 0; cpu < possible_cpus && cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &allowed))
            continue;
        cpu_cache_t *cc = __atomic_load_n(&caches[cpu], __ATOMIC_ACQUIRE);
        if (cc == NULL)
            cc = make_cache(cpu);
        if (cc != NULL)
            os_populate(cc, cache_bytes(cc->node));
    }
    transfer_prefault();
}

bool cpu_caches_hold(const void *p, unsigned k)
{
    if (!cpu_caches_on || k >= CPU_NTAGS - 1 || (k >= NSMALL && !tc_class_is_node(k) && !tc_class_is_phased(k)))
        return false;
    for (unsigned cpu = 0; cpu < CPU_SLOTS_MAX; cpu++) {
        const cpu_cache_t *cc = __atomic_load_n(&caches[cpu], __ATOMIC_ACQUIRE);
        if (cc == NULL)
            continue;
        const cpu_bin_t *b = &cc->tags[k + 1];   /* all NULL until it has slots */
        void **head = __atomic_load_n(&b->head, __ATOMIC_ACQUIRE);
        for (void **s = head; head != NULL && s < b->top; s++)
            if (cpu_slot_block(__atomic_load_n(s, __ATOMIC_RELAXED)) == p)
                return true;
    }
    return !tc_class_is_phased(k) && transfer_holds(p, stack_of_kind(k));
}

/* ---- invariants (unit tests) --------------------------------------------- */

const char *cpu_caches_check(void)
{
    if (!cpu_caches_on)
        return NULL;
    for (unsigned cpu = 0; cpu < CPU_SLOTS_MAX; cpu++) {
        cpu_cache_t *cc = __atomic_load_n(&caches[cpu], __ATOMIC_ACQUIRE);
        cpu_cache_t *entry = __atomic_load_n(&cpu_cache_table[cpu], __ATOMIC_ACQUIRE);
        if (cc == NULL) {
            if (entry != &cpu_cache_locked)
                return "a CPU without a cache has a table entry";
            continue;
        }
        if (entry != cc)
            return "a CPU's cache is left locked";
        if (cc->cpu != cpu)
            return "a cache names another CPU";
        if (cc->node != node_of_cpu(cpu))
            return "a cache names another node than its CPU's";
        /* a restarted lock sequence may leave the node's entry locked
         * (cpu_cache.h): either that or the cache's view */
        for (unsigned k = 0; k < TC_NODE_GROUPS; k++) {
            cpu_cache_t *e = __atomic_load_n(&cpu_cache_node_tables[k][cpu], __ATOMIC_ACQUIRE);
            if (e != &cpu_cache_locked && (k != cc->node || e != node_view(cc)))
                return "a node's table names a cache of another node's CPU";
        }
        size_t pool_given = 0;
        /* the class and node bins' slots, then each phased tag's place in
         * the reserve after them (cache_bytes) */
        void **const slots = (void **)(cc + 1), **const reserve = slots + bin_slots(cc->node);
        for (unsigned t = 0; t < CPU_NTAGS; t++) {
            const cpu_bin_t *b = &cc->tags[t];
            unsigned k = t - 1, c = 0;
            bool phased = t >= 1 && tc_class_is_phased(k), has_slots = false;
            if (phased) {
                /* a phased tag's bin gets its slots at its first miss on this CPU */
                has_slots = b->top != NULL;
                c = arena_phased_tag_class(k);
            }
            for (unsigned i = 0; i < CPU_BIN_KINDS && t >= 1 && !phased && !has_slots; i++)
                if (bin_kind(cc, i) == k)
                    has_slots = true, c = i % NSMALL;
            if (!has_slots) {
                if (b->head != NULL || b->top != NULL || b->low != NULL)
                    return "a bin without slots is not all NULL (empty and full)";
                continue;
            }
            if (phased)
                pool_given += (size_t)b->cap * tag_objsize[t];
            if (phased ? b->cap == 0 || b->cap > CPU_PHASED_SLOTS : b->cap != class_cap[c])
                return "a bin's capacity is not its class's or its tag's";
            if (b->top - b->low != (ptrdiff_t)b->cap)
                return "a bin's bounds do not span its capacity";
            if (phased ? b->low != reserve + (size_t)tc_phased_index(k) * CPU_PHASED_SLOTS
                       : b->low < slots || b->top > reserve)
                return "a bin's slots lie outside its place in the cache";
            if (b->head < b->low || b->head > b->top)
                return "a bin's head is outside its slots";
            for (void **at = b->head; at < b->top; at++) {
                void *const *slot = &(void *){cpu_slot_block(*at)};
                const span_t *s = span_of(*slot);
                /* (secure mode's blocks are untagged: its class bins) */
                if (s == NULL || s->kind != SPAN_SLAB || s->bin->size_class != c ||
                    (g.secure_nclasses != 0 ? s->bin != &s->arena->bins[c] : s->tcache_class != k))
                    return "a cached block is not a block of its bin's class and tag";
                if (tc_class_is_node(k) ? s->arena->node != (int)cc->node : s->arena->manual)
                    return "a cached block is not of an automatic arena or its CPU's node";
                if (!span_is_block_start(s, (uintptr_t)*slot))
                    return "a cached block is not a block start";
                if (span_block_is_free(s, span_block_index(s, (uintptr_t)*slot)))
                    return "a cached block sits free in its slab too";
            }
        }
        if (pool_given + cc->phased_left != phased_pool)
            return "the phased tags' bins and the pool left do not add up to the pool";
    }
    return NULL;
}

/* ---- fork ---------------------------------------------------------------- */

/* Across fork every CPU cache that is free is locked, so that no slow
 * path is halfway through moving its bins when memory is copied (a
 * sequence commits with one store: the child sees it done or not begun).
 * fork waits for none: a cache held at that instant (by another thread,
 * or by a frame of the forking thread that a signal handler interrupted)
 * is left to its holder in the parent, and in the child, where that
 * holder cannot finish (or finishes on a cache the child no longer
 * uses: unlock), it is abandoned with its blocks and the CPU gets a new
 * cache. So a fork from a signal handler never waits for the frame it
 * interrupted, nor for a thread that a handler of its own blocks. */
static bool locked_at_fork[CPU_SLOTS_MAX];

void cpu_caches_prefork(void)
{
    if (!cpu_caches_on)
        return;
    mutex_lock(&make_lock);
    for (unsigned cpu = 0; cpu < CPU_SLOTS_MAX; cpu++)
        locked_at_fork[cpu] = lock_remote(cpu, false) != NULL;
    transfer_prefork();
}

static void unlock_forked(void)
{
    for (unsigned cpu = 0; cpu < CPU_SLOTS_MAX; cpu++)
        if (locked_at_fork[cpu])
            unlock(caches[cpu]);
}

void cpu_caches_postfork_parent(void)
{
    if (!cpu_caches_on)
        return;
    transfer_postfork_parent();
    unlock_forked();
    mutex_unlock(&make_lock);
}

void cpu_caches_postfork_child(void)
{
    if (!cpu_caches_on)
        return;
    fork_generation++;
    rseq_postfork_child();
    transfer_postfork_child();
    mutex_reinit(&make_lock);
    for (unsigned cpu = 0; cpu < CPU_SLOTS_MAX; cpu++) {
        cpu_cache_t *cc = caches[cpu];
        if (cc == NULL)
            continue;
        cc->waiters = 0;   /* waits under way were other threads', or span this fork */
        if (locked_at_fork[cpu]) {
            unlock(cc);
        } else if (cpu_cache_table[cpu] == &cpu_cache_locked) {
            /* a frame of this thread asleep on it (a fork from a signal
             * handler) finds its futex word changed when its wait
             * restarts, and goes on with the new cache */
            cc->releases++;
            caches[cpu] = NULL;
            (void)make_cache(cpu);
        }
    }
}

/* For dpmalloc-stat (anchor.h): where the CPUs' caches and their tags'
 * object sizes are. */
extern cpu_cache_t *const *const anchor_ref_cpu_caches;
extern const uint32_t *const anchor_ref_cpu_tag_objsize;
cpu_cache_t *const *const anchor_ref_cpu_caches = caches;
const uint32_t *const anchor_ref_cpu_tag_objsize = tag_objsize;
