-- test_text_dataset.lua — tide.frombytes, and tide.data.TextDataset on small temp files: the
-- split sizes, the bytes in file order, token ids (byte + 1), random training windows (y is x
-- shifted by one, each window is the text at some position), reproducible seeding, the
-- validation sweep (every window in order), and every error message; then the real fortunes
-- corpus, skipped with a reason when the Debian package is not installed.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local H = require "harness"
local tide = require "tide"
local data = require "tide.data"

local tmpfiles = {}
local function write_tmp(s)
  local path = os.tmpname()
  local f = assert(io.open(path, "wb"))
  f:write(s)
  f:close()
  tmpfiles[#tmpfiles + 1] = path
  return path
end

-- n pseudo-random bytes (a fixed LCG), so that every 8-byte window occurs once in the text.
local function random_bytes(n, state)
  local out = {}
  for i = 1, n do
    state = (state * 1103515245 + 12345) % 2147483648
    out[i] = string.char((state >> 16) % 256)
  end
  return table.concat(out)
end

local A = random_bytes(600, 1) .. "\0\255" -- byte 0 and byte 255 are tokens 1 and 256
local B = random_bytes(398, 2)
local TEXT = A .. B -- 1000 bytes: 900 training, 100 validation with val_fraction 0.1
local fa, fb = write_tmp(A), write_tmp(B)

local function row_string(ds, t, r) -- row r of an int64 [B, T] id tensor as bytes
  return ds:decode(t[r])
end

H.test("tide.frombytes: a string's bytes as uint8", function()
  local t = tide.frombytes("\0\255ab")
  H.eq(t.dtype, "uint8")
  H.values(t, { 0, 255, 97, 98 })
  H.eq(tide.frombytes(""):size(1), 0)
  H.raises(function() tide.frombytes(3) end, "frombytes: expected a string, got number")
  H.raises(function() tide.frombytes() end, "frombytes: expected a string, got no value")
end)

H.test("TextDataset: split sizes and the bytes in file order", function()
  local ds = data.TextDataset({ fa, fb }, { block_size = 8 })
  H.eq(ds:len("all"), 1000)
  H.eq(ds:len(), 900)
  H.eq(#ds, 900)
  H.eq(ds:len("val"), 100)
  H.eq(ds.vocab_size, 256)
  H.eq(ds.bytes.dtype, "uint8")
  H.eq(ds:decode(ds.bytes:long() + 1), TEXT)
  H.eq(ds:decode(ds.train_bytes:long() + 1), TEXT:sub(1, 900))
  H.eq(ds:decode(ds.val_bytes:long() + 1), TEXT:sub(901))
  local one = data.TextDataset(fa, { block_size = 8, val_fraction = 0 })
  H.eq(one:len(), 602)
  H.eq(one:len("val"), 0)
  H.eq(one:val_windows(), 0)
  local quarter = data.TextDataset({ fb, fa }, { block_size = 8, val_fraction = 0.25 })
  H.eq(quarter:len("val"), 250) -- floor(1000 * 0.25)
  H.eq(quarter:decode(quarter.val_bytes:long() + 1), (B .. A):sub(751))
end)

H.test("TextDataset: token ids are byte + 1 (1..256)", function()
  local ds = data.TextDataset(fa, { block_size = 4 })
  H.values(ds:encode("\0A\255"), { 1, 66, 256 })
  H.eq(ds:encode("\0A\255").dtype, "int64")
  H.eq(ds:decode({ 1, 66, 256 }), "\0A\255")
  H.eq(ds:decode(ds:encode(A)), A)
  H.raises(function() ds:decode({ 0 }) end, "token 0 at 1 is not in 1..256")
  H.raises(function() ds:decode({ 2, 257 }) end, "token 257 at 2")
  H.raises(function() ds:encode(3) end, "encode expects a string")
end)

H.test("TextDataset: windows match the text and y is x shifted by one", function()
  local T = 8
  local ds = data.TextDataset({ fa, fb }, { block_size = T, seed = 3 })
  local train = TEXT:sub(1, 900)
  local x, y = ds:batch(16)
  H.eq({ x:size(1), x:size(2) }, { 16, T })
  H.eq({ y:size(1), y:size(2) }, { 16, T })
  H.eq(x.dtype, "int64")
  local starts = {}
  for r = 1, 16 do
    local xs, ys = row_string(ds, x, r), row_string(ds, y, r)
    local pos = train:find(xs, 1, true)
    H.ok(pos ~= nil, "row " .. r .. " of x is a window of the training text")
    H.ok(pos + T <= 900, "the target byte is in the training part")
    H.eq(ys, train:sub(pos + 1, pos + T), "row " .. r .. " of y")
    starts[#starts + 1] = pos
  end
  local distinct = {}
  for _, s in ipairs(starts) do distinct[s] = true end
  local nd = 0
  for _ in pairs(distinct) do nd = nd + 1 end
  H.ok(nd > 8, "random windows start at different places (" .. nd .. " distinct of 16)")
  -- windows at chosen starts, including the last valid one (900 - T)
  local wx, wy = ds:windows(ds.train_bytes, tide.tensor({ 1, 900 - T }))
  H.eq(row_string(ds, wx, 1), train:sub(1, T))
  H.eq(row_string(ds, wy, 2), train:sub(900 - T + 1, 900))
end)

H.test("TextDataset: the same seed gives the same batches; the global RNG is untouched", function()
  local d1 = data.TextDataset({ fa, fb }, { block_size = 8, seed = 42 })
  local d2 = data.TextDataset({ fa, fb }, { block_size = 8, seed = 42 })
  local d3 = data.TextDataset({ fa, fb }, { block_size = 8, seed = 43 })
  tide.manual_seed(5)
  local want = tide.rand(3):totable()
  tide.manual_seed(5)
  local differ = false
  for _ = 1, 3 do
    local x1, y1 = d1:batch(6)
    local x2, y2 = d2:batch(6)
    local x3 = d3:batch(6)
    H.values(x2, x1:totable())
    H.values(y2, y1:totable())
    differ = differ or not pcall(H.values, x3, x1:totable())
  end
  H.ok(differ, "another seed gives other batches")
  H.values(tide.rand(3), want, 0, "the global generator's sequence")
  -- without a seed the global generator draws: tide.manual_seed reproduces the batch
  local d = data.TextDataset({ fa, fb }, { block_size = 8 })
  tide.manual_seed(7)
  local xa = d:batch(5)
  tide.manual_seed(7)
  local xb = d:batch(5)
  H.values(xb, xa:totable())
end)

H.test("TextDataset: the validation sweep covers the validation bytes in order", function()
  local T = 8
  local ds = data.TextDataset({ fa, fb }, { block_size = T, seed = 1 })
  local val = TEXT:sub(901)
  H.eq(ds:val_windows(), (100 - 1) // T) -- 12 windows of T + 1 bytes, non-overlapping x
  local k, sizes = 0, {}
  for x, y in ds:val_batches(5) do
    sizes[#sizes + 1] = x:size(1)
    for r = 1, x:size(1) do
      local s = k * T + 1
      H.eq(row_string(ds, x, r), val:sub(s, s + T - 1), "window " .. (k + 1) .. " x")
      H.eq(row_string(ds, y, r), val:sub(s + 1, s + T), "window " .. (k + 1) .. " y")
      k = k + 1
    end
  end
  H.eq(k, 12)
  H.eq(sizes, { 5, 5, 2 })
  local again = {}
  for x in ds:val_batches(12) do again[#again + 1] = x end
  H.eq(#again, 1)
  H.eq(ds:decode(again[1]:reshape(-1)), val:sub(1, 12 * T), "a second sweep is the same")
end)

H.test("TextDataset: errors", function()
  local empty = write_tmp("")
  local short = write_tmp("abcdefghij") -- 10 bytes: 9 training, 1 validation
  H.raises(function() data.TextDataset({}, { block_size = 4 }) end, "TextDataset: no files given")
  H.raises(function() data.TextDataset(nil, { block_size = 4 }) end, "files must be a path")
  H.raises(function() data.TextDataset({ fa, 3 }, { block_size = 4 }) end,
           "file 2 must be a path")
  H.raises(function() data.TextDataset({ fa, empty }, { block_size = 4 }) end,
           "TextDataset: " .. empty .. " is empty")
  local missing = "/nonexistent/tide_no_such_file.txt"
  H.raises(function() data.TextDataset({ fa, missing }, { block_size = 4 }) end,
           "TextDataset: cannot read " .. missing, "No such file")
  H.raises(function() data.TextDataset({ "/tmp" }, { block_size = 4 }) end,
           "cannot read /tmp")
  H.eq(data.TextDataset(short, { block_size = 9, val_fraction = 0 }):len(), 10) -- just fits
  H.raises(function() data.TextDataset(short, { block_size = 10, val_fraction = 0 }) end,
           "block_size 10 needs 11 bytes, the training part has 10 (of 10 bytes)")
  H.raises(function() data.TextDataset({ fa, fb }, { block_size = 100 }) end,
           "block_size 100 needs 101 bytes, the validation part has 100 (of 1000 bytes)")
  H.raises(function() data.TextDataset(fa, {}) end, "block_size must be a positive integer")
  H.raises(function() data.TextDataset(fa) end, "options must be a table with block_size")
  H.raises(function() data.TextDataset(fa, { block_size = 0 }) end, "got 0")
  H.raises(function() data.TextDataset(fa, { block_size = 4, val_fraction = 1 }) end,
           "val_fraction must be a number in [0, 1)")
  H.raises(function() data.TextDataset(fa, { block_size = 4, seed = 1.5 }) end,
           "seed must be an integer")
  H.raises(function() data.TextDataset(fa, { block_size = 4, blocksize = 4 }) end,
           "unknown option 'blocksize'")
  local ds = data.TextDataset(fa, { block_size = 4 })
  H.raises(function() ds:batch(0) end, "batch size must be a positive integer, got 0")
  H.raises(function() ds:val_batches(1.5) end, "batch size must be a positive integer")
  H.raises(function() ds:len("test") end, "split must be")
  H.raises(function() data.fortunes_files("/nonexistent/fortunes") end,
           "no fortune files in /nonexistent/fortunes", "package fortunes")
end)

H.test("Fortunes: the real corpus (Debian package fortunes)", function()
  local root = data.FORTUNES_ROOT
  local probe = io.open(root .. "/fortunes", "rb")
  if not probe then
    print("SKIP Fortunes: " .. root .. " is absent (Debian package fortunes; scripts/setup.sh)")
    return
  end
  probe:close()
  local files = data.fortunes_files()
  for i, p in ipairs(files) do
    H.ok(not p:find("%.dat$") and not p:find("%.u8$"), p .. " is a text, not an index or link")
    if i > 1 then H.ok(files[i - 1] < p, "sorted by name") end
  end
  local t0 = tide.clock()
  local ds = data.Fortunes({ block_size = 256, seed = 1 })
  local secs = tide.clock() - t0
  local n = ds:len("all")
  H.ok(n > 1000000, "the corpus is megabytes (" .. n .. " bytes)")
  -- loose bound: the load is one read per file and one copy (about 0.01 s here), but the test
  -- may run under a sanitizer
  H.ok(secs < 5, ("loads in %.3f s"):format(secs))
  H.eq(ds:len("val"), math.floor(n * 0.1))
  -- the validation part is the tail of the sorted files' concatenation
  local parts = {}
  for i, p in ipairs(files) do
    local f = assert(io.open(p, "rb"))
    parts[i] = f:read("a")
    f:close()
  end
  local all = table.concat(parts)
  H.eq(#all, n)
  local x, y = ds:val_batches(2)()
  local v0 = n - ds:len("val")
  H.eq(ds:decode(x[1]), all:sub(v0 + 1, v0 + 256))
  H.eq(ds:decode(y[2]), all:sub(v0 + 258, v0 + 513))
  local xb = ds:batch(4)
  H.eq({ xb:size(1), xb:size(2) }, { 4, 256 })
end)

for _, p in ipairs(tmpfiles) do os.remove(p) end
H.done()
