#!/usr/bin/env python3
"""pack_dir.py: bring a folder of .npy files (and its .json files) back from the GPU machine in few files.

  pack:   python3 pack_dir.py pack DIR OUT [--glob 'PATTERN' ...] [--max-mib 15]
          writes OUT/pack_<i>.npz (each below --max-mib; keys are the files' paths relative to DIR with '/'
          replaced by '__') and OUT/pack_json.npz holding the .json files as uint8 arrays
  unpack: python3 pack_dir.py unpack PACKDIR DIR      (restores the folder)

Why: a GPU call returns at most 8 files of 16 MiB each; the attention check of docs/tensor-cores.md runs the
ports of attention_ports.py on the GPU and pasa-hwcompare on this machine.
"""
import argparse
import fnmatch
import glob
import os

import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["pack", "unpack"])
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--glob", action="append", default=None, help="relative paths to keep (fnmatch); default all")
    ap.add_argument("--max-mib", type=float, default=15.0)
    args = ap.parse_args()
    os.makedirs(args.dst, exist_ok=True)
    if args.mode == "unpack":
        for f in sorted(glob.glob(os.path.join(args.src, "pack_*.npz"))):
            z = np.load(f)
            for key in z.files:
                path = os.path.join(args.dst, key.replace("__", "/"))
                os.makedirs(os.path.dirname(path), exist_ok=True)
                if f.endswith("pack_json.npz"):
                    with open(path, "wb") as h:
                        h.write(z[key].tobytes())
                else:
                    np.save(path, z[key])
        return
    files = []
    for root, _, names in os.walk(args.src):
        for n in names:
            rel = os.path.relpath(os.path.join(root, n), args.src)
            if rel.endswith(".json") or (rel.endswith(".npy") and (not args.glob or any(fnmatch.fnmatch(rel, g) for g in args.glob))):
                files.append(rel)
    files.sort()
    js = {f.replace("/", "__"): np.frombuffer(open(os.path.join(args.src, f), "rb").read(), np.uint8)
          for f in files if f.endswith(".json")}
    np.savez(os.path.join(args.dst, "pack_json.npz"), **js)
    chunk, size, i = {}, 0, 0
    for f in files:
        if not f.endswith(".npy"):
            continue
        a = np.load(os.path.join(args.src, f))
        if chunk and size + a.nbytes > args.max_mib * 2**20:
            np.savez(os.path.join(args.dst, f"pack_{i}.npz"), **chunk)
            chunk, size, i = {}, 0, i + 1
        chunk[f[:-4].replace("/", "__")] = a
        size += a.nbytes
    if chunk:
        np.savez(os.path.join(args.dst, f"pack_{i}.npz"), **chunk)
    print(f"packed {len(files)} files into {i + 1} npz + json")


if __name__ == "__main__":
    main()
