/* test_detect.c: the head detectors (src/lens/detect.c). The detection patterns against
 * TransformerLens's construction done step by step (the duplicate pattern rolled one key to the
 * right, its first column zeroed, cut to the lower triangle); hand-built previous-token and
 * induction heads score 1 (with key 0 or the current token left out, as TransformerLens users
 * do for the rows that have no target) and exactly (T - 1) / T and (T - L) / T without; heads
 * spread evenly score the closed forms detect.h states; a batch scores the mean of its
 * sequences; misuse aborts naming the function and the shapes.
 * Not here: the scores of a trained model (tests/examples/test_induction.c). */
#include <criterion/criterion.h>
#include <signal.h>
#include <string.h>

#include "attograd.h"
#include "expect_abort.h"

/* a (B, NH, T, T) pattern, zeroed, in arena a */
static Tensor *zeros4(Arena *a, int B, int NH, int T) {
    return tensor_zeros(a, 4, (int[]){B, NH, T, T}, "pattern");
}
#define AT(P, b, h, i, j)                                                                          \
    (P)->data[((((size_t)(b) * (P)->shape[1] + (h)) * (P)->shape[2] + (i)) * (P)->shape[3] + (j))]

Test(lens_detection_pattern, matches_transformer_lens_construction_on_random_tokens) {
    enum { T = 40 };
    Rng r;
    rng_seed(&r, 3);
    int tok[T];
    for (int i = 0; i < T; i++) tok[i] = (int)rng_below(&r, 6); /* many repeats */
    uint8_t dup[T * T], ind[T * T], prev[T * T];
    lens_detection_pattern(LENS_DUPLICATE_TOKEN, tok, T, dup);
    lens_detection_pattern(LENS_INDUCTION, tok, T, ind);
    lens_detection_pattern(LENS_PREVIOUS_TOKEN, tok, T, prev);
    /* TransformerLens: eq = tokens equal, diagonal 0, tril; induction: roll(eq, 1, dims=1),
     * column 0 zeroed, tril; previous: ones on the first subdiagonal */
    int e[T][T], rolled[T][T], n_ind = 0;
    for (int i = 0; i < T; i++)
        for (int j = 0; j < T; j++) e[i][j] = i != j && j <= i && tok[i] == tok[j];
    for (int i = 0; i < T; i++)
        for (int j = 0; j < T; j++) rolled[i][j] = e[i][(j + T - 1) % T];
    for (int i = 0; i < T; i++) {
        rolled[i][0] = 0;
        for (int j = 0; j < T; j++) {
            int want = j <= i && rolled[i][j];
            cr_assert_eq(ind[i * T + j], want, "induction (%d,%d)", i, j);
            cr_assert_eq(dup[i * T + j], e[i][j], "duplicate (%d,%d)", i, j);
            cr_assert_eq(prev[i * T + j], j == i - 1, "previous (%d,%d)", i, j);
            n_ind += want;
        }
    }
    cr_assert(n_ind > 20, "the tokens repeat, so the induction pattern is not empty (%d)", n_ind);
}

Test(lens_detect_heads, a_previous_token_head_scores_one) {
    enum { T = 16 };
    Arena *a = arena_new("t", 0);
    Tensor *P = zeros4(a, 1, 2, T);
    int tok[T];
    for (int i = 0; i < T; i++) tok[i] = i % 5;
    for (int i = 0; i < T; i++) {
        AT(P, 0, 0, i, i > 0 ? i - 1 : 0) = 1; /* head 0: the previous token (query 0: itself) */
        AT(P, 0, 1, i, i) = 1;                 /* head 1: itself */
    }
    double s[2];
    lens_detect_heads(P, tok, 1, T, LENS_PREVIOUS_TOKEN, &(LensDetectOptions){.exclude_bos = 1}, s);
    cr_assert_eq(s[0], 1.0, "%.17g", s[0]);
    cr_assert_eq(s[1], 0.0, "%.17g", s[1]);
    lens_detect_heads(P, tok, 1, T, LENS_PREVIOUS_TOKEN, NULL, s); /* query 0 has no target */
    cr_assert_eq(s[0], (double)(T - 1) / T, "%.17g", s[0]);
    arena_free(a);
}

Test(lens_detect_heads, an_induction_head_scores_one_on_a_repeated_sequence) {
    enum { T = 30, L = 7 };
    Arena *a = arena_new("t", 0);
    Tensor *P = zeros4(a, 2, 3, T);
    int tok[2 * T];
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < T; i++) tok[b * T + i] = (3 * (i % L) + b) % 64; /* distinct in L */
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < T; i++) {
            AT(P, b, 0, i, i >= L ? i - L + 1 : 0) = 1; /* induction; before the repeat: key 0 */
            AT(P, b, 1, i, i >= L ? i - L : 0) = 1;     /* the earlier copy (duplicate token) */
            AT(P, b, 2, i, i > 0 ? i - 1 : 0) = 1;      /* previous token */
        }
    double ind[3], dup[3];
    LensDetectOptions no_bos = {.exclude_bos = 1};
    lens_detect_heads(P, tok, 2, T, LENS_INDUCTION, &no_bos, ind);
    lens_detect_heads(P, tok, 2, T, LENS_DUPLICATE_TOKEN, &no_bos, dup);
    cr_assert_eq(ind[0], 1.0, "%.17g", ind[0]);
    cr_assert_eq(dup[1], 1.0, "%.17g", dup[1]);
    cr_assert_eq(ind[1], 0.0, "%.17g", ind[1]);
    cr_assert_eq(dup[0], 0.0, "%.17g", dup[0]);
    cr_assert_eq(ind[2], 0.0, "%.17g", ind[2]);                 /* tokens distinct within L: none */
    lens_detect_heads(P, tok, 2, T, LENS_INDUCTION, NULL, ind); /* the first L rows count */
    cr_assert_eq(ind[0], (double)(T - L) / T, "%.17g", ind[0]);
    arena_free(a);
}

Test(lens_detect_heads, heads_spread_evenly_score_the_closed_forms) {
    enum { T = 64 };
    Arena *a = arena_new("t", 0);
    Tensor *P = zeros4(a, 1, 2, T);
    int tok[T];
    for (int i = 0; i < T; i++) tok[i] = i;
    for (int i = 0; i < T; i++)
        for (int j = 0; j < T; j++) {
            if (j <= i) AT(P, 0, 0, i, j) = (Real)(1.0 / (i + 1)); /* causal, even */
            AT(P, 0, 1, i, j) = (Real)(1.0 / T);                   /* every key, even */
        }
    double s[2], harmonic = 0;
    for (int k = 1; k <= T; k++) harmonic += 1.0 / k;
    lens_detect_heads(P, tok, 1, T, LENS_PREVIOUS_TOKEN, NULL, s);
    double tol = sizeof(Real) == sizeof(double) ? 1e-14 : 1e-6;
    cr_assert_float_eq(s[0], (harmonic - 1) / T, tol, "%.17g vs %.17g", s[0], (harmonic - 1) / T);
    cr_assert_float_eq(s[1], (double)(T - 1) / ((double)T * T), tol, "%.17g", s[1]);
    cr_assert(s[1] > 0.9 / T && s[1] < 1.0 / T);
    arena_free(a);
}

Test(lens_detect_heads, a_batch_scores_the_mean_of_its_sequences_and_options_apply) {
    enum { T = 4 };
    Arena *a = arena_new("t", 0);
    Tensor *P = zeros4(a, 2, 1, T);
    int tok[2 * T] = {0, 1, 2, 3, 0, 1, 2, 3};
    for (int i = 0; i < T; i++) {
        AT(P, 0, 0, i, i > 0 ? i - 1 : 0) = 1; /* sequence 0: previous token */
        AT(P, 1, 0, i, i) = 1;                 /* sequence 1: the current token */
    }
    double s;
    lens_detect_heads(P, tok, 2, T, LENS_PREVIOUS_TOKEN, NULL, &s);
    cr_assert_eq(s, 0.5 * (3.0 / 4 + 0.0), "%.17g", s);
    /* without the current token sequence 1 keeps no mass at all: it scores 0, not NaN */
    lens_detect_heads(P, tok, 2, T, LENS_PREVIOUS_TOKEN,
                      &(LensDetectOptions){.exclude_current_token = 1}, &s);
    cr_assert_eq(s, 0.5 * (1.0 + 0.0), "%.17g", s);
    cr_assert_str_eq(lens_head_kind_name(LENS_INDUCTION), "induction");
    arena_free(a);
}

/* ---- misuse: aborts naming the function and both shapes ---- */
typedef struct {
    int ndim, shape[4], B, T;
} Misuse;

static void detect_misuse(void *ctx) {
    const Misuse *m = ctx;
    Arena *a = arena_new("t", 0);
    Tensor *P = tensor_zeros(a, m->ndim, m->shape, "pattern");
    int tok[64] = {0};
    double s[8];
    lens_detect_heads(P, tok, m->B, m->T, LENS_INDUCTION, NULL, s);
}

Test(lens_detect_heads, shape_mismatches_abort_naming_the_function_and_shapes) {
    const struct {
        Misuse m;
        const char *pattern, *tokens;
    } rows[] = {
        {{3, {2, 4, 4}, 2, 4}, "(2,4,4)", "(2,4)"},      /* not 4-D */
        {{4, {2, 1, 4, 4}, 3, 4}, "(2,1,4,4)", "(3,4)"}, /* B differs */
        {{4, {2, 1, 4, 4}, 2, 5}, "(2,1,4,4)", "(2,5)"}, /* T differs */
        {{4, {1, 1, 4, 3}, 1, 4}, "(1,1,4,3)", "(1,4)"}, /* not square */
    };
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        Capture c;
        capture_run(detect_misuse, (void *)&rows[k].m, &c);
        cr_assert(capture_aborted(&c), "row %zu did not abort: %s", k, c.err);
        cr_assert(capture_has(&c, "lens_detect_heads") && capture_has(&c, rows[k].pattern) &&
                      capture_has(&c, rows[k].tokens),
                  "row %zu: %s", k, c.err);
    }
}

Test(lens_detect_heads, a_null_pattern_aborts, .signal = SIGABRT) {
    double s;
    lens_detect_heads(NULL, (int[]){0}, 1, 1, LENS_INDUCTION, NULL, &s);
}

/* lens_detect_ceiling: the share of queries with a target, which a perfect head scores */
Test(lens_detect_ceiling, a_perfect_head_scores_it_and_no_head_more) {
    enum { B = 3, T = 24 };
    Rng r;
    rng_seed(&r, 5);
    int tok[B * T];
    for (int i = 0; i < B * T; i++) tok[i] = (int)rng_below(&r, 5);
    Arena *a = arena_new("t", 0);
    Tensor *P = zeros4(a, B, 2, T);
    uint8_t D[T * T];
    for (int kind = 0; kind < LENS_N_HEAD_KINDS; kind++) {
        double want = 0;
        for (int b = 0; b < B; b++) {
            lens_detection_pattern((LensHeadKind)kind, tok + b * T, T, D);
            int rows = 0;
            for (int i = 0; i < T; i++) {
                int n = 0;
                for (int j = 0; j <= i; j++) n += D[i * T + j];
                rows += n > 0;
                /* head 0: spread over the row's targets (else on key 0); head 1: itself */
                for (int j = 0; j <= i; j++)
                    AT(P, b, 0, i, j) = n ? (Real)D[i * T + j] / n : (Real)(j == 0);
                for (int j = 0; j < T; j++) AT(P, b, 1, i, j) = j == i;
            }
            want += (double)rows / T / B;
        }
        double c = lens_detect_ceiling((LensHeadKind)kind, tok, B, T), s[2];
        lens_detect_heads(P, tok, B, T, (LensHeadKind)kind, NULL, s);
        cr_assert_float_eq(c, want, 1e-12, "%s: %.17g, not %.17g",
                           lens_head_kind_name((LensHeadKind)kind), c, want);
        cr_assert_float_eq(s[0], c, 1e-6, "%s: the perfect head %.17g",
                           lens_head_kind_name((LensHeadKind)kind), s[0]);
        cr_assert(s[1] <= c + 1e-12, "no head scores above it");
        cr_assert(c > 0 && c < 1, "%.17g", c);
    }
    /* a repeated sequence: every query after the first copy of the prefix */
    int rep[8] = {1, 2, 3, 4, 1, 2, 3, 4};
    cr_assert_eq(lens_detect_ceiling(LENS_INDUCTION, rep, 1, 8), 0.5);
    cr_assert_eq(lens_detect_ceiling(LENS_PREVIOUS_TOKEN, rep, 1, 8), 7.0 / 8);
    arena_free(a);
}

Test(lens_detect_ceiling, an_empty_batch_aborts, .signal = SIGABRT) {
    lens_detect_ceiling(LENS_INDUCTION, (int[1]){0}, 0, 1);
}
