/*
 * gtidx._skip: the one optional compiled piece of gtidx: skip (below) for
 * the header walks (MariaDB's walk.group_walk, MySQL's MysqlBinlog._chain),
 * mysql_walk (further down) for the MySQL index build, mysql_records for
 * the MySQL row changes.
 *
 * skip(buf, off, cold[, limit]) -> int
 *
 * The hot part of walk.group_walk, in C: from the event starting at ``off`` in
 * ``buf`` (any buffer: a Window's bytearray view, bytes, a mapping), follow
 * the chain of event lengths past every event whose type is not marked in
 * ``cold`` (bytes of 256, non-zero = cold) and whose length is at least the
 * 19-byte header; return the offset of the first event that is cold or
 * shorter than a header, or the first offset whose type and length (bytes
 * 4 and 9..12 of the header) do not fit in ``buf``, or the first offset past
 * ``limit`` when one is given (a walk that must stop at a target).
 *
 * That is exactly the offsets the pure-Python loop visits with
 * ``TYPE_LENGTH.unpack_from`` (which raises struct.error where the 13 bytes
 * do not fit): the Python loop stays the definition and the fallback, and
 * tests check both give the same walks. Lengths are read little-endian
 * whatever the host, and never trusted beyond moving the offset.
 *
 * groups(buf, off, base, size, cold, gtid_type, body_min, out) -> (n, resume, status)
 *
 * The group walk of walk.group_records (walk.group_walk with a yield per
 * group), in C, for the stretches where nothing is unusual. ``buf`` holds
 * the file's bytes from file offset ``base``; the walk starts at ``off`` in
 * it (a point where a walk may start: walk.group_walk's start or an earlier
 * call's ``resume``); ``size`` is the file's size, ``cold`` as for skip
 * (GTID and the boundary types), ``gtid_type`` the GTID event's type and
 * ``body_min`` its least length. Each group that ends is written to ``out``
 * (a writable buffer) as a GROUP_RECORD: start, end, seq_no (u64),
 * timestamp, server_id, domain_id, flags2 (u32), little-endian, file
 * offsets. It returns how many records it wrote, ``resume``: the file
 * offset where the walk goes on exactly as walk.group_walk would (the last
 * cold event it took, whose group, if it opened one, is not written yet),
 * and why it stopped: 0 the next header (or a GTID event's head) is not in
 * ``buf`` (read more from ``resume``), 1 something walk.group_walk raises for
 * or stops at is next (a length below the header, a partial GTID event,
 * one shorter than ``body_min``, seq_no 0: walk.group_walk from ``resume``
 * says what), 2 ``out`` is full.
 *
 * It visits the events walk.group_walk visits and takes the same fields from
 * the GTID event (GTID_HEAD: timestamp at 0, server_id at 5, seq_no at 19,
 * domain_id at 27, flags2 at 31); the tests hold the two equal.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define TYPE_AT 4
#define LENGTH_AT 9
#define NEED 13         /* type and length: the bytes TYPE_LENGTH reads */
#define HEADER_LEN 19

static PyObject *
skip(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer buf, cold;
    Py_ssize_t start, limit = PY_SSIZE_T_MAX;
    if (nargs != 3 && nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "skip(buf, off, cold[, limit]) takes 3 or 4 arguments");
        return NULL;
    }
    start = PyLong_AsSsize_t(args[1]);
    if (start == -1 && PyErr_Occurred())
        return NULL;
    if (nargs == 4) {
        limit = PyLong_AsSsize_t(args[3]);
        if (limit == -1 && PyErr_Occurred())
            return NULL;
    }
    if (start < 0) {
        PyErr_SetString(PyExc_ValueError, "offset must not be negative");
        return NULL;
    }
    if (PyObject_GetBuffer(args[0], &buf, PyBUF_SIMPLE) < 0)
        return NULL;
    if (PyObject_GetBuffer(args[2], &cold, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&buf);
        return NULL;
    }
    if (cold.len != 256) {
        PyBuffer_Release(&cold);
        PyBuffer_Release(&buf);
        PyErr_SetString(PyExc_ValueError, "cold must be 256 bytes");
        return NULL;
    }
    const unsigned char *p = (const unsigned char *)buf.buf;
    const unsigned char *c = (const unsigned char *)cold.buf;
    uint64_t len = (uint64_t)buf.len;
    uint64_t off = (uint64_t)start;
    if (limit < 0) {
        PyBuffer_Release(&cold);
        PyBuffer_Release(&buf);
        return PyLong_FromSsize_t(start);
    }
    uint64_t lim = (uint64_t)limit;
    while (off <= lim && off + NEED <= len) {
        const unsigned char *h = p + off;
        uint32_t ln = (uint32_t)h[LENGTH_AT] | ((uint32_t)h[LENGTH_AT + 1] << 8)
                    | ((uint32_t)h[LENGTH_AT + 2] << 16) | ((uint32_t)h[LENGTH_AT + 3] << 24);
        if (ln < HEADER_LEN || c[h[TYPE_AT]])
            break;
        off += ln;
    }
    PyBuffer_Release(&cold);
    PyBuffer_Release(&buf);
    return PyLong_FromUnsignedLongLong(off);
}

/*
 * mysql_walk(buf, off, base, fsize, crc_len, due, landing) -> (stop, runs, code)
 *
 * The transaction walk of MysqlBinlog.set_batches (gtidx/binlog/mysql.py,
 * whose Python loop, MysqlBinlog._chained, is the definition): from the GTID
 * or ANONYMOUS_GTID event at ``off`` in ``buf`` (file offset ``base + off``),
 * transaction after transaction while each one checks out: the GTID event
 * is whole, its CRC32 checks out (``crc_len`` 4), its GTID number is in
 * range (1 .. 2**63-2; 0 for ANONYMOUS_GTID), it states a transaction_length;
 * then the header chain, as skip above (each event's type and length,
 * lengths followed while the type and length are in the file), from the
 * event after it to the first event of a type marked in ``landing`` or of a
 * length below the header: that event's header is in the file, its length
 * is at least the header, and the transaction_length is exactly the bytes
 * from ``off`` to it. The length is a cross-check only: every event is
 * walked, and where it disagrees this walk stops (code 2) and the Python
 * walk reports the damage. ``runs``: the GTIDs of the transactions walked,
 * in file order, as (uuid bytes, start, end) with end exclusive,
 * consecutive numbers of one UUID merged. ``code``: 0 after the first
 * transaction that ends at or past the file offset ``due`` (``stop`` is its
 * end); 1 when the next check needs bytes past ``buf`` but inside the file
 * (``stop``: the GTID event to read on from); 2 when the event at ``stop``
 * is not one this walk takes (a GTID_TAGGED, no length, a damaged GTID
 * event, a length that disagrees, a short length on the chain, the last
 * transaction of the file at ``fsize``).
 */
/* CRC32 (zlib's: reflected 0xEDB88320), eight bytes a step: crc_table[k][b]
 * is the CRC of byte b followed by k zero bytes, so the eight lookups of a
 * step are independent of each other (the bytewise loop waits on each). */
static uint32_t crc_table[8][256];

static void
crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[0][i] = c;
    }
    for (int k = 1; k < 8; k++)
        for (int i = 0; i < 256; i++)
            crc_table[k][i] = (crc_table[k - 1][i] >> 8) ^ crc_table[0][crc_table[k - 1][i] & 0xFF];
}

static inline uint32_t
rd32(const unsigned char *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static uint32_t
crc32_of(const unsigned char *p, uint64_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    for (; n >= 8; p += 8, n -= 8) {
        uint32_t lo = rd32(p) ^ c, hi = rd32(p + 4);
        c = crc_table[7][lo & 0xFF] ^ crc_table[6][(lo >> 8) & 0xFF] ^ crc_table[5][(lo >> 16) & 0xFF]
            ^ crc_table[4][lo >> 24] ^ crc_table[3][hi & 0xFF] ^ crc_table[2][(hi >> 8) & 0xFF]
            ^ crc_table[1][(hi >> 16) & 0xFF] ^ crc_table[0][hi >> 24];
    }
    while (n--)
        c = crc_table[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

static uint64_t
le(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

#define GTID_LOG 33
#define ANONYMOUS_GTID 34
#define GTID_FIXED 42           /* flags, uuid, gno, lt_type, last_committed, sequence_number */
#define LOGICAL_TS_TYPE 2
#define COMMIT_TS_FLAG (1ULL << 55)
#define GNO_MAX ((1ULL << 63) - 2)

/* One transaction of the MySQL walks (mysql_walk, mysql_records) from the
 * event at ``off`` in ``p`` (``len`` bytes, file offset ``base + off``),
 * checked as the comment of mysql_walk says: 0 it checks out (``*end`` just
 * past it in ``p``, ``*type`` GTID_LOG or ANONYMOUS_GTID, ``*gno``, ``*uuid``
 * its 16 bytes, ``*us`` its original_commit_timestamp, else its
 * immediate_commit_timestamp: MysqlGroup.commit_us), 1 the check needs
 * bytes past ``p`` inside the file, 2 it is not one these walks take. */
static int
mysql_txn(const unsigned char *p, uint64_t len, uint64_t off, uint64_t base, uint64_t fsize, uint64_t crc_len,
          const unsigned char *land, uint64_t *end_out, int *type_out, uint64_t *gno_out,
          const unsigned char **uuid_out, uint64_t *us_out)
{
    if (base + off + HEADER_LEN > fsize) return 2;
    if (off + HEADER_LEN > len) return 1;
    const unsigned char *h = p + off;
    int type = h[TYPE_AT];
    if (type != GTID_LOG && type != ANONYMOUS_GTID) return 2;
    uint64_t ln = rd32(h + LENGTH_AT);
    if (ln < HEADER_LEN + crc_len || base + off + ln > fsize) return 2;
    if (off + ln > len) return 1;
    if (crc_len && crc32_of(h, ln - 4) != rd32(h + ln - 4)) return 2;
    const unsigned char *body = h + HEADER_LEN;
    uint64_t blen = ln - HEADER_LEN - crc_len, at = GTID_FIXED + 7;
    if (blen < at || body[GTID_FIXED - 17] != LOGICAL_TS_TYPE) return 2;
    uint64_t gno = le(body + 17, 8);
    if (type == GTID_LOG ? gno < 1 || gno > GNO_MAX : gno != 0) return 2;
    uint64_t us = le(body + GTID_FIXED, 7);
    if (us & COMMIT_TS_FLAG) {
        if (blen < at + 7) return 2;
        us = le(body + at, 7);
        at += 7;
    }
    if (at >= blen) return 2;
    uint64_t length, first = body[at];
    int width = first < 251 ? 0 : first == 252 ? 2 : first == 253 ? 3 : first == 254 ? 8 : -1;
    if (width < 0 || at + 1 + width > blen) return 2;
    length = width ? le(body + at + 1, width) : first;
    /* the header chain, every event seen, to where the next transaction starts */
    uint64_t end = off + ln;
    while (base + end + NEED <= fsize && end + NEED <= len) {
        const unsigned char *e = p + end;
        uint32_t eln = rd32(e + LENGTH_AT);
        if (eln < HEADER_LEN || land[e[TYPE_AT]])
            break;
        end += eln;
    }
    if (base + end + HEADER_LEN > fsize) return 2;     /* the last transaction on disk */
    if (end + HEADER_LEN > len) return 1;
    if (rd32(p + end + LENGTH_AT) < HEADER_LEN) return 2;
    if (length != end - off) return 2;                 /* the Python walk decides */
    *end_out = end;
    *type_out = type;
    *gno_out = gno;
    *uuid_out = body + 1;
    *us_out = us;
    return 0;
}

static PyObject *
mysql_walk(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer buf, landing;
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "mysql_walk(buf, off, base, fsize, crc_len, due, landing) takes 7 arguments");
        return NULL;
    }
    unsigned long long off = PyLong_AsUnsignedLongLong(args[1]);
    unsigned long long base = PyLong_AsUnsignedLongLong(args[2]);
    unsigned long long fsize = PyLong_AsUnsignedLongLong(args[3]);
    unsigned long long crc_len = PyLong_AsUnsignedLongLong(args[4]);
    unsigned long long due = PyLong_AsUnsignedLongLong(args[5]);
    if (PyErr_Occurred())
        return NULL;
    if (crc_len != 0 && crc_len != 4) {
        PyErr_SetString(PyExc_ValueError, "crc_len must be 0 or 4");
        return NULL;
    }
    if (PyObject_GetBuffer(args[0], &buf, PyBUF_SIMPLE) < 0)
        return NULL;
    if (PyObject_GetBuffer(args[6], &landing, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&buf);
        return NULL;
    }
    PyObject *runs = PyList_New(0);
    if (landing.len != 256 || runs == NULL) {
        if (runs == NULL)
            goto fail;
        PyErr_SetString(PyExc_ValueError, "landing must be 256 bytes");
        goto fail;
    }
    const unsigned char *p = (const unsigned char *)buf.buf;
    const unsigned char *land = (const unsigned char *)landing.buf;
    uint64_t len = (uint64_t)buf.len;
    const unsigned char *run_uuid = NULL;   /* the open run: not yet in the list */
    uint64_t run_start = 0, run_end = 0;
    int code;
    for (;;) {
        uint64_t end, gno, us;
        int type;
        const unsigned char *uuid;
        code = mysql_txn(p, len, off, base, fsize, crc_len, land, &end, &type, &gno, &uuid, &us);
        if (code)
            break;
        if (type == GTID_LOG) {
            if (run_uuid != NULL && run_end == gno && memcmp(run_uuid, uuid, 16) == 0) {
                run_end = gno + 1;
            } else {
                if (run_uuid != NULL) {
                    PyObject *r = Py_BuildValue("(y#KK)", (const char *)run_uuid, (Py_ssize_t)16,
                                                (unsigned long long)run_start, (unsigned long long)run_end);
                    if (r == NULL || PyList_Append(runs, r) < 0) { Py_XDECREF(r); goto fail; }
                    Py_DECREF(r);
                }
                run_uuid = uuid;
                run_start = gno;
                run_end = gno + 1;
            }
        }
        off = end;
        if (base + off >= due) { code = 0; break; }
    }
    if (run_uuid != NULL) {
        PyObject *r = Py_BuildValue("(y#KK)", (const char *)run_uuid, (Py_ssize_t)16,
                                    (unsigned long long)run_start, (unsigned long long)run_end);
        if (r == NULL || PyList_Append(runs, r) < 0) { Py_XDECREF(r); goto fail; }
        Py_DECREF(r);
    }
    PyBuffer_Release(&landing);
    PyBuffer_Release(&buf);
    PyObject *out = Py_BuildValue("(KNi)", (unsigned long long)off, runs, code);
    return out;
fail:
    Py_XDECREF(runs);
    PyBuffer_Release(&landing);
    PyBuffer_Release(&buf);
    return NULL;
}

#define GTID_HEAD_LEN 32   /* GTID_HEAD.size: header and the body fields read */
#define RECORD_LEN 40      /* GROUP_RECORD.size */

static inline void
wr32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)v; p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16); p[3] = (unsigned char)(v >> 24);
}

static inline void
wr64(unsigned char *p, uint64_t v)
{
    wr32(p, (uint32_t)v);
    wr32(p + 4, (uint32_t)(v >> 32));
}

static PyObject *
groups(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer buf, cold, out;
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError,
                        "groups(buf, off, base, size, cold, gtid_type, body_min, out) takes 8 arguments");
        return NULL;
    }
    Py_ssize_t start = PyLong_AsSsize_t(args[1]);
    if (start == -1 && PyErr_Occurred())
        return NULL;
    Py_ssize_t base = PyLong_AsSsize_t(args[2]);
    if (base == -1 && PyErr_Occurred())
        return NULL;
    Py_ssize_t size = PyLong_AsSsize_t(args[3]);
    if (size == -1 && PyErr_Occurred())
        return NULL;
    long gtid_type = PyLong_AsLong(args[5]);
    if (gtid_type == -1 && PyErr_Occurred())
        return NULL;
    Py_ssize_t body_min = PyLong_AsSsize_t(args[6]);
    if (body_min == -1 && PyErr_Occurred())
        return NULL;
    if (start < 0 || base < 0 || size < 0 || body_min < GTID_HEAD_LEN || gtid_type < 0 || gtid_type > 255) {
        PyErr_SetString(PyExc_ValueError, "groups: offsets and sizes must not be negative, body_min >= 32, "
                        "gtid_type a byte");
        return NULL;
    }
    if (PyObject_GetBuffer(args[0], &buf, PyBUF_SIMPLE) < 0)
        return NULL;
    if (PyObject_GetBuffer(args[4], &cold, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&buf);
        return NULL;
    }
    if (PyObject_GetBuffer(args[7], &out, PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(&cold);
        PyBuffer_Release(&buf);
        return NULL;
    }
    if (cold.len != 256) {
        PyBuffer_Release(&out);
        PyBuffer_Release(&cold);
        PyBuffer_Release(&buf);
        PyErr_SetString(PyExc_ValueError, "cold must be 256 bytes");
        return NULL;
    }
    const unsigned char *p = (const unsigned char *)buf.buf;
    const unsigned char *c = (const unsigned char *)cold.buf;
    unsigned char *w = (unsigned char *)out.buf;
    uint64_t len = (uint64_t)buf.len, b = (uint64_t)base, fsize = (uint64_t)size;
    uint64_t cap = (uint64_t)out.len / RECORD_LEN, n = 0;
    uint64_t o = (uint64_t)start, resume = o, bmin = (uint64_t)body_min;
    int open = 0, status;
    uint64_t g_start = 0, g_seq = 0;
    uint32_t g_ts = 0, g_server = 0, g_domain = 0, g_flags = 0;
    for (;;) {
        if (o + NEED > len) {
            status = 0;
            break;
        }
        const unsigned char *h = p + o;
        uint32_t ln = rd32(h + LENGTH_AT);
        if (ln >= HEADER_LEN && !c[h[TYPE_AT]]) {
            o += ln;
            continue;
        }
        if (ln < HEADER_LEN) {              /* group_walk raises here, before it yields the open group */
            status = 1;
            break;
        }
        if (open) {                          /* a cold event ends the open group */
            if (n == cap) {
                status = 2;
                break;
            }
            unsigned char *r = w + n * RECORD_LEN;
            wr64(r, b + g_start);
            wr64(r + 8, b + o);
            wr64(r + 16, g_seq);
            wr32(r + 24, g_ts);
            wr32(r + 28, g_server);
            wr32(r + 32, g_domain);
            wr32(r + 36, g_flags);
            n++;
            open = 0;
        }
        resume = o;
        if (h[TYPE_AT] == (unsigned char)gtid_type) {
            if (b + o + ln > fsize || ln < bmin) {   /* partial at the end, or too short */
                status = 1;
                break;
            }
            if (o + GTID_HEAD_LEN > len) {
                status = 0;
                break;
            }
            uint64_t seq = (uint64_t)rd32(h + 19) | ((uint64_t)rd32(h + 23) << 32);
            if (seq == 0) {
                status = 1;
                break;
            }
            g_start = o;
            g_seq = seq;
            g_ts = rd32(h);
            g_server = rd32(h + 5);
            g_domain = rd32(h + 27);
            g_flags = h[31];
            open = 1;
        }
        o += ln;
    }
    PyBuffer_Release(&out);
    PyBuffer_Release(&cold);
    PyBuffer_Release(&buf);
    return Py_BuildValue("(KKi)", (unsigned long long)n, (unsigned long long)(b + resume), status);
}

/*
 * mysql_records(buf, off, base, fsize, crc_len, landing, limit, out, texts) -> (n, stop, code)
 *
 * The transactions of MysqlBinlog.transaction_runs (whose Python side,
 * MysqlBinlog.transactions, is the definition) for the row decoder: from
 * the GTID event at ``off`` in ``buf`` (file offset ``base + off``), each
 * transaction that checks out as in mysql_walk (mysql_txn) and has a GTID
 * (GTID_LOG) is written to ``out`` as a GROUP_RECORD whose seq word is its
 * start (the offset column) and timestamp MysqlGroup.timestamp's (its
 * commit timestamp's second, else its header's), and its GTID's text
 * ("uuid:gno", as MysqlGtid prints it) appended to the list ``texts``.
 * ``n``: the records written; ``stop``: the file offset of the next
 * transaction; ``code``: 0 it starts at or past ``limit``, 1 its check needs
 * bytes past ``buf`` inside the file, 2 this walk does not take it (an
 * ANONYMOUS_GTID, and whatever mysql_walk stops at), 3 ``out`` is full.
 */
static PyObject *
mysql_records(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer buf, landing, out;
    if (nargs != 9 || !PyList_Check(args[8])) {
        PyErr_SetString(PyExc_TypeError,
                        "mysql_records(buf, off, base, fsize, crc_len, landing, limit, out, texts: list) takes 9 arguments");
        return NULL;
    }
    unsigned long long off = PyLong_AsUnsignedLongLong(args[1]);
    unsigned long long base = PyLong_AsUnsignedLongLong(args[2]);
    unsigned long long fsize = PyLong_AsUnsignedLongLong(args[3]);
    unsigned long long crc_len = PyLong_AsUnsignedLongLong(args[4]);
    unsigned long long limit = PyLong_AsUnsignedLongLong(args[6]);
    if (PyErr_Occurred())
        return NULL;
    if (crc_len != 0 && crc_len != 4) {
        PyErr_SetString(PyExc_ValueError, "crc_len must be 0 or 4");
        return NULL;
    }
    if (PyObject_GetBuffer(args[0], &buf, PyBUF_SIMPLE) < 0)
        return NULL;
    if (PyObject_GetBuffer(args[5], &landing, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&buf);
        return NULL;
    }
    if (PyObject_GetBuffer(args[7], &out, PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(&landing);
        PyBuffer_Release(&buf);
        return NULL;
    }
    PyObject *texts = args[8];
    const unsigned char *p = (const unsigned char *)buf.buf;
    const unsigned char *land = (const unsigned char *)landing.buf;
    unsigned char *w = (unsigned char *)out.buf;
    uint64_t len = (uint64_t)buf.len, cap = (uint64_t)out.len / RECORD_LEN, n = 0;
    static const char hex[] = "0123456789abcdef";
    char text[64];
    int code;
    if (landing.len != 256) {
        PyErr_SetString(PyExc_ValueError, "landing must be 256 bytes");
        goto fail;
    }
    for (;;) {
        if (base + off >= limit) { code = 0; break; }
        if (n == cap) { code = 3; break; }
        uint64_t end, gno, us;
        int type;
        const unsigned char *uuid;
        code = mysql_txn(p, len, off, base, fsize, crc_len, land, &end, &type, &gno, &uuid, &us);
        if (code)
            break;
        if (type != GTID_LOG) { code = 2; break; }
        int t = 0;
        for (int i = 0; i < 16; i++) {
            if (i == 4 || i == 6 || i == 8 || i == 10)
                text[t++] = '-';
            text[t++] = hex[uuid[i] >> 4];
            text[t++] = hex[uuid[i] & 15];
        }
        t += snprintf(text + t, sizeof text - t, ":%llu", (unsigned long long)gno);
        PyObject *o = PyUnicode_FromStringAndSize(text, t);
        if (o == NULL || PyList_Append(texts, o) < 0) { Py_XDECREF(o); goto fail; }
        Py_DECREF(o);
        unsigned char *r = w + n * RECORD_LEN;
        wr64(r, base + off);
        wr64(r + 8, base + end);
        wr64(r + 16, base + off);
        wr32(r + 24, us ? (uint32_t)(us / 1000000) : rd32(p + off));
        wr32(r + 28, 0);
        wr32(r + 32, 0);
        wr32(r + 36, 0);
        n++;
        off = end;
    }
    PyBuffer_Release(&out);
    PyBuffer_Release(&landing);
    PyBuffer_Release(&buf);
    return Py_BuildValue("(KKi)", (unsigned long long)n, (unsigned long long)(base + off), code);
fail:
    PyBuffer_Release(&out);
    PyBuffer_Release(&landing);
    PyBuffer_Release(&buf);
    return NULL;
}

static PyMethodDef methods[] = {
    {"mysql_records", (PyCFunction)(void (*)(void))mysql_records, METH_FASTCALL,
     "mysql_records(buf, off, base, fsize, crc_len, landing, limit, out, texts) -> (n, stop, code): MySQL "
     "transactions with GTIDs as GROUP_RECORDs and their GTID texts, for the row decoder (see gtidx/_skip.c)"},
    {"mysql_walk", (PyCFunction)(void (*)(void))mysql_walk, METH_FASTCALL,
     "mysql_walk(buf, off, base, fsize, crc_len, due, landing) -> (stop, runs, code): "
     "MySQL transactions along the event headers, transaction_length cross-checked (see gtidx/_skip.c)"},
    {"skip", (PyCFunction)(void (*)(void))skip, METH_FASTCALL,
     "skip(buf, off, cold[, limit]) -> offset of the next cold or short event, or where a header "
     "no longer fits (or the first past limit)"},
    {"groups", (PyCFunction)(void (*)(void))groups, METH_FASTCALL,
     "groups(buf, off, base, size, cold, gtid_type, body_min, out) -> (records written, resume offset, "
     "why it stopped: 0 more bytes needed, 1 unusual, 2 out full)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "gtidx._skip",
    "The compiled event skip behind walk.group_walk and MysqlBinlog._chain, group walk behind "
    "Binlog.group_records and MySQL transaction walks behind MysqlBinlog.set_batches and "
    "MysqlBinlog.transaction_runs (optional: gtidx "
    "runs without it).",
    -1, methods,
};

PyMODINIT_FUNC
PyInit__skip(void)
{
    crc_init();
    return PyModule_Create(&module);
}
