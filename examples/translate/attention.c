/* attention.c: where the model looks, for one sentence. The sentence is translated greedily,
 * then one teacher-forced no-grad forward of (sentence, translation) leaves every attention
 * block's probabilities in its MultiHeadAttention.last_probs; they are copied out (TrAttention),
 * saved as an .npz in bertviz's layout (one (1, NH, q, k) array per block, the tokens as text),
 * and drawn as one PNG per layer: a grid with a row per block (encoder self-attention, decoder
 * self-attention, decoder cross-attention) and a column per head, queries down, keys across.
 * Not here: the forward itself (decode.c, tr_forward_pair), gnuplot (plot.c), the command line
 * (cli.c). Read next: heads.c. */
#include "translate.h"

#include <stdlib.h>
#include <string.h>

static char *xstrdup(const char *s) {
    char *d = ex_calloc(strlen(s) + 1, 1);
    memcpy(d, s, strlen(s) + 1);
    return d;
}

/* probs (1, NH, Tq, Tk) -> a float copy */
static float *copy_probs(const Tensor *p, int NH, int Tq, int Tk, const char *what) {
    AG_CHECK(p != NULL && p->ndim == 4 && p->shape[0] == 1 && p->shape[1] == NH &&
                 p->shape[2] == Tq && p->shape[3] == Tk,
             "tr_attention: %s: last_probs %s must be (1,%d,%d,%d)", what,
             p ? tensor_shape_str(p) : "NULL", NH, Tq, Tk);
    float *d = ex_calloc(p->size, sizeof(float));
    for (size_t i = 0; i < p->size; i++) d[i] = (float)p->data[i];
    return d;
}

int tr_attention_collect(Translator *tr, const char *sentence, const char *target, TrAttention *a,
                         FILE *warn) {
    memset(a, 0, sizeof *a);
    const Seq2SeqConfig *c = &tr->model.cfg;
    int L = c->max_len;
    int *src = ex_calloc((size_t)L, sizeof(int)), *tgt = ex_calloc((size_t)L, sizeof(int));
    int S =
        txt_vocab_tokenize(&tr->src, sentence, src, L - 1, &a->n_unk, warn, TR_PROG " attention: ");
    if (S == 0) {
        free(src);
        free(tgt);
        return ag_fail(AG_ERR_ARG, "the sentence has no words");
    }
    S = tr_cut_words(S, L - 1, warn, TR_PROG " attention: ");
    int T;
    if (target) {
        int n_unk = 0;
        T = txt_vocab_tokenize(&tr->tgt, target, tgt, L - 1, &n_unk, warn,
                               TR_PROG " attention: target: ");
        if (T > L - 1) T = L - 1;
    } else {
        T = tr_translate_ids(tr, src, S, 1, 0, tgt, L - 1);
    }
    int rc = T < 0 ? T : ex_tensor_finite(tr_forward_pair(tr, src, S, tgt, T), "logits", NULL);
    if (rc != AG_OK) {
        if (T >= 0) ex_not_finite(rc, tr->path, tr->tape); /* the pair's own forward */
        free(src);
        free(tgt);
        return rc;
    }
    a->n_enc = c->n_enc_layers;
    a->n_dec = c->n_dec_layers;
    a->NH = c->layer.n_heads;
    a->S = S + 1;
    a->T = T + 1;
    a->src_tok = ex_calloc((size_t)a->S, sizeof(char *));
    a->dec_tok = ex_calloc((size_t)a->T, sizeof(char *));
    for (int i = 0; i < S; i++) a->src_tok[i] = xstrdup(txt_vocab_word(&tr->src, src[i]));
    a->src_tok[S] = xstrdup(txt_vocab_word(&tr->src, TXT_EOS));
    a->dec_tok[0] = xstrdup(txt_vocab_word(&tr->tgt, TXT_BOS));
    for (int i = 0; i < T; i++) a->dec_tok[i + 1] = xstrdup(txt_vocab_word(&tr->tgt, tgt[i]));
    a->translation = tr_text(&tr->tgt, tgt, T);
    a->source = tr_text(&tr->src, src, S);
    for (int l = 0; l < a->n_enc; l++)
        a->enc_self[l] = copy_probs(tr->model.enc[l].self_attn.last_probs, a->NH, a->S, a->S,
                                    "encoder self-attention");
    for (int l = 0; l < a->n_dec; l++) {
        a->dec_self[l] = copy_probs(tr->model.dec[l].self_attn.last_probs, a->NH, a->T, a->T,
                                    "decoder self-attention");
        a->cross[l] = copy_probs(tr->model.dec[l].multihead_attn.last_probs, a->NH, a->T, a->S,
                                 "decoder cross-attention");
    }
    free(src);
    free(tgt);
    return AG_OK;
}

void tr_attention_free(TrAttention *a) {
    for (int i = 0; a->src_tok && i < a->S; i++) free(a->src_tok[i]);
    for (int i = 0; a->dec_tok && i < a->T; i++) free(a->dec_tok[i]);
    free(a->src_tok);
    free(a->dec_tok);
    for (int l = 0; l < NN_MAX_LAYERS; l++) {
        free(a->enc_self[l]);
        free(a->dec_self[l]);
        free(a->cross[l]);
    }
    free(a->source);
    free(a->translation);
    memset(a, 0, sizeof *a);
}

/* tokens joined by '\n' (a token never holds a blank) */
static char *join_tokens(char *const *tok, int n, size_t *len) {
    size_t total = 0;
    for (int i = 0; i < n; i++) total += strlen(tok[i]) + 1;
    char *s = ex_calloc(total + 1, 1), *p = s;
    for (int i = 0; i < n; i++) {
        size_t k = strlen(tok[i]);
        memcpy(p, tok[i], k);
        p += k;
        if (i + 1 < n) *p++ = '\n';
    }
    *len = (size_t)(p - s);
    return s;
}

int tr_attention_save_npz(const TrAttention *a, const char *path) {
    NpzWriter *w = npz_writer_new();
    char name[128];
    int64_t enc_shape[4] = {1, a->NH, a->S, a->S}, dec_shape[4] = {1, a->NH, a->T, a->T},
            cross_shape[4] = {1, a->NH, a->T, a->S};
    for (int l = 0; l < a->n_enc; l++) {
        snprintf(name, sizeof name, "encoder.layers.%d.self_attn", l);
        npz_add_f32(w, name, 4, enc_shape, a->enc_self[l]);
    }
    for (int l = 0; l < a->n_dec; l++) {
        snprintf(name, sizeof name, "decoder.layers.%d.self_attn", l);
        npz_add_f32(w, name, 4, dec_shape, a->dec_self[l]);
        snprintf(name, sizeof name, "decoder.layers.%d.multihead_attn", l);
        npz_add_f32(w, name, 4, cross_shape, a->cross[l]);
    }
    size_t n_src, n_dec;
    char *src = join_tokens(a->src_tok, a->S, &n_src), *dec = join_tokens(a->dec_tok, a->T, &n_dec);
    npz_add_bytes(w, "encoder_tokens", src, n_src);
    npz_add_bytes(w, "decoder_tokens", dec, n_dec);
    int rc = npz_write(w, path, 6, NULL);
    npz_writer_free(w);
    free(src);
    free(dec);
    return rc;
}

/* ---- one layer's grid ---- */

static int max_label(char *const *tok, int n) {
    int m = 1;
    for (int i = 0; i < n; i++)
        if ((int)strlen(tok[i]) > m) m = (int)strlen(tok[i]);
    return m;
}

int tr_plot_attention_layer(const TrAttention *a, int layer, const char *png) {
    enum { ENC, DEC, CROSS };
    int kinds[3], n_rows = 0;
    if (layer < a->n_enc) kinds[n_rows++] = ENC;
    if (layer < a->n_dec) {
        kinds[n_rows++] = DEC;
        kinds[n_rows++] = CROSS;
    }
    AG_CHECK(n_rows > 0, "tr_plot_attention_layer: layer %d: the model has %d+%d layers", layer,
             a->n_enc, a->n_dec);
    /* in pixels: square cells; tick labels of about CH pixels a character (8 pt) */
    const double CH = 6.5;
    int n_max = a->S > a->T ? a->S : a->T, NH = a->NH;
    int cell = 340 / n_max;
    if (cell > 30) cell = 30;
    if (cell < 12) cell = 12;
    if (NH * n_max * cell > 2000) cell = 2000 / (NH * n_max) > 8 ? 2000 / (NH * n_max) : 8;
    int lab_src = max_label(a->src_tok, a->S), lab_dec = max_label(a->dec_tok, a->T);
    int lab_y = lab_src > lab_dec ? lab_src : lab_dec;
    int wmax = n_max * cell, gap = 22;
    int left = 48 + (int)(CH * lab_y), right = 90, top = 78, title_h = 30;
    int W = left + NH * wmax + (NH - 1) * gap + right;
    if (W < 640) W = 640;
    int H = top + 12;
    int row_h[3], row_w[3], row_xl[3];
    for (int r = 0; r < n_rows; r++) {
        int rows = kinds[r] == ENC ? a->S : a->T, cols = kinds[r] == DEC ? a->T : a->S;
        row_h[r] = rows * cell;
        row_w[r] = cols * cell;
        row_xl[r] = 18 + (int)(CH * (kinds[r] == DEC ? lab_dec : lab_src));
        H += title_h + row_h[r] + row_xl[r];
    }
    char *script = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&script, &len);
    run_gp_begin(f, W, H, 10);
    fprintf(f, "set palette defined (0 '#ffffff', 0.25 '#c6dbef', 0.5 '#6baed6', 0.75 "
               "'#2171b5', 1 '#08306b')\n");
    fprintf(f, "set cbtics 0.2 font ',8'\nset border lw 0.5\n");
    fprintf(f, "set multiplot\n");
    char buf[256];
    snprintf(buf, sizeof buf, "layer %d attention, every head (rows: queries, columns: keys)",
             layer);
    fprintf(f, "set label 1 ");
    run_gp_string(f, buf);
    fprintf(f, " at screen 0.5, screen %.5f center font ',12'\n", 1 - 22.0 / H);
    /* the sentences: long ones are cut (the axes carry every token) */
    char *line = ex_calloc(strlen(a->source) + strlen(a->translation) + 32, 1);
    sprintf(line, "%s  ->  %s", a->source, a->translation);
    if (strlen(line) > (size_t)(W / 7)) strcpy(line + W / 7 - 3, "...");
    fprintf(f, "set label 2 ");
    run_gp_string(f, line);
    fprintf(f, " at screen 0.5, screen %.5f center font ',10'\n", 1 - 46.0 / H);
    free(line);
    int y = top, id = 0;
    const char *row_name[3] = {"encoder self-attention", "decoder self-attention",
                               "decoder cross-attention"};
    for (int r = 0; r < n_rows; r++) {
        int k = kinds[r];
        y += title_h;
        for (int h = 0; h < NH; h++) {
            RunGpPanel p;
            memset(&p, 0, sizeof p);
            p.id = id++;
            p.v = k == ENC   ? a->enc_self[layer] + (size_t)h * a->S * a->S
                  : k == DEC ? a->dec_self[layer] + (size_t)h * a->T * a->T
                             : a->cross[layer] + (size_t)h * a->T * a->S;
            p.rows = k == ENC ? a->S : a->T;
            p.cols = k == DEC ? a->T : a->S;
            p.xlab = (const char *const *)(k == DEC ? a->dec_tok : a->src_tok);
            p.ylab = h == 0 ? (const char *const *)(k == ENC ? a->src_tok : a->dec_tok) : NULL;
            double x0 = left + h * (wmax + gap);
            p.x0 = x0 / W;
            p.x1 = (x0 + row_w[r]) / W;
            p.y1 = 1 - (double)y / H;
            p.y0 = 1 - (double)(y + row_h[r]) / H;
            p.lo = 0;
            p.hi = 1;
            snprintf(buf, sizeof buf, "head %d", h);
            p.title = buf;
            p.colorbox = h == NH - 1;
            p.cb_x = (double)(W - right + 24) / W;
            p.cb_w = 14.0 / W;
            if (h == 0) {
                fprintf(f, "set ylabel ");
                run_gp_string(f, row_name[k]);
                fprintf(f, " font ',10'\n");
            } else {
                fprintf(f, "unset ylabel\n");
            }
            run_gp_panel(f, &p);
            if (r == 0 && h == 0) fprintf(f, "unset label 1\nunset label 2\n");
        }
        y += row_h[r] + row_xl[r];
    }
    fprintf(f, "unset multiplot\n");
    fclose(f);
    int rc = run_plot_script(script, png);
    free(script);
    return rc;
}
