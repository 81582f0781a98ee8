/* test_gpt_cli.c: attograd-gpt (examples/gpt, run through AG_GPT_BIN, which make test sets) on
 * small generated texts, in a temporary folder: prepare (char and BPE) + train + sample + eval;
 * --resume byte-identical to a straight run (every checkpoint entry, the CSV log but for its
 * timing column), validation and dropout included; SIGINT and SIGTERM save and exit 130 / 143,
 * and the run resumes; `train --out DIR --resume` alone finds its data folder (a path past 255
 * bytes) in the checkpoint; a non-finite loss stops naming the step (exit 1) and keeps the last good
 * checkpoint; bad input (missing and corrupt files, bad flags and values) exits 2 naming the
 * path or the flag, leaving the checkpoints as they were.
 * Not here: the model (tests/nn/test_gpt.c), tokenizers and shards (tests/text). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "attograd.h"
#include "files.h"

/* ---- files ---- */

/* n lines of speeches from a small vocabulary: text a tiny model learns in a few steps */
static void write_text(const char *path, int n, uint64_t seed) {
    static const char *const words[] = {"the", "king", "queen", "speaks", "of",   "love", "and",
                                        "war", "to",   "his",   "her",    "lord", "my",   "thy"};
    FILE *f = fopen(path, "w");
    cr_assert(f != NULL, "%s: %s", path, strerror(errno));
    Rng r;
    rng_seed(&r, seed);
    for (int i = 0; i < n; i++) {
        fputs(rng_below(&r, 2) ? "KING:\n" : "QUEEN:\n", f);
        int len = 3 + (int)rng_below(&r, 6);
        for (int k = 0; k < len; k++)
            fprintf(f, "%s%s", words[rng_below(&r, 14)], k + 1 < len ? " " : ".\n\n");
    }
    fclose(f);
}

static TsRun run(const char *dir, const char *const *args) {
    return ts_finish(dir, ts_start_env("AG_GPT_BIN", dir, args, NULL));
}

static TsRun run_in(const char *dir, const char *const *args, const char *in) {
    return ts_finish(dir, ts_start_env("AG_GPT_BIN", dir, args, in));
}

static void expect_ok(TsRun *r, const char *what) {
    cr_assert_eq(r->code, 0, "%s: exit %d\nstdout: %s\nstderr: %s", what, r->code, r->out, r->err);
}

/* exit 2 and stderr holding each of the NULL-terminated strings */
static void expect_usage(const char *dir, const char *const *args, const char *const *says) {
    TsRun r = run(dir, args);
    cr_assert_eq(r.code, 2, "%s %s: exit %d, expected 2\nstderr: %s", args[0], args[1], r.code,
                 r.err);
    for (int i = 0; says[i]; i++)
        cr_assert(strstr(r.err, says[i]) != NULL, "%s %s: stderr does not name '%s': %s", args[0],
                  args[1], says[i], r.err);
    ts_run_free(&r);
}

/* dir/data prepared from a generated text */
static void prepare(const char *dir, const char *kind) {
    char txt[512], data[512];
    write_text(ts_join(txt, dir, "text.txt"), 1500, 7);
    ts_join(data, dir, "data");
    const char *args[] = {"prepare", "--input", txt,  "--tokenizer",
                          kind,      "--out",   data, strcmp(kind, "bpe") == 0 ? "--vocab" : NULL,
                          "300",     NULL};
    TsRun r = run(dir, args);
    expect_ok(&r, "prepare");
    ts_run_free(&r);
}

/* the tiny model and run every test trains, then extra flags */
#define TINY                                                                                       \
    "--n-layer", "2", "--n-head", "2", "--n-embd", "16", "--block-size", "16", "--batch-size",     \
        "4", "--warmup-iters", "5", "--eval-interval", "10", "--eval-iters", "3",                  \
        "--log-interval", "5"

static void train(const char *dir, const char *out, const char *const *extra) {
    char data[512];
    ts_join(data, dir, "data");
    const char *args[64] = {"train", "--data", data, "--out", out, TINY};
    int threads_given = 0;
    for (int i = 0; extra && extra[i]; i++) threads_given |= strcmp(extra[i], "--threads") == 0;
    int n = 0;
    while (args[n]) n++;
    for (int i = 0; extra && extra[i]; i++) args[n++] = extra[i];
    if (!threads_given) args[n++] = "--threads", args[n++] = "1";
    args[n] = NULL;
    TsRun r = run(dir, args);
    expect_ok(&r, "train");
    ts_run_free(&r);
}

static int64_t ckpt_step(const char *path) {
    NpzFile *f;
    cr_assert_eq(npz_read(path, &f, NULL), AG_OK, "%s", ag_last_error());
    const NpzEntry *e = npz_find(f, "train.step");
    cr_assert(e && e->dtype == NPZ_I64, "%s: no train.step", path);
    int64_t s;
    memcpy(&s, e->data, sizeof s);
    npz_free(f);
    return s;
}

/* the same entries (names, dtypes, shapes) in a and b, with the same bytes (tol SAME_BITS: a
 * NaN equals the same NaN, -0 is not 0), or float32 values within tol of each other (the same
 * run computed by another kernel family, which rounds differently in the last bits: a NaN
 * equals nothing, -0 is 0; the other dtypes' bytes the same) */
#define SAME_BITS (-1.0)
static void expect_same_npz(const char *a, const char *b, double tol) {
    NpzFile *fa, *fb;
    cr_assert_eq(npz_read(a, &fa, NULL), AG_OK, "%s", ag_last_error());
    cr_assert_eq(npz_read(b, &fb, NULL), AG_OK, "%s", ag_last_error());
    cr_assert_eq(fa->n, fb->n, "%s has %d entries, %s %d", a, fa->n, b, fb->n);
    for (int i = 0; i < fa->n; i++) {
        const NpzEntry *x = &fa->entries[i], *y = npz_find(fb, x->name);
        cr_assert(y && x->dtype == y->dtype && x->ndim == y->ndim && x->nbytes == y->nbytes,
                  "%s: entry %s missing or of another type or shape", b, x->name);
        if (tol < 0 || x->dtype != NPZ_F32) {
            cr_assert(memcmp(x->data, y->data, x->nbytes) == 0, "%s and %s: entry %s differs", a, b,
                      x->name);
            continue;
        }
        for (size_t k = 0; k < x->nbytes / sizeof(float); k++) {
            float u, v;
            memcpy(&u, (const char *)x->data + k * sizeof u, sizeof u);
            memcpy(&v, (const char *)y->data + k * sizeof v, sizeof v);
            cr_assert(fabs((double)u - (double)v) <= tol, "%s and %s: %s[%zu] %.9g and %.9g", a, b,
                      x->name, k, (double)u, (double)v);
        }
    }
    npz_free(fa);
    npz_free(fb);
}

static int log_rows(const char *path) {
    char *t = ts_read_text(path, NULL);
    int n = 0;
    for (char *p = t; *p; p++) n += *p == '\n';
    free(t);
    return n - 1;
}

/* ---- the whole job ---- */

Test(gpt_cli, prepare_train_sample_eval_on_a_small_text) {
    char dir[256], p[512], run_dir[512];
    ts_tmp_dir(dir, sizeof dir, "gpt-cli");
    prepare(dir, "char");
    ts_join(run_dir, dir, "run");
    const char *extra[] = {"--max-iters", "40", "--lr", "0.01", NULL};
    train(dir, run_dir, extra);
    cr_assert_eq(ckpt_step(ts_join(p, run_dir, "last.npz")), 40);
    cr_assert(ckpt_step(ts_join(p, run_dir, "best.npz")) > 0);
    cr_assert_eq(log_rows(ts_join(p, run_dir, "log.csv")), 8); /* every 5 steps */
    char *csv = ts_read_text(p, NULL);
    cr_assert(strncmp(csv, "step,train_loss,lr,grad_norm,tokens_per_s,valid_loss\n", 53) == 0, "%s",
              csv);
    /* the loss fell: the first row's train loss above the last row's valid loss */
    double first, last;
    cr_assert(sscanf(strchr(csv, '\n') + 1, "5,%lf,", &first) == 1);
    const char *lr = strrchr(csv, ',');
    cr_assert(sscanf(lr + 1, "%lf", &last) == 1);
    cr_assert(last < first - 0.3, "loss %g -> valid %g: did not learn", first, last);
    free(csv);

    /* sample: the prompt, then exactly 30 tokens (a byte each at character level), streamed;
     * the same seed the same text, from --prompt or stdin */
    char ck[512];
    ts_join(ck, run_dir, "best.npz");
    const char *s1[] = {
        "sample", "--ckpt", ck, "--prompt", "KING:", "--max-tokens", "30", "--seed", "5", NULL};
    TsRun a = run(dir, s1);
    expect_ok(&a, "sample");
    cr_assert_eq(strlen(a.out), 5 + 30 + 1, "%s", a.out);
    cr_assert(strncmp(a.out, "KING:", 5) == 0, "%s", a.out);
    const char *s2[] = {"sample", "--ckpt", ck, "--max-tokens", "30", "--seed", "5", NULL};
    TsRun b = run_in(dir, s2, "KING:");
    expect_ok(&b, "sample from stdin");
    cr_assert_str_eq(a.out, b.out);
    const char *s3[] = {"sample", "--ckpt",        ck,  "--prompt", "KING:", "--max-tokens",
                        "30",     "--temperature", "0", NULL};
    TsRun c = run(dir, s3);
    expect_ok(&c, "greedy sample");
    ts_run_free(&a);
    ts_run_free(&b);
    ts_run_free(&c);

    /* eval: every valid token but the first predicted; bits per byte = loss / ln 2 at
     * character level (one byte a token) */
    char data[512];
    const char *e[] = {"eval", "--ckpt", ck, "--data", ts_join(data, dir, "data"), NULL};
    TsRun r = run(dir, e);
    expect_ok(&r, "eval");
    double loss, bpb;
    long long tokens, bytes;
    const char *at = strstr(r.out, "valid loss ");
    cr_assert(at && sscanf(at, "valid loss %lf nats/token over %lld tokens (%lld bytes), %lf",
                           &loss, &tokens, &bytes, &bpb) == 4,
              "%s", r.out);
    size_t n_valid;
    int *ids;
    cr_assert_eq(txt_shard_read(ts_join(p, data, "valid.bin"), 0, &ids, &n_valid), AG_OK);
    free(ids);
    cr_assert_eq(tokens, (long long)n_valid - 1);
    cr_assert_eq(bytes, tokens);
    cr_assert(isfinite(loss) && fabs(bpb - loss / log(2.0)) < 1e-3, "%s", r.out);
    ts_run_free(&r);
    ts_rm_tree(dir);
}

/* attograd's spellings and nanoGPT's name the same flags: a run given each writes the same
 * bytes (the canonical ones override TINY's nanoGPT names, with other values, so a spelling that
 * reached another flag would show); a resume names the spelling given; --help lists both. */
Test(gpt_cli, nanogpt_names_and_attograd_names_give_the_same_run) {
    char dir[256], a[512], b[512], pa[512], pb[512], data[512];
    ts_tmp_dir(dir, sizeof dir, "gpt-names");
    prepare(dir, "char");
    ts_join(data, dir, "data");
    ts_join(a, dir, "nanogpt");
    ts_join(b, dir, "attograd");
    const char *nano[] = {
        "--max-iters", "6",    "--batch-size",   "2", "--warmup-iters",  "2", "--grad-clip", "0.5",
        "--min-lr",    "1e-4", "--log-interval", "3", "--eval-interval", "6", "--n-embd",    "8",
        NULL};
    const char *ours[] = {"--steps",       "6",   "--batch",   "2",    "--warmup",    "2",
                          "--clip",        "0.5", "--lr-min",  "1e-4", "--log-every", "3",
                          "--valid-every", "6",   "--d-model", "8",    NULL};
    train(dir, a, nano);
    train(dir, b, ours);
    expect_same_npz(ts_join(pa, a, "last.npz"), ts_join(pb, b, "last.npz"), SAME_BITS);
    expect_same_npz(ts_join(pa, a, "best.npz"), ts_join(pb, b, "best.npz"), SAME_BITS);
    const char *again[] = {"train",    "--data",       data, "--out", b,
                           "--resume", "--batch-size", "3",  NULL};
    const char *says[] = {"--batch-size 3 differs from the checkpoint's (2, ", NULL};
    expect_usage(dir, again, says);
    const char *h[] = {"train", "--help", NULL};
    TsRun r = run(dir, h);
    expect_ok(&r, "train --help");
    cr_assert(strstr(r.out, "--steps N") && strstr(r.out, "also --max-iters") &&
                  strstr(r.out, "--batch N") && strstr(r.out, "also --batch-size"),
              "%s", r.out);
    ts_run_free(&r);
    ts_rm_tree(dir);
}

Test(gpt_cli, a_bpe_tokenizer_trains_and_samples) {
    char dir[256], run_dir[512], ck[512];
    ts_tmp_dir(dir, sizeof dir, "gpt-bpe");
    prepare(dir, "bpe");
    ts_join(run_dir, dir, "run");
    const char *extra[] = {"--max-iters", "10", NULL};
    train(dir, run_dir, extra);
    const char *s[] = {"sample",   "--ckpt",   ts_join(ck, run_dir, "last.npz"),
                       "--prompt", "the king", "--max-tokens",
                       "20",       NULL};
    TsRun r = run(dir, s);
    expect_ok(&r, "sample");
    cr_assert(strncmp(r.out, "the king", 8) == 0 && strlen(r.out) > 8 + 20, "%s", r.out);
    ts_run_free(&r);
    ts_rm_tree(dir);
}

/* The LLaMA block (--llama, grouped-query heads): it trains, resumes to the bit, samples; a
 * resume that names another block is refused */
Test(gpt_cli, a_llama_model_trains_resumes_and_samples) {
    char dir[256], a[512], b[512], pa[512], pb[512];
    ts_tmp_dir(dir, sizeof dir, "gpt-llama");
    prepare(dir, "char");
    ts_join(a, dir, "straight");
    ts_join(b, dir, "resumed");
    const char *straight[] = {"--llama", "--n-kv-head", "1", "--max-iters", "20", NULL};
    train(dir, a, straight);
    const char *first[] = {"--llama", "--n-kv-head",      "1",  "--max-iters",
                           "10",      "--lr-decay-iters", "20", NULL};
    train(dir, b, first);
    const char *again[] = {"--resume", NULL};
    train(dir, b, again);
    expect_same_npz(ts_join(pa, a, "last.npz"), ts_join(pb, b, "last.npz"), SAME_BITS);
    NpzFile *f;
    cr_assert_eq(npz_read(pa, &f, NULL), AG_OK, "%s", ag_last_error());
    cr_assert(npz_find(f, "layers.0.attention.wq.weight") &&
              npz_find(f, "layers.0.feed_forward.w3.weight"));
    npz_free(f);
    char data[512];
    const char *other[] = {"train",  "--data", ts_join(data, dir, "data"), "--out", b, "--resume",
                           "--bias", NULL};
    const char *says[] = {"--bias differs from the checkpoint's (no biases)", NULL};
    expect_usage(dir, other, says);
    const char *s[] = {"sample", "--ckpt", pa, "--prompt", "KING:", "--max-tokens", "20", NULL};
    TsRun r = run(dir, s);
    expect_ok(&r, "sample");
    cr_assert(strncmp(r.out, "KING:", 5) == 0 && strlen(r.out) == 5 + 20 + 1, "%s", r.out);
    ts_run_free(&r);
    ts_rm_tree(dir);
}

/* tests/fixtures/gpt_v1_last.npz: a checkpoint attograd-gpt wrote before the model's options
 * (pos, norm, mlp, bias, post_ln) were configuration fields (commit b54f357, the float build:
 * prepare of V1_TEXT with the char tokenizer, then train --n-layer 1 --n-head 2 --n-embd 8
 * --block-size 8 --batch-size 2 --max-iters 6 --warmup-iters 2 --eval-interval 3
 * --eval-iters 2 --log-interval 3 --threads 1). It reads as the GPT-2 style it was, samples,
 * evaluates and resumes. */
#define V1_FIXTURE "tests/fixtures/gpt_v1_last.npz"
#define V1_LINES "KING:\nthe king speaks of love and war.\n\nQUEEN:\nmy lord, thy queen speaks.\n\n"

/* An older program's checkpoint at work: dir/data prepared from V1_LINES, the checkpoint
 * fixture samples and evaluates, then, copied to dir/run/last.npz (out), resumes to step 9 */
static void old_fixture_runs(const char *dir, const char *fixture, char *data, char *out) {
    char txt[512], last[512], cmd[1400];
    FILE *fp = fopen(ts_join(txt, dir, "text.txt"), "w");
    cr_assert(fp != NULL);
    for (int i = 0; i < 12; i++) fputs(V1_LINES, fp);
    fclose(fp);
    ts_join(data, dir, "data");
    const char *prep[] = {"prepare", "--input", txt, "--out", data, NULL};
    TsRun r = run(dir, prep);
    expect_ok(&r, "prepare");
    ts_run_free(&r);
    const char *s[] = {"sample", "--ckpt",       fixture, "--prompt",
                       "KING:",  "--max-tokens", "10",    NULL};
    r = run(dir, s);
    expect_ok(&r, "sample");
    cr_assert(strncmp(r.out, "KING:", 5) == 0, "%s", r.out);
    ts_run_free(&r);
    const char *e[] = {"eval", "--ckpt", fixture, "--data", data, NULL};
    r = run(dir, e);
    expect_ok(&r, "eval");
    ts_run_free(&r);
    ts_join(out, dir, "run");
    snprintf(cmd, sizeof cmd, "mkdir -p %s && cp %s %s/last.npz", out, fixture, out);
    cr_assert(system(cmd) == 0);
    const char *res[] = {"train",       "--data", data,      "--out",     out, "--resume",
                         "--max-iters", "9",      "--quiet", "--threads", "1", NULL};
    r = run(dir, res);
    expect_ok(&r, "train --resume");
    ts_run_free(&r);
    cr_assert_eq(ckpt_step(ts_join(last, out, "last.npz")), 9);
}

Test(gpt_cli, a_checkpoint_from_before_the_options_loads_samples_and_resumes) {
    GptConfig mc = {0};
    CkptConfig kc = nn_gpt_ckpt_config(&mc);
    NpzFile *f;
    cr_assert_eq(ckpt_read(V1_FIXTURE, &kc, &f), AG_OK, "%s", ag_last_error());
    cr_assert(!npz_find(f, "meta.config.pos") && !npz_find(f, "meta.config.post_ln"),
              "the fixture predates the option fields");
    cr_assert(npz_find(f, "transformer.wpe.weight") && npz_find(f, "transformer.h.0.ln_1.bias"));
    npz_free(f);
    cr_assert(mc.style == NN_GPT2 && mc.n_layer == 1 && mc.n_embd == 8 && mc.block_size == 8 &&
              mc.vocab_size == 33 && mc.pos == 0 && mc.norm == 0 && mc.mlp == 0 && mc.bias == 0 &&
              mc.post_ln == 0);
    GptConfig o = nn_gpt_options(&mc);
    cr_assert(o.pos == NN_GPT_POS_LEARNED && o.norm == NN_GPT_NORM_LAYER &&
              o.mlp == NN_GPT_MLP_GELU && o.bias == NN_GPT_BIAS_ON);

    char dir[256], data[512], out[512];
    ts_tmp_dir(dir, sizeof dir, "gpt-v1");
    old_fixture_runs(dir, V1_FIXTURE, data, out);
    ts_rm_tree(dir);
}

/* tests/fixtures/gpt_v2_last.npz: a checkpoint of attograd-gpt train as it was when the run's
 * state was positional (data.position, GP_POS_*, with the --shards slot; the model's option
 * fields in meta.config; commit 2a71c97, the float build): prepare of V1_LINES with the char
 * tokenizer, then train V2_FLAGS --max-iters 6. It samples, evaluates, refuses another
 * --n-head, and resumed with nothing but --max-iters 9 gives, in the float build and kernel
 * family (AVX-512) it was written by, the very bytes of a run of V2_FLAGS --max-iters 9 made by the program under test (a
 * double build resumes from float weights: there the run must reach step 9). */
#define V2_FIXTURE "tests/fixtures/gpt_v2_last.npz"
#define V2_FLAGS                                                                                   \
    "--n-layer", "1", "--n-head", "2", "--n-embd", "8", "--block-size", "8", "--batch-size", "2",  \
        "--lr-decay-iters", "9", "--warmup-iters", "2", "--eval-interval", "3", "--eval-iters",    \
        "2", "--log-interval", "3", "--threads", "1", "--shards", "2", "--quiet"

Test(gpt_cli, a_checkpoint_of_positional_run_state_loads_samples_and_resumes_to_the_bit) {
    char dir[256], data[512], out[512], straight[512], pa[512], pb[512];
    ts_tmp_dir(dir, sizeof dir, "gpt-v2");
    old_fixture_runs(dir, V2_FIXTURE, data, out);
    const char *again[] = {"train",    "--data",   data, "--out", out,
                           "--resume", "--n-head", "4",  NULL};
    const char *says[] = {"--n-head 4 differs from the checkpoint's (2", NULL};
    expect_usage(dir, again, says);
    char bad[512], badout[512], cmd[1400];
    ts_join(badout, dir, "edited");
    snprintf(cmd, sizeof cmd, "mkdir -p %s", badout);
    cr_assert(system(cmd) == 0);
    ts_npz_edit(V2_FIXTURE, ts_join(bad, badout, "last.npz"), "data.position", 6, 0, 0);
    const char *edited[] = {"train", "--data", data, "--out", badout, "--resume", NULL};
    const char *says_edit[] = {"data.position[6] (--batch-size) = 0", NULL};
    expect_usage(dir, edited, says_edit);
    ts_join(pb, out, "last.npz");
    if (sizeof(Real) == sizeof(float)) {
        ts_join(straight, dir, "straight");
        const char *st[] = {"train",  "--data",      data, "--out", straight,
                            V2_FLAGS, "--max-iters", "9",  NULL};
        TsRun r = run(dir, st);
        expect_ok(&r, "train");
        ts_run_free(&r);
        /* the fixture's first 6 steps are the AVX-512 kernels': another family's straight run
         * rounds differently, so there the same run within float rounding (a wrong loader
         * position or schedule would move the weights by ~lr) */
        if (strcmp(ag_kernel_family(), "AVX-512") == 0)
            expect_same_npz(ts_join(pa, straight, "last.npz"), pb, SAME_BITS);
        else
            expect_same_npz(ts_join(pa, straight, "last.npz"), pb, 1e-5);
    }
    ts_rm_tree(dir);
}

/* The options mixed from the command line: GPT-2's names with RoPE, RMSNorm, SwiGLU and
 * post-LN trains, resumes to the bit and samples; resuming with another option is refused
 * naming the flag; an attention-only model (--mlp none) trains; --help lists the options */
Test(gpt_cli, a_mixed_model_trains_resumes_and_samples) {
    char dir[256], a[512], b[512], c[512], pa[512], pb[512], data[512];
    ts_tmp_dir(dir, sizeof dir, "gpt-mix");
    prepare(dir, "char");
    ts_join(data, dir, "data");
    ts_join(a, dir, "straight");
    ts_join(b, dir, "resumed");
    const char *straight[] = {"--pos",  "rope",      "--norm",      "rmsnorm", "--mlp",
                              "swiglu", "--post-ln", "--max-iters", "20",      NULL};
    train(dir, a, straight);
    const char *first[] = {"--pos",  "rope",      "--norm",      "rmsnorm", "--mlp",
                           "swiglu", "--post-ln", "--max-iters", "10",      "--lr-decay-iters",
                           "20",     NULL};
    train(dir, b, first);
    const char *again[] = {"--resume", "--pos", "rope", NULL}; /* the same choice is accepted */
    train(dir, b, again);
    expect_same_npz(ts_join(pa, a, "last.npz"), ts_join(pb, b, "last.npz"), SAME_BITS);
    NpzFile *f;
    cr_assert_eq(npz_read(pa, &f, NULL), AG_OK, "%s", ag_last_error());
    cr_assert(npz_find(f, "transformer.h.0.mlp.c_up.weight") &&
              npz_find(f, "transformer.h.1.ln_2.weight") && npz_find(f, "transformer.wte.weight"));
    cr_assert(!npz_find(f, "transformer.wpe.weight") && !npz_find(f, "transformer.ln_f.weight") &&
              !npz_find(f, "transformer.h.0.ln_1.bias"));
    npz_free(f);
    const char *other[] = {"train",    "--data", data,      "--out", b,
                           "--resume", "--pos",  "learned", NULL};
    const char *says[] = {"--pos learned differs from the checkpoint's (rope)", NULL};
    expect_usage(dir, other, says);
    const char *other2[] = {"train", "--data", data, "--out", b, "--resume", "--no-bias", NULL};
    const char *says2[] = {"--no-bias differs from the checkpoint's (biases)", NULL};
    expect_usage(dir, other2, says2);
    /* --bias is GPT-2's choice already: the same model, accepted (the run is at its end) */
    const char *same[] = {"train",  "--data",  data,        "--out", b,   "--resume",
                          "--bias", "--quiet", "--threads", "1",     NULL};
    TsRun r = run(dir, same);
    expect_ok(&r, "train --resume --bias on a model with biases");
    ts_run_free(&r);
    const char *s[] = {"sample", "--ckpt", pa, "--prompt", "KING:", "--max-tokens", "20", NULL};
    r = run(dir, s);
    expect_ok(&r, "sample");
    cr_assert(strncmp(r.out, "KING:", 5) == 0 && strlen(r.out) == 5 + 20 + 1, "%s", r.out);
    ts_run_free(&r);
    ts_join(c, dir, "attn-only");
    const char *attn[] = {"--mlp", "none", "--llama", "--max-iters", "10", NULL};
    train(dir, c, attn);
    cr_assert_eq(npz_read(ts_join(pa, c, "last.npz"), &f, NULL), AG_OK, "%s", ag_last_error());
    cr_assert(npz_find(f, "layers.1.attention.wq.weight") &&
              !npz_find(f, "layers.0.feed_forward.w1.weight") &&
              !npz_find(f, "layers.0.ffn_norm.weight"));
    npz_free(f);
    const char *h[] = {"train", "--help", NULL};
    r = run(dir, h);
    expect_ok(&r, "train --help");
    const char *listed[] = {
        "--pos",     "learned|rope|none", "--norm",      "layernorm|rmsnorm|none",
        "--mlp",     "gelu|swiglu|none",  "--post-ln",   "--bias",
        "--no-bias", "--ffn-hidden",      "--rope-base", "--n-kv-head",
        "--untied",  "--dropout"};
    for (size_t i = 0; i < sizeof listed / sizeof listed[0]; i++)
        cr_assert(strstr(r.out, listed[i]), "--help lacks %s:\n%s", listed[i], r.out);
    ts_run_free(&r);
    ts_rm_tree(dir);
}

/* The loss plot the trainers share (examples/translate/plot.c): when gnuplot fails, the
 * message names attograd-gpt, and training goes on */
Test(gpt_cli, a_failed_plot_names_attograd_gpt_and_training_goes_on) {
    char dir[256], out[512], data[512], last[512];
    ts_tmp_dir(dir, sizeof dir, "gpt-plot");
    prepare(dir, "char");
    ts_join(out, dir, "run");
    cr_assert_eq(setenv("AG_GNUPLOT", "/bin/false", 1), 0); /* a gnuplot that always fails */
    const char *args[] = {"train",       "--data", ts_join(data, dir, "data"),
                          "--out",       out,      TINY,
                          "--max-iters", "10",     "--threads",
                          "1",           NULL};
    TsRun r = run(dir, args);
    expect_ok(&r, "train with a failing gnuplot");
    cr_assert(strstr(r.err, "attograd-gpt train: ") && strstr(r.err, "loss.png") &&
                  !strstr(r.err, "attograd-translate"),
              "%s", r.err);
    ts_run_free(&r);
    cr_assert_eq(ckpt_step(ts_join(last, out, "last.npz")), 10);
    ts_rm_tree(dir);
}

/* A checkpoint whose configuration or data position was edited: train --resume, sample and
 * eval exit 2 naming the entry and the rule, and the file is left as it is */
Test(gpt_cli, an_edited_checkpoint_is_refused_naming_the_entry) {
    char dir[256], out[512], data[512], ck[512], bad[512];
    ts_tmp_dir(dir, sizeof dir, "gpt-edit");
    prepare(dir, "char");
    ts_join(data, dir, "data");
    ts_join(out, dir, "run");
    ts_join(ck, out, "last.npz");
    ts_join(bad, dir, "bad.npz");
    const char *extra[] = {"--pos", "rope", "--max-iters", "8", NULL};
    train(dir, out, extra);
    const struct {
        const char *entry;
        int at;
        int64_t value;
        const char *says;
    } edits[] = {
        {"meta.config.pos", 0, 4, "meta.config.pos = 4: must be an integer in [0, 3]"},
        {"meta.config.mlp", 0, -1, "meta.config.mlp = -1"},
        {"meta.config.post_ln", 0, 2, "meta.config.post_ln = 2"},
        {"meta.config.n_embd", 0, 18, "head size 9 (n_embd 18 / n_head 2) must be even for RoPE"},
        {"meta.run.flag.batch", 0, 0, "meta.run.flag.batch = 0"},
        {"meta.run.model.loader_batches", 0, 3, "meta.run.model.loader_batches = 3: must be"},
        {"meta.run.model.window", 0, 17, "meta.run.model.window = 17: above block_size 16"},
    };
    for (size_t k = 0; k < sizeof edits / sizeof edits[0]; k++) {
        ts_npz_edit(ck, bad, edits[k].entry, edits[k].at, 0, edits[k].value);
        size_t len;
        char *before = ts_read_text(bad, &len);
        const char *s[] = {edits[k].says, NULL};
        if (strncmp(edits[k].entry, "meta.run.", 9) != 0) {
            const char *a[] = {"sample", "--ckpt", bad, "--prompt", "KING", NULL};
            expect_usage(dir, a, s);
            const char *e[] = {"eval", "--ckpt", bad, "--data", data, NULL};
            expect_usage(dir, e, s);
        }
        char run_dir[512], last[512], cmd[2200];
        ts_join(run_dir, dir, "edited");
        snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s && cp %s %s", run_dir, run_dir, bad,
                 ts_join(last, run_dir, "last.npz"));
        cr_assert(system(cmd) == 0);
        const char *r[] = {"train", "--data", data, "--out", run_dir, "--resume", NULL};
        expect_usage(dir, r, s);
        size_t now_len;
        char *now = ts_read_text(last, &now_len);
        cr_assert(now_len == len && memcmp(now, before, len) == 0, "%s changed", last);
        free(now);
        free(before);
    }
    ts_rm_tree(dir);
}

/* ---- resume ---- */

/* src's entries but name written to dst (a checkpoint as an older program wrote it) */
static void npz_without(const char *src, const char *dst, const char *name) {
    NpzFile *f;
    cr_assert_eq(npz_read(src, &f, NULL), AG_OK, "%s", ag_last_error());
    cr_assert(npz_find(f, name) != NULL, "%s: no entry %s", src, name);
    NpzWriter *w = npz_writer_new();
    for (int i = 0; i < f->n; i++) {
        const NpzEntry *e = &f->entries[i];
        if (strcmp(e->name, name) != 0) npz_add(w, e->name, e->dtype, e->ndim, e->shape, e->data);
    }
    cr_assert_eq(npz_write(w, dst, 0, NULL), AG_OK, "%s", ag_last_error());
    npz_writer_free(w);
    npz_free(f);
}

/* A run of 40 steps, and the same run stopped at 20 and resumed: the same checkpoints, entry
 * by entry, and the same log (but the timing column); with dropout, so the RNG counts too.
 * Again from a checkpoint of the run loop written before the training window was kept (no
 * meta.run.model.window): it resumes in the model's block_size, to the same bytes. */
Test(gpt_cli, resume_is_byte_identical_to_a_straight_run) {
    char dir[256], a[512], b[512], pa[512], pb[512];
    ts_tmp_dir(dir, sizeof dir, "gpt-resume");
    prepare(dir, "char");
    ts_join(a, dir, "straight");
    const char *straight[] = {"--max-iters", "40", "--dropout", "0.1", NULL};
    train(dir, a, straight);
    for (int old = 0; old < 2; old++) {
        ts_join(b, dir, old ? "resumed-old" : "resumed");
        const char *first[] = {"--max-iters", "20", "--lr-decay-iters", "40", "--dropout",
                               "0.1",         NULL};
        train(dir, b, first);
        cr_assert_eq(ckpt_step(ts_join(pb, b, "last.npz")), 20);
        if (old) npz_without(pb, pb, "meta.run.model.window");
        const char *again[] = {"--resume", NULL};
        train(dir, b, again);
        expect_same_npz(ts_join(pa, a, "last.npz"), ts_join(pb, b, "last.npz"), SAME_BITS);
        expect_same_npz(ts_join(pa, a, "best.npz"), ts_join(pb, b, "best.npz"), SAME_BITS);
        /* the logs but for column 4, tokens_per_s (a timing) */
        char *la = ts_csv_drop_column(ts_join(pa, a, "log.csv"), 4);
        char *lb = ts_csv_drop_column(ts_join(pb, b, "log.csv"), 4);
        cr_assert_str_eq(la, lb);
        free(la);
        free(lb);
    }
    ts_rm_tree(dir);
}

/* --shards: the batch as micro-shards whose gradients one process accumulates in a fixed tree
 * (what mpirun spreads over processes: docs/mpi.md, tests/dist/test_mpi.sh). With dropout: 10
 * steps resumed to 20 equal 20 in one go (the shard count comes back from the checkpoint);
 * --shards 1 writes the plain run's bytes; 4 shards write other bytes (another order of
 * additions, other dropout masks); a count that does not divide the batch, or differs from the
 * checkpoint's on --resume, exits 2 naming it. */
Test(gpt_cli, shards_accumulate_and_resume_to_the_bit) {
    char dir[256], a[512], b[512], c[512], d[512], pa[512], pb[512], data[512];
    ts_tmp_dir(dir, sizeof dir, "gpt-shards");
    prepare(dir, "char");
    ts_join(a, dir, "straight");
    ts_join(b, dir, "resumed");
    ts_join(c, dir, "plain");
    ts_join(d, dir, "one");
    const char *straight[] = {"--max-iters", "20", "--dropout", "0.1", "--shards", "4", NULL};
    train(dir, a, straight);
    const char *first[] = {
        "--max-iters", "10", "--lr-decay-iters", "20", "--dropout", "0.1", "--shards", "4", NULL};
    train(dir, b, first);
    const char *again[] = {"--resume", NULL};
    train(dir, b, again);
    expect_same_npz(ts_join(pa, a, "last.npz"), ts_join(pb, b, "last.npz"), SAME_BITS);
    expect_same_npz(ts_join(pa, a, "best.npz"), ts_join(pb, b, "best.npz"), SAME_BITS);
    const char *plain[] = {"--max-iters", "20", "--dropout", "0.1", NULL};
    train(dir, c, plain);
    const char *one[] = {"--max-iters", "20", "--dropout", "0.1", "--shards", "1", NULL};
    train(dir, d, one);
    size_t lc, ld, la;
    char *bc = ts_read_text(ts_join(pa, c, "last.npz"), &lc);
    char *bd = ts_read_text(ts_join(pb, d, "last.npz"), &ld);
    cr_assert(lc == ld && memcmp(bc, bd, lc) == 0, "--shards 1 wrote other bytes than no --shards");
    char *ba = ts_read_text(ts_join(pa, a, "last.npz"), &la);
    cr_assert(la != lc || memcmp(ba, bc, la) != 0, "--shards 4 wrote the plain run's bytes");
    free(ba);
    free(bc);
    free(bd);
    ts_join(data, dir, "data");
    const char *odd[] = {"train",   "--data", data,       "--out", c,
                         "--force", TINY,     "--shards", "3",     NULL};
    const char *odd_says[] = {"--shards 3", "divide the batch size 4", NULL};
    expect_usage(dir, odd, odd_says);
    const char *other[] = {"train", "--data", data, "--out", b, "--resume", "--shards", "2", NULL};
    const char *other_says[] = {"--shards 2", "differs from the checkpoint", NULL};
    expect_usage(dir, other, other_says);
    ts_rm_tree(dir);
}

/* The same checkpoints for 1 and 2 threads (a model wide enough for the kernels to split). */
Test(gpt_cli, one_and_two_threads_train_the_same_bits) {
    char dir[256], data[512], out[2][512], p[2][512];
    ts_tmp_dir(dir, sizeof dir, "gpt-threads");
    prepare(dir, "char");
    ts_join(data, dir, "data");
    for (int k = 0; k < 2; k++) {
        const char *args[] = {"train",
                              "--data",
                              data,
                              "--out",
                              ts_join(out[k], dir, k ? "b" : "a"),
                              "--n-layer",
                              "2",
                              "--n-head",
                              "4",
                              "--n-embd",
                              "64",
                              "--block-size",
                              "32",
                              "--batch-size",
                              "8",
                              "--max-iters",
                              "12",
                              "--warmup-iters",
                              "2",
                              "--dropout",
                              "0.1",
                              "--eval-interval",
                              "6",
                              "--eval-iters",
                              "2",
                              "--threads",
                              k ? "2" : "1",
                              NULL};
        TsRun r = run(dir, args);
        expect_ok(&r, "train");
        ts_run_free(&r);
    }
    expect_same_npz(ts_join(p[0], out[0], "last.npz"), ts_join(p[1], out[1], "last.npz"),
                    SAME_BITS);
    ts_rm_tree(dir);
}

/* SIGINT (and SIGTERM) between steps: last.npz saved at that step, the message, 130 (143);
 * --resume then finishes the run with the same checkpoint as a run never interrupted. */
static void interrupt_and_resume(int sig, int code, const char *name) {
    char dir[256], out[512], ref[512], p[512], q[512], data[512];
    ts_tmp_dir(dir, sizeof dir, "gpt-signal");
    prepare(dir, "char");
    ts_join(out, dir, "run");
    ts_join(data, dir, "data");
    const char *args[] = {"train", "--data",      data,     "--out", out,
                          TINY,    "--max-iters", "200000", NULL};
    int pid = ts_start_env("AG_GPT_BIN", dir, args, NULL);
    ts_join(p, out, "log.csv");
    for (int i = 0; i < 3000; i++) { /* until a few rows are logged (at most 30 s) */
        struct stat st;
        if (stat(p, &st) == 0 && log_rows(p) >= 3) break;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    cr_assert(log_rows(p) >= 3, "the run logged nothing in 30 s");
    kill(pid, sig);
    TsRun r = ts_finish(dir, pid);
    cr_assert_eq(r.code, code, "exit %d, expected %d: %s", r.code, code, r.err);
    cr_assert(strstr(r.err, name) && strstr(r.err, "saved") && strstr(r.err, "--resume"), "%s",
              r.err);
    int64_t s = ckpt_step(ts_join(p, out, "last.npz"));
    cr_assert(s > 10 && s < 200000, "step %lld", (long long)s);
    ts_run_free(&r);
    /* resume to s + 7 steps; a straight run to the same step with the same schedule */
    char to[32];
    snprintf(to, sizeof to, "%lld", (long long)s + 7);
    const char *resume[] = {"--resume", "--max-iters", to, NULL};
    train(dir, out, resume);
    ts_join(ref, dir, "straight");
    const char *straight[] = {"--max-iters", to, "--lr-decay-iters", "200000", NULL};
    train(dir, ref, straight);
    expect_same_npz(ts_join(p, out, "last.npz"), ts_join(q, ref, "last.npz"), SAME_BITS);
    ts_rm_tree(dir);
}

Test(gpt_cli, sigint_saves_and_the_run_resumes) { interrupt_and_resume(SIGINT, 130, "SIGINT"); }
Test(gpt_cli, sigterm_saves_and_the_run_resumes) { interrupt_and_resume(SIGTERM, 143, "SIGTERM"); }

/* ---- faults ---- */

Test(gpt_cli, a_nonfinite_loss_stops_naming_the_step) {
    char dir[256], out[512], p[512], data[512];
    ts_tmp_dir(dir, sizeof dir, "gpt-nan");
    prepare(dir, "char");
    ts_join(out, dir, "run");
    const char *args[] = {"train",       "--data", ts_join(data, dir, "data"),
                          "--out",       out,      TINY,
                          "--max-iters", "40",     "--inject-nan",
                          "15",          NULL};
    TsRun r = run(dir, args);
    cr_assert_eq(r.code, 1, "exit %d: %s", r.code, r.err);
    cr_assert(strstr(r.err, "step 15: the training loss is nan") && strstr(r.err, "last.npz"), "%s",
              r.err);
    cr_assert_eq(ckpt_step(ts_join(p, out, "last.npz")), 10);
    ts_run_free(&r);
    ts_rm_tree(dir);
}

Test(gpt_cli, bad_input_exits_2_naming_the_path_or_flag) {
    char dir[256], out[512], data[512], p[512], ck[512], tok[512], txt[512];
    ts_tmp_dir(dir, sizeof dir, "gpt-bad");
    prepare(dir, "char");
    ts_join(data, dir, "data");
    ts_join(out, dir, "run");
    ts_join(ck, out, "last.npz");
    ts_join(txt, dir, "text.txt");
    const char *extra[] = {"--max-iters", "10", NULL};
    train(dir, out, extra);
    size_t ck_len;
    char *ck_bytes = ts_read_text(ck, &ck_len);

    /* prepare */
    {
        const char *a[] = {"prepare", "--input", "/nonexistent/t.txt", "--out", out, NULL};
        const char *s[] = {"/nonexistent/t.txt", "No such file", NULL};
        expect_usage(dir, a, s);
        const char *b[] = {"prepare", "--input", txt, "--out", out, "--valid-frac", "2", NULL};
        const char *t[] = {"'--valid-frac 2' is out of range [0.0001, 0.5]", NULL};
        expect_usage(dir, b, t);
        const char *c[] = {"prepare", "--input", txt, "--out", out, "--tokenizer", "word", NULL};
        const char *u[] = {"--tokenizer word", NULL};
        expect_usage(dir, c, u);
        /* issue 31: numbers are base 10 only */
        const char *x[] = {"prepare",     "--input", txt,       "--out", out,
                           "--tokenizer", "bpe",     "--vocab", "0x100", NULL};
        const char *y[] = {"'--vocab 0x100' is not an integer", NULL};
        expect_usage(dir, x, y);
        const char *d[] = {"prepare", "--input", txt, "--out", out, "--bogus", NULL};
        const char *v[] = {"--bogus", "unknown flag", NULL};
        expect_usage(dir, d, v);
        ts_write_text(ts_join(p, dir, "empty.txt"), "");
        const char *e[] = {"prepare", "--input", p, "--out", out, NULL};
        const char *w[] = {"empty.txt", "empty", NULL};
        expect_usage(dir, e, w);
    }
    /* train */
    {
        const char *a[] = {"train", "--data", "/nonexistent", "--out", out, NULL};
        const char *s[] = {"/nonexistent/tokenizer", NULL};
        expect_usage(dir, a, s);
        const char *b[] = {"train",    "--data", data,       "--out", out, "--force",
                           "--n-embd", "30",     "--n-head", "4",     NULL};
        const char *t[] = {"n_head 4", "n_embd 30", NULL};
        expect_usage(dir, b, t);
        const char *c[] = {"train", "--data", data, "--out", out, NULL};
        const char *u[] = {"last.npz exists", "--resume", NULL};
        expect_usage(dir, c, u);
        const char *d[] = {"train", "--data", data, "--out", out, "--resume", "--lr", "0.5", NULL};
        const char *v[] = {"--lr 0.5 differs", NULL};
        expect_usage(dir, d, v);
        const char *e[] = {"train", "--data", data, "--out", out, "--lr", "abc", NULL};
        const char *w[] = {"--lr abc", "not a number", NULL};
        expect_usage(dir, e, w);
        const char *f[] = {"train",   "--data",       data,     "--out", out,
                           "--force", "--block-size", "100000", NULL};
        const char *x[] = {"--block-size 100000", NULL};
        expect_usage(dir, f, x);
        /* the model's options: a value that is no choice, a contradiction, a mix that cannot be */
        const struct {
            const char *flags[5], *says[4];
        } opt[] = {
            {{"--pos", "sinusoidal"}, {"--pos sinusoidal", "expected one of learned, rope, none"}},
            {{"--norm", "batch"}, {"--norm batch", "expected one of layernorm, rmsnorm, none"}},
            {{"--mlp", "relu"}, {"--mlp relu", "expected one of gelu, swiglu, none"}},
            {{"--bias", "--no-bias"}, {"--bias and --no-bias: choose one"}},
            {{"--pos", "rope", "--n-embd", "12"}, {"the model", "head size 3", "even for RoPE"}},
            {{"--ffn-hidden", "-1"}, {"'--ffn-hidden -1' is out of range [0, 1048576]"}},
        };
        for (size_t k = 0; k < sizeof opt / sizeof opt[0]; k++) {
            const char *args[16] = {"train", "--data",  data,       "--out",
                                    out,     "--force", "--n-head", "4"};
            int n = 8;
            for (int i = 0; i < 5 && opt[k].flags[i]; i++) args[n++] = opt[k].flags[i];
            expect_usage(dir, args, opt[k].says);
        }
        /* a corrupt shard */
        char bad[512], badbin[512], badtok[512];
        ts_join(bad, dir, "bad");
        cr_assert_eq(mkdir(bad, 0777), 0);
        size_t n;
        char *tb = ts_read_text(ts_join(tok, data, "tokenizer"), &n);
        FILE *fp = fopen(ts_join(badtok, bad, "tokenizer"), "wb");
        fwrite(tb, 1, n, fp);
        fclose(fp);
        free(tb);
        ts_write_text(ts_join(badbin, bad, "train.bin"), "not a shard");
        const char *g[] = {"train", "--data", bad, "--out", out, "--resume", NULL};
        const char *y[] = {"train.bin", NULL};
        expect_usage(dir, g, y);
        /* a well-formed shard of tokens the tokenizer does not have: the trainer reads windows
         * as it uses them (each checked), so the first one read stops the run */
        char badv[512], bout[512];
        TxtTokenizer *tk;
        cr_assert_eq(txt_load(badtok, &tk), AG_OK);
        int V = txt_vocab_size(tk), ids[300];
        txt_free(tk);
        for (int i = 0; i < 300; i++) ids[i] = i % 7 ? V + 1 : 0;
        cr_assert_eq(txt_shard_write(badbin, ids, 300, V + 2), AG_OK);
        cr_assert_eq(txt_shard_write(ts_join(badv, bad, "valid.bin"), ids, 300, V + 2), AG_OK);
        const char *h[] = {"train", "--data",    bad, "--out", ts_join(bout, dir, "badout"),
                           TINY,    "--threads", "1", NULL};
        const char *z[] = {"train.bin: token", "outside the vocabulary", "training stopped",
                           "(step 0)", NULL};
        expect_usage(dir, h, z);
    }
    /* sample and eval */
    {
        ts_write_text(ts_join(p, dir, "corrupt.npz"), "PK\003\004 not really a zip");
        const char *a[] = {"sample", "--ckpt", p, "--prompt", "KING", NULL};
        const char *s[] = {"corrupt.npz", NULL};
        expect_usage(dir, a, s);
        const char *b[] = {"eval", "--ckpt", "/nonexistent/x.npz", "--data", data, NULL};
        const char *t[] = {"/nonexistent/x.npz", NULL};
        expect_usage(dir, b, t);
        const char *c[] = {"sample", "--ckpt", ck, "--prompt", "KING~", NULL};
        const char *u[] = {"--prompt", "0x7e", NULL};
        expect_usage(dir, c, u);
        const char *d[] = {"sample", "--ckpt", ck, "--top-p", "1.5", NULL};
        const char *v[] = {"--top-p 1.5", NULL};
        expect_usage(dir, d, v);
        const char *e[] = {"eval", "--ckpt", ck, "--data", "/nonexistent", NULL};
        const char *w[] = {"/nonexistent/valid.bin", NULL};
        expect_usage(dir, e, w);
    }
    /* nothing lost: the checkpoint is as it was */
    size_t now_len;
    char *now = ts_read_text(ck, &now_len);
    cr_assert(now_len == ck_len && memcmp(now, ck_bytes, ck_len) == 0, "%s changed", ck);
    free(now);
    free(ck_bytes);
    ts_rm_tree(dir);
}

/* a python3 with transformers (AG_HF_PYTHON, else /usr/bin/python3), or NULL */
static const char *hf_python(void) {
    static char cmd[1024];
    const char *env = getenv("AG_HF_PYTHON");
    const char *py = env && *env ? env : "/usr/bin/python3";
    snprintf(cmd, sizeof cmd, "'%s' -c 'import transformers' >/dev/null 2>&1", py);
    return system(cmd) == 0 ? py : NULL;
}

/* transformers' AutoTokenizer loads the exported folder hf with the ids attograd's tokenizer
 * (hf/attograd-tokenizer.bin, else the folder's tokenizer.json) gives text; where no python has
 * transformers, nothing to do */
static void autotokenizer_agrees(const char *dir, const char *hf, const char *text) {
    const char *py = hf_python();
    if (!py) return;
    char script[512], in[512], out[512], cmd[4096];
    ts_write_text(ts_join(in, dir, "autotok.txt"), text);
    ts_write_text(ts_join(script, dir, "autotok.py"),
                  "import sys\n"
                  "from transformers import AutoTokenizer\n"
                  "t = AutoTokenizer.from_pretrained(sys.argv[1])\n"
                  "text = open(sys.argv[2], encoding='utf-8', newline='').read()\n"
                  "ids = t.encode(text, add_special_tokens=False)\n"
                  "assert t.decode(ids) == text\n"
                  "open(sys.argv[3], 'w').write(' '.join(map(str, ids)))\n");
    ts_join(out, dir, "autotok.ids");
    snprintf(cmd, sizeof cmd, "'%s' '%s' '%s' '%s' '%s' >/dev/null 2>&1", py, script, hf, in, out);
    cr_assert_eq(system(cmd), 0, "%s failed (run it by hand to see why)", cmd);
    TxtTokenizer *tok = NULL;
    TxtHf *published = NULL;
    char tp[512];
    int *ids;
    size_t n;
    if (access(ts_join(tp, hf, "attograd-tokenizer.bin"), F_OK) == 0) {
        cr_assert_eq(txt_load(tp, &tok), AG_OK, "%s", ag_last_error());
        cr_assert_eq(
            txt_encode_alloc(tok, text, strlen(text), TXT_SPECIAL_ORDINARY, &ids, &n, "text"),
            AG_OK, "%s", ag_last_error());
    } else { /* a published tokenizer.json: the library's ids, as attograd reads it */
        cr_assert_eq(txt_hf_load(hf, &published), AG_OK, "%s", ag_last_error());
        cr_assert_eq(txt_hf_encode_alloc(published, text, strlen(text), &ids, &n, "text"), AG_OK,
                     "%s", ag_last_error());
    }
    size_t len;
    char *got = ts_read_text(out, &len), *p = got;
    for (size_t i = 0; i < n; i++) {
        char *end;
        long id = strtol(p, &end, 10);
        cr_assert(end != p, "AutoTokenizer gave %zu ids, attograd %zu: %s", i, n, got);
        cr_assert_eq(id, ids[i], "id %zu: AutoTokenizer %ld, attograd %d", i, id, ids[i]);
        p = end;
    }
    cr_assert(strtol(p, NULL, 10) == 0 && !strpbrk(p, "0123456789"),
              "AutoTokenizer gave more ids than attograd's %zu: %s", n, got);
    free(got), free(ids);
    if (tok) txt_free(tok);
    if (published) txt_hf_free(published);
}

/* dir/data prepared (kind), a run of the tiny model with extra flags in dir/run, its best.npz
 * (ck) exported to the folder dir/hf (hf): export --format hf */
static void export_trained(const char *dir, const char *kind, const char *const *extra, char *ck,
                           char *hf) {
    char run_dir[512];
    prepare(dir, kind);
    train(dir, ts_join(run_dir, dir, "run"), extra);
    ts_join(ck, run_dir, "best.npz");
    ts_join(hf, dir, "hf");
    const char *ex[] = {"export", "--ckpt", ck, "--format", "hf", "--out", hf, NULL};
    TsRun r = run(dir, ex);
    expect_ok(&r, "export --format hf");
    ts_run_free(&r);
}

/* export --format hf, then --model DIR: the same samples and the same valid loss as --ckpt,
 * for a GPT-2-style and a LLaMA-style model with grouped-query heads (char tokenizers) and a
 * GPT-2-style one with a BPE tokenizer (docs/hf.md); the same samples again from the folder
 * without attograd-tokenizer.bin (its tokenizer.json read by txt_hf_*); AutoTokenizer's ids
 * equal attograd's where transformers is installed (AG_HF_PYTHON) */
Test(gpt_cli, an_hf_export_samples_and_evaluates_as_its_checkpoint) {
    static const char *const styles[][5] = {{"--max-iters", "20", NULL},
                                            {"--max-iters", "20", "--llama", "--n-kv-head", "1"},
                                            {"--max-iters", "20", NULL}};
    for (int k = 0; k < 3; k++) {
        char dir[256], ck[512], hf[512], data[512], hj[512], p[512], q[512];
        ts_tmp_dir(dir, sizeof dir, "gpt-hf");
        const char *extra[8] = {0};
        for (int i = 0; i < 5 && styles[k][i]; i++) extra[i] = styles[k][i];
        export_trained(dir, k == 2 ? "bpe" : "char", extra, ck, hf);
        ts_join(data, dir, "data");
        TsRun r;
        char *out[2][2];
        for (int m = 0; m < 2; m++) {
            const char *flag = m ? "--model" : "--ckpt", *src = m ? hf : ck;
            const char *s[] = {"sample",       flag, src,      "--prompt", "the ",
                               "--max-tokens", "30", "--seed", "3",        NULL};
            r = run(dir, s);
            expect_ok(&r, "sample");
            out[m][0] = strdup(r.out);
            ts_run_free(&r);
            const char *e[] = {"eval", flag, src, "--data", data, NULL};
            r = run(dir, e);
            expect_ok(&r, "eval");
            cr_assert(strstr(r.out, "valid loss") && strchr(r.out, ';'), "%s", r.out);
            out[m][1] = strndup(strstr(r.out, "valid loss"),
                                (size_t)(strchr(r.out, ';') - strstr(r.out, "valid loss")));
            ts_run_free(&r);
        }
        cr_assert_str_eq(out[0][0], out[1][0]);
        cr_assert_str_eq(out[0][1], out[1][1]);
        /* the folder with tokenizer.json only */
        ts_join(hj, dir, "hf-json");
        cr_assert_eq(mkdir(hj, 0700), 0);
        static const char *const files[] = {"config.json", "model.safetensors", "tokenizer.json",
                                            "tokenizer_config.json"};
        for (int i = 0; i < 4; i++) {
            size_t len;
            char *b = ts_slurp(ts_join(p, hf, files[i]), &len);
            ts_write_bytes(ts_join(q, hj, files[i]), b, len);
            free(b);
        }
        const char *s[] = {"sample",       "--model", hj,       "--prompt", "the ",
                           "--max-tokens", "30",      "--seed", "3",        NULL};
        r = run(dir, s);
        expect_ok(&r, "sample --model (tokenizer.json)");
        cr_assert_str_eq(r.out, out[0][0]);
        ts_run_free(&r);
        /* its export (from a folder with a published tokenizer) copies the tokenizer files */
        const char *ex2[] = {
            "export", "--model", hj, "--format", "hf", "--out", ts_join(q, dir, "hf-again"), NULL};
        r = run(dir, ex2);
        expect_ok(&r, "export --model");
        ts_run_free(&r);
        for (int i = 2; i < 4; i++) {
            char a[512], b[512];
            cr_assert(ts_same_file(ts_join(a, hj, files[i]), ts_join(b, q, files[i])), "%s", b);
        }
        autotokenizer_agrees(dir, hf,
                             k == 2 ? "the king—café 你好🙂speaks\n\n  of love,\tx2y3 war.\n"
                                    : "KING:\nthe queen speaks  of love.\n\n");
        for (int m = 0; m < 2; m++) free(out[m][0]), free(out[m][1]);
        ts_rm_tree(dir);
    }
}

/* ---- train --init-from DIR: fine-tuning a Hugging Face folder ---- */

/* train --init-from hf --data data: the tiny run's flags, then extra (NULL-terminated) */
static TsRun tune(const char *dir, const char *hf, const char *data, const char *out,
                  const char *const *extra) {
    const char *args[48] = {"train", "--init-from",    hf,  "--data",
                            data,    "--out",          out, "--batch-size",
                            "4",     "--warmup-iters", "5", "--eval-interval",
                            "10",    "--eval-iters",   "3", "--log-interval",
                            "5",     "--threads",      "1", NULL};
    int n = 0;
    while (args[n]) n++;
    for (int i = 0; extra && extra[i]; i++) args[n++] = extra[i];
    args[n] = NULL;
    return run(dir, args);
}

/* the valid_loss (the last column) of the last row of a log.csv */
static double log_valid(const char *path) {
    char *t = ts_read_text(path, NULL), *row = strchr(t, '\n');
    cr_assert(row && row[1], "%s: no rows", path);
    row++;
    for (char *nl; (nl = strchr(row, '\n')) && nl[1];) row = nl + 1;
    char *nl = strchr(row, '\n');
    if (nl) *nl = '\0';
    double v = strtod(strrchr(row, ',') + 1, NULL);
    free(t);
    return v;
}

/* "valid loss X" of `eval FLAG SRC --data DATA` (malloc'd) */
static char *eval_loss(const char *dir, const char *flag, const char *src, const char *data) {
    const char *e[] = {"eval", flag, src, "--data", data, NULL};
    TsRun r = run(dir, e);
    expect_ok(&r, "eval");
    const char *v = strstr(r.out, "valid loss"), *end = v ? strstr(v, " nats") : NULL;
    cr_assert(end != NULL, "eval: %s", r.out);
    char *s = strndup(v, (size_t)(end - v));
    ts_run_free(&r);
    return s;
}

/* A tiny model trained 20 steps and exported (export --format hf); its data prepared again with
 * the folder's tokenizer (prepare --model: the same tokenizer bytes). train --init-from at
 * learning rate 0 leaves the folder's weights as they are, so its checkpoint evaluates as
 * `eval --model` does (the same digits) and its validations are the step-0 one; with a learning
 * rate, the valid loss of step 40 is below it (in a window of 8 of the model's 16 positions,
 * with dropout), for a LLaMA-style model with grouped-query heads and a GPT-2 one; for the
 * latter, 20 steps resumed (without --init-from) to 40 give the straight run's bytes.
 * Refused, exit 2 naming what: data of another vocabulary (both tokenizers), a model flag, a
 * window above the context, --init-from with --resume, another --block-size on --resume, data of
 * attograd's tokenizer for a folder whose only tokenizer is the tokenizer.json made of it (the
 * data must hold that file's text: prepare --model). */
Test(gpt_cli, init_from_fine_tunes_an_hf_folder_and_resumes_to_the_bit) {
    char dir[256], ck[512], hf[512], d2[512], d3[512], txt[512], p[512], q[512], ft0[512], ft[512],
        fr[512], hj[512];
    TsRun r;
    /* a LLaMA-style model (rotary, grouped-query heads), then a GPT-2 one, kept for the rest */
    for (int k = 1; k >= 0; k--) {
        ts_tmp_dir(dir, sizeof dir, "gpt-init-from");
        const char *src_flags[2][8] = {{"--max-iters", "20", NULL},
                                       {"--max-iters", "20", "--llama", "--n-kv-head", "1", NULL}};
        export_trained(dir, "char", src_flags[k], ck, hf);
        ts_join(txt, dir, "text.txt");
        ts_join(d2, dir, "data2");
        const char *pm[] = {"prepare", "--model", hf, "--input", txt, "--out", d2, NULL};
        r = run(dir, pm);
        expect_ok(&r, "prepare --model");
        ts_run_free(&r);
        cr_assert(
            ts_same_file(ts_join(p, d2, "tokenizer"), ts_join(q, hf, "attograd-tokenizer.bin")));
        /* lr 0: the folder's weights; its validation is the step-0 one */
        const char *still[] = {"--max-iters",  "10", "--lr",      "0",   "--lr-min", "0",
                               "--block-size", "8",  "--dropout", "0.1", NULL};
        r = tune(dir, hf, d2, ts_join(ft0, dir, "ft0"), still);
        expect_ok(&r, "train --init-from (lr 0)");
        ts_run_free(&r);
        char *a = eval_loss(dir, "--ckpt", ts_join(p, ft0, "last.npz"), d2);
        char *b = eval_loss(dir, "--model", hf, d2);
        cr_assert_str_eq(a, b);
        free(a), free(b);
        double v0 = log_valid(ts_join(p, ft0, "log.csv")); /* step 10, as at step 0 */
        /* trained: the loss goes down; and resumed to the bit */
        const char *straight[] = {"--max-iters", "40", "--block-size", "8", "--dropout",
                                  "0.1",         NULL};
        r = tune(dir, hf, d2, ts_join(ft, dir, "ft"), straight);
        expect_ok(&r, "train --init-from");
        cr_assert(strstr(r.out, "block 16") && strstr(r.out, "batch 4 x 8 tokens"), "%s", r.out);
        ts_run_free(&r);
        double v40 = log_valid(ts_join(p, ft, "log.csv"));
        cr_assert(isfinite(v0) && v40 < v0, "valid loss %g at step 40, %g at step 0", v40, v0);
        if (k == 1) ts_rm_tree(dir);
    }
    const char *first[] = {"--max-iters", "20",           "--lr-decay-iters",
                           "40",          "--block-size", "8",
                           "--dropout",   "0.1",          NULL};
    r = tune(dir, hf, d2, ts_join(fr, dir, "fr"), first);
    expect_ok(&r, "train --init-from (20 steps)");
    ts_run_free(&r);
    const char *again[] = {"train", "--data", d2, "--out", fr, "--resume", "--threads", "1", NULL};
    r = run(dir, again);
    expect_ok(&r, "train --resume");
    ts_run_free(&r);
    expect_same_npz(ts_join(p, ft, "last.npz"), ts_join(q, fr, "last.npz"), SAME_BITS);
    expect_same_npz(ts_join(p, ft, "best.npz"), ts_join(q, fr, "best.npz"), SAME_BITS);
    /* the fine-tuned model exported evaluates as its checkpoint */
    const char *ex[] = {"export", "--ckpt", p, "--format", "hf", "--out", ts_join(q, dir, "hf2"),
                        NULL};
    r = run(dir, ex);
    expect_ok(&r, "export of the fine-tuned checkpoint");
    ts_run_free(&r);
    char *a = eval_loss(dir, "--ckpt", p, d2), *b = eval_loss(dir, "--model", q, d2);
    cr_assert_str_eq(a, b);
    free(a), free(b);
    /* refused */
    ts_join(d3, dir, "data3");
    const char *pb[] = {"prepare", "--input", txt, "--tokenizer", "bpe", "--vocab",
                        "300",     "--out",   d3,  NULL};
    r = run(dir, pb);
    expect_ok(&r, "prepare bpe");
    ts_run_free(&r);
    char tok3[600];
    snprintf(tok3, sizeof tok3, "%s/tokenizer (300 ids)", d3);
    ts_join(p, dir, "refused");
    const char *other[] = {"train", "--init-from", hf, "--data", d3, "--out", p, NULL};
    expect_usage(dir, other, (const char *[]){tok3, "attograd-tokenizer.bin (", NULL});
    const char *layers[] = {"train", "--init-from", hf,  "--data", d2, "--out",
                            p,       "--n-layer",   "3", NULL};
    expect_usage(dir, layers, (const char *[]){"--n-layer", "--init-from", NULL});
    const char *wide[] = {"train", "--init-from",  hf,   "--data", d2, "--out",
                          p,       "--block-size", "17", NULL};
    expect_usage(dir, wide, (const char *[]){"--block-size 17", "16 tokens", NULL});
    const char *both[] = {"train", "--init-from", hf, "--data", d2, "--out", fr, "--resume", NULL};
    expect_usage(dir, both, (const char *[]){"--init-from", "--resume", NULL});
    const char *window[] = {"train", "--data",      d2,   "--out", fr, "--resume", "--block-size",
                            "4",     "--max-iters", "50", NULL};
    expect_usage(dir, window, (const char *[]){"--block-size 4", "(8)", NULL});
    cr_assert_eq(ckpt_step(ts_join(q, fr, "last.npz")), 40, "a refused resume left it as it was");
    ts_join(hj, dir, "hf-json");
    cr_assert_eq(mkdir(hj, 0700), 0);
    static const char *const files[] = {"config.json", "model.safetensors", "tokenizer.json"};
    for (int i = 0; i < 3; i++) {
        size_t len;
        char *bytes = ts_slurp(ts_join(p, hf, files[i]), &len);
        ts_write_bytes(ts_join(q, hj, files[i]), bytes, len);
        free(bytes);
    }
    ts_join(p, dir, "refused");
    const char *json[] = {"train", "--init-from", hj, "--data", d2, "--out", p, NULL};
    char d2tok[600];
    snprintf(d2tok, sizeof d2tok, "%s/tokenizer (", d2);
    expect_usage(dir, json, (const char *[]){d2tok, "is not the published tokenizer of", hj, NULL});
    ts_rm_tree(dir);
}

/* ---- --model DIR with a published tokenizer: tokenizer.json or vocab.json + merges.txt ---- */

#define TOK_FIX "tests/fixtures/tokenizers"

static int collect_token(int token, void *ctx) {
    (void)token, (void)ctx;
    return 0;
}

/* line k (0-based) of the tokenizer fixtures' text (malloc'd, without its newline) */
static char *fixture_line(int k) {
    size_t len;
    char *text = ts_read_text(TOK_FIX "/text.txt", &len), *p = text;
    for (int i = 0; i < k; i++) p = strchr(p, '\n') + 1;
    char *line = strndup(p, (size_t)(strchr(p, '\n') - p));
    free(text);
    return line;
}

/* the tokenizers library's ids of line k for the fixture name (expected.json) */
static int *library_ids(const char *name, int k, size_t *n) {
    json_error_t err;
    json_t *root = json_load_file(TOK_FIX "/expected.json", JSON_ALLOW_NUL, &err);
    cr_assert(root, "expected.json: %s", err.text);
    json_t *line = json_array_get(json_object_get(json_object_get(root, name), "lines"), (size_t)k);
    cr_assert(line, "expected.json: no line %d for %s", k, name);
    *n = json_array_size(line);
    int *ids = malloc((*n + 64) * sizeof(int));
    for (size_t i = 0; i < *n; i++) ids[i] = (int)json_integer_value(json_array_get(line, i));
    json_decref(root);
    return ids;
}

/* A random model of the fixture's vocabulary saved as a folder beside the fixture's tokenizer
 * files (and nothing of attograd's own): sample --model prints the prompt and what the greedy
 * continuation of the library's ids decodes to; cache --model runs on the library's ids */
static void sample_with_the_folders_tokenizer(const char *name, const char *const *files) {
    enum { LINE = 6, NEW = 12 }; /* "Café naïve résumé façade Ångström" */
    char dir[256], mdir[512], src[512], dst[512], npz[512];
    ts_tmp_dir(dir, sizeof dir, "gpt-hftok");
    ts_join(mdir, dir, "model");
    TxtHf *tok;
    snprintf(src, sizeof src, TOK_FIX "/%s", name);
    cr_assert_eq(txt_hf_load(src, &tok), AG_OK, "%s", ag_last_error());
    GptConfig c = {.vocab_size = txt_hf_vocab_size(tok),
                   .block_size = 64,
                   .n_layer = 1,
                   .n_head = 2,
                   .n_embd = 16};
    Arena *a = arena_new("params", 0);
    Rng rng;
    rng_seed(&rng, 5);
    Gpt m;
    nn_gpt_init(&m, a, &rng, &c);
    for (int i = 0; i < m.params.n; i++) /* weights far from the initialisation's scale */
        for (size_t j = 0; j < m.params.items[i]->size; j++)
            m.params.items[i]->data[j] += (Real)(0.5 * rng_normal(&rng));
    cr_assert_eq(hf_save(&m, mdir), AG_OK, "%s", ag_last_error());
    for (int i = 0; files[i]; i++) {
        size_t len;
        snprintf(src, sizeof src, TOK_FIX "/%s/%s", name, files[i]);
        char *b = ts_slurp(src, &len);
        ts_write_bytes(ts_join(dst, mdir, files[i]), b, len);
        free(b);
    }
    char *line = fixture_line(LINE);
    size_t n;
    int *ids = library_ids(name, LINE, &n);
    /* the greedy continuation, here */
    NnSampling s = {.temperature = 0, .top_k = 0, .top_p = 1};
    Arena *step = arena_new("step", 0);
    Tape *t = ag_tape_new(step);
    cr_assert_eq(nn_gpt_generate(t, &m, ids, (int)n, NEW, &s, &rng, collect_token, NULL), NEW);
    char *all, *prompt;
    size_t all_len, prompt_len;
    cr_assert_eq(txt_hf_decode_alloc(tok, ids, n + NEW, &all, &all_len, "all"), AG_OK);
    cr_assert_eq(txt_hf_decode_alloc(tok, ids, n, &prompt, &prompt_len, "prompt"), AG_OK);
    cr_assert(all_len >= prompt_len && memcmp(all, prompt, prompt_len) == 0);
    char *want = malloc(strlen(line) + all_len + 2);
    sprintf(want, "%s%s\n", line, all + prompt_len);
    /* the program's */
    const char *sa[] = {"sample", "--model",       mdir, "--prompt",  line, "--max-tokens",
                        "12",     "--temperature", "0",  "--threads", "1",  NULL};
    TsRun r = run(dir, sa);
    expect_ok(&r, "sample --model");
    cr_assert_str_eq(r.out, want, "%s: sample printed\n%s\nthe ids decode to\n%s", name, r.out,
                     want);
    ts_run_free(&r);
    char html[512];
    for (int k = 0; k < 2; k++) { /* cache and view, on the same prompt */
        const char *ca[] = {k ? "view" : "cache",
                            "--model",
                            mdir,
                            "--prompt",
                            line,
                            "--out",
                            k ? ts_join(html, dir, "view.html") : ts_join(npz, dir, "cache.npz"),
                            "--threads",
                            "1",
                            NULL};
        r = run(dir, ca);
        expect_ok(&r, ca[0]);
        ts_run_free(&r);
    }
    size_t html_len;
    char *page = ts_read_text(html, &html_len);
    cr_assert(html_len > 1000 && strstr(page, "\"tok\""), "%s: no tokens in the page", html);
    free(page);
    NpzFile *f;
    cr_assert_eq(npz_read(npz, &f, NULL), AG_OK, "%s", ag_last_error());
    const NpzEntry *e = npz_find(f, "tokens");
    cr_assert(e && e->dtype == NPZ_I32 && e->ndim == 2 && e->shape[1] == (int64_t)n,
              "%s: tokens of cache.npz are not the library's %zu", name, n);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(((const int32_t *)e->data)[i], ids[i], "%s: token %zu", name, i);
    npz_free(f);
    free(want), free(all), free(prompt), free(ids), free(line);
    ag_tape_free(t);
    arena_free(step);
    nn_gpt_free(&m);
    arena_free(a);
    txt_hf_free(tok);
    ts_rm_tree(dir);
}

Test(gpt_cli, model_folders_use_their_tokenizer_json_with_the_librarys_ids) {
    static const char *const json[] = {"tokenizer.json", NULL};
    static const char *const pair[] = {"vocab.json", "merges.txt", NULL};
    sample_with_the_folders_tokenizer("gpt2", json);  /* byte-level BPE */
    sample_with_the_folders_tokenizer("llama", json); /* SentencePiece-style, byte fallback */
    sample_with_the_folders_tokenizer("gpt2_files", pair);
}

/* a hostile tokenizer.json in a model folder: exit 2 naming the file and the reason, for every
 * command that reads the folder */
Test(gpt_cli, a_hostile_tokenizer_json_in_a_model_folder_exits_2_naming_it) {
    char dir[256], mdir[512], p[512];
    ts_tmp_dir(dir, sizeof dir, "gpt-hftok-bad");
    ts_join(mdir, dir, "model");
    GptConfig c = {.vocab_size = 50, .block_size = 16, .n_layer = 1, .n_head = 2, .n_embd = 16};
    Arena *a = arena_new("params", 0);
    Rng rng;
    rng_seed(&rng, 5);
    Gpt m;
    nn_gpt_init(&m, a, &rng, &c);
    cr_assert_eq(hf_save(&m, mdir), AG_OK, "%s", ag_last_error());
    nn_gpt_free(&m);
    arena_free(a);
    static const char *const bad[][2] = {
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0", "tokenizer.json"},
        {"{\"model\": {\"type\": \"Unigram\", \"vocab\": []}, \"pre_tokenizer\": "
         "{\"type\": \"ByteLevel\"}}",
         "tokenizer.json: \""},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 99999999999}, \"merges\": []}, "
         "\"pre_tokenizer\": {\"type\": \"ByteLevel\"}}",
         "tokenizer.json"},
        {"[1, 2, 3]", "tokenizer.json"},
    };
    ts_join(p, mdir, "tokenizer.json");
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        ts_write_text(p, bad[k][0]);
        const char *sa[] = {"sample", "--model", mdir, "--prompt", "a", NULL};
        const char *says[] = {p, bad[k][1], NULL};
        expect_usage(dir, sa, says);
        const char *ca[] = {"cache", "--model", mdir, "--prompt", "a", "--out", "c.npz", NULL};
        expect_usage(dir, ca, says);
    }
    /* a tokenizer with more ids than the model */
    size_t len;
    char *b = ts_slurp(TOK_FIX "/gpt2/tokenizer.json", &len);
    ts_write_bytes(p, b, len);
    free(b);
    const char *sa[] = {"sample", "--model", mdir, "--prompt", "a", NULL};
    const char *says[] = {mdir, "the tokenizer has 500 ids, the model 50", NULL};
    expect_usage(dir, sa, says);
    ts_rm_tree(dir);
}

/* --data is saved with the run (meta.run.flag.data, whole: here a path of more than 255 bytes),
 * so `train --out DIR --resume` alone continues to the bytes of a straight run; a checkpoint
 * written before the run saved it resumes with --data given, and without it is refused naming
 * the entry (exit 2) */
Test(gpt_cli, resume_without_data_finds_the_folder_in_the_checkpoint) {
    char dir[256], deep[1024], data[1100], old[512], a[512], b[512], pa[512], pb[512];
    ts_tmp_dir(dir, sizeof dir, "gpt-resume-data");
    prepare(dir, "char");
    char part[121];
    memset(part, 'd', 120), part[120] = '\0';
    snprintf(deep, sizeof deep, "%s/%s", dir, part);
    cr_assert_eq(mkdir(deep, 0700), 0);
    snprintf(deep + strlen(deep), sizeof deep - strlen(deep), "/%s", part);
    cr_assert_eq(mkdir(deep, 0700), 0);
    snprintf(data, sizeof data, "%s/data", deep);
    cr_assert_eq(rename(ts_join(old, dir, "data"), data), 0, "%s", strerror(errno));
    cr_assert(strlen(data) > 255, "%zu", strlen(data));
    ts_join(a, dir, "straight");
    ts_join(b, dir, "resumed");
    const char *straight[] = {"train",       "--data", data,        "--out", a,   TINY,
                              "--max-iters", "20",     "--threads", "1",     NULL};
    TsRun r = run(dir, straight);
    expect_ok(&r, "train 20");
    ts_run_free(&r);
    const char *first[] = {"train", "--data",           data, "--out",     b,   TINY, "--max-iters",
                           "10",    "--lr-decay-iters", "20", "--threads", "1", NULL};
    r = run(dir, first);
    expect_ok(&r, "train 10");
    ts_run_free(&r);
    const char *again[] = {"train", "--out", b, "--resume", "--max-iters", "20", NULL};
    r = run(dir, again);
    expect_ok(&r, "train --out --resume");
    ts_run_free(&r);
    expect_same_npz(ts_join(pa, a, "last.npz"), ts_join(pb, b, "last.npz"), SAME_BITS);
    /* a checkpoint without the entry: --data is needed, and enough */
    r = run(dir, first);
    cr_assert_eq(r.code, 2, "%s", r.err); /* b/last.npz exists */
    ts_run_free(&r);
    const char *force[] = {
        "train", "--data",           data, "--out",     b,   TINY,      "--max-iters",
        "10",    "--lr-decay-iters", "20", "--threads", "1", "--force", NULL};
    r = run(dir, force);
    expect_ok(&r, "train 10 --force");
    ts_run_free(&r);
    ts_join(pb, b, "last.npz");
    npz_without(pb, pb, "meta.run.flag.data");
    r = run(dir, again);
    cr_assert(r.code == 2 && strstr(r.err, "meta.run.flag.data") && strstr(r.err, "--data"),
              "exit %d: %s", r.code, r.err);
    ts_run_free(&r);
    const char *with_data[] = {"train", "--out",  b,    "--resume", "--max-iters",
                               "20",    "--data", data, NULL};
    r = run(dir, with_data);
    expect_ok(&r, "train --resume --data with an older checkpoint");
    ts_run_free(&r);
    expect_same_npz(ts_join(pa, a, "last.npz"), pb, SAME_BITS);
    /* a folder's name too long to be saved whole: refused before anything is read */
    char *huge = malloc(5001);
    cr_assert(huge);
    for (int i = 0; i < 5000; i++) huge[i] = i % 2 ? '/' : 'x';
    huge[5000] = '\0';
    const char *too_long[] = {"train", "--data", huge, "--out", ts_join(pb, dir, "long"), NULL};
    r = run(dir, too_long);
    cr_assert(r.code == 2 &&
                  strstr(r.err, "--data: 5000 bytes: a run saves a text of at most 4095"),
              "exit %d: %s", r.code, r.err);
    ts_run_free(&r);
    free(huge);
    ts_rm_tree(dir);
}

/* the tokenizers library's ids of the whole of text.txt for the fixture name (expected.json) */
static int *library_whole(const char *name, size_t *n) {
    json_error_t err;
    json_t *root = json_load_file(TOK_FIX "/expected.json", JSON_ALLOW_NUL, &err);
    cr_assert(root, "expected.json: %s", err.text);
    json_t *w = json_object_get(json_object_get(root, name), "whole");
    cr_assert(json_is_array(w), "expected.json: no whole text for %s", name);
    *n = json_array_size(w);
    int *ids = malloc(*n * sizeof(int));
    for (size_t i = 0; i < *n; i++) ids[i] = (int)json_integer_value(json_array_get(w, i));
    json_decref(root);
    return ids;
}

/* dir/NAME: a random model (vocab_size ids; a GPT-2, or a LLaMA with grouped-query heads) saved
 * with the fixture's tokenizer files beside it, and nothing of attograd's own */
static void published_folder(const char *dir, const char *name, const char *const *files,
                             int vocab_size, int llama, char *mdir) {
    GptConfig c = {
        .vocab_size = vocab_size, .block_size = 16, .n_layer = 1, .n_head = 2, .n_embd = 16};
    if (llama) c.style = NN_LLAMA, c.n_kv_head = 1;
    Arena *a = arena_new("params", 0);
    Rng rng;
    rng_seed(&rng, 9);
    Gpt m;
    nn_gpt_init(&m, a, &rng, &c);
    ts_join(mdir, dir, name);
    cr_assert_eq(hf_save(&m, mdir), AG_OK, "%s", ag_last_error());
    nn_gpt_free(&m);
    arena_free(a);
    for (int i = 0; files[i]; i++) {
        char src[512], dst[512];
        size_t len;
        snprintf(src, sizeof src, TOK_FIX "/%s/%s", name, files[i]);
        char *b = ts_slurp(src, &len);
        ts_write_bytes(ts_join(dst, mdir, files[i]), b, len);
        free(b);
    }
}

/* train --init-from hf of steps steps (of a schedule of 20) in a window of 8 tokens, into out */
static void tune_steps(const char *dir, const char *hf, const char *data, const char *out,
                       const char *steps) {
    const char *extra[] = {"--max-iters", steps, "--lr-decay-iters", "20", "--block-size",
                           "8",           NULL};
    TsRun r = tune(dir, hf, data, out, extra);
    expect_ok(&r, "train --init-from (a published tokenizer)");
    ts_run_free(&r);
}

/* `attograd-gpt sample FLAG SRC` greedily from line 6 of the fixtures' text (malloc'd) */
static char *greedy(const char *dir, const char *flag, const char *src) {
    char *line = fixture_line(6);
    const char *sa[] = {"sample",        flag, src,         "--prompt", line, "--max-tokens", "12",
                        "--temperature", "0",  "--threads", "1",        NULL};
    TsRun r = run(dir, sa);
    expect_ok(&r, "sample");
    char *out = strdup(r.out);
    ts_run_free(&r);
    free(line);
    return out;
}

/* train --init-from DIR and prepare --model DIR of a folder whose only tokenizer is a published
 * one (the fixtures' tokenizer.json of a byte-level BPE and of a SentencePiece-style BPE, GPT-2's
 * vocab.json + merges.txt): prepare writes the library's ids of the text and keeps the
 * tokenizer.json text (the very file's bytes; of vocab.json + merges.txt the tokenizer.json made
 * of them); the fine-tuned checkpoint carries it, so sample and eval of the checkpoint print
 * what they print of its export (export --format hf writes that tokenizer.json again, which
 * AutoTokenizer reads with the same ids where AG_HF_PYTHON has transformers); a run resumed from
 * step 10 ends with the straight run's bytes (the LLaMA, whose vocabulary is padded past the
 * tokenizer's as Pythia's is). Refused, exit 2 naming the file: data of another tokenizer, a
 * tokenizer with more ids than the model, a data tokenizer that is not JSON or not one attograd
 * reads. */
Test(gpt_cli, init_from_fine_tunes_a_folder_with_a_published_tokenizer) {
    static const char *const json[] = {"tokenizer.json", NULL};
    static const char *const pair[] = {"vocab.json", "merges.txt", NULL};
    static const struct {
        const char *name;
        const char *const *files;
        int llama, pad;
    } cases[] = {{"llama", json, 1, 3}, {"gpt2", json, 0, 0}, {"gpt2_files", pair, 0, 0}};
    char dir[256], mdir[512], data[512], ft[512], fr[512], ex[512], p[512], q[512];
    ts_tmp_dir(dir, sizeof dir, "gpt-init-published");
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        const char *name = cases[k].name;
        TxtHf *tok;
        snprintf(p, sizeof p, TOK_FIX "/%s", name);
        cr_assert_eq(txt_hf_load(p, &tok), AG_OK, "%s", ag_last_error());
        int V = txt_hf_vocab_size(tok);
        published_folder(dir, name, cases[k].files, V + cases[k].pad, cases[k].llama, mdir);
        /* prepare --model: the library's ids, the tokenizer.json text */
        snprintf(data, sizeof data, "%s/data-%s", dir, name);
        const char *pm[] = {"prepare", "--model", mdir,           "--input", TOK_FIX "/text.txt",
                            "--out",   data,      "--valid-frac", "0.2",     NULL};
        TsRun r = run(dir, pm);
        expect_ok(&r, "prepare --model (a published tokenizer)");
        ts_run_free(&r);
        size_t n_want, n_train, n_valid, len;
        int *want = library_whole(name, &n_want), *tr, *va;
        cr_assert_eq(txt_shard_read(ts_join(p, data, "train.bin"), V, &tr, &n_train), AG_OK, "%s",
                     ag_last_error());
        cr_assert_eq(txt_shard_read(ts_join(p, data, "valid.bin"), V, &va, &n_valid), AG_OK, "%s",
                     ag_last_error());
        cr_assert_eq(n_train + n_valid, n_want, "%s: %zu tokens, the library's %zu", name,
                     n_train + n_valid, n_want);
        for (size_t i = 0; i < n_want; i++)
            cr_assert_eq(i < n_train ? tr[i] : va[i - n_train], want[i], "%s: token %zu", name, i);
        free(want), free(tr), free(va);
        uint8_t *saved;
        size_t saved_len;
        cr_assert_eq(
            txt_load_bytes(ts_join(p, data, "tokenizer"), (size_t)1 << 28, &saved, &saved_len),
            AG_OK, "%s", ag_last_error());
        const char *text = txt_hf_json(tok, &len);
        cr_assert(saved_len == len && memcmp(saved, text, len) == 0,
                  "%s: data/tokenizer does not hold the tokenizer.json text", name);
        if (cases[k].files == json) {
            char *file = ts_slurp(ts_join(q, mdir, "tokenizer.json"), &len);
            cr_assert(saved_len == len && memcmp(saved, file, len) == 0,
                      "%s: data/tokenizer is not the folder's tokenizer.json", name);
            free(file);
        }
        free(saved);
        /* fine-tuned; its checkpoint samples and evaluates as its export */
        snprintf(ft, sizeof ft, "%s/ft-%s", dir, name);
        tune_steps(dir, mdir, data, ft, "20");
        snprintf(ex, sizeof ex, "%s/ex-%s", dir, name);
        const char *exa[] = {
            "export", "--ckpt", ts_join(p, ft, "last.npz"), "--format", "hf", "--out", ex, NULL};
        r = run(dir, exa);
        expect_ok(&r, "export of the fine-tuned checkpoint");
        ts_run_free(&r);
        char *a = greedy(dir, "--ckpt", p), *b = greedy(dir, "--model", ex);
        cr_assert_str_eq(a, b, "%s: sample --ckpt and --model of its export differ", name);
        free(a), free(b);
        a = eval_loss(dir, "--ckpt", p, data), b = eval_loss(dir, "--model", ex, data);
        cr_assert_str_eq(a, b);
        free(a), free(b);
        char *file = ts_slurp(ts_join(q, ex, "tokenizer.json"), &len);
        text = txt_hf_json(tok, &saved_len);
        cr_assert(len == saved_len && memcmp(file, text, len) == 0,
                  "%s: the export's tokenizer.json is not the data's", name);
        free(file);
        cr_assert(access(ts_join(q, ex, "attograd-tokenizer.bin"), F_OK) != 0);
        autotokenizer_agrees(dir, ex,
                             "the king—café 你好🙂speaks\n\n  of love,\tx2y3 war.\n");
        if (cases[k].llama) { /* resumed from step 10: the straight run's bytes */
            snprintf(fr, sizeof fr, "%s/fr-%s", dir, name);
            tune_steps(dir, mdir, data, fr, "10");
            const char *again[] = {"train",       "--data", data,        "--out", fr,  "--resume",
                                   "--max-iters", "20",     "--threads", "1",     NULL};
            r = run(dir, again);
            expect_ok(&r, "train --resume");
            ts_run_free(&r);
            expect_same_npz(ts_join(p, ft, "last.npz"), ts_join(q, fr, "last.npz"), SAME_BITS);
        }
        txt_hf_free(tok);
    }
    /* refused: the GPT-2 data for the LLaMA folder; a model with fewer ids than the tokenizer */
    char gdata[512], lmodel[512];
    snprintf(gdata, sizeof gdata, "%s/data-gpt2", dir);
    snprintf(lmodel, sizeof lmodel, "%s/llama", dir);
    char says[600];
    snprintf(says, sizeof says, "%s/tokenizer (", gdata);
    const char *other[] = {
        "train", "--init-from", lmodel, "--data", gdata, "--out", ts_join(p, dir, "refused"), NULL};
    expect_usage(dir, other,
                 (const char *[]){says, "is not the published tokenizer of", lmodel, NULL});
    published_folder(dir, "gpt2", json, 499, 0, mdir); /* the fixture's 500 ids */
    const char *small[] = {
        "train", "--init-from", mdir, "--data", gdata, "--out", ts_join(p, dir, "refused"), NULL};
    expect_usage(dir, small,
                 (const char *[]){mdir, "the tokenizer has 500 ids, the model 499", NULL});
    /* a data folder's tokenizer that is not JSON, or a tokenizer.json attograd does not read */
    static const char *const bad[][2] = {
        {"{\"model\": {", "neither attograd's tokenizer (ATGTOKEN) nor a tokenizer.json"},
        {"{\"model\": {\"type\": \"Unigram\", \"vocab\": []}, \"pre_tokenizer\": "
         "{\"type\": \"ByteLevel\"}, \"decoder\": {\"type\": \"ByteLevel\"}}",
         "\"model.type\": \"Unigram\""}};
    ts_join(p, gdata, "tokenizer");
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(txt_save_bytes(bad[i][0], strlen(bad[i][0]), p), AG_OK);
        const char *tr[] = {"train", "--data", gdata, "--out", ts_join(q, dir, "refused"), NULL};
        expect_usage(dir, tr, (const char *[]){p, bad[i][1], NULL});
    }
    ts_rm_tree(dir);
}
