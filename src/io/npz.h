/* npz.h: reading and writing NumPy .npz files, the container of attograd's checkpoints.
 * An .npz is a zip archive whose entries "<name>.npy" each hold one array in NumPy's .npy
 * format (a magic string, a small Python-dict header with dtype, order and shape, then the
 * raw little-endian data). np.load opens what npz_write writes, and npz_read opens what
 * np.savez and np.savez_compressed write (stored or deflated entries, with or without ZIP64).
 * Not here: what a checkpoint holds besides parameters (optimizer state, RNG, data position:
 * composed on top of this layer from npz_add_* and npz_find). Read next: npz_write.c (the zip
 * container in order: local header, data, central directory, end record), then npz_read.c
 * (the same structures, validated), then npz_params.c (a ParamList to and from a file).
 *
 * Errors. Every function that touches a file returns AG_OK or a negative AG_ERR_* code and
 * records a message, ag_last_error(), that names the path, the entry (or tensor) and the
 * reason, e.g. "ckpt.npz: entry 'w.npy': CRC-32 is 0x1a2b3c4d, the directory says 0x...".
 * A damaged or hostile file never crashes the reader and never makes it allocate more than
 * the limit (NpzLimits). Misuse of the writer API (a NULL name, a duplicate name, a negative
 * dimension) aborts like any other misuse in attograd. */
#ifndef ATTOGRAD_NPZ_H
#define ATTOGRAD_NPZ_H

#include <stddef.h>
#include <stdint.h>

#include "../autograd/autograd.h"
#include "../tensor/tensor.h"

#define NPZ_MAX_DIMS 8

/* The element types an entry may hold, with their .npy 'descr' strings. */
typedef enum {
    NPZ_F32 = 0, /* '<f4' */
    NPZ_F64,     /* '<f8' */
    NPZ_I64,     /* '<i8' step counters, positions, config integers */
    NPZ_U64,     /* '<u8' RNG state */
    NPZ_I32,     /* '<i4' */
    NPZ_U8,      /* '|u1' raw bytes: a vocabulary, a JSON config */
    NPZ_N_DTYPES
} NpzDtype;
/* The build's Real as an NpzDtype: NPZ_F32 (float build) or NPZ_F64 (double build). */
#define NPZ_REAL ((NpzDtype)(sizeof(Real) == sizeof(double) ? NPZ_F64 : NPZ_F32))
const char *npz_dtype_descr(NpzDtype d); /* "<f4", ... */
size_t npz_dtype_size(NpzDtype d);       /* 4, 8, 8, 8, 4, 1 */
/* Writes a shape as "(2,3)" (a scalar: "()") into buf (cap bytes) and returns buf. */
const char *npz_shape_str(char *buf, size_t cap, int ndim, const int64_t *shape);

/* ---- reading ---- */

/* Bounds for what a file may make npz_read allocate. Defaults (npz_default_limits):
 * max_bytes 1 GiB (uncompressed array data plus the central directory, all entries together),
 * max_entries 65535. A file that declares more fails with AG_ERR_NOMEM before any array is
 * allocated; an entry that inflates to more than it declares fails as soon as it passes its
 * declared size. */
typedef struct NpzLimits {
    size_t max_bytes;
    size_t max_entries;
} NpzLimits;
NpzLimits npz_default_limits(void);

typedef struct NpzEntry {
    char *name; /* the zip name without ".npy", as numpy.load's keys */
    NpzDtype dtype;
    int ndim; /* 0 (a scalar) .. NPZ_MAX_DIMS */
    int64_t shape[NPZ_MAX_DIMS];
    size_t count;  /* number of elements: the product of shape (1 for a scalar) */
    size_t nbytes; /* count * npz_dtype_size(dtype) */
    void *data;    /* C order, little-endian, aligned for the dtype; owned by the NpzFile */
} NpzEntry;

typedef struct NpzFile {
    char *path;
    int n; /* entries in the order of the zip's central directory */
    NpzEntry *entries;
    size_t file_bytes; /* size of the file on disk */
    size_t data_bytes; /* sum of the entries' nbytes */
} NpzFile;

/* Reads and validates the whole file: zip structure (signatures, offsets and sizes in bounds
 * and consistent between the central directory and the local headers, entries that do not
 * overlap), every entry's CRC-32, every .npy header ('descr' among NpzDtype's, 'fortran_order'
 * False, 'shape' whose element count times the item size equals the data size). Nothing is
 * returned unless everything passed. lim may be NULL (the defaults). On success *out owns
 * everything (npz_free); on failure *out is NULL and the code is AG_ERR_IO (open, read),
 * AG_ERR_FORMAT (anything malformed) or AG_ERR_NOMEM (over the limits, or malloc failed). */
int npz_read(const char *path, NpzFile **out, const NpzLimits *lim);
/* A look at a file's directory before any array is allocated (npz_read_admitted). */
typedef struct NpzDirectory {
    int n;                    /* entries, in the directory's order */
    const char *const *names; /* their names without ".npy" */
    const uint64_t *bytes;    /* each entry's declared .npy size (header and data) */
    unsigned char *first;     /* (n) the first call sets 1 for the entries to read first */
} NpzDirectory;
/* Called twice by npz_read_admitted, once the zip structure has passed its checks: with
 * loaded NULL before any entry is read (it may mark entries in dir->first), then with loaded
 * holding the marked entries, read and checked, before any other is allocated. Each call
 * returns AG_OK, or refuses the file with an AG_ERR_* code after ag_fail. */
typedef int (*NpzAdmit)(void *ctx, const NpzDirectory *dir, const NpzFile *loaded);
/* npz_read in two stages decided by admit: what the first entries say (a configuration) can
 * bound what the others may declare, before their memory is allocated. The entries of *out
 * are the marked ones, then the others, each group in the directory's order. */
int npz_read_admitted(const char *path, NpzFile **out, const NpzLimits *lim, NpzAdmit admit,
                      void *ctx);
/* The entry named name ("w" or "w.npy"), or NULL. */
const NpzEntry *npz_find(const NpzFile *f, const char *name);
void npz_free(NpzFile *f);

/* Copies a float entry into tensor t (t->data), converting '<f4' or '<f8' to Real.
 * AG_ERR_SHAPE if the shapes differ, AG_ERR_FORMAT if the dtype is not a float; t is then
 * unchanged. *converted (if not NULL) is set to 1 when the file's dtype is not Real's (a
 * float file in a double build is exact; a double file in a float build rounds). Messages
 * name f->path, the entry and t->name. t (any shape) */
int npz_entry_to_tensor(const NpzFile *f, const NpzEntry *e, Tensor *t, int *converted);

/* ---- writing ---- */

/* The writer collects entries, then npz_write streams them to a file. It does NOT copy array
 * data: the pointers given to npz_add_* must stay valid and unchanged until npz_write returns
 * (names and shapes are copied). Entries are written in the order they were added. */
typedef struct NpzWriter NpzWriter;

typedef struct NpzStats {
    int n_entries;
    size_t raw_bytes;  /* the .npy bytes (headers and data): the size np.savez would store */
    size_t data_bytes; /* array data alone */
    size_t file_bytes; /* the written .npz */
} NpzStats;

NpzWriter *npz_writer_new(void);
void npz_writer_free(NpzWriter *w);
/* 1: every entry and the end record use ZIP64 fields even when small (as numpy's writer
 * does for local headers). 0 (default): only when a size or offset needs it (>= 4 GiB). */
void npz_writer_force_zip64(NpzWriter *w, int on);
/* 1: the float entries added from now on (until it is turned off) must be finite: npz_write
 * refuses (AG_ERR_RANGE, before any file is touched) one holding a NaN or an infinity, as stored,
 * naming the first: "PATH: not written: blocks.0.hook_z[12] = inf: must be finite". For files of
 * results (the lens's caches and tables, an exported model), where a non-finite value means a
 * model that overflowed. */
void npz_writer_finite(NpzWriter *w, int on);

/* An array of dtype with shape (ndim values, NULL for a scalar) at data (NULL allowed only when
 * an element count is 0). name: the key numpy.load shows; ".npy" is appended in the zip.
 * Misuse aborts: a NULL or empty name, a name over 4096 bytes or added twice, ndim outside
 * 0..NPZ_MAX_DIMS, a negative dimension, NULL data for a non-empty array. */
void npz_add(NpzWriter *w, const char *name, NpzDtype dtype, int ndim, const int64_t *shape,
             const void *data);
void npz_add_f32(NpzWriter *w, const char *name, int ndim, const int64_t *shape, const float *d);
void npz_add_f64(NpzWriter *w, const char *name, int ndim, const int64_t *shape, const double *d);
void npz_add_i64(NpzWriter *w, const char *name, int ndim, const int64_t *shape, const int64_t *d);
void npz_add_u64(NpzWriter *w, const char *name, int ndim, const int64_t *shape, const uint64_t *d);
void npz_add_i32(NpzWriter *w, const char *name, int ndim, const int64_t *shape, const int32_t *d);
/* a program's C ints (token ids) as '<i4', without a copy: int is 32 bits wherever attograd
 * builds (a static assertion says so otherwise) */
void npz_add_int(NpzWriter *w, const char *name, int ndim, const int64_t *shape, const int *d);
/* n bytes as a 1-D '|u1' array (text: a vocabulary, a JSON config) */
void npz_add_bytes(NpzWriter *w, const char *name, const void *bytes, size_t n);
/* t (any shape) in the build's Real */
void npz_add_real(NpzWriter *w, const char *name, const Tensor *t);
/* t (any shape) stored as as = NPZ_F32 or NPZ_F64, converted while writing (a double build
 * may save float32 files half the size; a float build's float64 files are exact). */
void npz_add_real_as(NpzWriter *w, const char *name, const Tensor *t, NpzDtype as);
/* Every parameter of pl under its own name (e.g. "encoder.layers.0.self_attn.in_proj_weight"),
 * stored as as (NPZ_REAL for the build's type). */
void npz_add_params(NpzWriter *w, const ParamList *pl, NpzDtype as);

/* Writes the archive to path atomically: into "<path>.tmp.<pid>" in the same folder, then
 * fsync, rename over path, fsync of the folder. level: 0 stores the entries, 1..9 deflates
 * them with zlib at that level (6 is zlib's default). On any failure (open, write, a full
 * disk, fsync, close, rename) it returns AG_ERR_IO with the path and strerror, removes the
 * temporary file and leaves an existing file at path as it was. The temporary file is created
 * new and never through a symbolic link, and path must be a regular file or a missing name
 * (io_temp_create, io_replace in file.h: a device, FIFO, folder or link there is refused). One exception: if only the
 * final fsync of the folder fails, the new file is already in place (the message says so).
 * A level outside 0..9 is AG_ERR_ARG. stats may be NULL. The file's bytes depend only on the
 * entries and the level (the zip's timestamps are fixed at 1980-01-01 00:00). */
int npz_write(NpzWriter *w, const char *path, int level, NpzStats *stats);

/* ---- parameters of a model ---- */

/* Writes every parameter of pl, in the build's Real, with npz_write's atomicity and errors. */
int npz_save_params(const ParamList *pl, const char *path, int level, NpzStats *stats);

typedef struct NpzLoadInfo {
    int n_loaded;    /* parameters copied */
    int n_converted; /* of them, stored as another float type than Real (converted) */
    int n_skipped;   /* arrays under a reserved prefix (NPZ_RESERVED_PREFIXES), ignored */
} NpzLoadInfo;

/* Names that are not parameters and that npz_load_params skips: what a checkpoint stores
 * beside the model. A parameter name never starts with one of them. */
#define NPZ_RESERVED_PREFIXES                                                                      \
    { "optim.", "train.", "rng.", "data.", "meta." }

/* Loads every parameter of pl from the file at path (limits: the defaults). Before changing
 * anything it checks that every parameter is present with its shape and a float dtype, and that
 * every array in the file is either a parameter or under a reserved prefix (an unknown array
 * means a model of another configuration). Errors: AG_ERR_SHAPE for a missing tensor, a shape
 * that differs or an unknown array, AG_ERR_FORMAT for a non-float dtype, and npz_read's codes;
 * the message names the file, the tensor and the reason. On any error no parameter has
 * changed. info may be NULL. */
int npz_load_params(ParamList *pl, const char *path, NpzLoadInfo *info);
/* The same from a file already read (a checkpoint that also holds optimizer state). */
int npz_params_from_file(ParamList *pl, const NpzFile *f, NpzLoadInfo *info);

#endif
