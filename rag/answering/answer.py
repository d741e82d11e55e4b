"""The answer flow: retrieval → evidence check → generation (or an extractive answer) → citation mapping.

The server numbers the passages; a `[n]` it did not supply never leaves it. Every answer is
logged as a QueryLog, the newest turn of its conversation. A repeated question may be answered from
the answer cache (rag.answering.cache); its turn is recorded all the same.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence

from django.conf import settings
from django.db import connection, transaction

from config.metrics import KIND_LLM, provider_call
from permissions.models import User
from rag.answering.cache import CachedAnswer, CacheSlot, answer_cache_lookup, answer_cache_store
from rag.answering.citations import CitationFilter, clean_citations
from rag.answering.confidence import Assessment
from rag.answering.conversations import turn_save
from rag.answering.extractive import INSUFFICIENT_ANSWER, extractive_answer
from rag.answering.followup import Thread
from rag.answering.passages import Passage, Retrieval, ms_since, passages_confidence, retrieve
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


def answer_question(
    *,
    user: User,
    query: str,
    limit: int = 5,
    collection_id: uuid.UUID | None = None,
    document_id: uuid.UUID | None = None,
    tags: Sequence[str] = (),
    thread: Thread | None = None,
    started: float | None = None,
) -> Iterator[tuple[str, dict]]:
    """The answer to `query` (in `thread`, a conversation's follow-up: then `query` is the thread's question
    rewritten to stand alone), from the answer cache when it holds one the asker may still be given,
    else from retrieval and `answer_events` (which stores it). Either way the answer is the thread's newest turn.

    Not a generator itself: a scope that is not found, nothing indexed and the other errors of
    retrieval are raised here, before the first event. The earlier turns the prompt would be given
    are part of the cache key.
    """
    started = time.perf_counter() if started is None else started
    thread = thread or Thread(question=query, standalone=query)
    slot, hit = answer_cache_lookup(
        user=user,
        query=query,
        limit=limit,
        collection_id=collection_id,
        document_id=document_id,
        tags=tags,
        context=thread.context,
    )
    if hit is not None:
        return cached_answer_events(user=user, query=query, hit=hit, started=started, thread=thread)
    retrieval = retrieve(
        user=user,
        query=query,
        limit=limit,
        collection_id=collection_id,
        document_id=document_id,
        tags=list(tags),
        started=started,
    )
    return answer_events(user=user, retrieval=retrieval, cache_slot=slot, thread=thread)


def cached_answer_events(
    *, user: User, query: str, hit: CachedAnswer, started: float, thread: Thread
) -> Iterator[tuple[str, dict]]:
    """A cached answer as the same events as a fresh one, logged as an answer of its own (its own id for
    feedback) and saved as the thread's newest turn."""
    latency = {**thread.latency, "cacheMs": ms_since(started)}
    log = QueryLog(
        user=user,
        team_id=user.team_id,
        query=thread.question,
        standalone_query=query if query != thread.question else "",
        source_documents=sorted({uuid.UUID(document) for document, _, _ in hit.sources} | thread.sources),
        passage_count=hit.passages,
        answer=hit.answer,
        mode=hit.mode,
        confidence=hit.confidence,
        citations=hit.citations,
    )
    by_n = {c["n"]: c for c in hit.citations}
    citations = CitationFilter(set(by_n))
    logged = False
    try:
        for text, cited in [*(citations.feed(piece) for piece in _pieces(hit.answer)), citations.flush()]:
            if text:
                yield "token", {"text": text}
            for n in cited:
                yield "citation", by_n[n]
        latency["totalMs"] = ms_since(started)
        log.latency, log.total_ms = latency, latency["totalMs"]
        with transaction.atomic():
            # As the search log does: the row may be lost in a crash, so its commit need not wait for the
            # WAL to reach the disk, which would be a good part of a cached answer's time.
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL synchronous_commit = off")
            conversation = turn_save(log=log, conversation=thread.conversation)
        logged = True
        common = {
            "id": str(log.pk),
            "conversationId": str(conversation.pk),
            "standaloneQuery": query,
            "confidence": hit.confidence,
            "confidenceFactors": hit.confidence_factors,
            "mode": hit.mode,
            "cached": True,
            "latency": latency,
        }
        yield "metadata", {**common, "passages": hit.passages}
        yield "done", {**common, "answer": hit.answer, "citations": hit.citations, "html": hit.html}
    except GeneratorExit:
        if not logged:
            log.error, log.total_ms = "client disconnected", ms_since(started)
            log.latency = latency
            log.save()
        raise


def answer_events(
    *, user: User, retrieval: Retrieval, cache_slot: CacheSlot | None = None, thread: Thread | None = None
) -> Iterator[tuple[str, dict]]:
    """The answer as events: `token`, `citation`, then `metadata` and `done`; the query is logged as
    the newest turn of the thread's conversation (a new one without a thread).

    `retrieval` searched for the thread's standalone question. An LLM failure falls back to the
    extractive answer. If it fails after text was sent, `done` carries the extractive answer that
    supersedes what was streamed. An answer that completed as designed (no provider failure, read to
    the end) is stored in `cache_slot`.
    """
    thread = thread or Thread(question=retrieval.query, standalone=retrieval.query)
    passages = {p.n: p for p in retrieval.passages}
    log = QueryLog(
        user=user,
        team_id=user.team_id,
        query=thread.question,
        standalone_query=retrieval.query if retrieval.query != thread.question else "",
        passage_count=len(passages),
        source_documents=sorted({p.document_id for p in retrieval.passages} | thread.sources),
    )
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
        messages, model = build_prompt(retrieval.query, retrieval.passages, facts=retrieval.facts, earlier=thread.earlier), client
        pieces = _metered(
            stream_with_retries(
                lambda: model.stream(messages, max_tokens=settings.RAG_LLM_MAX_TOKENS),
                max_retries=settings.RAG_LLM_MAX_RETRIES,
                what=f"Answer with {client.model}",
                metric=(KIND_LLM, client.model),
            ),
            client.model,
        )
    latency = {**thread.latency, **retrieval.latency}
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
        conversation = turn_save(log=log, conversation=thread.conversation)
        logged = True
        turn = {"conversationId": str(conversation.pk), "standaloneQuery": retrieval.query}
        html = answer_html(answer, {c["n"]: c for c in citations})
        if cache_slot is not None and not log.error:
            sources = [(str(p.document_id), p.version, p.title) for p in retrieval.passages]
            answer_cache_store(
                cache_slot,
                CachedAnswer(
                    answer=answer,
                    citations=citations,
                    confidence=confidence,
                    confidence_factors=factors,
                    mode=mode,
                    passages=len(passages),
                    html=html,
                    sources=sources,
                ),
            )
        yield (
            "metadata",
            {
                "id": str(log.pk),
                **turn,
                "confidence": confidence,
                "confidenceFactors": factors,
                "mode": mode,
                "cached": False,
                "passages": len(passages),
                "latency": latency,
            },
        )
        result = {
            "id": str(log.pk),
            **turn,
            "answer": answer,
            "citations": citations,
            "confidence": confidence,
            "confidenceFactors": factors,
            "mode": mode,
            "cached": False,
            "latency": latency,
        }
        yield "done", {**result, "html": html}
    except GeneratorExit:
        # The reader went away: still record the question, but as no conversation's turn (its reader never got it).
        if not logged:
            log.mode, log.error, log.total_ms = mode, "client disconnected", ms_since(retrieval.started)
            log.answer = "".join(sent)
            log.save()
        raise


def answer_complete(events: Iterable[tuple[str, dict]]) -> dict:
    """The whole answer at once (the non-streamed response's `data`), from its events."""
    for event, data in events:
        if event == "done":
            data.pop("html")
            return data
    raise AssertionError("answer_events ended without a done event")
