"""Deterministic stand-ins for tests: no model, no network. Selected with RAG_EMBEDDING_PROVIDER=fake and RAG_LLM_PROVIDER=fake."""

from __future__ import annotations

import hashlib
import re
import threading
import time
from collections.abc import Iterator

import numpy as np
from django.conf import settings

from config.metrics import record_tokens
from rag.providers.base import EmbeddingProvider, Message
from rag.providers.errors import ProviderError, TransientProviderError

_WORD = re.compile(r"\w+")


class FakeEmbeddingProvider(EmbeddingProvider):
    """Hashed bag of words: texts sharing words get similar vectors; every batch is recorded in `calls`."""

    def __init__(self, *, model_id: str, dimension: int, max_input_tokens: int = 256) -> None:
        self.model_id = model_id
        self.dimension = dimension
        self.max_input_tokens = max_input_tokens
        self.calls: list[list[str]] = []
        # Lets the worker-kill test land its SIGKILL in the middle of a batch.
        self.delay = settings.RAG_FAKE_EMBED_DELAY

    def embed(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        record_tokens(self.model_id, input_tokens=sum(len(_WORD.findall(text)) for text in texts))
        if self.delay:
            time.sleep(self.delay)
        return [self._vector(text) for text in texts]

    def _vector(self, text: str) -> list[float]:
        vector = np.zeros(self.dimension, dtype=np.float64)
        for word in _WORD.findall(text.lower()):
            digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
            index = int.from_bytes(digest[:4], "little") % self.dimension
            vector[index] += 1.0 if digest[4] & 1 else -1.0
        norm = float(np.linalg.norm(vector))
        if norm == 0:
            vector[0] = 1.0
            norm = 1.0
        return (vector / norm).tolist()


_PASSAGE = re.compile(r"<<<passage \w+ n=(\d+)[^\n]*>>>\n(.*?)\n<<<end \w+>>>", re.S)
_QUESTION = re.compile(r"Question: (.*)\Z", re.S)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_FOLLOW_UP = re.compile(r"Follow-up question: (.*)\Z", re.S)
_EARLIER_QUESTION = re.compile(r"^Q: (.*)$", re.M)


class FakeLLM:
    """Answers and reranks deterministically.

    By default it answers with the sentence of each of the first two passages that shares most words
    with the question, citing it, streamed a few characters at a time; asked to rewrite a follow-up,
    it answers with the follow-up and the last earlier question in parentheses. Tests script it with `responses`
    (the texts of the next calls, in order), `response` (the text of every call after those) and
    `failures` (errors raised by the next calls); every call's messages are recorded.
    RAG_FAKE_LLM_DELAY (seconds per piece) lets a server test watch tokens arrive one by one.
    """

    def __init__(self, model: str = "fake-llm") -> None:
        self.model = model
        self.reset()

    def reset(self) -> None:
        self.calls: list[list[Message]] = []
        self.rerank_calls: list[tuple[str, list[str]]] = []
        self.responses: list[str] = []
        self.response: str | None = None
        self.failures: list[ProviderError] = []
        self.fail_after: int | None = None  # raise a transient error after this many pieces
        self.delay = settings.RAG_FAKE_LLM_DELAY

    def stream(self, messages: list[Message], *, max_tokens: int) -> Iterator[str]:
        self.calls.append(messages)
        if self.failures:
            raise self.failures.pop(0)
        if self.responses:
            text = self.responses.pop(0)
        else:
            text = self.response if self.response is not None else self._answer(messages[-1]["content"])
        # Words stand in for tokens, so the metrics of a test server move like a real model's.
        record_tokens(
            self.model,
            input_tokens=sum(len(_WORD.findall(m["content"])) for m in messages),
            output_tokens=len(_WORD.findall(text)),
        )
        for count, start in enumerate(range(0, len(text), 4)):
            if self.fail_after is not None and count >= self.fail_after:
                raise TransientProviderError("fake failure mid-stream")
            if self.delay:
                time.sleep(self.delay)
            yield text[start : start + 4]

    def rerank(self, query: str, documents: list[str], *, top_n: int) -> list[tuple[int, float]]:
        """Reverses the order: tests can tell a reranked list from the original one."""
        self.rerank_calls.append((query, documents))
        if self.failures:
            raise self.failures.pop(0)
        count = len(documents)
        return [(i, (i + 1) / count) for i in reversed(range(count))][:top_n]

    @staticmethod
    def _answer(prompt: str) -> str:
        follow_up = _FOLLOW_UP.search(prompt)
        if follow_up:
            earlier = _EARLIER_QUESTION.findall(prompt)
            return f"{follow_up.group(1)} ({earlier[-1]})" if earlier else follow_up.group(1)
        question = _QUESTION.search(prompt)
        wanted = set(_WORD.findall(question.group(1).lower())) if question else set()
        sentences = []
        for n, body in _PASSAGE.findall(prompt)[:2]:
            candidates = [s.strip() for s in _SENTENCE.split(body) if s.strip()]
            if candidates:
                best = max(candidates, key=lambda s: len(wanted & set(_WORD.findall(s.lower()))))
                sentences.append(f"{best.lstrip('#').strip()} [{n}]")
        return " ".join(sentences) or "The passages do not say."


_fake_lock = threading.Lock()
_fakes: dict[str, FakeLLM] = {}


def fake_llm(model: str = "fake-llm") -> FakeLLM:
    """The process-wide fake for `model` (tests reach it to script and inspect calls)."""
    with _fake_lock:
        return _fakes.setdefault(model, FakeLLM(model))
