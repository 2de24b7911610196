#!/usr/bin/env python3
"""Compiles every tests/emu/*.cu fixture with NVRTC against the device header
src/codegen/include/dlc_kernel.cuh, for sm_80 and sm_90a (no GPU needed).

    pip install --no-deps --target /tmp/cudawheels nvidia-cuda-nvrtc nvidia-cuda-runtime
    python3 tests/emu/nvrtc_check.py /tmp/cudawheels/nvidia/cu13

The argument is the folder holding lib/libnvrtc.so.* and include/cuda_fp16.h. Exit status 1
if any fixture fails to compile; NVRTC's log is printed.
"""
import ctypes
import glob
import os
import sys

ARCHS = ["sm_80", "sm_90a"]


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    cuda = sys.argv[1]
    libs = sorted(glob.glob(os.path.join(cuda, "lib", "libnvrtc.so*")))
    if not libs:
        print(f"no libnvrtc.so under {cuda}/lib")
        return 2
    nvrtc = ctypes.CDLL(libs[0])
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "src/codegen/include/dlc_kernel.cuh"), "rb") as f:
        header = f.read()
    failed = 0
    for path in sorted(glob.glob(os.path.join(root, "tests/emu/*.cu"))):
        with open(path, "rb") as f:
            src = f.read()
        for arch in ARCHS:
            prog = ctypes.c_void_p()
            rc = nvrtc.nvrtcCreateProgram(
                ctypes.byref(prog), src, b"kernels.cu", 1,
                (ctypes.c_char_p * 1)(header), (ctypes.c_char_p * 1)(b"dlc_kernel.cuh"))
            if rc != 0:
                print(f"nvrtcCreateProgram failed: {rc}")
                return 1
            opts = [f"--gpu-architecture={arch}".encode(),
                    f"-I{os.path.join(cuda, 'include')}".encode(), b"-std=c++17"]
            rc = nvrtc.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
            size = ctypes.c_size_t()
            nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
            log = ctypes.create_string_buffer(size.value)
            nvrtc.nvrtcGetProgramLog(prog, log)
            nvrtc.nvrtcDestroyProgram(ctypes.byref(prog))
            name = os.path.relpath(path, root)
            print(f"{'ok  ' if rc == 0 else 'FAIL'} {arch} {name}")
            if rc != 0 or log.value.strip():
                print(log.value.decode(errors="replace"))
            failed += rc != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
