/* heads.c: head importance by masking and by the gates' gradient over a program's batches, the
 * table, and the attention patterns of one input in bertviz's layout (heads.h).
 * Not here: the gates (../nn/attention.c), the pictures (../view/heads_plot.c).
 * Read next: ../view/heads_plot.c. */
#include "heads.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../io/npz.h"

int lens_heads_seq2seq(Seq2Seq *m, LensHeadBlock *b) {
    AG_CHECK_ARG(m);
    AG_CHECK_ARG(b);
    int n = 0;
    for (int l = 0; l < m->cfg.n_enc_layers; l++)
        b[n++] = (LensHeadBlock){"enc self", l, &m->enc[l].self_attn};
    for (int l = 0; l < m->cfg.n_dec_layers; l++)
        b[n++] = (LensHeadBlock){"dec self", l, &m->dec[l].self_attn};
    for (int l = 0; l < m->cfg.n_dec_layers; l++)
        b[n++] = (LensHeadBlock){"dec cross", l, &m->dec[l].multihead_attn};
    return n;
}

static void *xcalloc(size_t n, size_t size, const char *what) {
    void *p = calloc(n ? n : 1, size);
    AG_CHECK(p != NULL, "%s: out of memory (%zu x %zu bytes)", what, n, size);
    return p;
}

/* The loss over every batch of d (the mean over their tokens), without gradients */
static double data_loss(Tape *t, const LensHeadData *d) {
    int prev = ag_no_grad(t, 1);
    double sum = 0, tokens = 0;
    for (int i = 0; i < d->n_batches; i++) {
        double n = 0;
        ag_tape_reset(t);
        Tensor *l = d->loss(t, d->ctx, i, &n);
        sum += (double)l->data[0] * n;
        tokens += n;
    }
    ag_tape_reset(t);
    ag_no_grad(t, prev);
    return tokens > 0 ? sum / tokens : 0;
}

void lens_heads_free(LensHeadImportance *h) {
    AG_CHECK_ARG(h);
    free(h->loss_up);
    free(h->grad_raw);
    free(h->grad_score);
    memset(h, 0, sizeof *h);
}

int lens_head_importance(Tape *t, const LensHeadBlock *b, int nb, ParamList *params,
                         const LensHeadData *d, LensHeadImportance *h, FILE *progress) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(b);
    AG_CHECK_ARG(params);
    AG_CHECK_ARG(d);
    AG_CHECK_ARG(h);
    AG_CHECK(d->loss != NULL, "lens_head_importance: the data's loss callback is NULL");
    AG_CHECK(nb >= 1 && nb <= LENS_MAX_HEAD_BLOCKS, "lens_head_importance: %d blocks (1 to %d)", nb,
             LENS_MAX_HEAD_BLOCKS);
    memset(h, 0, sizeof *h);
    const char *name = d->name ? d->name : "the data";
    if (d->n_batches < 1) return ag_fail(AG_ERR_ARG, "%s: no batches", name);
    h->n_blocks = nb;
    h->NH = b[0].attn->n_heads;
    for (int i = 0; i < nb; i++) {
        AG_CHECK(b[i].attn && b[i].attn->n_heads == h->NH,
                 "lens_head_importance: block %d (%s %d): %d heads, block 0 has %d", i,
                 b[i].kind ? b[i].kind : "?", b[i].layer, b[i].attn ? b[i].attn->n_heads : 0,
                 h->NH);
        h->kind[i] = b[i].kind;
        h->layer[i] = b[i].layer;
    }
    size_t cells = (size_t)nb * h->NH;
    h->loss_up = xcalloc(cells, sizeof(double), "lens_head_importance");
    h->grad_raw = xcalloc(cells, sizeof(double), "lens_head_importance");
    h->grad_score = xcalloc(cells, sizeof(double), "lens_head_importance");
    /* (a) masking, in no-grad passes */
    h->base_loss = data_loss(t, d);
    if (!isfinite(h->base_loss)) { /* finite weights that overflow */
        double loss = h->base_loss;
        lens_heads_free(h);
        return ag_fail(AG_ERR_RANGE, "the loss on %s = %g: must be finite", name, loss);
    }
    for (int i = 0; i < nb; i++) {
        Tensor *gate = b[i].attn->gate;
        for (int k = 0; k < h->NH; k++) {
            Real keep = gate->data[k];
            gate->data[k] = 0;
            h->loss_up[(size_t)i * h->NH + k] = data_loss(t, d) - h->base_loss;
            gate->data[k] = keep;
        }
        if (progress) {
            fprintf(progress, "\rmasking heads: block %d/%d", i + 1, nb);
            fflush(progress);
        }
    }
    if (progress) fprintf(progress, "\n");
    /* (b) the gates' gradients: one backward a batch, |gradient| summed, then the mean */
    for (int i = 0; i < nb; i++) nn_mha_track_gates(b[i].attn, 1);
    int prev = ag_no_grad(t, 0);
    for (int j = 0; j < d->n_batches; j++) {
        double n = 0;
        ag_tape_reset(t);
        for (int i = 0; i < nb; i++) tensor_zero_grad(b[i].attn->gate);
        ag_backward(t, d->loss(t, d->ctx, j, &n));
        for (int i = 0; i < nb; i++)
            for (int k = 0; k < h->NH; k++)
                h->grad_raw[(size_t)i * h->NH + k] += fabs((double)b[i].attn->gate->grad[k]);
        h->n_batches++;
    }
    ag_tape_reset(t);
    ag_no_grad(t, prev);
    for (int i = 0; i < nb; i++) {
        tensor_zero_grad(b[i].attn->gate);
        nn_mha_track_gates(b[i].attn, 0);
    }
    ag_params_zero_grad(params); /* the weights' gradients came along: leave none behind */
    for (int i = 0; i < nb; i++) {
        double norm = 0, *r = h->grad_raw + (size_t)i * h->NH;
        for (int k = 0; k < h->NH; k++) {
            r[k] /= h->n_batches;
            norm += r[k] * r[k];
        }
        norm = sqrt(norm);
        for (int k = 0; k < h->NH; k++)
            h->grad_score[(size_t)i * h->NH + k] = norm > 0 ? r[k] / norm : 0;
    }
    return AG_OK;
}

void lens_heads_print(const LensHeadImportance *h, FILE *f, int tsv) {
    AG_CHECK_ARG(h);
    AG_CHECK_ARG(f);
    fprintf(f, tsv ? "%s\t%s\t%s\t%s\t%s\t%s\n" : "%-9s %5s %4s %13s %10s %10s\n", "block", "layer",
            "head", "loss_increase", "grad_score", "grad_raw");
    for (int b = 0; b < h->n_blocks; b++)
        for (int k = 0; k < h->NH; k++) {
            size_t i = (size_t)b * h->NH + k;
            fprintf(f,
                    tsv ? "%s\t%d\t%d\t%.6g\t%.6g\t%.6g\n" : "%-9s %5d %4d %13.5f %10.4f %10.3e\n",
                    h->kind[b] ? h->kind[b] : "", h->layer[b], k, h->loss_up[i], h->grad_score[i],
                    h->grad_raw[i]);
        }
}

int lens_heads_save_tsv(const LensHeadImportance *h, const char *path) {
    AG_CHECK_ARG(h);
    AG_CHECK_ARG(path);
    FILE *f = fopen(path, "w");
    if (!f) return ag_fail(AG_ERR_IO, "%s: cannot open for writing: %s", path, strerror(errno));
    lens_heads_print(h, f, 1);
    if (fclose(f) != 0) return ag_fail(AG_ERR_IO, "%s: %s", path, strerror(errno));
    return AG_OK;
}

/* ---- patterns ---- */

static char *xstrdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = xcalloc(n, 1, "lens_patterns_tokens");
    memcpy(d, s, n);
    return d;
}

int lens_patterns_tokens(LensPatterns *a, const char *name, const char *const *tok, int n) {
    AG_CHECK_ARG(a);
    AG_CHECK_ARG(name);
    AG_CHECK(n >= 0 && (tok || n == 0), "lens_patterns_tokens: %s: %d tokens", name, n);
    int cap = (int)(sizeof a->lists / sizeof a->lists[0]);
    AG_CHECK(a->n_lists < cap, "lens_patterns_tokens: %s: already %d token lists", name, cap);
    LensTokenList *l = &a->lists[a->n_lists];
    l->name = name;
    l->n = n;
    l->tok = xcalloc((size_t)n, sizeof(char *), "lens_patterns_tokens");
    for (int i = 0; i < n; i++) {
        AG_CHECK(tok[i] != NULL, "lens_patterns_tokens: %s: token %d is NULL", name, i);
        l->tok[i] = xstrdup(tok[i]);
    }
    return a->n_lists++;
}

void lens_patterns_add(LensPatterns *a, const char *name, const char *title, int layer,
                       const Tensor *probs, int q_list, int k_list) {
    AG_CHECK_ARG(a);
    AG_CHECK_ARG(name);
    AG_CHECK(a->n < LENS_MAX_HEAD_BLOCKS, "lens_patterns_add: %s: already %d blocks", name, a->n);
    AG_CHECK(q_list >= 0 && q_list < a->n_lists && k_list >= 0 && k_list < a->n_lists,
             "lens_patterns_add: %s: token lists %d and %d of %d", name, q_list, k_list,
             a->n_lists);
    int Tq = a->lists[q_list].n, Tk = a->lists[k_list].n;
    AG_CHECK(probs != NULL && probs->ndim == 4 && probs->shape[0] == 1 && probs->shape[2] == Tq &&
                 probs->shape[3] == Tk,
             "lens_patterns_add: %s: probabilities %s must be (1, NH, %d, %d)", name,
             probs ? tensor_shape_str(probs) : "NULL", Tq, Tk);
    LensPattern *p = &a->blocks[a->n++];
    snprintf(p->name, sizeof p->name, "%s", name);
    p->title = title;
    p->layer = layer;
    p->NH = probs->shape[1];
    p->Tq = Tq;
    p->Tk = Tk;
    p->q_list = q_list;
    p->k_list = k_list;
    p->p = xcalloc(probs->size, sizeof(float), "lens_patterns_add");
    for (size_t i = 0; i < probs->size; i++) p->p[i] = (float)probs->data[i];
}

void lens_patterns_free(LensPatterns *a) {
    AG_CHECK_ARG(a);
    for (int i = 0; i < a->n; i++) free(a->blocks[i].p);
    for (int l = 0; l < a->n_lists; l++) {
        for (int i = 0; i < a->lists[l].n; i++) free(a->lists[l].tok[i]);
        free(a->lists[l].tok);
    }
    memset(a, 0, sizeof *a);
}

/* tokens joined by '\n' (a token never holds a blank) */
static char *join_tokens(char *const *tok, int n, size_t *len) {
    size_t total = 0;
    for (int i = 0; i < n; i++) total += strlen(tok[i]) + 1;
    char *s = xcalloc(total + 1, 1, "lens_patterns_save"), *p = s;
    for (int i = 0; i < n; i++) {
        size_t k = strlen(tok[i]);
        memcpy(p, tok[i], k);
        p += k;
        if (i + 1 < n) *p++ = '\n';
    }
    *len = (size_t)(p - s);
    return s;
}

int lens_patterns_save(const LensPatterns *a, const char *path) {
    AG_CHECK_ARG(a);
    AG_CHECK_ARG(path);
    NpzWriter *w = npz_writer_new();
    for (int i = 0; i < a->n; i++) {
        const LensPattern *p = &a->blocks[i];
        int64_t shape[4] = {1, p->NH, p->Tq, p->Tk};
        npz_add_f32(w, p->name, 4, shape, p->p);
    }
    char *joined[4] = {NULL};
    for (int l = 0; l < a->n_lists; l++) {
        size_t n;
        joined[l] = join_tokens(a->lists[l].tok, a->lists[l].n, &n);
        npz_add_bytes(w, a->lists[l].name, joined[l], n);
    }
    int rc = npz_write(w, path, 6, NULL);
    npz_writer_free(w);
    for (int l = 0; l < a->n_lists; l++) free(joined[l]);
    return rc;
}
