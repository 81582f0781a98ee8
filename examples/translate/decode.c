/* decode.c: using a trained model. Loading a checkpoint with its vocabularies, a
 * teacher-forced forward of one pair (for attention maps), translating a sentence greedily or
 * by beam search (the library's nn_seq2seq_greedy and nn_seq2seq_beam).
 * Not here: the evaluation of a data set (src/eval's eval_seq2seq).
 * Nor training (train.c). Read next: train.c. */
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

int tr_translate_ids(Translator *tr, const int *src, int S, int beam, double alpha, int *out,
                     int cap) {
    int L = tr->model.cfg.max_len;
    if (S > L - 1) S = L - 1;
    int *row = ex_malloc((size_t)(S + 1) * sizeof(int));
    memcpy(row, src, (size_t)S * sizeof(int));
    row[S] = TXT_EOS;
    int max_T = eval_seq2seq_budget(&tr->model.cfg, S + 1), K = beam < 1 ? 1 : beam;
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

char *tr_text(const TxtVocab *v, const int *ids, int n) {
    size_t need = txt_vocab_detokenize(v, ids, n, NULL, 0);
    char *t = ex_malloc(need + 1);
    txt_vocab_detokenize(v, ids, n, t, need + 1);
    return t;
}
