/* torch_load.c: loads a PyTorch state_dict saved with numpy (tests/nn/torch_state_dict.py) into
 * attograd's Seq2Seq and compares the logits with PyTorch's. Prints the largest difference and
 * exits 0 when it is under 1e-10 (double build). Usage: torch_load DIR */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "attograd.h"

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/io.npz", argv[1]);
    NpzFile *io;
    if (npz_read(path, &io, NULL) != AG_OK) {
        fprintf(stderr, "%s\n", ag_last_error());
        return 1;
    }
    const NpzEntry *cfg_e = npz_find(io, "config"), *src_e = npz_find(io, "src"),
                   *tgt_e = npz_find(io, "tgt"), *log_e = npz_find(io, "logits");
    if (!cfg_e || !src_e || !tgt_e || !log_e) {
        fprintf(stderr, "%s: missing arrays\n", path);
        return 1;
    }
    const int64_t *c = cfg_e->data;
    Seq2SeqConfig cfg =
        nn_seq2seq_default_config((int)c[0], (int)c[1], (int)c[2], (int)c[3], (int)c[4]);
    cfg.layer.d_ff = (int)c[5];
    cfg.max_len = (int)c[6];
    cfg.pad_id = (int)c[7];
    cfg.layer.dropout = 0;
    Arena *a = arena_new("params", 16 << 20);
    Rng rng;
    rng_seed(&rng, 1);
    Seq2Seq m;
    nn_seq2seq_init(&m, a, &rng, &cfg);
    snprintf(path, sizeof path, "%s/model.npz", argv[1]);
    NpzLoadInfo info;
    if (npz_load_params(&m.params, path, &info) != AG_OK) {
        fprintf(stderr, "%s\n", ag_last_error());
        return 1;
    }
    int B = (int)src_e->shape[0], S = (int)src_e->shape[1], T = (int)tgt_e->shape[1];
    int src[256], tgt[256];
    for (int i = 0; i < B * S; i++) src[i] = (int)((const int64_t *)src_e->data)[i];
    for (int i = 0; i < B * T; i++) tgt[i] = (int)((const int64_t *)tgt_e->data)[i];
    Tape *t = ag_tape_new(arena_new("step", 16 << 20));
    ag_no_grad(t, 1);
    Tensor *memory = nn_seq2seq_encode(t, &m, src, B, S, NULL);
    Tensor *logits = nn_seq2seq_decode(t, &m, memory, src, S, tgt, B, T, NULL);
    const double *want = log_e->data;
    double worst = 0;
    for (size_t i = 0; i < logits->size; i++)
        worst = fmax(worst, fabs((double)logits->data[i] - want[i]));
    printf("  state_dict of %d tensors loaded; logits (%d,%d,%d): max |diff| %.3e\n", info.n_loaded,
           B, T, cfg.tgt_vocab, worst);
    npz_free(io);
    arena_free(t->arena);
    ag_tape_free(t);
    nn_seq2seq_free(&m);
    arena_free(a);
    return worst < 1e-10 ? 0 : 1;
}
