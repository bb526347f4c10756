/*
 * _rows.h: counting well-formed rows 64 bytes at a time, for count(*).
 *
 * rows_count() walks a byte range in 64-byte blocks, each turned into bit masks
 * of its quote, delimiter, newline and escape bytes (SSE2 or AVX2 where the
 * processor has them, plain C elsewhere). Quoted stretches are found by the
 * prefix XOR of the quote bits (carried from block to block), so delimiters and
 * newlines inside quotes drop out; a row is its outside newline, and its fields
 * are the popcount of the outside delimiters before it.
 *
 * It vouches only for rows whose reading is beyond doubt: each opening quote at
 * a field's start (after one blank, with padded quotes), each closing quote
 * followed by a delimiter, a newline, \r\n or the second quote of a doubled one
 * (past blanks, with padded quotes), no escape character inside quotes, not a
 * comment line, exactly ncols fields. At anything else (a blank or ragged
 * line, a quote inside an unquoted field, text after a closing quote, the last
 * bytes of the file) it stops at that row's start, where the scanner's careful
 * row parser takes over: the rows it counts are the rows that parser would
 * have read without error, so the count is the same.
 *
 * Plain C apart from the intrinsics: no Python.h, so a test compiles it alone.
 */
#ifndef GATEWAY_CSV_ROWS_H
#define GATEWAY_CSV_ROWS_H

#include <stdint.h>
#include <string.h>

#if defined(__SSE2__) && !defined(ROWS_NO_SIMD)
#include <emmintrin.h>
#define ROWS_SSE2 1
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>
#define ROWS_AVX2 1
#endif
#endif

typedef struct {
    char delim;
    int quote;   /* -1: none */
    int escape;  /* -1, or the quote itself: no separate escape character */
    int comment; /* a row starting with it is not counted here; -1 for none */
    int pad;     /* blanks may sit around quoted fields (1, "a" ,2) */
    int ncols;   /* at least 2 */
} RowsDialect;

typedef struct {
    uint64_t q, d, n, e; /* quote, delimiter, newline, escape bits of a block */
} RowsMasks;

/* Whether rows_count can vouch for rows of this dialect at all. */
static inline int rows_dialect_ok(const RowsDialect *dl) {
    char d = dl->delim;
    if (dl->ncols < 2 || d == '\n' || d == '\r' || (dl->pad && d == ' ')) return 0;
    if (dl->quote >= 0) {
        char q = (char)dl->quote;
        if (q == d || q == '\n' || q == '\r' || q == ' ') return 0;
    }
    if (dl->escape >= 0 && dl->escape != dl->quote) {
        char e = (char)dl->escape;
        if (e == d || e == '\n' || e == '\r' || e == ' ') return 0;
    }
    return 1;
}

static inline uint64_t rows_prefix_xor(uint64_t x) {
    x ^= x << 1;
    x ^= x << 2;
    x ^= x << 4;
    x ^= x << 8;
    x ^= x << 16;
    x ^= x << 32;
    return x;
}

static inline int rows_popcount(uint64_t x) {
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_popcountll(x);
#else
    int n = 0;
    for (; x; x &= x - 1) n++;
    return n;
#endif
}

static inline void rows_masks_scalar(const char *p, const RowsDialect *dl, RowsMasks *m) {
    char q = dl->quote >= 0 ? (char)dl->quote : '\n';
    char e = dl->escape >= 0 && dl->escape != dl->quote ? (char)dl->escape : '\n';
    m->q = m->d = m->n = m->e = 0;
    for (int i = 0; i < 64; i++) {
        char c = p[i];
        uint64_t bit = (uint64_t)1 << i;
        if (c == '\n') m->n |= bit;
        else if (c == dl->delim) m->d |= bit;
        else if (c == q) m->q |= bit;
        else if (c == e) m->e |= bit;
    }
}

#ifdef ROWS_SSE2
static inline void rows_masks_sse2(const char *p, const RowsDialect *dl, RowsMasks *m) {
    const __m128i vd = _mm_set1_epi8(dl->delim), vn = _mm_set1_epi8('\n');
    const __m128i vq = _mm_set1_epi8(dl->quote >= 0 ? (char)dl->quote : '\n');
    const __m128i ve = _mm_set1_epi8(dl->escape >= 0 && dl->escape != dl->quote ? (char)dl->escape : '\n');
    m->q = m->d = m->n = m->e = 0;
    for (int i = 0; i < 4; i++) {
        __m128i v = _mm_loadu_si128((const __m128i *)(p + 16 * i));
        m->d |= (uint64_t)(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, vd)) << (16 * i);
        m->n |= (uint64_t)(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, vn)) << (16 * i);
        m->q |= (uint64_t)(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, vq)) << (16 * i);
        m->e |= (uint64_t)(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, ve)) << (16 * i);
    }
    /* with no quote (or escape) character its compare matched the newlines */
    m->q &= ~m->n;
    m->e &= ~m->n;
}
#endif

#ifdef ROWS_AVX2
#define ROWS_AVX2_TARGET __attribute__((target("avx2,popcnt,pclmul")))
ROWS_AVX2_TARGET static inline uint64_t rows_bits32(__m256i a, __m256i b, __m256i c) {
    return (uint64_t)(uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(a, c)) |
           (uint64_t)(uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(b, c)) << 32;
}

/* rows_prefix_xor as one carry-less product by all ones (PCLMULQDQ: every AVX2 processor
 * has it, and the caller checks) */
ROWS_AVX2_TARGET static inline uint64_t rows_prefix_xor_clmul(uint64_t x) {
    return (uint64_t)_mm_cvtsi128_si64(_mm_clmulepi64_si128(_mm_set_epi64x(0, (long long)x), _mm_set1_epi8((char)0xFF), 0));
}

ROWS_AVX2_TARGET static inline void rows_masks_avx2(const char *p, const RowsDialect *dl, RowsMasks *m) {
    const __m256i vd = _mm256_set1_epi8(dl->delim), vn = _mm256_set1_epi8('\n');
    const __m256i vq = _mm256_set1_epi8(dl->quote >= 0 ? (char)dl->quote : '\n');
    const __m256i ve = _mm256_set1_epi8(dl->escape >= 0 && dl->escape != dl->quote ? (char)dl->escape : '\n');
    __m256i a = _mm256_loadu_si256((const __m256i *)p), b = _mm256_loadu_si256((const __m256i *)(p + 32));
    m->d = rows_bits32(a, b, vd);
    m->n = rows_bits32(a, b, vn);
    m->q = rows_bits32(a, b, vq) & ~m->n;
    m->e = rows_bits32(a, b, ve) & ~m->n;
}
#endif

/* An opening quote at o (outside quotes before it) starts its field: after a
 * delimiter, a newline, the closing half of a doubled quote, the range's first
 * row start, or (padded) one blank that does. */
static inline int rows_opens_field(const RowsDialect *dl, const char *o, const char *first) {
    if (o == first) return 1;
    char c = o[-1];
    if (c == dl->delim || c == '\n' || c == (char)dl->quote) return 1;
    if (!dl->pad || c != ' ') return 0;
    return o - 1 == first || o[-2] == dl->delim || o[-2] == '\n';
}

/* A closing quote at c ends its field: a delimiter, a newline or \r\n follows
 * (past blanks, padded), or a quote right after it (a doubled quote). The end of
 * the range is left to the careful parser. */
static inline int rows_closes_field(const RowsDialect *dl, const char *c, const char *end) {
    const char *p = c + 1;
    if (p < end && *p == (char)dl->quote) return 1;
    if (dl->pad)
        while (p < end && *p == ' ') p++;
    if (p >= end) return 0;
    if (*p == dl->delim || *p == '\n') return 1;
    return *p == '\r' && p + 1 < end && p[1] == '\n';
}

/* The bits of the first quote in m->q (whose state inside[] gives) that is not
 * where a field's quoting can be, as one bit (0 when all are). */
static inline uint64_t rows_bad_quote(const RowsDialect *dl, const char *p, uint64_t q, uint64_t inside,
                                      const char *first, const char *end) {
    for (; q; q &= q - 1) {
        int b = __builtin_ctzll(q);
        int ok = inside >> b & 1 ? rows_opens_field(dl, p + b, first) : rows_closes_field(dl, p + b, end);
        if (!ok) return q & (0 - q);
    }
    return 0;
}

/* The bytes ROWS_AHEAD past a block are asked for as it is read: the processor's
 * own prefetcher stops at each 4 KiB page, and the first read of a page of the
 * file (mapped, not yet read) otherwise waits for memory. On lineitem's count,
 * 2-4% less CPU in three runs of each alternated (8 KiB ahead; 2 KiB showed no
 * difference in runs not alternated). A prefetch past the mapping, or of a page
 * not mapped, is dropped: no fault. */
#ifndef ROWS_AHEAD
#define ROWS_AHEAD 8192
#endif
#if defined(__GNUC__) || defined(__clang__)
#define ROWS_PREFETCH(p) __builtin_prefetch((p) + ROWS_AHEAD)
#else
#define ROWS_PREFETCH(p) ((void)0)
#endif

/* The kernel over one mask builder: see rows_count. */
#define ROWS_KERNEL(NAME, ATTR, MASKS, PREFIX_XOR)                                                              \
    ATTR static const char *NAME(const RowsDialect *dl, const char *p, const char *stop, const char *end,        \
                                 int64_t *counted) {                                                             \
        const char *first = p, *row = p;                                                                          \
        int64_t rows = 0;                                                                                         \
        const int want = dl->ncols - 1;                                                                           \
        int delims = 0;       /* outside delimiters of the current row before p */                                \
        uint64_t carry = 0;   /* all ones when p is inside quotes */                                              \
        while (end - p >= 64 && p < stop) {                                                                       \
            RowsMasks m;                                                                                          \
            ROWS_PREFETCH(p);                                                                                     \
            MASKS(p, dl, &m);                                                                                     \
            uint64_t inside = carry, bad = 0;                                                                     \
            if (m.q) {                                                                                            \
                inside = PREFIX_XOR(m.q) ^ carry;                                                                 \
                carry = 0 - (inside >> 63);                                                                       \
                bad = rows_bad_quote(dl, p, m.q, inside, first, end);                                             \
            }                                                                                                     \
            uint64_t esc = m.e & inside;                                                                          \
            if (esc) {                                                                                            \
                esc &= 0 - esc;                                                                                   \
                if (!bad || esc < bad) bad = esc;                                                                 \
            }                                                                                                     \
            uint64_t d = m.d & ~inside, n = m.n & ~inside;                                                        \
            if (bad) {                                                                                            \
                d &= bad - 1;                                                                                     \
                n &= bad - 1;                                                                                     \
            }                                                                                                     \
            for (; n; n &= n - 1) {                                                                               \
                uint64_t upto = n ^ (n - 1); /* the bits up to this newline's */                                  \
                if (row >= stop || delims + rows_popcount(d & upto) != want ||                                    \
                    (dl->comment >= 0 && (unsigned char)*row == (unsigned)dl->comment))                           \
                    goto done;                                                                                    \
                rows++;                                                                                           \
                row = p + __builtin_ctzll(n) + 1;                                                                 \
                d &= ~upto;                                                                                       \
                delims = 0;                                                                                       \
            }                                                                                                     \
            if (bad) break;                                                                                       \
            delims += rows_popcount(d);                                                                           \
            if (delims > want) break;                                                                             \
            p += 64;                                                                                              \
        }                                                                                                         \
    done:                                                                                                         \
        *counted = rows;                                                                                          \
        return row;                                                                                               \
    }

ROWS_KERNEL(rows_count_scalar, , rows_masks_scalar, rows_prefix_xor)
#ifdef ROWS_SSE2
ROWS_KERNEL(rows_count_sse2, , rows_masks_sse2, rows_prefix_xor)
#endif
#ifdef ROWS_AVX2
ROWS_KERNEL(rows_count_avx2, ROWS_AVX2_TARGET, rows_masks_avx2, rows_prefix_xor_clmul)
#endif

/* rows_count(dl, p, stop, end, &counted): from p, a row start outside quotes,
 * counts the rows that start before stop and that the careful parser would read
 * without error, reading no byte at or past end (the end of the file); returns
 * the start of the first row not counted (at or past stop, or one to parse with
 * care). simd: 2 for AVX2 (when the processor has it, and PCLMULQDQ), 1 for SSE2, 0 for
 * plain C. */
static const char *rows_count(const RowsDialect *dl, const char *p, const char *stop, const char *end, int simd,
                              int64_t *counted) {
#ifdef ROWS_AVX2
    if (simd >= 2) return rows_count_avx2(dl, p, stop, end, counted);
#endif
#ifdef ROWS_SSE2
    if (simd >= 1) return rows_count_sse2(dl, p, stop, end, counted);
#endif
    (void)simd;
    return rows_count_scalar(dl, p, stop, end, counted);
}

#endif /* GATEWAY_CSV_ROWS_H */
