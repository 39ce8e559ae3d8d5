/* usage.c — load/save of expert usage statistics (see usage.h). */
#include "usage.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "petrel.h" /* PT_FILE_PATH_MAX */

#define USAGE_MAGIC "PTUSAGE"
#define USAGE_VERSION 1

int usage_init(usage_table *u, int n_layers, const int *n_expert) {
    memset(u, 0, sizeof *u);
    u->n_layers = n_layers;
    u->n_expert = calloc((size_t)(n_layers > 0 ? n_layers : 1), sizeof(int));
    u->count = calloc((size_t)(n_layers > 0 ? n_layers : 1), sizeof(uint64_t *));
    if (!u->n_expert || !u->count) return -1;
    for (int l = 0; l < n_layers; l++) {
        u->n_expert[l] = n_expert[l];
        u->count[l] = calloc((size_t)(n_expert[l] > 0 ? n_expert[l] : 1), sizeof(uint64_t));
        if (!u->count[l]) return -1;
    }
    return 0;
}

void usage_free(usage_table *u) {
    for (int l = 0; u->count && l < u->n_layers; l++)
        free(u->count[l]);
    free(u->count);
    free(u->n_expert);
    memset(u, 0, sizeof *u);
}

int usage_load(usage_table *u, const char *path, const uint8_t fp[32]) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    char magic[8];
    uint32_t version, n_layers;
    uint8_t got_fp[32];
    int ok = fread(magic, 8, 1, f) == 1 && !memcmp(magic, USAGE_MAGIC, 8) &&
             fread(&version, 4, 1, f) == 1 && version == USAGE_VERSION &&
             fread(&n_layers, 4, 1, f) == 1 && (int)n_layers == u->n_layers &&
             fread(got_fp, 32, 1, f) == 1 && !memcmp(got_fp, fp, 32);
    for (int l = 0; ok && l < u->n_layers; l++) {
        uint32_t ne;
        ok = fread(&ne, 4, 1, f) == 1 && (int)ne == u->n_expert[l];
    }
    uint64_t **tmp = NULL;
    if (ok) {
        /* read everything before touching the table: a short file changes nothing */
        tmp = calloc((size_t)u->n_layers, sizeof *tmp);
        for (int l = 0; tmp && ok && l < u->n_layers; l++) {
            tmp[l] = calloc((size_t)u->n_expert[l] + 1, sizeof(uint64_t));
            ok = tmp[l] && fread(tmp[l], sizeof(uint64_t), (size_t)u->n_expert[l], f) ==
                               (size_t)u->n_expert[l];
        }
        ok = ok && tmp && fgetc(f) == EOF;
        for (int l = 0; ok && l < u->n_layers; l++)
            for (int e = 0; e < u->n_expert[l]; e++)
                u->count[l][e] += tmp[l][e];
        for (int l = 0; tmp && l < u->n_layers; l++)
            free(tmp[l]);
        free(tmp);
    }
    fclose(f);
    return ok ? 1 : 0;
}

int usage_save(const usage_table *u, const char *path, const uint8_t fp[32], pt_err *err) {
    char tmp[PT_FILE_PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) return pt_errf(err, "%s: cannot write usage statistics: %s", tmp, strerror(errno));
    uint32_t version = USAGE_VERSION, n_layers = (uint32_t)u->n_layers;
    int ok = fwrite(USAGE_MAGIC "\0", 8, 1, f) == 1 && fwrite(&version, 4, 1, f) == 1 &&
             fwrite(&n_layers, 4, 1, f) == 1 && fwrite(fp, 32, 1, f) == 1;
    for (int l = 0; ok && l < u->n_layers; l++) {
        uint32_t ne = (uint32_t)u->n_expert[l];
        ok = fwrite(&ne, 4, 1, f) == 1;
    }
    for (int l = 0; ok && l < u->n_layers; l++)
        ok = fwrite(u->count[l], sizeof(uint64_t), (size_t)u->n_expert[l], f) ==
             (size_t)u->n_expert[l];
    ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return pt_errf(err, "%s: cannot write usage statistics: %s", path, strerror(errno));
    }
    return 0;
}
