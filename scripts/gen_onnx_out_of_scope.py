#!/usr/bin/python3
"""Writes tests/onnx/out_of_scope.txt: the ONNX backend tests (Debian's libonnx-testdata) that
issue 25 leaves out of scope, each with its reason: the training ops (Adam, Adagrad, Momentum,
Gradient) and tests whose values are strings, sequences or optionals. Uses Debian's python3-onnx
(run with /usr/bin/python3); the conformance runner only reads the list it writes."""
import os
import sys

import onnx

DATA = '/usr/include/onnx/backend/test/data'
TRAINING = {'Adam', 'Adagrad', 'Momentum', 'Gradient'}
STRING = onnx.TensorProto.STRING


def type_reason(t):
    kind = t.WhichOneof('value')
    if kind == 'sequence_type':
        return 'sequence type'
    if kind == 'optional_type':
        return 'optional type'
    if kind == 'map_type':
        return 'map type'
    if kind == 'tensor_type' and t.tensor_type.elem_type == STRING:
        return 'string type'
    return None


def reason(model):
    g = model.graph
    ops = {n.op_type for n in g.node}
    if ops & TRAINING:
        return 'training op ' + ' '.join(sorted(ops & TRAINING))
    for v in list(g.input) + list(g.output) + list(g.value_info):
        r = type_reason(v.type)
        if r:
            return r + " ('%s')" % v.name
    for n in g.node:
        if n.op_type.startswith('Sequence') or n.op_type in (
                'SplitToSequence', 'ConcatFromSequence', 'Optional', 'OptionalHasElement',
                'OptionalGetElement'):
            return 'sequence or optional op ' + n.op_type
        if n.op_type == 'Cast' or n.op_type == 'Constant':
            for a in n.attribute:
                if (a.name == 'to' and a.i == STRING) or (a.name == 'value' and
                                                          a.t.data_type == STRING):
                    return 'string type (%s)' % n.op_type
    return None


def main():
    out = []
    for folder in ('node', 'pytorch-converted', 'pytorch-operator', 'simple'):
        for test in sorted(os.listdir(os.path.join(DATA, folder))):
            model = onnx.load(os.path.join(DATA, folder, test, 'model.onnx'),
                              load_external_data=False)
            r = reason(model)
            if r:
                out.append('%s/%s\t%s' % (folder, test, r))
    path = sys.argv[1] if len(sys.argv) > 1 else 'tests/onnx/out_of_scope.txt'
    with open(path, 'w') as f:
        f.write('# ONNX backend tests out of scope (scripts/gen_onnx_out_of_scope.py): '
                'folder/test<TAB>reason\n')
        f.write(''.join(line + '\n' for line in out))
    print('%d tests out of scope' % len(out))


main()
