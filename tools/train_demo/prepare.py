# prepare.py — step 1 of the demo-model pipeline: read the KJV corpus, train the BPE tokenizer,
# and write the token streams the trainer reads (WORK/tokenizer.json, train.npy, val.npy,
# chat.npy). Usage: /usr/bin/python3 tools/train_demo/prepare.py [WORK=build/train_demo]
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe  # noqa: E402
import corpus  # noqa: E402

N_VOCAB = 3072
N_CHAT = 12000


def main():
    work = sys.argv[1] if len(sys.argv) > 1 else "build/train_demo"
    os.makedirs(work, exist_ok=True)
    t0 = time.time()
    chapters = corpus.read_kjv()
    tr, va = corpus.split(chapters)
    tr_text = [corpus.chapter_text(c) for c in tr]
    va_text = [corpus.chapter_text(c) for c in va]
    merges = bpe.train(tr_text, N_VOCAB - 256 - len(bpe.SPECIALS))
    tok = bpe.Tokenizer(merges)
    assert len(tok.tokens) == N_VOCAB, len(tok.tokens)
    tok.save(os.path.join(work, "tokenizer.json"))
    eot = tok.special("<|endoftext|>")
    train_ids = []
    for t in tr_text:
        train_ids += tok.encode(t)
    val_ids = []
    for t in va_text:
        val_ids += tok.encode(t)
    # chat samples: [gMASK]<sop><|user|>U<|assistant|></think>A<|user|>  (the reply ends at <|user|>,
    # the glm-dsa end-of-turn token); ~1 in 5 with an empty <think></think> instead of </think>
    S = tok.special
    chat = []
    for i, (u, a) in enumerate(corpus.chat_samples(tr, N_CHAT)):
        think = [S("</think>")] if i % 5 else [S("<think>"), S("</think>")]
        chat += [S("[gMASK]"), S("<sop>"), S("<|user|>")] + tok.encode(u) + [S("<|assistant|>")] + think + \
            tok.encode(a) + [S("<|user|>")]
    np.save(os.path.join(work, "train.npy"), np.array(train_ids, dtype=np.int16))
    np.save(os.path.join(work, "val.npy"), np.array(val_ids, dtype=np.int16))
    np.save(os.path.join(work, "chat.npy"), np.array(chat, dtype=np.int16))
    print(f"prepare: vocab {len(tok.tokens)}, train {len(train_ids)} tokens, val {len(val_ids)}, "
          f"chat {len(chat)}, eot id {eot}, {time.time() - t0:.0f}s")


if __name__ == "__main__":
    main()
