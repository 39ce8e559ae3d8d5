/* usage.h — persistent expert usage statistics: how often each (layer, expert)
 * was requested, accumulated across runs of the same model.
 *
 * The engine loads them at open to pin the hottest experts into part of the
 * cache budget, and saves them at close. The file is tied to one model by its
 * fingerprint (see xpack.h) and written atomically (temporary file, fsync,
 * rename), so a crash never leaves a torn file; a file for another model, or a
 * damaged one, is ignored.
 *
 * Format (little-endian): "PTUSAGE\0", u32 version 1, u32 n_layers,
 * u8 fingerprint[32], per layer u32 n_expert, then u64 counts, layer-major.
 */
#ifndef PT_RUNTIME_USAGE_H
#define PT_RUNTIME_USAGE_H

#include <stdint.h>

#include "common.h"

typedef struct usage_table {
    int n_layers;
    int *n_expert;    /* [n_layers] (0 for dense layers) */
    uint64_t **count; /* [n_layers][n_expert] */
} usage_table;

/* Allocate a zeroed table for the given layer shapes. 0 or -1. */
int usage_init(usage_table *u, int n_layers, const int *n_expert);
void usage_free(usage_table *u);

/* Add the counts stored at path when the file matches fingerprint and shape.
 * Returns 1 when history was loaded, 0 when there is none or it does not match. */
int usage_load(usage_table *u, const char *path, const uint8_t fingerprint[32]);

/* Write the table atomically. 0, or -1 with err. */
int usage_save(const usage_table *u, const char *path, const uint8_t fingerprint[32], pt_err *err);

#endif
