-- test_printing.lua — tostring(x) against the strings PyTorch prints for the same tensors
-- (with Lua's true/false, {a, b} sizes and tide.<dtype> names).
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local H = require "harness"
local tide = require "tide"

local function same(x, want)
  local got = tostring(x)
  if got ~= want then
    error(("expected\n%s\ngot\n%s"):format(want, got), 2)
  end
end

H.test("integers, floats and booleans", function()
  same(tide.tensor({ 1, 2, 3 }), "tensor([1, 2, 3])")
  same(tide.tensor({ -1, 20, 300 }), "tensor([ -1,  20, 300])")
  same(tide.tensor({ 1.5, 2, 3 }), "tensor([1.5000, 2.0000, 3.0000])")
  same(tide.tensor({ 1.0, 2.0 }), "tensor([1., 2.])")
  same(tide.tensor({ -1.5, 2.25 }), "tensor([-1.5000,  2.2500])")
  same(tide.zeros(3), "tensor([0., 0., 0.])")
  same(tide.tensor({ true, false }), "tensor([ true, false])")
  same(tide.tensor({ 0.5, 200.5 }), "tensor([  0.5000, 200.5000])")
end)

H.test("0-dim tensors", function()
  same(tide.tensor(3.5), "tensor(3.5000)")
  same(tide.tensor(3), "tensor(3)")
  same(tide.tensor(2.0), "tensor(2.)")
  same(tide.tensor(true), "tensor(true)")
  same(tide.tensor(1, { dtype = "int32" }), "tensor(1, dtype=tide.int32)")
end)

H.test("scientific notation when values span a wide range", function()
  same(tide.tensor({ 1e-5, 1 }), "tensor([1.0000e-05, 1.0000e+00])")
  same(tide.tensor({ 1, 1e9 }), "tensor([1.0000e+00, 1.0000e+09])")
  same(tide.tensor({ 1.0, 2000.0 }), "tensor([1.0000e+00, 2.0000e+03])")
  same(tide.tensor({ 0.5, 1e9 }), "tensor([5.0000e-01, 1.0000e+09])")
end)

H.test("the switch to scientific notation at PyTorch's exact thresholds", function()
  -- the rule (torch/_tensor_str.py, _Formatter) looks at the nonzero finite values only:
  -- scientific when max/min > 1000, max > 1e8, or (not all whole) min < 1e-4; all strict
  same(tide.tensor({ 1340590.5 }), "tensor([1340590.5000])") -- under 1e8, one value: fixed
  same(tide.tensor(1340590.5), "tensor(1340590.5000)")
  same(tide.tensor({ 1340590.5, 2000.25 }), "tensor([1340590.5000,    2000.2500])") -- ratio 670
  same(tide.tensor({ 1340590.5, 1.0 }), "tensor([1.3406e+06, 1.0000e+00])") -- ratio > 1000
  same(tide.tensor({ 1000.0, 1.0 }), "tensor([1000.,    1.])") -- ratio exactly 1000
  same(tide.tensor({ 1000.5, 1.0 }), "tensor([1.0005e+03, 1.0000e+00])")
  same(tide.tensor({ 1e8 }), "tensor([100000000.])") -- exactly 1e8 stays fixed
  same(tide.tensor({ 1.5e8 }), "tensor([1.5000e+08])")
  same(tide.tensor({ 123456789.5 }, { dtype = "float64" }),
    "tensor([1.2346e+08], dtype=tide.float64)")
  -- 1e-4 rounds below 1e-4 in float32 (9.99999975e-05) but is exact in float64
  same(tide.tensor({ 1e-4 }), "tensor([1.0000e-04])")
  same(tide.tensor({ 1e-4 }, { dtype = "float64" }), "tensor([0.0001], dtype=tide.float64)")
  same(tide.tensor({ 0.00012, 0.1 }), "tensor([0.0001, 0.1000])")
  -- zeros, nan and inf neither decide the mode nor widen the columns
  same(tide.tensor({ 1e8, 0, 0 / 0, 1 / 0 }),
    "tensor([100000000.,         0.,        nan,        inf])")
  same(tide.tensor({ 2e8, -1 / 0 }), "tensor([2.0000e+08,       -inf])")
  same(tide.tensor({ -1e9, 0.5 }), "tensor([-1.0000e+09,  5.0000e-01])")
end)

H.test("nan and infinities", function()
  same(tide.tensor({ 1, 0 / 0, 1 / 0, -1 / 0 }, { dtype = "float32" }),
    "tensor([1., nan, inf, -inf])")
  same(tide.tensor({ 0.5, 0 / 0 }), "tensor([0.5000,    nan])")
end)

H.test("dtype, size and empty suffixes", function()
  same(tide.tensor({ 1, 2 }, { dtype = "int32" }), "tensor([1, 2], dtype=tide.int32)")
  same(tide.tensor({ 1, 2 }, { dtype = "float64" }), "tensor([1., 2.], dtype=tide.float64)")
  same(tide.tensor({ 1, 2 }, { dtype = "uint8" }), "tensor([1, 2], dtype=tide.uint8)")
  same(tide.tensor({}), "tensor([])")
  same(tide.zeros(0, 3), "tensor([], size={0, 3})")
  same(tide.zeros(0, { dtype = "int64" }), "tensor([], dtype=tide.int64)")
  same(tide.zeros(2, 0, { dtype = "bool" }), "tensor([], size={2, 0}, dtype=tide.bool)")
end)

H.test("matrices and 3-d tensors", function()
  same(tide.zeros(2, 3), "tensor([[0., 0., 0.],\n        [0., 0., 0.]])")
  same(tide.tensor({ { 1, 2 }, { 3, 40 } }), "tensor([[ 1,  2],\n        [ 3, 40]])")
  same(tide.arange(8):view(2, 2, 2),
    "tensor([[[0, 1],\n         [2, 3]],\n\n        [[4, 5],\n         [6, 7]]])")
  same(tide.arange(6):view(3, 2):t(), "tensor([[0, 2, 4],\n        [1, 3, 5]])")
  same(tide.zeros(2, 1, 1, 1), "tensor([[[[0.]]],\n\n\n        [[[0.]]]])")
end)

H.test("long rows wrap at 80 columns", function()
  same(tide.arange(10):float() / 3,
    "tensor([0.0000, 0.3333, 0.6667, 1.0000, 1.3333, 1.6667, 2.0000, 2.3333, 2.6667,\n" ..
    "        3.0000])")
  same(tide.arange(30),
    "tensor([ 0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14, 15, 16, 17,\n" ..
    "        18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29])")
end)

H.test("large tensors elide their middles", function()
  same(tide.arange(10000), "tensor([   0,    1,    2,  ..., 9997, 9998, 9999])")
  same(tide.arange(2000):view(40, 50), table.concat({
    "tensor([[   0,    1,    2,  ...,   47,   48,   49],",
    "        [  50,   51,   52,  ...,   97,   98,   99],",
    "        [ 100,  101,  102,  ...,  147,  148,  149],",
    "        ...,",
    "        [1850, 1851, 1852,  ..., 1897, 1898, 1899],",
    "        [1900, 1901, 1902,  ..., 1947, 1948, 1949],",
    "        [1950, 1951, 1952,  ..., 1997, 1998, 1999]])" }, "\n"))
  same(tide.zeros(1001), "tensor([0., 0., 0.,  ..., 0., 0., 0.])")
  -- only the printed corners are copied, even from a view far larger than memory
  same(tide.ones(1):expand(1 << 31, 1 << 31), table.concat({
    "tensor([[1., 1., 1.,  ..., 1., 1., 1.],",
    "        [1., 1., 1.,  ..., 1., 1., 1.],",
    "        [1., 1., 1.,  ..., 1., 1., 1.],",
    "        ...,",
    "        [1., 1., 1.,  ..., 1., 1., 1.],",
    "        [1., 1., 1.,  ..., 1., 1., 1.],",
    "        [1., 1., 1.,  ..., 1., 1., 1.]])" }, "\n"))
  -- the float mode comes from the printed values only
  local x = tide.ones(2000)
  x[1000] = 0.5
  same(x, "tensor([1., 1., 1.,  ..., 1., 1., 1.])")
end)

H.test("print uses tostring", function()
  local x = tide.tensor({ 1, 2 })
  H.eq(string.format("%s", x), "tensor([1, 2])")
  H.eq(tostring(x:t()), "tensor([1, 2])")
end)

H.test("requires_grad and grad_fn are shown", function()
  local x = tide.tensor({ 1.0, 2.0 }, { requires_grad = true })
  same(x, "tensor([1., 2.], requires_grad=true)")
  local y = x * 2
  H.ok(tostring(y):find("grad_fn=<", 1, true), "grad_fn shown: " .. tostring(y))
end)

H.done()
