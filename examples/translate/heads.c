/* heads.c: how much each attention head matters, measured two ways over a data set (the valid
 * split by default):
 *  - masking: the head's gate set to 0 (its output removed before out_proj), the teacher-forced
 *    loss measured again, the gate restored; the importance is the loss increase;
 *  - gradient: Michel, Levy and Neubig 2019, "Are Sixteen Heads Really Better than One?": the
 *    gate xi_h multiplies head h's output, and I_h = E_x |d loss(x) / d xi_h| at xi = 1. The
 *    expectation is the mean over batches of |d (batch loss) / d gate| (the batch loss is the
 *    mean over its target tokens), then, as in the paper (section 4.1), each attention block's
 *    scores are divided by their L2 norm across its heads.
 * The blocks are in the order enc self 0..L-1, dec self 0..L-1, dec cross 0..L-1; the table and
 * a heatmap (rows: blocks, columns: heads, one panel for each measure) show the result.
 * Not here: the gates themselves (src/nn/attention.c, ag_head_gate), gnuplot (plot.c).
 * Read next: plot.c. */
#include "translate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *tr_block_kind_name(int kind) {
    return kind == TR_BLOCK_ENC_SELF   ? "enc self"
           : kind == TR_BLOCK_DEC_SELF ? "dec self"
                                       : "dec cross";
}

MultiHeadAttention *tr_block(Seq2Seq *m, int kind, int layer) {
    int n = kind == TR_BLOCK_ENC_SELF ? m->cfg.n_enc_layers : m->cfg.n_dec_layers;
    AG_CHECK(layer >= 0 && layer < n && kind >= TR_BLOCK_ENC_SELF && kind <= TR_BLOCK_DEC_CROSS,
             "tr_block: %s layer %d: the model has %d+%d layers", tr_block_kind_name(kind), layer,
             m->cfg.n_enc_layers, m->cfg.n_dec_layers);
    return kind == TR_BLOCK_ENC_SELF   ? &m->enc[layer].self_attn
           : kind == TR_BLOCK_DEC_SELF ? &m->dec[layer].self_attn
                                       : &m->dec[layer].multihead_attn;
}

static int n_pairs(const TxtPairSet *d, int limit) {
    return limit > 0 && limit < d->n ? limit : d->n;
}

double tr_data_loss(Seq2Seq *m, Tape *t, const TxtPairSet *d, int limit, int batch) {
    int n = n_pairs(d, limit);
    int *idx = tr_sorted_rows(d, n);
    TxtPairBatch b;
    memset(&b, 0, sizeof b);
    double sum = 0;
    long tokens = 0;
    for (int i0 = 0; i0 < n; i0 += batch) {
        int B = n - i0 < batch ? n - i0 : batch;
        txt_pair_batch_make(&b, d->pairs, idx + i0, B);
        sum += tr_batch_loss_sum(m, t, &b);
        tokens += b.n_tgt_tokens;
    }
    txt_pair_batch_free(&b);
    free(idx);
    return tokens ? sum / (double)tokens : 0;
}

/* Every dropout probability of the model (nn_seq2seq_dropouts) into saved, and set to 0: the
 * gradient pass measures the model as it translates. dropout_restore puts them back. */
static void dropout_off(Seq2Seq *m, double *saved) {
    double *p[NN_SEQ2SEQ_MAX_DROPOUTS];
    int n = nn_seq2seq_dropouts(m, p);
    for (int i = 0; i < n; i++) saved[i] = *p[i], *p[i] = 0;
}
static void dropout_restore(Seq2Seq *m, const double *saved) {
    double *p[NN_SEQ2SEQ_MAX_DROPOUTS];
    int n = nn_seq2seq_dropouts(m, p);
    for (int i = 0; i < n; i++) *p[i] = saved[i];
}

void tr_heads_free(TrHeadImportance *h) {
    free(h->loss_up);
    free(h->grad_raw);
    free(h->grad_score);
    memset(h, 0, sizeof *h);
}

int tr_head_importance(Translator *tr, const TxtPairSet *d, int limit, int batch,
                       TrHeadImportance *h, FILE *progress) {
    memset(h, 0, sizeof *h);
    Seq2Seq *m = &tr->model;
    int n = n_pairs(d, limit);
    if (n == 0) return ag_fail(AG_ERR_ARG, "%s: no sentence pairs", d->path);
    h->NH = m->cfg.layer.n_heads;
    for (int l = 0; l < m->cfg.n_enc_layers; l++) {
        h->kind[h->n_blocks] = TR_BLOCK_ENC_SELF;
        h->layer[h->n_blocks++] = l;
    }
    for (int k = TR_BLOCK_DEC_SELF; k <= TR_BLOCK_DEC_CROSS; k++)
        for (int l = 0; l < m->cfg.n_dec_layers; l++) {
            h->kind[h->n_blocks] = k;
            h->layer[h->n_blocks++] = l;
        }
    size_t cells = (size_t)h->n_blocks * h->NH;
    h->loss_up = ex_calloc(cells, sizeof(double));
    h->grad_raw = ex_calloc(cells, sizeof(double));
    h->grad_score = ex_calloc(cells, sizeof(double));
    h->n_pairs = n;
    /* (a) masking, in no-grad passes */
    h->base_loss = tr_data_loss(m, tr->tape, d, n, batch);
    if (!isfinite(h->base_loss)) { /* finite weights that overflow */
        int rc =
            ag_fail(AG_ERR_RANGE, "the loss on %s = %g: must be finite", d->path, h->base_loss);
        tr_heads_free(h);
        return ex_not_finite(rc, tr->path, NULL);
    }
    for (int b = 0; b < h->n_blocks; b++) {
        MultiHeadAttention *a = tr_block(m, h->kind[b], h->layer[b]);
        for (int k = 0; k < h->NH; k++) {
            Real keep = a->gate->data[k];
            a->gate->data[k] = 0;
            h->loss_up[(size_t)b * h->NH + k] =
                tr_data_loss(m, tr->tape, d, n, batch) - h->base_loss;
            a->gate->data[k] = keep;
        }
        if (progress) {
            fprintf(progress, "\rmasking heads: block %d/%d", b + 1, h->n_blocks);
            fflush(progress);
        }
    }
    if (progress) fprintf(progress, "\n");
    /* (b) gate gradients: one backward a batch, |gradient| summed, then the mean */
    MultiHeadAttention *blk[3 * NN_MAX_LAYERS];
    for (int b = 0; b < h->n_blocks; b++) {
        blk[b] = tr_block(m, h->kind[b], h->layer[b]);
        nn_mha_track_gates(blk[b], 1);
    }
    double saved[NN_SEQ2SEQ_MAX_DROPOUTS];
    dropout_off(m, saved);
    int *idx = tr_sorted_rows(d, n), prev = ag_no_grad(tr->tape, 0);
    TxtPairBatch bt;
    memset(&bt, 0, sizeof bt);
    for (int i0 = 0; i0 < n; i0 += batch) {
        int B = n - i0 < batch ? n - i0 : batch;
        txt_pair_batch_make(&bt, d->pairs, idx + i0, B);
        ag_tape_reset(tr->tape);
        for (int b = 0; b < h->n_blocks; b++) tensor_zero_grad(blk[b]->gate);
        Tensor *loss =
            nn_seq2seq_loss(tr->tape, m, bt.src, bt.S, bt.tgt_in, bt.tgt_out, B, bt.T, NULL);
        ag_backward(tr->tape, loss);
        for (int b = 0; b < h->n_blocks; b++)
            for (int k = 0; k < h->NH; k++)
                h->grad_raw[(size_t)b * h->NH + k] += fabs((double)blk[b]->gate->grad[k]);
        h->n_batches++;
    }
    ag_tape_reset(tr->tape);
    ag_no_grad(tr->tape, prev);
    dropout_restore(m, saved);
    txt_pair_batch_free(&bt);
    free(idx);
    for (int b = 0; b < h->n_blocks; b++) {
        tensor_zero_grad(blk[b]->gate);
        nn_mha_track_gates(blk[b], 0);
    }
    ag_params_zero_grad(&m->params); /* the weights' gradients came along: leave none behind */
    for (int b = 0; b < h->n_blocks; b++) {
        double norm = 0;
        for (int k = 0; k < h->NH; k++) {
            double *r = &h->grad_raw[(size_t)b * h->NH + k];
            *r /= h->n_batches;
            norm += *r * *r;
        }
        norm = sqrt(norm);
        for (int k = 0; k < h->NH; k++)
            h->grad_score[(size_t)b * h->NH + k] =
                norm > 0 ? h->grad_raw[(size_t)b * h->NH + k] / norm : 0;
    }
    return AG_OK;
}

void tr_heads_print(const TrHeadImportance *h, FILE *f, int tsv) {
    fprintf(f, tsv ? "%s\t%s\t%s\t%s\t%s\t%s\n" : "%-9s %5s %4s %13s %10s %10s\n", "block", "layer",
            "head", "loss_increase", "grad_score", "grad_raw");
    for (int b = 0; b < h->n_blocks; b++)
        for (int k = 0; k < h->NH; k++) {
            size_t i = (size_t)b * h->NH + k;
            fprintf(f,
                    tsv ? "%s\t%d\t%d\t%.6g\t%.6g\t%.6g\n" : "%-9s %5d %4d %13.5f %10.4f %10.3e\n",
                    tr_block_kind_name(h->kind[b]), h->layer[b], k, h->loss_up[i], h->grad_score[i],
                    h->grad_raw[i]);
        }
}

int tr_plot_heads(const TrHeadImportance *h, const char *png, const char *title) {
    int NB = h->n_blocks, NH = h->NH;
    int cell_w = NH <= 8 ? 64 : 40, cell_h = 30, left = 110, gap = 120, right = 100;
    int top = 80, bottom = 36;
    int pw = NH * cell_w, ph = NB * cell_h;
    int W = left + 2 * pw + gap + right, H = top + ph + bottom;
    if (W < 700) W = 700;
    char **rows = ex_calloc((size_t)NB, sizeof(char *)),
         **cols = ex_calloc((size_t)NH, sizeof(char *));
    for (int b = 0; b < NB; b++) {
        rows[b] = ex_calloc(32, 1);
        snprintf(rows[b], 32, "%s %d", tr_block_kind_name(h->kind[b]), h->layer[b]);
    }
    for (int k = 0; k < NH; k++) {
        cols[k] = ex_calloc(16, 1);
        snprintf(cols[k], 16, "%d", k);
    }
    float *up = ex_calloc((size_t)NB * NH, sizeof(float)),
          *gs = ex_calloc((size_t)NB * NH, sizeof(float));
    double lo = 0, hi = 0;
    for (size_t i = 0; i < (size_t)NB * NH; i++) {
        up[i] = (float)h->loss_up[i];
        gs[i] = (float)h->grad_score[i];
        if (h->loss_up[i] < lo) lo = h->loss_up[i];
        if (h->loss_up[i] > hi) hi = h->loss_up[i];
    }
    if (hi - lo < 1e-6) hi = lo + 1e-6;
    char *script = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&script, &len);
    run_gp_begin(f, W, H, 10);
    fprintf(f, "set multiplot\nset border lw 0.5\nset cbtics font ',8'\n");
    fprintf(f, "set label 1 ");
    run_gp_string(f, title ? title : "head importance");
    fprintf(f, " at screen 0.5, screen %.5f center font ',12'\n", 1 - 22.0 / H);
    fprintf(f, "set xlabel 'head' font ',9' offset 0,0.6\n");
    for (int panel = 0; panel < 2; panel++) {
        RunGpPanel p;
        memset(&p, 0, sizeof p);
        p.id = panel;
        p.v = panel ? gs : up;
        p.rows = NB;
        p.cols = NH;
        p.xlab = (const char *const *)cols;
        p.ylab = panel ? NULL : (const char *const *)rows;
        double x0 = left + panel * (pw + gap);
        p.x0 = x0 / W;
        p.x1 = (x0 + pw) / W;
        p.y1 = 1 - (double)top / H;
        p.y0 = 1 - (double)(top + ph) / H;
        p.lo = panel ? 0 : lo;
        p.hi = panel ? 1 : hi;
        p.title = panel ? "gradient score |dL/dgate| (L2-normalized per block)"
                        : "loss increase when the head is masked";
        p.colorbox = 1;
        p.cb_x = (x0 + pw + 12) / W;
        p.cb_w = 12.0 / W;
        p.values = 2;
        p.horizontal_xtics = 1;
        if (panel == 0)
            fprintf(f, "set palette defined (0 '#ffffff', 0.5 '#fc9272', 1 '#a50f15')\n");
        else
            fprintf(f, "set palette defined (0 '#ffffff', 0.5 '#9ecae1', 1 '#08519c')\n");
        run_gp_panel(f, &p);
        if (panel == 0) fprintf(f, "unset label 1\n");
    }
    fprintf(f, "unset multiplot\n");
    fclose(f);
    int rc = run_plot_script(script, png);
    free(script);
    for (int b = 0; b < NB; b++) free(rows[b]);
    for (int k = 0; k < NH; k++) free(cols[k]);
    free(rows);
    free(cols);
    free(up);
    free(gs);
    return rc;
}
