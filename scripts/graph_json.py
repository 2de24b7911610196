"""Builders of graph.json documents shared by the generators in scripts/ (realistic shapes,
random shape sweeps): inputs by role, the document, and one Elementwise node."""


def data(name):
    return {"tensor": name, "role": "data"}


def param(name):
    return {"tensor": name, "role": "param", "storage": "const_pool"}


def graph(inputs, outputs, symbols, tensors, nodes):
    g = {"signature": {"inputs": inputs, "outputs": [{"tensor": o} for o in outputs]}}
    if symbols:
        g["symbols"] = symbols
    g["tensors"] = {k: {"dtype": d, "shape": s} for k, (d, s) in tensors.items()}
    g["graph"] = nodes
    return g


def ew(name, fn, ins, out):
    return {"op": "Elementwise", "name": name, "inputs": ins, "outputs": [out], "attrs": {"fn": fn}}
