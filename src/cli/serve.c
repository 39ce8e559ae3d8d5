/* serve.c — `petrel serve`: the OpenAI-compatible HTTP server.
 *
 *   petrel serve -m MODEL.gguf [--host 127.0.0.1] [--port 8080] [--api-key KEY]... [--queue N]
 *
 * The listening socket opens first (so /health can say 503 while the model
 * loads), then the model loads once and the server runs until SIGINT or
 * SIGTERM. The HTTP side and the OpenAI mapping live in src/server/; this
 * file only turns flags into srv_params / srv_model and waits.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "options.h"
#include "server/server.h"
#include "textcli.h"

static volatile sig_atomic_t serve_quit;

static void on_quit(int sig) {
    (void)sig;
    serve_quit = 1;
}

static void on_pcache_warning(void *ud, const char *msg) {
    (void)ud;
    fprintf(stderr, "petrel: WARNING: %s\n", msg);
}

static int loopback(const char *host) {
    struct in_addr a4;
    struct in6_addr a6;
    if (!strcmp(host, "localhost")) return 1;
    if (inet_pton(AF_INET, host, &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, host, &a6) == 1) return IN6_IS_ADDR_LOOPBACK(&a6);
    return 0;
}

#define SERVE_MAX_LIST 64 /* --api-key, --cors, --allow-host given at most this often each */

/* serve's own options: the server's parameters and the prefix cache's. */
typedef struct serve_args {
    tcli_opts *o; /* the model, engine, sampling and turn options */
    srv_params p;
    const char *keys[SERVE_MAX_LIST], *cors[SERVE_MAX_LIST], *hosts[SERVE_MAX_LIST];
    int n_keys, n_cors, n_hosts;
    const char *pc_dir; /* --cache-dir; NULL: the user's cache folder */
    double pc_gb;       /* --cache-gb */
} serve_args;

/* Is v what --cors (an origin: scheme://host[:port] with no path, or *) or --allow-host (a host
 * name: no scheme, path or port) takes? */
static int origin_ok(const char *v, int is_cors) {
    if (!*v || strlen(v) >= 256 || strpbrk(v, " \t\r\n,")) return 0;
    if (!is_cors) return !strchr(v, '/') && !strchr(v, ':');
    if (!strcmp(v, "*")) return 1;
    const char *h = strstr(v, "://");
    return h && h > v && h[3] && !strchr(h + 3, '/');
}

/* Append v to list (n of SERVE_MAX_LIST): 0, or -1 with the message printed. */
static int add_to(const cli_args *a, const cli_val *v, const char **list, int *n) {
    if (*n == SERVE_MAX_LIST)
        return fprintf(stderr, "petrel %s: at most %d %s\n", a->name, SERVE_MAX_LIST, v->name), -1;
    list[(*n)++] = v->s;
    return 0;
}

static int serve_option(void *ud, const cli_args *a, const cli_val *v) {
    serve_args *s = ud;
    srv_params *p = &s->p;
    switch (v->id) {
    case OPT_QUIET: p->log = NULL; return 0;
    case OPT_HOST: p->host = v->s; return 0;
    case OPT_PORT: p->port = (int)v->n; return 0;
    case OPT_QUEUE: p->queue = (int)v->n; return 0;
    case OPT_ALIAS: p->model_name = v->s; return 0;
    case OPT_MAX_BODY: p->max_body = (size_t)v->n; return 0;
    case OPT_MAX_HEADER: p->max_header = (size_t)v->n; return 0;
    case OPT_TIMEOUT: p->timeout_s = (int)v->n; return 0;
    case OPT_MAX_CONNS: p->max_conns = (int)v->n; return 0;
    case OPT_MAX_CONNS_PER_IP: p->max_conns_per_ip = (int)v->n; return 0;
    case OPT_REQUEST_TIMEOUT: p->request_timeout_s = (int)v->n; return 0;
    case OPT_SSE_KEEPALIVE: p->sse_keepalive_s = (double)v->n; return 0;
    case OPT_CACHE_DIR: s->pc_dir = v->s; return 0;
    case OPT_CACHE_GB: s->pc_gb = v->f; return 0;
    case OPT_API_KEY:
        /* an empty key (an unset variable in `--api-key "$KEY"`) must not turn authentication
         * off silently */
        if (!*v->s)
            return fprintf(stderr, "petrel serve: --api-key is empty (an unset variable?); give "
                                   "a key, or leave the flag out to serve without one\n"),
                   -1;
        return add_to(a, v, s->keys, &s->n_keys);
    case OPT_CORS:
    case OPT_ALLOW_HOST: {
        const int is_cors = v->id == OPT_CORS;
        if (!origin_ok(v->s, is_cors)) return cli_bad_value(a, v);
        return add_to(a, v, is_cors ? s->cors : s->hosts, is_cors ? &s->n_cors : &s->n_hosts);
    }
    default: return tcli_option(s->o, a, v);
    }
}

/* The command line into s and o: 0 to serve, or -1 to stop with exit status *status (after
 * --help, or a usage error printed). */
static int serve_parse(serve_args *s, int argc, char **argv, int *status) {
    if (cli_parse("serve", argc, argv, serve_option, s, status)) return -1;
    if (!s->n_keys) {
        const char *k = getenv("PETREL_API_KEY");
        if (k && !*k) {
            fprintf(stderr, "petrel serve: PETREL_API_KEY is set but empty; give a key, or unset "
                            "it to serve without one\n");
            return *status = CLI_USAGE, -1;
        }
        if (k) s->keys[s->n_keys++] = k;
    }
    s->p.api_keys = s->keys, s->p.n_api_keys = s->n_keys;
    s->p.cors = s->cors, s->p.n_cors = s->n_cors;
    s->p.allow_hosts = s->hosts, s->p.n_allow_hosts = s->n_hosts;
    return (*status = tcli_resolve_model(s->o, "serve")) ? -1 : 0;
}

/* Prompt prefixes on disk (--cache-dir, --cache-gb): a folder that does not open costs the
 * cache, not the server. NULL: none. */
static pt_pcache *open_pcache(const serve_args *s, pt_engine *e) {
    char dir[PT_FILE_PATH_MAX], err[512];
    const char *d = s->pc_dir;
    if (!d && cli_cache_dir()) {
        snprintf(dir, sizeof dir, "%s/kv", cli_cache_dir());
        d = dir;
    }
    if (!(s->pc_gb > 0) || !d) return NULL;
    pt_pcache_params pp = {.dir = d,
                           .max_bytes = (uint64_t)(s->pc_gb * 1024 * 1024 * 1024),
                           .warn = on_pcache_warning};
    pt_pcache *pc = pt_pcache_open(e, &pp, err, sizeof err);
    if (!pc) fprintf(stderr, "petrel: WARNING: %s; prompt prefixes are not kept\n", err);
    return pc;
}

/* Serve the opened model m on the started server sv until SIGINT or SIGTERM. */
static int serve_model(srv *sv, const serve_args *s, const tcli_opts *o, tcli_model *m) {
    char err[512];
    pt_pcache *pc = open_pcache(s, m->e);
    srv_model sm = {.e = m->e,
                    .pcache = pc,
                    .s = m->s,
                    .g = m->g,
                    .format = m->format,
                    .sp = m->sp,
                    .fixed_seed = (o->sp_set & PT_SAMPLING_SEED) != 0,
                    .thinking = o->think,
                    .parse_special_in_content = o->parse_special_in_content,
                    .max_tokens = (int)o->n_gen,
                    .stops = o->stops,
                    .n_stops = o->n_stops};
    int rc = CLI_OK;
    if (srv_set_model(sv, &sm, err, sizeof err)) {
        rc = cli_error("%s", err);
    } else {
        fprintf(stderr, "petrel: ready: serving %s (%s chat format, context %d)\n", s->p.model_name,
                m->format, pt_session_n_ctx(m->s));
        while (!serve_quit)
            usleep(100 * 1000); /* a signal also cuts the sleep short */
        fprintf(stderr, "petrel: shutting down\n");
    }
    srv_stop(sv);
    tcli_close(m);
    pt_pcache_close(pc);
    return rc;
}

/* The command on options cmd_serve owns (and frees, whatever the way out). */
static int serve_with(tcli_opts *o, int argc, char **argv) {
    serve_args s = {.o = o,
                    .p = {.host = SRV_DEFAULT_HOST,
                          .port = SRV_DEFAULT_PORT,
                          .queue = SRV_DEFAULT_QUEUE,
                          .max_body = SRV_DEFAULT_MAX_BODY,
                          .max_header = SRV_DEFAULT_MAX_HEADER,
                          .timeout_s = SRV_DEFAULT_TIMEOUT_S,
                          .max_conns = SRV_DEFAULT_MAX_CONNS,
                          .request_timeout_s = SRV_DEFAULT_REQUEST_TIMEOUT_S,
                          .max_conns_per_ip = SRV_DEFAULT_MAX_CONNS_PER_IP,
                          .sse_keepalive_s = SRV_DEFAULT_SSE_KEEPALIVE_S,
                          .log = stderr},
                    .pc_gb = SERVE_DEFAULT_CACHE_GB};
    int status;
    if (serve_parse(&s, argc, argv, &status)) return status;
    /* the model id: the file name without directory and .gguf */
    char name[256];
    if (!s.p.model_name) {
        const char *b = strrchr(o->model, '/');
        snprintf(name, sizeof name, "%s", b ? b + 1 : o->model);
        size_t l = strlen(name);
        if (l > 5 && !strcmp(name + l - 5, ".gguf")) name[l - 5] = 0;
        s.p.model_name = name;
    }
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_quit;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    if (!loopback(s.p.host) && !s.n_keys)
        fprintf(
            stderr,
            "petrel: ##########################################################################\n"
            "petrel: WARNING: listening on %s without --api-key: anyone who can reach this\n"
            "petrel: WARNING: address can use the model. Bind 127.0.0.1 or set --api-key KEY.\n"
            "petrel: ##########################################################################\n",
            s.p.host);
    char err[512];
    srv *sv = srv_start(&s.p, err, sizeof err);
    if (!sv) return cli_error("%s", err);
    const int v6 = strchr(s.p.host, ':') != NULL;
    fprintf(stderr, "petrel: listening on http://%s%s%s:%d (loading %s)\n", v6 ? "[" : "", s.p.host,
            v6 ? "]" : "", srv_port(sv), o->model);
    tcli_model m;
    if (tcli_open(o, &m, 0)) {
        srv_stop(sv);
        return CLI_ERROR;
    }
    return serve_model(sv, &s, o, &m);
}

int cmd_serve(int argc, char **argv) {
    tcli_opts o;
    tcli_opts_init(&o);
    const int rc = serve_with(&o, argc, argv);
    tcli_opts_free(&o);
    return rc;
}
