#!/usr/bin/env python3
"""Writes the seed corpus of tests/fuzz/corpus/ (Python's standard library only).

ok_* files must load, bad_* files must be rejected: test_fuzz_corpus checks both. The valid
files are built the way the reference writers build them (safetensors' Rust writer,
numpy.save); each bad file breaks one rule the loaders check. Run from anywhere; it rewrites
the seeds in place (gzip output is made deterministic with mtime=0).
"""
import gzip
import json
import os
import struct

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def put(fmt, name, data):
    os.makedirs(os.path.join(HERE, fmt), exist_ok=True)
    with open(os.path.join(HERE, fmt, name), "wb") as f:
        f.write(data)


# ---- safetensors -------------------------------------------------------------------------------
SIZES = {"BOOL": 1, "U8": 1, "I32": 4, "F32": 4, "F64": 8, "I64": 8, "F16": 2, "BF16": 2, "I16": 2}
RANK = {"BOOL": 0, "U8": 1, "I16": 5, "F16": 7, "BF16": 8, "I32": 9, "F32": 11, "F64": 12, "I64": 13}


def st(tensors, metadata=None):
    """tensors: {name: (dtype, shape, bytes)} -> file bytes, as the reference writer lays them."""
    order = sorted(tensors, key=lambda n: (-RANK[tensors[n][0]], n))
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for n in order:
        dt, shape, raw = tensors[n]
        header[n] = {"dtype": dt, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + data


def raw_st(header, data=b""):
    h = header.encode() if isinstance(header, str) else header
    return struct.pack("<Q", len(h)) + h + data


f32 = lambda *v: struct.pack("<%df" % len(v), *v)
put("safetensors", "ok_reference_attn", st({"attn.0": ("F32", [1, 2, 3], f32(0, 1, 2, 3, 4, 5))}))
put("safetensors", "ok_empty", st({}))
put("safetensors", "ok_metadata", st({}, {"framework": "pt", "note": "a\"b\\c\n"}))
put("safetensors", "ok_mixed", st({
    "z": ("I64", [1], struct.pack("<q", -1)),
    "a": ("F64", [2], struct.pack("<2d", 1.5, -2)),
    "f": ("F32", [2, 1], f32(0.25, 3)),
    "c": ("I32", [], struct.pack("<i", 7)),
    "b": ("U8", [3], bytes([1, 2, 3])),
    "m": ("BOOL", [2, 0], b""),
    "t": ("BOOL", [3], bytes([0, 1, 1])),
}, {"format": "pt"}))
put("safetensors", "ok_other_writer", raw_st(
    '{\n "b": {"data_offsets": [8, 12], "shape": [1], "dtype": "I32"},\n'
    ' "\\u00e9\\ud83d\\ude00": {"shape": [2], "dtype": "F32", "data_offsets": [0, 8]},\n'
    ' "e": {"dtype": "F64", "shape": [0, 4], "data_offsets": [12, 12]},\n'
    ' "__metadata__": {"k": "v"} }  ', f32(10, -5) + struct.pack("<i", -2)))
put("safetensors", "ok_half", st({
    "h": ("F16", [2, 2], struct.pack("<4H", 0x3C00, 0x8001, 0x7BFF, 0x7E01)),
    "b": ("BF16", [3], struct.pack("<3H", 0x3F80, 0xFF81, 0x0001)),
    "f": ("F32", [1], f32(2)),
}))
put("safetensors", "ok_bool_bytes", raw_st('{"t":{"dtype":"BOOL","shape":[4],"data_offsets":[0,4]}}',
                                           bytes([0, 1, 2, 255])))

put("safetensors", "bad_short", b"\x08\x00\x00")
put("safetensors", "bad_header_past_end", struct.pack("<Q", 64) + b"{}")
put("safetensors", "bad_huge_header_len", struct.pack("<Q", 2**63 - 1) + b"{}")
put("safetensors", "bad_not_object", raw_st("[]"))
put("safetensors", "bad_trailing_garbage", raw_st("{} x"))
put("safetensors", "bad_invalid_utf8", raw_st(b'{"\xc3\x28":{}}'))
put("safetensors", "bad_lone_surrogate", raw_st('{"\\ud800":{}}'))
put("safetensors", "bad_trailing_comma", raw_st('{"a":{"dtype":"U8","shape":[],"data_offsets":[0,1]},}', b"\x00"))
put("safetensors", "bad_offsets_mismatch",
    raw_st('{"w":{"dtype":"F32","shape":[10,20],"data_offsets":[0,400]}}', bytes(400)))
put("safetensors", "bad_overlap", raw_st(
    '{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}}',
    bytes(6)))
put("safetensors", "bad_gap", raw_st(
    '{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[6,10]}}',
    bytes(10)))
put("safetensors", "bad_outside_data", raw_st('{"a":{"dtype":"U8","shape":[8],"data_offsets":[4,12]}}', bytes(8)))
put("safetensors", "bad_trailing_data", raw_st('{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}}', bytes(9)))
put("safetensors", "bad_truncated", st({"w": ("F64", [100], bytes(800))})[:-1])
put("safetensors", "bad_unsupported_i16", st({"h": ("I16", [2], bytes(4))}))
put("safetensors", "bad_half_size", raw_st('{"h":{"dtype":"F16","shape":[3],"data_offsets":[0,3]}}', bytes(3)))
put("safetensors", "bad_unknown_dtype", raw_st('{"a":{"dtype":"Q4","shape":[1],"data_offsets":[0,1]}}', b"\x00"))
put("safetensors", "bad_duplicate_name", raw_st(
    '{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}',
    b"\x00"))
put("safetensors", "bad_duplicate_field",
    raw_st('{"a":{"dtype":"U8","dtype":"U8","shape":[1],"data_offsets":[0,1]}}', b"\x00"))
put("safetensors", "bad_unknown_field",
    raw_st('{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":0}}', b"\x00"))
put("safetensors", "bad_negative_shape", raw_st('{"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,0]}}'))
put("safetensors", "bad_overflow_shape",
    raw_st('{"a":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,0]}}'))
put("safetensors", "bad_nine_dims",
    raw_st('{"a":{"dtype":"U8","shape":[1,1,1,1,1,1,1,1,1],"data_offsets":[0,1]}}', b"\x00"))
put("safetensors", "bad_metadata_number", raw_st('{"__metadata__":{"k":1}}'))

# ---- npy ----------------------------------------------------------------------------------------
def npy(descr, shape, raw, fortran=False, version=1, growth=True):
    h = "{'descr': %r, 'fortran_order': %s, 'shape': %r, }" % (descr, fortran, tuple(shape))
    if growth and shape:
        h += " " * (21 - len(repr(shape[0])))
    lenbytes = 2 if version == 1 else 4
    pad = 64 - (8 + lenbytes + len(h) + 1) % 64
    h = h.encode("latin1") + b" " * pad + b"\n"
    return (b"\x93NUMPY" + bytes([version, 0]) + struct.pack("<H" if version == 1 else "<I", len(h))
            + h + raw)


put("npy", "ok_f4_2x3", npy("<f4", [2, 3], f32(0, 1, 2, 3, 4, 5)))
put("npy", "ok_f8_scalar", npy("<f8", [], struct.pack("<d", -2.5)))
put("npy", "ok_b1_5", npy("|b1", [5], bytes([1, 0, 0, 1, 1])))
put("npy", "ok_i8_empty", npy("<i8", [0], b""))
put("npy", "ok_u1_2x2", npy("|u1", [2, 2], bytes([0, 128, 255, 7])))
put("npy", "ok_v2_big_endian_i4", npy(">i4", [2], struct.pack(">2i", 258, -2), version=2))
put("npy", "ok_v3_i4", npy("<i4", [1, 1, 1], struct.pack("<i", 5), version=3))
put("npy", "ok_old_numpy_no_growth", npy("<f8", [3], struct.pack("<3d", 1, 2, 3), growth=False))

put("npy", "bad_magic", b"\x93NUMPX\x01\x00\x02\x00{}")
put("npy", "bad_version", b"\x93NUMPY\x04\x00\x00\x00\x00\x00")
put("npy", "bad_fortran", npy("<f4", [2, 3], bytes(24), fortran=True))
put("npy", "ok_f2", npy("<f2", [2], struct.pack("<2H", 0x3C00, 0xFC00)))
put("npy", "ok_big_endian_f2", npy(">f2", [1, 2], struct.pack(">2H", 0x0001, 0x7E00)))
put("npy", "bad_f2_truncated", npy("<f2", [3], bytes(5)))
put("npy", "bad_object", npy("|O", [1], bytes(8)))
put("npy", "bad_truncated", npy("<f8", [4], bytes(31)))
put("npy", "bad_trailing", npy("<f8", [4], bytes(33)))
put("npy", "bad_header_past_end", b"\x93NUMPY\x01\x00\xff\x00{}")
put("npy", "bad_shape_int", npy("<f4", [1], bytes(4)).replace(b"(1,)", b"(1) "))
put("npy", "bad_huge_shape", npy("<f8", [2**40, 2**40], bytes(8)))

# ---- IDX ----------------------------------------------------------------------------------------
def idx(code, dims, raw):
    return bytes([0, 0, code, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) + raw


def gz(b):
    return gzip.compress(b, mtime=0)


img = bytes((i * 37 + (i >> 3)) & 255 for i in range(2 * 28 * 28))
put("idx", "ok_images_plain", idx(0x08, [2, 28, 28], img))
put("idx", "ok_images_gzip", gz(idx(0x08, [2, 28, 28], img)))
put("idx", "ok_labels_gzip", gz(idx(0x08, [6], bytes([9, 0, 0, 3, 0, 2]))))
put("idx", "ok_int8", idx(0x09, [4], bytes([0, 127, 128, 255])))
put("idx", "ok_int16", idx(0x0B, [2], struct.pack(">2h", 1, -2)))
put("idx", "ok_int32", gz(idx(0x0C, [2], struct.pack(">2i", 65536, -7))))
put("idx", "ok_float32", idx(0x0D, [1, 2], struct.pack(">2f", 1.5, -10)))
put("idx", "ok_float64", gz(idx(0x0E, [1], struct.pack(">d", -3.125))))
put("idx", "ok_zero_dims", idx(0x08, [], b"\x05"))

put("idx", "bad_magic", b"\x01\x00\x08\x01\x00\x00\x00\x01\x00")
put("idx", "bad_type_code", idx(0x0A, [1], b"\x00"))
put("idx", "bad_nine_dims", idx(0x08, [1] * 9, b"\x00"))
put("idx", "bad_truncated_plain", idx(0x08, [10], bytes(9)))
put("idx", "bad_trailing_plain", idx(0x08, [4], bytes(5)))
put("idx", "bad_huge_dims", idx(0x0E, [2**32 - 1] * 3, b""))
put("idx", "bad_gig_declared", gz(idx(0x08, [2**30], bytes(16))))
full = gz(idx(0x08, [2, 28, 28], img))
put("idx", "bad_gzip_cut", full[:-12])
damaged = bytearray(full)
for i in range(len(damaged) // 2, len(damaged) // 2 + 8):
    damaged[i] ^= 0x5A
put("idx", "bad_gzip_damaged", bytes(damaged))
