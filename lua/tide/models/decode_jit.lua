-- decode_jit.lua — the compiled one-token decoding step that gpt.lua and llama.lua share. A model
-- provides model:_decode_views(cache, len) (the views of its cache that one position at
-- len + 1 writes and reads, and which of them grow with the length), model:_step_views(idx,
-- pos, views) (that position's logits; pos = len + 1 also as an int64 [1] tensor) and
-- model:decode_step for what runs eagerly.
--
-- The step is captured once per cache with tide.capture, its views as arguments (the growing
-- ones with a dynamic dim) and pos a tensor, so nothing in it depends on the length: every later
-- token replays the graph without running the Lua function again. Re-tracing the step cost
-- ~1.4 ms a token on a 12-layer model (bench/RESULTS.md, 2026-11-27); a replay costs the
-- views and one call. A capture that fails (an op the capture cannot follow on the device)
-- falls back, for that cache, to tracing the step under tide.jit at every token, which is
-- always right: the first length compiles a static plan, the second a symbolic one.
local tide = require "tide"

local decode_jit = {}

-- The model's counters ({captures, compiles, hits, fallbacks}) and its tide.jit function,
-- made on first use.
local function counters(model)
  local c = rawget(model, "_decode_counts")
  if not c then
    c = { captures = 0, compiles = 0, hits = 0, fallbacks = 0 }
    rawset(model, "_decode_counts", c)
  end
  return c
end

local function step_fn(model)
  if not rawget(model, "_decode_jit") then
    rawset(model, "_decode_jit", tide.jit(function(idx, pos)
      local cache = rawget(model, "_jit_cache")
      return tide.no_grad(function() return model:_step_at(idx, cache, pos, cache.len) end)
    end))
  end
  return rawget(model, "_decode_jit")
end

-- The views of a cache ({k, v} per layer, [B, heads, seq_len, D]) that one position at len + 1
-- writes and reads, four per layer in layer order: the key's and value's slots, then the keys
-- and values it attends to: the used part 1..len+1 when used_part (its dim 3 grows with the
-- length: listed in growing as {view, dim}), else the whole cache.
function decode_jit.cache_views(cache, n_layers, len, used_part)
  local views, growing = {}, {}
  for i = 1, n_layers do
    local k, v, n = cache[i].k, cache[i].v, #views
    views[n + 1], views[n + 2] = k:narrow(3, len + 1, 1), v:narrow(3, len + 1, 1)
    if used_part then
      views[n + 3], views[n + 4] = k:narrow(3, 1, len + 1), v:narrow(3, 1, len + 1)
      growing[#growing + 1] = { n + 3, 3 }
      growing[#growing + 1] = { n + 4, 3 }
    else
      views[n + 3], views[n + 4] = k, v
    end
  end
  return views, growing
end

-- Whether a decode_step_jit call runs eagerly instead: anything but a one-token idx [B, 1], and
-- positions 1 and 2 (a dynamic dim is captured at a size of at least 2: the used part of the
-- cache at position 2 is the first that can serve).
function decode_jit.runs_eagerly(idx, cache, pos)
  local len = type(cache) == "table" and math.type(cache.len) == "integer"
    and (math.type(pos) == "integer" and pos - 1 or cache.len)
  return not tide.is_tensor(idx) or idx:dim() ~= 2 or idx:size(2) ~= 1 or (len and len < 2)
end

-- The step traced under tide.jit (the fallback).
local function traced(model, idx, cache, at)
  rawset(model, "_jit_cache", cache)
  local ok, logits = pcall(step_fn(model), idx, at)
  rawset(model, "_jit_cache", nil)
  if not ok then error(logits, 0) end
  return logits
end

-- Captures the step on this call's arguments (the capture runs it once): its logits, and the
-- graph kept in the cache (false when the capture failed: the cache's steps are traced).
local function capture(model, args, growing, c)
  local dynamic = {}
  for _, g in ipairs(growing) do -- view g[1] is argument g[1] + 2 (after idx and pos)
    local list = dynamic[g[1] + 2] or {}
    list[#list + 1] = g[2]
    dynamic[g[1] + 2] = list
  end
  local before = tide.jit_stats().compiles
  local ok, graph, logits = pcall(tide.capture, function(idx, pos, ...)
    return model:_step_views(idx, pos, { ... })
  end, args, { dynamic = dynamic })
  c.compiles = c.compiles + tide.jit_stats().compiles - before
  if not ok then
    c.capture_error = graph
    return nil, false
  end
  c.captures = c.captures + 1
  return logits, graph
end

-- The logits of the step for idx at cache.len + 1 (arguments already checked, cache.len
-- already rewound); the cache grows by one.
function decode_jit.run(model, idx, cache)
  local c = counters(model)
  local at = tide.tensor({ cache.len + 1 }, { dtype = "int64", device = idx.device })
  local graph, logits = rawget(cache, "_graph"), nil
  if graph ~= false then
    local views, growing = model:_decode_views(cache, cache.len)
    local args = { idx, at, table.unpack(views) }
    if graph then -- refused only when the views changed layout: the last position's used
      local ok, y = pcall(graph, table.unpack(args)) -- part is the whole cache, contiguous
      if ok then
        logits, c.hits = y, c.hits + 1
      end
    else
      logits, graph = capture(model, args, growing, c)
      rawset(cache, "_graph", graph)
    end
  end
  if not logits then
    logits = traced(model, idx, cache, at)
    c.fallbacks = c.fallbacks + 1
  end
  cache.len = cache.len + 1
  return logits
end

-- The step's statistics: {captures, compiles, hits (replays), fallbacks (traced steps),
-- capture_error (why the latest failed capture failed)}, and the traced steps' tide.jit
-- statistics as jit; nil before the first step.
function decode_jit.stats(model)
  local c = rawget(model, "_decode_counts")
  if not c then return nil end
  local f = rawget(model, "_decode_jit")
  return { captures = c.captures, compiles = c.compiles, hits = c.hits,
           fallbacks = c.fallbacks, capture_error = c.capture_error, jit = f and f:stats() }
end

return decode_jit
