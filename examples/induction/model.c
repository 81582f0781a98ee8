/* model.c: the attention-only transformer of the induction experiment, with attograd's public
 * API. As nanoGPT's GPT without the MLPs and the LayerNorms (Elhage et al. 2021's "attention-only"
 * models, which Olsson et al. 2022 study): token and learned position embeddings summed into
 * the residual stream, n_layer causal multi-head attention layers each adding its output to the
 * stream, and an unembedding to logits.
 *   x = wte(idx) + wpe(pos)
 *   for each layer:  x = x + attn(x)      (causal; heads' probabilities kept in last_probs)
 *   logits = unembed(x)
 * Initialisation: attograd's (PyTorch's) for the attention and the unembedding; the embeddings
 * N(0, 0.02) as nanoGPT's (Embedding's N(0, 1) default, with no LayerNorm after it, makes the
 * first logits large). Not here: the data and the training loop (record.c). Read next:
 * record.c. */
#include "induction.h"

void ind_model_init(AttnOnly *m, Arena *a, Rng *rng, const AttnOnlyConfig *c) {
    *m = (AttnOnly){.cfg = *c};
    NnBuilder b = nn_builder(a, &m->params, rng);
    nn_embedding_init(&m->wte, &b, "wte", c->vocab, c->d_model, NN_NO_PADDING);
    rng_fill_normal(rng, m->wte.weight, 0, 0.02);
    nn_positional_init(&m->wpe, &b, "wpe", c->block, c->d_model, NN_LEARNED);
    for (int l = 0; l < c->n_layer; l++) {
        NnBuilder lb = nn_scope(&b, "blocks.%d", l); /* blocks.<l>.attn.in_proj_weight, ... */
        nn_mha_init(&m->attn[l], &lb, "attn",
                    &(MhaConfig){.d_model = c->d_model, .n_heads = c->n_head});
    }
    nn_linear_init(&m->unembed, &b, "unembed", c->d_model, c->vocab, NN_NO_BIAS);
}

Tensor *ind_model_forward(Tape *t, AttnOnly *m, const int *idx, int B, int T) {
    Tensor *x = nn_positional(t, &m->wpe, nn_embedding(t, &m->wte, idx, B, T), 0); /* (B,T,C) */
    for (int l = 0; l < m->cfg.n_layer; l++)
        x = ag_add(t, x, nn_mha_forward(t, &m->attn[l], x, x, x, &(AgAttnMask){.causal = 1}, NULL));
    return nn_linear(t, &m->unembed, x); /* (B, T, vocab) */
}
