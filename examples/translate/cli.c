/* cli.c: the command line of attograd-translate: the subcommands (train, eval, translate,
 * attention, heads, vocab; the lens's cache, ablate, patch, detect, lens) and --version, their flags from one table each (the help, with the
 * defaults, is generated from it), the checks of text given on the command line or the
 * standard input (UTF-8, a byte-order mark, several sentences on a line), and the exit codes
 * (translate.h: 0 ok, 1 a failed run, 2 bad usage, files or data, 130/143 stopped by a signal
 * with a checkpoint saved). Flags are --name VALUE or --name=VALUE. Every message on stderr
 * starts with "attograd-translate COMMAND: ".
 * Not here: what the subcommands do (train.c, decode.c, attention.c, heads.c, plot.c, lens.c). */
#include "translate.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROG TR_PROG

#define DEFAULT_CKPT TR_DEFAULT_CKPT

/* tr_check_args sets it: each command returns after its flags are parsed and checked, before
 * it touches a file or the machine (the fuzz harness of the command line, fuzz/cli.c) */
static int parse_only;

/* ---- the flags: src/flag's parser, its messages after "attograd-translate CMD: " ---- */

static int bad(const char *cmd, const char *fmt, const char *a, const char *b) {
    fprintf(stderr, "%s %s: ", PROG, cmd);
    fprintf(stderr, fmt, a, b);
    fprintf(stderr, " (see %s %s --help)\n", PROG, cmd);
    return TR_EXIT_USAGE;
}

/* ag_last_error() after "attograd-translate CMD: " on stderr; returns rc */
static int fail(const char *cmd, int rc) {
    fprintf(stderr, "%s %s: %s\n", PROG, cmd, ag_last_error());
    return rc;
}

/* Parses argv[0..argc) (after the subcommand) with src/flag's flag_parse_cmd (--help prints
 * "usage: PROG CMD ARGS", what, the flags): -1 if --help was asked, 0 if all is well, else
 * TR_EXIT_USAGE (message printed). Positional arguments go to pos (*npos), or are refused when
 * pos is NULL. */
static int parse_help(const char *cmd, const char *args, const char *what, Flag *opts, int n,
                      int argc, char **argv, char **pos, int *npos) {
    int rc = flag_parse_cmd(PROG, cmd, args, what, opts, n, argc, argv, pos, npos);
    return rc == FLAG_HELP ? -1 : rc == AG_OK ? 0 : bad(cmd, "%s%s", ag_last_error(), "");
}

/* --threads N, the same in every command (the lens's: src/lens/cmd.c) */
#define THREADS_FLAG(p)                                                                            \
    {                                                                                              \
        "threads", FLAG_INT, p, "N",                                                               \
            "threads (default: OMP_NUM_THREADS, else the CPUs, at most 8)", 0, 4096, NULL, 0       \
    }

void tr_warn_threads(int threads) {
    if (threads > ag_threads_available())
        fprintf(stderr, "%s: warning: --threads %d is more than the %d CPUs this process may use\n",
                PROG, threads, ag_threads_available());
}

/* --threads N (0: the library's default, ag_threads_default) */
static void set_threads(int threads) {
    tr_warn_threads(threads);
    ag_threads_use(threads);
}

/* ---- train ---- */

/* the flags, the run and its messages: train.c (src/run's loop) */
static int cmd_train(int argc, char **argv) { return tr_train_main(argc, argv, parse_only); }

/* ---- eval ---- */

static int load_or_complain(const char *cmd, Translator *tr, const char *path) {
    if (tr_load(tr, path) != AG_OK) return fail(cmd, TR_EXIT_USAGE);
    ag_check_finite(tr->tape, 1); /* where a NaN or inf began, when the model overflows */
    return 0;
}

static int cmd_eval(int argc, char **argv) {
    const char *ckpt = DEFAULT_CKPT, *hyps_path = NULL;
    int batch = 64, limit = 0, threads = 0;
    Flag opts[] = {
        {"ckpt", FLAG_PATH, &ckpt, "PATH", "the checkpoint", 0, 0, NULL, 0},
        {"batch", FLAG_INT, &batch, "N", "sentences decoded together", 1, 4096, NULL, 0},
        {"max", FLAG_INT, &limit, "N", "only the first N pairs of each file, 0: all", 0, 1 << 30,
         NULL, 0},
        {"hyps", FLAG_PATH, &hyps_path, "FILE",
         "write source<TAB>reference<TAB>hypothesis lines "
         "(default: none)",
         0, 0, NULL, 0},
        THREADS_FLAG(&threads),
    };
    int n = (int)(sizeof opts / sizeof opts[0]), npos = 0;
    char **pos = malloc(((size_t)argc + 1) * sizeof *pos);
    int rc = parse_help(
        "eval", "[flags] FILE.tsv...",
        "Greedy-decodes every source sentence of each file with the key/value cache and prints\n"
        "exact match (whole sentences), token accuracy (reference positions matched) and corpus\n"
        "BLEU-4 (clipped 1..4-gram precisions, geometric mean, brevity penalty). Memory: one "
        "batch\n"
        "and the hypotheses of 4096 pairs at a time, whatever the size of the file.",
        opts, n, argc, argv, pos, &npos);
    if (rc == 0 && npos == 0)
        rc = bad("eval", "give one or more TSV files to evaluate%s%s", "", "");
    if (rc || parse_only) {
        free(pos);
        return rc < 0 ? TR_EXIT_OK : rc;
    }
    set_threads(threads);
    Translator tr;
    if ((rc = load_or_complain("eval", &tr, ckpt)) != 0) {
        free(pos);
        return rc;
    }
    FILE *hyps = NULL;
    int overflowed = 0;
    if (hyps_path && !(hyps = fopen(hyps_path, "w"))) {
        fprintf(stderr, "%s eval: %s: cannot open for writing: %s\n", PROG, hyps_path,
                strerror(errno));
        rc = TR_EXIT_USAGE;
    }
    for (int i = 0; i < npos && rc == 0; i++) {
        TxtPairSet d;
        if (txt_pairs_read(pos[i], &d, &tr.src, &tr.tgt, 0, tr.model.cfg.max_len - 1) != AG_OK) {
            rc = fail("eval", TR_EXIT_USAGE);
            break;
        }
        TxtScore s;
        double loss = 0;
        int got = eval_seq2seq(&tr.model, tr.tape, &d, limit, batch, &s, &loss, hyps, &tr.src,
                               &tr.tgt, NULL);
        if (got < 0) { /* finite weights that overflow: nothing printed, no --hyps left */
            ex_not_finite(got, ckpt, NULL);
            fprintf(stderr, "%s eval: %s: %s\n", PROG, pos[i], ag_last_error());
            txt_pairs_free(&d);
            rc = TR_EXIT_USAGE;
            overflowed = 1;
            break;
        }
        printf("%s: exact match %.2f%% (%ld/%ld), token accuracy %.2f%%, BLEU-4 %.2f, loss "
               "%.4f\n",
               pos[i], 100 * txt_score_exact(&s), s.n_exact, s.n_sent, 100 * txt_score_tokens(&s),
               txt_score_bleu(&s), loss);
        if (d.n_unk_src || d.n_unk_tgt)
            printf("%s: %ld source and %ld target words are not in the vocabularies (<unk>)\n",
                   pos[i], d.n_unk_src, d.n_unk_tgt);
        fflush(stdout);
        txt_pairs_free(&d);
    }
    if (hyps) {
        if (fclose(hyps) != 0 && rc == 0) {
            fprintf(stderr, "%s eval: %s: %s\n", PROG, hyps_path, strerror(errno));
            rc = TR_EXIT_FAIL;
        }
        if (overflowed) unlink(hyps_path); /* hypotheses of a model that overflowed */
    }
    tr_free(&tr);
    free(pos);
    return rc;
}

/* ---- translate ---- */

/* A text given as an argument: returns it past a byte-order mark at its start, or NULL (the
 * message printed, naming label and the byte) when it is not valid UTF-8. */
static const char *check_text(const char *cmd, const char *label, const char *text) {
    if (txt_check_arg(text, label, &text) != AG_OK) fail(cmd, 0);
    return text;
}

/* The folder a command writes into exists (made if needed) and is writable: 0, or
 * TR_EXIT_USAGE with the message (a bad --out is the user's flag, found before any work). */
static int out_dir_ready(const char *cmd, const char *dir) {
    return run_out_dir(dir) == AG_OK ? 0 : fail(cmd, TR_EXIT_USAGE);
}

/* Warns when text holds several sentences (the model was trained on one a line). */
static void warn_sentences(const char *cmd, const char *label, const char *text) {
    int n = txt_count_sentences(text);
    if (n > 1)
        fprintf(stderr,
                "%s %s: %s holds %d sentences; the model translates one at a time and may drop "
                "all but the first: give one a line\n",
                PROG, cmd, label, n);
}

/* Says once per run where the vocabulary is listed, after a sentence with unknown words. */
static void hint_vocab(const char *cmd, const char *ckpt, int n_unk) {
    static int said;
    if (n_unk == 0 || said) return;
    said = 1;
    fprintf(stderr,
            "%s %s: the words the model knows (case matters; punctuation marks are words of "
            "their own): %s vocab --ckpt %s\n",
            PROG, cmd, PROG, ckpt);
}

/* Translates one line onto stdout: 0, or TR_EXIT_USAGE (said on stderr, nothing printed) when
 * the model's values overflow on it. */
static int translate_line(Translator *tr, const char *ckpt, const char *text, int beam,
                          double alpha, const char *label) {
    int L = tr->model.cfg.max_len, n_unk = 0;
    int *ids = malloc((size_t)L * sizeof(int)), *out = malloc((size_t)L * sizeof(int));
    char where[96];
    snprintf(where, sizeof where, "%s translate: %s: ", PROG, label);
    warn_sentences("translate", label, text);
    int n = txt_vocab_tokenize(&tr->src, text, ids, L - 1, &n_unk, stderr, where);
    hint_vocab("translate", ckpt, n_unk);
    n = tr_cut_words(n, L - 1, stderr, where);
    if (n == 0) {
        printf("\n");
    } else {
        int m = tr_translate_ids(tr, ids, n, beam, alpha, out, L);
        if (m < 0) { /* finite weights that overflow (the message names the checkpoint) */
            fprintf(stderr, "%s translate: %s: %s\n", PROG, label, ag_last_error());
            free(out);
            free(ids);
            return TR_EXIT_USAGE;
        }
        char *s = tr_text(&tr->tgt, out, m);
        printf("%s\n", s);
        free(s);
    }
    fflush(stdout);
    free(out);
    free(ids);
    return 0;
}

static int cmd_translate(int argc, char **argv) {
    const char *ckpt = DEFAULT_CKPT;
    int beam = 1, threads = 0;
    double alpha = 0.6;
    Flag opts[] = {
        {"ckpt", FLAG_PATH, &ckpt, "PATH", "the checkpoint", 0, 0, NULL, 0},
        {"beam", FLAG_INT, &beam, "K", "beam search with K beams, 1: greedy", 1, 64, NULL, 0},
        {"alpha", FLAG_DOUBLE, &alpha, "A", "beam length penalty ((5 + len) / 6)^A", 0, 10, NULL,
         0},
        THREADS_FLAG(&threads),
    };
    int n = (int)(sizeof opts / sizeof opts[0]), npos = 0;
    char **pos = malloc(((size_t)argc + 1) * sizeof *pos);
    int rc = parse_help(
        "translate", "[flags] [SENTENCE...]",
        "Translates each SENTENCE, or each line of the standard input when there is none, one\n"
        "output line per input. Words split on blanks, exactly as in the training data (the toy\n"
        "corpus: lower case, punctuation marks as words of their own: \"the cat sees a dog .\");\n"
        "unknown words are named on stderr with a hint and read as <unk> (`" PROG " vocab`\n"
        "lists the words). Input is UTF-8 (a byte-order mark is dropped). Greedy decoding with\n"
        "the key/value cache, or --beam K.",
        opts, n, argc, argv, pos, &npos);
    for (int i = 0; i < npos && rc == 0; i++) {
        char label[64];
        snprintf(label, sizeof label, "sentence %d", i + 1);
        const char *text = check_text("translate", label, pos[i]);
        if (text)
            pos[i] += text - pos[i];
        else
            rc = TR_EXIT_USAGE;
    }
    if (rc || parse_only) {
        free(pos);
        return rc < 0 ? TR_EXIT_OK : rc;
    }
    set_threads(threads);
    Translator tr;
    if ((rc = load_or_complain("translate", &tr, ckpt)) != 0) {
        free(pos);
        return rc;
    }
    char label[64];
    if (npos > 0) {
        for (int i = 0; i < npos && rc == 0; i++) {
            snprintf(label, sizeof label, "sentence %d", i + 1);
            rc = translate_line(&tr, ckpt, pos[i], beam, alpha, label);
        }
    } else {
        /* one output line per input line: a line that cannot be read gives an empty one */
        char *line = NULL;
        size_t cap = 0, len, bad;
        int k = 0, got;
        while (rc == 0 &&
               (got = txt_read_line(stdin, &line, &cap, TXT_PAIRS_MAX_LINE, &len)) != 0) {
            snprintf(label, sizeof label, "line %d", ++k);
            const char *text = line + (k == 1 ? txt_bom_len(line, len) : 0);
            if (got < 0) {
                /* skip the rest, but not forever: an endless line is an error */
                if (!txt_skip_line(stdin, TR_MAX_SKIP)) {
                    fprintf(stderr,
                            "%s translate: %s: more than %d bytes without an end of line: "
                            "stopped (the input is not text)\n",
                            PROG, label, TXT_PAIRS_MAX_LINE + TR_MAX_SKIP);
                    rc = TR_EXIT_USAGE;
                    break;
                }
                fprintf(stderr, "%s translate: %s: longer than %d bytes (TR_MAX_LINE): skipped\n",
                        PROG, label, TXT_PAIRS_MAX_LINE);
                printf("\n");
            } else if (memchr(line, '\0', len) || !txt_utf8_check(line, len, &bad)) {
                if (memchr(line, '\0', len))
                    fprintf(stderr, "%s translate: %s: holds a NUL byte: skipped\n", PROG, label);
                else
                    fprintf(stderr,
                            "%s translate: %s: not valid UTF-8 (byte %zu is 0x%02x): "
                            "skipped\n",
                            PROG, label, bad + 1, (unsigned char)line[bad]);
                printf("\n");
            } else {
                rc = translate_line(&tr, ckpt, text, beam, alpha, label);
            }
            fflush(stdout);
        }
        free(line);
    }
    tr_free(&tr);
    free(pos);
    return rc;
}

/* ---- attention and heads (attention.c, heads.c; pictures through plot.c) ---- */

/* What a plot function returned, said on stdout (drawn, skipped) or stderr (failed). */
static int report_plot(const char *cmd, int rc, const char *png) {
    if (rc == RUN_PLOT_DRAWN)
        printf("  %s\n", png);
    else if (rc == RUN_PLOT_SKIPPED)
        printf("  %s\n", ag_last_error());
    else
        fail(cmd, 0);
    return rc == RUN_PLOT_FAILED;
}

static int cmd_attention(int argc, char **argv) {
    const char *ckpt = DEFAULT_CKPT, *out = "build/attention", *sentence = NULL;
    const char *target = NULL;
    int threads = 0, no_plot = 0;
    Flag opts[] = {
        {"ckpt", FLAG_PATH, &ckpt, "PATH", "the checkpoint", 0, 0, NULL, 0},
        {"sentence", FLAG_STR, &sentence, "TEXT", "the source sentence (default: the argument)", 0,
         0, NULL, 0},
        {"target", FLAG_STR, &target, "TEXT",
         "teacher-force this translation (default: the greedy one)", 0, 0, NULL, 0},
        {"out", FLAG_PATH, &out, "DIR", "where attention.npz and attention_layerN.png go", 0, 0,
         NULL, 0},
        {"no-plot", FLAG_SWITCH, &no_plot, NULL, "only the .npz, no pictures", 1, 0, NULL, 0},
        THREADS_FLAG(&threads),
    };
    int n = (int)(sizeof opts / sizeof opts[0]), npos = 0;
    char **pos = malloc(((size_t)argc + 1) * sizeof *pos);
    int rc = parse_help(
        "attention", "[flags] SENTENCE",
        "Translates SENTENCE greedily, runs the model once on it and its translation "
        "(teacher-forced),\nand saves every head's attention: --out/attention.npz (bertviz's "
        "layout: per block\n(1, heads, queries, keys), e.g. encoder.layers.0.self_attn, "
        "decoder.layers.0.self_attn,\ndecoder.layers.0.multihead_attn; encoder_tokens and "
        "decoder_tokens as bytes) and one picture\nper layer, --out/attention_layerN.png "
        "(gnuplot; skipped when it is not installed).",
        opts, n, argc, argv, pos, &npos);
    if (rc == 0 && npos > 0 && sentence)
        rc = bad("attention", "give the sentence once: '%s' and --sentence '%s'", pos[0], sentence);
    if (rc == 0 && npos > 1)
        rc = bad("attention", "one sentence at a time (quote it): '%s' '%s'", pos[0], pos[1]);
    if (rc == 0 && npos == 0 && !sentence)
        rc = bad("attention", "give a sentence (argument or --sentence)%s%s", "", "");
    if (rc) {
        free(pos);
        return rc < 0 ? TR_EXIT_OK : rc;
    }
    if (!sentence) sentence = pos[0];
    free(pos);
    if (!(sentence = check_text("attention", "the sentence", sentence))) return TR_EXIT_USAGE;
    if (target && !(target = check_text("attention", "--target", target))) return TR_EXIT_USAGE;
    if (parse_only) return TR_EXIT_OK;
    if ((rc = out_dir_ready("attention", out)) != 0) return rc;
    set_threads(threads);
    Translator tr;
    if ((rc = load_or_complain("attention", &tr, ckpt)) != 0) return rc;
    warn_sentences("attention", "the sentence", sentence);
    TrAttention a;
    char path[700];
    if (tr_attention_collect(&tr, sentence, target, &a, stderr) != AG_OK) {
        tr_free(&tr);
        return fail("attention", TR_EXIT_USAGE);
    }
    printf("source:      %s\ntranslation: %s%s\n", a.source, a.translation,
           target ? " (given)" : " (greedy)");
    snprintf(path, sizeof path, "%s/attention.npz", out);
    if (lens_patterns_save(&a.p, path) != AG_OK)
        rc = fail("attention", TR_EXIT_FAIL);
    else
        printf("attention probabilities: %s\n", path);
    int layers = a.n_enc > a.n_dec ? a.n_enc : a.n_dec, failed = 0;
    if (rc == 0 && !no_plot) {
        printf("pictures (gnuplot):\n");
        for (int l = 0; l < layers; l++) {
            snprintf(path, sizeof path, "%s/attention_layer%d.png", out, l);
            failed |= report_plot("attention", view_patterns_png(&a.p, l, a.caption, path), path);
        }
    }
    fflush(stdout);
    tr_attention_free(&a);
    tr_free(&tr);
    return rc ? rc : failed ? TR_EXIT_FAIL : TR_EXIT_OK;
}

static int cmd_heads(int argc, char **argv) {
    const char *ckpt = DEFAULT_CKPT, *data = "build/data/valid.tsv";
    const char *out = "build/heads";
    int threads = 0, limit = 0, batch = 64, no_plot = 0;
    Flag opts[] = {
        {"ckpt", FLAG_PATH, &ckpt, "PATH", "the checkpoint", 0, 0, NULL, 0},
        {"data", FLAG_PATH, &data, "FILE", "the sentence pairs to measure on", 0, 0, NULL, 0},
        {"max", FLAG_INT, &limit, "N", "only the first N pairs, 0: all", 0, 1 << 30, NULL, 0},
        {"batch", FLAG_INT, &batch, "N", "pairs a batch", 1, 4096, NULL, 0},
        {"out", FLAG_PATH, &out, "DIR", "where heads.tsv and heads.png go", 0, 0, NULL, 0},
        {"no-plot", FLAG_SWITCH, &no_plot, NULL, "only the table, no picture", 1, 0, NULL, 0},
        THREADS_FLAG(&threads),
    };
    int rc = parse_help(
        "heads", "[flags]",
        "How much each attention head matters, over --data (teacher-forced loss):\n"
        "  loss_increase  the loss with the head masked (its gate at 0) minus the loss with all "
        "heads\n  grad_score     Michel et al. 2019: the mean over batches of |d loss / d gate|,\n"
        "                 divided by the L2 norm of its block's heads (grad_raw: before)\n"
        "Prints the table, writes it to --out/heads.tsv and draws --out/heads.png (gnuplot).",
        opts, (int)(sizeof opts / sizeof opts[0]), argc, argv, NULL, NULL);
    if (rc || parse_only) return rc < 0 ? TR_EXIT_OK : rc;
    if ((rc = out_dir_ready("heads", out)) != 0) return rc;
    set_threads(threads);
    Translator tr;
    if ((rc = load_or_complain("heads", &tr, ckpt)) != 0) return rc;
    TxtPairSet d;
    if (txt_pairs_read(data, &d, &tr.src, &tr.tgt, 0, tr.model.cfg.max_len - 1) != AG_OK) {
        tr_free(&tr);
        return fail("heads", TR_EXIT_USAGE);
    }
    LensHeadImportance h;
    if (tr_head_importance(&tr, &d, limit, batch, &h, isatty(STDERR_FILENO) ? stderr : NULL) !=
        AG_OK) {
        txt_pairs_free(&d);
        tr_free(&tr);
        return fail("heads", TR_EXIT_USAGE);
    }
    printf("%s: %d pairs in %d batches; loss with every head %.4f\n", data, h.n_rows, h.n_batches,
           h.base_loss);
    lens_heads_print(&h, stdout, 0);
    char path[700], title[700];
    snprintf(path, sizeof path, "%s/heads.tsv", out);
    if (lens_heads_save_tsv(&h, path) != AG_OK)
        rc = fail("heads", TR_EXIT_FAIL);
    else
        printf("table: %s\n", path);
    if (rc == 0 && !no_plot) {
        snprintf(path, sizeof path, "%s/heads.png", out);
        snprintf(title, sizeof title, "head importance on %s (%d pairs, loss %.4f)", data,
                 h.n_rows, h.base_loss);
        printf("picture (gnuplot):\n");
        if (report_plot("heads", view_heads_png(&h, path, title), path)) rc = TR_EXIT_FAIL;
    }
    fflush(stdout);
    lens_heads_free(&h);
    txt_pairs_free(&d);
    tr_free(&tr);
    return rc;
}

/* ---- vocab ---- */

static void print_side(const TxtVocab *v, const char *title) {
    if (title) printf("%s: %d words\n", title, v->n - TXT_N_SPECIAL);
    for (int i = TXT_N_SPECIAL; i < v->n; i++) printf("%s%s\n", title ? "  " : "", v->words[i]);
}

static const char *const side_names[] = {"both", "src", "tgt", NULL};

static int cmd_vocab(int argc, char **argv) {
    const char *ckpt = DEFAULT_CKPT;
    int side = 0;
    Flag opts[] = {
        {"ckpt", FLAG_PATH, &ckpt, "PATH", "the checkpoint", 0, 0, NULL, 0},
        {"side", FLAG_CHOICE, &side, "both|src|tgt",
         "both vocabularies with a title each, or one side's words alone", 0, 0, side_names, 0},
    };
    int rc = parse_help(
        "vocab", "[flags]",
        "Lists the words a checkpoint knows, one a line in id order: the source vocabulary (what\n"
        "translate reads), then the target one; the specials <pad> <bos> <eos> <unk> are not "
        "listed.\n" "Words are whatever the training data held between single spaces: case "
        "matters, and in\n" "the toy corpus every word is lower case and punctuation marks are "
        "words of their own.",
        opts, (int)(sizeof opts / sizeof opts[0]), argc, argv, NULL, NULL);
    if (rc || parse_only) return rc < 0 ? TR_EXIT_OK : rc;
    Translator tr;
    if ((rc = load_or_complain("vocab", &tr, ckpt)) != 0) return rc;
    if (side != 2) print_side(&tr.src, side == 0 ? "source" : NULL);
    if (side != 1) print_side(&tr.tgt, side == 0 ? "target" : NULL);
    tr_free(&tr);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "%s vocab: cannot write the list: %s\n", PROG, strerror(errno));
        return TR_EXIT_FAIL;
    }
    return TR_EXIT_OK;
}

/* ---- the lens: cache, ablate, patch, detect, lens (lens.c; docs/lens.md) ---- */

#define NPZ_PNG "the .npz to write (and a .png beside it)"

static int cmd_cache(int argc, char **argv) {
    TrLens l = {0};
    LensCmdArgs a = {.hooks = "*", .info = {.seq2seq_cfg = &l.tr.model.cfg}};
    Flag own[] = {FLAG_ROW("hooks", FLAG_STR, &a.hooks, "GLOBS",
                           "hook names to cache, comma-separated globs")};
    LensUsage u = {
        "cache", "[flags] SENTENCE",
        "Runs the model on the sentence and its translation (teacher-forced) and writes "
        "the activations\nat the hook points (docs/lens.md: encoder.*, decoder.*, "
        "decoder.blocks.L.cross_attn.*) to one\n.npz under their names, with tokens (the "
        "decoder's input), src_tokens, token_strs,\nsrc_token_strs and config; with "
        "--good and --bad also the gradients of their logit\ndifference as <name>.grad.",
        "the .npz to write"};
    int rc = tr_lens_parse(&l, parse_only, &u, TR_LENS_ROWS | LENS_FLAGS_GOOD_BAD | LENS_FLAGS_POS,
                           own, 1, argc, argv);
    return lens_cmd_run(LENS_CMD_CACHE, &l.p, &l.c, &l.f, &a, rc);
}

static int cmd_ablate(int argc, char **argv) {
    TrLens l = {0};
    LensCmdArgs a = {.hook = "*attn.hook_z"};
    static const char *const modes[] = {"zero", "mean", NULL};
    Flag own[] = {
        FLAG_ROW("hook", FLAG_STR, &a.hook, "GLOB", "the points to ablate, one at a time"),
        FLAG_ONE_OF("mode", &a.mode, "zero|mean", "zero, or the mean over the rows", modes),
        FLAG_NUM("positions", FLAG_INTS, &a.positions, "LIST",
                 "only these positions, e.g. 3,4 (default: all)", 0, 1000000),
    };
    LensUsage u = {"ablate", "[flags] SENTENCE",
                   "Ablates each head (or each point without heads) of the matching points in turn "
                   "and writes\nthe metric of every run: values (point, head), base, points, axes; "
                   "and a heatmap of the\nchanges (gnuplot). The default points are every "
                   "attention's z: encoder and decoder\nself-attention and the cross-attention.",
                   NPZ_PNG};
    int rc =
        tr_lens_parse(&l, parse_only, &u, TR_LENS_ROWS | LENS_FLAGS_METRIC, own, 3, argc, argv);
    return lens_cmd_run(LENS_CMD_ABLATE, &l.p, &l.c, &l.f, &a, rc);
}

static int cmd_patch(int argc, char **argv) {
    TrLens l = {0};
    LensCmdArgs a = {.hook = "encoder.blocks.*.hook_resid_pre"};
    static const char *const bys[] = {"position", "head", "head-position", NULL};
    Flag own[] = {
        FLAG_ROW("clean", FLAG_STR, &a.clean, "TEXT", "the clean source sentence"),
        FLAG_ROW("corrupt", FLAG_STR, &a.corrupt, "TEXT",
                 "the corrupted source sentence, as many words"),
        FLAG_ROW(
            "target", FLAG_STR, &l.target, "TEXT",
            "the translation both runs are teacher-forced with (default: the clean one's greedy)"),
        FLAG_ROW("hook", FLAG_STR, &a.hook, "GLOB", "the points to patch (as many positions each)"),
        FLAG_ONE_OF("by", &a.by, "position|head|head-position", "what one run patches", bys),
        FLAG_SW(
            "attribution", &a.attribution,
            "attribution patching: the first-order estimate from one forward and backward a run"),
    };
    LensUsage u = {"patch", "--clean TEXT --corrupt TEXT [flags]",
                   "Runs the clean and the corrupted source (the same translation teacher-forced), "
                   "then the\ncorrupted run with one part of one point patched from the clean run, "
                   "for every point\n--hook matches and every position, head or both; writes "
                   "values, axes, points, clean,\ncorrupted and attribution, and a heatmap of the "
                   "change from the corrupted run.",
                   NPZ_PNG};
    int rc = tr_lens_parse(&l, parse_only, &u, LENS_FLAGS_METRIC, own, 6, argc, argv);
    return lens_cmd_run(LENS_CMD_PATCH, &l.p, &l.c, &l.f, &a, rc);
}

static int cmd_detect(int argc, char **argv) {
    TrLens l = {0};
    LensCmdArgs a = {0};
    Flag own[] = {
        FLAG_SW("exclude-bos", &a.detect.exclude_bos, "leave key 0 out of the attention mass"),
        FLAG_SW("exclude-current", &a.detect.exclude_current_token,
                "leave the query's own key out of the attention mass"),
    };
    LensUsage u = {
        "detect", "[flags] SENTENCE",
        "Scores every head of the encoder's and the decoder's self-attention as a "
        "previous-token,\nduplicate-token and induction head (the share of its attention "
        "on the pattern's positions,\nTransformerLens's detect_head), and every head of "
        "the cross-attention by its diagonal score\n(the share on the source position "
        "of the same index), on the sentence pair(s) run\nteacher-forced; writes "
        "encoder, decoder (kind, layer, head) and cross_diagonal (layer, head)\nand a "
        "heatmap (gnuplot).",
        NPZ_PNG};
    int rc = tr_lens_parse(&l, parse_only, &u, TR_LENS_ROWS, own, 2, argc, argv);
    return lens_cmd_run(LENS_CMD_DETECT, &l.p, &l.c, &l.f, &a, rc);
}

static int cmd_lens(int argc, char **argv) {
    TrLens l = {0};
    LensCmdArgs a = {.token_flag = "word", .pos = -1};
    Flag own[] = {
        FLAG_ROW("word", FLAG_STR, &a.token, "WORD",
                 "the target word whose logit is read (or --good, --bad)"),
        FLAG_NUM("pos", FLAG_INT, &a.pos, "N", "the decoder position read (-1: the last)", -4096,
                 4096),
    };
    LensUsage u = {
        "lens", "[flags] SENTENCE",
        "The decoder's logit lens (its residual stream after the embeddings and after every "
        "block,\nthrough the final decoder norm and the generator) and direct logit attribution "
        "(every head\nof the self- and the cross-attention, their biases, every MLP, the "
        "embeddings, the final\nnorm's and the generator's biases, read with the final norm's "
        "scale: the parts sum to the\nlogit) of --word's logit, or of logit(--good) - "
        "logit(--bad), at decoder position --pos, on\nthe sentence pair(s) run teacher-forced. "
        "Pre-LN models only (--pre-ln in train).",
        "the .npz to write (and .png, _lens.png beside it)"};
    int rc =
        tr_lens_parse(&l, parse_only, &u, TR_LENS_ROWS | LENS_FLAGS_GOOD_BAD, own, 2, argc, argv);
    if (rc == AG_OK && !l.f.good != !l.f.bad) /* one given: as no --word (lens_cmd_run) */
        rc = lens_flags_refuse(&l.f, "give --word WORD, or --good WORD --bad WORD");
    return lens_cmd_run(LENS_CMD_LOGIT, &l.p, &l.c, &l.f, &a, rc);
}

/* ---- the subcommands ---- */

typedef struct {
    const char *name, *what;
    int (*run)(int argc, char **argv);
} Command;

static const Command commands[] = {
    {"train", "train a model on TSV sentence pairs", cmd_train},
    {"eval", "exact match, token accuracy and BLEU-4 of a checkpoint on TSV files", cmd_eval},
    {"translate", "translate sentences (arguments or stdin), greedy or beam search", cmd_translate},
    {"attention", "every head's attention for one sentence: .npz and PNG grids", cmd_attention},
    {"heads", "head importance: loss when masked, gate-gradient score; table and PNG", cmd_heads},
    {"vocab", "list the words a checkpoint knows (source and target)", cmd_vocab},
    {"cache", "the activations at the hook points for a sentence pair, as one .npz", cmd_cache},
    {"ablate", "zero or mean ablation of every head (or point) in turn: the metric's table",
     cmd_ablate},
    {"patch", "activation or attribution patching from a clean into a corrupted source", cmd_patch},
    {"detect", "every head's previous-token, duplicate-token, induction and diagonal scores",
     cmd_detect},
    {"lens", "the decoder's logit lens and direct logit attribution to a target word", cmd_lens},
    {"view", "one offline HTML page: attention, words, tables, runs (view.c)", tr_view_main},
};
#define N_COMMANDS (int)(sizeof commands / sizeof commands[0])

static void usage(FILE *f) {
    fprintf(f,
            "usage: %s <command> [flags]   (%s <command> --help for its flags)\n"
            "A transformer translator trained from scratch with attograd (%s --version).\n"
            "commands:\n",
            PROG, PROG, PROG);
    for (int i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].what);
    fprintf(f, "exit codes: 0 ok, 1 a run failed, 2 bad flags, files or data, 130/143 "
               "interrupted (checkpoint saved)\n");
}

int tr_main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return TR_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--version") == 0) {
        printf("%s %s\n", PROG, ATTOGRAD_VERSION);
        return TR_EXIT_OK;
    }
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        if (strcmp(cmd, "help") == 0 && argc > 2) {
            for (int i = 0; i < N_COMMANDS; i++)
                if (strcmp(commands[i].name, argv[2]) == 0)
                    return commands[i].run(1, (char *[]){"--help", NULL});
        }
        usage(stdout);
        return TR_EXIT_OK;
    }
    for (int i = 0; i < N_COMMANDS; i++)
        if (strcmp(commands[i].name, cmd) == 0) return commands[i].run(argc - 2, argv + 2);
    fprintf(stderr, "%s: unknown command '%s'\n", PROG, cmd);
    usage(stderr);
    return TR_EXIT_USAGE;
}

int tr_check_args(int argc, char **argv) {
    parse_only = 1;
    int rc = tr_main(argc, argv);
    parse_only = 0;
    return rc;
}
