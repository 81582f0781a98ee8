/* test_induction.c: attograd-induction (examples/induction, run through AG_INDUCTION_BIN, which
 * make test sets) on a tiny configuration, a few steps: it exits 0 and prints its summary; its
 * .npz holds every record with the shapes files.c names, patterns whose rows sum to 1, and scores
 * that lens_detect_heads gives again from the saved patterns and tokens; the CSV files have one
 * row per record (and head); the pictures are drawn, or skipped with a message when there is no
 * gnuplot, the data files written all the same; a seed gives the same bytes on 1 and 2 threads;
 * a run stopped (at fewer --steps, or before the control's run began) and continued with
 * --resume writes the very bytes of a run straight through;
 * bad flags and an output folder that cannot be made exit 2 naming the flag or the path.
 * Not here: the detectors' own cases (tests/lens/test_detect.c); the phase change itself, which
 * takes minutes (make induction, docs/induction.md). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attograd.h"
#include "files.h"

static TsRun run(const char *dir, const char *const *args) {
    return ts_finish(dir, ts_start_env("AG_INDUCTION_BIN", dir, args, NULL));
}

/* the tiny run: 20 steps recorded every 5 (R = 5 records: steps 0, 5, ..., 20), 3 evaluation
 * sequences of 16 tokens, 2 heads */
#define TINY                                                                                       \
    "--steps", "20", "--every", "5", "--batch", "4", "--eval-batch", "3", "--vocab", "16",         \
        "--ctx", "16", "--d-model", "16", "--heads", "2", "--min-prefix", "3", "--max-prefix", "6"
enum { R = 5, T = 16, NH = 2, BE = 3 };

static const char *const PNGS[] = {"loss.png", "scores.png", "loss_positions.png",
                                   "patterns_two_layer.png", "patterns_one_layer.png"};

static void tiny_run(const char *dir, const char *out, const char *seed) {
    const char *args[] = {TINY, "--seed", seed, "--out", out, NULL};
    TsRun r = run(dir, args);
    cr_assert_eq(r.code, 0, "exit %d\nstdout: %s\nstderr: %s", r.code, r.out, r.err);
    cr_assert(strstr(r.out, "2-layer: highest induction score") &&
                  strstr(r.out, "1-layer control:") && strstr(r.out, "loss never below 1.0") &&
                  strstr(r.out, "phase change NOT shown"),
              "%s", r.out);
    /* the last line names the files written: the pictures exactly when they were drawn */
    const char *files = strstr(r.out, "  files: ");
    cr_assert(files && strstr(files, "/induction.npz, curves.csv, heads.csv, positions.csv"), "%s",
              r.out);
    for (size_t k = 0; k < sizeof PNGS / sizeof PNGS[0]; k++) {
        char path[512], named[64];
        snprintf(named, sizeof named, ", %s", PNGS[k]);
        int exists = access(ts_join(path, out, PNGS[k]), F_OK) == 0;
        cr_assert_eq(strstr(files, named) != NULL, exists, "%s %s, and the files line: %s", PNGS[k],
                     exists ? "was drawn" : "was not drawn", files);
    }
    ts_run_free(&r);
}

static const NpzEntry *entry(const NpzFile *f, const char *name, NpzDtype dt, int ndim,
                             const int64_t *shape) {
    const NpzEntry *e = npz_find(f, name);
    cr_assert(e != NULL, "%s: no entry %s", f->path, name);
    cr_assert_eq(e->dtype, dt, "%s: dtype %d", name, (int)e->dtype);
    cr_assert_eq(e->ndim, ndim, "%s: ndim %d", name, e->ndim);
    for (int i = 0; i < ndim; i++)
        cr_assert_eq(e->shape[i], shape[i], "%s: dim %d is %lld", name, i, (long long)e->shape[i]);
    return e;
}

static int count_lines(const char *path) {
    char *s = ts_read_text(path, NULL);
    int n = 0;
    for (char *p = s; *p; p++) n += *p == '\n';
    free(s);
    return n;
}

/* the records of one model agree with the library's detectors on the saved patterns */
static void check_model(const NpzFile *f, const char *name, int L, const int32_t *tok) {
    char key[128];
#define K(what) (snprintf(key, sizeof key, "%s.%s", name, what), key)
    const int64_t *step = entry(f, K("step"), NPZ_I64, 1, (int64_t[]){R})->data;
    for (int r = 0; r < R; r++) cr_assert_eq(step[r], 5 * r, "%s step[%d]", name, r);
    const double *ind = entry(f, K("induction_score"), NPZ_F64, 3, (int64_t[]){R, L, NH})->data;
    const double *prev =
        entry(f, K("previous_token_score"), NPZ_F64, 3, (int64_t[]){R, L, NH})->data;
    const double *lp = entry(f, K("loss_predictable"), NPZ_F64, 1, (int64_t[]){R})->data;
    const double *pos = entry(f, K("loss_per_position"), NPZ_F64, 2, (int64_t[]){R, T})->data;
    entry(f, K("pattern_first"), NPZ_F32, 4, (int64_t[]){L, NH, T, T});
    for (int r = 0; r < R; r++) {
        cr_assert(isfinite(lp[r]) && lp[r] > 0 && lp[r] < 10, "%s loss %g", name, lp[r]);
        for (int i = 0; i < T; i++) cr_assert(isfinite(pos[r * T + i]) && pos[r * T + i] > 0);
    }
    /* the program's input ids: the first T of each evaluation sequence's T + 1 tokens */
    int ids[BE * T];
    for (int b = 0; b < BE; b++)
        for (int t = 0; t < T; t++) ids[b * T + t] = tok[b * (T + 1) + t];
    Arena *a = arena_new("t", 0);
    for (int l = 0; l < L; l++) {
        snprintf(key, sizeof key, "%s.blocks.%d.attn.hook_pattern", name, l);
        const float *p = entry(f, key, NPZ_F32, 4, (int64_t[]){BE, NH, T, T})->data;
        Tensor *P = tensor_new4(a, BE, NH, T, T, "pattern");
        for (size_t k = 0; k < P->size; k++) P->data[k] = (Real)p[k];
        for (int b = 0; b < BE * NH; b++) /* causal rows of probabilities */
            for (int i = 0; i < T; i++) {
                double s = 0;
                for (int j = 0; j < T; j++) {
                    double v = p[((size_t)b * T + i) * T + j];
                    cr_assert(j <= i ? v >= 0 : v == 0, "%s (%d,%d): %g", key, i, j, v);
                    s += v;
                }
                cr_assert(fabs(s - 1) < 1e-5, "%s row %d sums to %.9g", key, i, s);
            }
        double want_ind[NH], want_prev[NH];
        lens_detect_heads(P, ids, BE, T, LENS_INDUCTION, NULL, want_ind);
        lens_detect_heads(P, ids, BE, T, LENS_PREVIOUS_TOKEN, NULL, want_prev);
        for (int h = 0; h < NH; h++) {
            double got_i = ind[((R - 1) * L + l) * NH + h],
                   got_p = prev[((R - 1) * L + l) * NH + h];
            /* the file's patterns are float32: in the double build they are rounded */
            cr_assert(fabs(got_i - want_ind[h]) < 1e-6 && fabs(got_p - want_prev[h]) < 1e-6,
                      "%s L%dH%d: recorded %.9g %.9g, the library gives %.9g %.9g", name, l, h,
                      got_i, got_p, want_ind[h], want_prev[h]);
            cr_assert(got_i >= 0 && got_i <= 1 && got_p >= 0 && got_p <= 1);
        }
    }
    arena_free(a);
#undef K
}

Test(induction, a_tiny_run_writes_its_records_and_its_scores_agree_with_the_library) {
    char dir[64], out[512], path[512];
    ts_tmp_dir(dir, sizeof dir, "induction");
    ts_join(out, dir, "run");
    tiny_run(dir, out, "3");
    NpzFile *f;
    cr_assert_eq(npz_read(ts_join(path, out, "induction.npz"), &f, NULL), AG_OK, "%s",
                 ag_last_error());
    const int32_t *tok = entry(f, "eval_tokens", NPZ_I32, 2, (int64_t[]){BE, T + 1})->data;
    const int32_t *pre = entry(f, "eval_prefix_len", NPZ_I32, 1, (int64_t[]){BE})->data;
    for (int b = 0; b < BE; b++) { /* a prefix of 3..6 tokens repeated to the end */
        cr_assert(pre[b] >= 3 && pre[b] <= 6, "prefix %d", pre[b]);
        for (int t = 0; t <= T; t++) {
            cr_assert(tok[b * (T + 1) + t] >= 0 && tok[b * (T + 1) + t] < 16);
            if (t >= pre[b]) cr_assert_eq(tok[b * (T + 1) + t], tok[b * (T + 1) + t - pre[b]]);
        }
    }
    const int64_t *ctx = entry(f, "config.ctx", NPZ_I64, 0, NULL)->data;
    cr_assert_eq(*ctx, T);
    check_model(f, "two_layer", 2, tok);
    check_model(f, "one_layer", 1, tok);
    npz_free(f);
    cr_assert_eq(count_lines(ts_join(path, out, "curves.csv")), 1 + 2 * R);
    cr_assert_eq(count_lines(ts_join(path, out, "heads.csv")), 1 + R * (2 * NH + NH));
    cr_assert_eq(count_lines(ts_join(path, out, "positions.csv")), 1 + 2 * R);
    char *head = ts_read_text(path, NULL);
    cr_assert(strncmp(head, "model,step,pos_0,", 17) == 0 && strstr(head, ",pos_15\n"), "%.80s",
              head);
    free(head);
    for (size_t k = 0; k < sizeof PNGS / sizeof PNGS[0]; k++) {
        size_t n = 0;
        char *png = ts_slurp(ts_join(path, out, PNGS[k]), &n);
        if (system("command -v gnuplot >/dev/null 2>&1") == 0)
            cr_assert(png && n > 1000 && memcmp(png, "\x89PNG", 4) == 0, "%s is not a PNG", path);
        free(png);
    }
    ts_rm_tree(dir);
}

Test(induction, without_gnuplot_the_data_files_are_written_and_the_pictures_skipped) {
    char dir[64], out[512], path[512];
    ts_tmp_dir(dir, sizeof dir, "induction");
    ts_join(out, dir, "run");
    setenv("AG_GNUPLOT", "/nonexistent/gnuplot", 1); /* this test's process and its children */
    const char *args[] = {TINY, "--no-control", "--quiet", "--out", out, NULL};
    TsRun r = run(dir, args);
    cr_assert_eq(r.code, 0, "exit %d: %s", r.code, r.err);
    cr_assert(strstr(r.err, "no gnuplot") && strstr(r.err, "data files are written"), "%s", r.err);
    cr_assert(strstr(r.out, "summary") && !strstr(r.out, "1-layer control"), "%s", r.out);
    cr_assert(strstr(r.out, "  files: ") && !strstr(r.out, ".png"), "%s", r.out);
    ts_run_free(&r);
    cr_assert_eq(count_lines(ts_join(path, out, "curves.csv")), 1 + R);
    NpzFile *f;
    cr_assert_eq(npz_read(ts_join(path, out, "induction.npz"), &f, NULL), AG_OK, "%s",
                 ag_last_error());
    cr_assert(npz_find(f, "two_layer.step") && !npz_find(f, "one_layer.step"));
    npz_free(f);
    cr_assert(ts_slurp(ts_join(path, out, "loss.png"), NULL) == NULL);
    ts_rm_tree(dir);
}

Test(induction, a_seed_gives_the_same_bytes_on_one_and_two_threads) {
    char dir[64], a[512], b[512], c[512], pa[512], pb[512], pc[512];
    ts_tmp_dir(dir, sizeof dir, "induction");
    setenv("AG_GNUPLOT", "/nonexistent/gnuplot", 1);
    setenv("OMP_NUM_THREADS", "1", 1);
    tiny_run(dir, ts_join(a, dir, "one"), "5");
    setenv("OMP_NUM_THREADS", "2", 1);
    tiny_run(dir, ts_join(b, dir, "two"), "5");
    tiny_run(dir, ts_join(c, dir, "other"), "6");
    ts_join(pa, a, "induction.npz");
    cr_assert(ts_same_file(pa, ts_join(pb, b, "induction.npz")),
              "1 and 2 threads wrote different files");
    cr_assert(!ts_same_file(pa, ts_join(pc, c, "induction.npz")),
              "another seed wrote the same file");
    ts_rm_tree(dir);
}

Test(induction, a_stopped_run_resumed_writes_the_bytes_of_a_straight_run) {
    char dir[64], a[512], b[512], c[512], pa[512], pb[512], path[512];
    ts_tmp_dir(dir, sizeof dir, "induction");
    setenv("AG_GNUPLOT", "/nonexistent/gnuplot", 1);
    tiny_run(dir, ts_join(a, dir, "straight"), "4");
    /* 10 steps, then --resume to 20: both models' runs continue, their records too */
    const char *first[] = {
        TINY, "--steps", "10", "--seed", "4", "--quiet", "--out", ts_join(b, dir, "halves"), NULL};
    TsRun r = run(dir, first);
    cr_assert_eq(r.code, 0, "exit %d: %s", r.code, r.err);
    ts_run_free(&r);
    const char *again[] = {"--out", b, "--resume", "--steps", "20", NULL};
    r = run(dir, again);
    cr_assert_eq(r.code, 0, "exit %d: %s", r.code, r.err);
    ts_run_free(&r);
    ts_join(pa, a, "induction.npz");
    cr_assert(ts_same_file(pa, ts_join(pb, b, "induction.npz")),
              "a run resumed at step 10 wrote another induction.npz than a straight one");
    cr_assert(ts_same_file(ts_join(path, a, "heads.csv"), ts_join(pb, b, "heads.csv")));
    /* the one_layer run's folder does not exist yet: --resume starts it (the 2-layer model's
     * flags, from its checkpoint); a model flag given again with another value is refused */
    const char *two_only[] = {TINY, "--seed", "4", "--quiet", "--out", ts_join(c, dir, "two"),
                              NULL};
    r = run(dir, two_only);
    cr_assert_eq(r.code, 0, "exit %d: %s", r.code, r.err);
    ts_run_free(&r);
    ts_join(path, c, "one_layer");
    ts_rm_tree(path);
    const char *resume[] = {"--out", c, "--resume", NULL};
    r = run(dir, resume);
    cr_assert_eq(r.code, 0, "exit %d: %s", r.code, r.err);
    ts_run_free(&r);
    cr_assert(ts_same_file(pa, ts_join(pb, c, "induction.npz")),
              "the control started by --resume wrote another induction.npz");
    const char *changed[] = {"--out", c, "--resume", "--vocab", "20", NULL};
    r = run(dir, changed);
    cr_assert(r.code == 2 && strstr(r.err, "--vocab 20 differs"), "exit %d: %s", r.code, r.err);
    ts_run_free(&r);
    ts_rm_tree(dir);
}

Test(induction, bad_flags_exit_2_naming_the_flag) {
    char dir[64], file[512], under[512];
    ts_tmp_dir(dir, sizeof dir, "induction");
    ts_write_text(ts_join(file, dir, "file"), "x");
    ts_join(under, file, "run"); /* a folder under a file cannot be made */
    const struct {
        const char *args[8], *says;
    } rows[] = {
        {{"--bogus", NULL}, "--bogus"},
        {{"--steps", NULL}, "needs a value"},
        {{"--steps", "ten", NULL}, "'--steps ten' is not an integer"},
        {{"--steps", "-1", NULL}, "'--steps -1' is out of range [1, 1000000]"},
        {{"--lr", "nan", NULL}, "--lr nan"},
        {{"--lr", "2e6", NULL}, "'--lr 2e6' is out of range [0, 1e+06]"},
        {{"--seed", "-3", NULL}, "--seed -3"},
        {{"--heads", "3", NULL}, "--heads"},
        {{"--min-prefix", "1", NULL}, "--min-prefix"},
        {{"--max-prefix", "64", NULL}, "--max-prefix"},
        {{"--min-prefix", "9", "--max-prefix", "8", NULL}, "--min-prefix"},
        {{"--out", "", NULL}, "--out"},
        {{"--out", under, "--steps", "1", NULL}, under},
    };
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        TsRun r = run(dir, rows[k].args);
        cr_assert_eq(r.code, 2, "row %zu: exit %d, expected 2: %s", k, r.code, r.err);
        cr_assert(strstr(r.err, rows[k].says), "row %zu: stderr does not name '%s': %s", k,
                  rows[k].says, r.err);
        ts_run_free(&r);
    }
    const char *help[] = {"--help", NULL};
    TsRun r = run(dir, help);
    cr_assert(r.code == 0 && strstr(r.out, "--max-prefix") && strstr(r.out, "induction.npz"), "%s",
              r.out);
    ts_run_free(&r);
    ts_rm_tree(dir);
}
