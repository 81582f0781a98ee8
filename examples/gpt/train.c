/* train.c: `attograd-gpt train`, nanoGPT's train.py in C on the library's run loop (src/run,
 * docs/run.md): random windows of block_size tokens from train.bin (a seeded TxtLoader draws
 * their starts; each window is read from the file when it is used, so memory does not grow
 * with the file, and a process reads only its rows' and its validation batches' windows), the
 * GPT's loss; the run gives the rest: AdamW with nanoGPT's groups (decay on the weights of two
 * or more dimensions), warmup and cosine decay to --lr-min, clipping, --shards and mpirun, the
 * CSV, progress, loss.png, best.npz and last.npz, SIGINT and the NaN stop, and --resume to the
 * bit. Here: the model's flags (nanoGPT's names as aliases of the run's), the batch, the loss of
 * a shard, the validation (the mean loss over --eval-iters fixed batches of valid.bin), the
 * loader's position and the data's sizes as the model's state, the tokenizer in meta.extra,
 * the model's own check of its flags on --resume (a choice is compared as the model it makes:
 * --bias on a GPT-2 model is accepted), and checkpoints written before the run loop (their
 * positional data.position, GP_POS_*), which still resume to the bit. --init-from DIR: the
 * model (configuration and weights) of a Hugging Face folder (src/hf's hf_load), fine-tuned on
 * data whose tokenizer is the folder's, in a window (--block-size) of at most its context;
 * the checkpoints hold the model, so --resume needs no folder.
 * Not here: checkpoints for sampling (sample.c), the flag parser (src/flag). Read next:
 * sample.c. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpt_cli.h"

/* data.position of a checkpoint written before the run loop (int64 values; "bits": a double's) */
enum {
    GP_POS_LOADER = 0,               /* TXT_LOADER_STATE_LEN values: the train loader */
    GP_POS_SEED = GP_POS_LOADER + 5, /* --seed */
    GP_POS_BATCH,                    /* --batch */
    GP_POS_N_TRAIN,                  /* tokens of train.bin */
    GP_POS_N_VALID,                  /* tokens of valid.bin */
    GP_POS_WD,                       /* --weight-decay (bits) */
    GP_POS_CLIP,                     /* --clip (bits) */
    GP_POS_EVAL_INTERVAL,
    GP_POS_EVAL_ITERS,
    GP_POS_LOG_INTERVAL,
    GP_POS_BEST_STEP,  /* step of best.npz (0: none) */
    GP_POS_BEST_LOSS,  /* its valid loss (bits) */
    GP_POS_LAST_VALID, /* the last step validated */
    GP_POS_IV_LOSS,
    GP_POS_IV_NORM,  /* sums since the last CSV row (bits) */
    GP_POS_IV_STEPS, /* steps since the last CSV row */
    GP_POS_SHARDS,   /* --shards, written only when above 1 */
    GP_POS_COUNT
};

/* the model's state beside the run's (meta.run.model.*) */
typedef struct {
    int64_t loader[TXT_LOADER_STATE_LEN]; /* the train loader (txt_loader_state) */
    int64_t n_train, n_valid;             /* the data's tokens: a resume needs the same data */
    int64_t window; /* the training window (tokens); 0 in older files: the model's block_size */
} GpState;

#define GP_STATE_FIELD(f, lo, hi)                                                                  \
    { #f, CKPT_FIELD_INT, offsetof(GpState, f), sizeof(int64_t), lo, hi, 0 }
static const CkptField state_fields[] = {
    {"loader0", CKPT_FIELD_INT, offsetof(GpState, loader), 8, -1e19, 1e19, 0},
    {"loader1", CKPT_FIELD_INT, offsetof(GpState, loader) + 8, 8, -1e19, 1e19, 0},
    {"loader2", CKPT_FIELD_INT, offsetof(GpState, loader) + 16, 8, -1e19, 1e19, 0},
    {"loader3", CKPT_FIELD_INT, offsetof(GpState, loader) + 24, 8, -1e19, 1e19, 0},
    {"loader_batches", CKPT_FIELD_INT, offsetof(GpState, loader) + 32, 8, 0, 1e18, 0},
    GP_STATE_FIELD(n_train, 2, TXT_SHARD_MAX_TOKENS),
    GP_STATE_FIELD(n_valid, 2, TXT_SHARD_MAX_TOKENS),
    {"window", CKPT_FIELD_INT, offsetof(GpState, window), sizeof(int64_t), 0, 1 << 20, 1},
};

typedef struct {
    RunConfig rc;
    GptConfig mc;    /* the model: from the flags (a new run) or the checkpoint's (--resume) */
    GptConfig given; /* the model's flags */
    int llama, bias, eval_iters;
    int pos, norm, mlp; /* --pos, --norm, --mlp: NnGptPos, NnGptNorm, NnGptMlp less 1 */
    const char *data;
    char *saved_data;      /* --data read from OUT/last.npz on --resume */
    const char *init_from; /* --init-from: a Hugging Face folder whose model is fine-tuned */
    int T;                 /* the training window: block_size, or shorter with --init-from */
    Flag *fl;
    int n_fl;
    GpState st;
    TxtAny
        text; /* the data's tokenizer: attograd's, or a folder's tokenizer.json (prepare --model) */
    uint8_t *tok_bytes;
    size_t tok_len;
    TxtShard *train_bin, *valid_bin; /* open: each process reads the windows of its rows */
    size_t n_train, n_valid;
    Gpt m;
    TxtLoader loader;
    int *x, *y, *win; /* (batch, block) inputs and targets; a window of block + 1 tokens */
    size_t *starts;   /* (batch) the windows of this batch */
    char *last_path;  /* OUT/last.npz */
    RunModel *model;
    RunLoop *run;
    int built;
} GpTrain;

#define GP_MAX_STEP_TOKENS (1 << 22) /* batch x block: 4M tokens a step */

/* ---- the model's flags ---- */

/* The names of NnGptPos, NnGptNorm, NnGptMlp; from 1 on the choices of --pos, --norm, --mlp
 * (0, the style's choice, is no value) */
static const char *const pos_names[] = {"", "learned", "rope", "none", NULL};
static const char *const norm_names[] = {"", "layernorm", "rmsnorm", "none", NULL};
static const char *const mlp_names[] = {"", "gelu", "swiglu", "none", NULL};

/* --resume: a model flag given again must make the checkpoint's model (mc); AG_ERR_ARG naming
 * it. The architecture is meta.config's, so these flags are not among the run's saved ones. */
static int check_given(const GpTrain *g, const GptConfig *mc) {
    GptConfig so = nn_gpt_options(mc); /* the stored model's choices, each made */
    const GptConfig *gv = &g->given;
    const char *bias = so.bias == NN_GPT_BIAS_ON ? "biases" : "no biases";
    const RunGiven v[] = {
        {"layers", gv->n_layer, mc->n_layer, NULL},
        {"heads", gv->n_head, mc->n_head, NULL},
        {"d-model", gv->n_embd, mc->n_embd, NULL},
        {"kv-heads", gv->n_kv_head, so.n_kv_head, NULL},
        {"llama", gv->style, mc->style, mc->style ? "LLaMA" : "GPT-2"},
        {"pos", gv->pos, so.pos, pos_names[so.pos]},
        {"norm", gv->norm, so.norm, norm_names[so.norm]},
        {"mlp", gv->mlp, so.mlp, mlp_names[so.mlp]},
        {"bias", NN_GPT_BIAS_ON, so.bias, bias},
        {"no-bias", NN_GPT_BIAS_OFF, so.bias, bias},
        {"post-ln", gv->post_ln, mc->post_ln, NULL},
        {"ff", gv->ffn_hidden, so.ffn_hidden, NULL},
        {"rope-base", gv->rope_base, so.rope_base, NULL},
        {"untied", gv->untied, mc->untied, NULL},
        {"block-size", gv->block_size, g->T, NULL},
        {"dropout", gv->dropout, mc->dropout, NULL},
    };
    return run_check_given(g->fl, g->n_fl, v, (int)(sizeof v / sizeof v[0]));
}

/* ---- data ---- */

/* DATA/tokenizer (attograd's, or a folder's tokenizer.json: txt_any_from_bytes), its
 * saved form (what checkpoints keep) and the shards, their tokens below its ids */
static int read_data(GpTrain *g) {
    char *p = io_path_join(g->data, "tokenizer");
    uint8_t *b;
    size_t len;
    int rc = txt_load_bytes(p, (size_t)CKPT_MAX_EXTRA, &b, &len); /* what a checkpoint keeps */
    if (rc == AG_OK) rc = txt_any_from_bytes(b, len, p, &g->text);
    if (rc == AG_OK) g->tok_bytes = txt_any_to_bytes(&g->text, &g->tok_len);
    free(b);
    free(p);
    if (rc != AG_OK) return rc;
    int V = txt_any_vocab_size(&g->text);
    p = io_path_join(g->data, "train.bin"); /* shards: regular files only (a FIFO never hangs) */
    rc = txt_shard_open(p, V, &g->train_bin);
    free(p);
    if (rc != AG_OK) return rc;
    g->n_train = txt_shard_count(g->train_bin);
    p = io_path_join(g->data, "valid.bin");
    rc = txt_shard_open(p, V, &g->valid_bin);
    free(p);
    if (rc == AG_OK) g->n_valid = txt_shard_count(g->valid_bin);
    return rc;
}

/* ---- --init-from: a Hugging Face folder's model ---- */

/* the flags that make a model: with --init-from its config.json does */
#define GP_MODEL_FLAGS                                                                             \
    "layers", "heads", "d-model", "kv-heads", "llama", "pos", "norm", "mlp", "ff", "rope-base",    \
        "bias", "no-bias", "post-ln", "untied"
static const char *const model_flags[] = {GP_MODEL_FLAGS, NULL};

/* A new run from --init-from DIR: no model flag (the folder's config.json makes the model), the
 * configuration read (g->mc) with --dropout's rate (0 unless given, as nanoGPT's init_from),
 * the window g->T: --block-size, at most the model's context (its default) */
static int init_from_flags(GpTrain *g) {
    if (g->rc.resume)
        return ag_fail(AG_ERR_ARG,
                       "--init-from %s and --resume: the checkpoint holds the model "
                       "and its weights (resume without --init-from)",
                       g->init_from);
    for (int i = 0; model_flags[i]; i++) {
        const Flag *f = flag_find(g->fl, g->n_fl, model_flags[i]);
        char spelled[64];
        if (f->given)
            return ag_fail(AG_ERR_ARG,
                           "--%s with --init-from %s: the model is the folder's (its config.json); "
                           "drop the flag",
                           flag_spelling(f, spelled, sizeof spelled), g->init_from);
    }
    GptConfig cfg;
    int rc = hf_config(g->init_from, &cfg);
    if (rc != AG_OK) return rc == AG_ERR_NOMEM ? AG_ERR_FORMAT : rc;
    cfg.dropout = flag_find(g->fl, g->n_fl, "dropout")->given ? g->given.dropout : 0;
    g->T = flag_find(g->fl, g->n_fl, "block-size")->given ? g->given.block_size : cfg.block_size;
    if (g->T > cfg.block_size)
        return ag_fail(AG_ERR_ARG,
                       "--block-size %d: above the context of %s, %d tokens (its config.json's "
                       "n_positions or max_position_embeddings)",
                       g->T, g->init_from, cfg.block_size);
    g->mc = cfg;
    return AG_OK;
}

/* The data's tokenizer must be the folder's (txt_any_load_dir: its attograd-tokenizer.bin,
 * else its tokenizer.json, else vocab.json + merges.txt), the same saved form byte for byte (the
 * same vocabulary and ids), and fit the model (txt_any_fits): AG_ERR_ARG naming both */
static int same_as_folder(GpTrain *g) {
    TxtAny t;
    int rc = txt_any_load_dir(g->init_from, &t);
    if (rc == AG_OK) {
        size_t len;
        uint8_t *b = txt_any_to_bytes(&t, &len);
        int V = txt_any_vocab_size(&t);
        char which[600];
        snprintf(which, sizeof which,
                 t.tok ? "%s/" TXT_ANY_OWN_FILE : "the published tokenizer of %s", g->init_from);
        if (len != g->tok_len || memcmp(b, g->tok_bytes, len) != 0 || !t.tok != !g->text.tok)
            rc = ag_fail(AG_ERR_ARG,
                         "%s/tokenizer (%d ids) is not %s (%d ids): the data must be tokenized "
                         "with the model's tokenizer (attograd-gpt prepare --model %s)",
                         g->data, txt_any_vocab_size(&g->text), which, V, g->init_from);
        else
            rc = txt_any_fits(&t, g->mc.vocab_size, g->init_from);
        free(b);
        txt_any_free(&t);
    }
    return rc;
}

/* ---- the run's callbacks ---- */

/* The flags read: they agree with each other, the data opens (RunModel.start) */
static int start(void *ctx) {
    GpTrain *g = ctx;
    g->given.style = g->llama ? NN_LLAMA : NN_GPT2;
    g->given.pos = (NnGptPos)(g->pos + 1), g->given.norm = (NnGptNorm)(g->norm + 1);
    g->given.mlp = (NnGptMlp)(g->mlp + 1);
    int rc = g->bias && g->given.no_bias ? ag_fail(AG_ERR_ARG, "--bias and --no-bias: choose one")
                                         : AG_OK;
    if (g->bias) g->given.bias = NN_GPT_BIAS_ON;
    if (rc == AG_OK && !g->data && g->rc.out && g->rc.resume) { /* the run's own folder */
        char *last = io_path_join(g->rc.out, "last.npz");
        rc = run_saved_text(last, "data", &g->saved_data);
        if (rc != AG_OK)
            rc = ag_fail(rc, "--resume without --data: %s (give --data)", ag_last_error());
        g->data = g->saved_data;
        free(last);
    }
    if (rc == AG_OK && (!g->data || !g->rc.out))
        rc = ag_fail(AG_ERR_ARG, "--data and --out are required");
    g->mc = g->given, g->T = g->given.block_size;
    if (rc == AG_OK && g->init_from) rc = init_from_flags(g);
    if (rc == AG_OK && (int64_t)g->rc.batch * g->T > GP_MAX_STEP_TOKENS)
        rc = ag_fail(AG_ERR_ARG, "--batch %d x --block-size %d: more than %d tokens a step",
                     g->rc.batch, g->T, GP_MAX_STEP_TOKENS);
    if (rc == AG_OK && g->rc.resume && g->rc.force)
        rc = ag_fail(AG_ERR_ARG, "--resume and --force: choose one");
    if (rc == AG_OK) {
        g->last_path = io_path_join(g->rc.out, "last.npz");
        rc = read_data(g);
    }
    if (rc == AG_OK && g->init_from) rc = same_as_folder(g);
    g->model->extra = g->tok_bytes, g->model->extra_len = g->tok_len;
    return rc;
}

/* On --resume: the model flags given again make the checkpoint's model, the data is the same,
 * the loader continues where it was */
static int resumed(GpTrain *g) {
    RunConfig *c = &g->rc;
    if ((size_t)g->st.n_train != g->n_train || (size_t)g->st.n_valid != g->n_valid)
        return ag_fail(AG_ERR_ARG,
                       "%s holds %zu train and %zu valid tokens; %s was trained on %lld and "
                       "%lld: resume with the same data",
                       g->data, g->n_train, g->n_valid, g->last_path, (long long)g->st.n_train,
                       (long long)g->st.n_valid);
    if (g->st.loader[4] != run_last_step(g->run))
        return ag_fail(AG_ERR_FORMAT,
                       "%s: meta.run.model.loader_batches = %lld: must be its step %lld",
                       g->last_path, (long long)g->st.loader[4], (long long)run_last_step(g->run));
    g->T = g->st.window ? (int)g->st.window : g->mc.block_size; /* 0: a file before windows */
    if (g->T > g->mc.block_size)
        return ag_fail(AG_ERR_FORMAT, "%s: meta.run.model.window = %d: above block_size %d",
                       g->last_path, g->T, g->mc.block_size);
    int rc = check_given(g, &g->mc);
    if (rc == AG_OK) rc = txt_any_fits(&g->text, g->mc.vocab_size, g->last_path);
    if (rc == AG_OK && (int64_t)c->batch * g->T > GP_MAX_STEP_TOKENS)
        rc = ag_fail(AG_ERR_RANGE, "%s: batch %d x window %d: more than %d tokens a step",
                     g->last_path, c->batch, g->T, GP_MAX_STEP_TOKENS);
    if (rc == AG_OK)
        rc = txt_loader_init(&g->loader, NULL, 0, g->n_train, c->batch, g->T, 1, "train.bin");
    if (rc == AG_OK) rc = txt_loader_restore(&g->loader, g->st.loader, g->last_path);
    return rc;
}

/* The GPT of the flags (a new run) or of the checkpoint (--resume), the loader, the buffers
 * (RunModel.build). The weights are drawn from --seed itself, as attograd-gpt drew them before
 * the run loop (so the same flags give the same bits), not from the run's init stream. */
static int build(void *ctx, Arena *a, Rng *init, ParamList **params) {
    GpTrain *g = ctx;
    RunConfig *c = &g->rc;
    int rc = AG_OK;
    if (c->resume) {
        rc = resumed(g);
    } else {
        if (!g->init_from) g->mc.vocab_size = txt_any_vocab_size(&g->text);
        rc = nn_gpt_check_config(&g->mc, NULL);
        if (rc != AG_OK) {
            char why[400];
            snprintf(why, sizeof why, "%s", ag_last_error()); /* ag_fail writes the same buffer */
            return ag_fail(AG_ERR_ARG, "the model: %s", why);
        }
        rc = txt_loader_init(&g->loader, NULL, 0, g->n_train, c->batch, g->T,
                             rng_hash((uint64_t)c->seed, 2), "train.bin");
        txt_loader_state(&g->loader, g->st.loader);
        g->st.n_train = (int64_t)g->n_train, g->st.n_valid = (int64_t)g->n_valid;
        g->st.window = g->T;
    }
    if (rc == AG_OK && (c->batch % c->shards != 0 || c->shards < dist_size()))
        rc = ag_fail(AG_ERR_ARG,
                     "--shards %d: must divide the batch size %d and be at least the %d "
                     "processes",
                     c->shards, c->batch, dist_size());
    if (rc == AG_OK) { /* the valid split must hold a window too */
        TxtLoader L;
        rc = txt_loader_init(&L, NULL, 0, g->n_valid, c->batch, g->T, 1, "valid.bin");
    }
    if (rc == AG_OK && g->init_from && !c->resume) { /* the folder's weights, not drawn */
        rc = hf_load(g->init_from, a, &g->m);
        if (rc == AG_OK) g->m.cfg.dropout = g->mc.dropout, g->mc = g->m.cfg, g->built = 1;
    }
    if (rc != AG_OK) return rc;
    size_t BT = (size_t)c->batch * (size_t)g->T;
    g->x = ex_malloc(BT * sizeof(int));
    g->y = ex_malloc(BT * sizeof(int));
    g->win = ex_malloc(((size_t)g->T + 1) * sizeof(int));
    g->starts = ex_malloc((size_t)c->batch * sizeof(size_t));
    if (!g->built) {
        rng_seed(init, (uint64_t)c->seed);
        nn_gpt_init(&g->m, a, init, &g->mc);
        g->built = 1;
    }
    *params = &g->m.params;
    if (!c->quiet) {
        GptConfig o = nn_gpt_options(&g->mc);
        printf("model%s%s: %d layers, %d heads (%d key/value), n_embd %d, block %d, vocabulary "
               "%d, dropout %g; %zu parameters\n",
               g->init_from && !c->resume ? " of " : "",
               g->init_from && !c->resume ? g->init_from : "", g->mc.n_layer, g->mc.n_head,
               o.n_kv_head, g->mc.n_embd, g->mc.block_size, g->mc.vocab_size, g->mc.dropout,
               ag_params_count(&g->m.params));
        printf("block: %s names; positions %s, norm %s, %s, mlp %s (%d wide), %s, %s head\n",
               g->mc.style == NN_LLAMA ? "LLaMA's" : "GPT-2's", pos_names[o.pos],
               norm_names[o.norm], o.post_ln ? "post-LN" : "pre-LN", mlp_names[o.mlp], o.ffn_hidden,
               o.bias == NN_GPT_BIAS_ON ? "biases" : "no biases", o.untied ? "untied" : "tied");
        printf("data: %zu train tokens, %zu valid; batch %d x %d tokens; AdamW weight decay %g "
               "(2-D weights), clip %g; validation every %d steps (%d batches)\n",
               g->n_train, g->n_valid, c->batch, g->T, c->weight_decay, c->clip, c->valid_every,
               g->eval_iters);
        fflush(stdout);
    }
    return AG_OK;
}

/* The next batch: every process draws all its windows (the same draws, so the loader's state
 * is the same whatever P) and reads those of the rows of its shards [lo, hi) of S. */
static int batch(void *ctx, int64_t step, int lo, int hi, int S, double *tokens) {
    GpTrain *g = ctx;
    (void)step;
    txt_loader_starts(&g->loader, g->starts);
    txt_loader_state(&g->loader, g->st.loader); /* what the next save keeps */
    g->st.window = g->T; /* a file without it resumed: its saves from here on name it */
    int b = g->rc.batch / S;
    *tokens = (double)g->rc.batch * g->T;
    size_t at = (size_t)lo * b;
    return txt_shard_windows(g->train_bin, g->starts + at, (hi - lo) * b, g->T, g->win,
                             g->x + at * g->T, g->y + at * g->T);
}

/* Shard i of S: rows i B/S .. (i + 1) B/S - 1, with that shard's dropout rng */
static Tensor *loss(void *ctx, Tape *t, int i, int S, Rng *rng) {
    GpTrain *g = ctx;
    int b = g->rc.batch / S, T = g->T;
    size_t off = (size_t)i * (size_t)b * (size_t)T;
    return nn_gpt_loss(t, &g->m, g->x + off, g->y + off, b, T, rng);
}

/* The mean loss of eval_iters batches of valid.bin, the same batches every time (a loader of
 * its own seed, started again): comparable from one validation to the next, and a pure function
 * of the weights, so a resumed run validates to the same bits. With P processes, process r
 * reads and computes batches r, r + P, ...; the losses, gathered (dist_sum_disjoint: exact),
 * are added in batch order, as one process does. AG_OK, or a data error (its message). */
static int validate(void *ctx, Tape *t, double *v) {
    GpTrain *g = ctx;
    int B = g->rc.batch, T = g->T;
    TxtLoader L;
    int rc = txt_loader_init(&L, NULL, 0, g->n_valid, B, T, rng_hash((uint64_t)g->rc.seed, 3),
                             "valid.bin");
    AG_CHECK(rc == AG_OK, "%s", ag_last_error()); /* checked by build */
    double sum = 0, part[256];
    int P = dist_size(), me = dist_rank();
    int prev = ag_no_grad(t, 1);
    for (int i0 = 0; i0 < g->eval_iters && rc == AG_OK; i0 += 256) {
        int n = g->eval_iters - i0 < 256 ? g->eval_iters - i0 : 256;
        for (int i = 0; i < n; i++) {
            txt_loader_starts(&L, g->starts);
            part[i] = 0;
            if ((i0 + i) % P != me || rc != AG_OK) continue;
            rc = txt_shard_windows(g->valid_bin, g->starts, B, T, g->win, g->x, g->y);
            if (rc != AG_OK) continue;
            ag_tape_reset(t);
            part[i] = (double)nn_gpt_loss(t, &g->m, g->x, g->y, B, T, NULL)->data[0];
        }
        if (rc == AG_OK) dist_sum_disjoint(part, n);
        for (int i = 0; i < n; i++) sum += part[i];
    }
    ag_no_grad(t, prev);
    v[0] = sum / g->eval_iters;
    return rc;
}

/* the checkpoint's tokenizer must be the data's (RunModel.load_extra) */
static int same_tokenizer(void *ctx, const void *bytes, size_t len) {
    GpTrain *g = ctx;
    if (len == g->tok_len && memcmp(bytes, g->tok_bytes, len) == 0) return AG_OK;
    return ag_fail(AG_ERR_ARG, "%s/tokenizer is not the tokenizer %s was trained with", g->data,
                   g->last_path);
}

/* A checkpoint written before the run loop (RunModel.legacy): its data.position, checked
 * before any of it is used, and its optimizer's configuration, as the run's flags and state */
static int legacy(void *ctx, const NpzFile *f, int64_t step, RunState *st) {
    GpTrain *g = ctx;
    RunConfig *c = &g->rc;
    const NpzEntry *e = npz_find(f, "data.position");
    if (!e || e->dtype != NPZ_I64 || e->ndim != 1 ||
        (e->count != GP_POS_COUNT && e->count != GP_POS_COUNT - 1))
        return ag_fail(AG_ERR_FORMAT,
                       "%s: 'data.position' must be %d or %d '<i8' values (not a checkpoint of "
                       "attograd-gpt train?)",
                       f->path, GP_POS_COUNT - 1, GP_POS_COUNT);
    int has_shards = e->count == GP_POS_COUNT;
    const int64_t big = 1 << 30;
    const CkptRule rules[] = {
        CKPT_RULE_INT("data.position", GP_POS_LOADER + 4, "batches drawn", step, step),
        CKPT_RULE_INT("data.position", GP_POS_BATCH, "--batch-size", 1, 1 << 20),
        CKPT_RULE_INT("data.position", GP_POS_N_TRAIN, "train tokens", 2, TXT_SHARD_MAX_TOKENS),
        CKPT_RULE_INT("data.position", GP_POS_N_VALID, "valid tokens", 2, TXT_SHARD_MAX_TOKENS),
        CKPT_RULE_F64("data.position", GP_POS_WD, "--weight-decay", 0, 1e3),
        CKPT_RULE_F64("data.position", GP_POS_CLIP, "--grad-clip", 0, DBL_MAX),
        CKPT_RULE_INT("data.position", GP_POS_EVAL_INTERVAL, "--eval-interval", 1, big),
        CKPT_RULE_INT("data.position", GP_POS_EVAL_ITERS, "--eval-iters", 1, big),
        CKPT_RULE_INT("data.position", GP_POS_LOG_INTERVAL, "--log-interval", 1, big),
        CKPT_RULE_INT("data.position", GP_POS_BEST_STEP, "step of best.npz", 0, step),
        CKPT_RULE_F64("data.position", GP_POS_BEST_LOSS, "best valid loss", 0, DBL_MAX),
        CKPT_RULE_INT("data.position", GP_POS_LAST_VALID, "last validated step", 0, step),
        CKPT_RULE_F64("data.position", GP_POS_IV_LOSS, "losses since the last log row", 0, DBL_MAX),
        CKPT_RULE_F64("data.position", GP_POS_IV_NORM, "gradient norms since the last log row", 0,
                      DBL_MAX),
        CKPT_RULE_INT("data.position", GP_POS_IV_STEPS, "steps since the last log row", 0, step),
        CKPT_RULE_INT("data.position", GP_POS_SHARDS, "--shards", 2, 1 << 16),
    };
    int rc = ckpt_check_rules(f, rules, (int)(sizeof rules / sizeof rules[0]) - !has_shards);
    OptimConfig oc;
    int has = 0;
    if (rc == AG_OK) rc = ckpt_optim_config(f, &oc, &has);
    if (rc == AG_OK && !has)
        rc = ag_fail(AG_ERR_FORMAT, "%s: holds no optimizer state: cannot resume from it", f->path);
    if (rc != AG_OK) return rc;
    const int64_t *p = (const int64_t *)e->data;
    c->optim.lr = oc.lr, c->optim.beta2 = oc.beta2, c->optim.schedule = oc.schedule;
    c->steps = oc.schedule.total;
    c->batch = (int)p[GP_POS_BATCH];
    c->seed = p[GP_POS_SEED];
    c->weight_decay = ex_bitsd(p[GP_POS_WD]);
    c->clip = ex_bitsd(p[GP_POS_CLIP]);
    c->shards = has_shards ? (int)p[GP_POS_SHARDS] : 1;
    c->valid_every = (int)p[GP_POS_EVAL_INTERVAL];
    c->log_every = (int)p[GP_POS_LOG_INTERVAL];
    c->save_every = 0;
    g->eval_iters = (int)p[GP_POS_EVAL_ITERS];
    memcpy(g->st.loader, p + GP_POS_LOADER, sizeof g->st.loader);
    g->st.n_train = p[GP_POS_N_TRAIN], g->st.n_valid = p[GP_POS_N_VALID];
    *st = (RunState){.row_loss = ex_bitsd(p[GP_POS_IV_LOSS]),
                     .row_norm = ex_bitsd(p[GP_POS_IV_NORM]),
                     .row_tokens = (double)p[GP_POS_IV_STEPS] * c->batch * g->mc.block_size,
                     .row_steps = p[GP_POS_IV_STEPS],
                     .best_step = p[GP_POS_BEST_STEP],
                     .last_valid = p[GP_POS_LAST_VALID]};
    st->best[0] = ex_bitsd(p[GP_POS_BEST_LOSS]);
    return AG_OK;
}

/* ---- the command ---- */

/* the run's rows under nanoGPT's names too */
static const char *const aliases[][2] = {
    {"steps", "steps|max-iters"},
    {"batch", "batch|batch-size"},
    {"lr-min", "lr-min|min-lr"},
    {"warmup", "warmup|warmup-iters"},
    {"schedule-steps", "schedule-steps|lr-decay-iters"},
    {"clip", "clip|grad-clip"},
    {"valid-every", "valid-every|eval-interval"},
    {"log-every", "log-every|log-interval"},
};

/* the model's flags: its architecture is meta.config's (check_given compares them) */
static const char *const transient[] = {GP_MODEL_FLAGS, "block-size", "dropout", "init-from", NULL};
/* --data: the checkpoint's unless given (start reads it from OUT/last.npz on --resume); the
 * folder given instead is checked against the checkpoint (its token counts, its tokenizer) */
static const char *const remember[] = {"eval-iters", "data", NULL};

int gp_train(int argc, char **argv) {
    GpTrain T, *g = &T;
    memset(g, 0, sizeof *g);
    /* nanoGPT's config/train_shakespeare_char.py, and its README's CPU run */
    g->given =
        (GptConfig){.block_size = 256, .n_layer = 6, .n_head = 6, .n_embd = 384, .dropout = 0.2};
    RunConfig *c = &g->rc;
    *c = run_defaults();
    c->optim.lr = 1e-3, c->optim.beta2 = 0.99;
    c->optim.schedule.warmup = 100, c->optim.schedule.lr_min = 1e-4;
    c->batch = 64, c->steps = 5000, c->weight_decay = 0.1, c->clip = 1.0;
    c->valid_every = 250, c->log_every = 10, c->seed = 1337, c->out = NULL;
    c->decay_min_ndim = 2;    /* nanoGPT's groups: decay on the 2-D weights and embeddings */
    c->steps_to_schedule = 1; /* --resume without --steps: to --schedule-steps, as nanoGPT */
    g->eval_iters = 200;
    g->pos = g->norm = g->mlp = -1; /* the style's */
    static const char *const metrics[] = {"loss"};
    RunModel model = {.prog = GP_PROG,
                      .ctx = g,
                      .build = build,
                      .config = nn_gpt_ckpt_config(&g->mc),
                      .batch = batch,
                      .loss = loss,
                      .validate = validate,
                      .n_metrics = 1,
                      .metric_names = metrics,
                      .state = {NULL, state_fields,
                                (int)(sizeof state_fields / sizeof state_fields[0]), &g->st, NULL},
                      .load_extra = same_tokenizer,
                      .remember = remember,
                      .transient = transient,
                      .start = start,
                      .legacy = legacy};
    g->model = &model;
    RunLoop *r = run_new(&model, c);
    g->run = r;
    GptConfig *m = &g->given;
    Flag fl[24 + RUN_N_FLAGS] = {
        {"data", FLAG_PATH, &g->data, NULL, "the prepared folder (prepare --out)", 0, 0, NULL, 0},
        {"layers|n-layer", FLAG_INT, &m->n_layer, NULL, "blocks", 1, NN_GPT_MAX_LAYERS, NULL, 0},
        {"heads|n-head", FLAG_INT, &m->n_head, NULL, "attention heads", 1, 1024, NULL, 0},
        {"d-model|n-embd", FLAG_INT, &m->n_embd, NULL, "the model's width", 1, 8192, NULL, 0},
        {"kv-heads|n-kv-head", FLAG_INT, &m->n_kv_head, NULL,
         "key/value heads (0: --heads; fewer: grouped-query)", 0, 1024, NULL, 0},
        {"llama", FLAG_SWITCH, &g->llama, NULL,
         "LLaMA's defaults and names (RoPE, RMSNorm, SwiGLU, no biases) instead of GPT-2's", 1, 0,
         NULL, 0},
        {"pos", FLAG_CHOICE, &g->pos, NULL, "positions (default: GPT-2 learned, --llama rope)", 0,
         0, pos_names + 1, 0},
        {"norm", FLAG_CHOICE, &g->norm, NULL, "norms (default: GPT-2 layernorm, --llama rmsnorm)",
         0, 0, norm_names + 1, 0},
        {"mlp", FLAG_CHOICE, &g->mlp, NULL,
         "feed-forward (none: attention only; default: GPT-2 gelu, --llama swiglu)", 0, 0,
         mlp_names + 1, 0},
        {"ff|ffn-hidden", FLAG_INT, &m->ffn_hidden, NULL,
         "the MLP's width (0: gelu 4 d-model, swiglu llama2.c's 8/3 d-model)", 0, 1 << 20, NULL, 0},
        {"rope-base", FLAG_DOUBLE, &m->rope_base, NULL, "RoPE's base (0: 10000)", 0, 1e9, NULL, 0},
        {"bias", FLAG_SWITCH, &g->bias, NULL,
         "biases in the Linear layers and LayerNorms (GPT-2's)", 1, 0, NULL, 0},
        {"no-bias", FLAG_SWITCH, &m->no_bias, NULL, "no biases (nanoGPT's bias=False; LLaMA's)", 1,
         0, NULL, 0},
        {"post-ln", FLAG_SWITCH, &m->post_ln, NULL,
         "post-LN blocks, norm(x + f(x)), no final norm (default: pre-LN)", 1, 0, NULL, 0},
        {"untied", FLAG_SWITCH, &m->untied, NULL, "a head of its own (not the embeddings)", 1, 0,
         NULL, 0},
        {"block-size", FLAG_INT, &m->block_size, NULL, "context length (tokens)", 1, 1 << 16, NULL,
         0},
        {"dropout", FLAG_DOUBLE, &m->dropout, NULL, "dropout rate", 0, 0.99, NULL, 0},
        {"beta2", FLAG_DOUBLE, &c->optim.beta2, NULL, "AdamW's beta2", 0, 0.999999, NULL, 0},
        {"eval-iters", FLAG_INT, &g->eval_iters, NULL, "batches of a validation", 1, 1 << 30, NULL,
         0},
        {"init-from", FLAG_PATH, &g->init_from, "DIR",
         "fine-tune the model of a Hugging Face folder (its config.json and weights; the data "
         "prepared with its tokenizer, prepare --model DIR); --block-size: the window, at most "
         "its context",
         0, 0, NULL, 0},
    };
    int n = 20;
    n += run_flags(r, fl + n);
    for (int i = 0; i < n; i++) {
        for (size_t k = 0; k < sizeof aliases / sizeof aliases[0]; k++)
            if (strcmp(fl[i].name, aliases[k][0]) == 0) fl[i].name = aliases[k][1];
        if (strcmp(fl[i].name, "ckpt") == 0) fl[i--] = fl[--n]; /* eval's: attograd-gpt eval */
    }
    g->fl = fl, g->n_fl = n;
    int code;
    if (flag_parse_cmd(GP_PROG, "train", "[flags]", "trains a GPT on DATA (prepare's folder)", fl,
                       n, argc - 2, argv + 2, NULL, NULL) == FLAG_HELP)
        code = RUN_EXIT_OK;
    else
        code = run_main(r, fl, n, argc, argv);
    if (g->built) nn_gpt_free(&g->m);
    run_loop_free(r);
    txt_any_free(&g->text);
    free(g->tok_bytes);
    free(g->saved_data);
    txt_shard_close(g->train_bin);
    txt_shard_close(g->valid_bin);
    free(g->last_path);
    free(g->x), free(g->y), free(g->win), free(g->starts);
    return code;
}
