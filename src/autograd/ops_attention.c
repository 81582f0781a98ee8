/* ops_attention.c: fused scaled dot-product attention and the per-head gate; each constructor
 * followed by its backward. Attention saves its probabilities P (before dropout): backward
 * needs only P, the inputs, the mask (copied into the step arena) and the dropout key, as the
 * softmax backward needs only the softmax output. The probabilities handed out through *probs
 * are for inspection: they are not on the tape, so no gradient flows back through them.
 * ag_attention_cols is the same op on heads that sit side by side in (B, T, C) projections: the
 * kernel reads them through strides, so no split or merge of heads is copied. ag_attention_rows
 * reads such projections packed to some rows of the batch (row maps) and computes only those.
 * Not here: the loops (../tensor/k_attention_ref.c defines them; k_attention.c is the fast one).
 * Next: ops_layernorm.c. */
#include <limits.h>
#include <string.h>

#include "ops_internal.h"

static Real *grad_if(Tensor *t) { return t->requires_grad ? t->grad : NULL; }

/* q, k, v are not NULL, have ndim dimensions (layout says which), and k, v the same shape. */
static void check_qkv(const char *op, const Tensor *q, const Tensor *k, const Tensor *v, int ndim,
                      const char *layout) {
    AG_CHECK(q != NULL && k != NULL && v != NULL, "%s: tensor argument is NULL (q %s, k %s, v %s)",
             op, q ? q->name : "NULL", k ? k->name : "NULL", v ? v->name : "NULL");
    AG_CHECK(q->ndim == ndim && k->ndim == ndim && v->ndim == ndim,
             "%s: q, k, v must be %s: q %s %s, k %s %s, v %s %s", op, layout, q->name,
             tensor_shape_str(q), k->name, tensor_shape_str(k), v->name, tensor_shape_str(v));
    AG_CHECK(tensor_same_shape(k, v), "%s: k and v shapes differ: k %s %s vs v %s %s", op, k->name,
             tensor_shape_str(k), v->name, tensor_shape_str(v));
}

/* The sizes of q (B,NH,Tq,HS), k and v (B,NKV,Tk,HS), checked; mask, dropout left unset. */
static KAttention attention_dims(const Tensor *q, const Tensor *k, const Tensor *v) {
    const char *op = "ag_attention";
    check_qkv(op, q, k, v, 4, "4-D (B,heads,T,HS)");
    AG_CHECK(q->shape[0] == k->shape[0], "%s: batch sizes differ: q %s %s vs k %s %s", op, q->name,
             tensor_shape_str(q), k->name, tensor_shape_str(k));
    AG_CHECK(q->shape[3] == k->shape[3], "%s: head sizes (HS) differ: q %s %s vs k %s %s", op,
             q->name, tensor_shape_str(q), k->name, tensor_shape_str(k));
    AG_CHECK(q->shape[1] % k->shape[1] == 0,
             "%s: query heads (%d) must be a multiple of key/value heads (%d): q %s %s vs k %s %s",
             op, q->shape[1], k->shape[1], q->name, tensor_shape_str(q), k->name,
             tensor_shape_str(k));
    KAttention a = {0};
    a.B = q->shape[0];
    a.NH = q->shape[1];
    a.Tq = q->shape[2];
    a.HS = q->shape[3];
    a.NKV = k->shape[1];
    a.Tk = k->shape[2];
    k_attention_strides_heads(&a);
    return a;
}

/* The options both attention ops share, checked: causal, mask, dropout (and its key). */
static void attention_options(const char *op, Tape *tape, KAttention *a, const Tensor *q,
                              const Tensor *k, int causal, const uint8_t *key_padding_mask,
                              double dropout_p, Rng *rng) {
    AG_CHECK(dropout_p >= 0 && dropout_p < 1,
             "%s: dropout_p = %g must be in [0, 1) (q %s %s, k %s %s)", op, dropout_p, q->name,
             tensor_shape_str(q), k->name, tensor_shape_str(k));
    a->causal = causal != 0;
    a->mask = key_padding_mask;
    if (a->mask) /* (B,Tk) of 0/1: another value means the caller passed something else */
        for (size_t e = 0; e < (size_t)a->B * a->Tk; e++)
            AG_CHECK(a->mask[e] <= 1,
                     "%s: key_padding_mask (%d,%d) holds %d at (%zu,%zu); it "
                     "must be 0 (attend) or 1 (padding) (k %s %s)",
                     op, a->B, a->Tk, a->mask[e], e / (size_t)a->Tk, e % (size_t)a->Tk, k->name,
                     tensor_shape_str(k));
    if (!tape->no_grad && dropout_p > 0) {
        AG_CHECK(rng != NULL, "%s: rng is NULL (dropout_p = %g, q %s %s, k %s %s)", op, dropout_p,
                 q->name, tensor_shape_str(q), k->name, tensor_shape_str(k));
        a->p = dropout_p;
        a->key = rng_u64(rng); /* one draw per call: the key names this call's mask */
    }
}

Tensor *ag_attention(Tape *tape, Tensor *q, Tensor *k, Tensor *v, int causal,
                     const uint8_t *key_padding_mask, double dropout_p, Rng *rng, Tensor **probs) {
    AG_CHECK(tape != NULL, "ag_attention: tape is NULL");
    KAttention a = attention_dims(q, k, v);
    attention_options("ag_attention", tape, &a, q, k, causal, key_padding_mask, dropout_p, rng);
    Tensor *P = tensor_new(tape->arena, 4, (int[]){a.B, a.NH, a.Tq, a.Tk}, "attention_probs");
    Tensor *y = ag_out(tape, AG_OP_ATTENTION, 4, q->shape);
    k_attention_forward(y->data, P->data, q->data, k->data, v->data, &a);
    AgNode *n = ag_record(tape, AG_OP_ATTENTION, y, 3, (Tensor *[]){q, k, v});
    if (n) {
        n->saved = P;
        n->bytes = a.mask ? ag_save_bytes(tape, a.mask, (size_t)a.B * a.Tk) : NULL;
        n->i[0] = a.causal;
        n->f = a.p;
        n->key = a.key;
    }
    if (probs) *probs = P;
    return y;
}
void ag_attention_backward(AgNode *n) {
    Tensor *q = n->in[0], *k = n->in[1], *v = n->in[2], *P = n->saved;
    KAttention a = attention_dims(q, k, v);
    a.causal = n->i[0];
    a.mask = n->bytes;
    a.p = n->f;
    a.key = n->key;
    k_attention_backward(grad_if(q), grad_if(k), grad_if(v), q->data, k->data, v->data, P->data,
                         n->out->grad, &a);
}

/* The heads of hd fit the widths (last dimensions) of q, k and v. */
static void heads_fit(const char *op, const AgHeads *hd, const Tensor *q, const Tensor *k,
                      const Tensor *v) {
    int NH = hd->n_heads, NKV = hd->n_kv_heads, HS = hd->head_size;
    int wq = q->shape[q->ndim - 1], wk = k->shape[k->ndim - 1], wv = v->shape[v->ndim - 1];
    AG_CHECK(NH > 0 && NKV > 0 && HS > 0 && NH % NKV == 0,
             "%s: n_heads %d must be a multiple of n_kv_heads %d, both > 0, and head_size %d > 0 "
             "(q %s %s, k %s %s)",
             op, NH, NKV, HS, q->name, tensor_shape_str(q), k->name, tensor_shape_str(k));
    AG_CHECK(hd->q_col >= 0 && (long)hd->q_col + (long)NH * HS <= wq,
             "%s: q's heads, columns [%d, %ld), do not fit q %s %s", op, hd->q_col,
             (long)hd->q_col + (long)NH * HS, q->name, tensor_shape_str(q));
    AG_CHECK(hd->k_col >= 0 && (long)hd->k_col + (long)NKV * HS <= wk,
             "%s: k's heads, columns [%d, %ld), do not fit k %s %s", op, hd->k_col,
             (long)hd->k_col + (long)NKV * HS, k->name, tensor_shape_str(k));
    AG_CHECK(hd->v_col >= 0 && (long)hd->v_col + (long)NKV * HS <= wv,
             "%s: v's heads, columns [%d, %ld), do not fit v %s %s", op, hd->v_col,
             (long)hd->v_col + (long)NKV * HS, v->name, tensor_shape_str(v));
}

/* The sizes and strides of ag_attention_cols: q (B,Tq,Wq), k and v (B,Tk,Wk), checked. */
static KAttention attention_cols_dims(const Tensor *q, const Tensor *k, const Tensor *v,
                                      const AgHeads *hd) {
    const char *op = "ag_attention_cols";
    check_qkv(op, q, k, v, 3, "3-D (B,T,width)");
    AG_CHECK(q->shape[0] == k->shape[0], "%s: batch sizes differ: q %s %s vs k %s %s", op, q->name,
             tensor_shape_str(q), k->name, tensor_shape_str(k));
    heads_fit(op, hd, q, k, v);
    KAttention a = {0};
    a.B = q->shape[0];
    a.NH = hd->n_heads;
    a.NKV = hd->n_kv_heads;
    a.HS = hd->head_size;
    a.Tq = q->shape[1];
    a.Tk = k->shape[1];
    size_t wq = (size_t)q->shape[2], wk = (size_t)k->shape[2], wy = (size_t)a.NH * a.HS;
    a.qs[0] = (size_t)a.Tq * wq, a.qs[1] = (size_t)a.HS, a.qs[2] = wq;
    a.ks[0] = (size_t)a.Tk * wk, a.ks[1] = (size_t)a.HS, a.ks[2] = wk;
    a.ys[0] = (size_t)a.Tq * wy, a.ys[1] = (size_t)a.HS, a.ys[2] = wy;
    return a;
}

Tensor *ag_attention_cols(Tape *tape, Tensor *q, Tensor *k, Tensor *v, AgHeads heads, int causal,
                          const uint8_t *key_padding_mask, double dropout_p, Rng *rng,
                          Tensor **probs) {
    AG_CHECK(tape != NULL, "ag_attention_cols: tape is NULL");
    KAttention a = attention_cols_dims(q, k, v, &heads);
    attention_options("ag_attention_cols", tape, &a, q, k, causal, key_padding_mask, dropout_p,
                      rng);
    Tensor *P = tensor_new(tape->arena, 4, (int[]){a.B, a.NH, a.Tq, a.Tk}, "attention_probs");
    Tensor *y = ag_out(tape, AG_OP_ATTENTION_COLS, 3, (int[]){a.B, a.Tq, a.NH * a.HS});
    k_attention_forward(y->data, P->data, q->data + heads.q_col, k->data + heads.k_col,
                        v->data + heads.v_col, &a);
    AgNode *n = ag_record(tape, AG_OP_ATTENTION_COLS, y, 3, (Tensor *[]){q, k, v});
    if (n) {
        n->saved = P;
        n->bytes = a.mask ? ag_save_bytes(tape, a.mask, (size_t)a.B * a.Tk) : NULL;
        int h[6] = {heads.n_heads, heads.n_kv_heads, heads.head_size,
                    heads.q_col,   heads.k_col,      heads.v_col};
        n->idx = ag_save_ints(tape, h, 6);
        n->i[0] = a.causal;
        n->f = a.p;
        n->key = a.key;
    }
    if (probs) *probs = P;
    return y;
}
void ag_attention_cols_backward(AgNode *n) {
    Tensor *q = n->in[0], *k = n->in[1], *v = n->in[2];
    const int *h = n->idx;
    AgHeads heads = {h[0], h[1], h[2], h[3], h[4], h[5]};
    KAttention a = attention_cols_dims(q, k, v, &heads);
    a.causal = n->i[0];
    a.mask = n->bytes;
    a.p = n->f;
    a.key = n->key;
    Real *gq = grad_if(q), *gk = grad_if(k), *gv = grad_if(v);
    k_attention_backward(gq ? gq + heads.q_col : NULL, gk ? gk + heads.k_col : NULL,
                         gv ? gv + heads.v_col : NULL, q->data + heads.q_col, k->data + heads.k_col,
                         v->data + heads.v_col, n->saved->data, n->out->grad, &a);
}

/* ---- ag_attention_rows: the layout of its packed rows, in the step arena ----
 * ints: [0, 6) the heads, 6 B, 7 Tq, 8 Tk, then qoff (B+1), koff (B+1), poff (B+1), qpos (nq),
 * kpos (nk): the KAttention fields of the same names. */
enum { L_B = 6, L_TQ, L_TK, L_OFF };

/* Checks the row map r of x (n rows of (B, T)) and fills off (B+1) and pos (n) from it. */
static void row_map(const char *op, const char *what, AgRows r, const Tensor *x, int *off,
                    int *pos) {
    int n = x->shape[0];
    AG_CHECK(r.idx != NULL, "%s: %s.idx is NULL (%s %s)", op, what, x->name, tensor_shape_str(x));
    AG_CHECK(r.B > 0 && r.T > 0 && (long)n <= (long)r.B * r.T,
             "%s: %s (B, T) = (%d,%d) must be positive and hold the %d rows of %s %s", op, what,
             r.B, r.T, n, x->name, tensor_shape_str(x));
    long total = (long)r.B * r.T;
    for (int b = 0; b <= r.B; b++) off[b] = 0;
    for (int i = 0; i < n; i++) {
        AG_CHECK(r.idx[i] >= 0 && r.idx[i] < total,
                 "%s: %s row %d at index %d is outside [0, %ld) (%s %s)", op, what, r.idx[i], i,
                 total, x->name, tensor_shape_str(x));
        AG_CHECK(i == 0 || r.idx[i] > r.idx[i - 1],
                 "%s: %s row %d at index %d is not above row %d at index %d: rows must increase "
                 "(%s %s)",
                 op, what, r.idx[i], i, r.idx[i - 1], i - 1, x->name, tensor_shape_str(x));
        off[r.idx[i] / r.T + 1]++;
        pos[i] = r.idx[i] % r.T;
    }
    for (int b = 0; b < r.B; b++) off[b + 1] += off[b];
}

/* The kernel's description from a layout; q (nq, Wq), k (nk, Wk); mask left unset. */
static KAttention rows_attention(const int *lay, const Tensor *q, const Tensor *k) {
    KAttention a = {0};
    a.NH = lay[0], a.NKV = lay[1], a.HS = lay[2];
    a.B = lay[L_B], a.Tq = lay[L_TQ], a.Tk = lay[L_TK];
    size_t wq = (size_t)q->shape[1], wk = (size_t)k->shape[1], wy = (size_t)a.NH * a.HS;
    a.qs[1] = (size_t)a.HS, a.qs[2] = wq;
    a.ks[1] = (size_t)a.HS, a.ks[2] = wk;
    a.ys[1] = (size_t)a.HS, a.ys[2] = wy;
    a.qoff = lay + L_OFF;
    a.koff = a.qoff + a.B + 1;
    a.poff = a.koff + a.B + 1;
    a.qpos = a.poff + a.B + 1;
    a.kpos = a.qpos + q->shape[0];
    return a;
}

Tensor *ag_attention_rows(Tape *tape, Tensor *q, AgRows q_rows, Tensor *k, Tensor *v, AgRows k_rows,
                          AgHeads heads, int causal, const uint8_t *key_padding_mask,
                          double dropout_p, Rng *rng, Tensor **probs) {
    const char *op = "ag_attention_rows";
    AG_CHECK(tape != NULL, "%s: tape is NULL", op);
    check_qkv(op, q, k, v, 2, "2-D (rows, width)");
    AG_CHECK(q_rows.B == k_rows.B,
             "%s: batch sizes differ: q_rows B %d (q %s %s) vs k_rows B %d "
             "(k %s %s)",
             op, q_rows.B, q->name, tensor_shape_str(q), k_rows.B, k->name, tensor_shape_str(k));
    heads_fit(op, &heads, q, k, v);
    int B = q_rows.B, nq = q->shape[0], nk = k->shape[0];
    int *lay = arena_alloc(tape->arena, (L_OFF + 3 * ((size_t)B + 1) + nq + nk) * sizeof(int));
    int h6[6] = {heads.n_heads, heads.n_kv_heads, heads.head_size,
                 heads.q_col,   heads.k_col,      heads.v_col};
    memcpy(lay, h6, sizeof h6);
    lay[L_B] = B, lay[L_TQ] = q_rows.T, lay[L_TK] = k_rows.T;
    int *qoff = lay + L_OFF, *koff = qoff + B + 1, *poff = koff + B + 1, *qpos = poff + B + 1;
    row_map(op, "q_rows", q_rows, q, qoff, qpos);
    row_map(op, "k_rows", k_rows, k, koff, qpos + nq);
    long cells = 0; /* P's size: NH times the sum of nq nk over the batch */
    for (int b = 0; b < B; b++) {
        poff[b] = (int)cells;
        cells += (long)(qoff[b + 1] - qoff[b]) * (koff[b + 1] - koff[b]);
        AG_CHECK(cells * heads.n_heads <= INT_MAX,
                 "%s: the probabilities of q %s %s over k %s %s do not fit an int count", op,
                 q->name, tensor_shape_str(q), k->name, tensor_shape_str(k));
    }
    poff[B] = (int)cells;
    KAttention a = rows_attention(lay, q, k);
    attention_options(op, tape, &a, q, k, causal, key_padding_mask, dropout_p, rng);
    uint8_t *kmask = NULL; /* the mask of the packed key rows */
    if (a.mask) {
        kmask = arena_alloc(tape->arena, (size_t)nk + 1);
        for (int r = 0; r < nk; r++) kmask[r] = a.mask[k_rows.idx[r]];
    }
    for (int b = 0, r = 0; b < B; b++) /* a key row left out must be padding */
        for (int t = 0; t < k_rows.T; t++) {
            long e = (long)b * k_rows.T + t;
            if (r < nk && k_rows.idx[r] == e) {
                r++;
                continue;
            }
            AG_CHECK(a.mask && a.mask[e],
                     "%s: key row (%d,%d) is not in k_rows but not masked by key_padding_mask "
                     "(k %s %s)",
                     op, b, t, k->name, tensor_shape_str(k));
        }
    a.mask = kmask;
    Tensor *P =
        tensor_new1(tape->arena, (int)(cells * a.NH > 0 ? cells * a.NH : 1), "attention_probs");
    Tensor *y = ag_out(tape, AG_OP_ATTENTION_ROWS, 2, (int[]){nq, a.NH * a.HS});
    k_attention_forward(y->data, P->data, q->data + heads.q_col, k->data + heads.k_col,
                        v->data + heads.v_col, &a);
    AgNode *n = ag_record(tape, AG_OP_ATTENTION_ROWS, y, 3, (Tensor *[]){q, k, v});
    if (n) {
        n->saved = P;
        n->bytes = kmask;
        n->idx = lay;
        n->i[0] = a.causal;
        n->f = a.p;
        n->key = a.key;
    }
    if (probs) {
        *probs = tensor_new(tape->arena, 4, (int[]){B, a.NH, a.Tq, a.Tk}, "attention_probs");
        k_attention_probs_unpack((*probs)->data, P->data, &a);
    }
    return y;
}
void ag_attention_rows_backward(AgNode *n) {
    Tensor *q = n->in[0], *k = n->in[1], *v = n->in[2];
    const int *h = n->idx;
    KAttention a = rows_attention(h, q, k);
    a.causal = n->i[0];
    a.mask = n->bytes;
    a.p = n->f;
    a.key = n->key;
    Real *gq = grad_if(q), *gk = grad_if(k), *gv = grad_if(v);
    k_attention_backward(gq ? gq + h[3] : NULL, gk ? gk + h[4] : NULL, gv ? gv + h[5] : NULL,
                         q->data + h[3], k->data + h[4], v->data + h[5], n->saved->data,
                         n->out->grad, &a);
}

Tensor *ag_head_gate(Tape *tape, Tensor *x, Tensor *gate) {
    AG_CHECK(tape != NULL, "ag_head_gate: tape is NULL");
    AG_CHECK_TENSOR("ag_head_gate", x);
    AG_CHECK_TENSOR("ag_head_gate", gate);
    AG_CHECK(x->ndim == 4 && gate->ndim == 1 && gate->shape[0] == x->shape[1],
             "ag_head_gate: x must be (B,NH,T,HS) and gate (NH): x %s %s vs gate %s %s", x->name,
             tensor_shape_str(x), gate->name, tensor_shape_str(gate));
    Tensor *y = ag_out(tape, AG_OP_HEAD_GATE, 4, x->shape);
    k_head_gate_forward(y->data, x->data, gate->data, x->shape[0], x->shape[1], x->shape[2],
                        x->shape[3]);
    ag_record(tape, AG_OP_HEAD_GATE, y, 2, (Tensor *[]){x, gate});
    return y;
}
void ag_head_gate_backward(AgNode *n) {
    Tensor *x = n->in[0], *gate = n->in[1];
    k_head_gate_backward(grad_if(x), grad_if(gate), x->data, gate->data, n->out->grad, x->shape[0],
                         x->shape[1], x->shape[2], x->shape[3]);
}
