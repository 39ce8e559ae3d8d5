/* kv.c — KV cache element types (see kv.h). */
#include "kv.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common.h"
#include "kernels/qtypes.h"
#include "kernels/quant.h"
#include "nn/ops.h"

int kv_type_ok(uint32_t type) {
    return type == QT_F32 || type == QT_F16 || type == QT_BF16 || type == QT_Q8_0 ||
           type == QT_Q4_0;
}

int kv_block(uint32_t type) {
    return type == QT_Q8_0 || type == QT_Q4_0 ? 32 : 1;
}

size_t kv_bytes(uint32_t type, int64_t n) {
    uint64_t b = 0;
    PT_ASSERT(qt_row_bytes(type, n, &b) == 0);
    return (size_t)b;
}

/* q4_0 as ggml stores a row (quantize_row_q4_0_ref): the value of largest
 * magnitude maps to -8, d = max / -8, q = min(15, (int)(x / d + 8.5)). */
static void store_q4_0(const float *x, int64_t n, block_q4_0 *y) {
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < 32; j++)
            if (amax < fabsf(x[j])) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        const float d = max / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = qt_f32_to_f16(d);
        for (int j = 0; j < 16; j++) {
            const int a = (int)(int8_t)(x[j] * id + 8.5f), b = (int)(int8_t)(x[j + 16] * id + 8.5f);
            y[i].qs[j] = (uint8_t)((a < 15 ? a : 15) | (b < 15 ? b : 15) << 4);
        }
    }
}

void kv_store(uint32_t type, const float *x, int64_t n, void *dst) {
    if (type == QT_F32)
        memcpy(dst, x, (size_t)n * sizeof(float));
    else if (type == QT_Q4_0)
        store_q4_0(x, n, dst);
    else
        qt_quantize_act_ref(type, x, dst, n); /* fp16/bf16 rounding; ggml-cpu's q8_0 rows */
}

/* fp16 -> float by table: value rows are decoded once per (query, head, key) */
static float f16_table[65536];
static pthread_once_t f16_once = PTHREAD_ONCE_INIT;
static void f16_table_init(void);

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
/* F16C converts exactly, as the table does: the same floats, 8 at a time. */
__attribute__((target("avx,f16c"))) static void f16_load_f16c(const uint16_t *h, int64_t n,
                                                              float *dst) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i))));
    for (; i < n; i++)
        dst[i] = f16_table[h[i]];
}
static int f16c_ok = -1; /* set once in f16_table_init */
#define HAVE_F16C_PATH 1
#endif

static void f16_table_init(void) {
    for (uint32_t i = 0; i < 65536; i++)
        f16_table[i] = qt_f16_to_f32((pt_f16)i);
#ifdef HAVE_F16C_PATH
    f16c_ok = qt_isa_detect() >= QT_ISA_AVX2; /* AVX2 level includes F16C (dispatch.c) */
#endif
}

void kv_load(uint32_t type, const void *src, int64_t n, float *dst) {
    if (type == QT_F32) {
        memcpy(dst, src, (size_t)n * sizeof(float));
    } else if (type == QT_F16) {
        pthread_once(&f16_once, f16_table_init);
        const uint16_t *h = src;
#ifdef HAVE_F16C_PATH
        if (f16c_ok) {
            f16_load_f16c(h, n, dst);
            return;
        }
#endif
        for (int64_t i = 0; i < n; i++)
            dst[i] = f16_table[h[i]];
    } else if (type == QT_BF16) {
        const uint16_t *h = src;
        for (int64_t i = 0; i < n; i++) {
            const uint32_t u = (uint32_t)h[i] << 16;
            memcpy(dst + i, &u, 4);
        }
    } else {
        qt_dequant_ref(type, src, dst, n);
    }
}

static uint32_t query_type(uint32_t type) {
    return type == QT_F32 ? QT_F32 : (uint32_t)qt_get(type)->act_type;
}

size_t kv_query_bytes(uint32_t type, int64_t n) {
    return kv_bytes(query_type(type), n);
}

void kv_query(uint32_t type, const float *q, int64_t n, void *qbuf) {
    if (type == QT_F32)
        memcpy(qbuf, q, (size_t)n * sizeof(float));
    else
        qt_quantize_act_ref(query_type(type), q, qbuf, n);
}

float kv_dot(uint32_t type, const void *qbuf, const void *krow, int64_t n) {
    if (type == QT_F32) return nn_dot_f32(qbuf, krow, (int)n);
    return qt_dot_best(type)(krow, qbuf, n);
}

void kv_round(uint32_t type, float *x, int64_t n) {
    if (type == QT_F32) return;
    uint8_t buf[4 * 1024];
    PT_ASSERT(n <= 1024 && n % kv_block(type) == 0);
    kv_store(type, x, n, buf);
    kv_load(type, buf, n, x);
}

float kv_weight(uint32_t type, float p) {
    if (type == QT_F16) return qt_f16_to_f32(qt_f32_to_f16(p));
    if (type == QT_BF16) return qt_bf16_to_f32(qt_f32_to_bf16(p));
    return p;
}

/* ===== The arena ===== */

static size_t page_size(void) {
    const long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

int kv_arena_init(kv_arena *a, size_t cap) {
    const size_t pg = page_size();
    *a = (kv_arena){0};
    cap = (cap + pg - 1) / pg * pg;
    if (!cap) cap = pg;
#ifdef MAP_NORESERVE
    const int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
#else
    const int flags = MAP_PRIVATE | MAP_ANONYMOUS;
#endif
    void *p = mmap(NULL, cap, PROT_READ | PROT_WRITE, flags, -1, 0);
    if (p == MAP_FAILED) return -1;
    a->base = p;
    a->cap = cap;
    return 0;
}

void *kv_arena_take(kv_arena *a, size_t bytes) {
    const size_t pg = page_size();
    const size_t n = (bytes + pg - 1) / pg * pg;
    if (!a->base || n > a->cap - a->used) return NULL;
    void *p = a->base + a->used;
    a->used += n ? n : pg;
    return p; /* anonymous pages read as zero until written */
}

size_t kv_arena_resident(const kv_arena *a) {
    if (!a->base) return 0;
    const size_t pg = page_size(), n = a->cap / pg;
#ifdef __APPLE__
    char *vec = malloc(n);
#else
    unsigned char *vec = malloc(n);
#endif
    if (!vec || mincore(a->base, a->cap, vec)) {
        free(vec);
        return 0;
    }
    size_t r = 0;
    for (size_t i = 0; i < n; i++)
        r += (size_t)(vec[i] & 1);
    free(vec);
    return r * pg;
}

void kv_arena_free(kv_arena *a) {
    if (a->base) munmap(a->base, a->cap);
    *a = (kv_arena){0};
}
