/* generate.c — `petrel generate`: run a model on token ids and print the
 * generated ids.
 *
 *   petrel generate -m MODEL.gguf --tokens 1,2,3 -n 16 --greedy [--dump-logits FILE]
 *
 * The ids are fed verbatim (no BOS added); exactly N tokens are generated (no
 * stop at EOS, like llama.cpp's reference runs; -n 0 is allowed) and printed
 * space-separated on one line of stdout. --dump-logits writes the logits of
 * every prompt position as little-endian float32 [n_prompt][n_vocab], the
 * format of the fixtures' reference files. Timing goes to stderr.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "petrel.h"

static void generate_usage(FILE *f) {
    fprintf(f,
            "usage: petrel generate -m MODEL.gguf --tokens ID,ID,... [options]\n"
            "  -m, --model FILE        GGUF model (any part of a split model)\n"
            "  --tokens LIST           prompt token ids, comma-separated, fed verbatim (no BOS)\n"
            "  -n, --max-tokens N      tokens to generate (default 16; exactly N, EOS does not stop)\n"
            "  --greedy, --temp 0      greedy decoding (the only sampler so far)\n"
            "  --dump-logits FILE      write prompt logits, float32 [n_prompt][n_vocab]\n"
            "  -t, --threads N         threads (default: all cores)\n"
            "  -c, --ctx-size N        context positions (default: prompt + N)\n"
            "  -b, --batch-size N      prompt rows per forward chunk (default 64)\n"
            "  --kernels K             best (default), avx512, avx2 or scalar dot-product kernels\n"
            "  --ram GB                memory budget (default: available memory and cgroup limit)\n"
            "  --expert-slots N        stream routed experts through N cache slots per MoE layer\n"
            "  --mmap-experts          read experts through the memory map (no cache of our own)\n"
            "  --expert-policy P       cache replacement: lru (default) or lfu\n"
            "  --io B                  expert reads: auto (default), uring or pread\n"
            "  --buffered-io           read experts through the page cache instead of O_DIRECT\n"
            "  --pack PATH             expert pack to read from (default: MODEL.gguf.xpack if valid)\n"
            "  --no-pack               ignore expert packs, read experts from the GGUF\n"
            "  --pin-gb GB             cache memory for hot experts pinned from usage history\n"
            "                          (default: a quarter of the cache once there is history)\n"
            "  --no-pin                pin nothing\n"
            "  --prefetch              read the next layer's likely experts ahead (router lookahead)\n"
            "  --trace FILE            write the routing trace (one line per layer request)\n"
            "  --stats                 print expert-cache and memory statistics\n");
}

static int parse_int(const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

/* Parse "1,2,3" into a malloc'd array. */
static int parse_tokens(const char *s, int32_t **out, int *n) {
    int cap = 16, k = 0;
    int32_t *a = malloc((size_t)cap * sizeof *a);
    if (!a) return -1;
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (errno || end == p || v < 0 || v > INT32_MAX || (*end && *end != ',')) {
            free(a);
            return -1;
        }
        if (k == cap) {
            cap *= 2;
            int32_t *b = realloc(a, (size_t)cap * sizeof *a);
            if (!b) {
                free(a);
                return -1;
            }
            a = b;
        }
        a[k++] = (int32_t)v;
        p = *end ? end + 1 : end;
        if (*end && !*p) { /* trailing comma */
            free(a);
            return -1;
        }
    }
    *out = a;
    *n = k;
    return 0;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i; /* ties: lowest id, as the references */
    return best;
}

int cmd_generate(int argc, char **argv) {
    const char *model = NULL, *tokens_arg = NULL, *dump = NULL;
    int stats = 0;
    long n_gen = 16, threads = 0, n_ctx = 0, n_batch = 0;
    int kernels = PT_KERNELS_BEST;
    pt_engine_params ep = {.model_path = NULL};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEEDV()                                                                        \
    do {                                                                               \
        if (!v) {                                                                      \
            fprintf(stderr, "petrel generate: %s needs a value\n", a);                 \
            generate_usage(stderr);                                                    \
            return CLI_USAGE;                                                          \
        }                                                                              \
        i++;                                                                           \
    } while (0)
#define BADV()                                                                         \
    do {                                                                               \
        fprintf(stderr, "petrel generate: invalid value '%s' for %s\n", v, a);         \
        return CLI_USAGE;                                                              \
    } while (0)
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            generate_usage(stdout);
            return CLI_OK;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            NEEDV();
            model = v;
        } else if (!strcmp(a, "--tokens")) {
            NEEDV();
            tokens_arg = v;
        } else if (!strcmp(a, "-n") || !strcmp(a, "--max-tokens") || !strcmp(a, "--n-predict")) {
            NEEDV();
            if (parse_int(v, 0, 1 << 24, &n_gen)) BADV();
        } else if (!strcmp(a, "--greedy")) {
        } else if (!strcmp(a, "--temp")) {
            NEEDV();
            if (strtod(v, NULL) != 0.0) {
                fprintf(stderr, "petrel generate: only greedy decoding (--temp 0) is available so far\n");
                return CLI_USAGE;
            }
        } else if (!strcmp(a, "--dump-logits")) {
            NEEDV();
            dump = v;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            NEEDV();
            if (parse_int(v, 1, 1024, &threads)) BADV();
        } else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) {
            NEEDV();
            if (parse_int(v, 1, 1 << 26, &n_ctx)) BADV();
        } else if (!strcmp(a, "--kernels")) {
            NEEDV();
            if (!strcmp(v, "best")) kernels = PT_KERNELS_BEST;
            else if (!strcmp(v, "scalar")) kernels = PT_KERNELS_SCALAR;
            else if (!strcmp(v, "avx2")) kernels = PT_KERNELS_AVX2;
            else if (!strcmp(v, "avx512")) kernels = PT_KERNELS_AVX512;
            else BADV();
        } else if (!strcmp(a, "--expert-slots")) {
            NEEDV();
            long v2;
            if (parse_int(v, 1, 1 << 20, &v2)) BADV();
            ep.expert_slots = (int)v2;
        } else if (!strcmp(a, "--mmap-experts")) {
            ep.expert_slots = PT_EXPERTS_MMAP;
        } else if (!strcmp(a, "--ram")) {
            NEEDV();
            char *end;
            ep.ram_gb = strtod(v, &end);
            if (*end || !(ep.ram_gb > 0)) BADV();
        } else if (!strcmp(a, "--expert-policy")) {
            NEEDV();
            if (!strcmp(v, "lru")) ep.expert_policy = PT_POLICY_LRU;
            else if (!strcmp(v, "lfu")) ep.expert_policy = PT_POLICY_LFU;
            else BADV();
        } else if (!strcmp(a, "--io")) {
            NEEDV();
            if (!strcmp(v, "auto")) ep.io = PT_IO_AUTO;
            else if (!strcmp(v, "uring")) ep.io = PT_IO_URING;
            else if (!strcmp(v, "pread")) ep.io = PT_IO_PREAD;
            else BADV();
        } else if (!strcmp(a, "--pack")) {
            NEEDV();
            ep.pack_path = v;
        } else if (!strcmp(a, "--no-pack")) {
            ep.no_pack = 1;
        } else if (!strcmp(a, "--pin-gb")) {
            NEEDV();
            char *end;
            ep.pin_gb = strtod(v, &end);
            if (*end || !(ep.pin_gb > 0)) BADV();
        } else if (!strcmp(a, "--no-pin")) {
            ep.no_pin = 1;
        } else if (!strcmp(a, "--prefetch")) {
            ep.prefetch = 1;
        } else if (!strcmp(a, "--trace")) {
            NEEDV();
            ep.trace_path = v;
        } else if (!strcmp(a, "--buffered-io")) {
            ep.buffered_io = 1;
        } else if (!strcmp(a, "--stats")) {
            stats = 1;
        } else if (!strcmp(a, "-b") || !strcmp(a, "--batch-size")) {
            NEEDV();
            if (parse_int(v, 1, 1 << 16, &n_batch)) BADV();
        } else {
            fprintf(stderr, "petrel generate: unknown option '%s'\n", a);
            generate_usage(stderr);
            return CLI_USAGE;
        }
#undef NEEDV
#undef BADV
    }
    if (!model || !tokens_arg) {
        fprintf(stderr, "petrel generate: %s is required\n", !model ? "-m MODEL" : "--tokens");
        generate_usage(stderr);
        return CLI_USAGE;
    }
    int32_t *prompt;
    int n_prompt;
    if (parse_tokens(tokens_arg, &prompt, &n_prompt) || n_prompt == 0) {
        fprintf(stderr, "petrel generate: --tokens wants comma-separated non-negative ids, got '%s'\n",
                tokens_arg);
        return CLI_USAGE;
    }
    char err[512];
    double t0 = now_s();
    ep.model_path = model;
    ep.n_threads = (int)threads;
    ep.kernels = kernels;
    pt_engine *e = pt_engine_open(&ep, err, sizeof err);
    if (!e) {
        free(prompt);
        return cli_error("%s", err);
    }
    fprintf(stderr, "petrel: %s\n", pt_engine_plan(e));
    const int nv = pt_engine_n_vocab(e);
    pt_session_params sp = {.n_ctx = n_ctx ? (int)n_ctx : n_prompt + (int)n_gen + 1, .n_batch = (int)n_batch};
    pt_session *s = pt_session_new(e, &sp, err, sizeof err);
    float *logits = s ? malloc((size_t)n_prompt * (size_t)nv * sizeof(float)) : NULL;
    int32_t *out = malloc(((size_t)n_gen + 1) * sizeof(int32_t));
    int rc = CLI_OK;
    if (!s) {
        rc = cli_error("%s", err);
        goto done;
    }
    if (!logits || !out) {
        rc = cli_error("out of memory for %d x %d logits", n_prompt, nv);
        goto done;
    }
    double t1 = now_s();
    if (pt_session_eval(s, prompt, n_prompt, logits, dump != NULL, NULL, err, sizeof err)) {
        rc = cli_error("%s", err);
        goto done;
    }
    double t2 = now_s();
    if (dump) {
        FILE *f = fopen(dump, "wb");
        size_t cnt = (size_t)n_prompt * (size_t)nv;
        if (!f || fwrite(logits, sizeof(float), cnt, f) != cnt || fclose(f) != 0) {
            rc = cli_error("%s: cannot write logits: %s", dump, strerror(errno));
            goto done;
        }
    }
    const float *last = dump ? logits + (size_t)(n_prompt - 1) * nv : logits;
    int next = argmax(last, nv);
    for (long i = 0; i < n_gen; i++) {
        out[i] = next;
        if (i + 1 == n_gen) break;
        if (pt_session_eval(s, &out[i], 1, logits, 0, NULL, err, sizeof err)) {
            rc = cli_error("%s", err);
            goto done;
        }
        next = argmax(logits, nv);
    }
    double t3 = now_s();
    for (long i = 0; i < n_gen; i++) printf("%s%d", i ? " " : "", out[i]);
    printf("\n");
    if (fflush(stdout) != 0) rc = cli_error("cannot write output");
    fprintf(stderr, "petrel: %s, %d threads; load %.2f s; prompt %d tokens in %.3f s (%.1f tok/s); "
                    "generated %ld in %.3f s (%.2f tok/s)\n",
            pt_engine_arch(e), pt_engine_n_threads(e), t1 - t0, n_prompt, t2 - t1, n_prompt / (t2 - t1 + 1e-9),
            n_gen, t3 - t2, n_gen > 1 ? (n_gen - 1) / (t3 - t2 + 1e-9) : 0.0);
    if (stats) {
        pt_stats st;
        pt_engine_stats(e, &st);
        uint64_t req = st.hits + st.misses;
        fprintf(stderr,
                "petrel: experts %s (%d slots/layer, %s%s%s): hit rate %.1f%% (%llu hits, %llu misses), "
                "%.3f GB read, %.1f MB/token, I/O wait %.3f s, %llu pinned, prefetch %llu/%llu used; "
                "RSS %.0f MB (peak %.0f MB)\n",
                st.streaming ? "streamed" : "mmap", st.slots_per_layer, st.io_backend,
                st.direct_io ? ", O_DIRECT" : "", st.expert_pack ? ", pack" : "", req ? 100.0 * st.hits / req : 0.0, (unsigned long long)st.hits,
                (unsigned long long)st.misses, st.bytes_read / 1e9,
                (n_prompt + n_gen) ? st.bytes_read / 1e6 / (n_prompt + n_gen) : 0.0, st.io_wait_s,
                (unsigned long long)st.pinned, (unsigned long long)st.prefetch_used,
                (unsigned long long)st.prefetched,
                st.rss_bytes / 1048576.0, st.peak_rss_bytes / 1048576.0);
    }
done:
    free(out);
    free(logits);
    free(prompt);
    pt_session_free(s);
    pt_engine_close(e);
    return rc;
}
