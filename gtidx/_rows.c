/*
 * gtidx._rows: the compiled row decoder behind gtidx/rowbatch.py (optional:
 * without it every group is decoded by show.decode_group).
 *
 * Decoder(kinds, charmaps, checksum_len, tables, file) decodes runs of event
 * groups (GROUP_RECORDs) of one binlog straight into Arrow buffers (the
 * schema is rowbatch.ARROW_SCHEMA; rowbatch.batches drives it, and
 * rowarrow.batch_from turns finish()'s buffers into a RecordBatch). The definition it must equal, value for value, is
 * show.decode_group + show_rows (mysql-replication's decoders, fed the event
 * bytes) + show.as_text: this file reproduces their results, and where it
 * cannot be sure to, it declines the group (status 2) and Python decodes it
 * with the definition, which also raises the errors users see. It never
 * raises for the binlog's bytes, and no Python object is made per row or
 * value: values are written as UTF-8 text into growing C buffers that
 * finish() hands over without a copy (the Buffer type below exposes the
 * buffer protocol; pyarrow wraps it).
 *
 * Every read is bounds-checked against the event's end; lengths from the
 * binlog are never trusted.
 *
 * Declined (the definition decides), and why:
 *  - a bad CRC32, an event whose length does not fit the group, a compressed
 *    event that does not inflate to its stated length, a QUERY, GTID or
 *    XA_PREPARE event too short for its fields: damage (the definition raises
 *    the exact error);
 *  - a rows event with no TABLE_MAP in its group, a rows or TABLE_MAP event
 *    whose fields run past its end or leave bytes over: the same;
 *  - column types mysql-replication reads differently or not at all: MySQL's
 *    binary JSON (245: show_mysql renders it, gtidx/mysqljson.py), VAR_STRING
 *    (253), NEWDATE (14), old DECIMAL (0), raw ENUM/SET types (247, 248) in a
 *    TABLE_MAP, TINY/MEDIUM/LONG_BLOB types (249-251), anything unknown;
 *    MySQL's PARTIAL_UPDATE_ROWS (39) is ignored as show.decode_group ignores it
 *    in a MariaDB group;
 *  - in a MySQL transaction (decode given its gtid texts: show_mysql is the
 *    definition), an anonymous one (its gtid is null), and any event type
 *    mysql_reads does not take: a TRANSACTION_PAYLOAD (compressed), a
 *    PARTIAL_UPDATE_ROWS, INTVAR/RAND/USER_VAR/XA_PREPARE, unknown types;
 *  - values the definition would fail on or shows in a form this file does not
 *    reproduce: NaN and infinite FLOAT/DOUBLE, a FLOAT whose shortest text
 *    overflows a float (the definition raises), fractional seconds > 6,
 *    a TIMESTAMP2 fraction over 999999, a DATETIME2 with its sign bit clear,
 *    DECIMAL digit groups out of range (damage), DECIMAL precision 0, > 65 or
 *    scale > precision, ENUM indexes past the members, BLOB length or
 *    ENUM/SET sizes outside 1..8 bytes, a TIMESTAMP outside years 1000-9999,
 *    a charset id the kinds table marks unknown (multi-byte charsets other
 *    than UTF-8) or does not hold;
 *  - optional metadata the definition reads oddly: unknown field types,
 *    fields that do not end where their length says, column names that are
 *    not UTF-8, empty or repeated, or not one per column; column metadata
 *    that does not take the length the TABLE_MAP states; a v2 rows event
 *    with extra data (ndb, partition info: the definition reads it its own way);
 *  - a group whose rows would not fit one batch's 2 GiB string buffers;
 *  - a row of no bytes (an image with no column): the definition would read
 *    such rows forever.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <stdlib.h>
#include <math.h>
#include <zlib.h>

#define HEADER_LEN 19
#define RECORD_LEN 40

/* event types (MariaDB's log_event.h) */
#define T_QUERY 2
#define T_FDE 15
#define T_TABLE_MAP 19
#define T_XA_PREPARE 38
#define T_GTID 162
#define T_QUERY_COMPRESSED 165

/* column types (FIELD_TYPE) */
enum { FT_DECIMAL = 0, FT_TINY = 1, FT_SHORT = 2, FT_LONG = 3, FT_FLOAT = 4, FT_DOUBLE = 5, FT_NULL = 6,
       FT_TIMESTAMP = 7, FT_LONGLONG = 8, FT_INT24 = 9, FT_DATE = 10, FT_TIME = 11, FT_DATETIME = 12,
       FT_YEAR = 13, FT_NEWDATE = 14, FT_VARCHAR = 15, FT_BIT = 16, FT_TIMESTAMP2 = 17, FT_DATETIME2 = 18,
       FT_TIME2 = 19, FT_JSON = 245, FT_NEWDECIMAL = 246, FT_ENUM = 247, FT_SET = 248, FT_BLOB = 252,
       FT_VAR_STRING = 253, FT_STRING = 254, FT_GEOMETRY = 255 };

#define CHARSET_BINARY 63

/* ------------------------------------------------------------------------- */
/* growable byte buffers (malloc'd: handed over to Buffer objects by finish)  */

typedef struct { char *p; Py_ssize_t len, cap; } Buf;

static int
grow(Buf *b, Py_ssize_t need)
{
    if (need <= b->cap - b->len)
        return 0;
    Py_ssize_t cap = b->cap ? b->cap : 1024;
    while (cap - b->len < need) {
        if (cap > PY_SSIZE_T_MAX / 2)
            return -1;
        cap *= 2;
    }
    char *p = realloc(b->p, (size_t)cap);
    if (p == NULL)
        return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

static inline int
put(Buf *b, const void *s, Py_ssize_t n)
{
    if (grow(b, n) < 0)
        return -1;
    if (n)
        memcpy(b->p + b->len, s, (size_t)n);
    b->len += n;
    return 0;
}

static inline int
put32(Buf *b, int32_t v)
{
    return put(b, &v, 4);
}

static inline int
put64(Buf *b, int64_t v)
{
    return put(b, &v, 8);
}

/* bit ``i`` of a validity bitmap (Arrow: LSB first), set or cleared */
static inline int
putbit(Buf *b, Py_ssize_t i, int v)
{
    Py_ssize_t need = i / 8 + 1;
    if (b->len < need) {
        if (grow(b, need - b->len) < 0)
            return -1;
        memset(b->p + b->len, 0, (size_t)(need - b->len));
        b->len = need;
    }
    if (v)
        b->p[i / 8] |= (char)(1 << (i % 8));
    else
        b->p[i / 8] &= (char)~(1 << (i % 8));
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Buffer: malloc'd memory handed to Python, read through the buffer protocol */

typedef struct {
    PyObject_HEAD
    char *p;
    Py_ssize_t len;
    Py_ssize_t exports;
} BufferObject;

static void
buffer_dealloc(BufferObject *self)
{
    free(self->p);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
buffer_getbuffer(BufferObject *self, Py_buffer *view, int flags)
{
    static char empty[8];
    return PyBuffer_FillInfo(view, (PyObject *)self, self->p ? self->p : empty, self->len, 1, flags);
}

static Py_ssize_t
buffer_length(BufferObject *self)
{
    return self->len;
}

static PyBufferProcs buffer_as_buffer = {(getbufferproc)buffer_getbuffer, NULL};
static PySequenceMethods buffer_as_sequence = {(lenfunc)buffer_length};

static PyTypeObject BufferType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "gtidx._rows.Buffer",
    .tp_basicsize = sizeof(BufferObject),
    .tp_dealloc = (destructor)buffer_dealloc,
    .tp_as_buffer = &buffer_as_buffer,
    .tp_as_sequence = &buffer_as_sequence,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A batch buffer of the row decoder (read-only, buffer protocol).",
};

/* the buffer's memory as a Buffer object; ``b`` is left empty */
static PyObject *
hand_over(Buf *b)
{
    BufferObject *o = PyObject_New(BufferObject, &BufferType);
    if (o == NULL)
        return NULL;
    o->p = b->p;
    o->len = b->len;
    o->exports = 0;
    b->p = NULL;
    b->len = b->cap = 0;
    return (PyObject *)o;
}

/* ------------------------------------------------------------------------- */
/* the batch: one Buf per Arrow buffer                                        */

enum {
    B_GTID_OFF, B_GTID, B_FILE_OFF, B_FILE, B_OFFSET, B_TS, B_TABLE_OFF, B_TABLE, B_OP_OFF, B_OP,
    /* before, then after: map validity, map offsets, key offsets, keys, value validity, value offsets, values */
    B_MAP0, B_MAP1 = B_MAP0 + 7,
    B_CH_VALID = B_MAP1 + 7, B_CH_OFF, B_CH_IOFF, B_CH,
    B_UN_OFF, B_UN_IOFF, B_UN,
    NBUF
};
#define M_VALID 0
#define M_OFF 1
#define M_KOFF 2
#define M_K 3
#define M_VVALID 4
#define M_VOFF 5
#define M_V 6

typedef struct {
    Buf b[NBUF];
    Py_ssize_t rows, entries[2], changed, unknown;
} Batch;

typedef struct {
    Py_ssize_t len[NBUF];
    Py_ssize_t rows, entries[2], changed, unknown;
} Mark;

static const int offset_bufs[] = {B_GTID_OFF, B_FILE_OFF, B_TABLE_OFF, B_OP_OFF, B_MAP0 + M_OFF,
                                  B_MAP0 + M_KOFF, B_MAP0 + M_VOFF, B_MAP1 + M_OFF, B_MAP1 + M_KOFF,
                                  B_MAP1 + M_VOFF, B_CH_OFF, B_CH_IOFF, B_UN_OFF, B_UN_IOFF};

static int
batch_start(Batch *t)
{
    memset(t, 0, sizeof(*t));
    for (size_t i = 0; i < sizeof(offset_bufs) / sizeof(offset_bufs[0]); i++)
        if (put32(&t->b[offset_bufs[i]], 0) < 0)
            return -1;
    return 0;
}

static void
batch_free(Batch *t)
{
    for (int i = 0; i < NBUF; i++)
        free(t->b[i].p);
    memset(t, 0, sizeof(*t));
}

static void
mark(Batch *t, Mark *m)
{
    for (int i = 0; i < NBUF; i++)
        m->len[i] = t->b[i].len;
    m->rows = t->rows;
    m->entries[0] = t->entries[0];
    m->entries[1] = t->entries[1];
    m->changed = t->changed;
    m->unknown = t->unknown;
}

static void
rollback(Batch *t, const Mark *m)
{
    for (int i = 0; i < NBUF; i++)
        t->b[i].len = m->len[i];
    t->rows = m->rows;
    t->entries[0] = m->entries[0];
    t->entries[1] = m->entries[1];
    t->changed = m->changed;
    t->unknown = m->unknown;
}

static Py_ssize_t
batch_bytes(const Batch *t)
{
    Py_ssize_t n = 0;
    for (int i = 0; i < NBUF; i++)
        n += t->b[i].len;
    return n;
}

/* a string appended to a string array (offsets int32: a batch holds < 2 GiB per array) */
static inline int
put_str(Buf *off, Buf *data, const char *s, Py_ssize_t n)
{
    if (n > INT32_MAX - data->len)
        return -1;
    if (put(data, s, n) < 0)
        return -1;
    return put32(off, (int32_t)data->len);
}

/* ------------------------------------------------------------------------- */
/* tables: what a TABLE_MAP says, as show_rows.Table sees it                  */

typedef struct {
    uint8_t type;          /* after mysql-replication's Column: STRING's real ENUM/SET type */
    uint8_t unsig;         /* read as unsigned */
    uint8_t fsp;
    uint8_t length_size;   /* BLOB, GEOMETRY */
    uint8_t precision, decimals;
    uint8_t nbytes;        /* BIT */
    uint8_t size;          /* ENUM, SET */
    uint8_t set_mask;      /* SET without member names: its bitmask */
    uint8_t numeric;
    int bits;              /* BIT */
    int max_length;        /* VARCHAR, STRING */
    int kind;              /* character columns: 1 UTF-8, 2 binary, 3+k single-byte charset k */
    int has_members;       /* ENUM (with a leading ""), SET: names from the metadata */
    Py_ssize_t mfirst, nmembers;   /* members: entries of Table.member */
    Py_ssize_t *sorted;    /* SET: member indexes in Python's sorted() order */
    Py_ssize_t key_at, key_len;    /* the column's name in Table.strs */
} Col;

typedef struct {
    char *raw;             /* the TABLE_MAP body (the cache key) */
    Py_ssize_t rawlen;
    uint64_t id;
    int skipped;           /* a table not asked for */
    int signed_known;      /* SIGNEDNESS metadata for every column */
    Py_ssize_t ncols;
    Col *cols;
    Buf strs;              /* "db.tbl", keys, members */
    Py_ssize_t name_len;   /* "db.tbl" at strs[0] */
    Py_ssize_t (*member)[2];   /* (offset in strs, length) */
    Py_ssize_t nmember;
    uint64_t used;         /* the last group that used it */
} Table;

static void
table_free(Table *t)
{
    if (t == NULL)
        return;
    if (t->cols)
        for (Py_ssize_t i = 0; i < t->ncols; i++)
            free(t->cols[i].sorted);
    free(t->cols);
    free(t->raw);
    free(t->strs.p);
    free(t->member);
    free(t);
}

/* ------------------------------------------------------------------------- */
/* reading with bounds                                                        */

typedef struct {
    const uint8_t *p;
    Py_ssize_t pos, end;
} Rd;

#define NEED(r, n) do { if ((Py_ssize_t)(n) < 0 || (r)->end - (r)->pos < (Py_ssize_t)(n)) return -1; } while (0)

static inline uint64_t
le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static inline uint64_t
be(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = (v << 8) | p[i];
    return v;
}

/* mysql-replication's read_length_coded_binary; -1 where it gives None or runs past the end */
static int
lenc(Rd *r, uint64_t *out)
{
    NEED(r, 1);
    uint8_t c = r->p[r->pos++];
    int w;
    if (c < 251) {
        *out = c;
        return 0;
    }
    if (c == 252) w = 2;
    else if (c == 253) w = 3;
    else if (c == 254) w = 8;
    else return -1;
    NEED(r, w);
    *out = le(r->p + r->pos, w);
    r->pos += w;
    return 0;
}

/* strict UTF-8, as Python's decoder: no overlongs, surrogates or > U+10FFFF */
static int
utf8_ok(const uint8_t *s, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    while (i < n) {
        /* ASCII runs, 8 bytes at a time */
        while (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (w & 0x8080808080808080ULL)
                break;
            i += 8;
        }
        if (i >= n)
            break;
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c < 0xC2)
            return 0;
        if (c < 0xE0) {
            if (i + 1 >= n || (s[i + 1] & 0xC0) != 0x80)
                return 0;
            i += 2;
            continue;
        }
        if (c < 0xF0) {
            if (i + 2 >= n)
                return 0;
            uint8_t c1 = s[i + 1];
            if ((c1 & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80)
                return 0;
            if (c == 0xE0 && c1 < 0xA0)
                return 0;
            if (c == 0xED && c1 >= 0xA0)
                return 0;
            i += 3;
            continue;
        }
        if (c < 0xF5) {
            if (i + 3 >= n)
                return 0;
            uint8_t c1 = s[i + 1];
            if ((c1 & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80 || (s[i + 3] & 0xC0) != 0x80)
                return 0;
            if (c == 0xF0 && c1 < 0x90)
                return 0;
            if (c == 0xF4 && c1 >= 0x90)
                return 0;
            i += 4;
            continue;
        }
        return 0;
    }
    return 1;
}

/* ------------------------------------------------------------------------- */
/* the decoder                                                                */

typedef struct {
    PyObject_HEAD
    uint8_t *kinds;
    Py_ssize_t nkinds;
    uint32_t *charmaps;     /* 256 code points per single-byte charset */
    Py_ssize_t ncharmaps;
    int crc;
    int all_tables;
    char **tables;          /* the "db.tbl" names asked for (UTF-8) */
    Py_ssize_t *table_lens;
    Py_ssize_t ntables;
    char *file;
    Py_ssize_t file_len;
    Batch batch;
    Py_ssize_t declined, groups;
    uint64_t group_no;
    Table **cache;          /* parsed TABLE_MAPs, by their bytes */
    Py_ssize_t ncache, capcache;
    Table **in_group;       /* this group's table_id -> table, latest last */
    Py_ssize_t ningroup, capgroup;
    Buf plain;              /* an inflated compressed event */
    Buf txt;                /* the current row's value texts */
    Buf scratch;
    int full;               /* a string array would pass 2 GiB: the batch is full */
} Decoder;

typedef struct {
    uint8_t state;          /* 0 absent from the image, 1 NULL, 2 a value */
    uint8_t kind;           /* what Python type the definition's value is: for != */
    uint8_t zero;           /* DECIMAL: the value is zero (0 == -0) */
    double d;               /* FLOAT, DOUBLE */
    Py_ssize_t at, len;     /* the text in Decoder.txt */
} Val;

enum { K_STR, K_BYTES, K_INT, K_FLOAT, K_DEC };

#define DECLINE (-1)
#define PYERR (-2)

/* ------------------------------------------------------------------------- */
/* TABLE_MAP                                                                  */

static int
is_char_col(int t)
{
    return t == FT_STRING || t == FT_VAR_STRING || t == FT_VARCHAR || t == FT_BLOB || t == FT_GEOMETRY;
}

static int
is_numeric_col(int t)
{
    return t == FT_TINY || t == FT_SHORT || t == FT_INT24 || t == FT_LONG || t == FT_LONGLONG ||
           t == FT_NEWDECIMAL || t == FT_FLOAT || t == FT_DOUBLE || t == FT_YEAR;
}

/* a list of length-coded ints over [pos, until): -1 unless it ends exactly there */
static int
read_ints(Rd *r, Py_ssize_t until, Buf *out, Py_ssize_t *count)
{
    *count = 0;
    out->len = 0;
    while (r->pos < until) {
        uint64_t v;
        if (lenc(r, &v) < 0)
            return -1;
        if (put(out, &v, 8) < 0)
            return -1;
        (*count)++;
    }
    return r->pos == until ? 0 : -1;
}

/* mysql-replication's read_variable_length_string */
static int
varstr(Rd *r, const uint8_t **s, Py_ssize_t *n)
{
    uint64_t length = 0;
    int shift = 0;
    uint8_t byte = 0x80;
    while (byte & 0x80) {
        NEED(r, 1);
        byte = r->p[r->pos++];
        if (shift > 56)
            return -1;
        length |= (uint64_t)(byte & 0x7F) << shift;
        shift += 7;
    }
    if (length > (uint64_t)(r->end - r->pos))
        return -1;
    *s = r->p + r->pos;
    *n = (Py_ssize_t)length;
    r->pos += (Py_ssize_t)length;
    return 0;
}

typedef struct {
    Py_ssize_t at, n;       /* into the body */
} Span;

/* _read_type_values: a list of member lists; each member UTF-8 or "" */
static int
read_type_values(Rd *r, Py_ssize_t until, Buf *lists, Py_ssize_t *nlists)
{
    /* lists: per list, (count, then count Spans) flattened as Py_ssize_t */
    *nlists = 0;
    lists->len = 0;
    while (r->pos < until) {
        uint64_t count;
        if (lenc(r, &count) < 0 || count > (uint64_t)(until - r->pos))
            return -1;
        Py_ssize_t c = (Py_ssize_t)count;
        if (put(lists, &c, sizeof(c)) < 0)
            return -1;
        for (Py_ssize_t i = 0; i < c; i++) {
            const uint8_t *s;
            Py_ssize_t n;
            if (varstr(r, &s, &n) < 0)
                return -1;
            Span sp = {s - r->p, utf8_ok(s, n) ? n : 0};
            if (put(lists, &sp, sizeof(sp)) < 0)
                return -1;
        }
        (*nlists)++;
    }
    return r->pos == until ? 0 : -1;
}

/* the i-th list of read_type_values' output: its count and spans */
static const Span *
type_list(const Buf *lists, Py_ssize_t i, Py_ssize_t *count)
{
    Py_ssize_t at = 0;
    for (;;) {
        Py_ssize_t c;
        memcpy(&c, lists->p + at, sizeof(c));
        if (i == 0) {
            *count = c;
            return (const Span *)(lists->p + at + sizeof(c));
        }
        at += sizeof(c) + c * sizeof(Span);
        i--;
    }
}

/* the charset of character columns from DEFAULT_CHARSET / COLUMN_CHARSET */
typedef struct {
    int present;            /* a list (possibly shorter than the columns) */
    Py_ssize_t n;
    uint64_t *ids;
} Charsets;

static int
read_default_charset(Rd *r, Py_ssize_t until, const Col *cols, Py_ssize_t ncols, int enum_set,
                     Charsets *out, Buf *tmp)
{
    uint64_t def;
    if (r->pos >= until)
        return -1;          /* the definition unpacks None: TypeError */
    if (lenc(r, &def) < 0)
        return -1;
    Py_ssize_t pairs = 0;
    tmp->len = 0;
    while (r->pos < until) {
        uint64_t idx, coll;
        if (lenc(r, &idx) < 0 || lenc(r, &coll) < 0)
            return -1;
        if (put(tmp, &idx, 8) < 0 || put(tmp, &coll, 8) < 0)
            return -1;
        pairs++;
    }
    if (r->pos != until)
        return -1;
    free(out->ids);
    out->ids = malloc(sizeof(uint64_t) * (size_t)(ncols + 1));
    if (out->ids == NULL)
        return -1;
    out->present = 1;
    out->n = 0;
    uint64_t position = 0;
    for (Py_ssize_t i = 0; i < ncols; i++) {
        int t = cols[i].type;
        if (enum_set ? !(t == FT_ENUM || t == FT_SET) : !is_char_col(t))
            continue;
        uint64_t id = def;
        for (Py_ssize_t k = 0; k < pairs; k++) {      /* the last pair for a position wins (a dict) */
            uint64_t ix;
            memcpy(&ix, tmp->p + 16 * k, 8);
            if (ix == position)
                memcpy(&id, tmp->p + 16 * k + 8, 8);
        }
        out->ids[out->n++] = id;
        position++;
    }
    return 0;
}

static int
read_column_charset(Rd *r, Py_ssize_t until, const Col *cols, Py_ssize_t ncols, int enum_set,
                    Charsets *out, Buf *tmp)
{
    Py_ssize_t count;
    if (read_ints(r, until, tmp, &count) < 0)
        return -1;
    free(out->ids);
    out->ids = NULL;
    out->n = 0;
    out->present = 0;
    if (count == 0)
        return 0;           /* the definition's None: no charsets */
    out->ids = malloc(sizeof(uint64_t) * (size_t)(ncols + 1));
    if (out->ids == NULL)
        return -1;
    out->present = 1;
    Py_ssize_t position = 0;
    for (Py_ssize_t i = 0; i < ncols; i++) {
        int t = cols[i].type;
        if (enum_set ? !(t == FT_ENUM || t == FT_SET) : !is_char_col(t))
            continue;
        if (position >= count)
            return -1;      /* IndexError */
        memcpy(&out->ids[out->n++], tmp->p + 8 * position, 8);
        position++;
    }
    return 0;
}

static int
charset_kind(Decoder *d, uint64_t id)
{
    if (id == CHARSET_BINARY)
        return 2;
    if (id >= (uint64_t)d->nkinds)
        return -1;
    int k = d->kinds[id];
    if (k == 0)
        return -1;
    if (k >= 3 && (Py_ssize_t)(k - 3) >= d->ncharmaps)
        return -1;
    return k;
}

static int
strs_put(Table *t, const void *s, Py_ssize_t n, Py_ssize_t *at)
{
    *at = t->strs.len;
    return put(&t->strs, s, n);
}

static Table *sort_table;    /* for the qsort of SET members */
static Py_ssize_t sort_first;

static int
member_cmp(const void *a, const void *b)
{
    Py_ssize_t i = *(const Py_ssize_t *)a, j = *(const Py_ssize_t *)b;
    Py_ssize_t *mi = sort_table->member[sort_first + i], *mj = sort_table->member[sort_first + j];
    Py_ssize_t n = mi[1] < mj[1] ? mi[1] : mj[1];
    int c = memcmp(sort_table->strs.p + mi[0], sort_table->strs.p + mj[0], (size_t)n);
    if (c)
        return c;
    if (mi[1] != mj[1])
        return mi[1] < mj[1] ? -1 : 1;
    return i < j ? -1 : i > j;
}

/* Parse a TABLE_MAP body as mysql-replication's TableMapEvent and
 * show_rows.Table read it. 0 and *out (skipped set for a table not asked
 * for), or DECLINE. */
static int
parse_table_map(Decoder *d, const uint8_t *body, Py_ssize_t n, Table **out)
{
    Rd rd = {body, 0, n}, *r = &rd;
    Table *t = calloc(1, sizeof(Table));
    Buf tmp = {0}, enums = {0}, sets = {0};
    Charsets cs = {0}, escs = {0};
    const uint8_t *names = NULL;   /* COLUMN_NAME's span */
    Py_ssize_t names_at = 0, names_n = 0, nenums = 0, nsets = 0;
    int has_names_tlv = 0, has_enums = 0, has_sets = 0;
    uint8_t *unsigned_of = NULL;
    int signedness = 0;
    if (t == NULL)
        goto decline;
    if (n < 8)
        goto decline;
    t->id = le(body, 6);
    r->pos = 8;
    if (n < 9)
        goto decline;
    /* db and table names: length, bytes, NUL (as _table_map_name reads them) */
    {
        Py_ssize_t dbn = body[r->pos], at = r->pos + 1;
        if (at + dbn + 1 >= n)
            goto decline;
        Py_ssize_t tn = body[at + dbn + 1], tat = at + dbn + 2;
        if (tat + tn > n)
            goto decline;
        if (!utf8_ok(body + at, dbn) || !utf8_ok(body + tat, tn))
            goto decline;
        if (put(&t->strs, body + at, dbn) < 0 || put(&t->strs, ".", 1) < 0 ||
            put(&t->strs, body + tat, tn) < 0)
            goto decline;
        t->name_len = dbn + 1 + tn;
        if (!d->all_tables) {
            int wanted = 0;
            for (Py_ssize_t i = 0; i < d->ntables && !wanted; i++)
                wanted = d->table_lens[i] == t->name_len && memcmp(d->tables[i], t->strs.p, (size_t)t->name_len) == 0;
            if (!wanted) {
                t->skipped = 1;
                goto done;
            }
        }
        r->pos = tat + tn;
        if (r->pos >= n)    /* the NUL after the table name */
            goto decline;
        r->pos += 1;
    }
    uint64_t ncols;
    if (lenc(r, &ncols) < 0 || ncols > (uint64_t)(n - r->pos) || ncols == 0)
        goto decline;
    t->ncols = (Py_ssize_t)ncols;
    t->cols = calloc((size_t)ncols, sizeof(Col));
    if (t->cols == NULL)
        goto decline;
    const uint8_t *types = body + r->pos;
    r->pos += t->ncols;
    uint64_t metalen;
    if (lenc(r, &metalen) < 0)
        goto decline;
    Py_ssize_t meta_start = r->pos;
    for (Py_ssize_t i = 0; i < t->ncols; i++) {
        Col *c = &t->cols[i];
        c->type = types[i];
        switch (c->type) {
        case FT_VARCHAR:
            if (r->end - r->pos < 2) goto decline;
            c->max_length = (int)le(body + r->pos, 2);
            r->pos += 2;
            break;
        case FT_DOUBLE: case FT_FLOAT: case FT_BLOB: case FT_GEOMETRY: case FT_JSON:
        case FT_TIMESTAMP2: case FT_DATETIME2: case FT_TIME2:
            if (r->end - r->pos < 1) goto decline;
            if (c->type == FT_BLOB || c->type == FT_GEOMETRY || c->type == FT_JSON)
                c->length_size = body[r->pos];
            else if (c->type >= FT_TIMESTAMP2 && c->type <= FT_TIME2)
                c->fsp = body[r->pos];
            r->pos += 1;
            break;
        case FT_VAR_STRING: case FT_STRING: {
            if (r->end - r->pos < 2) goto decline;
            int meta = (body[r->pos] << 8) + body[r->pos + 1];
            r->pos += 2;
            int real = meta >> 8;
            if (real == FT_SET || real == FT_ENUM) {
                c->type = (uint8_t)real;
                c->size = (uint8_t)(meta & 0xFF);
            } else
                c->max_length = (((meta >> 4) & 0x300) ^ 0x300) + (meta & 0xFF);
            break;
        }
        case FT_NEWDECIMAL:
            if (r->end - r->pos < 2) goto decline;
            c->precision = body[r->pos];
            c->decimals = body[r->pos + 1];
            r->pos += 2;
            break;
        case FT_BIT:
            if (r->end - r->pos < 2) goto decline;
            c->bits = body[r->pos + 1] * 8 + body[r->pos];
            c->nbytes = (uint8_t)((c->bits + 7) / 8);
            r->pos += 2;
            break;
        case FT_TINY: case FT_SHORT: case FT_LONG: case FT_LONGLONG: case FT_INT24: case FT_YEAR:
        case FT_TIMESTAMP: case FT_DATE: case FT_TIME: case FT_DATETIME:
            break;
        default:
            goto decline;       /* a type this decoder does not read (see the header) */
        }
        /* what this decoder reproduces of each type */
        switch (c->type) {
        case FT_TIMESTAMP2: case FT_DATETIME2: case FT_TIME2:
            if (c->fsp > 6) goto decline;
            break;
        case FT_NEWDECIMAL:
            if (c->precision == 0 || c->precision > 65 || c->decimals > c->precision) goto decline;
            break;
        case FT_BLOB: case FT_GEOMETRY:
            if (c->length_size < 1 || c->length_size > 8) goto decline;
            break;
        case FT_ENUM: case FT_SET:
            if (c->size < 1 || c->size > 8) goto decline;
            break;
        case FT_JSON: case FT_VAR_STRING:
            goto decline;
        default:
            break;
        }
        c->numeric = (uint8_t)is_numeric_col(c->type);
        c->kind = 1;
    }
    if ((uint64_t)(r->pos - meta_start) != metalen)
        goto decline;
    /* the NULL-able bitmask */
    if (r->end - r->pos < (t->ncols + 7) / 8)
        goto decline;
    r->pos += (t->ncols + 7) / 8;
    /* optional metadata, TLV */
    while (r->pos < r->end) {
        uint8_t ftype = body[r->pos++];
        uint64_t length;
        if (lenc(r, &length) < 0 || length > (uint64_t)(r->end - r->pos))
            goto decline;
        Py_ssize_t until = r->pos + (Py_ssize_t)length;
        switch (ftype) {
        case 1: {           /* SIGNEDNESS: bits over the numeric columns, MSB first */
            Py_ssize_t nnum = 0;
            for (Py_ssize_t i = 0; i < t->ncols; i++)
                nnum += t->cols[i].numeric;
            if ((nnum + 7) / 8 > (Py_ssize_t)length)
                goto decline;
            free(unsigned_of);
            unsigned_of = calloc((size_t)t->ncols, 1);
            if (unsigned_of == NULL)
                goto decline;
            Py_ssize_t k = 0;
            for (Py_ssize_t i = 0; i < t->ncols; i++) {
                if (!t->cols[i].numeric)
                    continue;
                unsigned_of[i] = (body[r->pos + k / 8] & (0x80 >> (k % 8))) != 0;
                k++;
            }
            signedness = 1;
            r->pos = until;
            break;
        }
        case 2: case 10:
            if (read_default_charset(r, until, t->cols, t->ncols, ftype == 10, ftype == 2 ? &cs : &escs, &tmp) < 0)
                goto decline;
            break;
        case 3: case 11:
            if (read_column_charset(r, until, t->cols, t->ncols, ftype == 11, ftype == 3 ? &cs : &escs, &tmp) < 0)
                goto decline;
            break;
        case 4: {
            Py_ssize_t count = 0, at0 = r->pos;
            while (r->pos < until) {
                const uint8_t *s;
                Py_ssize_t sn;
                if (varstr(r, &s, &sn) < 0)
                    goto decline;
                if (!utf8_ok(s, sn))
                    goto decline;       /* the definition's .decode() raises */
                count++;
            }
            if (r->pos != until)
                goto decline;
            names = body;
            names_at = at0;
            names_n = count;
            has_names_tlv = 1;
            break;
        }
        case 5: case 6:
            if (length == 0) {      /* the definition's None */
                if (ftype == 5) { has_sets = 2; } else { has_enums = 2; }
                break;
            }
            if (read_type_values(r, until, ftype == 5 ? &sets : &enums, ftype == 5 ? &nsets : &nenums) < 0)
                goto decline;
            if (ftype == 5) has_sets = 1; else has_enums = 1;
            break;
        case 7: case 8: case 9: {
            Py_ssize_t count;
            if (read_ints(r, until, &tmp, &count) < 0)
                goto decline;
            if (ftype == 9 && count % 2)
                goto decline;
            break;
        }
        case 12:
            if ((t->ncols + 7) / 8 > (Py_ssize_t)length)
                goto decline;
            r->pos = until;
            break;
        default:
            goto decline;
        }
    }
    if (r->pos != r->end)
        goto decline;
    /* names: one per column (the definition reads them only then), else positional */
    if (has_names_tlv && names_n && names_n != t->ncols)
        goto decline;
    int named = has_names_tlv && names_n == t->ncols;
    t->signed_known = signedness;
    {
        Rd nr = {names, names_at, n};
        Py_ssize_t charpos = 0, espos = 0, enumpos = 0, setpos = 0;
        for (Py_ssize_t i = 0; i < t->ncols; i++) {
            Col *c = &t->cols[i];
            if (named) {
                const uint8_t *s;
                Py_ssize_t sn;
                if (varstr(&nr, &s, &sn) < 0 || sn == 0)
                    goto decline;
                if (strs_put(t, s, sn, &c->key_at) < 0)
                    goto decline;
                c->key_len = sn;
            } else {
                char key[32];
                int kn = snprintf(key, sizeof key, "@%zd", i + 1);
                if (strs_put(t, key, kn, &c->key_at) < 0)
                    goto decline;
                c->key_len = kn;
            }
            c->unsig = signedness ? unsigned_of[i] : 0;
            if (is_char_col(c->type)) {
                if (named && (!cs.present || charpos >= cs.n))
                    goto decline;               /* _sync_column_info: IndexError */
                if (cs.present && charpos < cs.n) {
                    c->kind = charset_kind(d, cs.ids[charpos]);
                    if (c->kind < 0)
                        goto decline;
                } else
                    c->kind = 1;                /* no charset known: UTF-8 when valid */
                charpos++;
            }
            if (named && (c->type == FT_ENUM || c->type == FT_SET)) {
                if (!escs.present || espos >= escs.n)
                    goto decline;
                espos++;
                const Buf *lists = c->type == FT_ENUM ? &enums : &sets;
                Py_ssize_t nl = c->type == FT_ENUM ? nenums : nsets;
                int have = c->type == FT_ENUM ? has_enums : has_sets;
                Py_ssize_t *pos = c->type == FT_ENUM ? &enumpos : &setpos;
                if (have != 1 || *pos >= nl)
                    goto decline;
                Py_ssize_t count;
                const Span *sp = type_list(lists, *pos, &count);
                (*pos)++;
                Py_ssize_t total = t->nmember + count + 1;
                Py_ssize_t (*m)[2] = realloc(t->member, sizeof(*m) * (size_t)total);
                if (m == NULL)
                    goto decline;
                t->member = m;
                c->mfirst = t->nmember;
                if (c->type == FT_ENUM) {       /* [""] + the members */
                    t->member[t->nmember][0] = 0;
                    t->member[t->nmember][1] = 0;
                    t->nmember++;
                }
                for (Py_ssize_t k = 0; k < count; k++) {
                    Py_ssize_t at;
                    if (strs_put(t, body + sp[k].at, sp[k].n, &at) < 0)
                        goto decline;
                    t->member[t->nmember][0] = at;
                    t->member[t->nmember][1] = sp[k].n;
                    t->nmember++;
                }
                c->nmembers = t->nmember - c->mfirst;
                c->has_members = 1;
            }
            if (c->type == FT_SET && c->nmembers == 0)
                c->set_mask = 1;
        }
    }
    /* SET members in sorted() order */
    for (Py_ssize_t i = 0; i < t->ncols; i++) {
        Col *c = &t->cols[i];
        if (c->type != FT_SET || c->set_mask)
            continue;
        c->sorted = malloc(sizeof(Py_ssize_t) * (size_t)c->nmembers);
        if (c->sorted == NULL)
            goto decline;
        for (Py_ssize_t k = 0; k < c->nmembers; k++)
            c->sorted[k] = k;
        sort_table = t;
        sort_first = c->mfirst;
        qsort(c->sorted, (size_t)c->nmembers, sizeof(Py_ssize_t), member_cmp);
    }
    /* repeated names: the definition's dict would merge them */
    if (named)
        for (Py_ssize_t i = 0; i < t->ncols; i++)
            for (Py_ssize_t j = i + 1; j < t->ncols; j++)
                if (t->cols[i].key_len == t->cols[j].key_len &&
                    memcmp(t->strs.p + t->cols[i].key_at, t->strs.p + t->cols[j].key_at,
                           (size_t)t->cols[i].key_len) == 0)
                    goto decline;
done:
    t->raw = malloc((size_t)(n ? n : 1));
    if (t->raw == NULL)
        goto decline;
    memcpy(t->raw, body, (size_t)n);
    t->rawlen = n;
    free(tmp.p); free(enums.p); free(sets.p); free(cs.ids); free(escs.ids); free(unsigned_of);
    *out = t;
    return 0;
decline:
    free(tmp.p); free(enums.p); free(sets.p); free(cs.ids); free(escs.ids); free(unsigned_of);
    table_free(t);
    return DECLINE;
}

#undef NEED
#define NEED(r, n) do { if ((Py_ssize_t)(n) < 0 || (r)->end - (r)->pos < (Py_ssize_t)(n)) return DECLINE; } while (0)

/* ------------------------------------------------------------------------- */
/* values: each as show.as_text(show_rows._value(...)) gives it               */

static inline int
txt_put(Decoder *d, Val *v, const char *s, Py_ssize_t n)
{
    v->at = d->txt.len;
    v->len = n;
    return put(&d->txt, s, n) < 0 ? PYERR : 0;
}

static const char HEX[] = "0123456789abcdef";

static int
txt_hex(Decoder *d, Val *v, const uint8_t *s, Py_ssize_t n)
{
    if (n > (PY_SSIZE_T_MAX - d->txt.len) / 2 || grow(&d->txt, 2 * n) < 0)
        return PYERR;
    char *o = d->txt.p + d->txt.len;
    for (Py_ssize_t i = 0; i < n; i++) {
        o[2 * i] = HEX[s[i] >> 4];
        o[2 * i + 1] = HEX[s[i] & 15];
    }
    v->at = d->txt.len;
    v->len = 2 * n;
    d->txt.len += 2 * n;
    v->kind = K_BYTES;
    return 0;
}

/* a string column's bytes: text in its charset, or bytes (hex) */
static int
string_value(Decoder *d, const Col *c, const uint8_t *s, Py_ssize_t n, Val *v)
{
    if (c->kind == 2)
        return txt_hex(d, v, s, n);
    if (c->kind == 1) {
        if (!utf8_ok(s, n))
            return txt_hex(d, v, s, n);
        v->kind = K_STR;
        return txt_put(d, v, (const char *)s, n);
    }
    const uint32_t *map = d->charmaps + 256 * (c->kind - 3);
    for (Py_ssize_t i = 0; i < n; i++)
        if (map[s[i]] == 0xFFFFFFFFu)
            return txt_hex(d, v, s, n);
    if (n > (PY_SSIZE_T_MAX - d->txt.len) / 4 || grow(&d->txt, 4 * n) < 0)
        return PYERR;
    uint8_t *o = (uint8_t *)d->txt.p + d->txt.len, *o0 = o;
    for (Py_ssize_t i = 0; i < n; i++) {
        uint32_t cp = map[s[i]];
        if (cp < 0x80)
            *o++ = (uint8_t)cp;
        else if (cp < 0x800) {
            *o++ = (uint8_t)(0xC0 | cp >> 6);
            *o++ = (uint8_t)(0x80 | (cp & 63));
        } else if (cp < 0x10000) {
            if (cp >= 0xD800 && cp < 0xE000)
                return DECLINE;
            *o++ = (uint8_t)(0xE0 | cp >> 12);
            *o++ = (uint8_t)(0x80 | (cp >> 6 & 63));
            *o++ = (uint8_t)(0x80 | (cp & 63));
        } else if (cp < 0x110000) {
            *o++ = (uint8_t)(0xF0 | cp >> 18);
            *o++ = (uint8_t)(0x80 | (cp >> 12 & 63));
            *o++ = (uint8_t)(0x80 | (cp >> 6 & 63));
            *o++ = (uint8_t)(0x80 | (cp & 63));
        } else
            return DECLINE;
    }
    v->kind = K_STR;
    v->at = d->txt.len;
    v->len = o - o0;
    d->txt.len += v->len;
    return 0;
}

/* repr() of a double (json.dumps of a float) */
static int
float_text(Decoder *d, Val *v, double x)
{
    char *s = PyOS_double_to_string(x, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    if (s == NULL)
        return PYERR;
    int rc = txt_put(d, v, s, (Py_ssize_t)strlen(s));
    PyMem_Free(s);
    v->kind = K_FLOAT;
    v->d = x;
    return rc;
}

/* show_rows._float32: the first %.{n}g, n = 1..9, that packs to the same 4 bytes */
static int
float32_value(Decoder *d, Val *v, float f)
{
    double x = f;
    if (!isfinite(x))
        return DECLINE;
    for (int digits = 1; digits < 10; digits++) {
        char *s = PyOS_double_to_string(x, 'g', digits, 0, NULL);
        if (s == NULL)
            return PYERR;
        double y = PyOS_string_to_double(s, NULL, NULL);
        PyMem_Free(s);
        if (y == -1.0 && PyErr_Occurred())
            return PYERR;
        float g = (float)y;
        if (isinf(g) && !isinf(y))
            return DECLINE;         /* struct.pack raises OverflowError there */
        if (memcmp(&g, &f, 4) == 0)
            return float_text(d, v, y);
    }
    return float_text(d, v, x);
}

/* decimal digits of x (no sprintf: the hot path of integer columns) */
static int
uint_text(char *o, uint64_t x)
{
    char tmp[24];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + x % 10);
        x /= 10;
    } while (x);
    for (int i = 0; i < n; i++)
        o[i] = tmp[n - 1 - i];
    o[n] = 0;
    return n;
}

static int
int_text(char *o, int64_t x)
{
    if (x >= 0)
        return uint_text(o, (uint64_t)x);
    o[0] = '-';
    return 1 + uint_text(o + 1, (uint64_t)0 - (uint64_t)x);
}

/* str(decimal.Decimal(res)) for res "[-]digits.digits" (to-scientific-string) */
static int
decimal_text(Decoder *d, Val *v, int neg, const char *digits, int nd, int scale)
{
    /* the coefficient without leading zeros ("0" when all are) */
    int i = 0;
    while (i < nd - 1 && digits[i] == '0')
        i++;
    const char *co = digits + i;
    int n = nd - i;
    int zero = n == 1 && co[0] == '0';
    int exp = -scale;
    int left = exp + n;             /* leftdigits */
    char out[160];
    int o = 0;
    if (neg)
        out[o++] = '-';
    if (exp <= 0 && left > -6) {
        if (left <= 0) {
            out[o++] = '0';
            out[o++] = '.';
            for (int k = 0; k < -left; k++)
                out[o++] = '0';
            memcpy(out + o, co, (size_t)n);
            o += n;
        } else if (left >= n) {
            memcpy(out + o, co, (size_t)n);
            o += n;
        } else {
            memcpy(out + o, co, (size_t)left);
            o += left;
            out[o++] = '.';
            memcpy(out + o, co + left, (size_t)(n - left));
            o += n - left;
        }
    } else {
        out[o++] = co[0];
        if (n > 1) {
            out[o++] = '.';
            memcpy(out + o, co + 1, (size_t)(n - 1));
            o += n - 1;
        }
        o += sprintf(out + o, "E%+d", left - 1);
    }
    v->kind = K_DEC;
    v->zero = (uint8_t)zero;
    return txt_put(d, v, out, o);
}

static const int DIG2BYTES[10] = {0, 1, 1, 2, 2, 3, 3, 4, 4, 4};

/* mysql-replication's __read_new_decimal */
static int
decimal_value(Decoder *d, const Col *c, Rd *r, Val *v)
{
    int integral = c->precision - c->decimals;
    int ui = integral / 9, uf = c->decimals / 9, ci = integral % 9, cf = c->decimals % 9;
    Py_ssize_t size = DIG2BYTES[ci] + 4 * ui + 4 * uf + DIG2BYTES[cf];
    NEED(r, size);
    if (size == 0)
        return DECLINE;
    uint8_t b[40];
    memcpy(b, r->p + r->pos, (size_t)size);
    r->pos += size;
    int neg = !(b[0] & 0x80);
    int64_t mask = neg ? -1 : 0;
    b[0] ^= 0x80;
    char digits[100];
    int nd = 0, at = 0;
    /* each group read signed big-endian, XORed with the mask; a group out of its
       digits' range (damage) would make a text Decimal() reads differently */
    if (DIG2BYTES[ci]) {
        int w = DIG2BYTES[ci];
        int64_t x = (int64_t)be(b, w);
        if (x & ((int64_t)1 << (8 * w - 1)))
            x -= (int64_t)1 << (8 * w);
        x ^= mask;
        if (x < 0)
            return DECLINE;
        nd += sprintf(digits + nd, "%lld", (long long)x);
        at += w;
    }
    for (int k = 0; k < ui + uf; k++) {
        int64_t x = (int32_t)(uint32_t)be(b + at, 4);
        x ^= mask;
        if (x < 0 || x > 999999999)
            return DECLINE;
        nd += sprintf(digits + nd, "%09lld", (long long)x);
        at += 4;
    }
    if (DIG2BYTES[cf]) {
        int w = DIG2BYTES[cf];
        int64_t x = (int64_t)be(b + at, w);
        if (x & ((int64_t)1 << (8 * w - 1)))
            x -= (int64_t)1 << (8 * w);
        x ^= mask;
        static const int64_t lim[10] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000,
                                        1000000000};
        if (x < 0 || x >= lim[cf])
            return DECLINE;
        nd += sprintf(digits + nd, "%0*lld", cf, (long long)x);
    }
    if (nd == 0)
        return DECLINE;
    /* the fraction's digits are the last 9*uf + cf: exactly decimals */
    return decimal_text(d, v, neg, digits, nd, c->decimals);
}

/* days since 1970-01-01 -> civil date (Howard Hinnant's algorithm) */
static void
civil(int64_t z, int64_t *y, unsigned *m, unsigned *dd)
{
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    unsigned doe = (unsigned)(z - era * 146097);
    unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t yy = (int64_t)yoe + era * 400;
    unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    unsigned mp = (5 * doy + 2) / 153;
    *dd = doy - (153 * mp + 2) / 5 + 1;
    *m = mp < 10 ? mp + 3 : mp - 9;
    *y = yy + (*m <= 2);
}

/* datetime.utcfromtimestamp(secs) as "%Y-%m-%dT%H:%M:%S" + fraction + "Z" */
static int
utc_text(Decoder *d, Val *v, int64_t secs, long us, int fsp)
{
    int64_t days = secs >= 0 ? secs / 86400 : -((-secs + 86399) / 86400);
    int64_t rem = secs - days * 86400;
    int64_t y;
    unsigned m, dd;
    civil(days, &y, &m, &dd);
    if (y < 1000 || y > 9999)
        return DECLINE;
    char out[64];
    int o = sprintf(out, "%04lld-%02u-%02uT%02d:%02d:%02d", (long long)y, m, dd, (int)(rem / 3600),
                    (int)(rem / 60 % 60), (int)(rem % 60));
    if (fsp) {
        char f[16];
        sprintf(f, ".%06ld", us);
        memcpy(out + o, f, (size_t)fsp + 1);
        o += fsp + 1;
    }
    out[o++] = 'Z';
    v->kind = K_STR;
    return txt_put(d, v, out, o);
}

/* _fraction(us, fsp): f".{us:06d}"[:fsp + 1] */
static int
fraction(char *o, long long us, int fsp)
{
    if (!fsp)
        return 0;
    char f[32];
    int n = sprintf(f, ".%06lld", us);
    int k = fsp + 1 < n ? fsp + 1 : n;
    memcpy(o, f, (size_t)k);
    return k;
}

static int
read_value(Decoder *d, const Table *t, const Col *c, Rd *r, Val *v)
{
    char out[128];
    int o;
    const uint8_t *p;
    v->kind = K_STR;
    switch (c->type) {
    case FT_TINY: case FT_SHORT: case FT_INT24: case FT_LONG: case FT_LONGLONG: {
        int w = c->type == FT_TINY ? 1 : c->type == FT_SHORT ? 2 : c->type == FT_INT24 ? 3 :
                c->type == FT_LONG ? 4 : 8;
        NEED(r, w);
        uint64_t raw = le(r->p + r->pos, w);
        r->pos += w;
        if (c->unsig) {
            v->kind = K_INT;
            return txt_put(d, v, out, uint_text(out, raw));
        }
        int64_t x = w == 8 ? (int64_t)raw : (raw >> (8 * w - 1)) ? (int64_t)raw - ((int64_t)1 << (8 * w)) : (int64_t)raw;
        if (x < 0 && !t->signed_known) {    /* both readings, as mariadb-binlog -v */
            o = int_text(out, x);
            o += sprintf(out + o, " (%llu)", (unsigned long long)raw);
            v->kind = K_STR;
            return txt_put(d, v, out, o);
        }
        v->kind = K_INT;
        return txt_put(d, v, out, int_text(out, x));
    }
    case FT_YEAR:
        NEED(r, 1);
        v->kind = K_INT;
        o = sprintf(out, "%d", 1900 + r->p[r->pos]);
        r->pos += 1;
        return txt_put(d, v, out, o);
    case FT_FLOAT: {
        NEED(r, 4);
        float f;
        memcpy(&f, r->p + r->pos, 4);
        r->pos += 4;
        return float32_value(d, v, f);
    }
    case FT_DOUBLE: {
        NEED(r, 8);
        double x;
        memcpy(&x, r->p + r->pos, 8);
        r->pos += 8;
        if (!isfinite(x))
            return DECLINE;
        return float_text(d, v, x);
    }
    case FT_VARCHAR: case FT_STRING: case FT_BLOB: case FT_GEOMETRY: {
        int w = (c->type == FT_BLOB || c->type == FT_GEOMETRY) ? c->length_size : c->max_length > 255 ? 2 : 1;
        NEED(r, w);
        uint64_t n = le(r->p + r->pos, w);
        r->pos += w;
        if (n > (uint64_t)(r->end - r->pos))
            return DECLINE;
        p = r->p + r->pos;
        r->pos += (Py_ssize_t)n;
        return string_value(d, c, p, (Py_ssize_t)n, v);
    }
    case FT_NEWDECIMAL:
        return decimal_value(d, c, r, v);
    case FT_DATE: {
        NEED(r, 3);
        uint64_t x = le(r->p + r->pos, 3);
        r->pos += 3;
        o = sprintf(out, "%04u-%02u-%02u", (unsigned)(x >> 9), (unsigned)(x >> 5 & 15), (unsigned)(x & 31));
        return txt_put(d, v, out, o);
    }
    case FT_TIME: {
        NEED(r, 3);
        int64_t x = (int64_t)le(r->p + r->pos, 3);
        r->pos += 3;
        if (x >= 0x800000)
            x -= 0x1000000;
        int64_t a = x < 0 ? -x : x;
        o = sprintf(out, "%s%02lld:%02lld:%02lld", x < 0 ? "-" : "", (long long)(a / 10000),
                    (long long)(a / 100 % 100), (long long)(a % 100));
        return txt_put(d, v, out, o);
    }
    case FT_DATETIME: {
        NEED(r, 8);
        uint64_t x = le(r->p + r->pos, 8);
        r->pos += 8;
        uint64_t dd = x / 1000000, tt = x % 1000000;
        o = sprintf(out, "%04llu-%02llu-%02llu %02llu:%02llu:%02llu", (unsigned long long)(dd / 10000),
                    (unsigned long long)(dd / 100 % 100), (unsigned long long)(dd % 100),
                    (unsigned long long)(tt / 10000), (unsigned long long)(tt / 100 % 100),
                    (unsigned long long)(tt % 100));
        return txt_put(d, v, out, o);
    }
    case FT_TIMESTAMP: {
        NEED(r, 4);
        uint64_t x = le(r->p + r->pos, 4);
        r->pos += 4;
        return utc_text(d, v, (int64_t)x, 0, 0);
    }
    case FT_TIMESTAMP2: {
        int fb = (c->fsp + 1) / 2;
        NEED(r, 4 + fb);
        int64_t secs = (int32_t)(uint32_t)be(r->p + r->pos, 4);
        long us = 0;
        if (fb) {
            int64_t x = (int64_t)be(r->p + r->pos + 4, fb);
            if (x & ((int64_t)1 << (8 * fb - 1)))
                x -= (int64_t)1 << (8 * fb);
            if (c->fsp % 2)
                x = x / 10;             /* int(x / 10): toward zero */
            static const int64_t p10[7] = {1, 10, 100, 1000, 10000, 100000, 1000000};
            x *= p10[6 - c->fsp];
            if (x > 999999)
                return DECLINE;         /* datetime.replace raises */
            if (x > 0)
                us = (long)x;
        }
        r->pos += 4 + fb;
        return utc_text(d, v, secs, us, c->fsp);
    }
    case FT_DATETIME2: {
        int fb = (c->fsp + 1) / 2, w = 5 + fb;
        NEED(r, w);
        uint64_t raw = be(r->p + r->pos, w);
        r->pos += w;
        uint64_t frac = raw & ((fb ? ((uint64_t)1 << (8 * fb)) : 1) - 1);
        uint64_t top = raw >> (8 * fb);
        if (top < 0x8000000000ULL)
            return DECLINE;             /* a negative integer part: not a server's value */
        uint64_t ip = top - 0x8000000000ULL;
        uint64_t ymd = ip >> 17, hms = ip & 0x1FFFF;
        uint64_t ym = ymd >> 5;
        static const long long mul[4] = {1000000, 10000, 100, 1};
        o = sprintf(out, "%04llu-%02llu-%02llu %02llu:%02llu:%02llu", (unsigned long long)(ym / 13),
                    (unsigned long long)(ym % 13), (unsigned long long)(ymd & 31), (unsigned long long)(hms >> 12),
                    (unsigned long long)(hms >> 6 & 63), (unsigned long long)(hms & 63));
        o += fraction(out + o, (long long)frac * mul[fb], c->fsp);
        return txt_put(d, v, out, o);
    }
    case FT_TIME2: {
        int fb = (c->fsp + 1) / 2, w = 3 + fb;
        NEED(r, w);
        int64_t raw = (int64_t)be(r->p + r->pos, w);
        r->pos += w;
        int64_t packed;
        static const int64_t mul[4] = {1000000, 10000, 100, 1};
        if (fb == 3)
            packed = raw - 0x800000000000LL;
        else {
            int64_t unit = (int64_t)1 << (8 * fb);
            int64_t ip = (raw >> (8 * fb)) - 0x800000, fr = raw & (unit - 1);
            if (ip < 0 && fr) {
                ip += 1;
                fr -= unit;
            }
            packed = ip * ((int64_t)1 << 24) + fr * mul[fb];
        }
        int64_t a = packed < 0 ? -packed : packed;
        int64_t hms = a >> 24, us = a & 0xFFFFFF;
        o = sprintf(out, "%s%02lld:%02lld:%02lld", packed < 0 ? "-" : "", (long long)(hms >> 12 & 0x3FF),
                    (long long)(hms >> 6 & 63), (long long)(hms & 63));
        o += fraction(out + o, (long long)us, c->fsp);
        return txt_put(d, v, out, o);
    }
    case FT_BIT: {
        NEED(r, c->nbytes);
        p = r->p + r->pos;
        r->pos += c->nbytes;
        Py_ssize_t at = d->txt.len;
        if (grow(&d->txt, 8 * (Py_ssize_t)c->nbytes + 1) < 0)
            return PYERR;
        char *q = d->txt.p + at;
        int k = 0;
        for (int byte = 0; byte < c->nbytes; byte++) {
            int end = 8;
            if (byte == 0) {
                if (c->nbytes == 1)
                    end = c->bits;
                else {
                    end = c->bits % 8;
                    if (end == 0)
                        end = 8;
                }
            }
            if (end > 8)
                return DECLINE;
            for (int bit = end - 1; bit >= 0; bit--)
                q[k++] = (p[byte] >> bit) & 1 ? '1' : '0';
        }
        v->at = at;
        v->len = k;
        d->txt.len += k;
        return 0;
    }
    case FT_ENUM: {
        NEED(r, c->size);
        uint64_t idx = le(r->p + r->pos, c->size);
        r->pos += c->size;
        if (!c->has_members) {
            v->kind = K_INT;
            return txt_put(d, v, out, uint_text(out, idx));
        }
        if (idx >= (uint64_t)c->nmembers)
            return DECLINE;             /* IndexError */
        const Py_ssize_t *m = t->member[c->mfirst + (Py_ssize_t)idx];
        return txt_put(d, v, t->strs.p + m[0], m[1]);
    }
    case FT_SET: {
        NEED(r, c->size);
        uint64_t bits = le(r->p + r->pos, c->size);
        r->pos += c->size;
        if (c->set_mask) {
            v->kind = K_INT;
            return txt_put(d, v, out, uint_text(out, bits));
        }
        /* the members whose bits are set, sorted, without repeats, joined by commas */
        Py_ssize_t at = d->txt.len;
        const Py_ssize_t *last = NULL;
        for (Py_ssize_t k = 0; k < c->nmembers; k++) {
            Py_ssize_t idx = c->sorted[k];
            if (idx >= 64 || !(bits >> idx & 1))
                continue;
            const Py_ssize_t *m = t->member[c->mfirst + idx];
            if (last && last[1] == m[1] && memcmp(t->strs.p + last[0], t->strs.p + m[0], (size_t)m[1]) == 0)
                continue;
            if ((last && put(&d->txt, ",", 1) < 0) || put(&d->txt, t->strs.p + m[0], m[1]) < 0)
                return PYERR;
            last = m;
        }
        /* none: EMPTY_SET, shown as "" */
        v->at = at;
        v->len = d->txt.len - at;
        return 0;
    }
    default:
        return DECLINE;
    }
}

/* ------------------------------------------------------------------------- */
/* rows                                                                       */

static inline int
popcount8(uint8_t x)
{
    return __builtin_popcount(x);
}

/* one row image (mysql-replication's _read_column_data) into vals */
static int
read_image(Decoder *d, const Table *t, Rd *r, const uint8_t *bitmap, Py_ssize_t bmlen, Val *vals)
{
    Py_ssize_t present = 0;
    for (Py_ssize_t i = 0; i < bmlen; i++)
        present += popcount8(bitmap[i]);
    Py_ssize_t nlen = (present + 7) / 8;
    NEED(r, nlen);
    const uint8_t *nulls = r->p + r->pos;
    r->pos += nlen;
    Py_ssize_t k = 0;
    for (Py_ssize_t i = 0; i < t->ncols; i++) {
        Val *v = &vals[i];
        if (i / 8 >= bmlen)
            return DECLINE;
        if (!(bitmap[i / 8] & (1 << (i % 8)))) {
            v->state = 0;
            continue;
        }
        if (nulls[k / 8] & (1 << (k % 8))) {
            v->state = 1;
        } else {
            v->state = 2;
            int rc = read_value(d, t, &t->cols[i], r, v);
            if (rc < 0)
                return rc;
        }
        k++;
    }
    return 0;
}

/* Python's != between two present values */
static int
differ(const Decoder *d, const Val *a, const Val *b)
{
    if (a->state == 1 || b->state == 1)
        return a->state != b->state;
    if (a->kind != b->kind)
        return 1;
    if (a->kind == K_FLOAT)
        return a->d != b->d;
    if (a->kind == K_DEC && a->zero && b->zero)
        return 0;
    return a->len != b->len || memcmp(d->txt.p + a->at, d->txt.p + b->at, (size_t)a->len) != 0;
}

static int
put_map(Decoder *d, int which, const Table *t, const Val *vals)
{
    Batch *bt = &d->batch;
    Buf *m = &bt->b[which ? B_MAP1 : B_MAP0];
    if (putbit(&m[M_VALID], bt->rows, vals != NULL) < 0)
        return -1;
    if (vals) {
        for (Py_ssize_t i = 0; i < t->ncols; i++) {
            const Val *v = &vals[i];
            if (v->state == 0)
                continue;
            const Col *c = &t->cols[i];
            if (put_str(&m[M_KOFF], &m[M_K], t->strs.p + c->key_at, c->key_len) < 0)
                return -1;
            Py_ssize_t e = bt->entries[which]++;
            if (putbit(&m[M_VVALID], e, v->state == 2) < 0)
                return -1;
            if (v->state == 2) {
                if (put_str(&m[M_VOFF], &m[M_V], d->txt.p + v->at, v->len) < 0)
                    return -1;
            } else if (put32(&m[M_VOFF], (int32_t)m[M_V].len) < 0)
                return -1;
        }
    }
    if (bt->entries[which] > INT32_MAX)
        return -1;
    return put32(&m[M_OFF], (int32_t)bt->entries[which]);
}

/* one changed row into the batch; op 0 insert, 1 update, 2 delete */
static int
emit_row(Decoder *d, const char *gtid, Py_ssize_t gn, int64_t offset, int64_t ts, const Table *t, int op,
         const Val *before, const Val *after)
{
    static const char *ops[] = {"insert", "update", "delete"};
    Batch *bt = &d->batch;
    Buf *b = bt->b;
    if (put_str(&b[B_GTID_OFF], &b[B_GTID], gtid, gn) < 0 ||
        put_str(&b[B_FILE_OFF], &b[B_FILE], d->file, d->file_len) < 0 ||
        put64(&b[B_OFFSET], offset) < 0 || put64(&b[B_TS], ts) < 0 ||
        put_str(&b[B_TABLE_OFF], &b[B_TABLE], t->strs.p, t->name_len) < 0 ||
        put_str(&b[B_OP_OFF], &b[B_OP], ops[op], (Py_ssize_t)strlen(ops[op])) < 0)
        return -1;
    if (put_map(d, 0, t, before) < 0 || put_map(d, 1, t, after) < 0)
        return -1;
    /* changed: updates only, the columns in both images whose values differ */
    if (putbit(&b[B_CH_VALID], bt->rows, op == 1) < 0)
        return -1;
    if (op == 1)
        for (Py_ssize_t i = 0; i < t->ncols; i++) {
            if (before[i].state == 0 || after[i].state == 0 || !differ(d, &before[i], &after[i]))
                continue;
            const Col *c = &t->cols[i];
            if (put_str(&b[B_CH_IOFF], &b[B_CH], t->strs.p + c->key_at, c->key_len) < 0)
                return -1;
            bt->changed++;
        }
    if (bt->changed > INT32_MAX || put32(&b[B_CH_OFF], (int32_t)bt->changed) < 0)
        return -1;
    /* unknown: the columns absent from the image(s) */
    for (Py_ssize_t i = 0; i < t->ncols; i++) {
        int gone = (before && before[i].state == 0) || (after && after[i].state == 0);
        if (!gone)
            continue;
        const Col *c = &t->cols[i];
        if (put_str(&b[B_UN_IOFF], &b[B_UN], t->strs.p + c->key_at, c->key_len) < 0)
            return -1;
        bt->unknown++;
    }
    if (bt->unknown > INT32_MAX || put32(&b[B_UN_OFF], (int32_t)bt->unknown) < 0)
        return -1;
    bt->rows++;
    return 0;
}

/* show._uncompress: 0x80 | n, n bytes of length (big-endian), a zlib stream
 * that inflates to exactly that length; into out (out->len = 0 first) */
static int
inflate_payload(const uint8_t *s, Py_ssize_t n, Buf *out)
{
    out->len = 0;
    if (n < 1 || (s[0] & 0xE0) != 0x80)
        return DECLINE;
    int nn = s[0] & 7;
    if (1 + nn > n)
        return DECLINE;
    uint64_t want = be(s + 1, nn);
    if (want > ((uint64_t)1 << 31))
        return DECLINE;
    if (grow(out, (Py_ssize_t)want + 1) < 0)
        return PYERR;
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (inflateInit(&zs) != Z_OK)
        return DECLINE;
    Py_ssize_t left = n - 1 - nn;
    zs.next_in = (Bytef *)(s + 1 + nn);
    zs.next_out = (Bytef *)out->p;
    zs.avail_out = (uInt)want + 1;
    int rc = Z_OK;
    for (;;) {
        if (zs.avail_in == 0 && left > 0) {
            uInt chunk = left > (1 << 30) ? (1u << 30) : (uInt)left;
            zs.avail_in = chunk;
            left -= chunk;
        }
        rc = inflate(&zs, Z_NO_FLUSH);
        if (rc == Z_STREAM_END)
            break;
        if (rc == Z_OK || rc == Z_BUF_ERROR) {
            if (zs.avail_out == 0) {        /* more than the header says */
                rc = Z_DATA_ERROR;
                break;
            }
            if (zs.avail_in == 0 && left == 0)
                break;                      /* input exhausted (decompressobj gives what it has) */
            if (rc == Z_BUF_ERROR) {
                rc = Z_DATA_ERROR;
                break;
            }
            continue;
        }
        break;
    }
    uLong got = zs.total_out;
    inflateEnd(&zs);
    if (rc != Z_STREAM_END && rc != Z_OK && rc != Z_BUF_ERROR)
        return DECLINE;
    if (got != want)
        return DECLINE;
    out->len = (Py_ssize_t)got;
    return 0;
}

static Table *
group_table(Decoder *d, uint64_t id)
{
    for (Py_ssize_t i = d->ningroup - 1; i >= 0; i--)
        if (d->in_group[i]->id == id)
            return d->in_group[i];
    return NULL;
}

/* a TABLE_MAP: its table, from the cache when the same bytes were parsed before */
static int
table_map(Decoder *d, const uint8_t *body, Py_ssize_t n)
{
    Table *t = NULL;
    for (Py_ssize_t i = 0; i < d->ncache; i++) {
        Table *c = d->cache[i];
        if (c->rawlen == n && memcmp(c->raw, body, (size_t)n) == 0) {
            t = c;
            break;
        }
    }
    if (t == NULL) {
        int rc = parse_table_map(d, body, n, &t);
        if (rc < 0)
            return rc;
        if (d->ncache >= 32) {          /* evict the least recently used one not in this group */
            Py_ssize_t victim = -1;
            for (Py_ssize_t i = 0; i < d->ncache; i++)
                if (d->cache[i]->used != d->group_no && (victim < 0 || d->cache[i]->used < d->cache[victim]->used))
                    victim = i;
            if (victim >= 0) {
                table_free(d->cache[victim]);
                d->cache[victim] = d->cache[--d->ncache];
            }
        }
        if (d->ncache == d->capcache) {
            Py_ssize_t cap = d->capcache ? 2 * d->capcache : 16;
            Table **c = realloc(d->cache, sizeof(Table *) * (size_t)cap);
            if (c == NULL) {
                table_free(t);
                return PYERR;
            }
            d->cache = c;
            d->capcache = cap;
        }
        d->cache[d->ncache++] = t;
    }
    t->used = d->group_no;
    if (d->ningroup == d->capgroup) {
        Py_ssize_t cap = d->capgroup ? 2 * d->capgroup : 16;
        Table **g = realloc(d->in_group, sizeof(Table *) * (size_t)cap);
        if (g == NULL)
            return PYERR;
        d->in_group = g;
        d->capgroup = cap;
    }
    d->in_group[d->ningroup++] = t;
    return 0;
}

static int
rows_event(Decoder *d, int etype, const uint8_t *body, Py_ssize_t n, const char *gtid, Py_ssize_t gn,
           int64_t offset, int64_t ts)
{
    int v2 = 0, op;
    if (n < 8)
        return DECLINE;
    uint64_t id = le(body, 6);
    Table *t = group_table(d, id);
    if (t && t->skipped)
        return 0;                       /* a table not asked for */
    if (etype >= 166) {                 /* compressed: the plain event it stands for */
        int plain = etype <= 168 ? etype - 166 + 23 : etype - 169 + 30;
        Rd rr = {body, 8, n};
        if (etype >= 169) {
            if (n < 10)
                return DECLINE;
            rr.pos += (Py_ssize_t)le(body + 8, 2);
        }
        uint64_t width;
        if (rr.pos > n || lenc(&rr, &width) < 0 || width > ((uint64_t)1 << 40))
            return DECLINE;
        Py_ssize_t at = rr.pos + (Py_ssize_t)((width + 7) / 8) * (plain == 24 || plain == 31 ? 2 : 1);
        if (at > n)
            return DECLINE;
        Buf *pb = &d->plain;
        int rc = inflate_payload(body + at, n - at, &d->scratch);
        if (rc < 0)
            return rc;
        pb->len = 0;
        if (put(pb, body, at) < 0 || put(pb, d->scratch.p, d->scratch.len) < 0)
            return PYERR;
        body = (const uint8_t *)pb->p;
        n = pb->len;
        etype = plain;
    }
    switch (etype) {
    case 23: op = 0; break;
    case 24: op = 1; break;
    case 25: op = 2; break;
    case 30: op = 0; v2 = 1; break;
    case 31: op = 1; v2 = 1; break;
    case 32: op = 2; v2 = 1; break;
    default: return DECLINE;
    }
    if (t == NULL)
        return DECLINE;                 /* no TABLE_MAP before it in its group */
    Rd rd = {body, 8, n}, *r = &rd;
    if (v2) {
        NEED(r, 2);
        if (le(body + 8, 2) > 2)
            return DECLINE;             /* extra data the definition reads its own way */
        r->pos += 2;
    }
    uint64_t width;
    if (lenc(r, &width) < 0)
        return DECLINE;
    if (width > (uint64_t)n * 8)
        return DECLINE;
    Py_ssize_t bml = (Py_ssize_t)(width + 7) / 8;
    NEED(r, bml * (op == 1 ? 2 : 1));
    const uint8_t *bm1 = body + r->pos, *bm2 = op == 1 ? body + r->pos + bml : NULL;
    r->pos += bml * (op == 1 ? 2 : 1);
    /* the two images' values */
    Py_ssize_t need = 2 * t->ncols * (Py_ssize_t)sizeof(Val);
    Buf *vb = &d->scratch;
    vb->len = 0;
    if (grow(vb, need) < 0)
        return PYERR;
    Val *a = (Val *)vb->p, *b2 = a + t->ncols;
    while (r->pos < r->end) {
        /* a row of no bytes (no column in its image) would be read forever: the
           definition's loop never ends there; this one declines */
        Py_ssize_t row_start = r->pos;
        d->txt.len = 0;
        int rc = read_image(d, t, r, bm1, bml, a);
        if (rc < 0)
            return rc;
        if (op == 1) {
            rc = read_image(d, t, r, bm2, bml, b2);
            if (rc < 0)
                return rc;
        }
        if (r->pos == row_start)
            return DECLINE;
        if (emit_row(d, gtid, gn, offset, ts, t, op, op == 0 ? NULL : a, op == 0 ? a : op == 1 ? b2 : NULL) < 0) {
            d->full = 1;
            return DECLINE;
        }
    }
    return 0;
}

/* The event types of a MySQL transaction this file reads as show_mysql does
 * (a MySQL group: decode's gtid texts given): QUERY (2), XID (16), TABLE_MAP
 * (19), the rows events v1 and v2 (23-25, 30-32), ROWS_QUERY (29, an
 * annotation), and what MySQL's parser ignores (heartbeats 27 and 41,
 * TRANSACTION_CONTEXT 36); GTID (33), ANONYMOUS_GTID (34) and GTID_TAGGED
 * (42) as the group's first event only. Any other (INTVAR, RAND, USER_VAR
 * and XA_PREPARE, whose bodies the definition decodes; PARTIAL_UPDATE_ROWS;
 * TRANSACTION_PAYLOAD; MariaDB's types; unknown ones): declined. */
static int
mysql_reads(int etype, int first)
{
    switch (etype) {
    case 2: case 16: case 19: case 23: case 24: case 25: case 27: case 29: case 30: case 31: case 32:
    case 36: case 41:
        return 1;
    case 33: case 34: case 42:
        return first;
    default:
        return 0;
    }
}

/* one group: 0 decoded (its rows in the batch), DECLINE or PYERR. ``text``:
 * its gtid column (a MySQL transaction's, whose event types mysql_reads
 * checks; its record's seq word holds its offset column, the GTID event's
 * offset: a compressed transaction's inner events are handed over in a
 * buffer of their own); NULL: MariaDB's domain-server-seq from the record,
 * the offset column its start. */
static int
decode_group(Decoder *d, const uint8_t *buf, Py_ssize_t buflen, const uint8_t *rec, const char *text,
             Py_ssize_t text_len)
{
    uint64_t start = le(rec, 8), end = le(rec + 8, 8), seq = le(rec + 16, 8);
    uint32_t ts = (uint32_t)le(rec + 24, 4), server = (uint32_t)le(rec + 28, 4), domain = (uint32_t)le(rec + 32, 4);
    if (start > end || end > (uint64_t)buflen)
        return DECLINE;
    char gtid[64];
    int gn;
    if (text != NULL) {
        if (text_len >= (Py_ssize_t)sizeof gtid)
            return DECLINE;
        memcpy(gtid, text, (size_t)text_len);
        gn = (int)text_len;
    } else
        gn = snprintf(gtid, sizeof gtid, "%u-%u-%llu", domain, server, (unsigned long long)seq);
    d->ningroup = 0;
    d->group_no++;
    Py_ssize_t off = (Py_ssize_t)start, stop = (Py_ssize_t)end;
    while (off < stop) {
        if (stop - off < HEADER_LEN)
            return DECLINE;
        const uint8_t *h = buf + off;
        int etype = h[4];
        Py_ssize_t ln = (Py_ssize_t)le(h + 9, 4);
        if (ln < HEADER_LEN + d->crc || ln > stop - off)
            return DECLINE;
        if (d->crc) {
            if (etype == T_FDE)
                return DECLINE;
            uLong c = crc32(0L, h, (uInt)(ln - 4));
            if ((uint32_t)c != (uint32_t)le(h + ln - 4, 4))
                return DECLINE;
        }
        const uint8_t *body = h + HEADER_LEN;
        Py_ssize_t n = ln - HEADER_LEN - d->crc;
        int rc = 0;
        if (text != NULL && !mysql_reads(etype, off == (Py_ssize_t)start))
            return DECLINE;
        switch (etype) {
        case T_QUERY: case T_QUERY_COMPRESSED: {
            if (n < 13)
                return DECLINE;
            Py_ssize_t at = 13 + (Py_ssize_t)le(body + 11, 2) + body[8] + 1;
            if (at > n)
                return DECLINE;
            if (etype == T_QUERY_COMPRESSED)
                rc = inflate_payload(body + at, n - at, &d->plain);
            break;
        }
        case T_GTID:
            if (off == (Py_ssize_t)start && n < 13)
                return DECLINE;
            break;
        case T_XA_PREPARE:
            if (n < 13)
                return DECLINE;
            break;
        case T_TABLE_MAP:
            rc = table_map(d, body, n);
            break;
        case 23: case 24: case 25: case 30: case 31: case 32:
        case 166: case 167: case 168: case 169: case 170: case 171:
            rc = rows_event(d, etype, body, n, gtid, gn, (int64_t)(text != NULL ? seq : start), (int64_t)ts);
            break;
        default:
            break;
        }
        if (rc < 0)
            return rc;
        off += ln;
    }
    return 0;
}

/* ------------------------------------------------------------------------- */
/* the Python type                                                            */

static void
decoder_clear(Decoder *d)
{
    PyMem_Free(d->kinds);
    PyMem_Free(d->charmaps);
    if (d->tables)
        for (Py_ssize_t i = 0; i < d->ntables; i++)
            PyMem_Free(d->tables[i]);
    PyMem_Free(d->tables);
    PyMem_Free(d->table_lens);
    PyMem_Free(d->file);
    batch_free(&d->batch);
    for (Py_ssize_t i = 0; i < d->ncache; i++)
        table_free(d->cache[i]);
    free(d->cache);
    free(d->in_group);
    free(d->plain.p);
    free(d->txt.p);
    free(d->scratch.p);
    d->kinds = NULL;
    d->charmaps = NULL;
    d->tables = NULL;
    d->table_lens = NULL;
    d->file = NULL;
    d->cache = NULL;
    d->in_group = NULL;
    d->ncache = d->ningroup = d->capcache = d->capgroup = d->ntables = 0;
    memset(&d->plain, 0, sizeof(Buf));
    memset(&d->txt, 0, sizeof(Buf));
    memset(&d->scratch, 0, sizeof(Buf));
}

static void
decoder_dealloc(Decoder *d)
{
    decoder_clear(d);
    Py_TYPE(d)->tp_free((PyObject *)d);
}

static char *
copy_bytes(const char *s, Py_ssize_t n)
{
    char *p = PyMem_Malloc((size_t)n + 1);
    if (p == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    memcpy(p, s, (size_t)n);
    p[n] = 0;
    return p;
}

static int
decoder_init(Decoder *d, PyObject *args, PyObject *kw)
{
    static char *names[] = {"kinds", "charmaps", "checksum_len", "tables", "file", NULL};
    Py_buffer kinds, maps;
    int crc;
    PyObject *tables, *file;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "y*y*iOU", names, &kinds, &maps, &crc, &tables, &file))
        return -1;
    decoder_clear(d);
    int rc = -1;
    if (crc != 0 && crc != 4) {
        PyErr_SetString(PyExc_ValueError, "checksum_len must be 0 or 4");
        goto out;
    }
    if (maps.len % 1024) {
        PyErr_SetString(PyExc_ValueError, "charmaps must hold 256 u32 per charset");
        goto out;
    }
    d->crc = crc;
    d->kinds = (uint8_t *)copy_bytes(kinds.buf, kinds.len);
    d->nkinds = kinds.len;
    d->charmaps = (uint32_t *)copy_bytes(maps.buf, maps.len);
    d->ncharmaps = maps.len / 1024;
    if (d->kinds == NULL || d->charmaps == NULL)
        goto out;
    for (Py_ssize_t i = 0; i < 256 * d->ncharmaps; i++) {       /* little-endian u32 whatever the host */
        const uint8_t *q = (const uint8_t *)maps.buf + 4 * i;
        d->charmaps[i] = (uint32_t)le(q, 4);
    }
    Py_ssize_t fn;
    const char *fs = PyUnicode_AsUTF8AndSize(file, &fn);
    if (fs == NULL || (d->file = copy_bytes(fs, fn)) == NULL)
        goto out;
    d->file_len = fn;
    d->all_tables = tables == Py_None;
    if (!d->all_tables) {
        PyObject *seq = PySequence_List(tables);
        if (seq == NULL)
            goto out;
        Py_ssize_t nt = PyList_GET_SIZE(seq);
        d->tables = PyMem_Calloc((size_t)nt + 1, sizeof(char *));
        d->table_lens = PyMem_Calloc((size_t)nt + 1, sizeof(Py_ssize_t));
        if (d->tables == NULL || d->table_lens == NULL) {
            Py_DECREF(seq);
            PyErr_NoMemory();
            goto out;
        }
        d->ntables = nt;
        for (Py_ssize_t i = 0; i < nt; i++) {
            Py_ssize_t sn;
            const char *s = PyUnicode_AsUTF8AndSize(PyList_GET_ITEM(seq, i), &sn);
            if (s == NULL || (d->tables[i] = copy_bytes(s, sn)) == NULL) {
                Py_DECREF(seq);
                goto out;
            }
            d->table_lens[i] = sn;
        }
        Py_DECREF(seq);
    }
    if (batch_start(&d->batch) < 0) {
        PyErr_NoMemory();
        goto out;
    }
    d->declined = d->groups = 0;
    rc = 0;
out:
    PyBuffer_Release(&kinds);
    PyBuffer_Release(&maps);
    return rc;
}

static double
bound(PyObject *o, double dflt)
{
    if (o == Py_None)
        return dflt;
    return PyFloat_AsDouble(o);
}

static PyObject *
decoder_decode(Decoder *d, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 8 && nargs != 9) {
        PyErr_SetString(PyExc_TypeError, "decode(buf, records, first, stop, lo, hi, max_rows, max_bytes[, gtids])");
        return NULL;
    }
    /* gtids: MySQL transactions, a list with the gtid text of each record
     * (None: an anonymous transaction, declined: its gtid column is null) */
    PyObject *gtids = nargs == 9 && args[8] != Py_None ? args[8] : NULL;
    if (gtids != NULL && !PyList_Check(gtids)) {
        PyErr_SetString(PyExc_TypeError, "decode: gtids must be a list");
        return NULL;
    }
    if (d->kinds == NULL) {
        PyErr_SetString(PyExc_ValueError, "Decoder not initialised");
        return NULL;
    }
    Py_ssize_t first = PyLong_AsSsize_t(args[2]), stop = PyLong_AsSsize_t(args[3]);
    double lo = bound(args[4], -INFINITY), hi = bound(args[5], INFINITY);
    Py_ssize_t max_rows = PyLong_AsSsize_t(args[6]), max_bytes = PyLong_AsSsize_t(args[7]);
    if (PyErr_Occurred())
        return NULL;
    Py_buffer buf, recs;
    if (PyObject_GetBuffer(args[0], &buf, PyBUF_SIMPLE) < 0)
        return NULL;
    if (PyObject_GetBuffer(args[1], &recs, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&buf);
        return NULL;
    }
    Py_ssize_t nrec = recs.len / RECORD_LEN;
    if (first < 0 || stop > nrec || first > stop || (gtids != NULL && PyList_GET_SIZE(gtids) < stop)) {
        PyBuffer_Release(&buf);
        PyBuffer_Release(&recs);
        PyErr_SetString(PyExc_IndexError, "records first..stop out of range");
        return NULL;
    }
    Py_ssize_t i = first;
    int status = 0;
    for (; i < stop; i++) {
        const uint8_t *rec = (const uint8_t *)recs.buf + RECORD_LEN * i;
        double ts = (double)le(rec + 24, 4);
        if (ts < lo || ts > hi)
            continue;
        if (d->batch.rows > 0 && (d->batch.rows >= max_rows || batch_bytes(&d->batch) >= max_bytes)) {
            status = 1;
            break;
        }
        const char *text = NULL;
        Py_ssize_t text_len = 0;
        if (gtids != NULL) {
            PyObject *g = PyList_GET_ITEM(gtids, i);
            if (g == Py_None) {
                d->declined++;
                status = 2;
                break;
            }
            text = PyUnicode_Check(g) ? PyUnicode_AsUTF8AndSize(g, &text_len) : NULL;
            if (text == NULL) {
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_TypeError, "decode: a gtid text must be str or None");
                PyBuffer_Release(&buf);
                PyBuffer_Release(&recs);
                return NULL;
            }
        }
        Mark m;
        mark(&d->batch, &m);
        d->full = 0;
        int rc = decode_group(d, (const uint8_t *)buf.buf, buf.len, rec, text, text_len);
        if (rc == PYERR) {
            rollback(&d->batch, &m);
            if (!PyErr_Occurred())
                PyErr_NoMemory();
            PyBuffer_Release(&buf);
            PyBuffer_Release(&recs);
            return NULL;
        }
        if (rc < 0) {
            rollback(&d->batch, &m);
            if (d->full && d->batch.rows > 0) {
                status = 1;             /* the group does not fit this batch: the next one */
                break;
            }
            d->declined++;
            status = 2;
            break;
        }
        d->groups++;
    }
    PyBuffer_Release(&buf);
    PyBuffer_Release(&recs);
    return Py_BuildValue("(ni)", i, status);
}

/* add_row(gtid, offset, timestamp, table, op, before, after, changed, unknown) */

static int
add_str(Buf *off, Buf *data, PyObject *s)
{
    Py_ssize_t n;
    const char *p = PyUnicode_AsUTF8AndSize(s, &n);
    if (p == NULL)
        return -1;
    if (put_str(off, data, p, n) < 0) {
        PyErr_SetString(PyExc_OverflowError, "the batch's strings pass 2 GiB");
        return -1;
    }
    return 0;
}

static int
add_map(Decoder *d, int which, PyObject *image)
{
    Batch *bt = &d->batch;
    Buf *m = &bt->b[which ? B_MAP1 : B_MAP0];
    if (putbit(&m[M_VALID], bt->rows, image != Py_None) < 0)
        return -1;
    if (image != Py_None) {
        PyObject *k, *v;
        Py_ssize_t pos = 0;
        if (!PyDict_Check(image)) {
            PyErr_SetString(PyExc_TypeError, "a row image is a dict or None");
            return -1;
        }
        while (PyDict_Next(image, &pos, &k, &v)) {
            if (add_str(&m[M_KOFF], &m[M_K], k) < 0)
                return -1;
            Py_ssize_t e = bt->entries[which]++;
            if (putbit(&m[M_VVALID], e, v != Py_None) < 0)
                return -1;
            if (v != Py_None) {
                if (add_str(&m[M_VOFF], &m[M_V], v) < 0)
                    return -1;
            } else if (put32(&m[M_VOFF], (int32_t)m[M_V].len) < 0)
                return -1;
        }
    }
    return put32(&m[M_OFF], (int32_t)bt->entries[which]);
}

static int
add_list(Buf *valid, Py_ssize_t row, Buf *off, Buf *ioff, Buf *data, Py_ssize_t *count, PyObject *list)
{
    if (valid && putbit(valid, row, list != Py_None) < 0)
        return -1;
    if (list != Py_None) {
        PyObject *seq = PySequence_Fast(list, "changed and unknown are lists");
        if (seq == NULL)
            return -1;
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
            if (add_str(ioff, data, PySequence_Fast_GET_ITEM(seq, i)) < 0) {
                Py_DECREF(seq);
                return -1;
            }
            (*count)++;
        }
        Py_DECREF(seq);
    }
    return put32(off, (int32_t)*count);
}

static PyObject *
decoder_add_row(Decoder *d, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 9) {
        PyErr_SetString(PyExc_TypeError,
                        "add_row(gtid, offset, timestamp, table, op, before, after, changed, unknown)");
        return NULL;
    }
    if (d->kinds == NULL) {
        PyErr_SetString(PyExc_ValueError, "Decoder not initialised");
        return NULL;
    }
    long long offset = PyLong_AsLongLong(args[1]), ts = PyLong_AsLongLong(args[2]);
    if (PyErr_Occurred())
        return NULL;
    Batch *bt = &d->batch;
    Buf *b = bt->b;
    Mark m;
    mark(bt, &m);
    if (add_str(&b[B_GTID_OFF], &b[B_GTID], args[0]) < 0 ||
        put_str(&b[B_FILE_OFF], &b[B_FILE], d->file, d->file_len) < 0 ||
        put64(&b[B_OFFSET], offset) < 0 || put64(&b[B_TS], ts) < 0 ||
        add_str(&b[B_TABLE_OFF], &b[B_TABLE], args[3]) < 0 || add_str(&b[B_OP_OFF], &b[B_OP], args[4]) < 0 ||
        add_map(d, 0, args[5]) < 0 || add_map(d, 1, args[6]) < 0 ||
        add_list(&b[B_CH_VALID], bt->rows, &b[B_CH_OFF], &b[B_CH_IOFF], &b[B_CH], &bt->changed, args[7]) < 0 ||
        add_list(NULL, bt->rows, &b[B_UN_OFF], &b[B_UN_IOFF], &b[B_UN], &bt->unknown, args[8]) < 0) {
        rollback(bt, &m);
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        return NULL;
    }
    bt->rows++;
    Py_RETURN_NONE;
}

/* finish() -> the batch's buffers (a dict: rowbatch.batch_from reads it); a new batch starts */
static PyObject *
decoder_finish(Decoder *d, PyObject *Py_UNUSED(ignored))
{
    if (d->kinds == NULL) {
        PyErr_SetString(PyExc_ValueError, "Decoder not initialised");
        return NULL;
    }
    Batch *bt = &d->batch;
    Py_ssize_t rows = bt->rows;
    /* validity bitmaps cover every row (or entry) even where the last bits are 0 */
    int bitmaps[] = {B_MAP0 + M_VALID, B_MAP1 + M_VALID, B_CH_VALID};
    for (size_t i = 0; i < 3; i++)
        if (rows && putbit(&bt->b[bitmaps[i]], rows - 1,
                           (bt->b[bitmaps[i]].len > (rows - 1) / 8) &&
                               (bt->b[bitmaps[i]].p[(rows - 1) / 8] >> ((rows - 1) % 8) & 1)) < 0)
            return PyErr_NoMemory();
    PyObject *bufs[NBUF] = {0};
    PyObject *out = NULL;
    for (int i = 0; i < NBUF; i++)
        if ((bufs[i] = hand_over(&bt->b[i])) == NULL)
            goto fail;
#define S(x) bufs[x]
#define MAPT(base, which) S(base + M_VALID), S(base + M_OFF), (Py_ssize_t)bt->entries[which], S(base + M_KOFF), \
    S(base + M_K), S(base + M_VVALID), S(base + M_VOFF), S(base + M_V)
    out = Py_BuildValue("{s:n,s:(OO),s:(OO),s:O,s:O,s:(OO),s:(OO),s:(OOnOOOOO),s:(OOnOOOOO),s:(OOnOO),s:(OnOO)}",
                        "rows", rows, "gtid", S(B_GTID_OFF), S(B_GTID), "file", S(B_FILE_OFF), S(B_FILE),
                        "offset", S(B_OFFSET), "timestamp", S(B_TS), "table", S(B_TABLE_OFF), S(B_TABLE),
                        "op", S(B_OP_OFF), S(B_OP), "before", MAPT(B_MAP0, 0), "after", MAPT(B_MAP1, 1),
                        "changed", S(B_CH_VALID), S(B_CH_OFF), (Py_ssize_t)bt->changed, S(B_CH_IOFF), S(B_CH),
                        "unknown", S(B_UN_OFF), (Py_ssize_t)bt->unknown, S(B_UN_IOFF), S(B_UN));
#undef MAPT
#undef S
fail:
    for (int i = 0; i < NBUF; i++)
        Py_XDECREF(bufs[i]);
    batch_free(bt);
    if (batch_start(bt) < 0) {
        Py_XDECREF(out);
        return PyErr_NoMemory();
    }
    return out;
}

static PyObject *
decoder_rows(Decoder *d, void *closure)
{
    return PyLong_FromSsize_t(d->batch.rows);
}

static PyObject *
decoder_nbytes(Decoder *d, void *closure)
{
    return PyLong_FromSsize_t(batch_bytes(&d->batch));
}

static PyObject *
decoder_declined(Decoder *d, void *closure)
{
    return PyLong_FromSsize_t(d->declined);
}

static PyObject *
decoder_groups(Decoder *d, void *closure)
{
    return PyLong_FromSsize_t(d->groups);
}

static PyGetSetDef decoder_getset[] = {
    {"rows", (getter)decoder_rows, NULL, "rows in the current batch", NULL},
    {"nbytes", (getter)decoder_nbytes, NULL, "bytes in the current batch's buffers", NULL},
    {"declined", (getter)decoder_declined, NULL, "groups declined since construction", NULL},
    {"groups", (getter)decoder_groups, NULL, "groups decoded here since construction", NULL},
    {NULL},
};

static PyMethodDef decoder_methods[] = {
    {"decode", (PyCFunction)(void (*)(void))decoder_decode, METH_FASTCALL,
     "decode(buf, records, first, stop, lo, hi, max_rows, max_bytes[, gtids]) -> (next, status): status 0 "
     "done, 1 batch full, 2 record `next` declined (decode it with the definition, add_row its rows); "
     "gtids: MySQL transactions, the gtid text of each record (None: anonymous)"},
    {"add_row", (PyCFunction)(void (*)(void))decoder_add_row, METH_FASTCALL,
     "add_row(gtid, offset, timestamp, table, op, before, after, changed, unknown): one row decoded in Python"},
    {"finish", (PyCFunction)decoder_finish, METH_NOARGS,
     "finish() -> the batch's buffers (a dict); a new batch starts"},
    {NULL},
};

static PyTypeObject DecoderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "gtidx._rows.Decoder",
    .tp_basicsize = sizeof(Decoder),
    .tp_dealloc = (destructor)decoder_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Decoder(kinds, charmaps, checksum_len, tables, file): rows events into Arrow buffers "
              "(see gtidx/_rows.c)",
    .tp_methods = decoder_methods,
    .tp_getset = decoder_getset,
    .tp_init = (initproc)decoder_init,
    .tp_new = PyType_GenericNew,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "gtidx._rows",
    "The compiled row decoder behind gtidx.rowbatch (optional: show.decode_group is the definition "
    "and the fallback).",
    -1, NULL,
};

PyMODINIT_FUNC
PyInit__rows(void)
{
    if (PyType_Ready(&BufferType) < 0 || PyType_Ready(&DecoderType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&DecoderType);
    if (PyModule_AddObject(m, "Decoder", (PyObject *)&DecoderType) < 0) {
        Py_DECREF(&DecoderType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&BufferType);
    if (PyModule_AddObject(m, "Buffer", (PyObject *)&BufferType) < 0) {
        Py_DECREF(&BufferType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
