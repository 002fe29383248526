"""ONNX Runtime's fused SkipLayerNormalization against the Add, Add and LayerNormalization it
replaces, on the CPU, side by side in one run.

BERT base's shape by default (128 tokens, hidden 768): three graphs, each built here and run with
graph optimisation off (so nothing is fused or unfused behind our back) on `--threads` intra-op
threads: `fused` (one SkipLayerNormalization node: input + skip + bias, then the layer norm),
`parts` (Add of the bias, Add of the skip, LayerNormalization) and `floor` (one Identity: what a
session call costs without the work, in both of the others too). Each round times `--calls` calls
of each graph, the order alternating by round, so a drift of the machine hits both. It checks that
the two graphs agree, then prints the machine, each graph's median, min and max per call over the rounds, and
the ratio fused / parts of the medians, each with the floor taken off.

Usage: .venv/bin/python benchmarks/ort_skip_layer_norm.py [--tokens 128] [--hidden 768]
           [--threads 1] [--rounds 15] [--calls 200] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from harness.run.system import machine_line

from rounds import warn_if_one_round

GRAPHS = ("fused", "parts", "floor")
EPSILON = 1e-12  # BERT's


def model_bytes(kind: str, tokens: int, hidden: int) -> bytes:
    """The one-node (or three-node) graph `kind`, serialised."""
    from onnx import TensorProto, helper, numpy_helper

    shape = [1, tokens, hidden]
    inputs = [helper.make_tensor_value_info(name, TensorProto.FLOAT, shape) for name in ("x", "skip")]
    output = helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)
    if kind == "floor":
        graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], kind, inputs[:1], [output])
    else:
        rng = np.random.default_rng(0)  # the same weights in both graphs
        weights = [numpy_helper.from_array(rng.standard_normal(hidden).astype(np.float32), name)
                   for name in ("gamma", "beta", "bias")]
        if kind == "fused":
            nodes = [helper.make_node("SkipLayerNormalization", ["x", "skip", "gamma", "beta", "bias"], ["y"],
                                      domain="com.microsoft", epsilon=EPSILON)]
        else:
            nodes = [helper.make_node("Add", ["x", "bias"], ["biased"]),
                     helper.make_node("Add", ["biased", "skip"], ["summed"]),
                     helper.make_node("LayerNormalization", ["summed", "gamma", "beta"], ["y"], axis=-1, epsilon=EPSILON)]
        graph = helper.make_graph(nodes, kind, inputs, [output], weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 10  # what onnxruntime reads (onnx writes its own newest)
    serialised: bytes = model.SerializeToString()
    return serialised


def session(kind: str, tokens: int, hidden: int, threads: int) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model_bytes(kind, tokens, hidden), options, providers=["CPUExecutionProvider"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--hidden", type=int, default=768)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    if min(args.tokens, args.hidden, args.threads, args.rounds, args.calls) < 1:
        parser.error("--tokens, --hidden, --threads, --rounds and --calls must be at least 1")
    warn_if_one_round("ort_skip_layer_norm", args.rounds)
    import onnxruntime as ort

    rng = np.random.default_rng(1)
    feeds = {name: rng.standard_normal((1, args.tokens, args.hidden)).astype(np.float32) for name in ("x", "skip")}
    sessions = {kind: session(kind, args.tokens, args.hidden, args.threads) for kind in GRAPHS}
    feed_of = {kind: feeds if kind != "floor" else {"x": feeds["x"]} for kind in GRAPHS}
    fused, parts = (sessions[kind].run(None, feed_of[kind])[0] for kind in ("fused", "parts"))
    max_abs_err = float(np.abs(fused - parts).max())
    if max_abs_err > 1e-4:
        raise SystemExit(f"ort_skip_layer_norm: the fused and the parts graphs disagree by {max_abs_err:.2e}")
    machine = machine_line()
    print(f"machine: {machine}; onnxruntime {ort.__version__}, {args.threads} intra-op thread(s)", flush=True)
    per_call_ms: dict[str, list[float]] = {kind: [] for kind in GRAPHS}
    for round_ in range(args.rounds):
        for kind in GRAPHS if round_ % 2 == 0 else GRAPHS[::-1]:
            run, feed = sessions[kind].run, feed_of[kind]
            start = time.perf_counter()
            for _ in range(args.calls):
                run(None, feed)
            per_call_ms[kind].append((time.perf_counter() - start) / args.calls * 1e3)
    medians = {kind: statistics.median(times) for kind, times in per_call_ms.items()}
    for kind in GRAPHS:
        times = per_call_ms[kind]
        print(f"{kind}: {medians[kind]:.4f} ms a call (min {min(times):.4f}, max {max(times):.4f}; {args.rounds} rounds "
              f"of {args.calls} calls)")
    ratio = (medians["fused"] - medians["floor"]) / (medians["parts"] - medians["floor"])
    figures: dict[str, Any] = {"machine": machine, "onnxruntime": ort.__version__, "tokens": args.tokens, "hidden": args.hidden,
                               "threads": args.threads, "rounds": args.rounds, "calls": args.calls,
                               "max_abs_err": max_abs_err, "per_call_ms": per_call_ms, "median_ms": medians,
                               "ratio_fused_to_parts": ratio}
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    print(f"max abs err fused against parts: {max_abs_err:.2e}")
    print(f"ratio fused / parts, the floor taken off: {ratio:.2f}")


if __name__ == "__main__":
    main()
