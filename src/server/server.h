/* server.h — `petrel serve`'s HTTP server: the OpenAI-compatible endpoints
 * on libmicrohttpd, one generation at a time behind a bounded queue.
 *
 *   GET  /health               503 while the model loads, then 200 (+ counters)
 *   GET  /v1/models            the one model served
 *   POST /v1/chat/completions  streaming (SSE) or not; tools; reasoning separated
 *   POST /v1/completions       raw text completion
 *   POST /v1/responses         the Responses API as Codex uses it
 *   GET|DELETE /v1/responses/{id}  a kept response (store.h)
 *   GET  /, /NAME              the web chat's files (webui.h), without the API key
 *
 * Each is one row of server.c's endpoint table (ROUTES: the path, answered with and without
 * /v1, the methods, whether the API key is needed, one handler); every request first passes
 * the same checks (header size, Host, Origin), and a generation endpoint's body is read whole
 * before it is parsed (oai.h) and queued.
 *
 * Threads: libmicrohttpd runs one thread per connection (bounded); they parse
 * and check requests, then hand a job to the single worker thread that owns
 * the engine, session and generator, so the KV cache (and its prefix reuse)
 * carries from one request to the next. A job that cannot wait (the queue
 * is full) gets 429 at once. The worker asks before every token whether the
 * client is still connected (a non-blocking peek on a dup of its socket), so
 * a client that goes away stops its generation within one token, and a queued
 * one leaves the queue at once. End of file alone is not "gone": a client may
 * half-close after its request; before the answer begins, an interim
 * "102 Processing" tells the two apart (a closed socket answers it with a
 * reset). srv_stop ends running streams with an error event, never a normal
 * finish, stops a prompt being evaluated between chunks, and gives open streams up to 2 s to
 * send their last event before it closes the connections.
 *
 * Prefix reuse is per API key (tenant): a request under another key starts
 * from an empty cache, so cached_tokens reveals nothing of another client's
 * prompt. Without keys every client is one tenant.
 *
 * Limits on hostile input: request headers (the connection's memory pool),
 * body size (Content-Length checked before reading; a chunked body that grows
 * past it closes the connection), an idle timeout, and connection slots
 * guarded against slow clients (slowloris):
 *   - a deadline for receiving a whole request (request_timeout_s): a reaper
 *     thread shuts down any connection still receiving past it, however
 *     steadily it trickles bytes;
 *   - a per-address limit (max_conns_per_ip);
 *   - the last SRV_RESERVED_SLOTS slots go only to addresses that have no
 *     request of their own still arriving, so /health and a normal client get
 *     through while every other slot is held by slow senders.
 *   - once the model is loaded, a body larger than any prompt the context could
 *     hold is refused (413) before it is read, and a prompt whose text alone
 *     needs more tokens than the context is refused (400) before tokenizing.
 * A streamed request's response (status, headers, the stream's opening events) begins once
 * its prompt is accepted, before the prompt is evaluated, and while it is evaluated an SSE
 * comment (": prefill DONE/TOTAL", tokens; EventSource and the OpenAI SDKs skip comments)
 * goes out at once and every sse_keepalive_s, so clients and proxies with an idle timeout do
 * not drop a long prefill; an error after that is an error event in the stream. A request
 * that does not stream gets its status with its body: such clients need a timeout longer
 * than the prefill.
 * Errors are OpenAI-shaped JSON.
 * Nothing here prints except one line per generation to srv_params.log (when
 * set): status, endpoint, prompt/cached/generated tokens, prefill time and
 * decode rate measured in the worker; nothing exits. The worker runs each
 * request as one turn of front/front.h, the same code the CLI's chat runs, over
 * the public API alone.
 */
#ifndef PT_SERVER_H
#define PT_SERVER_H

#include <stddef.h>
#include <stdio.h>

#include "petrel.h"

/* The defaults of srv_params, each defined once: `petrel serve` starts from them and its --help
 * prints them; the server falls back to them where a field is 0. */
#define SRV_DEFAULT_HOST "127.0.0.1"  /* loopback: this machine only */
#define SRV_DEFAULT_PORT 8080         /* llama.cpp's server's */
#define SRV_DEFAULT_QUEUE 16          /* requests waiting while one generates */
#define SRV_DEFAULT_MAX_BODY 16777216 /* 16 MiB */
#define SRV_DEFAULT_MAX_HEADER 65536
#define SRV_DEFAULT_TIMEOUT_S 30
#define SRV_DEFAULT_MAX_CONNS 64
#define SRV_DEFAULT_MAX_CONNS_PER_IP 8
#define SRV_DEFAULT_REQUEST_TIMEOUT_S 10
#define SRV_DEFAULT_SSE_KEEPALIVE_S 5

typedef struct srv_params {
    const char *host;            /* address to bind (SRV_DEFAULT_HOST) */
    int port;                    /* 0: any free port (srv_port says which) */
    const char *const *api_keys; /* n_api_keys keys; /v1/ needs "Authorization: Bearer KEY"
                                  * with one of them; none: open. Each key is a tenant: the KV
                                  * prefix one tenant left is not reused for another, so
                                  * cached_tokens cannot reveal another key's prompt */
    int n_api_keys;
    int queue;              /* requests that may wait while one generates */
    size_t max_body;        /* request body limit, bytes */
    size_t max_header;      /* request line + headers limit, bytes */
    int timeout_s;          /* an idle connection is closed after this; <= 0: the default */
    int max_conns;          /* simultaneous connections; <= 0: the default */
    int request_timeout_s;  /* a request's line, headers and body must arrive within this (and a
                             * kept-alive connection's next request within this of the last
                             * answer); else the connection is closed. <= 0: the default */
    int max_conns_per_ip;   /* simultaneous connections from one client address; <= 0: the
                             * default */
    const char *model_name; /* the id /v1/models and replies show */
    /* Browsers: origins allowed to call the API besides the server's own and http://localhost:*,
     * http://127.0.0.1:*, http://[::1]:* ("*": any). A request whose Origin is not allowed is
     * refused (403); allowed ones get Access-Control-Allow-Origin, preflights 204. */
    const char *const *cors;
    int n_cors;
    /* Host names the server may be reached by besides IP literals, localhost, this machine's
     * hostname and the bound host: a request naming another Host is refused (403), so a page
     * whose DNS name is rebound to this address cannot use it. */
    const char *const *allow_hosts;
    int n_allow_hosts;
    FILE *log; /* a line per generation request; NULL: none */
    /* Seconds between SSE comments (": prefill DONE/TOTAL") while a streamed request's prompt
     * is evaluated; 0: after every layer of every chunk. */
    double sse_keepalive_s;
} srv_params;

/* What the worker generates with; everything stays the caller's and must
 * outlive the server. */
typedef struct srv_model {
    pt_engine *e;
    pt_session *s;
    pt_gen *g;          /* generates in s */
    const char *format; /* chat format name ("none": /v1/completions only) */
    pt_sampling sp;     /* defaults for fields a request leaves out */
    int fixed_seed;     /* 1: sp.seed for every request without a seed; 0: a fresh seed each */
    int thinking;       /* -1: the family's default */
    int max_tokens;     /* default per request; -1: until EOG or the context is full */
    const char *const *stops; /* default stop strings for requests that give none */
    int n_stops;
    /* 1: special-token text in messages becomes the token (--parse-special-in-content) */
    int parse_special_in_content;
    pt_pcache *pcache; /* prompt prefixes on disk (--cache-dir), scoped per API key; or NULL */
} srv_model;

/* Connection slots kept for addresses with no request still arriving (/health and one normal
 * request). */
#define SRV_RESERVED_SLOTS 2

typedef struct srv srv;

/* Bind and start answering (/health says 503 until srv_set_model). NULL with err. */
srv *srv_start(const srv_params *p, char *err, size_t err_len);
int srv_port(const srv *s);
/* The model is loaded: start the worker; /health turns 200. 0 or -1 with err. */
int srv_set_model(srv *s, const srv_model *m, char *err, size_t err_len);
/* Cancel what runs and waits, close every connection, stop. */
void srv_stop(srv *s);

#endif
