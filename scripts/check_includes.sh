#!/usr/bin/env bash
# The rooms' include rule for devices (issue 19, DESIGN.md): a file under devices/ includes
# core/ and jit/group.h only, never another file of jit/, ops/, autograd/, io/ or lua/; and
# jit/ names no device's header; distributed/ (the MPI transport) includes core/ only. Prints each offending line; exits 1 when there is one.
cd "$(dirname "$0")/.."
bad=$(grep -nE '#include "[^"]*(jit/|ops/|autograd/|io/|lua/)' devices/*/*.c devices/*/*.h 2>/dev/null |
      grep -v 'jit/group\.h"')
bad+=$(grep -nE '#include "[^"]*devices/' jit/*.c jit/*.h core/*.c core/*.h 2>/dev/null)
bad+=$(grep -nE '#include "[^"]*(jit|ops|autograd|io|lua|devices)/' distributed/*.c distributed/*.h 2>/dev/null)
if [ -n "$bad" ]; then
  echo "includes that break the rooms' rule:"
  echo "$bad"
  exit 1
fi
echo "check_includes: devices/ include core/ and jit/group.h only; jit/ and core/ include no device; distributed/ includes core/ only"
