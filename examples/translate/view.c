/* view.c: `attograd-translate view`: one offline HTML page (src/view) of a checkpoint on
 * sentence pairs run teacher-forced, and of training runs. For each pair: every head of the
 * encoder's self-attention, the decoder's (causal) self-attention and its cross-attention to
 * the source (with their detector scores, src/lens/detect.h: previous-token, duplicate-token,
 * induction; the cross-attention's diagonal), and every target word's loss and probability with
 * the model's top-k words on hover; the tables of an .npz of ablate, patch or detect (--from); for each
 * run folder given after --runs: its log.csv curves. docs/view.md is the user's guide.
 * Not here: the page and its JSON writer (src/view), the rows of the lens commands (lens.c).
 * Read next: src/view/view.h. */
#include <stdlib.h>
#include <string.h>

#include "translate.h"

/* a word of a vocabulary (ViewTokenText; ctx: the TxtVocab) */
static const void *word(const void *ctx, int id, size_t *len) {
    const char *w = txt_vocab_word(ctx, id);
    *len = strlen(w);
    return w;
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
    int LE = tr->model.cfg.n_enc_layers, LD = tr->model.cfg.n_dec_layers;
    int NH = tr->model.cfg.layer.n_heads, K = LENS_N_HEAD_KINDS, S = r->S, T = r->T;
    double *sc[3] = {ex_calloc((size_t)K * (LE ? LE : 1) * NH, sizeof(double)),
                     ex_calloc((size_t)K * LD * NH, sizeof(double)),
                     ex_calloc((size_t)LD * NH, sizeof(double))};
    const Tensor **pr = ex_calloc((size_t)(LE > LD ? LE : LD) + 1, sizeof(Tensor *));
    ViewAttnSet set[3] = {
        {.name = "encoder self-attention", .layers = LE, .heads = NH},
        {.name = "decoder self-attention", .layers = LD, .heads = NH, .causal = 1},
        {.name = "cross-attention (decoder -> source)", .layers = LD, .heads = NH}};
    ViewPredict words = {.B = r->B, .T = T, .top_k = v->top_k};
    int rc = AG_OK;
    for (int row = 0; rc == AG_OK && row < r->B; row++) {
        const int *src = r->src + (size_t)row * S, *tgt = r->ids + (size_t)row * T;
        lens_detect_seq2seq(tr->tape, &tr->model, src, S, tgt, 1, T, NULL, sc[0], sc[1], sc[2]);
        /* src: the source + EOS, tgt: BOS + the target; tr_forward_pair adds both itself */
        Tensor *logits = tr_forward_pair(tr, src, S - 1, tgt + 1, T - 1); /* (1, T, V) */
        if ((rc = ex_tensor_finite(logits, "logits", NULL)) != AG_OK) {
            rc = ex_not_finite(rc, tr->path, tr->tape);
            break;
        }
        ViewSide source = {src, S, word, &tr->src}, target = {tgt, T, word, &tr->tgt};
        for (int s = LE ? 0 : 1; s < 3; s++) {
            for (int l = 0; l < set[s].layers; l++)
                pr[l] = s == 0   ? tr->model.enc[l].self_attn.last_probs
                        : s == 1 ? tr->model.dec[l].self_attn.last_probs
                                 : tr->model.dec[l].multihead_attn.last_probs;
            view_attn_row(&set[s], s ? &target : &source, s == 2 ? &source : NULL, pr, 0, sc[s],
                          s == 2 ? 0 : K);
        }
        /* decoder position i reads BOS + target[0..i) and predicts next[i] (a target word, or
         * EOS at the end): the strip shows next, each word with the loss of predicting it */
        const int *next = r->next + (size_t)row * T;
        view_predict_row(&words, row, &(ViewSide){next, T, word, &tr->tgt}, logits->data,
                         logits->shape[2], next, T);
    }
    if (rc == AG_OK) {
        /* words: the prompt selectors join them with spaces, as txt_vocab_detokenize does */
        view_raw(b, ",\"token_sep\":\" \",");
        view_attn_sets(b, set + (LE ? 0 : 1), LE ? 3 : 2);
        view_raw(b, ",");
        view_predict_json(b, &words, "the model's top words at this position", "word", 0, NULL,
                          NULL);
    }
    for (int s = 0; s < 3; s++) view_buf_free(&set[s].rows), free(sc[s]);
    view_predict_free(&words);
    free(pr);
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
    int n = (int)(sizeof fl / sizeof fl[0]), npos = 0; /* the run folders: argv[0..npos) */
    int rc = flag_parse_cmd(
        TR_PROG, "view", "[flags] [--runs DIR...]",
        "One HTML page, offline (docs/view.md): every head of the encoder's and the decoder's\n"
        "self-attention and of the cross-attention on the sentence pair(s) (detector scores on "
        "the\nthumbnails), each target word's loss and top-k words; --from: the tables of "
        "ablate,\npatch or detect; --runs DIR...: the log.csv curves of run folders.",
        fl, n, argc, argv, argv, &npos);
    if (rc == FLAG_HELP) return TR_EXIT_OK;
    if (rc == AG_OK) rc = view_cmd_check(out, runs, argv, npos);
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
        if (t && !txt_utf8_check(t, strlen(t), &bad))
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
    if (rc == AG_OK) rc = view_cmd_page(out, ckpt, model_json, &v, from, argv, runs, npos);
    if (ckpt) lens_rows_free(&v.r);
    if (loaded) tr_free(&v.tr);
    return lens_cmd_end(&(LensCmd){.prog = TR_PROG, .name = "view"}, rc);
}
