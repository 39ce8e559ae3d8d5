/* main.c — the `petrel` command: dispatches to subcommands (see cli.h). */
#include <curl/curl.h>
#include <jansson.h>
#include <microhttpd.h>
#include <openssl/crypto.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if defined(__APPLE__)
#include <mach-o/dyld.h>
#endif

#include "cli.h"
#include "petrel.h"

int cli_error(const char *fmt, ...) {
    va_list ap;
    fputs("petrel: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return CLI_ERROR;
}

static void usage(FILE *f) {
    fprintf(
        f,
        "petrel %s — run Mixture-of-Experts models larger than memory\n"
        "\n"
        "usage: petrel COMMAND [ARGS]\n"
        "\n"
        "commands:\n"
        "  chat -m MODEL                 interactive chat (the default command)\n"
        "  generate -m MODEL -p TEXT     complete TEXT (--chat: as a user turn); or --tokens IDS\n"
        "  serve -m MODEL [--port N]     OpenAI-compatible HTTP server (chat, completions, "
        "responses)\n"
        "  inspect MODEL.gguf [--json]   architecture, tensor types, resident vs expert bytes\n"
        "  pack MODEL.gguf [-o PATH]     write the expert pack (one aligned record per expert)\n"
        "  verify MODEL.gguf             check the expert pack against the model\n"
        "  pull OWNER/NAME[:QUANT]       download a GGUF model from the Hugging Face Hub\n"
        "  list                          the models in petrel's cache, with their sizes\n"
        "  perplexity -m MODEL -f TEXT   perplexity over TEXT, as llama-perplexity computes it\n"
        "  bench -m MODEL [-p N] [-n N]  prompt and decode tokens/s, timed as llama-bench times "
        "them\n"
        "  tokenize -m MODEL -p TEXT     print the token ids of TEXT (or -f FILE)\n"
        "  detokenize -m MODEL --ids IDS print the text of token ids\n"
        "  help                          this text\n"
        "  version                       print the version\n"
        "\n"
        "Run 'petrel COMMAND --help' for the options of a command.\n",
        pt_version());
}

#define DEMO_MODEL_FILE "models/petrel-demo-glm.gguf"

const char *cli_default_model(void) {
    static char found[PT_PATH_MAX];
    static int done;
    if (done) return found[0] ? found : NULL;
    done = 1;
    const char *env = getenv("PETREL_MODEL");
    if (env && *env) {
        snprintf(found, sizeof found, "%s", env);
        return found;
    }
    /* the binary lives in build/ (or build/native/): the repository is above it */
    char exe[PT_PATH_MAX - 64]; /* leaves room in `found` for the suffix */
#if defined(__APPLE__)
    uint32_t exe_cap = sizeof exe; /* unverified: no Darwin machine here */
    if (_NSGetExecutablePath(exe, &exe_cap) == 0) {
#else
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
#endif
        for (int up = 1; up <= 3; up++) {
            char *slash = strrchr(exe, '/');
            if (!slash) break;
            *slash = 0;
            snprintf(found, sizeof found, "%s/%s", exe, DEMO_MODEL_FILE);
            if (access(found, R_OK) == 0) return found;
        }
    }
    snprintf(found, sizeof found, "%s", DEMO_MODEL_FILE);
    if (access(found, R_OK) == 0) return found;
    found[0] = 0;
    return NULL;
}

const char *cli_cache_dir(void) {
    static char dir[PT_PATH_MAX];
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg && *xdg)
        snprintf(dir, sizeof dir, "%s/petrel", xdg);
    else if (home && *home)
        snprintf(dir, sizeof dir, "%s/.cache/petrel", home);
    else
        return NULL;
    return dir;
}

/* The model's resident tensors are memory-mapped: when the file is truncated
 * (or its disk fails) under a running command, touching a page past the new
 * end raises SIGBUS. Say so in one line and stop with status 1 instead of
 * dying with "Bus error". Only async-signal-safe calls here. */
static void on_sigbus(int sig) {
    (void)sig;
    static const char msg[] =
        "petrel: a memory-mapped model file was truncated or could not be read while petrel "
        "was using it (SIGBUS); stopping. Check the file (petrel verify) and run again.\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    _exit(CLI_ERROR);
}

/* `petrel --version`: the version, the library's kernels and read back-ends, and the
 * front ends' libraries (the versions linked at run time). */
static void print_version(void) {
    printf("petrel %s\n%s", pt_version(), pt_build_info());
    const curl_version_info_data *cv = curl_version_info(CURLVERSION_NOW);
    printf("features: chat, generate, serve (libmicrohttpd %s), pull and -hf (libcurl %s, %s), "
           "JSON (jansson %s), SHA-256 (%s)\n",
           MHD_get_version(), cv->version, cv->ssl_version ? cv->ssl_version : "no TLS",
           jansson_version_str(), OpenSSL_version(OPENSSL_VERSION));
    const char *m = CLI_DEFAULT_MODEL;
    printf("default model: %s\n", m ? m : "none found (models/petrel-demo-glm.gguf)");
}

int main(int argc, char **argv) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigbus;
    sigaction(SIGBUS, &sa, NULL);
    if (argc < 2) {
        if (CLI_DEFAULT_MODEL)
            return cmd_chat(argc, argv); /* `petrel` alone: chat on the default model */
        usage(stderr);
        return CLI_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "chat")) return cmd_chat(argc - 1, argv + 1);
    if (cmd[0] == '-' && strcmp(cmd, "-h") && strcmp(cmd, "--help") && strcmp(cmd, "--version"))
        return cmd_chat(argc, argv); /* `petrel -m MODEL ...`: chat is the default command */
    if (!strcmp(cmd, "inspect")) return cmd_inspect(argc - 1, argv + 1);
    if (!strcmp(cmd, "generate")) return cmd_generate(argc - 1, argv + 1);
    if (!strcmp(cmd, "serve")) return cmd_serve(argc - 1, argv + 1);
    if (!strcmp(cmd, "pack")) return cmd_pack(argc - 1, argv + 1);
    if (!strcmp(cmd, "verify")) return cmd_verify(argc - 1, argv + 1);
    if (!strcmp(cmd, "tokenize")) return cmd_tokenize(argc - 1, argv + 1);
    if (!strcmp(cmd, "pull")) return cmd_pull(argc - 1, argv + 1);
    if (!strcmp(cmd, "perplexity")) return cmd_perplexity(argc - 1, argv + 1);
    if (!strcmp(cmd, "bench")) return cmd_bench(argc - 1, argv + 1);
    if (!strcmp(cmd, "list")) return cmd_list(argc - 1, argv + 1);
    if (!strcmp(cmd, "detokenize")) return cmd_detokenize(argc - 1, argv + 1);
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        usage(stdout);
        return CLI_OK;
    }
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
        print_version();
        return CLI_OK;
    }
    fprintf(stderr, "petrel: unknown command '%s' (petrel help lists the commands)\n", cmd);
    return CLI_USAGE;
}
