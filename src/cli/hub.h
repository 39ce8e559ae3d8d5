/* hub.h — models from the Hugging Face Hub (src/cli/pull.c): `petrel pull`, `petrel list`,
 * and the `-hf REPO[:QUANT]` flag of chat, generate and serve.
 *
 * The cache: $PETREL_CACHE, else $XDG_CACHE_HOME/petrel/models, else ~/.cache/petrel/models;
 * a file of repository OWNER/NAME at PATH (its path in the repository) is
 * CACHE/OWNER/NAME/PATH, and CACHE/OWNER/NAME/PATH.part while it downloads. A file appears
 * under its final name only once all its bytes are there and their SHA-256 matches the one the
 * Hub lists, so any file without `.part` is complete and checked.
 */
#ifndef PT_CLI_HUB_H
#define PT_CLI_HUB_H

#include <stddef.h>

/* The Hub asked when HF_ENDPOINT is not set. */
#define HUB_DEFAULT_ENDPOINT "https://huggingface.co"

/* The models cache folder (above) into out; 0, or -1 when no folder can be named. */
int hub_models_dir(char *out, size_t cap);

/* The local path of the model REPO[:QUANT] names (its first part when split): taken from the
 * cache when every part is there, otherwise pulled first (progress on stderr). Prints its
 * errors; returns 0 (path set), CLI_ERROR, CLI_USAGE (a malformed spec) or 130 (interrupted,
 * what was downloaded kept for the next try). */
int hub_model_path(const char *spec, char *path, size_t cap);

#endif
