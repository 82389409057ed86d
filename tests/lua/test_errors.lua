-- test_errors.lua — every mistake a user can type raises a Lua error with a useful message
-- (naming the op, and the shapes or dtypes involved) instead of crashing: wrong types, nil,
-- ragged tables, floats where an index is needed, huge sizes, bad dims and positions.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local H = require "harness"
local tide = require "tide"

local x = tide.tensor({ { 1.0, 2.0, 3.0 }, { 4.0, 5.0, 6.0 } }) -- {2, 3} float32
local i = tide.tensor({ 1, 2, 3 })                               -- {3} int64
local big = 1 << 40

-- { what, function, substrings the message must hold... }
local cases = {
  -- creation
  { "tensor of a string", function() return tide.tensor("abc") end, "tensor:", "string" },
  { "tensor of nil", function() return tide.tensor() end, "tensor:", "nil" },
  { "ragged table", function() return tide.tensor({ { 1, 2 }, { 3 } }) end, "ragged", "[2]" },
  { "ragged depth", function() return tide.tensor({ { 1, 2 }, 3 }) end, "ragged", "[2]" },
  { "too deep", function() return tide.tensor({ { 1 }, { { 2 } } }) end, "ragged" },
  { "string element", function() return tide.tensor({ 1, "a" }) end, "element [2]", "string" },
  { "nil hole", function() return tide.tensor({ 1, nil, 3 }) end, "tensor:" },
  { "tensor element", function() return tide.tensor({ x, x }) end, "tide.stack" },
  { "self-referential table", function()
    local t = {}
    t[1] = t
    return tide.tensor(t)
  end, "deeper than 8" },
  { "unknown dtype",
    function() return tide.zeros(2, { dtype = "float8" }) end,
    "unknown dtype", "float8" },
  { "dtype not a string",
    function() return tide.zeros(2, { dtype = 3 }) end,
    "dtype must be a string" },
  { "unknown option",
    function() return tide.zeros(2, { dtyp = "int64" }) end,
    "unknown option", "dtyp" },
  { "unknown device", function() return tide.ones(2, { device = "cuda" }) end, "device", "cuda" },
  { "unknown device: zeros", function() return tide.zeros(2, { device = "cuda" }) end, 'zeros: ', 'device "cuda"' },
  { "unknown device: empty", function() return tide.empty(2, { device = "cuda" }) end, 'empty: ', 'device "cuda"' },
  { "unknown device: full", function() return tide.full(2, 7, { device = "cuda" }) end, 'full: ', 'device "cuda"' },
  { "unknown device: arange", function() return tide.arange(3, { device = "cuda" }) end, 'arange: ', 'device "cuda"' },
  { "unknown device: linspace", function() return tide.linspace(0, 1, 3, { device = "cuda" }) end, 'linspace: ', 'device "cuda"' },
  { "unknown device: eye", function() return tide.eye(2, { device = "cuda" }) end, 'eye: ', 'device "cuda"' },
  { "unknown device: rand", function() return tide.rand(2, { device = "cuda" }) end, 'rand: ', 'device "cuda"' },
  { "unknown device: randn", function() return tide.randn(2, { device = "cuda" }) end, 'randn: ', 'device "cuda"' },
  { "unknown device: randint", function() return tide.randint(3, { 2 }, { device = "cuda" }) end, 'randint: ', 'device "cuda"' },
  { "unknown device: randperm", function() return tide.randperm(3, { device = "cuda" }) end, 'randperm: ', 'device "cuda"' },
  { "unknown device: tensor", function() return tide.tensor({ 1, 2 }, { device = "cuda" }) end, 'tensor: ', 'device "cuda"' },
  { "unknown device: zeros_like", function() return tide.zeros_like(x, { device = "cuda" }) end, 'zeros_like: ', 'device "cuda"' },
  { "unknown device: set_default_device", function() return tide.set_default_device("cuda") end, 'set_default_device: ', 'device "cuda"' },
  { "bad requires_grad",
    function() return tide.ones(2, { requires_grad = 1 }) end,
    "requires_grad" },
  { "negative size", function() return tide.zeros(2, -3) end, "zeros", "size 2", "-3" },
  { "float size", function() return tide.zeros(2.5) end, "zeros", "integer", "2.5" },
  { "string size", function() return tide.ones("a") end, "ones", "integer" },
  { "huge sizes", function() return tide.zeros(big, big) end, "zeros", "too large" },
  { "huge empty", function() return tide.empty(big * 1000) end, "empty", "too large" },
  { "too many dims", function() return tide.zeros(1, 1, 1, 1, 1, 1, 1, 1, 1) end, "at most 8" },
  { "full without value", function() return tide.full() end, "full" },
  { "full bad value", function() return tide.full({ 2 }, "x") end, "full", "fill value" },
  { "arange without args", function() return tide.arange() end, "arange" },
  { "arange string", function() return tide.arange("a") end, "arange", "number" },
  { "arange zero step", function() return tide.arange(0, 10, 0) end, "arange" },
  { "linspace float steps", function() return tide.linspace(0, 1, 2.5) end, "linspace", "integer" },
  { "linspace negative steps", function() return tide.linspace(0, 1, -2) end, "linspace" },
  { "eye negative", function() return tide.eye(-1) end, "eye" },
  { "zeros_like of a number", function() return tide.zeros_like(3) end, "zeros_like", "tensor" },
  { "randint without size", function() return tide.randint(5) end, "randint" },
  -- arithmetic and types
  { "broadcast mismatch", function() return x + tide.ones(4) end, "add", "[2, 3]", "[4]" },
  { "add a string", function() return x + "a" end, "add", "string" },
  { "add a table", function() return x + {} end, "add", "table" },
  { "add nil", function() return tide.add(x, nil) end, "add", "nil" },
  { "add two numbers", function() return tide.add(1, 2) end, "add", "at least one" },
  { "mul bool tensor by string", function() return tide.mul("x", x) end, "mul" },
  { "concat", function() return x .. "a" end, "concatenate" },
  { "compare with <", function() return x < x end, "compare" },
  { "sub on bool",
    function() return tide.tensor({ true }) - tide.tensor({ false }) end,
    "sub", "bool" },
  { "in-place float into int", function() return i:add_(1.5) end, "add", "float32", "int64" },
  { "in-place broadcast growth",
    function() return tide.ones(3):add_(tide.ones(2, 3)) end,
    "add", "{2, 3}", "{3}" },
  { "copy_ bad shape", function() return x:copy_(tide.ones(4)) end, "copy" },
  { "copy_ of a string", function() return x:copy_("s") end, "copy_", "tensor" },
  { "fill_ with a table", function() return x:fill_({}) end, "fill_", "number" },
  { "fill_ multi-element", function() return x:fill_(x) end, "fill_", "one-element" },
  { "mean of ints", function() return i:mean() end, "mean", "int64" },
  { "matmul shapes", function() return x:matmul(x) end, "matmul", "[2, 3]" },
  { "matmul number", function() return x:matmul(2) end, "matmul", "tensor" },
  { "mm of 1-d", function() return tide.mm(i, i) end, "mm", "2-dim" },
  { "where cond not a tensor", function() return tide.where(true, x, x) end, "where", "tensor" },
  { "clamp nothing", function() return x:clamp() end, "clamp", "at least one" },
  { "equal of a number", function() return tide.equal(x, 1) end, "equal", "tensor" },
  { "allclose rtol string", function() return tide.allclose(x, x, "a") end, "allclose", "rtol" },
  -- dims and positions
  { "sum dim 0", function() return x:sum(0) end, "sum", "dim 0", "1..2" },
  { "sum dim 3", function() return x:sum(3) end, "sum", "dim 3" },
  { "sum dim -3", function() return x:sum(-3) end, "sum", "dim -3" },
  { "sum float dim", function() return x:sum(1.5) end, "sum", "integer", "1.5" },
  { "sum keepdim not bool", function() return x:sum(1, 1) end, "sum", "keepdim" },
  { "sum empty dim list", function() return x:sum({}) end, "sum", "empty" },
  { "max bad dim", function() return x:max(5) end, "max", "dim 5" },
  { "argmax string dim", function() return x:argmax("a") end, "argmax", "integer" },
  { "size bad dim", function() return x:size(3) end, "size", "dim 3" },
  { "transpose bad dim", function() return x:transpose(1, 4) end, "transpose", "dim 4" },
  { "permute wrong count", function() return x:permute(1) end, "permute", "1 dims" },
  { "permute repeat", function() return x:permute(1, 1) end, "permute", "twice" },
  { "unsqueeze too far", function() return x:unsqueeze(4) end, "unsqueeze", "dim 4" },
  { "squeeze bad dim", function() return x:squeeze(7) end, "squeeze", "dim 7" },
  { "view incompatible", function() return x:t():view(6) end, "view" },
  { "view bad numel", function() return x:view(4) end, "view" },
  { "view two -1", function() return x:view(-1, -1) end, "view" },
  { "reshape -2", function() return x:reshape(-2, 3) end, "reshape", "-2" },
  { "expand bad", function() return x:expand(4, 3) end, "expand" },
  { "narrow past end", function() return x:narrow(2, 3, 2) end, "narrow", "does not fit" },
  { "narrow start 0", function() return x:narrow(2, 0, 1) end, "narrow", "index 0" },
  { "select out of range", function() return x:select(1, 3) end, "select", "index 3", "size 2" },
  { "select on 0-dim", function() return tide.tensor(1):select(1, 1) end, "select", "0-dim" },
  { "t of 3-d", function() return tide.zeros(2, 2, 2):t() end, "t:", "{2, 2, 2}" },
  { "flatten reversed", function() return x:flatten(2, 1) end, "flatten" },
  { "cat empty list", function() return tide.cat({}) end, "cat", "non-empty" },
  { "cat non-tensor", function() return tide.cat({ x, 1 }) end, "cat", "element 2" },
  { "cat shapes", function() return tide.cat({ x, tide.ones(2, 2) }) end, "cat" },
  { "cat not a table", function() return tide.cat(x) end, "cat", "table" },
  { "stack shapes", function() return tide.stack({ x, i }) end, "stack" },
  { "pad odd count", function() return tide.pad(x, { 1 }) end, "pad", "even" },
  { "flip no dims", function() return x:flip() end, "flip" },
  { "split zero", function() return x:split(0) end, "split", "positive" },
  { "split sizes", function() return x:split({ 1, 2 }) end, "split", "add up" },
  { "chunk zero", function() return x:chunk(0) end, "chunk" },
  -- indexing
  { "index 0", function() return x[0] end, "index 0", "1..2" },
  { "index past end", function() return x[3] end, "index 3", "size 2" },
  { "index -3", function() return x[-3] end, "index -3" },
  { "index float", function() return x[1.5] end, "index", "integer", "1.5" },
  { "index bool", function() return x[true] end, "index", "boolean" },
  { "index too many", function() return x[{ 1, 1, 1 }] end, "3 entries", "2 dims" },
  { "index bad range", function() return x[{ { 1, 5 } }] end, "range {1, 5}", "size 2" },
  { "index zero step", function() return x[{ { 1, 2, 0 } }] end, "step" },
  { "index range of 4", function() return x[{ { 1, 2, 1, 1 } }] end, "4 entries" },
  { "index string entry", function() return x[{ "a" }] end, "entry 1", "string" },
  { "index float in table", function() return x[{ 1, 2.5 }] end, "integer", "2.5" },
  { "index 0-dim", function() return tide.tensor(1)[1] end, "0-dim" },
  { "index with a float tensor",
    function() return x[tide.ones(1)] end,
    "int64 or int32", "float32" },
  { "read with a mask", function() return x[x:gt(1)] end, "mask" },
  { "assign a string", function() x[1] = "a" end, "assigned value", "string" },
  { "assign a wrong shape", function() x[1] = tide.ones(2) end, "copy" },
  { "assign past end", function() x[5] = 1 end, "index 5" },
  { "assign int-tensor key", function() x[i] = 1 end, "bool mask" },
  { "set unknown field", function() x.foo = 1 end, "cannot set field 'foo'" },
  { "item of many", function() return x:item() end, "item", "{2, 3}" },
  { "totable of a huge view",
    function() return tide.ones(1):expand(1 << 31, 1 << 31):totable() end,
    "totable", "too many" },
  { "contiguous of a huge view",
    function() return tide.ones(1):expand(1 << 31, 1 << 31):contiguous() end,
    "contiguous", "too large" },
  { "# of 0-dim", function() return #tide.tensor(1) end, "0-dim" },
  { "gather float index", function() return x:gather(2, tide.ones(2, 1)) end, "gather", "float32" },
  { "gather index 0",
    function() return x:gather(2, tide.tensor({ { 0 }, { 1 } })) end,
    "gather", "index value 0", "1-based" },
  { "gather index past end",
    function() return x:gather(2, tide.tensor({ { 4 }, { 1 } })) end,
    "gather", "index value 4", "size 3" },
  { "index_select past end",
    function() return x:index_select(1, tide.tensor({ 3 })) end,
    "index_select", "index value 3" },
  { "embedding index 0",
    function() return tide.embedding(tide.tensor({ 0 }), x) end,
    "embedding", "index value 0" },
  { "one_hot past classes",
    function() return tide.one_hot(tide.tensor({ 4 }), 3) end,
    "one_hot", "index value 4" },
  { "cross_entropy float target",
    function() return tide.cross_entropy(x, tide.ones(2)) end,
    "cross_entropy", "int64" },
  { "cross_entropy target past classes",
    function() return tide.cross_entropy(x, tide.tensor({ 1, 4 })) end,
    "cross_entropy", "index value 4" },
  { "cross_entropy bad reduction",
    function() return tide.cross_entropy(x, i, { reduction = "avg" }) end,
    "reduction" },
  { "softmax without dim", function() return x:softmax() end, "softmax", "dim is required" },
  { "conv2d bad padding",
    function() return tide.conv2d(x, x, nil, 1, "full") end,
    "conv2d", "padding" },
  { "max_pool2d no kernel", function() return tide.max_pool2d(x) end, "max_pool2d", "kernel_size" },
  -- methods called on the wrong thing
  { "method on a number", function() return tide.Tensor.exp(3) end, "exp", "tensor", "number" },
  { "method with nil self", function() return tide.Tensor.sum(nil) end, "sum", "nil" },
  { "no_grad of a number", function() return tide.no_grad(3) end, "no_grad", "function" },
  { "set_grad_enabled of a number",
    function() return tide.set_grad_enabled(1) end,
    "set_grad_enabled", "boolean" },
  { "backward bad option",
    function() return x:backward({ retain = true }) end,
    "backward", "retain" },
  { "set_num_threads 0", function() return tide.set_num_threads(0) end, "set_num_threads" },
  { "manual_seed string", function() return tide.manual_seed("a") end, "manual_seed", "integer" },
}

for _, c in ipairs(cases) do
  H.test(c[1], function()
    H.raises(c[2], table.unpack(c, 3))
  end)
end

H.test("errors point at the Lua line that made them", function()
  local ok, err = pcall(function() return x + tide.ones(4) end)
  H.eq(ok, false)
  H.ok(err:find("test_errors.lua:%d+: add:"), err)
end)

H.test("a closed tensor raises instead of touching freed memory", function()
  local y
  do
    local z <close> = tide.ones(3)
    y = z
  end
  H.raises(function() return y + 1 end, "closed")
  H.raises(function() return y:sum() end, "closed")
  H.raises(function() return tostring(y) end, "closed")
  H.raises(function() return y[1] end, "closed")
  -- still a tensor (a closed one): is_tensor answers rather than raising
  H.eq(tide.is_tensor(y), true)
  H.eq(tide.is_tensor(tide.ones(1)), true)
  for _, v in ipairs({ 1, "x", {}, io.stdout, print, true }) do
    H.eq(tide.is_tensor(v), false, type(v))
  end
  H.eq(tide.is_tensor(nil), false)
  H.eq(tide.is_tensor(), false)
end)

H.test("the process is still fine after all of that", function()
  H.eq((x + 1):sum():item(), 27.0)
end)

H.done()
