# evaluate.py — step 4 of the demo-model pipeline: the quality numbers of models/README.md.
# Validation perplexity of the shipped GGUF (weights decoded from Q8_0, float activations, DSA
# sparse attention exactly as at inference) on the held-out chapters, in windows of the training
# context (sliding with half-window stride, and non-overlapping), against the unigram perplexity
# of the same tokens under the training set's token frequencies (add-one smoothed) with the same
# tokenizer.
#
# Usage: /usr/bin/python3 tools/train_demo/evaluate.py [--model models/petrel-demo-glm.gguf] [--work build/train_demo]
import argparse
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dump_ref import load_gguf_model  # noqa: E402
from model import Num  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="models/petrel-demo-glm.gguf")
    ap.add_argument("--work", default="build/train_demo")
    ap.add_argument("--window", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--limit", type=int, default=0, help="only the first N held-out tokens (quick check)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    t0 = time.time()
    m, tok, _ = load_gguf_model(a.model, dtype=torch.float32)
    Num.idx_ln_eps = 0.0
    train = np.load(os.path.join(a.work, "train.npy")).astype(np.int64)
    val = np.load(os.path.join(a.work, "val.npy")).astype(np.int64)
    if a.limit:
        val = val[:a.limit]
    V, W = m.cfg.n_vocab, a.window
    counts = np.bincount(train, minlength=V).astype(np.float64) + 1.0
    logp_uni = np.log(counts / counts.sum())

    def run(stride):
        """Windows of W tokens every `stride`; each window scores the targets it predicts with the
        most context (all of the first window, the last `stride` of the others), so every held-out
        token after the first is scored exactly once."""
        starts = list(range(0, len(val) - W + 1, stride))
        nll, n, tg = 0.0, 0, []
        with torch.no_grad():
            for i in range(0, len(starts), 16):
                x = torch.from_numpy(np.stack([val[s:s + W] for s in starts[i:i + 16]]))
                logits, _, _, _ = m(x, use_dsa=True, mtp=False)
                lp = torch.log_softmax(logits[:, :-1].double(), -1).gather(-1, x[:, 1:, None])[..., 0]
                for j, s in enumerate(starts[i:i + 16]):
                    first = 0 if s == 0 else max(0, W - 1 - stride)
                    nll -= lp[j, first:].sum().item()
                    n += W - 1 - first
                    tg.append(x[j, 1 + first:].numpy())
        uni = math.exp(-logp_uni[np.concatenate(tg)].mean())
        return math.exp(nll / n), uni, n

    for stride, what in ((W // 2, f"sliding windows of {W}, stride {W // 2} (each token sees >= {W // 2} tokens of context)"),
                         (W, f"non-overlapping windows of {W}")):
        ppl, uni, n = run(stride)
        print(f"validation, {what}: {n} tokens; model perplexity {ppl:.2f}, unigram perplexity {uni:.2f}, "
              f"ratio {uni / ppl:.2f}x ({time.time() - t0:.0f}s)", flush=True)


if __name__ == "__main__":
    main()
