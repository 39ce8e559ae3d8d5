# train.py — step 2 of the demo-model pipeline: train the glm-dsa model of model.py on the token
# streams written by prepare.py. The schedule is driven by wall time (--minutes), so the same
# command gives a finished model on a slower or busier machine; a checkpoint (WORK/ckpt.pt) is
# written every --ckpt-minutes and on exit, and a re-run resumes from it (elapsed time included).
#
# Recipe: AdamW, warm-up then cosine decay to 10 %; the first 10 % of the time uses dense
# attention while the DSA indexer learns (KL to the attention distribution, DeepSeek-V3.2 style),
# then the indexer's top-k restricts attention; the routing bias exp_probs_b is updated after each
# step towards balanced expert load (auxiliary-loss-free balancing, DeepSeek-V3 style); the MTP
# block learns with loss weight 0.3 on a detached trunk state.
#
# Usage: nice -n 10 /usr/bin/python3 tools/train_demo/train.py [--work build/train_demo] [--minutes 45]
import argparse
import math
import os
import signal
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model import Config, GlmDsa  # noqa: E402


def batches(train, chat, B, T, chat_frac, rng):
    while True:
        xs = []
        for _ in range(B):
            src = chat if rng.random() < chat_frac else train
            i = rng.randint(0, len(src) - T - 1)
            xs.append(src[i:i + T + 1])
        yield torch.from_numpy(np.stack(xs).astype(np.int64))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default="build/train_demo")
    ap.add_argument("--minutes", type=float, default=45.0)
    ap.add_argument("--ckpt-minutes", type=float, default=3.0)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--chat-frac", type=float, default=0.15)
    ap.add_argument("--mtp-every", type=int, default=4, help="train the MTP block every N steps")
    ap.add_argument("--balance", type=float, default=0.01, help="weight of the expert balance loss")
    ap.add_argument("--bias-rate", type=float, default=5e-3, help="exp_probs_b update per step")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--max-steps", type=int, default=0, help="stop after N steps (smoke test)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    cfg = Config()
    T = cfg.ctx_train
    train = np.load(os.path.join(a.work, "train.npy")).astype(np.int64)
    chat = np.load(os.path.join(a.work, "chat.npy")).astype(np.int64)
    model = GlmDsa(cfg)
    n_params = sum(p.numel() for p in model.parameters())
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    nodecay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.05}, {"params": nodecay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
    ck = os.path.join(a.work, "ckpt.pt")
    step, elapsed = 0, 0.0
    rng = np.random.RandomState(a.seed)
    if os.path.exists(ck):
        st = torch.load(ck)
        model.load_state_dict(st["model"])
        opt.load_state_dict(st["opt"])
        step, elapsed = st["step"], st["elapsed"]
        rng.set_state(st["rng"])
        print(f"resumed at step {step}, {elapsed / 60:.1f} min", flush=True)
    print(f"params {n_params / 1e6:.2f}M, budget {a.minutes} min", flush=True)

    def save():
        tmp = ck + ".tmp"
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step, "elapsed": elapsed,
                    "rng": rng.get_state(), "cfg": cfg.to_dict()}, tmp)
        os.replace(tmp, ck)

    stop = {"now": False}
    def on_term(*_):
        print("SIGTERM: saving a checkpoint and stopping", flush=True)
        stop.update(now=True)
    signal.signal(signal.SIGTERM, on_term)
    budget = a.minutes * 60
    warm_frac, dense_frac = 0.03, 0.10
    gen = batches(train, chat, a.batch, T, a.chat_frac, rng)
    last_ck = time.time()
    ema, loss_mtp = None, torch.zeros(())
    model.train()
    while elapsed < budget and not stop["now"]:
        t0 = time.time()
        frac = elapsed / budget
        lr = a.lr * (frac / warm_frac if frac < warm_frac else
                     0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (frac - warm_frac) / (1 - warm_frac))))
        for g in opt.param_groups:
            g["lr"] = lr
        xb = next(gen)
        inp, tgt = xb[:, :-1], xb[:, 1:]
        use_dsa = frac >= dense_frac
        do_mtp = step % a.mtp_every == 0
        for blk in model.blocks:
            blk.aux, blk.load = None, None  # set again by the blocks this step runs
        logits, mtp_logits, _, idx_loss = model(inp, use_dsa=use_dsa, mtp=do_mtp, want_idx_loss=True)
        loss_main = F.cross_entropy(logits.reshape(-1, cfg.n_vocab), tgt.reshape(-1))
        loss = loss_main + (0.1 * idx_loss if idx_loss is not None else 0.0)
        loss = loss + a.balance * sum(b.aux for b in model.blocks if b.is_moe and b.aux is not None)
        if do_mtp:
            # MTP row i sees token i and the trunk state of i-1 and predicts token i+1 like the trunk
            loss_mtp = F.cross_entropy(mtp_logits[:, 1:].reshape(-1, cfg.n_vocab), tgt[:, 1:].reshape(-1))
            loss = loss + 0.3 * a.mtp_every * loss_mtp
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        with torch.no_grad():
            for blk in model.blocks:
                if blk.is_moe and blk.load is not None:
                    ld = blk.load.float()
                    blk.exp_bias += a.bias_rate * torch.sign(ld.mean() - ld)
        step += 1
        elapsed += time.time() - t0
        ema = loss_main.item() if ema is None else 0.98 * ema + 0.02 * loss_main.item()
        if step % 20 == 0 or step == 1:
            imb = max((b.load.max().item() / max(b.load.float().mean().item(), 1)) for b in model.blocks
                      if b.is_moe and b.load is not None)
            print(f"step {step} {elapsed / 60:.1f}min lr {lr:.2e} loss {loss_main.item():.3f} (ema {ema:.3f}, "
                  f"ppl {math.exp(ema):.1f}) mtp {loss_mtp.item():.3f} idx {idx_loss.item() if idx_loss is not None else 0:.3f} "
                  f"dsa {int(use_dsa)} maxload/mean {imb:.2f} {(time.time() - t0):.2f}s/step", flush=True)
        if time.time() - last_ck > a.ckpt_minutes * 60:
            save()
            last_ck = time.time()
        if a.max_steps and step >= a.max_steps:
            break
    save()
    print(f"done: step {step}, {elapsed / 60:.1f} min", flush=True)


if __name__ == "__main__":
    main()
