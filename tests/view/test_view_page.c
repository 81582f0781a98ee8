/* test_view_page.c: view_page (src/view/view_page.c), the document of a view command: the
 * title first, the body's parts, a run folder's curves, the page written only when every part
 * succeeded (a body's error and a missing run folder leave no file).
 * Not here: the writer's escapes and the tables (test_view.c), the commands (tests/view/
 * test_browser.sh). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "attograd.h"
#include "files.h"

static int body(ViewBuf *b, void *ctx) {
    view_raw(b, ",");
    view_key(b, "x");
    view_int(b, *(int *)ctx);
    return *(int *)ctx < 0 ? ag_fail(AG_ERR_ARG, "the body refused %d", *(int *)ctx) : AG_OK;
}

Test(view_page, the_title_the_body_and_the_runs_in_one_document) {
    char dir[256], path[512], csv[512];
    ts_tmp_dir(dir, sizeof dir, "viewpage");
    ts_write_text(ts_join(csv, dir, "log.csv"), "step,train_loss\n1,2.5\n");
    int x = 7;
    size_t bytes = 0;
    char *runs[1] = {dir};
    cr_assert_eq(view_page(ts_join(path, dir, "v.html"), "a<b", body, &x, NULL, runs, 1, &bytes),
                 AG_OK, "%s", ag_last_error());
    char *text = ts_read_text(path, NULL);
    const char *doc = "{\"title\":\"a\\u003Cb\",\"x\":7,\"runs\":[";
    cr_assert(strstr(text, doc), "%s", doc);
    cr_assert(strstr(text, "2.5"), "the run's row");
    cr_assert_eq(strlen(text), strlen(view_page_head) + bytes + strlen(view_page_tail));
    free(text);
    /* the body's error, a run folder without log.csv: returned, nothing written */
    x = -1;
    cr_assert_eq(view_page(ts_join(path, dir, "b.html"), "t", body, &x, NULL, NULL, 0, NULL),
                 AG_ERR_ARG);
    cr_assert(strstr(ag_last_error(), "the body refused -1"), "%s", ag_last_error());
    cr_assert(access(path, F_OK) != 0, "%s was written", path);
    char *none[1] = {ts_join(csv, dir, "none")};
    cr_assert_neq(view_page(path, "t", NULL, NULL, NULL, none, 1, NULL), AG_OK);
    cr_assert(access(path, F_OK) != 0, "%s was written", path);
    ts_rm_tree(dir);
}

Test(view_page, a_body_written_beforehand_is_the_same_as_one_written_by_the_callback) {
    char dir[64], a[512], b[512];
    ts_tmp_dir(dir, sizeof dir, "viewraw");
    int x = 7;
    ViewBuf pre = {0}, empty = {0};
    body(&pre, &x);
    cr_assert_eq(view_page(ts_join(a, dir, "a.html"), "t", body, &x, NULL, NULL, 0, NULL), AG_OK);
    cr_assert_eq(
        view_page(ts_join(b, dir, "b.html"), "t", view_body_raw, &pre, NULL, NULL, 0, NULL), AG_OK,
        "%s", ag_last_error());
    cr_assert(ts_same_file(a, b), "%s and %s differ", a, b);
    /* an empty body appends nothing */
    ViewBuf out = {0};
    view_raw(&out, "{");
    cr_assert_eq(view_body_raw(&out, &empty), AG_OK);
    cr_assert_str_eq(out.p, "{");
    view_buf_free(&out), view_buf_free(&pre);
    ts_rm_tree(dir);
}
