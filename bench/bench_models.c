/* bench_models.c: the time and memory of whole workloads, the attograd half of
 * bench/compare.py (bench/torch_bench.py is the PyTorch half, built to the same sizes).
 *
 *   bench_models --info   one line: version, kernel family, precision, CPUs, how idle threads wait
 *   bench_models WORKLOAD THREADS [STEPS [PRECISION]]
 *   -> attograd workload=<w> threads=<n> ms=<x> cpu_ms=<c> gflop=<f> dense_gflop=<d>
 *      live_rows=<r> peak_mib=<p> state_mib=<s> mem_mib=<m> tokens=<t> loss=<l> precision=<q>
 * PRECISION: fp32 (the default) or bf16, the step's products with bf16 inputs and fp32 sums
 * (ag_precision_use; the float build only).
 *
 * Workloads (one step each; the models train: loss, backward and an Adam update that zeroes the
 * gradients in its pass, optim_step_zero_grad; PyTorch zeroes them first, zero_grad):
 *   gemm           C (1024,1024) = A B, k_gemm alone
 *   mha            self-attention, d_model 256, 8 heads, x (32,64,256), forward and backward of
 *                  sum(y * R) (PyTorch: nn.MultiheadAttention, batch_first)
 *   seq2seq-small  nn_seq2seq: d 128, 4 heads, 2+2 layers, d_ff 512, vocabulary 64, batch 64,
 *                  source and target length 20 with padding (row b has 20 - b % 9 tokens),
 *                  post-LN, no dropout, cross-entropy ignoring padding, Adam
 *                  (nn_seq2seq_loss: the padded rows are skipped, about 20% of them)
 *   seq2seq-small-dense  the same step through the dense reference, nn_seq2seq_encode +
 *                  nn_seq2seq_decode + ag_cross_entropy: every row computed, padding included,
 *                  as PyTorch does (its side is the same model as seq2seq-small's)
 *   seq2seq-base   the same as seq2seq-small with d 512, 8 heads, 6+6 layers, d_ff 2048,
 *                  vocabulary 1000, batch 16, length 32
 *   gpt-tiny       decoder-only: embeddings + sinusoidal positions, 2 causal pre-LN encoder
 *                  layers (the GPT block: causal self-attention, a GELU feed-forward), a final
 *                  LayerNorm and an output Linear; d 128, 4 heads, d_ff 512, T 64, B 8,
 *                  vocabulary 512, Adam
 *   gpt            nn_gpt (GPT-2 style, src/nn/gpt.h) at gpt-tiny's sizes (learned positions,
 *                  tied head), Adam
 *   gpt-hooked     the same with a hook that does nothing at every point that keeps the fused
 *                  attention (4 + 12 per layer, src/nn/hooks.h): the cost of hooks set but idle
 *   gpt-hooked-all the same at every point (q, k, v, scores, pattern too): the explicit
 *                  attention's cost
 *   gpt2-124m      GPT-2 small at llm.c's CPU setting: nn_gpt with 12 layers, 12 heads, n_embd
 *                  768, vocabulary 50257, block 1024, random weights, B 4, T 64, AdamW
 *   gpt2-124m-256  the same with B 8, T 256
 * ms is the median wall time of STEPS steps (default 7) after two warm-up steps, cpu_ms the
 * median CPU time of all threads. gflop counts the multiply-adds of the products (2 flops each:
 * the Linear layers, q k^T and P v, forward and the two backward products) actually done: the
 * Linear layers of live rows only where padding is skipped; dense_gflop counts them over every
 * row (the work of the dense path and of PyTorch), and live_rows is the share of rows computed
 * (source and target rows together). peak_mib is the
 * step arena's peak (activations and gradients of one step); state_mib the parameters, their
 * gradients and Adam's moments. mem_mib is the memory traffic a perfect step cannot avoid,
 * estimated as 2 (state_mib + peak_mib): the optimizer reads and writes each array of the
 * state once, and each byte of the step arena's peak is written once and read once (the
 * roofline's memory side, bench/compare.py). tokens is what one step processes (source +
 * target).
 * Not here: GEMM shapes one by one (bench_gemm.c). Build: make bench (bench/README.md). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "tensor/kernels.h" /* below the public API: kernels called directly */
#include "attograd.h"

#define MIB (1024.0 * 1024.0)

static double clock_ms(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ---- one workload: what it owns and how it steps ---- */
typedef struct Bench Bench;
struct Bench {
    Arena *params;
    Tape *tape;
    Rng rng;
    ParamList *pl;  /* the trained parameters (NULL: nothing trained) */
    Optimizer *opt; /* Adam over pl, or NULL */
    double flops, tokens;
    double dense_flops;       /* the flops with every row computed (what PyTorch does), 0: flops */
    double live_rows;         /* the share of rows computed (1 unless padding is skipped) */
    double (*step)(Bench *w); /* one step; returns the loss */
    /* the workloads' state */
    Seq2Seq s2s;
    int B, S, T, V;
    int *src, *tgt_in, *tgt_out;
    Real *ga, *gb, *gc;
    MultiHeadAttention mha;
    Tensor *x, *r;
    ParamList gpt_params;
    Gpt gpt;
    NnHooks hooks;
    int hook_calls;
    int adamw; /* 1: AdamW (GPT-2 124M, as llm.c), else Adam */
    Embedding embed;
    PositionalEncoding pos;
    EncoderLayer layers[2];
    LayerNorm norm;
    Linear head;
};

/* multiply-adds of the products, times 2 flops, times 3 (forward, and backward's two
 * products per product) */
static double train_flops(double macs) { return 2 * 3 * macs; }

/* ids in [1, V) with row b of length T - b % 9 (the rest padding, id 0) when padded */
static int *tokens(Rng *rng, int B, int T, int V, int padded) {
    int *ids = malloc((size_t)B * T * sizeof *ids);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            ids[b * T + t] = padded && t >= T - b % 9 ? 0 : 1 + (int)rng_below(rng, V - 1);
    return ids;
}

/* ---- gemm ---- */
enum { GN = 1024 };
static double gemm_step(Bench *w) {
    k_gemm(0, 0, GN, GN, GN, w->ga, w->gb, w->gc, 0);
    return w->gc[0];
}
static void gemm_init(Bench *w) {
    size_t n = (size_t)GN * GN;
    w->ga = malloc(n * sizeof(Real));
    w->gb = malloc(n * sizeof(Real));
    w->gc = malloc(n * sizeof(Real));
    for (size_t i = 0; i < n; i++) {
        w->ga[i] = (Real)rng_normal(&w->rng);
        w->gb[i] = (Real)rng_normal(&w->rng);
    }
    w->flops = 2.0 * GN * GN * GN;
    w->tokens = 0;
    w->step = gemm_step;
}

/* ---- mha ---- */
enum { MB = 32, MT = 64, MC = 256, MNH = 8 };
static double mha_step(Bench *w) {
    Tensor *y = nn_mha_forward(w->tape, &w->mha, w->x, w->x, w->x, NULL, NULL);
    Tensor *loss = ag_sum(w->tape, ag_mul(w->tape, y, w->r));
    ag_backward(w->tape, loss);
    tensor_zero_grad(w->x);
    return loss->data[0];
}
static void mha_init(Bench *w) {
    static ParamList pl;
    ag_params_init(&pl);
    NnBuilder b = nn_builder(w->params, &pl, &w->rng);
    nn_mha_init(&w->mha, &b, "mha", &(MhaConfig){.d_model = MC, .n_heads = MNH});
    w->mha.need_weights = 0; /* as torch_bench.py's call, need_weights=False */
    w->x = tensor_new3(w->params, MB, MT, MC, "x");
    w->r = tensor_new3(w->params, MB, MT, MC, "R");
    rng_fill_normal(&w->rng, w->x, 0, 1);
    rng_fill_normal(&w->rng, w->r, 0, 1);
    tensor_requires_grad(w->x);
    w->pl = &pl;
    double rows = (double)MB * MT;
    w->flops = train_flops(4 * rows * MC * MC + 2.0 * MB * MT * MT * MC);
    w->tokens = rows;
    w->step = mha_step;
}

/* ---- seq2seq ---- */
/* nn_seq2seq_loss: only the live rows are computed */
static double seq2seq_step(Bench *w) {
    Tensor *l =
        nn_seq2seq_loss(w->tape, &w->s2s, w->src, w->S, w->tgt_in, w->tgt_out, w->B, w->T, &w->rng);
    ag_backward(w->tape, l);
    return l->data[0];
}
/* the dense reference: every row computed, padding included, as PyTorch's nn.Transformer */
static double seq2seq_dense_step(Bench *w) {
    Tape *t = w->tape;
    Tensor *memory = nn_seq2seq_encode(t, &w->s2s, w->src, w->B, w->S, &w->rng);
    Tensor *logits =
        nn_seq2seq_decode(t, &w->s2s, memory, w->src, w->S, w->tgt_in, w->B, w->T, &w->rng);
    Tensor *l = ag_cross_entropy(t, logits, w->tgt_out, w->s2s.cfg.pad_id);
    ag_backward(t, l);
    return l->data[0];
}
/* The Linear layers' multiply-adds of a seq2seq step over s source and t target rows, and the
 * attention products' (always over the whole (B, T) batch). */
static double seq2seq_macs(const Bench *w, double s, double t, int C, int FF, int V, int L) {
    double B = w->B, S = w->S, T = w->T;
    double enc = 4 * s * C * C + 2 * s * C * FF + 2 * B * S * S * C;
    double dec = 4 * t * C * C + 2 * t * C * C + 2 * s * C * C + 2 * t * C * FF +
                 2 * B * T * T * C + 2 * B * T * S * C;
    return L * (enc + dec) + t * C * V;
}
static void seq2seq_init(Bench *w, int small, int dense) {
    int V = small ? 64 : 1000, C = small ? 128 : 512, NH = small ? 4 : 8, L = small ? 2 : 6;
    int FF = small ? 512 : 2048;
    w->B = small ? 64 : 16;
    w->S = w->T = small ? 20 : 32;
    Seq2SeqConfig cfg = nn_seq2seq_default_config(V, V, C, NH, L);
    cfg.layer.d_ff = FF;
    cfg.layer.dropout = 0;
    nn_seq2seq_init(&w->s2s, w->params, &w->rng, &cfg);
    nn_seq2seq_need_weights(&w->s2s, 0); /* as nn.Transformer's layers: no attention maps */
    w->src = tokens(&w->rng, w->B, w->S, V, 1);
    w->tgt_in = tokens(&w->rng, w->B, w->T, V, 1);
    w->tgt_out = tokens(&w->rng, w->B, w->T, V, 1);
    w->pl = &w->s2s.params;
    double s = (double)w->B * w->S, t = (double)w->B * w->T; /* source and target rows */
    /* live rows, as nn_seq2seq_loss counts them: source rows that are not padding, target rows
     * whose input or target is not */
    double s_live = 0, t_live = 0;
    for (int i = 0; i < w->B * w->S; i++) s_live += w->src[i] != cfg.pad_id;
    for (int i = 0; i < w->B * w->T; i++)
        t_live += w->tgt_in[i] != cfg.pad_id || w->tgt_out[i] != cfg.pad_id;
    w->dense_flops = train_flops(seq2seq_macs(w, s, t, C, FF, V, L));
    w->flops = dense ? w->dense_flops : train_flops(seq2seq_macs(w, s_live, t_live, C, FF, V, L));
    w->live_rows = dense ? 1 : (s_live + t_live) / (s + t);
    w->tokens = s + t;
    w->step = dense ? seq2seq_dense_step : seq2seq_step;
}

/* ---- gpt-tiny ---- */
enum { GV = 512, GC = 128, GNH = 4, GL = 2, GFF = 512, GT = 64, GB = 8 };
static double gpt_step(Bench *w) {
    Tape *t = w->tape;
    Tensor *x = nn_positional(t, &w->pos, nn_embedding(t, &w->embed, w->src, GB, GT), 0);
    for (int i = 0; i < GL; i++) x = nn_encoder_layer(t, &w->layers[i], x, NULL, NULL);
    Tensor *logits = nn_linear(t, &w->head, nn_layernorm(t, &w->norm, x));
    Tensor *l = ag_cross_entropy(t, logits, w->tgt_out, -1);
    ag_backward(t, l);
    return l->data[0];
}
static void gpt_init(Bench *w) {
    ag_params_init(&w->gpt_params);
    NnBuilder b = nn_builder(w->params, &w->gpt_params, &w->rng);
    nn_embedding_init(&w->embed, &b, "embed", GV, GC, NN_NO_PADDING);
    nn_positional_init(&w->pos, &b, "pos", 128, GC, NN_SINUSOIDAL);
    TransformerConfig cfg = {
        .d_model = GC, .n_heads = GNH, .d_ff = GFF, .pre_ln = 1, .act = NN_GELU, .causal = 1};
    for (int i = 0; i < GL; i++) {
        NnBuilder layer = nn_scope(&b, "layers.%d", i);
        nn_encoder_layer_init(&w->layers[i], &layer, "", &cfg);
    }
    nn_layernorm_init(&w->norm, &b, "norm", GC, NN_LN_EPS);
    nn_linear_init(&w->head, &b, "head", GC, GV, NN_BIAS);
    w->src = tokens(&w->rng, GB, GT, GV, 0);
    w->tgt_out = tokens(&w->rng, GB, GT, GV, 0);
    w->pl = &w->gpt_params;
    double rows = (double)GB * GT;
    w->flops = train_flops(
        GL * (4 * rows * GC * GC + 2 * rows * GC * GFF + 2.0 * GB * GT * GT * GC) + rows * GC * GV);
    w->tokens = rows;
    w->step = gpt_step;
}

/* ---- gpt, gpt-hooked, gpt-hooked-all ---- */
static int idle_hook(Tape *t, Tensor **x, const NnHookPoint *at, void *ctx) {
    (void)t, (void)x, (void)at;
    ++*(int *)ctx;
    return AG_OK;
}
static double nn_gpt_step(Bench *w) {
    Tape *t = w->tape;
    int B = w->B, T = w->T;
    Tensor *logits = w->hooks.n ? nn_gpt_forward_hooked(t, &w->gpt, w->src, B, T, NULL, &w->hooks)
                                : nn_gpt_forward(t, &w->gpt, w->src, B, T, NULL);
    Tensor *l = ag_cross_entropy(t, logits, w->tgt_out, -1);
    ag_backward(t, l);
    return l->data[0];
}
/* nn_gpt of c on (B, T) rows, hooked: 0 none, 1 the idle hooks that keep the fused attention,
 * 2 every point */
static void nn_gpt_sized_init(Bench *w, GptConfig c, int B, int T, int hooked) {
    nn_gpt_init(&w->gpt, w->params, &w->rng, &c);
    nn_hooks_init(&w->hooks, c.n_layer);
    static const char *const idle[] = {"hook_*",
                                       "blocks.?.hook_*",
                                       "blocks.?.ln?.hook_*",
                                       "blocks.?.mlp.hook_*",
                                       "blocks.?.attn.hook_z",
                                       "ln_final.*"};
    for (size_t i = 0; hooked == 1 && i < sizeof idle / sizeof *idle; i++)
        nn_hooks_add(&w->hooks, idle[i], idle_hook, &w->hook_calls);
    if (hooked == 2) nn_hooks_add(&w->hooks, "*", idle_hook, &w->hook_calls);
    w->B = B, w->T = T;
    w->src = tokens(&w->rng, B, T, c.vocab_size, 0);
    w->tgt_out = tokens(&w->rng, B, T, c.vocab_size, 0);
    w->pl = &w->gpt.params;
    double rows = (double)B * T, C = c.n_embd;
    w->flops =
        train_flops(c.n_layer * (4 * rows * C * C + 2 * rows * C * 4 * C + 2.0 * B * T * T * C) +
                    rows * C * c.vocab_size);
    w->tokens = rows;
    w->step = nn_gpt_step;
}
static void nn_gpt_bench_init(Bench *w, int hooked) {
    GptConfig c = {.vocab_size = GV, .block_size = GT, .n_layer = GL, .n_head = GNH, .n_embd = GC};
    nn_gpt_sized_init(w, c, GB, GT, hooked);
}
/* ---- gpt2-124m, gpt2-124m-256: GPT-2 small (llm.c's CPU setting), random weights ---- */
static void gpt2_init(Bench *w, int B, int T) {
    GptConfig c = {
        .vocab_size = 50257, .block_size = 1024, .n_layer = 12, .n_head = 12, .n_embd = 768};
    nn_gpt_sized_init(w, c, B, T, 0);
    w->adamw = 1;
}

int main(int argc, char **argv) {
    if (argc < 3 && !(argc == 2 && strcmp(argv[1], "--info") == 0)) {
        fprintf(stderr,
                "usage: %s gemm|mha|seq2seq-small|seq2seq-small-dense|seq2seq-base|gpt-tiny|gpt|"
                "gpt-hooked|gpt-hooked-all|gpt2-124m|gpt2-124m-256 "
                "THREADS [STEPS [fp32|bf16]]\n       %s --info\n",
                argv[0], argv[0]);
        return 2;
    }
    const char *name = argv[1];
    if (argc == 2 && strcmp(name, "--info") == 0) { /* the header of make bench's output */
        printf("attograd %s: %s kernels (GEMM: %s), %s, %d CPUs (default %d threads), idle "
               "threads: %s\n",
               ATTOGRAD_VERSION, ag_kernel_family(), k_gemm_kernel_name(),
               sizeof(Real) == sizeof(float) ? "float" : "double", ag_threads_available(),
               ag_threads_default(), ag_threads_wait());
        return 0;
    }
    int threads = atoi(argv[2]), steps = argc > 3 ? atoi(argv[3]) : 7;
    if (steps < 1 || steps > 1000 || threads < 1) {
        fprintf(stderr, "%s: bad THREADS or STEPS\n", argv[0]);
        return 2;
    }
    const char *precision = argc > 4 ? argv[4] : "fp32";
    int bf16 = strcmp(precision, "bf16") == 0;
    if ((!bf16 && strcmp(precision, "fp32") != 0) ||
        ag_precision_use(bf16 ? AG_PRECISION_BF16 : AG_PRECISION_FP32) != AG_OK) {
        fprintf(stderr, "%s: PRECISION '%s': fp32, or bf16 in the float build\n", argv[0],
                precision);
        return 2;
    }
#ifdef _OPENMP
    omp_set_num_threads(threads);
#else
    threads = 1;
#endif
    Bench w;
    memset(&w, 0, sizeof w);
    w.params = arena_new("params", (size_t)1 << 30);
    w.tape = ag_tape_new(arena_new("step", (size_t)4 << 30));
    rng_seed(&w.rng, 1);
    if (strcmp(name, "gemm") == 0)
        gemm_init(&w);
    else if (strcmp(name, "mha") == 0)
        mha_init(&w);
    else if (strcmp(name, "seq2seq-small") == 0)
        seq2seq_init(&w, 1, 0);
    else if (strcmp(name, "seq2seq-small-dense") == 0)
        seq2seq_init(&w, 1, 1);
    else if (strcmp(name, "seq2seq-base") == 0)
        seq2seq_init(&w, 0, 0);
    else if (strcmp(name, "gpt-tiny") == 0)
        gpt_init(&w);
    else if (strcmp(name, "gpt") == 0)
        nn_gpt_bench_init(&w, 0);
    else if (strcmp(name, "gpt-hooked") == 0)
        nn_gpt_bench_init(&w, 1);
    else if (strcmp(name, "gpt-hooked-all") == 0)
        nn_gpt_bench_init(&w, 2);
    else if (strcmp(name, "gpt2-124m") == 0)
        gpt2_init(&w, 4, 64);
    else if (strcmp(name, "gpt2-124m-256") == 0)
        gpt2_init(&w, 8, 256);
    else {
        fprintf(stderr, "%s: unknown workload '%s'\n", argv[0], name);
        return 2;
    }
    if (w.pl && strcmp(name, "mha") != 0) {
        OptimConfig oc = optim_defaults(w.adamw ? OPTIM_ADAMW : OPTIM_ADAM);
        oc.lr = 1e-4;
        w.opt = optim_new(w.params, w.pl, &oc);
    }
    double *ms = malloc((size_t)steps * sizeof *ms), *cpu = malloc((size_t)steps * sizeof *cpu);
    double loss = 0;
    for (int i = 0; i < steps + 2; i++) { /* two warm-up steps, as torch_bench.py */
        double t0 = clock_ms(CLOCK_MONOTONIC), c0 = clock_ms(CLOCK_PROCESS_CPUTIME_ID);
        /* zero_grad: a pass of its own, or in Adam's (the parameters' gradients are zero
         * from their creation and after each optim_step_zero_grad) */
        if (w.pl && !w.opt) ag_params_zero_grad(w.pl);
        loss = w.step(&w);
        if (w.opt) optim_step_zero_grad(w.opt);
        ag_tape_reset(w.tape);
        if (i >= 2) {
            ms[i - 2] = clock_ms(CLOCK_MONOTONIC) - t0;
            cpu[i - 2] = clock_ms(CLOCK_PROCESS_CPUTIME_ID) - c0;
        }
    }
    qsort(ms, (size_t)steps, sizeof *ms, cmp_double);
    qsort(cpu, (size_t)steps, sizeof *cpu, cmp_double);
    if (w.dense_flops == 0) w.dense_flops = w.flops;
    if (w.live_rows == 0) w.live_rows = 1;
    double peak_mib = (double)w.tape->arena->peak / MIB, state_mib = (double)w.params->used / MIB;
    printf("attograd workload=%s threads=%d ms=%.3f cpu_ms=%.3f gflop=%.4f dense_gflop=%.4f "
           "live_rows=%.2f peak_mib=%.1f state_mib=%.1f mem_mib=%.1f tokens=%.0f loss=%.6f "
           "precision=%s\n",
           name, threads, ms[steps / 2], cpu[steps / 2], w.flops * 1e-9, w.dense_flops * 1e-9,
           w.live_rows, peak_mib, state_mib, 2 * (state_mib + peak_mib), w.tokens, loss, precision);
    free(ms);
    free(cpu);
    free(w.src);
    free(w.tgt_in);
    free(w.tgt_out);
    free(w.ga);
    free(w.gb);
    free(w.gc);
    if (w.pl == &w.s2s.params)
        nn_seq2seq_free(&w.s2s);
    else if (w.pl)
        ag_params_free(w.pl);
    arena_free(w.tape->arena);
    ag_tape_free(w.tape);
    arena_free(w.params);
    return 0;
}
