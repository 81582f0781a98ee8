/* test_heads_plot.c: the pictures of head importance and of a layer's attention patterns
 * (src/view/heads_plot.c): with gnuplot a PNG and its script, which names every block's row
 * and cuts a long caption; without gnuplot a clear "skipped" and no file; a layer without
 * blocks aborts.
 * Not here: the numbers (tests/lens/test_heads.c), the program's pictures
 * (tests/examples/test_translate_viz.c). */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "attograd.h"
#include "files.h"

/* two blocks of layer 0 and one of layer 1 over 3 and 2 tokens */
static void patterns(LensPatterns *ps, Arena *a) {
    memset(ps, 0, sizeof *ps);
    const char *s[] = {"a", "bb", "<eos>"}, *d[] = {"<bos>", "x"};
    int e = lens_patterns_tokens(ps, "encoder_tokens", s, 3);
    int t = lens_patterns_tokens(ps, "decoder_tokens", d, 2);
    Tensor *p = tensor_new4(a, 1, 2, 3, 3, "p"), *c = tensor_new4(a, 1, 2, 2, 3, "c");
    tensor_fill(p, 1.0 / 3);
    tensor_fill(c, 1.0 / 3);
    lens_patterns_add(ps, "encoder.layers.0.self_attn", "encoder self-attention", 0, p, e, e);
    lens_patterns_add(ps, "decoder.layers.0.multihead_attn", "decoder cross-attention", 0, c, t, e);
    lens_patterns_add(ps, "encoder.layers.1.self_attn", "encoder self-attention", 1, p, e, e);
}

static int exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

Test(view_heads_plot, draws_both_pictures_with_gnuplot) {
    if (!run_gnuplot_available())
        cr_skip_test("gnuplot is not installed (scripts/deps.sh gnuplot-nox)");
    char dir[64], png[512], gp[512];
    ts_tmp_dir(dir, sizeof dir, "hplot");
    Arena *a = arena_new("t", 0);
    LensPatterns ps;
    patterns(&ps, a);
    char caption[400];
    memset(caption, 'w', sizeof caption - 1);
    caption[sizeof caption - 1] = 0;
    cr_assert_eq(view_patterns_png(&ps, 0, caption, ts_join(png, dir, "layer0.png")),
                 RUN_PLOT_DRAWN, "%s", ag_last_error());
    cr_assert(exists(png));
    char *script = ts_read_text(ts_join(gp, dir, "layer0.gp"), NULL);
    cr_assert(strstr(script, "encoder self-attention") && strstr(script, "decoder cross-attention"),
              "%s", script);
    cr_assert(strstr(script, "layer 0 attention") && strstr(script, "www...'"), "%s", script);
    free(script);
    LensHeadImportance h;
    memset(&h, 0, sizeof h);
    double up[4] = {0.5, -0.1, 0.2, 0}, s[4] = {0.98, 0.2, 1, 0};
    h.n_blocks = 2;
    h.NH = 2;
    h.kind[0] = "attn";
    h.kind[1] = "attn";
    h.layer[1] = 1;
    h.loss_up = up;
    h.grad_score = h.grad_raw = s;
    cr_assert_eq(view_heads_png(&h, ts_join(png, dir, "heads.png"), NULL), RUN_PLOT_DRAWN, "%s",
                 ag_last_error());
    script = ts_read_text(ts_join(gp, dir, "heads.gp"), NULL);
    cr_assert(strstr(script, "'attn 1'") && strstr(script, "head importance"), "%s", script);
    free(script);
    lens_patterns_free(&ps);
    arena_free(a);
    ts_rm_tree(dir);
}

Test(view_heads_plot, says_skipped_without_gnuplot) {
    setenv("AG_GNUPLOT", "/nonexistent/gnuplot", 1);
    char dir[64], png[512];
    ts_tmp_dir(dir, sizeof dir, "hplot");
    Arena *a = arena_new("t", 0);
    LensPatterns ps;
    patterns(&ps, a);
    cr_assert_eq(view_patterns_png(&ps, 1, NULL, ts_join(png, dir, "layer1.png")),
                 RUN_PLOT_SKIPPED);
    cr_assert(strstr(ag_last_error(), "gnuplot not found"), "%s", ag_last_error());
    cr_assert(!exists(png));
    lens_patterns_free(&ps);
    arena_free(a);
    ts_rm_tree(dir);
}

Test(view_heads_plot, aborts_on_a_layer_without_blocks, .signal = SIGABRT) {
    Arena *a = arena_new("t", 0);
    LensPatterns ps;
    patterns(&ps, a);
    view_patterns_png(&ps, 2, NULL, "x.png");
}

/* view_grid_png: the panels in order, each titled, one colour bar; the drawn list */
Test(view_heads_plot, a_grid_of_heatmaps_with_its_titles_and_one_colour_bar) {
    char dir[64], p[512], drawn[64] = "";
    ts_tmp_dir(dir, sizeof dir, "hgrid");
    const float v[4][6] = {{0, 1, 0, 1, 0, 1}, {1, 0, 1, 0, 1, 0}, {0.5f}, {0.25f}};
    const float *const panels[] = {v[0], v[1], v[2], v[3]};
    const char *const titles[] = {"A before", "B before", "A after", "B after"};
    ViewGrid g = {panels, titles, 2, 2, 2, 3, 100, 1};
    setenv("AG_GNUPLOT", "/nonexistent/gnuplot", 1);
    cr_assert_eq(view_grid_png(dir, "grid.png", &g, "prog", drawn, sizeof drawn), 0);
    cr_assert_str_eq(drawn, "");
    cr_assert(!exists(ts_join(p, dir, "grid.png")));
    unsetenv("AG_GNUPLOT");
    if (!run_gnuplot_available()) {
        ts_rm_tree(dir);
        cr_skip_test("gnuplot is not installed (scripts/deps.sh gnuplot-nox)");
    }
    cr_assert_eq(view_grid_png(dir, "grid.png", &g, "prog", drawn, sizeof drawn), 1, "%s",
                 ag_last_error());
    cr_assert_str_eq(drawn, ", grid.png");
    cr_assert(exists(ts_join(p, dir, "grid.png")));
    char *script = ts_read_text(ts_join(p, dir, "grid.gp"), NULL);
    const char *at = script;
    for (int i = 0; i < 4; i++) { /* in order: row 0's columns, then row 1's */
        char want[64];
        snprintf(want, sizeof want, "$M%d << EOD", i);
        cr_assert((at = strstr(at, want)), "%s missing or out of order: %s", want, script);
        snprintf(want, sizeof want, "set title '%s'", titles[i]);
        cr_assert((at = strstr(at, want)), "%s missing or out of order: %s", want, script);
    }
    cr_assert(strstr(script, "0.5 0 0\n0 0 0\n") && strstr(script, "set cbrange [0:1]"), "%s",
              script);
    int bars = 0;
    for (const char *s = script; (s = strstr(s, "set colorbox user")); s++) bars++;
    cr_assert_eq(bars, 2, "a colour bar beside the last column of each row: %d", bars);
    free(script);
    ts_rm_tree(dir);
}

Test(view_heads_plot, a_grid_without_panels_aborts, .signal = SIGABRT) {
    view_grid_png("d", "x.png", &(ViewGrid){.n_rows = 1, .n_cols = 1, .cell = 100}, "p", NULL, 0);
}
