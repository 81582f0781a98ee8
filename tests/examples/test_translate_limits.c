/* test_translate_limits.c: the bounds on what the translation example reads (README,
 * "Limits"): lines (TXT_PAIRS_MAX_LINE), words (TXT_VOCAB_MAX_WORD_LEN) and vocabularies
 * (TXT_VOCAB_MAX_WORDS) in TSV files and configurations, a checkpoint whose max_len would make its loader reserve
 * gigabytes, and the command-line check the fuzz harness uses (tr_check_args: parses, runs
 * nothing). Each hostile size must give a clear error naming the file, the line and the
 * limit, in bounded memory. The reader's own bound and a checkpoint's vocabulary bytes over
 * the limits: tests/text/test_vocab.c. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "files.h"
#include "translate.h"

/* txt_pairs_read of path with fresh vocabularies must fail naming path and containing want */
static void expect_data_fails(const char *path, const char *want) {
    TxtVocab s, t;
    txt_vocab_init(&s);
    txt_vocab_init(&t);
    TxtPairSet d;
    int rc = txt_pairs_read(path, &d, &s, &t, 1, 0);
    cr_assert_eq(rc, AG_ERR_FORMAT, "code %d: %s", rc, ag_last_error());
    cr_assert(strncmp(ag_last_error(), path, strlen(path)) == 0, "%s", ag_last_error());
    cr_assert(strstr(ag_last_error(), want), "expected '%s': %s", want, ag_last_error());
    cr_assert(d.pairs == NULL && d.n == 0);
    txt_vocab_free(&s);
    txt_vocab_free(&t);
}

static int data_reads(const char *path, TxtVocab *s, TxtVocab *t) {
    txt_vocab_init(s);
    txt_vocab_init(t);
    TxtPairSet d;
    int rc = txt_pairs_read(path, &d, s, t, 1, 0);
    if (rc == AG_OK) txt_pairs_free(&d);
    return rc;
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
    expect_data_fails(path, ":2: the line is longer than 262144 bytes (TXT_PAIRS_MAX_LINE)");
    /* 64 MiB in one line: read in a child, whose peak memory must not grow by the line */
    write_long_line(path, 64 << 20);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        struct rusage before, after;
        getrusage(RUSAGE_SELF, &before);
        TxtVocab s, t;
        txt_vocab_init(&s);
        txt_vocab_init(&t);
        TxtPairSet d;
        int rc = txt_pairs_read(path, &d, &s, &t, 1, 0);
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
    write_long_line(path, TXT_PAIRS_MAX_LINE);
    TxtVocab s, t;
    cr_assert_eq(data_reads(path, &s, &t), AG_OK, "%s", ag_last_error());
    txt_vocab_free(&s);
    txt_vocab_free(&t);
    ts_rm_tree(dir);
}

Test(tr_limits, a_word_over_the_limit_is_refused) {
    char dir[64], path[128], text[2048];
    ts_tmp_dir(dir, sizeof dir, "limits");
    snprintf(path, sizeof path, "%s/w.tsv", dir);
    memset(text, 0, sizeof text);
    strcpy(text, "a b\tc ");
    memset(text + 6, 'x', TXT_VOCAB_MAX_WORD_LEN);
    strcat(text, "\n");
    ts_write_bytes(path, text, strlen(text));
    TxtVocab s, t;
    cr_assert_eq(data_reads(path, &s, &t), AG_OK, "%d bytes: %s", TXT_VOCAB_MAX_WORD_LEN,
                 ag_last_error());
    txt_vocab_free(&s);
    txt_vocab_free(&t);
    text[strlen(text) - 1] = 'x';
    strcat(text, "\n");
    ts_write_bytes(path, text, strlen(text));
    expect_data_fails(path,
                      ":1: the target has a word longer than 512 bytes (TXT_VOCAB_MAX_WORD_LEN)");
    ts_rm_tree(dir);
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
                            "500000 words (TXT_VOCAB_MAX_WORDS)");
    ts_rm_tree(dir);
}

/* a configuration naming more words than a vocabulary may hold */
Test(tr_limits, a_configuration_naming_too_many_words_is_refused) {
    Seq2SeqConfig c = nn_seq2seq_default_config(TXT_VOCAB_MAX_WORDS + 1, 10, 8, 2, 1);
    cr_assert_eq(tr_check_config(&c, "x.npz"), AG_ERR_ARG);
    cr_assert(strstr(ag_last_error(), "x.npz: vocabularies of 500001 and 10 words: each must be "
                                      "in [5, 500000]"),
              "%s", ag_last_error());
}

/* A checkpoint the seq2seq model accepts (nn_seq2seq_ckpt_config) but the translator does not
 * (tr_check_config, added to the check by tr_model_config) is refused when read, naming the
 * file and the translator's rule; the model's own rules and ranges are
 * tests/io/test_checkpoint.c's. */
Test(tr_limits, a_checkpoint_outside_the_translators_limits_is_refused) {
    char dir[64], path[128];
    ts_tmp_dir(dir, sizeof dir, "limits");
    snprintf(path, sizeof path, "%s/m.npz", dir);
    Seq2SeqConfig bad[2];
    bad[0] = nn_seq2seq_default_config(12, 12, 16, 2, 1);
    bad[0].pad_id = 11; /* inside the vocabularies, but the translator pads with 0 */
    bad[1] = nn_seq2seq_default_config(12, 12, 2, 1, 1);
    bad[1].n_enc_layers = 0;
    bad[1].layer.d_ff = 70000; /* the translator takes at most 65536 */
    const char *want[] = {"the translator: pad_id must be 0", "the translator: d_model must be in"};
    for (int i = 0; i < 2; i++) {
        Arena *a = arena_new("params", 0);
        Rng r;
        rng_seed(&r, 1);
        Seq2Seq m;
        nn_seq2seq_init(&m, a, &r, &bad[i]);
        Checkpoint ck = {.params = &m.params, .config = nn_seq2seq_ckpt_config(&m.cfg)};
        cr_assert_eq(ckpt_save(path, &ck, 0, NULL), AG_OK, "%s", ag_last_error());
        nn_seq2seq_free(&m);
        arena_free(a);
        Seq2SeqConfig c = {0};
        CkptConfig kc = nn_seq2seq_ckpt_config(&c);
        NpzFile *f = NULL;
        cr_assert_eq(ckpt_read(path, &kc, &f), AG_OK, "%d: %s", i, ag_last_error());
        npz_free(f);
        memset(&c, 0, sizeof c);
        kc = tr_model_config(&c);
        f = NULL;
        int rc = ckpt_read(path, &kc, &f);
        cr_assert_eq(rc, AG_ERR_FORMAT, "%d: code %d: %s", i, rc, ag_last_error());
        cr_assert(f == NULL);
        cr_assert(strncmp(ag_last_error(), path, strlen(path)) == 0, "%s", ag_last_error());
        cr_assert(strstr(ag_last_error(), want[i]), "%d: expected '%s': %s", i, want[i],
                  ag_last_error());
    }
    ts_rm_tree(dir);
}

/* An untrained translator of configuration c (its weights drawn from seed) and the vocabularies s
 * and t, saved as a checkpoint at path */
static void save_untrained(const char *path, const TxtVocab *s, const TxtVocab *t,
                           const Seq2SeqConfig *c, uint64_t seed) {
    Arena *a = arena_new("params", 0);
    Rng r;
    rng_seed(&r, seed);
    Seq2Seq m;
    nn_seq2seq_init(&m, a, &r, c);
    size_t vlen;
    char *vocab = txt_vocab_pair_save(s, t, &vlen);
    Checkpoint ck = {
        .params = &m.params, .config = tr_model_config(&m.cfg), .extra = vocab, .extra_len = vlen};
    cr_assert_eq(ckpt_save(path, &ck, 0, NULL), AG_OK, "%s", ag_last_error());
    free(vocab);
    nn_seq2seq_free(&m);
    arena_free(a);
}

/* A checkpoint with max_len 4096 and 8 heads in 2 layers: a step arena for a whole 4096 x 4096
 * pass would take gigabytes; the arena grows only to what a translation of its sentence
 * needs. */
Test(tr_limits, loading_a_long_max_len_model_reserves_little) {
    char dir[64], path[128];
    ts_tmp_dir(dir, sizeof dir, "limits");
    snprintf(path, sizeof path, "%s/long.npz", dir);
    TxtVocab s, t;
    txt_vocab_init(&s);
    txt_vocab_init(&t);
    txt_vocab_add(&s, "a", 1);
    txt_vocab_add(&t, "b", 1);
    Seq2SeqConfig c = nn_seq2seq_default_config(s.n, t.n, 64, 8, 2);
    c.max_len = 4096;
    c.layer.d_ff = 64;
    save_untrained(path, &s, &t, &c, 1);
    Translator tr;
    cr_assert_eq(tr_load(&tr, path), AG_OK, "%s", ag_last_error());
    int src[3] = {TXT_N_SPECIAL, TXT_N_SPECIAL, TXT_N_SPECIAL}, out[64];
    int n = tr_translate_ids(&tr, src, 3, 1, 0.6, out, 64);
    cr_assert(n >= 0 && n <= 16);
    cr_assert_lt(tr.step->cap, (size_t)16 << 20, "step arena of %zu bytes", tr.step->cap);
    tr_free(&tr);
    txt_vocab_free(&s);
    txt_vocab_free(&t);
    ts_rm_tree(dir);
}

/* ---- endless and device input, the memory of eval ---- */

/* An untrained checkpoint: 1+1 layers of width 16, source words a b c, target words x y z. */
static void write_tiny_ckpt(const char *path, int max_len) {
    TxtVocab s, t;
    txt_vocab_init(&s);
    txt_vocab_init(&t);
    for (int i = 0; i < 3; i++) {
        txt_vocab_add(&s, (char[]){(char)('a' + i)}, 1);
        txt_vocab_add(&t, (char[]){(char)('x' + i)}, 1);
    }
    Seq2SeqConfig c = nn_seq2seq_default_config(s.n, t.n, 16, 2, 1);
    c.max_len = max_len;
    c.layer.d_ff = 16;
    save_untrained(path, &s, &t, &c, 5);
    txt_vocab_free(&s);
    txt_vocab_free(&t);
}

static double seconds_since(const struct timespec *t0) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + 1e-9 * (double)(t.tv_nsec - t0->tv_nsec);
}

/* Runs the program: it must exit 2 within a second with want on stderr. A reader that never
 * stops is killed after 20 s (and the test fails). */
static void expect_quick_refusal(const char *dir, const char *const *args, const char *want) {
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int pid = ts_start(dir, args, NULL);
    for (;;) {
        siginfo_t info;
        memset(&info, 0, sizeof info);
        cr_assert(waitid(P_PID, (id_t)pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0);
        if (info.si_pid == pid) break;
        if (seconds_since(&t0) > 20) {
            kill(pid, SIGKILL);
            break;
        }
        nanosleep(&(struct timespec){0, 5 * 1000 * 1000}, NULL);
    }
    double took = seconds_since(&t0);
    TsRun r = ts_finish(dir, pid);
    cr_assert_eq(r.code, 2, "%s %s: exit %d after %.1f s: %s", args[0], args[2], r.code, took,
                 r.err);
    cr_assert(strstr(r.err, want) != NULL, "%s: '%s' lacks '%s'", args[0], r.err, want);
    cr_assert_lt(took, 1.0, "%s took %.2f s", args[0], took);
    ts_run_free(&r);
}

/* A writer that sends "a a a ..." into the FIFO path and never a newline, until the reader
 * closes it; then it reports how many bytes went through on the pipe fd (a size_t). */
static pid_t start_endless_writer(const char *path, int report_fd) {
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        signal(SIGPIPE, SIG_IGN);
        int fd = open(path, O_WRONLY);
        static char chunk[65536];
        for (size_t i = 0; i < sizeof chunk; i++) chunk[i] = i % 2 ? ' ' : 'a';
        size_t total = 0;
        for (ssize_t w; fd >= 0 && (w = write(fd, chunk, sizeof chunk)) > 0;) total += (size_t)w;
        if (write(report_fd, &total, sizeof total) != (ssize_t)sizeof total) _exit(1);
        _exit(0);
    }
    return pid;
}

/* The bytes the writer got through (after unblocking a writer whose FIFO was never opened). */
static size_t finish_writer(const char *fifo, pid_t pid, int report[2]) {
    int fd = open(fifo, O_RDONLY | O_NONBLOCK);
    if (fd >= 0) close(fd);
    size_t total = 0;
    cr_assert(read(report[0], &total, sizeof total) == (ssize_t)sizeof total);
    waitpid(pid, NULL, 0);
    close(report[0]);
    close(report[1]);
    return total;
}

Test(tr_limits, a_device_or_an_endless_line_as_data_exits_2_within_a_second) {
    char dir[64], ckpt[512], good[512], fifo[512], out[512], heads[512];
    ts_tmp_dir(dir, sizeof dir, "limits");
    write_tiny_ckpt(ts_join(ckpt, dir, "tiny.npz"), 16);
    ts_write_text(ts_join(good, dir, "good.tsv"), "a b\tx y\nb c\ty z\n");
    ts_join(out, dir, "run");
    ts_join(heads, dir, "heads");
    const char *zero = "/dev/zero", *is_dev = "/dev/zero: is a character device";
    const char *const eval_zero[] = {"eval", "--ckpt", ckpt, zero, NULL};
    expect_quick_refusal(dir, eval_zero, is_dev);
    const char *const train_zero[] = {"train", "--train", zero, "--no-valid", "--out", out, NULL};
    expect_quick_refusal(dir, train_zero, is_dev);
    const char *const valid_zero[] = {"train", "--train", good,      "--valid", zero,
                                      "--out", out,       "--steps", "1",       "--d-model",
                                      "16",    "--heads", "2",       NULL};
    expect_quick_refusal(dir, valid_zero, is_dev);
    const char *const heads_zero[] = {"heads", "--ckpt", ckpt,        "--data", zero,
                                      "--out", heads,    "--no-plot", NULL};
    expect_quick_refusal(dir, heads_zero, is_dev);
    const char *const eval_dir[] = {"eval", "--ckpt", ckpt, dir, NULL};
    expect_quick_refusal(dir, eval_dir, ": is a folder: only regular files and pipes are read");
    /* a pipe is read, but an endless line stops at the limit: the reader takes at most
     * TXT_PAIRS_MAX_LINE + 1 bytes and one stdio buffer, plus what the pipe holds (64 KiB by default) */
    ts_join(fifo, dir, "endless.fifo");
    cr_assert(mkfifo(fifo, 0600) == 0, "%s", strerror(errno));
    char want[600];
    snprintf(want, sizeof want, "%s:1: the line is longer than 262144 bytes (TXT_PAIRS_MAX_LINE)",
             fifo);
    const char *const eval_fifo[] = {"eval", "--ckpt", ckpt, fifo, NULL};
    const char *const train_fifo[] = {"train", "--train", fifo, "--no-valid", "--out", out, NULL};
    const char *const *const fifo_cases[] = {eval_fifo, train_fifo};
    for (int k = 0; k < 2; k++) {
        int report[2];
        cr_assert(pipe(report) == 0);
        pid_t writer = start_endless_writer(fifo, report[1]);
        expect_quick_refusal(dir, fifo_cases[k], want);
        size_t sent = finish_writer(fifo, writer, report);
        cr_assert_lt(sent, (size_t)TXT_PAIRS_MAX_LINE + (1 << 20), "%zu bytes went into the pipe",
                     sent);
    }
    ts_rm_tree(dir);
}

Test(tr_limits, translate_gives_up_on_an_endless_input_line) {
    char dir[64], ckpt[512], cmd[1600], err[512];
    ts_tmp_dir(dir, sizeof dir, "limits");
    write_tiny_ckpt(ts_join(ckpt, dir, "tiny.npz"), 16);
    ts_join(err, dir, "err.txt");
    /* /dev/zero as the standard input: one line without end; skipped up to TR_MAX_SKIP bytes,
     * then given up (timeout stops a reader that never does) */
    snprintf(cmd, sizeof cmd,
             "timeout 20 '%s' translate --ckpt '%s' < /dev/zero > /dev/null 2> '%s'",
             getenv("AG_TRANSLATE_BIN"), ckpt, err);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int status = system(cmd);
    double took = seconds_since(&t0);
    char *text = ts_read_text(err, NULL);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 2, "status %d: %s", status, text);
    cr_assert(strstr(text, "attograd-translate translate: line 1: more than 17039360 bytes "
                           "without an end of line: stopped"),
              "%s", text);
    cr_assert_lt(took, 2.0, "took %.2f s", took);
    free(text);
    ts_rm_tree(dir);
}

static int eval_batches, eval_stop_after;
static int stop_after_some_batches(void) { return ++eval_batches > eval_stop_after; }

/* The address space of the process in bytes (/proc/self/statm: its size in pages). */
static size_t address_space_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long size = 0;
    if (f && fscanf(f, "%lu", &size) != 1) size = 0;
    if (f) fclose(f);
    return (size_t)size * (size_t)sysconf(_SC_PAGESIZE);
}

/* eval used to allocate pairs x max_len ints for the hypotheses (1M one-word pairs at max_len
 * 1024: 4 GB). Now it holds one batch and one window's hypotheses: a million pairs evaluate
 * under an address-space limit of 256 MiB more than the process had, and the peak resident
 * memory grows by less than 16 MiB over the first two windows (stopped there: decoding a
 * million sentences takes minutes). */
#if defined(__SANITIZE_ADDRESS__)
/* AddressSanitizer keeps freed blocks in a quarantine (256 MiB by default) before reusing them,
 * so under it the resident peak measures the quarantine, not eval: the bound becomes quarantine
 * plus 16 MiB, and the address-space limit (which the old pairs x max_len block breaks) holds. */
#define EVAL_PEAK_GROWTH_KB ((256 + 16) * 1024L)
#else
#define EVAL_PEAK_GROWTH_KB (16 * 1024L)
#endif

Test(tr_limits, eval_of_a_million_pairs_holds_one_window) {
    char dir[64], ckpt[512], data[512], hyps[512];
    ts_tmp_dir(dir, sizeof dir, "limits");
    write_tiny_ckpt(ts_join(ckpt, dir, "tiny.npz"), 1024);
    ts_join(data, dir, "million.tsv");
    FILE *f = fopen(data, "wb");
    cr_assert(f != NULL);
    for (int i = 0; i < 1000000; i++) fputs(i % 3 ? "a\tx\n" : "b\ty\n", f);
    cr_assert(fclose(f) == 0);
    ts_join(hyps, dir, "hyps.tsv");
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        Translator tr;
        TxtPairSet d;
        if (tr_load(&tr, ckpt) != AG_OK ||
            txt_pairs_read(data, &d, &tr.src, &tr.tgt, 0, tr.model.cfg.max_len - 1) != AG_OK) {
            fprintf(stderr, "%s\n", ag_last_error());
            _exit(2);
        }
        int batch = 512;
        FILE *h = fopen(hyps, "w");
        struct rlimit lim = {address_space_bytes() + ((size_t)256 << 20), RLIM_INFINITY};
        setrlimit(RLIMIT_AS, &lim);
        /* Under qemu-user (make test-arm64) a child forked from a process with threads dies in
         * qemu 7.2 itself when it starts threads of its own (an assertion in its CPU setup):
         * there this child evaluates on one thread. Memory does not depend on the count. */
        if (getenv("AG_TEST_QEMU")) ag_threads_use(1);
        struct rusage before, after;
        getrusage(RUSAGE_SELF, &before);
        TxtScore s;
        double loss = 0;
        eval_batches = 0;
        eval_stop_after = 2 * EVAL_WINDOW / batch;
        int finished = eval_seq2seq(&tr.model, tr.tape, &d, 0, batch, &s, &loss, h, &tr.src,
                                    &tr.tgt, stop_after_some_batches);
        getrusage(RUSAGE_SELF, &after);
        long grew_kb = after.ru_maxrss - before.ru_maxrss;
        fclose(h);
        int ok = d.n == 1000000 && !finished && s.n_sent == 2 * EVAL_WINDOW &&
                 grew_kb < EVAL_PEAK_GROWTH_KB;
        if (!ok)
            fprintf(stderr, "%d pairs, finished %d, %ld sentences, peak grew by %ld KiB\n", d.n,
                    finished, s.n_sent, grew_kb);
        _exit(ok ? 0 : 1);
    }
    int status;
    waitpid(pid, &status, 0);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "a million pairs did not evaluate in bounded memory (status %d)", status);
    /* the two windows decoded are written, in file order */
    size_t len;
    char *text = ts_read_text(hyps, &len);
    long lines = 0;
    for (char *p = text; (p = strchr(p, '\n')); p++) lines++;
    cr_assert_eq(lines, 2 * EVAL_WINDOW, "%ld lines", lines);
    const char *line = text;
    for (long i = 0; i < lines; i++) {
        cr_assert(strncmp(line, i % 3 ? "a\tx\t" : "b\ty\t", 4) == 0, "line %ld", i + 1);
        line = strchr(line, '\n') + 1;
    }
    free(text);
    ts_rm_tree(dir);
}

/* Windows are independent: evaluating a file of 4500 pairs (two windows) gives the lines and
 * the sums of evaluating its first 4096 pairs and its last 404 as two files. */
Test(tr_limits, eval_windows_match_separate_files) {
    char dir[64], ckpt[512], all[512], part[2][512];
    ts_tmp_dir(dir, sizeof dir, "limits");
    write_tiny_ckpt(ts_join(ckpt, dir, "tiny.npz"), 8);
    ts_join(all, dir, "all.tsv");
    ts_join(part[0], dir, "part0.tsv");
    ts_join(part[1], dir, "part1.tsv");
    FILE *fa = fopen(all, "w"), *fp[2] = {fopen(part[0], "w"), fopen(part[1], "w")};
    Rng r;
    rng_seed(&r, 9);
    for (int i = 0; i < 4500; i++) {
        char line[64];
        int k = 0, ns = 1 + (int)rng_below(&r, 3), nt = 1 + (int)rng_below(&r, 3);
        for (int w = 0; w < ns; w++)
            k += sprintf(line + k, "%s%c", w ? " " : "", 'a' + (int)rng_below(&r, 3));
        line[k++] = '\t';
        for (int w = 0; w < nt; w++)
            k += sprintf(line + k, "%s%c", w ? " " : "", 'x' + (int)rng_below(&r, 3));
        line[k++] = '\n';
        fwrite(line, 1, (size_t)k, fa);
        fwrite(line, 1, (size_t)k, fp[i >= EVAL_WINDOW]);
    }
    fclose(fa);
    fclose(fp[0]);
    fclose(fp[1]);
    Translator tr;
    cr_assert_eq(tr_load(&tr, ckpt), AG_OK, "%s", ag_last_error());
    char *text[3];
    size_t len[3];
    TxtScore s[3];
    double loss[3];
    const char *paths[3] = {all, part[0], part[1]};
    for (int k = 0; k < 3; k++) {
        TxtPairSet d;
        cr_assert_eq(txt_pairs_read(paths[k], &d, &tr.src, &tr.tgt, 0, 7), AG_OK, "%s",
                     ag_last_error());
        FILE *h = open_memstream(&text[k], &len[k]);
        cr_assert_eq(
            eval_seq2seq(&tr.model, tr.tape, &d, 0, 64, &s[k], &loss[k], h, &tr.src, &tr.tgt, NULL),
            1);
        fclose(h);
        txt_pairs_free(&d);
    }
    cr_assert_eq(len[0], len[1] + len[2]);
    cr_assert(memcmp(text[0], text[1], len[1]) == 0 &&
                  memcmp(text[0] + len[1], text[2], len[2]) == 0,
              "the lines of the two windows differ from those of the two files");
    cr_assert_eq(s[0].n_sent, 4500);
    cr_assert_eq(s[0].n_exact, s[1].n_exact + s[2].n_exact);
    cr_assert_eq(s[0].tok_correct, s[1].tok_correct + s[2].tok_correct);
    for (int n = 0; n < 4; n++) cr_assert_eq(s[0].match[n], s[1].match[n] + s[2].match[n]);
    cr_assert_eq(s[0].hyp_len, s[1].hyp_len + s[2].hyp_len);
    for (int k = 0; k < 3; k++) free(text[k]);
    tr_free(&tr);
    ts_rm_tree(dir);
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
        {{"--version"}, TR_EXIT_OK},
        {{"train", "--lr", "1e-320", "--schedule", "constant"}, TR_EXIT_OK}, /* a subnormal */
        {{"train", "--lr", "1e400"}, TR_EXIT_USAGE},
        {{"train", "--steps", "99999999999999999999"}, TR_EXIT_USAGE},
        {{"train", "--data", ""}, TR_EXIT_USAGE},
        {{"vocab", "--ckpt", "/nonexistent.npz"}, TR_EXIT_OK},
        {{"vocab", "--side", "both", "extra"}, TR_EXIT_USAGE},
        {{"translate", "ok", "caf\xe9"}, TR_EXIT_USAGE},
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
    ts_rm_tree(dir);
}
