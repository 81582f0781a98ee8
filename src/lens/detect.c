/* detect.c: the head detectors of detect.h: the detection patterns of previous-token,
 * duplicate-token and induction heads, and a head's score on them (the share of its attention
 * on the pattern's positions), following TransformerLens's head_detector.py with its default
 * error measure ("mul"). Plain loops in double: a layer's patterns are B * NH * T * T numbers,
 * read once. Not here: the models whose patterns are scored. Read next: the induction
 * experiment that records these scores while a model trains (examples/induction/). */
#include "detect.h"

#include <stdlib.h>

const char *lens_head_kind_name(LensHeadKind kind) {
    static const char *const names[LENS_N_HEAD_KINDS] = {"previous_token", "duplicate_token",
                                                         "induction"};
    AG_CHECK(kind >= 0 && kind < LENS_N_HEAD_KINDS, "lens_head_kind_name: unknown kind %d",
             (int)kind);
    return names[kind];
}

void lens_detection_pattern(LensHeadKind kind, const int *tokens, int T, uint8_t *D) {
    AG_CHECK_ARG(tokens);
    AG_CHECK_ARG(D);
    AG_CHECK(kind >= 0 && kind < LENS_N_HEAD_KINDS, "lens_detection_pattern: unknown kind %d",
             (int)kind);
    AG_CHECK(T >= 1, "lens_detection_pattern: T %d must be at least 1", T);
    for (int i = 0; i < T; i++)
        for (int j = 0; j < T; j++) {
            int on = 0;
            if (j <= i) switch (kind) {
                case LENS_PREVIOUS_TOKEN: on = j == i - 1; break;
                case LENS_DUPLICATE_TOKEN: on = j < i && tokens[j] == tokens[i]; break;
                default: on = j >= 1 && tokens[j - 1] == tokens[i]; break; /* induction */
                }
            D[(size_t)i * T + j] = (uint8_t)on;
        }
}

void lens_detect_heads(const Tensor *pattern, const int *tokens, int B, int T, LensHeadKind kind,
                       const LensDetectOptions *opt, double *scores) {
    AG_CHECK_ARG(pattern);
    AG_CHECK_ARG(tokens);
    AG_CHECK_ARG(scores);
    AG_CHECK(kind >= 0 && kind < LENS_N_HEAD_KINDS, "lens_detect_heads: unknown kind %d",
             (int)kind);
    AG_CHECK(pattern->ndim == 4 && B >= 1 && T >= 1 && pattern->shape[0] == B &&
                 pattern->shape[2] == T && pattern->shape[3] == T,
             "lens_detect_heads: pattern %s must be (B, NH, T, T) for tokens (%d,%d)",
             tensor_shape_str(pattern), B, T);
    LensDetectOptions o = opt ? *opt : (LensDetectOptions){0};
    int NH = pattern->shape[1];
    uint8_t *D = malloc((size_t)T * T);
    AG_CHECK(D != NULL, "lens_detect_heads: out of memory for a (%d,%d) pattern", T, T);
    for (int h = 0; h < NH; h++) scores[h] = 0;
    for (int b = 0; b < B; b++) {
        lens_detection_pattern(kind, tokens + (size_t)b * T, T, D);
        for (int h = 0; h < NH; h++) {
            const Real *A = pattern->data + ((size_t)b * NH + h) * T * T;
            double on = 0, all = 0; /* mass on the pattern's positions, mass kept */
            for (int i = 0; i < T; i++)
                for (int j = 0; j <= i; j++) {
                    if ((o.exclude_bos && j == 0) || (o.exclude_current_token && j == i)) continue;
                    double a = (double)A[(size_t)i * T + j];
                    all += a;
                    if (D[(size_t)i * T + j]) on += a;
                }
            /* the mass above the diagonal (0 in a causal head) counts in the total, as
             * TransformerLens's sum of the whole pattern */
            for (int i = 0; i < T; i++)
                for (int j = i + 1; j < T; j++) all += (double)A[(size_t)i * T + j];
            scores[h] += all > 0 ? on / all : 0;
        }
    }
    for (int h = 0; h < NH; h++) scores[h] /= B;
    free(D);
}
