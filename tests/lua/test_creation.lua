-- test_creation.lua — making tensors from Lua and reading them back: tide.tensor, zeros/ones/
-- empty/full/arange/linspace/eye, *_like, attributes, item/totable, conversions, random numbers.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local H = require "harness"
local tide = require "tide"

H.test("tensor from nested tables infers shape and dtype", function()
  local x = tide.tensor({ { 1, 2, 3 }, { 4, 5, 6 } })
  H.eq(x:size(), { 2, 3 })
  H.eq(x.shape, { 2, 3 })
  H.eq(x.dtype, "int64")
  H.eq(x:totable(), { { 1, 2, 3 }, { 4, 5, 6 } })
  H.eq(tide.tensor({ 1, 2.5 }).dtype, "float32")
  H.eq(tide.tensor({ true, false }).dtype, "bool")
  H.eq(tide.tensor({ true, false }):totable(), { true, false })
  H.eq(tide.tensor({ true, 2 }):totable(), { 1, 2 })
  H.values(tide.tensor({ { 0.5 }, { -1.25 } }), { { 0.5 }, { -1.25 } })
end)

H.test("tensor: 0-dim, empty, explicit dtype, from a tensor", function()
  local s = tide.tensor(3.5)
  H.eq(s:dim(), 0)
  H.eq(s:size(), {})
  H.eq(s:item(), 3.5)
  H.eq(tide.tensor(7):item(), 7)
  H.eq(math.type(tide.tensor(7):item()), "integer")
  H.eq(tide.tensor(true):item(), true)
  H.eq(tide.tensor({}):size(), { 0 })
  H.eq(tide.tensor({}).dtype, "float32")
  H.eq(tide.tensor({ {}, {} }):size(), { 2, 0 })
  local d = tide.tensor({ 1, 2 }, { dtype = "float64" })
  H.eq(d.dtype, "float64")
  H.eq(tide.tensor({ 1.9, -1.9 }, { dtype = tide.int32 }):totable(), { 1, -1 })
  H.eq(tide.tensor({ 1 }, { dtype = "double" }).dtype, "float64")
  H.eq(tide.tensor({ 1 }, { device = "cpu" }).device, "cpu")
  local a = tide.tensor({ 1, 2, 3 })
  local b = tide.tensor(a)
  b[1] = 10
  H.eq(a:totable(), { 1, 2, 3 }, "tensor(x) copies")
  H.eq(tide.tensor(a, { dtype = "float32" }).dtype, "float32")
end)

H.test("int64 values stay exact beyond 2^53", function()
  local big = (1 << 62) + 1
  local x = tide.tensor({ big, -big })
  H.eq(x:totable(), { big, -big })
  H.eq(x[1]:item(), big)
  H.eq(tide.full({ 2 }, big):totable(), { big, big })
  local y = tide.zeros(2, { dtype = "int64" })
  y:fill_(big)
  H.eq(y:totable(), { big, big })
  y[2] = big - 1
  H.eq(y:totable(), { big, big - 1 })
end)

H.test("zeros, ones, empty with varargs, a table and options", function()
  H.values(tide.zeros(2, 3), { { 0, 0, 0 }, { 0, 0, 0 } })
  H.values(tide.ones({ 2, 2 }), { { 1, 1 }, { 1, 1 } })
  H.eq(tide.zeros({ 2, 3 }, { dtype = "int64" }).dtype, "int64")
  H.eq(tide.zeros(2, 3, { dtype = "int64" }).dtype, "int64")
  H.eq(tide.ones(3).dtype, "float32")
  H.eq(tide.empty(4, 5):size(), { 4, 5 })
  H.eq(tide.zeros():dim(), 0)
  H.eq(tide.zeros({}):dim(), 0)
  H.eq(tide.zeros(0, 3):numel(), 0)
  local x = tide.zeros(3, 4)
  H.eq(tide.zeros(x:size()):size(), { 3, 4 }, "sizes from x:size()")
end)

H.test("full infers the dtype from the value", function()
  local f = tide.full({ 2, 2 }, 7)
  H.eq(f.dtype, "int64")
  H.eq(f:totable(), { { 7, 7 }, { 7, 7 } })
  H.eq(tide.full({ 3 }, 2.5).dtype, "float32")
  H.eq(tide.full({ 3 }, true).dtype, "bool")
  H.values(tide.full(2, 3, 1.5), { { 1.5, 1.5, 1.5 }, { 1.5, 1.5, 1.5 } })
  H.eq(tide.full({ 2 }, 1, { dtype = "float64" }).dtype, "float64")
end)

H.test("arange and linspace", function()
  H.eq(tide.arange(5):totable(), { 0, 1, 2, 3, 4 })
  H.eq(tide.arange(5).dtype, "int64")
  H.eq(tide.arange(2, 8, 2):totable(), { 2, 4, 6 })
  H.eq(tide.arange(5, 0, -2):totable(), { 5, 3, 1 })
  local a = tide.arange(0, 1, 0.25)
  H.eq(a.dtype, "float32")
  H.values(a, { 0, 0.25, 0.5, 0.75 })
  H.eq(tide.arange(3, { dtype = "float64" }).dtype, "float64")
  H.values(tide.linspace(0, 1, 5), { 0, 0.25, 0.5, 0.75, 1 })
  H.values(tide.linspace(-1, 1, 1), { -1 })
  H.eq(tide.linspace(0, 1, 3, { dtype = "float64" }).dtype, "float64")
  H.values(tide.logspace(0, 3, 4, 2), { 1, 2, 4, 8 })
  H.values(tide.logspace(-1, 1, 3, { dtype = "float64" }), { 0.1, 1, 10 })
  H.raises(function() tide.logspace(0, 1, 3, 0 / 0) end, "logspace: start 0, end 1 and base")
end)

H.test("eye", function()
  H.values(tide.eye(3), { { 1, 0, 0 }, { 0, 1, 0 }, { 0, 0, 1 } })
  H.values(tide.eye(2, 3), { { 1, 0, 0 }, { 0, 1, 0 } })
  H.eq(tide.eye(2, { dtype = "int32" }).dtype, "int32")
end)

H.test("*_like keep shape and dtype unless told", function()
  local x = tide.tensor({ { 1, 2 }, { 3, 4 } }, { dtype = "int32" })
  local z = tide.zeros_like(x)
  H.eq(z:size(), { 2, 2 })
  H.eq(z.dtype, "int32")
  H.eq(z:totable(), { { 0, 0 }, { 0, 0 } })
  H.eq(tide.ones_like(x, { dtype = "float32" }).dtype, "float32")
  H.eq(tide.full_like(x, 9):totable(), { { 9, 9 }, { 9, 9 } })
  H.eq(tide.empty_like(x):size(), { 2, 2 })
end)

H.test("attributes and queries", function()
  local x = tide.zeros(2, 3, 4)
  H.eq(x:dim(), 3)
  H.eq(x.ndim, 3)
  H.eq(x:numel(), 24)
  H.eq(x:size(1), 2)
  H.eq(x:size(-1), 4)
  H.eq(#x, 2)
  H.eq(x:stride(), { 12, 4, 1 })
  H.eq(x:stride(2), 4)
  H.eq(x.device, "cpu")
  H.eq(x:is_contiguous(), true)
  H.eq(x:transpose(1, 3):is_contiguous(), false)
  H.eq(x:element_size(), 4)
  H.eq(x:is_floating_point(), true)
  H.eq(tide.is_tensor(x), true)
  H.eq(tide.is_tensor({}), false)
  H.eq(x.nonexistent, nil)
  H.eq(tide.float32, "float32")
  H.eq(tide.int64, "int64")
  H.eq(x:type(), "float32")
end)

H.test("item and totable return Lua types", function()
  H.eq(math.type(tide.tensor({ 2.0 }):item()), "float")
  H.eq(math.type(tide.tensor({ 2 }):item()), "integer")
  H.eq(tide.tensor({ { 5 } }):item(), 5)
  local t = tide.tensor({ { 1.5, 2 }, { 3, 4 } }):totable()
  H.eq(t, { { 1.5, 2.0 }, { 3.0, 4.0 } })
  H.eq(math.type(t[1][2]), "float")
  H.eq(tide.tensor(4):totable(), 4)
  H.eq(tide.tensor({ 1, 2 }, { dtype = "uint8" }):totable(), { 1, 2 })
  -- non-contiguous views read in logical order
  local m = tide.tensor({ { 1, 2, 3 }, { 4, 5, 6 } })
  H.eq(m:t():totable(), { { 1, 4 }, { 2, 5 }, { 3, 6 } })
end)

H.test("conversions", function()
  local x = tide.tensor({ 1.7, -2.2, 0 })
  H.eq(x:int().dtype, "int32")
  H.eq(x:int():totable(), { 1, -2, 0 })
  H.eq(x:long().dtype, "int64")
  H.eq(x:double().dtype, "float64")
  H.eq(x:bool():totable(), { true, true, false })
  H.eq(x:byte().dtype, "uint8")
  H.eq(x:float() == x, true, "float() of a float tensor is itself")
  H.eq(x:to("float64").dtype, "float64")
  H.eq(x:to("cpu") == x, true)
  H.eq(x:to(tide.zeros(1, { dtype = "int32" })).dtype, "int32")
  H.eq(x:to({ dtype = "float64", device = "cpu" }).dtype, "float64")
  H.eq(x:type("int64").dtype, "int64")
  local c = x:clone()
  c[1] = 100
  H.near(x[1]:item(), 1.7, 1e-6, "clone is a copy")
  local t = tide.zeros(3, 2):t()
  H.eq(t:contiguous():is_contiguous(), true)
  H.eq(t:contiguous():totable(), t:totable())
end)

H.test("rand, randn, randint, randperm, manual_seed", function()
  tide.manual_seed(42)
  local a = tide.rand(1000)
  tide.manual_seed(42)
  local b = tide.rand(1000)
  H.eq(tide.equal(a, b), true, "same seed, same numbers")
  H.ok(a:min():item() >= 0 and a:max():item() < 1, "rand in [0, 1)")
  H.near(a:mean():item(), 0.5, 0.1)
  local n = tide.randn(2000)
  H.near(n:mean():item(), 0, 0.15)
  H.eq(tide.randn(2, 3):size(), { 2, 3 })
  local r = tide.randint(3, 7, { 500 })
  H.eq(r.dtype, "int64")
  H.ok(r:min():item() >= 3 and r:max():item() <= 6, "randint in [low, high)")
  H.eq(tide.randint(5, { 2, 2 }):size(), { 2, 2 })
  local p = tide.randperm(10)
  local seen = {}
  for _, v in ipairs(p:totable()) do
    seen[v] = true
  end
  for i = 1, 10 do
    H.ok(seen[i], "randperm holds 1..n")
  end
  local st = tide.get_rng_state()
  local c = tide.rand(3)
  tide.set_rng_state(st)
  H.eq(tide.equal(c, tide.rand(3)), true, "rng state round trip")
  local u = tide.zeros(1000):uniform_(2, 3)
  H.ok(u:min():item() >= 2 and u:max():item() < 3)
  local g = tide.zeros(2000):normal_(5, 2)
  H.near(g:mean():item(), 5, 0.05)
  H.eq(tide.rand_like(u):size(), { 1000 })
  local bern = tide.bernoulli(tide.full({ 100 }, 1.0))
  H.eq(bern:sum():item(), 100)
end)

H.test("an allocation too big for the memory cap names the creation op", function()
  -- 1e12 elements are terabytes, over any cap (a fraction of host memory by default); the error
  -- names what was called, not the primitive that allocates (fill, iota, random)
  local N = 1e12
  local cases = {
    { "zeros", function() return tide.zeros(N) end },
    { "ones", function() return tide.ones(N) end },
    { "empty", function() return tide.empty(N) end },
    { "full", function() return tide.full({ N }, 2.5) end },
    { "rand", function() return tide.rand(N) end },
    { "randn", function() return tide.randn(N) end },
    { "randint", function() return tide.randint(0, 9, { N }) end },
    { "randperm", function() return tide.randperm(N) end },
    { "arange", function() return tide.arange(N) end },
    { "linspace", function() return tide.linspace(0, 1, N) end },
    { "eye", function() return tide.eye(1e6) end },
  }
  for _, c in ipairs(cases) do
    H.raises(c[2], c[1] .. ": out of memory", "[1000000")
  end
end)

H.done()
