/* test_translate_lens_cli.c: attograd-translate's cache, ablate, patch, detect and lens
 * (examples/translate/lens.c, cli.c) on small copy models trained here: the cache's entries and
 * shapes (the encoder's, the decoder's and the cross-attention's, tokens and src_tokens, the
 * config), the ablation table of every attention's heads, patching the whole encoder output
 * restoring the clean metric, attribution patching's table; detect's scores (shapes, in
 * [0, 1]); the lens's parts summing to the logit and its last stage being the logits, on a
 * pre-LN model, patch's logit difference at --pos being the lens's there, and the lens's refusal
 * of a post-LN one; every --help, and bad input exiting 2 naming
 * the path or the flag. The program is AG_TRANSLATE_BIN (set by the Makefile).
 * Not here: the hook points themselves (tests/lens/test_lens_seq2seq.c). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "files.h"
#include "translate.h"
#include "translate_run.h"

/* a 2+2-layer, 2-head model trained 150 steps on the copy task: dir/run/best.npz; pre_ln picks
 * the norms' place (the lens needs pre-LN) */
static void train_copy(const char *dir, char *ckpt, int pre_ln) {
    char train[512], valid[512], out[512];
    ts_write_copy_task(ts_join(train, dir, "train.tsv"), 800, 0, 31, 3, 5, 6);
    ts_write_copy_task(ts_join(valid, dir, "valid.tsv"), 40, 0, 32, 3, 5, 6);
    TsTrainConfig c = ts_train_defaults();
    c.train_path = train;
    c.valid_path = valid;
    c.out_dir = ts_join(out, dir, "run");
    c.model.layer.d_model = 16;
    c.model.layer.n_heads = c.model.layer.n_kv_heads = 2;
    c.model.layer.d_ff = 32;
    c.model.layer.dropout = 0.1; /* the lens runs without it */
    c.model.n_enc_layers = c.model.n_dec_layers = 2;
    c.model.layer.pre_ln = pre_ln;
    c.model.max_len = 12;
    c.optim.lr = 1e-2;
    c.optim.schedule.warmup = 20;
    c.batch = 32;
    c.steps = 150;
    c.log_every = 50;
    c.valid_every = 150;
    c.verbose = 0;
    c.force = 1;
    c.threads = 1;
    cr_assert_eq(ts_train(&c), TR_EXIT_OK, "%s", ag_last_error());
    ts_join(ckpt, out, "best.npz");
}

static TsRun run(const char *dir, const char *const *args) { return ts_run(dir, args, NULL); }

static const NpzEntry *entry(const NpzFile *f, const char *name, int ndim, const int64_t *shape) {
    const NpzEntry *e = npz_find(f, name);
    cr_assert(e, "%s: no entry %s", f->path, name);
    cr_assert_eq(e->ndim, ndim, "%s: %d dims", name, e->ndim);
    for (int d = 0; d < ndim; d++)
        cr_assert_eq(e->shape[d], shape[d], "%s: axis %d is %lld, want %lld", name, d,
                     (long long)e->shape[d], (long long)shape[d]);
    return e;
}

/* patch of logit(d) - logit(e) at decoder position pos (-1: the last) from "a b c d" into
 * "e b c f" (both with the target "a b c d") at the last block's residual: exit 0, the .npz it
 * wrote to out, read */
static NpzFile *patch_d_minus_e(const char *dir, const char *ckpt, const char *pos,
                                const char *out) {
    const char *args[] = {"patch",
                          "--ckpt",
                          ckpt,
                          "--clean",
                          "a b c d",
                          "--corrupt",
                          "e b c f",
                          "--target",
                          "a b c d",
                          "--hook",
                          "decoder.blocks.1.hook_resid_post",
                          "--metric",
                          "logit-diff",
                          "--good",
                          "d",
                          "--bad",
                          "e",
                          "--pos",
                          pos,
                          "--out",
                          out,
                          NULL};
    TsRun r = run(dir, args);
    cr_assert_eq(r.code, 0, "patch: %s%s", r.out, r.err);
    ts_run_free(&r);
    NpzFile *f;
    cr_assert_eq(npz_read(out, &f, NULL), AG_OK, "%s", ag_last_error());
    return f;
}

Test(tr_lens_cli, cache_ablate_and_patch_on_a_trained_copy_model, .timeout = 300) {
    char dir[256], ckpt[512], out[512], pairs[512];
    ts_tmp_dir(dir, sizeof dir, "tr_lens");
    train_copy(dir, ckpt, 0);

    /* cache: every point of "a b c d" with its given copy (S 5 with EOS, T 5 with BOS) */
    ts_join(out, dir, "cache.npz");
    TsRun r =
        run(dir, (const char *[]){"cache", "--ckpt", ckpt, "--target", "a b c d", "--out", out,
                                  "--good", "d", "--bad", "e", "--pos", "3", "a b c d", NULL});
    cr_assert_eq(r.code, 0, "cache: %s%s", r.out, r.err);
    cr_assert(strstr(r.out, "activations and gradients of 1 row(s), 5 source and 5 decoder"), "%s",
              r.out);
    ts_run_free(&r);
    NpzFile *f;
    cr_assert_eq(npz_read(out, &f, NULL), AG_OK, "%s", ag_last_error());
    entry(f, "encoder.hook_embed", 3, (int64_t[]){1, 5, 16});
    entry(f, "encoder.blocks.1.attn.hook_pattern", 4, (int64_t[]){1, 2, 5, 5});
    entry(f, "decoder.blocks.0.attn.hook_pattern", 4, (int64_t[]){1, 2, 5, 5});
    const NpzEntry *cp =
        entry(f, "decoder.blocks.1.cross_attn.hook_pattern", 4, (int64_t[]){1, 2, 5, 5});
    entry(f, "decoder.blocks.1.cross_attn.hook_k", 4, (int64_t[]){1, 5, 2, 8});
    entry(f, "decoder.blocks.1.hook_resid_mid_cross", 3, (int64_t[]){1, 5, 16});
    entry(f, "decoder.blocks.1.cross_attn.hook_z.grad", 4, (int64_t[]){1, 5, 2, 8});
    entry(f, "decoder.ln_final.hook_normalized", 3, (int64_t[]){1, 5, 16});
    cr_assert(!npz_find(f, "decoder.ln_final.hook_scale.grad"), "a read-only point has no grad");
    const NpzEntry *tk = entry(f, "tokens", 2, (int64_t[]){1, 5});
    const NpzEntry *st = entry(f, "src_tokens", 2, (int64_t[]){1, 5});
    cr_assert_eq(tk->dtype, NPZ_I32);
    cr_assert_eq(((const int32_t *)tk->data)[0], TXT_BOS);
    cr_assert_eq(((const int32_t *)st->data)[4], TXT_EOS);
    for (int row = 0; row < 2 * 5; row++) { /* the cross-attention's rows sum to 1 */
        double sum = 0;
        for (int j = 0; j < 5; j++)
            sum += cp->dtype == NPZ_F64 ? ((const double *)cp->data)[row * 5 + j]
                                        : ((const float *)cp->data)[row * 5 + j];
        cr_assert(fabs(sum - 1) < 1e-4, "row %d sums to %g", row, sum);
    }
    const NpzEntry *cfg = npz_find(f, "config"), *ss = npz_find(f, "src_token_strs");
    cr_assert(cfg && ss);
    char text[2048] = {0};
    memcpy(text, cfg->data, cfg->nbytes < sizeof text - 1 ? cfg->nbytes : sizeof text - 1);
    cr_assert(strstr(text, "\"model\": \"seq2seq\"") && strstr(text, "\"n_enc_layers\": 2"), "%s",
              text);
    memset(text, 0, sizeof text);
    memcpy(text, ss->data, ss->nbytes < sizeof text - 1 ? ss->nbytes : sizeof text - 1);
    cr_assert(strstr(text, "[\"a\",\"b\",\"c\",\"d\",\"<eos>\"]"), "%s", text);
    npz_free(f);

    /* ablate: every attention's z by head, over two rows of pairs, mean mode */
    ts_write_text(ts_join(pairs, dir, "pairs.tsv"), "a b c\ta b c\nd e f\td e f\n");
    ts_join(out, dir, "ablate.npz");
    r = run(dir, (const char *[]){"ablate", "--ckpt", ckpt, "--pairs", pairs, "--mode", "mean",
                                  "--out", out, NULL});
    cr_assert_eq(r.code, 0, "ablate: %s%s", r.out, r.err);
    cr_assert(strstr(r.out, "mean ablation of 6 point(s) x every head"), "%s", r.out);
    cr_assert(strstr(r.out, "decoder.blocks.1.cross_attn.hook_z"), "%s", r.out);
    ts_run_free(&r);
    cr_assert_eq(npz_read(out, &f, NULL), AG_OK, "%s", ag_last_error());
    const NpzEntry *v = entry(f, "values", 2, (int64_t[]){6, 2});
    double base = *(const double *)npz_find(f, "base")->data;
    int changed = 0;
    for (int i = 0; i < 12; i++) {
        double x = ((const double *)v->data)[i];
        cr_assert(isfinite(x), "value %d: %g", i, x);
        changed += x != base;
    }
    cr_assert_gt(changed, 0, "some head matters");
    npz_free(f);

    /* patch: embeddings of the same words change nothing; the last residual at the last
     * position restores the clean logit difference there */
    ts_join(out, dir, "patch.npz");
    r = run(dir, (const char *[]){"patch", "--ckpt", ckpt, "--clean", "a b c d", "--corrupt",
                                  "e b c f", "--target", "a b c d", "--hook", "encoder.hook_embed,",
                                  "--out", out, NULL});
    cr_assert_eq(r.code, 2, "a trailing comma is not one glob: %s%s", r.out, r.err);
    ts_run_free(&r);
    r = run(dir, (const char *[]){"patch", "--ckpt", ckpt, "--clean", "a b c d", "--corrupt",
                                  "e b c f", "--target", "a b c d", "--hook", "encoder.hook_embed",
                                  "--by", "position", "--out", out, NULL});
    cr_assert_eq(r.code, 0, "patch: %s%s", r.out, r.err);
    ts_run_free(&r);
    cr_assert_eq(npz_read(out, &f, NULL), AG_OK, "%s", ag_last_error());
    v = entry(f, "values", 2, (int64_t[]){1, 5});
    double clean = *(const double *)npz_find(f, "clean")->data;
    double corrupt = *(const double *)npz_find(f, "corrupted")->data;
    const double *pv = v->data;
    cr_assert(clean != corrupt);
    cr_assert(pv[1] == corrupt && pv[2] == corrupt && pv[4] == corrupt,
              "%.17g %.17g %.17g vs %.17g", pv[1], pv[2], pv[4], corrupt);
    cr_assert(pv[0] != corrupt && pv[3] != corrupt);
    npz_free(f);
    f = patch_d_minus_e(dir, ckpt, "-1", out);
    pv = entry(f, "values", 2, (int64_t[]){1, 5})->data;
    clean = *(const double *)npz_find(f, "clean")->data;
    cr_assert(pv[4] == clean, "%.17g vs %.17g", pv[4], clean);
    npz_free(f);
    r = run(dir, (const char *[]){"patch", "--ckpt", ckpt, "--clean", "a b c d", "--corrupt",
                                  "e b c f", "--hook", "decoder.blocks.*.cross_attn.hook_z", "--by",
                                  "head", "--attribution", "--out", out, NULL});
    cr_assert_eq(r.code, 0, "attribution: %s%s", r.out, r.err);
    cr_assert(strstr(r.out, "attribution patching over (head) of 2 point(s)"), "%s", r.out);
    ts_run_free(&r);
    cr_assert_eq(npz_read(out, &f, NULL), AG_OK, "%s", ag_last_error());
    entry(f, "values", 2, (int64_t[]){2, 2});
    cr_assert_eq(*(const int64_t *)npz_find(f, "attribution")->data, 1);
    npz_free(f);

    /* bad input: exit 2, naming the path or the flag */
    const struct {
        const char *args[16];
        const char *says;
    } bad[] = {
        {{"cache", "--ckpt", "/nonexistent/x.npz", "a b", NULL}, "/nonexistent/x.npz"},
        {{"cache", "--ckpt", ckpt, "--hooks", "decoder.nothing", "a b", NULL}, "--hooks"},
        {{"cache", "--ckpt", ckpt, "--pairs", "/nonexistent/p.tsv", NULL}, "/nonexistent/p.tsv"},
        {{"cache", "--ckpt", ckpt, "--good", "a", "a b", NULL}, "--good and --bad"},
        {{"cache", "--ckpt", ckpt, "a \xff b", NULL}, "not valid UTF-8"},
        {{"patch", "--ckpt", ckpt, "--clean", "a b", "--corrupt", "\xc3", NULL}, "--corrupt"},
        {{"ablate", "--ckpt", ckpt, "--metric", "logit-diff", "--good", "zz", "--bad", "a", "a b",
          NULL},
         "--good 'zz'"},
        {{"ablate", "--ckpt", ckpt, "--positions", "1,x", "a b", NULL}, "--positions"},
        {{"ablate", "--ckpt", ckpt, "--hook", "*hook_resid_*", "--mode", "zero", "--positions", "9",
          "a b", NULL},
         "position 9"},
        {{"ablate", "--ckpt", ckpt, "--metric", "bleu", "a b", NULL}, "--metric bleu"},
        {{"patch", "--ckpt", ckpt, "--clean", "a b c", "--corrupt", "a b", NULL}, "--corrupt"},
        {{"patch", "--ckpt", ckpt, "--clean", "a b c", NULL}, "--corrupt"},
        {{"patch", "--ckpt", ckpt, "--clean", "a b", "--corrupt", "b a", "--target", "a b c d",
          "--hook", "*.blocks.0.hook_resid_pre", NULL},
         "positions"},
        {{"patch", "--ckpt", ckpt, "--clean", "a b", "--corrupt", "b a", "--by", "diagonal", NULL},
         "--by"},
        {{"detect", "--ckpt", "/nonexistent/x.npz", "a b", NULL}, "/nonexistent/x.npz"},
        {{"detect", "--ckpt", ckpt, "--pairs", "/nonexistent/p.tsv", NULL}, "/nonexistent/p.tsv"},
        {{"detect", "--ckpt", ckpt, "--pos", "1", "a b", NULL}, "--pos"},
        {{"lens", "--ckpt", ckpt, "a b", NULL}, "--word"},
        {{"lens", "--ckpt", ckpt, "--word", "a", "--good", "a", "--bad", "b", "a b", NULL},
         "--word"},
        {{"lens", "--ckpt", ckpt, "--good", "a", "a b", NULL}, "--good WORD --bad WORD"},
        {{"lens", "--ckpt", ckpt, "--word", "zz", "a b", NULL}, "--word 'zz'"},
        {{"lens", "--ckpt", ckpt, "--word", "a", "--pos", "9", "a b", NULL}, "--pos 9"},
        {{"lens", "--ckpt", ckpt, "--word", "a", "a b", NULL}, "post-LN"},
        {{"lens", "--ckpt", "/nonexistent/x.npz", "--word", "a", "a b", NULL},
         "/nonexistent/x.npz"},
    };
    ts_write_text(ts_join(pairs, dir, "uneven.tsv"), "a b c\ta b c\nd e\td e\n");
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const char *args[20] = {0};
        int n = 0;
        for (int k = 0; bad[i].args[k]; k++) args[n++] = bad[i].args[k];
        args[n] = NULL;
        r = run(dir, args);
        cr_assert_eq(r.code, 2, "case %zu (%s): exit %d: %s%s", i, bad[i].says, r.code, r.out,
                     r.err);
        cr_assert(strstr(r.err, bad[i].says), "case %zu: wanted '%s' in: %s", i, bad[i].says,
                  r.err);
        ts_run_free(&r);
    }
    r = run(dir, (const char *[]){"ablate", "--ckpt", ckpt, "--pairs", pairs, NULL});
    cr_assert_eq(r.code, 2, "%s", r.err);
    cr_assert(strstr(r.err, "uneven.tsv: line 2") && strstr(r.err, "as long"), "%s", r.err);
    ts_run_free(&r);
    for (int k = 0; k < 5; k++) { /* --help */
        static const char *const cmds[] = {"cache", "ablate", "patch", "detect", "lens"};
        const char *cmd = cmds[k];
        r = run(dir, (const char *[]){cmd, "--help", NULL});
        cr_assert_eq(r.code, 0);
        cr_assert(strstr(r.out, "usage: attograd-translate") && strstr(r.out, "--out"), "%s",
                  r.out);
        ts_run_free(&r);
    }
    ts_rm_tree(dir);
}

/* the value i of a float or double entry */
static double at(const NpzEntry *e, size_t i) {
    return e->dtype == NPZ_F64 ? ((const double *)e->data)[i] : ((const float *)e->data)[i];
}

Test(tr_lens_cli, detect_and_lens_on_a_trained_pre_ln_copy_model, .timeout = 300) {
    char dir[256], ckpt[512], out[512], pairs[512];
    ts_tmp_dir(dir, sizeof dir, "tr_lens_pre");
    train_copy(dir, ckpt, 1);

    /* detect: every head of two rows, scores in [0, 1] */
    ts_write_text(ts_join(pairs, dir, "pairs.tsv"), "a b c a\ta b c a\nd e f d\td e f d\n");
    ts_join(out, dir, "detect.npz");
    TsRun r =
        run(dir, (const char *[]){"detect", "--ckpt", ckpt, "--pairs", pairs, "--out", out, NULL});
    cr_assert_eq(r.code, 0, "detect: %s%s", r.out, r.err);
    cr_assert(strstr(r.out, "decoder  L1H1") && strstr(r.out, "cross    L1H1"), "%s", r.out);
    ts_run_free(&r);
    NpzFile *f;
    cr_assert_eq(npz_read(out, &f, NULL), AG_OK, "%s", ag_last_error());
    const NpzEntry *es[3] = {entry(f, "encoder", 3, (int64_t[]){3, 2, 2}),
                             entry(f, "decoder", 3, (int64_t[]){3, 2, 2}),
                             entry(f, "cross_diagonal", 2, (int64_t[]){2, 2})};
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < (k < 2 ? 12 : 4); i++)
            cr_assert(at(es[k], i) >= 0 && at(es[k], i) <= 1 + 1e-9, "%d %d: %g", k, i,
                      at(es[k], i));
    entry(f, "tokens", 2, (int64_t[]){2, 5});
    entry(f, "src_tokens", 2, (int64_t[]){2, 5});
    npz_free(f);

    /* lens: logit('d') at decoder position 3 (the input there is 'c': 'd' comes next) */
    ts_join(out, dir, "lens.npz");
    for (int diff = 0; diff < 2; diff++) {
        const char *one[] = {"lens",  "--ckpt", ckpt,    "--target", "a b c d", "--word", "d",
                             "--pos", "3",      "--out", out,        "a b c d", NULL};
        const char *two[] = {"lens",  "--ckpt", ckpt,    "--pairs", pairs,   "--good", "d",
                             "--bad", "e",      "--pos", "3",       "--out", out,      NULL};
        r = run(dir, diff ? two : one);
        cr_assert_eq(r.code, 0, "lens: %s%s", r.out, r.err);
        cr_assert(strstr(r.out, "decoder.blocks.1.hook_resid_post") &&
                      strstr(r.out, "L1.cross.H1") && strstr(r.out, "b_U"),
                  "%s", r.out);
        ts_run_free(&r);
        int B = diff ? 2 : 1, n = 18;
        cr_assert_eq(npz_read(out, &f, NULL), AG_OK, "%s", ag_last_error());
        const NpzEntry *dla = entry(f, "dla", 3, (int64_t[]){B, 5, n});
        const NpzEntry *metric = entry(f, "metric", 2, (int64_t[]){B, 5});
        const NpzEntry *lens = entry(f, "lens", 3, (int64_t[]){3, B, 5});
        const NpzEntry *lg = npz_find(f, "logits");
        cr_assert(lg && lg->ndim == 3);
        int64_t V = lg->shape[2];
        const NpzEntry *ll = entry(f, "lens_logits", 3, (int64_t[]){3, B, V});
        for (int b = 0; b < B; b++) /* the last stage's logits are the model's, at position 3 */
            for (int64_t v = 0; v < V; v++)
                cr_assert_eq(at(ll, (size_t)(2 * B + b) * V + v),
                             at(lg, (size_t)(b * 5 + 3) * V + v), "row %d, word %lld", b,
                             (long long)v);
        const NpzEntry *parts = npz_find(f, "parts");
        cr_assert(parts);
        char text[1024] = {0};
        memcpy(text, parts->data,
               parts->nbytes < sizeof text - 1 ? parts->nbytes : sizeof text - 1);
        cr_assert(strstr(text, "\"L0.cross.H0\"") && strstr(text, "\"ln_final.b\",\"b_U\"]"), "%s",
                  text);
        for (int i = 0; i < B * 5; i++) {
            double sum = 0, abs_sum = 0;
            for (int p = 0; p < n; p++)
                sum += at(dla, (size_t)i * n + p), abs_sum += fabs(at(dla, (size_t)i * n + p));
            double err = fabs(sum - at(metric, i)) / (1 + abs_sum);
#ifdef AG_REAL_DOUBLE
            cr_assert(err < 1e-11, "%d: the parts miss by %.3g", i, err);
#else
            cr_assert(err < 2e-5, "%d: the parts miss by %.3g", i, err);
#endif
            cr_assert_eq(at(lens, (size_t)2 * B * 5 + i), at(metric, i), "%d", i);
        }
        npz_free(f);
    }

    /* patch's --metric logit-diff --pos 3 is logit(d) - logit(e) at decoder position 3: the
     * lens's metric there */
    const char *lens_de[] = {"lens", "--ckpt", ckpt, "--target", "a b c d", "--good",  "d", "--bad",
                             "e",    "--pos",  "3",  "--out",    out,       "a b c d", NULL};
    r = run(dir, lens_de);
    cr_assert_eq(r.code, 0, "lens: %s%s", r.out, r.err);
    ts_run_free(&r);
    cr_assert_eq(npz_read(out, &f, NULL), AG_OK, "%s", ag_last_error());
    double lens_at_3 = at(entry(f, "metric", 2, (int64_t[]){1, 5}), 3);
    npz_free(f);
    f = patch_d_minus_e(dir, ckpt, "3", out);
    double clean = *(const double *)npz_find(f, "clean")->data;
    cr_assert(fabs(clean) > 1e-3 && fabs(lens_at_3 - clean) <= 1e-5 * (1 + fabs(clean)),
              "patch's clean metric %.9g, the lens's logit(d) - logit(e) %.9g", clean, lens_at_3);
    npz_free(f);
    ts_rm_tree(dir);
}
