/* seq2seq.c: a sequence-to-sequence model scored on a set of pairs (eval.h): the windows of
 * hypotheses, the batches shared among processes, the scores' counts summed exactly, the
 * hypotheses file.
 * Not here: the decoding itself (nn_seq2seq_greedy), the scores (text/score.c). Read next:
 * text/score.h. */
#include "eval.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../dist/dist.h"

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    AG_CHECK(p != NULL, "eval_seq2seq: out of memory (%zu bytes)", n);
    return p;
}

int eval_seq2seq_budget(const Seq2SeqConfig *c, int S) {
    AG_CHECK_ARG(c);
    int n = 2 * S + 10;
    return n < c->max_len ? n : c->max_len;
}

double eval_seq2seq_loss_sum(Seq2Seq *m, Tape *t, const TxtPairBatch *b) {
    AG_CHECK_ARG(m);
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(b);
    int prev = ag_no_grad(t, 1);
    ag_tape_reset(t);
    Tensor *l = nn_seq2seq_loss(t, m, b->src, b->S, b->tgt_in, b->tgt_out, b->B, b->T, NULL);
    double sum = (double)l->data[0] * (double)b->n_tgt_tokens;
    ag_tape_reset(t);
    ag_no_grad(t, prev);
    return sum;
}

/* one side of a hypotheses line: the text v's tokenizer makes of ids, or the words */
static void write_side(FILE *f, const TxtVocab *v, const int *ids, int n) {
    if (v->tok) {
        size_t need = txt_vocab_detokenize(v, ids, n, NULL, 0);
        char *t = xmalloc(need + 1);
        txt_vocab_detokenize(v, ids, n, t, need + 1);
        fwrite(t, 1, need, f);
        free(t);
        return;
    }
    for (int i = 0; i < n; i++) fprintf(f, "%s%s", i ? " " : "", txt_vocab_word(v, ids[i]));
}

/* The hypotheses of one window, in a block that grows to what they hold (not pairs x
 * max_len): window slot i (pair first + i) is hyp[off[i] .. off[i] + len[i]). */
typedef struct {
    int *hyp, *len;
    size_t *off, n, cap;
} HypWindow;

static void hyp_keep(HypWindow *w, int slot, const int *ids, int n) {
    w->off[slot] = w->n;
    w->len[slot] = n;
    if (n == 0) return;
    if (w->n + (size_t)n > w->cap) {
        while (w->n + (size_t)n > w->cap) w->cap = w->cap ? 2 * w->cap : 4096;
        int *h = realloc(w->hyp, w->cap * sizeof *h);
        AG_CHECK(h != NULL, "eval_seq2seq: out of memory (%zu hypothesis tokens)", w->cap);
        w->hyp = h;
    }
    memcpy(w->hyp + w->n, ids, (size_t)n * sizeof *ids);
    w->n += (size_t)n;
}

/* The score's counts and the loss's tokens summed over the processes (integers: exact). */
static void score_sum(TxtScore *s, long *tokens) {
    int64_t v[15] = {s->n_sent,  s->n_exact, s->ref_tokens, s->tok_correct,
                     s->hyp_len, s->ref_len, *tokens};
    for (int k = 0; k < 4; k++) v[7 + k] = s->match[k], v[11 + k] = s->total[k];
    dist_sum_i64(v, 15);
    s->n_sent = (long)v[0], s->n_exact = (long)v[1], s->ref_tokens = (long)v[2];
    s->tok_correct = (long)v[3], s->hyp_len = (long)v[4], s->ref_len = (long)v[5];
    *tokens = (long)v[6];
    for (int k = 0; k < 4; k++) s->match[k] = (long)v[7 + k], s->total[k] = (long)v[11 + k];
}

int eval_seq2seq(Seq2Seq *m, Tape *t, const TxtPairSet *d, int limit, int batch, TxtScore *score,
                 double *loss, FILE *hyps, const TxtVocab *src, const TxtVocab *tgt,
                 int (*stop)(void)) {
    AG_CHECK_ARG(m);
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(d);
    AG_CHECK_ARG(score);
    AG_CHECK(batch >= 1, "eval_seq2seq: batch %d: must be at least 1", batch);
    AG_CHECK(!hyps || (src && tgt), "eval_seq2seq: the hypotheses file needs both vocabularies");
    int n = limit > 0 && limit < d->n ? limit : d->n, L = m->cfg.max_len;
    int W = batch > EVAL_WINDOW ? batch : EVAL_WINDOW;
    if (W > n) W = n;
    /* under mpirun batch k is process k mod P's; the losses of a window's batches are
     * gathered (exact: one process holds each) and added in batch order, as one process adds
     * them, and the counts summed */
    int P = dist_size(), me = dist_rank();
    AG_CHECK(!hyps || P == 1, "eval_seq2seq: the hypotheses are written by one process, not %d", P);
    int *idx = xmalloc((size_t)W * sizeof(int));
    int *out = xmalloc((size_t)batch * L * sizeof(int)),
        *lens = xmalloc((size_t)batch * sizeof(int));
    double *part = xmalloc((size_t)(W / batch + 1) * sizeof(double));
    HypWindow hw = {NULL, NULL, NULL, 0, 0};
    if (hyps) {
        hw.len = xmalloc((size_t)W * sizeof(int));
        hw.off = xmalloc((size_t)W * sizeof(size_t));
    }
    memset(score, 0, sizeof *score);
    double loss_sum = 0;
    long loss_tokens = 0, k = 0;
    TxtPairBatch b;
    memset(&b, 0, sizeof b);
    int finished = 1, prev = ag_no_grad(t, 1), rc = AG_OK;
    for (int w0 = 0; w0 < n && finished; w0 += W) {
        int wn = n - w0 < W ? n - w0 : W, nb = 0;
        txt_pairs_by_length(d->pairs, w0, wn, idx);
        hw.n = 0;
        for (int i0 = 0; i0 < wn; i0 += batch, nb++, k++) {
            if (stop && stop()) {
                finished = 0;
                break;
            }
            part[nb] = 0;
            if (k % P != me) continue;
            int B = wn - i0 < batch ? wn - i0 : batch;
            txt_pair_batch_make(&b, d->pairs, idx + i0, B);
            int max_T = eval_seq2seq_budget(&m->cfg, b.S);
            int got = nn_seq2seq_greedy(t, m, b.src, B, b.S, TXT_BOS, TXT_EOS, max_T, out, lens);
            if (rc == AG_OK) rc = got;
            if (loss) {
                part[nb] = eval_seq2seq_loss_sum(m, t, &b);
                loss_tokens += b.n_tgt_tokens;
                if (rc == AG_OK && !isfinite(part[nb]))
                    rc = ag_fail(AG_ERR_RANGE, "the loss of batch %ld = %g: must be finite", k,
                                 part[nb]);
            }
            for (int r = 0; r < B; r++) {
                const TxtPair *p = &d->pairs[idx[i0 + r]];
                const int *h = out + (size_t)r * max_T;
                txt_score_add(score, h, lens[r], p->tgt, p->tgt_len);
                if (hyps) hyp_keep(&hw, idx[i0 + r] - w0, h, lens[r]);
            }
        }
        if (!finished) break;
        dist_sum_disjoint(part, nb);
        for (int i = 0; i < nb; i++) loss_sum += part[i];
        for (int i = 0; hyps && i < wn; i++) {
            const TxtPair *p = &d->pairs[w0 + i];
            write_side(hyps, src, p->src, p->src_len);
            fputc('\t', hyps);
            write_side(hyps, tgt, p->tgt, p->tgt_len);
            fputc('\t', hyps);
            write_side(hyps, tgt, hw.hyp + hw.off[i], hw.len[i]);
            fputc('\n', hyps);
        }
    }
    score_sum(score, &loss_tokens);
    ag_tape_reset(t);
    ag_no_grad(t, prev);
    if (finished && loss) *loss = loss_tokens ? loss_sum / (double)loss_tokens : 0;
    txt_pair_batch_free(&b);
    free(hw.hyp), free(hw.len), free(hw.off);
    free(part), free(lens), free(out), free(idx);
    return finished && rc != AG_OK ? rc : finished;
}
