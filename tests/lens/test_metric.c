/* test_metric.c: lens_logit_diff_metric (src/lens/lens.c), the lens commands' --metric
 * logit-diff: the ids the token function finds for --good and --bad in every row at --pos, and
 * each bad flag refused naming it; lens_owned_metric_free frees what it made and what a caller
 * added. Read next: tests/lens/test_lens.c (the metric on a model). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "attograd.h"

/* a word is its length; "" and words over 5 letters are refused naming the flag */
static int word_len(const void *ctx, const char *text, const char *flag, int *id) {
    (void)ctx;
    size_t n = strlen(text);
    if (n == 0 || n > 5) return ag_fail(AG_ERR_ARG, "--%s '%s': not one token", flag, text);
    *id = (int)n;
    return AG_OK;
}

Test(lens_metric, logit_diff_holds_the_ids_of_good_and_bad_in_every_row) {
    LensOwnedMetric m;
    cr_assert_eq(lens_logit_diff_metric("logit-diff", "abc", "a", 2, 3, 4, word_len, NULL, &m),
                 AG_OK, "%s", ag_last_error());
    cr_assert_eq(m.mt.kind, LENS_LOGIT_DIFF);
    cr_assert_eq(m.mt.pos, 2);
    cr_assert(m.mt.good == m.good && m.mt.bad == m.bad && !m.targets && !m.mt.targets);
    for (int b = 0; b < 3; b++) cr_assert(m.good[b] == 3 && m.bad[b] == 1, "row %d", b);
    /* on a tape: logits[b, 2, 3] - logits[b, 2, 1], the mean over rows */
    Arena *a = arena_new("step", 0);
    Tape *t = ag_tape_new(a);
    Tensor *x = tensor_zeros(a, 3, (int[]){3, 4, 5}, "logits");
    for (size_t i = 0; i < x->size; i++) x->data[i] = (Real)(0.25 * (double)(i % 7));
    double want = 0;
    for (int b = 0; b < 3; b++)
        want += (double)x->data[(b * 4 + 2) * 5 + 3] - (double)x->data[(b * 4 + 2) * 5 + 1];
    cr_assert_float_eq((double)lens_metric(t, &m.mt, x)->data[0], want / 3, 1e-6);
    arena_free(a);
    m.targets = malloc(12 * sizeof(int)); /* a caller's array: freed with the rest */
    lens_owned_metric_free(&m);
    cr_assert(!m.good && !m.bad && !m.targets);
}

Test(lens_metric, each_bad_flag_is_refused_naming_it) {
    LensOwnedMetric m;
    static const struct {
        const char *kind, *good, *bad;
        int pos;
        const char *msg;
    } rows[] = {
        {"diff", "a", "b", -1, "--metric diff: not loss or logit-diff"},
        {"logit-diff", NULL, "b", -1, "--metric logit-diff needs --good and --bad"},
        {"logit-diff", "a", NULL, -1, "--metric logit-diff needs --good and --bad"},
        {"logit-diff", "a", "b", 4, "--pos 4: outside the rows' 4 positions (-1: the last)"},
        {"logit-diff", "a", "b", -2, "--pos -2: outside the rows' 4 positions (-1: the last)"},
        {"logit-diff", "", "b", -1, "--good '': not one token"},
        {"logit-diff", "a", "toolong", 0, "--bad 'toolong': not one token"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        int rc = lens_logit_diff_metric(rows[i].kind, rows[i].good, rows[i].bad, rows[i].pos, 2, 4,
                                        word_len, NULL, &m);
        cr_assert_eq(rc, AG_ERR_ARG, "row %zu", i);
        cr_assert_str_eq(ag_last_error(), rows[i].msg);
        cr_assert(!m.good && !m.bad && !m.targets, "row %zu", i);
    }
}
