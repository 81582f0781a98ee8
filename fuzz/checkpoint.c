/* checkpoint.c: the checkpoint loader, as the library's users and attograd-translate call it.
 * The library: ckpt_read with the seq2seq model's configuration fields (tr_model_config), then
 * the model it describes (and its optimizer when the file has one) built, then ckpt_load_from
 * with the RNG, the trainer's data position and the extra bytes. The example's loader: tr_load (configuration checks, the
 * vocabularies in meta.extra, the step arena), then one greedy translation of two words.
 * Whatever the file says, nothing may abort, and a failure must leave a message naming it.
 * A file that is accepted holds only valid values (checkpoint.h, ckpt_read's rules): finite
 * weights and optimizer state, Adam's second moment >= 0, a step in [0, CKPT_MAX_STEP], an RNG
 * state not all zeros, and for the example a data position that passed tr_check_position.
 * The entries' CRC-32 is not checked here (npz_test_skip_crc), else nearly every change the
 * fuzzer makes inside an entry would stop there. */
#include <math.h>
#include <string.h>

#include "fuzz.h"
#include "io/npz_internal.h"
#include "translate.h"

/* the invariant of an accepted file: every value of t finite (and >= lo) */
static void check_values(const Tensor *t, double lo) {
    for (size_t k = 0; k < t->size; k++)
        FUZZ_CHECK(isfinite((double)t->data[k]) && (double)t->data[k] >= lo,
                   "accepted %s[%zu] = %g", t->name, k, (double)t->data[k]);
}

static void check_model(const Seq2Seq *m) {
    for (int i = 0; i < m->params.n; i++) check_values(m->params.items[i], -HUGE_VAL);
}

static void library_load(const char *path) {
    Seq2SeqConfig cfg = {0};
    OptimConfig oc;
    int has_optim = 0;
    CkptConfig kc = tr_model_config(&cfg);
    NpzFile *f;
    int rc = ckpt_read(path, &kc, &f);
    if (rc == AG_OK) {
        rc = ckpt_optim_config(f, &oc, &has_optim);
        FUZZ_CHECK(rc == AG_OK, "an accepted file's optimizer: %s", ag_last_error());
    }
    if (rc != AG_OK) {
        fuzz_check_failure(rc, path);
        return;
    }
    int64_t n_params = 0;
    FUZZ_CHECK(nn_seq2seq_check_config(&cfg, &n_params, NULL) == AG_OK, "%s", ag_last_error());
    Arena *a = arena_new("fuzz", 0);
    Rng init, rng;
    rng_seed(&init, 1);
    rng_seed(&rng, 2);
    Seq2Seq m;
    nn_seq2seq_init(&m, a, &init, &cfg);
    FUZZ_CHECK((int64_t)ag_params_count(&m.params) == n_params, "%zu parameters, %lld counted",
               ag_params_count(&m.params), (long long)n_params);
    Optimizer *opt = has_optim ? optim_new(a, &m.params, &oc) : NULL;
    Checkpoint st = {.params = &m.params,
                     .config = tr_model_config(&m.cfg),
                     .opt = opt,
                     .rng = &rng,
                     .n_data = 19}; /* the trainer's data.position (fuzz/seeds.c) */
    rc = ckpt_load_from(f, &st);
    npz_free(f);
    if (rc == AG_OK) {
        FUZZ_CHECK((st.extra == NULL) == (st.extra_len == 0), "extra %p, %zu bytes", st.extra,
                   st.extra_len);
        check_model(&m);
        for (int i = 0; opt && i < optim_state_count(opt); i++) {
            const Tensor *t = optim_state_tensor(opt, i);
            size_t n = strlen(t->name);
            check_values(t, n > 11 && strcmp(t->name + n - 11, ".exp_avg_sq") == 0 ? 0 : -HUGE_VAL);
        }
        FUZZ_CHECK(!opt || (optim_get_step(opt) >= 0 && optim_get_step(opt) <= CKPT_MAX_STEP),
                   "accepted step %lld", (long long)optim_get_step(opt));
        FUZZ_CHECK(rng.s[0] | rng.s[1] | rng.s[2] | rng.s[3], "accepted an all-zero RNG");
        free((void *)st.extra);
    } else {
        fuzz_check_failure(rc, path);
        FUZZ_CHECK(st.extra == NULL, "a failed load returned extra bytes");
    }
    nn_seq2seq_free(&m);
    arena_free(a);
}

static void translator_load(const char *path) {
    Translator tr;
    int rc = tr_load(&tr, path);
    if (rc != AG_OK) {
        fuzz_check_failure(rc, path);
        return;
    }
    check_model(&tr.model);
    FUZZ_CHECK(tr.trained_steps >= 0 && tr.trained_steps <= CKPT_MAX_STEP, "accepted step %lld",
               (long long)tr.trained_steps);
    FUZZ_CHECK(tr.src.n == tr.model.cfg.src_vocab && tr.tgt.n == tr.model.cfg.tgt_vocab,
               "vocabularies %d, %d for a model of %d, %d", tr.src.n, tr.tgt.n,
               tr.model.cfg.src_vocab, tr.model.cfg.tgt_vocab);
    int src[2] = {TXT_N_SPECIAL % tr.src.n, (TXT_N_SPECIAL + 1) % tr.src.n}, out[64];
    int n = tr_translate_ids(&tr, src, 2, 1, 0.6, out, 64);
    /* finite weights may overflow: refused (AG_ERR_RANGE), never an abort */
    FUZZ_CHECK((n >= 0 && n <= 64) || n == AG_ERR_RANGE, "%d ids", n);
    for (int i = 0; i < n; i++) FUZZ_CHECK(out[i] >= 0 && out[i] < tr.tgt.n, "id %d", out[i]);
    tr_free(&tr);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    npz_test_skip_crc(1); /* changed bytes inside entries reach the configuration checks */
    const char *path = fuzz_file(data, size);
    library_load(path);
    translator_load(path);
    return 0;
}
