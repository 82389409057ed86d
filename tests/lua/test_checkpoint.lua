-- test_checkpoint.lua — tide.save / tide.load (safetensors) and tide.save_npy / load_npy from
-- Lua: round trips across dtypes and shapes, nested tables flattened with dotted names,
-- metadata, the bytes on disk (header read back by hand), a file written by hand in Lua, and
-- crafted bad files (truncated, garbage, lying header, huge lengths): a Lua error, no crash.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local H = require "harness"
local tide = require "tide"
local nn = require "tide.nn"

local function tmp()
  return os.tmpname()
end

local function read_all(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

local function write_all(path, s)
  local f = assert(io.open(path, "wb"))
  f:write(s)
  f:close()
end

local function tensors_by_dtype()
  return {
    f32 = tide.tensor({ { 1.5, -2.25, 3 }, { 0, 1e-30, -1e30 } }, { dtype = "float32" }),
    f64 = tide.tensor({ math.pi, -1 / 3, 1e300 }, { dtype = "float64" }),
    i32 = tide.tensor({ -2147483648, 0, 2147483647 }, { dtype = "int32" }),
    i64 = tide.tensor({ math.mininteger, -1, math.maxinteger }, { dtype = "int64" }),
    u8 = tide.tensor({ { 0, 255 }, { 7, 128 } }, { dtype = "uint8" }),
    b = tide.tensor({ true, false, true }),
    scalar = tide.tensor(2.5),
    empty = tide.zeros(0, 3),
  }
end

H.test("save -> load round trips across dtypes, 0-dim and empty tensors", function()
  local path = tmp()
  local src = tensors_by_dtype()
  tide.save(path, src)
  local got, meta = tide.load(path)
  os.remove(path)
  H.eq(next(meta), nil, "no metadata")
  for name, t in pairs(src) do
    local g = got[name]
    H.ok(g ~= nil, name .. " loaded")
    H.eq(g.dtype, t.dtype, name)
    H.eq(g:size(), t:size(), name)
    H.ok(tide.equal(g, t), name .. " values")
  end
  local n = 0
  for _ in pairs(got) do n = n + 1 end
  H.eq(n, 8)
end)

H.test("nested tables become dotted names; numbers and strings go to metadata", function()
  local path = tmp()
  local w = tide.randn(3, 4)
  tide.save(path, { model = { layers = { w, { bias = tide.ones(2) } } }, epoch = 3, lr = 0.1,
                    name = "mlp", flag = true }, { note = "hello", third = 1 / 3 })
  local got, meta = tide.load(path)
  os.remove(path)
  H.ok(tide.equal(got["model.layers.1"], w), "model.layers.1")
  H.ok(tide.equal(got["model.layers.2.bias"], tide.ones(2)), "model.layers.2.bias")
  H.eq(meta.epoch, "3")
  H.eq(tonumber(meta.lr), 0.1, "floats keep every digit")
  H.eq(tonumber(meta.third), 1 / 3)
  H.eq(meta.name, "mlp")
  H.eq(meta.flag, "true")
  H.eq(meta.note, "hello")
end)

H.test("a non-contiguous tensor is written row-major", function()
  local path = tmp()
  local x = tide.arange(12, { dtype = "float32" }):view(3, 4)
  tide.save(path, { xt = x:t(), col = x:select(2, 2) })
  local got = tide.load(path)
  os.remove(path)
  H.ok(tide.equal(got.xt, x:t()), "transpose")
  H.values(got.col, { 1, 5, 9 })
  H.ok(got.xt:is_contiguous(), "loaded contiguous")
end)

H.test("the bytes on disk: 8-byte length, JSON header, little-endian data", function()
  local path = tmp()
  tide.save(path, { a = tide.tensor({ 1.0, -2.0 }, { dtype = "float32" }),
                    b = tide.tensor({ 7 }, { dtype = "int64" }) })
  local s = read_all(path)
  os.remove(path)
  local hlen = string.unpack("<I8", s)
  H.eq(hlen % 8, 0, "header padded to 8 bytes")
  local header = s:sub(9, 8 + hlen)
  H.ok(header:find('"a":{"dtype":"F32","shape":[2],"data_offsets":[', 1, true), header)
  H.ok(header:find('"b":{"dtype":"I64","shape":[1],"data_offsets":[', 1, true), header)
  local data = s:sub(9 + hlen)
  H.eq(#data, 16)
  -- the reference library orders by dtype size then name: b (8 bytes) first
  H.eq(string.unpack("<i8", data, 1), 7)
  H.eq(string.unpack("<f", data, 9), 1.0)
  H.eq(string.unpack("<f", data, 13), -2.0)
end)

H.test("a file written by hand in Lua loads", function()
  local header = '{"w":{"dtype":"F64","shape":[2,2],"data_offsets":[0,32]},' ..
    '"__metadata__":{"format":"pt"}}'
  header = header .. string.rep(" ", (8 - #header % 8) % 8)
  local body = string.pack("<dddd", 1, 2, 3, 4)
  local path = tmp()
  write_all(path, string.pack("<I8", #header) .. header .. body)
  local got, meta = tide.load(path)
  H.values(got.w, { { 1, 2 }, { 3, 4 } })
  H.eq(got.w.dtype, "float64")
  H.eq(meta.format, "pt")
  os.remove(path)
end)

H.test("a module's state_dict through a file", function()
  tide.manual_seed(4)
  local a = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))
  local b = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))
  local path = tmp()
  tide.save(path, a:state_dict())
  b:load_state_dict((tide.load(path)))
  os.remove(path)
  a:eval()
  b:eval()
  local x = tide.randn(5, 3)
  H.ok(tide.equal(a(x), b(x)), "same outputs")
end)

H.test("save errors: bad values, cycles, bad paths, name clashes", function()
  local path = tmp()
  H.raises(function() tide.save(path, { f = print }) end, "'f' is a function")
  local cyc = {}
  cyc.self = cyc
  H.raises(function() tide.save(path, { c = cyc }) end, "nested deeper")
  H.raises(function() tide.save(path, tide.zeros(2)) end, "single tensor")
  H.raises(function() tide.save("/nonexistent-dir/x.safetensors", { a = tide.zeros(1) }) end,
           "/nonexistent-dir/x.safetensors")
  H.raises(function() tide.save(path, { a = { b = tide.zeros(1) }, ["a.b"] = tide.zeros(1) }) end,
           "a.b")
  H.raises(function() tide.save(path, { [1.5] = tide.zeros(1) }) end, "keys must be strings")
  os.remove(path)
end)

-- A valid file to corrupt: header + data of one F32 [4] tensor.
local function valid_file()
  local header = '{"x":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}'
  header = header .. string.rep(" ", (8 - #header % 8) % 8)
  return string.pack("<I8", #header) .. header .. string.pack("<ffff", 1, 2, 3, 4), #header
end

H.test("load errors on crafted bad files: a Lua error naming load, never a crash", function()
  local path = tmp()
  local good, hlen = valid_file()
  write_all(path, good)
  H.values(tide.load(path).x, { 1, 2, 3, 4 })
  local cases = {
    { "empty file", "" },
    { "truncated length", good:sub(1, 5) },
    { "truncated header", good:sub(1, 20) },
    { "truncated data", good:sub(1, #good - 3) },
    { "huge header length", string.pack("<I8", 0x7fffffffffffffff) .. good:sub(9) },
    { "header length past the end", string.pack("<I8", #good) .. good:sub(9) },
    { "garbage", string.rep("\255", 64) },
    { "not JSON", string.pack("<I8", 8) .. "notjson!" },
    { "offsets past the data",
      (good:gsub('"data_offsets":%[0,16%]', '"data_offsets":[0,99]')) },
    { "offsets not matching the shape",
      (good:gsub('"shape":%[4%]', '"shape":[5]')) },
    { "huge shape", (good:gsub('"shape":%[4%]', '"shape":[4611686018427387904]')) },
    { "unknown dtype", (good:gsub('"F32"', '"Q32"')) },
  }
  for _, c in ipairs(cases) do
    write_all(path, c[2])
    local ok, err = pcall(tide.load, path)
    H.ok(not ok, c[1] .. ": expected an error")
    H.ok(tostring(err):find("load", 1, true), c[1] .. ": " .. tostring(err))
  end
  -- every truncation of the valid file
  for n = 0, #good - 1 do
    write_all(path, good:sub(1, n))
    H.ok(not pcall(tide.load, path), "truncated to " .. n .. " bytes")
  end
  -- single corrupted bytes in the header: an error or a consistent load, never a crash
  for i = 9, 8 + hlen, 3 do
    write_all(path, good:sub(1, i - 1) .. "\0" .. good:sub(i + 1))
    local ok, got = pcall(tide.load, path)
    if ok then H.ok(type(got) == "table", "byte " .. i) end
  end
  os.remove(path)
  H.raises(function() tide.load(path) end, "load", path)
end)

H.test("save_npy -> load_npy round trips across dtypes; bad files", function()
  local path = tmp()
  for name, t in pairs(tensors_by_dtype()) do
    tide.save_npy(path, t)
    local g = tide.load_npy(path)
    H.eq(g.dtype, t.dtype, name)
    H.eq(g:size(), t:size(), name)
    H.ok(tide.equal(g, t), name)
  end
  local x = tide.arange(6, { dtype = "float64" }):view(2, 3)
  tide.save_npy(path, x:t())
  H.ok(tide.equal(tide.load_npy(path), x:t()), "transpose row-major")
  local s = read_all(path)
  H.eq(s:sub(1, 6), "\147NUMPY")
  H.ok(s:find("'descr': '<f8', 'fortran_order': False, 'shape': (3, 2), }", 1, true), s:sub(1, 80))
  for n = 0, #s - 1, 7 do
    write_all(path, s:sub(1, n))
    H.ok(not pcall(tide.load_npy, path), "truncated npy " .. n)
  end
  write_all(path, s:gsub("False", "True "))
  H.raises(function() tide.load_npy(path) end, "load_npy", "fortran")
  write_all(path, s:gsub("%(3, 2%)", "(9, 9)"))
  H.raises(function() tide.load_npy(path) end, "load_npy")
  H.raises(function() tide.save_npy(path, {}) end, "save_npy")
  os.remove(path)
end)

local function shell_quote(s)
  return "'" .. s:gsub("'", "'\\''") .. "'"
end

-- The command that started this script (arg[-1] and before: "lua5.4" or the tide program).
local function interpreter()
  local i = -1
  while arg[i - 1] do
    i = i - 1
  end
  local parts = {}
  for k = i, -1 do
    parts[#parts + 1] = shell_quote(arg[k])
  end
  return table.concat(parts, " ")
end

H.test("loaders refuse a FIFO, a socket and a directory at once, saying what it is", function()
  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir " .. shell_quote(dir)))
  H.raises(function() tide.load(dir) end, "load_safetensors", dir, "not a regular file: it is a directory")
  local fifo, sock = dir .. "/pipe.st", dir .. "/sock.npy"
  local have_fifo = os.execute("mkfifo " .. shell_quote(fifo) .. " 2>/dev/null")
  -- a socket file, where python3 is at hand to bind one
  local have_sock = os.execute("python3 -c 'import socket,sys; socket.socket(socket.AF_UNIX)" ..
    ".bind(sys.argv[1])' " .. shell_quote(sock) .. " 2>/dev/null")
  local cases = {}
  if have_fifo then cases[#cases + 1] = { fifo, "a named pipe (FIFO)" } end
  if have_sock then cases[#cases + 1] = { sock, "a socket" } end
  for _, c in ipairs(cases) do
    -- in a child under `timeout`: a loader that blocked (opening a FIFO used to wait forever
    -- for a writer) cannot hang the suite
    local code = ([[local tide = require "tide"
      for _, f in ipairs({ "load", "load_npy", "load_idx" }) do
        local ok, err = pcall(tide[f], %q)
        io.write(f, " -> ", tostring(ok), ": ", tostring(err), "\n")
      end]]):format(c[1])
    local p = io.popen("timeout 20 " .. interpreter() .. " -e " .. shell_quote(code) .. " 2>&1")
    local out = p:read("a")
    local ok, _, rc = p:close()
    H.ok(ok, ("the child answered at once for %s (exit %s): %s"):format(c[2], tostring(rc), out))
    for _, f in ipairs({ "load", "load_npy", "load_idx" }) do
      local line = out:match(f .. " %-> [^\n]*") or ""
      H.ok(line:find("false: ", 1, true) and line:find(c[1], 1, true) and
        line:find("not a regular file: it is " .. c[2], 1, true), f .. " on " .. c[2] .. ": " .. line)
    end
  end
  if have_fifo then -- a dataset folder whose image file is a FIFO: an error, not a hang
    local root = dir .. "/ds"
    assert(os.execute("mkdir " .. shell_quote(root)))
    assert(os.execute("mkfifo " .. shell_quote(root .. "/train-images-idx3-ubyte")))
    assert(os.execute("touch " .. shell_quote(root .. "/train-labels-idx1-ubyte")))
    local code = ([[local ok, err = pcall(require("tide.data").FashionMNIST, %q)
      io.write(tostring(ok), ": ", tostring(err), "\n")]]):format(root)
    local p = io.popen("timeout 20 " .. interpreter() .. " -e " .. shell_quote(code) .. " 2>&1")
    local out = p:read("a")
    local ok = p:close()
    H.ok(ok and out:find("false: ", 1, true) and
      out:find("not a regular file: it is a named pipe (FIFO)", 1, true),
      "FashionMNIST over a FIFO answers at once: " .. out)
    os.execute("rm -rf " .. shell_quote(root))
  end
  os.remove(fifo)
  os.remove(sock)
  os.remove(dir)
  if not have_fifo or not have_sock then
    print(("  (no %s here: not covered)"):format(not have_fifo and "mkfifo" or "python3 for a socket"))
  end
end)

H.test("isatty and clock", function()
  H.eq(type(tide.isatty()), "boolean")
  H.eq(type(tide.isatty(io.stderr)), "boolean")
  H.eq(tide.isatty(-1), false)
  local f = io.tmpfile()
  H.eq(tide.isatty(f), false)
  f:close()
  H.raises(function() tide.isatty(f) end, "closed file")
  local t0 = tide.clock()
  H.ok(tide.clock() >= t0, "monotonic")
end)

H.done()
