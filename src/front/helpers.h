/* helpers.h — the small helpers the front ends share, one copy of each: reading a whole file
 * (or standard input), a list of token ids, the length of one UTF-8 character, the folders above
 * a file made. The clock they use is the public pt_now, their growable buffers the public
 * pt_buf and pt_ids.
 *
 * Like the rest of src/front, this includes only petrel.h and system headers; nothing here
 * prints or exits. */
#ifndef PT_FRONT_HELPERS_H
#define PT_FRONT_HELPERS_H

#include <stddef.h>
#include <stdint.h>

#include "petrel.h"

/* The whole of path ("-" or NULL: standard input) into out, emptied first: NUL-terminated, n
 * its length, the bytes as they are (NULs included). max bounds the bytes read (0: no bound).
 * 0, or -1 with errno: what fopen said, EIO (a read error), EFBIG (longer than max), ENOMEM. */
int fe_read_file(const char *path, size_t max, pt_buf *out);

/* The token ids of s appended to ids: decimal numbers from 0 to INT32_MAX separated by commas
 * and blanks (spaces, tabs, newlines; "1,2,3", "1 2 3" and a file's lines alike). 0, or -1 at
 * anything else (a sign, a letter, a number out of range) or out of memory; the ids parsed
 * before stay in ids. An empty list is 0 with nothing appended. */
int fe_parse_ids(const char *s, pt_ids *ids);

/* Bytes of the well-formed UTF-8 character that starts p[0..n) (shortest form, no surrogate,
 * at most U+10FFFF: 1 to 4), or 0 when the bytes there are not one. */
size_t fe_utf8_len(const char *p, size_t n);

/* mkdir -p of the folder that holds path (its last component is a file). 0, or -1 with
 * errno (ENAMETOOLONG: longer than PT_PATH_MAX). */
int fe_mkdirs_for(const char *path);

#endif
