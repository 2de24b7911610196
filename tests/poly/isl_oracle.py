"""isl oracle for tests/poly_islpy.rs: answers the affine engine's questions with islpy and
compares them with the engine's answers.

Usage: PYTHONPATH=.islpy python3 tests/poly/isl_oracle.py QUESTIONS.json
Input: a JSON list of questions {id, kind, inputs: {name: isl string}, engine: {...}}.
Output (stdout): a JSON list of {id, ok, msg} in the same order.

Per-dimension bounds are compared as piecewise affine functions on the set's parameter domain
(`dim_min`/`dim_max`, never `FixedBox`): equal when the engine says "exact", enclosing (lower
<= isl's minimum, upper >= isl's maximum) when it says "over".
"""

import json
import sys

import islpy as isl


def params_prefix(obj):
    space = obj.get_space()
    names = [space.get_dim_name(isl.dim_type.param, i) for i in range(space.dim(isl.dim_type.param))]
    return "[" + ", ".join(names) + "] -> " if names else ""


def pw(prefix, text, dom):
    return isl.PwAff(prefix + "{ [(" + text + ")] }").intersect_domain(dom)


def check_bounds(s, bounds):
    """Compares the engine's per-dimension bounds with isl's dim_min/dim_max of set s."""
    if bounds is None:
        return (s.is_empty(), "engine says empty, isl: " + str(s))
    if s.is_empty():
        return (False, "engine gives bounds of a set isl finds empty")
    dom = s.params()
    prefix = params_prefix(s)
    for k, b in enumerate(bounds):
        if "infty" in b["lower"] or "infty" in b["upper"]:
            return (False, f"dim {k}: infinite bound from the engine")
        ref_lo, ref_hi = s.dim_min(k), s.dim_max(k)
        lo, hi = pw(prefix, b["lower"], dom), pw(prefix, b["upper"], dom)
        if b["exact"]:
            ok = lo.is_equal(ref_lo) and hi.is_equal(ref_hi)
        else:
            ok = ref_lo.ge_set(lo).is_equal(dom) and ref_hi.le_set(hi).is_equal(dom)
        if not ok:
            return (False, f"dim {k}: engine [{b['lower']}, {b['upper']}] exact={b['exact']}, "
                           f"isl min {ref_lo} max {ref_hi}")
    return (True, "")


def check_answer(engine, truth, what):
    a = engine["answer"]
    if a == "unknown":
        return (True, "unknown")
    ok = (a == "yes") == truth
    return (ok, "" if ok else f"{what}: engine {a}, isl {truth}")


def check_set(engine_text, ref, what):
    mine = isl.Set(engine_text)
    if mine.is_equal(ref):
        return (True, "")
    return (False, f"{what}: engine {engine_text} != isl {ref}")


def answer(q):
    kind, inp, eng = q["kind"], q["inputs"], q["engine"]
    if "error" in eng:
        return (False, "engine error: " + eng["error"])
    if kind == "empty":
        return check_answer(eng, isl.Set(inp["set"]).is_empty(), "empty")
    if kind == "subset":
        return check_answer(eng, isl.Set(inp["a"]).is_subset(isl.Set(inp["b"])), "subset")
    if kind == "image":
        ref = isl.Set(inp["dom"]).apply(isl.Map(inp["map"]))
        if "clip" in inp:
            ref = ref.intersect(isl.Set(inp["clip"]))
    elif kind == "preimage":
        m = isl.Map(inp["map"]).intersect_domain(isl.Set(inp["dom"]))
        ref = m.intersect_range(isl.Set(inp["tile"])).domain()
    elif kind == "raw":
        w = isl.Map(inp["w"]).intersect_domain(isl.Set(inp["dw"]))
        r = isl.Map(inp["r"]).intersect_domain(isl.Set(inp["dr"]))
        dep = w.apply_range(r.reverse())
        if not isl.Map(eng["map"]).is_equal(dep):
            return (False, f"dependence: engine {eng['map']} != isl {dep}")
        ref = dep.intersect_range(isl.Set(inp["tile"])).domain()
    elif kind == "coalesce":
        ctx = isl.Set(inp["ctx"])
        orig = isl.Set(inp["set"]).intersect_params(ctx)
        mine = isl.Set(eng["set"]).intersect_params(ctx)
        if not mine.is_equal(orig):
            return (False, f"coalesce: engine {eng['set']} != {orig} on the context")
        return (True, f"pieces engine {eng['pieces']} isl {orig.coalesce().n_basic_set()}")
    else:
        return (False, "unknown kind " + kind)
    ok, msg = check_set(eng["set"], ref, kind)
    if not ok:
        return (ok, msg)
    return check_bounds(ref, eng["bounds"])


def main():
    with open(sys.argv[1]) as f:
        questions = json.load(f)
    out = []
    for q in questions:
        try:
            ok, msg = answer(q)
        except Exception as e:  # an isl parse error of the engine's output is a failure
            ok, msg = False, f"exception: {type(e).__name__}: {e}"
        out.append({"id": q["id"], "ok": bool(ok), "msg": msg})
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
