/*
 * ctl_docs.c - docs/ctl.md and the dpm_ctl name table agree.
 *
 * Proves: every name documented in docs/ctl.md (table rows "| `name` |
 * type | access | meaning |") resolves (dpm_ctl does not answer ENOENT,
 * with <i>/<j>/<k> replaced by 0); every readable one ("r-", "rw") reads
 * with exactly sizeof(documented type); every pattern of the
 * implementation's table (src/ctl.h ctl_node_count/ctl_node_at) is
 * documented; every r- name refuses writes (EPERM), every readable name
 * refuses a read of the wrong size and every writable one a write of the
 * wrong size (EINVAL), every action refuses oldp/newp (EINVAL); and
 * documented type and access equal the table's, whose
 * type column must be a C type (ctl.h: "C type of the value").
 * Links dpmalloc_plain with src/ on the include path; label sanitize.
 *
 * usage: test_ctl_docs <path to docs/ctl.md>
 */
#include "test.h"
#include "ctl_util.h"
#include "ctl.h"

#include <stdbool.h>
#include <sys/types.h>

#define MAX_DOC 256

struct doc_row {
    char pattern[128];   /* with '#' for <i>, <j>, <k> */
    char name[128];      /* with 0 for each index */
    char type[32];
    char access[4];
    int line;
};
static struct doc_row doc[MAX_DOC];
static unsigned ndoc;
static const char *doc_path;

static bool parse_doc(void)
{
    FILE *f = fopen(doc_path, "r");
    if (f == NULL) {
        TEST_FAIL("cannot open %s: %s", doc_path, strerror(errno));
        return false;
    }
    char line[1024];
    int lineno = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        lineno++;
        if (strncmp(line, "| `", 3) != 0)
            continue;
        char *cols[4];
        char *p = line + 1;
        int n = 0;
        while (n < 4) {
            char *bar = strchr(p, '|');
            if (bar == NULL)
                break;
            *bar = '\0';
            cols[n++] = p;
            p = bar + 1;
        }
        if (n < 4) {
            TEST_FAIL("%s:%d: a table row needs name, type, access, meaning", doc_path, lineno);
            continue;
        }
        for (int i = 0; i < 4; i++)
            trim_chars(cols[i], " \t");
        size_t len = strlen(cols[0]);
        if (len < 3 || cols[0][0] != '`' || cols[0][len - 1] != '`' || ndoc >= MAX_DOC) {
            TEST_FAIL("%s:%d: bad name cell \"%s\"", doc_path, lineno, cols[0]);
            continue;
        }
        struct doc_row *r = &doc[ndoc++];
        cols[0][len - 1] = '\0';
        const char *src = cols[0] + 1;
        size_t pi = 0, ni = 0;
        while (*src != '\0' && pi < sizeof r->pattern - 2 && ni < sizeof r->name - 2) {
            if (src[0] == '<' && (src[1] == 'i' || src[1] == 'j' || src[1] == 'k') && src[2] == '>') {
                r->pattern[pi++] = '#';
                r->name[ni++] = '0';
                src += 3;
            } else {
                r->pattern[pi++] = *src;
                r->name[ni++] = *src++;
            }
        }
        snprintf(r->type, sizeof r->type, "%s", cols[1]);
        snprintf(r->access, sizeof r->access, "%s", cols[2]);
        r->line = lineno;
        if (strlen(cols[3]) < 3)
            TEST_FAIL("%s:%d: %s has no meaning", doc_path, lineno, r->pattern);
    }
    fclose(f);
    return ndoc > 0;
}

static size_t size_of_type(const char *t)
{
    static const struct {
        const char *name;
        size_t size;
    } types[] = {{"bool", sizeof(bool)},       {"unsigned", sizeof(unsigned)}, {"uint32_t", sizeof(uint32_t)},
                 {"uint64_t", sizeof(uint64_t)}, {"size_t", sizeof(size_t)},   {"ssize_t", sizeof(ssize_t)},
                 {"const char *", sizeof(const char *)}, {"uint64_t *", sizeof(uint64_t *)},
                 {"void", 0}};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (strcmp(t, types[i].name) == 0)
            return types[i].size;
    return (size_t)-1;
}

static const struct doc_row *doc_find(const char *pattern)
{
    for (unsigned i = 0; i < ndoc; i++)
        if (strcmp(doc[i].pattern, pattern) == 0)
            return &doc[i];
    return NULL;
}

TEST(doc_parses)
{
    EXPECT(parse_doc(), "no table rows found in %s", doc_path);
    for (unsigned i = 0; i < ndoc; i++) {
        EXPECT(size_of_type(doc[i].type) != (size_t)-1, "%s:%d: %s: \"%s\" is not a known C type", doc_path,
               doc[i].line, doc[i].pattern, doc[i].type);
        const char *a = doc[i].access;
        EXPECT(strcmp(a, "r-") == 0 || strcmp(a, "rw") == 0 || strcmp(a, "-w") == 0 || strcmp(a, "--") == 0,
               "%s:%d: %s: access \"%s\"", doc_path, doc[i].line, doc[i].pattern, a);
        for (unsigned k = 0; k < i; k++)
            EXPECT(strcmp(doc[k].pattern, doc[i].pattern) != 0, "%s documented twice (lines %d, %d)",
                   doc[i].pattern, doc[k].line, doc[i].line);
    }
}

TEST(every_documented_name_resolves)
{
    ctl_refresh();   /* stats.arenas.0.* exist in the snapshot */
    for (unsigned i = 0; i < ndoc; i++) {
        const struct doc_row *r = &doc[i];
        /* all-NULL call: never ENOENT for a known name (actions run: on
         * arena 0 purge/decay are harmless, reset/destroy are EPERM) */
        int e = dpm_ctl(r->name, NULL, NULL, NULL, 0);
        EXPECT(e != ENOENT, "%s:%d: documented name %s: dpm_ctl gives ENOENT", doc_path, r->line, r->name);
        size_t size = size_of_type(r->type);
        if (r->access[0] != 'r' || size == 0 || size == (size_t)-1)
            continue;
        /* names that need an input value, and arenas.create (reading it
         * creates an arena) */
        if (strcmp(r->name, "arenas.lookup") == 0 ||
            strcmp(r->name, "thread.tcache.ncached_max.read_sizeclass") == 0)
            continue;
        unsigned char buf[16];
        size_t len = size;
        e = dpm_ctl(r->name, buf, &len, NULL, 0);
        EXPECT(e == 0, "%s:%d: %s read as %s (%zu bytes) gives %d", doc_path, r->line, r->name, r->type, size, e);
        if (strcmp(r->name, "arenas.create") == 0 && e == 0) {
            unsigned idx;
            memcpy(&idx, buf, sizeof idx);
            ctl_action(ctl_name("arena.%u.destroy", idx));
        }
    }
}

/* Access and sizes, for every documented name (index 0 where there is
 * one): r- names refuse writes with EPERM; readable names refuse a read of
 * the wrong size with EINVAL; writable names refuse a write of the wrong
 * size with EINVAL (before acting); actions refuse oldp and newp. */
TEST(access_enforced_for_every_documented_name)
{
    ctl_refresh();
    for (unsigned i = 0; i < ndoc; i++) {
        const struct doc_row *r = &doc[i];
        size_t size = size_of_type(r->type);
        if (size == (size_t)-1)
            continue;
        unsigned char buf[32], val[32];
        memset(val, 0, sizeof val);
        if (strcmp(r->access, "--") == 0) {
            size_t len = sizeof(unsigned);
            int e1 = dpm_ctl(r->name, buf, &len, NULL, 0);
            int e2 = dpm_ctl(r->name, NULL, NULL, val, sizeof(unsigned));
            EXPECT(e1 == EINVAL && e2 == EINVAL, "action %s: with oldp %d, with newp %d (expected EINVAL)", r->name,
                   e1, e2);
            continue;
        }
        if (r->access[0] == 'r' && strcmp(r->name, "arenas.lookup") != 0 &&
            strcmp(r->name, "thread.tcache.ncached_max.read_sizeclass") != 0) {
            size_t len = size + 1;
            int e = dpm_ctl(r->name, buf, &len, NULL, 0);
            EXPECT(e == EINVAL, "%s: read with %zu bytes (type %s) gave %d, expected EINVAL", r->name, size + 1,
                   r->type, e);
        }
        if (strcmp(r->access, "r-") == 0) {
            int e = dpm_ctl(r->name, NULL, NULL, val, size);
            EXPECT(e == EPERM, "read-only %s: write gave %d, expected EPERM", r->name, e);
        } else {
            /* rw / -w: a value one byte too long is refused before anything
             * happens (arenas.create makes no arena, and so on) */
            unsigned before = CTL_UNS("arenas.narenas");
            size_t len = size;
            int e = r->access[0] == 'r' && strcmp(r->name, "arenas.lookup") != 0 &&
                            strcmp(r->name, "thread.tcache.ncached_max.read_sizeclass") != 0
                        ? dpm_ctl(r->name, buf, &len, val, size + 1)
                        : dpm_ctl(r->name, NULL, NULL, val, size + 1);
            EXPECT(e == EINVAL, "writable %s: write of %zu bytes (type %s) gave %d, expected EINVAL", r->name,
                   size + 1, r->type, e);
            EXPECT_EQ_U(CTL_UNS("arenas.narenas"), before);
        }
    }
}

TEST(every_table_pattern_documented)
{
    unsigned n = ctl_node_count();
    EXPECT(n > 0, "empty ctl table");
    for (unsigned i = 0; i < n; i++) {
        const ctl_node_t *node = ctl_node_at(i);
        const struct doc_row *r = doc_find(node->pattern);
        EXPECT(r != NULL, "%s (%s, %s) is not documented in %s", node->pattern, node->type, node->access,
               doc_path);
        if (r != NULL)
            EXPECT(strcmp(r->access, node->access) == 0, "%s: access \"%s\" in the table, \"%s\" in %s:%d",
                   node->pattern, node->access, r->access, doc_path, r->line);
    }
    for (unsigned i = 0; i < ndoc; i++) {
        bool found = false;
        for (unsigned k = 0; k < n && !found; k++)
            found = strcmp(ctl_node_at(k)->pattern, doc[i].pattern) == 0;
        EXPECT(found, "%s:%d: %s is documented but not in the table", doc_path, doc[i].line, doc[i].pattern);
    }
}

/* ctl.h: ctl_node_t.type is "C type of the value, or void". */
TEST(table_types_are_the_documented_c_types)
{
    unsigned n = ctl_node_count(), bad = 0;
    char first[512] = "";
    for (unsigned i = 0; i < n; i++) {
        const ctl_node_t *node = ctl_node_at(i);
        const struct doc_row *r = doc_find(node->pattern);
        if (r == NULL)
            continue;
        if (strcmp(r->type, node->type) != 0) {
            if (bad++ < 4) {
                size_t l = strlen(first);
                snprintf(first + l, sizeof first - l, "\n      %s: table \"%s\", doc \"%s\"", node->pattern,
                         node->type, r->type);
            }
        }
    }
    EXPECT(bad == 0, "%u of %u ctl_node_t.type strings differ from the documented C type:%s%s", bad, n, first,
           bad > 4 ? "\n      ..." : "");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s <docs/ctl.md>\n", argv[0]);
        return 2;
    }
    doc_path = argv[1];
    void *warm = dpm_malloc(1);
    dpm_free(warm);
    RUN(doc_parses);
    RUN(every_documented_name_resolves);
    RUN(access_enforced_for_every_documented_name);
    RUN(every_table_pattern_documented);
    RUN(table_types_are_the_documented_c_types);
    return test_done();
}
