/* utf8.c — UTF-8 encoding, llama.cpp's lenient decoding, the two repairs and
 * the streaming decoder's boundary test (see utf8.h for which repair is for
 * what). */
#include "text/utf8.h"

#include <string.h>

int utf8_encode(uint32_t cp, unsigned char *o) {
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

int utf8_seq_len(unsigned char lead) {
    static const unsigned char lut[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return lut[lead >> 4];
}

int utf8_decode_lenient(const unsigned char *s, size_t n, uint32_t *cp) {
    unsigned char c = s[0];
    if (!(c & 0x80)) {
        *cp = c;
        return 1;
    }
    if (!(c & 0x40)) return 0;
    if (!(c & 0x20)) {
        if (n < 2 || (s[1] & 0xC0) != 0x80) return 0;
        *cp = ((uint32_t)(c & 0x1F) << 6) | (s[1] & 0x3F);
        return 2;
    }
    if (!(c & 0x10)) {
        if (n < 3 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80) return 0;
        *cp = ((uint32_t)(c & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
        return 3;
    }
    if (!(c & 0x08)) {
        if (n < 4 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80)
            return 0;
        *cp = ((uint32_t)(c & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) |
              ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
        return 4;
    }
    return 0;
}

size_t utf8_sanitize(const char *text, size_t n, int escape_space, char *out) {
    const unsigned char *s = (const unsigned char *)text;
    unsigned char *o = (unsigned char *)out;
    size_t i = 0, k = 0;
    while (i < n) {
        unsigned char c = s[i];
        if (c < 0x80) {
            if (c == ' ' && escape_space) {
                o[k++] = 0xE2, o[k++] = 0x96, o[k++] = 0x81;
            } else {
                o[k++] = c;
            }
            i++;
            continue;
        }
        uint32_t cp;
        int l = utf8_decode_lenient(s + i, n - i, &cp);
        if (l == 0) {
            cp = 0xFFFD;
            l = 1;
        } else if ((cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) {
            cp = 0xFFFD;
        }
        k += (size_t)utf8_encode(cp, o + k);
        i += (size_t)l;
    }
    return k;
}

int utf8_repair(const char *s, size_t n, tok_bytes *out) {
    static const uint32_t shortest[5] = {0, 0, 0x80, 0x800, 0x10000}; /* by sequence length */
    const unsigned char *u = (const unsigned char *)s;
    int bad = 0;
    out->n = 0;
    if (tok_bytes_append(out, "", 0)) return -1; /* the terminator, even for "" */
    for (size_t i = 0; i < n;) {
        uint32_t cp = 0;
        int l = utf8_decode_lenient(u + i, n - i, &cp);
        int ok = l > 0 && cp != 0 && cp >= shortest[l] && !(cp >= 0xD800 && cp <= 0xDFFF) &&
                 cp <= 0x10FFFF;
        if (tok_bytes_append(out, ok ? s + i : "\xef\xbf\xbd", ok ? (size_t)l : 3)) return -1;
        bad += !ok;
        i += ok ? (size_t)l : 1;
    }
    return bad;
}

int utf8_incomplete_tail(const unsigned char *buf, int n) {
    for (int back = 1; back <= 3 && back <= n; back++) {
        unsigned char c = buf[n - back];
        if ((c & 0xC0) == 0x80) continue; /* continuation: keep looking for the lead */
        int need = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 1;
        if (c >= 0xF5) need = 1;
        return need > back ? back : 0;
    }
    return 0;
}
