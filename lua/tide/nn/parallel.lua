-- tide.nn.parallel — DistributedDataParallel (torch.nn.parallel's name and behaviour) on
-- tide.distributed (docs/distributed.md).
--
--   dist.init()
--   local ddp = nn.parallel.DistributedDataParallel(model, {bucket_cap_mb = 25})
--   local loss = crit(ddp(x_local), y_local); loss:backward()   -- grads now averaged over ranks
--   ddp:no_sync(function() ... end)                            -- accumulate without reducing
--
-- At construction every rank takes rank 0's parameters and buffers. The parameters are split
-- into buckets of about bucket_cap_mb MB, last parameters first (backward produces their
-- gradients first). During backward, the moment every gradient of a bucket is final
-- (tide.autograd.set_backward_hooks), its gradients go into one flat buffer, divided by the
-- world size, and its all_reduce (a sum) starts without blocking, so it runs on tide's
-- communication thread while backward goes on; buckets start in the same order on every rank.
-- When backward ends, each bucket is waited and the gradients become views of it. Under
-- tide.jit the same code is traced: each bucket's all_reduce is a step of the compiled graph
-- (blocking there: nothing is overlapped), and the division is the epilogue of the product
-- that makes the gradient.
local tide = require "tide"

local parallel = {}

-- The buckets: parameter indices from the last to the first, closed when the next would pass
-- the cap, and never mixing dtypes or devices. Each gets one flat buffer for its all_reduce.
local function make_buckets(params, cap_bytes)
  local buckets, bucket_of, cur = {}, {}, nil
  for i = #params, 1, -1 do
    local p = params[i]
    local bytes = p:numel() * p:element_size()
    if cur == nil or cur.dtype ~= p.dtype or cur.device ~= p.device or
       (cur.bytes > 0 and cur.bytes + bytes > cap_bytes) then
      cur = { members = {}, offsets = {}, numel = 0, bytes = 0, dtype = p.dtype, device = p.device }
      buckets[#buckets + 1] = cur
    end
    cur.members[#cur.members + 1] = i
    cur.offsets[i] = cur.numel
    cur.numel = cur.numel + p:numel()
    cur.bytes = cur.bytes + bytes
    bucket_of[i] = #buckets
  end
  for _, b in ipairs(buckets) do
    b.buffer = tide.zeros(b.numel, { dtype = b.dtype, device = b.device })
  end
  return buckets, bucket_of
end

function parallel.install(nn)
  local dist = tide.distributed
  local DDP = nn.Module:extend("DistributedDataParallel")
  nn.parallel = parallel
  parallel.DistributedDataParallel = DDP

  -- DistributedDataParallel(module [, {bucket_cap_mb = 25, broadcast_buffers = true}])
  function DDP:__init(module, opts)
    nn.Module.__init(self)
    opts = opts or {}
    if type(module) ~= "table" or type(module.parameters) ~= "function" then
      error("DistributedDataParallel: expected an nn.Module, got " .. type(module), 2)
    end
    for k in pairs(opts) do
      if k ~= "bucket_cap_mb" and k ~= "broadcast_buffers" then
        error(("DistributedDataParallel: unknown option %q (bucket_cap_mb, broadcast_buffers)")
          :format(tostring(k)), 2)
      end
    end
    local cap = opts.bucket_cap_mb or 25
    if type(cap) ~= "number" or cap <= 0 then
      error("DistributedDataParallel: bucket_cap_mb must be a positive number", 2)
    end
    if not dist.is_initialized() then
      error("DistributedDataParallel: call tide.distributed.init() first", 2)
    end
    self:add_module("module", module)
    rawset(self, "world", dist.world_size())
    rawset(self, "require_sync", true)
    local params = {}
    for _, p in ipairs(module:parameters()) do
      if p.requires_grad then params[#params + 1] = p end
    end
    if #params == 0 then
      error("DistributedDataParallel: the module has no parameter that requires grad", 2)
    end
    rawset(self, "params", params)
    self:_sync_module_state(opts.broadcast_buffers ~= false)
    local buckets, bucket_of = make_buckets(params, cap * 1024 * 1024)
    rawset(self, "buckets", buckets)
    rawset(self, "bucket_of", bucket_of)
    rawset(self, "timeline", {})
  end

  -- Every rank takes rank 0's parameters (and buffers) in place.
  function DDP:_sync_module_state(buffers_too)
    tide.no_grad(function()
      for _, p in ipairs(self.module:parameters()) do dist.broadcast(p:detach(), 0) end
      if buffers_too then
        for _, b in ipairs(self.module:buffers()) do dist.broadcast(b, 0) end
      end
    end)
  end

  -- The hooks are armed for the backward after a forward that records a graph, unless no_sync.
  local function arm(self)
    if self.require_sync and tide.is_grad_enabled() then self:prepare_for_backward() end
  end

  function DDP:forward(...)
    arm(self)
    return self.module(...)
  end

  -- ddp:loss(...): the module's own loss method (GPT:loss), with the hooks armed like forward.
  function DDP:loss(...)
    if type(self.module.loss) ~= "function" then
      error("DistributedDataParallel: the module has no loss method", 2)
    end
    arm(self)
    return self.module:loss(...)
  end

  -- Arms the hooks for the next backward: the buckets' counts, the next bucket to start.
  -- forward and loss call it; call it yourself before a backward through another method.
  function DDP:prepare_for_backward()
    for _, b in ipairs(self.buckets) do
      b.pending, b.ready, b.work, b.got = #b.members, false, nil, {}
    end
    rawset(self, "next_bucket", 1)
    rawset(self, "timeline", { started = {}, start = tide.clock() })
    tide.autograd.set_backward_hooks(self.params,
      function(i) self:_grad_ready(i) end,
      function() self:_finish_backward() end)
  end

  -- Puts parameter i's gradient into its bucket, divided by the world size on the way (one
  -- pass; the all_reduce then sums: PyTorch's default hook also divides before reducing). Under
  -- the jit the division joins the pass that produced the gradient.
  function DDP:_fill_slot(b, i)
    local p = self.params[i]
    -- in the gradient's shape, so that under the jit the product making it writes it
    local slot = b.buffer:narrow(1, b.offsets[i] + 1, p:numel()):view(p.shape)
    if p.grad == nil then slot:zero_()
    elseif self.world == 1 then slot:copy_(p.grad)
    else slot:copy_(p.grad:mul(1 / self.world)) end
  end

  function DDP:_grad_ready(i)
    local b = self.buckets[self.bucket_of[i]]
    self:_fill_slot(b, i)
    b.got[i] = true
    b.pending = b.pending - 1
    b.ready = b.pending == 0
    self.timeline.last_ready = tide.clock()
    self:_start_ready_buckets()
  end

  -- Starts the ready buckets in order: every rank issues its all_reduces in one order.
  function DDP:_start_ready_buckets()
    local buckets = self.buckets
    while buckets[self.next_bucket] and buckets[self.next_bucket].ready do
      local b = buckets[self.next_bucket]
      b.work = dist.all_reduce(b.buffer, "sum", { async_op = true })
      self.timeline.started[#self.timeline.started + 1] = tide.clock()
      rawset(self, "next_bucket", self.next_bucket + 1)
    end
  end

  -- After backward: the parameters this pass did not reach send the gradient they hold (one
  -- accumulated earlier under no_sync) or zeros; every bucket is waited, and the means go back
  -- into the gradients.
  function DDP:_finish_backward()
    tide.autograd.set_backward_hooks(nil)
    local tl = self.timeline
    tl.backward_end = tide.clock()
    for _, b in ipairs(self.buckets) do
      if not b.ready then
        for _, i in ipairs(b.members) do
          if not b.got[i] then self:_fill_slot(b, i) end -- the others are in already
        end
        b.ready = true
      end
    end
    self:_start_ready_buckets()
    tl.completed_at_end = 0
    for _, b in ipairs(self.buckets) do
      if b.work:is_completed() then tl.completed_at_end = tl.completed_at_end + 1 end
    end
    for _, b in ipairs(self.buckets) do
      b.work:wait()
      b.work = nil
      for _, i in ipairs(b.members) do
        local p = self.params[i]
        -- the gradient becomes a view of the bucket (no copy back): the next backward adds
        -- into it or replaces it, and the hook copies it into the same place
        p.grad = b.buffer:narrow(1, b.offsets[i] + 1, p:numel()):view(p.shape)
      end
    end
    tl.wait_end = tide.clock()
  end

  -- no_sync(fn): runs fn (forward and backward) without reducing the gradients, which
  -- accumulate locally until a later synchronized backward reduces the sum.
  function DDP:no_sync(fn)
    rawset(self, "require_sync", false)
    local ok, err = pcall(fn)
    rawset(self, "require_sync", true)
    if not ok then error(err, 0) end
  end

  function DDP:__repr()
    return ("DistributedDataParallel(%d buckets, world %d)\n  %s"):format(#self.buckets,
      self.world, tostring(self.module):gsub("\n", "\n  "))
  end
end

return parallel
