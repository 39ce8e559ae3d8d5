/* xpack.h — the expert pack: a sidecar file holding every routed expert of a
 * GGUF model as one contiguous, 4 KiB-aligned record, so that loading an
 * expert is a single aligned read instead of three scattered ones.
 *
 * Layout (little-endian):
 *   header     magic "PTXPACK\0", u32 version (2), u32 n_layers,
 *              u64 source_size, u8 fingerprint[32], u64 n_records,
 *              u64 records_done, u64 sums_offset, u64 data_offset, u32 complete,
 *              u32 reserved, u64 source_mtime_ns, u64 source_inode (of the
 *              first file), u64 source_stat (XXH3-64 over every file's size,
 *              mtime and inode), u64 reserved (128 bytes so far), then per
 *              layer: u32 n_expert, u32 n_mats, u64 mat_bytes[3],
 *              u64 record_bytes, u64 first_record (48 bytes)
 *   sums       u64 per record: xpack_checksum of its slices, which are the
 *              GGUF's bytes of that expert, so the table checks reads from
 *              either file
 *   records    layer-major, expert-minor; payload = the exact GGUF bytes of the
 *              expert's gate|up|down (or gate_up|down) slices, zero-padded to
 *              record_bytes (a multiple of 4096)
 * The fingerprint is SHA-256 over the source's file sizes and every file's
 * header (metadata and tensor directory, [0, data_offset)). At open a pack
 * whose source size, fingerprint, modification time or inode differ from the
 * model's is stale and not used, so re-quantised or edited weights behind an
 * unchanged header never meet an old pack (an edit that also restores the
 * mtime in place is caught by xpack_verify, which compares every byte). A
 * version-1 pack (SHA-256 sums, no mtime/inode) is refused as stale.
 * Lossless by construction: records are copies.
 *
 * A checksum table (MODEL.gguf.xsums, `petrel pack --table-only`) is the same
 * file without records: flags (the u32 at 92) has XPACK_TABLE_ONLY and the file
 * ends at data_offset. It checks streamed reads of a model that has no pack.
 *
 * Writing goes to PATH.partial; every few hundred MB the data is synced and
 * records_done (a journal) updated, so an interrupted run (even kill -9)
 * resumes at a record boundary; the finished file is synced and renamed.
 */
#ifndef PT_FORMAT_XPACK_H
#define PT_FORMAT_XPACK_H

#include <stdint.h>

#include "format/gguf.h"
#include "petrel.h" /* PT_PATH_MAX */

#define XPACK_ALIGN 4096
#define XPACK_TABLE_ONLY 1u          /* header flag: a checksum table, no records */
#define XPACK_SUM_PIECE (256u << 10) /* bytes of a checksum piece (see xpack_checksum) */

/* The routed-expert tensors of one model layer (n_mats = 0: none). */
typedef struct xp_layer_desc {
    int n_mats;                 /* 3: gate, up, down; 2: fused gate_up, down */
    const gguf_tensor *mats[3]; /* stacked: ne[2] = experts */
} xp_layer_desc;

typedef struct xpack_layer {
    uint32_t n_expert, n_mats;
    uint64_t mat_bytes[3]; /* one expert's slice of each matrix */
    uint64_t record_bytes; /* payload rounded up to XPACK_ALIGN */
    uint64_t first_record; /* index of the layer's expert 0 */
} xpack_layer;

typedef struct xpack {
    char *path;
    int fd; /* read-only */
    uint64_t size;
    uint32_t n_layers;
    xpack_layer *layers; /* [n_layers] */
    uint64_t n_records;
    uint64_t sums_offset, data_offset;
    int table_only; /* a checksum table: sums only, no records to read */
    uint64_t *sums; /* [n_records] XXH3-64 of each record's payload (= the GGUF's expert bytes) */
} xpack;

/* The checksum of expert e of layer l (layer-major record index). */
static inline uint64_t xpack_sum(const xpack *p, int layer, int expert) {
    return p->sums[p->layers[layer].first_record + (uint64_t)expert];
}

/* The checksum of one expert: each of its n_mats slices (in order) is cut
 * into XPACK_SUM_PIECE-byte pieces (the last one shorter), each piece hashed
 * with XXH3-64, and the checksum is XXH3-64 over those values (u64,
 * little-endian, in order). Pieces let the engine hash a record on all its
 * threads; the value does not depend on how many there are. */
uint64_t xpack_checksum(const uint8_t *const mats[], const uint64_t bytes[], int n_mats);

/* Fingerprint of a model (see above). 0, or -1 with err. */
int xpack_fingerprint(const gguf_ctx *g, uint8_t out[32], pt_err *err);

/* Progress of pack/verify: bytes done of total. */
typedef void (*xpack_progress_fn)(uint64_t done, uint64_t total, void *user);

/* Write (or resume) the pack of model g at path; table_only: the checksum
 * table alone (from a full read of the model). stop_after >= 0 stops after
 * that many records as if killed (tests); -1 runs to the end. 0, or -1 with err. */
int xpack_write(const gguf_ctx *g, const xp_layer_desc *layers, int n_layers, const char *path,
                int table_only, xpack_progress_fn progress, void *user, int64_t stop_after,
                pt_err *err);

/* Open a pack and check it belongs to model g (magic, version, completeness,
 * source size, fingerprint, mtime and inode, layout, file size). NULL with err
 * saying why it cannot be used ("stale pack: ..." when made from another model
 * file, an older version of this one, or by an older petrel). */
xpack *xpack_open(const char *path, const gguf_ctx *g, const xp_layer_desc *layers, int n_layers,
                  pt_err *err);
void xpack_close(xpack *p);

/* File offset of record (layer, expert). */
uint64_t xpack_record_offset(const xpack *p, int layer, int expert);

/* Check every record: checksum of the stored bytes, and bytes equal to the
 * model's (a full read of both files); for a table, the model's bytes against
 * their checksums. 0 when valid, -1 with err naming the
 * first bad record. */
int xpack_verify(const xpack *p, const gguf_ctx *g, const xp_layer_desc *layers,
                 xpack_progress_fn progress, void *user, pt_err *err);

/* Where the pack of a model lives: next to it (MODEL.gguf.xpack, first split
 * file for split models) or in cache_dir (NULL: none; front ends pass
 * $XDG_CACHE_HOME/petrel or ~/.cache/petrel). Writes up to two candidate
 * paths; returns how many. */
int xpack_candidates(const char *model_path, const char *cache_dir, char out[2][PT_PATH_MAX]);
/* The same places for a checksum table (MODEL.gguf.xsums). */
int xpack_table_candidates(const char *model_path, const char *cache_dir, char out[2][PT_PATH_MAX]);

#endif
