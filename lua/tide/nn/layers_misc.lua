-- nn modules: the losses of functional_loss.lua, Bilinear, EmbeddingBag and ModuleDict
-- (installed into tide.nn through layers_spatial.lua). PyTorch's names and defaults.
local tide = require "tide"

local M = {}

local function install_losses(nn)
  local Module, F = nn.Module, nn.functional
  -- A loss module: forward(...) = fn(..., opts); PyTorch's constructor options as one table
  local function loss(name, fn)
    local L = Module:extend(name)
    function L:__init(opts)
      Module.__init(self)
      if type(opts) == "string" then opts = { reduction = opts } end
      self.opts = opts
    end
    function L:forward(...)
      local args = table.pack(...)
      args[args.n + 1] = self.opts
      return fn(table.unpack(args, 1, args.n + 1))
    end
    nn[name] = L
  end
  loss("SmoothL1Loss", F.smooth_l1_loss)
  loss("HuberLoss", F.huber_loss)
  loss("BCELoss", F.binary_cross_entropy)
  loss("KLDivLoss", F.kl_div)
  loss("MarginRankingLoss", F.margin_ranking_loss)
  loss("HingeEmbeddingLoss", F.hinge_embedding_loss)
  loss("SoftMarginLoss", F.soft_margin_loss)
  loss("MultiMarginLoss", F.multi_margin_loss)
  loss("CosineEmbeddingLoss", F.cosine_embedding_loss)
  loss("TripletMarginLoss", F.triplet_margin_loss)
  loss("CTCLoss", F.ctc_loss)
end

-- nn.Bilinear(in1, in2, out [, {bias=true, dtype=}]): x1^T W x2 + b, weights uniform in
-- +-1/sqrt(in1) as PyTorch
local function install_bilinear(nn, h)
  local Bilinear = nn.Module:extend("Bilinear")
  nn.Bilinear = Bilinear
  function Bilinear:__init(in1, in2, out, opts)
    nn.Module.__init(self)
    opts = h.check_opts(opts, "Bilinear", { bias = true, dtype = true })
    self.in1_features = h.check_int(in1, "Bilinear", "in1_features")
    self.in2_features = h.check_int(in2, "Bilinear", "in2_features")
    self.out_features = h.check_int(out, "Bilinear", "out_features")
    local bound = 1 / math.sqrt(self.in1_features)
    local w = tide.empty(self.out_features, self.in1_features, self.in2_features, h.dtype_of(opts))
    self:register_parameter("weight", nn.Parameter(nn.init.uniform_(w, -bound, bound)))
    if opts.bias ~= false then
      local b = tide.empty(self.out_features, h.dtype_of(opts))
      self:register_parameter("bias", nn.Parameter(nn.init.uniform_(b, -bound, bound)))
    end
  end
  function Bilinear:forward(x1, x2)
    return nn.functional.bilinear(x1, x2, self.weight, self.bias)
  end
end

-- The bag (1-based) of each element of a 1-D input split at 1-based offsets.
local function bag_ids(n, offsets, fn)
  local off = tide.is_tensor(offsets) and offsets:reshape(-1):totable() or offsets
  local ids, bags = {}, #off
  for b = 1, bags do
    local first, stop = off[b], b < bags and off[b + 1] - 1 or n
    if first < 1 or (b > 1 and first < off[b - 1]) or first > n + 1 then
      error(("%s: offsets must start at 1 and not decrease within 1..%d, got %s at %d"):format(
        fn, n + 1, tostring(first), b), 4)
    end
    for i = first, stop do ids[i] = b end
  end
  if bags == 0 or off[1] ~= 1 then
    error(fn .. ": offsets must start at 1", 4)
  end
  return ids, bags
end

-- nn.EmbeddingBag(num_embeddings, embedding_dim [, {mode="mean", dtype=}]); forward(input
-- [, offsets [, per_sample_weights]]): input [B, L] (one bag per row) or 1-D with 1-based
-- offsets starting each bag; sum, mean (an empty bag gives zeros) or max per bag
local function install_embedding_bag(nn, h)
  local EB = nn.Module:extend("EmbeddingBag")
  nn.EmbeddingBag = EB
  local modes = { sum = true, mean = true, max = true }
  function EB:__init(num, dim, opts)
    nn.Module.__init(self)
    opts = h.check_opts(opts, "EmbeddingBag", { mode = true, dtype = true })
    self.num_embeddings = h.check_int(num, "EmbeddingBag", "num_embeddings")
    self.embedding_dim = h.check_int(dim, "EmbeddingBag", "embedding_dim")
    self.mode = opts.mode or "mean"
    if not modes[self.mode] then
      error(("EmbeddingBag: mode must be \"sum\", \"mean\" or \"max\", got %q"):format(
        tostring(self.mode)), 2)
    end
    local w = tide.empty(self.num_embeddings, self.embedding_dim, h.dtype_of(opts))
    self:register_parameter("weight", nn.Parameter(nn.init.normal_(w, 0, 1)))
  end
  function EB:forward(input, offsets, per_sample_weights)
    if per_sample_weights ~= nil and self.mode ~= "sum" then
      error("EmbeddingBag: per_sample_weights only goes with mode \"sum\"", 2)
    end
    if input:dim() == 2 then
      if offsets ~= nil then error("EmbeddingBag: offsets go with a 1-D input only", 2) end
      local e = tide.embedding(input, self.weight)
      if per_sample_weights ~= nil then e = e * per_sample_weights:unsqueeze(3) end
      if self.mode == "max" then return (e:max(2)) end
      return self.mode == "sum" and e:sum(2) or e:mean(2)
    end
    if input:dim() ~= 1 or offsets == nil then
      error("EmbeddingBag: the input must be [B, L], or 1-D with offsets", 2)
    end
    local n, d = input:numel(), self.embedding_dim
    local ids, bags = bag_ids(n, offsets, "EmbeddingBag")
    local e = tide.embedding(input, self.weight)
    if per_sample_weights ~= nil then e = e * per_sample_weights:unsqueeze(2) end
    if self.mode == "max" then
      local rows = {}
      local off = tide.is_tensor(offsets) and offsets:reshape(-1):totable() or offsets
      for b = 1, bags do
        local first, stop = off[b], b < bags and off[b + 1] - 1 or n
        rows[b] = stop >= first and (e:narrow(1, first, stop - first + 1):max(1))
                  or tide.zeros(d, { dtype = e.dtype, device = e.device })
      end
      return tide.stack(rows, 1)
    end
    local idx = tide.tensor(ids, { dtype = "int64", device = e.device }):unsqueeze(2):expand(n, d)
    local zeros = tide.zeros(bags, d, { dtype = e.dtype, device = e.device })
    local sum = tide.scatter_add(zeros, 1, idx, e)
    if self.mode == "sum" then return sum end
    local counts = {}
    for b = 1, bags do counts[b] = 0 end
    for i = 1, n do counts[ids[i]] = counts[ids[i]] + 1 end
    for b = 1, bags do counts[b] = { math.max(counts[b], 1) } end
    return sum / tide.tensor(counts, { dtype = e.dtype, device = e.device })
  end
end

-- nn.ModuleDict({name = module, ...}): children under their names (sorted, since Lua tables
-- keep no order; add more with :update or m:add_module); d[name], :keys(), :items(), #d
local function install_module_dict(nn)
  local MD = nn.Module:extend("ModuleDict")
  nn.ModuleDict = MD
  function MD:update(t)
    local names = {}
    for k in pairs(t or {}) do names[#names + 1] = tostring(k) end
    table.sort(names)
    for _, k in ipairs(names) do self:add_module(k, t[k]) end
    return self
  end
  function MD:__init(t)
    nn.Module.__init(self)
    self:update(t)
  end
  function MD:keys()
    local r = {}
    for name in self:named_children() do r[#r + 1] = name end
    return r
  end
  function MD:items()
    local r = {}
    for name, m in self:named_children() do r[#r + 1] = { name, m } end
    return r
  end
  function MD:forward()
    error("ModuleDict: has no forward; call its modules", 2)
  end
  MD.__len = function(self) return #self._module_names end
end

function M.install(nn, h)
  install_losses(nn)
  install_bilinear(nn, h)
  install_embedding_bag(nn, h)
  install_module_dict(nn)
end

return M
