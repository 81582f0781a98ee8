/* nn.c: naming parameters (nn_param) and the small modules: Linear, LayerNorm, Embedding, positional
 * encodings and the feed-forward block. Not here: attention (attention.c) and the transformer
 * (transformer.c). Next: attention.c (nn_mha_forward, down to the attention op). */
#include "nn.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---- parameters ---- */

/* "<scope>.<name>", or the one that is not empty, into out (AG_NAME_LEN bytes); too long aborts */
static void scoped_name(char *out, const char *scope, const char *name, const char *what) {
    int n = snprintf(out, AG_NAME_LEN, "%s%s%s", scope, *scope && *name ? "." : "", name);
    AG_CHECK(n >= 0 && n < AG_NAME_LEN, "%s: the name '%s%s%s' is longer than %d characters", what,
             scope, *scope && *name ? "." : "", name, AG_NAME_LEN - 1);
}

NnBuilder nn_builder(Arena *a, ParamList *pl, Rng *rng) {
    AG_CHECK_ARG(a);
    AG_CHECK_ARG(pl);
    NnBuilder b = {.arena = a, .params = pl, .rng = rng};
    return b;
}

NnBuilder nn_scope(const NnBuilder *b, const char *fmt, ...) {
    AG_CHECK_ARG(b);
    AG_CHECK_ARG(fmt);
    char part[AG_NAME_LEN];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(part, sizeof part, fmt, ap);
    va_end(ap);
    AG_CHECK(n >= 0 && n < AG_NAME_LEN, "nn_scope: the scope '%s' + '%s...' is too long", b->scope,
             part);
    NnBuilder child = *b;
    scoped_name(child.scope, b->scope, part, "nn_scope");
    return child;
}

Tensor *nn_param(NnBuilder *b, const char *name, int ndim, const int *shape) {
    AG_CHECK_ARG(b);
    AG_CHECK_ARG(name);
    AG_CHECK(b->arena != NULL && b->params != NULL, "nn_param: incomplete builder");
    char full[AG_NAME_LEN];
    scoped_name(full, b->scope, name, "nn_param");
    Tensor *t = tensor_param(b->arena, ndim, shape, full);
    ag_params_add(b->params, t);
    return t;
}

/* nn_param_rows; grads 0: a view whose gradient nothing will ask for (no-grad mode), which
 * leaves a lazy parameter's (arena_lazy_grads) unmade */
static Tensor *param_rows(Arena *a, Tensor *p, int row0, int rows, const char *name, int grads) {
    AG_CHECK(p != NULL && (p->ndim == 1 || p->ndim == 2),
             "nn_param_rows: '%s' %s is not 1-D or "
             "2-D",
             p ? p->name : "NULL", tensor_shape_str(p));
    AG_CHECK(row0 >= 0 && rows > 0 && row0 + rows <= p->shape[0],
             "nn_param_rows: rows [%d, %d) outside %s %s", row0, row0 + rows, p->name,
             tensor_shape_str(p));
    size_t row_size = p->ndim == 2 ? (size_t)p->shape[1] : 1;
    if (grads && p->is_param && p->requires_grad && !p->grad) tensor_requires_grad(p); /* shared */
    Tensor *v = arena_alloc(a, sizeof *v);
    *v = *p;
    v->shape[0] = rows;
    v->size = (size_t)rows * row_size;
    v->data = p->data + (size_t)row0 * row_size;
    v->grad = p->grad ? p->grad + (size_t)row0 * row_size : NULL;
    v->arena = a;
    snprintf(v->name, sizeof v->name, "%s", name);
    return v;
}

Tensor *nn_param_rows(Arena *a, Tensor *p, int row0, int rows, const char *name) {
    AG_CHECK_ARG(a);
    AG_CHECK_ARG(p);
    AG_CHECK_ARG(name);
    return param_rows(a, p, row0, rows, name, 1);
}

Tensor *nn_param_rows_on(Tape *t, Tensor *p, int row0, int rows, const char *name) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(p);
    AG_CHECK_ARG(name);
    return param_rows(t->arena, p, row0, rows, name, !t->no_grad);
}

/* ---- Linear ---- */

void nn_linear_init(Linear *l, NnBuilder *b, const char *name, int in, int out, NnBias bias) {
    AG_CHECK_ARG(l);
    AG_CHECK_ARG(b);
    AG_CHECK_ARG(name);
    AG_CHECK(bias == NN_BIAS || bias == NN_NO_BIAS,
             "nn_linear_init: '%s': bias %d is not NN_BIAS or NN_NO_BIAS", name, (int)bias);
    NnBuilder s = nn_scope(b, "%s", name);
    l->in = in;
    l->out = out;
    l->weight = nn_param(&s, "weight", 2, (int[]){out, in});
    l->bias = bias == NN_BIAS ? nn_param(&s, "bias", 1, (int[]){out}) : NULL;
    double bound = 1.0 / sqrt((double)in);
    if (!b->rng) return; /* no stream: zeros, for a load to overwrite */
    rng_fill_uniform(b->rng, l->weight, -bound, bound);
    if (l->bias) rng_fill_uniform(b->rng, l->bias, -bound, bound);
}

Tensor *nn_linear(Tape *t, const Linear *l, Tensor *x) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(l);
    AG_CHECK_ARG(x);
    AG_CHECK(x != NULL && x->ndim >= 1 && x->shape[x->ndim - 1] == l->in,
             "nn_linear: x %s does not end in in_features = %d (weight '%s' %s)",
             tensor_shape_str(x), l->in, l->weight->name, tensor_shape_str(l->weight));
    return ag_linear(t, x, l->weight, l->bias);
}

/* ---- LayerNorm ---- */

void nn_layernorm_init(LayerNorm *ln, NnBuilder *b, const char *name, int C, double eps) {
    AG_CHECK_ARG(ln);
    AG_CHECK_ARG(b);
    AG_CHECK_ARG(name);
    NnBuilder s = nn_scope(b, "%s", name);
    ln->weight = nn_param(&s, "weight", 1, (int[]){C});
    ln->bias = nn_param(&s, "bias", 1, (int[]){C});
    tensor_fill(ln->weight, 1);
    ln->eps = eps;
}

Tensor *nn_layernorm(Tape *t, const LayerNorm *ln, Tensor *x) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(ln);
    AG_CHECK_ARG(x);
    return ag_layernorm(t, x, ln->weight, ln->bias, ln->eps);
}

Tensor *nn_add_layernorm(Tape *t, const LayerNorm *ln, Tensor *x, Tensor *f) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(ln);
    AG_CHECK_ARG(x);
    AG_CHECK_ARG(f);
    return ag_add_layernorm(t, x, f, ln->weight, ln->bias, ln->eps);
}

/* ---- Embedding ---- */

void nn_embedding_init(Embedding *e, NnBuilder *b, const char *name, int V, int C,
                       int padding_idx) {
    AG_CHECK_ARG(e);
    AG_CHECK_ARG(b);
    AG_CHECK_ARG(name);
    AG_CHECK(padding_idx == NN_NO_PADDING || (padding_idx >= 0 && padding_idx < V),
             "nn_embedding_init: padding_idx %d outside [0, %d) (NN_NO_PADDING: none) for '%s'",
             padding_idx, V, name);
    NnBuilder s = nn_scope(b, "%s", name);
    e->weight = nn_param(&s, "weight", 2, (int[]){V, C});
    e->padding_idx = padding_idx;
    if (b->rng) rng_fill_normal(b->rng, e->weight, 0, 1);
    if (padding_idx >= 0)
        memset(e->weight->data + (size_t)padding_idx * C, 0, (size_t)C * sizeof(Real));
}

Tensor *nn_embedding(Tape *t, const Embedding *e, const int *ids, int B, int T) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(e);
    AG_CHECK_ARG(ids);
    return ag_embedding_padded(t, e->weight, ids, B, T, e->padding_idx);
}

/* ---- positions ---- */

void nn_positional_init(PositionalEncoding *pe, NnBuilder *b, const char *name, int max_len, int C,
                        NnPositionKind kind) {
    AG_CHECK_ARG(pe);
    AG_CHECK_ARG(b);
    AG_CHECK_ARG(name);
    AG_CHECK(kind == NN_SINUSOIDAL || kind == NN_LEARNED,
             "nn_positional_init: '%s': kind %d is not NN_SINUSOIDAL or NN_LEARNED", name,
             (int)kind);
    pe->kind = kind;
    pe->max_len = max_len;
    if (kind == NN_LEARNED) {
        /* PyTorch has no such module; we name it like an nn.Parameter of the model */
        NnBuilder s = nn_scope(b, "%s", name);
        pe->table = nn_param(&s, "weight", 2, (int[]){max_len, C});
        if (b->rng) rng_fill_normal(b->rng, pe->table, 0, 0.02);
        return;
    }
    pe->table = tensor_new2(b->arena, max_len, C, "sinusoidal_positions");
    for (int pos = 0; pos < max_len; pos++)
        for (int i = 0; i < C; i += 2) {
            double angle = pos / pow(10000.0, (double)i / C);
            pe->table->data[(size_t)pos * C + i] = (Real)sin(angle);
            if (i + 1 < C) pe->table->data[(size_t)pos * C + i + 1] = (Real)cos(angle);
        }
}

Tensor *nn_positions(Tape *t, const PositionalEncoding *pe, int start, int T) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(pe);
    AG_CHECK(start >= 0 && T >= 1 && start + T <= pe->max_len,
             "nn_positions: positions [%d, %d) exceed max_len %d", start, start + T, pe->max_len);
    return nn_param_rows_on(t, pe->table, start, T, "positions");
}

Tensor *nn_positional(Tape *t, const PositionalEncoding *pe, Tensor *x, int start) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(pe);
    AG_CHECK_ARG(x);
    AG_CHECK(x->ndim == 3 && x->shape[2] == pe->table->shape[1],
             "nn_positional: x %s must be (B,T,%d)", tensor_shape_str(x), pe->table->shape[1]);
    return ag_add_bias(t, x, nn_positions(t, pe, start, x->shape[1]));
}

/* ---- feed-forward ---- */

void nn_ffn_init(FeedForward *f, NnBuilder *b, const char *name, int C, int ff, NnActivation act,
                 double dropout) {
    AG_CHECK_ARG(f);
    AG_CHECK_ARG(b);
    AG_CHECK_ARG(name);
    NnBuilder s = nn_scope(b, "%s", name);
    nn_linear_init(&f->linear1, &s, "linear1", C, ff, NN_BIAS);
    nn_linear_init(&f->linear2, &s, "linear2", ff, C, NN_BIAS);
    f->act = act;
    f->dropout = dropout;
}

Tensor *nn_ffn(Tape *t, const FeedForward *f, Tensor *x, Rng *rng) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(f);
    AG_CHECK_ARG(x);
    Tensor *h;
    if (f->act == NN_GELU) {
        h = ag_gelu(t, nn_linear(t, &f->linear1, x));
    } else { /* ReLU: in the product's store (ag_linear_relu) */
        AG_CHECK(x->ndim >= 1 && x->shape[x->ndim - 1] == f->linear1.in,
                 "nn_ffn: x %s does not end in in_features = %d (weight '%s' %s)",
                 tensor_shape_str(x), f->linear1.in, f->linear1.weight->name,
                 tensor_shape_str(f->linear1.weight));
        h = ag_linear_relu(t, x, f->linear1.weight, f->linear1.bias);
    }
    h = ag_dropout(t, h, f->dropout, rng);
    return nn_linear(t, &f->linear2, h);
}
