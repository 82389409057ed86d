-- test_distributed.lua — tide.distributed from Lua: the collectives' values (every rank's
-- operand is known, so each result is computed here by hand), the options and their errors,
-- non-blocking works, a collective inside tide.jit (recorded, not a graph break, and equal to
-- eager on every call), and Vulkan tensors staged through the host. ctest runs it alone (a
-- world of one); tests/test_distributed.sh runs it under mpirun -np 2.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local H = require "harness"
local tide = H.tide
local dist = tide.distributed

if not dist.is_available() then
  H.test("built without MPI: init says so", function()
    H.raises(function() dist.init() end, "without MPI")
  end)
  H.done()
  return
end

H.test("before init", function()
  H.eq(dist.is_initialized(), false)
  H.raises(function() dist.rank() end, "init")
  H.raises(function() dist.all_reduce(tide.ones(2)) end, "init")
end)

local rank, world = dist.init{ timeout = 120 }
-- rank r's operand: r + i for i = 1..n
local function mine(n, dtype) return (tide.arange(1, n + 1) + rank):to(dtype or tide.float32) end
local ranks_sum = world * (world - 1) / 2

H.test("init, rank, world_size", function()
  H.eq(dist.is_initialized(), true)
  H.eq(dist.rank(), rank)
  H.eq(dist.get_world_size(), world)
  H.ok(rank >= 0 and rank < world, "rank in range")
  H.raises(function() dist.init{ timeout = -1 } end, "positive")
  H.raises(function() dist.init("x") end, "table")
end)

H.test("all_reduce: sum, mean, max, min in place", function()
  local t = mine(4)
  H.ok(rawequal(dist.all_reduce(t), t), "returns t")
  H.values(t, { 1 * world + ranks_sum, 2 * world + ranks_sum, 3 * world + ranks_sum,
                4 * world + ranks_sum })
  local m = mine(3, tide.float64)
  dist.all_reduce(m, "mean")
  H.values(m, { 1 + ranks_sum / world, 2 + ranks_sum / world, 3 + ranks_sum / world })
  local mx, mn = mine(2, tide.int64), mine(2, tide.int64)
  dist.all_reduce(mx, dist.ReduceOp.MAX)
  dist.all_reduce(mn, "min")
  H.values(mx, { world, world + 1 })
  H.values(mn, { 1, 2 })
  local h = mine(3, tide.float16)
  dist.all_reduce(h, "sum")
  H.eq(h.dtype, tide.float16)
  H.values(h, { world + ranks_sum, 2 * world + ranks_sum, 3 * world + ranks_sum })
end)

H.test("broadcast, all_gather, reduce_scatter", function()
  local b = mine(3)
  dist.broadcast(b, world - 1)
  H.values(b, { world, world + 1, world + 2 })
  local parts = dist.all_gather(tide.tensor({ rank, 10 * rank }))
  H.eq(#parts, world)
  for r = 1, world do H.values(parts[r], { r - 1, 10 * (r - 1) }) end
  local whole = dist.all_gather_into_tensor(tide.full({ 2, 2 }, rank))
  H.eq(whole:size(), { 2 * world, 2 })
  local s = dist.reduce_scatter(tide.ones(2 * world, 3) * (rank + 1))
  H.eq(s:size(), { 2, 3 })
  H.values(s, tide.full({ 2, 3 }, world + ranks_sum):totable())
end)

H.test("non-blocking works, waited out of order", function()
  local a, b = mine(5), mine(2, tide.int32)
  local wa = dist.all_reduce(a, "max", { async_op = true })
  local wb = dist.all_gather_into_tensor(b, { async_op = true })
  local gb = wb:wait()
  H.ok(rawequal(wa:wait(), a) == false, "wait gives a new box of the same tensor")
  H.values(a, { world, world + 1, world + 2, world + 3, world + 4 })
  H.eq(gb:size(), { 2 * world })
  H.eq(wa:is_completed(), true)
end)

H.test("errors name the op and the problem", function()
  H.raises(function() dist.all_reduce(tide.ones(2), "avg") end, "op must be one of")
  H.raises(function() dist.all_reduce(tide.ones(2, { dtype = tide.int64 }), "mean") end,
    "mean needs")
  H.raises(function() dist.broadcast(tide.ones(2), world) end, "not a rank")
  H.raises(function() dist.broadcast(tide.ones(2), 0.5) end, "src must be")
  H.raises(function() dist.all_reduce(tide.ones(2), { asnyc_op = true }) end, "unknown option")
  H.raises(function() dist.reduce_scatter(tide.tensor(1)) end, "equal blocks")
  if world > 1 then
    H.raises(function() dist.reduce_scatter(tide.ones(2 * world + 1)) end, "equal blocks")
  end
  local p = tide.ones(2):requires_grad_()
  H.raises(function() dist.all_reduce(p) end, "requires grad")
  if world > 1 then
    H.raises(function() dist.all_reduce(tide.ones(2 + rank)) end, "disagree")
    local t = tide.ones(1)
    dist.all_reduce(t) -- the group still works after a refused collective
    H.values(t, { world })
  end
end)

H.test("under tide.jit: recorded in the graph, no break, equal to eager each call", function()
  local f = tide.jit(function(x)
    local y = x * 2
    dist.all_reduce(y)
    return y + 1
  end)
  for call = 1, 3 do
    local x = mine(6) * call
    local want = x * 2
    dist.all_reduce(want)
    want = want + 1
    H.values(f(x), want:totable(), 0, "call " .. call)
  end
  local s = f:stats()
  H.eq(s.breaks, 0, "no graph break")
  H.eq(s.compiles, 1, "compiled once")
  local g = tide.jit(function(x)
    local w = dist.all_reduce(x * 1, "sum", { async_op = true })
    return w:wait() + dist.all_gather_into_tensor(x):sum()
  end)
  for _ = 1, 2 do
    local x = mine(3)
    local want = x * 1
    dist.all_reduce(want)
    want = want + dist.all_gather_into_tensor(x):sum()
    H.values(g(x), want:totable())
  end
  H.eq(g:stats().breaks, 0, "async form under the jit: no break")
end)

H.test("under tide.jit: a tensor reduced twice, gathers at new sizes", function()
  local twice = tide.jit(function(x)
    local y = x + 0
    dist.all_reduce(y)
    dist.all_reduce(y) -- a second write: never merged with the first
    return y
  end)
  H.values(twice(tide.ones(3)), { world * world, world * world, world * world })
  local gather = tide.jit(function(x) return dist.all_gather_into_tensor(x * 1) end)
  for _, n in ipairs({ 2, 5, 3 }) do -- a new size each call: re-planned or recompiled, never wrong
    local x = mine(n)
    local want = dist.all_gather_into_tensor(x)
    H.values(gather(x), want:totable(), 0, "size " .. n)
  end
  local scatter = tide.jit(function(x) return dist.reduce_scatter(x, "max") end)
  for _, n in ipairs({ 2, 4 }) do
    local x = mine(n * world)
    H.values(scatter(x), dist.reduce_scatter(x, "max"):totable(), 0, "reduce_scatter " .. n)
  end
end)

local vk_ok = tide.vulkan.available()
H.test("Vulkan tensors are staged through the host", function()
  if not vk_ok then return end
  local t = mine(5):to("vulkan")
  dist.all_reduce(t, "sum")
  H.eq(t.device, "vulkan")
  H.values(t:to("cpu"), { world + ranks_sum, 2 * world + ranks_sum, 3 * world + ranks_sum,
                          4 * world + ranks_sum, 5 * world + ranks_sum })
  local g = dist.all_gather_into_tensor(tide.ones(2, { device = "vulkan" }) * rank)
  H.eq(g.device, "vulkan")
  H.eq(g:size(), { 2 * world })
end)

dist.barrier()
H.done()
