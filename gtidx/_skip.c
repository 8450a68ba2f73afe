/*
 * gtidx._skip: the one optional compiled piece of gtidx.
 *
 * skip(buf, off, cold[, limit]) -> int
 *
 * The hot part of Binlog._walk, in C: from the event starting at ``off`` in
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
 * The group walk of Binlog.group_records (Binlog._walk with a yield per
 * group), in C, for the stretches where nothing is unusual. ``buf`` holds
 * the file's bytes from file offset ``base``; the walk starts at ``off`` in
 * it (a point where a walk may start: Binlog._walk's start or an earlier
 * call's ``resume``); ``size`` is the file's size, ``cold`` as for skip
 * (GTID and the boundary types), ``gtid_type`` the GTID event's type and
 * ``body_min`` its least length. Each group that ends is written to ``out``
 * (a writable buffer) as a GROUP_RECORD: start, end, seq_no (u64),
 * timestamp, server_id, domain_id, flags2 (u32), little-endian, file
 * offsets. It returns how many records it wrote, ``resume``: the file
 * offset where the walk goes on exactly as Binlog._walk would (the last
 * cold event it took, whose group, if it opened one, is not written yet),
 * and why it stopped: 0 the next header (or a GTID event's head) is not in
 * ``buf`` (read more from ``resume``), 1 something Binlog._walk raises for
 * or stops at is next (a length below the header, a partial GTID event,
 * one shorter than ``body_min``, seq_no 0: Binlog._walk from ``resume``
 * says what), 2 ``out`` is full.
 *
 * It visits the events Binlog._walk visits and takes the same fields from
 * the GTID event (GTID_HEAD: timestamp at 0, server_id at 5, seq_no at 19,
 * domain_id at 27, flags2 at 31); the tests hold the two equal.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

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


#define GTID_HEAD_LEN 32   /* GTID_HEAD.size: header and the body fields read */
#define RECORD_LEN 40      /* GROUP_RECORD.size */

static inline uint32_t
rd32(const unsigned char *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

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
        if (ln < HEADER_LEN) {              /* _walk raises here, before it yields the open group */
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

static PyMethodDef methods[] = {
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
    "The compiled event skip behind Binlog._walk and group walk behind Binlog.group_records "
    "(optional: gtidx runs without it).",
    -1, methods,
};

PyMODINIT_FUNC
PyInit__skip(void)
{
    return PyModule_Create(&module);
}
