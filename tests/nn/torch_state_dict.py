"""torch_state_dict.py: builds in PyTorch the model attograd's Seq2Seq describes (embeddings
scaled by sqrt(d_model), sinusoidal positions, nn.Transformer's encoder and decoder with their
final norms, a generator Linear), saves its state_dict with numpy (np.savez, the names as they
are), and saves inputs and the logits PyTorch computes. tests/tools/torch_load.c then loads the
weights into attograd and must give the same logits.
Usage: torch_state_dict.py OUT_DIR"""
import math
import sys

import numpy as np
import torch
from torch import nn

V_SRC, V_TGT, D, NH, L, FF, MAXLEN, PAD = 11, 13, 16, 4, 2, 24, 32, 0


class Seq2Seq(nn.Module):
    def __init__(self):
        super().__init__()
        self.src_embed = nn.Embedding(V_SRC, D, padding_idx=PAD)
        self.tgt_embed = nn.Embedding(V_TGT, D, padding_idx=PAD)
        tf = nn.Transformer(D, NH, L, L, FF, dropout=0.0, batch_first=True, dtype=torch.float64)
        self.encoder, self.decoder = tf.encoder, tf.decoder
        self.generator = nn.Linear(D, V_TGT, dtype=torch.float64)
        pe = torch.zeros(MAXLEN, D, dtype=torch.float64)
        for pos in range(MAXLEN):
            for i in range(0, D, 2):
                angle = pos / math.pow(10000.0, i / D)
                pe[pos, i] = math.sin(angle)
                pe[pos, i + 1] = math.cos(angle)
        self.register_buffer("pe", pe, persistent=False)

    def forward(self, src, tgt):
        S, T = src.shape[1], tgt.shape[1]
        x = self.src_embed(src) * math.sqrt(D) + self.pe[:S]
        src_pad = src == PAD
        memory = self.encoder(x, src_key_padding_mask=src_pad)
        y = self.tgt_embed(tgt) * math.sqrt(D) + self.pe[:T]
        causal = torch.triu(torch.full((T, T), float("-inf"), dtype=torch.float64), 1)
        out = self.decoder(y, memory, tgt_mask=causal, tgt_key_padding_mask=tgt == PAD,
                           memory_key_padding_mask=src_pad)
        return self.generator(out)


def main(out_dir):
    torch.manual_seed(3)
    m = Seq2Seq().double()
    with torch.no_grad():  # move LayerNorm weights and biases off 1 and 0
        for name, p in m.named_parameters():
            if "norm" in name or name.endswith("bias"):
                p.add_(0.1 * torch.randn_like(p))
    m.train()  # dropout is 0; train mode keeps PyTorch off its inference fast path
    src = torch.tensor([[3, 4, 5, 6, 7, 8], [9, 10, 3, 4, 0, 0]])
    tgt = torch.tensor([[1, 3, 4, 5, 6], [1, 7, 8, 0, 0]])
    logits = m(src, tgt).detach()
    np.savez(out_dir + "/model.npz", **{k: v.numpy() for k, v in m.state_dict().items()})
    np.savez(out_dir + "/io.npz", src=src.numpy().astype(np.int64),
             tgt=tgt.numpy().astype(np.int64), logits=logits.numpy(),
             config=np.array([V_SRC, V_TGT, D, NH, L, FF, MAXLEN, PAD], dtype=np.int64))


if __name__ == "__main__":
    main(sys.argv[1])
