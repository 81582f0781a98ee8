/* test_nn.c: every module gradient-checked in the double build (inputs and all parameters),
 * parameter names and shapes as in PyTorch's state_dict, and misuse of module constructors. */
#include <criterion/criterion.h>
#include <math.h>
#include <signal.h>
#include <string.h>

#include "cases.h"
#include "expect_abort.h"

/* module gradient checks: double build, eps 1e-6, tolerance 1e-6 (see README) */
#define EPS 1e-6
#define TOL 1e-6

/* Everything a module check needs: a parameter arena and list, an rng, a tape. */
typedef struct {
    Arena *arena;
    ParamList params;
    Rng rng;
    NnBuilder b;
    Tape *tape;
    Tensor *inputs[600];
    int n_inputs;
} ModEnv;

static void env_init(ModEnv *e) {
    memset(e, 0, sizeof *e);
    e->arena = arena_new("params", 4 << 20);
    ag_params_init(&e->params);
    rng_seed(&e->rng, 123);
    e->b = nn_builder(e->arena, &e->params, &e->rng);
    e->tape = ag_tape_new(arena_new("step", 32 << 20));
}

static void env_free(ModEnv *e) {
    arena_free(e->tape->arena);
    ag_tape_free(e->tape);
    ag_params_free(&e->params);
    arena_free(e->arena);
}

static Tensor *env_input(ModEnv *e, int ndim, const int *shape) {
    Tensor *x = tensor_new(e->arena, ndim, shape, "x");
    rng_fill_normal(&e->rng, x, 0, 1);
    tensor_requires_grad(x);
    return x;
}

/* Checks d(sum(out * R))/d(every input and every parameter) against central differences.
 * Parameters that are constant (LayerNorm weight 1, biases 0) are perturbed first so that no
 * symmetry hides a wrong term. */
#ifdef AG_REAL_DOUBLE
static void check(ModEnv *e, AgGradcheckFn fn, void *ctx, const char *what) {
    int n = 0;
    for (int i = 0; i < e->n_inputs; i++) e->inputs[n++] = e->inputs[i];
    for (int i = 0; i < e->params.n; i++) {
        Tensor *p = e->params.items[i];
        for (size_t j = 0; j < p->size; j++) p->data[j] += (Real)(0.1 * rng_normal(&e->rng));
        e->inputs[n++] = p;
    }
    AgGradcheckResult r;
    int ok = ag_gradcheck(e->tape, fn, ctx, e->inputs, n, EPS, TOL, &r);
    cr_assert(ok,
              "%s: worst error %.3g at input %d (%s) element %zu: analytic %.10g numeric %.10g"
              " (largest gradient %.3g)",
              what, r.max_err, r.input, e->inputs[r.input]->name, r.index, r.analytic, r.numeric,
              r.max_abs_grad);
    cr_log_info("%s: %zu elements, worst error %.2g", what, r.n_checked, r.max_err);
}
#endif

/* ---- Linear, LayerNorm, Embedding, positions, feed-forward ---- */

typedef struct {
    ModEnv *e;
    Linear lin;
    LayerNorm ln;
    Embedding emb;
    PositionalEncoding pe;
    FeedForward ffn;
    MultiHeadAttention mha;
    EncoderLayer enc;
    DecoderLayer dec;
    const AgMask *pad, *mem_pad;
    int causal, self, ids[64], B, T;
    uint64_t seed;
} Ctx;

#ifdef AG_REAL_DOUBLE
static Tensor *f_linear(Tape *t, Tensor **in, void *ctx) {
    return nn_linear(t, &((Ctx *)ctx)->lin, in[0]);
}
#endif

#ifdef AG_REAL_DOUBLE /* gradient checks run in the double build (make test runs both) */
Test(nn_linear, grad_matches_finite_differences_with_and_without_bias) {
    for (int bias = 0; bias <= 1; bias++) {
        ModEnv e;
        env_init(&e);
        Ctx c = {.e = &e};
        nn_linear_init(&c.lin, &e.b, "lin", 5, 3, bias ? NN_BIAS : NN_NO_BIAS);
        e.inputs[e.n_inputs++] = env_input(&e, 3, (int[]){2, 3, 5});
        check(&e, f_linear, &c, bias ? "linear with bias" : "linear without bias");
        env_free(&e);
    }
}
#endif

Test(nn_linear, init_is_uniform_within_one_over_sqrt_in) {
    ModEnv e;
    env_init(&e);
    Linear l;
    nn_linear_init(&l, &e.b, "lin", 64, 32, NN_BIAS);
    double bound = 1 / sqrt(64.0), mx = 0;
    for (size_t i = 0; i < l.weight->size; i++) mx = fmax(mx, fabs((double)l.weight->data[i]));
    cr_assert(mx <= bound && mx > 0.9 * bound, "max |w| %g vs bound %g", mx, bound);
    cr_assert(strcmp(l.weight->name, "lin.weight") == 0 && strcmp(l.bias->name, "lin.bias") == 0);
    cr_assert(l.weight->shape[0] == 32 && l.weight->shape[1] == 64, "weight is (out, in)");
    env_free(&e);
}

/* ---- the builder: scoped names ---- */

Test(nn_scope, nested_scopes_prefix_names_and_end_with_their_block) {
    ModEnv e;
    env_init(&e);
    for (int l = 0; l < 2; l++) {
        NnBuilder lb = nn_scope(&e.b, "blocks.%d", l);
        NnBuilder attn = nn_scope(&lb, "attn");
        nn_linear_init(&(Linear){0}, &attn, "proj", 2, 3, NN_BIAS);
        nn_layernorm_init(&(LayerNorm){0}, &lb, "ln", 3, NN_LN_EPS);
    }
    nn_param(&e.b, "top", 1, (int[]){4});                     /* the top scope is untouched */
    nn_linear_init(&(Linear){0}, &e.b, "", 2, 2, NN_NO_BIAS); /* "" names the scope itself */
    const char *names[] = {"blocks.0.attn.proj.weight",
                           "blocks.0.attn.proj.bias",
                           "blocks.0.ln.weight",
                           "blocks.0.ln.bias",
                           "blocks.1.attn.proj.weight",
                           "blocks.1.attn.proj.bias",
                           "blocks.1.ln.weight",
                           "blocks.1.ln.bias",
                           "top",
                           "weight"};
    cr_assert_eq(e.params.n, 10);
    for (int i = 0; i < 10; i++) cr_assert_str_eq(e.params.items[i]->name, names[i]);
    cr_assert_str_eq(e.b.scope, "");
    env_free(&e);
}

Test(nn_scope, aborts_when_a_name_does_not_fit, .signal = SIGABRT) {
    ModEnv e;
    env_init(&e);
    char part[AG_NAME_LEN - 8];
    memset(part, 'a', sizeof part - 1);
    part[sizeof part - 1] = 0;
    NnBuilder s = nn_scope(&e.b, "%s", part); /* fits: 86 characters */
    nn_param(&s, "too_long_now", 1, (int[]){1});
}

Test(nn_param, aborts_on_a_name_that_exists, .signal = SIGABRT) {
    ModEnv e;
    env_init(&e);
    NnBuilder s = nn_scope(&e.b, "lin");
    nn_param(&e.b, "lin.weight", 1, (int[]){1});
    nn_param(&s, "weight", 1, (int[]){1});
}

Test(nn_module_inits, abort_on_a_flag_out_of_range, .signal = SIGABRT) {
    ModEnv e;
    env_init(&e);
    nn_linear_init(&(Linear){0}, &e.b, "lin", 2, 3, (NnBias)2); /* a count, not a flag */
}

#ifdef AG_REAL_DOUBLE
static Tensor *f_layernorm(Tape *t, Tensor **in, void *ctx) {
    return nn_layernorm(t, &((Ctx *)ctx)->ln, in[0]);
}
#endif

#ifdef AG_REAL_DOUBLE /* gradient checks run in the double build (make test runs both) */
Test(nn_layernorm, grad_matches_finite_differences) {
    ModEnv e;
    env_init(&e);
    Ctx c = {.e = &e};
    nn_layernorm_init(&c.ln, &e.b, "ln", 7, NN_LN_EPS);
    e.inputs[e.n_inputs++] = env_input(&e, 3, (int[]){2, 3, 7});
    check(&e, f_layernorm, &c, "layernorm");
    env_free(&e);
}
#endif

#ifdef AG_REAL_DOUBLE
static Tensor *f_embed_pos(Tape *t, Tensor **in, void *ctx) {
    (void)in;
    Ctx *c = ctx;
    return nn_positional(t, &c->pe, nn_embedding(t, &c->emb, c->ids, c->B, c->T), 1);
}
#endif

#ifdef AG_REAL_DOUBLE /* gradient checks run in the double build (make test runs both) */
Test(nn_embedding, embedding_and_learned_positions_grad_match) {
    ModEnv e;
    env_init(&e);
    Ctx c = {.e = &e, .B = 2, .T = 4};
    nn_embedding_init(&c.emb, &e.b, "emb", 6, 5, NN_NO_PADDING);
    nn_positional_init(&c.pe, &e.b, "pos", 8, 5, NN_LEARNED);
    for (int i = 0; i < 8; i++) c.ids[i] = (3 * i + 1) % 6;
    check(&e, f_embed_pos, &c, "embedding + learned positions");
    env_free(&e);
}
#endif

Test(nn_positional, sinusoidal_table_matches_the_formula) {
    ModEnv e;
    env_init(&e);
    PositionalEncoding pe;
    nn_positional_init(&pe, &e.b, "pos", 50, 16, NN_SINUSOIDAL);
    cr_assert_eq(e.params.n, 0, "sinusoidal positions are not parameters");
    for (int pos = 0; pos < 50; pos += 7)
        for (int i = 0; i < 16; i += 2) {
            double angle = pos / pow(10000.0, i / 16.0);
            cr_assert(fabs((double)pe.table->data[pos * 16 + i] - sin(angle)) < 1e-6);
            cr_assert(fabs((double)pe.table->data[pos * 16 + i + 1] - cos(angle)) < 1e-6);
        }
    env_free(&e);
}

/* positions past the table abort naming them: through nn_positional, and through a seq2seq
 * forward, whose sinusoidal positions go into ag_embedding_rows without nn_positional */
static void positional_past_max_len(void *ctx) {
    (void)ctx;
    ModEnv e;
    env_init(&e);
    PositionalEncoding pe;
    nn_positional_init(&pe, &e.b, "pos", 8, 4, NN_SINUSOIDAL);
    Tensor *x = tensor_zeros(e.tape->arena, 3, (int[]){1, 3, 4}, "x");
    nn_positional(e.tape, &pe, x, 6);
}
static void seq2seq_past_max_len(void *ctx) {
    (void)ctx;
    ModEnv e;
    env_init(&e);
    Seq2SeqConfig cfg = {0};
    cfg.src_vocab = cfg.tgt_vocab = 7;
    cfg.max_len = 4;
    cfg.layer.d_model = 8;
    cfg.layer.n_heads = 2;
    cfg.layer.d_ff = 16;
    cfg.n_enc_layers = cfg.n_dec_layers = 1;
    Seq2Seq m;
    nn_seq2seq_init(&m, e.arena, &e.rng, &cfg);
    int src[5] = {1, 2, 3, 4, 5};
    nn_seq2seq_encode(e.tape, &m, src, 1, 5, &e.rng);
}
Test(nn_positional, positions_past_max_len_abort_naming_them) {
    Capture c;
    capture_run(positional_past_max_len, NULL, &c);
    cr_assert(capture_aborted(&c) && capture_has(&c, "positions [6, 9) exceed max_len 8"), "%s",
              c.err);
    capture_run(seq2seq_past_max_len, NULL, &c);
    cr_assert(capture_aborted(&c) && capture_has(&c, "positions [0, 5) exceed max_len 4"), "%s",
              c.err);
}

#ifdef AG_REAL_DOUBLE
static Tensor *f_ffn(Tape *t, Tensor **in, void *ctx) {
    Ctx *c = ctx;
    Rng rng;
    rng_seed(&rng, c->seed);
    return nn_ffn(t, &c->ffn, in[0], &rng);
}
#endif

#ifdef AG_REAL_DOUBLE /* gradient checks run in the double build (make test runs both) */
Test(nn_ffn, relu_gelu_and_dropout_grad_match) {
    for (int v = 0; v < 3; v++) {
        ModEnv e;
        env_init(&e);
        Ctx c = {.e = &e, .seed = 5};
        nn_ffn_init(&c.ffn, &e.b, "layer", 6, 11, v == 1 ? NN_GELU : NN_RELU, v == 2 ? 0.25 : 0);
        e.inputs[e.n_inputs++] = env_input(&e, 3, (int[]){2, 3, 6});
        check(&e, f_ffn, &c, v == 0 ? "ffn relu" : v == 1 ? "ffn gelu" : "ffn dropout");
        cr_assert(ag_params_find(&e.params, "layer.linear1.weight") != NULL);
        cr_assert(ag_params_find(&e.params, "layer.linear2.bias") != NULL);
        env_free(&e);
    }
}
#endif

/* ---- multi-head attention ---- */

#ifdef AG_REAL_DOUBLE
static Tensor *f_mha(Tape *t, Tensor **in, void *ctx) {
    Ctx *c = ctx;
    Rng rng;
    rng_seed(&rng, c->seed);
    AgAttnMask masks = {.key_padding = c->pad, .causal = c->causal};
    Tensor *key = c->self == 1 ? in[0] : in[1], *value = c->self == 2 ? in[2] : key;
    return nn_mha_forward(t, &c->mha, in[0], key, value, &masks, &rng);
}
#endif

typedef struct {
    const char *name;
    int B, Tq, Tk, C, NH, NKV, causal, pad;
    int self; /* 1: query = key = value; 0: key = value; 2: distinct key and value */
    int gates;
    double dropout;
} MhaCase;

#ifdef AG_REAL_DOUBLE
static const MhaCase mha_cases[] = {
    {"self-attention", 2, 4, 4, 8, 2, 2, 0, 0, 1, 0, 0},
    {"cross-attention Tq 3 != Tk 5", 2, 3, 5, 8, 2, 2, 0, 0, 0, 0, 0},
    {"causal + padding", 2, 4, 4, 8, 2, 2, 1, 1, 1, 0, 0},
    {"fully masked row", 2, 3, 4, 8, 2, 2, 0, 2, 0, 0, 0},
    {"grouped-query NH 4 NKV 2", 2, 3, 5, 8, 4, 2, 0, 1, 0, 0, 0},
    {"multi-query NH 4 NKV 1", 2, 4, 4, 8, 4, 1, 1, 0, 1, 0, 0},
    {"head gates", 2, 3, 4, 8, 2, 2, 0, 1, 0, 1, 0},
    {"attention dropout", 2, 4, 4, 8, 2, 2, 0, 0, 1, 0, 0.2},
    {"distinct key and value + padding", 2, 3, 5, 8, 2, 2, 0, 1, 2, 0, 0},
    {"distinct key and value, grouped-query, causal", 2, 3, 5, 8, 4, 2, 1, 0, 2, 0, 0},
    {"distinct key and value, head gates", 2, 3, 5, 8, 2, 2, 0, 1, 2, 1, 0},
};
#endif

#ifdef AG_REAL_DOUBLE /* gradient checks run in the double build (make test runs both) */
Test(nn_mha, grad_matches_finite_differences_in_every_configuration) {
    /* key padding: pad 1 masks the last key of batch 1; pad 2 masks every key of batch 1 */
    static const uint8_t pad1[2][5] = {{0, 0, 0, 0, 0}, {0, 0, 0, 1, 1}};
    static const uint8_t pad2[2][4] = {{0, 0, 1, 0}, {1, 1, 1, 1}};
    for (size_t k = 0; k < sizeof mha_cases / sizeof mha_cases[0]; k++) {
        const MhaCase *mc = &mha_cases[k];
        ModEnv e;
        env_init(&e);
        Ctx c = {.e = &e, .causal = mc->causal, .self = mc->self, .seed = 9};
        uint8_t pad[2 * 5];
        for (int b = 0; b < mc->B; b++)
            for (int j = 0; j < mc->Tk; j++)
                pad[b * mc->Tk + j] = mc->pad == 1 ? pad1[b][j] : mc->pad == 2 ? pad2[b][j] : 0;
        AgMask mask = {pad, mc->B, mc->Tk};
        c.pad = mc->pad ? &mask : NULL;
        nn_mha_init(&c.mha, &e.b, "attn",
                    &(MhaConfig){.d_model = mc->C,
                                 .n_heads = mc->NH,
                                 .n_kv_heads = mc->NKV,
                                 .dropout = mc->dropout});
        Tensor *q = env_input(&e, 3, (int[]){mc->B, mc->Tq, mc->C});
        Tensor *kv = mc->self == 1 ? q : env_input(&e, 3, (int[]){mc->B, mc->Tk, mc->C});
        e.inputs[e.n_inputs++] = q;
        if (mc->self != 1) e.inputs[e.n_inputs++] = kv;
        if (mc->self == 2) e.inputs[e.n_inputs++] = env_input(&e, 3, (int[]){mc->B, mc->Tk, mc->C});
        if (mc->gates) {
            nn_mha_track_gates(&c.mha, 1);
            c.mha.gate->data[0] = (Real)0.7;
            c.mha.gate->data[1] = (Real)-1.3;
            e.inputs[e.n_inputs++] = c.mha.gate;
        }
        check(&e, f_mha, &c, mc->name);
        if (mc->pad == 2) { /* the fully masked query rows of batch 1: output is the out bias */
            for (size_t i = 0; i < q->size; i++) cr_assert(isfinite((double)q->grad[i]));
        }
        env_free(&e);
    }
}
#endif

Test(nn_mha, parameters_are_named_like_pytorch) {
    ModEnv e;
    env_init(&e);
    MultiHeadAttention m, g;
    nn_mha_init(&m, &e.b, "self_attn", &(MhaConfig){.d_model = 16, .n_heads = 4});
    nn_mha_init(&g, &e.b, "gqa", &(MhaConfig){.d_model = 16, .n_heads = 4, .n_kv_heads = 2});
    const char *names[] = {
        "self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight",
        "self_attn.out_proj.bias",  "gqa.q_proj.weight",      "gqa.q_proj.bias",
        "gqa.k_proj.weight",        "gqa.k_proj.bias",        "gqa.v_proj.weight",
        "gqa.v_proj.bias",          "gqa.out_proj.weight",    "gqa.out_proj.bias"};
    cr_assert_eq(e.params.n, 12);
    for (int i = 0; i < 12; i++) cr_assert_str_eq(e.params.items[i]->name, names[i]);
    cr_assert_eq(e.params.items[0]->shape[0], 48);
    cr_assert_eq(ag_params_find(&e.params, "gqa.k_proj.weight")->shape[0], 8);
    env_free(&e);
}

Test(nn_mha, probabilities_kept_after_every_forward_and_zero_gate_ablates) {
    ModEnv e;
    env_init(&e);
    MultiHeadAttention m;
    nn_mha_init(&m, &e.b, "attn", &(MhaConfig){.d_model = 8, .n_heads = 2});
    Tensor *x = env_input(&e, 3, (int[]){1, 3, 8});
    ag_no_grad(e.tape, 1);
    Tensor *y = nn_mha_forward(e.tape, &m, x, x, x, &(AgAttnMask){.causal = 1}, NULL);
    cr_assert(m.last_probs != NULL);
    cr_assert(m.last_probs->ndim == 4 && m.last_probs->shape[1] == 2 &&
              m.last_probs->shape[3] == 3);
    cr_assert_eq(m.last_probs->data[1], 0, "causal: query 0 does not see key 1");
    /* ablating both heads leaves only the output bias */
    m.gate->data[0] = m.gate->data[1] = 0;
    y = nn_mha_forward(e.tape, &m, x, x, x, &(AgAttnMask){.causal = 1}, NULL);
    for (int tq = 0; tq < 3; tq++)
        for (int c = 0; c < 8; c++) cr_assert_eq(y->data[tq * 8 + c], m.out_proj.bias->data[c]);
    env_free(&e);
}

Test(nn_mha, aborts_when_the_padding_mask_has_another_shape, .signal = SIGABRT) {
    ModEnv e;
    env_init(&e);
    MultiHeadAttention m;
    nn_mha_init(&m, &e.b, "attn", &(MhaConfig){.d_model = 8, .n_heads = 2});
    Tensor *q = env_input(&e, 3, (int[]){2, 3, 8}), *kv = env_input(&e, 3, (int[]){2, 5, 8});
    static const uint8_t bytes[2 * 3] = {0};
    AgMask wrong = {bytes, 2, 3}; /* (B, Tq) instead of (B, Tk) */
    nn_mha_forward(e.tape, &m, q, kv, kv, &(AgAttnMask){.key_padding = &wrong}, NULL);
}

/* distinct key and value: the keys decide where each query looks, the values what it reads */
Test(nn_mha, distinct_key_and_value_attend_by_key_and_read_the_value) {
    ModEnv e;
    env_init(&e);
    MultiHeadAttention m;
    nn_mha_init(&m, &e.b, "attn", &(MhaConfig){.d_model = 8, .n_heads = 2});
    Tensor *q = env_input(&e, 3, (int[]){2, 3, 8}), *k = env_input(&e, 3, (int[]){2, 5, 8});
    Tensor *v = env_input(&e, 3, (int[]){2, 5, 8});
    ag_no_grad(e.tape, 1);
    Tensor *kv = nn_mha_forward(e.tape, &m, q, k, k, NULL, NULL);
    Real probs_kk[2 * 2 * 3 * 5];
    memcpy(probs_kk, m.last_probs->data, sizeof probs_kk);
    Tensor *y = nn_mha_forward(e.tape, &m, q, k, v, NULL, NULL);
    cr_assert(memcmp(probs_kk, m.last_probs->data, sizeof probs_kk) == 0, "weights from the keys");
    /* by hand: out_proj(P (v W_v^T + b_v)) with P the probabilities, per head */
    Tensor *vp = nn_linear(e.tape, &m.v_proj, v);
    double worst = 0, moved = 0;
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < 3; i++) {
            Real o[8] = {0};
            for (int h = 0; h < 2; h++)
                for (int j = 0; j < 5; j++)
                    for (int d = 0; d < 4; d++)
                        o[h * 4 + d] += m.last_probs->data[((b * 2 + h) * 3 + i) * 5 + j] *
                                        vp->data[(b * 5 + j) * 8 + h * 4 + d];
            for (int c = 0; c < 8; c++) {
                double want = m.out_proj.bias->data[c];
                for (int d = 0; d < 8; d++) want += m.out_proj.weight->data[c * 8 + d] * o[d];
                worst = fmax(worst, fabs(want - y->data[(b * 3 + i) * 8 + c]));
                moved =
                    fmax(moved, fabs(y->data[(b * 3 + i) * 8 + c] - kv->data[(b * 3 + i) * 8 + c]));
            }
        }
    cr_assert(worst < 1e-5, "output differs from P v by %g", worst);
    cr_assert(moved > 1e-2, "the values were not read (max change %g)", moved);
    env_free(&e);
}

Test(nn_mha, aborts_when_key_and_value_lengths_differ, .signal = SIGABRT) {
    ModEnv e;
    env_init(&e);
    MultiHeadAttention m;
    nn_mha_init(&m, &e.b, "attn", &(MhaConfig){.d_model = 8, .n_heads = 2});
    Tensor *q = env_input(&e, 3, (int[]){2, 3, 8}), *k = env_input(&e, 3, (int[]){2, 5, 8});
    nn_mha_forward(e.tape, &m, q, k, env_input(&e, 3, (int[]){2, 4, 8}), NULL, NULL);
}

Test(nn_mha, aborts_when_heads_do_not_divide, .signal = SIGABRT) {
    ModEnv e;
    env_init(&e);
    MultiHeadAttention m;
    nn_mha_init(&m, &e.b, "attn", &(MhaConfig){.d_model = 10, .n_heads = 4});
}

Test(nn_mha, aborts_when_kv_heads_do_not_divide_heads, .signal = SIGABRT) {
    ModEnv e;
    env_init(&e);
    MultiHeadAttention m;
    nn_mha_init(&m, &e.b, "attn", &(MhaConfig){.d_model = 12, .n_heads = 4, .n_kv_heads = 3});
}

/* ---- transformer layers and the seq2seq model ---- */

/* A causal pre-LN encoder layer is what a hand-written GPT block (pre-LN, causal attention)
 * computes, to the bit. */
Test(nn_transformer, causal_encoder_layer_is_the_gpt_block) {
    ModEnv e;
    env_init(&e);
    EncoderLayer l;
    nn_encoder_layer_init(
        &l, &e.b, "",
        &(TransformerConfig){.d_model = 8, .n_heads = 2, .pre_ln = 1, .act = NN_GELU, .causal = 1});
    enum { B = 2, T = 5, C = 8 };
    Tensor *x = env_input(&e, 3, (int[]){B, T, C});
    ag_no_grad(e.tape, 1);
    Tensor *y = nn_encoder_layer(e.tape, &l, x, NULL, NULL);
    Tensor *h = nn_layernorm(e.tape, &l.norm1, x);
    Tensor *r = ag_add(
        e.tape, x, nn_mha_forward(e.tape, &l.self_attn, h, h, h, &(AgAttnMask){.causal = 1}, NULL));
    r = ag_add(e.tape, r, nn_ffn(e.tape, &l.ffn, nn_layernorm(e.tape, &l.norm2, r), NULL));
    cr_assert(memcmp(y->data, r->data, y->size * sizeof(Real)) == 0, "not the hand-written block");
    env_free(&e);
}

/* Causality, post- and pre-LN: for every position j, changing x[:, j] leaves the output rows
 * t < j bit-identical and changes every row t >= j (row j through the residual, later rows
 * through attention). No padding, so that every later row sees j. */
Test(nn_transformer, causal_encoder_layer_rows_before_j_ignore_input_j) {
    enum { B = 2, T = 6, C = 8 };
    for (int pre = 0; pre <= 1; pre++) {
        ModEnv e;
        env_init(&e);
        EncoderLayer l;
        nn_encoder_layer_init(
            &l, &e.b, "",
            &(TransformerConfig){.d_model = C, .n_heads = 2, .pre_ln = pre, .causal = 1});
        Tensor *x = env_input(&e, 3, (int[]){B, T, C}); /* x (B, T, C) */
        ag_no_grad(e.tape, 1);
        Real x0[B * T * C], y0[B * T * C];
        memcpy(x0, x->data, sizeof x0);
        memcpy(y0, nn_encoder_layer(e.tape, &l, x, NULL, NULL)->data, sizeof y0);
        for (int j = 0; j < T; j++) {
            memcpy(x->data, x0, sizeof x0);
            for (int b = 0; b < B; b++)
                for (int c = 0; c < C; c++) x->data[(b * T + j) * C + c] += (Real)(0.5 + 0.1 * c);
            ag_tape_reset(e.tape);
            ag_no_grad(e.tape, 1);
            Tensor *y = nn_encoder_layer(e.tape, &l, x, NULL, NULL); /* (B, T, C) */
            for (int b = 0; b < B; b++)
                for (int t = 0; t < T; t++) {
                    size_t at = ((size_t)b * T + t) * C;
                    int same = memcmp(y0 + at, y->data + at, C * sizeof(Real)) == 0;
                    cr_assert(same == (t < j), "%s, x[%d, %d] changed: output row %d %s",
                              pre ? "pre-LN" : "post-LN", b, j, t,
                              same ? "did not change" : "saw a later position");
                }
        }
        env_free(&e);
    }
}

Test(nn_seq2seq, aborts_on_a_causal_encoder, .signal = SIGABRT) {
    Seq2SeqConfig cfg = nn_seq2seq_default_config(7, 6, 8, 2, 1);
    cfg.layer.causal = 1;
    Rng rng;
    rng_seed(&rng, 1);
    Seq2Seq m;
    nn_seq2seq_init(&m, arena_new("params", 1 << 20), &rng, &cfg);
}

Test(nn_transformer, zero_config_fields_take_the_documented_defaults) {
    ModEnv e;
    env_init(&e);
    EncoderLayer l;
    nn_encoder_layer_init(&l, &e.b, "enc", &(TransformerConfig){.d_model = 8, .n_heads = 2});
    cr_assert_eq(ag_params_find(&e.params, "enc.linear1.weight")->shape[0], 32, "d_ff 4 d_model");
    cr_assert_eq(l.self_attn.n_kv_heads, 2, "n_kv_heads = n_heads");
    cr_assert(l.norm1.eps == NN_LN_EPS && l.norm2.eps == NN_LN_EPS && l.pre_ln == 0);
    cr_assert(l.ffn.act == NN_RELU && l.dropout == 0);
    MultiHeadAttention m;
    nn_mha_init(&m, &e.b, "nb", &(MhaConfig){.d_model = 8, .n_heads = 2, .no_bias = 1});
    cr_assert(m.in_proj_bias == NULL && m.out_proj.bias == NULL && m.q_proj.bias == NULL);
    cr_assert(ag_params_find(&e.params, "nb.in_proj_weight") != NULL);
    env_free(&e);
}

#ifdef AG_REAL_DOUBLE
static Tensor *f_enc(Tape *t, Tensor **in, void *ctx) {
    Ctx *c = ctx;
    Rng rng;
    rng_seed(&rng, c->seed);
    return nn_encoder_layer(t, &c->enc, in[0], c->pad, &rng);
}
#endif

#ifdef AG_REAL_DOUBLE
static Tensor *f_dec(Tape *t, Tensor **in, void *ctx) {
    Ctx *c = ctx;
    Rng rng;
    rng_seed(&rng, c->seed);
    return nn_decoder_layer(t, &c->dec, in[0], in[1], c->pad, c->mem_pad, &rng);
}
#endif

#ifdef AG_REAL_DOUBLE /* gradient checks run in the double build (make test runs both) */
Test(nn_transformer, encoder_and_decoder_layers_grad_match_post_and_pre_ln) {
    static const uint8_t tgt_bytes[2 * 4] = {0, 0, 0, 0, 0, 0, 0, 1};
    static const uint8_t src_bytes[2 * 5] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1};
    static const AgMask tgt_pad = {tgt_bytes, 2, 4}, src_pad = {src_bytes, 2, 5};
    for (int pre = 0; pre <= 1; pre++) {
        TransformerConfig cfg = {
            .d_model = 8, .n_heads = 2, .d_ff = 12, .dropout = 0.1, .pre_ln = pre};
        ModEnv e;
        env_init(&e);
        Ctx c = {.e = &e, .seed = 3, .pad = &src_pad};
        nn_encoder_layer_init(&c.enc, &e.b, "encoder.layers.0", &cfg);
        e.inputs[e.n_inputs++] = env_input(&e, 3, (int[]){2, 5, 8});
        check(&e, f_enc, &c, pre ? "encoder layer pre-LN" : "encoder layer post-LN");
        env_free(&e);

        /* the GPT block: a causal encoder layer, with padding at the end of a row and gelu */
        env_init(&e);
        c = (Ctx){.e = &e, .seed = 5, .pad = &src_pad};
        TransformerConfig gpt = cfg;
        gpt.causal = 1;
        gpt.act = NN_GELU;
        nn_encoder_layer_init(&c.enc, &e.b, "blocks.0", &gpt);
        e.inputs[e.n_inputs++] = env_input(&e, 3, (int[]){2, 5, 8});
        check(&e, f_enc, &c, pre ? "causal encoder layer pre-LN" : "causal encoder layer post-LN");
        env_free(&e);

        env_init(&e);
        c = (Ctx){.e = &e, .seed = 4, .pad = &tgt_pad, .mem_pad = &src_pad};
        nn_decoder_layer_init(&c.dec, &e.b, "decoder.layers.0", &cfg);
        e.inputs[e.n_inputs++] = env_input(&e, 3, (int[]){2, 4, 8});
        e.inputs[e.n_inputs++] = env_input(&e, 3, (int[]){2, 5, 8});
        check(&e, f_dec, &c, pre ? "decoder layer pre-LN" : "decoder layer post-LN");
        env_free(&e);
    }
}
#endif

typedef struct {
    Seq2Seq *m;
    int src[2 * 5], tgt_in[2 * 4], tgt_out[2 * 4];
} S2SCtx;

#ifdef AG_REAL_DOUBLE
static Tensor *f_s2s(Tape *t, Tensor **in, void *ctx) {
    (void)in;
    S2SCtx *c = ctx;
    Rng rng;
    rng_seed(&rng, 17);
    Tensor *loss = nn_seq2seq_loss(t, c->m, c->src, 5, c->tgt_in, c->tgt_out, 2, 4, &rng);
    return ag_reshape(t, loss, 1, (int[]){1});
}
#endif

#ifdef AG_REAL_DOUBLE /* gradient checks run in the double build (make test runs both) */
Test(nn_seq2seq, whole_loss_grad_matches_finite_differences) {
    for (int variant = 0; variant < 2; variant++) {
        Seq2SeqConfig cfg = nn_seq2seq_default_config(7, 6, 8, 2, 1);
        cfg.layer.d_ff = 12;
        cfg.max_len = 8;
        cfg.layer.dropout = variant ? 0.1 : 0;
        cfg.tie_output = variant;
        cfg.learned_pos = variant;
        cfg.layer.pre_ln = variant;
        Arena *a = arena_new("params", 4 << 20);
        Rng rng;
        rng_seed(&rng, 1);
        Seq2Seq m;
        nn_seq2seq_init(&m, a, &rng, &cfg);
        Tape *tape = ag_tape_new(arena_new("step", 32 << 20));
        S2SCtx c = {
            &m, {3, 4, 5, 2, 1, 6, 2, 3, 0, 0}, {1, 3, 4, 5, 1, 2, 0, 0}, {3, 4, 5, 2, 2, 2, 0, 0}};
        Tensor *inputs[128];
        for (int i = 0; i < m.params.n; i++) {
            inputs[i] = m.params.items[i];
            for (size_t j = 0; j < inputs[i]->size; j++)
                inputs[i]->data[j] += (Real)(0.1 * rng_normal(&rng));
        }
        AgGradcheckResult r;
        int ok = ag_gradcheck(tape, f_s2s, &c, inputs, m.params.n, EPS, TOL, &r);
        cr_assert(ok,
                  "seq2seq variant %d: worst error %.3g at %s[%zu]: analytic %.10g numeric "
                  "%.10g",
                  variant, r.max_err, inputs[r.input]->name, r.index, r.analytic, r.numeric);
        /* padding rows of the embeddings get no gradient */
        for (int j = 0; j < 8; j++) cr_assert_eq(m.src_embed.weight->grad[j], 0);
        arena_free(tape->arena);
        ag_tape_free(tape);
        nn_seq2seq_free(&m);
        arena_free(a);
    }
}
#endif

Test(nn_seq2seq, parameter_names_match_torch_nn_transformer) {
    Seq2SeqConfig cfg = nn_seq2seq_default_config(10, 11, 16, 4, 1);
    Arena *a = arena_new("params", 8 << 20);
    Rng rng;
    rng_seed(&rng, 1);
    Seq2Seq m;
    nn_seq2seq_init(&m, a, &rng, &cfg);
    const char *expect[] = {"src_embed.weight",
                            "tgt_embed.weight",
                            "encoder.layers.0.self_attn.in_proj_weight",
                            "encoder.layers.0.self_attn.in_proj_bias",
                            "encoder.layers.0.self_attn.out_proj.weight",
                            "encoder.layers.0.self_attn.out_proj.bias",
                            "encoder.layers.0.linear1.weight",
                            "encoder.layers.0.linear1.bias",
                            "encoder.layers.0.linear2.weight",
                            "encoder.layers.0.linear2.bias",
                            "encoder.layers.0.norm1.weight",
                            "encoder.layers.0.norm1.bias",
                            "encoder.layers.0.norm2.weight",
                            "encoder.layers.0.norm2.bias",
                            "encoder.norm.weight",
                            "encoder.norm.bias",
                            "decoder.layers.0.self_attn.in_proj_weight",
                            "decoder.layers.0.self_attn.in_proj_bias",
                            "decoder.layers.0.self_attn.out_proj.weight",
                            "decoder.layers.0.self_attn.out_proj.bias",
                            "decoder.layers.0.multihead_attn.in_proj_weight",
                            "decoder.layers.0.multihead_attn.in_proj_bias",
                            "decoder.layers.0.multihead_attn.out_proj.weight",
                            "decoder.layers.0.multihead_attn.out_proj.bias",
                            "decoder.layers.0.linear1.weight",
                            "decoder.layers.0.linear1.bias",
                            "decoder.layers.0.linear2.weight",
                            "decoder.layers.0.linear2.bias",
                            "decoder.layers.0.norm1.weight",
                            "decoder.layers.0.norm1.bias",
                            "decoder.layers.0.norm2.weight",
                            "decoder.layers.0.norm2.bias",
                            "decoder.layers.0.norm3.weight",
                            "decoder.layers.0.norm3.bias",
                            "decoder.norm.weight",
                            "decoder.norm.bias",
                            "generator.weight",
                            "generator.bias"};
    int n = (int)(sizeof expect / sizeof expect[0]);
    cr_assert_eq(m.params.n, n, "%d parameters, expected %d", m.params.n, n);
    for (int i = 0; i < n; i++) cr_assert_str_eq(m.params.items[i]->name, expect[i]);
    cr_assert_eq(ag_params_find(&m.params, "encoder.layers.0.linear1.weight")->shape[0], 64);
    nn_seq2seq_free(&m);
    arena_free(a);
}

/* Incremental decoding with the key/value cache gives, at every step, the logits of the
 * full-sequence decoder at that position (teacher-forced tokens), for post-LN and pre-LN and
 * grouped-query attention. */
Test(nn_seq2seq, incremental_decoding_equals_the_full_forward) {
    for (int variant = 0; variant < 3; variant++) {
        Seq2SeqConfig cfg = nn_seq2seq_default_config(9, 8, 16, 4, 2);
        cfg.max_len = 12;
        cfg.layer.dropout = 0;
        cfg.layer.pre_ln = variant == 1;
        cfg.layer.n_kv_heads = variant == 2 ? 2 : 4;
        Arena *a = arena_new("params", 8 << 20);
        Rng rng;
        rng_seed(&rng, 5);
        Seq2Seq m;
        nn_seq2seq_init(&m, a, &rng, &cfg);
        Tape *t = ag_tape_new(arena_new("step", 32 << 20));
        int B = 2, S = 6, T = 7;
        int src[12] = {3, 4, 5, 6, 7, 8, 2, 3, 4, 5, 0, 0};
        int tgt[14] = {1, 3, 4, 5, 6, 7, 2, 1, 2, 3, 4, 5, 6, 7};
        ag_no_grad(t, 1);
        Tensor *memory = nn_seq2seq_encode(t, &m, src, B, S, NULL);
        Tensor *full = nn_seq2seq_decode(t, &m, memory, src, S, tgt, B, T, NULL); /* (B,T,V) */
        NnDecodeState st;
        nn_decode_begin(&st, &m, memory, src, B, S, T);
        int V = cfg.tgt_vocab;
        double worst = 0;
        for (int pos = 0; pos < T; pos++) {
            int tok[2] = {tgt[pos], tgt[T + pos]};
            Tensor *step = nn_decode_step(t, &m, &st, tok); /* (B,1,V) */
            for (int bb = 0; bb < B; bb++)
                for (int v = 0; v < V; v++) {
                    double d = fabs((double)step->data[bb * V + v] -
                                    (double)full->data[((size_t)bb * T + pos) * V + v]);
                    if (d > worst) worst = d;
                }
        }
        cr_assert(worst < (sizeof(Real) == 8 ? 1e-12 : 1e-4),
                  "variant %d: step logits differ "
                  "from the full forward by %g",
                  variant, worst);
        nn_decode_end(&st);
        arena_free(t->arena);
        ag_tape_free(t);
        nn_seq2seq_free(&m);
        arena_free(a);
    }
}

/* A small seq2seq for the searches: pad 0, bos 1, eos 2; two source rows */
static void search_model(Seq2Seq *m, Arena **a, Tape **t) {
    Seq2SeqConfig cfg = nn_seq2seq_default_config(9, 8, 16, 4, 2);
    cfg.max_len = 12;
    cfg.layer.dropout = 0;
    *a = arena_new("params", 8 << 20);
    Rng rng;
    rng_seed(&rng, 7);
    nn_seq2seq_init(m, *a, &rng, &cfg);
    *t = ag_tape_new(arena_new("step", 32 << 20));
}

static void search_free(Seq2Seq *m, Arena *a, Tape *t) {
    arena_free(t->arena);
    ag_tape_free(t);
    nn_seq2seq_free(m);
    arena_free(a);
}

/* Greedy decoding takes, at every step, a best token of the full decoder run teacher-forced on
 * bos and the tokens chosen so far (never pad or bos), and stops at eos or max_T - 1 tokens;
 * beam search with one beam finds the same sentence. */
Test(nn_seq2seq, greedy_takes_the_full_decoders_best_token_and_one_beam_agrees) {
    Seq2Seq m;
    Arena *a;
    Tape *t;
    search_model(&m, &a, &t);
    int B = 2, S = 6, max_T = 9, V = m.cfg.tgt_vocab;
    int src[12] = {3, 4, 5, 6, 7, 2, 3, 4, 5, 2, 0, 0}, out[18], lens[2];
    cr_assert_eq(nn_seq2seq_greedy(t, &m, src, B, S, 1, 2, max_T, out, lens), AG_OK);
    for (int b = 0; b < B; b++) {
        int n = lens[b], tin[9] = {1};
        cr_assert(n >= 0 && n <= max_T - 1);
        for (int i = 0; i < n; i++) tin[i + 1] = out[b * max_T + i];
        int T = n < max_T - 1 ? n + 1 : n; /* the positions whose choice was made */
        ag_tape_reset(t);
        ag_no_grad(t, 1);
        Tensor *mem = nn_seq2seq_encode(t, &m, src + b * S, 1, S, NULL);
        Tensor *full = nn_seq2seq_decode(t, &m, mem, src + b * S, S, tin, 1, T, NULL);
        for (int pos = 0; pos < T; pos++) {
            const Real *x = full->data + (size_t)pos * V;
            int chosen = pos < n ? out[b * max_T + pos] : 2;
            cr_assert(chosen != 0 && chosen != 1, "row %d position %d chose %d", b, pos, chosen);
            for (int v = 2; v < V; v++)
                cr_assert((double)x[chosen] >= (double)x[v] - 1e-4,
                          "row %d position %d: token %d (%g) beats the chosen %d (%g)", b, pos, v,
                          (double)x[v], chosen, (double)x[chosen]);
        }
        int one[9];
        int k = nn_seq2seq_beam(t, &m, src + b * S, S, 1, 2, 1, max_T, 0.6, one);
        cr_assert_eq(k, n, "row %d: one beam found %d tokens, greedy %d", b, k, n);
        for (int i = 0; i < n; i++) cr_assert_eq(one[i], out[b * max_T + i]);
    }
    search_free(&m, a, t);
}

/* Logits that overflow are AG_ERR_RANGE naming them (greedy and beam), not an abort */
Test(nn_seq2seq, searches_refuse_logits_that_are_not_finite) {
    Seq2Seq m;
    Arena *a;
    Tape *t;
    search_model(&m, &a, &t);
    m.generator.bias->data[3] = (Real)INFINITY;
    int src[6] = {3, 4, 5, 6, 7, 2}, out[9], lens[1];
    cr_assert_eq(nn_seq2seq_greedy(t, &m, src, 1, 6, 1, 2, 9, out, lens), AG_ERR_RANGE);
    cr_assert(strstr(ag_last_error(), "the decoder's logits[3] = inf: must be finite"), "%s",
              ag_last_error());
    cr_assert_eq(nn_seq2seq_beam(t, &m, src, 6, 1, 2, 4, 9, 0.6, out), AG_ERR_RANGE);
    search_free(&m, a, t);
}

/* misuse: eos the padding token, max_T beyond max_len, more than 64 beams */
static void search_misuse(int which) {
    Seq2Seq m;
    Arena *a;
    Tape *t;
    search_model(&m, &a, &t);
    int src[6] = {3, 4, 5, 6, 7, 2}, out[13], lens[1];
    if (which == 0) nn_seq2seq_greedy(t, &m, src, 1, 6, 1, 0, 9, out, lens);
    if (which == 1) nn_seq2seq_greedy(t, &m, src, 1, 6, 1, 2, 13, out, lens);
    if (which == 2) nn_seq2seq_beam(t, &m, src, 6, 1, 2, 65, 9, 0.6, out);
}
Test(nn_seq2seq, greedy_aborts_when_eos_is_the_padding, .signal = SIGABRT) { search_misuse(0); }
Test(nn_seq2seq, greedy_aborts_beyond_max_len, .signal = SIGABRT) { search_misuse(1); }
Test(nn_seq2seq, beam_aborts_on_more_than_64_beams, .signal = SIGABRT) { search_misuse(2); }
