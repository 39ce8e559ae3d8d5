/* petrel.h — the public interface of the petrel inference engine.
 *
 * petrel runs Mixture-of-Experts language models far larger than memory: the
 * dense part stays resident, routed experts are streamed from the SSD into a
 * bounded cache. Front ends (CLI, server) use only this header; tensors, the
 * expert cache and the kernels stay behind it.
 *
 * An engine is one loaded model (weights, thread pool); a session is one
 * sequence with its own KV cache. Functions that can fail take an error
 * buffer and return NULL / -1 after writing one line into it.
 */
#ifndef PETREL_H
#define PETREL_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#define PETREL_VERSION "0.1.0"

/* Context positions a session holds, and the memory plan budgets a KV cache
 * for, when the caller does not say (capped by the model's training context). */
#define PT_DEFAULT_CTX 4096

/* The library version, "MAJOR.MINOR.PATCH". */
const char *pt_version(void);

typedef struct pt_engine pt_engine;
typedef struct pt_session pt_session;

typedef struct pt_engine_params {
    const char *model_path; /* GGUF file (any part of a split model) */
    int n_threads;          /* 0: one per online CPU */
    int kernels;            /* PT_KERNELS_*: which dot-product kernels to use (0: best) */
    /* Routed experts. By default they are streamed from the SSD into a cache
     * sized from the memory budget when the model does not fit in it, and
     * read through the memory map when it does. */
    int expert_slots;       /* >0: stream, this many cache slots per MoE layer; 0: automatic;
                               PT_EXPERTS_MMAP: no cache, read experts through the mmap */
    double ram_gb;          /* memory budget in GB; 0: from available memory and the cgroup */
    int expert_policy;      /* PT_POLICY_*: cache replacement (0: default, LFU with decay) */
    int io;                 /* PT_IO_*: read back-end (0: io_uring when available, else pread) */
    int buffered_io;        /* 1: read experts through the page cache instead of O_DIRECT */
    const char *pack_path;  /* expert pack to use; NULL: MODEL.gguf.xpack or the cache dir's */
    int no_pack;            /* 1: ignore any expert pack, read experts from the GGUF */
    double pin_gb;          /* cache bytes for experts pinned from usage history; 0: a quarter */
    int no_pin;             /* 1: pin nothing */
    int prefetch;           /* 1: router lookahead reads the next layer's experts early */
    const char *trace_path; /* write the routing trace here ("LAYER E1 E2 ..." per request) */
    /* Where expert packs and usage statistics are looked for besides next to the
     * model, and where usage statistics are saved when the model's folder is
     * read-only; NULL: only next to the model. The engine reads no environment
     * variable: front ends pass $XDG_CACHE_HOME/petrel or ~/.cache/petrel here. */
    const char *cache_dir;
    /* Where usage statistics (which experts were requested, for pinning) are
     * read and saved; NULL: next to the model when that folder is writable,
     * else cache_dir. Tests point it at a folder of their own. */
    const char *usage_dir;
    /* Positions the memory plan budgets the KV cache for; 0: PT_DEFAULT_CTX
     * (capped by the model's training context). Front ends pass the session
     * context they will ask for, so the expert cache leaves room for it. */
    int n_ctx;
    /* 1: open the model and compute the memory plan only (pt_engine_plan):
     * no expert cache, no thread pool, no usage statistics read or written;
     * pt_session_new refuses. For `petrel inspect --ram`. */
    int plan_only;
} pt_engine_params;

enum { PT_EXPERTS_MMAP = -1 };
enum { PT_POLICY_DEFAULT = 0, PT_POLICY_LRU = 1, PT_POLICY_LFU = 2 };
enum { PT_IO_AUTO = 0, PT_IO_URING = 1, PT_IO_PREAD = 2 };

/* Kernel choice: the best the CPU has, or a cap (to compare SIMD with scalar). */
enum { PT_KERNELS_BEST = 0, PT_KERNELS_SCALAR = 1, PT_KERNELS_AVX2 = 2, PT_KERNELS_AVX512 = 3 };

pt_engine *pt_engine_open(const pt_engine_params *p, char *err, size_t err_len);
void pt_engine_close(pt_engine *e);

int pt_engine_n_vocab(const pt_engine *e);
int pt_engine_n_embd(const pt_engine *e);
int pt_engine_n_threads(const pt_engine *e); /* 0 for a plan_only engine */
int pt_engine_has_mtp(const pt_engine *e);
const char *pt_engine_arch(const pt_engine *e);

/* One line describing the memory plan: budget, resident bytes, KV cache and
 * context, expert mode, slots per layer, I/O back-end. When the plan does not
 * fit the budget, pt_engine_open fails instead with every number named. */
const char *pt_engine_plan(const pt_engine *e);

/* Expert-streaming counters since the engine opened. */
typedef struct pt_stats {
    int streaming;            /* 1 when experts go through the cache */
    int slots_per_layer;
    const char *io_backend;   /* "io_uring", "pread", or "mmap" */
    int direct_io;            /* reads bypass the page cache */
    int expert_pack;          /* experts come from an expert pack */
    uint64_t hits, misses;    /* expert requests served from cache / read */
    uint64_t bytes_read;
    double io_wait_s;         /* time the forward pass waited for reads */
    uint64_t pinned;          /* experts pinned from usage history */
    uint64_t prefetched, prefetch_used; /* lookahead reads issued / then requested */
    uint64_t rss_bytes, peak_rss_bytes;
} pt_stats;
void pt_engine_stats(const pt_engine *e, pt_stats *st);

typedef struct pt_session_params {
    int n_ctx;   /* positions the KV cache holds; 0: PT_DEFAULT_CTX (capped by the model's training context) */
    int n_batch; /* rows evaluated per forward chunk; 0: 256 */
} pt_session_params;

pt_session *pt_session_new(pt_engine *e, const pt_session_params *p, char *err, size_t err_len);
void pt_session_free(pt_session *s);

int pt_session_n_ctx(const pt_session *s);
int pt_session_n_batch(const pt_session *s);
/* Positions the session holds; pt_session_tokens gives their token ids, [n_past],
 * valid until the next call that changes the session. The session is the only
 * record of what its cache holds: callers keep no mirror of it. */
int pt_session_n_past(const pt_session *s);
const int32_t *pt_session_tokens(const pt_session *s);

/* Keep at most the first n positions (n <= 0 clears the cache). A cache may be
 * unable to serve position n again (a sliding-window ring that has overwritten
 * the keys the window before n needs); it then keeps fewer. Returns the
 * positions kept, which pt_session_n_past also reports afterwards. */
int pt_session_truncate(pt_session *s, int n);

/* Feed tokens[n] at the next positions. logits: NULL, or [n][n_vocab] when
 * all_rows, or [n_vocab] for the last token. hidden: NULL, or [n][n_embd] (the
 * final-norm state, input of the MTP head). 0, or -1 with err. */
int pt_session_eval(pt_session *s, const int32_t *tokens, int n, float *logits, int all_rows,
                    float *hidden, char *err, size_t err_len);

/* Make the session hold exactly tokens[0..n): keep the longest prefix of what
 * it holds that the cache can serve, evaluate the rest in chunks of n_batch,
 * and leave the last token's logits [n_vocab] in logits (when not NULL; a
 * sequence already held whole has its last token evaluated again for them).
 * stop (may be NULL) is read between chunks: when set, returns -2 with the
 * session holding a prefix of tokens. Returns the positions reused (the
 * caller's "cached tokens"), or -1 with err (empty or too long for the
 * context, a token outside the vocabulary, an engine error). */
int pt_session_sync(pt_session *s, const int32_t *tokens, int n, float *logits,
                    const volatile sig_atomic_t *stop, char *err, size_t err_len);

/* MTP/NextN draft logits [n][n_vocab]: row i from (tokens[i], hidden_prev[i]),
 * hidden_prev[i] being the trunk state of the position before. 0, or -1 with err. */
int pt_session_mtp(pt_session *s, const int32_t *tokens, const float *hidden_prev, int n,
                   float *logits, char *err, size_t err_len);

#endif
