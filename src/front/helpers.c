/* helpers.c — the front ends' shared helpers: whole files, token-id lists, UTF-8 character
 * lengths, the folders above a file. See helpers.h. */
#include "front/helpers.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int fe_read_file(const char *path, size_t max, pt_buf *out) {
    const int std = !path || !strcmp(path, "-");
    FILE *f = std ? stdin : fopen(path, "rb");
    if (!f) return -1;
    out->n = 0;
    int rc = pt_buf_append(out, "", 0) ? (errno = ENOMEM, -1) : 0;
    char chunk[65536];
    while (rc == 0) {
        const size_t got = fread(chunk, 1, sizeof chunk, f);
        if (max && got > max - out->n)
            errno = EFBIG, rc = -1;
        else if (got && pt_buf_append(out, chunk, got))
            errno = ENOMEM, rc = -1;
        if (got < sizeof chunk) break;
    }
    if (rc == 0 && ferror(f)) errno = EIO, rc = -1;
    if (!std) fclose(f);
    return rc;
}

static int is_sep(char c) {
    return c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

int fe_parse_ids(const char *s, pt_ids *ids) {
    for (const char *p = s;;) {
        while (is_sep(*p))
            p++;
        if (!*p) return 0;
        int64_t x = 0;
        const char *d = p;
        while (*p >= '0' && *p <= '9' && x <= INT32_MAX)
            x = 10 * x + (*p++ - '0');
        if (p == d || x > INT32_MAX || (*p && !is_sep(*p))) return -1;
        if (pt_ids_push(ids, (int32_t)x)) return -1;
    }
}

size_t fe_utf8_len(const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    if (!n) return 0;
    if (p[0] < 0x80) return 1;
    const size_t len = p[0] >= 0xF0 && p[0] <= 0xF4  ? 4
                       : p[0] >= 0xE0 && p[0] < 0xF0 ? 3
                       : p[0] >= 0xC2 && p[0] < 0xE0 ? 2
                                                     : 0;
    if (!len || len > n) return 0;
    for (size_t i = 1; i < len; i++)
        if ((p[i] & 0xC0) != 0x80) return 0;
    if (len == 3 && p[0] == 0xE0 && p[1] < 0xA0) return 0;  /* overlong */
    if (len == 3 && p[0] == 0xED && p[1] >= 0xA0) return 0; /* surrogate */
    if (len == 4 && ((p[0] == 0xF0 && p[1] < 0x90) || (p[0] == 0xF4 && p[1] >= 0x90))) return 0;
    return len;
}

int fe_mkdirs_for(const char *path) {
    char d[PT_PATH_MAX];
    if (snprintf(d, sizeof d, "%s", path) >= (int)sizeof d) return errno = ENAMETOOLONG, -1;
    char *slash = strrchr(d, '/');
    if (!slash || slash == d) return 0;
    *slash = 0;
    for (char *p = d + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(d, 0755) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    return mkdir(d, 0755) != 0 && errno != EEXIST ? -1 : 0;
}
