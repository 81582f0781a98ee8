/* test_flag.c: the flag parser (src/flag/flag.c): every type read in both forms ("--name value"
 * and "--name=value"), the strict numbers (base 10 only: hex, junk, empty, overflow, NaN and
 * infinity refused), ranges, lists without empty elements, choices, switches, aliases and the
 * spelling messages name, "given" tracking, positional arguments, --help's lines, a command's
 * usage (flag_usage, flag_parse_cmd), and misuse of the table (a name twice, a row not in it)
 * aborting.
 * Not here: the programs' own flag tables (tests/examples). */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attograd.h"

static const char *const OPTIMS[] = {"sgd", "adam", "adamw", NULL};

/* one table of every type; its values start at the defaults */
typedef struct {
    int steps, optim, resume, pre_ln;
    int64_t big;
    uint64_t seed;
    double lr;
    const char *out, *text;
    FlagInts pos;
    Flag fl[10];
} Table;

static void table(Table *t) {
    memset(t, 0, sizeof *t);
    t->steps = 100;
    t->optim = 1;
    t->pre_ln = 1;
    t->big = 7;
    t->seed = 1;
    t->lr = 1e-3;
    t->out = "build/x";
    const Flag fl[10] = {
        {"steps|max-iters|iters", FLAG_INT, &t->steps, "N", "training steps", 1, 1000, NULL, 0},
        {"big", FLAG_I64, &t->big, "N", "an int64", -1e18, 1e18, NULL, 0},
        {"seed", FLAG_U64, &t->seed, "N", "a seed", 0, 18446744073709551615.0, NULL, 0},
        {"lr|learning-rate", FLAG_DOUBLE, &t->lr, "X", "learning rate", 0, 10, NULL, 0},
        {"out", FLAG_PATH, &t->out, "DIR", "output folder", 0, 0, NULL, 0},
        {"text", FLAG_STR, &t->text, "TEXT", "some text (default: none)", 0, 0, NULL, 0},
        {"optim", FLAG_CHOICE, &t->optim, NULL, "optimizer", 0, 0, OPTIMS, 0},
        {"resume", FLAG_SWITCH, &t->resume, NULL, "continue", 1, 0, NULL, 0},
        {"post-ln", FLAG_SWITCH, &t->pre_ln, NULL, "norms after", 0, 0, NULL, 0},
        {"positions", FLAG_INTS, &t->pos, NULL, "positions", 0, 4096, NULL, 0},
    };
    memcpy(t->fl, fl, sizeof fl);
}

/* parses the blank-separated words of line (no positional arguments) */
static int parse(Table *t, const char *line) {
    static char buf[1024];
    char *argv[64];
    int argc = 0;
    snprintf(buf, sizeof buf, "%s", line);
    for (char *w = strtok(buf, " "); w; w = strtok(NULL, " ")) argv[argc++] = w;
    return flag_parse(t->fl, 10, argc, argv, NULL, NULL);
}

static void expect_error(const char *line, const char *says) {
    Table t;
    table(&t);
    int rc = parse(&t, line);
    cr_expect_eq(rc, AG_ERR_ARG, "'%s': rc %d, expected AG_ERR_ARG", line, rc);
    cr_expect(strstr(ag_last_error(), says), "'%s': the message '%s' does not say '%s'", line,
              ag_last_error(), says);
}

Test(flag_parse, reads_every_type_in_both_forms) {
    const char *forms[] = {"--steps 5 --big -9 --seed 18446744073709551615 --lr 2.5e-1 --out d "
                           "--text hi --optim adamw --resume --post-ln --positions 3,0,12",
                           "--steps=5 --big=-9 --seed=18446744073709551615 --lr=2.5e-1 --out=d "
                           "--text=hi --optim=adamw --resume --post-ln --positions=3,0,12"};
    for (int k = 0; k < 2; k++) {
        Table t;
        table(&t);
        cr_assert_eq(parse(&t, forms[k]), AG_OK, "%s: %s", forms[k], ag_last_error());
        cr_expect_eq(t.steps, 5);
        cr_expect_eq(t.big, -9);
        cr_expect_eq(t.seed, UINT64_MAX);
        cr_expect_eq(t.lr, 0.25);
        cr_expect_str_eq(t.out, "d");
        cr_expect_str_eq(t.text, "hi");
        cr_expect_eq(t.optim, 2);
        cr_expect_eq(t.resume, 1);
        cr_expect_eq(t.pre_ln, 0);
        cr_expect(t.pos.n == 3 && t.pos.v[0] == 3 && t.pos.v[1] == 0 && t.pos.v[2] == 12);
        for (int i = 0; i < 10; i++) cr_expect(t.fl[i].given, "--%s not given", t.fl[i].name);
    }
}

Test(flag_parse, keeps_the_defaults_and_tracks_what_was_given) {
    Table t;
    table(&t);
    cr_assert_eq(parse(&t, "--lr 0.5"), AG_OK, "%s", ag_last_error());
    cr_expect_eq(t.steps, 100);
    cr_expect_eq(t.lr, 0.5);
    cr_expect(flag_given(t.fl, 10, "lr") && !flag_given(t.fl, 10, "steps"));
    char sp[32];
    cr_expect_str_eq(flag_spelling(flag_find(t.fl, 10, "steps"), sp, sizeof sp), "steps");
    /* a flag given twice keeps its last value */
    table(&t);
    cr_assert_eq(parse(&t, "--steps 5 --max-iters=7"), AG_OK, "%s", ag_last_error());
    cr_expect_eq(t.steps, 7);
    /* an empty text is a text; an empty path is not */
    table(&t);
    cr_assert_eq(parse(&t, "--text="), AG_OK, "%s", ag_last_error());
    cr_expect_str_eq(t.text, "");
}

Test(flag_parse, accepts_aliases_and_remembers_the_spelling) {
    Table t;
    table(&t);
    cr_assert_eq(parse(&t, "--max-iters 9 --learning-rate=2"), AG_OK, "%s", ag_last_error());
    cr_expect_eq(t.steps, 9);
    cr_expect_eq(t.lr, 2);
    cr_expect(flag_given(t.fl, 10, "steps"));
    char sp[32];
    cr_expect_str_eq(flag_spelling(flag_find(t.fl, 10, "steps"), sp, sizeof sp), "max-iters");
    cr_expect_eq(flag_find(t.fl, 10, "steps")->given, 2);
    /* an error names the spelling the user typed */
    expect_error("--iters ten", "'--iters ten' is not an integer");
    expect_error("--learning-rate 11", "'--learning-rate 11' is out of range [0, 10]");
}

Test(flag_parse, reads_numbers_strictly_in_base_10) {
    const struct {
        const char *line, *says;
    } bad[] = {
        {"--steps 0x10", "'--steps 0x10' is not an integer"},
        {"--steps 1e2", "'--steps 1e2' is not an integer"},
        {"--steps 5.0", "is not an integer"},
        {"--steps +5", "is not an integer"},
        {"--steps= 5", "'--steps ' is not an integer"},
        {"--steps=", "'--steps ' is not an integer"},
        {"--steps 5x", "'--steps 5x' is not an integer"},
        {"--steps -", "is not an integer"},
        {"--steps 0", "'--steps 0' is out of range [1, 1000]"},
        {"--steps 1001", "out of range [1, 1000]"},
        {"--steps 99999999999999999999", "out of range [1, 1000]"},
        {"--big 1000000000000000001", "out of range [-1000000000000000000, 1000000000000000000]"},
        {"--big -99999999999999999999", "out of range"},
        {"--seed -3", "'--seed -3' is out of range [0, 18446744073709551615]"},
        {"--seed 18446744073709551616", "out of range"},
        {"--seed 0x1", "is not an integer"},
        {"--lr nan", "'--lr nan' is not a number"},
        {"--lr inf", "'--lr inf' is not a number"},
        {"--lr -inf", "is not a number"},
        {"--lr 0x1p-3", "is not a number"},
        {"--lr 1e", "is not a number"},
        {"--lr .", "is not a number"},
        {"--lr 1e400", "'--lr 1e400' is out of range [0, 10]"},
        {"--lr -0.5", "out of range"},
        {"--lr 10.000001", "out of range"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) expect_error(bad[k].line, bad[k].says);
    const struct {
        const char *line;
        int steps;
        double lr;
    } good[] = {
        {"--steps 010", 10, 1e-3},    {"--steps 1000 --lr 10", 1000, 10},
        {"--lr .5", 100, 0.5},        {"--lr 5.", 100, 5},
        {"--lr 1E-1", 100, 0.1},      {"--lr 1e+0", 100, 1},
        {"--lr 1e-320", 100, 1e-320}, /* an underflow: the subnormal strtod gives */
        {"--lr 0", 100, 0},
    };
    for (size_t k = 0; k < sizeof good / sizeof good[0]; k++) {
        Table t;
        table(&t);
        cr_expect_eq(parse(&t, good[k].line), AG_OK, "%s: %s", good[k].line, ag_last_error());
        cr_expect(t.steps == good[k].steps && t.lr == good[k].lr, "%s: %d %g", good[k].line,
                  t.steps, t.lr);
    }
    Table t;
    table(&t);
    cr_assert_eq(parse(&t, "--big -1000000000000000000 --seed 0"), AG_OK, "%s", ag_last_error());
    cr_expect(t.big == -1000000000000000000LL && t.seed == 0);
}

Test(flag_parse, refuses_lists_with_empty_elements) {
    const struct {
        const char *line, *says;
    } bad[] = {
        {"--positions 0,", "'--positions 0,' has an empty element"},
        {"--positions ,0", "has an empty element"},
        {"--positions 1,,2", "has an empty element"},
        {"--positions=", "'--positions ' has an empty element"},
        {"--positions 1,x", "'--positions 1,x': 'x' is not an integer"},
        {"--positions 0x10", "'0x10' is not an integer"},
        {"--positions 1,-1", "-1 is out of range [0, 4096]"},
        {"--positions 5000", "5000 is out of range"},
        {"--positions 1,99999999999999999999999999999999999", "is not an integer"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) expect_error(bad[k].line, bad[k].says);
    /* more than FLAG_INTS_MAX values */
    Table t;
    table(&t);
    size_t cap = (FLAG_INTS_MAX + 1) * 2 + 16;
    char *v = malloc(cap), *argv[2] = {"--positions", v};
    v[0] = '\0';
    for (int i = 0; i <= FLAG_INTS_MAX; i++) strcat(v, i ? ",1" : "1");
    cr_expect_eq(flag_parse(t.fl, 10, 2, argv, NULL, NULL), AG_ERR_ARG);
    cr_expect(strstr(ag_last_error(), "'--positions' has more than 1024 values"), "%s",
              ag_last_error());
    free(v);
}

Test(flag_parse, names_the_flag_in_every_other_error) {
    expect_error("--bogus", "unknown flag '--bogus'");
    expect_error("--bogus=1", "unknown flag '--bogus=1'");
    expect_error("-x", "unknown flag '-x'");
    expect_error("--steps", "flag '--steps' needs a value (N)");
    expect_error("--max-iters", "flag '--max-iters' needs a value (N)");
    expect_error("--resume=yes", "flag '--resume' takes no value");
    expect_error("--out=", "'--out' is empty: give a DIR");
    expect_error("--optim lion", "'--optim lion': expected one of sgd, adam, adamw");
    expect_error("stray", "unexpected argument 'stray'");
    expect_error("--steps 5 -- --lr", "unexpected argument '--lr'");
}

Test(flag_parse, collects_positional_arguments_and_stops_at_help) {
    Table t;
    table(&t);
    char *argv[] = {"a", "--steps", "-5", "-", "--", "--lr", NULL};
    char *pos[8];
    int npos = -1;
    /* -5 is --steps's value (out of range), not a flag */
    cr_expect_eq(flag_parse(t.fl, 10, 3, argv, pos, &npos), AG_ERR_ARG);
    cr_expect(strstr(ag_last_error(), "'--steps -5' is out of range"), "%s", ag_last_error());
    argv[2] = "5";
    cr_assert_eq(flag_parse(t.fl, 10, 6, argv, pos, &npos), AG_OK, "%s", ag_last_error());
    cr_assert_eq(npos, 3);
    cr_expect(!strcmp(pos[0], "a") && !strcmp(pos[1], "-") && !strcmp(pos[2], "--lr"));
    cr_expect_eq(t.lr, 1e-3);
    char *help[] = {"--steps", "7", "-h", "--bogus"};
    table(&t);
    cr_expect_eq(flag_parse(t.fl, 10, 4, help, NULL, NULL), FLAG_HELP);
    help[2] = "--help";
    cr_expect_eq(flag_parse(t.fl, 10, 4, help, NULL, NULL), FLAG_HELP);
    cr_expect_eq(flag_parse(t.fl, 10, 0, NULL, NULL, NULL), AG_OK);
}

Test(flag_parse, gathers_positional_arguments_at_the_front_of_argv_itself) {
    Table t;
    table(&t);
    char *argv[] = {"--steps", "7", "a", "--out=o", "b", "--lr", "0.5", "--", "--c", NULL};
    int npos = -1;
    cr_assert_eq(flag_parse(t.fl, 10, 9, argv, argv, &npos), AG_OK, "%s", ag_last_error());
    cr_assert_eq(npos, 3);
    cr_expect(!strcmp(argv[0], "a") && !strcmp(argv[1], "b") && !strcmp(argv[2], "--c"));
    cr_expect(t.steps == 7 && t.lr == 0.5 && !strcmp(t.out, "o"));
    cr_expect(argv[9] == NULL, "nothing written past the positional arguments' slots");
}

Test(flag_help, lists_every_flag_with_its_default_range_and_aliases) {
    Table t;
    table(&t);
    t.pos.n = 2;
    t.pos.v[0] = 3;
    t.pos.v[1] = 4;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    flag_help(f, t.fl, 10);
    fclose(f);
    const char *lines[] = {
        "  --steps N              training steps (100) [1, 1000]; also --max-iters, --iters\n",
        "  --big N                an int64 (7) [-1000000000000000000, 1000000000000000000]\n",
        "  --seed N               a seed (1) [0, 18446744073709551615]\n",
        "  --lr X                 learning rate (0.001) [0, 10]; also --learning-rate\n",
        "  --out DIR              output folder (build/x)\n",
        "  --text TEXT            some text (default: none)\n",
        "  --optim sgd|adam|adamw optimizer (adam)\n",
        "  --resume               continue\n",
        "  --positions LIST       positions (3,4) [0, 4096]\n",
    };
    for (size_t k = 0; k < sizeof lines / sizeof lines[0]; k++)
        cr_expect(strstr(text, lines[k]), "--help lacks\n%s\nin\n%s", lines[k], text);
    cr_expect_eq(strlen(text), len);
    free(text);
}

Test(flag_usage, frames_the_table_with_the_command_line_and_what_it_does) {
    Table t;
    table(&t);
    char *text = NULL, *table_text = NULL;
    size_t len = 0, table_len = 0;
    FILE *f = open_memstream(&text, &len);
    flag_usage(f, "prog", "train", "[flags] FILE", "trains\na model", t.fl, 10);
    fclose(f);
    f = open_memstream(&table_text, &table_len);
    flag_help(f, t.fl, 10);
    fclose(f);
    const char *head =
        "usage: prog train [flags] FILE\ntrains\na model\n\nflags (default) [range]:\n";
    cr_assert_eq(strncmp(text, head, strlen(head)), 0, "%s", text);
    cr_expect_str_eq(text + strlen(head), table_text);
    free(text), free(table_text);
}

/* flag_parse_cmd: flag_parse's answers; the usage on stdout only for --help */
Test(flag_parse_cmd, parses_then_prints_the_usage_for_help_only, .init = cr_redirect_stdout) {
    Table t;
    table(&t);
    char *ok[] = {"--steps", "7", "x"}, *badv[] = {"--steps", "ten"}, *help[] = {"--lr", "1", "-h"};
    char *pos[3];
    int npos = 0;
    cr_expect_eq(flag_parse_cmd("p", "c", "[flags] X", "does", t.fl, 10, 3, ok, pos, &npos), AG_OK);
    cr_expect(t.steps == 7 && npos == 1 && strcmp(pos[0], "x") == 0);
    cr_expect_eq(flag_parse_cmd("p", "c", "[flags]", "does", t.fl, 10, 2, badv, NULL, NULL),
                 AG_ERR_ARG);
    cr_expect(strstr(ag_last_error(), "'--steps ten' is not an integer"), "%s", ag_last_error());
    cr_expect_eq(flag_parse_cmd("p", "c", "[flags]", "does", t.fl, 10, 3, help, NULL, NULL),
                 FLAG_HELP);
    fflush(stdout);
    char *want = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&want, &len);
    flag_usage(f, "p", "c", "[flags]", "does", t.fl, 10);
    fclose(f);
    cr_expect_stdout_eq_str(want);
    free(want);
}

Test(flag_parse, aborts_on_a_name_twice, .signal = SIGABRT) {
    int a = 0, b = 0;
    Flag fl[] = {
        {"steps", FLAG_INT, &a, NULL, "", 0, 9, NULL, 0},
        {"iters|steps", FLAG_INT, &b, NULL, "", 0, 9, NULL, 0},
    };
    flag_parse(fl, 2, 0, NULL, NULL, NULL);
}

Test(flag_parse, aborts_on_an_empty_spelling, .signal = SIGABRT) {
    int a = 0;
    Flag fl[] = {{"steps|", FLAG_INT, &a, NULL, "", 0, 9, NULL, 0}};
    flag_parse(fl, 1, 0, NULL, NULL, NULL);
}

Test(flag_parse, aborts_on_a_choice_without_choices, .signal = SIGABRT) {
    int a = 0;
    Flag fl[] = {{"optim", FLAG_CHOICE, &a, NULL, "", 0, 0, NULL, 0}};
    flag_parse(fl, 1, 0, NULL, NULL, NULL);
}

Test(flag_find, aborts_on_a_name_not_in_the_table, .signal = SIGABRT) {
    Table t;
    table(&t);
    flag_find(t.fl, 10, "max-iters"); /* an alias is not the row's name */
}

/* FLAG_ROW, FLAG_SW, FLAG_NUM and FLAG_ONE_OF are the rows written out in full */
Test(flag_rows, the_short_forms_are_the_full_rows) {
    const char *s = NULL;
    int on = 0, k = 0, choice = 0;
    static const char *const names[] = {"a", "b", NULL};
    Flag shortf[] = {FLAG_ROW("s", FLAG_PATH, &s, "FILE", "a path"), FLAG_SW("on", &on, "a switch"),
                     FLAG_NUM("k", FLAG_INT, &k, "N", "a number", -1, 9),
                     FLAG_ONE_OF("c", &choice, "a|b", "a choice", names)};
    Flag full[] = {{"s", FLAG_PATH, &s, "FILE", "a path", 0, 0, NULL, 0},
                   {"on", FLAG_SWITCH, &on, NULL, "a switch", 1, 0, NULL, 0},
                   {"k", FLAG_INT, &k, "N", "a number", -1, 9, NULL, 0},
                   {"c", FLAG_CHOICE, &choice, "a|b", "a choice", 0, 0, names, 0}};
    for (int i = 0; i < 4; i++) {
        const Flag *a = &shortf[i], *b = &full[i];
        cr_assert(strcmp(a->name, b->name) == 0 && a->type == b->type && a->ptr == b->ptr &&
                      a->arg == b->arg && a->help == b->help && a->lo == b->lo && a->hi == b->hi &&
                      a->choices == b->choices && a->given == 0,
                  "row %d", i);
    }
    cr_assert_eq(
        flag_parse(shortf, 4, 4, (char *[]){"--on", "--k=-1", "--c", "b", NULL}, NULL, NULL), AG_OK,
        "%s", ag_last_error());
    cr_assert(on == 1 && k == -1 && choice == 1);
}

Test(flag_help_asked, finds_help_before_a_double_dash) {
    char *a[] = {"--steps", "3", "-h"}, *b[] = {"--out", "--help"}, *c[] = {"--", "--help"},
         *d[] = {"--steps", "3", "--helpful"};
    cr_assert(flag_help_asked(3, a));
    cr_assert(flag_help_asked(2, b), "a flag's value counts too");
    cr_assert(!flag_help_asked(2, c), "after --: an argument");
    cr_assert(!flag_help_asked(3, d));
    cr_assert(!flag_help_asked(0, a));
}
