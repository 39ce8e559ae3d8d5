/* qt_random.h — deterministic random data for kernel tests and benchmarks:
 * valid weight blocks of the quantised types and random activations.
 *
 * Header-only (static functions) so that tests/test_simd.c and
 * bench/bench_kernels.c share it without a library symbol. "Valid" means what
 * a file could contain: every bit pattern of the quant fields is legal, so
 * blocks are random bytes with their fp16 / E8M0 scale fields overwritten by
 * finite, moderate values (random bytes there would give inf/nan). Types
 * not listed in qr_fill_weights get random bytes and are not used by callers.
 */
#ifndef PT_QT_RANDOM_H
#define PT_QT_RANDOM_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels/quant.h"

/* xorshift64*: fixed seed in, same stream out on every machine. */
typedef struct {
    uint64_t s;
} qr_rng;

static inline uint64_t qr_next(qr_rng *r) {
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 0x2545F4914F6CDD1DULL;
}

/* Uniform in [0, 1). */
static inline float qr_unit(qr_rng *r) {
    return (float)(qr_next(r) >> 40) * (1.0f / 16777216.0f);
}

/* Uniform in [-1, 1). */
static inline float qr_sym(qr_rng *r) {
    return 2.0f * qr_unit(r) - 1.0f;
}

/* A scale of random sign and magnitude in [2^-10, 2^-6), as fp16 bits. */
static inline pt_f16 qr_scale16(qr_rng *r) {
    float m = (0.0009765625f + 0.0146484375f * qr_unit(r));
    return qt_f32_to_f16((qr_next(r) & 1) ? -m : m);
}

static inline void qr_bytes(qr_rng *r, void *dst, size_t n) {
    uint8_t *p = dst;
    while (n >= 8) {
        uint64_t v = qr_next(r);
        memcpy(p, &v, 8);
        p += 8;
        n -= 8;
    }
    if (n) {
        uint64_t v = qr_next(r);
        memcpy(p, &v, n);
    }
}

/* Put a random fp16 scale at byte offset `off` of each of nb blocks of size bs. */
static inline void qr_scales_at(qr_rng *r, uint8_t *base, int64_t nb, size_t bs, size_t off) {
    for (int64_t i = 0; i < nb; i++) {
        pt_f16 h = qr_scale16(r);
        memcpy(base + (size_t)i * bs + off, &h, sizeof h);
    }
}

/* Fill n weights (whole blocks) of `type` at dst with random valid data. */
static inline void qr_fill_weights(qr_rng *r, uint32_t type, void *dst, int64_t n) {
    const qt_traits *t = qt_get(type);
    const int64_t nb = n / t->block;
    const size_t bs = (size_t)t->bytes;
    uint8_t *p = dst;
    if (type == QT_F32) {
        float *f = dst;
        for (int64_t i = 0; i < n; i++)
            f[i] = qr_sym(r);
        return;
    }
    if (type == QT_F16 || type == QT_BF16) {
        pt_f16 *h = dst;
        for (int64_t i = 0; i < n; i++)
            h[i] = type == QT_F16 ? qt_f32_to_f16(qr_sym(r)) : qt_f32_to_bf16(qr_sym(r));
        return;
    }
    qr_bytes(r, dst, (size_t)nb * bs);
    switch (type) {
    case QT_Q4_0:
    case QT_Q5_0:
    case QT_Q8_0:
    case QT_IQ4_NL:
    case QT_IQ2_XXS:
    case QT_IQ2_XS:
    case QT_IQ2_S:
    case QT_IQ3_XXS:
    case QT_IQ3_S:
    case QT_IQ1_S:
    case QT_IQ4_XS: qr_scales_at(r, p, nb, bs, 0); break;
    case QT_Q4_1:
    case QT_Q5_1:
    case QT_Q4_K:
    case QT_Q5_K:
        qr_scales_at(r, p, nb, bs, 0);
        qr_scales_at(r, p, nb, bs, 2);
        break;
    case QT_Q2_K:
        qr_scales_at(r, p, nb, bs, offsetof(block_q2_K, d));
        qr_scales_at(r, p, nb, bs, offsetof(block_q2_K, dmin));
        break;
    case QT_Q3_K: qr_scales_at(r, p, nb, bs, offsetof(block_q3_K, d)); break;
    case QT_Q6_K: qr_scales_at(r, p, nb, bs, offsetof(block_q6_K, d)); break;
    case QT_MXFP4:
        for (int64_t i = 0; i < nb; i++)
            p[(size_t)i * bs] = (uint8_t)(118 + qr_next(r) % 16);
        break;
    case QT_IQ1_M: /* the fp16 scale: nibble k in the top of 16-bit scale word k */
        for (int64_t i = 0; i < nb; i++) {
            const pt_f16 h = qr_scale16(r);
            uint8_t *sc = p + (size_t)i * bs + offsetof(block_iq1_m, scales);
            for (int k = 0; k < 4; k++)
                sc[2 * k + 1] = (uint8_t)((sc[2 * k + 1] & 15) | ((h >> (4 * k)) & 15) << 4);
        }
        break;
    default: break;
    }
}

/* n random activations, roughly normal (sum of uniforms) with a few outliers,
 * like a hidden state. */
static inline void qr_fill_acts(qr_rng *r, float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float v = qr_sym(r) + qr_sym(r) + qr_sym(r);
        if (qr_next(r) % 97 == 0) v *= 8.0f;
        x[i] = v;
    }
}

#endif
