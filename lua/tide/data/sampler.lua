-- tide.data.sampler — DistributedSampler: the share of a dataset's indices that one process
-- (rank) of a data-parallel job reads, as PyTorch's torch.utils.data.DistributedSampler.
-- Exposed as tide.data.DistributedSampler; DataLoader takes it as {sampler = s}.
--
--   local s = data.DistributedSampler(ds, {num_replicas = 4, rank = 0, shuffle = true, seed = 0})
--   for epoch = 1, n do s:set_epoch(epoch) ... end   -- a new order each epoch
--   s:indices()   -- this rank's 1-based dataset indices for the epoch; #s of them
--
-- Every rank draws the same permutation of 1..N (from seed + epoch, on a generator seeded for
-- the purpose: the global RNG state is saved and restored around it, so it agrees across
-- processes whatever else they drew), pads it by repeating from its start to a multiple of
-- num_replicas (or, with drop_last, cuts it down to one), and takes every num_replicas-th
-- index from position rank + 1: the ranks' shares are disjoint and cover the dataset.
local tide = require "tide"

local sampler = {}

local DistributedSampler = { __name = "DistributedSampler" }
DistributedSampler.__index = DistributedSampler
sampler.DistributedSampler = setmetatable(DistributedSampler, {
  __call = function(c, dataset, opts)
    local self = c.new(dataset, opts) -- not a tail call: new's errors name the caller's line
    return self
  end,
})

local option_keys = { num_replicas = true, rank = true, shuffle = true, seed = true,
                      drop_last = true }

local function check_int(name, v, min)
  if math.type(v) ~= "integer" and not (type(v) == "number" and v == math.floor(v)
      and v == v and math.abs(v) < 2 ^ 53) then
    error(("DistributedSampler: %s must be an integer, got %s"):format(name, tostring(v)), 0)
  end
  v = math.tointeger(v)
  if v < min then
    error(("DistributedSampler: %s must be >= %d, got %d"):format(name, min, v), 0)
  end
  return v
end

-- The dataset's size: a number, or a table with len() (or #).
local function dataset_size(dataset)
  if type(dataset) == "number" then
    return check_int("the dataset length", dataset, 0)
  end
  if type(dataset) == "table" and type(dataset.len) == "function" then
    return check_int("the dataset's len()", dataset:len(), 0)
  end
  error("DistributedSampler: expected a dataset (a table with len()) or a length, got "
    .. type(dataset), 0)
end

-- num_replicas and rank from the options, else from an initialized tide.distributed.
local function replicas_and_rank(opts)
  local R, r = opts.num_replicas, opts.rank
  if R == nil or r == nil then
    local ok, dist = pcall(require, "tide.distributed")
    if not (ok and type(dist) == "table" and dist.is_initialized and dist.is_initialized()) then
      error("DistributedSampler: give num_replicas and rank, or call tide.distributed.init() "
        .. "first", 0)
    end
    R = R == nil and dist.world_size() or R
    r = r == nil and dist.rank() or r
  end
  R = check_int("num_replicas", R, 1)
  r = check_int("rank", r, 0)
  if r >= R then
    error(("DistributedSampler: rank must be in 0..%d (num_replicas - 1, 0-based), got %d")
      :format(R - 1, r), 0)
  end
  return R, r
end

-- The options checked (the helpers raise without a position; new adds the caller's).
local function check_options(opts)
  if type(opts) ~= "table" then
    error("DistributedSampler: options must be a table, got " .. type(opts), 0)
  end
  for k in pairs(opts) do
    if not option_keys[k] then
      error(("DistributedSampler: unknown option '%s' (num_replicas, rank, shuffle, seed, "
        .. "drop_last)"):format(tostring(k)), 0)
    end
  end
  for _, k in ipairs({ "shuffle", "drop_last" }) do
    if opts[k] ~= nil and type(opts[k]) ~= "boolean" then
      error(("DistributedSampler: %s must be a boolean, got %s"):format(k, type(opts[k])), 0)
    end
  end
end

-- DistributedSampler(dataset_or_length, {num_replicas=, rank=, shuffle=true, seed=0,
-- drop_last=false}); rank is 0-based, as the process ranks of tide.distributed are.
function DistributedSampler.new(dataset, opts)
  local ok, self = pcall(DistributedSampler._build, dataset, opts or {})
  if not ok then
    error(self, 3)
  end
  return self
end

function DistributedSampler._build(dataset, opts)
  check_options(opts)
  local n = dataset_size(dataset)
  local R, r = replicas_and_rank(opts)
  local seed = opts.seed == nil and 0 or check_int("seed", opts.seed, 0)
  local drop_last = opts.drop_last == true
  local self = setmetatable({ dataset = dataset, size = n, num_replicas = R, rank = r,
                              shuffle = opts.shuffle ~= false, seed = seed,
                              drop_last = drop_last, epoch = 0 }, DistributedSampler)
  -- PyTorch: without drop_last ceil(N / R) each (padded), with it floor(N / R)
  self.num_samples = drop_last and n // R or (n + R - 1) // R
  self.total_size = self.num_samples * R
  return self
end

-- The order of every epoch depends on seed + epoch; call it before each epoch.
function DistributedSampler:set_epoch(epoch)
  local ok, e = pcall(check_int, "epoch", epoch, 0)
  if not ok then
    error(e, 2)
  end
  self.epoch = e
end

-- The number of indices this rank gets each epoch.
function DistributedSampler:len()
  return self.num_samples
end
DistributedSampler.__len = DistributedSampler.len

-- A permutation of 1..n from seed alone: the global RNG's state is put back afterwards.
local function seeded_permutation(n, seed)
  local state = tide.get_rng_state()
  tide.manual_seed(seed)
  local ok, perm = pcall(function() return tide.randperm(n):totable() end)
  tide.set_rng_state(state)
  if not ok then
    error(perm, 0)
  end
  return perm
end

-- This rank's 1-based dataset indices for the current epoch, in the order to read them.
function DistributedSampler:indices()
  local n, R = self.size, self.num_replicas
  local all
  if self.shuffle and n > 0 then
    all = seeded_permutation(n, self.seed + self.epoch)
  else
    all = {}
    for i = 1, n do all[i] = i end
  end
  local out = {}
  for k = 1, self.num_samples do
    -- position rank + 1 + (k - 1) R of the list padded by repeating it from its start
    local pos = self.rank + 1 + (k - 1) * R
    out[k] = all[(pos - 1) % n + 1]
  end
  return out
end

function DistributedSampler:__tostring()
  return ("DistributedSampler(%d samples, rank %d of %d, %d each%s%s)"):format(self.size,
    self.rank, self.num_replicas, self.num_samples, self.shuffle and ", shuffled" or "",
    self.drop_last and ", drop_last" or "")
end

return sampler
