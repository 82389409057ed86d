-- test_jit.lua — tide.jit from Lua: eager and jit give the same values (bitwise, since fused
-- groups call eager's own kernels in the same order, and products the same BLAS calls) over a set of functions,
-- whole training steps with SGD and Adam, numbers as runtime arguments (no recompiles), graph
-- breaks (:item(), tostring, :totable()) with Lua control flow on tensor values, the fallback
-- after too many signatures, errors inside a jit function, and f:stats().
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local H = require "harness"
local tide = require "tide"

local function same(a, b, tol, what)
  H.eq(a:size(), b:size(), what .. " shape")
  H.eq(a.dtype, b.dtype, what .. " dtype")
  local x, y = a:totable(), b:totable()
  local fx, fy = H.flatten(x), H.flatten(y)
  local worst = 0
  for i = 1, #fx do
    local u, v = fx[i], fy[i]
    if type(u) == "boolean" then u, v = u and 1 or 0, v and 1 or 0 end
    if not (u ~= u and v ~= v) then
      local e = math.abs(u - v) / (1 + math.abs(v))
      if not (e <= worst) then worst = e ~= e and math.huge or e end
    end
  end
  H.ok(worst <= tol, ("%s: max rel diff %g > %g"):format(what, worst, tol))
end

tide.manual_seed(3)
local cases = {
  { "chain", 0, function(x, a, b) return (x * a + b):tanh() * x:sigmoid() + 0.5 end,
    function() return tide.randn(1000), 1.5, 0.25 end },
  { "softmax", 0, function(x) return x:softmax(-1) end, function() return tide.randn(7, 300) end },
  { "log_softmax dim 1", 0, function(x) return x:log_softmax(1) end,
    function() return tide.randn(40, 9) end },
  { "broadcast bias relu", 0, function(x, b) return (x + b):relu() * 2 end,
    function() return tide.randn(33, 17), tide.randn(17) end },
  { "strided", 0, function(x) return x:t():exp():sum(1) end, function() return tide.randn(9, 13) end },
  { "reductions", 0, function(x) return x:sum(1, true) + x:max(3, true) - x:mean() end,
    function() return tide.randn(4, 5, 6) end },
  { "compare where", 0, function(x, y) return tide.where(x:gt(y), x, y * 3) end,
    function() return tide.randn(50), tide.randn(50) end },
  { "int arithmetic", 0, function(x, y) return (x + y) * y - x end,
    function() return tide.randint(-9, 9, { 30 }), tide.randint(-9, 9, { 30 }) end },
  { "float64", 0, function(x) return (x:abs() + 1):log() * x:cos() end,
    function() return tide.randn(64, { dtype = "float64" }) end },
  { "layer_norm gelu", 0, function(x)
    local F = require "tide.nn.functional"
    return F.layer_norm(F.gelu(x), { 16 })
  end,
    function() return tide.randn(8, 16) end },
}

-- reductions over each dim, kept or not
for _, op in ipairs({ "sum", "prod", "max", "min", "mean" }) do
  for dim = 1, 3 do
    for _, keep in ipairs({ true, false }) do
      cases[#cases + 1] = { ("%s dim %d keep %s"):format(op, dim, keep), 1e-6,
        function(x) return (x * 0.5 + 0.25)[op](x * 0.5 + 0.25, dim, keep) * 2 end,
        function() return tide.randn(3, 4, 5) end }
    end
  end
end
local more = {
  { "clone contiguous inside a group", 0, function(x)
      local a = (x:t():contiguous() + 1):clone() * 2
      return a, a:clone():exp()
    end, function() return tide.randn(6, 5) end },
  { "argmax", 0, function(x) return (x:exp() - 1):argmax(2) end, function() return tide.randn(6, 7) end },
  { "views", 0, function(x)
      local a = x:transpose(1, 2):narrow(1, 2, 3)
      local b = x:permute(2, 1)[{ { 1, 3 } }]:reshape(3, -1)
      return a:exp() + b:sin() * x:select(2, 2):expand(4, 4):t()[{ { 2, 4 } }]
    end, function() return tide.randn(4, 4) end },
  { "cat stack flip", 0, function(x, y)
      local c = tide.cat({ x * 2, y + 1 }, 1)
      return tide.stack({ c:flip(1), c }, 1):relu()
    end, function() return tide.randn(3, 4), tide.randn(2, 4) end },
  { "gather index_select scatter_add", 0, function(x, i)
      local g = x:gather(2, i)
      local s = x:index_select(1, tide.tensor({ 3, 1 }, { dtype = "int64" }))
      return (g * 2):sum() + s:abs():sum() + tide.zeros(4, 3):scatter_add(2, i, x[{ {}, { 1, 2 } }] * 3):sum()
    end, function() return tide.randn(4, 3), tide.randint(1, 4, { 4, 2 }) end },
  { "matmul bias relu", 0, function(x, w, b) return (x:matmul(w) + b):relu() end,
    function() return tide.randn(5, 6), tide.randn(6, 7), tide.randn(7) end },
  { "conv pool", 0, function(x, w)
      local F = require "tide.nn.functional"
      return F.max_pool2d(F.conv2d(x, w, nil, { padding = 1 }):relu(), 2)
    end, function() return tide.randn(2, 3, 8, 8), tide.randn(4, 3, 3, 3) end },
  -- products with epilogues (fused on the cpu: blocks of images or of one matrix's rows)
  { "conv bias relu, conv mean (epilogues)", 0, function(x, w, b)
      local F = require "tide.nn.functional"
      local y = F.conv2d(x, w, b, { padding = 1 }):relu()
      return y, F.conv2d(y, w:narrow(2, 1, 1):expand(4, 4, 3, 3), nil, { padding = 1 }):mean({ 3, 4 })
    end, function() return tide.randn(8, 3, 16, 16), tide.randn(4, 3, 3, 3), tide.randn(4) end },
  { "conv 4x4 stride 2 bias relu (the cpu's stride phases)", 0, function(x, w, b)
      local F = require "tide.nn.functional"
      return F.conv2d(x, w, b, { stride = 2, padding = 1 }):relu()
    end, function() return tide.randn(4, 3, 32, 32), tide.randn(8, 3, 4, 4), tide.randn(8) end },
  { "attention scores softmax (batched matmul epilogue)", 0, function(q, k)
      return (q:matmul(k:transpose(3, 4)) * 0.25):softmax(-1)
    end, function() return tide.randn(2, 3, 40, 16), tide.randn(2, 3, 40, 16) end },
  { "batched linear bias relu", 0, function(x, w, b) return (x:matmul(w) + b):relu() end,
    function() return tide.randn(3, 64, 32), tide.randn(32, 48), tide.randn(48) end },
  -- tol 0: bitwise; floats with negative operands and zero divisors, and integers
  { "// and % (floor_divide, remainder), float and int", 0, function(x, y, i)
      return (x // y) * 2 + x % y - 3 % y, (i // 3 + i % -4 + 7 // i) * (i % 0)
    end, function()
      return tide.randn(6, 7) * 4, (tide.randn(7) * 2):round(), tide.randint(-9, 10, { 6, 7 })
    end },
  -- inputs read in place though not laid out as the domain (devices/cpu/cpu_jit.c): a vector
  -- repeated along the domain (a row's or tile's stretch of it, or a tile holding whole copies,
  -- with a last tile cut short), a size-1 dim with any stride; and layouts that must still be
  -- gathered (a strided vector, one broadcast along an inner dim)
  { "repeated vectors and size-1 dims read in place", 0, function(x, g, b, y, c, d, e)
      local F = require "tide.nn.functional"
      local ln = F.layer_norm(x:transpose(1, 2) + 1, { 256 }, g, b)   -- [1, 3, 256] from [3, 1, 256]
      local t1 = (y + c):relu()                                      -- [2, 1024] + [1024]
      local t2 = (y:reshape(8, 256) + b):relu() * 3                  -- tiles of 1024, period 256
      local t3 = (x:reshape(3, 256) + d:narrow(1, 1, 256)) * 2       -- 768: a tile cut short
      local t4 = F.gelu(e + c:reshape(2, 512):narrow(2, 1, 256):reshape(-1):narrow(1, 1, 384))
      local t5 = (y:reshape(2, 4, 256) + g:reshape(1, 1, 256)) - d:narrow(1, 1, 512):reshape(2, 1, 256)
      return ln, t1, t2, t3, t4, t5
    end, function()
      return tide.randn(3, 1, 256), tide.randn(256), tide.randn(256), tide.randn(2, 1024),
        tide.randn(1024), tide.randn(600), tide.randn(5, 384)
    end },
  { "mse bce losses", 0, function(x, y)
      local F = require "tide.nn.functional"
      return F.mse_loss(x, y) + F.binary_cross_entropy_with_logits(x, y:sigmoid())
    end, function() return tide.randn(10, 3), tide.randn(10, 3) end },
}
for _, c in ipairs(more) do cases[#cases + 1] = c end

for _, c in ipairs(cases) do
  H.test("differential: " .. c[1], function()
    local f = tide.jit(c[3])
    local first
    for rep = 1, 3 do
      local args = table.pack(c[4]())
      local want = c[3](table.unpack(args, 1, args.n))
      local got = f(table.unpack(args, 1, args.n))
      same(got, want, c[2], c[1] .. " call " .. rep)
      first = first or f:stats().compiles
    end
    local s = f:stats()
    H.eq(s.compiles, first, "later calls compile nothing")
    H.eq(s.hits >= 2, true, "later calls hit the cache")
  end)
end

-- Temporaries Lua drops must not become results of a segment, however the collector runs:
-- a young collection after the call (generational), a full one (incremental). Lua garbage made
-- inside the call would start collections midway if the collector did not pause for it.
H.test("dead temporaries: one plan under either collector", function()
  local keep = {}
  local function fn(x)
    local t = x * 2
    for _ = 1, 8 do
      t = (t + 1):tanh()
      local junk = {}
      for i = 1, 3000 do junk[i] = { i } end -- Lua garbage between the temporaries
    end
    keep.last = t * 3 -- kept: must have data after the call
    return t:sum()
  end
  local x = tide.randn(64)
  local before = collectgarbage("generational")
  for _, mode in ipairs({ "generational", "incremental" }) do
    collectgarbage(mode)
    local f = tide.jit(fn)
    for i = 1, 40 do
      local got = f(x)
      if i % 10 == 0 then
        same(got, fn(x), 0, mode .. " call " .. i)
        same(keep.last, fn(x) * 0 + keep.last, 0, mode .. " kept temporary")
      end
    end
    local s = f:stats() -- the plan cache is shared: the second mode may find the first's plan
    H.ok(s.compiles <= 1 and s.hits >= 39, mode .. ": one plan for every call")
    H.eq(collectgarbage(mode), mode, mode .. ": the collector's mode is left alone")
  end
  collectgarbage(before)
end)

H.test("numbers are runtime arguments", function()
  local f = tide.jit(function(x, lr) return x - x * lr end)
  local x = tide.randn(100)
  for i = 1, 5 do
    local lr = 0.1 * i
    same(f(x, lr), x - x * lr, 0, "lr " .. lr)
  end
  H.eq(f:stats().compiles, 1)
  H.eq(f:stats().hits, 4)
end)

H.test("in-place updates are written back", function()
  local w = tide.randn(50)
  local w_ref = w:clone()
  local g = tide.randn(50)
  local step = tide.jit(function(w, g, lr) w:sub_(g * lr) end)
  for i = 1, 3 do
    step(w, g, 0.5 / i)
    w_ref:sub_(g * (0.5 / i))
    same(w, w_ref, 0, "step " .. i)
  end
end)

H.test("in-place writes that read their own destination through other layouts", function()
  local f = tide.jit(function(p, q)
    p:copy_(p + p:t() * 2) -- the group reads p transposed: no fused write-back
    q:copy_((q * 3):exp())  -- same elements: written back by the group itself
    return p:sum()
  end)
  local g = tide.jit(function(p, flat) -- flat shares p's storage, made outside the trace
    p:copy_(p * 2 + flat:view(64, 64):t())
  end)
  for i = 1, 2 do
    local p, q = tide.randn(64, 64), tide.randn(3, 5)
    local pe, qe = p:clone(), q:clone()
    pe:copy_(pe + pe:t() * 2)
    qe:copy_((qe * 3):exp())
    f(p, q)
    same(p, pe, 0, "p after f, call " .. i)
    same(q, qe, 0, "q after f, call " .. i)
    local r = tide.randn(64, 64)
    local re = r:clone()
    re:copy_(re * 2 + re:view(-1):view(64, 64):t())
    g(r, r:view(-1))
    same(r, re, 0, "aliased write-back, call " .. i)
  end
end)

H.test("graph breaks: item, tostring, totable, control flow", function()
  local f = tide.jit(function(x)
    local n = 0
    while x:abs():sum():item() > 1 do
      x = x * 0.5
      n = n + 1
    end
    local s = tostring(x:sum())
    local t = (x + 1):totable()
    return x, n, s, t
  end)
  local x = tide.ones(8)
  local y, n, s, t = f(x)
  H.eq(n, 3)
  H.values(y, { 0.125, 0.125, 0.125, 0.125, 0.125, 0.125, 0.125, 0.125 })
  H.ok(s:find("1.", 1, true), "tostring inside jit: " .. s)
  H.eq(t[1], 1.125)
  H.ok(f:stats().breaks >= 6, "breaks counted: " .. f:stats().breaks)
  -- a different value takes a different path, correctly
  local _, n2 = f(tide.ones(8) * 4)
  H.eq(n2, 5)
end)

H.test("fallback after too many signatures", function()
  -- dynamic = false: sizes 1..4 are four signatures (else 2..4 are one, symbolic)
  local f = tide.jit(function(x) return x * 2 end, { max_signatures = 2, dynamic = false })
  for n = 1, 4 do
    local x = tide.randn(n)
    same(f(x), x * 2, 0, "size " .. n)
  end
  H.eq(f:stats().fallbacks, 1)
  H.eq(f:stats().compiles, 2)
  H.raises(function() tide.jit(function() end, { max_signatures = 0 }) end, "max_signatures")
  H.raises(function() tide.jit(function() end, { bogus = 1 }) end, "bogus")
  H.raises(function() tide.jit(42) end, "function")
end)

H.test("an error inside a jit function propagates and leaves no trace running", function()
  local f = tide.jit(function(x) local y = x * 2; error("boom") end)
  H.raises(function() f(tide.ones(3)) end, "boom")
  local g = tide.jit(function(x) return x + 1 end)
  same(g(tide.ones(3)), tide.ones(3) + 1, 0, "after an error")
  local bad = tide.jit(function(x, y) return x + y end)
  H.raises(function() bad(tide.ones(3), tide.ones(4)) end, "broadcast")
end)

H.test("nested jit functions inline into the outer trace", function()
  local inner = tide.jit(function(x) return x:exp() end)
  local outer = tide.jit(function(x) return inner(x) + 1 end)
  local x = tide.randn(10)
  same(outer(x), x:exp() + 1, 0, "nested")
end)

local ok_nn, nn = pcall(require, "tide.nn")
local ok_optim, optim = pcall(require, "tide.optim")

-- One training step of model m with optimizer o on (x, y) under cross-entropy: its loss.
local function cross_entropy_step(x, y)
  local F = require "tide.nn.functional"
  return function(m, o)
    o:zero_grad()
    local loss = F.cross_entropy(m(x), y)
    loss:backward()
    o:step()
    return loss
  end
end
if ok_nn and ok_optim then
  local F = require "tide.nn.functional"
  H.test("nn modules under jit equal eager (train and eval, dropout, batch norm)", function()
    local function make()
      tide.manual_seed(11)
      return nn.Sequential(nn.Conv2d(1, 4, 3, { padding = 1 }), nn.BatchNorm2d(4), nn.ReLU(),
        nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64, 16), nn.LayerNorm(16), nn.Dropout(0.3),
        nn.Linear(16, 5))
    end
    local m1, m2 = make(), make()
    local f = tide.jit(function(m, x) return m(x) end)
    for _, mode in ipairs({ "train", "eval" }) do
      m1[mode](m1)
      m2[mode](m2)
      for i = 1, 2 do
        local x = tide.randn(3, 1, 8, 8)
        tide.manual_seed(100 + i)
        local want = m1(x)
        tide.manual_seed(100 + i)
        local got = f(m2, x)
        same(got, want, 0, mode .. " call " .. i)
      end
    end
    -- running statistics updated in place the same way
    local s1, s2 = m1:state_dict(), m2:state_dict()
    for k, v in pairs(s1) do
      same(s2[k], v, 0, "state " .. k)
    end
  end)
  for _, which in ipairs({ "SGD", "SGD nesterov", "Adam", "AdamW" }) do
    H.test("training step under jit equals eager: " .. which, function()
      local function make()
        tide.manual_seed(5)
        local m = nn.Sequential(nn.Linear(20, 16), nn.ReLU(), nn.Linear(16, 4))
        local o
        if which == "SGD" then
          o = optim.SGD(m:parameters(), { lr = 0.05, momentum = 0.9, weight_decay = 1e-4 })
        elseif which == "SGD nesterov" then
          o = optim.SGD(m:parameters(), { lr = 0.05, momentum = 0.9, nesterov = true })
        else
          o = optim[which](m:parameters(), { lr = 1e-2 })
        end
        return m, o
      end
      local x = tide.randn(12, 20)
      local y = tide.randint(1, 5, { 12 })
      local m1, o1 = make()
      local m2, o2 = make()
      local step = cross_entropy_step(x, y)
      local js = tide.jit(step)
      for i = 1, 4 do
        local a = step(m1, o1):item()
        local b = js(m2, o2):item()
        H.eq(a, b, which .. " loss at step " .. i)
      end
      local p1, p2 = m1:parameters(), m2:parameters()
      for i = 1, #p1 do
        same(p2[i], p1[i], 0, which .. " parameter " .. i)
      end
      H.ok(js:stats().hits >= 1, "steps hit the cache")
    end)
  end
end

if ok_nn and ok_optim then
  -- a conv net's step: conv epilogues forward (bias + ReLU) and backward (ReLU's mask times a
  -- conv's grad_input). The conv runs per block of images under jit and per share of images
  -- eagerly, so sums may round differently: a tolerance, not bitwise.
  H.test("conv net training step under jit equals eager", function()
    local function make()
      tide.manual_seed(21)
      local m = nn.Sequential(nn.Conv2d(3, 4, 3, { padding = 1 }), nn.ReLU(),
        nn.Conv2d(4, 4, 3, { padding = 1 }), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 16 * 16, 5))
      return m, optim.SGD(m:parameters(), { lr = 0.02, momentum = 0.9 })
    end
    local x, y = tide.randn(8, 3, 16, 16), tide.randint(1, 6, { 8 })
    local m1, o1 = make()
    local m2, o2 = make()
    local step = cross_entropy_step(x, y)
    local js = tide.jit(step)
    for i = 1, 3 do
      local a, b = step(m1, o1):item(), js(m2, o2):item()
      H.ok(math.abs(a - b) <= 0 * (1 + math.abs(a)), ("loss at step %d: %g vs %g"):format(i, b, a))
    end
    local p1, p2 = m1:parameters(), m2:parameters()
    for i = 1, #p1 do
      same(p2[i], p1[i], 0, "conv net parameter " .. i)
    end
    H.ok(js:stats().hits >= 1, "steps hit the cache")
  end)
end

H.test("in-place ops on tensor arguments are written back (a lone op, no fusion group)", function()
  local w = tide.tensor({ 1, 2, 3 }, { dtype = "float32" })
  for _, case in ipairs({
    { "add_", function(w, t) t:add_(w) end },
    { "copy_", function(w, t) t:copy_(t + w) end },
    { "mul_", function(w, t) t:mul_(2) end },
    { "add_ then read", function(w, t) t:add_(w); return t * 1 end },
    { "sub_ twice", function(w, t) t:sub_(w); t:sub_(w) end },
  }) do
    local t, te = tide.ones(3), tide.ones(3)
    local f = tide.jit(case[2])
    for _ = 1, 3 do f(w, t); case[2](w, te) end
    same(t, te, 0, "jit " .. case[1])
  end
end)

-- A leaf's first gradient under the jit is the traced result itself (no copy, as in eager);
-- gradients accumulated over two backward calls in one traced call, and across calls, must still
-- equal eager, and a grad handed to Lua must not share memory with anything else.
H.test("gradients taken without a copy under jit still accumulate like eager", function()
  local function run(f)
    local w = tide.tensor({ { 1, 2, 3 }, { 4, 5, 6 } }, { dtype = "float32", requires_grad = true })
    local b = tide.tensor({ 0.5, -0.5 }, { requires_grad = true })
    local x = tide.tensor({ { 1, -1, 2 }, { 0, 3, 1 }, { 2, 2, -2 }, { 1, 0, 0 } }, { dtype = "float32" })
    local snapshots = {}
    for _ = 1, 2 do
      f(w, b, x)
      snapshots[#snapshots + 1] = { w.grad:clone(), b.grad:clone() }
    end
    -- an in-place change of the grad must not reach anything else
    local before = b.grad:clone()
    b.grad:add_(100)
    H.ok(tide.equal(b.grad, before + 100), "the grad is its own tensor")
    return snapshots
  end
  local function step(w, b, x)
    for _ = 1, 2 do -- two backward calls: the second adds into the first's grads
      local y = (x:matmul(w:t()) + b):relu()
      y:sum():backward()
    end
  end
  local eager, jitted = run(step), run(tide.jit(step))
  for i = 1, 2 do
    same(jitted[i][1], eager[i][1], 0, "w.grad after call " .. i)
    same(jitted[i][2], eager[i][2], 0, "b.grad after call " .. i)
  end
end)

-- The jit on Vulkan (devices/vulkan/vk_jit.c): fusion groups as GLSL shaders compiled at run time
-- (and groups run op by op through the eager shaders), against eager Vulkan and the CPU.
local vk_ok, vk_why = tide.vulkan.available()
if vk_ok then
  H.test("jit on vulkan: fused chains against eager vulkan and the cpu", function()
    local xc, bc = tide.randn({33, 65}), tide.randn(65)
    local x, b = xc:to("vulkan"), bc:to("vulkan")
    local fns = {
      function(x, b) return (x * 1.5 + b):tanh() * x:sigmoid() + 0.5 end,
      function(x, b) return x:gt(b):where(x, x * 0.1) - 1 end,
      function(x, b) return (x:t() * 2 - 1):relu() end,
      function(x, b) return (x * 2):softmax(2) end, -- a row group: op by op
    }
    for i, fn in ipairs(fns) do
      local f = tide.jit(fn)
      local got, want, cpu = f(x, b), fn(x, b), fn(xc, bc)
      H.eq(got.device, "vulkan", "vulkan jit " .. i .. " device")
      same(got, want, 1e-6, "vulkan jit " .. i .. " vs eager vulkan")
      same(got, cpu, 1e-5, "vulkan jit " .. i .. " vs cpu")
      same(f(x, b), want, 1e-6, "vulkan jit " .. i .. " (cache hit)")
    end
  end)
else
  print("test_jit: the Vulkan jit tests skipped: " .. tostring(vk_why))
end

H.test("a temporary jit function lives through its own call", function()
  -- tide.jit(f)(x): nothing but the call's stack holds the jit function while the collections
  -- around the traced call run
  local x = tide.randn(3000)
  for _ = 1, 3 do
    local y = tide.jit(function(v) return v:tanh() * v * 3 end)(x)
    H.eq(tide.equal(y, x:tanh() * x * 3), true, "same values as eager")
  end
end)

H.done()
