# bpe.py — byte-level BPE for petrel's demo model, trained from scratch on the corpus.
#
# Conventions are those of GGUF `tokenizer.ggml.model = gpt2`, `tokenizer.ggml.pre = glm4`:
# text is split by the glm4 pre-tokenizer regex (llama.cpp's llama3 regex: \p{N}{1,3} digit
# groups), each piece's UTF-8 bytes are mapped through GPT-2's byte-to-unicode table, and merges
# are applied by rank. Vocabulary order: the 256 byte symbols in GPT-2 table order, then one
# token per merge in merge order, then the chat special tokens (CONTROL), as in the glm-dsa
# fixture of ../shared/fixtures.
import collections
import json

try:
    import regex as _re
    PRE = _re.compile(
        r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
        r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
except ImportError:  # plain `re`: the same regex for text whose letters/digits re's \w classifies alike
    import re as _re
    PRE = _re.compile(
        r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|(?:[^\r\n\w]|_)?[^\W\d_]+|\d{1,3}|"
        r" ?(?:[^\s\w]|_)+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

SPECIALS = ["<|endoftext|>", "[MASK]", "[gMASK]", "[sMASK]", "<sop>", "<eop>", "<|system|>", "<|user|>",
            "<|assistant|>", "<|observation|>", "<think>", "</think>", "<tool_call>", "</tool_call>"]


def bytes_to_unicode():
    """GPT-2's reversible byte -> printable unicode character table, in its canonical order."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return bs, [chr(c) for c in cs]


BYTE_ORDER, BYTE_CHARS = bytes_to_unicode()
B2U = {b: c for b, c in zip(BYTE_ORDER, BYTE_CHARS)}


def pieces(text):
    for m in PRE.finditer(text):
        yield "".join(B2U[b] for b in m.group(0).encode("utf-8"))


def train(texts, n_merges, log=print):
    """Learn n_merges merges from an iterable of texts; returns the list of (a, b) pairs."""
    counts = collections.Counter()
    for t in texts:
        counts.update(pieces(t))
    words = [list(w) for w in counts]
    freq = [counts[w] for w in counts]
    pair_n = collections.Counter()
    where = collections.defaultdict(set)
    for i, w in enumerate(words):
        for a, b in zip(w, w[1:]):
            pair_n[(a, b)] += freq[i]
            where[(a, b)].add(i)
    merges = []
    for step in range(n_merges):
        if not pair_n:
            break
        # most frequent pair; ties broken by the pair itself so training is deterministic
        best = max(pair_n.items(), key=lambda kv: (kv[1], kv[0]))[0]
        if pair_n[best] < 2:
            break
        merges.append(best)
        a, b = best
        ab = a + b
        for i in list(where[best]):
            w = words[i]
            f = freq[i]
            for p in zip(w, w[1:]):
                pair_n[p] -= f
                if pair_n[p] <= 0:
                    del pair_n[p]
            nw, j = [], 0
            while j < len(w):
                if j + 1 < len(w) and w[j] == a and w[j + 1] == b:
                    nw.append(ab)
                    j += 2
                else:
                    nw.append(w[j])
                    j += 1
            words[i] = nw
            for p in zip(nw, nw[1:]):
                pair_n[p] += f
                where[p].add(i)
        del where[best]
        if log and (step + 1) % 1000 == 0:
            log(f"bpe: {step + 1} merges")
    return merges


class Tokenizer:
    """Vocabulary + merges; encode() reproduces llama.cpp's gpt2/glm4 tokenisation of plain text
    (special-token text is not parsed; use ids for specials)."""

    def __init__(self, merges):
        self.merges = [tuple(m) for m in merges]
        self.tokens = list(BYTE_CHARS) + [a + b for a, b in self.merges] + SPECIALS
        self.types = [1] * (len(self.tokens) - len(SPECIALS)) + [3] * len(SPECIALS)
        self.id = {t: i for i, t in enumerate(self.tokens)}
        self.rank = {m: i for i, m in enumerate(self.merges)}
        self.cache = {}
        self.U2B = {c: b for b, c in B2U.items()}

    def special(self, s):
        return self.id[s]

    def _bpe(self, w):
        if w in self.cache:
            return self.cache[w]
        sym = list(w)
        while len(sym) > 1:
            best, bi = None, -1
            for i in range(len(sym) - 1):
                r = self.rank.get((sym[i], sym[i + 1]))
                if r is not None and (best is None or r < best):
                    best, bi = r, i
            if best is None:
                break
            sym[bi:bi + 2] = [sym[bi] + sym[bi + 1]]
        ids = [self.id[s] for s in sym]
        self.cache[w] = ids
        return ids

    def encode(self, text):
        out = []
        for p in pieces(text):
            out.extend(self._bpe(p))
        return out

    def decode(self, ids):
        bs = bytearray()
        for i in ids:
            t = self.tokens[i]
            if self.types[i] == 3:
                bs.extend(t.encode("utf-8"))
            else:
                bs.extend(self.U2B[c] for c in t)
        return bs.decode("utf-8", errors="replace")

    def save(self, path):
        with open(path, "w") as f:
            json.dump({"merges": [list(m) for m in self.merges]}, f)

    @staticmethod
    def load(path):
        with open(path) as f:
            return Tokenizer(json.load(f)["merges"])
