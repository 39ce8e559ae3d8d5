/* test_serve.c — `petrel serve` driven over HTTP from plain sockets (the
 * binary at PETREL_BIN, on a fixture model, on a free port of 127.0.0.1):
 * non-streaming and streaming chat, completions, the Responses event
 * sequence, usage and KV-prefix reuse, tool-call plumbing, the API key, 429
 * under a full queue, cancellation when the client leaves, and a barrage of
 * malformed and hostile requests after which the server still answers. The
 * OpenAI mapping (oai.c, over pt_chat_parse) is also tested directly: parsed tool calls to
 * tool_calls, the streaming splitter, Responses function_call items.
 * Hostile clients: 200 slowloris connections from 8 loopback source addresses
 * while a normal client keeps its latency (PETREL_SLOWLORIS_SECONDS, default
 * 15), half-closed clients, a queued client that leaves, SIGTERM mid-stream,
 * per-key prefix reuse, empty API keys, prompts past the context refused
 * early, and `petrel inspect` escaping a model's strings.
 * Every server is stopped (SIGTERM, then SIGKILL) before its case returns;
 * every socket has a receive timeout, so no case can hang. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "front/front.h"
#include "server/oai.h"
#include "test.h"

/* ===== A server under test ===== */

typedef struct tsrv {
    pid_t pid;
    int port;
    char errfile[512];
} tsrv;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static const char *bin(void) {
    const char *b = getenv("PETREL_BIN");
    return b && *b ? b : "build/petrel";
}

/* Start `petrel serve -m FIXTURE --port 0 EXTRA...` and wait until it is listening
 * and (need_ready) has loaded the model. FIXTURE may be an absolute path. */
static int srv_up_(tsrv *s, const char *fixture, const char *const *extra, int need_ready) {
    static int n;
    memset(s, 0, sizeof s[0]);
    snprintf(s->errfile, sizeof s->errfile, "%s/serve_%d.err", t_tmpdir(), n++);
    const char *argv[64];
    int k = 0;
    char model[4096];
    snprintf(model, sizeof model, "%s", fixture[0] == '/' ? fixture : t_fixture(fixture));
    argv[k++] = bin();
    argv[k++] = "serve";
    argv[k++] = "-m";
    argv[k++] = model;
    argv[k++] = "--port";
    argv[k++] = "0";
    argv[k++] = "-t";
    argv[k++] = "2";
    for (int i = 0; extra && extra[i] && k < 62; i++)
        argv[k++] = extra[i];
    argv[k] = NULL;
    fflush(NULL);
    s->pid = fork();
    if (s->pid < 0) return -1;
    if (s->pid == 0) {
        int fd = open(s->errfile, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) dup2(fd, 2), dup2(fd, 1);
        unsetenv("PETREL_API_KEY"); /* the developer's own key must not leak into the tests */
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    double t0 = now_s();
    while (now_s() - t0 < 30) {
        char *e = t_read_file(s->errfile, NULL);
        const char *p = e ? strstr(e, "listening on http://127.0.0.1:") : NULL;
        if (p) s->port = atoi(p + strlen("listening on http://127.0.0.1:"));
        int ready = e && strstr(e, "petrel: ready") != NULL;
        free(e);
        if (s->port && (ready || !need_ready)) return 0;
        int st;
        if (waitpid(s->pid, &st, WNOHANG) == s->pid) {
            s->pid = 0;
            return -1;
        }
        usleep(20 * 1000);
    }
    return -1;
}

static void srv_down(tsrv *s) {
    if (s->pid <= 0) return;
    kill(s->pid, SIGTERM);
    double t0 = now_s();
    int st;
    while (now_s() - t0 < 10) {
        if (waitpid(s->pid, &st, WNOHANG) == s->pid) {
            s->pid = 0;
            /* a clean exit: no sanitizer report, no leak, status 0 */
            char *e = t_read_file(s->errfile, NULL);
            CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the server exited with status %d: %s",
                   WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), e ? e : "");
            CHECKF(!e || (!strstr(e, "Sanitizer") && !strstr(e, "runtime error")),
                   "sanitizer report: %s", e);
            free(e);
            return;
        }
        usleep(10 * 1000);
    }
    kill(s->pid, SIGKILL);
    waitpid(s->pid, &st, 0);
    s->pid = 0;
    CHECKF(0, "the server did not stop on SIGTERM within 10 s");
}

static int srv_up(tsrv *s, const char *fixture, const char *const *extra) {
    return srv_up_(s, fixture, extra, 1);
}

/* srv_up for a case that cannot go on without the server: a failure is the case's, said once. */
static int srv_up_checked(tsrv *s, const char *fixture, const char *const *extra) {
    if (!srv_up(s, fixture, extra)) return 0;
    CHECKF(0, "the server did not start (%s)", s->errfile);
    srv_down(s);
    return -1;
}

/* ===== HTTP over a plain socket ===== */

static int connect_to(int port, double timeout_s) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    struct timeval tv = {(time_t)timeout_s, (suseconds_t)((timeout_s - (time_t)timeout_s) * 1e6)};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof a)) {
        close(fd);
        return -1;
    }
    return fd;
}

static int send_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0) return -1;
        p += w, n -= (size_t)w;
    }
    return 0;
}

/* Send a request; extra: more header lines ("Name: value\r\n"...). */
static int send_req(int fd, const char *method, const char *path, const char *extra,
                    const char *body) {
    size_t bl = body ? strlen(body) : 0, cap = 512 + strlen(path) + (extra ? strlen(extra) : 0);
    char *head = malloc(cap);
    snprintf(head, cap,
             "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%s%s%s%zu\r\n\r\n", method,
             path, extra ? extra : "", body ? "Content-Type: application/json\r\n" : "",
             "Content-Length: ", bl);
    int rc = send_all(fd, head, strlen(head));
    free(head);
    if (rc) return -1;
    return body ? send_all(fd, body, bl) : 0;
}

typedef struct hresp {
    int status;
    char *raw;  /* headers + body as received */
    char *body; /* de-chunked body, NUL-terminated */
    size_t n;
} hresp;

static void hresp_free(hresp *r) {
    free(r->raw);
    free(r->body);
    memset(r, 0, sizeof *r);
}

/* Read the whole response (the server closes: Connection: close). */
static int read_resp(int fd, hresp *r) {
    memset(r, 0, sizeof *r);
    size_t cap = 1 << 16, n = 0;
    r->raw = malloc(cap);
    for (;;) {
        if (n + 4096 + 1 > cap) r->raw = realloc(r->raw, cap *= 2);
        ssize_t k = recv(fd, r->raw + n, 4096, 0);
        if (k <= 0) break;
        n += (size_t)k;
    }
    r->raw[n] = 0;
    /* interim 1xx answers (the server's "102 Processing" to a half-closed client) come first */
    char *st = r->raw, *he;
    while (sscanf(st, "HTTP/1.%*d %d", &r->status) == 1 && r->status >= 100 && r->status < 200 &&
           (he = strstr(st, "\r\n\r\n")))
        st = he + 4;
    if (st != r->raw)
        memmove(r->raw, st, n + 1 - (size_t)(st - r->raw)), n -= (size_t)(st - r->raw);
    he = strstr(r->raw, "\r\n\r\n");
    if (sscanf(r->raw, "HTTP/1.%*d %d", &r->status) != 1 || !he) return -1;
    const char *b = he + 4;
    size_t bn = n - (size_t)(b - r->raw);
    r->body = malloc(bn + 1);
    int chunked = strstr(r->raw, "Transfer-Encoding: chunked") &&
                  strstr(r->raw, "Transfer-Encoding: chunked") < he;
    if (!chunked) {
        memcpy(r->body, b, bn);
        r->n = bn;
    } else {
        const char *p = b, *end = b + bn;
        while (p < end) {
            char *e;
            unsigned long len = strtoul(p, &e, 16);
            const char *d = strstr(e, "\r\n");
            if (!d || !len) break;
            d += 2;
            if ((size_t)(end - d) < len) len = (unsigned long)(end - d);
            memcpy(r->body + r->n, d, len);
            r->n += len;
            p = d + len + 2;
        }
    }
    r->body[r->n] = 0;
    return 0;
}

static double http_timeout = 30; /* seconds a request may wait for its answer */

static int http(int port, const char *method, const char *path, const char *extra, const char *body,
                hresp *r) {
    memset(r, 0, sizeof *r);
    int fd = connect_to(port, http_timeout);
    if (fd < 0) return -1;
    int rc = send_req(fd, method, path, extra, body) ? -1 : read_resp(fd, r);
    close(fd);
    return rc;
}

static json_t *body_json(const hresp *r) {
    return r->body ? json_loads(r->body, 0, NULL) : NULL;
}

static const char *jstr(const json_t *j, const char *path) { /* "a.b.0.c" */
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    const json_t *cur = j;
    for (char *tok = strtok(buf, "."); tok && cur; tok = strtok(NULL, ".")) {
        if (json_is_array(cur))
            cur = json_array_get(cur, (size_t)atoi(tok));
        else
            cur = json_object_get(cur, tok);
    }
    return json_string_value(cur);
}

static long jint(const json_t *j, const char *path) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    const json_t *cur = j;
    for (char *tok = strtok(buf, "."); tok && cur; tok = strtok(NULL, ".")) {
        if (json_is_array(cur))
            cur = json_array_get(cur, (size_t)atoi(tok));
        else
            cur = json_object_get(cur, tok);
    }
    return json_is_integer(cur) ? (long)json_integer_value(cur) : -1;
}

/* The JSON objects of the "data:" lines of an SSE body (without [DONE]); *done: saw [DONE]. */
static json_t *sse_events(const char *body, int *done) {
    json_t *a = json_array();
    *done = 0;
    for (const char *p = body; p && *p;) {
        const char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n > 6 && !strncmp(p, "data: ", 6)) {
            if (n == 12 && !strncmp(p + 6, "[DONE]", 6))
                *done = 1;
            else {
                json_t *j = json_loadb(p + 6, n - 6, 0, NULL);
                json_array_append_new(a, j ? j : json_null());
            }
        }
        p = e ? e + 1 : NULL;
    }
    return a;
}

static const char *FIX = "qwen3moe-rq2k.gguf";

static int wait_idle(int port, double timeout_s, json_t **health) {
    double t0 = now_s();
    while (now_s() - t0 < timeout_s) {
        hresp r;
        if (!http(port, "GET", "/health", NULL, NULL, &r)) {
            json_t *j = body_json(&r);
            int idle = j && json_is_false(json_object_get(j, "busy")) && jint(j, "waiting") == 0;
            hresp_free(&r);
            if (idle) {
                if (health)
                    *health = j;
                else
                    json_decref(j);
                return 0;
            }
            json_decref(j);
        }
        usleep(20 * 1000);
    }
    return -1;
}

/* ===== Cases ===== */

/* While the model loads, /health says 503 and requests get an OpenAI-shaped 503. The
 * "model" is a FIFO: opening it blocks the load until the test writes to it. */
static void test_serve_loading(void) {
    char fifo[512];
    snprintf(fifo, sizeof fifo, "%s/loading.gguf", t_tmpdir());
    unlink(fifo);
    if (mkfifo(fifo, 0600)) {
        t_skip("mkfifo failed");
        return;
    }
    tsrv s;
    if (srv_up_(&s, fifo, NULL, 0)) {
        CHECKF(0, "the server did not start listening (%s)", s.errfile);
        srv_down(&s);
        return;
    }
    hresp r;
    CHECK(http(s.port, "GET", "/health", NULL, NULL, &r) == 0 && r.status == 503);
    CHECK_STR_CONTAINS(r.body, "\"status\":\"loading\"");
    hresp_free(&r);
    CHECK(http(s.port, "POST", "/v1/chat/completions", NULL, "{\"messages\":[]}", &r) == 0 &&
          r.status == 503);
    CHECK_STR_CONTAINS(r.body, "\"error\"");
    hresp_free(&r);
    /* not a model after all: the load fails, the server says so and exits 1 */
    int fd = open(fifo, O_WRONLY);
    if (fd >= 0) {
        /* the server may refuse the FIFO (not a regular file) and close it before
         * the bytes arrive: EPIPE is that race, not a failure */
        ssize_t w = write(fd, "garbage", 7);
        CHECKF(w == 7 || (w < 0 && errno == EPIPE), "write to the FIFO: %zd (%s)", w,
               strerror(errno));
        close(fd);
    }
    int st = 0;
    double t0 = now_s();
    while (now_s() - t0 < 10 && waitpid(s.pid, &st, WNOHANG) != s.pid)
        usleep(10 * 1000);
    CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 1, "exit status %d", st);
    if (!WIFEXITED(st)) kill(s.pid, SIGKILL), waitpid(s.pid, &st, 0);
    s.pid = 0;
    char *e = t_read_file(s.errfile, NULL);
    CHECK_STR_CONTAINS(e, "loading.gguf");
    free(e);
}

static void test_serve_basic(void) {
    tsrv s;
    if (srv_up_checked(&s, FIX, NULL)) return;
    hresp r;
    CHECK(http(s.port, "GET", "/health", NULL, NULL, &r) == 0 && r.status == 200);
    CHECK_STR_CONTAINS(r.body, "\"status\":\"ok\"");
    hresp_free(&r);
    CHECK(http(s.port, "GET", "/v1/models", NULL, NULL, &r) == 0 && r.status == 200);
    json_t *j = body_json(&r);
    CHECK(j && !strcmp(jstr(j, "data.0.id") ? jstr(j, "data.0.id") : "", "qwen3moe-rq2k"));
    json_decref(j);
    hresp_free(&r);
    /* non-streaming chat, greedy */
    const char *req =
        "{\"model\":\"anything\",\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},"
        "{\"role\":\"user\",\"content\":\"Tell me about "
        "SSDs\"}],\"max_tokens\":12,\"temperature\":0}";
    CHECK(http(s.port, "POST", "/v1/chat/completions", NULL, req, &r) == 0 && r.status == 200);
    j = body_json(&r);
    CHECKF(j != NULL, "not JSON: %s", r.body);
    CHECK(jstr(j, "object") && !strcmp(jstr(j, "object"), "chat.completion"));
    CHECK(jstr(j, "model") && !strcmp(jstr(j, "model"), "qwen3moe-rq2k"));
    CHECK(jstr(j, "choices.0.message.role") &&
          !strcmp(jstr(j, "choices.0.message.role"), "assistant"));
    CHECK(jstr(j, "choices.0.message.content") != NULL);
    long pt = jint(j, "usage.prompt_tokens"), ct = jint(j, "usage.completion_tokens");
    CHECKF(pt > 10 && ct > 0 && ct <= 12 && jint(j, "usage.total_tokens") == pt + ct,
           "usage %ld %ld", pt, ct);
    const char *fr = jstr(j, "choices.0.finish_reason");
    CHECK(fr && (!strcmp(fr, "length") ? ct == 12 : !strcmp(fr, "stop")));
    char *content1 =
        strdup(jstr(j, "choices.0.message.content") ? jstr(j, "choices.0.message.content") : "");
    json_decref(j);
    hresp_free(&r);
    /* the same request again: the whole prompt but its last token comes from the cache, same answer
     */
    CHECK(http(s.port, "POST", "/v1/chat/completions", NULL, req, &r) == 0 && r.status == 200);
    j = body_json(&r);
    CHECKF(jint(j, "usage.prompt_tokens_details.cached_tokens") == pt - 1, "cached %ld of %ld",
           jint(j, "usage.prompt_tokens_details.cached_tokens"), pt);
    CHECK(jstr(j, "choices.0.message.content") &&
          !strcmp(jstr(j, "choices.0.message.content"), content1));
    json_decref(j);
    hresp_free(&r);
    /* a continued conversation reuses the shared prefix */
    char req2[2048];
    snprintf(req2, sizeof req2,
             "{\"messages\":[{\"role\":\"system\",\"content\":\"Be "
             "brief.\"},{\"role\":\"user\",\"content\":\"Tell "
             "me about SSDs\"},{\"role\":\"assistant\",\"content\":\"They are "
             "fast.\"},{\"role\":\"user\","
             "\"content\":\"More?\"}],\"max_tokens\":3,\"temperature\":0}");
    CHECK(http(s.port, "POST", "/v1/chat/completions", NULL, req2, &r) == 0 && r.status == 200);
    j = body_json(&r);
    long cached = jint(j, "usage.prompt_tokens_details.cached_tokens");
    CHECKF(cached > 5 && cached < jint(j, "usage.prompt_tokens"), "cached %ld", cached);
    json_decref(j);
    hresp_free(&r);
    /* completions */
    CHECK(http(s.port, "POST", "/v1/completions", NULL,
               "{\"prompt\":\"Once upon a time\",\"max_tokens\":5,\"seed\":3}", &r) == 0 &&
          r.status == 200);
    j = body_json(&r);
    CHECK(jstr(j, "object") && !strcmp(jstr(j, "object"), "text_completion"));
    CHECK(jstr(j, "choices.0.text") != NULL && jint(j, "usage.completion_tokens") == 5);
    json_decref(j);
    hresp_free(&r);
    /* routing errors are OpenAI-shaped */
    CHECK(http(s.port, "GET", "/v1/nothing", NULL, NULL, &r) == 0 && r.status == 404);
    CHECK_STR_CONTAINS(r.body, "\"error\":{");
    hresp_free(&r);
    CHECK(http(s.port, "GET", "/v1/chat/completions", NULL, NULL, &r) == 0 && r.status == 405);
    CHECK_STR_CONTAINS(r.body, "\"type\":\"invalid_request_error\"");
    hresp_free(&r);
    free(content1);
    srv_down(&s);
}

static void test_serve_stream(void) {
    tsrv s;
    if (srv_up_checked(&s, FIX, NULL)) return;
    const char *base =
        "{\"messages\":[{\"role\":\"user\",\"content\":\"Write a poem\"}],\"max_tokens\":16,"
        "\"temperature\":0";
    char req[1024];
    hresp r;
    snprintf(req, sizeof req, "%s}", base);
    CHECK(http(s.port, "POST", "/v1/chat/completions", NULL, req, &r) == 0 && r.status == 200);
    json_t *j = body_json(&r);
    char *want =
        strdup(jstr(j, "choices.0.message.content") ? jstr(j, "choices.0.message.content") : "?");
    json_decref(j);
    hresp_free(&r);
    snprintf(req, sizeof req, "%s,\"stream\":true,\"stream_options\":{\"include_usage\":true}}",
             base);
    CHECK(http(s.port, "POST", "/v1/chat/completions", NULL, req, &r) == 0 && r.status == 200);
    CHECK_STR_CONTAINS(r.raw, "Content-Type: text/event-stream");
    int done = 0;
    json_t *ev = sse_events(r.body, &done);
    CHECK(done);
    size_t n = json_array_size(ev);
    CHECKF(n >= 4, "%zu events", n);
    CHECK(jstr(ev, "0.choices.0.delta.role") &&
          !strcmp(jstr(ev, "0.choices.0.delta.role"), "assistant"));
    char got[4096] = "";
    int n_deltas = 0;
    for (size_t i = 0; i + 2 < n; i++) {
        json_t *e = json_array_get(ev, i);
        CHECK(jstr(e, "object") && !strcmp(jstr(e, "object"), "chat.completion.chunk"));
        const char *c = jstr(e, "choices.0.delta.content");
        if (c && i > 0) strncat(got, c, sizeof got - strlen(got) - 1), n_deltas++;
    }
    CHECKF(!strcmp(got, want), "streamed '%s' vs '%s'", got, want);
    CHECKF(n_deltas >= 2, "text came in %d deltas (not streamed token by token)", n_deltas);
    json_t *fin = json_array_get(ev, n - 2), *use = json_array_get(ev, n - 1);
    CHECK(jstr(fin, "choices.0.finish_reason") != NULL);
    CHECK(json_array_size(json_object_get(use, "choices")) == 0);
    CHECK(jint(use, "usage.completion_tokens") > 0 && jint(use, "usage.prompt_tokens") > 5);
    CHECK(jint(use, "usage.prompt_tokens_details.cached_tokens") ==
          jint(use, "usage.prompt_tokens") - 1);
    json_decref(ev);
    hresp_free(&r);
    /* completions stream */
    CHECK(http(s.port, "POST", "/v1/completions", NULL,
               "{\"prompt\":\"Hello\",\"max_tokens\":4,\"stream\":true}", &r) == 0 &&
          r.status == 200);
    ev = sse_events(r.body, &done);
    CHECK(done && json_array_size(ev) >= 2);
    CHECK(jstr(ev, "0.object") && !strcmp(jstr(ev, "0.object"), "text_completion") &&
          jstr(ev, "0.choices.0.text"));
    json_decref(ev);
    hresp_free(&r);
    free(want);
    srv_down(&s);
}

/* A streamed request's response begins before its prompt is evaluated: status and headers, an
 * SSE comment ": prefill 0/N" before any data event, then (--sse-keepalive 0: after every layer)
 * comments with the tokens done, the last one N/N before the answer's text; the events are
 * unchanged (comments are not events). A request that does not stream has no comment in its
 * body. A reused prefix counts as done from the start. */
static void test_serve_stream_prefill_comments(void) {
    const char *extra[] = {"-b", "16", "-c", "2048", "--sse-keepalive", "0", NULL};
    tsrv s;
    if (srv_up_checked(&s, FIX, extra)) return;
    long hits = -1; /* the second request's cached_tokens */
    char text[2048] = "", req[4096];
    for (int i = 0; i < 16; i++)
        strcat(text, "Solid state drives keep data in flash cells. ");
    hresp r;
    for (int round = 0; round < 2; round++) {
        snprintf(req, sizeof req,
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"%s\"}],\"max_tokens\":4,"
                 "\"temperature\":0,\"stream\":true,\"stream_options\":{\"include_usage\":true}}",
                 text);
        CHECK(http(s.port, "POST", "/v1/chat/completions", NULL, req, &r) == 0 && r.status == 200);
        CHECK_STR_CONTAINS(r.raw, "Content-Type: text/event-stream");
        int done = 0;
        json_t *ev = sse_events(r.body ? r.body : "", &done);
        const size_t n = json_array_size(ev);
        const long n_prompt = jint(json_array_get(ev, n - 1), "usage.prompt_tokens");
        const long cached =
            jint(json_array_get(ev, n - 1), "usage.prompt_tokens_details.cached_tokens");
        CHECKF(done && n_prompt > 100, "%zu events, prompt %ld: %s", n, n_prompt,
               r.body ? r.body : "");
        /* the comments: first, in order, the last one complete before the first text delta */
        const char *body = r.body ? r.body : "";
        const char *first_data = strstr(body, "data: ");
        const char *first_text = strstr(body, "\"content\":\"");
        while (first_text && first_text[11] == '"') /* the role's opening "content":"" */
            first_text = strstr(first_text + 1, "\"content\":\"");
        CHECKF(!strncmp(body, ": prefill ", 10), "the stream does not begin with a comment: %.200s",
               body);
        int n_comments = 0, bad = 0, last = -1, got = 0, tot = 0;
        const char *last_c = NULL;
        for (const char *c = body; (c = strstr(c, ": prefill ")); c++) {
            if (c != body && c[-1] != '\n') continue;
            n_comments++;
            if (sscanf(c, ": prefill %d/%d\n\n", &got, &tot) != 2 || tot != n_prompt ||
                got < last || got > tot)
                bad++;
            if (n_comments == 1 && got != (round ? cached : 0)) bad++;
            last = got, last_c = c;
        }
        CHECKF(n_comments >= 3 && bad == 0 && last == n_prompt,
               "round %d: %d comments, %d bad, last %d of %ld: %.600s", round, n_comments, bad,
               last, n_prompt, body);
        CHECKF(first_data && first_data > body && (!first_text || last_c < first_text),
               "comments and data out of order: %.600s", body);
        /* the events are what they were: the role first, then the text, finish, usage */
        CHECK(jstr(ev, "0.choices.0.delta.role") &&
              !strcmp(jstr(ev, "0.choices.0.delta.role"), "assistant"));
        CHECK(jstr(json_array_get(ev, n - 2), "choices.0.finish_reason") != NULL);
        if (round == 1) CHECKF(cached == n_prompt - 1, "cached %ld of %ld", cached, n_prompt);
        if (round == 1) hits = cached;
        json_decref(ev);
        hresp_free(&r);
    }
    /* the log line: the KV cache and the second request's prefix hits */
    char *log = t_read_file(s.errfile, NULL);
    char want[64];
    snprintf(want, sizeof want, " in RAM, prefix hits %ld (0 from disk)", hits);
    CHECK_STR_CONTAINS(log, "/2048 f16, ");
    CHECK_STR_CONTAINS(log, " in RAM, prefix hits 0 (0 from disk)");
    CHECK_STR_CONTAINS(log, want);
    free(log);
    /* not streamed: a JSON body, no comment */
    snprintf(req, sizeof req,
             "{\"messages\":[{\"role\":\"user\",\"content\":\"%s Why?\"}],\"max_tokens\":2}", text);
    CHECK(http(s.port, "POST", "/v1/chat/completions", NULL, req, &r) == 0 && r.status == 200);
    json_t *j = body_json(&r);
    CHECKF(j && r.body[0] == '{' && !strstr(r.body, "prefill"), "%s", r.body ? r.body : "");
    json_decref(j);
    hresp_free(&r);
    srv_down(&s);
}

/* A prefill that fails after the stream began (the expert pack truncated under a server that
 * streams experts from it): the status was 200, so the error is the stream's error event (the
 * shape of every mid-stream error) and [DONE], named in the log line. */
static void test_serve_stream_error_after_headers(void) {
    static char out[8192];
    char model[512], pack[600], cmd[2048];
    snprintf(model, sizeof model, "%s/f.gguf", t_tmpdir());
    snprintf(pack, sizeof pack, "%s.xpack", model);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s' && %s pack '%s'", t_fixture("glm-dsa-rq2k.gguf"), model,
             bin(), model);
    CHECKF(t_run(cmd, out, sizeof out) == 0, "copy and pack: %s", out);
    const char *extra[] = {"--expert-slots", "1", NULL};
    tsrv s;
    if (srv_up_checked(&s, model, extra)) return;
    struct stat st;
    CHECK(stat(pack, &st) == 0 && truncate(pack, st.st_size / 4) == 0);
    hresp r;
    CHECK(http(s.port, "POST", "/v1/chat/completions", NULL,
               "{\"messages\":[{\"role\":\"user\",\"content\":\"Tell me about SSDs\"}],"
               "\"max_tokens\":4,\"stream\":true}",
               &r) == 0);
    CHECKF(r.status == 200 && r.body && !strncmp(r.body, ": prefill 0/", 12), "%d: %s", r.status,
           r.body ? r.body : "");
    int done = 0;
    json_t *ev = sse_events(r.body ? r.body : "", &done);
    const json_t *last = json_array_get(ev, json_array_size(ev) - 1);
    const char *msg = jstr(last, "error.message");
    CHECKF(done && msg && strstr(msg, "unexpected end of file") && strstr(msg, pack) &&
               jstr(last, "error.type") && !strcmp(jstr(last, "error.type"), "server_error"),
           "%s", r.body ? r.body : "");
    json_decref(ev);
    hresp_free(&r);
    char *log = t_read_file(s.errfile, NULL);
    CHECK_STR_CONTAINS(log, "petrel: 200 POST /v1/chat/completions (stream): ");
    CHECK_STR_CONTAINS(log, "reading experts of layer"); /* the log line cuts long messages */
    free(log);
    srv_down(&s);
}

static void test_serve_responses(void) {
    tsrv s;
    if (srv_up_checked(&s, FIX, NULL)) return;
    hresp r;
    const char *req = "{\"model\":\"gpt-5-codex\",\"instructions\":\"You are a coding "
                      "agent.\",\"input\":[{\"type\":\"message\","
                      "\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":\"List the "
                      "files\"}]},{\"type\":"
                      "\"function_call\",\"call_id\":\"call_1\",\"name\":\"shell\",\"arguments\":"
                      "\"{\\\"command\\\":[\\\"ls\\\"]}\"},"
                      "{\"type\":\"function_call_output\",\"call_id\":\"call_1\",\"output\":\"a.c "
                      "b.c\"}],\"tools\":[{\"type\":"
                      "\"function\",\"name\":\"shell\",\"description\":\"run a "
                      "command\",\"parameters\":{\"type\":\"object\","
                      "\"properties\":{\"command\":{\"type\":\"array\",\"items\":{\"type\":"
                      "\"string\"}}}}},{\"type\":"
                      "\"web_search\"}],\"tool_choice\":\"auto\",\"parallel_tool_calls\":false,"
                      "\"reasoning\":{\"effort\":\"low\"},"
                      "\"store\":false,\"stream\":true,\"max_output_tokens\":12,\"temperature\":0}";
    CHECK(http(s.port, "POST", "/v1/responses", NULL, req, &r) == 0 && r.status == 200);
    int done = 0;
    json_t *ev = sse_events(r.body, &done);
    size_t n = json_array_size(ev);
    CHECKF(n >= 6, "%zu events: %s", n, r.body);
    /* the order Codex relies on */
    const char *first[] = {"response.created", "response.in_progress"};
    for (int i = 0; i < 2; i++)
        CHECK(jstr(ev, i ? "1.type" : "0.type") &&
              !strcmp(jstr(json_array_get(ev, (size_t)i), "type"), first[i]));
    const char *last = jstr(json_array_get(ev, n - 1), "type");
    CHECKF(last && (!strcmp(last, "response.completed") || !strcmp(last, "response.incomplete")),
           "last %s", last);
    int added = 0, deltas = 0, item_done = 0, text_done = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(ev, i);
        CHECKF(jint(e, "sequence_number") == (long)i, "sequence_number %ld at %zu",
               jint(e, "sequence_number"), i);
        const char *t = jstr(e, "type");
        if (!t) continue;
        CHECKF(strstr(r.body, "event: ") != NULL, "no event: lines");
        if (!strcmp(t, "response.output_item.added")) added++;
        if (!strcmp(t, "response.output_text.delta") ||
            !strcmp(t, "response.reasoning_text.delta")) {
            CHECK(added > item_done);
            CHECK(jstr(e, "item_id") && jstr(e, "delta"));
            deltas++;
        }
        if (!strcmp(t, "response.output_text.done")) text_done++;
        if (!strcmp(t, "response.output_item.done")) item_done++;
    }
    CHECKF(added >= 1 && added == item_done && deltas >= 2, "added %d done %d deltas %d", added,
           item_done, deltas);
    json_t *fin = json_object_get(json_array_get(ev, n - 1), "response");
    CHECK(jstr(fin, "id") && !strncmp(jstr(fin, "id"), "resp_", 5));
    CHECK(json_array_size(json_object_get(fin, "output")) == (size_t)item_done);
    CHECK(jint(fin, "usage.input_tokens") > 20 && jint(fin, "usage.output_tokens") > 0);
    CHECK(jint(fin, "usage.input_tokens_details.cached_tokens") >= 0);
    json_decref(ev);
    hresp_free(&r);
    /* non-streaming Responses, plain string input */
    CHECK(http(s.port, "POST", "/v1/responses", NULL, "{\"input\":\"hi\",\"max_output_tokens\":3}",
               &r) == 0 &&
          r.status == 200);
    json_t *j = body_json(&r);
    CHECK(jstr(j, "object") && !strcmp(jstr(j, "object"), "response"));
    CHECK(jstr(j, "output.0.type") != NULL);
    CHECK(jint(j, "usage.output_tokens") == 3);
    json_decref(j);
    hresp_free(&r);
    srv_down(&s);
}

/* A model whose prompt opens a reasoning block (GLM-5): the reasoning comes back
 * as reasoning_content, never inside content; thinking off gives content. */
static void test_serve_reasoning(void) {
    tsrv s;
    if (srv_up_checked(&s, "glm-dsa-rq2k.gguf", NULL)) return;
    hresp r;
    const char *req = "{\"messages\":[{\"role\":\"user\",\"content\":\"Why is the sky "
                      "blue?\"}],\"max_tokens\":10,"
                      "\"temperature\":0}";
    CHECK(http(s.port, "POST", "/v1/chat/completions", NULL, req, &r) == 0 && r.status == 200);
    json_t *j = body_json(&r);
    const char *rc = jstr(j, "choices.0.message.reasoning_content"),
               *c = jstr(j, "choices.0.message.content");
    CHECKF(rc && *rc && c && !strstr(c, "think>"), "%s", r.body);
    CHECK(jint(j, "usage.completion_tokens_details.reasoning_tokens") > 0);
    json_decref(j);
    hresp_free(&r);
    /* streamed: reasoning deltas only, as reasoning_content */
    const char *sreq = "{\"messages\":[{\"role\":\"user\",\"content\":\"Why is the sky "
                       "blue?\"}],\"max_tokens\":10,"
                       "\"temperature\":0,\"stream\":true}";
    CHECK(http(s.port, "POST", "/v1/chat/completions", NULL, sreq, &r) == 0 && r.status == 200);
    int done;
    json_t *ev = sse_events(r.body, &done);
    int nr = 0;
    for (size_t i = 1; i < json_array_size(ev); i++) {
        json_t *e = json_array_get(ev, i);
        if (jstr(e, "choices.0.delta.reasoning_content")) nr++;
        const char *cc = jstr(e, "choices.0.delta.content");
        CHECKF(!cc || !strstr(cc, "<think>"), "content delta '%s'", cc);
    }
    CHECK(done && nr >= 2);
    json_decref(ev);
    hresp_free(&r);
    /* Responses: a reasoning item comes first */
    CHECK(http(s.port, "POST", "/v1/responses", NULL,
               "{\"input\":\"hi\",\"max_output_tokens\":4,\"stream\":true}", &r) == 0 &&
          r.status == 200);
    CHECK_STR_CONTAINS(r.body, "response.reasoning_text.delta");
    hresp_free(&r);
    /* thinking off: the answer is content */
    const char *off = "{\"messages\":[{\"role\":\"user\",\"content\":\"Why is the sky "
                      "blue?\"}],\"max_tokens\":10,"
                      "\"temperature\":0,\"chat_template_kwargs\":{\"enable_thinking\":false}}";
    CHECK(http(s.port, "POST", "/v1/chat/completions", NULL, off, &r) == 0 && r.status == 200);
    j = body_json(&r);
    CHECKF(jstr(j, "choices.0.message.content") && !jstr(j, "choices.0.message.reasoning_content"),
           "%s", r.body);
    json_decref(j);
    hresp_free(&r);
    srv_down(&s);
}

/* The request/response plumbing of tools over HTTP: tools + tool_choice
 * accepted, an assistant tool call and its result in the conversation. */
static void test_serve_tools_http(void) {
    tsrv s;
    if (srv_up_checked(&s, FIX, NULL)) return;
    const char *tools =
        "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":"
        "\"Weather of a city\",\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{"
        "\"type\":\"string\"}},\"required\":[\"city\"]}}}]";
    char req[4096];
    snprintf(
        req, sizeof req,
        "{\"messages\":[{\"role\":\"user\",\"content\":\"Weather in "
        "Paris?\"},{\"role\":\"assistant\","
        "\"content\":null,\"tool_calls\":[{\"id\":\"call_1\",\"type\":\"function\",\"function\":{"
        "\"name\":"
        "\"get_weather\",\"arguments\":\"{\\\"city\\\": \\\"Paris\\\"}\"}}]},{\"role\":\"tool\","
        "\"tool_call_id\":\"call_1\",\"content\":\"18 C, "
        "sunny\"}],%s,\"tool_choice\":\"auto\",\"max_tokens\":6,"
        "\"temperature\":0}",
        tools);
    hresp r;
    CHECK(http(s.port, "POST", "/v1/chat/completions", NULL, req, &r) == 0 && r.status == 200);
    json_t *j = body_json(&r);
    const char *fr = jstr(j, "choices.0.finish_reason");
    CHECKF(fr && (!strcmp(fr, "length") || !strcmp(fr, "stop") || !strcmp(fr, "tool_calls")), "%s",
           r.body);
    CHECK(jint(j, "usage.prompt_tokens") > 40); /* the tool declarations were rendered */
    json_decref(j);
    hresp_free(&r);
    /* a specific function as tool_choice; one that is not offered is a 400 */
    snprintf(req, sizeof req,
             "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],%s,\"tool_choice\":{\"type\":"
             "\"function\","
             "\"function\":{\"name\":\"nope\"}},\"max_tokens\":2}",
             tools);
    CHECK(http(s.port, "POST", "/v1/chat/completions", NULL, req, &r) == 0 && r.status == 400);
    CHECK_STR_CONTAINS(r.body, "nope");
    hresp_free(&r);
    /* a tool call without a function name cannot be rendered: 400, not a crash */
    CHECK(http(s.port, "POST", "/v1/chat/completions", NULL,
               "{\"messages\":[{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"type\":"
               "\"function\","
               "\"function\":{\"arguments\":\"{}\"}}]}],\"max_tokens\":2}",
               &r) == 0 &&
          r.status == 400);
    CHECK_STR_CONTAINS(r.body, "\"error\"");
    hresp_free(&r);
    srv_down(&s);
}

/* chat_parse -> OpenAI tool_calls, and the streaming splitter, without HTTP. */
typedef struct collect {
    pt_buf r, c;
} collect;
static int collect_delta(void *ud, int kind, const char *s, size_t n) {
    collect *c = ud;
    pt_buf *b = kind == FE_REASONING ? &c->r : &c->c;
    b->v = realloc(b->v, b->n + n + 1);
    memcpy(b->v + b->n, s, n);
    b->n += n;
    b->v[b->n] = 0;
    return 0;
}

static void test_serve_tool_mapping(void) {
    const char *text =
        "<think>\nThe user wants weather.\n</think>\n\nLet me check.\n<tool_call>\n{\"name\": "
        "\"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n</tool_call>";
    /* streamed one byte at a time: reasoning and content are separated, the markup is held back */
    fe_split sp;
    fe_split_init(&sp, "qwen3", 0, 1, 0);
    collect col = {{0}, {0}};
    for (size_t i = 0; text[i]; i++)
        CHECK(fe_split_push(&sp, text + i, 1, 0, collect_delta, &col) == 0);
    CHECK(fe_split_push(&sp, "", 0, 1, collect_delta, &col) == 0);
    CHECKF(col.r.v && !strcmp(col.r.v, "The user wants weather.\n"), "reasoning '%s'", col.r.v);
    CHECKF(col.c.v && !strcmp(col.c.v, "Let me check.\n"), "content '%s'", col.c.v);
    fe_split_free(&sp);
    free(col.r.v), free(col.c.v);
    /* GLM's prompt opens the reasoning block itself */
    fe_split_init(&sp, "glm-5", 1, 0, 0);
    memset(&col, 0, sizeof col);
    const char *g = "thinking</th";
    CHECK(fe_split_push(&sp, g, strlen(g), 0, collect_delta, &col) == 0);
    CHECKF(col.r.v && !strcmp(col.r.v, "thinking"), "held '%s'", col.r.v);
    CHECK(fe_split_push(&sp, "ink>answer <tool_call>x", 23, 1, collect_delta, &col) == 0);
    CHECKF(col.c.v && !strcmp(col.c.v, "answer <tool_call>x"), "no tools: markup is text: '%s'",
           col.c.v);
    fe_split_free(&sp);
    free(col.r.v), free(col.c.v);
    /* the parse and the OpenAI shapes */
    pt_chat_parsed p;
    char err[512];
    CHECK(pt_chat_parse("qwen3", text, strlen(text), 0, NULL, &p, err, sizeof err) == 0);
    CHECK(p.n_calls == 1 && !strcmp(p.reasoning, "The user wants weather.") &&
          !strcmp(p.content, "Let me check."));
    json_t *calls = oai_tool_calls(&p, "abc");
    CHECK(json_array_size(calls) == 1);
    CHECK(jstr(calls, "0.id") && !strcmp(jstr(calls, "0.id"), "call_abc_0"));
    CHECK(jstr(calls, "0.type") && !strcmp(jstr(calls, "0.type"), "function"));
    CHECK(jstr(calls, "0.function.name") && !strcmp(jstr(calls, "0.function.name"), "get_weather"));
    json_t *args = json_loads(
        jstr(calls, "0.function.arguments") ? jstr(calls, "0.function.arguments") : "", 0, NULL);
    CHECK(jstr(args, "city") && !strcmp(jstr(args, "city"), "Paris") && jint(args, "days") == 2);
    json_decref(args);
    json_decref(calls);
    CHECK(!strcmp(oai_finish_reason(PT_GEN_EOG, 1), "tool_calls") &&
          !strcmp(oai_finish_reason(PT_GEN_LENGTH, 0), "length"));
    oai_result res = {.id = "chatcmpl-abc",
                      .model = "m",
                      .created = 1,
                      .parsed = &p,
                      .reason = PT_GEN_EOG,
                      .prompt_tokens = 10,
                      .cached_tokens = 4,
                      .completion_tokens = 7,
                      .reasoning_tokens = 3};
    char *body = oai_reply(OAI_CHAT, &res);
    json_t *j = json_loads(body ? body : "", 0, NULL);
    CHECK(jstr(j, "choices.0.finish_reason") &&
          !strcmp(jstr(j, "choices.0.finish_reason"), "tool_calls"));
    CHECK(jstr(j, "choices.0.message.reasoning_content") &&
          !strcmp(jstr(j, "choices.0.message.reasoning_content"), "The user wants weather."));
    CHECK(jstr(j, "choices.0.message.tool_calls.0.function.name") != NULL);
    CHECK(jint(j, "usage.prompt_tokens_details.cached_tokens") == 4 &&
          jint(j, "usage.total_tokens") == 17);
    json_decref(j);
    free(body);
    /* a chat stream's closing chunks carry the calls with an index */
    oai_stream st;
    pt_buf out = {0};
    CHECK(oai_stream_begin(&st, OAI_CHAT, "chatcmpl-abc", "m", 1, 1, &out) == 0);
    CHECK(oai_stream_end(&st, &res, &out) == 0);
    int done;
    json_t *ev = sse_events(out.v, &done);
    CHECK(done && json_array_size(ev) == 4);
    CHECK(jint(ev, "1.choices.0.delta.tool_calls.0.index") == 0);
    CHECK(jstr(ev, "2.choices.0.finish_reason") &&
          !strcmp(jstr(ev, "2.choices.0.finish_reason"), "tool_calls"));
    json_decref(ev);
    oai_stream_free(&st);
    /* Responses: reasoning item, message item, then the function_call item */
    out.n = 0;
    res.id = "resp_abc";
    CHECK(oai_stream_begin(&st, OAI_RESPONSES, "resp_abc", "m", 1, 0, &out) == 0);
    CHECK(oai_stream_delta(&st, FE_REASONING, "why", 3, &out) == 0);
    CHECK(oai_stream_delta(&st, FE_CONTENT, "Let me check.", 13, &out) == 0);
    CHECK(oai_stream_end(&st, &res, &out) == 0);
    out.v[out.n] = 0;
    ev = sse_events(out.v, &done);
    const char *want[] = {"response.created",
                          "response.in_progress",
                          "response.output_item.added",
                          "response.reasoning_text.delta",
                          "response.reasoning_text.done",
                          "response.output_item.done",
                          "response.output_item.added",
                          "response.content_part.added",
                          "response.output_text.delta",
                          "response.output_text.done",
                          "response.content_part.done",
                          "response.output_item.done",
                          "response.output_item.added",
                          "response.function_call_arguments.delta",
                          "response.function_call_arguments.done",
                          "response.output_item.done",
                          "response.completed"};
    size_t nw = sizeof want / sizeof want[0];
    CHECKF(json_array_size(ev) == nw, "%zu events", json_array_size(ev));
    for (size_t i = 0; i < nw && i < json_array_size(ev); i++) {
        const char *t = jstr(json_array_get(ev, i), "type");
        CHECKF(t && !strcmp(t, want[i]), "event %zu: %s, expected %s", i, t, want[i]);
    }
    json_t *fc = json_object_get(json_array_get(ev, nw - 2), "item");
    CHECK(jstr(fc, "type") && !strcmp(jstr(fc, "type"), "function_call") && jstr(fc, "call_id"));
    CHECK(jstr(fc, "name") && !strcmp(jstr(fc, "name"), "get_weather"));
    json_t *outp =
        json_object_get(json_object_get(json_array_get(ev, nw - 1), "response"), "output");
    CHECK(json_array_size(outp) == 3);
    json_decref(ev);
    oai_stream_free(&st);
    pt_buf_free(&out);
    pt_chat_parsed_free(&p);
    /* a malformed call stays text and is reported, never a crash */
    const char *badtxt = "<tool_call>\n{\"name\": \"f\", \"arguments\": [1,2]}\n</tool_call>";
    CHECK(pt_chat_parse("qwen3", badtxt, strlen(badtxt), 0, NULL, &p, err, sizeof err) == 0);
    CHECK(p.n_calls == 0 && p.n_bad == 1 && strstr(p.content, "<tool_call>") != NULL);
    CHECK(oai_tool_calls(&p, "x") == NULL);
    pt_chat_parsed_free(&p);
}

static void test_serve_request_parsing(void) {
    oai_req r;
    char err[512] = "";
    /* Responses input items become a chat conversation */
    const char *body =
        "{\"instructions\":\"sys\",\"input\":[{\"role\":\"developer\",\"content\":\"dev\"},{"
        "\"type\":"
        "\"reasoning\",\"summary\":[{\"type\":\"summary_text\",\"text\":\"hmm\"}]},{\"type\":"
        "\"function_call\",\"call_id\":\"c1\",\"name\":\"f\",\"arguments\":\"{}\"},{\"type\":"
        "\"function_call_output\",\"call_id\":\"c1\",\"output\":\"ok\"}],\"tools\":[{\"type\":"
        "\"function\",\"name\":\"f\",\"parameters\":{\"type\":\"object\"}}],\"max_output_tokens\":"
        "7}";
    CHECKF(oai_parse_request(OAI_RESPONSES, body, strlen(body), &r, err, sizeof err) == 0, "%s",
           err);
    CHECK(json_array_size(r.messages) == 4);
    CHECK(jstr(r.messages, "1.role") && !strcmp(jstr(r.messages, "1.role"), "system"));
    CHECK(jstr(r.messages, "2.role") && !strcmp(jstr(r.messages, "2.role"), "assistant"));
    CHECK(jstr(r.messages, "2.reasoning_content") &&
          !strcmp(jstr(r.messages, "2.reasoning_content"), "hmm"));
    CHECK(jstr(r.messages, "2.tool_calls.0.function.name") != NULL);
    CHECK(jstr(r.messages, "3.tool_call_id") && !strcmp(jstr(r.messages, "3.tool_call_id"), "c1"));
    CHECK(jstr(r.tools, "0.function.name") && r.max_tokens == 7);
    oai_req_free(&r);
    /* fields of the wrong type are named in the message */
    struct {
        const char *body, *needle;
    } bad[] = {
        {"{", "not valid JSON"},
        {"[]", "JSON object"},
        {"{}", "'messages'"},
        {"{\"messages\":{}}", "'messages'"},
        {"{\"messages\":[1]}", "messages[0]"},
        {"{\"messages\":[{\"role\":\"wizard\",\"content\":\"x\"}]}", "unknown role"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":5}]}", "'content'"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"video_url\"}]}]}",
         "not supported"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"temperature\":\"hot\"}",
         "'temperature'"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":-5}",
         "'max_tokens'"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stop\":5}", "'stop'"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":{}}", "'tools'"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"n\":2}", "'n'"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":\"yes\"}", "'stream'"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"a\":1,\"a\":2}", "JSON"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(err, 0, sizeof err);
        CHECKF(oai_parse_request(OAI_CHAT, bad[i].body, strlen(bad[i].body), &r, err, sizeof err) ==
                   -1,
               "accepted %s", bad[i].body);
        CHECKF(strstr(err, bad[i].needle) != NULL, "%s: '%s' lacks '%s'", bad[i].body, err,
               bad[i].needle);
    }
    CHECK(oai_parse_request(OAI_COMPLETIONS, "{\"prompt\":[1,2]}", 16, &r, err, sizeof err) == -1);
    CHECK(oai_parse_request(OAI_RESPONSES, "{\"input\":3}", 11, &r, err, sizeof err) == -1);
    /* invalid UTF-8 is repaired, never passed on */
    pt_buf u = {0};
    CHECK(pt_utf8_repair("a\xff"
                         "b\xc3",
                         4, &u) == 2 &&
          !strcmp(u.v, "a\xef\xbf\xbd"
                       "b\xef\xbf\xbd"));
    pt_buf_free(&u);
}

/* OpenAI's own validation of messages and tools: each refusal is a 400 whose
 * message and error.param name the field. */
static void test_serve_validation(void) {
    oai_req r;
    char err[512];
    struct {
        int api;
        const char *body, *param;
    } bad[] = {
        {OAI_CHAT, "{\"messages\":[{\"role\":\"user\"}]}", "messages[0].content"},
        {OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":null}]}", "messages[0].content"},
        {OAI_CHAT, "{\"messages\":[{\"role\":\"system\",\"content\":\"s\"},{\"role\":\"user\"}]}",
         "messages[1].content"},
        {OAI_CHAT,
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"},{\"role\":\"assistant\"}]}",
         "messages[1].content"},
        {OAI_CHAT,
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"},{\"role\":\"assistant\",\"tool_"
         "calls\":[]}]}",
         "messages[1].content"},
        {OAI_CHAT, "{\"messages\":[{\"role\":\"tool\",\"content\":\"ok\"}]}",
         "messages[0].tool_call_id"},
        {OAI_CHAT,
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tool_choice\":\"auto\"}",
         "tool_choice"},
        {OAI_CHAT,
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"type\":\"function\","
         "\"function\":{\"parameters\":{}}}]}",
         "tools[0].function.name"},
        {OAI_RESPONSES, "{\"input\":\"x\",\"tools\":[{\"type\":\"function\",\"parameters\":{}}]}",
         "tools[0].name"},
        {OAI_CHAT, "{\"messages\":[{\"role\":\"wizard\",\"content\":\"x\"}]}", "messages[0].role"},
        {OAI_CHAT, "{\"messages\":[{\"role\":\"function\",\"content\":\"x\"}]}",
         "messages[0].role"},
        {OAI_RESPONSES, "{\"input\":[{\"role\":\"user\"}]}", "input[0].content"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(err, 0, sizeof err);
        CHECKF(oai_parse_request(bad[i].api, bad[i].body, strlen(bad[i].body), &r, err,
                                 sizeof err) == -1,
               "accepted %s", bad[i].body);
        CHECKF(!strcmp(r.err_param, bad[i].param), "%s: param '%s', expected '%s'", bad[i].body,
               r.err_param, bad[i].param);
        CHECKF(strstr(err, bad[i].param) ||
                   strstr(err, strrchr(bad[i].param, '.') ? strrchr(bad[i].param, '.') + 1
                                                          : bad[i].param),
               "%s: '%s' does not name %s", bad[i].body, err, bad[i].param);
    }
    /* what OpenAI accepts stays accepted: an assistant message with tool_calls or a refusal and
     * no content, a tool message with its id, tool_choice with tools */
    const char *good[] = {
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"},{\"role\":\"assistant\",\"content\":"
        "null,"
        "\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"f\","
        "\"arguments\":\"{}\"}}]},{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"ok\"}],"
        "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}],\"tool_choice\":"
        "\"auto\"}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"},{\"role\":\"assistant\",\"refusal\":"
        "\"no\"},{\"role\":\"developer\",\"content\":\"\"}]}",
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        CHECKF(oai_parse_request(OAI_CHAT, good[i], strlen(good[i]), &r, err, sizeof err) == 0,
               "%s: %s", good[i], err);
        oai_req_free(&r);
    }
    /* over HTTP, error.param carries the field */
    tsrv s;
    if (srv_up_checked(&s, FIX, NULL)) return;
    hresp h;
    CHECK(http(s.port, "POST", "/v1/chat/completions", NULL, "{\"messages\":[{\"role\":\"user\"}]}",
               &h) == 0 &&
          h.status == 400);
    json_t *j = body_json(&h);
    CHECKF(jstr(j, "error.param") && !strcmp(jstr(j, "error.param"), "messages[0].content"),
           "body %s", h.body);
    CHECK(jstr(j, "error.type") && !strcmp(jstr(j, "error.type"), "invalid_request_error"));
    json_decref(j);
    hresp_free(&h);
    srv_down(&s);
}

/* The text of a greedy one-token completion of prompt, with an optional
 * logit_bias object; NULL unless the answer is a 200. Caller frees. */
static char *complete1(int port, const char *prompt, const char *bias) {
    char req[512];
    snprintf(req, sizeof req, "{\"prompt\":\"%s\",\"max_tokens\":1,\"temperature\":0%s%s}", prompt,
             bias ? ",\"logit_bias\":" : "", bias ? bias : "");
    hresp r;
    char *text = NULL;
    if (http(port, "POST", "/v1/completions", NULL, req, &r) == 0 && r.status == 200) {
        json_t *j = body_json(&r);
        const char *t = jstr(j, "choices.0.text");
        text = t ? strdup(t) : NULL;
        json_decref(j);
    }
    CHECKF(text != NULL, "%s: status %d %s", req, r.status, r.body ? r.body : "");
    hresp_free(&r);
    return text;
}

/* logit_bias, over HTTP, with greedy decoding: -100 on the greedy token changes
 * the answer, +100 on a token makes it the answer; malformed maps, values out
 * of [-100, 100] and ids outside the vocabulary are 400s naming logit_bias. */
static void test_serve_logit_bias(void) {
    char err[512];
    pt_engine_params ep = {.model_path = t_fixture(FIX), .vocab_only = 1};
    pt_engine *e = pt_engine_open(&ep, err, sizeof err);
    CHECKF(e != NULL, "%s", err);
    if (!e) return;
    tsrv s;
    if (srv_up(&s, FIX, NULL)) {
        CHECKF(0, "the server did not start (%s)", s.errfile);
        srv_down(&s);
        pt_engine_close(e);
        return;
    }
    const char *prompt = "The capital of France is";
    char *plain = complete1(s.port, prompt, NULL);
    pt_ids ids = {0};
    if (plain && plain[0] && !pt_tokenize(e, plain, strlen(plain), 0, &ids, err, sizeof err) &&
        ids.n >= 1) {
        char bias[64];
        snprintf(bias, sizeof bias, "{\"%d\":-100}", (int)ids.v[0]);
        char *banned = complete1(s.port, prompt, bias);
        CHECKF(banned && strcmp(banned, plain), "banned token %d ('%s') still answered '%s'",
               (int)ids.v[0], plain, banned ? banned : "");
        free(banned);
    } else {
        CHECKF(0, "the greedy answer '%s' gave no token", plain ? plain : "");
    }
    /* +100 forces a token the model would not pick */
    ids.n = 0;
    CHECK(pt_tokenize(e, " zebra", 6, 0, &ids, err, sizeof err) == 0 && ids.n >= 1);
    if (ids.n >= 1) {
        size_t len = 0;
        const char *piece = pt_token_piece(e, ids.v[0], 0, &len);
        char bias[64], want[64];
        snprintf(bias, sizeof bias, "{\"%d\":100}", (int)ids.v[0]);
        snprintf(want, sizeof want, "%.*s", (int)len, piece ? piece : "");
        char *forced = complete1(s.port, prompt, bias);
        CHECKF(forced && !strcmp(forced, want) && strcmp(forced, plain ? plain : ""),
               "forced '%s', answered '%s'", want, forced ? forced : "");
        free(forced);
    }
    pt_ids_free(&ids);
    free(plain);
    /* the 400s, on both endpoints that take logit_bias */
    char huge[64];
    snprintf(huge, sizeof huge, "{\"%d\":1}", pt_vocab_size(e));
    const char *bad[] = {
        "[1]",         "{\"abc\":1}",    "{\"-1\":1}",    "{\"05\":1}",          "{\"1.5\":1}",
        "{\"3\":101}", "{\"3\":-100.5}", "{\"3\":\"x\"}", "{\"99999999999\":1}", huge};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        for (int chat = 0; chat < 2; chat++) {
            char req[256];
            snprintf(req, sizeof req,
                     chat ? "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":"
                            "1,\"logit_bias\":%s}"
                          : "{\"prompt\":\"hi\",\"max_tokens\":1,\"logit_bias\":%s}",
                     bad[i]);
            hresp r;
            CHECK(http(s.port, "POST", chat ? "/v1/chat/completions" : "/v1/completions", NULL, req,
                       &r) == 0);
            json_t *j = body_json(&r);
            CHECKF(r.status == 400 && jstr(j, "error.param") &&
                       !strcmp(jstr(j, "error.param"), "logit_bias") &&
                       strstr(jstr(j, "error.message"), "logit_bias"),
                   "%s: %d %s", req, r.status, r.body ? r.body : "");
            json_decref(j);
            hresp_free(&r);
        }
    srv_down(&s);
    pt_engine_close(e);
}

static void test_serve_api_key(void) {
    tsrv s;
    const char *extra[] = {"--api-key", "sekrit", NULL};
    if (srv_up_checked(&s, FIX, extra)) return;
    hresp r;
    const char *req = "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":2}";
    CHECK(http(s.port, "POST", "/v1/chat/completions", NULL, req, &r) == 0 && r.status == 401);
    CHECK_STR_CONTAINS(r.body, "authentication_error");
    hresp_free(&r);
    CHECK(http(s.port, "POST", "/v1/chat/completions", "Authorization: Bearer wrong\r\n", req,
               &r) == 0 &&
          r.status == 401);
    hresp_free(&r);
    CHECK(http(s.port, "GET", "/v1/models", NULL, NULL, &r) == 0 && r.status == 401);
    hresp_free(&r);
    CHECK(http(s.port, "POST", "/v1/chat/completions", "Authorization: Bearer sekrit\r\n", req,
               &r) == 0 &&
          r.status == 200);
    hresp_free(&r);
    CHECK(http(s.port, "GET", "/health", NULL, NULL, &r) == 0 &&
          r.status == 200); /* health needs no key */
    hresp_free(&r);
    srv_down(&s);
    /* a non-loopback address without a key: the loud warning comes before binding. The address
     * is TEST-NET-1 (RFC 5737), never this machine's, so the bind fails and nothing is exposed. */
    char out[8192];
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "timeout 20 %s serve -m %s --host 192.0.2.1 --port 0 -t 1", bin(),
             t_fixture(FIX));
    CHECK(t_run(cmd, out, sizeof out) == 1);
    CHECK_STR_CONTAINS(out, "WARNING: listening on 192.0.2.1 without --api-key");
    CHECK_STR_CONTAINS(out, "cannot listen on 192.0.2.1");
}

/* Send a long streaming request and do not read it: it keeps the worker busy. */
static int start_long_stream(int port, int max_tokens) {
    int fd = connect_to(port, 30);
    char req[512];
    snprintf(req, sizeof req,
             "{\"messages\":[{\"role\":\"user\",\"content\":\"Go on "
             "forever\"}],\"max_tokens\":%d,\"stream\":true,"
             "\"temperature\":1,\"seed\":1}",
             max_tokens);
    if (fd >= 0 && send_req(fd, "POST", "/v1/chat/completions", NULL, req)) {
        close(fd);
        return -1;
    }
    return fd;
}

static void test_serve_queue_429(void) {
    tsrv s;
    const char *extra[] = {"--queue", "1", "-c", "4096", NULL};
    if (srv_up_checked(&s, FIX, extra)) return;
    int a = start_long_stream(s.port, 3000);
    /* wait until it generates */
    char buf[256];
    CHECK(a >= 0 && recv(a, buf, sizeof buf, 0) > 0);
    int b = start_long_stream(s.port, 3000); /* waits in the queue */
    double t0 = now_s();
    int waiting = 0;
    while (!waiting && now_s() - t0 < 5) {
        hresp r;
        if (!http(s.port, "GET", "/health", NULL, NULL, &r)) {
            json_t *j = body_json(&r);
            waiting = jint(j, "waiting") == 1;
            json_decref(j);
        }
        hresp_free(&r);
        if (!waiting) usleep(10 * 1000);
    }
    CHECK(waiting);
    hresp r;
    CHECK(http(s.port, "POST", "/v1/chat/completions", NULL,
               "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":2}",
               &r) == 0 &&
          r.status == 429);
    CHECK_STR_CONTAINS(r.body, "rate_limit_exceeded");
    CHECK_STR_CONTAINS(r.raw, "\r\nRetry-After: "); /* seconds, from the queue's average */
    CHECK_STR_CONTAINS(r.body, "\"error\":{\"message\"");
    hresp_free(&r);
    close(a);
    close(b);
    json_t *h = NULL;
    CHECK(wait_idle(s.port, 10, &h) == 0);
    CHECKF(jint(h, "cancelled") >= 1 && jint(h, "rejected") == 1, "health %s",
           h ? json_dumps(h, 0) : "");
    json_decref(h);
    CHECK(http(s.port, "POST", "/v1/chat/completions", NULL,
               "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":2}",
               &r) == 0 &&
          r.status == 200);
    hresp_free(&r);
    srv_down(&s);
}

static void test_serve_cancel(void) {
    tsrv s;
    const char *extra[] = {"-c", "4096", NULL};
    if (srv_up_checked(&s, FIX, extra)) return;
    const int max = 3500;
    int fd = start_long_stream(s.port, max);
    char buf[4096];
    ssize_t got = 0;
    /* read a few chunks of the stream, then hang up */
    for (int i = 0; i < 3 && fd >= 0; i++) {
        ssize_t k = recv(fd, buf, sizeof buf, 0);
        if (k <= 0) break;
        got += k;
    }
    CHECK(got > 0);
    close(fd);
    double t0 = now_s();
    json_t *h = NULL;
    CHECK(wait_idle(s.port, 10, &h) == 0);
    double dt = now_s() - t0;
    long ntok = jint(h, "last.completion_tokens");
    const char *fr = jstr(h, "last.finish_reason");
    CHECKF(fr && !strcmp(fr, "cancelled"), "finish %s", fr);
    CHECKF(ntok >= 0 && ntok < max, "generated %ld of %d after the client left", ntok, max);
    fprintf(stderr, "  cancel: stopped after %ld tokens, idle %.3f s after the hang-up\n", ntok,
            dt);
    json_decref(h);
    /* the next request is served at once */
    hresp r;
    t0 = now_s();
    CHECK(http(s.port, "POST", "/v1/chat/completions", NULL,
               "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":4}",
               &r) == 0 &&
          r.status == 200);
    CHECKF(now_s() - t0 < 5, "the next request took %.2f s", now_s() - t0);
    hresp_free(&r);
    /* a non-streaming request whose client leaves is cancelled too */
    fd = connect_to(s.port, 30);
    send_req(fd, "POST", "/v1/chat/completions", NULL,
             "{\"messages\":[{\"role\":\"user\",\"content\":\"Go\"}],\"max_tokens\":3500,"
             "\"temperature\":1}");
    usleep(200 * 1000);
    close(fd);
    CHECK(wait_idle(s.port, 10, &h) == 0);
    CHECKF(jstr(h, "last.finish_reason") && !strcmp(jstr(h, "last.finish_reason"), "cancelled"),
           "finish %s", jstr(h, "last.finish_reason"));
    json_decref(h);
    srv_down(&s);
}

static void test_serve_malformed(void) {
    tsrv s;
    const char *extra[] = {"--max-body", "65536", "--timeout", "2", NULL};
    if (srv_up_checked(&s, FIX, extra)) return;
    hresp r;
    const char *bodies[] = {
        "{",
        "not json at all",
        "[]",
        "{}",
        "null",
        "{\"messages\":\"hi\"}",
        "{\"messages\":[]}",
        "{\"messages\":[{\"content\":\"x\"}]}",
        "{\"messages\":[{\"role\":7,\"content\":\"x\"}]}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":\"ten\"}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_p\":7}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tool_choice\":42}",
        /* one string, cut to fit the line */
        ("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
         "\"tools\":[{\"type\":\"function\"}]}"),
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream_options\":7}",
        "\xff\xfe{\"messages\":1}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"\\ud800\"}]}",
    };
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        CHECK(http(s.port, "POST", "/v1/chat/completions", NULL, bodies[i], &r) == 0);
        CHECKF(r.status == 400, "%s: status %d", bodies[i], r.status);
        json_t *j = body_json(&r);
        CHECKF(jstr(j, "error.message") && jstr(j, "error.type"), "%s: body %s", bodies[i], r.body);
        json_decref(j);
        hresp_free(&r);
    }
    CHECK(http(s.port, "POST", "/v1/responses", NULL, "{\"input\":{}}", &r) == 0 &&
          r.status == 400);
    hresp_free(&r);
    CHECK(http(s.port, "POST", "/v1/completions", NULL, "{\"prompt\":\"\"}", &r) == 0 &&
          r.status == 400);
    hresp_free(&r);
    /* a prompt longer than the context */
    {
        size_t n = 60000;
        char *big = malloc(n + 100);
        strcpy(big, "{\"prompt\":\"");
        size_t k = strlen(big);
        for (size_t i = 0; i < n - 100; i++)
            big[k++] = i % 5 ? 'a' + (char)(i % 23) : ' ';
        strcpy(big + k, "\"}");
        CHECK(http(s.port, "POST", "/v1/completions", NULL, big, &r) == 0 && r.status == 400);
        CHECK_STR_CONTAINS(r.body, "context holds");
        CHECK_STR_CONTAINS(r.body, "\"code\":\"context_length_exceeded\"");
        CHECK_STR_CONTAINS(r.body, "the prompt is ");
        hresp_free(&r);
        free(big);
    }
    /* a body over --max-body: 413 with an OpenAI error, before reading it */
    {
        size_t n = 70000;
        char *big = malloc(n + 1);
        memset(big, ' ', n);
        big[0] = '{', big[n - 1] = '}', big[n] = 0;
        int fd = connect_to(s.port, 10);
        char head[256];
        snprintf(
            head, sizeof head,
            "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %zu\r\n\r\n",
            n);
        send_all(fd, head, strlen(head));
        send(fd, big, n, MSG_NOSIGNAL); /* may fail part way: the server answers and closes */
        CHECK(read_resp(fd, &r) == 0 && r.status == 413);
        CHECK_STR_CONTAINS(r.body, "request_too_large");
        hresp_free(&r);
        close(fd);
        free(big);
    }
    /* a chunked body that grows past the limit: the connection is closed */
    {
        int fd = connect_to(s.port, 10);
        const char *h = "POST /v1/chat/completions HTTP/1.1\r\nHost: "
                        "127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n";
        send_all(fd, h, strlen(h));
        char chunk[8200];
        snprintf(chunk, sizeof chunk, "1f40\r\n");
        size_t k = strlen(chunk);
        memset(chunk + k, ' ', 8000);
        memcpy(chunk + k + 8000, "\r\n", 2);
        for (int i = 0; i < 12; i++)
            if (send_all(fd, chunk, k + 8002)) break;
        read_resp(fd, &r);
        CHECKF(r.status == 0 || r.status == 413 || r.status == 400, "chunked: status %d", r.status);
        hresp_free(&r);
        close(fd);
    }
    /* headers over 64 KiB: 431 with an OpenAI error */
    {
        size_t n = 66 * 1024;
        char *hdr = malloc(n + 64);
        strcpy(hdr, "X-Big: ");
        memset(hdr + 7, 'x', n);
        strcpy(hdr + 7 + n, "\r\n");
        CHECK(http(s.port, "POST", "/v1/chat/completions", hdr, "{}", &r) == 0 && r.status == 431);
        CHECK_STR_CONTAINS(r.body, "headers_too_large");
        hresp_free(&r);
        free(hdr);
    }
    /* far over: libmicrohttpd's own 4xx or a closed connection, never a crash */
    {
        size_t n = 300 * 1024;
        char *hdr = malloc(n + 64);
        strcpy(hdr, "X-Big: ");
        memset(hdr + 7, 'x', n);
        strcpy(hdr + 7 + n, "\r\n");
        int fd = connect_to(s.port, 10);
        send_req(fd, "GET", "/health", hdr, NULL);
        read_resp(fd, &r);
        CHECKF(r.status == 0 || (r.status >= 400 && r.status < 500), "big header: status %d",
               r.status);
        hresp_free(&r);
        close(fd);
        free(hdr);
    }
    /* garbage instead of HTTP */
    {
        int fd = connect_to(s.port, 10);
        send_all(fd, "HELLO THERE\r\n\r\n", 15);
        read_resp(fd, &r);
        CHECKF(r.status == 0 || (r.status >= 400 && r.status < 500), "garbage: status %d",
               r.status);
        hresp_free(&r);
        close(fd);
    }
    /* slow / half-open connections: others are served meanwhile, the idle ones are closed after
     * --timeout */
    int slow[4];
    for (int i = 0; i < 4; i++) {
        slow[i] = connect_to(s.port, 10);
        const char *part = i % 2 ? "POST /v1/chat/completions HTTP/1.1\r\nHost: "
                                   "x\r\nContent-Length: 100\r\n\r\n{\"mess"
                                 : "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
        send_all(slow[i], part, strlen(part));
    }
    double t0 = now_s();
    CHECK(http(s.port, "POST", "/v1/chat/completions", NULL,
               "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":3}",
               &r) == 0 &&
          r.status == 200);
    CHECKF(now_s() - t0 < 2, "served in %.2f s beside the slow connections", now_s() - t0);
    hresp_free(&r);
    for (int i = 0; i < 4; i++) {
        char c;
        ssize_t k = recv(slow[i], &c, 1, 0); /* blocks until the server times the connection out */
        CHECKF(k <= 0 || c == 'H', "slow connection %d: got %zd", i, k);
        close(slow[i]);
    }
    CHECKF(now_s() - t0 < 8, "idle connections closed after %.2f s (timeout 2)", now_s() - t0);
    /* after all that, a normal request */
    CHECK(http(s.port, "POST", "/v1/chat/completions", NULL,
               "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":3,\"stream\":"
               "true}",
               &r) == 0 &&
          r.status == 200);
    CHECK_STR_CONTAINS(r.body, "data: [DONE]");
    hresp_free(&r);
    srv_down(&s);
}

static void test_serve_cli(void) {
    char out[16384];
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s serve --help", bin());
    CHECK(t_run(cmd, out, sizeof out) == 0);
    const char *flags[] = {"--host",
                           "--port",
                           "--api-key",
                           "--queue",
                           "--alias",
                           "--max-body",
                           "--max-header",
                           "--timeout",
                           "--max-connections",
                           "--quiet",
                           "--temp",
                           "--ctx-size",
                           "--request-timeout",
                           "--max-connections-per-ip"};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        CHECK_STR_CONTAINS(out, flags[i]);
    snprintf(cmd, sizeof cmd, "%s serve -m x --frobnicate", bin());
    CHECK(t_run(cmd, out, sizeof out) == 2);
    snprintf(cmd, sizeof cmd, "%s serve -m x --port 70000", bin());
    CHECK(t_run(cmd, out, sizeof out) == 2);
    /* without -m it serves the default model; one that cannot be opened is an error */
    snprintf(cmd, sizeof cmd, "PETREL_MODEL=/no/such/model.gguf timeout 20 %s serve --port 0",
             bin());
    CHECK(t_run(cmd, out, sizeof out) == 1);
    snprintf(cmd, sizeof cmd, "timeout 20 %s serve -m /nonexistent.gguf --port 0", bin());
    CHECK(t_run(cmd, out, sizeof out) == 1);
    CHECK_STR_CONTAINS(out, "petrel: ");
}

/* The server as a shell user meets it: curl, non-streaming and streaming. */
static void test_serve_curl(void) {
    static char out[65536];
    if (t_run("command -v curl", NULL, 0)) {
        CHECKF(0, "curl is not installed (Debian: apt-get install curl)");
        return;
    }
    tsrv s;
    if (srv_up_checked(&s, FIX, NULL)) return;
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "curl -sS --max-time 60 http://127.0.0.1:%d/v1/chat/completions -H 'Content-Type: "
             "application/json' "
             "-d "
             "'{\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"}],\"max_tokens\":4,"
             "\"temperature\":0}'",
             s.port);
    CHECK(t_run(cmd, out, sizeof out) == 0);
    json_t *j = json_loads(out, 0, NULL);
    CHECKF(j && jstr(j, "choices.0.message.role") &&
               !strcmp(jstr(j, "choices.0.message.role"), "assistant"),
           "curl chat: %s", out);
    CHECK(j && jint(j, "usage.completion_tokens") == 4);
    json_decref(j);
    snprintf(cmd, sizeof cmd,
             "curl -sS -N --max-time 60 http://127.0.0.1:%d/v1/chat/completions "
             "-d "
             "'{\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"}],\"max_tokens\":4,"
             "\"stream\":true}'",
             s.port);
    CHECK(t_run(cmd, out, sizeof out) == 0);
    CHECK_STR_CONTAINS(out, "data: {");
    CHECK_STR_CONTAINS(out, "chat.completion.chunk");
    CHECK_STR_CONTAINS(out, "data: [DONE]");
    snprintf(cmd, sizeof cmd,
             "curl -sS --max-time 10 http://127.0.0.1:%d/v1/chat/completions -d '{bad json'",
             s.port);
    CHECK(t_run(cmd, out, sizeof out) == 0);
    CHECK_STR_CONTAINS(out, "\"error\"");
    /* the server's log: a line per generation, the stream's written as its [DONE] goes out */
    char *log = NULL;
    for (int i = 0; i < 100; i++) {
        free(log);
        log = t_read_file(s.errfile, NULL);
        if (log && strstr(log, "POST /v1/chat/completions (stream)")) break;
        usleep(20 * 1000);
    }
    CHECK_STR_CONTAINS(log, "petrel: 200 POST /v1/chat/completions: prompt ");
    CHECK_STR_CONTAINS(log, "4 generated, ");
    CHECK_STR_CONTAINS(log, "petrel: 200 POST /v1/chat/completions (stream): prompt ");
    free(log);
    srv_down(&s);
}

/* The pinned clients in tests/serve (the openai SDK, the AI SDK, the Codex CLI): `npm ci` there
 * when its node_modules lacks one (Node 20+ and the npm registry needed once). 0 ready; otherwise
 * the case is failed with the reason (a missing node/npm or a failed install is a FAILURE, not a
 * silent pass) or, with PETREL_SKIP_NODE=1, skipped visibly, and -1 is returned. */
static int node_openai_ready(void) {
    const char *skip = getenv("PETREL_SKIP_NODE");
    if (skip && *skip && strcmp(skip, "0")) {
        t_skip("PETREL_SKIP_NODE is set");
        return -1;
    }
    static char out[65536];
    if (t_run("node -e 'process.exit(+process.versions.node.split(\".\")[0] >= 20 ? 0 : 1)'", out,
              sizeof out)) {
        CHECKF(0,
               "the openai npm client tests need Node 20+ and npm (or set PETREL_SKIP_NODE=1): %s",
               out);
        return -1;
    }
    const char *have = "cd tests/serve/node_modules && test -f openai/package.json && test -f "
                       "ai/package.json && test -f @ai-sdk/openai-compatible/package.json && "
                       "test -f @openai/codex/package.json && test -f puppeteer-core/package.json";
    if (t_run(have, NULL, 0)) {
        /* flock: two test runs at once (e.g. the sanitizer pass) must not install over each other
         */
        int rc = t_run(
            "cd tests/serve && if command -v flock >/dev/null; then L='flock "
            ".npm.lock'; else L=; fi; "
            "(test -f node_modules/@openai/codex/package.json && test -f "
            "node_modules/ai/package.json && test -f node_modules/puppeteer-core/package.json) "
            "|| timeout 300 $L npm ci --no-audit --no-fund",
            out, sizeof out);
        if (rc) {
            CHECKF(0,
                   "npm ci in tests/serve failed (exit %d; the npm registry must be reachable "
                   "once, or set "
                   "PETREL_SKIP_NODE=1): %s",
                   rc, out);
            return -1;
        }
    }
    return 0;
}

/* A node client script of tests/serve run against a server on the fixture (sending a prefill
 * comment after every layer): it must exit 0 and end with its "N checks passed" line. */
static void node_client(const char *script, const char *what) {
    static char out[65536];
    if (node_openai_ready()) return;
    tsrv s;
    /* an SSE comment after every layer of every prompt: the clients must skip them */
    const char *extra[] = {"--sse-keepalive", "0", NULL};
    if (srv_up_checked(&s, FIX, extra)) return;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "timeout 120 node tests/serve/%s http://127.0.0.1:%d/v1", script,
             s.port);
    int rc = t_run(cmd, out, sizeof out);
    CHECKF(rc == 0, "%s (exit %d): %s", what, rc, out);
    CHECK_STR_CONTAINS(out, "checks passed");
    srv_down(&s);
}

/* The official `openai` npm client against the server (tests/serve/openai_client.mjs). */
static void test_serve_openai_node(void) {
    node_client("openai_client.mjs", "openai client");
}

/* Issue 14's contract: every request field that the pinned openai package's types list
 * (tests/serve/fields.mjs walks its .d.ts files) has a row in the README's request-field
 * table, and a live server does what that row says: "used" and "ignored" fields are
 * answered 200, "refused" ones 400 with error.param naming the field (and 200 when null).
 * Each field is sent with a sample value below (merged into a minimal request); a field the
 * types gain in a new version fails here until it is classified and given a sample. */
static const struct {
    const char *field, *apis; /* apis: any of "c" chat, "p" completions, "r" responses */
    const char *sample;       /* JSON object merged into the request */
    const char *bad;          /* NULL, or a value of a used field that is a 400 naming it */
    const char *bad_param;
} FIELD_SAMPLES[] = {
    {"model", "cpr", "{\"model\":\"gpt-4o\"}", NULL, NULL},
    {"messages", "c", "{\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"}]}", NULL, NULL},
    {"prompt", "p", "{\"prompt\":\"Hello\"}", NULL, NULL},
    {"prompt", "r", "{\"prompt\":{\"id\":\"pmpt_1\"}}", NULL, NULL},
    {"input", "r", "{\"input\":\"Hello\"}", NULL, NULL},
    {"instructions", "r", "{\"instructions\":\"Be brief.\"}", NULL, NULL},
    {"stream", "cpr", "{\"stream\":true}", NULL, NULL},
    {"stream_options", "cpr", "{\"stream\":true,\"stream_options\":{\"include_usage\":true}}", NULL,
     NULL},
    {"temperature", "cpr", "{\"temperature\":0.5}", "{\"temperature\":-1}", "temperature"},
    {"top_p", "cpr", "{\"top_p\":0.9}", "{\"top_p\":2}", "top_p"},
    {"presence_penalty", "cp", "{\"presence_penalty\":0.5}", NULL, NULL},
    {"frequency_penalty", "cp", "{\"frequency_penalty\":0.5}", NULL, NULL},
    {"seed", "cp", "{\"seed\":7}", NULL, NULL},
    {"logit_bias", "cp", "{\"logit_bias\":{\"1\":5}}", "{\"logit_bias\":{\"1\":101}}",
     "logit_bias"},
    {"stop", "cp", "{\"stop\":[\"\\n\\n\"]}", NULL, NULL},
    {"max_tokens", "cp", "{\"max_tokens\":3}", "{\"max_tokens\":0}", "max_tokens"},
    {"max_completion_tokens", "c", "{\"max_completion_tokens\":3}", NULL, NULL},
    {"max_output_tokens", "r", "{\"max_output_tokens\":3}", NULL, NULL},
    {"n", "cp", "{\"n\":1}", "{\"n\":2}", "n"},
    {"best_of", "p", "{\"best_of\":1}", "{\"best_of\":2}", "best_of"},
    {"tools", "c",
     "{\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":"
     "\"object\",\"properties\":{}}}}]}",
     NULL, NULL},
    {"tools", "r",
     "{\"tools\":[{\"type\":\"function\",\"name\":\"f\",\"parameters\":{\"type\":\"object\","
     "\"properties\":{}}}]}",
     NULL, NULL},
    {"tool_choice", "c",
     "{\"tool_choice\":\"auto\",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":"
     "\"f\"}}]}",
     NULL, NULL},
    {"tool_choice", "r", "{\"tool_choice\":\"auto\"}", NULL, NULL},
    {"parallel_tool_calls", "cr", "{\"parallel_tool_calls\":false}", NULL, NULL},
    {"reasoning_effort", "c", "{\"reasoning_effort\":\"low\"}", NULL, NULL},
    {"reasoning", "r", "{\"reasoning\":{\"effort\":\"low\",\"summary\":\"auto\"}}", NULL, NULL},
    {"modalities", "c", "{\"modalities\":[\"text\"]}", "{\"modalities\":[\"text\",\"audio\"]}",
     "modalities"},
    {"response_format", "c", "{\"response_format\":{\"type\":\"text\"}}",
     "{\"response_format\":{\"type\":\"yaml\"}}", "response_format"},
    {"text", "r", "{\"text\":{\"format\":{\"type\":\"text\"},\"verbosity\":\"low\"}}",
     "{\"text\":{\"format\":{\"type\":\"json_schema\",\"name\":\"x\",\"schema\":{"
     "\"type\":\"string\",\"pattern\":\"a+\"}}}}",
     "text.format"},
    {"truncation", "r", "{\"truncation\":\"disabled\"}", "{\"truncation\":\"auto\"}", "truncation"},
    {"include", "r", "{\"include\":[\"reasoning.encrypted_content\"]}",
     "{\"include\":[\"message.output_text.logprobs\"]}", "include"},
    {"user", "cpr", "{\"user\":\"u1\"}", NULL, NULL},
    {"safety_identifier", "cpr", "{\"safety_identifier\":\"s1\"}", NULL, NULL},
    {"metadata", "cr", "{\"metadata\":{\"k\":\"v\"}}", NULL, NULL},
    {"store", "cr", "{\"store\":true}", NULL, NULL},
    {"service_tier", "cr", "{\"service_tier\":\"auto\"}", NULL, NULL},
    {"prompt_cache_key", "cr", "{\"prompt_cache_key\":\"k1\"}", NULL, NULL},
    {"prompt_cache_retention", "cr", "{\"prompt_cache_retention\":\"24h\"}", NULL, NULL},
    {"verbosity", "c", "{\"verbosity\":\"low\"}", NULL, NULL},
    {"prediction", "c", "{\"prediction\":{\"type\":\"content\",\"content\":\"Hi\"}}", NULL, NULL},
    {"context_management", "r",
     "{\"context_management\":[{\"type\":\"compaction\",\"compact_threshold\":1000}]}", NULL, NULL},
    {"audio", "c", "{\"audio\":{\"voice\":\"alloy\",\"format\":\"wav\"}}", NULL, NULL},
    {"function_call", "c", "{\"function_call\":\"auto\"}", NULL, NULL},
    {"functions", "c", "{\"functions\":[{\"name\":\"f\"}]}", NULL, NULL},
    {"logprobs", "c", "{\"logprobs\":true}", "{\"logprobs\":1}", "logprobs"},
    {"logprobs", "p", "{\"logprobs\":2}", "{\"logprobs\":6}", "logprobs"},
    {"top_logprobs", "c", "{\"logprobs\":true,\"top_logprobs\":2}", "{\"top_logprobs\":2}",
     "top_logprobs"},
    {"web_search_options", "c", "{\"web_search_options\":{\"search_context_size\":\"low\"}}", NULL,
     NULL},
    {"echo", "p", "{\"echo\":true}", "{\"echo\":true,\"logprobs\":1}", "echo"},
    {"suffix", "p", "{\"suffix\":\"end\"}", NULL, NULL},
    {"background", "r", "{\"background\":true}", NULL, NULL},
    {"conversation", "r", "{\"conversation\":\"conv_1\"}", NULL, NULL},
    {"previous_response_id", "r", "{\"previous_response_id\":\"resp_1\"}", NULL, NULL},
    {"top_k", "cpr", "{\"top_k\":5}", NULL, NULL},
    {"min_p", "cpr", "{\"min_p\":0.1}", NULL, NULL},
    {"repeat_penalty", "cpr", "{\"repeat_penalty\":1.1}", NULL, NULL},
    {"chat_template_kwargs", "cr", "{\"chat_template_kwargs\":{\"enable_thinking\":false}}", NULL,
     NULL},
    {"think", "cr", "{\"think\":false}", NULL, NULL},
    {"client_metadata", "r", "{\"client_metadata\":{\"a\":\"b\"}}", NULL, NULL},
};

/* The README's request-field table: {"field api" -> "used" | "refused" | "ignored"}, api one
 * of chat, completions, responses. NULL when the table is missing. */
static json_t *readme_field_table(void) {
    char *md = t_read_file("README.md", NULL);
    const char *at = md ? strstr(md, "**Request fields.**") : NULL;
    const char *head = at ? strstr(at, "\n| field |") : NULL;
    if (!head) {
        free(md);
        return NULL;
    }
    json_t *t = json_object();
    for (const char *l = strchr(head + 1, '\n'); l && l[1] == '|'; l = strchr(l + 1, '\n')) {
        char row[1024];
        const char *e = strchr(l + 1, '\n');
        snprintf(row, sizeof row, "%.*s", (int)(e ? e - l - 1 : (long)strlen(l + 1)), l + 1);
        char *cols[4] = {0}, *save = NULL;
        char *c = strtok_r(row, "|", &save);
        for (int i = 0; c && i < 4; i++, c = strtok_r(NULL, "|", &save))
            cols[i] = c;
        if (!cols[2] || strstr(cols[0], "---")) continue;
        char outcome[16] = "";
        sscanf(cols[2], " %15s", outcome);
        /* every `name` in the first column, times every endpoint in the second */
        for (char *f = strchr(cols[0], '`'); f; f = strchr(f, '`')) {
            char *fe = strchr(f + 1, '`');
            if (!fe) break;
            char key[128];
            const char *apis[] = {"chat", "completions", "responses"};
            for (int a = 0; a < 3; a++) {
                if (!strstr(cols[1], apis[a])) continue;
                snprintf(key, sizeof key, "%.*s %s", (int)(fe - f - 1), f + 1, apis[a]);
                json_object_set_new(t, key, json_string(outcome));
            }
            f = fe + 1;
        }
    }
    free(md);
    return t;
}

static void test_serve_request_fields(void) {
    static char out[65536];
    if (node_openai_ready()) return;
    CHECK(t_run("timeout 60 node tests/serve/fields.mjs", out, sizeof out) == 0);
    json_t *types = json_loads(out, 0, NULL);
    CHECKF(types && !strcmp(jstr(types, "version") ? jstr(types, "version") : "", "6.30.1"),
           "fields.mjs: %s", out);
    json_t *table = readme_field_table();
    CHECKF(table && json_object_size(table) > 50, "the README's request-field table: %zu rows",
           table ? json_object_size(table) : 0);
    if (!types || !table) {
        json_decref(types);
        json_decref(table);
        return;
    }
    /* every field of the types is in the table */
    const char *apis[] = {"chat", "completions", "responses"};
    int n_types = 0;
    for (int a = 0; a < 3; a++) {
        size_t i;
        json_t *f;
        json_array_foreach(json_object_get(types, apis[a]), i, f) {
            char key[128];
            snprintf(key, sizeof key, "%s %s", json_string_value(f), apis[a]);
            CHECKF(json_object_get(table, key) != NULL,
                   "'%s' (%s) is in the openai types but not in the README's request-field table",
                   json_string_value(f), apis[a]);
            n_types++;
        }
    }
    CHECK(n_types > 70);
    /* every row does on a live server what it says */
    tsrv s;
    if (srv_up(&s, FIX, NULL)) {
        CHECKF(0, "the server did not start (%s)", s.errfile);
        srv_down(&s);
        json_decref(types);
        json_decref(table);
        return;
    }
    const char *paths[] = {"/v1/chat/completions", "/v1/completions", "/v1/responses"};
    const char *bases[] = {
        "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":2}",
        "{\"prompt\":\"Hi\",\"max_tokens\":2}", "{\"input\":\"Hi\",\"max_output_tokens\":2}"};
    const char *key;
    json_t *v;
    int n_sent = 0;
    json_object_foreach(table, key, v) {
        char field[128], api[16];
        if (sscanf(key, "%127s %15s", field, api) != 2) continue;
        int a = !strcmp(api, "chat") ? 0 : !strcmp(api, "completions") ? 1 : 2;
        const char *outcome = json_string_value(v);
        size_t k = 0, n = sizeof FIELD_SAMPLES / sizeof FIELD_SAMPLES[0];
        while (k < n &&
               !(!strcmp(FIELD_SAMPLES[k].field, field) && strchr(FIELD_SAMPLES[k].apis, "cpr"[a])))
            k++;
        CHECKF(k < n, "no sample value for '%s' (%s) in the test", field, api);
        CHECKF(!strcmp(outcome, "used") || !strcmp(outcome, "ignored") ||
                   !strcmp(outcome, "refused"),
               "README: '%s' (%s) is '%s'; expected used, ignored or refused", field, api, outcome);
        if (k == n) continue;
        int refused = !strcmp(outcome, "refused");
        for (int variant = 0; variant < 3; variant++) {
            const char *add = variant == 1 ? FIELD_SAMPLES[k].bad : FIELD_SAMPLES[k].sample;
            if (variant == 1 && !add) continue;
            if (variant == 2 && !refused) continue;
            json_t *body = json_loads(bases[a], 0, NULL);
            json_t *extra = json_loads(add, 0, NULL);
            CHECKF(extra != NULL, "sample for %s: %s", field, add);
            json_object_update(body, extra);
            if (variant == 2) json_object_set_new(body, field, json_null());
            char *req = json_dumps(body, JSON_COMPACT);
            hresp r;
            int ok = http(s.port, "POST", paths[a], NULL, req, &r) == 0;
            /* the sample previous_response_id names no kept response: OpenAI's 404 (a kept one is
             * continued in test_serve_stored_responses) */
            int want = (variant == 0 && refused) || variant == 1                ? 400
                       : variant == 0 && !strcmp(field, "previous_response_id") ? 404
                                                                                : 200;
            const char *param = variant == 1 ? FIELD_SAMPLES[k].bad_param : field;
            json_t *j = ok && want == 400 ? json_loads(r.body, 0, NULL) : NULL;
            const char *got_param = j ? jstr(j, "error.param") : NULL;
            CHECKF(ok && r.status == want &&
                       (want != 400 || (got_param && !strcmp(got_param, param))),
                   "%s %s (README: %s): %d %s", paths[a], req, outcome, ok ? r.status : -1,
                   ok && r.body ? r.body : "");
            n_sent++;
            json_decref(j);
            free(req);
            hresp_free(&r);
            json_decref(extra);
            json_decref(body);
        }
    }
    CHECK(n_sent > 80);
    /* a field in no row is ignored and named in the log line */
    hresp r;
    CHECK(http(s.port, "POST", paths[0], NULL,
               "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":2,"
               "\"max_token\":5,\"mirostat\":2}",
               &r) == 0 &&
          r.status == 200);
    hresp_free(&r);
    char *log = NULL;
    for (int i = 0; i < 100; i++) {
        free(log);
        log = t_read_file(s.errfile, NULL);
        if (log && strstr(log, "ignored unknown fields")) break;
        usleep(20 * 1000);
    }
    CHECK_STR_CONTAINS(log, "; ignored unknown fields: max_token, mirostat\n");
    free(log);
    srv_down(&s);
    json_decref(types);
    json_decref(table);
}

/* A raw request with the Host and other header lines given (send_req always names 127.0.0.1). */
static int http_raw(int port, const char *head, hresp *r) {
    memset(r, 0, sizeof *r);
    int fd = connect_to(port, 30);
    if (fd < 0) return -1;
    int rc = send_all(fd, head, strlen(head)) ? -1 : read_resp(fd, r);
    close(fd);
    return rc;
}

/* Browsers and clients (issue 17 point 6): CORS for allowed origins (preflight 204, the origin
 * echoed), 403 for others; the Host must name the server (DNS rebinding); the key guards every
 * route but /health, in either header; /v1/models tells the context. */
static void test_serve_browsers(void) {
    tsrv s;
    const char *extra[] = {"--api-key",    "k1",        "--cors", "https://app.example",
                           "--allow-host", "mybox.lan", NULL};
    if (srv_up_checked(&s, FIX, extra)) return;
    hresp r;
    /* a preflight from a page on this machine: 204, the headers it asked for allowed */
    CHECK(http(s.port, "OPTIONS", "/v1/chat/completions",
               "Origin: http://localhost:5173\r\nAccess-Control-Request-Method: POST\r\n"
               "Access-Control-Request-Headers: authorization, content-type, x-stainless-os\r\n",
               NULL, &r) == 0 &&
          r.status == 204);
    CHECK_STR_CONTAINS(r.raw, "Access-Control-Allow-Origin: http://localhost:5173\r\n");
    CHECK_STR_CONTAINS(r.raw,
                       "Access-Control-Allow-Headers: authorization, content-type, x-stainless-os");
    CHECK_STR_CONTAINS(r.raw, "Access-Control-Allow-Methods: GET, POST, DELETE, OPTIONS");
    hresp_free(&r);
    /* another site: refused, preflight or not */
    CHECK(http(s.port, "OPTIONS", "/v1/chat/completions", "Origin: https://evil.example\r\n", NULL,
               &r) == 0 &&
          r.status == 403);
    CHECK_STR_CONTAINS(r.body, "origin_not_allowed");
    CHECK(!strstr(r.raw, "Access-Control-Allow-Origin"));
    hresp_free(&r);
    const char *chat = "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":2}";
    CHECK(http(s.port, "POST", "/v1/chat/completions",
               "Origin: https://evil.example\r\nAuthorization: Bearer k1\r\n", chat, &r) == 0 &&
          r.status == 403);
    hresp_free(&r);
    /* a --cors origin, the key in X-Api-Key */
    CHECK(http(s.port, "POST", "/v1/chat/completions",
               "Origin: https://app.example\r\nX-Api-Key: k1\r\n", chat, &r) == 0 &&
          r.status == 200);
    CHECK_STR_CONTAINS(r.raw, "Access-Control-Allow-Origin: https://app.example\r\n");
    hresp_free(&r);
    /* the key guards /models as it does /v1/models */
    CHECK(http(s.port, "GET", "/models", NULL, NULL, &r) == 0 && r.status == 401);
    hresp_free(&r);
    CHECK(http(s.port, "GET", "/models", "X-Api-Key: k1\r\n", NULL, &r) == 0 && r.status == 200);
    hresp_free(&r);
    CHECK(http(s.port, "GET", "/v1/models", "Authorization: Bearer k1\r\n", NULL, &r) == 0 &&
          r.status == 200);
    json_t *j = body_json(&r);
    CHECKF(jint(j, "data.0.meta.n_ctx") > 0 && jint(j, "data.0.meta.n_vocab") > 0 &&
               jint(j, "data.0.meta.n_ctx_train") > 0,
           "models: %s", r.body);
    json_decref(j);
    hresp_free(&r);
    CHECK(http(s.port, "GET", "/health", NULL, NULL, &r) == 0 && r.status == 200);
    hresp_free(&r);
    /* Host: a DNS name the server was not told about is refused; addresses, localhost and
     * --allow-host names are served */
    const struct {
        const char *host;
        int status;
    } hosts[] = {{"evil.example", 403},   {"evil.example:8080", 403}, {"mybox.lan:8080", 200},
                 {"MyBox.lan", 200},      {"192.168.1.5:8080", 200},  {"[fe80::1]:8080", 200},
                 {"localhost:8080", 200}, {"app.localhost", 200}};
    for (size_t i = 0; i < sizeof hosts / sizeof hosts[0]; i++) {
        char head[256];
        snprintf(head, sizeof head, "GET /health HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n",
                 hosts[i].host);
        CHECKF(http_raw(s.port, head, &r) == 0 && r.status == hosts[i].status,
               "Host %s: %d (want %d) %s", hosts[i].host, r.status, hosts[i].status,
               r.body ? r.body : "");
        if (hosts[i].status == 403) CHECK_STR_CONTAINS(r.body, "--allow-host");
        hresp_free(&r);
    }
    srv_down(&s);
}

/* Images (issue 17 point 3): the models are text-only, so an image part becomes a placeholder
 * and the request is served (with a warning header), never a 400 that would fail every later
 * turn of a client that resends its history (Codex). */
static void test_serve_images(void) {
    char err[512];
    oai_req q;
    const char *body = "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":"
                       "\"What is this? \"},{\"type\":\"image_url\",\"image_url\":{\"url\":"
                       "\"data:image/png;base64,iVBORw0KGgo=\"}}]}],\"max_tokens\":3}";
    CHECK(oai_parse_request(OAI_CHAT, body, strlen(body), &q, err, sizeof err) == 0);
    const char *c = json_string_value(json_object_get(json_array_get(q.messages, 0), "content"));
    CHECK_STR_CONTAINS(c, "What is this? [image omitted: this model reads text only]");
    CHECK(q.n_omitted == 1);
    oai_req_free(&q);
    tsrv s;
    if (srv_up_checked(&s, FIX, NULL)) return;
    hresp r;
    CHECK(http(s.port, "POST", "/v1/chat/completions", NULL, body, &r) == 0 && r.status == 200);
    CHECK_STR_CONTAINS(r.raw, "X-Petrel-Warning: 1 image/audio/file part replaced");
    hresp_free(&r);
    /* a Codex-shaped history: the image turn, the answer, and the next turn */
    const char *turn2 =
        "{\"model\":\"m\",\"instructions\":\"You are a coding agent.\",\"stream\":true,"
        "\"max_output_tokens\":4,\"input\":[{\"type\":\"message\",\"role\":\"user\",\"content\":["
        "{\"type\":\"input_text\",\"text\":\"Describe the screenshot\"},{\"type\":"
        "\"input_image\",\"image_url\":\"data:image/png;base64,iVBORw0KGgo=\"}]},{\"type\":"
        "\"message\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"I "
        "cannot see it.\"}]},{\"type\":\"message\",\"role\":\"user\",\"content\":[{\"type\":"
        "\"input_text\",\"text\":\"Then list the files\"}]}]}";
    CHECK(http(s.port, "POST", "/v1/responses", NULL, turn2, &r) == 0 && r.status == 200);
    CHECK_STR_CONTAINS(r.raw, "X-Petrel-Warning: ");
    CHECKF(r.body && (strstr(r.body, "event: response.completed") ||
                      strstr(r.body, "event: response.incomplete")),
           "%s", r.body);
    hresp_free(&r);
    srv_down(&s);
}

/* Stored responses (issue 17 point 4): a kept response is read back by GET, continued by
 * previous_response_id exactly as if the client had resent the history (same prompt tokens; the
 * earlier instructions are not carried over), deleted by DELETE; store:false keeps nothing; an
 * unknown id and another key's id are OpenAI's 404. */
static void test_serve_stored_responses(void) {
    tsrv s;
    const char *extra[] = {"--api-key", "ka", "--api-key", "kb", NULL};
    if (srv_up_checked(&s, FIX, extra)) return;
    const char *ka = "Authorization: Bearer ka\r\n", *kb = "Authorization: Bearer kb\r\n";
    hresp r;
    CHECK(http(s.port, "POST", "/v1/responses", ka,
               "{\"instructions\":\"Be terse.\",\"input\":\"My name is Ada.\","
               "\"max_output_tokens\":3,\"temperature\":0}",
               &r) == 0 &&
          r.status == 200);
    json_t *r1 = body_json(&r);
    hresp_free(&r);
    const char *id1 = jstr(r1, "id");
    CHECKF(id1 && json_is_true(json_object_get(r1, "store")), "first: %s",
           r1 ? json_dumps(r1, 0) : "");
    if (!id1) {
        json_decref(r1);
        srv_down(&s);
        return;
    }
    char path[256];
    snprintf(path, sizeof path, "/v1/responses/%s", id1);
    CHECK(http(s.port, "GET", path, ka, NULL, &r) == 0 && r.status == 200);
    json_t *got = body_json(&r);
    CHECK(json_equal(got, r1));
    json_decref(got);
    hresp_free(&r);
    /* another key cannot see it */
    CHECK(http(s.port, "GET", path, kb, NULL, &r) == 0 && r.status == 404);
    hresp_free(&r);
    /* continued by id ... */
    char req[1024];
    snprintf(req, sizeof req,
             "{\"previous_response_id\":\"%s\",\"input\":\"What is my name?\","
             "\"max_output_tokens\":2,\"temperature\":0}",
             id1);
    CHECK(http(s.port, "POST", "/v1/responses", ka, req, &r) == 0 && r.status == 200);
    json_t *r2 = body_json(&r);
    hresp_free(&r);
    CHECK(jstr(r2, "previous_response_id") && !strcmp(jstr(r2, "previous_response_id"), id1));
    /* ... is the same prompt as the history sent whole (the output items fed back) */
    json_t *whole =
        json_pack("{s:[{s:s, s:s}], s:i, s:f, s:b}", "input", "role", "user", "content",
                  "My name is Ada.", "max_output_tokens", 2, "temperature", 0.0, "store", 0);
    json_t *in = json_object_get(whole, "input");
    json_array_extend(in, json_object_get(r1, "output"));
    json_array_append_new(in,
                          json_pack("{s:s, s:s}", "role", "user", "content", "What is my name?"));
    char *wb = json_dumps(whole, JSON_COMPACT);
    CHECK(http(s.port, "POST", "/v1/responses", ka, wb, &r) == 0 && r.status == 200);
    json_t *r3 = body_json(&r);
    hresp_free(&r);
    CHECKF(jint(r2, "usage.input_tokens") > jint(r1, "usage.input_tokens") &&
               jint(r2, "usage.input_tokens") == jint(r3, "usage.input_tokens"),
           "input tokens: first %ld, by id %ld, whole history %ld", jint(r1, "usage.input_tokens"),
           jint(r2, "usage.input_tokens"), jint(r3, "usage.input_tokens"));
    /* store:false keeps nothing */
    snprintf(path, sizeof path, "/v1/responses/%s", jstr(r3, "id") ? jstr(r3, "id") : "x");
    CHECK(http(s.port, "GET", path, ka, NULL, &r) == 0 && r.status == 404);
    hresp_free(&r);
    /* an unknown id: 404 naming the field */
    CHECK(http(s.port, "POST", "/v1/responses", ka,
               "{\"previous_response_id\":\"resp_nope\",\"input\":\"x\"}", &r) == 0 &&
          r.status == 404);
    json_t *e = body_json(&r);
    CHECK(jstr(e, "error.param") && !strcmp(jstr(e, "error.param"), "previous_response_id"));
    CHECK_STR_CONTAINS(r.body, "previous_response_not_found");
    json_decref(e);
    hresp_free(&r);
    /* ... and another key's id is unknown to this one */
    snprintf(req, sizeof req, "{\"previous_response_id\":\"%s\",\"input\":\"x\"}", id1);
    CHECK(http(s.port, "POST", "/v1/responses", kb, req, &r) == 0 && r.status == 404);
    hresp_free(&r);
    /* DELETE, then it is gone */
    snprintf(path, sizeof path, "/v1/responses/%s", id1);
    CHECK(http(s.port, "DELETE", path, kb, NULL, &r) == 0 && r.status == 404);
    hresp_free(&r);
    CHECK(http(s.port, "DELETE", path, ka, NULL, &r) == 0 && r.status == 200);
    CHECK_STR_CONTAINS(r.body, "\"deleted\":true");
    hresp_free(&r);
    CHECK(http(s.port, "GET", path, ka, NULL, &r) == 0 && r.status == 404);
    hresp_free(&r);
    free(wb);
    json_decref(whole);
    json_decref(r1);
    json_decref(r2);
    json_decref(r3);
    srv_down(&s);
}

/* The id of a special token's text in a fixture's vocabulary, or -1. */
static int special_id(const char *fixture, const char *text) {
    char err[256];
    pt_engine_params ep = {.model_path = t_fixture(fixture), .vocab_only = 1};
    pt_engine *e = pt_engine_open(&ep, err, sizeof err);
    pt_ids ids = {0};
    int id = -1;
    if (e &&
        !pt_tokenize(e, text, strlen(text), PT_TOKENIZE_PARSE_SPECIAL, &ids, err, sizeof err) &&
        ids.n == 1)
        id = (int)ids.v[0];
    pt_ids_free(&ids);
    pt_engine_close(e);
    return id;
}

/* Clean text (issue 17 point 7): a control token that is not the format's reply markup (a turn
 * header the model emits) never reaches content; a stop string never matches inside a control
 * token's text; reasoning_tokens counts nothing for a reasoning block closed at once. */
static void test_serve_clean_text(void) {
    int im_start = special_id(FIX, "<|im_start|>"), think = special_id(FIX, "<think>");
    int glm_close = special_id("glm-dsa-rq2k.gguf", "</think>");
    int glm_assistant = special_id("glm-dsa-rq2k.gguf", "<|assistant|>");
    CHECKF(im_start >= 0 && think >= 0 && glm_close >= 0 && glm_assistant >= 0, "ids %d %d %d %d",
           im_start, think, glm_close, glm_assistant);
    tsrv s;
    if (srv_up_checked(&s, FIX, NULL)) return;
    char req[512];
    hresp r;
    /* a forced turn header: counted as generated, never shown */
    snprintf(req, sizeof req,
             "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":3,"
             "\"logit_bias\":{\"%d\":100}}",
             im_start);
    CHECK(http(s.port, "POST", "/v1/chat/completions", NULL, req, &r) == 0 && r.status == 200);
    json_t *j = body_json(&r);
    CHECKF(jstr(j, "choices.0.message.content") &&
               !strstr(jstr(j, "choices.0.message.content"), "<|im_start|>") &&
               jint(j, "usage.completion_tokens") == 3,
           "%s", r.body);
    json_decref(j);
    hresp_free(&r);
    /* the stream too */
    snprintf(req, sizeof req,
             "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":3,"
             "\"stream\":true,\"logit_bias\":{\"%d\":100}}",
             im_start);
    CHECK(http(s.port, "POST", "/v1/chat/completions", NULL, req, &r) == 0 && r.status == 200);
    CHECKF(r.body && !strstr(r.body, "im_start"), "%s", r.body);
    hresp_free(&r);
    /* a stop string that a shown control token's text contains does not stop */
    snprintf(req, sizeof req,
             "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":3,"
             "\"stop\":[\"<th\"],\"logit_bias\":{\"%d\":100}}",
             think);
    CHECK(http(s.port, "POST", "/v1/chat/completions", NULL, req, &r) == 0 && r.status == 200);
    j = body_json(&r);
    CHECKF(jstr(j, "choices.0.finish_reason") &&
               !strcmp(jstr(j, "choices.0.finish_reason"), "length"),
           "%s", r.body);
    json_decref(j);
    hresp_free(&r);
    srv_down(&s);
    /* GLM opens the reasoning block in the prompt; closing it at once is no reasoning */
    if (srv_up_checked(&s, "glm-dsa-rq2k.gguf", NULL)) return;
    snprintf(req, sizeof req,
             "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":1,"
             "\"chat_template_kwargs\":{\"enable_thinking\":true},\"logit_bias\":{\"%d\":100}}",
             glm_close);
    CHECK(http(s.port, "POST", "/v1/chat/completions", NULL, req, &r) == 0 && r.status == 200);
    j = body_json(&r);
    CHECKF(jint(j, "usage.completion_tokens") == 1 &&
               jint(j, "usage.completion_tokens_details.reasoning_tokens") == 0,
           "%s", r.body);
    json_decref(j);
    hresp_free(&r);
    /* GLM's turn header, forced after the answer began: not in content, streamed or not */
    for (int stream = 0; stream < 2; stream++) {
        snprintf(req, sizeof req,
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":3,"
                 "\"stream\":%s,\"chat_template_kwargs\":{\"enable_thinking\":false},"
                 "\"logit_bias\":{\"%d\":100}}",
                 stream ? "true" : "false", glm_assistant);
        CHECK(http(s.port, "POST", "/v1/chat/completions", NULL, req, &r) == 0 && r.status == 200);
        CHECKF(r.body && !strstr(r.body, "assistant|>"), "%s", r.body);
        hresp_free(&r);
    }
    srv_down(&s);
}

/* Logprobs and echo (issue 17 point 5): each token's log-probability is the log-softmax of the
 * model's logits for that position (checked against the library run directly: the first
 * token's logprob and alternatives), alternatives most likely first, greedy picks the most
 * likely; chat's content entries, completions' legacy arrays, streamed chunks carry the same;
 * echo puts the prompt first. */
static void test_serve_logprobs(void) {
    char err[512];
    const char *prompt = "The capital of France is";
    /* the reference: the model's distribution after the prompt */
    pt_engine_params ep = {.model_path = t_fixture(FIX), .usage_dir = t_usage_dir()};
    pt_engine *e = pt_engine_open(&ep, err, sizeof err);
    CHECKF(e != NULL, "%s", err);
    if (!e) return;
    pt_session *ss = pt_session_new(e, NULL, err, sizeof err);
    pt_ids ids = {0};
    int nv = pt_engine_n_vocab(e), nt = pt_vocab_size(e);
    float *lg = malloc((size_t)nv * sizeof *lg);
    CHECK(ss && lg &&
          !pt_tokenize(e, prompt, strlen(prompt), PT_TOKENIZE_ADD_SPECIAL, &ids, err, sizeof err) &&
          pt_session_sync(ss, ids.v, (int)ids.n, lg, NULL, err, sizeof err) >= 0);
    int best = 0;
    double mx = -INFINITY, sum = 0;
    for (int i = 0; i < nt; i++)
        if (lg[i] > mx) mx = lg[i], best = i;
    for (int i = 0; i < nt; i++)
        sum += exp((double)lg[i] - mx);
    double want = -log(sum); /* the greedy token's logprob */
    tsrv s;
    if (srv_up(&s, FIX, NULL)) {
        CHECKF(0, "the server did not start (%s)", s.errfile);
        srv_down(&s);
        goto out;
    }
    char req[512];
    hresp r;
    snprintf(req, sizeof req,
             "{\"prompt\":\"%s\",\"max_tokens\":4,\"temperature\":0,\"logprobs\":3}", prompt);
    CHECK(http(s.port, "POST", "/v1/completions", NULL, req, &r) == 0 && r.status == 200);
    json_t *j = body_json(&r);
    json_t *lp = json_object_get(json_array_get(json_object_get(j, "choices"), 0), "logprobs");
    json_t *tl = json_object_get(lp, "token_logprobs");
    CHECKF(json_array_size(tl) == 4 && json_array_size(json_object_get(lp, "tokens")) == 4 &&
               json_array_size(json_object_get(lp, "top_logprobs")) == 4 &&
               json_array_size(json_object_get(lp, "text_offset")) == 4,
           "%s", r.body);
    double got = json_number_value(json_array_get(tl, 0));
    CHECKF(fabs(got - want) < 1e-4, "first token logprob %g, the library's %g", got, want);
    /* the tokens are the text */
    pt_buf cat = {0};
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(lp, "tokens"), i, t)
        pt_buf_append(&cat, json_string_value(t), json_string_length(t));
    const char *text = jstr(j, "choices.0.text");
    CHECKF(text && cat.v && !strcmp(cat.v, text), "tokens '%s' text '%s'", cat.v, text);
    pt_buf_free(&cat);
    json_decref(j);
    hresp_free(&r);
    /* chat: entries with bytes and alternatives, most likely first; greedy picks the first */
    CHECK(http(s.port, "POST", "/v1/chat/completions", NULL,
               "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":4,"
               "\"temperature\":0,\"logprobs\":true,\"top_logprobs\":3}",
               &r) == 0 &&
          r.status == 200);
    j = body_json(&r);
    json_t *content = json_object_get(
        json_object_get(json_array_get(json_object_get(j, "choices"), 0), "logprobs"), "content");
    CHECKF(json_array_size(content) == 4, "%s", r.body);
    json_array_foreach(content, i, t) {
        json_t *top = json_object_get(t, "top_logprobs");
        double lp0 = json_number_value(json_object_get(t, "logprob"));
        CHECK(json_array_size(top) == 3 && json_is_array(json_object_get(t, "bytes")) && lp0 <= 0);
        double prev = 0, mass = 0;
        for (size_t k = 0; k < json_array_size(top); k++) {
            double x = json_number_value(json_object_get(json_array_get(top, k), "logprob"));
            CHECK(x <= prev + 1e-9);
            prev = x, mass += exp(x);
        }
        CHECK(mass <= 1 + 1e-5);
        CHECKF(fabs(json_number_value(json_object_get(json_array_get(top, 0), "logprob")) - lp0) <
                   1e-6,
               "greedy token %zu is not the most likely: %s", i, r.body);
    }
    json_decref(j);
    hresp_free(&r);
    /* streamed: the chunks carry as many entries as tokens */
    CHECK(http(s.port, "POST", "/v1/chat/completions", NULL,
               "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":5,"
               "\"stream\":true,\"logprobs\":true}",
               &r) == 0 &&
          r.status == 200);
    int done = 0, n_entries = 0;
    json_t *ev = sse_events(r.body, &done);
    json_array_foreach(ev, i, t) {
        json_t *c = json_object_get(
            json_object_get(json_array_get(json_object_get(t, "choices"), 0), "logprobs"),
            "content");
        n_entries += (int)json_array_size(c);
    }
    CHECKF(n_entries == 5 && done, "%d entries in the stream: %s", n_entries, r.body);
    json_decref(ev);
    hresp_free(&r);
    /* echo: the prompt first */
    snprintf(req, sizeof req, "{\"prompt\":\"%s\",\"max_tokens\":2,\"echo\":true}", prompt);
    CHECK(http(s.port, "POST", "/v1/completions", NULL, req, &r) == 0 && r.status == 200);
    j = body_json(&r);
    text = jstr(j, "choices.0.text");
    CHECKF(text && !strncmp(text, prompt, strlen(prompt)) && strlen(text) > strlen(prompt),
           "echo: %s", r.body);
    json_decref(j);
    hresp_free(&r);
    snprintf(req, sizeof req, "{\"prompt\":\"%s\",\"max_tokens\":2,\"echo\":true,\"stream\":true}",
             prompt);
    CHECK(http(s.port, "POST", "/v1/completions", NULL, req, &r) == 0 && r.status == 200);
    CHECK_STR_CONTAINS(r.body, "\"text\":\"The capital of France is\"");
    hresp_free(&r);
    srv_down(&s);
out:
    (void)best;
    free(lg);
    pt_ids_free(&ids);
    pt_session_free(ss);
    pt_engine_close(e);
}

/* Logprobs against llama.cpp's server on the same model and request (tests/data/logprobs/):
 * the same greedy tokens, the same most likely alternative at each, the sampled tokens'
 * log-probabilities within 0.05 (the engines' float rounding differs). */
static void test_serve_logprobs_llama(void) {
    json_t *ref = json_load_file("tests/data/logprobs/llama-server-completions.json", 0, NULL);
    CHECKF(ref != NULL, "tests/data/logprobs/llama-server-completions.json is missing");
    if (!ref) return;
    char demo[4096];
    snprintf(demo, sizeof demo, "%s/models/petrel-demo-glm.gguf",
             getenv("PWD") ? getenv("PWD") : ".");
    tsrv s;
    if (srv_up(&s, demo, NULL)) {
        CHECKF(0, "the server did not start (%s)", s.errfile);
        srv_down(&s);
        json_decref(ref);
        return;
    }
    hresp r;
    CHECK(http(s.port, "POST", "/v1/completions", NULL,
               "{\"prompt\":\"In the beginning God created\",\"max_tokens\":6,\"temperature\":0,"
               "\"logprobs\":3}",
               &r) == 0 &&
          r.status == 200);
    json_t *j = body_json(&r);
    json_t *lp = json_object_get(json_array_get(json_object_get(j, "choices"), 0), "logprobs");
    json_t *want = json_object_get(
        json_object_get(json_array_get(json_object_get(ref, "choices"), 0), "logprobs"), "content");
    CHECKF(json_array_size(want) == 6 && json_array_size(json_object_get(lp, "tokens")) == 6, "%s",
           r.body);
    double worst = 0;
    for (size_t i = 0; i < json_array_size(want); i++) {
        json_t *w = json_array_get(want, i);
        const char *tok = json_string_value(json_array_get(json_object_get(lp, "tokens"), i));
        double ours = json_number_value(json_array_get(json_object_get(lp, "token_logprobs"), i));
        double theirs = json_number_value(json_object_get(w, "logprob"));
        CHECKF(tok && !strcmp(tok, json_string_value(json_object_get(w, "token"))),
               "token %zu: petrel '%s', llama.cpp '%s'", i, tok ? tok : "",
               json_string_value(json_object_get(w, "token")));
        CHECKF(fabs(ours - theirs) < 0.05, "token %zu: logprob %g vs llama.cpp %g", i, ours,
               theirs);
        if (fabs(ours - theirs) > worst) worst = fabs(ours - theirs);
        /* the most likely alternative: the first of llama.cpp's, the largest of petrel's map */
        const char *best = NULL, *key;
        double bv = -INFINITY;
        json_t *v;
        json_object_foreach(json_array_get(json_object_get(lp, "top_logprobs"), i), key, v) {
            if (json_number_value(v) > bv) bv = json_number_value(v), best = key;
        }
        const char *top0 = json_string_value(
            json_object_get(json_array_get(json_object_get(w, "top_logprobs"), 0), "token"));
        CHECKF(best && top0 && !strcmp(best, top0), "token %zu: most likely '%s' vs '%s'", i,
               best ? best : "", top0 ? top0 : "");
    }
    printf("  logprobs vs llama-server: 6 tokens equal, max |logprob diff| %.4f\n", worst);
    json_decref(j);
    json_decref(ref);
    hresp_free(&r);
    srv_down(&s);
}

/* The Vercel AI SDK (`ai` + `@ai-sdk/openai-compatible`, tests/serve/aisdk_client.mjs). */
static void test_serve_aisdk(void) {
    node_client("aisdk_client.mjs", "AI SDK client");
}

/* A Codex CLI turn (`codex exec`, the pinned @openai/codex) against the demo model with the
 * configuration of examples/codex/ pointed at this server: read-only sandbox, no approvals.
 * Codex's first request is ~12,000 tokens of instructions and tool schemas; the server runs
 * with default flags (the context is the model's own, the KV cache grows as it is used). The
 * turn must complete and its answer print. */
static void test_serve_codex_exec(void) {
    static char out[65536];
    const char *tsan = getenv("PETREL_TSAN");
    if (tsan && !strcmp(tsan, "1")) {
        /* ThreadSanitizer makes the 12,000-token prefill take many minutes; the server's
         * threads are checked by the other serve cases there, the Codex turn by the plain and
         * ASan passes */
        t_skip("the Codex turn's 12,000-token prefill is minutes under ThreadSanitizer");
        return;
    }
    if (node_openai_ready()) return;
    tsrv s;
    const char *const *extra = NULL;
    char demo[4096];
    snprintf(demo, sizeof demo, "%s/models/petrel-demo-glm.gguf",
             getenv("PWD") ? getenv("PWD") : ".");
    if (srv_up_checked(&s, demo, extra)) return;
    char home[512], work[512], cmd[2048];
    snprintf(home, sizeof home, "%s/codex-home", t_tmpdir());
    snprintf(work, sizeof work, "%s/codex-work", t_tmpdir());
    mkdir(home, 0700);
    mkdir(work, 0700);
    /* examples/codex/config.toml with this server's port */
    snprintf(cmd, sizeof cmd,
             "sed 's#http://127.0.0.1:8080/v1#http://127.0.0.1:%d/v1#' examples/codex/config.toml "
             "> %s/config.toml && grep -q '127.0.0.1:%d' %s/config.toml",
             s.port, home, s.port, home);
    CHECK(t_run(cmd, out, sizeof out) == 0);
    snprintf(cmd, sizeof cmd,
             "cd %s && CODEX_HOME=%s timeout 240 %s/tests/serve/node_modules/.bin/codex exec "
             "--skip-git-repo-check -s read-only 'Say hello' </dev/null",
             work, home, getenv("PWD") ? getenv("PWD") : ".");
    double t0 = now_s();
    int rc = t_run(cmd, out, sizeof out);
    CHECKF(rc == 0, "codex exec (exit %d): %s", rc, out);
    CHECK_STR_CONTAINS(out, "provider: petrel");
    CHECK_STR_CONTAINS(out, "tokens used");
    char *log = t_read_file(s.errfile, NULL);
    CHECK_STR_CONTAINS(log, "petrel: 200 POST /v1/responses (stream): prompt ");
    /* the answer as Codex printed it (the line after "codex") */
    const char *a = strstr(out, "\ncodex\n");
    printf("  codex exec: %.1f s; answer: %.120s\n", now_s() - t0, a ? a + 7 : "(none)");
    free(log);
    srv_down(&s);
}

/* The web chat at / in headless Chromium (tests/serve/web_client.mjs, puppeteer-core with
 * Debian's chromium): two turns on the demo model (experts streamed, so the statistics line has
 * the cache), stop, a reload keeps the conversation, HTML in a reply stays text, and a server
 * with --api-key makes the page ask for the key. Screenshots go to build/test-artifacts/web/. */
static void test_serve_web_chat(void) {
    static char out[65536];
    const char *skip = getenv("PETREL_SKIP_BROWSER");
    if (skip && *skip && strcmp(skip, "0")) {
        t_skip("PETREL_SKIP_BROWSER is set");
        return;
    }
    if (node_openai_ready()) return;
    const char *chromium = getenv("CHROMIUM") ? getenv("CHROMIUM") : "/usr/bin/chromium";
    if (access(chromium, X_OK)) {
        CHECKF(0,
               "the web chat test needs Chromium at %s (Debian: apt-get install chromium; or set "
               "CHROMIUM=PATH, or PETREL_SKIP_BROWSER=1)",
               chromium);
        return;
    }
    char demo[4096];
    snprintf(demo, sizeof demo, "%s/models/petrel-demo-glm.gguf",
             getenv("PWD") ? getenv("PWD") : ".");
    tsrv s, k;
    const char *extra[] = {"--expert-slots", "8", NULL};
    const char *keyed[] = {"--api-key", "web-key", NULL};
    int bad = srv_up(&s, demo, extra);
    bad = srv_up(&k, demo, keyed) || bad;
    if (bad) {
        CHECKF(0, "a server did not start (%s, %s)", s.errfile, k.errfile);
        srv_down(&s);
        srv_down(&k);
        return;
    }
    /* the page itself: served without the key, with a strict Content-Security-Policy */
    hresp r;
    CHECK(http(k.port, "GET", "/", NULL, NULL, &r) == 0 && r.status == 200);
    CHECK_STR_CONTAINS(r.raw, "Content-Security-Policy: default-src 'none'; script-src 'self'");
    CHECK_STR_CONTAINS(r.body, "<script src=\"app.js\"></script>");
    hresp_free(&r);
    CHECK(http(k.port, "GET", "/app.js", NULL, NULL, &r) == 0 && r.status == 200);
    CHECK_STR_CONTAINS(r.raw, "Content-Type: text/javascript");
    hresp_free(&r);
    char dir[512], cmd[8192];
    snprintf(dir, sizeof dir, "%s/build/test-artifacts/web", getenv("PWD") ? getenv("PWD") : ".");
    /* the demo's end-of-turn tokens, banned for the answer the test stops */
    char eog[128] = "";
    snprintf(cmd, sizeof cmd,
             "%s tokenize -m %s --parse-special -p '<|user|><|observation|><|endoftext|>' | tr ' ' "
             "','",
             bin(), demo);
    CHECK(t_run(cmd, eog, sizeof eog) == 0 && strlen(eog) > 4);
    eog[strcspn(eog, "\n")] = 0;
    snprintf(
        cmd, sizeof cmd,
        "NO_EOG=%s CHROMIUM=%s timeout 300 node tests/serve/web_client.mjs http://127.0.0.1:%d "
        "%s http://127.0.0.1:%d web-key",
        eog, chromium, s.port, dir, k.port);
    int rc = t_run(cmd, out, sizeof out);
    CHECKF(rc == 0, "web chat (exit %d): %s", rc, out);
    CHECK_STR_CONTAINS(out, "checks passed");
    printf("  web chat: screenshots in %s\n", dir);
    srv_down(&s);
    srv_down(&k);
}

/* A client that half-closes after its request (shutdown(SHUT_WR), as `nc -N` and some proxies
 * do) gets its whole answer, streamed or not; one that closes altogether while it waits in the
 * queue gives its place up at once. */
static void test_serve_half_close(void) {
    tsrv s;
    const char *extra[] = {"--queue", "2", "-c", "4096", NULL};
    if (srv_up_checked(&s, FIX, extra)) return;
    for (int stream = 0; stream < 2; stream++) {
        int fd = connect_to(s.port, 30);
        char req[256];
        snprintf(req, sizeof req,
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"}],\"max_tokens\":6,"
                 "\"stream\":%s}",
                 stream ? "true" : "false");
        CHECK(fd >= 0 && send_req(fd, "POST", "/v1/chat/completions", NULL, req) == 0);
        shutdown(fd, SHUT_WR);
        hresp r;
        CHECK(read_resp(fd, &r) == 0);
        CHECKF(r.status == 200, "half-closed %s: status %d: %s", stream ? "stream" : "request",
               r.status, r.body);
        if (stream) {
            CHECK_STR_CONTAINS(r.body, "data: [DONE]");
        } else {
            json_t *j = body_json(&r);
            CHECKF(jint(j, "usage.completion_tokens") >= 1 && jstr(j, "choices.0.finish_reason") &&
                       strcmp(jstr(j, "choices.0.finish_reason"), "cancelled"),
                   "half-closed: %s", r.body);
            json_decref(j);
        }
        hresp_free(&r);
        close(fd);
    }
    json_t *h = NULL;
    CHECK(wait_idle(s.port, 10, &h) == 0);
    CHECKF(jint(h, "cancelled") == 0, "health %s", h ? json_dumps(h, 0) : "");
    json_decref(h);
    /* a queued client that leaves: its slot is free while the first still generates */
    int a = start_long_stream(s.port, 3000);
    char buf[256];
    CHECK(a >= 0 && recv(a, buf, sizeof buf, 0) > 0);
    int b = start_long_stream(s.port, 3000);
    double t0 = now_s();
    long waiting = -1;
    while (waiting != 1 && now_s() - t0 < 5) {
        hresp r;
        if (!http(s.port, "GET", "/health", NULL, NULL, &r)) {
            json_t *j = body_json(&r);
            waiting = jint(j, "waiting");
            json_decref(j);
        }
        hresp_free(&r);
    }
    CHECK(waiting == 1);
    close(b);
    t0 = now_s();
    while (waiting != 0 && now_s() - t0 < 5) {
        hresp r;
        if (!http(s.port, "GET", "/health", NULL, NULL, &r)) {
            json_t *j = body_json(&r);
            waiting = jint(j, "waiting");
            CHECK(json_is_true(json_object_get(j, "busy"))); /* a still generates */
            json_decref(j);
        }
        hresp_free(&r);
        usleep(20 * 1000);
    }
    CHECKF(waiting == 0, "the queued request whose client left still waits after %.2f s",
           now_s() - t0);
    fprintf(stderr, "  queue: a departed client's slot freed %.3f s after it left\n", now_s() - t0);
    close(a);
    CHECK(wait_idle(s.port, 10, NULL) == 0);
    srv_down(&s);
}

/* SIGTERM while a stream runs: the stream ends with an error event (and [DONE]), never with a
 * finish_reason "stop" that would pass the cut answer off as complete; the server exits 0. */
static void test_serve_shutdown_stream(void) {
    tsrv s;
    const char *extra[] = {"-c", "4096", NULL};
    if (srv_up_checked(&s, FIX, extra)) return;
    int fd = start_long_stream(s.port, 3500);
    char buf[256];
    CHECK(fd >= 0 && recv(fd, buf, sizeof buf, MSG_PEEK) > 0);
    kill(s.pid, SIGTERM);
    hresp r;
    CHECK(read_resp(fd, &r) == 0 && r.status == 200);
    CHECKF(r.body && strstr(r.body, "\"error\"") && strstr(r.body, "shutting down"),
           "the cut stream: %s", r.body ? r.body + (r.n > 400 ? r.n - 400 : 0) : "");
    CHECKF(r.body && !strstr(r.body, "\"finish_reason\":\"stop\""),
           "a stream cut by SIGTERM ended with finish_reason stop");
    hresp_free(&r);
    close(fd);
    srv_down(&s);
}

/* SIGTERM while a streamed prompt of ~3,000 tokens is evaluated (its first comment came before
 * the prefill; the prefill takes seconds, the server notices the signal within 0.1 s): the
 * prefill stops between chunks instead of running to its end, the stream ends with an error
 * event saying so, and the server exits 0. */
static void test_serve_shutdown_during_prefill(void) {
    tsrv s;
    const char *extra[] = {"-c", "8192", "-b", "16", NULL};
    if (srv_up_checked(&s, FIX, extra)) return;
    const char *line = "Solid state drives keep data in flash cells. ";
    size_t cap = 200 * strlen(line) + 512;
    char *req = malloc(cap);
    int k = snprintf(req, cap, "{\"messages\":[{\"role\":\"user\",\"content\":\"");
    for (int i = 0; i < 130; i++)
        k += snprintf(req + k, cap - (size_t)k, "%s", line);
    snprintf(req + k, cap - (size_t)k, "\"}],\"max_tokens\":4,\"stream\":true}");
    int fd = connect_to(s.port, 30);
    CHECK(fd >= 0 && send_req(fd, "POST", "/v1/chat/completions", NULL, req) == 0);
    free(req);
    char buf[256];
    CHECK(fd >= 0 && recv(fd, buf, sizeof buf, MSG_PEEK) > 0); /* the headers, before the prefill */
    kill(s.pid, SIGTERM);
    hresp r;
    CHECK(read_resp(fd, &r) == 0 && r.status == 200);
    CHECKF(r.body && !strncmp(r.body, ": prefill 0/", 12) &&
               strstr(r.body, "the server is shutting down; the prompt's evaluation stopped") &&
               strstr(r.body, "data: [DONE]") && !strstr(r.body, "\"finish_reason\":\"stop\""),
           "the stream: %s", r.body ? r.body : "");
    hresp_free(&r);
    if (fd >= 0) close(fd);
    srv_down(&s);
}

/* `--api-key ""` (an unset variable) and an empty PETREL_API_KEY are errors (exit 2), not a
 * server without authentication. */
static void test_serve_api_key_empty(void) {
    char out[8192], cmd[4096];
    snprintf(cmd, sizeof cmd, "timeout 20 %s serve -m %s --port 0 -t 1 --api-key ''", bin(),
             t_fixture(FIX));
    CHECK(t_run(cmd, out, sizeof out) == 2);
    CHECK_STR_CONTAINS(out, "--api-key is empty");
    snprintf(cmd, sizeof cmd, "PETREL_API_KEY= timeout 20 %s serve -m %s --port 0 -t 1", bin(),
             t_fixture(FIX));
    CHECK(t_run(cmd, out, sizeof out) == 2);
    CHECK_STR_CONTAINS(out, "PETREL_API_KEY is set but empty");
}

/* Prefix reuse is per API key: a second key sending the same prompt sees cached_tokens 0 (it
 * cannot probe the first key's prompt), while a key's own repeat is reused. */
static void test_serve_tenants(void) {
    tsrv s;
    const char *extra[] = {"--api-key", "alice-key", "--api-key", "bob-key", NULL};
    if (srv_up_checked(&s, FIX, extra)) return;
    const char *req = "{\"messages\":[{\"role\":\"user\",\"content\":\"My secret plan is to "
                      "paint the fence blue on Tuesday\"}],\"max_tokens\":1,\"temperature\":0}";
    const char *who[] = {"alice", "alice", "bob", "bob", "alice"};
    long cached[5];
    for (int i = 0; i < 5; i++) {
        char hdr[128];
        snprintf(hdr, sizeof hdr, "Authorization: Bearer %s-key\r\n", who[i]);
        hresp r;
        CHECK(http(s.port, "POST", "/v1/chat/completions", hdr, req, &r) == 0 && r.status == 200);
        json_t *j = body_json(&r);
        cached[i] = jint(j, "usage.prompt_tokens_details.cached_tokens");
        json_decref(j);
        hresp_free(&r);
    }
    fprintf(stderr, "  tenants: cached_tokens alice %ld, alice %ld, bob %ld, bob %ld, alice %ld\n",
            cached[0], cached[1], cached[2], cached[3], cached[4]);
    CHECK(cached[0] <= 0);
    CHECKF(cached[1] > 0, "a key's own repeat reused %ld", cached[1]);
    CHECKF(cached[2] <= 0, "bob's guess of alice's prompt matched %ld tokens", cached[2]);
    CHECK(cached[3] > 0);
    CHECKF(cached[4] <= 0, "alice's request after bob's reused %ld of bob's tokens", cached[4]);
    srv_down(&s);
}

/* A prompt the context could never hold is refused before it is read or tokenized: a body past
 * the cap the context implies gets 413 naming the limit; a smaller one whose text alone needs
 * more tokens than the context holds gets 400 at once (no tokenizing). Both are timed. */
static void test_serve_context_cap(void) {
    tsrv s;
    const char *extra[] = {"-c", "512", NULL};
    if (srv_up_checked(&s, FIX, extra)) return;
    size_t n = 15u << 20;
    char *big = malloc(n + 64);
    strcpy(big, "{\"prompt\":\"");
    size_t k = strlen(big);
    for (; k < n - 2; k++)
        big[k] = (char)('a' + k % 23);
    strcpy(big + k, "\"}");
    hresp r;
    double t0 = now_s();
    int fd = connect_to(s.port, 10);
    char head[256];
    snprintf(head, sizeof head,
             "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %zu\r\n\r\n", n);
    send_all(fd, head, strlen(head));
    send(fd, big, n, MSG_NOSIGNAL); /* may fail part way: the server answers and closes */
    CHECK(read_resp(fd, &r) == 0 && r.status == 413);
    double dt413 = now_s() - t0;
    CHECK_STR_CONTAINS(r.body, "could ever hold");
    CHECK_STR_CONTAINS(r.body, "512 tokens");
    fprintf(stderr, "  15 MiB prompt: %d in %.3f s: %s\n", r.status, dt413, r.body);
    hresp_free(&r);
    close(fd);
    /* 1 MB of text: under the byte cap, but at least 1e6 / (longest token) tokens */
    big[1000000 + 11] = 0;
    strcat(big, "\"}");
    t0 = now_s();
    CHECK(http(s.port, "POST", "/v1/completions", NULL, big, &r) == 0 && r.status == 400);
    double dt400 = now_s() - t0;
    CHECK_STR_CONTAINS(r.body, "context_length_exceeded");
    CHECK_STR_CONTAINS(r.body, "context holds 512");
    fprintf(stderr, "  1 MB prompt: %d in %.3f s: %s\n", r.status, dt400, r.body);
    CHECKF(dt413 < 2 && dt400 < 2, "refusals took %.2f s and %.2f s", dt413, dt400);
    hresp_free(&r);
    /* the same in chat messages */
    char *chat = malloc(1000100);
    snprintf(chat, 1000100, "{\"messages\":[{\"role\":\"user\",\"content\":\"%.1000000s\"}]}",
             big + 11);
    CHECK(http(s.port, "POST", "/v1/chat/completions", NULL, chat, &r) == 0 && r.status == 400);
    CHECK_STR_CONTAINS(r.body, "context_length_exceeded");
    hresp_free(&r);
    free(chat);
    free(big);
    /* and a prompt that fits is still answered */
    CHECK(http(s.port, "POST", "/v1/completions", NULL, "{\"prompt\":\"Hello\",\"max_tokens\":2}",
               &r) == 0 &&
          r.status == 200);
    hresp_free(&r);
    srv_down(&s);
}

/* `petrel inspect` prints a model's strings escaped: a general.name carrying a terminal escape
 * (ESC [31m, BEL) shows as \x1b[31m\x07, and no control byte reaches the terminal. */
static void test_serve_inspect_escapes(void) {
    size_t n = 0;
    char *d = t_read_file(t_fixture(FIX), &n);
    const char *name = "Qwen3-30B-A3B tiny fixture";
    char *at = d ? memmem(d, n, name, strlen(name)) : NULL;
    if (!at) {
        CHECKF(0, "no general.name '%s' in %s", name, FIX);
        free(d);
        return;
    }
    memcpy(at, "\x1b[31m\x07", 6); /* same length: the file stays valid */
    char path[512];
    snprintf(path, sizeof path, "%s/evil_name.gguf", t_tmpdir());
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(d, 1, n, f) == n);
    if (f) fclose(f);
    free(d);
    static char out[65536];
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s inspect %s", bin(), path);
    CHECK(t_run(cmd, out, sizeof out) == 0);
    CHECK_STR_CONTAINS(out, "name            \\x1b[31m\\x0730B-A3B tiny fixture");
    int ctl = 0;
    for (const char *c = out; *c; c++)
        ctl |= (unsigned char)*c < 0x20 && *c != '\n';
    CHECKF(!ctl, "a control byte reached the output: %s", out);
    snprintf(cmd, sizeof cmd, "%s inspect --json %s", bin(), path);
    CHECK(t_run(cmd, out, sizeof out) == 0);
    CHECK_STR_CONTAINS(out, "\\u001B[31m\\u0007");
}

/* ===== Hostile clients ===== */

/* A slowloris attacker: N sockets from source addresses 127.0.0.2.. (bound before connect), each
 * sending a request's head a byte per second and never finishing it; a socket the server closes
 * is reopened (250 ms later) until `stop`. Loopback only. */
typedef struct loris {
    int port, n, n_addrs;
    int stop; /* atomic: set by the test, read by the thread */
    long opened, closed_by_server;
} loris;

static int loris_connect(const loris *l, int i) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (fd < 0) return -1;
    struct sockaddr_in src = {.sin_family = AF_INET};
    char ip[32];
    snprintf(ip, sizeof ip, "127.0.0.%d", 2 + i % l->n_addrs);
    inet_pton(AF_INET, ip, &src.sin_addr);
    struct sockaddr_in dst = {.sin_family = AF_INET, .sin_port = htons((uint16_t)l->port)};
    inet_pton(AF_INET, "127.0.0.1", &dst.sin_addr);
    if (bind(fd, (struct sockaddr *)&src, sizeof src) ||
        (connect(fd, (struct sockaddr *)&dst, sizeof dst) && errno != EINPROGRESS)) {
        close(fd);
        return -1;
    }
    return fd;
}

static void *loris_main(void *arg) {
    loris *l = arg;
    int fd[256];
    double next[256], reopen[256];
    const char *head = "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
    size_t sent[256];
    for (int i = 0; i < l->n; i++)
        fd[i] = -1, reopen[i] = 0, next[i] = 0, sent[i] = 0;
    while (!__atomic_load_n(&l->stop, __ATOMIC_RELAXED)) {
        double t = now_s();
        for (int i = 0; i < l->n; i++) {
            if (fd[i] < 0) {
                if (t < reopen[i]) continue;
                fd[i] = loris_connect(l, i);
                reopen[i] = t + 0.25;
                sent[i] = 0, next[i] = t;
                if (fd[i] >= 0) l->opened++;
                continue;
            }
            char c;
            ssize_t k = recv(fd[i], &c, 1, MSG_DONTWAIT);
            if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != ENOTCONN)) {
                close(fd[i]), fd[i] = -1, reopen[i] = t + 0.25;
                l->closed_by_server++;
                continue;
            }
            if (t >= next[i]) { /* one byte a second: the head, then header bytes forever */
                char b = sent[i] < strlen(head) ? head[sent[i]] : 'a';
                if (send(fd[i], &b, 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1) sent[i]++;
                next[i] = t + 1;
            }
        }
        usleep(20 * 1000);
    }
    for (int i = 0; i < l->n; i++)
        if (fd[i] >= 0) close(fd[i]);
    return NULL;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* 200 slow senders from 8 loopback addresses for PETREL_SLOWLORIS_SECONDS (default 15) while a
 * normal client on 127.0.0.1 alternates GET /health and a short chat completion: every one of its
 * requests must be answered, none slower than 5 s. Its latency figures are printed. */
static void test_serve_slowloris(void) {
    const char *e = getenv("PETREL_SLOWLORIS_SECONDS");
    double dur = e && atof(e) > 0 ? atof(e) : 15;
    if (dur > 600) dur = 600;
    int probe = loris_connect(&(loris){.port = 9, .n_addrs = 1}, 0);
    if (probe < 0) {
        t_skip("cannot bind 127.0.0.2 as a source address");
        return;
    }
    close(probe);
    tsrv s;
    const char *extra[] = {"--request-timeout", "5", NULL};
    if (srv_up_checked(&s, FIX, extra)) return;
    loris l = {.port = s.port, .n = 200, .n_addrs = 8};
    pthread_t th;
    pthread_create(&th, NULL, loris_main, &l);
    usleep(2500 * 1000); /* let the attackers take every slot they can */
    enum { MAXR = 20000 };
    static double lat[MAXR];
    int n = 0, failed = 0;
    double worst = 0, t0 = now_s();
    char why[256] = "";
    while (now_s() - t0 < dur && n < MAXR) {
        hresp r;
        double a = now_s();
        int rc = n % 2 ? http(s.port, "POST", "/v1/chat/completions", NULL,
                              "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                              "\"max_tokens\":2}",
                              &r)
                       : http(s.port, "GET", "/health", NULL, NULL, &r);
        double d = now_s() - a;
        if (rc || r.status != 200) {
            if (!failed) snprintf(why, sizeof why, "request %d: rc %d status %d", n, rc, r.status);
            failed++;
        }
        hresp_free(&r);
        lat[n++] = d;
        if (d > worst) worst = d;
        usleep(100 * 1000);
    }
    json_t *h = NULL;
    hresp r;
    if (!http(s.port, "GET", "/health", NULL, NULL, &r)) h = body_json(&r);
    hresp_free(&r);
    __atomic_store_n(&l.stop, 1, __ATOMIC_RELAXED);
    pthread_join(th, NULL);
    qsort(lat, (size_t)n, sizeof lat[0], cmp_double);
    fprintf(stderr,
            "  slowloris %.0f s: 200 slow connections from 8 addresses (%ld opened, %ld cut by the "
            "server); normal client: %d requests, %d failed, latency median %.1f ms, p95 %.1f ms, "
            "max %.1f ms; server: %ld timed out, %ld refused\n",
            dur, l.opened, l.closed_by_server, n, failed, n ? lat[n / 2] * 1e3 : 0,
            n ? lat[(int)(n * 0.95)] * 1e3 : 0, worst * 1e3, jint(h, "connections.timed_out"),
            jint(h, "connections.refused"));
    CHECKF(failed == 0, "the normal client was refused or starved: %d of %d failed (%s)", failed, n,
           why);
    CHECKF(worst < 5, "the normal client waited %.2f s", worst);
    CHECK(n >= 10);
    CHECKF(l.closed_by_server > 0 && jint(h, "connections.timed_out") > 0,
           "slow senders were never cut off");
    json_decref(h);
    srv_down(&s);
}

/* ===== A 12,000-token agent request with default flags =====
 * Shaped like Codex's first request: a long instructions text (the system
 * message), tool definitions, a short user turn. Every fixture model answers
 * it with the server's default flags: the default context is the model's
 * training context (within the KV share), paid for as it is filled. */
static char *agent_request(int max_tokens) {
    static const char *const rules[] = {
        "You are a coding agent running in a terminal on the user's computer.",
        "Read files before you change them, and keep every change small and reviewable.",
        "When a command fails, read its output, explain the cause and try a different approach.",
        "Never run destructive commands such as rm -rf or git reset --hard unless asked to.",
        "Prefer the apply_patch tool for edits; show diffs in unified format with context lines.",
        "Use update_plan to keep a short list of steps, marking each one done when finished.",
        "Answer in plain text with short paragraphs; put file paths and commands in backticks.",
        "Tests are run with make test; formatting with make format; both must pass before done.",
        "Respect the sandbox: network access is disabled and writes stay inside the workspace.",
        "If instructions conflict, the user's latest message wins over earlier guidance."};
    static char sys[40000];
    size_t len = 0;
    for (int i = 0; len < 36000; i++)
        len += (size_t)snprintf(sys + len, sizeof sys - len, "%d. %s ", i + 1, rules[i % 10]);
    json_t *tools =
        json_pack("[{s:s, s:{s:s, s:s, s:{s:s, s:{s:{s:s, s:{s:s}}, s:{s:s}}, s:[s]}}},"
                  " {s:s, s:{s:s, s:s, s:{s:s, s:{s:{s:s}}, s:[s]}}},"
                  " {s:s, s:{s:s, s:s, s:{s:s, s:{s:{s:s}}, s:[s]}}}]",
                  "type", "function", "function", "name", "shell", "description",
                  "Runs a shell command and returns its output.", "parameters", "type", "object",
                  "properties", "command", "type", "array", "items", "type", "string", "workdir",
                  "type", "string", "required", "command", "type", "function", "function", "name",
                  "apply_patch", "description", "Applies a patch to files in the workspace.",
                  "parameters", "type", "object", "properties", "input", "type", "string",
                  "required", "input", "type", "function", "function", "name", "update_plan",
                  "description", "Updates the task plan shown to the user.", "parameters", "type",
                  "object", "properties", "plan", "type", "string", "required", "plan");
    json_t *req = json_pack("{s:[{s:s, s:s%}, {s:s, s:s}], s:o, s:i, s:f}", "messages", "role",
                            "system", "content", sys, len, "role", "user", "content",
                            "List the files in this repository and summarise the README.", "tools",
                            tools, "max_tokens", max_tokens, "temperature", 0.0);
    char *body = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    return body;
}

/* Minutes per model on two shared cores (a 12k prefill of the fixtures), so
 * it runs in `make test-full` (PETREL_TEST_FULL=1) and is a named skip in the
 * suite: every fixture family and the demo model. */
static void test_serve_agent_12k(void) {
    if (!getenv("PETREL_TEST_FULL") || strcmp(getenv("PETREL_TEST_FULL"), "1")) {
        t_skip("the 12,000-token agent request runs in make test-full (minutes per model)");
        return;
    }
    char demo[4200], cwd[4096];
    snprintf(demo, sizeof demo, "%s/models/petrel-demo-glm.gguf",
             getcwd(cwd, sizeof cwd) ? cwd : ".");
    const char *const models[] = {demo, "qwen3moe-q4_k_m.gguf", "gemma4-q4_k_m.gguf",
                                  "deepseek2-q8_0.gguf", "glm-dsa-rq2k.gguf"};
    const size_t n_models = sizeof models / sizeof models[0];
    char *body = agent_request(4);
    http_timeout = 1500;
    for (size_t i = 0; i < n_models; i++) {
        tsrv s;
        CHECKF(srv_up(&s, models[i], NULL) == 0, "%s: the server did not start", models[i]);
        if (!s.port) continue;
        hresp r;
        const double t0 = now_s();
        CHECK(http(s.port, "POST", "/v1/chat/completions", NULL, body, &r) == 0);
        const double dt = now_s() - t0;
        json_t *j = json_loads(r.body ? r.body : "", 0, NULL);
        json_t *u = json_object_get(j, "usage");
        const int n_prompt = (int)json_integer_value(json_object_get(u, "prompt_tokens"));
        CHECKF(r.status == 200 && n_prompt >= 12000, "%s: status %d, %d prompt tokens: %.300s",
               models[i], r.status, n_prompt, r.body ? r.body : "");
        char *e = t_read_file(s.errfile, NULL);
        const char *plan = e ? strstr(e, "context ") : NULL;
        fprintf(stderr, "  %s: %d prompt tokens answered in %.1f s (%.0f tokens/s); %.*s\n",
                models[i], n_prompt, dt, n_prompt / dt,
                plan ? (int)(strchr(plan, ')') - plan + 1) : 0, plan ? plan : "");
        free(e);
        json_decref(j);
        hresp_free(&r);
        srv_down(&s);
    }
    http_timeout = 30;
    free(body);
}

/* ===== Prefixes that survive a restart =====
 * Two server processes, one --cache-dir: the second answers the first's request with the
 * stored prefix (cached_tokens > 0) and the same greedy answer, for the key that stored it
 * only. glm-dsa drafts with its MTP head by default: the restore carries its MTP rows. */
static char *long_chat(const char *user) {
    static char sys[8000];
    size_t len = 0;
    for (int i = 0; len < 3000; i++)
        len += (size_t)snprintf(sys + len, sizeof sys - len,
                                "Rule %d: read files before changing them and keep edits small. ",
                                i + 1);
    json_t *req =
        json_pack("{s:[{s:s, s:s}, {s:s, s:s}], s:i, s:f}", "messages", "role", "system", "content",
                  sys, "role", "user", "content", user, "max_tokens", 4, "temperature", 0.0);
    char *body = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    return body;
}

static void test_serve_prefix_cache_restart(void) {
    char dir[4400];
    snprintf(dir, sizeof dir, "%s/kv", t_tmpdir());
    const char *const extra[] = {"--cache-dir", dir,     "--api-key", "key-a",
                                 "--api-key",   "key-b", NULL};
    char *body = long_chat("Summarise the rules.");
    char *answer = NULL;
    long prompt = 0, restored = -1;
    http_timeout = 300; /* a 600-token prefill takes 30-60 s under ThreadSanitizer at load */
    for (int run = 0; run < 2; run++) {
        tsrv s;
        if (srv_up_checked(&s, "glm-dsa-rq2k.gguf", extra)) break;
        hresp r;
        CHECK(http(s.port, "POST", "/v1/chat/completions", "Authorization: Bearer key-a\r\n", body,
                   &r) == 0 &&
              r.status == 200);
        json_t *j = body_json(&r);
        const char *c = jstr(j, "choices.0.message.content");
        const long cached = jint(j, "usage.prompt_tokens_details.cached_tokens");
        if (run == 0) {
            prompt = jint(j, "usage.prompt_tokens");
            answer = strdup(c ? c : "");
            CHECKF(prompt > 520 && cached == 0, "prompt %ld, cached %ld", prompt, cached);
        } else {
            /* two blocks stored; the MTP head's restore gives one position less */
            CHECKF(cached >= 2 * 256 - 1 && cached < prompt, "after a restart: cached %ld of %ld",
                   cached, prompt);
            CHECKF(c && !strcmp(c, answer), "answer after a restore: '%s', fresh: '%s'", c, answer);
            restored = cached;
        }
        json_decref(j);
        hresp_free(&r);
        if (run == 1) { /* another key's entries are its own */
            CHECK(http(s.port, "POST", "/v1/chat/completions", "Authorization: Bearer key-b\r\n",
                       body, &r) == 0 &&
                  r.status == 200);
            j = body_json(&r);
            CHECKF(jint(j, "usage.prompt_tokens_details.cached_tokens") == 0,
                   "key-b reused key-a's prefix");
            json_decref(j);
            hresp_free(&r);
        }
        srv_down(&s);
        if (run == 1 && restored > 0) { /* the log line says where the hits came from */
            char *log = t_read_file(s.errfile, NULL), want[96];
            snprintf(want, sizeof want, "prefix hits %ld (%ld from disk)", restored, restored);
            CHECK_STR_CONTAINS(log, want);
            free(log);
        }
    }
    http_timeout = 30;
    free(answer);
    free(body);
}

/* A full disk while the prefix is stored (RLIMIT_FSIZE, inherited by the server: its block
 * writes fail with EFBIG as a full disk's with ENOSPC): one warning, caching stops, the answer
 * comes. */
static void test_serve_prefix_cache_full_disk(void) {
    char dir[4400];
    snprintf(dir, sizeof dir, "%s/kv", t_tmpdir());
    const char *const extra[] = {"--cache-dir", dir, NULL};
    char *body = long_chat("Summarise the rules.");
    http_timeout = 300;       /* as in test_serve_prefix_cache_restart: ThreadSanitizer is slow */
    signal(SIGXFSZ, SIG_IGN); /* kept across exec: a write past the limit fails instead */
    const struct rlimit rl = {64 * 1024, 64 * 1024};
    CHECK(setrlimit(RLIMIT_FSIZE, &rl) == 0);
    tsrv s;
    if (!srv_up_checked(&s, "glm-dsa-rq2k.gguf", extra)) {
        for (int i = 0; i < 2; i++) {
            hresp r;
            CHECK(http(s.port, "POST", "/v1/chat/completions", NULL, body, &r) == 0 &&
                  r.status == 200);
            json_t *j = body_json(&r);
            CHECK(jstr(j, "choices.0.message.content") != NULL);
            json_decref(j);
            hresp_free(&r);
        }
        char *e = t_read_file(s.errfile, NULL);
        int warnings = 0;
        for (const char *p = e; p && (p = strstr(p, "no more prefixes are stored")); p++)
            warnings++;
        CHECKF(warnings == 1, "%d warnings: %s", warnings, e ? e : "");
        free(e);
        srv_down(&s);
    }
    http_timeout = 30;
    free(body);
}

T_SUITE(serve) {
    T_ADD(test_serve_prefix_cache_restart);
    T_ADD(test_serve_prefix_cache_full_disk);
    T_ADD_TIMEOUT(test_serve_agent_12k, 3600);
    T_ADD(test_serve_request_parsing);
    T_ADD(test_serve_validation);
    T_ADD(test_serve_logit_bias);
    T_ADD(test_serve_tool_mapping);
    T_ADD(test_serve_cli);
    T_ADD(test_serve_loading);
    T_ADD(test_serve_basic);
    T_ADD(test_serve_stream);
    T_ADD(test_serve_stream_prefill_comments);
    T_ADD(test_serve_stream_error_after_headers);
    T_ADD(test_serve_responses);
    T_ADD(test_serve_reasoning);
    T_ADD(test_serve_tools_http);
    T_ADD(test_serve_api_key);
    T_ADD(test_serve_queue_429);
    T_ADD(test_serve_cancel);
    T_ADD(test_serve_malformed);
    T_ADD(test_serve_curl);
    T_ADD(test_serve_openai_node);
    T_ADD(test_serve_request_fields);
    T_ADD(test_serve_browsers);
    T_ADD(test_serve_images);
    T_ADD(test_serve_stored_responses);
    T_ADD(test_serve_clean_text);
    T_ADD(test_serve_logprobs);
    T_ADD(test_serve_logprobs_llama);
    T_ADD(test_serve_aisdk);
    T_ADD_TIMEOUT(test_serve_codex_exec, 400);
    T_ADD_TIMEOUT(test_serve_web_chat, 400);
    T_ADD(test_serve_half_close);
    T_ADD(test_serve_api_key_empty);
    T_ADD(test_serve_tenants);
    T_ADD(test_serve_context_cap);
    T_ADD(test_serve_inspect_escapes);
    T_ADD(test_serve_shutdown_stream);
    T_ADD(test_serve_shutdown_during_prefill);
    T_ADD_TIMEOUT(test_serve_slowloris, 700);
}
