/* seq2seq_search.c: a translation out of a seq2seq model with the key/value cache
 * (nn_decode_begin/step/end): greedy decoding of a batch, and beam search of one sentence with
 * GNMT's length penalty. Both run in no-grad mode, never choose the padding or the start
 * token, and check the decoder's logits at every step (finite weights may still overflow).
 * Not here: the model (transformer.c), sampling a GPT (sample.c, gpt.c). Next: transformer.c. */
#include "nn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void *must_alloc(size_t bytes, const char *what) {
    void *p = malloc(bytes ? bytes : 1);
    AG_CHECK(p != NULL, "%s: out of memory (%zu bytes)", what, bytes);
    return p;
}

/* AG_OK, or AG_ERR_RANGE naming the first logit that is not finite and, when t's check mode
 * saw it, where it began */
static int logits_finite(const Tensor *x, const Tape *t) {
    for (size_t i = 0; i < x->size; i++) {
        if (isfinite((double)x->data[i])) continue;
        const AgNonFinite *nf = ag_first_nonfinite(t);
        return ag_fail(AG_ERR_RANGE, "the decoder's logits[%zu] = %g: must be finite%s%s", i,
                       (double)x->data[i], nf ? "; it began at the " : "",
                       nf ? ag_nonfinite_message(nf) : "");
    }
    return AG_OK;
}

static void check_search(const char *fn, const Seq2Seq *m, int B, int S, int bos, int eos,
                         int max_T) {
    int V = m->cfg.tgt_vocab, pad = m->cfg.pad_id;
    AG_CHECK(B >= 1 && S >= 1 && max_T >= 1 && max_T <= m->cfg.max_len,
             "%s: B %d and S %d must be >= 1, max_T %d in [1, %d]", fn, B, S, max_T,
             m->cfg.max_len);
    AG_CHECK(bos >= 0 && bos < V && eos >= 0 && eos < V && bos != eos && eos != pad,
             "%s: bos %d and eos %d must be distinct tokens in [0, %d), eos not pad_id %d", fn, bos,
             eos, V, pad);
}

/* ---- greedy ---- */

/* the best token of a row of V logits, never pad or bos; the lowest id on ties */
static int argmax_token(const Real *x, int V, int pad, int bos) {
    int best = -1;
    for (int v = 0; v < V; v++)
        if (v != pad && v != bos && (best < 0 || x[v] > x[best])) best = v;
    return best;
}

int nn_seq2seq_greedy(Tape *t, Seq2Seq *m, const int *src, int B, int S, int bos, int eos,
                      int max_T, int *out, int *lens) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(m);
    AG_CHECK_ARG(src);
    AG_CHECK_ARG(out);
    AG_CHECK_ARG(lens);
    check_search("nn_seq2seq_greedy", m, B, S, bos, eos, max_T);
    int prev = ag_no_grad(t, 1), V = m->cfg.tgt_vocab, rc = AG_OK;
    ag_tape_reset(t);
    Tensor *mem = nn_seq2seq_encode(t, m, src, B, S, NULL);
    NnDecodeState st;
    nn_decode_begin(&st, m, mem, src, B, S, max_T);
    int *tok = must_alloc((size_t)B * 2 * sizeof(int), "nn_seq2seq_greedy"), *done = tok + B;
    int n_done = 0;
    for (int b = 0; b < B; b++) {
        tok[b] = bos;
        done[b] = 0;
        lens[b] = 0;
    }
    for (int pos = 0; pos < max_T && n_done < B; pos++) {
        ag_tape_reset(t);
        Tensor *logits = nn_decode_step(t, m, &st, tok); /* (B, 1, V) */
        if (rc == AG_OK) rc = logits_finite(logits, t);
        for (int b = 0; b < B; b++) {
            if (done[b]) continue;
            int y = argmax_token(logits->data + (size_t)b * V, V, m->cfg.pad_id, bos);
            if (y == eos || pos == max_T - 1) {
                done[b] = 1;
                n_done++;
            } else {
                out[(size_t)b * max_T + lens[b]++] = y;
            }
            tok[b] = y;
        }
    }
    free(tok);
    nn_decode_end(&st);
    ag_tape_reset(t);
    ag_no_grad(t, prev);
    return rc;
}

/* ---- beam search ---- */

static double length_penalty(int len, double alpha) {
    return alpha == 0 ? 1.0 : pow((5.0 + len) / 6.0, alpha);
}

typedef struct {
    double score;
    int beam, token;
} Cand;

/* best first; ties by beam, then token: a total order, so qsort's result is fixed */
static int cmp_cand(const void *a, const void *b) {
    const Cand *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    if (x->beam != y->beam) return x->beam - y->beam;
    return x->token - y->token;
}

/* Copies cache rows so that row j holds what row parent[j] held. */
static void reorder_cache(NnKVCache *c, const int *parent, int K, Real *tmp) {
    size_t row = (size_t)c->NKV * c->max_T * c->HS;
    Real *bufs[2] = {c->k, c->v};
    for (int w = 0; w < 2; w++) {
        memcpy(tmp, bufs[w], (size_t)K * row * sizeof(Real));
        for (int j = 0; j < K; j++)
            memcpy(bufs[w] + (size_t)j * row, tmp + (size_t)parent[j] * row, row * sizeof(Real));
    }
}

int nn_seq2seq_beam(Tape *t, Seq2Seq *m, const int *src, int S, int bos, int eos, int K, int max_T,
                    double alpha, int *out) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(m);
    AG_CHECK_ARG(src);
    AG_CHECK_ARG(out);
    check_search("nn_seq2seq_beam", m, 1, S, bos, eos, max_T);
    AG_CHECK(K >= 1 && K <= 64, "nn_seq2seq_beam: K = %d outside [1, 64]", K);
    AG_CHECK(alpha >= 0, "nn_seq2seq_beam: alpha %g must be >= 0", alpha);
    int V = m->cfg.tgt_vocab, pad = m->cfg.pad_id, prev = ag_no_grad(t, 1), rc = AG_OK;
    const char *fn = "nn_seq2seq_beam";
    ag_tape_reset(t);
    int *srcK = must_alloc((size_t)K * S * sizeof(int), fn);
    for (int k = 0; k < K; k++) memcpy(srcK + (size_t)k * S, src, (size_t)S * sizeof(int));
    Tensor *mem = nn_seq2seq_encode(t, m, srcK, K, S, NULL);
    NnDecodeState st;
    nn_decode_begin(&st, m, mem, srcK, K, S, max_T);
    int *hist = must_alloc((size_t)K * max_T * sizeof(int), fn),
        *nhist = must_alloc((size_t)K * max_T * sizeof(int), fn);
    int *tok = must_alloc((size_t)K * 2 * sizeof(int), fn), *parent = tok + K;
    double *score = must_alloc((size_t)K * sizeof(double), fn);
    Cand *cand = must_alloc((size_t)K * V * sizeof(Cand), fn);
    size_t cache_row = (size_t)st.self[0].NKV * max_T * st.self[0].HS;
    Real *tmp = must_alloc((size_t)K * cache_row * sizeof(Real), fn);
    int *best = must_alloc((size_t)max_T * sizeof(int), fn), best_len = -1;
    double best_score = -INFINITY;
    int alive = 1; /* beams 0..alive-1 are live */
    for (int k = 0; k < K; k++) {
        tok[k] = bos;
        score[k] = k == 0 ? 0 : -INFINITY;
    }
    for (int pos = 0; pos < max_T && alive > 0; pos++) {
        ag_tape_reset(t);
        Tensor *logits = nn_decode_step(t, m, &st, tok); /* (K, 1, V) */
        if ((rc = logits_finite(logits, t)) != AG_OK) break;
        int nc = 0;
        for (int k = 0; k < alive; k++) {
            const Real *x = logits->data + (size_t)k * V;
            double mx = x[0], sum = 0;
            for (int v = 1; v < V; v++) mx = x[v] > mx ? x[v] : mx;
            for (int v = 0; v < V; v++) sum += exp((double)x[v] - mx);
            double lse = mx + log(sum);
            for (int v = 0; v < V; v++)
                if (v != pad && v != bos) cand[nc++] = (Cand){score[k] + (double)x[v] - lse, k, v};
        }
        qsort(cand, (size_t)nc, sizeof *cand, cmp_cand);
        int n_new = 0;
        for (int c = 0; c < nc && n_new < K; c++) {
            int len = pos + 1; /* tokens so far, this one included */
            if (cand[c].token == eos || pos == max_T - 1) {
                double s = cand[c].score / length_penalty(len, alpha);
                if (s > best_score) {
                    best_score = s;
                    int n = cand[c].token == eos ? pos : pos + 1;
                    memcpy(best, hist + (size_t)cand[c].beam * max_T, (size_t)pos * sizeof(int));
                    if (n > pos) best[pos] = cand[c].token;
                    best_len = n;
                }
                continue;
            }
            int *h = nhist + (size_t)n_new * max_T;
            memcpy(h, hist + (size_t)cand[c].beam * max_T, (size_t)pos * sizeof(int));
            h[pos] = cand[c].token;
            parent[n_new] = cand[c].beam;
            tok[n_new] = cand[c].token;
            score[n_new] = cand[c].score;
            n_new++;
        }
        alive = n_new;
        for (int k = alive; k < K; k++) {
            parent[k] = 0;
            tok[k] = eos;
            score[k] = -INFINITY;
        }
        int *sw = hist;
        hist = nhist;
        nhist = sw;
        for (int l = 0; l < m->cfg.n_dec_layers; l++) reorder_cache(&st.self[l], parent, K, tmp);
        /* stop when no live beam can beat the best finished one: scores only fall, and the
         * length penalty is largest at max_T */
        if (alive > 0 && best_len >= 0 && score[0] / length_penalty(max_T, alpha) <= best_score)
            break;
    }
    if (rc != AG_OK) best_len = 0;
    if (best_len < 0) { /* nothing finished: the best live beam */
        best_len = alive > 0 ? max_T : 0;
        if (alive > 0) memcpy(best, hist, (size_t)max_T * sizeof(int));
    }
    memcpy(out, best, (size_t)best_len * sizeof(int));
    free(best);
    free(tmp);
    free(cand);
    free(score);
    free(tok);
    free(nhist);
    free(hist);
    free(srcK);
    nn_decode_end(&st);
    ag_tape_reset(t);
    ag_no_grad(t, prev);
    return rc != AG_OK ? rc : best_len;
}
