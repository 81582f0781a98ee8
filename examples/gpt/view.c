/* view.c: `attograd-gpt view`: one offline HTML page (src/view) of a checkpoint on prompts, and
 * of training runs. For each prompt: every layer x head's attention pattern (with its
 * previous-token, duplicate-token and induction scores, src/lens/detect.h), and every token's
 * loss and probability with the model's top-k predictions, its probability through the logit
 * lens and its direct logit attribution (src/lens/logit.h); the tables of an
 * .npz of ablate, patch or detect (--from); for each run folder given after --runs: its
 * log.csv curves. docs/view.md is the user's guide.
 * Not here: the page and its JSON writer (src/view), the rows and flags the lens commands share
 * (lens.c). Read next: src/view/view.h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpt_cli.h"

/* a token's bytes (ViewTokenText; ctx: the HfModel) */
static const void *token_bytes(const void *ctx, int id, size_t *len) {
    return txt_any_token_bytes(&((const HfModel *)ctx)->text, id, len);
}

/* "attention": the patterns of every row, the detector scores of each */
static void attention_json(ViewBuf *b, HfModel *g, Tape *t, const LensRows *r) {
    int L = g->m.cfg.n_layer, NH = g->m.cfg.n_head, K = LENS_N_HEAD_KINDS;
    double *sc = ex_malloc((size_t)K * L * NH * sizeof(double));
    ViewAttnSet set = {.name = "self-attention", .layers = L, .heads = NH, .causal = 1};
    for (int row = 0; row < r->B; row++) {
        const int *ids = r->ids + (size_t)row * r->T;
        lens_detect_gpt(t, &g->m, ids, 1, r->T, NULL, sc); /* resets the tape */
        int was = ag_no_grad(t, 1);
        nn_gpt_forward(t, &g->m, ids, 1, r->T, NULL); /* fills last_probs (1, NH, T, T) */
        ViewSide q = {ids, r->T, token_bytes, g};
        view_attn_row(&set, &q, NULL, (const Tensor *const *)g->m.last_probs, 0, sc, K);
        ag_no_grad(t, was);
        ag_tape_reset(t);
    }
    view_attn_sets(b, &set, 1);
    free(sc);
}

/* The measures of the logit lens and of direct logit attribution, from lens_logit_run without a
 * good token (each position read toward its own next token, src/lens/logit.h): the probability
 * of each token from the stream after the embeddings and after each block, the logit of it and
 * each part's share of that logit (TransformerLens's DLA: the part through the final norm with
 * the whole stream's scale, dotted with the token's row of the head). Token i gets position
 * i - 1's values. A post-LN model has neither (said on stderr). */
typedef struct ViewGpt {
    GpLens l;
    int top_k;
} ViewGpt;
static int lens_measures(ViewBuf *b, void *ctx) {
    ViewGpt *vg = ctx;
    Tape *t = vg->l.c.t;
    const LensRows *r = &vg->l.c.r;
    LensLogit ll;
    if (lens_logit_run(t, &vg->l.g.m, r->ids, r->B, r->T, NULL, NULL, -1, &ll) != AG_OK) {
        fprintf(stderr, "view: no logit lens or direct logit attribution: %s\n", ag_last_error());
        return AG_OK;
    }
    size_t BT = (size_t)r->B * r->T;
    double *v = ex_malloc(BT * sizeof(double));
    char name[128];
    for (int s = 0; s <= ll.n_layer; s++) {
        for (size_t i = 0; i < BT; i++) v[i] = exp(ll.lens_next[(size_t)s * BT + i]);
        if (s == 0)
            snprintf(name, sizeof name, "logit lens: the embeddings' probability of this token");
        else
            snprintf(name, sizeof name, "logit lens: after block %d, probability of this token",
                     s - 1);
        view_raw(b, ",");
        view_measure(b, name, "prob", v, r->B, r->T, 1);
    }
    view_raw(b, ",");
    view_measure(b, "logit of this token (the sum of the parts below)", "logit", ll.metric, r->B,
                 r->T, 1);
    for (int k = 0; k < ll.n_parts; k++) {
        for (size_t i = 0; i < BT; i++) v[i] = ll.dla[i * ll.n_parts + k];
        snprintf(name, sizeof name, "direct logit attribution: %s", ll.parts[k]);
        view_raw(b, ",");
        view_measure(b, name, "logit", v, r->B, r->T, 1);
    }
    free(v);
    lens_logit_free(&ll);
    return AG_OK;
}

/* "tokens": each token's loss (of predicting it from the tokens before) and probability, the
 * top-k predictions after it, the logit lens and direct logit attribution (lens_measures) */
static void tokens_json(ViewBuf *b, ViewGpt *v) {
    HfModel *g = &v->l.g;
    Tape *t = v->l.c.t;
    const LensRows *r = &v->l.c.r;
    int T = r->T, V = g->m.cfg.vocab_size;
    int was = ag_no_grad(t, 1);
    Tensor *logits = nn_gpt_forward(t, &g->m, r->ids, r->B, T, NULL); /* (B, T, V) */
    ViewPredict pr = {.B = r->B, .T = T, .top_k = v->top_k};
    for (int row = 0; row < r->B; row++) { /* position i predicts token i + 1 */
        const int *ids = r->ids + (size_t)row * T;
        view_predict_row(&pr, row, &(ViewSide){ids, T, token_bytes, g},
                         logits->data + (size_t)row * T * V, V, ids + 1, T - 1);
    }
    ag_no_grad(t, was);
    ag_tape_reset(t);
    /* the measures: the loss of token i is that of predicting it (position i - 1's) */
    view_predict_json(b, &pr, NULL, "token", 1, lens_measures, v);
    view_predict_free(&pr);
}

/* what the page shows of a checkpoint (view_page's body): the lens command's model and rows */
static int model_json(ViewBuf *b, void *ctx) {
    ViewGpt *v = ctx;
    view_raw(b, ",");
    attention_json(b, &v->l.g, v->l.c.t, &v->l.c.r);
    view_raw(b, ",");
    tokens_json(b, v);
    for (int l = 0; l < v->l.cfg.n_layer; l++) v->l.g.m.last_probs[l] = NULL; /* in the tape's */
    return AG_OK;
}

int gp_view(int argc, char **argv) {
    ViewGpt v = {.top_k = 5};
    const char **ckpt = &v.l.a.ckpt, *from = NULL;
    int runs = 0;
    Flag fl[] = {
        FLAG_ROW("ckpt", FLAG_PATH, ckpt, NULL, "a checkpoint (train's last.npz or best.npz)"),
        FLAG_ROW("model", FLAG_PATH, ckpt, "DIR", "a Hugging Face folder instead (docs/hf.md)"),
        FLAG_ROW("prompt", FLAG_PATH, &v.l.a.prompt, "TEXT", "the text to show (one row)"),
        FLAG_ROW("prompts", FLAG_PATH, &v.l.a.prompts, NULL,
                 "a file: one row a line, all as many tokens"),
        FLAG_SW("runs", &runs,
                "the arguments after the flags are run folders: their log.csv curves"),
        FLAG_ROW("from", FLAG_PATH, &from, "FILE.npz",
                 "an .npz of ablate, patch or detect: its tables as heatmaps"),
        FLAG_NUM("top-k", FLAG_INT, &v.top_k, NULL, "predictions shown when a token is hovered", 1,
                 100),
        FLAG_ROW("out", FLAG_PATH, &v.l.a.out, NULL, "the .html page to write"),
        FLAG_NUM("threads", FLAG_INT, &v.l.a.threads, NULL, "0: the CPUs (OMP_NUM_THREADS)", 0,
                 1024),
    };
    int n = (int)(sizeof fl / sizeof fl[0]), npos = 0;
    char **pos = ex_calloc((size_t)argc + 1, sizeof(char *));
    int rc = flag_parse_cmd(GP_PROG, "view", "[flags]",
                            "one HTML page, offline (docs/view.md): the attention of every layer x "
                            "head on the prompt(s)\n(detector scores on the thumbnails), each "
                            "token's loss, top-k predictions, logit lens and\ndirect logit "
                            "attribution; --from: the tables of ablate, patch or detect; --runs "
                            "DIR...:\nthe log.csv curves of run folders",
                            fl, n, argc - 2, argv + 2, pos, &npos);
    if (rc == FLAG_HELP) {
        free(pos);
        return RUN_EXIT_OK;
    }
    if (rc == AG_OK) rc = view_cmd_check(v.l.a.out, runs, pos, npos);
    if (rc == AG_OK && !*ckpt && (v.l.a.prompt || v.l.a.prompts))
        rc = ag_fail(AG_ERR_ARG, "--prompt and --prompts need --ckpt");
    if (rc == AG_OK && *ckpt && !v.l.a.prompt && !v.l.a.prompts)
        rc = ag_fail(AG_ERR_ARG, "--ckpt needs --prompt TEXT or --prompts FILE");
    if (rc == AG_OK && !*ckpt && !runs && !from)
        rc = ag_fail(AG_ERR_ARG,
                     "give --ckpt with --prompt or --prompts, --from FILE.npz, or --runs DIR...");
    if (rc == AG_OK && *ckpt) rc = gp_lens_start(&v.l, rc, GP_LENS_ROWS);
    if (rc == AG_OK) rc = view_cmd_page(v.l.a.out, *ckpt, model_json, &v, from, pos, runs, npos);
    free(pos);
    return gp_lens_end(&v.l, rc, "view");
}
