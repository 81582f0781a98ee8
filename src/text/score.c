/* score.c: exact match, token accuracy and corpus BLEU-4 over token ids (score.h).
 * Not here: the vocabulary (vocab.c). Read next: docs/text.md, "Scores". */
#include "score.h"

#include <math.h>
#include <stdlib.h>

#include "../tensor/tensor.h"
#include "vocab.h"

/* Occurrences of the n-gram a[0..n) in x[0..len). */
static int count_ngram(const int *x, int len, const int *a, int n) {
    int c = 0;
    for (int i = 0; i + n <= len; i++) {
        int k = 0;
        while (k < n && x[i + k] == a[k]) k++;
        c += k == n;
    }
    return c;
}

void txt_score_add(TxtScore *s, const int *hyp, int hyp_len, const int *ref, int ref_len) {
    AG_CHECK_ARG(s);
    AG_CHECK(hyp != NULL || hyp_len == 0, "%s: argument '%s' is NULL", __func__, "hyp");
    AG_CHECK(ref != NULL || ref_len == 0, "%s: argument '%s' is NULL", __func__, "ref");
    AG_CHECK(hyp_len >= 0 && ref_len >= 0, "txt_score_add: lengths %d and %d", hyp_len, ref_len);
    /* a reference UNK stands for a word outside the vocabulary: give it an id no hypothesis
     * holds (-1) */
    int *r = malloc((size_t)(ref_len + 1) * sizeof(int));
    AG_CHECK(r != NULL, "txt_score_add: out of memory (%d ids)", ref_len);
    for (int i = 0; i < ref_len; i++) r[i] = ref[i] == TXT_UNK ? -1 : ref[i];
    int exact = hyp_len == ref_len;
    for (int i = 0; i < ref_len; i++) {
        int ok = i < hyp_len && hyp[i] == r[i];
        s->tok_correct += ok;
        exact = exact && ok;
    }
    s->n_sent++;
    s->n_exact += exact;
    s->ref_tokens += ref_len;
    s->hyp_len += hyp_len;
    s->ref_len += ref_len;
    for (int n = 1; n <= 4; n++) {
        if (hyp_len < n) break;
        s->total[n - 1] += hyp_len - n + 1;
        /* each distinct n-gram of hyp once (at its first occurrence): min(count in hyp, in ref) */
        for (int i = 0; i + n <= hyp_len; i++) {
            if (count_ngram(hyp, i + n - 1, hyp + i, n) > 0) continue; /* seen before */
            int ch = count_ngram(hyp, hyp_len, hyp + i, n),
                cr = count_ngram(r, ref_len, hyp + i, n);
            s->match[n - 1] += ch < cr ? ch : cr;
        }
    }
    free(r);
}

double txt_score_exact(const TxtScore *s) {
    AG_CHECK_ARG(s);
    return s->n_sent ? (double)s->n_exact / (double)s->n_sent : 0;
}

double txt_score_tokens(const TxtScore *s) {
    AG_CHECK_ARG(s);
    return s->ref_tokens ? (double)s->tok_correct / (double)s->ref_tokens : 0;
}

double txt_score_bleu(const TxtScore *s) {
    AG_CHECK_ARG(s);
    double log_sum = 0;
    for (int n = 0; n < 4; n++) {
        if (s->total[n] == 0 || s->match[n] == 0) return 0;
        log_sum += log((double)s->match[n] / (double)s->total[n]);
    }
    double bp = s->hyp_len < s->ref_len ? exp(1.0 - (double)s->ref_len / (double)s->hyp_len) : 1;
    return 100.0 * bp * exp(log_sum / 4);
}
