/* ops_attention.c: fused scaled dot-product attention and the per-head gate; each constructor
 * followed by its backward. Attention saves its probabilities P (before dropout): backward
 * needs only P, the inputs, the mask (copied into the step arena) and the dropout key, as the
 * softmax backward needs only the softmax output. The probabilities handed out through *probs
 * are for inspection: they are not on the tape, so no gradient flows back through them.
 * ag_attention_cols is the same op on heads that sit side by side in (B, T, C) projections: the
 * kernel reads them through strides, so no split or merge of heads is copied.
 * Not here: the loops (../tensor/k_attention.c). Next: gradcheck.c. */
#include "ops_internal.h"

static Real *grad_if(Tensor *t) { return t->requires_grad ? t->grad : NULL; }

/* The sizes of q (B,NH,Tq,HS), k and v (B,NKV,Tk,HS), checked; mask, dropout left unset. */
static KAttention attention_dims(const Tensor *q, const Tensor *k, const Tensor *v) {
    const char *op = "ag_attention";
    AG_CHECK(q != NULL && k != NULL && v != NULL, "%s: tensor argument is NULL (q %s, k %s, v %s)",
             op, q ? q->name : "NULL", k ? k->name : "NULL", v ? v->name : "NULL");
    AG_CHECK(q->ndim == 4 && k->ndim == 4 && v->ndim == 4,
             "%s: q, k, v must be 4-D (B,heads,T,HS): q %s %s, k %s %s, v %s %s", op, q->name,
             tensor_shape_str(q), k->name, tensor_shape_str(k), v->name, tensor_shape_str(v));
    AG_CHECK(tensor_same_shape(k, v), "%s: k and v shapes differ: k %s %s vs v %s %s", op, k->name,
             tensor_shape_str(k), v->name, tensor_shape_str(v));
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

/* The sizes and strides of ag_attention_cols: q (B,Tq,Wq), k and v (B,Tk,Wk), checked. */
static KAttention attention_cols_dims(const Tensor *q, const Tensor *k, const Tensor *v,
                                      const AgHeads *hd) {
    const char *op = "ag_attention_cols";
    AG_CHECK(q != NULL && k != NULL && v != NULL, "%s: tensor argument is NULL (q %s, k %s, v %s)",
             op, q ? q->name : "NULL", k ? k->name : "NULL", v ? v->name : "NULL");
    AG_CHECK(q->ndim == 3 && k->ndim == 3 && v->ndim == 3,
             "%s: q, k, v must be 3-D (B,T,width): q %s %s, k %s %s, v %s %s", op, q->name,
             tensor_shape_str(q), k->name, tensor_shape_str(k), v->name, tensor_shape_str(v));
    AG_CHECK(tensor_same_shape(k, v), "%s: k and v shapes differ: k %s %s vs v %s %s", op, k->name,
             tensor_shape_str(k), v->name, tensor_shape_str(v));
    AG_CHECK(q->shape[0] == k->shape[0], "%s: batch sizes differ: q %s %s vs k %s %s", op, q->name,
             tensor_shape_str(q), k->name, tensor_shape_str(k));
    int NH = hd->n_heads, NKV = hd->n_kv_heads, HS = hd->head_size;
    AG_CHECK(NH > 0 && NKV > 0 && HS > 0 && NH % NKV == 0,
             "%s: n_heads %d must be a multiple of n_kv_heads %d, both > 0, and head_size %d > 0 "
             "(q %s %s, k %s %s)",
             op, NH, NKV, HS, q->name, tensor_shape_str(q), k->name, tensor_shape_str(k));
    AG_CHECK(hd->q_col >= 0 && (long)hd->q_col + (long)NH * HS <= q->shape[2],
             "%s: q's heads, columns [%d, %ld), do not fit q %s %s", op, hd->q_col,
             (long)hd->q_col + (long)NH * HS, q->name, tensor_shape_str(q));
    AG_CHECK(hd->k_col >= 0 && (long)hd->k_col + (long)NKV * HS <= k->shape[2],
             "%s: k's heads, columns [%d, %ld), do not fit k %s %s", op, hd->k_col,
             (long)hd->k_col + (long)NKV * HS, k->name, tensor_shape_str(k));
    AG_CHECK(hd->v_col >= 0 && (long)hd->v_col + (long)NKV * HS <= v->shape[2],
             "%s: v's heads, columns [%d, %ld), do not fit v %s %s", op, hd->v_col,
             (long)hd->v_col + (long)NKV * HS, v->name, tensor_shape_str(v));
    KAttention a = {0};
    a.B = q->shape[0];
    a.NH = NH;
    a.NKV = NKV;
    a.HS = HS;
    a.Tq = q->shape[1];
    a.Tk = k->shape[1];
    size_t wq = (size_t)q->shape[2], wk = (size_t)k->shape[2], wy = (size_t)NH * HS;
    a.qs[0] = (size_t)a.Tq * wq, a.qs[1] = (size_t)HS, a.qs[2] = wq;
    a.ks[0] = (size_t)a.Tk * wk, a.ks[1] = (size_t)HS, a.ks[2] = wk;
    a.ys[0] = (size_t)a.Tq * wy, a.ys[1] = (size_t)HS, a.ys[2] = wy;
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
