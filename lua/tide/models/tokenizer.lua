-- tide.models.tokenizer — llama2.c's tokenizer.bin: load it, encode text with its score-driven
-- BPE merges and byte fallback, decode ids back to text, one piece at a time or streamed.
--
--   local tokenizer = require "tide.models.tokenizer"
--   local tok = tokenizer.load("tokenizer.bin", 32000)   -- the model's vocab_size
--   local ids = tok:encode("Once upon a time", {bos = true}) -- {2, ...}: a list of ids
--   local emit = tok:streamer()
--   for _, id in ipairs(ids) do io.write(emit(id)) end      -- "Once upon a time"
--
-- Token ids are 1-based, as everywhere in tide (nn.Embedding, cross_entropy, multinomial,
-- tide.models.gpt): the file's i-th token (0-based, llama2.c's id i) is tide's id i + 1. So
-- <unk> is 1, BOS <s> is 2 (tokenizer.BOS), EOS </s> is 3 (tokenizer.EOS) and the byte token
-- <0xNN> for byte b is b + 4. Convert at the edges only (a command line printing llama2.c's ids).
local tide = require "tide"

local tokenizer = {}

tokenizer.UNK, tokenizer.BOS, tokenizer.EOS = 1, 2, 3
local BOS, EOS = tokenizer.BOS, tokenizer.EOS
local BYTE0 = 4          -- tide's id of <0x00>; llama2.c's byte fallback id is byte + 3
local NO_MERGE = -1e10   -- llama2.c's starting best score: a pair must score above it

local Tokenizer = {}
Tokenizer.__index = Tokenizer
tokenizer.Tokenizer = Tokenizer

-- ---- loading ---------------------------------------------------------------------------------

local function read_all(path)
  local f, err = io.open(path, "rb")
  if not f then
    error("tokenizer.load: cannot open " .. tostring(err), 3)
  end
  local data = f:read("a")
  f:close()
  return data
end

-- pieces[id], scores[id] from the file's bytes; errors name the path and what is wrong.
local function parse(data, path)
  local function bad(msg, ...)
    error(("tokenizer.load: %s: " .. msg):format(path, ...), 4)
  end
  if #data < 4 then
    bad("truncated: %d bytes, too short for the int32 max_token_length", #data)
  end
  local max_len, pos = string.unpack("<i4", data)
  if max_len < 1 then
    bad("corrupt: max_token_length is %d", max_len)
  end
  local pieces, scores = {}, {}
  while pos <= #data do
    local n = #pieces + 1
    if pos + 7 > #data then
      bad("truncated in token %d's score and length (offset %d of %d bytes)", n, pos - 1, #data)
    end
    local score, len
    score, len, pos = string.unpack("<fi4", data, pos)
    if len < 0 or len > max_len or score ~= score then
      bad("corrupt: token %d has length %d and score %s (max_token_length %d)", n, len,
          tostring(score), max_len)
    end
    if pos + len - 1 > #data then
      bad("truncated in token %d's %d bytes (offset %d of %d bytes)", n, len, pos - 1, #data)
    end
    pieces[n], scores[n] = data:sub(pos, pos + len - 1), score
    pos = pos + len
  end
  return pieces, scores, max_len
end

-- tokenizer.load(path [, vocab_size]) -> a Tokenizer. vocab_size, when given, must equal the
-- file's token count (llama2.c's check against the model's vocabulary).
function tokenizer.load(path, vocab_size)
  if type(path) ~= "string" then
    error("tokenizer.load: path must be a string, got " .. type(path), 2)
  end
  if vocab_size ~= nil and (math.type(vocab_size) ~= "integer" or vocab_size < 1) then
    error("tokenizer.load: vocab_size must be a positive integer, got " .. tostring(vocab_size), 2)
  end
  local pieces, scores, max_len = parse(read_all(path), path)
  if vocab_size and #pieces ~= vocab_size then
    error(("tokenizer.load: %s holds %d tokens but the model's vocab_size is %d")
      :format(path, #pieces, vocab_size), 2)
  end
  local index = {}
  for id = #pieces, 1, -1 do -- a piece spelled twice maps to its lowest id
    index[pieces[id]] = id
  end
  local has_bytes = #pieces >= BYTE0 + 255
  for b = 0, 255 do
    has_bytes = has_bytes and pieces[BYTE0 + b] == ("<0x%02X>"):format(b)
  end
  return setmetatable({ pieces = pieces, scores = scores, index = index, has_bytes = has_bytes,
                        vocab_size = #pieces, max_token_length = max_len }, Tokenizer)
end

-- ---- encoding --------------------------------------------------------------------------------

local function check_encode_args(text, opts)
  if type(text) ~= "string" then
    error("tokenizer:encode: text must be a string, got " .. type(text), 3)
  end
  if opts ~= nil and type(opts) ~= "table" then
    error("tokenizer:encode: options must be a table {bos=, eos=}, got " .. type(opts), 3)
  end
  for k, v in pairs(opts or {}) do
    if (k ~= "bos" and k ~= "eos") or type(v) ~= "boolean" then
      error(("tokenizer:encode: unknown option or non-boolean value %s = %s (bos, eos)")
        :format(tostring(k), tostring(v)), 3)
    end
  end
end

-- Appends the ids of text's code points to ids, as llama2.c reads them: a lead byte and the
-- continuation bytes after it (at most 4 bytes) looked up as one piece; a piece not in the
-- vocabulary becomes its bytes' <0xNN> tokens. Malformed UTF-8 and NUL bytes take the same path.
function Tokenizer:_code_points(text, ids)
  local start, byte = 1, string.byte
  for i = 1, #text do
    local nxt = byte(text, i + 1)
    if not (nxt and nxt & 0xC0 == 0x80 and i - start + 1 < 4) then
      local id = self.index[text:sub(start, i)]
      if id then
        ids[#ids + 1] = id
      elseif not self.has_bytes then
        error(("tokenizer:encode: %q is not in the vocabulary and it has no <0x00>..<0xFF> "
          .. "byte tokens at ids %d..%d"):format(text:sub(start, i), BYTE0, BYTE0 + 255), 3)
      else
        for j = start, i do
          ids[#ids + 1] = byte(text, j) + BYTE0
        end
      end
      start = i + 1
    end
  end
end

-- A binary max-heap of candidate merges {score, left, ...}: the highest score first, then the
-- smallest left position, which is the leftmost pair (positions keep the text's order).
local function before(a, b)
  return a[1] > b[1] or (a[1] == b[1] and a[2] < b[2])
end

local function heap_push(h, e)
  local i = #h + 1
  h[i] = e
  while i > 1 do
    local parent = i // 2
    if not before(h[i], h[parent]) then
      break
    end
    h[i], h[parent] = h[parent], h[i]
    i = parent
  end
end

local function heap_pop(h)
  local top, n = h[1], #h
  h[1] = h[n]
  h[n] = nil
  local i = 1
  while true do
    local l, r, m = 2 * i, 2 * i + 1, i
    if l < n and before(h[l], h[m]) then m = l end
    if r < n and before(h[r], h[m]) then m = r end
    if m == i then
      return top
    end
    h[i], h[m] = h[m], h[i]
    i = m
  end
end

-- Merges adjacent pairs as llama2.c does: the pair whose concatenation is a token with the
-- highest score (the leftmost of equal scores), until no pair is a token scoring above -1e10.
-- llama2.c rescans every pair after each merge (quadratic: seconds for a page of text in
-- Lua); here the tokens form a linked list by text position and the candidate pairs a heap.
-- A merge changes only its neighbours' pairs: it bumps the left token's version and kills the
-- right one, so heap entries for pairs that no longer exist are recognized and skipped. The
-- heap's top valid entry is llama2.c's choice at every step, so the result is the same.
function Tokenizer:_merge(ids)
  local pieces, scores, index = self.pieces, self.scores, self.index
  local n, nxt, prv, version, heap = #ids, {}, {}, {}, {}
  local function candidate(left, right)
    local id = left and right and index[pieces[ids[left]] .. pieces[ids[right]]]
    if id and scores[id] > NO_MERGE then
      heap_push(heap, { scores[id], left, right, id, version[left], version[right] })
    end
  end
  for i = 1, n do
    nxt[i], prv[i], version[i] = i < n and i + 1 or false, i > 1 and i - 1 or false, 0
  end
  for i = 1, n - 1 do
    candidate(i, i + 1)
  end
  while #heap > 0 do
    local e = heap_pop(heap)
    local left, right = e[2], e[3]
    if nxt[left] == right and version[left] == e[5] and version[right] == e[6] then
      ids[left], version[left], version[right] = e[4], version[left] + 1, -1
      nxt[left] = nxt[right]
      if nxt[right] then prv[nxt[right]] = left end
      candidate(prv[left], left)
      candidate(left, nxt[left])
    end
  end
  local out, i = {}, n > 0 and 1 or false
  while i do
    out[#out + 1], i = ids[i], nxt[i]
  end
  return out
end

-- tok:encode(text [, {bos = true, eos = false}]) -> a list of 1-based ids: BOS if asked, the
-- dummy-prefix " " token when text is not empty (llama2.c, after SentencePiece), text's code
-- points merged, EOS if asked.
function Tokenizer:encode(text, opts)
  check_encode_args(text, opts)
  local bos = not (opts and opts.bos == false)
  local ids = { bos and BOS or nil }
  if #text > 0 then
    local space = self.index[" "]
    if not space then
      error("tokenizer:encode: the vocabulary has no \" \" token (llama2.c's dummy prefix)", 2)
    end
    ids[#ids + 1] = space
    self:_code_points(text, ids)
  end
  ids = self:_merge(ids)
  if opts and opts.eos then
    ids[#ids + 1] = EOS
  end
  return ids
end

-- ---- decoding --------------------------------------------------------------------------------

local function check_id(self, id, what, where)
  if math.type(id) ~= "integer" and not (math.type(id) == "float" and id == math.floor(id)) then
    error(("tokenizer:%s: %s must be an integer token id, got %s"):format(where, what,
      tostring(id)), 3)
  end
  if id < 1 or id > self.vocab_size then
    error(("tokenizer:%s: %s %s is not in 1..%d"):format(where, what, tostring(id),
      self.vocab_size), 3)
  end
  return math.tointeger(id)
end

-- tok:decode(prev_id, id) -> id's text as llama2.c's decode gives it: the piece, without its
-- leading space when prev_id is BOS, and a <0xNN> token as the raw byte. prev_id may be nil.
function Tokenizer:decode(prev_id, id)
  id = check_id(self, id, "id", "decode")
  if prev_id ~= nil then
    prev_id = check_id(self, prev_id, "prev_id", "decode")
  end
  local piece = self.pieces[id]
  if prev_id == BOS and piece:byte(1) == 32 then
    piece = piece:sub(2)
  end
  local hex = piece:match("^<0x(%x%x)>$")
  return hex and string.char(tonumber(hex, 16)) or piece
end

-- tok:decode_ids(ids) -> the text of a list (or int64 tensor) of ids: each id's decode after
-- the one before it, BOS and EOS giving nothing. decode_ids(encode(s)) == s for any string.
function Tokenizer:decode_ids(ids)
  local t = tide.is_tensor(ids) and ids:reshape(-1):totable() or ids
  if type(t) ~= "table" then
    error("tokenizer:decode_ids: ids must be a list or a tensor of token ids, got " .. type(ids), 2)
  end
  local out, prev = {}, nil
  for i, id in ipairs(t) do
    id = check_id(self, id, "token " .. i, "decode_ids")
    if id ~= BOS and id ~= EOS then
      out[#out + 1] = self:decode(prev, id)
    end
    prev = id
  end
  return table.concat(out)
end

-- ---- streaming -------------------------------------------------------------------------------

local REPLACEMENT = "\u{FFFD}"

-- The length of the UTF-8 sequence lead byte b starts; nil when b cannot start one.
local function sequence_length(b)
  if b < 0x80 then
    return 1
  elseif b >= 0xC2 and b <= 0xDF then
    return 2
  elseif b >= 0xE0 and b <= 0xEF then
    return 3
  elseif b >= 0xF0 and b <= 0xF4 then
    return 4
  end
  return nil
end

local function is_continuation(s, from, to)
  for i = from, to do
    if s:byte(i) & 0xC0 ~= 0x80 then
      return false
    end
  end
  return true
end

-- Splits buf into printable text and the bytes at its end that start a character the next
-- piece may complete. Printable: ASCII control bytes other than whitespace are dropped (as
-- llama2.c's safe_printf drops them, so a stray token cannot drive the terminal), and a byte
-- that starts no valid UTF-8 character becomes U+FFFD.
local function printable(buf)
  local out, i, n = {}, 1, #buf
  while i <= n do
    local b = buf:byte(i)
    local len = sequence_length(b)
    if len == 1 then
      if b >= 32 and b ~= 127 or (b >= 9 and b <= 13) then
        out[#out + 1] = string.char(b)
      end
      i = i + 1
    elseif len and i + len - 1 > n and is_continuation(buf, i + 1, n) then
      return table.concat(out), buf:sub(i)
    elseif len and i + len - 1 <= n and utf8.len(buf, i, i + len - 1) == 1 then
      out[#out + 1] = buf:sub(i, i + len - 1)
      i = i + len
    else
      out[#out + 1] = REPLACEMENT
      i = i + 1
    end
  end
  return table.concat(out), ""
end

-- tok:streamer() -> emit: emit(id) returns the printable text that token id completes ("" while
-- a character's bytes are still arriving in byte tokens), decoding each id after the one
-- before it as decode does; BOS and EOS give "". emit() at the end returns U+FFFD if an
-- incomplete character is left, else "".
function Tokenizer:streamer()
  local prev, held = nil, ""
  return function(id)
    if id == nil then
      local left = held
      held = ""
      return left ~= "" and REPLACEMENT or ""
    end
    id = check_id(self, id, "id", "streamer")
    local piece = (id == BOS or id == EOS) and "" or self:decode(prev, id)
    prev = id
    local text
    text, held = printable(held .. piece)
    return text
  end
end

return tokenizer
