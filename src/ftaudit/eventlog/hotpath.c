/* The writer's hot path in C: checking a hot event's field values as its model would and
 * buffering them (EventWriter.log_fields), and laying id runs out as Arrow's buffers (the
 * flush's conversion).
 *
 * Both hold the GIL, so whatever they cost the training thread waits for: in Python they
 * were most of the CPU a durable event costs (benchmarks/results/eventlog_bench.md). What
 * `add` accepts is exactly what ftaudit.eventlog.hot documents and
 * tests/eventlog/test_hotpath.py's reference checks accept; anything else is declined
 * (False, nothing appended) and takes the model's path, which raises the model's own
 * error or converts the values as `log` would have.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* ftaudit.eventlog.intruns.IntRuns, read when the module is imported */
static PyTypeObject *intruns_type = NULL;
/* set by configure(): the shared key sequences and their cap */
static PyObject *key_sequences = NULL;
static Py_ssize_t max_key_sequences = 0;
static PyObject *str_starts = NULL;
static PyObject *str_lengths = NULL;

enum { SNAPSHOT = 0, GRADIENT = 1, CLEARED = 2, ALLOCATED = 3, METRIC = 4, APPLIED = 5 };

/* an exact int (bool is not), >= 0 */
static int
natural(PyObject *v)
{
    if (!PyLong_CheckExact(v)) {
        return 0;
    }
    return _PyLong_Sign(v) >= 0;
}

static int
is_runs(PyObject *v)
{
    return Py_TYPE(v) == intruns_type;
}

/* the runs' stored list `name` (its __dict__ entry, as the model would read it) */
static PyObject *
runs_list(PyObject *runs, PyObject *name)
{
    PyObject **dictptr = _PyObject_GetDictPtr(runs);
    if (dictptr == NULL || *dictptr == NULL) {
        return NULL;
    }
    PyObject *list = PyDict_GetItemWithError(*dictptr, name); /* borrowed */
    if (list == NULL || !PyList_CheckExact(list)) {
        return NULL;
    }
    return list;
}

/* sum(runs.lengths) == expected, with every length an exact int (as the model's sum) */
static int
runs_hold(PyObject *runs, PyObject *expected)
{
    PyObject *lengths = runs_list(runs, str_lengths);
    if (lengths == NULL) {
        return 0;
    }
    int overflow = 0;
    long long want = PyLong_AsLongLongAndOverflow(expected, &overflow);
    if (overflow || (want == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    long long total = 0;
    Py_ssize_t n = PyList_GET_SIZE(lengths);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyList_GET_ITEM(lengths, i);
        if (!PyLong_CheckExact(item)) {
            return 0;
        }
        long long length = PyLong_AsLongLongAndOverflow(item, &overflow);
        if (overflow || (length == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            return 0;
        }
        if (__builtin_add_overflow(total, length, &total)) {
            return 0;
        }
    }
    return total == want;
}

/* The keys of a str-keyed dict as the one shared tuple of that key sequence, and its
 * values as a tuple when each is of `kind` (exactly); -1 on error, 0 declined, 1 done. */
static int
str_map(PyObject *value, PyTypeObject *kind, PyObject **keys_out, PyObject **items_out)
{
    if (!PyDict_CheckExact(value)) {
        return 0;
    }
    Py_ssize_t n = PyDict_GET_SIZE(value);
    PyObject *keys = PyTuple_New(n);
    PyObject *items = PyTuple_New(n);
    if (keys == NULL || items == NULL) {
        Py_XDECREF(keys);
        Py_XDECREF(items);
        return -1;
    }
    Py_ssize_t pos = 0, i = 0;
    PyObject *k, *v;
    int all_str = 1, all_kind = 1;
    while (PyDict_Next(value, &pos, &k, &v)) {
        all_str &= PyUnicode_CheckExact(k);
        all_kind &= Py_TYPE(v) == kind;
        Py_INCREF(k);
        PyTuple_SET_ITEM(keys, i, k);
        Py_INCREF(v);
        PyTuple_SET_ITEM(items, i, v);
        i++;
    }
    if (!all_kind || !all_str) { /* declined before any key's own __hash__ could run */
        Py_DECREF(keys);
        Py_DECREF(items);
        return 0;
    }
    PyObject *known = PyDict_GetItemWithError(key_sequences, keys); /* borrowed */
    if (known != NULL) {
        Py_INCREF(known);
        Py_DECREF(keys);
        keys = known;
    }
    else if (PyErr_Occurred()) {
        Py_DECREF(keys);
        Py_DECREF(items);
        return -1;
    }
    else if (PyDict_GET_SIZE(key_sequences) < max_key_sequences
             && PyDict_SetItem(key_sequences, keys, keys) < 0) {
        Py_DECREF(keys);
        Py_DECREF(items);
        return -1;
    }
    *keys_out = keys;
    *items_out = items;
    return 1;
}

static int
append_all(PyObject *out, PyObject *const *values, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        if (PyList_Append(out, values[i]) < 0) {
            return -1;
        }
    }
    return 0;
}

/* the checks of one kind of hot event: 1 accepted, 0 declined, -1 an error */
static int
accepted(long kind, PyObject *const *v, Py_ssize_t n)
{
    switch (kind) {
    case SNAPSHOT: /* cell, instance, nonzero_ids, stale_ids */
        return n == 4 && natural(v[0]) && PyUnicode_CheckExact(v[1]) && is_runs(v[2])
               && is_runs(v[3]);
    case GRADIENT: /* cell, rank, instance, nonzero_ids */
        return n == 4 && natural(v[0]) && natural(v[1]) && PyUnicode_CheckExact(v[2])
               && is_runs(v[3]);
    case CLEARED: /* cell, stale_ids */
        return n == 2 && natural(v[0]) && is_runs(v[1]);
    case ALLOCATED: /* num_ids, counter_after, witness_ids, sample_indices, stale_ids */
        return n == 5 && natural(v[0]) && natural(v[1]) && is_runs(v[2]) && is_runs(v[3])
               && is_runs(v[4]) && runs_hold(v[2], v[0]) && runs_hold(v[3], v[0]);
    case METRIC: /* values: dict[str, float] */
        return n == 1;
    case APPLIED: /* cell, rank, counters: dict[str, int] */
        return n == 3 && natural(v[0]) && natural(v[1]);
    default:
        PyErr_Format(PyExc_ValueError, "no hot event kind %ld", kind);
        return -1;
    }
}

/* the row's payload values: a map (the last value of METRIC and APPLIED) as its keys and
 * its values; 1 appended, 0 declined, -1 an error */
static int
append_payload(long kind, PyObject *const *v, Py_ssize_t n, PyObject *out)
{
    if (kind != METRIC && kind != APPLIED) {
        return append_all(out, v, n) < 0 ? -1 : 1;
    }
    PyObject *keys = NULL, *items = NULL;
    /* The writer calls this holding its buffer lock, and a collection set off by the two
     * tuples could run a finalizer that logs to the same writer and waits on that lock
     * forever: the collection waits for an allocation after the lock is released. */
    int collecting = PyGC_Disable();
    int found = str_map(v[n - 1], kind == METRIC ? &PyFloat_Type : &PyLong_Type, &keys, &items);
    if (collecting) {
        PyGC_Enable();
    }
    if (found <= 0) {
        return found;
    }
    int failed = append_all(out, v, n - 1) < 0 || PyList_Append(out, keys) < 0
                 || PyList_Append(out, items) < 0;
    Py_DECREF(keys);
    Py_DECREF(items);
    return failed ? -1 : 1;
}

PyDoc_STRVAR(add_doc,
"add(kind, values, out, seq, ts_ns, context) -> bool\n\n"
"Append one row of a hot event to ``out``: its payload ``values`` as the writer stores\n"
"them (a map as its keys and its values), then ``seq``, ``ts_ns`` and ``context``. False,\n"
"with ``out`` unchanged, when the values are not what the event's model would keep as\n"
"they are (see ftaudit.eventlog.hot).");

static PyObject *
add(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6 || !PyLong_CheckExact(args[0]) || !PyTuple_CheckExact(args[1])
        || !PyList_CheckExact(args[2])) {
        PyErr_SetString(PyExc_TypeError,
                        "add(kind: int, values: tuple, out: list, seq, ts_ns, context)");
        return NULL;
    }
    if (key_sequences == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "ftaudit.eventlog.hotpath is not configured");
        return NULL;
    }
    long kind = PyLong_AsLong(args[0]);
    PyObject *const *v = &PyTuple_GET_ITEM(args[1], 0);
    Py_ssize_t n = PyTuple_GET_SIZE(args[1]);
    PyObject *out = args[2];
    int ok = accepted(kind, v, n);
    if (ok <= 0) {
        if (ok < 0 || PyErr_Occurred()) {
            return NULL;
        }
        Py_RETURN_FALSE;
    }
    Py_ssize_t before = PyList_GET_SIZE(out);
    ok = append_payload(kind, v, n, out);
    if (ok == 1 && append_all(out, args + 3, 3) < 0) {
        ok = -1;
    }
    if (ok < 0) { /* no half row: the flush reads the list row by row */
#if PY_VERSION_HEX >= 0x030C0000
        PyObject *error = PyErr_GetRaisedException();
        PyList_SetSlice(out, before, PY_SSIZE_T_MAX, NULL);
        PyErr_SetRaisedException(error);
#else
        PyObject *type, *value, *traceback;
        PyErr_Fetch(&type, &value, &traceback);
        PyList_SetSlice(out, before, PY_SSIZE_T_MAX, NULL);
        PyErr_Restore(type, value, traceback);
#endif
        return NULL;
    }
    return PyBool_FromLong(ok);
}

/* a growable int64 buffer */
typedef struct {
    int64_t *data;
    Py_ssize_t size, capacity;
} Int64s;

static int
push(Int64s *b, int64_t value)
{
    if (b->size == b->capacity) {
        Py_ssize_t capacity = b->capacity ? 2 * b->capacity : 1024;
        int64_t *data = PyMem_Realloc(b->data, capacity * sizeof(int64_t));
        if (data == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        b->data = data;
        b->capacity = capacity;
    }
    b->data[b->size++] = value;
    return 0;
}

/* the list's ints into `values`, its end into `offsets`; 0 when one is no int64 */
static int
flatten(PyObject *list, Int64s *values, Int64s *offsets)
{
    Py_ssize_t n = PyList_GET_SIZE(list);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyList_GET_ITEM(list, i);
        if (!PyLong_CheckExact(item)) {
            return 0;
        }
        int overflow = 0;
        long long x = PyLong_AsLongLongAndOverflow(item, &overflow);
        if (overflow) {
            return 0;
        }
        if (x == -1 && PyErr_Occurred()) {
            return -1;
        }
        if (push(values, x) < 0) {
            return -1;
        }
    }
    return push(offsets, values->size) < 0 ? -1 : 1;
}

static PyObject *
as_bytes(Int64s *b)
{
    return PyBytes_FromStringAndSize((const char *)b->data, b->size * sizeof(int64_t));
}

/* offsets as Arrow's list type holds them (int32; the caller checked they fit) */
static PyObject *
as_offsets(Int64s *b)
{
    PyObject *out = PyBytes_FromStringAndSize(NULL, b->size * sizeof(int32_t));
    if (out != NULL) {
        int32_t *to = (int32_t *)PyBytes_AS_STRING(out);
        for (Py_ssize_t i = 0; i < b->size; i++) {
            to[i] = (int32_t)b->data[i];
        }
    }
    return out;
}

PyDoc_STRVAR(runs_buffers_doc,
"runs_buffers(runs) -> (starts_offsets, starts, lengths_offsets, lengths) | None\n\n"
"The id runs of a list of IntRuns as the buffers of two Arrow lists of int64: each\n"
"list's int32 offsets (one more than there are runs objects) and its values. None when\n"
"one is no IntRuns, holds a value that is no int64, or the values outgrow int32 offsets\n"
"(Arrow's own converter then speaks).");

static PyObject *
runs_buffers(PyObject *self, PyObject *runs)
{
    if (!PyList_CheckExact(runs)) {
        PyErr_SetString(PyExc_TypeError, "runs_buffers(runs: list)");
        return NULL;
    }
    Int64s starts = {0}, lengths = {0}, starts_at = {0}, lengths_at = {0};
    PyObject *result = NULL;
    int ok = push(&starts_at, 0) == 0 && push(&lengths_at, 0) == 0 ? 1 : -1;
    Py_ssize_t n = PyList_GET_SIZE(runs);
    for (Py_ssize_t i = 0; i < n && ok == 1; i++) {
        PyObject *item = PyList_GET_ITEM(runs, i);
        if (!is_runs(item)) {
            ok = 0;
            break;
        }
        PyObject *s = runs_list(item, str_starts);
        PyObject *l = s == NULL ? NULL : runs_list(item, str_lengths);
        if (l == NULL) {
            ok = PyErr_Occurred() ? -1 : 0;
            break;
        }
        ok = flatten(s, &starts, &starts_at);
        if (ok == 1) {
            ok = flatten(l, &lengths, &lengths_at);
        }
    }
    if (ok == 1 && (starts.size > INT32_MAX || lengths.size > INT32_MAX)) {
        ok = 0;
    }
    if (ok == 1) {
        result = Py_BuildValue("(NNNN)", as_offsets(&starts_at), as_bytes(&starts),
                               as_offsets(&lengths_at), as_bytes(&lengths));
    }
    else if (ok == 0) {
        PyErr_Clear();
        result = Py_NewRef(Py_None);
    }
    PyMem_Free(starts.data);
    PyMem_Free(lengths.data);
    PyMem_Free(starts_at.data);
    PyMem_Free(lengths_at.data);
    return result;
}

PyDoc_STRVAR(configure_doc,
"configure(key_sequences, max_key_sequences)\n\n"
"Share the key sequences of maps through ``key_sequences`` (a dict, each sequence its\n"
"own key and value), keeping at most ``max_key_sequences`` of them.");

static PyObject *
configure(PyObject *self, PyObject *args)
{
    PyObject *sequences;
    Py_ssize_t cap;
    if (!PyArg_ParseTuple(args, "O!n", &PyDict_Type, &sequences, &cap)) {
        return NULL;
    }
    Py_XSETREF(key_sequences, Py_NewRef(sequences));
    max_key_sequences = cap;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"add", (PyCFunction)(void (*)(void))add, METH_FASTCALL, add_doc},
    {"runs_buffers", runs_buffers, METH_O, runs_buffers_doc},
    {"configure", configure, METH_VARARGS, configure_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "hotpath",
    .m_doc = "The writer's hot path in C (see ftaudit.eventlog.hot and arrow_schema).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit_hotpath(void)
{
    str_starts = PyUnicode_InternFromString("starts");
    str_lengths = PyUnicode_InternFromString("lengths");
    if (str_starts == NULL || str_lengths == NULL) {
        return NULL;
    }
    PyObject *intruns = PyImport_ImportModule("ftaudit.eventlog.intruns");
    if (intruns == NULL) {
        return NULL;
    }
    PyObject *cls = PyObject_GetAttrString(intruns, "IntRuns");
    Py_DECREF(intruns);
    if (cls == NULL) {
        return NULL;
    }
    if (!PyType_Check(cls)) {
        Py_DECREF(cls);
        PyErr_SetString(PyExc_TypeError, "ftaudit.eventlog.intruns.IntRuns is no class");
        return NULL;
    }
    intruns_type = (PyTypeObject *)cls;
    return PyModule_Create(&module);
}
