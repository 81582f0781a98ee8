/* test_view.c: the JSON writer and page writer of src/view. Strings escaped so that nothing in a
 * token can end the script block or break the JSON (markup, quotes, control characters, U+2028,
 * bytes that are not UTF-8: overlong forms, surrogates, cut sequences), RFC 4648's base64
 * vectors, the quantization, the causal layout of view_attention and its misuse, log.csv runs
 * read and refused, and the page written whole with the document in its JSON block.
 * Not here: the page in a browser (tests/view/browser.py, run by test_browser.sh). */
#include <criterion/criterion.h>
#include <math.h>
#include <signal.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attograd.h"
#include "expect_abort.h"
#include "files.h"

/* view_str of bytes[0..n), as a C string (malloc'd) */
static char *str_of(const void *bytes, size_t n) {
    ViewBuf b = {0};
    view_str(&b, bytes, n);
    return b.p;
}

static void expect_str(const char *in, size_t n, const char *want) {
    char *got = str_of(in, n);
    cr_assert_str_eq(got, want, "view_str of %zu bytes gives %s, not %s", n, got, want);
    free(got);
}

Test(view_str, markup_quotes_and_controls_cannot_break_out) {
    expect_str("</script>", 9, "\"\\u003C/script\\u003E\"");
    expect_str("a&b", 3, "\"a\\u0026b\"");
    expect_str("\"q\" \\", 5, "\"\\\"q\\\" \\\\\"");
    expect_str("a\nb\tc\r\x01\x7f", 8, "\"a\\u000Ab\\u0009c\\u000D\\u0001\\u007F\"");
    expect_str("\0x", 2, "\"\\u0000x\"");
    /* U+2028 and U+2029 (line separators: not allowed raw in older JavaScript) */
    expect_str("\xe2\x80\xa8\xe2\x80\xa9", 6, "\"\\u2028\\u2029\"");
}

Test(view_str, utf8_kept_and_invalid_bytes_shown_as_text) {
    expect_str("\xd7\xa9\xd7\x9c\xd7\x95\xd7\x9d", 8,
               "\"\xd7\xa9\xd7\x9c\xd7\x95\xd7\x9d\"");         /* Hebrew */
    expect_str("\xf0\x9f\x98\x80", 4, "\"\xf0\x9f\x98\x80\"");  /* U+1F600 */
    expect_str("\xd7", 1, "\"\\\\xD7\"");                       /* a lead byte alone */
    expect_str("\xa9x", 2, "\"\\\\xA9x\"");                     /* a continuation byte alone */
    expect_str("\xc0\xaf", 2, "\"\\\\xC0\\\\xAF\"");            /* overlong '/' */
    expect_str("\xed\xa0\x80", 3, "\"\\\\xED\\\\xA0\\\\x80\""); /* a surrogate */
    expect_str("\xf4\x90\x80\x80", 4, "\"\\\\xF4\\\\x90\\\\x80\\\\x80\""); /* above U+10FFFF */
    expect_str("\xe2\x80", 2, "\"\\\\xE2\\\\x80\"");                       /* cut short */
    expect_str("", 0, "\"\"");
}

Test(view_base64, rfc4648_vectors) {
    const char *in[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    const char *want[] = {"\"\"",         "\"Zg==\"",     "\"Zm8=\"",    "\"Zm9v\"",
                          "\"Zm9vYg==\"", "\"Zm9vYmE=\"", "\"Zm9vYmFy\""};
    for (int i = 0; i < 7; i++) {
        ViewBuf b = {0};
        view_base64(&b, (const uint8_t *)in[i], strlen(in[i]));
        cr_assert_str_eq(b.p ? b.p : "", want[i]);
        view_buf_free(&b);
    }
}

Test(view_num, numbers_and_non_finite_as_null) {
    ViewBuf b = {0};
    view_num(&b, 0.5);
    view_raw(&b, ",");
    view_num(&b, NAN);
    view_raw(&b, ",");
    view_num(&b, -INFINITY);
    view_raw(&b, ",");
    view_int(&b, -42);
    view_raw(&b, ",");
    view_num(&b, 123456789);
    cr_assert_str_eq(b.p, "0.5,null,null,-42,1.234568e+08");
    view_buf_free(&b);
}

Test(view_quantize, rounds_and_clamps) {
    cr_assert_eq(view_quantize(0), 0);
    cr_assert_eq(view_quantize(1), 255);
    cr_assert_eq(view_quantize(0.5), 128); /* 127.5 rounds away from zero */
    cr_assert_eq(view_quantize(1.0 / 255), 1);
    cr_assert_eq(view_quantize(-0.1), 0);
    cr_assert_eq(view_quantize(7), 255);
    cr_assert_eq(view_quantize(NAN), 0);
}

/* decodes the base64 string b.p ("...") */
static size_t unb64(const char *s, uint8_t *out) {
    static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t n = 0, len = strlen(s);
    cr_assert(len >= 2 && s[0] == '"' && s[len - 1] == '"');
    uint32_t v = 0;
    int bits = 0;
    for (size_t i = 1; i + 1 < len && s[i] != '='; i++) {
        v = v << 6 | (uint32_t)(strchr(A, s[i]) - A);
        bits += 6;
        if (bits >= 8) out[n++] = (uint8_t)(v >> (bits -= 8));
    }
    return n;
}

Test(view_attention, causal_rows_keep_the_triangle_per_head) {
    Arena *a = arena_new("t", 0);
    enum { NH = 2, T = 3 };
    Tensor *p = tensor_zeros(a, 4, (int[]){2, NH, T, T}, "p");
    for (size_t i = 0; i < p->size; i++) p->data[i] = (Real)((i % 7) / 6.0);
    ViewBuf b = {0};
    view_attention(&b, p, 1, 1);
    uint8_t q[64];
    size_t n = unb64(b.p, q), k = 0;
    cr_assert_eq(n, (size_t)NH * T * (T + 1) / 2);
    for (int h = 0; h < NH; h++)
        for (int i = 0; i < T; i++)
            for (int j = 0; j <= i; j++)
                cr_assert_eq(q[k++], view_quantize(p->data[(((size_t)1 * NH + h) * T + i) * T + j]),
                             "head %d row %d key %d", h, i, j);
    view_buf_free(&b);
    view_attention(&b, p, 0, 0); /* every key */
    cr_assert_eq(unb64(b.p, q), (size_t)NH * T * T);
    view_buf_free(&b);
    arena_free(a);
}

static void causal_not_square(void *ctx) {
    (void)ctx;
    Arena *a = arena_new("t", 0);
    ViewBuf b = {0};
    view_attention(&b, tensor_zeros(a, 4, (int[]){1, 2, 3, 4}, "p"), 0, 1);
}
static void row_out_of_range(void *ctx) {
    (void)ctx;
    Arena *a = arena_new("t", 0);
    ViewBuf b = {0};
    view_attention(&b, tensor_zeros(a, 4, (int[]){1, 2, 3, 3}, "p"), 1, 1);
}

Test(view_attention, misuse_aborts_naming_the_function_and_shape) {
    void (*fn[])(void *) = {causal_not_square, row_out_of_range};
    for (int i = 0; i < 2; i++) {
        Capture c;
        capture_run(fn[i], NULL, &c);
        cr_assert(capture_aborted(&c), "case %d did not abort", i);
        cr_assert(capture_has(&c, "view_attention") && capture_has(&c, "(1,2,3,"), "case %d: %s", i,
                  c.err);
    }
}

Test(view_runs, reads_log_csv_and_refuses_bad_rows) {
    char dir[256], path[512], sub[512];
    ts_tmp_dir(dir, sizeof dir, "view");
    ts_join(sub, dir, "a");
    cr_assert_eq(mkdir(sub, 0700), 0);
    ts_write_text(ts_join(path, sub, "log.csv"),
                  "step,train_loss,valid_loss\r\n10,2.5,\n20,2,1.5\n");
    ViewBuf b = {0};
    char *dirs[] = {sub};
    cr_assert_eq(view_runs(&b, dirs, 1), AG_OK, "%s", ag_last_error());
    char want[1024];
    snprintf(want, sizeof want,
             "\"runs\":[{\"name\":\"%s\",\"columns\":[\"step\",\"train_loss\",\"valid_loss\"],"
             "\"rows\":[[10,2.5,null],[20,2,1.5]]}]",
             sub);
    cr_assert_str_eq(b.p, want);
    view_buf_free(&b);
    const char *bad[] = {"step,loss\n10,x\n", "step,loss\n10,1,2\n", "", "step,loss\n1,0x\n"};
    const char *says[] = {"line 2: 'x' is not a number", "line 2 has 3 fields, the header 2",
                          "no header line", "'0x' is not a number"};
    for (int i = 0; i < 4; i++) {
        ts_write_text(path, bad[i]);
        cr_assert_eq(view_runs(&b, dirs, 1), AG_ERR_FORMAT, "case %d", i);
        cr_assert(strstr(ag_last_error(), says[i]) && strstr(ag_last_error(), path), "case %d: %s",
                  i, ag_last_error());
        view_buf_free(&b);
    }
    char *missing[] = {dir};
    cr_assert_eq(view_runs(&b, missing, 1), AG_ERR_IO);
    cr_assert(strstr(ag_last_error(), "log.csv"), "%s", ag_last_error());
    view_buf_free(&b);
    ts_rm_tree(dir);
}

Test(view_write_html, the_page_holds_the_document_in_its_json_block) {
    char dir[256], path[512];
    ts_tmp_dir(dir, sizeof dir, "view");
    ViewBuf b = {0};
    view_raw(&b, "{");
    view_key(&b, "title");
    view_str(&b, "</script><b>", 12);
    view_raw(&b, "}");
    cr_assert_eq(view_write_html(ts_join(path, dir, "v.html"), &b), AG_OK, "%s", ag_last_error());
    FILE *f = fopen(path, "rb");
    cr_assert(f);
    static char text[1 << 20];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    cr_assert_eq(n, strlen(view_page_head) + b.n + strlen(view_page_tail));
    const char *open = "<script type=\"application/json\" id=\"data\">\n";
    char *at = strstr(text, open);
    cr_assert(at && strncmp(at + strlen(open), b.p, b.n) == 0);
    cr_assert(strstr(text, "Content-Security-Policy") && strstr(text, "default-src 'none'"));
    cr_assert_null(strstr(text, "http://"), "the page names a URL");
    cr_assert_null(strstr(text, "https://"), "the page names a URL");
    /* a folder that does not exist: an error naming the path */
    cr_assert_eq(view_write_html(ts_join(path, dir, "no/v.html"), &b), AG_ERR_IO);
    cr_assert(strstr(ag_last_error(), "no/v.html"), "%s", ag_last_error());
    view_buf_free(&b);
    ts_rm_tree(dir);
}

/* an .npz at path with the entries fill adds */
static void write_npz(const char *path, void (*fill)(NpzWriter *w)) {
    NpzWriter *w = npz_writer_new();
    fill(w);
    cr_assert_eq(npz_write(w, path, 0, NULL), AG_OK, "%s", ag_last_error());
    npz_writer_free(w);
}
static const double V6[6] = {1, -2, 3, 0.5, NAN, 6};
static void detect_like(NpzWriter *w) {
    npz_add_f64(w, "scores", 3, (int64_t[]){2, 1, 3}, V6);
    npz_add_bytes(w, "kinds", "[\"a<b\",\"c\"]", 11);
}
/* attograd-translate detect's: encoder (kind, layer, head), decoder, cross_diagonal */
static const double V4[4] = {0.25, 0.5, 0.75, 1};
static void translate_detect_like(NpzWriter *w) {
    npz_add_f64(w, "encoder", 3, (int64_t[]){2, 1, 3}, V6);
    npz_add_f64(w, "decoder", 3, (int64_t[]){2, 1, 2}, V4);
    npz_add_f64(w, "cross_diagonal", 2, (int64_t[]){2, 2}, V4);
    npz_add_bytes(w, "kinds", "[\"a\",\"c\"]", 9);
}
static void encoder_alone(NpzWriter *w) {
    npz_add_f64(w, "encoder", 3, (int64_t[]){2, 1, 3}, V6);
    npz_add_bytes(w, "kinds", "[\"a\",\"c\"]", 9);
}
static void patch_like(NpzWriter *w) {
    npz_add_f64(w, "values", 3, (int64_t[]){1, 2, 3}, V6);
    npz_add_bytes(w, "axes", "point,head,position", 19);
    npz_add_bytes(w, "points", "[\"blocks.0.attn.hook_z\"]", 24);
}
static const double BASE = 0.5;
static void ablate_like(NpzWriter *w) {
    npz_add_f64(w, "values", 2, (int64_t[]){2, 3}, V6);
    npz_add_f64(w, "base", 0, NULL, &BASE);
    npz_add_bytes(w, "axes", "point,head", 10);
    npz_add_bytes(w, "metric", "loss", 4);
    npz_add_bytes(w, "points", "[\"a\",\"b\"]", 9);
}
static void names_short(NpzWriter *w) {
    npz_add_f64(w, "values", 2, (int64_t[]){2, 3}, V6);
    npz_add_bytes(w, "axes", "point,head", 10);
    npz_add_bytes(w, "points", "[\"x\"]", 5);
}
/* npz_write reads the data when it writes: not a compound literal of the fill function */
static const float Z6[6] = {0};
static void not_f64(NpzWriter *w) { npz_add_f32(w, "values", 2, (int64_t[]){2, 3}, Z6); }
static void neither(NpzWriter *w) { npz_add_f64(w, "w", 1, (int64_t[]){6}, V6); }

Test(view_tables, detect_patch_and_ablate_tables_and_what_is_refused) {
    char dir[256], path[512];
    ts_tmp_dir(dir, sizeof dir, "view");
    ts_join(path, dir, "t.npz");
    ViewBuf b = {0};
    write_npz(path, detect_like);
    cr_assert_eq(view_tables(&b, path), AG_OK, "%s", ag_last_error());
    cr_assert(strstr(b.p, "\"name\":\"t.npz: a\\u003Cb\"") &&
                  strstr(b.p, "\"rows\":[\"L0\"],\"cols\":[\"H0\",\"H1\",\"H2\"],"
                              "\"values\":[1,-2,3]}") &&
                  strstr(b.p, "\"values\":[0.5,null,6]}"),
              "%s", b.p);
    view_buf_free(&b);
    write_npz(path, translate_detect_like);
    cr_assert_eq(view_tables(&b, path), AG_OK, "%s", ag_last_error());
    cr_assert(strstr(b.p, "{\"name\":\"t.npz: encoder a\"") &&
                  strstr(b.p, "\"cols\":[\"H0\",\"H1\",\"H2\"],\"values\":[0.5,null,6]}") &&
                  strstr(b.p, "{\"name\":\"t.npz: decoder c\"") &&
                  strstr(b.p, "\"rows\":[\"L0\"],\"cols\":[\"H0\",\"H1\"],\"values\":[0.75,1]}") &&
                  strstr(b.p, "{\"name\":\"t.npz: cross-attention diagonal\"") &&
                  strstr(b.p, "\"rows\":[\"L0\",\"L1\"],\"cols\":[\"H0\",\"H1\"],"
                              "\"values\":[0.25,0.5,0.75,1]}"),
              "%s", b.p);
    view_buf_free(&b);
    write_npz(path, patch_like);
    cr_assert_eq(view_tables(&b, path), AG_OK, "%s", ag_last_error());
    cr_assert(strstr(b.p, "\"rows\":[\"blocks.0.attn.hook_z h0\",\"blocks.0.attn.hook_z h1\"],"
                          "\"cols\":[\"pos 0\",\"pos 1\",\"pos 2\"],"
                          "\"values\":[1,-2,3,0.5,null,6]}"),
              "%s", b.p);
    view_buf_free(&b);
    /* ablate's: the change from its base */
    write_npz(path, ablate_like);
    cr_assert_eq(view_tables(&b, path), AG_OK, "%s", ag_last_error());
    cr_assert(
        strstr(b.p, "\"title\":\"t.npz: change of loss from 0.5 (every part) by point,head\"") &&
            strstr(b.p, "\"values\":[0.5,-2.5,2.5,0,null,5.5]}"),
        "%s", b.p);
    view_buf_free(&b);
    void (*bad[])(NpzWriter *) = {names_short, not_f64, neither, encoder_alone};
    const char *says[] = {"'points' is not a JSON list of 2 names", "'values' is <f4, not float64",
                          "not a table of ablate, patch or detect", "'encoder' without 'decoder'"};
    for (int i = 0; i < 4; i++) {
        write_npz(path, bad[i]);
        cr_assert_eq(view_tables(&b, path), AG_ERR_FORMAT, "case %d", i);
        cr_assert(strstr(ag_last_error(), says[i]) && strstr(ag_last_error(), path), "case %d: %s",
                  i, ag_last_error());
        view_buf_free(&b);
    }
    ts_rm_tree(dir);
}

static const void *letter(const void *ctx, int id, size_t *len) {
    (void)ctx;
    *len = 1;
    return "abcdef" + id;
}

Test(view_top_k, highest_first_lower_id_first_among_ties_k_cut_to_v) {
    double p[5] = {0.1, 0.3, 0.1, 0.3, 0.2};
    ViewBuf b = {0};
    view_top_k(&b, p, 5, 4, letter, NULL);
    cr_assert_str_eq(b.p, "[[\"b\",0.3],[\"d\",0.3],[\"e\",0.2],[\"a\",0.1]]");
    view_buf_free(&b);
    view_top_k(&b, p, 2, 9, letter, NULL);
    cr_assert_str_eq(b.p, "[[\"b\",0.3],[\"a\",0.1]]");
    view_buf_free(&b);
    Real z[3] = {1, 2, 3};
    double q[3];
    view_softmax(z, 3, q);
    cr_assert_float_eq(q[0] + q[1] + q[2], 1.0, 1e-12);
    cr_assert_float_eq(q[2] / q[1], exp(1.0), 1e-6);
}

Test(view_nums, an_array_of_numbers_with_nulls) {
    ViewBuf b = {0};
    view_nums(&b, (const double[]){1.5, NAN, -2}, 3);
    view_raw(&b, ",");
    view_nums(&b, (const double[]){0}, 0);
    cr_assert_str_eq(b.p, "[1.5,null,-2],[]");
    view_buf_free(&b);
}

Test(view_field_str, key_and_value_escaped) {
    ViewBuf b = {0};
    view_field_str(&b, "na\"me", "</script>");
    cr_assert_str_eq(b.p, "\"na\\\"me\":\"\\u003C/script\\u003E\"");
    view_buf_free(&b);
}

static void plot_without_title(void *ctx) {
    (void)ctx;
    ViewBuf b = {0};
    view_plot(&b, &(ViewPlot){.name = "p", .xlabel = "x", .x = (const double[]){1}, .n = 1});
}

Test(view_plot, the_documented_fields_then_the_extra_ones) {
    ViewBuf b = {0};
    const double x[] = {1, 10}, y0[] = {0.5, NAN}, y1[] = {2, 3};
    view_plot(&b, &(ViewPlot){"loss", "a <title>", "step", 1, 0, x, 2,
                              (const char *[]){"train", "test"}, (const double *[]){y0, y1}, 2,
                              "\"ymin\":0"});
    view_raw(&b, ",");
    view_plot(&b, &(ViewPlot){"none", "t", "k", 0, 1, x, 0, NULL, NULL, 0, ""});
    cr_assert_str_eq(b.p, "{\"name\":\"loss\",\"title\":\"a \\u003Ctitle\\u003E\",\"xlabel\":"
                          "\"step\",\"logx\":true,\"logy\":false,\"x\":[1,10],\"series\":[{"
                          "\"name\":\"train\",\"y\":[0.5,null]},{\"name\":\"test\",\"y\":[2,3]}"
                          "],\"ymin\":0},{\"name\":\"none\",\"title\":\"t\",\"xlabel\":\"k\","
                          "\"logx\":false,\"logy\":true,\"x\":[],\"series\":[]}");
    view_buf_free(&b);
    Capture c;
    capture_run(plot_without_title, NULL, &c);
    cr_assert(capture_aborted(&c) && capture_has(&c, "view_plot"), "%s", c.err);
}

/* view_plot_png: the plots of a page as one PNG, the script beside it */
Test(view_plot, the_same_plots_draw_as_a_png_with_their_axes_and_ranges) {
    char dir[64], p[512];
    ts_tmp_dir(dir, sizeof dir, "view-png");
    const double x[] = {0, 10, 100}, y0[] = {3, 2, NAN}, y1[] = {0.1, 0.5, 1};
    const ViewPlot pl[] = {{"loss", "the loss", "step", 1, 1, x, 3,
                            (const char *[]){"train", "it's"}, (const double *[]){y0, y1}, 2, NULL},
                           {"acc", "accuracy", "step", 0, 0, x, 3, (const char *[]){"a"},
                            (const double *[]){y1}, 1, "\"ymin\":0,\"ymax\":1,\"bars\":true"}};
    setenv("AG_GNUPLOT", "/bin/true", 1); /* the script is written; nothing is drawn */
    cr_assert_eq(view_plot_png(ts_join(p, dir, "two.png"), pl, 2, 500, 400), RUN_PLOT_FAILED);
    unsetenv("AG_GNUPLOT");
    char *gp = ts_read_text(ts_join(p, dir, "two.gp"), NULL);
    cr_assert(strstr(gp, "size 500,400") && strstr(gp, "set multiplot layout 2,1") &&
                  strstr(gp, "$P0 << EOD\n10 2 0.5\n100 NaN 1\nEOD\n") &&
                  strstr(gp, "set logscale x\nset logscale y\nset yrange [*:*]") &&
                  strstr(gp, "$P0 u 1:3 w lp pt 7 ps 0.4 lw 2 t 'it''s'") &&
                  strstr(gp, "$P1 << EOD\n0 0.1\n10 0.5\n100 1\nEOD\n") &&
                  strstr(gp, "set yrange [0:1.02]") && strstr(gp, "$P1 u 1:2 w boxes t 'a'"),
              "%s", gp);
    free(gp);
    if (!run_gnuplot_available()) {
        ts_rm_tree(dir);
        cr_skip_test("gnuplot is not installed: nothing is drawn");
    }
    cr_assert_eq(view_plot_png(ts_join(p, dir, "two.png"), pl, 2, 500, 400), RUN_PLOT_DRAWN, "%s",
                 ag_last_error());
    struct stat st;
    cr_assert(stat(p, &st) == 0 && st.st_size > 0);
    ts_rm_tree(dir);
}

static void table_without_labels(void *ctx) {
    (void)ctx;
    ViewBuf b = {0};
    view_table(&b, &(ViewTable){"t", "t", NULL, NULL, 1, 1, (const double[]){1}});
}

Test(view_table, labels_then_the_values_row_major) {
    ViewBuf b = {0};
    view_table(&b, &(ViewTable){"norms", "a <b>", (const char *[]){"step 0", "step 10"},
                                (const char *[]){"1", "2*", "3"}, 2, 3,
                                (const double[]){1, 2, 3, 4, NAN, 6}});
    cr_assert_str_eq(b.p, "{\"name\":\"norms\",\"title\":\"a \\u003Cb\\u003E\",\"rows\":[\"step "
                          "0\",\"step 10\"],\"cols\":[\"1\",\"2*\",\"3\"],\"values\":[1,2,3,4,"
                          "null,6]}");
    view_buf_free(&b);
    Capture c;
    capture_run(table_without_labels, NULL, &c);
    cr_assert(capture_aborted(&c) && capture_has(&c, "view_table"), "%s", c.err);
}

/* view_plot_pngs: each picture into the folder, the drawn ones named, the others said */
Test(view_plot, pngs_into_a_folder_name_the_drawn_ones) {
    char dir[64], p[512], drawn[64] = "";
    ts_tmp_dir(dir, sizeof dir, "view-pngs");
    const double x[] = {0, 1}, y[] = {1, 2};
    const ViewPlot pl = {"a", "a", "x", 0, 0, x, 2, (const char *[]){"y"}, (const double *[]){y},
                         1,   NULL};
    const ViewPng png[] = {{"one.png", &pl, 1, 300, 200}, {"two.png", &pl, 1, 300, 200}};
    setenv("AG_GNUPLOT", "/nonexistent/gnuplot", 1);
    cr_assert_eq(view_plot_pngs(dir, png, 2, "prog", drawn, sizeof drawn), 0);
    cr_assert_str_eq(drawn, "");
    unsetenv("AG_GNUPLOT");
    if (!run_gnuplot_available()) {
        ts_rm_tree(dir);
        cr_skip_test("gnuplot is not installed: nothing is drawn");
    }
    cr_assert_eq(view_plot_pngs(dir, png, 2, "prog", drawn, sizeof drawn), 2, "%s",
                 ag_last_error());
    cr_assert_str_eq(drawn, ", one.png, two.png");
    cr_assert(access(ts_join(p, dir, "two.png"), F_OK) == 0 &&
              access(ts_join(p, dir, "one.gp"), F_OK) == 0);
    ts_rm_tree(dir);
}

Test(view_labels, prefix_and_value_or_index_in_one_block) {
    char **s = view_labels("step ", (const int64_t[]){0, 10, -3}, 3),
         **i = view_labels("", NULL, 2);
    cr_assert_str_eq(s[0], "step 0");
    cr_assert_str_eq(s[1], "step 10");
    cr_assert_str_eq(s[2], "step -3");
    cr_assert_str_eq(i[0], "0");
    cr_assert_str_eq(i[1], "1");
    strcat(i[1], "*"); /* writable, 32 bytes each */
    cr_assert_str_eq(i[1], "1*");
    free(s), free(i);
    char **none = view_labels("x", NULL, 0); /* no labels: an array to free all the same */
    free(none);
    char **cut = view_labels("a very long prefix that does not fit in 32 bytes ", NULL, 1);
    cr_assert_eq(strlen(cut[0]), 31);
    free(cut);
}

Test(view_drawn, appends_each_name_after_a_comma_cut_to_the_size) {
    char d[24] = "";
    view_drawn(d, sizeof d, "a.png");
    view_drawn(d, sizeof d, "page.html");
    cr_assert_str_eq(d, ", a.png, page.html");
    view_drawn(d, sizeof d, "more.png"); /* cut to fit, still a string */
    cr_assert_str_eq(d, ", a.png, page.html, mor");
    view_drawn(d, sizeof d, "x.png");
    cr_assert_str_eq(d, ", a.png, page.html, mor");
}

Test(view_plots, the_plots_tab_of_each_plot_and_the_integers) {
    const double x[] = {0, 1}, y[] = {1, 2};
    const ViewPlot pl[2] = {
        {"a", "a", "x", 0, 0, x, 2, (const char *[]){"y"}, (const double *[]){y}, 1, NULL},
        {"b", "b", "x", 1, 0, x, 2, (const char *[]){"y"}, (const double *[]){y}, 1,
         "\"bars\":true"}};
    ViewBuf b = {0}, want = {0};
    view_plots(&b, pl, 2);
    view_raw(&want, ",\"plots\":[");
    view_plot(&want, &pl[0]);
    view_raw(&want, ",");
    view_plot(&want, &pl[1]);
    view_raw(&want, "]");
    cr_assert_str_eq(b.p, want.p);
    view_buf_free(&b);
    view_plots(&b, pl, 0);
    cr_assert_str_eq(b.p, ",\"plots\":[]");
    view_buf_free(&b), view_buf_free(&want);
    view_ints(&b, (const int[]){5, -17, 0}, 3);
    view_ints(&b, (const int[]){1}, 0);
    cr_assert_str_eq(b.p, "[5,-17,0][]");
    view_buf_free(&b);
}
