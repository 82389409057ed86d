-- tide.models.sampling — choosing the next token from logits, shared by the language models
-- (gpt.lua, llama.lua): greedy, temperature, top-k and top-p (nucleus) sampling.
--
--   local sampling = require "tide.models.sampling"
--   local tok = sampling.next_tokens(logits, {temperature = 0.8, top_k = 40, top_p = 0.9})
--
-- logits [B, V] -> int64 [B, 1], 1-based ids. temperature 0 is argmax (greedy).
local tide = require "tide"

local sampling = {}

-- Draws one token per row of probs [B, V]: tide.multinomial when tide has it, else the first
-- index whose cumulative probability exceeds u * total, u uniform in [0, 1). Scaling by the
-- row's own total (the last cumsum) rather than 1 means rounding in the sum can never push the
-- draw past the end, and "exceeds" (not "reaches") skips zero-probability tokens, whose
-- cumulative value equals their predecessor's. Returns int64 [B, 1], 1-based.
function sampling.sample(probs)
  if tide.multinomial then
    return tide.multinomial(probs, 1)
  end
  local B, V = probs:size(1), probs:size(2)
  local cs = probs:cumsum(2)
  local u = tide.rand(B, 1, { dtype = probs.dtype, device = probs.device }) * cs:narrow(2, V, 1)
  local passed = cs:le(u):to("int64"):sum(2, true)
  return (passed + 1):clamp(1, V)
end

-- Top-p (nucleus) sampling from probs [B, V]: the most likely tokens whose probabilities
-- reach p together (the smallest such set; the most likely token always stays), renormalized
-- by the draw. The sort is topk over the whole row.
local function sample_top_p(probs, p)
  local V = probs:size(2)
  local sorted, order = probs:topk(V, 2)
  -- a token stays when the mass before it is still below p
  local before = sorted:cumsum(2) - sorted
  local kept = sorted:masked_fill(before:ge(p), 0)
  return tide.gather(order, 2, sampling.sample(kept))
end

-- The next tokens [B, 1] from logits [B, V] under o = {temperature, top_k, top_p}
-- (temperature 0: argmax; top_k nil or V: no cut; top_p nil or 1: no cut).
function sampling.next_tokens(logits, o)
  if o.temperature == 0 then
    return logits:argmax(2, true)
  end
  logits = logits / o.temperature
  if o.top_k and o.top_k < logits:size(2) then
    local kth = logits:topk(o.top_k, 2):narrow(2, o.top_k, 1)
    logits = logits:masked_fill(logits:lt(kth), -math.huge)
  end
  local probs = tide.softmax(logits, 2)
  if o.top_p and o.top_p < 1 then
    return sample_top_p(probs, o.top_p)
  end
  return sampling.sample(probs)
end

-- Checks the sampling fields of a generate options table (what: "Llama:generate"; V: the
-- vocabulary size); level: the error level of the caller's caller.
function sampling.check(o, what, V, level)
  if type(o.temperature) ~= "number" or o.temperature < 0 or o.temperature ~= o.temperature then
    error(what .. ": temperature must be a number >= 0, got " .. tostring(o.temperature), level)
  end
  if o.top_k ~= nil and (math.type(o.top_k) ~= "integer" or o.top_k < 1 or o.top_k > V) then
    error(("%s: top_k must be an integer in 1..%d, got %s"):format(what, V, tostring(o.top_k)),
      level)
  end
  if o.top_p ~= nil and (type(o.top_p) ~= "number" or not (o.top_p > 0 and o.top_p <= 1)) then
    error(what .. ": top_p must be a number in (0, 1], got " .. tostring(o.top_p), level)
  end
  if o.seed ~= nil and math.type(o.seed) ~= "integer" then
    error(what .. ": seed must be an integer, got " .. tostring(o.seed), level)
  end
  if o.on_token ~= nil and type(o.on_token) ~= "function" then
    error(what .. ": on_token must be a function, got " .. type(o.on_token), level)
  end
end

-- The options of a model's generate (what: "GPT:generate"; allowed: the option names it takes),
-- checked, with the defaults filled in (temperature 1, jit true). Errors name what at the
-- caller's caller (level 3 from the model's check).
-- opts (nil for none) as a table whose keys are all in allowed; else an error naming what, at
-- the caller of the function that called this one (its user).
function sampling.check_keys(opts, what, allowed)
  local o = opts or {}
  if type(o) ~= "table" then
    error(what .. ": options must be a table, got " .. type(o), 4)
  end
  for k in pairs(o) do
    if not allowed[k] then
      error(("%s: unknown option '%s'"):format(what, tostring(k)), 4)
    end
  end
  return o
end

function sampling.generate_opts(opts, V, what, allowed)
  local o = sampling.check_keys(opts, what, allowed)
  local r = { temperature = o.temperature or 1.0, top_k = o.top_k, top_p = o.top_p,
              seed = o.seed, on_token = o.on_token, jit = o.jit }
  if r.jit == nil then r.jit = true end
  if type(r.jit) ~= "boolean" then
    error(what .. ": jit must be a boolean, got " .. tostring(r.jit), 3)
  end
  sampling.check(r, what, V, 4)
  return r
end

return sampling
