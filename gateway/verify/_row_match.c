/*
 * gateway.verify._row_match: pairs the rows of two answers by their values, reading Arrow's
 * C data in place (memory-mapped spills are not copied into the process).
 *
 * Used by gateway/verify/row_match.py (the contract is there). Each row of each side is
 * encoded as bytes (a NULL as one byte 0, a value as a tag then its bytes, the tag saying
 * how many bytes its number or length takes: two rows of one type encode alike exactly
 * when their values are equal), hashed, and written with its index to the file of its
 * range of hashes, both sides read once. Then a range at a time (each a few MiB), each
 * reference row is given the first primary row of its hash whose bytes equal its own, and
 * both are proven (a bit a row). The hash only offers candidates: bytes decide. What is
 * left without an equal partner goes to the pairing.
 *
 * Also key_order: the order sorting each map's entries by key (the spills' maps are sorted
 * so once, as they arrive: gateway/verify/compare_types.py).
 *
 * Never looser than the comparator's equality: NULL equals NULL, a row holding a NaN is
 * never proven, -0.0 is written as 0.0 (the caller asks only with signed_zero_equal), and
 * maps compare as stored (their entries are in key order once spilled).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct ArrowSchema {
    const char *format;
    const char *name;
    const char *metadata;
    int64_t flags;
    int64_t n_children;
    struct ArrowSchema **children;
    struct ArrowSchema *dictionary;
    void (*release)(struct ArrowSchema *);
    void *private_data;
};

struct ArrowArray {
    int64_t length;
    int64_t null_count;
    int64_t offset;
    int64_t n_buffers;
    int64_t n_children;
    const void **buffers;
    struct ArrowArray **children;
    struct ArrowArray *dictionary;
    void (*release)(struct ArrowArray *);
    void *private_data;
};

enum { K_NULL, K_BOOL, K_INT, K_UINT, K_FIXED, K_F32, K_F64, K_BIN32, K_BIN64, K_LIST32,
       K_LIST64, K_FLIST, K_STRUCT };

typedef struct Type {
    int kind;
    int leaf;      /* holds no other type */
    int64_t width; /* bytes of a K_INT, K_UINT or K_FIXED value; values of a K_FLIST */
    int64_t n_children;
    struct Type *children;
} Type;

typedef struct View {
    const uint8_t *valid; /* NULL: no NULLs */
    const uint8_t *b1;    /* values, or offsets */
    const uint8_t *b2;    /* bytes of a binary */
    int64_t off;
    struct View *children;
} View;

#define K1 0x9E3779B97F4A7C15ULL

static inline uint64_t mix(uint64_t h, uint64_t v) {
    h = (h ^ v) * K1;
    return h ^ (h >> 32);
}

static inline uint64_t fmix(uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    return h ^ (h >> 33);
}

static inline int bit(const uint8_t *bits, int64_t i) { return (bits[i >> 3] >> (i & 7)) & 1; }

/* -- types ------------------------------------------------------------------------------ */
static void free_type(Type *t) {
    for (int64_t c = 0; c < t->n_children; c++) free_type(&t->children[c]);
    free(t->children);
    t->children = NULL;
    t->n_children = 0;
}

/* The type of ``s``; 0 when it is not one this module reads (the caller falls back). */
static int parse_type(const struct ArrowSchema *s, Type *t) {
    const char *f = s->format;
    memset(t, 0, sizeof(*t));
    if (s->dictionary != NULL) return 0;
    t->kind = K_INT;
    if (!strcmp(f, "n")) t->kind = K_NULL;
    else if (!strcmp(f, "b")) t->kind = K_BOOL;
    else if (!strcmp(f, "c")) t->width = 1;
    else if (!strcmp(f, "s")) t->width = 2;
    else if (!strcmp(f, "i") || !strcmp(f, "tdD") || !strcmp(f, "tts") || !strcmp(f, "ttm") ||
             !strcmp(f, "tiM")) t->width = 4;
    else if (!strcmp(f, "l") || !strcmp(f, "tdm") || !strcmp(f, "ttu") || !strcmp(f, "ttn") ||
             !strncmp(f, "ts", 2) || !strncmp(f, "tD", 2)) t->width = 8;
    else if (!strcmp(f, "C") || !strcmp(f, "S") || !strcmp(f, "I") || !strcmp(f, "L")) {
        t->kind = K_UINT;
        t->width = f[0] == 'C' ? 1 : f[0] == 'S' ? 2 : f[0] == 'I' ? 4 : 8;
    } else if (!strcmp(f, "tiD")) {
        t->kind = K_FIXED;
        t->width = 8;
    } else if (!strcmp(f, "tin")) {
        t->kind = K_FIXED;
        t->width = 16;
    }
    else if (!strcmp(f, "f")) t->kind = K_F32;
    else if (!strcmp(f, "g")) t->kind = K_F64;
    else if (!strcmp(f, "z") || !strcmp(f, "u")) t->kind = K_BIN32;
    else if (!strcmp(f, "Z") || !strcmp(f, "U")) t->kind = K_BIN64;
    else if (!strncmp(f, "d:", 2)) {
        const char *last = strrchr(f, ',');
        const char *first = strchr(f, ',');
        t->kind = K_FIXED;
        t->width = 16;
        if (last != NULL && last != first) {
            long bits = strtol(last + 1, NULL, 10);
            if (bits != 32 && bits != 64 && bits != 128 && bits != 256) return 0;
            t->width = bits / 8;
        }
    } else if (!strncmp(f, "w:", 2)) {
        t->kind = K_FIXED;
        t->width = strtol(f + 2, NULL, 10);
        if (t->width <= 0) return 0;
    } else if (!strcmp(f, "+l") || !strcmp(f, "+m")) t->kind = K_LIST32;
    else if (!strcmp(f, "+L")) t->kind = K_LIST64;
    else if (!strncmp(f, "+w:", 3)) {
        t->kind = K_FLIST;
        t->width = strtol(f + 3, NULL, 10);
        if (t->width < 0) return 0;
    } else if (!strcmp(f, "+s")) t->kind = K_STRUCT;
    else return 0;
    t->leaf = t->kind < K_LIST32;
    int nested = t->kind == K_LIST32 || t->kind == K_LIST64 || t->kind == K_FLIST;
    if (nested && s->n_children != 1) return 0;
    if (nested || t->kind == K_STRUCT) {
        t->n_children = s->n_children;
        t->children = calloc(s->n_children ? s->n_children : 1, sizeof(Type));
        if (t->children == NULL) return 0;
        for (int64_t c = 0; c < s->n_children; c++) {
            if (!parse_type(s->children[c], &t->children[c])) {
                free_type(t);
                return 0;
            }
        }
    }
    return 1;
}

static int same_format(const struct ArrowSchema *a, const struct ArrowSchema *b) {
    if (strcmp(a->format, b->format) || a->n_children != b->n_children ||
        (a->dictionary == NULL) != (b->dictionary == NULL))
        return 0;
    for (int64_t c = 0; c < a->n_children; c++)
        if (!same_format(a->children[c], b->children[c])) return 0;
    return 1;
}

/* -- views of one batch's arrays -------------------------------------------------------- */
static void free_view(const Type *t, View *v) {
    if (v->children == NULL) return;
    for (int64_t c = 0; c < t->n_children; c++) free_view(&t->children[c], &v->children[c]);
    free(v->children);
    v->children = NULL;
}

static int make_view(const Type *t, const struct ArrowArray *a, View *v) {
    memset(v, 0, sizeof(*v));
    v->off = a->offset;
    if (t->kind == K_NULL) return 1;
    if (a->n_buffers < 1) return 0;
    v->valid = a->null_count == 0 ? NULL : (const uint8_t *)a->buffers[0];
    if (t->kind == K_BOOL || t->kind == K_INT || t->kind == K_UINT || t->kind == K_FIXED ||
        t->kind == K_F32 || t->kind == K_F64 ||
        t->kind == K_BIN32 || t->kind == K_BIN64 || t->kind == K_LIST32 || t->kind == K_LIST64) {
        if (a->n_buffers < 2) return 0;
        v->b1 = (const uint8_t *)a->buffers[1];
    }
    if (t->kind == K_BIN32 || t->kind == K_BIN64) {
        if (a->n_buffers < 3) return 0;
        v->b2 = (const uint8_t *)a->buffers[2];
    }
    if (t->n_children) {
        if (a->n_children != t->n_children) return 0;
        v->children = calloc(t->n_children, sizeof(View));
        if (v->children == NULL) return 0;
        for (int64_t c = 0; c < t->n_children; c++)
            if (!make_view(&t->children[c], a->children[c], &v->children[c])) return 0;
    }
    return 1;
}

/* -- a row's bytes: equal rows, and only they, encode alike ------------------------------ */
typedef struct Bytes {
    uint8_t *at;
    size_t used, size;
} Bytes;

static int grow(Bytes *b, size_t more) {
    if (b->used + more <= b->size) return 1;
    size_t size = b->size ? b->size : 256;
    while (size < b->used + more) size *= 2;
    uint8_t *at = realloc(b->at, size);
    if (at == NULL) return 0;
    b->at = at;
    b->size = size;
    return 1;
}

/* the bytes a row's encoder may write past what it reserved for a value's fixed part: a tag,
   an 8-byte number (written whole, kept in part), 16 bytes of a fixed-width value, slack */
#define ROOM 48

static inline int room(Bytes *b, size_t more) {
    return b->used + more <= b->size || grow(b, more);
}

/* the bytes of ``x`` that are not leading zeros (0 for 0) */
static inline unsigned significant(uint64_t x) {
    return x ? (unsigned)((71 - __builtin_clzll(x)) >> 3) : 0;
}

/* A value's tag and a number: the tag is ``base`` + the number's significant bytes (so that
   it says how many follow), then those bytes, least significant first. Equal numbers, equal
   bytes; unequal numbers (or bases) differ in the tag or the bytes. The caller reserved ROOM. */
static inline void put_tagged(Bytes *b, uint8_t base, uint64_t x) {
    unsigned n = significant(x);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    x = __builtin_bswap64(x);
#endif
    uint8_t *at = b->at + b->used;
    at[0] = (uint8_t)(base + n);
    memcpy(at + 1, &x, 8); /* whole: only ``n`` of them are kept */
    b->used += 1 + n;
}

/* Appends value ``j`` (its offset in ``v``'s buffers already added) of a type that holds
   no other: see encode_value. Inlined where it is called: no call a value. */
static inline __attribute__((always_inline)) int encode_leaf(const Type *t, const View *v,
                                                              int64_t j, Bytes *out) {
    if (!room(out, ROOM)) return -1;
    uint8_t *at = out->at + out->used;
    if (t->kind == K_NULL || (v->valid != NULL && !bit(v->valid, j))) {
        *at = 0;
        out->used++;
        return 1;
    }
    if (t->kind == K_INT) {
        int64_t x;
        switch (t->width) {
        case 1: x = ((const int8_t *)v->b1)[j]; break;
        case 2: x = ((const int16_t *)v->b1)[j]; break;
        case 4: x = ((const int32_t *)v->b1)[j]; break;
        default: x = ((const int64_t *)v->b1)[j]; break;
        }
        /* small magnitudes in few bytes: zigzag */
        put_tagged(out, 1, ((uint64_t)x << 1) ^ (uint64_t)(x >> 63));
        return 1;
    }
    if (t->kind == K_BIN32 || t->kind == K_BIN64) {
        int64_t start, n;
        if (t->kind == K_BIN32) {
            const int32_t *o = (const int32_t *)v->b1;
            start = o[j];
            n = o[j + 1] - start;
        } else {
            const int64_t *o = (const int64_t *)v->b1;
            start = o[j];
            n = o[j + 1] - start;
        }
        if (n > ROOM - 10 && !room(out, 10 + (size_t)n)) return -1;
        put_tagged(out, 1, (uint64_t)n);
        memcpy(out->at + out->used, v->b2 + start, (size_t)n);
        out->used += (size_t)n;
        return 1;
    }
    if (t->kind == K_F64) {
        double x;
        memcpy(&x, v->b1 + 8 * j, 8);
        if (x != x) return 0;
        if (x == 0) x = 0; /* -0.0 equals 0.0 (asked only with signed_zero_equal) */
        *at = 1;
        memcpy(at + 1, &x, 8);
        out->used += 9;
        return 1;
    }
    switch (t->kind) {
    case K_BOOL:
        *at = (uint8_t)(1 + bit(v->b1, j));
        out->used++;
        return 1;
    case K_UINT: {
        uint64_t x;
        switch (t->width) {
        case 1: x = ((const uint8_t *)v->b1)[j]; break;
        case 2: x = ((const uint16_t *)v->b1)[j]; break;
        case 4: x = ((const uint32_t *)v->b1)[j]; break;
        default: x = ((const uint64_t *)v->b1)[j]; break;
        }
        put_tagged(out, 1, x);
        return 1;
    }
    case K_FIXED:
        *at = 1;
        switch (t->width) {  /* (a constant size: no call) */
        case 4: memcpy(at + 1, v->b1 + 4 * j, 4); break;
        case 8: memcpy(at + 1, v->b1 + 8 * j, 8); break;
        case 16: memcpy(at + 1, v->b1 + 16 * j, 16); break;
        default:
            if (!room(out, 1 + (size_t)t->width)) return -1;
            at = out->at + out->used;
            *at = 1;
            memcpy(at + 1, v->b1 + t->width * j, (size_t)t->width);
        }
        out->used += 1 + (size_t)t->width;
        return 1;
    case K_F32: {
        float x;
        memcpy(&x, v->b1 + 4 * j, 4);
        if (x != x) return 0;
        if (x == 0) x = 0;
        *at = 1;
        memcpy(at + 1, &x, 4);
        out->used += 5;
        return 1;
    }
    }
    return 1;
}

static int encode_nested(const Type *t, const View *v, int64_t j, Bytes *out);

/* Appends value ``i`` of ``v``: a NULL is one byte 0 (what it hides is not read); a value
   starts with a tag of 1 or more and is self-delimiting (the tag says how many bytes its
   number or length takes, lengths come before bytes and elements), so that two rows of one
   type encode alike exactly when their values are equal. 1: done; 0: a NaN (never equal:
   the row is left to the pairing); -1: out of memory. */
static inline __attribute__((always_inline)) int encode_value(const Type *t, const View *v,
                                                               int64_t i, Bytes *out) {
    return t->leaf ? encode_leaf(t, v, v->off + i, out) : encode_nested(t, v, v->off + i, out);
}

/* encode_value for a list or a struct (``j``: offset added) */
static int encode_nested(const Type *t, const View *v, int64_t j, Bytes *out) {
    if (!room(out, ROOM)) return -1;
    uint8_t *at = out->at + out->used;
    if (v->valid != NULL && !bit(v->valid, j)) {
        *at = 0;
        out->used++;
        return 1;
    }
    switch (t->kind) {
    case K_LIST32:
    case K_LIST64: {
        int64_t start, stop;
        if (t->kind == K_LIST32) {
            start = ((const int32_t *)v->b1)[j];
            stop = ((const int32_t *)v->b1)[j + 1];
        } else {
            start = ((const int64_t *)v->b1)[j];
            stop = ((const int64_t *)v->b1)[j + 1];
        }
        put_tagged(out, 1, (uint64_t)(stop - start));
        for (int64_t k = start; k < stop; k++) {
            int done = encode_value(&t->children[0], &v->children[0], k, out);
            if (done != 1) return done;
        }
        return 1;
    }
    case K_FLIST:
        *at = 1;
        out->used++;
        for (int64_t k = 0; k < t->width; k++) {
            int done = encode_value(&t->children[0], &v->children[0], j * t->width + k, out);
            if (done != 1) return done;
        }
        return 1;
    case K_STRUCT:
        *at = 1;
        out->used++;
        for (int64_t c = 0; c < t->n_children; c++) {
            int done = encode_value(&t->children[c], &v->children[c], j, out);
            if (done != 1) return done;
        }
        return 1;
    }
    return 1;
}

#define K2 0xe7037ed1a0b428dbULL
#define K3 0xa0761d6478bd642fULL

/* 64 x 64 -> 128 bits, folded */
static inline uint64_t mum(uint64_t a, uint64_t b) {
    __uint128_t r = (__uint128_t)a * b;
    return (uint64_t)r ^ (uint64_t)(r >> 64);
}

/* A row's hash, 16 bytes a step. Reads whole words: the caller's buffer has 16 zero bytes
   after ``n`` (``hash_room``). Only candidates come of it: bytes decide. */
static inline uint64_t hash_bytes(const uint8_t *p, size_t n) {
    uint64_t h = mum((uint64_t)n ^ K1, K2);
    for (size_t at = 0; at < n; at += 16) {
        uint64_t a, b;
        memcpy(&a, p + at, 8);
        memcpy(&b, p + at + 8, 8);
        h = mum(a ^ K1 ^ h, b ^ K3);
    }
    return fmix(h);
}

/* -- one side: its batches, the columns compared ---------------------------------------- */
typedef struct Side {
    Py_ssize_t n_batches;
    int64_t rows;
    int64_t *starts;  /* the first row of each batch, and the rows after the last */
    View *views;      /* n_batches x n_columns: each batch's view of each column */
} Side;

typedef struct Columns {
    Py_ssize_t n;
    Py_ssize_t *index;
    Type *types;
} Columns;

static void free_side(Side *s, const Columns *cols) {
    if (s->views != NULL)
        for (Py_ssize_t b = 0; b < s->n_batches; b++)
            for (Py_ssize_t c = 0; c < cols->n; c++)
                free_view(&cols->types[c], &s->views[b * cols->n + c]);
    free(s->views);
    free(s->starts);
    memset(s, 0, sizeof(*s));
}

static int capsules(PyObject *pair, struct ArrowSchema **schema, struct ArrowArray **array) {
    if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
        PyErr_SetString(PyExc_TypeError, "a batch is a (schema, array) pair of capsules");
        return 0;
    }
    *schema = PyCapsule_GetPointer(PyTuple_GET_ITEM(pair, 0), "arrow_schema");
    if (*schema == NULL) return 0;
    *array = PyCapsule_GetPointer(PyTuple_GET_ITEM(pair, 1), "arrow_array");
    return *array != NULL;
}

/* 1: read; 0: a Python error is set; -1: a type or layout this module does not read */
static int read_side(PyObject *batches, const Columns *cols, const struct ArrowSchema *like,
                     Side *s) {
    memset(s, 0, sizeof(*s));
    s->n_batches = PyList_GET_SIZE(batches);
    s->starts = calloc((size_t)s->n_batches + 1, sizeof(int64_t));
    s->views = calloc((size_t)(s->n_batches * cols->n) + 1, sizeof(View));
    if (s->starts == NULL || s->views == NULL) {
        PyErr_NoMemory();
        return 0;
    }
    for (Py_ssize_t b = 0; b < s->n_batches; b++) {
        struct ArrowSchema *schema;
        struct ArrowArray *array;
        if (!capsules(PyList_GET_ITEM(batches, b), &schema, &array)) return 0;
        if (strcmp(schema->format, "+s")) return -1;
        s->starts[b + 1] = s->starts[b] + array->length;
        for (Py_ssize_t c = 0; c < cols->n; c++) {
            Py_ssize_t i = cols->index[c];
            View *v = &s->views[b * cols->n + c];
            if (i >= schema->n_children || i >= array->n_children) return -1;
            if (!same_format(schema->children[i], like->children[i])) return -1;
            if (!make_view(&cols->types[c], array->children[i], v)) return -1;
            v->off += array->offset; /* a batch's offset is its columns' too */
        }
    }
    s->rows = s->starts[s->n_batches];
    return 1;
}

/* -- routing each side's rows to files, a range of hashes each ----------------------------- */
/* A record: the low half of the row's hash (the high half chose its range; once a primary
   record is read back and in its hash's chain, the slot holds the hash and this field the
   link to the next record of the chain), its index, its bytes' length, then its bytes.
   Packed (12 bytes, unaligned reads): each byte is written and read back once. */
typedef struct __attribute__((packed)) Record {
    uint32_t hash;
    uint32_t row;
    uint32_t n;
} Record;

#define RECORD_BYTES(n) (sizeof(Record) + (size_t)(n))

#define WRITE_BUFFER (1 << 16)

typedef struct Parts {
    uint32_t n;
    FILE **files;
    Bytes *buffers;
} Parts;

static inline uint32_t part_of(uint64_t h, uint32_t parts) {
    return (uint32_t)(((h >> 32) * (uint64_t)parts) >> 32);
}

static void part_path(char *out, size_t size, const char *folder, int side, uint32_t part) {
    snprintf(out, size, "%s/rows-%d-%u", folder, side, part);
}

static int flush_part(Parts *ps, uint32_t part) {
    Bytes *b = &ps->buffers[part];
    if (b->used && fwrite(b->at, 1, b->used, ps->files[part]) != b->used) return 0;
    b->used = 0;
    return 1;
}

/* Writes every row of ``s`` to the file of its hash's range; a row holding a NaN goes to
   none (it stays unproven). 1: done; 0: out of memory; -1: a file could not be written. */
static int route_side(const Side *s, const Columns *cols, Parts *ps, uint64_t mask) {
    Bytes row = {0};
    int done = 1;
    for (Py_ssize_t b = 0; b < s->n_batches && done == 1; b++) {
        int64_t first = s->starts[b], n = s->starts[b + 1] - first;
        const View *views = &s->views[b * cols->n];
        for (int64_t i = 0; i < n; i++) {
            row.used = 0;
            int encoded = 1;
            for (Py_ssize_t c = 0; c < cols->n && encoded == 1; c++)
                encoded = encode_value(&cols->types[c], &views[c], i, &row);
            if (encoded < 0) { done = 0; break; }
            if (encoded == 0) continue;
            if (row.used > UINT32_MAX - 64) continue; /* (not in a record: left unproven) */
            /* 16 zero bytes after the row: the hash reads whole words */
            if (!room(&row, 16)) { done = 0; break; }
            memset(row.at + row.used, 0, 16);
            uint64_t h = hash_bytes(row.at, row.used) & mask;
            Record head = {(uint32_t)h, (uint32_t)(first + i), (uint32_t)row.used};
            uint32_t part = part_of(h, ps->n);
            Bytes *out = &ps->buffers[part];
            size_t bytes = RECORD_BYTES(row.used);
            if (!room(out, bytes)) { done = 0; break; }
            memcpy(out->at + out->used, &head, sizeof(head));
            memcpy(out->at + out->used + sizeof(head), row.at, bytes - sizeof(head));
            out->used += bytes;
            if (out->used >= WRITE_BUFFER && !flush_part(ps, part)) { done = -1; break; }
        }
    }
    for (uint32_t part = 0; part < ps->n && done == 1; part++)
        if (!flush_part(ps, part)) done = -1;
    free(row.at);
    return done;
}

static void close_parts(Parts *ps) {
    for (uint32_t part = 0; part < ps->n; part++) {
        if (ps->files[part] != NULL) fclose(ps->files[part]);
        free(ps->buffers[part].at);
    }
    free(ps->files);
    free(ps->buffers);
    memset(ps, 0, sizeof(*ps));
}

static int open_parts(Parts *ps, uint32_t n, const char *folder, int side) {
    char path[4096];
    ps->n = n;
    ps->files = calloc(n, sizeof(FILE *));
    ps->buffers = calloc(n, sizeof(Bytes));
    if (ps->files == NULL || ps->buffers == NULL) return 0;
    for (uint32_t part = 0; part < n; part++) {
        part_path(path, sizeof(path), folder, side, part);
        ps->files[part] = fopen(path, "wb");
        if (ps->files[part] == NULL) return -1;
    }
    return 1;
}

/* The whole file of one side's range of hashes, read into ``into``; removed. */
static int read_part(const char *folder, int side, uint32_t part, Bytes *into) {
    char path[4096];
    part_path(path, sizeof(path), folder, side, part);
    FILE *f = fopen(path, "rb");
    into->used = 0;
    if (f == NULL) return -1;
    int done = 1;
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && st.st_size > 0 && !grow(into, (size_t)st.st_size + 1))
        done = 0;
    while (done == 1) {
        if (!grow(into, WRITE_BUFFER)) { done = 0; break; }
        size_t got = fread(into->at + into->used, 1, into->size - into->used, f);
        into->used += got;
        if (got == 0) break;
    }
    if (ferror(f)) done = -1;
    fclose(f);
    remove(path);
    return done;
}

/* -- pairing one range's rows ------------------------------------------------------------ */
/* the end of a chain of records; a slot no hash took */
#define END (UINT32_MAX - 1)
#define EMPTY UINT32_MAX
/* a reference record walks at most this many records of its hash (records of one hash that
   are not equal are collisions: this keeps a forced run of them from being quadratic) */
#define MAX_WALK 64
/* how many records ahead the cache is asked for what they will read */
#define AHEAD 8

/* a hash of the range, and where its first primary record not yet given out is (END: none
   left; EMPTY: a free slot) */
typedef struct Slot {
    uint32_t hash;
    uint32_t head;
} Slot;

static inline void set_bit(uint8_t *bits, uint32_t i) { bits[i >> 3] |= (uint8_t)(1u << (i & 7)); }

/* Gives each reference record of a range the first primary record of its hash with the same
   bytes, which leaves its chain (the records' links are written in ``p``); marks both rows
   proven (a bit a row). ``table`` is reused from range to range. 0: out of memory. */
static int pair_part(Bytes *p, const Bytes *r, uint8_t *p_done, uint8_t *r_done,
                     Bytes *table) {
    if (p->used >= END) return 1; /* (offsets are 32 bits: its rows are left unproven) */
    size_t records = 0;
    for (size_t at = 0; at < p->used; records++)
        at += RECORD_BYTES(((const Record *)(p->at + at))->n);
    if (records == 0) return 1;
    size_t slots = 1024;
    while (slots < records * 2) slots *= 2;
    size_t mask = slots - 1;
    table->used = 0;
    if (!grow(table, slots * sizeof(Slot))) return 0;
    Slot *slot = (Slot *)table->at;
    memset(slot, 0xff, slots * sizeof(Slot));
    /* a cursor some records ahead fetches their slots into the cache before they are needed */
    size_t ahead = 0;
    for (int k = 0; k < AHEAD && ahead < p->used; k++)
        ahead += RECORD_BYTES(((const Record *)(p->at + ahead))->n);
    for (size_t at = 0; at < p->used;) {
        Record *head = (Record *)(p->at + at);
        if (ahead < p->used) {
            const Record *next = (const Record *)(p->at + ahead);
            __builtin_prefetch(&slot[next->hash & mask], 1);
            ahead += RECORD_BYTES(next->n);
        }
        size_t s = head->hash & mask;
        while (slot[s].head != EMPTY && slot[s].hash != head->hash) s = (s + 1) & mask;
        if (slot[s].head == EMPTY) {
            slot[s].hash = head->hash;
            slot[s].head = END;
        }
        head->hash = slot[s].head; /* the link: the slot holds the hash */
        slot[s].head = (uint32_t)at;
        at += RECORD_BYTES(head->n);
    }
    /* two cursors ahead: the farther fetches slots, the nearer the records they lead to */
    size_t far = 0, near = 0;
    for (int k = 0; k < 2 * AHEAD && far < r->used; k++) {
        far += RECORD_BYTES(((const Record *)(r->at + far))->n);
        if (k < AHEAD) near = far;
    }
    for (size_t at = 0; at < r->used;) {
        const Record *head = (const Record *)(r->at + at);
        const uint8_t *bytes = r->at + at + sizeof(Record);
        at += RECORD_BYTES(head->n);
        if (far < r->used) {
            const Record *next = (const Record *)(r->at + far);
            __builtin_prefetch(&slot[next->hash & mask]);
            far += RECORD_BYTES(next->n);
        }
        if (near < r->used) {
            const Record *next = (const Record *)(r->at + near);
            const Slot *first = &slot[next->hash & mask];
            if (first->hash == next->hash && first->head < END)
                __builtin_prefetch(p->at + first->head);
            near += RECORD_BYTES(next->n);
        }
        size_t s = head->hash & mask;
        while (slot[s].head != EMPTY && slot[s].hash != head->hash) s = (s + 1) & mask;
        if (slot[s].head == EMPTY) continue;
        Record *prev = NULL;
        uint32_t cur = slot[s].head;
        for (int walked = 0; cur != END && walked < MAX_WALK; walked++) {
            Record *other = (Record *)(p->at + cur);
            if (other->n == head->n && !memcmp(other + 1, bytes, head->n)) {
                if (prev == NULL) slot[s].head = other->hash;
                else prev->hash = other->hash;
                set_bit(p_done, other->row);
                set_bit(r_done, head->row);
                break;
            }
            prev = other;
            cur = other->hash;
        }
    }
    return 1;
}

/* -- a range too large to hold: its equal rows counted, not held -------------------------- */
/* Rows of one value share one hash, so a range can hold far more than its share of the
   rows (an answer of few distinct rows: millions of records of a handful of hashes), and
   reading it whole would take memory in proportion to the answer. Such a range is read as
   a stream, three times: the primary's records counted by value (each distinct value held
   once), the reference's given the counted ones (first come, first proven), the primary's
   proven as many times as its value was given out. Memory: the distinct values, at most
   ``limit`` bytes; past that the range's rows are left unproven (the pairing decides). */
typedef struct Distinct {
    uint64_t at;      /* its record in ``values`` (head, then bytes) */
    uint64_t counted; /* primary records of this value not yet given out */
    uint64_t given;   /* primary records of this value to prove */
} Distinct;

typedef struct Counted {
    Bytes values;    /* the distinct records */
    Bytes entries;   /* Distinct, by insertion */
    Bytes slots;     /* uint32 index into entries, EMPTY when free */
    size_t n, mask;
} Counted;

static void free_counted(Counted *c) {
    free(c->values.at);
    free(c->entries.at);
    free(c->slots.at);
    memset(c, 0, sizeof(*c));
}

/* the entry of a record's value, or NULL */
static Distinct *find_value(Counted *c, const Record *head, const uint8_t *bytes, size_t *slot) {
    const uint32_t *slots = (const uint32_t *)c->slots.at;
    size_t s = head->hash & c->mask;
    for (; slots[s] != EMPTY; s = (s + 1) & c->mask) {
        Distinct *d = &((Distinct *)c->entries.at)[slots[s]];
        const Record *r = (const Record *)(c->values.at + d->at);
        if (r->hash == head->hash && r->n == head->n && !memcmp(r + 1, bytes, head->n)) {
            *slot = s;
            return d;
        }
    }
    *slot = s;
    return NULL;
}

/* 1: added; 0: out of memory; -2: past ``limit`` */
static int add_value(Counted *c, const Record *head, const uint8_t *bytes, size_t limit) {
    size_t s;
    Distinct *d = find_value(c, head, bytes, &s);
    if (d != NULL) {
        d->counted++;
        return 1;
    }
    if (c->values.used + RECORD_BYTES(head->n) + (c->n + 1) * (sizeof(Distinct) + 8) > limit)
        return -2;
    if ((c->n + 1) * 2 > c->mask + 1) { /* grow the slots, placing every entry again */
        size_t slots = (c->mask + 1) * 2;
        c->slots.used = 0;
        if (!grow(&c->slots, slots * sizeof(uint32_t))) return 0;
        memset(c->slots.at, 0xff, slots * sizeof(uint32_t));
        c->mask = slots - 1;
        uint32_t *table = (uint32_t *)c->slots.at;
        for (size_t i = 0; i < c->n; i++) {
            const Record *r = (const Record *)(c->values.at + ((Distinct *)c->entries.at)[i].at);
            size_t t = r->hash & c->mask;
            while (table[t] != EMPTY) t = (t + 1) & c->mask;
            table[t] = (uint32_t)i;
        }
        find_value(c, head, bytes, &s);
    }
    if (!grow(&c->values, RECORD_BYTES(head->n)) || !grow(&c->entries, sizeof(Distinct)))
        return 0;
    Distinct fresh = {c->values.used, 1, 0};
    memcpy(c->values.at + c->values.used, head, sizeof(Record));
    memcpy(c->values.at + c->values.used + sizeof(Record), bytes, head->n);
    c->values.used += RECORD_BYTES(head->n);
    memcpy(c->entries.at + c->entries.used, &fresh, sizeof(fresh));
    c->entries.used += sizeof(Distinct);
    ((uint32_t *)c->slots.at)[s] = (uint32_t)c->n++;
    return 1;
}

/* Reads the next record of ``f`` into ``row`` (its head, then its bytes). 1: read;
   0: out of memory; -1: a read error; 2: the end. */
static int next_record(FILE *f, Bytes *row) {
    Record head;
    size_t got = fread(&head, 1, sizeof(head), f);
    if (got == 0) return ferror(f) ? -1 : 2;
    if (got != sizeof(head)) return -1;
    row->used = 0;
    if (!grow(row, RECORD_BYTES(head.n))) return 0;
    memcpy(row->at, &head, sizeof(head));
    if (head.n && fread(row->at + sizeof(head), 1, head.n, f) != head.n) return -1;
    row->used = RECORD_BYTES(head.n);
    return 1;
}

/* One pass over a side's file of ``part``: pass 0 counts (primary), 1 gives out
   (reference), 2 proves (primary). 1: done; 0: out of memory; -1: read error; -2: past
   ``limit`` (pass 0). */
static int counted_pass(const char *folder, int side, uint32_t part, int pass, Counted *c,
                        uint8_t *done, size_t limit, Bytes *row) {
    char path[4096];
    part_path(path, sizeof(path), folder, side, part);
    FILE *f = fopen(path, "rb");
    if (f == NULL) return -1;
    setvbuf(f, NULL, _IOFBF, WRITE_BUFFER);
    int ok = 1;
    for (;;) {
        int read = next_record(f, row);
        if (read != 1) {
            if (read != 2) ok = read;
            break;
        }
        const Record *head = (const Record *)row->at;
        const uint8_t *bytes = row->at + sizeof(Record);
        if (pass == 0) {
            ok = add_value(c, head, bytes, limit);
            if (ok != 1) break;
            continue;
        }
        size_t s;
        Distinct *d = find_value(c, head, bytes, &s);
        if (d == NULL) continue;
        if (pass == 1 && d->counted) {
            d->counted--;
            d->given++;
            set_bit(done, head->row);
        } else if (pass == 2 && d->given) {
            d->given--;
            set_bit(done, head->row);
        }
    }
    fclose(f);
    return ok;
}

/* A range whose files are larger than ``limit``: its rows proven by counting (above), or
   left unproven where its distinct values would pass ``limit``. Both files are removed.
   1: done; 0: out of memory; -1: a file could not be read. */
static int count_part(const char *folder, uint32_t part, uint8_t *p_done, uint8_t *r_done,
                      size_t limit) {
    Counted c = {0};
    Bytes row = {0};
    int ok = 1;
    c.mask = 1023;
    if (!grow(&c.slots, (c.mask + 1) * sizeof(uint32_t))) ok = 0;
    else memset(c.slots.at, 0xff, (c.mask + 1) * sizeof(uint32_t));
    if (ok == 1) ok = counted_pass(folder, 0, part, 0, &c, p_done, limit, &row);
    if (ok == 1) ok = counted_pass(folder, 1, part, 1, &c, r_done, limit, &row);
    if (ok == 1) ok = counted_pass(folder, 0, part, 2, &c, p_done, limit, &row);
    if (ok == -2) ok = 1; /* too many distinct values: the range's rows stay unproven */
    free_counted(&c);
    free(row.at);
    for (int side = 0; side < 2; side++) {
        char path[4096];
        part_path(path, sizeof(path), folder, side, part);
        remove(path);
    }
    return ok;
}

static off_t part_size(const char *folder, int side, uint32_t part) {
    char path[4096];
    struct stat st;
    part_path(path, sizeof(path), folder, side, part);
    return stat(path, &st) == 0 ? st.st_size : 0;
}

static PyObject *left_rows(const uint8_t *done, int64_t n) {
    int64_t left = 0;
    for (int64_t i = 0; i < n; i++) left += !((done[i >> 3] >> (i & 7)) & 1);
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(left * 8));
    if (out == NULL) return NULL;
    int64_t *at = (int64_t *)PyBytes_AS_STRING(out);
    for (int64_t i = 0; i < n; i++)
        if (!((done[i >> 3] >> (i & 7)) & 1)) *at++ = i;
    return out;
}

static PyObject *prove(PyObject *self, PyObject *args) {
    PyObject *p_batches, *r_batches, *columns, *result = NULL;
    const char *folder;
    unsigned int parts;
    unsigned long long hash_mask, limit = 0;
    if (!PyArg_ParseTuple(args, "O!O!O!sIK|K", &PyList_Type, &p_batches, &PyList_Type,
                          &r_batches, &PyTuple_Type, &columns, &folder, &parts, &hash_mask,
                          &limit))
        return NULL;
    Columns cols = {0};
    Side sides[2] = {{0}, {0}};
    uint8_t *done[2] = {NULL, NULL};
    Parts routed = {0};
    Bytes held[2] = {{0}, {0}}, table = {0};
    struct ArrowSchema *like_p, *like_r;
    struct ArrowArray *unused;
    int ok = 1;
    if (parts == 0) parts = 1;
    if (PyList_GET_SIZE(p_batches) == 0 || PyList_GET_SIZE(r_batches) == 0) {
        result = Py_NewRef(Py_None);
        goto finally;
    }
    if (!capsules(PyList_GET_ITEM(p_batches, 0), &like_p, &unused) ||
        !capsules(PyList_GET_ITEM(r_batches, 0), &like_r, &unused))
        goto finally;
    cols.n = PyTuple_GET_SIZE(columns);
    cols.index = calloc((size_t)cols.n + 1, sizeof(Py_ssize_t));
    cols.types = calloc((size_t)cols.n + 1, sizeof(Type));
    if (cols.index == NULL || cols.types == NULL) {
        PyErr_NoMemory();
        goto finally;
    }
    for (Py_ssize_t c = 0; c < cols.n; c++) {
        Py_ssize_t i = PyLong_AsSsize_t(PyTuple_GET_ITEM(columns, c));
        if (i == -1 && PyErr_Occurred()) goto finally;
        if (i < 0 || i >= like_p->n_children || i >= like_r->n_children ||
            !same_format(like_p->children[i], like_r->children[i]) ||
            !parse_type(like_p->children[i], &cols.types[c])) {
            cols.n = c;
            result = Py_NewRef(Py_None);
            goto finally;
        }
        cols.index[c] = i;
    }
    for (int side = 0; side < 2; side++) {
        int read = read_side(side ? r_batches : p_batches, &cols, like_p, &sides[side]);
        if (read != 1) {
            if (read == -1) result = Py_NewRef(Py_None);
            goto finally;
        }
        if (sides[side].rows >= (int64_t)UINT32_MAX) {
            result = Py_NewRef(Py_None);
            goto finally;
        }
        done[side] = calloc((size_t)sides[side].rows / 8 + 1, 1); /* a bit a row */
        if (done[side] == NULL) {
            PyErr_NoMemory();
            goto finally;
        }
    }
    Py_BEGIN_ALLOW_THREADS
    for (int side = 0; side < 2 && ok == 1; side++) {
        ok = open_parts(&routed, parts, folder, side);
        if (ok == 1) ok = route_side(&sides[side], &cols, &routed, (uint64_t)hash_mask);
        close_parts(&routed);
    }
    for (uint32_t part = 0; part < parts; part++) {
        if (limit && ok == 1 && ((unsigned long long)part_size(folder, 0, part) > limit ||
                                 (unsigned long long)part_size(folder, 1, part) > limit)) {
            ok = count_part(folder, part, done[0], done[1], (size_t)limit);
            continue;
        }
        /* every file is read, so that every one is removed */
        for (int side = 0; side < 2; side++) {
            int read = read_part(folder, side, part, &held[side]);
            if (ok == 1) ok = read;
        }
        if (ok == 1 && !pair_part(&held[0], &held[1], done[0], done[1], &table)) ok = 0;
    }
    Py_END_ALLOW_THREADS
    if (ok != 1) {
        if (ok == 0) PyErr_NoMemory();
        else PyErr_SetFromErrno(PyExc_OSError);
        goto finally;
    }
    PyObject *p_left = left_rows(done[0], sides[0].rows);
    PyObject *r_left = p_left == NULL ? NULL : left_rows(done[1], sides[1].rows);
    if (r_left != NULL) result = PyTuple_Pack(2, p_left, r_left);
    Py_XDECREF(p_left);
    Py_XDECREF(r_left);
finally:
    free(table.at);
    for (int side = 0; side < 2; side++) {
        free(done[side]);
        free(held[side].at);
        free_side(&sides[side], &cols);
    }
    for (Py_ssize_t c = 0; c < cols.n; c++) free_type(&cols.types[c]);
    free(cols.types);
    free(cols.index);
    return result;
}

/* -- the order of each map's entries by key ------------------------------------------------ */
typedef struct Keys {
    int kind;                /* K_INT, K_UINT, K_BIN32, K_BIN64 */
    int64_t width;
    const uint8_t *values;   /* numbers, or offsets */
    const uint8_t *bytes;    /* of a binary */
    int64_t off;
} Keys;

/* key a against key b (indices of the keys array): <0, 0, >0, as Arrow's sort orders them
   (numbers by value, strings and binaries byte for byte, a prefix first) */
static inline int key_cmp(const Keys *k, int64_t a, int64_t b) {
    a += k->off;
    b += k->off;
    switch (k->kind) {
    case K_INT: {
        int64_t x, y;
        switch (k->width) {
        case 1: x = ((const int8_t *)k->values)[a]; y = ((const int8_t *)k->values)[b]; break;
        case 2: x = ((const int16_t *)k->values)[a]; y = ((const int16_t *)k->values)[b]; break;
        case 4: x = ((const int32_t *)k->values)[a]; y = ((const int32_t *)k->values)[b]; break;
        default: x = ((const int64_t *)k->values)[a]; y = ((const int64_t *)k->values)[b]; break;
        }
        return (x > y) - (x < y);
    }
    case K_UINT: {
        uint64_t x, y;
        switch (k->width) {
        case 1: x = ((const uint8_t *)k->values)[a]; y = ((const uint8_t *)k->values)[b]; break;
        case 2: x = ((const uint16_t *)k->values)[a]; y = ((const uint16_t *)k->values)[b]; break;
        case 4: x = ((const uint32_t *)k->values)[a]; y = ((const uint32_t *)k->values)[b]; break;
        default: x = ((const uint64_t *)k->values)[a]; y = ((const uint64_t *)k->values)[b]; break;
        }
        return (x > y) - (x < y);
    }
    default: {
        int64_t sa, na, sb, nb;
        if (k->kind == K_BIN32) {
            const int32_t *o = (const int32_t *)k->values;
            sa = o[a]; na = o[a + 1] - sa; sb = o[b]; nb = o[b + 1] - sb;
        } else {
            const int64_t *o = (const int64_t *)k->values;
            sa = o[a]; na = o[a + 1] - sa; sb = o[b]; nb = o[b + 1] - sb;
        }
        int64_t common = na < nb ? na : nb;
        const uint8_t *x = k->bytes + sa, *y = k->bytes + sb;
        if (common > 16) {
            int c = memcmp(x, y, (size_t)common);
            if (c) return c;
        } else {
            for (int64_t i = 0; i < common; i++)
                if (x[i] != y[i]) return x[i] < y[i] ? -1 : 1;
        }
        return (na > nb) - (na < nb);
    }
    }
}

/* sorts idx[0..n) by key, stably (equal keys keep their order); tmp holds n */
static void sort_entries(const Keys *k, int64_t *idx, int64_t *tmp, int64_t n) {
    if (n <= 16) {
        for (int64_t i = 1; i < n; i++) {
            int64_t x = idx[i], j = i;
            while (j > 0 && key_cmp(k, idx[j - 1], x) > 0) {
                idx[j] = idx[j - 1];
                j--;
            }
            idx[j] = x;
        }
        return;
    }
    int64_t half = n / 2;
    sort_entries(k, idx, tmp, half);
    sort_entries(k, idx + half, tmp, n - half);
    if (key_cmp(k, idx[half - 1], idx[half]) <= 0) return;
    memcpy(tmp, idx, (size_t)half * sizeof(int64_t));
    int64_t a = 0, b = half, out = 0;
    while (a < half && b < n) idx[out++] = key_cmp(k, idx[b], tmp[a]) < 0 ? idx[b++] : tmp[a++];
    while (a < half) idx[out++] = tmp[a++];
}

/* key_order(keys, offsets): keys and offsets (int32 or int64, one more than the maps, the
   first 0) as (schema, array) capsule pairs; the entries' order that sorts each map's
   entries by key, stably (int64 bytes); b"" when they are in that order already; None when
   the keys' type is not read here or holds a NULL. */
static PyObject *key_order(PyObject *self, PyObject *args) {
    PyObject *keys_pair, *offsets_pair;
    if (!PyArg_ParseTuple(args, "OO", &keys_pair, &offsets_pair)) return NULL;
    struct ArrowSchema *ks, *os;
    struct ArrowArray *ka, *oa;
    if (!capsules(keys_pair, &ks, &ka) || !capsules(offsets_pair, &os, &oa)) return NULL;
    Type t;
    if (ks->dictionary != NULL || ka->null_count != 0 || ka->n_buffers < 2 ||
        !parse_type(ks, &t))
        Py_RETURN_NONE;
    int plain = !strcmp(ks->format, "c") || !strcmp(ks->format, "s") ||
                !strcmp(ks->format, "i") || !strcmp(ks->format, "l") || t.kind == K_UINT ||
                t.kind == K_BIN32 || t.kind == K_BIN64;
    free_type(&t);
    if (!plain || (strcmp(os->format, "i") && strcmp(os->format, "l")) || oa->n_buffers < 2 ||
        oa->null_count != 0 || oa->length < 1)
        Py_RETURN_NONE;
    Keys k = {t.kind, t.width, (const uint8_t *)ka->buffers[1], NULL, ka->offset};
    if (t.kind == K_BIN32 || t.kind == K_BIN64) {
        if (ka->n_buffers < 3) Py_RETURN_NONE;
        k.bytes = (const uint8_t *)ka->buffers[2];
    }
    int wide = os->format[0] == 'l';
    const void *ob = oa->buffers[1];
    int64_t maps = oa->length - 1, at = oa->offset;
#define OFFSET(i) (wide ? ((const int64_t *)ob)[at + (i)] : (int64_t)((const int32_t *)ob)[at + (i)])
    int64_t n = OFFSET(maps) - OFFSET(0);
    if (OFFSET(0) != 0 || n > ka->length) Py_RETURN_NONE;
    int ordered = 1;
    for (int64_t m = 0; m < maps && ordered; m++)
        for (int64_t e = OFFSET(m) + 1; e < OFFSET(m + 1); e++)
            if (key_cmp(&k, e - 1, e) > 0) { ordered = 0; break; }
    if (ordered) return PyBytes_FromStringAndSize(NULL, 0);
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(n * 8));
    if (out == NULL) return NULL;
    int64_t *idx = (int64_t *)PyBytes_AS_STRING(out);
    int64_t longest = 0;
    for (int64_t m = 0; m < maps; m++)
        if (OFFSET(m + 1) - OFFSET(m) > longest) longest = OFFSET(m + 1) - OFFSET(m);
    int64_t *tmp = malloc((size_t)(longest / 2 + 1) * sizeof(int64_t));
    if (tmp == NULL) {
        Py_DECREF(out);
        return PyErr_NoMemory();
    }
    for (int64_t e = 0; e < n; e++) idx[e] = e;
    for (int64_t m = 0; m < maps; m++) {
        int64_t start = OFFSET(m), stop = OFFSET(m + 1);
        if (stop - start > 1) sort_entries(&k, idx + start, tmp, stop - start);
    }
#undef OFFSET
    free(tmp);
    return out;
}

static PyMethodDef module_methods[] = {
    {"prove", prove, METH_VARARGS,
     "prove(primary, reference, columns, folder, parts, hash_mask[, limit]): the rows of each "
     "side "
     "left without an equal partner (int64 bytes), or None when a column's type is not read "
     "here; see gateway/verify/row_match.py"},
    {"key_order", key_order, METH_VARARGS,
     "key_order(keys, offsets): the order sorting each map's entries by key (int64 bytes), "
     "b'' when already so, or None when the keys' type is not read here; see "
     "gateway/verify/compare_types.py"},
    {NULL},
};

static struct PyModuleDef moduledef = {PyModuleDef_HEAD_INIT, "_row_match",
                                       "Rows of two Arrow answers paired by hash, proven by value",
                                       -1, module_methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__row_match(void) { return PyModule_Create(&moduledef); }
