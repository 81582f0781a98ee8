/* test_checkpoint.c: training checkpoints. A full state round-trips; a bad or mismatched file
 * changes nothing; and resume is bit-exact: 8 steps straight equal 4 steps, a save, a fresh
 * process that rebuilds everything from the file alone, and 4 more steps (same losses at every
 * step, byte-identical weights), with dropout on and the data reshuffled every epoch. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "attograd.h"

/* ---- a tiny training run: the copy task, batches of 4 from a reshuffled permutation ---- */

#define N_EX 10
#define BATCH 4
#define LEN 6

typedef struct {
    Seq2Seq m;
    Optimizer *opt;
    Rng rng;               /* dropout */
    int64_t epoch, cursor; /* the data-loader position */
    int perm[N_EX];
    Arena *params, *step_arena;
    Tape *tape;
} Run;

static Seq2SeqConfig tiny_config(void) {
    Seq2SeqConfig c = nn_seq2seq_default_config(12, 12, 16, 2, 1);
    c.layer.d_ff = 24;
    c.layer.dropout = 0.2;
    c.max_len = 16;
    return c;
}

static OptimConfig tiny_optim(void) {
    OptimConfig o = optim_defaults(OPTIM_ADAM);
    o.lr = 3e-3;
    o.schedule = (OptimSchedule){OPTIM_WARMUP_COSINE, 3, 20, 1e-4};
    return o;
}

/* the permutation of an epoch is a pure function of (seed, epoch): the position is enough */
static void shuffle(Run *r) {
    Rng d;
    rng_seed(&d, 1000 + (uint64_t)r->epoch);
    for (int i = 0; i < N_EX; i++) r->perm[i] = i;
    for (int i = N_EX - 1; i > 0; i--) {
        int j = (int)rng_below(&d, (uint64_t)i + 1), t = r->perm[i];
        r->perm[i] = r->perm[j];
        r->perm[j] = t;
    }
}

static void run_init(Run *r, const Seq2SeqConfig *cfg, const OptimConfig *ocfg) {
    memset(r, 0, sizeof *r);
    r->params = arena_new("params", 8 << 20);
    Rng init;
    rng_seed(&init, 42);
    nn_seq2seq_init(&r->m, r->params, &init, cfg);
    r->opt = optim_new(r->params, &r->m.params, ocfg);
    rng_seed(&r->rng, 7);
    r->step_arena = arena_new("step", 32 << 20);
    r->tape = ag_tape_new(r->step_arena);
    shuffle(r);
}

static void run_free(Run *r) {
    ag_tape_free(r->tape);
    arena_free(r->step_arena);
    nn_seq2seq_free(&r->m);
    arena_free(r->params);
}

/* example e: a sequence of 3..6 tokens from 3..11 (0 pad, 1 BOS, 2 EOS), copied */
static void example(int e, int *src, int *tgt_in, int *tgt_out) {
    int len = 3 + e % 4;
    for (int i = 0; i < LEN + 1; i++) src[i < LEN ? i : 0] = 0;
    for (int i = 0; i <= LEN; i++) tgt_in[i] = tgt_out[i] = 0;
    for (int i = 0; i < LEN; i++) src[i] = i < len ? 3 + (e * 7 + i * 3) % 9 : 0;
    tgt_in[0] = 1;
    for (int i = 0; i < len; i++) tgt_in[i + 1] = tgt_out[i] = src[i];
    tgt_out[len] = 2;
}

static double run_step(Run *r) {
    int src[BATCH * LEN], tin[BATCH * (LEN + 1)], tout[BATCH * (LEN + 1)];
    for (int b = 0; b < BATCH; b++) {
        if (r->cursor == N_EX) {
            r->epoch++;
            r->cursor = 0;
            shuffle(r);
        }
        example(r->perm[r->cursor++], src + b * LEN, tin + b * (LEN + 1), tout + b * (LEN + 1));
    }
    ag_tape_reset(r->tape);
    optim_zero_grad(r->opt);
    Tensor *loss = nn_seq2seq_loss(r->tape, &r->m, src, LEN, tin, tout, BATCH, LEN + 1, &r->rng);
    ag_backward(r->tape, loss);
    optim_clip_grad_norm(&r->m.params, 1.0);
    optim_step(r->opt);
    return (double)loss->data[0];
}

static CkptState run_state(Run *r) {
    CkptState st = {r->opt, &r->rng, {r->epoch, r->cursor}, 2, "vocab: a b c", 12};
    return st;
}

/* writes losses then every parameter's bytes to path */
static void dump(Run *r, const double *losses, int n, const char *path) {
    FILE *f = fopen(path, "wb");
    fwrite(losses, sizeof *losses, (size_t)n, f);
    for (int i = 0; i < r->m.params.n; i++)
        fwrite(r->m.params.items[i]->data, sizeof(Real), r->m.params.items[i]->size, f);
    fclose(f);
}

static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    cr_assert(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc(*n);
    cr_assert(fread(b, 1, *n, f) == *n);
    fclose(f);
    return b;
}

static void in_child(void (*fn)(const char *), const char *dir) {
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        fn(dir);
        _exit(0);
    }
    int status;
    waitpid(pid, &status, 0);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "a training process failed");
}

static void straight(const char *dir) {
    Seq2SeqConfig c = tiny_config();
    OptimConfig o = tiny_optim();
    Run r;
    run_init(&r, &c, &o);
    double losses[8];
    for (int i = 0; i < 8; i++) losses[i] = run_step(&r);
    char path[512];
    snprintf(path, sizeof path, "%s/straight.bin", dir);
    dump(&r, losses, 8, path);
    run_free(&r);
}

static void first_half(const char *dir) {
    Seq2SeqConfig c = tiny_config();
    OptimConfig o = tiny_optim();
    Run r;
    run_init(&r, &c, &o);
    double losses[4];
    for (int i = 0; i < 4; i++) losses[i] = run_step(&r);
    char path[512];
    snprintf(path, sizeof path, "%s/first.bin", dir);
    FILE *f = fopen(path, "wb");
    fwrite(losses, sizeof losses[0], 4, f);
    fclose(f);
    snprintf(path, sizeof path, "%s/ckpt.npz", dir);
    CkptState st = run_state(&r);
    if (ckpt_save(path, &r.m, &st, 6, NULL) != AG_OK) {
        fprintf(stderr, "%s\n", ag_last_error());
        _exit(1);
    }
    run_free(&r);
}

/* a fresh process: everything comes from the checkpoint */
static void second_half(const char *dir) {
    char path[512];
    snprintf(path, sizeof path, "%s/ckpt.npz", dir);
    Seq2SeqConfig c;
    OptimConfig o;
    int has_optim;
    if (ckpt_read_config(path, &c, &o, &has_optim) != AG_OK || !has_optim) _exit(1);
    Run r;
    run_init(&r, &c, &o);
    CkptState st = {r.opt, &r.rng, {0}, 2, NULL, 0};
    if (ckpt_load(path, &r.m, &st) != AG_OK) {
        fprintf(stderr, "%s\n", ag_last_error());
        _exit(1);
    }
    free((void *)st.extra);
    r.epoch = st.data[0];
    r.cursor = st.data[1];
    shuffle(&r);
    double losses[8];
    snprintf(path, sizeof path, "%s/first.bin", dir);
    FILE *f = fopen(path, "rb");
    if (!f || fread(losses, sizeof losses[0], 4, f) != 4) _exit(1);
    fclose(f);
    for (int i = 4; i < 8; i++) losses[i] = run_step(&r);
    snprintf(path, sizeof path, "%s/resumed.bin", dir);
    dump(&r, losses, 8, path);
    run_free(&r);
}

Test(checkpoint, resume_is_bit_exact_with_dropout_and_shuffling) {
    char dir[] = "/tmp/attograd-ckpt-XXXXXX";
    cr_assert(mkdtemp(dir) != NULL);
    in_child(straight, dir);
    in_child(first_half, dir);
    in_child(second_half, dir);
    char a[600], b[600];
    snprintf(a, sizeof a, "%s/straight.bin", dir);
    snprintf(b, sizeof b, "%s/resumed.bin", dir);
    size_t na, nb;
    char *da = slurp(a, &na), *db = slurp(b, &nb);
    cr_assert_eq(na, nb);
    const double *la = (const double *)da, *lb = (const double *)db;
    for (int i = 0; i < 8; i++)
        cr_assert(la[i] == lb[i], "step %d: loss %.17g straight, %.17g resumed", i + 1, la[i],
                  lb[i]);
    cr_assert(la[7] != la[0], "the run must train (losses change)");
    cr_assert(memcmp(da, db, na) == 0, "weights differ after resuming");
    free(da);
    free(db);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert(system(cmd) == 0);
}

/* ---- round trip and refusals ---- */

static void params_bytes(const Seq2Seq *m, char **buf, size_t *n) {
    *n = 0;
    for (int i = 0; i < m->params.n; i++) *n += m->params.items[i]->size * sizeof(Real);
    *buf = malloc(*n);
    size_t off = 0;
    for (int i = 0; i < m->params.n; i++) {
        size_t k = m->params.items[i]->size * sizeof(Real);
        memcpy(*buf + off, m->params.items[i]->data, k);
        off += k;
    }
}

Test(checkpoint, round_trip_restores_everything_and_refusals_change_nothing) {
    char dir[] = "/tmp/attograd-ckpt-XXXXXX";
    cr_assert(mkdtemp(dir) != NULL);
    char path[600];
    snprintf(path, sizeof path, "%s/c.npz", dir);
    Seq2SeqConfig c = tiny_config();
    OptimConfig o = tiny_optim();
    Run r;
    run_init(&r, &c, &o);
    for (int i = 0; i < 3; i++) run_step(&r);
    CkptState st = run_state(&r);
    NpzStats stats;
    cr_assert_eq(ckpt_save(path, &r.m, &st, 6, &stats), AG_OK, "%s", ag_last_error());
    cr_assert(stats.file_bytes > 0 && stats.raw_bytes > 0);

    /* a fresh model and optimizer from the file's configuration */
    Seq2SeqConfig c2;
    OptimConfig o2;
    int has;
    cr_assert_eq(ckpt_read_config(path, &c2, &o2, &has), AG_OK, "%s", ag_last_error());
    cr_assert(has && memcmp(&c2, &c, sizeof c) == 0 && o2.lr == o.lr && o2.schedule.total == 20);
    Run q;
    run_init(&q, &c2, &o2);
    CkptState st2 = {q.opt, &q.rng, {0}, 2, NULL, 0};
    cr_assert_eq(ckpt_load(path, &q.m, &st2), AG_OK, "%s", ag_last_error());
    char *pa, *pb;
    size_t na, nb;
    params_bytes(&r.m, &pa, &na);
    params_bytes(&q.m, &pb, &nb);
    cr_assert(na == nb && memcmp(pa, pb, na) == 0, "parameters differ after loading");
    for (int i = 0; i < optim_state_count(r.opt); i++) {
        Tensor *x = optim_state_tensor(r.opt, i), *y = optim_state_tensor(q.opt, i);
        cr_assert(memcmp(x->data, y->data, x->size * sizeof(Real)) == 0, "%s differs", x->name);
    }
    cr_assert_eq(optim_get_step(q.opt), 3);
    cr_assert(memcmp(q.rng.s, r.rng.s, sizeof r.rng.s) == 0);
    cr_assert(st2.data[0] == r.epoch && st2.data[1] == r.cursor);
    cr_assert(st2.extra_len == 12 && memcmp(st2.extra, "vocab: a b c", 12) == 0);
    free((void *)st2.extra);

    /* a model of another configuration: refused, nothing changed */
    Seq2SeqConfig c3 = c;
    c3.layer.d_ff = 32;
    Run z;
    run_init(&z, &c3, &o);
    char *before;
    size_t nbefore;
    params_bytes(&z.m, &before, &nbefore);
    CkptState st3 = {z.opt, &z.rng, {0}, 2, NULL, 0};
    cr_assert_eq(ckpt_load(path, &z.m, &st3), AG_ERR_SHAPE);
    cr_assert(strstr(ag_last_error(), "d_ff") && strstr(ag_last_error(), path), "%s",
              ag_last_error());
    char *after;
    size_t nafter;
    params_bytes(&z.m, &after, &nafter);
    cr_assert(memcmp(before, after, nbefore) == 0, "a refused load changed the model");
    cr_assert_eq(optim_get_step(z.opt), 0);

    /* a weights-only export has no optimizer: asking for one is refused, nothing changed */
    char wpath[600];
    snprintf(wpath, sizeof wpath, "%s/w.npz", dir);
    cr_assert_eq(ckpt_save(wpath, &r.m, NULL, 6, NULL), AG_OK);
    cr_assert_eq(ckpt_read_config(wpath, &c2, NULL, &has), AG_OK);
    cr_assert(!has);
    Run w;
    run_init(&w, &c, &o);
    char *wbefore;
    size_t nw;
    params_bytes(&w.m, &wbefore, &nw);
    CkptState st4 = {w.opt, NULL, {0}, 0, NULL, 0};
    cr_assert_eq(ckpt_load(wpath, &w.m, &st4), AG_ERR_SHAPE);
    cr_assert(strstr(ag_last_error(), "optim."), "%s", ag_last_error());
    char *wafter;
    params_bytes(&w.m, &wafter, &nw);
    cr_assert(memcmp(wbefore, wafter, nw) == 0);
    cr_assert_eq(ckpt_load(wpath, &w.m, NULL), AG_OK, "weights only: %s", ag_last_error());
    free(wafter);
    params_bytes(&w.m, &wafter, &nw);
    cr_assert(memcmp(pa, wafter, nw) == 0);

    /* a truncated checkpoint: an error naming the file; the model is unchanged */
    char tpath[600], cmd[1400];
    snprintf(tpath, sizeof tpath, "%s/t.npz", dir);
    snprintf(cmd, sizeof cmd, "head -c 5000 %s > %s", path, tpath);
    cr_assert(system(cmd) == 0);
    cr_assert_neq(ckpt_load(tpath, &z.m, &st3), AG_OK);
    cr_assert(strstr(ag_last_error(), tpath), "%s", ag_last_error());
    free(after);
    params_bytes(&z.m, &after, &nafter);
    cr_assert(memcmp(before, after, nbefore) == 0);

    free(pa), free(pb), free(before), free(after), free(wbefore), free(wafter);
    run_free(&r), run_free(&q), run_free(&z), run_free(&w);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert(system(cmd) == 0);
}

/* ---- hostile configurations (README, "Limits") ---- */

/* Copies the checkpoint src to dst with the 0-d entry name replaced by value (dtype). */
static void rewrite(const char *src, const char *dst, const char *name, NpzDtype dtype,
                    const void *value) {
    NpzFile *f;
    cr_assert_eq(npz_read(src, &f, NULL), AG_OK, "%s", ag_last_error());
    NpzWriter *w = npz_writer_new();
    int found = 0;
    for (int i = 0; i < f->n; i++) {
        const NpzEntry *e = &f->entries[i];
        if (strcmp(e->name, name) == 0) {
            npz_add(w, e->name, dtype, 0, NULL, value);
            found = 1;
        } else {
            npz_add(w, e->name, e->dtype, e->ndim, e->shape, e->data);
        }
    }
    cr_assert(found, "no entry '%s'", name);
    cr_assert_eq(npz_write(w, dst, 0, NULL), AG_OK, "%s", ag_last_error());
    npz_writer_free(w);
    npz_free(f);
}

Test(checkpoint, hostile_configurations_are_refused_before_a_model_is_built) {
    char dir[] = "/tmp/attograd-ckpt-XXXXXX";
    cr_assert(mkdtemp(dir) != NULL);
    char path[600], bad[600];
    snprintf(path, sizeof path, "%s/c.npz", dir);
    snprintf(bad, sizeof bad, "%s/bad.npz", dir);
    Seq2SeqConfig c = tiny_config();
    OptimConfig o = tiny_optim();
    Run r;
    run_init(&r, &c, &o);
    CkptState st = run_state(&r);
    cr_assert_eq(ckpt_save(path, &r.m, &st, 0, NULL), AG_OK, "%s", ag_last_error());
    run_free(&r);
    const double nan = strtod("nan", NULL);
    struct {
        const char *name;
        int is_int;
        int64_t i;
        double d;
        const char *want;
    } cases[] = {
        /* a model of 2^20 wide layers: terabytes, refused by its size alone */
        {"meta.config.layer.d_model", 1, 1 << 20, 0,
         "over the limit of 268435456 (CKPT_MAX_PARAMS)"},
        /* 2^32 + 12 would read as 12 if the int were cut */
        {"meta.config.src_vocab", 1, (1LL << 32) + 12, 0,
         "is 4294967308, outside the range of an int"},
        /* within the limit, but far more than the file holds: a few KiB must not build MiBs */
        {"meta.config.layer.d_model", 1, 512, 0, "but the file holds only"},
        {"meta.config.layer.d_ff", 1, 1 << 20, 0, "but the file holds only"},
        {"meta.config.layer.n_heads", 1, 3, 0, "n_heads 3 must divide d_model 16"},
        {"meta.config.layer.n_kv_heads", 1, 0, 0, "n_kv_heads 0 must divide"},
        {"meta.config.n_dec_layers", 1, 0, 0, "layers 1+0 outside"},
        {"meta.config.n_enc_layers", 1, 17, 0, "layers 17+1 outside"},
        {"meta.config.pad_id", 1, 12, 0, "pad_id 12 outside the vocabularies (12, 12)"},
        {"meta.config.max_len", 1, 0, 0, "max_len 0"},
        {"meta.config.layer.act", 1, 7, 0, "activation 7"},
        {"meta.config.tie_output", 1, 2, 0, "must be 0 or 1"},
        {"meta.config.layer.dropout", 0, 0, nan, "dropout nan must be in [0, 1)"},
        {"meta.config.layer.ln_eps", 0, 0, -1e-5, "ln_eps -1e-05 > 0"},
        {"meta.optim.lr", 0, 0, -1, "meta.optim: optim_new (adam): invalid lr -1"},
        {"meta.optim.beta2", 0, 0, 1, "invalid beta2 1"},
        {"meta.optim.kind", 1, 9, 0, "unknown optimizer kind 9"},
        {"meta.optim.schedule.warmup", 1, 50, 0,
         "warmup_cosine schedule needs 0 <= warmup < total"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rewrite(path, bad, cases[i].name, cases[i].is_int ? NPZ_I64 : NPZ_F64,
                cases[i].is_int ? (const void *)&cases[i].i : (const void *)&cases[i].d);
        Seq2SeqConfig c2;
        OptimConfig o2;
        int has;
        int rc = ckpt_read_config(bad, &c2, &o2, &has);
        cr_assert_eq(rc, AG_ERR_FORMAT, "%s: code %d: %s", cases[i].name, rc, ag_last_error());
        cr_assert(strncmp(ag_last_error(), bad, strlen(bad)) == 0, "%s", ag_last_error());
        cr_assert(strstr(ag_last_error(), cases[i].want), "%s: expected '%s': %s", cases[i].name,
                  cases[i].want, ag_last_error());
    }
    /* the untouched file still reads */
    Seq2SeqConfig c2;
    cr_assert_eq(ckpt_read_config(path, &c2, NULL, NULL), AG_OK, "%s", ag_last_error());
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert(system(cmd) == 0);
}

Test(checkpoint, arena_bytes_hold_the_model_and_counts_are_exact) {
    Seq2SeqConfig cs[6];
    cs[0] = tiny_config();
    cs[1] = tiny_config();
    cs[1].tie_output = 1;
    cs[1].learned_pos = 1;
    cs[1].layer.pre_ln = 1;
    cs[2] = nn_seq2seq_default_config(30, 40, 32, 4, 2);
    cs[2].layer.n_kv_heads = 2;
    cs[3] = nn_seq2seq_default_config(7, 9, 16, 4, 3);
    cs[3].n_enc_layers = 0;
    cs[3].layer.n_kv_heads = 1;
    cs[4] = nn_seq2seq_default_config(1, 1, 1, 1, 1); /* the smallest model there is */
    cs[4].max_len = 1;
    cs[4].layer.d_ff = 1;
    cs[5] = nn_seq2seq_default_config(2, 2, 2, 1, 16); /* many layers of tiny tensors */
    cs[5].layer.d_ff = 1;
    for (int i = 0; i < 6; i++)
        for (int with_optim = 0; with_optim < 2; with_optim++) {
            int64_t n = -1;
            cr_assert_eq(ckpt_check_config(&cs[i], &n, "cfg"), AG_OK, "%d: %s", i, ag_last_error());
            size_t cap = ckpt_arena_bytes(&cs[i], with_optim);
            Arena *a = arena_new("params", cap);
            Rng rng;
            rng_seed(&rng, 1);
            Seq2Seq m;
            nn_seq2seq_init(&m, a, &rng, &cs[i]);
            OptimConfig o = optim_defaults(i % 2 ? OPTIM_ADAM : OPTIM_SGD);
            o.momentum = 0.9;
            if (with_optim) optim_new(a, &m.params, &o);
            cr_assert_eq((int64_t)nn_params_count(&m.params), n, "config %d: %zu parameters, %lld",
                         i, nn_params_count(&m.params), (long long)n);
            cr_assert_leq(a->used, cap);
            /* generous, not wasteful: at most 3 times what was used, plus 1 MiB */
            cr_assert_leq(cap, 3 * a->used + (1 << 20), "config %d: %zu for %zu", i, cap, a->used);
            nn_seq2seq_free(&m);
            arena_free(a);
        }
}
