/* test_translate_hostile.c: a translator checkpoint whose weights are finite but make the
 * model's values overflow at run time (one LayerNorm weight near the largest finite value of the
 * checkpoint's type) is refused by every attograd-translate command that reads --ckpt and runs
 * the model (translate greedy and beam, eval, attention, heads, cache, ablate, patch, detect,
 * lens): exit 2, never a signal, stderr naming the checkpoint, saying the values are not finite
 * and (where the tape's check mode saw it) where the first NaN or inf began, nothing printed
 * on stdout as a result and nothing written to --out (or --hyps). The program is
 * AG_TRANSLATE_BIN (set by the Makefile).
 * Not here: attograd-gpt's counterpart (test_gpt_hostile.c), damaged checkpoints
 * (test_translate_faults.c, fuzz/checkpoint.c). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "files.h"
#include "translate.h"
#include "translate_run.h"

/* a 2+2-layer, 2-head pre-LN copy model trained 40 steps: dir/run/best.npz, and dir/valid.tsv */
static void train_copy(const char *dir, char *ckpt) {
    char train[512], valid[512], out[512];
    ts_write_copy_task(ts_join(train, dir, "train.tsv"), 300, 0, 41, 3, 5, 6);
    ts_write_copy_task(ts_join(valid, dir, "valid.tsv"), 20, 0, 42, 3, 5, 6);
    TsTrainConfig c = ts_train_defaults();
    c.train_path = train;
    c.valid_path = valid;
    c.out_dir = ts_join(out, dir, "run");
    c.model.layer.d_model = 16;
    c.model.layer.n_heads = c.model.layer.n_kv_heads = 2;
    c.model.layer.d_ff = 32;
    c.model.n_enc_layers = c.model.n_dec_layers = 2;
    c.model.layer.pre_ln = 1; /* the lens needs pre-LN */
    c.model.max_len = 12;
    c.optim.lr = 1e-2;
    c.optim.schedule.warmup = 5;
    c.batch = 16;
    c.steps = 40;
    c.log_every = 20;
    c.valid_every = 40;
    c.verbose = 0;
    c.force = 1;
    c.threads = 1;
    cr_assert_eq(ts_train(&c), TR_EXIT_OK, "%s", ag_last_error());
    ts_join(ckpt, out, "best.npz");
}

static int exists(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0;
}

/* args with "CK" replaced by ck, "OUT" by out */
static void fill(const char **args, const char *const *cmd, const char *ck, const char *out) {
    for (int i = 0; i < 24; i++) {
        args[i] = cmd[i];
        if (args[i] && strcmp(args[i], "CK") == 0) args[i] = ck;
        if (args[i] && strcmp(args[i], "OUT") == 0) args[i] = out;
        if (!args[i]) break;
    }
}

Test(tr_hostile, a_finite_checkpoint_that_overflows_is_refused_naming_it_and_where,
     .timeout = 300) {
    char dir[256], ck[512], bad[512], early[512], valid[512], out[512], hyps[512];
    ts_tmp_dir(dir, sizeof dir, "tr-hostile-inf");
    train_copy(dir, ck);
    ts_join(valid, dir, "valid.tsv");
    ts_join(out, dir, "o.npz");
    ts_join(hyps, dir, "hyps.tsv");
    /* one LayerNorm weight near the largest finite value of the checkpoint's type (3e38 in a
     * float32 file, 1e308 in a float64 one): finite, but the values overflow; the decoder's
     * final norm (only the logits overflow) and the first encoder block's (everything after) */
    ts_npz_overflow(ck, ts_join(bad, dir, "bad.npz"), "decoder.norm.weight");
    ts_npz_overflow(ck, ts_join(early, dir, "early.npz"), "encoder.layers.0.norm1.weight");
    const char *const cmds[][24] = {
        {"translate", "--ckpt", "CK", "a b c", NULL},
        {"translate", "--ckpt", "CK", "--beam", "3", "a b c", NULL},
        {"eval", "--ckpt", "CK", "--hyps", "HYPS", "VALID", NULL},
        {"attention", "--ckpt", "CK", "--sentence", "a b c", "--no-plot", "--out", "OUT", NULL},
        {"heads", "--ckpt", "CK", "--data", "VALID", "--no-plot", "--out", "OUT", NULL},
        {"cache", "--ckpt", "CK", "--out", "OUT", "a b c", NULL},
        {"cache", "--ckpt", "CK", "--target", "a b c", "--good", "a", "--bad", "b", "--out", "OUT",
         "a b c", NULL},
        {"ablate", "--ckpt", "CK", "--target", "a b c", "--out", "OUT", "a b c", NULL},
        {"patch", "--ckpt", "CK", "--clean", "a b c", "--corrupt", "b a c", "--target", "a b c",
         "--out", "OUT", NULL},
        {"patch", "--ckpt", "CK", "--clean", "a b c", "--corrupt", "b a c", "--target", "a b c",
         "--attribution", "--out", "OUT", NULL},
        {"detect", "--ckpt", "CK", "--out", "OUT", "a b c", NULL},
        {"lens", "--ckpt", "CK", "--target", "a b c", "--word", "a", "--out", "OUT", "a b c", NULL},
    };
    const char *const which[] = {bad, early};
    for (int w = 0; w < 2; w++)
        for (size_t k = 0; k < sizeof cmds / sizeof cmds[0]; k++) {
            const char *args[24];
            /* attention and heads write into a folder */
            int folder = !strcmp(cmds[k][0], "attention") || !strcmp(cmds[k][0], "heads");
            char o[512];
            if (folder)
                ts_join(o, dir, "o");
            else
                snprintf(o, sizeof o, "%s", out);
            fill(args, cmds[k], which[w], o);
            for (int i = 0; args[i]; i++) {
                if (!strcmp(args[i], "HYPS")) args[i] = hyps;
                if (!strcmp(args[i], "VALID")) args[i] = valid;
            }
            TsRun r = ts_run(dir, args, NULL);
            cr_assert_eq(r.code, 2, "%s on %s: exit %d\nstdout: %s\nstderr: %s", args[0], which[w],
                         r.code, r.out, r.err);
            cr_assert(strstr(r.err, which[w]) && strstr(r.err, "the model's values are not finite"),
                      "%s on %s: stderr: %s", args[0], which[w], r.err);
            cr_assert(strstr(r.err, "must be finite"), "%s: stderr: %s", args[0], r.err);
            /* where it began: every command but heads (whose loss is summed over batches) */
            if (strcmp(args[0], "heads") != 0)
                cr_assert(strstr(r.err, "it began at the forward of"), "%s: stderr: %s", args[0],
                          r.err);
            /* nothing printed as a result: no NaN or inf, no translation */
            cr_assert(!strstr(r.out, "nan") && !strstr(r.out, "inf") &&
                          !strstr(r.out, "exact match") && !strstr(r.out, "translation"),
                      "%s on %s printed: %s", args[0], which[w], r.out);
            if (!strcmp(args[0], "translate"))
                cr_assert_str_empty(r.out, "%s printed: %s", args[0], r.out);
            ts_run_free(&r);
            cr_assert(!exists(out), "%s on %s: %s was written", args[0], which[w], out);
            cr_assert(!exists(hyps), "%s on %s: %s was written", args[0], which[w], hyps);
            if (folder) {
                char in[600];
                const char *files[] = {"attention.npz", "heads.tsv", "attention_layer0.png",
                                       "heads.png"};
                for (int i = 0; i < 4; i++) {
                    snprintf(in, sizeof in, "%s/%s", o, files[i]);
                    cr_assert(!exists(in), "%s on %s: %s was written", args[0], which[w], in);
                }
            }
        }
    /* the same commands on the unedited checkpoint still work */
    for (size_t k = 0; k < sizeof cmds / sizeof cmds[0]; k += 5) {
        const char *args[24];
        fill(args, cmds[k], ck, out);
        for (int i = 0; args[i]; i++) {
            if (!strcmp(args[i], "HYPS")) args[i] = hyps;
            if (!strcmp(args[i], "VALID")) args[i] = valid;
        }
        TsRun r = ts_run(dir, args, NULL);
        cr_assert_eq(r.code, 0, "%s on %s: exit %d\nstderr: %s", args[0], ck, r.code, r.err);
        ts_run_free(&r);
    }
    cr_assert(exists(out), "cache on %s wrote nothing", ck);
    ts_rm_tree(dir);
}
