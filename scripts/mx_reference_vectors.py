#!/usr/bin/python3
"""Draws the reference vectors of tests/numeric/test_block_scale_reference.cpp from microsoft/microxcaling.

Run OUT of the tree, with microxcaling's `mx` package on the path (it is not part of pasa):
    git -C microxcaling archive HEAD mx | tar -x -C /tmp/mxref
    PYTHONPATH=/tmp/mxref /usr/bin/python3 scripts/mx_reference_vectors.py COMMIT > tests/numeric/data/mx_microxcaling.json
It calls mx.mx_ops._quantize_mx(A, scale_bits=8, elem_format, shared_exp_method="max", axes=[-1],
block_size=32, round=R) on the CPU (no custom CUDA) for every MX element format and R in {"even", "nearest"}
(microxcaling's names for round-half-even and round-half-away), and records the fp32 bits of A and of its
results. Only the data is committed, with this provenance; no microxcaling code is.
"""
import json
import struct
import sys

import numpy as np
import torch

import mx.formats as formats
import mx.mx_ops as mx_ops

BLOCK = 32


def inputs(rng):
    """64 blocks of 32 fp32 values: random significands at random block exponents, short significands (many
    ties after scaling), an all-zero block, blocks whose amax rounds up past the element's largest value,
    and tiny and huge binades near fp32's ends."""
    blocks = []
    for b in range(64):
        e = int(rng.integers(-40, 40))
        if b == 0:
            v = np.zeros(BLOCK)
        elif b % 4 == 1:  # few significand bits: k·2^j with k < 64 gives exact midpoints of fp4/fp6/fp8 grids
            v = rng.integers(-63, 64, BLOCK) * 2.0 ** (e - 5)
        elif b % 4 == 2:  # amax with a full significand just below a power of two
            v = rng.standard_normal(BLOCK) * 2.0 ** e
            v[int(rng.integers(0, BLOCK))] = (2 - 2.0 ** -20) * 2.0 ** e
        elif b == 3:
            v = rng.standard_normal(BLOCK) * 2.0 ** -120
        elif b == 7:
            v = rng.standard_normal(BLOCK) * 2.0 ** 120
        else:
            v = rng.standard_normal(BLOCK) * 2.0 ** e * rng.uniform(0, 1, BLOCK) ** 3
        blocks.append(v)
    return np.concatenate(blocks).astype(np.float32)


def bits(a):
    return [f"{struct.unpack('<I', struct.pack('<f', float(x)))[0]:08x}" for x in a]


def main():
    commit = sys.argv[1] if len(sys.argv) > 1 else "unknown"
    rng = np.random.default_rng(20261202)
    x = inputs(rng)
    cases = []
    for scheme, fmt in [("mxfp8_e4m3", "fp8_e4m3"), ("mxfp8_e5m2", "fp8_e5m2"), ("mxfp6_e2m3", "fp6_e2m3"),
                        ("mxfp6_e3m2", "fp6_e3m2"), ("mxfp4", "fp4_e2m1"), ("mxint8", "int8")]:
        for rnd in ["even", "nearest"]:
            A = torch.tensor(x).reshape(1, -1)
            out = mx_ops._quantize_mx(A, 8, formats.ElemFormat.from_str(fmt), shared_exp_method="max", axes=[-1],
                                      block_size=BLOCK, round=rnd, flush_fp32_subnorms=False, custom_cuda=False)
            cases.append({"scheme": scheme, "elem_format": fmt, "round": rnd,
                          "pasa_round": "rne" if rnd == "even" else "rna", "values": bits(out.reshape(-1).numpy())})
    json.dump({
        "provenance": {
            "repository": "github.com/microsoft/microxcaling",
            "commit": commit,
            "function": "mx.mx_ops._quantize_mx",
            "arguments": "scale_bits=8, shared_exp_method='max', axes=[-1], block_size=32, "
                         "flush_fp32_subnorms=False, custom_cuda=False, CPU",
            "torch": torch.__version__,
            "numpy_seed": 20261202,
            "drawn_by": "scripts/mx_reference_vectors.py",
        },
        "block": BLOCK,
        "inputs": bits(x),
        "cases": cases,
    }, sys.stdout, indent=0)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
