-- tide.nn — modules with torch.nn's names, on tide's ops (see lua/README.md "tide.nn").
--
--   local nn = require "tide.nn"        -- or tide.nn
--   local model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 10))
--   local y = model(x)                  -- __call runs forward
--   for name, p in model:named_parameters() do print(name, p.shape) end   -- "1.weight" ...
--
-- A module keeps its parameters, buffers and children as plain fields (self.weight, self.fc1;
-- a child named "1" lives at self[1]) plus ordered name lists, so reassigning self.weight = t
-- is seen by parameters() and state_dict(). Names in state_dict() and named_parameters() are
-- dotted paths of those names: Sequential children are "1", "2", ... (1-based, as Lua), so an
-- nn.Sequential inside a field `layers` gives keys like "layers.1.weight".
--
-- New modules: local M = nn.Module:extend("MyNet"); function M:__init(...) ... end;
-- function M:forward(x) ... end; then M(...) makes one (nn.Module.__init must be called first
-- in __init: M.super.__init(self)).
local tide = require "tide"
local F = require "tide.nn.functional"

local nn = {}
nn.functional = F

-- ---- init ------------------------------------------------------------------------------------

local init = {}
nn.init = init
nn.utils = require "tide.nn.utils"

local function no_grad(fn, ...)
  return tide.no_grad(fn, ...)
end

-- fan_in, fan_out of a weight [out, in, k...] as torch.nn.init._calculate_fan_in_and_fan_out
function init.calculate_fan_in_and_fan_out(t)
  local d = t:dim()
  if d < 2 then
    error("calculate_fan_in_and_fan_out: needs a tensor of at least 2 dims, got " .. d, 2)
  end
  local receptive = 1
  for i = 3, d do
    receptive = receptive * t:size(i)
  end
  return t:size(2) * receptive, t:size(1) * receptive
end

function init.calculate_gain(nonlinearity, param)
  if nonlinearity == "linear" or nonlinearity == "sigmoid" or nonlinearity:match("^conv") then
    return 1
  elseif nonlinearity == "tanh" then
    return 5 / 3
  elseif nonlinearity == "relu" then
    return math.sqrt(2)
  elseif nonlinearity == "leaky_relu" then
    local a = param or 0.01
    return math.sqrt(2 / (1 + a * a))
  elseif nonlinearity == "selu" then
    return 3 / 4
  end
  error("calculate_gain: unknown nonlinearity " .. tostring(nonlinearity), 2)
end

function init.uniform_(t, a, b)
  no_grad(function() t:uniform_(a or 0, b or 1) end)
  return t
end

function init.normal_(t, mean, std)
  no_grad(function() t:normal_(mean or 0, std or 1) end)
  return t
end

function init.constant_(t, v)
  no_grad(function() t:fill_(v) end)
  return t
end

function init.zeros_(t)
  return init.constant_(t, 0)
end

function init.ones_(t)
  return init.constant_(t, 1)
end

-- kaiming_uniform_(t [, {a=0, mode="fan_in", nonlinearity="leaky_relu"}])
function init.kaiming_uniform_(t, opts)
  opts = opts or {}
  local fan_in, fan_out = init.calculate_fan_in_and_fan_out(t)
  local fan = (opts.mode or "fan_in") == "fan_in" and fan_in or fan_out
  local gain = init.calculate_gain(opts.nonlinearity or "leaky_relu", opts.a or 0)
  local bound = math.sqrt(3) * gain / math.sqrt(fan)
  return init.uniform_(t, -bound, bound)
end

function init.kaiming_normal_(t, opts)
  opts = opts or {}
  local fan_in, fan_out = init.calculate_fan_in_and_fan_out(t)
  local fan = (opts.mode or "fan_in") == "fan_in" and fan_in or fan_out
  local gain = init.calculate_gain(opts.nonlinearity or "leaky_relu", opts.a or 0)
  return init.normal_(t, 0, gain / math.sqrt(fan))
end

function init.xavier_uniform_(t, gain)
  local fan_in, fan_out = init.calculate_fan_in_and_fan_out(t)
  local bound = (gain or 1) * math.sqrt(6 / (fan_in + fan_out))
  return init.uniform_(t, -bound, bound)
end

function init.xavier_normal_(t, gain)
  local fan_in, fan_out = init.calculate_fan_in_and_fan_out(t)
  return init.normal_(t, 0, (gain or 1) * math.sqrt(2 / (fan_in + fan_out)))
end

-- ---- Parameter -------------------------------------------------------------------------------

-- nn.Parameter(t): a leaf that requires grad with t's values (a float tensor).
function nn.Parameter(t, requires_grad)
  if not tide.is_tensor(t) then
    error("Parameter: expected a tensor, got " .. type(t), 2)
  end
  if not t:is_floating_point() then
    error("Parameter: only floating-point tensors can be parameters, got " .. t.dtype, 2)
  end
  if not t.is_leaf or t.requires_grad then
    t = t:detach()
  end
  if requires_grad ~= false then
    t:requires_grad_(true)
  end
  return t
end

-- ---- Module ----------------------------------------------------------------------------------

local Module = {}
Module.__index = Module
Module.__name = "Module"
nn.Module = Module

-- Errors raised inside tide's own Lua files are re-raised at the user's line: "model.lua:12:
-- linear: the input [3, 5] ..." rather than a position inside tide/nn.lua. Other errors (from a
-- user's own forward or __init) pass through unchanged.
-- The message to raise again at the caller's line, or nil for an error to pass on as it is
-- (a user's own error that already carries its position, or a non-string error value).
local function internal(err)
  if type(err) ~= "string" then
    return nil
  end
  local stripped, n = err:gsub("^tide/[%w_/]+%.lua:%d+: ", "", 1)
  if n > 0 then
    return stripped
  end
  if not err:find("^[^\n]-:%d+: ") then
    return err -- raised without a position (checks whose level pointed at pcall)
  end
  return nil
end

local pack, unpack = table.pack, table.unpack

local function instance_call(self, ...)
  local r = pack(pcall(self.forward, self, ...))
  if r[1] then
    return unpack(r, 2, r.n)
  end
  local msg = internal(r[2])
  if msg then
    error(msg, 2)
  end
  error(r[2], 0)
end

local function instance_tostring(self)
  return self:__repr()
end

-- Metamethods are not inherited through __index: every class gets its own copies.
local function setup_class(cls, name, super)
  cls.__index = cls
  cls.__name = name
  cls.__call = instance_call
  cls.__tostring = instance_tostring
  cls.super = super
  return setmetatable(cls, {
    __index = super,
    __call = function(c, ...)
      local self = setmetatable({}, c)
      local ok, err = pcall(self.__init, self, ...)
      if not ok then
        local msg = internal(err)
        if msg then
          error(msg, 2)
        end
        error(err, 0)
      end
      return self
    end,
    __tostring = function() return "nn." .. name end,
  })
end

-- local Net = nn.Module:extend("Net")
function Module:extend(name)
  if type(name) ~= "string" then
    error("Module:extend: expected a class name", 2)
  end
  return setup_class({}, name, self)
end
setup_class(Module, "Module", nil)

function Module:__init()
  rawset(self, "_param_names", {})
  rawset(self, "_buffer_names", {})
  rawset(self, "_persistent", {})
  rawset(self, "_module_names", {})
  rawset(self, "training", true)
end

function Module:forward()
  error(self.__name .. ": forward is not defined", 2)
end

local function field_key(name)
  return math.tointeger(tonumber(name)) or name
end

local function check_init(self, what)
  if rawget(self, "_param_names") == nil then
    error(("%s: %s before nn.Module.__init(self) was called"):format(self.__name, what), 3)
  end
end

local function list_add(list, name)
  for _, n in ipairs(list) do
    if n == name then
      return
    end
  end
  list[#list + 1] = name
end

function Module:register_parameter(name, t)
  check_init(self, "register_parameter")
  if t ~= nil and not tide.is_tensor(t) then
    error(("register_parameter: '%s' must be a tensor or nil"):format(name), 2)
  end
  list_add(self._param_names, name)
  self[field_key(name)] = t
  return t
end

function Module:register_buffer(name, t, persistent)
  check_init(self, "register_buffer")
  list_add(self._buffer_names, name)
  self._persistent[name] = persistent ~= false
  self[field_key(name)] = t
  return t
end

function Module:add_module(name, m)
  check_init(self, "add_module")
  name = tostring(name)
  if m ~= nil and getmetatable(m) == nil or (m ~= nil and m.forward == nil) then
    error(("add_module: '%s' must be a module"):format(name), 2)
  end
  list_add(self._module_names, name)
  self[field_key(name)] = m
  return m
end
Module.register_module = Module.add_module

-- Children in registration order: an iterator of (name, module).
function Module:named_children()
  local names, i = self._module_names, 0
  return function()
    while true do
      i = i + 1
      local name = names[i]
      if name == nil then
        return nil
      end
      local m = self[field_key(name)]
      if m ~= nil then
        return name, m
      end
    end
  end
end

function Module:children()
  local out = {}
  for _, m in self:named_children() do
    out[#out + 1] = m
  end
  return out
end

-- Every module below (self first, named ""), as a list of {name, module}. rename (optional)
-- maps each child's name to the one used in the paths (pytorch_child_name).
local function collect_modules(self, prefix, out, seen, rename)
  if seen[self] then
    return out
  end
  seen[self] = true
  out[#out + 1] = { prefix, self }
  for name, m in self:named_children() do
    name = rename and rename(name) or name
    collect_modules(m, prefix == "" and name or (prefix .. "." .. name), out, seen, rename)
  end
  return out
end

-- PyTorch's name for a child: Sequential and ModuleList children, "1", "2", ... in tide, are
-- "0", "1", ... in PyTorch; every other name is the same.
local function pytorch_child_name(name)
  local i = name:match("^[1-9]%d*$") and math.tointeger(tonumber(name))
  return i and tostring(i - 1) or name
end

local function iter_pairs(list)
  local i = 0
  return function()
    i = i + 1
    local e = list[i]
    if e then
      return e[1], e[2]
    end
  end
end

function Module:named_modules()
  return iter_pairs(collect_modules(self, "", {}, {}))
end

function Module:modules()
  local out = {}
  for _, m in self:named_modules() do
    out[#out + 1] = m
  end
  return out
end

local function collect_tensors(self, names_field, filter, rename)
  local out, seen = {}, {}
  for _, e in ipairs(collect_modules(self, "", {}, {}, rename)) do
    local prefix, m = e[1], e[2]
    for _, name in ipairs(m[names_field]) do
      local t = m[field_key(name)]
      if t ~= nil and not seen[t] and (not filter or filter(m, name)) then
        seen[t] = true
        out[#out + 1] = { prefix == "" and name or (prefix .. "." .. name), t }
      end
    end
  end
  return out
end

-- for name, p in model:named_parameters() do ... end (each tensor once, in registration order)
function Module:named_parameters()
  return iter_pairs(collect_tensors(self, "_param_names"))
end

-- A list of the parameters (what optimizers take).
function Module:parameters()
  local out = {}
  for _, e in ipairs(collect_tensors(self, "_param_names")) do
    out[#out + 1] = e[2]
  end
  return out
end

function Module:named_buffers()
  return iter_pairs(collect_tensors(self, "_buffer_names"))
end

function Module:buffers()
  local out = {}
  for _, e in ipairs(collect_tensors(self, "_buffer_names")) do
    out[#out + 1] = e[2]
  end
  return out
end

-- The number of parameter elements.
function Module:num_parameters()
  local n = 0
  for _, p in ipairs(self:parameters()) do
    n = n + p:numel()
  end
  return n
end

function Module:apply(fn)
  for _, m in ipairs(self:children()) do
    m:apply(fn)
  end
  fn(self)
  return self
end

function Module:train(mode)
  if mode == nil then
    mode = true
  end
  for _, m in ipairs(self:modules()) do
    rawset(m, "training", mode)
  end
  return self
end

function Module:eval()
  return self:train(false)
end

-- Clears every parameter's gradient (set_to_none, PyTorch's default; false: zeros it).
function Module:zero_grad(set_to_none)
  for _, p in ipairs(self:parameters()) do
    if set_to_none == false then
      local g = p.grad
      if g then
        no_grad(function() g:zero_() end)
        p.grad = g
      end
    else
      p.grad = nil
    end
  end
end

-- ---- state dicts ---------------------------------------------------------------------------

-- The naming an options table asks for under key ("to" or "from"): nil for tide's own names,
-- pytorch_child_name for PyTorch's.
local function naming(opts, key, fname)
  if opts == nil then
    return nil
  end
  if type(opts) ~= "table" then
    error(("%s: expected an options table like {%s = \"pytorch\"}, got a %s"):format(
      fname, key, type(opts)), 3)
  end
  for k in pairs(opts) do
    if k ~= key and not (key == "from" and k == "strict") then
      error(("%s: unknown option '%s'"):format(fname, tostring(k)), 3)
    end
  end
  local v = opts[key]
  if v == nil or v == "tide" then
    return nil
  elseif v == "pytorch" then
    return pytorch_child_name
  end
  error(("%s: %s must be \"pytorch\" or \"tide\", got %s"):format(fname, key, tostring(v)), 3)
end

local function is_persistent(m, name)
  return m._persistent[name]
end

-- The parameters, then the persistent buffers, as a list of {name, tensor, tide_name}: name
-- as rename gives it, tide_name tide's own (the same traversal, so the lists line up).
local function state_entries(self, rename)
  local out = {}
  for _, spec in ipairs({ { "_param_names" }, { "_buffer_names", is_persistent } }) do
    local named = collect_tensors(self, spec[1], spec[2], rename)
    local plain = rename and collect_tensors(self, spec[1], spec[2]) or named
    for i, e in ipairs(named) do
      out[#out + 1] = { e[1], e[2], plain[i][1] }
    end
  end
  return out
end

-- {["name"] = tensor} of parameters and persistent buffers (the module's own tensors, sharing
-- memory, as PyTorch's state_dict gives detached references). {to = "pytorch"}: PyTorch's
-- names, Sequential and ModuleList children counted from 0 ("0.weight" for tide's "1.weight").
function Module:state_dict(opts)
  local sd = {}
  for _, e in ipairs(state_entries(self, naming(opts, "to", "state_dict"))) do
    sd[e[1]] = e[2]
  end
  return sd
end

-- The keys of the module's state missing from sd, and sd's keys the module does not have
-- (both sorted); a non-tensor value under a known key is an error.
local function key_diff(entries, sd)
  local own, missing, unexpected = {}, {}, {}
  for _, e in ipairs(entries) do
    own[e[1]] = true
    if sd[e[1]] == nil then
      missing[#missing + 1] = e[1]
    end
  end
  for name, v in pairs(sd) do
    if not own[name] then
      unexpected[#unexpected + 1] = tostring(name)
    elseif not tide.is_tensor(v) then
      error(("load_state_dict: '%s' must be a tensor, got %s"):format(name, type(v)), 3)
    end
  end
  table.sort(missing)
  table.sort(unexpected)
  return missing, unexpected
end

-- Whether sd's keys are exactly the module's state under the naming rename.
local function keys_match(self, sd, rename)
  local n = 0
  for _, e in ipairs(state_entries(self, rename)) do
    if sd[e[1]] == nil then
      return false
    end
    n = n + 1
  end
  for _ in pairs(sd) do
    n = n - 1
  end
  return n == 0
end

local function mismatch_message(self, sd, missing, unexpected, rename)
  local parts = {}
  if #missing > 0 then
    parts[#parts + 1] = "missing keys: " .. table.concat(missing, ", ")
  end
  if #unexpected > 0 then
    parts[#parts + 1] = "unexpected keys: " .. table.concat(unexpected, ", ")
  end
  local msg = (rename and "load_state_dict (from = \"pytorch\"): " or "load_state_dict: ") ..
    table.concat(parts, "; ")
  if not rename and keys_match(self, sd, pytorch_child_name) then
    msg = msg .. " (these are PyTorch's names, Sequential and ModuleList children counted " ..
      "from 0: pass {from = \"pytorch\"})"
  elseif rename and keys_match(self, sd, nil) then
    msg = msg .. " (these are tide's own names, counted from 1: leave out from = \"pytorch\")"
  end
  return msg
end

-- Copies the checkpoint's tensor src into the module's tensor of entry e (after a shape check).
local function copy_entry(e, src)
  local name, dst, tide_name = e[1], e[2], e[3]
  local a, b = dst:size(), src:size()
  local same = #a == #b
  for i = 1, #a do
    same = same and a[i] == b[i]
  end
  if not same then
    local own = tide_name ~= name and (" (the module's '%s')"):format(tide_name) or ""
    error(("load_state_dict: size mismatch for '%s'%s: the checkpoint has {%s}, the module {%s}")
      :format(name, own, table.concat(b, ", "), table.concat(a, ", ")), 3)
  end
  no_grad(function() dst:copy_(src) end)
end

-- Copies values from a flat {name = tensor} table (a state_dict, or what tide.load returns)
-- into the parameters and buffers; values are converted to each tensor's dtype (PyTorch's
-- int64 num_batches_tracked included). The second argument is strict (a boolean) or
-- {strict = true, from = "pytorch"}: strict (default true) makes missing or unexpected keys
-- an error; from = "pytorch" reads PyTorch's names (children of Sequential and ModuleList
-- counted from 0). The metadata table tide.load returns second is ignored there, so
-- m:load_state_dict(tide.load(path)) works. Returns the lists of missing and unexpected keys.
function Module:load_state_dict(sd, opts)
  if type(sd) ~= "table" then
    error("load_state_dict: expected a table of tensors, got " .. type(sd), 2)
  end
  local strict, rename = true, nil
  local mt = getmetatable(opts)
  if mt and mt.__name == "tide.metadata" then -- load_state_dict(tide.load(path)): not options
    opts = nil
  end
  if type(opts) == "boolean" then
    strict = opts
  elseif opts ~= nil then
    rename = naming(opts, "from", "load_state_dict")
    strict = opts.strict ~= false
  end
  local entries = state_entries(self, rename)
  local missing, unexpected = key_diff(entries, sd)
  if strict and (#missing > 0 or #unexpected > 0) then
    error(mismatch_message(self, sd, missing, unexpected, rename), 2)
  end
  for _, e in ipairs(entries) do
    if sd[e[1]] ~= nil then
      copy_entry(e, sd[e[1]])
    end
  end
  return missing, unexpected
end

-- tide's dtype names and aliases (a string naming none of them is a device)
local DTYPE_NAMES = { float32 = true, float64 = true, int32 = true, int64 = true, uint8 = true,
                      bool = true, float = true, double = true, int = true, long = true,
                      byte = true, float16 = true, half = true, bfloat16 = true }

-- m:to(dtype) converts floating-point parameters and buffers to a dtype; m:to(device) ("cpu",
-- "vulkan" ...) moves every parameter and buffer there; m:to({dtype=, device=}) does both.
-- Parameters stay leaves that require grad (new tensors: build the optimizer afterwards).
function Module:to(arg)
  local dtype, device
  if type(arg) == "table" then
    dtype, device = arg.dtype, arg.device
  elseif type(arg) == "string" and DTYPE_NAMES[arg] then
    dtype = arg
  elseif type(arg) == "string" then
    device = arg
  else
    error("Module:to: expected a dtype name, a device name or {dtype=, device=}", 2)
  end
  local function convert(t, is_param)
    local out = t
    if dtype and t:is_floating_point() and t.dtype ~= tide[dtype] then
      out = (is_param and out:detach() or out):to(dtype)
    end
    if device and out.device ~= device then
      out = (is_param and out:detach() or out):to(device)
    end
    if is_param and out ~= t and t.requires_grad then
      out:requires_grad_(true)
    end
    return out
  end
  for _, m in ipairs(self:modules()) do
    for _, name in ipairs(m._param_names) do
      local k = field_key(name)
      if m[k] ~= nil then m[k] = convert(m[k], true) end
    end
    for _, name in ipairs(m._buffer_names) do
      local k = field_key(name)
      if m[k] ~= nil then m[k] = convert(m[k], false) end
    end
  end
  return self
end

function Module:double()
  return self:to("float64")
end

function Module:float()
  return self:to("float32")
end

function Module:half()
  return self:to("float16")
end

function Module:bfloat16()
  return self:to("bfloat16")
end

function Module:requires_grad_(on)
  for _, p in ipairs(self:parameters()) do
    p:requires_grad_(on ~= false)
  end
  return self
end

function Module:extra_repr()
  return ""
end

function Module:__repr()
  local lines = {}
  for name, m in self:named_children() do
    local s = tostring(m):gsub("\n", "\n  ")
    lines[#lines + 1] = "  (" .. name .. "): " .. s
  end
  local head = self.__name .. "(" .. self:extra_repr()
  if #lines == 0 then
    return head .. ")"
  end
  return head .. "\n" .. table.concat(lines, "\n") .. "\n)"
end

-- ---- helpers -----------------------------------------------------------------------------------

local function check_opts(opts, name, allowed)
  if opts == nil then
    return {}
  end
  if type(opts) ~= "table" then
    error(("%s: options must be a table, got %s"):format(name, type(opts)), 3)
  end
  for k in pairs(opts) do
    if not allowed[k] then
      error(("%s: unknown option '%s'"):format(name, tostring(k)), 3)
    end
  end
  return opts
end

local function check_int(v, name, what)
  if math.type(v) ~= "integer" and not (type(v) == "number" and v == math.floor(v)) then
    error(("%s: %s must be an integer, got %s"):format(name, what, tostring(v)), 3)
  end
  if v < 1 then
    error(("%s: %s must be positive, got %d"):format(name, what, v), 3)
  end
  return math.tointeger(v)
end

local function pair(v)
  if type(v) == "table" then
    return v[1], v[2]
  end
  return v, v
end

local function fmt_pair(v)
  if type(v) == "table" then
    return "(" .. v[1] .. ", " .. v[2] .. ")"
  end
  return tostring(v)
end

local function dtype_of(opts)
  return { dtype = opts.dtype or "float32" }
end

-- ---- layers ------------------------------------------------------------------------------------

-- Linear, Conv2d, norms, Dropout, Embedding, activations, losses, containers: tide/nn/layers.lua
require("tide.nn.layers").install(nn, { check_opts = check_opts, check_int = check_int, pair = pair,
                                        fmt_pair = fmt_pair, dtype_of = dtype_of })

-- attention layers: lua/tide/nn/attention.lua
require("tide.nn.activation").install(nn, { check_opts = check_opts })
require("tide.nn.attention").install(nn, { check_opts = check_opts, check_int = check_int,
                                           dtype_of = dtype_of })

-- recurrent layers: lua/tide/nn/rnn.lua
require("tide.nn.rnn").install(nn, { check_opts = check_opts, check_int = check_int,
                                     dtype_of = dtype_of })

-- GroupNorm, InstanceNorm, Upsample, pads, the new losses, ...: lua/tide/nn/layers_spatial.lua
require("tide.nn.layers_spatial").install(nn, { check_opts = check_opts, check_int = check_int,
                                                dtype_of = dtype_of })

-- the convolution family beyond conv2d: lua/tide/nn/conv.lua (functions), conv_modules.lua
require("tide.nn.conv").install_functional(F)
require("tide.nn.conv_modules").install(nn, { check_opts = check_opts, check_int = check_int,
                                              dtype_of = dtype_of })

-- nn.parallel.DistributedDataParallel (tide/nn/parallel.lua, on tide.distributed)
require("tide.nn.parallel").install(nn)

-- nn.QuantizedLinear lives in tide/quant.lua (which requires this module: registered first)
package.loaded["tide.nn"] = nn
require "tide.quant"

return nn
