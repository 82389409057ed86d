-- test_indexing.lua — Torch7-style indexing and assignment (x[i], x[{2, {1, 3}, {}}], negative
-- positions, steps), bool-mask assignment, and the ops with 1-based index tensors: gather,
-- index_select, scatter_add, embedding, one_hot, masked_fill.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local H = require "harness"
local tide = require "tide"

local function grid()
  return tide.tensor(H.build({ 3, 4 }, function(i, j) return 10 * i + j end))
end

H.test("x[i] selects along dim 1 as a view", function()
  local x = grid()
  H.eq(x[1]:totable(), { 11, 12, 13, 14 })
  H.eq(x[3]:totable(), { 31, 32, 33, 34 })
  H.eq(x[-1]:totable(), { 31, 32, 33, 34 })
  H.eq(x[-3]:totable(), { 11, 12, 13, 14 })
  H.eq(x[2][3]:item(), 23)
  H.eq(x[2][3]:dim(), 0)
  H.eq(x[2]:shares_storage(x), true)
  H.eq(x[2.0]:totable(), { 21, 22, 23, 24 }, "an integral float is an index")
end)

H.test("Torch7 tables: numbers select, {a, b} ranges, {} keeps", function()
  local x = grid()
  H.eq(x[{ 2, 3 }]:item(), 23)
  H.eq(x[{ 2, { 1, 3 } }]:totable(), { 21, 22, 23 })
  H.eq(x[{ { 1, 2 }, {} }]:totable(), { { 11, 12, 13, 14 }, { 21, 22, 23, 24 } })
  H.eq(x[{ {}, 2 }]:totable(), { 12, 22, 32 })
  H.eq(x[{ {}, { 2 } }]:totable(), { { 12 }, { 22 }, { 32 } }, "{a} keeps the dim")
  H.eq(x[{ {}, { -2, -1 } }]:totable(), { { 13, 14 }, { 23, 24 }, { 33, 34 } })
  H.eq(x[{ { 1, -1, 2 }, { 1, 4, 3 } }]:totable(), { { 11, 14 }, { 31, 34 } }, "steps")
  H.eq(x[{ {}, { 1, -1, 2 } }]:totable(), { { 11, 13 }, { 21, 23 }, { 31, 33 } })
  H.eq(x[{}]:totable(), x:totable())
  H.eq(x[{ 2 }]:totable(), { 21, 22, 23, 24 })
  H.eq(x[{ { 2, 1 } }]:size(), { 0, 4 }, "{a, a-1} is empty")
  local y = tide.arange(24):view(2, 3, 4)
  H.eq(y[{ 2, {}, -1 }]:totable(), { 15, 19, 23 })
  H.eq(y[{ {}, 2, { 2, 3 } }]:totable(), { { 5, 6 }, { 17, 18 } })
  H.eq(y[{ -1, -1, -1 }]:item(), 23)
end)

H.test("assignment writes into the view", function()
  local x = grid()
  x[1] = 0
  H.eq(x[1]:totable(), { 0, 0, 0, 0 })
  x[{ 2, 3 }] = 99
  H.eq(x[2]:totable(), { 21, 22, 99, 24 })
  x[{ {}, 1 }] = tide.tensor({ 7, 8, 9 })
  H.eq(x[{ {}, 1 }]:totable(), { 7, 8, 9 })
  x[{ { 2, 3 }, { 3, 4 } }] = tide.tensor({ 5, 6 }) -- broadcast over rows
  H.eq(x:totable(), { { 7, 0, 0, 0 }, { 8, 22, 5, 6 }, { 9, 32, 5, 6 } })
  x[-1] = -1
  H.eq(x[3]:totable(), { -1, -1, -1, -1 })
  local f = tide.zeros(2, 2)
  f[{ 1, 2 }] = 2.5
  f[2] = true
  H.values(f, { { 0, 2.5 }, { 1, 1 } })
  local i = tide.zeros(3, { dtype = "int32" })
  i[2] = 2.9
  H.eq(i:totable(), { 0, 2, 0 }, "a float written into an int tensor truncates")
  local t = tide.zeros(2, 3):t()
  t[1] = 4
  H.eq(t:totable(), { { 4, 4 }, { 0, 0 }, { 0, 0 } })
end)

H.test("bool masks assign where true", function()
  local x = tide.tensor({ { 1, -2 }, { -3, 4 } })
  x[x:lt(0)] = 0
  H.eq(x:totable(), { { 1, 0 }, { 0, 4 } })
  local y = tide.tensor({ 1.0, 2.0, 3.0 })
  y[tide.tensor({ true, false, true })] = tide.tensor({ 10.0, 20.0, 30.0 })
  H.eq(y:totable(), { 10.0, 2.0, 30.0 })
  local z = tide.zeros(2, 3)
  z[tide.tensor({ { true }, { false } })] = 1
  H.values(z, { { 1, 1, 1 }, { 0, 0, 0 } }, 0, "the mask broadcasts")
end)

H.test("an integer tensor key picks rows (1-based)", function()
  local x = grid()
  local r = x[tide.tensor({ 3, 1, 3 })]
  H.eq(r:totable(), { { 31, 32, 33, 34 }, { 11, 12, 13, 14 }, { 31, 32, 33, 34 } })
  H.eq(x[tide.tensor({ { 1, 2 } })]:size(), { 1, 2, 4 })
end)

H.test("gather and index_select take 1-based indices", function()
  local x = grid()
  local g = x:gather(2, tide.tensor({ { 1, 4 }, { 2, 2 }, { 4, 1 } }))
  H.eq(g:totable(), { { 11, 14 }, { 22, 22 }, { 34, 31 } })
  H.eq(tide.gather(x, 1, tide.tensor({ { 3, 1, 2, 3 } })):totable(), { { 31, 12, 23, 34 } })
  H.eq(x:index_select(2, tide.tensor({ 4, 1 })):totable(), { { 14, 11 }, { 24, 21 }, { 34, 31 } })
  H.eq(tide.index_select(x, 1, tide.tensor({ 2 }, { dtype = "int32" })):totable(),
    { { 21, 22, 23, 24 } })
end)

H.test("scatter_add, embedding, one_hot, masked_fill", function()
  local z = tide.zeros(2, 3)
  local s = z:scatter_add(2, tide.tensor({ { 1, 1, 3 }, { 2, 3, 3 } }), tide.ones(2, 3))
  H.values(s, { { 2, 0, 1 }, { 0, 1, 2 } })
  H.values(z, { { 0, 0, 0 }, { 0, 0, 0 } }, 0, "scatter_add is functional")
  z:scatter_add_(1, tide.tensor({ { 2, 2, 1 } }), tide.ones(1, 3))
  H.values(z, { { 0, 0, 1 }, { 1, 1, 0 } })
  local w = tide.tensor({ { 1.0, 2.0 }, { 3.0, 4.0 }, { 5.0, 6.0 } })
  H.values(tide.embedding(tide.tensor({ 3, 1 }), w), { { 5, 6 }, { 1, 2 } })
  H.eq(tide.one_hot(tide.tensor({ 1, 3 }), 3):totable(), { { 1, 0, 0 }, { 0, 0, 1 } })
  H.eq(tide.one_hot(tide.tensor({ 2 })):totable(), { { 0, 1 } })
  local x = tide.tensor({ 1.0, 2.0, 3.0 })
  H.values(x:masked_fill(tide.tensor({ false, true, false }), -1), { 1, -1, 3 })
  x:masked_fill_(x:gt(1.5), 0)
  H.values(x, { 1, 0, 0 })
end)

H.done()
