/*
 * background.h - the optional background thread ("background_thread")
 * that runs decay for every arena on a timer, so that a program which
 * goes idle still returns its free pages to the OS.
 * Owns: the thread and its wake-ups. May call: arena, pages, os.
 */
#ifndef DPM_BACKGROUND_H
#define DPM_BACKGROUND_H

#include "util.h"

/* Ask for the thread on (true) or off. Starting is deferred to the next
 * slow-path call (never under an allocator lock); stopping joins it.
 * Returns 0 or an errno value. */
int background_set(bool on);
bool background_enabled(void);
/* opt.background_thread: the thread starts at the first allocation slow
 * path, or the first call that names an arena, a type or a node. */
void background_request_at_start(void);
/* background_thread not given: the thread starts at the first allocation
 * slow path that runs while the process has more than one thread, sleeps
 * without wake-ups while nothing is left to decay (a free slow path wakes
 * it: background_wake), and ends when no thread that allocates is left,
 * so that memory freed by a program that then goes quiet goes back
 * without any option set. A single-threaded process gets no thread (its
 * slow paths run decay themselves, and a helper thread would make every
 * elided lock a real one). */
void background_request_when_threaded(void);
/* The automatic thread sleeps with nothing to decay (free slow paths
 * test it) ... */
extern bool background_idle;
/* ... and this wakes it: no lock, one system call per idle spell. */
void background_wake(void);
/* Starts the thread if it was asked for and is not running; called from
 * allocation slow paths with no lock held. */
void background_maybe_start(void);
/* A start is due (the slow paths test it): read and written with relaxed
 * atomics, as a thread that toggles background_thread writes it while
 * others allocate; a slow path that misses a fresh request sees it at
 * its next one. */
extern bool background_pending;
void background_prefork(void);
void background_postfork_parent(void);
void background_postfork_child(void);

#endif
