"""The local MiniLM's two encoders: onnxruntime gives the NumPy reference's vectors, so they share one model id."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from rag.providers.embeddings import get_embedding_provider, reset_provider_cache
from rag.providers.local import MAX_SEQ_LENGTH, MODEL_ID, load_local_model
from rag.providers.minilm import get_local_tokenizer
from rag.providers.minilm_numpy import NumpyMiniLM
from rag.providers.minilm_onnx import OnnxMiniLM

pytestmark = pytest.mark.slow_model

TEXTS = [
    "How do I reset my password?",
    "Steps to change a forgotten account password",
    "# Deploying\n\nRun `make deploy` after the tests pass; see [the runbook](/doc/42).",
    "Ünïcödé, emoji 🚀 and CJK 漢字 survive tokenisation",
    "ALDH1 expression is associated with poorer prognosis for breast cancer primary tumors. " * 3,
]
# Well past MAX_SEQ_LENGTH word pieces.
LONG = " ".join(f"Sentence {i} of a long passage about glaciers, moraines and cairns." for i in range(60))
BLANK = ["", " ", "\n\t", "."]


@pytest.fixture(scope="module")
def numpy_encoder():
    return load_local_model("numpy")


@pytest.fixture(scope="module")
def onnx_encoder():
    return load_local_model("onnx", 2)


def assert_same_vectors(actual: np.ndarray, expected: np.ndarray) -> None:
    assert np.abs(actual - expected).max() < 1e-5
    assert ((actual * expected).sum(axis=-1) >= 0.9999).all()


def test_onnx_vectors_are_the_numpy_references(numpy_encoder, onnx_encoder):
    assert_same_vectors(onnx_encoder.encode(TEXTS + [LONG]), numpy_encoder.encode(TEXTS + [LONG]))


def test_onnx_query_vectors_are_the_numpy_references(numpy_encoder, onnx_encoder):
    for text in TEXTS:
        assert_same_vectors(onnx_encoder.encode_query(text), numpy_encoder.encode_query(text))


@pytest.mark.parametrize("encoder", ["numpy", "onnx"])
def test_a_text_embeds_the_same_alone_as_a_query_and_among_a_batch_of_other_lengths(encoder):
    model = load_local_model(encoder, 2)
    batch = model.encode(TEXTS + [LONG])
    alone = np.stack([model.encode([text])[0] for text in TEXTS + [LONG]])
    queries = np.stack([model.encode_query(text) for text in TEXTS + [LONG]])
    assert np.abs(batch - alone).max() < 1e-6
    assert np.abs(batch - queries).max() < 1e-6


@pytest.mark.parametrize("encoder", ["numpy", "onnx"])
def test_a_batch_comes_back_in_input_order(encoder):
    model = load_local_model(encoder, 2)
    forward, backward = model.encode(TEXTS), model.encode(TEXTS[::-1])
    assert np.abs(forward - backward[::-1]).max() < 1e-6


@pytest.mark.parametrize("encoder", ["numpy", "onnx"])
def test_words_past_max_seq_length_do_not_change_the_vector(encoder):
    assert len(get_local_tokenizer().encode(LONG).ids) > MAX_SEQ_LENGTH + 50
    model = load_local_model(encoder, 2)
    longer, changed_tail, changed_head = model.encode([LONG + " A recipe for bread.", LONG[:-20] + "cooking", "Bread. " + LONG])
    reference = model.encode([LONG])[0]
    assert np.abs(longer - reference).max() < 1e-6
    assert np.abs(changed_tail - reference).max() < 1e-6
    assert np.abs(changed_head - reference).max() > 1e-3, "the words the model does see still count"


def test_empty_and_blank_texts_get_the_references_unit_vectors(numpy_encoder, onnx_encoder):
    vectors = onnx_encoder.encode(BLANK)
    assert np.isfinite(vectors).all()
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert_same_vectors(vectors, numpy_encoder.encode(BLANK))
    assert_same_vectors(onnx_encoder.encode_query(""), numpy_encoder.encode_query(""))


def test_no_texts_give_no_vectors(onnx_encoder):
    assert onnx_encoder.encode([]).shape == (0, 384)


def test_queries_from_several_threads_at_once_get_their_own_vectors(onnx_encoder):
    expected = [onnx_encoder.encode_query(text) for text in TEXTS]
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(onnx_encoder.encode_query, TEXTS * 4))
    for i, vector in enumerate(results):
        assert np.abs(vector - expected[i % len(TEXTS)]).max() < 1e-6


@pytest.fixture
def local_provider(settings):
    settings.RAG_EMBEDDING_PROVIDER = "local"
    settings.RAG_EMBEDDING_MODEL = MODEL_ID

    def build(**overrides):
        for name, value in overrides.items():
            setattr(settings, name, value)
        reset_provider_cache()
        return get_embedding_provider()

    yield build
    reset_provider_cache()


def test_the_local_provider_runs_onnx_by_default_with_the_configured_threads(local_provider, settings):
    provider = local_provider(RAG_LOCAL_ENCODER_THREADS=1)
    assert isinstance(provider.model, OnnxMiniLM)
    assert provider.model.threads == 1
    assert provider.model_id == "all-MiniLM-L6-v2"


def test_rag_local_encoder_numpy_selects_the_reference_under_the_same_model_id(local_provider):
    provider = local_provider(RAG_LOCAL_ENCODER="numpy")
    assert isinstance(provider.model, NumpyMiniLM)
    assert provider.model_id == "all-MiniLM-L6-v2", "same vectors, so no reindex when switching"


def test_the_model_loads_once_per_process_however_often_the_provider_is_built(local_provider):
    first = local_provider(RAG_LOCAL_ENCODER="onnx", RAG_LOCAL_ENCODER_THREADS=2)
    second = local_provider(RAG_BATCH_SIZE=7)  # another configuration, the same local model
    assert first is not second
    assert first.model is second.model


def test_the_provider_embeds_queries_and_passages_alike(local_provider):
    provider = local_provider()
    [passage] = provider.embed([TEXTS[0]])
    query = provider.embed_query(TEXTS[0])
    assert len(query) == 384
    assert np.abs(np.array(query) - np.array(passage)).max() < 1e-6


def test_the_onnx_encoder_maps_its_weights_from_the_saved_file_every_process_shares(onnx_encoder):
    from django.conf import settings

    model = load_local_model("onnx", 2, settings.RAG_LOCAL_ENCODER_CACHE_DIR)
    assert model is not onnx_encoder and model.shared_weights
    # onnxruntime reads the weights from the file's pages in the page cache, which every process maps, not from a copy.
    mapped = {line.split()[-1] for line in open("/proc/self/maps") if line.rstrip().endswith("weights.bin")}
    assert [Path(path).parent.parent for path in mapped] == [Path(settings.RAG_LOCAL_ENCODER_CACHE_DIR)]
    assert_same_vectors(model.encode(TEXTS + [LONG]), onnx_encoder.encode(TEXTS + [LONG]))
    assert_same_vectors(model.encode_query(TEXTS[0]), onnx_encoder.encode_query(TEXTS[0]))
