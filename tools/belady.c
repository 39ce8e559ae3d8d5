/* belady.c — the physical limit of expert streaming for a recorded routing
 * trace: how many experts an optimal (Belady, clairvoyant) cache with the same
 * number of slots per layer would still have to read, the bytes that is, and
 * the time it takes at a given disk bandwidth.
 *
 *   build/belady TRACE MODEL.gguf SLOTS [--bw GBPS] [--pack] [--direct]
 *
 * TRACE is what `petrel generate --trace FILE` writes: one line per layer
 * request, "LAYER E1 E2 ...". Each layer is simulated on its own: at every
 * request the missing experts are read, and afterwards the cache keeps the
 * SLOTS experts (of the old content and this request) whose next use comes
 * soonest — the optimal choice when the future is known. Slot bytes come from
 * the model (as the engine computes them, from the pack with --pack).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/gguf.h"
#include "format/xpack.h"
#include "model/info.h"
#include "runtime/experts.h"

typedef struct req {
    int n;
    int *e;
} req;

typedef struct lay {
    req *r;
    int n, cap;
} lay;

/* Index of the next request after r that uses e, or a large number. */
static int next_use(const lay *L, int r, int e) {
    for (int j = r + 1; j < L->n; j++)
        for (int k = 0; k < L->r[j].n; k++)
            if (L->r[j].e[k] == e) return j;
    return 1 << 30;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: belady TRACE MODEL.gguf SLOTS [--bw GBPS] [--pack] [--direct]\n");
        return 2;
    }
    double bw = 2.0;
    int use_pack = 0, direct = 0;
    for (int i = 4; i < argc; i++) {
        if (!strcmp(argv[i], "--bw") && i + 1 < argc)
            bw = atof(argv[++i]);
        else if (!strcmp(argv[i], "--pack"))
            use_pack = 1;
        else if (!strcmp(argv[i], "--direct"))
            direct = 1;
    }
    const int slots = atoi(argv[3]);
    pt_err err = {{0}};
    gguf_ctx *g = gguf_open(argv[2], &err);
    xp_layer_desc *d = NULL;
    int n_layers = 0;
    if (!g || model_expert_layers(g, &d, &n_layers, &err)) {
        fprintf(stderr, "belady: %s\n", err.msg);
        return 1;
    }
    xpack *pack = NULL;
    if (use_pack) {
        char cand[2][4096];
        xpack_candidates(g->files[0].path, NULL, cand);
        pack = xpack_open(cand[0], g, d, n_layers, &err);
        if (!pack) {
            fprintf(stderr, "belady: %s\n", err.msg);
            return 1;
        }
    }
    FILE *f = fopen(argv[1], "r");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    lay *L = calloc((size_t)n_layers, sizeof *L);
    char line[65536];
    long n_req = 0;
    while (fgets(line, sizeof line, f)) {
        char *p = line, *end;
        long l = strtol(p, &end, 10);
        if (end == p || l < 0 || l >= n_layers || !d[l].n_mats) continue;
        p = end;
        req q = {0, malloc(sizeof(int) * 4096)};
        for (long e; (e = strtol(p, &end, 10)), end != p; p = end)
            if (q.n < 4096) q.e[q.n++] = (int)e;
        lay *Y = &L[l];
        if (Y->n == Y->cap) {
            Y->cap = Y->cap ? 2 * Y->cap : 256;
            Y->r = realloc(Y->r, sizeof(req) * (size_t)Y->cap);
        }
        Y->r[Y->n++] = q;
        n_req++;
    }
    fclose(f);
    uint64_t misses = 0, bytes = 0, requests = 0;
    int tokens = 0;
    for (int l = 0; l < n_layers; l++) {
        lay *Y = &L[l];
        if (!Y->n) continue;
        if (Y->n > tokens) tokens = Y->n;
        const uint64_t sb = xs_slot_bytes(&d[l], pack, l, direct);
        int *cache = malloc(sizeof(int) * (size_t)(slots + 4096)), nc = 0;
        for (int r = 0; r < Y->n; r++) {
            const req *q = &Y->r[r];
            for (int k = 0; k < q->n; k++) {
                int hit = 0;
                for (int c = 0; c < nc && !hit; c++)
                    hit = cache[c] == q->e[k];
                requests++;
                if (!hit) {
                    misses++;
                    bytes += sb;
                    cache[nc++] = q->e[k];
                }
            }
            /* keep the `slots` entries used soonest */
            while (nc > slots) {
                int worst = 0, worst_next = -1;
                for (int c = 0; c < nc; c++) {
                    int nu = next_use(Y, r, cache[c]);
                    if (nu > worst_next) worst_next = nu, worst = c;
                }
                cache[worst] = cache[--nc];
            }
        }
        free(cache);
    }
    printf(
        "belady: %d slots/layer, %llu requests (%d per layer at most), %llu misses (hit rate "
        "%.1f%%), "
        "%.3f GB to read; at %.2f GB/s that is %.3f s, %.2f s per request row, bound %.2f rows/s\n",
        slots, (unsigned long long)requests, tokens, (unsigned long long)misses,
        requests ? 100.0 * (double)(requests - misses) / (double)requests : 0.0, bytes / 1e9, bw,
        bytes / 1e9 / bw, tokens ? bytes / 1e9 / bw / tokens : 0.0,
        bytes ? tokens / (bytes / 1e9 / bw) : 0.0);
    (void)n_req;
    return 0;
}
