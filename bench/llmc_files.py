"""llmc_files.py DIR: the files llm.c's train_gpt2.c reads, for timing it beside attograd by hand
(docs/speed.md, "A second quiet window"): DIR/gpt2_124M.bin, a GPT-2 124M checkpoint in its format
(header 20240326 version 3; maxT 1024, V 50257, 12 layers, 12 heads, 768 channels, Vp 50304) with
random weights (normal, std 0.02; LayerNorm weights 1, biases 0), and
DIR/dev/data/tinyshakespeare/tiny_shakespeare_{train,val}.bin, token shards (header 20240520
version 1) of random ids. No published weights or data are reachable here; a step's time does not
depend on them. Then, in DIR with llm.c's train_gpt2.c: gcc -Ofast -march=native -fopenmp -DOMP
train_gpt2.c -lm -o train_gpt2 && OMP_NUM_THREADS=2 ./train_gpt2 (it prints each step's time)."""
import os
import sys

import numpy as np


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: llmc_files.py DIR")
    out = sys.argv[1]
    rng = np.random.default_rng(0)
    max_t, v, n_layer, n_head, c, vp = 1024, 50257, 12, 12, 768, 50304
    # train_gpt2.c's fill_in_parameter_sizes, in its order; kind: n(ormal), 1 (ones), 0 (zeros)
    sizes = [(vp * c, "n"), (max_t * c, "n"), (n_layer * c, "1"), (n_layer * c, "0"),
             (n_layer * 3 * c * c, "n"), (n_layer * 3 * c, "0"), (n_layer * c * c, "n"),
             (n_layer * c, "0"), (n_layer * c, "1"), (n_layer * c, "0"),
             (n_layer * 4 * c * c, "n"), (n_layer * 4 * c, "0"), (n_layer * c * 4 * c, "n"),
             (n_layer * c, "0"), (c, "1"), (c, "0")]
    os.makedirs(os.path.join(out, "dev/data/tinyshakespeare"), exist_ok=True)
    header = np.zeros(256, dtype=np.int32)
    header[:8] = [20240326, 3, max_t, v, n_layer, n_head, c, vp]
    with open(os.path.join(out, "gpt2_124M.bin"), "wb") as f:
        header.tofile(f)
        for n, kind in sizes:
            if kind == "n":
                a = rng.standard_normal(n).astype(np.float32) * np.float32(0.02)
            else:
                a = np.full(n, 1.0 if kind == "1" else 0.0, dtype=np.float32)
            a.tofile(f)
    for name, n in (("train", 200000), ("val", 40000)):
        header = np.zeros(256, dtype=np.int32)
        header[:3] = [20240520, 1, n]
        path = os.path.join(out, f"dev/data/tinyshakespeare/tiny_shakespeare_{name}.bin")
        with open(path, "wb") as f:
            header.tofile(f)
            rng.integers(0, v, n).astype(np.uint16).tofile(f)


if __name__ == "__main__":
    main()
