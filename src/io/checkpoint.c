/* checkpoint.c: a whole training state of any model to and from one .npz (see checkpoint.h
 * for the entries). Reading is one pass over the file (ckpt_read): the small entries first
 * (model kind, configurations, step, RNG, data position), which bound what the others may
 * declare before their memory is allocated; then what every value means (rules over named
 * entries: ranges, finite floats, Adam's second moment >= 0, an RNG not stuck at zero).
 * Loading (ckpt_load_from) checks the shapes against the model before it changes anything,
 * then copies, which can no longer fail. Saving refuses what reading would refuse.
 * Not here: what a model's configuration means (the model's CkptConfig.check, e.g.
 * nn_seq2seq_check_config); the .npz container (npz_read.c, npz_write.c). */
#include "checkpoint.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int name_matches(const char *name, const char *pattern);

/* ---- configuration fields ---- */

/* The optimizer's configuration, in the same form a model gives its own. */
static const CkptField optim_fields[] = {
    CKPT_CFG_INT(OptimConfig, kind, INT_MIN, INT_MAX),
    CKPT_CFG_FLOAT(OptimConfig, lr, -DBL_MAX, DBL_MAX),
    CKPT_CFG_FLOAT(OptimConfig, momentum, -DBL_MAX, DBL_MAX),
    CKPT_CFG_INT(OptimConfig, nesterov, INT_MIN, INT_MAX),
    CKPT_CFG_FLOAT(OptimConfig, beta1, -DBL_MAX, DBL_MAX),
    CKPT_CFG_FLOAT(OptimConfig, beta2, -DBL_MAX, DBL_MAX),
    CKPT_CFG_FLOAT(OptimConfig, eps, -DBL_MAX, DBL_MAX),
    CKPT_CFG_FLOAT(OptimConfig, weight_decay, -DBL_MAX, DBL_MAX),
    CKPT_CFG_INT(OptimConfig, schedule.kind, INT_MIN, INT_MAX),
    CKPT_CFG_INT(OptimConfig, schedule.warmup, INT64_MIN, INT64_MAX),
    CKPT_CFG_INT(OptimConfig, schedule.total, INT64_MIN, INT64_MAX),
    CKPT_CFG_FLOAT(OptimConfig, schedule.lr_min, -DBL_MAX, DBL_MAX),
};
#define N_OPTIM (int)(sizeof optim_fields / sizeof optim_fields[0])

static int check_optim(const void *values, int64_t *n_params) {
    (void)n_params;
    return optim_check_config(values);
}

/* One field's value, as it is in a struct or in a file. */
typedef struct {
    int64_t i;
    double d;
    const char *s; /* a string: its bytes (not NUL-terminated in a file) and length */
    size_t len;
} FieldValue;

/* Misuse of a table aborts: a type of another size than the member's. */
static void check_field(const CkptField *fd) {
    AG_CHECK(fd->name && ((fd->type == CKPT_FIELD_INT && (fd->size == 4 || fd->size == 8)) ||
                          (fd->type == CKPT_FIELD_FLOAT && fd->size == 8) ||
                          (fd->type == CKPT_FIELD_STRING && fd->size >= 1)),
             "checkpoint: configuration field '%s' (type %d, %zu bytes): INT is an int, enum or "
             "int64_t, FLOAT a double, STRING a char array",
             fd->name ? fd->name : "NULL", (int)fd->type, fd->size);
    AG_CHECK(!fd->optional || fd->type == CKPT_FIELD_STRING || (fd->lo <= 0 && fd->hi >= 0),
             "checkpoint: optional configuration field '%s': a number whose range [%g, %g] holds "
             "0 (the value of a file without it; a string's: empty)",
             fd->name, fd->lo, fd->hi);
}

static FieldValue get_field(const void *s, const CkptField *fd) {
    const char *p = (const char *)s + fd->offset;
    FieldValue v = {0, 0, NULL, 0};
    check_field(fd);
    if (fd->type == CKPT_FIELD_FLOAT) {
        memcpy(&v.d, p, sizeof v.d);
    } else if (fd->type == CKPT_FIELD_STRING) {
        v.s = p;
        v.len = strnlen(p, fd->size);
    } else if (fd->size == 8) {
        memcpy(&v.i, p, sizeof v.i);
    } else {
        int32_t x;
        memcpy(&x, p, sizeof x);
        v.i = x;
    }
    return v;
}

static void set_field(void *s, const CkptField *fd, const FieldValue *v) {
    char *p = (char *)s + fd->offset;
    if (fd->type == CKPT_FIELD_FLOAT) {
        memcpy(p, &v->d, sizeof v->d);
    } else if (fd->type == CKPT_FIELD_STRING) {
        if (v->len) memcpy(p, v->s, v->len); /* an optional string absent from the file: empty */
        memset(p + v->len, 0, fd->size - v->len);
    } else if (fd->size == 8) {
        memcpy(p, &v->i, sizeof v->i);
    } else {
        int32_t x = (int32_t)v->i;
        memcpy(p, &x, sizeof x);
    }
}

/* Why a value does not fit its field ([lo, hi], an int's range, a string's room), or NULL. */
static const char *field_why(const CkptField *fd, const FieldValue *v, char *buf, size_t cap) {
    if (fd->type == CKPT_FIELD_STRING) {
        if (v->len < fd->size && !memchr(v->s, 0, v->len)) return NULL;
        snprintf(buf, cap, "a string of %zu bytes%s: at most %zu, no NUL", v->len,
                 memchr(v->s, 0, v->len) ? " with a NUL" : "", fd->size - 1);
        return buf;
    }
    double x = fd->type == CKPT_FIELD_FLOAT ? v->d : (double)v->i;
    int fits = fd->type == CKPT_FIELD_FLOAT ? isfinite(x)
                                            : fd->size == 8 || (v->i >= INT_MIN && v->i <= INT_MAX);
    if (fits && x >= fd->lo && x <= fd->hi) return NULL;
    snprintf(buf, cap, "must be %s in [%.17g, %.17g]",
             fd->type == CKPT_FIELD_FLOAT ? "finite" : "an integer", fd->lo, fd->hi);
    return buf;
}

/* "= 5" or "= 'text'" for messages */
static void value_str(const CkptField *fd, const FieldValue *v, char *buf, size_t cap) {
    if (fd->type == CKPT_FIELD_STRING)
        snprintf(buf, cap, "'%.*s'", (int)(v->len < 64 ? v->len : 64), v->s);
    else if (fd->type == CKPT_FIELD_FLOAT)
        snprintf(buf, cap, "%.17g", v->d);
    else
        snprintf(buf, cap, "%lld", (long long)v->i);
}

/* ---- saving ---- */

/* A configuration reading would refuse is not written: AG_ERR_RANGE naming the field. */
static int check_config_saved(const char *path, const char *prefix, const CkptConfig *c) {
    char why[160], val[96];
    for (int i = 0; i < c->n_fields; i++) {
        FieldValue v = get_field(c->values, &c->fields[i]);
        if (!field_why(&c->fields[i], &v, why, sizeof why)) continue;
        value_str(&c->fields[i], &v, val, sizeof val);
        return ag_fail(AG_ERR_RANGE, "%s: not saved: %s%s = %s: %s", path, prefix,
                       c->fields[i].name, val, why);
    }
    int64_t n = 0;
    if (c->check && c->check(c->values, &n) != AG_OK) {
        snprintf(why, sizeof why, "%s", ag_last_error()); /* ag_fail rewrites that buffer */
        return ag_fail(AG_ERR_RANGE, "%s: not saved: %s: %s", path, prefix, why);
    }
    return AG_OK;
}

/* Adds one entry per field; numbers are kept in iv/dv until the write. */
static void add_fields(NpzWriter *w, const char *prefix, const CkptConfig *c, int64_t *iv,
                       double *dv) {
    char name[160];
    for (int i = 0; i < c->n_fields; i++) {
        const CkptField *fd = &c->fields[i];
        FieldValue v = get_field(c->values, fd);
        snprintf(name, sizeof name, "%s%s", prefix, fd->name);
        if (fd->type == CKPT_FIELD_STRING) {
            npz_add_bytes(w, name, v.s, v.len);
        } else if (fd->type == CKPT_FIELD_FLOAT) {
            dv[i] = v.d;
            npz_add_f64(w, name, 0, NULL, &dv[i]);
        } else {
            iv[i] = v.i;
            npz_add_i64(w, name, 0, NULL, &iv[i]);
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

static int check_saved(const char *path, const Checkpoint *c) {
    int rc = AG_OK;
    for (int i = 0; i < c->params->n && rc == AG_OK; i++)
        rc = check_tensor_saved(path, c->params->items[i], -DBL_MAX);
    for (int i = 0; c->opt && i < optim_state_count(c->opt) && rc == AG_OK; i++) {
        const Tensor *t = optim_state_tensor(c->opt, i);
        rc = check_tensor_saved(path, t, name_matches(t->name, "*.exp_avg_sq") ? 0 : -DBL_MAX);
    }
    if (rc == AG_OK && c->opt) {
        int64_t step = optim_get_step(c->opt);
        if (step < 0 || step > CKPT_MAX_STEP)
            rc = ag_fail(AG_ERR_RANGE, "%s: not saved: train.step = %lld: must be in [0, %lld]",
                         path, (long long)step, (long long)CKPT_MAX_STEP);
    }
    if (rc == AG_OK && c->rng && !(c->rng->s[0] | c->rng->s[1] | c->rng->s[2] | c->rng->s[3]))
        rc = ag_fail(AG_ERR_RANGE, "%s: not saved: rng.state is all zeros", path);
    if (rc == AG_OK && c->config.n_fields)
        rc = check_config_saved(path, "meta.config.", &c->config);
    if (rc == AG_OK && c->run.n_fields) rc = check_config_saved(path, "meta.run.", &c->run);
    return rc;
}

int ckpt_save(const char *path, const Checkpoint *c, int level, NpzStats *stats) {
    AG_CHECK_ARG(path);
    AG_CHECK_ARG(c);
    AG_CHECK(c->params != NULL, "ckpt_save: '%s': no parameters (Checkpoint.params is NULL)", path);
    AG_CHECK(c->config.n_fields == 0 || (c->config.fields && c->config.values),
             "ckpt_save: '%s': %d configuration fields at NULL", path, c->config.n_fields);
    AG_CHECK(c->n_data >= 0 && c->n_data <= CKPT_MAX_DATA, "ckpt_save: n_data %d outside [0, %d]",
             c->n_data, CKPT_MAX_DATA);
    AG_CHECK(c->run.n_fields >= 0 && (c->run.n_fields == 0 || (c->run.fields && c->run.values)),
             "ckpt_save: '%s': %d run fields at NULL", path, c->run.n_fields);
    int bad = check_saved(path, c);
    if (bad != AG_OK) return bad;
    NpzWriter *w = npz_writer_new();
    npz_add_params(w, c->params, NPZ_REAL);
    int n = c->config.n_fields > N_OPTIM ? c->config.n_fields : N_OPTIM;
    if (c->run.n_fields > n) n = c->run.n_fields;
    int64_t *iv = calloc((size_t)n * 3, sizeof *iv), step = 0;
    double *dv = calloc((size_t)n * 3, sizeof *dv);
    AG_CHECK(iv && dv, "ckpt_save: out of memory");
    if (c->config.model) npz_add_bytes(w, "meta.model", c->config.model, strlen(c->config.model));
    add_fields(w, "meta.config.", &c->config, iv, dv);
    if (c->opt) {
        CkptConfig oc = {NULL, optim_fields, N_OPTIM, &c->opt->cfg, NULL};
        add_fields(w, "meta.optim.", &oc, iv + n, dv + n);
        for (int i = 0; i < optim_state_count(c->opt); i++) {
            const Tensor *t = optim_state_tensor(c->opt, i);
            npz_add_real(w, t->name, t);
        }
        step = optim_get_step(c->opt);
        npz_add_i64(w, "train.step", 0, NULL, &step);
    }
    if (c->rng) npz_add_u64(w, "rng.state", 1, (int64_t[]){4}, c->rng->s);
    if (c->n_data > 0) npz_add_i64(w, "data.position", 1, (int64_t[]){c->n_data}, c->data);
    if (c->extra && c->extra_len) npz_add_bytes(w, "meta.extra", c->extra, c->extra_len);
    if (c->run.n_fields) add_fields(w, "meta.run.", &c->run, iv + 2 * n, dv + 2 * n);
    int rc = npz_write(w, path, level, stats);
    npz_writer_free(w);
    free(iv);
    free(dv);
    return rc;
}

/* ---- reading a configuration ---- */

/* The entry prefix + fd->name as a value of fd's type, checked against fd, or an error naming
 * it. */
static int read_field(const NpzFile *f, const char *prefix, const CkptField *fd, FieldValue *v) {
    char name[160], why[160], val[96];
    check_field(fd);
    snprintf(name, sizeof name, "%s%s", prefix, fd->name);
    const NpzEntry *e = npz_find(f, name);
    if (!e && fd->optional) { /* a file older than the field: 0 */
        memset(v, 0, sizeof *v);
        return AG_OK;
    }
    if (!e)
        return ag_fail(AG_ERR_SHAPE, "%s: '%s' is missing (not a checkpoint of this model?)",
                       f->path, name);
    NpzDtype want = fd->type == CKPT_FIELD_FLOAT    ? NPZ_F64
                    : fd->type == CKPT_FIELD_STRING ? NPZ_U8
                                                    : NPZ_I64;
    if (e->dtype != want || e->ndim != (fd->type == CKPT_FIELD_STRING))
        return ag_fail(AG_ERR_FORMAT, "%s: '%s' must be a %s '%s'", f->path, name,
                       fd->type == CKPT_FIELD_STRING ? "1-D" : "0-d", npz_dtype_descr(want));
    memset(v, 0, sizeof *v);
    if (fd->type == CKPT_FIELD_STRING) {
        v->s = e->data;
        v->len = e->count;
    } else if (fd->type == CKPT_FIELD_FLOAT) {
        memcpy(&v->d, e->data, sizeof v->d);
    } else {
        memcpy(&v->i, e->data, sizeof v->i);
    }
    if (!field_why(fd, v, why, sizeof why)) return AG_OK;
    value_str(fd, v, val, sizeof val);
    return ag_fail(fd->type == CKPT_FIELD_STRING ? AG_ERR_FORMAT : AG_ERR_RANGE, "%s: %s = %s: %s",
                   f->path, name, val, why);
}

/* Reads c's fields from f under prefix and runs c's check on them. keep: leave them in
 * c->values; otherwise (and on any failure) c->values is as it was. *n_params may be NULL. */
static int read_config(const NpzFile *f, const char *prefix, const CkptConfig *c, int keep,
                       int64_t *n_params) {
    int n = c->n_fields, rc = AG_OK;
    FieldValue *v = calloc((size_t)n + 1, sizeof *v);
    size_t room = 0;
    for (int i = 0; i < n; i++) room += c->fields[i].size;
    char *saved = malloc(room + 1), *at = saved;
    if (!v || !saved) rc = ag_fail(AG_ERR_NOMEM, "%s: out of memory", f->path);
    for (int i = 0; i < n && rc == AG_OK; i++) rc = read_field(f, prefix, &c->fields[i], &v[i]);
    if (rc == AG_OK) { /* the old values, then the file's in place for the check */
        for (int i = 0; i < n; i++) {
            const CkptField *fd = &c->fields[i];
            memcpy(at, (char *)c->values + fd->offset, fd->size);
            at += fd->size;
            set_field(c->values, fd, &v[i]);
        }
        int64_t count = 0;
        if (c->check && c->check(c->values, &count) != AG_OK) {
            char why[256];
            snprintf(why, sizeof why, "%s", ag_last_error()); /* ag_fail rewrites that buffer */
            rc = ag_fail(AG_ERR_FORMAT, "%s: %.*s: %s", f->path, (int)strlen(prefix) - 1, prefix,
                         why);
        } else if (c->check && (count < 0 || count > CKPT_MAX_PARAMS)) {
            rc = ag_fail(AG_ERR_FORMAT,
                         "%s: %.*s: a model of %lld parameters is over the limit of %lld "
                         "(CKPT_MAX_PARAMS)",
                         f->path, (int)strlen(prefix) - 1, prefix, (long long)count,
                         (long long)CKPT_MAX_PARAMS);
        } else if (n_params) {
            *n_params = count;
        }
        if (!keep || rc != AG_OK) {
            at = saved;
            for (int i = 0; i < n; i++) {
                const CkptField *fd = &c->fields[i];
                memcpy((char *)c->values + fd->offset, at, fd->size);
                at += fd->size;
            }
        }
    }
    free(v);
    free(saved);
    return rc;
}

/* meta.model must name cfg's model, when both have one (older files have none). */
static int check_model_kind(const NpzFile *f, const CkptConfig *cfg) {
    const NpzEntry *e = npz_find(f, "meta.model");
    if (!e) return AG_OK;
    if (e->dtype != NPZ_U8 || e->ndim != 1)
        return ag_fail(AG_ERR_FORMAT, "%s: 'meta.model' must be a 1-D '|u1' string", f->path);
    if (!cfg || !cfg->model) return AG_OK;
    if (e->count == strlen(cfg->model) && memcmp(e->data, cfg->model, e->count) == 0) return AG_OK;
    return ag_fail(AG_ERR_FORMAT, "%s: a checkpoint of a '%.*s' model, not of a '%s' model",
                   f->path, (int)(e->count < 64 ? e->count : 64), (const char *)e->data,
                   cfg->model);
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
 * by the fields and the model's check, and optim_check_config; the shapes by ckpt_load_from. */
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

/* The small entries, read first: the model kind, the configurations, the step, the RNG, the
 * data position. */
static int is_small_entry(const char *name) {
    return strncmp(name, "meta.config.", 12) == 0 || strncmp(name, "meta.optim.", 11) == 0 ||
           strncmp(name, "meta.run.", 9) == 0 || strcmp(name, "meta.model") == 0 ||
           strcmp(name, "train.step") == 0 || strcmp(name, "rng.state") == 0 ||
           strcmp(name, "data.position") == 0;
}

/* The optimizer's configuration, when the file has one, checked; o may be NULL. */
static int optim_config_of(const NpzFile *f, OptimConfig *o, int *has) {
    *has = npz_find(f, "meta.optim.kind") != NULL;
    if (!*has) return AG_OK;
    OptimConfig tmp;
    memset(&tmp, 0, sizeof tmp);
    CkptConfig oc = {NULL, optim_fields, N_OPTIM, o ? o : &tmp, check_optim};
    return read_config(f, "meta.optim.", &oc, o != NULL, NULL);
}

/* What the small entries say: the model kind, its configuration (the parameter count), the
 * optimizer's. Nothing is kept. */
static int small_entries_of(const NpzFile *f, const CkptConfig *cfg, int64_t *n_params,
                            int *has_optim) {
    int rc = check_model_kind(f, cfg);
    *n_params = -1; /* unknown: no configuration check */
    if (rc == AG_OK && cfg && cfg->n_fields)
        rc = read_config(f, "meta.config.", cfg, 0, cfg->check ? n_params : NULL);
    if (rc == AG_OK) rc = optim_config_of(f, NULL, has_optim);
    return rc;
}

typedef struct {
    const char *path;
    const CkptConfig *cfg;
    int64_t n_params; /* what the small entries say, for ckpt_read: -1 when unknown */
    int has_optim;
} AdmitCtx;

/* npz_read_admitted's callback: the small entries first, each at most CKPT_MAX_SMALL bytes,
 * and meta.extra at most CKPT_MAX_EXTRA; then, once the configuration is read, the other
 * entries together at most what the model it describes holds (checkpoint.h, ckpt_read). */
static int admit(void *ctx, const NpzDirectory *dir, const NpzFile *loaded) {
    AdmitCtx *a = ctx;
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
                                   a->path, CKPT_MAX_SMALL_ENTRIES);
            } else if (strcmp(name, "meta.extra") == 0) {
                cap = CKPT_MAX_EXTRA;
            }
            if (cap && dir->bytes[i] > cap)
                return ag_fail(AG_ERR_FORMAT,
                               "%s: entry '%s' declares %llu bytes; a checkpoint's '%s' holds at "
                               "most %llu",
                               a->path, name, (unsigned long long)dir->bytes[i], name,
                               (unsigned long long)cap);
        }
        return AG_OK;
    }
    int rc = small_entries_of(loaded, a->cfg, &a->n_params, &a->has_optim);
    int64_t n_params = a->n_params;
    int has_optim = a->has_optim;
    if (rc != AG_OK || n_params < 0) return rc; /* no parameter count: npz's limits only */
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
                   a->path, declared, (long long)n_params, has_optim ? " and its optimizer" : "",
                   allowed);
}

/* The types of the state entries, when present. */
static int check_state_types(const NpzFile *f) {
    const NpzEntry *e = npz_find(f, "train.step");
    if (e && (e->dtype != NPZ_I64 || e->ndim != 0))
        return ag_fail(AG_ERR_FORMAT, "%s: 'train.step' must be a 0-d '<i8'", f->path);
    e = npz_find(f, "rng.state");
    if (e && (e->dtype != NPZ_U64 || e->ndim != 1 || e->shape[0] != 4))
        return ag_fail(AG_ERR_FORMAT, "%s: 'rng.state' must be 4 '<u8' values", f->path);
    e = npz_find(f, "data.position");
    if (e &&
        (e->dtype != NPZ_I64 || e->ndim != 1 || e->shape[0] < 1 || e->shape[0] > CKPT_MAX_DATA))
        return ag_fail(AG_ERR_FORMAT, "%s: 'data.position' must be 1 to %d '<i8' values", f->path,
                       CKPT_MAX_DATA);
    return AG_OK;
}

int ckpt_read(const char *path, const CkptConfig *cfg, NpzFile **out) {
    AG_CHECK_ARG(path);
    AG_CHECK_ARG(out);
    AG_CHECK(!cfg || cfg->n_fields == 0 || (cfg->fields && cfg->values),
             "ckpt_read: '%s': %d configuration fields at NULL", path, cfg ? cfg->n_fields : 0);
    NpzFile *f = NULL;
    AdmitCtx ctx = {path, cfg, -1, 0};
    int rc = npz_read_admitted(path, &f, NULL, admit, &ctx); /* admit read the small entries */
    if (rc == AG_OK && ctx.n_params >= 0) rc = check_holds_params(f, ctx.n_params);
    if (rc == AG_OK) rc = check_state_types(f);
    if (rc == AG_OK) rc = ckpt_check_rules(f, library_rules, N_LIBRARY_RULES);
    if (rc == AG_OK && cfg && cfg->n_fields) /* the same values again: cannot fail */
        rc = read_config(f, "meta.config.", cfg, 1, NULL);
    if (rc != AG_OK) {
        npz_free(f);
        return rc;
    }
    *out = f;
    return AG_OK;
}

int ckpt_read_run(const NpzFile *f, const CkptConfig *run) {
    AG_CHECK_ARG(f);
    AG_CHECK_ARG(run);
    AG_CHECK(run->n_fields == 0 || (run->fields && run->values),
             "ckpt_read_run: '%s': %d run fields at NULL", f->path, run->n_fields);
    CkptConfig c = {NULL, run->fields, run->n_fields, run->values, NULL};
    return run->n_fields ? read_config(f, "meta.run.", &c, 1, NULL) : AG_OK;
}

int ckpt_optim_config(const NpzFile *f, OptimConfig *o, int *has) {
    AG_CHECK_ARG(f);
    AG_CHECK_ARG(o);
    AG_CHECK_ARG(has);
    return optim_config_of(f, o, has);
}

/* ---- loading ---- */

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

/* The file's configuration must be c's values (the model was built from it). */
static int check_same_config(const NpzFile *f, const CkptConfig *c) {
    char val[96];
    for (int i = 0; i < c->n_fields; i++) {
        const CkptField *fd = &c->fields[i];
        FieldValue v, m = get_field(c->values, fd);
        int rc = read_field(f, "meta.config.", fd, &v);
        if (rc != AG_OK) return rc;
        int same = fd->type == CKPT_FIELD_STRING  ? v.len == m.len && !memcmp(v.s, m.s, v.len)
                   : fd->type == CKPT_FIELD_FLOAT ? v.d == m.d
                                                  : v.i == m.i;
        if (same) continue;
        value_str(fd, &v, val, sizeof val);
        return ag_fail(AG_ERR_SHAPE,
                       "%s: the model's configuration differs: %s is %s in the file (build the "
                       "model from the configuration ckpt_read returns)",
                       f->path, fd->name, val);
    }
    return check_model_kind(f, c);
}

int ckpt_load_from(const NpzFile *f, Checkpoint *c) {
    AG_CHECK_ARG(f);
    AG_CHECK_ARG(c);
    AG_CHECK(c->n_data >= 0 && c->n_data <= CKPT_MAX_DATA,
             "ckpt_load_from: n_data %d outside [0, %d]", c->n_data, CKPT_MAX_DATA);
    const char *path = f->path;
    /* 1. the configuration must be the model's */
    int rc = c->config.n_fields ? check_same_config(f, &c->config) : AG_OK;
    /* 2. everything else that was asked for, checked but not yet copied (the values passed
     * ckpt_read's rules) */
    Optimizer *opt = c->opt;
    const NpzEntry *step = NULL, *rng = NULL, *data = NULL, *extra = NULL;
    for (int i = 0; rc == AG_OK && opt && i < optim_state_count(opt); i++) {
        const NpzEntry *e;
        const Tensor *t = optim_state_tensor(opt, i);
        rc = check_like(f, t->name, t, &e);
    }
    if (rc == AG_OK && opt) rc = check_ints(f, "train.step", NPZ_I64, -1, &step);
    if (rc == AG_OK && opt) /* ckpt_read's rules passed, unless f came from elsewhere */
        rc = ckpt_check_rules(f, library_rules, 1);
    if (rc == AG_OK && c->rng) rc = check_ints(f, "rng.state", NPZ_U64, 4, &rng);
    if (rc == AG_OK && c->n_data > 0)
        rc = check_ints(f, "data.position", NPZ_I64, c->n_data, &data);
    CkptConfig run = {NULL, c->run.fields, c->run.n_fields, c->run.values, NULL};
    if (rc == AG_OK && run.n_fields) rc = read_config(f, "meta.run.", &run, 0, NULL);
    if (rc == AG_OK) {
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
    if (rc == AG_OK && c->params) rc = npz_params_from_file(c->params, f, &info);
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
    if (rng) memcpy(c->rng->s, rng->data, sizeof c->rng->s);
    if (data) memcpy(c->data, data->data, (size_t)c->n_data * sizeof(int64_t));
    if (run.n_fields) read_config(f, "meta.run.", &run, 1, NULL); /* checked above */
    c->extra = extra_copy;
    c->extra_len = extra ? extra->nbytes : 0;
    return AG_OK;
}

int ckpt_load(const char *path, Checkpoint *c) {
    AG_CHECK_ARG(path);
    AG_CHECK_ARG(c);
    NpzFile *f;
    int rc = ckpt_read(path, NULL, &f);
    if (rc != AG_OK) return rc;
    rc = ckpt_load_from(f, c);
    npz_free(f);
    return rc;
}
