/* test_cmd.c: the lens commands' runs for any model (src/lens/cmd.c) on a small GPT: the metric
 * of --metric (a GPT row's next tokens, a seq2seq row's given ones, logit-diff through the
 * program's token callback), cache, ablate, patch and the logit lens each writing what the
 * sweeps they wrap compute (read back, to the bit), the refusals each names (--hooks, --hook,
 * --corrupt, --pos, the program's token flag), the exit codes of lens_cmd_end. And each command
 * from its flags to its exit code (commands.c): detect's scores the detectors' to the bit for a
 * GPT and a seq2seq model (lens_cmd_detect); lens_cmd_run on a program of callbacks that log
 * their calls: cache (its size check first, refusing before anything is written), ablate (a
 * GPT's --positions checked against its rows, --mode by name), patch (both rows required, read
 * by the program; --by by name), detect and the logit lens (--token, or --good and --bad), and
 * a refused parse runs nothing.
 * Not here: the outputs' tables and heatmaps (test_report.c), the commands on trained
 * checkpoints (tests/examples/test_*_lens_cli.c). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attograd.h"
#include "files.h"
#include "models.h"

enum { B = 2, T = 5 };

static const GptConfig tiny = {
    .vocab_size = 11, .block_size = 6, .n_layer = 2, .n_head = 2, .n_embd = 8};

/* "t<id>" (a LensTokenText) */
static char *text_of(const void *ctx, NnHookStack stack, int id, int label) {
    (void)ctx, (void)stack, (void)label;
    char *s = malloc(16);
    snprintf(s, 16, "t%d", id);
    return s;
}

/* "t<id>" back to id (a LensTokenFn): anything else is refused naming --flag */
static int one_token(const void *ctx, const char *text, const char *flag, int *id) {
    (void)ctx;
    if (text[0] != 't' || sscanf(text + 1, "%d", id) != 1)
        return ag_fail(AG_ERR_ARG, "--%s '%s': not a token", flag, text);
    return AG_OK;
}

/* a command on g's model and rows (a copy of g->ids) */
static LensCmd cmd_of(TsGpt *g) {
    LensCmd c = {"prog",
                 "cmd",
                 "model.npz",
                 g->t,
                 lens_gpt(&g->m),
                 lens_readout_gpt(&g->m),
                 (LensReport){"prog", NULL, text_of, NULL},
                 one_token,
                 {0}};
    c.r.ids = malloc(B * T * sizeof(int));
    memcpy(c.r.ids, g->ids, B * T * sizeof(int));
    c.r.B = B, c.r.T = T;
    return c;
}

/* each test's model, command on it and fresh folder (the suite's .init and .fini) */
static TsGpt env;
static LensCmd cmd;
static char dir[256], out[512];
static void setup(void) {
    ts_tmp_dir(dir, sizeof dir, "lenscmd");
    env = ts_gpt_new(&tiny, 3, 0.2, 0, B, T);
    cmd = cmd_of(&env);
}
static void teardown(void) {
    lens_cmd_end(&cmd, AG_OK);
    ts_gpt_free(&env);
}

/* e holds the bytes of s */
static int holds(const NpzEntry *e, const char *s) {
    size_t n = strlen(s);
    for (size_t i = 0; i + n <= e->nbytes; i++)
        if (!memcmp((const char *)e->data + i, s, n)) return 1;
    return 0;
}

static const NpzEntry *entry(const NpzFile *f, const char *name) {
    const NpzEntry *e = npz_find(f, name);
    cr_assert(e, "%s: no %s", f->path, name);
    return e;
}

Test(lens_cmd, the_metric_of_a_gpts_rows_and_of_given_next_tokens, .init = setup,
     .fini = teardown) {
    LensOwnedMetric m;
    cr_assert_eq(lens_cmd_metric(&cmd, &cmd.r, "loss", NULL, NULL, -1, &m), AG_OK);
    cr_assert_eq(m.mt.kind, LENS_LOSS);
    for (int i = 0; i < B * T; i++)
        cr_assert_eq(m.mt.targets[i], i % T + 1 < T ? env.ids[i + 1] : -1, "target %d", i);
    lens_owned_metric_free(&m);
    LensRows given = {.ids = cmd.r.ids, .next = (int[B * T]){0}, .B = B, .T = T};
    cr_assert_eq(lens_cmd_metric(&cmd, &given, "loss", NULL, NULL, -1, &m), AG_OK);
    cr_assert_eq(m.mt.targets, given.next, "a seq2seq row's targets are its own");
    lens_owned_metric_free(&m);
    cr_assert_eq(lens_cmd_metric(&cmd, &cmd.r, "logit-diff", "t3", "t4", 2, &m), AG_OK);
    cr_assert_eq(m.good[0], 3);
    cr_assert_eq(m.bad[B - 1], 4);
    lens_owned_metric_free(&m);
    cr_assert_eq(lens_cmd_metric(&cmd, &cmd.r, "logit-diff", "x", "t4", -1, &m), AG_ERR_ARG);
    cr_assert(strstr(ag_last_error(), "--good 'x'"), "%s", ag_last_error());
    lens_owned_metric_free(&m);
    LensRows one = {.ids = cmd.r.ids, .B = 1, .T = 1};
    cr_assert_eq(lens_cmd_metric(&cmd, &one, "loss", NULL, NULL, -1, &m), AG_ERR_ARG);
    cr_assert(strstr(ag_last_error(), "2 tokens or more"), "%s", ag_last_error());
    lens_owned_metric_free(&m);
    cr_assert_eq(lens_cmd_end(&cmd, AG_OK), 0);
    cr_assert_null(cmd.r.ids, "the rows are freed");
}

Test(lens_cmd, cache_writes_the_points_and_the_rows, .init = setup, .fini = teardown) {
    LensRunInfo info = {.cfg = &env.m.cfg};
    cr_assert_eq(lens_cmd_cache(&cmd, "blocks.*.hook_resid_pre,hook_embed", NULL, info,
                                ts_join(out, dir, "cmd.npz")),
                 AG_OK, "%s", ag_last_error());
    NpzFile *f;
    cr_assert_eq(npz_read(out, &f, NULL), AG_OK, "%s", ag_last_error());
    cr_assert_eq(entry(f, "blocks.1.hook_resid_pre")->shape[2], tiny.n_embd);
    cr_assert_eq(((const int32_t *)entry(f, "tokens")->data)[3], env.ids[3]);
    const NpzEntry *strs = entry(f, "token_strs");
    char want[16];
    snprintf(want, sizeof want, "\"t%d\"", env.ids[0]);
    cr_assert(holds(strs, want), "the program's texts");
    cr_assert_null(npz_find(f, "blocks.0.attn.hook_z"), "only the points asked for");
    npz_free(f);
    cr_assert_eq(lens_cmd_cache(&cmd, "nope", NULL, info, out), AG_ERR_ARG);
    cr_assert(strstr(ag_last_error(), "--hooks"), "%s", ag_last_error());
}

Test(lens_cmd, ablate_and_patch_write_the_sweeps_values, .init = setup, .fini = teardown) {
    LensOwnedMetric m;
    cr_assert_eq(lens_cmd_metric(&cmd, &cmd.r, "loss", NULL, NULL, -1, &m), AG_OK);
    const char *hook = "blocks.*.attn.hook_z";
    cr_assert_eq(
        lens_cmd_ablate(&cmd, hook, LENS_ZERO, NULL, 0, &m.mt, "loss", ts_join(out, dir, "a.npz")),
        AG_OK, "%s", ag_last_error());
    LensAblateTable a;
    LensTokens in = {env.ids, B, T};
    cr_assert_eq(lens_ablate_sweep_model(env.t, &cmd.lm, &in, hook, LENS_ZERO, NULL, 0, &m.mt, &a),
                 AG_OK);
    NpzFile *f;
    cr_assert_eq(npz_read(out, &f, NULL), AG_OK, "%s", ag_last_error());
    cr_assert(!memcmp(entry(f, "values")->data, a.values, 2 * tiny.n_head * sizeof(double)),
              "the sweep's values");
    npz_free(f);
    lens_ablate_table_free(&a);
    cr_assert_eq(lens_cmd_ablate(&cmd, "nope", LENS_ZERO, NULL, 0, &m.mt, "loss", out), AG_ERR_ARG);
    cr_assert(!strncmp(ag_last_error(), "--hook: ", 8), "%s", ag_last_error());
    /* patch: one clean row into one corrupted row */
    LensRows clean = cmd.r, corrupt = {.ids = env.corrupt, .B = 1, .T = T};
    cmd.r.B = 1;
    lens_owned_metric_free(&m);
    cr_assert_eq(lens_cmd_metric(&cmd, &cmd.r, "loss", NULL, NULL, -1, &m), AG_OK);
    hook = "blocks.*.hook_resid_pre";
    cr_assert_eq(lens_cmd_patch(&cmd, &corrupt, hook, LENS_BY_POS, 0, &m.mt, "loss",
                                ts_join(out, dir, "p.npz")),
                 AG_OK, "%s", ag_last_error());
    LensSweep s;
    cr_assert_eq(
        lens_patch_sweep(env.t, &env.m, env.ids, env.corrupt, 1, T, hook, LENS_BY_POS, &m.mt, &s),
        AG_OK);
    cr_assert_eq(npz_read(out, &f, NULL), AG_OK, "%s", ag_last_error());
    cr_assert(!memcmp(entry(f, "values")->data, s.values, 2 * T * sizeof(double)));
    npz_free(f);
    lens_sweep_free(&s);
    corrupt.T = T - 1;
    cr_assert_eq(lens_cmd_patch(&cmd, &corrupt, hook, LENS_BY_POS, 0, &m.mt, "loss", out),
                 AG_ERR_ARG);
    cr_assert(strstr(ag_last_error(), "--corrupt has 4 tokens, --clean 5"), "%s", ag_last_error());
    lens_owned_metric_free(&m);
    cmd.r = clean;
}

Test(lens_cmd, the_logit_lens_writes_the_runs_metric_and_names_its_refusals, .init = setup,
     .fini = teardown) {
    cr_assert_eq(lens_cmd_logit(&cmd, "t2", "token", "t5", -1, ts_join(out, dir, "l.npz")), AG_OK,
                 "%s", ag_last_error());
    LensLogit ll;
    int good[B] = {2, 2}, bad[B] = {5, 5};
    cr_assert_eq(lens_logit_run(env.t, &env.m, env.ids, B, T, good, bad, -1, &ll), AG_OK);
    NpzFile *f;
    cr_assert_eq(npz_read(out, &f, NULL), AG_OK, "%s", ag_last_error());
    cr_assert(!memcmp(entry(f, "metric")->data, ll.metric, B * T * sizeof(double)));
    npz_free(f);
    lens_logit_free(&ll);
    cr_assert_eq(lens_cmd_logit(&cmd, "x", "token", NULL, -1, out), AG_ERR_ARG);
    cr_assert(strstr(ag_last_error(), "--token 'x'"), "%s", ag_last_error());
    cr_assert_eq(lens_cmd_logit(&cmd, "t2", "token", NULL, T, out), AG_ERR_ARG);
    cr_assert_str_eq(ag_last_error(), "--pos 5: outside the rows' 5 positions");
}

Test(lens_cmd, the_end_gives_the_exit_code_and_the_message) {
    cmd = (LensCmd){.prog = "prog", .name = "cmd", .ckpt = "m.npz"};
    ag_fail(AG_ERR_RANGE, "x[0] = nan");
    cr_assert_eq(lens_cmd_not_finite(&cmd, AG_ERR_RANGE), AG_ERR_RANGE);
    cr_assert(strstr(ag_last_error(), "m.npz: the model's values are not finite"), "%s",
              ag_last_error());
    cr_assert(strstr(ag_last_error(), "x[0] = nan"), "%s", ag_last_error());
    cr_assert_eq(lens_cmd_end(&cmd, AG_OK), 0);
    cr_assert_eq(lens_cmd_end(&cmd, AG_ERR_ARG), 2);
    cr_assert_eq(lens_cmd_end(&cmd, AG_ERR_IO), 2);
    cr_assert_eq(lens_cmd_end(&cmd, AG_ERR_NOMEM), 1);
    LensRows r = {.ids = malloc(4), .src = malloc(4), .B = 1, .S = 1, .T = 1};
    lens_rows_free(&r);
    cr_assert(!r.ids && !r.src && !r.B && !r.T, "zeroed");
    lens_rows_free(NULL);
}

/* lens_cmd_parse: the table read (a positional kept, given set), a refusal naming the flag, and
 * --help's one layout on stdout */
Test(lens_cmd, parse_reads_the_table_and_prints_the_one_help_layout) {
    int n = 3;
    const char *file = "x.npz";
    Flag fl[] = {{"n", FLAG_INT, &n, "N", "a number", 1, 9, NULL, 0},
                 {"out", FLAG_PATH, &file, "FILE", "the .npz to write", 0, 0, NULL, 0}};
    char *pos[4];
    int npos = 0;
    cr_assert_eq(lens_cmd_parse("prog", "cmd", "[flags] TEXT", "what it does", fl, 2, 3,
                                (char *[]){"--n=5", "a b", "--out", NULL}, pos, &npos),
                 AG_ERR_ARG);
    cr_assert(strstr(ag_last_error(), "--out"), "%s", ag_last_error());
    fl[0].given = fl[1].given = 0; /* a table starts at 0 */
    cr_assert_eq(lens_cmd_parse("prog", "cmd", "[flags] TEXT", "what it does", fl, 2, 2,
                                (char *[]){"--n=5", "a b", NULL}, pos, &npos),
                 AG_OK, "%s", ag_last_error());
    cr_assert(n == 5 && fl[0].given && !fl[1].given && npos == 1 && strcmp(pos[0], "a b") == 0);
    char path[] = "/tmp/lens_cmd_help_XXXXXX";
    int fd = mkstemp(path), saved = dup(1);
    cr_assert(fd >= 0 && saved >= 0);
    fflush(stdout);
    dup2(fd, 1);
    int rc = lens_cmd_parse("prog", "cmd", "[flags] TEXT", "what it does", fl, 2, 1,
                            (char *[]){"--help", NULL}, pos, &npos);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    char text[1024] = "";
    FILE *f = fdopen(fd, "r");
    rewind(f);
    text[fread(text, 1, sizeof text - 1, f)] = 0;
    fclose(f);
    unlink(path);
    cr_assert_eq(rc, FLAG_HELP);
    const char *head = "usage: prog cmd [flags] TEXT\nwhat it does\n\nflags (default) [range]:\n";
    cr_assert(strncmp(text, head, strlen(head)) == 0, "%s", text);
    cr_assert(strstr(text, "--n N") && strstr(text, "(5) [1, 9]") && strstr(text, "--out FILE"),
              "%s", text);
}

/* ---- each command from its flags to its exit code (commands.c) ---- */

static int *copy(const int *v, size_t n) {
    int *o = malloc(n * sizeof(int));
    memcpy(o, v, n * sizeof(int));
    return o;
}

/* a program on a TsGpt whose callbacks log their calls: l load, r rows, k the cache's check,
 * p patch's rows, f free */
typedef struct Prog {
    TsGpt *g;
    char log[32];
    int refuse_cache, grads;
} Prog;
static void note(Prog *p, const char *what) {
    strncat(p->log, what, sizeof p->log - strlen(p->log) - 1);
}
static int load(void *self, const LensFlags *f, LensCmd *c) {
    Prog *p = self;
    note(p, "l");
    *c = (LensCmd){"prog",
                   f->name,
                   f->ckpt,
                   p->g->t,
                   lens_gpt(&p->g->m),
                   lens_readout_gpt(&p->g->m),
                   (LensReport){"prog", NULL, text_of, NULL},
                   one_token,
                   {0}};
    return AG_OK;
}
static int rows(void *self, const LensFlags *f, LensRows *r) {
    (void)f;
    Prog *p = self;
    note(p, "r");
    *r = (LensRows){copy(p->g->ids, B * T), NULL, NULL, B, 0, T};
    return AG_OK;
}
static int check(void *self, const LensCmd *c, const char *hooks, int grads) {
    Prog *p = self;
    note(p, "k");
    p->grads = grads;
    cr_assert_eq(c->r.B, B, "the check sees the rows");
    return p->refuse_cache ? ag_fail(AG_ERR_ARG, "a cache of %s is too large", hooks) : AG_OK;
}
static int pair(void *self, const char *clean, const char *corrupt, LensRows *a, LensRows *b) {
    Prog *p = self;
    note(p, "p");
    cr_assert(clean && corrupt);
    *a = (LensRows){copy(p->g->ids, T), NULL, NULL, 1, 0, T};
    *b = (LensRows){copy(p->g->corrupt, T), NULL, NULL, 1, 0, T};
    return AG_OK;
}
static void free_all(void *self) { note(self, "f"); }

static LensProgram prog_of(Prog *p) {
    return (LensProgram){.prog = "prog",
                         .ckpt = "model.npz",
                         .unit = "TOKEN",
                         .self = p,
                         .load = load,
                         .rows = rows,
                         .free = free_all,
                         .rows_flag = "--many FILE",
                         .cache_check = check,
                         .pair_rows = pair};
}

/* kind run with argv (NULL-terminated, after the command name) on a fresh Prog (*p) */
static int run(LensCmdKind kind, const char *name, int parts, LensCmdArgs *a, Prog *p,
               const char *const *argv) {
    LensProgram lp = prog_of(p);
    LensUsage u = {name, "[flags]", "what it does", "the .npz to write"};
    LensFlags f;
    LensCmd c = {0};
    int argc = 0;
    while (argv[argc]) argc++;
    int rc = lens_flags_parse(&lp, &u, parts, &f, NULL, 0, NULL, 0, argc, (char **)argv);
    return lens_cmd_run(kind, &lp, &c, &f, a, rc);
}

static NpzFile *read_npz(const char *path) {
    NpzFile *f;
    cr_assert_eq(npz_read(path, &f, NULL), AG_OK, "%s", ag_last_error());
    return f;
}

Test(lens_cmd_detect, a_gpts_scores_are_the_detectors_to_the_bit, .init = setup, .fini = teardown) {
    LensDetectOptions opt = {1, 0};
    cr_assert_eq(lens_cmd_detect(&cmd, &opt, ts_join(out, dir, "d.npz")), AG_OK, "%s",
                 ag_last_error());
    int K = LENS_N_HEAD_KINDS, n = K * tiny.n_layer * tiny.n_head;
    double *want = calloc((size_t)n, sizeof(double));
    lens_detect_gpt(env.t, &env.m, env.ids, B, T, &opt, want);
    NpzFile *f = read_npz(out);
    const NpzEntry *e = npz_find(f, "scores");
    cr_assert(e && e->ndim == 3 && e->shape[0] == K && e->shape[1] == tiny.n_layer &&
              e->shape[2] == tiny.n_head);
    cr_assert_eq(memcmp(e->data, want, (size_t)n * sizeof(double)), 0, "the detectors' scores");
    const NpzEntry *ex = npz_find(f, "exclude");
    cr_assert(ex && ((const int64_t *)ex->data)[0] == 1 && ((const int64_t *)ex->data)[1] == 0);
    cr_assert_eq(((const int32_t *)npz_find(f, "tokens")->data)[7], env.ids[7]);
    cr_assert_null(npz_find(f, "src_tokens"), "a GPT's rows have no source");
    npz_free(f);
    free(want);
}

Test(lens_cmd_detect, a_seq2seq_models_three_tables_are_the_detectors_to_the_bit, .init = setup,
     .fini = teardown) {
    enum { S = 4, V = 9, NH = 2 };
    Arena *a = arena_new("params", 0);
    Rng rng;
    rng_seed(&rng, 5);
    Seq2SeqConfig cfg = nn_seq2seq_default_config(V, V, 8, NH, 2);
    cfg.layer.dropout = 0;
    cfg.max_len = 8;
    Seq2Seq m;
    nn_seq2seq_init(&m, a, &rng, &cfg);
    ts_perturb(&m.params, &rng, 0.2, 0);
    int src[B * S], tgt[B * T];
    for (int i = 0; i < B * S; i++) src[i] = 1 + (i * 5 + 2) % (V - 1);
    for (int i = 0; i < B * T; i++) tgt[i] = 1 + (i * 3 + 1) % (V - 1);
    LensCmd c = {"prog",
                 "detect",
                 "model.npz",
                 env.t,
                 lens_seq2seq(&m),
                 lens_readout_seq2seq(&m),
                 (LensReport){"prog", NULL, text_of, NULL},
                 one_token,
                 {copy(tgt, B * T), copy(src, B * S), copy(tgt, B * T), B, S, T}};
    cr_assert_eq(lens_cmd_detect(&c, &(LensDetectOptions){0, 1}, ts_join(out, dir, "s.npz")), AG_OK,
                 "%s", ag_last_error());
    int K = LENS_N_HEAD_KINDS;
    double enc[LENS_N_HEAD_KINDS * 2 * NH], dec[LENS_N_HEAD_KINDS * 2 * NH], cross[2 * NH];
    lens_detect_seq2seq(env.t, &m, src, S, tgt, B, T, &(LensDetectOptions){0, 1}, enc, dec, cross);
    NpzFile *f = read_npz(out);
    cr_assert_eq(memcmp(npz_find(f, "encoder")->data, enc, sizeof enc), 0);
    cr_assert_eq(memcmp(npz_find(f, "decoder")->data, dec, sizeof dec), 0);
    cr_assert_eq(memcmp(npz_find(f, "cross_diagonal")->data, cross, sizeof cross), 0);
    cr_assert_eq(npz_find(f, "encoder")->shape[0], K);
    cr_assert_eq(((const int32_t *)npz_find(f, "src_tokens")->data)[5], src[5]);
    cr_assert_null(npz_find(f, "scores"));
    npz_free(f);
    lens_cmd_end(&c, AG_OK);
    nn_seq2seq_free(&m);
    arena_free(a);
}

Test(lens_cmd_run, cache_checks_the_size_first_and_writes_nothing_when_refused, .init = setup,
     .fini = teardown) {
    Prog p = {&env, "", 0, 0};
    LensCmdArgs a = {.hooks = "hook_embed,blocks.*.hook_resid_pre", .info = {.cfg = &env.m.cfg}};
    cr_assert_eq(run(LENS_CMD_CACHE, "cache", LENS_FLAGS_GOOD_BAD | LENS_FLAGS_POS, &a, &p,
                     (const char *[]){"--out", ts_join(out, dir, "c.npz"), "--good", "t3", "--bad",
                                      "t4", NULL}),
                 0, "%s", ag_last_error());
    cr_assert_str_eq(p.log, "lrkf", "load, rows, the check, free");
    cr_assert_eq(p.grads, 1, "with --good and --bad the cache keeps gradients");
    NpzFile *f = read_npz(out);
    cr_assert_not_null(npz_find(f, "blocks.1.hook_resid_pre.grad"));
    npz_free(f);
    p = (Prog){&env, "", 1, 0};
    cr_assert_eq(run(LENS_CMD_CACHE, "cache", 0, &a, &p,
                     (const char *[]){"--out", ts_join(out, dir, "c2.npz"), NULL}),
                 2);
    cr_assert(strstr(ag_last_error(), "too large"), "%s", ag_last_error());
    cr_assert_eq(p.grads, 0);
    cr_assert_neq(access(out, F_OK), 0, "a refused cache writes nothing");
}

Test(lens_cmd_run, ablate_checks_a_gpts_positions_and_the_modes_name, .init = setup,
     .fini = teardown) {
    Prog p = {&env, "", 0, 0};
    LensCmdArgs a = {.hook = "blocks.*.attn.hook_z", .mode_name = "avg"};
    const char *argv[] = {"--out", ts_join(out, dir, "a.npz"), NULL};
    cr_assert_eq(run(LENS_CMD_ABLATE, "ablate", LENS_FLAGS_METRIC, &a, &p, argv), 2);
    cr_assert_str_eq(ag_last_error(), "--mode avg: not zero or mean");
    cr_assert_str_eq(p.log, "", "a refused mode loads nothing");
    a.mode_name = "mean";
    a.positions = (FlagInts){2, {1, T}};
    cr_assert_eq(run(LENS_CMD_ABLATE, "ablate", LENS_FLAGS_METRIC, &a, &p, argv), 2);
    cr_assert_str_eq(ag_last_error(), "--positions 1,5: not a list of integers in [0, 5)");
    cr_assert_eq(a.mode, LENS_MEAN);
    a.positions = (FlagInts){2, {1, 3}};
    cr_assert_eq(run(LENS_CMD_ABLATE, "ablate", LENS_FLAGS_METRIC, &a, &p, argv), 0, "%s",
                 ag_last_error());
    NpzFile *f = read_npz(out);
    const NpzEntry *v = npz_find(f, "values");
    cr_assert(v && v->shape[0] == tiny.n_layer && v->shape[1] == tiny.n_head);
    npz_free(f);
}

Test(lens_cmd_run, patch_needs_both_rows_and_reads_them_from_the_program, .init = setup,
     .fini = teardown) {
    Prog p = {&env, "", 0, 0};
    LensCmdArgs a = {.hook = "blocks.*.attn.hook_z", .clean = "x", .by_name = "diagonal"};
    const char *argv[] = {"--out", ts_join(out, dir, "p.npz"), NULL};
    cr_assert_eq(run(LENS_CMD_PATCH, "patch", LENS_FLAGS_METRIC, &a, &p, argv), 2);
    cr_assert_str_eq(ag_last_error(),
                     "--clean TEXT and --corrupt TEXT are required (see prog patch --help)");
    a.corrupt = "y";
    cr_assert_eq(run(LENS_CMD_PATCH, "patch", LENS_FLAGS_METRIC, &a, &p, argv), 2);
    cr_assert_str_eq(ag_last_error(), "--by diagonal: not position, head or head-position");
    cr_assert_str_eq(p.log, "");
    a.by_name = "head";
    cr_assert_eq(run(LENS_CMD_PATCH, "patch", LENS_FLAGS_METRIC, &a, &p, argv), 0, "%s",
                 ag_last_error());
    cr_assert_str_eq(p.log, "lpf", "patch's rows are the program's pair, not its rows");
    cr_assert_eq(a.by, LENS_BY_HEAD);
    NpzFile *f = read_npz(out);
    cr_assert_not_null(npz_find(f, "values"));
    npz_free(f);
}

Test(lens_cmd_run, detect_and_the_logit_lens_run_on_the_programs_rows, .init = setup,
     .fini = teardown) {
    Prog p = {&env, "", 0, 0};
    LensCmdArgs a = {.token_flag = "word", .pos = -1};
    cr_assert_eq(run(LENS_CMD_DETECT, "detect", 0, &a, &p,
                     (const char *[]){"--out", ts_join(out, dir, "d.npz"), NULL}),
                 0, "%s", ag_last_error());
    cr_assert_str_eq(p.log, "lrf");
    cr_assert_eq(access(out, F_OK), 0);
    const char *argv[] = {"--out", ts_join(out, dir, "l.npz"), NULL};
    cr_assert_eq(run(LENS_CMD_LOGIT, "lens", LENS_FLAGS_GOOD_BAD, &a, &p, argv), 2);
    cr_assert_str_eq(ag_last_error(),
                     "give --word TOKEN, or --good TOKEN --bad TOKEN (see prog lens --help)");
    a.token = "t3";
    cr_assert_eq(run(LENS_CMD_LOGIT, "lens", LENS_FLAGS_GOOD_BAD, &a, &p, argv), 0, "%s",
                 ag_last_error());
    NpzFile *f = read_npz(out);
    cr_assert_not_null(npz_find(f, "metric"));
    npz_free(f);
}

Test(lens_cmd_run, a_refused_parse_runs_nothing, .init = setup, .fini = teardown) {
    Prog p = {&env, "", 0, 0};
    LensCmdArgs a = {.hooks = "*"};
    cr_assert_eq(run(LENS_CMD_CACHE, "cache", 0, &a, &p, (const char *[]){"--nope", NULL}), 2);
    cr_assert(strstr(ag_last_error(), "--nope"), "%s", ag_last_error());
    cr_assert_str_eq(p.log, "");
    cr_assert_eq(run(LENS_CMD_CACHE, "cache", 0, &a, &p, (const char *[]){"--help", NULL}), 0,
                 "--help is done, exit 0");
    cr_assert_str_eq(p.log, "");
}
