/* test_yardstick.c: the yardstick of the public API (docs/architecture.md shows it). A
 * decoder-only model (a tiny GPT: embeddings, learned positions, pre-LN causal blocks, a final
 * LayerNorm and a head) written against attograd.h alone, trained on a sequence task, saved and
 * resumed: 12 steps straight equal 6 steps, a checkpoint, everything rebuilt from the file alone
 * and 6 more, to the bit (losses and weights), with dropout on. No arena sizes, no name
 * buffers. The model and its loop are the lines between the two "----" markers: at most 60.
 * Not here: the checkpoint's refusals (tests/io/test_checkpoint.c). */
#include <criterion/criterion.h>
#include <string.h>

#include "attograd.h"
#include "files.h" /* the test harness's temporary folder (the model uses attograd.h alone) */

/* The data of step i (4 rows of 8 tokens counting up by 1..4 mod 11 from a start that moves
 * with i): the inputs (targets 0), or the next tokens (targets 1, -1 after a row's end). */
static const int *get_batch(int64_t i, int targets) {
    static int idx[4 * 8], next[4 * 8];
    for (int k = 0; k < 4 * 8; k++) idx[k] = (int)((i + k / 8 + k % 8 * (1 + k / 8)) % 11);
    for (int k = 0; k < 4 * 8; k++) next[k] = k % 8 == 7 ? -1 : idx[k + 1];
    return targets ? next : idx;
}

/* ---- the model and its loop: at most 60 lines ---- */
typedef struct {
    int vocab, block, n_layer;
    TransformerConfig layer; /* d_model, n_heads, dropout; a pre-LN causal GELU block */
} TinyConfig;
#define INT(f, lo, hi) CKPT_CFG_INT(TinyConfig, f, lo, hi)
static const CkptField gpt_fields[] = {
    INT(vocab, 2, 1 << 16),    INT(block, 1, 1 << 16),
    INT(n_layer, 1, 8),        INT(layer.d_model, 1, 4096),
    INT(layer.n_heads, 1, 64), CKPT_CFG_FLOAT(TinyConfig, layer.dropout, 0, 0.9)};
typedef struct {
    TinyConfig cfg;
    ParamList params;
    Embedding wte;
    PositionalEncoding wpe;
    EncoderLayer h[8];
    LayerNorm ln_f;
    Linear lm_head;
} Tiny;

static void gpt_init(Tiny *m, Arena *a, Rng *rng, const TinyConfig *c) {
    *m = (Tiny){.cfg = *c}; /* an empty parameter list */
    NnBuilder b = nn_builder(a, &m->params, rng);
    nn_embedding_init(&m->wte, &b, "wte", c->vocab, c->layer.d_model, NN_NO_PADDING);
    nn_positional_init(&m->wpe, &b, "wpe", c->block, c->layer.d_model, NN_LEARNED);
    for (int l = 0; l < c->n_layer; l++) {
        NnBuilder hl = nn_scope(&b, "h.%d", l); /* h.<l>.self_attn.in_proj_weight, ... */
        nn_encoder_layer_init(&m->h[l], &hl, "", &c->layer);
    }
    nn_layernorm_init(&m->ln_f, &b, "ln_f", c->layer.d_model, NN_LN_EPS);
    nn_linear_init(&m->lm_head, &b, "lm_head", c->layer.d_model, c->vocab, NN_NO_BIAS);
}

static Tensor *gpt_loss(Tape *t, Tiny *m, const int *idx, const int *tgt, int B, int T, Rng *rng) {
    Tensor *x = nn_positional(t, &m->wpe, nn_embedding(t, &m->wte, idx, B, T), 0);
    for (int l = 0; l < m->cfg.n_layer; l++) x = nn_encoder_layer(t, &m->h[l], x, NULL, rng);
    return ag_cross_entropy(t, nn_linear(t, &m->lm_head, nn_layernorm(t, &m->ln_f, x)), tgt, -1);
}

/* Trains to step `steps` (resuming from path when resume), saves to path; losses[step]. */
static void run(const char *path, int resume, int steps, double *losses) {
    TinyConfig c = {.vocab = 11, .block = 8, .n_layer = 2, .layer = {.d_model = 16, .n_heads = 2}};
    c.layer.dropout = 0.1, c.layer.pre_ln = 1, c.layer.act = NN_GELU, c.layer.causal = 1;
    Checkpoint ck = {.config = {"gpt", gpt_fields, 6, &c}};
    Arena *params = arena_new("params", 0), *step = arena_new("step", 0);
    Rng rng;
    rng_seed(&rng, 1);
    Tiny m;
    gpt_init(&m, params, &rng, &c);
    Optimizer *opt = optim_new(params, &m.params, &(OptimConfig){.kind = OPTIM_SGD, .lr = 0.3});
    ck.params = &m.params, ck.opt = opt, ck.rng = &rng;
    if (resume) cr_assert_eq(ckpt_load(path, &ck), AG_OK, "%s", ag_last_error()); /* all of it */
    Tape *t = ag_tape_new(step);
    for (int64_t i = optim_get_step(opt); i < steps; i++) {
        const int *idx = get_batch(i, 0), *next = get_batch(i, 1);
        ag_tape_reset(t);
        ag_params_zero_grad(&m.params);
        Tensor *loss = gpt_loss(t, &m, idx, next, 4, 8, &rng);
        ag_backward(t, loss);
        optim_step(opt);
        losses[i] = (double)loss->data[0];
    }
    cr_assert_eq(ckpt_save(path, &ck, 6, NULL), AG_OK, "%s", ag_last_error());
    ag_tape_free(t), arena_free(step), ag_params_free(&m.params), arena_free(params);
}
/* ---- */

Test(yardstick, a_decoder_only_model_trains_and_resumes_bit_exactly) {
    char dir[64], a[600], b[600];
    ts_tmp_dir(dir, sizeof dir, "yardstick");
    ts_join(a, dir, "straight.npz");
    ts_join(b, dir, "resumed.npz");
    double straight[12], resumed[12];
    run(a, 0, 12, straight);
    run(b, 0, 6, resumed);
    run(b, 1, 12, resumed);
    for (int i = 0; i < 12; i++)
        cr_assert(straight[i] == resumed[i], "step %d: loss %.17g straight, %.17g resumed", i,
                  straight[i], resumed[i]);
    cr_assert(straight[11] < 0.8 * straight[0], "the model does not learn: %g -> %g", straight[0],
              straight[11]);
    /* the file alone describes the model: its configuration reads back (checked) */
    TinyConfig read = {0};
    NpzFile *fa, *fb;
    cr_assert_eq(ckpt_read(b, &(CkptConfig){"gpt", gpt_fields, 6, &read, NULL}, &fb), AG_OK, "%s",
                 ag_last_error());
    cr_assert(read.vocab == 11 && read.block == 8 && read.n_layer == 2 &&
              read.layer.d_model == 16 && read.layer.n_heads == 2 && read.layer.dropout == 0.1);
    npz_free(fb);
    cr_assert_eq(npz_read(a, &fa, NULL), AG_OK, "%s", ag_last_error());
    cr_assert_eq(npz_read(b, &fb, NULL), AG_OK, "%s", ag_last_error());
    cr_assert_eq(fa->n, fb->n);
    for (int i = 0; i < fa->n; i++) {
        const NpzEntry *x = &fa->entries[i], *y = npz_find(fb, x->name);
        cr_assert(y && x->nbytes == y->nbytes && memcmp(x->data, y->data, x->nbytes) == 0,
                  "%s differs after resuming", x->name);
    }
    cr_assert(npz_find(fa, "h.1.self_attn.in_proj_weight") &&
              npz_find(fa, "meta.config.layer.dropout"));
    npz_free(fa);
    npz_free(fb);
    ts_rm_tree(dir);
}
