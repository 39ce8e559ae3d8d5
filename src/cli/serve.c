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
#include "server/server.h"
#include "textcli.h"

static volatile sig_atomic_t serve_quit;

static void on_quit(int sig) {
    (void)sig;
    serve_quit = 1;
}

#define DEFAULT_CACHE_GB 20.0 /* the prefix cache's bound: ~100 12k-token prompts of GLM-5 f16 */

static void on_pcache_warning(void *ud, const char *msg) {
    (void)ud;
    fprintf(stderr, "petrel: WARNING: %s\n", msg);
}

static void serve_usage(FILE *f) {
    fprintf(
        f,
        "usage: petrel serve -m MODEL.gguf [options]\n"
        "OpenAI-compatible HTTP server: /v1/chat/completions, /v1/completions, /v1/responses,\n"
        "/v1/models, /health. One generation at a time; the KV cache is reused across requests.\n"
        "  -m, --model FILE        GGUF model\n"
        "  --host ADDR             address to listen on (default 127.0.0.1: this machine only)\n"
        "  --port N                TCP port (default 8080; 0: any free port, printed at start)\n"
        "  --api-key KEY           require 'Authorization: Bearer KEY' on /v1/ (default: none;\n"
        "                          the PETREL_API_KEY environment variable, which ps cannot "
        "show);\n"
        "                          repeat for several clients: the KV prefix is reused only for\n"
        "                          the key that left it\n"
        "  --queue N               requests that may wait while one generates (default 16); more: "
        "429\n"
        "  --alias NAME            model id shown by /v1/models and replies (default: file name)\n"
        "  --max-body BYTES        request body limit (default 16777216); larger: 413\n"
        "  --max-header BYTES      request line + headers limit (default 65536)\n"
        "  --timeout S             close connections idle for S seconds (default 30)\n"
        "  --max-connections N     simultaneous connections (default 64; the last 2 are kept for\n"
        "                          addresses with no request still arriving)\n"
        "  --max-connections-per-ip N  simultaneous connections from one address (default 8)\n"
        "  --request-timeout S     a request (line, headers, body) must arrive within S seconds\n"
        "                          (default 10); slower senders are disconnected\n"
        "  --cors ORIGIN           let a web page at ORIGIN (e.g. https://app.example) call the\n"
        "                          API from a browser (repeatable; '*': any). Always allowed: the\n"
        "                          server's own origin and http://localhost|127.0.0.1|[::1]:*\n"
        "  --allow-host NAME       a DNS name this server may be reached by (repeatable); IP\n"
        "                          addresses, localhost and this machine's name always work\n"
        "  --sse-keepalive S       while a streamed request's prompt is evaluated, an SSE\n"
        "                          comment ': prefill DONE/TOTAL' every S seconds (default 5;\n"
        "                          0: after every layer), so idle timeouts do not drop it\n"
        "  --quiet                 no line per request on stderr (status, tokens, prefill, tok/s)\n"
        "  --cache-dir DIR         keep the KV of prompt prefixes there, for other conversations\n"
        "                          and restarts (default: $XDG_CACHE_HOME/petrel/kv or\n"
        "                          ~/.cache/petrel/kv; shared safely by several servers)\n"
        "  --cache-gb N            size bound of that folder, least recently used out (default\n"
        "                          %g; 0: no prefix cache)\n"
        "Sampling flags set the defaults a request's own fields override; -n sets the default\n"
        "max_tokens; --think/--no-think the default for requests that do not say.\n",
        DEFAULT_CACHE_GB);
    tcli_usage(f);
}

static int loopback(const char *host) {
    struct in_addr a4;
    struct in6_addr a6;
    if (!strcmp(host, "localhost")) return 1;
    if (inet_pton(AF_INET, host, &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, host, &a6) == 1) return IN6_IS_ADDR_LOOPBACK(&a6);
    return 0;
}

int cmd_serve(int argc, char **argv) {
    tcli_opts o;
    tcli_opts_init(&o);
    srv_params p = {.host = "127.0.0.1",
                    .port = 8080,
                    .queue = 16,
                    .max_body = 16u << 20,
                    .max_header = 64u << 10,
                    .timeout_s = 30,
                    .max_conns = 64,
                    .request_timeout_s = 10,
                    .max_conns_per_ip = 8,
                    .sse_keepalive_s = 5,
                    .log = stderr};
    const char *keys[64], *cors[64], *hosts[64];
    int n_keys = 0, n_cors = 0, n_hosts = 0;
    const char *pc_dir = NULL; /* --cache-dir */
    double pc_gb = DEFAULT_CACHE_GB;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        long n = 0;
        char *end = NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            serve_usage(stdout);
            return CLI_OK;
        }
        if (!strcmp(a, "--quiet")) {
            p.log = NULL;
            continue;
        }
        if (!strcmp(a, "--cache-dir") || !strcmp(a, "--cache-gb")) {
            if (!v || !*v) {
                fprintf(stderr, "petrel serve: %s needs a value\n", a);
                return CLI_USAGE;
            }
            i++;
            if (!strcmp(a, "--cache-dir")) {
                pc_dir = v;
                continue;
            }
            char *gb_end = NULL;
            errno = 0;
            pc_gb = strtod(v, &gb_end);
            if (errno || gb_end == v || *gb_end || !(pc_gb >= 0) || pc_gb > 1e6) {
                fprintf(stderr,
                        "petrel serve: invalid value '%s' for --cache-gb: expected a number of "
                        "GB from 0 (no prefix cache) up\n",
                        v);
                return CLI_USAGE;
            }
            continue;
        }
        int valued = !strcmp(a, "--host") || !strcmp(a, "--port") || !strcmp(a, "--api-key") ||
                     !strcmp(a, "--queue") || !strcmp(a, "--alias") || !strcmp(a, "--max-body") ||
                     !strcmp(a, "--max-header") || !strcmp(a, "--timeout") ||
                     !strcmp(a, "--max-connections") || !strcmp(a, "--max-connections-per-ip") ||
                     !strcmp(a, "--request-timeout") || !strcmp(a, "--cors") ||
                     !strcmp(a, "--allow-host") || !strcmp(a, "--sse-keepalive");
        if (valued) {
            if (!v) {
                fprintf(stderr, "petrel serve: %s needs a value\n", a);
                return CLI_USAGE;
            }
            i++;
            errno = 0;
            n = strtol(v, &end, 10);
            int num_ok = !errno && end != v && !*end;
            if (!strcmp(a, "--host"))
                p.host = v;
            else if (!strcmp(a, "--api-key")) {
                /* an empty key (an unset variable in `--api-key "$KEY"`) must not turn
                 * authentication off silently */
                if (!*v) {
                    fprintf(stderr, "petrel serve: --api-key is empty (an unset variable?); give "
                                    "a key, or leave the flag out to serve without one\n");
                    return CLI_USAGE;
                }
                if (n_keys == (int)(sizeof keys / sizeof keys[0])) {
                    fprintf(stderr, "petrel serve: at most %d --api-key\n", n_keys);
                    return CLI_USAGE;
                }
                keys[n_keys++] = v;
            } else if (!strcmp(a, "--cors") || !strcmp(a, "--allow-host")) {
                int is_cors = !strcmp(a, "--cors");
                const char **list = is_cors ? cors : hosts;
                int *n_list = is_cors ? &n_cors : &n_hosts;
                /* an origin is scheme://host[:port] with no path; a host name has no scheme */
                int ok = *v && strlen(v) < 256 && !strpbrk(v, " \t\r\n,");
                if (ok && is_cors && strcmp(v, "*")) {
                    const char *h = strstr(v, "://");
                    ok = h && h > v && h[3] && !strchr(h + 3, '/');
                } else if (ok && !is_cors) {
                    ok = !strchr(v, '/') && !strchr(v, ':');
                }
                if (!ok) {
                    fprintf(stderr,
                            is_cors
                                ? "petrel serve: invalid value '%s' for --cors: expected an "
                                  "origin such as https://app.example or http://host:3000, or *\n"
                                : "petrel serve: invalid value '%s' for --allow-host: expected "
                                  "a host name such as mybox.lan\n",
                            v);
                    return CLI_USAGE;
                }
                if (*n_list == 64) {
                    fprintf(stderr, "petrel serve: at most 64 %s\n", a);
                    return CLI_USAGE;
                }
                list[(*n_list)++] = v;
            } else if (!strcmp(a, "--alias"))
                p.model_name = v;
            else {
                long lo =
                    !strcmp(a, "--port") || !strcmp(a, "--queue") || !strcmp(a, "--sse-keepalive")
                        ? 0
                        : 1;
                long hi = !strcmp(a, "--port")       ? 65535
                          : !strcmp(a, "--max-body") ? (1L << 40)
                                                     : (1L << 30);
                if (!num_ok || n < lo || n > hi) {
                    fprintf(stderr,
                            "petrel serve: invalid value '%s' for %s: expected an integer from "
                            "%ld to %ld\n",
                            v, a, lo, hi);
                    return CLI_USAGE;
                }
                if (!strcmp(a, "--port"))
                    p.port = (int)n;
                else if (!strcmp(a, "--queue"))
                    p.queue = (int)n;
                else if (!strcmp(a, "--max-body"))
                    p.max_body = (size_t)n;
                else if (!strcmp(a, "--max-header"))
                    p.max_header = (size_t)n;
                else if (!strcmp(a, "--timeout"))
                    p.timeout_s = (int)n;
                else if (!strcmp(a, "--request-timeout"))
                    p.request_timeout_s = (int)n;
                else if (!strcmp(a, "--max-connections-per-ip"))
                    p.max_conns_per_ip = (int)n;
                else if (!strcmp(a, "--sse-keepalive"))
                    p.sse_keepalive_s = (double)n;
                else
                    p.max_conns = (int)n;
            }
            continue;
        }
        int r = tcli_parse("serve", argc, argv, &i, &o);
        if (r < 0) return CLI_USAGE;
        if (r == 0) {
            fprintf(stderr, "petrel serve: unknown option '%s'\n", a);
            serve_usage(stderr);
            return CLI_USAGE;
        }
    }
    if (!n_keys) {
        const char *k = getenv("PETREL_API_KEY");
        if (k && !*k) {
            fprintf(stderr, "petrel serve: PETREL_API_KEY is set but empty; give a key, or unset "
                            "it to serve without one\n");
            return CLI_USAGE;
        }
        if (k) keys[n_keys++] = k;
    }
    int mrc = tcli_resolve_model(&o, "serve");
    if (mrc) {
        if (mrc == CLI_USAGE && !o.hf) serve_usage(stderr);
        return mrc;
    }
    /* the model id: the file name without directory and .gguf */
    char name[256];
    if (!p.model_name) {
        const char *b = strrchr(o.model, '/');
        snprintf(name, sizeof name, "%s", b ? b + 1 : o.model);
        size_t l = strlen(name);
        if (l > 5 && !strcmp(name + l - 5, ".gguf")) name[l - 5] = 0;
        p.model_name = name;
    }
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_quit;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    char err[512];
    p.api_keys = keys, p.n_api_keys = n_keys;
    p.cors = cors, p.n_cors = n_cors;
    p.allow_hosts = hosts, p.n_allow_hosts = n_hosts;
    if (!loopback(p.host) && !n_keys)
        fprintf(
            stderr,
            "petrel: ##########################################################################\n"
            "petrel: WARNING: listening on %s without --api-key: anyone who can reach this\n"
            "petrel: WARNING: address can use the model. Bind 127.0.0.1 or set --api-key KEY.\n"
            "petrel: ##########################################################################\n",
            p.host);
    srv *s = srv_start(&p, err, sizeof err);
    if (!s) return cli_error("%s", err);
    fprintf(stderr, "petrel: listening on http://%s%s%s:%d (loading %s)\n",
            strchr(p.host, ':') ? "[" : "", p.host, strchr(p.host, ':') ? "]" : "", srv_port(s),
            o.model);
    tcli_model m;
    if (tcli_open(&o, &m, 0)) {
        srv_stop(s);
        return CLI_ERROR;
    }
    /* prompt prefixes on disk: a failure to open the folder costs the cache, not the server */
    pt_pcache *pc = NULL;
    char pc_default[4200];
    if (!pc_dir && cli_cache_dir()) {
        snprintf(pc_default, sizeof pc_default, "%s/kv", cli_cache_dir());
        pc_dir = pc_default;
    }
    if (pc_gb > 0 && pc_dir) {
        pt_pcache_params pp = {.dir = pc_dir,
                               .max_bytes = (uint64_t)(pc_gb * 1024 * 1024 * 1024),
                               .warn = on_pcache_warning};
        pc = pt_pcache_open(m.e, &pp, err, sizeof err);
        if (!pc) fprintf(stderr, "petrel: WARNING: %s; prompt prefixes are not kept\n", err);
    }
    srv_model sm = {.e = m.e,
                    .pcache = pc,
                    .s = m.s,
                    .g = m.g,
                    .format = m.format,
                    .sp = m.sp,
                    .fixed_seed = (o.sp_set & PT_SAMPLING_SEED) != 0,
                    .thinking = o.think,
                    .parse_special_in_content = o.parse_special_in_content,
                    .max_tokens = (int)o.n_gen,
                    .stops = o.stops,
                    .n_stops = o.n_stops};
    if (srv_set_model(s, &sm, err, sizeof err)) {
        srv_stop(s);
        tcli_close(&m);
        pt_pcache_close(pc);
        return cli_error("%s", err);
    }
    fprintf(stderr, "petrel: ready: serving %s (%s chat format, context %d)\n", p.model_name,
            m.format, pt_session_n_ctx(m.s));
    while (!serve_quit)
        usleep(100 * 1000); /* a signal also cuts the sleep short */
    fprintf(stderr, "petrel: shutting down\n");
    srv_stop(s);
    tcli_close(&m);
    pt_pcache_close(pc);
    return CLI_OK;
}
