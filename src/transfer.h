/*
 * transfer.h - transfer caches: per small size class, a bounded stack of
 * free blocks between the CPU caches and the slabs. A CPU cache that
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

/* At init: class c holds at most caps[c] blocks (0: none). False without
 * memory for the stacks. */
bool transfer_init(const unsigned caps[NSMALL]);
/* Keeps up to n of objs (blocks of class c that hold the free key);
 * returns how many it took, the first ones. */
unsigned transfer_put(unsigned c, void *const *objs, unsigned n);
/* Up to want blocks of class c into out, most recently put first;
 * returns how many. */
unsigned transfer_take(unsigned c, void **out, unsigned want);
/* Sends blocks home: every class's (idle_only: of classes nobody put to
 * or took from since the previous such call). Returns the bytes. */
size_t transfer_drain(bool idle_only);
size_t transfer_bytes(void);
/* The most bytes the transfer caches may hold together. */
size_t transfer_bound(void);
/* Whether p sits in class c's stack (the double-free lookup). */
bool transfer_holds(const void *p, unsigned c);
/* Calls fn on every block held, under each class's lock (fn must not
 * allocate). */
void transfer_for_each_block(void (*fn)(const void *p, void *arg), void *arg);
/* Makes the stacks resident now (dpm_reserve). */
void transfer_prefault(void);
void transfer_prefork(void);
void transfer_postfork_parent(void);
void transfer_postfork_child(void);

#endif
