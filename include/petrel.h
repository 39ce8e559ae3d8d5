/* petrel.h — the public interface of the petrel inference engine.
 *
 * petrel runs Mixture-of-Experts language models far larger than memory: the
 * dense part stays resident, routed experts are streamed from the SSD into a
 * bounded cache. Front ends (the CLI in src/cli, the server in src/server and
 * what they share in src/front) use only this header; tensors, the expert
 * cache, the kernels, the tokenizer's tables and the chat formats' code stay
 * behind it. A test (tests/test_frontapi.c) fails on any front-end #include of
 * an internal header.
 *
 * An engine is one loaded model (weights, thread pool, vocabulary, chat format,
 * the model's sampling defaults); the GGUF is opened once, by pt_engine_open. A
 * session is one sequence with its own KV cache and the record of the tokens it
 * holds. Functions that can fail take an error buffer (err, err_len) and return
 * NULL / -1 after writing one line into it.
 *
 * The layers, from the bottom:
 *   engine, session       eval / sync / truncate over token ids
 *   text                  tokenize, detokenize, special ids, end of generation
 *   chat                  render a conversation (OpenAI-shaped JSON text) into a
 *                         prompt in the model's format (or one named), with the
 *                         byte ranges of the conversation's own text, which the
 *                         tokenizer keeps from becoming special tokens; parse
 *                         what the model generates into reasoning, content and
 *                         tool calls
 *   grammar               constrained decoding: GBNF, JSON Schema and tool-call
 *                         grammars the sampler follows
 *   sampling, sampler     the model's published defaults, field-wise overrides
 *   generation (pt_gen)   prefill through the prefix cache, then sample, stream
 *                         UTF-8 safely, stop at stop strings, EOG, length,
 *                         context; drafting with the MTP head; one session
 *                         (pt_gen_run) or several stepped at once (pt_gen_step)
 *
 * Where the generation loop lives: in the engine (pt_gen_*), beside the sessions
 * it drives, not in the front ends. It needs the prefix cache, the MTP head's
 * cache, the streaming detokenizer, the sampler and the stop-string matcher,
 * which stay behind this header; and stepping several sessions at once is the
 * engine's to do. What stays front-end code (src/front) is the policy around it:
 * building the conversation, the chat turn that ties render -> tokens -> prefill
 * -> generate -> parse together for both front ends, UTF-8 repair of user input.
 *
 * Memory: handles are freed by their *_free / *_close function; pt_buf and
 * pt_ids are caller-owned growable buffers the functions append to (free with
 * pt_buf_free / pt_ids_free); strings in a pt_chat_parsed are malloc'd and freed
 * by pt_chat_parsed_free. Returned const char * point into the engine and live
 * as long as it.
 */
#ifndef PETREL_H
#define PETREL_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#define PETREL_VERSION "0.1.0"

/* Context positions when neither the caller nor the model says: by default
 * the memory plan budgets the model's training context (capped by the KV
 * cache's share of the memory budget), and sessions take the plan's context. */
#define PT_DEFAULT_CTX 4096

/* Bytes of a path buffer, the library's and the front ends' (Linux's PATH_MAX, which
 * <limits.h> defines only under feature macros a caller need not set; paths the
 * candidates functions of petrel_tools.h write fit in it). */
#define PT_PATH_MAX 4096
/* A file in a folder whose path fits PT_PATH_MAX, with room for a name petrel makes there (a
 * prefix-cache block's key, a temporary file's suffix): such a path is never cut short. */
#define PT_FILE_PATH_MAX (PT_PATH_MAX + 104)

/* The library version, "MAJOR.MINOR.PATCH". */
const char *pt_version(void);

/* What this build of the library holds and what this CPU lets it use, one line per item
 * ("kernels: scalar avx2 avx512-vnni (this CPU: avx512-vnni)", "expert reads: io_uring
 * O_DIRECT, pread pool", ...), for `petrel --version`. A static string. */
const char *pt_build_info(void);

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
    int no_pack;            /* 1: ignore any expert pack, read experts from the GGUF (a valid
                               pack's checksum table still checks the reads) */
    int no_verify;          /* 1: do not check streamed experts against the pack's checksum
                               table (to measure what checking costs) */
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
    /* 1: load only the vocabulary, chat format and sampling defaults (any
     * architecture, a vocab-only GGUF will do; tensors are never read). Such an
     * engine tokenizes and renders but pt_session_new refuses it. */
    int vocab_only;
    /* Positions the memory plan budgets the KV cache for; 0: the model's
     * training context (PT_DEFAULT_CTX when unknown), whose positions beyond
     * what the KV cache's share of the budget holds spill to the SSD (see
     * runtime/plan.h, kv_ram_mb). Front ends pass
     * the session context they will ask for, so the expert cache leaves room
     * for it. */
    int n_ctx;
    /* 1: open the model and compute the memory plan only (pt_engine_plan):
     * no expert cache, no thread pool, no usage statistics read or written;
     * pt_session_new refuses. For `petrel inspect --ram`. */
    int plan_only;
    /* KV cache element types (PT_KV_*), as llama.cpp's --cache-type-k/-v:
     * 0 is f16, llama.cpp's default. MLA models (glm-dsa, deepseek2) cache
     * the latent and the rope key in the K type and have no V cache. */
    int cache_type_k, cache_type_v;
    /* PT_LOAD_*: how the weights the plan keeps in RAM are held (llama.cpp's --load-mode).
     * MMAP (0): read through the file's memory map, as pages of the page cache (the
     * kernel may reclaim them and read them again). RAM: copied into private anonymous
     * memory at load (no swap: they stay). MLOCK: the mapped pages locked in RAM. Routed
     * experts that stream are read into the expert cache either way. */
    int load_mode;
    /* > 0: the KV cache's RAM share forced to this many MiB (`--kv-ram-mb`): a context whose KV
     * exceeds it keeps its newest positions that fit in RAM and the older ones in an unlinked
     * file in cache_dir (/var/tmp when NULL), read back as attention needs them (logits
     * bit-identical). 0: the share is what the budget leaves (runtime/plan.h); a context asked
     * for with n_ctx is then budgeted whole, one not asked for spills beyond the share. */
    double kv_ram_mb;
} pt_engine_params;

enum { PT_LOAD_MMAP = 0, PT_LOAD_RAM = 1, PT_LOAD_MLOCK = 2 };

/* KV cache element types. PT_KV_DEFAULT is f16. */
enum { PT_KV_DEFAULT = 0, PT_KV_F32, PT_KV_F16, PT_KV_BF16, PT_KV_Q8_0, PT_KV_Q4_0 };
/* "f32", "f16", "bf16", "q8_0", "q4_0" (llama.cpp's names); "?" for others. */
const char *pt_kv_type_name(int t);
/* The PT_KV_* of a name (case-insensitive), or -1. */
int pt_kv_type_parse(const char *name);

enum { PT_EXPERTS_MMAP = -1 };
enum { PT_POLICY_DEFAULT = 0, PT_POLICY_LRU = 1, PT_POLICY_LFU = 2 };
enum { PT_IO_AUTO = 0, PT_IO_URING = 1, PT_IO_PREAD = 2 };

/* Kernel choice: the best the CPU has, or a cap (to compare SIMD with scalar). */
enum { PT_KERNELS_BEST = 0, PT_KERNELS_SCALAR = 1, PT_KERNELS_AVX2 = 2, PT_KERNELS_AVX512 = 3 };

/* Open the GGUF once: validate and load the model (unless vocab_only), read
 * its vocabulary, chat format and sampling defaults, plan memory, start the
 * threads. NULL with err naming the file and what is wrong. */
pt_engine *pt_engine_open(const pt_engine_params *p, char *err, size_t err_len);
/* Save usage statistics (when any expert was routed), free everything. NULL ok. */
void pt_engine_close(pt_engine *e);

int pt_engine_n_vocab(const pt_engine *e); /* logits per row (vocab_only: the vocabulary's size) */
int pt_engine_n_embd(const pt_engine *e);  /* hidden state width (0 for vocab_only) */
int pt_engine_n_ctx_train(const pt_engine *e); /* the model's training context (0: unknown) */
int pt_engine_n_ctx(const pt_engine *e);       /* the plan's context: a session's default */
int pt_engine_n_threads(const pt_engine *e);   /* 0 for a plan_only engine */
int pt_engine_has_mtp(const pt_engine *e);     /* 1: drafting (pt_gen_set_draft) works */
const char *
pt_engine_arch(const pt_engine *e); /* general.architecture ("" when a vocab_only file has none) */

/* The KV cache's element types as the plan line names them: "f16", or "K q8_0, V f16" when
 * they differ (MLA models keep one cache, in the K type: its name alone). */
const char *pt_engine_kv_types(const pt_engine *e);

/* One line describing the memory plan: budget, resident bytes, KV cache and
 * context, expert mode, slots per layer, I/O back-end. When the plan does not
 * fit the budget, pt_engine_open fails instead with every number named. */
const char *pt_engine_plan(const pt_engine *e);

/* Expert-streaming counters since the engine opened. */
typedef struct pt_stats {
    int streaming; /* 1 when experts go through the cache */
    int slots_per_layer;
    const char *io_backend; /* "io_uring", "pread", or "mmap" */
    int direct_io;          /* reads bypass the page cache */
    int expert_pack;        /* experts come from an expert pack */
    uint64_t hits, misses;  /* expert requests served from cache / read */
    uint64_t bytes_read;
    double io_wait_s;                   /* time the forward pass waited for reads */
    uint64_t pinned;                    /* experts pinned from usage history */
    uint64_t prefetched, prefetch_used; /* lookahead reads issued / then requested */
    uint64_t checked_reads;             /* expert reads checked against the pack's checksum table */
    uint64_t bad_reads;                 /* ... that failed it: read again, never used */
    uint64_t fallbacks; /* pack records that failed twice and were read from the GGUF */
    double verify_s;    /* time spent hashing expert reads */
    uint64_t rss_bytes, peak_rss_bytes;
} pt_stats;
void pt_engine_stats(const pt_engine *e, pt_stats *st);

typedef struct pt_session_params {
    int n_ctx;   /* positions the KV cache holds; 0: the engine's planned context
                    (pt_engine_n_ctx). The cache is paid for as positions are written. */
    int n_batch; /* rows evaluated per forward chunk (a block: every row through layer L
                    before layer L+1, each routed expert read once per layer per block);
                    0: the plan's prompt block when experts stream (as many rows as its
                    activation share allows, up to the context), else 256 */
    int n_tile;  /* rows per tile of the work that is row-local (attention, FFNs): the
                    scratch that grows fastest with rows; 0: min(256, n_batch). Neither
                    n_batch nor n_tile changes a bit of the logits (batch invariance). */
} pt_session_params;

pt_session *pt_session_new(pt_engine *e, const pt_session_params *p, char *err, size_t err_len);
void pt_session_free(pt_session *s);
/* The engine the session runs on. */
pt_engine *pt_session_engine(const pt_session *s);

int pt_session_n_ctx(const pt_session *s);
int pt_session_n_batch(const pt_session *s);

/* What the session's last prompt cost in expert reads: the last pt_session_sync,
 * or the last pt_session_eval of more than one token outside one. Reads are
 * the engine's store counters over the prompt (other sessions' reads in the
 * meantime count too; bytes as read, with O_DIRECT alignment or pack padding);
 * routed figures are the distinct (trunk layer, expert) pairs the prompt's
 * rows chose and their weights' bytes. A prompt that runs in one block reads
 * each routed expert at most once per layer: experts_read <= routed_experts,
 * but for lookahead reads of experts then not routed to. In mmap mode nothing
 * is read by the store (0). */
typedef struct pt_prompt_stats {
    int n_tokens;                 /* tokens evaluated */
    int n_batch;                  /* rows per block */
    double seconds;               /* wall time of the evaluation */
    uint64_t expert_bytes_read;   /* bytes the expert store read meanwhile */
    uint64_t routed_expert_bytes; /* bytes of the distinct experts routed to */
    uint64_t routed_experts;      /* distinct (layer, expert) pairs routed to */
    uint64_t experts_read;        /* experts the store read meanwhile (misses and prefetches) */
} pt_prompt_stats;
void pt_session_prompt_stats(const pt_session *s, pt_prompt_stats *st);
/* Bytes of the session's KV cache backed by memory now: it grows with the
 * positions written (pages of a reservation for the whole context). */
uint64_t pt_session_kv_bytes(const pt_session *s);
/* Bytes of the session's KV spill file on disk (pt_engine_params.kv_ram_mb; 0 when the
 * whole cache is in RAM), and the newest positions its RAM share holds when it spills (0:
 * all; with a DSA indexer half the share: the other half caches spilled pages it selected). */
uint64_t pt_session_kv_disk_bytes(const pt_session *s);
int pt_session_kv_hot(const pt_session *s);
/* A spilling DSA cache's pages of selected spilled rows kept in RAM: bytes now and their
 * bound (all 0 when none), and since the session opened, the selected spilled pages and how
 * many of them were already in RAM. Where the selected spilled rows are read directly
 * (O_DIRECT into a buffer of gather_cap bytes, the cache's half of the share): the layer
 * steps that did so, the rows, the reads and the bytes read, and the rows found kept in
 * the buffer from earlier steps (where consecutive steps select mostly the same rows). */
typedef struct pt_kv_cache_stats {
    uint64_t bytes, cap_bytes;
    uint64_t selected, hits;
    uint64_t gather_cap, gathers, gather_rows, gather_reads, gather_bytes;
    uint64_t gather_kept; /* of gather_rows, those the buffer kept from earlier steps */
} pt_kv_cache_stats;
void pt_session_kv_cache(const pt_session *s, pt_kv_cache_stats *st);
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
 * stop (may be NULL; set by a signal handler, or by another thread with an
 * atomic store) is read between chunks: when set, returns -2 with the
 * session holding a prefix of tokens. Returns the positions reused (the
 * caller's "cached tokens"), or -1 with err (empty or too long for the
 * context, a token outside the vocabulary, an engine error). */
int pt_session_sync(pt_session *s, const int32_t *tokens, int n, float *logits,
                    const volatile sig_atomic_t *stop, char *err, size_t err_len);

/* Progress of a prompt's evaluation by pt_session_sync or pt_gen_prefill (a
 * long prompt can take minutes: front ends show it, the server keeps its
 * clients' connections alive with it). Work is counted in units of one row
 * through one layer, so any order of evaluation (chunk by chunk, or layer by
 * layer over the whole prompt) reports it the same way; the tokens done are
 * n_reused + (n_prompt - n_reused) * done / total. */
typedef struct pt_prompt_progress {
    int n_prompt;  /* tokens of the prompt */
    int n_reused;  /* of those, kept from the cache: not evaluated */
    int64_t done;  /* work done, of total */
    int64_t total; /* (n_prompt - n_reused) x the model's layers; > 0 */
} pt_prompt_progress;
/* Called on the evaluating thread: once with done 0 when the prompt has been
 * accepted (it fits the context, its tokens are in the vocabulary) and before
 * anything is evaluated, then after each layer of each chunk, the last time
 * with done == total, unless stopped or failed on the way. It runs between
 * layers: keep it short. */
typedef void (*pt_prompt_progress_fn)(void *ud, const pt_prompt_progress *p);
/* Report the progress of the session's prompt evaluations to fn (NULL: no
 * reports). Decode steps and pt_session_eval report nothing. */
void pt_session_set_progress(pt_session *s, pt_prompt_progress_fn fn, void *ud);

/* ===== Prefixes that survive: the prefix cache and session files =====
 * The KV rows of a prompt's prefix kept on disk (engine/pcache.c; ARCHITECTURE.md, "Prefixes
 * that survive") and restored into any session of the same model and cache types: a new
 * request, another conversation or a restarted server continues from the longest stored
 * prefix instead of evaluating it again. Restored rows are the bytes a fresh evaluation
 * writes, so the logits after a restore are bit-identical to a fresh evaluation's.
 *
 * The store is blocks of PT_PCACHE_BLOCK positions, one file each, named by a chained
 * SHA-256 of the format version, the model's fingerprint, the KV types, the kernel level,
 * the scope (an API key) and every token up to the block's end: a shared system prompt is
 * stored once. Each file carries its header (version, fingerprint, types, positions), its
 * tokens and an XXH3-64 of its payload; a file that fails any check is ignored with a
 * warning and removed. Writes go to a temporary file renamed into place, so processes can
 * share the folder; the folder is kept to max_bytes by removing the least recently used
 * files (mtime, refreshed on every use). A write that fails (a full disk) stops writing with
 * one warning; what is on disk is still read. */

#define PT_PCACHE_BLOCK 256

typedef struct pt_pcache pt_pcache;

typedef struct pt_pcache_params {
    const char *dir;    /* the folder (created when missing) */
    uint64_t max_bytes; /* size bound of the folder's entries; 0: no bound */
    /* where warnings go (one line, no newline); NULL: stderr as "petrel: WARNING: ..." */
    void (*warn)(void *ud, const char *msg);
    void *warn_ud;
} pt_pcache_params;

typedef struct pt_pcache_stats {
    uint64_t restores;        /* restores that gave a session positions */
    uint64_t tokens_restored; /* positions they gave */
    uint64_t blocks_written;  /* block files written */
    uint64_t bytes_written;   /* their bytes */
    uint64_t blocks_present;  /* blocks a save found stored already */
    uint64_t warnings;        /* entries ignored, writes failed */
    int writes_off;           /* writing stopped after a failed write */
} pt_pcache_stats;

/* The prefix cache of the engine's model in p->dir. NULL with err (no folder). */
pt_pcache *pt_pcache_open(pt_engine *e, const pt_pcache_params *p, char *err, size_t err_len);
void pt_pcache_close(pt_pcache *pc);
void pt_pcache_get_stats(const pt_pcache *pc, pt_pcache_stats *st);

/* A whole session in one file (`petrel chat --session FILE`): its tokens, every KV row it
 * holds and the caller's bytes (the conversation), written to FILE.tmp and renamed. 0, or
 * -1 with err. */
int pt_session_save_file(pt_session *s, const char *path, const void *extra, size_t extra_len,
                         char *err, size_t err_len);
/* Read a session file: *extra (malloc'd, NUL-terminated; NULL when the file is unusable) and
 * the session restored when the file's model, KV types and kernel level are this session's.
 * Returns the positions restored (0 with a reason in err when only the extra bytes could be
 * used, e.g. another model), or -1 with err (missing, corrupt: checksum, version). */
int pt_session_load_file(pt_session *s, const char *path, char **extra, size_t *extra_len,
                         char *err, size_t err_len);

/* ===== Buffers ===== */

/* A growable byte string the text functions append to. Zero-initialise; once
 * anything was appended v is NUL-terminated (v[n] == 0, not counted in n) and
 * malloc'd; free with pt_buf_free. */
typedef struct pt_buf {
    char *v;
    size_t n, cap;
} pt_buf;

/* A growable array of token ids. Zero-initialise; free with pt_ids_free. */
typedef struct pt_ids {
    int32_t *v;
    size_t n, cap;
} pt_ids;

/* Byte ranges of a text: v[i] covers [v[i].off, v[i].off + v[i].len). Kept
 * in increasing order, non-empty, neither overlapping nor touching (a range
 * that would touch the last one extends it). Zero-initialise; free with
 * pt_spans_free. pt_chat_render_spans fills one with the content of a prompt,
 * pt_tokenize_spans reads it. */
typedef struct pt_span {
    size_t off, len;
} pt_span;
typedef struct pt_spans {
    pt_span *v;
    size_t n, cap;
} pt_spans;

/* Append s[0..n) to b (n may be 0: just make v a valid empty string). 0, or -1
 * out of memory (b unchanged). */
int pt_buf_append(pt_buf *b, const char *s, size_t n);
void pt_buf_free(pt_buf *b); /* frees v and zeroes b */
/* Append id to a. 0, or -1 out of memory (a unchanged). */
int pt_ids_push(pt_ids *a, int32_t id);
void pt_ids_free(pt_ids *a);
void pt_spans_free(pt_spans *s); /* frees v and zeroes s */

/* CLOCK_MONOTONIC seconds: the clock of pt_gen_result's times. */
double pt_now(void);

/* out (emptied first) receives s[0..n) as valid UTF-8 for JSON and terminals:
 * every byte that does not start a well-formed, shortest-form, non-surrogate
 * sequence of a code point in 1..U+10FFFF (so NUL too) becomes U+FFFD.
 * Returns the number of bytes replaced, or -1 out of memory. */
int pt_utf8_repair(const char *s, size_t n, pt_buf *out);

/* ===== Text: the engine's vocabulary =====
 * Loaded by pt_engine_open from the GGUF's tokenizer.* metadata. A model
 * without a usable vocabulary still opens (token ids work); the functions
 * below then fail with the reason. Tokenization reproduces llama.cpp's. */

enum {
    PT_TOKENIZE_ADD_SPECIAL = 1 << 0,   /* add BOS/EOS as the vocabulary's add_bos/add_eos say */
    PT_TOKENIZE_PARSE_SPECIAL = 1 << 1, /* control-token text ("<|user|>") becomes the token */
};
enum {
    PT_DETOKENIZE_RENDER_SPECIAL =
        1 << 0, /* write control tokens' text (else they decode to nothing) */
};

/* 1 when the engine has a vocabulary; 0 with the reason in err (may be NULL). */
int pt_engine_has_vocab(const pt_engine *e, char *err, size_t err_len);
/* Tokens in the vocabulary (0 without one); at most pt_engine_n_vocab. */
int pt_vocab_size(const pt_engine *e);
/* Append the ids of text[0..len) to out. Any byte string tokenizes (invalid
 * UTF-8 becomes U+FFFD first). 0, or -1 with err (no vocabulary, out of memory). */
int pt_tokenize(const pt_engine *e, const char *text, size_t len, int flags, pt_ids *out, char *err,
                size_t err_len);
/* pt_tokenize, with control-token text left as text inside the byte ranges
 * `plain` of text (NULL or empty: exactly pt_tokenize): PT_TOKENIZE_PARSE_SPECIAL
 * makes control-token text a token only where it lies wholly outside them.
 * USER_DEFINED tokens are recognised everywhere, as pt_tokenize always does.
 * The text is cut only at the special tokens recognised, and what lies between
 * two of them is encoded as one piece whichever ranges it crosses, so when the
 * plain ranges hold no special-token text the ids are pt_tokenize's with the
 * same flags (llama.cpp's tokenization of the whole prompt). For a chat prompt:
 * the content ranges of pt_chat_render_spans. 0, or -1 with err (ranges out of
 * order or past len, no vocabulary, out of memory). */
int pt_tokenize_spans(const pt_engine *e, const char *text, size_t len, int flags,
                      const pt_spans *plain, pt_ids *out, char *err, size_t err_len);
/* Append the bytes of ids[0..n) to out (the pieces concatenated, no cleanup;
 * out is NUL-terminated). 0, or -1 with err (an id outside the vocabulary, no
 * vocabulary, out of memory). */
int pt_detokenize(const pt_engine *e, const int32_t *ids, size_t n, int flags, pt_buf *out,
                  char *err, size_t err_len);
/* The bytes token id decodes to, *len of them (not NUL-terminated; points into
 * the engine). NULL and *len = 0 for an invalid id or no vocabulary. */
const char *pt_token_piece(const pt_engine *e, int32_t id, int flags, size_t *len);
/* Special ids; -1 when the vocabulary has none. */
int32_t pt_token_bos(const pt_engine *e);
int32_t pt_token_eos(const pt_engine *e);
int32_t pt_token_eot(const pt_engine *e);
/* 1 when id ends generation (eos, eot, eom, <|im_end|>, <turn|>, ...). */
int pt_token_is_eog(const pt_engine *e, int32_t id);

/* ===== Chat =====
 * A chat format is named: "glm-5", "deepseek-v3", "gemma-4", "qwen3" ("none":
 * raw text only). The engine detects its model's from the GGUF (the chat
 * template's text, else the architecture, else the pre-tokenizer); any other
 * known name may be passed instead. Formats are written out in C (no Jinja) and
 * match the models' templates byte for byte.
 *
 * A conversation is JSON text in the OpenAI shape: messages, an array of
 * {role, content, reasoning_content?, tool_calls?, tool_call_id?, name?} (role
 * system/user/assistant/tool; content a string or [{type:"text", text}]);
 * tools, NULL or an array of {type:"function", function:{name, description,
 * parameters}}. Generated text is hostile input to the parser. */

/* The model's chat format name; "none" when none is known. */
const char *pt_engine_chat_format(const pt_engine *e);
/* 1 when name is a chat format petrel renders ("none" and unknown names: 0). */
int pt_chat_format_known(const char *name);
/* The name of the i-th chat format petrel renders (from 0), NULL past the last: the list for
 * a front end's help and errors. */
const char *pt_chat_format_name(int i);
/* Whether the family thinks when a request does not say (GLM-5, Qwen3: 1). */
int pt_chat_default_thinking(const char *format);
/* 1 when the generation prompt leaves the model inside a reasoning block
 * (GLM-5 and DeepSeek open "<think>" themselves): generated text is reasoning
 * until the closing tag. thinking: -1 the family's default, 0 off, 1 on. */
int pt_chat_opens_reasoning(const char *format, int thinking);

typedef struct pt_chat_opts {
    int add_generation_prompt; /* end with the assistant's opening */
    int thinking;              /* -1: the family's default, 0: off, 1: on */
} pt_chat_opts;

/* Render a conversation into out (appended, NUL-terminated). The text holds
 * the template's special tokens as text, and the conversation's text verbatim
 * (as the models' Jinja templates write it), so special-token text inside a
 * message would read as the real token if the whole prompt were tokenized with
 * PT_TOKENIZE_PARSE_SPECIAL: a document an agent reads could forge turns. To
 * tokenize a prompt, use pt_chat_render_spans and pt_tokenize_spans instead.
 * 0, or -1 with err (unknown format, malformed JSON or conversation). */
int pt_chat_render(const char *format, const char *messages_json, const char *tools_json,
                   const pt_chat_opts *o, pt_buf *out, char *err, size_t err_len);
/* pt_chat_render, and content (emptied first) receives the byte ranges of
 * out->v that came from the conversation rather than from the template: the
 * text of every message (system included), reasoning, tool calls' names and
 * arguments, tool results, tool definitions. The rest is the template's
 * scaffolding (role markers, turn ends, tool-call markup). The prompt's tokens
 * are then pt_tokenize_spans(out, PT_TOKENIZE_PARSE_SPECIAL, content): only
 * the scaffolding becomes special tokens; a conversation whose text holds no
 * special-token text gets the ids pt_tokenize(PT_TOKENIZE_PARSE_SPECIAL) of
 * the whole prompt gives (and llama.cpp's server). 0, or -1 with err. */
int pt_chat_render_spans(const char *format, const char *messages_json, const char *tools_json,
                         const pt_chat_opts *o, pt_buf *out, pt_spans *content, char *err,
                         size_t err_len);

/* The markup of a format that a streaming reader must recognise: the tags
 * around reasoning and the markers that open tool-call markup. 0, or -1 for
 * "none" / an unknown name. The strings are static. */
typedef struct pt_chat_markers {
    const char *reasoning_open, *reasoning_close;
    const char *tool_calls[2];
    int n_tool_calls;
} pt_chat_markers;
int pt_chat_markers_of(const char *format, pt_chat_markers *m);
/* show[0..n): 1 for each control token that is the format's reply markup (reasoning tags,
 * tool-call markup: what pt_chat_parse reads), 0 for every other token; for
 * pt_gen_opts.show_control, so that turn headers and other control tokens a model may emit
 * never reach a reply's text. Returns how many are marked, or -1 (no vocabulary, no format). */
int pt_chat_markup_tokens(const pt_engine *e, const char *format, unsigned char *show, int n);

typedef struct pt_tool_call {
    char *name;      /* NUL-terminated */
    char *arguments; /* a JSON object, compact, NUL-terminated */
} pt_tool_call;

/* What a model generated, split. Every string is malloc'd and NUL-terminated;
 * free everything with pt_chat_parsed_free (the caller may replace a string
 * with another malloc'd one, or free calls[] and set n_calls to 0). */
typedef struct pt_chat_parsed {
    char *content;   /* the answer, tool-call markup removed */
    char *reasoning; /* the reasoning block's text ("" when none) */
    pt_tool_call *calls;
    int n_calls;
    int n_bad;     /* malformed tool calls (left in content as text) */
    char bad[256]; /* what was wrong with the first one */
} pt_chat_parsed;

/* Split text[0..len) generated after the generation prompt. in_reasoning: see
 * pt_chat_opens_reasoning. tools_json (may be NULL) lets GLM-5's untyped
 * argument values keep string-typed parameters as strings. Never fails on
 * content; -1 with err for an unknown format, malformed tools JSON or out of
 * memory (out is then zeroed). */
int pt_chat_parse(const char *format, const char *text, size_t len, int in_reasoning,
                  const char *tools_json, pt_chat_parsed *out, char *err, size_t err_len);
void pt_chat_parsed_free(pt_chat_parsed *p);

/* ===== Sampling =====
 * The chain, in order: penalties (repetition, frequency, presence over the
 * last penalty_last_n tokens) -> greedy if temp <= 0 -> temperature -> top-k ->
 * top-p -> min-p -> draw, from a xoshiro256** stream seeded with splitmix64(seed)
 * (the same seed, logits and history give the same tokens everywhere). */

/* ===== Constrained decoding =====
 * A grammar restricts what the sampler may draw to the sentences of a GBNF grammar (llama.cpp's
 * syntax: `name ::= ...` rules from `root`, "literals", [classes] with ranges and ^negation, `.`,
 * ( groups ), `|`, `* + ?`, {m}, {m,}, {m,n}, # comments). Before the chain (after the logit
 * bias) every token whose text the grammar rejects at this point gets -inf; end-of-generation
 * tokens are allowed only where the grammar can end, and are then the only tokens left when it
 * cannot go on. Control tokens (chat markup) are allowed only where the grammar accepts their
 * rendered text and that text appears inside one of its literals (a tool-call grammar's
 * markers): generate with PT_DETOKENIZE_RENDER_SPECIAL so the text holds them. */

typedef struct pt_grammar pt_grammar;

/* Compile GBNF text[0..len) for e's vocabulary (e may be NULL: the grammar is only checked and
 * cannot drive a sampler). The vocabulary's token trie is built on first use and kept by the
 * engine. Immutable: any number of samplers may share it, from any thread; it must outlive
 * them. NULL with err "grammar: line L, column C: what" (syntax, undefined rule, no root, left
 * recursion, too large) or the engine's vocabulary error. */
pt_grammar *pt_grammar_new(const pt_engine *e, const char *gbnf, size_t len, char *err,
                           size_t err_len);
/* pt_grammar_new of pt_json_schema_to_gbnf(schema_json). */
pt_grammar *pt_grammar_from_json_schema(const pt_engine *e, const char *schema_json, char *err,
                                        size_t err_len);
void pt_grammar_free(pt_grammar *g); /* NULL ok */
/* 1 when text[0..len) is a whole sentence of g (for tests and checks; no vocabulary needed). */
int pt_grammar_match(const pt_grammar *g, const char *text, size_t len);

/* The GBNF (appended to out) whose sentences are the JSON texts valid against a JSON Schema
 * (JSON text): the subset llama.cpp's json-schema-to-grammar covers — type (string, number,
 * integer, boolean, null, object, array, or a list), properties, required,
 * additionalProperties, items, minItems, maxItems, minLength, maxLength, enum, const, anyOf,
 * oneOf (generated as anyOf), $ref to #/$defs/NAME or #/definitions/NAME; annotations (title,
 * description, default, examples, $schema, $id, $comment, deprecated, readOnly, writeOnly)
 * ignored. Other keywords: -1 with err naming the keyword and where it is. Where a schema lists
 * properties only those are generated, in its order. PT_JSON_OBJECT_SCHEMA gives any JSON object
 * (response_format json_object). 0, or -1 with err. */
int pt_json_schema_to_gbnf(const char *schema_json, pt_buf *out, char *err, size_t err_len);
#define PT_JSON_OBJECT_SCHEMA "{\"type\":\"object\"}"

/* A GBNF (appended to out) for a chat reply that is a JSON text valid against schema_json
 * (response_format json_schema / json_object, Responses text.format): in a chat format's frame,
 * the reasoning it allows comes first — the rest of the block when in_reasoning is 1 (see
 * pt_chat_opens_reasoning), an optional whole one when 0, none when -1 (thinking is off) — then
 * the JSON, so pt_chat_parse puts the JSON in content. format "none" (or unknown): the JSON alone,
 * as pt_json_schema_to_gbnf. 0, or -1 with err (not JSON, an unsupported keyword named). */
int pt_chat_json_grammar(const char *format, const char *schema_json, int in_reasoning, pt_buf *out,
                         char *err, size_t err_len);

/* A GBNF (appended to out) for a reply made of tool calls only, in a chat format's syntax
 * ("glm-5", "qwen3", "deepseek-v3", "gemma-4"): the calls' markup, each call naming one of the
 * tools of tools_json (an OpenAI tools array: [{type:"function", function:{name, parameters}}])
 * with arguments valid against that tool's parameters schema (the pt_json_schema_to_gbnf subset;
 * for GLM-5 string-typed arguments are raw text, for Gemma 4 values are in its own syntax).
 *   tool_name: NULL, any tool of the list (tool_choice "required"); else only that one (a named
 *              tool_choice; it must be in the list).
 *   parallel:  1, one or more calls; 0, exactly one (parallel_tool_calls false).
 *   in_reasoning: what pt_chat_opens_reasoning says for the prompt: 1, the text starts inside the
 *              reasoning block, which must be closed before the calls; 0, an optional reasoning
 *              block may precede them; -1, none may (thinking is off).
 * Reasoning text cannot hold the closing marker (it would close the block); argument strings
 * cannot hold a raw '<' (JSON formats write it \u003c; GLM-5 string values and Gemma 4 strings
 * have no escape for it), so no argument can spell a call marker. Generate with
 * PT_DETOKENIZE_RENDER_SPECIAL and parse with pt_chat_parse (which then finds n_calls >= 1 and
 * n_bad 0). 0, or -1 with err (unknown format, malformed tools, no such tool, an unsupported schema
 * keyword naming the tool). */
int pt_chat_tool_grammar(const char *format, const char *tools_json, const char *tool_name,
                         int parallel, int in_reasoning, pt_buf *out, char *err, size_t err_len);

/* A GBNF (appended to out) for a reply without tool calls (tool_choice "none" with tools in the
 * prompt): the reasoning the format allows (as pt_chat_json_grammar), then any text that does
 * not hold the format's call-opening marker, so pt_chat_parse finds no call in it. 0, or -1 with
 * err (unknown format). */
int pt_chat_no_tool_grammar(const char *format, int in_reasoning, pt_buf *out, char *err,
                            size_t err_len);

/* One entry of a logit bias: added to the token's logit before sampling. */
typedef struct pt_logit_bias {
    int32_t token; /* a token id, < the sampler's n_vocab */
    float bias;    /* in [-100, 100]; -100 bans the token (its logit becomes -inf) */
} pt_logit_bias;

typedef struct pt_sampling {
    float temp;              /* <= 0: greedy */
    int top_k;               /* 0: off */
    float top_p;             /* >= 1: off */
    float min_p;             /* 0: off; keep tokens with p >= min_p * p_max */
    float repeat_penalty;    /* 1: off */
    float frequency_penalty; /* 0: off */
    float presence_penalty;  /* 0: off */
    int penalty_last_n;      /* history window of the penalties (default 64) */
    uint64_t seed;
    /* [n_logit_bias] biases applied to the logits before the whole chain (penalties, greedy or
     * temperature...), as OpenAI's and llama.cpp's logit_bias; entries for one token add up (a
     * -100 among them bans it). Borrowed: pt_sampler_new / pt_gen_new / pt_gen_set_sampling copy
     * it, so it need only live across that call. */
    const pt_logit_bias *logit_bias;
    int n_logit_bias;
    /* NULL, or the grammar every drawn token must follow (borrowed: it must outlive the sampler;
     * it needs an engine's vocabulary, see pt_grammar_new). The sampler keeps its own position in
     * it: pt_sampler_accept advances it, pt_sampler_reset goes back to the start. */
    const pt_grammar *grammar;
} pt_sampling;

/* Fields of pt_sampling, as bits: which ones a user or a request set. */
enum {
    PT_SAMPLING_TEMP = 1 << 0,
    PT_SAMPLING_TOP_K = 1 << 1,
    PT_SAMPLING_TOP_P = 1 << 2,
    PT_SAMPLING_MIN_P = 1 << 3,
    PT_SAMPLING_REPEAT = 1 << 4,
    PT_SAMPLING_FREQUENCY = 1 << 5,
    PT_SAMPLING_PRESENCE = 1 << 6,
    PT_SAMPLING_LAST_N = 1 << 7,
    PT_SAMPLING_SEED = 1 << 8,
    PT_SAMPLING_LOGIT_BIAS = 1 << 9, /* logit_bias and n_logit_bias */
    PT_SAMPLING_GRAMMAR = 1 << 10,
};

/* petrel's defaults: temp 0.7, top-p 0.95, top-k and min-p off, no penalties
 * (window 64), seed 0. */
void pt_sampling_default(pt_sampling *p);
/* The defaults overridden by what the model publishes (general.sampling.temp,
 * top_k, top_p, min_p: generation_config.json as llama.cpp's converter writes
 * it). Read once at open. */
void pt_engine_sampling(const pt_engine *e, pt_sampling *p);
/* Copy into p the fields of `with` named by the PT_SAMPLING_* bits in fields;
 * the one way a front end layers user or request settings over defaults. */
void pt_sampling_override(pt_sampling *p, const pt_sampling *with, unsigned fields);

typedef struct pt_sampler pt_sampler;
/* All scratch ([n_vocab] candidates and counts) allocated here; sampling never
 * allocates. NULL with err for a parameter out of range or no memory. */
pt_sampler *pt_sampler_new(const pt_sampling *p, int n_vocab, char *err, size_t err_len);
void pt_sampler_free(pt_sampler *s);
/* Forget the penalty history; a grammar goes back to its start. */
void pt_sampler_reset(pt_sampler *s);
/* Record a generated token in the history and advance the grammar over it. 0; -1 when the
 * grammar does not allow the token (it is recorded, the grammar's position is unchanged). */
int pt_sampler_accept(pt_sampler *s, int32_t tok);
/* Pick a token from logits[n_vocab] (modified in place by the bias, the grammar's mask and the
 * penalties); does not accept it. -1 only with a grammar that no token of the vocabulary can
 * continue (or out of memory while masking). */
int32_t pt_sampler_sample(pt_sampler *s, float *logits);
/* 1 when the sampler has a grammar and what it accepted is a whole sentence of it. */
int pt_sampler_grammar_done(const pt_sampler *s);

/* ===== Generation =====
 * A pt_gen is one session's generation: its sampler, its drafting state (the MTP head) and the
 * prefix cache its prompts go through. It lives in the engine, beside the session it drives.
 * pt_gen_prefill brings the session to a token prompt (only the tokens past the longest prefix
 * the session holds, or the prefix cache gives back, are evaluated); then the generation
 * samples, streams and stops, one token a step: pt_gen_run does it for one session, and
 * pt_gen_start + pt_gen_step do it for several sessions of one engine at once, each step
 * advancing every running generation by a token (its own sampler, grammar, stop strings,
 * drafting and callbacks: a generation's tokens and text are the same whichever others step
 * beside it). Nothing allocates per token (the text buffer grows geometrically); nothing
 * prints: text goes to the emit callback. */

typedef struct pt_gen pt_gen;

/* A token and its log-probability (pt_gen_opts.on_logprob). */
typedef struct pt_logprob {
    int32_t id;
    float logprob;
} pt_logprob;
#define PT_MAX_TOP_LOGPROBS 20

/* The session (and its engine, whose vocabulary decodes) stays the caller's;
 * the sampler is made from sp. NULL with err (no vocabulary, a vocabulary
 * larger than the model's output, a bad parameter). */
pt_gen *pt_gen_new(pt_session *s, const pt_sampling *sp, char *err, size_t err_len);
void pt_gen_free(pt_gen *g);
/* The session it generates in. */
pt_session *pt_gen_session(const pt_gen *g);
/* Replace the sampler with one made from sp; the cache is kept. 0 or -1 with err. */
int pt_gen_set_sampling(pt_gen *g, const pt_sampling *sp, char *err, size_t err_len);
/* Make the session hold exactly ids[0..n) and keep the last one's logits.
 * Returns the leading tokens reused from the cache, or -1 with err (empty,
 * longer than the context, engine error), or -2 when *stop became set between
 * chunks (the cache then holds a prefix). */
int pt_gen_prefill(pt_gen *g, const int32_t *ids, int n, const volatile sig_atomic_t *stop,
                   char *err, size_t err_len);
/* Drop the whole cache (the next prefill starts from zero). */
void pt_gen_clear(pt_gen *g);
/* Prefill through a prefix cache (NULL: none): before the prompt is evaluated the longest
 * stored prefix is restored when the session holds less of it, and after it the prompt's
 * blocks are stored. scope (copied; NULL: none) keeps entries apart per API key. */
int pt_gen_set_prefix_cache(pt_gen *g, pt_pcache *pc, const char *scope);
/* Positions the last pt_gen_prefill restored from the prefix cache on disk (0: none, or no
 * cache); they are part of what it returned as reused. */
int pt_gen_last_restored(const pt_gen *g);
/* pt_session_save_file of the generation's session, its MTP head first brought up to the
 * positions the trunk decided (so the file carries them and drafting resumes from them).
 * 0, or -1 with err. */
int pt_gen_save_file(pt_gen *g, const char *path, const void *extra, size_t extra_len, char *err,
                     size_t err_len);
/* pt_session_load_file into the generation's session; the drafting state then starts from
 * the positions restored. Same returns as pt_session_load_file. */
int pt_gen_load_file(pt_gen *g, const char *path, char **extra, size_t *extra_len, char *err,
                     size_t err_len);

/* Why a generation ended (pt_gen_result.reason). PT_GEN_ERROR: the engine failed (a read, a
 * grammar no token can continue, memory); pt_gen_error says why. */
enum {
    PT_GEN_EOG = 1,
    PT_GEN_LENGTH,
    PT_GEN_STOP_STRING,
    PT_GEN_CONTEXT,
    PT_GEN_INTERRUPT,
    PT_GEN_ERROR,
};

typedef struct pt_gen_opts {
    int max_tokens;           /* < 0: until end of generation or the context is full */
    const char *const *stops; /* stop strings matched on the decoded text */
    int n_stops;
    int decode_flags; /* PT_DETOKENIZE_RENDER_SPECIAL to show control tokens such as </think> */
    /* With PT_DETOKENIZE_RENDER_SPECIAL: when set ([vocab], pt_chat_markup_tokens), only the
     * control tokens marked here are written; the others decode to nothing. Stop strings never
     * match across a written control token's text. */
    const unsigned char *show_control;
    int ignore_eog; /* 1: end-of-generation tokens do not stop (benchmarks) */
    /* Asked before each token is sampled (may be NULL); non-zero stops the run
     * as PT_GEN_INTERRUPT (the server notices a client that went away). */
    int (*should_stop)(void *ud);
    void *should_stop_ud;
    /* Log-probabilities (may be NULL): called for each sampled token, before its text is
     * emitted, with its log-probability under the model's own distribution (the log-softmax
     * of the logits, before biases, penalties, temperature and truncation: what OpenAI and
     * llama.cpp's server report) and the n_top_logprobs most likely tokens, most likely first
     * (at most PT_MAX_TOP_LOGPROBS). */
    void (*on_logprob)(void *ud, const pt_logprob *sampled, const pt_logprob *top, int n_top);
    void *on_logprob_ud;
    int n_top_logprobs;
} pt_gen_opts;

typedef struct pt_gen_result {
    int reason;     /* PT_GEN_* */
    int n_tokens;   /* tokens sampled (the EOG token not counted) */
    double t_first; /* pt_now() when the first token was sampled (0: none) */
    double t_end;
    pt_buf text; /* every byte generated, cut before a stop string (raw: may be
                    invalid UTF-8); reused across runs, the caller frees */
    /* With a grammar (pt_sampling.grammar): 1 when the text is a whole sentence of it. Reason
     * PT_GEN_EOG then means the grammar ended (EOG is allowed nowhere else); PT_GEN_LENGTH,
     * CONTEXT or INTERRUPT mean it was cut and grammar_done is 0 unless the cut happened to
     * fall where the grammar could end; after PT_GEN_STOP_STRING it is 0. 0 without a
     * grammar. */
    int grammar_done;
} pt_gen_result;

/* Streamed text; return non-zero to stop (as PT_GEN_INTERRUPT). */
typedef int (*pt_gen_emit_fn)(void *ud, const char *s, size_t n);

/* ===== Drafting (speculative decoding with the model's MTP head) =====
 * With a draft length n > 0, a generation has the model's NextN/MTP head draft n tokens after
 * each sampled one and verifies them in one forward pass over n + 1 positions; the tokens
 * are still drawn one by one by the whole sampling chain from the model's own logits for
 * their position (bit-identical to a one-token decode), so the output is the same with and
 * without drafting, token for token, at any temperature and seed. Drafting backs off by
 * itself while it costs more per token than plain decoding. */
#define PT_MAX_DRAFT 16

typedef struct pt_draft_stats {
    int n_draft;         /* draft length in effect (0: off) */
    uint64_t verify;     /* verify passes (forwards over 1 + drafts positions) */
    uint64_t plain;      /* one-token forwards (backed off, or no room for drafts) */
    uint64_t drafted;    /* tokens drafted */
    uint64_t accepted;   /* drafts the sampled token matched */
    uint64_t tokens;     /* tokens whose logits these forwards gave */
    uint64_t backoffs;   /* times drafting backed off */
    uint64_t probes;     /* plain steps the head drafted after, without a verify pass */
    uint64_t probe_hits; /* probes whose draft the sampled token matched */
} pt_draft_stats;

/* Draft n tokens per verify pass (0: off). Returns the length in effect (n clamped to
 * PT_MAX_DRAFT and to what the context allows), or -1 with err: n > 0 on a model without an
 * MTP head (the message names the model), out of memory. Keeps the cache. */
int pt_gen_set_draft(pt_gen *g, int n, char *err, size_t err_len);
/* The draft length in effect (0: off). */
int pt_gen_draft(const pt_gen *g);
/* Drafting's counters for the last run (zeroes when drafting is off). */
void pt_gen_draft_stats(const pt_gen *g, pt_draft_stats *st);

/* ===== Running: one session, or several at once ===== */

/* Begin a run after pt_gen_prefill: r (its text buffer kept and emptied) receives the run's
 * outcome, emit its text as it becomes safe to show; stop (may be NULL; set by a signal
 * handler or another thread) is read before each token. o (and the strings it points to), r,
 * emit and ud must stay valid until the run ends: the step that ends it, or a call that ends
 * it early (below), completes r and may emit the text held back. 0, or -1 with err (nothing
 * prefilled, a run already under way). */
int pt_gen_start(pt_gen *g, const pt_gen_opts *o, pt_gen_emit_fn emit, void *ud,
                 const volatile sig_atomic_t *stop, pt_gen_result *r, char *err, size_t err_len);
/* Advance each running generation of g[0..n) (started, not yet ended; others are skipped) by
 * one token: it samples from its logits, streams the token's text, checks its stops, and when
 * it goes on its next logits are computed (with drafting, from a verify pass that may already
 * hold them). Today each session's forward is a call of its own; the results are what a
 * generation gives alone, whichever others share its steps. A generation that ends has its
 * result complete (reason, times, text flushed and NUL-terminated, grammar_done) and is no
 * longer running; one that fails ends with reason PT_GEN_ERROR, the others go on (so does a
 * second running entry of one session in a call, which fails). The generations must be of
 * one engine, and no other thread may use their sessions meanwhile. Returns how many still
 * run. */
int pt_gen_step(pt_gen *const *g, int n);
/* 1 while a run started by pt_gen_start has not ended. pt_gen_prefill, pt_gen_clear,
 * pt_gen_set_sampling, pt_gen_set_draft, pt_gen_save_file and pt_gen_load_file end a run
 * under way first, as PT_GEN_INTERRUPT. */
int pt_gen_running(const pt_gen *g);
/* Why the last run ended with PT_GEN_ERROR ("" otherwise). */
const char *pt_gen_error(const pt_gen *g);
/* A whole run of one generation: pt_gen_start, then pt_gen_step until it ends. Bytes that
 * might begin a stop string are held back until they cannot; a character split across tokens
 * is never emitted in halves. 0, or -1 with err (engine error, nothing prefilled). */
int pt_gen_run(pt_gen *g, const pt_gen_opts *o, pt_gen_emit_fn emit, void *ud,
               const volatile sig_atomic_t *stop, pt_gen_result *r, char *err, size_t err_len);

#endif
