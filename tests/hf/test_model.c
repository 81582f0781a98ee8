/* test_model.c: HfModel (src/hf/model.c), a GPT with its tokenizer from an attograd checkpoint
 * or a Hugging Face folder: the same weights to the bit, the same tokenizer, train.step, and
 * each way it can fail refused naming the path and the reason with nothing left allocated.
 * Read next: tests/text/test_any.c (the tokenizer), tests/hf/test_load.c (the folder's model). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attograd.h"
#include "files.h"

static const char TEXT[] = "hello, model\n";

/* a small GPT-2 of tok's vocabulary (+ extra ids), its parameters moved from their init */
static Gpt tiny(Arena *a, const TxtTokenizer *tok, int extra) {
    GptConfig c = {.vocab_size = txt_vocab_size(tok) + extra,
                   .block_size = 8,
                   .n_layer = 1,
                   .n_head = 2,
                   .n_embd = 8};
    Rng r;
    rng_seed(&r, 7);
    Gpt m;
    nn_gpt_init(&m, a, &r, &c);
    for (int i = 0; i < m.params.n; i++) {
        Tensor *p = m.params.items[i];
        for (size_t j = 0; j < p->size; j++) p->data[j] = (Real)(0.01 * (double)(j % 17) - 0.05);
    }
    return m;
}

static void same_weights(const Gpt *a, const Gpt *b) {
    cr_assert_eq(a->params.n, b->params.n);
    for (int i = 0; i < a->params.n; i++) {
        const Tensor *x = a->params.items[i], *y = b->params.items[i];
        cr_assert(x->size == y->size && memcmp(x->data, y->data, x->size * sizeof(Real)) == 0, "%s",
                  x->name);
    }
}

/* path as a checkpoint of m with tok's saved form (NULL: none) and step (with an optimizer) */
static void save_ckpt(const char *path, Gpt *m, Arena *a, const TxtTokenizer *tok, int64_t step) {
    size_t n = 0;
    uint8_t *b = tok ? txt_to_bytes(tok, &n) : NULL;
    OptimConfig oc = optim_defaults(OPTIM_ADAMW);
    Optimizer *opt = optim_new(a, &m->params, &oc);
    optim_set_step(opt, step);
    Checkpoint ck = {.params = &m->params,
                     .config = nn_gpt_ckpt_config(&m->cfg),
                     .opt = opt,
                     .extra = b,
                     .extra_len = n};
    cr_assert_eq(ckpt_save(path, &ck, 0, NULL), AG_OK, "%s", ag_last_error());
    free(b);
}

/* what each test starts from: a folder, a tokenizer, a model of its vocabulary (+ extra) */
typedef struct {
    char dir[512], p[512];
    TxtTokenizer *tok;
    Arena *a;
    Gpt m;
} Fx;
static void fx_open(Fx *f, int extra) {
    ts_tmp_dir(f->dir, sizeof f->dir, "hfmodel");
    f->tok = txt_char_new(TEXT, sizeof TEXT - 1);
    f->a = arena_new("params", 0);
    f->m = tiny(f->a, f->tok, extra);
}
static void fx_close(Fx *f) {
    nn_gpt_free(&f->m);
    arena_free(f->a);
    txt_free(f->tok);
    ts_rm_tree(f->dir);
}

Test(hf_model, a_checkpoint_loads_with_its_weights_tokenizer_and_step) {
    Fx f;
    fx_open(&f, 0);
    const char *p = ts_join(f.p, f.dir, "last.npz");
    f.m.cfg.dropout = 0.25; /* kept as trained */
    save_ckpt(p, &f.m, f.a, f.tok, 42);
    HfModel g;
    cr_assert_eq(hf_model_load(p, &g), AG_OK, "%s", ag_last_error());
    same_weights(&f.m, &g.m);
    cr_assert_eq(g.step, 42);
    cr_assert(g.text.tok && !g.text.hf && !g.dir);
    cr_assert(g.m.cfg.dropout == 0.25 && g.m.cfg.vocab_size == f.m.cfg.vocab_size);
    int *ids;
    size_t n;
    cr_assert_eq(txt_any_encode_alloc(&g.text, "hello", 5, &ids, &n, "p"), AG_OK);
    cr_assert_eq(n, 5);
    free(ids);
    hf_model_free(&g);
    cr_assert(!g.arena && !g.text.tok);
    fx_close(&f);
}

Test(hf_model, a_folder_loads_with_attograds_tokenizer_or_a_tokenizer_json) {
    Fx f;
    fx_open(&f, 3); /* a padded vocabulary: fits a tokenizer.json only */
    const char *dir = f.dir;
    char *p = f.p;
    TxtTokenizer *tok = f.tok;
    Gpt *m = &f.m;
    cr_assert(hf_is_folder(dir) && !hf_is_folder(TEXT) && !hf_is_folder(NULL));
    cr_assert_eq(hf_save(m, dir), AG_OK, "%s", ag_last_error());
    HfModel g;
    cr_assert_eq(hf_model_load(dir, &g), AG_ERR_FORMAT);
    cr_assert(strstr(ag_last_error(), dir) == ag_last_error() &&
                  strstr(ag_last_error(), ": holds no tokenizer ("),
              "%s", ag_last_error());
    cr_assert(!g.arena && !g.dir);
    cr_assert_eq(txt_write_hf(tok, ts_join(p, dir, "tokenizer.json")), AG_OK);
    cr_assert_eq(hf_model_load(dir, &g), AG_OK, "%s", ag_last_error());
    same_weights(m, &g.m);
    cr_assert(g.text.hf && !g.text.tok && g.step == 0);
    cr_assert_str_eq(g.dir, dir);
    hf_model_free(&g);
    /* attograd's own comes first, and must have as many ids as the model */
    cr_assert_eq(txt_save(tok, ts_join(p, dir, TXT_ANY_OWN_FILE)), AG_OK);
    cr_assert_eq(hf_model_load(dir, &g), AG_ERR_FORMAT);
    char want[1024];
    snprintf(want, sizeof want, "%s: the tokenizer has %d ids, the model %d", dir,
             txt_vocab_size(tok), txt_vocab_size(tok) + 3);
    cr_assert_str_eq(ag_last_error(), want);
    cr_assert(!g.arena && !g.text.tok && !g.text.hf && !g.dir);
    fx_close(&f);
}

Test(hf_model, a_missing_file_or_a_checkpoint_without_tokenizer_is_refused_naming_it) {
    Fx f;
    fx_open(&f, 0);
    char *p = f.p, want[1024];
    HfModel g;
    cr_assert_eq(hf_model_load(ts_join(p, f.dir, "none.npz"), &g), AG_ERR_IO);
    snprintf(want, sizeof want, "%s: cannot read: No such file or directory", p);
    cr_assert_str_eq(ag_last_error(), want);
    save_ckpt(ts_join(p, f.dir, "bare.npz"), &f.m, f.a, NULL, 0);
    cr_assert_eq(hf_model_load(p, &g), AG_ERR_FORMAT);
    snprintf(want, sizeof want, "%s: holds no tokenizer (meta.extra)", p);
    cr_assert_str_eq(ag_last_error(), want);
    cr_assert(!g.arena && !g.text.tok);
    ts_write_text(ts_join(p, f.dir, "text.npz"), "not a checkpoint");
    cr_assert_neq(hf_model_load(p, &g), AG_OK);
    cr_assert(strstr(ag_last_error(), p) == ag_last_error(), "%s", ag_last_error());
    fx_close(&f);
}

/* hf_model_save: the folder holds the model and the tokenizer it was loaded with, and loads
 * back to the same weights and ids; attograd's tokenizer also as tokenizer.json with the
 * tokenizer_config.json transformers needs; a folder's files copied as they were */
static const char TOK_CONFIG[] = "{\n  \"tokenizer_class\": \"PreTrainedTokenizerFast\"\n}\n";

static void same_ids(const HfModel *a, const HfModel *b) {
    int *x, *y;
    size_t nx, ny;
    cr_assert_eq(txt_any_encode_alloc(&a->text, TEXT, sizeof TEXT - 1, &x, &nx, "a"), AG_OK);
    cr_assert_eq(txt_any_encode_alloc(&b->text, TEXT, sizeof TEXT - 1, &y, &ny, "b"), AG_OK);
    cr_assert(nx == ny && memcmp(x, y, nx * sizeof(int)) == 0);
    free(x), free(y);
}

Test(hf_model, a_checkpoint_saves_as_a_folder_with_its_tokenizer_that_loads_back) {
    Fx f;
    fx_open(&f, 0);
    char *p = f.p, out[600], q[700];
    save_ckpt(ts_join(p, f.dir, "last.npz"), &f.m, f.a, f.tok, 3);
    HfModel g, h;
    cr_assert_eq(hf_model_load(p, &g), AG_OK, "%s", ag_last_error());
    ts_join(out, f.dir, "out");
    cr_assert_eq(hf_model_save(&g, out), AG_OK, "%s", ag_last_error());
    char *cfg = ts_read_text(ts_join(q, out, "tokenizer_config.json"), NULL);
    cr_assert_str_eq(cfg, TOK_CONFIG);
    free(cfg);
    TxtTokenizer *back;
    cr_assert_eq(txt_load(ts_join(q, out, TXT_ANY_OWN_FILE), &back), AG_OK, "%s", ag_last_error());
    cr_assert_eq(txt_vocab_size(back), txt_vocab_size(f.tok));
    txt_free(back);
    TxtHf *json;
    cr_assert_eq(txt_hf_load(ts_join(q, out, "tokenizer.json"), &json), AG_OK, "%s",
                 ag_last_error());
    txt_hf_free(json);
    cr_assert_eq(hf_model_load(out, &h), AG_OK, "%s", ag_last_error());
    same_weights(&g.m, &h.m);
    cr_assert(h.text.tok && h.dir);
    same_ids(&g, &h);
    hf_model_free(&h);
    /* a file where the folder should be: refused naming it */
    ts_write_text(ts_join(q, f.dir, "a_file"), "x");
    cr_assert_neq(hf_model_save(&g, q), AG_OK);
    cr_assert(strstr(ag_last_error(), q) == ag_last_error(), "%s", ag_last_error());
    hf_model_free(&g);
    fx_close(&f);
}

Test(hf_model, a_folders_tokenizer_files_are_copied_and_a_checkpoints_tokenizer_json_written) {
    Fx f;
    fx_open(&f, 3); /* a padded vocabulary, as a published tokenizer.json may have */
    char *p = f.p, src[600], out[600], q[700], r[700];
    ts_join(src, f.dir, "src");
    cr_assert_eq(hf_save(&f.m, src), AG_OK, "%s", ag_last_error());
    cr_assert_eq(txt_write_hf(f.tok, ts_join(p, src, "tokenizer.json")), AG_OK);
    ts_write_text(ts_join(p, src, "special_tokens_map.json"), "{}\n");
    HfModel g, h, k;
    cr_assert_eq(hf_model_load(src, &g), AG_OK, "%s", ag_last_error());
    cr_assert(g.text.hf && g.dir);
    ts_join(out, f.dir, "out");
    cr_assert_eq(hf_model_save(&g, out), AG_OK, "%s", ag_last_error());
    cr_assert(ts_same_file(ts_join(q, out, "tokenizer.json"), ts_join(r, src, "tokenizer.json")));
    cr_assert(ts_same_file(ts_join(q, out, "special_tokens_map.json"),
                           ts_join(r, src, "special_tokens_map.json")));
    cr_assert(access(ts_join(q, out, "vocab.json"), F_OK) != 0); /* only what the folder held */
    cr_assert(access(ts_join(q, out, "tokenizer_config.json"), F_OK) != 0);
    cr_assert_eq(hf_model_load(out, &h), AG_OK, "%s", ag_last_error());
    same_weights(&g.m, &h.m);
    same_ids(&g, &h);
    hf_model_free(&h);
    /* a checkpoint carrying that tokenizer.json (data prepared with the folder's tokenizer) */
    size_t n;
    uint8_t *b = txt_any_to_bytes(&g.text, &n);
    OptimConfig oc = optim_defaults(OPTIM_ADAMW);
    Checkpoint ck = {.params = &f.m.params,
                     .config = nn_gpt_ckpt_config(&f.m.cfg),
                     .opt = optim_new(f.a, &f.m.params, &oc),
                     .extra = b,
                     .extra_len = n};
    cr_assert_eq(ckpt_save(ts_join(p, f.dir, "tuned.npz"), &ck, 0, NULL), AG_OK);
    free(b);
    cr_assert_eq(hf_model_load(p, &k), AG_OK, "%s", ag_last_error());
    cr_assert(k.text.hf && !k.dir);
    ts_join(out, f.dir, "out2");
    cr_assert_eq(hf_model_save(&k, out), AG_OK, "%s", ag_last_error());
    cr_assert(ts_same_file(ts_join(q, out, "tokenizer.json"), ts_join(r, src, "tokenizer.json")));
    char *cfg = ts_read_text(ts_join(q, out, "tokenizer_config.json"), NULL);
    cr_assert_str_eq(cfg, TOK_CONFIG);
    free(cfg);
    cr_assert(access(ts_join(q, out, "special_tokens_map.json"), F_OK) != 0);
    cr_assert_eq(hf_model_load(out, &h), AG_OK, "%s", ag_last_error());
    same_weights(&k.m, &h.m);
    same_ids(&k, &h);
    hf_model_free(&h);
    hf_model_free(&k);
    hf_model_free(&g);
    fx_close(&f);
}
