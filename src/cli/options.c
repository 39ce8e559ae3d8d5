/* options.c — the table of every subcommand's options, the parser it drives and the --help it
 * prints. See options.h. */
#include "options.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "hub.h"
#include "petrel.h"
#include "server/server.h" /* the server's defaults, for --help */

/* A number's macro as text in a help string (its digits, as the macro spells them). */
#define TEXT_OF_(x) #x
#define TEXT_OF(x) TEXT_OF_(x)

/* ===== The subcommands ===== */

struct cli_cmd {
    const char *name;
    int max_args;      /* positional arguments it takes */
    const char *usage; /* after "usage: " */
    const char *about; /* lines after the usage line, or NULL */
    const char *notes; /* lines after the options, or NULL */
};

/* In the order of the CMD_* ids. */
static const cli_cmd CMDS[] = {
    {"chat", 0, "petrel chat -m MODEL.gguf [options]   (or: petrel -m MODEL.gguf ...)",
     "Interactive, streaming chat in the model's chat format; the KV cache is kept across\n"
     "turns, so a turn evaluates only its new tokens.",
     "commands during the chat: /clear  /exit  /stats  /system TEXT  /think on|off\n"
     "Ctrl-C stops the current answer; Ctrl-D exits."},
    {"generate", 0, "petrel generate -m MODEL.gguf (-p TEXT | -f FILE | --tokens IDS) [options]",
     "Text mode completes TEXT as is (--chat: as a user turn of the chat template),\n"
     "streamed to stdout, statistics on stderr. Token mode (--tokens) feeds the ids\n"
     "verbatim and prints the ids of exactly N greedy tokens.",
     NULL},
    {"serve", 0, "petrel serve -m MODEL.gguf [options]",
     "OpenAI-compatible HTTP server: /v1/chat/completions, /v1/completions, /v1/responses,\n"
     "/v1/models, /health. One generation at a time; the KV cache is reused across requests.",
     "Sampling flags set the defaults a request's own fields override; -n sets the default\n"
     "max_tokens; --think/--no-think the default for requests that do not say. Grammars\n"
     "come with requests (response_format, tools), not flags."},
    {"bench", 0, "petrel bench [-m MODEL.gguf] [options]",
     "Prompt (ppN) and decode (tgN) tokens/s, timed as llama.cpp's llama-bench times them:\n"
     "a warmup run, then per run the context cleared, the depth evaluated untimed, the\n"
     "test timed.",
     NULL},
    {"perplexity", 0, "petrel perplexity [-m MODEL.gguf] -f TEXT [options]",
     "Perplexity of MODEL over TEXT as llama-perplexity computes it: chunks of -c tokens,\n"
     "each from an empty cache, the second half of each scored.",
     NULL},
    {"inspect", 1, "petrel inspect MODEL.gguf [--json] [--ram GB,GB,...] [-c N]",
     "Architecture, hyper-parameters, tensor types and the resident vs routed-expert split\n"
     "of a GGUF model (any part of a split model works), from its header alone.",
     NULL},
    {"pack", 1, "petrel pack MODEL.gguf [-o PATH] [--table-only]",
     "Write every routed expert as one aligned record into an expert pack (MODEL.gguf.xpack,\n"
     "or the cache directory when that folder is read-only). An interrupted run resumes\n"
     "where it stopped.",
     NULL},
    {"verify", 1, "petrel verify MODEL.gguf [--pack PATH]",
     "Check the model's expert pack (without one, its checksum table from pack --table-only):\n"
     "its header, the model's size, header, mtime and inode, every record's checksum and\n"
     "bytes against the model's (a full read of both). With neither, write the checksum\n"
     "table (MODEL.gguf.xsums) from a full read of the model, so that streamed reads of the\n"
     "GGUF are checked from then on. Exit 0 when valid (or the table was written), 1 when\n"
     "stale or corrupt.",
     NULL},
    {"pull", 1, "petrel pull OWNER/NAME[:QUANT] [--pack | --no-pack] [-j N]",
     "Download a GGUF model from the Hugging Face Hub into petrel's cache and print its\n"
     "path. QUANT (e.g. Q4_K_M) is matched case-insensitively against the file names; every\n"
     "part of a split model is fetched. Resumable: run it again after a cut or Ctrl-C.\n"
     "Every file is checked against the SHA-256 the Hub lists for it.",
     "environment: HF_TOKEN (gated or private repositories), HF_ENDPOINT (a mirror,\n"
     "default " HUB_DEFAULT_ENDPOINT "), PETREL_CACHE (the cache folder)"},
    {"list", 0, "petrel list",
     "The models in petrel's cache (see petrel pull), with their sizes; incomplete\n"
     "downloads are marked (petrel pull resumes them).",
     NULL},
    {"tokenize", 0, "petrel tokenize -m MODEL.gguf (-p TEXT | -f FILE) [options]", NULL,
     "Prints the ids space-separated on one line."},
    {"detokenize", 0, "petrel detokenize -m MODEL.gguf [--ids ID,ID,...] [options]", NULL,
     "Writes the text's bytes to stdout, with no newline added."},
};
_Static_assert(sizeof CMDS / sizeof CMDS[0] == CMD_COUNT, "a row of CMDS per CMD_* id");

/* ===== The options ===== */

#define INT(l, h) .kind = CLI_INT, .lo = (l), .hi = (h)
#define NUM(l, h) .kind = CLI_NUM, .lo = (l), .hi = (h)
#define CHOICE(words) .kind = CLI_CHOICE, .choices = (words)
#define IN_RANGE "an integer from {lo} to {hi}"
#define GEN_CHAT (CMD(GENERATE) | CMD(CHAT))

/* In --help's order: each subcommand lists its entries in table order, a heading before each
 * new section (so a section's entries stand together). */
static const cli_opt OPTS[] = {
    /* ----- generate ----- */
    {OPT_PROMPT, CMD(GENERATE), "-p, --prompt", "TEXT",
     .help = "prompt text, taken verbatim (raw completion; BOS as the model says)"},
    {OPT_FILE, CMD(GENERATE), "-f, --file", "FILE",
     .help = "read the prompt from FILE ('-' or no -p/-f/--tokens: stdin)"},
    {OPT_CHAT, CMD(GENERATE), "--chat",
     .help = "wrap the prompt in the model's chat template as a user turn"},
    {OPT_SYSTEM, CMD(GENERATE), "--system", "TEXT", .help = "system message for --chat"},
    {OPT_QUIET, CMD(GENERATE), "--quiet", .help = "no statistics (and no reasoning) on stderr"},
    {OPT_JSON, CMD(GENERATE), "--json",
     .help = "statistics as one JSON object on stderr (with --chat: the\n"
             "answer's \"content\" and \"reasoning\" too)"},
    {OPT_SHOW_REASONING, CMD(GENERATE), "--show-reasoning",
     .help = "with --chat: the model's reasoning on stderr (dimmed on a\n"
             "terminal; the default unless --quiet or --json); stdout\n"
             "holds only the answer"},
    {OPT_HIDE_REASONING, CMD(GENERATE), "--hide-reasoning",
     .help = "with --chat: do not print the reasoning"},
    {OPT_TOKENS, CMD(GENERATE), "--tokens", "LIST",
     .help = "prompt token ids, comma-separated, fed verbatim (no BOS); prints\n"
             "the ids of exactly N greedy tokens (-n, default {}; EOS does not\n"
             "stop); -c defaults to prompt + N; @FILE: the list in FILE",
     .defn = GEN_DEFAULT_TOKENS},
    {OPT_DUMP_LOGITS, CMD(GENERATE), "--dump-logits", "FILE",
     .help = "with --tokens: write prompt logits, float32 [n_prompt][n_vocab]"},
    {OPT_SESSION, CMD(GENERATE), "--session", "FILE",
     .help = "with --tokens: restore the KV of the prompt's ids but the last\n"
             "from FILE when it holds them (same model, KV types, ids),\n"
             "else evaluate them and save FILE"},
    /* ----- chat ----- */
    {OPT_SYSTEM, CMD(CHAT), "--system", "TEXT", .help = "system message"},
    {OPT_HIDE_REASONING, CMD(CHAT), "--hide-reasoning",
     .help = "do not print the model's reasoning (default: on stderr,\n"
             "dimmed on a terminal; stdout holds only the answers)"},
    {OPT_SHOW_REASONING, CMD(CHAT), "--show-reasoning", .help = "print it (the default)"},
    {OPT_STATS, GEN_CHAT, "--stats", .help = "print expert-cache details with the statistics"},
    {OPT_SESSION, CMD(CHAT), "--session", "FILE", .expect = "a file name", .flags = CLI_NONEMPTY,
     .help = "restore the conversation and its KV cache from FILE, save\n"
             "both there on exit"},
    {OPT_NO_KV_REUSE, CMD(CHAT), "--no-kv-reuse", .flags = CLI_HIDDEN,
     .help = "re-evaluate the whole conversation every turn (for tests)"},
    /* ----- serve ----- */
    {OPT_HOST, CMD(SERVE), "--host", "ADDR",
     .help = "address to listen on (default {}: this machine only)", .def = SRV_DEFAULT_HOST},
    {OPT_PORT, CMD(SERVE), "--port", "N", INT(0, 65535), .expect = IN_RANGE,
     .help = "TCP port (default {}; 0: any free port, printed at start)", .defn = SRV_DEFAULT_PORT},
    {OPT_API_KEY, CMD(SERVE), "--api-key", "KEY",
     .help = "require 'Authorization: Bearer KEY' on /v1/ (default: none;\n"
             "the PETREL_API_KEY environment variable, which ps cannot show);\n"
             "repeat for several clients: the KV prefix is reused only for\n"
             "the key that left it"},
    {OPT_QUEUE, CMD(SERVE), "--queue", "N", INT(0, 1 << 30), .expect = IN_RANGE,
     .help = "requests that may wait while one generates (default {}); more: 429",
     .defn = SRV_DEFAULT_QUEUE},
    {OPT_ALIAS, CMD(SERVE), "--alias", "NAME",
     .help = "model id shown by /v1/models and replies (default: file name)"},
    {OPT_MAX_BODY, CMD(SERVE), "--max-body", "BYTES", INT(1, 1LL << 40), .expect = IN_RANGE,
     .help = "request body limit (default {}); larger: 413", .defn = SRV_DEFAULT_MAX_BODY},
    {OPT_MAX_HEADER, CMD(SERVE), "--max-header", "BYTES", INT(1, 1 << 30), .expect = IN_RANGE,
     .help = "request line + headers limit (default {})", .defn = SRV_DEFAULT_MAX_HEADER},
    {OPT_TIMEOUT, CMD(SERVE), "--timeout", "S", INT(1, 1 << 30), .expect = IN_RANGE,
     .help = "close connections idle for S seconds (default {})", .defn = SRV_DEFAULT_TIMEOUT_S},
    {OPT_MAX_CONNS, CMD(SERVE), "--max-connections", "N", INT(1, 1 << 30), .expect = IN_RANGE,
     .help = "simultaneous connections (default {}; the last " TEXT_OF(
         SRV_RESERVED_SLOTS) " are\n"
                             "kept for addresses with no request still arriving)",
     .defn = SRV_DEFAULT_MAX_CONNS},
    {OPT_MAX_CONNS_PER_IP, CMD(SERVE), "--max-connections-per-ip", "N", INT(1, 1 << 30),
     .expect = IN_RANGE, .help = "simultaneous connections from one address (default {})",
     .defn = SRV_DEFAULT_MAX_CONNS_PER_IP},
    {OPT_REQUEST_TIMEOUT, CMD(SERVE), "--request-timeout", "S", INT(1, 1 << 30), .expect = IN_RANGE,
     .help = "a request (line, headers, body) must arrive within S seconds\n"
             "(default {}); slower senders are disconnected",
     .defn = SRV_DEFAULT_REQUEST_TIMEOUT_S},
    {OPT_CORS, CMD(SERVE), "--cors", "ORIGIN",
     .expect = "an origin such as https://app.example or http://host:3000, or *",
     .help = "let a web page at ORIGIN (e.g. https://app.example) call the\n"
             "API from a browser (repeatable; '*': any). Always allowed: the\n"
             "server's own origin and http://localhost|127.0.0.1|[::1]:*"},
    {OPT_ALLOW_HOST, CMD(SERVE), "--allow-host", "NAME", .expect = "a host name such as mybox.lan",
     .help = "a DNS name this server may be reached by (repeatable); IP\n"
             "addresses, localhost and this machine's name always work"},
    {OPT_SSE_KEEPALIVE, CMD(SERVE), "--sse-keepalive", "S", INT(0, 1 << 30), .expect = IN_RANGE,
     .help = "while a streamed request's prompt is evaluated, an SSE\n"
             "comment ': prefill DONE/TOTAL' every S seconds (default {};\n"
             "0: after every layer), so idle timeouts do not drop it",
     .defn = SRV_DEFAULT_SSE_KEEPALIVE_S},
    {OPT_QUIET, CMD(SERVE), "--quiet",
     .help = "no line per request on stderr (status, tokens, prefill, tok/s)"},
    {OPT_CACHE_DIR, CMD(SERVE), "--cache-dir", "DIR", .expect = "a folder", .flags = CLI_NONEMPTY,
     .help = "keep the KV of prompt prefixes there, for other conversations\n"
             "and restarts (default: $XDG_CACHE_HOME/petrel/kv or\n"
             "~/.cache/petrel/kv; shared safely by several servers)"},
    {OPT_CACHE_GB, CMD(SERVE), "--cache-gb", "N", NUM(0, 1e6),
     .expect = "a number of GB from 0 (no prefix cache) up",
     .help = "size bound of that folder, least recently used out (default\n"
             "{}; 0: no prefix cache)",
     .defn = SERVE_DEFAULT_CACHE_GB},
    /* ----- bench (the lists are read by bench.c, in [lo, hi]) ----- */
    {OPT_N_PROMPT, CMD(BENCH), "-p, --n-prompt", "LIST", .lo = 0, .hi = 1 << 24,
     .expect = "comma-separated integers from {lo} to {hi} (at most 16)",
     .help = "prompt lengths to time, comma-separated (default {}; 0:\nnone)",
     .defn = BENCH_DEFAULT_PROMPT},
    {OPT_N_GEN, CMD(BENCH), "-n, --n-gen", "LIST", .lo = 0, .hi = 1 << 24,
     .expect = "comma-separated integers from {lo} to {hi} (at most 16)",
     .help = "decode lengths to time (default {}; 0: none)", .defn = BENCH_DEFAULT_GEN},
    {OPT_N_DEPTH, CMD(BENCH), "-d, --n-depth", "LIST", .lo = 0, .hi = 1 << 24,
     .expect = "comma-separated integers from {lo} to {hi} (at most 16)",
     .help = "positions already in the context before each test\n(default {})",
     .defn = BENCH_DEFAULT_DEPTH},
    {OPT_REPETITIONS, CMD(BENCH), "-r, --repetitions", "N", INT(1, 1000), .expect = IN_RANGE,
     .help = "timed runs of each test (default {})", .defn = BENCH_DEFAULT_REPS},
    {OPT_NO_WARMUP, CMD(BENCH), "--no-warmup",
     .help = "no untimed run before each test's timed ones"},
    {OPT_OUTPUT, CMD(BENCH), "-o, --output", "FORMAT", CHOICE("md|jsonl"), .expect = "md or jsonl",
     .help = "md (a table, the default) or jsonl (one JSON object a\n"
             "test, with llama-bench's avg_ts / stddev_ts / samples_ts)"},
    /* ----- perplexity ----- */
    {OPT_FILE, CMD(PERPLEXITY), "-f, --file", "FILE", .help = "the text ('-': standard input)"},
    {OPT_CHUNKS, CMD(PERPLEXITY), "--chunks", "N", INT(1, 1e18),
     .expect = "an integer of 1 or more", .help = "score the first N chunks only (default: all)"},
    {OPT_KLD_BASE, CMD(PERPLEXITY), "--kl-divergence-base", "FILE",
     .help = "write the scored rows' log-probabilities to FILE\n"
             "(llama-perplexity's format), or with --kl-divergence\n"
             "read them (and the tokens; no -f) and compare"},
    {OPT_KLD, CMD(PERPLEXITY), "--kl-divergence",
     .help = "KL divergence of MODEL from the base in FILE"},
    /* ----- inspect ----- */
    {OPT_MODEL, CMD(INSPECT), "-m, --model", "FILE",
     .help = "the model, as MODEL.gguf (default: the demo model)"},
    {OPT_JSON, CMD(INSPECT), "--json", .help = "machine-readable output"},
    {OPT_RAM_LIST, CMD(INSPECT), "--ram", "GB,GB,...", .lo = 0, .hi = 1e6, .flags = CLI_NAME_FIRST,
     .expect = "GB values separated by commas (at most 16)",
     .help = "also the memory plan at each budget (e.g. 16,32,64,128):\n"
             "resident bytes, KV cache, experts mmap'd or streamed into\n"
             "N slots per layer, or why petrel would refuse"},
    {OPT_CTX, CMD(INSPECT), "-c, --ctx-size", "N", INT(1, 1 << 26), .flags = CLI_NAME_FIRST,
     .expect = "a context of {lo}..{hi} positions",
     .help = "context the plans budget a KV cache for (default: the\n"
             "model's training context, as the engine plans it)"},
    /* ----- pack and verify ----- */
    {OPT_FILE, CMD(PACK), "-o", "PATH",
     /* the file written */ .help = "write the pack (or the table) to PATH instead"},
    {OPT_TABLE_ONLY, CMD(PACK), "--table-only",
     .help = "write only the checksum table (MODEL.gguf.xsums): streamed\n"
             "reads of the GGUF are then checked without a pack"},
    {OPT_STOP_AFTER, CMD(PACK), "--stop-after", "K", INT(0, 1e18), .expect = IN_RANGE,
     .flags = CLI_HIDDEN, .help = "stop after K records as if killed (for tests)"},
    {OPT_PACK, CMD(VERIFY), "--pack", "PATH",
     .help = "the pack to check (default: the model's, where the engine\nlooks for it)"},
    /* ----- pull ----- */
    {OPT_WRITE_PACK, CMD(PULL), "--pack",
     .help = "write the expert pack after the download (petrel pack)"},
    {OPT_NO_WRITE_PACK, CMD(PULL), "--no-pack", .help = "do not offer to"},
    {OPT_JOBS, CMD(PULL), "-j, --jobs", "N", INT(1, 16), .expect = IN_RANGE,
     .help = "files downloaded at a time ({lo} to {hi}, default {})", .defn = PULL_DEFAULT_JOBS},
    /* ----- tokenize and detokenize ----- */
    {OPT_MODEL, CMD(TOKENIZE) | CMD(DETOKENIZE), "-m, --model", "FILE",
     .help = "GGUF with a vocabulary (a vocab-only file is enough;\n"
             "default: the demo model)"},
    {OPT_PROMPT, CMD(TOKENIZE), "-p, --prompt", "TEXT", .help = "text to tokenize, taken verbatim"},
    {OPT_FILE, CMD(TOKENIZE), "-f, --file", "FILE",
     .help = "read the text from FILE ('-' = stdin), verbatim"},
    {OPT_ADD_SPECIAL, CMD(TOKENIZE), "--add-special",
     .help = "add BOS/EOS as the vocabulary's metadata says"},
    {OPT_PARSE_SPECIAL, CMD(TOKENIZE), "--parse-special",
     .help = "turn special-token text (<|user|>, [gMASK], ...) into the\n"
             "token; by default it is tokenized as plain text"},
    {OPT_IDS, CMD(DETOKENIZE), "--ids", "LIST",
     .help = "token ids separated by commas or spaces; without it the\n"
             "ids are read from stdin"},
    {OPT_SKIP_SPECIAL, CMD(DETOKENIZE), "--skip-special",
     .help = "omit control tokens (<|user|>, <eos>, ...) from the text"},

    /* ----- the model (every command that opens an engine) ----- */
    {OPT_MODEL, CMD_ENGINE, "-m, --model", "FILE", .section = SEC_MODEL,
     .help = "GGUF model (any part of a split model)"},
    {OPT_HF, CMD_ENGINE, "-hf, --hf-repo", "OWNER/NAME[:QUANT]", .section = SEC_MODEL,
     .help = "a GGUF model of the Hugging Face Hub, from petrel's cache,\n"
             "pulled into it first when missing (see petrel pull)"},

    /* ----- sampling and the turn (the commands that generate text) ----- */
    {OPT_TEMP, CMD_TEXT, "--temp, --temperature", "T", NUM(0, 100), .section = SEC_SAMPLING,
     .expect = "a number from 0 (greedy) to 100", .help = "temperature; 0 = greedy (default {})",
     .rdef = RDEF_TEMP},
    {OPT_GREEDY, CMD_TEXT, "--greedy", .section = SEC_SAMPLING, .help = "same as --temp 0"},
    {OPT_TOP_K, CMD_TEXT, "--top-k", "K", INT(0, 1 << 24), .section = SEC_SAMPLING,
     .expect = "an integer from 0 (off) to {hi}",
     .help = "keep the K most likely tokens (0 = off; default {})", .rdef = RDEF_TOP_K},
    {OPT_TOP_P, CMD_TEXT, "--top-p", "P", NUM(1e-6, 1), .section = SEC_SAMPLING,
     .expect = "a number above 0, at most 1 (1 = off)",
     .help = "keep the smallest set with probability >= P (1 = off;\ndefault {})",
     .rdef = RDEF_TOP_P},
    {OPT_MIN_P, CMD_TEXT, "--min-p", "P", NUM(0, 1), .section = SEC_SAMPLING,
     .expect = "a number from 0 (off) to 1",
     .help = "drop tokens below P x the top probability (0 = off;\ndefault {})",
     .rdef = RDEF_MIN_P},
    {OPT_REPEAT_PENALTY, CMD_TEXT, "--repeat-penalty", "R", NUM(1e-3, 100), .section = SEC_SAMPLING,
     .expect = "a number from 0.001 to 100 (1 = off)",
     .help = "penalise tokens of the last --repeat-last-n (1 = off;\ndefault {})",
     .rdef = RDEF_REPEAT},
    {OPT_REPEAT_LAST_N, CMD_TEXT, "--repeat-last-n", "N", INT(0, 1 << 20), .section = SEC_SAMPLING,
     .expect = IN_RANGE, .help = "tokens the penalties look back over (default {})",
     .rdef = RDEF_LAST_N},
    {OPT_PRESENCE_PENALTY, CMD_TEXT, "--presence-penalty", "P", NUM(-100, 100),
     .section = SEC_SAMPLING, .expect = "a number from -100 to 100",
     .help = "subtract P from every token already seen (0 = off;\ndefault {})",
     .rdef = RDEF_PRESENCE},
    {OPT_FREQUENCY_PENALTY, CMD_TEXT, "--frequency-penalty", "F", NUM(-100, 100),
     .section = SEC_SAMPLING, .expect = "a number from -100 to 100",
     .help = "subtract F x count from every token already seen (0 = off;\ndefault {})",
     .rdef = RDEF_FREQUENCY},
    {OPT_SEED, CMD_TEXT, "--seed", "N", .kind = CLI_U64, .section = SEC_SAMPLING,
     .expect = "an integer from 0 to 18446744073709551615",
     .help =
         "random seed (default: a new one from the clock; generate\n--json and --stats print it)"},
    {OPT_STOP, CMD_TEXT, "--stop", "TEXT", .flags = CLI_NONEMPTY, .section = SEC_SAMPLING,
     .expect = "a non-empty string", .help = "stop when TEXT is generated (repeatable)"},
    {OPT_MAX_TOKENS, CMD_TEXT, "-n, --max-tokens, --n-predict", "N", INT(-1, 1 << 24),
     .section = SEC_SAMPLING,
     .expect = "an integer from 0 to {hi}, or -1 (until end of generation)",
     .help = "at most N tokens (default: until end of generation or the\n"
             "context is full)"},
    {OPT_THINK, CMD_TEXT, "--think", .section = SEC_SAMPLING,
     .help = "turn the model's reasoning on (default: the family's)"},
    {OPT_NO_THINK, CMD_TEXT, "--no-think", .section = SEC_SAMPLING, .help = "turn it off"},
    {OPT_CHAT_FORMAT, CMD_TEXT, "--chat-format", "NAME", .section = SEC_SAMPLING,
     .help = "{} instead of the model's own", .rdef = RDEF_CHAT_FORMATS},
    {OPT_DRAFT, CMD_TEXT, "--draft", "N", INT(0, 1 << 20), .section = SEC_SAMPLING,
     .expect = "an integer from 0 (no drafting) up; the MTP head drafts N tokens per forward",
     .help = "draft N tokens per forward with the model's MTP head and\n"
             "verify them in one pass (default {} when the model has one;\n"
             "0 = off; lossless: the output is the same)",
     .defn = TCLI_DEFAULT_DRAFT},
    {OPT_PARSE_SPECIAL_IN_CONTENT, CMD_TEXT, "--parse-special-in-content", .section = SEC_SAMPLING,
     .help = "special-token text inside messages and tool results\n"
             "(<|user|>, <tool_call>, ...) becomes the token, as in\n"
             "llama.cpp (default: only the chat template's markup does)"},

    /* ----- constrained decoding (the server takes grammars per request) ----- */
    {OPT_GRAMMAR, GEN_CHAT, "--grammar", "GBNF", .section = SEC_GRAMMAR,
     .help = "constrain the output to a GBNF grammar (llama.cpp's\nsyntax, start rule root)"},
    {OPT_GRAMMAR_FILE, GEN_CHAT, "--grammar-file", "FILE", .section = SEC_GRAMMAR,
     .help = "the grammar from FILE"},
    {OPT_JSON_SCHEMA, GEN_CHAT, "-j, --json-schema", "JSON", .section = SEC_GRAMMAR,
     .help = "constrain the output to JSON valid against the schema\n(the subset README.md lists)"},
    {OPT_JSON_SCHEMA_FILE, GEN_CHAT, "--json-schema-file", "FILE", .section = SEC_GRAMMAR,
     .help = "the schema from FILE"},

    /* ----- the engine ----- */
    {OPT_THREADS, CMD_ENGINE, "-t, --threads", "N", INT(1, 1024), .section = SEC_ENGINE,
     .expect = IN_RANGE " (leave -t out for all cores)", .help = "threads (default: all cores)"},
    {OPT_CTX, CMD_TEXT, "-c, --ctx-size", "N", INT(1, 1 << 26), .section = SEC_ENGINE,
     .expect = IN_RANGE,
     .help = "context positions (default: the model's training\n"
             "context; positions beyond the KV cache's share of\n"
             "--ram spill to the SSD; the cache is paid for as\n"
             "positions are used)"},
    {OPT_CTX, CMD(BENCH), "-c, --ctx-size", "N", INT(1, 1 << 26), .section = SEC_ENGINE,
     .expect = IN_RANGE, .help = "context positions (default: what the longest test needs)"},
    {OPT_CTX, CMD(PERPLEXITY), "-c, --ctx-size", "N", INT(1, 1 << 26), .section = SEC_ENGINE,
     .expect = IN_RANGE,
     .help = "tokens per chunk, the context of each evaluation (default\n"
             "{}; with --kl-divergence the base file's)",
     .defn = PT_DEFAULT_CTX},
    {OPT_CACHE_TYPE_K, CMD_ENGINE, "-ctk, --cache-type-k", "T", .section = SEC_ENGINE,
     .expect = "f32, f16, bf16, q8_0 or q4_0",
     .help = "KV cache type of keys: f32, f16 (default), bf16, q8_0,\n"
             "q4_0 (MLA models: the latent and rope key)"},
    {OPT_CACHE_TYPE_V, CMD_ENGINE, "-ctv, --cache-type-v", "T", .section = SEC_ENGINE,
     .expect = "f32, f16, bf16, q8_0 or q4_0",
     .help = "KV cache type of values (same types; unused by MLA)"},
    {OPT_KV_RAM_MB, CMD_ENGINE, "--kv-ram-mb", "N", NUM(0, 1073741824), .flags = CLI_ABOVE,
     .section = SEC_ENGINE, .expect = "a size in MiB above 0 (0.5 and 4096 are sizes)",
     .help = "the KV cache's RAM share in MiB (default: what --ram\n"
             "leaves); older positions of a longer context live\n"
             "in a file in the cache directory, removed on exit"},
    {OPT_BATCH, CMD_TEXT | CMD(BENCH), "-b, --batch-size", "N", INT(1, 1 << 16),
     .section = SEC_ENGINE, .expect = IN_RANGE,
     .help = "prompt rows per forward chunk: a streamed expert is read once\n"
             "per layer per chunk that routes to it (default: the memory\n"
             "plan's prompt block)"},
    {OPT_BATCH, CMD(PERPLEXITY), "-b, --batch-size", "N", INT(1, 1 << 16), .section = SEC_ENGINE,
     .expect = IN_RANGE,
     .help = "rows per forward (default: the memory plan's prompt block,\n"
             "at most {}); the numbers do not depend on it",
     .defn = PPL_MAX_BATCH},
    {OPT_KERNELS, CMD_ENGINE, "--kernels", "K", CHOICE("best|avx512|avx2|scalar"),
     .section = SEC_ENGINE, .expect = "best, avx512, avx2 or scalar",
     .help = "best (default), avx512, avx2 or scalar dot-product kernels"},
    {OPT_RAM, CMD_ENGINE, "--ram", "GB", NUM(1e-6, 1e9), .section = SEC_ENGINE,
     .expect = "a number of GB above 0 (at most 1e9)",
     .help = "memory budget (default: available memory and cgroup limit)"},
    {OPT_EXPERT_SLOTS, CMD_ENGINE, "--expert-slots", "N", INT(1, 1 << 20), .section = SEC_ENGINE,
     .expect = IN_RANGE, .help = "stream routed experts through N cache slots per MoE layer"},
    {OPT_MMAP_EXPERTS, CMD_ENGINE, "--mmap-experts", .section = SEC_ENGINE,
     .help = "read experts through the memory map (no cache of our own)"},
    {OPT_EXPERT_POLICY, CMD_ENGINE, "--expert-policy", "P", CHOICE("lfu|lru"),
     .section = SEC_ENGINE, .expect = "lfu or lru",
     .help = "cache replacement: lfu (default, with decay) or lru"},
    {OPT_IO, CMD_ENGINE, "--io", "B", CHOICE("auto|uring|pread"), .section = SEC_ENGINE,
     .expect = "auto, uring or pread", .help = "expert reads: auto (default), uring or pread"},
    {OPT_BUFFERED_IO, CMD_ENGINE, "--buffered-io", .section = SEC_ENGINE,
     .help = "read experts through the page cache instead of O_DIRECT"},
    {OPT_LOAD_MODE, CMD_ENGINE, "-lm, --load-mode", "M", CHOICE("mmap|ram|none|mlock"),
     .section = SEC_ENGINE, .expect = "mmap, ram (llama.cpp's none) or mlock",
     .help = "weights kept in RAM: mmap (default: page cache), ram\n"
             "(copied; llama.cpp's none) or mlock"},
    {OPT_PACK, CMD_ENGINE, "--pack", "PATH", .section = SEC_ENGINE,
     .help = "expert pack to read from (default: MODEL.gguf.xpack if valid)"},
    {OPT_NO_PACK, CMD_ENGINE, "--no-pack", .section = SEC_ENGINE,
     .help = "ignore expert packs, read experts from the GGUF"},
    {OPT_NO_VERIFY, CMD_ENGINE, "--no-verify", .section = SEC_ENGINE,
     .help = "do not check streamed experts against the pack's checksums"},
    {OPT_PIN_GB, CMD_ENGINE, "--pin-gb", "GB", NUM(1e-6, 1e9), .section = SEC_ENGINE,
     .expect = "a number of GB above 0 (at most 1e9)",
     .help = "cache memory for hot experts pinned from usage history"},
    {OPT_NO_PIN, CMD_ENGINE, "--no-pin", .section = SEC_ENGINE, .help = "pin nothing"},
    {OPT_PREFETCH, CMD_ENGINE, "--prefetch", .section = SEC_ENGINE,
     .help = "read the next layer's likely experts ahead (router lookahead)"},
    {OPT_TRACE, CMD_ENGINE, "--trace", "FILE", .section = SEC_ENGINE,
     .help = "write the routing trace (one line per layer request)"},
};

#define N_OPTS (sizeof OPTS / sizeof OPTS[0])

/* ===== Reading arguments ===== */

static const cli_cmd *find_cmd(const char *name) {
    for (size_t i = 0; i < CMD_COUNT; i++)
        if (!strcmp(CMDS[i].name, name)) return &CMDS[i];
    return &CMDS[0];
}

/* The subcommand's bit in cli_opt.cmds. */
static unsigned cmd_bit(const cli_cmd *c) {
    return 1u << (c - CMDS);
}

/* Is `arg` one of the ", "-separated spellings in names? */
static int has_name(const char *names, const char *arg) {
    const size_t n = strlen(arg);
    for (const char *p = names; *p;) {
        const size_t k = strcspn(p, ",");
        if (k == n && !memcmp(p, arg, n)) return 1;
        p += k;
        while (*p == ',' || *p == ' ')
            p++;
    }
    return 0;
}

static const cli_opt *find_opt(unsigned cmd, const char *arg) {
    for (size_t i = 0; i < N_OPTS; i++)
        if ((OPTS[i].cmds & cmd) && has_name(OPTS[i].names, arg)) return &OPTS[i];
    return NULL;
}

/* The index of word s in "a|b|c", or -1. */
static int choice_index(const char *choices, const char *s) {
    const size_t n = strlen(s);
    int k = 0;
    for (const char *p = choices;; k++) {
        const size_t w = strcspn(p, "|");
        if (w == n && !memcmp(p, s, n)) return k;
        if (!p[w]) return -1;
        p += w + 1;
    }
}

/* v->s read as its entry says into v. 0, or -1 for a bad value. */
static int read_value(const cli_opt *o, cli_val *v) {
    const char *s = v->s;
    char *end = NULL;
    errno = 0;
    switch (o->kind) {
    case CLI_INT:
        v->n = strtoll(s, &end, 10);
        return errno || end == s || *end || (double)v->n < o->lo || (double)v->n > o->hi ? -1 : 0;
    case CLI_NUM:
        v->f = strtod(s, &end);
        if (errno || end == s || *end || !(v->f <= o->hi)) return -1;
        return (o->flags & CLI_ABOVE ? v->f > o->lo : v->f >= o->lo) ? 0 : -1;
    case CLI_U64: {
        /* digits (and an optional '+') only: strtoull would take " -5" as 2^64 - 5 */
        const char *d = s[0] == '+' ? s + 1 : s;
        v->u = strtoull(s, &end, 10);
        return errno || end == s || *end || *d < '0' || *d > '9' ? -1 : 0;
    }
    case CLI_CHOICE: return (int)(v->n = choice_index(o->choices, s)) < 0 ? -1 : 0;
    default: return (o->flags & CLI_NONEMPTY) && !*s ? -1 : 0;
    }
}

/* Stop the command with a usage error (the message printed). */
static int stop(cli_args *a) {
    a->status = CLI_USAGE;
    return -1;
}

/* The next option or positional argument into v: 1; 0: no more; -1: the command stops with
 * exit status a->status (see cli_parse). */
static int next_arg(cli_args *a, cli_val *v) {
    memset(v, 0, sizeof *v);
    if (a->i >= a->argc) return 0;
    const char *arg = a->argv[a->i++];
    if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
        cli_help(stdout, a->name);
        a->status = CLI_OK;
        return -1;
    }
    if (arg[0] != '-' || !arg[1]) { /* a positional argument; "-" is standard input */
        if (a->n_args == a->cmd->max_args) {
            cli_usage_error(a->name, "unexpected argument '%s'", arg);
            return stop(a);
        }
        a->n_args++;
        v->id = OPT_ARG, v->s = v->name = arg;
        return 1;
    }
    const cli_opt *o = find_opt(cmd_bit(a->cmd), arg);
    if (!o) {
        fprintf(stderr, "petrel %s: unknown option '%s' (petrel %s --help lists the options)\n",
                a->name, arg, a->name);
        return stop(a);
    }
    v->id = o->id, v->opt = o, v->name = arg;
    if (!o->arg) return 1;
    if (a->i >= a->argc) {
        fprintf(stderr, "petrel %s: %s needs a value\n", a->name, arg);
        return stop(a);
    }
    v->s = a->argv[a->i++];
    if (read_value(o, v)) return cli_bad_value(a, v), stop(a);
    return 1;
}

int cli_parse(const char *cmd, int argc, char **argv, cli_option_fn fn, void *ud, int *status) {
    cli_args a = {.cmd = find_cmd(cmd), .argc = argc, .argv = argv, .i = 1};
    a.name = a.cmd->name;
    cli_val v;
    int r;
    while ((r = next_arg(&a, &v)) > 0)
        if (!fn || fn(ud, &a, &v)) {
            r = stop(&a);
            break;
        }
    *status = a.status;
    return r < 0 ? -1 : 0;
}

/* ===== Text with the entry's numbers ===== */

/* x as --help shows it: integers whole, the rest in at most six significant digits. */
static void fmt_num(double x, char *out, size_t cap) {
    if (x == floor(x) && fabs(x) < 1e15)
        snprintf(out, cap, "%.0f", x);
    else
        snprintf(out, cap, "%g", x);
}

void cli_chat_formats(const char *last_sep, char *out, size_t cap) {
    size_t n = 0;
    out[0] = 0;
    for (int i = 0; pt_chat_format_name(i) && n < cap; i++) {
        const char *sep = !i ? "" : pt_chat_format_name(i + 1) ? ", " : last_sep;
        n += (size_t)snprintf(out + n, cap - n, "%s%s", sep, pt_chat_format_name(i));
    }
}

/* The default {} shows. */
static void default_text(const cli_opt *o, char *out, size_t cap) {
    pt_sampling d;
    pt_sampling_default(&d);
    switch (o->rdef) {
    case RDEF_TEMP: fmt_num(d.temp, out, cap); return;
    case RDEF_TOP_K: fmt_num(d.top_k, out, cap); return;
    case RDEF_TOP_P: fmt_num(d.top_p, out, cap); return;
    case RDEF_MIN_P: fmt_num(d.min_p, out, cap); return;
    case RDEF_LAST_N: fmt_num(d.penalty_last_n, out, cap); return;
    case RDEF_REPEAT: fmt_num(d.repeat_penalty, out, cap); return;
    case RDEF_PRESENCE: fmt_num(d.presence_penalty, out, cap); return;
    case RDEF_FREQUENCY: fmt_num(d.frequency_penalty, out, cap); return;
    case RDEF_CHAT_FORMATS: cli_chat_formats(" or ", out, cap); return;
    default:
        if (o->def)
            snprintf(out, cap, "%s", o->def);
        else
            fmt_num(o->defn, out, cap);
    }
}

/* tmpl with {} (the default), {lo} and {hi} filled in, into out (cut at cap). */
static void expand(const cli_opt *o, const char *tmpl, char *out, size_t cap) {
    size_t n = 0;
    out[0] = 0;
    for (const char *p = tmpl; *p && n + 1 < cap;) {
        char num[64] = "";
        size_t skip = 0;
        if (!strncmp(p, "{}", 2))
            default_text(o, num, sizeof num), skip = 2;
        else if (!strncmp(p, "{lo}", 4))
            fmt_num(o->lo, num, sizeof num), skip = 4;
        else if (!strncmp(p, "{hi}", 4))
            fmt_num(o->hi, num, sizeof num), skip = 4;
        if (skip) {
            n += (size_t)snprintf(out + n, cap - n, "%s", num);
            p += skip;
        } else {
            out[n++] = *p++;
            out[n] = 0;
        }
    }
}

int cli_bad_value(const cli_args *a, const cli_val *v) {
    char want[512] = "";
    if (v->opt && v->opt->expect) expand(v->opt, v->opt->expect, want, sizeof want);
    if (v->opt && (v->opt->flags & CLI_NAME_FIRST))
        fprintf(stderr, "petrel %s: %s '%s': expected %s\n", a->name, v->name, v->s, want);
    else
        fprintf(stderr, "petrel %s: invalid value '%s' for %s: expected %s\n", a->name, v->s,
                v->name, want);
    return -1;
}

int cli_usage_error(const char *cmd, const char *fmt, ...) {
    const cli_cmd *c = find_cmd(cmd);
    va_list ap;
    fprintf(stderr, "petrel %s: ", c->name);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nusage: %s\n", c->usage);
    return CLI_USAGE;
}

/* ===== --help ===== */

#define HELP_COL 26 /* where an option's text starts */

static void section_heading(FILE *f, int section) {
    const char *model = CLI_DEFAULT_MODEL;
    switch (section) {
    case SEC_MODEL:
        fprintf(f, "model (default: the demo model, %s):\n", model ? model : "not found");
        return;
    case SEC_SAMPLING:
        fputs("sampling and the answer (defaults: the model's published values, else these):\n", f);
        return;
    case SEC_GRAMMAR: fputs("constrained decoding (one of these):\n", f); return;
    case SEC_ENGINE: fputs("engine:\n", f); return;
    default: fputs("options:\n", f);
    }
}

/* "  -c, --ctx-size N        text", continuation lines under the text. */
static void print_opt(FILE *f, const cli_opt *o) {
    char head[128], text[2048];
    snprintf(head, sizeof head, "  %s%s%s", o->names, o->arg ? " " : "", o->arg ? o->arg : "");
    expand(o, o->help ? o->help : "", text, sizeof text);
    const int fits = strlen(head) + 2 <= HELP_COL; /* two blanks at least before the text */
    fprintf(f, "%-*s", fits ? HELP_COL : 0, head);
    if (!fits) fprintf(f, "\n%*s", HELP_COL, "");
    for (const char *p = text; *p;) {
        const size_t k = strcspn(p, "\n");
        fprintf(f, "%.*s\n", (int)k, p);
        p += k;
        if (*p) fprintf(f, "%*s", HELP_COL, ""), p++;
    }
}

void cli_help(FILE *f, const char *cmd) {
    const cli_cmd *c = find_cmd(cmd);
    fprintf(f, "usage: %s\n", c->usage);
    if (c->about) fprintf(f, "%s\n", c->about);
    section_heading(f, SEC_OPTIONS);
    fprintf(f, "%-*s%s\n", HELP_COL, "  -h, --help", "this text");
    int section = SEC_OPTIONS;
    for (size_t i = 0; i < N_OPTS; i++) {
        const cli_opt *o = &OPTS[i];
        if (!(o->cmds & cmd_bit(c)) || (o->flags & CLI_HIDDEN)) continue;
        if (o->section != section) section_heading(f, section = o->section);
        print_opt(f, o);
    }
    if (c->notes) fprintf(f, "%s\n", c->notes);
}
