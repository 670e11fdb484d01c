"""Writes a GGUF file with another file's header and random tensor data of the same types.

The GPU anchors need SmolLM2's GGUF on a machine that the 98 MB file cannot travel to; its
header (metadata, tokenizer and tensor table, about 2 MB) can. Timing does not depend on the
weights' values, but zeros would flatter every kernel, so the data is random and valid: block
scales are small finite f16s, quants are uniform bytes, norms are near one.

usage:
  python3 benches/gguf_random.py header FILE.gguf OUT.header   # keep the header only
  python3 benches/gguf_random.py fill OUT.header OUT.gguf       # random data after it
"""
import struct
import sys

import numpy as np

# ggml type id -> (bytes per block, values per block)
TYPES = {0: (4, 1), 1: (2, 1), 2: (18, 32), 3: (20, 32), 8: (34, 32), 30: (2, 1)}
# GGUF value type id -> fixed size (strings and arrays are read separately)
SCALARS = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def parse(buf):
    """Returns (tensors as (name, dims, type, offset), data start) of a GGUF v3 header."""
    magic, version, n_tensors, n_kv = struct.unpack_from("<4sIQQ", buf, 0)
    if magic != b"GGUF" or version != 3:
        raise SystemExit(f"not a GGUF v3 file (magic {magic!r}, version {version})")
    at = 24
    alignment = 32

    def string(at):
        (n,) = struct.unpack_from("<Q", buf, at)
        return buf[at + 8 : at + 8 + n].decode("utf-8", "replace"), at + 8 + n

    def value(kind, at):
        if kind == 8:
            return string(at)
        if kind == 9:
            inner, count = struct.unpack_from("<IQ", buf, at)
            at += 12
            if inner in SCALARS:
                return None, at + SCALARS[inner] * count
            for _ in range(count):
                _, at = value(inner, at)
            return None, at
        size = SCALARS[kind]
        fmt = {1: "<B", 2: "<H", 4: "<I", 8: "<Q"}[size]
        return struct.unpack_from(fmt, buf, at)[0], at + size

    for _ in range(n_kv):
        key, at = string(at)
        (kind,) = struct.unpack_from("<I", buf, at)
        v, at = value(kind, at + 4)
        if key == "general.alignment":
            alignment = v
    tensors = []
    for _ in range(n_tensors):
        name, at = string(at)
        (n_dims,) = struct.unpack_from("<I", buf, at)
        dims = struct.unpack_from(f"<{n_dims}Q", buf, at + 4)
        kind, offset = struct.unpack_from("<IQ", buf, at + 4 + 8 * n_dims)
        at += 4 + 8 * n_dims + 12
        tensors.append((name, dims, kind, offset))
    return tensors, (at + alignment - 1) // alignment * alignment


def random_tensor(rng, name, dims, kind):
    n = int(np.prod(dims))
    if kind not in TYPES:
        raise SystemExit(f"tensor {name}: ggml type {kind} is not handled here")
    block, per = TYPES[kind]
    if kind == 0:
        base = 1.0 if name.endswith("norm.weight") else 0.0
        return (base + 0.05 * rng.standard_normal(n)).astype("<f4").tobytes()
    if kind in (1, 30):
        return (0.05 * rng.standard_normal(n)).astype("<f2").tobytes()
    blocks = n // per
    raw = rng.integers(0, 256, size=(blocks, block), dtype=np.uint8)
    scales = (0.002 + 0.01 * rng.random((blocks, 2))).astype("<f2")
    scales[:, 1] *= -4.0  # Q4_1's minimum is negative
    n_scales = 2 if kind == 3 else 1
    raw[:, : 2 * n_scales] = scales[:, :n_scales].view(np.uint8).reshape(blocks, -1)
    return raw.tobytes()


def main():
    mode, src, dst = sys.argv[1:4]
    buf = open(src, "rb").read()
    tensors, start = parse(buf)
    if mode == "header":
        open(dst, "wb").write(buf[:start])
        print(f"{dst}: {start} bytes, {len(tensors)} tensors")
        return
    rng = np.random.default_rng(0)
    with open(dst + ".part", "wb") as out:
        out.write(buf[:start])
        for name, dims, kind, offset in sorted(tensors, key=lambda t: t[3]):
            out.seek(start + offset)
            out.write(random_tensor(rng, name, dims, kind))
    import os

    os.replace(dst + ".part", dst)
    print(f"{dst}: {len(tensors)} tensors of random data")


if __name__ == "__main__":
    main()
