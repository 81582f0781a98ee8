/* test_gpt_lens_cli.c: attograd-gpt cache, ablate and patch (examples/gpt/lens.c, run through
 * AG_GPT_BIN) on a tiny model trained from a generated text in a temporary folder: the cache's
 * .npz (every hook point with its shape, tokens, token strings, config, gradients; read by
 * numpy too where /usr/bin/python3 has it), the ablation table, patching the last layer's
 * residual at the last position giving the clean metric exactly, that metric being the lens's
 * logit difference there, attribution patching; and
 * bad input (files, flags, patterns, token strings) exiting 2 naming the path or the flag.
 * Then detect (its scores and their table), lens (the attribution summing to the logit
 * difference, the lens's last stage the model's), and export, whose file a numpy forward
 * written from TransformerLens's conventions (tests/lens/tl_forward.py) runs to attograd's
 * logits within 1e-5, for LayerNorm with biases, an attention-only RMSNorm model without, and
 * LLaMA (RMSNorm, RoPE, SwiGLU, grouped-query heads); a post-LN model's export and lens refused
 * naming the checkpoint and why.
 * Not here: the lens itself (tests/lens/test_lens.c, test_logit.c). */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attograd.h"
#include "files.h"

static TsRun lens_run(const char *dir, const char *const *args) {
    return ts_finish(dir, ts_start_env("AG_GPT_BIN", dir, args, NULL));
}

static void ok(const char *dir, const char *const *args) {
    char why[4500];
    cr_assert(ts_exits_with("AG_GPT_BIN", dir, args, 0, NULL, why, sizeof why), "%s", why);
}

/* exit 2, stderr naming each of the NULL-terminated strings */
static void refused(const char *dir, const char *const *args, const char *const *says) {
    char why[4500];
    cr_assert(ts_exits_with("AG_GPT_BIN", dir, args, 2, says, why, sizeof why), "%s", why);
}

/* dir/run/last.npz: 2 layers, 2 heads, n_embd 16, block 16, trained 40 steps on "ab" texts;
 * extra: more flags of train (NULL-terminated, or NULL), and run is then named run_name */
static void tiny_model_with(char *dir, size_t n, const char *run_name, const char *const *extra) {
    char txt[512], data[512], out[512];
    if (!extra) {
        ts_tmp_dir(dir, n, "lenscli");
        FILE *f = fopen(ts_join(txt, dir, "text.txt"), "w");
        cr_assert(f, "%s: %s", txt, strerror(errno));
        for (int i = 0; i < 400; i++) fprintf(f, "%s", i % 3 ? "abba cab.\n" : "bac abc!\n");
        fclose(f);
        ok(dir, (const char *[]){"prepare", "--input", txt, "--tokenizer", "char", "--out",
                                 ts_join(data, dir, "data"), NULL});
    }
    const char *args[40] = {"train",
                            "--data",
                            ts_join(data, dir, "data"),
                            "--out",
                            ts_join(out, dir, run_name),
                            "--n-layer",
                            "2",
                            "--n-head",
                            "2",
                            "--n-embd",
                            "16",
                            "--block-size",
                            "16",
                            "--batch-size",
                            "4",
                            "--max-iters",
                            "40",
                            "--warmup-iters",
                            "5",
                            "--threads",
                            "1"};
    int k = 21;
    for (int i = 0; extra && extra[i]; i++) args[k++] = extra[i];
    args[k] = NULL;
    ok(dir, args);
}
static void tiny_model(char *dir, size_t n) { tiny_model_with(dir, n, "run", NULL); }

static const NpzEntry *entry(const NpzFile *f, const char *name, int ndim, const int *shape) {
    const NpzEntry *e = npz_find(f, name);
    cr_assert(e, "%s: no %s", f->path, name);
    cr_assert_eq(e->ndim, ndim, "%s: %d dims", name, e->ndim);
    for (int d = 0; d < ndim; d++)
        cr_assert_eq(e->shape[d], shape[d], "%s: dim %d is %lld, want %d", name, d,
                     (long long)e->shape[d], shape[d]);
    return e;
}

static int has_numpy(void) { return system("/usr/bin/python3 -c 'import numpy' 2>/dev/null") == 0; }

Test(gpt_lens_cli, cache_writes_every_hook_point_with_its_shape) {
    char dir[256], ck[512], out[512], prompts[512];
    tiny_model(dir, sizeof dir);
    ts_join(ck, dir, "run/last.npz");
    ts_write_text(ts_join(prompts, dir, "p.txt"), "abba cab\nbac abc!\nabc abba\n");
    ok(dir, (const char *[]){"cache", "--ckpt", ck, "--prompts", prompts, "--good", "a", "--bad",
                             "b", "--out", ts_join(out, dir, "c.npz"), NULL});
    NpzFile *f;
    cr_assert_eq(npz_read(out, &f, NULL), AG_OK, "%s", ag_last_error());
    int B = 3, T = 8, C = 16, NH = 2, HS = 8;
    entry(f, "hook_embed", 3, (int[]){B, T, C});
    entry(f, "blocks.1.attn.hook_pattern", 4, (int[]){B, NH, T, T});
    entry(f, "blocks.0.attn.hook_q", 4, (int[]){B, T, NH, HS});
    entry(f, "blocks.0.attn.hook_z", 4, (int[]){B, T, NH, HS});
    entry(f, "blocks.0.mlp.hook_post", 3, (int[]){B, T, 4 * C});
    entry(f, "blocks.1.ln2.hook_scale", 3, (int[]){B, T, 1});
    entry(f, "ln_final.hook_normalized", 3, (int[]){B, T, C});
    entry(f, "blocks.0.hook_resid_mid.grad", 3, (int[]){B, T, C});
    const NpzEntry *tok = entry(f, "tokens", 2, (int[]){B, T});
    cr_assert_eq(tok->dtype, NPZ_I32);
    cr_assert(npz_find(f, "config") && npz_find(f, "token_strs"));
    /* 38 activations, 33 gradients (none of the 5 read-only scales), tokens, strings, config */
    cr_assert_eq(f->n, 38 + 33 + 3, "%d entries", f->n);
    npz_free(f);
    if (has_numpy()) {
        char cmd[2048];
        snprintf(cmd, sizeof cmd,
                 "/usr/bin/python3 -c \"import numpy as np, json; f = np.load('%s'); "
                 "assert f['blocks.0.attn.hook_pattern'].shape == (3, 2, 8, 8); "
                 "p = f['blocks.0.attn.hook_pattern']; assert abs(p.sum(-1) - 1).max() < 1e-5; "
                 "assert np.triu(p[0, 0], 1).max() == 0; "
                 "assert ''.join(json.loads(f['token_strs'].tobytes())[:8]) == 'abba cab'; "
                 "assert json.loads(f['config'].tobytes())['n_layer'] == 2; "
                 "assert f['tokens'].dtype == np.int32\"",
                 out);
        cr_assert_eq(system(cmd), 0, "numpy could not read %s as expected", out);
    }
    ts_rm_tree(dir);
}

Test(gpt_lens_cli, ablate_tables_every_head_and_patch_restores_the_clean_metric) {
    char dir[256], ck[512], out[512], png[512];
    tiny_model(dir, sizeof dir);
    ts_join(ck, dir, "run/last.npz");
    ok(dir, (const char *[]){"ablate", "--ckpt", ck, "--prompt", "abba cab.", "--out",
                             ts_join(out, dir, "a.npz"), NULL});
    NpzFile *f;
    cr_assert_eq(npz_read(out, &f, NULL), AG_OK, "%s", ag_last_error());
    const NpzEntry *v = entry(f, "values", 2, (int[]){2, 2});
    const double *d = v->data, base = *(const double *)npz_find(f, "base")->data;
    int changed = 0;
    for (int i = 0; i < 4; i++) changed += isfinite(d[i]) && d[i] != base;
    cr_assert_eq(changed, 4, "ablating each head changes the loss");
    const NpzEntry *pts = npz_find(f, "points");
    static const char want[] = "[\"blocks.0.attn.hook_z\",\"blocks.1.attn.hook_z\"]";
    cr_assert(pts && pts->nbytes == strlen(want) && memcmp(pts->data, want, pts->nbytes) == 0,
              "points: a JSON list of the names");
    npz_free(f);
    struct stat st;
    if (system("command -v gnuplot >/dev/null 2>&1") == 0)
        cr_assert(stat(ts_join(png, dir, "a.png"), &st) == 0 && st.st_size > 0, "no a.png");
    /* the last layer's residual at the last position is all the logits there depend on */
    ok(dir, (const char *[]){"patch", "--ckpt", ck, "--clean", "abba cab", "--corrupt", "bac abc!",
                             "--good", "a", "--bad", "c", "--hook", "blocks.*.hook_resid_post",
                             "--out", ts_join(out, dir, "p.npz"), NULL});
    cr_assert_eq(npz_read(out, &f, NULL), AG_OK, "%s", ag_last_error());
    v = entry(f, "values", 2, (int[]){2, 8});
    double clean = *(const double *)npz_find(f, "clean")->data;
    double corrupted = *(const double *)npz_find(f, "corrupted")->data;
    cr_assert(clean != corrupted);
    cr_assert_eq(((const double *)v->data)[8 + 7], clean);
    npz_free(f);
    /* the metric is logit(a) - logit(c) at the last position: the lens reads the same there;
     * --out's folder is made */
    ok(dir, (const char *[]){"lens", "--ckpt", ck, "--prompt", "abba cab", "--good", "a", "--bad",
                             "c", "--out", ts_join(out, dir, "new/l.npz"), NULL});
    cr_assert_eq(npz_read(out, &f, NULL), AG_OK, "%s", ag_last_error());
    double lens_last = ((const double *)entry(f, "metric", 2, (int[]){1, 8})->data)[7];
    cr_assert(fabs(clean) > 1e-3 && fabs(lens_last - clean) <= 1e-5 * (1 + fabs(clean)),
              "patch's clean metric %.9g, the lens's logit(a) - logit(c) %.9g", clean, lens_last);
    npz_free(f);
    ok(dir, (const char *[]){"patch", "--ckpt", ck, "--clean", "abba cab", "--corrupt", "bac abc!",
                             "--good", "a", "--bad", "c", "--hook", "blocks.*.attn.hook_pattern",
                             "--by", "head-position", "--attribution", "--out",
                             ts_join(out, dir, "pa.npz"), NULL});
    cr_assert_eq(npz_read(out, &f, NULL), AG_OK, "%s", ag_last_error());
    entry(f, "values", 3, (int[]){2, 2, 8});
    cr_assert_eq(*(const int64_t *)npz_find(f, "attribution")->data, 1);
    npz_free(f);
    /* without --good and --bad patch's metric is the loss: its clean run is ablate's base */
    ok(dir, (const char *[]){"patch", "--ckpt", ck, "--clean", "abba cab", "--corrupt", "bac abc!",
                             "--out", ts_join(out, dir, "pl.npz"), NULL});
    cr_assert_eq(npz_read(out, &f, NULL), AG_OK, "%s", ag_last_error());
    clean = *(const double *)npz_find(f, "clean")->data;
    npz_free(f);
    ok(dir, (const char *[]){"ablate", "--ckpt", ck, "--prompt", "abba cab", "--out",
                             ts_join(out, dir, "al.npz"), NULL});
    cr_assert_eq(npz_read(out, &f, NULL), AG_OK, "%s", ag_last_error());
    double base_loss = *(const double *)npz_find(f, "base")->data;
    cr_assert(clean > 0 && clean == base_loss, "patch's clean loss %.9g, ablate's base %.9g", clean,
              base_loss);
    npz_free(f);
    ts_rm_tree(dir);
}

Test(gpt_lens_cli, bad_input_exits_2_naming_the_path_or_the_flag) {
    char dir[256], ck[512], out[512], prompts[512];
    tiny_model(dir, sizeof dir);
    ts_join(ck, dir, "run/last.npz");
    ts_join(out, dir, "x.npz");
    ts_write_text(ts_join(prompts, dir, "uneven.txt"), "abba\nab\n");
    refused(dir,
            (const char *[]){"cache", "--ckpt", "nope.npz", "--prompt", "ab", "--out", out, NULL},
            (const char *[]){"nope.npz", NULL});
    refused(
        dir,
        (const char *[]){"cache", "--ckpt", ck, "--prompt", "ab", "--hooks",
                         "blocks.*.attn.hook_result", "--out", out, NULL},
        (const char *[]){"--hooks", "blocks.*.attn.hook_result", "matches no hook point", NULL});
    char in_file[600]; /* --out's folder cannot be made: a file is in the way */
    snprintf(in_file, sizeof in_file, "%s/x.npz", prompts);
    refused(dir, (const char *[]){"cache", "--ckpt", ck, "--prompt", "ab", "--out", in_file, NULL},
            (const char *[]){prompts, NULL});
    refused(dir, (const char *[]){"cache", "--ckpt", ck, "--prompts", prompts, "--out", out, NULL},
            (const char *[]){"uneven.txt: line 2", NULL});
    refused(dir,
            (const char *[]){"cache", "--ckpt", ck, "--prompt", "abcabcabcabcabcabc", "--out", out,
                             NULL},
            (const char *[]){"--prompt", "block_size 16", NULL});
    refused(dir,
            (const char *[]){"patch", "--ckpt", ck, "--clean", "ab", "--corrupt", "ba", "--good",
                             "ab", "--bad", "c", "--out", out, NULL},
            (const char *[]){"--good", "must be one", NULL});
    refused(dir,
            (const char *[]){"patch", "--ckpt", ck, "--clean", "abc", "--corrupt", "ba", "--good",
                             "a", "--bad", "c", "--out", out, NULL},
            (const char *[]){"--corrupt", NULL});
    refused(dir,
            (const char *[]){"patch", "--ckpt", ck, "--clean", "ab", "--corrupt", "ba", "--good",
                             "a", "--bad", "c", "--by", "layer", "--out", out, NULL},
            (const char *[]){"--by layer", NULL});
    refused(dir,
            (const char *[]){"patch", "--ckpt", ck, "--clean", "ab", "--corrupt", "ba", "--good",
                             "a", "--bad", "c", "--by", "head", "--out", out, NULL},
            (const char *[]){"blocks.0.hook_resid_pre", "no head axis", NULL});
    refused(dir,
            (const char *[]){"ablate", "--ckpt", ck, "--prompt", "abc", "--positions", "1,3",
                             "--out", out, NULL},
            (const char *[]){"--positions 1,3", NULL});
    /* issue 31: an empty element of a list is refused, not dropped */
    refused(dir,
            (const char *[]){"ablate", "--ckpt", ck, "--prompt", "abc", "--positions", "0,",
                             "--out", out, NULL},
            (const char *[]){"'--positions 0,' has an empty element", NULL});
    refused(dir,
            (const char *[]){"ablate", "--ckpt", ck, "--prompt", "abc", "--hook",
                             "blocks.0.ln1.hook_scale", "--out", out, NULL},
            (const char *[]){"blocks.0.ln1.hook_scale", "read-only", NULL});
    refused(dir,
            (const char *[]){"ablate", "--ckpt", ck, "--prompt", "abc", "--mode", "max", "--out",
                             out, NULL},
            (const char *[]){"--mode max", NULL});
    struct stat st;
    cr_assert(stat(out, &st) != 0, "nothing written after a refusal");
    const char *cmds[] = {"cache", "ablate", "patch", "detect", "lens", "export"};
    for (int i = 0; i < 6; i++) {
        TsRun r = lens_run(dir, (const char *[]){cmds[i], "--help", NULL});
        cr_assert(r.code == 0 && strstr(r.out, "usage: attograd-gpt") && strstr(r.out, "--ckpt"),
                  "%s --help: %d %s", cmds[i], r.code, r.out);
        char want[64]; /* the lens commands' defaults: make gpt's checkpoint, build/lens/CMD.npz */
        snprintf(want, sizeof want, "(build/lens/%s.npz)", cmds[i]);
        cr_assert(i == 5 || (strstr(r.out, want) && strstr(r.out, "(build/gpt/run/best.npz)")),
                  "%s --help: no default %s: %s", cmds[i], want, r.out);
        ts_run_free(&r);
    }
    ts_rm_tree(dir);
}

/* ---- detect, lens, export ---- */

Test(gpt_lens_cli, detect_scores_every_head_on_repeated_tokens_and_on_prompts) {
    char dir[256], ck[512], out[512];
    tiny_model(dir, sizeof dir);
    ts_join(ck, dir, "run/last.npz");
    TsRun r =
        lens_run(dir, (const char *[]){"detect", "--ckpt", ck, "--repeat", "5", "--length", "16",
                                       "--batch", "4", "--out", ts_join(out, dir, "d.npz"), NULL});
    cr_assert_eq(r.code, 0, "exit %d: %s", r.code, r.err);
    cr_assert(strstr(r.out, "4 rows of 5 random tokens repeated to 16") &&
                  strstr(r.out, "best induction head: L") && strstr(r.out, "L1H1"),
              "%s", r.out);
    ts_run_free(&r);
    NpzFile *f;
    cr_assert_eq(npz_read(out, &f, NULL), AG_OK, "%s", ag_last_error());
    const NpzEntry *e = entry(f, "scores", 3, (int[]){3, 2, 2});
    for (int i = 0; i < 12; i++) {
        double v = ((const double *)e->data)[i];
        cr_assert(v >= 0 && v <= 1, "score %d: %g", i, v);
    }
    const int32_t *tok = entry(f, "tokens", 2, (int[]){4, 16})->data;
    for (int b = 0; b < 4; b++)
        for (int i = 5; i < 16; i++) cr_assert_eq(tok[b * 16 + i], tok[b * 16 + i - 5]);
    const NpzEntry *kinds = npz_find(f, "kinds");
    static const char want[] = "[\"previous_token\",\"duplicate_token\",\"induction\"]";
    cr_assert(kinds && kinds->nbytes == strlen(want) &&
              memcmp(kinds->data, want, kinds->nbytes) == 0);
    npz_free(f);
    struct stat st;
    char png[512];
    if (system("command -v gnuplot >/dev/null 2>&1") == 0)
        cr_assert(stat(ts_join(png, dir, "d.png"), &st) == 0 && st.st_size > 0, "no d.png");
    ok(dir, (const char *[]){"detect", "--ckpt", ck, "--prompt", "abba cab abba ca",
                             "--exclude-bos", "--out", out, NULL});
    cr_assert_eq(npz_read(out, &f, NULL), AG_OK, "%s", ag_last_error());
    entry(f, "tokens", 2, (int[]){1, 16});
    cr_assert_eq(((const int64_t *)npz_find(f, "exclude")->data)[0], 1);
    npz_free(f);
    ts_rm_tree(dir);
}

/* the lens of p.txt's rows to logit(a) - logit(b) into dir/name; checks the attribution sums
 * to the metric and the last stage is the model's */
static void lens_checked(const char *dir, const char *ck, const char *prompts, const char *name) {
    char out[512];
    ok(dir, (const char *[]){"lens", "--ckpt", ck, "--prompts", prompts, "--good", "a", "--bad",
                             "b", "--out", ts_join(out, dir, name), NULL});
    NpzFile *f;
    cr_assert_eq(npz_read(out, &f, NULL), AG_OK, "%s", ag_last_error());
    int B = 3, T = 8;
    const NpzEntry *d = npz_find(f, "dla");
    cr_assert(d && d->ndim == 3 && d->shape[0] == B && d->shape[1] == T);
    int P = (int)d->shape[2];
    const double *dla = d->data, *metric = entry(f, "metric", 2, (int[]){B, T})->data;
    const double *lens = entry(f, "lens", 3, (int[]){3, B, T})->data;
    const NpzEntry *lg = npz_find(f, "logits");
    cr_assert(lg && lg->ndim == 3 && lg->shape[0] == B && lg->dtype == NPZ_F32);
    for (int i = 0; i < B * T; i++) {
        double sum = 0, mag = 0;
        for (int k = 0; k < P; k++) sum += dla[i * P + k], mag += fabs(dla[i * P + k]);
        cr_assert(fabs(sum - metric[i]) < 1e-4 * (1 + mag), "%s: %d: %.9g vs %.9g", name, i, sum,
                  metric[i]);
        cr_assert_eq(lens[2 * B * T + i], metric[i], "%s: the last stage", name);
    }
    npz_free(f);
}

Test(gpt_lens_cli, lens_and_export_match_the_model_and_a_numpy_forward_of_the_export) {
    char dir[256], ck[512], ck2[512], ck3[512], out[512], json[512], prompts[512], lens[512];
    char png[512];
    tiny_model(dir, sizeof dir);
    tiny_model_with(dir, sizeof dir, "rms",
                    (const char *[]){"--norm", "rmsnorm", "--no-bias", "--mlp", "none", NULL});
    ts_join(ck, dir, "run/last.npz");
    ts_join(ck2, dir, "rms/last.npz");
    tiny_model_with(dir, sizeof dir, "llama",
                    (const char *[]){"--llama", "--n-kv-head", "1", NULL});
    ts_join(ck3, dir, "llama/last.npz");
    ts_write_text(ts_join(prompts, dir, "p.txt"), "abba cab\nbac abc!\nabc abba\n");
    lens_checked(dir, ck, prompts, "l.npz");
    struct stat st;
    if (system("command -v gnuplot >/dev/null 2>&1") == 0) {
        cr_assert(stat(ts_join(png, dir, "l.png"), &st) == 0 && st.st_size > 0, "no l.png");
        cr_assert(stat(ts_join(png, dir, "l_lens.png"), &st) == 0 && st.st_size > 0);
    }
    lens_checked(dir, ck2, prompts, "l2.npz");
    lens_checked(dir, ck3, prompts, "l3.npz");
    TsRun r =
        lens_run(dir, (const char *[]){"lens", "--ckpt", ck, "--prompt", "abba", "--token", "c",
                                       "--pos", "2", "--out", ts_join(out, dir, "l4.npz"), NULL});
    cr_assert_eq(r.code, 0, "%s", r.err);
    cr_assert(strstr(r.out, "logit('c') at position 2") && strstr(r.out, "L1H1") &&
                  strstr(r.out, "ln_final.b") && strstr(r.out, "blocks.1.hook_resid_post"),
              "%s", r.out);
    ts_run_free(&r);
    /* the exports, run by numpy from TransformerLens's conventions */
    const char *const cks[3] = {ck, ck2, ck3}, *const lenses[3] = {"l.npz", "l2.npz", "l3.npz"};
    for (int k = 0; k < 3; k++) {
        snprintf(out, sizeof out, "%s/tl%d.npz", dir, k);
        snprintf(json, sizeof json, "%s/tl%d.json", dir, k);
        ok(dir, (const char *[]){"export", "--ckpt", cks[k], "--format", "transformer-lens",
                                 "--out", out, NULL});
        cr_assert(stat(json, &st) == 0 && st.st_size > 0, "no %s", json);
        if (!has_numpy()) continue;
        char cmd[2048];
        snprintf(cmd, sizeof cmd, "/usr/bin/python3 tests/lens/tl_forward.py %s %s %s 1e-5", out,
                 json, ts_join(lens, dir, lenses[k]));
        cr_assert_eq(system(cmd), 0, "%s: the numpy forward of the export differs", cks[k]);
    }
    if (!has_numpy()) {
        ts_rm_tree(dir);
        cr_skip_test("the export's numpy forward: %s (the export itself was checked)",
                     access("/usr/bin/python3", X_OK) == 0
                         ? "python3-numpy is not installed for /usr/bin/python3"
                         : "python3 is not installed (apt-get install python3-numpy to run it)");
    }
    ts_rm_tree(dir);
}

Test(gpt_lens_cli, detect_lens_and_export_refuse_bad_input_naming_it) {
    char dir[256], ck[512], post[512], out[512];
    tiny_model(dir, sizeof dir);
    tiny_model_with(dir, sizeof dir, "post", (const char *[]){"--post-ln", NULL});
    ts_join(ck, dir, "run/last.npz");
    ts_join(post, dir, "post/last.npz");
    ts_join(out, dir, "x.npz");
    refused(dir, (const char *[]){"export", "--ckpt", post, "--out", out, NULL},
            (const char *[]){post, "post-LN", NULL});
    refused(dir,
            (const char *[]){"lens", "--ckpt", post, "--prompt", "abba", "--token", "a", "--out",
                             out, NULL},
            (const char *[]){post, "post-LN", NULL});
    refused(dir, (const char *[]){"export", "--ckpt", "nope.npz", "--out", out, NULL},
            (const char *[]){"nope.npz", NULL});
    refused(dir, (const char *[]){"export", "--ckpt", ck, "--format", "onnx", "--out", out, NULL},
            (const char *[]){"--format onnx", NULL});
    refused(dir, (const char *[]){"lens", "--ckpt", ck, "--prompt", "abba", "--out", out, NULL},
            (const char *[]){"--token", NULL});
    refused(dir,
            (const char *[]){"lens", "--ckpt", ck, "--prompt", "abba", "--token", "ab", "--out",
                             out, NULL},
            (const char *[]){"--token 'ab'", "must be one", NULL});
    refused(dir,
            (const char *[]){"lens", "--ckpt", ck, "--prompt", "abba", "--token", "a", "--pos", "4",
                             "--out", out, NULL},
            (const char *[]){"--pos 4", NULL});
    refused(dir,
            (const char *[]){"lens", "--ckpt", "nope.npz", "--prompt", "abba", "--token", "a",
                             "--out", out, NULL},
            (const char *[]){"nope.npz", NULL});
    refused(dir, (const char *[]){"detect", "--ckpt", ck, "--repeat", "16", "--out", out, NULL},
            (const char *[]){"--repeat 16", NULL});
    refused(dir, (const char *[]){"detect", "--ckpt", ck, "--length", "17", "--out", out, NULL},
            (const char *[]){"--length 17", "block_size 16", NULL});
    refused(dir,
            (const char *[]){"detect", "--ckpt", ck, "--prompt", "abba", "--batch", "2", "--out",
                             out, NULL},
            (const char *[]){"--batch", NULL});
    refused(dir, (const char *[]){"detect", "--ckpt", "nope.npz", "--out", out, NULL},
            (const char *[]){"nope.npz", NULL});
    struct stat st;
    cr_assert(stat(out, &st) != 0, "nothing written after a refusal");
    ts_rm_tree(dir);
}
