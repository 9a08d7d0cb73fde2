/* streamguard._kernel: the native kernel of the per-frame path.

   Three functions, each the native form of a definition in Python that the pure build runs
   and tests/test_kernel.py holds it to, answer for answer. The first two exist because in
   mypyc-compiled Python each byte scan of those definitions is a C-API call whose
   overhead, not its scan, is the cost (issue 45: docs/performance.md, "The native
   kernel"); the third because mypyc cannot run a coroutine a step without raising and
   catching StopIteration, which costs more than the coroutine it saves.

   skim_frame(data, hints) (streamguard.sse._skim_frame): whether a chunk of body bytes is
   exactly one plain SSE frame that the every-stream tier may count without reading it. A
   chunk is skimmed when it is all ASCII (so valid UTF-8), has the shape of one fresh
   event as _single_frame reads it (`data: ...` or `event: ...` then `data: ...`, LF or
   CRLF endings, nothing else), and holds none of the hints (byte strings, as bytes.find
   looks for them).

   fit_holes(chunk, start, stop, pieces, kinds, padded)
   (streamguard.protocols._skeleton._fit_holes): whether the data of a framed chunk,
   chunk[start:stop], fits a learned skeleton, read as bytes where the definition decodes
   it and matches the text. Its answer: None when no skeleton can fit it (not UTF-8, or a
   line ending where a padding hole could take one), False when this one does not, else
   the texts of its value holes in their order (a tuple, empty for none).

   hand_over(send, message, landing) (streamguard._handover._hand_over): call the server's
   send with a body message and run the coroutine it returns at once, as far as it goes
   without waiting. A server's send takes the bytes without waiting unless the client reads
   slowly (uvicorn's and hypercorn's write to the transport and wait only when it is
   paused), so most body messages need no coroutine of streamguard's around them. Its
   answer: SENT when the coroutine ran to its end; a Handing when it stopped to wait; the
   awaitable itself, not started, when it is not a coroutine. An exception it raised is
   raised; when it is an OSError (ASGI 2.4: the client has gone), landing.landed(True) is
   called first.

   SENT: the one instance of Sent, the awaitable of a message the server already took.
   Awaiting it gives None at once; it has no state, so any number of tasks may await it. It
   is a coroutine by the abstract interface (send, throw, close), so that an app may pass
   what its send returned to asyncio.create_task as it could the server's coroutine.

   Handing: the hand-over of a coroutine that stopped to wait. Awaiting it hands the task
   what the coroutine yielded, then passes on what the task sends or throws until the
   coroutine ends, and tells the landing how: landed(False) when it returned,
   landed(True) when it raised OSError, nothing for any other exception. What the
   coroutine returns is dropped, as SENT drops it (ASGI's send returns None).

   Nothing here is kept between calls; only fit_holes' and hand_over's answers are
   allocated.
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
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
        /* (Its second byte first: in JSON text a hint's first byte, the "e" of "error",
           is often there, and a call to memcmp costs more than the byte.) */
        if ((m == 1 || at[1] == needle[1]) && memcmp(at, needle, (size_t)m) == 0) {
            return 1;
        }
    }
    return 0;
}

/* Whether every byte of data[0:n] is ASCII (below 0x80): eight bytes at a time. */
static int
is_ascii(const char *data, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t word;
        memcpy(&word, data + i, 8);
        if (word & UINT64_C(0x8080808080808080)) {
            return 0;
        }
    }
    for (; i < n; i++) {
        if ((unsigned char)data[i] & 0x80) {
            return 0;
        }
    }
    return 1;
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
    if (!is_ascii(data, n)) {
        Py_RETURN_FALSE;
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

/* -- fit_holes --------------------------------------------------------------------- */

/* The kinds of holes (streamguard.protocols._skeleton: _TEXT, _PADDING, _STRING_VALUE,
   _INTEGER_VALUE). */
enum { TEXT = 0, PADDING = 1, STRING_VALUE = 2, INTEGER_VALUE = 3 };
/* _skeleton.MAX_HOLES (tests/test_kernel.py holds the two equal). */
#define MAX_HOLES 16

static int
is_json_space(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static int
is_hex(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* Whether s[0:n] is UTF-8 as bytes.decode() takes it (strict: no overlong form, no
   surrogate, nothing past U+10FFFF). Eight ASCII bytes at a time. */
static int
is_utf8(const unsigned char *s, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    while (i < n) {
        if (i + 8 <= n) {
            uint64_t word;
            memcpy(&word, s + i, 8);
            if ((word & 0x8080808080808080ULL) == 0) {
                i += 8;
                continue;
            }
        }
        unsigned char c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        Py_ssize_t size;
        unsigned char low = 0x80, high = 0xBF; /* the second byte's range */
        if (c >= 0xC2 && c <= 0xDF) {
            size = 2;
        }
        else if (c >= 0xE0 && c <= 0xEF) {
            size = 3;
            if (c == 0xE0) {
                low = 0xA0;
            }
            else if (c == 0xED) {
                high = 0x9F;
            }
        }
        else if (c >= 0xF0 && c <= 0xF4) {
            size = 4;
            if (c == 0xF0) {
                low = 0x90;
            }
            else if (c == 0xF4) {
                high = 0x8F;
            }
        }
        else {
            return 0;
        }
        if (i + size > n || s[i + 1] < low || s[i + 1] > high) {
            return 0;
        }
        for (Py_ssize_t k = 2; k < size; k++) {
            if ((s[i + k] & 0xC0) != 0x80) {
                return 0;
            }
        }
        i += size;
    }
    return 1;
}

/* Where the JSON string at s[at] ends (past its closing quote), before cut; -1 when there
   is none the full parser would take: _skeleton._STRING's match, on UTF-8 bytes (a byte
   of a multi-byte character is never a quote, a backslash or a control character). */
static Py_ssize_t
string_end(const unsigned char *s, Py_ssize_t at, Py_ssize_t cut)
{
    if (at >= cut || s[at] != '"') {
        return -1;
    }
    Py_ssize_t i = at + 1;
    while (i < cut) {
        unsigned char c = s[i];
        if (c == '"') {
            return i + 1;
        }
        if (c < 0x20) {
            return -1;
        }
        if (c != '\\') {
            i++;
            continue;
        }
        if (i + 1 >= cut) {
            return -1;
        }
        unsigned char e = s[i + 1];
        if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r'
            || e == 't') {
            i += 2;
            continue;
        }
        if (e != 'u' || i + 6 > cut || !is_hex(s[i + 2]) || !is_hex(s[i + 3])
            || !is_hex(s[i + 4]) || !is_hex(s[i + 5])) {
            return -1;
        }
        unsigned char d0 = s[i + 2], d1 = s[i + 3];
        /* (d1 is a hex digit: from '8' on, it is one of 8, 9, a-f, A-F.) */
        if (!((d0 == 'd' || d0 == 'D') && d1 >= '8')) {
            i += 6; /* not a surrogate */
            continue;
        }
        /* A surrogate only as a high one then a low one (pydantic-core refuses a lone one). */
        if (!(d1 == '8' || d1 == '9' || d1 == 'a' || d1 == 'b' || d1 == 'A' || d1 == 'B')) {
            return -1;
        }
        if (i + 12 > cut || s[i + 6] != '\\' || s[i + 7] != 'u') {
            return -1;
        }
        unsigned char e0 = s[i + 8], e1 = s[i + 9];
        if (!(e0 == 'd' || e0 == 'D') || !((e1 >= 'c' && e1 <= 'f') || (e1 >= 'C' && e1 <= 'F'))
            || !is_hex(s[i + 10]) || !is_hex(s[i + 11])) {
            return -1;
        }
        i += 12;
    }
    return -1;
}

/* Where the plain integer at s[at] ends, before cut (_skeleton._integer_end): an optional
   minus, then 0 or at most 18 digits not led by 0; -1 when there is none. */
static Py_ssize_t
integer_end(const unsigned char *s, Py_ssize_t at, Py_ssize_t cut)
{
    Py_ssize_t end = at;
    if (end < cut && s[end] == '-') {
        end++;
    }
    if (end >= cut || s[end] < '0' || s[end] > '9') {
        return -1;
    }
    if (s[end] == '0') {
        return end + 1;
    }
    Py_ssize_t last = end + 18 < cut ? end + 18 : cut;
    end++;
    while (end < last && s[end] >= '0' && s[end] <= '9') {
        end++;
    }
    return end;
}

static PyObject *
fit_holes(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6) {
        PyErr_Format(PyExc_TypeError, "fit_holes() takes 6 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *chunk = args[0], *pieces = args[3], *kinds = args[4];
    Py_ssize_t start = PyLong_AsSsize_t(args[1]);
    Py_ssize_t stop = PyLong_AsSsize_t(args[2]);
    int padded = PyObject_IsTrue(args[5]);
    if ((start == -1 || stop == -1 || padded == -1) && PyErr_Occurred()) {
        return NULL;
    }
    if (!PyBytes_CheckExact(chunk) || !PyTuple_CheckExact(pieces) || !PyBytes_CheckExact(kinds)
        || PyTuple_GET_SIZE(pieces) != PyBytes_GET_SIZE(kinds) + 1
        || start < 0 || stop < start || stop > PyBytes_GET_SIZE(chunk)) {
        PyErr_SetString(PyExc_TypeError,
                        "fit_holes(): expected (bytes, start, stop, a tuple of bytes one "
                        "longer than kinds, bytes, bool) with 0 <= start <= stop <= len");
        return NULL;
    }
    Py_ssize_t count = PyTuple_GET_SIZE(pieces);
    for (Py_ssize_t i = 0; i < count; i++) {
        if (!PyBytes_CheckExact(PyTuple_GET_ITEM(pieces, i))) {
            PyErr_SetString(PyExc_TypeError, "fit_holes(): pieces must be bytes");
            return NULL;
        }
    }
    const unsigned char *s = (const unsigned char *)PyBytes_AS_STRING(chunk) + start;
    Py_ssize_t n = stop - start;
    if (!is_utf8(s, n)) {
        Py_RETURN_NONE; /* the definition's decode fails: the parser reports it */
    }
    if (padded && (memchr(s, '\n', (size_t)n) != NULL || memchr(s, '\r', (size_t)n) != NULL)) {
        Py_RETURN_NONE; /* more lines than one */
    }
    const unsigned char *kind = (const unsigned char *)PyBytes_AS_STRING(kinds);
    Py_ssize_t holes = PyBytes_GET_SIZE(kinds);
    Py_ssize_t first = PyBytes_GET_SIZE(PyTuple_GET_ITEM(pieces, 0));
    Py_ssize_t cut = n - PyBytes_GET_SIZE(PyTuple_GET_ITEM(pieces, count - 1));
    if (cut < first) {
        Py_RETURN_FALSE; /* the head and the tail overlap */
    }
    /* The value holes' spans, at most one per hole (a skeleton has at most MAX_HOLES). */
    Py_ssize_t spans[2 * MAX_HOLES];
    Py_ssize_t values = 0;
    if (holes > MAX_HOLES) {
        PyErr_SetString(PyExc_ValueError, "fit_holes(): more holes than MAX_HOLES");
        return NULL;
    }
    Py_ssize_t position = first;
    for (Py_ssize_t number = 0; number < holes; number++) {
        Py_ssize_t end;
        int last = number == holes - 1;
        if (kind[number] == PADDING) {
            end = position;
            while (end < cut && is_json_space(s[end])) {
                end++;
            }
            if (last) {
                if (end != cut) {
                    Py_RETURN_FALSE;
                }
                break;
            }
        }
        else {
            end = kind[number] == INTEGER_VALUE ? integer_end(s, position, cut)
                                                : string_end(s, position, cut);
            if (end < 0) {
                Py_RETURN_FALSE;
            }
        }
        if (kind[number] >= STRING_VALUE) {
            spans[2 * values] = position;
            spans[2 * values + 1] = end;
            values++;
        }
        if (last) {
            if (end != cut) {
                Py_RETURN_FALSE; /* the last hole reaches the last piece, and not into it */
            }
        }
        else {
            PyObject *piece = PyTuple_GET_ITEM(pieces, number + 1);
            Py_ssize_t size = PyBytes_GET_SIZE(piece);
            position = end + size;
            if (position > cut || memcmp(s + end, PyBytes_AS_STRING(piece), (size_t)size) != 0) {
                Py_RETURN_FALSE;
            }
        }
    }
    PyObject *texts = PyTuple_New(values);
    if (texts == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < values; i++) {
        PyObject *text = PyUnicode_DecodeUTF8((const char *)s + spans[2 * i],
                                              spans[2 * i + 1] - spans[2 * i], NULL);
        if (text == NULL) {
            Py_DECREF(texts);
            return NULL;
        }
        PyTuple_SET_ITEM(texts, i, text);
    }
    return texts;
}

/* -- hand_over and SENT ------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
} SentObject;

static PyObject *
sent_await(PyObject *self)
{
    return Py_NewRef(self);
}

static PySendResult
sent_am_send(PyObject *self, PyObject *arg, PyObject **result)
{
    *result = Py_NewRef(Py_None);
    return PYGEN_RETURN;
}

static PyObject *
sent_iternext(PyObject *self)
{
    return NULL; /* done, with no exception set: the value is None */
}

static PyObject *
sent_send(PyObject *self, PyObject *value)
{
    PyErr_SetNone(PyExc_StopIteration);
    return NULL;
}

/* throw(exception) or throw(type[, value[, traceback]]): the exception is raised, as a
   coroutine that has ended raises what is thrown into it. */
static PyObject *
sent_throw(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1 || nargs > 3) {
        PyErr_SetString(PyExc_TypeError, "throw expected 1 to 3 arguments");
        return NULL;
    }
    PyObject *thrown = args[0];
    if (PyExceptionInstance_Check(thrown)) {
        PyErr_SetObject((PyObject *)Py_TYPE(thrown), thrown);
    }
    else if (PyExceptionClass_Check(thrown)) {
        PyErr_SetObject(thrown, nargs > 1 ? args[1] : NULL);
    }
    else {
        PyErr_SetString(PyExc_TypeError,
                        "exceptions must be classes or instances deriving from BaseException");
    }
    return NULL;
}

static PyObject *
sent_close(PyObject *self, PyObject *unused)
{
    Py_RETURN_NONE;
}

static PyMethodDef sent_methods[] = {
    {"send", (PyCFunction)sent_send, METH_O, "send(value): raises StopIteration (done)."},
    {"throw", (PyCFunction)(void (*)(void))sent_throw, METH_FASTCALL,
     "throw(exception): raises it."},
    {"close", (PyCFunction)sent_close, METH_NOARGS, "close(): nothing to close."},
    {NULL, NULL, 0, NULL},
};

static PyAsyncMethods sent_as_async = {
    .am_await = sent_await,
    .am_send = sent_am_send,
};

static PyTypeObject SentType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "streamguard._kernel.Sent",
    .tp_basicsize = sizeof(SentObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The awaitable of a body message the server already took: awaiting it "
              "gives None at once.",
    .tp_as_async = &sent_as_async,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = sent_iternext,
    .tp_methods = sent_methods,
};

static PyObject *SENT = NULL;

/* Interned method names, made at import. */
static PyObject *str_landed = NULL;
static PyObject *str_throw = NULL;
static PyObject *str_close = NULL;

/* Tell `landing` how a hand-over ended: landing.landed(lost). An exception being raised
   (the OSError that lost the message) is kept and raised again after the call; one the call
   raises replaces it. */
static int
tell(PyObject *landing, int lost)
{
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyObject *args[2] = {landing, lost ? Py_True : Py_False};
    PyObject *answer = PyObject_VectorcallMethod(
        str_landed, args, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    if (answer == NULL) {
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(traceback);
        return -1;
    }
    Py_DECREF(answer);
    PyErr_Restore(type, value, traceback);
    return 0;
}

/* Handing: a hand-over whose coroutine stopped to wait, for the task that awaits it. */
typedef struct {
    PyObject_HEAD
    PyObject *coroutine; /* the server's send's; NULL once it ended */
    PyObject *yielded;   /* what it yielded in hand_over, still to go to the task, or NULL */
    PyObject *landing;   /* told once how it ended (tell); NULL once told, or not to be */
} HandingObject;

static PyTypeObject HandingType;

/* What a step of the coroutine (PyIter_Send or throw) says about the hand-over: it ended
   (the landing is told), raised OSError (the landing is told the message was lost), raised
   anything else (nothing to tell), or waits again. */
static int
after_step(HandingObject *self, int ended, int raised)
{
    if (!ended && !raised) {
        return 0;
    }
    Py_CLEAR(self->coroutine);
    PyObject *landing = self->landing;
    self->landing = NULL;
    int answer = 0;
    if (landing != NULL) {
        if (ended) {
            answer = tell(landing, 0);
        }
        else if (PyErr_ExceptionMatches(PyExc_OSError)) {
            answer = tell(landing, 1);
        }
        Py_DECREF(landing);
    }
    return answer;
}

static PySendResult
handing_am_send(PyObject *op, PyObject *arg, PyObject **result)
{
    HandingObject *self = (HandingObject *)op;
    if (self->yielded != NULL) {
        *result = self->yielded; /* (the reference goes with it) */
        self->yielded = NULL;
        return PYGEN_NEXT;
    }
    if (self->coroutine == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "cannot reuse already awaited hand-over");
        return PYGEN_ERROR;
    }
    PySendResult status = PyIter_Send(self->coroutine, arg, result);
    if (status == PYGEN_NEXT) {
        return PYGEN_NEXT;
    }
    if (status == PYGEN_RETURN) {
        Py_SETREF(*result, Py_NewRef(Py_None)); /* (as SENT: ASGI's send returns None) */
    }
    if (after_step(self, status == PYGEN_RETURN, status == PYGEN_ERROR) < 0) {
        if (status == PYGEN_RETURN) {
            Py_CLEAR(*result);
        }
        return PYGEN_ERROR;
    }
    return status;
}

static PyObject *
handing_await(PyObject *self)
{
    return Py_NewRef(self);
}

static PyObject *
handing_iternext(PyObject *op)
{
    PyObject *result = NULL;
    PySendResult status = handing_am_send(op, Py_None, &result);
    if (status == PYGEN_NEXT) {
        return result;
    }
    if (status == PYGEN_RETURN) {
        Py_DECREF(result); /* None: the end, with no exception set */
    }
    return NULL;
}

static PyObject *
handing_send(PyObject *op, PyObject *value)
{
    PyObject *result = NULL;
    PySendResult status = handing_am_send(op, value, &result);
    if (status == PYGEN_NEXT) {
        return result;
    }
    if (status == PYGEN_RETURN) {
        Py_DECREF(result);
        PyErr_SetNone(PyExc_StopIteration);
    }
    return NULL;
}

/* throw(...): into the coroutine, as an await of it passes a throw on. */
static PyObject *
handing_throw(PyObject *op, PyObject *const *args, Py_ssize_t nargs)
{
    HandingObject *self = (HandingObject *)op;
    if (nargs < 1 || nargs > 3) {
        PyErr_SetString(PyExc_TypeError, "throw expected 1 to 3 arguments");
        return NULL;
    }
    Py_CLEAR(self->yielded);
    if (self->coroutine == NULL) {
        Py_CLEAR(self->landing);
        return sent_throw(op, args, nargs);
    }
    PyObject *throw = PyObject_GetAttr(self->coroutine, str_throw);
    if (throw == NULL) {
        return NULL;
    }
    PyObject *result = PyObject_Vectorcall(throw, args, (size_t)nargs, NULL);
    Py_DECREF(throw);
    if (result != NULL) {
        return result; /* it waits again */
    }
    int ended = PyErr_ExceptionMatches(PyExc_StopIteration);
    if (after_step(self, ended, !ended) < 0) {
        return NULL;
    }
    if (ended) {
        PyErr_Clear();
        PyErr_SetNone(PyExc_StopIteration); /* (None, as SENT) */
    }
    return NULL;
}

static PyObject *
handing_close(PyObject *op, PyObject *unused)
{
    HandingObject *self = (HandingObject *)op;
    Py_CLEAR(self->yielded);
    Py_CLEAR(self->landing);
    PyObject *coroutine = self->coroutine;
    if (coroutine == NULL) {
        Py_RETURN_NONE;
    }
    self->coroutine = NULL;
    PyObject *answer = PyObject_CallMethodNoArgs(coroutine, str_close);
    Py_DECREF(coroutine);
    return answer;
}

static int
handing_traverse(PyObject *op, visitproc visit, void *arg)
{
    HandingObject *self = (HandingObject *)op;
    Py_VISIT(self->coroutine);
    Py_VISIT(self->yielded);
    Py_VISIT(self->landing);
    return 0;
}

static int
handing_clear(PyObject *op)
{
    HandingObject *self = (HandingObject *)op;
    Py_CLEAR(self->coroutine);
    Py_CLEAR(self->yielded);
    Py_CLEAR(self->landing);
    return 0;
}

static void
handing_dealloc(PyObject *op)
{
    PyObject_GC_UnTrack(op);
    handing_clear(op);
    PyObject_GC_Del(op);
}

static PyMethodDef handing_methods[] = {
    {"send", (PyCFunction)handing_send, METH_O, "send(value): into the coroutine."},
    {"throw", (PyCFunction)(void (*)(void))handing_throw, METH_FASTCALL,
     "throw(exception): into the coroutine."},
    {"close", (PyCFunction)handing_close, METH_NOARGS, "close(): closes the coroutine."},
    {NULL, NULL, 0, NULL},
};

static PyAsyncMethods handing_as_async = {
    .am_await = handing_await,
    .am_send = handing_am_send,
};

static PyTypeObject HandingType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "streamguard._kernel.Handing",
    .tp_basicsize = sizeof(HandingObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A body message's hand-over whose coroutine stopped to wait: awaiting it "
              "drives the coroutine to its end and tells the landing how it ended.",
    .tp_as_async = &handing_as_async,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = handing_iternext,
    .tp_methods = handing_methods,
    .tp_traverse = handing_traverse,
    .tp_clear = handing_clear,
    .tp_dealloc = handing_dealloc,
};

static PyObject *
hand_over(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "hand_over expected 3 arguments");
        return NULL;
    }
    PyObject *landing = args[2];
    PyObject *awaitable = PyObject_CallOneArg(args[0], args[1]);
    if (awaitable == NULL) {
        goto raised;
    }
    if (!PyCoro_CheckExact(awaitable)) {
        return awaitable; /* not started: the caller awaits it */
    }
    PyObject *value = NULL;
    PySendResult status = PyIter_Send(awaitable, Py_None, &value);
    if (status == PYGEN_RETURN) {
        Py_DECREF(awaitable);
        Py_DECREF(value);
        return Py_NewRef(SENT);
    }
    if (status == PYGEN_NEXT) {
        HandingObject *handing = PyObject_GC_New(HandingObject, &HandingType);
        if (handing == NULL) {
            Py_DECREF(awaitable);
            Py_DECREF(value);
            return NULL;
        }
        handing->coroutine = awaitable;
        handing->yielded = value;
        handing->landing = Py_NewRef(landing);
        PyObject_GC_Track((PyObject *)handing);
        return (PyObject *)handing;
    }
    Py_DECREF(awaitable);
raised:
    if (PyErr_ExceptionMatches(PyExc_OSError)) {
        tell(landing, 1);
    }
    return NULL;
}

static PyMethodDef kernel_methods[] = {
    {"skim_frame", (PyCFunction)(void (*)(void))skim_frame, METH_FASTCALL,
     "skim_frame(data, hints) -> bool: whether data is one plain ASCII SSE frame holding "
     "none of hints (streamguard.sse._skim_frame, natively)."},
    {"fit_holes", (PyCFunction)(void (*)(void))fit_holes, METH_FASTCALL,
     "fit_holes(chunk, start, stop, pieces, kinds, padded) -> tuple | bool | None: the "
     "texts of the value holes of the skeleton chunk[start:stop] fits, False when it does "
     "not, None when none can (streamguard.protocols._skeleton._fit_holes, natively)."},
    {"hand_over", (PyCFunction)(void (*)(void))hand_over, METH_FASTCALL,
     "hand_over(send, message, landing) -> SENT | Handing | awaitable: send(message), run "
     "as far as it goes without waiting (streamguard._handover._hand_over, natively)."},
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
    if (PyType_Ready(&SentType) < 0 || PyType_Ready(&HandingType) < 0) {
        return NULL;
    }
    if (str_landed == NULL) {
        str_landed = PyUnicode_InternFromString("landed");
        str_throw = PyUnicode_InternFromString("throw");
        str_close = PyUnicode_InternFromString("close");
        if (str_landed == NULL || str_throw == NULL || str_close == NULL) {
            return NULL;
        }
    }
    PyObject *module = PyModule_Create(&kernel_module);
    if (module == NULL) {
        return NULL;
    }
    if (SENT == NULL) {
        SENT = PyType_GenericNew(&SentType, NULL, NULL);
        if (SENT == NULL) {
            Py_DECREF(module);
            return NULL;
        }
    }
    if (PyModule_AddObjectRef(module, "Sent", (PyObject *)&SentType) < 0
        || PyModule_AddObjectRef(module, "Handing", (PyObject *)&HandingType) < 0
        || PyModule_AddObjectRef(module, "SENT", SENT) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
