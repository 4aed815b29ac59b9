/*
 * error.c - messages and aborts (see error.h). Uses only write(2) so that it
 * works from inside the allocator, with locks held and no heap to use.
 */
#include "error.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void dpm_write_stderr(const char *s)
{
    size_t len = strlen(s);
    while (len > 0) {
        ssize_t n = write(STDERR_FILENO, s, len);
        if (n <= 0)
            return;
        s += n;
        len -= (size_t)n;
    }
}

char *dpm_format_hex(char *buf, size_t v)
{
    char tmp[16];
    int n = 0;
    do {
        tmp[n++] = "0123456789abcdef"[v & 15];
        v >>= 4;
    } while (v != 0);
    buf[0] = '0';
    buf[1] = 'x';
    for (int i = 0; i < n; i++)
        buf[2 + i] = tmp[n - 1 - i];
    buf[2 + n] = '\0';
    return buf;
}

char *dpm_format_dec(char *buf, size_t v)
{
    char tmp[21];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    for (int i = 0; i < n; i++)
        buf[i] = tmp[n - 1 - i];
    buf[n] = '\0';
    return buf;
}

void dpm_warn3(const char *a, const char *b, const char *c)
{
    char line[512] = "dpmalloc: ";
    const char *parts[3] = {a, b, c};
    for (int i = 0; i < 3; i++)
        if (parts[i] != NULL)
            strncat(line, parts[i], sizeof(line) - strlen(line) - 2);
    strcat(line, "\n");
    dpm_write_stderr(line);
}

void dpm_misuse(const char *call, const void *ptr, const char *what)
{
    char hex[24];
    char line[256] = "dpmalloc: ";
    strncat(line, call, 64);
    strcat(line, "(): ");
    strncat(line, what, 96);
    strcat(line, " ");
    strcat(line, dpm_format_hex(hex, (size_t)ptr));
    strcat(line, "\n");
    dpm_write_stderr(line);
    abort();
}

void dpm_assert_fail(const char *expr, const char *file, int line)
{
    char num[24];
    char msg[384] = "dpmalloc: internal check failed: ";
    strncat(msg, expr, 200);
    strcat(msg, " at ");
    strncat(msg, file, 100);
    strcat(msg, ":");
    strcat(msg, dpm_format_dec(num, (size_t)line));
    strcat(msg, "\n");
    dpm_write_stderr(msg);
    abort();
}
