/* view.c: the JSON writer of view.h (escaping, numbers, base64, quantized attention) and the
 * page writer. Not here: the page itself (page.html, embedded as page.c). Read next: page.html. */
#include "view.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "../io/file.h"
#include "../io/npz.h"
#include "../lens/detect.h"

void view_buf_free(ViewBuf *b) {
    if (!b) return;
    free(b->p);
    memset(b, 0, sizeof *b);
}

static void put(ViewBuf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        AG_CHECK(p, "view: out of memory for %zu bytes of JSON", cap);
        b->p = p, b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

void view_raw(ViewBuf *b, const char *text) {
    AG_CHECK_ARG(b);
    AG_CHECK_ARG(text);
    put(b, text, strlen(text));
}

/* the length of the valid UTF-8 sequence at s[0..n) (1..4), or 0 when it is not one (overlong
 * forms, surrogates and code points above U+10FFFF are not) */
static int utf8_len(const uint8_t *s, size_t n, uint32_t *cp) {
    uint8_t c = s[0];
    int len = c < 0x80             ? 1
              : (c & 0xE0) == 0xC0 ? 2
              : (c & 0xF0) == 0xE0 ? 3
              : (c & 0xF8) == 0xF0 ? 4
                                   : 0;
    if (len == 0 || (size_t)len > n) return 0;
    uint32_t v = len == 1 ? c : len == 2 ? c & 0x1F : len == 3 ? c & 0x0F : c & 0x07;
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        v = v << 6 | (s[i] & 0x3F);
    }
    static const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < least[len] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
    *cp = v;
    return len;
}

void view_str(ViewBuf *b, const void *bytes, size_t n) {
    AG_CHECK_ARG(b);
    AG_CHECK_ARG(bytes);
    const uint8_t *s = bytes;
    char e[16];
    put(b, "\"", 1);
    for (size_t i = 0; i < n;) {
        uint32_t cp = 0;
        int len = utf8_len(s + i, n - i, &cp);
        if (len == 0) { /* not UTF-8: the byte shown as the text \xNN */
            snprintf(e, sizeof e, "\\\\x%02X", s[i]);
            put(b, e, strlen(e));
            i++;
            continue;
        }
        if (cp == '"' || cp == '\\') {
            e[0] = '\\', e[1] = (char)cp;
            put(b, e, 2);
        } else if (cp < 0x20 || cp == '<' || cp == '>' || cp == '&' || cp == 0x7F || cp == 0x2028 ||
                   cp == 0x2029) {
            snprintf(e, sizeof e, "\\u%04X", (unsigned)cp);
            put(b, e, 6);
        } else {
            put(b, (const char *)s + i, (size_t)len);
        }
        i += (size_t)len;
    }
    put(b, "\"", 1);
}

void view_key(ViewBuf *b, const char *key) {
    AG_CHECK_ARG(b);
    AG_CHECK_ARG(key);
    view_str(b, key, strlen(key));
    put(b, ":", 1);
}

void view_field_str(ViewBuf *b, const char *key, const char *s) {
    AG_CHECK_ARG(b);
    AG_CHECK_ARG(key);
    AG_CHECK_ARG(s);
    view_key(b, key);
    view_str(b, s, strlen(s));
}

void view_num(ViewBuf *b, double v) {
    AG_CHECK_ARG(b);
    char t[32];
    if (!isfinite(v)) {
        put(b, "null", 4);
        return;
    }
    snprintf(t, sizeof t, "%.7g", v);
    put(b, t, strlen(t));
}

void view_int(ViewBuf *b, long long v) {
    AG_CHECK_ARG(b);
    char t[32];
    snprintf(t, sizeof t, "%lld", v);
    put(b, t, strlen(t));
}

void view_base64(ViewBuf *b, const uint8_t *s, size_t n) {
    AG_CHECK_ARG(b);
    AG_CHECK_ARG(s);
    static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char q[4];
    put(b, "\"", 1);
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16 | (i + 1 < n ? (uint32_t)s[i + 1] << 8 : 0) |
                     (i + 2 < n ? s[i + 2] : 0);
        q[0] = A[v >> 18 & 63], q[1] = A[v >> 12 & 63];
        q[2] = i + 1 < n ? A[v >> 6 & 63] : '=';
        q[3] = i + 2 < n ? A[v & 63] : '=';
        put(b, q, 4);
    }
    put(b, "\"", 1);
}

uint8_t view_quantize(double p) {
    if (!(p > 0)) return 0; /* NaN too */
    if (p >= 1) return 255;
    return (uint8_t)lround(p * 255);
}

void view_attention(ViewBuf *out, const Tensor *probs, int b, int causal) {
    AG_CHECK_ARG(out);
    AG_CHECK_ARG(probs);
    AG_CHECK(probs->ndim == 4 && b >= 0 && b < probs->shape[0] &&
                 (!causal || probs->shape[2] == probs->shape[3]),
             "view_attention: probs %s must be (B, NH, Tq, Tk)%s with row %d < B",
             tensor_shape_str(probs), causal ? " with Tq == Tk (causal)" : "", b);
    int NH = probs->shape[1], Tq = probs->shape[2], Tk = probs->shape[3];
    size_t n = 0, cap = (size_t)NH * Tq * Tk;
    uint8_t *q = malloc(cap ? cap : 1);
    AG_CHECK(q, "view_attention: out of memory for %zu bytes", cap);
    for (int h = 0; h < NH; h++)
        for (int i = 0; i < Tq; i++) {
            const Real *row = probs->data + (((size_t)b * NH + h) * Tq + i) * Tk;
            for (int j = 0; j < (causal ? i + 1 : Tk); j++) q[n++] = view_quantize(row[j]);
        }
    view_base64(out, q, n);
    free(q);
}

void view_softmax(const Real *z, int V, double *p) {
    AG_CHECK_ARG(z);
    AG_CHECK_ARG(p);
    double mx = -INFINITY, s = 0;
    for (int v = 0; v < V; v++) mx = fmax(mx, z[v]);
    for (int v = 0; v < V; v++) s += p[v] = exp(z[v] - mx);
    for (int v = 0; v < V; v++) p[v] /= s;
}

void view_top_k(ViewBuf *b, const double *p, int V, int k, ViewTokenText text, const void *ctx) {
    AG_CHECK_ARG(b);
    AG_CHECK_ARG(p);
    AG_CHECK_ARG(text);
    if (k > V) k = V;
    int *top = malloc((size_t)(k > 0 ? k : 1) * sizeof(int));
    AG_CHECK(top, "view_top_k: out of memory");
    view_raw(b, "[");
    for (int n = 0; n < k; n++) { /* the n-th largest: below the (n-1)-th in (p, -id) order */
        int best = -1;
        for (int v = 0; v < V; v++) {
            int after = n == 0 || p[v] < p[top[n - 1]] || (p[v] == p[top[n - 1]] && v > top[n - 1]);
            if (after && (best < 0 || p[v] > p[best])) best = v;
        }
        if (best < 0) break;
        top[n] = best;
        size_t len;
        const void *t = text(ctx, best, &len);
        view_raw(b, n ? ",[" : "[");
        view_str(b, t, len);
        view_raw(b, ",");
        view_num(b, p[best]);
        view_raw(b, "]");
    }
    view_raw(b, "]");
    free(top);
}

void view_scores(ViewBuf *b, const double *sc, int K, int L, int NH) {
    AG_CHECK_ARG(b);
    AG_CHECK_ARG(sc);
    view_key(b, "scores");
    view_raw(b, "{");
    for (int k = 0; k < (K ? K : 1); k++) {
        if (k) view_raw(b, ",");
        view_key(b, K ? lens_head_kind_name((LensHeadKind)k) : "diagonal");
        view_raw(b, "[");
        for (int i = 0; i < L * NH; i++) {
            if (i) view_raw(b, ",");
            view_num(b, sc[(size_t)k * L * NH + i]);
        }
        view_raw(b, "]");
    }
    view_raw(b, "}");
}

void view_measure(ViewBuf *b, const char *name, const char *kind, const double *v, int B, int T,
                  int shift) {
    AG_CHECK_ARG(b);
    AG_CHECK_ARG(name);
    AG_CHECK_ARG(kind);
    AG_CHECK_ARG(v);
    view_raw(b, "{");
    view_field_str(b, "name", name);
    view_raw(b, ",");
    view_field_str(b, "kind", kind);
    view_raw(b, ",\"values\":[");
    for (int row = 0; row < B; row++) {
        view_raw(b, row ? ",[" : "[");
        for (int i = 0; i < T; i++) {
            if (i) view_raw(b, ",");
            view_num(b, i >= shift ? v[(size_t)row * T + i - shift] : NAN);
        }
        view_raw(b, "]");
    }
    view_raw(b, "]}");
}

void view_nums(ViewBuf *b, const double *v, size_t n) {
    AG_CHECK_ARG(b);
    AG_CHECK_ARG(v);
    view_raw(b, "[");
    for (size_t i = 0; i < n; i++) {
        if (i) view_raw(b, ",");
        view_num(b, v[i]);
    }
    view_raw(b, "]");
}

void view_ints(ViewBuf *b, const int *v, size_t n) {
    AG_CHECK_ARG(b);
    AG_CHECK_ARG(v);
    view_raw(b, "[");
    for (size_t i = 0; i < n; i++) {
        if (i) view_raw(b, ",");
        view_int(b, v[i]);
    }
    view_raw(b, "]");
}

int view_write_html(const char *path, const ViewBuf *data) {
    AG_CHECK_ARG(path);
    AG_CHECK_ARG(data);
    FILE *f;
    char *tmp;
    int rc = io_fopen_write(path, &f, &tmp);
    if (rc != AG_OK) return rc;
    fputs(view_page_head, f);
    if (data->n) fwrite(data->p, 1, data->n, f);
    fputs(view_page_tail, f);
    return io_fclose_replace(f, tmp, path);
}

/* ---- runs: log.csv files ---- */

#define VIEW_MAX_CSV ((size_t)64 << 20) /* bytes of one log.csv */

/* Appends one run {"name": dir, "columns": [...], "rows": [[...], ...]} from dir/log.csv */
static int one_run(ViewBuf *b, const char *dir) {
    char *path = io_path_join(dir, "log.csv");
    FILE *f;
    uint64_t size = 0;
    int rc = io_fopen_read(path, &f, &size);
    if (rc == AG_OK && size > VIEW_MAX_CSV)
        rc = ag_fail(AG_ERR_FORMAT, "%s: %llu bytes, more than %zu", path, (unsigned long long)size,
                     VIEW_MAX_CSV);
    char *text = NULL;
    size_t n = 0;
    if (rc == AG_OK) rc = io_read_all(f, VIEW_MAX_CSV, path, &text, &n);
    if (f) fclose(f);
    if (rc != AG_OK) {
        free(path);
        return rc;
    }
    if (memchr(text, 0, n)) rc = ag_fail(AG_ERR_FORMAT, "%s: a NUL byte: not a CSV file", path);
    char *line = text, *end = rc == AG_OK ? strchr(line, '\n') : NULL;
    if (rc == AG_OK && (!end || end == line))
        rc = ag_fail(AG_ERR_FORMAT, "%s: no header line", path);
    int cols = 0;
    if (rc == AG_OK) {
        *end = 0;
        if (end > line && end[-1] == '\r') end[-1] = 0;
        view_raw(b, "{");
        view_field_str(b, "name", dir);
        view_raw(b, ",");
        view_key(b, "columns");
        view_raw(b, "[");
        for (char *c = line;; cols++) {
            char *comma = strchr(c, ',');
            size_t len = comma ? (size_t)(comma - c) : strlen(c);
            if (cols) view_raw(b, ",");
            view_str(b, c, len);
            if (!comma) break;
            c = comma + 1;
        }
        cols++;
        view_raw(b, "],");
        view_key(b, "rows");
        view_raw(b, "[");
        line = end + 1;
    }
    for (int row = 0, no = 2; rc == AG_OK && *line; no++) {
        end = strchr(line, '\n');
        if (end) *end = 0;
        size_t len = strlen(line);
        if (len && line[len - 1] == '\r') line[--len] = 0;
        if (len) {
            view_raw(b, row++ ? ",[" : "[");
            int k = 0;
            for (char *c = line; rc == AG_OK; k++) {
                char *comma = strchr(c, ','), *stop;
                if (comma) *comma = 0;
                if (k) view_raw(b, ",");
                if (*c == 0) {
                    view_raw(b, "null");
                } else {
                    double v = strtod(c, &stop);
                    if (*stop != 0 || stop == c)
                        rc = ag_fail(AG_ERR_FORMAT, "%s: line %d: '%.40s' is not a number", path,
                                     no, c);
                    view_num(b, v);
                }
                if (!comma) break;
                c = comma + 1;
            }
            if (rc == AG_OK && k + 1 != cols)
                rc = ag_fail(AG_ERR_FORMAT, "%s: line %d has %d fields, the header %d", path, no,
                             k + 1, cols);
            view_raw(b, "]");
        }
        line = end ? end + 1 : line + len;
    }
    if (rc == AG_OK) view_raw(b, "]}");
    free(text);
    free(path);
    return rc;
}

int view_runs(ViewBuf *b, char *const *dirs, int n) {
    AG_CHECK_ARG(b);
    AG_CHECK_ARG(dirs);
    for (int i = 0; i < n; i++) AG_CHECK(dirs[i], "view_runs: dirs[%d] is NULL", i);
    view_key(b, "runs");
    view_raw(b, "[");
    for (int i = 0; i < n; i++) {
        if (i) view_raw(b, ",");
        int rc = one_run(b, dirs[i]);
        if (rc != AG_OK) return rc;
    }
    view_raw(b, "]");
    return AG_OK;
}

/* ---- tables: the .npz of ablate, patch and detect ---- */

/* the entry name of f, checked to be a float64 array of ndim dimensions (0: any); NULL when
 * missing (need: an error) */
static int f64_entry(const NpzFile *f, const char *name, const NpzEntry **e) {
    *e = npz_find(f, name);
    if (*e && (*e)->dtype != NPZ_F64)
        return ag_fail(AG_ERR_FORMAT, "%s: '%s' is %s, not float64", f->path, name,
                       npz_dtype_descr((*e)->dtype));
    return AG_OK;
}

/* the text of a bytes entry (malloc'd, NUL-terminated), or NULL when missing */
static char *bytes_of(const NpzFile *f, const char *name) {
    const NpzEntry *e = npz_find(f, name);
    if (!e || e->dtype != NPZ_U8) return NULL;
    char *s = malloc(e->nbytes + 1);
    AG_CHECK(s, "view_tables: out of memory");
    memcpy(s, e->data, e->nbytes);
    s[e->nbytes] = 0;
    return s;
}

/* the strings of a JSON list in entry name: *n of them (malloc'd, each too); AG_ERR_FORMAT
 * naming the file unless it is a list of want strings */
static int names_of(const NpzFile *f, const char *name, size_t want, char ***out) {
    char *text = bytes_of(f, name);
    json_error_t err;
    json_t *j = text ? json_loads(text, 0, &err) : NULL;
    free(text);
    int rc = AG_OK;
    if (!json_is_array(j) || json_array_size(j) != want)
        rc =
            ag_fail(AG_ERR_FORMAT, "%s: '%s' is not a JSON list of %zu names", f->path, name, want);
    for (size_t i = 0; rc == AG_OK && i < want; i++)
        if (!json_is_string(json_array_get(j, i)))
            rc = ag_fail(AG_ERR_FORMAT, "%s: '%s'[%zu] is not a string", f->path, name, i);
    *out = NULL;
    if (rc == AG_OK) {
        *out = calloc(want + 1, sizeof(char *));
        AG_CHECK(*out, "view_tables: out of memory");
        for (size_t i = 0; i < want; i++) {
            (*out)[i] = strdup(json_string_value(json_array_get(j, i)));
            AG_CHECK((*out)[i], "view_tables: out of memory");
        }
    }
    json_decref(j);
    return rc;
}

static void free_names(char **v) {
    for (size_t i = 0; v && v[i]; i++) free(v[i]);
    free(v);
}

/* one table {"name", "title", "rows", "cols", "values"}: v (R, C); a row label is
 * rows[r / per_row] followed by " h<r % per_row>" when per_row > 1, a column label col_prefix
 * and the index */
static void table(ViewBuf *b, const char *name, const char *title, char *const *rows, int R,
                  int per_row, const char *col_prefix, int C, const double *v) {
    char lab[160];
    view_raw(b, "{");
    view_field_str(b, "name", name);
    view_raw(b, ",");
    view_field_str(b, "title", title);
    view_raw(b, ",\"rows\":[");
    for (int r = 0; r < R; r++) {
        if (per_row > 1)
            snprintf(lab, sizeof lab, "%s h%d", rows[r / per_row], r % per_row);
        else
            snprintf(lab, sizeof lab, "%s", rows[r]);
        if (r) view_raw(b, ",");
        view_str(b, lab, strlen(lab));
    }
    view_raw(b, "],\"cols\":[");
    for (int c = 0; c < C; c++) {
        snprintf(lab, sizeof lab, "%s%d", col_prefix, c);
        if (c) view_raw(b, ",");
        view_str(b, lab, strlen(lab));
    }
    view_raw(b, "],\"values\":[");
    for (size_t i = 0; i < (size_t)R * C; i++) {
        if (i) view_raw(b, ",");
        view_num(b, v[i]);
    }
    view_raw(b, "]}");
}

/* The tables of detect's scores e: (kind, layer, head) with the kinds' names in "kinds", a table
 * a kind; or (layer, head): one table of the diagonal score (the translator's cross-attention).
 * side: "encoder", "decoder", ... or NULL (a GPT's); comma: a comma before the first. AG_OK or
 * AG_ERR_FORMAT naming the file. */
static int score_tables(ViewBuf *b, const NpzFile *f, const char *base, const char *side,
                        const NpzEntry *e, int comma) {
    int two = e->ndim == 2, K = two ? 1 : (int)e->shape[0];
    if ((e->ndim != 3 && !(two && side)) || e->shape[e->ndim - 2] > 4096 ||
        e->shape[e->ndim - 1] > 4096)
        return ag_fail(AG_ERR_FORMAT, "%s: '%s' is not (%slayer, head)", f->path, e->name,
                       two ? "" : "kind, ");
    int L = (int)e->shape[e->ndim - 2], NH = (int)e->shape[e->ndim - 1];
    char **kinds = NULL, **rows = NULL, name[200], title[512];
    int rc = two ? AG_OK : names_of(f, "kinds", (size_t)K, &kinds);
    if (rc == AG_OK) {
        rows = calloc((size_t)L + 1, sizeof(char *));
        AG_CHECK(rows, "view_tables: out of memory");
    }
    for (int l = 0; rc == AG_OK && l < L; l++) {
        rows[l] = malloc(24);
        AG_CHECK(rows[l], "view_tables: out of memory");
        snprintf(rows[l], 24, "L%d", l);
    }
    for (int k = 0; rc == AG_OK && k < K; k++) {
        const char *kind = two ? "diagonal" : kinds[k];
        snprintf(name, sizeof name, "%s: %s%s%s", base, side ? side : "", side ? " " : "", kind);
        snprintf(title, sizeof title, "%s: %s%s%s score of each head (layer, head)", base,
                 side ? side : "", side ? " " : "", kind);
        if (k || comma) view_raw(b, ",");
        table(b, name, title, rows, L, 1, "H", NH, (const double *)e->data + (size_t)k * L * NH);
    }
    free_names(kinds);
    free_names(rows);
    return rc;
}

int view_tables(ViewBuf *b, const char *path) {
    AG_CHECK_ARG(b);
    AG_CHECK_ARG(path);
    NpzFile *f = NULL;
    int rc = npz_read(path, &f, NULL);
    if (rc != AG_OK) return rc;
    const NpzEntry *values, *scores;
    char **rows = NULL, *axes = bytes_of(f, "axes"), *what = bytes_of(f, "metric");
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    char title[512];
    if ((rc = f64_entry(f, "values", &values)) == AG_OK && values) {
        /* ablate (point, head | none) and patch (point, position | head | head, position) */
        int R = values->ndim >= 2 ? (int)values->shape[0] : 0;
        if ((values->ndim != 2 && values->ndim != 3) || !axes || values->shape[0] > (1 << 20))
            rc = ag_fail(AG_ERR_FORMAT, "%s: 'values' %s with axes '%s': not ablate's or patch's",
                         path, npz_shape_str(title, sizeof title, values->ndim, values->shape),
                         axes ? axes : "(none)");
        if (rc == AG_OK) rc = names_of(f, "points", (size_t)R, &rows);
        /* ablate's: the change from "base" (the metric with every part), as ablate prints it */
        const NpzEntry *from = NULL;
        if (rc == AG_OK && (rc = f64_entry(f, "base", &from)) == AG_OK && from && from->ndim != 0)
            rc = ag_fail(AG_ERR_FORMAT, "%s: 'base' is not a number", path);
        if (rc == AG_OK) {
            int three = values->ndim == 3, per = three ? (int)values->shape[1] : 1;
            int C = (int)values->shape[values->ndim - 1];
            const char *col = strstr(axes, "position") ? "pos " : strstr(axes, "head") ? "h" : "";
            double *v = malloc(values->nbytes ? values->nbytes : 1), b0 = 0;
            AG_CHECK(v, "view_tables: out of memory");
            memcpy(v, values->data, values->nbytes);
            if (from) {
                b0 = *(const double *)from->data;
                for (size_t i = 0; i < values->count; i++) v[i] -= b0;
                snprintf(title, sizeof title, "%s: change of %s from %.6g (every part) by %s", base,
                         what ? what : "value", b0, axes);
            } else {
                snprintf(title, sizeof title, "%s: %s by %s", base, what ? what : "value", axes);
            }
            table(b, base, title, rows, R * per, per, col, C, v);
            free(v);
        }
    } else if (rc == AG_OK && (rc = f64_entry(f, "scores", &scores)) == AG_OK && scores) {
        /* attograd-gpt detect: (kind, layer, head) */
        rc = score_tables(b, f, base, NULL, scores, 0);
    } else if (rc == AG_OK && (rc = f64_entry(f, "encoder", &scores)) == AG_OK && scores) {
        /* attograd-translate detect: encoder and decoder (kind, layer, head), cross_diagonal
         * (layer, head) */
        const NpzEntry *dec = NULL, *cross = NULL;
        if ((rc = f64_entry(f, "decoder", &dec)) == AG_OK && !dec)
            rc = ag_fail(AG_ERR_FORMAT, "%s: 'encoder' without 'decoder': not detect's", path);
        if (rc == AG_OK) rc = score_tables(b, f, base, "encoder", scores, 0);
        if (rc == AG_OK) rc = score_tables(b, f, base, "decoder", dec, 1);
        if (rc == AG_OK) rc = f64_entry(f, "cross_diagonal", &cross);
        if (rc == AG_OK && cross) rc = score_tables(b, f, base, "cross-attention", cross, 1);
    } else if (rc == AG_OK) {
        rc = ag_fail(AG_ERR_FORMAT,
                     "%s: not a table of ablate, patch or detect (no 'values' with 'points', "
                     "nor 'scores', nor 'encoder')",
                     path);
    }
    free_names(rows);
    free(axes);
    free(what);
    npz_free(f);
    return rc;
}
