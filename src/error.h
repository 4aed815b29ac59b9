/*
 * error.h - how dpmalloc speaks when something is wrong.
 * Owns: messages on stderr (without allocating) and aborting on misuse.
 * May call: write(2), abort(3). Nothing of the allocator itself.
 */
#ifndef DPM_ERROR_H
#define DPM_ERROR_H

#include <stddef.h>

/* Report misuse of a block ("free(): invalid pointer 0x...") and abort. */
void dpm_misuse(const char *call, const void *ptr, const char *what) __attribute__((noreturn, cold));
/* One warning line, "dpmalloc: <a><b><c>\n"; any part may be NULL. */
void dpm_warn3(const char *a, const char *b, const char *c);
/* Format v as 0x... into buf (at least 19 bytes); returns buf. */
char *dpm_format_hex(char *buf, size_t v);
/* Format v in decimal into buf (at least 21 bytes); returns buf. */
char *dpm_format_dec(char *buf, size_t v);
void dpm_write_stderr(const char *s);

#endif
