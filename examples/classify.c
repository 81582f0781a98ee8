/* classify.c: your own model with the library's whole trainer (README, "Write your own model").
 * An encoder-only classifier (embeddings, learned positions, pre-LN encoder layers, a linear
 * head over every position) learns whether a bracket sequence is balanced, on sequences it
 * generates (half balanced; the others as many '(' as ')' but closing one too early). It gives
 * src/run its flags, how to build itself, the loss of a shard of a step's batch, validation;
 * the run gives train, --resume to the bit, eval, --shards under mpirun, log.csv, loss.png.
 *   build/examples/classify --out build/classify; build/examples/classify eval
 * Not here: the trainer (src/run/run.h). Read next: docs/run.md. */
#include <stdlib.h>
#include <string.h>

#include "attograd.h"

typedef struct {
    int len, d_model, n_heads, n_layer;
    double dropout;
} Config;
static const CkptField config_fields[] = {
    CKPT_CFG_INT(Config, len, 2, 256), CKPT_CFG_INT(Config, d_model, 1, 1024),
    CKPT_CFG_INT(Config, n_heads, 1, 64), CKPT_CFG_INT(Config, n_layer, 1, 8),
    CKPT_CFG_FLOAT(Config, dropout, 0, 0.9)};

typedef struct {
    Config cfg;
    ParamList params;
    Embedding tok;
    PositionalEncoding pos;
    EncoderLayer layer[8];
    LayerNorm norm;
    Linear head;
    RunConfig *run;
    int *ids, *labels; /* (batch, len), (batch) */
} Model;

/* ---- the data: row j of step s, a pure function of (seed, s, j) ---- */
static int balanced(const int *x, int n) {
    int depth = 0;
    for (int i = 0; i < n && depth >= 0; i++) depth += x[i] == 1 ? 1 : -1;
    return depth == 0;
}
/* x[0..n): 1 '(' or 2 ')', as many of each; label 1 when balanced */
static int draw(uint64_t key, int *x, int n) {
    Rng g;
    rng_seed(&g, key);
    int want = (int)rng_below(&g, 2);
    do {
        for (int i = 0; i < n; i++) x[i] = 1 + (i >= n / 2);
        for (int i = n - 1; i > 0; i--) { /* a shuffle */
            int j = (int)rng_below(&g, (uint64_t)i + 1), t = x[i];
            x[i] = x[j], x[j] = t;
        }
    } while (balanced(x, n) != want);
    return want;
}
/* rows [r0, r1) of step s into ids, labels */
static void rows(Model *m, uint64_t s, int r0, int r1) {
    for (int j = r0; j < r1; j++)
        m->labels[j] = draw(rng_hash(rng_hash((uint64_t)m->run->seed, s), (uint64_t)j),
                            m->ids + (size_t)j * m->cfg.len, m->cfg.len);
}

/* ---- the model ---- */
static int build(void *ctx, Arena *a, Rng *init, ParamList **params) {
    Model *m = ctx;
    Config *c = &m->cfg;
    if (c->d_model % c->n_heads != 0 || c->len % 2)
        return ag_fail(AG_ERR_ARG, "--heads %d must divide --d-model %d, --len %d be even",
                       c->n_heads, c->d_model, c->len);
    NnBuilder b = nn_builder(a, &m->params, init);
    nn_embedding_init(&m->tok, &b, "tok", 3, c->d_model, NN_NO_PADDING);
    nn_positional_init(&m->pos, &b, "pos", c->len, c->d_model, NN_LEARNED);
    TransformerConfig lc = {.d_model = c->d_model, .n_heads = c->n_heads, .pre_ln = 1};
    lc.dropout = c->dropout, lc.act = NN_GELU;
    for (int l = 0; l < c->n_layer; l++) {
        NnBuilder lb = nn_scope(&b, "layer.%d", l);
        nn_encoder_layer_init(&m->layer[l], &lb, "", &lc);
    }
    nn_layernorm_init(&m->norm, &b, "norm", c->d_model, NN_LN_EPS);
    nn_linear_init(&m->head, &b, "head", c->len * c->d_model, 2, NN_BIAS);
    int n = m->run->batch > 512 ? m->run->batch : 512;
    m->ids = realloc(m->ids, (size_t)n * c->len * sizeof(int));
    m->labels = realloc(m->labels, (size_t)n * sizeof(int));
    AG_CHECK(m->ids && m->labels, "classify: out of memory");
    *params = &m->params;
    return AG_OK;
}

/* logits (B, 2) of rows [r0, r0 + B) */
static Tensor *forward(Model *m, Tape *t, int r0, int B, Rng *rng) {
    int T = m->cfg.len, C = m->cfg.d_model;
    Tensor *x =
        nn_positional(t, &m->pos, nn_embedding(t, &m->tok, m->ids + (size_t)r0 * T, B, T), 0);
    for (int l = 0; l < m->cfg.n_layer; l++) x = nn_encoder_layer(t, &m->layer[l], x, NULL, rng);
    x = ag_reshape(t, nn_layernorm(t, &m->norm, x), 2, (int[]){B, T * C});
    return nn_linear(t, &m->head, x);
}

static int batch(void *ctx, int64_t step, int lo, int hi, int S, double *tokens) {
    Model *m = ctx;
    int B = m->run->batch;
    rows(m, (uint64_t)step, (int)((int64_t)lo * B / S), (int)((int64_t)hi * B / S));
    *tokens = (double)B * m->cfg.len;
    return AG_OK;
}

static Tensor *loss(void *ctx, Tape *t, int i, int S, Rng *rng) {
    Model *m = ctx;
    int64_t B = m->run->batch, r0 = i * B / S, n = (i + 1) * B / S - r0;
    return n ? ag_cross_entropy(t, forward(m, t, (int)r0, (int)n, rng), m->labels + r0, -1) : NULL;
}

/* 512 rows no step draws (step 0): the mean loss and the accuracy */
static int validate(void *ctx, Tape *t, double *v) {
    Model *m = ctx;
    rows(m, 0, 0, 512);
    int prev = ag_no_grad(t, 1), right = 0;
    Tensor *logits = forward(m, t, 0, 512, NULL);
    v[0] = (double)ag_cross_entropy(t, logits, m->labels, -1)->data[0];
    for (int j = 0; j < 512; j++)
        right += (logits->data[2 * j + 1] > logits->data[2 * j]) == m->labels[j];
    v[1] = right / 512.0;
    ag_no_grad(t, prev);
    return AG_OK;
}

int main(int argc, char **argv) {
    dist_init();
    Model m = {.cfg = {.len = 12, .d_model = 32, .n_heads = 4, .n_layer = 2, .dropout = 0.1}};
    RunConfig rc = run_defaults();
    rc.steps = 300, rc.optim.lr = 3e-3, rc.optim.schedule.warmup = 20, rc.out = "build/classify";
    m.run = &rc;
    static const char *const metrics[] = {"loss", "accuracy"};
    RunModel model = {.prog = "classify", .ctx = &m, .build = build, .batch = batch, .loss = loss};
    model.validate = validate, model.n_metrics = 2, model.metric_names = metrics;
    model.config = (CkptConfig){"classify", config_fields, 5, &m.cfg, NULL};
    RunLoop *r = run_new(&model, &rc);
    Flag fl[5 + RUN_N_FLAGS] = {
        {"len", FLAG_INT, &m.cfg.len, "N", "brackets a sequence (even)", 2, 256, NULL, 0},
        {"d-model", FLAG_INT, &m.cfg.d_model, "N", "the model's width", 1, 1024, NULL, 0},
        {"heads", FLAG_INT, &m.cfg.n_heads, "N", "attention heads", 1, 64, NULL, 0},
        {"layers", FLAG_INT, &m.cfg.n_layer, "N", "encoder layers", 1, 8, NULL, 0},
        {"dropout", FLAG_DOUBLE, &m.cfg.dropout, "P", "dropout", 0, 0.9, NULL, 0}};
    int code = run_main(r, fl, 5 + run_flags(r, fl + 5), argc, argv);
    run_loop_free(r);
    ag_params_free(&m.params);
    free(m.ids), free(m.labels);
    dist_finalize();
    return code;
}
