/* test_report.c: the lens commands' outputs for any model (src/lens/report.c): paths and
 * labels; ablate's and patch's .npz read back, and what the program's heatmap drawer is given
 * (the change from the base or from the corrupted run, the point names, the token texts of the
 * program's callback: an encoder's positions labelled with the source's tokens); a value that
 * is not finite refused with nothing written; a drawer's failure returned.
 * Not here: the commands on trained checkpoints (tests/examples/test_*_lens_cli.c). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attograd.h"
#include "files.h"

/* what the last call of draw was given */
static struct {
    int calls, rows, cols, answer;
    double v[16], range;
    char title[256], png[512], yl[8][NN_HOOK_NAME_LEN + 16], xl[8][32];
} D;

static int draw(const char *png, const char *title, const double *v, int rows, int cols, char **yl,
                char **xl, double range) {
    D.calls++, D.rows = rows, D.cols = cols, D.range = range;
    snprintf(D.title, sizeof D.title, "%s", title);
    snprintf(D.png, sizeof D.png, "%s", png);
    for (int i = 0; i < rows * cols && i < 16; i++) D.v[i] = v[i];
    for (int i = 0; i < rows && i < 8; i++) snprintf(D.yl[i], sizeof D.yl[i], "%s", yl[i]);
    for (int i = 0; i < cols && i < 8; i++) snprintf(D.xl[i], sizeof D.xl[i], "%s", xl[i]);
    if (D.answer == RUN_PLOT_FAILED) ag_fail(AG_ERR_IO, "%s: the drawer failed", png);
    return D.answer;
}

/* "src8" or "tok8" ("!" after it for a label) */
static char *text_of(const void *ctx, NnHookStack stack, int id, int label) {
    cr_assert_eq(ctx, (const void *)&D, "the program's context is passed on");
    char *s = malloc(32);
    snprintf(s, 32, "%s%d%s", stack == NN_HOOK_ENCODER ? "src" : "tok", id, label ? "!" : "");
    return s;
}

static const LensReport RP = {"test", draw, text_of, &D};

static NnHookPoint point(const char *name, NnHookStack stack) {
    NnHookPoint p = {.stack = stack, .layer = 0, .head_axis = 2, .pos_axis = 1};
    snprintf(p.name, sizeof p.name, "%s", name);
    return p;
}

static int has_text(const NpzEntry *e, const char *s) {
    return e && e->nbytes == strlen(s) && memcmp(e->data, s, e->nbytes) == 0;
}

Test(lens_report, paths_and_labels) {
    char *p = lens_path_swap("a/b.npz", ".png"), *q = lens_path_swap("x", "_lens.png");
    cr_assert_str_eq(p, "a/b.png");
    cr_assert_str_eq(q, "x_lens.png");
    free(p), free(q);
    NnHookPoint pts[2] = {point("blocks.0.attn.hook_z", NN_HOOK_GPT),
                          point("blocks.1.attn.hook_z", NN_HOOK_GPT)};
    char **l = lens_labels_points(pts, 2, 3);
    cr_assert_str_eq(l[0], "blocks.0.attn.hook_z h0");
    cr_assert_str_eq(l[5], "blocks.1.attn.hook_z h2");
    lens_labels_free(l, 6);
    l = lens_labels_numbers(3);
    cr_assert_str_eq(l[2], "2");
    lens_labels_free(l, 3);
    LensReport bare = {0};
    l = lens_labels_tokens(&bare, NN_HOOK_GPT, (int[]){7, 11}, 2, 1);
    cr_assert_str_eq(l[1], "11", "without a token_text: the ids");
    lens_labels_free(l, 2);
    l = lens_labels_tokens(&RP, NN_HOOK_ENCODER, (int[]){7}, 1, 0);
    cr_assert_str_eq(l[0], "src7");
    lens_labels_free(l, 1);
    lens_labels_free(NULL, 3);
}

Test(lens_report, ablate_writes_its_table_and_draws_the_change_from_the_base) {
    char dir[256], path[512];
    ts_tmp_dir(dir, sizeof dir, "report");
    NnHookPoint pts[2] = {point("blocks.0.attn.hook_z", NN_HOOK_GPT),
                          point("blocks.1.attn.hook_z", NN_HOOK_GPT)};
    double values[4] = {1, 2, 3, 4.5};
    LensAblateTable a = {.n_points = 2, .n_heads = 2, .points = pts, .values = values, .base = 2};
    memset(&D, 0, sizeof D);
    cr_assert_eq(lens_report_ablate(&RP, &a, LENS_MEAN, "loss", ts_join(path, dir, "a.npz")), AG_OK,
                 "%s", ag_last_error());
    NpzFile *f;
    cr_assert_eq(npz_read(path, &f, NULL), AG_OK, "%s", ag_last_error());
    const NpzEntry *v = npz_find(f, "values"), *b = npz_find(f, "base");
    cr_assert(v && v->dtype == NPZ_F64 && v->ndim == 2 && v->shape[0] == 2 && v->shape[1] == 2);
    cr_assert_eq(((const double *)v->data)[3], 4.5);
    cr_assert(b && b->ndim == 0 && *(const double *)b->data == 2);
    cr_assert(has_text(npz_find(f, "axes"), "point,head"));
    cr_assert(has_text(npz_find(f, "mode"), "mean"));
    cr_assert(has_text(npz_find(f, "metric"), "loss"));
    cr_assert(
        has_text(npz_find(f, "points"), "[\"blocks.0.attn.hook_z\",\"blocks.1.attn.hook_z\"]"));
    npz_free(f);
    cr_assert_eq(D.calls, 1);
    cr_assert(strstr(D.png, "/a.png"), "%s", D.png);
    cr_assert_str_eq(D.title, "mean ablation: loss change (base 2.0000)");
    cr_assert(D.rows == 2 && D.cols == 2 && D.range == 0);
    cr_assert(D.v[0] == -1 && D.v[1] == 0 && D.v[2] == 1 && D.v[3] == 2.5);
    cr_assert_str_eq(D.yl[1], "blocks.1.attn.hook_z");
    cr_assert_str_eq(D.xl[1], "1");
    /* a value that is not finite (a model that overflowed): refused, nothing written */
    values[2] = NAN;
    cr_assert_eq(lens_report_ablate(&RP, &a, LENS_ZERO, "loss", ts_join(path, dir, "n.npz")),
                 AG_ERR_RANGE);
    cr_assert(access(path, F_OK) != 0, "%s was written", path);
    cr_assert_eq(D.calls, 1, "nothing drawn");
    ts_rm_tree(dir);
}

Test(lens_report, patch_labels_an_encoders_positions_with_the_source) {
    char dir[256], path[512];
    ts_tmp_dir(dir, sizeof dir, "report");
    NnHookPoint pts[1] = {point("encoder.blocks.0.hook_resid_pre", NN_HOOK_ENCODER)};
    double values[3] = {0.5, 1, 3};
    LensSweep s = {.axes = LENS_BY_POS,
                   .n_points = 1,
                   .n_heads = 2,
                   .T = 3,
                   .points = pts,
                   .values = values,
                   .clean = 3,
                   .corrupted = 1};
    int ids[3] = {5, 6, 7}, src[3] = {8, 9, 10};
    memset(&D, 0, sizeof D);
    cr_assert_eq(lens_report_patch(&RP, &s, "loss", ids, src, ts_join(path, dir, "p.npz")), AG_OK,
                 "%s", ag_last_error());
    NpzFile *f;
    cr_assert_eq(npz_read(path, &f, NULL), AG_OK, "%s", ag_last_error());
    cr_assert(has_text(npz_find(f, "axes"), "point,position"));
    npz_free(f);
    cr_assert(D.rows == 1 && D.cols == 3);
    cr_assert(D.v[0] == -0.5 && D.v[1] == 0 && D.v[2] == 2, "the change from the corrupted run");
    cr_assert_str_eq(D.xl[0], "src8!");
    cr_assert_str_eq(D.yl[0], "encoder.blocks.0.hook_resid_pre");
    /* a decoder's (or a GPT's) points: the tokens; attribution: the estimate itself */
    pts[0] = point("decoder.blocks.0.hook_resid_pre", NN_HOOK_DECODER);
    s.attribution = 1;
    cr_assert_eq(lens_report_patch(&RP, &s, "loss", ids, src, path), AG_OK, "%s", ag_last_error());
    cr_assert_str_eq(D.xl[2], "tok7!");
    cr_assert(D.v[0] == 0.5 && D.v[2] == 3);
    cr_assert(strstr(D.title, "attribution patching: loss change"), "%s", D.title);
    ts_rm_tree(dir);
}

Test(lens_report, a_drawers_failure_is_returned_and_no_drawer_draws_nothing) {
    double v[1] = {1};
    memset(&D, 0, sizeof D);
    D.answer = RUN_PLOT_FAILED;
    cr_assert_eq(lens_report_heatmap(&RP, "x.npz", ".png", "t", v, 1, 1, lens_labels_numbers(1),
                                     lens_labels_numbers(1), 0),
                 RUN_PLOT_FAILED);
    cr_assert(strstr(ag_last_error(), "x.png: the drawer failed"), "%s", ag_last_error());
    LensReport none = {.prog = "test"};
    cr_assert_eq(lens_report_heatmap(&none, "x.npz", ".png", "t", v, 1, 1, NULL, NULL, 0),
                 RUN_PLOT_SKIPPED);
    cr_assert_eq(D.calls, 1);
}
