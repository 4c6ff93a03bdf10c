#!/usr/bin/env python3
"""sage_setup.py: builds, in place, the two compiled extensions of a thu-ml/SageAttention checkout that its
Hopper path needs (`sageattention._fused`: V's per-channel FP8 quantisation; `sageattention._qattn_sm90`: the
SA2 sm90 kernel), for sm_90a only, so that `import sageattention` works on the H200 without its full build
(which compiles the sm80 and sm89 kernels too). The sources and the compiler flags are the checkout's own
(its setup.py: CXX_FLAGS and NVCC_FLAGS, read there, not restated here beyond the list below).

  cd SAGE_CHECKOUT && MAX_JOBS=16 python3 /path/to/sage_setup.py build_ext --inplace

Nothing of SageAttention is committed to pasa: the checkout is fetched, built and run out of the tree.
"""
import torch
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

ABI = 1 if torch._C._GLIBCXX_USE_CXX11_ABI else 0
# As SageAttention's setup.py (commit d1a57a5) sets them, with its arch list cut to 9.0a.
CXX = ["-g", "-O3", "-fopenmp", "-lgomp", "-std=c++17", "-DENABLE_BF16", f"-D_GLIBCXX_USE_CXX11_ABI={ABI}"]
NVCC = ["-O3", "-std=c++17", "-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__", "--use_fast_math",
        "--threads=8", "-diag-suppress=174", f"-D_GLIBCXX_USE_CXX11_ABI={ABI}",
        "-gencode", "arch=compute_90a,code=sm_90a"]

setup(
    name="sageattention_sm90_only",
    ext_modules=[
        CUDAExtension(name="sageattention._fused", sources=["csrc/fused/pybind.cpp", "csrc/fused/fused.cu"],
                      extra_compile_args={"cxx": CXX, "nvcc": NVCC}),
        CUDAExtension(name="sageattention._qattn_sm90",
                      sources=["csrc/qattn/pybind_sm90.cpp", "csrc/qattn/qk_int_sv_f8_cuda_sm90.cu"],
                      extra_compile_args={"cxx": CXX, "nvcc": NVCC}, extra_link_args=["-lcuda"]),
    ],
    cmdclass={"build_ext": BuildExtension},
)
