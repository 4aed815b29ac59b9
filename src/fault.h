/*
 * fault.h - the SIGSEGV/SIGBUS handler of the options that leave pages
 * without access (guard_sample, secure): a fault the kernel raises in
 * one of dpmalloc's own inaccessible pages is explained on stderr by the
 * room that owns the page (which block, what went wrong) and aborts;
 * every other fault, and every signal a program sends, goes to the
 * disposition the program had before, as if dpmalloc had no handler.
 * Installed only with such an option, at init.
 * Owns: the handler, the previous dispositions, the explainers' list.
 * May call: error.
 */
#ifndef DPM_FAULT_H
#define DPM_FAULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FAULT_EXPLAINERS 4

/* Whether a fault at addr falls in the caller's pages; if so the caller
 * has written its report (async-signal-safe calls only: write(2) and
 * the formatting of error.h), and the handler aborts. */
typedef bool (*fault_explainer_t)(uintptr_t addr);

/* Adds an explainer, at init (before any page it explains loses its
 * access); the first installs the handler. At most FAULT_EXPLAINERS. */
void fault_explain_with(fault_explainer_t explain);

/* The first line of a report: "dpmalloc: <what> at <addr> (<source>):
 * the <size>-byte block at <block>". */
void fault_report(const char *what, uintptr_t addr, const char *source, size_t size, uintptr_t block);

#endif
