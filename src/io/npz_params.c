/* npz_params.c: tensors and a model's parameters to and from .npz files. Saving adds every
 * parameter under its dotted name; loading checks everything first (presence, shape, dtype,
 * no unknown arrays) and only then copies, so a failed load leaves the model as it was.
 * Not here: the zip and .npy formats (npz_write.c, npz_read.c). */
#include <stdio.h>
#include <string.h>

#include "npz_internal.h"

/* t (any shape) */
int npz_entry_to_tensor(const NpzFile *f, const NpzEntry *e, Tensor *t, int *converted) {
    AG_CHECK_ARG(f);
    AG_CHECK_ARG(e);
    AG_CHECK_ARG(t);
    char fs[NPZ_MAX_DIMS * 24];
    int same = e->ndim == t->ndim;
    for (int i = 0; same && i < e->ndim; i++) same = e->shape[i] == t->shape[i];
    if (!same)
        return ag_fail(AG_ERR_SHAPE, "%s: tensor '%s': shape %s in the file, %s in the model",
                       f->path, t->name, npz_shape_str(fs, sizeof fs, e->ndim, e->shape),
                       tensor_shape_str(t));
    if (e->dtype != NPZ_F32 && e->dtype != NPZ_F64)
        return ag_fail(AG_ERR_FORMAT,
                       "%s: tensor '%s': stored as '%s', not as a float type "
                       "('<f4' or '<f8')",
                       f->path, t->name, npz_dtype_descr(e->dtype));
    if (e->dtype == NPZ_F32)
        tensor_copy_from_floats(t, e->data);
    else
        tensor_copy_from_doubles(t, e->data);
    if (converted) *converted = e->dtype != NPZ_REAL;
    return AG_OK;
}

int npz_save_params(const ParamList *pl, const char *path, int level, NpzStats *stats) {
    AG_CHECK_ARG(pl);
    AG_CHECK_ARG(path);
    NpzWriter *w = npz_writer_new();
    npz_add_params(w, pl, NPZ_REAL);
    int rc = npz_write(w, path, level, stats);
    npz_writer_free(w);
    return rc;
}

static int reserved(const char *name) {
    static const char *const prefixes[] = NPZ_RESERVED_PREFIXES;
    for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++)
        if (strncmp(name, prefixes[i], strlen(prefixes[i])) == 0) return 1;
    return 0;
}

int npz_params_from_file(ParamList *pl, const NpzFile *f, NpzLoadInfo *info) {
    AG_CHECK_ARG(pl);
    AG_CHECK_ARG(f);
    if (info) memset(info, 0, sizeof *info);
    char fs[NPZ_MAX_DIMS * 24];
    /* 1. every parameter is there, with its shape and a float dtype */
    for (int i = 0; i < pl->n; i++) {
        const Tensor *t = pl->items[i];
        const NpzEntry *e = npz_find(f, t->name);
        if (!e)
            return ag_fail(AG_ERR_SHAPE, "%s: tensor '%s' %s is missing from the file", f->path,
                           t->name, tensor_shape_str(t));
        int same = e->ndim == t->ndim;
        for (int k = 0; same && k < e->ndim; k++) same = e->shape[k] == t->shape[k];
        if (!same)
            return ag_fail(AG_ERR_SHAPE,
                           "%s: tensor '%s': shape %s in the file, %s in the "
                           "model",
                           f->path, t->name, npz_shape_str(fs, sizeof fs, e->ndim, e->shape),
                           tensor_shape_str(t));
        if (e->dtype != NPZ_F32 && e->dtype != NPZ_F64)
            return ag_fail(AG_ERR_FORMAT,
                           "%s: tensor '%s': stored as '%s', not as a float "
                           "type ('<f4' or '<f8')",
                           f->path, t->name, npz_dtype_descr(e->dtype));
    }
    /* 2. every array of the file is a parameter or lies under a reserved prefix */
    int skipped = 0;
    for (int i = 0; i < f->n; i++) {
        if (reserved(f->entries[i].name))
            skipped++;
        else if (!ag_params_find(pl, f->entries[i].name))
            return ag_fail(AG_ERR_SHAPE,
                           "%s: array '%s' is not a parameter of this model (a "
                           "model of another configuration?)",
                           f->path, f->entries[i].name);
    }
    /* 3. only now change the model */
    int converted = 0;
    for (int i = 0; i < pl->n; i++) {
        int c = 0;
        int rc = npz_entry_to_tensor(f, npz_find(f, pl->items[i]->name), pl->items[i], &c);
        AG_CHECK(rc == AG_OK, "npz_params_from_file: '%s' failed after its checks passed",
                 pl->items[i]->name);
        converted += c;
    }
    if (info) {
        info->n_loaded = pl->n;
        info->n_converted = converted;
        info->n_skipped = skipped;
    }
    return AG_OK;
}

int npz_load_params(ParamList *pl, const char *path, NpzLoadInfo *info) {
    AG_CHECK_ARG(pl);
    AG_CHECK_ARG(path);
    if (info) memset(info, 0, sizeof *info);
    NpzFile *f = NULL;
    int rc = npz_read(path, &f, NULL);
    if (rc == AG_OK) rc = npz_params_from_file(pl, f, info);
    npz_free(f);
    return rc;
}
