/* main.c: attograd-grokking, grokking of modular addition and its progress measures
 * (docs/grokking.md).
 *   attograd-grokking train [flags]     the model of Nanda et al. 2023 (nn_gpt: 1 layer, no
 *                                       norm, learned positions, untied head) on `a b =`,
 *                                       full-batch AdamW on the run loop (src/run), the state
 *                                       kept every --keep-every steps in OUT/ckpt/
 *   attograd-grokking eval [flags]      the run loop's eval: test loss and accuracies
 *   attograd-grokking analyze --out DIR the measures of every kept checkpoint: OUT/progress.npz,
 *                                       progress.csv, curves.png, fourier.png, measures.png,
 *                                       neurons.png, view.html (the same in one offline page:
 *                                       src/view), and a summary (grokking's steps, the key
 *                                       frequencies)
 * Not here: the measures themselves (measures.c). Read next: measures.c, docs/grokking.md. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attograd.h"
#include "grokking.h"

#define PROG "attograd-grokking"
#define GK_SHARE 0.85 /* a neuron one frequency explains: at least this share of its variance */

typedef struct {
    int p;
    double frac;
    int d_model, n_heads, d_mlp;
    int64_t data_seed;
} Config;

static int config_check(const void *values, int64_t *n_params) {
    const Config *c = values;
    if (!gk_is_prime(c->p) || c->p < 3)
        return ag_fail(AG_ERR_FORMAT, "p %d must be an odd prime", c->p);
    if (c->d_model % c->n_heads)
        return ag_fail(AG_ERR_FORMAT, "n_heads %d must divide d_model %d", c->n_heads, c->d_model);
    if (n_params) {
        int64_t V = c->p + 1, C = c->d_model, H = c->d_mlp;
        *n_params = 2 * V * C + 3 * C + 4 * C * C + 4 * C + 2 * C * H + H + C;
    }
    return AG_OK;
}
static const CkptField config_fields[] = {
    CKPT_CFG_INT(Config, p, 3, GK_MAX_P),   CKPT_CFG_FLOAT(Config, frac, 0.01, 0.99),
    CKPT_CFG_INT(Config, d_model, 4, 1024), CKPT_CFG_INT(Config, n_heads, 1, 64),
    CKPT_CFG_INT(Config, d_mlp, 1, 8192),   CKPT_CFG_INT(Config, data_seed, 0, 1LL << 53)};
#define N_CONFIG_FIELDS 6

typedef struct {
    Config cfg;
    Gpt gpt;
    RunConfig *run;
    unsigned char is_train[GK_MAX_P * GK_MAX_P];
    int n_train, n_test;
    int *train_ids, *train_tgt, *test_ids, *test_tgt; /* (n, 3): a b =; targets -1 -1 c */
} Model;

static GptConfig gpt_config(const Config *c) {
    GptConfig g = {.vocab_size = c->p + 1,
                   .block_size = 3,
                   .n_layer = 1,
                   .n_head = c->n_heads,
                   .n_embd = c->d_model,
                   .untied = 1,
                   .ffn_hidden = c->d_mlp};
    g.pos = NN_GPT_POS_LEARNED, g.norm = NN_GPT_NORM_NONE, g.mlp = NN_GPT_MLP_RELU;
    return g;
}

/* Nanda et al.'s initialization: each matrix N(0, 1/fan_in) (the unembedding 1/d_vocab), the
 * embeddings N(0, 1/d_model), biases 0 */
static void paper_init(Gpt *g, Rng *rng) {
    double C = g->cfg.n_embd;
    for (int i = 0; i < g->params.n; i++) {
        Tensor *t = g->params.items[i];
        if (t->ndim < 2) continue; /* biases stay 0 */
        double fan = t == g->lm_head.weight ? g->cfg.vocab_size : t->ndim == 2 ? t->shape[1] : C;
        if (t == g->wte.weight || t == g->wpe.table) fan = C;
        rng_fill_normal(rng, t, 0, 1 / sqrt(fan));
    }
}

/* every pair in two sets: training rows and test rows */
static void make_data(Model *m) {
    int p = m->cfg.p;
    m->n_train = gk_split(p, m->cfg.frac, (uint64_t)m->cfg.data_seed, m->is_train);
    m->n_test = p * p - m->n_train;
    free(m->train_ids), free(m->train_tgt), free(m->test_ids), free(m->test_tgt);
    m->train_ids = malloc((size_t)m->n_train * 3 * sizeof(int));
    m->train_tgt = malloc((size_t)m->n_train * 3 * sizeof(int));
    m->test_ids = malloc((size_t)m->n_test * 3 * sizeof(int));
    m->test_tgt = malloc((size_t)m->n_test * 3 * sizeof(int));
    AG_CHECK(m->train_ids && m->train_tgt && m->test_ids && m->test_tgt, PROG ": out of memory");
    int i = 0, j = 0;
    for (int a = 0; a < p; a++)
        for (int b = 0; b < p; b++) {
            int tr = m->is_train[a * p + b], *ids = tr ? m->train_ids + 3 * i : m->test_ids + 3 * j;
            int *tg = tr ? m->train_tgt + 3 * i++ : m->test_tgt + 3 * j++;
            ids[0] = a, ids[1] = b, ids[2] = p;
            tg[0] = -1, tg[1] = -1, tg[2] = (a + b) % p;
        }
}

static int build(void *ctx, Arena *a, Rng *init, ParamList **params) {
    Model *m = ctx;
    if (config_check(&m->cfg, NULL) != AG_OK)
        return ag_fail(AG_ERR_ARG, "--p %d, --heads %d, --d-model %d: %s", m->cfg.p, m->cfg.n_heads,
                       m->cfg.d_model, ag_last_error());
    GptConfig g = gpt_config(&m->cfg);
    nn_gpt_init(&m->gpt, a, init, &g);
    paper_init(&m->gpt, init);
    make_data(m);
    *params = &m->gpt.params;
    return AG_OK;
}

static int batch(void *ctx, int64_t step, int lo, int hi, int S, double *tokens) {
    Model *m = ctx;
    (void)step, (void)lo, (void)hi, (void)S;
    *tokens = m->n_train; /* the full batch: every training pair, every step */
    return AG_OK;
}

static Tensor *loss(void *ctx, Tape *t, int i, int S, Rng *rng) {
    Model *m = ctx;
    int64_t r0 = (int64_t)i * m->n_train / S, n = (int64_t)(i + 1) * m->n_train / S - r0;
    return n ? nn_gpt_loss(t, &m->gpt, m->train_ids + 3 * r0, m->train_tgt + 3 * r0, (int)n, 3, rng)
             : NULL;
}

/* the answers' accuracy of rows ids (n, 3): argmax over the p numbers at the last position */
static double accuracy(Model *m, Tape *t, const int *ids, const int *tgt, int n, double *loss_out) {
    int p = m->cfg.p, V = p + 1, right = 0;
    Tensor *lg = nn_gpt_forward(t, &m->gpt, ids, n, 3, NULL);
    if (loss_out) {
        double s = 0;
        for (int r = 0; r < n; r++)
            s += nn_token_loss(lg->data + ((size_t)r * 3 + 2) * V, V, tgt[3 * r + 2]);
        *loss_out = s / n;
    }
    for (int r = 0; r < n; r++) {
        const Real *l = lg->data + ((size_t)r * 3 + 2) * V;
        int arg = 0;
        for (int c = 1; c < p; c++)
            if (l[c] > l[arg]) arg = c;
        right += arg == tgt[3 * r + 2];
    }
    return (double)right / n;
}

/* test loss, test accuracy, train accuracy */
static int validate(void *ctx, Tape *t, double *v) {
    Model *m = ctx;
    int prev = ag_no_grad(t, 1);
    v[1] = accuracy(m, t, m->test_ids, m->test_tgt, m->n_test, &v[0]);
    ag_tape_reset(t);
    v[2] = accuracy(m, t, m->train_ids, m->train_tgt, m->n_train, NULL);
    ag_no_grad(t, prev);
    return AG_OK;
}

/* ---- analyze: the measures of every kept checkpoint ---- */

/* the measures of every checkpoint: a column each, (N_COLS, n) doubles, in this order */
enum { TRAIN_LOSS, TEST_LOSS, TRAIN_ACC, TEST_ACC, WNORM, RESTRICTED, EXCLUDED, EXPLAINED, N_COLS };
static const char *const col_names[N_COLS] = {
    "train_loss",  "test_loss",       "train_acc",     "test_acc",
    "weight_norm", "restricted_loss", "excluded_loss", "neurons_explained"};

/* the MLP's activations at the last position, (p^2, H) doubles */
typedef struct {
    double *act;
    int r0, H;
} Grab;
static int grab_post(Tape *t, Tensor **x, const NnHookPoint *at, void *ctx) {
    (void)t, (void)at;
    Grab *g = ctx;
    const Tensor *a = *x; /* (B, 3, H) */
    int B = a->shape[0];
    for (int r = 0; r < B; r++)
        for (int h = 0; h < g->H; h++)
            g->act[(size_t)(g->r0 + r) * g->H + h] =
                (double)a->data[((size_t)r * 3 + 2) * g->H + h];
    return AG_OK;
}

/* logits (p^2, p) of the answers and act (p^2, H): every pair, in chunks */
static int run_all(Model *m, Tape *t, double *logits, double *act) {
    int p = m->cfg.p, V = p + 1, P2 = p * p, H = m->cfg.d_mlp, chunk = 1024;
    int *ids = malloc((size_t)chunk * 3 * sizeof(int));
    AG_CHECK(ids, PROG ": out of memory");
    NnHooks hooks;
    nn_hooks_init(&hooks, 1);
    Grab g = {act, 0, H};
    nn_hooks_add(&hooks, "blocks.0.mlp.hook_post", grab_post, &g);
    int rc = AG_OK;
    for (int r0 = 0; r0 < P2 && rc == AG_OK; r0 += chunk) {
        int n = P2 - r0 < chunk ? P2 - r0 : chunk;
        for (int r = 0; r < n; r++)
            ids[3 * r] = (r0 + r) / p, ids[3 * r + 1] = (r0 + r) % p, ids[3 * r + 2] = p;
        g.r0 = r0;
        ag_tape_reset(t);
        int prev = ag_no_grad(t, 1);
        Tensor *lg = nn_gpt_forward_hooked(t, &m->gpt, ids, n, 3, NULL, &hooks);
        ag_no_grad(t, prev);
        if (!lg) {
            rc = AG_ERR_ARG;
            break;
        }
        for (int r = 0; r < n; r++)
            for (int c = 0; c < p; c++)
                logits[(size_t)(r0 + r) * p + c] = (double)lg->data[((size_t)r * 3 + 2) * V + c];
    }
    ag_tape_reset(t);
    nn_hooks_free(&hooks);
    free(ids);
    return rc;
}

/* ---- the pictures and the view: the curves described once (ViewPlot), drawn as PNGs by
 * gnuplot and shown in one offline HTML page (src/view, docs/view.md) ---- */

/* DIR/curves.png, measures.png, neurons.png, fourier.png (a skipped or failed picture is said on
 * stderr), and DIR/view.html: the curves (log step axis), the measures, the last checkpoint's
 * Fourier norms with the key frequencies marked, the norms of every checkpoint as a table, the
 * run's log.csv */
static int write_view(const char *dir, const Config *c, const int64_t *steps, double *v, int n,
                      const double *fnorms, int K, const int *keys, int nk) {
    double *x = malloc((size_t)n * sizeof *x), *fx = malloc((size_t)K * sizeof *fx), *col[N_COLS];
    AG_CHECK(x && fx, PROG ": out of memory");
    for (int j = 0; j < N_COLS; j++) col[j] = v + (size_t)j * n;
    for (int i = 0; i < n; i++) x[i] = (double)steps[i];
    for (int k = 0; k < K; k++) fx[k] = k + 1;
    char title[300], keytext[200] = "";
    int at = 0;
    for (int i = 0; i < nk; i++) at += snprintf(keytext + at, sizeof keytext - at, " %d", keys[i]);
    snprintf(title, sizeof title, "grokking: p %d, train fraction %.2f; key frequencies%s", c->p,
             c->frac, nk ? keytext : " none");
    ViewBuf b = {0}, mk = {0}; /* the page's plots and table, after its title (view_page) */
    view_raw(&mk, "\"bars\":true,\"marks_label\":\"key frequencies\",\"marks\":");
    view_ints(&mk, keys, (size_t)nk);
    char last[64];
    snprintf(last, sizeof last, "step %lld", (long long)steps[n - 1]);
    const char *const tt[] = {"train", "test"},
                      *both[] = {"train", "test", "restricted", "excluded"};
    ViewPlot pl[] = {
        {"loss", "train and test loss (cross-entropy)", "step", 1, 1, x, n, tt,
         (const double *[]){col[0], col[1]}, 2, NULL},
        {"accuracy", "train and test accuracy", "step", 1, 0, x, n, tt,
         (const double *[]){col[2], col[3]}, 2, "\"ymin\":0,\"ymax\":1"},
        {"restricted and excluded loss",
         "restricted loss (only the key frequencies kept, every pair) and excluded loss (the key "
         "frequencies removed, training pairs)",
         "step", 1, 1, x, n, both, (const double *[]){col[0], col[1], col[5], col[6]}, 4, NULL},
        {"weight norm", "total weight norm (L2, every parameter)", "step", 1, 0, x, n,
         (const char *[]){"weights"}, (const double *[]){col[4]}, 1, NULL},
        {"neurons", "share of the MLP neurons one frequency explains (>= 85% of variance)", "step",
         1, 0, x, n, (const char *[]){"neurons"}, (const double *[]){col[7]}, 1,
         "\"ymin\":0,\"ymax\":1"},
        {"fourier", "Fourier norms of the embedding by frequency, last checkpoint", "frequency k",
         0, 0, fx, K, (const char *[]){last}, (const double *[]){fnorms + (size_t)(n - 1) * K}, 1,
         mk.p}};
    view_plots(&b, pl, 6);
    const ViewPng png[] = {{"curves.png", pl, 2, 900, 760},
                           {"measures.png", pl + 2, 1, 900, 480},
                           {"neurons.png", pl + 3, 2, 900, 760},
                           {"fourier.png", pl + 5, 1, 900, 480}};
    view_plot_pngs(dir, png, 4, PROG " analyze", NULL, 0);
    view_buf_free(&mk);
    /* every checkpoint's norms: a table, a row a checkpoint, a column a frequency */
    char **rows = view_labels("step ", steps, n), **cols = view_labels("", NULL, K + 1);
    for (int j = 0; j < nk; j++) strcat(cols[keys[j]], "*"); /* frequencies 1..K: cols + 1 */
    view_raw(&b, ",\"tables\":[");
    view_table(&b, &(ViewTable){"Fourier norms",
                                "Fourier norms of the embedding, a row a checkpoint (key "
                                "frequencies: *)",
                                (const char *const *)rows, (const char *const *)cols + 1, n, K,
                                fnorms});
    view_raw(&b, "]");
    free(rows), free(cols);
    char path[1200];
    /* the run's own log (test loss and accuracy every --valid-every steps), when it is there */
    snprintf(path, sizeof path, "%s/log.csv", dir);
    int runs = access(path, F_OK) == 0;
    snprintf(path, sizeof path, "%s/view.html", dir);
    int rc = view_page(path, title, view_body_raw, &b, NULL, (char *[]){(char *)dir}, runs, NULL);
    view_buf_free(&b);
    free(x), free(fx);
    return rc;
}

static int analyze(int argc, char **argv) {
    const char *out = "build/grokking";
    int threads = 0;
    Flag fl[] = {{"out", FLAG_PATH, &out, "DIR",
                  "the run's folder (its ckpt/ holds the checkpoints)", 0, 0, NULL, 0},
                 {"threads", FLAG_INT, &threads, "N", "threads (0: OMP_NUM_THREADS or every core)",
                  0, 1024, NULL, 0}};
    int rc = flag_parse(fl, 2, argc, argv, NULL, NULL);
    if (rc == FLAG_HELP) {
        printf("usage: " PROG " analyze [flags]\nflags:\n");
        flag_help(stdout, fl, 2);
        return 0;
    }
    if (rc != AG_OK) {
        fprintf(stderr, PROG " analyze: %s\n", ag_last_error());
        return 2;
    }
    ag_threads_use(threads);
    char **names = NULL;
    int n = 0;
    if (run_kept(out, &names, &n) != AG_OK) {
        fprintf(stderr, PROG " analyze: %s (train with --keep-every first)\n", ag_last_error());
        return 2;
    }
    static Model m;
    RunModel model = {.ctx = &m, .build = build};
    model.config = (CkptConfig){"grokking", config_fields, N_CONFIG_FIELDS, &m.cfg, config_check};
    ParamList *params = NULL;
    Arena *arena = arena_new("grokking", 0), *step_arena = arena_new("step", 0);
    Tape *t = ag_tape_new(step_arena);
    int64_t *steps = calloc((size_t)n, sizeof *steps);
    double *v = calloc((size_t)n * N_COLS, sizeof *v);
    AG_CHECK(steps && v, PROG ": out of memory");
#define AT(c, i) v[(size_t)(c)*n + (i)]
    double *logits = NULL, *act = NULL, *work = NULL, *B = NULL, *W = NULL, *fnorms = NULL,
           *share = NULL;
    int *best = NULL, keys[16], nk = 0, K = 0, p = 0, H = 0, tty = isatty(2);
    rc = AG_OK;
    /* the last checkpoint first: its neurons name the key frequencies */
    for (int pass = 0; pass < n + 1 && rc == AG_OK; pass++) {
        int i = pass == 0 ? n - 1 : pass - 1;
        int64_t step;
        if ((rc = run_kept_load(&model, out, names[i], arena, &params, &step)) != AG_OK) break;
        if (!logits) { /* the first: buffers of the model's sizes */
            p = m.cfg.p, H = m.cfg.d_mlp, K = (p - 1) / 2;
            size_t P2 = (size_t)p * p;
            logits = malloc(P2 * p * sizeof *logits), work = malloc(P2 * p * sizeof *work);
            act = malloc(P2 * H * sizeof *act), B = malloc(P2 * sizeof *B);
            W = malloc((size_t)(p + 1) * m.cfg.d_model * sizeof *W); /* wte (V, C) */
            fnorms = calloc((size_t)n * K, sizeof *fnorms);
            share = malloc((size_t)H * sizeof *share), best = malloc((size_t)H * sizeof *best);
            AG_CHECK(logits && work && act && B && W && fnorms && share && best,
                     PROG ": out of memory");
            gk_fourier_basis(p, B);
        }
        if ((rc = run_all(&m, t, logits, act)) != AG_OK) break;
        gk_neuron_freqs(p, H, act, B, best, share);
        if (pass == 0) {
            int min_neurons = H / 50 > 2 ? H / 50 : 2;
            nk = gk_key_freqs(p, H, best, share, GK_SHARE, min_neurons, keys, 16);
            continue;
        }
        steps[i] = step;
        gk_loss(p, logits, m.is_train, 1, &AT(TRAIN_LOSS, i), &AT(TRAIN_ACC, i));
        gk_loss(p, logits, m.is_train, 0, &AT(TEST_LOSS, i), &AT(TEST_ACC, i));
        AT(WNORM, i) = ag_params_norm(params);
        AT(RESTRICTED, i) = gk_restricted_loss(p, logits, keys, nk, work);
        AT(EXCLUDED, i) = gk_excluded_loss(p, logits, m.is_train, keys, nk, work);
        int ex = 0;
        for (int h = 0; h < H; h++) ex += share[h] >= GK_SHARE;
        AT(EXPLAINED, i) = (double)ex / H;
        tensor_copy_to_doubles(m.gpt.wte.weight, W); /* its rows 0..p-1: the numbers */
        gk_freq_norms(p, m.cfg.d_model, W, B, fnorms + (size_t)i * K, NULL);
        if (tty) fprintf(stderr, "\r" PROG " analyze: %d/%d checkpoints", pass, n);
    }
    if (tty) fprintf(stderr, "\n");
    if (rc != AG_OK) {
        fprintf(stderr, PROG " analyze: %s\n", ag_last_error());
    } else {
        /* progress.npz and progress.csv */
        int64_t kk[16];
        NpzWriter *nw = npz_writer_new();
        int64_t sh[2] = {n, K};
        npz_add_i64(nw, "step", 1, sh, steps);
        for (int c = 0; c < N_COLS; c++) npz_add_f64(nw, col_names[c], 1, sh, &AT(c, 0));
        npz_add_f64(nw, "fourier_norms", 2, sh, fnorms);
        for (int i = 0; i < nk; i++) kk[i] = keys[i];
        npz_add_i64(nw, "key_freqs", 1, (int64_t[]){nk}, kk);
        char path[1200];
        snprintf(path, sizeof path, "%s/progress.npz", out);
        rc = npz_write(nw, path, 6, NULL);
        npz_writer_free(nw);
        snprintf(path, sizeof path, "%s/progress.csv", out);
        if (rc == AG_OK) rc = run_records_csv(path, steps, n, col_names, v, N_COLS);
        if (rc != AG_OK) fprintf(stderr, PROG " analyze: %s\n", ag_last_error());
    }
    if (rc == AG_OK) {
        /* the summary: where train accuracy reached 100 %, test 50 % and 95 % */
        int64_t tr100 = run_first_step(steps, &AT(TRAIN_ACC, 0), n, 1, 1),
                te50 = run_first_step(steps, &AT(TEST_ACC, 0), n, 0.5, 1),
                te95 = run_first_step(steps, &AT(TEST_ACC, 0), n, 0.95, 1);
        int l = n - 1;
        printf("p %d, train fraction %.2f (%d pairs), %d checkpoints to step %lld\n", p, m.cfg.frac,
               m.n_train, n, (long long)steps[l]);
        printf("train accuracy 100%%: step %lld; test accuracy 50%%: step %lld; 95%%: step %lld\n",
               (long long)tr100, (long long)te50, (long long)te95);
        printf("last: train loss %.3g, test loss %.3g, test accuracy %.4f, weight norm %.1f\n",
               AT(TRAIN_LOSS, l), AT(TEST_LOSS, l), AT(TEST_ACC, l), AT(WNORM, l));
        printf("key frequencies:");
        for (int i = 0; i < nk; i++) printf(" %d", keys[i]);
        printf("%s\nrestricted loss %.3g, excluded loss %.3g; %.0f%% of the MLP neurons explained "
               "by one frequency\n",
               nk ? "" : " none (no frequency explains enough neurons)", AT(RESTRICTED, l),
               AT(EXCLUDED, l), 100 * AT(EXPLAINED, l));
        printf("wrote %s/progress.npz, progress.csv, curves.png, measures.png, neurons.png, "
               "fourier.png\n",
               out);
        rc = write_view(out, &m.cfg, steps, v, n, fnorms, K, keys, nk);
        if (rc == AG_OK)
            printf("view: %s/view.html (the curves in a browser, offline)\n", out);
        else
            fprintf(stderr, PROG " analyze: %s\n", ag_last_error());
    }
    for (int i = 0; i < n; i++) free(names[i]);
#undef AT
    free(names), free(steps), free(v), free(logits), free(act), free(work), free(B), free(W),
        free(fnorms), free(share), free(best);
    free(m.train_ids), free(m.train_tgt), free(m.test_ids), free(m.test_tgt);
    if (params) nn_gpt_free(&m.gpt);
    ag_tape_free(t);
    arena_free(step_arena), arena_free(arena);
    return rc == AG_OK ? 0 : 2; /* a file that cannot be read or written */
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "analyze") == 0) return analyze(argc - 2, argv + 2);
    dist_init();
    static Model m = {
        .cfg = {
            .p = 113, .frac = 0.3, .d_model = 128, .n_heads = 4, .d_mlp = 512, .data_seed = 598}};
    RunConfig rc = run_defaults();
    rc.steps = 20000, rc.optim.lr = 1e-3, rc.optim.beta2 = 0.98, rc.weight_decay = 1.0;
    rc.optim.schedule = (OptimSchedule){OPTIM_WARMUP_COSINE, 10, 0, 1e-3}; /* 10 warmup, flat */
    rc.clip = 0, rc.batch = 1 << 20, rc.log_every = 100, rc.valid_every = 100;
    rc.save_every = 1000, rc.keep_every = 100, rc.out = "build/grokking";
    m.run = &rc;
    static const char *const metrics[] = {"loss", "accuracy", "train_accuracy"};
    RunModel model = {.prog = PROG, .ctx = &m, .build = build, .batch = batch, .loss = loss};
    model.validate = validate, model.n_metrics = 3, model.metric_names = metrics;
    model.config = (CkptConfig){"grokking", config_fields, N_CONFIG_FIELDS, &m.cfg, config_check};
    RunLoop *r = run_new(&model, &rc);
    Flag fl[7 + RUN_N_FLAGS] = {
        {"p", FLAG_INT, &m.cfg.p, "P", "the modulus (an odd prime)", 3, GK_MAX_P, NULL, 0},
        {"frac", FLAG_DOUBLE, &m.cfg.frac, "F", "the share of pairs trained on", 0.01, 0.99, NULL,
         0},
        {"d-model", FLAG_INT, &m.cfg.d_model, "N", "the residual stream's width", 4, 1024, NULL, 0},
        {"heads", FLAG_INT, &m.cfg.n_heads, "N", "attention heads", 1, 64, NULL, 0},
        {"d-mlp", FLAG_INT, &m.cfg.d_mlp, "N", "MLP neurons", 1, 8192, NULL, 0},
        {"data-seed", FLAG_I64, &m.cfg.data_seed, "N", "the split's seed", 0, 1LL << 53, NULL, 0},
        {"keep-every", FLAG_INT, &rc.keep_every, "N",
         "keep the state every N steps in OUT/ckpt/ (0: none)", 0, 1 << 30, NULL, 0}};
    int code = run_main(r, fl, 7 + run_flags(r, fl + 7), argc, argv);
    run_loop_free(r);
    nn_gpt_free(&m.gpt);
    free(m.train_ids), free(m.train_tgt), free(m.test_ids), free(m.test_tgt);
    dist_finalize();
    return code;
}
