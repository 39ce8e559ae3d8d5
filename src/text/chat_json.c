/* chat_json.c — JSON written byte for byte as the chat templates write it:
 * Jinja's `tojson`, i.e. Python's json.dumps with ensure_ascii off (", " and
 * ": " separators, key order kept, UTF-8 unescaped, DEL and controls as
 * \u00XX). The model saw tool schemas and arguments in exactly this form.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "text/chat_fmt.h"

/* Python's repr of a float, near enough: the shortest %.Ng that reads back,
 * with ".0" when it looks like an integer; NaN and infinities as json.dumps. */
int chat_json_real(double d, tok_bytes *out) {
    char buf[64];
    if (isnan(d)) return bput_str(out, "NaN");
    if (isinf(d)) return bput_str(out, d > 0 ? "Infinity" : "-Infinity");
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, d);
        if (strtod(buf, NULL) == d) break;
    }
    if (!strpbrk(buf, ".eEn")) strcat(buf, ".0");
    return bput_str(out, buf);
}

/* A JSON string literal with json.dumps(ensure_ascii=False)'s escapes. */
static int dump_string(const char *s, size_t n, tok_bytes *out) {
    if (bput(out, "\"", 1)) return -1;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[8];
        const char *e = NULL;
        switch (c) {
        case '"': e = "\\\""; break;
        case '\\': e = "\\\\"; break;
        case '\n': e = "\\n"; break;
        case '\r': e = "\\r"; break;
        case '\t': e = "\\t"; break;
        case '\b': e = "\\b"; break;
        case '\f': e = "\\f"; break;
        default:
            if (c < 0x20 || c == 0x7f) {
                snprintf(esc, sizeof esc, "\\u%04x", c);
                e = esc;
            }
        }
        if (e ? bput_str(out, e) : bput(out, (const char *)&s[i], 1)) return -1;
    }
    return bput(out, "\"", 1);
}

int chat_json_dump(const json_t *j, tok_bytes *out) {
    char buf[32];
    switch (json_typeof(j)) {
    case JSON_OBJECT: {
        if (bput(out, "{", 1)) return -1;
        const char *k;
        json_t *v;
        int first = 1;
        json_object_foreach((json_t *)j, k, v) {
            if ((!first && bput_str(out, ", ")) || dump_string(k, strlen(k), out) ||
                bput_str(out, ": ") || chat_json_dump(v, out))
                return -1;
            first = 0;
        }
        return bput(out, "}", 1);
    }
    case JSON_ARRAY: {
        if (bput(out, "[", 1)) return -1;
        size_t i;
        json_t *v;
        json_array_foreach(j, i, v) {
            if ((i && bput_str(out, ", ")) || chat_json_dump(v, out)) return -1;
        }
        return bput(out, "]", 1);
    }
    case JSON_STRING: return dump_string(json_string_value(j), json_string_length(j), out);
    case JSON_INTEGER:
        snprintf(buf, sizeof buf, "%lld", (long long)json_integer_value(j));
        return bput_str(out, buf);
    case JSON_REAL: return chat_json_real(json_real_value(j), out);
    case JSON_TRUE: return bput_str(out, "true");
    case JSON_FALSE: return bput_str(out, "false");
    case JSON_NULL: return bput_str(out, "null");
    }
    return -1;
}
