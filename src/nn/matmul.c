/* matmul.c — batched, threaded y = W x over quantised weights (see matmul.h). */
#include "matmul.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "kernels/quant.h"

int mm_ctx_init(mm_ctx *c, tp_pool *pool, int max_isa, int64_t max_rows, int64_t max_in) {
    c->pool = pool;
    c->max_isa = max_isa;
    /* the largest conversion is F32 (4 bytes per value); Q8_K needs 292/256 */
    uint64_t per_row = (uint64_t)max_in * 4 + 512;
    c->act_cap = per_row * (uint64_t)max_rows;
    c->act = pt_scratch_alloc(c->act_cap);
    return c->act ? 0 : -1;
}

void mm_ctx_free(mm_ctx *c) {
    pt_scratch_free(c->act);
    c->act = NULL;
}

typedef struct mm_job {
    const mm_weight *w;
    const uint8_t *act;
    uint64_t act_row_bytes;
    int n_rows;
    float *y;
    int64_t ldy;
    qt_dot_fn dot;
    qt_dot4_fn dot4;  /* NULL: rows one at a time */
    qt_tile_fn tile;  /* NULL: none; else 4 weight rows x 4 activation rows at once */
    qt_tile_fn tile8; /* NULL: none; else 8 weight rows x 4 (the widened rows' when widening) */
    /* non-NULL: a tile's weight rows are first widened to Q8_0 blocks and wide_tile (the
     * level's Q8_0 tile, the same bits) runs on them (qt_widen_fn) */
    qt_widen_fn widen;
    qt_tile_fn wide_tile;
    qt_gemv_fn gemv; /* NULL: none; else QT_GEMV_ROWS weight rows x a lone activation row */
    /* non-NULL: the tile's (tile8's) calls go to ptile (ptile8), on the panel of each group
     * of four activation rows (panel_group bytes a group, from panel) */
    qt_ptile_fn ptile, ptile8;
    const uint8_t *panel;
    uint64_t panel_group;
    atomic_long next; /* output rows claimed so far (four or more activation rows) */
} mm_job;

/* Activation rows from which widening a weight tile once beats decoding it in each of the
 * n_rows / 4 tile calls (two calls: the widening costs about one call's decoding). */
#define MM_WIDEN_ROWS 8

/* Weight bytes a worker keeps hot while it passes over groups of four
 * activation rows: about half of a 48 KiB L1 data cache. */
#define MM_TILE_BYTES 24576

/* Panels (qt_ptile) start on a cache line. */
#define PANEL_ALIGN 64
/* The bytes of a group's panel of n_in values. */
static uint64_t panel_group(const qt_ptile *p, int64_t n_in) {
    return (uint64_t)(n_in / p->block_values) * p->block_bytes;
}
/* The panel kernels of weight type `type` in a matmul of n_rows rows at level max_isa (the
 * Q8_0 ones when the type's rows are widened to Q8_0 blocks): 1 and *p, or 0: none. */
static int mm_ptile(uint32_t type, int max_isa, int n_rows, qt_ptile *p) {
    if (n_rows < 4 || !qt_mm_dot4_upto(type, max_isa) || !qt_mm_tile_upto(type, max_isa)) return 0;
    if (n_rows >= MM_WIDEN_ROWS && qt_mm_widen_upto(type, max_isa)) type = QT_Q8_0;
    return qt_mm_ptile_upto(type, max_isa, p);
}
/* The offset from act, at or after at, of the next panel. */
static uint64_t panel_at(const uint8_t *act, uint64_t at) {
    const uintptr_t p = (uintptr_t)(act + at);
    return at + (uint64_t)((PANEL_ALIGN - p % PANEL_ALIGN) % PANEL_ALIGN);
}

/* A tile call: weight rows from wr (ws apart) against a group of four activation rows, its
 * converted rows act (tile) or its panel (ptile, when not NULL), outputs from y. */
static inline void run_tile(const mm_job *j, qt_tile_fn tile, qt_ptile_fn ptile, const uint8_t *wr,
                            uint64_t ws, const uint8_t *act, const uint8_t *panel, float *y) {
    if (ptile)
        ptile(wr, ws, panel, j->w->n_in, y, j->ldy);
    else
        tile(wr, ws, act, j->act_row_bytes, j->w->n_in, y, j->ldy);
}

/* The first output row of the next tile of `tile` rows no thread has claimed yet. */
static long next_tile(mm_job *j, long tile) {
    return atomic_fetch_add_explicit(&j->next, tile, memory_order_relaxed);
}

/* Output rows [lo, hi) for every activation row. With a four-row kernel the
 * weight rows go in tiles of ~MM_TILE_BYTES, and each tile meets the
 * activation rows four at a time, so a weight block is read and unpacked once
 * per four activation rows; with a tile kernel, four weight rows at a time meet
 * each group of four activation rows (an activation block is loaded once per
 * four weight rows too). What is left over goes through the four-row kernel
 * (weight rows past a multiple of 4) or one by one (weight rows past the tiles
 * against the last n_rows % 4 activation rows; those rows, when two or three,
 * go through the tile first, padded to four; a lone last one, as in every decode step, goes
 * through the gemv kernel, QT_GEMV_ROWS weight rows at a time). Every output
 * is the same dot product either way (qt_dot4_fn, qt_tile_fn and qt_gemv_fn are
 * bit-identical to qt_dot_fn). Where the type has an eight-weight-row tile
 * (qt_mm_tile8_upto), it takes the weight rows eight at a time first. Where the
 * job has panel tiles (ptile, ptile8), they run in the tiles' place on each
 * group's panel (run_tile). With
 * widening (j->widen), the tile's weight rows are decoded once into Q8_0
 * blocks, sized to the tile's byte budget.
 * A decode step's rows (fewer than four activation rows) are split into one
 * range per thread, each streamed from memory in order; with four or more,
 * threads claim tiles of output rows as they finish them, so a thread that was
 * preempted or slowed leaves its share to the others instead of holding them
 * at the end of the pool job (every output row is the same bits whoever
 * computes it). */
static void mm_worker(void *arg, int ith, int nth) {
    mm_job *j = arg;
    const mm_weight *w = j->w;
    const int claim = j->n_rows >= 4 && nth > 1;
    long lo = 0, hi = (long)w->n_out;
    if (!claim) tp_range((long)w->n_out, ith, nth, &lo, &hi);
    const int n4 = j->dot4 ? j->n_rows & ~3 : 0;
    const uint64_t wide_row = (uint64_t)(w->n_in / 32) * sizeof(block_q8_0);
    const uint64_t tile_row = j->widen ? wide_row : w->row_bytes;
    long tile = tile_row < MM_TILE_BYTES ? (long)(MM_TILE_BYTES / tile_row) : 1;
    if (j->tile) { /* whole tiles of the widest kernel */
        const long q = j->tile8 ? 8 : 4;
        tile = tile < q ? q : tile / q * q;
    }
    /* the last activation row, when alone (a decode step: the only one), meets the weight
     * rows QT_GEMV_ROWS at a time */
    const qt_gemv_fn gemv = j->n_rows - n4 == 1 ? j->gemv : NULL;
    if (gemv) tile = tile < QT_GEMV_ROWS ? QT_GEMV_ROWS : tile / QT_GEMV_ROWS * QT_GEMV_ROWS;
    /* the last n_rows % 4 activation rows, when two or three: padded to four (the last one
     * repeated, in pad) they go through the tile, whose outputs (pout, tile columns a row)
     * are copied out for the real rows; one-row dots cost more than a tile per two rows */
    const int rem = j->n_rows - n4;
    const int pad_tail = j->tile && j->dot4 && rem >= 2;
    uint8_t *pad = pad_tail ? malloc(4 * (size_t)j->act_row_bytes) : NULL;
    float *pout = pad ? malloc(4 * (size_t)tile * sizeof(float)) : NULL;
    if (pad_tail && (!pad || !pout)) { /* out of memory: the one-row path */
        free(pad);
        free(pout);
        pad = NULL;
        pout = NULL;
    }
    for (int k = 0; pad && k < 4; k++)
        memcpy(pad + (size_t)k * j->act_row_bytes,
               j->act + (uint64_t)(n4 + (k < rem ? k : rem - 1)) * j->act_row_bytes,
               j->act_row_bytes);
    uint8_t *wide = j->widen && (n4 || pad) ? malloc((size_t)tile * wide_row) : NULL;
    /* j->tile8 reads widened rows when widening; without the buffer the type's own tiles run */
    const qt_tile_fn tile8 = j->widen ? NULL : j->tile8;
    for (long o0 = claim ? next_tile(j, tile) : lo; o0 < hi;
         o0 = claim ? next_tile(j, tile) : o0 + tile) {
        const long o1 = o0 + tile < hi ? o0 + tile : hi, o4 = o0 + ((o1 - o0) & ~3L);
        for (long o = o0; wide && o < o4; o++)
            j->widen(w->data + (uint64_t)o * w->row_bytes, w->n_in, wide + (o - o0) * wide_row);
        for (int t = 0; t < n4; t += 4) {
            const uint8_t *act = j->act + (uint64_t)t * j->act_row_bytes;
            const uint8_t *panel = j->panel + (uint64_t)(t / 4) * j->panel_group;
            float *y = j->y + (int64_t)t * j->ldy;
            long o = o0;
            if (wide) {
                for (; j->tile8 && o + 8 <= o4; o += 8)
                    run_tile(j, j->tile8, j->ptile8, wide + (o - o0) * wide_row, wide_row, act,
                             panel, y + o);
                for (; o < o4; o += 4)
                    run_tile(j, j->wide_tile, NULL, wide + (o - o0) * wide_row, wide_row, act,
                             panel, y + o);
            } else if (j->tile) {
                for (; tile8 && o + 8 <= o1; o += 8)
                    run_tile(j, tile8, j->ptile8, w->data + (uint64_t)o * w->row_bytes,
                             w->row_bytes, act, panel, y + o);
                for (; o + 4 <= o1; o += 4)
                    run_tile(j, j->tile, j->ptile, w->data + (uint64_t)o * w->row_bytes,
                             w->row_bytes, act, panel, y + o);
            }
            for (; o < o1; o++) {
                float r[4];
                j->dot4(w->data + (uint64_t)o * w->row_bytes, act, j->act_row_bytes, w->n_in, r);
                for (int k = 0; k < 4; k++)
                    j->y[(int64_t)(t + k) * j->ldy + o] = r[k];
            }
        }
        long o = o0;
        if (pad) {
            for (; o + 4 <= o1; o += 4) {
                if (wide)
                    j->wide_tile(wide + (o - o0) * wide_row, wide_row, pad, j->act_row_bytes,
                                 w->n_in, pout + (o - o0), tile);
                else
                    j->tile(w->data + (uint64_t)o * w->row_bytes, w->row_bytes, pad,
                            j->act_row_bytes, w->n_in, pout + (o - o0), tile);
            }
            for (int k = 0; k < rem; k++)
                memcpy(j->y + (int64_t)(n4 + k) * j->ldy + o0, pout + (int64_t)k * tile,
                       (size_t)(o - o0) * sizeof(float));
        }
        for (; gemv && o + QT_GEMV_ROWS <= o1; o += QT_GEMV_ROWS)
            gemv(w->data + (uint64_t)o * w->row_bytes, w->row_bytes,
                 j->act + (uint64_t)n4 * j->act_row_bytes, w->n_in,
                 j->y + (int64_t)n4 * j->ldy + o);
        for (; o < o1; o++) {
            const uint8_t *row = w->data + (uint64_t)o * w->row_bytes;
            for (int t = n4; t < j->n_rows; t++)
                j->y[(int64_t)t * j->ldy + o] =
                    j->dot(row, j->act + (uint64_t)t * j->act_row_bytes, w->n_in);
        }
    }
    free(wide);
    free(pad);
    free(pout);
}

/* Quantising the activation rows for the dot products: in the workers too
 * when there are several (a prompt batch, several tasks), else it would be
 * the serial part. Row r of the flattened (task, row) list is task r / rows's. */
typedef struct act_job {
    const mm_task *tasks;
    const uint64_t *arb, *off; /* per task: converted row bytes, offset in act */
    const uint8_t *same;       /* per task: 1 = the previous task's conversion serves */
    /* per task: its conversion's panel at poff in act (the rows of whole groups of four),
     * written by pan[i].row (NULL: none) */
    const qt_ptile *pan;
    const uint64_t *poff;
    int rows;
    long n;
    uint8_t *act;
} act_job;

static void act_worker(void *arg, int ith, int nth) {
    const act_job *j = arg;
    long lo, hi;
    tp_range(j->n, ith, nth, &lo, &hi);
    const qt_quantize_act_fn quantize = qt_quantize_act_best();
    for (long r = lo; r < hi; r++) {
        const long i = r / j->rows, t = r % j->rows;
        const mm_task *k = &j->tasks[i];
        if (j->same[i]) continue;
        uint8_t *row = j->act + j->off[i] + (uint64_t)t * j->arb[i];
        quantize((uint32_t)qt_get(k->w->type)->act_type, k->x + t * k->ldx, row, k->w->n_in);
        if (j->pan[i].row && t < (j->rows & ~3))
            j->pan[i].row(row, k->w->n_in, t % 4,
                          j->act + j->poff[i] +
                              (uint64_t)(t / 4) * panel_group(&j->pan[i], k->w->n_in));
    }
}

typedef struct many_job {
    mm_job *jobs;
    int n;
} many_job;

static void many_worker(void *arg, int ith, int nth) {
    const many_job *m = arg;
    for (int i = 0; i < m->n; i++)
        mm_worker(&m->jobs[i], ith, nth);
}

/* One pass: n tasks of n_rows rows each whose conversions (and, with panels, their panels)
 * fit the context's buffer, arb[i] bytes a converted row of task i. A conversion that a
 * task's panel tiles read gets a panel after its rows (one per conversion: the panel tiles
 * of one activation type read one layout). */
static void mm_pass(mm_ctx *c, const mm_task *tasks, int n, const uint64_t *arb, int n_rows,
                    int panels) {
    uint64_t off[MM_MANY_MAX], poff[MM_MANY_MAX];
    uint8_t same[MM_MANY_MAX];
    qt_ptile pt[MM_MANY_MAX], pan[MM_MANY_MAX]; /* the task's panel tiles; the panel written */
    mm_job jobs[MM_MANY_MAX];
    uint64_t at = 0, work = 0;
    for (int i = 0, owner = 0; i < n; i++) {
        const mm_task *k = &tasks[i], *p = i ? &tasks[i - 1] : NULL;
        /* gate and up read the same rows: converted once */
        same[i] = p && p->x == k->x && p->ldx == k->ldx && p->w->n_in == k->w->n_in &&
                  qt_get(p->w->type)->act_type == qt_get(k->w->type)->act_type;
        off[i] = same[i] ? off[i - 1] : at;
        pan[i] = (qt_ptile){0};
        if (!same[i]) {
            at += arb[i] * (uint64_t)n_rows;
            owner = i;
        }
        if (!panels || !mm_ptile(k->w->type, c->max_isa, n_rows, &pt[i])) pt[i] = (qt_ptile){0};
        if (pt[i].row && !pan[owner].row) {
            pan[owner] = pt[i];
            poff[owner] = panel_at(c->act, at);
            at = poff[owner] + (uint64_t)(n_rows / 4) * panel_group(&pt[i], k->w->n_in);
        }
        PT_ASSERT(!pt[i].row || pt[i].row == pan[owner].row);
        poff[i] = pt[i].row ? poff[owner] : 0;
    }
    PT_ASSERT(at <= c->act_cap);
    act_job aj = {tasks, arb, off, same, pan, poff, n_rows, (long)n * n_rows, c->act};
    if (aj.n >= 4)
        tp_run(c->pool, act_worker, &aj);
    else
        act_worker(&aj, 0, 1);
    for (int i = 0; i < n; i++) {
        const mm_weight *w = tasks[i].w;
        /* one kernel per weight type, whatever n_rows is (qt_mm_dot_upto): a
         * row's outputs are the same bits in a batch of any size */
        qt_dot_fn dot = qt_mm_dot_upto(w->type, c->max_isa);
        qt_dot4_fn dot4 = n_rows >= 4 ? qt_mm_dot4_upto(w->type, c->max_isa) : NULL;
        qt_tile_fn tile = dot4 ? qt_mm_tile_upto(w->type, c->max_isa) : NULL;
        qt_widen_fn widen =
            tile && n_rows >= MM_WIDEN_ROWS ? qt_mm_widen_upto(w->type, c->max_isa) : NULL;
        qt_tile_fn tile8 = tile ? qt_mm_tile8_upto(widen ? QT_Q8_0 : w->type, c->max_isa) : NULL;
        jobs[i] = (mm_job){.w = w,
                           .act = c->act + off[i],
                           .act_row_bytes = arb[i],
                           .n_rows = n_rows,
                           .y = tasks[i].y,
                           .ldy = tasks[i].ldy,
                           .dot = dot,
                           .dot4 = dot4,
                           .tile = tile,
                           .tile8 = tile8,
                           .widen = widen,
                           .wide_tile = widen ? qt_mm_tile_upto(QT_Q8_0, c->max_isa) : NULL,
                           .gemv = qt_mm_gemv_upto(w->type, c->max_isa),
                           .ptile = pt[i].tile,
                           .ptile8 = pt[i].tile8,
                           .panel = c->act + poff[i],
                           .panel_group = pt[i].row ? panel_group(&pt[i], w->n_in) : 0};
        atomic_init(&jobs[i].next, 0);
        work += (uint64_t)w->n_out * w->row_bytes * (uint64_t)n_rows;
    }
    many_job m = {jobs, n};
    /* small jobs are not worth waking the workers for */
    if (work < 32768)
        many_worker(&m, 0, 1);
    else
        tp_run(c->pool, many_worker, &m);
}

void mm_run_many(mm_ctx *c, const mm_task *tasks, int n, int n_rows) {
    if (n <= 0 || n_rows <= 0) return;
    uint64_t arb[MM_MANY_MAX], row_sum = 0, panel_sum = 0;
    const int head = n < MM_MANY_MAX ? n : MM_MANY_MAX;
    for (int i = 0; i < head; i++) {
        const qt_traits *tr = qt_get(tasks[i].w->type);
        PT_ASSERT(tr && tr->act_type >= 0);
        PT_ASSERT(qt_row_bytes((uint32_t)tr->act_type, tasks[i].w->n_in, &arb[i]) == 0);
        row_sum += arb[i];
        qt_ptile p;
        if (mm_ptile(tasks[i].w->type, c->max_isa, n_rows, &p))
            panel_sum += panel_group(&p, tasks[i].w->n_in) / 4; /* a panel's share of a row */
    }
    /* panels when a group of four rows fits with them (they never change a bit) */
    const uint64_t slack = (uint64_t)head * PANEL_ALIGN;
    const int panels =
        panel_sum && c->act_cap > slack && (c->act_cap - slack) / 4 >= row_sum + panel_sum;
    if (panels) row_sum += panel_sum;
    /* more tasks than fit one row of each: halves; more rows than fit: passes
     * of what the buffer holds (every output row is computed alone, so
     * neither changes a bit) */
    if (head < n || (row_sum > c->act_cap && n > 1)) {
        const int h = head < n ? head : n / 2;
        mm_run_many(c, tasks, h, n_rows);
        mm_run_many(c, tasks + h, n - h, n_rows);
        return;
    }
    const uint64_t fit = (c->act_cap - (panels ? slack : 0)) / row_sum;
    PT_ASSERT(fit >= 1);
    int pass = fit < (uint64_t)n_rows ? (int)fit : n_rows;
    if (panels && pass < n_rows) pass &= ~3; /* whole groups (four rows fit with panels) */
    for (int r = 0; r < n_rows; r += pass) {
        mm_task part[MM_MANY_MAX];
        for (int i = 0; i < n; i++) {
            part[i] = tasks[i];
            part[i].x += (int64_t)r * tasks[i].ldx;
            part[i].y += (int64_t)r * tasks[i].ldy;
        }
        mm_pass(c, part, n, arb, n_rows - r < pass ? n_rows - r : pass, panels);
    }
}

void mm_run(mm_ctx *c, const mm_weight *w, const float *x, int n_rows, float *y, int64_t ldy) {
    const mm_task t = {w, x, w->n_in, y, ldy};
    mm_run_many(c, &t, 1, n_rows);
}

void mm_get_row(const mm_weight *w, int64_t r, float *out) {
    qt_dequant_ref(w->type, w->data + (uint64_t)r * w->row_bytes, out, w->n_in);
}
