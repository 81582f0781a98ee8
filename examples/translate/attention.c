/* attention.c: where the model looks, for one sentence. The sentence is translated greedily,
 * then one teacher-forced no-grad forward of (sentence, translation) leaves every attention
 * block's probabilities in its MultiHeadAttention.last_probs; they are copied into the
 * library's LensPatterns (src/lens/heads.h) with the tokens of both sides, which saves them in
 * bertviz's layout (lens_patterns_save) and draws a layer's grid (view_patterns_png).
 * Not here: the forward itself (decode.c, tr_forward_pair), the file and the pictures
 * (src/lens/heads.c, src/view/heads_plot.c), the command line (cli.c). Read next: heads.c. */
#include "translate.h"

#include <stdlib.h>
#include <string.h>

int tr_attention_collect(Translator *tr, const char *sentence, const char *target, TrAttention *a,
                         FILE *warn) {
    memset(a, 0, sizeof *a);
    const Seq2SeqConfig *c = &tr->model.cfg;
    int L = c->max_len;
    int *src = ex_calloc((size_t)L, sizeof(int)), *tgt = ex_calloc((size_t)L + 1, sizeof(int));
    int S =
        txt_vocab_tokenize(&tr->src, sentence, src, L - 1, &a->n_unk, warn, TR_PROG " attention: ");
    int T = 0, rc = S == 0 ? ag_fail(AG_ERR_ARG, "the sentence has no words") : AG_OK;
    if (rc == AG_OK) S = tr_cut_words(S, L - 1, warn, TR_PROG " attention: ");
    if (rc == AG_OK && target) {
        int n_unk = 0;
        T = txt_vocab_tokenize(&tr->tgt, target, tgt + 1, L - 1, &n_unk, warn,
                               TR_PROG " attention: target: ");
        if (T > L - 1) T = L - 1;
    } else if (rc == AG_OK) {
        T = tr_translate_ids(tr, src, S, 1, 0, tgt + 1, L - 1);
    }
    if (rc == AG_OK) {
        rc = T < 0 ? T : ex_tensor_finite(tr_forward_pair(tr, src, S, tgt + 1, T), "logits", NULL);
        if (rc != AG_OK && T >= 0) ex_not_finite(rc, tr->path, tr->tape); /* the pair's forward */
    }
    if (rc != AG_OK) {
        free(src);
        free(tgt);
        return rc;
    }
    a->n_enc = c->n_enc_layers;
    a->n_dec = c->n_dec_layers;
    a->S = S + 1;
    a->T = T + 1;
    a->translation = tr_text(&tr->tgt, tgt + 1, T);
    a->source = tr_text(&tr->src, src, S);
    a->caption = ex_calloc(strlen(a->source) + strlen(a->translation) + 8, 1);
    sprintf(a->caption, "%s  ->  %s", a->source, a->translation);
    /* the encoder reads the source + EOS, the decoder BOS + the translation */
    src[S] = TXT_EOS;
    tgt[0] = TXT_BOS;
    const char **tok = ex_calloc((size_t)L + 1, sizeof(char *));
    for (int i = 0; i <= S; i++) tok[i] = txt_vocab_word(&tr->src, src[i]);
    int e = lens_patterns_tokens(&a->p, "encoder_tokens", tok, S + 1);
    for (int i = 0; i <= T; i++) tok[i] = txt_vocab_word(&tr->tgt, tgt[i]);
    int d = lens_patterns_tokens(&a->p, "decoder_tokens", tok, T + 1);
    char name[64];
    for (int l = 0; l < a->n_enc; l++) {
        snprintf(name, sizeof name, "encoder.layers.%d.self_attn", l);
        lens_patterns_add(&a->p, name, "encoder self-attention", l,
                          tr->model.enc[l].self_attn.last_probs, e, e);
    }
    for (int l = 0; l < a->n_dec; l++) {
        snprintf(name, sizeof name, "decoder.layers.%d.self_attn", l);
        lens_patterns_add(&a->p, name, "decoder self-attention", l,
                          tr->model.dec[l].self_attn.last_probs, d, d);
        snprintf(name, sizeof name, "decoder.layers.%d.multihead_attn", l);
        lens_patterns_add(&a->p, name, "decoder cross-attention", l,
                          tr->model.dec[l].multihead_attn.last_probs, d, e);
    }
    free(tok);
    free(src);
    free(tgt);
    return AG_OK;
}

void tr_attention_free(TrAttention *a) {
    lens_patterns_free(&a->p);
    free(a->source);
    free(a->translation);
    free(a->caption);
    memset(a, 0, sizeof *a);
}
