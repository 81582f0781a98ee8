/* test_translate_limits.c: the bounds on what the translation example reads (README,
 * "Limits"): lines (tr_read_line, TR_MAX_LINE), words (TR_MAX_WORD), vocabularies
 * (TR_MAX_VOCAB) in TSV files and in a checkpoint's vocabulary bytes, a checkpoint whose
 * max_len would make its loader reserve gigabytes, and the command-line check the fuzz harness
 * uses (tr_check_args: parses, runs nothing). Each hostile size must give a clear error naming
 * the file, the line and the limit, in bounded memory. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "files.h"
#include "translate.h"

static void rm_dir(const char *dir) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert(system(cmd) == 0);
}

static void write_bytes(const char *path, const void *b, size_t n) {
    FILE *f = fopen(path, "wb");
    cr_assert(f != NULL, "%s: %s", path, strerror(errno));
    cr_assert(fwrite(b, 1, n, f) == n);
    cr_assert(fclose(f) == 0);
}

/* tr_data_read of path with fresh vocabularies must fail naming path and containing want */
static void expect_data_fails(const char *path, const char *want) {
    TrVocab s, t;
    tr_vocab_init(&s);
    tr_vocab_init(&t);
    TrData d;
    int rc = tr_data_read(path, &d, &s, &t, 1, 0);
    cr_assert_eq(rc, AG_ERR_FORMAT, "code %d: %s", rc, ag_last_error());
    cr_assert(strncmp(ag_last_error(), path, strlen(path)) == 0, "%s", ag_last_error());
    cr_assert(strstr(ag_last_error(), want), "expected '%s': %s", want, ag_last_error());
    cr_assert(d.pairs == NULL && d.n == 0);
    tr_vocab_free(&s);
    tr_vocab_free(&t);
}

static int data_reads(const char *path, TrVocab *s, TrVocab *t) {
    tr_vocab_init(s);
    tr_vocab_init(t);
    TrData d;
    int rc = tr_data_read(path, &d, s, t, 1, 0);
    if (rc == AG_OK) tr_data_free(&d);
    return rc;
}

Test(tr_limits, read_line_stops_at_its_limit_and_skips_the_rest) {
    char dir[64], path[128];
    ts_tmp_dir(dir, sizeof dir, "limits");
    snprintf(path, sizeof path, "%s/lines", dir);
    static const char text[] = "abc\n\n12345678\n123456789\n"
                               "a line of many more than eight bytes\nx\0y\ntail";
    write_bytes(path, text, sizeof text - 1);
    struct {
        int got;
        const char *line;
        size_t len;
    } want[] = {{1, "abc", 3}, {1, "", 0},     {1, "12345678", 8}, {-1, NULL, 9},
                {-1, NULL, 9}, {1, "x\0y", 3}, {1, "tail", 4},     {0, NULL, 0}};
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t cap = 0, len = 0;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        int got = tr_read_line(f, &buf, &cap, 8, &len);
        cr_assert_eq(got, want[i].got, "line %zu: %d", i + 1, got);
        if (got != 0) cr_assert_eq(len, want[i].len, "line %zu: length %zu", i + 1, len);
        if (want[i].line) cr_assert(memcmp(buf, want[i].line, len + 1) == 0, "line %zu", i + 1);
        cr_assert_leq(cap, 8 + 2, "the buffer grew to %zu bytes", cap);
    }
    fclose(f);
    free(buf);
    rm_dir(dir);
}

/* a TSV file whose second line is `bytes` long (words of 3 letters, a tab in the middle) */
static void write_long_line(const char *path, size_t bytes) {
    FILE *f = fopen(path, "wb");
    cr_assert(f != NULL);
    fputs("a\tb\n", f);
    size_t half = bytes / 2;
    for (size_t i = 0; i < bytes; i++) {
        size_t p = i < half ? i : i - half - 1, end = i < half ? half : bytes;
        fputc(i == half ? '\t' : p % 4 == 3 && i + 1 < end ? ' ' : 'w', f);
    }
    fputc('\n', f);
    fclose(f);
}

Test(tr_limits, a_tsv_line_over_the_limit_fails_in_bounded_memory) {
    char dir[64], path[128];
    ts_tmp_dir(dir, sizeof dir, "limits");
    snprintf(path, sizeof path, "%s/long.tsv", dir);
    /* a megabyte */
    write_long_line(path, 1 << 20);
    expect_data_fails(path, ":2: the line is longer than 262144 bytes (TR_MAX_LINE)");
    /* 64 MiB in one line: read in a child, whose peak memory must not grow by the line */
    write_long_line(path, 64 << 20);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        struct rusage before, after;
        getrusage(RUSAGE_SELF, &before);
        TrVocab s, t;
        tr_vocab_init(&s);
        tr_vocab_init(&t);
        TrData d;
        int rc = tr_data_read(path, &d, &s, &t, 1, 0);
        getrusage(RUSAGE_SELF, &after);
        long grew_kb = after.ru_maxrss - before.ru_maxrss;
        int ok = rc == AG_ERR_FORMAT && strstr(ag_last_error(), ":2: the line is longer");
        if (!ok || grew_kb > 16 * 1024)
            fprintf(stderr, "rc %d, peak memory grew by %ld KiB: %s\n", rc, grew_kb,
                    ag_last_error());
        _exit(ok && grew_kb <= 16 * 1024 ? 0 : 1);
    }
    int status;
    waitpid(pid, &status, 0);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "a 64 MiB line was not refused cheaply");
    /* exactly the limit is a line like any other (65536 words a side) */
    write_long_line(path, TR_MAX_LINE);
    TrVocab s, t;
    cr_assert_eq(data_reads(path, &s, &t), AG_OK, "%s", ag_last_error());
    tr_vocab_free(&s);
    tr_vocab_free(&t);
    rm_dir(dir);
}

Test(tr_limits, a_word_over_the_limit_is_refused) {
    char dir[64], path[128], text[2048];
    ts_tmp_dir(dir, sizeof dir, "limits");
    snprintf(path, sizeof path, "%s/w.tsv", dir);
    memset(text, 0, sizeof text);
    strcpy(text, "a b\tc ");
    memset(text + 6, 'x', TR_MAX_WORD);
    strcat(text, "\n");
    write_bytes(path, text, strlen(text));
    TrVocab s, t;
    cr_assert_eq(data_reads(path, &s, &t), AG_OK, "%d bytes: %s", TR_MAX_WORD, ag_last_error());
    tr_vocab_free(&s);
    tr_vocab_free(&t);
    text[strlen(text) - 1] = 'x';
    strcat(text, "\n");
    write_bytes(path, text, strlen(text));
    expect_data_fails(path, ":1: the target has a word longer than 512 bytes (TR_MAX_WORD)");
    rm_dir(dir);
}

Test(tr_limits, training_data_cannot_grow_a_vocabulary_past_the_limit) {
    char dir[64], path[128];
    ts_tmp_dir(dir, sizeof dir, "limits");
    snprintf(path, sizeof path, "%s/many.tsv", dir);
    /* 25 lines of 20000 new source words: 500000 words, the limit holds 499996 beside the
     * specials, so the 499997th, on line 25, is refused */
    FILE *f = fopen(path, "wb");
    for (int line = 0; line < 25; line++) {
        for (int k = 0; k < 20000; k++) fprintf(f, "%sw%d", k ? " " : "", line * 20000 + k);
        fputs("\tx\n", f);
    }
    fclose(f);
    expect_data_fails(path, ":25: the source has a new word, but its vocabulary already holds "
                            "500000 words (TR_MAX_VOCAB)");
    rm_dir(dir);
}

/* "attograd-translate vocab 1\nsrc N\n" and n words "w0".."w<n-1>", then an empty tgt side */
static char *vocab_text(long declared, long n, size_t *len) {
    size_t cap = 64 + (size_t)n * 12;
    char *b = malloc(cap);
    size_t k = (size_t)snprintf(b, cap, "attograd-translate vocab 1\nsrc %ld\n", declared);
    for (long i = 0; i < n; i++) k += (size_t)snprintf(b + k, cap - k, "w%ld\n", i);
    k += (size_t)snprintf(b + k, cap - k, "tgt 0\n");
    *len = k;
    return b;
}

Test(tr_limits, a_vocabulary_of_a_million_words_is_refused) {
    size_t len;
    char *b = vocab_text(1000000, 1000000, &len);
    TrVocab s, t;
    cr_assert_eq(tr_vocab_pair_load(b, len, &s, &t, "big.npz"), AG_ERR_FORMAT);
    cr_assert(strstr(ag_last_error(), "big.npz: vocabulary: src has 1000000 words, over the "
                                      "limit of 499996 (TR_MAX_VOCAB 500000 with the 4 specials)"),
              "%s", ag_last_error());
    free(b);
    /* the limit itself loads */
    b = vocab_text(TR_MAX_VOCAB - TR_N_SPECIAL, TR_MAX_VOCAB - TR_N_SPECIAL, &len);
    cr_assert_eq(tr_vocab_pair_load(b, len, &s, &t, "max.npz"), AG_OK, "%s", ag_last_error());
    cr_assert_eq(s.n, TR_MAX_VOCAB);
    tr_vocab_free(&s);
    tr_vocab_free(&t);
    free(b);
    /* a word over TR_MAX_WORD bytes */
    char text[1024];
    int n = snprintf(text, sizeof text, "attograd-translate vocab 1\nsrc 1\n%0*d\ntgt 0\n",
                     TR_MAX_WORD + 1, 7);
    cr_assert_eq(tr_vocab_pair_load(text, (size_t)n, &s, &t, "w.npz"), AG_ERR_FORMAT);
    cr_assert(strstr(ag_last_error(), "src word 1 is 513 bytes long, over the limit of 512"), "%s",
              ag_last_error());
    /* and a configuration that names such a vocabulary */
    Seq2SeqConfig c = nn_seq2seq_default_config(TR_MAX_VOCAB + 1, 10, 8, 2, 1);
    cr_assert_eq(tr_check_config(&c, "x.npz"), AG_ERR_ARG);
    cr_assert(strstr(ag_last_error(), "x.npz: vocabularies of 500001 and 10 words: each must be "
                                      "in [5, 500000]"),
              "%s", ag_last_error());
}

/* Found by fuzz/vocab.c: the word count was read with strtol, which skips blanks (newlines
 * too) and so read past the end of bytes that are not NUL-terminated ("tgt  \n" as the last
 * line). Now only digits up to the newline count; the buffers here are exactly their size, so
 * ASan (DEBUG=1) sees any read past them. */
Test(tr_limits, a_word_count_is_digits_up_to_the_newline) {
    static const char *const bad[] = {"tgt  \n",  "tgt \n",   "tgt +0\n",  "tgt  0\n",
                                      "tgt 0 \n", "tgt -0\n", "tgt 0x0\n", "tgt \n\n0\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[128];
        int n = snprintf(text, sizeof text, "attograd-translate vocab 1\nsrc 1\nw\n%s", bad[i]);
        char *b = malloc((size_t)n);
        memcpy(b, text, (size_t)n);
        TrVocab s, t;
        cr_assert_eq(tr_vocab_pair_load(b, (size_t)n, &s, &t, "v"), AG_ERR_FORMAT, "case %zu", i);
        cr_assert(strstr(ag_last_error(), "v: vocabulary: bad tgt word count") ||
                      strstr(ag_last_error(), "v: vocabulary: expected 'tgt <count>'"),
                  "case %zu: %s", i, ag_last_error());
        free(b);
    }
    static const char good[] = "attograd-translate vocab 1\nsrc 1\nw\ntgt 00\n";
    char *b = malloc(sizeof good - 1);
    memcpy(b, good, sizeof good - 1);
    TrVocab s, t;
    cr_assert_eq(tr_vocab_pair_load(b, sizeof good - 1, &s, &t, "v"), AG_OK, "%s", ag_last_error());
    cr_assert(s.n == TR_N_SPECIAL + 1 && t.n == TR_N_SPECIAL);
    tr_vocab_free(&s);
    tr_vocab_free(&t);
    free(b);
}

/* A checkpoint with max_len 4096 and 8 heads in 2 layers: reserving a step arena for a whole
 * 4096 x 4096 pass at load time would take gigabytes; tr_load starts small, and a translation
 * reserves what its sentence needs. */
Test(tr_limits, loading_a_long_max_len_model_reserves_little) {
    char dir[64], path[128];
    ts_tmp_dir(dir, sizeof dir, "limits");
    snprintf(path, sizeof path, "%s/long.npz", dir);
    TrVocab s, t;
    tr_vocab_init(&s);
    tr_vocab_init(&t);
    tr_vocab_add(&s, "a", 1);
    tr_vocab_add(&t, "b", 1);
    Seq2SeqConfig c = nn_seq2seq_default_config(s.n, t.n, 64, 8, 2);
    c.max_len = 4096;
    c.layer.d_ff = 64;
    cr_assert_gt(tr_arena_bytes(&c, 1, 4096, 4096, 0), (size_t)1 << 30);
    Arena *a = arena_new("params", ckpt_arena_bytes(&c, 0));
    Rng r;
    rng_seed(&r, 1);
    Seq2Seq m;
    nn_seq2seq_init(&m, a, &r, &c);
    size_t vlen;
    char *vocab = tr_vocab_pair_save(&s, &t, &vlen);
    CkptState st = {NULL, NULL, {0}, 0, vocab, vlen};
    cr_assert_eq(ckpt_save(path, &m, &st, 0, NULL), AG_OK, "%s", ag_last_error());
    Translator tr;
    cr_assert_eq(tr_load(&tr, path), AG_OK, "%s", ag_last_error());
    cr_assert_lt(tr.step->cap, (size_t)64 << 20, "step arena of %zu bytes", tr.step->cap);
    int src[3] = {TR_N_SPECIAL, TR_N_SPECIAL, TR_N_SPECIAL}, out[64];
    int n = tr_translate_ids(&tr, src, 3, 1, 0.6, out, 64);
    cr_assert(n >= 0 && n <= 16);
    tr_free(&tr);
    free(vocab);
    nn_seq2seq_free(&m);
    arena_free(a);
    tr_vocab_free(&s);
    tr_vocab_free(&t);
    rm_dir(dir);
}

/* tr_check_args: the exit code tr_main would give for the flags, and nothing runs */
Test(tr_limits, check_args_parses_and_runs_nothing) {
    char dir[64], out[128];
    ts_tmp_dir(dir, sizeof dir, "limits");
    snprintf(out, sizeof out, "%s/run", dir);
    struct {
        const char *args[8];
        int code;
    } cases[] = {
        {{"train", "--data", "/nonexistent", "--out", out, "--steps", "5"}, TR_EXIT_OK},
        {{"train", "--d-model", "60", "--heads", "8"}, TR_EXIT_USAGE},
        {{"train", "--steps", "5", "--epochs", "2"}, TR_EXIT_USAGE},
        {{"train", "--nope"}, TR_EXIT_USAGE},
        {{"eval", "--ckpt", "/nonexistent.npz", "x.tsv"}, TR_EXIT_OK},
        {{"eval"}, TR_EXIT_USAGE},
        {{"translate", "--beam", "0"}, TR_EXIT_USAGE},
        {{"translate", "--alpha", "nan"}, TR_EXIT_USAGE},
        {{"attention", "a", "b"}, TR_EXIT_USAGE},
        {{"heads", "--max", "-1"}, TR_EXIT_USAGE},
        {{"help", "train"}, TR_EXIT_OK},
        {{"frobnicate"}, TR_EXIT_USAGE},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *argv[10] = {"attograd-translate"};
        int argc = 1;
        while (argc - 1 < 8 && cases[i].args[argc - 1]) {
            argv[argc] = (char *)cases[i].args[argc - 1];
            argc++;
        }
        /* the messages and the help go to /dev/null */
        fflush(stdout);
        fflush(stderr);
        int out_fd = dup(1), err_fd = dup(2), null_fd = open("/dev/null", O_WRONLY);
        dup2(null_fd, 1);
        dup2(null_fd, 2);
        int rc = tr_check_args(argc, argv);
        fflush(stdout);
        fflush(stderr);
        dup2(out_fd, 1);
        dup2(err_fd, 2);
        close(out_fd), close(err_fd), close(null_fd);
        cr_assert_eq(rc, cases[i].code, "case %zu (%s)", i, argv[1]);
    }
    struct stat st;
    cr_assert(stat(out, &st) != 0, "tr_check_args ran the training (%s exists)", out);
    rm_dir(dir);
}
