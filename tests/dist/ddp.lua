-- ddp.lua — nn.parallel.DistributedDataParallel under mpirun -np 2 (tests/test_distributed.sh;
-- it also runs alone as a world of one):
--  * every rank starts from rank 0's parameters;
--  * N steps of DDP training, each rank on its share of a global batch, equal N steps of one
--    process on the whole batch, for SGD with momentum and Adam, eager and under tide.jit;
--  * no_sync accumulates locally and the next synchronized backward reduces the sum;
--  * a model on Vulkan reduces through the host and matches one CPU process;
--  * on the GPT of examples/gpt.lua with 1 MB buckets, at least two buckets start their
--    all_reduce before backward has produced its last gradient (the overlap).
-- Tolerance: a gradient here is a mean over 16 samples either way; DDP sums two half-batch
-- means then halves, one process sums all 16, so each gradient element differs by a few float32
-- roundings of the sum of the terms' magnitudes (~1e-7 relative). Five SGD or Adam steps with
-- lr 0.01 move a parameter by at most 0.05 in all, and Adam's m/sqrt(v) passes a relative
-- difference on at most amplified by the ratio of |g| to its rounding; 1e-5 absolute on
-- parameters of size ~0.3 leaves room for that and still fails any missed or double reduction
-- (which changes a step by a factor of 2).
package.path = (arg[0]:match("(.*/)") or "./") .. "../lua/?.lua;" .. package.path
local H = require "harness"
local tide = H.tide
local nn, optim, dist = tide.nn, tide.optim, tide.distributed
local DDP = nn.parallel.DistributedDataParallel

local rank, world = dist.init{ timeout = 300 }
local GLOBAL = 16
local n_local = GLOBAL // world
tide.manual_seed(7)
local X = tide.randn(GLOBAL, 12)
local Y = tide.randint(1, 6, { GLOBAL }) -- class ids are 1-based
local lo = rank * n_local + 1
local x_local, y_local = X:narrow(1, lo, n_local):contiguous(), Y:narrow(1, lo, n_local):contiguous()

local function net(seed)
  tide.manual_seed(seed)
  return nn.Sequential(nn.Linear(12, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 5))
end

local function max_diff(a, b)
  return (a - b):abs():max():item()
end

H.test("construction takes rank 0's parameters", function()
  local model = net(100 + rank)
  local ddp = DDP(model, { bucket_cap_mb = 0.001 })
  local want = net(100)
  for i, p in ipairs(model:parameters()) do
    H.eq(max_diff(p, want:parameters()[i]), 0, "parameter " .. i)
  end
  H.ok(#ddp.buckets >= 3, "small buckets: several of them, got " .. #ddp.buckets)
  H.raises(function() DDP(model, { bucket_mb = 1 }) end, "unknown option")
  H.raises(function() DDP(42) end, "expected an nn.Module")
  H.raises(function() DDP(nn.ReLU()) end, "no parameter that requires grad")
end)

local function make_step(model, opt, jit)
  local crit = nn.CrossEntropyLoss()
  local function step(x, y)
    opt:zero_grad()
    local loss = crit(model(x), y)
    loss:backward()
    opt:step()
    return loss
  end
  return jit and tide.jit(step) or step
end

local function new_opt(kind, params)
  if kind == "SGD" then return optim.SGD(params, { lr = 0.01, momentum = 0.9 }) end
  return optim.Adam(params, { lr = 0.01 })
end

for _, kind in ipairs({ "SGD", "Adam" }) do
  for _, jit in ipairs({ false, true }) do
    H.test(("5 %s steps%s equal one process on the global batch"):format(kind,
      jit and " under tide.jit" or ""), function()
      local ref = net(100)
      local ref_step = make_step(ref, new_opt(kind, ref:parameters()), jit)
      local model = net(100 + rank)
      local ddp = DDP(model, { bucket_cap_mb = 0.001 })
      local step = make_step(ddp, new_opt(kind, model:parameters()), jit)
      for _ = 1, 5 do
        ref_step(X, Y)
        step(x_local, y_local)
      end
      for i, p in ipairs(model:parameters()) do
        local d = max_diff(p, ref:parameters()[i])
        H.ok(d <= 1e-5, ("parameter %d differs by %.3g"):format(i, d))
      end
      if jit then
        H.eq(step:stats().breaks, 0, "the jitted DDP step has no graph break")
        H.eq(step:stats().compiles, ref_step:stats().compiles, "compiles as often as one process")
      end
    end)
  end
end

H.test("no_sync accumulates; the next backward reduces the sum", function()
  local crit = nn.CrossEntropyLoss()
  local model = net(5)
  local ddp = DDP(model, { bucket_cap_mb = 0.001 })
  local half = n_local // 2
  local function part(t, k) return t:narrow(1, (k - 1) * half + 1, half) end
  ddp:no_sync(function() crit(ddp(part(x_local, 1)), part(y_local, 1)):backward() end)
  crit(ddp(part(x_local, 2)), part(y_local, 2)):backward()
  local ref = net(5)
  for k = 1, 2 do
    for r = 0, world - 1 do
      local rows = X:narrow(1, r * n_local + 1, n_local)
      local ys = Y:narrow(1, r * n_local + 1, n_local)
      local l = crit(ref(part(rows, k)), part(ys, k)) / world
      l:backward()
    end
  end
  for i, p in ipairs(model:parameters()) do
    local d = max_diff(p.grad, ref:parameters()[i].grad)
    H.ok(d <= 1e-6, ("gradient %d differs by %.3g"):format(i, d))
  end
end)

H.test("two synchronized backwards accumulate, a parameter left out keeps its gradient", function()
  local crit = nn.CrossEntropyLoss()
  for _, jit in ipairs({ false, true }) do
    local model, ref = net(9), net(9)
    local ddp = DDP(model, { bucket_cap_mb = 0.001 })
    local pass = function(m, x, y) local l = crit(m(x), y); l:backward() end
    if jit then pass = tide.jit(pass) end
    pass(ddp, x_local, y_local)
    pass(ddp, x_local * 2, y_local)  -- no zero_grad: grads add up, then the sum is reduced
    pass(ref, X, Y)
    pass(ref, X * 2, Y)
    for i, p in ipairs(model:parameters()) do
      local d = max_diff(p.grad, ref:parameters()[i].grad)
      H.ok(d <= 1e-6, ("%s: gradient %d differs by %.3g"):format(jit and "jit" or "eager", i, d))
    end
  end
  -- a parameter backward never reaches: the gradient it holds is averaged too, and one with
  -- none gets the ranks' mean of zeros and theirs
  local Two = nn.Module:extend("Two")
  function Two:__init()
    nn.Module.__init(self)
    self:add_module("used", nn.Linear(12, 5))
    self:add_module("unused", nn.Linear(3, 3))
  end
  function Two:forward(x) return self.used(x) end
  tide.manual_seed(3)
  local two = Two()
  local ddp = DDP(two, { bucket_cap_mb = 0.001 })
  two.unused.weight.grad = tide.ones(3, 3) * (rank + 1)
  local l = crit(ddp(x_local), y_local)
  l:backward()
  H.eq(max_diff(two.unused.weight.grad, tide.ones(3, 3) * (world + 1) / 2), 0,
    "a gradient held from before is averaged")
  H.eq(max_diff(two.unused.bias.grad, tide.zeros(3)), 0, "no gradient: zeros")
end)

H.test("a model on Vulkan: buckets on the device, staged through the host", function()
  if not tide.vulkan.available() then return end
  local function small(seed)
    tide.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
  end
  local model = small(200 + rank):to("vulkan")
  local ddp = DDP(model, { bucket_cap_mb = 0.0001 })
  H.eq(ddp.buckets[1].buffer.device, "vulkan")
  tide.manual_seed(11)
  local xs = tide.randn(world, 4, 6)
  local loss = ddp(xs[rank + 1]:to("vulkan")):sum()
  loss:backward()
  local ref = small(200)
  for r = 1, world do
    local l = ref(xs[r]):sum() / world
    l:backward()
  end
  for i, p in ipairs(model:parameters()) do
    H.eq(p.grad.device, "vulkan")
    -- float32 on two devices: sums of at most 8 products in another order
    local d = max_diff(p.grad:to("cpu"), ref:parameters()[i].grad)
    H.ok(d <= 1e-5, ("gradient %d differs by %.3g"):format(i, d))
  end
end)

H.test("GPT, 1 MB buckets: two or more all_reduces start before the last gradient", function()
  local gpt = require "tide.models.gpt"
  tide.manual_seed(0)
  local model = gpt.GPT({ vocab_size = 256, block_size = 256, n_layer = 6, n_head = 6,
                          n_embd = 384, dropout = 0, bias = true })
  local ddp = DDP(model, { bucket_cap_mb = 1 })
  local idx = tide.randint(1, 257, { 1, 64 })
  local targets = tide.randint(1, 257, { 1, 64 })
  local loss = ddp:loss(idx, targets)
  loss:backward()
  local tl = ddp.timeline
  local before = 0
  for _, t in ipairs(tl.started) do
    if t < tl.last_ready then before = before + 1 end
  end
  H.eq(#tl.started, #ddp.buckets, "every bucket started")
  H.ok(#ddp.buckets >= 10, "about 43 MB of gradients in 1 MB buckets, got " .. #ddp.buckets)
  H.ok(before >= 2, ("%d of %d buckets started before the last gradient"):format(before,
    #ddp.buckets))
  if rank == 0 then
    print(("gpt: %d buckets, %d started before the last gradient (%.1f ms before it ended); "
      .. "%d already complete when backward ended"):format(#ddp.buckets, before,
      (tl.last_ready - tl.started[1]) * 1e3, tl.completed_at_end))
  end
end)

dist.barrier()
H.done()
