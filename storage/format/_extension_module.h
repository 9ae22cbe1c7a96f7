/*
 * What the two extension modules share (storage/format/_records.c and _walk.c): the
 * mmap.mmap type their argument checks accept, and the module's creation with its
 * ABI_VERSION (storage/format/compiled.py's `load` refuses a build of another version).
 *
 * Each module includes this once; everything here is static to that module.
 */
#ifndef MQSTORE_EXTENSION_MODULE_H
#define MQSTORE_EXTENSION_MODULE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* mmap.mmap, looked up when the module loads and kept for the process's life. */
static PyTypeObject *mmap_type;

/* Look up mmap.mmap (once); -1 with an exception set if it cannot be. */
static int
find_mmap_type(void)
{
    if (mmap_type != NULL) {
        return 0;
    }
    PyObject *mmap_module = PyImport_ImportModule("mmap");
    if (mmap_module == NULL) {
        return -1;
    }
    PyObject *type = PyObject_GetAttrString(mmap_module, "mmap");
    Py_DECREF(mmap_module);
    if (type == NULL) {
        return -1;
    }
    if (!PyType_Check(type)) {
        Py_DECREF(type);
        PyErr_SetString(PyExc_TypeError, "mmap.mmap is not a type");
        return -1;
    }
    mmap_type = (PyTypeObject *)type;
    return 0;
}

/* The module of `definition`, with mmap_type found and ABI_VERSION set to `abi_version`;
 * NULL with an exception set on failure. */
static PyObject *
create_extension_module(struct PyModuleDef *definition, int abi_version)
{
    if (find_mmap_type() < 0) {
        return NULL;
    }
    PyObject *module = PyModule_Create(definition);
    if (module == NULL) {
        return NULL;
    }
    if (PyModule_AddIntConstant(module, "ABI_VERSION", abi_version) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}

#endif
