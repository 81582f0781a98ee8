# torch_reference.py: a PyTorch reference run on the toy corpus, to show it is learnable and to
# give the translation example a curve to compare with. Not part of the test suite: it needs
# python3-torch (Debian) and takes minutes. Read data/README.md ("Is it learnable?") first.
#   make data && python3 data/torch_reference.py build/data 2000
# The model is the example's size: d_model 128, 4 heads, 2+2 post-LN layers, FFN 512, dropout 0.1,
# sinusoidal positions added to N(0,1) embeddings (not scaled by sqrt(d_model): see the README).
# Adam (0.9, 0.98), lr 1e-3, 300 warmup steps then a cosine decay to 5%, batches of 64 pairs,
# greedy decoding; exact match = the whole output sentence equals the target.
import math
import random
import sys
import time

import torch
import torch.nn as nn

PAD, BOS, EOS, UNK = 0, 1, 2, 3


def load(folder, name):
    with open(f"{folder}/{name}", encoding="utf-8") as f:
        return [line.rstrip("\n").split("\t") for line in f]


def vocab(pairs, side):
    v = {"<pad>": PAD, "<bos>": BOS, "<eos>": EOS, "<unk>": UNK}
    for p in pairs:
        for w in p[side].split():
            v.setdefault(w, len(v))
    return v


class Model(nn.Module):
    def __init__(self, n_src, n_tgt, d=128, max_len=64):
        super().__init__()
        self.src_embed = nn.Embedding(n_src, d)
        self.tgt_embed = nn.Embedding(n_tgt, d)
        self.transformer = nn.Transformer(d, 4, 2, 2, 512, 0.1, batch_first=True)
        self.generator = nn.Linear(d, n_tgt)
        pos = torch.arange(max_len).unsqueeze(1)
        div = torch.exp(torch.arange(0, d, 2) * (-math.log(10000.0) / d))
        pe = torch.zeros(max_len, d)
        pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * div), torch.cos(pos * div)
        self.register_buffer("pe", pe)

    def embed(self, table, ids):
        return table(ids) + self.pe[: ids.size(1)]

    def encode(self, src):
        return self.transformer.encoder(self.embed(self.src_embed, src),
                                        src_key_padding_mask=src == PAD)

    def decode(self, memory, src, tgt):
        causal = self.transformer.generate_square_subsequent_mask(tgt.size(1))
        h = self.transformer.decoder(self.embed(self.tgt_embed, tgt), memory, tgt_mask=causal,
                                     tgt_key_padding_mask=tgt == PAD,
                                     memory_key_padding_mask=src == PAD)
        return self.generator(h)


def pad(seqs):
    n = max(map(len, seqs))
    return torch.tensor([s + [PAD] * (n - len(s)) for s in seqs])


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else "build/data"
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    torch.set_num_threads(1)  # faster than 2 on a busy 2-core machine
    torch.manual_seed(0)
    random.seed(0)
    train = load(folder, "train.tsv")
    sv, tv = vocab(train, 0), vocab(train, 1)
    itos = {i: w for w, i in tv.items()}

    def ids(s, v):
        return [v.get(w, UNK) for w in s.split()]

    m = Model(len(sv), len(tv))
    opt = torch.optim.Adam(m.parameters(), lr=1e-3, betas=(0.9, 0.98))
    lossf = nn.CrossEntropyLoss(ignore_index=PAD)
    print(f"{sum(p.numel() for p in m.parameters())} parameters, vocabularies {len(sv)} {len(tv)}")

    @torch.no_grad()
    def exact_match(pairs):
        m.eval()
        ok = 0
        for i in range(0, len(pairs), 256):
            batch = pairs[i:i + 256]
            src = pad([ids(p[0], sv) for p in batch])
            memory = m.encode(src)
            ys = torch.full((len(batch), 1), BOS)
            for _ in range(src.size(1) + 10):
                ys = torch.cat([ys, m.decode(memory, src, ys)[:, -1].argmax(-1, keepdim=True)], 1)
                if (ys == EOS).any(1).all():
                    break
            for p, y in zip(batch, ys.tolist()):
                out = y[1:y.index(EOS)] if EOS in y else y[1:]
                ok += " ".join(itos[t] for t in out) == p[1]
        m.train()
        return ok / len(pairs)

    test = load(folder, "test.tsv")
    step, t0, order = 0, time.time(), list(range(len(train)))
    while step < steps:
        random.shuffle(order)
        for i in range(0, len(order) - 63, 64):
            lr = 1e-3 * min(1.0, (step + 1) / 300) * max(0.05, 0.5 * (1 + math.cos(math.pi * step / steps)))
            for g in opt.param_groups:
                g["lr"] = lr
            batch = [train[j] for j in order[i:i + 64]]
            src = pad([ids(p[0], sv) for p in batch])
            tgt = pad([[BOS] + ids(p[1], tv) + [EOS] for p in batch])
            logits = m.decode(m.encode(src), src, tgt[:, :-1])
            loss = lossf(logits.reshape(-1, logits.size(-1)), tgt[:, 1:].reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            if step % 500 == 0 or step == steps:
                print(f"step {step}  loss {loss.item():.4f}  {time.time() - t0:.0f} s  "
                      f"test exact match {exact_match(test[:1000]):.4f}", flush=True)
            if step == steps:
                break
    for name in ["test.tsv", "gen_test.tsv", "gen_long.tsv"]:
        print(f"{name}: exact match {exact_match(load(folder, name)):.4f}")


if __name__ == "__main__":
    main()
