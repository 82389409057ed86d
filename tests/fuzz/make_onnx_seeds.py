#!/usr/bin/python3
"""Writes the ONNX seed corpus: tests/fuzz/corpus/onnx/ (models) and corpus/onnx_tensor/
(TensorProto .pb files). Needs the `onnx` Python package (Debian's python3-onnx: run it with
/usr/bin/python3); the tests never do, they read the committed files.

ok_* models open and run (test_fuzz_corpus feeds each declared input filled with 0, 1 or 2 by
the file's length, free dims at 1); bad_* ones each break one rule and must be rejected when
opened or run. External data may name weights.bin: the fuzz targets put a 64-byte file of that
name (bytes 0..63) beside the model. A symlink pointing out of the folder cannot be a one-file
seed; the loader's check that the resolved path stays inside covers it the same way.
"""
import os

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper as nh

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def put(fmt, name, data):
    os.makedirs(os.path.join(HERE, fmt), exist_ok=True)
    with open(os.path.join(HERE, fmt, name), "wb") as f:
        f.write(data)


def raw_tensor(name, dtype, dims, field, values):
    """A TensorProto with values in the named typed field, unchecked (make_tensor checks)."""
    t = TP()
    t.name, t.data_type = name, dtype
    t.dims.extend(dims)
    getattr(t, field).extend(values)
    return t


def vi(name, dtype, shape):
    return h.make_tensor_value_info(name, dtype, shape)


def model(nodes, inputs, outputs, inits=(), opset=13, domain_opsets=()):
    g = h.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    ops = [h.make_opsetid("", opset)] + [h.make_opsetid(d, v) for d, v in domain_opsets]
    m = h.make_model(g, opset_imports=ops, producer_name="tide-fuzz-seeds")
    m.ir_version = 8
    return m


def save(name, m):
    put("onnx", name, m.SerializeToString())


F = TP.FLOAT
X23 = vi("X", F, [2, 3])
Y = lambda shape=None: vi("Y", F, shape)
f32 = lambda a: np.array(a, dtype=np.float32)
i64 = lambda a: np.array(a, dtype=np.int64)
init = nh.from_array


# ---- valid models -----------------------------------------------------------------------------
ok = {}
ok["add"] = model([h.make_node("Add", ["X", "B"], ["Y"])], [X23], [Y([2, 3])],
                  [init(f32([[1, 2, 3], [4, 5, 6]]), "B")])
ok["matmul_relu"] = model([h.make_node("MatMul", ["X", "W"], ["t"]), h.make_node("Relu", ["t"], ["Y"])],
                          [X23], [Y([2, 4])], [init(f32(np.arange(12).reshape(3, 4) - 5), "W")])
ok["reshape"] = model([h.make_node("Reshape", ["X", "s"], ["Y"])], [X23], [Y([3, 2])],
                      [init(i64([3, -1]), "s")])
ok["conv"] = model([h.make_node("Conv", ["X", "W", "b"], ["Y"], pads=[1, 1, 1, 1], strides=[1, 1])],
                   [vi("X", F, [1, 1, 4, 4])], [Y([1, 2, 4, 4])],
                   [init(f32(np.ones((2, 1, 3, 3))), "W"), init(f32([0.5, -0.5]), "b")])
ok["gather"] = model([h.make_node("Gather", ["D", "I"], ["Y"], axis=0)],
                     [vi("I", TP.INT64, [2])], [Y([2, 2])], [init(f32([[1, 2], [3, 4], [5, 6]]), "D")])
ok["constant_concat"] = model(
    [h.make_node("Constant", [], ["c"], value=init(f32([[7, 8, 9]]), "cv")),
     h.make_node("Concat", ["X", "c"], ["Y"], axis=0)], [X23], [Y([3, 3])])
ok["free_dim"] = model([h.make_node("Sigmoid", ["X"], ["Y"])], [vi("X", F, ["N", 3])], [Y(["N", 3])])
ok["int32_data"] = model([h.make_node("Add", ["X", "B"], ["Y"])], [vi("X", TP.INT32, [3])],
                         [vi("Y", TP.INT32, [3])], [h.make_tensor("B", TP.INT32, [3], [1, -2, 3])])
ok["float_data"] = model([h.make_node("Mul", ["X", "B"], ["Y"])], [X23], [Y([2, 3])],
                         [h.make_tensor("B", F, [2, 3], [1, 2, 3, 4, 5, 6])])
ext = TP()
ext.name, ext.data_type, ext.data_location = "B", F, TP.EXTERNAL
ext.dims.extend([2, 3])
for k, v in (("location", "weights.bin"), ("offset", "8"), ("length", "24")):
    e = ext.external_data.add()
    e.key, e.value = k, v
ok["external_data"] = model([h.make_node("Add", ["X", "B"], ["Y"])], [X23], [Y([2, 3])], [ext])
ok["opset6_add_broadcast"] = model([h.make_node("Add", ["X", "B"], ["Y"], broadcast=1, axis=1)],
                                   [X23], [Y([2, 3])], [init(f32([1, 2, 3]), "B")], opset=6)
ok["chain"] = model([h.make_node("Transpose", ["X"], ["t"], perm=[1, 0]),
                     h.make_node("Unsqueeze", ["t", "ax"], ["u"]),
                     h.make_node("Squeeze", ["u", "ax"], ["s"]),
                     h.make_node("Slice", ["s", "st", "en"], ["Y"])],
                    [X23], [Y([2, 2])], [init(i64([0]), "ax"), init(i64([1]), "st"), init(i64([3]), "en")])
# Valid, but their ops are not in tide's table yet: named run_* (they must only not crash) until
# they are, then ok_*.
PENDING = set()
for k, m in ok.items():
    if k != "external_data":  # the checker wants weights.bin beside it
        onnx.checker.check_model(m)
    save(("run_" if k in PENDING else "ok_") + k, m)


# ---- models that break one rule ---------------------------------------------------------------
def one_node(node, inits=(), x=X23, y=None, opset=13, **kw):
    return model([node], [x], [y or Y()], inits, opset=opset, **kw)


bad = {}
conv = ok["conv"].SerializeToString()
bad["truncated_half"] = conv[: len(conv) // 2]
bad["truncated_last_byte"] = conv[:-1]
bad["empty"] = b""
bad["not_protobuf"] = b"this is not an onnx model\n"
bad["no_graph"] = h.make_model(h.make_graph([], "g", [], []), opset_imports=[h.make_opsetid("", 13)])
bad["no_graph"].ClearField("graph")
bad["opset0"] = model([h.make_node("Relu", ["X"], ["Y"])], [X23], [Y()], opset=0)
bad["opset_huge"] = model([h.make_node("Relu", ["X"], ["Y"])], [X23], [Y()], opset=1 << 40)


def huge_init(dims, raw=b"\0" * 8):
    t = TP()
    t.name, t.data_type, t.raw_data = "B", F, raw
    t.dims.extend(dims)
    return t


add_xb = h.make_node("Add", ["X", "B"], ["Y"])
bad["huge_dim_init"] = one_node(add_xb, [huge_init([1 << 40])])
bad["huge_dims_product"] = one_node(add_xb, [huge_init([1 << 31, 1 << 31, 1 << 31])])
bad["negative_dim_init"] = one_node(add_xb, [huge_init([-2])])
bad["nine_dims_init"] = one_node(add_xb, [huge_init([1] * 9, b"\0" * 4)])
bad["negative_dim_input"] = one_node(h.make_node("Relu", ["X"], ["Y"]), x=vi("X", F, [2, -3]))
bad["cycle_self"] = model([h.make_node("Add", ["X", "Y"], ["Y"])], [X23], [Y()])
bad["cycle_later"] = model([h.make_node("Relu", ["b"], ["a"]), h.make_node("Relu", ["a"], ["b"]),
                            h.make_node("Add", ["X", "b"], ["Y"])], [X23], [Y()])
bad["missing_init"] = one_node(add_xb)
bad["duplicate_output"] = model([h.make_node("Relu", ["X"], ["Y"]), h.make_node("Sigmoid", ["X"], ["Y"])],
                                [X23], [Y()])
bad["duplicate_init"] = one_node(add_xb, [init(f32([1, 2, 3]), "B"), init(f32([1, 2, 3]), "B")])
bad["duplicate_input"] = model([h.make_node("Relu", ["X"], ["Y"])], [X23, X23], [Y()])
bad["output_not_computed"] = model([h.make_node("Relu", ["X"], ["Y"])], [X23], [Y(), vi("Z", F, None)])
bad["unnamed_output"] = model([h.make_node("Relu", ["X"], ["Y"])], [X23], [vi("", F, None)])
bad["node_without_op_type"] = one_node(h.make_node("", ["X"], ["Y"]))
bad["dtype_99"] = one_node(add_xb, [huge_init([2], b"\0" * 8)])
bad["dtype_99"].graph.initializer[0].data_type = 99
bad["dtype_string"] = one_node(add_xb, [h.make_tensor("B", TP.STRING, [1], [b"abc"])])
bad["dtype_int8"] = one_node(add_xb, [h.make_tensor("B", TP.INT8, [3], [1, 2, 3])])
bad["dtype_complex_input"] = one_node(h.make_node("Relu", ["X"], ["Y"]), x=vi("X", TP.COMPLEX64, [2]))
bad["raw_data_short"] = one_node(add_xb, [huge_init([2, 3], b"\0" * 20)])
bad["raw_data_long"] = one_node(add_xb, [huge_init([2, 3], b"\0" * 28)])
bad["int32_data_count"] = one_node(h.make_node("Add", ["X", "B"], ["Y"]), [raw_tensor("B", TP.INT32, [4], "int32_data", [1, 2, 3])],
                                   x=vi("X", TP.INT32, [4]))
bad["float_data_count"] = one_node(add_xb, [raw_tensor("B", F, [2, 3], "float_data", [1, 2, 3, 4, 5])])
both_fields = one_node(add_xb, [h.make_tensor("B", F, [3], [1, 2, 3])])
both_fields.graph.initializer[0].raw_data = b"\0" * 12


def external(loc, offset="0", length="24"):
    t = TP()
    t.CopyFrom(ext)
    del t.external_data[:]
    for k, v in (("location", loc), ("offset", offset), ("length", length)):
        if v is not None:
            e = t.external_data.add()
            e.key, e.value = k, v
    return t


for k, (loc, off, ln) in {"parent": ("../x", "0", "24"), "absolute": ("/etc/passwd", "0", "24"),
                          "dotdot_inside": ("a/../../weights.bin", "0", "24"),
                          "missing_file": ("nope.bin", "0", "24"), "folder": (".", "0", "24"),
                          "past_end": ("weights.bin", "48", "24"), "offset_negative": ("weights.bin", "-8", "24"),
                          "offset_text": ("weights.bin", "8x", "24"), "length_wrong": ("weights.bin", "0", "20"),
                          "no_location": (None, "0", "24"), "offset_huge": ("weights.bin", str(1 << 62), "24")}.items():
    bad["external_" + k] = one_node(add_xb, [external(loc, off, ln)])

bad["transpose_perm_out_of_range"] = one_node(h.make_node("Transpose", ["X"], ["Y"], perm=[0, 5]))
bad["transpose_perm_repeated"] = one_node(h.make_node("Transpose", ["X"], ["Y"], perm=[1, 1]))
bad["reshape_two_minus1"] = one_node(h.make_node("Reshape", ["X", "s"], ["Y"]), [init(i64([-1, -1]), "s")])
bad["reshape_wrong_count"] = one_node(h.make_node("Reshape", ["X", "s"], ["Y"]), [init(i64([4, 2]), "s")])
bad["reshape_huge"] = one_node(h.make_node("Reshape", ["X", "s"], ["Y"]), [init(i64([1 << 40, 0]), "s")])
bad["gather_out_of_range"] = model([h.make_node("Gather", ["X", "I"], ["Y"], axis=0)], [X23], [Y()],
                                   [init(i64([5]), "I")])
bad["gather_axis_out_of_range"] = model([h.make_node("Gather", ["X", "I"], ["Y"], axis=7)], [X23], [Y()],
                                        [init(i64([0]), "I")])
bad["concat_axis_50"] = one_node(h.make_node("Concat", ["X", "X"], ["Y"], axis=50))
conv_x = vi("X", F, [1, 1, 2, 2])
bad["conv_kernel_larger"] = one_node(h.make_node("Conv", ["X", "W"], ["Y"]), [init(f32(np.ones((1, 1, 5, 5))), "W")], x=conv_x)
bad["conv_zero_stride"] = one_node(h.make_node("Conv", ["X", "W"], ["Y"], strides=[0, 0]),
                                   [init(f32(np.ones((1, 1, 1, 1))), "W")], x=conv_x)
bad["conv_negative_pad"] = one_node(h.make_node("Conv", ["X", "W"], ["Y"], pads=[-5, -5, -5, -5]),
                                    [init(f32(np.ones((1, 1, 1, 1))), "W")], x=conv_x)
bad["conv_channels_mismatch"] = one_node(h.make_node("Conv", ["X", "W"], ["Y"]),
                                         [init(f32(np.ones((1, 3, 1, 1))), "W")], x=conv_x)
bad["conv_group_zero"] = one_node(h.make_node("Conv", ["X", "W"], ["Y"], group=0),
                                  [init(f32(np.ones((1, 1, 1, 1))), "W")], x=conv_x)
bad["conv_huge_dilation"] = one_node(h.make_node("Conv", ["X", "W"], ["Y"], dilations=[1 << 40, 1]),
                                     [init(f32(np.ones((1, 1, 2, 1))), "W")], x=conv_x)
bad["squeeze_non1_axis"] = one_node(h.make_node("Squeeze", ["X", "a"], ["Y"]), [init(i64([0]), "a")])
bad["squeeze_axis_out_of_range"] = one_node(h.make_node("Squeeze", ["X", "a"], ["Y"]), [init(i64([9]), "a")])
bad["slice_step_0"] = one_node(h.make_node("Slice", ["X", "s", "e", "a", "p"], ["Y"]),
                               [init(i64([0]), "s"), init(i64([2]), "e"), init(i64([0]), "a"), init(i64([0]), "p")])
bad["unsqueeze_to_9_dims"] = one_node(h.make_node("Unsqueeze", ["X", "a"], ["Y"]), [init(i64(range(7)), "a")])
bad["unsqueeze_repeated_axis"] = one_node(h.make_node("Unsqueeze", ["X", "a"], ["Y"]), [init(i64([0, 0]), "a")])
bad["expand_huge_then_relu"] = model([h.make_node("Expand", ["X", "s"], ["e"]), h.make_node("Relu", ["e"], ["Y"])],
                                     [X23], [Y()], [init(i64([1 << 20, 1 << 20, 2, 3]), "s")])
bad["constant_of_shape_huge"] = one_node(h.make_node("ConstantOfShape", ["s"], ["Y"]), [init(i64([1 << 30, 1 << 30]), "s")],
                                         x=vi("s0", F, [1]))
bad["constant_of_shape_negative"] = one_node(h.make_node("ConstantOfShape", ["s"], ["Y"]), [init(i64([-3]), "s")],
                                             x=vi("s0", F, [1]))
bad["matmul_mismatch"] = one_node(h.make_node("MatMul", ["X", "X"], ["Y"]))
bad["add_no_broadcast"] = one_node(add_xb, [init(f32([1, 2]), "B")])
bad["unknown_op"] = one_node(h.make_node("FooBar", ["X"], ["Y"]))
bad["other_domain"] = one_node(h.make_node("Relu", ["X"], ["Y"], domain="com.example"),
                               domain_opsets=[("com.example", 1)])
bad["too_many_inputs"] = one_node(h.make_node("Relu", ["X", "X", "X"], ["Y"]))
bad["op_before_its_opset"] = one_node(h.make_node("Gelu", ["X"], ["Y"]), opset=13)
# raw_data wins over a typed field (not a rule the loader enforces): only must not crash
put("onnx", "data_both_fields", both_fields.SerializeToString())
for k, m in bad.items():
    put("onnx", "bad_" + k, m if isinstance(m, bytes) else m.SerializeToString())


# ---- TensorProto files ------------------------------------------------------------------------
def tput(name, t):
    put("onnx_tensor", name, t if isinstance(t, bytes) else t.SerializeToString())


tput("ok_float_raw", init(f32([[1.5, -2], [3, 4]]), "x"))
tput("ok_int64_raw", init(i64([1, -1, 1 << 40]), "x"))
tput("ok_bool", init(np.array([True, False, True]), "x"))
tput("ok_uint8", init(np.array([0, 255, 7], dtype=np.uint8), "x"))
tput("ok_float16", init(np.array([1, -2, 0.5], dtype=np.float16), "x"))
tput("ok_double", init(np.array([1e300, -2], dtype=np.float64), "x"))
tput("ok_scalar", init(np.array(3.0, dtype=np.float32), "x"))
tput("ok_empty", init(np.zeros((2, 0), dtype=np.float32), "x"))
tput("ok_int32_data", h.make_tensor("x", TP.INT32, [3], [1, -2, 3]))
tput("ok_float_data", h.make_tensor("x", F, [2], [1.0, 2.0]))
tput("ok_int64_data", h.make_tensor("x", TP.INT64, [2], [1, -5]))
tput("ok_bool_int32_data", h.make_tensor("x", TP.BOOL, [2], [1, 0]))
good = init(f32(np.arange(6).reshape(2, 3)), "x").SerializeToString()
tput("bad_truncated", good[:-3])
tput("bad_not_protobuf", b"\xff\xff\xff\xff")
tput("bad_raw_short", huge_init([2, 3], b"\0" * 20))
tput("bad_huge_dim", huge_init([1 << 40]))
tput("bad_huge_dims_product", huge_init([1 << 31, 1 << 31, 1 << 31]))
tput("bad_negative_dim", huge_init([-2]))
tput("bad_nine_dims", huge_init([1] * 9, b"\0" * 4))
bad_t = huge_init([2]); bad_t.data_type = 99
tput("bad_dtype_99", bad_t)
tput("bad_dtype_string", h.make_tensor("x", TP.STRING, [1], [b"abc"]))
tput("bad_dtype_int8", h.make_tensor("x", TP.INT8, [3], [1, 2, 3]))
tput("bad_dtype_undefined", huge_init([2]).SerializeToString().replace(b"\x10\x01", b"\x10\x00"))
tput("bad_int32_data_count", raw_tensor("x", TP.INT32, [4], "int32_data", [1, 2, 3]))
tput("bad_int64_in_int32_data", raw_tensor("x", TP.INT64, [2], "int32_data", [1, 2]))
tput("bool_value_2", h.make_tensor("x", TP.BOOL, [2], [1, 2]))
tput("bad_external_parent", external("../x"))
tput("bad_external_absolute", external("/etc/passwd"))
tput("bad_external_past_end", external("weights.bin", "48", "24"))
tput("bad_external_no_folder", external("weights.bin", "8", "24"))  # a lone .pb has no folder


# ---- one valid node or two per handler family (they run) ------------------------------------
X234 = vi("X", F, [2, 3, 4])
ops = {
    "softmax": ([h.make_node("Softmax", ["X"], ["Y"], axis=-1)], []),
    "reduce_sum": ([h.make_node("ReduceSum", ["X", "a"], ["Y"], keepdims=0)], [init(i64([1]), "a")]),
    "reduce_mean_opset11": ([h.make_node("ReduceMean", ["X"], ["Y"], axes=[0, 2])], []),
    "topk": ([h.make_node("TopK", ["X", "k"], ["Y", "I"], axis=2)], [init(i64([2]), "k")]),
    "pad": ([h.make_node("Pad", ["X", "p"], ["Y"], mode="reflect")], [init(i64([0, 1, 1, 0, 1, 1]), "p")]),
    "tile": ([h.make_node("Tile", ["X", "r"], ["Y"])], [init(i64([2, 1, 3]), "r")]),
    "split": ([h.make_node("Split", ["X", "s"], ["Y", "Z"], axis=2)], [init(i64([1, 3]), "s")]),
    "cumsum": ([h.make_node("CumSum", ["X", "a"], ["Y"], reverse=1)], [init(i64(1), "a")]),
    "onehot": ([h.make_node("OneHot", ["i", "d", "v"], ["Y"])],
               [init(i64([0, 2, -1]), "i"), init(i64([3]), "d"), init(f32([0, 1]), "v")]),
    "nonzero": ([h.make_node("NonZero", ["X"], ["Y"])], []),
    "unique": ([h.make_node("Unique", ["X"], ["Y", "I", "V", "C"], sorted=1)], []),
    "einsum": ([h.make_node("Einsum", ["X", "X"], ["Y"], equation="abc,abd->acd")], []),
    "range": ([h.make_node("Range", ["s", "l", "d"], ["Y"])], [init(f32(0), "s"), init(f32(5), "l"), init(f32(0.5), "d")]),
    "trilu": ([h.make_node("Trilu", ["X", "k"], ["Y"], upper=0)], [init(i64(1), "k")]),
    "gathernd": ([h.make_node("GatherND", ["X", "i"], ["Y"])], [init(i64([[1, 2], [0, 0]]), "i")]),
    "scatternd": ([h.make_node("ScatterND", ["X", "i", "u"], ["Y"])],
                  [init(i64([[1]]), "i"), init(f32(np.ones((1, 3, 4))), "u")]),
    "where": ([h.make_node("Greater", ["X", "z"], ["c"]), h.make_node("Where", ["c", "X", "z"], ["Y"])],
              [init(f32(0.5), "z")]),
    "cast": ([h.make_node("Cast", ["X"], ["Y"], to=TP.INT32)], []),
    "lstm": ([h.make_node("LSTM", ["X", "W", "R"], ["Y"], hidden_size=2)],
             [init(f32(np.ones((1, 8, 4)) * 0.1), "W"), init(f32(np.ones((1, 8, 2)) * 0.1), "R")]),
    "gru": ([h.make_node("GRU", ["X", "W", "R"], ["Y"], hidden_size=2)],
            [init(f32(np.ones((1, 6, 4)) * 0.1), "W"), init(f32(np.ones((1, 6, 2)) * 0.1), "R")]),
    "rnn": ([h.make_node("RNN", ["X", "W", "R"], ["Y"], hidden_size=2)],
            [init(f32(np.ones((1, 2, 4)) * 0.1), "W"), init(f32(np.ones((1, 2, 2)) * 0.1), "R")]),
    "quantize": ([h.make_node("QuantizeLinear", ["X", "s", "z"], ["q"]),
                  h.make_node("DequantizeLinear", ["q", "s", "z"], ["Y"])],
                 [init(f32(0.1), "s"), init(np.array(3, dtype=np.uint8), "z")]),
    "dynamic_quantize": ([h.make_node("DynamicQuantizeLinear", ["X"], ["Y", "s", "z"])], []),
    "depth_to_space": ([h.make_node("Reshape", ["X", "s"], ["r"]),
                        h.make_node("DepthToSpace", ["r"], ["Y"], blocksize=2)], [init(i64([1, 4, 3, 2]), "s")]),
    "gemm": ([h.make_node("Reshape", ["X", "s"], ["r"]), h.make_node("Gemm", ["r", "r"], ["Y"], transB=1, alpha=0.5)],
             [init(i64([6, 4]), "s")]),
    "clip": ([h.make_node("Clip", ["X", "lo", "hi"], ["Y"])], [init(f32(0.5), "lo"), init(f32(1.5), "hi")]),
    "argmax": ([h.make_node("ArgMax", ["X"], ["Y"], axis=1, keepdims=0, select_last_index=1)], []),
    "flatten_hardmax": ([h.make_node("Flatten", ["X"], ["f"], axis=2), h.make_node("Hardmax", ["f"], ["Y"])], []),
    "constant_of_shape": ([h.make_node("Shape", ["X"], ["s"]), h.make_node("ConstantOfShape", ["s"], ["Y"])], []),
    "mod_pow": ([h.make_node("Mod", ["X", "m"], ["a"], fmod=1), h.make_node("Pow", ["a", "m"], ["Y"])], [init(f32(1.5), "m")]),
    "reverse_sequence": ([h.make_node("ReverseSequence", ["X", "l"], ["Y"], batch_axis=1, time_axis=0)],
                         [init(i64([1, 2, 2]), "l")]),
    "scatter_elements": ([h.make_node("ScatterElements", ["X", "i", "u"], ["Y"], axis=2)],
                         [init(i64(np.zeros((2, 3, 1), dtype=np.int64)), "i"), init(f32(np.ones((2, 3, 1))), "u")]),
    "conv_transpose": ([h.make_node("Reshape", ["X", "s"], ["r"]),
                        h.make_node("ConvTranspose", ["r", "W"], ["Y"], strides=[2, 2], output_padding=[1, 0])],
                       [init(i64([1, 2, 3, 4]), "s"), init(f32(np.ones((2, 1, 2, 2)) * 0.5), "W")]),
    "conv_group_dilated": ([h.make_node("Reshape", ["X", "s"], ["r"]),
                            h.make_node("Conv", ["r", "W"], ["Y"], group=2, dilations=[1, 2], auto_pad="SAME_UPPER")],
                           [init(i64([1, 2, 3, 4]), "s"), init(f32(np.ones((2, 1, 2, 2))), "W")]),
    "dropout_prelu": ([h.make_node("Dropout", ["X"], ["d"]), h.make_node("PRelu", ["d", "sl"], ["Y"])],
                      [init(f32([0.1, 0.2, 0.3, 0.4]), "sl")]),
    "space_to_depth": ([h.make_node("Reshape", ["X", "s"], ["r"]),
                        h.make_node("SpaceToDepth", ["r"], ["Y"], blocksize=2)], [init(i64([1, 1, 4, 6]), "s")]),
}
for k, (nodes, inits) in ops.items():
    opset = 11 if k.endswith("opset11") else 17
    outs = sorted({o for n in nodes[-1:] for o in n.output if o})
    m = model(nodes, [X234], [], inits, opset=opset)
    inferred = onnx.shape_inference.infer_shapes(m).graph.value_info
    m.graph.output.extend([v for v in inferred if v.name in outs])  # outputs typed as ONNX infers
    put("onnx", "ok_op_" + k, m.SerializeToString())
