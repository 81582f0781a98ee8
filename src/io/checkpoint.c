/* checkpoint.c: a whole training state to and from one .npz (see checkpoint.h for the entries).
 * Reading is one pass over the file (ckpt_read): the small entries first (configurations,
 * step, RNG, data position), which bound what the others may declare before their memory is
 * allocated; then what every value means (rules over named entries: ranges, finite floats,
 * Adam's second moment >= 0, an RNG not stuck at zero). Loading (ckpt_load_from) checks the
 * shapes against the model before it changes anything, then copies, which can no longer fail.
 * Saving refuses what reading would refuse. */
#include "checkpoint.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static int name_matches(const char *name, const char *pattern);

/* ---- the configuration fields, one table per struct ---- */

typedef enum { F_INT, F_I64, F_DOUBLE } FieldType;
typedef struct {
    const char *name;
    FieldType type;
    size_t offset;
} Field;

#define FIELD(S, f, t)                                                                             \
    { #f, t, offsetof(S, f) }
static const Field config_fields[] = {
    FIELD(Seq2SeqConfig, src_vocab, F_INT),        FIELD(Seq2SeqConfig, tgt_vocab, F_INT),
    FIELD(Seq2SeqConfig, n_enc_layers, F_INT),     FIELD(Seq2SeqConfig, n_dec_layers, F_INT),
    FIELD(Seq2SeqConfig, max_len, F_INT),          FIELD(Seq2SeqConfig, pad_id, F_INT),
    FIELD(Seq2SeqConfig, learned_pos, F_INT),      FIELD(Seq2SeqConfig, tie_output, F_INT),
    FIELD(Seq2SeqConfig, layer.d_model, F_INT),    FIELD(Seq2SeqConfig, layer.n_heads, F_INT),
    FIELD(Seq2SeqConfig, layer.n_kv_heads, F_INT), FIELD(Seq2SeqConfig, layer.d_ff, F_INT),
    FIELD(Seq2SeqConfig, layer.pre_ln, F_INT),     FIELD(Seq2SeqConfig, layer.act, F_INT),
    FIELD(Seq2SeqConfig, layer.dropout, F_DOUBLE), FIELD(Seq2SeqConfig, layer.ln_eps, F_DOUBLE),
};
static const Field optim_fields[] = {
    FIELD(OptimConfig, kind, F_INT),           FIELD(OptimConfig, lr, F_DOUBLE),
    FIELD(OptimConfig, momentum, F_DOUBLE),    FIELD(OptimConfig, nesterov, F_INT),
    FIELD(OptimConfig, beta1, F_DOUBLE),       FIELD(OptimConfig, beta2, F_DOUBLE),
    FIELD(OptimConfig, eps, F_DOUBLE),         FIELD(OptimConfig, weight_decay, F_DOUBLE),
    FIELD(OptimConfig, schedule.kind, F_INT),  FIELD(OptimConfig, schedule.warmup, F_I64),
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
static void add_fields(NpzWriter *w, const char *prefix, const Field *fields, int n, const void *s,
                       int64_t *ival, double *dval) {
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

/* What ckpt_read would refuse is never written: a non-finite weight or optimizer state, a
 * negative second moment, a step out of range, an RNG stuck at zero. AG_ERR_RANGE naming the
 * tensor and the index. */
static int check_tensor_saved(const char *path, const Tensor *t, double lo) {
    for (size_t k = 0; k < t->size; k++) {
        double v = (double)t->data[k];
        if (isfinite(v) && v >= lo) continue;
        return ag_fail(AG_ERR_RANGE, "%s: not saved: %s[%zu] = %.9g: must be %s", path, t->name, k,
                       v, isfinite(v) ? ">= 0" : "finite");
    }
    return AG_OK;
}

static int check_saved(const char *path, const Seq2Seq *m, const CkptState *st) {
    int rc = AG_OK;
    for (int i = 0; i < m->params.n && rc == AG_OK; i++)
        rc = check_tensor_saved(path, m->params.items[i], -DBL_MAX);
    for (int i = 0; st && st->opt && i < optim_state_count(st->opt) && rc == AG_OK; i++) {
        const Tensor *t = optim_state_tensor(st->opt, i);
        rc = check_tensor_saved(path, t, name_matches(t->name, "*.exp_avg_sq") ? 0 : -DBL_MAX);
    }
    if (rc == AG_OK && st && st->opt) {
        int64_t step = optim_get_step(st->opt);
        if (step < 0 || step > CKPT_MAX_STEP)
            rc = ag_fail(AG_ERR_RANGE, "%s: not saved: train.step = %lld: must be in [0, %lld]",
                         path, (long long)step, (long long)CKPT_MAX_STEP);
    }
    if (rc == AG_OK && st && st->rng &&
        !(st->rng->s[0] | st->rng->s[1] | st->rng->s[2] | st->rng->s[3]))
        rc = ag_fail(AG_ERR_RANGE, "%s: not saved: rng.state is all zeros", path);
    return rc;
}

int ckpt_save(const char *path, const Seq2Seq *m, const CkptState *st, int level, NpzStats *stats) {
    AG_CHECK_ARG(path);
    AG_CHECK_ARG(m);
    int bad = check_saved(path, m, st);
    if (bad != AG_OK) return bad;
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
    if (!e)
        return ag_fail(AG_ERR_SHAPE,
                       "%s: '%s' is missing (not a checkpoint of this "
                       "version?)",
                       f->path, name);
    NpzDtype want = fd->type == F_DOUBLE ? NPZ_F64 : NPZ_I64;
    if (e->dtype != want || e->ndim != 0)
        return ag_fail(AG_ERR_FORMAT, "%s: '%s' must be a 0-d %s", f->path, name,
                       npz_dtype_descr(want));
    if (fd->type == F_DOUBLE)
        memcpy(dv, e->data, sizeof *dv);
    else
        memcpy(iv, e->data, sizeof *iv);
    if (fd->type == F_INT && (*iv < INT_MIN || *iv > INT_MAX))
        return ag_fail(AG_ERR_FORMAT, "%s: '%s' is %lld, outside the range of an int", f->path,
                       name, (long long)*iv);
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

/* ---- the size of the model a configuration describes ---- */

/* Values of the parameters (params), of the other tensors nn_seq2seq_init makes (tables: the
 * sinusoidal positions, the head gates). Every
 * field must already be in range (ckpt_check_config), so that no product overflows a double's
 * exact integers. Follows nn_seq2seq_init, nn_mha_init, nn_ffn_init, nn_layernorm_init. */
typedef struct {
    double params, tables;
} ModelSize;

static ModelSize model_size(const Seq2SeqConfig *c) {
    const TransformerConfig *l = &c->layer;
    double C = l->d_model, FF = l->d_ff, NH = l->n_heads, L = c->max_len;
    double Ckv = (double)l->n_kv_heads * (l->d_model / l->n_heads);
    /* in_proj (3C, C) and its bias, or q, k, v projections; out_proj */
    double mha =
        l->n_kv_heads == l->n_heads ? 4 * C * C + 4 * C : 2 * (C * C + C) + 2 * (Ckv * C + Ckv);
    double ffn = 2 * C * FF + FF + C, ln = 2 * C;
    ModelSize s;
    s.params = (c->src_vocab + (double)c->tgt_vocab) * C + (c->learned_pos ? 2 * L * C : 0) +
               c->n_enc_layers * (mha + ffn + 2 * ln) + ln +
               c->n_dec_layers * (2 * mha + ffn + 3 * ln) + ln +
               (c->tie_output ? c->tgt_vocab : c->tgt_vocab * (C + 1));
    s.tables = (c->learned_pos ? 0 : 2 * L * C) + NH * (c->n_enc_layers + 2.0 * c->n_dec_layers);
    return s;
}

int ckpt_check_config(const Seq2SeqConfig *c, int64_t *n_params, const char *what) {
    AG_CHECK_ARG(c);
    AG_CHECK_ARG(what);
    const TransformerConfig *l = &c->layer;
    const char *why = NULL;
    char buf[200];
    if (c->src_vocab < 1 || c->tgt_vocab < 1 || c->max_len < 1 || l->d_model < 1 || l->d_ff < 1) {
        snprintf(buf, sizeof buf,
                 "src_vocab %d, tgt_vocab %d, max_len %d, d_model %d and d_ff %d must be >= 1",
                 c->src_vocab, c->tgt_vocab, c->max_len, l->d_model, l->d_ff);
        why = buf;
    } else if (c->n_enc_layers < 0 || c->n_enc_layers > NN_MAX_LAYERS || c->n_dec_layers < 1 ||
               c->n_dec_layers > NN_MAX_LAYERS) {
        snprintf(buf, sizeof buf, "layers %d+%d outside [0, %d]+[1, %d]", c->n_enc_layers,
                 c->n_dec_layers, NN_MAX_LAYERS, NN_MAX_LAYERS);
        why = buf;
    } else if (c->pad_id < 0 || c->pad_id >= c->src_vocab || c->pad_id >= c->tgt_vocab) {
        snprintf(buf, sizeof buf, "pad_id %d outside the vocabularies (%d, %d)", c->pad_id,
                 c->src_vocab, c->tgt_vocab);
        why = buf;
    } else if ((c->learned_pos | c->tie_output | l->pre_ln) & ~1) {
        why = "learned_pos, tie_output and pre_ln must be 0 or 1";
    } else if (l->n_heads < 1 || l->d_model % l->n_heads != 0 || l->n_kv_heads < 1 ||
               l->n_heads % l->n_kv_heads != 0) {
        snprintf(buf, sizeof buf,
                 "n_heads %d must divide d_model %d, and n_kv_heads %d must divide n_heads",
                 l->n_heads, l->d_model, l->n_kv_heads);
        why = buf;
    } else if (!(l->dropout >= 0 && l->dropout < 1) || !(l->ln_eps > 0 && isfinite(l->ln_eps))) {
        snprintf(buf, sizeof buf, "dropout %g must be in [0, 1) and ln_eps %g > 0", l->dropout,
                 l->ln_eps);
        why = buf;
    } else if (l->act != NN_RELU && l->act != NN_GELU) {
        snprintf(buf, sizeof buf, "activation %d is not relu (%d) or gelu (%d)", (int)l->act,
                 (int)NN_RELU, (int)NN_GELU);
        why = buf;
    } else {
        ModelSize s = model_size(c);
        if (s.params + s.tables > (double)CKPT_MAX_PARAMS) {
            snprintf(buf, sizeof buf,
                     "a model of %.0f parameters (and %.0f other values) is over the limit of "
                     "%lld (CKPT_MAX_PARAMS)",
                     s.params, s.tables, (long long)CKPT_MAX_PARAMS);
            why = buf;
        } else if (n_params) {
            *n_params = (int64_t)s.params;
        }
    }
    if (!why) return AG_OK;
    return ag_fail(AG_ERR_FORMAT, "%s: meta.config: %s", what, why);
}

/* ---- rules over named entries: one mechanism for the library's checks and a caller's ---- */

/* An entry name matches a pattern: equal, or "*suffix" and the name ends with suffix ("*"
 * alone matches every entry). */
static int name_matches(const char *name, const char *pattern) {
    if (pattern[0] != '*') return strcmp(name, pattern) == 0;
    size_t n = strlen(name), k = strlen(pattern + 1);
    return n >= k && strcmp(name + n - k, pattern + 1) == 0;
}

/* Element i of a float entry as a double, or of an integer entry as an int64. */
static double float_at(const NpzEntry *e, size_t i) {
    if (e->dtype == NPZ_F32) return ((const float *)e->data)[i];
    return ((const double *)e->data)[i];
}
static int64_t int_at(const NpzEntry *e, size_t i) {
    if (e->dtype == NPZ_I32) return ((const int32_t *)e->data)[i];
    int64_t v;
    memcpy(&v, (const char *)e->data + 8 * i, sizeof v);
    return v;
}

/* "name" for a 0-d entry, "name[i]" otherwise, then " (what)" when the rule names it */
static void value_label(char *buf, size_t cap, const NpzEntry *e, size_t i, const char *what) {
    int k = e->ndim == 0 ? snprintf(buf, cap, "%s", e->name)
                         : snprintf(buf, cap, "%s[%zu]", e->name, i);
    if (what && k >= 0 && (size_t)k < cap) snprintf(buf + k, cap - (size_t)k, " (%s)", what);
}

/* A float value against [lo, hi], finite in the build's Real: the reason it fails, or NULL. */
static const char *float_why(double v, double lo, double hi, char *buf, size_t cap) {
    if (!isfinite(v) || !isfinite((double)(Real)v)) {
        snprintf(buf, cap, "must be finite%s", isfinite(v) ? " as the build's floating type" : "");
    } else if (v < lo) {
        snprintf(buf, cap, "must be >= %.17g", lo);
    } else if (v > hi) {
        snprintf(buf, cap, "must be <= %.17g", hi);
    } else {
        return NULL;
    }
    return buf;
}

static int check_rule(const NpzFile *f, const NpzEntry *e, const CkptRule *r) {
    char label[200], why[96];
    int is_int = e->dtype == NPZ_I64 || e->dtype == NPZ_U64 || e->dtype == NPZ_I32;
    int is_float = e->dtype == NPZ_F32 || e->dtype == NPZ_F64;
    switch (r->kind) {
    case CKPT_INT:
    case CKPT_F64_BITS: {
        if (e->dtype != NPZ_I64)
            return ag_fail(AG_ERR_FORMAT, "%s: '%s' must be '<i8', not '%s'", f->path, e->name,
                           npz_dtype_descr(e->dtype));
        if ((size_t)r->index >= e->count) return AG_OK; /* an older, shorter entry */
        int64_t v = int_at(e, (size_t)r->index);
        value_label(label, sizeof label, e, (size_t)r->index, r->what);
        if (r->kind == CKPT_F64_BITS) {
            double x;
            memcpy(&x, &v, sizeof x);
            if (!float_why(x, r->lo, r->hi, why, sizeof why)) return AG_OK;
            return ag_fail(AG_ERR_RANGE, "%s: %s = %.17g: %s", f->path, label, x, why);
        }
        if (v < r->ilo)
            return ag_fail(AG_ERR_RANGE, "%s: %s = %lld: must be >= %lld", f->path, label,
                           (long long)v, (long long)r->ilo);
        if (v > r->ihi)
            return ag_fail(AG_ERR_RANGE, "%s: %s = %lld: must be <= %lld", f->path, label,
                           (long long)v, (long long)r->ihi);
        return AG_OK;
    }
    case CKPT_FLOATS:
        if (!is_float) return AG_OK; /* the rule is about float arrays only */
        for (size_t i = 0; i < e->count; i++) {
            double x = float_at(e, i);
            if (!float_why(x, r->lo, r->hi, why, sizeof why)) continue;
            value_label(label, sizeof label, e, i, r->what);
            return ag_fail(AG_ERR_RANGE, "%s: %s = %.9g: %s", f->path, label, x, why);
        }
        return AG_OK;
    case CKPT_NOT_ALL_ZERO:
        if (!is_int)
            return ag_fail(AG_ERR_FORMAT, "%s: '%s' must hold integers, not '%s'", f->path, e->name,
                           npz_dtype_descr(e->dtype));
        for (size_t i = 0; i < e->count; i++)
            if (e->dtype == NPZ_I32 ? ((const int32_t *)e->data)[i] != 0 : int_at(e, i) != 0)
                return AG_OK;
        value_label(label, sizeof label, e, 0, r->what);
        return ag_fail(AG_ERR_RANGE, "%s: %s is all zeros: %s", f->path, e->name,
                       r->what ? r->what : "must not be all zeros");
    }
    return AG_OK;
}

int ckpt_check_rules(const NpzFile *f, const CkptRule *rules, int n) {
    AG_CHECK_ARG(f);
    AG_CHECK(n == 0 || rules, "ckpt_check_rules: %d rules at NULL", n);
    for (int k = 0; k < n; k++) {
        AG_CHECK(rules[k].entry && rules[k].index >= 0, "ckpt_check_rules: rule %d is malformed",
                 k);
        for (int i = 0; i < f->n; i++) {
            if (!name_matches(f->entries[i].name, rules[k].entry)) continue;
            int rc = check_rule(f, &f->entries[i], &rules[k]);
            if (rc != AG_OK) return rc;
        }
    }
    return AG_OK;
}

/* What every checkpoint's entries must mean, whoever wrote it. The configuration is checked
 * by ckpt_check_config and optim_check_config; the shapes by ckpt_load_from. */
static const CkptRule library_rules[] = {
    {"train.step", 0, NULL, CKPT_INT, 0, CKPT_MAX_STEP, 0, 0},
    {"rng.state", 0, "the generator would stay at 0", CKPT_NOT_ALL_ZERO, 0, 0, 0, 0},
    {"*.exp_avg_sq", 0, "Adam's second moment", CKPT_FLOATS, 0, 0, 0, DBL_MAX},
    {"*", 0, NULL, CKPT_FLOATS, 0, 0, -DBL_MAX, DBL_MAX},
};
#define N_LIBRARY_RULES (int)(sizeof library_rules / sizeof library_rules[0])

/* ---- reading once ---- */

/* The file must hold at least as many float values outside the reserved prefixes as the model
 * has parameters: otherwise ckpt_load would fail anyway, and a few bytes could make the caller
 * build a model of gigabytes first. */
static int is_reserved(const char *name) {
    static const char *const reserved[] = NPZ_RESERVED_PREFIXES;
    for (size_t k = 0; k < sizeof reserved / sizeof reserved[0]; k++)
        if (strncmp(name, reserved[k], strlen(reserved[k])) == 0) return 1;
    return 0;
}

static int check_holds_params(const NpzFile *f, int64_t n_params) {
    uint64_t held = 0;
    for (int i = 0; i < f->n; i++) {
        const NpzEntry *e = &f->entries[i];
        if ((e->dtype == NPZ_F32 || e->dtype == NPZ_F64) && !is_reserved(e->name)) held += e->count;
    }
    if (held >= (uint64_t)n_params) return AG_OK;
    return ag_fail(AG_ERR_FORMAT,
                   "%s: its configuration describes a model of %lld parameters, but the file "
                   "holds only %llu parameter values (damaged, or not this model's checkpoint)",
                   f->path, (long long)n_params, (unsigned long long)held);
}

/* The small entries, read first: the configurations, the step, the RNG, the data position. */
static int is_small_entry(const char *name) {
    return strncmp(name, "meta.config.", 12) == 0 || strncmp(name, "meta.optim.", 11) == 0 ||
           strcmp(name, "train.step") == 0 || strcmp(name, "rng.state") == 0 ||
           strcmp(name, "data.position") == 0;
}

/* The configurations of f (the small entries suffice), checked. */
static int config_of(const NpzFile *f, Seq2SeqConfig *cfg, OptimConfig *opt_cfg, int *has_optim,
                     int64_t *n_params) {
    Seq2SeqConfig c;
    memset(&c, 0, sizeof c);
    int rc = read_fields(f, "meta.config.", config_fields, N_CONFIG, &c);
    int has = npz_find(f, "meta.optim.kind") != NULL;
    OptimConfig o;
    memset(&o, 0, sizeof o);
    if (rc == AG_OK && has) rc = read_fields(f, "meta.optim.", optim_fields, N_OPTIM, &o);
    if (rc == AG_OK) rc = ckpt_check_config(&c, n_params, f->path);
    if (rc == AG_OK && has && optim_check_config(&o) != AG_OK) {
        char why[256];
        snprintf(why, sizeof why, "%s", ag_last_error()); /* ag_fail rewrites that buffer */
        rc = ag_fail(AG_ERR_FORMAT, "%s: meta.optim: %s", f->path, why);
    }
    if (rc != AG_OK) return rc;
    if (cfg) *cfg = c;
    if (opt_cfg && has) *opt_cfg = o;
    if (has_optim) *has_optim = has;
    return AG_OK;
}

/* npz_read_admitted's callback: the small entries first, each at most CKPT_MAX_SMALL bytes,
 * and meta.extra at most CKPT_MAX_EXTRA; then, once the configuration is read, the other
 * entries together at most what the model it describes holds (ckpt.h, CKPT_MAX_SMALL). */
static int admit(void *ctx, const NpzDirectory *dir, const NpzFile *loaded) {
    const char *path = ctx;
    if (!loaded) {
        int n_small = 0;
        for (int i = 0; i < dir->n; i++) {
            const char *name = dir->names[i];
            uint64_t cap = 0;
            if (is_small_entry(name)) {
                dir->first[i] = 1;
                cap = CKPT_MAX_SMALL;
                if (++n_small > CKPT_MAX_SMALL_ENTRIES)
                    return ag_fail(AG_ERR_FORMAT,
                                   "%s: more than %d configuration, step, RNG and position "
                                   "entries",
                                   path, CKPT_MAX_SMALL_ENTRIES);
            } else if (strcmp(name, "meta.extra") == 0) {
                cap = CKPT_MAX_EXTRA;
            }
            if (cap && dir->bytes[i] > cap)
                return ag_fail(AG_ERR_FORMAT,
                               "%s: entry '%s' declares %llu bytes; a checkpoint's '%s' holds at "
                               "most %llu",
                               path, name, (unsigned long long)dir->bytes[i], name,
                               (unsigned long long)cap);
        }
        return AG_OK;
    }
    Seq2SeqConfig c;
    OptimConfig o;
    int has_optim = 0;
    int64_t n_params = 0;
    int rc = config_of(loaded, &c, &o, &has_optim, &n_params);
    if (rc != AG_OK) return rc;
    /* every parameter in float64 at most, Adam's two moments beside it, an .npy header each */
    double allowed = (double)n_params * 8 * (has_optim ? 3 : 1), declared = 0;
    for (int i = 0; i < dir->n; i++) {
        if (dir->first[i] || strcmp(dir->names[i], "meta.extra") == 0) continue;
        declared += (double)dir->bytes[i];
        allowed += CKPT_MAX_SMALL;
    }
    if (declared <= allowed) return AG_OK;
    return ag_fail(AG_ERR_FORMAT,
                   "%s: its arrays declare %.0f bytes, more than a model of %lld parameters%s "
                   "holds (%.0f bytes at most)",
                   path, declared, (long long)n_params, has_optim ? " and its optimizer" : "",
                   allowed);
}

int ckpt_read(const char *path, NpzFile **out) {
    AG_CHECK_ARG(path);
    AG_CHECK_ARG(out);
    NpzFile *f = NULL;
    int rc = npz_read_admitted(path, &f, NULL, admit, (void *)path);
    int64_t n_params = 0;
    if (rc == AG_OK) rc = config_of(f, NULL, NULL, NULL, &n_params);
    if (rc == AG_OK) rc = check_holds_params(f, n_params);
    if (rc == AG_OK) {
        const NpzEntry *e = npz_find(f, "train.step");
        if (e && (e->dtype != NPZ_I64 || e->ndim != 0))
            rc = ag_fail(AG_ERR_FORMAT, "%s: 'train.step' must be a 0-d '<i8'", path);
        e = npz_find(f, "rng.state");
        if (rc == AG_OK && e && (e->dtype != NPZ_U64 || e->ndim != 1 || e->shape[0] != 4))
            rc = ag_fail(AG_ERR_FORMAT, "%s: 'rng.state' must be 4 '<u8' values", path);
        e = npz_find(f, "data.position");
        if (rc == AG_OK && e &&
            (e->dtype != NPZ_I64 || e->ndim != 1 || e->shape[0] < 1 || e->shape[0] > CKPT_MAX_DATA))
            rc = ag_fail(AG_ERR_FORMAT, "%s: 'data.position' must be 1 to %d '<i8' values", path,
                         CKPT_MAX_DATA);
    }
    if (rc == AG_OK) rc = ckpt_check_rules(f, library_rules, N_LIBRARY_RULES);
    if (rc != AG_OK) {
        npz_free(f);
        return rc;
    }
    *out = f;
    return AG_OK;
}

int ckpt_config_of(const NpzFile *f, Seq2SeqConfig *cfg, OptimConfig *opt_cfg, int *has_optim) {
    AG_CHECK_ARG(f);
    AG_CHECK_ARG(cfg);
    return config_of(f, cfg, opt_cfg, has_optim, NULL);
}

int ckpt_read_config(const char *path, Seq2SeqConfig *cfg, OptimConfig *opt_cfg, int *has_optim) {
    AG_CHECK_ARG(path);
    AG_CHECK_ARG(cfg);
    NpzFile *f;
    int rc = ckpt_read(path, &f);
    if (rc != AG_OK) return rc;
    rc = config_of(f, cfg, opt_cfg, has_optim, NULL);
    npz_free(f);
    return rc;
}

/* A float entry with exactly t's shape, or an error naming the file and the tensor. */
static int check_like(const NpzFile *f, const char *name, const Tensor *t, const NpzEntry **out) {
    const NpzEntry *e = npz_find(f, name);
    if (!e)
        return ag_fail(AG_ERR_SHAPE, "%s: tensor '%s' %s is missing", f->path, name,
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

int ckpt_load_from(const NpzFile *f, Seq2Seq *m, CkptState *st) {
    AG_CHECK_ARG(f);
    AG_CHECK_ARG(m);
    const char *path = f->path;
    int rc = AG_OK;
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
            rc = ag_fail(AG_ERR_SHAPE,
                         "%s: the model's configuration differs: %s is %g in the "
                         "file (build the model with ckpt_read_config)",
                         path, config_fields[i].name,
                         config_fields[i].type == F_DOUBLE ? dv : (double)iv);
    }
    /* 2. everything else that was asked for, checked but not yet copied (the values passed
     * ckpt_read's rules) */
    Optimizer *opt = st ? st->opt : NULL;
    const NpzEntry *step = NULL, *rng = NULL, *data = NULL, *extra = NULL;
    for (int i = 0; rc == AG_OK && opt && i < optim_state_count(opt); i++) {
        const NpzEntry *e;
        const Tensor *t = optim_state_tensor(opt, i);
        rc = check_like(f, t->name, t, &e);
    }
    if (rc == AG_OK && opt) rc = check_ints(f, "train.step", NPZ_I64, -1, &step);
    if (rc == AG_OK && opt) /* ckpt_read's rules passed, unless f came from elsewhere */
        rc = ckpt_check_rules(f, library_rules, 1);
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
        if (!extra_copy)
            rc = ag_fail(AG_ERR_NOMEM, "%s: out of memory for 'meta.extra'", path);
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
        optim_set_step(opt, s); /* in [0, CKPT_MAX_STEP]: ckpt_read's rules */
    }
    if (rng) memcpy(st->rng->s, rng->data, sizeof st->rng->s);
    if (data) memcpy(st->data, data->data, (size_t)st->n_data * sizeof(int64_t));
    if (st) {
        st->extra = extra_copy;
        st->extra_len = extra ? extra->nbytes : 0;
    }
    return AG_OK;
}

int ckpt_load(const char *path, Seq2Seq *m, CkptState *st) {
    AG_CHECK_ARG(path);
    AG_CHECK_ARG(m);
    NpzFile *f;
    int rc = ckpt_read(path, &f);
    if (rc != AG_OK) return rc;
    rc = ckpt_load_from(f, m, st);
    npz_free(f);
    return rc;
}
