-- tide.models.llama_fused — weights one product reads together: a Llama block's wq, wk and wv
-- (and w1 and w3) as the row blocks of one tensor, so a token makes one product where it made
-- three (two). Each weight stays registered under its own name as a view of its rows, so
-- state_dict, load_state_dict (which copies in place), llama.save and the loaders see the same
-- names, values and shapes. A replaced weight (Module:to, the quantizer, the HF loader's
-- quantized tensors) breaks the link: the model then reads the weights one by one until
-- Llama:_fuse_weights fuses them again (Llama:to, the quantizer and the HF loader do). Under autograd the products read the weights one by one, so
-- gradients reach each parameter.
local tide = require "tide"
local nn = require "tide.nn"

local fused = {}

-- Whether the weights parts (of m, named names) can be stacked: one dtype, device, width and
-- quantized format (m._qformats), every one a 2-D tensor.
local function stackable(m, names, parts)
  local q = m._qformats or {}
  local f1 = q[names[1]]
  for i, p in ipairs(parts) do
    local f = q[names[i]]
    if not tide.is_tensor(p) or p:dim() ~= 2 or p.dtype ~= parts[1].dtype
        or p.device ~= parts[1].device or p:size(2) ~= parts[1]:size(2)
        or (f and f.format) ~= (f1 and f1.format) or (f and f.K) ~= (f1 and f1.K) then
      return false
    end
  end
  return true
end

-- Makes module m's weights names views of one tensor (their rows stacked in order), recorded in
-- m._fused[key]; does nothing when they cannot be stacked.
function fused.fuse(m, key, names)
  local parts = {}
  for i, n in ipairs(names) do parts[i] = m[n] end
  rawset(m, "_fused", rawget(m, "_fused") or {})
  m._fused[key] = nil
  if not stackable(m, names, parts) then return end
  local whole = tide.no_grad(function()
    local detached = {}
    for i, p in ipairs(parts) do detached[i] = p:detach() end
    return tide.cat(detached, 1)
  end)
  local views, row = {}, 1
  for i, n in ipairs(names) do
    local v = whole:narrow(1, row, parts[i]:size(1))
    if parts[i].requires_grad then v = nn.Parameter(v) end
    row = row + parts[i]:size(1)
    m[n], views[i] = v, v
  end
  local f = m._qformats and m._qformats[names[1]]
  m._fused[key] = { names = names, views = views, whole = whole, format = f and f.format }
end

-- m._fused[key]'s tensor and quantized format (nil for a float weight) while its views are
-- still m's weights and no gradient is recorded; else nil.
function fused.get(m, key)
  local all = rawget(m, "_fused")
  local f = all and all[key]
  if not f or (tide.is_grad_enabled() and f.views[1].requires_grad) then return nil end
  for i, n in ipairs(f.names) do
    if not rawequal(m[n], f.views[i]) then return nil end
  end
  return f.whole, f.format
end

return fused
