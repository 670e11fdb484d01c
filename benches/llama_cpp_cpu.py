"""llama.cpp's decode and 512-token prefill tokens/s on a GGUF file, for `llama_decode --prefill`.

Same token ids as benches/llama_decode.rs ((t * 977 + 5) % vocab): a 512-token prefill (the
median of 3 after one untimed), then 64 greedy decode steps after a 64-token prompt (the
median of 3 blocks after one untimed). llama-cpp-python==0.3.36 (its AVX2 build, as
rtx-models/tests/fixtures/llama_reference.py makes it).

    python benches/llama_cpp_cpu.py FILE.gguf [THREADS=2]
"""
import sys, time
import numpy as np
from llama_cpp import Llama
path = sys.argv[1]
threads = int(sys.argv[2]) if len(sys.argv) > 2 else 2
llm = Llama(model_path=path, n_ctx=1024, n_batch=512, n_threads=threads, n_threads_batch=threads, verbose=False)
vocab = llm.n_vocab()
ids = [(t * 977 + 5) % vocab for t in range(512)]
pp = []
for r in range(4):
    llm.reset()
    t = time.perf_counter(); llm.eval(ids); pp.append(time.perf_counter() - t)
pp = sorted(pp[1:])
print(f"llama.cpp prefill 512: {pp[1]*1e3:.1f} ms, {512/pp[1]:.1f} tokens/s (runs {[round(x*1e3,1) for x in pp]})")
prompt = ids[:64]
dec = []
for r in range(4):
    llm.reset()
    llm.eval(prompt)
    t = time.perf_counter()
    for s in range(64):
        tok = int(np.argmax(llm.scores[llm.n_tokens - 1]))
        llm.eval([tok])
    dec.append((time.perf_counter() - t) / 64)
dec = sorted(dec[1:])
print(f"llama.cpp decode batch 1: {dec[1]*1e3:.3f} ms/step, {1/dec[1]:.1f} tokens/s (runs {[round(x*1e3,3) for x in dec]})")
