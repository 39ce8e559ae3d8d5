/* server.c — HTTP endpoints, the job queue and the generation worker of
 * `petrel serve`. See server.h for the threading and the limits. */
#include "server/server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "front/front.h"
#include "server/oai.h"

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
    int status;      /* when done before starting or not streaming: HTTP status */
    char *body;      /* ... and its JSON body */
    pt_buf sse;      /* stream bytes produced */
    size_t sse_sent; /* ... and handed to libmicrohttpd */
} job;

/* The cross-thread cancel flag of a job: an atomic store and load (a plain volatile access
 * from two threads is a data race). */
static void job_stop(job *j) {
    __atomic_store_n(&j->stop, 1, __ATOMIC_RELAXED);
}
static int job_stopped(job *j) {
    return __atomic_load_n(&j->stop, __ATOMIC_RELAXED);
}

struct srv {
    srv_params p;
    char *host, *api_key, *model_name;
    struct MHD_Daemon *d;
    int port;
    pthread_mutex_t mu;
    pthread_cond_t work_cv;
    job *head, *tail; /* waiting jobs */
    int n_waiting, busy, ready;
    int stopping; /* written under mu (atomically: should_stop reads it without mu) */
    srv_model m;
    pthread_t worker;
    int worker_started;
    unsigned long long seq;
    /* counters for /health (srv.mu) */
    unsigned long long n_requests, n_cancelled, n_rejected, tokens_generated;
    int last_completion_tokens, last_prompt_tokens, last_cached_tokens;
    char last_finish[16];
};

static void job_release(job *j) { /* srv.mu held */
    if (--j->refs > 0) return;
    if (j->fd >= 0) close(j->fd);
    oai_req_free(&j->req);
    free(j->body);
    pt_buf_free(&j->sse);
    pthread_cond_destroy(&j->cv);
    free(j);
}

/* 1 when the client closed its end (or the socket failed). A pipelined next
 * request (data waiting) does not count. */
static int client_gone(int fd) {
    if (fd < 0) return 0;
    char c;
    ssize_t r = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (r == 0) return 1;
    return r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

static void job_fail(job *j, int status, const char *type, const char *code,
                     const char *msg) { /* srv.mu held */
    free(j->body);
    j->status = status;
    j->body = oai_error_body(type, code, msg);
}

/* ===== The worker ===== */

typedef struct run_ctx {
    srv *s;
    job *j;
    oai_split split;
    oai_stream st;
    int streaming;
    int n_reasoning; /* tokens sampled while inside the reasoning block */
    pt_buf fix;      /* scratch for UTF-8 repair */
    int failed;
    const char *id; /* the reply's id */
    long created;
} run_ctx;

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

static int on_text(void *ud, const char *p, size_t n) {
    run_ctx *rc = ud;
    return oai_split_push(&rc->split, p, n, 0, on_delta, rc);
}

static int should_stop(void *ud) {
    run_ctx *rc = ud;
    if (rc->split.mode == OAI_SPLIT_REASONING && !rc->split.raw) rc->n_reasoning++;
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
    fprintf(s->p.log,
            "petrel: %d POST %s%s: prompt %d tokens (%d cached), prefill %.3f s, %d generated, "
            "%.2f tok/s, %s\n",
            status, path, j->req.stream ? " (stream)" : "", n_prompt, cached > 0 ? cached : 0,
            t_prefilled > t_start ? t_prefilled - t_start : 0.0, res ? res->n_tokens : 0,
            dec > 0 ? (res->n_tokens - 1) / dec : 0.0, why);
    fflush(s->p.log);
}

/* The prompt is in the cache: set up the splitter and, for a stream, send its
 * opening events (the connection thread starts the response on j->started). */
static int on_prefilled(void *ud, int in_reasoning) {
    run_ctx *rc = ud;
    srv *s = rc->s;
    job *j = rc->j;
    oai_split_init(&rc->split, s->m.format, in_reasoning, j->req.tools != NULL,
                   j->req.api == OAI_COMPLETIONS);
    pthread_mutex_lock(&s->mu);
    j->started = 1;
    if (j->req.stream) {
        rc->streaming = 1;
        if (oai_stream_begin(&rc->st, j->req.api, rc->id, s->model_name, rc->created,
                             j->req.include_usage, &j->sse))
            rc->failed = 1;
    }
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&s->mu);
    return 0;
}

/* Generate for one job (worker thread, srv.mu not held): one turn of
 * front/front.h (render, tokenize, prefill, generate, parse) with the
 * request's sampling, then the reply or the stream's end. */
static void run_job(srv *s, job *j) {
    const srv_model *m = &s->m;
    oai_req *rq = &j->req;
    char err[512] = "";
    fe_turn_result tr = {0};
    run_ctx rc = {.s = s, .j = j};
    char id[64];
    const char *prefix = rq->api == OAI_CHAT          ? "chatcmpl-"
                         : rq->api == OAI_COMPLETIONS ? "cmpl-"
                                                      : "resp_";
    pthread_mutex_lock(&s->mu);
    make_id(s, prefix, id, sizeof id);
    pthread_mutex_unlock(&s->mu);
    long created = (long)time(NULL);
    rc.id = id, rc.created = created;
    int thinking = rq->thinking >= 0 ? rq->thinking : m->thinking;
    int status = 400;
    const char *etype = "invalid_request_error";
    double t_start = pt_now();
    int chat = rq->api != OAI_COMPLETIONS;

    if (chat && !pt_chat_format_known(m->format)) {
        snprintf(err, sizeof err, "this model has no known chat format; use /v1/completions");
        goto fail;
    }
    /* sampling: the server's defaults, then the request's fields */
    pt_sampling sp = m->sp;
    pt_sampling_override(&sp, &rq->sp, rq->sp_set);
    if (!(rq->sp_set & PT_SAMPLING_SEED) && !m->fixed_seed)
        sp.seed = (uint64_t)(pt_now() * 1e9) ^ (s->seq << 40);
    if (pt_gen_set_sampling(m->g, &sp, err, sizeof err)) goto fail;
    /* the turn (the longest common prefix with the cache is kept) */
    if (client_gone(j->fd)) job_stop(j);
    const char *stops[OAI_MAX_STOPS];
    for (int i = 0; i < rq->n_stops; i++)
        stops[i] = rq->stops[i];
    int tools = rq->tools != NULL;
    fe_turn t = {.format = m->format,
                 .messages = chat ? rq->messages : NULL,
                 .tools = rq->tools,
                 .thinking = thinking,
                 .text = rq->prompt,
                 .text_len = rq->prompt ? strlen(rq->prompt) : 0,
                 .parse = chat,
                 .gen = {.max_tokens = rq->max_tokens >= 0 ? rq->max_tokens : m->max_tokens,
                         .stops = rq->n_stops ? stops : m->stops,
                         .n_stops = rq->n_stops ? rq->n_stops : m->n_stops,
                         .decode_flags = chat ? PT_DETOKENIZE_RENDER_SPECIAL : 0,
                         .should_stop = should_stop,
                         .should_stop_ud = &rc},
                 .emit = on_text,
                 .emit_ud = &rc,
                 .on_prefilled = on_prefilled,
                 .ud = &rc,
                 .stop = &j->stop};
    int trc = fe_turn_run(m->g, &t, &tr, err, sizeof err);
    int cached = tr.n_reused;
    if (trc == FE_TURN_BAD_PROMPT) goto fail;
    if (trc == FE_TURN_TOO_LONG) {
        snprintf(err, sizeof err, "the prompt is %d tokens but the context holds %d", tr.n_prompt,
                 pt_session_n_ctx(m->s));
        goto fail;
    }
    if (trc == FE_TURN_CANCELLED) {
        snprintf(err, sizeof err, "cancelled: the client went away");
        status = 499;
        goto fail;
    }
    if (trc == FE_TURN_PREFILL_FAILED) {
        status = 500, etype = "server_error";
        goto fail;
    }
    int grc = trc; /* 0, or the generation / the answer failed: an error reply */
    if (trc != FE_TURN_GEN_FAILED) oai_split_push(&rc.split, "", 0, 1, on_delta, &rc);
    pt_chat_parsed *parsed = tr.have_parsed ? &tr.parsed : NULL;
    if (parsed && !tools) {
        /* no tools offered: tool-call markup is just text, as it was streamed */
        pt_buf c = {0};
        const char *cv = rc.split.content.v ? rc.split.content.v : "";
        size_t cn = rc.split.content.n;
        while (cn && strchr(" \t\r\n", cv[cn - 1]))
            cn--;
        if (pt_utf8_repair(cv, cn, &c) >= 0) {
            free(parsed->content);
            parsed->content = c.v;
        }
        for (int i = 0; i < parsed->n_calls; i++)
            free(parsed->calls[i].name), free(parsed->calls[i].arguments);
        parsed->n_calls = 0;
    }
    const pt_gen_result *res = &tr.gen;
    oai_result r = {.id = id,
                    .model = s->model_name,
                    .created = created,
                    .parsed = parsed,
                    .text = tr.text.v ? tr.text.v : "",
                    .reason = res->reason,
                    .prompt_tokens = tr.n_prompt,
                    .cached_tokens = cached,
                    .completion_tokens = res->n_tokens,
                    .reasoning_tokens =
                        rc.n_reasoning < res->n_tokens ? rc.n_reasoning : res->n_tokens};
    /* a stream shows the content the final parse has beyond what was streamed (a malformed tool
     * call) */
    if (grc == 0 && rc.streaming && parsed && tools) {
        pt_buf sent = {0};
        if (pt_utf8_repair(rc.split.content.v ? rc.split.content.v : "", rc.split.content.n,
                           &sent) >= 0) {
            size_t k = sent.n;
            while (k && strchr(" \t\r\n", sent.v[k - 1]))
                k--;
            if (strlen(parsed->content) > k && !strncmp(parsed->content, sent.v, k)) {
                pthread_mutex_lock(&s->mu);
                oai_stream_delta(&rc.st, OAI_CONTENT, parsed->content + k,
                                 strlen(parsed->content) - k, &j->sse);
                pthread_mutex_unlock(&s->mu);
            }
        }
        pt_buf_free(&sent);
    }
    pthread_mutex_lock(&s->mu);
    s->tokens_generated += (unsigned long long)res->n_tokens;
    s->last_completion_tokens = res->n_tokens, s->last_prompt_tokens = tr.n_prompt,
    s->last_cached_tokens = cached;
    snprintf(s->last_finish, sizeof s->last_finish, "%s",
             job_stopped(j) ? "cancelled"
             : grc          ? "error"
                            : oai_finish_reason(res->reason, parsed ? parsed->n_calls : 0));
    if (job_stopped(j)) s->n_cancelled++;
    if (grc) {
        if (rc.streaming)
            oai_stream_error(&rc.st, err, &j->sse);
        else
            job_fail(j, 500, "server_error", NULL, err);
    } else if (rc.streaming) {
        oai_stream_end(&rc.st, &r, &j->sse);
    } else {
        j->status = 200;
        j->body = oai_reply(rq->api, &r);
        if (!j->body) job_fail(j, 500, "server_error", NULL, "out of memory");
    }
    char finish[sizeof s->last_finish];
    snprintf(finish, sizeof finish, "%s", s->last_finish);
    pthread_mutex_unlock(&s->mu);
    log_job(s, j, grc ? (rc.streaming ? 200 : 500) : 200, tr.n_prompt, cached, res, t_start,
            tr.t_prefilled, finish);
    goto out;
fail:
    pthread_mutex_lock(&s->mu);
    if (status == 499)
        s->n_cancelled++, snprintf(s->last_finish, sizeof s->last_finish, "cancelled");
    job_fail(j, status, etype, status == 400 ? "invalid_request" : NULL, err);
    pthread_mutex_unlock(&s->mu);
    log_job(s, j, status, tr.n_prompt, 0, NULL, t_start, tr.t_prefilled, err);
out:
    oai_split_free(&rc.split);
    oai_stream_free(&rc.st);
    pt_buf_free(&rc.fix);
    fe_turn_result_free(&tr);
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
        if (!job_stopped(j)) {
            s->busy = 1;
            pthread_mutex_unlock(&s->mu);
            run_job(s, j);
            pthread_mutex_lock(&s->mu);
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

/* ===== HTTP ===== */

/* Per-request state kept between the access handler's calls. */
typedef struct conn {
    int api; /* OAI_* */
    pt_buf body;
    int too_big;
} conn;

static enum MHD_Result reply(struct MHD_Connection *c, int status, const char *body) {
    const char *b = body ? body : "{}";
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(b), (void *)b, MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", "application/json");
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result reply_error(struct MHD_Connection *c, int status, const char *type,
                                   const char *code, const char *msg) {
    char *b = oai_error_body(type, code, msg);
    enum MHD_Result r = reply(c, status, b);
    free(b);
    return r;
}

/* Stream reader: hand over what the worker produced, waiting for more. */
static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    job *j = cls;
    srv *s = j->srv;
    pthread_mutex_lock(&s->mu);
    while (j->sse_sent == j->sse.n && !j->done && !s->stopping) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
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
    pthread_mutex_unlock(&s->mu);
}

static int ct_equal(const char *a, const char *b) { /* constant time in the length of b */
    size_t na = strlen(a), nb = strlen(b);
    unsigned d = na != nb;
    for (size_t i = 0; i < nb; i++)
        d |= (unsigned)(unsigned char)(i < na ? a[i] : 0) ^ (unsigned char)b[i];
    return d == 0;
}

static int authorized(srv *s, struct MHD_Connection *c) {
    if (!s->api_key) return 1;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!h || strncasecmp(h, "Bearer ", 7)) return 0;
    h += 7;
    while (*h == ' ')
        h++;
    return ct_equal(h, s->api_key);
}

static enum MHD_Result health(srv *s, struct MHD_Connection *c) {
    pthread_mutex_lock(&s->mu);
    json_t *j =
        json_pack("{s:s, s:s, s:b, s:i, s:I, s:I, s:I, s:I, s:{s:i, s:i, s:i, s:s}}", "status",
                  s->ready ? "ok" : "loading", "model", s->model_name, "busy", s->busy, "waiting",
                  s->n_waiting, "requests", (json_int_t)s->n_requests, "cancelled",
                  (json_int_t)s->n_cancelled, "rejected", (json_int_t)s->n_rejected,
                  "tokens_generated", (json_int_t)s->tokens_generated, "last", "prompt_tokens",
                  s->last_prompt_tokens, "cached_tokens", s->last_cached_tokens,
                  "completion_tokens", s->last_completion_tokens, "finish_reason", s->last_finish);
    int ready = s->ready;
    pthread_mutex_unlock(&s->mu);
    char *b = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    enum MHD_Result r = reply(c, ready ? 200 : 503, b);
    free(b);
    return r;
}

static enum MHD_Result models(srv *s, struct MHD_Connection *c) {
    json_t *j =
        json_pack("{s:s, s:[{s:s, s:s, s:I, s:s}]}", "object", "list", "data", "id", s->model_name,
                  "object", "model", "created", (json_int_t)time(NULL), "owned_by", "petrel");
    char *b = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    enum MHD_Result r = reply(c, 200, b);
    free(b);
    return r;
}

static enum MHD_Result add_header_size(void *cls, enum MHD_ValueKind kind, const char *key,
                                       const char *value) {
    (void)kind;
    *(size_t *)cls += strlen(key) + (value ? strlen(value) : 0) + 4; /* "K: V\r\n" */
    return MHD_YES;
}

static int api_of(const char *url) {
    if (!strncmp(url, "/v1/", 4)) url += 3;
    if (!strcmp(url, "/chat/completions")) return OAI_CHAT;
    if (!strcmp(url, "/completions")) return OAI_COMPLETIONS;
    if (!strcmp(url, "/responses")) return OAI_RESPONSES;
    return 0;
}

/* A complete request body: parse, queue, wait, answer. */
static enum MHD_Result submit(srv *s, struct MHD_Connection *c, conn *cn) {
    char err[512];
    job *j = calloc(1, sizeof *j);
    if (!j) return reply_error(c, 500, "server_error", NULL, "out of memory");
    j->srv = s;
    j->fd = -1;
    pthread_cond_init(&j->cv, NULL);
    if (oai_parse_request(cn->api, cn->body.v ? cn->body.v : "", cn->body.n, &j->req, err,
                          sizeof err)) {
        pthread_mutex_lock(&s->mu);
        j->refs = 1;
        job_release(j);
        pthread_mutex_unlock(&s->mu);
        return reply_error(c, 400, "invalid_request_error", "invalid_request", err);
    }
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (ci) j->fd = dup(ci->connect_fd);
    pthread_mutex_lock(&s->mu);
    if (s->stopping || !s->ready) {
        j->refs = 1;
        job_release(j);
        pthread_mutex_unlock(&s->mu);
        return reply_error(c, 503, "server_error", "loading", "the model is loading");
    }
    if (s->busy + s->n_waiting >= 1 + s->p.queue) {
        s->n_rejected++;
        j->refs = 1;
        job_release(j);
        pthread_mutex_unlock(&s->mu);
        return reply_error(c, 429, "rate_limit_error", "rate_limit_exceeded",
                           "the server is busy: too many requests are waiting; retry later");
    }
    s->n_requests++;
    j->refs = 2; /* this connection and the worker */
    if (s->tail)
        s->tail->next = j;
    else
        s->head = j;
    s->tail = j;
    s->n_waiting++;
    pthread_cond_signal(&s->work_cv);
    /* wait for the prompt to be accepted (or the job to end), noticing a client that leaves */
    while (!(j->started && j->req.stream) && !j->done && !s->stopping) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&j->cv, &s->mu, &ts);
        if (!job_stopped(j) && client_gone(j->fd)) job_stop(j);
    }
    if (!(j->req.stream && j->started)) {
        int status = j->status ? j->status : 503;
        char *body = j->body;
        j->body = NULL;
        job_release(j);
        pthread_mutex_unlock(&s->mu);
        enum MHD_Result r =
            body ? reply(c, status == 499 ? 400 : status, body)
                 : reply_error(c, 503, "server_error", NULL, "the server is shutting down");
        free(body);
        return r;
    }
    pthread_mutex_unlock(&s->mu);
    /* a stream: the job's reference passes to the response */
    struct MHD_Response *r =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, sse_read, j, sse_free);
    if (!r) {
        pthread_mutex_lock(&s->mu);
        job_stop(j);
        job_release(j);
        pthread_mutex_unlock(&s->mu);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    enum MHD_Result ret = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls) {
    (void)version;
    srv *s = cls;
    conn *cn = *con_cls;
    if (!cn) {
        /* libmicrohttpd's memory pool bounds the headers roughly (it answers 431 past it);
         * this makes the configured limit exact and the answer OpenAI-shaped */
        size_t hsize = strlen(method) + strlen(url) + 12;
        MHD_get_connection_values(c, MHD_HEADER_KIND, add_header_size, &hsize);
        if (hsize > s->p.max_header) {
            char msg[160];
            snprintf(msg, sizeof msg, "the request headers are %zu bytes; the limit is %zu", hsize,
                     s->p.max_header);
            return reply_error(c, 431, "invalid_request_error", "headers_too_large", msg);
        }
        int is_get = !strcmp(method, "GET") || !strcmp(method, "HEAD"),
            is_post = !strcmp(method, "POST");
        int api = api_of(url);
        int v1 = !strncmp(url, "/v1/", 4) || api;
        if (!strcmp(url, "/health") || !strcmp(url, "/v1/health")) {
            if (!is_get)
                return reply_error(c, 405, "invalid_request_error", "method_not_allowed",
                                   "use GET");
            return health(s, c);
        }
        if (v1 && !authorized(s, c))
            return reply_error(c, 401, "authentication_error", "invalid_api_key",
                               "missing or wrong API key (send 'Authorization: Bearer KEY')");
        if (!strcmp(url, "/v1/models") || !strcmp(url, "/models")) {
            if (!is_get)
                return reply_error(c, 405, "invalid_request_error", "method_not_allowed",
                                   "use GET");
            return models(s, c);
        }
        if (!api) {
            char msg[256];
            snprintf(msg, sizeof msg, "unknown endpoint %.100s %.100s", method, url);
            return reply_error(c, 404, "invalid_request_error", "not_found", msg);
        }
        if (!is_post)
            return reply_error(c, 405, "invalid_request_error", "method_not_allowed", "use POST");
        const char *cl =
            MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > s->p.max_body) {
            char msg[160];
            snprintf(msg, sizeof msg, "the request body is %.30s bytes; the limit is %zu", cl,
                     s->p.max_body);
            return reply_error(c, 413, "invalid_request_error", "request_too_large", msg);
        }
        pthread_mutex_lock(&s->mu);
        int ready = s->ready;
        pthread_mutex_unlock(&s->mu);
        if (!ready) return reply_error(c, 503, "server_error", "loading", "the model is loading");
        cn = calloc(1, sizeof *cn);
        if (!cn) return MHD_NO;
        cn->api = api;
        *con_cls = cn;
        return MHD_YES;
    }
    if (*upload_size) {
        if (cn->body.n + *upload_size > s->p.max_body)
            return MHD_NO; /* a chunked body past the limit: close */
        if (pt_buf_append(&cn->body, upload, *upload_size)) return MHD_NO;
        *upload_size = 0;
        return MHD_YES;
    }
    return submit(s, c, cn);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    (void)cls, (void)c, (void)toe;
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
    s->api_key = p->api_key && *p->api_key ? strdup(p->api_key) : NULL;
    s->model_name = strdup(p->model_name ? p->model_name : "petrel");
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->work_cv, NULL);
    snprintf(s->last_finish, sizeof s->last_finish, "none");
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
    s->d = MHD_start_daemon(
        flags, (uint16_t)p->port, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)(p->max_conns > 0 ? p->max_conns : 64),
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)(p->timeout_s > 0 ? p->timeout_s : 30),
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(p->max_header + 16384),
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!s->d) {
        snprintf(err, err_len, "cannot listen on %s:%d (address in use or not available)", s->host,
                 p->port);
        srv_stop(s);
        return NULL;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : p->port;
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
    pthread_mutex_lock(&s->mu);
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
    if (s->d) MHD_stop_daemon(s->d);
    pthread_cond_destroy(&s->work_cv);
    pthread_mutex_destroy(&s->mu);
    free(s->host);
    free(s->api_key);
    free(s->model_name);
    free(s);
}
