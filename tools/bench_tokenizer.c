/* bench_tokenizer.c — encoding speed of the tokenizer on English text, one
 * core, with the real-size test vocabularies (GPT-2, Qwen2 as glm4, Gemma 4).
 *
 *   bench_tokenizer [TEXT_FILE...]
 *
 * Without files it uses the project's own English prose (README.md, the
 * shared DESIGN.md and fixtures README, the GPL text when the system has it).
 * The text is encoded whole, in separate calls, until 4 MB have been
 * processed: the per-call word cache starts empty each time, so repeating the
 * text does not flatter the result. Prints MB/s and tokens/s per vocabulary;
 * the goal is >= 5 MB/s. Rates are per CPU-second of the encoding thread. The vocabularies come
 * from PETREL_FIXTURES when set, else the repository's tests/fixtures.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "format/gguf.h"
#include "text/tokenizer.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* CPU time of this thread: the speed of one core even when the machine is
 * shared (wall time is printed too). */
static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int append_file(const char *path, char **buf, size_t *n, size_t *cap) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    char tmp[65536];
    size_t r;
    while ((r = fread(tmp, 1, sizeof tmp, f)) > 0) {
        while (*cap - *n < r + 1) {
            *cap = *cap ? *cap * 2 : 1 << 20;
            *buf = realloc(*buf, *cap);
            if (!*buf) {
                fclose(f);
                return -1;
            }
        }
        memcpy(*buf + *n, tmp, r);
        *n += r;
    }
    fclose(f);
    return 0;
}

int main(int argc, char **argv) {
    char *text = NULL;
    size_t n = 0, cap = 0;
    if (argc > 1) {
        for (int i = 1; i < argc; i++)
            if (append_file(argv[i], &text, &n, &cap)) {
                fprintf(stderr, "bench_tokenizer: cannot read %s\n", argv[i]);
                return 1;
            }
    } else {
        const char *defaults[] = {"README.md", "../shared/DESIGN.md", "tests/fixtures/README.md",
                                  "/usr/share/common-licenses/GPL-3"};
        for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++)
            (void)append_file(defaults[i], &text, &n, &cap);
    }
    if (n == 0) {
        fprintf(stderr, "bench_tokenizer: no text\n");
        return 1;
    }
    const char *dir = getenv("PETREL_FIXTURES");
    if (!dir || !*dir) dir = "tests/fixtures";
    const char *vocabs[] = {"ggml-vocab-gpt-2.gguf", "ggml-vocab-glm4.gguf",
                            "ggml-vocab-gemma-4.gguf"};
    int calls = (int)((4u << 20) / n) + 1;
    printf("tokenizer encode, one thread: %.1f KB of English text, %d calls\n", n / 1e3, calls);
    int slow = 0;
    for (size_t i = 0; i < sizeof vocabs / sizeof vocabs[0]; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/tokenizer/%s", dir, vocabs[i]);
        pt_err err = {{0}};
        double t0 = now_s();
        gguf_ctx *g = gguf_open(path, &err);
        tok_vocab *v = g ? tok_load(g, &err) : NULL;
        if (g) gguf_close(g);
        if (!v) {
            printf("  %-26s skipped: %s\n", vocabs[i], err.msg);
            continue;
        }
        double t_load = now_s() - t0;
        tok_ids ids = {0};
        double t = now_s(), c = cpu_s();
        for (int rep = 0; rep < calls; rep++) {
            ids.n = 0;
            if (tok_encode(v, text, n, 0, &ids, &err)) {
                printf("  %-26s failed: %s\n", vocabs[i], err.msg);
                break;
            }
        }
        c = (cpu_s() - c) / calls;
        t = (now_s() - t) / calls;
        double mbs = n / c / 1e6;
        printf("  %-26s %7.1f MB/s  %6.2f M tokens/s  (wall %.1f MB/s; %.2f bytes/token; load %.2f "
               "s)\n",
               vocabs[i], mbs, ids.n / c / 1e6, n / t / 1e6, (double)n / (ids.n ? ids.n : 1),
               t_load);
        slow |= mbs < 5.0;
        tok_ids_free(&ids);
        tok_free(v);
    }
    free(text);
    if (slow) printf("  below the 5 MB/s goal\n");
    return 0;
}
