-- decode_jit.lua — the jitted one-token decoding step that gpt.lua and llama.lua share. A model
-- provides model:_step_at(idx, cache, pos, len) (one position against a full-size cache holding
-- len positions; pos = len + 1 also as an int64 [1] tensor) and model:decode_step for what runs
-- eagerly. Every length is the same trace but for the cache write's view offset (and, where a
-- model attends to the used part of its cache only, as llama.lua does, that view's length; the
-- position's value, a tensor's, never enters the jit's key): the first length compiles a static
-- plan, the second a symbolic one that serves every later length. The cache is not an argument
-- (tide.jit takes tensors): run() sets it for the call.
local tide = require "tide"

local decode_jit = {}

-- The model's jitted step, made on first use.
local function step_fn(model)
  if not rawget(model, "_decode_jit") then
    rawset(model, "_decode_jit", tide.jit(function(idx, pos)
      local cache = rawget(model, "_jit_cache")
      return tide.no_grad(function() return model:_step_at(idx, cache, pos, cache.len) end)
    end))
  end
  return rawget(model, "_decode_jit")
end

-- Whether a decode_step_jit call runs eagerly instead: anything but a one-token idx [B, 1], and
-- positions 1 and 2, whose view offsets of 0 and 1 the jit keeps static (a plan each).
function decode_jit.runs_eagerly(idx, cache, pos)
  local len = type(cache) == "table" and math.type(cache.len) == "integer"
    and (math.type(pos) == "integer" and pos - 1 or cache.len)
  return not tide.is_tensor(idx) or idx:dim() ~= 2 or idx:size(2) ~= 1 or (len and len < 2)
end

-- The logits of the jitted step for idx at cache.len + 1 (arguments already checked, cache.len
-- already rewound); the cache grows by one.
function decode_jit.run(model, idx, cache)
  local at = tide.tensor({ cache.len + 1 }, { dtype = "int64", device = idx.device })
  rawset(model, "_jit_cache", cache)
  local ok, logits = pcall(step_fn(model), idx, at)
  rawset(model, "_jit_cache", nil)
  if not ok then error(logits, 0) end
  cache.len = cache.len + 1
  return logits
end

-- The jitted step's tide.jit statistics, or nil before its first use.
function decode_jit.stats(model)
  local f = rawget(model, "_decode_jit")
  return f and f:stats()
end

return decode_jit
