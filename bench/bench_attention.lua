-- bench_attention.lua — fused causal attention (tide.nn.functional.scaled_dot_product_attention)
-- forward + backward against the unfused composite (matmul, causal mask, softmax, matmul, and
-- their autograd), float32, head dim 64, T = 1024, H = 6, B = 1 and 4; then at T = 4096 the
-- allocator's peak during a fused forward + backward, which must hold no T x T buffer.
--
--   build/lua/tide bench/bench_attention.lua [slices]
--
-- Times are medians over alternating slices (fused, composite, fused, ...), so drift in the
-- machine's speed reaches both alike. Prints `name: value unit` lines; targets end in
-- "(met)" or "(NOT met)".
local tide = require "tide"
local F = require "tide.nn.functional"

local slices = tonumber(arg and arg[1]) or 7
local function met(ok) return ok and "met" or "NOT met" end

local function cpu_model()
  local f = io.open("/proc/cpuinfo")
  if not f then return "unknown", "" end
  local s = f:read("a")
  f:close()
  return s:match("model name%s*:%s*([^\n]+)") or "unknown", s:match("\nflags%s*:%s*([^\n]+)") or ""
end

-- The tier the CPU kernels run (devices/cpu/cpu_isa.h): the best the flags allow, capped by
-- TIDE_CPU_ISA.
local function isa_tier(flags)
  local best = flags:find("avx512f", 1, true) and flags:find("avx512bw", 1, true) and "avx512"
    or flags:find("avx2", 1, true) and flags:find("fma", 1, true) and "avx2" or "baseline"
  local rank = { baseline = 0, avx2 = 1, avx512 = 2 }
  local cap = os.getenv("TIDE_CPU_ISA")
  if cap and rank[cap] and rank[cap] < rank[best] then return cap end
  return best
end

local function composite(q, k, v, future)
  local s = tide.matmul(q, k:transpose(-2, -1)) * (1 / math.sqrt(q:size(-1)))
  return tide.matmul(tide.softmax(s:masked_fill(future, -math.huge), -1), v)
end

local function fused(q, k, v)
  return F.scaled_dot_product_attention(q, k, v, { is_causal = true })
end

-- One forward + backward; the gradients are read so the work is done.
local function step(fn, q, k, v, w, future)
  q.grad, k.grad, v.grad = nil, nil, nil
  local out = fn(q, k, v, future)
  ;(out * w):sum():backward()
  return q.grad:sum():item() + k.grad:sum():item() + v.grad:sum():item()
end

local function median(t)
  table.sort(t)
  local n = #t
  return n % 2 == 1 and t[(n + 1) / 2] or (t[n / 2] + t[n / 2 + 1]) / 2
end

local function compare(B, H, T, D)
  tide.manual_seed(0)
  local q = tide.randn(B, H, T, D):requires_grad_()
  local k = tide.randn(B, H, T, D):requires_grad_()
  local v = tide.randn(B, H, T, D):requires_grad_()
  local w = tide.randn(B, H, T, D)
  local future = tide.ones(T, T, { dtype = "bool" }):triu(1)
  step(fused, q, k, v, w, future) -- warm-up: caches, BLAS
  step(composite, q, k, v, w, future)
  local tf, tc = {}, {}
  for _ = 1, slices do
    local t0 = tide.clock()
    step(fused, q, k, v, w, future)
    tf[#tf + 1] = tide.clock() - t0
    t0 = tide.clock()
    step(composite, q, k, v, w, future)
    tc[#tc + 1] = tide.clock() - t0
  end
  local f, c = median(tf), median(tc)
  local name = ("attn_causal_b%d_h%d_t%d_d%d"):format(B, H, T, D)
  -- causal forward + backward: 2 + 5 GEMMs of T*T/2*D multiply-adds each
  local flops = 7 * 2 * B * H * (T * T / 2) * D
  print(("%s_fused_fwd_bwd: %.2f ms"):format(name, f * 1e3))
  print(("%s_composite_fwd_bwd: %.2f ms"):format(name, c * 1e3))
  print(("%s_fused_gflops: %.1f GFLOP/s"):format(name, flops / f / 1e9))
  print(("%s_speedup: %.2f x (target >= 3: %s)"):format(name, c / f, met(c / f >= 3)))
end

-- The allocator's peak above what was live before, during one fused forward + backward.
local function peak_at(T, D)
  tide.manual_seed(0)
  local q = tide.randn(1, 1, T, D):requires_grad_()
  local k = tide.randn(1, 1, T, D):requires_grad_()
  local v = tide.randn(1, 1, T, D):requires_grad_()
  local w = tide.randn(1, 1, T, D)
  tide.collect()
  local before = tide.memory_stats().in_use
  tide.reset_peak_memory_stats()
  step(fused, q, k, v, w)
  local extra = tide.memory_stats().peak - before
  local tt = T * T * 4
  print(("attn_causal_t%d_d%d_fwd_bwd_peak_extra: %.2f MiB"):format(T, D, extra / 2 ^ 20))
  print(("attn_causal_t%d_txt_f32: %.2f MiB"):format(T, tt / 2 ^ 20))
  print(("attn_causal_t%d_no_txt_buffer: %s (target: peak extra < one T x T buffer: %s)"):format(
    T, tostring(extra < tt), met(extra < tt)))
end

local model, flags = cpu_model()
print(("# cpu: %s; isa tier: %s; threads: %d; slices: %d"):format(model, isa_tier(flags),
  tide.get_num_threads(), slices))
compare(1, 6, 1024, 64)
compare(4, 6, 1024, 64)
peak_at(4096, 64)
