/* test_translate_viz.c: the translation example's analyses and pictures (attention.c, heads.c
 * on src/lens/heads.c and src/view/heads_plot.c). The attention .npz has bertviz's entries and
 * shapes, rows that are probability distributions, zeros above the diagonal of the decoder's
 * self-attention, and the tokens; the head importance of a tiny trained copy model is finite,
 * non-negative where it must be, restores the gates, agrees with masking done by hand, and finds the cross-attention
 * indispensable; the plots give a PNG when gnuplot is there and a clear "skipped" when it is not
 * (AG_GNUPLOT=/nonexistent), and training goes on without it. The command-line tests run the
 * program (AG_TRANSLATE_BIN, set by the Makefile).
 * The small helpers (temporary folders, generated copy tasks) repeat test_translate.c's. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "files.h"
#include "translate.h"
#include "translate_run.h"

/* ---- helpers ---- */

/* 1 if path is a PNG file of at least min_bytes */
static int is_png(const char *path, long min_bytes) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    unsigned char sig[8] = {0};
    size_t n = fread(sig, 1, 8, f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fclose(f);
    static const unsigned char png[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    return n == 8 && memcmp(sig, png, 8) == 0 && size >= min_bytes;
}

static int exists(const char *path) {
    struct stat s;
    return stat(path, &s) == 0;
}

/* Trains a 1+1-layer model with 2 heads on a copy task into dir/run (best.npz); steps decide
 * how well it learns. */
static void train_copy(const char *dir, int steps, double dropout, char *ckpt) {
    char train[512], valid[512], out[512];
    ts_write_copy_task(ts_join(train, dir, "train.tsv"), 1500, 0, 21, 3, 6, 6);
    ts_write_copy_task(ts_join(valid, dir, "valid.tsv"), 60, 0, 22, 3, 6, 6);
    TsTrainConfig c = ts_train_defaults();
    c.train_path = train;
    c.valid_path = valid;
    c.out_dir = ts_join(out, dir, "run");
    c.model.layer.d_model = 32;
    c.model.layer.n_heads = c.model.layer.n_kv_heads = 2;
    c.model.layer.d_ff = 64;
    c.model.layer.dropout = dropout;
    c.model.n_enc_layers = c.model.n_dec_layers = 1;
    c.model.max_len = 16;
    c.optim.lr = 1e-2;
    c.optim.schedule.warmup = 20;
    c.batch = 32;
    c.steps = steps;
    c.log_every = 50;
    c.valid_every = steps;
    c.verbose = 0;
    c.force = 1;
    c.threads = 1;
    cr_assert_eq(ts_train(&c), TR_EXIT_OK, "%s", ag_last_error());
    ts_join(ckpt, out, "best.npz");
}

/* ---- attention ---- */

/* the rows of a (rows, cols) block of probabilities each sum to 1 (a fully masked row: 0) */
static void assert_rows_are_distributions(const float *p, int rows, int cols, const char *what) {
    for (int r = 0; r < rows; r++) {
        double sum = 0;
        for (int c = 0; c < cols; c++) {
            cr_assert(p[(size_t)r * cols + c] >= 0 && p[(size_t)r * cols + c] <= 1 + 1e-6,
                      "%s: p[%d][%d] = %g", what, r, c, p[(size_t)r * cols + c]);
            sum += p[(size_t)r * cols + c];
        }
        cr_assert(fabs(sum - 1) < 1e-5 || sum == 0, "%s: row %d sums to %.8f", what, r, sum);
    }
}

static const NpzEntry *entry(const NpzFile *f, const char *name, int64_t d1, int64_t d2,
                             int64_t d3) {
    const NpzEntry *e = npz_find(f, name);
    cr_assert(e != NULL, "%s: no entry '%s'", f->path, name);
    cr_assert_eq(e->dtype, NPZ_F32, "%s: dtype %d", name, (int)e->dtype);
    cr_assert_eq(e->ndim, 4, "%s: %d dimensions", name, e->ndim);
    cr_assert(e->shape[0] == 1 && e->shape[1] == d1 && e->shape[2] == d2 && e->shape[3] == d3,
              "%s: shape (%lld,%lld,%lld,%lld), expected (1,%lld,%lld,%lld)", name,
              (long long)e->shape[0], (long long)e->shape[1], (long long)e->shape[2],
              (long long)e->shape[3], (long long)d1, (long long)d2, (long long)d3);
    return e;
}

Test(tr_attention, npz_has_bertviz_entries_shapes_and_distributions) {
    char dir[64], ckpt[512], npz[512];
    ts_tmp_dir(dir, sizeof dir, "viz");
    train_copy(dir, 40, 0, ckpt);
    Translator tr;
    cr_assert_eq(tr_load(&tr, ckpt), AG_OK, "%s", ag_last_error());
    TrAttention a;
    /* "z" is not in the vocabulary: it stays a position (<unk>) */
    cr_assert_eq(tr_attention_collect(&tr, "a b c z d", "a b", &a, NULL), AG_OK, "%s",
                 ag_last_error());
    cr_assert_eq(a.S, 6); /* 5 words + <eos> */
    cr_assert_eq(a.T, 3); /* <bos> a b */
    cr_assert_eq(a.n_unk, 1);
    cr_assert_str_eq(a.source, "a b c <unk> d");
    cr_assert_str_eq(a.translation, "a b");
    cr_assert_eq(lens_patterns_save(&a.p, ts_join(npz, dir, "attention.npz")), AG_OK, "%s",
                 ag_last_error());
    NpzFile *f;
    cr_assert_eq(npz_read(npz, &f, NULL), AG_OK, "%s", ag_last_error());
    cr_assert_eq(f->n, 5, "entries: %d (1 encoder + 2 decoder blocks + 2 token lists)", f->n);
    const NpzEntry *enc = entry(f, "encoder.layers.0.self_attn", 2, 6, 6);
    const NpzEntry *dec = entry(f, "decoder.layers.0.self_attn", 2, 3, 3);
    const NpzEntry *cross = entry(f, "decoder.layers.0.multihead_attn", 2, 3, 6);
    assert_rows_are_distributions(enc->data, 2 * 6, 6, "encoder self");
    assert_rows_are_distributions(dec->data, 2 * 3, 3, "decoder self");
    assert_rows_are_distributions(cross->data, 2 * 3, 6, "cross");
    /* the decoder's self-attention is causal; the file holds what the model computed */
    const float *d = dec->data;
    for (int h = 0; h < 2; h++)
        for (int q = 0; q < 3; q++)
            for (int k = q + 1; k < 3; k++)
                cr_assert_eq(d[(h * 3 + q) * 3 + k], 0.0f, "head %d: q %d sees k %d", h, q, k);
    cr_assert_arr_eq(cross->data, a.p.blocks[2].p, cross->nbytes); /* enc 0, dec 0 self, cross */
    cr_assert_arr_eq(enc->data, a.p.blocks[0].p, enc->nbytes);
    const NpzEntry *et = npz_find(f, "encoder_tokens"), *dt = npz_find(f, "decoder_tokens");
    cr_assert(et && dt && et->dtype == NPZ_U8 && dt->dtype == NPZ_U8);
    const char want_src[] = "a\nb\nc\n<unk>\nd\n<eos>", want_dec[] = "<bos>\na\nb";
    cr_assert_eq(et->count, strlen(want_src));
    cr_assert_eq(memcmp(et->data, want_src, et->count), 0);
    cr_assert_eq(dt->count, strlen(want_dec));
    cr_assert_eq(memcmp(dt->data, want_dec, dt->count), 0);
    npz_free(f);
    /* without a target: the greedy translation, the same as `translate` gives */
    TrAttention g;
    cr_assert_eq(tr_attention_collect(&tr, "b a c", NULL, &g, NULL), AG_OK);
    int src[3] = {txt_vocab_find(&tr.src, "b", 1), txt_vocab_find(&tr.src, "a", 1),
                  txt_vocab_find(&tr.src, "c", 1)},
        out[16];
    int n = tr_translate_ids(&tr, src, 3, 1, 0, out, 16);
    cr_assert_eq(g.T, n + 1);
    for (int i = 0; i < n; i++)
        cr_assert_str_eq(g.p.lists[1].tok[i + 1], txt_vocab_word(&tr.tgt, out[i]));
    tr_attention_free(&g);
    /* no words: an error, not a crash */
    TrAttention e;
    cr_assert_eq(tr_attention_collect(&tr, "   ", NULL, &e, NULL), AG_ERR_ARG);
    cr_assert(strstr(ag_last_error(), "no words") != NULL, "%s", ag_last_error());
    tr_attention_free(&e);
    tr_attention_free(&a);
    tr_free(&tr);
    ts_rm_tree(dir);
}

/* ---- head importance ---- */

/* The teacher-forced loss of every pair of d (mean over the target tokens), by hand: no-grad
 * batches of batch pairs sorted by length, as the measure runs them */
static double data_loss(Translator *tr, const TxtPairSet *d, int batch) {
    int *idx = ex_malloc((size_t)d->n * sizeof(int));
    txt_pairs_by_length(d->pairs, 0, d->n, idx);
    TxtPairBatch b;
    memset(&b, 0, sizeof b);
    double sum = 0;
    long tokens = 0;
    for (int i0 = 0; i0 < d->n; i0 += batch) {
        txt_pair_batch_make(&b, d->pairs, idx + i0, d->n - i0 < batch ? d->n - i0 : batch);
        sum += eval_seq2seq_loss_sum(&tr->model, tr->tape, &b);
        tokens += b.n_tgt_tokens;
    }
    txt_pair_batch_free(&b);
    free(idx);
    return sum / (double)tokens;
}

Test(tr_heads, a_trained_copy_model_needs_its_cross_attention) {
    char dir[64], ckpt[512], valid[512];
    ts_tmp_dir(dir, sizeof dir, "viz");
#ifdef AG_DEBUG
    int steps = 250; /* ASan runs about 5 times slower */
#else
    int steps = 400;
#endif
    train_copy(dir, steps, 0.1, ckpt); /* dropout: off while measuring, then back */
    Translator tr;
    cr_assert_eq(tr_load(&tr, ckpt), AG_OK, "%s", ag_last_error());
    TxtPairSet d;
    cr_assert_eq(txt_pairs_read(ts_join(valid, dir, "valid.tsv"), &d, &tr.src, &tr.tgt, 0, 0),
                 AG_OK);
    LensHeadImportance h;
    cr_assert_eq(tr_head_importance(&tr, &d, 0, 16, &h, NULL), AG_OK, "%s", ag_last_error());
    cr_assert_eq(h.n_blocks, 3);
    cr_assert_eq(h.NH, 2);
    cr_assert_eq(h.n_rows, 60);
    cr_assert_eq(h.n_batches, 4);
    cr_assert(!strcmp(h.kind[0], "enc self") && !strcmp(h.kind[1], "dec self") &&
              !strcmp(h.kind[2], "dec cross"));
    cr_log_info("copy model after %d steps: loss %.4f", steps, h.base_loss);
    cr_assert(h.base_loss < 0.2, "the copy model did not learn: loss %.4f", h.base_loss);
    for (int b = 0; b < 3; b++) {
        double norm = 0;
        for (int k = 0; k < 2; k++) {
            int i = b * 2 + k;
            cr_log_info("%-9s head %d: loss %+.4f, grad score %.4f (raw %.3e)", h.kind[b], k,
                        h.loss_up[i], h.grad_score[i], h.grad_raw[i]);
            cr_assert(isfinite(h.loss_up[i]) && isfinite(h.grad_raw[i]) &&
                      isfinite(h.grad_score[i]));
            cr_assert(h.grad_raw[i] >= 0 && h.grad_score[i] >= 0 && h.grad_score[i] <= 1 + 1e-12);
            norm += h.grad_score[i] * h.grad_score[i];
        }
        cr_assert(fabs(norm - 1) < 1e-9, "block %d: the scores' L2 norm is %.12f", b, norm);
    }
    /* the gates are back at 1 and untracked, dropout back at 0.1: the loss is the same to the
     * bit */
    cr_assert(tr.model.cfg.layer.dropout == 0.1 && tr.model.enc[0].ffn.dropout == 0.1 &&
              tr.model.dec[0].dropout == 0.1 && tr.model.dec[0].multihead_attn.dropout == 0.1);
    LensHeadBlock blk[LENS_MAX_HEAD_BLOCKS];
    cr_assert_eq(lens_heads_seq2seq(&tr.model, blk), 3);
    for (int b = 0; b < 3; b++) {
        MultiHeadAttention *m = blk[b].attn;
        cr_assert_eq(m->track_gates, 0);
        for (int k = 0; k < 2; k++) cr_assert_eq(m->gate->data[k], (Real)1);
    }
    cr_assert_eq(data_loss(&tr, &d, 16), h.base_loss);
    /* masking by hand gives the table's number */
    MultiHeadAttention *cross = blk[2].attn;
    cross->gate->data[1] = 0;
    double by_hand = data_loss(&tr, &d, 16) - h.base_loss;
    cross->gate->data[1] = 1;
    cr_assert_eq(by_hand, h.loss_up[2 * 2 + 1]);
    /* without any cross-attention head the decoder cannot know what to copy */
    cross->gate->data[0] = cross->gate->data[1] = 0;
    double blind = data_loss(&tr, &d, 16);
    cross->gate->data[0] = cross->gate->data[1] = 1;
    cr_log_info("every cross-attention head masked: loss %.4f (with them %.4f)", blind,
                h.base_loss);
    cr_assert(blind > h.base_loss + 1.0, "masking the cross-attention: loss %.4f vs %.4f", blind,
              h.base_loss);
    /* the two measures rank the heads alike: Spearman's rank correlation of the loss increase
     * and the raw gradient over the 6 heads (1: the same order) */
    int r_up[6], r_grad[6];
    for (int i = 0; i < 6; i++) {
        r_up[i] = r_grad[i] = 0;
        for (int j = 0; j < 6; j++) {
            r_up[i] += h.loss_up[j] < h.loss_up[i] || (h.loss_up[j] == h.loss_up[i] && j < i);
            r_grad[i] += h.grad_raw[j] < h.grad_raw[i] || (h.grad_raw[j] == h.grad_raw[i] && j < i);
        }
    }
    double d2 = 0;
    for (int i = 0; i < 6; i++) d2 += (double)(r_up[i] - r_grad[i]) * (r_up[i] - r_grad[i]);
    double rho = 1 - 6 * d2 / (6.0 * 35);
    cr_log_info("rank correlation of masking and gradient: %.2f", rho);
    cr_assert(rho >= 0.5, "masking and the gradient rank the heads differently: rho %.2f", rho);
    lens_heads_free(&h);
    txt_pairs_free(&d);
    tr_free(&tr);
    ts_rm_tree(dir);
}

/* ---- plots ---- */

static const char csv[] = "step,epoch,train_loss,lr,grad_norm,tokens_per_s,valid_loss,valid_exact\n"
                          "10,0.1,3.5,1e-3,1.0,100,,\n"
                          "20,0.2,2.5,1e-3,1.0,100,2.4,0.05\n"
                          "30,0.3,1.5,1e-3,1.0,100,,\n"
                          "40,0.4,0.8,1e-3,1.0,100,0.9,0.40\n";

Test(tr_plot, loss_plot_is_a_png_when_gnuplot_is_there) {
    if (!run_gnuplot_available())
        cr_skip_test("gnuplot is not installed (scripts/deps.sh gnuplot-nox)");
    char dir[64], path[512], png[512], gp[512];
    ts_tmp_dir(dir, sizeof dir, "viz");
    ts_write_text(ts_join(path, dir, "log.csv"), csv);
    cr_assert_eq(run_plot_loss(path, ts_join(png, dir, "loss.png")), RUN_PLOT_DRAWN, "%s",
                 ag_last_error());
    cr_assert(is_png(png, 2000), "%s is not a PNG", png);
    char *script = ts_read_text(ts_join(gp, dir, "loss.gp"), NULL);
    cr_assert(strstr(script, "pngcairo") && strstr(script, "valid exact match"));
    free(script);
    /* a quote in a path (gnuplot strings are quoted) */
    char quoted[512], qcsv[512], qpng[512];
    cr_assert_eq(mkdir(ts_join(quoted, dir, "it's"), 0777), 0);
    ts_write_text(ts_join(qcsv, quoted, "log.csv"), csv);
    cr_assert_eq(run_plot_loss(qcsv, ts_join(qpng, quoted, "loss.png")), RUN_PLOT_DRAWN, "%s",
                 ag_last_error());
    cr_assert(is_png(qpng, 2000));
    /* the header names the columns: an appended column changes nothing, a missing one fails */
    ts_write_text(path, "step,train_loss\n");
    cr_assert_eq(run_plot_loss(path, png), RUN_PLOT_SKIPPED);
    cr_assert(strstr(ag_last_error(), "no rows"), "%s", ag_last_error());
    ts_write_text(path, "when,what\n1,2\n");
    cr_assert_eq(run_plot_loss(path, png), RUN_PLOT_FAILED);
    cr_assert(strstr(ag_last_error(), "train_loss"), "%s", ag_last_error());
    /* a script gnuplot rejects: failed, with gnuplot's complaint, and no PNG left behind */
    cr_assert_eq(run_plot_script("set terminal pngcairo\nset output outfile\nplot nonsense(\n",
                                 ts_join(png, dir, "bad.png")),
                 RUN_PLOT_FAILED);
    cr_assert(strstr(ag_last_error(), "plot failed"), "%s", ag_last_error());
    cr_assert(!exists(png));
    ts_rm_tree(dir);
}

Test(tr_plot, plots_are_skipped_with_a_message_without_gnuplot) {
    setenv("AG_GNUPLOT", "/nonexistent/gnuplot", 1);
    cr_assert_eq(run_gnuplot_available(), 0);
    char dir[64], path[512], png[512];
    ts_tmp_dir(dir, sizeof dir, "viz");
    ts_write_text(ts_join(path, dir, "log.csv"), csv);
    cr_assert_eq(run_plot_loss(path, ts_join(png, dir, "loss.png")), RUN_PLOT_SKIPPED);
    const char *msg = ag_last_error();
    cr_assert(strstr(msg, "plot skipped") && strstr(msg, "gnuplot not found") &&
                  strstr(msg, "AG_GNUPLOT=/nonexistent/gnuplot") && strstr(msg, "gnuplot-nox"),
              "%s", msg);
    cr_assert(!exists(png));
    /* a command name is looked up in PATH */
    setenv("AG_GNUPLOT", "no-such-gnuplot-here", 1);
    cr_assert_eq(run_gnuplot_available(), 0);
    cr_assert_eq(run_plot_loss(path, png), RUN_PLOT_SKIPPED);
    cr_assert(strstr(ag_last_error(), "no-such-gnuplot-here"), "%s", ag_last_error());
    /* the heads heatmap likewise */
    LensHeadImportance h;
    memset(&h, 0, sizeof h);
    double v[2] = {0.5, 0.1}, s[2] = {0.98, 0.2};
    h.n_blocks = 1;
    h.NH = 2;
    h.kind[0] = "dec cross";
    h.loss_up = v;
    h.grad_score = s;
    h.grad_raw = s;
    cr_assert_eq(view_heads_png(&h, ts_join(png, dir, "heads.png"), NULL), RUN_PLOT_SKIPPED);
    cr_assert(!exists(png));
    ts_rm_tree(dir);
}

/* ---- the program ---- */

#define TINY_FLAGS                                                                                 \
    "--threads", "1", "--d-model", "16", "--heads", "2", "--layers", "1", "--ff", "32",            \
        "--max-len", "16", "--batch", "16", "--warmup", "2", "--steps", "20", "--valid-every",     \
        "10"

/* trains with the program; AG_GNUPLOT as given (NULL: unset) */
static TsRun train_program(const char *dir, const char *gnuplot) {
    char train[512], valid[512], out[512];
    ts_write_copy_task(ts_join(train, dir, "train.tsv"), 200, 0, 31, 3, 6, 6);
    ts_write_copy_task(ts_join(valid, dir, "valid.tsv"), 20, 0, 32, 3, 6, 6);
    if (gnuplot)
        setenv("AG_GNUPLOT", gnuplot, 1);
    else
        unsetenv("AG_GNUPLOT");
    const char *args[] = {
        "train",    "--train", train, "--valid", valid, "--out", ts_join(out, dir, "run"),
        TINY_FLAGS, NULL};
    return ts_run(dir, args, NULL);
}

Test(tr_cli, training_without_gnuplot_says_the_plot_was_skipped) {
    char dir[64], p[512];
    ts_tmp_dir(dir, sizeof dir, "viz");
    TsRun r = train_program(dir, "/nonexistent");
    cr_assert_eq(r.code, 0, "exit %d: %s", r.code, r.err);
    cr_assert(exists(ts_join(p, dir, "run/best.npz")) && exists(ts_join(p, dir, "run/log.csv")));
    cr_assert(!exists(ts_join(p, dir, "run/loss.png")));
    const char *m = strstr(r.out, "plot skipped: gnuplot not found (AG_GNUPLOT=/nonexistent)");
    cr_assert(m != NULL, "stdout:\n%s", r.out);
    cr_assert(strstr(m + 1, "plot skipped") == NULL, "said more than once:\n%s", r.out);
    ts_run_free(&r);
    ts_rm_tree(dir);
}

Test(tr_cli, training_attention_and_heads_draw_their_pictures) {
    if (!run_gnuplot_available())
        cr_skip_test("gnuplot is not installed (scripts/deps.sh gnuplot-nox)");
    char dir[64], p[512], ckpt[512], out[512], valid[512];
    ts_tmp_dir(dir, sizeof dir, "viz");
    TsRun r = train_program(dir, NULL);
    cr_assert_eq(r.code, 0, "exit %d: %s", r.code, r.err);
    cr_assert(is_png(ts_join(p, dir, "run/loss.png"), 2000));
    cr_assert(strstr(r.out, "loss plot: "), "%s", r.out);
    ts_run_free(&r);
    ts_join(ckpt, dir, "run/best.npz");
    const char *att[] = {"attention", "--ckpt", ckpt, "--out", ts_join(out, dir, "att"),
                         "a b c",     NULL};
    r = ts_run(dir, att, NULL);
    cr_assert_eq(r.code, 0, "exit %d: %s", r.code, r.err);
    cr_assert(exists(ts_join(p, out, "attention.npz")));
    cr_assert(is_png(ts_join(p, out, "attention_layer0.png"), 2000));
    cr_assert(exists(ts_join(p, out, "attention_layer0.gp")));
    cr_assert(strstr(r.out, "attention_layer0.png"), "%s", r.out);
    ts_run_free(&r);
    const char *heads[] = {"heads",
                           "--ckpt",
                           ckpt,
                           "--data",
                           ts_join(valid, dir, "valid.tsv"),
                           "--out",
                           ts_join(out, dir, "heads"),
                           "--max",
                           "10",
                           NULL};
    r = ts_run(dir, heads, NULL);
    cr_assert_eq(r.code, 0, "exit %d: %s", r.code, r.err);
    cr_assert(is_png(ts_join(p, out, "heads.png"), 2000));
    cr_assert(strstr(r.out, "dec cross") && strstr(r.out, "loss_increase"), "%s", r.out);
    char *tsv = ts_read_text(ts_join(p, out, "heads.tsv"), NULL);
    int lines = 0;
    for (char *c = tsv; *c; c++) lines += *c == '\n';
    cr_assert_eq(lines, 1 + 3 * 2, "heads.tsv:\n%s", tsv); /* header + 3 blocks x 2 heads */
    free(tsv);
    ts_run_free(&r);
    /* without gnuplot: the numbers are still written, the pictures said to be skipped */
    setenv("AG_GNUPLOT", "/nonexistent", 1);
    const char *att2[] = {"attention",  "--ckpt", ckpt, "--out", ts_join(out, dir, "att2"),
                          "--sentence", "b a",    NULL};
    r = ts_run(dir, att2, NULL);
    cr_assert_eq(r.code, 0, "exit %d: %s", r.code, r.err);
    cr_assert(exists(ts_join(p, out, "attention.npz")));
    cr_assert(!exists(ts_join(p, out, "attention_layer0.png")));
    cr_assert(strstr(r.out, "plot skipped: gnuplot not found"), "%s", r.out);
    ts_run_free(&r);
    /* misuse */
    const char *none[] = {"attention", "--ckpt", ckpt, NULL};
    r = ts_run(dir, none, NULL);
    cr_assert_eq(r.code, 2);
    cr_assert(strstr(r.err, "give a sentence"), "%s", r.err);
    ts_run_free(&r);
    ts_rm_tree(dir);
}
