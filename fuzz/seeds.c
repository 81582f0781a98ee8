/* seeds.c: writes the seed corpora of the fuzz harnesses from files the project itself makes:
 * TSV lines from the toy corpus generator (data/corpus.h), vocabularies and checkpoints from
 * the translation example's own functions (tiny models, with and without optimizer state,
 * several configurations and deflate levels), .npz files of every dtype from npz_write, the
 * .npy entries cut out of stored .npz files, typical command lines, and saved tokenizers,
 * training texts and token shards (src/text), attograd-gpt's checkpoints and --prompts files,
 * safetensors files (the reference library's, and every dtype from st_write), configurations
 * transformers wrote.
 * Usage: seeds OUT_DIR  (writes OUT_DIR/<harness>/<name>; make fuzz runs it, built with the
 * default toolchain). Not here: the harnesses (fuzz/<harness>.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "corpus.h"
#include "npz_internal.h"
#include "translate.h"

static char out_dir[512];

static void die(const char *what) {
    fprintf(stderr, "seeds: %s: %s\n", what, ag_last_error());
    exit(1);
}

static void path_of(char *buf, size_t cap, const char *harness, const char *name) {
    snprintf(buf, cap, "%s/%s/%s", out_dir, harness, name);
}

static void put(const char *harness, const char *name, const void *data, size_t n) {
    char dir[600], path[700];
    snprintf(dir, sizeof dir, "%s/%s", out_dir, harness);
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "seeds: %s: %s\n", dir, strerror(errno));
        exit(1);
    }
    path_of(path, sizeof path, harness, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "seeds: %s: %s\n", path, strerror(errno));
        exit(1);
    }
}

static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) die(path);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(*n ? *n : 1);
    if (fread(b, 1, *n, f) != *n) die(path);
    fclose(f);
    return b;
}

/* copies an existing file into another harness's seeds */
static void put_file(const char *harness, const char *name, const char *path) {
    size_t n;
    unsigned char *b = slurp(path, &n);
    put(harness, name, b, n);
    free(b);
}

/* ---- tsv: lines of the toy corpora ---- */
static void tsv_seeds(void) {
    static const CorpusTask tasks[] = {CORPUS_TRANSLATE, CORPUS_COPY, CORPUS_REVERSE};
    static const char *const names[] = {"translate", "copy", "reverse"};
    for (int t = 0; t < 3; t++) {
        CorpusConfig cfg = corpus_default_config(tasks[t]);
        for (int s = 0; s < CORPUS_NSPLITS; s++) cfg.n[s] = 0;
        cfg.n[CORPUS_TRAIN] = 24;
        Corpus c;
        if (corpus_generate(&cfg, &c) != AG_OK) die("corpus_generate");
        for (int part = 0; part < 2; part++) {
            char text[8192] = "", name[64];
            size_t len = 0;
            for (size_t i = (size_t)part * 12; i < (size_t)part * 12 + 12; i++)
                len += (size_t)snprintf(
                    text + len, sizeof text - len, "%s\t%s%s\n", c.split[CORPUS_TRAIN].pairs[i].src,
                    c.split[CORPUS_TRAIN].pairs[i].tgt, part == 1 && i % 3 == 0 ? "\r" : "");
            snprintf(name, sizeof name, "%s_%d.tsv", names[t], part);
            put("tsv", name, text, len);
        }
        corpus_free(&c);
    }
}

/* ---- vocab and checkpoint: the translation example's own files ---- */
static void model_seeds(void) {
    char tsv[700];
    path_of(tsv, sizeof tsv, "tsv", "translate_0.tsv");
    TxtVocab src, tgt;
    txt_vocab_init(&src);
    txt_vocab_init(&tgt);
    TxtPairSet d;
    if (txt_pairs_read(tsv, &d, &src, &tgt, 1, 0) != AG_OK) die(tsv);
    size_t vlen;
    char *vocab = txt_vocab_pair_save(&src, &tgt, &vlen);
    put("vocab", "translate.vocab", vocab, vlen);
    TxtVocab s2, t2;
    txt_vocab_init(&s2);
    txt_vocab_init(&t2);
    txt_vocab_add(&s2, "a", 1);
    txt_vocab_add(&t2, "b", 1);
    size_t slen;
    char *small = txt_vocab_pair_save(&s2, &t2, &slen);
    put("vocab", "small.vocab", small, slen);

    for (int variant = 0; variant < 4; variant++) {
        Seq2SeqConfig cfg = nn_seq2seq_default_config(src.n, tgt.n, 8, 2, 1);
        cfg.layer.d_ff = 16;
        cfg.max_len = 16;
        cfg.layer.dropout = 0.1;
        OptimConfig oc = optim_defaults(OPTIM_ADAM);
        if (variant == 3) { /* every switch the other way */
            cfg.n_enc_layers = 0;
            cfg.tie_output = 1;
            cfg.learned_pos = 1;
            cfg.layer.n_kv_heads = 1;
            cfg.layer.pre_ln = 1;
            cfg.layer.act = NN_GELU;
            oc = optim_defaults(OPTIM_SGD);
            oc.momentum = 0.9;
            oc.schedule = (OptimSchedule){OPTIM_WARMUP_COSINE, 2, 100, 1e-5};
        }
        Arena *a = arena_new("seeds", 0);
        Rng init, rng;
        rng_seed(&init, 1);
        rng_seed(&rng, 2);
        Seq2Seq m;
        nn_seq2seq_init(&m, a, &init, &cfg);
        Optimizer *opt = optim_new(a, &m.params, &oc);
        /* the trainer's data.position of a run at step 0 (POS_* in train.c): epoch 0, cursor 0, seed 7,
         * batch 1, 1 pair, no best, nothing accumulated, log and validate every step, save
         * with validation, all valid pairs, 1 step, no clipping */
        Checkpoint st = {.params = &m.params,
                         .config = tr_model_config(&m.cfg),
                         .opt = variant == 2 ? NULL : opt,
                         .rng = &rng,
                         .data = {0, 0, 7, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 1, 0},
                         .n_data = 19,
                         .extra = vocab,
                         .extra_len = vlen};
        char path[700], name[64];
        static const int levels[] = {0, 6, 6, 1};
        snprintf(name, sizeof name, "ckpt_%d.npz", variant);
        path_of(path, sizeof path, "checkpoint", name);
        put("checkpoint", name, "", 0); /* makes the folder */
        if (ckpt_save(path, &st, levels[variant], NULL) != AG_OK) die(path);
        if (variant == 0 || variant == 3) put_file("npz", name, path);
        nn_seq2seq_free(&m);
        arena_free(a);
    }
    free(vocab);
    free(small);
    txt_pairs_free(&d);
    txt_vocab_free(&src);
    txt_vocab_free(&tgt);
    txt_vocab_free(&s2);
    txt_vocab_free(&t2);
}

/* ---- text: saved tokenizers, training texts, token shards (src/text) ---- */
static void text_seeds(void) {
    static const char text[] = "First Citizen:\nBefore we proceed any further, hear me speak.\n\n"
                               "All:\nSpeak, speak.\n\nFirst Citizen:\nYou are all resolved "
                               "rather to die than to famish?\n<|endoftext|>aaaaaaaaaaaaaaaa\n";
    size_t n = sizeof text - 1;
    TxtTokenizer *t[3];
    t[0] = txt_char_new(text, n);
    if (txt_bpe_train(text, n, 320, TXT_SPLIT_GPT2, "seeds", &t[1]) != AG_OK ||
        txt_bpe_train(text, n, 320, TXT_SPLIT_NONE, "seeds", &t[2]) != AG_OK)
        die("txt_bpe_train");
    static const char *names[3] = {"char.tok", "bpe_gpt2.tok", "bpe_none.tok"};
    for (int k = 0; k < 3; k++) {
        if (txt_add_special(t[k], "<|endoftext|>") < 0) die("txt_add_special");
        size_t len;
        uint8_t *b = txt_to_bytes(t[k], &len);
        put("tokenizer", names[k], b, len);
        free(b);
    }
    /* bpe: the first byte picks the vocabulary (256 + byte) and the split (odd: GPT-2) */
    for (int k = 0; k < 2; k++) {
        unsigned char *b = malloc(n + 1);
        b[0] = k ? 0x41 : 0x40;
        memcpy(b + 1, text, n);
        put("bpe", k ? "speech_gpt2" : "speech_none", b, n + 1);
        free(b);
    }
    /* shards: the text's ids, uint16 and uint32 */
    int *ids;
    size_t n_ids;
    if (txt_encode_alloc(t[1], text, n, TXT_SPECIAL_ALLOW, &ids, &n_ids, "seeds") != AG_OK)
        die("txt_encode_alloc");
    char path[700];
    put("shard", "u16.bin", "", 0);
    path_of(path, sizeof path, "shard", "u16.bin");
    if (txt_shard_write(path, ids, n_ids, txt_vocab_size(t[1])) != AG_OK) die(path);
    ids[0] = 70000;
    path_of(path, sizeof path, "shard", "u32.bin");
    if (txt_shard_write(path, ids, n_ids, 70001) != AG_OK) die(path);
    free(ids);
    for (int k = 0; k < 3; k++) txt_free(t[k]);
}

/* ---- npz and npy: every dtype, from npz_write ---- */
static void npz_seeds(void) {
    static const float f32[6] = {1, -2, 3.5f, 0, 1e-3f, 7};
    static const double f64[3] = {1, -0.25, 1e300};
    static const int64_t i64[4] = {1, -1, 1LL << 40, 0};
    static const uint64_t u64[4] = {1, 2, 3, ~0ull};
    static const int32_t i32[2] = {-7, 7};
    static const unsigned char u8[5] = "hello";
    char path[700];
    for (int v = 0; v < 3; v++) {
        NpzWriter *w = npz_writer_new();
        npz_writer_force_zip64(w, v == 2);
        npz_add_f32(w, "w", 2, (int64_t[]){2, 3}, f32);
        npz_add_f64(w, "d", 1, (int64_t[]){3}, f64);
        npz_add_i64(w, "train.step", 0, NULL, i64);
        npz_add_u64(w, "rng.state", 1, (int64_t[]){4}, u64);
        npz_add_i32(w, "i", 4, (int64_t[]){1, 1, 2, 1}, i32);
        npz_add_bytes(w, "meta.extra", u8, 5);
        npz_add_f32(w, "empty", 2, (int64_t[]){0, 3}, NULL);
        char name[32];
        snprintf(name, sizeof name, "dtypes_%d.npz", v);
        put("npz", name, "", 0);
        path_of(path, sizeof path, "npz", name);
        if (npz_write(w, path, v == 1 ? 6 : 0, NULL) != AG_OK) die(path);
        npz_writer_free(w);
    }
    /* each entry of a stored archive, cut out after its local header: a .npy as numpy has it */
    size_t n;
    path_of(path, sizeof path, "npz", "dtypes_0.npz");
    unsigned char *z = slurp(path, &n);
    size_t off = 0;
    for (int k = 0; off + ZIP_LOCAL_SIZE <= n && get32(z + off) == ZIP_LOCAL_SIG; k++) {
        uint32_t size = get32(z + off + 18);
        size_t nlen = get16(z + off + 26), xlen = get16(z + off + 28);
        size_t data = off + ZIP_LOCAL_SIZE + nlen + xlen;
        char name[64];
        snprintf(name, sizeof name, "entry_%d.npy", k);
        put("npy", name, z + data, size);
        off = data + size;
    }
    free(z);
}

/* ---- safetensors: the reference library's files (tests/fixtures), every dtype from st_write ---- */
static void safetensors_seeds(void) {
    static const char *const fixtures[] = {"reference", "specials", "sharded/model-00001-of-00002"};
    char path[700], name[64];
    for (size_t i = 0; i < sizeof fixtures / sizeof fixtures[0]; i++) {
        snprintf(path, sizeof path, "tests/fixtures/safetensors/%s.safetensors", fixtures[i]);
        snprintf(name, sizeof name, "fixture_%zu.safetensors", i);
        put_file("safetensors", name, path);
    }
    static const unsigned char bytes[16] = {0, 0x3c, 0x80, 0x3f, 1, 2, 3, 4, 0xff, 0x7f};
    StWriter *w = st_writer_new();
    for (int d = 0; d < ST_N_DTYPES; d++) {
        snprintf(name, sizeof name, "t.%s", st_dtype_name((StDtype)d));
        st_add(w, name, (StDtype)d, 1, (int64_t[]){(int64_t)(16 / st_dtype_size((StDtype)d))},
               bytes);
    }
    st_add(w, "scalar", ST_F32, 0, NULL, bytes);
    st_add(w, "empty", ST_F16, 2, (int64_t[]){0, 4}, NULL);
    st_add_meta(w, "source", "seeds.c");
    put("safetensors", "dtypes.safetensors", "", 0);
    path_of(path, sizeof path, "safetensors", "dtypes.safetensors");
    if (st_write(w, path, NULL) != AG_OK) die(path);
    st_writer_free(w);
}

/* ---- hf_load: a byte choosing the configuration, then weights transformers wrote ---- */
static void hf_load_seeds(void) {
    static const char *const files[] = {"tests/fixtures/hf/gpt2_gelu/model.safetensors",
                                        "tests/fixtures/hf/llama_tied/model.safetensors",
                                        "tests/fixtures/hf/neox/model.safetensors"};
    static const char *const names[] = {"gpt2_gelu", "llama_tied", "neox"};
    for (int k = 0; k < 3; k++) {
        size_t n;
        unsigned char *b = slurp(files[k], &n), *s = malloc(n + 1);
        s[0] = (unsigned char)k;
        memcpy(s + 1, b, n);
        put("hf_load", names[k], s, n + 1);
        free(s);
        free(b);
    }
}

/* ---- hf_config: configurations transformers wrote (tests/fixtures/hf) ---- */
static void hf_config_seeds(void) {
    put_file("hf_config", "tiny_gelu.json", "tests/fixtures/hf/tiny_gelu/config.json");
    put_file("hf_config", "gpt2_default.json", "tests/fixtures/hf/gpt2_default/config.json");
    put_file("hf_config", "llama.json", "tests/fixtures/hf/llama/config.json");
    put_file("hf_config", "llama_tied.json", "tests/fixtures/hf/llama_tied/config.json");
    put_file("hf_config", "neox.json", "tests/fixtures/hf/neox/config.json");
}

/* ---- hf_tokenizer: tokenizer.json files the tokenizers library wrote (tests/fixtures) ---- */
static void hf_tokenizer_seeds(void) {
    static const char *const names[] = {"gpt2", "neox", "smollm", "llama", "llama_metaspace"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        char from[256], name[64];
        snprintf(from, sizeof from, "tests/fixtures/tokenizers/%s/tokenizer.json", names[k]);
        snprintf(name, sizeof name, "%s.json", names[k]);
        put_file("hf_tokenizer", name, from);
    }
}

/* ---- cli: command lines, one argument a line ---- */
static void cli_seeds(void) {
    static const char *const lines[] = {
        "train\n--data\nbuild/data\n--steps\n100\n--d-model\n64\n--heads\n4",
        "train\n--optim=adamw\n--schedule\ncosine\n--warmup\n10\n--lr\n3e-4\n--clip\n1",
        "train\n--kv-heads\n2\n--heads\n4\n--pre-ln\n--act\ngelu\n--epochs\n3\n--resume",
        "train\n--layers\n2\n--enc-layers\n0\n--tie-output\n--learned-pos\n--max-len\n32",
        "eval\n--ckpt\nbuild/translate/best.npz\n--batch\n16\n--hyps\nh.tsv\ntest.tsv",
        "translate\n--beam\n4\n--alpha=0.6\nthe black cat sleeps",
        "attention\n--sentence\nthe cat\n--target\nle chat\n--out\nbuild/a\n--no-plot",
        "heads\n--data\nvalid.tsv\n--max\n10\n--batch\n8\n--threads\n2",
        "help\ntrain",
        "--help",
        "translate\n--\n--not-a-flag",
    };
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "line_%zu", i);
        put("cli", name, lines[i], strlen(lines[i]));
    }
}

/* attograd-gpt's inputs: tiny checkpoints (GPT-2's and LLaMA's styles, stored and deflated) as
 * its train writes them (the model, its configuration, the tokenizer in meta.extra), and
 * --prompts files */
static void gpt_seeds(void) {
    static const char text[] = "abba cab.\nbac abc!\n";
    TxtTokenizer *tok = txt_char_new(text, sizeof text - 1);
    size_t tlen;
    void *tb = txt_to_bytes(tok, &tlen);
    put("gpt", "empty", "", 0);
    for (int v = 0; v < 2; v++) {
        GptConfig c = {.style = v ? NN_LLAMA : NN_GPT2,
                       .vocab_size = txt_vocab_size(tok),
                       .block_size = 8,
                       .n_layer = 1,
                       .n_head = 2,
                       .n_embd = 8};
        Arena *a = arena_new("params", 0);
        Rng r;
        rng_seed(&r, 1);
        Gpt m;
        nn_gpt_init(&m, a, &r, &c);
        Checkpoint ck = {.params = &m.params,
                         .config = nn_gpt_ckpt_config(&m.cfg),
                         .extra = tb,
                         .extra_len = tlen};
        char path[700];
        path_of(path, sizeof path, "gpt", v ? "llama.npz" : "gpt2.npz");
        if (ckpt_save(path, &ck, v ? 6 : 0, NULL) != AG_OK) die(path);
        nn_gpt_free(&m);
        arena_free(a);
    }
    put("prompts", "rows.txt", "abba\nbaab\nab c\n", 15);
    put("prompts", "one.txt", "ab", 2);
    free(tb);
    txt_free(tok);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: seeds OUT_DIR\n");
        return 2;
    }
    snprintf(out_dir, sizeof out_dir, "%s", argv[1]);
    if (mkdir(out_dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "seeds: %s: %s\n", out_dir, strerror(errno));
        return 1;
    }
    tsv_seeds();
    model_seeds();
    npz_seeds();
    cli_seeds();
    text_seeds();
    gpt_seeds();
    safetensors_seeds();
    hf_config_seeds();
    hf_tokenizer_seeds();
    hf_load_seeds();
    return 0;
}
