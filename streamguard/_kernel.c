/* streamguard._kernel: the native kernel of the per-frame path.

   One function, skim_frame(data, hints): whether a chunk of body bytes is exactly one
   plain SSE frame that the every-stream tier may count without reading it. It answers
   exactly what streamguard.sse._skim_frame answers (the pure-Python definition, which the
   pure build runs and tests/test_kernel.py holds this one to); it exists because in
   mypyc-compiled Python each of that definition's byte scans is a C-API call whose
   overhead, not its scan, is the cost (issue 45: docs/performance.md, "The native
   kernel").

   A chunk is skimmed when it is all ASCII (so valid UTF-8), has the shape of one fresh
   event as _single_frame reads it (`data: ...` or `event: ...` then `data: ...`, LF or
   CRLF endings, nothing else), and holds none of the hints (byte strings, as
   bytes.find looks for them). Nothing here allocates, and nothing is kept between calls.
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

/* The index of the first `byte` in data[from:n], or -1 (bytes.find of one byte). */
static Py_ssize_t
find_byte(const char *data, Py_ssize_t n, Py_ssize_t from, char byte)
{
    if (from >= n) {
        return -1;
    }
    const char *found = memchr(data + from, byte, (size_t)(n - from));
    return found == NULL ? -1 : (Py_ssize_t)(found - data);
}

/* Whether data[0:n] holds needle[0:m] (bytes.find(needle) >= 0). */
static int
holds(const char *data, Py_ssize_t n, const char *needle, Py_ssize_t m)
{
    if (m == 0) {
        return 1;
    }
    if (m > n) {
        return 0;
    }
    const char *end = data + n - m;
    for (const char *at = data; at <= end; at++) {
        at = memchr(at, needle[0], (size_t)(end - at + 1));
        if (at == NULL) {
            return 0;
        }
        if (memcmp(at, needle, (size_t)m) == 0) {
            return 1;
        }
    }
    return 0;
}

/* _single_frame's shape test: whether data[0:n] is one fresh event, as the parser's fast
   path takes it. */
static int
single_frame(const char *data, Py_ssize_t n)
{
    Py_ssize_t start, first, end;
    if (n >= 2 && data[n - 2] == '\n' && data[n - 1] == '\n') {
        if (memchr(data, '\r', (size_t)n) != NULL) {
            return 0;
        }
        end = n - 2;
        first = find_byte(data, n, 0, '\n');
        if (first == end) {
            start = 0;
        }
        else if (find_byte(data, n, first + 1, '\n') == end) {
            start = first + 1;
        }
        else {
            return 0;
        }
    }
    else if (n >= 4 && memcmp(data + n - 4, "\r\n\r\n", 4) == 0) {
        Py_ssize_t crs;
        end = n - 4;
        first = find_byte(data, n, 0, '\n') - 1;
        if (first == end) {
            start = 0;
            crs = 2;
        }
        else if (first >= 0 && data[first] == '\r'
                 && find_byte(data, n, first + 2, '\n') == end + 1) {
            start = first + 2;
            crs = 3;
        }
        else {
            return 0;
        }
        Py_ssize_t counted = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            counted += data[i] == '\r';
        }
        if (counted != crs) {
            return 0;
        }
    }
    else {
        return 0;
    }
    if (start + 5 > n || memcmp(data + start, "data:", 5) != 0) {
        return 0;
    }
    if (start != 0 && (n < 6 || memcmp(data, "event:", 6) != 0)) {
        return 0;
    }
    return 1;
}

static PyObject *
skim_frame(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "skim_frame() takes 2 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *chunk = args[0];
    PyObject *hints = args[1];
    if (!PyBytes_CheckExact(chunk)) {
        PyErr_SetString(PyExc_TypeError, "skim_frame(): data must be bytes");
        return NULL;
    }
    if (!PyTuple_CheckExact(hints)) {
        PyErr_SetString(PyExc_TypeError, "skim_frame(): hints must be a tuple of bytes");
        return NULL;
    }
    const char *data = PyBytes_AS_STRING(chunk);
    Py_ssize_t n = PyBytes_GET_SIZE(chunk);
    for (Py_ssize_t i = 0; i < n; i++) {
        if ((unsigned char)data[i] & 0x80) {
            Py_RETURN_FALSE;
        }
    }
    if (!single_frame(data, n)) {
        Py_RETURN_FALSE;
    }
    Py_ssize_t count = PyTuple_GET_SIZE(hints);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *hint = PyTuple_GET_ITEM(hints, i);
        if (!PyBytes_CheckExact(hint)) {
            PyErr_SetString(PyExc_TypeError, "skim_frame(): hints must be a tuple of bytes");
            return NULL;
        }
        if (holds(data, n, PyBytes_AS_STRING(hint), PyBytes_GET_SIZE(hint))) {
            Py_RETURN_FALSE;
        }
    }
    Py_RETURN_TRUE;
}

static PyMethodDef kernel_methods[] = {
    {"skim_frame", (PyCFunction)(void (*)(void))skim_frame, METH_FASTCALL,
     "skim_frame(data, hints) -> bool: whether data is one plain ASCII SSE frame holding "
     "none of hints (streamguard.sse._skim_frame, natively)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef kernel_module = {
    PyModuleDef_HEAD_INIT,
    "streamguard._kernel",
    "The native kernel of streamguard's per-frame path (see streamguard.sse).",
    0,
    kernel_methods,
};

PyMODINIT_FUNC
PyInit__kernel(void)
{
    return PyModule_Create(&kernel_module);
}
