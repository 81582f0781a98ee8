/* test_gpt_hostile.c: what a careless or hostile user hands attograd-gpt (and the other programs)
 * gets a clear error and exit 2, never an abort, a hang, a replaced device or silent loss:
 *   - a finite checkpoint whose values overflow at run time (sample, eval, cache, ablate, patch,
 *     detect, lens), refused naming the checkpoint and where the first NaN or inf appeared;
 *   - patch on read-only points ('*hook_scale', '*');
 *   - an --out (or a file a command writes) that is a device, a FIFO, a folder or a link: never
 *     replaced; a FIFO or a device as an input (train.bin, valid.bin, --prompts, --ckpt, ...):
 *     refused at once;
 *   - NUL bytes in --prompts, empty patterns in --hooks; paths of hundreds of bytes never cut;
 *   - a cache over --max-bytes refused with the figure it would need;
 * and a sweep of the four programs' commands (attograd-gpt, its lens commands,
 * attograd-translate, attograd-induction) over hostile inputs of each kind: exit 0 or 2, never a
 * signal, within the test's timeout.
 * Only the tests that could hang on a regression (a FIFO read, the sweep) carry a .timeout:
 * Criterion 2.4.1's parallel runner leaks 48 bytes (LeakSanitizer, make DEBUG=1 test) when
 * many tests with a timeout run side by side.
 * Not here: damaged files byte by byte (fuzz/, the regressions replayed by make test), the
 * translator's own faults (test_translate_faults.c, test_translate_limits.c). */
#define _DEFAULT_SOURCE /* mknod, makedev */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "attograd.h"
#include "files.h"

static void ok(const char *dir, const char *const *args) {
    char why[4500];
    cr_assert(ts_exits_with("AG_GPT_BIN", dir, args, 0, NULL, why, sizeof why), "%s", why);
}

/* exit 2, stderr naming each of the NULL-terminated strings */
static void refused(const char *dir, const char *const *args, const char *const *says) {
    char why[4500];
    cr_assert(ts_exits_with("AG_GPT_BIN", dir, args, 2, says, why, sizeof why), "%s", why);
}

static int exists(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0;
}

/* dir/data (a char tokenizer on a small text) and dir/run/last.npz: 2 layers, 2 heads, n_embd
 * 16, block 16, 20 steps */
static void tiny_model(char *dir, size_t n, const char *tag) {
    char txt[512], data[512], out[512];
    ts_tmp_dir(dir, n, tag);
    FILE *f = fopen(ts_join(txt, dir, "text.txt"), "w");
    cr_assert(f, "%s: %s", txt, strerror(errno));
    for (int i = 0; i < 300; i++) fprintf(f, "%s", i % 3 ? "abba cab.\n" : "bac abc!\n");
    fclose(f);
    ok(dir, (const char *[]){"prepare", "--input", txt, "--out", ts_join(data, dir, "data"), NULL});
    ok(dir, (const char *[]){"train",
                             "--data",
                             data,
                             "--out",
                             ts_join(out, dir, "run"),
                             "--n-layer",
                             "2",
                             "--n-head",
                             "2",
                             "--n-embd",
                             "16",
                             "--block-size",
                             "16",
                             "--batch-size",
                             "4",
                             "--max-iters",
                             "20",
                             "--warmup-iters",
                             "2",
                             "--threads",
                             "1",
                             NULL});
}

/* ---- 1. finite weights whose values overflow ---- */

Test(gpt_hostile, a_finite_checkpoint_that_overflows_is_refused_naming_it_and_where,
     .timeout = 300) {
    char dir[256], ck[512], bad[512], early[512], data[512], out[512];
    tiny_model(dir, sizeof dir, "hostile-inf");
    ts_join(ck, dir, "run/last.npz");
    ts_join(data, dir, "data");
    ts_join(out, dir, "o.npz");
    /* one LayerNorm weight near the largest finite value of the checkpoint's type (3e38 in a
     * float32 file, 1e308 in a float64 one): finite, but the logits overflow */
    ts_npz_overflow(ck, ts_join(bad, dir, "bad.npz"), "transformer.ln_f.weight");
    /* and in the first block: the attention patterns overflow too (detect reads those) */
    ts_npz_overflow(ck, ts_join(early, dir, "early.npz"), "transformer.h.0.ln_1.weight");
    const char *not_finite = "the model's values are not finite";
    refused(dir,
            (const char *[]){"sample", "--ckpt", bad, "--prompt", "ab", "--max-tokens", "3", NULL},
            (const char *[]){bad, not_finite, "logits", "it began at the forward of", "layernorm",
                             NULL});
    refused(dir, (const char *[]){"eval", "--ckpt", bad, "--data", data, NULL},
            (const char *[]){bad, not_finite, "loss of tokens", "it began at", NULL});
    const char *const lens_cmds[][16] = {
        {"cache", "--ckpt", "CK", "--prompt", "abba", "--out", "OUT", NULL},
        {"cache", "--ckpt", "CK", "--prompt", "abba", "--good", "a", "--bad", "b", "--out", "OUT",
         NULL},
        {"ablate", "--ckpt", "CK", "--prompt", "abba", "--out", "OUT", NULL},
        {"patch", "--ckpt", "CK", "--clean", "abba", "--corrupt", "baba", "--good", "a", "--bad",
         "b", "--out", "OUT", NULL},
        {"patch", "--ckpt", "CK", "--clean", "abba", "--corrupt", "baba", "--good", "a", "--bad",
         "b", "--attribution", "--out", "OUT", NULL},
        {"lens", "--ckpt", "CK", "--prompt", "abba", "--good", "a", "--bad", "b", "--out", "OUT",
         NULL},
        {"detect", "--ckpt", "CK", "--out", "OUT", NULL},
    };
    for (size_t k = 0; k < sizeof lens_cmds / sizeof lens_cmds[0]; k++) {
        const char *args[16];
        const char *which = strcmp(lens_cmds[k][0], "detect") == 0 ? early : bad;
        for (int i = 0; i < 16; i++) {
            args[i] = lens_cmds[k][i];
            if (args[i] && strcmp(args[i], "CK") == 0) args[i] = which;
            if (args[i] && strcmp(args[i], "OUT") == 0) args[i] = out;
            if (!args[i]) break;
        }
        refused(dir, args, (const char *[]){which, not_finite, "must be finite", NULL});
        cr_assert(!exists(out), "%s: %s was written", args[0], out);
    }
    /* the same commands on the unedited checkpoint still work */
    ok(dir, (const char *[]){"cache", "--ckpt", ck, "--prompt", "abba", "--out", out, NULL});
    ts_rm_tree(dir);
}

/* ---- 2. read-only points ---- */

Test(gpt_hostile, patch_refuses_read_only_points_as_ablate_does) {
    char dir[256], ck[512], out[512];
    tiny_model(dir, sizeof dir, "hostile-ro");
    ts_join(ck, dir, "run/last.npz");
    ts_join(out, dir, "p.npz");
    const char *hooks[] = {"*hook_scale", "*", "blocks.0.ln1.hook_scale"};
    for (size_t k = 0; k < sizeof hooks / sizeof hooks[0]; k++) {
        refused(dir,
                (const char *[]){"patch", "--ckpt", ck, "--clean", "abba", "--corrupt", "baba",
                                 "--good", "a", "--bad", "b", "--hook", hooks[k], "--out", out,
                                 NULL},
                (const char *[]){"--hook", "read-only", NULL});
        refused(dir,
                (const char *[]){"patch", "--ckpt", ck, "--clean", "abba", "--corrupt", "baba",
                                 "--good", "a", "--bad", "b", "--attribution", "--hook", hooks[k],
                                 "--out", out, NULL},
                (const char *[]){"--hook", "read-only", NULL});
        refused(dir,
                (const char *[]){"ablate", "--ckpt", ck, "--prompt", "abba", "--hook", hooks[k],
                                 "--out", out, NULL},
                (const char *[]){"--hook", "read-only", NULL});
    }
    ts_rm_tree(dir);
}

/* ---- 3. what stands where a file is written ---- */

/* The kinds of things that are not a regular file, made at path: 0 a FIFO, 1 a folder, 2 a link
 * to a regular file, 3 a character device (root only: mknod; returns 0 when it cannot) */
static int make_thing(const char *path, int kind, const char *dir) {
    char target[512];
    switch (kind) {
    case 0: return mkfifo(path, 0644) == 0;
    case 1: return mkdir(path, 0755) == 0;
    case 2:
        ts_write_text(ts_join(target, dir, "target.txt"), "kept\n");
        return symlink(target, path) == 0;
    default: return mknod(path, S_IFCHR | 0644, makedev(1, 3)) == 0; /* what /dev/null is */
    }
}

static const char *const kind_says[] = {"(a FIFO)", "(a folder)", "(a symbolic link)",
                                        "(a character device)"};

static int same_kind(const char *path, int kind) {
    struct stat st;
    if (lstat(path, &st) != 0) return 0;
    return kind == 0   ? S_ISFIFO(st.st_mode)
           : kind == 1 ? S_ISDIR(st.st_mode)
           : kind == 2 ? S_ISLNK(st.st_mode)
                       : S_ISCHR(st.st_mode);
}

Test(gpt_hostile, a_device_fifo_folder_or_link_is_never_replaced) {
    char dir[256], ck[512], out[512], data[512], target[512];
    tiny_model(dir, sizeof dir, "hostile-out");
    ts_join(ck, dir, "run/last.npz");
    ts_join(data, dir, "data");
    ts_join(out, dir, "thing");
    const char *const cmds[][12] = {
        {"cache", "--ckpt", "CK", "--prompt", "abba", "--out", "OUT", NULL},
        {"detect", "--ckpt", "CK", "--out", "OUT", NULL},
        {"export", "--ckpt", "CK", "--out", "OUT", NULL},
        {"ablate", "--ckpt", "CK", "--prompt", "abba", "--out", "OUT", NULL},
        {"lens", "--ckpt", "CK", "--prompt", "abba", "--token", "a", "--out", "OUT", NULL},
    };
    for (int kind = 0; kind < 4; kind++)
        for (size_t k = 0; k < sizeof cmds / sizeof cmds[0]; k++) {
            ts_rm_tree(out);
            unlink(out);
            if (!make_thing(out, kind, dir)) {
                cr_assert(kind == 3 && geteuid() != 0, "%s: cannot make kind %d: %s", out, kind,
                          strerror(errno));
                continue; /* a device needs root: the other kinds still ran */
            }
            const char *args[12];
            for (int i = 0; i < 12; i++) {
                args[i] = cmds[k][i];
                if (args[i] && strcmp(args[i], "CK") == 0) args[i] = ck;
                if (args[i] && strcmp(args[i], "OUT") == 0) args[i] = out;
                if (!args[i]) break;
            }
            refused(dir, args, (const char *[]){out, kind_says[kind], "not replaced", NULL});
            cr_assert(same_kind(out, kind), "%s: %s is no longer of kind %d", args[0], out, kind);
        }
    char *kept = ts_read_text(ts_join(target, dir, "target.txt"), NULL);
    cr_assert_str_eq(kept, "kept\n");
    free(kept);
    /* prepare: a FIFO where train.bin goes; a link where the tokenizer goes */
    char txt[512], d2[512], p[512];
    ts_join(txt, dir, "text.txt");
    ts_join(d2, dir, "d2");
    cr_assert_eq(mkdir(d2, 0755), 0);
    cr_assert(make_thing(ts_join(p, d2, "train.bin"), 0, dir));
    refused(dir, (const char *[]){"prepare", "--input", txt, "--out", d2, NULL},
            (const char *[]){"train.bin", "(a FIFO)", "not replaced", NULL});
    cr_assert(same_kind(p, 0));
    unlink(p);
    unlink(ts_join(p, d2, "tokenizer")); /* saved before train.bin was refused */
    cr_assert(make_thing(p, 2, dir));
    refused(dir, (const char *[]){"prepare", "--input", txt, "--out", d2, NULL},
            (const char *[]){"tokenizer", "(a symbolic link)", "not replaced", NULL});
    cr_assert(same_kind(p, 2));
    ts_rm_tree(dir);
}

/* ---- 4. a FIFO or a device as an input ---- */

Test(gpt_hostile, a_fifo_or_device_as_input_is_refused_at_once, .timeout = 120) {
    char dir[256], ck[512], data[512], d2[512], p[512], fifo[512], out[512];
    tiny_model(dir, sizeof dir, "hostile-in");
    ts_join(ck, dir, "run/last.npz");
    ts_join(data, dir, "data");
    ts_join(out, dir, "o.npz");
    cr_assert_eq(mkfifo(ts_join(fifo, dir, "fifo"), 0644), 0);
    const char *names[] = {"train.bin", "valid.bin", "tokenizer"};
    for (int k = 0; k < 3; k++) { /* DIR/<name> a FIFO, the others copied */
        char cmd[2200];
        snprintf(cmd, sizeof cmd, "rm -rf %s/d2 && mkdir %s/d2 && cp %s/* %s/d2/", dir, dir, data,
                 dir);
        cr_assert(system(cmd) == 0);
        ts_join(d2, dir, "d2");
        unlink(ts_join(p, d2, names[k]));
        cr_assert_eq(mkfifo(p, 0644), 0);
        refused(dir,
                (const char *[]){"train", "--data", d2, "--out", ts_join(out, dir, "r2"),
                                 "--max-iters", "2", NULL},
                (const char *[]){names[k], "(a FIFO)", NULL});
        if (k == 1)
            refused(dir, (const char *[]){"eval", "--ckpt", ck, "--data", d2, NULL},
                    (const char *[]){names[k], "(a FIFO)", NULL});
    }
    refused(dir, (const char *[]){"sample", "--ckpt", fifo, "--prompt", "ab", NULL},
            (const char *[]){fifo, "(a FIFO)", NULL});
    refused(dir, (const char *[]){"cache", "--ckpt", ck, "--prompts", fifo, "--out", out, NULL},
            (const char *[]){fifo, "(a FIFO)", NULL});
    refused(dir, (const char *[]){"prepare", "--input", fifo, "--out", d2, NULL},
            (const char *[]){fifo, "(a FIFO)", NULL});
    refused(dir,
            (const char *[]){"cache", "--ckpt", ck, "--prompts", "/dev/zero", "--out", out, NULL},
            (const char *[]){"/dev/zero", "(a character device)", NULL});
    refused(dir, (const char *[]){"eval", "--ckpt", "/dev/zero", "--data", data, NULL},
            (const char *[]){"/dev/zero", "(a character device)", NULL});
    ts_rm_tree(dir);
}

/* ---- 5. NUL bytes, empty patterns ---- */

Test(gpt_hostile, nul_bytes_and_empty_patterns_are_errors_naming_the_file_or_flag) {
    char dir[256], ck[512], out[512], prompts[512];
    tiny_model(dir, sizeof dir, "hostile-nul");
    ts_join(ck, dir, "run/last.npz");
    ts_join(out, dir, "c.npz");
    ts_write_bytes(ts_join(prompts, dir, "p.txt"), "abba\nba\0b\nabab\n", 15);
    refused(dir, (const char *[]){"cache", "--ckpt", ck, "--prompts", prompts, "--out", out, NULL},
            (const char *[]){"p.txt: line 2", "NUL byte", NULL});
    refused(dir, (const char *[]){"detect", "--ckpt", ck, "--prompts", prompts, "--out", out, NULL},
            (const char *[]){"p.txt: line 2", "NUL byte", NULL});
    const char *lists[] = {",", "*,", ",*", "hook_embed,,blocks.0.hook_resid_pre"};
    for (size_t k = 0; k < sizeof lists / sizeof lists[0]; k++)
        refused(dir,
                (const char *[]){"cache", "--ckpt", ck, "--prompt", "abba", "--hooks", lists[k],
                                 "--out", out, NULL},
                (const char *[]){"--hooks", lists[k], "is empty", NULL});
    cr_assert(!exists(out));
    ok(dir, (const char *[]){"cache", "--ckpt", ck, "--prompt", "abba", "--hooks",
                             "hook_embed,blocks.0.hook_resid_pre", "--out", out, NULL});
    ts_rm_tree(dir);
}

/* ---- 6. long paths ---- */

/* dir/<a run of c, len bytes>/..., at least total bytes in all, made */
static void long_path(char *buf, size_t n, const char *dir, size_t total) {
    snprintf(buf, n, "%s", dir);
    char c = 'a';
    while (strlen(buf) < total) {
        size_t len = strlen(buf), part = total - len > 200 ? 200 : total - len;
        if (part < 2) part = 2;
        buf[len] = '/';
        memset(buf + len + 1, c++, part - 1);
        buf[len + part] = 0;
    }
}

Test(gpt_hostile, paths_of_hundreds_of_bytes_are_never_cut) {
    char dir[256], txt[512], out[2048], p[2200];
    ts_tmp_dir(dir, sizeof dir, "hostile-long");
    FILE *f = fopen(ts_join(txt, dir, "text.txt"), "w");
    for (int i = 0; i < 300; i++) fprintf(f, "abba cab.\n");
    fclose(f);
    for (size_t total = 690; total <= 1100; total += 410) {
        long_path(out, sizeof out, dir, total);
        ok(dir, (const char *[]){"prepare", "--input", txt, "--out", out, NULL});
        const char *names[] = {"tokenizer", "train.bin", "valid.bin"};
        for (int k = 0; k < 3; k++) {
            snprintf(p, sizeof p, "%s/%s", out, names[k]);
            cr_assert(exists(p), "%s is missing (a cut name instead?)", p);
        }
        snprintf(p, sizeof p, "%s/run", out);
        ok(dir, (const char *[]){"train", "--data",       out, "--out",       p,   "--n-layer",
                                 "1",     "--n-head",     "1", "--n-embd",    "8", "--block-size",
                                 "8",     "--batch-size", "2", "--max-iters", "2", "--warmup-iters",
                                 "1",     "--threads",    "1", NULL});
        char ck[2300];
        snprintf(ck, sizeof ck, "%s/last.npz", p);
        cr_assert(exists(ck), "%s is missing", ck);
        ok(dir, (const char *[]){"eval", "--ckpt", ck, "--data", out, NULL});
        char exp[2300], json[2300];
        snprintf(exp, sizeof exp, "%s/tl.npz", out);
        snprintf(json, sizeof json, "%s/tl.json", out);
        ok(dir, (const char *[]){"export", "--ckpt", ck, "--out", exp, NULL});
        cr_assert(exists(exp) && exists(json), "%s or its .json is missing", exp);
    }
    ts_rm_tree(dir);
}

/* ---- 7. a cache's memory ---- */

Test(gpt_hostile, a_cache_over_max_bytes_is_refused_with_what_it_would_need) {
    char dir[256], ck[512], out[512], prompts[512];
    tiny_model(dir, sizeof dir, "hostile-mem");
    ts_join(ck, dir, "run/last.npz");
    ts_join(out, dir, "c.npz");
    FILE *f = fopen(ts_join(prompts, dir, "rows.txt"), "w");
    for (int i = 0; i < 2000; i++) fprintf(f, "%s\n", i % 2 ? "abba" : "baab");
    fclose(f);
    refused(dir,
            (const char *[]){"cache", "--ckpt", ck, "--prompts", prompts, "--max-bytes", "100000",
                             "--out", out, NULL},
            (const char *[]){"a cache of 2000 row(s) x 4 tokens needs about",
                             "over --max-bytes 100000", NULL});
    cr_assert(!exists(out));
    ok(dir, (const char *[]){"cache", "--ckpt", ck, "--prompts", prompts, "--out", out, NULL});
    ts_rm_tree(dir);
}

/* ---- the sweep: every command of the four programs, hostile inputs of each kind ---- */

typedef struct {
    const char *bin_var;
    const char *args[32]; /* "IN": the hostile input; "CK": a good checkpoint; "OUT": an output */
} Cmd;

static int run_code(const char *dir, const char *bin_var, const char *const *args) {
    TsRun r = ts_finish(dir, ts_start_env(bin_var, dir, args, NULL));
    int code = r.code;
    if (code != 0 && code != 2)
        cr_log_error("%s %s: exit %d\nstderr: %s", bin_var, args[0], code, r.err);
    ts_run_free(&r);
    return code;
}

Test(hostile_sweep, every_command_exits_0_or_2_on_hostile_files_and_paths, .timeout = 1200) {
    char dir[256], ck[512], data[512], out[512];
    tiny_model(dir, sizeof dir, "hostile-sweep");
    ts_join(ck, dir, "run/last.npz");
    ts_join(data, dir, "data");
    /* the hostile inputs */
    char in[10][2100];
    ts_join(in[0], dir, "missing.npz");
    ts_join(in[1], dir, "empty");
    ts_write_text(in[1], "");
    ts_join(in[2], dir, "folder");
    cr_assert_eq(mkdir(in[2], 0755), 0);
    ts_join(in[3], dir, "fifo");
    cr_assert_eq(mkfifo(in[3], 0644), 0);
    /* a character device: as root a node of /dev/zero's kind in the test's folder (were a
     * writer to replace it, no device of the machine would be lost); otherwise /dev/zero
     * itself, which an ordinary user cannot replace */
    ts_join(in[4], dir, "zero");
    if (mknod(in[4], S_IFCHR | 0644, makedev(1, 5)) != 0)
        snprintf(in[4], sizeof in[4], "/dev/zero");
    ts_join(in[5], dir, "garbage");
    {
        unsigned char g[4096];
        Rng rng;
        rng_seed(&rng, 7);
        for (size_t i = 0; i < sizeof g; i++) g[i] = (unsigned char)(rng_u64(&rng) >> 56);
        ts_write_bytes(in[5], g, sizeof g);
    }
    ts_join(in[6], dir, "half.npz"); /* the first half of a checkpoint */
    {
        size_t len;
        char *b = ts_read_text(ck, &len);
        ts_write_bytes(in[6], b, len / 2);
        free(b);
    }
    ts_join(in[7], dir, "text.txt"); /* a text where a checkpoint or a shard is expected */
    ts_join(in[8], dir, "link");
    cr_assert_eq(symlink(in[3], in[8]), 0);    /* a link to the FIFO */
    long_path(in[9], sizeof in[9], dir, 2000); /* a path of 2000 bytes, not there */
    const int n_in = 10;
    const Cmd cmds[] = {
        {"AG_GPT_BIN", {"prepare", "--input", "IN", "--out", "OUT", NULL}},
        {"AG_GPT_BIN",
         {"prepare", "--input", "IN", "--tokenizer", "bpe", "--vocab", "260", "--out", "OUT",
          NULL}},
        {"AG_GPT_BIN",
         {"train", "--data", "IN", "--out", "OUT", "--max-iters", "2", "--warmup-iters", "1",
          NULL}},
        {"AG_GPT_BIN",
         {"train", "--data", "DATA", "--out", "IN", "--max-iters", "2", "--warmup-iters", "1",
          "--n-layer", "1", "--n-embd", "8", "--n-head", "1", "--block-size", "8", NULL}},
        {"AG_GPT_BIN", {"sample", "--ckpt", "IN", "--prompt", "ab", "--max-tokens", "2", NULL}},
        {"AG_GPT_BIN", {"eval", "--ckpt", "IN", "--data", "DATA", NULL}},
        {"AG_GPT_BIN", {"eval", "--ckpt", "CK", "--data", "IN", NULL}},
        {"AG_GPT_BIN", {"cache", "--ckpt", "IN", "--prompt", "ab", "--out", "OUT", NULL}},
        {"AG_GPT_BIN", {"cache", "--ckpt", "CK", "--prompts", "IN", "--out", "OUT", NULL}},
        {"AG_GPT_BIN", {"cache", "--ckpt", "CK", "--prompt", "ab", "--out", "IN", NULL}},
        {"AG_GPT_BIN", {"ablate", "--ckpt", "IN", "--prompt", "ab", "--out", "OUT", NULL}},
        {"AG_GPT_BIN", {"ablate", "--ckpt", "CK", "--prompts", "IN", "--out", "OUT", NULL}},
        {"AG_GPT_BIN",
         {"patch", "--ckpt", "IN", "--clean", "ab", "--corrupt", "ba", "--good", "a", "--bad", "b",
          "--out", "OUT", NULL}},
        {"AG_GPT_BIN",
         {"patch", "--ckpt", "CK", "--clean", "ab", "--corrupt", "ba", "--good", "a", "--bad", "b",
          "--out", "IN", NULL}},
        {"AG_GPT_BIN", {"detect", "--ckpt", "IN", "--out", "OUT", NULL}},
        {"AG_GPT_BIN", {"detect", "--ckpt", "CK", "--prompts", "IN", "--out", "OUT", NULL}},
        {"AG_GPT_BIN",
         {"lens", "--ckpt", "IN", "--prompt", "ab", "--token", "a", "--out", "OUT", NULL}},
        {"AG_GPT_BIN",
         {"lens", "--ckpt", "CK", "--prompts", "IN", "--token", "a", "--out", "OUT", NULL}},
        {"AG_GPT_BIN", {"export", "--ckpt", "IN", "--out", "OUT", NULL}},
        {"AG_GPT_BIN", {"export", "--ckpt", "CK", "--out", "IN", NULL}},
        {"AG_TRANSLATE_BIN", {"eval", "IN", "--ckpt", "IN", NULL}},
        {"AG_TRANSLATE_BIN", {"translate", "--ckpt", "IN", "a b", NULL}},
        {"AG_TRANSLATE_BIN", {"vocab", "--ckpt", "IN", NULL}},
        {"AG_TRANSLATE_BIN", {"attention", "--ckpt", "IN", "--out", "OUT", "a b", NULL}},
        {"AG_TRANSLATE_BIN", {"heads", "--ckpt", "IN", "--out", "OUT", "--data", "IN", NULL}},
        {"AG_TRANSLATE_BIN", {"train", "--train", "IN", "--out", "OUT", "--steps", "2", NULL}},
        {"AG_TRANSLATE_BIN", {"cache", "--ckpt", "IN", "--out", "OUT", "a b", NULL}},
        {"AG_TRANSLATE_BIN", {"detect", "--ckpt", "IN", "--out", "OUT", NULL}},
        {"AG_TRANSLATE_BIN", {"lens", "--ckpt", "IN", "--out", "OUT", "a b", NULL}},
        {"AG_INDUCTION_BIN",
         {"--out",
          "IN",
          "--steps",
          "2",
          "--every",
          "1",
          "--batch",
          "2",
          "--eval-batch",
          "2",
          "--vocab",
          "8",
          "--ctx",
          "8",
          "--d-model",
          "8",
          "--heads",
          "1",
          "--min-prefix",
          "2",
          "--max-prefix",
          "3",
          "--no-control",
          "--quiet",
          NULL}},
    };
    int runs = 0, bad = 0;
    for (size_t c = 0; c < sizeof cmds / sizeof cmds[0]; c++)
        for (int k = 0; k < n_in; k++) {
            const char *args[32];
            snprintf(out, sizeof out, "%s/out%zu_%d.npz", dir, c, k);
            for (int i = 0; i < 32; i++) {
                args[i] = cmds[c].args[i];
                if (!args[i]) break;
                if (strcmp(args[i], "IN") == 0)
                    args[i] = in[k];
                else if (strcmp(args[i], "CK") == 0)
                    args[i] = ck;
                else if (strcmp(args[i], "DATA") == 0)
                    args[i] = data;
                else if (strcmp(args[i], "OUT") == 0)
                    args[i] = out;
            }
            int code = run_code(dir, cmds[c].bin_var, args);
            runs++;
            if (code != 0 && code != 2) {
                bad++;
                cr_log_error("  (input %d: %.80s)", k, in[k]);
            }
        }
    /* the hostile inputs are as they were: nothing replaced them */
    struct stat st;
    cr_assert(lstat(in[3], &st) == 0 && S_ISFIFO(st.st_mode), "the FIFO was replaced");
    cr_assert(lstat(in[8], &st) == 0 && S_ISLNK(st.st_mode), "the link was replaced");
    cr_assert(lstat(in[2], &st) == 0 && S_ISDIR(st.st_mode), "the folder was replaced");
    cr_assert(lstat(in[4], &st) == 0 && S_ISCHR(st.st_mode), "the device was replaced");
    cr_assert_eq(bad, 0, "%d of %d runs exited with neither 0 nor 2 (see above)", bad, runs);
    ts_rm_tree(dir);
}

/* --model DIR on damaged Hugging Face folders: exit 2 naming the folder, the key or tensor and
 * the reason, for every subcommand that takes it; a folder nothing damaged loads */
Test(gpt_hostile, a_damaged_hf_folder_exits_2_naming_what_is_wrong) {
    char dir[256], ck[512], hf[512], p[512], data[512];
    tiny_model(dir, sizeof dir, "gpt-hostile-hf");
    ts_join(ck, dir, "run/last.npz");
    ts_join(hf, dir, "hf");
    ts_join(data, dir, "data");
    ok(dir, (const char *[]){"export", "--ckpt", ck, "--format", "hf", "--out", hf, NULL});
    ok(dir, (const char *[]){"eval", "--model", hf, "--data", data, NULL});
    size_t n;
    char *config = ts_read_text(ts_join(p, hf, "config.json"), &n);
    /* a value attograd cannot compute */
    char *bad = malloc(n + 64), *at = strstr(config, "\"activation_function\": \"gelu\"");
    cr_assert(at, "%s", config);
    sprintf(bad, "%.*s\"activation_function\": \"silu\"%s", (int)(at - config), config,
            at + strlen("\"activation_function\": \"gelu\""));
    ts_write_text(p, bad);
    char out[512];
    ts_join(out, dir, "o.npz");
    const char *const *cmds[] = {
        (const char *[]){"sample", "--model", hf, "--prompt", "abba", NULL},
        (const char *[]){"eval", "--model", hf, "--data", data, NULL},
        (const char *[]){"cache", "--model", hf, "--prompt", "abba", "--out", out, NULL},
        (const char *[]){"ablate", "--model", hf, "--prompt", "abba", "--out", out, NULL},
        (const char *[]){"patch", "--model", hf, "--clean", "ab", "--corrupt", "ba", "--out", out,
                         NULL},
        (const char *[]){"detect", "--model", hf, "--prompt", "abba", "--out", out, NULL},
        (const char *[]){"lens", "--model", hf, "--prompt", "abba", "--token", "a", "--out", out,
                         NULL},
        (const char *[]){"export", "--model", hf, "--out", out, NULL}};
    for (size_t k = 0; k < sizeof cmds / sizeof *cmds; k++)
        refused(dir, cmds[k],
                (const char *[]){"config.json", "\"activation_function\": \"silu\"", NULL});
    /* a weight missing: another folder's config over these weights */
    at = strstr(config, "\"n_layer\": 2");
    cr_assert(at, "%s", config);
    sprintf(bad, "%.*s\"n_layer\": 3%s", (int)(at - config), config, at + strlen("\"n_layer\": 2"));
    ts_write_text(p, bad);
    refused(dir, (const char *[]){"sample", "--model", hf, "--prompt", "a", NULL},
            (const char *[]){"tensor 'transformer.h.2.ln_1.weight' is missing", NULL});
    /* the weights file truncated */
    ts_write_text(p, config);
    char w[512];
    size_t wn;
    char *bytes = ts_slurp(ts_join(w, hf, "model.safetensors"), &wn);
    ts_write_bytes(w, bytes, wn - 5);
    refused(dir, (const char *[]){"sample", "--model", hf, "--prompt", "a", NULL},
            (const char *[]){"model.safetensors", "truncated", NULL});
    free(bytes);
    free(bad);
    free(config);
    ts_rm_tree(dir);
}
