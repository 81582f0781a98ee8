/* decode.c: using a trained model. Loading a checkpoint with its vocabularies, a
 * teacher-forced forward of one pair (for attention maps), translating a sentence greedily or
 * by beam search (the library's nn_seq2seq_greedy and nn_seq2seq_beam) and the evaluation
 * of a data set (scored with src/text/score.h), window by
 * window (its memory does not grow with the number of pairs).
 * Not here: training (train.c). Read next: train.c. */
#include "translate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The file was read once (ckpt_read: the library's checks and the model's configuration into
 * cfg); then the example's own (data.position, the vocabularies against the embeddings), then
 * loads. */
static int load_from(Translator *tr, const NpzFile *f, const Seq2SeqConfig *cfg) {
    int rc = tr_check_position(f);
    if (rc != AG_OK) return rc;
    tr->params = arena_new("params", 0);
    Rng r;
    rng_seed(&r, 0);
    nn_seq2seq_init(&tr->model, tr->params, &r, cfg);
    Checkpoint ck = {.params = &tr->model.params, .config = tr_model_config(&tr->model.cfg)};
    rc = ckpt_load_from(f, &ck);
    if (rc == AG_OK) rc = txt_vocab_pair_load(ck.extra, ck.extra_len, &tr->src, &tr->tgt, f->path);
    free((void *)ck.extra);
    if (rc == AG_OK && (tr->src.n != cfg->src_vocab || tr->tgt.n != cfg->tgt_vocab))
        rc = ag_fail(AG_ERR_FORMAT,
                     "%s: the vocabularies (%d, %d words) do not match the "
                     "model's (%d, %d)",
                     f->path, tr->src.n, tr->tgt.n, cfg->src_vocab, cfg->tgt_vocab);
    if (rc != AG_OK) return rc;
    /* the step count, for information (ckpt_load only restores it into an optimizer); in
     * [0, CKPT_MAX_STEP] when present (ckpt_read) */
    const NpzEntry *e = npz_find(f, "train.step");
    if (e) memcpy(&tr->trained_steps, e->data, sizeof tr->trained_steps);
    /* the step arena grows to what the longest pass needs */
    tr->step = arena_new("step", 0);
    tr->tape = ag_tape_new(tr->step);
    ag_no_grad(tr->tape, 1);
    return AG_OK;
}

int tr_load(Translator *tr, const char *path) {
    memset(tr, 0, sizeof *tr);
    NpzFile *f;
    Seq2SeqConfig cfg = {0};
    CkptConfig kc = tr_model_config(&cfg);
    int rc = ckpt_read(path, &kc, &f);
    if (rc != AG_OK) return rc;
    rc = load_from(tr, f, &cfg);
    npz_free(f);
    if (rc == AG_OK) tr->path = io_path_join("", path); /* a copy, for ex_not_finite */
    if (rc != AG_OK) tr_free(tr);
    return rc;
}

void tr_free(Translator *tr) {
    if (tr->tape) ag_tape_free(tr->tape);
    if (tr->step) arena_free(tr->step);
    if (tr->params) {
        nn_seq2seq_free(&tr->model);
        arena_free(tr->params);
    }
    if (tr->src.words) txt_vocab_free(&tr->src);
    if (tr->tgt.words) txt_vocab_free(&tr->tgt);
    free(tr->path);
    memset(tr, 0, sizeof *tr);
}

Tensor *tr_forward_pair(Translator *tr, const int *src, int S, const int *tgt, int T) {
    int L = tr->model.cfg.max_len;
    AG_CHECK(S >= 0 && T >= 0 && S + 1 <= L && T + 1 <= L,
             "tr_forward_pair: %d source and %d target tokens, the model's max_len is %d", S, T, L);
    ag_tape_reset(tr->tape);
    ag_no_grad(tr->tape, 1);
    int *s = arena_alloc(tr->step, (size_t)(S + T + 2) * sizeof(int)), *ti = s + S + 1;
    memcpy(s, src, (size_t)S * sizeof(int));
    s[S] = TXT_EOS;
    ti[0] = TXT_BOS;
    memcpy(ti + 1, tgt, (size_t)T * sizeof(int));
    Tensor *mem = nn_seq2seq_encode(tr->tape, &tr->model, s, 1, S + 1, NULL);
    return nn_seq2seq_decode(tr->tape, &tr->model, mem, s, S + 1, ti, 1, T + 1, NULL);
}

/* The decoding budget for a source of S positions (EOS included): 2 S + 10, at most max_len. */
static int max_decode(const Seq2SeqConfig *c, int S) {
    int n = 2 * S + 10;
    return n < c->max_len ? n : c->max_len;
}

int tr_translate_ids(Translator *tr, const int *src, int S, int beam, double alpha, int *out,
                     int cap) {
    int L = tr->model.cfg.max_len;
    if (S > L - 1) S = L - 1;
    int *row = ex_malloc((size_t)(S + 1) * sizeof(int));
    memcpy(row, src, (size_t)S * sizeof(int));
    row[S] = TXT_EOS;
    int max_T = max_decode(&tr->model.cfg, S + 1), K = beam < 1 ? 1 : beam;
    int *hyp = ex_malloc((size_t)max_T * sizeof(int)), n;
    int rc = K == 1 ? nn_seq2seq_greedy(tr->tape, &tr->model, row, 1, S + 1, TXT_BOS, TXT_EOS,
                                        max_T, hyp, &n)
                    : (n = nn_seq2seq_beam(tr->tape, &tr->model, row, S + 1, TXT_BOS, TXT_EOS, K,
                                           max_T, alpha, hyp));
    if (rc < 0) {
        n = ex_not_finite(rc, tr->path, NULL);
    } else {
        if (n > cap) n = cap;
        memcpy(out, hyp, (size_t)n * sizeof(int));
    }
    free(hyp);
    free(row);
    return n;
}

int tr_cut_words(int n, int max, FILE *warn, const char *where) {
    if (n > max && warn)
        fprintf(warn, "%s%d words; the model reads at most %d: the rest is dropped\n", where, n,
                max);
    return n > max ? max : n;
}

/* ---- evaluation of a data set ---- */

int *tr_sorted_rows(const TxtPairSet *d, int n) {
    int *idx = ex_malloc((size_t)n * sizeof(int));
    txt_pairs_by_length(d->pairs, 0, n, idx);
    return idx;
}

double tr_batch_loss_sum(Seq2Seq *m, Tape *t, const TxtPairBatch *b) {
    int prev = ag_no_grad(t, 1);
    ag_tape_reset(t);
    Tensor *l = nn_seq2seq_loss(t, m, b->src, b->S, b->tgt_in, b->tgt_out, b->B, b->T, NULL);
    double sum = (double)l->data[0] * (double)b->n_tgt_tokens;
    ag_tape_reset(t);
    ag_no_grad(t, prev);
    return sum;
}

char *tr_text(const TxtVocab *v, const int *ids, int n) {
    size_t need = txt_vocab_detokenize(v, ids, n, NULL, 0);
    char *t = ex_malloc(need + 1);
    txt_vocab_detokenize(v, ids, n, t, need + 1);
    return t;
}

static void write_side(FILE *f, const TxtVocab *v, const int *ids, int n) {
    if (v->tok) { /* the text the tokens make */
        size_t need = txt_vocab_detokenize(v, ids, n, NULL, 0);
        char *t = tr_text(v, ids, n);
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
        AG_CHECK(h != NULL, "tr_evaluate: out of memory (%zu hypothesis tokens)", w->cap);
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

int tr_evaluate(Seq2Seq *m, Tape *t, const TxtPairSet *d, int limit, int batch, TxtScore *score,
                double *loss, FILE *hyps, const TxtVocab *src, const TxtVocab *tgt,
                int (*stop)(void)) {
    int n = limit > 0 && limit < d->n ? limit : d->n, L = m->cfg.max_len;
    int W = batch > TR_EVAL_WINDOW ? batch : TR_EVAL_WINDOW;
    if (W > n) W = n;
    /* under mpirun (the trainer's validation) batch k is process k mod P's; the losses of a
     * window's batches are gathered (exact: one process holds each) and added in batch order,
     * as one process adds them, and the counts summed */
    int P = dist_size(), me = dist_rank();
    AG_CHECK(!hyps || P == 1, "tr_evaluate: the hypotheses are written by one process, not %d", P);
    int *idx = ex_malloc((size_t)W * sizeof(int));
    int *out = ex_malloc((size_t)batch * L * sizeof(int)),
        *lens = ex_malloc((size_t)batch * sizeof(int));
    double *part = ex_malloc((size_t)(W / batch + 1) * sizeof(double));
    HypWindow hw = {NULL, NULL, NULL, 0, 0};
    if (hyps) {
        hw.len = ex_malloc((size_t)W * sizeof(int));
        hw.off = ex_malloc((size_t)W * sizeof(size_t));
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
            int max_T = max_decode(&m->cfg, b.S);
            int got = nn_seq2seq_greedy(t, m, b.src, B, b.S, TXT_BOS, TXT_EOS, max_T, out, lens);
            if (rc == AG_OK) rc = got;
            if (loss) {
                part[nb] = tr_batch_loss_sum(m, t, &b);
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
    free(hw.hyp);
    free(hw.len);
    free(hw.off);
    free(part);
    free(lens);
    free(out);
    free(idx);
    return finished && rc != AG_OK ? rc : finished;
}
