/*
 * gateway_csv._dialect: DuckDB's CSV state machine, counting the fields of
 * each row of a sample under one candidate dialect, for the sniffer.
 *
 * A port of DuckDB's sniffing path (csv_state_machine_cache.cpp,
 * base_scanner.hpp's Process, column_count_scanner.cpp) in its default
 * strict mode with a one-byte delimiter, so that the csv engine sees the same
 * rows, comment lines, quoting and errors as DuckDB's read_csv_auto when it
 * picks a dialect. It never runs on the scan path.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdlib.h>
#include <string.h>

enum {
    STANDARD = 0, DELIMITER = 1, RECORD_SEPARATOR = 5, CARRIAGE_RETURN = 6, QUOTED = 7, UNQUOTED = 8,
    ESCAPE = 9, INVALID = 10, NOT_SET = 11, QUOTED_NEW_LINE = 12, EMPTY_SPACE = 13, COMMENT = 14,
    STANDARD_NEWLINE = 15, MAYBE_QUOTED = 18, NSTATES = 19
};
enum { NL_N = 0, NL_R = 1, NL_RN = 2 }; /* SINGLE_N, SINGLE_R, CARRY_ON */

typedef unsigned char Table[256][NSTATES];

static void build(Table t, int delim, int quote, int escape, int comment, int nl) {
    for (int s = 0; s < NSTATES; s++) {
        int to = STANDARD;
        if (s == MAYBE_QUOTED || s == QUOTED || s == QUOTED_NEW_LINE || s == ESCAPE) to = QUOTED;
        else if (s == UNQUOTED || s == CARRIAGE_RETURN) to = INVALID;
        else if (s == COMMENT) to = COMMENT;
        for (int c = 0; c < 256; c++) t[c][s] = (unsigned char)to;
    }
    int cr_state = nl == NL_RN ? CARRIAGE_RETURN : RECORD_SEPARATOR;
    const int std_inv[] = {STANDARD, INVALID, STANDARD_NEWLINE};
    for (int i = 0; i < 3; i++) {
        int s = std_inv[i];
        t[delim][s] = DELIMITER;
        if (nl == NL_RN) {
            t['\r'][s] = CARRIAGE_RETURN;
            t['\n'][s] = s == STANDARD_NEWLINE ? STANDARD : INVALID;
        } else if (nl == NL_N) {
            t['\n'][s] = RECORD_SEPARATOR;
            t['\r'][s] = INVALID;
        } else {
            t['\r'][s] = RECORD_SEPARATOR;
            t['\n'][s] = INVALID;
        }
        if (comment) t[comment][s] = COMMENT;
    }
    if (quote) t[quote][DELIMITER] = QUOTED;
    if (delim != ' ') t[' '][DELIMITER] = EMPTY_SPACE;
    t[delim][DELIMITER] = DELIMITER;
    t['\n'][DELIMITER] = RECORD_SEPARATOR;
    t['\r'][DELIMITER] = (unsigned char)cr_state;
    if (comment) t[comment][DELIMITER] = COMMENT;

    t[delim][RECORD_SEPARATOR] = DELIMITER;
    t['\n'][RECORD_SEPARATOR] = RECORD_SEPARATOR;
    t['\r'][RECORD_SEPARATOR] = (unsigned char)cr_state;
    if (quote) t[quote][RECORD_SEPARATOR] = QUOTED;
    if (delim != ' ') t[' '][RECORD_SEPARATOR] = EMPTY_SPACE;
    if (comment) t[comment][RECORD_SEPARATOR] = COMMENT;
    if (nl == NL_N) t['\r'][RECORD_SEPARATOR] = INVALID;
    else t['\n'][RECORD_SEPARATOR] = INVALID;

    t['\n'][CARRIAGE_RETURN] = RECORD_SEPARATOR;
    t['\r'][CARRIAGE_RETURN] = INVALID;
    if (quote) t[quote][CARRIAGE_RETURN] = QUOTED;
    if (delim != ' ') t[' '][CARRIAGE_RETURN] = EMPTY_SPACE;
    if (comment) t[comment][CARRIAGE_RETURN] = COMMENT;

    t[quote][QUOTED] = UNQUOTED;
    t['\n'][QUOTED] = QUOTED_NEW_LINE;
    t['\r'][QUOTED] = QUOTED_NEW_LINE;
    if (quote != escape && escape) t[escape][QUOTED] = ESCAPE;

    t['\n'][UNQUOTED] = RECORD_SEPARATOR;
    t['\r'][UNQUOTED] = (unsigned char)cr_state;
    t[delim][UNQUOTED] = DELIMITER;
    if (quote == escape) t[quote][UNQUOTED] = QUOTED;
    if (nl == NL_N) t['\r'][UNQUOTED] = INVALID;
    else t['\n'][UNQUOTED] = INVALID;
    if (comment) t[comment][UNQUOTED] = COMMENT;
    if (delim != ' ' && quote != ' ' && escape != ' ' && comment != ' ') t[' '][UNQUOTED] = UNQUOTED;

    t[delim][NOT_SET] = DELIMITER;
    t['\n'][NOT_SET] = RECORD_SEPARATOR;
    t['\r'][NOT_SET] = (unsigned char)cr_state;
    if (quote) t[quote][NOT_SET] = QUOTED;
    if (delim != ' ') t[' '][NOT_SET] = EMPTY_SPACE;
    if (comment) t[comment][NOT_SET] = COMMENT;

    t[quote][QUOTED_NEW_LINE] = UNQUOTED;
    if (quote != escape && escape) t[escape][QUOTED_NEW_LINE] = ESCAPE;

    t[delim][EMPTY_SPACE] = DELIMITER;
    t['\n'][EMPTY_SPACE] = RECORD_SEPARATOR;
    t['\r'][EMPTY_SPACE] = (unsigned char)cr_state;
    if (quote) t[quote][EMPTY_SPACE] = QUOTED;
    if (comment) t[comment][EMPTY_SPACE] = COMMENT;

    t['\n'][COMMENT] = RECORD_SEPARATOR;
    t['\r'][COMMENT] = (unsigned char)cr_state;
}

/* One row as count_rows reports it: (fields, last_value_always_empty, is_comment,
 * is_mid_comment, empty_lines before it). */
typedef struct {
    Py_ssize_t fields, empty_lines;
    unsigned char last_empty, as_comment; /* as_comment: 1 a comment, 2 a mid comment */
} Row;

/* The rows counted so far, in C: the loop runs without the GIL (the sniffer runs two
 * candidates' counts at once, gateway_csv.dialect); the list is made at the end. */
typedef struct {
    Row *rows;
    Py_ssize_t n, cap;
    Py_ssize_t fields, empty_lines;
    int comment, starts_as_comment;
} Counts;

/* AddRow / UnsetComment: one row ends; -1 when out of memory */
static int add_row(Counts *r, int last_empty, int as_comment) {
    if (!last_empty) {
        /* "from this row on, every last value is empty" no longer holds for the rows
         * that had it, back to the last one that did not */
        for (Py_ssize_t i = r->n - 1; i >= 0 && r->rows[i].last_empty; i--) r->rows[i].last_empty = 0;
    }
    if (r->n == r->cap) {
        Py_ssize_t cap = r->cap ? 2 * r->cap : 1024;
        Row *grown = realloc(r->rows, (size_t)cap * sizeof(Row));
        if (!grown) return -1;
        r->rows = grown, r->cap = cap;
    }
    r->rows[r->n++] = (Row){r->fields + 1, r->empty_lines, (unsigned char)last_empty, (unsigned char)as_comment};
    r->fields = 0;
    return 0;
}

static int end_row(Counts *r, int s0, int s1) {
    int last_empty = (s0 == DELIMITER && (s1 == RECORD_SEPARATOR || s1 == CARRIAGE_RETURN || s1 == DELIMITER)) ||
                     (s0 == STANDARD && s1 == DELIMITER);
    int kind = 0;
    if (r->comment) kind = r->starts_as_comment ? 1 : 2;
    r->comment = r->starts_as_comment = 0;
    return add_row(r, last_empty, kind);
}

/* count_rows(data, delimiter, quote, escape, comment, newline, max_rows, complete,
 *            check=None) -> (error, ever_quoted, ever_escaped, finished, rows)
 * One-byte characters as ints (0 for none); newline 0 = \n, 1 = \r, 2 = \r\n.
 * rows: (fields, last_value_always_empty, is_comment, is_mid_comment, empty_lines
 * before it). error: the state machine reached an invalid state (DuckDB drops the
 * candidate), a quote is still open at the end of a complete sample, or open over
 * all of an incomplete one. finished:
 * the sample ended before max_rows rows. check: (first, end, ncols) for rows, in
 * place of the list, whether every row of [first, end) has ncols fields or is a
 * comment (the sniffer's refinement, which needs no more of them). */
/* whether count_rows passes over runs of bytes that keep its state (runs(False): the
 * plain state machine, byte by byte, for the tests to compare) */
static int runs = 1;

static PyObject *set_runs(PyObject *mod, PyObject *args) {
    int on = 1;
    if (!PyArg_ParseTuple(args, "|p", &on)) return NULL;
    int was = runs;
    runs = on;
    return PyBool_FromLong(was);
}

static PyObject *count_rows(PyObject *mod, PyObject *args) {
    const unsigned char *p;
    Py_ssize_t n, max_rows;
    int delim, quote, escape, comment, nl, complete;
    Py_ssize_t check_first = 0, check_end = -1, check_ncols = 0;
    if (!PyArg_ParseTuple(args, "y#iiiiinp|(nnn)", &p, &n, &delim, &quote, &escape, &comment, &nl,
                          &max_rows, &complete, &check_first, &check_end, &check_ncols))
        return NULL;
    Table t;
    build(t, delim, quote, escape, comment, nl);
    /* the bytes that leave STANDARD and QUOTED as they are: a run of them is passed
     * over without the state machine's chain of lookups (nothing else happens there:
     * s0 and s1 are both that state after one of them, as after many) */
    unsigned char stay_standard[256], stay_quoted[256];
    for (int c = 0; c < 256; c++) {
        stay_standard[c] = runs && t[c][STANDARD] == STANDARD;
        stay_quoted[c] = runs && t[c][QUOTED] == QUOTED;
    }
    Counts r = {NULL, 0, 0, 0, 0, 0, 0};
    int s0 = NOT_SET, s1 = NOT_SET, error = 0, ever_quoted = 0, ever_escaped = 0, finished = 1, oom = 0;
    /* without the GIL: the loop reads the argument's bytes, which the call holds */
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        s0 = s1;
        s1 = t[p[i]][s1];
        int row_end = 0;
        switch (s1) {
        case INVALID:
            error = 1;
            r.n = 0;
            goto counted;
        case RECORD_SEPARATOR:
        case CARRIAGE_RETURN:
            if (s0 == RECORD_SEPARATOR || s0 == NOT_SET) r.empty_lines++;
            else if (s0 != CARRIAGE_RETURN) row_end = 1;
            break;
        case DELIMITER: r.fields++; break;
        case QUOTED:
            if ((s0 == UNQUOTED || s0 == MAYBE_QUOTED) && escape) ever_escaped = 1;
            if (s0 == ESCAPE && p[i] == quote) ever_escaped = 1;
            ever_quoted = 1;
            break;
        case UNQUOTED:
            if (s0 == MAYBE_QUOTED) ever_escaped = 1;
            break;
        case COMMENT:
            if (s0 != STANDARD && s0 != DELIMITER) r.starts_as_comment = 1;
            r.comment = 1;
            /* the rest of the line is skipped without transitions, as DuckDB does,
             * up to the last byte of the sample (which DuckDB then reads in the
             * comment state: a comment ending the file starts its line) */
            while (i + 1 < n - 1 && p[i + 1] != '\n' && p[i + 1] != '\r') i++;
            break;
        }
        if (s1 == STANDARD || s1 == QUOTED) {
            const unsigned char *stay = s1 == STANDARD ? stay_standard : stay_quoted;
            if (i + 1 < n && stay[p[i + 1]]) {
                i++;
                while (i + 1 < n && stay[p[i + 1]]) i++;
                s0 = s1;
            }
        }
        if (row_end) {
            if (end_row(&r, s0, s1)) {
                oom = 1;
                goto counted;
            }
            if (r.n >= max_rows) {
                finished = i + 1 >= n;
                goto counted;
            }
        }
    }
    if (!complete) {
        /* a quote open over the whole sample: DuckDB's line size limit ends it */
        error = ever_quoted && r.n == 0;
        finished = 0;
    } else if ((s1 == QUOTED || s1 == QUOTED_NEW_LINE) && s0 != UNQUOTED) {
        error = 1;
        r.n = 0;
    } else if (!(s1 == RECORD_SEPARATOR || s1 == CARRIAGE_RETURN || s1 == NOT_SET)) {
        if (end_row(&r, s0, s1)) oom = 1;
    }
counted:
    Py_END_ALLOW_THREADS
    if (check_end >= 0 && !oom) {
        int all = 1;
        for (Py_ssize_t i = check_first; i < check_end && i < r.n; i++)
            if (r.rows[i].fields != check_ncols && r.rows[i].as_comment != 1) {
                all = 0;
                break;
            }
        free(r.rows);
        return Py_BuildValue("(OOOOO)", error ? Py_True : Py_False, ever_quoted ? Py_True : Py_False,
                             ever_escaped ? Py_True : Py_False, finished ? Py_True : Py_False,
                             all ? Py_True : Py_False);
    }
    PyObject *rows = oom ? PyErr_NoMemory() : PyList_New(r.n);
    for (Py_ssize_t i = 0; rows && i < r.n; i++) {
        const Row *row = &r.rows[i];
        PyObject *item = Py_BuildValue("(nOOOn)", row->fields, row->last_empty ? Py_True : Py_False,
                                       row->as_comment == 1 ? Py_True : Py_False,
                                       row->as_comment == 2 ? Py_True : Py_False, row->empty_lines);
        if (!item) Py_CLEAR(rows);
        else PyList_SET_ITEM(rows, i, item);
    }
    free(r.rows);
    if (!rows) return NULL;
    return Py_BuildValue("(OOOON)", error ? Py_True : Py_False, ever_quoted ? Py_True : Py_False,
                         ever_escaped ? Py_True : Py_False, finished ? Py_True : Py_False, rows);
}

static PyMethodDef module_methods[] = {
    {"count_rows", count_rows, METH_VARARGS, "DuckDB's sniffing state machine over a sample; see the source"},
    {"runs", set_runs, METH_VARARGS, "runs(on=True) -> whether count_rows passed over runs of one state"},
    {NULL},
};

static struct PyModuleDef moduledef = {PyModuleDef_HEAD_INIT, "_dialect",
                                       "DuckDB's CSV sniffing state machine", -1, module_methods};

PyMODINIT_FUNC PyInit__dialect(void) { return PyModule_Create(&moduledef); }
