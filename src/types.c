/*
 * types.c - the type-tag registry (see types.h). Names are looked up in an
 * open-addressed table under a lock (typed allocation is not a fast path);
 * counters are relaxed atomics because any thread may free a typed block.
 */
#include "types.h"
#include "mutex.h"

#include <string.h>

#define TYPE_HASH_SLOTS (2 * MAX_TYPES)

static type_stats_t types[MAX_TYPES];
static uint16_t hash_slots[TYPE_HASH_SLOTS];
static unsigned ntypes = 1;   /* id 0 means untyped */
static dpm_mutex_t types_lock = DPM_MUTEX_INITIALIZER;

static uint32_t hash_name(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s != '\0'; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

uint16_t type_id_of(const char *name)
{
    if (name == NULL || name[0] == '\0')
        return 0;
    char key[TYPE_NAME_MAX];
    strncpy(key, name, TYPE_NAME_MAX - 1);
    key[TYPE_NAME_MAX - 1] = '\0';
    uint32_t h = hash_name(key) % TYPE_HASH_SLOTS;
    uint16_t id = 0;
    mutex_lock(&types_lock);
    for (unsigned probe = 0; probe < TYPE_HASH_SLOTS; probe++) {
        uint16_t *slot = &hash_slots[(h + probe) % TYPE_HASH_SLOTS];
        if (*slot == 0) {
            if (ntypes < MAX_TYPES) {
                id = (uint16_t)ntypes;
                memcpy(types[id].name, key, TYPE_NAME_MAX);
                __atomic_store_n(&ntypes, ntypes + 1, __ATOMIC_RELEASE);
                *slot = id;
            }
            break;
        }
        if (strcmp(types[*slot].name, key) == 0) {
            id = *slot;
            break;
        }
    }
    mutex_unlock(&types_lock);
    return id;
}

void type_count_alloc(uint16_t id, size_t bytes)
{
    if (id == 0)
        return;
    __atomic_fetch_add(&types[id].live_bytes, bytes, __ATOMIC_RELAXED);
    __atomic_fetch_add(&types[id].live_blocks, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&types[id].nalloc, 1, __ATOMIC_RELAXED);
}

void type_count_free(uint16_t id, size_t bytes)
{
    if (id == 0)
        return;
    __atomic_fetch_sub(&types[id].live_bytes, bytes, __ATOMIC_RELAXED);
    __atomic_fetch_sub(&types[id].live_blocks, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&types[id].nfree, 1, __ATOMIC_RELAXED);
}

unsigned types_count(void) { return __atomic_load_n(&ntypes, __ATOMIC_ACQUIRE); }

void type_snapshot(uint16_t id, type_stats_t *out)
{
    memcpy(out->name, types[id].name, TYPE_NAME_MAX);
    out->live_bytes = __atomic_load_n(&types[id].live_bytes, __ATOMIC_RELAXED);
    out->live_blocks = __atomic_load_n(&types[id].live_blocks, __ATOMIC_RELAXED);
    out->nalloc = __atomic_load_n(&types[id].nalloc, __ATOMIC_RELAXED);
    out->nfree = __atomic_load_n(&types[id].nfree, __ATOMIC_RELAXED);
}

void types_prefork(void) { mutex_lock(&types_lock); }
void types_postfork_parent(void) { mutex_unlock(&types_lock); }
void types_postfork_child(void) { mutex_init(&types_lock); }
