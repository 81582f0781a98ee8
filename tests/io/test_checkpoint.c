/* test_checkpoint.c: training checkpoints. A full state round-trips; a bad or mismatched file
 * changes nothing; and resume is bit-exact: 8 steps straight equal 4 steps, a save, a fresh
 * process that rebuilds everything from the file alone, and 4 more steps (same losses at every
 * step, byte-identical weights), with dropout on and the data reshuffled every epoch. */
#include <criterion/criterion.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "attograd.h"
#include "files.h"

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
    ag_params_zero_grad(&r->m.params);
    Tensor *loss = nn_seq2seq_loss(r->tape, &r->m, src, LEN, tin, tout, BATCH, LEN + 1, &r->rng);
    ag_backward(r->tape, loss);
    optim_clip_grad_norm(&r->m.params, 1.0);
    optim_step(r->opt);
    return (double)loss->data[0];
}

static Checkpoint run_state(Run *r) {
    Checkpoint st = {.opt = r->opt,
                     .rng = &r->rng,
                     .data = {r->epoch, r->cursor},
                     .n_data = 2,
                     .extra = "vocab: a b c",
                     .extra_len = 12};
    return st;
}

/* The start of a test on a saved run: a fresh folder in dir (64 bytes), its c.npz in path and
 * bad.npz in bad (600 bytes each; bad may be NULL), in r a run of tiny_config() with
 * tiny_optim() after steps steps; returns the run's state */
static Checkpoint start_run(char *dir, char *path, char *bad, Run *r, int steps) {
    ts_tmp_dir(dir, 64, "ckpt");
    snprintf(path, 600, "%s/c.npz", dir);
    if (bad) snprintf(bad, 600, "%s/bad.npz", dir);
    Seq2SeqConfig c = tiny_config();
    OptimConfig o = tiny_optim();
    run_init(r, &c, &o);
    for (int i = 0; i < steps; i++) run_step(r);
    return run_state(r);
}

/* ckpt_save of m (its parameters and configuration) and the parts of st (NULL: weights only) */
static int save(const char *path, Seq2Seq *m, const Checkpoint *st, int level, NpzStats *stats) {
    Checkpoint c = st ? *st : (Checkpoint){0};
    c.params = &m->params;
    c.config = nn_seq2seq_ckpt_config(&m->cfg);
    return ckpt_save(path, &c, level, stats);
}

/* ckpt_load into m and the parts of st (may be NULL) */
static int load(const char *path, Seq2Seq *m, Checkpoint *st) {
    Checkpoint c = st ? *st : (Checkpoint){0};
    c.params = &m->params;
    c.config = nn_seq2seq_ckpt_config(&m->cfg);
    int rc = ckpt_load(path, &c);
    if (st) *st = c;
    return rc;
}

/* The configurations of the file at path, read once (ckpt_read); o and has may be NULL. */
static int read_config(const char *path, Seq2SeqConfig *c, OptimConfig *o, int *has) {
    memset(c, 0, sizeof *c);
    CkptConfig kc = nn_seq2seq_ckpt_config(c);
    NpzFile *f;
    int rc = ckpt_read(path, &kc, &f);
    if (rc != AG_OK) return rc;
    int h = 0;
    OptimConfig tmp;
    rc = ckpt_optim_config(f, o ? o : &tmp, &h);
    if (has) *has = h;
    npz_free(f);
    return rc;
}

/* writes losses then every parameter's bytes to path */
static void dump(Run *r, const double *losses, int n, const char *path) {
    FILE *f = fopen(path, "wb");
    fwrite(losses, sizeof *losses, (size_t)n, f);
    for (int i = 0; i < r->m.params.n; i++)
        fwrite(r->m.params.items[i]->data, sizeof(Real), r->m.params.items[i]->size, f);
    fclose(f);
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
    Checkpoint st = run_state(&r);
    if (save(path, &r.m, &st, 6, NULL) != AG_OK) {
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
    if (read_config(path, &c, &o, &has_optim) != AG_OK || !has_optim) _exit(1);
    Run r;
    run_init(&r, &c, &o);
    Checkpoint st = {.opt = r.opt, .rng = &r.rng, .n_data = 2};
    if (load(path, &r.m, &st) != AG_OK) {
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
    char *da = ts_read_text(a, &na), *db = ts_read_text(b, &nb);
    cr_assert_eq(na, nb);
    const double *la = (const double *)da, *lb = (const double *)db;
    for (int i = 0; i < 8; i++)
        cr_assert(la[i] == lb[i], "step %d: loss %.17g straight, %.17g resumed", i + 1, la[i],
                  lb[i]);
    cr_assert(la[7] != la[0], "the run must train (losses change)");
    cr_assert(memcmp(da, db, na) == 0, "weights differ after resuming");
    free(da);
    free(db);
    ts_rm_tree(dir);
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
    char dir[64], path[600];
    Seq2SeqConfig c = tiny_config();
    OptimConfig o = tiny_optim();
    Run r;
    Checkpoint st = start_run(dir, path, NULL, &r, 3);
    NpzStats stats;
    cr_assert_eq(save(path, &r.m, &st, 6, &stats), AG_OK, "%s", ag_last_error());
    cr_assert(stats.file_bytes > 0 && stats.raw_bytes > 0);

    /* a fresh model and optimizer from the file's configuration */
    Seq2SeqConfig c2;
    OptimConfig o2;
    int has;
    cr_assert_eq(read_config(path, &c2, &o2, &has), AG_OK, "%s", ag_last_error());
    cr_assert(has && memcmp(&c2, &c, sizeof c) == 0 && o2.lr == o.lr && o2.schedule.total == 20);
    Run q;
    run_init(&q, &c2, &o2);
    Checkpoint st2 = {.opt = q.opt, .rng = &q.rng, .n_data = 2};
    cr_assert_eq(load(path, &q.m, &st2), AG_OK, "%s", ag_last_error());
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
    Checkpoint st3 = {.opt = z.opt, .rng = &z.rng, .n_data = 2};
    cr_assert_eq(load(path, &z.m, &st3), AG_ERR_SHAPE);
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
    cr_assert_eq(save(wpath, &r.m, NULL, 6, NULL), AG_OK);
    cr_assert_eq(read_config(wpath, &c2, NULL, &has), AG_OK);
    cr_assert(!has);
    Run w;
    run_init(&w, &c, &o);
    char *wbefore;
    size_t nw;
    params_bytes(&w.m, &wbefore, &nw);
    Checkpoint st4 = {.opt = w.opt, .n_data = 0};
    cr_assert_eq(load(wpath, &w.m, &st4), AG_ERR_SHAPE);
    cr_assert(strstr(ag_last_error(), "optim."), "%s", ag_last_error());
    char *wafter;
    params_bytes(&w.m, &wafter, &nw);
    cr_assert(memcmp(wbefore, wafter, nw) == 0);
    cr_assert_eq(load(wpath, &w.m, NULL), AG_OK, "weights only: %s", ag_last_error());
    free(wafter);
    params_bytes(&w.m, &wafter, &nw);
    cr_assert(memcmp(pa, wafter, nw) == 0);

    /* a truncated checkpoint: an error naming the file; the model is unchanged */
    char tpath[600], cmd[1400];
    snprintf(tpath, sizeof tpath, "%s/t.npz", dir);
    snprintf(cmd, sizeof cmd, "head -c 5000 %s > %s", path, tpath);
    cr_assert(system(cmd) == 0);
    cr_assert_neq(load(tpath, &z.m, &st3), AG_OK);
    cr_assert(strstr(ag_last_error(), tpath), "%s", ag_last_error());
    free(after);
    params_bytes(&z.m, &after, &nafter);
    cr_assert(memcmp(before, after, nbefore) == 0);

    free(pa), free(pb), free(before), free(after), free(wbefore), free(wafter);
    run_free(&r), run_free(&q), run_free(&z), run_free(&w);
    ts_rm_tree(dir);
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
    char dir[64], path[600], bad[600];
    Run r;
    Checkpoint st = start_run(dir, path, bad, &r, 0);
    cr_assert_eq(save(path, &r.m, &st, 0, NULL), AG_OK, "%s", ag_last_error());
    run_free(&r);
    const double nan = strtod("nan", NULL);
    struct {
        const char *name;
        int is_int;
        int64_t i;
        double d;
        int code;
        const char *want;
    } cases[] = {
        /* a model of 2^20 wide layers: terabytes, refused by its size alone */
        {"meta.config.layer.d_model", 1, 1 << 20, 0, AG_ERR_FORMAT,
         "over the limit of 268435456 (CKPT_MAX_PARAMS)"},
        /* 2^32 + 12 would read as 12 if the int were cut */
        {"meta.config.src_vocab", 1, (1LL << 32) + 12, 0, AG_ERR_RANGE,
         "meta.config.src_vocab = 4294967308: must be an integer in [1, 2147483647]"},
        /* within the limit, but far more than the file holds: a few KiB must not build MiBs */
        {"meta.config.layer.d_model", 1, 512, 0, AG_ERR_FORMAT, "but the file holds only"},
        {"meta.config.layer.d_ff", 1, 60000, 0, AG_ERR_FORMAT, "but the file holds only"},
        /* the model's own rules (nn_seq2seq_check_config; the translator's on top of them are
         * tests/examples/test_translate_limits.c's) */
        {"meta.config.layer.n_heads", 1, 3, 0, AG_ERR_FORMAT, "n_heads 3 must divide d_model 16"},
        {"meta.config.pad_id", 1, 12, 0, AG_ERR_FORMAT,
         "pad_id 12 outside the vocabularies (12, 12)"},
        /* the ranges of the fields (nn_seq2seq_ckpt_config) */
        {"meta.config.layer.n_kv_heads", 1, 0, 0, AG_ERR_RANGE,
         "layer.n_kv_heads = 0: must be an integer"},
        {"meta.config.n_dec_layers", 1, 0, 0, AG_ERR_RANGE,
         "n_dec_layers = 0: must be an integer in [1, 16]"},
        {"meta.config.n_enc_layers", 1, 17, 0, AG_ERR_RANGE,
         "n_enc_layers = 17: must be an integer in [0, 16]"},
        {"meta.config.max_len", 1, 0, 0, AG_ERR_RANGE, "max_len = 0"},
        {"meta.config.layer.act", 1, 7, 0, AG_ERR_RANGE,
         "layer.act = 7: must be an integer in [0, 1]"},
        {"meta.config.tie_output", 1, 2, 0, AG_ERR_RANGE, "tie_output = 2"},
        {"meta.config.layer.dropout", 0, 0, nan, AG_ERR_RANGE,
         "layer.dropout = nan: must be finite in [0, 1]"},
        {"meta.config.layer.ln_eps", 0, 0, -1, AG_ERR_RANGE, "layer.ln_eps = -1: must be finite"},
        /* the optimizer's (optim_check_config) */
        {"meta.optim.lr", 0, 0, -1, AG_ERR_FORMAT, "meta.optim: optim_new (adam): invalid lr -1"},
        {"meta.optim.beta2", 0, 0, 1, AG_ERR_FORMAT, "invalid beta2 1"},
        {"meta.optim.kind", 1, 9, 0, AG_ERR_FORMAT, "unknown optimizer kind 9"},
        {"meta.optim.schedule.warmup", 1, 50, 0, AG_ERR_FORMAT,
         "warmup_cosine schedule needs 0 <= warmup < total"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rewrite(path, bad, cases[i].name, cases[i].is_int ? NPZ_I64 : NPZ_F64,
                cases[i].is_int ? (const void *)&cases[i].i : (const void *)&cases[i].d);
        Seq2SeqConfig c2;
        OptimConfig o2;
        int has;
        int rc = read_config(bad, &c2, &o2, &has);
        cr_assert_eq(rc, cases[i].code, "%s: code %d: %s", cases[i].name, rc, ag_last_error());
        cr_assert(strncmp(ag_last_error(), bad, strlen(bad)) == 0, "%s", ag_last_error());
        cr_assert(strstr(ag_last_error(), cases[i].want), "%s: expected '%s': %s", cases[i].name,
                  cases[i].want, ag_last_error());
    }
    /* the untouched file still reads */
    Seq2SeqConfig c2;
    cr_assert_eq(read_config(path, &c2, NULL, NULL), AG_OK, "%s", ag_last_error());
    ts_rm_tree(dir);
}

Test(checkpoint, parameter_counts_are_exact) {
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
            cr_assert_eq(nn_seq2seq_check_config(&cs[i], &n, NULL), AG_OK, "%d: %s", i,
                         ag_last_error());
            Arena *a = arena_new("params", 0);
            Rng rng;
            rng_seed(&rng, 1);
            Seq2Seq m;
            nn_seq2seq_init(&m, a, &rng, &cs[i]);
            OptimConfig o = optim_defaults(i % 2 ? OPTIM_ADAM : OPTIM_SGD);
            o.momentum = 0.9;
            if (with_optim) optim_new(a, &m.params, &o);
            cr_assert_eq((int64_t)ag_params_count(&m.params), n, "config %d: %zu parameters, %lld",
                         i, ag_params_count(&m.params), (long long)n);
            nn_seq2seq_free(&m);
            arena_free(a);
        }
}

/* ---- what the values mean (checkpoint.h, ckpt_read's rules) ---- */

/* Every value ckpt_read must refuse, at its boundaries and beyond: the load fails with
 * AG_ERR_RANGE naming the file, the entry, the value and the rule, and changes nothing (a
 * negative step used to abort in optim_set_step; a NaN weight or an infinite second moment
 * used to load). The boundary values themselves load. */
Test(checkpoint, values_out_of_their_domain_are_refused_naming_entry_value_and_rule) {
    char dir[64], path[600], bad[600];
    Seq2SeqConfig c = tiny_config();
    OptimConfig o = tiny_optim();
    Run r;
    Checkpoint st = start_run(dir, path, bad, &r, 2);
    cr_assert_eq(save(path, &r.m, &st, 6, NULL), AG_OK, "%s", ag_last_error());
    const char *w = "decoder.norm.weight", *m = "optim.decoder.norm.weight.exp_avg",
               *v = "optim.decoder.norm.weight.exp_avg_sq";
    const double inf = HUGE_VAL, nan = strtod("nan", NULL);
    struct {
        const char *name;
        long index;
        double x;
        int64_t i;
        const char *want;
    } cases[] = {
        {"train.step", 0, 0, -1, "train.step = -1: must be >= 0"},
        {"train.step", 0, 0, INT64_MIN, "train.step = -9223372036854775808: must be >= 0"},
        {"train.step", 0, 0, CKPT_MAX_STEP + 1, "train.step = 9007199254740993: must be <= "},
        {"train.step", 0, 0, (int64_t)1 << 62, "train.step = 4611686018427387904: must be <="},
        {"rng.state", -1, 0, 0, "rng.state is all zeros: the generator would stay at 0"},
        {w, 3, nan, 0, "decoder.norm.weight[3] = nan: must be finite"},
        {w, 0, inf, 0, "decoder.norm.weight[0] = inf: must be finite"},
        {w, 15, -inf, 0, "decoder.norm.weight[15] = -inf: must be finite"},
        {"src_embed.weight", 7, nan, 0, "src_embed.weight[7] = nan"},
        {m, 2, nan, 0, "exp_avg[2] = nan: must be finite"},
        {m, 2, -inf, 0, "exp_avg[2] = -inf: must be finite"},
        {v, 1, -1, 0, "exp_avg_sq[1] (Adam's second moment) = -1: must be >= 0"},
        {v, 1, -1e-30, 0, "must be >= 0"},
        {v, 1, inf, 0, "exp_avg_sq[1] (Adam's second moment) = inf: must be finite"},
        {v, 1, nan, 0, "= nan: must be finite"},
    };
    Run q;
    run_init(&q, &c, &o);
    char *before, *after;
    size_t nb, na;
    params_bytes(&q.m, &before, &nb);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        ts_npz_edit(path, bad, cases[k].name, cases[k].index, cases[k].x, cases[k].i);
        Checkpoint s2 = {.opt = q.opt, .rng = &q.rng, .n_data = 2};
        int rc = load(bad, &q.m, &s2);
        cr_assert_eq(rc, AG_ERR_RANGE, "%s: code %d: %s", cases[k].name, rc, ag_last_error());
        cr_assert(strncmp(ag_last_error(), bad, strlen(bad)) == 0, "%s", ag_last_error());
        cr_assert(strstr(ag_last_error(), cases[k].want), "%s: expected '%s': %s", cases[k].name,
                  cases[k].want, ag_last_error());
        cr_assert(s2.extra == NULL);
        params_bytes(&q.m, &after, &na);
        cr_assert(memcmp(before, after, nb) == 0, "%s: a refused load changed the model",
                  cases[k].name);
        free(after);
        cr_assert_eq(optim_get_step(q.opt), 0);
        NpzFile *f = NULL;
        cr_assert_eq(ckpt_read(bad, NULL, &f), AG_ERR_RANGE);
        cr_assert(f == NULL);
    }
    /* the boundaries themselves are values a run can reach */
    ts_npz_edit(path, bad, "train.step", 0, 0, CKPT_MAX_STEP);
    Checkpoint s3 = {.opt = q.opt, .rng = &q.rng, .n_data = 2};
    cr_assert_eq(load(bad, &q.m, &s3), AG_OK, "%s", ag_last_error());
    cr_assert_eq(optim_get_step(q.opt), CKPT_MAX_STEP);
    free((void *)s3.extra);
    ts_npz_edit(path, bad, v, -1, 0, 0);
    ts_npz_edit(bad, bad, "train.step", 0, 0, 0);
    Checkpoint s4 = {.opt = q.opt, .rng = &q.rng, .n_data = 2};
    cr_assert_eq(load(bad, &q.m, &s4), AG_OK, "v = 0 and step 0: %s", ag_last_error());
    free((void *)s4.extra);
    free(before);
    run_free(&q);
    run_free(&r);
    ts_rm_tree(dir);
}

/* Nothing non-finite is saved: a NaN weight, an infinite or negative second moment, a step out
 * of range, an RNG at zero are refused naming the tensor and the index; the file already at
 * the path stays as it was. */
Test(checkpoint, save_refuses_what_loading_would_refuse_and_keeps_the_old_file) {
    char dir[64], path[600];
    Run r;
    Checkpoint st = start_run(dir, path, NULL, &r, 1);
    cr_assert_eq(save(path, &r.m, &st, 6, NULL), AG_OK, "%s", ag_last_error());
    size_t n0, n1;
    char *old = ts_read_text(path, &n0);
    Tensor *wt = ag_params_find(&r.m.params, "decoder.norm.weight");
    Tensor *v = NULL;
    for (int i = 0; i < optim_state_count(r.opt); i++)
        if (strcmp(optim_state_tensor(r.opt, i)->name, "optim.decoder.norm.weight.exp_avg_sq") == 0)
            v = optim_state_tensor(r.opt, i);
    cr_assert(wt && v);
    struct {
        Real *slot;
        Real value;
        const char *want;
    } cases[] = {
        {&wt->data[5], (Real)NAN, "not saved: decoder.norm.weight[5] = nan: must be finite"},
        {&wt->data[0], (Real)-INFINITY, "decoder.norm.weight[0] = -inf: must be finite"},
        {&v->data[2], (Real)INFINITY, "optim.decoder.norm.weight.exp_avg_sq[2] = inf"},
        {&v->data[2], (Real)-0.5, "optim.decoder.norm.weight.exp_avg_sq[2] = -0.5: must be >= 0"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        Real keep = *cases[k].slot;
        *cases[k].slot = cases[k].value;
        cr_assert_eq(save(path, &r.m, &st, 6, NULL), AG_ERR_RANGE);
        cr_assert(strstr(ag_last_error(), cases[k].want), "expected '%s': %s", cases[k].want,
                  ag_last_error());
        *cases[k].slot = keep;
    }
    optim_set_step(r.opt, CKPT_MAX_STEP + 1);
    cr_assert_eq(save(path, &r.m, &st, 6, NULL), AG_ERR_RANGE);
    cr_assert(strstr(ag_last_error(), "train.step = 9007199254740993"), "%s", ag_last_error());
    optim_set_step(r.opt, 1);
    uint64_t s[4];
    memcpy(s, r.rng.s, sizeof s);
    memset(r.rng.s, 0, sizeof r.rng.s);
    cr_assert_eq(save(path, &r.m, &st, 6, NULL), AG_ERR_RANGE);
    cr_assert(strstr(ag_last_error(), "rng.state is all zeros"), "%s", ag_last_error());
    memcpy(r.rng.s, s, sizeof s);
    char *now = ts_read_text(path, &n1);
    cr_assert(n0 == n1 && memcmp(old, now, n0) == 0, "a refused save changed the file");
    free(old);
    free(now);
    run_free(&r);
    ts_rm_tree(dir);
}

/* Peak resident memory of this process in KiB (Linux: VmHWM). */
static long peak_kib(void) {
    long kib = -1;
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %ld", &kib) == 1) break;
    if (f) fclose(f);
    return kib;
}

static void read_in_child(const char *path) {
    long before = peak_kib();
    NpzFile *f = NULL;
    Seq2SeqConfig c = {0};
    CkptConfig kc = nn_seq2seq_ckpt_config(&c);
    int rc = ckpt_read(path, &kc, &f);
    long after = peak_kib();
    fprintf(stderr, "%s\n", rc == AG_OK ? "accepted" : ag_last_error());
    /* refused before the big entry was allocated: far less than its 48 MiB */
    _exit(rc != AG_OK && f == NULL && after - before < 8 * 1024 ? 0 : 1);
}

/* Memory is bounded by what the configuration says before an entry is allocated: a small file
 * whose extra entry inflates to 48 MiB (a tiny model's checkpoint holds a few KiB) is refused
 * without that memory; so is an oversized meta.extra, or a configuration entry of more than
 * CKPT_MAX_SMALL bytes. */
Test(checkpoint, a_small_file_declaring_a_huge_entry_is_refused_before_allocating_it) {
    char dir[64], path[600], bad[600];
    Run r;
    Checkpoint st = start_run(dir, path, bad, &r, 0);
    cr_assert_eq(save(path, &r.m, &st, 6, NULL), AG_OK, "%s", ag_last_error());
    run_free(&r);
    const char *names[] = {"optim.junk", "meta.extra", "meta.config.pad_id"};
    const size_t sizes[] = {48 << 20, (size_t)CKPT_MAX_EXTRA + 1, CKPT_MAX_SMALL};
    const char *want[] = {"more than a model of", "a checkpoint's 'meta.extra' holds at most",
                          "a checkpoint's 'meta.config.pad_id' holds at most 4096"};
    for (int k = 0; k < 3; k++) {
        NpzFile *f;
        cr_assert_eq(npz_read(path, &f, NULL), AG_OK);
        NpzWriter *w = npz_writer_new();
        unsigned char *zeros = calloc(sizes[k], 1);
        for (int i = 0; i < f->n; i++)
            if (strcmp(f->entries[i].name, names[k]) != 0)
                npz_add(w, f->entries[i].name, f->entries[i].dtype, f->entries[i].ndim,
                        f->entries[i].shape, f->entries[i].data);
        npz_add_bytes(w, names[k], zeros, sizes[k]);
        cr_assert_eq(npz_write(w, bad, 9, NULL), AG_OK, "%s", ag_last_error());
        npz_writer_free(w);
        npz_free(f);
        free(zeros);
        Seq2SeqConfig c2;
        cr_assert_eq(read_config(bad, &c2, NULL, NULL), AG_ERR_FORMAT, "%s", names[k]);
        cr_assert(strstr(ag_last_error(), want[k]) && strstr(ag_last_error(), bad),
                  "expected '%s': %s", want[k], ag_last_error());
        if (k == 0) {
            pid_t pid = fork();
            cr_assert(pid >= 0);
            if (pid == 0) read_in_child(bad);
            int status;
            waitpid(pid, &status, 0);
            cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                      "reading allocated the entry it refuses");
        }
    }
    /* many small entries: each is read first, so their number is bounded too */
    NpzFile *f;
    cr_assert_eq(npz_read(path, &f, NULL), AG_OK);
    NpzWriter *w = npz_writer_new();
    for (int i = 0; i < f->n; i++)
        npz_add(w, f->entries[i].name, f->entries[i].dtype, f->entries[i].ndim, f->entries[i].shape,
                f->entries[i].data);
    int64_t zero = 0;
    char extra_names[80][32];
    for (int i = 0; i < 80; i++) {
        snprintf(extra_names[i], sizeof extra_names[i], "meta.optim.x%d", i);
        npz_add_i64(w, extra_names[i], 0, NULL, &zero);
    }
    cr_assert_eq(npz_write(w, bad, 6, NULL), AG_OK, "%s", ag_last_error());
    npz_writer_free(w);
    npz_free(f);
    Seq2SeqConfig c3;
    cr_assert_eq(read_config(bad, &c3, NULL, NULL), AG_ERR_FORMAT);
    cr_assert(strstr(ag_last_error(), "more than 96 configuration"), "%s", ag_last_error());
    ts_rm_tree(dir);
}

/* The rules a caller adds (the translation example's data.position) use the same mechanism:
 * suffix patterns, indexes past an entry's end pass (an older, shorter entry), doubles stored
 * as int64 bits. */
Test(checkpoint, caller_rules_check_named_values) {
    int64_t pos[3] = {5, -2, 0};
    double best = strtod("nan", NULL);
    memcpy(&pos[2], &best, sizeof best);
    NpzEntry e = {"data.position", NPZ_I64, 1, {3}, 3, 24, pos};
    NpzFile f = {"f.npz", 1, &e, 0, 24};
    CkptRule ok[] = {{"data.position", 0, "epoch", CKPT_INT, 0, 5, 0, 0},
                     {"data.position", 7, "absent", CKPT_INT, 0, 0, 0, 0},
                     {"other", 0, NULL, CKPT_INT, 0, 0, 0, 0}};
    cr_assert_eq(ckpt_check_rules(&f, ok, 3), AG_OK, "%s", ag_last_error());
    CkptRule lo = {"*.position", 1, "cursor", CKPT_INT, 0, 10, 0, 0};
    cr_assert_eq(ckpt_check_rules(&f, &lo, 1), AG_ERR_RANGE);
    cr_assert_str_eq(ag_last_error(), "f.npz: data.position[1] (cursor) = -2: must be >= 0");
    CkptRule hi = {"data.position", 0, "epoch", CKPT_INT, 0, 4, 0, 0};
    cr_assert_eq(ckpt_check_rules(&f, &hi, 1), AG_ERR_RANGE);
    cr_assert_str_eq(ag_last_error(), "f.npz: data.position[0] (epoch) = 5: must be <= 4");
    CkptRule fl = {"data.position", 2, "best", CKPT_F64_BITS, 0, 0, 0, 1};
    cr_assert_eq(ckpt_check_rules(&f, &fl, 1), AG_ERR_RANGE);
    cr_assert_str_eq(ag_last_error(), "f.npz: data.position[2] (best) = nan: must be finite");
    best = 2.0;
    memcpy(&pos[2], &best, sizeof best);
    cr_assert_eq(ckpt_check_rules(&f, &fl, 1), AG_ERR_RANGE);
    cr_assert_str_eq(ag_last_error(), "f.npz: data.position[2] (best) = 2: must be <= 1");
}

/* ---- a configuration of any model: every field type, the model's kind, ranges ---- */

typedef struct {
    int64_t big;
    int small;
    double x;
    char name[8];
} AnyConfig;
static const CkptField any_fields[] = {
    CKPT_CFG_INT(AnyConfig, big, 0, 1e15), CKPT_CFG_INT(AnyConfig, small, -5, 5),
    CKPT_CFG_FLOAT(AnyConfig, x, -1, 1), CKPT_CFG_STRING(AnyConfig, name)};

Test(checkpoint, any_configuration_round_trips_and_is_checked) {
    char dir[64], path[600], bad[600];
    ts_tmp_dir(dir, sizeof dir, "ckpt");
    ts_join(path, dir, "any.npz");
    ts_join(bad, dir, "bad.npz");
    Arena *a = arena_new("params", 0);
    ParamList pl;
    ag_params_init(&pl);
    Tensor *w = tensor_param(a, 2, (int[]){2, 3}, "w");
    for (int i = 0; i < 6; i++) w->data[i] = (Real)(i - 2.5);
    ag_params_add(&pl, w);
    AnyConfig c = {1000000000003LL, -5, 0.25, "tiny"};
    Checkpoint ck = {.params = &pl, .config = {"toy", any_fields, 4, &c, NULL}};
    cr_assert_eq(ckpt_save(path, &ck, 6, NULL), AG_OK, "%s", ag_last_error());

    /* read back into a fresh struct: every type exact */
    AnyConfig r;
    memset(&r, 0x55, sizeof r);
    NpzFile *f;
    CkptConfig rc = {"toy", any_fields, 4, &r, NULL};
    cr_assert_eq(ckpt_read(path, &rc, &f), AG_OK, "%s", ag_last_error());
    cr_assert(r.big == c.big && r.small == -5 && r.x == 0.25 && strcmp(r.name, "tiny") == 0);
    npz_free(f);
    /* another kind of model: refused, the struct unchanged */
    AnyConfig g = {0};
    CkptConfig gc = {"gpt", any_fields, 4, &g, NULL};
    cr_assert_eq(ckpt_read(path, &gc, &f), AG_ERR_FORMAT);
    cr_assert(strstr(ag_last_error(), "a checkpoint of a 'toy' model, not of a 'gpt' model"), "%s",
              ag_last_error());
    cr_assert(g.big == 0 && g.name[0] == 0);

    /* loading into a model of another configuration: refused, naming the field and value */
    AnyConfig other = c;
    snprintf(other.name, sizeof other.name, "tin");
    Checkpoint ok = {.params = &pl, .config = {"toy", any_fields, 4, &other, NULL}};
    cr_assert_eq(ckpt_load(path, &ok), AG_ERR_SHAPE);
    cr_assert(strstr(ag_last_error(), "name is 'tiny' in the file"), "%s", ag_last_error());
    other = c;
    cr_assert_eq(ckpt_load(path, &ok), AG_OK, "%s", ag_last_error());

    /* saving refuses what reading would: a number out of its range, a string with no room for
     * its NUL; the file is left as it was */
    size_t n0, n1;
    char *before = ts_slurp(path, &n0);
    c.small = 6;
    cr_assert_eq(ckpt_save(path, &ck, 6, NULL), AG_ERR_RANGE);
    cr_assert(strstr(ag_last_error(), "not saved: meta.config.small = 6: must be an integer in "
                                      "[-5, 5]"),
              "%s", ag_last_error());
    c.small = 0;
    memcpy(c.name, "12345678", 8);
    cr_assert_eq(ckpt_save(path, &ck, 6, NULL), AG_ERR_RANGE);
    cr_assert(strstr(ag_last_error(), "a string of 8 bytes: at most 7"), "%s", ag_last_error());
    char *after = ts_slurp(path, &n1);
    cr_assert(n0 == n1 && memcmp(before, after, n0) == 0);

    /* a file whose values are out of range or of another type: refused naming the entry */
    double big_x = 2;
    rewrite(path, bad, "meta.config.x", NPZ_F64, &big_x);
    cr_assert_eq(ckpt_read(bad, &rc, &f), AG_ERR_RANGE);
    cr_assert(strstr(ag_last_error(), "meta.config.x = 2: must be finite in [-1, 1]"), "%s",
              ag_last_error());
    int64_t not_a_float = 0;
    rewrite(path, bad, "meta.config.x", NPZ_I64, &not_a_float);
    cr_assert_eq(ckpt_read(bad, &rc, &f), AG_ERR_FORMAT);
    cr_assert(strstr(ag_last_error(), "'meta.config.x' must be a 0-d '<f8'"), "%s",
              ag_last_error());
    cr_assert(r.x == 0.25, "a refused read changed the configuration");

    free(before), free(after);
    ag_params_free(&pl);
    arena_free(a);
    ts_rm_tree(dir);
}

/* A field added to a table after files were written (CKPT_CFG_INT_OPT, CKPT_CFG_FLOAT_OPT): a
 * file without it reads 0, and loads into a model whose field is 0; one with it is checked as
 * any field */
typedef struct {
    int a;
    int added;
    double added_x;
} GrownConfig;
static const CkptField old_table[] = {CKPT_CFG_INT(GrownConfig, a, 1, 9)};
static const CkptField grown_table[] = {CKPT_CFG_INT(GrownConfig, a, 1, 9),
                                        CKPT_CFG_INT_OPT(GrownConfig, added, 0, 3),
                                        CKPT_CFG_FLOAT_OPT(GrownConfig, added_x, -1, 1)};

Test(checkpoint, an_optional_field_absent_from_a_file_reads_zero) {
    char dir[64], old[600], bad[600];
    ts_tmp_dir(dir, sizeof dir, "ckpt");
    ts_join(old, dir, "old.npz");
    ts_join(bad, dir, "bad.npz");
    Arena *ar = arena_new("params", 0);
    ParamList pl;
    ag_params_init(&pl);
    Tensor *w = tensor_param(ar, 1, (int[]){2}, "w");
    tensor_fill(w, 1);
    ag_params_add(&pl, w);
    GrownConfig c = {4, 0, 0};
    Checkpoint ck = {.params = &pl, .config = {"toy", old_table, 1, &c, NULL}};
    cr_assert_eq(ckpt_save(old, &ck, 6, NULL), AG_OK, "%s", ag_last_error());
    GrownConfig r = {0, 7, 0.5}; /* absent fields become 0, whatever the struct held */
    CkptConfig rc = {"toy", grown_table, 3, &r, NULL};
    NpzFile *f;
    cr_assert_eq(ckpt_read(old, &rc, &f), AG_OK, "%s", ag_last_error());
    cr_assert(r.a == 4 && r.added == 0 && r.added_x == 0);
    npz_free(f);
    Checkpoint into = {.params = &pl, .config = rc};
    cr_assert_eq(ckpt_load(old, &into), AG_OK, "%s", ag_last_error());
    r.added = 2; /* a model built otherwise: the old file does not describe it */
    cr_assert_eq(ckpt_load(old, &into), AG_ERR_SHAPE);
    cr_assert(strstr(ag_last_error(), "added is 0 in the file"), "%s", ag_last_error());
    /* present: its type and range are checked */
    int64_t four = 4;
    double x = 0.5;
    GrownConfig n = {4, 3, 0.25};
    Checkpoint nk = {.params = &pl, .config = {"toy", grown_table, 3, &n, NULL}};
    cr_assert_eq(ckpt_save(bad, &nk, 6, NULL), AG_OK, "%s", ag_last_error());
    rewrite(bad, bad, "meta.config.added", NPZ_I64, &four);
    cr_assert_eq(ckpt_read(bad, &rc, &f), AG_ERR_RANGE);
    cr_assert(strstr(ag_last_error(), "meta.config.added = 4: must be an integer in [0, 3]"), "%s",
              ag_last_error());
    rewrite(bad, bad, "meta.config.added", NPZ_F64, &x);
    cr_assert_eq(ckpt_read(bad, &rc, &f), AG_ERR_FORMAT);
    cr_assert(strstr(ag_last_error(), "'meta.config.added' must be a 0-d '<i8'"), "%s",
              ag_last_error());
    ag_params_free(&pl);
    arena_free(ar);
    ts_rm_tree(dir);
}

/* misuse: an optional field whose range leaves out 0, the value a file without it reads */
typedef struct {
    int k;
} OddConfig;
Test(checkpoint, an_optional_field_whose_range_leaves_out_zero_aborts, .signal = SIGABRT) {
    static const CkptField odd[] = {CKPT_CFG_INT_OPT(OddConfig, k, 1, 3)};
    OddConfig c = {2};
    Arena *ar = arena_new("params", 0);
    ParamList pl;
    ag_params_init(&pl);
    ag_params_add(&pl, tensor_param(ar, 1, (int[]){1}, "w"));
    Checkpoint ck = {.params = &pl, .config = {"toy", odd, 1, &c, NULL}};
    ckpt_save("/tmp/attograd-never-written.npz", &ck, 6, NULL);
}
