-- test_backward_hooks.lua — tide.autograd.set_backward_hooks: on_ready(i) once params[i].grad
-- is final (after every contribution, once, nearest the loss first), on_done() after the
-- pass, errors raised in a hook becoming backward's, removal, argument errors, hooks inside
-- coroutines, and hooks firing during a backward traced by tide.jit.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local H = require "harness"
local tide = require "tide"
local autograd = tide.autograd

-- Hooks that log: ready = {i...} in firing order, grads[i] = params[i].grad's values then.
local function logging(params)
  local log = { ready = {}, grads = {}, done = 0, ready_at_done = nil }
  autograd.set_backward_hooks(params, function(i)
    log.ready[#log.ready + 1] = i
    log.grads[i] = params[i].grad:totable()
  end, function()
    log.done = log.done + 1
    log.ready_at_done = #log.ready
  end)
  return log
end

H.test("a leaf used twice fires once, after both, with its final grad", function()
  local x = tide.tensor({ 0.5, -1, 2 }, { dtype = "float64", requires_grad = true })
  local w = tide.tensor({ 1, 2, -0.5 }, { dtype = "float64", requires_grad = true })
  local log = logging({ x, w })
  -- x feeds the add next to the loss and, through tanh, the mul far from it
  local loss = ((x * w):tanh() + x):sum()
  loss:backward()
  autograd.set_backward_hooks(nil)
  H.eq(#log.ready, 2, "each param once")
  H.eq(log.done, 1, "done once")
  H.eq(log.ready_at_done, 2, "done after every on_ready")
  H.eq(log.grads[1], x.grad:totable(), "x's grad at its hook is its final grad")
  H.eq(log.grads[2], w.grad:totable(), "w's grad at its hook is its final grad")
  local t = (x * w):tanh()
  H.values(x.grad, (1 + (1 - t * t) * w):totable(), 1e-12, "and that is the whole gradient")
end)

H.test("a chain: the parameter nearest the loss is ready first; others are ignored", function()
  local ws = {}
  for i = 1, 3 do
    ws[i] = tide.randn(4, { requires_grad = true })
  end
  local other = tide.randn(4, { requires_grad = true })
  local log = logging(ws)
  local y = tide.ones(4) * other
  for i = 1, 3 do
    y = y * ws[i]
  end
  y:sum():backward()
  autograd.set_backward_hooks(nil)
  H.eq(log.ready, { 3, 2, 1 }, "nearest the loss first; a tensor not in the list is ignored")
  H.ok(other.grad ~= nil, "the unlisted tensor still got its grad")
end)

H.test("an nn model: every parameter once, then done; removal stops the hooks", function()
  local nn = tide.nn
  local m = nn.Sequential(nn.Linear(3, 5), nn.ReLU(), nn.Linear(5, 2))
  local params = m:parameters()
  local log = logging(params)
  local loss = m(tide.randn(4, 3)):pow(2):mean()
  loss:backward()
  H.eq(#log.ready, #params, "each parameter once")
  local seen = {}
  for _, i in ipairs(log.ready) do
    H.ok(not seen[i], "parameter " .. i .. " fired twice")
    seen[i] = true
    H.eq(log.grads[i], params[i].grad:totable(), "parameter " .. i .. " grad final at its hook")
  end
  H.eq(log.ready[1] > 2 and log.ready[#log.ready] <= 2, true, "last layer before the first")
  H.eq(log.done, 1)
  autograd.set_backward_hooks(nil)
  m(tide.randn(4, 3)):sum():backward()
  H.eq(#log.ready, #params, "no on_ready after removal")
  H.eq(log.done, 1, "no on_done after removal")
  autograd.set_backward_hooks(nil) -- removing twice is fine
end)

H.test("only on_done, or only on_ready", function()
  local x = tide.randn(3, { requires_grad = true })
  local done, ready = 0, 0
  autograd.set_backward_hooks({ x }, nil, function() done = done + 1 end)
  local loss = (x * 2):sum()
  loss:backward()
  H.eq(done, 1)
  autograd.set_backward_hooks({ x }, function() ready = ready + 1 end)
  loss = (x * 2):sum()
  loss:backward()
  H.eq({ ready, done }, { 1, 1 }, "the replaced on_done is gone")
  autograd.set_backward_hooks(nil)
  -- tide.autograd.grad touches no .grad: no hooks
  autograd.set_backward_hooks({ x }, function() ready = ready + 1 end,
    function() done = done + 1 end)
  autograd.grad((x * x):sum(), x)
  autograd.set_backward_hooks(nil)
  H.eq({ ready, done }, { 1, 1 }, "autograd.grad calls no hook")
end)

H.test("an error in a hook is backward's error", function()
  local x = tide.randn(3, { requires_grad = true })
  autograd.set_backward_hooks({ x }, function() error("bucket 7 is on fire") end)
  local err = H.raises(function() (x * 3):sum():backward() end, "on_ready", "bucket 7 is on fire")
  H.ok(err:find("test_backward_hooks.lua", 1, true), "the message names the hook's line: " .. err)
  autograd.set_backward_hooks({ x }, nil, function() error({}) end)
  H.raises(function() (x * 3):sum():backward() end, "on_done", "not a string")
  autograd.set_backward_hooks(nil)
  x.grad = nil
  local y = (x * 3):sum()
  y:backward()
  H.values(x.grad, { 3, 3, 3 }, 0, "backward works again after the failures")
end)

H.test("a hook may replace or remove the hooks while backward runs", function()
  local a = tide.randn(3, { requires_grad = true })
  local b = tide.randn(3, { requires_grad = true })
  local calls = {}
  autograd.set_backward_hooks({ a, b }, function(i)
    calls[#calls + 1] = i
    autograd.set_backward_hooks(nil)
    collectgarbage()
  end, function() calls[#calls + 1] = "done" end)
  local loss = ((a * 2):exp() * b):sum()
  loss:backward()
  H.eq(calls, { 2 }, "removed by the first on_ready: nothing after it")
end)

H.test("hooks run in the coroutine that calls backward", function()
  local x = tide.randn(3, { requires_grad = true })
  local where = {}
  autograd.set_backward_hooks({ x }, function() where[#where + 1] = coroutine.running() end)
  local co = coroutine.create(function()
    (x * x):sum():backward()
    return coroutine.running()
  end)
  local ok, co_self = coroutine.resume(co)
  autograd.set_backward_hooks(nil)
  H.ok(ok, tostring(co_self))
  H.eq(where[1], co_self, "on_ready ran inside the coroutine")
end)

H.test("argument errors", function()
  local x = tide.randn(3, { requires_grad = true })
  local f = function() end
  H.raises(function() autograd.set_backward_hooks(x, f) end, "list of tensors")
  H.raises(function() autograd.set_backward_hooks({ x, 3 }, f) end, "params[2] must be a tensor")
  H.raises(function() autograd.set_backward_hooks({ x, x }, f) end, "params[2] is params[1]")
  H.raises(function() autograd.set_backward_hooks({ x }, 5) end, "on_ready must be a function")
  H.raises(function() autograd.set_backward_hooks({ x }, nil, "f") end, "on_done must be")
  H.raises(function() autograd.set_backward_hooks({ x }) end, "on_ready and/or on_done")
  -- a failed call leaves no hooks behind
  local n = 0
  autograd.set_backward_hooks({ x }, function() n = n + 1 end)
  pcall(autograd.set_backward_hooks, { x, "no" }, f)
  local loss = (x * 2):sum()
  loss:backward()
  H.eq(n, 1, "the earlier hooks stay after a failed call")
  autograd.set_backward_hooks(nil)
end)

H.test("hooks fire during a backward traced by tide.jit", function()
  local nn = tide.nn
  tide.manual_seed(3)
  local m = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 1))
  local params = m:parameters()
  local ready, done = {}, 0
  autograd.set_backward_hooks(params, function(i) ready[#ready + 1] = i end,
    function() done = done + 1 end)
  local step = tide.jit(function(model, x)
    model:zero_grad()
    local loss = model(x):pow(2):mean()
    loss:backward()
    return loss
  end)
  local x = tide.randn(3, 4)
  local stats = tide.jit_stats()
  step(m, x)
  H.ok(tide.jit_stats().compiles > stats.compiles, "the first call was traced and compiled")
  H.eq(#ready, #params, "every parameter once in the traced call")
  H.eq(done, 1, "done once in the traced call")
  local g1 = {}
  for i, p in ipairs(params) do
    g1[i] = p.grad:totable()
  end
  step(m, x)
  H.eq(#ready % #params, 0, "whole passes only")
  H.eq(done, #ready // #params, "one done per pass")
  for i, p in ipairs(params) do
    H.values(p.grad, g1[i], 1e-6, "parameter " .. i .. " grad the same on the second call")
  end
  autograd.set_backward_hooks(nil)
end)

H.test("no tensor is kept alive once the hooks are removed", function()
  local x = tide.randn(1000, { requires_grad = true })
  autograd.set_backward_hooks({ x }, function() end)
  autograd.set_backward_hooks(nil)
  local before = tide.collect().in_use
  x = nil
  local after = tide.collect().in_use
  H.ok(after < before, ("x freed: %d -> %d bytes in use"):format(before, after))
end)

H.done()
