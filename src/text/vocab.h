/* vocab.h: the vocabulary of one side of a word-level (or tokenized) sequence model: ids in
 * order of first appearance after four specials <pad> <bos> <eos> <unk>, words found through a
 * hash table; tokenizing on blanks with a hint for each unknown word (another case, punctuation
 * split off), detokenizing; or, instead of words, a txt_ tokenizer's tokens (characters or
 * byte-level BPE, text.h) after the same four specials. The checks of input text (a UTF-8
 * byte-order mark, valid UTF-8, several sentences on a line), lines read with a bound (an
 * endless line costs no more than the bound), and the text form in which a
 * pair of vocabularies (source and target) is saved, the one attograd-translate keeps in its
 * checkpoints' meta.extra bytes.
 * Not here: the tokenizers themselves (text.h), reading TSV files of sentence pairs
 * (pairs.h: txt_pairs_read), the scores of a translation (score.h).
 * Read next: vocab.c; docs/text.md, "Word vocabularies".
 *
 * Errors: text from the environment (saved bytes) returns AG_OK or an AG_ERR_* code with
 * ag_last_error() naming the label given and the reason; API misuse (a NULL pointer) aborts
 * naming the function. Note txt_vocab_size() is a tokenizer's size (text.h); a TxtVocab's is
 * its field n. */
#ifndef ATTOGRAD_TEXT_VOCAB_H
#define ATTOGRAD_TEXT_VOCAB_H

#include <stddef.h>
#include <stdio.h>

#include "text.h"

/* The four specials, the first ids of every TxtVocab: PAD is 0 (a model's pad_id). A source
 * row is its tokens then EOS; a decoder reads BOS then the target tokens. */
enum { TXT_PAD = 0, TXT_BOS = 1, TXT_EOS = 2, TXT_UNK = 3, TXT_N_SPECIAL = 4 };

/* Limits: a saved vocabulary or a word over them is refused (AG_ERR_FORMAT naming it). */
#define TXT_VOCAB_MAX_WORDS 500000 /* words in one vocabulary, the 4 specials included */
#define TXT_VOCAB_MAX_WORD_LEN 512 /* bytes in one word (a token) */

/* What a vocabulary holds: whitespace words, or a txt_ tokenizer's tokens (characters, or
 * byte-level BPE) */
typedef enum { TXT_VOCAB_WORD = 0, TXT_VOCAB_CHAR = 1, TXT_VOCAB_BPE = 2 } TxtVocabKind;
extern const char *const txt_vocab_kind_names[]; /* "word", "char", "bpe", NULL */
#define TXT_VOCAB_BPE_MIN 256                    /* a BPE's size: the 256 bytes, then merges */
#define TXT_VOCAB_BPE_MAX 65536

typedef struct TxtVocab {
    int n, cap_words; /* ids 0..n-1; ids below TXT_N_SPECIAL are <pad> <bos> <eos> <unk> */
    char **words;     /* id -> word (each malloc'd); with a tokenizer, each token's bytes */
    int *slots;       /* open addressing: id or -1; size n_slots, a power of two */
    int n_slots;
    /* char or bpe: id TXT_N_SPECIAL + k is the tokenizer's id k (NULL: words). kind says
     * which; a program may set kind before it has trained the tokenizer (tok still NULL).
     * bpe_vocab: the size the BPE was trained to (saved with the pair). */
    TxtVocabKind kind;
    int bpe_vocab;
    TxtTokenizer *tok;
    int byte_id[256]; /* char: the vocabulary id of each byte, TXT_UNK if unknown */
} TxtVocab;

/* A vocabulary holding only the four specials. */
void txt_vocab_init(TxtVocab *v);
void txt_vocab_free(TxtVocab *v);
/* The id of word w[0..len) (added if new). Specials are never found by spelling: a word
 * written "<unk>" in the data is an ordinary word. */
int txt_vocab_add(TxtVocab *v, const char *w, size_t len);
/* The id of w[0..len), or -1. */
int txt_vocab_find(const TxtVocab *v, const char *w, size_t len);
const char *txt_vocab_word(const TxtVocab *v, int id); /* "<?>" outside [0, n) */
/* Gives v (fresh from txt_vocab_init) the tokenizer t (v owns it then): its words become t's
 * tokens. AG_ERR_FORMAT (naming what) when the vocabulary would exceed TXT_VOCAB_MAX_WORDS. */
int txt_vocab_set_tokenizer(TxtVocab *v, TxtTokenizer *t, const char *what);

/* Splits text on runs of blanks (space, tab, CR, LF) and writes the ids of the first cap words
 * into ids (may be NULL when cap is 0); returns the number of words (which may exceed cap).
 * Unknown words become TXT_UNK, are counted in *n_unk (may be NULL) and, when warn is not
 * NULL, named there one per line after the prefix where (may be NULL), with what the
 * vocabulary holds instead when another case (ASCII lower case) or punctuation split off
 * (each mark a token) finds it:
 *   'The' is not in the vocabulary; 'the' is (read as <unk>)
 *   'dog.' is not in the vocabulary; 'dog' '.' are: separate punctuation with spaces (read as
 *   <unk>)
 *   'zzz' is not in the vocabulary (read as <unk>)
 * The text itself is never changed: the tokens are the blank-separated words. With a
 * tokenizer (v->tok), the text without its leading and trailing blanks is encoded whole
 * (txt_vocab_encode). */
int txt_vocab_tokenize(const TxtVocab *v, const char *text, int *ids, int cap, int *n_unk,
                       FILE *warn, const char *where);
/* Encodes s[0..len) with v's tokenizer (v->tok not NULL) into the first cap ids of ids (may be
 * NULL when cap is 0); returns the number of tokens (which may exceed cap). char: a byte the
 * tokenizer does not know becomes TXT_UNK, counted in *n_unk (may be NULL) and named on warn
 * (may be NULL) after where. */
int txt_vocab_encode(const TxtVocab *v, const char *s, size_t len, int *ids, int cap, int *n_unk,
                     FILE *warn, const char *where);
/* The words of ids[0..n) joined by single spaces, stopping at EOS or PAD (BOS is skipped), into
 * out (may be NULL when cap is 0; always NUL-terminated when cap > 0). Returns the length the
 * full text needs. With a tokenizer, the tokens' bytes one after the other (TXT_UNK as
 * "<unk>"). */
size_t txt_vocab_detokenize(const TxtVocab *v, const int *ids, int n, char *out, size_t cap);

/* Both vocabularies of a pair (source and target) as bytes. Words:
 *   attograd-translate vocab 1\nsrc <n>\n<word>\n...tgt <n>\n<word>\n...
 * listing the words of id TXT_N_SPECIAL and up, in id order. A tokenizer (char, bpe):
 *   attograd-translate vocab 2\ntokenizer <char|bpe> <vocab>\nsrc <n>\n<n bytes>tgt <n>\n<n bytes>
 * each side's bytes txt_to_bytes' form. Returns a malloc'd buffer, its length in *len. */
char *txt_vocab_pair_save(const TxtVocab *src, const TxtVocab *tgt, size_t *len);
/* Parses it into two fresh vocabularies (left empty on an error); what names the source in
 * messages. At most TXT_VOCAB_MAX_WORDS words a side (specials included) of at most
 * TXT_VOCAB_MAX_WORD_LEN bytes each. bytes may be NULL (then len is 0: "no vocabulary"). */
int txt_vocab_pair_load(const char *bytes, size_t len, TxtVocab *src, TxtVocab *tgt,
                        const char *what);

/* ---- input text: lines read with a bound ---- */
/* Reads one line of f into *buf (grown as needed, *cap its size; start from NULL and 0), without
 * its '\n', NUL-terminated, its length (NUL bytes included) in *len. Returns 1 for a line, 0 at
 * the end of the file, -1 when the line is longer than max bytes: then *len is max + 1 and
 * reading stops there, after max + 1 bytes of the line (an endless line, /dev/zero or a pipe
 * that never sends a newline, costs no more); *buf never grows past max + 2 bytes. A data file
 * stops at such a line (an error); interactive input skips the rest with txt_skip_line. */
int txt_read_line(FILE *f, char **buf, size_t *cap, size_t max, size_t *len);
/* Reads and drops the rest of the current line, its '\n' included, but at most max bytes:
 * 1 if the line ended (or the file), 0 if max bytes went by without its end. */
int txt_skip_line(FILE *f, size_t max);

/* ---- checks of input text (data files, the standard input, arguments) ----
 * txt_bom_len: 3 if s[0..len) starts with a UTF-8 byte-order mark (EF BB BF), else 0: the
 * caller skips it at the start of a file, of the standard input or of an argument.
 * txt_utf8_check: 1 if s[0..len) is valid UTF-8 (RFC 3629: no overlong forms, no surrogates,
 * nothing above U+10FFFF; NUL bytes are valid), else 0 with the offset of the first byte of
 * the bad sequence in *bad (Latin-1 text fails at its first accented letter).
 * txt_count_sentences: the sentences of text: runs of blank-separated words, each ended by a
 * word ending in '.', '!' or '?' (or by the end of the text); 0 for no words. */
size_t txt_bom_len(const char *s, size_t len);
int txt_utf8_check(const char *s, size_t len, size_t *bad);
int txt_count_sentences(const char *text);
/* A text given on a command line (label names it, e.g. "sentence 1" or "--target"): *out = text
 * past a byte-order mark at its start, AG_OK; or AG_ERR_FORMAT "LABEL is not valid UTF-8 (byte N
 * is 0xXX)" (N counted from 1 after the mark) with *out = NULL. */
int txt_check_arg(const char *text, const char *label, const char **out);

#endif
