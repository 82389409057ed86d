-- tide.nn's core layers (installed into tide.nn by nn.lua): Linear, Identity, Conv2d, the 2-D
-- pools, BatchNorm1d/2d, LayerNorm, RMSNorm, Dropout, Embedding, the activation modules,
-- Flatten, the loss modules, Sequential and ModuleList. PyTorch's names, arguments and defaults;
-- options in a trailing table. The other layer families live beside this file.
local tide = require "tide"

local M = {}

-- h: nn.lua's argument checks (check_opts, check_int, pair, fmt_pair, dtype_of).
function M.install(nn, h)
  local F, init, Module = nn.functional, nn.init, nn.Module
  local check_opts, check_int, pair, fmt_pair, dtype_of =
    h.check_opts, h.check_int, h.pair, h.fmt_pair, h.dtype_of

  -- nn.Linear(in_features, out_features [, {bias=true, dtype="float32"}])
  local Linear = Module:extend("Linear")
  nn.Linear = Linear
  function Linear:__init(in_features, out_features, opts)
    Module.__init(self)
    opts = check_opts(opts, "Linear", { bias = true, dtype = true })
    self.in_features = check_int(in_features, "Linear", "in_features")
    self.out_features = check_int(out_features, "Linear", "out_features")
    local w = tide.empty(self.out_features, self.in_features, dtype_of(opts))
    init.kaiming_uniform_(w, { a = math.sqrt(5) })
    self:register_parameter("weight", nn.Parameter(w))
    if opts.bias ~= false then
      local bound = 1 / math.sqrt(self.in_features)
      self:register_parameter("bias", nn.Parameter(init.uniform_(
        tide.empty(self.out_features, dtype_of(opts)), -bound, bound)))
    end
  end
  function Linear:forward(x)
    return tide.linear(x, self.weight, self.bias)
  end
  function Linear:extra_repr()
    return ("in_features=%d, out_features=%d, bias=%s"):format(self.in_features,
                                                               self.out_features,
                                                               tostring(self.bias ~= nil))
  end

  -- nn.Identity()
  local Identity = Module:extend("Identity")
  nn.Identity = Identity
  function Identity:forward(x)
    return x
  end

  -- nn.Conv2d(in_channels, out_channels, kernel_size [, {stride=1, padding=0, dilation=1,
  -- groups=1, bias=true, dtype=}]); sizes are numbers or {h, w} pairs, padding may be "same"
  local Conv2d = Module:extend("Conv2d")
  nn.Conv2d = Conv2d
  function Conv2d:__init(in_channels, out_channels, kernel_size, opts)
    Module.__init(self)
    opts = check_opts(opts, "Conv2d", { stride = true, padding = true, dilation = true,
                                        groups = true, bias = true, dtype = true,
                                        padding_mode = true })
    if opts.padding_mode and opts.padding_mode ~= "zeros" then
      error("Conv2d: only padding_mode \"zeros\" is supported", 2)
    end
    self.in_channels = check_int(in_channels, "Conv2d", "in_channels")
    self.out_channels = check_int(out_channels, "Conv2d", "out_channels")
    self.groups = check_int(opts.groups or 1, "Conv2d", "groups")
    if self.in_channels % self.groups ~= 0 or self.out_channels % self.groups ~= 0 then
      error(("Conv2d: in_channels (%d) and out_channels (%d) must be divisible by groups (%d)")
        :format(self.in_channels, self.out_channels, self.groups), 2)
    end
    self.kernel_size = kernel_size
    self.stride = opts.stride or 1
    self.padding = opts.padding or 0
    self.dilation = opts.dilation or 1
    local kh, kw = pair(kernel_size)
    kh, kw = check_int(kh, "Conv2d", "kernel_size"), check_int(kw, "Conv2d", "kernel_size")
    local w = tide.empty(self.out_channels, self.in_channels // self.groups, kh, kw, dtype_of(opts))
    init.kaiming_uniform_(w, { a = math.sqrt(5) })
    self:register_parameter("weight", nn.Parameter(w))
    if opts.bias ~= false then
      local fan_in = (self.in_channels // self.groups) * kh * kw
      local bound = 1 / math.sqrt(fan_in)
      self:register_parameter("bias", nn.Parameter(init.uniform_(
        tide.empty(self.out_channels, dtype_of(opts)), -bound, bound)))
    end
  end
  function Conv2d:forward(x)
    return tide.conv2d(x, self.weight, self.bias, { stride = self.stride,
      padding = self.padding, dilation = self.dilation, groups = self.groups })
  end
  function Conv2d:extra_repr()
    local s = ("%d, %d, kernel_size=%s, stride=%s"):format(self.in_channels, self.out_channels,
                                                           fmt_pair(self.kernel_size),
                                                           fmt_pair(self.stride))
    if self.padding ~= 0 then s = s .. ", padding=" .. fmt_pair(self.padding) end
    if self.dilation ~= 1 then s = s .. ", dilation=" .. fmt_pair(self.dilation) end
    if self.groups ~= 1 then s = s .. ", groups=" .. self.groups end
    if self.bias == nil then s = s .. ", bias=false" end
    return s
  end

  -- nn.MaxPool2d(kernel_size [, stride | {stride=kernel_size, padding=0}])
  local MaxPool2d = Module:extend("MaxPool2d")
  nn.MaxPool2d = MaxPool2d
  local function pool_init(self, name, kernel_size, opts, extra)
    Module.__init(self)
    if type(opts) == "number" then
      opts = { stride = opts }
    end
    local allowed = { stride = true, padding = true }
    for k in pairs(extra or {}) do allowed[k] = true end
    opts = check_opts(opts, name, allowed)
    self.kernel_size = kernel_size
    self.stride = opts.stride or kernel_size
    self.padding = opts.padding or 0
    return opts
  end
  function MaxPool2d:__init(kernel_size, opts)
    pool_init(self, "MaxPool2d", kernel_size, opts)
  end
  function MaxPool2d:forward(x)
    return tide.max_pool2d(x, self.kernel_size, { stride = self.stride, padding = self.padding })
  end
  function MaxPool2d:extra_repr()
    return ("kernel_size=%s, stride=%s, padding=%s"):format(fmt_pair(self.kernel_size),
                                                            fmt_pair(self.stride),
                                                            fmt_pair(self.padding))
  end

  -- nn.AvgPool2d(kernel_size [, stride | {stride=kernel_size, padding=0, count_include_pad=true}])
  local AvgPool2d = Module:extend("AvgPool2d")
  nn.AvgPool2d = AvgPool2d
  function AvgPool2d:__init(kernel_size, opts)
    opts = pool_init(self, "AvgPool2d", kernel_size, opts, { count_include_pad = true })
    self.count_include_pad = opts.count_include_pad ~= false
  end
  function AvgPool2d:forward(x)
    return tide.avg_pool2d(x, self.kernel_size, { stride = self.stride, padding = self.padding,
                                                  count_include_pad = self.count_include_pad })
  end
  AvgPool2d.extra_repr = MaxPool2d.extra_repr

  -- nn.AdaptiveAvgPool2d(output_size): a number or {h, w}
  local AdaptiveAvgPool2d = Module:extend("AdaptiveAvgPool2d")
  nn.AdaptiveAvgPool2d = AdaptiveAvgPool2d
  function AdaptiveAvgPool2d:__init(output_size)
    Module.__init(self)
    self.output_size = output_size
  end
  function AdaptiveAvgPool2d:forward(x)
    return tide.adaptive_avg_pool2d(x, self.output_size)
  end
  function AdaptiveAvgPool2d:extra_repr()
    return "output_size=" .. fmt_pair(self.output_size)
  end

  -- nn.BatchNorm1d / nn.BatchNorm2d(num_features [, {eps=1e-5, momentum=0.1, affine=true,
  -- track_running_stats=true}]); buffers running_mean, running_var, num_batches_tracked
  local function batchnorm_class(name, dims)
    local BN = Module:extend(name)
    function BN:__init(num_features, opts)
      Module.__init(self)
      opts = check_opts(opts, name, { eps = true, momentum = true, affine = true,
                                      track_running_stats = true, dtype = true })
      self.num_features = check_int(num_features, name, "num_features")
      self.eps = opts.eps or 1e-5
      self.momentum = opts.momentum == nil and 0.1 or opts.momentum
      self.affine = opts.affine ~= false
      self.track_running_stats = opts.track_running_stats ~= false
      local o = dtype_of(opts)
      if self.affine then
        self:register_parameter("weight", nn.Parameter(tide.ones(self.num_features, o)))
        self:register_parameter("bias", nn.Parameter(tide.zeros(self.num_features, o)))
      end
      if self.track_running_stats then
        self:register_buffer("running_mean", tide.zeros(self.num_features, o))
        self:register_buffer("running_var", tide.ones(self.num_features, o))
        self:register_buffer("num_batches_tracked", tide.tensor(0))
      end
    end
    function BN:forward(x)
      local d = x:dim()
      local ok = false
      for _, want in ipairs(dims) do
        ok = ok or d == want
      end
      if not ok then
        error(("%s: expected a %s-dim input, got %d dims"):format(name, table.concat(dims, " or "),
                                                                   d), 2)
      end
      if x:size(2) ~= self.num_features then
        error(("%s: expected %d channels (dim 2), got %d"):format(name, self.num_features,
                                                                 x:size(2)), 2)
      end
      local use_batch = self.training or not self.track_running_stats
      if self.training and self.track_running_stats then
        self.num_batches_tracked:copy_(self.num_batches_tracked + 1)
      end
      if use_batch then
        return tide.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                               true, self.momentum, self.eps)
      end
      return tide.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                             false, self.momentum, self.eps)
    end
    function BN:extra_repr()
      return ("%d, eps=%g, momentum=%g, affine=%s, track_running_stats=%s"):format(
        self.num_features, self.eps, self.momentum, tostring(self.affine),
        tostring(self.track_running_stats))
    end
    return BN
  end
  nn.BatchNorm1d = batchnorm_class("BatchNorm1d", { 2, 3 })
  nn.BatchNorm2d = batchnorm_class("BatchNorm2d", { 4 })

  -- nn.LayerNorm(normalized_shape [, {eps=1e-5, elementwise_affine=true, bias=true}])
  local LayerNorm = Module:extend("LayerNorm")
  nn.LayerNorm = LayerNorm
  function LayerNorm:__init(normalized_shape, opts)
    Module.__init(self)
    opts = check_opts(opts, "LayerNorm", { eps = true, elementwise_affine = true, bias = true,
                                           dtype = true })
    if type(normalized_shape) ~= "table" then
      normalized_shape = { normalized_shape }
    end
    self.normalized_shape = normalized_shape
    self.eps = opts.eps or 1e-5
    self.elementwise_affine = opts.elementwise_affine ~= false
    if self.elementwise_affine then
      self:register_parameter("weight", nn.Parameter(tide.ones(normalized_shape, dtype_of(opts))))
      if opts.bias ~= false then
        self:register_parameter("bias", nn.Parameter(tide.zeros(normalized_shape, dtype_of(opts))))
      end
    end
  end
  function LayerNorm:forward(x)
    return tide.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
  end
  function LayerNorm:extra_repr()
    return ("{%s}, eps=%g, elementwise_affine=%s"):format(table.concat(self.normalized_shape, ", "),
                                                          self.eps,
                                                          tostring(self.elementwise_affine))
  end

  -- nn.RMSNorm(normalized_shape [, {eps=nil, elementwise_affine=true, dtype=}]) as PyTorch 2.4's:
  -- x / sqrt(mean(x^2 over the normalized dims) + eps) * weight; eps nil means the machine
  -- epsilon of the input's dtype (torch.finfo(x.dtype).eps).
  local RMSNorm = Module:extend("RMSNorm")
  nn.RMSNorm = RMSNorm
  function RMSNorm:__init(normalized_shape, opts)
    Module.__init(self)
    opts = check_opts(opts, "RMSNorm", { eps = true, elementwise_affine = true, dtype = true })
    if type(normalized_shape) ~= "table" then
      normalized_shape = { normalized_shape }
    end
    if #normalized_shape == 0 then
      error("RMSNorm: normalized_shape must name at least one dim", 2)
    end
    for i, n in ipairs(normalized_shape) do
      normalized_shape[i] = check_int(n, "RMSNorm", "normalized_shape")
    end
    if opts.eps ~= nil and (type(opts.eps) ~= "number" or opts.eps < 0) then
      error("RMSNorm: eps must be a non-negative number, got " .. tostring(opts.eps), 2)
    end
    self.normalized_shape = normalized_shape
    self.eps = opts.eps
    self.elementwise_affine = opts.elementwise_affine ~= false
    if self.elementwise_affine then
      self:register_parameter("weight", nn.Parameter(tide.ones(normalized_shape, dtype_of(opts))))
    end
  end
  function RMSNorm:forward(x)
    return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)
  end
  function RMSNorm:extra_repr()
    return ("{%s}, eps=%s, elementwise_affine=%s"):format(table.concat(self.normalized_shape, ", "),
                                                          self.eps and ("%g"):format(self.eps)
                                                            or "nil",
                                                          tostring(self.elementwise_affine))
  end

  -- nn.Dropout(p=0.5): identity in eval mode
  local Dropout = Module:extend("Dropout")
  nn.Dropout = Dropout
  function Dropout:__init(p)
    Module.__init(self)
    if type(p) == "table" then p = p.p end
    p = p or 0.5
    if type(p) ~= "number" or p < 0 or p > 1 then
      error("Dropout: p must be a probability in [0, 1], got " .. tostring(p), 2)
    end
    self.p = p
  end
  function Dropout:forward(x)
    if not self.training or self.p == 0 then
      return x
    end
    return tide.dropout(x, self.p, true)
  end
  function Dropout:extra_repr()
    return "p=" .. self.p
  end

  -- nn.Embedding(num_embeddings, embedding_dim [, {dtype=}]): weight ~ N(0, 1); 1-based indices
  local Embedding = Module:extend("Embedding")
  nn.Embedding = Embedding
  function Embedding:__init(num_embeddings, embedding_dim, opts)
    Module.__init(self)
    opts = check_opts(opts, "Embedding", { dtype = true })
    self.num_embeddings = check_int(num_embeddings, "Embedding", "num_embeddings")
    self.embedding_dim = check_int(embedding_dim, "Embedding", "embedding_dim")
    local w = tide.empty(self.num_embeddings, self.embedding_dim, dtype_of(opts))
    self:register_parameter("weight", nn.Parameter(init.normal_(w, 0, 1)))
  end
  function Embedding:forward(indices)
    return tide.embedding(indices, self.weight)
  end
  function Embedding:extra_repr()
    return ("%d, %d"):format(self.num_embeddings, self.embedding_dim)
  end

  -- Activations
  local function activation(name, fn, repr)
    local A = Module:extend(name)
    function A:forward(x)
      return fn(self, x)
    end
    if repr then
      A.extra_repr = repr
    end
    nn[name] = A
    return A
  end
  activation("ReLU", function(_, x) return tide.relu(x) end)
  activation("Sigmoid", function(_, x) return tide.sigmoid(x) end)
  activation("Tanh", function(_, x) return tide.tanh(x) end)
  activation("SiLU", function(_, x) return tide.silu(x) end)
  local GELU = activation("GELU", function(self, x)
    if self.approximate ~= "none" then
      return tide.gelu(x, self.approximate)
    end
    return tide.gelu(x)
  end, function(self) return "approximate=" .. self.approximate end)
  function GELU:__init(opts)
    Module.__init(self)
    if type(opts) == "string" then opts = { approximate = opts } end
    opts = check_opts(opts, "GELU", { approximate = true })
    self.approximate = opts.approximate or "none"
    if self.approximate ~= "none" and self.approximate ~= "tanh" then
      error("GELU: approximate must be \"none\" or \"tanh\"", 2)
    end
  end
  local LeakyReLU = activation("LeakyReLU", function(self, x)
    return F.leaky_relu(x, self.negative_slope)
  end, function(self) return "negative_slope=" .. self.negative_slope end)
  function LeakyReLU:__init(negative_slope)
    Module.__init(self)
    self.negative_slope = negative_slope or 0.01
  end

  local function dim_activation(name, fn)
    local A = activation(name, function(self, x) return fn(x, self.dim) end,
                         function(self) return "dim=" .. tostring(self.dim) end)
    function A:__init(dim)
      Module.__init(self)
      if dim == nil then
        error(name .. ": dim is required (1-based; -1 is the last)", 3)
      end
      self.dim = dim
    end
  end
  dim_activation("Softmax", tide.softmax)
  dim_activation("LogSoftmax", tide.log_softmax)

  -- nn.Flatten(start_dim=2, end_dim=-1): keeps the batch dim (1-based dims)
  local Flatten = Module:extend("Flatten")
  nn.Flatten = Flatten
  function Flatten:__init(start_dim, end_dim)
    Module.__init(self)
    self.start_dim = start_dim or 2
    self.end_dim = end_dim or -1
  end
  function Flatten:forward(x)
    return x:flatten(self.start_dim, self.end_dim)
  end
  function Flatten:extra_repr()
    return ("start_dim=%d, end_dim=%d"):format(self.start_dim, self.end_dim)
  end

  -- Loss modules: nn.CrossEntropyLoss([{reduction=, label_smoothing=, ignore_index=}]) ...
  local function loss_class(name, fn)
    local L = Module:extend(name)
    function L:__init(opts)
      Module.__init(self)
      self.opts = opts
    end
    function L:forward(input, target)
      return fn(input, target, self.opts)
    end
    nn[name] = L
  end
  loss_class("CrossEntropyLoss", F.cross_entropy)
  loss_class("NLLLoss", F.nll_loss)
  loss_class("MSELoss", F.mse_loss)
  loss_class("L1Loss", F.l1_loss)
  loss_class("BCEWithLogitsLoss", F.binary_cross_entropy_with_logits)

  -- nn.Sequential(m1, m2, ...) or nn.Sequential({m1, m2, ...}): children "1", "2", ... at
  -- seq[1], seq[2]; forward feeds each output to the next
  local Sequential = Module:extend("Sequential")
  nn.Sequential = Sequential
  function Sequential:__init(...)
    Module.__init(self)
    local list = { ... }
    if #list == 1 and getmetatable(list[1]) == nil and type(list[1]) == "table" then
      list = list[1]
    end
    for i, m in ipairs(list) do
      self:add_module(tostring(i), m)
    end
  end
  -- m as the next child; the container (Sequential's and ModuleList's)
  local function append(self, m)
    self:add_module(tostring(#self._module_names + 1), m)
    return self
  end
  local function count(self) return #self._module_names end
  Sequential.append, Sequential.__len = append, count
  function Sequential:forward(x, ...)
    for i = 1, #self._module_names do
      x = self[i](x, ...)
    end
    return x
  end

  -- nn.ModuleList({m1, m2, ...}): children "1", "2", ... at list[i]; append, ipairs and # work
  local ModuleList = Module:extend("ModuleList")
  nn.ModuleList = ModuleList
  function ModuleList:__init(list)
    Module.__init(self)
    for i, m in ipairs(list or {}) do
      self:add_module(tostring(i), m)
    end
  end
  ModuleList.append, ModuleList.__len = append, count
  function ModuleList:forward()
    error("ModuleList: has no forward; call its modules", 2)
  end
end

return M
