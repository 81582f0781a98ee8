/* lens.c: what attograd-translate's lens commands (cache, ablate, patch, detect, lens) give
 * the library's (src/lens/cmd.h) about the seq2seq model: its rows, sentence pairs run
 * teacher-forced (the source + EOS on the encoder, BOS + the target on the decoder), its words
 * (a target word as one token; the token texts of the outputs), the input's flags and the
 * LensProgram (the model loaded and freed, the rows read, patch's clean and corrupted rows).
 * docs/lens.md is the user's guide.
 * Not here: the commands and their own flags (cli.c), the common flags (src/lens/cmd.c), the hooks (src/nn/hooks.c), the commands' runs (detect's
 * table too), files, tables and heatmaps shared with attograd-gpt's (src/lens/cmd.c,
 * commands.c, report.c).
 * Read next: src/lens/cmd.h, docs/lens.md. */
#include "translate.h"

#include <stdlib.h>
#include <string.h>

/* ---- the rows a command runs on ---- */

/* one pair into row b of r (allocated for r->B rows of S and T when b is 0): the source (its
 * words, not empty) and the target (NULL: the greedy translation) */
static int add_pair(Translator *tr, LensRows *r, int b, int B, const char *source,
                    const char *target, const char *label) {
    int L = tr->model.cfg.max_len, n_unk = 0;
    int *src = ex_calloc((size_t)L, sizeof(int)), *tgt = ex_calloc((size_t)L, sizeof(int));
    int S = tr_tokenize(&tr->src, source, src, L - 1, &n_unk, stderr, TR_PROG ": ");
    int T = 0, rc = AG_OK;
    if (S == 0) rc = ag_fail(AG_ERR_ARG, "%s: the source has no words", label);
    if (rc == AG_OK && S > L - 1)
        rc =
            ag_fail(AG_ERR_ARG, "%s: %d source words, the model reads at most %d", label, S, L - 1);
    if (rc == AG_OK) {
        T = target ? tr_tokenize(&tr->tgt, target, tgt, L - 1, &n_unk, stderr, TR_PROG ": ")
                   : tr_translate_ids(tr, src, S, 1, 0, tgt, L - 1);
        if (T < 0) rc = T; /* the model's values overflowed: the message names the checkpoint */
        if (target && T > L - 1)
            rc = ag_fail(AG_ERR_ARG, "%s: %d target words, the model reads at most %d", label, T,
                         L - 1);
    }
    if (rc == AG_OK && b == 0) {
        r->B = B, r->S = S + 1, r->T = T + 1;
        r->src = ex_calloc((size_t)B * r->S, sizeof(int));
        r->ids = ex_calloc((size_t)B * r->T, sizeof(int));
        r->next = ex_calloc((size_t)B * r->T, sizeof(int));
    } else if (rc == AG_OK && (S + 1 != r->S || T + 1 != r->T)) {
        rc = ag_fail(AG_ERR_ARG,
                     "%s has %d source and %d target tokens, the first row %d and %d (rows must "
                     "be as long)",
                     label, S, T, r->S - 1, r->T - 1);
    }
    if (rc == AG_OK) {
        int *s = r->src + (size_t)b * r->S, *ti = r->ids + (size_t)b * r->T;
        int *nx = r->next + (size_t)b * r->T;
        memcpy(s, src, (size_t)S * sizeof(int));
        s[S] = TR_EOS;
        ti[0] = TR_BOS;
        memcpy(ti + 1, tgt, (size_t)T * sizeof(int));
        memcpy(nx, tgt, (size_t)T * sizeof(int));
        nx[T] = TR_EOS;
    }
    free(src);
    free(tgt);
    return rc;
}

/* The rows' teacher-forced logits are finite: AG_OK, or AG_ERR_RANGE naming the checkpoint and
 * where the first NaN or inf began (finite weights that overflow); every command on the rows
 * refuses them so, before it writes or prints anything. */
static int rows_finite(Translator *tr, const LensRows *r) {
    Tape *t = tr->tape;
    int was = ag_no_grad(t, 1), chk = ag_check_finite(t, 1);
    ag_tape_reset(t);
    Tensor *mem = nn_seq2seq_encode(t, &tr->model, r->src, r->B, r->S, NULL);
    Tensor *logits = nn_seq2seq_decode(t, &tr->model, mem, r->src, r->S, r->ids, r->B, r->T, NULL);
    int rc = ex_tensor_finite(logits, "logits", NULL);
    if (rc != AG_OK) ex_not_finite(rc, tr->path, t);
    ag_tape_reset(t);
    ag_check_finite(t, chk);
    ag_no_grad(t, was);
    return rc;
}

int tr_lens_rows(Translator *tr, const char *sentence, const char *target, const char *pairs,
                 LensRows *r) {
    memset(r, 0, sizeof *r);
    if (!sentence == !pairs) return ag_fail(AG_ERR_ARG, "give a sentence or --pairs FILE");
    int rc = AG_OK;
    if (sentence) {
        rc = add_pair(tr, r, 0, 1, sentence, target, "the sentence");
    } else {
        FILE *f;
        rc = io_fopen_read(pairs, &f, NULL); /* a regular file: it is read twice */
        if (rc != AG_OK) return rc;
        char *line = NULL;
        size_t cap = 0, len;
        int n = 0, k = 0, got;
        while ((got = tr_read_line(f, &line, &cap, TR_MAX_LINE, &len)) == 1) n++;
        if (got < 0)
            rc = ag_fail(AG_ERR_ARG, "%s: line %d is longer than %d bytes", pairs, n + 1,
                         TR_MAX_LINE);
        if (rc == AG_OK && n == 0) rc = ag_fail(AG_ERR_ARG, "%s: no lines", pairs);
        rewind(f);
        while (rc == AG_OK && k < n && tr_read_line(f, &line, &cap, TR_MAX_LINE, &len) == 1) {
            char label[600], *tab = strchr(line, '\t');
            snprintf(label, sizeof label, "%s: line %d", pairs, k + 1);
            if (!tab) {
                rc = ag_fail(AG_ERR_ARG, "%s: no tab between the source and the target", label);
                break;
            }
            *tab = 0;
            rc = add_pair(tr, r, k++, n, line, tab + 1, label);
        }
        free(line);
        fclose(f);
    }
    if (rc == AG_OK) rc = rows_finite(tr, r);
    if (rc != AG_OK) lens_rows_free(r);
    return rc;
}

/* a target word that is one token of the target vocabulary (ctx: the Translator) */
static int one_word(const void *ctx, const char *word, const char *flag, int *id) {
    const Translator *tr = ctx;
    int ids[4], n_unk = 0;
    int n = *word ? tr_tokenize(&tr->tgt, word, ids, 4, &n_unk, NULL, NULL) : 0;
    if (n != 1 || n_unk)
        return ag_fail(AG_ERR_ARG, "--%s '%s': %s", flag, word,
                       n != 1 ? "not one target token" : "not in the target vocabulary");
    *id = ids[0];
    return AG_OK;
}

/* ---- the outputs (src/lens/report.h) ---- */

/* a token's word (malloc'd): the source vocabulary's for the encoder's points, else the
 * target's (ctx: the Translator; words hold no newline or tab, label changes nothing) */
static char *token_word(const void *ctx, NnHookStack stack, int id, int label) {
    const Translator *tr = ctx;
    (void)label;
    const char *w = tr_vocab_word(stack == NN_HOOK_ENCODER ? &tr->src : &tr->tgt, id);
    char *s = ex_malloc(strlen(w) + 1);
    return strcpy(s, w);
}

static int load(void *self, const LensFlags *f, LensCmd *c) {
    TrLens *l = self;
    int rc = tr_load(&l->tr, f->ckpt);
    if (rc != AG_OK) return rc;
    l->loaded = 1;
    ag_check_finite(l->tr.tape, 1); /* where a NaN or inf began, when the model overflows */
    *c = (LensCmd){TR_PROG,
                   f->name,
                   l->tr.path,
                   l->tr.tape,
                   lens_seq2seq(&l->tr.model),
                   lens_readout_seq2seq(&l->tr.model),
                   (LensReport){TR_PROG, ex_plot_heatmap, token_word, &l->tr},
                   one_word,
                   {0}};
    return AG_OK;
}

/* one row from the sentence (the argument or --sentence) and --target, or --pairs's rows */
static int rows(void *self, const LensFlags *f, LensRows *r) {
    TrLens *l = self;
    if (f->nargs > 1)
        return ag_fail(AG_ERR_ARG, "one sentence at a time (quote it): '%s' '%s'", f->args[0],
                       f->args[1]);
    if (f->nargs == 1 && l->sentence)
        return ag_fail(AG_ERR_ARG, "give the sentence once: '%s' and --sentence '%s'", f->args[0],
                       l->sentence);
    if (l->pairs && l->target) return ag_fail(AG_ERR_ARG, "--pairs has its targets: no --target");
    return tr_lens_rows(&l->tr, f->nargs ? f->args[0] : l->sentence, l->target, l->pairs, r);
}

/* patch's rows: --clean's and --corrupt's, both teacher-forced with --target, or with the clean
 * one's greedy translation */
static int pair_rows(void *self, const char *clean, const char *corrupt, LensRows *a, LensRows *b) {
    TrLens *l = self;
    int rc = tr_lens_rows(&l->tr, clean, l->target, NULL, a);
    if (rc == AG_OK) { /* the corrupted run reads the clean run's target */
        size_t need = txt_vocab_detokenize(&l->tr.tgt, a->ids + 1, a->T - 1, NULL, 0);
        char *tgt = ex_calloc(need + 1, 1);
        txt_vocab_detokenize(&l->tr.tgt, a->ids + 1, a->T - 1, tgt, need + 1);
        rc = tr_lens_rows(&l->tr, corrupt, l->target ? l->target : tgt, NULL, b);
        free(tgt);
    }
    return rc;
}

static void free_model(void *self) {
    TrLens *l = self;
    if (l->loaded) tr_free(&l->tr);
    l->loaded = 0;
}

int tr_lens_parse(TrLens *l, int parse_only, const LensUsage *u, int parts, Flag *own, int n_own,
                  int argc, char **argv) {
    l->p = (LensProgram){.prog = TR_PROG,
                         .ckpt = TR_DEFAULT_CKPT,
                         .unit = "WORD",
                         .arg_label = "the sentence",
                         .parse_only = parse_only,
                         .self = l,
                         .check_text = txt_check_arg,
                         .out_dir = run_out_file_dir,
                         .load = load,
                         .rows = rows,
                         .free = free_model,
                         .rows_flag = "--pairs FILE",
                         .pair_rows = pair_rows};
    Flag in[] = {FLAG_ROW("sentence", FLAG_STR, &l->sentence, "TEXT",
                          "the source sentence (default: the argument)"),
                 FLAG_ROW("target", FLAG_STR, &l->target, "TEXT",
                          "teacher-force this translation (default: the greedy one)"),
                 FLAG_ROW("pairs", FLAG_PATH, &l->pairs, "FILE",
                          "rows instead: source<TAB>target a line, all as many tokens")};
    int rows = (parts & TR_LENS_ROWS) != 0;
    return lens_flags_parse(&l->p, u, parts | (rows ? LENS_FLAGS_ARGS : 0), &l->f, in, rows ? 3 : 0,
                            own, n_own, argc, argv);
}
