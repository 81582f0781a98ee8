/* plot.c: one plot of the page's Plots tab as JSON (view_plot, view.h): named curves over one x
 * axis. Not here: drawing it (page.html's buildPlots), the other parts of the document
 * (view.c). Read next: page.html. */
#include "view.h"

void view_plot(ViewBuf *b, const ViewPlot *p) {
    AG_CHECK_ARG(b);
    AG_CHECK_ARG(p);
    AG_CHECK(p->name && p->title && p->xlabel && p->x && p->n >= 0 && p->ns >= 0 &&
                 (p->ns == 0 || (p->names && p->ys)),
             "view_plot: a plot needs its name, title, xlabel and x, n >= 0 (%d), and names "
             "and ys for its %d series",
             p->n, p->ns);
    view_raw(b, "{");
    view_field_str(b, "name", p->name);
    view_raw(b, ",");
    view_field_str(b, "title", p->title);
    view_raw(b, ",");
    view_field_str(b, "xlabel", p->xlabel);
    view_raw(b, p->logx ? ",\"logx\":true" : ",\"logx\":false");
    view_raw(b, p->logy ? ",\"logy\":true,\"x\":" : ",\"logy\":false,\"x\":");
    view_nums(b, p->x, (size_t)p->n);
    view_raw(b, ",\"series\":[");
    for (int s = 0; s < p->ns; s++) {
        AG_CHECK(p->names[s] && p->ys[s], "view_plot: %s: series %d has no name or values", p->name,
                 s);
        view_raw(b, s ? ",{" : "{");
        view_field_str(b, "name", p->names[s]);
        view_raw(b, ",\"y\":");
        view_nums(b, p->ys[s], (size_t)p->n);
        view_raw(b, "}");
    }
    view_raw(b, "]");
    if (p->extra && *p->extra) view_raw(b, ","), view_raw(b, p->extra);
    view_raw(b, "}");
}
