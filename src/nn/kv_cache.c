/* kv_cache.c: a key/value cache for incremental decoding: the keys and values of every
 * position decoded so far, and causal self-attention of new positions over them
 * (nn_mha_forward_cached), through the split-heads path of attention.c (nn_mha_forward_kv).
 * Not here: the attention itself (attention.c). Next: transformer.c. */
#include "nn.h"

#include <stdlib.h>
#include <string.h>

void nn_kv_cache_init(NnKVCache *c, const MultiHeadAttention *m, int B, int max_T) {
    AG_CHECK_ARG(c);
    AG_CHECK_ARG(m);
    AG_CHECK(B > 0 && max_T > 0, "nn_kv_cache_init: B %d and max_T %d must be > 0", B, max_T);
    c->B = B;
    c->NKV = m->n_kv_heads;
    c->HS = m->head_dim;
    c->max_T = max_T;
    c->len = 0;
    size_t n = (size_t)B * c->NKV * max_T * c->HS;
    c->k = calloc(n, sizeof(Real));
    c->v = calloc(n, sizeof(Real));
    AG_CHECK(c->k && c->v, "nn_kv_cache_init: out of memory for %zu values", 2 * n);
}

void nn_kv_cache_free(NnKVCache *c) {
    AG_CHECK_ARG(c);
    free(c->k);
    free(c->v);
    c->k = c->v = NULL;
}

/* Copies the first len positions of a (B, NKV, max_T, HS) cache into a (B, NKV, len, HS) tensor */
static Tensor *cache_view(Tape *t, const NnKVCache *c, const Real *src) {
    Tensor *x = tensor_new4(t->arena, c->B, c->NKV, c->len, c->HS, "kv_cache");
    size_t row = (size_t)c->len * c->HS;
    for (int bh = 0; bh < c->B * c->NKV; bh++)
        memcpy(x->data + bh * row, src + (size_t)bh * c->max_T * c->HS, row * sizeof(Real));
    return x;
}

Tensor *nn_mha_forward_cached(Tape *t, MultiHeadAttention *m, NnKVCache *c, Tensor *x) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(m);
    AG_CHECK_ARG(c);
    AG_CHECK_ARG(x);
    AG_CHECK(x->ndim == 3 && x->shape[2] == m->d_model, "nn_mha_forward: x %s %s must be (B,T,%d)",
             x->name, tensor_shape_str(x), m->d_model);
    AG_CHECK(x->shape[0] == c->B && c->len + x->shape[1] <= c->max_T,
             "nn_mha_forward_cached: x %s does not fit the cache (B %d, %d of %d positions "
             "used)",
             tensor_shape_str(x), c->B, c->len, c->max_T);
    int T = x->shape[1];
    Tensor *k = nn_mha_project_kv(t, m, x, 0), *v = nn_mha_project_kv(t, m, x, 1);
    for (int bh = 0; bh < c->B * c->NKV; bh++) { /* append the new positions */
        size_t dst = ((size_t)bh * c->max_T + c->len) * c->HS, src = (size_t)bh * T * c->HS;
        memcpy(c->k + dst, k->data + src, (size_t)T * c->HS * sizeof(Real));
        memcpy(c->v + dst, v->data + src, (size_t)T * c->HS * sizeof(Real));
    }
    c->len += T;
    /* causal aligned at the end: new position i sees the cache and new positions <= i */
    return nn_mha_forward_kv(t, m, x, cache_view(t, c, c->k), cache_view(t, c, c->v),
                             &(AgAttnMask){.causal = 1}, NULL);
}
