"""The answer flow: retrieval → evidence check → generation (or an extractive answer) → citation mapping.

The server numbers the passages; a `[n]` it did not supply never leaves it. Every answer is
logged as a QueryLog.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

from django.conf import settings

from config.metrics import KIND_LLM, provider_call
from permissions.models import User
from rag.answering.citations import CitationFilter, clean_citations
from rag.answering.confidence import Assessment
from rag.answering.extractive import INSUFFICIENT_ANSWER, extractive_answer
from rag.answering.passages import Passage, Retrieval, ms_since, passages_confidence
from rag.answering.prompt import build_prompt
from rag.answering.rendering import answer_html
from rag.models import Confidence, QueryLog
from rag.providers.errors import PermanentProviderError, ProviderError
from rag.providers.llm import get_llm
from rag.providers.retry import stream_with_retries

logger = logging.getLogger("rag.answers")

MODE_GENERATED, MODE_EXTRACTIVE, MODE_INSUFFICIENT = "generated", "extractive", "insufficient"
MODES = (MODE_GENERATED, MODE_EXTRACTIVE, MODE_INSUFFICIENT)


def _metered(pieces: Iterator[str], model: str) -> Iterator[str]:
    """The answer's stream, counted and timed as one LLM call (a reader who leaves early ends it as `ok`)."""
    with provider_call(KIND_LLM, model):
        yield from pieces


def _pieces(text: str) -> Iterator[str]:
    """Stream an answer the server wrote itself a line at a time."""
    yield from text.splitlines(keepends=True)


def answer_confidence(passages: dict[int, Passage], *, mode: str, cited: list[int]) -> Assessment:
    """Confidence in the answer as made: the evidence of the passages it cites (of all of them when it
    cites none), then what the way it was made imposes."""
    assessment = passages_confidence([passages[n] for n in cited] or list(passages.values()))
    if mode == MODE_INSUFFICIENT:
        return assessment.overruled(Confidence.INSUFFICIENT, "No sentence of the passages answers the question")
    if not cited and mode == MODE_GENERATED:
        return assessment.overruled(Confidence.LOW, "The generated answer cites no passage, so it cannot be traced")
    if assessment.level == Confidence.INSUFFICIENT:
        return assessment.overruled(Confidence.LOW, "The answer cites only passages below the evidence threshold")
    return assessment


def answer_events(*, user: User, retrieval: Retrieval) -> Iterator[tuple[str, dict]]:
    """The answer as events: `token`, `citation`, then `metadata` and `done`; the query is logged.

    An LLM failure falls back to the extractive answer. If it fails after text was sent, `done`
    carries the extractive answer that supersedes what was streamed.
    """
    passages = {p.n: p for p in retrieval.passages}
    log = QueryLog(user=user, team_id=user.team_id, query=retrieval.query, passage_count=len(passages))
    client = get_llm() if retrieval.confidence != Confidence.INSUFFICIENT else None
    if retrieval.confidence == Confidence.INSUFFICIENT:
        mode, pieces = MODE_INSUFFICIENT, _pieces(INSUFFICIENT_ANSWER)
    elif client is None:
        extracted = extractive_answer(retrieval.query, retrieval.passages, facts=retrieval.facts)
        # No sentence of the passages answers the question: that is an insufficient answer, not an extractive one.
        mode = MODE_INSUFFICIENT if extracted == INSUFFICIENT_ANSWER else MODE_EXTRACTIVE
        pieces = _pieces(extracted)
    else:
        mode = MODE_GENERATED
        messages, model = build_prompt(retrieval.query, retrieval.passages, facts=retrieval.facts), client
        pieces = _metered(
            stream_with_retries(
                lambda: model.stream(messages, max_tokens=settings.RAG_LLM_MAX_TOKENS),
                max_retries=settings.RAG_LLM_MAX_RETRIES,
                what=f"Answer with {client.model}",
                metric=(KIND_LLM, client.model),
            ),
            client.model,
        )
    latency = dict(retrieval.latency)
    generation_started = time.perf_counter()
    sent: list[str] = []
    logged = False

    def stream(source: Iterator[str]) -> Iterator[tuple[str, dict]]:
        citations = CitationFilter(set(passages))
        for piece in source:
            text, cited = citations.feed(piece)
            yield from _text_events(text, cited)
        yield from _text_events(*citations.flush())

    def _text_events(text: str, cited: list[int]) -> Iterator[tuple[str, dict]]:
        if text:
            if not sent:
                latency["firstTokenMs"] = ms_since(retrieval.started)
            sent.append(text)
            yield "token", {"text": text}
        for n in cited:
            yield "citation", passages[n].citation()

    try:
        try:
            yield from stream(pieces)
            if mode == MODE_GENERATED and not "".join(sent).strip():
                assert client is not None, "an answer is generated only with an LLM client"
                raise PermanentProviderError(f"{client.model} returned an empty answer")
            answer = "".join(sent)
        except ProviderError as exc:
            logger.warning("Answer generation with %s failed, answering extractively: %s", client.model if client else "-", exc)
            log.error = str(exc)[:2000]
            answer = extractive_answer(retrieval.query, retrieval.passages, facts=retrieval.facts)
            mode = MODE_INSUFFICIENT if answer == INSUFFICIENT_ANSWER else MODE_EXTRACTIVE
            if not sent:
                yield from stream(_pieces(answer))
        finally:
            close = getattr(pieces, "close", None)
            if close:
                close()
        answer, cited = clean_citations(answer, set(passages))
        citations = [passages[n].citation() for n in sorted(cited)]
        assessment = answer_confidence(passages, mode=mode, cited=cited)
        confidence, factors = str(assessment.level), assessment.factors
        latency["generationMs"] = ms_since(generation_started)
        latency["totalMs"] = ms_since(retrieval.started)
        log.answer, log.mode, log.confidence, log.citations = answer, mode, confidence, citations
        log.latency, log.total_ms = latency, latency["totalMs"]
        log.save()
        logged = True
        yield (
            "metadata",
            {
                "id": str(log.pk),
                "confidence": confidence,
                "confidenceFactors": factors,
                "mode": mode,
                "passages": len(passages),
                "latency": latency,
            },
        )
        result = {
            "id": str(log.pk),
            "answer": answer,
            "citations": citations,
            "confidence": confidence,
            "confidenceFactors": factors,
            "mode": mode,
            "latency": latency,
        }
        yield "done", {**result, "html": answer_html(answer, {c["n"]: c for c in citations})}
    except GeneratorExit:
        if not logged:  # the reader went away: still record the question
            log.mode, log.error, log.total_ms = mode, "client disconnected", ms_since(retrieval.started)
            log.answer = "".join(sent)
            log.save()
        raise


def answer_complete(*, user: User, retrieval: Retrieval) -> dict:
    """The whole answer at once (the non-streamed response's `data`)."""
    for event, data in answer_events(user=user, retrieval=retrieval):
        if event == "done":
            data.pop("html")
            return data
    raise AssertionError("answer_events ended without a done event")
