/*
 * numa.h - NUMA topology and node arenas (docs/numa.md). Nodes and the
 * CPU -> node map are read once at init from sysfs
 * (/sys/devices/system/node/online and node<n>/cpulist, under
 * DPMALLOC_SYSFS_ROOT when set). Each node gets one arena, made on first
 * use, whose segments are mbind'ed to the node: dpm_*_socket calls and,
 * with numa:true, threads running on the node's CPUs allocate there.
 * Reserves (dpm_reserve) are prefaulted segments handed to an arena.
 *
 * Owns: the topology and the node -> arena table. May call: os, arena,
 * pages (ph_add_segment), conf.
 */
#ifndef DPM_NUMA_H
#define DPM_NUMA_H

#include "arena.h"

#define NUMA_MAX_NODES 64
#define NUMA_MAX_CPUS 1024

/* Reads the topology (at init, before anything allocates: no malloc). */
void numa_init(void);
/* Highest online node + 1 (1 on a machine without NUMA, or when sysfs
 * lists no node). */
unsigned numa_nnodes(void);
/* Node n is listed in sysfs's online file (node 0 when none is). */
bool numa_node_online(unsigned n);
/* CPUs listed for node n. */
unsigned numa_node_ncpus(unsigned n);
/* The node of the CPU the caller runs on now (getcpu); the first online
 * node if unknown. */
unsigned numa_current_node(void);
/* The node of CPU cpu (the first online node for a CPU no node lists;
 * 0 past NUMA_MAX_CPUS). */
unsigned numa_cpu_node(unsigned cpu);
/* The arena of node n, made on first use; NULL for a node that is not
 * online or when out of memory. */
arena_t *numa_node_arena(unsigned n);
/* numa:true: the arena a new thread takes (its current node's). */
arena_t *numa_thread_arena(void);
/* Maps bytes (rounded up to 4 MiB, or to the huge page) with huge pages
 * if allowed and available, prefaults (and mlocks) them, and hands them
 * to arena a's page heap as a reserved segment. 0 or an errno value. */
int numa_reserve(arena_t *a, size_t bytes, int node, unsigned flags);
void numa_postfork_child(void);

#endif
