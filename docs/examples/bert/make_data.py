# A task a small BERT can learn: label 1 when most of the 16 tokens are below 500. One .npy per
# graph input, by name, under data/{train,test}/ (the npy:DIR layout of `ampc train --data`).
import os
import numpy as np

rng = np.random.default_rng(0)
for split, n in (("train", 8192), ("test", 512)):
    ids = rng.integers(0, 1000, (n, 16))
    arrays = {"input_ids": ids, "attention_mask": np.ones_like(ids),
              "labels": ((ids < 500).sum(axis=1) > 8).astype(np.int64)}
    os.makedirs(f"data/{split}", exist_ok=True)
    for name, array in arrays.items():
        np.save(f"data/{split}/{name}.npy", array)
