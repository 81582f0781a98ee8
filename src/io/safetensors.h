/* safetensors.h: reading and writing safetensors files, the weights format of the Hugging Face
 * hub (huggingface/safetensors): an 8-byte little-endian header length N, N bytes of JSON
 *   {"__metadata__": {"format": "pt"},
 *    "h.0.attn.c_attn.weight": {"dtype": "F32", "shape": [768, 2304], "data_offsets": [0, 7077888]},
 *    ...}
 * then the tensors' bytes, little-endian, C order; data_offsets are relative to the end of the
 * header and the tensors cover the data exactly, without gaps or overlaps. A large model is
 * split into shards listed by "model.safetensors.index.json" ({"metadata": {"total_size": ...},
 * "weight_map": {tensor name: shard file name}}).
 * Reading maps the file (mmap) and checks everything before it returns: the tensors' bytes
 * are not copied until they are converted into the caller's memory (st_to_tensor, st_to_reals),
 * so a 500 MB file costs its header's size until then. The JSON is parsed by jansson (docs/hf.md
 * says why that library). Writing converts the build's Real to F32, F64, F16 or BF16 and lays
 * the file out as the reference library does (safetensors.numpy.save_file): tensors sorted by
 * dtype, largest first, then by name; the header padded with spaces to a multiple of 8 bytes;
 * "__metadata__" first and always holding "format": "pt" (what transformers requires).
 * Not here: what the tensors mean for a model (their names and layouts: the model's loader);
 * .npz files (npz.h). Read next: safetensors_read.c (the checks in order), then
 * safetensors_write.c (the dtype table, the conversions, the writer).
 *
 * Errors. As npz.h: every function that touches a file returns AG_OK or a negative AG_ERR_*
 * code and records a message, ag_last_error(), naming the file, the tensor and the reason, e.g.
 * "model.safetensors: tensor 'wte.weight': shape [50257,768] of F32 is 154389504 bytes, its
 * data_offsets [0,154389500] hold 154389500". A damaged or hostile file never crashes the
 * reader, and the reader allocates at most a few times the header's size. Misuse of the writer
 * (a NULL, empty or duplicate name, a negative dimension) aborts like any misuse in attograd.
 * A mapped file changed by another program while it is read is outside what is checked (the
 * system may then stop the process with SIGBUS, as it would the reference library). */
#ifndef ATTOGRAD_SAFETENSORS_H
#define ATTOGRAD_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "../autograd/autograd.h"
#include "../tensor/tensor.h"

#define ST_MAX_DIMS 8
/* The reference library's limit on the header (MAX_HEADER_SIZE in its tensor.rs). */
#define ST_MAX_HEADER 100000000u
/* The names of a folder's files (transformers' SAFE_WEIGHTS_NAME and SAFE_WEIGHTS_INDEX_NAME). */
#define ST_WEIGHTS_NAME "model.safetensors"
#define ST_INDEX_NAME "model.safetensors.index.json"

/* The element types, in the order of the reference library's Dtype (its writer sorts by it,
 * largest first). Each has its header name ("F32") and size. Only the four float types convert
 * to Real; the others are read and checked (a model file may hold integer buffers) but
 * st_to_tensor refuses them. Types the reference added later (F4, F6_*, F8_E8M0, C64) are
 * refused when a file is read, naming the type. */
typedef enum {
    ST_BOOL = 0,
    ST_U8,
    ST_I8,
    ST_F8_E5M2,
    ST_F8_E4M3,
    ST_I16,
    ST_U16,
    ST_F16,  /* IEEE 754 half: 1 sign, 5 exponent, 10 fraction bits */
    ST_BF16, /* bfloat16: the upper half of a float32 */
    ST_I32,
    ST_U32,
    ST_F32,
    ST_F64,
    ST_I64,
    ST_U64,
    ST_N_DTYPES
} StDtype;
/* The build's Real as an StDtype: ST_F32 (float build) or ST_F64 (double build). */
#define ST_REAL ((StDtype)(sizeof(Real) == sizeof(double) ? ST_F64 : ST_F32))
const char *st_dtype_name(StDtype d); /* "F32", ...; "?" outside the enum */
size_t st_dtype_size(StDtype d);      /* bytes per element; 0 outside the enum */
int st_dtype_is_float(StDtype d);     /* 1 for F16, BF16, F32 and F64 (what converts to Real) */
/* Writes a shape as the header does, "[2,3]" (a scalar: "[]"), into buf (cap bytes); returns buf. */
const char *st_shape_str(char *buf, size_t cap, int ndim, const int64_t *shape);

/* ---- reading ---- */

/* Bounds for what a file may make the reader hold. Defaults (st_default_limits): max_header
 * ST_MAX_HEADER bytes (of the header, and of an index file), max_tensors 1000000 (per file),
 * max_files 10000 (shards of an index). Over a limit: AG_ERR_NOMEM before the JSON is parsed
 * (the header's size) or before the tensors are recorded (their count). */
typedef struct StLimits {
    uint64_t max_header;
    size_t max_tensors;
    size_t max_files;
} StLimits;
StLimits st_default_limits(void);

typedef struct StTensor {
    const char *name;
    const char *path; /* the file that holds it (a shard's path for a sharded model) */
    StDtype dtype;
    int ndim; /* 0 (a scalar: shape []) .. ST_MAX_DIMS */
    int64_t shape[ST_MAX_DIMS];
    size_t count;    /* elements: the product of shape (1 for a scalar) */
    size_t nbytes;   /* count * st_dtype_size(dtype) = data_offsets[1] - data_offsets[0] */
    uint64_t offset; /* data_offsets[0]: where its bytes start after the header */
    /* its nbytes in the mapped file: little-endian, and aligned for the dtype only when the
     * writer aligned them (the reference does; other writers may not): read with memcpy or
     * the st_to_* functions */
    const unsigned char *data;
} StTensor;

typedef struct StFile {
    char *path;
    int n; /* tensors, in the order of their bytes in the file */
    StTensor *tensors;
    int n_meta; /* "__metadata__" entries (string to string), in the header's order */
    char **meta_keys;
    char **meta_values;
    size_t file_bytes;   /* the file's size */
    size_t header_bytes; /* N: the JSON header with its padding */
    size_t data_bytes;   /* the tensors' bytes: file_bytes - 8 - header_bytes */
    /* private: the mapping and the tensors sorted by name for st_find */
    void *map_;
    size_t map_len_;
    const StTensor **by_name_;
} StFile;

/* Maps and checks the file at path. In order: a regular file of at least 8 bytes; the header
 * length N inside the file and within lim->max_header; the header, UTF-8 JSON starting with
 * '{' (jansson: no duplicate key, no NUL, whitespace only after the object); at its top an
 * object whose "__metadata__" (optional) maps strings to strings and whose other members are
 * tensors, each an object with exactly "dtype" (a known type's name), "shape" (at most
 * ST_MAX_DIMS integers >= 0) and "data_offsets" (two integers, begin <= end), with a non-empty
 * name; shape x dtype size computed without overflow and equal to end - begin; sorted by their
 * offsets, the tensors start at 0, each starts where the one before ends (no gap, no overlap)
 * and the last ends at the end of the file. Nothing is returned unless everything passed.
 * lim may be NULL (the defaults). On success *out owns the mapping (st_free); on failure *out
 * is NULL and the code is AG_ERR_IO (open, stat, mmap), AG_ERR_FORMAT (anything malformed) or
 * AG_ERR_NOMEM (over the limits, or malloc failed). */
int st_read(const char *path, StFile **out, const StLimits *lim);
/* The tensor named name, or NULL (a binary search). */
const StTensor *st_find(const StFile *f, const char *name);
/* The "__metadata__" value of key, or NULL. */
const char *st_meta(const StFile *f, const char *key);
void st_free(StFile *f);

/* The weights of a model: one file, or the shards an index lists. */
typedef struct StSet {
    char *path;  /* what was opened */
    int n_files; /* 1 for a single file */
    StFile **files;
    int n; /* tensors of all the files, sorted by name */
    const StTensor **tensors;
} StSet;

/* Opens path: a folder holding ST_WEIGHTS_NAME (preferred, as transformers does) or
 * ST_INDEX_NAME; a file whose name ends in ".json" (an index); any other file (one
 * safetensors file, st_read). An index is checked before any shard is opened: a JSON object
 * with "weight_map" (an object of tensor name -> shard file name) and optionally "metadata"
 * (an object; its "total_size", when present, an integer >= 0, not otherwise used) and nothing
 * else; every shard name a plain file name in the index's folder (no '/', not "." or "..",
 * at most 255 bytes), at most lim->max_files of them. Then each shard is read (st_read) and
 * the index and the shards must agree: every tensor the index names is in the shard it names,
 * and every tensor of every shard is named by the index for that shard (so no name is in two
 * shards). Errors as st_read's, naming the index or the shard. */
int st_open(const char *path, StSet **out, const StLimits *lim);
const StTensor *st_set_find(const StSet *s, const char *name);
void st_set_free(StSet *s);
/* Gives back the memory that t's bytes (a tensor of s) hold in this process once the caller has
 * converted them (the mapped file's pages, madvise MADV_DONTNEED: read again, they come back from
 * the file with the same bytes), so that loading a model holds one copy of each weight at a
 * time, not the whole file as well. Nothing for a tensor that is not in s's files. */
void st_set_done_with(const StSet *s, const StTensor *t);
/* The whole of a small file (an index, a config.json) at path, at most max bytes: *text is
 * malloc'd (free it) with a NUL after its *len bytes. AG_ERR_IO (open, read, not a regular
 * file) or AG_ERR_NOMEM ("path: N bytes, over the limit of max bytes"), *text then NULL. */
int st_read_small(const char *path, uint64_t max, char **text, size_t *len);

/* Element i of t as a double (exact for every float type; an integer type's value, rounded
 * for 64-bit integers past 2^53; an F8 or BOOL's raw byte). Misuse (i out of range) aborts. */
double st_value(const StTensor *t, size_t i);
/* t's count values converted to Real into out: exact from F16, BF16 and the build's own type;
 * rounded to nearest from F64 in the float build. AG_ERR_FORMAT (naming the file and tensor)
 * if the dtype is not a float type. NaN and infinities are carried over as they are (as
 * npz_read does): st_check_finite refuses them where a caller needs finite values. */
int st_to_reals(const StTensor *t, Real *out);
/* st_to_reals into tensor dst after checking that the shapes are equal: AG_ERR_SHAPE naming
 * the file, the tensor, both shapes and dst->name, dst then unchanged. *converted (if not NULL)
 * is set to 1 when the file's dtype is not the build's Real. dst (any shape) */
int st_to_tensor(const StTensor *t, Tensor *dst, int *converted);
/* AG_OK if every value of t is finite as the build's Real (an F64 past FLT_MAX is not, in the
 * float build); else AG_ERR_RANGE naming the file, the tensor, the first index and its value:
 * "m.safetensors: tensor 'ln_f.weight'[3] = nan: must be finite". A float type only. */
int st_check_finite(const StTensor *t);

/* ---- writing ---- */

/* The writer collects tensors, then st_write streams them to a file. Like NpzWriter it does
 * NOT copy data: the pointers given to st_add* must stay valid and unchanged until st_write
 * returns (names and shapes are copied). */
typedef struct StWriter StWriter;

typedef struct StStats {
    int n_tensors;
    size_t header_bytes; /* N, padded */
    size_t data_bytes;
    size_t file_bytes;
} StStats;

StWriter *st_writer_new(void);
void st_writer_free(StWriter *w);
/* A tensor of dtype with shape (ndim values, NULL for a scalar), its bytes at data as the file
 * stores them (little-endian; NULL allowed only when the element count is 0). Misuse aborts:
 * a NULL or empty name, a name that is not UTF-8, "__metadata__", a name added twice, ndim
 * outside 0..ST_MAX_DIMS, a negative dimension, a dtype outside the enum. */
void st_add(StWriter *w, const char *name, StDtype dtype, int ndim, const int64_t *shape,
            const void *data);
/* t (any shape) stored as as: ST_F32, ST_F64, ST_F16 or ST_BF16, converted from Real while
 * writing (rounded to nearest even; past a type's range: an infinity, as numpy and torch do). */
void st_add_real(StWriter *w, const char *name, const Tensor *t, StDtype as);
/* Every parameter of pl under its own name, stored as as. */
void st_add_params(StWriter *w, const ParamList *pl, StDtype as);
/* A "__metadata__" entry besides "format": "pt" (which st_write always writes first). Misuse
 * aborts: NULL, a key or value that is not UTF-8, the key "format", a key given twice. */
void st_add_meta(StWriter *w, const char *key, const char *value);

/* Writes the file at path atomically: into "<path>.tmp.<pid>" in the same folder, then fsync,
 * rename over path, fsync of the folder. On failure: AG_ERR_IO with the path and strerror, the
 * temporary file removed, a file at path left as it was. stats may be NULL. The bytes depend
 * only on the tensors and metadata added (not on the order they were added in). */
int st_write(StWriter *w, const char *path, StStats *stats);
/* Every parameter of pl stored as as, with st_write's atomicity and errors. */
int st_save_params(const ParamList *pl, const char *path, StDtype as, StStats *stats);

#endif
