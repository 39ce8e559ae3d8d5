/* server.c — HTTP endpoints, the job queue and the generation worker of
 * `petrel serve`. See server.h for the threading and the limits. */
#include "server/server.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "front/front.h"
#include "server/oai.h"
#include "server/store.h"
#include "server/webui.h"

/* ===== Jobs ===== */

/* One request handed to the worker. Shared by the connection thread (and, for
 * a stream, the response's reader) and the worker; freed when refs drops to 0.
 * Fields below `srv.mu` are read and written under the server's mutex. */
typedef struct job {
    struct job *next; /* queue link */
    struct srv *srv;
    int refs;
    oai_req req;
    int fd; /* dup of the client's socket (to notice it leaving); -1 none */
    /* Set by the connection side (the client is gone) or srv_stop, read by the worker and
     * between chunks by the library: only through job_stop / job_stopped (atomic). */
    volatile sig_atomic_t stop;
    pthread_cond_t cv;
    /* srv.mu */
    int started; /* the prompt was accepted; a stream may begin */
    int done;
    int queued;          /* in the queue (the worker has not taken it) */
    int http11;          /* the request was HTTP/1.1: an interim 1xx may be sent */
    int probed;          /* "102 Processing" was sent after the client's end of file */
    int tenant;          /* the API key's index (0 without keys) */
    int status;          /* when done before starting or not streaming: HTTP status */
    char *body;          /* ... and its JSON body */
    pt_grammar *grammar; /* the request's output constraint (JSON format, tool choice), or NULL */
    pt_buf sse;          /* stream bytes produced */
    size_t sse_sent;     /* ... and handed to libmicrohttpd */
} job;

/* One TCP connection, tracked from accept to close (srv.mu) so slow senders can be cut off and
 * counted per address. */
typedef struct sconn {
    struct sconn *next, *prev;
    int fd;                 /* dup of the socket: shutdown() by the reaper; never reused early */
    unsigned char addr[16]; /* the client's address (4 bytes IPv4, 16 IPv6) */
    int alen;               /* ... its length */
    int receiving;          /* a request (or the next on a kept-alive connection) is arriving */
    int reaped;             /* shut down for missing its deadline */
    double since;           /* when receiving began, pt_now() seconds */
    int allow_origin;       /* the current request's Origin is allowed: replies name it (CORS) */
} sconn;

/* The cross-thread cancel flag of a job: an atomic store and load (a plain volatile access
 * from two threads is a data race). */
static void job_stop(job *j) {
    __atomic_store_n(&j->stop, 1, __ATOMIC_RELAXED);
}
static int job_stopped(const job *j) {
    return __atomic_load_n(&j->stop, __ATOMIC_RELAXED);
}

struct srv {
    srv_params p;
    char *host, *model_name;
    char **keys; /* the API keys (n_keys; none: open) */
    int n_keys;
    size_t body_cap;  /* bytes: the largest body whose prompt the context could hold (body_limit) */
    int n_ctx;        /* the session's context, tokens */
    int max_piece;    /* bytes: the longest token of the vocabulary, specials rendered */
    int n_vocab;      /* tokens in the vocabulary (the ids logit_bias may name) */
    int cache_tenant; /* whose prompt the session's KV cache holds (worker only); -1: nobody's */
    struct MHD_Daemon *d;
    int port;
    pthread_mutex_t mu;
    pthread_cond_t work_cv;
    job *head, *tail; /* waiting jobs */
    int n_waiting, busy, ready;
    int stopping;  /* written under mu (atomically: should_stop reads it without mu) */
    int n_streams; /* stream responses libmicrohttpd still holds (srv.mu): srv_stop lets them
                      send their last events before it closes the connections */
    srv_model m;
    pthread_t worker;
    int worker_started;
    unsigned long long seq;
    /* connections (srv.mu) */
    sconn *conns;
    int n_conns;
    pthread_t reaper;
    int reaper_started;
    unsigned long long n_timed_out, n_refused;
    /* counters for /health (srv.mu) */
    unsigned long long n_requests, n_cancelled, n_rejected, tokens_generated;
    int last_completion_tokens, last_prompt_tokens, last_cached_tokens;
    char last_finish[16];
    uint64_t last_expert_requests, last_expert_hits, last_bytes_read; /* the last request's */
    double last_prefill_s, last_decode_tok_s;
    double job_seconds;    /* a request's time in the worker, a moving average (Retry-After) */
    rstore *store;         /* kept Responses API responses */
    unsigned char *markup; /* [vocab] control tokens a chat reply shows (pt_chat_markup_tokens) */
};

static void job_release(job *j) { /* srv.mu held */
    if (--j->refs > 0) return;
    if (j->fd >= 0) close(j->fd);
    oai_req_free(&j->req);
    pt_grammar_free(j->grammar);
    free(j->body);
    pt_buf_free(&j->sse);
    pthread_cond_destroy(&j->cv);
    free(j);
}

/* 1 when the client has gone. Its end of file alone does not say so: a client may half-close
 * after its request (shutdown(SHUT_WR): `nc -N`, some proxies) and still read the answer. A
 * client that closed altogether resets the connection as soon as anything is sent to it, and
 * the socket's TCP state then reads TCP_CLOSE; a half-closed one stays in CLOSE_WAIT. A stream's
 * own writes provoke that reset; before an answer has begun, job_probe sends something. A
 * pipelined next request (data waiting) does not count. */
static int client_gone(int fd) {
    if (fd < 0) return 0;
    char c;
    ssize_t r = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (r > 0) return 0;
    if (r < 0) return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
#ifdef TCP_INFO
    struct tcp_info ti;
    socklen_t tl = sizeof ti;
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &tl)) return 1; /* not TCP: EOF is gone */
    return ti.tcpi_state == TCP_CLOSE;
#else
    return 1; /* no TCP state to read (not Linux): end of file counts as gone */
#endif
}

/* The connection thread, before its answer has begun (nothing else writes the socket then):
 * when the client's end of file has come, send an interim "HTTP/1.1 102 Processing" once, so
 * that a client that closed altogether answers with a reset (client_gone sees it next time) while
 * a half-closed one reads it and waits on (RFC 9110 section 15.2: a client must accept a 1xx it
 * did not expect). Not for HTTP/1.0, which knows no 1xx: such a client is served to the end. */
static void job_probe(job *j) { /* srv.mu held */
    if (j->probed || !j->http11 || j->fd < 0) return;
    char c;
    if (recv(j->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) != 0) return;
    static const char p[] = "HTTP/1.1 102 Processing\r\n\r\n";
    j->probed = 1;
    if (send(j->fd, p, sizeof p - 1, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)(sizeof p - 1))
        job_stop(j);
}

/* The CLOCK_REALTIME time ms milliseconds from now, for pthread_cond_timedwait. */
static struct timespec time_in(long ms) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += ms % 1000 * 1000000L;
    if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
    return ts;
}

static void job_fail(job *j, int status, const char *type, const char *code,
                     const char *msg) { /* srv.mu held */
    free(j->body);
    j->status = status;
    j->body = oai_error_body(type, code, NULL, msg);
}

/* ===== The worker ===== */

/* One job in the worker, from the id of its reply to its log line. */
typedef struct run_ctx {
    srv *s;
    job *j;
    fe_split split;
    oai_stream st;
    int streaming;
    int n_reasoning; /* tokens sampled while inside the reasoning block */
    pt_buf fix;      /* scratch for UTF-8 repair */
    int failed;
    char id[64]; /* the reply's id */
    long created;
    json_t *lp;        /* logprobs: every token's entry (oai_logprob_entry), or NULL */
    double t_comment;  /* pt_now() when the last prefill comment went out */
    int shutdown;      /* srv_stop stopped the prefill */
    double t_start;    /* pt_now() when the worker took the job */
    pt_stats st0;      /* the engine's counters then: the job's expert reads are the change */
    fe_turn_result tr; /* the turn: prompt, times, what was generated, the parsed answer */
    pt_buf echoed;     /* completions' echo: the prompt, then the completion */
    char err[512];     /* why the job failed, for its reply and its log line */
} run_ctx;

/* How a request is refused: the status and the error's type, code and param. */
typedef struct refusal {
    int status;
    const char *type, *code;   /* code NULL: null */
    char param[OAI_PARAM_MAX]; /* the field the error names (error.param), "" none */
} refusal;

/* A stream begins: the connection thread sends the status and headers (on j->started), then
 * the opening events. srv.mu held. */
static void stream_begin(run_ctx *rc) {
    srv *s = rc->s;
    job *j = rc->j;
    j->started = 1;
    rc->streaming = 1;
    if (oai_stream_begin(&rc->st, j->req.api, rc->id, s->model_name, rc->created,
                         j->req.include_usage, &j->sse))
        rc->failed = 1;
    pthread_cond_broadcast(&j->cv);
}

static int on_delta(void *ud, int kind, const char *p, size_t n) {
    run_ctx *rc = ud;
    if (!rc->streaming) return 0;
    if (pt_utf8_repair(p, n, &rc->fix) < 0) return -1;
    pthread_mutex_lock(&rc->s->mu);
    int r = oai_stream_delta(&rc->st, kind, rc->fix.v, rc->fix.n, &rc->j->sse);
    pthread_cond_broadcast(&rc->j->cv);
    pthread_mutex_unlock(&rc->s->mu);
    return r;
}

/* A sampled token's log-probability: kept for the reply and, in a stream, for the next chunk
 * (its text follows). Control tokens show as "" (their text is not the reply's). */
static void on_logprob(void *ud, const pt_logprob *sampled, const pt_logprob *top, int n_top) {
    run_ctx *rc = ud;
    json_t *e = oai_logprob_entry(rc->s->m.e, 0, sampled, top, n_top);
    if (!e) return;
    json_array_append(rc->lp, e);
    if (rc->streaming) {
        pthread_mutex_lock(&rc->s->mu);
        if (!rc->st.lp) rc->st.lp = json_array();
        json_array_append(rc->st.lp, e);
        pthread_mutex_unlock(&rc->s->mu);
    }
    json_decref(e);
}

static int on_text(void *ud, const char *p, size_t n) {
    run_ctx *rc = ud;
    return fe_split_push(&rc->split, p, n, 0, on_delta, rc);
}

static int should_stop(void *ud) {
    run_ctx *rc = ud;
    if (rc->split.mode == FE_SPLIT_REASONING && !rc->split.raw) rc->n_reasoning++;
    if (job_stopped(rc->j) || __atomic_load_n(&rc->s->stopping, __ATOMIC_RELAXED)) return 1;
    if (client_gone(rc->j->fd)) {
        job_stop(rc->j);
        return 1;
    }
    return 0;
}

static void make_id(srv *s, const char *prefix, char *id, size_t cap) {
    unsigned long long x =
        (unsigned long long)time(NULL) * 0x9E3779B97F4A7C15ull ^ (++s->seq * 0xBF58476D1CE4E5B9ull);
    snprintf(id, cap, "%s%016llx", prefix, x);
}

/* The request's line in the log: what was asked and how fast it went. */
static void log_job(srv *s, const job *j, int status, int n_prompt, int cached,
                    const pt_gen_result *res, double t_start, double t_prefilled,
                    const char *finish) {
    if (!s->p.log) return;
    const char *path = j->req.api == OAI_CHAT          ? "/v1/chat/completions"
                       : j->req.api == OAI_COMPLETIONS ? "/v1/completions"
                                                       : "/v1/responses";
    double dec =
        res && res->n_tokens > 1 && res->t_end > res->t_first ? res->t_end - res->t_first : 0;
    /* an error message may quote the request: no control characters (terminal
     * escapes, forged log lines) and no more than a line's worth of it */
    char why[160];
    snprintf(why, sizeof why, "%s", finish);
    for (char *c = why; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
    /* drafting with the MTP head: acceptance, tokens per forward, draft length */
    char draft[128] = "";
    pt_draft_stats ds;
    pt_gen_draft_stats(s->m.g, &ds);
    if (res && ds.n_draft && ds.verify + ds.plain)
        snprintf(draft, sizeof draft, " (draft %d: %.1f%% accepted, %.2f tok/forward)", ds.n_draft,
                 ds.drafted ? 100.0 * (double)ds.accepted / (double)ds.drafted : 0.0,
                 (double)ds.tokens / (double)(ds.verify + ds.plain));
    /* the KV cache after the request: context, types, RAM, prefix-cache hits */
    fe_kv_stats kv;
    fe_kv_stats_of(s->m.s, cached, pt_gen_last_restored(s->m.g), &kv);
    char kline[FE_KV_LINE];
    fe_kv_format(&kv, kline, sizeof kline);
    fprintf(s->p.log,
            "petrel: %d POST %s%s: prompt %d tokens (%d cached), prefill %.3f s, %d generated, "
            "%.2f tok/s%s, %s, %s%s%s%s\n",
            status, path, j->req.stream ? " (stream)" : "", n_prompt, cached > 0 ? cached : 0,
            t_prefilled > t_start ? t_prefilled - t_start : 0.0, res ? res->n_tokens : 0,
            dec > 0 ? (res->n_tokens - 1) / dec : 0.0, draft, kline, why,
            j->req.ignored[0] ? "; ignored unknown fields: " : "", j->req.ignored,
            j->req.n_omitted ? "; image/audio/file parts replaced by a placeholder" : "");
    fflush(s->p.log);
}

/* Keep a finished response for previous_response_id and GET /v1/responses/{id}: its object and
 * the conversation it ends (the input without the instructions, then this answer). */
static void keep_response(srv *s, const job *j, const oai_result *r) {
    const oai_req *rq = &j->req;
    char *body = oai_reply(OAI_RESPONSES, r);
    json_t *conv = json_array();
    for (size_t i = (size_t)rq->n_instr; conv && i < json_array_size(rq->messages); i++)
        json_array_append(conv, json_array_get(rq->messages, i));
    json_t *turn = conv ? oai_response_turn(r) : NULL;
    if (!body || !turn)
        json_decref(turn);
    else if (!json_array_append_new(conv, turn)) /* takes turn, even when it fails */
        rstore_put(s->store, r->id, j->tenant, body, conv);
    json_decref(conv);
    free(body);
}

/* A prompt is being evaluated (pt_session_set_progress). A stream begins at the first report,
 * before anything is evaluated, with a comment; more comments follow every sse_keepalive_s
 * (clients with an idle timeout keep the connection through a long prefill). A client that
 * left, and srv_stop, are noticed here too: the library stops between chunks (a shutdown
 * does not wait for a prefill of minutes). */
static void on_progress(void *ud, const pt_prompt_progress *p) {
    run_ctx *rc = ud;
    srv *s = rc->s;
    job *j = rc->j;
    if (!rc->shutdown && __atomic_load_n(&s->stopping, __ATOMIC_RELAXED)) {
        rc->shutdown = 1;
        job_stop(j);
    }
    if (!j->req.stream) return;
    const double now = pt_now();
    if (rc->streaming && p->done > 0 && now - rc->t_comment < s->p.sse_keepalive_s) return;
    rc->t_comment = now;
    const int done = p->n_reused + (int)((double)(p->n_prompt - p->n_reused) * (double)p->done /
                                         (double)p->total);
    char line[64];
    snprintf(line, sizeof line, ": prefill %d/%d\n\n", done, p->n_prompt);
    pthread_mutex_lock(&s->mu);
    if (pt_buf_append(&j->sse, line, strlen(line))) rc->failed = 1;
    if (!rc->streaming) stream_begin(rc);
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&s->mu);
    if (client_gone(j->fd)) job_stop(j);
}

/* The prompt is in the cache: set up the splitter and, for a stream not begun yet (the prompt
 * was reused whole), its opening events (the connection thread starts the response on
 * j->started). */
static int on_prefilled(void *ud, int in_reasoning) {
    run_ctx *rc = ud;
    srv *s = rc->s;
    job *j = rc->j;
    fe_split_init(&rc->split, s->m.format, in_reasoning, j->req.tools != NULL,
                  j->req.api == OAI_COMPLETIONS);
    pthread_mutex_lock(&s->mu);
    j->started = 1;
    if (j->req.stream) {
        if (!rc->streaming) stream_begin(rc);
        /* echo: the prompt comes first, as text the stream has already produced */
        if (j->req.echo && j->req.prompt &&
            oai_stream_delta(&rc->st, FE_CONTENT, j->req.prompt, strlen(j->req.prompt), &j->sse))
            rc->failed = 1;
    }
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&s->mu);
    return 0;
}

/* 1 when the generation was interrupted by srv_stop (not by its client leaving; the stop flag
 * srv_stop set during the prefill is not the client's). */
static int res_cut_by_shutdown(const run_ctx *rc) {
    return rc->tr.gen.reason == PT_GEN_INTERRUPT &&
           (rc->shutdown ||
            (!job_stopped(rc->j) && __atomic_load_n(&rc->s->stopping, __ATOMIC_RELAXED)));
}

/* The generator set up for the job: a chat request needs a chat format; the sampling is the
 * server's defaults, then the request's fields, a fresh seed unless the request or --seed
 * fixes one, and the job's grammar. 0, or -1 with rc->err (the request's fault: a 400). */
static int job_sampling(run_ctx *rc) {
    const srv_model *m = &rc->s->m;
    const oai_req *rq = &rc->j->req;
    if (rq->api != OAI_COMPLETIONS && !pt_chat_format_known(m->format)) {
        snprintf(rc->err, sizeof rc->err,
                 "this model has no known chat format; use /v1/completions");
        return -1;
    }
    pt_sampling sp = m->sp;
    pt_sampling_override(&sp, &rq->sp, rq->sp_set);
    sp.grammar = rc->j->grammar;
    if (!(rq->sp_set & PT_SAMPLING_SEED) && !m->fixed_seed)
        sp.seed = (uint64_t)(pt_now() * 1e9) ^ (rc->s->seq << 40);
    return pt_gen_set_sampling(m->g, &sp, rc->err, sizeof rc->err);
}

/* The turn a job asks for: its conversation (or completion prompt), limits and stops (the
 * server's when it gives none), and the callbacks that stream it and notice a client leaving.
 * stops: room for the request's stop strings, which the turn points at. */
static fe_turn job_turn(run_ctx *rc, const char **stops) {
    const srv_model *m = &rc->s->m;
    const oai_req *rq = &rc->j->req;
    const int chat = rq->api != OAI_COMPLETIONS;
    for (int i = 0; i < rq->n_stops; i++)
        stops[i] = rq->stops[i];
    return (fe_turn){.format = m->format,
                     .messages = chat ? rq->messages : NULL,
                     .tools = rq->tools,
                     .thinking = rq->thinking >= 0 ? rq->thinking : m->thinking,
                     .parse_special_in_content = m->parse_special_in_content,
                     .text = rq->prompt,
                     .text_len = rq->prompt ? strlen(rq->prompt) : 0,
                     .parse = chat,
                     .gen = {.max_tokens = rq->max_tokens >= 0 ? rq->max_tokens : m->max_tokens,
                             .stops = rq->n_stops ? stops : m->stops,
                             .n_stops = rq->n_stops ? rq->n_stops : m->n_stops,
                             .decode_flags = chat ? PT_DETOKENIZE_RENDER_SPECIAL : 0,
                             .show_control = chat ? rc->s->markup : NULL,
                             .should_stop = should_stop,
                             .should_stop_ud = rc,
                             .on_logprob = rq->logprobs ? on_logprob : NULL,
                             .on_logprob_ud = rc,
                             .n_top_logprobs = rq->top_logprobs},
                     .emit = on_text,
                     .emit_ud = rc,
                     .on_prefilled = on_prefilled,
                     .ud = rc,
                     .stop = &rc->j->stop};
}

/* Run the job's turn in the session (the longest common prefix with the cache is kept):
 * fe_turn_run's result, the turn in rc->tr. */
static int run_turn(run_ctx *rc) {
    srv *s = rc->s;
    job *j = rc->j;
    const srv_model *m = &s->m;
    if (client_gone(j->fd)) job_stop(j);
    const char *stops[OAI_MAX_STOPS];
    fe_turn t = job_turn(rc, stops);
    /* prefix reuse within a tenant only: a different key's request starts from an empty cache,
     * so its cached_tokens cannot tell how much of another key's prompt it guessed */
    if (s->cache_tenant != j->tenant) {
        pt_session_truncate(m->s, 0);
        s->cache_tenant = j->tenant;
    }
    /* prefixes on disk: a key's entries are its own (scoped by the key itself, which stays
     * the same across restarts while its index may not) */
    if (m->pcache) pt_gen_set_prefix_cache(m->g, m->pcache, s->n_keys ? s->keys[j->tenant] : NULL);
    pt_session_set_progress(m->s, on_progress, rc);
    int trc = fe_turn_run(m->g, &t, &rc->tr, rc->err, sizeof rc->err);
    pt_session_set_progress(m->s, NULL, NULL);
    return trc;
}

/* A turn that ended without an answer: 1 and how it is refused (the message in rc->err), or 0
 * when there is an answer to give (perhaps an error the reply reports). */
static int turn_refused(run_ctx *rc, int trc, refusal *f) {
    switch (trc) {
    case FE_TURN_BAD_PROMPT: /* fe_turn_run's message; the request's fault (f as given: 400) */
        return 1;
    case FE_TURN_TOO_LONG:
        snprintf(rc->err, sizeof rc->err, "the prompt is %d tokens but the context holds %d",
                 rc->tr.n_prompt, pt_session_n_ctx(rc->s->m.s));
        f->code = "context_length_exceeded";
        return 1;
    case FE_TURN_CANCELLED:
        if (rc->shutdown) {
            snprintf(rc->err, sizeof rc->err,
                     "the server is shutting down; the prompt's evaluation stopped");
            f->status = 503, f->type = "server_error", f->code = NULL;
        } else {
            snprintf(rc->err, sizeof rc->err, "cancelled: the client went away");
            f->status = 499, f->code = NULL;
        }
        return 1;
    case FE_TURN_PREFILL_FAILED: /* fe_turn_run's message */
        f->status = 500, f->type = "server_error", f->code = NULL;
        return 1;
    default: /* generated (FE_TURN_GEN_FAILED, _ANSWER_FAILED: an answer that reports its error) */
        return 0;
    }
}

/* A job refused before its answer: its error reply, or an error event when its stream has
 * begun (the status was sent: 200), counted and logged. */
static void run_refused(run_ctx *rc, const refusal *f) {
    srv *s = rc->s;
    job *j = rc->j;
    int status = f->status;
    pthread_mutex_lock(&s->mu);
    if (status == 499)
        s->n_cancelled++, snprintf(s->last_finish, sizeof s->last_finish, "cancelled");
    if (rc->streaming) /* the stream began before the prefill failed: its status is sent */
        oai_stream_error(&rc->st, rc->err, &j->sse), status = 200;
    else
        job_fail(j, status, f->type, f->code, rc->err);
    pthread_mutex_unlock(&s->mu);
    log_job(s, j, status, rc->tr.n_prompt, 0, NULL, rc->t_start, rc->tr.t_prefilled, rc->err);
}

/* The content the splitter passed on as it streamed, as valid UTF-8 without trailing blanks (as
 * the final parse gives content). 0, or -1 out of memory. */
static int streamed_content(const fe_split *sp, pt_buf *out) {
    if (pt_utf8_repair(sp->content.v ? sp->content.v : "", sp->content.n, out) < 0) {
        pt_buf_free(out);
        return -1;
    }
    while (out->n && strchr(" \t\r\n", out->v[out->n - 1]))
        out->v[--out->n] = 0;
    return 0;
}

/* The parsed answer keeps its first n tool calls. */
static void keep_calls(pt_chat_parsed *p, int n) {
    while (p->n_calls > n) {
        p->n_calls--;
        free(p->calls[p->n_calls].name), free(p->calls[p->n_calls].arguments);
    }
}

/* The parsed answer as the request wants it (NULL: completions): with no tools offered,
 * tool-call markup is just text, as it was streamed; with parallel_tool_calls false, the first
 * call alone is the answer. */
static pt_chat_parsed *job_answer(run_ctx *rc) {
    const oai_req *rq = &rc->j->req;
    pt_chat_parsed *parsed = rc->tr.have_parsed ? &rc->tr.parsed : NULL;
    if (parsed && !rq->tools) {
        pt_buf c = {0};
        if (!streamed_content(&rc->split, &c)) {
            free(parsed->content);
            parsed->content = c.v;
        }
        keep_calls(parsed, 0);
    }
    if (parsed && rq->one_tool_call) keep_calls(parsed, 1);
    return parsed;
}

/* What the reply reports of the finished turn. */
static oai_result job_result(const run_ctx *rc, const pt_chat_parsed *parsed) {
    const pt_gen_result *res = &rc->tr.gen;
    const oai_req *rq = &rc->j->req;
    return (oai_result){.id = rc->id,
                        .model = rc->s->model_name,
                        .created = rc->created,
                        .parsed = parsed,
                        .text = rc->tr.text.v ? rc->tr.text.v : "",
                        .logprobs = rc->lp,
                        .reason = res->reason,
                        .prompt_tokens = rc->tr.n_prompt,
                        .cached_tokens = rc->tr.n_reused,
                        .completion_tokens = res->n_tokens,
                        /* tokens sampled inside the reasoning block; none when it held no text (a
                         * block the model closed at once) */
                        .reasoning_tokens = !parsed || !parsed->reasoning[0]  ? 0
                                            : rc->n_reasoning < res->n_tokens ? rc->n_reasoning
                                                                              : res->n_tokens,
                        .previous_response_id = rq->prev_id,
                        .store = rq->store};
}

/* A stream shows the content the final parse has beyond what was streamed (a malformed tool
 * call the splitter held back as markup). */
static void stream_parsed_rest(run_ctx *rc, const pt_chat_parsed *parsed) {
    pt_buf sent = {0};
    if (!streamed_content(&rc->split, &sent)) {
        size_t k = sent.n;
        if (strlen(parsed->content) > k && !strncmp(parsed->content, sent.v, k)) {
            pthread_mutex_lock(&rc->s->mu);
            oai_stream_delta(&rc->st, FE_CONTENT, parsed->content + k, strlen(parsed->content) - k,
                             &rc->j->sse);
            pthread_mutex_unlock(&rc->s->mu);
        }
    }
    pt_buf_free(&sent);
}

/* The /health counters of the request just answered (srv.mu held); grc: the answer failed. */
static void record_stats(run_ctx *rc, int grc, const pt_chat_parsed *parsed) {
    srv *s = rc->s;
    const pt_gen_result *res = &rc->tr.gen;
    s->tokens_generated += (unsigned long long)res->n_tokens;
    s->last_completion_tokens = res->n_tokens, s->last_prompt_tokens = rc->tr.n_prompt,
    s->last_cached_tokens = rc->tr.n_reused;
    pt_stats st1;
    pt_engine_stats(s->m.e, &st1);
    s->last_expert_hits = st1.hits - rc->st0.hits;
    s->last_expert_requests = st1.hits + st1.misses - rc->st0.hits - rc->st0.misses;
    s->last_bytes_read = st1.bytes_read - rc->st0.bytes_read;
    s->last_prefill_s = rc->tr.t_prefilled > rc->t_start ? rc->tr.t_prefilled - rc->t_start : 0;
    s->last_decode_tok_s = res->n_tokens > 1 && res->t_end > res->t_first
                               ? (res->n_tokens - 1) / (res->t_end - res->t_first)
                               : 0;
    snprintf(s->last_finish, sizeof s->last_finish, "%s",
             job_stopped(rc->j) && !rc->shutdown ? "cancelled"
             : res_cut_by_shutdown(rc)           ? "shutdown"
             : grc                               ? "error"
                   : oai_finish_reason(res->reason, parsed ? parsed->n_calls : 0));
    if (job_stopped(rc->j) && !rc->shutdown) s->n_cancelled++;
}

/* The answer goes out (srv.mu held): the stream's end, or the whole reply; grc: it failed
 * (rc->err says why), an error event or a 500 (503 while the server stops). */
static void deliver(run_ctx *rc, int grc, const oai_result *r) {
    job *j = rc->j;
    if (grc) {
        if (rc->streaming)
            oai_stream_error(&rc->st, rc->err, &j->sse);
        else
            job_fail(j, rc->s->stopping ? 503 : 500, "server_error", NULL, rc->err);
    } else if (rc->streaming) {
        oai_stream_end(&rc->st, r, &j->sse);
    } else {
        j->status = 200;
        j->body = oai_reply(j->req.api, r);
        if (!j->body) job_fail(j, 500, "server_error", NULL, "out of memory");
    }
}

/* A turn that generated: the answer's last text through the splitter, the answer as the request
 * wants it, its reply or the stream's end, the counters, the kept response, the log line.
 * trc: 0, or the generation or the answer failed (FE_TURN_GEN_FAILED, _ANSWER_FAILED). */
static void run_answered(run_ctx *rc, int trc) {
    srv *s = rc->s;
    job *j = rc->j;
    const oai_req *rq = &j->req;
    int grc = trc; /* 0, or the generation / the answer failed: an error reply */
    if (!grc && res_cut_by_shutdown(rc)) {
        /* SIGTERM cut the answer short: an error, never a finish_reason "stop" that would pass
         * a truncated answer off as complete */
        snprintf(rc->err, sizeof rc->err, "the server is shutting down; the answer was cut short");
        grc = -1;
    }
    if (trc != FE_TURN_GEN_FAILED) fe_split_push(&rc->split, "", 0, 1, on_delta, rc);
    pt_chat_parsed *parsed = job_answer(rc);
    oai_result r = job_result(rc, parsed);
    /* echo (completions): the prompt, then what was generated (a stream sent the prompt first) */
    if (rq->echo && rq->prompt && !rc->streaming) {
        if (pt_buf_append(&rc->echoed, rq->prompt, strlen(rq->prompt)) ||
            pt_buf_append(&rc->echoed, r.text, strlen(r.text)))
            grc = -1, snprintf(rc->err, sizeof rc->err, "out of memory");
        else
            r.text = rc->echoed.v;
    }
    if (grc == 0 && rc->streaming && parsed && rq->tools) stream_parsed_rest(rc, parsed);
    pthread_mutex_lock(&s->mu);
    record_stats(rc, grc, parsed);
    deliver(rc, grc, &r);
    if (!grc && rq->api == OAI_RESPONSES && rq->store && parsed) keep_response(s, j, &r);
    char finish[sizeof s->last_finish];
    snprintf(finish, sizeof finish, "%s", s->last_finish);
    pthread_mutex_unlock(&s->mu);
    log_job(s, j, grc ? (rc->streaming ? 200 : 500) : 200, rc->tr.n_prompt, rc->tr.n_reused,
            &rc->tr.gen, rc->t_start, rc->tr.t_prefilled, finish);
}

/* Generate for one job (worker thread, srv.mu not held): one turn of front/front.h (render,
 * tokenize, prefill, generate, parse) with the request's sampling, then the reply or the
 * stream's end; or the request's refusal. */
static void run_job(srv *s, job *j) {
    run_ctx rc = {.s = s, .j = j, .lp = j->req.logprobs ? json_array() : NULL};
    const char *prefix = j->req.api == OAI_CHAT          ? "chatcmpl-"
                         : j->req.api == OAI_COMPLETIONS ? "cmpl-"
                                                         : "resp_";
    pthread_mutex_lock(&s->mu);
    make_id(s, prefix, rc.id, sizeof rc.id);
    pthread_mutex_unlock(&s->mu);
    rc.created = (long)time(NULL);
    rc.t_start = pt_now();
    pt_engine_stats(s->m.e, &rc.st0);
    refusal f = {400, "invalid_request_error", "invalid_request", ""};
    if (job_sampling(&rc)) {
        run_refused(&rc, &f);
    } else {
        int trc = run_turn(&rc);
        if (turn_refused(&rc, trc, &f))
            run_refused(&rc, &f);
        else
            run_answered(&rc, trc);
    }
    if (j->grammar) {
        /* the sampler borrows the job's grammar, which goes with the job */
        pt_sampling plain = s->m.sp;
        pt_gen_set_sampling(s->m.g, &plain, NULL, 0);
    }
    fe_split_free(&rc.split);
    oai_stream_free(&rc.st);
    pt_buf_free(&rc.fix);
    pt_buf_free(&rc.echoed);
    json_decref(rc.lp);
    fe_turn_result_free(&rc.tr);
}

static void *worker_main(void *arg) {
    srv *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->head && !s->stopping)
            pthread_cond_wait(&s->work_cv, &s->mu);
        if (s->stopping) break;
        job *j = s->head;
        s->head = j->next;
        if (!s->head) s->tail = NULL;
        s->n_waiting--;
        j->queued = 0;
        if (!job_stopped(j)) {
            s->busy = 1;
            pthread_mutex_unlock(&s->mu);
            double t0 = pt_now();
            run_job(s, j);
            double dt = pt_now() - t0;
            pthread_mutex_lock(&s->mu);
            s->job_seconds = s->job_seconds > 0 ? 0.75 * s->job_seconds + 0.25 * dt : dt;
            s->busy = 0;
        } else {
            s->n_cancelled++; /* its client left while it waited */
        }
        j->done = 1;
        pthread_cond_broadcast(&j->cv);
        job_release(j);
    }
    /* stopping: whatever still waits ends */
    while (s->head) {
        job *j = s->head;
        s->head = j->next;
        job_fail(j, 503, "server_error", NULL, "the server is shutting down");
        j->done = 1;
        pthread_cond_broadcast(&j->cv);
        job_release(j);
    }
    s->tail = NULL;
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* ===== Connection slots ===== */

/* The address bytes of a socket address; 0 when the family is neither IPv4 nor IPv6. */
static int addr_key(const struct sockaddr *a, unsigned char out[16]) {
    if (a && a->sa_family == AF_INET) {
        memcpy(out, &((const struct sockaddr_in *)a)->sin_addr, 4);
        return 4;
    }
    if (a && a->sa_family == AF_INET6) {
        memcpy(out, &((const struct sockaddr_in6 *)a)->sin6_addr, 16);
        return 16;
    }
    return 0;
}

/* Accept policy (the daemon's accepting thread, before the connection is counted): refuse an
 * address over its limit, and keep the last SRV_RESERVED_SLOTS slots for addresses that have no
 * request still arriving. A slow sender thus holds at most max_conns - reserved slots however
 * many addresses it has, and every one of them only until request_timeout_s. */
static enum MHD_Result accept_ok(void *cls, const struct sockaddr *a, socklen_t alen) {
    (void)alen;
    srv *s = cls;
    unsigned char key[16];
    int kl = addr_key(a, key);
    int per_ip = s->p.max_conns_per_ip > 0 ? s->p.max_conns_per_ip : SRV_DEFAULT_MAX_CONNS_PER_IP;
    int max = s->p.max_conns > 0 ? s->p.max_conns : SRV_DEFAULT_MAX_CONNS;
    int reserved = max > SRV_RESERVED_SLOTS ? SRV_RESERVED_SLOTS : max - 1;
    int same = 0, arriving = 0;
    pthread_mutex_lock(&s->mu);
    for (sconn *c = s->conns; c; c = c->next)
        if (c->alen == kl && !memcmp(c->addr, key, (size_t)kl)) same++, arriving |= c->receiving;
    int ok = same < per_ip && !(s->n_conns >= max - reserved && arriving);
    if (!ok) s->n_refused++;
    pthread_mutex_unlock(&s->mu);
    return ok ? MHD_YES : MHD_NO;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
    srv *s = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        sconn *k = calloc(1, sizeof *k);
        if (!k) return;
        const union MHD_ConnectionInfo *fi =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        const union MHD_ConnectionInfo *ai =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        k->fd = fi ? dup(fi->connect_fd) : -1;
        k->alen = addr_key(ai ? ai->client_addr : NULL, k->addr);
        k->receiving = 1;
        k->since = pt_now();
        pthread_mutex_lock(&s->mu);
        k->next = s->conns;
        if (s->conns) s->conns->prev = k;
        s->conns = k;
        s->n_conns++;
        pthread_mutex_unlock(&s->mu);
        *socket_context = k;
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        sconn *k = *socket_context;
        if (!k) return;
        pthread_mutex_lock(&s->mu);
        if (k->prev)
            k->prev->next = k->next;
        else
            s->conns = k->next;
        if (k->next) k->next->prev = k->prev;
        s->n_conns--;
        pthread_mutex_unlock(&s->mu);
        if (k->fd >= 0) close(k->fd);
        free(k);
        *socket_context = NULL;
    }
}

/* The connection's request has arrived (receiving 0: it is being answered) or its next one may
 * begin (1: the deadline starts now). */
static void conn_receiving(srv *s, struct MHD_Connection *c, int receiving) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    sconn *k = ci ? ci->socket_context : NULL;
    if (!k) return;
    pthread_mutex_lock(&s->mu);
    k->receiving = receiving;
    k->since = pt_now();
    pthread_mutex_unlock(&s->mu);
}

/* Every 200 ms: shut down connections still receiving past the deadline. shutdown() on the dup
 * wakes the connection's thread (its read sees the end), which closes it as usual. */
static void *reaper_main(void *arg) {
    srv *s = arg;
    double limit =
        s->p.request_timeout_s > 0 ? s->p.request_timeout_s : SRV_DEFAULT_REQUEST_TIMEOUT_S;
    pthread_mutex_lock(&s->mu);
    while (!s->stopping) {
        double now = pt_now();
        for (sconn *k = s->conns; k; k = k->next)
            if (k->receiving && !k->reaped && now - k->since > limit && k->fd >= 0) {
                shutdown(k->fd, SHUT_RDWR);
                k->reaped = 1;
                s->n_timed_out++;
            }
        struct timespec ts = time_in(200);
        pthread_cond_timedwait(&s->work_cv, &s->mu, &ts);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* ===== What the context can hold ===== */

/* The request body limit: --max-body, and once the model is loaded no more than a body whose
 * prompt the context could ever hold. The context holds n_ctx tokens of at most max_piece bytes
 * each; a JSON string spends at most 6 bytes ("\u0000") on a byte of text; 1 MiB more covers
 * the request's structure (roles, keys, tool schemas). A body past it needs no reading, parsing
 * or tokenizing to refuse. */
static size_t body_limit(srv *s) {
    pthread_mutex_lock(&s->mu);
    size_t cap = s->ready && s->body_cap ? s->body_cap : 0;
    pthread_mutex_unlock(&s->mu);
    return cap && cap < s->p.max_body ? cap : s->p.max_body;
}

/* Bytes of text (not counting whitespace, which a chat template may trim) in the strings of a
 * message's "content" (a string, or parts with "text"). */
static size_t nonspace(const char *p, size_t len) {
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += p[i] != ' ' && p[i] != '\t' && p[i] != '\r' && p[i] != '\n';
    return n;
}

static size_t text_bytes(const json_t *v) {
    size_t n = 0;
    if (json_is_string(v)) {
        n = nonspace(json_string_value(v), json_string_length(v));
    } else if (json_is_array(v)) {
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x) n +=
            text_bytes(json_is_object(x) ? json_object_get(x, "text") : x);
    }
    return n;
}

/* A lower bound on the request's prompt in tokens, without tokenizing: every token covers at
 * most max_piece bytes of the rendered prompt, which holds at least the text of every message's
 * content (or the completion's prompt) minus whitespace. */
static long prompt_floor(const srv *s, const oai_req *rq) {
    size_t n = 0;
    if (rq->prompt) n += nonspace(rq->prompt, strlen(rq->prompt));
    if (json_is_array(rq->messages)) {
        size_t i;
        json_t *m;
        json_array_foreach(rq->messages, i, m) n += text_bytes(json_object_get(m, "content"));
    }
    return s->max_piece > 0 ? (long)(n / (size_t)s->max_piece) : 0;
}

/* ===== HTTP ===== */

/* Per-request state of a generation endpoint, kept between the access handler's calls while
 * the body arrives. */
typedef struct conn {
    int api;    /* OAI_* */
    int http11; /* the request line said HTTP/1.1 */
    int tenant; /* the API key's index (0 without keys) */
    pt_buf body;
} conn;

static sconn *conn_of(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

/* Queue a response and let go of it (libmicrohttpd keeps it until it is sent). */
static enum MHD_Result send_response(struct MHD_Connection *c, int status, struct MHD_Response *r) {
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return ret;
}

/* A reply to an allowed Origin names it (the browser lets the page read it). */
static void add_cors(struct MHD_Connection *c, struct MHD_Response *r) {
    const sconn *k = conn_of(c);
    const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    if (!k || !k->allow_origin || !origin) return;
    MHD_add_response_header(r, "Access-Control-Allow-Origin", origin);
    MHD_add_response_header(r, "Vary", "Origin");
    MHD_add_response_header(r, "Access-Control-Expose-Headers", "Retry-After, X-Petrel-Warning");
}

/* A JSON reply; hname/hval: one more header, or NULL. */
static enum MHD_Result reply_h(struct MHD_Connection *c, int status, const char *body,
                               const char *hname, const char *hval) {
    const char *b = body ? body : "{}";
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(b), (void *)b, MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", "application/json");
    if (hname && hval) MHD_add_response_header(r, hname, hval);
    add_cors(c, r);
    return send_response(c, status, r);
}

static enum MHD_Result reply(struct MHD_Connection *c, int status, const char *body) {
    return reply_h(c, status, body, NULL, NULL);
}

/* reply() of a malloc'd body, which it frees (NULL, out of memory: "{}"). */
static enum MHD_Result reply_free(struct MHD_Connection *c, int status, char *body) {
    enum MHD_Result r = reply(c, status, body);
    free(body);
    return r;
}

/* reply() of a JSON value, which it takes. */
static enum MHD_Result reply_json(struct MHD_Connection *c, int status, json_t *j) {
    char *b = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    return reply_free(c, status, b);
}

/* param: the request field the error names (error.param), or NULL. */
static enum MHD_Result reply_error_at(struct MHD_Connection *c, int status, const char *type,
                                      const char *code, const char *param, const char *msg) {
    return reply_free(c, status, oai_error_body(type, code, param, msg));
}

static enum MHD_Result reply_error(struct MHD_Connection *c, int status, const char *type,
                                   const char *code, const char *msg) {
    return reply_error_at(c, status, type, code, NULL, msg);
}

/* Stream reader: hand over what the worker produced, waiting for more. */
static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    job *j = cls;
    srv *s = j->srv;
    pthread_mutex_lock(&s->mu);
    /* not cut short by srv_stop: the worker ends every stream (with an error event when the
     * server stops) before srv_stop goes on to close connections */
    while (j->sse_sent == j->sse.n && !j->done) {
        struct timespec ts = time_in(1000);
        pthread_cond_timedwait(&j->cv, &s->mu, &ts);
    }
    ssize_t n;
    if (j->sse_sent < j->sse.n) {
        size_t k = j->sse.n - j->sse_sent < max ? j->sse.n - j->sse_sent : max;
        memcpy(buf, j->sse.v + j->sse_sent, k);
        j->sse_sent += k;
        n = (ssize_t)k;
    } else {
        n = j->done ? MHD_CONTENT_READER_END_OF_STREAM : MHD_CONTENT_READER_END_WITH_ERROR;
    }
    pthread_mutex_unlock(&s->mu);
    return n;
}

static void sse_free(void *cls) {
    job *j = cls;
    srv *s = j->srv;
    pthread_mutex_lock(&s->mu);
    if (!j->done) job_stop(j); /* the connection ended before the stream did */
    job_release(j);
    s->n_streams--;
    pthread_mutex_unlock(&s->mu);
}

/* ===== Who may call: headers, Host (DNS rebinding), Origin (browsers), the API key ===== */

static enum MHD_Result add_header_size(void *cls, enum MHD_ValueKind kind, const char *key,
                                       const char *value) {
    (void)kind;
    *(size_t *)cls += strlen(key) + (value ? strlen(value) : 0) + 4; /* "K: V\r\n" */
    return MHD_YES;
}

/* The Host header names this server: an IP literal (a rebinding attack needs a DNS name),
 * localhost, the bound host, this machine's name, or a --allow-host name. No Host at all
 * (HTTP/1.0) is not a browser. */
static int host_ok(const srv *s, const char *h) {
    if (!h || *h == '[') return 1; /* none, or an IPv6 literal */
    char name[256];
    size_t n = strcspn(h, ":");
    if (n == 0 || n >= sizeof name) return 0;
    for (size_t i = 0; i < n; i++)
        name[i] = (char)tolower((unsigned char)h[i]);
    name[n] = 0;
    struct in_addr a4;
    if (inet_pton(AF_INET, name, &a4) == 1) return 1;
    if (!strcmp(name, "localhost") || (n > 10 && !strcmp(name + n - 10, ".localhost"))) return 1;
    if (!strcasecmp(name, s->host) || (s->p.host && !strcasecmp(name, s->p.host))) return 1;
    char me[256];
    if (!gethostname(me, sizeof me)) {
        me[sizeof me - 1] = 0;
        size_t m = strlen(me);
        if (!strcasecmp(name, me) ||
            (n == m + 6 && !strncasecmp(name, me, m) && !strcmp(name + m, ".local")))
            return 1;
    }
    for (int i = 0; i < s->p.n_allow_hosts; i++)
        if (!strcasecmp(name, s->p.allow_hosts[i])) return 1;
    return 0;
}

/* A browser page at `origin` may call: the server's own origin, a page served from this
 * machine (http://localhost, 127.0.0.1, [::1], any port) or a --cors origin ("*": any). */
static int origin_ok(const srv *s, const char *origin, const char *host) {
    for (int i = 0; i < s->p.n_cors; i++)
        if (!strcmp(s->p.cors[i], "*") || !strcasecmp(s->p.cors[i], origin)) return 1;
    if (host && !strncasecmp(origin, "http://", 7) && !strcasecmp(origin + 7, host)) return 1;
    const char *local[] = {"http://localhost", "http://127.0.0.1", "http://[::1]"};
    for (int i = 0; i < 3; i++) {
        size_t n = strlen(local[i]);
        if (strncasecmp(origin, local[i], n)) continue;
        const char *p = origin + n;
        if (!*p) return 1;
        if (*p++ != ':' || !*p) continue;
        while (*p >= '0' && *p <= '9')
            p++;
        if (!*p) return 1;
    }
    return 0;
}

/* The checks every request passes before its endpoint is looked up: the size of its line and
 * headers (431: libmicrohttpd's memory pool bounds them roughly, this makes the configured
 * limit exact and the answer OpenAI-shaped), the Host it names and a browser's Origin (403).
 * 0, or the status with the error's code and message; an allowed Origin is noted on the
 * connection (add_cors names it in the reply). */
static int refused(srv *s, struct MHD_Connection *c, const char *url, const char *method,
                   const char **code, char *msg, size_t cap) {
    size_t hsize = strlen(method) + strlen(url) + 12;
    MHD_get_connection_values(c, MHD_HEADER_KIND, add_header_size, &hsize);
    if (hsize > s->p.max_header) {
        snprintf(msg, cap, "the request headers are %zu bytes; the limit is %zu", hsize,
                 s->p.max_header);
        *code = "headers_too_large";
        return 431;
    }
    sconn *k = conn_of(c);
    if (k) k->allow_origin = 0;
    const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host");
    if (!host_ok(s, host)) {
        snprintf(msg, cap,
                 "this server does not answer to the Host '%.100s' (protection against DNS "
                 "rebinding); reach it by its address or start it with --allow-host NAME",
                 host);
        *code = "host_not_allowed";
        return 403;
    }
    const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    if (!origin) return 0;
    if (!origin_ok(s, origin, host)) {
        snprintf(msg, cap,
                 "a page at '%.100s' may not call this server; start it with --cors ORIGIN to "
                 "allow one",
                 origin);
        *code = "origin_not_allowed";
        return 403;
    }
    if (k) k->allow_origin = 1;
    return 0;
}

/* A CORS preflight (OPTIONS) from an allowed origin: 204 naming what may follow. */
static enum MHD_Result preflight(struct MHD_Connection *c) {
    struct MHD_Response *r = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    const char *want =
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Access-Control-Request-Headers");
    /* echo the headers the page asks for (the SDKs add their own x-stainless-* ones), if they
     * are plain header names */
    int plain = want && strlen(want) < 2048;
    for (const char *p = want; plain && *p; p++)
        plain = isalnum((unsigned char)*p) || strchr("-_, ", *p);
    MHD_add_response_header(r, "Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS");
    MHD_add_response_header(r, "Access-Control-Allow-Headers",
                            plain ? want : "Authorization, Content-Type, X-Api-Key");
    MHD_add_response_header(r, "Access-Control-Max-Age", "600");
    add_cors(c, r);
    return send_response(c, 204, r);
}

static int ct_equal(const char *a, const char *b) { /* constant time in the length of b */
    size_t na = strlen(a), nb = strlen(b);
    unsigned d = na != nb;
    for (size_t i = 0; i < nb; i++)
        d |= (unsigned)(unsigned char)(i < na ? a[i] : 0) ^ (unsigned char)b[i];
    return d == 0;
}

/* The tenant a request's key ("Authorization: Bearer KEY" or "X-Api-Key: KEY") names (its index;
 * 0 when the server has no keys), or -1 when the key is missing or wrong. Every key is compared, so
 * the time says nothing about which matched. */
static int authorized(srv *s, struct MHD_Connection *c) {
    if (!s->n_keys) return 0;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (h && !strncasecmp(h, "Bearer ", 7))
        h += 7;
    else if (!(h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Api-Key")))
        return -1;
    while (*h == ' ')
        h++;
    int t = -1;
    for (int i = 0; i < s->n_keys; i++)
        if (ct_equal(h, s->keys[i])) t = i;
    return t;
}

/* ===== Submitting a generation: check, queue, wait, answer ===== */

/* The grammar a request's output must follow: its JSON response format (the reasoning the chat
 * format allows, then the JSON), or its tool choice (required / a named function: tool calls in
 * the format's syntax with valid arguments, one when parallel_tool_calls is false; none: text
 * that cannot hold a call). Compiled here, before the request queues, so that a schema petrel
 * cannot follow is a 400 naming the field. 0, or -1 with err. */
static int request_grammar(srv *s, const oai_req *rq, pt_grammar **out, char *err, size_t n) {
    int thinking = rq->thinking >= 0 ? rq->thinking : s->m.thinking;
    if (thinking < 0) thinking = pt_chat_default_thinking(s->m.format);
    /* thinking off: no reasoning block before the JSON or the calls */
    int in_reasoning = thinking ? pt_chat_opens_reasoning(s->m.format, thinking) : -1;
    pt_buf g = {0};
    int rc;
    if (rq->json_schema) {
        rc = pt_chat_json_grammar(s->m.format, rq->json_schema, in_reasoning, &g, err, n);
    } else if (rq->tool_mode == OAI_TOOLS_REQUIRED) {
        char *tools = json_dumps(rq->tools, JSON_COMPACT);
        rc = tools ? pt_chat_tool_grammar(s->m.format, tools, rq->tool_name, !rq->one_tool_call,
                                          in_reasoning, &g, err, n)
                   : -1;
        free(tools);
    } else {
        rc = pt_chat_no_tool_grammar(s->m.format, in_reasoning, &g, err, n);
    }
    if (!rc && !(*out = pt_grammar_new(s->m.e, g.v ? g.v : "", g.n, err, n))) rc = -1;
    pt_buf_free(&g);
    return rc;
}

/* The X-Petrel-Warning header's text for parts replaced by a placeholder ("" when none). */
static void omitted_warning(const oai_req *rq, char *out, size_t cap) {
    out[0] = 0;
    if (rq->n_omitted > 0)
        snprintf(out, cap,
                 "%d image/audio/file part%s replaced by a placeholder: this model reads "
                 "text only",
                 rq->n_omitted, rq->n_omitted > 1 ? "s" : "");
}

/* A new job, held by the connection that made it (refs 1); NULL out of memory. */
static job *job_new(srv *s) {
    job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    j->srv = s;
    j->fd = -1;
    j->refs = 1;
    pthread_cond_init(&j->cv, NULL);
    return j;
}

/* The connection lets go of a job it did not queue. */
static void job_drop(srv *s, job *j) {
    pthread_mutex_lock(&s->mu);
    job_release(j);
    pthread_mutex_unlock(&s->mu);
}

/* previous_response_id: that turn's conversation goes between this request's instructions
 * (instructions are not carried over, as at OpenAI) and its input. 0, or -1 with err when the
 * tenant has no such response. */
static int splice_previous(srv *s, oai_req *rq, int tenant, char *err, size_t n) {
    json_t *prev = NULL;
    if (rstore_get(s->store, rq->prev_id, tenant, NULL, &prev)) {
        snprintf(err, n, "Previous response with id '%.128s' not found.", rq->prev_id);
        return -1;
    }
    json_t *msgs = json_array();
    for (size_t i = 0; i < json_array_size(rq->messages); i++) {
        if (i == (size_t)rq->n_instr) json_array_extend(msgs, prev);
        json_array_append(msgs, json_array_get(rq->messages, i));
    }
    if (json_array_size(rq->messages) <= (size_t)rq->n_instr) json_array_extend(msgs, prev);
    json_decref(prev);
    json_decref(rq->messages);
    rq->messages = msgs;
    return 0;
}

/* Read a request body into the job and check what can be checked before it queues: its fields
 * (oai_parse_request), logit_bias ids against the vocabulary, the output constraint's grammar,
 * the response it continues, and a prompt no context could hold. 0, or -1 with the refusal
 * and its message in err. */
static int job_read(srv *s, const conn *cn, job *j, refusal *f, char *err, size_t n) {
    oai_req *rq = &j->req;
    *f = (refusal){400, "invalid_request_error", "invalid_request", ""};
    if (oai_parse_request(cn->api, cn->body.v ? cn->body.v : "", cn->body.n, rq, err, n)) {
        memcpy(f->param, rq->err_param, sizeof f->param);
        return -1;
    }
    if (oai_bias_check(rq, s->n_vocab, err, n)) {
        snprintf(f->param, sizeof f->param, "logit_bias");
        return -1;
    }
    if ((rq->json_schema || rq->tool_mode != OAI_TOOLS_AUTO) &&
        request_grammar(s, rq, &j->grammar, err, n)) {
        snprintf(f->param, sizeof f->param, "%s",
                 rq->json_schema ? rq->format_param : "tool_choice");
        return -1;
    }
    if (rq->prev_id && splice_previous(s, rq, cn->tenant, err, n)) {
        *f = (refusal){404, "invalid_request_error", "previous_response_not_found",
                       "previous_response_id"};
        return -1;
    }
    long floor = prompt_floor(s, rq);
    if (floor > s->n_ctx) {
        snprintf(err, n,
                 "the prompt is at least %ld tokens (no token is longer than %d bytes) but the "
                 "context holds %d",
                 floor, s->max_piece, s->n_ctx);
        *f = (refusal){400, "invalid_request_error", "context_length_exceeded", ""};
        return -1;
    }
    return 0;
}

/* Queue the job for the worker (srv.mu held): 0, or the status it is refused with, the job
 * dropped: 503 (the server stops or has no model), 429 (the queue is full; retry: the
 * Retry-After seconds, when a place may be free: the requests ahead times their average). */
static int job_queue(srv *s, job *j, char *retry, size_t cap) {
    if (s->stopping || !s->ready) {
        job_release(j);
        return 503;
    }
    if (s->busy + s->n_waiting >= 1 + s->p.queue) {
        s->n_rejected++;
        job_release(j);
        double wait = s->job_seconds * (s->busy + s->n_waiting);
        snprintf(retry, cap, "%ld", wait < 1 ? 1L : wait > 3600 ? 3600L : (long)wait + 1);
        return 429;
    }
    s->n_requests++;
    j->refs++; /* the worker's */
    if (s->tail)
        s->tail->next = j;
    else
        s->head = j;
    s->tail = j;
    s->n_waiting++;
    j->queued = 1;
    pthread_cond_broadcast(&s->work_cv); /* the worker (the reaper waits on it too) */
    return 0;
}

/* A queued job whose client left gives its place up now, not when the worker reaches it
 * (srv.mu held). */
static void job_unqueue(srv *s, job *j) {
    job **pp = &s->head;
    while (*pp != j)
        pp = &(*pp)->next;
    *pp = j->next;
    if (s->tail == j) {
        s->tail = NULL;
        for (job *q = s->head; q; q = q->next)
            s->tail = q;
    }
    s->n_waiting--;
    s->n_cancelled++;
    j->queued = 0;
    job_fail(j, 499, "invalid_request_error", NULL, "cancelled: the client went away");
    j->done = 1;
    job_release(j); /* the worker's reference */
}

/* Wait until the job's stream may begin (its prompt was accepted) or the job ended, noticing a
 * client that leaves (srv.mu held). */
static void job_wait(srv *s, job *j) {
    while (!(j->started && j->req.stream) && !j->done && !s->stopping) {
        struct timespec ts = time_in(100);
        pthread_cond_timedwait(&j->cv, &s->mu, &ts);
        if (!job_stopped(j)) job_probe(j); /* no answer has begun inside this loop */
        if (!job_stopped(j) && client_gone(j->fd)) job_stop(j);
        if (job_stopped(j) && j->queued) job_unqueue(s, j);
    }
}

/* The whole reply of a job that ended (srv.mu held; released here, with the job). A client
 * that left gets the 400 it can no longer read rather than the log's 499. */
static enum MHD_Result reply_done(srv *s, struct MHD_Connection *c, job *j) {
    int status = j->status ? j->status : 503;
    char *body = j->body;
    j->body = NULL;
    char warn[128];
    omitted_warning(&j->req, warn, sizeof warn);
    job_release(j);
    pthread_mutex_unlock(&s->mu);
    enum MHD_Result r =
        body ? reply_h(c, status == 499 ? 400 : status, body, "X-Petrel-Warning",
                       warn[0] ? warn : NULL)
             : reply_error(c, 503, "server_error", NULL, "the server is shutting down");
    free(body);
    return r;
}

/* A job's stream: the status and headers now, the events as the worker produces them (sse_read);
 * the job's reference passes to the response. */
static enum MHD_Result reply_stream(srv *s, struct MHD_Connection *c, job *j) {
    struct MHD_Response *r =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, sse_read, j, sse_free);
    pthread_mutex_lock(&s->mu);
    if (!r) {
        job_stop(j);
        job_release(j);
        pthread_mutex_unlock(&s->mu);
        return MHD_NO;
    }
    s->n_streams++; /* until sse_free */
    pthread_mutex_unlock(&s->mu);
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    char warn[128];
    omitted_warning(&j->req, warn, sizeof warn);
    if (warn[0]) MHD_add_response_header(r, "X-Petrel-Warning", warn);
    add_cors(c, r);
    return send_response(c, 200, r);
}

/* A generation endpoint's complete request body: check, queue, wait, answer. */
static enum MHD_Result submit(srv *s, struct MHD_Connection *c, conn *cn) {
    conn_receiving(s, c, 0); /* answered from here on, however long it generates */
    job *j = job_new(s);
    if (!j) return reply_error(c, 500, "server_error", NULL, "out of memory");
    char err[512];
    refusal f;
    if (job_read(s, cn, j, &f, err, sizeof err)) {
        job_drop(s, j);
        return reply_error_at(c, f.status, f.type, f.code, f.param, err);
    }
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (ci) j->fd = dup(ci->connect_fd);
    j->http11 = cn->http11;
    j->tenant = cn->tenant;
    char retry[32];
    pthread_mutex_lock(&s->mu);
    int st = job_queue(s, j, retry, sizeof retry);
    if (st) {
        pthread_mutex_unlock(&s->mu);
        if (st == 503)
            return reply_error(c, 503, "server_error", "loading", "the model is loading");
        char *b = oai_error_body("rate_limit_error", "rate_limit_exceeded", NULL,
                                 "the server is busy: too many requests are waiting; retry after "
                                 "the Retry-After header's seconds");
        enum MHD_Result r = reply_h(c, 429, b, "Retry-After", retry);
        free(b);
        return r;
    }
    job_wait(s, j);
    if (!(j->req.stream && j->started)) return reply_done(s, c, j);
    pthread_mutex_unlock(&s->mu);
    return reply_stream(s, c, j);
}

/* ===== Endpoints ===== */

/* What an endpoint's handler knows on a request's first call: its headers have arrived, its body
 * (if any) has not. */
typedef struct request {
    const char *url, *method, *version;
    const char *rest; /* a prefix route: what follows its path (the id of /v1/responses/{id}) */
    int tenant;       /* the API key's index (0 without keys, and on the open routes) */
    int api;          /* a generation endpoint: OAI_* */
    void **con_cls;   /* the request's state between calls (struct conn) */
} request;

static enum MHD_Result ep_health(srv *s, struct MHD_Connection *c, const request *rq) {
    (void)rq;
    pthread_mutex_lock(&s->mu);
    json_t *j = json_pack(
        "{s:s, s:s, s:i, s:b, s:i, s:I, s:I, s:I, s:I, s:{s:i, s:I, s:I}, s:{s:i, s:i, s:i, "
        "s:s, s:I, s:I, s:I, s:f, s:f}}",
        "status", s->ready ? "ok" : "loading", "model", s->model_name, "n_ctx", s->n_ctx, "busy",
        s->busy, "waiting", s->n_waiting, "requests", (json_int_t)s->n_requests, "cancelled",
        (json_int_t)s->n_cancelled, "rejected", (json_int_t)s->n_rejected, "tokens_generated",
        (json_int_t)s->tokens_generated, "connections", "open", s->n_conns, "timed_out",
        (json_int_t)s->n_timed_out, "refused", (json_int_t)s->n_refused, "last", "prompt_tokens",
        s->last_prompt_tokens, "cached_tokens", s->last_cached_tokens, "completion_tokens",
        s->last_completion_tokens, "finish_reason", s->last_finish, "expert_requests",
        (json_int_t)s->last_expert_requests, "expert_hits", (json_int_t)s->last_expert_hits,
        "bytes_read", (json_int_t)s->last_bytes_read, "prefill_s", s->last_prefill_s,
        "decode_tok_s", s->last_decode_tok_s);
    int ready = s->ready;
    pthread_mutex_unlock(&s->mu);
    return reply_json(c, ready ? 200 : 503, j);
}

/* The one model, with a "meta" block as llama.cpp's server gives (its context among it). */
static enum MHD_Result ep_models(srv *s, struct MHD_Connection *c, const request *rq) {
    (void)rq;
    pthread_mutex_lock(&s->mu);
    json_t *meta =
        s->ready ? json_pack("{s:i, s:i, s:i, s:i, s:s, s:s}", "n_ctx", s->n_ctx, "n_ctx_train",
                             pt_engine_n_ctx_train(s->m.e), "n_vocab", s->n_vocab, "n_embd",
                             pt_engine_n_embd(s->m.e), "arch", pt_engine_arch(s->m.e),
                             "chat_format", s->m.format ? s->m.format : "none")
                 : json_null();
    pthread_mutex_unlock(&s->mu);
    return reply_json(c, 200,
                      json_pack("{s:s, s:[{s:s, s:s, s:I, s:s, s:o}]}", "object", "list", "data",
                                "id", s->model_name, "object", "model", "created",
                                (json_int_t)time(NULL), "owned_by", "petrel", "meta", meta));
}

/* GET or DELETE /v1/responses/{id}: a kept response of this tenant, or OpenAI's 404. */
static enum MHD_Result ep_stored_response(srv *s, struct MHD_Connection *c, const request *rq) {
    const char *id = rq->rest;
    int del = !strcmp(rq->method, "DELETE");
    char *body = NULL;
    int found = del ? !rstore_delete(s->store, id, rq->tenant)
                    : !rstore_get(s->store, id, rq->tenant, &body, NULL);
    if (!found) {
        char msg[256];
        snprintf(msg, sizeof msg, "No response found with id '%.128s'.", id);
        return reply_error(c, 404, "invalid_request_error", "not_found", msg);
    }
    if (del)
        return reply_json(
            c, 200, json_pack("{s:s, s:s, s:b}", "id", id, "object", "response", "deleted", 1));
    return reply_free(c, 200, body);
}

/* The web chat's files (webui.h): / is index.html. NULL: not a file. */
static const webui_asset *web_asset(const char *url) {
    if (!strcmp(url, "/")) url = "/index.html";
    for (const webui_asset *a = webui_assets; a->path; a++)
        if (!strcmp(a->path, url)) return a;
    return NULL;
}

/* A file of the web chat, served without the API key (the page asks for it); a
 * Content-Security-Policy allows no inline script and no other origin, so even model text that
 * slipped past the page's escaping could not run. */
static enum MHD_Result ep_web(srv *s, struct MHD_Connection *c, const request *rq) {
    (void)s;
    const webui_asset *a = web_asset(rq->url);
    struct MHD_Response *r =
        MHD_create_response_from_buffer(a->len, (void *)a->data, MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", a->type);
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
    MHD_add_response_header(r, "Content-Security-Policy",
                            "default-src 'none'; script-src 'self'; style-src 'self'; "
                            "connect-src 'self'; img-src 'self' data:; base-uri 'none'; "
                            "form-action 'self'; frame-ancestors 'none'");
    return send_response(c, 200, r);
}

/* Chat completions, completions, responses (rq->api): a body past the limit is refused before
 * it is read, and none is read while the model loads; the body then arrives into the request's
 * conn, and submit() takes it from there. */
static enum MHD_Result ep_generate(srv *s, struct MHD_Connection *c, const request *rq) {
    const char *cl =
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    size_t limit = body_limit(s);
    if (cl && strtoull(cl, NULL, 10) > limit) {
        char msg[256];
        if (limit < s->p.max_body)
            snprintf(msg, sizeof msg,
                     "the request body is %.30s bytes; the limit is %zu (what a context of %d "
                     "tokens could ever hold)",
                     cl, limit, s->n_ctx);
        else
            snprintf(msg, sizeof msg, "the request body is %.30s bytes; the limit is %zu", cl,
                     limit);
        return reply_error(c, 413, "invalid_request_error", "request_too_large", msg);
    }
    pthread_mutex_lock(&s->mu);
    int ready = s->ready;
    pthread_mutex_unlock(&s->mu);
    if (!ready) return reply_error(c, 503, "server_error", "loading", "the model is loading");
    conn *cn = calloc(1, sizeof *cn);
    if (!cn) return MHD_NO;
    cn->api = rq->api;
    cn->tenant = rq->tenant;
    cn->http11 = rq->version && !strcmp(rq->version, "HTTP/1.1");
    *rq->con_cls = cn;
    return MHD_YES;
}

/* ===== The endpoint table ===== */

enum { M_GET = 1, M_POST = 2, M_DELETE = 4 }; /* HEAD is answered as GET */

/* One endpoint: where it is, which methods it answers, and its handler. A request is matched
 * on its path without a leading "/v1" (every API endpoint answers with and without it); the
 * web chat's files are matched first, as they are and on GET only (another method on their
 * paths is an unknown endpoint). */
typedef struct route {
    const char *path; /* ending in '/': a prefix, what follows is an id (request.rest) */
    unsigned methods; /* M_*: another method is a 405 naming these */
    int open;         /* answered without the API key */
    int api;          /* the generation endpoints: OAI_* */
    enum MHD_Result (*fn)(srv *s, struct MHD_Connection *c, const request *rq);
} route;

/* the web chat's files: webui_assets' paths and /, matched by web_asset rather than by path */
static const route WEB_ROUTE = {NULL, M_GET, 1, 0, ep_web};

static const route ROUTES[] = {
    {"/health", M_GET, 1, 0, ep_health},
    {"/models", M_GET, 0, 0, ep_models},
    {"/chat/completions", M_POST, 0, OAI_CHAT, ep_generate},
    {"/completions", M_POST, 0, OAI_COMPLETIONS, ep_generate},
    {"/responses", M_POST, 0, OAI_RESPONSES, ep_generate},
    {"/responses/", M_GET | M_DELETE, 0, 0, ep_stored_response},
};

static unsigned method_bit(const char *method) {
    if (!strcmp(method, "GET") || !strcmp(method, "HEAD")) return M_GET;
    if (!strcmp(method, "POST")) return M_POST;
    if (!strcmp(method, "DELETE")) return M_DELETE;
    return 0;
}

/* The route a request names, NULL none; *rest: what follows a prefix route's path. */
static const route *route_of(const char *url, const char *method, const char **rest) {
    if (method_bit(method) == M_GET && web_asset(url)) return &WEB_ROUTE;
    const char *path = !strncmp(url, "/v1/", 4) ? url + 3 : url;
    for (size_t i = 0; i < sizeof ROUTES / sizeof ROUTES[0]; i++) {
        const route *r = &ROUTES[i];
        size_t n = strlen(r->path);
        if (r->path[n - 1] == '/' ? !strncmp(path, r->path, n) : !strcmp(path, r->path)) {
            *rest = path + n;
            return r;
        }
    }
    return NULL;
}

/* The 405's message: "use GET", "use GET or DELETE". */
static void use_methods(unsigned methods, char *out, size_t cap) {
    static const char *const names[] = {"GET", "POST", "DELETE"}; /* by bit */
    size_t n = (size_t)snprintf(out, cap, "use");
    int first = 1;
    for (unsigned i = 0; i < 3; i++) {
        if (!(methods & (1u << i)) || n >= cap) continue;
        n += (size_t)snprintf(out + n, cap - n, "%s%s", first ? " " : " or ", names[i]);
        first = 0;
    }
}

/* A request's first call (its headers have arrived): the checks every request passes, a CORS
 * preflight, then its route: the API key unless the route is open (an unknown endpoint needs
 * one too, so that probing says nothing without it), 404, 405, the endpoint's handler. */
static enum MHD_Result first_call(srv *s, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, void **con_cls) {
    char msg[400];
    const char *code = NULL;
    const int st = refused(s, c, url, method, &code, msg, sizeof msg);
    if (st) return reply_error(c, st, "invalid_request_error", code, msg);
    if (!strcmp(method, "OPTIONS")) return preflight(c);
    request rq = {.url = url, .method = method, .version = version, .con_cls = con_cls};
    const route *rt = route_of(url, method, &rq.rest);
    if (!(rt && rt->open)) {
        rq.tenant = authorized(s, c);
        if (rq.tenant < 0)
            return reply_error(c, 401, "authentication_error", "invalid_api_key",
                               "missing or wrong API key (send 'Authorization: Bearer KEY' or "
                               "'X-Api-Key: KEY')");
    }
    if (!rt) {
        snprintf(msg, sizeof msg, "unknown endpoint %.100s %.100s", method, url);
        return reply_error(c, 404, "invalid_request_error", "not_found", msg);
    }
    if (!(method_bit(method) & rt->methods)) {
        use_methods(rt->methods, msg, sizeof msg);
        return reply_error(c, 405, "invalid_request_error", "method_not_allowed", msg);
    }
    rq.api = rt->api;
    return rt->fn(s, c, &rq);
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **con_cls) {
    srv *s = cls;
    conn *cn = *con_cls;
    if (!cn) return first_call(s, c, url, method, version, con_cls);
    if (*upload_size) {
        if (cn->body.n + *upload_size > body_limit(s))
            return MHD_NO; /* a chunked body past the limit: close */
        if (pt_buf_append(&cn->body, upload, *upload_size)) return MHD_NO;
        *upload_size = 0;
        return MHD_YES;
    }
    return submit(s, c, cn);
}

/* The access handler: handle(), and the connection's receiving state kept true (it stays
 * receiving while the handler asks for more of the body). */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls) {
    int more = *con_cls ? *upload_size != 0 : 1; /* a first call or a body chunk: more may come */
    enum MHD_Result r = handle(cls, c, url, method, version, upload, upload_size, con_cls);
    if (!(more && *con_cls)) conn_receiving(cls, c, 0);
    return r;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    (void)toe;
    conn_receiving(cls, c, 1); /* a kept-alive connection's next request: its deadline starts */
    conn *cn = *con_cls;
    if (!cn) return;
    pt_buf_free(&cn->body);
    free(cn);
    *con_cls = NULL;
}

/* ===== Start and stop ===== */

srv *srv_start(const srv_params *p, char *err, size_t err_len) {
    srv *s = calloc(1, sizeof *s);
    if (!s) return snprintf(err, err_len, "out of memory"), NULL;
    s->p = *p;
    /* "localhost" is 127.0.0.1, which every client tries (getaddrinfo may prefer ::1) */
    s->host = strdup(p->host && strcmp(p->host, "localhost") ? p->host : "127.0.0.1");
    s->model_name = strdup(p->model_name ? p->model_name : "petrel");
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->work_cv, NULL);
    snprintf(s->last_finish, sizeof s->last_finish, "none");
    s->cache_tenant = -1;
    s->store = rstore_new(512, 256u << 20);
    if (!s->store) {
        snprintf(err, err_len, "out of memory");
        srv_stop(s);
        return NULL;
    }
    if (p->n_api_keys > 0) {
        s->keys = calloc((size_t)p->n_api_keys, sizeof *s->keys);
        if (s->keys) s->n_keys = p->n_api_keys; /* freed by srv_stop, even in part */
        for (int i = 0; s->keys && i < p->n_api_keys; i++)
            if (!(s->keys[i] = strdup(p->api_keys[i] ? p->api_keys[i] : ""))) break;
        if (!s->keys || !s->keys[p->n_api_keys - 1]) {
            snprintf(err, err_len, "out of memory");
            srv_stop(s);
            return NULL;
        }
    }
    struct addrinfo hints = {
        .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    char port[16];
    snprintf(port, sizeof port, "%d", p->port);
    int gai = getaddrinfo(s->host, port, &hints, &ai);
    if (gai) {
        snprintf(err, err_len, "cannot resolve host '%s': %s", s->host, gai_strerror(gai));
        srv_stop(s);
        return NULL;
    }
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    s->d = MHD_start_daemon(flags, (uint16_t)p->port, accept_ok, s, on_request, s,
                            MHD_OPTION_SOCK_ADDR, ai->ai_addr, MHD_OPTION_CONNECTION_LIMIT,
                            (unsigned)(p->max_conns > 0 ? p->max_conns : SRV_DEFAULT_MAX_CONNS),
                            MHD_OPTION_CONNECTION_TIMEOUT,
                            (unsigned)(p->timeout_s > 0 ? p->timeout_s : SRV_DEFAULT_TIMEOUT_S),
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(p->max_header + 16384),
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                            MHD_OPTION_NOTIFY_CONNECTION, on_connection, s, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!s->d) {
        snprintf(err, err_len, "cannot listen on %s:%d (address in use or not available)", s->host,
                 p->port);
        srv_stop(s);
        return NULL;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : p->port;
    if (pthread_create(&s->reaper, NULL, reaper_main, s)) {
        snprintf(err, err_len, "cannot start the connection reaper thread");
        srv_stop(s);
        return NULL;
    }
    s->reaper_started = 1;
    return s;
}

int srv_port(const srv *s) {
    return s->port;
}

int srv_set_model(srv *s, const srv_model *m, char *err, size_t err_len) {
    s->m = *m;
    if (pthread_create(&s->worker, NULL, worker_main, s))
        return snprintf(err, err_len, "cannot start the worker thread"), -1;
    s->worker_started = 1;
    int max_piece = 1;
    for (int32_t id = 0; id < pt_vocab_size(m->e); id++) {
        size_t len = 0;
        pt_token_piece(m->e, id, PT_DETOKENIZE_RENDER_SPECIAL, &len);
        if ((int)len > max_piece) max_piece = (int)len;
    }
    unsigned char *markup = malloc((size_t)pt_vocab_size(m->e) + 1);
    if (markup && pt_chat_markup_tokens(m->e, m->format, markup, pt_vocab_size(m->e)) < 0) {
        free(markup); /* no chat format: completions only */
        markup = NULL;
    }
    pthread_mutex_lock(&s->mu);
    s->markup = markup;
    s->n_ctx = pt_session_n_ctx(m->s);
    s->max_piece = max_piece;
    s->n_vocab = pt_vocab_size(m->e);
    s->body_cap = (size_t)s->n_ctx * (size_t)max_piece * 6 + (1u << 20);
    s->ready = 1;
    pthread_mutex_unlock(&s->mu);
    return 0;
}

void srv_stop(srv *s) {
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    __atomic_store_n(&s->stopping, 1, __ATOMIC_RELAXED);
    for (job *j = s->head; j; j = j->next)
        job_stop(j);
    pthread_cond_broadcast(&s->work_cv);
    pthread_mutex_unlock(&s->mu);
    if (s->worker_started) pthread_join(s->worker, NULL);
    if (s->reaper_started) pthread_join(s->reaper, NULL);
    /* every stream has its end (or error event) now: give the connections up to 2 s to send it
     * before they are closed */
    for (double t0 = pt_now(); pt_now() - t0 < 2;) {
        pthread_mutex_lock(&s->mu);
        const int n = s->n_streams;
        pthread_mutex_unlock(&s->mu);
        if (!n) break;
        usleep(10 * 1000);
    }
    if (s->d) MHD_stop_daemon(s->d);
    pthread_cond_destroy(&s->work_cv);
    pthread_mutex_destroy(&s->mu);
    free(s->host);
    for (int i = 0; s->keys && i < s->n_keys; i++)
        free(s->keys[i]);
    free(s->keys);
    free(s->model_name);
    rstore_free(s->store);
    free(s->markup);
    free(s);
}
