/* text.h: text for language models. Tokenizers (character-level over bytes, and byte-level BPE
 * in the minbpe sense: 256 byte tokens, learned merges, special tokens), their saved form (bytes
 * a checkpoint can keep, or a standalone .npz file), token shards in llm.c's format, and a
 * loader of random seeded windows (x, y) for training, resumable to the bit.
 * Not here: models (nn/), the checkpoint container (io/checkpoint.h), any network access (real
 * text comes from scripts/shakespeare.sh at set-up time). Read next: tokenizer.c (encode and
 * decode), bpe_train.c (training), tokenizer_io.c (the saved form), shards.c (shards, loader),
 * any.c (TxtAny: attograd's tokenizer or a tokenizer.json behind one interface).
 * docs/text.md describes every format and rule.
 *
 * Errors: anything from the environment (a file, a text, a saved tokenizer) returns AG_OK or an
 * AG_ERR_* code with ag_last_error() naming the path (or the label given) and the reason. API
 * misuse (a NULL tokenizer, an id out of range given to txt_token_bytes) aborts naming the
 * function. */
#ifndef ATTOGRAD_TEXT_H
#define ATTOGRAD_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "../tensor/rng.h"

/* ---- limits (a saved tokenizer outside them is refused; training stays inside them) ---- */
#define TXT_MAX_VOCAB (1 << 20)       /* ids, all kinds together */
#define TXT_MAX_TOKEN_LEN 4096        /* bytes of one token (BPE merges never make longer) */
#define TXT_MAX_TOKEN_BYTES (1 << 26) /* bytes of all tokens together: 64 MiB */
#define TXT_MAX_SPECIAL 1024          /* special tokens */
#define TXT_MAX_SPECIAL_LEN 256       /* bytes of one special token's string */

typedef enum { TXT_CHAR = 1, TXT_BPE = 2 } TxtKind;

/* How BPE cuts a text into chunks before merging (a merge never crosses a chunk's edge):
 *   TXT_SPLIT_NONE  the whole text is one chunk (minbpe's BasicTokenizer)
 *   TXT_SPLIT_GPT2  GPT-2's pattern, written by hand over bytes (no regex): the contractions
 *                   's 't 'm 'd 're 've 'll (ASCII lowercase) alone; an optional space followed
 *                   by a run of letters (ASCII letters and every byte >= 0x80, so UTF-8 stays
 *                   whole), of digits, or of other non-space bytes; a run of whitespace, which
 *                   gives up its last byte when something else follows (a space then starts the
 *                   next chunk, another whitespace byte is a chunk alone). docs/text.md has
 *                   examples. */
typedef enum { TXT_SPLIT_NONE = 0, TXT_SPLIT_GPT2 = 1 } TxtSplit;

/* A tokenizer: ids 0..n_base-1 are single bytes (BPE: all 256, id = byte; char: the distinct
 * bytes of the training text in increasing order), then one id per merge (BPE), then the
 * special tokens in the order they were added. Opaque: use the functions below. */
typedef struct TxtTokenizer TxtTokenizer;

/* A character-level tokenizer over the bytes of text[0..n) (each distinct byte one id, in byte
 * order). A character of UTF-8 text that takes several bytes is several tokens. */
TxtTokenizer *txt_char_new(const void *text, size_t n);
/* A byte-level BPE trained on text[0..n) up to vocab_size ids (256 bytes + merges; specials
 * added later come on top). Each step merges the most frequent adjacent pair (counted over the
 * chunks of split, each chunk weighted by how often it occurs); ties go to the lowest first id,
 * then the lowest second id. Training stops early (fewer merges) when no pair occurs twice, or
 * when every pair left would make a token over TXT_MAX_TOKEN_LEN bytes or all tokens over
 * TXT_MAX_TOKEN_BYTES. AG_ERR_ARG for vocab_size outside [256, TXT_MAX_VOCAB], a bad split or
 * a text of 2 GiB or more (message starts with label); AG_ERR_NOMEM if memory runs out. *out is
 * the new tokenizer. */
int txt_bpe_train(const void *text, size_t n, int vocab_size, TxtSplit split, const char *label,
                  TxtTokenizer **out);
void txt_free(TxtTokenizer *t);

TxtKind txt_kind(const TxtTokenizer *t);
TxtSplit txt_split(const TxtTokenizer *t);
int txt_vocab_size(const TxtTokenizer *t); /* every id: bytes, merges, specials */
int txt_n_merges(const TxtTokenizer *t);
/* The merge that made id 256 + k (BPE), k in [0, txt_n_merges): its two parts. */
void txt_merge(const TxtTokenizer *t, int k, int *left, int *right);
/* The bytes of one id (a special token's string for a special id); *len its length. Aborts for
 * an id outside [0, txt_vocab_size). The pointer lives as long as t. */
const uint8_t *txt_token_bytes(const TxtTokenizer *t, int id, size_t *len);

/* ---- special tokens ---- */
/* Adds a special token (e.g. "<|endoftext|>") with the next id; returns it. AG_ERR_ARG (message
 * starts with "txt_add_special") for an empty string, one over TXT_MAX_SPECIAL_LEN bytes, a
 * duplicate, or when the vocabulary is full. */
int txt_add_special(TxtTokenizer *t, const char *s);
/* The id of special string s, or -1. */
int txt_special_id(const TxtTokenizer *t, const char *s);
int txt_n_special(const TxtTokenizer *t);

/* ---- encoding and decoding ---- */
typedef enum {
    TXT_SPECIAL_ORDINARY = 0, /* a special string in the text is encoded as ordinary bytes */
    TXT_SPECIAL_ALLOW = 1     /* each occurrence becomes its one id (the longest one first) */
} TxtSpecialMode;

/* Encodes text[0..n) into ids[0..*n_ids); ids has room for cap ids (n is always enough: every
 * id stands for one byte or more). BPE applies the merges
 * in the order they were learned (minbpe's encode: the lowest-ranked pair first, left to right)
 * within each chunk of the tokenizer's split. Errors (message starts with label):
 * AG_ERR_RANGE for a byte a character tokenizer does not know ("byte 0x7e ('~') at offset 12 is
 * not in the vocabulary"), AG_ERR_NOMEM when more than cap ids are needed (*n_ids then says how
 * many were written). */
int txt_encode(const TxtTokenizer *t, const void *text, size_t n, TxtSpecialMode mode, int *ids,
               size_t cap, size_t *n_ids, const char *label);
/* The same into a malloc'd array (free it). */
int txt_encode_alloc(const TxtTokenizer *t, const void *text, size_t n, TxtSpecialMode mode,
                     int **ids, size_t *n_ids, const char *label);
/* Decodes ids[0..n) into out (cap bytes); returns the bytes the text needs (as snprintf, but
 * no NUL is added), or AG_ERR_RANGE for an id outside the vocabulary (message starts with
 * label). out may be NULL when cap is 0 (to size a buffer). */
int64_t txt_decode(const TxtTokenizer *t, const int *ids, size_t n, void *out, size_t cap,
                   const char *label);
/* Decodes into a malloc'd, NUL-terminated string (free it); *len its length without the NUL. */
int txt_decode_alloc(const TxtTokenizer *t, const int *ids, size_t n, char **out, size_t *len,
                     const char *label);

/* ---- saved form ----
 * txt_to_bytes: a small little-endian format (docs/text.md: magic "ATGTOKEN", version, kind,
 * split, then the byte list or the merges, then the special strings) that a checkpoint keeps
 * in Checkpoint.extra. txt_from_bytes checks every value before it is used (the magic and
 * version, the kind and split, counts within the limits above and within what the bytes hold,
 * char bytes strictly increasing, each merge's parts below its own id, token lengths within
 * the limits, special strings non-empty, distinct and within bounds, no byte left over); on any
 * failure it returns AG_ERR_FORMAT (or AG_ERR_RANGE for a value) naming label and the reason. */
uint8_t *txt_to_bytes(const TxtTokenizer *t, size_t *len); /* malloc'd; free it */
int txt_from_bytes(const void *bytes, size_t len, const char *label, TxtTokenizer **out);
/* A standalone file: an .npz with one entry "tokenizer" ('|u1', the bytes above), written
 * atomically (npz_write); np.load shows it. Errors name the path. */
int txt_save(const TxtTokenizer *t, const char *path);
int txt_load(const char *path, TxtTokenizer **out);
/* The same file around any bytes (a saved form of another tokenizer, e.g. a tokenizer.json's
 * text): txt_save_bytes writes them as the entry "tokenizer"; txt_load_bytes reads them back
 * (malloc'd, free it), refusing a file whose entry is not 1-D '|u1' or holds over max bytes. */
int txt_save_bytes(const void *bytes, size_t len, const char *path);
int txt_load_bytes(const char *path, size_t max, uint8_t **bytes, size_t *len);

/* ---- token shards in llm.c's format ----
 * A header of 256 little-endian int32: [0] magic, [1] version, [2] token count; then the
 * tokens. llm.c's two kinds: magic 20240520 version 1 with uint16 tokens (GPT-2, vocabularies
 * up to 65536), magic 20240801 version 7 with uint32 tokens (LLaMA 3, larger vocabularies). */
#define TXT_SHARD_MAGIC_U16 20240520
#define TXT_SHARD_VERSION_U16 1
#define TXT_SHARD_MAGIC_U32 20240801
#define TXT_SHARD_VERSION_U32 7
#define TXT_SHARD_HEADER_INTS 256
#define TXT_SHARD_MAX_TOKENS ((int64_t)INT32_MAX) /* the count is an int32 */

/* Writes ids[0..n) to path atomically (a temporary file, fsync, rename). The uint16 kind when
 * vocab_size <= 65536, else uint32. AG_ERR_RANGE when an id is outside [0, vocab_size) or
 * n > TXT_SHARD_MAX_TOKENS; AG_ERR_IO naming the path and strerror. */
int txt_shard_write(const char *path, const int *ids, size_t n, int vocab_size);
/* Reads a shard into a malloc'd array (free it). Checks the magic and version pair, the count
 * (>= 0, and the file's size equals header + count * token size) and, when vocab_size > 0,
 * every token < vocab_size. Errors name the path and the reason. */
int txt_shard_read(const char *path, int vocab_size, int **ids, size_t *n);
/* A shard kept open to read parts of it (a trainer reads only the windows of its rows; memory
 * is the handle, whatever the file's size). txt_shard_open checks what txt_shard_read checks
 * before its tokens (the header, the size). txt_shard_tokens: tokens [at, at + n) (inside the
 * count: else an abort) into out, each checked against vocab_size: AG_ERR_RANGE naming the
 * path and the token's index, AG_ERR_IO for a short read (a file cut since it was opened). */
typedef struct TxtShard TxtShard;
int txt_shard_open(const char *path, int vocab_size, TxtShard **out);
size_t txt_shard_count(const TxtShard *s);
int txt_shard_tokens(TxtShard *s, size_t at, size_t n, int *out);
void txt_shard_close(TxtShard *s);
/* The windows of a batch read from s (txt_loader_starts drew their starts): row r of x and y,
 * (rows, T) each, gets tokens [starts[r], starts[r] + T) and the next T, one later (the same
 * rows txt_loader_next gives from tokens in memory), each window read once into win (T + 1
 * ints of scratch). AG_OK, or txt_shard_tokens's error (rows before it are filled). */
int txt_shard_windows(TxtShard *s, const size_t *starts, int rows, int T, int *win, int *x, int *y);

/* ---- windows for training: x = tokens[s .. s+T), y = tokens[s+1 .. s+T+1) ---- */
/* The split of n tokens: train [0, n - n_valid), valid [n - n_valid, n), where n_valid is
 * valid_frac * n rounded down (the last part, as nanoGPT's train.bin / val.bin). */
typedef struct TxtSplitRange {
    size_t train_lo, train_hi, valid_lo, valid_hi;
} TxtSplitRange;
TxtSplitRange txt_split_range(size_t n, double valid_frac);

/* A loader of random windows over tokens[lo, hi): each row's start is drawn uniformly from the
 * hi - lo - T starts with rng_below, rows in order. Its whole state is the Rng: save
 * txt_loader_state and restore it to continue to the bit. tokens are not copied. */
typedef struct TxtLoader {
    const int *tokens;
    size_t lo, hi;
    int B, T;
    Rng rng;
    int64_t batches; /* batches drawn so far */
} TxtLoader;
/* AG_ERR_ARG (message starts with label) when B or T < 1 or the range holds fewer than T + 1
 * tokens. tokens may be NULL for a loader that only draws window starts (txt_loader_starts):
 * the windows are then read from the file (txt_shard_tokens). */
int txt_loader_init(TxtLoader *L, const int *tokens, size_t lo, size_t hi, int B, int T,
                    uint64_t seed, const char *label);
/* x, y: (B, T) ids. */
void txt_loader_next(TxtLoader *L, int *x, int *y);
/* The B starts of the next batch's windows (tokens [s, s + T + 1)), the same draws as
 * txt_loader_next's; it advances the same way. */
void txt_loader_starts(TxtLoader *L, size_t *starts);
/* The position as 5 int64 (the RNG's four words, the batch count): Checkpoint.data fits it. */
#define TXT_LOADER_STATE_LEN 5
void txt_loader_state(const TxtLoader *L, int64_t state[TXT_LOADER_STATE_LEN]);
/* AG_ERR_RANGE (message starts with label) for an all-zero RNG or a negative batch count. */
int txt_loader_restore(TxtLoader *L, const int64_t state[TXT_LOADER_STATE_LEN], const char *label);

/* ---- Hugging Face tokenizers (hf_tokenizer.c, hf_encode.c, hf_write.c; docs/hf.md) ----
 * A tokenizer.json of the two BPE families published models use: byte-level BPE (GPT-2,
 * GPT-NeoX / Pythia, SmolLM: the ByteLevel pre-tokenizer with GPT-2's split, optionally after
 * Digits; an NFC normalizer on texts it cannot change) and SentencePiece-style BPE (LLaMA: U+2581
 * for spaces through the Prepend/Replace normalizer or the Metaspace pre-tokenizer, byte
 * fallback <0xXX>). Anything else is refused naming the key and value (AG_ERR_FORMAT, message
 * "PATH: "key": value: reason"). Ids are the library's: encode equals its
 * encode(text, add_special_tokens=False).ids, decode its decode(ids, skip_special_tokens=False)
 * as bytes. */
typedef struct TxtHf TxtHf;
/* path: a tokenizer.json, or a folder holding one (else vocab.json and merges.txt). Files over
 * 256 MiB are refused; every value is checked before use. */
int txt_hf_load(const char *path, TxtHf **out);
int txt_hf_from_json(const char *text, size_t len, const char *label, TxtHf **out);
/* GPT-2's pair, read as GPT2Tokenizer reads it ("<|endoftext|>" a special token) */
int txt_hf_from_vocab_merges(const char *vocab_path, const char *merges_path, TxtHf **out);
void txt_hf_free(TxtHf *t);
int txt_hf_vocab_size(const TxtHf *t);
/* The tokenizer.json text t was read from (of vocab.json + merges.txt: the whole tokenizer.json
 * made of them, which the tokenizers library loads too), len bytes, not NUL-terminated: its
 * saved form; txt_hf_from_json of it gives the same ids. Owned by t. */
const char *txt_hf_json(const TxtHf *t, size_t *len);
/* the bytes id decodes to alone (a SentencePiece piece as written, U+2581 included) */
const uint8_t *txt_hf_token_bytes(const TxtHf *t, int id, size_t *len);
int txt_hf_is_special(const TxtHf *t, int id);
/* the id of an added token's content or of a vocabulary token's bytes, or -1 */
int txt_hf_token_id(const TxtHf *t, const char *s);
/* text must be UTF-8 (else AG_ERR_FORMAT naming the offset: the library encodes only text);
 * added tokens split off first (leftmost, longest), then the pre-tokenizer and the merges. */
int txt_hf_encode_alloc(const TxtHf *t, const void *text, size_t n, int **ids, size_t *n_ids,
                        const char *label);
/* NUL-terminated, *len without it; AG_ERR_RANGE for an id outside the vocabulary */
int txt_hf_decode_alloc(const TxtHf *t, const int *ids, size_t n, char **out, size_t *len,
                        const char *label);
/* attograd's char or BPE tokenizer as a tokenizer.json the tokenizers library loads with the
 * same ids (byte-level BPE; TXT_SPLIT_GPT2 as a Split pre-tokenizer with attograd's own pattern,
 * which counts every non-ASCII character a letter). txt_to_hf_json gives the text (malloc'd,
 * free it); txt_write_hf writes it atomically. AG_ERR_ARG when two ids stand for the same bytes
 * (a tokenizer.json cannot hold that). */
int txt_to_hf_json(const TxtTokenizer *t, char **text);
int txt_write_hf(const TxtTokenizer *t, const char *path);

/* ---- either tokenizer (any.c): attograd's own or a tokenizer.json, one interface ----
 * What a GPT's checkpoint or a Hugging Face folder carries is one of the two; a TxtAny holds
 * whichever it is (exactly one of tok, hf is set; both NULL: empty, as zeroed) and encodes,
 * decodes and counts with it. txt_any_free frees it and zeroes it. */
typedef struct TxtAny {
    TxtTokenizer *tok; /* attograd's char or BPE tokenizer, or NULL */
    TxtHf *hf;         /* a tokenizer.json (or vocab.json + merges.txt), or NULL */
} TxtAny;
#define TXT_ANY_OWN_FILE "attograd-tokenizer.bin" /* attograd's tokenizer in a folder */
/* dir's tokenizer: attograd's own (TXT_ANY_OWN_FILE, txt_load) where the folder holds one, else
 * tokenizer.json, else vocab.json + merges.txt (txt_hf_load); AG_ERR_FORMAT naming dir when it
 * holds none, else the loader's error. *out is zeroed first. */
int txt_any_load_dir(const char *dir, TxtAny *out);
/* A tokenizer's saved form (txt_any_to_bytes): attograd's (txt_to_bytes, magic ATGTOKEN) or a
 * tokenizer.json's text, every value checked; errors start with label ("label: neither
 * attograd's tokenizer (ATGTOKEN) nor a tokenizer.json (...)"). *out is zeroed first. */
int txt_any_from_bytes(const void *bytes, size_t len, const char *label, TxtAny *out);
uint8_t *txt_any_to_bytes(const TxtAny *t, size_t *len); /* malloc'd (aborts out of memory) */
int txt_any_vocab_size(const TxtAny *t);
/* t fits a model of vocab_size ids: attograd's has exactly as many, a tokenizer.json at most as
 * many (a published vocabulary padded to a round size: GPT-2's 50257 of 50257, Pythia's 50277
 * of 50304); else AG_ERR_FORMAT "label: the tokenizer has V ids, the model N" */
int txt_any_fits(const TxtAny *t, int vocab_size, const char *label);
/* text[0..n) as ids (malloc'd, *len of them; specials in attograd's text encoded as ordinary
 * bytes); errors start with label */
int txt_any_encode_alloc(const TxtAny *t, const void *text, size_t n, int **ids, size_t *len,
                         const char *label);
/* the bytes id stands for alone (a SentencePiece piece as written, U+2581 included); an id of a
 * model's padding past a tokenizer.json's vocabulary: "" (len 0) */
const uint8_t *txt_any_token_bytes(const TxtAny *t, int id, size_t *len);
/* ids decoded to bytes (malloc'd, NUL-terminated; *len without it); errors start with label */
int txt_any_decode_alloc(const TxtAny *t, const int *ids, size_t n, char **out, size_t *len,
                         const char *label);
void txt_any_free(TxtAny *t);

#endif
