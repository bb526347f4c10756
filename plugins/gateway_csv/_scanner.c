/*
 * gateway_csv._scanner: the compiled CSV scanner behind the csv engine.
 *
 * A File memory-maps a CSV file (read only, never copied to the heap).
 * scan() walks the rows of one byte range of it with the GIL released:
 * it tokenizes only up to the last column the query needs, skips the rest of
 * each row with memchr (checking the field count on the way), applies a
 * conjunction of simple filters, and then either updates a hash table of
 * groups (AGG mode, memory bounded by the number of groups) or appends the
 * needed columns to Arrow-layout buffers (COLUMNS mode).
 *
 * Chunking is speculative: the caller guesses that a chunk starts after the
 * first newline past its byte boundary; a scan reports where its last row
 * ended, and the caller rescans a chunk whose guess was wrong (it started
 * inside a quoted field). Errors are returned, not raised, so a misaligned
 * speculative chunk's errors can be discarded.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_mapfile.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

#ifndef _WIN32
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#else
#define sched_yield() ((void)0) /* one thread writes an export there (export_all) */
#endif

enum { K_STR = 0, K_INT = 1, K_FLOAT = 2, K_TS = 3, K_BOOL = 4, K_DATE = 5, K_TSTZ = 6 };
enum { OP_EQ = 0, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_ISNULL, OP_NOTNULL };
/* group key functions; F_TRUNC_* keep a temporal value truncated to a unit (the key
 * strftime, date_part and date_trunc are computed from after the scan) */
enum { F_IDENT = 0, F_YEAR, F_MONTH, F_DAY, F_HOUR, F_ROUND,
       F_TRUNC_YEAR, F_TRUNC_MONTH, F_TRUNC_DAY, F_TRUNC_HOUR, F_TRUNC_MINUTE, F_TRUNC_SECOND };
enum { A_COUNT_STAR = 0, A_COUNT, A_SUM, A_AVG, A_MIN, A_MAX };
/* DuckDB's algebraic aggregates of doubles (see "statistical aggregates" below); A_COVAR_SAMP,
 * A_COVAR_POP and A_CORR take two columns (Agg.slot2) */
enum { A_VAR_SAMP = A_MAX + 1, A_VAR_POP, A_STDDEV_SAMP, A_STDDEV_POP, A_COVAR_SAMP, A_COVAR_POP, A_CORR };
#define IS_STATISTIC(fn) ((fn) >= A_VAR_SAMP && (fn) <= A_CORR)
#define IS_BINARY(fn) ((fn) >= A_COVAR_SAMP && (fn) <= A_CORR)
/* the cells (24 bytes each) an aggregate's state takes in a group's record (stats_add) */
#define AGG_CELLS(fn) ((fn) == A_CORR ? 3 : IS_BINARY(fn) ? 2 : 1)
/* holistic aggregates (h39h), after the statistics: a group's values are held (see
 * "holistic aggregates" below); A_TOP's parameter is k | desc << 8 | nulls_first << 9 */
enum { A_MEDIAN = A_CORR + 1, A_TOP };
#define IS_HELD(fn) ((fn) == A_MEDIAN || (fn) == A_TOP)
enum { E_NONE = 0, E_RAGGED, E_QUOTE, E_TYPE, E_UTF8, E_AFTER_QUOTE, E_CHANGED, E_WIDE };

static const char *error_names[] = {"", "ragged", "unterminated_quote", "type", "utf8", "after_quote", "changed",
                                    "wide"};

#define RELEASE_EVERY (8u << 20)
/* A file read in by read-ahead sits in 2 MiB folios, which a mapping maps whole
 * (one page-table entry each, FilePmdMapped): touching the first byte of one
 * maps all of it, and a release that covers part of it leaves the rest mapped. */
#define HUGE_FOLIO ((int64_t)2 << 20)
#define MAX_SLOTS 2048 /* columns one scan reads */
#define MAX_KEYS 64    /* group keys, and aggregates, of one scan */
#define TOP_MAX 255    /* the most values a top-k aggregate (A_TOP) keeps */

/* ------------------------------------------------------------------ File */

typedef struct {
    PyObject_HEAD
    MapFile map;
    int busy;          /* scans running (changed with the GIL held) */
    int close_pending; /* close() came while scans ran: the last one unmaps */
} FileObject;

static void file_release(FileObject *self) {
    mapfile_close(&self->map);
    self->close_pending = 0;
}

static PyObject *File_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    FileObject *self = (FileObject *)PyType_GenericNew(type, args, kw);
    if (self) mapfile_init(&self->map); /* zeroed memory would say fd 0 */
    return (PyObject *)self;
}

static void File_dealloc(FileObject *self) {
    mapfile_close(&self->map);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int File_init(FileObject *self, PyObject *args, PyObject *kw) {
    PyObject *pathobj;
    if (self->busy) {
        PyErr_SetString(PyExc_ValueError, "the file is in use (a scan or a view of it)");
        return -1;
    }
    mapfile_close(&self->map); /* __init__ called twice: drop the first mapping */
    if (!PyArg_ParseTuple(args, "O&", PyUnicode_FSConverter, &pathobj)) return -1;
    int err;
    Py_BEGIN_ALLOW_THREADS
    err = mapfile_open(&self->map, PyBytes_AS_STRING(pathobj));
    Py_END_ALLOW_THREADS
    if (err) {
        errno = err;
        PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, pathobj);
        Py_DECREF(pathobj);
        return -1;
    }
    Py_DECREF(pathobj);
    if (self->map.size > PY_SSIZE_T_MAX) {
        mapfile_close(&self->map);
        PyErr_SetString(PyExc_OverflowError, "the file is larger than this platform can map");
        return -1;
    }
    return 0;
}

/* pread, so that looking at the head of the file or a chunk boundary never
 * faults pages of the mapping in. */
static PyObject *File_pread(FileObject *self, PyObject *args) {
    Py_ssize_t offset, n;
    if (!PyArg_ParseTuple(args, "nn", &offset, &n)) return NULL;
    if (offset < 0 || n < 0) return PyErr_Format(PyExc_ValueError, "negative offset or length");
    if (!mapfile_is_open(&self->map)) return PyErr_Format(PyExc_ValueError, "the file is closed");
    Py_ssize_t size = (Py_ssize_t)self->map.size;
    if (offset >= size) return PyBytes_FromStringAndSize("", 0);
    if (n > size - offset) n = size - offset;
    PyObject *out = PyBytes_FromStringAndSize(NULL, n);
    if (!out) return NULL;
    int64_t got = 0;
    int err;
    Py_BEGIN_ALLOW_THREADS
    err = mapfile_pread(&self->map, PyBytes_AS_STRING(out), offset, n, &got);
    Py_END_ALLOW_THREADS
    if (err) {
        Py_DECREF(out);
        errno = err;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    if (got < n && _PyBytes_Resize(&out, (Py_ssize_t)got) < 0) return NULL;
    return out;
}

static PyObject *File_close(FileObject *self, PyObject *unused) {
    if (self->busy) self->close_pending = 1;
    else file_release(self);
    Py_RETURN_NONE;
}

static PyObject *File_get_size(FileObject *self, void *c) { return PyLong_FromSsize_t((Py_ssize_t)self->map.size); }

/* pread_into(buffer, offset) -> bytes read into a writable buffer (0 at the end
 * of the file), through the file and not the mapping, like pread: a file cut
 * short meanwhile reads short instead of faulting (SIGBUS) outside a scan's
 * guard. The caller reuses one small buffer, not 2,048 pages of new memory for
 * an 8 MiB head. */
static PyObject *File_pread_into(FileObject *self, PyObject *args) {
    Py_buffer b;
    Py_ssize_t offset;
    if (!PyArg_ParseTuple(args, "w*n", &b, &offset)) return NULL;
    if (offset < 0) {
        PyBuffer_Release(&b);
        return PyErr_Format(PyExc_ValueError, "negative offset");
    }
    if (!mapfile_is_open(&self->map) || self->close_pending) {
        PyBuffer_Release(&b);
        return PyErr_Format(PyExc_ValueError, "the file is closed");
    }
    Py_ssize_t size = (Py_ssize_t)self->map.size, n = b.len;
    if (offset >= size) n = 0;
    else if (n > size - offset) n = size - offset;
    int64_t got = 0;
    int err = 0;
    self->busy++;
    Py_BEGIN_ALLOW_THREADS
    if (n) err = mapfile_pread(&self->map, (char *)b.buf, offset, n, &got);
    Py_END_ALLOW_THREADS
    self->busy--;
    if (!self->busy && self->close_pending) file_release(self);
    PyBuffer_Release(&b);
    if (err) {
        errno = err;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    return PyLong_FromLongLong((long long)got);
}

/* newlines(n) -> how many LF bytes the first n bytes hold (read as pread_into
 * reads, in blocks; a file cut short counts what is left) */
static PyObject *File_newlines(FileObject *self, PyObject *args) {
    enum { BLOCK = 256 << 10 };
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "n", &n)) return NULL;
    if (n < 0) return PyErr_Format(PyExc_ValueError, "negative length");
    if (!mapfile_is_open(&self->map) || self->close_pending) return PyErr_Format(PyExc_ValueError, "the file is closed");
    if (n > (Py_ssize_t)self->map.size) n = (Py_ssize_t)self->map.size;
    char *block = malloc(BLOCK);
    if (!block) return PyErr_NoMemory();
    Py_ssize_t count = 0;
    int err = 0;
    self->busy++;
    Py_BEGIN_ALLOW_THREADS
    int64_t at = 0;
    while (at < n) {
        int64_t got = 0, want = n - at < BLOCK ? n - at : BLOCK;
        if ((err = mapfile_pread(&self->map, block, at, want, &got)) != 0 || got == 0) break;
        for (const char *p = block, *end = block + got; (p = memchr(p, '\n', (size_t)(end - p))) != NULL; p++)
            count++;
        at += got;
    }
    Py_END_ALLOW_THREADS
    self->busy--;
    if (!self->busy && self->close_pending) file_release(self);
    free(block);
    if (err) {
        errno = err;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    return PyLong_FromSsize_t(count);
}

static PyMethodDef File_methods[] = {
    {"pread", (PyCFunction)File_pread, METH_VARARGS, "pread(offset, n) -> bytes, without touching the mapping"},
    {"newlines", (PyCFunction)File_newlines, METH_VARARGS, "newlines(n) -> LF bytes in the first n bytes"},
    {"pread_into", (PyCFunction)File_pread_into, METH_VARARGS, "pread_into(buffer, offset) -> bytes read into it"},
    {"close", (PyCFunction)File_close, METH_NOARGS, "unmap and close (after the running scans end)"},
    {NULL},
};
static PyGetSetDef File_getset[] = {{"size", (getter)File_get_size, NULL, "file size in bytes", NULL}, {NULL}};

static PyTypeObject FileType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "gateway_csv._scanner.File",
    .tp_basicsize = sizeof(FileObject),
    .tp_dealloc = (destructor)File_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "File(path): a read-only memory map of one CSV file",
    .tp_methods = File_methods,
    .tp_getset = File_getset,
    .tp_init = (initproc)File_init,
    .tp_new = File_new,
};

/* --------------------------------------------------------------- buffers */

typedef struct {
    char *p;
    size_t len, cap;
} Buf;

static int buf_reserve(Buf *b, size_t extra) {
    if (b->len + extra <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}
static int buf_put(Buf *b, const void *src, size_t n) {
    if (buf_reserve(b, n)) return -1;
    memcpy(b->p + b->len, src, n);
    b->len += n;
    return 0;
}

static PyObject *bytes_of(Buf *b) { return PyBytes_FromStringAndSize(b->p ? b->p : "", (Py_ssize_t)b->len); }

/* --------------------------------------------------------------- parsing */

typedef struct {
    int is_null;
    int64_t i;
    double f;
    const char *s;
    size_t n;
} Val;

static const double pow10_tab[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
                                   1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
/* 5^q for q = -27..0 as fast_float's power_of_five_128 holds them: the 128 bits from the
 * first one set, rounded up (q < 0), made by its script/table_generation.py's formula */
static const uint64_t pow5_128[28][2] = {
    {0x9e74d1b791e07e48ull, 0x775ea264cf55347eull}, /* 5^-27 */
    {0xc612062576589ddaull, 0x95364afe032a819eull}, /* 5^-26 */
    {0xf79687aed3eec551ull, 0x3a83ddbd83f52205ull}, /* 5^-25 */
    {0x9abe14cd44753b52ull, 0xc4926a9672793543ull}, /* 5^-24 */
    {0xc16d9a0095928a27ull, 0x75b7053c0f178294ull}, /* 5^-23 */
    {0xf1c90080baf72cb1ull, 0x5324c68b12dd6339ull}, /* 5^-22 */
    {0x971da05074da7beeull, 0xd3f6fc16ebca5e04ull}, /* 5^-21 */
    {0xbce5086492111aeaull, 0x88f4bb1ca6bcf585ull}, /* 5^-20 */
    {0xec1e4a7db69561a5ull, 0x2b31e9e3d06c32e6ull}, /* 5^-19 */
    {0x9392ee8e921d5d07ull, 0x3aff322e62439fd0ull}, /* 5^-18 */
    {0xb877aa3236a4b449ull, 0x09befeb9fad487c3ull}, /* 5^-17 */
    {0xe69594bec44de15bull, 0x4c2ebe687989a9b4ull}, /* 5^-16 */
    {0x901d7cf73ab0acd9ull, 0x0f9d37014bf60a11ull}, /* 5^-15 */
    {0xb424dc35095cd80full, 0x538484c19ef38c95ull}, /* 5^-14 */
    {0xe12e13424bb40e13ull, 0x2865a5f206b06fbaull}, /* 5^-13 */
    {0x8cbccc096f5088cbull, 0xf93f87b7442e45d4ull}, /* 5^-12 */
    {0xafebff0bcb24aafeull, 0xf78f69a51539d749ull}, /* 5^-11 */
    {0xdbe6fecebdedd5beull, 0xb573440e5a884d1cull}, /* 5^-10 */
    {0x89705f4136b4a597ull, 0x31680a88f8953031ull}, /* 5^-9 */
    {0xabcc77118461cefcull, 0xfdc20d2b36ba7c3eull}, /* 5^-8 */
    {0xd6bf94d5e57a42bcull, 0x3d32907604691b4dull}, /* 5^-7 */
    {0x8637bd05af6c69b5ull, 0xa63f9a49c2c1b110ull}, /* 5^-6 */
    {0xa7c5ac471b478423ull, 0x0fcf80dc33721d54ull}, /* 5^-5 */
    {0xd1b71758e219652bull, 0xd3c36113404ea4a9ull}, /* 5^-4 */
    {0x83126e978d4fdf3bull, 0x645a1cac083126eaull}, /* 5^-3 */
    {0xa3d70a3d70a3d70aull, 0x3d70a3d70a3d70a4ull}, /* 5^-2 */
    {0xccccccccccccccccull, 0xcccccccccccccccdull}, /* 5^-1 */
    {0x8000000000000000ull, 0x0000000000000000ull}, /* 5^0 */
};

/* The double nearest w * 10^-frac (w not 0, at most 19 digits, so exact; frac at most
 * 27), rounded to even: Eisel and Lemire's algorithm as fast_float computes it
 * (compute_float, decimal_to_binary.h), proven never to need a fallback for such a w
 * (Mushtak and Lemire, "Fast number parsing without fallback", 2023). Two 64-bit
 * products and no division, where a mantissa past 2^53 (h2o's v3 has 15-17 digits) took
 * an x87 long double's division and strtod for the ties. */
static inline double eisel_lemire(uint64_t w, int frac) {
    const int q = -frac;
    const int lz = __builtin_clzll(w);
    w <<= lz;
    const uint64_t *t = pow5_128[27 - frac];
    unsigned __int128 first = (unsigned __int128)w * t[0];
    uint64_t hi = (uint64_t)(first >> 64), lo = (uint64_t)first;
    if ((hi & 0x1FF) == 0x1FF) { /* the product's bits below the 55 kept may carry: add w * t[1]'s */
        uint64_t second = (uint64_t)(((unsigned __int128)w * t[1]) >> 64);
        lo += second;
        if (second > lo) hi++;
    }
    const int upperbit = (int)(hi >> 63), shift = upperbit + 64 - 52 - 3;
    uint64_t mantissa = hi >> shift;
    /* fast_float's power(q) = floor(q * log2(10)) + 63, less minimum_exponent (-1023) */
    int64_t power2 = (((152170 + 65536) * (int64_t)q) >> 16) + 63 + upperbit - lz + 1023;
    /* exactly halfway between two doubles (possible only for q in -4..23): to even */
    if (lo <= 1 && q >= -4 && (mantissa & 3) == 1 && (mantissa << shift) == hi) mantissa &= ~(uint64_t)1;
    mantissa += mantissa & 1;
    mantissa >>= 1;
    if (mantissa >= (uint64_t)2 << 52) {
        mantissa = (uint64_t)1 << 52;
        power2++;
    }
    mantissa &= ~((uint64_t)1 << 52);
    uint64_t bits = mantissa | (uint64_t)power2 << 52;
    double d;
    memcpy(&d, &bits, 8);
    return d;
}

/* DuckDB's avg of integers. Grouped (IntegerAverageOperationHugeint): the HUGEINT sum made
 * a long double (exactly, to 64 bits), divided by the count as a long double, the quotient
 * then rounded to a double. Without GROUP BY, DuckDB 2.0.1 divides the sum made a double
 * by the count (seen over read_csv: 23 of 23 sums where the two differ, fitting BIGINT or
 * not). Where long double is a double (no x87) the grouped division is a double's too,
 * which can differ from DuckDB's in the last bit past 2^53. */
static inline double int_average(__int128 sum, int64_t n, int grouped) {
#if (defined(__x86_64__) || defined(__i386__)) && LDBL_MANT_DIG == 64
    if (grouped) return (double)((long double)sum / (long double)n);
#endif
    (void)grouped;
    return (double)sum / (double)n;
}

static void trim_spaces(const char **s, size_t *n) {
    while (*n && (**s == ' ' || **s == '\t')) (*s)++, (*n)--;
    while (*n && ((*s)[*n - 1] == ' ' || (*s)[*n - 1] == '\t')) (*n)--;
}

static int parse_int(const char *s, size_t n, int64_t *out) {
    trim_spaces(&s, &n);
    if (!n) return -1;
    int neg = 0;
    size_t i = 0;
    if (s[0] == '-' || s[0] == '+') neg = s[0] == '-', i = 1;
    if (i == n) return -1;
    uint64_t v = 0;
    if (n - i <= 18) { /* no overflow to check: below 10^18 */
        for (; i < n; i++) {
            unsigned d = (unsigned char)s[i] - '0';
            if (d > 9) return -1;
            v = v * 10 + d;
        }
        *out = neg ? (int64_t)(0 - v) : (int64_t)v;
        return 0;
    }
    for (; i < n; i++) {
        unsigned d = (unsigned char)s[i] - '0';
        if (d > 9) return -1;
        if (v > (UINT64_MAX - d) / 10) return -1;
        v = v * 10 + d;
    }
    if (neg) {
        if (v > (uint64_t)INT64_MAX + 1) return -1;
        *out = (int64_t)(0 - v);
    } else {
        if (v > (uint64_t)INT64_MAX) return -1;
        *out = (int64_t)v;
    }
    return 0;
}

static const uint64_t pow10_u64[] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000};

/* The run of up to 8 digits at p, in a field [s, stop) that may be read up to limit: its
 * length, and its value in *v. Eight bytes read at once (at p, the bytes past stop made
 * zero, where limit allows; or the field's last eight shifted down), the run's end found
 * and its digits combined by SWAR: no branch on each digit (h2o's v3, 64.14684: the digit
 * loops' mispredicted exits were most of a DOUBLE column's parse). A field shorter than 8
 * bytes at the end of what may be read is read digit by digit. */
static inline int digits8(const char *s, const char *p, const char *stop, const char *limit, uint64_t *v) {
    size_t left = (size_t)(stop - p);
    uint64_t w;
    if (left >= 8) {
        memcpy(&w, p, 8);
    } else if (limit - p >= 8) { /* lineitem's 0.04: the bytes past the field zeroed */
        memcpy(&w, p, 8);
        w = left ? w & (~0ull >> (8 * (8 - left))) : 0;
    } else if (stop - s >= 8) {
        memcpy(&w, stop - 8, 8);
        w = left ? w >> (8 * (8 - left)) : 0;
    } else {
        uint64_t x = 0;
        int k = 0;
        for (unsigned d; k < (int)left && (d = (unsigned char)p[k] - '0') <= 9; k++) x = x * 10 + d;
        *v = x;
        return k;
    }
    /* a byte is a digit when its high nibble is 3 and adding 6 keeps it so (a carry out
     * of a byte of 0xFA or more reaches only bytes past a non-digit) */
    uint64_t other = ((w & 0xF0F0F0F0F0F0F0F0ull) ^ 0x3030303030303030ull) |
                     (((w + 0x0606060606060606ull) & 0xF0F0F0F0F0F0F0F0ull) ^ 0x3030303030303030ull);
    int k = other ? __builtin_ctzll(other) >> 3 : 8;
    if (k == 0) {
        *v = 0;
        return 0;
    }
    /* the run's digits moved to the top bytes (the zeros below them leading zeros; a
     * borrow of the bytes past the run only runs upward, out of the word) */
    uint64_t d = (w - 0x3030303030303030ull) << (8 * (8 - k));
    d = (d * 10 + (d >> 8)) & 0x00FF00FF00FF00FFull;
    d = (d * 100 + (d >> 16)) & 0x0000FFFF0000FFFFull;
    d = (d * 10000 + (d >> 32)) & 0xFFFFFFFFull;
    *v = d;
    return k;
}

/* the digits at *pp (before stop) folded into *mant (which wraps past 19 digits, as the
 * caller knows from their count); *pp moved past them */
static inline void fold_digits(const char *s, const char **pp, const char *stop, const char *limit,
                               uint64_t *mant) {
    for (;;) {
        uint64_t v;
        int k = digits8(s, *pp, stop, limit, &v);
        *mant = *mant * pow10_u64[k] + v;
        *pp += k;
        if (k < 8) return;
    }
}

/* the DOUBLE in s[0:n], whose bytes may be read (not used) up to limit (s + n at least) */
static int parse_double_at(const char *s, size_t n, const char *limit, double *out) {
    trim_spaces(&s, &n);
    if (!n) return -1;
    /* fast path: [-]digits[.digits] with at most 19 significant digits is exact */
    const char *p = s, *stop = s + n;
    int neg = 0;
    if (*p == '-' || *p == '+') neg = *p++ == '-';
    const char *digits_from = p;
    while (p < stop && *p == '0') p++; /* leading zeros are no significant digits */
    const char *significant = p;
    uint64_t mant = 0;
    fold_digits(s, &p, stop, limit, &mant);
    ptrdiff_t whole = p - digits_from, digits = p - significant, frac = 0;
    if (p < stop && *p == '.') {
        const char *from = ++p;
        fold_digits(s, &p, stop, limit, &mant);
        frac = p - from;
        digits += frac;
    }
    /* at most 19 significant digits: mant is exact (it did not wrap) */
    if (p == stop && whole + frac > 0 && digits <= 19 && frac <= 27) {
        /* below 2^53 and 10^22 both are exact doubles, and their quotient is rounded once
         * (Clinger's fast path: for lineitem's 21168.23 and 0.04 one division is cheaper than
         * Eisel-Lemire's branches, TPC-H Q1 14% less CPU); past them, Eisel-Lemire */
        double v = mant < (1ull << 53) && frac <= 22 ? (double)mant / pow10_tab[frac]
                   : mant                          ? eisel_lemire(mant, (int)frac)
                                                   : 0.0;
        *out = neg ? -v : v;
        return 0;
    }
    char tmp[128];
    if (n >= sizeof tmp) return -1;
    for (size_t k = 0; k < n; k++) {
        char c = s[k];
        if (c == 'x' || c == 'X' || c == '(' || c == ' ') return -1;
        tmp[k] = c;
    }
    tmp[n] = 0;
    char *end;
    double v = strtod(tmp, &end);
    if (end != tmp + n) return -1;
    *out = v;
    return 0;
}

static int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
    y -= m <= 2;
    const int64_t era = (y >= 0 ? y : y - 399) / 400;
    const unsigned yoe = (unsigned)(y - era * 400);
    const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d) {
    z += 719468;
    const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    const unsigned doe = (unsigned)(z - era * 146097);
    const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    const int64_t yy = (int64_t)yoe + era * 400;
    const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    const unsigned mp = (5 * doy + 2) / 153;
    *d = doy - (153 * mp + 2) / 5 + 1;
    *m = mp < 10 ? mp + 3 : mp - 9;
    *y = yy + (*m <= 2);
}

/* The year of a day number. Years 1900-2155 come from a table of the days
 * their Januaries begin (an estimate, then at most a step either way):
 * civil_from_days per row was 6% of a Q04 scan's time. */
#define YEAR_TABLE_FIRST 1900
#define YEAR_TABLE_YEARS 256
static int32_t year_starts[YEAR_TABLE_YEARS + 1];

static void year_table_init(void) {
    for (int i = 0; i <= YEAR_TABLE_YEARS; i++) year_starts[i] = (int32_t)days_from_civil(YEAR_TABLE_FIRST + i, 1, 1);
}

static inline int64_t year_of_days(int64_t days) {
    if (days >= year_starts[0] && days < year_starts[YEAR_TABLE_YEARS]) {
        int i = (int)((days - year_starts[0]) * 400 / 146097);
        while (days < year_starts[i]) i--;
        while (days >= year_starts[i + 1]) i++;
        return YEAR_TABLE_FIRST + i;
    }
    int64_t y;
    unsigned m, d;
    civil_from_days(days, &y, &m, &d);
    return y;
}

static int digits_at(const char *s, size_t n, size_t pos, int count, int *out) {
    if (pos + (size_t)count > n) return -1;
    int v = 0;
    for (int k = 0; k < count; k++) {
        unsigned dd = (unsigned char)s[pos + k] - '0';
        if (dd > 9) return -1;
        v = v * 10 + (int)dd;
    }
    *out = v;
    return 0;
}

static const unsigned char mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};

/* YYYY-MM-DD, returns position after it */
static int parse_date_part(const char *s, size_t n, int64_t *days, size_t *pos) {
    int y, m, d;
    if (digits_at(s, n, 0, 4, &y) || n < 10 || s[4] != '-' || digits_at(s, n, 5, 2, &m) || s[7] != '-' ||
        digits_at(s, n, 8, 2, &d))
        return -1;
    if (m < 1 || m > 12 || d < 1 || d > mdays[m - 1]) return -1;
    if (m == 2 && d == 29 && !((y % 4 == 0 && y % 100 != 0) || y % 400 == 0)) return -1;
    *days = days_from_civil(y, (unsigned)m, (unsigned)d);
    *pos = 10;
    return 0;
}

static int parse_date(const char *s, size_t n, int64_t *out) {
    trim_spaces(&s, &n);
    size_t pos;
    if (parse_date_part(s, n, out, &pos) || pos != n) return -1;
    return 0;
}

/* The common shape, "YYYY-MM-DD HH:MM:SS" (or with T) and nothing else, without
 * the general parser's per-digit bounds checks: 0 when parsed, -1 when the text
 * has another shape (the general parser then decides). */
static inline int parse_timestamp19(const char *s, size_t n, int64_t *out) {
    if (n != 19 || s[4] != '-' || s[7] != '-' || (s[10] != ' ' && s[10] != 'T') || s[13] != ':' ||
        s[16] != ':')
        return -1;
    static const unsigned char at[14] = {0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18};
    unsigned d[14];
    for (int k = 0; k < 14; k++) {
        d[k] = (unsigned char)s[at[k]] - '0';
        if (d[k] > 9) return -1;
    }
    int y = (int)(d[0] * 1000 + d[1] * 100 + d[2] * 10 + d[3]);
    unsigned m = d[4] * 10 + d[5], dd = d[6] * 10 + d[7];
    unsigned hh = d[8] * 10 + d[9], mm = d[10] * 10 + d[11], ss = d[12] * 10 + d[13];
    if (m < 1 || m > 12 || dd < 1 || dd > mdays[m - 1] || hh > 23 || mm > 59 || ss > 59) return -1;
    if (m == 2 && dd == 29 && !((y % 4 == 0 && y % 100 != 0) || y % 400 == 0)) return -1;
    *out = days_from_civil(y, m, dd) * 86400000000LL + ((int64_t)hh * 3600 + mm * 60 + ss) * 1000000;
    return 0;
}

/* YYYY-MM-DD[( |T)HH:MM[:SS[.ffffff]]][Z|(+|-)HH[[:]MM]] -> microseconds since the epoch */
static int parse_timestamp(const char *s, size_t n, int64_t *out, int allow_offset) {
    if (parse_timestamp19(s, n, out) == 0) return 0;
    trim_spaces(&s, &n);
    int64_t days;
    size_t p;
    if (parse_date_part(s, n, &days, &p)) return -1;
    int64_t us = 0;
    if (p < n && (s[p] == ' ' || s[p] == 'T')) {
        int hh, mm, ss = 0;
        p++;
        if (digits_at(s, n, p, 2, &hh) || p + 2 >= n || s[p + 2] != ':' || digits_at(s, n, p + 3, 2, &mm))
            return -1;
        p += 5;
        if (p < n && s[p] == ':') {
            if (digits_at(s, n, p + 1, 2, &ss)) return -1;
            p += 3;
            if (p < n && s[p] == '.') {
                p++;
                int64_t frac = 0;
                int nd = 0;
                while (p < n && s[p] >= '0' && s[p] <= '9') {
                    if (nd < 6) frac = frac * 10 + (s[p] - '0'), nd++;
                    p++;
                }
                if (nd == 0) return -1;
                while (nd < 6) frac *= 10, nd++;
                us += frac;
            }
        }
        if (hh > 23 || mm > 59 || ss > 59) return -1;
        us += ((int64_t)hh * 3600 + mm * 60 + ss) * 1000000;
        if (p < n && (s[p] == 'Z' || s[p] == '+' || s[p] == '-')) {
            if (!allow_offset) return -1;
            if (s[p] == 'Z') {
                p++;
            } else {
                int sign = s[p] == '-' ? -1 : 1, oh, om = 0;
                p++;
                if (digits_at(s, n, p, 2, &oh)) return -1;
                p += 2;
                if (p < n && s[p] == ':') p++;
                if (p < n) {
                    if (digits_at(s, n, p, 2, &om)) return -1;
                    p += 2;
                }
                us -= sign * ((int64_t)oh * 3600 + om * 60) * 1000000;
            }
        }
    }
    if (p != n) return -1;
    *out = days * 86400000000LL + us;
    return 0;
}

static int parse_bool(const char *s, size_t n, int64_t *out) {
    /* no blanks around it: DuckDB's reader and cast refuse ' true' and 'TRUE ' */
    if (n == 4 && strncasecmp(s, "true", 4) == 0) return *out = 1, 0;
    if (n == 5 && strncasecmp(s, "false", 5) == 0) return *out = 0, 0;
    if (n == 1 && (s[0] == 't' || s[0] == 'T' || s[0] == '1')) return *out = 1, 0;
    if (n == 1 && (s[0] == 'f' || s[0] == 'F' || s[0] == '0')) return *out = 0, 0;
    /* and DuckDB's cast also takes yes/no/y/n */
    if (n == 3 && strncasecmp(s, "yes", 3) == 0) return *out = 1, 0;
    if (n == 2 && strncasecmp(s, "no", 2) == 0) return *out = 0, 0;
    if (n == 1 && (s[0] == 'y' || s[0] == 'Y')) return *out = 1, 0;
    if (n == 1 && (s[0] == 'n' || s[0] == 'N')) return *out = 0, 0;
    return -1;
}

static int valid_utf8(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        if (c < 0x80) { i++; continue; }
        size_t k;
        uint32_t cp;
        if ((c & 0xE0) == 0xC0) k = 1, cp = c & 0x1F;
        else if ((c & 0xF0) == 0xE0) k = 2, cp = c & 0x0F;
        else if ((c & 0xF8) == 0xF0) k = 3, cp = c & 0x07;
        else return 0;
        for (size_t j = 1; j <= k; j++) {
            if (i + j >= n || (s[i + j] & 0xC0) != 0x80) return 0;
            cp = (cp << 6) | (s[i + j] & 0x3F);
        }
        if ((k == 1 && cp < 0x80) || (k == 2 && cp < 0x800) || (k == 3 && cp < 0x10000) || cp > 0x10FFFF ||
            (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        i += k + 1;
    }
    return 1;
}

/* --------------------------------------------------------- fast skipping */

#if defined(__SSE2__)
#include <emmintrin.h>
#define HAVE_SSE2 1
#endif

/* popcount of a 16-bit mask; __builtin_popcount is a libgcc call on baseline
 * x86-64 (no POPCNT), which showed up as 12% of a Q04 scan */
static inline int pop16(unsigned x) {
    x = x - ((x >> 1) & 0x5555u);
    x = (x & 0x3333u) + ((x >> 2) & 0x3333u);
    x = (x + (x >> 4)) & 0x0F0Fu;
    return (int)((x + (x >> 8)) & 0x1Fu);
}

/* The end of an unquoted field: its delimiter, its row's newline, or end. */
static inline const char *field_end(const char *p, const char *end, char delim) {
#ifdef HAVE_SSE2
    const __m128i vd = _mm_set1_epi8(delim), vn = _mm_set1_epi8('\n');
    while (end - p >= 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)p);
        unsigned m = (unsigned)_mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(v, vd), _mm_cmpeq_epi8(v, vn)));
        if (m) return p + __builtin_ctz(m);
        p += 16;
    }
#endif
    while (p < end && *p != delim && *p != '\n') p++;
    return p;
}

#ifdef HAVE_SSE2
/* the sum of 16 unsigned byte counters */
static inline int lane_sum(__m128i lanes) {
    __m128i s = _mm_sad_epu8(lanes, _mm_setzero_si128());
    return _mm_cvtsi128_si32(s) + _mm_cvtsi128_si32(_mm_srli_si128(s, 8));
}
#endif

/* Pass k delimiters from p (the start of a field), stopping early at a newline
 * or a quote character, which the careful scalar path must handle. Returns the
 * start of the field reached and sets *passed to the delimiters passed. */
static const char *skip_fields(const char *p, const char *end, int k, char delim, int quote, int *passed) {
    int done = 0;
    const char *field = p;
#ifdef HAVE_SSE2
    const __m128i vd = _mm_set1_epi8(delim), vn = _mm_set1_epi8('\n');
    const __m128i vq = _mm_set1_epi8(quote >= 0 ? (char)quote : '\n');
    while (end - p >= 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)p);
        unsigned md = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, vd));
        unsigned ms = (unsigned)_mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(v, vn), _mm_cmpeq_epi8(v, vq)));
        if (ms) md &= (ms & (0u - ms)) - 1; /* delimiters before the first special byte */
        int cnt = pop16(md);
        if (cnt >= k - done) {
            for (int i = 1; i < k - done; i++) md &= md - 1;
            *passed = k;
            return p + __builtin_ctz(md) + 1;
        }
        done += cnt;
        if (md) field = p + (31 - __builtin_clz(md)) + 1;
        if (ms) {
            *passed = done;
            return field;
        }
        p += 16;
    }
#endif
    for (; p < end; p++) {
        char c = *p;
        if (c == delim) {
            field = p + 1;
            if (++done == k) break;
        } else if (c == '\n' || (quote >= 0 && c == (char)quote)) {
            break;
        }
    }
    *passed = done;
    return field;
}

/* Count the delimiters from p up to the end of the row, in one pass. Returns
 * the next row's start, or NULL when a quote character comes first. */
static const char *count_to_row_end(const char *p, const char *end, char delim, int quote, int *count) {
    int n = 0;
#ifdef HAVE_SSE2
    const __m128i vd = _mm_set1_epi8(delim), vn = _mm_set1_epi8('\n');
    const __m128i vq = _mm_set1_epi8(quote >= 0 ? (char)quote : '\n');
    /* Delimiters of whole blocks are counted in 16 byte lanes (a match is -1,
     * subtracted), summed when the row ends or before a lane could overflow:
     * a popcount per block was an eighth of a Q04 scan's instructions. */
    __m128i lanes = _mm_setzero_si128();
    int blocks = 0;
    while (end - p >= 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)p);
        __m128i d = _mm_cmpeq_epi8(v, vd);
        unsigned mn = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, vn));
        unsigned mq = quote >= 0 ? (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, vq)) : 0;
        if (mn) {
            unsigned before = (mn & (0u - mn)) - 1;
            if (mq & before) return NULL;
            *count = n + lane_sum(lanes) + pop16((unsigned)_mm_movemask_epi8(d) & before);
            return p + __builtin_ctz(mn) + 1;
        }
        if (mq) return NULL;
        lanes = _mm_sub_epi8(lanes, d);
        if (++blocks == 255) {
            n += lane_sum(lanes);
            lanes = _mm_setzero_si128();
            blocks = 0;
        }
        p += 16;
    }
    n += lane_sum(lanes);
#endif
    for (; p < end; p++) {
        char c = *p;
        if (c == '\n') {
            *count = n;
            return p + 1;
        }
        if (quote >= 0 && c == (char)quote) return NULL;
        n += c == delim;
    }
    *count = n;
    return end;
}

#include "_rows.h"

#if defined(HAVE_SSE2) && defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>
#define HAVE_AVX2 1
/* AVX2 (with POPCNT, which every AVX2 processor has) versions of the two
 * loops that walk the skipped bytes of a row, chosen at import when the
 * processor has it: the build targets baseline x86-64 (SSE2). The rest of a
 * Q04 row after its last needed column was 16% of the scan's instructions. */
static int use_avx2;

#define AVX2 __attribute__((target("avx2,popcnt,pclmul")))

/* the prefix XOR of x's bits (bit i: the XOR of bits 0..i, so a byte's quote parity) as
 * one carry-less product by all ones (PCLMULQDQ, which every AVX2 processor has), not six
 * shifts and XORs (a tenth of fast_row's samples) */
AVX2 static inline uint64_t prefix_xor(uint64_t x) {
    return (uint64_t)_mm_cvtsi128_si64(_mm_clmulepi64_si128(_mm_set_epi64x(0, (long long)x), _mm_set1_epi8((char)0xFF), 0));
}

AVX2 static inline __m256i special32(__m256i v, __m256i vn, __m256i vq) {
    return _mm256_or_si256(_mm256_cmpeq_epi8(v, vn), _mm256_cmpeq_epi8(v, vq));
}

AVX2 static inline int lane_sum32(__m256i lanes) {
    __m256i s = _mm256_sad_epu8(lanes, _mm256_setzero_si256());
    __m128i t = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    return _mm_cvtsi128_si32(t) + _mm_cvtsi128_si32(_mm_srli_si128(t, 8));
}

/* skip_fields, 32 bytes a step. With quoted (the quote character is the only one that
 * escapes: Plan.quoted), a quoted field that opens at a field's start (or after one
 * blank there, with pad: quoted 2) and closes right before a delimiter within the same 64 bytes is passed
 * in register (the prefix XOR of the quote bits marks what lies inside): h2o's rows
 * quote their first three fields, where each stopped this loop and cost a call of
 * quoted_field and memchr. Anything else about a quote (one inside an unquoted field,
 * a doubled one, one closing before a newline, a field running past the 64 bytes)
 * stops at the start of its field, as a quote always did, for the careful path. */
AVX2 static const char *skip_fields_avx2(const char *p, const char *end, int k, char delim, int quote,
                                         int quoted, int *passed) {
    int done = 0;
    const char *field = p;
    const __m256i vd = _mm256_set1_epi8(delim), vn = _mm256_set1_epi8('\n');
    const __m256i vq = _mm256_set1_epi8(quote >= 0 ? (char)quote : '\n');
    if (quoted) {
        const __m256i vq2 = _mm256_set1_epi8((char)quote), vb = _mm256_set1_epi8(' ');
        uint64_t at_field = 1; /* p is a field's start */
        while (end - p >= 64) {
            __m256i a = _mm256_loadu_si256((const __m256i *)p), b = _mm256_loadu_si256((const __m256i *)(p + 32));
            uint64_t md = rows_bits32(a, b, vd), mn = rows_bits32(a, b, vn), mq = rows_bits32(a, b, vq2);
            uint64_t stop = mn;
            if (mq) {
                uint64_t inside = prefix_xor(mq), opens = mq & inside, closes = mq & ~inside;
                uint64_t starts = (md << 1) | at_field; /* fields' first bytes */
                if (quoted == 2) starts |= (rows_bits32(a, b, vb) & starts) << 1; /* or after one blank */
                stop |= (opens & ~starts) | (closes & ~(md >> 1));
                if (inside >> 63) stop |= (uint64_t)1 << (63 - __builtin_clzll(opens));
                md &= ~inside;
            }
            if (stop) md &= (stop & (0 - stop)) - 1;
            int cnt = __builtin_popcountll(md);
            if (cnt >= k - done) {
                for (int i = 1; i < k - done; i++) md &= md - 1;
                *passed = k;
                return p + __builtin_ctzll(md) + 1;
            }
            done += cnt;
            if (md) field = p + (63 - __builtin_clzll(md)) + 1;
            if (stop) {
                *passed = done;
                return field;
            }
            at_field = md >> 63;
            p += 64;
        }
        /* the rest as before, from outside quotes (a field running past a block stopped) */
    }
    /* 64 bytes a step while they last (the fields before a Q01 or Q02 row's first
     * read column span 100 to 200 bytes), then 32 */
    while (end - p >= 64) {
        __m256i a = _mm256_loadu_si256((const __m256i *)p), b = _mm256_loadu_si256((const __m256i *)(p + 32));
        uint64_t md = (uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(a, vd)) |
                      (uint64_t)(uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(b, vd)) << 32;
        uint64_t ms = (uint32_t)_mm256_movemask_epi8(special32(a, vn, vq)) |
                      (uint64_t)(uint32_t)_mm256_movemask_epi8(special32(b, vn, vq)) << 32;
        if (ms) md &= (ms & (0 - ms)) - 1;
        int cnt = __builtin_popcountll(md);
        if (cnt >= k - done) {
            for (int i = 1; i < k - done; i++) md &= md - 1;
            *passed = k;
            return p + __builtin_ctzll(md) + 1;
        }
        done += cnt;
        if (md) field = p + (63 - __builtin_clzll(md)) + 1;
        if (ms) {
            *passed = done;
            return field;
        }
        p += 64;
    }
    while (end - p >= 32) {
        __m256i v = _mm256_loadu_si256((const __m256i *)p);
        unsigned md = (unsigned)_mm256_movemask_epi8(_mm256_cmpeq_epi8(v, vd));
        unsigned ms = (unsigned)_mm256_movemask_epi8(special32(v, vn, vq));
        if (ms) md &= (ms & (0u - ms)) - 1;
        int cnt = __builtin_popcount(md);
        if (cnt >= k - done) {
            for (int i = 1; i < k - done; i++) md &= md - 1;
            *passed = k;
            return p + __builtin_ctz(md) + 1;
        }
        done += cnt;
        if (md) field = p + (31 - __builtin_clz(md)) + 1;
        if (ms) {
            *passed = done;
            return field;
        }
        p += 32;
    }
    int more;
    const char *q = skip_fields(p, end, k - done, delim, quote, &more);
    *passed = done + more;
    return more ? q : field;
}

/* count_to_row_end_avx2 from the 64 bytes at p, where a quote comes first, with
 * Plan.quoted: quoted fields that open right after a delimiter and close right before
 * one, or before the row's newline, are passed 64 bytes a step (the prefix XOR of the
 * quote bits, carried from step to step, marks what lies inside; lineitem's last field,
 * l_comment, is quoted; with pad, one blank may come before an opening quote, none after
 * a closing one here); *count has the delimiters before p and gets those passed. NULL
 * for anything else about a quote, a newline inside quotes, or the file's last 64
 * bytes: the careful path's. */
AVX2 static const char *quoted_row_end_avx2(const char *p, const char *end, char delim, int quote, int pad,
                                            int *count) {
    const __m256i vd = _mm256_set1_epi8(delim), vn = _mm256_set1_epi8('\n'), vq = _mm256_set1_epi8((char)quote);
    const __m256i vb = _mm256_set1_epi8(' ');
    uint64_t carry = 0, after_delim = 0; /* p is inside quotes; the byte before p is a delimiter */
    int n = *count;
    while (end - p > 64) {
        __m256i a = _mm256_loadu_si256((const __m256i *)p), b = _mm256_loadu_si256((const __m256i *)(p + 32));
        uint64_t md = rows_bits32(a, b, vd), mn = rows_bits32(a, b, vn), mq = rows_bits32(a, b, vq);
        uint64_t inside = prefix_xor(mq) ^ carry, nl = mn & ~inside;
        uint64_t row = nl ? (nl & (0 - nl)) - 1 : ~(uint64_t)0; /* the row's bytes here */
        uint64_t next = p[64] == delim || p[64] == '\n' ? (uint64_t)1 << 63 : 0;
        if (mn & row) return NULL; /* a newline inside quotes */
        uint64_t starts = (md << 1) | after_delim; /* fields' first bytes, or after one blank (pad) */
        if (pad) starts |= (rows_bits32(a, b, vb) & starts) << 1;
        if (mq & inside & row & ~starts || mq & ~inside & row & ~(((md | mn) >> 1) | next)) return NULL;
        n += __builtin_popcountll(md & ~inside & row);
        if (nl) {
            *count = n;
            return p + __builtin_ctzll(nl) + 1;
        }
        carry = 0 - (inside >> 63);
        after_delim = md >> 63 & ~inside >> 63;
        p += 64;
    }
    return NULL;
}

/* count_to_row_end, 64 bytes a step while none is a newline or a quote */
AVX2 static const char *count_to_row_end_avx2(const char *p, const char *end, char delim, int quote, int quoted,
                                              int *count) {
    int n = 0;
    const __m256i vd = _mm256_set1_epi8(delim), vn = _mm256_set1_epi8('\n');
    const __m256i vq = _mm256_set1_epi8(quote >= 0 ? (char)quote : '\n');
    __m256i lanes = _mm256_setzero_si256();
    int blocks = 0;
    for (;;) {
        uint64_t ms, md;
        if (end - p >= 64) {
            __m256i a = _mm256_loadu_si256((const __m256i *)p), b = _mm256_loadu_si256((const __m256i *)(p + 32));
            __m256i sa = special32(a, vn, vq), sb = special32(b, vn, vq);
            __m256i da = _mm256_cmpeq_epi8(a, vd), db = _mm256_cmpeq_epi8(b, vd);
            if (_mm256_testz_si256(_mm256_or_si256(sa, sb), _mm256_or_si256(sa, sb))) {
                lanes = _mm256_sub_epi8(lanes, _mm256_add_epi8(da, db)); /* at most 2 a lane a step */
                if (++blocks == 127) {
                    n += lane_sum32(lanes);
                    lanes = _mm256_setzero_si256();
                    blocks = 0;
                }
                p += 64;
                continue;
            }
            ms = (uint32_t)_mm256_movemask_epi8(sa) | (uint64_t)(uint32_t)_mm256_movemask_epi8(sb) << 32;
            md = (uint32_t)_mm256_movemask_epi8(da) | (uint64_t)(uint32_t)_mm256_movemask_epi8(db) << 32;
        } else {
            int rest;
            const char *next = count_to_row_end(p, end, delim, quote, &rest);
            *count = n + lane_sum32(lanes) + rest;
            return next;
        }
        int first = __builtin_ctzll(ms);
        if (p[first] != '\n') {
            if (!quoted) return NULL;
            *count = n + lane_sum32(lanes);
            return quoted_row_end_avx2(p, end, delim, quote, quoted == 2, count);
        }
        *count = n + lane_sum32(lanes) + __builtin_popcountll(md & ((1ull << first) - 1));
        return p + first + 1;
    }
}
#endif

/* ----------------------------------------------------------------- plans */

typedef struct {
    int col, kind;
} Slot;
typedef struct {
    int slot, op;
    char ctype; /* 'i', 'f', 's', 0 for null tests */
    int64_t i;
    double f;
    char *s;
    size_t n;
} Filter;
typedef struct {
    int slot, fn;
} Key;
/* A factor of an aggregate's product (Agg.factors): a DOUBLE column's value x, or
 * lit + x, lit - x, x + lit, x - lit (F_X ... F_X_MINUS) */
enum { F_X = 0, F_LIT_PLUS = 1, F_LIT_MINUS = 2, F_X_PLUS = 3, F_X_MINUS = 4 };
#define MAX_FACTORS 4
typedef struct {
    int slot, op;
    double lit;
} Factor;
typedef struct {
    int fn, slot;
    int slot2; /* a two-argument aggregate's second argument (corr(y, x): x), else -1 */
    int param; /* A_TOP's k | desc << 8 | nulls_first << 9 */
    double q;  /* A_MEDIAN's quantile (0.5: the median) */
    /* the aggregate of a product of factors, left to right ((f0 * f1) * f2, as DuckDB
     * reads l_extendedprice * (1 - l_discount) * (1 + l_tax)), NULL when one is; slot
     * is the first factor's */
    int nfactors;
    Factor factors[MAX_FACTORS];
} Agg;

typedef struct {
    char delim;
    int quote, escape;
    int comment; /* a line starting with it is skipped; -1 for none */
    int ncols;
    int trailing; /* every row ends in a delimiter: its last field, not a column, must be empty */
    int pad; /* blanks may sit around quoted fields (1, "a" ,2): skipped, as DuckDB's state machine does */
    int quoted; /* a quoted field is its quotes and doubled quotes inside, nothing else (2: and one blank
                 * may come before its opening quote, pad): the AVX2 loops may pass one in register */
    int skip_bad;
    int nnull;
    char **nulls;
    size_t *null_lens;
    uint64_t null_len_bits; /* bit n set: a null text n bytes long (bit 63: 63 or more) */
    int nslots;
    Slot slots[MAX_SLOTS];
    int nfilters;
    Filter *filters;
    int nkeys;
    Key *keys;
    int naggs;
    Agg *aggs;
} Plan;

static void plan_free(Plan *p) {
    for (int i = 0; i < p->nnull; i++) free(p->nulls[i]);
    free(p->nulls);
    free(p->null_lens);
    for (int i = 0; i < p->nfilters; i++) free(p->filters[i].s);
    free(p->filters);
    free(p->keys);
    free(p->aggs);
    memset(p, 0, sizeof *p);
}

static int bytes_dup(PyObject *o, char **out, size_t *n) {
    char *s;
    Py_ssize_t len;
    if (PyBytes_AsStringAndSize(o, &s, &len) < 0) return -1;
    *out = malloc((size_t)len + 1);
    if (!*out) return PyErr_NoMemory(), -1;
    memcpy(*out, s, (size_t)len);
    (*out)[len] = 0;
    *n = (size_t)len;
    return 0;
}

/* dialect = (delim, quote, escape, ncols, skip_bad, nulls[, comment, trailing, pad]); slots = ((col, kind), ...);
 * filters = ((slot, op, ctype, value), ...); keys = ((slot, fn), ...); aggs = ((fn, slot), ...) */
static int plan_parse(Plan *p, PyObject *dialect, PyObject *slots, PyObject *filters, PyObject *keys,
                      PyObject *aggs) {
    memset(p, 0, sizeof *p);
    int delim;
    PyObject *nulls;
    p->comment = -1;
    if (!PyArg_ParseTuple(dialect, "iiiipO!|ipp", &delim, &p->quote, &p->escape, &p->ncols, &p->skip_bad,
                          &PyTuple_Type, &nulls, &p->comment, &p->trailing, &p->pad))
        return -1;
    p->delim = (char)delim;
    p->quoted = p->quote >= 0 && (p->escape < 0 || p->escape == p->quote) && (char)p->quote != p->delim &&
                p->quote != '\n' && p->quote != '\r' && p->quote != ' ' && !(p->pad && p->delim == ' ');
    if (p->quoted && p->pad) p->quoted = 2;
    p->nnull = (int)PyTuple_GET_SIZE(nulls);
    p->nulls = calloc((size_t)p->nnull + 1, sizeof(char *));
    p->null_lens = calloc((size_t)p->nnull + 1, sizeof(size_t));
    for (int i = 0; i < p->nnull; i++)
        if (bytes_dup(PyTuple_GET_ITEM(nulls, i), &p->nulls[i], &p->null_lens[i])) return -1;
    for (int i = 0; i < p->nnull; i++) p->null_len_bits |= 1ull << (p->null_lens[i] < 63 ? p->null_lens[i] : 63);
    if (!PyTuple_Check(slots) || PyTuple_GET_SIZE(slots) > MAX_SLOTS) {
        PyErr_SetString(PyExc_ValueError, "slots must be a tuple of at most 2048 (col, kind)");
        return -1;
    }
    p->nslots = (int)PyTuple_GET_SIZE(slots);
    for (int i = 0; i < p->nslots; i++) {
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(slots, i), "ii", &p->slots[i].col, &p->slots[i].kind)) return -1;
        if (p->slots[i].col < 0 || p->slots[i].col >= p->ncols || (i && p->slots[i].col <= p->slots[i - 1].col)) {
            PyErr_SetString(PyExc_ValueError, "slot columns must be increasing and inside the row");
            return -1;
        }
    }
    if (filters != Py_None) {
        p->nfilters = (int)PyTuple_GET_SIZE(filters);
        p->filters = calloc((size_t)p->nfilters + 1, sizeof(Filter));
        for (int i = 0; i < p->nfilters; i++) {
            Filter *f = &p->filters[i];
            PyObject *value;
            int ctype;
            if (!PyArg_ParseTuple(PyTuple_GET_ITEM(filters, i), "iiCO", &f->slot, &f->op, &ctype, &value))
                return -1;
            f->ctype = (char)ctype;
            if (f->ctype == 'i') f->i = PyLong_AsLongLong(value);
            else if (f->ctype == 'f') f->f = PyFloat_AsDouble(value);
            else if (f->ctype == 's' && bytes_dup(value, &f->s, &f->n)) return -1;
            if (PyErr_Occurred()) return -1;
        }
    }
    if (keys != Py_None) {
        p->nkeys = (int)PyTuple_GET_SIZE(keys);
        p->keys = calloc((size_t)p->nkeys + 1, sizeof(Key));
        for (int i = 0; i < p->nkeys; i++)
            if (!PyArg_ParseTuple(PyTuple_GET_ITEM(keys, i), "ii", &p->keys[i].slot, &p->keys[i].fn)) return -1;
    }
    if (aggs != Py_None) {
        p->naggs = (int)PyTuple_GET_SIZE(aggs);
        p->aggs = calloc((size_t)p->naggs + 1, sizeof(Agg));
        for (int i = 0; i < p->naggs; i++) {
            Agg *ag = &p->aggs[i];
            PyObject *factors = NULL;
            ag->slot2 = -1;
            if (!PyArg_ParseTuple(PyTuple_GET_ITEM(aggs, i), "ii|O", &ag->fn, &ag->slot, &factors)) return -1;
            ag->q = 0.5;
            if (!factors) continue;
            if (PyLong_Check(factors)) { /* (fn, slot, slot2): a two-argument aggregate */
                ag->slot2 = (int)PyLong_AsLong(factors);
                if (PyErr_Occurred()) return -1;
                continue;
            }
            if (!PyTuple_Check(factors)) {
                PyErr_SetString(PyExc_TypeError, "an aggregate is (fn, slot), (fn, slot, factors), (fn, slot, slot2), "
                                                 "(A_MEDIAN, slot, (q,)) or (A_TOP, slot, (k, desc, nulls_first))");
                return -1;
            }
            if (ag->fn == A_MEDIAN) {
                if (!PyArg_ParseTuple(factors, "d", &ag->q)) return -1;
                if (!(ag->q >= 0 && ag->q <= 1)) {
                    PyErr_SetString(PyExc_ValueError, "a quantile is from 0 to 1");
                    return -1;
                }
                continue;
            }
            if (ag->fn == A_TOP) {
                int k, desc, nulls_first;
                if (!PyArg_ParseTuple(factors, "ipp", &k, &desc, &nulls_first)) return -1;
                if (k < 1 || k > TOP_MAX) {
                    PyErr_SetString(PyExc_ValueError, "a top-k aggregate keeps 1 to 255 values");
                    return -1;
                }
                ag->param = k | desc << 8 | nulls_first << 9;
                continue;
            }
            if (PyTuple_GET_SIZE(factors) < 1 || PyTuple_GET_SIZE(factors) > MAX_FACTORS) {
                PyErr_SetString(PyExc_ValueError, "an aggregate's product has 1 to 4 factors");
                return -1;
            }
            ag->nfactors = (int)PyTuple_GET_SIZE(factors);
            for (int f = 0; f < ag->nfactors; f++) {
                Factor *fa = &ag->factors[f];
                if (!PyArg_ParseTuple(PyTuple_GET_ITEM(factors, f), "iid", &fa->slot, &fa->op, &fa->lit)) return -1;
                if (fa->op < F_X || fa->op > F_X_MINUS) {
                    PyErr_SetString(PyExc_ValueError, "a factor's operation is 0 to 4");
                    return -1;
                }
            }
            ag->slot = ag->factors[0].slot;
        }
    }
    return 0;
}

/* ------------------------------------------------------------ hash table */

/* Many groups are merged partition by partition (absorb): a group's partition is
 * six bits of its hash between the index position's bits (the low ones, up to a
 * table of 2^26 slots) and the 32 bits of the index slot's tag, so neither is
 * weakened inside a partition. */
#define AGG_PARTS 64
#define PART_SHIFT 26
static inline size_t part_of(uint64_t h) { return (size_t)(h >> PART_SHIFT) & (AGG_PARTS - 1); }

/* One aggregate of one group. Each aggregate uses one of the three values:
 * isum for an integer SUM or AVG, f for any aggregate of a float, i for an
 * integer MIN or MAX (and none for the counts). Packed to 8-byte alignment: 24
 * bytes, not the 32 of __int128's alignment (a tenth of q10's 1e7 groups' bytes). */
typedef struct __attribute__((packed, aligned(8))) {
    union {
        __int128 isum;
        double f;
        int64_t i;
        double m[2]; /* a statistical aggregate's two doubles (see stats_add) */
        /* A_MEDIAN's values (int64, or a double's bits), n of them held in room for cap */
        struct {
            int64_t *v;
            uint32_t cap, extra;
        } held;
        /* A_TOP's values (room for top_room of them), and the worst one kept once it
         * was pruned (TOP_BAR): n is their count | the TOP_* bits << 32 */
        struct {
            int64_t *v;
            int64_t bar;
        } top;
        /* A_TOP's values when k <= TOP_INLINE: held in the cell itself */
        int64_t two[2];
    };
    union {
        int64_t n;
        double m2; /* in a statistic's second cell: a third double */
    };
} Cell;

/* The groups sit in one array of records, in the order they were first seen
 * (export order): a record is the group's cells, then its key. When no key is
 * a string (fixed_key), every key has the same length and lies in the record
 * itself, so a probe that finds its group touches the index slot and one
 * record (one cache line for three keys and one aggregate); otherwise the
 * record holds the key's length (4 bytes), then the key itself when it is one
 * short text (key_inline: h2o's id3, 'id0000012345', is 14 bytes: 1e5 of them
 * in an arena were a third miss per row), else its 4-byte offset in the arena,
 * where keys lie end to end (no slack: q2's 6.3M keys of 14-17 bytes). An index slot holds
 * the group number + 1 (0 = empty) in its low 32 bits and the key hash's high
 * 32 bits above, so most mismatches are rejected without reading the record. */
typedef struct {
    PyObject_HEAD
    int nkeys, naggs;
    int key_kinds[MAX_KEYS];
    int agg_fns[MAX_KEYS];
    int agg_kinds[MAX_KEYS];
    int agg_cell[MAX_KEYS];    /* each aggregate's first cell in a record (AGG_CELLS); table_layout */
    int agg_params[MAX_KEYS]; /* Agg.param of each aggregate */
    double agg_q[MAX_KEYS];   /* Agg.q of each aggregate */
    int fixed_key;
    size_t key_width;          /* the key's length when fixed_key */
    size_t key_at, stride;     /* the key's place in a record; a record's size */
    size_t cap, ngroups, gcap;
    uint64_t *index;
    char *groups;              /* gcap records, 64-byte aligned */
    uint64_t *hashes;          /* each group's hash_bytes, so nothing is hashed twice */
    Buf arena;                 /* the keys when !fixed_key, but those inline */
    size_t key_inline;         /* bytes of a key held in its record after its KeyRef */
    size_t key_bytes;          /* the bytes of every group's key, inline or not */
    /* the groups by partition (table_partition): partition p's are order[part_at[p]:part_at[p+1]] */
    uint32_t *order;
    size_t ordered;            /* the groups order covers (it is stale when ngroups differs) */
    size_t part_at[AGG_PARTS + 1];
    /* a scan whose rows are mostly distinct groups stops looking them up: each row is
     * appended as a group of its own (no index), and the groups are made distinct where
     * they are merged (absorb) or exported (table_compact) */
    int unindexed;
    /* an unindexed scan's rows in runs by partition (table_run): partition p's groups are
     * records p * run_cap on, run_len[p] of them, until table_unrun packs the runs end to
     * end, so that absorb reads each partition's groups in a row, not strewn through the
     * table (where each of q9's 1e7 records, read in partition order, was a miss) */
    int runs;
    size_t run_cap;
    uint32_t run_len[AGG_PARTS];
    int huge; /* a scan's table, probed at every row: its arrays on huge pages (table_alloc) */
    /* a merged table (the partitions): records packed 8 bytes apart, the index filled up to
     * 5/8 (1/2 elsewhere), and no hashes kept (hashes is NULL until ensure_hashes) */
    int tight;
} AggStateObject;

#define KEY_INLINE 24 /* a lone text key's bytes (its tag, length and 22 bytes) in its record */

/* set the record layout of an empty state with nkeys and naggs set: fixed-width
 * keys of key_width bytes, or (fixed == 0) keys of any length in the arena, but
 * a lone key of up to KEY_INLINE bytes in the record (more keys: the records of
 * 1e7 groups would grow by that much for keys that mostly do not fit). A table
 * probed as rows are read keeps a record of up to 64 bytes within a cache line
 * (a power of two); a merged table (tight: the partitions) packs them 8 bytes
 * apart, where 6.3M groups of 40 bytes (q2) would otherwise take 64. Each aggregate
 * takes its AGG_CELLS from agg_cell[a] on. */
static void table_layout(AggStateObject *t, int fixed, size_t key_width, int tight) {
    int cells = 0;
    for (int a = 0; a < t->naggs; a++) {
        t->agg_cell[a] = cells;
        cells += AGG_CELLS(t->agg_fns[a]);
    }
    t->tight = tight;
    t->fixed_key = fixed;
    t->key_width = fixed ? key_width : 0;
    t->key_inline = !fixed && t->nkeys == 1 ? KEY_INLINE : 0;
    /* corr's state is 8 values in its 3 cells' 9 (its third cell's count is unused):
     * when it is the last aggregate the key starts there, 8 bytes sooner (q9's 6.3M
     * groups: 50 MB less; stats_merge copies its 64 bytes, not 72) */
    t->key_at = (size_t)cells * sizeof(Cell) - (t->naggs && t->agg_fns[t->naggs - 1] == A_CORR ? 8 : 0);
    size_t size = t->key_at + (fixed ? key_width : 4 + (t->key_inline > 4 ? t->key_inline : 4));
    size_t stride = 16;
    if (tight || size > 64) stride = (size + 7) & ~(size_t)7;
    else while (stride < size) stride *= 2;
    t->stride = stride ? stride : 8;
}

static void table_free_all(AggStateObject *t);
static void held_free(AggStateObject *t);

static void AggState_dealloc(AggStateObject *self) {
    held_free(self);
    table_free_all(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static inline char *group_record(const AggStateObject *t, size_t g) { return t->groups + g * t->stride; }

static inline const char *group_key(const AggStateObject *t, size_t g, size_t *n) {
    const char *r = group_record(t, g);
    if (t->fixed_key) {
        *n = t->key_width;
        return r + t->key_at;
    }
    const char *a = r + t->key_at;
    uint32_t len, off;
    memcpy(&len, a, 4);
    *n = len;
    if (len <= t->key_inline) return a + 4;
    memcpy(&off, a + 4, 4);
    return t->arena.p + off;
}

static int arena_put(AggStateObject *t, const char *k, size_t n);

/* a new group's key bytes k[0:n] into its record r; -1 when out of memory */
static int key_store(AggStateObject *t, char *r, const char *k, size_t n) {
    if (t->fixed_key) {
        memcpy(r + t->key_at, k, n);
        return 0;
    }
    char *a = r + t->key_at;
    uint32_t len = (uint32_t)n, off = (uint32_t)t->arena.len;
    if (n <= t->key_inline) {
        memcpy(a + 4, k, n);
    } else {
        /* offsets are 4 bytes: a table holds up to 4 GiB of keys (a partition's) */
        if (n > UINT32_MAX - t->arena.len || arena_put(t, k, n)) return -1;
        memcpy(a + 4, &off, 4);
    }
    memcpy(a, &len, 4);
    t->key_bytes += n;
    return 0;
}

static inline Cell *group_cells(const AggStateObject *t, size_t g) { return (Cell *)group_record(t, g); }

static inline uint64_t hash_bytes(const char *p, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xff51afd7ed558ccdull), w = 0;
    if (n < 8) {
        memcpy(&w, p, n);
    } else {
        for (size_t i = 0; i + 8 < n; i += 8) {
            memcpy(&w, p + i, 8);
            h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
            h ^= h >> 31;
        }
        /* the last n % 8 bytes (or 8), read with the bytes before them and shifted
         * down: the final mix spreads low bits, not high ones, into the index */
        memcpy(&w, p + n - 8, 8);
        if (n % 8) w >>= 64 - 8 * (n % 8);
    }
    h = (h ^ w) * 0x94d049bb133111ebull;
    h ^= h >> 29;
    return h;
}

static inline int same_bytes(const char *a, const char *b, size_t n) {
    if (n < 8) return memcmp(a, b, n) == 0;
    uint64_t x, y;
    for (size_t i = 0; i + 8 < n; i += 8) {
        memcpy(&x, a + i, 8);
        memcpy(&y, b + i, 8);
        if (x != y) return 0;
    }
    memcpy(&x, a + n - 8, 8);
    memcpy(&y, b + n - 8, 8);
    return x == y;
}

#define HUGE_PAGE ((size_t)2 << 20)
#if defined(__linux__) && defined(MAP_ANONYMOUS) && defined(MREMAP_MAYMOVE)
#define TABLE_MAPS 1
#endif
/* A merged table's arrays (the partitions': T_MAP) from this size on are mapped from the
 * system, not taken from malloc: freed as the answer is written, their pages go back at
 * once (malloc kept an export's freed partitions resident: q10 ended at 1.9 GB for a
 * 0.7 GB answer), they grow in place or by moving page tables (mremap), not by a copy
 * that holds the old array beside the new, and the room past what is written is never
 * resident. A scan's arrays stay malloc's: made and freed chunk after chunk, mapped ones
 * were fresh pages to fault and zero each time, and unmapping them stopped every thread
 * (q2: 0.7 s more CPU); so does a partition's index, made anew at each growth (mapped,
 * its unmapping's TLB shootdowns were 13% of q2's CPU on a quiet machine). */
#define MAP_FROM ((size_t)256 << 10)
#define T_HUGE 1 /* probed at every row of a scan: on huge pages */
#define T_MAP 2  /* mapped (a merged table's) */
#define T_POOL 4 /* an unindexed scan's: kept for the next one's once freed (see pool_take) */

/* (A chunk of 1e5 groups keeps its index: there are a dozen such chunks to a query, and
 * keeping their freed arrays raised q5's peak by 40 MB for nothing.) */
static inline int table_how(const AggStateObject *t, int huge) {
    return (huge ? T_HUGE : 0) | (t->tight ? T_MAP : t->unindexed ? T_POOL : 0);
}

static size_t table_bytes(size_t n) { return (n + 4095) & ~(size_t)4095; }

/* Freed arrays of an unindexed scan's table (malloc's, from POOL_FROM bytes on), kept for
 * the next one's: a many-group query makes and frees one table per 8 MB of its file (q9: 84 of
 * 12 MB), and malloc gave each one's pages back to the system, so every scan faulted and
 * zeroed its table's pages afresh (a third of q9's page faults). Taken by the smallest
 * that holds at least the bytes asked and at most twice them; emptied by pool_release()
 * at the end of a query's scans. */
#define POOL_SLOTS 8
#define POOL_FROM ((size_t)1 << 20)
#if defined(__GNUC__) && !defined(_WIN32)
#define TABLE_POOL 1
static struct {
    void *p;
    size_t n;
} pool[POOL_SLOTS];
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;

static void *pool_take(size_t n) {
    void *p = NULL;
    pthread_mutex_lock(&pool_lock);
    int best = -1;
    for (int i = 0; i < POOL_SLOTS; i++)
        if (pool[i].p && pool[i].n >= n && pool[i].n / 2 <= n && (best < 0 || pool[i].n < pool[best].n)) best = i;
    if (best >= 0) {
        p = pool[best].p;
        pool[best].p = NULL;
    }
    pthread_mutex_unlock(&pool_lock);
    return p;
}

/* p (of n bytes) kept in an empty slot, or in place of the smallest kept array when that
 * is smaller (which is freed); 0 when p is not kept (the caller frees it) */
static int pool_put(void *p, size_t n) {
    void *out = p;
    pthread_mutex_lock(&pool_lock);
    int at = 0;
    for (int i = 1; i < POOL_SLOTS && pool[at].p; i++)
        if (!pool[i].p || pool[i].n < pool[at].n) at = i;
    if (!pool[at].p || pool[at].n < n) {
        out = pool[at].p;
        pool[at].p = p;
        pool[at].n = n;
    }
    pthread_mutex_unlock(&pool_lock);
    if (out == p) return 0;
    free(out);
    return 1;
}

/* the free memory of malloc's arenas given back to the system (glibc's
 * malloc_trim; elsewhere nothing). A many-group query's freed scan tables otherwise stay
 * resident in the arenas under its export's answer, and after it: q10 began its export
 * at 1,470 MB without, 1,250 MB with. (After each batch of chunks merged, it lowered
 * q10's peak by 130 MB, but cost q9 0.2 s of CPU faulting the pages in again.) */
static void trim_arenas(void) {
#ifdef __GLIBC__
    Py_BEGIN_ALLOW_THREADS
    malloc_trim(0);
    Py_END_ALLOW_THREADS
#endif
}
#endif

/* pool_held() -> the bytes of the arrays kept */
static PyObject *pool_held(PyObject *mod, PyObject *unused) {
    size_t n = 0;
#ifdef TABLE_POOL
    pthread_mutex_lock(&pool_lock);
    for (int i = 0; i < POOL_SLOTS; i++)
        if (pool[i].p) n += pool[i].n;
    pthread_mutex_unlock(&pool_lock);
#endif
    return PyLong_FromSize_t(n);
}

/* pool_release(): the kept arrays freed (at the end of a query's scans) */
static PyObject *pool_release(PyObject *mod, PyObject *unused) {
#ifdef TABLE_POOL
    void *held[POOL_SLOTS];
    pthread_mutex_lock(&pool_lock);
    for (int i = 0; i < POOL_SLOTS; i++) {
        held[i] = pool[i].p;
        pool[i].p = NULL;
    }
    pthread_mutex_unlock(&pool_lock);
    int freed = 0;
    for (int i = 0; i < POOL_SLOTS; i++) {
        freed |= held[i] != NULL;
        free(held[i]);
    }
    if (freed) trim_arenas(); /* a query of big scans: their freed pages too */
#endif
    Py_RETURN_NONE;
}

/* An array of a table (its index, records, hashes or key arena) of n bytes, 64-byte
 * aligned, zeroed when mapped (table_free takes n and how back). From a few megabytes
 * on, when it is probed (T_HUGE), on huge pages where the system gives them on request:
 * a probe per row into 1e5 groups' records otherwise misses the TLB at most rows, and
 * the page walk is a second miss the prefetches do not hide. (An unindexed table is only
 * appended to: there, huge pages cost their faults' zeroing and compaction, and save
 * nothing.) */
static void *table_alloc(size_t n, int how) {
#ifdef TABLE_MAPS
    if ((how & T_MAP) && n >= MAP_FROM) {
        void *p = mmap(NULL, table_bytes(n), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        return p == MAP_FAILED ? NULL : p;
    }
#endif
#ifdef MADV_HUGEPAGE
    if ((how & T_HUGE) && n >= 2 * HUGE_PAGE) {
        size_t m = (n + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
        void *p = aligned_alloc(HUGE_PAGE, m);
        if (p) madvise(p, m, MADV_HUGEPAGE);
        return p;
    }
#endif
    size_t m = (n + 63) & ~(size_t)63;
#ifdef TABLE_POOL
    if ((how & T_POOL) && m >= POOL_FROM) {
        void *p = pool_take(m);
        if (p) return p;
    }
#endif
    return aligned_alloc(64, m);
}

/* frees what table_alloc(n, how) or table_realloc(..., n, ..., how) returned */
static void table_free(void *p, size_t n, int how) {
    if (!p) return;
#ifdef TABLE_MAPS
    if ((how & T_MAP) && n >= MAP_FROM) {
        munmap(p, table_bytes(n));
        return;
    }
#endif
#ifdef TABLE_POOL
    size_t m = (n + 63) & ~(size_t)63;
    if ((how & T_POOL) && !(how & T_HUGE) && m >= POOL_FROM && pool_put(p, m)) return;
#endif
    (void)n;
    (void)how;
    free(p);
}

/* an array of n bytes holding the first `used` of p's (an array of old bytes, which is
 * freed), moved by its page tables where both are mapped; NULL when out of memory (p
 * is then kept) */
static void *table_realloc(void *p, size_t old, size_t n, size_t used, int how) {
#ifdef TABLE_MAPS
    if (p && (how & T_MAP) && old >= MAP_FROM && n >= MAP_FROM) {
        void *q = mremap(p, table_bytes(old), table_bytes(n), MREMAP_MAYMOVE);
        return q == MAP_FAILED ? NULL : q;
    }
#endif
    void *q = table_alloc(n, how);
    if (!q) return NULL;
    if (used) memcpy(q, p, used);
    table_free(p, old, how);
    return q;
}

/* a key's bytes appended to the table's arena; -1 when out of memory */
static int arena_put(AggStateObject *t, const char *k, size_t n) {
    Buf *b = &t->arena;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n) cap *= 2;
        char *p = table_realloc(b->p, b->cap, cap, b->len, table_how(t, 0));
        if (!p) return -1;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, k, n);
    b->len += n;
    return 0;
}

/* the table's arrays freed */
static void table_free_all(AggStateObject *t) {
    int how = table_how(t, 0);
    table_free(t->index, t->cap * sizeof(uint64_t), 0);
    table_free(t->groups, t->gcap * t->stride, how);
    table_free(t->hashes, t->gcap * sizeof(uint64_t), how);
    table_free(t->arena.p, t->arena.cap, how);
    free(t->order);
    t->index = NULL;
    t->groups = NULL;
    t->hashes = NULL;
    t->order = NULL;
    memset(&t->arena, 0, sizeof t->arena);
    t->cap = t->gcap = t->ngroups = t->ordered = t->key_bytes = 0;
}

/* A group's index slot: the hash's high 32 bits scaled to the index's slots (any number
 * of them), which are also the tag an index slot keeps, so the index is rebuilt from its
 * own slots (a merged table keeps no hashes) */
static inline size_t slot_of(uint64_t h, size_t cap) { return (size_t)(((h >> 32) * (uint64_t)cap) >> 32); }

/* whether the index is too full for n groups */
static inline int table_full(const AggStateObject *t, size_t n) {
    return t->tight ? n * 8 > t->cap * 5 : n * 2 > t->cap;
}

/* the index at ncap slots (more than the groups need: table_full) */
static int table_resize(AggStateObject *t, size_t ncap) {
    if (ncap > UINT32_MAX) return -1;
    int how = table_how(t, t->huge) & ~T_MAP; /* rebuilt at each growth: malloc's (unmapping stops every thread) */
    uint64_t *idx = table_alloc(ncap * sizeof(uint64_t), how);
    if (!idx) return -1;
    if (!(how & T_MAP) || ncap * sizeof(uint64_t) < MAP_FROM) memset(idx, 0, ncap * sizeof(uint64_t));
    for (size_t i = 0; i < t->cap; i++) {
        uint64_t s = t->index[i];
        if (!s) continue;
        size_t pos = slot_of(s, ncap);
        while (idx[pos])
            if (++pos == ncap) pos = 0;
        idx[pos] = s;
    }
    table_free(t->index, t->cap * sizeof(uint64_t), how);
    t->index = idx;
    t->cap = ncap;
    return 0;
}

static int table_grow(AggStateObject *t) { return table_resize(t, t->cap ? t->cap * 2 : 64); }

/* room for ng groups (the records moved by their page tables where they can be) */
static int groups_resize(AggStateObject *t, size_t ng) {
    if (ng > UINT32_MAX) return -1;
    uint64_t *hs = NULL;
    int how = table_how(t, 0);
    /* a merged table keeps no hashes, unless ensure_hashes has made them */
    if ((!t->tight || t->hashes) && !(hs = table_alloc(ng * sizeof(uint64_t), how))) return -1;
    char *gs = table_realloc(t->groups, t->gcap * t->stride, ng * t->stride, t->ngroups * t->stride,
                             table_how(t, t->huge && !t->unindexed));
    if (!gs) {
        table_free(hs, ng * sizeof(uint64_t), how);
        return -1;
    }
    if (hs && t->ngroups) memcpy(hs, t->hashes, t->ngroups * sizeof(uint64_t));
    table_free(t->hashes, t->gcap * sizeof(uint64_t), how);
    t->groups = gs;
    t->hashes = hs;
    t->gcap = ng;
    return 0;
}

static int groups_grow(AggStateObject *t) { return groups_resize(t, t->gcap ? t->gcap * 2 : 64); }

/* room for `more` groups beyond those held, without growing on the way */
static int table_reserve(AggStateObject *t, size_t more) {
    size_t want = t->ngroups + more, cap = t->cap ? t->cap : 64, gcap = t->gcap ? t->gcap : 64;
    if (t->tight) {
        /* up to 5/8 full, at least doubled (each growth reads the whole index) */
        if ((want + 1) * 8 > cap * 5) {
            size_t need = ((want + 1) * 8 / 5 + 8) & ~(size_t)7;
            cap = need > cap * 2 ? need : cap * 2;
        }
    } else {
        while ((want + 1) * 2 > cap) cap *= 2;
    }
    while (gcap < want) gcap *= 2;
    if (gcap != t->gcap && groups_resize(t, gcap)) return -1;
    if (cap != t->cap && table_resize(t, cap)) return -1;
    return 0;
}

/* each group's hash in t->hashes (a merged table keeps none); -1 when out of memory */
static int ensure_hashes(AggStateObject *t) {
    if (t->hashes || !t->ngroups) return 0;
    uint64_t *hs = table_alloc(t->gcap * sizeof(uint64_t), table_how(t, 0));
    if (!hs) return -1;
    for (size_t g = 0; g < t->ngroups; g++) {
        size_t n;
        const char *k = group_key(t, g, &n);
        hs[g] = hash_bytes(k, n);
    }
    t->hashes = hs; /* kept from now on (table_find, groups_resize) */
    return 0;
}

/* t->order: the groups by partition, in the order first seen within each */
static int table_partition(AggStateObject *t) {
    if (t->order && t->ordered == t->ngroups) return 0;
    if (ensure_hashes(t)) return -1;
    uint32_t *order = realloc(t->order, (t->ngroups ? t->ngroups : 1) * sizeof(uint32_t));
    if (!order) return -1;
    t->order = order;
    size_t at[AGG_PARTS + 1] = {0};
    for (size_t g = 0; g < t->ngroups; g++) at[part_of(t->hashes[g]) + 1]++;
    for (int p = 0; p < AGG_PARTS; p++) at[p + 1] += at[p];
    memcpy(t->part_at, at, sizeof at);
    for (size_t g = 0; g < t->ngroups; g++) order[at[part_of(t->hashes[g])]++] = (uint32_t)g;
    t->ordered = t->ngroups;
    return 0;
}

/* the runs of a run table packed end to end, in partition order (then a plain table) */
static void table_unrun(AggStateObject *t) {
    if (!t->runs) return;
    size_t at = 0;
    for (size_t p = 0; p < AGG_PARTS; p++) {
        size_t from = p * t->run_cap, n = t->run_len[p];
        if (n && from != at) {
            memmove(group_record(t, at), group_record(t, from), n * t->stride);
            memmove(&t->hashes[at], &t->hashes[from], n * sizeof(uint64_t));
        }
        at += n;
    }
    t->runs = 0;
}

/* an empty unindexed table made a run table for about `expect` rows (5% over the rows
 * Scanner._scan expects): room for each partition's share, two of its standard deviations
 * and 16 more, 4.6 deviations over the rows expected for h2o's chunks of 8 MB (a run that
 * fills makes it a plain table: table_append) */
static int table_run(AggStateObject *t, size_t expect) {
    size_t share = expect / AGG_PARTS;
    size_t cap = share + 2 * (size_t)sqrt((double)share) + 16;
    if (groups_resize(t, cap * AGG_PARTS)) return -1;
    t->runs = 1;
    t->run_cap = cap;
    memset(t->run_len, 0, sizeof t->run_len);
    return 0;
}

/* a new group of key bytes k[0:n] whose hash_bytes is h, not looked up (unindexed); NULL
 * when out of memory */
static Cell *table_append(AggStateObject *t, const char *k, size_t n, uint64_t h) {
    size_t g;
    if (t->runs) {
        size_t p = part_of(h);
        if (t->run_len[p] < t->run_cap) {
            g = p * t->run_cap + t->run_len[p]++;
            goto append;
        }
        table_unrun(t); /* rows past the estimate: appended after the packed runs */
    }
    if (t->ngroups == t->gcap && groups_grow(t)) return NULL;
    g = t->ngroups;
append:;
    char *r = group_record(t, g);
    if (key_store(t, r, k, n)) {
        if (t->runs) t->run_len[part_of(h)]--;
        return NULL;
    }
    t->hashes[g] = h;
    t->ngroups++;
    memset(r, 0, t->key_at);
    return (Cell *)r;
}

/* the group of key bytes k[0:n] whose hash_bytes is h, created if new (its cells zeroed,
 * or left for the caller to write when fresh is given: *fresh is then whether it is new);
 * NULL when out of memory */
static inline Cell *table_find_fresh(AggStateObject *t, const char *k, size_t n, uint64_t h, int *fresh) {
    uint64_t tag = h & 0xffffffff00000000ull;
    if (table_full(t, t->ngroups + 1) && table_grow(t)) return NULL;
    size_t cap = t->cap, pos = slot_of(h, cap);
    for (;;) {
        uint64_t s = t->index[pos];
        if (!s) break;
        if ((s & 0xffffffff00000000ull) == tag) {
            size_t g = (uint32_t)s - 1, m;
            const char *gk = group_key(t, g, &m);
            if (m == n && same_bytes(gk, k, n)) return group_cells(t, g);
        }
        if (++pos == cap) pos = 0;
    }
    if (t->ngroups == t->gcap && groups_grow(t)) return NULL;
    size_t g = t->ngroups;
    char *r = group_record(t, g);
    if (key_store(t, r, k, n)) return NULL;
    if (t->hashes) t->hashes[g] = h;
    t->ngroups++;
    t->index[pos] = tag | (uint64_t)(g + 1);
    if (fresh) *fresh = 1;
    else memset(r, 0, t->key_at);
    return (Cell *)r;
}

static Cell *table_find(AggStateObject *t, const char *k, size_t n, uint64_t h) {
    return table_find_fresh(t, k, n, h, NULL);
}

static Cell *table_lookup(AggStateObject *t, const char *k, size_t n) { return table_find(t, k, n, hash_bytes(k, n)); }

/* ------------------------------------------------- holistic aggregates (h39h)
 *
 * median (A_MEDIAN) holds each group's values in a growable array (Cell.held), and
 * top-k (A_TOP) at most 2k of them in one allocation (Cell.top). median(x) is
 * DuckDB's quantile_cont(x, 0.5) (and quantile_cont(x, q) any q), bit for bit: the
 * values are selected by the very algorithm DuckDB's QuantileInterpolator calls,
 * libstdc++'s std::nth_element (introselect: median of three moved first, unguarded
 * partition, insertion sort of the last three or fewer, heap select past 2 log2(n)
 * rounds), on the values in the order they came (a file's order, on one chunk), so
 * which of -0.0 and 0.0 (equal to the comparison) is chosen is DuckDB's choice too;
 * then lo * (1 - d) + hi * d with one rounding (fma) at (n - 1) q. A_TOP keeps a
 * group's k first values in an ORDER BY (pruned to k by selection when 2k are held;
 * once k are, the worst of them bars what cannot be among the k first) and counts
 * its NULLs; the rows it gives are export_top's. */

/* A_TOP's bits, above its count in Cell.n */
#define TOP_NULLS 0x0fffffffu        /* its NULLs (saturating) */
#define TOP_BAR (1u << 28)           /* top.bar holds the worst value kept */
#define TOP_POS_ZERO (1u << 29)      /* a 0.0 was put */
#define TOP_NEG_ZERO (1u << 30)      /* a -0.0 was put */
#define TOP_DROPPED_ZERO (1u << 31)  /* a zero was left out */

/* the comparison of mode (bit 0: doubles, else int64; bit 1: descending): DuckDB's
 * LessThan, NaN above every number and equal to NaN, -0.0 equal to 0.0 */
static inline int held_less(int mode, int64_t a, int64_t b) {
    if (mode & 2) {
        int64_t t = a;
        a = b;
        b = t;
    }
    if (mode & 1) {
        double x, y;
        memcpy(&x, &a, 8);
        memcpy(&y, &b, 8);
        if (isnan(x)) return 0;
        if (isnan(y)) return 1;
        return x < y;
    }
    return a < b;
}

/* libstdc++'s __adjust_heap and __push_heap over v[0:len] */
static void held_adjust_heap(int m, int64_t *v, ptrdiff_t hole, ptrdiff_t len, int64_t val) {
    ptrdiff_t top = hole, second = hole;
    while (second < (len - 1) / 2) {
        second = 2 * (second + 1);
        if (held_less(m, v[second], v[second - 1])) second--;
        v[hole] = v[second];
        hole = second;
    }
    if ((len & 1) == 0 && second == (len - 2) / 2) {
        second = 2 * (second + 1);
        v[hole] = v[second - 1];
        hole = second - 1;
    }
    ptrdiff_t parent = (hole - 1) / 2;
    while (hole > top && held_less(m, v[parent], val)) {
        v[hole] = v[parent];
        hole = parent;
        parent = (hole - 1) / 2;
    }
    v[hole] = val;
}

/* libstdc++'s __heap_select(v, v + mid, v + len) */
static void held_heap_select(int m, int64_t *v, ptrdiff_t mid, ptrdiff_t len) {
    if (mid >= 2)
        for (ptrdiff_t parent = (mid - 2) / 2;; parent--) {
            held_adjust_heap(m, v, parent, mid, v[parent]);
            if (parent == 0) break;
        }
    for (ptrdiff_t i = mid; i < len; i++)
        if (held_less(m, v[i], v[0])) {
            int64_t val = v[i];
            v[i] = v[0];
            held_adjust_heap(m, v, 0, mid, val);
        }
}

static inline void held_swap(int64_t *v, ptrdiff_t a, ptrdiff_t b) {
    int64_t t = v[a];
    v[a] = v[b];
    v[b] = t;
}

/* libstdc++'s __move_median_to_first */
static void held_median_first(int m, int64_t *v, ptrdiff_t r, ptrdiff_t a, ptrdiff_t b, ptrdiff_t c) {
    if (held_less(m, v[a], v[b])) {
        if (held_less(m, v[b], v[c])) held_swap(v, r, b);
        else if (held_less(m, v[a], v[c])) held_swap(v, r, c);
        else held_swap(v, r, a);
    } else if (held_less(m, v[a], v[c])) held_swap(v, r, a);
    else if (held_less(m, v[b], v[c])) held_swap(v, r, c);
    else held_swap(v, r, b);
}

/* libstdc++'s __insertion_sort of v[first:last] */
static void held_insertion_sort(int m, int64_t *v, ptrdiff_t first, ptrdiff_t last) {
    for (ptrdiff_t i = first + 1; i < last; i++) {
        int64_t val = v[i];
        if (held_less(m, val, v[first])) {
            memmove(&v[first + 1], &v[first], (size_t)(i - first) * sizeof *v);
            v[first] = val;
        } else {
            ptrdiff_t j = i;
            while (held_less(m, val, v[j - 1])) {
                v[j] = v[j - 1];
                j--;
            }
            v[j] = val;
        }
    }
}

/* std::nth_element(v + first, v + nth, v + last) as libstdc++ runs it (__introselect) */
static void held_nth(int m, int64_t *v, ptrdiff_t first, ptrdiff_t nth, ptrdiff_t last) {
    if (first == last || nth == last) return;
    int depth = 2 * (63 - __builtin_clzll((unsigned long long)(last - first)));
    while (last - first > 3) {
        if (depth == 0) {
            held_heap_select(m, v + first, nth + 1 - first, last - first);
            held_swap(v, first, nth);
            return;
        }
        depth--;
        held_median_first(m, v, first, first + 1, first + (last - first) / 2, last - 1);
        ptrdiff_t lo = first + 1, hi = last;
        for (;;) {
            while (held_less(m, v[lo], v[first])) lo++;
            hi--;
            while (held_less(m, v[first], v[hi])) hi--;
            if (!(lo < hi)) break;
            held_swap(v, lo, hi);
            lo++;
        }
        if (lo <= nth) first = lo;
        else last = lo;
    }
    held_insertion_sort(m, v, first, last);
}

static inline double held_double(int64_t bits, int kind) {
    if (kind != K_FLOAT) return (double)bits;
    double d;
    memcpy(&d, &bits, 8);
    return d;
}

/* DuckDB's quantile_cont(x, q) of the c->n > 0 values held (their order is changed) */
static double held_median(Cell *c, int kind, double q) {
    int64_t *v = c->held.v;
    ptrdiff_t n = (ptrdiff_t)c->n;
    int m = kind == K_FLOAT;
    double rn = (double)(n - 1) * q;
    ptrdiff_t frn = (ptrdiff_t)floor(rn), crn = (ptrdiff_t)ceil(rn);
    held_nth(m, v, 0, frn, n);
    if (frn == crn) return held_double(v[frn], kind);
    held_nth(m, v, frn, crn, n); /* which may move v[frn]: lo is read after it, as DuckDB does */
    double lo = held_double(v[frn], kind), hi = held_double(v[crn], kind), d = rn - (double)frn;
    /* DuckDB's lo * (1 - d) + hi * d, as its build computes it: fused (the median of 5e-324
     * and 1e-323 is 1e-323 there, 5e-324 unfused; 4 in 300 integer pairs' quantiles differ) */
    return fma(lo, 1.0 - d, hi * d);
}

static inline int held_mode(int kind, int param) { return (kind == K_FLOAT) | (param >> 8 & 1) << 1; }
static inline int held_zero(int64_t bits) { return (bits & INT64_MAX) == 0; }

static int held_reserve(Cell *c, size_t want) {
    if (want <= c->held.cap) return 0;
    if (want > UINT32_MAX) return -1;
    size_t cap = c->held.cap ? c->held.cap : 4;
    while (cap < want) cap *= 2;
    if (cap > UINT32_MAX) cap = UINT32_MAX;
    int64_t *v = realloc(c->held.v, cap * sizeof *v);
    if (!v) return -1;
    c->held.v = v;
    c->held.cap = (uint32_t)cap;
    return 0;
}

/* A_TOP of k up to this holds its values in the cell (Cell.two): no allocation, no
 * bar, and no second cache line a row (h2o's q8: k = 2) */
#define TOP_INLINE 2
static inline int top_inline(int param) { return (param & 0xff) <= TOP_INLINE; }
static inline int64_t *top_values(Cell *c, int param) { return top_inline(param) ? c->two : c->top.v; }

/* the most values an A_TOP cell holds before it is pruned to k */
static inline uint32_t top_room(int param) {
    uint32_t k = (uint32_t)(param & 0xff);
    return k < 4 ? 8 : 2 * k;
}

/* A_TOP's values pruned to its k first (by selection); the worst of them is the bar
 * every later value must pass */
static uint32_t top_prune(Cell *c, uint32_t n, int m, int kind, int param, uint32_t *bits) {
    uint32_t k = (uint32_t)(param & 0xff);
    int64_t *v = c->top.v;
    held_nth(m, v, 0, k, n);
    if (kind == K_FLOAT)
        for (uint32_t i = k; i < n; i++)
            if (held_zero(v[i])) *bits |= TOP_DROPPED_ZERO;
    int64_t bar = v[0];
    for (uint32_t i = 1; i < k; i++)
        if (held_less(m, bar, v[i])) bar = v[i];
    c->top.bar = bar;
    *bits |= TOP_BAR;
    return k;
}

/* value x offered to an A_TOP cell of n values and bits; -1 when out of memory */
static inline int top_offer(Cell *c, int64_t x, uint32_t *n, uint32_t *bits, int kind, int param) {
    int m = held_mode(kind, param);
    if (top_inline(param)) {
        uint32_t k = (uint32_t)(param & 0xff);
        if (*n < k) {
            c->two[(*n)++] = x;
            return 0;
        }
        uint32_t worst = k == 2 && held_less(m, c->two[0], c->two[1]) ? 1 : 0;
        int64_t out = x;
        if (held_less(m, x, c->two[worst])) {
            out = c->two[worst];
            c->two[worst] = x;
        }
        if (kind == K_FLOAT && held_zero(out)) *bits |= TOP_DROPPED_ZERO;
        return 0;
    }
    if ((*bits & TOP_BAR) && !held_less(m, x, c->top.bar)) {
        /* no better than the k kept: left out (the values kept are the same) */
        if (kind == K_FLOAT && held_zero(x)) *bits |= TOP_DROPPED_ZERO;
        return 0;
    }
    if (!c->top.v && !(c->top.v = malloc(top_room(param) * sizeof(int64_t)))) return -1;
    if (*n == top_room(param)) *n = top_prune(c, *n, m, kind, param, bits);
    c->top.v[(*n)++] = x;
    if (*n == (uint32_t)(param & 0xff) && !(*bits & TOP_BAR)) {
        /* k values: the worst of them bars what cannot be among the k first (a bar
         * left behind by better values later still bars only such values) */
        int64_t bar = c->top.v[0];
        for (uint32_t i = 1; i < *n; i++)
            if (held_less(m, bar, c->top.v[i])) bar = c->top.v[i];
        c->top.bar = bar;
        *bits |= TOP_BAR;
    }
    return 0;
}

/* a row's value (v NULL: a NULL) put in its group's holistic cell; -1: out of memory */
static int held_put(Cell *c, const Val *v, int fn, int kind, int param) {
    if (fn == A_TOP) {
        uint32_t n = (uint32_t)c->n, bits = (uint32_t)((uint64_t)c->n >> 32);
        int r = 0;
        if (v->is_null) {
            if ((bits & TOP_NULLS) != TOP_NULLS) bits++;
        } else {
            int64_t x = v->i;
            if (kind == K_FLOAT) {
                memcpy(&x, &v->f, 8);
                if (held_zero(x)) bits |= x ? TOP_NEG_ZERO : TOP_POS_ZERO;
            }
            r = top_offer(c, x, &n, &bits, kind, param);
        }
        c->n = (int64_t)((uint64_t)bits << 32 | n);
        return r;
    }
    if (v->is_null) return 0;
    int64_t x = v->i;
    if (kind == K_FLOAT) memcpy(&x, &v->f, 8);
    if ((size_t)c->n == c->held.cap && held_reserve(c, (size_t)c->n + 1)) return -1;
    c->held.v[c->n++] = x;
    return 0;
}

/* src's values moved into dst (src is left empty: every merge consumes its source); -1:
 * out of memory */
static int held_merge(Cell *dst, Cell *src, int fn, int kind, int param) {
    if (fn == A_TOP) {
        uint32_t n = (uint32_t)dst->n, bits = (uint32_t)((uint64_t)dst->n >> 32);
        uint32_t sn = (uint32_t)src->n, sbits = (uint32_t)((uint64_t)src->n >> 32);
        uint32_t nulls = (bits & TOP_NULLS) + (sbits & TOP_NULLS);
        bits = ((bits | (sbits & ~TOP_BAR & ~TOP_NULLS)) & ~TOP_NULLS) | (nulls > TOP_NULLS ? TOP_NULLS : nulls);
        int r = 0;
        if (top_inline(param)) {
            for (uint32_t i = 0; i < sn; i++) top_offer(dst, src->two[i], &n, &bits, kind, param);
            src->n = 0;
            dst->n = (int64_t)((uint64_t)bits << 32 | n);
            return 0;
        }
        if (!dst->top.v && !(bits & TOP_BAR)) {
            /* nothing held: src's values, and its bar, taken whole */
            dst->top = src->top;
            n = sn;
            bits |= sbits & TOP_BAR;
            src->top.v = NULL;
        } else {
            for (uint32_t i = 0; i < sn && !r; i++) r = top_offer(dst, src->top.v[i], &n, &bits, kind, param);
        }
        free(src->top.v);
        src->top.v = NULL;
        src->n = 0;
        dst->n = (int64_t)((uint64_t)bits << 32 | n);
        return r;
    }
    if (src->n == 0) {
    } else if (dst->n == 0) {
        free(dst->held.v);
        dst->held.v = src->held.v;
        dst->held.cap = src->held.cap;
        dst->n = src->n;
        src->held.v = NULL;
        src->held.cap = 0;
    } else {
        if (held_reserve(dst, (size_t)(dst->n + src->n))) return -1;
        memcpy(dst->held.v + dst->n, src->held.v, (size_t)src->n * sizeof(int64_t));
        dst->n += src->n;
        free(src->held.v);
        src->held.v = NULL;
        src->held.cap = 0;
    }
    src->n = 0;
    return 0;
}

/* every holistic cell's values freed */
static void held_free(AggStateObject *t) {
    int any = 0;
    for (int a = 0; a < t->naggs; a++) any |= IS_HELD(t->agg_fns[a]);
    if (!any || !t->groups) return;
    for (size_t g = 0; g < t->ngroups; g++) {
        Cell *c = (Cell *)(t->groups + g * t->stride);
        for (int a = 0; a < t->naggs; a++)
            if (t->agg_fns[a] == A_MEDIAN || (t->agg_fns[a] == A_TOP && !top_inline(t->agg_params[a]))) {
                Cell *x = &c[t->agg_cell[a]];
                free(x->held.v); /* top.v too: the same place */
                x->held.v = NULL;
                if (t->agg_fns[a] == A_MEDIAN) x->held.cap = 0;
            }
    }
}

/* the values an aggregate's cell holds (A_TOP's count without its bits) */
static inline int64_t held_count(const Cell *c, int fn) { return fn == A_TOP ? (int64_t)(uint32_t)c->n : c->n; }

/* A_TOP's rows of one group: its values held sorted in place, how many of them and of its
 * NULLs the group gives (*values, *nulls); -1 when which values are given is not
 * determined (the cut falls among zeros of both signs, which DuckDB's ORDER BY ties, so
 * its row_number keeps either) */
static int held_top(Cell *c, int kind, int param, size_t *values, size_t *nulls) {
    uint32_t bits = (uint32_t)((uint64_t)c->n >> 32);
    size_t k = (size_t)(param & 0xff), n = (uint32_t)c->n, nn = bits & TOP_NULLS;
    int64_t *v = top_values(c, param);
    if (n) held_insertion_sort(held_mode(kind, param), v, 0, (ptrdiff_t)n);
    if (param >> 9 & 1) {
        *nulls = nn < k ? nn : k;
        *values = n < k - *nulls ? n : k - *nulls;
    } else {
        *values = n < k ? n : k;
        *nulls = nn < k - *values ? nn : k - *values;
    }
    if (kind != K_FLOAT || (bits & (TOP_POS_ZERO | TOP_NEG_ZERO)) != (TOP_POS_ZERO | TOP_NEG_ZERO)) return 0;
    int kept = 0, left = (bits & TOP_DROPPED_ZERO) != 0;
    for (size_t i = 0; i < n; i++)
        if (held_zero(v[i])) {
            if (i < *values) kept = 1;
            else left = 1;
        }
    return kept && left ? -1 : 0;
}

static int nan_aware_less(double a, double b) {
    /* DuckDB orders NaN above every number */
    if (isnan(a)) return 0;
    if (isnan(b)) return 1;
    return a < b;
}

/* ------------------------------------------------ statistical aggregates */

/* var_samp, var_pop, stddev_samp, stddev_pop, covar_samp, covar_pop and corr, as DuckDB
 * 2.0.1 computes them (extension/core_functions/include/core_functions/aggregate/
 * algebraic/stddev.hpp, covar.hpp, corr.hpp): every value a double, a row folded in by
 * Welford's update, two partial states joined by Chan's formulas, the answer a DOUBLE,
 * inf or NaN where the arithmetic gives one (2.0.1 raises no error). The order of each
 * operation is DuckDB's, and so is each fused multiply-add: DuckDB's build (clang,
 * contracting a * b + c within an expression) fuses covar's `co_moment + dx * (y - meany)`
 * (its answers on small files show it: 41 of 317 groups differed without) and, by the
 * same rule, the left product of covar's combined means (not observed: a small file
 * never joins two states); stddev's combine calls std::fma itself. This file is built
 * with -ffp-contract=off, so nothing else is fused.
 *
 * States, in AGG_CELLS cells c of 24 bytes, the count where every Cell keeps it:
 *   var/stddev  c[0]: m[0] mean, m[1] dsquared, n                      (StddevState)
 *   covar       c[0]: m[0] meanx, m[1] meany, n; c[1]: m[0] co_moment  (CovarState)
 *   corr        covar's, then c[1]: m[1] mean and m2 dsquared of x; c[2]: m[0] mean
 *               and m[1] dsquared of y (its StddevStates, whose counts are always
 *               covar's) */

/* The statistics' fused multiply-adds (fma(), as DuckDB's build computes them) are a libm
 * call in a baseline x86-64 build; the functions that fold rows and merge states into them
 * are also built for processors with FMA and chosen at load (GCC's target_clones, an ifunc),
 * where fma() is one instruction with the same, exactly rounded, result (q9: 6% less CPU
 * with the whole module built for FMA). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && defined(__GLIBC__)
#define FMA_CLONES __attribute__((target_clones("fma", "default")))
#else
#define FMA_CLONES
#endif

/* StddevState's Execute: x folded into (mean, dsquared) of n values, n counting it */
static inline void welford_add(double *mean, double *dsquared, int64_t n, double x) {
    const double mean_differential = (x - *mean) / (double)(uint64_t)n;
    const double new_mean = *mean + mean_differential;
    const double dsquared_increment = (x - new_mean) * (x - *mean);
    const double new_dsquared = *dsquared + dsquared_increment;
    *mean = new_mean;
    *dsquared = new_dsquared;
}

/* StddevState's Combine of a source of sn values into a target of tn values (both > 0) */
static inline void welford_combine(double *mean, double *dsquared, int64_t tn, double smean, double sdsquared,
                                   int64_t sn) {
    const double target_count = (double)(uint64_t)tn, source_count = (double)(uint64_t)sn;
    const double total_count = (double)(uint64_t)(tn + sn);
    const double delta = smean - *mean;
    const double new_mean = fma(source_count / total_count, delta, *mean);
    *dsquared = sdsquared + *dsquared + delta * delta * source_count * target_count / total_count;
    *mean = new_mean;
}

/* one row's value(s) folded into the aggregate's cells c (y: the first argument, x the
 * second, as DuckDB's binary aggregates name them) */
static inline void stats_add(Cell *c, int fn, double y, double x) {
    c->n++;
    if (!IS_BINARY(fn)) {
        welford_add(&c->m[0], &c->m[1], c->n, y);
        return;
    }
    const double n = (double)(uint64_t)c->n;
    const double dx = x - c->m[0];
    const double meanx = c->m[0] + dx / n;
    const double dy = y - c->m[1];
    const double meany = c->m[1] + dy / n;
    const double co_moment = fma(dx, y - meany, c[1].m[0]); /* Schubert and Gertz (4.3) */
    c->m[0] = meanx;
    c->m[1] = meany;
    c[1].m[0] = co_moment;
    if (fn == A_CORR) {
        welford_add(&c[1].m[1], &c[1].m2, c->n, x);
        welford_add(&c[2].m[0], &c[2].m[1], c->n, y);
    }
}

/* the source's cells merged into the target's (DuckDB's Combine) */
FMA_CLONES static void stats_merge(Cell *dst, const Cell *src, int fn) {
    if (src->n == 0) return;
    if (dst->n == 0) {
        memcpy(dst, src, fn == A_CORR ? 3 * sizeof(Cell) - 8 : AGG_CELLS(fn) * sizeof(Cell));
        return;
    }
    int64_t tn = dst->n, sn = src->n;
    if (!IS_BINARY(fn)) {
        welford_combine(&dst->m[0], &dst->m[1], tn, src->m[0], src->m[1], sn);
    } else {
        const double target_count = (double)(uint64_t)tn, source_count = (double)(uint64_t)sn;
        const double total_count = (double)(uint64_t)(tn + sn);
        const double meanx = fma(source_count, src->m[0], target_count * dst->m[0]) / total_count;
        const double meany = fma(source_count, src->m[1], target_count * dst->m[1]) / total_count;
        const double deltax = dst->m[0] - src->m[0], deltay = dst->m[1] - src->m[1];
        dst[1].m[0] = src[1].m[0] + dst[1].m[0] + deltax * deltay * source_count * target_count / total_count;
        dst->m[0] = meanx;
        dst->m[1] = meany;
        if (fn == A_CORR) {
            welford_combine(&dst[1].m[1], &dst[1].m2, tn, src[1].m[1], src[1].m2, sn);
            welford_combine(&dst[2].m[0], &dst[2].m[1], tn, src[2].m[0], src[2].m[1], sn);
        }
    }
    dst->n = tn + sn;
}

/* the aggregate's answer in *out; 0 when it is NULL (DuckDB's Finalize) */
static int stats_final(const Cell *c, int fn, double *out) {
    uint64_t n = (uint64_t)c->n;
    switch (fn) {
    case A_VAR_SAMP:
        if (n <= 1) return 0;
        *out = c->m[1] / (double)(n - 1);
        return 1;
    case A_VAR_POP:
        if (n == 0) return 0;
        *out = n > 1 ? c->m[1] / (double)n : 0;
        return 1;
    case A_STDDEV_SAMP:
        if (n <= 1) return 0;
        *out = sqrt(c->m[1] / (double)(n - 1));
        return 1;
    case A_STDDEV_POP:
        if (n == 0) return 0;
        *out = n > 1 ? sqrt(c->m[1] / (double)n) : 0;
        return 1;
    case A_COVAR_POP:
        if (n == 0) return 0;
        *out = c[1].m[0] / (double)n;
        return 1;
    case A_COVAR_SAMP:
        if (n < 2) return 0;
        *out = c[1].m[0] / (double)(n - 1);
        return 1;
    case A_CORR: {
        if (n == 0) return 0;
        const double cov = c[1].m[0] / (double)n;
        const double std_x = n > 1 ? sqrt(c[1].m2 / (double)n) : 0;
        const double std_y = n > 1 ? sqrt(c[2].m[1] / (double)n) : 0;
        *out = std_x * std_y != 0 ? cov / (std_x * std_y) : NAN;
        return 1;
    }
    }
    return 0;
}

/* src's aggregate fn folded into dst's (a holistic one's values moved: see held_merge);
 * -1 when out of memory */
static int cell_merge(Cell *dst, Cell *src, int fn, int kind, int param) {
    if (IS_HELD(fn)) return held_merge(dst, src, fn, kind, param);
    if (IS_STATISTIC(fn)) {
        stats_merge(dst, src, fn);
        return 0;
    }
    if (src->n == 0 && fn != A_COUNT_STAR) return 0;
    switch (fn) {
    case A_COUNT_STAR:
    case A_COUNT: break;
    case A_SUM:
    case A_AVG:
        if (kind == K_FLOAT) dst->f += src->f;
        else dst->isum += src->isum;
        break;
    /* of equal doubles (-0.0 and 0.0) the later one, as DuckDB's min and max keep it */
    case A_MIN:
        if (kind == K_FLOAT) { if (dst->n == 0 || !nan_aware_less(dst->f, src->f)) dst->f = src->f; }
        else if (dst->n == 0 || src->i < dst->i) dst->i = src->i;
        break;
    case A_MAX:
        if (kind == K_FLOAT) { if (dst->n == 0 || !nan_aware_less(src->f, dst->f)) dst->f = src->f; }
        else if (dst->n == 0 || src->i > dst->i) dst->i = src->i;
        break;
    }
    dst->n += src->n;
    return 0;
}

/* a group's cells src merged into dst's, aggregate by aggregate (a holistic one's values
 * moved out of src); -1 when out of memory */
static inline int cells_merge(const AggStateObject *t, Cell *dst, Cell *src) {
    for (int a = 0; a < t->naggs; a++) {
        int at = t->agg_cell[a];
        if (cell_merge(&dst[at], &src[at], t->agg_fns[a], t->agg_kinds[a], t->agg_params[a])) return -1;
    }
    return 0;
}

/* an unindexed table's groups made distinct (merged in a new table, which then replaces
 * them); -1 when out of memory (the table is left as it was) */
static int table_compact(AggStateObject *t) {
    if (!t->unindexed) return 0;
    AggStateObject c;
    memset(&c, 0, sizeof c);
    c.nkeys = t->nkeys;
    c.naggs = t->naggs;
    memcpy(c.agg_fns, t->agg_fns, sizeof c.agg_fns);
    memcpy(c.agg_kinds, t->agg_kinds, sizeof c.agg_kinds);
    c.fixed_key = t->fixed_key;
    c.key_width = t->key_width;
    c.key_inline = t->key_inline;
    c.key_at = t->key_at;
    c.stride = t->stride;
    c.tight = t->tight;
    memcpy(c.agg_cell, t->agg_cell, sizeof c.agg_cell);
    memcpy(c.agg_params, t->agg_params, sizeof c.agg_params);
    memcpy(c.agg_q, t->agg_q, sizeof c.agg_q);
    int oom = 0;
    for (size_t g = 0; g < t->ngroups && !oom; g++) {
        size_t n;
        const char *k = group_key(t, g, &n);
        Cell *d = table_find(&c, k, n, t->hashes[g]);
        if (!d) {
            oom = 1;
            break;
        }
        oom = cells_merge(t, d, group_cells(t, g));
    }
    if (oom) {
        held_free(&c);
        table_free_all(&c);
        return -1;
    }
    held_free(t); /* (what cells_merge moved is no longer t's) */
    table_free_all(t);
    t->index = c.index;
    t->cap = c.cap;
    t->groups = c.groups;
    t->gcap = c.gcap;
    t->ngroups = c.ngroups;
    t->hashes = c.hashes;
    t->arena = c.arena;
    t->key_bytes = c.key_bytes;
    t->order = NULL;
    t->ordered = 0;
    t->unindexed = 0;
    return 0;
}

static PyObject *int128_to_py(__int128 v) {
    char buf[48];
    int neg = v < 0, k = 47;
    unsigned __int128 u = neg ? (unsigned __int128)(-(v + 1)) + 1 : (unsigned __int128)v;
    buf[k] = 0;
    do {
        buf[--k] = (char)('0' + (int)(u % 10));
        u /= 10;
    } while (u);
    if (neg) buf[--k] = '-';
    return PyLong_FromString(buf + k, NULL, 10);
}

/* merge(other): fold another chunk's partial aggregates into this one */
static PyObject *AggState_merge(AggStateObject *self, PyObject *arg);
static int same_plan(const AggStateObject *a, const AggStateObject *b);
static PyTypeObject AggStateType;

static PyObject *AggState_merge(AggStateObject *self, PyObject *arg) {
    if (!PyObject_TypeCheck(arg, &AggStateType)) return PyErr_Format(PyExc_TypeError, "expected an AggState");
    AggStateObject *o = (AggStateObject *)arg;
    if (table_compact(self) || ensure_hashes(o)) return PyErr_NoMemory();
    if (!same_plan(o, self))
        return PyErr_Format(PyExc_ValueError, "merging states of different plans");
    for (size_t g = 0; g < o->ngroups; g++) {
        size_t n;
        const char *k = group_key(o, g, &n);
        Cell *dst = table_find(self, k, n, o->hashes[g]);
        if (!dst) return PyErr_NoMemory();
        if (cells_merge(self, dst, group_cells(o, g))) return PyErr_NoMemory();
    }
    Py_RETURN_NONE;
}

/* export() -> (keys, aggs): one list of Python values per key and per aggregate */
static PyObject *AggState_export(AggStateObject *self, PyObject *unused) {
    if (table_compact(self)) return PyErr_NoMemory();
    PyObject *keys = PyList_New(self->nkeys), *aggs = PyList_New(self->naggs);
    if (!keys || !aggs) goto fail;
    for (int k = 0; k < self->nkeys; k++) {
        PyObject *l = PyList_New((Py_ssize_t)self->ngroups);
        if (!l) goto fail;
        PyList_SET_ITEM(keys, k, l);
    }
    for (int a = 0; a < self->naggs; a++) {
        PyObject *l = PyList_New((Py_ssize_t)self->ngroups);
        if (!l) goto fail;
        PyList_SET_ITEM(aggs, a, l);
    }
    for (size_t g = 0; g < self->ngroups; g++) {
        size_t n;
        const char *p = group_key(self, g, &n);
        for (int k = 0; k < self->nkeys; k++) {
            PyObject *v;
            char tag = *p++;
            if (tag == 0) {
                v = Py_NewRef(Py_None);
                if (self->fixed_key) p += 8;
            } else if (tag == 2 || tag == 4) {
                uint32_t n = (unsigned char)*p;
                if (tag == 4) memcpy(&n, p, 4);
                p += tag == 2 ? 1 : 4;
                v = PyUnicode_DecodeUTF8(p, n, "replace");
                p += n;
            } else if (tag == 5) {
                int32_t i;
                memcpy(&i, p, 4);
                p += 4;
                v = PyLong_FromLong(i);
            } else {
                int64_t i;
                memcpy(&i, p, 8);
                p += 8;
                if (tag == 3) {
                    double d;
                    memcpy(&d, &i, 8);
                    v = PyFloat_FromDouble(d);
                } else {
                    v = PyLong_FromLongLong(i);
                }
            }
            if (!v) goto fail;
            PyList_SET_ITEM(PyList_GET_ITEM(keys, k), (Py_ssize_t)g, v);
        }
        Cell *cells = group_cells(self, g);
        for (int a = 0; a < self->naggs; a++) {
            PyObject *v;
            int fn = self->agg_fns[a], kind = self->agg_kinds[a];
            Cell *c = &cells[self->agg_cell[a]];
            double d;
            if (IS_STATISTIC(fn)) v = stats_final(c, fn, &d) ? PyFloat_FromDouble(d) : Py_NewRef(Py_None);
            else if (fn == A_COUNT_STAR || fn == A_COUNT || fn == A_TOP) v = PyLong_FromLongLong(held_count(c, fn));
            else if (c->n == 0) v = Py_NewRef(Py_None);
            else if (fn == A_MEDIAN) v = PyFloat_FromDouble(held_median(c, kind, self->agg_q[a]));
            else if (fn == A_AVG) v = PyFloat_FromDouble(kind == K_FLOAT ? c->f / (double)c->n
                                                                         : int_average(c->isum, c->n, self->nkeys > 0));
            else if (fn == A_SUM) v = kind == K_FLOAT ? PyFloat_FromDouble(c->f) : int128_to_py(c->isum);
            else v = kind == K_FLOAT ? PyFloat_FromDouble(c->f) : PyLong_FromLongLong(c->i);
            if (!v) goto fail;
            PyList_SET_ITEM(PyList_GET_ITEM(aggs, a), (Py_ssize_t)g, v);
        }
    }
    return Py_BuildValue("(NN)", keys, aggs);
fail:
    Py_XDECREF(keys);
    Py_XDECREF(aggs);
    return NULL;
}

/* fold(ids) -> AggState: this state's groups merged by ids[g] (one integer per group, in
 * export order), in a new state keyed by the id alone. Keys computed after the scan
 * (strftime('%m', ts) of a month-truncated ts) can send several groups to one. */
static PyObject *AggState_fold(AggStateObject *self, PyObject *arg) {
    if (table_compact(self)) return PyErr_NoMemory();
    PyObject *seq = PySequence_Fast(arg, "fold() needs a sequence of group ids");
    if (!seq) return NULL;
    if ((size_t)PySequence_Fast_GET_SIZE(seq) != self->ngroups) {
        Py_DECREF(seq);
        return PyErr_Format(PyExc_ValueError, "fold() needs one id per group");
    }
    AggStateObject *out = PyObject_New(AggStateObject, &AggStateType);
    if (!out) {
        Py_DECREF(seq);
        return NULL;
    }
    memset((char *)out + sizeof(PyObject), 0, sizeof(AggStateObject) - sizeof(PyObject));
    out->nkeys = 1;
    out->key_kinds[0] = K_INT;
    out->naggs = self->naggs;
    memcpy(out->agg_fns, self->agg_fns, sizeof out->agg_fns);
    memcpy(out->agg_kinds, self->agg_kinds, sizeof out->agg_kinds);
    memcpy(out->agg_params, self->agg_params, sizeof out->agg_params);
    memcpy(out->agg_q, self->agg_q, sizeof out->agg_q);
    table_layout(out, 1, 9, 0);
    for (size_t g = 0; g < self->ngroups; g++) {
        char key[9] = {1};
        int64_t id = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, (Py_ssize_t)g));
        if (id == -1 && PyErr_Occurred()) goto fail;
        memcpy(key + 1, &id, 8);
        Cell *dst = table_lookup(out, key, sizeof key);
        if (!dst) {
            PyErr_NoMemory();
            goto fail;
        }
        if (cells_merge(self, dst, group_cells(self, g))) {
            PyErr_NoMemory();
            goto fail;
        }
    }
    Py_DECREF(seq);
    return (PyObject *)out;
fail:
    Py_DECREF(seq);
    Py_DECREF(out);
    return NULL;
}

#define TIGHT_INLINE_MAX 256 /* the most bytes of a key a merged table's record holds */

/* The bytes of key a merged table's records hold (the rest in its arena): what 15 in 16
 * of t's keys fit in, and the record's padding (q2's keys of 14-17 bytes in the record:
 * in the arena, a probe that found its slot's tag missed a second time on the key); at
 * least 4, an arena offset's room (t without groups: 4) */
static size_t tight_inline(const AggStateObject *t) {
    if (t->fixed_key) return t->key_inline;
    size_t count[TIGHT_INLINE_MAX + 1] = {0}, n, seen = 0, len = 0;
    for (size_t g = 0; g < t->ngroups; g++) {
        group_key(t, g, &n);
        count[n < TIGHT_INLINE_MAX ? n : TIGHT_INLINE_MAX]++;
    }
    while (len < TIGHT_INLINE_MAX && (seen += count[len]) * 16 < t->ngroups * 15) len++;
    if (len < 4) len = 4;
    size_t size = t->key_at + 4 + len;
    return ((size + 7) & ~(size_t)7) - t->key_at - 4;
}

/* an empty state of t's plan */
static AggStateObject *state_like(const AggStateObject *t) {
    AggStateObject *o = PyObject_New(AggStateObject, &AggStateType);
    if (!o) return NULL;
    memset((char *)o + sizeof(PyObject), 0, sizeof(AggStateObject) - sizeof(PyObject));
    o->nkeys = t->nkeys;
    o->naggs = t->naggs;
    memcpy(o->key_kinds, t->key_kinds, sizeof o->key_kinds);
    memcpy(o->agg_fns, t->agg_fns, sizeof o->agg_fns);
    memcpy(o->agg_kinds, t->agg_kinds, sizeof o->agg_kinds);
    memcpy(o->agg_params, t->agg_params, sizeof o->agg_params);
    memcpy(o->agg_q, t->agg_q, sizeof o->agg_q);
    table_layout(o, t->fixed_key, t->key_width, 1);
    if (!o->fixed_key) {
        o->key_inline = tight_inline(t);
        o->stride = o->key_at + 4 + o->key_inline;
    }
    return o;
}

static int same_plan(const AggStateObject *a, const AggStateObject *b) {
    return a->naggs == b->naggs && a->nkeys == b->nkeys && a->fixed_key == b->fixed_key &&
           a->key_width == b->key_width && !memcmp(a->agg_fns, b->agg_fns, sizeof a->agg_fns) &&
           !memcmp(a->agg_kinds, b->agg_kinds, sizeof a->agg_kinds) &&
           !memcmp(a->agg_params, b->agg_params, sizeof a->agg_params) &&
           !memcmp(a->agg_q, b->agg_q, sizeof a->agg_q);
}

/* partitions() -> a tuple of AGG_PARTS empty states of this one's plan, for absorb() */
static PyObject *AggState_partitions(AggStateObject *self, PyObject *unused) {
    PyObject *out = PyTuple_New(AGG_PARTS);
    if (!out) return NULL;
    for (int p = 0; p < AGG_PARTS; p++) {
        AggStateObject *o = state_like(self);
        if (!o) {
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, p, (PyObject *)o);
    }
    return out;
}

/* a sequence of AggStates of one plan as a new C array (NULL with an exception set) */
static AggStateObject **states_of(PyObject *seq, Py_ssize_t *n, const AggStateObject *like) {
    *n = PySequence_Fast_GET_SIZE(seq);
    AggStateObject **out = malloc(((size_t)*n + 1) * sizeof *out);
    if (!out) return (AggStateObject **)PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < *n; i++) {
        PyObject *o = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyObject_TypeCheck(o, &AggStateType) || (like && !same_plan((AggStateObject *)o, like))) {
            free(out);
            PyErr_SetString(PyExc_TypeError, "expected AggStates of one plan");
            return NULL;
        }
        out[i] = (AggStateObject *)o;
    }
    return out;
}

/* A partial's groups are read in partition order (in a row, for a run table's), and
 * each probes a partition's index, record and arena at random: each of those misses
 * is prefetched ahead of its use, in the order the addresses become known. The
 * partial's hash and record ABSORB_AHEAD groups ahead; its key's arena bytes and the
 * index slot half as far; the record the slot names a quarter; that record's key an
 * eighth (memcpy of q2's keys from the partials' arenas stalled on 15% of its CPU).
 * 32, not 16, once the partials' runs made the partition's record the one stall left
 * (58% of absorb's samples waited on its key): q2 6%, q9 5% less CPU. */
#define ABSORB_AHEAD 32

static inline void absorb_ahead(const AggStateObject *src, const AggStateObject *dst, const uint32_t *order,
                                size_t j) {
    size_t g = order[j + ABSORB_AHEAD], n;
    __builtin_prefetch(&src->hashes[g]);
    const char *r = group_record(src, g);
    __builtin_prefetch(r);
    __builtin_prefetch(r + src->stride - 1);
    g = order[j + ABSORB_AHEAD / 2];
    uint64_t h = src->hashes[g];
    __builtin_prefetch(&dst->index[slot_of(h, dst->cap)]);
    if (!src->fixed_key) __builtin_prefetch(group_key(src, g, &n));
    h = src->hashes[order[j + ABSORB_AHEAD / 4]];
    uint64_t s = dst->index[slot_of(h, dst->cap)];
    if (s && (s ^ h) >> 32 == 0) {
        r = group_record(dst, (uint32_t)s - 1);
        __builtin_prefetch(r);
        __builtin_prefetch(r + dst->stride - 1);
    }
    if (dst->fixed_key) return;
    h = src->hashes[order[j + ABSORB_AHEAD / 8]];
    s = dst->index[slot_of(h, dst->cap)];
    if (s && (s ^ h) >> 32 == 0) {
        const char *k = group_key(dst, (uint32_t)s - 1, &n);
        __builtin_prefetch(k);
    }
}

/* absorb(parts, partials, first, stop): each partial's groups of partitions first..stop-1
 * merged into parts[p] (a tuple from partitions()), without the GIL. Calls on disjoint
 * ranges of partitions may run at once in several threads: each touches only its own
 * parts, and reads the partials (partitioned here first, under the GIL). */
static PyObject *absorb(PyObject *mod, PyObject *args) {
    PyObject *parts_arg, *partials_arg;
    int first, stop;
    if (!PyArg_ParseTuple(args, "O!Oii", &PyTuple_Type, &parts_arg, &partials_arg, &first, &stop)) return NULL;
    if (PyTuple_GET_SIZE(parts_arg) != AGG_PARTS || first < 0 || stop > AGG_PARTS || first > stop)
        return PyErr_Format(PyExc_ValueError, "absorb() needs the %d partitions and a range of them", AGG_PARTS);
    PyObject *seq = PySequence_Fast(partials_arg, "absorb() needs a sequence of states");
    if (!seq) return NULL;
    Py_ssize_t nparts, nin;
    AggStateObject **parts = states_of(parts_arg, &nparts, NULL), **in = NULL;
    if (parts) in = states_of(seq, &nin, parts[0]);
    for (Py_ssize_t i = 0; parts && i < nparts; i++)
        if (!same_plan(parts[i], parts[0])) {
            PyErr_SetString(PyExc_TypeError, "expected AggStates of one plan");
            goto fail;
        }
    if (!in) goto fail;
    for (Py_ssize_t i = 0; i < nin; i++)
        if (table_partition(in[i])) {
            PyErr_NoMemory();
            goto fail;
        }
    /* a new group's cells are its first partial's, copied (merged into zeroed cells, they
     * come out the same: see cell_merge), unless they own held values */
    int oom = 0, copies = 1;
    for (int a = 0; a < parts[0]->naggs; a++) copies &= !IS_HELD(parts[0]->agg_fns[a]);
    Py_BEGIN_ALLOW_THREADS
    for (int p = first; p < stop && !oom; p++) {
        AggStateObject *dst = parts[p];
        size_t more = 0;
        for (Py_ssize_t i = 0; i < nin; i++) more += in[i]->part_at[p + 1] - in[i]->part_at[p];
        if (table_reserve(dst, more)) {
            oom = 1;
            break;
        }
        for (Py_ssize_t i = 0; i < nin && !oom; i++) {
            const AggStateObject *src = in[i];
            const uint32_t *order = src->order;
            for (size_t j = src->part_at[p], stop = src->part_at[p + 1]; j < stop; j++) {
                if (j + ABSORB_AHEAD < stop) absorb_ahead(src, dst, order, j);
                size_t g = order[j], n;
                const char *k = group_key(src, g, &n);
                int fresh = 0;
                Cell *d = table_find_fresh(dst, k, n, src->hashes[g], copies ? &fresh : NULL);
                if (!d) {
                    oom = 1;
                    break;
                }
                if (fresh) memcpy(d, group_cells(src, g), dst->key_at);
                else oom = cells_merge(dst, d, group_cells(src, g));
            }
        }
    }
    Py_END_ALLOW_THREADS
    free(parts);
    free(in);
    Py_DECREF(seq);
    if (oom) return PyErr_NoMemory();
    Py_RETURN_NONE;
fail:
    free(parts);
    free(in);
    Py_DECREF(seq);
    return NULL;
}

/* One exported column: Arrow's validity bitmap, values (or offsets) and string data,
 * written straight into the bytes objects handed to Python. */
typedef struct {
    PyObject *validity, *values, *data;
    char *v, *x, *d;   /* their bytes */
    size_t xlen, dlen; /* bytes of values and of data written */
    size_t dcap;       /* room for data */
    size_t nulls;
    int wide; /* an integer sum: 1 when one passes BIGINT (values are then 16 bytes each), 2 past 38 digits */
} ExportCol;

/* the bytes of one value of an exported aggregate */
static size_t agg_width(int fn, int kind, int wide) {
    if (fn == A_SUM && kind != K_FLOAT && wide) return 16;
    if ((fn == A_MIN || fn == A_MAX) && kind == K_DATE) return 4;
    return 8;
}

static size_t key_width(char code) { return code == 's' || code == 'i' ? 4 : code == 'b' ? 0 : 8; }

static int fits_bigint(__int128 v) { return v >= INT64_MIN && v <= INT64_MAX; }

/* the state's tables freed (an exported state that is not needed again) */
static void table_release(AggStateObject *t) {
    held_free(t);
    table_free_all(t);
}

static inline void export_put(ExportCol *c, const void *v, size_t width) {
    memcpy(c->x + c->xlen, v, width);
    c->xlen += width;
}

/* Row row's bit in a bitmap. The export writes its two halves at once (export_half):
 * the one byte both write bits of (shared) is written atomically. */
static inline void bit_set(char *b, size_t row, size_t shared) {
    char m = (char)(1 << (row & 7));
    if (row >> 3 == shared) __atomic_fetch_or(&b[row >> 3], m, __ATOMIC_RELAXED);
    else b[row >> 3] |= m;
}

#define export_valid(c, row) bit_set((c)->v, (row), shared)

/* the text bytes of each text key ('s') of states st[0:nst], in bytes[k] */
static void export_text_bytes(AggStateObject **st, Py_ssize_t nst, int nkeys, size_t *bytes) {
    for (Py_ssize_t s = 0; s < nst; s++) {
        const AggStateObject *t = st[s];
        if (t->fixed_key) continue;
        for (size_t g = 0; g < t->ngroups; g++) {
            size_t n;
            const char *p = group_key(t, g, &n);
            for (int k = 0; k < nkeys; k++) {
                char tag = *p++;
                if (tag == 2 || tag == 4) {
                    uint32_t m = (unsigned char)*p;
                    if (tag == 4) memcpy(&m, p, 4);
                    p += (tag == 2 ? 1 : 4) + m;
                    bytes[k] += m;
                } else if (tag) {
                    p += tag == 5 ? 4 : 8;
                }
            }
        }
    }
}

/* writes states st[0:nst]'s groups, one after another, from row `row` of the columns
 * (whose xlen and dlen are that row's); shared: the bitmap byte the other half writes
 * too; counted (unless NULL): set once the other half has read these states' keys,
 * which are not freed before; -2 when a string column passes 2 GiB */
static int export_fill(AggStateObject **st, Py_ssize_t nst, const char *kc, ExportCol *keys, ExportCol *aggs,
                       int release, size_t row, size_t shared, const int *counted) {
    if (!nst) return 0;
    const AggStateObject *t0 = st[0];
    int nkeys = t0->nkeys, naggs = t0->naggs;
    int agg_fns[MAX_KEYS], agg_kinds[MAX_KEYS];
    memcpy(agg_fns, t0->agg_fns, sizeof agg_fns);
    memcpy(agg_kinds, t0->agg_kinds, sizeof agg_kinds);
    for (int k = 0; k < nkeys && row == 0; k++)
        if (kc[k] == 's') {
            int32_t z = 0;
            export_put(&keys[k], &z, 4);
        }
    for (Py_ssize_t s = 0; s < nst; s++) {
        AggStateObject *t = st[s];
        for (size_t g = 0; g < t->ngroups; g++, row++) {
            size_t n;
            const char *p = group_key(t, g, &n);
            for (int k = 0; k < nkeys; k++) {
                ExportCol *c = &keys[k];
                char tag = *p++;
                if (tag == 0) {
                    if (t->fixed_key) p += 8;
                    c->nulls++;
                    if (kc[k] == 's') {
                        int32_t off = (int32_t)c->dlen;
                        export_put(c, &off, 4);
                    } else {
                        memset(c->x + c->xlen, 0, key_width(kc[k]));
                        c->xlen += key_width(kc[k]);
                    }
                    continue;
                }
                export_valid(c, row);
                if (tag == 2 || tag == 4) {
                    uint32_t m = (unsigned char)*p;
                    if (tag == 4) memcpy(&m, p, 4);
                    p += tag == 2 ? 1 : 4;
                    if (c->dlen + m > c->dcap || c->dlen + m > INT32_MAX) return -2;
                    memcpy(c->d + c->dlen, p, m);
                    c->dlen += m;
                    p += m;
                    int32_t off = (int32_t)c->dlen;
                    export_put(c, &off, 4);
                    continue;
                }
                int64_t v;
                if (tag == 5) {
                    int32_t small;
                    memcpy(&small, p, 4);
                    v = small;
                    p += 4;
                } else {
                    memcpy(&v, p, 8);
                    p += 8;
                }
                if (kc[k] == 'i') {
                    int32_t d = (int32_t)v;
                    export_put(c, &d, 4);
                } else if (kc[k] == 'b') {
                    if (v) bit_set(c->x, row, shared);
                } else {
                    export_put(c, &v, 8); /* an int64, or a double's bits (tag 3) */
                }
            }
            const Cell *cells = group_cells(t, g);
            for (int a = 0; a < naggs; a++) {
                ExportCol *c = &aggs[a];
                const Cell *x = &cells[t->agg_cell[a]];
                int fn = agg_fns[a], kind = agg_kinds[a];
                double d;
                if (IS_STATISTIC(fn)) {
                    if (stats_final(x, fn, &d)) {
                        export_valid(c, row);
                        export_put(c, &d, 8);
                    } else {
                        c->nulls++;
                        memset(c->x + c->xlen, 0, 8);
                        c->xlen += 8;
                    }
                } else if (fn == A_COUNT_STAR || fn == A_COUNT || fn == A_TOP) {
                    int64_t count = held_count(x, fn);
                    export_valid(c, row);
                    export_put(c, &count, 8);
                } else if (x->n == 0) {
                    c->nulls++;
                    memset(c->x + c->xlen, 0, agg_width(fn, kind, c->wide));
                    c->xlen += agg_width(fn, kind, c->wide);
                } else if (fn == A_MEDIAN) {
                    export_valid(c, row);
                    double d = held_median((Cell *)x, kind, t0->agg_q[a]);
                    export_put(c, &d, 8);
                } else if (fn == A_AVG) {
                    export_valid(c, row);
                    double d = kind == K_FLOAT ? x->f / (double)x->n : int_average(x->isum, x->n, t0->nkeys > 0);
                    export_put(c, &d, 8);
                } else if (kind == K_FLOAT) {
                    export_valid(c, row);
                    export_put(c, &x->f, 8);
                } else if (fn == A_SUM) {
                    export_valid(c, row);
                    if (c->wide) {
                        export_put(c, &x->isum, 16); /* Arrow's decimal128: little-endian two's complement */
                    } else {
                        int64_t v = (int64_t)x->isum;
                        export_put(c, &v, 8);
                    }
                } else if (kind == K_DATE) {
                    export_valid(c, row);
                    int32_t d = (int32_t)x->i;
                    export_put(c, &d, 4);
                } else {
                    export_valid(c, row);
                    export_put(c, &x->i, 8);
                }
            }
        }
        if (release) {
            while (counted && !__atomic_load_n(counted, __ATOMIC_ACQUIRE)) sched_yield();
            table_release(t);
        }
    }
    return 0;
}

#undef export_valid

/* One half of an export (export_columns writes two at once, in two threads): states
 * st[0:nst] from row `row`, its own copies of the columns' positions and null counts;
 * the second half counts the first half's text first, where its text starts. */
typedef struct {
    AggStateObject **st, **before;
    Py_ssize_t nst, nbefore;
    const char *kc;
    ExportCol *keys, *aggs;
    int nkeys, naggs, release, r;
    size_t row, shared;
    int *counted; /* set by the second half once it has counted the first's text */
} ExportHalf;

static void *export_half(void *arg) {
    ExportHalf *h = arg;
    if (h->row) {
        size_t text[MAX_KEYS] = {0};
        export_text_bytes(h->before, h->nbefore, h->nkeys, text);
        for (int k = 0; k < h->nkeys; k++) {
            ExportCol *c = &h->keys[k];
            c->xlen = h->kc[k] == 's' ? 4 + h->row * 4 : h->row * key_width(h->kc[k]);
            c->dlen = text[k];
        }
        for (int a = 0; a < h->naggs; a++) {
            const AggStateObject *t0 = h->st[0];
            h->aggs[a].xlen = h->row * agg_width(t0->agg_fns[a], t0->agg_kinds[a], h->aggs[a].wide);
        }
        __atomic_store_n(h->counted, 1, __ATOMIC_RELEASE);
    }
    h->r = export_fill(h->st, h->nst, h->kc, h->keys, h->aggs, h->release, h->row, h->shared,
                       h->row ? NULL : h->counted);
    return NULL;
}

/* writes every state's groups (export_fill), in two halves at once where there are many
 * (q10's 1e7 groups: 0.4 s in one thread, after the scan's two) */
#define EXPORT_SPLIT 65536
static int export_all(AggStateObject **st, Py_ssize_t nst, const char *kc, ExportCol *keys, ExportCol *aggs,
                      int release, size_t total) {
    const AggStateObject *t0 = st[0];
    int nkeys = t0->nkeys, naggs = t0->naggs;
    Py_ssize_t mid = 0;
    size_t row = 0;
    if (nst >= 2 && total >= EXPORT_SPLIT)
        while (mid < nst - 1 && row + st[mid]->ngroups <= total / 2) row += st[mid++]->ngroups;
#ifndef _WIN32
    if (mid > 0 && row > 0) {
        ExportCol *k2 = malloc(((size_t)nkeys + 1) * sizeof(ExportCol)), *a2 = malloc(((size_t)naggs + 1) * sizeof(ExportCol));
        if (k2 && a2) {
            memcpy(k2, keys, (size_t)nkeys * sizeof(ExportCol));
            memcpy(a2, aggs, (size_t)naggs * sizeof(ExportCol));
            for (int k = 0; k < nkeys; k++) k2[k].nulls = 0;
            for (int a = 0; a < naggs; a++) a2[a].nulls = 0;
            int counted = 0;
            ExportHalf first = {st, NULL, mid, 0, kc, keys, aggs, nkeys, naggs, release, 0, 0, row >> 3, &counted};
            ExportHalf second = {st + mid, st, nst - mid, mid, kc, k2, a2, nkeys, naggs, release, 0, row, row >> 3,
                                 &counted};
            pthread_t other;
            if (pthread_create(&other, NULL, export_half, &second) == 0) {
                export_half(&first);
                pthread_join(other, NULL);
                for (int k = 0; k < nkeys; k++) {
                    keys[k].nulls += k2[k].nulls;
                    keys[k].xlen = k2[k].xlen;
                    keys[k].dlen = k2[k].dlen;
                }
                for (int a = 0; a < naggs; a++) {
                    aggs[a].nulls += a2[a].nulls;
                    aggs[a].xlen = a2[a].xlen;
                }
                free(k2);
                free(a2);
                return first.r ? first.r : second.r;
            }
        }
        free(k2);
        free(a2);
    }
#endif
    return export_fill(st, nst, kc, keys, aggs, release, 0, SIZE_MAX, NULL);
}

/* a bytes object of n bytes (zeroed when zero is set) into *o, its bytes into *p */
static int export_bytes(PyObject **o, char **p, size_t n, int zero) {
    *o = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)n);
    if (!*o) return -1;
    *p = PyBytes_AS_STRING(*o);
    if (zero) memset(*p, 0, n);
    return 0;
}

static void export_free(ExportCol *cols, int n) {
    for (int i = 0; cols && i < n; i++) {
        Py_XDECREF(cols[i].validity);
        Py_XDECREF(cols[i].values);
        Py_XDECREF(cols[i].data);
    }
    free(cols);
}

/* export_columns(states, key_codes, release=False) -> (groups, keys, aggs): the groups of
 * every state, one after another, as Arrow buffers: per key and per aggregate (validity,
 * values, data or None, nulls, wide). key_codes has a letter per key: 'q' int64, 'd'
 * double, 'i' int32 (days), 'b' boolean, 's' string (int32 offsets and data). An
 * aggregate's values are int64 counts, doubles (averages, and any aggregate of doubles),
 * int64 minimum and maximum (int32 of a date's days) or an integer sum: int64, or 16-byte
 * decimal128 where one passes BIGINT (wide 1; wide 2 past 38 digits, which no
 * decimal128(38, 0) holds). With release, each state's tables are freed once written
 * (their groups are gone after), so the answer and the tables are not all held at once. */
static PyObject *export_columns(PyObject *mod, PyObject *args) {
    PyObject *states_arg;
    const char *kc;
    Py_ssize_t nkc;
    int release = 0;
    if (!PyArg_ParseTuple(args, "Os#|p", &states_arg, &kc, &nkc, &release)) return NULL;
    PyObject *seq = PySequence_Fast(states_arg, "export_columns() needs a sequence of states");
    if (!seq) return NULL;
    if (PySequence_Fast_GET_SIZE(seq) == 0) {
        Py_DECREF(seq);
        return PyErr_Format(PyExc_ValueError, "export_columns() needs a state");
    }
    Py_ssize_t nst;
    AggStateObject **st = states_of(seq, &nst, (AggStateObject *)PySequence_Fast_GET_ITEM(seq, 0));
    if (!st) {
        Py_DECREF(seq);
        return NULL;
    }
    const AggStateObject *t0 = st[0];
    int nkeys = t0->nkeys, naggs = t0->naggs;
    ExportCol *keys = NULL, *aggs = NULL;
    PyObject *out = NULL, *kl = NULL, *al = NULL;
    if (nkc != nkeys) {
        PyErr_Format(PyExc_ValueError, "export_columns() needs a code per key");
        goto done;
    }
    for (Py_ssize_t k = 0; k < nkc; k++)
        if (!strchr("qdibs", kc[k]) || kc[k] == 0 || (kc[k] == 's') != (t0->key_kinds[k] == K_STR)) {
            PyErr_Format(PyExc_ValueError, "key %zd: code %c does not fit its values", k, kc[k]);
            goto done;
        }
    keys = calloc((size_t)nkeys + 1, sizeof(ExportCol));
    aggs = calloc((size_t)naggs + 1, sizeof(ExportCol));
    if (!keys || !aggs) {
        PyErr_NoMemory();
        goto done;
    }
    /* the groups made distinct, counted, the integer sums' width and the text's bound */
    static const __int128 ten38 = (__int128)10000000000000000000ull * (__int128)10000000000000000000ull;
    size_t total = 0, text = 0;
    int oom = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < nst && !oom; i++) oom = table_compact(st[i]);
    for (Py_ssize_t i = 0; i < nst; i++) {
        total += st[i]->ngroups;
        text += st[i]->key_bytes;
    }
    for (int a = 0; a < naggs; a++)
        if (t0->agg_fns[a] == A_SUM && t0->agg_kinds[a] != K_FLOAT)
            for (Py_ssize_t i = 0; i < nst && aggs[a].wide < 2; i++)
                for (size_t g = 0; g < st[i]->ngroups; g++) {
                    const Cell *c = &group_cells(st[i], g)[t0->agg_cell[a]];
                    if (c->n && !fits_bigint(c->isum)) aggs[a].wide = 1;
                    if (c->n && (c->isum >= ten38 || c->isum <= -ten38)) {
                        aggs[a].wide = 2;
                        break;
                    }
                }
    Py_END_ALLOW_THREADS
    if (oom) {
        PyErr_NoMemory();
        goto done;
    }
    size_t bitmap = (total + 7) / 8;
    for (int k = 0; k < nkeys; k++) {
        ExportCol *c = &keys[k];
        size_t values = kc[k] == 'b' ? bitmap : (total + (kc[k] == 's')) * key_width(kc[k]);
        if (export_bytes(&c->validity, &c->v, bitmap, 1) || export_bytes(&c->values, &c->x, values, kc[k] == 'b'))
            goto done;
        if (kc[k] == 's') {
            if (export_bytes(&c->data, &c->d, text, 0)) goto done;
            c->dcap = text;
        }
    }
    for (int a = 0; a < naggs; a++) {
        ExportCol *c = &aggs[a];
        if (export_bytes(&c->validity, &c->v, bitmap, 1) ||
            export_bytes(&c->values, &c->x, total * agg_width(t0->agg_fns[a], t0->agg_kinds[a], c->wide), 0))
            goto done;
    }
    int r;
    Py_BEGIN_ALLOW_THREADS
    r = export_all(st, nst, kc, keys, aggs, release, total);
    Py_END_ALLOW_THREADS
    if (r) {
        PyErr_SetString(PyExc_OverflowError, "a text key's column passes 2 GiB");
        goto done;
    }
    kl = PyList_New(nkeys);
    al = PyList_New(naggs);
    if (!kl || !al) goto done;
    for (int k = 0; k < nkeys; k++) {
        ExportCol *c = &keys[k];
        if (c->data && _PyBytes_Resize(&c->data, (Py_ssize_t)c->dlen) < 0) goto done;
        PyObject *col = Py_BuildValue("(OOOni)", c->validity, c->values, c->data ? c->data : Py_None,
                                      (Py_ssize_t)c->nulls, 0);
        if (!col) goto done;
        PyList_SET_ITEM(kl, k, col);
    }
    for (int a = 0; a < naggs; a++) {
        ExportCol *c = &aggs[a];
        PyObject *col = Py_BuildValue("(OOOni)", c->validity, c->values, Py_None, (Py_ssize_t)c->nulls, c->wide);
        if (!col) goto done;
        PyList_SET_ITEM(al, a, col);
    }
    out = Py_BuildValue("(nOO)", (Py_ssize_t)total, kl, al);
done:
    Py_XDECREF(kl);
    Py_XDECREF(al);
    export_free(keys, nkeys);
    export_free(aggs, naggs);
    free(st);
    Py_DECREF(seq);
    return out;
}

/* export_top(states, agg) -> (rows, groups, values, validity, nulls): the rows the top-k
 * aggregate agg (A_TOP) gives, the groups of every state one after another (numbered
 * in export_columns' order): per row, the int64 number of its group, its value (int64,
 * or a double) and its validity bit (NULLs: at their end, or first, as the ORDER BY
 * puts them). ValueError when a group's rows are not determined (held_top). */
static PyObject *export_top(PyObject *mod, PyObject *args) {
    PyObject *states_arg;
    int a;
    if (!PyArg_ParseTuple(args, "Oi", &states_arg, &a)) return NULL;
    PyObject *seq = PySequence_Fast(states_arg, "export_top() needs a sequence of states");
    if (!seq) return NULL;
    Py_ssize_t nst = 0;
    AggStateObject **st = PySequence_Fast_GET_SIZE(seq)
        ? states_of(seq, &nst, (AggStateObject *)PySequence_Fast_GET_ITEM(seq, 0)) : NULL;
    PyObject *groups = NULL, *values = NULL, *validity = NULL, *out = NULL;
    if (!st) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "export_top() needs a state");
        goto done;
    }
    if (a < 0 || a >= st[0]->naggs || st[0]->agg_fns[a] != A_TOP) {
        PyErr_SetString(PyExc_ValueError, "export_top() needs a top-k aggregate");
        goto done;
    }
    int kind = st[0]->agg_kinds[a], param = st[0]->agg_params[a], nulls_first = param >> 9 & 1, bad = 0, oom = 0;
    size_t rows = 0, nulls = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < nst && !oom; i++) oom = table_compact(st[i]);
    for (Py_ssize_t i = 0; i < nst && !oom && !bad; i++)
        for (size_t g = 0; g < st[i]->ngroups; g++) {
            size_t v, n;
            if (held_top(&group_cells(st[i], g)[st[i]->agg_cell[a]], kind, param, &v, &n)) {
                bad = 1;
                break;
            }
            rows += v + n;
            nulls += n;
        }
    Py_END_ALLOW_THREADS
    if (oom) {
        PyErr_NoMemory();
        goto done;
    }
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "the rows kept are not determined: the cut falls among zeros of both signs");
        goto done;
    }
    char *gp, *vp, *bp;
    if (export_bytes(&groups, &gp, rows * 8, 0) || export_bytes(&values, &vp, rows * 8, 1) ||
        export_bytes(&validity, &bp, (rows + 7) / 8, 1))
        goto done;
    Py_BEGIN_ALLOW_THREADS
    size_t row = 0;
    int64_t group = 0;
    for (Py_ssize_t i = 0; i < nst; i++)
        for (size_t g = 0; g < st[i]->ngroups; g++, group++) {
            Cell *c = &group_cells(st[i], g)[st[i]->agg_cell[a]];
            size_t v, n;
            held_top(c, kind, param, &v, &n);
            for (size_t j = 0; j < v + n; j++, row++) {
                memcpy(gp + row * 8, &group, 8);
                int is_null = nulls_first ? j < n : j >= v;
                if (is_null) continue;
                memcpy(vp + row * 8, &top_values(c, param)[nulls_first ? j - n : j], 8);
                bp[row >> 3] |= (char)(1 << (row & 7));
            }
        }
    Py_END_ALLOW_THREADS
    out = Py_BuildValue("(nOOOn)", (Py_ssize_t)rows, groups, values, validity, (Py_ssize_t)nulls);
done:
    Py_XDECREF(groups);
    Py_XDECREF(values);
    Py_XDECREF(validity);
    free(st);
    Py_DECREF(seq);
    return out;
}

static PyObject *AggState_len(AggStateObject *self, void *c) {
    if (table_compact(self)) return PyErr_NoMemory();
    return PyLong_FromSize_t(self->ngroups);
}

/* whether the groups lie in partition order (hashes kept, more than one group): an
 * unindexed scan's run table, packed (table_run), for tests */
static PyObject *AggState_in_partition_order(AggStateObject *self, void *c) {
    if (!self->hashes || self->ngroups < 2) Py_RETURN_FALSE;
    for (size_t g = 1; g < self->ngroups; g++)
        if (part_of(self->hashes[g]) < part_of(self->hashes[g - 1])) Py_RETURN_FALSE;
    Py_RETURN_TRUE;
}

static PyMethodDef AggState_methods[] = {
    {"merge", (PyCFunction)AggState_merge, METH_O, "fold another partial state into this one"},
    {"export", (PyCFunction)AggState_export, METH_NOARGS, "(keys, aggs) as lists of Python values"},
    {"fold", (PyCFunction)AggState_fold, METH_O, "the groups merged by one id per group, keyed by the id"},
    {"partitions", (PyCFunction)AggState_partitions, METH_NOARGS, "empty states of this plan, one per partition"},
    {NULL},
};
static PyGetSetDef AggState_getset[] = {
    {"groups", (getter)AggState_len, NULL, "number of groups", NULL},
    {"in_partition_order", (getter)AggState_in_partition_order, NULL, "whether the groups lie by partition", NULL},
    {NULL}};

static PyTypeObject AggStateType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "gateway_csv._scanner.AggState",
    .tp_basicsize = sizeof(AggStateObject),
    .tp_dealloc = (destructor)AggState_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "partial aggregates of one or more chunks, keyed by group",
    .tp_methods = AggState_methods,
    .tp_getset = AggState_getset,
};

/* ------------------------------------------------------------- the scan */

typedef struct {
    Buf validity, values, data;
    size_t nulls;
} OutCol;

/* A row waiting to be aggregated: its group key, the key's hash, the values of its aggregates. */
typedef struct {
    Buf key;
    uint64_t hash;
    Val vals[MAX_KEYS];
    Val vals2[MAX_KEYS]; /* a two-argument aggregate's second value */
} Pending;
#define AGG_PEEK 3  /* a row's group record is prefetched this many rows after it is read */
#define AGG_TEXT 6  /* the arena's bytes of its key (a text key), this many */
#define AGG_LAG 9   /* and the row is folded in this many */
#define AGG_ROWS 16 /* a power of two above AGG_LAG */
#define UNINDEX_CHECK 4096 /* rows between checks of the groups a scan's lookups found */
/* Rows a scan looks up before it may stop: until then even a scan of 1e5 groups finds
 * mostly new ones (1e5 keys drawn at random: 52% of the rows from 65,536 to 69,632 are
 * new groups, 99% for 1e7 keys); past it, a scan stops looking up when more than 3 in 4
 * of the last UNINDEX_CHECK rows were new groups. */
#define UNINDEX_FROM 65536
/* An unindexed scan expecting this many rows or more appends them in runs by partition
 * (table_run) */
#define RUNS_FROM 8192
/* A scan whose table holds at most DIRECT_GROUPS groups (all of them in cache, where
 * the pipeline's prefetches hide nothing) folds each row in as it is read, and finds its
 * group in a small cache by the key's raw bytes (direct_sig), without making the key
 * or hashing it: h2o's q1 and q4 (100 groups), TPC-H Q1 (4). Past DIRECT_GROUPS it
 * goes on through the pipeline (aggregate_row). */
#define DIRECT_GROUPS 4096
#define DIRECT_CACHE 1024 /* a power of two */
typedef struct {
    uint64_t w0, w1; /* the key's bytes or values (direct_sig) */
    uint32_t len;     /* their lengths and NULLs; UINT32_MAX: an empty entry */
    uint32_t g;       /* the group */
} DirectEntry;

typedef struct {
    const char *base;
    Py_ssize_t size;
    Plan *plan;
    Py_ssize_t start, boundary, limit;
    /* outputs */
    Py_ssize_t end, rows_out, rows_seen, skipped;
    int err;
    Py_ssize_t err_offset;
    int err_col;
    int oom;
    AggStateObject *agg;
    OutCol *cols;
    /* per-row scratch */
    Val vals[MAX_SLOTS];
    Buf scratch[MAX_SLOTS];
    /* the rows on their way into agg (aggregate_row): row r in pending[r & (AGG_ROWS - 1)] */
    Pending pending[AGG_ROWS];
    size_t agg_rows;
    size_t checked_groups; /* the groups at the last UNINDEX_CHECK */
    /* an unindexed scan stops at the first row starting spill bytes past its start
     * (spill_at: that offset, set once it stops looking up), when spill >= 0 */
    Py_ssize_t spill, spill_at;
    int64_t counted; /* rows counted by rows_count (count_rows), added to agg at the end */
    /* few groups (aggregate_direct): rows are folded as they are read, their group found
     * in dcache by the key's raw bytes; pipe_from: the first row of the pipeline since */
    int direct;
    size_t pipe_from;
    Buf dkey;
    DirectEntry dcache[DIRECT_CACHE];
} Scan;

static inline int is_null_text(const Plan *p, const char *s, size_t n) {
    /* most fields have no null text's length: the loop of memcmp calls was 4% of a
     * Q04 scan's instructions */
    if (!(p->null_len_bits >> (n < 63 ? n : 63) & 1)) return 0;
    for (int i = 0; i < p->nnull; i++)
        if (p->null_lens[i] == n && memcmp(p->nulls[i], s, n) == 0) return 1;
    return 0;
}

/* Parse one quoted field starting at *pp (on the opening quote). Sets the raw
 * content span and whether it needs unescaping; leaves *pp after the closing quote. */
static int quoted_field(const Plan *pl, const char **pp, const char *end, const char **s, size_t *n, int *esc) {
    const char *p = *pp + 1;
    char q = (char)pl->quote;
    *s = p;
    *esc = 0;
    for (;;) {
        const char *hit = memchr(p, q, (size_t)(end - p));
        if (pl->escape >= 0 && pl->escape != pl->quote) {
            const char *e = memchr(p, pl->escape, (size_t)((hit ? hit : end) - p));
            if (e) {
                if (e + 1 >= end) return E_QUOTE;
                *esc = 1;
                p = e + 2;
                continue;
            }
        }
        if (!hit) return E_QUOTE;
        if (hit + 1 < end && hit[1] == q) {
            *esc = 1;
            p = hit + 2;
            continue;
        }
        *n = (size_t)(hit - *s);
        *pp = hit + 1;
        return E_NONE;
    }
}

/* With pad: the field starting at p, moved past a blank when a quote follows it
 * (DuckDB's state machine skips one blank before an opening quote, EMPTY_SPACE;
 * a second blank, or one before anything else, is text) */
static inline const char *quote_start(const Plan *pl, const char *p, const char *end) {
    if (!pl->pad || pl->quote < 0) return p;
    return end - p >= 2 && p[0] == ' ' && p[1] == (char)pl->quote ? p + 1 : p;
}

/* With pad: past the blanks after a closing quote */
static inline const char *after_quote(const Plan *pl, const char *p, const char *end) {
    if (pl->pad)
        while (p < end && *p == ' ') p++;
    return p;
}

static void unescape(const Plan *pl, const char *s, size_t n, Buf *b) {
    b->len = 0;
    if (buf_reserve(b, n + 1)) return;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (pl->escape >= 0 && pl->escape != pl->quote && c == (char)pl->escape && i + 1 < n) {
            b->p[b->len++] = s[++i];
        } else if (c == (char)pl->quote && i + 1 < n && s[i + 1] == c) {
            b->p[b->len++] = c;
            i++;
        } else {
            b->p[b->len++] = c;
        }
    }
}

/* A row of `fields` fields that is not ncols wide, from `from` to the next row's start
 * `next`: E_WIDE when it has one field more, unquoted and empty (the row ends in the
 * delimiter), which DuckDB's reader drops and reads the row; E_RAGGED otherwise */
static int misfit(const Plan *pl, int fields, const char *from, const char *next) {
    if (pl->trailing || fields != pl->ncols + 1) return E_RAGGED;
    if (next > from && next[-1] == '\n') next--;
    if (next > from && next[-1] == '\r') next--;
    return next > from && next[-1] == pl->delim ? E_WIDE : E_RAGGED;
}

/* count_row: skip the remaining fields of a row from p (which is at a delimiter or a row end),
 * counting them; returns the error code, sets *next to the next row's start */
static int count_row(const Plan *pl, const char *p, const char *end, int fields, const char **next) {
    const char *from = p;
    int count;
#ifdef HAVE_AVX2
    const char *next_row = use_avx2 ? count_to_row_end_avx2(p, end, pl->delim, pl->quote, pl->quoted, &count)
                                    : count_to_row_end(p, end, pl->delim, pl->quote, &count);
#else
    const char *next_row = count_to_row_end(p, end, pl->delim, pl->quote, &count);
#endif
    if (next_row) {
        *next = next_row;
        return fields + count == pl->ncols ? E_NONE : misfit(pl, fields + count, from, next_row);
    }
    /* slow path: a quote in the rest of the row, which may hide newlines */
    while (p < end && *p == pl->delim) {
        p++;
        fields++;
        p = quote_start(pl, p, end);
        if (p < end && *p == (char)pl->quote) {
            const char *s;
            size_t n;
            int esc;
            int e = quoted_field(pl, &p, end, &s, &n, &esc);
            if (e) return *next = end, e;
            p = after_quote(pl, p, end);
        } else {
            while (p < end && *p != pl->delim && *p != '\n') p++;
        }
    }
    if (p < end && *p == '\r') p++;
    if (p < end && *p != '\n') {
        /* garbage after a closing quote */
        const char *nl2 = memchr(p, '\n', (size_t)(end - p));
        *next = nl2 ? nl2 + 1 : end;
        return E_RAGGED;
    }
    *next = p < end ? p + 1 : end;
    return fields == pl->ncols ? E_NONE : misfit(pl, fields, from, *next);
}

/* count_row, and with a trailing delimiter, the row's last field must be empty
 * (the check runs only on rows that end well, and only for such files) */
static int finish_row(const Plan *pl, const char *p, const char *end, int fields, const char **next) {
    int e = count_row(pl, p, end, fields, next);
    if (e || !pl->trailing) return e;
    const char *last = *next;
    if (last > p && last[-1] == '\n') last--;
    if (last > p && last[-1] == '\r') last--;
    return last > p && last[-1] == pl->delim ? E_NONE : E_RAGGED;
}

static inline int convert(Scan *sc, int si, const char *s, size_t n, int quoted, int esc) {
    const Plan *pl = sc->plan;
    Val *v = &sc->vals[si];
    int kind = pl->slots[si].kind;
    if (esc) {
        unescape(pl, s, n, &sc->scratch[si]);
        s = sc->scratch[si].p;
        n = sc->scratch[si].len;
    }
    v->is_null = 0;
    if (is_null_text(pl, s, n) || (kind != K_STR && n == 0 && !quoted)) {
        v->is_null = 1;
        return E_NONE;
    }
    switch (kind) {
    case K_STR:
        v->s = s;
        v->n = n;
        for (size_t i = 0; i < n; i++)
            if ((unsigned char)s[i] >= 0x80) return valid_utf8((const unsigned char *)s, n) ? E_NONE : E_UTF8;
        return E_NONE;
    case K_INT: return parse_int(s, n, &v->i) ? E_TYPE : E_NONE;
    case K_FLOAT: return parse_double_at(s, n, esc ? s + n : sc->base + sc->size, &v->f) ? E_TYPE : E_NONE;
    case K_TS: return parse_timestamp(s, n, &v->i, 0) ? E_TYPE : E_NONE;
    case K_TSTZ: return parse_timestamp(s, n, &v->i, 1) ? E_TYPE : E_NONE;
    case K_DATE: return parse_date(s, n, &v->i) ? E_TYPE : E_NONE;
    case K_BOOL: return parse_bool(s, n, &v->i) ? E_TYPE : E_NONE;
    }
    return E_TYPE;
}

/* Skip field c (starting at *pp, possibly quoted) and the delimiter after it.
 * Returns E_NONE, an error, or -1 when the row ended instead. */
static int skip_one_field(const Plan *pl, const char **pp, const char *end) {
    const char *p = quote_start(pl, *pp, end);
    if (p < end && pl->quote >= 0 && *p == (char)pl->quote) {
        const char *s;
        size_t n;
        int esc;
        int e = quoted_field(pl, &p, end, &s, &n, &esc);
        if (e) return *pp = end, e;
        p = after_quote(pl, p, end);
        if (p < end && *p == '\r' && (p + 1 == end || p[1] == '\n')) p++;
    } else {
        p = field_end(p, end, pl->delim);
    }
    *pp = p;
    if (p < end && *p == pl->delim) {
        *pp = p + 1;
        return E_NONE;
    }
    if (p >= end || *p == '\n') return -1;
    return E_AFTER_QUOTE;
}

static const char *next_line(const char *p, const char *end) {
    const char *nl = p < end ? memchr(p, '\n', (size_t)(end - p)) : NULL;
    return nl ? nl + 1 : end;
}

/* Tokenize one row starting at *pp up to its last needed column; fills
 * sc->vals. Returns an error code and the column of the error in *col; *pp
 * moves to the next row's start. */
static int parse_row(Scan *sc, const char **pp, const char *end, int *col) {
    const Plan *pl = sc->plan;
    const char *p = *pp;
    int c = 0; /* p is at the start of field c */
    *col = -1;
    if (pl->nslots == 0) {
        int e = skip_one_field(pl, &p, end);
        if (e > 0) return *pp = next_line(p, end), *col = 0, e;
        if (e < 0) {
            *pp = p < end ? p + 1 : end;
            if (pl->ncols != 1) return *col = pl->ncols, E_RAGGED;
            return E_NONE;
        }
        int r = finish_row(pl, p - 1, end, 1, pp);
        if (r) *col = pl->ncols;
        return r;
    }
    for (int si = 0; si < pl->nslots; si++) {
        int target = pl->slots[si].col;
        while (c < target) {
            int passed;
#ifdef HAVE_AVX2
            p = use_avx2 ? skip_fields_avx2(p, end, target - c, pl->delim, pl->quote, pl->quoted, &passed)
                         : skip_fields(p, end, target - c, pl->delim, pl->quote, &passed);
#else
            p = skip_fields(p, end, target - c, pl->delim, pl->quote, &passed);
#endif
            c += passed;
            if (c == target) break;
            int e = skip_one_field(pl, &p, end);
            if (e) {
                *col = c;
                *pp = e == E_QUOTE ? end : next_line(p, end);
                return e < 0 ? E_RAGGED : e;
            }
            c++;
        }
        const char *s;
        size_t n;
        int quoted = 0, esc = 0;
        p = quote_start(pl, p, end);
        if (p < end && pl->quote >= 0 && *p == (char)pl->quote) {
            int e = quoted_field(pl, &p, end, &s, &n, &esc);
            if (e) {
                *pp = end;
                *col = c;
                return e;
            }
            quoted = 1;
            p = after_quote(pl, p, end);
            if (p < end && *p == '\r' && (p + 1 == end || p[1] == '\n')) p++;
            if (p < end && *p != pl->delim && *p != '\n') {
                *pp = next_line(p, end);
                *col = c;
                return E_AFTER_QUOTE;
            }
        } else {
            s = p;
            p = field_end(p, end, pl->delim);
            n = (size_t)(p - s);
            if (n && s[n - 1] == '\r' && (p == end || *p == '\n')) n--;
        }
        int e = convert(sc, si, s, n, quoted, esc);
        if (e) {
            int r = finish_row(pl, p, end, c + 1, pp);
            *col = c;
            return r == E_RAGGED ? E_RAGGED : e;
        }
        c++;
        if (si + 1 < pl->nslots) {
            if (p < end && *p == pl->delim) {
                p++;
            } else {
                *pp = next_line(p, end);
                *col = c;
                return E_RAGGED;
            }
        }
    }
    int e = finish_row(pl, p, end, c, pp);
    if (e) *col = pl->ncols;
    return e;
}

#ifdef HAVE_AVX2
#define ROW_BLOCKS 4 /* a row fast_row reads: up to 256 bytes */
/* A row read whole from its 64-byte steps' bit masks, when it is plain: its fields'
 * delimiters and its newline found at once (outside quotes: the prefix XOR of the quote
 * bits, carried step to step), each read column's field then sliced out of them and
 * converted, instead of a skip, a field end and a count of the rest per column. Plain
 * (Plan.quoted; a plan that reads columns, no trailing delimiter, two columns or more):
 * every quote opens a field at its start (or after one blank, pad) or closes one right
 * before a delimiter or the newline, no newline inside quotes, the newline within 256
 * bytes and before stop, exactly ncols fields, and every value converts. 1: the row was
 * read (sc->vals, *pp at the next row); 0: it is parse_row's, which reads it with care
 * (and reports what is wrong with it). */
AVX2 static int fast_row(Scan *sc, const char **pp, const char *stop) {
    const Plan *pl = sc->plan;
    const char *p = *pp, *nl_at = NULL;
    const __m256i vd = _mm256_set1_epi8(pl->delim), vn = _mm256_set1_epi8('\n');
    const __m256i vq = _mm256_set1_epi8((char)pl->quote), vb = _mm256_set1_epi8(' ');
    uint64_t delims[ROW_BLOCKS], carry = 0, after = 1; /* after: the step's first byte starts a field */
    int blocks = 0, count = 0;
    while (blocks < ROW_BLOCKS) {
        const char *at = p + 64 * blocks;
        if (stop - at <= 64) return 0;
        __m256i a = _mm256_loadu_si256((const __m256i *)at), b = _mm256_loadu_si256((const __m256i *)(at + 32));
        uint64_t md = rows_bits32(a, b, vd), mn = rows_bits32(a, b, vn), mq = rows_bits32(a, b, vq);
        uint64_t inside = prefix_xor(mq) ^ carry, nl = mn & ~inside;
        uint64_t row = nl ? (nl & (0 - nl)) - 1 : ~(uint64_t)0;
        if (mn & row) return 0; /* a newline inside quotes */
        uint64_t starts = (md << 1) | after;
        if (pl->quoted == 2) starts |= (rows_bits32(a, b, vb) & starts) << 1;
        uint64_t next = at[64] == pl->delim || at[64] == '\n' ? (uint64_t)1 << 63 : 0;
        if (mq & inside & row & ~starts || mq & ~inside & row & ~(((md | mn) >> 1) | next)) return 0;
        delims[blocks] = md & ~inside & row;
        count += __builtin_popcountll(delims[blocks]);
        blocks++;
        if (nl) {
            nl_at = at + __builtin_ctzll(nl);
            break;
        }
        carry = 0 - (inside >> 63);
        after = md >> 63 & ~inside >> 63;
    }
    if (!nl_at || count != pl->ncols - 1) return 0;
    int c = 0, bi = 0;
    uint64_t bits = delims[0];
    const char *from = p; /* field c's first byte */
    for (int si = 0; si < pl->nslots; si++) {
        for (int target = pl->slots[si].col; c < target; c++) {
            while (!bits) bits = delims[++bi];
            from = p + 64 * bi + __builtin_ctzll(bits) + 1;
            bits &= bits - 1;
        }
        const char *to = nl_at; /* the field's end: the next delimiter, or the newline */
        while (!bits && bi + 1 < blocks) bits = delims[++bi];
        if (bits) to = p + 64 * bi + __builtin_ctzll(bits);
        const char *s = from, *q = from;
        size_t n = (size_t)(to - from);
        int quoted = 0;
        if (pl->quoted == 2 && n >= 2 && q[0] == ' ' && q[1] == (char)pl->quote) q++;
        if (q < to && *q == (char)pl->quote) { /* its closing quote is at to - 1 */
            s = q + 1;
            n = (size_t)(to - 1 - s);
            quoted = 1;
        } else if (to == nl_at && n && s[n - 1] == '\r') {
            n--;
        }
        if (convert(sc, si, s, n, quoted, 0)) return 0;
    }
    *pp = nl_at + 1;
    return 1;
}
#endif

static int passes(const Scan *sc) {
    const Plan *pl = sc->plan;
    for (int i = 0; i < pl->nfilters; i++) {
        const Filter *f = &pl->filters[i];
        const Val *v = &sc->vals[f->slot];
        if (f->op == OP_ISNULL) { if (!v->is_null) return 0; continue; }
        if (f->op == OP_NOTNULL) { if (v->is_null) return 0; continue; }
        if (v->is_null) return 0;
        int cmp;
        if (f->ctype == 'i') {
            cmp = (v->i > f->i) - (v->i < f->i);
        } else if (f->ctype == 'f') {
            double x = pl->slots[f->slot].kind == K_FLOAT ? v->f : (double)v->i;
            if (isnan(x) || isnan(f->f)) cmp = isnan(x) ? (isnan(f->f) ? 0 : 1) : -1;
            else cmp = (x > f->f) - (x < f->f);
        } else {
            size_t m = v->n < f->n ? v->n : f->n;
            cmp = memcmp(v->s, f->s, m);
            if (cmp == 0) cmp = (v->n > f->n) - (v->n < f->n);
        }
        int ok;
        switch (f->op) {
        case OP_EQ: ok = cmp == 0; break;
        case OP_NE: ok = cmp != 0; break;
        case OP_LT: ok = cmp < 0; break;
        case OP_LE: ok = cmp <= 0; break;
        case OP_GT: ok = cmp > 0; break;
        default: ok = cmp >= 0; break;
        }
        if (!ok) return 0;
    }
    return 1;
}

static double round_half_away(double x) { return round(x); }

/* A date (days) or timestamp (days + microseconds of the day) truncated to fn's
 * unit: the year for F_TRUNC_YEAR, year * 12 + month - 1 for F_TRUNC_MONTH (the
 * first day of either is computed per group afterwards: per row it cost a fifth
 * more than year()), otherwise in the column's own representation: days for a
 * date, microseconds since the epoch for a timestamp. */
static int64_t truncated(int kind, int64_t days, int64_t us, int fn) {
    static const int64_t unit_us[] = {[F_TRUNC_DAY] = 86400000000LL, [F_TRUNC_HOUR] = 3600000000LL,
                                      [F_TRUNC_MINUTE] = 60000000LL, [F_TRUNC_SECOND] = 1000000LL};
    if (fn == F_TRUNC_YEAR) return year_of_days(days);
    if (fn == F_TRUNC_MONTH) {
        int64_t y;
        unsigned m, d;
        civil_from_days(days, &y, &m, &d);
        return y * 12 + (int64_t)m - 1;
    }
    us -= us % unit_us[fn];
    return kind == K_DATE ? days : days * 86400000000LL + us;
}

/* The key of the row in sc->vals, into kb: per key a tag byte, then for a
 * number its 8 bytes (or 4 after tag 5: an integer of 32 bits, unless fixed_key),
 * for a string its length (one byte, or four after tag 4) and bytes, for NULL
 * nothing, or 8 zero bytes when every key is a number (fixed_key). */
static int make_key(Scan *sc, Buf *kb) {
    const Plan *pl = sc->plan;
    kb->len = 0;
    if (buf_reserve(kb, (size_t)pl->nkeys * 9)) return -1;
    for (int k = 0; k < pl->nkeys; k++) {
        const Val *v = &sc->vals[pl->keys[k].slot];
        int kind = pl->slots[pl->keys[k].slot].kind;
        char tag;
        if (v->is_null) {
            kb->p[kb->len++] = 0;
            if (sc->agg->fixed_key) {
                memset(kb->p + kb->len, 0, 8);
                kb->len += 8;
            }
            continue;
        }
        if (kind == K_STR && pl->keys[k].fn == F_IDENT) {
            /* tag 2 and a length byte, or past 254 bytes tag 4 and four */
            if (buf_reserve(kb, 5 + v->n + (size_t)(pl->nkeys - k - 1) * 9)) return -1;
            char *o = kb->p + kb->len;
            if (v->n < 255) {
                o[0] = 2;
                o[1] = (char)v->n;
                o += 2;
            } else {
                uint32_t n = (uint32_t)v->n;
                o[0] = 4;
                memcpy(o + 1, &n, 4);
                o += 5;
            }
            memcpy(o, v->s, v->n);
            kb->len = (size_t)(o + v->n - kb->p);
            continue;
        }
        int64_t out = v->i;
        tag = 1;
        switch (pl->keys[k].fn) {
        case F_IDENT:
            if (kind == K_FLOAT) {
                double d = v->f == 0 ? 0.0 : v->f;
                if (isnan(d)) d = NAN;
                memcpy(&out, &d, 8);
                tag = 3;
            }
            break;
        case F_ROUND: {
            double d = kind == K_FLOAT ? round_half_away(v->f) : (double)v->i;
            if (kind != K_FLOAT) break;
            if (d == 0) d = 0.0;
            if (isnan(d)) d = NAN;
            memcpy(&out, &d, 8);
            tag = 3;
            break;
        }
        default: {
            int64_t days, us = 0;
            if (kind == K_DATE) days = v->i;
            else {
                days = v->i / 86400000000LL;
                us = v->i % 86400000000LL;
                if (us < 0) us += 86400000000LL, days--;
            }
            int fn = pl->keys[k].fn;
            if (fn >= F_TRUNC_YEAR) {
                out = truncated(kind, days, us, fn);
                break;
            }
            if (fn == F_YEAR) {
                out = year_of_days(days);
                break;
            }
            int64_t y;
            unsigned m, d;
            civil_from_days(days, &y, &m, &d);
            out = fn == F_YEAR ? y : fn == F_MONTH ? (int64_t)m : fn == F_DAY ? (int64_t)d : us / 3600000000LL;
        }
        }
        char *o = kb->p + kb->len;
        if (tag == 1 && !sc->agg->fixed_key && out >= INT32_MIN && out <= INT32_MAX) {
            /* beside a text key (the key's length varies anyway), an integer of 32 bits
             * takes 4 bytes (tag 5): h2o's q10, 12 bytes of 1e7 groups' keys */
            int32_t small = (int32_t)out;
            o[0] = 5;
            memcpy(o + 1, &small, 4);
            kb->len += 5;
            continue;
        }
        o[0] = tag;
        memcpy(o + 1, &out, 8);
        kb->len += 9;
    }
    return 0;
}

/* a statistical aggregate's row folded into its cells c, unless a value is NULL */
static inline void stats_row(const Plan *pl, const Agg *ag, Cell *c, const Val *v, const Val *v2) {
    if (v->is_null || (v2 && v2->is_null)) return;
    double y = pl->slots[ag->slot].kind == K_FLOAT ? v->f : (double)v->i;
    double x = !v2 ? 0 : pl->slots[ag->slot2].kind == K_FLOAT ? v2->f : (double)v2->i;
    stats_add(c, ag->fn, y, x);
}

/* fold a pending row into its group */
FMA_CLONES static int aggregate_pending(Scan *sc, const Pending *row) {
    const Plan *pl = sc->plan;
    const char *k = row->key.p ? row->key.p : "";
    Cell *cells = sc->agg->unindexed ? table_append(sc->agg, k, row->key.len, row->hash)
                                     : table_find(sc->agg, k, row->key.len, row->hash);
    if (!cells) return -1;
    for (int a = 0; a < pl->naggs; a++) {
        const Agg *ag = &pl->aggs[a];
        Cell *c = &cells[sc->agg->agg_cell[a]];
        if (ag->fn == A_COUNT_STAR) { c->n++; continue; }
        const Val *v = &row->vals[a];
        if (IS_STATISTIC(ag->fn)) {
            stats_row(pl, ag, c, v, ag->slot2 >= 0 ? &row->vals2[a] : NULL);
            continue;
        }
        int kind = pl->slots[ag->slot].kind;
        if (IS_HELD(ag->fn)) {
            if (held_put(c, v, ag->fn, kind, ag->param)) return -1;
            continue;
        }
        if (v->is_null) continue;
        Cell one = {0};
        one.n = 1;
        if (kind == K_FLOAT) one.f = v->f;
        else if (ag->fn == A_MIN || ag->fn == A_MAX) one.i = v->i;
        else one.isum = v->i;
        cell_merge(c, &one, ag->fn, kind, 0);
    }
    return 0;
}

/* n <= 8 bytes at s as a word (the rest zero); limit: how far s may be read */
static inline uint64_t word_of(const char *s, size_t n, const char *limit) {
    uint64_t w = 0;
    if (n == 0) return 0;
    if (limit - s >= 8) {
        memcpy(&w, s, 8);
        return n >= 8 ? w : w & ((1ull << (8 * n)) - 1);
    }
    for (size_t i = 0; i < n; i++) w |= (uint64_t)(unsigned char)s[i] << (8 * i);
    return w;
}

/* Whether the plan's keys fit direct_sig: at most two, each a column itself, not a float
 * (make_key makes -0.0 and NaN one key each) */
static int direct_plan(const Plan *pl) {
    if (pl->nkeys > 2) return 0;
    for (int k = 0; k < pl->nkeys; k++)
        if (pl->keys[k].fn != F_IDENT || pl->slots[pl->keys[k].slot].kind == K_FLOAT) return 0;
    return 1;
}

/* The row's key as two words and their lengths, equal for two rows exactly when
 * make_key makes the same key of them: a lone text of up to 16 bytes in both words,
 * else each key a word (a text of up to 8 bytes, or the value); per key a length
 * byte (a text's length, 0xFF a value, 0xFE NULL). -1: the key does not fit. */
static inline int direct_sig(const Scan *sc, uint64_t *w0, uint64_t *w1, uint32_t *len) {
    const Plan *pl = sc->plan;
    const char *mapped = sc->base, *limit = sc->base + sc->size;
    uint64_t w[2] = {0, 0};
    uint32_t l = 0;
    for (int k = 0; k < pl->nkeys; k++) {
        const Val *v = &sc->vals[pl->keys[k].slot];
        uint32_t b;
        if (v->is_null) {
            b = 0xFE;
        } else if (pl->slots[pl->keys[k].slot].kind == K_STR) {
            /* an unescaped text is in scratch, not the mapping: read to its end only */
            const char *lim = v->s >= mapped && v->s < limit ? limit : v->s + v->n;
            if (pl->nkeys == 1 && v->n <= 16) {
                w[0] = word_of(v->s, v->n < 8 ? v->n : 8, lim);
                if (v->n > 8) w[1] = word_of(v->s + 8, v->n - 8, lim);
            } else if (v->n <= 8) {
                w[k] = word_of(v->s, v->n, lim);
            } else {
                return -1;
            }
            b = (uint32_t)v->n;
        } else {
            w[k] = (uint64_t)v->i;
            b = 0xFF;
        }
        l |= b << (8 * k);
    }
    *w0 = w[0];
    *w1 = w[1];
    *len = l;
    return 0;
}

/* The value an aggregate of the row in vals takes: its column's, or its product's */
static inline const Val *agg_value(const Agg *ag, const Val *vals, Val *out) {
    if (!ag->nfactors) return &vals[ag->slot];
    double acc = 0;
    for (int i = 0; i < ag->nfactors; i++) {
        const Factor *f = &ag->factors[i];
        const Val *v = &vals[f->slot];
        if (v->is_null) {
            out->is_null = 1;
            return out;
        }
        double x = v->f, y;
        switch (f->op) {
        case F_LIT_PLUS: y = f->lit + x; break;
        case F_LIT_MINUS: y = f->lit - x; break;
        case F_X_PLUS: y = x + f->lit; break;
        case F_X_MINUS: y = x - f->lit; break;
        default: y = x;
        }
        acc = i ? acc * y : y;
    }
    out->is_null = 0;
    out->f = acc;
    return out;
}

/* the row's aggregates in sc->vals folded into its group's cells (as aggregate_pending);
 * -1 when out of memory */
static inline int fold_row(const Plan *pl, const int *agg_cell, Cell *cells, const Val *vals) {
    for (int a = 0; a < pl->naggs; a++) {
        const Agg *ag = &pl->aggs[a];
        Cell *c = &cells[agg_cell[a]];
        if (ag->fn == A_COUNT_STAR) { c->n++; continue; }
        if (IS_STATISTIC(ag->fn)) {
            stats_row(pl, ag, c, &vals[ag->slot], ag->slot2 >= 0 ? &vals[ag->slot2] : NULL);
            continue;
        }
        Val product;
        const Val *v = agg_value(ag, vals, &product);
        int kind = pl->slots[ag->slot].kind;
        if (IS_HELD(ag->fn)) {
            if (held_put(c, v, ag->fn, kind, ag->param)) return -1;
            continue;
        }
        if (v->is_null) continue;
        if ((ag->fn == A_SUM || ag->fn == A_AVG)) {
            if (kind == K_FLOAT) c->f += v->f;
            else c->isum += v->i;
            c->n++;
            continue;
        }
        Cell one = {0};
        one.n = 1;
        if (kind == K_FLOAT) one.f = v->f;
        else if (ag->fn == A_MIN || ag->fn == A_MAX) one.i = v->i;
        else one.isum = v->i;
        cell_merge(c, &one, ag->fn, kind, 0);
    }
    return 0;
}

/* The row in sc->vals folded into its group now (few groups: see DIRECT_GROUPS) */
FMA_CLONES static int aggregate_direct(Scan *sc) {
    AggStateObject *t = sc->agg;
    uint64_t w0, w1;
    uint32_t len;
    Cell *c;
    if (direct_sig(sc, &w0, &w1, &len) == 0) {
        uint64_t h = (w0 ^ (w1 * 0xC2B2AE3D27D4EB4Full) ^ len) * 0x9E3779B97F4A7C15ull;
        DirectEntry *e = &sc->dcache[h >> 54 & (DIRECT_CACHE - 1)];
        if (e->w0 == w0 && e->w1 == w1 && e->len == len) {
            c = group_cells(t, e->g);
        } else {
            if (make_key(sc, &sc->dkey)) return -1;
            const char *k = sc->dkey.p ? sc->dkey.p : "";
            c = table_find(t, k, sc->dkey.len, hash_bytes(k, sc->dkey.len));
            if (!c) return -1;
            e->w0 = w0;
            e->w1 = w1;
            e->len = len;
            e->g = (uint32_t)(((char *)c - t->groups) / t->stride);
        }
    } else {
        if (make_key(sc, &sc->dkey)) return -1;
        const char *k = sc->dkey.p ? sc->dkey.p : "";
        c = table_find(t, k, sc->dkey.len, hash_bytes(k, sc->dkey.len));
        if (!c) return -1;
    }
    return fold_row(sc->plan, t->agg_cell, c, sc->vals);
}

/* The row in sc->vals, aggregated AGG_LAG rows later: a group's index slot,
 * record and text key are usually cache misses (1e5 groups' records are
 * megabytes, and the rows streaming through evict them), each address known
 * only once the one before it is read, so its key is made and its index slot
 * prefetched now, its record AGG_PEEK rows later, its key's bytes AGG_TEXT rows
 * later, and it is folded in at AGG_LAG, while the misses have been
 * overlapping the parsing. Rows are folded in order. */
static int aggregate_row(Scan *sc) {
    const Plan *pl = sc->plan;
    AggStateObject *t = sc->agg;
    size_t r = sc->agg_rows++;
    if ((r & (UNINDEX_CHECK - 1)) == UNINDEX_CHECK - 1 && !t->unindexed) {
        if (r >= UNINDEX_FROM && (t->ngroups - sc->checked_groups) * 4 > UNINDEX_CHECK * 3) {
            /* most rows are new groups still: looking them up would merge few */
            table_free(t->index, t->cap * sizeof(uint64_t), 0);
            t->index = NULL;
            t->cap = 0;
            t->unindexed = 1;
        }
        sc->checked_groups = t->ngroups;
    }
    if (sc->direct) {
        if (!t->unindexed && t->ngroups <= DIRECT_GROUPS) {
            sc->pipe_from = r + 1;
            return aggregate_direct(sc);
        }
        sc->direct = 0; /* many groups: through the pipeline from this row on */
    }
    Pending *row = &sc->pending[r & (AGG_ROWS - 1)];
    if (make_key(sc, &row->key)) return -1;
    row->hash = hash_bytes(row->key.p ? row->key.p : "", row->key.len);
    for (int a = 0; a < pl->naggs; a++) {
        if (pl->aggs[a].fn != A_COUNT_STAR) row->vals[a] = *agg_value(&pl->aggs[a], sc->vals, &row->vals[a]);
        if (pl->aggs[a].slot2 >= 0) row->vals2[a] = sc->vals[pl->aggs[a].slot2];
    }
    size_t run = t->runs ? part_of(row->hash) : 0;
    if (t->runs && t->run_len[run] < t->run_cap) {
        /* the record and hash its run will take: 64 runs written at once are more streams
         * than the processor follows, and each record stalled on its line's first write
         * (a full run: nothing to prefetch, the row goes after the packed runs) */
        size_t g = run * t->run_cap + t->run_len[run];
        const char *rec = group_record(t, g);
        __builtin_prefetch(rec, 1);
        __builtin_prefetch(rec + t->stride - 1, 1);
        __builtin_prefetch(&t->hashes[g], 1);
    }
    if (t->cap) {
        __builtin_prefetch(&t->index[slot_of(row->hash, t->cap)]);
        if (r >= sc->pipe_from + AGG_PEEK) {
            const Pending *prev = &sc->pending[(r - AGG_PEEK) & (AGG_ROWS - 1)];
            uint32_t g = (uint32_t)t->index[slot_of(prev->hash, t->cap)];
            if (g) {
                /* the record's first and last lines: its cells, and its key after them */
                const char *rec = group_record(t, g - 1);
                for (size_t at = 0; at < t->stride; at += 64) __builtin_prefetch(rec + at);
                __builtin_prefetch(rec + t->stride - 1);
            }
        }
        if (!t->fixed_key && r >= sc->pipe_from + AGG_TEXT) {
            const Pending *prev = &sc->pending[(r - AGG_TEXT) & (AGG_ROWS - 1)];
            uint32_t g = (uint32_t)t->index[slot_of(prev->hash, t->cap)];
            if (g) {
                const char *a = group_record(t, g - 1) + t->key_at;
                uint32_t len, off;
                memcpy(&len, a, 4);
                memcpy(&off, a + 4, 4);
                if (len > t->key_inline) __builtin_prefetch(t->arena.p + off);
            }
        }
    }
    if (r >= sc->pipe_from + AGG_LAG) return aggregate_pending(sc, &sc->pending[(r - AGG_LAG) & (AGG_ROWS - 1)]);
    return 0;
}

/* fold in the rows still pending, at the end of a scan, and the rows count_rows counted
 * (a plan of counts and no key: the one group, keyed by nothing) */
static int aggregate_flush(Scan *sc) {
    size_t first = sc->agg_rows >= sc->pipe_from + AGG_LAG ? sc->agg_rows - AGG_LAG : sc->pipe_from;
    for (size_t r = first; r < sc->agg_rows; r++)
        if (aggregate_pending(sc, &sc->pending[r & (AGG_ROWS - 1)])) return -1;
    sc->agg_rows = 0;
    if (sc->counted) {
        Cell *c = table_find(sc->agg, "", 0, hash_bytes("", 0));
        if (!c) return -1;
        for (int a = 0; a < sc->plan->naggs; a++) c[sc->agg->agg_cell[a]].n += sc->counted;
        sc->counted = 0;
    }
    return 0;
}

/* Whether a scan only counts rows (count(*) and nothing else, no key, no filter, no
 * limit), which rows_count can do for it, and its dialect for that */
static int counts_only(const Scan *sc, RowsDialect *dl) {
    const Plan *pl = sc->plan;
    if (!sc->agg || pl->nslots || pl->nfilters || pl->nkeys || !pl->naggs || sc->limit >= 0 || pl->trailing)
        return 0;
    for (int a = 0; a < pl->naggs; a++)
        if (pl->aggs[a].fn != A_COUNT_STAR) return 0;
    dl->delim = pl->delim;
    dl->quote = pl->quote;
    dl->escape = pl->escape;
    dl->comment = pl->comment;
    dl->pad = pl->pad;
    dl->ncols = pl->ncols;
    return rows_dialect_ok(dl);
}

static int bit_append(Buf *b, size_t row, int bit) {
    if ((row & 7) == 0) {
        char z = 0;
        if (buf_put(b, &z, 1)) return -1;
    }
    if (bit) b->p[row >> 3] |= (char)(1 << (row & 7));
    return 0;
}

static int emit_row(Scan *sc) {
    const Plan *pl = sc->plan;
    size_t row = (size_t)sc->rows_out;
    for (int si = 0; si < pl->nslots; si++) {
        OutCol *oc = &sc->cols[si];
        const Val *v = &sc->vals[si];
        int kind = pl->slots[si].kind;
        if (bit_append(&oc->validity, row, !v->is_null)) return -1;
        oc->nulls += v->is_null;
        switch (kind) {
        case K_STR: {
            if (row == 0) {
                int32_t z = 0;
                if (buf_put(&oc->values, &z, 4)) return -1;
            }
            if (!v->is_null && buf_put(&oc->data, v->s, v->n)) return -1;
            if (oc->data.len > INT32_MAX) return -1;
            int32_t off = (int32_t)oc->data.len;
            if (buf_put(&oc->values, &off, 4)) return -1;
            break;
        }
        case K_FLOAT: {
            double d = v->is_null ? 0 : v->f;
            if (buf_put(&oc->values, &d, 8)) return -1;
            break;
        }
        case K_BOOL:
            if (bit_append(&oc->values, row, !v->is_null && v->i)) return -1;
            break;
        case K_DATE: {
            int32_t d = v->is_null ? 0 : (int32_t)v->i;
            if (buf_put(&oc->values, &d, 4)) return -1;
            break;
        }
        default: {
            int64_t i = v->is_null ? 0 : v->i;
            if (buf_put(&oc->values, &i, 8)) return -1;
        }
        }
    }
    return 0;
}

static void run_scan(Scan *sc) {
    const char *base = sc->base, *end = base + sc->size;
    const char *p = base + sc->start;
    const char *released = p;
    const char *populated = p; /* the window's pages are mapped up to here */
    /* rows start before the boundary; only the last one reads past it */
    const char *last = sc->boundary < sc->size ? base + sc->boundary : end;
    RowsDialect rows;
    const int fast = counts_only(sc, &rows);
#ifdef HAVE_AVX2
    const int simd = use_avx2 ? 2 : 1;
#elif defined(HAVE_SSE2)
    const int simd = 1;
#else
    const int simd = 0;
#endif
    int64_t careful = 0, backoff = 1; /* rows to parse with care before rows_count again */
#ifdef HAVE_AVX2
    const Plan *plan = sc->plan;
    const int fast_rows = use_avx2 && plan->quoted && plan->nslots > 0 && !plan->trailing && plan->ncols >= 2;
#endif
    while (p < end && p - base < sc->boundary) {
        if (p >= populated) { /* map the next window in one call, not a fault per 64 KiB */
            const char *to = populated + RELEASE_EVERY;
            /* never the next chunk's pages: another thread may have read and
             * released them already, and they would stay mapped to the end */
            if (to > last) to = last;
            mapfile_populate(base, populated - base, to - base);
            populated = to;
        }
        if (sc->limit >= 0 && sc->rows_out >= sc->limit) break;
        if (sc->spill_at >= 0 && p - base >= sc->spill_at) break;
        if (fast && careful-- <= 0) {
            /* whole well-formed rows, 64 bytes a step; the row it stops at (a blank, a
             * comment, a ragged or oddly quoted row) is parsed with care below, and
             * after each stop without progress twice as many (up to 4096) */
            int64_t n = 0;
            const char *q = rows_count(&rows, p, populated < last ? populated : last, end, simd, &n);
            if (q != p) {
                sc->counted += n;
                sc->rows_seen += n;
                sc->rows_out += n;
                p = q;
                careful = 0;
                backoff = 1;
                if (p - released >= (Py_ssize_t)RELEASE_EVERY) {
                    mapfile_release(base, released - base, p - base);
                    released = p;
                }
                continue;
            }
            careful = backoff - 1;
            if (backoff < 4096) backoff *= 2;
        }
        const char *row = p;
        if (sc->plan->ncols != 1 && (*p == '\n' || (*p == '\r' && p + 1 < end && p[1] == '\n'))) {
            /* blank lines are skipped, as DuckDB does, except in a file of one
             * column, where they are rows holding NULL */
            p += *p == '\n' ? 1 : 2;
            continue;
        }
        if ((unsigned char)*p == sc->plan->comment) {
            p = next_line(p, end);
            continue;
        }
        int col, e = 0;
#ifdef HAVE_AVX2
        if (!(fast_rows && fast_row(sc, &p, last)))
#endif
            e = parse_row(sc, &p, end, &col);
        sc->rows_seen++;
        if (e) {
            /* a value of the wrong type is not skipped: DuckDB's reader takes forms this
             * scanner's parsers refuse (0x1F, 1_000, 2020-1-1), and skips only the rows
             * it cannot read, so the statement is left to it (scan.py: Unsupported); nor
             * is a row ending in one delimiter more than the header, which DuckDB reads */
            if (sc->plan->skip_bad && e != E_TYPE && e != E_WIDE) {
                sc->skipped++;
            } else {
                sc->err = e;
                sc->err_offset = row - base;
                sc->err_col = col;
                break;
            }
        } else if (passes(sc)) {
            if (sc->agg) {
                if (aggregate_row(sc)) { sc->oom = 1; break; }
                if (sc->agg->unindexed && sc->spill >= 0 && sc->spill_at < 0) sc->spill_at = sc->start + sc->spill;
            } else {
                if (emit_row(sc)) { sc->oom = 1; break; }
            }
            sc->rows_out++;
        }
        if (p - released >= (Py_ssize_t)RELEASE_EVERY) {
            mapfile_release(base, released - base, row - base);
            released = row;
        }
    }
    sc->end = p - base;
    /* up to the end of the folio holding the last byte read (the vector loops read
     * up to 63 bytes past a row): reading it mapped the whole folio, the next
     * chunk's part too, which the next chunk may have released already (releasing
     * what it still reads only makes it map that again) */
    int64_t through = (sc->end + 64 + HUGE_FOLIO - 1) / HUGE_FOLIO * HUGE_FOLIO;
    mapfile_release(base, released - base, through < sc->size ? through : sc->size);
    if (sc->agg && !sc->oom && aggregate_flush(sc)) sc->oom = 1;
}

/* A file truncated while it is mapped turns reads of the lost pages into
 * SIGBUS, which would kill the whole process. While a thread scans, its
 * handler jumps back into scan() (guarded_scan), which reports the file as
 * changed; a SIGBUS anywhere else goes to the handler that was there before. */
#ifndef _WIN32
static __thread sigjmp_buf *scan_jump; /* set while this thread reads a mapping */
static struct sigaction previous_bus;

static void on_sigbus(int sig, siginfo_t *info, void *context) {
    sigjmp_buf *jump = scan_jump;
    if (jump) {
        scan_jump = NULL;
        siglongjmp(*jump, 1);
    }
    /* not a scan's fault: the previous handler sees it when the access repeats */
    sigaction(SIGBUS, &previous_bus, NULL);
}

/* Installs on_sigbus unless it is already there (faulthandler, for one,
 * may have replaced it since the last scan); called with the GIL held. */
static void guard_install(void) {
    struct sigaction now;
    if (sigaction(SIGBUS, NULL, &now) != 0) return;
    if ((now.sa_flags & SA_SIGINFO) && now.sa_sigaction == on_sigbus) return;
    struct sigaction mine;
    memset(&mine, 0, sizeof mine);
    mine.sa_sigaction = on_sigbus;
    mine.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&mine.sa_mask);
    if (sigaction(SIGBUS, &mine, &previous_bus) != 0) return;
}
#endif

static void guarded_scan(Scan *sc, const MapFile *map) {
#ifndef _WIN32
    sigjmp_buf jump;
    if (sigsetjmp(jump, 1) == 0) {
        scan_jump = &jump;
        run_scan(sc);
        scan_jump = NULL;
    } else {
        sc->err = E_CHANGED;
        sc->err_offset = sc->start;
        sc->err_col = -1;
        sc->end = sc->start;
        return;
    }
    /* a file cut short inside its last page reads as zeros, not SIGBUS */
    struct stat st;
    if (fstat(map->fd, &st) == 0 && (int64_t)st.st_size < map->size) {
        sc->err = E_CHANGED;
        sc->err_offset = sc->start;
        sc->err_col = -1;
    }
#else
    (void)map;
    run_scan(sc);
#endif
}


/* scan(file, start, boundary, dialect, slots, filters, keys, aggs, limit[, spill, unindexed, groups])
 *   -> (end, rows_seen, rows_out, skipped, error, payload)
 * keys/aggs None: COLUMNS mode, payload = [(validity, values, data, nulls), ...]
 * otherwise AGG mode, payload = AggState. In AGG mode, with spill >= 0, a scan that
 * stops looking its rows up (mostly new groups; from the start when unindexed) stops
 * at the first row starting spill bytes past start: end < boundary, and the caller
 * scans the rest (so a long range of many groups holds no more than spill bytes' rows);
 * groups: the groups expected, its table's room from the start.
 * error = None or (kind, byte_offset, column_index). */
static PyObject *scan(PyObject *mod, PyObject *args) {
    FileObject *f;
    Py_ssize_t start, boundary, limit, spill = -1, groups = 0;
    int unindexed = 0;
    PyObject *dialect, *slots, *filters, *keys, *aggs;
    if (!PyArg_ParseTuple(args, "O!nnOOOOOn|npn", &FileType, &f, &start, &boundary, &dialect, &slots, &filters,
                          &keys, &aggs, &limit, &spill, &unindexed, &groups))
        return NULL;
    if (!mapfile_is_open(&f->map) || f->close_pending) return PyErr_Format(PyExc_ValueError, "the file is closed");
    Plan plan;
    if (plan_parse(&plan, dialect, slots, filters, keys, aggs)) {
        plan_free(&plan);
        return NULL;
    }
    for (int i = 0; i < plan.nfilters; i++)
        if (plan.filters[i].slot < 0 || plan.filters[i].slot >= plan.nslots) goto badslot;
    for (int i = 0; i < plan.nkeys; i++)
        if (plan.keys[i].slot < 0 || plan.keys[i].slot >= plan.nslots) goto badslot;
    for (int i = 0; i < plan.naggs; i++) {
        if (plan.aggs[i].fn != A_COUNT_STAR && (plan.aggs[i].slot < 0 || plan.aggs[i].slot >= plan.nslots))
            goto badslot;
        if (plan.aggs[i].nfactors && plan.aggs[i].fn != A_SUM && plan.aggs[i].fn != A_AVG) goto badslot;
        /* A_TOP: the last kind */
        if (plan.aggs[i].fn < A_COUNT_STAR || plan.aggs[i].fn > A_TOP ||
            (plan.aggs[i].fn == A_TOP) != !!plan.aggs[i].param)
            goto badslot;
        if (IS_HELD(plan.aggs[i].fn) && plan.slots[plan.aggs[i].slot].kind != K_INT &&
            plan.slots[plan.aggs[i].slot].kind != K_FLOAT)
            goto badslot;
        if (IS_BINARY(plan.aggs[i].fn) != (plan.aggs[i].slot2 >= 0)) goto badslot;
        if (plan.aggs[i].slot2 >= plan.nslots) goto badslot;
        if (IS_STATISTIC(plan.aggs[i].fn))
            for (int s = 0; s < 1 + IS_BINARY(plan.aggs[i].fn); s++) {
                int k = plan.slots[s ? plan.aggs[i].slot2 : plan.aggs[i].slot].kind;
                if (plan.aggs[i].nfactors || (k != K_INT && k != K_FLOAT)) goto badslot;
            }
        for (int f = 0; f < plan.aggs[i].nfactors; f++) {
            int fs = plan.aggs[i].factors[f].slot;
            if (fs < 0 || fs >= plan.nslots || plan.slots[fs].kind != K_FLOAT) goto badslot;
        }
    }
    if (plan.nkeys > MAX_KEYS || plan.naggs > MAX_KEYS) goto badslot;

    Scan *sc = calloc(1, sizeof(Scan));
    if (!sc) {
        plan_free(&plan);
        return PyErr_NoMemory();
    }
    sc->base = f->map.data;
    sc->size = (Py_ssize_t)f->map.size;
    sc->plan = &plan;
    sc->start = start < 0 ? 0 : start;
    sc->boundary = boundary;
    sc->limit = limit;
    sc->spill = spill;
    sc->spill_at = -1;
    int agg_mode = keys != Py_None;
    if (agg_mode) {
        AggStateObject *st = PyObject_New(AggStateObject, &AggStateType);
        if (!st) goto oom;
        memset((char *)st + sizeof(PyObject), 0, sizeof(AggStateObject) - sizeof(PyObject));
        st->nkeys = plan.nkeys;
        st->naggs = plan.naggs;
        for (int i = 0; i < plan.nkeys; i++) st->key_kinds[i] = plan.slots[plan.keys[i].slot].kind;
        for (int i = 0; i < plan.naggs; i++) {
            st->agg_fns[i] = plan.aggs[i].fn;
            st->agg_kinds[i] = plan.aggs[i].fn == A_COUNT_STAR ? K_INT : plan.slots[plan.aggs[i].slot].kind;
            st->agg_params[i] = plan.aggs[i].param;
            st->agg_q[i] = plan.aggs[i].q;
        }
        int fixed = 1;
        for (int i = 0; i < plan.nkeys; i++)
            if (st->key_kinds[i] == K_STR && plan.keys[i].fn == F_IDENT) fixed = 0;
        table_layout(st, fixed, (size_t)plan.nkeys * 9, 0);
        st->huge = 1;
        sc->agg = st;
        st->unindexed = unindexed;
        sc->direct = !unindexed && groups <= DIRECT_GROUPS && direct_plan(&plan);
        for (int i = 0; i < DIRECT_CACHE; i++) sc->dcache[i].len = UINT32_MAX;
        /* room for the groups the caller expects (another chunk's): a table grown
         * from empty to 1e5 groups copied and zeroed twice its size on the way; an
         * unindexed scan's: the rows it is expected to read (a group each) */
        size_t expect = (size_t)(groups < (1 << 24) ? groups : 1 << 24);
        if (unindexed && expect >= RUNS_FROM ? table_run(st, expect)
            : groups > 0 && (unindexed ? groups_resize(st, expect) : table_reserve(st, expect))) {
            Py_DECREF(st);
            goto oom;
        }
    } else {
        sc->cols = calloc((size_t)plan.nslots + 1, sizeof(OutCol));
        if (!sc->cols) goto oom;
    }
    f->busy++;
    if (f->map.data) {
#ifndef _WIN32
        guard_install();
#endif
        Py_BEGIN_ALLOW_THREADS
        guarded_scan(sc, &f->map);
        if (sc->agg) table_unrun(sc->agg);
        if (sc->agg && !sc->err && !sc->oom && table_partition(sc->agg)) sc->oom = 1;
        Py_END_ALLOW_THREADS
    } else {
        sc->end = 0;
    }
    f->busy--;
    if (!f->busy && f->close_pending) file_release(f);

    PyObject *result = NULL, *payload = NULL, *err = NULL;
    if (sc->oom) {
        PyErr_NoMemory();
        goto done;
    }
    if (agg_mode) {
        payload = (PyObject *)sc->agg;
        sc->agg = NULL;
    } else {
        payload = PyList_New(plan.nslots);
        if (!payload) goto done;
        for (int i = 0; i < plan.nslots; i++) {
            OutCol *oc = &sc->cols[i];
            if (plan.slots[i].kind == K_STR && sc->rows_out == 0) {
                int32_t z = 0;
                buf_put(&oc->values, &z, 4);
            }
            PyObject *t = Py_BuildValue("(NNNn)", bytes_of(&oc->validity), bytes_of(&oc->values),
                                        bytes_of(&oc->data), (Py_ssize_t)oc->nulls);
            if (!t) goto done;
            PyList_SET_ITEM(payload, i, t);
        }
    }
    if (sc->err) err = Py_BuildValue("(sni)", error_names[sc->err], sc->err_offset, sc->err_col);
    else err = Py_NewRef(Py_None);
    if (!err) goto done;
    result = Py_BuildValue("(nnnnNN)", sc->end, sc->rows_seen, sc->rows_out, sc->skipped, err, payload);
    err = payload = NULL;
done:
    Py_XDECREF(err);
    Py_XDECREF(payload);
    Py_XDECREF((PyObject *)sc->agg);
    if (sc->cols) {
        for (int i = 0; i < plan.nslots; i++) {
            free(sc->cols[i].validity.p);
            free(sc->cols[i].values.p);
            free(sc->cols[i].data.p);
        }
        free(sc->cols);
    }
    for (int i = 0; i < MAX_SLOTS; i++) free(sc->scratch[i].p);
    for (int i = 0; i < AGG_ROWS; i++) free(sc->pending[i].key.p);
    free(sc->dkey.p);
    free(sc);
    plan_free(&plan);
    return result;
oom:
    free(sc->cols);
    free(sc);
    plan_free(&plan);
    return PyErr_NoMemory();
badslot:
    plan_free(&plan);
    return PyErr_Format(PyExc_ValueError, "a filter, key or aggregate names a slot that does not exist (or a "
                                          "product, a slot not of doubles, or an aggregate other than sum and avg)");
}


/* ------------------------------------------------------------- sniffing */

/* The shapes the sniffer tries (layout.py's _PATTERNS, there as regular
 * expressions over the joined sample, which typing DuckDB's 20,480 rows spent
 * most of a cold one-query process in): each function takes a value without
 * its surrounding blanks and says whether it has the shape, ASCII only. */

enum { K_TIME = 8 };

static inline int is_digit(char c) { return c >= '0' && c <= '9'; }

static size_t skip_digits(const char *s, size_t n, size_t p) {
    while (p < n && is_digit(s[p])) p++;
    return p;
}

static int word_ci(const char *s, size_t n, const char *word) {
    size_t k = strlen(word);
    if (n != k) return 0;
    for (size_t i = 0; i < k; i++)
        if (((unsigned char)s[i] | 0x20) != (unsigned char)word[i]) return 0;
    return 1;
}

static int shape_bool(const char *s, size_t n) {
    return word_ci(s, n, "true") || word_ci(s, n, "false") || word_ci(s, n, "t") ||
           word_ci(s, n, "f") || word_ci(s, n, "yes") || word_ci(s, n, "no");
}

/* -?[0-9]+ */
static int shape_int(const char *s, size_t n) {
    size_t p = n && s[0] == '-';
    size_t q = skip_digits(s, n, p);
    return q > p && q == n;
}

/* -?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?  or  -?(nan|infinity|inf) */
static int shape_float(const char *s, size_t n) {
    size_t p = n && s[0] == '-';
    if (p < n && !is_digit(s[p]) && s[p] != '.')
        return word_ci(s + p, n - p, "nan") || word_ci(s + p, n - p, "infinity") || word_ci(s + p, n - p, "inf");
    size_t q = skip_digits(s, n, p);
    if (q > p) {
        if (q < n && s[q] == '.') q = skip_digits(s, n, q + 1);
    } else {
        if (q >= n || s[q] != '.') return 0;
        size_t r = skip_digits(s, n, q + 1);
        if (r == q + 1) return 0;
        q = r;
    }
    if (q < n && (s[q] == 'e' || s[q] == 'E')) {
        size_t r = q + 1;
        if (r < n && (s[r] == '+' || s[r] == '-')) r++;
        size_t t = skip_digits(s, n, r);
        if (t > r) q = t;
    }
    return q == n;
}

/* [0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]+)?)? at p: its end, or 0 */
static size_t time_at(const char *s, size_t n, size_t p) {
    if (p + 5 > n || !is_digit(s[p]) || !is_digit(s[p + 1]) || s[p + 2] != ':' || !is_digit(s[p + 3]) ||
        !is_digit(s[p + 4]))
        return 0;
    p += 5;
    if (p + 3 <= n && s[p] == ':' && is_digit(s[p + 1]) && is_digit(s[p + 2])) {
        p += 3;
        if (p + 1 < n && s[p] == '.' && is_digit(s[p + 1])) p = skip_digits(s, n, p + 1);
    }
    return p;
}

/* [0-9]{4}-[0-9]{2}-[0-9]{2} at the start */
static int date_at(const char *s, size_t n) {
    return n >= 10 && is_digit(s[0]) && is_digit(s[1]) && is_digit(s[2]) && is_digit(s[3]) && s[4] == '-' &&
           is_digit(s[5]) && is_digit(s[6]) && s[7] == '-' && is_digit(s[8]) && is_digit(s[9]);
}

/* after a date: ([ T]time)? -> its end */
static size_t after_date(const char *s, size_t n) {
    if (n > 10 && (s[10] == ' ' || s[10] == 'T')) {
        size_t q = time_at(s, n, 11);
        if (q) return q;
    }
    return 10;
}

/* ([zZ]... no: Z|[+-][0-9]{2}(:?[0-9]{2})?) at p: its end, or p when absent */
static size_t zone_at(const char *s, size_t n, size_t p) {
    if (p < n && s[p] == 'Z') return p + 1;
    if (p + 3 <= n && (s[p] == '+' || s[p] == '-') && is_digit(s[p + 1]) && is_digit(s[p + 2])) {
        size_t q = p + 3;
        size_t r = q < n && s[q] == ':' ? q + 1 : q;
        if (r + 2 <= n && is_digit(s[r]) && is_digit(s[r + 1])) return r + 2;
        if (r != q && q + 2 <= n && is_digit(s[q]) && is_digit(s[q + 1])) return q + 2;
        return q;
    }
    return p;
}

/* what every value of a sample is, beside its kinds' shapes (layout.py's SH_ flags) */
enum { SH_DIGIT_FIRST = 1u << 20 };
#define SHAPE_BITS ((1u << K_BOOL) | (1u << K_INT) | (1u << K_FLOAT) | (1u << K_TIME) | (1u << K_DATE) | \
                    (1u << K_TS) | (1u << K_TSTZ) | SH_DIGIT_FIRST)
/* what some value of a sample is, beside the shapes all have (layout.py's SH_ flags) */
enum { SH_LEADING_ZERO = 1u << 16, SH_WIDE = 1u << 17, SH_BLANK_AFTER_DOUBLE = 1u << 18, SH_INFINITY = 1u << 19,
       SH_RADIX = 1u << 21 };

/* The shapes, of those in `want`, that the value s (n bytes; t, m: without its
 * blanks) has: a bit per kind (DATE, TIMESTAMP and TIMESTAMP WITH TIME ZONE also
 * parsed by the scanner's own parsers) and SH_DIGIT_FIRST, a digit after its
 * leading blanks. *is_int is set when INT is wanted: whether it is an integer. */
static inline unsigned value_shapes(const char *s, size_t n, const char *t, size_t m, unsigned want, int *is_int) {
    unsigned bits = want & (1u << K_BOOL) && shape_bool(s, n) ? 1u << K_BOOL : 0;
    if (!m) {
        *is_int = 0;
        return bits;
    }
    if (want & SH_DIGIT_FIRST && is_digit(t[0])) bits |= SH_DIGIT_FIRST;
    if (want & (1u << K_INT)) {
        *is_int = shape_int(t, m);
        /* an integer has FLOAT's shape, and none of the others' */
        if (*is_int) return bits | (want & ((1u << K_INT) | (1u << K_FLOAT)));
    }
    if (want & (1u << K_FLOAT) && shape_float(t, m)) bits |= 1u << K_FLOAT;
    if (want & (1u << K_TIME) && time_at(t, m, 0) == m) bits |= 1u << K_TIME;
    if (want & ((1u << K_DATE) | (1u << K_TS) | (1u << K_TSTZ)) && date_at(t, m)) {
        int64_t v;
        if (want & (1u << K_DATE) && m == 10 && !parse_date(t, m, &v)) bits |= 1u << K_DATE;
        size_t e = after_date(t, m);
        if (e == m) {
            /* no zone: TIMESTAMP WITH TIME ZONE's parse is TIMESTAMP's */
            unsigned ts = want & ((1u << K_TS) | (e > 10 ? 1u << K_TSTZ : 0));
            if (ts && !parse_timestamp(t, m, &v, 0)) bits |= ts;
        } else if (want & (1u << K_TSTZ) && e > 10 && zone_at(t, m, e) == m && !parse_timestamp(t, m, &v, 1)) {
            bits |= 1u << K_TSTZ;
        }
    }
    return bits;
}

/* What shapes() and layout.py's integer rows make of one column's values, taken
 * in row order: `all` the shapes every value has (value_shapes), `some` the
 * flags some value has, `count` values that are not NULL in `rows` cells, the
 * row of the first value that is no integer (`not_int_row`, -1 while there is
 * none), the last row before it whose value ends in a blank (`blank_row`, -1 for
 * none), and whether any value ends in one. */
typedef struct {
    unsigned all, some;
    int any_blank;
    Py_ssize_t count, rows, not_int_row, blank_row;
} ColumnShapes;

static void column_shapes_start(ColumnShapes *c) {
    c->all = SHAPE_BITS, c->some = 0, c->any_blank = 0;
    c->count = c->rows = 0, c->not_int_row = c->blank_row = -1;
}

/* the next cell of a column: the value s of n bytes, or a NULL */
static inline void column_shapes_add(ColumnShapes *c, const char *s, size_t n, int is_null) {
    Py_ssize_t row = c->rows++;
    if (is_null) return;
    c->count++;
    int blank_end = n && (s[n - 1] == ' ' || s[n - 1] == '\t'), is_int = -1;
    const char *t = s;
    size_t m = n;
    trim_spaces(&t, &m);
    if (c->all) c->all &= value_shapes(s, n, t, m, c->all, &is_int);
    unsigned some = c->some;
    /* ^[ \t]*[+-]?0[0-9] */
    size_t lead = (size_t)(t - s), p = lead < n && (s[lead] == '+' || s[lead] == '-') ? lead + 1 : lead;
    if (p + 1 < n && s[p] == '0' && is_digit(s[p + 1])) some |= SH_LEADING_ZERO;
    /* ^[ \t]*0[xXbB]: a hexadecimal or binary integer, to DuckDB */
    if (m >= 2 && t[0] == '0' && ((t[1] | 0x20) == 'x' || (t[1] | 0x20) == 'b')) some |= SH_RADIX;
    /* [0-9]{19} anywhere */
    if (!(some & SH_WIDE) && n >= 19)
        for (size_t i = 0, run = 0; i < n; i++) {
            run = is_digit(s[i]) ? run + 1 : 0;
            if (run >= 19) {
                some |= SH_WIDE;
                break;
            }
        }
    /* [ \t]*[-+]?inf(inity)?[ \t]*, ASCII letters in any case */
    if (!(some & SH_INFINITY) && m >= 3) {
        size_t q = t[0] == '+' || t[0] == '-';
        if (word_ci(t + q, m - q, "inf") || word_ci(t + q, m - q, "infinity")) some |= SH_INFINITY;
    }
    if (c->not_int_row < 0) {
        if (is_int < 0) is_int = shape_int(t, m);
        if (!is_int) c->not_int_row = row;
        else if (blank_end) c->blank_row = row;
    }
    /* DuckDB tests a value against DOUBLE once one has failed the integers */
    if (c->not_int_row >= 0 && blank_end) some |= SH_BLANK_AFTER_DOUBLE;
    c->some = some;
    c->any_blank |= blank_end;
}

/* *x followed by the cells of y */
static void column_shapes_concat(ColumnShapes *x, const ColumnShapes *y) {
    if (x->not_int_row >= 0) {
        if (y->any_blank) x->some |= SH_BLANK_AFTER_DOUBLE;
    } else {
        if (y->blank_row >= 0) x->blank_row = y->blank_row + x->rows;
        if (y->not_int_row >= 0) x->not_int_row = y->not_int_row + x->rows;
    }
    x->all &= y->all;
    x->some |= y->some;
    x->any_blank |= y->any_blank;
    x->count += y->count;
    x->rows += y->rows;
}

/* shapes(joined) -> the bits of the kinds whose shape every line of a sample
 * joined by newlines has (layout.py's _column_type tries them in its order),
 * SH_DIGIT_FIRST when every line has it, and the SH_ flags of what some line is */
static PyObject *shapes(PyObject *mod, PyObject *args) {
    const char *s;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "y#", &s, &n)) return NULL;
    ColumnShapes c;
    column_shapes_start(&c);
    Py_BEGIN_ALLOW_THREADS
    const char *p = s, *end = s + n;
    for (;;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *stop = nl ? nl : end;
        column_shapes_add(&c, p, (size_t)(stop - p), 0);
        if (!nl) break;
        p = nl + 1;
    }
    Py_END_ALLOW_THREADS
    return PyLong_FromUnsignedLong(c.all | c.some);
}


/* The rows of the sniffer's sample of a text without quotes (layout.py checks it
 * has none, nor NULs or lone CRs), split as str.split would: lines end at LF (a
 * CR before it is dropped), empty lines are no rows, and `limit` rows are taken
 * in all. */
typedef struct {
    const char *p, *end;
    Py_ssize_t rows, limit;
} SampleLines;

/* the next row, [*line, *stop): 0 when there is none */
static int next_sample_row(SampleLines *it, const char **line, const char **stop) {
    while (it->p < it->end && it->rows < it->limit) {
        const char *start = it->p, *nl = memchr(start, '\n', (size_t)(it->end - start));
        const char *e = nl ? nl : it->end;
        it->p = nl ? nl + 1 : it->end;
        if (e > start && e[-1] == '\r') e--;
        if (e == start) continue;
        it->rows++;
        *line = start, *stop = e;
        return 1;
    }
    return 0;
}

/* Whether the row [line, stop) has `ncols` fields (`ncols` + 1 ending in one more
 * with `trailing`, whose last is dropped); if so starts[0..ncols] are its fields'
 * starts and starts[ncols] one past the last field's end. `starts` holds ncols + 2. */
static int sample_fields(const char *line, const char *stop, char delim, Py_ssize_t ncols, int trailing,
                         const char **starts) {
    Py_ssize_t fields = 1;
    const char *p = line;
    starts[0] = line;
#ifdef HAVE_SSE2
    const __m128i vd = _mm_set1_epi8(delim);
    for (; stop - p >= 16; p += 16) {
        unsigned m = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)p), vd));
        for (; m; m &= m - 1) {
            if (fields > ncols) return 0; /* wider than even a trailing delimiter makes it */
            starts[fields++] = p + __builtin_ctz(m) + 1;
        }
    }
#endif
    for (; p < stop; p++)
        if (*p == delim) {
            if (fields > ncols) return 0;
            starts[fields++] = p + 1;
        }
    if (fields == ncols) {
        starts[ncols] = stop + 1;
        return 1;
    }
    return trailing && fields == ncols + 1; /* the extra field's start ends the last */
}

/* the strings read as NULL (a tuple of bytes), with a bit per length below 64 that
 * one of them has, so that most values are told apart by their length */
typedef struct {
    PyObject *tuple;
    uint64_t lengths;
} SampleNulls;

static int sample_nulls(SampleNulls *nulls, PyObject *tuple) {
    nulls->tuple = tuple, nulls->lengths = 0;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(tuple); k++) {
        PyObject *b = PyTuple_GET_ITEM(tuple, k);
        if (!PyBytes_Check(b)) {
            PyErr_SetString(PyExc_TypeError, "nulls are bytes");
            return -1;
        }
        if (PyBytes_GET_SIZE(b) < 64) nulls->lengths |= 1ull << PyBytes_GET_SIZE(b);
    }
    return 0;
}

static inline int is_sample_null(const SampleNulls *nulls, const char *f, size_t len) {
    if (len < 64 && !(nulls->lengths >> len & 1)) return 0;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(nulls->tuple); k++) {
        PyObject *b = PyTuple_GET_ITEM(nulls->tuple, k);
        if ((size_t)PyBytes_GET_SIZE(b) == len && memcmp(PyBytes_AS_STRING(b), f, len) == 0) return 1;
    }
    return 0;
}

/* the fields of the row [line, stop) as a list of bytes */
static PyObject *sample_row(const char *line, const char *stop, char delim) {
    PyObject *row = PyList_New(0);
    if (!row) return NULL;
    const char *q = line;
    for (;;) {
        const char *d = memchr(q, delim, (size_t)(stop - q));
        const char *e = d ? d : stop;
        PyObject *field = PyBytes_FromStringAndSize(q, e - q);
        if (!field || PyList_Append(row, field)) {
            Py_XDECREF(field);
            Py_DECREF(row);
            return NULL;
        }
        Py_DECREF(field);
        if (!d) return row;
        q = d + 1;
    }
}

/* The arguments of sample_columns and sample_shapes: (text, delimiter, ncols, skip,
 * limit, trailing, nulls). 0, with `text` to release; -1 with an exception set. */
static int sample_args(PyObject *args, Py_buffer *text, int *delim, Py_ssize_t *ncols, Py_ssize_t *skip,
                       Py_ssize_t *limit, int *trailing, SampleNulls *nulls, Py_ssize_t *split) {
    PyObject *null_tuple;
    if (!PyArg_ParseTuple(args, split ? "y*innnpO!|n" : "y*innnpO!", text, delim, ncols, skip, limit, trailing,
                          &PyTuple_Type, &null_tuple, split))
        return -1;
    if (*ncols < 1 || *ncols > 1 << 16) {
        PyBuffer_Release(text);
        PyErr_Format(PyExc_ValueError, "ncols %zd", *ncols);
        return -1;
    }
    if (sample_nulls(nulls, null_tuple)) {
        PyBuffer_Release(text);
        return -1;
    }
    return 0;
}

/* sample_columns(text, delimiter, ncols, skip, limit, trailing, nulls) ->
 * (first, rows, body, [(values, count, cells), ...]): the sniffer's sample (the
 * rows of SampleLines) turned into columns without a Python object per value.
 * The first `skip` rows are skipped (`limit` counts them). `first` is the fields
 * of the first row kept (None when there is none); `body` counts the rows after
 * it with `ncols` fields (sample_fields), whose fields make the columns: per
 * column the values that are not in `nulls` joined by LF, their count, and every
 * field (NULLs too) joined by LF. */
static PyObject *sample_columns(PyObject *mod, PyObject *args) {
    Py_buffer text;
    Py_ssize_t ncols, skip, limit;
    int delim, trailing;
    SampleNulls nulls;
    if (sample_args(args, &text, &delim, &ncols, &skip, &limit, &trailing, &nulls, NULL)) return NULL;
    const char *s = text.buf;
    Py_ssize_t n = text.len;
    Buf *vals = calloc((size_t)ncols, sizeof(Buf)), *cells = calloc((size_t)ncols, sizeof(Buf));
    Py_ssize_t *counts = calloc((size_t)ncols, sizeof(Py_ssize_t));
    const char **starts = malloc((size_t)(ncols + 2) * sizeof(char *));
    PyObject *result = NULL, *first = NULL, *cols = NULL;
    if (!vals || !cells || !counts || !starts) {
        PyErr_NoMemory();
        goto done;
    }
    SampleLines it = {s, s + n, 0, limit};
    const char *line, *stop, *first_line = NULL, *first_end = NULL;
    Py_ssize_t body = 0;
    int oom = 0;
    while (!oom && next_sample_row(&it, &line, &stop)) {
        if (it.rows <= skip) continue;
        if (!first_line) {
            first_line = line, first_end = stop;
            continue;
        }
        if (!sample_fields(line, stop, (char)delim, ncols, trailing, starts)) continue;
        body++;
        for (Py_ssize_t c = 0; c < ncols && !oom; c++) {
            const char *f = starts[c];
            size_t len = (size_t)(starts[c + 1] - 1 - f);
            if (body > 1 && buf_put(&cells[c], "\n", 1)) oom = 1;
            if (buf_put(&cells[c], f, len)) oom = 1;
            if (!is_sample_null(&nulls, f, len)) {
                if (counts[c] && buf_put(&vals[c], "\n", 1)) oom = 1;
                if (buf_put(&vals[c], f, len)) oom = 1;
                counts[c]++;
            }
        }
    }
    if (oom) {
        PyErr_NoMemory();
        goto done;
    }
    if (first_line) {
        first = sample_row(first_line, first_end, (char)delim);
        if (!first) goto done;
    } else {
        first = Py_None;
        Py_INCREF(first);
    }
    cols = PyList_New(ncols);
    if (!cols) goto done;
    for (Py_ssize_t c = 0; c < ncols; c++) {
        PyObject *col = Py_BuildValue("(y#ny#)", vals[c].p ? vals[c].p : "", (Py_ssize_t)vals[c].len, counts[c],
                                      cells[c].p ? cells[c].p : "", (Py_ssize_t)cells[c].len);
        if (!col) goto done;
        PyList_SET_ITEM(cols, c, col);
    }
    result = Py_BuildValue("(OnnO)", first, it.rows, body, cols);
done:
    Py_XDECREF(first);
    Py_XDECREF(cols);
    if (vals)
        for (Py_ssize_t c = 0; c < ncols; c++) free(vals[c].p);
    if (cells)
        for (Py_ssize_t c = 0; c < ncols; c++) free(cells[c].p);
    free(vals);
    free(cells);
    free(counts);
    free(starts);
    PyBuffer_Release(&text);
    return result;
}

/* [(shapes, count, not_int_row, blank_row), ...] of columns: shapes() of each
 * column's values that are not NULL, 0 when there are none */
static PyObject *column_shapes_list(const ColumnShapes *cols, Py_ssize_t ncols) {
    PyObject *list = PyList_New(ncols);
    if (!list) return NULL;
    for (Py_ssize_t c = 0; c < ncols; c++) {
        const ColumnShapes *col = &cols[c];
        PyObject *item = Py_BuildValue("(Innn)", col->count ? col->all | col->some : 0u, col->count,
                                       col->not_int_row, col->blank_row);
        if (!item) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, c, item);
    }
    return list;
}

/* The body rows of a sample between two row starts, typed into `cols` (ncols
 * ColumnShapes) with `starts` (ncols + 2) to split them: a part of sample_shapes
 * that runs in a thread of its own. */
typedef struct {
    const char *from, *to;
    char delim;
    int trailing;
    Py_ssize_t ncols, body;
    const SampleNulls *nulls;
    ColumnShapes *cols;
    const char **starts;
} ShapeRange;

static void shape_range(ShapeRange *r) {
    SampleLines it = {r->from, r->to, 0, PY_SSIZE_T_MAX};
    const char *line, *stop;
    for (Py_ssize_t c = 0; c < r->ncols; c++) column_shapes_start(&r->cols[c]);
    while (next_sample_row(&it, &line, &stop)) {
        if (!sample_fields(line, stop, r->delim, r->ncols, r->trailing, r->starts)) continue;
        r->body++;
        for (Py_ssize_t c = 0; c < r->ncols; c++) {
            size_t len = (size_t)(r->starts[c + 1] - 1 - r->starts[c]);
            column_shapes_add(&r->cols[c], r->starts[c], len, is_sample_null(r->nulls, r->starts[c], len));
        }
    }
}

#ifndef _WIN32
static void *shape_range_thread(void *r) {
    shape_range(r);
    return NULL;
}
#endif

/* sample_shapes(text, delimiter, ncols, skip, limit, trailing, nulls, split=1 MiB) ->
 * (first, rows, body, columns, with_first): the sample sample_columns reads
 * (the same arguments, `first`, `rows` and `body`), typed in one pass without
 * joining its columns: `columns` as column_shapes_list gives them. `with_first`:
 * the same for the columns with the first row before the others, when that row
 * has `ncols` fields, else None. A body of `split` bytes or more is typed in two
 * halves at once, the second in a thread of its own, and the halves' shapes
 * joined (column_shapes_concat): the same answer in half the time on two cores
 * (the taxi file's 8 MiB head took 12-21 ms of a one-query process). */
static PyObject *sample_shapes(PyObject *mod, PyObject *args) {
    Py_buffer text;
    Py_ssize_t ncols, skip, limit, split = 1 << 20;
    int delim, trailing;
    SampleNulls nulls;
    if (sample_args(args, &text, &delim, &ncols, &skip, &limit, &trailing, &nulls, &split)) return NULL;
    const char *s = text.buf;
    Py_ssize_t n = text.len;
    /* the body's columns (of each half), then the first row's (one cell each) */
    ColumnShapes *cols = malloc(3 * (size_t)ncols * sizeof(ColumnShapes)), *firsts = NULL;
    const char **starts = malloc(2 * (size_t)(ncols + 2) * sizeof(char *));
    PyObject *result = NULL, *first = NULL, *plain = NULL, *with_first = NULL;
    if (!cols || !starts) {
        PyErr_NoMemory();
        goto done;
    }
    SampleLines it = {s, s + n, 0, limit};
    const char *line, *stop, *first_line = NULL, *first_end = NULL, *body_from = s + n;
    Py_ssize_t body = 0;
    /* Without the GIL: the loops read the held buffer and the immutable `nulls`
     * tuple's bytes only. */
    Py_BEGIN_ALLOW_THREADS
    while (next_sample_row(&it, &line, &stop)) {
        if (it.rows <= skip) continue;
        first_line = line, first_end = stop, body_from = it.p;
        if (sample_fields(line, stop, (char)delim, ncols, 0, starts)) {
            firsts = cols + 2 * ncols;
            for (Py_ssize_t c = 0; c < ncols; c++) {
                size_t len = (size_t)(starts[c + 1] - 1 - starts[c]);
                column_shapes_start(&firsts[c]);
                column_shapes_add(&firsts[c], starts[c], len, is_sample_null(&nulls, starts[c], len));
            }
        }
        break;
    }
    /* the end of the sample: past its last row (`limit` rows from the text's start) */
    while (first_line && next_sample_row(&it, &line, &stop)) {
    }
    const char *body_to = first_line ? it.p : body_from, *mid = body_to;
    if (body_to - body_from >= split) {
        const char *half = body_from + (body_to - body_from) / 2;
        mid = memchr(half, '\n', (size_t)(body_to - half));
        mid = mid ? mid + 1 : body_to;
    }
    ShapeRange a = {body_from, mid, (char)delim, trailing, ncols, 0, &nulls, cols, starts};
    ShapeRange b = {mid, body_to, (char)delim, trailing, ncols, 0, &nulls, cols + ncols, starts + ncols + 2};
    int apart = 0;
#ifndef _WIN32
    pthread_t second;
    apart = mid < body_to && pthread_create(&second, NULL, shape_range_thread, &b) == 0;
#endif
    shape_range(&a);
#ifndef _WIN32
    if (apart) pthread_join(second, NULL);
#endif
    if (!apart) shape_range(&b);
    for (Py_ssize_t c = 0; c < ncols; c++) column_shapes_concat(&cols[c], &cols[ncols + c]);
    body = a.body + b.body;
    Py_END_ALLOW_THREADS
    if (first_line) {
        first = sample_row(first_line, first_end, (char)delim);
        if (!first) goto done;
    } else {
        first = Py_None;
        Py_INCREF(first);
    }
    plain = column_shapes_list(cols, ncols);
    if (!plain) goto done;
    if (firsts) {
        for (Py_ssize_t c = 0; c < ncols; c++) column_shapes_concat(&firsts[c], &cols[c]);
        with_first = column_shapes_list(firsts, ncols);
        if (!with_first) goto done;
    } else {
        with_first = Py_None;
        Py_INCREF(with_first);
    }
    result = Py_BuildValue("(OnnOO)", first, it.rows, body, plain, with_first);
done:
    Py_XDECREF(first);
    Py_XDECREF(plain);
    Py_XDECREF(with_first);
    free(cols);
    free(starts);
    PyBuffer_Release(&text);
    return result;
}

/* parse_value(kind, bytes) -> value or raises ValueError; used by the sniffer and tests */
static PyObject *parse_value(PyObject *mod, PyObject *args) {
    int kind;
    const char *s;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "iy#", &kind, &s, &n)) return NULL;
    int64_t i;
    double d;
    int bad;
    switch (kind) {
    case K_INT: bad = parse_int(s, (size_t)n, &i); break;
    case K_FLOAT:
        bad = parse_double_at(s, (size_t)n, s + n, &d);
        if (!bad) return PyFloat_FromDouble(d);
        break;
    case K_TS: bad = parse_timestamp(s, (size_t)n, &i, 0); break;
    case K_TSTZ: bad = parse_timestamp(s, (size_t)n, &i, 1); break;
    case K_DATE: bad = parse_date(s, (size_t)n, &i); break;
    case K_BOOL: bad = parse_bool(s, (size_t)n, &i); break;
    default: return PyErr_Format(PyExc_ValueError, "no parser for kind %d", kind);
    }
    if (bad) return PyErr_Format(PyExc_ValueError, "not a value of kind %d", kind);
    if (kind == K_BOOL) return PyBool_FromLong((long)i);
    return PyLong_FromLongLong(i);
}

/* average(sums, width, counts, grouped) -> bytes: per group int_average of its sum
 * (little-endian int64s, width 8, or Arrow's decimal128 integers, width 16) over its count
 * (int64s); the Arrow path's avg of integers, as the fused scan's. A count of 0 gives NaN
 * (the caller makes it NULL). */
static PyObject *average(PyObject *mod, PyObject *args) {
    Py_buffer sums, counts;
    int width, grouped;
    if (!PyArg_ParseTuple(args, "y*iy*p", &sums, &width, &counts, &grouped)) return NULL;
    PyObject *out = NULL;
    Py_ssize_t n = counts.len / 8;
    if ((width != 8 && width != 16) || sums.len < n * width) {
        PyErr_SetString(PyExc_ValueError, "average() needs a sum of 8 or 16 bytes per count");
        goto done;
    }
    out = PyBytes_FromStringAndSize(NULL, n * 8);
    if (!out) goto done;
    double *o = (double *)PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t c, lo;
        memcpy(&c, (const char *)counts.buf + 8 * i, 8);
        __int128 sum;
        if (width == 8) {
            memcpy(&lo, (const char *)sums.buf + 8 * i, 8);
            sum = lo;
        } else {
            memcpy(&sum, (const char *)sums.buf + 16 * i, 16);
        }
        o[i] = c ? int_average(sum, c, grouped) : NAN;
    }
done:
    PyBuffer_Release(&sums);
    PyBuffer_Release(&counts);
    return out;
}

/* simd(on=None) -> str: the vector code the scanner uses, "avx2" or "sse2" (or
 * "scalar"); on=False forces the baseline, on=True the best the processor has */
static PyObject *simd(PyObject *mod, PyObject *args) {
    PyObject *on = Py_None;
    if (!PyArg_ParseTuple(args, "|O", &on)) return NULL;
#ifdef HAVE_AVX2
    if (on != Py_None) {
        int want = PyObject_IsTrue(on);
        if (want < 0) return NULL;
        use_avx2 = want && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt") &&
                   __builtin_cpu_supports("pclmul");
    }
    return PyUnicode_FromString(use_avx2 ? "avx2" : "sse2");
#elif defined(HAVE_SSE2)
    return PyUnicode_FromString("sse2");
#else
    return PyUnicode_FromString("scalar");
#endif
}

/* The byte after the line starting at p: past its \n, \r\n or lone \r (as
 * bytes.splitlines ends lines), and in *body the end of its text before them. */
static const char *line_after(const char *p, const char *end, const char **body) {
    const char *q = p;
    while (q < end && *q != '\n' && *q != '\r') q++;
    const char *after = q;
    if (after < end && *after == '\r') after++;
    if (after < end && after[-1] == '\r' && *after == '\n') after++;
    else if (after < end && *after == '\n') after++;
    *body = q;
    return after;
}

/* Whether unpad would drop a blank of [s, end) (its check), found a quote at a time
 * (memchr) rather than a byte at a time: with no escape apart from the quote, and
 * neither the delimiter nor the quote a blank. Outside quotes only a quote matters:
 * it opens a field where a field starts (the block's start, after a line end or a
 * delimiter), and a blank before it there is dropped; inside, a quote closes the
 * field (or is doubled), and blanks between it and a delimiter or line end are
 * dropped. *in_quote: whether a quoted field is open, before and after. */
static int unpad_changes(const char *s, const char *end, char d, char q, int *in_quote) {
    const char *p = s;
#define AT_FIELD_START(y) ((y) == s || (y)[-1] == d || (y)[-1] == '\n' || (y)[-1] == '\r')
    while (p < end) {
        const char *x = memchr(p, q, (size_t)(end - p));
        if (!x) return 0;
        if (*in_quote) {
            if (x + 1 < end && x[1] == q) { /* a doubled quote */
                p = x + 2;
                continue;
            }
            *in_quote = 0;
            const char *j = x + 1;
            while (j < end && *j == ' ') j++;
            if (j > x + 1 && (j == end || *j == d || *j == '\n' || *j == '\r')) return 1;
        } else if (AT_FIELD_START(x)) {
            *in_quote = 1;
        } else if (x[-1] == ' ' && AT_FIELD_START(x - 1)) {
            return 1;
        }
        p = x + 1;
    }
#undef AT_FIELD_START
    return 0;
}

/* unpad(block, delim, quote, escape, in_quote, check=False) -> (block, in_quote): the
 * lines of block without the blanks between a field's start and its opening quote and
 * between its closing quote and the field's end (DuckDB's state machine skips them);
 * dialect.unpad_quotes is the reference, line by line. check: whether any blank would
 * go, in place of the block (and in_quote where it stopped looking): nothing is
 * written, and it stops at the first such blank. */
static PyObject *unpad(PyObject *mod, PyObject *args) {
    Py_buffer in;
    int delim, quote, escape, in_quote, check = 0, changed = 0;
    if (!PyArg_ParseTuple(args, "y*iiip|p", &in, &delim, &quote, &escape, &in_quote, &check)) return NULL;
    PyObject *out = check ? NULL : PyBytes_FromStringAndSize(NULL, in.len);
    if (!check && !out) return PyBuffer_Release(&in), NULL;
    const char *p = in.buf, *end = p + in.len;
    char *o = check ? NULL : PyBytes_AS_STRING(out);
#define PUT(c) do { if (!check) *o++ = (c); } while (0)
    char d = (char)delim, q = (char)quote, e = (char)escape;
    int has_escape = escape >= 0 && escape != quote;
    Py_BEGIN_ALLOW_THREADS
    if (check && !has_escape && d != ' ' && q != ' ') {
        changed = unpad_changes(p, end, d, q, &in_quote);
        p = end;
    }
    while (p < end && !changed) {
        const char *n;
        const char *next = line_after(p, end, &n);
        int at_start = !in_quote;
        while (p < n) {
            if (in_quote) {
                char c = *p;
                if (has_escape && c == e && p + 1 < n) {
                    PUT(p[0]);
                    PUT(p[1]);
                    p += 2;
                    continue;
                }
                PUT(c);
                p++;
                if (c == q) {
                    if (p < n && *p == q) { /* a doubled quote */
                        PUT(q);
                        p++;
                        continue;
                    }
                    in_quote = 0;
                    const char *j = p;
                    while (j < n && *j == ' ') j++;
                    if (j == n || *j == d) { /* blanks after the closing quote */
                        if (j != p && check) {
                            changed = 1;
                            break;
                        }
                        p = j;
                    }
                }
                continue;
            }
            if (at_start) {
                const char *j = p;
                if (j < n && *j == ' ') j++;
                if (j < n && *j == q) { /* a blank before the opening quote */
                    if (j != p && check) {
                        changed = 1;
                        break;
                    }
                    PUT(q);
                    p = j + 1;
                    in_quote = 1;
                    at_start = 0;
                    continue;
                }
            }
            char c = *p++;
            PUT(c);
            at_start = c == d;
        }
        if (changed) break;
        if (check) p = next;
        else
            while (p < next) *o++ = *p++;
    }
    Py_END_ALLOW_THREADS
#undef PUT
    PyBuffer_Release(&in);
    if (check) return Py_BuildValue("(OO)", changed ? Py_True : Py_False, in_quote ? Py_True : Py_False);
    Py_ssize_t len = o - PyBytes_AS_STRING(out);
    if (_PyBytes_Resize(&out, len) < 0) return NULL;
    return Py_BuildValue("(NO)", out, in_quote ? Py_True : Py_False);
}

/* csv.reader's states (CPython's Modules/_csv.c), for unquote */
enum { CR_START_RECORD, CR_START_FIELD, CR_ESCAPED_CHAR, CR_IN_FIELD, CR_IN_QUOTED_FIELD,
       CR_ESCAPE_IN_QUOTED_FIELD, CR_QUOTE_IN_QUOTED_FIELD, CR_EAT_CRNL, CR_AFTER_ESCAPED_CRNL };
#define CR_EOL (-2)
/* csv.reader's field size limit by default: a longer field of a quoted line is left
 * to the Python form (layout.unquoted), whose reader may refuse it */
#define CR_FIELD_LIMIT 131072

/* unquote(text, delim, quote, escape, limit=-1) -> bytes or None: the sniffer's sample
 * (layout.unquoted) written without quotes and escapes: each line holding a quote
 * or an escape as csv.reader reads it alone (strict=False; quote -1 for
 * QUOTE_NONE; an escape equal to the quote a doubled quote), its fields joined by
 * 0x1F, a CR before its LF kept; the other lines with each delimiter made 0x1F.
 * All four characters ASCII. None where layout.unquoted's reader reading would
 * differ from a split of the result, or where it is not sure to read the same:
 * the text holds 0x1F, a NUL or a CR not before a LF; a quoted line's row runs
 * past its line end, is one empty field, holds a CR or LF in a field, or a
 * field of CR_FIELD_LIMIT bytes or more. layout.unquoted_by_reader is the
 * reference; this form has no bound on the number of quoted lines. limit: the
 * text only up to the line end of its limit-th row (a line not empty once a CR
 * before its LF goes, as sample_shapes counts them), the rest neither checked nor
 * written: the sample those rows make is the same. */
static PyObject *unquote(PyObject *mod, PyObject *args) {
    Py_buffer in;
    int delim, quote, escape;
    Py_ssize_t limit = -1, rows = 0;
    if (!PyArg_ParseTuple(args, "y*iii|n", &in, &delim, &quote, &escape, &limit)) return NULL;
    PyObject *out = PyBytes_FromStringAndSize(NULL, in.len);
    if (!out) return PyBuffer_Release(&in), NULL;
    const unsigned char *p = in.buf, *end = p + in.len;
    unsigned char *o = (unsigned char *)PyBytes_AS_STRING(out);
    const int escapechar = quote >= 0 && escape >= 0 && escape != quote ? escape : -1;
    const int doublequote = escapechar < 0;
    int ok = 1;
    Py_BEGIN_ALLOW_THREADS
    while (ok && p < end && (limit < 0 || rows < limit)) {
        const unsigned char *nl = memchr(p, '\n', (size_t)(end - p));
        const unsigned char *line_end = nl ? nl : end;
        size_t len = (size_t)(line_end - p);
        /* what no line may hold: 0x1F, a NUL, a CR not before a LF */
        for (const unsigned char *c = p; c < line_end; c++) {
            if (*c == 0x1F || *c == 0 || (*c == '\r' && (c + 1 != line_end || !nl))) {
                ok = 0;
                break;
            }
        }
        if (!ok) break;
        /* a row of the sample (SampleLines: a line not empty once a CR before its LF goes) */
        rows += len > 1 || (len == 1 && *p != '\r');
        int special = (quote >= 0 && memchr(p, quote, len)) ||
                      (escape >= 0 && escape != quote && memchr(p, escape, len));
        if (!special) {
            for (const unsigned char *c = p; c < line_end; c++) *o++ = *c == delim ? 0x1F : *c;
        } else {
            /* csv.reader over [line + "\n", ...]: the line's characters, a LF, then EOL */
            int state = CR_START_RECORD, fields = 0;
            Py_ssize_t field_len = 0;
            unsigned char *row = o;
            for (Py_ssize_t i = 0; ok && i <= (Py_ssize_t)len + 1; i++) {
                int c = i < (Py_ssize_t)len ? p[i] : i == (Py_ssize_t)len ? '\n' : CR_EOL;
                int add = 0, save = 0;
                switch (state) {
                case CR_START_RECORD:
                    if (c == CR_EOL) break;
                    if (c == '\n' || c == '\r') {
                        state = CR_EAT_CRNL;
                        break;
                    }
                    state = CR_START_FIELD;
                    /* fall through */
                case CR_START_FIELD:
                    if (c == '\n' || c == '\r' || c == CR_EOL) {
                        save = 1;
                        state = c == CR_EOL ? CR_START_RECORD : CR_EAT_CRNL;
                    } else if (c == quote && quote >= 0) {
                        state = CR_IN_QUOTED_FIELD;
                    } else if (c == escapechar) {
                        state = CR_ESCAPED_CHAR;
                    } else if (c == delim) {
                        save = 1;
                    } else {
                        add = 1;
                        state = CR_IN_FIELD;
                    }
                    break;
                case CR_ESCAPED_CHAR:
                case CR_ESCAPE_IN_QUOTED_FIELD:
                    /* a CR, LF or EOL escaped becomes a line end in the field */
                    if (c == '\n' || c == '\r' || c == CR_EOL) ok = 0;
                    add = 1;
                    state = state == CR_ESCAPED_CHAR ? CR_IN_FIELD : CR_IN_QUOTED_FIELD;
                    break;
                case CR_AFTER_ESCAPED_CRNL: /* never reached: the line end refused it */
                    ok = 0;
                    break;
                case CR_IN_FIELD:
                    if (c == '\n' || c == '\r' || c == CR_EOL) {
                        save = 1;
                        state = c == CR_EOL ? CR_START_RECORD : CR_EAT_CRNL;
                    } else if (c == escapechar) {
                        state = CR_ESCAPED_CHAR;
                    } else if (c == delim) {
                        save = 1;
                        state = CR_START_FIELD;
                    } else {
                        add = 1;
                    }
                    break;
                case CR_IN_QUOTED_FIELD:
                    if (c == CR_EOL) {
                    } else if (c == escapechar) {
                        state = CR_ESCAPE_IN_QUOTED_FIELD;
                    } else if (c == quote) {
                        state = doublequote ? CR_QUOTE_IN_QUOTED_FIELD : CR_IN_FIELD;
                    } else {
                        add = 1; /* a line end here: the field is still open, refused below */
                    }
                    break;
                case CR_QUOTE_IN_QUOTED_FIELD:
                    if (c == quote) {
                        add = 1;
                        state = CR_IN_QUOTED_FIELD;
                    } else if (c == delim) {
                        save = 1;
                        state = CR_START_FIELD;
                    } else if (c == '\n' || c == '\r' || c == CR_EOL) {
                        save = 1;
                        state = c == CR_EOL ? CR_START_RECORD : CR_EAT_CRNL;
                    } else {
                        add = 1; /* strict=False: text after the closing quote */
                        state = CR_IN_FIELD;
                    }
                    break;
                case CR_EAT_CRNL:
                    if (c == '\n' || c == '\r') {
                    } else if (c == CR_EOL) {
                        state = CR_START_RECORD;
                    } else {
                        ok = 0; /* the reader's "new-line character seen in unquoted field" */
                    }
                    break;
                }
                if (add) {
                    if (c == '\n' || c == '\r' || c == CR_EOL || ++field_len >= CR_FIELD_LIMIT) ok = 0;
                    else *o++ = (unsigned char)c;
                }
                if (save) {
                    *o++ = 0x1F;
                    fields++;
                    field_len = 0;
                }
            }
            /* the row must end with the line, and be more than one empty field */
            if (state != CR_START_RECORD || (fields == 1 && o - row == 1)) ok = 0;
            if (!ok) break;
            if (fields) o--; /* the separator after the last field */
            if (len && p[len - 1] == '\r') *o++ = '\r';
        }
        if (nl) *o++ = '\n';
        p = nl ? nl + 1 : end;
    }
    Py_END_ALLOW_THREADS
    Py_ssize_t n = o - (unsigned char *)PyBytes_AS_STRING(out);
    PyBuffer_Release(&in);
    if (!ok) {
        Py_DECREF(out);
        Py_RETURN_NONE;
    }
    if (_PyBytes_Resize(&out, n) < 0) return NULL;
    return out;
}

static int is_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

/* uncomment(block, mark, quote, in_quote) -> (block, in_quote): the lines of block
 * cut at their comment mark outside quotes (every quote character toggles), a line
 * blank before it kept as a bare mark; dialect.cut_comment is the reference. */
static PyObject *uncomment(PyObject *mod, PyObject *args) {
    Py_buffer in;
    int mark, quote, in_quote;
    if (!PyArg_ParseTuple(args, "y*iip", &in, &mark, &quote, &in_quote)) return NULL;
    PyObject *out = PyBytes_FromStringAndSize(NULL, in.len);
    if (!out) return PyBuffer_Release(&in), NULL;
    const char *p = in.buf, *end = p + in.len;
    char *o = PyBytes_AS_STRING(out);
    char m = (char)mark, q = (char)quote;
    Py_BEGIN_ALLOW_THREADS
    while (p < end) {
        const char *n;
        const char *next = line_after(p, end, &n);
        const char *body = n;
        while (body > p && (body[-1] == '\r' || body[-1] == '\n')) body--; /* rstrip("\r\n") */
        const char *cut = NULL;
        for (const char *c = p; c < body; c++) {
            if (quote >= 0 && *c == q) in_quote = !in_quote;
            else if (*c == m && !in_quote) { cut = c; break; }
        }
        if (!cut) {
            memcpy(o, p, (size_t)(next - p));
            o += next - p;
        } else {
            const char *c = p;
            while (c < cut && is_space(*c)) c++;
            if (c == cut) {
                *o++ = m;
            } else {
                memcpy(o, p, (size_t)(cut - p));
                o += cut - p;
            }
            memcpy(o, body, (size_t)(next - body));
            o += next - body;
        }
        p = next;
    }
    Py_END_ALLOW_THREADS
    Py_ssize_t len = o - PyBytes_AS_STRING(out);
    PyBuffer_Release(&in);
    if (_PyBytes_Resize(&out, len) < 0) return NULL;
    return Py_BuildValue("(NO)", out, in_quote ? Py_True : Py_False);
}

/* quoted_cr(block, in_quote) -> (found, in_quote): whether a CR sits inside a
 * double-quoted field of block (every " toggles), given whether one was open
 * before it, and whether one is open after it (opening.py's lone-CR copy) */
static PyObject *quoted_cr(PyObject *mod, PyObject *args) {
    Py_buffer in;
    int in_quote, found = 0;
    if (!PyArg_ParseTuple(args, "y*p", &in, &in_quote)) return NULL;
    const char *p = in.buf, *end = p + in.len;
    Py_BEGIN_ALLOW_THREADS
    for (; p < end; p++) {
        if (*p == '"') in_quote = !in_quote;
        else if (*p == '\r' && in_quote) { found = 1; break; }
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&in);
    return Py_BuildValue("(OO)", found ? Py_True : Py_False, in_quote ? Py_True : Py_False);
}

static PyMethodDef module_methods[] = {
    {"simd", simd, METH_VARARGS, "simd(on=None) -> the vector code in use; False forces the baseline"},
    {"scan", scan, METH_VARARGS, "scan one byte range of a File; see the module source"},
    {"absorb", absorb, METH_VARARGS, "absorb(parts, partials, first, stop): partitions merged"},
    {"average", average, METH_VARARGS, "average(sums, width, counts, grouped) -> doubles: DuckDB's avg of integers"},
    {"pool_release", pool_release, METH_NOARGS, "pool_release(): the scans' kept table arrays freed (and malloc's free memory)"},
    {"pool_held", pool_held, METH_NOARGS, "pool_held() -> bytes of the scans' table arrays kept"},
    {"export_columns", export_columns, METH_VARARGS, "export_columns(states, key_codes, release=False): Arrow buffers"},
    {"export_top", export_top, METH_VARARGS, "export_top(states, agg): the rows of a top-k aggregate"},
    {"parse_value", parse_value, METH_VARARGS, "parse_value(kind, bytes): the scanner's own value parser"},
    {"shapes", shapes, METH_VARARGS, "shapes(joined): bits of the kinds every line of a sample has"},
    {"sample_columns", sample_columns, METH_VARARGS, "the sniffer's sample of a text without quotes, as columns"},
    {"sample_shapes", sample_shapes, METH_VARARGS, "the sniffer's sample of a text without quotes, typed"},
    {"unquote", unquote, METH_VARARGS, "unquote(text, delim, quote, escape): the sniffer's sample without quotes"},
    {"unpad", unpad, METH_VARARGS, "unpad(block, delim, quote, escape, in_quote): blanks around quotes dropped"},
    {"quoted_cr", quoted_cr, METH_VARARGS, "quoted_cr(block, in_quote): a CR inside double quotes?"},
    {"uncomment", uncomment, METH_VARARGS, "uncomment(block, mark, quote, in_quote): lines cut at comments"},
    {NULL},
};

static struct PyModuleDef moduledef = {PyModuleDef_HEAD_INIT, "_scanner", "the compiled CSV scanner", -1,
                                       module_methods};

PyMODINIT_FUNC PyInit__scanner(void) {
    if (PyType_Ready(&FileType) < 0 || PyType_Ready(&AggStateType) < 0) return NULL;
    year_table_init();
#ifdef HAVE_AVX2
    __builtin_cpu_init();
    use_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt") && __builtin_cpu_supports("pclmul");
#endif
    PyObject *m = PyModule_Create(&moduledef);
    if (!m) return NULL;
    Py_INCREF(&FileType);
    PyModule_AddObject(m, "File", (PyObject *)&FileType);
    Py_INCREF(&AggStateType);
    PyModule_AddObject(m, "AggState", (PyObject *)&AggStateType);
    PyModule_AddIntConstant(m, "AGG_PARTS", AGG_PARTS);
    return m;
}
