/* k_attention.h: where things are in a KAttention (kernels.h): batch b's query and key rows
 * (the whole (B, T) batch, or its packed rows), where a head starts in q, y, k, v and P, the
 * key padding bytes, the additive mask's rows, the keys the causal rule allows, and whether dropout keeps an element of
 * P. Shared by the fast kernel (k_attention.c) and the reference (k_attention_ref.c), so both
 * read the same layouts and drop the same elements.
 * Not here: any loop over a head. Read next: k_attention_ref.c. */
#ifndef ATTOGRAD_K_ATTENTION_H
#define ATTOGRAD_K_ATTENTION_H

#include "kernels.h"

/* Element e of P survives dropout when its hashed uniform in [0,1) is >= p: a pure function of
 * (key, e), the rule of k_dropout_forward in k_elementwise.c, so backward can recompute it.
 * k_hash is rng_hash inline (a call per element was most of the cost). */
static inline int keep(const KAttention *a, size_t e) {
    return a->p == 0 || (double)(k_hash(a->key, e) >> 11) * 0x1.0p-53 >= a->p;
}

/* ---- where batch b's rows are: the whole (B, T) batch, or its packed rows (KAttention) ----
 * Below, query row i and key j of batch b count the batch's rows (all, or its packed ones). */
static inline int n_q(const KAttention *a, int b) {
    return a->qoff ? a->qoff[b + 1] - a->qoff[b] : a->Tq;
}
static inline int n_k(const KAttention *a, int b) {
    return a->koff ? a->koff[b + 1] - a->koff[b] : a->Tk;
}

/* where head h (of q, y: st qs or ys) of batch b starts */
static inline size_t q_at(const KAttention *a, const size_t *st, int b, int h) {
    if (a->qoff) return (size_t)a->qoff[b] * st[2] + (size_t)h * st[1];
    return (size_t)b * st[0] + (size_t)h * st[1];
}
/* where kv head g (of k, v) of batch b starts */
static inline size_t k_at(const KAttention *a, int b, int g) {
    if (a->koff) return (size_t)a->koff[b] * a->ks[2] + (size_t)g * a->ks[1];
    return (size_t)b * a->ks[0] + (size_t)g * a->ks[1];
}
/* where head h of batch b starts in P (rows n_k apart) */
static inline size_t p_at(const KAttention *a, int b, int h) {
    size_t blk = (size_t)n_q(a, b) * n_k(a, b);
    if (a->qoff) return (size_t)a->NH * a->poff[b] + (size_t)h * blk;
    return ((size_t)b * a->NH + h) * blk;
}
/* batch b's key padding bytes, one per key row, or NULL */
static inline const uint8_t *pad_of(const KAttention *a, int b) {
    if (!a->mask) return NULL;
    return a->mask + (a->koff ? (size_t)a->koff[b] : (size_t)b * a->Tk);
}

/* The additive mask's row for query row i of batch b, head h (Tk values by key position), or
 * NULL without one */
static inline const Real *bias_row(const KAttention *a, int b, int h, int i) {
    if (!a->bias) return NULL;
    size_t t = (size_t)(a->qpos ? a->qpos[a->qoff[b] + i] : i);
    return a->bias + (size_t)b * a->bs[0] + (size_t)h * a->bs[1] + t * a->Tk;
}
/* batch b's key positions (key j is at position kp[j]), or NULL for the whole batch (j) */
static inline const int *kpos_of(const KAttention *a, int b) {
    return a->kpos ? a->kpos + a->koff[b] : NULL;
}

/* Keys j < end are allowed by the causal rule: position tk <= tq + Tk - Tq (aligned at the
 * end) for the query at position tq. Packed keys are in increasing position, so the allowed
 * ones are the first: counted by bisection. */
static inline int key_end(const KAttention *a, int b, int i) {
    if (!a->causal) return n_k(a, b);
    int last = (a->qpos ? a->qpos[a->qoff[b] + i] : i) + a->Tk - a->Tq; /* last key position */
    if (!a->kpos) return last + 1 < 0 ? 0 : last + 1;
    const int *pos = a->kpos + a->koff[b];
    int lo = 0, hi = n_k(a, b); /* pos[j] <= last for j < lo, > last for j >= hi */
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (pos[mid] <= last)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

#endif
