/* test_gpt.c: the GPT model (src/nn/gpt.c): its parameters (names, count, the tied head), the
 * gradient check of the whole model (every parameter, in the double build, with and without
 * dropout, grouped-query and untied variants), incremental decoding against the full forward, training
 * and resuming from a checkpoint to the bit, and the refusals (configurations, tokens, sizes);
 * in both styles, GPT-2's and LLaMA's; published depths (48 blocks, the build limit) and a
 * model made for a load (nn_gpt_init_unset). Then the options mixed (GptMix rows: RoPE,
 * RMSNorm, SwiGLU, ReLU, GELU tanh or no MLP, biases, post-LN, parallel blocks, partial
 * rotary, ... in either style's names): each row's names and count, its gradient check, its
 * cached decoding and its checkpoint; checkpoints written before the options existed; bad
 * mixes abort naming the configuration.
 * The comparison with a nanoGPT model in PyTorch is tests/nn/torch_compare.py (section 4).
 * Not here: the ops' own checks (tests/autograd). */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "attograd.h"
#include "expect_abort.h"
#include "files.h"
#include "models.h"

#ifdef AG_REAL_DOUBLE
#define TOL 1e-12
#else
#define TOL 2e-5
#endif

static const GptConfig tiny = {
    .vocab_size = 7, .block_size = 6, .n_layer = 2, .n_head = 2, .n_embd = 8};

/* tokens of row b, position i: a fixed pattern over the vocabulary */
static void fill_ids(int *idx, int B, int T, int V, int salt) {
    for (int i = 0; i < B * T; i++) idx[i] = (i * 5 + i / T * 3 + salt) % V;
}

Test(nn_gpt, parameters_have_nanogpts_names_and_the_counted_size) {
    const GptConfig variants[] = {
        tiny,
        {.vocab_size = 7, .block_size = 6, .n_layer = 1, .n_head = 4, .n_embd = 8, .n_kv_head = 2},
        {.vocab_size = 9, .block_size = 4, .n_layer = 3, .n_head = 1, .n_embd = 4, .no_bias = 1},
        {.vocab_size = 5, .block_size = 3, .n_layer = 1, .n_head = 2, .n_embd = 6, .untied = 1},
        {.style = NN_LLAMA,
         .vocab_size = 7,
         .block_size = 6,
         .n_layer = 2,
         .n_head = 4,
         .n_embd = 8,
         .n_kv_head = 2},
        {.style = NN_LLAMA,
         .vocab_size = 5,
         .block_size = 3,
         .n_layer = 1,
         .n_head = 1,
         .n_embd = 6,
         .untied = 1,
         .ffn_hidden = 10},
    };
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
        Arena *a = arena_new("params", 0);
        Rng rng;
        rng_seed(&rng, 1);
        Gpt m;
        nn_gpt_init(&m, a, &rng, &variants[v]);
        int64_t n = -1;
        cr_assert_eq(nn_gpt_check_config(&variants[v], &n), AG_OK, "%s", ag_last_error());
        cr_assert_eq((size_t)n, ag_params_count(&m.params), "variant %zu: %lld counted, %zu made",
                     v, (long long)n, ag_params_count(&m.params));
        const GptConfig *c = &variants[v];
        if (c->style == NN_LLAMA) { /* Meta's names; no biases, no positions */
            int H = c->ffn_hidden ? c->ffn_hidden : (2 * 4 * c->n_embd / 3 + 31) / 32 * 32;
            cr_assert(ag_params_find(&m.params, "tok_embeddings.weight") == m.wte.weight);
            cr_assert(ag_params_find(&m.params, "layers.0.attention.wq.weight"));
            Tensor *wk = ag_params_find(&m.params, "layers.0.attention.wk.weight");
            int kv = c->n_kv_head ? c->n_kv_head : c->n_head;
            cr_assert(wk && wk->shape[0] == kv * (c->n_embd / c->n_head));
            cr_assert(ag_params_find(&m.params, "layers.0.attention.wo.weight"));
            Tensor *w3 = ag_params_find(&m.params, "layers.0.feed_forward.w3.weight");
            cr_assert(w3 && w3->shape[0] == H && w3->shape[1] == c->n_embd, "w3 %s, H %d",
                      tensor_shape_str(w3), H);
            cr_assert(ag_params_find(&m.params, "layers.0.ffn_norm.weight"));
            cr_assert(ag_params_find(&m.params, "norm.weight"));
            cr_assert(!ag_params_find(&m.params, "layers.0.attention_norm.bias"));
            cr_assert((ag_params_find(&m.params, "output.weight") != NULL) == c->untied);
            nn_gpt_free(&m);
            arena_free(a);
            continue;
        }
        cr_assert(ag_params_find(&m.params, "transformer.wte.weight") == m.wte.weight);
        cr_assert(ag_params_find(&m.params, "transformer.wpe.weight"));
        cr_assert(ag_params_find(&m.params, "transformer.h.0.attn.c_attn.weight"));
        cr_assert(ag_params_find(&m.params, "transformer.h.0.mlp.c_proj.weight"));
        cr_assert(ag_params_find(&m.params, "transformer.ln_f.weight"));
        cr_assert((ag_params_find(&m.params, "transformer.h.0.ln_1.bias") != NULL) == !c->no_bias);
        cr_assert((ag_params_find(&m.params, "lm_head.weight") != NULL) == c->untied);
        cr_assert(c->untied || m.lm_head.weight == m.wte.weight, "the head is tied to wte");
        Tensor *w = ag_params_find(&m.params, "transformer.h.0.attn.c_attn.weight");
        int kv = c->n_kv_head ? c->n_kv_head : c->n_head;
        cr_assert(w->shape[0] == c->n_embd + 2 * kv * (c->n_embd / c->n_head) &&
                  w->shape[1] == c->n_embd);
        nn_gpt_free(&m);
        arena_free(a);
    }
}

/* nanoGPT's initialisation: N(0, 0.02), residual projections N(0, 0.02/sqrt(2 n_layer)) */
Test(nn_gpt, initialisation_follows_nanogpt) {
    GptConfig c = {.vocab_size = 64, .block_size = 32, .n_layer = 8, .n_head = 4, .n_embd = 64};
    Arena *a = arena_new("params", 0);
    Rng rng;
    rng_seed(&rng, 3);
    Gpt m;
    nn_gpt_init(&m, a, &rng, &c);
    struct {
        const char *name;
        double std;
    } want[] = {{"transformer.wte.weight", 0.02},
                {"transformer.h.3.attn.c_attn.weight", 0.02},
                {"transformer.h.3.attn.c_proj.weight", 0.02 / 4},
                {"transformer.h.5.mlp.c_proj.weight", 0.02 / 4}};
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        Tensor *w = ag_params_find(&m.params, want[k].name);
        double s = 0;
        for (size_t i = 0; i < w->size; i++) s += (double)w->data[i] * (double)w->data[i];
        double std = sqrt(s / (double)w->size);
        cr_assert(fabs(std / want[k].std - 1) < 0.1, "%s: std %g, want %g", want[k].name, std,
                  want[k].std);
    }
    Tensor *b = ag_params_find(&m.params, "transformer.h.0.attn.c_attn.bias");
    for (size_t i = 0; i < b->size; i++) cr_assert(b->data[i] == 0);
    nn_gpt_free(&m);
    arena_free(a);
}

/* ---- the gradient check of the whole model: the double build's (central differences in
 * float are too coarse for a whole model; the float build checks every op, test_gradcheck.c) ---- */
#ifdef AG_REAL_DOUBLE
typedef struct {
    Gpt *m;
    const int *idx;
    int B, T;
    uint64_t seed; /* dropout's stream, the same for every evaluation */
} GcGpt;

static Tensor *gpt_logits(Tape *t, Tensor **in, void *ctx) {
    (void)in; /* the model's own parameters are the inputs */
    GcGpt *g = ctx;
    Rng rng;
    rng_seed(&rng, g->seed);
    return nn_gpt_forward(t, g->m, g->idx, g->B, g->T, &rng);
}

static void check_gradients(const GptConfig *c) {
    Arena *a = arena_new("params", 0);
    Tape *t = ag_tape_new(arena_new("step", 0));
    Rng rng;
    rng_seed(&rng, 5);
    Gpt m;
    nn_gpt_init(&m, a, &rng, c);
    ts_perturb(&m.params, &rng, 0.2, 0); /* biases and LayerNorms away from 0 and 1 */
    int idx[2 * 5];
    fill_ids(idx, 2, 5, c->vocab_size, 1);
    GcGpt g = {&m, idx, 2, 5, 11};
    AgGradcheckResult r;
    int ok = ag_gradcheck(t, gpt_logits, &g, m.params.items, m.params.n, 1e-6, 1e-6, &r);
    cr_assert(ok, "max error %g at input %d (%s) element %zu: analytic %g, numeric %g", r.max_err,
              r.input, m.params.items[r.input]->name, r.index, r.analytic, r.numeric);
    cr_assert(r.n_checked == ag_params_count(&m.params));
    ag_tape_free(t);
    nn_gpt_free(&m);
    arena_free(a);
}

Test(nn_gpt, gradients_of_every_parameter_match_finite_differences) { check_gradients(&tiny); }
Test(nn_gpt, gradients_with_dropout_grouped_query_and_no_bias) {
    GptConfig c = tiny;
    c.n_head = 4, c.n_kv_head = 2, c.dropout = 0.2, c.no_bias = 1;
    check_gradients(&c);
}
Test(nn_gpt, gradients_with_an_untied_head) {
    GptConfig c = tiny;
    c.untied = 1, c.n_layer = 1;
    check_gradients(&c);
}
Test(nn_gpt, gradients_of_the_llama_style) {
    GptConfig c = tiny;
    c.style = NN_LLAMA, c.n_head = 2, c.ffn_hidden = 12, c.rope_base = 100;
    check_gradients(&c);
    c.n_head = 4, c.n_kv_head = 1, c.dropout = 0.2, c.untied = 1, c.n_layer = 1;
    check_gradients(&c);
}
#endif

/* ---- incremental decoding ---- */

/* Logits of the full forward against the cache fed in pieces (3 positions, then 1, 1, ...). */
static void check_cache(const GptConfig *c) {
    Arena *a = arena_new("params", 0);
    Tape *t = ag_tape_new(arena_new("step", 0));
    Rng rng;
    rng_seed(&rng, 9);
    Gpt m;
    nn_gpt_init(&m, a, &rng, c);
    enum { B = 2 };
    int T = c->block_size, V = c->vocab_size, idx[B * 16], piece[B * 16];
    fill_ids(idx, B, T, V, 2);
    ag_no_grad(t, 1);
    Tensor *full = nn_gpt_forward(t, &m, idx, B, T, NULL);
    Real *want = arena_alloc(a, full->size * sizeof(Real));
    memcpy(want, full->data, full->size * sizeof(Real));
    GptCache cache;
    nn_gpt_cache_init(&cache, &m, B, T);
    for (int p0 = 0; p0 < T;) {
        int n = p0 == 0 ? 3 : 1;
        for (int b = 0; b < B; b++)
            for (int i = 0; i < n; i++) piece[b * n + i] = idx[b * T + p0 + i];
        ag_tape_reset(t);
        Tensor *y = nn_gpt_forward_cached(t, &m, &cache, piece, B, n);
        cr_assert(y->shape[0] == B && y->shape[1] == n && y->shape[2] == V);
        for (int b = 0; b < B; b++)
            for (int i = 0; i < n; i++)
                for (int v = 0; v < V; v++) {
                    double got = y->data[((size_t)b * n + i) * V + v];
                    double exp = want[((size_t)b * T + p0 + i) * V + v];
                    cr_assert(fabs(got - exp) <= TOL * (1 + fabs(exp)),
                              "row %d position %d token %d: %.17g cached, %.17g full", b, p0 + i, v,
                              got, exp);
                }
        p0 += n;
    }
    cr_assert_eq(cache.len, T);
    nn_gpt_cache_free(&cache);
    ag_tape_free(t);
    nn_gpt_free(&m);
    arena_free(a);
}

Test(nn_gpt, cached_decoding_equals_the_full_forward) {
    GptConfig c = tiny;
    c.block_size = 9, c.dropout = 0.3; /* dropout is off while decoding */
    check_cache(&c);
    c.n_head = 4, c.n_kv_head = 1, c.untied = 1, c.no_bias = 1;
    check_cache(&c);
    c.style = NN_LLAMA, c.n_head = 2, c.n_kv_head = 1; /* the cached keys are rotated */
    check_cache(&c);
}

/* ---- parameters without gradients until needed (arena_lazy_grads) ----
 * A model made in a lazy arena holds no gradient after its init and after no-grad forwards
 * (half the memory of one made to train); trained, it gets them at the first backward and
 * steps to the very bits of the same model made with its gradients at once. A view of a lazy
 * parameter's rows (nn_param_rows, as the hooked attention takes c_attn apart) shares the
 * parameter's gradient, made for it then. */
Test(nn_gpt, a_lazy_gradient_model_runs_without_them_and_trains_to_the_same_bits) {
    GptConfig c = tiny;
    Arena *pa[2];
    Gpt m[2];
    Optimizer *opt[2] = {NULL, NULL};
    Arena *step = arena_new("step", 0);
    Tape *t = ag_tape_new(step);
    for (int lazy = 0; lazy < 2; lazy++) {
        pa[lazy] = arena_new("params", 0);
        arena_lazy_grads(pa[lazy], lazy);
        Rng rng;
        rng_seed(&rng, 4);
        nn_gpt_init(&m[lazy], pa[lazy], &rng, &c);
    }
    for (int i = 0; i < m[1].params.n; i++)
        cr_assert(!m[1].params.items[i]->grad && m[1].params.items[i]->requires_grad,
                  "'%s' has a gradient", m[1].params.items[i]->name);
    size_t grads = 0; /* the eager arena's gradients, in the arena's 64-byte blocks */
    for (int i = 0; i < m[0].params.n; i++)
        grads += (m[0].params.items[i]->size * sizeof(Real) + 63) / 64 * 64;
    cr_assert_eq(pa[0]->used - pa[1]->used, grads, "lazy %zu bytes, eager %zu", pa[1]->used,
                 pa[0]->used);
    int idx[4 * 6], tgt[4 * 6];
    fill_ids(idx, 4, 6, 7, 0);
    ag_no_grad(t, 1);
    nn_gpt_forward(t, &m[1], idx, 4, 6, NULL);
    ag_no_grad(t, 0);
    ag_tape_reset(t);
    for (int i = 0; i < m[1].params.n; i++)
        cr_assert(!m[1].params.items[i]->grad, "'%s' has a gradient after a no-grad forward",
                  m[1].params.items[i]->name);
    Tensor *w = m[1].h[0].c_attn.weight, *v = nn_param_rows(t->arena, w, 2, 3, "rows");
    cr_assert(w->grad && v->grad == w->grad + 2 * w->shape[1], "the view shares w's gradient");
    ag_tape_reset(t);
    for (int s = 0; s < 4; s++) {
        Real loss[2];
        for (int lazy = 0; lazy < 2; lazy++) {
            Rng rng;
            rng_seed(&rng, 9 + s);
            fill_ids(idx, 4, 6, 7, s);
            for (int i = 0; i < 4 * 6; i++) tgt[i] = i % 6 == 5 ? -1 : idx[i + 1];
            ag_params_zero_grad(&m[lazy].params);
            Tensor *l = nn_gpt_loss(t, &m[lazy], idx, tgt, 4, 6, &rng);
            ag_backward(t, l);
            loss[lazy] = l->data[0];
            if (s == 1 && !opt[lazy]) { /* an optimizer made after a first backward */
                OptimConfig oc = optim_defaults(OPTIM_ADAMW);
                oc.lr = 1e-2;
                opt[lazy] = optim_new(pa[lazy], &m[lazy].params, &oc);
            }
            if (opt[lazy]) optim_step(opt[lazy]);
            ag_tape_reset(t);
        }
        cr_assert(loss[0] == loss[1], "step %d: loss %.9g eager, %.9g lazy", s, (double)loss[0],
                  (double)loss[1]);
        for (int i = 0; i < m[0].params.n; i++) {
            const Tensor *a = m[0].params.items[i], *b = m[1].params.items[i];
            cr_assert(b->grad, "'%s' has no gradient after a backward", b->name);
            cr_assert(memcmp(a->data, b->data, a->size * sizeof(Real)) == 0 &&
                          memcmp(a->grad, b->grad, a->size * sizeof(Real)) == 0,
                      "step %d: '%s' differs", s, a->name);
        }
    }
    ag_tape_free(t);
    arena_free(step);
    for (int lazy = 0; lazy < 2; lazy++) {
        nn_gpt_free(&m[lazy]);
        arena_free(pa[lazy]);
    }
}

/* ---- training and resuming: the model's checkpoint table ---- */

static void train_model(const GptConfig *model, const char *path, int resume, int steps,
                        double *losses) {
    GptConfig c = *model, *cfg = &c;
    Checkpoint ck = {.config = nn_gpt_ckpt_config(cfg)};
    Arena *params = arena_new("params", 0);
    Tape *t = ag_tape_new(arena_new("step", 0));
    Rng rng;
    rng_seed(&rng, 4);
    Gpt m;
    nn_gpt_init(&m, params, &rng, cfg);
    OptimConfig oc = optim_defaults(OPTIM_ADAMW);
    oc.lr = 1e-2;
    Optimizer *opt = optim_new(params, &m.params, &oc);
    ck.params = &m.params, ck.opt = opt, ck.rng = &rng;
    if (resume) cr_assert_eq(ckpt_load(path, &ck), AG_OK, "%s", ag_last_error());
    int idx[4 * 6], tgt[4 * 6];
    for (int64_t s = optim_get_step(opt); s < steps; s++) {
        fill_ids(idx, 4, 6, 7, (int)s);
        for (int i = 0; i < 4 * 6; i++) tgt[i] = i % 6 == 5 ? -1 : idx[i + 1];
        ag_tape_reset(t);
        ag_params_zero_grad(&m.params);
        Tensor *loss = nn_gpt_loss(t, &m, idx, tgt, 4, 6, &rng);
        ag_backward(t, loss);
        optim_step(opt);
        losses[s] = (double)loss->data[0];
    }
    cr_assert_eq(ckpt_save(path, &ck, 6, NULL), AG_OK, "%s", ag_last_error());
    ag_tape_free(t);
    nn_gpt_free(&m);
    arena_free(params);
}
/* Trains c for `steps` steps straight, and again stopped after `cut` and resumed from the
 * checkpoint: the same losses to the bit, and learning (the last loss under 0.7 of the first).
 * -> the configuration read back from the resumed run's checkpoint (*f: the file, open) */
static GptConfig train_and_resume(const GptConfig *c, int steps, int cut, NpzFile **f) {
    char dir[64], a[600], b[600];
    ts_tmp_dir(dir, sizeof dir, "gpt");
    ts_join(a, dir, "straight.npz");
    ts_join(b, dir, "resumed.npz");
    double straight[32], resumed[32];
    cr_assert(steps <= 32);
    train_model(c, a, 0, steps, straight);
    train_model(c, b, 0, cut, resumed);
    train_model(c, b, 1, steps, resumed);
    for (int i = 0; i < steps; i++)
        cr_assert(straight[i] == resumed[i], "step %d: %.17g straight, %.17g resumed", i,
                  straight[i], resumed[i]);
    cr_assert(straight[steps - 1] < 0.7 * straight[0], "no learning: %g -> %g", straight[0],
              straight[steps - 1]);
    GptConfig read;
    memset(&read, 0, sizeof read);
    CkptConfig cc = nn_gpt_ckpt_config(&read);
    cr_assert_eq(ckpt_read(b, &cc, f), AG_OK, "%s", ag_last_error());
    ts_rm_tree(dir);
    return read;
}

Test(nn_gpt, trains_and_resumes_from_a_checkpoint_bit_exactly) {
    GptConfig c = tiny;
    c.dropout = 0.1;
    NpzFile *f;
    GptConfig read = train_and_resume(&c, 20, 9, &f);
    cr_assert(read.vocab_size == 7 && read.block_size == 6 && read.n_layer == 2 &&
              read.n_embd == 8 && read.dropout == 0.1);
    cr_assert(npz_find(f, "transformer.h.1.attn.c_attn.weight") && npz_find(f, "meta.model"));
    npz_free(f);
}

/* The grokking papers' 1-layer model (Nanda et al. 2023): a ReLU MLP, no norms, learned
 * positions, an untied head; it learns, and resumes to the bit. */
static const GptConfig grok_like = {.vocab_size = 7,
                                    .block_size = 6,
                                    .n_layer = 1,
                                    .n_head = 2,
                                    .n_embd = 8,
                                    .mlp = NN_GPT_MLP_RELU,
                                    .norm = NN_GPT_NORM_NONE,
                                    .untied = 1};
Test(nn_gpt, a_relu_mlp_without_norms_trains_and_resumes_bit_exactly) {
    NpzFile *f;
    GptConfig read = train_and_resume(&grok_like, 30, 12, &f);
    cr_assert(read.mlp == NN_GPT_MLP_RELU && read.norm == NN_GPT_NORM_NONE && read.untied == 1);
    cr_assert(npz_find(f, "meta.config.mlp") && npz_find(f, "lm_head.weight") &&
              !npz_find(f, "transformer.ln_f.weight"));
    npz_free(f);
}

/* The MLP's activation as computed: hook_post against f(hook_pre), element by element, in
 * double from the same input (within tol of |input| + |value|; 0: the same bits) */
typedef struct {
    Real *pre;
    size_t n;
    int seen;
} MlpSeen;
static int keep_pre(Tape *t, Tensor **x, const NnHookPoint *at, void *ctx) {
    (void)t, (void)at;
    MlpSeen *s = ctx;
    s->pre = ts_values(*x), s->n = (*x)->size;
    return AG_OK;
}
typedef struct {
    MlpSeen *pre;
    double (*f)(double);
    double tol;
    int checked;
} MlpCheck;
static int check_post(Tape *t, Tensor **x, const NnHookPoint *at, void *ctx) {
    (void)t;
    MlpCheck *c = ctx;
    cr_assert(c->pre->pre && c->pre->n == (*x)->size, "%s: no hook_pre before it", at->name);
    for (size_t i = 0; i < (*x)->size; i++) {
        double in = (double)c->pre->pre[i], want = c->f(in), got = (double)(*x)->data[i];
        cr_assert(fabs(got - want) <= c->tol * (fabs(in) + fabs(want)) || got == want,
                  "%s[%zu]: f(%.17g) = %.17g, want %.17g", at->name, i, in, got, want);
    }
    free(c->pre->pre);
    c->pre->pre = NULL;
    c->checked++;
    return AG_OK;
}
static void check_mlp_activation(const GptConfig *c, double (*f)(double), double tol) {
    TsGpt e = ts_gpt_new(c, 3, 0.2, 0.3, 2, 5);
    NnHooks h;
    nn_hooks_init(&h, c->n_layer);
    MlpSeen seen = {0};
    MlpCheck chk = {&seen, f, tol, 0};
    cr_assert(nn_hooks_add(&h, "blocks.*.mlp.hook_pre", keep_pre, &seen) == c->n_layer);
    cr_assert(nn_hooks_add(&h, "blocks.*.mlp.hook_post", check_post, &chk) == c->n_layer);
    cr_assert(nn_gpt_forward_hooked(e.t, &e.m, e.ids, 2, 5, NULL, &h), "%s", ag_last_error());
    cr_assert_eq(chk.checked, c->n_layer);
    nn_hooks_free(&h);
    ts_gpt_free(&e);
}
static double relu_ref(double x) { return x > 0 ? x : 0; }
Test(nn_gpt, the_relu_mlp_computes_relu_of_c_fc) {
    check_mlp_activation(&grok_like, relu_ref, 0);
    GptConfig c = grok_like;
    c.style = NN_LLAMA, c.n_layer = 2;
    check_mlp_activation(&c, relu_ref, 0);
}
/* GPT-2's gelu_new as HF's activations.py writes it (NewGELUActivation) */
static double gelu_new_ref(double x) {
    return 0.5 * x * (1 + tanh(sqrt(2 / acos(-1.0)) * (x + 0.044715 * pow(x, 3))));
}
Test(nn_gpt, the_gelu_tanh_mlp_computes_gpt2s_gelu_new_of_c_fc) {
    GptConfig c = tiny;
    c.mlp = NN_GPT_MLP_GELU_TANH;
    check_mlp_activation(&c, gelu_new_ref, TOL);
}

/* GPT-NeoX's parallel block as TransformerLens runs it (parallel_attn_mlp): no hook_resid_mid,
 * resid_post = resid_pre + attn_out + mlp_out, and ln2 normalizes resid_pre (the same values
 * as ln1's before their weights) */
typedef struct {
    Real *v[NN_HOOK_N_KINDS];
    int runs[NN_HOOK_N_KINDS];
} Seen;
static int seen_hook(Tape *t, Tensor **x, const NnHookPoint *at, void *ctx) {
    (void)t;
    Seen *s = ctx;
    if (at->layer == 0) {
        free(s->v[at->kind]);
        s->v[at->kind] = ts_values(*x);
        s->runs[at->kind]++;
    }
    return AG_OK;
}
Test(nn_gpt, the_parallel_block_has_transformer_lens_points) {
    GptConfig c = tiny;
    c.parallel_residual = 1, c.pos = NN_GPT_POS_ROPE, c.rotary_dim = 2;
    enum { B = 2, T = 5, C = 8 };
    TsGpt e = ts_gpt_new(&c, 4, 0.2, 0.3, B, T);
    NnHooks h;
    nn_hooks_init(&h, c.n_layer);
    Seen s = {0};
    cr_assert(nn_hooks_add(&h, "blocks.*", seen_hook, &s) > 0);
    Tensor *y = nn_gpt_forward_hooked(e.t, &e.m, e.ids, B, T, NULL, &h);
    cr_assert(y, "%s", ag_last_error());
    Real *plain = ts_values(y);
    cr_assert_eq(s.runs[NN_HOOK_RESID_MID], 0, "hook_resid_mid ran in a parallel block");
    int want[] = {NN_HOOK_RESID_PRE,  NN_HOOK_ATTN_OUT,       NN_HOOK_MLP_OUT,
                  NN_HOOK_RESID_POST, NN_HOOK_LN1_NORMALIZED, NN_HOOK_LN2_NORMALIZED,
                  NN_HOOK_ROT_Q,      NN_HOOK_MLP_PRE};
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++)
        cr_assert_eq(s.runs[want[k]], 1, "kind %d: %d runs", want[k], s.runs[want[k]]);
    for (int i = 0; i < B * T * C; i++) {
        double sum = (double)s.v[NN_HOOK_RESID_PRE][i] + (double)s.v[NN_HOOK_ATTN_OUT][i] +
                     (double)s.v[NN_HOOK_MLP_OUT][i];
        double post = (double)s.v[NN_HOOK_RESID_POST][i];
        cr_assert(fabs(post - sum) <= TOL * (1 + fabs(sum)), "[%d]: resid_post %.17g, sum %.17g", i,
                  post, sum);
        cr_assert(s.v[NN_HOOK_LN1_NORMALIZED][i] == s.v[NN_HOOK_LN2_NORMALIZED][i],
                  "[%d]: ln2 does not normalize resid_pre", i);
    }
    /* hooks that change nothing leave the logits' bits (the hooked attention's plain ops sum as
     * the fused kernel does; the reference kernel of ATTN=ref sums in its own order: close) */
    ag_tape_reset(e.t);
    Tensor *y2 = nn_gpt_forward(e.t, &e.m, e.ids, B, T, NULL);
#ifdef AG_ATTN_REF
    for (size_t i = 0; i < y2->size; i++)
        cr_assert(fabs((double)plain[i] - (double)y2->data[i]) <=
                      TOL * (1 + fabs((double)plain[i])),
                  "[%zu]: %.17g hooked, %.17g plain", i, (double)plain[i], (double)y2->data[i]);
#else
    cr_assert(memcmp(plain, y2->data, y2->size * sizeof(Real)) == 0);
#endif
    free(plain);
    for (int k = 0; k < NN_HOOK_N_KINDS; k++) free(s.v[k]);
    nn_hooks_free(&h);
    ts_gpt_free(&e);
}

/* ---- the options, mixed: one table, every row through names, gradients, the cache and a
 * checkpoint ---- */

typedef struct {
    const char *name;
    GptConfig c;
    const char *has[6], *lacks[6]; /* parameter names the mix must have, and must not */
} GptMix;

static const GptMix mixes[] = {
    {"GPT-2",
     {0},
     {"transformer.wpe.weight", "transformer.h.0.ln_1.bias", "transformer.h.1.mlp.c_fc.bias",
      "transformer.ln_f.bias"},
     {"lm_head.weight", "transformer.h.0.mlp.c_up.weight"}},
    {"LLaMA",
     {.style = NN_LLAMA, .ffn_hidden = 12},
     {"tok_embeddings.weight", "layers.1.feed_forward.w3.weight", "layers.0.attention_norm.weight",
      "norm.weight"},
     {"layers.0.attention_norm.bias", "layers.0.attention.wq.bias", "pos_embeddings.weight",
      "output.weight"}},
    {"GPT-2 with RoPE and RMSNorm",
     {.pos = NN_GPT_POS_ROPE, .norm = NN_GPT_NORM_RMS, .rope_base = 100},
     {"transformer.h.0.ln_1.weight", "transformer.h.0.attn.c_attn.bias", "transformer.ln_f.weight",
      "transformer.h.1.mlp.c_proj.bias"},
     {"transformer.wpe.weight", "transformer.h.0.ln_1.bias", "transformer.ln_f.bias"}},
    {"GPT-2 with SwiGLU, grouped-query heads, no positions, no biases, untied",
     {.n_head = 4,
      .n_kv_head = 2,
      .mlp = NN_GPT_MLP_SWIGLU,
      .pos = NN_GPT_POS_NONE,
      .bias = NN_GPT_BIAS_OFF,
      .untied = 1,
      .ffn_hidden = 12},
     {"transformer.h.0.mlp.c_up.weight", "lm_head.weight", "transformer.h.0.ln_2.weight"},
     {"transformer.wpe.weight", "transformer.h.0.mlp.c_fc.bias", "transformer.h.0.ln_2.bias"}},
    {"GPT-2, attention only",
     {.mlp = NN_GPT_MLP_NONE},
     {"transformer.h.1.attn.c_proj.weight", "transformer.h.0.ln_1.weight", "transformer.ln_f.bias"},
     {"transformer.h.0.ln_2.weight", "transformer.h.0.mlp.c_fc.weight",
      "transformer.h.0.mlp.c_proj.weight"}},
    {"GPT-2 post-LN with dropout",
     {.post_ln = 1, .dropout = 0.2},
     {"transformer.h.0.ln_2.bias", "transformer.h.1.ln_1.weight"},
     {"transformer.ln_f.weight"}},
    {"LLaMA with learned positions, LayerNorm, biases and GELU",
     {.style = NN_LLAMA,
      .pos = NN_GPT_POS_LEARNED,
      .norm = NN_GPT_NORM_LAYER,
      .bias = NN_GPT_BIAS_ON,
      .mlp = NN_GPT_MLP_GELU},
     {"pos_embeddings.weight", "layers.0.attention_norm.bias", "layers.0.attention.wq.bias",
      "layers.0.feed_forward.w2.bias", "norm.bias"},
     {"layers.0.feed_forward.w3.weight"}},
    {"LLaMA attention only, post-LN, multi-query",
     {.style = NN_LLAMA, .n_kv_head = 1, .mlp = NN_GPT_MLP_NONE, .post_ln = 1},
     {"layers.0.attention_norm.weight", "layers.1.attention.wk.weight"},
     {"layers.0.ffn_norm.weight", "layers.0.feed_forward.w1.weight", "norm.weight"}},
    {"GPT-2 with a ReLU MLP, no norms, untied (the grokking papers' model)",
     {.mlp = NN_GPT_MLP_RELU, .norm = NN_GPT_NORM_NONE, .untied = 1},
     {"transformer.wpe.weight", "transformer.h.1.mlp.c_fc.weight",
      "transformer.h.0.mlp.c_proj.bias", "lm_head.weight"},
     {"transformer.h.0.ln_1.weight", "transformer.h.0.ln_2.weight", "transformer.ln_f.weight",
      "transformer.h.0.mlp.c_up.weight"}},
    {"GPT-2 with GPT-2's own GELU (gelu_new, the tanh approximation)",
     {.mlp = NN_GPT_MLP_GELU_TANH},
     {"transformer.h.0.mlp.c_fc.bias", "transformer.h.1.mlp.c_proj.weight",
      "transformer.ln_f.bias"},
     {"transformer.h.0.mlp.c_up.weight", "lm_head.weight"}},
    {"GPT-NeoX-like: parallel attention and MLP, rotary on 2 of each head's 4 columns, untied",
     {.pos = NN_GPT_POS_ROPE,
      .parallel_residual = 1,
      .rotary_dim = 2,
      .untied = 1,
      .mlp = NN_GPT_MLP_GELU_TANH},
     {"transformer.h.0.ln_2.weight", "transformer.h.1.ln_1.bias", "lm_head.weight"},
     {"transformer.wpe.weight"}},
    {"LLaMA with parallel attention and MLP, grouped-query, rotary on 2 of 4 columns",
     {.style = NN_LLAMA,
      .parallel_residual = 1,
      .rotary_dim = 2,
      .n_head = 4,
      .n_embd = 16,
      .n_kv_head = 2,
      .ffn_hidden = 12},
     {"layers.0.ffn_norm.weight", "layers.1.attention_norm.weight"},
     {"pos_embeddings.weight"}},
    {"LLaMA with a ReLU MLP",
     {.style = NN_LLAMA, .mlp = NN_GPT_MLP_RELU, .ffn_hidden = 12},
     {"layers.0.feed_forward.w1.weight", "layers.1.feed_forward.w2.weight", "norm.weight"},
     {"layers.0.feed_forward.w3.weight", "layers.0.feed_forward.w1.bias"}},
    {"LLaMA without norms or positions, with dropout, untied",
     {.style = NN_LLAMA,
      .norm = NN_GPT_NORM_NONE,
      .pos = NN_GPT_POS_NONE,
      .dropout = 0.1,
      .untied = 1,
      .ffn_hidden = 12},
     {"output.weight", "layers.0.feed_forward.w3.weight"},
     {"layers.0.attention_norm.weight", "layers.0.ffn_norm.weight", "norm.weight"}},
};
#define N_MIXES (sizeof mixes / sizeof mixes[0])

/* the rows' numbers, the parameters of each test over the table */
static struct criterion_test_params mix_rows(void) {
    static size_t k[N_MIXES];
    for (size_t i = 0; i < N_MIXES; i++) k[i] = i;
    return cr_make_param_array(size_t, k, N_MIXES);
}

/* a row's configuration with tiny's sizes where it gives none */
static GptConfig sized(GptConfig c) {
    c.vocab_size = tiny.vocab_size, c.block_size = tiny.block_size, c.n_layer = tiny.n_layer;
    if (!c.n_embd) c.n_embd = tiny.n_embd;
    if (!c.n_head) c.n_head = tiny.n_head;
    return c;
}

ParameterizedTestParameters(nn_gpt_mix, parameters_are_named_and_counted) { return mix_rows(); }
ParameterizedTest(size_t *k, nn_gpt_mix, parameters_are_named_and_counted) {
    const GptMix *x = &mixes[*k];
    GptConfig c = sized(x->c);
    Arena *a = arena_new("params", 0);
    Rng rng;
    rng_seed(&rng, 1);
    Gpt m;
    nn_gpt_init(&m, a, &rng, &c);
    int64_t n = -1;
    cr_assert_eq(nn_gpt_check_config(&c, &n), AG_OK, "%s: %s", x->name, ag_last_error());
    cr_assert_eq((size_t)n, ag_params_count(&m.params), "%s: %lld counted, %zu made", x->name,
                 (long long)n, ag_params_count(&m.params));
    for (int i = 0; i < 6 && x->has[i]; i++)
        cr_assert(ag_params_find(&m.params, x->has[i]), "%s: no %s", x->name, x->has[i]);
    for (int i = 0; i < 6 && x->lacks[i]; i++)
        cr_assert(!ag_params_find(&m.params, x->lacks[i]), "%s: has %s", x->name, x->lacks[i]);
    for (int i = 0; i < m.params.n; i++) /* one convention a model */
        cr_assert(strncmp(m.params.items[i]->name, "transformer.", 12) == 0 ||
                      strcmp(m.params.items[i]->name, "lm_head.weight") == 0 ||
                      x->c.style == NN_LLAMA,
                  "%s: %s", x->name, m.params.items[i]->name);
    cr_assert(x->c.untied || m.lm_head.weight == m.wte.weight, "%s: the head is tied", x->name);
    /* the options made explicit describe the same model */
    GptConfig o = nn_gpt_options(&c);
    cr_assert(o.pos && o.norm && o.mlp && o.bias && o.n_kv_head && o.rope_base && o.norm_eps);
    int64_t n2 = -1;
    cr_assert_eq(nn_gpt_check_config(&o, &n2), AG_OK, "%s: %s", x->name, ag_last_error());
    cr_assert_eq(n2, n, "%s: %lld parameters with the options explicit", x->name, (long long)n2);
    nn_gpt_free(&m);
    arena_free(a);
}

ParameterizedTestParameters(nn_gpt_mix, cached_decoding_equals_the_full_forward) {
    return mix_rows();
}
ParameterizedTest(size_t *k, nn_gpt_mix, cached_decoding_equals_the_full_forward) {
    GptConfig c = sized(mixes[*k].c);
    c.block_size = 9;
    check_cache(&c);
}

#ifdef AG_REAL_DOUBLE
ParameterizedTestParameters(nn_gpt_mix, gradients_match_finite_differences) { return mix_rows(); }
ParameterizedTest(size_t *k, nn_gpt_mix, gradients_match_finite_differences) {
    GptConfig c = sized(mixes[*k].c);
    check_gradients(&c);
}
#endif

static int same_config(const GptConfig *a, const GptConfig *b) {
    return a->style == b->style && a->vocab_size == b->vocab_size &&
           a->block_size == b->block_size && a->n_layer == b->n_layer && a->n_head == b->n_head &&
           a->n_embd == b->n_embd && a->n_kv_head == b->n_kv_head && a->dropout == b->dropout &&
           a->no_bias == b->no_bias && a->untied == b->untied && a->ffn_hidden == b->ffn_hidden &&
           a->rope_base == b->rope_base && a->norm_eps == b->norm_eps && a->pos == b->pos &&
           a->norm == b->norm && a->mlp == b->mlp && a->bias == b->bias &&
           a->post_ln == b->post_ln && a->parallel_residual == b->parallel_residual &&
           a->rotary_dim == b->rotary_dim;
}

/* Saves model m with the configuration table (fields), reads it back as today's table
 * describes it, rebuilds the model from what was read and loads its weights: the same config
 * (want) and, on the same tokens, the same logits to the bit. */
static void check_reload(const char *path, Gpt *m, const CkptField *fields, int n_fields,
                         const GptConfig *want) {
    GptConfig saved = m->cfg;
    Checkpoint ck = {.params = &m->params, .config = {"gpt", fields, n_fields, &saved, NULL}};
    cr_assert_eq(ckpt_save(path, &ck, 1, NULL), AG_OK, "%s", ag_last_error());
    GptConfig r;
    memset(&r, 0, sizeof r);
    CkptConfig cc = nn_gpt_ckpt_config(&r);
    NpzFile *f;
    cr_assert_eq(ckpt_read(path, &cc, &f), AG_OK, "%s", ag_last_error());
    cr_assert(same_config(&r, want), "the configuration read back differs");
    Arena *a = arena_new("params", 0);
    Tape *t = ag_tape_new(arena_new("step", 0));
    Rng rng;
    rng_seed(&rng, 99); /* other weights until the load */
    Gpt m2;
    nn_gpt_init(&m2, a, &rng, &r);
    Checkpoint ck2 = {.params = &m2.params, .config = nn_gpt_ckpt_config(&r)};
    cr_assert_eq(ckpt_load_from(f, &ck2), AG_OK, "%s", ag_last_error());
    npz_free(f);
    int idx[2 * 6];
    fill_ids(idx, 2, 6, r.vocab_size, 3);
    ag_no_grad(t, 1);
    Tensor *y1 = nn_gpt_forward(t, m, idx, 2, 6, NULL),
           *y2 = nn_gpt_forward(t, &m2, idx, 2, 6, NULL);
    cr_assert(memcmp(y1->data, y2->data, y1->size * sizeof(Real)) == 0, "other logits");
    ag_tape_free(t);
    nn_gpt_free(&m2);
    arena_free(a);
}

ParameterizedTestParameters(nn_gpt_mix, a_checkpoint_rebuilds_the_same_model) { return mix_rows(); }
ParameterizedTest(size_t *k, nn_gpt_mix, a_checkpoint_rebuilds_the_same_model) {
    char dir[64], path[600];
    ts_tmp_dir(dir, sizeof dir, "gptmix");
    ts_join(path, dir, "mix.npz");
    Arena *a = arena_new("params", 0);
    Rng rng;
    rng_seed(&rng, 8);
    Gpt m;
    GptConfig c = sized(mixes[*k].c);
    nn_gpt_init(&m, a, &rng, &c);
    CkptConfig cc = nn_gpt_ckpt_config(&c);
    check_reload(path, &m, cc.fields, cc.n_fields, &c);
    nn_gpt_free(&m);
    arena_free(a);
    ts_rm_tree(dir);
}

/* A checkpoint written before the options existed (the configuration table of that code, no
 * pos, norm, mlp, bias or post_ln entries) loads as the style's model it was. */
#define OLD_INT(f, lo, hi) CKPT_CFG_INT(GptConfig, f, lo, hi)
static const CkptField old_fields[] = {
    OLD_INT(style, 0, 1),
    OLD_INT(ffn_hidden, 0, 1 << 20),
    CKPT_CFG_FLOAT(GptConfig, rope_base, 0, 1e9),
    CKPT_CFG_FLOAT(GptConfig, norm_eps, 0, 0.5),
    OLD_INT(vocab_size, 1, 1 << 24),
    OLD_INT(block_size, 1, 1 << 20),
    OLD_INT(n_layer, 1, NN_MAX_LAYERS),
    OLD_INT(n_head, 1, 1024),
    OLD_INT(n_embd, 1, 1 << 16),
    OLD_INT(n_kv_head, 0, 1024),
    CKPT_CFG_FLOAT(GptConfig, dropout, 0, 0.99),
    OLD_INT(no_bias, 0, 1),
    OLD_INT(untied, 0, 1),
};

Test(nn_gpt, a_checkpoint_without_the_option_fields_loads_as_its_style) {
    const GptConfig olds[] = {
        {.no_bias = 1, .n_head = 4, .n_kv_head = 2},
        {.style = NN_LLAMA, .ffn_hidden = 12, .untied = 1, .rope_base = 500},
    };
    char dir[64], path[600];
    ts_tmp_dir(dir, sizeof dir, "gptold");
    ts_join(path, dir, "old.npz");
    for (size_t i = 0; i < sizeof olds / sizeof olds[0]; i++) {
        Arena *a = arena_new("params", 0);
        Rng rng;
        rng_seed(&rng, 8);
        Gpt m;
        GptConfig c = sized(olds[i]);
        nn_gpt_init(&m, a, &rng, &c);
        check_reload(path, &m, old_fields, (int)(sizeof old_fields / sizeof old_fields[0]), &c);
        NpzFile *f;
        cr_assert_eq(ckpt_read(path, NULL, &f), AG_OK, "%s", ag_last_error());
        cr_assert(!npz_find(f, "meta.config.pos") && !npz_find(f, "meta.config.post_ln"));
        npz_free(f);
        nn_gpt_free(&m);
        arena_free(a);
    }
    ts_rm_tree(dir);
}

/* Published depths: a 48-block model (GPT-2 XL's) builds, runs with hooks and caches; past
 * the build limit the refusal says it is one */
Test(nn_gpt, a_model_of_gpt2_xls_48_layers_runs_with_hooks_and_a_cache) {
    GptConfig c = tiny;
    c.n_layer = 48, c.block_size = 9;
    check_cache(&c);
    TsGpt e = ts_gpt_new(&c, 2, 0.2, 0, 2, 5);
    NnHooks h;
    nn_hooks_init(&h, c.n_layer);
    int calls = 0;
    cr_assert_eq(nn_hooks_add(&h, "blocks.*.hook_resid_post", ts_count_hook, &calls), 48);
    cr_assert(nn_gpt_forward_hooked(e.t, &e.m, e.ids, 2, 5, NULL, &h), "%s", ag_last_error());
    cr_assert_eq(calls, 48);
    nn_hooks_free(&h);
    ts_gpt_free(&e);
    c.n_layer = NN_GPT_MAX_LAYERS + 1;
    cr_assert_eq(nn_gpt_check_config(&c, NULL), AG_ERR_FORMAT);
    cr_assert(strstr(ag_last_error(), "n_layer 257 outside [1, 256] (256: a build limit, "
                                      "NN_GPT_MAX_LAYERS in src/nn/nn.h)"),
              "%s", ag_last_error());
}

/* nn_gpt_init_unset: nn_gpt_init's parameters (names, shapes, order) without the draws (norm
 * weights 1, the rest 0); a checkpoint loaded into it gives the saved model's logits to the bit */
Test(nn_gpt, a_model_made_for_a_load_draws_nothing_and_loads_to_the_bit) {
    const GptConfig cs[] = {
        {.vocab_size = 7, .block_size = 6, .n_layer = 2, .n_head = 2, .n_embd = 8},
        {.style = NN_LLAMA,
         .vocab_size = 7,
         .block_size = 6,
         .n_layer = 2,
         .n_head = 2,
         .n_embd = 8,
         .untied = 1,
         .pos = NN_GPT_POS_LEARNED},
    };
    char dir[64], path[600];
    ts_tmp_dir(dir, sizeof dir, "gptunset");
    ts_join(path, dir, "m.npz");
    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) {
        TsGpt e = ts_gpt_new(&cs[k], 5, 0.2, 0.1, 2, 6);
        Checkpoint ck = {.params = &e.m.params, .config = nn_gpt_ckpt_config(&e.m.cfg)};
        cr_assert_eq(ckpt_save(path, &ck, 1, NULL), AG_OK, "%s", ag_last_error());
        Arena *a = arena_new("params", 0);
        Gpt m;
        nn_gpt_init_unset(&m, a, &cs[k]);
        cr_assert_eq(m.params.n, e.m.params.n);
        for (int i = 0; i < m.params.n; i++) {
            const Tensor *p = m.params.items[i], *q = e.m.params.items[i];
            cr_assert_str_eq(p->name, q->name);
            cr_assert(p->size == q->size && p->ndim == q->ndim);
            int norm = strstr(p->name, "norm") || strstr(p->name, "ln_");
            int weight = strstr(p->name, ".weight") != NULL;
            for (size_t j = 0; j < p->size; j++)
                cr_assert(p->data[j] == (norm && weight ? 1 : 0), "%s[%zu] = %g", p->name, j,
                          (double)p->data[j]);
        }
        Checkpoint ck2 = {.params = &m.params, .config = nn_gpt_ckpt_config(&m.cfg)};
        cr_assert_eq(ckpt_load(path, &ck2), AG_OK, "%s", ag_last_error());
        ag_no_grad(e.t, 1);
        Real *want = ts_values(nn_gpt_forward(e.t, &e.m, e.ids, 2, 6, NULL));
        Tensor *y = nn_gpt_forward(e.t, &m, e.ids, 2, 6, NULL);
        cr_assert(memcmp(want, y->data, y->size * sizeof(Real)) == 0, "other logits");
        free(want);
        nn_gpt_free(&m);
        arena_free(a);
        ts_gpt_free(&e);
    }
    ts_rm_tree(dir);
}

/* Misuse: nn_gpt_init aborts naming itself and the configuration's fault. */
static void init_bad(void *ctx) {
    Arena *a = arena_new("params", 0);
    Rng rng;
    rng_seed(&rng, 1);
    Gpt m;
    nn_gpt_init(&m, a, &rng, ctx);
}

Test(nn_gpt_mix, a_bad_mix_aborts_naming_the_configuration) {
    struct {
        GptConfig c;
        const char *why;
    } bad[] = {
        {{.n_head = 4, .n_kv_head = 3}, "n_kv_head 3 (0: n_head) must divide n_head"},
        {{.n_head = 2, .n_embd = 6, .pos = NN_GPT_POS_ROPE}, "head size 3"},
        {{.style = NN_LLAMA, .n_embd = 6}, "must be even for RoPE"},
        {{.pos = 4}, "pos 4"},
        {{.norm = -1}, "norm -1"},
        {{.mlp = 7}, "mlp 7"},
        {{.bias = 3}, "bias 3"},
        {{.post_ln = 2}, "post_ln 2"},
        {{.no_bias = 1, .bias = NN_GPT_BIAS_ON}, "no_bias 1 contradicts bias"},
        {{.rotary_dim = 2},
         "rotary_dim 2 must be 0 (the whole head), or even, > 0 and <= the head size 4 with rotary "
         "positions (pos 1)"},
        {{.pos = NN_GPT_POS_ROPE, .rotary_dim = 3}, "rotary_dim 3"},
        {{.pos = NN_GPT_POS_ROPE, .rotary_dim = 6}, "rotary_dim 6"},
        {{.style = NN_LLAMA, .rotary_dim = -2}, "rotary_dim -2"},
        {{.parallel_residual = 2}, "parallel_residual 2 must be 0 or 1"},
        {{.parallel_residual = 1, .post_ln = 1},
         "parallel_residual 1 needs pre-LN blocks with an MLP (post_ln 1, mlp 1)"},
        {{.parallel_residual = 1, .mlp = NN_GPT_MLP_NONE}, "(post_ln 0, mlp 3)"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        GptConfig cfg = sized(bad[k].c);
        Capture c;
        capture_run(init_bad, &cfg, &c);
        cr_expect(capture_aborted(&c), "case %zu did not abort: %s", k, c.err);
        cr_expect(capture_has(&c, "nn_gpt_init: ") && capture_has(&c, bad[k].why),
                  "case %zu: '%s' lacks '%s'", k, c.err, bad[k].why);
    }
}

/* ---- refusals ---- */

Test(nn_gpt, check_config_refuses_with_the_reason) {
    struct {
        GptConfig c;
        const char *why;
    } bad[] = {
        {{.vocab_size = 0, .block_size = 4, .n_layer = 1, .n_head = 1, .n_embd = 4},
         "vocab_size 0"},
        {{.vocab_size = 5, .block_size = 4, .n_layer = 0, .n_head = 1, .n_embd = 4}, "n_layer 0"},
        {{.vocab_size = 5, .block_size = 4, .n_layer = 1, .n_head = 3, .n_embd = 8},
         "n_head 3 must divide n_embd 8"},
        {{.vocab_size = 5, .block_size = 4, .n_layer = 1, .n_head = 4, .n_embd = 8, .n_kv_head = 3},
         "n_kv_head 3"},
        {{.vocab_size = 5, .block_size = 4, .n_layer = 1, .n_head = 1, .n_embd = 4, .dropout = 1},
         "dropout 1"},
        {{.vocab_size = 5, .block_size = 4, .n_layer = 1, .n_head = 1, .n_embd = 4, .untied = 2},
         "untied 2"},
        {{.style = 2, .vocab_size = 5, .block_size = 4, .n_layer = 1, .n_head = 1, .n_embd = 4},
         "style 2"},
        {{.style = NN_LLAMA,
          .vocab_size = 5,
          .block_size = 4,
          .n_layer = 1,
          .n_head = 2,
          .n_embd = 6},
         "head size 3"},
        {{.vocab_size = 5, .block_size = 4, .n_layer = 1, .n_head = 1, .n_embd = 4, .norm_eps = -1},
         "norm_eps -1"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        cr_assert_eq(nn_gpt_check_config(&bad[k].c, NULL), AG_ERR_FORMAT, "case %zu accepted", k);
        cr_assert(strstr(ag_last_error(), bad[k].why), "case %zu: '%s' lacks '%s'", k,
                  ag_last_error(), bad[k].why);
    }
}

static void forward_with(const int *idx, int T) {
    Arena *a = arena_new("params", 0);
    Tape *t = ag_tape_new(arena_new("step", 0));
    Rng rng;
    rng_seed(&rng, 1);
    Gpt m;
    nn_gpt_init(&m, a, &rng, &tiny);
    nn_gpt_forward(t, &m, idx, 1, T, NULL);
}
Test(nn_gpt, a_token_outside_the_vocabulary_aborts, .signal = SIGABRT) {
    forward_with((const int[]){1, 2, 7}, 3);
}
Test(nn_gpt, a_sequence_longer_than_block_size_aborts, .signal = SIGABRT) {
    forward_with((const int[]){1, 2, 3, 4, 5, 6, 0}, 7);
}

/* ---- sampling ---- */

/* frequencies of n draws against the expected probabilities p (V of them): each within 5
 * standard deviations */
static void check_frequencies(const Real *logits, int V, const NnSampling *s, const double *p) {
    enum { N = 20000 };
    int count[16] = {0};
    Rng rng;
    rng_seed(&rng, 77);
    for (int i = 0; i < N; i++) count[nn_sample(logits, V, s, &rng)]++;
    for (int j = 0; j < V; j++) {
        double sd = sqrt(N * p[j] * (1 - p[j])) + 1e-9;
        cr_assert(fabs(count[j] - N * p[j]) <= 5 * sd, "token %d: %d draws, expected %.1f", j,
                  count[j], N * p[j]);
    }
}

Test(nn_sample, draws_follow_temperature_top_k_and_top_p) {
    /* probabilities 0.5, 0.3, 0.15, 0.05 at temperature 1 */
    const Real logits[4] = {(Real)log(0.5), (Real)log(0.3), (Real)log(0.15), (Real)log(0.05)};
    check_frequencies(logits, 4, &(NnSampling){.temperature = 1}, (double[]){0.5, 0.3, 0.15, 0.05});
    double z[4], t = 2, sum = 0, p[4]; /* temperature 2: softmax(logits / 2) */
    for (int j = 0; j < 4; j++) sum += z[j] = exp(logits[j] / t);
    for (int j = 0; j < 4; j++) p[j] = z[j] / sum;
    check_frequencies(logits, 4, &(NnSampling){.temperature = 2}, p);
    check_frequencies(logits, 4, &(NnSampling){.temperature = 1, .top_k = 2},
                      (double[]){0.5 / 0.8, 0.3 / 0.8, 0, 0});
    /* the nucleus: 0.5 + 0.3 reaches 0.79, not 0.81 */
    check_frequencies(logits, 4, &(NnSampling){.temperature = 1, .top_p = 0.79},
                      (double[]){0.5 / 0.8, 0.3 / 0.8, 0, 0});
    check_frequencies(logits, 4, &(NnSampling){.temperature = 1, .top_p = 0.81},
                      (double[]){0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0});
    check_frequencies(logits, 4, &(NnSampling){.temperature = 1, .top_k = 3, .top_p = 0.5},
                      (double[]){1, 0, 0, 0});
}

Test(nn_sample, greedy_takes_the_first_most_likely_and_draws_nothing) {
    const Real logits[5] = {0.1f, 2, -1, 2, 0};
    Rng rng, before;
    rng_seed(&rng, 3);
    before = rng;
    cr_assert_eq(nn_sample(logits, 5, &(NnSampling){0}, &rng), 1);
    cr_assert_eq(nn_sample(logits, 5, &(NnSampling){.temperature = 0.7, .top_k = 1}, NULL), 1);
    cr_assert(memcmp(&rng, &before, sizeof rng) == 0, "greedy drew from the rng");
    /* the same seed, the same tokens */
    Rng a, b;
    rng_seed(&a, 9), rng_seed(&b, 9);
    for (int i = 0; i < 100; i++)
        cr_assert_eq(nn_sample(logits, 5, &(NnSampling){.temperature = 1.3}, &a),
                     nn_sample(logits, 5, &(NnSampling){.temperature = 1.3}, &b));
}

/* nn_token_loss: -log softmax(z)[target], shifted so that large logits stay finite */
Test(nn_token_loss, is_the_rows_cross_entropy_and_stays_finite) {
    const Real z[4] = {1.5, -0.25, 3, 0};
    double e = exp(1.5) + exp(-0.25) + exp(3.0) + 1;
    for (int k = 0; k < 4; k++)
        cr_assert_float_eq(nn_token_loss(z, 4, k), log(e) - (double)z[k], 1e-12, "target %d", k);
    const Real big[2] = {10000, 9999};
    cr_assert_float_eq(nn_token_loss(big, 2, 1), log(1 + exp(1.0)), 1e-9);
}
Test(nn_token_loss, a_target_outside_the_logits_aborts, .signal = SIGABRT) {
    nn_token_loss((const Real[2]){0, 0}, 2, 2);
}

/* The reference of a draw: the tokens ranked by qsort on (logit / temperature descending, id),
 * the kept ones' weights e^(z - max z) in that order, the draw walked in that order */
typedef struct {
    double z;
    int id;
} RefRanked;
static int ref_by_rank(const void *a, const void *b) {
    const RefRanked *x = a, *y = b;
    return x->z != y->z ? (x->z > y->z ? -1 : 1) : (x->id > y->id) - (x->id < y->id);
}
static int ref_sample(const Real *logits, int V, const NnSampling *s, Rng *rng) {
    RefRanked *r = malloc((size_t)V * sizeof *r);
    cr_assert(r);
    for (int j = 0; j < V; j++) r[j] = (RefRanked){(double)logits[j] / s->temperature, j};
    qsort(r, (size_t)V, sizeof *r, ref_by_rank);
    int n = s->top_k > 0 && s->top_k < V ? s->top_k : V;
    double w[64], total = 0, kept = 0;
    cr_assert(n <= 64 || (s->top_p >= 1 && n == V));
    double *wt = n <= 64 ? w : malloc((size_t)n * sizeof *wt);
    for (int j = 0; j < n; j++) total += wt[j] = exp(r[j].z - r[0].z);
    if (s->top_p > 0 && s->top_p < 1) {
        int m = 0;
        while (m < n && kept < s->top_p * total) kept += wt[m++];
        n = m, total = kept;
    }
    double u = rng_uniform(rng) * total, run = 0;
    int tok = r[n - 1].id;
    for (int j = 0; j < n; j++)
        if (u < (run += wt[j])) {
            tok = r[j].id;
            break;
        }
    if (wt != w) free(wt);
    free(r);
    return tok;
}

/* nn_sample ranks the tokens by a radix sort of their logits: each draw must be the reference's
 * (qsort), on logits with many ties, +0 and -0, -inf, and a vocabulary of GPT-2's size */
Test(nn_sample, draws_the_tokens_of_a_ranking_by_logit_then_id) {
    static const int sizes[] = {1, 2, 7, 300, 50257};
    static const NnSampling how[] = {{.temperature = 1, .top_p = 1},
                                     {.temperature = 0.6, .top_k = 5, .top_p = 1},
                                     {.temperature = 1.7, .top_k = 40, .top_p = 0.9},
                                     {.temperature = 1, .top_k = 64, .top_p = 0.3}};
    Rng data;
    rng_seed(&data, 5);
    for (int c = 0; c < 10; c++) { /* 5 sizes; a few values, or only 0, -0 and -inf */
        int V = sizes[c / 2], zeros = c % 2;
        Real *logits = malloc((size_t)V * sizeof *logits);
        cr_assert(logits);
        for (int j = 0; j < V; j++) {
            int d = (int)(rng_uniform(&data) * (zeros ? 3 : 9));
            logits[j] = d == 0   ? (Real)0
                        : d == 1 ? -(Real)0
                        : d == 2 ? -(Real)INFINITY
                        : d == 3 ? (Real)(rng_normal(&data) * 5)
                                 : (Real)((d - 6) * 0.75);
        }
        logits[0] = zeros ? -(Real)0 : (Real)0.25; /* one finite at least */
        for (int h = 0; h < 4; h++) {
            Rng a, b;
            rng_seed(&a, 100 + h), rng_seed(&b, 100 + h);
            for (int i = 0; i < 25; i++) {
                int got = nn_sample(logits, V, &how[h], &a),
                    want = ref_sample(logits, V, &how[h], &b);
                cr_assert_eq(got, want,
                             "V %d (%s), sampling %d, draw %d: token %d, the reference's %d", V,
                             zeros ? "0, -0, -inf" : "mixed", h, i, got, want);
            }
        }
        free(logits);
    }
}

Test(nn_sample, drawing_from_logits_all_minus_infinity_aborts, .signal = SIGABRT) {
    Rng rng;
    rng_seed(&rng, 1);
    nn_sample((const Real[]){-(Real)INFINITY, -(Real)INFINITY}, 2, &(NnSampling){.temperature = 1},
              &rng);
}
Test(nn_sample, a_nan_logit_aborts, .signal = SIGABRT) {
    Rng rng;
    rng_seed(&rng, 1);
    nn_sample((const Real[]){0, NAN, 1}, 3, &(NnSampling){.temperature = 1}, &rng);
}
Test(nn_sample, a_negative_temperature_aborts, .signal = SIGABRT) {
    nn_sample((const Real[]){0, 1}, 2, &(NnSampling){.temperature = -1}, NULL);
}
Test(nn_sample, top_p_above_one_aborts, .signal = SIGABRT) {
    nn_sample((const Real[]){0, 1}, 2, &(NnSampling){.temperature = 1, .top_p = 1.5}, NULL);
}

/* ---- generation ---- */

static int collect(int token, void *ctx) {
    int *seen = ctx;
    seen[1 + seen[0]++] = token;
    return 0;
}

/* greedy generation over the cache (and past block_size, the window run again) equals the
 * argmax of the full forward on the last block_size tokens, token by token */
Test(nn_gpt, greedy_generation_equals_the_full_forward_on_the_cropped_window) {
    GptConfig c = tiny;
    c.block_size = 5;
    Arena *a = arena_new("params", 0);
    Tape *t = ag_tape_new(arena_new("step", 0));
    Rng rng;
    rng_seed(&rng, 21);
    Gpt m;
    nn_gpt_init(&m, a, &rng, &c);
    for (int i = 0; i < m.params.n; i++) /* a peaked model: its argmax is no near-tie */
        for (size_t j = 0; j < m.params.items[i]->size; j++) m.params.items[i]->data[j] *= 20;
    int ids[3 + 12] = {1, 4, 2}, seen[1 + 12] = {0};
    int added = nn_gpt_generate(t, &m, ids, 3, 12, &(NnSampling){0}, NULL, collect, seen);
    cr_assert_eq(added, 12);
    cr_assert_eq(seen[0], 12);
    int ref[3 + 12] = {1, 4, 2};
    for (int n = 3; n < 15; n++) {
        int T = n < c.block_size ? n : c.block_size;
        ag_tape_reset(t);
        ag_no_grad(t, 1);
        Tensor *y = nn_gpt_forward(t, &m, ref + n - T, 1, T, NULL);
        ref[n] = nn_sample(y->data + (size_t)(T - 1) * c.vocab_size, c.vocab_size, &(NnSampling){0},
                           NULL);
        cr_assert_eq(ids[n], ref[n], "token %d: %d generated, %d by the full forward", n, ids[n],
                     ref[n]);
        cr_assert_eq(seen[1 + n - 3], ids[n], "the callback saw token %d", n);
    }
    ag_tape_free(t);
    nn_gpt_free(&m);
    arena_free(a);
}

/* nn_gpt_loss_over: the windows' mean, weighted by their tokens, whatever the batch; a stream
 * of one token predicts nothing */
Test(nn_gpt, loss_over_a_stream_is_the_token_weighted_mean_of_its_windows) {
    TsGpt e = ts_gpt_new(&tiny, 5, 0.1, 0.3, 2, 8); /* 16 tokens: windows of 6, 6 and 3 */
    Tape *t = e.t;
    int T = tiny.block_size, *tok = e.ids;
    size_t n = 16;
    double sum = 0;
    ag_no_grad(t, 1);
    for (size_t lo = 0; lo + 1 < n; lo += (size_t)T) {
        int len = n - 1 - lo < (size_t)T ? (int)(n - 1 - lo) : T;
        ag_tape_reset(t);
        sum += len * (double)nn_gpt_loss(t, &e.m, tok + lo, tok + lo + 1, 1, len, NULL)->data[0];
    }
    ag_no_grad(t, 0);
    int64_t np;
    for (int batch = 1; batch <= 3; batch++) {
        double l = nn_gpt_loss_over(t, &e.m, tok, n, batch, &np);
        cr_assert_eq(np, (int64_t)n - 1);
        cr_assert_float_eq(l, sum / (double)(n - 1), 1e-5, "batch %d: %g, not %g", batch, l,
                           sum / (double)(n - 1));
    }
    cr_assert(!t->no_grad, "the tape's no-grad mode is put back");
    cr_assert(isnan(nn_gpt_loss_over(t, &e.m, tok, 1, 1, &np)) && np == 0);
    ts_gpt_free(&e);
}

static int stop_after_two(int token, void *ctx) {
    (void)token;
    return ++*(int *)ctx == 2;
}
Test(nn_gpt, generation_stops_when_the_callback_says_so) {
    Arena *a = arena_new("params", 0);
    Tape *t = ag_tape_new(arena_new("step", 0));
    Rng rng;
    rng_seed(&rng, 2);
    Gpt m;
    nn_gpt_init(&m, a, &rng, &tiny);
    int ids[1 + 10] = {3}, calls = 0;
    int added = nn_gpt_generate(t, &m, ids, 1, 10, &(NnSampling){.temperature = 1}, &rng,
                                stop_after_two, &calls);
    cr_assert_eq(added, 2);
    cr_assert_eq(calls, 2);
    ag_tape_free(t);
    nn_gpt_free(&m);
    arena_free(a);
}
