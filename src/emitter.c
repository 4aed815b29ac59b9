/*
 * emitter.c - text/JSON rendering (see emitter.h).
 */
#include "emitter.h"

#include <stdio.h>
#include <string.h>

void em_init(emitter_t *em, bool json, em_write_fn write, void *opaque)
{
    memset(em, 0, sizeof(*em));
    em->json = json;
    em->write = write;
    em->opaque = opaque;
    if (json)
        write(opaque, "{");
}

void em_finish(emitter_t *em)
{
    if (em->json)
        em->write(em->opaque, "\n}\n");
}

static void put(emitter_t *em, const char *s) { em->write(em->opaque, s); }

static void indent(emitter_t *em)
{
    static const char spaces[] = "                                                ";
    int n = (em->json ? em->depth + 1 : em->depth) * 2;
    if (n > (int)sizeof(spaces) - 1)
        n = (int)sizeof(spaces) - 1;
    put(em, spaces + sizeof(spaces) - 1 - n);
}

static void put_json_string(emitter_t *em, const char *s)
{
    char buf[256];
    size_t n = 0;
    buf[n++] = '"';
    for (; *s != '\0' && n < sizeof(buf) - 8; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') {
            buf[n++] = '\\';
            buf[n++] = (char)ch;
        } else if (ch < 0x20) {
            n += (size_t)snprintf(buf + n, sizeof(buf) - n, "\\u%04x", ch);
        } else {
            buf[n++] = (char)ch;
        }
    }
    buf[n++] = '"';
    buf[n] = '\0';
    put(em, buf);
}

/* JSON: comma and newline before a member, then its key. */
static void json_key(emitter_t *em, const char *key)
{
    if (em->need_comma[em->depth])
        put(em, ",");
    put(em, "\n");
    em->need_comma[em->depth] = true;
    indent(em);
    if (key != NULL) {
        put_json_string(em, key);
        put(em, ": ");
    }
}

void em_obj_begin(emitter_t *em, const char *key)
{
    if (em->json) {
        json_key(em, key);
        put(em, "{");
    } else {
        indent(em);
        put(em, key);
        put(em, ":\n");
    }
    if (em->depth < EM_MAX_DEPTH - 1)
        em->depth++;
    em->need_comma[em->depth] = false;
}

void em_obj_end(emitter_t *em)
{
    if (em->depth > 0)
        em->depth--;
    if (em->json) {
        put(em, "\n");
        indent(em);
        put(em, "}");
    }
}

static void kv_text(emitter_t *em, const char *key, const char *value)
{
    indent(em);
    put(em, key);
    put(em, ": ");
    put(em, value);
    put(em, "\n");
}

static void kv(emitter_t *em, const char *key, const char *value, bool quote)
{
    if (!em->json) {
        kv_text(em, key, value);
        return;
    }
    json_key(em, key);
    if (quote)
        put_json_string(em, value);
    else
        put(em, value);
}

void em_u64(emitter_t *em, const char *key, uint64_t v)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
    kv(em, key, buf, false);
}

void em_i64(emitter_t *em, const char *key, int64_t v)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%lld", (long long)v);
    kv(em, key, buf, false);
}

static void format_double(char *buf, size_t len, double v)
{
    if (v != v)
        snprintf(buf, len, "0");
    else
        snprintf(buf, len, "%.3f", v);
}

void em_double(emitter_t *em, const char *key, double v)
{
    char buf[48];
    format_double(buf, sizeof(buf), v);
    kv(em, key, buf, false);
}

void em_str(emitter_t *em, const char *key, const char *v) { kv(em, key, v, true); }
void em_bool(emitter_t *em, const char *key, bool v) { kv(em, key, v ? "true" : "false", false); }

/* ---- tables ------------------------------------------------------------ */

void em_table_begin(emitter_t *em, const char *key, const char *const *cols, unsigned ncols)
{
    em->cols = cols;
    em->ncols = ncols > EM_MAX_COLS ? EM_MAX_COLS : ncols;
    if (em->json) {
        json_key(em, key);
        put(em, "[");
        if (em->depth < EM_MAX_DEPTH - 1)
            em->depth++;
        em->need_comma[em->depth] = false;
        return;
    }
    indent(em);
    put(em, key);
    put(em, ":\n");
    indent(em);
    for (unsigned i = 0; i < em->ncols; i++) {
        char buf[64];
        int w = (int)strlen(cols[i]) + 2;
        em->widths[i] = w < 10 ? 10 : w;
        snprintf(buf, sizeof(buf), i == 0 ? "%-*s" : "%*s", em->widths[i], cols[i]);
        put(em, buf);
    }
    put(em, "\n");
}

void em_row_begin(emitter_t *em)
{
    em->col = 0;
    if (em->json) {
        json_key(em, NULL);
        put(em, "{");
    } else {
        indent(em);
    }
}

static void cell(emitter_t *em, const char *value, bool quote)
{
    unsigned i = em->col++;
    if (i >= em->ncols)
        return;
    if (em->json) {
        if (i > 0)
            put(em, ", ");
        put_json_string(em, em->cols[i]);
        put(em, ": ");
        if (quote)
            put_json_string(em, value);
        else
            put(em, value);
        return;
    }
    char buf[96];
    snprintf(buf, sizeof(buf), i == 0 ? "%-*s" : "%*s", em->widths[i], value);
    put(em, buf);
}

void em_cell_u64(emitter_t *em, uint64_t v)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
    cell(em, buf, false);
}

void em_cell_double(emitter_t *em, double v)
{
    char buf[48];
    format_double(buf, sizeof(buf), v);
    cell(em, buf, false);
}

void em_cell_str(emitter_t *em, const char *v) { cell(em, v, true); }

void em_row_end(emitter_t *em) { put(em, em->json ? "}" : "\n"); }

void em_table_end(emitter_t *em)
{
    if (!em->json)
        return;
    if (em->depth > 0)
        em->depth--;
    put(em, "\n");
    indent(em);
    put(em, "]");
}
