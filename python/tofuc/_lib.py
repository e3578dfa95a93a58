"""The C library libtofuc.so (cmd/libtofuc): one call per request, in
JSON, with tensors as raw arrays in place."""

import ctypes
import json
import os
import weakref

import numpy as np

# NumPy's dtype of each tofuc dtype as it crosses (bf16 as f32, as in
# .npy files).
DTYPES = {
    "f16": np.float16, "bf16": np.float32, "f32": np.float32, "f64": np.float64,
    "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64,
    "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64,
    "bool": np.bool_,
}
NAMES = {np.dtype(v): k for k, v in DTYPES.items() if k != "bf16"}


class Error(Exception):
    """What tofuc refused or failed to do, in its own words."""


def _load():
    path = os.environ.get("TOFUC_LIBRARY") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "libtofuc.so")
    lib = ctypes.CDLL(path)
    lib.tofuc_call.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int64), ctypes.c_int64]
    lib.tofuc_call.restype = ctypes.c_void_p
    lib.tofuc_free.argtypes = [ctypes.c_void_p]
    lib.tofuc_free.restype = None
    return lib


_lib = _load()


def _owned_array(address, nbytes, dtype, shape):
    """A NumPy array over memory the library allocated, freed with the
    last array that views it (no copy)."""
    buf = (ctypes.c_char * max(nbytes, 1)).from_address(address)
    weakref.finalize(buf, _lib.tofuc_free, ctypes.c_void_p(address))
    return np.frombuffer(buf, dtype=DTYPES[dtype], count=int(np.prod(shape, dtype=np.int64))).reshape(shape)


def _plain(x):
    """NumPy scalars as the Python numbers JSON takes."""
    if isinstance(x, np.generic):
        return x.item()
    raise TypeError("%r (%s)" % (x, type(x).__name__))


def call(request, tensors=()):
    """Runs request (a dict) with tensors, a list of (name, array) whose
    arrays are C-contiguous and of a dtype tofuc knows; returns the reply
    and its tensors as a dict of arrays, in the reply's order."""
    args, keep = [], []
    for i, (name, a) in enumerate(tensors):
        args.append({"name": name, "dtype": NAMES[a.dtype], "shape": list(a.shape), "buffer": i})
        keep.append(a)
    request = dict(request, tensors=args)
    try:
        text = json.dumps(request, allow_nan=False, default=_plain)
    except (TypeError, ValueError) as e:
        raise Error("an argument is not a number, string, list or bool tofuc takes: %s" % e) from None
    n = len(keep)
    ptrs = (ctypes.c_void_p * max(n, 1))(*[a.ctypes.data for a in keep])
    sizes = (ctypes.c_int64 * max(n, 1))(*[a.nbytes for a in keep])
    raw = _lib.tofuc_call(text.encode(), ptrs, sizes, n)
    try:
        out = json.loads(ctypes.string_at(raw).decode())
    finally:
        _lib.tofuc_free(raw)
    reply, data = out["reply"], out["data"]
    arrays = {}
    for t, (address, nbytes) in zip(reply.get("tensors") or [], data):
        arrays[t["name"]] = _owned_array(address, nbytes, t["dtype"], t["shape"])
    if reply.get("error"):
        raise Error(reply["error"])
    return reply, arrays
