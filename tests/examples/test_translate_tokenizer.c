/* test_translate_tokenizer.c: the translator with --tokenizer char and bpe. The library part:
 * a vocabulary holding a txt_ tokenizer encodes and decodes text whole (punctuation attached),
 * names an unknown byte, and its checkpoint form (vocab 2) loads back token for token and
 * refuses damaged bytes. The program (AG_TRANSLATE_BIN): a char model learns to copy sentences
 * with attached punctuation (train, eval, translate print the text itself), a bpe run resumes
 * to the byte, and bad --tokenizer / --vocab values exit 2 naming the flag.
 * Not here: the word-level vocabulary (test_translate.c), the tokenizers themselves
 * (tests/text). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "files.h"
#include "translate.h"

/* n pairs source<TAB>source: 1 to 3 words of {ab, ba, ca, bc}, a mark (. ! ?) attached */
static void write_copy(const char *path, int n, uint64_t seed) {
    static const char *const words[] = {"ab", "ba", "ca", "bc"};
    FILE *f = fopen(path, "w");
    cr_assert(f != NULL);
    Rng r;
    rng_seed(&r, seed);
    for (int i = 0; i < n; i++) {
        char s[64] = "";
        int k = 1 + (int)rng_below(&r, 3);
        for (int j = 0; j < k; j++) {
            if (j) strcat(s, " ");
            strcat(s, words[rng_below(&r, 4)]);
        }
        strncat(s, &".!?"[rng_below(&r, 3)], 1);
        fprintf(f, "%s\t%s\n", s, s);
    }
    fclose(f);
}

#define TINY_FLAGS                                                                                 \
    "--threads", "1", "--d-model", "32", "--heads", "2", "--layers", "1", "--ff", "64",            \
        "--max-len", "24", "--batch", "16", "--lr", "1e-2", "--quiet"

static void run_ok(const char *dir, const char *const *args, const char *want_out) {
    TsRun r = ts_run(dir, args, NULL);
    cr_assert_eq(r.code, 0, "%s: exit %d: %s", args[0], r.code, r.err);
    if (want_out) cr_assert_str_eq(r.out, want_out);
    ts_run_free(&r);
}

/* A char model learns to copy: eval scores the text and translate prints it, punctuation
 * attached (a word vocabulary would hold 'ab.' 'ab!' 'ab?' as three words). */
Test(tr_cli_tokenizer, char_trains_evaluates_and_translates_text) {
    char dir[64], train[512], valid[512], out[512], ckpt[512], hyps[512];
    ts_tmp_dir(dir, sizeof dir, "trtok");
    write_copy(ts_join(train, dir, "train.tsv"), 200, 5);
    write_copy(ts_join(valid, dir, "valid.tsv"), 20, 6);
    ts_join(out, dir, "run");
    ts_join(ckpt, out, "last.npz");
    const char *tr_args[] = {"train", "--train",  train,           "--valid", valid,
                             "--out", out,        "--steps",       "300",     "--tokenizer",
                             "char",  TINY_FLAGS, "--valid-every", "100",     NULL};
    run_ok(dir, tr_args, "");
    Translator tr;
    cr_assert_eq(tr_load(&tr, ckpt), AG_OK, "%s", ag_last_error());
    cr_assert_eq(tr.src.kind, TXT_VOCAB_CHAR);
    /* the bytes of the sources: a b c . ! ? and the space */
    cr_assert_eq(tr.src.n, TXT_N_SPECIAL + 7);
    cr_assert_eq(tr.tgt.n, TXT_N_SPECIAL + 7);
    tr_free(&tr);
    const char *ev[] = {"eval", "--ckpt", ckpt, "--hyps", ts_join(hyps, dir, "hyps.tsv"),
                        valid,  NULL};
    TsRun r = ts_run(dir, ev, NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    cr_assert(strstr(r.out, "exact match 100.00% (20/20)"), "%s", r.out);
    ts_run_free(&r);
    /* each hypothesis line: the source, the reference and the decoded text, all equal */
    char *h = ts_read_text(hyps, NULL);
    for (char *line = strtok(h, "\n"); line; line = strtok(NULL, "\n")) {
        char *t1 = strchr(line, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
        cr_assert(t2, "%s", line);
        cr_assert(strncmp(line, t2 + 1, (size_t)(t1 - line)) == 0 &&
                      strlen(t2 + 1) == (size_t)(t1 - line),
                  "%s", line);
    }
    free(h);
    const char *tl[] = {"translate", "--ckpt", ckpt, "ab ca!", "  bc ba. ", NULL};
    run_ok(dir, tl, "ab ca!\nbc ba.\n");
    const char *at[] = {"attention", "--ckpt", ckpt, "--out", out, "ca!", NULL};
    run_ok(dir, at, NULL);
    ts_rm_tree(dir);
}

/* bpe: a run of 16 steps and one of 8 resumed to 16 (the same schedule) write the same
 * bytes */
Test(tr_cli_tokenizer, bpe_resume_is_byte_identical) {
    char dir[64], train[512], valid[512], a[512], b[512], p1[512], p2[512];
    ts_tmp_dir(dir, sizeof dir, "trtok");
    write_copy(ts_join(train, dir, "train.tsv"), 100, 7);
    write_copy(ts_join(valid, dir, "valid.tsv"), 10, 8);
    ts_join(a, dir, "straight");
    ts_join(b, dir, "halves");
    const char *straight[] = {
        "train", "--train",          train, "--valid",     valid, "--out",   a,     "--steps",
        "16",    "--valid-every",    "4",   "--tokenizer", "bpe", "--vocab", "270", "--dropout",
        "0.2",   "--schedule-steps", "16",  TINY_FLAGS,    NULL};
    run_ok(dir, straight, "");
    const char *half[] = {"train", "--train",  train, "--valid",       valid, "--out",
                          b,       "--steps",  "8",   "--valid-every", "4",   "--tokenizer",
                          "bpe",   "--vocab",  "270", "--dropout",     "0.2", "--schedule-steps",
                          "16",    TINY_FLAGS, NULL};
    run_ok(dir, half, "");
    const char *resume[] = {"train",   "--train",  train,     "--valid",   valid,         "--out",
                            b,         "--resume", "--steps", "16",        "--tokenizer", "bpe",
                            "--vocab", "270",      "--quiet", "--threads", "1",           NULL};
    run_ok(dir, resume, "");
    const char *files[] = {"last.npz", "best.npz"};
    for (int i = 0; i < 2; i++)
        cr_assert(ts_same_file(ts_join(p1, a, files[i]), ts_join(p2, b, files[i])),
                  "%s differs after resume", files[i]);
    Translator tr;
    cr_assert_eq(tr_load(&tr, p1), AG_OK, "%s", ag_last_error());
    cr_assert_eq(tr.src.kind, TXT_VOCAB_BPE);
    cr_assert(tr.src.n > TXT_N_SPECIAL + 256 && tr.src.n <= TXT_N_SPECIAL + 270, "%d", tr.src.n);
    int ids[32];
    int n = txt_vocab_tokenize(&tr.src, "ab ca!", ids, 32, NULL, NULL, NULL);
    cr_assert(n < 6, "merges of the training text: %d tokens", n);
    char text[32];
    txt_vocab_detokenize(&tr.src, ids, n, text, sizeof text);
    cr_assert_str_eq(text, "ab ca!");
    tr_free(&tr);
    const char *tl[] = {"translate", "--ckpt", p1, "ab ca!", NULL};
    TsRun r = ts_run(dir, tl, NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    cr_assert(strchr(r.out, '\n') == r.out + strlen(r.out) - 1, "one line a sentence: %s", r.out);
    ts_run_free(&r);
    ts_rm_tree(dir);
}

Test(tr_cli_tokenizer, bad_values_exit_2_naming_the_flag) {
    char dir[64], train[512], word[512], bpe[512];
    ts_tmp_dir(dir, sizeof dir, "trtok");
    write_copy(ts_join(train, dir, "train.tsv"), 40, 9);
    ts_join(word, dir, "word");
    ts_join(bpe, dir, "bpe");
    const char *w[] = {"train", "--train", train, "--no-valid", "--out",
                       word,    "--steps", "2",   TINY_FLAGS,   NULL};
    run_ok(dir, w, "");
    const char *b[] = {"train",    "--train", train,         "--no-valid", "--out",   bpe,
                       "--steps",  "2",       "--tokenizer", "bpe",        "--vocab", "260",
                       "--warmup", "1",       TINY_FLAGS,    NULL};
    run_ok(dir, b, "");
    const struct {
        const char *const *args;
        const char *message;
    } cases[] = {
        {(const char *const[]){"train", "--tokenizer", "sentencepiece", NULL},
         "'--tokenizer sentencepiece': expected one of word, char, bpe"},
        {(const char *const[]){"train", "--tokenizer", "bpe", "--vocab", "255", NULL},
         "'--vocab 255' is out of range [256, 65536]"},
        {(const char *const[]){"train", "--tokenizer", "bpe", "--vocab", "65537", NULL},
         "'--vocab 65537' is out of range [256, 65536]"},
        {(const char *const[]){"train", "--tokenizer", "char", "--vocab", "300", NULL},
         "--vocab needs --tokenizer bpe"},
        {(const char *const[]){"train", "--train", train, "--no-valid", "--out", word, "--resume",
                               "--steps", "4", "--tokenizer", "char", NULL},
         "--tokenizer char differs from the checkpoint's (word)"},
        {(const char *const[]){"train", "--train", train, "--no-valid", "--out", bpe, "--resume",
                               "--steps", "4", "--tokenizer", "word", NULL},
         "--tokenizer word differs from the checkpoint's (bpe)"},
        {(const char *const[]){"train", "--train", train, "--no-valid", "--out", bpe, "--resume",
                               "--steps", "4", "--tokenizer", "bpe", "--vocab", "300", NULL},
         "--vocab 300 differs from the checkpoint's (260)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        TsRun r = ts_run(dir, cases[i].args, NULL);
        cr_assert_eq(r.code, 2, "case %zu: exit %d: %s", i, r.code, r.err);
        cr_assert(strstr(r.err, cases[i].message), "case %zu: '%s' lacks '%s'", i, r.err,
                  cases[i].message);
        ts_run_free(&r);
    }
    /* resuming without the flags, or with the same ones, continues */
    const char *same[] = {"train",    "--train", train,       "--no-valid",  "--out", bpe,
                          "--resume", "--steps", "3",         "--tokenizer", "bpe",   "--vocab",
                          "260",      "--quiet", "--threads", "1",           NULL};
    run_ok(dir, same, "");
    const char *plain[] = {"train",   "--train", train,     "--no-valid", "--out", word, "--resume",
                           "--steps", "3",       "--quiet", "--threads",  "1",     NULL};
    run_ok(dir, plain, "");
    ts_rm_tree(dir);
}
