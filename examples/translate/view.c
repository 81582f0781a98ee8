/* view.c: `attograd-translate view`: one offline HTML page (src/view) of a checkpoint on
 * sentence pairs run teacher-forced, and of training runs. For each pair: every head of the
 * encoder's self-attention, the decoder's (causal) self-attention and its cross-attention to
 * the source (with their detector scores, src/lens/detect.h: previous-token, duplicate-token,
 * induction; the cross-attention's diagonal), and every target word's loss and probability with
 * the model's top-k words on hover; the tables of an .npz of ablate, patch or detect (--from); for each
 * run folder given after --runs: its log.csv curves. docs/view.md is the user's guide.
 * Not here: the page and its JSON writer (src/view), the rows of the lens commands (lens.c).
 * Read next: src/view/view.h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "translate.h"

/* a target word (ViewTokenText; ctx: the Translator) */
static const void *target_word(const void *ctx, int id, size_t *len) {
    const char *w = tr_vocab_word(&((const Translator *)ctx)->tgt, id);
    *len = strlen(w);
    return w;
}

/* appends the words of ids (n) in v as a JSON list */
static void words(ViewBuf *b, const TrVocab *v, const int *ids, int n) {
    view_raw(b, "[");
    for (int i = 0; i < n; i++) {
        const char *w = tr_vocab_word(v, ids[i]);
        if (i) view_raw(b, ",");
        view_str(b, w, strlen(w));
    }
    view_raw(b, "]");
}

/* what the page shows of a checkpoint (view_page's body) */
typedef struct ViewTr {
    Translator tr;
    LensRows r;
    int top_k;
} ViewTr;

/* ",\"attention\"" (encoder self, decoder self, cross) and "tokens" of every row of v's rows */
static int model_json(ViewBuf *b, void *ctx) {
    ViewTr *v = ctx;
    Translator *tr = &v->tr;
    const LensRows *r = &v->r;
    int top_k = v->top_k;
    int LE = tr->model.cfg.n_enc_layers, LD = tr->model.cfg.n_dec_layers;
    int NH = tr->model.cfg.layer.n_heads, K = LENS_N_HEAD_KINDS, S = r->S, T = r->T;
    double *enc = ex_calloc((size_t)K * (LE ? LE : 1) * NH, sizeof(double));
    double *dec = ex_calloc((size_t)K * LD * NH, sizeof(double));
    double *cross = ex_calloc((size_t)LD * NH, sizeof(double));
    double *loss = ex_malloc((size_t)r->B * T * sizeof(double));
    double *prob = ex_malloc((size_t)r->B * T * sizeof(double)), *p = NULL;
    ViewBuf set[3] = {{0}}, tok = {0}; /* encoder self, decoder self, cross; the tokens */
    int rc = AG_OK;
    for (int row = 0; rc == AG_OK && row < r->B; row++) {
        const int *src = r->src + (size_t)row * S, *tgt = r->ids + (size_t)row * T;
        lens_detect_seq2seq(tr->tape, &tr->model, src, S, tgt, 1, T, NULL, enc, dec, cross);
        /* src: the source + EOS, tgt: BOS + the target; tr_forward_pair adds both itself */
        Tensor *logits = tr_forward_pair(tr, src, S - 1, tgt + 1, T - 1); /* (1, T, V) */
        if ((rc = ex_tensor_finite(logits, "logits", NULL)) != AG_OK) {
            rc = ex_not_finite(rc, tr->path, tr->tape);
            break;
        }
        for (int s = 0; s < 3; s++) {
            if (s == 0 && LE == 0) continue;
            view_raw(&set[s], row ? ",{\"q\":" : "{\"q\":");
            if (s == 0)
                words(&set[s], &tr->src, src, S);
            else
                words(&set[s], &tr->tgt, tgt, T);
            view_raw(&set[s], ",\"k\":");
            if (s == 2)
                words(&set[s], &tr->src, src, S);
            else
                view_raw(&set[s], "null");
            view_raw(&set[s], ",\"p\":[");
            for (int l = 0; l < (s ? LD : LE); l++) {
                const Tensor *pr = s == 0   ? tr->model.enc[l].self_attn.last_probs
                                   : s == 1 ? tr->model.dec[l].self_attn.last_probs
                                            : tr->model.dec[l].multihead_attn.last_probs;
                if (l) view_raw(&set[s], ",");
                view_attention(&set[s], pr, 0, s == 1);
            }
            view_raw(&set[s], "]");
            view_raw(&set[s], ",");
            if (s == 2)
                view_scores(&set[s], cross, 0, LD, NH);
            else
                view_scores(&set[s], s ? dec : enc, K, s ? LD : LE, NH);
            view_raw(&set[s], "}");
        }
        /* decoder position i reads BOS + target[0..i) and predicts next[i] (a target word, or
         * EOS at the end): the strip shows next, each word with the loss of predicting it */
        const int *next = r->next + (size_t)row * T;
        int V = logits->shape[2];
        if (!p) p = ex_malloc((size_t)V * sizeof(double));
        view_raw(&tok, row ? ",{\"tok\":" : "{\"tok\":");
        words(&tok, &tr->tgt, next, T);
        view_raw(&tok, ",\"top\":[");
        for (int i = 0; i < T; i++) {
            view_softmax(logits->data + (size_t)i * V, V, p);
            prob[(size_t)row * T + i] = p[next[i]];
            loss[(size_t)row * T + i] = -log(p[next[i]]);
            if (i) view_raw(&tok, ",");
            view_top_k(&tok, p, V, top_k, target_word, tr);
        }
        view_raw(&tok, "]}");
    }
    if (rc == AG_OK) {
        view_raw(b, ",");
        static const char *names[3] = {"encoder self-attention", "decoder self-attention",
                                       "cross-attention (decoder -> source)"};
        /* words: the prompt selectors join them with spaces, as tr_detokenize does */
        view_raw(b, "\"token_sep\":\" \",");
        view_key(b, "attention");
        view_raw(b, "[");
        for (int s = LE ? 0 : 1, first = 1; s < 3; s++, first = 0) {
            view_raw(b, first ? "{" : ",{");
            view_key(b, "name");
            view_str(b, names[s], strlen(names[s]));
            view_raw(b, ",\"layers\":");
            view_int(b, s ? LD : LE);
            view_raw(b, ",\"heads\":");
            view_int(b, NH);
            view_raw(b,
                     s == 1 ? ",\"causal\":true,\"prompts\":[" : ",\"causal\":false,\"prompts\":[");
            view_raw(b, set[s].p);
            view_raw(b, "]}");
        }
        view_raw(b, "],\"tokens\":{\"top_label\":\"the model's top words at this position\","
                    "\"prompts\":[");
        view_raw(b, tok.p);
        view_raw(b, "],\"measures\":[");
        view_measure(b, "loss of this word (nats)", "loss", loss, r->B, T, 0);
        view_raw(b, ",");
        view_measure(b, "probability of this word", "prob", prob, r->B, T, 0);
        view_raw(b, "]}");
    }
    for (int s = 0; s < 3; s++) view_buf_free(&set[s]);
    view_buf_free(&tok);
    free(enc), free(dec), free(cross), free(loss), free(prob), free(p);
    return rc;
}

int tr_view_main(int argc, char **argv) {
    const char *ckpt = NULL, *sentence = NULL, *target = NULL, *pairs = NULL, *from = NULL,
               *out = NULL;
    int runs = 0, top_k = 5, threads = 0;
    Flag fl[] = {
        FLAG_ROW("ckpt", FLAG_PATH, &ckpt, "PATH", "a checkpoint (train's last.npz or best.npz)"),
        FLAG_ROW("sentence", FLAG_PATH, &sentence, "TEXT", "the source sentence (one row)"),
        FLAG_ROW("target", FLAG_PATH, &target, "TEXT",
                 "its translation (default: the model's greedy one)"),
        FLAG_ROW("pairs", FLAG_PATH, &pairs, "FILE",
                 "a row a line: source<TAB>target, all as many source and target words"),
        FLAG_ROW("from", FLAG_PATH, &from, "FILE.npz",
                 "an .npz of ablate, patch or detect: its tables as heatmaps"),
        FLAG_SW("runs", &runs,
                "the arguments after the flags are run folders: their log.csv curves"),
        FLAG_NUM("top-k", FLAG_INT, &top_k, "N", "words shown when a word is hovered", 1, 100),
        FLAG_ROW("out", FLAG_PATH, &out, "FILE", "the .html page to write"),
        FLAG_NUM("threads", FLAG_INT, &threads, "N",
                 "threads (default: OMP_NUM_THREADS, else the CPUs)", 0, 4096),
    };
    int n = (int)(sizeof fl / sizeof fl[0]), npos = 0;
    char **pos = ex_calloc((size_t)argc + 1, sizeof(char *));
    int rc = flag_parse(fl, n, argc, argv, pos, &npos);
    if (rc == FLAG_HELP) {
        printf("usage: %s view [flags] [--runs DIR...]\n"
               "One HTML page, offline (docs/view.md): every head of the encoder's and the "
               "decoder's\nself-attention and of the cross-attention on the sentence pair(s) "
               "(detector scores on the\nthumbnails), each target word's loss and top-k words; "
               "--from: the tables of ablate,\npatch or detect; --runs DIR...: the log.csv curves "
               "of run "
               "folders.\nflags (default) [range]:\n",
               TR_PROG);
        flag_help(stdout, fl, n);
        free(pos);
        return TR_EXIT_OK;
    }
    if (rc == AG_OK && !out) rc = ag_fail(AG_ERR_ARG, "--out FILE.html is required");
    if (rc == AG_OK && npos && !runs)
        rc = ag_fail(AG_ERR_ARG, "'%s': an argument without a flag (run folders follow --runs)",
                     pos[0]);
    if (rc == AG_OK && runs && !npos)
        rc = ag_fail(AG_ERR_ARG, "--runs: give the run folders after the flags");
    if (rc == AG_OK && !ckpt != (!sentence && !pairs))
        rc = ag_fail(AG_ERR_ARG, "--ckpt goes with --sentence TEXT or --pairs FILE");
    if (rc == AG_OK && !ckpt && !runs && !from)
        rc = ag_fail(AG_ERR_ARG, "give --ckpt with --sentence or --pairs, --from FILE.npz, or "
                                 "--runs DIR...");
    if (rc == AG_OK && target && pairs)
        rc = ag_fail(AG_ERR_ARG, "--pairs has its targets: no --target");
    size_t bad = 0;
    for (int i = 0; rc == AG_OK && i < 2; i++) {
        const char *t = i ? target : sentence;
        if (t && !tr_utf8_check(t, strlen(t), &bad))
            rc = ag_fail(AG_ERR_ARG, "--%s is not valid UTF-8 (byte %zu is 0x%02x)",
                         i ? "target" : "sentence", bad + 1, (unsigned char)t[bad]);
    }
    ViewTr v = {.top_k = top_k};
    int loaded = 0;
    if (rc == AG_OK && ckpt) {
        ag_threads_use(threads);
        if ((rc = tr_load(&v.tr, ckpt)) == AG_OK) loaded = 1;
        if (rc == AG_OK) rc = tr_lens_rows(&v.tr, sentence, target, pairs, &v.r);
    }
    size_t bytes = 0;
    if (rc == AG_OK)
        rc = view_page(out,
                       ckpt   ? ckpt
                       : from ? from
                              : "runs",
                       ckpt ? model_json : NULL, &v, from, pos, runs ? npos : 0, &bytes);
    if (rc == AG_OK) printf("view: %s (%.1f MB)\n", out, (double)bytes / 1e6);
    if (ckpt) lens_rows_free(&v.r);
    if (loaded) tr_free(&v.tr);
    free(pos);
    return lens_cmd_end(&(LensCmd){.prog = TR_PROG, .name = "view"}, rc);
}
