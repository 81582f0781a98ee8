/* bench_hf.c: a Hugging Face GPT-2 folder in attograd: load time, peak memory, a forward and
 * greedy generation; the attograd half of compare.py's gpt2-hf workload (bench/gpt2_hf.py;
 * bench/hf_bench.py is the transformers half, on the same folder).
 *
 *   bench_hf write DIR [N_LAYER]
 *       a GPT-2 small-shaped model with random weights (nn_gpt_init, seed 1: vocabulary 50257,
 *       n_positions 1024, n_embd 768, 12 heads, N_LAYER layers (default 12), "gelu_new",
 *       biases, tied head) written to DIR by hf_save (config.json, model.safetensors)
 *   bench_hf run DIR THREADS [NEW_TOKENS]
 *   -> attograd threads=<n> load_ms=<l> params_mib=<p> rss0_mib=<r0> load_rss_mib=<lr>
 *      rss_mib=<r> forward_ms=<f> forward_tok_s=<ft> new_tokens=<k> gen_ms=<g> gen_tok_s=<gt>
 *      step_ms=<s> ids=<a,b,...>
 *
 * run, in one fresh process: load_ms is the wall time of hf_load(DIR) (config.json, the
 * safetensors, the model built); params_mib what the parameters' arena holds after it (the
 * weights: the arena is arena_lazy_grads', as attograd-gpt's for a loaded model, so no
 * gradients); rss0_mib the process's peak resident memory before it,
 * load_rss_mib after it, rss_mib at the end (getrusage's ru_maxrss: the peak over the load,
 * the forwards and the generation). forward_ms is the median of 5 no-grad forwards of one row
 * of PROMPT tokens (logits at every position), after one more not timed. gen_ms is one call of
 * nn_gpt_generate continuing those PROMPT tokens by NEW_TOKENS (default 64) greedy tokens with
 * the KV cache, as `attograd-gpt sample --temperature 0` runs it (check mode on), prompt
 * included; gen_tok_s = NEW_TOKENS / gen_ms; step_ms the median time of one step of it past the
 * prompt (one token through the model with the cache, from one new token to the next: the
 * prompt's forward left out; 0 for one token); ids are the new tokens, for gpt2_hf.py to check
 * against transformers'. The prompt's token i is (1 + 7919 i) mod vocab_size (hf_bench.py's).
 * Not here: the comparison (gpt2_hf.py); the training workloads (bench_models.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "attograd.h"

enum { PROMPT = 64, FORWARDS = 5 };

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* the process's peak resident memory so far, MiB (ru_maxrss is in KiB on Linux) */
static double peak_rss_mib(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* the times of generated tokens, for step_ms: on_token's */
typedef struct {
    double *at;
    int n;
} Steps;
static int on_token(int token, void *ctx) {
    (void)token;
    Steps *s = ctx;
    s->at[s->n++] = now_ms();
    return 0;
}

static int write_model(const char *dir, int n_layer) {
    GptConfig c = {.vocab_size = 50257,
                   .block_size = 1024,
                   .n_layer = n_layer,
                   .n_head = 12,
                   .n_embd = 768,
                   .mlp = NN_GPT_MLP_GELU_TANH};
    if (nn_gpt_check_config(&c, NULL) != AG_OK) {
        fprintf(stderr, "bench_hf write: %s\n", ag_last_error());
        return 2;
    }
    Arena *a = arena_new("params", 0);
    Rng rng;
    rng_seed(&rng, 1);
    Gpt m;
    nn_gpt_init(&m, a, &rng, &c);
    int rc = hf_save(&m, dir);
    if (rc != AG_OK) fprintf(stderr, "bench_hf write: %s\n", ag_last_error());
    nn_gpt_free(&m);
    arena_free(a);
    return rc == AG_OK ? 0 : 2;
}

static int run_model(const char *dir, int threads, int new_tokens) {
    threads = ag_threads_use(threads);
    double rss0 = peak_rss_mib();
    Arena *a = arena_new("params", 0);
    arena_lazy_grads(a, 1); /* as attograd-gpt sample --model: no gradients */
    Gpt m;
    double t0 = now_ms();
    int rc = hf_load(dir, a, &m);
    double load_ms = now_ms() - t0;
    if (rc != AG_OK) {
        fprintf(stderr, "bench_hf run: %s\n", ag_last_error());
        arena_free(a);
        return 2;
    }
    double load_rss = peak_rss_mib();
    int V = m.cfg.vocab_size;
    if (PROMPT + new_tokens > m.cfg.block_size) {
        fprintf(stderr, "bench_hf run: NEW_TOKENS %d: at most %d (n_positions %d)\n", new_tokens,
                m.cfg.block_size - PROMPT, m.cfg.block_size);
        nn_gpt_free(&m);
        arena_free(a);
        return 2;
    }
    int *ids = malloc((size_t)(PROMPT + new_tokens) * sizeof *ids);
    for (int i = 0; i < PROMPT; i++) ids[i] = (int)((1 + 7919LL * i) % V);
    Arena *step = arena_new("step", 0);
    Tape *t = ag_tape_new(step);
    ag_no_grad(t, 1);
    double ms[FORWARDS];
    for (int i = 0; i <= FORWARDS; i++) { /* the first one warms up, not timed */
        double f0 = now_ms();
        nn_gpt_forward(t, &m, ids, 1, PROMPT, NULL);
        if (i > 0) ms[i - 1] = now_ms() - f0;
        ag_tape_reset(t);
    }
    qsort(ms, FORWARDS, sizeof *ms, cmp_double);
    ag_no_grad(t, 0);
    ag_check_finite(t, 1); /* as attograd-gpt sample */
    NnSampling s = {.temperature = 0, .top_k = 0, .top_p = 1};
    Rng rng;
    rng_seed(&rng, 1);
    Steps steps = {malloc((size_t)new_tokens * sizeof *steps.at), 0};
    double g0 = now_ms();
    int got = nn_gpt_generate(t, &m, ids, PROMPT, new_tokens, &s, &rng, on_token, &steps);
    double gen_ms = now_ms() - g0;
    for (int i = 0; i + 1 < steps.n; i++) steps.at[i] = steps.at[i + 1] - steps.at[i];
    qsort(steps.at, (size_t)(steps.n - 1), sizeof *steps.at, cmp_double);
    double step_ms = steps.n > 1 ? steps.at[(steps.n - 1) / 2] : 0;
    free(steps.at);
    if (got != new_tokens) {
        fprintf(stderr, "bench_hf run: generated %d of %d tokens: %s\n", got, new_tokens,
                got < 0 ? ag_last_error() : "stopped");
        rc = 2;
    } else {
        double fwd = ms[FORWARDS / 2], params = (double)a->used / (1024.0 * 1024.0);
        printf("attograd threads=%d load_ms=%.1f params_mib=%.1f rss0_mib=%.1f "
               "load_rss_mib=%.1f rss_mib=%.1f forward_ms=%.2f forward_tok_s=%.0f "
               "new_tokens=%d gen_ms=%.1f gen_tok_s=%.1f step_ms=%.2f ids=",
               threads, load_ms, params, rss0, load_rss, peak_rss_mib(), fwd, PROMPT / fwd * 1e3,
               new_tokens, gen_ms, new_tokens / gen_ms * 1e3, step_ms);
        for (int i = 0; i < new_tokens; i++) printf("%s%d", i ? "," : "", ids[PROMPT + i]);
        printf("\n");
    }
    ag_tape_free(t);
    arena_free(step);
    free(ids);
    nn_gpt_free(&m);
    arena_free(a);
    return rc == AG_OK ? 0 : rc;
}

int main(int argc, char **argv) {
    if (argc >= 3 && argc <= 4 && strcmp(argv[1], "write") == 0) {
        int n_layer = argc == 4 ? atoi(argv[3]) : 12;
        if (n_layer < 1) {
            fprintf(stderr, "bench_hf write: N_LAYER '%s': a positive count\n", argv[3]);
            return 2;
        }
        return write_model(argv[2], n_layer);
    }
    if (argc >= 4 && argc <= 5 && strcmp(argv[1], "run") == 0) {
        int threads = atoi(argv[3]), new_tokens = argc == 5 ? atoi(argv[4]) : 64;
        if (threads < 1 || new_tokens < 1) {
            fprintf(stderr, "bench_hf run: THREADS and NEW_TOKENS: positive counts\n");
            return 2;
        }
        return run_model(argv[2], threads, new_tokens);
    }
    fprintf(stderr, "usage: %s write DIR [N_LAYER]\n       %s run DIR THREADS [NEW_TOKENS]\n",
            argv[0], argv[0]);
    return 2;
}
