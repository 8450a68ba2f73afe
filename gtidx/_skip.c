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

static PyMethodDef methods[] = {
    {"skip", (PyCFunction)(void (*)(void))skip, METH_FASTCALL,
     "skip(buf, off, cold[, limit]) -> offset of the next cold or short event, or where a header "
     "no longer fits (or the first past limit)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "gtidx._skip",
    "The compiled event skip behind Binlog._walk (optional: gtidx runs without it).",
    -1, methods,
};

PyMODINIT_FUNC
PyInit__skip(void)
{
    return PyModule_Create(&module);
}
