/* qtypes.h — on-disk layouts of the ggml tensor types petrel reads.
 *
 * Every block below is the exact byte layout ggml writes into GGUF files (see
 * ggml-common.h upstream for the specification; this is our own transcription of
 * those facts). Each layout has a static_assert on its size: a wrong size would
 * silently misread every tensor of that type. Half-precision fields are stored as
 * raw uint16_t bit patterns (IEEE fp16) and converted with fp16.h.
 *
 * The type ids and the table of block sizes live in format/ggml_types.h: they
 * are file-format knowledge the GGUF parser needs without the kernels.
 */
#ifndef PT_QTYPES_H
#define PT_QTYPES_H

#include <assert.h>
#include <stdint.h>

#include "format/ggml_types.h"

#define QK_K 256 /* weights per K-quant / IQ super-block */
#define QK4_0 32
#define QK4_1 32
#define QK5_0 32
#define QK5_1 32
#define QK8_0 32
#define QK8_1 32
#define QK4_NL 32
#define QK_MXFP4 32

typedef uint16_t pt_f16;  /* IEEE half, raw bits */
typedef uint16_t pt_bf16; /* bfloat16, raw bits */

/* ===== Legacy 32-weight blocks ===== */

typedef struct {
    pt_f16 d;              /* scale */
    uint8_t qs[QK4_0 / 2]; /* nibbles: low nibble = weight j, high = weight j+16 */
} block_q4_0;
static_assert(sizeof(block_q4_0) == 18, "block_q4_0 size");

typedef struct {
    pt_f16 d, m; /* scale, min */
    uint8_t qs[QK4_1 / 2];
} block_q4_1;
static_assert(sizeof(block_q4_1) == 20, "block_q4_1 size");

typedef struct {
    pt_f16 d;
    uint8_t qh[4]; /* 5th bit of each of the 32 weights */
    uint8_t qs[QK5_0 / 2];
} block_q5_0;
static_assert(sizeof(block_q5_0) == 22, "block_q5_0 size");

typedef struct {
    pt_f16 d, m;
    uint8_t qh[4];
    uint8_t qs[QK5_1 / 2];
} block_q5_1;
static_assert(sizeof(block_q5_1) == 24, "block_q5_1 size");

typedef struct {
    pt_f16 d;
    int8_t qs[QK8_0];
} block_q8_0;
static_assert(sizeof(block_q8_0) == 34, "block_q8_0 size");

typedef struct {
    pt_f16 d; /* scale */
    pt_f16 s; /* d * sum(qs) */
    int8_t qs[QK8_1];
} block_q8_1;
static_assert(sizeof(block_q8_1) == 36, "block_q8_1 size");

typedef struct {
    pt_f16 d;
    uint8_t qs[QK4_NL / 2]; /* indices into the 16-entry non-linear table */
} block_iq4_nl;
static_assert(sizeof(block_iq4_nl) == 18, "block_iq4_nl size");

typedef struct {
    uint8_t e;                /* E8M0 shared exponent */
    uint8_t qs[QK_MXFP4 / 2]; /* FP4 (E2M1) codes, low nibble = weight j, high = j+16 */
} block_mxfp4;
static_assert(sizeof(block_mxfp4) == 17, "block_mxfp4 size");

/* ===== K-quants: 256-weight super-blocks ===== */

typedef struct {
    uint8_t scales[QK_K / 16]; /* per 16 weights: low nibble scale, high nibble min */
    uint8_t qs[QK_K / 4];      /* 2-bit quants */
    pt_f16 d;                  /* super-block scale for scales */
    pt_f16 dmin;               /* super-block scale for mins */
} block_q2_K;
static_assert(sizeof(block_q2_K) == 84, "block_q2_K size");

typedef struct {
    uint8_t hmask[QK_K / 8]; /* high bit of each 3-bit quant */
    uint8_t qs[QK_K / 4];    /* low 2 bits */
    uint8_t scales[12];      /* 16 6-bit scales, packed */
    pt_f16 d;
} block_q3_K;
static_assert(sizeof(block_q3_K) == 110, "block_q3_K size");

typedef struct {
    pt_f16 d, dmin;
    uint8_t scales[12];   /* 8 6-bit scales + 8 6-bit mins, packed */
    uint8_t qs[QK_K / 2]; /* 4-bit quants */
} block_q4_K;
static_assert(sizeof(block_q4_K) == 144, "block_q4_K size");

typedef struct {
    pt_f16 d, dmin;
    uint8_t scales[12];
    uint8_t qh[QK_K / 8]; /* 5th bits */
    uint8_t qs[QK_K / 2];
} block_q5_K;
static_assert(sizeof(block_q5_K) == 176, "block_q5_K size");

typedef struct {
    uint8_t ql[QK_K / 2];     /* low 4 bits */
    uint8_t qh[QK_K / 4];     /* high 2 bits */
    int8_t scales[QK_K / 16]; /* 8-bit scales per 16 weights */
    pt_f16 d;
} block_q6_K;
static_assert(sizeof(block_q6_K) == 210, "block_q6_K size");

typedef struct {
    float d; /* activation scale (float, not half) */
    int8_t qs[QK_K];
    int16_t bsums[QK_K / 16]; /* sum of qs per 16 */
} block_q8_K;
static_assert(sizeof(block_q8_K) == 292, "block_q8_K size");

/* ===== IQ types (importance-matrix quants with lattice grids) ===== */

typedef struct {
    pt_f16 d;
    uint16_t qs[QK_K / 8];
} block_iq2_xxs;
static_assert(sizeof(block_iq2_xxs) == 66, "block_iq2_xxs size");

typedef struct {
    pt_f16 d;
    uint16_t qs[QK_K / 8];
    uint8_t scales[QK_K / 32];
} block_iq2_xs;
static_assert(sizeof(block_iq2_xs) == 74, "block_iq2_xs size");

typedef struct {
    pt_f16 d;
    uint8_t qs[QK_K / 4];
    uint8_t qh[QK_K / 32];
    uint8_t scales[QK_K / 32];
} block_iq2_s;
static_assert(sizeof(block_iq2_s) == 82, "block_iq2_s size");

typedef struct {
    pt_f16 d;
    uint8_t qs[3 * QK_K / 8];
} block_iq3_xxs;
static_assert(sizeof(block_iq3_xxs) == 98, "block_iq3_xxs size");

typedef struct {
    pt_f16 d;
    uint8_t qs[QK_K / 4];
    uint8_t qh[QK_K / 32];
    uint8_t signs[QK_K / 8];
    uint8_t scales[QK_K / 64];
} block_iq3_s;
static_assert(sizeof(block_iq3_s) == 110, "block_iq3_s size");

typedef struct {
    pt_f16 d;
    uint8_t qs[QK_K / 8];
    uint16_t qh[QK_K / 32];
} block_iq1_s;
static_assert(sizeof(block_iq1_s) == 50, "block_iq1_s size");

typedef struct {
    uint8_t qs[QK_K / 8];
    uint8_t qh[QK_K / 16];
    uint8_t scales[QK_K / 32]; /* also holds the fp16 super-block scale in its top nibbles */
} block_iq1_m;
static_assert(sizeof(block_iq1_m) == 56, "block_iq1_m size");

typedef struct {
    pt_f16 d;
    uint16_t scales_h;
    uint8_t scales_l[QK_K / 64];
    uint8_t qs[QK_K / 2];
} block_iq4_xs;
static_assert(sizeof(block_iq4_xs) == 136, "block_iq4_xs size");

#endif
