/*
 * types.c - the type-tag registry (see types.h). Names live in an
 * open-addressed table that readers probe without a lock; only a new name
 * takes the lock. Counters are kept per CPU and summed when stats read
 * them, because any thread may allocate or free a typed block.
 */
#include "types.h"
#include "base.h"
#include "mutex.h"
#include "rseq.h"
#include "anchor_ref.h"

#include <string.h>

#define TYPE_HASH_SLOTS (2 * MAX_TYPES)

typedef struct type_name {
    char name[TYPE_NAME_MAX];
    uint32_t hash;
} type_name_t;

/* One type's counts on one CPU. All four only grow: the live figures are
 * differences taken when stats read them (type_snapshot). */
typedef struct type_counts {
    uint64_t nalloc, nfree;
    uint64_t bytes_alloc, bytes_freed;
} type_counts_t;

/* One CPU's counts of every type: whole cache lines, none shared with
 * another CPU's. */
typedef struct type_row {
    type_counts_t t[MAX_TYPES];
} CACHE_ALIGNED type_row_t;

_Static_assert(sizeof(type_row_t) % CACHELINE == 0, "a CPU's row ends on a line of its own");

/* A row slot that a thread is making (it owns the slot until it
 * publishes the row). */
#define ROW_MAKING ((type_row_t *)1)

static type_name_t names[MAX_TYPES];
/* Ids by hash of the name; 0 is an empty slot. A slot is written once,
 * under types_lock, after the name it points at (release). */
static uint16_t hash_slots[TYPE_HASH_SLOTS];
static unsigned ntypes = 1;   /* id 0 means untyped */
static dpm_mutex_t types_lock = DPM_MUTEX_INITIALIZER;

/* rows[cpu % TYPE_CPU_SLOTS]: made at a CPU's first typed count. */
static type_row_t *rows[TYPE_CPU_SLOTS];
static unsigned rows_end;   /* slots below it may hold a row */
/* Where a count goes while its CPU has no row (being made, or no memory
 * for one): shared, but counted by the same atomic adds. */
static type_row_t spill_row;

/* A hash of the first len bytes, eight at a time (a name's hash is on
 * every typed call). */
static uint32_t hash_name(const char *s, size_t len)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ len;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    uint64_t tail = 0;
    for (size_t k = 0; i + k < len; k++)
        tail |= (uint64_t)(uint8_t)s[i + k] << (8 * k);
    h = (h ^ tail) * 0xc4ceb9fe1a85ec53ull;
    return (uint32_t)(h ^ (h >> 29));
}

static bool name_is(const type_name_t *t, uint32_t h, const char *key, size_t len)
{
    return t->hash == h && memcmp(t->name, key, len) == 0 && t->name[len] == '\0';
}

/* The id of key (len bytes) or 0, probing without the lock: a slot read
 * non-zero was published after its name (acquire pairs with the release
 * in type_id_of), so the name compared is whole. *empty: the probe ended
 * at an empty slot. */
static uint16_t probe(uint32_t h, const char *key, size_t len)
{
    for (unsigned i = 0; i < TYPE_HASH_SLOTS; i++) {
        uint16_t id = __atomic_load_n(&hash_slots[(h + i) % TYPE_HASH_SLOTS], __ATOMIC_ACQUIRE);
        if (id == 0 || name_is(&names[id], h, key, len))
            return id;
    }
    return 0;
}

uint16_t type_id_of(const char *name)
{
    if (name == NULL || name[0] == '\0')
        return 0;
    size_t len = strnlen(name, TYPE_NAME_MAX - 1);
    uint32_t h = hash_name(name, len);
    uint16_t id = probe(h, name, len);
    /* the table never loses a name: a full one answers 0 without the lock */
    if (id != 0 || __atomic_load_n(&ntypes, __ATOMIC_ACQUIRE) >= MAX_TYPES)
        return id;
    mutex_lock(&types_lock);
    /* half the table stays empty, so the probe ends at an empty slot */
    unsigned i = h % TYPE_HASH_SLOTS;
    for (;; i = (i + 1) % TYPE_HASH_SLOTS) {
        id = __atomic_load_n(&hash_slots[i], __ATOMIC_RELAXED);
        if (id == 0 || name_is(&names[id], h, name, len))
            break;
    }
    if (id == 0 && ntypes < MAX_TYPES) {
        id = (uint16_t)ntypes;
        memcpy(names[id].name, name, len);
        names[id].name[len] = '\0';
        names[id].hash = h;
        __atomic_store_n(&ntypes, ntypes + 1, __ATOMIC_RELEASE);
        __atomic_store_n(&hash_slots[i], id, __ATOMIC_RELEASE);
    }
    mutex_unlock(&types_lock);
    return id;
}

/* Slot's row, made now if it has none; the spill row while another
 * thread makes it or when there is no memory for it. The slot is claimed
 * before the row is made, so a slot gets one row at most. */
static type_row_t *row_make(unsigned slot)
{
    type_row_t *expect = NULL;
    if (!__atomic_compare_exchange_n(&rows[slot], &expect, ROW_MAKING, false, __ATOMIC_ACQUIRE,
                                     __ATOMIC_ACQUIRE))
        return expect == ROW_MAKING ? &spill_row : expect;
    type_row_t *row = base_alloc(sizeof(type_row_t), CACHELINE);
    if (row == NULL) {
        __atomic_store_n(&rows[slot], NULL, __ATOMIC_RELEASE);   /* a later count tries again */
        return &spill_row;
    }
    unsigned end = __atomic_load_n(&rows_end, __ATOMIC_RELAXED);
    while (end < slot + 1 &&
           !__atomic_compare_exchange_n(&rows_end, &end, slot + 1, true, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
        ;
    __atomic_store_n(&rows[slot], row, __ATOMIC_RELEASE);
    return row;
}

static type_counts_t *counts_here(uint16_t id)
{
    unsigned slot = rseq_cpu_hint() % TYPE_CPU_SLOTS;
    type_row_t *row = __atomic_load_n(&rows[slot], __ATOMIC_ACQUIRE);
    if (unlikely(row == NULL || row == ROW_MAKING))
        row = row_make(slot);
    return &row->t[id];
}

/* Relaxed adds would do for exact totals; the release order of the frees'
 * adds is what makes a snapshot's live figures never negative (see
 * type_snapshot). */
void type_count_alloc(uint16_t id, size_t bytes)
{
    if (id == 0)
        return;
    type_counts_t *c = counts_here(id);
    __atomic_fetch_add(&c->nalloc, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&c->bytes_alloc, bytes, __ATOMIC_RELAXED);
}

void type_count_free(uint16_t id, size_t bytes)
{
    if (id == 0)
        return;
    type_counts_t *c = counts_here(id);
    __atomic_fetch_add(&c->bytes_freed, bytes, __ATOMIC_RELEASE);
    __atomic_fetch_add(&c->nfree, 1, __ATOMIC_RELEASE);
}

unsigned types_count(void) { return __atomic_load_n(&ntypes, __ATOMIC_ACQUIRE); }

/* Sums the rows, first every row's frees, then every row's allocations:
 * a free is counted after its block's allocation was (the block passed
 * from the allocating thread to the freeing one), and a free read here
 * (acquire, pairing with the add's release) brings that allocation's count
 * into view, so every block freed in the sum was also allocated in it. */
void type_snapshot(uint16_t id, type_stats_t *out)
{
    memcpy(out->name, names[id].name, TYPE_NAME_MAX);
    unsigned end = __atomic_load_n(&rows_end, __ATOMIC_ACQUIRE);
    uint64_t nfree = __atomic_load_n(&spill_row.t[id].nfree, __ATOMIC_ACQUIRE);
    uint64_t bytes_freed = __atomic_load_n(&spill_row.t[id].bytes_freed, __ATOMIC_ACQUIRE);
    for (unsigned s = 0; s < end; s++) {
        type_row_t *row = __atomic_load_n(&rows[s], __ATOMIC_ACQUIRE);
        if (row == NULL || row == ROW_MAKING)
            continue;
        nfree += __atomic_load_n(&row->t[id].nfree, __ATOMIC_ACQUIRE);
        bytes_freed += __atomic_load_n(&row->t[id].bytes_freed, __ATOMIC_ACQUIRE);
    }
    uint64_t nalloc = __atomic_load_n(&spill_row.t[id].nalloc, __ATOMIC_RELAXED);
    uint64_t bytes_alloc = __atomic_load_n(&spill_row.t[id].bytes_alloc, __ATOMIC_RELAXED);
    for (unsigned s = 0; s < end; s++) {
        type_row_t *row = __atomic_load_n(&rows[s], __ATOMIC_ACQUIRE);
        if (row == NULL || row == ROW_MAKING)
            continue;
        nalloc += __atomic_load_n(&row->t[id].nalloc, __ATOMIC_RELAXED);
        bytes_alloc += __atomic_load_n(&row->t[id].bytes_alloc, __ATOMIC_RELAXED);
    }
    out->nalloc = nalloc;
    out->nfree = nfree;
    out->live_blocks = nalloc - nfree;
    out->live_bytes = bytes_alloc - bytes_freed;
}

void types_prefork(void) { mutex_lock(&types_lock); }
void types_postfork_parent(void) { mutex_unlock(&types_lock); }
void types_postfork_child(void) { mutex_init(&types_lock); }

/* For dpmalloc-stat (anchor.h): where the names and the counts are. */
extern const anchor_types_t anchor_ref_types;
const anchor_types_t anchor_ref_types = {
    names, &ntypes, (const void *const *)rows, &rows_end, &spill_row,
    sizeof(type_name_t), MAX_TYPES, TYPE_CPU_SLOTS, sizeof(type_counts_t),
    offsetof(type_counts_t, nalloc), offsetof(type_counts_t, nfree),
    offsetof(type_counts_t, bytes_alloc), offsetof(type_counts_t, bytes_freed),
};
