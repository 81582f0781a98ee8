/* checkpoint.c: a whole training state to and from one .npz (see checkpoint.h for the entries).
 * Loading validates everything before it changes anything: the configuration, the optimizer
 * state, the RNG and data position, then the parameters (npz_params_from_file, itself all or
 * nothing), and only then copies the rest, which can no longer fail. */
#include "checkpoint.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* ---- the configuration fields, one table per struct ---- */

typedef enum { F_INT, F_I64, F_DOUBLE } FieldType;
typedef struct {
    const char *name;
    FieldType type;
    size_t offset;
} Field;

#define FIELD(S, f, t) {#f, t, offsetof(S, f)}
static const Field config_fields[] = {
    FIELD(Seq2SeqConfig, src_vocab, F_INT),      FIELD(Seq2SeqConfig, tgt_vocab, F_INT),
    FIELD(Seq2SeqConfig, n_enc_layers, F_INT),   FIELD(Seq2SeqConfig, n_dec_layers, F_INT),
    FIELD(Seq2SeqConfig, max_len, F_INT),        FIELD(Seq2SeqConfig, pad_id, F_INT),
    FIELD(Seq2SeqConfig, learned_pos, F_INT),    FIELD(Seq2SeqConfig, tie_output, F_INT),
    FIELD(Seq2SeqConfig, layer.d_model, F_INT),  FIELD(Seq2SeqConfig, layer.n_heads, F_INT),
    FIELD(Seq2SeqConfig, layer.n_kv_heads, F_INT), FIELD(Seq2SeqConfig, layer.d_ff, F_INT),
    FIELD(Seq2SeqConfig, layer.pre_ln, F_INT),   FIELD(Seq2SeqConfig, layer.act, F_INT),
    FIELD(Seq2SeqConfig, layer.dropout, F_DOUBLE), FIELD(Seq2SeqConfig, layer.ln_eps, F_DOUBLE),
};
static const Field optim_fields[] = {
    FIELD(OptimConfig, kind, F_INT),          FIELD(OptimConfig, lr, F_DOUBLE),
    FIELD(OptimConfig, momentum, F_DOUBLE),   FIELD(OptimConfig, nesterov, F_INT),
    FIELD(OptimConfig, beta1, F_DOUBLE),      FIELD(OptimConfig, beta2, F_DOUBLE),
    FIELD(OptimConfig, eps, F_DOUBLE),        FIELD(OptimConfig, weight_decay, F_DOUBLE),
    FIELD(OptimConfig, schedule.kind, F_INT), FIELD(OptimConfig, schedule.warmup, F_I64),
    FIELD(OptimConfig, schedule.total, F_I64), FIELD(OptimConfig, schedule.lr_min, F_DOUBLE),
};
#define N_CONFIG (int)(sizeof config_fields / sizeof config_fields[0])
#define N_OPTIM (int)(sizeof optim_fields / sizeof optim_fields[0])

/* A field's value as int64 or double (enums are int-sized here). */
static int64_t get_i(const void *s, const Field *f) {
    const char *p = (const char *)s + f->offset;
    if (f->type == F_I64) return *(const int64_t *)p;
    return *(const int *)p;
}
static void set_i(void *s, const Field *f, int64_t v) {
    char *p = (char *)s + f->offset;
    if (f->type == F_I64)
        *(int64_t *)p = v;
    else
        *(int *)p = (int)v;
}

/* Adds one 0-d entry per field; values are kept in ival/dval until the write. */
static void add_fields(NpzWriter *w, const char *prefix, const Field *fields, int n,
                       const void *s, int64_t *ival, double *dval) {
    char name[128];
    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof name, "%s%s", prefix, fields[i].name);
        if (fields[i].type == F_DOUBLE) {
            dval[i] = *(const double *)((const char *)s + fields[i].offset);
            npz_add_f64(w, name, 0, NULL, &dval[i]);
        } else {
            ival[i] = get_i(s, &fields[i]);
            npz_add_i64(w, name, 0, NULL, &ival[i]);
        }
    }
}

int ckpt_save(const char *path, const Seq2Seq *m, const CkptState *st, int level,
              NpzStats *stats) {
    AG_CHECK_ARG(path);
    AG_CHECK_ARG(m);
    NpzWriter *w = npz_writer_new();
    npz_add_params(w, &m->params, NPZ_REAL);
    int64_t cfg_i[N_CONFIG], opt_i[N_OPTIM], step = 0;
    double cfg_d[N_CONFIG], opt_d[N_OPTIM];
    add_fields(w, "meta.config.", config_fields, N_CONFIG, &m->cfg, cfg_i, cfg_d);
    if (st && st->opt) {
        add_fields(w, "meta.optim.", optim_fields, N_OPTIM, &st->opt->cfg, opt_i, opt_d);
        for (int i = 0; i < optim_state_count(st->opt); i++) {
            const Tensor *t = optim_state_tensor(st->opt, i);
            npz_add_real(w, t->name, t);
        }
        step = optim_get_step(st->opt);
        npz_add_i64(w, "train.step", 0, NULL, &step);
    }
    if (st && st->rng) npz_add_u64(w, "rng.state", 1, (int64_t[]){4}, st->rng->s);
    if (st && st->n_data > 0) {
        AG_CHECK(st->n_data <= CKPT_MAX_DATA, "ckpt_save: n_data %d > %d", st->n_data,
                 CKPT_MAX_DATA);
        npz_add_i64(w, "data.position", 1, (int64_t[]){st->n_data}, st->data);
    }
    if (st && st->extra && st->extra_len) npz_add_bytes(w, "meta.extra", st->extra, st->extra_len);
    int rc = npz_write(w, path, level, stats);
    npz_writer_free(w);
    return rc;
}

/* The 0-d entry prefix+field as int64 or double, or an error naming it. */
static int read_field(const NpzFile *f, const char *prefix, const Field *fd, int64_t *iv,
                      double *dv) {
    char name[128];
    snprintf(name, sizeof name, "%s%s", prefix, fd->name);
    const NpzEntry *e = npz_find(f, name);
    if (!e) return ag_fail(AG_ERR_SHAPE, "%s: '%s' is missing (not a checkpoint of this "
                           "version?)", f->path, name);
    NpzDtype want = fd->type == F_DOUBLE ? NPZ_F64 : NPZ_I64;
    if (e->dtype != want || e->ndim != 0)
        return ag_fail(AG_ERR_FORMAT, "%s: '%s' must be a 0-d %s", f->path, name,
                       npz_dtype_descr(want));
    if (fd->type == F_DOUBLE)
        memcpy(dv, e->data, sizeof *dv);
    else
        memcpy(iv, e->data, sizeof *iv);
    return AG_OK;
}

static int read_fields(const NpzFile *f, const char *prefix, const Field *fields, int n, void *s) {
    for (int i = 0; i < n; i++) {
        int64_t iv = 0;
        double dv = 0;
        int rc = read_field(f, prefix, &fields[i], &iv, &dv);
        if (rc != AG_OK) return rc;
        if (fields[i].type == F_DOUBLE)
            *(double *)((char *)s + fields[i].offset) = dv;
        else
            set_i(s, &fields[i], iv);
    }
    return AG_OK;
}

int ckpt_read_config(const char *path, Seq2SeqConfig *cfg, OptimConfig *opt_cfg,
                     int *has_optim) {
    AG_CHECK_ARG(path);
    AG_CHECK_ARG(cfg);
    NpzFile *f;
    int rc = npz_read(path, &f, NULL);
    if (rc != AG_OK) return rc;
    Seq2SeqConfig c;
    memset(&c, 0, sizeof c);
    rc = read_fields(f, "meta.config.", config_fields, N_CONFIG, &c);
    int has = npz_find(f, "meta.optim.kind") != NULL;
    OptimConfig o;
    memset(&o, 0, sizeof o);
    if (rc == AG_OK && has) rc = read_fields(f, "meta.optim.", optim_fields, N_OPTIM, &o);
    npz_free(f);
    if (rc != AG_OK) return rc;
    *cfg = c;
    if (opt_cfg && has) *opt_cfg = o;
    if (has_optim) *has_optim = has;
    return AG_OK;
}

/* A float entry with exactly t's shape, or an error naming the file and the tensor. */
static int check_like(const NpzFile *f, const char *name, const Tensor *t, const NpzEntry **out) {
    const NpzEntry *e = npz_find(f, name);
    if (!e) return ag_fail(AG_ERR_SHAPE, "%s: tensor '%s' %s is missing", f->path, name,
                           tensor_shape_str(t));
    int same = e->ndim == t->ndim && (e->dtype == NPZ_F32 || e->dtype == NPZ_F64);
    for (int i = 0; same && i < t->ndim; i++) same = e->shape[i] == t->shape[i];
    if (!same) {
        char buf[96];
        return ag_fail(AG_ERR_SHAPE, "%s: tensor '%s': %s %s in the file, %s expected", f->path,
                       name, npz_dtype_descr(e->dtype),
                       npz_shape_str(buf, sizeof buf, e->ndim, e->shape), tensor_shape_str(t));
    }
    *out = e;
    return AG_OK;
}

static int check_ints(const NpzFile *f, const char *name, NpzDtype dtype, int64_t n,
                      const NpzEntry **out) {
    const NpzEntry *e = npz_find(f, name);
    if (!e) return ag_fail(AG_ERR_SHAPE, "%s: '%s' is missing", f->path, name);
    if (e->dtype != dtype || e->ndim != (n < 0 ? 0 : 1) || (n >= 0 && e->shape[0] != n))
        return ag_fail(AG_ERR_SHAPE, "%s: '%s' must be %s of %s%lld values", f->path, name,
                       npz_dtype_descr(dtype), n < 0 ? "a 0-d array" : "",
                       (long long)(n < 0 ? 1 : n));
    *out = e;
    return AG_OK;
}

int ckpt_load(const char *path, Seq2Seq *m, CkptState *st) {
    AG_CHECK_ARG(path);
    AG_CHECK_ARG(m);
    NpzFile *f;
    int rc = npz_read(path, &f, NULL);
    if (rc != AG_OK) return rc;
    /* 1. the configuration must be the model's */
    for (int i = 0; i < N_CONFIG && rc == AG_OK; i++) {
        int64_t iv = 0;
        double dv = 0;
        rc = read_field(f, "meta.config.", &config_fields[i], &iv, &dv);
        if (rc != AG_OK) break;
        int same = config_fields[i].type == F_DOUBLE
                       ? dv == *(const double *)((const char *)&m->cfg + config_fields[i].offset)
                       : iv == get_i(&m->cfg, &config_fields[i]);
        if (!same)
            rc = ag_fail(AG_ERR_SHAPE, "%s: the model's configuration differs: %s is %g in the "
                         "file (build the model with ckpt_read_config)", path,
                         config_fields[i].name,
                         config_fields[i].type == F_DOUBLE ? dv : (double)iv);
    }
    /* 2. everything else that was asked for, checked but not yet copied */
    Optimizer *opt = st ? st->opt : NULL;
    const NpzEntry *step = NULL, *rng = NULL, *data = NULL, *extra = NULL;
    for (int i = 0; rc == AG_OK && opt && i < optim_state_count(opt); i++) {
        const NpzEntry *e;
        const Tensor *t = optim_state_tensor(opt, i);
        rc = check_like(f, t->name, t, &e);
    }
    if (rc == AG_OK && opt) rc = check_ints(f, "train.step", NPZ_I64, -1, &step);
    if (rc == AG_OK && st && st->rng) rc = check_ints(f, "rng.state", NPZ_U64, 4, &rng);
    if (rc == AG_OK && st && st->n_data > 0)
        rc = check_ints(f, "data.position", NPZ_I64, st->n_data, &data);
    if (rc == AG_OK && st) {
        extra = npz_find(f, "meta.extra");
        if (extra && (extra->dtype != NPZ_U8 || extra->ndim != 1))
            rc = ag_fail(AG_ERR_FORMAT, "%s: 'meta.extra' must be a 1-D '|u1' array", path);
    }
    char *extra_copy = NULL;
    if (rc == AG_OK && extra) {
        extra_copy = malloc(extra->nbytes + 1);
        if (!extra_copy) rc = ag_fail(AG_ERR_NOMEM, "%s: out of memory for 'meta.extra'", path);
        else {
            memcpy(extra_copy, extra->data, extra->nbytes);
            extra_copy[extra->nbytes] = 0; /* text stays a C string */
        }
    }
    /* 3. the parameters: validated, then copied, all or nothing */
    NpzLoadInfo info;
    if (rc == AG_OK) rc = npz_params_from_file(&m->params, f, &info);
    if (rc != AG_OK) {
        free(extra_copy);
        npz_free(f);
        return rc;
    }
    /* 4. nothing can fail now */
    for (int i = 0; opt && i < optim_state_count(opt); i++) {
        Tensor *t = optim_state_tensor(opt, i);
        const NpzEntry *e = npz_find(f, t->name);
        npz_entry_to_tensor(f, e, t, NULL);
    }
    if (opt) {
        int64_t s;
        memcpy(&s, step->data, sizeof s);
        optim_set_step(opt, s);
    }
    if (rng) memcpy(st->rng->s, rng->data, sizeof st->rng->s);
    if (data) memcpy(st->data, data->data, (size_t)st->n_data * sizeof(int64_t));
    if (st) {
        st->extra = extra_copy;
        st->extra_len = extra ? extra->nbytes : 0;
    }
    npz_free(f);
    return AG_OK;
}
