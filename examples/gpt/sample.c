/* sample.c: `attograd-gpt sample` (a prompt continued by nn_gpt_generate, each token written
 * to stdout as it comes) and `attograd-gpt eval` (the loss over the whole valid split and bits
 * per byte), both from a checkpoint that holds its model and tokenizer (train.c writes them).
 * Not here: training (train.c). Read next: docs/gpt.md. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpt_cli.h"

#define GP_MAX_PROMPT ((size_t)1 << 20) /* bytes of a prompt (stdin or --prompt) */

/* ---- sample ---- */

/* The generated text as it comes: with attograd's tokenizer each token's bytes; with a
 * tokenizer.json the decode of all ids so far past what is printed (a SentencePiece piece's
 * U+2581 is a space, byte-fallback pieces <0xXX> join into their character, as the library
 * decodes them). ids has room for every id (the prompt's n of them first). */
typedef struct {
    const HfModel *g;
    int *ids;
    size_t n;
    size_t printed; /* bytes of the decode printed (or, for the prompt's ids, the prompt) */
} Stream;

static int print_token(int token, void *ctx) {
    Stream *s = ctx;
    s->ids[s->n++] = token;
    if (!s->g->text.hf) {
        size_t len;
        const uint8_t *b = txt_any_token_bytes(&s->g->text, token, &len);
        fwrite(b, 1, len, stdout);
    } else {
        char *text;
        size_t len;
        if (txt_any_decode_alloc(&s->g->text, s->ids, s->n, &text, &len, "ids") != AG_OK) return 1;
        if (len > s->printed) fwrite(text + s->printed, 1, len - s->printed, stdout);
        if (len > s->printed) s->printed = len;
        free(text);
    }
    fflush(stdout);
    return ferror(stdout) != 0; /* a closed pipe: stop */
}

int gp_sample(int argc, char **argv) {
    const char *ckpt = NULL, *prompt = NULL;
    NnSampling s = {.temperature = 0.8, .top_k = 200, .top_p = 1.0};
    int max_tokens = 500, threads = 0;
    int64_t seed = 1337;
    Flag fl[] = {
        {"ckpt", FLAG_PATH, &ckpt, NULL, "a checkpoint (train's last.npz or best.npz)", 0, 0, NULL,
         0},
        {"model", FLAG_PATH, &ckpt, "DIR", "a Hugging Face folder instead (docs/hf.md)", 0, 0, NULL,
         0},
        {"prompt", FLAG_STR, &prompt, NULL, "the text to continue (else: stdin)", 0, 0, NULL, 0},
        {"temperature", FLAG_DOUBLE, &s.temperature, NULL, "0: the most likely token", 0, 100, NULL,
         0},
        {"top-k", FLAG_INT, &s.top_k, NULL, "keep the k most likely (0: all)", 0, TXT_MAX_VOCAB,
         NULL, 0},
        {"top-p", FLAG_DOUBLE, &s.top_p, NULL, "keep the nucleus of probability p (1: all)", 0, 1,
         NULL, 0},
        {"seed", FLAG_I64, &seed, NULL, "the draws", 0, 9007199254740992.0, NULL, 0},
        {"max-tokens", FLAG_INT, &max_tokens, NULL, "tokens to add", 0, 1 << 24, NULL, 0},
        {"threads", FLAG_INT, &threads, NULL, "0: the CPUs (OMP_NUM_THREADS)", 0, 1024, NULL, 0},
    };
    int n_fl = (int)(sizeof fl / sizeof fl[0]);
    int rc = flag_parse_cmd(GP_PROG, "sample", "[flags]",
                            "continues a prompt, streaming the tokens to stdout", fl, n_fl,
                            argc - 2, argv + 2, NULL, NULL);
    if (rc == FLAG_HELP) return RUN_EXIT_OK;
    if (rc == AG_OK && !ckpt) rc = ag_fail(AG_ERR_ARG, "--ckpt FILE (or --model DIR) is required");
    char *text = NULL;
    size_t n = 0;
    if (rc == AG_OK && prompt) {
        n = strlen(prompt);
        text = ex_malloc(n + 1);
        memcpy(text, prompt, n + 1);
    } else if (rc == AG_OK) {
        rc = io_read_all(stdin, GP_MAX_PROMPT, "stdin", &text, &n);
    }
    HfModel g = {0};
    if (rc == AG_OK) rc = hf_model_load(ckpt, &g);
    int *ids = NULL;
    size_t n_ids = 0;
    if (rc == AG_OK && n == 0) { /* nanoGPT starts from a newline */
        free(text);
        text = ex_malloc(2);
        memcpy(text, "\n", 2);
        n = 1;
    }
    if (rc == AG_OK) {
        rc = txt_any_encode_alloc(&g.text, text, n, &ids, &n_ids, prompt ? "--prompt" : "stdin");
        int *more = NULL;
        if (rc == AG_OK && !(more = realloc(ids, (n_ids + (size_t)max_tokens + 1) * sizeof(int))))
            rc = ag_fail(AG_ERR_NOMEM, "sample: out of memory");
        if (more) ids = more;
    }
    if (rc != AG_OK) {
        fprintf(stderr, GP_PROG " sample: %s\n", ag_last_error());
        free(text);
        free(ids);
        hf_model_free(&g);
        return rc == AG_ERR_NOMEM ? RUN_EXIT_FAIL : RUN_EXIT_USAGE;
    }
    ag_threads_use(threads);
    fwrite(text, 1, n, stdout);
    fflush(stdout);
    Rng rng;
    rng_seed(&rng, (uint64_t)seed);
    Arena *step = arena_new("step", 0);
    Tape *t = ag_tape_new(step);
    ag_check_finite(t, 1); /* where a NaN or inf began, when the model overflows */
    Stream st = {&g, ids, n_ids, 0};
    if (g.text.hf) { /* what the prompt's ids decode to counts as printed */
        char *pt;
        if (txt_any_decode_alloc(&g.text, ids, n_ids, &pt, &st.printed, "ids") == AG_OK) free(pt);
    }
    int got = nn_gpt_generate(t, &g.m, ids, (int)n_ids, max_tokens, &s, &rng, print_token, &st);
    printf("\n");
    int code = fflush(stdout) != 0 || ferror(stdout) ? RUN_EXIT_FAIL : RUN_EXIT_OK;
    if (got < 0) {
        ex_not_finite(got, ckpt, t);
        fprintf(stderr, GP_PROG " sample: %s\n", ag_last_error());
        code = RUN_EXIT_USAGE;
    }
    ag_tape_free(t);
    arena_free(step);
    free(text);
    free(ids);
    hf_model_free(&g);
    return code;
}

/* ---- eval ---- */

int gp_eval(int argc, char **argv) {
    const char *ckpt = NULL, *data = NULL;
    int batch = 64, threads = 0;
    Flag fl[] = {
        {"ckpt", FLAG_PATH, &ckpt, NULL, "a checkpoint", 0, 0, NULL, 0},
        {"model", FLAG_PATH, &ckpt, "DIR", "a Hugging Face folder instead (docs/hf.md)", 0, 0, NULL,
         0},
        {"data", FLAG_PATH, &data, NULL, "the prepared folder: its valid.bin is evaluated", 0, 0,
         NULL, 0},
        {"batch|batch-size", FLAG_INT, &batch, NULL, "windows a forward pass", 1, 1 << 16, NULL, 0},
        {"threads", FLAG_INT, &threads, NULL, "0: the CPUs (OMP_NUM_THREADS)", 0, 1024, NULL, 0},
    };
    int n_fl = (int)(sizeof fl / sizeof fl[0]);
    int rc = flag_parse_cmd(GP_PROG, "eval", "[flags]",
                            "the loss over the whole of DATA/valid.bin, and bits per byte", fl,
                            n_fl, argc - 2, argv + 2, NULL, NULL);
    if (rc == FLAG_HELP) return RUN_EXIT_OK;
    if (rc == AG_OK && (!ckpt || !data))
        rc = ag_fail(AG_ERR_ARG, "--ckpt (or --model) and --data are required");
    HfModel g = {0};
    if (rc == AG_OK) rc = hf_model_load(ckpt, &g);
    int *ids = NULL;
    size_t n = 0;
    char *p = data ? io_path_join(data, "valid.bin") : NULL;
    if (rc == AG_OK) rc = txt_shard_read(p, g.m.cfg.vocab_size, &ids, &n);
    if (rc == AG_OK && n < 2)
        rc = ag_fail(AG_ERR_FORMAT, "%s: %zu tokens: nothing to predict", p, n);
    int code = rc == AG_OK ? RUN_EXIT_OK : rc == AG_ERR_NOMEM ? RUN_EXIT_FAIL : RUN_EXIT_USAGE;
    if (rc != AG_OK) fprintf(stderr, GP_PROG " eval: %s\n", ag_last_error());
    ag_threads_use(threads);
    Arena *step = rc == AG_OK ? arena_new("step", 0) : NULL;
    Tape *t = step ? ag_tape_new(step) : NULL;
    int64_t n_pred = 0;
    double t0 = run_now_s(), loss = 0;
    if (t) {
        ag_check_finite(t, 1); /* where a NaN or inf began, when the model overflows */
        loss = nn_gpt_loss_over(t, &g.m, ids, n, batch, &n_pred);
    }
    if (t && !isfinite(loss)) {
        ex_not_finite(AG_ERR_RANGE, ckpt, t);
        fprintf(stderr, GP_PROG " eval: %s (%s)\n", ag_last_error(), p);
        code = RUN_EXIT_USAGE;
    } else if (t) { /* bytes: those the predicted tokens (ids[1..n)) decode to */
        int64_t bytes = 0;
        char *dec = NULL;
        size_t dec_len = 0;
        if (txt_any_decode_alloc(&g.text, ids + 1, n - 1, &dec, &dec_len, "ids") == AG_OK)
            bytes = (int64_t)dec_len;
        free(dec);
        double bpb = loss * (double)n_pred / (double)bytes / log(2.0);
        printf("%s (step %lld) on %s: valid loss %.4f nats/token over %lld tokens (%lld bytes), "
               "%.4f bits/byte; %.1f s\n",
               ckpt, (long long)g.step, p, loss, (long long)n_pred, (long long)bytes, bpb,
               run_now_s() - t0);
    }
    ag_tape_free(t);
    arena_free(step);
    free(ids);
    free(p);
    hf_model_free(&g);
    return code;
}
