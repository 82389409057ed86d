-- test_tokenizer.lua — tide.models.tokenizer (llama2.c's tokenizer.bin): encode against an
-- independent Python reference (data/tokenizer_small.bin and data/tokenizer_cases.lua, written
-- by scripts/gen_tokenizer_fixture.py), decode round trips, byte fallback, BOS/EOS, the tie rule,
-- streaming multibyte text split across byte tokens, a 32000-token vocabulary's load time, and
-- every error. No numerics: ids and strings compare exactly.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local H = require "harness"
local tide = require "tide"
local tokenizer = require "tide.models.tokenizer"

local DATA = (arg[0]:match("(.*/)") or "./") .. "data/"
local SMALL = DATA .. "tokenizer_small.bin"
local fixture = dofile(DATA .. "tokenizer_cases.lua")
local tok = tokenizer.load(SMALL, fixture.vocab_size)
local BYTE0 = 4 -- tide's id of <0x00> (llama2.c's 3)

local tmpfiles = {}
local function write_tmp(bytes)
  local path = os.tmpname()
  local f = assert(io.open(path, "wb"))
  f:write(bytes)
  f:close()
  tmpfiles[#tmpfiles + 1] = path
  return path
end

-- A tokenizer.bin from a list of pieces (scores default 0).
local function vocab_file(pieces, scores)
  local max_len = 1
  local parts = {}
  for i, p in ipairs(pieces) do
    max_len = math.max(max_len, #p)
    parts[i] = string.pack("<fi4", scores and scores[i] or 0, #p) .. p
  end
  return write_tmp(string.pack("<i4", max_len) .. table.concat(parts))
end

local function read_file(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

local function errors_with(fn, ...)
  local ok, err = pcall(fn)
  assert(not ok, "expected an error")
  for _, want in ipairs({ ... }) do
    if not tostring(err):find(want, 1, true) then
      error(("expected %q in the error: %s"):format(want, tostring(err)), 2)
    end
  end
end

H.test("load: the fixture's vocabulary", function()
  H.eq(tok.vocab_size, 512)
  H.eq(tok:decode(nil, tokenizer.UNK), "<unk>")
  H.eq(tok:decode(nil, tokenizer.BOS), "<s>")
  H.eq(tok:decode(nil, tokenizer.EOS), "</s>")
  H.eq(tok.has_bytes, true)
  assert(tide.models.tokenizer == tokenizer, "tide.models.tokenizer is the module")
  H.eq(tokenizer.load(SMALL).vocab_size, 512) -- no vocab_size: no check
end)

H.test("encode: the Python reference's ids on every fixture string (llama2.c's + 1)", function()
  H.eq(#fixture.cases >= 20, true)
  for _, c in ipairs(fixture.cases) do
    local want = {}
    for i, id in ipairs(c.ids) do
      want[i] = id + 1
    end
    local got = tok:encode(c.text, { bos = c.bos, eos = c.eos })
    if table.concat(got, ",") ~= table.concat(want, ",") then
      error(("encode(%q, bos=%s, eos=%s):\n  got  %s\n  want %s"):format(c.text, c.bos, c.eos,
        table.concat(got, " "), table.concat(want, " ")))
    end
  end
end)

H.test("decode_ids(encode(s)) == s, also for bytes that are not UTF-8 and NUL", function()
  for _, c in ipairs(fixture.cases) do
    H.eq(tok:decode_ids(tok:encode(c.text, { bos = true, eos = c.eos })), c.text)
  end
  -- without BOS the dummy-prefix space is not stripped, as in llama2.c
  H.eq(tok:decode_ids(tok:encode("hello", { bos = false })), " hello")
  local ids = tok:encode("hello world")
  H.eq(tok:decode_ids(tide.tensor(ids, { dtype = "int64" })), "hello world")
end)

H.test("byte fallback: code points not in the vocabulary become <0xNN> tokens (byte + 4)", function()
  local space = tok:encode(" ", { bos = false })[1]
  H.eq(tok:decode(nil, space), " ")
  -- U+00DF (C3 9F) is absent; the dummy-prefix space does not merge with a byte token
  H.eq(tok:encode("\u{DF}", { bos = false }), { space, 0xC3 + BYTE0, 0x9F + BYTE0 })
  H.eq(tok:encode("\u{1F642}", { bos = false }),
       { space, 0xF0 + BYTE0, 0x9F + BYTE0, 0x99 + BYTE0, 0x82 + BYTE0 })
  -- "\n" is not a token in this vocabulary: its byte token, decoded to the raw byte
  local nl = tok:encode("\n", { bos = false })
  H.eq(nl[#nl], 10 + BYTE0)
  H.eq(tok:decode(nl[1], nl[#nl]), "\n")
  H.eq(tok:decode(nil, 0xC3 + BYTE0), "\xC3")
  -- a character that is in the vocabulary is one token
  local e = tok:encode("\u{E9}", { bos = false })
  H.eq(#e <= 2, true)
  H.eq(tok:decode(nil, e[#e]):sub(-2), "\u{E9}")
end)

H.test("BOS and EOS options; decode strips the space after BOS", function()
  H.eq(tok:encode(""), { tokenizer.BOS })
  H.eq(tok:encode("", { bos = false }), {})
  H.eq(tok:encode("", { eos = true }), { tokenizer.BOS, tokenizer.EOS })
  local plain = tok:encode("hi there", { bos = false })
  local both = tok:encode("hi there", { bos = true, eos = true })
  H.eq(#both, #plain + 2)
  H.eq(both[1], tokenizer.BOS)
  H.eq(both[#both], tokenizer.EOS)
  H.eq(table.concat(plain, ","), table.concat(both, ",", 2, #both - 1))
  local first = tok:decode(nil, plain[1])
  H.eq(first:sub(1, 1), " ")
  H.eq(tok:decode(tokenizer.BOS, plain[1]), first:sub(2))
end)

H.test("merges: the highest score first, the leftmost pair on equal scores", function()
  local base = { "<unk>", "<s>", "</s>", " ", "a", "b", "ab", "ba" }
  local t = tokenizer.load(vocab_file(base, { 0, 0, 0, -1, -1, -1, 0, 0 }))
  -- " a b a": "ab" and "ba" score the same, "ab" is leftmost
  H.eq(t:encode("aba", { bos = false }), { 4, 7, 5 })
  H.eq(t:encode("bab", { bos = false }), { 4, 8, 6 })
  -- "ba" scores higher: it goes first though "ab" is further left
  local t2 = tokenizer.load(vocab_file(base, { 0, 0, 0, -1, -1, -1, 0, 0.5 }))
  H.eq(t2:encode("aba", { bos = false }), { 4, 5, 8 })
  -- a score at or below llama2.c's -1e10 never merges
  local t3 = tokenizer.load(vocab_file(base, { 0, 0, 0, -1, -1, -1, -1e10, -2e10 }))
  H.eq(t3:encode("aba", { bos = false }), { 4, 5, 6, 5 })
  -- no byte tokens in this vocabulary: a character outside it is a clear error
  errors_with(function() t:encode("c") end, "tokenizer:encode", "\"c\"", "byte tokens")
  local no_space = tokenizer.load(vocab_file({ "<unk>", "<s>", "</s>", "a" }))
  errors_with(function() no_space:encode("a") end, "dummy prefix")
  H.eq(no_space:encode(""), { tokenizer.BOS })
end)

-- The pieces a streamer gives for ids, one per id, then the flush.
local function stream_pieces(ids)
  local emit = tok:streamer()
  local out = {}
  for i, id in ipairs(ids) do
    out[i] = emit(id)
  end
  out[#out + 1] = emit()
  return out
end

H.test("streamer: multibyte characters split across byte tokens come out whole", function()
  local text = "Stra\u{DF}e \u{1F642}! Caf\u{E9} \u{65E5}\u{672C}"
  local ids = tok:encode(text)
  local pieces = stream_pieces(ids)
  H.eq(table.concat(pieces), text)
  for i, p in ipairs(pieces) do
    assert(utf8.len(p), ("piece %d (%q) is valid UTF-8"):format(i, p))
  end
  -- the emoji's four byte tokens: three give "", the last the whole character
  local at
  for i, id in ipairs(ids) do
    if id == 0xF0 + BYTE0 then at = i end
  end
  H.eq({ pieces[at], pieces[at + 1], pieces[at + 2] }, { "", "", "" })
  H.eq(pieces[at + 3]:sub(1, 4), "\u{1F642}")
  H.eq(pieces[1], "") -- BOS
end)

H.test("streamer: control bytes dropped, invalid bytes as U+FFFD, a cut character flushed", function()
  H.eq(table.concat(stream_pieces(tok:encode("a\0b\1c\n"))), "abc\n")
  H.eq(table.concat(stream_pieces(tok:encode("\xFF\xFE abc"))), "\u{FFFD}\u{FFFD} abc")
  local cut = stream_pieces(tok:encode("x\xE6\x97"))
  H.eq(cut[#cut], "\u{FFFD}")
  H.eq(table.concat(cut), "x\u{FFFD}")
  -- a lead byte followed by a non-continuation byte
  H.eq(table.concat(stream_pieces(tok:encode("\xE6a"))), "\u{FFFD}a")
  -- EOS gives nothing; decode gives llama2.c's piece
  H.eq(table.concat(stream_pieces(tok:encode("ok", { eos = true }))), "ok")
end)

H.test("a 32000-token vocabulary loads in well under a second", function()
  local pieces = { "<unk>", "<s>", "</s>" }
  for b = 0, 255 do
    pieces[#pieces + 1] = ("<0x%02X>"):format(b)
  end
  local i = 0
  while #pieces < 32000 do
    i = i + 1
    pieces[#pieces + 1] = " w" .. i
  end
  local path = vocab_file(pieces)
  local t0 = tide.clock()
  local big = tokenizer.load(path, 32000)
  local dt = tide.clock() - t0
  print(("  32000 tokens loaded in %.1f ms"):format(dt * 1000))
  H.eq(big.vocab_size, 32000)
  H.eq(big:decode(nil, 32000), " w" .. i)
  assert(dt < 1.0, "load took " .. dt .. " s")
end)

H.test("errors: vocabulary size, truncated and corrupt files, bad arguments", function()
  errors_with(function() tokenizer.load(SMALL, 32000) end, "512 tokens", "vocab_size is 32000")
  local bytes = read_file(SMALL)
  errors_with(function() tokenizer.load(write_tmp(bytes:sub(1, 2))) end, "truncated")
  errors_with(function() tokenizer.load(write_tmp(bytes:sub(1, 10))) end, "truncated", "token 1")
  errors_with(function() tokenizer.load(write_tmp(bytes:sub(1, 14))) end, "truncated", "token 1")
  errors_with(function() tokenizer.load(write_tmp(bytes:sub(1, -2))) end, "truncated", "token 512")
  errors_with(function() tokenizer.load(write_tmp(bytes .. "\0\0")) end, "truncated", "token 513")
  local negative = string.pack("<i4fi4", 8, 0, -3) .. "abc"
  errors_with(function() tokenizer.load(write_tmp(negative)) end, "corrupt", "length -3")
  errors_with(function() tokenizer.load(write_tmp(string.pack("<i4", 0))) end, "corrupt")
  errors_with(function() tokenizer.load("/nonexistent/tokenizer.bin") end, "cannot open",
              "/nonexistent/tokenizer.bin")
  errors_with(function() tokenizer.load(SMALL, 0) end, "vocab_size must be a positive integer")
  errors_with(function() tokenizer.load(42) end, "path must be a string")
  errors_with(function() tok:encode(42) end, "text must be a string, got number")
  errors_with(function() tok:encode(nil) end, "text must be a string, got nil")
  errors_with(function() tok:encode("a", { bos = 1 }) end, "bos = 1")
  errors_with(function() tok:encode("a", { bsos = true }) end, "unknown option")
  errors_with(function() tok:encode("a", true) end, "options must be a table")
  errors_with(function() tok:decode(nil, 0) end, "id 0 is not in 1..512")
  errors_with(function() tok:decode(nil, 513) end, "not in 1..512")
  errors_with(function() tok:decode(nil, "a") end, "must be an integer token id")
  errors_with(function() tok:decode(0, 5) end, "prev_id 0 is not in 1..512")
  errors_with(function() tok:decode(nil, math.huge) end, "inf is not in 1..512")
  errors_with(function() tok:decode_ids({ 5, 1.5 }) end, "token 2", "integer")
  errors_with(function() tok:decode_ids("abc") end, "a list or a tensor")
  errors_with(function() tok:streamer()(600) end, "600 is not in 1..512")
end)

for _, p in ipairs(tmpfiles) do
  os.remove(p)
end
H.done()
