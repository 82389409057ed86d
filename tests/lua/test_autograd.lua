-- test_autograd.lua — autograd from Lua: requires_grad (option, attribute, method), backward
-- with and without a gradient and retain_graph, x.grad (nil when none, assignable to nil),
-- grad_fn, detach, no_grad / set_grad_enabled restoring the mode even when the function errors.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local H = require "harness"
local tide = require "tide"

H.test("requires_grad as an option, an attribute and a method", function()
  local x = tide.tensor({ 1.0, 2.0, 3.0 }, { requires_grad = true })
  H.eq(x.requires_grad, true)
  H.eq(x.is_leaf, true)
  H.eq(x.grad_fn, nil)
  local y = tide.ones(3)
  H.eq(y.requires_grad, false)
  H.eq(y:requires_grad_() == y, true, "returns self")
  H.eq(y.requires_grad, true)
  y:requires_grad_(false)
  H.eq(y.requires_grad, false)
  y.requires_grad = true
  H.eq(y.requires_grad, true)
  H.eq(tide.zeros(2, { requires_grad = true }).requires_grad, true)
  H.raises(function() return tide.tensor({ 1, 2 }, { requires_grad = true }) end, "requires_grad")
end)

H.test("backward fills x.grad", function()
  local x = tide.tensor({ 1.0, 2.0, 3.0 }, { requires_grad = true })
  H.eq(x.grad, nil, "no grad before backward")
  local loss = (x * x):sum()
  H.ok(loss.grad_fn ~= nil, "a result inside the graph has a grad_fn")
  H.eq(loss.is_leaf, false)
  loss:backward()
  H.values(x.grad, { 2, 4, 6 })
  -- gradients accumulate
  local loss2 = (x * 3):sum()
  loss2:backward()
  H.values(x.grad, { 5, 7, 9 })
  x.grad = nil
  H.eq(x.grad, nil)
end)

H.test("remainder and floor_divide gradients (PyTorch's)", function()
  local x = tide.tensor({ -3.5, 2.25, 7.0 }, { requires_grad = true })
  local y = tide.tensor({ 2.0, -1.0, 3.0 }, { requires_grad = true })
  ;(x % y):sum():backward()
  H.values(x.grad, { 1, 1, 1 }, 0, "d(x % y)/dx = 1")
  -- d(x % y)/dy = -(x // y): -(-2), -(-3), -(2)
  H.values(y.grad, { 2, 3, -2 }, 0, "d(x % y)/dy = -(x // y)")
  x.grad, y.grad = nil, nil
  ;(x // y * 5 + x):sum():backward()
  H.values(x.grad, { 1, 1, 1 }, 0, "floor_divide passes no gradient to x")
  H.values(y.grad, { 0, 0, 0 }, 0, "nor to y")
end)

H.test("backward with a gradient and retain_graph", function()
  local x = tide.tensor({ 1.0, 2.0 }, { requires_grad = true })
  local y = x * x
  y:backward(tide.tensor({ 1.0, 0.5 }), { retain_graph = true })
  H.values(x.grad, { 2, 2 })
  y:backward(tide.tensor({ 1.0, 1.0 }))
  H.values(x.grad, { 4, 6 })
  local z = (x * 2):sum()
  z:backward(nil, { retain_graph = true })
  H.values(x.grad, { 6, 8 })
end)

H.test("detach and x.data leave the graph", function()
  local x = tide.tensor({ 1.0, 2.0 }, { requires_grad = true })
  local d = x:detach()
  H.eq(d.requires_grad, false)
  H.eq(d:shares_storage(x), true)
  H.eq(x.data.requires_grad, false)
  local y = (x * 2):detach()
  H.eq(y.grad_fn, nil)
end)

H.test("no_grad runs without recording and restores the mode", function()
  local x = tide.tensor({ 1.0, 2.0 }, { requires_grad = true })
  H.eq(tide.is_grad_enabled(), true)
  local y, extra = tide.no_grad(function(a)
    H.eq(tide.is_grad_enabled(), false)
    return x * a, "second"
  end, 2)
  H.eq(extra, "second", "results pass through")
  H.eq(y.requires_grad, false)
  H.eq(tide.is_grad_enabled(), true)
  local ok, err = pcall(tide.no_grad, function() error("boom") end)
  H.eq(ok, false)
  H.ok(tostring(err):find("boom"), "the error passes through")
  H.eq(tide.is_grad_enabled(), true, "restored after an error")
  local prev = tide.set_grad_enabled(false)
  H.eq(prev, true)
  H.eq(tide.is_grad_enabled(), false)
  H.eq((x * 2).requires_grad, false)
  tide.enable_grad(function() H.eq(tide.is_grad_enabled(), true) end)
  H.eq(tide.is_grad_enabled(), false)
  tide.set_grad_enabled(true)
end)

H.test("a small regression fitted with autograd", function()
  local xs = tide.linspace(-1, 1, 32):unsqueeze(2)
  local ys = xs * 3 + 0.5
  local w = tide.zeros(1, 1, { requires_grad = true })
  local b = tide.zeros(1, { requires_grad = true })
  for _ = 1, 300 do
    local pred = xs:matmul(w) + b
    local loss = ((pred - ys) ^ 2):mean()
    w.grad = nil
    b.grad = nil
    loss:backward()
    tide.no_grad(function()
      w:sub_(w.grad * 0.5)
      b:sub_(b.grad * 0.5)
    end)
  end
  H.near(w:item(), 3, 1e-3)
  H.near(b:item(), 0.5, 1e-3)
end)

H.test("in-place rules and backward errors", function()
  local w = tide.tensor({ 1.0, 2.0 }, { requires_grad = true })
  H.raises(function() w:add_(1) end, "leaf", "in-place")
  H.raises(function() w:fill_(0) end, "leaf")
  H.values(w, { 1, 2 }, 0, "a refused in-place op leaves the data")
  tide.no_grad(function() w:mul_(2) end)
  H.values(w, { 2, 4 })
  local y = w * w
  local v = y:view(2, 1)
  H.raises(function() y:add_(1) end, "part of the autograd graph", "view its memory")
  v = nil
  collectgarbage()
  y:mul_(3) -- nothing else views y's memory: the in-place op joins the graph
  H.raises(function() y:backward() end, "one element", "[2]")
  local s = y:sum()
  s:backward()
  H.values(w.grad, { 12, 24 })
  H.raises(function() s:backward() end, "second time", "retain_graph")
  -- a tensor saved for backward, changed in place afterwards
  local c = tide.tensor({ 3.0, 4.0 })
  local p = (w * c):sum()
  c:fill_(0)
  H.raises(function() p:backward() end, "modified by an in-place operation")
  H.raises(function() tide.ones(2):sum():backward() end, "does not require grad")
end)

H.test("gradients through nn ops, views and broadcasting", function()
  local x = tide.tensor({ { 1.0, -2.0, 3.0 }, { 0.5, 0.0, -1.0 } }, { requires_grad = true })
  local b = tide.tensor({ 1.0, 2.0, 3.0 }, { requires_grad = true })
  local loss = ((x + b):relu() * x:t():t()):sum()
  loss:backward()
  -- d/dx of relu(x+b)*x = [x+b>0]*(x + (x+b)); d/db = [x+b>0]*x summed over rows
  H.values(x.grad, { { 3, 0, 9 }, { 2, 2, 1 } })
  H.values(b.grad, { 1.5, 0, 2 })
end)

H.test("grad_fn and autograd errors name the op that was called", function()
  local x = tide.tensor({ { 1.0, -2.0, 3.0 }, { 0.5, 4.0, -1.0 } }, { requires_grad = true })
  local w = tide.ones(4, 3)
  local target = tide.tensor({ 1, 3 }, { dtype = "int64" })
  -- sum drops its dims with a view, mean is sum / count, softmax ends in a div: each result is
  -- still named after what was called
  H.eq((x * x):sum().grad_fn, "sum")
  H.eq(x:sum(2).grad_fn, "sum")
  H.eq(x:mean().grad_fn, "mean")
  H.eq(x:max().grad_fn, "max")
  H.eq(tide.softmax(x, 2).grad_fn, "softmax")
  H.eq(tide.log_softmax(x, 2).grad_fn, "log_softmax")
  H.eq(tide.nn.functional.linear(x, w).grad_fn, "linear")
  H.eq(tide.nn.functional.cross_entropy(x, target).grad_fn, "cross_entropy")
  H.eq(x:view(6).grad_fn, "view")
  H.eq(x:unsqueeze(1).grad_fn, "unsqueeze")
  H.eq(x:t().grad_fn, "transpose")
  -- ops the binding builds from several C calls
  H.eq(x:clamp(0, 1).grad_fn, "clamp")
  H.eq(x[1]:dot(x[2]).grad_fn, "dot")
  local y = x * 1
  y:mul_(3)
  H.eq(y.grad_fn, "mul", "an in-place op, not the copy writing it back (PyTorch: MulBackward0)")
  H.eq(x:sum():exp().grad_fn, "exp", "a primitive after a composite keeps its own name")
  H.ok(tostring(x:sum()):find("grad_fn=<sum>", 1, true), "printed as grad_fn=<sum>")
  local s = (x * x):sum()
  s:backward()
  local ok, err = pcall(function() s:backward() end)
  H.eq(ok, false)
  H.ok(err:find("second time", 1, true) and err:find("'sum'", 1, true), err)
  H.ok(not err:find("reshape", 1, true), "the user never called reshape: " .. err)
end)

H.test("backward on the Vulkan device matches the CPU", function()
  if not (tide.vulkan and tide.vulkan.available()) then
    print("test_autograd: no Vulkan device, skipped")
    return
  end
  local function run(device)
    local x = tide.tensor({ { 1.0, -2.0, 3.0 }, { 0.5, 0.25, -1.0 } }, { device = device, requires_grad = true })
    local w = tide.tensor({ { 1.0, 2.0 }, { 3.0, 4.0 }, { 5.0, 6.0 } }, { device = device, requires_grad = true })
    local idx = tide.tensor({ { 1, 3 }, { 2, 2 } }, { dtype = "int64", device = device })
    local y = x:matmul(w):relu():sum() + x:max() + x:exp():mean() + x:gather(2, idx):sum()
    y:backward()
    return x.grad:to("cpu"), w.grad:to("cpu")
  end
  local gx, gw = run("cpu")
  local vx, vw = run("vulkan")
  H.values(vx, gx:totable(), 1e-5)
  H.values(vw, gw:totable(), 1e-5)
end)

-- Slices of one tensor along one dim: their gradients are joined by one cat (zeros in the gaps),
-- or copied into zeros past six parts, or added where they overlap (autograd/view_grad.c).
-- Exact in float64: each element receives its contributions in the padded sums' order.
local function slices_grad(spans, extra)
  local base = tide.arange(1, 37, { dtype = "float64" }):reshape(4, 9):requires_grad_()
  local x = base * 2 -- a node, so its slices' gradients meet in the engine
  local loss = extra and x:sum() * 0.5 or nil
  for i, s in ipairs(spans) do
    local part = (s[3] == "select") and x:select(2, s[1]) or x:narrow(2, s[1], s[2])
    local term = (part * (i + 1)):sum()
    loss = loss and loss + term or term
  end
  loss:backward()
  return base.grad
end

local function slices_want(spans, extra)
  local col = {}
  for j = 1, 9 do col[j] = extra and 0.5 or 0 end
  for i, s in ipairs(spans) do
    local len = (s[3] == "select") and 1 or s[2]
    for j = s[1], s[1] + len - 1 do col[j] = col[j] + (i + 1) end
  end
  local want = {}
  for r = 1, 4 do
    want[r] = {}
    for j = 1, 9 do want[r][j] = 2 * col[j] end
  end
  return want
end

H.test("slices' gradients: joined, with gaps, overlapping, many, and beside another use", function()
  local cases = {
    { { 1, 3 }, { 4, 3 }, { 7, 3 } },              -- q, k, v of one projection
    { { 7, 3 }, { 1, 3 } },                        -- out of order, a gap between
    { { 2, 2 }, { 6, 1 } },                        -- gaps at both ends and between
    { { 1, 4 }, { 3, 4 } },                        -- overlapping: added
    { { 1, 0, "select" }, { 2, 0, "select" }, { 3, 0, "select" }, { 4, 0, "select" },
      { 5, 0, "select" }, { 6, 0, "select" }, { 7, 0, "select" }, { 9, 0, "select" } },
  }
  for k, spans in ipairs(cases) do
    for _, extra in ipairs({ false, true }) do
      local g = slices_grad(spans, extra)
      H.eq(g:totable(), slices_want(spans, extra), ("case %d%s"):format(k, extra and
        " beside x:sum()" or ""))
    end
  end
  -- traced: one plan, no break, eager's bits
  for k, spans in ipairs(cases) do
    local f = tide.jit(function() return slices_grad(spans, false) end)
    local eager = slices_grad(spans, false):totable()
    for _ = 1, 2 do H.eq(f():totable(), eager, ("case %d traced"):format(k)) end
    H.eq(f:stats().compiles, 1, ("case %d: one plan, no break"):format(k))
  end
end)

H.done()
