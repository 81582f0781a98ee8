/* view.h: interactive views in one self-contained HTML file. A program gathers what it wants to
 * show (attention patterns, per-token losses and predictions, tables, training curves) into a
 * JSON document with the writer below, and view_write_html wraps it in the page: the JSON in a
 * <script type="application/json"> block, the page's JavaScript and CSS inline (page.html,
 * embedded as page.c), no request to the network (a Content-Security-Policy forbids any), so it
 * opens from file:// anywhere, offline.
 * Escaping: every string goes through view_str, which writes valid JSON that cannot end the
 * script block: '<', '>' and '&' as \u003c, \u003e, \u0026, control characters as \u00XX,
 * U+2028 and U+2029 escaped, and each byte that is not part of valid UTF-8 as the text "\xNN"
 * (so a byte-level token shows which byte it is). The page puts strings into the DOM as text
 * (textContent), never as markup.
 * Attention patterns are stored quantized: each probability as one byte round(p * 255), only
 * the causal triangle (j <= i) for a causal pattern, base64 in a JSON string; the page draws
 * them on canvas. A 12-layer x 12-head model over 128 tokens takes about 1.6 MB.
 * The JSON the page reads (each part optional; docs/view.md describes it):
 *   {"title": str, "attention": [ATT...], "tokens": TOK, "tables": [TAB...], "runs": [RUN...],
 *    "plots": [PLOT...], "token_sep": str (what joins tokens into a prompt's text in the
 *    selectors: " " for word-level tokens; absent: "", bytes and characters)}
 * Not here: running a model (the programs' view commands, examples/gpt/view.c and
 * examples/translate/view.c, hand view_model.c each row). Read next: view.c, view_page.c,
 * view_model.c, page.html. */
#ifndef ATTOGRAD_VIEW_VIEW_H
#define ATTOGRAD_VIEW_VIEW_H

#include <stddef.h>
#include <stdint.h>

#include "../tensor/tensor.h"

/* A growing text buffer (the JSON document); zero-initialise, free with view_buf_free (NULL: a
 * no-op). Appending aborts when out of memory; a NULL pointer argument aborts naming it. */
typedef struct ViewBuf {
    char *p;
    size_t n, cap;
} ViewBuf;
void view_buf_free(ViewBuf *b);
/* appends text as it is (JSON punctuation: "{", ",", "]") */
void view_raw(ViewBuf *b, const char *text);
/* appends bytes[0..n) as a JSON string, escaped as above */
void view_str(ViewBuf *b, const void *bytes, size_t n);
/* appends "key": (key escaped as view_str) */
void view_key(ViewBuf *b, const char *key);
/* appends "key":"s" (both escaped as view_str; s ends at its NUL) */
void view_field_str(ViewBuf *b, const char *key, const char *s);
/* appends a number with 7 significant digits; a NaN or infinity as null */
void view_num(ViewBuf *b, double v);
/* appends an integer */
void view_int(ViewBuf *b, long long v);
/* appends s[0..n) as a base64 JSON string */
void view_base64(ViewBuf *b, const uint8_t *s, size_t n);
/* a probability as one byte: round(p * 255), p clamped to [0, 1] (NaN: 0) */
uint8_t view_quantize(double p);

/* Appends the quantized attention patterns of batch row b of probs (B, NH, Tq, Tk) as one
 * base64 string: for each head h, row i: keys 0..i when causal (then Tq == Tk), else 0..Tk-1.
 * Aborts naming the function and the shape when probs is not 4-D, b is out of range, or
 * causal and Tq != Tk. */
void view_attention(ViewBuf *out, const Tensor *probs, int b, int causal);

/* p[0..V): the softmax of z[0..V) (in double, the maximum subtracted first) */
void view_softmax(const Real *z, int V, double *p);
/* Appends the k most probable of p[0..V) as [[text, p], ...] (highest first, the lower id first
 * among ties; k is cut to V), text(ctx, id, &len) giving each id's bytes */
typedef const void *(*ViewTokenText)(const void *ctx, int id, size_t *len);
void view_top_k(ViewBuf *b, const double *p, int V, int k, ViewTokenText text, const void *ctx);

/* Appends one measure of the tokens page, {"name": name, "kind": kind, "values": [B rows of T]}:
 * token i of row b gets v[b * T + i - shift] (v (B, T); null for i < shift or a NaN). kind
 * "prob" (colored on [0, 1]), "loss" (on [0, the largest]) or "logit" (signed: blue negative,
 * red positive, on the largest magnitude). The page's selector groups the measures by the
 * name's text before ": ". */
void view_measure(ViewBuf *b, const char *name, const char *kind, const double *v, int B, int T,
                  int shift);

/* Appends "scores": {...} of an attention set's prompt: for each of K head kinds (K =
 * LENS_N_HEAD_KINDS: "previous_token", ...) the list of sc (K, L, NH), kind-major; K 0: one
 * "diagonal" list of sc (L, NH) (a cross-attention's, lens_detect_diagonal) */
void view_scores(ViewBuf *b, const double *sc, int K, int L, int NH);

/* Appends "runs": [...] from each dirs[i]/log.csv (a header of column names, then rows of
 * numbers, an empty field for a value not logged on that row: the run loop's CSV). AG_OK, or an
 * error naming the file, the line and the reason (not a number, fields unlike the header's,
 * over 64 MiB); the buffer then holds a partial document, to be thrown away. */
int view_runs(ViewBuf *b, char *const *dirs, int n);

/* Appends the tables of path, an .npz of attograd-gpt's or attograd-translate's ablate or patch
 * ("values" (point, head | position) or (point, head, position), "points" the names, "axes",
 * "metric"): one table; or of detect ("scores" (kind, layer, head), "kinds"): a table a kind;
 * or of attograd-translate's detect ("encoder", "decoder" (kind, layer, head), "kinds",
 * "cross_diagonal" (layer, head)): a table a side and kind, and the cross-attention's diagonal.
 * Each {"name", "title", "rows", "cols", "values"}, separated by commas (the caller writes
 * "tables": [ and ]). AG_OK, or an error naming the path and the reason (not such a file, an
 * entry of another type or shape). */
int view_tables(ViewBuf *b, const char *path);

/* Appends v[0..n) as a JSON array of numbers ([1.5,null,...]: view_num's) */
void view_nums(ViewBuf *b, const double *v, size_t n);
/* Appends v[0..n) as a JSON array of integers ([5,17]) */
void view_ints(ViewBuf *b, const int *v, size_t n);

/* One plot of the page's Plots tab (docs/view.md): ns curves ys[s][0..n), named names[s], over
 * x[0..n), on a logarithmic x or y axis when logx, logy; extra: more fields of the plot as JSON
 * ("\"ymin\":0,\"ymax\":1", bars and marks), or NULL */
typedef struct ViewPlot {
    const char *name, *title, *xlabel;
    int logx, logy;
    const double *x;
    int n;
    const char *const *names;
    const double *const *ys;
    int ns;
    const char *extra;
} ViewPlot;
/* Appends p as {"name", "title", "xlabel", "logx", "logy", "x", "series": [{"name", "y"}...]}
 * and extra's fields (plot.c). Aborts naming the function when a field but extra is NULL. */
void view_plot(ViewBuf *b, const ViewPlot *p);
/* Appends the page's Plots tab: ,"plots":[p[0], ..., p[n - 1]] (view_plot each) */
void view_plots(ViewBuf *b, const ViewPlot *p, int n);
/* Draws plots[0..n) one above the other into png (width x height pixels) with gnuplot
 * (run_plot_script: the script kept as NAME.gp): each its title, xlabel, log axes, its curves
 * as lines with points, the y range of extra's "ymin" and "ymax", boxes for "bars":true.
 * RUN_PLOT_DRAWN, RUN_PLOT_SKIPPED (no gnuplot) or RUN_PLOT_FAILED; ag_last_error says why. */
int view_plot_png(const char *png, const ViewPlot *plots, int n, int width, int height);
/* One PNG of plots[0..n) (view_plot_png) named name in a folder, width x height pixels */
typedef struct ViewPng {
    const char *name;
    const ViewPlot *plots;
    int n, width, height;
} ViewPng;
/* Draws pngs[0..n) into dir; a picture not drawn is said on stderr as "prog: <why>" (no
 * gnuplot, gnuplot's complaint). Appends ", NAME" to drawn (a string of size bytes; NULL: none)
 * for each picture drawn; returns their number. */
int view_plot_pngs(const char *dir, const ViewPng *pngs, int n, const char *prog, char *drawn,
                   size_t size);

/* One table of the Tables tab (docs/view.md): values (n_rows, n_cols), a NaN shown empty,
 * with row and column labels rows[0..n_rows), cols[0..n_cols) */
typedef struct ViewTable {
    const char *name, *title;
    const char *const *rows, *const *cols;
    int n_rows, n_cols;
    const double *values;
} ViewTable;
/* Appends t as {"name", "title", "rows", "cols", "values"} (plot.c). Aborts naming the function
 * when a field or a label is NULL. */
void view_table(ViewBuf *b, const ViewTable *t);
/* The labels "<prefix><v[i]>" (v NULL: "<prefix><i>") of n rows or columns of a table or a
 * picture, each in 32 bytes (cut to fit; writable), in one block: free the array alone */
char **view_labels(const char *prefix, const int64_t *v, int n);
/* Appends ", name" to drawn (a string of size bytes, cut to fit): the list of what a program
 * wrote that it prints (view_plot_pngs' drawn) */
void view_drawn(char *drawn, size_t size, const char *name);

/* Writes the page with the JSON document data (a complete JSON object, written with the
 * functions above) to path, replacing it (a temporary file renamed over it: src/io/file.h).
 * AG_OK, or AG_ERR_IO naming the path and the reason. */
int view_write_html(const char *path, const ViewBuf *data);

/* The document of a view command, written as a page: {"title": title, then what body(b, ctx)
 * appends (its parts, each after a comma: ",\"attention\":[...]"; body NULL: none), "tables"
 * of the .npz from (view_tables; NULL: none), "runs" of the folders runs[0..n_runs)
 * (view_runs)} into out (view_write_html). *bytes (bytes may be NULL): the document's size.
 * AG_OK, or the first error (body's, view_tables', view_runs', the file's; nothing written). */
typedef int (*ViewBodyFn)(ViewBuf *b, void *ctx);
int view_page(const char *out, const char *title, ViewBodyFn body, void *ctx, const char *from,
              char *const *runs, int n_runs, size_t *bytes);
/* The ViewBodyFn of a body written beforehand: appends the text of the ViewBuf body (its parts,
 * each after a comma; nothing when it is empty). AG_OK. */
int view_body_raw(ViewBuf *b, void *body);

/* ---- the model's part of a view command (view_model.c), for any model ---- */
/* A row's tokens and how to show them: text(ctx, ids[i], &len) gives token i's bytes */
typedef struct ViewSide {
    const int *ids;
    int n;
    ViewTokenText text;
    const void *ctx;
} ViewSide;
/* appends s's tokens' texts as a JSON list of strings */
void view_tokens(ViewBuf *b, const ViewSide *s);

/* One attention set of the page (zero rows and n_rows): its name, layers x heads, causal (the
 * patterns stored as view_attention's triangle); the rows' prompts gather in rows */
typedef struct ViewAttnSet {
    const char *name;
    int layers, heads, causal;
    ViewBuf rows;
    int n_rows;
} ViewAttnSet;
/* Appends one row's prompt {"q", "k", "p", "scores"} to s: the queries' texts q, the keys' k
 * (NULL: "k":null, the queries are the keys), batch row b of each layer's probs[l] (B, NH, Tq,
 * Tk) (view_attention), the scores sc (K, layers, heads) of view_scores (K 0: a diagonal) */
void view_attn_row(ViewAttnSet *s, const ViewSide *q, const ViewSide *k, const Tensor *const *probs,
                   int b, const double *sc, int K);
/* Appends "attention": [{"name", "layers", "heads", "causal", "prompts"}...] of sets[0..n)
 * and frees their rows */
void view_attn_sets(ViewBuf *b, ViewAttnSet *sets, int n);

/* The tokens strip (zero all but B, T and top_k): each shown token with the model's top_k
 * predictions at its position, and the loss and probability of each position's target */
typedef struct ViewPredict {
    int B, T, top_k;
    ViewBuf rows;
    int n_rows;
    double *loss, *prob; /* (B, T), malloc'd by the first row; NaN where nothing is predicted */
} ViewPredict;
/* Row row (in order): shown (T tokens; its text also names the top-k), logits (T, V) of the
 * row; position i predicts target[i] for i < n_target (NaN after). Aborts on a shape mismatch. */
void view_predict_row(ViewPredict *pr, int row, const ViewSide *shown, const Real *logits, int V,
                      const int *target, int n_target);
/* Appends "tokens": {"top_label" (NULL: none), "prompts", "measures": ["loss of this UNIT
 * (nats)", "probability of this UNIT" (view_measure's shift: token i gets position i - shift's
 * value), then what more(b, ctx) appends (each measure after a comma; NULL: nothing)]}.
 * more's status (AG_OK without more). */
int view_predict_json(ViewBuf *b, ViewPredict *pr, const char *top_label, const char *unit,
                      int shift, ViewBodyFn more, void *ctx);
void view_predict_free(ViewPredict *pr); /* rows, loss, prob freed; NULL: a no-op */

/* A view command's common checks: --out given; arguments without a flag only after --runs
 * (runs: the switch), and some when it is. AG_OK, or AG_ERR_ARG naming the flag. */
int view_cmd_check(const char *out, int runs, char *const *pos, int npos);
/* A view command's page: view_page titled ckpt (else from, else "runs"), body only with a
 * ckpt, the run folders pos[0..npos) when runs; prints "view: OUT (N MB)". view_page's rc. */
int view_cmd_page(const char *out, const char *ckpt, ViewBodyFn body, void *ctx, const char *from,
                  char *const *pos, int runs, int npos);

/* the page, before and after the JSON document (page.c, generated from page.html) */
extern const char view_page_head[], view_page_tail[];

#endif
