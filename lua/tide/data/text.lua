-- tide.data.text — TextDataset: the bytes of text files for a byte-level language model, and
-- the fortunes corpus (the Debian package `fortunes`). Exposed as tide.data.TextDataset,
-- tide.data.fortunes_files and tide.data.Fortunes.
--
--   local ds = data.TextDataset(files, {block_size = 256, val_fraction = 0.1, seed = 1})
--   local x, y = ds:batch(32)                -- int64 [32, 256]; y is x shifted by one byte
--   for x, y in ds:val_batches(32) do ... end -- a fixed sweep over the validation bytes
--
-- Token ids are 1-based like every class index in tide (nn.Embedding, cross_entropy): byte b
-- is token b + 1, so the vocabulary is 1..256 (vocab_size = 256). ds:encode / ds:decode convert.
-- The files are concatenated in the order given (no separator); the first len - floor(len *
-- val_fraction) bytes are training data, the rest validation. The bytes are read with io.read
-- and copied once into a uint8 tensor (tide.frombytes); windows are one index_select per batch.
local tide = require "tide"

local text = {}

local VOCAB = 256

local TextDataset = {}
TextDataset.__index = TextDataset
TextDataset.__name = "TextDataset"
text.TextDataset = setmetatable(TextDataset, {
  __call = function(c, files, opts)
    local self = c.new(files, opts) -- not a tail call: errors use level 4, the caller's line
    return self
  end,
})

local option_keys = { block_size = true, val_fraction = true, seed = true }

local function read_file(path)
  local f, err = io.open(path, "rb")
  if not f then
    -- io.open's message starts with the path again
    local why = err:sub(1, #path + 2) == path .. ": " and err:sub(#path + 3) or err
    error(("TextDataset: cannot read %s (%s)"):format(path, why), 4)
  end
  local s, rerr = f:read("a")
  f:close()
  if not s then -- a directory opens but does not read
    error(("TextDataset: cannot read %s (%s)"):format(path, tostring(rerr)), 4)
  end
  if #s == 0 then
    error(("TextDataset: %s is empty"):format(path), 4)
  end
  return s
end

local function check_files(files)
  if type(files) == "string" then
    files = { files }
  end
  if type(files) ~= "table" then
    error("TextDataset: files must be a path or a list of paths, got " .. type(files), 4)
  end
  if #files == 0 then
    error("TextDataset: no files given", 4)
  end
  for i, p in ipairs(files) do
    if type(p) ~= "string" then
      error(("TextDataset: file %d must be a path (string), got %s"):format(i, type(p)), 4)
    end
  end
  return files
end

local function check_options(opts)
  if type(opts) ~= "table" then
    error("TextDataset: options must be a table with block_size", 4)
  end
  for k in pairs(opts) do
    if not option_keys[k] then
      error("TextDataset: unknown option '" .. tostring(k) .. "'", 4)
    end
  end
  local T = opts.block_size
  if math.type(T) ~= "integer" or T < 1 then
    error("TextDataset: block_size must be a positive integer, got " .. tostring(T), 4)
  end
  local vf = opts.val_fraction or 0.1
  if type(vf) ~= "number" or vf < 0 or vf >= 1 then
    error("TextDataset: val_fraction must be a number in [0, 1), got " .. tostring(vf), 4)
  end
  if opts.seed ~= nil and math.type(opts.seed) ~= "integer" then
    error("TextDataset: seed must be an integer, got " .. tostring(opts.seed), 4)
  end
  return T, vf, opts.seed
end

-- A part must hold one window and its target: block_size + 1 bytes.
local function check_part(name, n, T, total)
  if n < T + 1 then
    error(("TextDataset: block_size %d needs %d bytes, the %s part has %d (of %d bytes)")
      :format(T, T + 1, name, n, total), 4)
  end
end

-- TextDataset(files, {block_size = T, val_fraction = 0.1, seed = nil})
function TextDataset.new(files, opts)
  files = check_files(files)
  local T, vf, seed = check_options(opts)
  local parts = {}
  for i, p in ipairs(files) do
    parts[i] = read_file(p)
  end
  local bytes = tide.frombytes(table.concat(parts))
  local n = bytes:size(1)
  local nval = math.floor(n * vf)
  local ntrain = n - nval
  check_part("training", ntrain, T, n)
  if nval > 0 then
    check_part("validation", nval, T, n)
  end
  local self = setmetatable({ files = files, bytes = bytes, block_size = T, vocab_size = VOCAB,
                              val_fraction = vf, seed = seed }, TextDataset)
  self.train_bytes = bytes:narrow(1, 1, ntrain)
  self.val_bytes = nval > 0 and bytes:narrow(1, ntrain + 1, nval) or nil
  if seed then
    local st = tide.get_rng_state()
    tide.manual_seed(seed)
    self.rng_state = tide.get_rng_state()
    tide.set_rng_state(st)
  end
  return self
end

-- The number of bytes of a part: "train" (default), "val", or the whole text ("all").
function TextDataset:len(split)
  if split == nil or split == "train" then
    return self.train_bytes:size(1)
  elseif split == "val" then
    return self.val_bytes and self.val_bytes:size(1) or 0
  elseif split == "all" then
    return self.bytes:size(1)
  end
  error("TextDataset: split must be \"train\", \"val\" or \"all\", got " .. tostring(split), 2)
end
TextDataset.__len = function(self) return self:len() end

-- Windows x, y (int64 [B, T], token ids) at the 1-based byte positions starts (int64 [B]) of
-- part: x = part[s .. s+T-1] + 1, y = part[s+1 .. s+T] + 1.
function TextDataset:windows(part, starts)
  local T = self.block_size
  local B = starts:size(1)
  local idx = starts:view(B, 1) + tide.arange(T + 1):view(1, T + 1)
  local ids = part:index_select(1, idx:view(B * (T + 1))):view(B, T + 1):long() + 1
  return ids:narrow(2, 1, T):contiguous(), ids:narrow(2, 2, T):contiguous()
end

-- Random start positions 1 .. ntrain - T: from the dataset's own generator when it was given a
-- seed (the global generator's state is saved and restored around the draw), else from tide's
-- global generator (tide.manual_seed).
function TextDataset:_starts(B)
  local hi = self.train_bytes:size(1) - self.block_size -- the last valid start
  if not self.rng_state then
    return tide.randint(1, hi + 1, { B })
  end
  local st = tide.get_rng_state()
  tide.set_rng_state(self.rng_state)
  local starts = tide.randint(1, hi + 1, { B })
  self.rng_state = tide.get_rng_state()
  tide.set_rng_state(st)
  return starts
end

-- ds:batch(B) -> x, y: B random training windows (int64 [B, T] token ids; y is x shifted by 1).
function TextDataset:batch(B)
  if math.type(B) ~= "integer" or B < 1 then
    error("TextDataset: batch size must be a positive integer, got " .. tostring(B), 2)
  end
  return self:windows(self.train_bytes, self:_starts(B))
end

-- The number of validation windows: consecutive, non-overlapping, from the first validation
-- byte (window k starts at (k-1)*T + 1; each needs T + 1 bytes).
function TextDataset:val_windows()
  local nval = self:len("val")
  return nval > 0 and (nval - 1) // self.block_size or 0
end

-- for x, y in ds:val_batches(B) do ... end: every validation window once, in order, B at a time
-- (the last batch may be smaller). The same every call.
function TextDataset:val_batches(B)
  if math.type(B) ~= "integer" or B < 1 then
    error("TextDataset: batch size must be a positive integer, got " .. tostring(B), 2)
  end
  local T, nw, k = self.block_size, self:val_windows(), 0
  return function()
    if k >= nw then
      return nil
    end
    local b = math.min(B, nw - k)
    local starts = tide.arange(k, k + b) * T + 1
    k = k + b
    return self:windows(self.val_bytes, starts)
  end
end

-- ds:encode("text") -> int64 [#s] token ids (byte + 1); ds:decode(ids) -> the string.
function TextDataset:encode(s)
  if type(s) ~= "string" then
    error("TextDataset: encode expects a string, got " .. type(s), 2)
  end
  return tide.frombytes(s):long() + 1
end
function TextDataset:decode(ids)
  local t = tide.is_tensor(ids) and ids:reshape(-1):totable() or ids
  local chars = {}
  for i, v in ipairs(t) do
    if type(v) ~= "number" or v ~= math.floor(v) or v < 1 or v > VOCAB then
      error(("TextDataset: decode: token %s at %d is not in 1..%d")
        :format(tostring(v), i, VOCAB), 2)
    end
    chars[i] = string.char(math.tointeger(v) - 1)
  end
  return table.concat(chars)
end

-- ---- the fortunes corpus -----------------------------------------------------------------------

text.FORTUNES_ROOT = "/usr/share/games/fortunes"

-- The fortune text files under root (default /usr/share/games/fortunes), sorted by name: regular
-- files only (the .u8 entries are links to the same texts) and no .dat index files. level: the
-- error level of the caller to blame.
local function find_fortunes(root, level)
  root = root or text.FORTUNES_ROOT
  local q = "'" .. root:gsub("'", "'\\''") .. "'"
  local p = io.popen("find " .. q .. " -maxdepth 1 -type f ! -name '*.dat' 2>/dev/null")
  local files = {}
  for line in p:lines() do
    files[#files + 1] = line
  end
  p:close()
  if #files == 0 then
    error(("fortunes_files: no fortune files in %s (install the Debian package fortunes: "
      .. "scripts/setup.sh)"):format(root), level)
  end
  table.sort(files)
  return files
end

function text.fortunes_files(root)
  local files = find_fortunes(root, 3)
  return files
end

-- Fortunes({block_size = T, val_fraction = 0.1, seed =, root =}): TextDataset over the sorted
-- fortune files (errors blame the caller: TextDataset.new's level 4 is Fortunes' caller).
function text.Fortunes(opts)
  opts = opts or {}
  local rest = {}
  for k, v in pairs(opts) do
    if k ~= "root" then rest[k] = v end
  end
  local ds = TextDataset.new(find_fortunes(opts.root, 3), rest)
  return ds
end

return text
