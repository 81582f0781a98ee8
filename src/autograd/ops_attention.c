/* ops_attention.c: attention, one op (ag_attention) whose backward follows it, then how it
 * reads its three layouts (AgAttnLayout: (B, heads, T, HS) tensors, heads side by side in
 * (B, T, width) projections, or such projections packed to some rows of the batch), and the
 * per-head gate. Each layout only sets strides and row maps in a KAttention: the kernel is the
 * same. Attention saves its probabilities P (before dropout) in node->saved and the rest in an
 * AttentionCtx: backward needs only P, the inputs, the mask, the dropout key, and where the
 * heads are, as the softmax backward needs only the softmax output.
 * Not here: the loops (../tensor/k_attention_ref.c defines them; k_attention.c is the fast one).
 * Next: ../tensor/k_attention_ref.c, then ops_layernorm.c. */
#include <limits.h>
#include <math.h>
#include <string.h>

#include "ops_internal.h"

/* What an attention node keeps for its backward, besides q, k, v and P. */
typedef struct AttentionCtx {
    KAttention a; /* sizes, strides, causal, mask (a copy), dropout p and key, row maps */
    int q_col, k_col, v_col; /* where the heads start in q, k and v (0 for AG_ATTN_HEADS) */
} AttentionCtx;

static AttentionCtx read_layout(Tape *tape, const AgAttnLayout *L, const Tensor *q, const Tensor *k,
                                const Tensor *v, int *y_ndim, int *y_shape);
static void read_options(Tape *tape, KAttention *a, const Tensor *q, const Tensor *k,
                         const AgAttnMask *mask, double dropout_p, Rng *rng);
static const uint8_t *packed_mask(Tape *tape, const KAttention *a, const AgRows *k_rows,
                                  const Tensor *k);

Tensor *ag_attention(Tape *tape, Tensor *q, Tensor *k, Tensor *v, const AgAttnLayout *layout,
                     const AgAttnMask *mask, double dropout_p, Rng *rng, Tensor **probs) {
    AG_CHECK(tape != NULL, "ag_attention: tape is NULL");
    const AgAttnLayout heads = {.kind = AG_ATTN_HEADS}, *L = layout ? layout : &heads;
    int y_ndim, y_shape[4];
    AttentionCtx c = read_layout(tape, L, q, k, v, &y_ndim, y_shape);
    KAttention *a = &c.a;
    read_options(tape, a, q, k, mask, dropout_p, rng);
    if (L->kind == AG_ATTN_ROWS) a->mask = packed_mask(tape, a, &L->k_rows, k);
    int cells = a->poff ? a->NH * a->poff[a->B] : 0; /* packed rows: P's size, maybe 0 */
    Tensor *P =
        a->poff ? tensor_new1(tape->arena, cells > 0 ? cells : 1, "attention_probs")
                : tensor_new(tape->arena, 4, (int[]){a->B, a->NH, a->Tq, a->Tk}, "attention_probs");
    Tensor *y = ag_out(tape, AG_OP_ATTENTION, y_ndim, y_shape);
    /* packed rows: the caller's probabilities at their places in (B,NH,Tq,Tk), unpacked by the
     * forward kernel head by head; otherwise they are P itself */
    Tensor *Pd = probs && a->poff ? tensor_new(tape->arena, 4, (int[]){a->B, a->NH, a->Tq, a->Tk},
                                               "attention_probs")
                                  : NULL;
    k_attention_forward_probs(y->data, P->data, Pd ? Pd->data : NULL, q->data + c.q_col,
                              k->data + c.k_col, v->data + c.v_col, a);
    AgNode *n = ag_record(tape, AG_OP_ATTENTION, y, 3, (Tensor *[]){q, k, v});
    if (n) {
        n->saved = P;
        if (a->mask && !a->poff) /* the caller's (B, Tk) bytes; packed ones are in the arena */
            a->mask = ag_save_bytes(tape, a->mask, (size_t)a->B * a->Tk);
        c.a.bias = NULL; /* read by the forward only */
        *AG_SAVE(tape, n, AttentionCtx) = c;
    }
    if (probs) *probs = Pd ? Pd : P;
    return y;
}

static Real *grad_at(Tensor *t, int col) { return t->requires_grad ? t->grad + col : NULL; }

/* The forward computed y = dropout(softmax(q k^T / sqrt(HS) + masks)) v per head; the kernel
 * runs its backward from P (ops.def's row; the loops: k_attention_backward_ref). A fresh
 * gradient buffer (node->store, from ag_attention_can_store) is set, not added to: when q, k
 * and v are one tensor, each sets its own columns. */
void ag_attention_backward(AgNode *n) {
    Tensor *q = n->in[0], *k = n->in[1], *v = n->in[2];
    const AttentionCtx *c = n->ctx;
    unsigned sq = n->store & 1, sk = k == q ? sq : (n->store >> 1) & 1;
    unsigned sv = v == q ? sq : v == k ? sk : (n->store >> 2) & 1;
    k_attention_backward_store(grad_at(q, c->q_col), grad_at(k, c->k_col), grad_at(v, c->v_col),
                               q->data + c->q_col, k->data + c->k_col, v->data + c->v_col,
                               n->saved->data, n->out->grad, &c->a, sq | sk << 1 | sv << 2);
}

/* The inputs whose gradient the backward writes whole (bit i: in[i]; tape.c's can_store). The
 * kernel writes the heads' columns of every row of q (q_col ..) and of k and v (k_col, v_col ..):
 * a tensor is written whole when its parts' columns tile its width without overlap, as the
 * fused projections' q, k, v (self-attention: one (.., 3C) tensor) or k, v (cross-attention)
 * do. Separate (B, heads, T, HS) tensors are whole; the same one given twice is not. */
unsigned ag_attention_can_store(const AgNode *n) {
    const AttentionCtx *c = n->ctx;
    const KAttention *a = &c->a;
    int col[3] = {c->q_col, c->k_col, c->v_col};
    int width[3] = {a->NH * a->HS, a->NKV * a->HS, a->NKV * a->HS};
    int heads = n->in[0]->ndim == 4; /* AG_ATTN_HEADS */
    unsigned bits = 0;
    for (int i = 0; i < 3; i++) {
        const Tensor *x = n->in[i];
        int W = x->shape[x->ndim - 1], covered = 0, ok = 1;
        for (int j = 0; j < 3 && ok; j++) {
            if (n->in[j] != x) continue;
            if (heads && j != i) ok = 0;      /* the whole tensor twice */
            for (int l = 0; l < j && ok; l++) /* parts of x overlap */
                if (n->in[l] == x && col[l] < col[j] + width[j] && col[j] < col[l] + width[l])
                    ok = 0;
            covered += heads ? W : width[j];
        }
        if (ok && covered == W && (heads || (col[i] >= 0 && col[i] + width[i] <= W)))
            bits |= 1u << i;
    }
    return bits;
}

/* ---- the three layouts: checks, then the KAttention of each ---- */

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

/* AG_ATTN_HEADS: q (B,NH,Tq,HS), k and v (B,NKV,Tk,HS), contiguous */
static void heads_layout(KAttention *a, const Tensor *q, const Tensor *k, const Tensor *v) {
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
    a->B = q->shape[0];
    a->NH = q->shape[1];
    a->Tq = q->shape[2];
    a->HS = q->shape[3];
    a->NKV = k->shape[1];
    a->Tk = k->shape[2];
    k_attention_strides_heads(a);
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

/* AG_ATTN_COLS: q (B,Tq,Wq), k and v (B,Tk,Wk), the heads hd in their columns */
static void cols_layout(KAttention *a, const AgHeads *hd, const Tensor *q, const Tensor *k,
                        const Tensor *v) {
    const char *op = "ag_attention";
    check_qkv(op, q, k, v, 3, "3-D (B,T,width) with AG_ATTN_COLS");
    AG_CHECK(q->shape[0] == k->shape[0], "%s: batch sizes differ: q %s %s vs k %s %s", op, q->name,
             tensor_shape_str(q), k->name, tensor_shape_str(k));
    heads_fit(op, hd, q, k, v);
    a->B = q->shape[0];
    a->NH = hd->n_heads;
    a->NKV = hd->n_kv_heads;
    a->HS = hd->head_size;
    a->Tq = q->shape[1];
    a->Tk = k->shape[1];
    size_t wq = (size_t)q->shape[2], wk = (size_t)k->shape[2], wy = (size_t)a->NH * a->HS;
    a->qs[0] = (size_t)a->Tq * wq, a->qs[1] = (size_t)a->HS, a->qs[2] = wq;
    a->ks[0] = (size_t)a->Tk * wk, a->ks[1] = (size_t)a->HS, a->ks[2] = wk;
    a->ys[0] = (size_t)a->Tq * wy, a->ys[1] = (size_t)a->HS, a->ys[2] = wy;
}

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

/* AG_ATTN_ROWS: q (nq,Wq) rows of a (B,Tq) batch, k and v (nk,Wk) rows of a (B,Tk) one; the
 * row maps (KAttention's qoff, qpos, koff, kpos, poff) are built in the step arena. */
static void rows_layout(Tape *tape, KAttention *a, const AgAttnLayout *L, const Tensor *q,
                        const Tensor *k, const Tensor *v) {
    const char *op = "ag_attention";
    const AgHeads *hd = &L->heads;
    AgRows q_rows = L->q_rows, k_rows = L->k_rows;
    check_qkv(op, q, k, v, 2, "2-D (rows, width) with AG_ATTN_ROWS");
    AG_CHECK(q_rows.B == k_rows.B,
             "%s: batch sizes differ: q_rows B %d (q %s %s) vs k_rows B %d "
             "(k %s %s)",
             op, q_rows.B, q->name, tensor_shape_str(q), k_rows.B, k->name, tensor_shape_str(k));
    heads_fit(op, hd, q, k, v);
    int B = q_rows.B, nq = q->shape[0], nk = k->shape[0];
    int *qoff = arena_alloc(tape->arena, (3 * ((size_t)B + 1) + nq + nk) * sizeof(int));
    int *koff = qoff + B + 1, *poff = koff + B + 1, *qpos = poff + B + 1, *kpos = qpos + nq;
    row_map(op, "q_rows", q_rows, q, qoff, qpos);
    row_map(op, "k_rows", k_rows, k, koff, kpos);
    long cells = 0; /* P's size: NH times the sum of nq nk over the batch */
    for (int b = 0; b < B; b++) {
        poff[b] = (int)cells;
        cells += (long)(qoff[b + 1] - qoff[b]) * (koff[b + 1] - koff[b]);
        AG_CHECK(cells * hd->n_heads <= INT_MAX,
                 "%s: the probabilities of q %s %s over k %s %s do not fit an int count", op,
                 q->name, tensor_shape_str(q), k->name, tensor_shape_str(k));
    }
    poff[B] = (int)cells;
    a->B = B, a->Tq = q_rows.T, a->Tk = k_rows.T;
    a->NH = hd->n_heads, a->NKV = hd->n_kv_heads, a->HS = hd->head_size;
    size_t wq = (size_t)q->shape[1], wk = (size_t)k->shape[1], wy = (size_t)a->NH * a->HS;
    a->qs[1] = (size_t)a->HS, a->qs[2] = wq;
    a->ks[1] = (size_t)a->HS, a->ks[2] = wk;
    a->ys[1] = (size_t)a->HS, a->ys[2] = wy;
    a->qoff = qoff, a->koff = koff, a->poff = poff, a->qpos = qpos, a->kpos = kpos;
}

/* The packed key rows' padding bytes (nk, in the step arena) from the (B, Tk) mask, after
 * checking that every key row left out of k_rows is padding. */
static const uint8_t *packed_mask(Tape *tape, const KAttention *a, const AgRows *k_rows,
                                  const Tensor *k) {
    int nk = k->shape[0];
    for (int b = 0, r = 0; b < a->B; b++) /* a key row left out must be padding */
        for (int t = 0; t < k_rows->T; t++) {
            long e = (long)b * k_rows->T + t;
            if (r < nk && k_rows->idx[r] == e) {
                r++;
                continue;
            }
            AG_CHECK(a->mask && a->mask[e],
                     "ag_attention: key row (%d,%d) is not in k_rows but not masked by "
                     "mask->key_padding (k %s %s)",
                     b, t, k->name, tensor_shape_str(k));
        }
    if (!a->mask) return NULL;
    uint8_t *kmask = arena_alloc(tape->arena, (size_t)nk + 1);
    for (int r = 0; r < nk; r++) kmask[r] = a->mask[k_rows->idx[r]];
    return kmask;
}

/* The layout's KAttention (sizes, strides, row maps; options unset), where the heads start,
 * and the output's shape. */
static AttentionCtx read_layout(Tape *tape, const AgAttnLayout *L, const Tensor *q, const Tensor *k,
                                const Tensor *v, int *y_ndim, int *y_shape) {
    AttentionCtx c;
    memset(&c, 0, sizeof c);
    KAttention *a = &c.a;
    switch (L->kind) {
    case AG_ATTN_HEADS:
        heads_layout(a, q, k, v);
        *y_ndim = 4;
        memcpy(y_shape, q->shape, 4 * sizeof(int));
        return c;
    case AG_ATTN_COLS: cols_layout(a, &L->heads, q, k, v); break;
    case AG_ATTN_ROWS: rows_layout(tape, a, L, q, k, v); break;
    default: AG_CHECK(0, "ag_attention: layout kind %d is not an AgAttnKind", (int)L->kind);
    }
    c.q_col = L->heads.q_col, c.k_col = L->heads.k_col, c.v_col = L->heads.v_col;
    *y_ndim = L->kind == AG_ATTN_COLS ? 3 : 2;
    if (L->kind == AG_ATTN_COLS)
        memcpy(y_shape, (int[]){a->B, a->Tq, a->NH * a->HS}, 3 * sizeof(int));
    else
        memcpy(y_shape, (int[]){q->shape[0], a->NH * a->HS}, 2 * sizeof(int));
    return c;
}

/* The additive mask: (Tq, Tk), or (B or 1, NH or 1, Tq, Tk); finite values or -inf; a
 * constant. Sets a->bias and its strides (0 along a dimension of size 1). */
static void read_attn_mask(KAttention *a, const Tensor *m, const Tensor *q, const Tensor *k) {
    const char *op = "ag_attention";
    AG_CHECK_TENSOR(op, m);
    int Tq = a->Tq, Tk = a->Tk, two = m->ndim == 2, four = m->ndim == 4;
    AG_CHECK((two || four) && m->shape[m->ndim - 2] == Tq && m->shape[m->ndim - 1] == Tk &&
                 (two || ((m->shape[0] == 1 || m->shape[0] == a->B) &&
                          (m->shape[1] == 1 || m->shape[1] == a->NH))),
             "%s: attn_mask %s %s must be (Tq, Tk) = (%d,%d) or (B, NH, Tq, Tk) = (%d,%d,%d,%d) "
             "with B or NH possibly 1 (q %s %s, k %s %s)",
             op, m->name, tensor_shape_str(m), Tq, Tk, a->B, a->NH, Tq, Tk, q->name,
             tensor_shape_str(q), k->name, tensor_shape_str(k));
    AG_CHECK(!m->requires_grad,
             "%s: attn_mask %s %s requires a gradient; the mask is a constant (no gradient flows "
             "into it)",
             op, m->name, tensor_shape_str(m));
    for (size_t e = 0; e < m->size; e++) /* NaN or +inf would make a row's softmax NaN */
        AG_CHECK(m->data[e] == -(Real)INFINITY || isfinite(m->data[e]),
                 "%s: attn_mask %s %s holds %g at element %zu; it must be finite or -inf", op,
                 m->name, tensor_shape_str(m), (double)m->data[e], e);
    size_t plane = (size_t)Tq * Tk;
    a->bias = m->data;
    a->bs[1] = four && m->shape[1] > 1 ? plane : 0;
    a->bs[0] = four && m->shape[0] > 1 ? (size_t)m->shape[1] * plane : 0;
}

/* the masks (their values checked) and dropout (its key drawn) */
static void read_options(Tape *tape, KAttention *a, const Tensor *q, const Tensor *k,
                         const AgAttnMask *mask, double dropout_p, Rng *rng) {
    const char *op = "ag_attention";
    const AgAttnMask none = {0}, *M = mask ? mask : &none;
    AG_CHECK(dropout_p >= 0 && dropout_p < 1,
             "%s: dropout_p = %g must be in [0, 1) (q %s %s, k %s %s)", op, dropout_p, q->name,
             tensor_shape_str(q), k->name, tensor_shape_str(k));
    a->causal = M->causal != 0;
    const AgMask *kp = M->key_padding;
    AG_CHECK(!kp || (kp->B == a->B && kp->T == a->Tk),
             "%s: key_padding (%d,%d) must be (B, Tk) = (%d,%d) (q %s %s, k %s %s)", op,
             kp ? kp->B : 0, kp ? kp->T : 0, a->B, a->Tk, q->name, tensor_shape_str(q), k->name,
             tensor_shape_str(k));
    AG_CHECK(!kp || kp->data, "%s: key_padding (%d,%d) has NULL data (q %s %s, k %s %s)", op, a->B,
             a->Tk, q->name, tensor_shape_str(q), k->name, tensor_shape_str(k));
    a->mask = kp ? kp->data : NULL;
    if (a->mask) /* (B,Tk) of 0/1: another value means the caller passed something else */
        for (size_t e = 0; e < (size_t)a->B * a->Tk; e++)
            AG_CHECK(a->mask[e] <= 1,
                     "%s: key_padding (%d,%d) holds %d at (%zu,%zu); it "
                     "must be 0 (attend) or 1 (padding) (k %s %s)",
                     op, a->B, a->Tk, a->mask[e], e / (size_t)a->Tk, e % (size_t)a->Tk, k->name,
                     tensor_shape_str(k));
    if (M->attn_mask) read_attn_mask(a, M->attn_mask, q, k);
    if (!tape->no_grad && dropout_p > 0) {
        AG_CHECK(rng != NULL, "%s: rng is NULL (dropout_p = %g, q %s %s, k %s %s)", op, dropout_p,
                 q->name, tensor_shape_str(q), k->name, tensor_shape_str(k));
        a->p = dropout_p;
        a->key = rng_u64(rng); /* one draw per call: the key names this call's mask */
    }
}

Tensor *ag_attn_mask_bool(Tape *tape, const uint8_t *blocked, int ndim, const int *shape) {
    const char *op = "ag_attn_mask_bool";
    AG_CHECK_ARG(tape);
    AG_CHECK_ARG(blocked);
    AG_CHECK_ARG(shape);
    AG_CHECK(ndim == 2 || ndim == 4, "%s: ndim %d must be 2 (Tq, Tk) or 4 (B, NH, Tq, Tk)", op,
             ndim);
    Tensor *m = tensor_new(tape->arena, ndim, shape, "attn_mask");
    for (size_t e = 0; e < m->size; e++) {
        AG_CHECK(blocked[e] <= 1, "%s: blocked %s holds %d at element %zu; it must be 0 or 1", op,
                 tensor_shape_str(m), blocked[e], e);
        m->data[e] = blocked[e] ? -(Real)INFINITY : 0;
    }
    return m;
}

/* ---- the per-head gate ---- */

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
    k_head_gate_backward(ag_grad_if(x), ag_grad_if(gate), x->data, gate->data, n->out->grad,
                         x->shape[0], x->shape[1], x->shape[2], x->shape[3]);
}
