/* cli.h — the petrel subcommands, each a main-like function.
 *
 * Conventions every subcommand follows: results to stdout, everything else to
 * stderr; an error is one line "petrel: ..." on stderr and exit status 1; bad
 * usage is one line "petrel SUBCOMMAND: ..." (a missing or extra argument adds
 * the usage line) and exit status 2. Options: options.h.
 */
#ifndef PT_CLI_H
#define PT_CLI_H

#include <stdio.h>

#define CLI_OK 0
#define CLI_ERROR 1
#define CLI_USAGE 2

/* The model petrel uses without -m: the demo model shipped in the
 * repository (models/petrel-demo-glm.gguf), found next to the binary's build
 * folder or under the current directory; PETREL_MODEL overrides it. NULL
 * when none is there. */
const char *cli_default_model(void);
#define CLI_DEFAULT_MODEL cli_default_model()

/* The user's cache folder for expert packs and usage statistics:
 * $XDG_CACHE_HOME/petrel, else ~/.cache/petrel; NULL when neither is set. */
const char *cli_cache_dir(void);

int cmd_inspect(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_pack(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_pull(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_list(int argc, char **argv);
int cmd_detokenize(int argc, char **argv);

/* Print "petrel: <msg>" to stderr; returns CLI_ERROR. */
int cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
