#!/usr/bin/env python3
"""A stand-in for `clang` where only gcc is installed, for tinygrad's CPU device (which compiles
its kernels with `clang -c -x c --target=<arch>-none-unknown-elf ... - -o -`): drops the
`--target` flag, keeps gcc from turning loops into memset/memcpy calls (a freestanding kernel has
no libc), and writes the object file to stdout. Point tinygrad at it with CC=<this file>.
Kernel *counts* do not depend on the C compiler (tinygrad schedules before it renders).
"""
import os
import subprocess
import sys
import tempfile

args = [a for a in sys.argv[1:] if not a.startswith("--target=")]
with tempfile.TemporaryDirectory() as d:
    obj = os.path.join(d, "k.o")
    if "-o" in args and args[args.index("-o") + 1] == "-":
        i = args.index("-o")
        args[i + 1] = obj
    else:
        obj = None
    r = subprocess.run(["gcc", "-fno-tree-loop-distribute-patterns", "-fno-stack-protector"] + args,
                       stdin=sys.stdin.buffer)
    if r.returncode != 0:
        sys.exit(r.returncode)
    if obj:
        with open(obj, "rb") as f:
            sys.stdout.buffer.write(f.read())
