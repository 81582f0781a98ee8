/* test_seq2seq.c: a sequence-to-sequence model scored on a set of pairs (src/eval/eval.h). The
 * evaluation in batches gives what decoding and scoring each pair alone gives (the counts
 * exactly, the loss to rounding); the hypotheses file holds one line a pair in file order,
 * source, reference and hypothesis as words; a stop between batches leaves the loss unset; the
 * decoding budget; misuse aborts.
 * Not here: attograd-translate's eval and validation on a trained model, the windows of a
 * million pairs and their memory (tests/examples/test_translate*.c). */
#include <criterion/criterion.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attograd.h"
#include "files.h"

typedef struct {
    char dir[256];
    TxtVocab src, tgt;
    TxtPairSet d;
    Seq2Seq m;
    Arena *params, *step;
    Tape *t;
} Fix;

/* n copy-task pairs and a small random model over their words */
static void fix_new(Fix *f, int n) {
    char path[512];
    ts_tmp_dir(f->dir, sizeof f->dir, "eval-seq2seq");
    ts_write_copy_task(ts_join(path, f->dir, "d.tsv"), n, 1, 7, 1, 6, 5);
    txt_vocab_init(&f->src);
    txt_vocab_init(&f->tgt);
    cr_assert_eq(txt_pairs_read(path, &f->d, &f->src, &f->tgt, 1, 0), AG_OK, "%s", ag_last_error());
    Seq2SeqConfig c = nn_seq2seq_default_config(f->src.n, f->tgt.n, 16, 2, 1);
    c.max_len = 12;
    Rng r;
    rng_seed(&r, 3);
    f->params = arena_new("params", 0);
    nn_seq2seq_init(&f->m, f->params, &r, &c);
    f->step = arena_new("step", 0);
    f->t = ag_tape_new(f->step);
}

static void fix_free(Fix *f) {
    ag_tape_free(f->t);
    arena_free(f->step);
    nn_seq2seq_free(&f->m);
    arena_free(f->params);
    txt_pairs_free(&f->d);
    txt_vocab_free(&f->src);
    txt_vocab_free(&f->tgt);
    ts_rm_tree(f->dir);
}

static int stop_now(void) { return 1; }

Test(eval_seq2seq, batches_give_what_each_pair_alone_gives) {
    Fix f;
    fix_new(&f, 37);
    /* each pair alone: one-row batches, scored in file order */
    TxtScore want;
    memset(&want, 0, sizeof want);
    double loss_sum = 0;
    long tokens = 0;
    int out[64], len;
    TxtPairBatch b;
    memset(&b, 0, sizeof b);
    for (int i = 0; i < f.d.n; i++) {
        txt_pair_batch_make(&b, f.d.pairs, &i, 1);
        int max_T = eval_seq2seq_budget(&f.m.cfg, b.S);
        cr_assert_eq(
            nn_seq2seq_greedy(f.t, &f.m, b.src, 1, b.S, TXT_BOS, TXT_EOS, max_T, out, &len), AG_OK);
        txt_score_add(&want, out, len, f.d.pairs[i].tgt, f.d.pairs[i].tgt_len);
        loss_sum += eval_seq2seq_loss_sum(&f.m, f.t, &b);
        tokens += b.n_tgt_tokens;
    }
    txt_pair_batch_free(&b);
    cr_assert_gt(want.hyp_len, 0, "the random model decoded nothing: the test would be empty");
    for (int batch = 1; batch <= 8; batch += 7) {
        TxtScore s;
        double loss = -1;
        cr_assert_eq(eval_seq2seq(&f.m, f.t, &f.d, 0, batch, &s, &loss, NULL, NULL, NULL, NULL), 1);
        cr_expect(s.n_sent == f.d.n && s.n_exact == want.n_exact &&
                      s.tok_correct == want.tok_correct && s.hyp_len == want.hyp_len &&
                      s.ref_len == want.ref_len && s.ref_tokens == want.ref_tokens,
                  "batch %d: counts differ", batch);
        for (int k = 0; k < 4; k++)
            cr_expect(s.match[k] == want.match[k] && s.total[k] == want.total[k], "batch %d",
                      batch);
        cr_expect(fabs(loss - loss_sum / (double)tokens) < 1e-5 * fabs(loss), "batch %d: %g vs %g",
                  batch, loss, loss_sum / (double)tokens);
    }
    /* a limit scores the first pairs only */
    TxtScore s;
    cr_assert_eq(eval_seq2seq(&f.m, f.t, &f.d, 5, 4, &s, NULL, NULL, NULL, NULL, NULL), 1);
    cr_expect_eq(s.n_sent, 5);
    fix_free(&f);
}

Test(eval_seq2seq, writes_one_line_a_pair_in_file_order) {
    Fix f;
    fix_new(&f, 23);
    char path[512];
    FILE *h = fopen(ts_join(path, f.dir, "hyps.tsv"), "w");
    cr_assert(h);
    TxtScore s;
    cr_assert_eq(eval_seq2seq(&f.m, f.t, &f.d, 0, 4, &s, NULL, h, &f.src, &f.tgt, NULL), 1);
    fclose(h);
    size_t n;
    char *text = ts_read_text(path, &n), *line = text;
    long hyp_words = 0;
    for (int i = 0; i < f.d.n; i++) {
        char *end = strchr(line, '\n');
        cr_assert(end, "line %d is missing", i + 1);
        *end = '\0';
        char want[512] = "";
        const TxtPair *p = &f.d.pairs[i];
        for (int k = 0; k < p->src_len; k++)
            snprintf(want + strlen(want), sizeof want - strlen(want), "%s%s", k ? " " : "",
                     txt_vocab_word(&f.src, p->src[k]));
        strcat(want, "\t");
        for (int k = 0; k < p->tgt_len; k++)
            snprintf(want + strlen(want), sizeof want - strlen(want), "%s%s", k ? " " : "",
                     txt_vocab_word(&f.tgt, p->tgt[k]));
        strcat(want, "\t");
        cr_expect_eq(strncmp(line, want, strlen(want)), 0, "line %d: '%s', wanted '%s...'", i + 1,
                     line, want);
        const char *hyp = line + strlen(want);
        for (const char *q = hyp; *q; q++) hyp_words += (q == hyp || q[-1] == ' ') && *q != ' ';
        line = end + 1;
    }
    cr_expect_eq(*line, '\0', "more lines than pairs");
    cr_expect_eq(hyp_words, s.hyp_len);
    free(text);
    fix_free(&f);
}

Test(eval_seq2seq, a_stop_between_batches_leaves_the_loss_unset) {
    Fix f;
    fix_new(&f, 9);
    TxtScore s;
    double loss = -7;
    cr_expect_eq(eval_seq2seq(&f.m, f.t, &f.d, 0, 2, &s, &loss, NULL, NULL, NULL, stop_now), 0);
    cr_expect_eq(loss, -7);
    cr_expect_eq(s.n_sent, 0);
    fix_free(&f);
}

Test(eval_seq2seq_budget, is_twice_the_source_and_ten_at_most_max_len) {
    Seq2SeqConfig c = {0};
    c.max_len = 20;
    cr_expect_eq(eval_seq2seq_budget(&c, 3), 16);
    cr_expect_eq(eval_seq2seq_budget(&c, 5), 20);
    cr_expect_eq(eval_seq2seq_budget(&c, 9), 20);
}

Test(eval_seq2seq, aborts_on_a_batch_below_one, .signal = SIGABRT) {
    Fix f;
    fix_new(&f, 3);
    TxtScore s;
    eval_seq2seq(&f.m, f.t, &f.d, 0, 0, &s, NULL, NULL, NULL, NULL, NULL);
}

Test(eval_seq2seq, aborts_on_hypotheses_without_vocabularies, .signal = SIGABRT) {
    Fix f;
    fix_new(&f, 3);
    TxtScore s;
    eval_seq2seq(&f.m, f.t, &f.d, 0, 2, &s, NULL, stderr, NULL, NULL, NULL);
}
