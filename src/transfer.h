/*
 * transfer.h - transfer caches: per small size class (and NUMA node), a
 * bounded stack of free blocks between the CPU caches and the slabs. A CPU cache that
 * overflows hands half a bin over in one short locked copy; one that runs
 * dry takes a batch back the same way, so a producer/consumer pair moves
 * blocks between CPUs in batches and touches the slabs (and their bin
 * locks) only when the transfer cache is empty or full. A class holds at
 * most its capacity (set at init); what does not fit goes home.
 * Owns: the transfer stacks and their drain. May call: arena, bin.
 */
#ifndef DPM_TRANSFER_H
#define DPM_TRANSFER_H

#include "arena.h"

/* The stacks, one per (arena kind, class): stack j < NSMALL holds class
 * j of the automatic arenas, stack NSMALL + k * NSMALL + c class c of
 * NUMA node k's arena (k < TC_NODE_GROUPS, span.h), so that blocks of
 * one node never leave through another node's CPUs. */
#define TRANSFER_NSTACKS (NSMALL * (1 + TC_NODE_GROUPS))
DPM_INLINE unsigned transfer_stack_class(unsigned j) { return j % NSMALL; }

/* At init: stack j holds at most caps[j] blocks (0: none). False without
 * memory for the stacks. */
bool transfer_init(const unsigned caps[TRANSFER_NSTACKS]);
/* Keeps up to n of objs (blocks of stack j's kind that hold the free
 * key); returns how many it took, the first ones. */
unsigned transfer_put(unsigned j, void *const *objs, unsigned n);
/* Up to want blocks of stack j into out, most recently put first;
 * returns how many. */
unsigned transfer_take(unsigned j, void **out, unsigned want);
/* Sends blocks home: every stack's (idle_only: of stacks nobody put to
 * or took from since the previous such call). Returns the bytes. */
size_t transfer_drain(bool idle_only);
size_t transfer_bytes(void);
/* The most bytes the transfer caches may hold together. */
size_t transfer_bound(void);
/* Whether p sits in stack j (the double-free lookup). */
bool transfer_holds(const void *p, unsigned j);
/* Calls fn on every block held, under each stack's lock (fn must not
 * allocate). */
void transfer_for_each_block(void (*fn)(const void *p, void *arg), void *arg);
/* Makes the stacks resident now (dpm_reserve). */
void transfer_prefault(void);
void transfer_prefork(void);
void transfer_postfork_parent(void);
void transfer_postfork_child(void);

#endif
