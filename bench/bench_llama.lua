-- bench_llama.lua — batch-1 Llama generation (tide.models.llama, greedy, each step under
-- tide.jit) on two random-weight shapes, against the bandwidth floor: the bytes a token reads
-- (every weight once, the embedding's one row unless it is the tied classifier, and the used
-- part of the KV cache) over STREAM's triad, measured in the same run on tide's threads
-- (`bench_gpt_gemms triad`). Each weight dtype is timed beside float32 (ratios against it), and
-- llama2.c's run.c beside tide when LLAMA2C_RUN names its binary (built by hand, outside the
-- repository: gcc -Ofast -fopenmp -march=native run.c -lm -o run), run with OMP_NUM_THREADS =
-- tide's threads on the same checkpoint.
--
--   build/lua/tide bench/bench_llama.lua [--dtype float32,bfloat16,float16,q8_0,q4_0]
--       [--shape stories15M,stories110M] [--slices N] [--steps N] [build dir]
--
-- steps: tokens generated after BOS (default 255 on stories15M, its whole context as run.c's
-- default; 128 on stories110M, to keep the run short).
--
-- Contenders alternate in slices (each slice: every dtype, llama2.c, the triad); figures are
-- medians over the slices, ratios medians of the slices' ratios. Tokens/s counts as llama2.c
-- does: from the first generated token to the last, (n - 1) / time, after a warm-up generation
-- (plans compiled, pages touched). The checkpoint is written in llama2.c's format (random
-- weights, N(0, 1/fan_in); the tied classifier's BOS row is zero so that greedy decoding never
-- picks BOS, where run.c stops) and each dtype loads it with llama.load.
local tide = require "tide"
local llama = require "tide.models.llama"

local SHAPES = {
  stories15M = { dim = 288, hidden_dim = 768, n_layers = 6, n_heads = 6, n_kv_heads = 6,
                 vocab_size = 32000, seq_len = 256, steps = 255 },
  stories110M = { dim = 768, hidden_dim = 2048, n_layers = 12, n_heads = 12, n_kv_heads = 12,
                  vocab_size = 32000, seq_len = 1024, steps = 128 },
}
local SHAPE_ORDER = { "stories15M", "stories110M" }
local HALF = { float32 = true, bfloat16 = true, float16 = true }
local QUANT = { q8_0 = 34 / 32, q4_0 = 18 / 32 } -- bytes per weight (32 values + a float16 scale)

local function split(s)
  local list = {}
  for w in s:gmatch("[^,]+") do list[#list + 1] = w end
  return list
end

local function parse_args(a)
  local o = { dtypes = split("float32,bfloat16,float16,q8_0,q4_0"), shapes = SHAPE_ORDER,
              slices = 3 }
  local i = 1
  while a[i] do
    local k, v = a[i], a[i + 1]
    if k == "--dtype" and v then o.dtypes = split(v); i = i + 2
    elseif k == "--shape" and v then o.shapes = split(v); i = i + 2
    elseif k == "--slices" and v then o.slices = math.tointeger(tonumber(v)); i = i + 2
    elseif k == "--steps" and v then o.steps = math.tointeger(tonumber(v)); i = i + 2
    elseif k:sub(1, 2) ~= "--" and not o.build then o.build = k; i = i + 1
    else error("bench_llama: unknown or incomplete argument " .. k, 0) end
  end
  for _, s in ipairs(o.shapes) do
    if not SHAPES[s] then error("bench_llama: unknown shape " .. s, 0) end
  end
  for _, d in ipairs(o.dtypes) do
    if not HALF[d] and not QUANT[d] then error("bench_llama: unknown dtype " .. d, 0) end
  end
  if o.dtypes[1] ~= "float32" then table.insert(o.dtypes, 1, "float32") end
  assert(o.slices and o.slices >= 1, "bench_llama: --slices must be a positive integer")
  return o
end

local opts = parse_args(arg or {})
local here = (arg and arg[0] or ""):match("^(.*)/[^/]*$") or "."
local build = opts.build or (here .. "/../build")

local function median(v)
  local s = { table.unpack(v) }
  table.sort(s)
  return 0.5 * (s[(#s + 1) // 2] + s[#s // 2 + 1])
end

local function command_output(cmd)
  local p = assert(io.popen(cmd))
  local out = p:read("a")
  p:close()
  return out
end

-- ---- the machine --------------------------------------------------------------------------------

local function cpu_model()
  local f = io.open("/proc/cpuinfo")
  local text = f and f:read("a") or ""
  if f then f:close() end
  return text:match("model name%s*:%s*([^\n]+)") or "unknown"
end

-- STREAM triad on tide's threads, GB/s (the best of 5 inside one call of bench_gpt_gemms).
local function triad_gbs()
  local out = command_output(build .. "/bench/bench_gpt_gemms triad")
  local g = tonumber(out:match("triad_gbs: ([%d.]+)"))
  if not g then error("bench_llama: no triad from " .. build .. "/bench/bench_gpt_gemms: " .. out, 0) end
  return g
end

-- ---- the checkpoint in llama2.c's format --------------------------------------------------------

-- The raw float32 bytes of x: tide.save_npy's file without its header (NumPy format 1 or 2).
local function raw_bytes(x)
  local tmp = os.tmpname()
  tide.save_npy(tmp, x:contiguous())
  local f = assert(io.open(tmp, "rb"))
  local s = f:read("a")
  f:close()
  os.remove(tmp)
  local major = s:byte(7)
  local start = major == 1 and 10 + string.unpack("<I2", s, 9) or 12 + string.unpack("<I4", s, 9)
  return s:sub(start + 1)
end

-- Writes a tied llama2.c checkpoint of shape c with random weights to path.
local function write_llama2c(path, c)
  local L, D, H, V = c.n_layers, c.dim, c.hidden_dim, c.vocab_size
  local hs = D // c.n_heads
  local kv = c.n_kv_heads * hs
  local function mat(...)
    local shape = { ... }
    return tide.randn(shape) * (1 / math.sqrt(shape[#shape]))
  end
  local emb = tide.randn(V, D)
  emb:select(1, 2):zero_() -- BOS (llama2.c's id 1): never the argmax, run.c would stop there
  local arrays = { emb, tide.ones(L, D), mat(L, D, D), mat(L, kv, D), mat(L, kv, D), mat(L, D, D),
                   tide.ones(L, D), mat(L, H, D), mat(L, D, H), mat(L, H, D), tide.ones(D),
                   tide.zeros(c.seq_len * hs // 2), tide.zeros(c.seq_len * hs // 2) }
  local f = assert(io.open(path, "wb"))
  f:write(string.pack("<i4i4i4i4i4i4i4", D, H, L, c.n_heads, c.n_kv_heads, V, c.seq_len))
  for _, a in ipairs(arrays) do f:write(raw_bytes(a)) end
  f:close()
end

-- A tokenizer.bin for run.c (it needs one to print): <unk>, <s>, </s>, the 256 byte tokens,
-- then "w<id>" pieces, all scored 0.
local function write_tokenizer(path, V)
  local parts = { string.pack("<i4", 16) }
  local function piece(s) parts[#parts + 1] = string.pack("<fi4", 0, #s) .. s end
  piece("<unk>"); piece("<s>"); piece("</s>")
  for b = 0, 255 do piece(("<0x%02X>"):format(b)) end
  for id = 259, V - 1 do piece("w" .. id) end
  local f = assert(io.open(path, "wb"))
  f:write(table.concat(parts))
  f:close()
end

-- ---- the contenders -----------------------------------------------------------------------------

-- A model of dtype from the checkpoint, or nil and why not.
local function load_model(path, dtype)
  if HALF[dtype] then
    return llama.load(path, { dtype = dtype })
  end
  if not tide.quantize then
    return nil, "tide.quantize does not exist in this build"
  end
  local m = llama.load(path)
  local q = tide.quantize(m, dtype)
  return type(q) == "table" and q or m
end

-- Bytes of one weight tensor as stored (quantized blocks counted by their layout).
local function tensor_bytes(t)
  if QUANT[t.dtype] then return t:numel() * QUANT[t.dtype] end
  return t:numel() * t:element_size()
end

-- The bytes of weights a token reads: every tensor of the state dict once, but of an untied
-- embedding one row.
local function weight_bytes(model)
  local total = 0
  for name, t in pairs(model:state_dict()) do
    local b = tensor_bytes(t)
    if name == "tok_embeddings" and not model.config.tied then b = b / t:size(1) end
    total = total + b
  end
  return total
end

-- The mean float32 KV-cache bytes a timed token reads: keys and values of positions 1..p for
-- the steps at p = 2 .. n (the first generated token is not timed).
local function kv_bytes(c, n)
  local per_pos = c.n_layers * 2 * c.n_kv_heads * (c.dim // c.n_heads) * 4
  return per_pos * (2 + n) / 2
end

-- Tokens/s of greedy generation of n tokens after BOS: (n - 1) over the time from the first
-- token to the last.
local function tide_tokens_per_s(model, n)
  local first, last
  model:generate({ 2 }, n, { temperature = 0, on_token = function()
    last = tide.clock()
    first = first or last
  end })
  return (n - 1) / (last - first)
end

-- The same token's products alone: every weight matrix times a random activation (as llama.lua's
-- project: tide.qlinear for a quantized weight, tide.linear, or matmul widening a half weight),
-- the classifier last; seconds per token, the mean of reps. The rest of a token's time is
-- everything outside the products.
local function products_seconds(model, reps)
  local c = model.config
  local x = tide.randn(1, 1, c.dim)
  local h = tide.randn(1, 1, c.hidden_dim)
  local function project(a, m, name)
    local w, q = m[name], m._qformats and m._qformats[name]
    if q then return tide.qlinear(a, w, q.format) end
    if a.dtype == w.dtype then return tide.linear(a, w) end
    return tide.matmul(a, w:t())
  end
  local head = c.tied and "tok_embeddings" or "output"
  local t0 = tide.clock()
  for _ = 1, reps do
    for _, b in ipairs(model.layers:children()) do
      local a, f = b.attention, b.feed_forward
      project(x, a, "wq"); project(x, a, "wk"); project(x, a, "wv"); project(x, a, "wo")
      project(x, f, "w1"); project(x, f, "w3"); project(h, f, "w2")
    end
    project(x, model, head):sum():item()
  end
  return (tide.clock() - t0) / reps
end

-- run.c's own "achieved tok/s" for n tokens after BOS (-n counts BOS's position too).
local function llama2c_tokens_per_s(bin, ckpt, tok, n, threads)
  local cmd = ("OMP_NUM_THREADS=%d %s %s -z %s -t 0 -n %d 2>&1 >/dev/null"):format(threads, bin,
    ckpt, tok, n + 1)
  local out = command_output(cmd)
  local v = tonumber(out:match("achieved tok/s: ([%d.]+)"))
  if not v then error("bench_llama: no tok/s from " .. cmd .. ": " .. out, 0) end
  return v
end

-- ---- one shape ----------------------------------------------------------------------------------

local function report(name, c, n, res, l2c)
  local f32 = res.float32
  local kv = kv_bytes(c, n)
  for _, d in ipairs(opts.dtypes) do
    local r = res[d]
    local key = ("llama_%s_%s"):format(name, d)
    if r.missing then
      print(("%s: not available (%s)"):format(key, r.missing))
    else
      local bytes = r.bytes + kv
      local floor = median(r.gbs) * 1e9 / bytes
      local tok = median(r.tok)
      r.floor_ratio = tok / floor
      print(("%s_tok_s: %.1f tokens/s (median of %d; %d tokens after BOS, greedy, jit)"):format(
        key, tok, #r.tok, n))
      print(("%s_bytes_per_token: %.1f MB (weights %.1f MB, KV cache %.2f MB on average)")
        :format(key, bytes / 1e6, r.bytes / 1e6, kv / 1e6))
      print(("%s_floor: %.1f tokens/s (at the triad's %.2f GB/s); tide at %.2f of it"):format(
        key, floor, median(r.gbs), r.floor_ratio))
      if #r.prod == #r.tok then
        local prod, step = median(r.prod), 1 / tok
        print(("%s_products: %.2f ms of a token's %.2f ms (%.0f%%; the weights at %.2f GB/s, "
          .. "%.2f of the triad); the rest, %.2f ms, is everything else"):format(key, prod * 1e3,
          step * 1e3, 100 * prod / step, r.bytes / prod / 1e9, r.bytes / prod / 1e9
          / median(r.gbs), (step - prod) * 1e3))
      end
      if d ~= "float32" then
        local ratios = {}
        for s = 1, #r.tok do ratios[s] = r.tok[s] / f32.tok[s] end
        r.vs_f32 = median(ratios)
        print(("%s_vs_float32: %.2fx float32's tokens/s (median of the slices' ratios)"):format(
          key, r.vs_f32))
      end
    end
  end
  if l2c then
    local ratios = {}
    for s = 1, #l2c do ratios[s] = f32.tok[s] / l2c[s] end
    f32.vs_l2c = median(ratios)
    print(("llama_%s_llama2c_tok_s: %.1f tokens/s (run.c, OMP_NUM_THREADS=%d, the same checkpoint)"
      .. "; tide float32 at %.2fx it"):format(name, median(l2c), tide.get_num_threads(),
      f32.vs_l2c))
    if #l2c.one > 0 then
      local one = {}
      for s = 1, #l2c.one do one[s] = f32.tok[s] / math.max(l2c[s], l2c.one[s]) end
      f32.vs_l2c = median(one)
      print(("llama_%s_llama2c_one_thread_tok_s: %.1f tokens/s (run.c, OMP_NUM_THREADS=1: on a "
        .. "shared machine OpenMP's barriers can make 2 threads slower); tide float32 at %.2fx "
        .. "the faster run.c of each slice"):format(name, median(l2c.one), f32.vs_l2c))
    end
  else
    print(("llama_%s_llama2c: not measured (LLAMA2C_RUN, the path of llama2.c's run binary, "
      .. "not given)"):format(name))
  end
end

local function bench_shape(name)
  local c = SHAPES[name]
  local n = opts.steps or c.steps
  assert(n >= 2 and n < c.seq_len, "bench_llama: --steps must be in 2.." .. c.seq_len - 1)
  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir -p " .. dir))
  local ckpt, tok = dir .. "/model.bin", dir .. "/tokenizer.bin"
  tide.manual_seed(0)
  write_llama2c(ckpt, c)
  local l2c_bin = os.getenv("LLAMA2C_RUN")
  if l2c_bin then write_tokenizer(tok, c.vocab_size) end
  local res, models = {}, {}
  for _, d in ipairs(opts.dtypes) do
    local m, why = load_model(ckpt, d)
    res[d] = { missing = why, tok = {}, gbs = {}, prod = {} }
    if m then
      models[d] = m
      res[d].bytes = weight_bytes(m)
      tide_tokens_per_s(m, 8) -- warm-up: the jit's plans, the allocator's pages
    end
  end
  local l2c = l2c_bin and { one = {} }
  for s = 1, opts.slices do
    for _, d in ipairs(opts.dtypes) do
      if models[d] then
        res[d].tok[s] = tide_tokens_per_s(models[d], n)
        local ok, t = pcall(products_seconds, models[d], 8)
        res[d].prod[s] = ok and t or nil
      end
    end
    if l2c then
      l2c[s] = llama2c_tokens_per_s(l2c_bin, ckpt, tok, n, tide.get_num_threads())
      if tide.get_num_threads() > 1 then
        l2c.one[s] = llama2c_tokens_per_s(l2c_bin, ckpt, tok, n, 1)
      end
    end
    local g = triad_gbs()
    for _, d in ipairs(opts.dtypes) do res[d].gbs[s] = g end
  end
  os.execute("rm -rf " .. dir)
  report(name, c, n, res, l2c)
  return res
end

-- ---- the run ------------------------------------------------------------------------------------

local function target(line, value, goal, unit)
  if value == nil then
    print(("%s: not measured"):format(line))
  else
    print(("%s: %.2f%s (%s)"):format(line, value, unit, value >= goal and "met" or "NOT met"))
  end
end

local isa = command_output(build .. "/bench/bench_jit --isa"):gsub("%s+$", "")
print(("# bench_llama: cpu %s, %d threads, TIDE_CPU_ISA tier %s (env %s), %d slices"):format(
  cpu_model(), tide.get_num_threads(), isa, os.getenv("TIDE_CPU_ISA") or "unset", opts.slices))
local all = {}
for _, s in ipairs(opts.shapes) do all[s] = bench_shape(s) end
local big, small = all.stories110M, all.stories15M
target("llama_target_stories110M_float32: >= 0.70 of the bandwidth floor",
  big and big.float32.floor_ratio, 0.70, "")
target("llama_target_stories15M_float32: >= 2x llama2.c's run.c (its faster thread count)",
  small and small.float32.vs_l2c, 2.0, "x")
for _, dg in ipairs({ { "bfloat16", 1.8 }, { "q8_0", 3.0 }, { "q4_0", 5.0 } }) do
  local d, goal = dg[1], dg[2]
  target(("llama_target_stories110M_%s: >= %.1fx float32's tokens/s"):format(d, goal),
    big and big[d] and big[d].vs_f32, goal, "x")
end
