/* test_view_model.c: the model's part of a view page (src/view/view_model.c): attention sets
 * row by row (queries, keys, patterns, scores) under their headers, the tokens strip's top-k,
 * losses and probabilities (NaN where nothing is predicted) with a measure of the program's own
 * after them, the view commands' common checks and the page's title.
 * Not here: the JSON writer's escapes and view_attention's bytes (test_view.c), view_page
 * (test_view_page.c), the commands' pages (test_browser.sh). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attograd.h"
#include "expect_abort.h"
#include "files.h"

static const void *letter(const void *ctx, int id, size_t *len) {
    *len = 1;
    return (const char *)ctx + id;
}

Test(view_attn_sets, rows_under_their_set_with_keys_patterns_and_scores) {
    Arena *a = arena_new("t", 0);
    Tensor *p = tensor_zeros(a, 4, (int[]){1, 1, 2, 2}, "p"); /* one head, 2 x 2, all ones */
    for (size_t i = 0; i < p->size; i++) p->data[i] = 1;
    const Tensor *probs[1] = {p};
    ViewAttnSet s[2] = {{.name = "self", .layers = 1, .heads = 1, .causal = 1},
                        {.name = "cross", .layers = 1, .heads = 1}};
    int ids[2] = {0, 1};
    ViewSide q = {ids, 2, letter, "ab"}, k = {ids, 2, letter, "xy"};
    double sc[LENS_N_HEAD_KINDS] = {0.5, 0.25, 1}, diag[1] = {0.75};
    view_attn_row(&s[0], &q, NULL, probs, 0, sc, LENS_N_HEAD_KINDS);
    view_attn_row(&s[0], &q, NULL, probs, 0, sc, LENS_N_HEAD_KINDS);
    view_attn_row(&s[1], &q, &k, probs, 0, diag, 0);
    ViewBuf b = {0};
    view_attn_sets(&b, s, 2);
    /* causal: 3 bytes 255 ("////"); every key: 4 bytes ("/////w==") */
    const char *row = "{\"q\":[\"a\",\"b\"],\"k\":null,\"p\":[\"////\"],\"scores\":{"
                      "\"previous_token\":[0.5],\"duplicate_token\":[0.25],\"induction\":[1]}}";
    char want[1024];
    snprintf(want, sizeof want,
             "\"attention\":[{\"name\":\"self\",\"layers\":1,\"heads\":1,\"causal\":true,"
             "\"prompts\":[%s,%s]},{\"name\":\"cross\",\"layers\":1,\"heads\":1,\"causal\":false,"
             "\"prompts\":[{\"q\":[\"a\",\"b\"],\"k\":[\"x\",\"y\"],\"p\":[\"/////w==\"],"
             "\"scores\":{\"diagonal\":[0.75]}}]}]",
             row, row);
    cr_assert_str_eq(b.p, want);
    cr_assert(!s[0].rows.p && !s[1].rows.p && s[0].n_rows == 0, "the rows are freed");
    view_buf_free(&b);
    arena_free(a);
}

static int more(ViewBuf *b, void *ctx) {
    view_raw(b, ",");
    view_measure(b, "mine", "logit", ctx, 1, 2, 0);
    return AG_OK;
}

Test(view_predict, top_k_loss_and_probability_of_each_target_then_the_programs_measures) {
    Real z[2 * 3] = {0, 0, 0, 0, 0, (Real)log(2.0)}; /* position 1: p = (1/4, 1/4, 1/2) */
    int shown[2] = {2, 0}, target[1] = {1};
    ViewPredict pr = {.B = 1, .T = 2, .top_k = 2};
    view_predict_row(&pr, 0, &(ViewSide){shown, 2, letter, "abc"}, z, 3, target, 1);
    cr_assert_float_eq(pr.prob[0], 1 / 3.0, 1e-12);
    cr_assert_float_eq(pr.loss[0], log(3.0), 1e-12);
    cr_assert(isnan(pr.prob[1]) && isnan(pr.loss[1]), "position 1 predicts nothing");
    ViewBuf b = {0};
    double mine[2] = {1, -1};
    cr_assert_eq(view_predict_json(&b, &pr, "top words", "word", 1, more, mine), AG_OK);
    const char *want =
        "\"tokens\":{\"top_label\":\"top words\",\"prompts\":[{\"tok\":[\"c\",\"a\"],\"top\":"
        "[[[\"a\",0.3333333],[\"b\",0.3333333]],[[\"c\",0.5],[\"a\",0.25]]]}],\"measures\":["
        "{\"name\":\"loss of this word (nats)\",\"kind\":\"loss\",\"values\":[[null,1.098612]]},"
        "{\"name\":\"probability of this word\",\"kind\":\"prob\",\"values\":[[null,0.3333333]]},"
        "{\"name\":\"mine\",\"kind\":\"logit\",\"values\":[[1,-1]]}]}";
    cr_assert_str_eq(b.p, want);
    view_buf_free(&b);
    view_predict_free(&pr);
    cr_assert(!pr.loss && !pr.prob && !pr.rows.p, "freed");
    view_predict_free(NULL);
}

static void too_many_targets(void *ctx) {
    (void)ctx;
    Real z[2] = {0, 0};
    int ids[1] = {0};
    ViewPredict pr = {.B = 1, .T = 1, .top_k = 1};
    view_predict_row(&pr, 0, &(ViewSide){ids, 1, letter, "ab"}, z, 2, ids, 2);
}

Test(view_predict, a_shape_mismatch_aborts_naming_the_function) {
    Capture c;
    capture_run(too_many_targets, NULL, &c);
    cr_assert(capture_aborted(&c), "did not abort");
    cr_assert(capture_has(&c, "view_predict_row") && capture_has(&c, "2 targets for T 1"), "%s",
              c.err);
}

Test(view_cmd, the_common_checks_name_the_flag_and_the_page_takes_its_title) {
    char *pos[1] = {"dir"};
    cr_assert_eq(view_cmd_check(NULL, 0, pos, 0), AG_ERR_ARG);
    cr_assert(strstr(ag_last_error(), "--out FILE.html is required"), "%s", ag_last_error());
    cr_assert_eq(view_cmd_check("x.html", 0, pos, 1), AG_ERR_ARG);
    cr_assert(strstr(ag_last_error(), "'dir': an argument without a flag"), "%s", ag_last_error());
    cr_assert_eq(view_cmd_check("x.html", 1, pos, 0), AG_ERR_ARG);
    cr_assert(strstr(ag_last_error(), "--runs: give the run folders"), "%s", ag_last_error());
    cr_assert_eq(view_cmd_check("x.html", 1, pos, 1), AG_OK);
    cr_assert_eq(view_cmd_check("x.html", 0, pos, 0), AG_OK);
    char dir[256], path[512], csv[512];
    ts_tmp_dir(dir, sizeof dir, "viewcmd");
    ts_write_text(ts_join(csv, dir, "log.csv"), "step,train_loss\n1,2.5\n");
    char *runs[1] = {dir};
    /* no checkpoint: titled "runs", with the run folders only when runs is given */
    cr_assert_eq(view_cmd_page(ts_join(path, dir, "v.html"), NULL, more, NULL, NULL, runs, 1, 1),
                 AG_OK, "%s", ag_last_error());
    char *text = ts_read_text(path, NULL);
    cr_assert(strstr(text, "{\"title\":\"runs\",\"runs\":["), "the title and the runs");
    free(text);
    cr_assert_eq(view_cmd_page(path, "m.npz", NULL, NULL, NULL, runs, 0, 1), AG_OK);
    text = ts_read_text(path, NULL);
    cr_assert(strstr(text, "{\"title\":\"m.npz\"}"), "the checkpoint's title, no runs");
    free(text);
    ts_rm_tree(dir);
}
