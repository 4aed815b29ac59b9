/*
 * emitter.h - one writer for statistics as text tables or JSON. Callers
 * describe the data once (objects, key/values, tables of rows); the
 * emitter renders it in the chosen form, so JSON and text never drift.
 * Owns: formatting. May call: snprintf and the caller's write callback.
 */
#ifndef DPM_EMITTER_H
#define DPM_EMITTER_H

#include "util.h"

#define EM_MAX_DEPTH 12
#define EM_MAX_COLS 24

typedef void (*em_write_fn)(void *opaque, const char *text);

typedef struct emitter {
    bool json;
    em_write_fn write;
    void *opaque;
    int depth;
    bool need_comma[EM_MAX_DEPTH];
    const char *const *cols;     /* current table's column names */
    unsigned ncols, col;
    int widths[EM_MAX_COLS];
} emitter_t;

void em_init(emitter_t *em, bool json, em_write_fn write, void *opaque);
void em_finish(emitter_t *em);
void em_obj_begin(emitter_t *em, const char *key);
void em_obj_end(emitter_t *em);
void em_u64(emitter_t *em, const char *key, uint64_t v);
void em_i64(emitter_t *em, const char *key, int64_t v);
void em_double(emitter_t *em, const char *key, double v);
void em_str(emitter_t *em, const char *key, const char *v);
void em_bool(emitter_t *em, const char *key, bool v);
/* A table: text prints a header and one line per row; JSON an array of
 * objects keyed by the column names. */
void em_table_begin(emitter_t *em, const char *key, const char *const *cols, unsigned ncols);
void em_row_begin(emitter_t *em);
void em_cell_u64(emitter_t *em, uint64_t v);
void em_cell_double(emitter_t *em, double v);
void em_cell_str(emitter_t *em, const char *v);
void em_row_end(emitter_t *em);
void em_table_end(emitter_t *em);

#endif
