# gguf_io.py — a minimal GGUF v3 writer and reader (F32 and Q8_0 tensors only) for the demo-model
# exporter and for the reference dump, which reads the shipped file back so the PyTorch reference
# runs on exactly the weights petrel loads. Format facts: ../shared/REFERENCE.md §1.
#
# Q8_0 follows ggml's reference quantiser: per block of 32 weights d = amax/127, q = roundf(x/d)
# (round half away from zero, computed with the unrounded 1/d), stored as fp16(d) + 32 int8;
# a weight decodes to fp16(d) * q.
import struct

import numpy as np

GGUF_MAGIC = b"GGUF"
ALIGN = 32
T_F32, T_Q8_0 = 0, 8
(V_U8, V_I8, V_U16, V_I16, V_U32, V_I32, V_F32, V_BOOL, V_STR, V_ARR, V_U64, V_I64, V_F64) = range(13)


def q8_0_quantize(x):
    """x float32 [..., n] (n % 32 == 0) -> (bytes of the Q8_0 blocks, dequantised float32 copy)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    blocks = x.reshape(-1, 32)
    amax = np.abs(blocks).max(axis=1, keepdims=True)
    d = (amax / np.float32(127.0)).astype(np.float32)
    with np.errstate(divide="ignore"):
        idd = np.where(d > 0, np.float32(1.0) / np.where(d > 0, d, 1), 0).astype(np.float32)
    v = (blocks * idd).astype(np.float32)
    q = (np.sign(v) * np.floor(np.abs(v) + np.float32(0.5))).astype(np.int8)
    dh = d.astype(np.float16)
    raw = np.empty((blocks.shape[0], 34), dtype=np.uint8)
    raw[:, :2] = dh.view(np.uint8).reshape(-1, 2)
    raw[:, 2:] = q.view(np.uint8)
    deq = (dh.astype(np.float32) * q.astype(np.float32)).reshape(x.shape)
    return raw.tobytes(), deq


def q8_0_dequantize(raw, shape):
    b = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 34)
    d = b[:, :2].copy().view(np.float16).astype(np.float32)
    q = b[:, 2:].copy().view(np.int8).astype(np.float32)
    return (d * q).reshape(shape)


class Writer:
    def __init__(self):
        self.kv = []        # (key, type, value[, element type])
        self.tensors = []   # (name, ne, ggml type, bytes)

    def add(self, key, vtype, value, etype=None):
        self.kv.append((key, vtype, value, etype))

    def tensor(self, name, arr, qtype):
        """arr: numpy float32 in torch layout (ne reversed); returns the dequantised values petrel sees."""
        arr = np.ascontiguousarray(arr, dtype=np.float32)
        ne = list(reversed(arr.shape))
        if qtype == T_Q8_0:
            data, deq = q8_0_quantize(arr)
        else:
            data, deq = arr.tobytes(), arr.copy()
        self.tensors.append((name, ne, qtype, data))
        return deq

    @staticmethod
    def _str(s):
        b = s.encode("utf-8")
        return struct.pack("<Q", len(b)) + b

    def _val(self, t, v):
        fmt = {V_U8: "<B", V_I8: "<b", V_U16: "<H", V_I16: "<h", V_U32: "<I", V_I32: "<i", V_F32: "<f",
               V_BOOL: "<?", V_U64: "<Q", V_I64: "<q", V_F64: "<d"}
        if t == V_STR:
            return self._str(v)
        return struct.pack(fmt[t], v)

    def write(self, path):
        out = bytearray(GGUF_MAGIC + struct.pack("<Iqq", 3, len(self.tensors), len(self.kv)))
        for key, t, v, et in self.kv:
            out += self._str(key) + struct.pack("<i", t)
            if t == V_ARR:
                out += struct.pack("<iQ", et, len(v))
                for e in v:
                    out += self._val(et, e)
            else:
                out += self._val(t, v)
        off = 0
        offs = []
        for name, ne, qt, data in self.tensors:
            offs.append(off)
            off += (len(data) + ALIGN - 1) // ALIGN * ALIGN
        for (name, ne, qt, data), o in zip(self.tensors, offs):
            out += self._str(name) + struct.pack("<I", len(ne)) + struct.pack(f"<{len(ne)}q", *ne)
            out += struct.pack("<iQ", qt, o)
        out += b"\0" * ((-len(out)) % ALIGN)
        for name, ne, qt, data in self.tensors:
            out += data + b"\0" * ((-len(data)) % ALIGN)
        with open(path, "wb") as f:
            f.write(out)
        return len(out)


def read(path):
    """-> (kv dict, {name: float32 array in torch layout}, {name: ggml type})"""
    d = open(path, "rb").read()
    o = 0

    def rd(fmt):
        nonlocal o
        v = struct.unpack_from(fmt, d, o)
        o += struct.calcsize(fmt)
        return v[0]

    def rs():
        nonlocal o
        n = rd("<Q")
        s = d[o:o + n].decode("utf-8")
        o += n
        return s

    sz = {V_U8: "<B", V_I8: "<b", V_U16: "<H", V_I16: "<h", V_U32: "<I", V_I32: "<i", V_F32: "<f", V_BOOL: "<?",
          V_U64: "<Q", V_I64: "<q", V_F64: "<d"}

    def rv(t):
        if t == V_STR:
            return rs()
        if t == V_ARR:
            et, n = rd("<i"), rd("<Q")
            return [rv(et) for _ in range(n)]
        return rd(sz[t])

    assert d[:4] == GGUF_MAGIC
    o = 4
    rd("<I")
    nt, nk = rd("<q"), rd("<q")
    kv = {}
    for _ in range(nk):
        k = rs()
        kv[k] = rv(rd("<i"))
    infos = []
    for _ in range(nt):
        name = rs()
        nd = rd("<I")
        ne = [rd("<q") for _ in range(nd)]
        infos.append((name, ne, rd("<i"), rd("<Q")))
    base = (o + ALIGN - 1) // ALIGN * ALIGN
    tens, types = {}, {}
    for name, ne, qt, off in infos:
        shape = list(reversed(ne))
        n = int(np.prod(ne))
        if qt == T_F32:
            tens[name] = np.frombuffer(d, dtype=np.float32, count=n, offset=base + off).reshape(shape).copy()
        elif qt == T_Q8_0:
            tens[name] = q8_0_dequantize(d[base + off: base + off + n // 32 * 34], shape)
        else:
            raise ValueError(f"{path}: tensor {name} has type {qt}, only F32/Q8_0 supported here")
        types[name] = qt
    return kv, tens, types
