/* spec.c — speculative decoding with the NextN/MTP head (spec.h).
 *
 * One cycle, with the session holding positions 0..P-1 and the sampler having drawn token t0
 * for position P:
 *   draft    the MTP head catches up on the positions the trunk has decided since its last
 *            cycle (MTP position j = trunk hidden row j + token j+1; no logits needed), then
 *            drafts d1 = argmax of its logits at (hidden P-1, t0), and d2..dk by feeding its
 *            own output state back (one MTP layer, chained); the chained MTP positions are
 *            taken back afterwards (session_mtp_keep), so the MTP cache only ever holds
 *            positions made from the trunk's real hidden rows.
 *   verify   one forward over [t0, d1..dk] at positions P..P+k with every row's logits and
 *            hidden state. Row i's logits are bit-identical to what a one-token decode of
 *            the same prefix gives (ARCHITECTURE.md, batch invariance).
 *   accept   the generation loop draws the token of position P+1 from row 0 with its whole
 *            sampling chain; when it equals d1, row 1 already holds the next logits, and so
 *            on. The first token that differs ends the cycle: the session is cut back to the
 *            positions whose logits were handed out, and a new cycle starts from it.
 *
 * Why this is lossless at every temperature: the drafts are deterministic (argmax), so
 * Leviathan/Chen speculative sampling with a one-hot draft distribution q = δ(d) accepts d
 * with probability min(1, p(d)/q(d)) = p(d) and otherwise draws from norm(max(0, p - q)) =
 * p without d — which is exactly "draw x ~ p; accept iff x == d". Doing it in that second
 * form draws from the final distribution p of the whole chain (biases, penalties over the
 * accepted history, grammar masks, temperature, top-k/p, min-p) with the same random numbers
 * a non-speculative run uses, so a seed gives the same tokens with or without drafting.
 *
 * Rejected positions: a verify pass writes KV for all its rows; the cut (pt_session_truncate)
 * happens before anything else reads the session, and at the end of a run (spec_end), so the
 * session, its token record (the prefix cache) and the next run see only accepted tokens.
 * Usage statistics count the experts a verify pass requested, rejected rows' included: that
 * is what was read.
 *
 * Adaptive: seconds per generated token are tracked (EMA) for drafting cycles and for plain
 * one-token forwards. When drafting costs more per token than plain decoding it backs off for
 * a number of tokens that doubles on each failed retry (32 .. 4096) and resets when a retry
 * pays; a retry is one cycle with one draft (the cheapest verify), judged on its own cost.
 * A verify pass is only risked on a head that has just drafted right: before the first cycle
 * and after every back-off, drafting waits for a probe to hit. A probe is a plain step whose
 * token the head also drafts after (one MTP row, no verify pass: its cost is the head's
 * upkeep, which the next cycle would pay anyway); the next token sampled either matches the
 * draft (a hit: the next cycle drafts) or not (the first two tokens of the first run are
 * probes; a miss after them, or the one probe that ends a back-off, backs off again). So a
 * head that never drafts right costs the head's rows at the probes, never a rejected verify.
 * The draft length itself follows acceptance (up to --draft N): one more after a cycle whose
 * drafts were all taken, else one past the number taken. The first two tokens of the first
 * run decode plain to measure the plain cost, and one token in every 48 while drafting
 * measures it again (caches warm up, the context grows). With a replayed draft source or the
 * adaptive switch off (tests, benchmarks), every cycle drafts N.
 *
 * Memory: the trunk's hidden rows of every held position ([n_ctx][n_embd] floats), because
 * the MTP position before any reuse point needs the hidden row of that position, and a cache
 * cut anywhere (prefix reuse, a rejected draft) would otherwise need it recomputed. */
#include "engine/spec.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "engine/session.h"

enum { BACKOFF_MIN = 32, BACKOFF_MAX = 4096, PLAIN_PROBES = 2, PLAIN_EVERY = 48, FIRST_PROBES = 2 };

struct spec {
    pt_session *s;
    int k, E, n_vocab, n_ctx, n_tok;
    float *hid; /* [n_ctx][E] trunk hidden rows (final-norm state) of positions hid_lo..hid_n-1 */
    int hid_n;
    int hid_lo;     /* 0, or where a prefix restored from disk ended: no hidden rows before it */
    float *mlog;    /* [n_vocab] MTP logits of the row drafted last */
    float *mh;      /* [E] MTP output state, the next chained row's hidden_prev */
    float *vlog;    /* [k+1][n_vocab] the verify pass's logits */
    float *vhid;    /* [k+1][E] its hidden rows */
    int32_t *vtok;  /* [k+1] t0 and the drafts */
    int32_t *ctok;  /* [n_ctx] the MTP catch-up tokens */
    int P;          /* position of vtok[0] */
    int n_rows;     /* rows of the current verify pass (0: none) */
    int row;        /* rows handed out */
    int cyc_tokens; /* tokens handed out by the current cycle */
    int cyc_drafts; /* drafts the current cycle verified */
    int k_eff;      /* drafts per cycle now (adaptive: 1..k) */
    double cyc_t;   /* seconds the current cycle's forwards took */
    /* adaptive */
    double spt_spec, spt_plain; /* EMA seconds per token; 0: unknown */
    int n_plain_seen;
    int since_plain; /* tokens since the last plain forward (its cost is measured again) */
    int backoff_left, backoff_len;
    int need_hit;      /* drafting waits for a probe's draft to match the token sampled */
    int probes_left;   /* probes that may miss before it backs off */
    int probe_at;      /* the position the pending probe drafted for (-1: none) */
    int32_t probe_tok; /* its draft */
    /* replay (tests, bench) */
    int32_t *replay;
    int n_replay;
    int run_n; /* tokens handed out in this run */
    int fixed; /* never back off */
    pt_draft_stats st;
};

static int fail(char *err, size_t err_len, const char *msg) {
    if (err && err_len) snprintf(err, err_len, "%s", msg);
    return -1;
}

spec *spec_new(pt_session *s, int n_draft, int n_tok, char *err, size_t err_len) {
    pt_engine *e = pt_session_engine(s);
    if (!pt_engine_has_mtp(e)) {
        if (err && err_len)
            snprintf(err, err_len, "this model (%s) has no NextN/MTP head to draft with",
                     pt_engine_arch(e));
        return NULL;
    }
    if (n_draft < 1 || n_draft > PT_MAX_DRAFT) {
        if (err && err_len)
            snprintf(err, err_len, "draft length %d is outside [1, %d]", n_draft, PT_MAX_DRAFT);
        return NULL;
    }
    spec *sp = calloc(1, sizeof *sp);
    if (!sp) return fail(err, err_len, "out of memory"), NULL;
    sp->s = s;
    sp->k = n_draft;
    sp->E = pt_engine_n_embd(e);
    sp->n_vocab = pt_engine_n_vocab(e);
    sp->n_ctx = pt_session_n_ctx(s);
    sp->n_tok = n_tok;
    sp->backoff_len = BACKOFF_MIN;
    sp->need_hit = 1;
    sp->probes_left = FIRST_PROBES;
    sp->probe_at = -1;
    sp->k_eff = 1;
    const size_t E = (size_t)sp->E, V = (size_t)sp->n_vocab, R = (size_t)n_draft + 1;
    sp->hid = malloc((size_t)sp->n_ctx * E * sizeof *sp->hid);
    sp->mlog = malloc(V * sizeof *sp->mlog);
    sp->mh = malloc(E * sizeof *sp->mh);
    sp->vlog = malloc(R * V * sizeof *sp->vlog);
    sp->vhid = malloc(R * E * sizeof *sp->vhid);
    sp->vtok = malloc(R * sizeof *sp->vtok);
    sp->ctok = malloc((size_t)sp->n_ctx * sizeof *sp->ctok);
    if (!sp->hid || !sp->mlog || !sp->mh || !sp->vlog || !sp->vhid || !sp->vtok || !sp->ctok) {
        if (err && err_len)
            snprintf(err, err_len,
                     "out of memory for drafting (%d hidden rows of %d floats, %d verify rows)",
                     sp->n_ctx, sp->E, n_draft + 1);
        spec_free(sp);
        return NULL;
    }
    sp->st.n_draft = n_draft;
    return sp;
}

void spec_free(spec *sp) {
    if (!sp) return;
    free(sp->hid);
    free(sp->mlog);
    free(sp->mh);
    free(sp->vlog);
    free(sp->vhid);
    free(sp->vtok);
    free(sp->ctok);
    free(sp->replay);
    free(sp);
}

int spec_n_draft(const spec *sp) {
    return sp->k;
}

int spec_set_replay(spec *sp, const int32_t *ids, int n) {
    free(sp->replay);
    sp->replay = NULL;
    sp->n_replay = 0;
    if (n <= 0) return 0;
    if (!(sp->replay = malloc((size_t)n * sizeof *ids))) return -1;
    memcpy(sp->replay, ids, (size_t)n * sizeof *ids);
    sp->n_replay = n;
    return 0;
}

void spec_set_adaptive(spec *sp, int on) {
    sp->fixed = !on;
    if (sp->fixed) sp->backoff_left = 0;
}

void spec_clear(spec *sp) {
    sp->hid_n = sp->hid_lo = 0;
    sp->n_rows = sp->row = 0;
}

/* Bring the MTP cache to positions 0..upto-1 from the hidden rows (logits not needed).
 * tokens: the session's record, next: the token of position upto (not yet in it). */
static int mtp_catch_up(spec *sp, int upto, char *err, size_t err_len) {
    int m = session_mtp_n_past(sp->s);
    if (m >= upto) return 0;
    /* hidden rows missing: draft without that context */
    if (upto > sp->hid_n || m < sp->hid_lo) return 0;
    const int32_t *held = pt_session_tokens(sp->s);
    const int n = upto - m;
    for (int j = 0; j < n; j++)
        sp->ctok[j] = held[m + j + 1];
    return session_mtp(sp->s, sp->ctok, sp->hid + (size_t)m * sp->E, n, NULL, 0, NULL, err,
                       err_len);
}

int spec_prefill(spec *sp, const int32_t *ids, int n, float *logits,
                 const volatile sig_atomic_t *stop, char *err, size_t err_len) {
    sp->n_rows = sp->row = 0;
    if (session_check_prompt(sp->s, ids, n, err, err_len)) return -1;
    const int32_t *held = pt_session_tokens(sp->s);
    const int n_held = pt_session_n_past(sp->s);
    if (sp->hid_n > n_held) sp->hid_n = n_held;
    int keep = 0;
    while (keep < n - 1 && keep < n_held && held[keep] == ids[keep])
        keep++;
    /* The MTP head continues from its own positions: m, or keep-1 when the cut takes
     * positions from the trunk (fam_ops.truncated). The hidden rows from there to keep must
     * be known; a restored prefix (hid_lo) has its head at keep already. */
    const int m_held = session_mtp_n_past(sp->s);
    const int from = keep < n_held ? PT_MIN(m_held, keep - 1) : m_held;
    int kept;
    if (keep > 0 && from < keep && (from < sp->hid_lo || keep > sp->hid_n)) {
        if (m_held >= keep - 1 && keep >= 2) {
            /* hidden rows missing (a prefix restored from disk), but the head holds the
             * positions made from the tokens kept: cut the trunk one further and keep the
             * head, so token keep-1 evaluated again gives the hidden row it continues from */
            kept = session_truncate_keep_mtp(sp->s, keep - 1);
            if (session_mtp_n_past(sp->s) == kept) sp->hid_lo = kept;
        } else {
            kept = pt_session_truncate(sp->s, sp->hid_lo ? 0 : PT_MIN(keep, sp->hid_n));
        }
    } else {
        kept = pt_session_truncate(sp->s, keep);
    }
    if (kept < sp->hid_lo && kept > 0 && session_mtp_n_past(sp->s) < kept)
        kept = pt_session_truncate(sp->s, 0);
    sp->hid_n = kept;
    if (sp->hid_lo > kept) sp->hid_lo = kept;
    const int B = pt_session_n_batch(sp->s);
    int rc = 0;
    session_progress_begin(sp->s, n, kept);
    for (int at = kept; at < n;) {
        if (pt_stop_requested(stop)) {
            rc = -2;
            break;
        }
        const int m = n - at < B ? n - at : B;
        if (pt_session_eval(sp->s, ids + at, m, at + m == n ? logits : NULL, 0,
                            sp->hid + (size_t)at * sp->E, err, err_len)) {
            rc = -1;
            break;
        }
        at += m;
        sp->hid_n = at;
    }
    session_progress_end(sp->s);
    if (rc) return rc;
    /* MTP positions 0..n-2; position n-1 waits for the token sampled next */
    if (mtp_catch_up(sp, n - 1, err, err_len)) return -1;
    return kept;
}

int spec_catch_up(spec *sp) {
    char err[256];
    return mtp_catch_up(sp, pt_session_n_past(sp->s) - 1, err, sizeof err);
}

void spec_restored(spec *sp) {
    sp->hid_lo = sp->hid_n = pt_session_n_past(sp->s);
    sp->n_rows = sp->row = 0;
}

void spec_begin(spec *sp) {
    memset(&sp->st, 0, sizeof sp->st);
    sp->st.n_draft = sp->k;
    sp->run_n = 0;
    sp->probe_at = -1;
}

static int32_t argmax(const float *x, int n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* Decode plain for backoff_len tokens (doubled for the next time), then probe once; the try
 * after a hit is one cheap cycle (one draft), judged on its own cost. */
static void back_off(spec *sp) {
    sp->backoff_left = sp->backoff_len;
    sp->st.backoffs++;
    if (sp->backoff_len < BACKOFF_MAX) sp->backoff_len *= 2;
    sp->k_eff = 1;
    sp->spt_spec = 0;
    sp->need_hit = 1;
    sp->probes_left = 1;
}

/* The cycle that handed out its last token is over: fold its cost into the estimates and
 * decide whether drafting still pays. */
static void cycle_done(spec *sp) {
    if (sp->cyc_tokens <= 0) return;
    const double spt = sp->cyc_t / sp->cyc_tokens;
    sp->spt_spec = sp->spt_spec > 0 ? 0.7 * sp->spt_spec + 0.3 * spt : spt;
    const int accepted = sp->cyc_tokens - 1;
    /* the draft length follows acceptance: one more after a cycle that took every draft,
     * else one past what was taken */
    if (accepted >= sp->cyc_drafts)
        sp->k_eff = sp->k_eff < sp->k ? sp->k_eff + 1 : sp->k;
    else
        sp->k_eff = accepted + 1;
    sp->cyc_tokens = sp->cyc_drafts = 0;
    sp->cyc_t = 0;
    if (sp->replay || sp->fixed || sp->spt_plain <= 0) return;
    if (sp->spt_spec > sp->spt_plain)
        back_off(sp);
    else
        sp->backoff_len = BACKOFF_MIN;
}

/* Cut the session back to the positions whose logits were handed out. */
static void drop_unused(spec *sp) {
    if (!sp->n_rows) return;
    const int upto = sp->P + sp->row;
    if (pt_session_n_past(sp->s) > upto) pt_session_truncate(sp->s, upto);
    if (sp->hid_n > upto) sp->hid_n = upto;
    if (sp->hid_lo > sp->hid_n) sp->hid_lo = sp->hid_n;
    sp->n_rows = sp->row = 0;
}

/* The pending probe's outcome: tok is the token sampled for position n_past. */
static void probe_outcome(spec *sp, int32_t tok) {
    if (sp->probe_at < 0) return;
    const int hit = sp->probe_at == pt_session_n_past(sp->s) && tok == sp->probe_tok;
    sp->probe_at = -1;
    sp->st.probes++;
    if (hit) {
        sp->st.probe_hits++;
        sp->need_hit = 0;
    } else if (--sp->probes_left <= 0) {
        back_off(sp);
    }
}

/* Draft one token after tok (position P) from the MTP head, to be compared with the token
 * sampled next. The MTP row made here is a real position (trunk hidden row P-1 + tok): it
 * stays in the head's cache. Without the head's context (hidden rows missing) no probe. */
static int probe(spec *sp, int32_t tok, int P, char *err, size_t err_len) {
    if (P < 1) return 0;
    if (mtp_catch_up(sp, P - 1, err, err_len)) return -1;
    if (session_mtp_n_past(sp->s) != P - 1) return 0;
    if (session_mtp(sp->s, &tok, sp->hid + (size_t)(P - 1) * sp->E, 1, sp->mlog, 1, NULL, err,
                    err_len))
        return -1;
    sp->probe_tok = argmax(sp->mlog, sp->n_tok);
    sp->probe_at = P + 1;
    return 0;
}

static int plain_step(spec *sp, int32_t tok, float *logits, char *err, size_t err_len) {
    const int P = pt_session_n_past(sp->s);
    const double t0 = pt_now();
    if (pt_session_eval(sp->s, &tok, 1, logits, 0, sp->hid + (size_t)P * sp->E, err, err_len))
        return -1;
    const double dt = pt_now() - t0;
    if (sp->hid_n == P) sp->hid_n = P + 1;
    sp->spt_plain = sp->spt_plain > 0 ? 0.7 * sp->spt_plain + 0.3 * dt : dt;
    sp->n_plain_seen++;
    sp->since_plain = 0;
    sp->st.plain++;
    sp->st.tokens++;
    return 0;
}

int spec_next(spec *sp, int32_t tok, float *logits, char *err, size_t err_len) {
    const int gi = sp->run_n++; /* tok is this run's generated token gi */
    const size_t V = (size_t)sp->n_vocab, E = (size_t)sp->E;
    if (sp->n_rows && sp->row < sp->n_rows && sp->vtok[sp->row] == tok) {
        memcpy(logits, sp->vlog + (size_t)sp->row * V, V * sizeof *logits);
        sp->row++;
        sp->since_plain++;
        sp->st.accepted++;
        sp->st.tokens++;
        sp->cyc_tokens++;
        return 0;
    }
    probe_outcome(sp, tok);
    drop_unused(sp);
    cycle_done(sp);
    const int P = pt_session_n_past(sp->s);
    int k = sp->replay || sp->fixed ? sp->k : sp->k_eff;
    int probing = 0;
    if (P + k + 1 > sp->n_ctx) k = sp->n_ctx - P - 1;
    if (sp->replay) {
        if (gi + k >= sp->n_replay) k = sp->n_replay - gi - 1;
    } else if (!sp->fixed && (sp->n_plain_seen < PLAIN_PROBES || sp->backoff_left > 0 ||
                              sp->since_plain >= PLAIN_EVERY || sp->need_hit)) {
        if (sp->backoff_left > 0)
            sp->backoff_left--;
        else
            probing = sp->need_hit && P + 1 < sp->n_ctx;
        k = 0;
    }
    if (k <= 0 || sp->hid_n < P) {
        if (probing && sp->hid_n >= P && probe(sp, tok, P, err, err_len)) return -1;
        return plain_step(sp, tok, logits, err, err_len);
    }
    const double t0 = pt_now();
    sp->vtok[0] = tok;
    if (sp->replay) {
        for (int i = 1; i <= k; i++)
            sp->vtok[i] = sp->replay[gi + i];
    } else {
        /* MTP positions up to P-2 from the trunk, then P-1 = (hidden P-1, tok): draft 1 */
        if (mtp_catch_up(sp, P - 1, err, err_len)) return -1;
        const int m0 = session_mtp_n_past(sp->s);
        if (m0 != P - 1) return plain_step(sp, tok, logits, err, err_len); /* no MTP context */
        if (session_mtp(sp->s, &tok, sp->hid + (size_t)(P - 1) * E, 1, sp->mlog, 1, sp->mh, err,
                        err_len))
            return -1;
        sp->vtok[1] = argmax(sp->mlog, sp->n_tok);
        for (int i = 2; i <= k; i++) {
            if (session_mtp(sp->s, &sp->vtok[i - 1], sp->mh, 1, sp->mlog, 1, sp->mh, err, err_len))
                return -1;
            sp->vtok[i] = argmax(sp->mlog, sp->n_tok);
        }
        session_mtp_keep(sp->s, P); /* chained positions leave: they saw no trunk state */
    }
    if (pt_session_eval(sp->s, sp->vtok, k + 1, sp->vlog, 1, sp->vhid, err, err_len)) return -1;
    memcpy(sp->hid + (size_t)P * E, sp->vhid, (size_t)(k + 1) * E * sizeof *sp->hid);
    sp->hid_n = P + k + 1;
    sp->P = P;
    sp->n_rows = k + 1;
    sp->row = 1;
    memcpy(logits, sp->vlog, V * sizeof *logits);
    sp->cyc_t = pt_now() - t0;
    sp->cyc_tokens = 1;
    sp->cyc_drafts = k;
    sp->since_plain++;
    sp->st.verify++;
    sp->st.drafted += (uint64_t)k;
    sp->st.tokens++;
    return 0;
}

void spec_end(spec *sp) {
    drop_unused(sp);
    cycle_done(sp);
}

void spec_stats(const spec *sp, pt_draft_stats *st) {
    *st = sp->st;
}
