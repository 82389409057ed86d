#!/usr/bin/python3
"""Writes the tokenizer fixture that tests/lua/test_tokenizer.lua checks tide.models.tokenizer
against. Standard library only; the outputs are committed under tests/lua/data/, so rerun this
only to change them:

    /usr/bin/python3 scripts/gen_tokenizer_fixture.py tests/lua/data

Two files:
  tokenizer_small.bin    a llama2.c tokenizer.bin (int32 max_token_length, then per token a
                         float32 score, an int32 byte length and the bytes), VOCAB_SIZE tokens:
                         <unk>, <s>, </s>, the 256 byte tokens <0x00>..<0xFF> (ids 3..258), the
                         single characters of the training text (newline and tab left out, so
                         they take the byte fallback), then BPE merges learned on that text.
  tokenizer_cases.lua    `return {vocab_size = N, cases = {{text = "...", bos = b, eos = b,
                         ids = {...}}, ...}}`: the ids this file's reference encoder gives for
                         each test string, 0-based as llama2.c numbers them.

The training text is the Debian `fortunes` package's `computers` file when it is installed,
else PARAGRAPH alone; MULTILINGUAL is always added, so accented letters and a few CJK
characters are in the vocabulary while others (TEST_ABSENT) are not. Merge scores come in
equal pairs (-(k // 2) for the k-th merge), so the encoder's tie rule (leftmost pair first) is
exercised too.

encode() below is written from llama2.c's description of its algorithm (run.c's encode), not
from tide's Lua: the dummy-prefix " " token for non-empty text, UTF-8 code points (at most 4
bytes per lookup) looked up in the vocabulary with byte fallback (byte + 3), then the pair whose
concatenation is a token with the highest score (> -1e10; leftmost on ties) merged until none.
"""
import os
import re
import struct
import sys
from collections import Counter

VOCAB_SIZE = 512
FORTUNES = "/usr/share/games/fortunes/computers"
TEST_FORTUNES = "/usr/share/games/fortunes/cookie"

PARAGRAPH = (
    "The tokenizer turns text into numbers. It splits the text into characters, then merges "
    "the pairs that the vocabulary knows, the best scored pair first, until no pair is left "
    "that the vocabulary knows. Characters the vocabulary lacks become their bytes. The model "
    "reads the numbers, one after another, and writes the next one; the decoder turns the "
    "numbers back into text, a piece at a time.\n"
)
MULTILINGUAL = (
    "Caf\u00e9 cr\u00e8me, na\u00efve \u00fcber Z\u00fcrich; gar\u00e7on \u00e0 la "
    "fen\u00eatre. \u65e5\u672c\u8a9e \u65e5\u672c \u4e2d\u6587.\n"
) * 3
TEST_ABSENT = "\u00df \u2211 \U0001F642 \u6f22"  # not in MULTILINGUAL nor (checked) the vocab


def training_text():
    text = PARAGRAPH
    if os.path.exists(FORTUNES):
        with open(FORTUNES, "rb") as f:
            text = f.read().decode("utf-8", errors="ignore")
    return text + MULTILINGUAL


def learn_merges(text, chars, n_merges):
    """Plain BPE over space-prefixed words: the most frequent adjacent pair (ties: the smaller
    pair of strings) becomes a token, n_merges times."""
    words = Counter()
    for line in text.split("\n"):
        for w in re.findall(r" ?[^\s]+", line):
            if all(c in chars for c in w):
                words[tuple(w)] += 1
    merges = []
    known = set(chars)
    while len(merges) < n_merges:
        pairs = Counter()
        for w, n in words.items():
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] += n
        candidates = [(n, p) for p, n in pairs.items() if p[0] + p[1] not in known]
        if not candidates:
            break
        best_n = max(n for n, _ in candidates)
        a, b = min(p for n, p in candidates if n == best_n)
        merged = a + b
        merges.append(merged)
        known.add(merged)
        new_words = Counter()
        for w, n in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and w[i] == a and w[i + 1] == b:
                    out.append(merged)
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            new_words[tuple(out)] += n
        words = new_words
    return merges


def build_vocab():
    text = training_text()
    chars = sorted({c for c in text if c not in "\n\t" and c.isprintable()} | {" "})
    pieces = [b"<unk>", b"<s>", b"</s>"] + [b"<0x%02X>" % i for i in range(256)]
    scores = [0.0] * len(pieces)
    for i, c in enumerate(chars):
        pieces.append(c.encode("utf-8"))
        scores.append(-1000.0 - i)
    merges = learn_merges(text, set(chars), VOCAB_SIZE - len(pieces))
    for k, m in enumerate(merges):
        pieces.append(m.encode("utf-8"))
        scores.append(-float(k // 2))
    assert len(pieces) == VOCAB_SIZE, len(pieces)
    assert len(set(pieces)) == len(pieces), "duplicate pieces"
    for c in TEST_ABSENT.replace(" ", ""):
        assert c.encode("utf-8") not in pieces, c
    return pieces, scores


def write_bin(path, pieces, scores):
    with open(path, "wb") as f:
        f.write(struct.pack("<i", max(len(p) for p in pieces)))
        for p, s in zip(pieces, scores):
            f.write(struct.pack("<fi", s, len(p)))
            f.write(p)


def encode(pieces, scores, text, bos, eos):
    """llama2.c's encode on the bytes of text (0-based ids)."""
    lookup = {}
    for i, p in enumerate(pieces):
        lookup.setdefault(p, i)  # duplicates: the lowest id
    # scores as float32, as the file stores them
    scores = [struct.unpack("<f", struct.pack("<f", s))[0] for s in scores]
    tokens = [1] if bos else []
    if text:
        tokens.append(lookup[b" "])
    buf = b""
    for i, byte in enumerate(text):
        buf += bytes([byte])
        nxt = text[i + 1] if i + 1 < len(text) else 0
        if (nxt & 0xC0) == 0x80 and len(buf) < 4:
            continue
        if buf in lookup:
            tokens.append(lookup[buf])
        else:
            tokens.extend(b + 3 for b in buf)
        buf = b""
    while True:
        best_score, best_id, best_idx = -1e10, -1, -1
        for i in range(len(tokens) - 1):
            tid = lookup.get(pieces[tokens[i]] + pieces[tokens[i + 1]], -1)
            if tid != -1 and scores[tid] > best_score:
                best_score, best_id, best_idx = scores[tid], tid, i
        if best_idx == -1:
            break
        tokens[best_idx:best_idx + 2] = [best_id]
    if eos:
        tokens.append(2)
    return tokens


def test_strings():
    cases = [
        ("", True, False), ("", False, False), ("", True, True),
        ("hello world", True, False), ("hello world", False, False),
        ("hello world", True, True), ("hello world", False, True),
        ("The quick brown fox jumps over the lazy dog.", True, False),
        ("  leading, double  and trailing spaces  ", True, False),
        ("line one\nline two\n\nend\n", True, False),
        ("tab\tseparated\tvalues", True, False),
        ("Caf\u00e9 cr\u00e8me, na\u00efve \u00fcber Z\u00fcrich", True, False),
        ("\u65e5\u672c\u8a9e and \u4e2d\u6587", True, False),
        (TEST_ABSENT, True, False),
        ("Stra\u00dfe \U0001F642!", True, False),
    ]
    raw = [  # bytes that are not valid UTF-8, and an embedded NUL (byte fallback)
        (b"\xff\xfe abc", True, False),
        (b"\x80\x80x", True, False),
        (b"a\xe4\xb8\x80\x80\x80\x80b", True, False),
        (b"\xe6\x97", True, False),
        (b"a\x00b", True, False),
    ]
    out = [(s.encode("utf-8"), b, e) for s, b, e in cases] + raw
    if os.path.exists(FORTUNES):
        with open(FORTUNES, "rb") as f:
            out.append((f.read(2000), True, False))  # long: many merges
    if os.path.exists(TEST_FORTUNES):
        with open(TEST_FORTUNES, "rb") as f:
            lines = [ln for ln in f.read().split(b"\n") if len(ln) > 20]
        out += [(ln, True, False) for ln in lines[100:120]]
    return out


def lua_string(b):
    out = []
    for byte in b:
        c = chr(byte)
        if 32 <= byte < 127 and c not in "\"\\":
            out.append(c)
        else:
            out.append("\\%03d" % byte)
    return '"' + "".join(out) + '"'


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else "tests/lua/data"
    pieces, scores = build_vocab()
    write_bin(os.path.join(outdir, "tokenizer_small.bin"), pieces, scores)
    lines = ["-- Written by scripts/gen_tokenizer_fixture.py: the reference encoder's ids",
             "-- (0-based, llama2.c's numbering) for tokenizer_small.bin.",
             "return {", "  vocab_size = %d," % len(pieces), "  cases = {"]
    for text, bos, eos in test_strings():
        ids = encode(pieces, scores, text, bos, eos)
        lines.append("    { text = %s, bos = %s, eos = %s,\n      ids = { %s } }," % (
            lua_string(text), str(bos).lower(), str(eos).lower(), ", ".join(map(str, ids))))
    lines += ["  },", "}", ""]
    with open(os.path.join(outdir, "tokenizer_cases.lua"), "w") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    main()
