/* view_model.c: the model's part of a view command's page, written once for any model: the
 * attention sets (each block's patterns and detector scores, row by row), the tokens strip
 * (each token's loss and probability, the top-k predictions) and the command's common checks
 * and page. A program runs its model and hands each row's patterns and logits here; what it
 * runs, and any measure of its own (gpt's logit lens), stay in the program.
 * Not here: the JSON writer and the page (view.c, view_page.c). Read next: view.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "view.h"

void view_tokens(ViewBuf *b, const ViewSide *s) {
    AG_CHECK_ARG(b);
    AG_CHECK_ARG(s);
    AG_CHECK(s->n == 0 || (s->ids && s->text), "view_tokens: %d tokens without ids or text", s->n);
    view_raw(b, "[");
    for (int i = 0; i < s->n; i++) {
        size_t len;
        const void *t = s->text(s->ctx, s->ids[i], &len);
        if (i) view_raw(b, ",");
        view_str(b, t, len);
    }
    view_raw(b, "]");
}

void view_attn_row(ViewAttnSet *s, const ViewSide *q, const ViewSide *k, const Tensor *const *probs,
                   int b, const double *sc, int K) {
    AG_CHECK_ARG(s);
    AG_CHECK_ARG(q);
    AG_CHECK_ARG(probs);
    AG_CHECK_ARG(sc);
    view_raw(&s->rows, s->n_rows++ ? ",{\"q\":" : "{\"q\":");
    view_tokens(&s->rows, q);
    view_raw(&s->rows, ",\"k\":");
    if (k)
        view_tokens(&s->rows, k);
    else
        view_raw(&s->rows, "null");
    view_raw(&s->rows, ",\"p\":["); /* one base64 string per layer */
    for (int l = 0; l < s->layers; l++) {
        if (l) view_raw(&s->rows, ",");
        view_attention(&s->rows, probs[l], b, s->causal);
    }
    view_raw(&s->rows, "],");
    view_scores(&s->rows, sc, K, s->layers, s->heads);
    view_raw(&s->rows, "}");
}

void view_attn_sets(ViewBuf *b, ViewAttnSet *sets, int n) {
    AG_CHECK_ARG(b);
    AG_CHECK(n == 0 || sets, "view_attn_sets: %d sets and sets NULL", n);
    view_key(b, "attention");
    view_raw(b, "[");
    for (int s = 0; s < n; s++) {
        view_raw(b, s ? ",{" : "{");
        view_field_str(b, "name", sets[s].name);
        view_raw(b, ",\"layers\":");
        view_int(b, sets[s].layers);
        view_raw(b, ",\"heads\":");
        view_int(b, sets[s].heads);
        view_raw(b, sets[s].causal ? ",\"causal\":true,\"prompts\":["
                                   : ",\"causal\":false,\"prompts\":[");
        if (sets[s].rows.p) view_raw(b, sets[s].rows.p);
        view_raw(b, "]}");
        view_buf_free(&sets[s].rows);
        sets[s].n_rows = 0;
    }
    view_raw(b, "]");
}

void view_predict_row(ViewPredict *pr, int row, const ViewSide *shown, const Real *logits, int V,
                      const int *target, int n_target) {
    AG_CHECK_ARG(pr);
    AG_CHECK_ARG(shown);
    AG_CHECK_ARG(logits);
    AG_CHECK(row >= 0 && row < pr->B && shown->n == pr->T && n_target <= pr->T && V > 0 &&
                 (n_target <= 0 || target),
             "view_predict_row: row %d of B %d, %d tokens shown and %d targets for T %d, V %d", row,
             pr->B, shown->n, n_target, pr->T, V);
    if (!pr->loss) {
        pr->loss = malloc((size_t)pr->B * pr->T * sizeof(double));
        pr->prob = malloc((size_t)pr->B * pr->T * sizeof(double));
        AG_CHECK(pr->loss && pr->prob, "view_predict_row: out of memory for (%d, %d)", pr->B,
                 pr->T);
    }
    double *p = malloc((size_t)V * sizeof(double));
    AG_CHECK(p, "view_predict_row: out of memory for %d probabilities", V);
    view_raw(&pr->rows, pr->n_rows++ ? ",{\"tok\":" : "{\"tok\":");
    view_tokens(&pr->rows, shown);
    view_raw(&pr->rows, ",\"top\":[");
    for (int i = 0; i < pr->T; i++) {
        view_softmax(logits + (size_t)i * V, V, p);
        size_t at = (size_t)row * pr->T + i;
        pr->prob[at] = i < n_target ? p[target[i]] : NAN;
        pr->loss[at] = i < n_target ? -log(p[target[i]]) : NAN;
        if (i) view_raw(&pr->rows, ",");
        view_top_k(&pr->rows, p, V, pr->top_k, shown->text, shown->ctx);
    }
    view_raw(&pr->rows, "]}");
    free(p);
}

int view_predict_json(ViewBuf *b, ViewPredict *pr, const char *top_label, const char *unit,
                      int shift, ViewBodyFn more, void *ctx) {
    AG_CHECK_ARG(b);
    AG_CHECK_ARG(pr);
    AG_CHECK_ARG(unit);
    AG_CHECK(pr->loss, "view_predict_json: no row (view_predict_row)");
    char name[96];
    view_key(b, "tokens");
    view_raw(b, "{");
    if (top_label) {
        view_field_str(b, "top_label", top_label);
        view_raw(b, ",");
    }
    view_raw(b, "\"prompts\":[");
    view_raw(b, pr->rows.p);
    view_raw(b, "],\"measures\":[");
    snprintf(name, sizeof name, "loss of this %s (nats)", unit);
    view_measure(b, name, "loss", pr->loss, pr->B, pr->T, shift);
    view_raw(b, ",");
    snprintf(name, sizeof name, "probability of this %s", unit);
    view_measure(b, name, "prob", pr->prob, pr->B, pr->T, shift);
    int rc = more ? more(b, ctx) : AG_OK;
    view_raw(b, "]}");
    return rc;
}

void view_predict_free(ViewPredict *pr) {
    if (!pr) return;
    view_buf_free(&pr->rows);
    free(pr->loss), free(pr->prob);
    pr->loss = pr->prob = NULL;
    pr->n_rows = 0;
}

int view_cmd_check(const char *out, int runs, char *const *pos, int npos) {
    if (!out) return ag_fail(AG_ERR_ARG, "--out FILE.html is required");
    if (npos && !runs)
        return ag_fail(AG_ERR_ARG, "'%s': an argument without a flag (run folders follow --runs)",
                       pos[0]);
    if (runs && !npos) return ag_fail(AG_ERR_ARG, "--runs: give the run folders after the flags");
    return AG_OK;
}

int view_cmd_page(const char *out, const char *ckpt, ViewBodyFn body, void *ctx, const char *from,
                  char *const *pos, int runs, int npos) {
    AG_CHECK_ARG(out);
    size_t bytes = 0;
    const char *title = ckpt ? ckpt : from ? from : "runs";
    int rc = view_page(out, title, ckpt ? body : NULL, ctx, from, pos, runs ? npos : 0, &bytes);
    if (rc == AG_OK) printf("view: %s (%.1f MB)\n", out, (double)bytes / 1e6);
    return rc;
}
