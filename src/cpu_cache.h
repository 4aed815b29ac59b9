/*
 * cpu_cache.h - caches that belong to CPUs: per CPU, per small size
 * class and per phased tag (aligned-at-offset blocks of automatic arenas,
 * span.h), a bounded stack of free blocks that malloc pops and free pushes
 * in restartable sequences (rseq.h) on the cache of the CPU the thread
 * runs on. A sequence that is preempted, migrated or interrupted by a
 * signal starts over, so its one committing store (the stack's new head)
 * happens on the CPU it read, with no lock and no atomic instruction.
 *
 * Locking a cache means replacing its entry in cpu_cache_table by
 * &cpu_cache_locked, whose bins are all empty and full: every sequence
 * that starts afterwards fails and goes to a slow path. The thread that
 * runs on the CPU locks it with a sequence that commits with a
 * compare-and-swap (no other sequence can be half-done on that CPU);
 * any other thread locks it with a compare-and-swap and then a
 * membarrier fence aimed at that CPU, which restarts a sequence begun
 * before the swap. A cache whose CPU's node has node tags (span.h) has a
 * second entry, in its node's table, which pop sequences for that node
 * index: the locker stores &cpu_cache_locked there too, before its
 * commit (its own CPU) or before its fence (afar), and the unlock puts
 * it back before the first entry. A lock_here sequence that restarts
 * after that store leaves the second entry locked with no holder: the
 * node's pops then fail until the next slow path on that CPU unlocks
 * it, which costs time, never a block. Whoever holds the lock may move
 * the cache's blocks
 * from any CPU; it holds it only to copy pointers, never across a call
 * into the arenas or user code. The free key and the checks of the free
 * fast path are the thread caches' (tcache.h).
 *
 * Owns: the CPU caches, their bounds and their drain, the node tables.
 * May call: transfer, arena, bin, rseq, numa (the CPU -> node map).
 */
#ifndef DPM_CPU_CACHE_H
#define DPM_CPU_CACHE_H

#include "rseq.h"
#include "arena.h"

/* CPU numbers the table covers; a machine with more possible CPUs keeps
 * thread caches. */
#define CPU_SLOTS_MAX 1024
/* Bins addressed by page-map tag (0: none, t: tcache_class t - 1), as
 * the thread caches' (tcache.h): a CPU's cache gives slots to the bins of
 * the cached small classes of the automatic arenas, to those of its own
 * node's arena when that node has node tags (span.h), and to the phased
 * tags' bins (span.h) at their first miss or overflow on that CPU. Every
 * other tag (large blocks, manual arenas' classes, classes past
 * tcache_max, other nodes' blocks, phased tags before their bin gets
 * slots on that CPU) names a bin without slots, always empty and full:
 * a free of another node's block takes the slow path, and a CPU never
 * hands out another node's memory. */
#define CPU_NTAGS 256
#define CPU_BATCH_MAX 512
/* Blocks a fill or an overflow moves per round (under the cache's lock
 * once, then the transfer cache's or a bin's): their buffer is on the
 * stack, and malloc and free must fit a signal handler's alternate stack
 * (docs/design.md, "Stack"). */
#define CPU_CHUNK 128
/* Most slots of a phased tag's bin (tcache_class in the phased ranges,
 * span.h). The tags' bins share a pool of percpu_bytes / CPU_PHASED_POOL_DIV
 * per CPU, the classes the rest; a tag's bin gets its slots on a CPU at
 * its first miss or overflow there, at most a quarter of the pool, as
 * long as the pool lasts (the first tags used on a CPU get bins). */
#define CPU_PHASED_SLOTS 64
#define CPU_PHASED_POOL_DIV 16

/* A class's blocks sit in [head, top); pop is *head++, push is *--head;
 * full when head == low. Bins without slots are all NULL. */
typedef struct cpu_bin {
    void **head;
    void **top;
    void **low;
    uint32_t cap;         /* top - low */
    /* the usable bytes of the bin's blocks, for thread.allocated (a
     * class's or node's bin; set when the cache is made, then constant) */
    uint32_t usable;
} cpu_bin_t;

typedef struct cpu_cache {
    uint32_t cpu;
    uint32_t events;      /* slow-path visits, under the lock (decay reads it) */
    uint32_t events_seen; /* events at the last decay pass */
    uint32_t releases;    /* unlocks: the futex remote lockers sleep on */
    uint32_t waiters;     /* remote lockers asleep */
    uint32_t node;        /* its CPU's node if that node has tags (< TC_NODE_GROUPS), else CPU_NO_NODE */
    uint32_t phased_left; /* bytes of the phased pool not given to a tag's bin yet */
    uint32_t pad[1];
    cpu_bin_t tags[CPU_NTAGS];      /* tags[t]; tags[c + 1] is class c's */
} CACHE_ALIGNED cpu_cache_t;

_Static_assert(sizeof(cpu_bin_t) == 32, "the sequences scale tags and classes by 32");
_Static_assert(offsetof(cpu_cache_t, tags) == 32, "the sequences address tags[0] at 32");

/* Every bin empty and full: the table's entry of a locked CPU, and of
 * every CPU in the table of a thread that uses no CPU cache. */
extern cpu_cache_t cpu_cache_locked;
/* What the sequences index by CPU number: the CPU's cache, or
 * &cpu_cache_locked while it is locked or not made yet. */
extern cpu_cache_t *cpu_cache_table[CPU_SLOTS_MAX];
#define CPU_NO_NODE 0xffffffffu
/* Node k's table, for pops of node k's blocks: entry n is CPU n's cache
 * moved down by node k's first tag, so that the pop's class offset
 * reaches node k's bin of that class (the same sequence as a plain pop);
 * &cpu_cache_locked for a CPU of another node, or while locked. */
extern cpu_cache_t *cpu_cache_node_tables[TC_NODE_GROUPS][CPU_SLOTS_MAX];
/* The table of threads that use no CPU cache: every entry locked. */
extern cpu_cache_t *const cpu_cache_none_table[CPU_SLOTS_MAX];
/* Whether the process runs on CPU caches (chosen once at init). */
extern bool cpu_caches_on;

/* ---- the sequences (x86-64) -------------------------------------------- */

/* The rseq_cs descriptor of one sequence (labels 1: start, 2: commit
 * done, 4: abort handler), and the abort handler, placed out of line and
 * preceded by the signature: it starts the sequence over at 0. Then the
 * CPU number, masked into the table: a thread whose area is not
 * registered (cpu_id -1 or -2) reads entry 1023 or 1022 of the table it
 * uses, which is the all-locked table until it registers. */
#define CPU_RSEQ_PROLOGUE(roff)                                                                      \
    ".pushsection __rseq_cs, \"aw\"\n\t"                                                              \
    ".balign 32\n\t"                                                                                  \
    "3:\n\t"                                                                                          \
    ".long 0, 0\n\t"                                                                                  \
    ".quad 1f, (2f - 1f), 4f\n\t"                                                                     \
    ".popsection\n\t"                                                                                 \
    ".pushsection __rseq_cs_ptr_array, \"aw\"\n\t"                                                    \
    ".quad 3b\n\t"                                                                                    \
    ".popsection\n\t"                                                                                 \
    ".pushsection __rseq_failure, \"ax\"\n\t"                                                         \
    ".byte 0x0f, 0xb9, 0x3d\n\t"                                                                      \
    ".long 0x53053053\n\t"                                                                            \
    "4:\n\t"                                                                                          \
    "jmp 0f\n\t"                                                                                      \
    ".popsection\n\t"                                                                                 \
    "0:\n\t"                                                                                          \
    "leaq 3b(%%rip), %%rax\n\t"                                                                       \
    "movq %%rax, %%fs:8(" roff ")\n\t"                                                                \
    "1:\n\t"                                                                                          \
    "movl %%fs:4(" roff "), %%eax\n\t"                                                               \
    "andl $1023, %%eax\n\t"
_Static_assert(DPM_RSEQ_SIG == 0x53053053 && DPM_RSEQ_CS_OFFSET == 8 && DPM_RSEQ_CPU_ID_OFFSET == 4 &&
                   CPU_SLOTS_MAX == 1024,
               "the sequences spell these out");

/* Pops a block of the class whose bin is tags[1] + class_off bytes
 * (class * 32) from the CPU's cache in table into *out; false if that
 * bin is empty or the cache locked. (A bool, not a NULL block: inlined,
 * the caller branches on the sequence's own exits.) */
DPM_INLINE bool cpu_cache_pop(cpu_cache_t *const *table, size_t class_off, void **out)
{
#if DPM_HAVE_RSEQ
    void *p;
    __asm__ goto(CPU_RSEQ_PROLOGUE("%[roff]")
                 "movq (%[table], %%rax, 8), %%rcx\n\t"
                 "movq 64(%%rcx, %[off]), %%rdx\n\t"     /* tags[c + 1].head */
                 "cmpq 72(%%rcx, %[off]), %%rdx\n\t"     /* == top: empty */
                 "je %l[miss]\n\t"
                 "movq (%%rdx), %[p]\n\t"
                 "addq $8, %%rdx\n\t"
                 "movq %%rdx, 64(%%rcx, %[off])\n\t"     /* commit */
                 "2:\n\t"
                 : [p] "=&r"(p)
                 : [roff] "r"(__rseq_offset), [table] "r"(table), [off] "r"(class_off)
                 : "rax", "rcx", "rdx", "memory", "cc"
                 : miss);
    *out = p;
    return true;
miss:
#else
    (void)table, (void)class_off, (void)out;
#endif
    return false;
}

/* cpu_cache_pop, also giving the bin's usable bytes per block (loaded
 * inside the sequence, from the line the pop reads, into %rax, which
 * the CPU number held before: no register more than the pop's). */
DPM_INLINE bool cpu_cache_pop_usable(cpu_cache_t *const *table, size_t class_off, void **out, uint64_t *usable)
{
#if DPM_HAVE_RSEQ
    void *p;
    uint64_t u;
    __asm__ goto(CPU_RSEQ_PROLOGUE("%[roff]")
                 "movq (%[table], %%rax, 8), %%rcx\n\t"
                 "movq 64(%%rcx, %[off]), %%rdx\n\t"     /* tags[c + 1].head */
                 "cmpq 72(%%rcx, %[off]), %%rdx\n\t"     /* == top: empty */
                 "je %l[miss]\n\t"
                 "movl 92(%%rcx, %[off]), %%eax\n\t"     /* tags[c + 1].usable, zero-extended */
                 "movq (%%rdx), %[p]\n\t"
                 "addq $8, %%rdx\n\t"
                 "movq %%rdx, 64(%%rcx, %[off])\n\t"     /* commit */
                 "2:\n\t"
                 : [p] "=&r"(p), [u] "=&a"(u)
                 : [roff] "r"(__rseq_offset), [table] "r"(table), [off] "r"(class_off)
                 : "rcx", "rdx", "memory", "cc"
                 : miss);
    *out = p;
    *usable = u;
    return true;
miss:
#else
    (void)table, (void)class_off, (void)out, (void)usable;
#endif
    return false;
}
_Static_assert(offsetof(cpu_cache_t, tags[1].head) == 64 && offsetof(cpu_cache_t, tags[1].usable) == 92,
               "cpu_cache_pop_usable's offsets");

/* Pushes p onto the bin of page-map tag `tag` (tag_off = tag * 32) of
 * the CPU's cache in table; false if that bin is full (always, for tags
 * without slots) or the cache locked. */
DPM_INLINE bool cpu_cache_push(cpu_cache_t *const *table, size_t tag_off, void *p)
{
#if DPM_HAVE_RSEQ
    __asm__ goto(CPU_RSEQ_PROLOGUE("%[roff]")
                 "movq (%[table], %%rax, 8), %%rcx\n\t"
                 "movq 32(%%rcx, %[off]), %%rdx\n\t"     /* tags[t].head */
                 "cmpq 48(%%rcx, %[off]), %%rdx\n\t"     /* == low: full */
                 "je %l[full]\n\t"
                 "movq %[p], -8(%%rdx)\n\t"
                 "subq $8, %%rdx\n\t"
                 "movq %%rdx, 32(%%rcx, %[off])\n\t"     /* commit */
                 "2:\n\t"
                 :
                 : [roff] "r"(__rseq_offset), [table] "r"(table), [off] "r"(tag_off), [p] "r"(p)
                 : "rax", "rcx", "rdx", "memory", "cc"
                 : full);
    return true;
full:
#else
    (void)table, (void)tag_off, (void)p;
#endif
    return false;
}

/* A slot's low bit marks a block a fill brought from its slab that no
 * free has keyed since (it holds no free key): its handout writes
 * nothing into it, so a fresh block's page and line stay untouched until
 * the program touches them (docs/design.md, "The free key and fills"). */
#define CPU_FRESH ((uintptr_t)1)
DPM_INLINE void *cpu_slot_block(const void *slot) { return (void *)((uintptr_t)slot & ~CPU_FRESH); }

/* ---- the slow halves (cpu_cache.c) -------------------------------------- */

/* Blocks a miss of class c asks a refill for (half its bin, plus the
 * one handed out): what a sampler counts one slow path as. */
unsigned cpu_cache_fill_count(unsigned c);

/* At init: whether CPU caches can run here (rseq_init) and are wanted,
 * with bins for the small classes 0..nclasses-1 (none: no caches) of the
 * automatic arenas, and, with node_bins, of the node arenas with tags. */
bool cpu_caches_init(unsigned nclasses, bool node_bins);
/* The bin of tcache_class k (a cached class c < g.tcache_nclasses of the
 * automatic arenas, or tc_node_class(node, c) of node arena a) of the
 * calling thread's CPU was empty or locked: a block of that kind
 * (refilling the CPU's bin from the transfer cache or the arena a),
 * handed out (no free key in it), or NULL with no memory. On a CPU of
 * another node (no slots for k), one block of k's transfer cache or of
 * a batch from a, the rest of which goes to the transfer cache. */
void *cpu_cache_alloc_miss(arena_t *a, unsigned k);
/* cpu_cache_alloc_miss, giving the block's slot as a pop does (its
 * CPU_FRESH bit, nothing written into it yet): for a caller that checks
 * the block before it hands it out (secure mode). */
void *cpu_cache_alloc_miss_slot(arena_t *a, unsigned k);
/* The bin of phased bin `bin`'s tag (bin->tcache_class, a phased tag) of
 * the calling thread's CPU was empty or locked: a block of bin, handed
 * out, refilling the CPU's bin from bin; NULL with no memory. */
void *cpu_cache_phased_miss(bin_t *bin);
/* The bin of tcache_class k (a cached class, a node's class or a phased
 * tag) of the calling thread's CPU was full or locked: keeps p (which
 * holds the free key) there, moving half the bin to the transfer cache
 * (classes, nodes) or home (phased tags), or gives it to the transfer
 * cache (another node's block), or sends it home. */
void cpu_cache_free_full(void *p, unsigned k);
/* Sends every block of every CPU cache (idle_only: of caches that took
 * no slow path since the previous such call) home through the transfer
 * caches' drain; returns the bytes. Any thread; waits for busy caches
 * unless idle_only. */
size_t cpu_caches_drain(bool idle_only);
/* Bytes held by the CPU caches, not the transfer caches (racy sum, for
 * stats). */
size_t cpu_caches_bytes(void);
/* The per-CPU bound, in bytes, that the bins' capacities respect: the
 * classes' bins, the node's bins (where some CPU's node has tags) and
 * the phased tags' pool together. */
size_t cpu_cache_bound(void);
/* Whether p sits in the bin of tcache_class k (a class, a node's class
 * or a phased tag) of some CPU cache or, but for a phased tag, in its
 * transfer cache (the double-free lookup). */
bool cpu_caches_hold(const void *p, unsigned k);
/* Calls fn on every block the CPU and transfer caches hold (stats: racy
 * for the CPU caches, whose slots may be read while they change: fn gets
 * addresses of blocks, possibly ones that left meanwhile). fn must not
 * allocate. */
void cpu_caches_for_each_block(void (*fn)(const void *p, void *arg), void *arg);
/* Makes the caches of every CPU the calling thread may run on, and the
 * transfer stacks, resident now (dpm_reserve: allocations afterwards
 * take no fault in them). */
void cpu_cache_prefault(void);
/* NULL if every CPU cache is whole (bounds, every block a live-in-slab
 * block start of its class of an automatic arena or, in a node bin, of
 * the arena of the CPU's node, or in a phased tag's bin of its tag; the
 * class and node bins' slots before the phased tags' reserve, each phased
 * bin at its tag's place in it, within the pool; no entry left locked),
 * else what is wrong.
 * Only while no thread allocates (unit tests). */
const char *cpu_caches_check(void);
void cpu_caches_prefork(void);
void cpu_caches_postfork_parent(void);
void cpu_caches_postfork_child(void);

#endif
