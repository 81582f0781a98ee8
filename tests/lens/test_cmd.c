/* test_cmd.c: the lens commands' runs for any model (src/lens/cmd.c) on a small GPT: the metric
 * of --metric (a GPT row's next tokens, a seq2seq row's given ones, logit-diff through the
 * program's token callback), cache, ablate, patch and the logit lens each writing what the
 * sweeps they wrap compute (read back, to the bit), the refusals each names (--hooks, --hook,
 * --corrupt, --pos, the program's token flag), the exit codes of lens_cmd_end.
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
