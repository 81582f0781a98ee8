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

/* appends token id's bytes as a JSON string */
static void token_str(ViewBuf *b, const HfModel *g, int id) {
    size_t len;
    const uint8_t *s = txt_any_token_bytes(&g->text, id, &len);
    view_str(b, s, len);
}

/* "attention": the patterns of every row, the detector scores of each */
static void attention_json(ViewBuf *b, HfModel *g, Tape *t, const LensRows *r) {
    int L = g->m.cfg.n_layer, NH = g->m.cfg.n_head, K = LENS_N_HEAD_KINDS;
    double *sc = ex_malloc((size_t)K * L * NH * sizeof(double));
    view_key(b, "attention");
    view_raw(b, "[{");
    view_key(b, "name");
    view_raw(b, "\"self-attention\",");
    view_key(b, "layers");
    view_int(b, L);
    view_raw(b, ",");
    view_key(b, "heads");
    view_int(b, NH);
    view_raw(b, ",\"causal\":true,\"prompts\":[");
    for (int row = 0; row < r->B; row++) {
        const int *ids = r->ids + (size_t)row * r->T;
        lens_detect_gpt(t, &g->m, ids, 1, r->T, NULL, sc); /* resets the tape */
        int was = ag_no_grad(t, 1);
        nn_gpt_forward(t, &g->m, ids, 1, r->T, NULL); /* fills last_probs (1, NH, T, T) */
        view_raw(b, row ? ",{" : "{");
        view_key(b, "q");
        view_raw(b, "[");
        for (int i = 0; i < r->T; i++) {
            if (i) view_raw(b, ",");
            token_str(b, g, ids[i]);
        }
        view_raw(b, "],\"k\":null,");
        view_key(b, "p");
        view_raw(b, "["); /* one base64 string per layer */
        for (int l = 0; l < L; l++) {
            if (l) view_raw(b, ",");
            view_attention(b, g->m.last_probs[l], 0, 1);
        }
        view_raw(b, "],");
        view_scores(b, sc, K, L, NH);
        view_raw(b, "}");
        ag_no_grad(t, was);
        ag_tape_reset(t);
    }
    view_raw(b, "]}]");
    free(sc);
}

/* a token's bytes (ViewTokenText; ctx: the HfModel) */
static const void *token_bytes(const void *ctx, int id, size_t *len) {
    return txt_any_token_bytes(&((const HfModel *)ctx)->text, id, len);
}

/* The measures of the logit lens and of direct logit attribution, from lens_logit_run without a
 * good token (each position read toward its own next token, src/lens/logit.h): the probability
 * of each token from the stream after the embeddings and after each block, the logit of it and
 * each part's share of that logit (TransformerLens's DLA: the part through the final norm with
 * the whole stream's scale, dotted with the token's row of the head). Token i gets position
 * i - 1's values. A post-LN model has neither (said on stderr). */
static void lens_measures(ViewBuf *b, HfModel *g, Tape *t, const LensRows *r) {
    LensLogit ll;
    if (lens_logit_run(t, &g->m, r->ids, r->B, r->T, NULL, NULL, -1, &ll) != AG_OK) {
        fprintf(stderr, "view: no logit lens or direct logit attribution: %s\n", ag_last_error());
        return;
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
}

/* "tokens": each token's loss (of predicting it from the tokens before) and probability, the
 * top-k predictions after it, the logit lens and direct logit attribution (lens_measures) */
static void tokens_json(ViewBuf *b, HfModel *g, Tape *t, const LensRows *r, int top_k) {
    int T = r->T, V = g->m.cfg.vocab_size;
    int was = ag_no_grad(t, 1);
    Tensor *logits = nn_gpt_forward(t, &g->m, r->ids, r->B, T, NULL); /* (B, T, V) */
    double *p = ex_malloc((size_t)V * sizeof(double)), *loss = ex_malloc((size_t)r->B * T * 8),
           *next = ex_malloc((size_t)r->B * T * 8);
    view_key(b, "tokens");
    view_raw(b, "{\"prompts\":[");
    for (int row = 0; row < r->B; row++) {
        const int *ids = r->ids + (size_t)row * T;
        view_raw(b, row ? ",{\"tok\":[" : "{\"tok\":[");
        for (int i = 0; i < T; i++) {
            if (i) view_raw(b, ",");
            token_str(b, g, ids[i]);
        }
        view_raw(b, "],\"top\":[");
        for (int i = 0; i < T; i++) {
            view_softmax(logits->data + ((size_t)row * T + i) * V, V, p);
            /* position i predicts token i + 1; token i's own loss is position i - 1's */
            size_t at = (size_t)row * T + i;
            next[at] = i + 1 < T ? p[ids[i + 1]] : NAN;
            loss[at] = i + 1 < T ? -log(p[ids[i + 1]]) : NAN;
            if (i) view_raw(b, ",");
            view_top_k(b, p, V, top_k, token_bytes, g);
        }
        view_raw(b, "]}");
    }
    ag_no_grad(t, was);
    ag_tape_reset(t);
    /* the measures: the loss of token i is that of predicting it (position i - 1's) */
    view_raw(b, "],\"measures\":[");
    view_measure(b, "loss of this token (nats)", "loss", loss, r->B, T, 1);
    view_raw(b, ",");
    view_measure(b, "probability of this token", "prob", next, r->B, T, 1);
    lens_measures(b, g, t, r);
    view_raw(b, "]}");
    free(p), free(loss), free(next);
}

/* what the page shows of a checkpoint (view_page's body): the lens command's model and rows */
typedef struct ViewGpt {
    GpLens l;
    int top_k;
} ViewGpt;
static int model_json(ViewBuf *b, void *ctx) {
    ViewGpt *v = ctx;
    view_raw(b, ",");
    attention_json(b, &v->l.g, v->l.c.t, &v->l.c.r);
    view_raw(b, ",");
    tokens_json(b, &v->l.g, v->l.c.t, &v->l.c.r, v->top_k);
    for (int l = 0; l < v->l.cfg.n_layer; l++) v->l.g.m.last_probs[l] = NULL; /* in the tape's */
    return AG_OK;
}

int gp_view(int argc, char **argv) {
    ViewGpt v = {.top_k = 5};
    const char **ckpt = &v.l.a.ckpt, *from = NULL;
    int runs = 0, help = 0;
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
    int rc = flag_parse(fl, n, argc - 2, argv + 2, pos, &npos);
    if (rc == FLAG_HELP) {
        gp_usage("view",
                 "one HTML page, offline (docs/view.md): the attention of every layer x head on "
                 "the prompt(s)\n(detector scores on the thumbnails), each token's loss, "
                 "top-k predictions, logit lens and\ndirect logit attribution; --from: the "
                 "tables of ablate, patch or detect; --runs DIR...:\nthe log.csv curves of run "
                 "folders",
                 fl, n);
        help = 1;
        rc = AG_OK;
    }
    if (!help && rc == AG_OK && !v.l.a.out) rc = ag_fail(AG_ERR_ARG, "--out FILE.html is required");
    if (!help && rc == AG_OK && npos && !runs)
        rc = ag_fail(AG_ERR_ARG, "'%s': an argument without a flag (run folders follow --runs)",
                     pos[0]);
    if (!help && rc == AG_OK && runs && !npos)
        rc = ag_fail(AG_ERR_ARG, "--runs: give the run folders after the flags");
    if (!help && rc == AG_OK && !*ckpt && (v.l.a.prompt || v.l.a.prompts))
        rc = ag_fail(AG_ERR_ARG, "--prompt and --prompts need --ckpt");
    if (!help && rc == AG_OK && *ckpt && !v.l.a.prompt && !v.l.a.prompts)
        rc = ag_fail(AG_ERR_ARG, "--ckpt needs --prompt TEXT or --prompts FILE");
    if (!help && rc == AG_OK && !*ckpt && !runs && !from)
        rc = ag_fail(AG_ERR_ARG,
                     "give --ckpt with --prompt or --prompts, --from FILE.npz, or --runs DIR...");
    if (!help && rc == AG_OK && *ckpt) rc = gp_lens_start(&v.l, rc, GP_LENS_ROWS);
    size_t bytes = 0;
    const char *title = *ckpt ? *ckpt : from ? from : "runs";
    if (!help && rc == AG_OK)
        rc = view_page(v.l.a.out, title, *ckpt ? model_json : NULL, &v, from, pos, runs ? npos : 0,
                       &bytes);
    if (!help && rc == AG_OK) printf("view: %s (%.1f MB)\n", v.l.a.out, (double)bytes / 1e6);
    free(pos);
    return gp_lens_end(&v.l, rc, "view");
}
