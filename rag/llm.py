"""Chat generation and optional reranking behind one small interface.

`LiteLLMClient` reaches any provider LiteLLM supports (Anthropic, OpenAI, Bedrock, Ollama, a LiteLLM
proxy); `FakeLLM` is a deterministic stand-in for tests. LiteLLM's and the OpenAI SDK's own retries are
switched off (`num_retries=0`, `max_retries=0`): `with_retries` below is the only retry layer.
"""
from __future__ import annotations

import logging
import os
import random
import re
import threading
import time
from collections.abc import Callable, Iterator
from typing import Protocol, TypeVar

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

logger = logging.getLogger("rag.llm")

T = TypeVar("T")

Message = dict[str, str]

BASE_DELAY = 0.25
MAX_DELAY = 2.0
# Module attributes so tests can monkeypatch them and never really sleep.
sleep: Callable[[float], None] = time.sleep
jitter: Callable[[float, float], float] = random.uniform


class LLMError(Exception):
    """A failed generation or rerank call; `transient` says whether the same call may succeed later."""

    def __init__(self, message: str, *, transient: bool) -> None:
        super().__init__(message)
        self.transient = transient


class LLMClient(Protocol):
    model: str

    def stream(self, messages: list[Message], *, max_tokens: int) -> Iterator[str]:
        """Yield the answer's text as it is generated; raise LLMError."""
        ...


class Reranker(Protocol):
    model: str

    def rerank(self, query: str, documents: list[str], *, top_n: int) -> list[tuple[int, float]]:
        """(index into `documents`, relevance) pairs, most relevant first; raise LLMError."""
        ...


def with_retries(call: Callable[[], T], *, max_retries: int, what: str) -> T:
    """Run `call`, retrying transient LLMErrors up to `max_retries` times with jittered backoff."""
    attempt = 0
    while True:
        try:
            return call()
        except LLMError as exc:
            if not exc.transient or attempt >= max_retries:
                raise
            delay = jitter(0.0, min(MAX_DELAY, BASE_DELAY * 2**attempt))
            logger.warning("%s failed (%s); retry %d/%d in %.2fs", what, exc, attempt + 1, max_retries, delay)
            sleep(delay)
            attempt += 1


def stream_with_retries(client: LLMClient, messages: list[Message], *, max_tokens: int, max_retries: int) -> Iterator[str]:
    """Stream from `client`, retrying transient failures that happen before the first piece of text.

    Once text has been yielded it has reached the reader, so a later failure is raised, not retried.
    """
    attempt = 0
    while True:
        started = False
        try:
            for piece in client.stream(messages, max_tokens=max_tokens):
                started = True
                yield piece
            return
        except LLMError as exc:
            if started or not exc.transient or attempt >= max_retries:
                raise
            delay = jitter(0.0, min(MAX_DELAY, BASE_DELAY * 2**attempt))
            logger.warning("LLM stream failed before any text (%s); retry %d/%d in %.2fs", exc, attempt + 1, max_retries, delay)
            sleep(delay)
            attempt += 1


class LiteLLMClient:
    def __init__(self, *, model: str, api_base: str, api_key: str, timeout: float) -> None:
        self.model = model
        self.api_base = api_base or None
        self.api_key = api_key or None
        self.timeout = timeout

    def _call_kwargs(self) -> dict:
        return {
            "model": self.model, "api_base": self.api_base, "api_key": self.api_key,
            "timeout": self.timeout, "num_retries": 0, "max_retries": 0,
        }

    def stream(self, messages: list[Message], *, max_tokens: int) -> Iterator[str]:
        litellm = _litellm()
        try:
            response = litellm.completion(messages=messages, stream=True, max_tokens=max_tokens, temperature=0.1, **self._call_kwargs())
            for chunk in response:
                choices = getattr(chunk, "choices", None) or []
                text = getattr(choices[0].delta, "content", None) if choices else None
                if text:
                    yield text
        except LLMError:
            raise
        except Exception as exc:  # the network edge: every failure becomes an LLMError
            raise _as_llm_error(litellm, exc) from exc

    def rerank(self, query: str, documents: list[str], *, top_n: int) -> list[tuple[int, float]]:
        litellm = _litellm()
        try:
            response = litellm.rerank(query=query, documents=documents, top_n=top_n, return_documents=False, **self._call_kwargs())
        except Exception as exc:
            raise _as_llm_error(litellm, exc) from exc
        ranked = []
        for item in response.results or []:
            index = item["index"]
            if isinstance(index, int) and 0 <= index < len(documents):
                ranked.append((index, float(item.get("relevance_score") or 0.0)))
        return sorted(ranked, key=lambda pair: -pair[1])


def _litellm():
    from rag.providers.litellm_provider import import_litellm

    litellm = import_litellm()
    litellm.suppress_debug_info = True
    return litellm


def _as_llm_error(litellm, exc: Exception) -> LLMError:
    transient = (
        litellm.RateLimitError, litellm.Timeout, litellm.APIConnectionError,
        litellm.InternalServerError, litellm.ServiceUnavailableError,
    )
    return LLMError(f"{type(exc).__name__}: {exc}"[:500], transient=isinstance(exc, (*transient, TimeoutError, ConnectionError)))


_WORD = re.compile(r"\w+")
_PASSAGE = re.compile(r"<<<passage \w+ n=(\d+)[^\n]*>>>\n(.*?)\n<<<end \w+>>>", re.S)
_QUESTION = re.compile(r"Question: (.*)\Z", re.S)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")


class FakeLLM:
    """Deterministic stand-in for tests, selected with RAG_LLM_PROVIDER=fake.

    By default it answers with the sentence of each of the first two passages that shares most words
    with the question, citing it, streamed a few characters at a time. Tests script it with `response`
    (exact text) and `failures` (errors raised by the next calls); every call's messages are recorded.
    RAG_FAKE_LLM_DELAY (seconds per piece) lets a server test watch tokens arrive one by one.
    """

    def __init__(self, model: str = "fake-llm") -> None:
        self.model = model
        self.reset()

    def reset(self) -> None:
        self.calls: list[list[Message]] = []
        self.rerank_calls: list[tuple[str, list[str]]] = []
        self.response: str | None = None
        self.failures: list[LLMError] = []
        self.fail_after: int | None = None  # raise a transient error after this many pieces
        self.delay = float(os.environ.get("RAG_FAKE_LLM_DELAY", "0") or 0)

    def stream(self, messages: list[Message], *, max_tokens: int) -> Iterator[str]:
        self.calls.append(messages)
        if self.failures:
            raise self.failures.pop(0)
        text = self.response if self.response is not None else self._answer(messages[-1]["content"])
        for count, start in enumerate(range(0, len(text), 4)):
            if self.fail_after is not None and count >= self.fail_after:
                raise LLMError("fake failure mid-stream", transient=True)
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


def _client(model: str):
    provider = settings.RAG_LLM_PROVIDER
    if provider == "fake":
        return fake_llm(model)
    if provider == "litellm":
        return LiteLLMClient(model=model, api_base=settings.RAG_LLM_BASE_URL, api_key=settings.RAG_LLM_API_KEY, timeout=settings.RAG_LLM_TIMEOUT)
    raise ImproperlyConfigured(f"Unknown RAG_LLM_PROVIDER {provider!r}: use litellm or fake")


def get_llm() -> LLMClient | None:
    """The configured answer model, or None when RAG_LLM_MODEL is empty (answers are then extractive)."""
    return _client(settings.RAG_LLM_MODEL) if settings.RAG_LLM_MODEL else None


def get_reranker() -> Reranker | None:
    return _client(settings.RAG_RERANK_MODEL) if settings.RAG_RERANK_MODEL else None
