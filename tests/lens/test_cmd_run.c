/* test_cmd_run.c: each lens command from its flags to its exit code (src/lens/commands.c:
 * lens_cmd_run, lens_cmd_detect) on a small GPT and a small seq2seq model: detect's scores are
 * the detectors' to the bit for either model; a program of callbacks that log their calls runs
 * cache (its size check first, refusing before anything is written), ablate (a GPT's
 * --positions checked against its rows, --mode by name), patch (both rows required, read by the
 * program; --by by name), detect and the logit lens (--token or --good and --bad), and a refused
 * parse runs nothing.
 * Not here: the runs each command wraps (test_cmd.c), the common flags, start and end
 * (test_cmd_flags.c), the two programs' commands (tests/examples/test_*_lens_cli.c). */
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

/* "t<id>" (a LensTokenText) and back (a LensTokenFn) */
static char *text_of(const void *ctx, NnHookStack stack, int id, int label) {
    (void)ctx, (void)stack, (void)label;
    char *s = malloc(16);
    snprintf(s, 16, "t%d", id);
    return s;
}
static int one_token(const void *ctx, const char *text, const char *flag, int *id) {
    (void)ctx;
    if (text[0] != 't' || sscanf(text + 1, "%d", id) != 1)
        return ag_fail(AG_ERR_ARG, "--%s '%s': not a token", flag, text);
    return AG_OK;
}

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

/* each test's model and fresh folder */
static TsGpt env;
static char dir[256], out[512];
static void setup(void) {
    ts_tmp_dir(dir, sizeof dir, "lenscmdrun");
    env = ts_gpt_new(&tiny, 3, 0.2, 0, B, T);
}
static void teardown(void) { ts_gpt_free(&env); }

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
    LensCmd c = {"prog",
                 "detect",
                 "model.npz",
                 env.t,
                 lens_gpt(&env.m),
                 lens_readout_gpt(&env.m),
                 (LensReport){"prog", NULL, text_of, NULL},
                 one_token,
                 {copy(env.ids, B * T), NULL, NULL, B, 0, T}};
    LensDetectOptions opt = {1, 0};
    cr_assert_eq(lens_cmd_detect(&c, &opt, ts_join(out, dir, "d.npz")), AG_OK, "%s",
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
    cr_assert_eq(lens_cmd_end(&c, AG_OK), 0);
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
