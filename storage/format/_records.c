/* mqstore.storage.format._records: the hot per-record codecs in C.
 *
 * Each function here has a Python reference that stays the definition of its behaviour:
 *
 *   java_string_hash   storage/format/java_hash.py   java_string_hash_reference
 *   check_record       storage/format/record.py      check_record_reference
 *   decode_properties  storage/format/properties.py  decode_properties_reference
 *   prepare            storage/format/encoder.py     MessageEncoder.prepare_reference
 *   write_record       storage/format/encoder.py     write_record_reference
 *   pack_batch         storage/format/encoder.py     pack_batch_reference
 *   scan_records       storage/format/dispatch_scan.py  scan_records_reference
 *   put_index_keys     storage/files/index_put.py    put_index_keys_reference
 *   split_batch        storage/format/batch_body.py  split_batch_reference
 *
 * storage/format/compiled.py binds each C function to its reference once, at import:
 * `bind` and `bind_check_record` remember the reference (and, for check_record, the record
 * layouts and result types record.py derives from its field table) and return a built-in
 * function whose __module__ is the reference's, so it pickles by name as the Python
 * function did.  The put path's twins are bound to a settings object instead (the function's
 * `self`: `bind_record_writer` for the writers, `bind_prepare` once per encoder), so no
 * binding replaces another; they are not shipped anywhere, so they need not pickle.  The C code answers the arguments the store passes (exact ints,
 * bytes / bytearray / memoryview of unsigned bytes / mmap.mmap); any other argument (a
 * subclass, a keyword given positionally, a position outside the buffer) is handed to the
 * reference unchanged, so every result and every exception is the reference's own.
 *
 * The record's byte layout (big-endian; docs/on-disk-format.md) is not written down here:
 * record.py passes every layout's field offsets, and `bind_check_record` checks that the
 * field kinds are the ones this file decodes (RECORD_FIELD_KINDS).
 */
#include "_extension_module.h"  /* Python.h, mmap_type, create_extension_module */
#include <structmember.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>
#include <zlib.h>

/* Bumped whenever the Python side's expectations of this module change; compiled.py
 * refuses a build of another version (a stale .so). */
#define ABI_VERSION 5

/* The RecordHead items, in order, by how each is stored: i = int32, q = int64,
 * h = host (address of 4 or 16 bytes, then an int32 port).  BODYLEN is the last. */
static const char RECORD_FIELD_KINDS[] = "iiiiiqqiqhqhiqi";
#define FIELD_COUNT 15
#define F_TOTAL_SIZE 0
#define F_MAGIC 1
#define F_BODY_CRC 2
#define F_PHYSICAL_OFFSET 6
#define F_SYSFLAG 7
#define F_BORN_HOST 9
#define F_BODY_SIZE 14
#define LAYOUT_COUNT 8
#define RESULT_SLOT_COUNT 5
#define MESSAGE_BYTES 160

static inline int32_t
read_int32(const unsigned char *p)
{
    return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8
                     | (uint32_t)p[3]);
}

static inline int64_t
read_int64(const unsigned char *p)
{
    return (int64_t)((uint64_t)(uint32_t)read_int32(p) << 32 | (uint32_t)read_int32(p + 4));
}

/* The references, remembered by `bind` (the functions' `self` is this module). */
static PyObject *java_string_hash_reference;
static PyObject *decode_properties_reference;

static inline Py_ssize_t
read_unsigned(const unsigned char *p, Py_ssize_t width_bytes)
{
    return width_bytes == 1 ? (Py_ssize_t)p[0] : (Py_ssize_t)((unsigned)p[0] << 8 | p[1]);
}

/* Call a remembered reference, held through the call. */
static PyObject *
call_reference(PyObject *reference, PyObject *argument)
{
    Py_INCREF(reference);
    PyObject *result = PyObject_CallOneArg(reference, argument);
    Py_DECREF(reference);
    return result;
}

/* ---------------------------------------------------------------- java_string_hash */

/* A str holding a surrogate code point: the reference's utf-16-be encode raises; raise
 * the very same error by asking the same codec. */
static PyObject *
surrogate_error(PyObject *text)
{
    PyObject *encoded = PyUnicode_AsEncodedString(text, "utf-16-be", "strict");
    if (encoded != NULL) {
        Py_DECREF(encoded);
        PyErr_SetString(PyExc_SystemError, "java_string_hash: surrogate encoded");
    }
    return NULL;
}

/* `text.hashCode()` into *value: 0, or 1 for a str holding a surrogate code point (which
 * the reference's utf-16-be encode refuses; no exception is set), or -1 with one set. */
static int
java_hash_of(PyObject *text, uint32_t *value)
{
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(text) < 0) {
        return -1;
    }
#endif
    Py_ssize_t length = PyUnicode_GET_LENGTH(text);
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    uint32_t hash = 0;
    if (kind == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *chars = data;
        for (Py_ssize_t i = 0; i < length; i++) {
            hash = 31u * hash + chars[i];
        }
    }
    else if (kind == PyUnicode_2BYTE_KIND) {
        const Py_UCS2 *chars = data;
        for (Py_ssize_t i = 0; i < length; i++) {
            if (chars[i] >= 0xD800 && chars[i] <= 0xDFFF) {
                return 1;
            }
            hash = 31u * hash + chars[i];
        }
    }
    else {
        const Py_UCS4 *chars = data;
        for (Py_ssize_t i = 0; i < length; i++) {
            Py_UCS4 c = chars[i];
            if (c >= 0xD800 && c <= 0xDFFF) {
                return 1;
            }
            if (c > 0xFFFF) {  /* a surrogate pair: two UTF-16 code units */
                hash = 31u * hash + (0xD800u + ((c - 0x10000u) >> 10));
                hash = 31u * hash + (0xDC00u + ((c - 0x10000u) & 0x3FFu));
            }
            else {
                hash = 31u * hash + c;
            }
        }
    }
    *value = hash;
    return 0;
}

static PyObject *
java_string_hash(PyObject *module, PyObject *text)
{
    if (!PyUnicode_CheckExact(text)) {
        return call_reference(java_string_hash_reference, text);
    }
    uint32_t value;
    int outcome = java_hash_of(text, &value);
    if (outcome != 0) {
        return outcome > 0 ? surrogate_error(text) : NULL;
    }
    return PyLong_FromLong((long)(int32_t)value);
}

/* ---------------------------------------------------------------- decode_properties */

/* A memoryview whose slices and bytes() are its raw bytes: one dimension of unsigned
 * bytes (format "B").  Call after PyObject_GetBuffer succeeded on it (not released). */
static int
is_plain_memoryview(PyObject *object)
{
    const Py_buffer *own = PyMemoryView_GET_BUFFER(object);
    return own->ndim == 1 && own->itemsize == 1
           && (own->format == NULL || strcmp(own->format, "B") == 0);
}

/* Properties are `name 0x01 value 0x02 ...` in UTF-8.  Splitting the bytes on 0x02 and
 * 0x01 equals splitting the decoded text (errors="replace"): both are ASCII, which UTF-8
 * never uses inside a sequence and the decoder never folds into a replaced one.  A piece
 * counts when 0x01 sits strictly inside it (so it is at least 3 characters long). */
static int
decode_pieces(PyObject *properties, const char *data, Py_ssize_t length)
{
    const char *cursor = data;
    const char *end = data + length;
    for (;;) {
        const char *separator = memchr(cursor, 0x02, (size_t)(end - cursor));
        const char *piece_end = separator != NULL ? separator : end;
        Py_ssize_t piece_bytes = piece_end - cursor;
        const char *split = piece_bytes >= 3 ? memchr(cursor, 0x01, (size_t)piece_bytes) : NULL;
        if (split != NULL && split > cursor && split < piece_end - 1) {
            PyObject *name = PyUnicode_DecodeUTF8(cursor, split - cursor, "replace");
            if (name == NULL) {
                return -1;
            }
            PyObject *value = PyUnicode_DecodeUTF8(split + 1, piece_end - split - 1, "replace");
            if (value == NULL) {
                Py_DECREF(name);
                return -1;
            }
            int failed = PyDict_SetItem(properties, name, value);
            Py_DECREF(name);
            Py_DECREF(value);
            if (failed) {
                return -1;
            }
        }
        if (separator == NULL) {
            return 0;
        }
        cursor = separator + 1;
    }
}

static PyObject *
decode_properties(PyObject *module, PyObject *encoded)
{
    PyObject *reference = decode_properties_reference;
    PyObject *properties;
    if (PyBytes_CheckExact(encoded)) {
        properties = PyDict_New();
        if (properties != NULL
            && decode_pieces(properties, PyBytes_AS_STRING(encoded), PyBytes_GET_SIZE(encoded))) {
            Py_CLEAR(properties);
        }
        return properties;
    }
    if (!PyByteArray_CheckExact(encoded) && !PyMemoryView_Check(encoded)) {
        return call_reference(reference, encoded);
    }
    Py_buffer view;
    if (PyObject_GetBuffer(encoded, &view, PyBUF_SIMPLE) < 0) {
        PyErr_Clear();
        return call_reference(reference, encoded);
    }
    if (PyMemoryView_Check(encoded) && !is_plain_memoryview(encoded)) {
        PyBuffer_Release(&view);
        return call_reference(reference, encoded);
    }
    properties = PyDict_New();
    if (properties != NULL && decode_pieces(properties, view.buf, view.len)) {
        Py_CLEAR(properties);
    }
    PyBuffer_Release(&view);
    return properties;
}

/* ---------------------------------------------------------------- check_record */

typedef struct {
    PyObject *layout;  /* the record.RecordLayout returned in CheckResult.layout */
    Py_ssize_t offsets[FIELD_COUNT];  /* byte offset of each RecordHead item */
    Py_ssize_t born_address_bytes;
    Py_ssize_t store_address_bytes;
    Py_ssize_t head_bytes;  /* TOTALSIZE through BODYLEN: where the body starts */
    Py_ssize_t topic_length_bytes;  /* 1 (v1) or 2 (v2) */
    Py_ssize_t properties_length_bytes;
} LayoutInfo;

/* What check_record needs from record.py, remembered by `bind_check_record`. */
typedef struct {
    PyObject_HEAD
    PyObject *reference;
    PyTypeObject *head_type;  /* record.RecordHead, a tuple subclass */
    PyTypeObject *result_type;  /* record.CheckResult, a frozen dataclass with slots */
    PyObject *result_slots[RESULT_SLOT_COUNT];  /* its member descriptors, in field order */
    PyObject *status_ok, *status_blank, *status_end, *status_corrupt;
    PyObject *empty_reason;
    PyObject *name_limit, *name_expected, *name_verify_crc;
    int32_t magic_v1, magic_v2, magic_blank;
    Py_ssize_t blank_bytes;  /* a BLANK record's own size: TOTALSIZE + MAGIC */
    Py_ssize_t fixed_min_bytes;  /* the smallest TOTALSIZE (empty body, topic, properties) */
    uint32_t born_v6_bit, store_v6_bit;
    LayoutInfo layouts[LAYOUT_COUNT];  /* index: born v6 * 4 + store v6 * 2 + v2 */
} Checker;

static int
checker_traverse(Checker *self, visitproc visit, void *arg)
{
    Py_VISIT(self->reference);
    Py_VISIT(self->head_type);
    Py_VISIT(self->result_type);
    for (int i = 0; i < RESULT_SLOT_COUNT; i++) {
        Py_VISIT(self->result_slots[i]);
    }
    Py_VISIT(self->status_ok);
    Py_VISIT(self->status_blank);
    Py_VISIT(self->status_end);
    Py_VISIT(self->status_corrupt);
    for (int i = 0; i < LAYOUT_COUNT; i++) {
        Py_VISIT(self->layouts[i].layout);
    }
    return 0;
}

static int
checker_clear(Checker *self)
{
    Py_CLEAR(self->reference);
    Py_CLEAR(self->head_type);
    Py_CLEAR(self->result_type);
    for (int i = 0; i < RESULT_SLOT_COUNT; i++) {
        Py_CLEAR(self->result_slots[i]);
    }
    Py_CLEAR(self->status_ok);
    Py_CLEAR(self->status_blank);
    Py_CLEAR(self->status_end);
    Py_CLEAR(self->status_corrupt);
    Py_CLEAR(self->empty_reason);
    Py_CLEAR(self->name_limit);
    Py_CLEAR(self->name_expected);
    Py_CLEAR(self->name_verify_crc);
    for (int i = 0; i < LAYOUT_COUNT; i++) {
        Py_CLEAR(self->layouts[i].layout);
    }
    return 0;
}

static void
checker_dealloc(Checker *self)
{
    PyObject_GC_UnTrack(self);
    checker_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static Checker *checker;  /* the one `bind_check_record` made last */

static PyTypeObject CheckerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "mqstore.storage.format._records.Checker",
    .tp_basicsize = sizeof(Checker),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "check_record's settings: record.py's layouts and result types.",
    .tp_traverse = (traverseproc)checker_traverse,
    .tp_clear = (inquiry)checker_clear,
    .tp_dealloc = (destructor)checker_dealloc,
};

/* CheckResult(status, size_bytes, reason, head, layout) without its __init__: the slots
 * are set as object.__setattr__ would.  `head` is stolen; the others are borrowed. */
static PyObject *
make_result(Checker *c, PyObject *status, Py_ssize_t size_bytes, PyObject *reason,
            PyObject *head, PyObject *layout)
{
    PyObject *result = NULL;
    PyObject *size = PyLong_FromSsize_t(size_bytes);
    if (size != NULL) {
        result = c->result_type->tp_alloc(c->result_type, 0);
    }
    if (result != NULL) {
        PyObject *values[RESULT_SLOT_COUNT] = {
            status, size, reason != NULL ? reason : c->empty_reason,
            head != NULL ? head : Py_None, layout != NULL ? layout : Py_None};
        for (int i = 0; i < RESULT_SLOT_COUNT; i++) {
            PyObject *slot = c->result_slots[i];
            if (Py_TYPE(slot)->tp_descr_set(slot, result, values[i]) < 0) {
                Py_CLEAR(result);
                break;
            }
        }
    }
    Py_XDECREF(size);
    Py_XDECREF(head);
    return result;
}

static PyObject *
corrupt(Checker *c, Py_ssize_t size_bytes, const char *reason)
{
    PyObject *text = PyUnicode_FromString(reason);
    if (text == NULL) {
        return NULL;
    }
    PyObject *result = make_result(c, c->status_corrupt, size_bytes, text, NULL, NULL);
    Py_DECREF(text);
    return result;
}

/* Python's format(value, "08X"): the sign counts toward the width of 8. */
static void
format_hex08(char *out, size_t out_bytes, long long value)
{
    unsigned long long magnitude = value < 0 ? 0ull - (unsigned long long)value
                                             : (unsigned long long)value;
    char digits[17];  /* 16 hex digits at most */
    int digit_count = snprintf(digits, sizeof digits, "%llX", magnitude);
    int sign = value < 0;
    int zeros = 8 - sign - digit_count;
    snprintf(out, out_bytes, "%s%.*s%s", sign ? "-" : "", zeros > 0 ? zeros : 0, "00000000",
             digits);
}

static PyObject *
new_host(const unsigned char *at, Py_ssize_t address_bytes)
{
    PyObject *address = PyBytes_FromStringAndSize((const char *)at, address_bytes);
    if (address == NULL) {
        return NULL;
    }
    PyObject *port = PyLong_FromLong(read_int32(at + address_bytes));
    if (port == NULL) {
        Py_DECREF(address);
        return NULL;
    }
    PyObject *host = PyTuple_New(2);
    if (host == NULL) {
        Py_DECREF(address);
        Py_DECREF(port);
        return NULL;
    }
    PyTuple_SET_ITEM(host, 0, address);
    PyTuple_SET_ITEM(host, 1, port);
    return host;
}

/* A RecordHead (a tuple subclass) allocated as the type allocates and filled in place. */
static PyObject *
new_head(Checker *c, const unsigned char *record, const LayoutInfo *layout)
{
    PyObject *head = c->head_type->tp_alloc(c->head_type, FIELD_COUNT);
    if (head == NULL) {
        return NULL;
    }
    for (int i = 0; i < FIELD_COUNT; i++) {
        const unsigned char *at = record + layout->offsets[i];
        PyObject *item;
        switch (RECORD_FIELD_KINDS[i]) {
        case 'q':
            item = PyLong_FromLongLong(read_int64(at));
            break;
        case 'h':
            item = new_host(at, i == F_BORN_HOST ? layout->born_address_bytes
                                                 : layout->store_address_bytes);
            break;
        default:
            item = PyLong_FromLong(read_int32(at));
        }
        if (item == NULL) {
            Py_DECREF(head);
            return NULL;
        }
        PyTuple_SET_ITEM(head, i, item);
    }
    return head;
}

/* record.py's _structure_problem: NULL if the lengths add up, else why not (in `reason`). */
static const char *
structure_problem(const unsigned char *record, const LayoutInfo *layout,
                  long long expected_physical_offset, char *reason)
{
    int32_t total_size = read_int32(record + layout->offsets[F_TOTAL_SIZE]);
    long long physical_offset = read_int64(record + layout->offsets[F_PHYSICAL_OFFSET]);
    int32_t body_size = read_int32(record + layout->offsets[F_BODY_SIZE]);
    if (physical_offset != expected_physical_offset) {
        snprintf(reason, MESSAGE_BYTES, "PHYSICALOFFSET field says %lld, record is at %lld",
                 physical_offset, expected_physical_offset);
        return reason;
    }
    long long cursor = (long long)layout->head_bytes + body_size;
    if (body_size < 0 || cursor + layout->topic_length_bytes > total_size) {
        snprintf(reason, MESSAGE_BYTES, "BODYLEN %d overruns TOTALSIZE %d", (int)body_size,
                 (int)total_size);
        return reason;
    }
    Py_ssize_t topic_size = read_unsigned(record + cursor, layout->topic_length_bytes);
    cursor += layout->topic_length_bytes + topic_size;
    if (cursor + layout->properties_length_bytes > total_size) {
        snprintf(reason, MESSAGE_BYTES, "TOPICLEN %zd overruns TOTALSIZE %d", topic_size,
                 (int)total_size);
        return reason;
    }
    Py_ssize_t properties_size = read_unsigned(record + cursor, layout->properties_length_bytes);
    long long recomputed = cursor + layout->properties_length_bytes + properties_size;
    if (recomputed != total_size) {
        snprintf(reason, MESSAGE_BYTES, "TOTALSIZE %d but the lengths add up to %lld",
                 (int)total_size, recomputed);
        return reason;
    }
    return NULL;
}

/* record.py's _check_message, for a v1 / v2 magic: -1 to hand the call to the reference
 * (the head would be read past the buffer's end, where the reference raises). */
static PyObject *
check_message(Checker *c, const Py_buffer *view, Py_ssize_t position, Py_ssize_t left_bytes,
              long long expected_physical_offset, int verify_crc, int *delegate)
{
    const unsigned char *record = (const unsigned char *)view->buf + position;
    const LayoutInfo *first = &c->layouts[0];
    int32_t total_size = read_int32(record + first->offsets[F_TOTAL_SIZE]);
    char reason[MESSAGE_BYTES];
    if (total_size < c->fixed_min_bytes || total_size > left_bytes) {
        snprintf(reason, sizeof reason, "TOTALSIZE %d outside [%zd, %zd]", (int)total_size,
                 c->fixed_min_bytes, left_bytes);
        return corrupt(c, 0, reason);
    }
    uint32_t sysflag = (uint32_t)read_int32(record + first->offsets[F_SYSFLAG]);
    int32_t magic = read_int32(record + first->offsets[F_MAGIC]);
    const LayoutInfo *layout = &c->layouts[((sysflag & c->born_v6_bit) != 0) * 4
                                           + ((sysflag & c->store_v6_bit) != 0) * 2
                                           + (magic == c->magic_v2)];
    if (layout->head_bytes > view->len - position) {
        *delegate = 1;
        return NULL;
    }
    const char *problem = structure_problem(record, layout, expected_physical_offset, reason);
    if (problem == NULL && verify_crc) {
        int32_t body_size = read_int32(record + layout->offsets[F_BODY_SIZE]);
        long long crc = (long long)(crc32(0L, record + layout->head_bytes, (uInt)body_size)
                                    & 0x7FFFFFFFul);
        int32_t stored = read_int32(record + layout->offsets[F_BODY_CRC]);
        if (crc != stored) {
            char computed_hex[32], stored_hex[32];
            format_hex08(computed_hex, sizeof computed_hex, crc);
            format_hex08(stored_hex, sizeof stored_hex, stored);
            snprintf(reason, sizeof reason, "body CRC 0x%s != stored 0x%s", computed_hex,
                     stored_hex);
            problem = reason;
        }
    }
    if (problem != NULL) {
        return corrupt(c, total_size, problem);
    }
    PyObject *head = new_head(c, record, layout);
    if (head == NULL) {
        return NULL;
    }
    return make_result(c, c->status_ok, total_size, NULL, head, layout->layout);
}

/* record.py's check_record_reference, for a position and limit inside the buffer. */
static PyObject *
check_at(Checker *c, const Py_buffer *view, Py_ssize_t position, Py_ssize_t limit,
         long long expected_physical_offset, int verify_crc, int *delegate)
{
    const unsigned char *bytes = view->buf;
    Py_ssize_t left_bytes = limit - position;
    if (left_bytes < c->blank_bytes) {
        for (Py_ssize_t i = position; i < limit; i++) {
            if (bytes[i] != 0) {
                return corrupt(c, 0, "fewer than 8 bytes left and not zero");
            }
        }
        return make_result(c, c->status_end, 0, NULL, NULL, NULL);
    }
    const LayoutInfo *first = &c->layouts[0];
    int32_t total_size = read_int32(bytes + position + first->offsets[F_TOTAL_SIZE]);
    int32_t magic = read_int32(bytes + position + first->offsets[F_MAGIC]);
    char reason[MESSAGE_BYTES];
    if (magic == c->magic_blank) {
        if (total_size != left_bytes) {
            snprintf(reason, sizeof reason, "BLANK of %d bytes does not reach the segment end "
                     "(%zd bytes left)", (int)total_size, left_bytes);
            return corrupt(c, 0, reason);
        }
        return make_result(c, c->status_blank, total_size, NULL, NULL, NULL);
    }
    if (magic != c->magic_v1 && magic != c->magic_v2) {
        if (total_size == 0 && magic == 0) {
            return make_result(c, c->status_end, 0, NULL, NULL, NULL);
        }
        snprintf(reason, sizeof reason, "bad magic 0x%08X", (unsigned)magic);
        return corrupt(c, 0, reason);
    }
    return check_message(c, view, position, left_bytes, expected_physical_offset, verify_crc,
                         delegate);
}

/* A buffer whose slices, as the reference takes them, are its raw bytes. */
static int
is_plain_buffer(PyObject *buffer)
{
    return PyBytes_CheckExact(buffer) || PyByteArray_CheckExact(buffer)
           || PyMemoryView_Check(buffer) || Py_IS_TYPE(buffer, mmap_type);
}

/* Sort the keyword arguments: 1 if they are exactly limit, expected_physical_offset and
 * verify_crc. */
static int
keyword_values(const Checker *c, PyObject *const *values, PyObject *kwnames, PyObject **limit,
               PyObject **expected, PyObject **verify_crc)
{
    if (kwnames == NULL || PyTuple_GET_SIZE(kwnames) != 3) {
        return 0;
    }
    for (Py_ssize_t i = 0; i < 3; i++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, i);
        /* A call written in Python passes the interned names: identity decides at once. */
        if (name == c->name_limit) {
            *limit = values[i];
        }
        else if (name == c->name_expected) {
            *expected = values[i];
        }
        else if (name == c->name_verify_crc) {
            *verify_crc = values[i];
        }
        else if (PyUnicode_Compare(name, c->name_limit) == 0) {
            *limit = values[i];
        }
        else if (PyUnicode_Compare(name, c->name_expected) == 0) {
            *expected = values[i];
        }
        else if (PyUnicode_Compare(name, c->name_verify_crc) == 0) {
            *verify_crc = values[i];
        }
    }
    return *limit != NULL && *expected != NULL && *verify_crc != NULL;
}

static PyObject *
check_record(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    Checker *c = checker;
    Py_INCREF(c);  /* held through the call, should a rebinding replace it meanwhile */
    PyObject *limit_object = NULL, *expected_object = NULL, *verify_crc_object = NULL;
    int delegated = nargs != 2
        || !keyword_values(c, args + nargs, kwnames, &limit_object, &expected_object,
                           &verify_crc_object)
        || !PyLong_CheckExact(args[1]) || !PyLong_CheckExact(limit_object)
        || !PyLong_CheckExact(expected_object)
        || (verify_crc_object != Py_True && verify_crc_object != Py_False)
        || !is_plain_buffer(args[0]);
    long long expected = 0;
    Py_ssize_t position = -1, limit = -1;
    if (!delegated) {
        int overflow = 0;
        expected = PyLong_AsLongLongAndOverflow(expected_object, &overflow);
        position = overflow ? -1 : PyLong_AsSsize_t(args[1]);
        limit = position < 0 ? -1 : PyLong_AsSsize_t(limit_object);
        if (limit < 0) {  /* out of range, negative or overflowing: the reference's case */
            PyErr_Clear();
            delegated = 1;
        }
    }
    Py_buffer view;
    if (!delegated && PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        PyErr_Clear();
        delegated = 1;
    }
    PyObject *result = NULL;
    if (!delegated) {
        if ((PyMemoryView_Check(args[0]) && !is_plain_memoryview(args[0]))
            || limit > view.len) {
            delegated = 1;
        }
        else {
            result = check_at(c, &view, position, limit, expected,
                              verify_crc_object == Py_True, &delegated);
        }
        PyBuffer_Release(&view);
    }
    if (delegated) {
        result = PyObject_Vectorcall(c->reference, args, (size_t)nargs, kwnames);
    }
    Py_DECREF(c);
    return result;
}

static PyMethodDef check_record_def = {
    "check_record", (PyCFunction)(void (*)(void))check_record, METH_FASTCALL | METH_KEYWORDS,
    "check_record(buffer, position, *, limit, expected_physical_offset, verify_crc)\n--\n\n"
    "record.check_record_reference in C (storage/format/_records.c)."};

/* ---------------------------------------------------------------- binding */

static int
read_layout(LayoutInfo *info, PyObject *entry)
{
    PyObject *offsets;
    if (!PyArg_ParseTuple(entry, "OO!nnnnn;a layout is (layout, offsets, born address bytes, "
                          "store address bytes, head bytes, topic length bytes, properties "
                          "length bytes)", &info->layout, &PyTuple_Type, &offsets,
                          &info->born_address_bytes, &info->store_address_bytes,
                          &info->head_bytes, &info->topic_length_bytes,
                          &info->properties_length_bytes)) {
        info->layout = NULL;
        return -1;
    }
    Py_INCREF(info->layout);
    if (PyTuple_GET_SIZE(offsets) != FIELD_COUNT) {
        PyErr_Format(PyExc_ValueError, "a layout needs %d field offsets", FIELD_COUNT);
        return -1;
    }
    for (int i = 0; i < FIELD_COUNT; i++) {
        info->offsets[i] = PyLong_AsSsize_t(PyTuple_GET_ITEM(offsets, i));
        if (info->offsets[i] == -1 && PyErr_Occurred()) {
            return -1;
        }
        Py_ssize_t width = RECORD_FIELD_KINDS[i] == 'q' ? 8 : RECORD_FIELD_KINDS[i] == 'i' ? 4
                           : 4 + (i == F_BORN_HOST ? info->born_address_bytes
                                                   : info->store_address_bytes);
        if (info->offsets[i] < 0 || info->offsets[i] + width > info->head_bytes) {
            PyErr_Format(PyExc_ValueError, "field %d lies outside the %zd-byte head", i,
                         info->head_bytes);
            return -1;
        }
    }
    if ((info->topic_length_bytes != 1 && info->topic_length_bytes != 2)
        || (info->properties_length_bytes != 1 && info->properties_length_bytes != 2)
        || (info->born_address_bytes != 4 && info->born_address_bytes != 16)
        || (info->store_address_bytes != 4 && info->store_address_bytes != 16)) {
        PyErr_SetString(PyExc_ValueError, "length prefixes are 1 or 2 bytes, addresses 4 or 16");
        return -1;
    }
    return 0;
}

static int
check_common_offsets(const Checker *c)
{
    static const int common[] = {F_TOTAL_SIZE, F_MAGIC, F_SYSFLAG};
    for (int i = 0; i < LAYOUT_COUNT; i++) {
        for (size_t k = 0; k < sizeof common / sizeof common[0]; k++) {
            if (c->layouts[i].offsets[common[k]] != c->layouts[0].offsets[common[k]]) {
                PyErr_SetString(PyExc_ValueError, "TOTALSIZE, MAGIC and SYSFLAG must sit at "
                                "the same offsets in every layout");
                return -1;
            }
        }
    }
    if (c->fixed_min_bytes < c->layouts[0].offsets[F_SYSFLAG] + 4
        || c->blank_bytes < c->layouts[0].offsets[F_MAGIC] + 4) {
        PyErr_SetString(PyExc_ValueError, "the smallest record must hold SYSFLAG");
        return -1;
    }
    return 0;
}

static int
read_result_type(Checker *c, PyObject *slot_names)
{
    if (!PyType_IsSubtype(c->head_type, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "head_type must be a tuple subclass");
        return -1;
    }
    if (c->result_type->tp_new != PyBaseObject_Type.tp_new
        || PyTuple_GET_SIZE(slot_names) != RESULT_SLOT_COUNT) {
        PyErr_SetString(PyExc_TypeError, "result_type must be a plain class with 5 slots");
        return -1;
    }
    for (int i = 0; i < RESULT_SLOT_COUNT; i++) {
        PyObject *slot = PyObject_GetAttr((PyObject *)c->result_type,
                                          PyTuple_GET_ITEM(slot_names, i));
        if (slot == NULL) {
            return -1;
        }
        c->result_slots[i] = slot;
        if (!PyObject_TypeCheck(slot, &PyMemberDescr_Type)) {
            PyErr_SetString(PyExc_TypeError, "result_type's fields must be slots");
            return -1;
        }
    }
    return 0;
}

static int
read_constants(Checker *c, PyObject *statuses, PyObject *magics, PyObject *sizes,
               PyObject *host_bits)
{
    if (!PyArg_ParseTuple(statuses, "OOOO;statuses are (ok, blank, end, corrupt)",
                          &c->status_ok, &c->status_blank, &c->status_end, &c->status_corrupt)) {
        c->status_ok = c->status_blank = c->status_end = c->status_corrupt = NULL;
        return -1;
    }
    Py_INCREF(c->status_ok);
    Py_INCREF(c->status_blank);
    Py_INCREF(c->status_end);
    Py_INCREF(c->status_corrupt);
    unsigned int born_bit, store_bit;
    if (!PyArg_ParseTuple(magics, "iii;magics are (v1, v2, blank)", &c->magic_v1,
                          &c->magic_v2, &c->magic_blank)
        || !PyArg_ParseTuple(sizes, "nn;sizes are (blank bytes, smallest record bytes)",
                             &c->blank_bytes, &c->fixed_min_bytes)
        || !PyArg_ParseTuple(host_bits, "II;host bits are (born v6, store v6)", &born_bit,
                             &store_bit)) {
        return -1;
    }
    c->born_v6_bit = born_bit;
    c->store_v6_bit = store_bit;
    c->empty_reason = PyUnicode_FromString("");
    c->name_limit = PyUnicode_InternFromString("limit");
    c->name_expected = PyUnicode_InternFromString("expected_physical_offset");
    c->name_verify_crc = PyUnicode_InternFromString("verify_crc");
    if (c->empty_reason == NULL || c->name_limit == NULL || c->name_expected == NULL
        || c->name_verify_crc == NULL) {
        return -1;
    }
    return 0;
}

static PyObject *
module_name_of(PyObject *reference)
{
    return PyObject_GetAttrString(reference, "__module__");
}

static PyObject *
bind_check_record(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"reference", "head_type", "result_type", "result_slots",
                               "statuses", "layouts", "field_kinds", "magics", "sizes",
                               "host_bits", NULL};
    PyObject *reference, *result_slots, *statuses, *layouts, *magics, *sizes, *host_bits;
    PyTypeObject *head_type, *result_type;
    const char *field_kinds;
    if (!PyArg_ParseTupleAndKeywords(
            args, kwargs, "OO!O!O!O!O!sO!O!O!:bind_check_record", keywords, &reference,
            &PyType_Type, &head_type, &PyType_Type, &result_type, &PyTuple_Type, &result_slots,
            &PyTuple_Type, &statuses, &PyTuple_Type, &layouts, &field_kinds, &PyTuple_Type,
            &magics, &PyTuple_Type, &sizes, &PyTuple_Type, &host_bits)) {
        return NULL;
    }
    if (strcmp(field_kinds, RECORD_FIELD_KINDS) != 0) {
        return PyErr_Format(PyExc_ValueError, "the record's fields are %s but "
                            "storage/format/_records.c decodes %s: update it", field_kinds,
                            RECORD_FIELD_KINDS);
    }
    if (PyTuple_GET_SIZE(layouts) != LAYOUT_COUNT) {
        return PyErr_Format(PyExc_ValueError, "expected %d layouts", LAYOUT_COUNT);
    }
    Checker *c = PyObject_GC_New(Checker, &CheckerType);
    if (c == NULL) {
        return NULL;
    }
    memset((char *)c + sizeof(PyObject), 0, sizeof(Checker) - sizeof(PyObject));
    PyObject_GC_Track(c);
    Py_INCREF(reference);
    c->reference = reference;
    Py_INCREF(head_type);
    c->head_type = head_type;
    Py_INCREF(result_type);
    c->result_type = result_type;
    PyObject *function = NULL;
    int failed = read_result_type(c, result_slots)
                 || read_constants(c, statuses, magics, sizes, host_bits);
    for (int i = 0; i < LAYOUT_COUNT && !failed; i++) {
        failed = read_layout(&c->layouts[i], PyTuple_GET_ITEM(layouts, i));
    }
    PyObject *module_name = failed || check_common_offsets(c) ? NULL : module_name_of(reference);
    if (module_name != NULL) {
        function = PyCFunction_NewEx(&check_record_def, module, module_name);
        Py_DECREF(module_name);
    }
    if (function == NULL) {
        Py_DECREF(c);
        return NULL;
    }
    Py_XSETREF(checker, c);
    return function;
}

/* ---------------------------------------------------------------- record writer */

/* encoder.py's write_record_reference and pack_batch_reference: a PreparedRecord (a
 * 12-tuple, encoder.py) packed as its layout's head, every field in RECORD_FIELD_KINDS
 * order with the queue offset, physical offset and store time given, then body, then tail;
 * each record's PutResult is built without running PutResult.__init__. */

#define F_QUEUE_ID 3
#define F_FLAG 4
#define F_QUEUE_OFFSET 5
#define F_BORN_TIMESTAMP 8
#define F_STORE_TIMESTAMP 10
#define F_STORE_HOST 11
#define F_RECONSUME_TIMES 12
#define F_PREPARED_OFFSET 13
#define PREPARED_ITEMS 12
#define PUT_RESULT_SLOT_COUNT 7

typedef struct {
    PyObject *layout;  /* the record.RecordLayout a PreparedRecord names first */
    Py_ssize_t offsets[FIELD_COUNT];
    Py_ssize_t born_address_bytes;
    Py_ssize_t store_address_bytes;
    Py_ssize_t head_bytes;
    int32_t magic;
} WriterLayout;

/* What the writers need from encoder.py and message.py, remembered by `bind_record_writer`. */
typedef struct {
    PyObject_HEAD
    PyObject *write_reference;
    PyObject *pack_reference;
    PyTypeObject *result_type;  /* message.PutResult, a plain class with slots */
    /* its member descriptors for status, physical_offset, queue_offset, store_timestamp_ms,
     * size_bytes, reason and the packed store host, in this order */
    PyObject *result_slots[PUT_RESULT_SLOT_COUNT];
    PyObject *status_ok;
    PyObject *empty_reason;
    WriterLayout layouts[LAYOUT_COUNT];
} Writer;

static int
writer_traverse(Writer *self, visitproc visit, void *arg)
{
    Py_VISIT(self->write_reference);
    Py_VISIT(self->pack_reference);
    Py_VISIT(self->result_type);
    for (int i = 0; i < PUT_RESULT_SLOT_COUNT; i++) {
        Py_VISIT(self->result_slots[i]);
    }
    Py_VISIT(self->status_ok);
    for (int i = 0; i < LAYOUT_COUNT; i++) {
        Py_VISIT(self->layouts[i].layout);
    }
    return 0;
}

static int
writer_clear(Writer *self)
{
    Py_CLEAR(self->write_reference);
    Py_CLEAR(self->pack_reference);
    Py_CLEAR(self->result_type);
    for (int i = 0; i < PUT_RESULT_SLOT_COUNT; i++) {
        Py_CLEAR(self->result_slots[i]);
    }
    Py_CLEAR(self->status_ok);
    Py_CLEAR(self->empty_reason);
    for (int i = 0; i < LAYOUT_COUNT; i++) {
        Py_CLEAR(self->layouts[i].layout);
    }
    return 0;
}

static void
writer_dealloc(Writer *self)
{
    PyObject_GC_UnTrack(self);
    writer_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject WriterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "mqstore.storage.format._records.Writer",
    .tp_basicsize = sizeof(Writer),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "write_record's and pack_batch's settings: the layouts and PutResult.",
    .tp_traverse = (traverseproc)writer_traverse,
    .tp_clear = (inquiry)writer_clear,
    .tp_dealloc = (destructor)writer_dealloc,
};

/* One PreparedRecord, read: pointers into the tuple's own (immutable) items. */
typedef struct {
    PyObject *owner;  /* the tuple, held while the record is packed (pack_batch) */
    const WriterLayout *layout;
    Py_ssize_t size_bytes;
    int32_t crc, queue_id, flag, sysflag, reconsume_times, born_port, store_port;
    int born_is_store_time;  /* a negative born time: "the store time" */
    int64_t born_timestamp_ms;
    const char *born_address, *store_address, *body, *tail;
    Py_ssize_t body_bytes, tail_bytes;
} Prepared;

/* An exact int within [low, high] into *value: 1; else 0, with no error left set. */
static int
int_within(PyObject *object, long long low, long long high, long long *value)
{
    if (!PyLong_CheckExact(object)) {
        return 0;
    }
    int overflow = 0;
    long long read = PyLong_AsLongLongAndOverflow(object, &overflow);
    if (overflow || (read == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    if (read < low || read > high) {
        return 0;
    }
    *value = read;
    return 1;
}

static int
int32_within(PyObject *object, long long low, int32_t *value)
{
    long long read;
    if (!int_within(object, low, INT32_MAX, &read)) {
        return 0;
    }
    *value = (int32_t)read;
    return 1;
}

/* (packed address of `address_bytes`, int32 port): 1; else 0. */
static int
read_host(PyObject *host, Py_ssize_t address_bytes, const char **address, int32_t *port)
{
    if (!PyTuple_CheckExact(host) || PyTuple_GET_SIZE(host) != 2) {
        return 0;
    }
    PyObject *packed = PyTuple_GET_ITEM(host, 0);
    if (!PyBytes_CheckExact(packed) || PyBytes_GET_SIZE(packed) != address_bytes) {
        return 0;
    }
    *address = PyBytes_AS_STRING(packed);
    return int32_within(PyTuple_GET_ITEM(host, 1), INT32_MIN, port);
}

/* 1 if `prepared` is a PreparedRecord this file packs exactly as the reference does (exact
 * types, every value in its field's range, a size that adds up); else 0, the reference's
 * case (it packs it, or raises what it raises). */
static int
read_prepared(const Writer *w, PyObject *prepared, Prepared *r)
{
    if (!PyTuple_CheckExact(prepared) || PyTuple_GET_SIZE(prepared) != PREPARED_ITEMS) {
        return 0;
    }
    PyObject **items = &PyTuple_GET_ITEM(prepared, 0);
    r->owner = prepared;
    r->layout = NULL;
    for (int i = 0; i < LAYOUT_COUNT; i++) {
        if (items[0] == w->layouts[i].layout) {
            r->layout = &w->layouts[i];
        }
    }
    PyObject *body = items[7], *tail = items[8], *born = items[5];
    if (r->layout == NULL || !PyBytes_CheckExact(body) || !PyBytes_CheckExact(tail)
        || !PyLong_CheckExact(born)) {
        return 0;
    }
    int overflow = 0;
    long long born_ms = PyLong_AsLongLongAndOverflow(born, &overflow);
    if (overflow > 0) {  /* beyond int64: the reference's struct.error */
        return 0;
    }
    r->born_is_store_time = overflow < 0 || born_ms < 0;
    r->born_timestamp_ms = born_ms;
    r->body = PyBytes_AS_STRING(body);
    r->body_bytes = PyBytes_GET_SIZE(body);
    r->tail = PyBytes_AS_STRING(tail);
    r->tail_bytes = PyBytes_GET_SIZE(tail);
    int32_t size;
    if (!int32_within(items[1], 0, &size) || !int32_within(items[2], INT32_MIN, &r->crc)
        || !int32_within(items[3], INT32_MIN, &r->queue_id)
        || !int32_within(items[4], INT32_MIN, &r->flag)
        || !int32_within(items[10], INT32_MIN, &r->sysflag)
        || !int32_within(items[11], INT32_MIN, &r->reconsume_times)
        || !read_host(items[6], r->layout->born_address_bytes, &r->born_address, &r->born_port)
        || !read_host(items[9], r->layout->store_address_bytes, &r->store_address,
                      &r->store_port)
        || r->body_bytes > INT32_MAX
        || (long long)size != (long long)r->layout->head_bytes + r->body_bytes + r->tail_bytes) {
        return 0;
    }
    r->size_bytes = size;
    return 1;
}

static inline void
write_int32(unsigned char *p, int32_t value)
{
    uint32_t bits = (uint32_t)value;
    p[0] = (unsigned char)(bits >> 24);
    p[1] = (unsigned char)(bits >> 16);
    p[2] = (unsigned char)(bits >> 8);
    p[3] = (unsigned char)bits;
}

static inline void
write_int64(unsigned char *p, int64_t value)
{
    uint64_t bits = (uint64_t)value;
    for (int i = 7; i >= 0; i--, bits >>= 8) {
        p[i] = (unsigned char)bits;
    }
}

/* The whole record at `at` (`bind_record_writer` checked that the fields tile the head). */
static void
write_prepared(unsigned char *at, const Prepared *r, int64_t queue_offset,
               int64_t physical_offset, int64_t store_timestamp_ms)
{
    const WriterLayout *layout = r->layout;
    const Py_ssize_t *o = layout->offsets;
    write_int32(at + o[F_TOTAL_SIZE], (int32_t)r->size_bytes);
    write_int32(at + o[F_MAGIC], layout->magic);
    write_int32(at + o[F_BODY_CRC], r->crc);
    write_int32(at + o[F_QUEUE_ID], r->queue_id);
    write_int32(at + o[F_FLAG], r->flag);
    write_int64(at + o[F_QUEUE_OFFSET], queue_offset);
    write_int64(at + o[F_PHYSICAL_OFFSET], physical_offset);
    write_int32(at + o[F_SYSFLAG], r->sysflag);
    write_int64(at + o[F_BORN_TIMESTAMP],
                r->born_is_store_time ? store_timestamp_ms : r->born_timestamp_ms);
    memcpy(at + o[F_BORN_HOST], r->born_address, (size_t)layout->born_address_bytes);
    write_int32(at + o[F_BORN_HOST] + layout->born_address_bytes, r->born_port);
    write_int64(at + o[F_STORE_TIMESTAMP], store_timestamp_ms);
    memcpy(at + o[F_STORE_HOST], r->store_address, (size_t)layout->store_address_bytes);
    write_int32(at + o[F_STORE_HOST] + layout->store_address_bytes, r->store_port);
    write_int32(at + o[F_RECONSUME_TIMES], r->reconsume_times);
    write_int64(at + o[F_PREPARED_OFFSET], 0);
    write_int32(at + o[F_BODY_SIZE], (int32_t)r->body_bytes);
    memcpy(at + layout->head_bytes, r->body, (size_t)r->body_bytes);
    memcpy(at + layout->head_bytes + r->body_bytes, r->tail, (size_t)r->tail_bytes);
}

/* PutResult(PUT_OK, physical_offset, queue_offset, store_timestamp_ms, size_bytes, "",
 * store_host_packed) without its __init__; the last two arguments are borrowed. */
static PyObject *
new_put_result(const Writer *w, int64_t physical_offset, int64_t queue_offset,
               Py_ssize_t size_bytes, PyObject *store_timestamp_ms, PyObject *store_host_packed)
{
    PyObject *physical = PyLong_FromLongLong(physical_offset);
    PyObject *queue = PyLong_FromLongLong(queue_offset);
    PyObject *size = PyLong_FromSsize_t(size_bytes);
    PyObject *result = NULL;
    if (physical != NULL && queue != NULL && size != NULL) {
        result = w->result_type->tp_alloc(w->result_type, 0);
    }
    if (result != NULL) {
        PyObject *values[PUT_RESULT_SLOT_COUNT] = {
            w->status_ok, physical, queue, store_timestamp_ms, size, w->empty_reason,
            store_host_packed};
        for (int i = 0; i < PUT_RESULT_SLOT_COUNT; i++) {
            PyObject *slot = w->result_slots[i];
            if (Py_TYPE(slot)->tp_descr_set(slot, result, values[i]) < 0) {
                Py_CLEAR(result);
                break;
            }
        }
    }
    Py_XDECREF(physical);
    Py_XDECREF(queue);
    Py_XDECREF(size);
    return result;
}

/* write_record(target, position, prepared, queue_offset, physical_offset,
 * store_timestamp_ms, store_host_packed): into an mmap or bytearray, inside it. */
static PyObject *
write_record(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    const Writer *w = (Writer *)self;
    PyObject *result = NULL;
    int delegated = 1;
    Prepared r;
    long long position, queue_offset, physical_offset, store_timestamp_ms;
    if (nargs == 7 && kwnames == NULL
        && (Py_IS_TYPE(args[0], mmap_type) || PyByteArray_CheckExact(args[0]))
        && int_within(args[1], 0, PY_SSIZE_T_MAX, &position)
        && read_prepared(w, args[2], &r)
        && int_within(args[3], INT64_MIN, INT64_MAX, &queue_offset)
        && int_within(args[4], INT64_MIN, INT64_MAX, &physical_offset)
        && int_within(args[5], INT64_MIN, INT64_MAX, &store_timestamp_ms)) {
        Py_buffer view;
        if (PyObject_GetBuffer(args[0], &view, PyBUF_WRITABLE) < 0) {
            PyErr_Clear();
        }
        else {
            if (position <= view.len && r.size_bytes <= view.len - position) {
                write_prepared((unsigned char *)view.buf + position, &r, queue_offset,
                               physical_offset, store_timestamp_ms);
                delegated = 0;
            }
            PyBuffer_Release(&view);
        }
    }
    if (delegated) {
        result = PyObject_Vectorcall(w->write_reference, args, (size_t)nargs, kwnames);
    }
    else {
        result = new_put_result(w, physical_offset, queue_offset, r.size_bytes, args[5],
                                args[6]);
    }
    return result;
}

/* The packed records and their results, once every record was read; NULL on an error. */
static PyObject *
pack_read_records(const Writer *w, const Prepared *records, const int64_t *queue_offsets,
                  Py_ssize_t count, Py_ssize_t total_bytes, int64_t physical_offset,
                  int64_t store_timestamp_ms, PyObject *const *args)
{
    PyObject *packed = PyBytes_FromStringAndSize(NULL, total_bytes);
    PyObject *results = packed != NULL ? PyList_New(count) : NULL;
    if (results == NULL) {
        Py_XDECREF(packed);
        return NULL;
    }
    unsigned char *at = (unsigned char *)PyBytes_AS_STRING(packed);
    for (Py_ssize_t i = 0; i < count; i++) {
        write_prepared(at, &records[i], queue_offsets[i], physical_offset, store_timestamp_ms);
        PyObject *result = new_put_result(w, physical_offset, queue_offsets[i],
                                          records[i].size_bytes, args[3], args[4]);
        if (result == NULL) {
            Py_DECREF(packed);
            Py_DECREF(results);
            return NULL;
        }
        PyList_SET_ITEM(results, i, result);
        at += records[i].size_bytes;
        physical_offset += records[i].size_bytes;
    }
    PyObject *pair = PyTuple_Pack(2, packed, results);
    Py_DECREF(packed);
    Py_DECREF(results);
    return pair;
}

/* pack_batch(records, queue_offsets, physical_offset, store_timestamp_ms,
 * store_host_packed) for two lists of one length: every record is read (and its tuple
 * held) first; any the reference would treat otherwise hands the whole call to it. */
static PyObject *
pack_records(const Writer *w, PyObject *const *args, int *delegate)
{
    PyObject *records = args[0], *offsets = args[1];
    Py_ssize_t count = PyList_GET_SIZE(records);
    long long physical_offset, store_timestamp_ms;
    if (!int_within(args[2], INT64_MIN, INT64_MAX, &physical_offset)
        || !int_within(args[3], INT64_MIN, INT64_MAX, &store_timestamp_ms)) {
        *delegate = 1;
        return NULL;
    }
    Prepared *read = PyMem_New(Prepared, count > 0 ? count : 1);
    int64_t *queue_offsets = PyMem_New(int64_t, count > 0 ? count : 1);
    if (read == NULL || queue_offsets == NULL) {
        PyMem_Free(read);
        PyMem_Free(queue_offsets);
        return PyErr_NoMemory();
    }
    Py_ssize_t held = 0, total_bytes = 0;
    for (; held < count; held++) {
        long long queue_offset;
        if (!read_prepared(w, PyList_GET_ITEM(records, held), &read[held])
            || !int_within(PyList_GET_ITEM(offsets, held), INT64_MIN, INT64_MAX, &queue_offset)
            || read[held].size_bytes > PY_SSIZE_T_MAX - total_bytes) {
            break;
        }
        Py_INCREF(read[held].owner);
        queue_offsets[held] = queue_offset;
        total_bytes += read[held].size_bytes;
    }
    PyObject *pair = NULL;
    if (held < count || physical_offset > INT64_MAX - total_bytes) {
        *delegate = 1;
    }
    else {
        pair = pack_read_records(w, read, queue_offsets, count, total_bytes, physical_offset,
                                 store_timestamp_ms, args);
    }
    for (Py_ssize_t i = 0; i < held; i++) {
        Py_DECREF(read[i].owner);
    }
    PyMem_Free(read);
    PyMem_Free(queue_offsets);
    return pair;
}

static PyObject *
pack_batch(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    const Writer *w = (Writer *)self;
    PyObject *result = NULL;
    int delegate = !(nargs == 5 && kwnames == NULL && PyList_CheckExact(args[0])
                     && PyList_CheckExact(args[1])
                     && PyList_GET_SIZE(args[0]) == PyList_GET_SIZE(args[1]));
    if (!delegate) {
        result = pack_records(w, args, &delegate);
    }
    if (delegate) {
        result = PyObject_Vectorcall(w->pack_reference, args, (size_t)nargs, kwnames);
    }
    return result;
}

static PyMethodDef write_record_def = {
    "write_record", (PyCFunction)(void (*)(void))write_record, METH_FASTCALL | METH_KEYWORDS,
    "write_record(target, position, prepared, queue_offset, physical_offset, "
    "store_timestamp_ms, store_host_packed, /)\n--\n\n"
    "encoder.write_record_reference in C (storage/format/_records.c)."};

static PyMethodDef pack_batch_def = {
    "pack_batch", (PyCFunction)(void (*)(void))pack_batch, METH_FASTCALL | METH_KEYWORDS,
    "pack_batch(records, queue_offsets, physical_offset, store_timestamp_ms, "
    "store_host_packed, /)\n--\n\n"
    "encoder.pack_batch_reference in C (storage/format/_records.c)."};

/* One layout for the writers: (layout, field offsets, born address bytes, store address
 * bytes, head bytes, magic); its fields must tile the head, so that a packed record has no
 * byte left unwritten. */
static int
read_writer_layout(WriterLayout *info, PyObject *entry)
{
    PyObject *offsets;
    if (!PyArg_ParseTuple(entry, "OO!nnni;a layout is (layout, offsets, born address bytes, "
                          "store address bytes, head bytes, magic)", &info->layout,
                          &PyTuple_Type, &offsets, &info->born_address_bytes,
                          &info->store_address_bytes, &info->head_bytes, &info->magic)) {
        info->layout = NULL;
        return -1;
    }
    Py_INCREF(info->layout);
    if (PyTuple_GET_SIZE(offsets) != FIELD_COUNT
        || (info->born_address_bytes != 4 && info->born_address_bytes != 16)
        || (info->store_address_bytes != 4 && info->store_address_bytes != 16)) {
        PyErr_Format(PyExc_ValueError, "a layout needs %d field offsets and addresses of 4 "
                     "or 16 bytes", FIELD_COUNT);
        return -1;
    }
    Py_ssize_t expected = 0;
    for (int i = 0; i < FIELD_COUNT; i++) {
        info->offsets[i] = PyLong_AsSsize_t(PyTuple_GET_ITEM(offsets, i));
        if (info->offsets[i] == -1 && PyErr_Occurred()) {
            return -1;
        }
        if (info->offsets[i] != expected) {
            PyErr_Format(PyExc_ValueError, "field %d is at %zd, not right after the one "
                         "before it (%zd)", i, info->offsets[i], expected);
            return -1;
        }
        expected += RECORD_FIELD_KINDS[i] == 'q' ? 8 : RECORD_FIELD_KINDS[i] == 'i' ? 4
                    : 4 + (i == F_BORN_HOST ? info->born_address_bytes
                                            : info->store_address_bytes);
    }
    if (expected != info->head_bytes) {
        PyErr_Format(PyExc_ValueError, "the fields end at %zd, the head at %zd", expected,
                     info->head_bytes);
        return -1;
    }
    return 0;
}

static int
read_put_result_type(Writer *w, PyObject *slot_names)
{
    if (w->result_type->tp_new != PyBaseObject_Type.tp_new
        || PyTuple_GET_SIZE(slot_names) != PUT_RESULT_SLOT_COUNT) {
        PyErr_Format(PyExc_TypeError, "result_type must be a plain class; %d slot names",
                     PUT_RESULT_SLOT_COUNT);
        return -1;
    }
    for (int i = 0; i < PUT_RESULT_SLOT_COUNT; i++) {
        PyObject *slot = PyObject_GetAttr((PyObject *)w->result_type,
                                          PyTuple_GET_ITEM(slot_names, i));
        if (slot == NULL) {
            return -1;
        }
        w->result_slots[i] = slot;
        if (!PyObject_TypeCheck(slot, &PyMemberDescr_Type)) {
            PyErr_SetString(PyExc_TypeError, "result_type's fields must be slots");
            return -1;
        }
    }
    w->empty_reason = PyUnicode_FromString("");
    return w->empty_reason == NULL ? -1 : 0;
}

/* (write_record, pack_batch), told encoder.py's references, PutResult and the layouts. */
static PyObject *
bind_record_writer(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"write_reference", "pack_reference", "result_type",
                               "result_slots", "status_ok", "layouts", "field_kinds", NULL};
    PyObject *write_reference, *pack_reference, *result_slots, *status_ok, *layouts;
    PyTypeObject *result_type;
    const char *field_kinds;
    if (!PyArg_ParseTupleAndKeywords(
            args, kwargs, "OOO!O!OO!s:bind_record_writer", keywords, &write_reference,
            &pack_reference, &PyType_Type, &result_type, &PyTuple_Type, &result_slots,
            &status_ok, &PyTuple_Type, &layouts, &field_kinds)) {
        return NULL;
    }
    if (strcmp(field_kinds, RECORD_FIELD_KINDS) != 0) {
        return PyErr_Format(PyExc_ValueError, "the record's fields are %s but "
                            "storage/format/_records.c writes %s: update it", field_kinds,
                            RECORD_FIELD_KINDS);
    }
    if (PyTuple_GET_SIZE(layouts) != LAYOUT_COUNT) {
        return PyErr_Format(PyExc_ValueError, "expected %d layouts", LAYOUT_COUNT);
    }
    Writer *w = PyObject_GC_New(Writer, &WriterType);
    if (w == NULL) {
        return NULL;
    }
    memset((char *)w + sizeof(PyObject), 0, sizeof(Writer) - sizeof(PyObject));
    PyObject_GC_Track(w);
    Py_INCREF(write_reference);
    w->write_reference = write_reference;
    Py_INCREF(pack_reference);
    w->pack_reference = pack_reference;
    Py_INCREF(result_type);
    w->result_type = result_type;
    Py_INCREF(status_ok);
    w->status_ok = status_ok;
    int failed = read_put_result_type(w, result_slots);
    for (int i = 0; i < LAYOUT_COUNT && !failed; i++) {
        failed = read_writer_layout(&w->layouts[i], PyTuple_GET_ITEM(layouts, i));
    }
    PyObject *write_name = failed ? NULL : module_name_of(write_reference);
    PyObject *pack_name = write_name != NULL ? module_name_of(pack_reference) : NULL;
    PyObject *pair = NULL;
    if (pack_name != NULL) {  /* each function holds the Writer: no state is shared */
        PyObject *write = PyCFunction_NewEx(&write_record_def, (PyObject *)w, write_name);
        PyObject *pack = write != NULL ? PyCFunction_NewEx(&pack_batch_def, (PyObject *)w,
                                                           pack_name)
                                       : NULL;
        pair = pack != NULL ? PyTuple_Pack(2, write, pack) : NULL;
        Py_XDECREF(write);
        Py_XDECREF(pack);
    }
    Py_XDECREF(write_name);
    Py_XDECREF(pack_name);
    Py_DECREF(w);
    return pair;
}

/* ---------------------------------------------------------------- prepare */

/* encoder.py's MessageEncoder.prepare_reference, for the common message only: a Message
 * (the exact class) with a bytes body, a topic the encoder has cached (`_common`), int queue
 * id and flag in range, no born time or an int one, SYSFLAG and reconsume times 0, and no
 * properties, tags, keys or born host.  Anything else -- including every message the
 * reference refuses -- is handed to the reference. */

enum {
    M_TOPIC, M_QUEUE_ID, M_BODY, M_FLAG, M_BORN_TIMESTAMP, M_SYSFLAG, M_RECONSUME_TIMES,
    M_PROPERTIES, M_TAGS, M_KEYS, M_BORN_HOST, M_PROPERTIES_ENCODED, MESSAGE_SLOT_COUNT
};

/* One encoder's settings, remembered by `bind_prepare`. */
typedef struct {
    PyObject_HEAD
    PyObject *reference;  /* the encoder's bound prepare_reference */
    PyTypeObject *message_type;
    Py_ssize_t slot_offsets[MESSAGE_SLOT_COUNT];  /* where each Message slot is stored */
    PyObject *common;  /* the encoder's dict: topic -> (layout, tail, fixed bytes, host bits) */
    Py_ssize_t body_size_max;
    PyObject *store_host;
} Preparer;

static int
preparer_traverse(Preparer *self, visitproc visit, void *arg)
{
    Py_VISIT(self->reference);
    Py_VISIT(self->message_type);
    Py_VISIT(self->common);
    Py_VISIT(self->store_host);
    return 0;
}

static int
preparer_clear(Preparer *self)
{
    Py_CLEAR(self->reference);
    Py_CLEAR(self->message_type);
    Py_CLEAR(self->common);
    Py_CLEAR(self->store_host);
    return 0;
}

static void
preparer_dealloc(Preparer *self)
{
    PyObject_GC_UnTrack(self);
    preparer_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject PreparerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "mqstore.storage.format._records.Preparer",
    .tp_basicsize = sizeof(Preparer),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "prepare's settings: one encoder's topic cache, body maximum and store host.",
    .tp_traverse = (traverseproc)preparer_traverse,
    .tp_clear = (inquiry)preparer_clear,
    .tp_dealloc = (destructor)preparer_dealloc,
};

static int
is_int_zero(PyObject *object)
{
    long long value;
    return int_within(object, 0, 0, &value);
}

/* The PreparedRecord of a common message whose slots are `m`, or NULL with *delegate set
 * (the reference's case) or not (an error). */
static PyObject *
prepare_common(Preparer *p, PyObject *const *m, int *delegate)
{
    *delegate = 1;
    PyObject *body = m[M_BODY], *keys = m[M_KEYS], *born = m[M_BORN_TIMESTAMP];
    long long queue_id, flag;
    if (!PyBytes_CheckExact(body) || PyBytes_GET_SIZE(body) > p->body_size_max
        || (unsigned long long)PyBytes_GET_SIZE(body) > 0xFFFFFFFFull
        || !int_within(m[M_QUEUE_ID], 0, INT32_MAX, &queue_id)
        || !int_within(m[M_FLAG], INT32_MIN, INT32_MAX, &flag)
        || (born != Py_None && !PyLong_CheckExact(born))
        || !is_int_zero(m[M_SYSFLAG]) || !is_int_zero(m[M_RECONSUME_TIMES])
        || m[M_PROPERTIES] != Py_None || m[M_TAGS] != Py_None || m[M_BORN_HOST] != Py_None
        || m[M_PROPERTIES_ENCODED] != Py_None
        || !((PyTuple_CheckExact(keys) && PyTuple_GET_SIZE(keys) == 0)
             || (PyList_CheckExact(keys) && PyList_GET_SIZE(keys) == 0))
        || !PyUnicode_CheckExact(m[M_TOPIC])) {
        return NULL;
    }
    PyObject *entry = PyDict_GetItemWithError(p->common, m[M_TOPIC]);
    if (entry == NULL) {  /* not cached yet (or an error): the reference caches it */
        PyErr_Clear();
        return NULL;
    }
    if (!PyTuple_CheckExact(entry) || PyTuple_GET_SIZE(entry) != 4
        || !PyBytes_CheckExact(PyTuple_GET_ITEM(entry, 1))) {
        return NULL;
    }
    long long fixed_bytes, host_sysflag;
    if (!int_within(PyTuple_GET_ITEM(entry, 2), 0, INT32_MAX, &fixed_bytes)
        || !int_within(PyTuple_GET_ITEM(entry, 3), 0, INT32_MAX, &host_sysflag)) {
        return NULL;
    }
    *delegate = 0;
    /* Held from here: allocating may run a collection, and with it arbitrary code. */
    PyObject *items[12] = {
        PyTuple_GET_ITEM(entry, 0), NULL, NULL, m[M_QUEUE_ID], m[M_FLAG], NULL,
        p->store_host, body, PyTuple_GET_ITEM(entry, 1), p->store_host,
        PyTuple_GET_ITEM(entry, 3), m[M_RECONSUME_TIMES]};
    for (int i = 0; i < 12; i++) {
        Py_XINCREF(items[i]);
    }
    uLong crc = crc32(0L, (const Bytef *)PyBytes_AS_STRING(body),
                      (uInt)PyBytes_GET_SIZE(body));
    items[1] = PyLong_FromLongLong(fixed_bytes + PyBytes_GET_SIZE(body));
    items[2] = PyLong_FromUnsignedLong(crc & 0x7FFFFFFFul);
    if (born == Py_None) {
        items[5] = PyLong_FromLong(-1);
    }
    else {
        Py_INCREF(born);
        items[5] = born;
    }
    PyObject *prepared = NULL;
    if (items[1] != NULL && items[2] != NULL && items[5] != NULL) {
        prepared = PyTuple_New(12);
    }
    if (prepared == NULL) {
        for (int i = 0; i < 12; i++) {
            Py_XDECREF(items[i]);
        }
        return NULL;
    }
    for (int i = 0; i < 12; i++) {
        PyTuple_SET_ITEM(prepared, i, items[i]);
    }
    return prepared;
}

static PyObject *
prepare(PyObject *self, PyObject *message)
{
    Preparer *p = (Preparer *)self;
    if (Py_IS_TYPE(message, p->message_type)) {
        PyObject *slots[MESSAGE_SLOT_COUNT];
        int complete = 1;
        for (int i = 0; i < MESSAGE_SLOT_COUNT; i++) {
            slots[i] = *(PyObject **)((char *)message + p->slot_offsets[i]);
            complete &= slots[i] != NULL;  /* an unset slot: the reference's AttributeError */
        }
        if (complete) {
            int delegate;
            PyObject *prepared = prepare_common(p, slots, &delegate);
            if (!delegate) {
                return prepared;
            }
        }
    }
    return PyObject_CallOneArg(p->reference, message);
}

static PyMethodDef prepare_def = {
    "prepare", (PyCFunction)prepare, METH_O,
    "prepare(message)\n--\n\n"
    "encoder.MessageEncoder.prepare_reference in C (storage/format/_records.c)."};

static int
read_message_slots(Preparer *p, PyObject *slot_names)
{
    if (PyTuple_GET_SIZE(slot_names) != MESSAGE_SLOT_COUNT) {
        PyErr_Format(PyExc_ValueError, "expected %d Message slot names", MESSAGE_SLOT_COUNT);
        return -1;
    }
    for (int i = 0; i < MESSAGE_SLOT_COUNT; i++) {
        PyObject *slot = PyObject_GetAttr((PyObject *)p->message_type,
                                          PyTuple_GET_ITEM(slot_names, i));
        if (slot == NULL) {
            return -1;
        }
        int is_slot = PyObject_TypeCheck(slot, &PyMemberDescr_Type)
                      && ((PyMemberDescrObject *)slot)->d_member->type == T_OBJECT_EX;
        if (is_slot) {
            p->slot_offsets[i] = ((PyMemberDescrObject *)slot)->d_member->offset;
        }
        Py_DECREF(slot);
        if (!is_slot) {
            PyErr_SetString(PyExc_TypeError, "message_type's fields must be slots");
            return -1;
        }
    }
    return 0;
}

/* prepare, for one encoder: told its bound reference, the Message class and slot names (in
 * the M_ order above), its topic cache dict, body maximum and store host. */
static PyObject *
bind_prepare(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"reference", "message_type", "message_slots", "common",
                               "body_size_max", "store_host", NULL};
    PyObject *reference, *slot_names, *common, *store_host;
    PyTypeObject *message_type;
    Py_ssize_t body_size_max;
    if (!PyArg_ParseTupleAndKeywords(
            args, kwargs, "OO!O!O!nO!:bind_prepare", keywords, &reference, &PyType_Type,
            &message_type, &PyTuple_Type, &slot_names, &PyDict_Type, &common, &body_size_max,
            &PyTuple_Type, &store_host)) {
        return NULL;
    }
    Preparer *p = PyObject_GC_New(Preparer, &PreparerType);
    if (p == NULL) {
        return NULL;
    }
    memset((char *)p + sizeof(PyObject), 0, sizeof(Preparer) - sizeof(PyObject));
    PyObject_GC_Track(p);
    Py_INCREF(reference);
    p->reference = reference;
    Py_INCREF(message_type);
    p->message_type = message_type;
    Py_INCREF(common);
    p->common = common;
    Py_INCREF(store_host);
    p->store_host = store_host;
    p->body_size_max = body_size_max;
    PyObject *function = NULL;
    PyObject *module_name = read_message_slots(p, slot_names) ? NULL
                                                               : module_name_of(reference);
    if (module_name != NULL) {
        function = PyCFunction_NewEx(&prepare_def, (PyObject *)p, module_name);
        Py_DECREF(module_name);
    }
    Py_DECREF(p);  /* the function holds it */
    return function;
}

/* ---------------------------------------------------------------- scan_records */

/* storage/format/dispatch_scan.py's scan_records_reference: a run of whole records, each
 * as a DispatchRecord (a tuple subclass, built without running its constructor).  The walk
 * itself (every record's sizes and position checked as check_record checks them, without
 * the body CRC) reads only the buffer it holds, so it runs without the GIL, a chunk of
 * records at a time; the objects are then built with it.  A record the C cannot answer
 * exactly as the reference (its head would be read past the buffer: the reference raises
 * there) ends the C walk, and the reference reads the rest of the call's range: its result
 * (or exception) is then the call's. */

#define SCAN_CHUNK_RECORDS 1024
#define SCAN_UNLOCKED_RECORDS_MIN 64  /* a shorter walk is not worth a GIL round trip */
#define DISPATCH_RECORD_ITEMS 8

static PyObject *scan_records_reference;
static PyTypeObject *dispatch_record_type;

/* The layout of a whole record at `position`, or NULL where check_record would not say OK
 * (`*delegate` set where it would raise instead). */
static const LayoutInfo *
whole_record(const Checker *c, const unsigned char *bytes, Py_ssize_t length,
             Py_ssize_t position, Py_ssize_t limit, long long expected, int *delegate)
{
    Py_ssize_t left_bytes = limit - position;
    if (left_bytes < c->blank_bytes) {
        return NULL;
    }
    const unsigned char *record = bytes + position;
    const LayoutInfo *first = &c->layouts[0];
    int32_t total_size = read_int32(record + first->offsets[F_TOTAL_SIZE]);
    int32_t magic = read_int32(record + first->offsets[F_MAGIC]);
    if ((magic != c->magic_v1 && magic != c->magic_v2) || total_size < c->fixed_min_bytes
        || total_size > left_bytes) {
        return NULL;
    }
    uint32_t sysflag = (uint32_t)read_int32(record + first->offsets[F_SYSFLAG]);
    const LayoutInfo *layout = &c->layouts[((sysflag & c->born_v6_bit) != 0) * 4
                                           + ((sysflag & c->store_v6_bit) != 0) * 2
                                           + (magic == c->magic_v2)];
    if (layout->head_bytes > length - position) {
        *delegate = 1;
        return NULL;
    }
    char reason[MESSAGE_BYTES];
    return structure_problem(record, layout, expected, reason) == NULL ? layout : NULL;
}

/* Walk up to `count_max` whole records from `*position`, starting before `end`; their
 * positions and layouts go to `starts` and `layouts`.  Returns how many. */
static Py_ssize_t
walk_whole_records(const Checker *c, const unsigned char *bytes, Py_ssize_t length,
                   Py_ssize_t *position, Py_ssize_t end, Py_ssize_t limit,
                   long long segment_start, Py_ssize_t count_max, Py_ssize_t *starts,
                   const LayoutInfo **layouts, int *delegate)
{
    Py_ssize_t count = 0;
    Py_ssize_t at = *position;
    while (at < end && count < count_max) {
        const LayoutInfo *layout = whole_record(c, bytes, length, at, limit,
                                                segment_start + at, delegate);
        if (layout == NULL) {
            break;
        }
        starts[count] = at;
        layouts[count++] = layout;
        at += read_int32(bytes + at + layout->offsets[F_TOTAL_SIZE]);
    }
    *position = at;
    return count;
}

/* The topic as the reference decodes it (ASCII, errors replaced); the previous record's
 * str again when the bytes are the same (topics repeat). */
static PyObject *
scan_topic(const unsigned char *data, Py_ssize_t size, PyObject **previous,
           const unsigned char **previous_data, Py_ssize_t *previous_size)
{
    if (*previous != NULL && *previous_size == size
        && memcmp(*previous_data, data, (size_t)size) == 0) {
        Py_INCREF(*previous);
        return *previous;
    }
    PyObject *topic = PyUnicode_DecodeASCII((const char *)data, size, "replace");
    if (topic != NULL) {
        Py_INCREF(topic);
        Py_XSETREF(*previous, topic);
        *previous_data = data;
        *previous_size = size;
    }
    return topic;
}

/* One DispatchRecord for the whole record at `record` of `layout`. */
static PyObject *
new_dispatch_record(const unsigned char *record, const LayoutInfo *layout, PyObject **topic_cache,
                    const unsigned char **cached_data, Py_ssize_t *cached_size)
{
    const Py_ssize_t *o = layout->offsets;
    int32_t body_size = read_int32(record + o[F_BODY_SIZE]);
    const unsigned char *cursor = record + layout->head_bytes + body_size;
    Py_ssize_t topic_size = read_unsigned(cursor, layout->topic_length_bytes);
    cursor += layout->topic_length_bytes;
    const unsigned char *properties_at = cursor + topic_size + layout->properties_length_bytes;
    Py_ssize_t properties_size = read_unsigned(cursor + topic_size,
                                               layout->properties_length_bytes);
    PyObject *item = dispatch_record_type->tp_alloc(dispatch_record_type,
                                                    DISPATCH_RECORD_ITEMS);
    if (item == NULL) {
        return NULL;
    }
    PyObject *values[DISPATCH_RECORD_ITEMS] = {
        PyLong_FromLongLong(read_int64(record + o[F_PHYSICAL_OFFSET])),
        PyLong_FromLong(read_int32(record + o[F_TOTAL_SIZE])),
        PyLong_FromLong(read_int32(record + o[F_QUEUE_ID])),
        PyLong_FromLongLong(read_int64(record + o[F_QUEUE_OFFSET])),
        PyLong_FromLong(read_int32(record + o[F_SYSFLAG])),
        PyLong_FromLongLong(read_int64(record + o[F_STORE_TIMESTAMP])),
        scan_topic(cursor, topic_size, topic_cache, cached_data, cached_size),
        PyDict_New()};
    int failed = 0;
    for (int i = 0; i < DISPATCH_RECORD_ITEMS; i++) {
        failed |= values[i] == NULL;
        PyTuple_SET_ITEM(item, i, values[i]);  /* a NULL item is fine to dealloc */
    }
    if (failed || decode_pieces(values[DISPATCH_RECORD_ITEMS - 1], (const char *)properties_at,
                                properties_size)) {
        Py_DECREF(item);
        return NULL;
    }
    return item;
}

/* Append the records at `starts` to `records`; -1 on failure. */
static int
append_dispatch_records(PyObject *records, const unsigned char *bytes, const Py_ssize_t *starts,
                        const LayoutInfo **layouts, Py_ssize_t count, PyObject **topic_cache,
                        const unsigned char **cached_data, Py_ssize_t *cached_size)
{
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *item = new_dispatch_record(bytes + starts[i], layouts[i], topic_cache,
                                             cached_data, cached_size);
        if (item == NULL || PyList_Append(records, item) < 0) {
            Py_XDECREF(item);
            return -1;
        }
        Py_DECREF(item);
    }
    return 0;
}

/* The walk over the view: the records go to `records`, the stop position to `*position`. */
static int
scan_view(const Checker *c, const Py_buffer *view, Py_ssize_t *position, Py_ssize_t end,
          Py_ssize_t limit, long long segment_start, Py_ssize_t records_max, PyObject *records,
          int *delegate)
{
    Py_ssize_t starts[SCAN_CHUNK_RECORDS];
    const LayoutInfo *layouts[SCAN_CHUNK_RECORDS];
    const unsigned char *bytes = view->buf;
    PyObject *topic_cache = NULL;
    const unsigned char *cached_data = NULL;
    Py_ssize_t cached_size = 0;
    int failed = 0;
    Py_ssize_t done = 0;
    while (!failed && !*delegate && done < records_max && *position < end) {
        Py_ssize_t chunk = records_max - done < SCAN_CHUNK_RECORDS ? records_max - done
                                                                   : SCAN_CHUNK_RECORDS;
        Py_ssize_t count;
        if (chunk >= SCAN_UNLOCKED_RECORDS_MIN) {
            Py_BEGIN_ALLOW_THREADS
            count = walk_whole_records(c, bytes, view->len, position, end, limit, segment_start,
                                       chunk, starts, layouts, delegate);
            Py_END_ALLOW_THREADS
        }
        else {
            count = walk_whole_records(c, bytes, view->len, position, end, limit, segment_start,
                                       chunk, starts, layouts, delegate);
        }
        failed = append_dispatch_records(records, bytes, starts, layouts, count, &topic_cache,
                                         &cached_data, &cached_size);
        done += count;
        if (count < chunk) {
            break;  /* at the end, a record that is not whole, or one for the reference */
        }
    }
    Py_XDECREF(topic_cache);
    return failed ? -1 : 0;
}

/* The reference for the rest of the range (from `position`, `records_max` records fewer),
 * its records appended to `records`: the call's result, or the reference's exception. */
static PyObject *
scan_rest_by_reference(PyObject *const *args, PyObject *records, Py_ssize_t position,
                       Py_ssize_t records_left)
{
    PyObject *rest = NULL;
    PyObject *start = PyLong_FromSsize_t(position);
    PyObject *left = start != NULL ? PyLong_FromSsize_t(records_left) : NULL;
    if (left != NULL) {
        PyObject *rest_args[6] = {args[0], start, args[2], args[3], args[4], left};
        rest = PyObject_Vectorcall(scan_records_reference, rest_args, 6, NULL);
    }
    Py_XDECREF(start);
    Py_XDECREF(left);
    if (rest == NULL) {
        return NULL;
    }
    PyObject *rest_records = PyTuple_Check(rest) && PyTuple_GET_SIZE(rest) == 2
                             ? PyTuple_GET_ITEM(rest, 0) : NULL;
    PyObject *result = NULL;
    if (rest_records == NULL || !PyList_Check(rest_records)) {
        PyErr_SetString(PyExc_TypeError, "scan_records_reference returned no (list, int)");
    }
    else if (PyList_SetSlice(rest_records, 0, 0, records) == 0) {
        result = PyTuple_Pack(2, rest_records, PyTuple_GET_ITEM(rest, 1));
    }
    Py_DECREF(rest);
    return result;
}

/* Exact ints in range for the call, else 0 (the reference answers). */
static int
scan_arguments(PyObject *const *args, Py_ssize_t *position, Py_ssize_t *end, Py_ssize_t *limit,
               long long *segment_start, Py_ssize_t *records_max)
{
    for (int i = 1; i < 6; i++) {
        if (!PyLong_CheckExact(args[i])) {
            return 0;
        }
    }
    int overflow = 0;
    *position = PyLong_AsSsize_t(args[1]);
    *end = PyLong_AsSsize_t(args[2]);
    *limit = PyLong_AsSsize_t(args[3]);
    *segment_start = PyLong_AsLongLongAndOverflow(args[4], &overflow);
    *records_max = PyLong_AsSsize_t(args[5]);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return !overflow && *position >= 0 && *limit >= 0 && *segment_start >= 0
           && *segment_start <= LLONG_MAX / 2 && *limit <= LLONG_MAX / 4;
}

static PyObject *
scan_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    Checker *c = checker;
    Py_ssize_t position = 0, end = 0, limit = 0, records_max = 0;
    long long segment_start = 0;
    int delegated = c == NULL || nargs != 6 || kwnames != NULL || !is_plain_buffer(args[0])
        || !scan_arguments(args, &position, &end, &limit, &segment_start, &records_max);
    Py_buffer view;
    if (!delegated && PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        PyErr_Clear();
        delegated = 1;
    }
    if (!delegated && ((PyMemoryView_Check(args[0]) && !is_plain_memoryview(args[0]))
                       || limit > view.len)) {
        PyBuffer_Release(&view);
        delegated = 1;
    }
    if (delegated) {
        return PyObject_Vectorcall(scan_records_reference, args, (size_t)nargs, kwnames);
    }
    Py_INCREF(c);  /* held through the call, should a rebinding replace it meanwhile */
    PyObject *records = PyList_New(0);
    int rest_by_reference = 0;
    PyObject *result = NULL;
    if (records != NULL
        && scan_view(c, &view, &position, end, limit, segment_start, records_max, records,
                     &rest_by_reference) == 0) {
        result = rest_by_reference
            ? scan_rest_by_reference(args, records, position,
                                     records_max - PyList_GET_SIZE(records))
            : Py_BuildValue("(On)", records, position);
    }
    PyBuffer_Release(&view);
    Py_XDECREF(records);
    Py_DECREF(c);
    return result;
}

static PyMethodDef scan_records_def = {
    "scan_records", (PyCFunction)(void (*)(void))scan_records, METH_FASTCALL | METH_KEYWORDS,
    "scan_records(buffer, position, end_position, limit, segment_start, records_max, /)\n--\n\n"
    "dispatch_scan.scan_records_reference in C (storage/format/_records.c)."};

/* scan_records, told its reference and the DispatchRecord type (a tuple subclass of
 * DISPATCH_RECORD_ITEMS); it walks with the layouts check_record was bound with. */
static PyObject *
bind_scan_records(PyObject *module, PyObject *args)
{
    PyObject *reference;
    PyTypeObject *record_type;
    if (!PyArg_ParseTuple(args, "OO!:bind_scan_records", &reference, &PyType_Type,
                          &record_type)) {
        return NULL;
    }
    if (!PyType_IsSubtype(record_type, &PyTuple_Type)) {
        return PyErr_Format(PyExc_TypeError, "%s is not a tuple type", record_type->tp_name);
    }
    if (checker == NULL) {
        return PyErr_Format(PyExc_RuntimeError, "bind check_record before scan_records");
    }
    PyObject *fields = PyObject_GetAttrString((PyObject *)record_type, "_fields");
    Py_ssize_t field_count = fields != NULL && PyTuple_Check(fields) ? PyTuple_GET_SIZE(fields)
                                                                     : -1;
    Py_XDECREF(fields);
    if (field_count != DISPATCH_RECORD_ITEMS) {
        PyErr_Clear();
        return PyErr_Format(PyExc_ValueError, "%s must have %d fields, as "
                            "storage/format/_records.c builds it", record_type->tp_name,
                            DISPATCH_RECORD_ITEMS);
    }
    PyObject *module_name = module_name_of(reference);
    if (module_name == NULL) {
        return NULL;
    }
    PyObject *function = PyCFunction_NewEx(&scan_records_def, module, module_name);
    Py_DECREF(module_name);
    if (function != NULL) {
        Py_INCREF(reference);
        Py_XSETREF(scan_records_reference, reference);
        PyTypeObject *previous = dispatch_record_type;
        Py_INCREF(record_type);
        dispatch_record_type = record_type;
        Py_XDECREF(previous);
    }
    return function;
}

/* ---------------------------------------------------------------- put_index_keys */

static PyObject *put_index_keys_reference;

#define INDEX_HEADER_BYTES 40
#define INDEX_SLOT_BYTES 4
#define INDEX_ENTRY_BYTES 20
#define INDEX_HEADER_FIELDS 6
/* Times and offsets past ±2^62 go to the reference, so no difference here overflows. */
#define INDEX_VALUE_BOUND ((long long)1 << 62)

/* One key to store: the message's place and time, the key's index hash. */
typedef struct {
    int64_t physical_offset;
    int64_t store_timestamp_ms;
    int32_t key_hash;
} IndexKey;

/* The keys of messages[first:] (of the first, from key_first), or -1 if any message is not
 * an exact (int, int, list) tuple with values in bound: the reference then runs. */
static Py_ssize_t
count_index_keys(PyObject *messages, Py_ssize_t first, Py_ssize_t key_first)
{
    Py_ssize_t count = 0;
    for (Py_ssize_t m = first; m < PyList_GET_SIZE(messages); m++) {
        PyObject *message = PyList_GET_ITEM(messages, m);
        long long ignored;
        if (!PyTuple_CheckExact(message) || PyTuple_GET_SIZE(message) != 3
            || !int_within(PyTuple_GET_ITEM(message, 0), 0, INDEX_VALUE_BOUND, &ignored)
            || !int_within(PyTuple_GET_ITEM(message, 1), -INDEX_VALUE_BOUND, INDEX_VALUE_BOUND,
                           &ignored)
            || !PyList_CheckExact(PyTuple_GET_ITEM(message, 2))) {
            return -1;
        }
        Py_ssize_t names = PyList_GET_SIZE(PyTuple_GET_ITEM(message, 2));
        count += m == first ? (key_first < names ? names - key_first : 0) : names;
    }
    return count;
}

/* The counted keys, hashed into keys; ends[m - first] = keys read once message m is done.
 * 0, or -1 if a key is not an exact str without surrogates (the reference then runs). */
static int
read_index_keys(PyObject *messages, Py_ssize_t first, Py_ssize_t key_first, IndexKey *keys,
                Py_ssize_t *ends)
{
    Py_ssize_t count = 0;
    for (Py_ssize_t m = first; m < PyList_GET_SIZE(messages); m++) {
        PyObject *message = PyList_GET_ITEM(messages, m);
        int64_t physical_offset = PyLong_AsLongLong(PyTuple_GET_ITEM(message, 0));
        int64_t store_timestamp_ms = PyLong_AsLongLong(PyTuple_GET_ITEM(message, 1));
        PyObject *names = PyTuple_GET_ITEM(message, 2);
        for (Py_ssize_t k = m == first ? key_first : 0; k < PyList_GET_SIZE(names); k++) {
            PyObject *name = PyList_GET_ITEM(names, k);
            uint32_t hash;
            if (!PyUnicode_CheckExact(name) || java_hash_of(name, &hash) != 0) {
                PyErr_Clear();
                return -1;
            }
            int32_t signed_hash = (int32_t)hash;
            keys[count].physical_offset = physical_offset;
            keys[count].store_timestamp_ms = store_timestamp_ms;
            keys[count].key_hash = signed_hash == INT32_MIN ? 0
                                   : signed_hash < 0 ? -signed_hash : signed_hash;
            count++;
        }
        ends[m - first] = count;
    }
    return 0;
}

/* Store keys[0:count] while there is room, as the reference does; returns how many. */
static Py_ssize_t
store_index_keys(unsigned char *file, long long entries_position, long long slot_count,
                 long long index_max, long long *header, const IndexKey *keys,
                 Py_ssize_t count)
{
    long long begin_ms = header[0], end_ms = header[1], begin_offset = header[2];
    long long end_offset = header[3], slots_used = header[4], index = header[5];
    Py_ssize_t stored = 0;
    for (; stored < count && index < index_max; stored++) {
        const IndexKey *key = &keys[stored];
        unsigned char *slot = file + INDEX_HEADER_BYTES
                              + (long long)key->key_hash % slot_count * INDEX_SLOT_BYTES;
        int32_t previous = read_int32(slot);
        if (previous <= 0 || previous > index) {
            previous = 0;
            slots_used++;
        }
        long long elapsed_ms = key->store_timestamp_ms - begin_ms;
        long long diff_seconds = begin_ms <= 0 || elapsed_ms < 0 ? 0 : elapsed_ms / 1000;
        unsigned char *entry = file + entries_position + index * INDEX_ENTRY_BYTES;
        write_int32(entry, key->key_hash);
        write_int64(entry + 4, key->physical_offset);
        write_int32(entry + 12, (int32_t)(diff_seconds > INT32_MAX ? INT32_MAX : diff_seconds));
        write_int32(entry + 16, previous);
        write_int32(slot, (int32_t)index);
        if (index <= 1) {
            begin_offset = key->physical_offset;
            begin_ms = key->store_timestamp_ms;
        }
        index++;
        end_offset = key->physical_offset;
        end_ms = key->store_timestamp_ms;
    }
    if (stored > 0) {
        long long updated[INDEX_HEADER_FIELDS] = {begin_ms, end_ms, begin_offset, end_offset,
                                                  slots_used, index};
        memcpy(header, updated, sizeof(updated));
        write_int64(file, begin_ms);
        write_int64(file + 8, end_ms);
        write_int64(file + 16, begin_offset);
        write_int64(file + 24, end_offset);
        write_int32(file + 32, (int32_t)slots_used);
        write_int32(file + 36, (int32_t)index);
    }
    return stored;
}

/* put_index_keys(mapping, entries_position, hash_slot_count, index_count_max, header,
 * messages, first, key_first): the reference's loop, on keys read and hashed first. */
static PyObject *
put_index_keys(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    long long entries_position, slot_count, index_max, first, key_first;
    long long header[INDEX_HEADER_FIELDS];
    int fits = nargs == 8
        && (Py_IS_TYPE(args[0], mmap_type) || PyByteArray_CheckExact(args[0]))
        && int_within(args[1], 0, PY_SSIZE_T_MAX, &entries_position)
        && int_within(args[2], 1, INT32_MAX, &slot_count)
        && int_within(args[3], 2, INT32_MAX, &index_max)
        && PyList_CheckExact(args[4]) && PyList_GET_SIZE(args[4]) == INDEX_HEADER_FIELDS
        && PyList_CheckExact(args[5])
        && int_within(args[6], 0, PyList_GET_SIZE(args[5]), &first)
        && int_within(args[7], 0, PY_SSIZE_T_MAX, &key_first)
        && entries_position == INDEX_HEADER_BYTES + slot_count * INDEX_SLOT_BYTES;
    for (int i = 0; fits && i < INDEX_HEADER_FIELDS; i++) {
        fits = int_within(PyList_GET_ITEM(args[4], i), -INDEX_VALUE_BOUND, INDEX_VALUE_BOUND,
                          &header[i]);
    }
    fits = fits && header[4] >= 0 && header[4] < INT32_MAX - index_max && header[5] >= 0;
    Py_ssize_t count = fits ? count_index_keys(args[5], first, key_first) : -1;
    Py_buffer view;
    if (count >= 0 && PyObject_GetBuffer(args[0], &view, PyBUF_WRITABLE) < 0) {
        PyErr_Clear();
        count = -1;
    }
    if (count >= 0 && view.len < entries_position + index_max * INDEX_ENTRY_BYTES) {
        PyBuffer_Release(&view);
        count = -1;
    }
    if (count < 0) {
        return PyObject_Vectorcall(put_index_keys_reference, args, (size_t)nargs, NULL);
    }
    Py_ssize_t message_count = PyList_GET_SIZE(args[5]);
    IndexKey *keys = PyMem_Malloc(sizeof(IndexKey) * (size_t)(count + 1));
    Py_ssize_t *ends = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(message_count - first + 1));
    int read = keys != NULL && ends != NULL
               ? read_index_keys(args[5], first, key_first, keys, ends) : -2;
    Py_ssize_t stored = read == 0 ? store_index_keys(view.buf, entries_position, slot_count,
                                                     index_max, header, keys, count) : 0;
    PyBuffer_Release(&view);
    PyObject *result = NULL;
    if (read == -2) {
        PyErr_NoMemory();
    }
    else if (read < 0) {
        result = PyObject_Vectorcall(put_index_keys_reference, args, (size_t)nargs, NULL);
    }
    else {
        int failed = 0;
        for (int i = 0; stored > 0 && i < INDEX_HEADER_FIELDS && !failed; i++) {
            PyObject *value = PyLong_FromLongLong(header[i]);
            failed = value == NULL || PyList_SetItem(args[4], i, value) < 0;
        }
        /* the first key not stored: in the first message whose keys end past it */
        Py_ssize_t message = message_count, key = 0;
        if (stored < count) {
            message = first;
            while (ends[message - first] <= stored) {
                message++;
            }
            Py_ssize_t before = message == first ? 0 : ends[message - first - 1];
            key = stored - before + (message == first ? key_first : 0);
        }
        result = failed ? NULL : Py_BuildValue("(nn)", message, key);
    }
    PyMem_Free(keys);
    PyMem_Free(ends);
    return result;
}

/* ---------------------------------------------------------------- split_batch */

static PyObject *split_batch_reference;

/* Whether needle[0:needle_length] occurs in haystack[0:length]. */
static int
contains_bytes(const char *haystack, Py_ssize_t length, const char *needle,
               Py_ssize_t needle_length)
{
    if (needle_length == 0) {
        return 1;
    }
    for (Py_ssize_t i = 0; i + needle_length <= length; i++) {
        if (haystack[i] == needle[0] && memcmp(haystack + i, needle, (size_t)needle_length) == 0) {
            return 1;
        }
    }
    return 0;
}

/* The batch's own properties: each piece `name 0x01 value` (name not empty) of the encoded
 * string, as batch_body.property_pairs finds them. */
#define OUTER_PAIRS_MAX 64
typedef struct {
    const char *name;        /* the name and its 0x01 */
    Py_ssize_t name_length;
    const char *pair;        /* name 0x01 value; the 0x02 is added when copied */
    Py_ssize_t pair_length;
} OuterPair;

/* The pairs of `properties`, at most OUTER_PAIRS_MAX; -1 if there are more (the reference
 * then runs). */
static int
outer_pairs(const char *properties, Py_ssize_t length, OuterPair *pairs)
{
    int count = 0;
    const char *cursor = properties, *end = properties + length;
    for (;;) {
        const char *separator = memchr(cursor, 0x02, (size_t)(end - cursor));
        const char *piece_end = separator != NULL ? separator : end;
        const char *split = memchr(cursor, 0x01, (size_t)(piece_end - cursor));
        if (split != NULL && split > cursor) {
            if (count >= OUTER_PAIRS_MAX) {
                return -1;
            }
            pairs[count].name = cursor;
            pairs[count].name_length = split + 1 - cursor;
            pairs[count].pair = cursor;
            pairs[count].pair_length = piece_end - cursor;
            count++;
        }
        if (separator == NULL) {
            return count;
        }
        cursor = separator + 1;
    }
}

/* Whether the entry's properties set the outer pair's name themselves (at the start, or
 * after a 0x02). */
static int
sets_itself(const char *inner, Py_ssize_t inner_length, const OuterPair *pair)
{
    if (inner_length >= pair->name_length
        && memcmp(inner, pair->name, (size_t)pair->name_length) == 0) {
        return 1;
    }
    for (Py_ssize_t i = 0; i + 1 + pair->name_length <= inner_length; i++) {
        if (inner[i] == 0x02
            && memcmp(inner + i + 1, pair->name, (size_t)pair->name_length) == 0) {
            return 1;
        }
    }
    return 0;
}

/* One entry's properties: its own (with a last 0x02 added if missing) and the outer pairs
 * it does not set; a new bytes, or NULL with an exception. */
static PyObject *
entry_properties(const char *inner, Py_ssize_t inner_length, const OuterPair *pairs,
                 int pair_count)
{
    int add_separator = inner_length > 0 && inner[inner_length - 1] != 0x02;
    Py_ssize_t own = inner_length + add_separator;
    int keep[OUTER_PAIRS_MAX];
    Py_ssize_t size = own;
    for (int i = 0; i < pair_count; i++) {
        /* the reference's cheap test first: a name found nowhere is never set */
        keep[i] = !contains_bytes(inner, inner_length, pairs[i].name, pairs[i].name_length)
                  || !sets_itself(inner, inner_length, &pairs[i]);
        size += keep[i] ? pairs[i].pair_length + 1 : 0;
    }
    PyObject *result = PyBytes_FromStringAndSize(NULL, size);
    if (result == NULL) {
        return NULL;
    }
    char *out = PyBytes_AS_STRING(result);
    memcpy(out, inner, (size_t)inner_length);
    out += inner_length;
    if (add_separator) {
        *out++ = 0x02;
    }
    for (int i = 0; i < pair_count; i++) {
        if (keep[i]) {
            memcpy(out, pairs[i].pair, (size_t)pairs[i].pair_length);
            out += pairs[i].pair_length;
            *out++ = 0x02;
        }
    }
    return result;
}

/* The (body, flag, properties) tuples of a well-formed batch into `entries`: 0, or 1 if the
 * body is not one the C code answers (the reference then raises its own error), or -1 with
 * an exception. */
static int
split_entries(const char *body, Py_ssize_t length, const OuterPair *pairs, int pair_count,
              long long entries_max, PyObject *entries)
{
    Py_ssize_t position = 0;
    while (position < length) {
        if (PyList_GET_SIZE(entries) >= entries_max || position + 20 > length) {
            return 1;
        }
        const unsigned char *head = (const unsigned char *)body + position;
        long long total = read_int32(head), flag = read_int32(head + 12);
        long long body_length = read_int32(head + 16);
        long long body_at = position + 20, end = position + total;
        long long properties_at = body_at + body_length + 2;
        if (body_length < 0 || total < 22 || end > length || properties_at > end) {
            return 1;
        }
        const unsigned char *length_field = (const unsigned char *)body + properties_at - 2;
        long long properties_length = (int16_t)((uint16_t)length_field[0] << 8 | length_field[1]);
        if (properties_at + properties_length != end) {
            return 1;
        }
        PyObject *entry = PyTuple_New(3);
        if (entry == NULL) {
            return -1;
        }
        PyObject *items[3] = {
            PyBytes_FromStringAndSize(body + body_at, (Py_ssize_t)body_length),
            PyLong_FromLongLong(flag),
            entry_properties(body + properties_at, (Py_ssize_t)properties_length, pairs,
                             pair_count)};
        for (int i = 0; i < 3; i++) {
            PyTuple_SET_ITEM(entry, i, items[i]);  /* a NULL item is skipped by the DECREF */
        }
        if (items[0] == NULL || items[1] == NULL || items[2] == NULL) {
            Py_DECREF(entry);
            return -1;
        }
        int failed = PyList_Append(entries, entry);
        Py_DECREF(entry);
        if (failed) {
            return -1;
        }
        position = (Py_ssize_t)end;
    }
    return PyList_GET_SIZE(entries) == 0 ? 1 : 0;
}

/* split_batch(body, outer_properties, entries_max): batch_body.split_batch_reference for
 * exact bytes; any other argument, and every body the reference refuses, go to it. */
static PyObject *
split_batch(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    long long entries_max;
    OuterPair pairs[OUTER_PAIRS_MAX];
    int pair_count = -1;
    if (nargs == 3 && PyBytes_CheckExact(args[0]) && PyBytes_CheckExact(args[1])
        && int_within(args[2], LLONG_MIN, LLONG_MAX, &entries_max)) {
        pair_count = outer_pairs(PyBytes_AS_STRING(args[1]), PyBytes_GET_SIZE(args[1]), pairs);
    }
    PyObject *entries = pair_count < 0 ? NULL : PyList_New(0);
    if (entries != NULL) {
        int outcome = split_entries(PyBytes_AS_STRING(args[0]), PyBytes_GET_SIZE(args[0]),
                                    pairs, pair_count, entries_max, entries);
        if (outcome == 0) {
            return entries;
        }
        Py_DECREF(entries);
        if (outcome < 0) {
            return NULL;
        }
    }
    else if (pair_count >= 0) {
        return NULL;
    }
    return PyObject_Vectorcall(split_batch_reference, args, (size_t)nargs, NULL);
}

static PyMethodDef bindable_defs[] = {
    {"java_string_hash", (PyCFunction)java_string_hash, METH_O,
     "java_string_hash(text)\n--\n\n"
     "java_hash.java_string_hash_reference in C (storage/format/_records.c)."},
    {"decode_properties", (PyCFunction)decode_properties, METH_O,
     "decode_properties(encoded)\n--\n\n"
     "properties.decode_properties_reference in C (storage/format/_records.c)."},
    {"put_index_keys", (PyCFunction)(void (*)(void))put_index_keys, METH_FASTCALL,
     "put_index_keys(mapping, entries_position, hash_slot_count, index_count_max, header, "
     "messages, first, key_first, /)\n--\n\n"
     "index_put.put_index_keys_reference in C (storage/format/_records.c)."},
    {"split_batch", (PyCFunction)(void (*)(void))split_batch, METH_FASTCALL,
     "split_batch(body, outer_properties, entries_max, /)\n--\n\n"
     "batch_body.split_batch_reference in C (storage/format/_records.c)."},
    {NULL, NULL, 0, NULL},
};

/* Where `bind` remembers each bindable function's reference, in bindable_defs' order. */
static PyObject **bindable_references[] = {
    &java_string_hash_reference, &decode_properties_reference, &put_index_keys_reference,
    &split_batch_reference,
};

static PyObject *
bind(PyObject *module, PyObject *args)
{
    const char *name;
    PyObject *reference;
    if (!PyArg_ParseTuple(args, "sO:bind", &name, &reference)) {
        return NULL;
    }
    PyMethodDef *def = bindable_defs;
    while (def->ml_name != NULL && strcmp(def->ml_name, name) != 0) {
        def++;
    }
    if (def->ml_name == NULL) {
        return PyErr_Format(PyExc_ValueError, "no compiled function %s", name);
    }
    PyObject **remembered = bindable_references[def - bindable_defs];
    PyObject *module_name = module_name_of(reference);
    if (module_name == NULL) {
        return NULL;
    }
    PyObject *function = PyCFunction_NewEx(def, module, module_name);
    Py_DECREF(module_name);
    if (function != NULL) {
        Py_INCREF(reference);
        Py_XSETREF(*remembered, reference);
    }
    return function;
}

static PyMethodDef module_methods[] = {
    {"bind", bind, METH_VARARGS,
     "bind(name, reference)\n--\n\n"
     "The C twin of a reference function of bindable_defs, falling back to it for arguments of "
     "other types."},
    {"bind_check_record", (PyCFunction)(void (*)(void))bind_check_record,
     METH_VARARGS | METH_KEYWORDS,
     "The C twin of record.check_record_reference, told record.py's layouts and types."},
    {"bind_record_writer", (PyCFunction)(void (*)(void))bind_record_writer,
     METH_VARARGS | METH_KEYWORDS,
     "(write_record, pack_batch): the C twins of encoder.py's write_record_reference and "
     "pack_batch_reference, told the record layouts and PutResult."},
    {"bind_prepare", (PyCFunction)(void (*)(void))bind_prepare, METH_VARARGS | METH_KEYWORDS,
     "The C twin of one encoder's MessageEncoder.prepare_reference (the common message)."},
    {"bind_scan_records", bind_scan_records, METH_VARARGS,
     "bind_scan_records(reference, record_type)\n--\n\n"
     "The C twin of dispatch_scan.scan_records_reference, building record_type tuples."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef records_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "mqstore.storage.format._records",
    .m_doc = "The hot per-record codecs in C; storage/format/compiled.py binds them.",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC
PyInit__records(void)
{
    if (PyType_Ready(&CheckerType) < 0 || PyType_Ready(&WriterType) < 0
        || PyType_Ready(&PreparerType) < 0) {
        return NULL;
    }
    return create_extension_module(&records_module, ABI_VERSION);
}
