/* view_page.c: the document every view command writes, assembled once: the title, what the
 * program appends about its model, the tables of an .npz and the curves of run folders, then
 * the page (view_write_html). attograd-gpt's and attograd-translate's view commands differ only
 * in their model's part (the body callback); view_body_raw is that callback for a body written
 * beforehand.
 * Not here: the JSON writer and the parts themselves (view.c). Read next: view.h. */
#include <string.h>

#include "view.h"

int view_page(const char *out, const char *title, ViewBodyFn body, void *ctx, const char *from,
              char *const *runs, int n_runs, size_t *bytes) {
    AG_CHECK_ARG(out);
    AG_CHECK_ARG(title);
    AG_CHECK(n_runs == 0 || runs, "view_page: %d run folders and runs NULL", n_runs);
    ViewBuf b = {0};
    view_raw(&b, "{");
    view_key(&b, "title");
    view_str(&b, title, strlen(title));
    int rc = body ? body(&b, ctx) : AG_OK;
    if (rc == AG_OK && from) {
        view_raw(&b, ",\"tables\":[");
        rc = view_tables(&b, from);
        view_raw(&b, "]");
    }
    if (rc == AG_OK && n_runs) {
        view_raw(&b, ",");
        rc = view_runs(&b, runs, n_runs);
    }
    if (rc == AG_OK) {
        view_raw(&b, "}");
        rc = view_write_html(out, &b);
    }
    if (bytes) *bytes = b.n;
    view_buf_free(&b);
    return rc;
}

int view_body_raw(ViewBuf *b, void *body) {
    AG_CHECK_ARG(b);
    AG_CHECK_ARG(body);
    const ViewBuf *text = body;
    if (text->p) view_raw(b, text->p);
    return AG_OK;
}
