/* mqstore.storage.format._walk: the Spark data source's record walk in C.
 *
 * Three bulk functions, each the C twin of a Python reference in pipeline/ that stays the
 * definition of its behaviour (pipeline/compiled_walk.py picks one at import; docs/compiled.md):
 *
 *   walk_starts     pipeline/walk.py     walk_starts_reference: record starts along TOTALSIZE
 *   decode_heads    pipeline/decode.py   decode_heads_reference: each record checked as
 *                                        record.check_record does, its fixed fields decoded
 *   record_columns  pipeline/record_columns.py  record_columns_reference: the variable
 *                                        columns of checked records, as StoredMessage has them
 *
 * They take a segment (bytes, bytearray, a memoryview of unsigned bytes or an mmap.mmap) and
 * an int64 array of record starts, and return flat buffers (bytes objects holding int64 or
 * int32 arrays, Arrow offsets and data) that the Python side wraps as numpy or Arrow arrays
 * without a Python object per record.  Anything they do not answer exactly as the reference
 * does (another buffer type, a record that is not well formed) they hand back: they return
 * None and the caller runs the reference.  A corrupt record's reason is never written here:
 * decode_heads asks the reference's own `record_problem` for it.
 *
 * The record's byte layout (big-endian; docs/on-disk-format.md) is not written down here:
 * `bind` is given every layout's field offsets, derived from record.RECORD_FIELDS, and the
 * property names and separators of storage/format/properties.py.
 */
#include "_extension_module.h"  /* Python.h, mmap_type, create_extension_module */
#include <stdint.h>
#include <string.h>
#include <zlib.h>

/* Bumped whenever the Python side's expectations of this module change; compiled_walk.py
 * refuses a build of another version (a stale .so). */
#define ABI_VERSION 1

#define LAYOUT_COUNT 8
/* The items of a layout, in the order `bind` passes them (LAYOUT_ITEM_NAMES). */
enum {
    L_TOTAL_SIZE, L_MAGIC, L_BODY_CRC, L_QUEUE_ID, L_FLAG, L_QUEUE_OFFSET, L_PHYSICAL_OFFSET,
    L_SYSFLAG, L_BORN_TIMESTAMP, L_BORN_HOST, L_STORE_TIMESTAMP, L_STORE_HOST, L_BODY_SIZE,
    L_BORN_HOST_BYTES, L_STORE_HOST_BYTES, L_HEAD_BYTES, L_TOPIC_LENGTH_BYTES,
    L_PROPERTIES_LENGTH_BYTES, L_ITEMS
};
static const char *const LAYOUT_ITEM_NAMES[L_ITEMS] = {
    "total_size", "magic", "body_crc", "queue_id", "flag", "queue_offset", "physical_offset",
    "sysflag", "born_timestamp_ms", "born_host", "store_timestamp_ms", "store_host", "body",
    "born_host_bytes", "store_host_bytes", "head_bytes", "topic_length_bytes",
    "properties_length_bytes"};
/* decode_heads' columns, in the order of decode.py's HEAD_COLUMNS. */
enum {
    H_TOTAL_SIZE, H_QUEUE_ID, H_FLAG, H_QUEUE_OFFSET, H_PHYSICAL_OFFSET, H_SYSFLAG,
    H_BORN_TIMESTAMP, H_STORE_TIMESTAMP, H_TOPIC_START, H_TOPIC_SIZE, H_COLUMNS
};
#define HOST_KEY_BYTES_MAX 20  /* an IPv6 address and an int32 port */
#define NAME_BYTES_MAX 16

static struct {
    int bound;
    Py_ssize_t layouts[LAYOUT_COUNT][L_ITEMS];  /* index: born v6 * 4 + store v6 * 2 + v2 */
    int32_t magic_v1, magic_v2;
    Py_ssize_t blank_bytes, fixed_min_bytes;
    uint32_t born_v6_bit, store_v6_bit;
    char tags_name[NAME_BYTES_MAX], keys_name[NAME_BYTES_MAX];
    Py_ssize_t tags_name_bytes, keys_name_bytes;
    unsigned char property_separator, name_value_separator, key_separator;
    PyObject *decode_properties;  /* properties.decode_properties, for text that is not UTF-8 */
} S;

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

static inline Py_ssize_t
read_unsigned(const unsigned char *p, Py_ssize_t width_bytes)
{
    return width_bytes == 1 ? (Py_ssize_t)p[0] : (Py_ssize_t)((unsigned)p[0] << 8 | p[1]);
}

/* Records lie one after another, but the walk learns where the next one starts only from
 * the current one: a chain of dependent loads the hardware prefetcher does not run ahead of.
 * Asking for the bytes PREFETCH_AHEAD_BYTES further on keeps the walk at memory speed. */
#define PREFETCH_AHEAD_BYTES 1024

static inline void
prefetch(const unsigned char *bytes, Py_ssize_t size, Py_ssize_t at)
{
    /* Clamped into the buffer rather than skipped near its end: GCC drops a conditional
     * prefetch at -O2. */
    Py_ssize_t last = size - 128;
    Py_ssize_t clamped = at < 0 ? 0 : at > last ? last : at;
    if (last >= 0) {
        __builtin_prefetch(bytes + clamped);
        __builtin_prefetch(bytes + clamped + 64);
    }
}

static int
require_bound(void)
{
    if (!S.bound) {
        PyErr_SetString(PyExc_RuntimeError, "mqstore.storage.format._walk is not bound: "
                        "import it through mqstore.pipeline.compiled_walk");
        return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------- growable buffers */

typedef struct {
    char *data;
    Py_ssize_t size;
    Py_ssize_t capacity;
} Buffer;

static int
buffer_reserve(Buffer *b, Py_ssize_t more)
{
    if (more <= b->capacity - b->size) {
        return 0;
    }
    Py_ssize_t capacity = b->capacity > 0 ? b->capacity : 256;
    while (capacity - b->size < more) {
        if (capacity > PY_SSIZE_T_MAX / 2) {
            PyErr_NoMemory();
            return -1;
        }
        capacity *= 2;
    }
    char *data = PyMem_Realloc(b->data, (size_t)capacity);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->data = data;
    b->capacity = capacity;
    return 0;
}

static inline int
buffer_append(Buffer *b, const void *bytes, Py_ssize_t size)
{
    if (buffer_reserve(b, size) < 0) {
        return -1;
    }
    if (size > 0) {
        memcpy(b->data + b->size, bytes, (size_t)size);
    }
    b->size += size;
    return 0;
}

/* An Arrow offset (int32): the size of `data` so far. */
static inline int
buffer_offset(Buffer *offsets, const Buffer *data, const char *what)
{
    if (data->size > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "one Arrow batch of %s exceeds 2 GiB: lower batchRows",
                     what);
        return -1;
    }
    int32_t offset = (int32_t)data->size;
    return buffer_append(offsets, &offset, 4);
}

static PyObject *
buffer_bytes(const Buffer *b)
{
    return PyBytes_FromStringAndSize(b->data != NULL ? b->data : "", b->size);
}

static void
buffer_free(Buffer *b)
{
    PyMem_Free(b->data);
    b->data = NULL;
    b->size = b->capacity = 0;
}

/* ---------------------------------------------------------------- arguments */

/* A memoryview whose bytes are the record bytes: one dimension of unsigned bytes. */
static int
is_plain_memoryview(PyObject *object)
{
    const Py_buffer *own = PyMemoryView_GET_BUFFER(object);
    return own->ndim == 1 && own->itemsize == 1
           && (own->format == NULL || strcmp(own->format, "B") == 0);
}

/* 1 with `view` held if `object` is a segment buffer this file reads, 0 to hand the call to
 * the reference. */
static int
segment_view(PyObject *object, Py_buffer *view)
{
    if (!PyBytes_CheckExact(object) && !PyByteArray_CheckExact(object)
        && !PyMemoryView_Check(object) && !Py_IS_TYPE(object, mmap_type)) {
        return 0;
    }
    if (PyMemoryView_Check(object) && !is_plain_memoryview(object)) {
        return 0;
    }
    if (PyObject_GetBuffer(object, view, PyBUF_SIMPLE) < 0) {
        PyErr_Clear();
        return 0;
    }
    return 1;
}

/* 1 with `view` held if `object` is a C-contiguous array of native int64, else 0. */
static int
starts_view(PyObject *object, Py_buffer *view)
{
    if (PyObject_GetBuffer(object, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyErr_Clear();
        return 0;
    }
    const char *format = view->format != NULL ? view->format : "B";
    if (view->itemsize != 8 || view->len % 8 != 0 || view->ndim != 1
        || (strcmp(format, "q") != 0 && strcmp(format, "l") != 0
            && strcmp(format, "=q") != 0 && strcmp(format, "<q") != 0)) {
        PyBuffer_Release(view);
        return 0;
    }
    return 1;
}

static const Py_ssize_t *
layout_of(const unsigned char *record)
{
    const Py_ssize_t *first = S.layouts[0];
    uint32_t sysflag = (uint32_t)read_int32(record + first[L_SYSFLAG]);
    int32_t magic = read_int32(record + first[L_MAGIC]);
    return S.layouts[((sysflag & S.born_v6_bit) != 0) * 4
                     + ((sysflag & S.store_v6_bit) != 0) * 2 + (magic == S.magic_v2)];
}

/* The layout of a whole, well-formed message at `position` of a buffer of `size` bytes
 * whose records must end by `limit`: magic v1 / v2, TOTALSIZE in [smallest, limit -
 * position], the head inside the buffer, BODYLEN >= 0 and the lengths adding up to
 * TOTALSIZE.  NULL if any of that fails.  Sets the body size, topic start and size and the
 * properties start and size. */
static const Py_ssize_t *
well_formed(const unsigned char *bytes, Py_ssize_t size, Py_ssize_t position,
            Py_ssize_t limit, Py_ssize_t *parts)
{
    if (position < 0 || limit > size || limit - position < S.blank_bytes) {
        return NULL;
    }
    const unsigned char *record = bytes + position;
    int32_t total_size = read_int32(record + S.layouts[0][L_TOTAL_SIZE]);
    int32_t magic = read_int32(record + S.layouts[0][L_MAGIC]);
    if ((magic != S.magic_v1 && magic != S.magic_v2) || total_size < S.fixed_min_bytes
        || total_size > limit - position) {
        return NULL;
    }
    const Py_ssize_t *layout = layout_of(record);
    if (layout[L_HEAD_BYTES] > size - position) {
        return NULL;
    }
    int32_t body_size = read_int32(record + layout[L_BODY_SIZE]);
    long long cursor = (long long)layout[L_HEAD_BYTES] + body_size;
    if (body_size < 0 || cursor + layout[L_TOPIC_LENGTH_BYTES] > total_size) {
        return NULL;
    }
    Py_ssize_t topic_size = read_unsigned(record + cursor, layout[L_TOPIC_LENGTH_BYTES]);
    long long topic_start = cursor + layout[L_TOPIC_LENGTH_BYTES];
    cursor = topic_start + topic_size;
    if (cursor + layout[L_PROPERTIES_LENGTH_BYTES] > total_size) {
        return NULL;
    }
    Py_ssize_t properties_size = read_unsigned(record + cursor,
                                               layout[L_PROPERTIES_LENGTH_BYTES]);
    cursor += layout[L_PROPERTIES_LENGTH_BYTES];
    if (cursor + properties_size != total_size) {
        return NULL;
    }
    parts[0] = body_size;
    parts[1] = position + (Py_ssize_t)topic_start;
    parts[2] = topic_size;
    parts[3] = position + (Py_ssize_t)cursor;
    parts[4] = properties_size;
    return layout;
}

/* ---------------------------------------------------------------- walk_starts */

static PyObject *
walk_starts(PyObject *module, PyObject *args)
{
    PyObject *segment;
    Py_ssize_t position, range_end, limit;
    if (!PyArg_ParseTuple(args, "Onnn:walk_starts", &segment, &position, &range_end, &limit)
        || require_bound() < 0) {
        return NULL;
    }
    Py_buffer view;
    if (!segment_view(segment, &view)) {
        Py_RETURN_NONE;
    }
    if (position < 0 || limit > view.len) {
        PyBuffer_Release(&view);
        Py_RETURN_NONE;
    }
    const unsigned char *bytes = view.buf;
    Buffer starts = {0};
    int failed = 0;
    while (position < range_end) {
        if (limit - position < S.blank_bytes) {
            break;
        }
        int32_t total_size = read_int32(bytes + position + S.layouts[0][L_TOTAL_SIZE]);
        int32_t magic = read_int32(bytes + position + S.layouts[0][L_MAGIC]);
        if ((magic != S.magic_v1 && magic != S.magic_v2) || total_size < S.fixed_min_bytes
            || total_size > limit - position) {
            break;
        }
        prefetch(bytes, limit, position + PREFETCH_AHEAD_BYTES);
        int64_t start = position;
        if (buffer_append(&starts, &start, 8) < 0) {
            failed = 1;
            break;
        }
        position += total_size;
    }
    PyBuffer_Release(&view);
    PyObject *result = failed ? NULL : Py_BuildValue("Nn", buffer_bytes(&starts), position);
    buffer_free(&starts);
    return result;
}

/* ---------------------------------------------------------------- decode_heads */

/* 1 if the record at `position` is one check_record calls OK (limit: the buffer's end);
 * its columns are then written. */
static int
decode_head(const unsigned char *bytes, Py_ssize_t size, Py_ssize_t position,
            long long base, int verify_crc, int64_t *columns, Py_ssize_t count,
            Py_ssize_t index)
{
    Py_ssize_t parts[5];
    const Py_ssize_t *layout = well_formed(bytes, size, position, size, parts);
    if (layout == NULL) {
        return 0;
    }
    const unsigned char *record = bytes + position;
    int64_t physical_offset = read_int64(record + layout[L_PHYSICAL_OFFSET]);
    if (physical_offset != base + position) {
        return 0;
    }
    if (verify_crc) {
        unsigned long crc = crc32(0L, record + layout[L_HEAD_BYTES], (uInt)parts[0])
                            & 0x7FFFFFFFul;
        if ((long long)crc != read_int32(record + layout[L_BODY_CRC])) {
            return 0;
        }
    }
    columns[H_TOTAL_SIZE * count + index] = read_int32(record + layout[L_TOTAL_SIZE]);
    columns[H_QUEUE_ID * count + index] = read_int32(record + layout[L_QUEUE_ID]);
    columns[H_FLAG * count + index] = read_int32(record + layout[L_FLAG]);
    columns[H_QUEUE_OFFSET * count + index] = read_int64(record + layout[L_QUEUE_OFFSET]);
    columns[H_PHYSICAL_OFFSET * count + index] = physical_offset;
    columns[H_SYSFLAG * count + index] = read_int32(record + layout[L_SYSFLAG]);
    columns[H_BORN_TIMESTAMP * count + index] = read_int64(record + layout[L_BORN_TIMESTAMP]);
    columns[H_STORE_TIMESTAMP * count + index] = read_int64(record + layout[L_STORE_TIMESTAMP]);
    columns[H_TOPIC_START * count + index] = parts[1];
    columns[H_TOPIC_SIZE * count + index] = parts[2];
    return 1;
}

/* The reference's reason for a record the fast path did not accept; -1 on error. */
static int
add_problem(PyObject *problems, PyObject *record_problem, PyObject *segment,
            Py_ssize_t index, int64_t position, PyObject *base, int verify_crc)
{
    PyObject *reason = PyObject_CallFunction(record_problem, "OLOO", segment,
                                             (long long)position, base,
                                             verify_crc ? Py_True : Py_False);
    if (reason == NULL) {
        return -1;
    }
    if (!PyUnicode_CheckExact(reason)) {
        Py_DECREF(reason);
        PyErr_Format(PyExc_SystemError, "record_problem found nothing wrong at %lld, where "
                     "storage/format/_walk.c did", (long long)position);
        return -1;
    }
    PyObject *key = PyLong_FromSsize_t(index);
    int failed = key == NULL || PyDict_SetItem(problems, key, reason) < 0;
    Py_XDECREF(key);
    Py_DECREF(reason);
    return failed ? -1 : 0;
}

static PyObject *
decode_heads(PyObject *module, PyObject *args)
{
    PyObject *segment, *starts_object, *base_object, *record_problem;
    int verify_crc;
    if (!PyArg_ParseTuple(args, "OOO!pO:decode_heads", &segment, &starts_object,
                          &PyLong_Type, &base_object, &verify_crc, &record_problem)
        || require_bound() < 0) {
        return NULL;
    }
    long long base = PyLong_AsLongLong(base_object);
    if ((base == -1 && PyErr_Occurred()) || base < 0 || base > LLONG_MAX - PY_SSIZE_T_MAX) {
        PyErr_Clear();  /* base + position could overflow: the reference's case */
        Py_RETURN_NONE;
    }
    Py_buffer view, starts;
    if (!segment_view(segment, &view)) {
        Py_RETURN_NONE;
    }
    if (!starts_view(starts_object, &starts)) {
        PyBuffer_Release(&view);
        Py_RETURN_NONE;
    }
    Py_ssize_t count = starts.len / 8;
    const int64_t *positions = starts.buf;
    PyObject *columns = PyBytes_FromStringAndSize(NULL, count * H_COLUMNS * 8);
    PyObject *problems = PyDict_New();
    int failed = columns == NULL || problems == NULL;
    if (!failed) {
        int64_t *out = (int64_t *)PyBytes_AS_STRING(columns);
        memset(out, 0, (size_t)(count * H_COLUMNS * 8));
        for (Py_ssize_t i = 0; i < count && !failed; i++) {
            int64_t position = positions[i];
            if (i + 4 < count) {
                prefetch(view.buf, view.len, (Py_ssize_t)positions[i + 4]);
            }
            int ok = position >= 0 && position <= view.len
                     && decode_head(view.buf, view.len, (Py_ssize_t)position, base,
                                    verify_crc, out, count, i);
            if (!ok) {
                failed = add_problem(problems, record_problem, segment, i, position,
                                     base_object, verify_crc) < 0;
            }
        }
    }
    PyBuffer_Release(&starts);
    PyBuffer_Release(&view);
    if (failed) {
        Py_XDECREF(columns);
        Py_XDECREF(problems);
        return NULL;
    }
    return Py_BuildValue("NN", columns, problems);
}

/* ---------------------------------------------------------------- UTF-8 */

/* Whether bytes are well-formed UTF-8 (Unicode table 3-7), exactly what Python's strict
 * decoder accepts: no overlong forms, no surrogates, nothing above U+10FFFF. */
static int
utf8_valid(const unsigned char *s, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    while (i < n) {
        if (n - i >= 8) {
            uint64_t word;
            memcpy(&word, s + i, 8);
            if ((word & 0x8080808080808080ull) == 0) {
                i += 8;
                continue;
            }
        }
        unsigned char c = s[i];
        if (c < 0x80) {
            i += 1;
            continue;
        }
        Py_ssize_t width = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3
                           : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        if (width == 0 || n - i < width) {
            return 0;
        }
        unsigned char second = s[i + 1];
        unsigned char low = 0x80, high = 0xBF;
        if (c == 0xE0) {
            low = 0xA0;
        }
        else if (c == 0xED) {
            high = 0x9F;
        }
        else if (c == 0xF0) {
            low = 0x90;
        }
        else if (c == 0xF4) {
            high = 0x8F;
        }
        if (second < low || second > high) {
            return 0;
        }
        for (Py_ssize_t k = 2; k < width; k++) {
            if ((s[i + k] & 0xC0) != 0x80) {
                return 0;
            }
        }
        i += width;
    }
    return 1;
}

/* ---------------------------------------------------------------- properties */

typedef struct {
    const char *name;
    Py_ssize_t name_bytes;
    const char *value;
    Py_ssize_t value_bytes;
} Property;

/* One record's properties, names unique in first-seen order (a dict's order), and the
 * scratch hash table that makes them unique. */
typedef struct {
    Property *items;
    Py_ssize_t count, capacity;
    int32_t *slots;
    Py_ssize_t slot_count, slot_capacity;
} Properties;

static uint64_t
hash_bytes(const char *bytes, Py_ssize_t size)
{
    uint64_t hash = 1469598103934665603ull;  /* FNV-1a */
    for (Py_ssize_t i = 0; i < size; i++) {
        hash = (hash ^ (unsigned char)bytes[i]) * 1099511628211ull;
    }
    return hash;
}

/* Empty the list, ready for at most `most` properties. */
static int
properties_reset(Properties *p, Py_ssize_t most)
{
    if (most > p->capacity) {
        Property *items = PyMem_Realloc(p->items, (size_t)most * sizeof(Property));
        if (items == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        p->items = items;
        p->capacity = most;
    }
    Py_ssize_t slots = 16;
    while (slots < 2 * most) {
        slots *= 2;
    }
    if (slots > p->slot_capacity) {
        int32_t *table = PyMem_Realloc(p->slots, (size_t)slots * sizeof(int32_t));
        if (table == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        p->slots = table;
        p->slot_capacity = slots;
    }
    p->slot_count = slots;
    memset(p->slots, 0xFF, (size_t)slots * sizeof(int32_t));
    p->count = 0;
    return 0;
}

/* properties[name] = value: a repeated name keeps its place and takes the new value. */
static void
properties_set(Properties *p, const char *name, Py_ssize_t name_bytes, const char *value,
               Py_ssize_t value_bytes)
{
    Py_ssize_t mask = p->slot_count - 1;
    Py_ssize_t slot = (Py_ssize_t)(hash_bytes(name, name_bytes) & (uint64_t)mask);
    while (p->slots[slot] >= 0) {
        Property *known = &p->items[p->slots[slot]];
        if (known->name_bytes == name_bytes && memcmp(known->name, name, (size_t)name_bytes) == 0) {
            known->value = value;
            known->value_bytes = value_bytes;
            return;
        }
        slot = (slot + 1) & mask;
    }
    p->slots[slot] = (int32_t)p->count;
    p->items[p->count++] = (Property){name, name_bytes, value, value_bytes};
}

/* properties.decode_properties_reference on UTF-8 text: split on the property separator,
 * keep pieces with the name-value separator strictly inside.  Splitting bytes equals
 * splitting the decoded text: both separators are ASCII. */
static int
split_properties(Properties *p, const char *data, Py_ssize_t size)
{
    if (properties_reset(p, size / 3 + 2) < 0) {
        return -1;
    }
    const char *cursor = data;
    const char *end = data + size;
    while (size > 0) {
        const char *separator = memchr(cursor, S.property_separator, (size_t)(end - cursor));
        const char *piece_end = separator != NULL ? separator : end;
        const char *split = memchr(cursor, S.name_value_separator, (size_t)(piece_end - cursor));
        if (split != NULL && split > cursor && split < piece_end - 1) {
            properties_set(p, cursor, split - cursor, split + 1, piece_end - split - 1);
        }
        if (separator == NULL) {
            break;
        }
        cursor = separator + 1;
    }
    return 0;
}

/* Text that is not UTF-8: the dict decode_properties makes of it (it replaces what does not
 * decode), its items as UTF-8.  `*holder` keeps the dict, and so the texts, alive. */
static int
decoded_properties(Properties *p, const char *data, Py_ssize_t size, PyObject **holder)
{
    PyObject *raw = PyBytes_FromStringAndSize(data, size);
    if (raw == NULL) {
        return -1;
    }
    PyObject *decoded = PyObject_CallOneArg(S.decode_properties, raw);
    Py_DECREF(raw);
    if (decoded == NULL) {
        return -1;
    }
    *holder = decoded;
    if (!PyDict_CheckExact(decoded)) {
        PyErr_SetString(PyExc_TypeError, "decode_properties returned no dict");
        return -1;
    }
    if (properties_reset(p, PyDict_GET_SIZE(decoded)) < 0) {
        return -1;
    }
    Py_ssize_t at = 0;
    PyObject *name, *value;
    while (PyDict_Next(decoded, &at, &name, &value)) {
        Py_ssize_t name_bytes, value_bytes;
        const char *name_text = PyUnicode_Check(name)
                                ? PyUnicode_AsUTF8AndSize(name, &name_bytes) : NULL;
        const char *value_text = name_text != NULL && PyUnicode_Check(value)
                                 ? PyUnicode_AsUTF8AndSize(value, &value_bytes) : NULL;
        if (value_text == NULL) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_TypeError, "decode_properties returned a non-str item");
            }
            return -1;
        }
        p->items[p->count++] = (Property){name_text, name_bytes, value_text, value_bytes};
    }
    return 0;
}

static const Property *
find_property(const Properties *p, const char *name, Py_ssize_t name_bytes)
{
    for (Py_ssize_t i = 0; i < p->count; i++) {
        if (p->items[i].name_bytes == name_bytes
            && memcmp(p->items[i].name, name, (size_t)name_bytes) == 0) {
            return &p->items[i];
        }
    }
    return NULL;
}

/* ---------------------------------------------------------------- hosts */

/* Distinct hosts (address + int32 port, 8 or 20 bytes) in first-seen order. */
typedef struct {
    unsigned char (*keys)[HOST_KEY_BYTES_MAX];
    unsigned char *key_bytes;
    Py_ssize_t count, capacity;
    int32_t *slots;
    Py_ssize_t slot_count;
} Hosts;

static int
hosts_grow(Hosts *h)
{
    Py_ssize_t capacity = h->capacity > 0 ? h->capacity * 2 : 16;
    void *keys = PyMem_Realloc(h->keys, (size_t)capacity * HOST_KEY_BYTES_MAX);
    if (keys == NULL) {
        return -1;
    }
    h->keys = keys;
    void *sizes = PyMem_Realloc(h->key_bytes, (size_t)capacity);
    if (sizes == NULL) {
        return -1;
    }
    h->key_bytes = sizes;
    int32_t *slots = PyMem_Malloc((size_t)capacity * 2 * sizeof(int32_t));
    if (slots == NULL) {
        return -1;
    }
    memset(slots, 0xFF, (size_t)capacity * 2 * sizeof(int32_t));
    Py_ssize_t mask = capacity * 2 - 1;
    for (Py_ssize_t i = 0; i < h->count; i++) {
        Py_ssize_t slot = (Py_ssize_t)(hash_bytes((const char *)h->keys[i], h->key_bytes[i])
                                       & (uint64_t)mask);
        while (slots[slot] >= 0) {
            slot = (slot + 1) & mask;
        }
        slots[slot] = (int32_t)i;
    }
    PyMem_Free(h->slots);
    h->slots = slots;
    h->slot_count = capacity * 2;
    h->capacity = capacity;
    return 0;
}

/* The index of a host, added if new; -1 (no memory) on error. */
static int32_t
hosts_index(Hosts *h, const unsigned char *key, Py_ssize_t size)
{
    if (h->count >= h->capacity && hosts_grow(h) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t mask = h->slot_count - 1;
    Py_ssize_t slot = (Py_ssize_t)(hash_bytes((const char *)key, size) & (uint64_t)mask);
    while (h->slots[slot] >= 0) {
        int32_t known = h->slots[slot];
        if (h->key_bytes[known] == size && memcmp(h->keys[known], key, (size_t)size) == 0) {
            return known;
        }
        slot = (slot + 1) & mask;
    }
    memcpy(h->keys[h->count], key, (size_t)size);
    h->key_bytes[h->count] = (unsigned char)size;
    h->slots[slot] = (int32_t)h->count;
    return (int32_t)h->count++;
}

static PyObject *
hosts_list(const Hosts *h)
{
    PyObject *list = PyList_New(h->count);
    for (Py_ssize_t i = 0; list != NULL && i < h->count; i++) {
        PyObject *key = PyBytes_FromStringAndSize((const char *)h->keys[i], h->key_bytes[i]);
        if (key == NULL) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, i, key);
    }
    return list;
}

static void
hosts_free(Hosts *h)
{
    PyMem_Free(h->keys);
    PyMem_Free(h->key_bytes);
    PyMem_Free(h->slots);
}

/* ---------------------------------------------------------------- record_columns */

/* Output buffers, in the order record_columns returns them (record_columns.py unpacks). */
enum {
    C_BODY_OFFSETS, C_BODIES, C_MAP_OFFSETS, C_NAME_OFFSETS, C_NAMES, C_VALUE_OFFSETS, C_VALUES,
    C_TAG_VALIDITY, C_TAG_OFFSETS, C_TAGS, C_KEY_LIST_OFFSETS, C_KEY_OFFSETS, C_KEYS,
    C_BORN_HOSTS, C_STORE_HOSTS, C_MSG_ID_OFFSETS, C_MSG_IDS, C_BUFFERS
};

typedef struct {
    Buffer out[C_BUFFERS];
    Properties properties;
    Hosts hosts;
} Columns;

static int
append_hex(Buffer *b, const unsigned char *bytes, Py_ssize_t size)
{
    static const char digits[] = "0123456789ABCDEF";
    if (buffer_reserve(b, 2 * size) < 0) {
        return -1;
    }
    for (Py_ssize_t i = 0; i < size; i++) {
        b->data[b->size++] = digits[bytes[i] >> 4];
        b->data[b->size++] = digits[bytes[i] & 0xF];
    }
    return 0;
}

/* The map, TAGS and KEYS of one record from its (unique) properties. */
static int
emit_properties(Columns *c, const Properties *p, Py_ssize_t row)
{
    Buffer *out = c->out;
    for (Py_ssize_t i = 0; i < p->count; i++) {
        const Property *item = &p->items[i];
        if (buffer_append(&out[C_NAMES], item->name, item->name_bytes) < 0
            || buffer_offset(&out[C_NAME_OFFSETS], &out[C_NAMES], "property names") < 0
            || buffer_append(&out[C_VALUES], item->value, item->value_bytes) < 0
            || buffer_offset(&out[C_VALUE_OFFSETS], &out[C_VALUES], "property values") < 0) {
            return -1;
        }
    }
    int32_t entries = (int32_t)(out[C_NAME_OFFSETS].size / 4 - 1);
    const Property *tags = find_property(p, S.tags_name, S.tags_name_bytes);
    if (tags != NULL) {
        out[C_TAG_VALIDITY].data[row / 8] |= (char)(1 << (row % 8));
        if (buffer_append(&out[C_TAGS], tags->value, tags->value_bytes) < 0) {
            return -1;
        }
    }
    const Property *keys = find_property(p, S.keys_name, S.keys_name_bytes);
    const char *cursor = keys != NULL ? keys->value : NULL;
    const char *end = keys != NULL ? keys->value + keys->value_bytes : NULL;
    while (cursor != NULL && cursor < end) {
        const char *space = memchr(cursor, S.key_separator, (size_t)(end - cursor));
        const char *key_end = space != NULL ? space : end;
        if (key_end > cursor && (buffer_append(&out[C_KEYS], cursor, key_end - cursor) < 0
                                 || buffer_offset(&out[C_KEY_OFFSETS], &out[C_KEYS], "keys") < 0)) {
            return -1;
        }
        cursor = key_end + 1;
    }
    int32_t keys_so_far = (int32_t)(out[C_KEY_OFFSETS].size / 4 - 1);
    return buffer_append(&out[C_MAP_OFFSETS], &entries, 4) < 0
           || buffer_offset(&out[C_TAG_OFFSETS], &out[C_TAGS], "tags") < 0
           || buffer_append(&out[C_KEY_LIST_OFFSETS], &keys_so_far, 4) < 0 ? -1 : 0;
}

/* One record's columns; 0 if it is not well formed (the reference decodes it), -1 on error. */
static int
record_row(Columns *c, const unsigned char *bytes, Py_ssize_t size, int64_t position,
           Py_ssize_t row)
{
    Py_ssize_t parts[5];
    const Py_ssize_t *layout = position < 0 || position > size ? NULL
        : well_formed(bytes, size, (Py_ssize_t)position, size, parts);
    if (layout == NULL) {
        return 0;
    }
    const unsigned char *record = bytes + position;
    if (read_int64(record + layout[L_PHYSICAL_OFFSET]) < 0) {
        return 0;  /* the reference's msg id cannot encode it */
    }
    Buffer *out = c->out;
    if (buffer_append(&out[C_BODIES], record + layout[L_HEAD_BYTES], parts[0]) < 0
        || buffer_offset(&out[C_BODY_OFFSETS], &out[C_BODIES], "bodies") < 0) {
        return -1;
    }
    const char *properties = (const char *)bytes + parts[3];
    PyObject *holder = NULL;
    int failed = utf8_valid((const unsigned char *)properties, parts[4])
                 ? split_properties(&c->properties, properties, parts[4])
                 : decoded_properties(&c->properties, properties, parts[4], &holder);
    failed = failed < 0 || emit_properties(c, &c->properties, row) < 0;
    Py_XDECREF(holder);
    const unsigned char *born = record + layout[L_BORN_HOST];
    const unsigned char *store = record + layout[L_STORE_HOST];
    int32_t born_index = failed ? -1 : hosts_index(&c->hosts, born, layout[L_BORN_HOST_BYTES]);
    int32_t store_index = born_index < 0 ? -1
        : hosts_index(&c->hosts, store, layout[L_STORE_HOST_BYTES]);
    if (store_index < 0
        || buffer_append(&out[C_BORN_HOSTS], &born_index, 4) < 0
        || buffer_append(&out[C_STORE_HOSTS], &store_index, 4) < 0
        || append_hex(&out[C_MSG_IDS], store, layout[L_STORE_HOST_BYTES]) < 0
        || append_hex(&out[C_MSG_IDS], record + layout[L_PHYSICAL_OFFSET], 8) < 0
        || buffer_offset(&out[C_MSG_ID_OFFSETS], &out[C_MSG_IDS], "msg ids") < 0) {
        return -1;
    }
    return 1;
}

static void
columns_free(Columns *c)
{
    for (int i = 0; i < C_BUFFERS; i++) {
        buffer_free(&c->out[i]);
    }
    PyMem_Free(c->properties.items);
    PyMem_Free(c->properties.slots);
    hosts_free(&c->hosts);
}

/* Every list's first offset, and a zeroed validity bitmap for `count` rows. */
static int
columns_start(Columns *c, Py_ssize_t count)
{
    static const int offsets[] = {C_BODY_OFFSETS, C_MAP_OFFSETS, C_NAME_OFFSETS,
                                  C_VALUE_OFFSETS, C_TAG_OFFSETS, C_KEY_LIST_OFFSETS,
                                  C_KEY_OFFSETS, C_MSG_ID_OFFSETS};
    int32_t zero = 0;
    for (size_t i = 0; i < sizeof offsets / sizeof offsets[0]; i++) {
        if (buffer_append(&c->out[offsets[i]], &zero, 4) < 0) {
            return -1;
        }
    }
    Buffer *validity = &c->out[C_TAG_VALIDITY];
    Py_ssize_t validity_bytes = (count + 7) / 8;
    if (buffer_reserve(validity, validity_bytes) < 0) {
        return -1;
    }
    if (validity_bytes > 0) {
        memset(validity->data, 0, (size_t)validity_bytes);
    }
    validity->size = validity_bytes;
    return buffer_reserve(&c->out[C_BODY_OFFSETS], 4 * count) < 0 ? -1 : 0;
}

static PyObject *
columns_result(const Columns *c)
{
    PyObject *result = PyTuple_New(C_BUFFERS + 1);
    for (int i = 0; result != NULL && i < C_BUFFERS; i++) {
        PyObject *item = buffer_bytes(&c->out[i]);
        if (item == NULL) {
            Py_CLEAR(result);
            break;
        }
        PyTuple_SET_ITEM(result, i, item);
    }
    PyObject *hosts = result != NULL ? hosts_list(&c->hosts) : NULL;
    if (hosts == NULL) {
        Py_XDECREF(result);
        return NULL;
    }
    PyTuple_SET_ITEM(result, C_BUFFERS, hosts);
    return result;
}

static PyObject *
record_columns(PyObject *module, PyObject *args)
{
    PyObject *segment, *starts_object;
    if (!PyArg_ParseTuple(args, "OO:record_columns", &segment, &starts_object)
        || require_bound() < 0) {
        return NULL;
    }
    Py_buffer view, starts;
    if (!segment_view(segment, &view)) {
        Py_RETURN_NONE;
    }
    if (!starts_view(starts_object, &starts)) {
        PyBuffer_Release(&view);
        Py_RETURN_NONE;
    }
    Py_ssize_t count = starts.len / 8;
    const int64_t *positions = starts.buf;
    Columns columns;
    memset(&columns, 0, sizeof columns);
    int status = columns_start(&columns, count) < 0 ? -1 : 1;
    for (Py_ssize_t i = 0; i < count && status == 1; i++) {
        if (i + 4 < count) {
            prefetch(view.buf, view.len, (Py_ssize_t)positions[i + 4]);
        }
        status = record_row(&columns, view.buf, view.len, positions[i], i);
    }
    PyBuffer_Release(&starts);
    PyBuffer_Release(&view);
    PyObject *result = status < 0 ? NULL : status == 0 ? Py_NewRef(Py_None)
                       : columns_result(&columns);
    columns_free(&columns);
    return result;
}

/* ---------------------------------------------------------------- binding */

static int
read_name(PyObject *text, char *out, Py_ssize_t *size)
{
    const char *bytes;
    if (PyBytes_AsStringAndSize(text, (char **)&bytes, size) < 0) {
        return -1;
    }
    if (*size < 1 || *size > NAME_BYTES_MAX) {
        PyErr_SetString(PyExc_ValueError, "property names are 1 to 16 bytes");
        return -1;
    }
    memcpy(out, bytes, (size_t)*size);
    return 0;
}

static int
read_separator(PyObject *text, unsigned char *out)
{
    if (!PyBytes_Check(text) || PyBytes_GET_SIZE(text) != 1
        || (unsigned char)PyBytes_AS_STRING(text)[0] >= 0x80) {
        PyErr_SetString(PyExc_ValueError, "separators are one ASCII byte");
        return -1;
    }
    *out = (unsigned char)PyBytes_AS_STRING(text)[0];
    return 0;
}

static int
read_layouts(PyObject *names, PyObject *layouts)
{
    if (!PyTuple_Check(names) || PyTuple_GET_SIZE(names) != L_ITEMS || !PyTuple_Check(layouts)
        || PyTuple_GET_SIZE(layouts) != LAYOUT_COUNT) {
        PyErr_Format(PyExc_ValueError, "bind needs %d layout item names and %d layouts",
                     L_ITEMS, LAYOUT_COUNT);
        return -1;
    }
    for (int k = 0; k < L_ITEMS; k++) {
        PyObject *name = PyTuple_GET_ITEM(names, k);
        if (!PyUnicode_Check(name) || PyUnicode_CompareWithASCIIString(name,
                                                                       LAYOUT_ITEM_NAMES[k])) {
            PyErr_Format(PyExc_ValueError, "layout item %d must be %s: update "
                         "storage/format/_walk.c", k, LAYOUT_ITEM_NAMES[k]);
            return -1;
        }
    }
    for (int i = 0; i < LAYOUT_COUNT; i++) {
        PyObject *layout = PyTuple_GET_ITEM(layouts, i);
        if (!PyTuple_Check(layout) || PyTuple_GET_SIZE(layout) != L_ITEMS) {
            PyErr_SetString(PyExc_ValueError, "a layout is a tuple of its items");
            return -1;
        }
        for (int k = 0; k < L_ITEMS; k++) {
            S.layouts[i][k] = PyLong_AsSsize_t(PyTuple_GET_ITEM(layout, k));
            if (S.layouts[i][k] < 0) {
                if (!PyErr_Occurred()) {
                    PyErr_SetString(PyExc_ValueError, "layout items are not negative");
                }
                return -1;
            }
        }
        const Py_ssize_t *l = S.layouts[i];
        if (l[L_TOTAL_SIZE] != S.layouts[0][L_TOTAL_SIZE] || l[L_MAGIC] != S.layouts[0][L_MAGIC]
            || l[L_SYSFLAG] != S.layouts[0][L_SYSFLAG] || l[L_BODY_SIZE] + 4 != l[L_HEAD_BYTES]
            || l[L_STORE_HOST] + l[L_STORE_HOST_BYTES] > l[L_HEAD_BYTES]
            || l[L_BORN_HOST] + l[L_BORN_HOST_BYTES] > l[L_HEAD_BYTES]
            || l[L_BORN_HOST_BYTES] > HOST_KEY_BYTES_MAX
            || l[L_STORE_HOST_BYTES] > HOST_KEY_BYTES_MAX
            || l[L_TOPIC_LENGTH_BYTES] < 1 || l[L_TOPIC_LENGTH_BYTES] > 2
            || l[L_PROPERTIES_LENGTH_BYTES] < 1 || l[L_PROPERTIES_LENGTH_BYTES] > 2) {
            PyErr_SetString(PyExc_ValueError, "a layout this file cannot read");
            return -1;
        }
    }
    return 0;
}

static PyObject *
bind(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"layout_items", "layouts", "magics", "sizes", "host_bits",
                               "property_names", "separators", "decode_properties", NULL};
    PyObject *names, *layouts, *decode_properties, *tags_name, *keys_name;
    PyObject *property_separator, *name_value_separator, *key_separator;
    int32_t magic_v1, magic_v2;
    Py_ssize_t blank_bytes, fixed_min_bytes;
    unsigned int born_bit, store_bit;
    if (!PyArg_ParseTupleAndKeywords(
            args, kwargs, "OO(ii)(nn)(II)(SS)(SSS)O:bind", keywords, &names, &layouts,
            &magic_v1, &magic_v2, &blank_bytes, &fixed_min_bytes, &born_bit, &store_bit,
            &tags_name, &keys_name, &property_separator, &name_value_separator,
            &key_separator, &decode_properties)) {
        return NULL;
    }
    S.bound = 0;
    if (read_layouts(names, layouts) < 0
        || read_name(tags_name, S.tags_name, &S.tags_name_bytes) < 0
        || read_name(keys_name, S.keys_name, &S.keys_name_bytes) < 0
        || read_separator(property_separator, &S.property_separator) < 0
        || read_separator(name_value_separator, &S.name_value_separator) < 0
        || read_separator(key_separator, &S.key_separator) < 0) {
        return NULL;
    }
    if (blank_bytes < S.layouts[0][L_MAGIC] + 4 || fixed_min_bytes < blank_bytes
        || fixed_min_bytes < S.layouts[0][L_SYSFLAG] + 4) {
        PyErr_SetString(PyExc_ValueError, "the smallest record must hold SYSFLAG");
        return NULL;
    }
    S.magic_v1 = magic_v1;
    S.magic_v2 = magic_v2;
    S.blank_bytes = blank_bytes;
    S.fixed_min_bytes = fixed_min_bytes;
    S.born_v6_bit = born_bit;
    S.store_v6_bit = store_bit;
    Py_INCREF(decode_properties);
    Py_XSETREF(S.decode_properties, decode_properties);
    S.bound = 1;
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"bind", (PyCFunction)(void (*)(void))bind, METH_VARARGS | METH_KEYWORDS,
     "bind(layout_items, layouts, magics, sizes, host_bits, property_names, separators, "
     "decode_properties)\n--\n\nTell the walk record.py's layouts and properties.py's names."},
    {"walk_starts", walk_starts, METH_VARARGS,
     "walk_starts(segment, range_start, range_end, limit)\n--\n\n"
     "walk.walk_starts_reference in C: (int64 starts as bytes, stop position), or None."},
    {"decode_heads", decode_heads, METH_VARARGS,
     "decode_heads(segment, starts, base, verify_crc, record_problem)\n--\n\n"
     "decode.decode_heads_reference in C: (int64 columns as bytes, problems), or None."},
    {"record_columns", record_columns, METH_VARARGS,
     "record_columns(segment, starts)\n--\n\n"
     "record_columns.record_columns_reference in C: Arrow buffers, or None."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef walk_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "mqstore.storage.format._walk",
    .m_doc = "The Spark data source's record walk in C; mqstore.pipeline.compiled_walk binds it.",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC
PyInit__walk(void)
{
    return create_extension_module(&walk_module, ABI_VERSION);
}
