/* test_cmd_flags.c: the lens commands' one set of flags, one start and one end (src/lens/cmd.c:
 * lens_flags_parse, lens_flags_refuse, lens_flags_metric, lens_cmd_start, lens_cmd_finish) on
 * a program of callbacks that count their calls: the common rows and their defaults, a
 * program's and a command's rows, --good without --bad refused, the metric's default, the
 * start's order (texts, --out's folder, load, rows) and where it stops, and the end freeing
 * what the load made once.
 * Not here: the runs (test_cmd.c), the two programs' commands (tests/examples/test_*_lens_cli.c). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "attograd.h"

/* a program whose callbacks log their calls into self */
typedef struct Prog {
    char log[128];
    int load_rc, rows_rc, dir_rc;
    const char *input;
} Prog;
static Prog *the; /* out_dir and check_text have no self */

static void note(Prog *p, const char *what) {
    strncat(p->log, what, sizeof p->log - strlen(p->log) - 1);
}
static int check(const char *text, const char *label, const char **out) {
    *out = text;
    note(the, "t");
    return strcmp(text, "bad") == 0 ? ag_fail(AG_ERR_FORMAT, "%s is not valid", label) : AG_OK;
}
static int out_dir(const char *path) {
    note(the, "d");
    return the->dir_rc ? ag_fail(the->dir_rc, "%s: cannot make its folder", path) : AG_OK;
}
static int load(void *self, const LensFlags *f, LensCmd *c) {
    Prog *p = self;
    note(p, "l");
    cr_assert_str_eq(c->name, f->name, "the command is named before the load");
    cr_assert_str_eq(c->ckpt, f->ckpt);
    return p->load_rc ? ag_fail(p->load_rc, "%s: cannot read", f->ckpt) : AG_OK;
}
static int rows(void *self, const LensFlags *f, LensRows *r) {
    (void)f;
    Prog *p = self;
    note(p, "r");
    r->B = 1, r->T = 2;
    return p->rows_rc ? ag_fail(p->rows_rc, "no rows") : AG_OK;
}
static void free_all(void *self) { note(self, "f"); }

static LensProgram prog_of(Prog *p) {
    the = p;
    return (LensProgram){"prog",  "default.npz", "TOKEN", "the text", 0,    p,    check,
                         out_dir, load,          rows,    free_all,   NULL, NULL, NULL};
}

static const LensUsage usage = {"ablate", "[flags]", "what it does", "the .npz to write"};

static int parse(LensProgram *lp, LensFlags *f, int parts, Flag *own, int n_own, int argc,
                 char **argv) {
    Prog *p = lp->self;
    Flag in[] = {FLAG_ROW("input", FLAG_STR, &p->input, "TEXT", "the program's input")};
    return lens_flags_parse(lp, &usage, parts, f, in, 1, own, n_own, argc, argv);
}

Test(lens_flags, parse_sets_the_defaults_and_reads_the_common_and_own_rows) {
    Prog p = {0};
    LensProgram lp = prog_of(&p);
    LensFlags f;
    int hooks = 0;
    Flag own[] = {FLAG_NUM("n", FLAG_INT, &hooks, "N", "a number", 0, 9)};
    cr_assert_eq(parse(&lp, &f, LENS_FLAGS_GOOD_BAD, own, 1, 0, (char *[]){NULL}), AG_OK);
    cr_assert_str_eq(f.ckpt, "default.npz");
    cr_assert_str_eq(f.out, "build/lens/ablate.npz");
    cr_assert(f.pos == -1 && f.threads == 0 && !f.good && !f.bad && !f.args);
    cr_assert_str_eq(lens_flags_metric(&f), "loss");
    cr_assert_eq(parse(&lp, &f, LENS_FLAGS_GOOD_BAD | LENS_FLAGS_POS | LENS_FLAGS_METRIC, own, 1,
                       12,
                       (char *[]){"--ckpt", "m.npz", "--input=x", "--n", "4", "--good", "a",
                                  "--bad", "b", "--pos", "3", "--threads=4096", NULL}),
                 AG_OK, "%s", ag_last_error());
    cr_assert(hooks == 4 && own[0].given, "the command's row is read, given set");
    cr_assert_str_eq(p.input, "x");
    cr_assert_str_eq(f.ckpt, "m.npz");
    cr_assert(f.pos == 3 && f.threads == 4096);
    cr_assert_str_eq(lens_flags_metric(&f), "logit-diff", "--good and --bad: logit-diff");
    cr_assert_eq(parse(&lp, &f, LENS_FLAGS_GOOD_BAD | LENS_FLAGS_METRIC, own, 1, 6,
                       (char *[]){"--metric", "loss", "--good", "a", "--bad", "b", NULL}),
                 AG_OK);
    cr_assert_str_eq(lens_flags_metric(&f), "loss", "--metric given wins");
}

Test(lens_flags, parse_refuses_naming_the_flag_and_the_help) {
    Prog p = {0};
    LensProgram lp = prog_of(&p);
    LensFlags f;
    cr_assert_eq(parse(&lp, &f, LENS_FLAGS_GOOD_BAD, NULL, 0, 2, (char *[]){"--good", "a", NULL}),
                 AG_OK, "the command's own checks come first");
    cr_assert_eq(lens_cmd_start(&(LensCmd){0}, &lp, &f, AG_OK, 1), AG_ERR_ARG);
    cr_assert_str_eq(ag_last_error(), "--good and --bad go together (see prog ablate --help)");
    cr_assert_str_eq(p.log, "", "refused before the texts and the load");
    cr_assert_eq(parse(&lp, &f, 0, NULL, 0, 2, (char *[]){"--good", "a", NULL}), AG_ERR_ARG);
    cr_assert(strstr(ag_last_error(), "--good") && strstr(ag_last_error(), "(see prog ablate"),
              "a command without the metric's rows: %s", ag_last_error());
    cr_assert_eq(parse(&lp, &f, 0, NULL, 0, 2, (char *[]){"--threads", "4097", NULL}), AG_ERR_ARG);
    cr_assert(strstr(ag_last_error(), "--threads"), "%s", ag_last_error());
    cr_assert_eq(parse(&lp, &f, 0, NULL, 0, 1, (char *[]){"text", NULL}), AG_ERR_ARG,
                 "an argument without LENS_FLAGS_ARGS");
    cr_assert_eq(parse(&lp, &f, LENS_FLAGS_ARGS, NULL, 0, 1, (char *[]){"text", NULL}), AG_OK);
    cr_assert(f.nargs == 1 && strcmp(f.args[0], "text") == 0);
    cr_assert_eq(lens_cmd_finish(&(LensCmd){0}, &lp, &f, AG_OK), 0);
    cr_assert_null(f.args, "the arguments are freed");
    cr_assert_str_eq(p.log, "", "nothing loaded, nothing freed");
    cr_assert_eq(lens_flags_refuse(&f, "why"), AG_ERR_ARG);
    cr_assert_str_eq(ag_last_error(), "why (see prog ablate --help)");
}

Test(lens_flags, start_checks_makes_the_folder_loads_reads_and_the_end_frees_once) {
    Prog p = {0};
    LensProgram lp = prog_of(&p);
    LensFlags f;
    LensCmd c = {0};
    int rc = parse(&lp, &f, LENS_FLAGS_ARGS | LENS_FLAGS_GOOD_BAD, NULL, 0, 7,
                   (char *[]){"a", "--input", "x", "--good", "g", "--bad", "b", NULL});
    cr_assert(f.ntexts == 3 && strcmp(f.labels[0], "--input") == 0 &&
                  strcmp(f.texts[2], "b") == 0 && strcmp(f.labels[2], "--bad") == 0,
              "the texts given, named by their flags");
    rc = lens_cmd_start(&c, &lp, &f, rc, 1);
    cr_assert_eq(rc, AG_OK, "%s", ag_last_error());
    cr_assert_str_eq(p.log, "ttttdlr",
                     "4 texts (the argument, --input, --good, --bad), then the rest");
    cr_assert(c.r.B == 1 && strcmp(c.prog, "prog") == 0 && strcmp(c.name, "ablate") == 0);
    cr_assert_eq(lens_cmd_finish(&c, &lp, &f, rc), 0);
    cr_assert_str_eq(p.log, "ttttdlrf");
    cr_assert_null(c.r.ids);
    /* a bad text: nothing made, nothing loaded; the message and exit 2 */
    p.log[0] = 0;
    rc = parse(&lp, &f, LENS_FLAGS_ARGS, NULL, 0, 1, (char *[]){"bad", NULL});
    rc = lens_cmd_start(&c, &lp, &f, rc, 1);
    cr_assert_eq(rc, AG_ERR_FORMAT);
    cr_assert_str_eq(ag_last_error(), "the text is not valid");
    cr_assert_eq(lens_cmd_finish(&c, &lp, &f, rc), 2);
    cr_assert_str_eq(p.log, "t");
    /* parse-only: done after the checks, exit 0 */
    p.log[0] = 0;
    lp.parse_only = 1;
    rc = lens_cmd_start(&c, &lp, &f, parse(&lp, &f, 0, NULL, 0, 0, (char *[]){NULL}), 1);
    cr_assert_eq(rc, LENS_CMD_DONE);
    cr_assert_eq(lens_cmd_finish(&c, &lp, &f, rc), 0);
    cr_assert_str_eq(p.log, "");
    lp.parse_only = 0;
    /* a refused parse: nothing started */
    rc = lens_cmd_start(&c, &lp, &f, AG_ERR_ARG, 1);
    cr_assert_eq(rc, AG_ERR_ARG);
    cr_assert_str_eq(p.log, "");
    /* the folder refused: no load; a load refused: its free is still called, no rows read */
    p.dir_rc = AG_ERR_IO;
    rc = lens_cmd_start(&c, &lp, &f, parse(&lp, &f, 0, NULL, 0, 0, (char *[]){NULL}), 1);
    cr_assert_eq(rc, AG_ERR_IO);
    cr_assert_eq(lens_cmd_finish(&c, &lp, &f, rc), 2);
    cr_assert_str_eq(p.log, "d");
    p.dir_rc = 0, p.load_rc = AG_ERR_IO, p.log[0] = 0;
    rc = lens_cmd_start(&c, &lp, &f, parse(&lp, &f, 0, NULL, 0, 0, (char *[]){NULL}), 1);
    cr_assert_eq(rc, AG_ERR_IO);
    cr_assert_eq(lens_cmd_finish(&c, &lp, &f, rc), 2);
    cr_assert_str_eq(p.log, "dlf");
    /* --help: done, exit 0 */
    p.load_rc = 0, p.log[0] = 0;
    fflush(stdout);
    FILE *saved = stdout;
    stdout = fopen("/dev/null", "w");
    rc = parse(&lp, &f, 0, NULL, 0, 1, (char *[]){"--help", NULL});
    fclose(stdout);
    stdout = saved;
    cr_assert_eq(rc, LENS_CMD_DONE);
    cr_assert_eq(lens_cmd_start(&c, &lp, &f, rc, 1), LENS_CMD_DONE);
    cr_assert_eq(lens_cmd_finish(&c, &lp, &f, LENS_CMD_DONE), 0);
    cr_assert_str_eq(p.log, "");
}
