-- test_sampler.lua — tide.data.DistributedSampler (PyTorch's semantics, ranks 0-based, indices
-- 1-based): every rank simulated in one process; shares cover the dataset (disjoint when N
-- divides), one permutation per seed + epoch independent of the global RNG, padding and
-- drop_last lengths, the strided split, DataLoader with a sampler, and the errors.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local H = require "harness"
local tide = require "tide"
local data = tide.data
local DS = data.DistributedSampler

-- Every rank's indices for one epoch.
local function shares(n, R, opts)
  local out = {}
  for r = 0, R - 1 do
    local o = { num_replicas = R, rank = r }
    for k, v in pairs(opts or {}) do o[k] = v end
    out[r + 1] = DS(n, o)
  end
  return out
end

local function indices(samplers, epoch)
  local out = {}
  for i, s in ipairs(samplers) do
    if epoch then s:set_epoch(epoch) end
    out[i] = s:indices()
  end
  return out
end

local function counts(lists)
  local c = {}
  for _, l in ipairs(lists) do
    for _, i in ipairs(l) do c[i] = (c[i] or 0) + 1 end
  end
  return c
end

H.test("N divisible by R: disjoint shares that cover 1..N, shuffled or not", function()
  for _, shuffle in ipairs({ true, false }) do
    local lists = indices(shares(12, 4, { shuffle = shuffle }))
    local c = counts(lists)
    for i = 1, 12 do H.eq(c[i], 1, ("index %d once (shuffle %s)"):format(i, tostring(shuffle))) end
    for _, l in ipairs(lists) do H.eq(#l, 3) end
  end
  -- without shuffle the split is strided, as PyTorch: rank r takes r+1, r+1+R, ...
  H.eq(indices(shares(12, 4, { shuffle = false })),
    { { 1, 5, 9 }, { 2, 6, 10 }, { 3, 7, 11 }, { 4, 8, 12 } })
end)

H.test("padding: ceil(N/R) each, repeated from the start; drop_last: floor(N/R)", function()
  local lists = indices(shares(10, 4, { shuffle = false }))
  H.eq(lists, { { 1, 5, 9 }, { 2, 6, 10 }, { 3, 7, 1 }, { 4, 8, 2 } })
  H.eq(#DS(10, { num_replicas = 4, rank = 0 }), 3, "#sampler")
  lists = indices(shares(10, 4, { shuffle = false, drop_last = true }))
  H.eq(lists, { { 1, 5 }, { 2, 6 }, { 3, 7 }, { 4, 8 } })
  H.eq(DS(10, { num_replicas = 4, rank = 3, drop_last = true }):len(), 2)
  -- shuffled with padding: every index at least once, the extras repeat the first ones
  local c = counts(indices(shares(10, 4, { seed = 3 })))
  local total = 0
  for i = 1, 10 do
    H.ok(c[i] == 1 or c[i] == 2, "index " .. i)
    total = total + c[i]
  end
  H.eq(total, 12)
  -- more replicas than samples: the list repeats as often as needed (PyTorch)
  H.eq(indices(shares(2, 5, { shuffle = false })), { { 1 }, { 2 }, { 1 }, { 2 }, { 1 } })
  H.eq(indices(shares(2, 5, { shuffle = false, drop_last = true })), { {}, {}, {}, {}, {} })
  H.eq(#DS(0, { num_replicas = 2, rank = 1 }), 0, "an empty dataset")
end)

H.test("the permutation depends on seed + epoch only, not on the global RNG", function()
  local a = DS(50, { num_replicas = 3, rank = 1, seed = 7 })
  local b = DS(50, { num_replicas = 3, rank = 1, seed = 7 })
  tide.manual_seed(1)
  local ia = a:indices()
  tide.manual_seed(999)
  tide.rand(10)
  local after = tide.rand(3):totable()
  tide.manual_seed(999)
  tide.rand(10)
  H.eq(b:indices(), ia, "the same seed and epoch, other global RNG states")
  H.eq(tide.rand(3):totable(), after, "the global RNG stream is left as it was")
  a:set_epoch(1)
  local e1 = a:indices()
  local same = true
  for i = 1, #e1 do same = same and e1[i] == ia[i] end
  H.ok(not same, "another epoch, another order")
  b:set_epoch(1)
  H.eq(b:indices(), e1, "set_epoch agrees across samplers")
  local c = DS(50, { num_replicas = 3, rank = 1, seed = 8 })
  local ic = c:indices()
  same = true
  for i = 1, #ic do same = same and ic[i] == ia[i] end
  H.ok(not same, "another seed, another order")
  -- every epoch, the ranks together still cover the dataset
  local ranks = shares(50, 3, { seed = 7 })
  for epoch = 0, 3 do
    local cnt = counts(indices(ranks, epoch))
    for i = 1, 50 do H.ok(cnt[i] and cnt[i] >= 1, ("epoch %d index %d"):format(epoch, i)) end
  end
  -- a dataset object gives its length
  local ds = data.TensorDataset(tide.arange(7))
  H.eq(#DS(ds, { num_replicas = 2, rank = 0 }), 4)
end)

H.test("DataLoader with a sampler reads exactly the sampler's samples", function()
  local x = tide.arange(1, 21):reshape(20, 1) -- sample i holds the number i
  local ds = data.TensorDataset(x, tide.arange(1, 21))
  local s = DS(ds, { num_replicas = 3, rank = 2, seed = 4 })
  s:set_epoch(5)
  local want = s:indices()
  local loader = data.DataLoader(ds, { batch_size = 3, sampler = s })
  H.eq(#loader, 3, "ceil(7 / 3) batches")
  local got = {}
  for xb, yb in loader:iter() do
    H.eq(xb:size(1), yb:size(1))
    for _, v in ipairs(yb:totable()) do got[#got + 1] = math.tointeger(v) end
  end
  H.eq(got, want, "TensorDataset batches in the sampler's order")
  -- a dataset batched sample by sample
  local Squares = data.Dataset:extend("Squares")
  function Squares:len() return 9 end
  function Squares:get(i) return i * i end
  local sq = Squares()
  local s2 = DS(sq, { num_replicas = 2, rank = 1, shuffle = false })
  local l2 = data.DataLoader(sq, { batch_size = 4, sampler = s2, drop_last = true,
                                   collate_fn = function(samples)
                                     local t = {}
                                     for i, smp in ipairs(samples) do t[i] = smp[1] end
                                     return { t }
                                   end })
  H.eq(#l2, 1, "drop_last over the sampler's 5 samples")
  local batches = {}
  for b in l2:iter() do batches[#batches + 1] = b end
  H.eq(batches, { { 4, 16, 36, 64 } }, "indices 2, 4, 6, 8 (of 2, 4, 6, 8, 1)")
end)

H.test("num_replicas and rank from an initialized tide.distributed", function()
  local saved = package.loaded["tide.distributed"]
  local initialized = true
  package.loaded["tide.distributed"] = {
    is_initialized = function() return initialized end,
    rank = function() return 1 end,
    world_size = function() return 3 end,
  }
  local ok, err = pcall(function()
    local s = DS(9, { shuffle = false })
    H.eq({ s.num_replicas, s.rank }, { 3, 1 })
    H.eq(s:indices(), { 2, 5, 8 })
    H.eq(DS(9, { rank = 0, shuffle = false }):indices(), { 1, 4, 7 }, "a given rank wins")
    initialized = false
    H.raises(function() DS(9) end, "give num_replicas and rank, or call tide.distributed.init()")
  end)
  package.loaded["tide.distributed"] = saved
  if not ok then error(err, 0) end
end)

H.test("errors", function()
  H.raises(function() DS(10, { num_replicas = 2, rank = 2 }) end, "rank must be in 0..1")
  H.raises(function() DS(10, { num_replicas = 2, rank = -1 }) end, "rank must be >= 0")
  H.raises(function() DS(10, { num_replicas = 2, rank = 0.5 }) end, "rank must be an integer")
  H.raises(function() DS(10, { num_replicas = 0, rank = 0 }) end, "num_replicas must be >= 1")
  H.raises(function() DS(10, { num_replicas = "2", rank = 0 }) end, "num_replicas must be an integer")
  H.raises(function() DS(-1, { num_replicas = 2, rank = 0 }) end, "dataset length must be >= 0")
  H.raises(function() DS("ds", { num_replicas = 2, rank = 0 }) end, "expected a dataset")
  H.raises(function() DS(10, { num_replicas = 2, rank = 0, ranks = 1 }) end, "unknown option 'ranks'")
  H.raises(function() DS(10, { num_replicas = 2, rank = 0, shuffle = 1 }) end, "shuffle must be a boolean")
  H.raises(function() DS(10, { num_replicas = 2, rank = 0, seed = 1.5 }) end, "seed must be an integer")
  local err = H.raises(function() DS(10, { rank = 0 }) end,
    "DistributedSampler: give num_replicas and rank, or call tide.distributed.init() first")
  H.ok(err:find("test_sampler.lua", 1, true), "the error names the caller's line: " .. err)
  H.raises(function() DS(10) end, "give num_replicas and rank")
  local s = DS(10, { num_replicas = 2, rank = 0 })
  H.raises(function() s:set_epoch(1.5) end, "epoch must be an integer")
  H.raises(function() s:set_epoch(-1) end, "epoch must be >= 0")
  local ds = data.TensorDataset(tide.arange(10))
  H.raises(function() data.DataLoader(ds, { sampler = s, shuffle = true }) end,
    "shuffle must be false when a sampler is given")
  H.raises(function() data.DataLoader(ds, { sampler = {} }) end, "sampler must have indices()")
  H.eq(tostring(s), "DistributedSampler(10 samples, rank 0 of 2, 5 each, shuffled)")
end)

H.done()
