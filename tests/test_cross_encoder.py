"""The cross-encoder stage, run with a tiny real ONNX cross-encoder built here.

The model is BERT-shaped (input_ids, attention_mask, token_type_ids -> one logit per
pair) with a bag-of-embeddings body: it sums the token embeddings of each segment
and scores the pair by their dot product, so relevance is word overlap between the
question and the candidate. Random unit-ish embeddings over the bundled WordPiece
vocabulary make that dot product count shared tokens.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

from anamnesis import Memory
from anamnesis.bench.presets import BENCH_PRESETS
from anamnesis.retrieve.crossencoder import (
    CROSS_ENCODER_ENV,
    CrossEncoderUnavailableError,
    OnnxCrossEncoder,
    load_cross_encoder,
)

VOCAB = (
    Path(__file__).resolve().parent.parent / "anamnesis" / "data" / "bert-base-uncased-vocab.txt"
)
DIM = 64


def build_overlap_cross_encoder(directory: Path) -> Path:
    """Write model.onnx and tokenizer.json of the word-overlap cross-encoder."""
    directory.mkdir(parents=True, exist_ok=True)
    vocab_size = sum(1 for _ in VOCAB.open(encoding="utf-8"))
    rng = np.random.default_rng(7)
    table = (rng.standard_normal((vocab_size, DIM)) / np.sqrt(DIM)).astype(np.float32)
    nodes = [
        helper.make_node("Gather", ["table", "input_ids"], ["emb"]),
        helper.make_node("Cast", ["attention_mask"], ["mask"], to=TensorProto.FLOAT),
        helper.make_node("Cast", ["token_type_ids"], ["types"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["mask", "types"], ["mask_b"]),
        helper.make_node("Sub", ["mask", "mask_b"], ["mask_a"]),
        helper.make_node("Unsqueeze", ["mask_a", "axis2"], ["mask_a3"]),
        helper.make_node("Unsqueeze", ["mask_b", "axis2"], ["mask_b3"]),
        helper.make_node("Mul", ["emb", "mask_a3"], ["emb_a"]),
        helper.make_node("Mul", ["emb", "mask_b3"], ["emb_b"]),
        helper.make_node("ReduceSum", ["emb_a", "axis1"], ["sum_a"], keepdims=0),
        helper.make_node("ReduceSum", ["emb_b", "axis1"], ["sum_b"], keepdims=0),
        helper.make_node("Mul", ["sum_a", "sum_b"], ["product"]),
        helper.make_node("ReduceSum", ["product", "axis1"], ["logits"], keepdims=1),
    ]
    graph = helper.make_graph(
        nodes,
        "overlap-cross-encoder",
        [
            helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "tokens"])
            for name in ("input_ids", "attention_mask", "token_type_ids")
        ],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1])],
        [
            numpy_helper.from_array(table, "table"),
            numpy_helper.from_array(np.array([2], dtype=np.int64), "axis2"),
            numpy_helper.from_array(np.array([1], dtype=np.int64), "axis1"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model)
    onnx.save(model, directory / "model.onnx")

    tokenizer = Tokenizer(models.WordPiece.from_file(str(VOCAB), unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", 101), ("[SEP]", 102)],
    )
    tokenizer.save(str(directory / "tokenizer.json"))
    return directory


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_overlap_cross_encoder(tmp_path_factory.mktemp("cross-encoder"))


def test_onnx_cross_encoder_scores_pairs_jointly(model_dir: Path) -> None:
    encoder = OnnxCrossEncoder(model_dir)
    scores = encoder.score(
        "which guitar did maria buy",
        ["the weather was rainy all week", "maria bought a red electric guitar", "guitar"],
    )
    assert scores.shape == (3,) and scores.dtype == np.float32
    assert scores[1] > scores[2] > scores[0]
    assert load_cross_encoder(str(model_dir)).name == encoder.name  # kind inferred: onnx


def test_cross_encoder_stage_puts_the_top_candidates_in_encoder_order(
    model_dir: Path, db_path, embedder
) -> None:
    texts = [
        "Maria bought a red electric guitar last week",
        "Guitar lessons start in June",
        "I bought bread",
        "Maria's sister plays drums",
        "What a week it has been",
    ]
    config = BENCH_PRESETS["rerank-ce"].with_(
        stage_options={"cross-encoder": {"model": str(model_dir), "top_n": 5}}
    )
    query = "which guitar did Maria buy"
    with Memory(path=db_path, embedder=embedder, config=config) as mem:
        mem.add(texts, user_id="u")
        hits = mem.search(query, user_id="u", limit=5)
    scores = OnnxCrossEncoder(model_dir).score(query, [h.episode.content for h in hits])
    assert list(scores) == sorted(scores, reverse=True)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert hits[0].episode.content.startswith("Maria bought")


def test_a_missing_model_is_a_typed_error_that_says_what_to_set(
    tmp_path: Path, db_path, embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(CROSS_ENCODER_ENV, raising=False)
    with Memory(path=db_path, embedder=embedder, config=BENCH_PRESETS["rerank-ce"]) as mem:
        mem.add(["hello there"], user_id="u")
        with pytest.raises(CrossEncoderUnavailableError, match=CROSS_ENCODER_ENV):
            mem.search("hello", user_id="u")
    with pytest.raises(CrossEncoderUnavailableError, match="not found"):
        load_cross_encoder(str(tmp_path / "nowhere"), "onnx")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CrossEncoderUnavailableError, match="model.onnx"):
        load_cross_encoder(str(tmp_path / "empty"), "onnx")


def test_a_model_onnxruntime_cannot_load_is_a_typed_error(model_dir: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "model.onnx").write_bytes(b"not a model")
    (broken / "tokenizer.json").write_bytes((model_dir / "tokenizer.json").read_bytes())
    with pytest.raises(CrossEncoderUnavailableError, match="cannot load"):
        OnnxCrossEncoder(broken)


def test_a_directory_without_its_tokenizer_is_refused(model_dir: Path, tmp_path: Path) -> None:
    lonely = tmp_path / "lonely"
    lonely.mkdir()
    (lonely / "model.onnx").write_bytes((model_dir / "model.onnx").read_bytes())
    with pytest.raises(CrossEncoderUnavailableError, match=r"tokenizer\.json"):
        OnnxCrossEncoder(lonely)


def test_sentence_transformers_models_need_that_package(tmp_path: Path) -> None:
    try:
        import sentence_transformers  # noqa: F401
    except ImportError:
        with pytest.raises(CrossEncoderUnavailableError, match="pip install sentence-transformers"):
            load_cross_encoder(str(tmp_path), "sentence-transformers")
    else:
        pytest.skip("sentence-transformers is installed; the missing-package path cannot run")
