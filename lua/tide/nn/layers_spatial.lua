-- nn modules over tide.nn.functional's normalizations, resizing, padding and distances
-- (functional_spatial.lua) and Unflatten. Installed into tide.nn by nn.lua (which also installs
-- layers_misc.lua through it); PyTorch's names, arguments and defaults, options in a trailing
-- table.
local tide = require "tide"

local M = {}

function M.install(nn, h)
  local Module, F, init = nn.Module, nn.functional, nn.init
  local check_opts, check_int, dtype_of = h.check_opts, h.check_int, h.dtype_of

  -- nn.GroupNorm(num_groups, num_channels [, {eps=1e-5, affine=true, dtype=}])
  local GroupNorm = Module:extend("GroupNorm")
  nn.GroupNorm = GroupNorm
  function GroupNorm:__init(num_groups, num_channels, opts)
    Module.__init(self)
    opts = check_opts(opts, "GroupNorm", { eps = true, affine = true, dtype = true })
    self.num_groups = check_int(num_groups, "GroupNorm", "num_groups")
    self.num_channels = check_int(num_channels, "GroupNorm", "num_channels")
    if self.num_channels % self.num_groups ~= 0 then
      error(("GroupNorm: num_channels %d is not divisible by num_groups %d"):format(
        self.num_channels, self.num_groups), 2)
    end
    self.eps = opts.eps or 1e-5
    self.affine = opts.affine ~= false
    if self.affine then
      self:register_parameter("weight", nn.Parameter(tide.ones(self.num_channels, dtype_of(opts))))
      self:register_parameter("bias", nn.Parameter(tide.zeros(self.num_channels, dtype_of(opts))))
    end
  end
  function GroupNorm:forward(x)
    return tide.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)
  end
  function GroupNorm:extra_repr()
    return ("%d, %d, eps=%g, affine=%s"):format(self.num_groups, self.num_channels, self.eps,
                                                 tostring(self.affine))
  end

  -- nn.InstanceNorm1d/2d(num_features [, {eps=1e-5, momentum=0.1, affine=false,
  -- track_running_stats=false, dtype=}])
  local function instance_norm(name, spatial)
    local IN = Module:extend(name)
    nn[name] = IN
    function IN:__init(num_features, opts)
      Module.__init(self)
      opts = check_opts(opts, name, { eps = true, momentum = true, affine = true,
                                      track_running_stats = true, dtype = true })
      self.num_features = check_int(num_features, name, "num_features")
      self.eps, self.momentum = opts.eps or 1e-5, opts.momentum or 0.1
      self.affine, self.track_running_stats = opts.affine == true, opts.track_running_stats == true
      local c = self.num_features
      if self.affine then
        self:register_parameter("weight", nn.Parameter(tide.ones(c, dtype_of(opts))))
        self:register_parameter("bias", nn.Parameter(tide.zeros(c, dtype_of(opts))))
      end
      if self.track_running_stats then
        self:register_buffer("running_mean", tide.zeros(c, dtype_of(opts)))
        self:register_buffer("running_var", tide.ones(c, dtype_of(opts)))
      end
    end
    function IN:forward(x)
      local unbatched = x:dim() == spatial + 1
      if unbatched then x = x:unsqueeze(1) end
      if x:dim() ~= spatial + 2 then
        error(("%s: expected a %dD or %dD input, got [%s]"):format(name, spatial + 1, spatial + 2,
          table.concat(x:size(), ", ")), 2)
      end
      local use_input = self.training or not self.track_running_stats
      local y = F.instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                                use_input, self.momentum, self.eps)
      return unbatched and y:squeeze(1) or y
    end
    function IN:extra_repr()
      return ("%d, eps=%g, momentum=%g, affine=%s, track_running_stats=%s"):format(
        self.num_features, self.eps, self.momentum, tostring(self.affine),
        tostring(self.track_running_stats))
    end
  end
  instance_norm("InstanceNorm1d", 1)
  instance_norm("InstanceNorm2d", 2)

  -- A module whose forward is fn(self, x) and whose __init keeps its arguments.
  local function simple(name, init_fn, forward)
    local C = Module:extend(name)
    nn[name] = C
    function C:__init(...)
      Module.__init(self)
      init_fn(self, ...)
    end
    C.forward = forward
    return C
  end

  -- nn.Upsample({size= | scale_factor=, mode="nearest", align_corners=})
  simple("Upsample", function(self, opts)
    self.opts = check_opts(opts, "Upsample", { size = true, scale_factor = true, mode = true,
                                               align_corners = true })
  end, function(self, x) return F.interpolate(x, self.opts) end)

  simple("PixelShuffle", function(self, r) self.upscale_factor = check_int(r, "PixelShuffle",
    "upscale_factor") end, function(self, x) return F.pixel_shuffle(x, self.upscale_factor) end)
  simple("PixelUnshuffle", function(self, r) self.downscale_factor = check_int(r,
    "PixelUnshuffle", "downscale_factor") end,
    function(self, x) return F.pixel_unshuffle(x, self.downscale_factor) end)

  -- nn.ZeroPad2d / ReflectionPad2d / ReplicationPad2d (padding: an int or {left, right, top,
  -- bottom}); nn.ConstantPad2d(padding, value)
  local function pad4(p, name)
    if type(p) == "number" then return { p, p, p, p } end
    if type(p) ~= "table" or #p ~= 4 then
      error(name .. ": padding must be an integer or {left, right, top, bottom}", 4)
    end
    return p
  end
  local function pad_module(name, mode)
    simple(name, function(self, padding, value)
      self.padding = pad4(padding, name)
      self.value = value or 0
    end, function(self, x)
      if mode == "constant" then return tide.pad(x, self.padding, self.value) end
      return tide.pad_mode(x, self.padding, mode)
    end)
  end
  pad_module("ZeroPad2d", "constant")
  pad_module("ConstantPad2d", "constant")
  pad_module("ReflectionPad2d", "reflect")
  pad_module("ReplicationPad2d", "replicate")

  -- nn.Dropout2d(p=0.5): whole channels, in training mode only
  simple("Dropout2d", function(self, p) self.p = p or 0.5 end,
    function(self, x) return F.dropout2d(x, self.p, self.training) end)

  -- nn.AdaptiveMaxPool2d(output_size [, return_indices=false])
  simple("AdaptiveMaxPool2d", function(self, size, return_indices)
    self.output_size, self.return_indices = size, return_indices == true
  end, function(self, x) return F.adaptive_max_pool2d(x, self.output_size, self.return_indices) end)

  -- nn.CosineSimilarity([{dim=2, eps=1e-8}]), nn.PairwiseDistance([{p=2, eps=1e-6, keepdim=}])
  simple("CosineSimilarity", function(self, opts)
    self.opts = check_opts(opts, "CosineSimilarity", { dim = true, eps = true })
  end, function(self, a, b) return F.cosine_similarity(a, b, self.opts) end)
  simple("PairwiseDistance", function(self, opts)
    self.opts = check_opts(opts, "PairwiseDistance", { p = true, eps = true, keepdim = true })
  end, function(self, a, b) return F.pairwise_distance(a, b, self.opts) end)

  -- nn.Unflatten(dim, sizes): dim (1-based) becomes sizes
  simple("Unflatten", function(self, dim, sizes) self.dim, self.sizes = dim, sizes end,
    function(self, x) return tide.unflatten(x, self.dim, self.sizes) end)

  require("tide.nn.layers_misc").install(nn, h)
end

return M
