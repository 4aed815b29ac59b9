/*
 * zero_blocks.h - secure mode's blocks of size 0: malloc(0), calloc with
 * a zero count, new of 0 bytes and aligned requests of 0 bytes (up to a
 * page of alignment) return a unique address in a region reserved
 * without access, so that reading or writing through such a pointer
 * faults (SIGSEGV) instead of reaching another block. Each live block is
 * a bit in a bitmap: free, realloc, sized free and malloc_usable_size
 * know it, and a second free of one aborts.
 * Owns: the region and its bitmap. May call: os, error, fault.
 */
#ifndef DPM_ZERO_BLOCKS_H
#define DPM_ZERO_BLOCKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* At init, in secure mode: reserves the region (address space only) and
 * its bitmap (committed page by page as slots are used). false without
 * address space: size 0 then gets ordinary blocks. */
bool zero_blocks_init(void);
/* Whether zero-size blocks are given (the region exists and is not
 * full); racy by nature: dpm_good_size's answer. */
bool zero_blocks_available(void);
/* A fresh zero-size block at a multiple of align (a power of two, at
 * most a page); NULL if there is no region or every slot is live. */
void *zero_block_alloc(size_t align);
/* Whether p points into the region (a zero-size block or a wild pointer
 * there). Safe before init: false. */
bool zero_block_in_region(const void *p);
/* Frees p (in the region), aborting naming call if p is not a live
 * zero-size block (an address between slots, or a double free). */
void zero_block_free(void *p, const char *call);
/* Aborts naming call unless p (in the region) is a live zero-size block:
 * realloc and malloc_usable_size of a freed one are a use after free. */
void zero_block_check_live(const void *p, const char *call);
/* The fault handler's explainer (fault.h): a fault in the region
 * reports the slot (live: an access through a block of size 0; else a
 * use after free). */
bool zero_block_explain(uintptr_t addr);
/* Slots live now (stats and tests). */
size_t zero_blocks_live(void);

#endif
