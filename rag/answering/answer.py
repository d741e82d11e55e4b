"""The answer flow: retrieval → evidence check → generation (or an extractive answer) → citation mapping.

The server numbers the passages; a `[n]` it did not supply never leaves it. Every answer is
logged as a QueryLog, the newest turn of its conversation (unless the caller may not write: then of
none). A repeated question may be answered from
the answer cache (rag.answering.cache); its turn is recorded all the same.

An answer is a stream of events (`TokenEvent`, `CitationEvent`, then `MetadataEvent` and
`DoneEvent`), built here and nowhere else; the API renders each with its output serializer, as JSON
at once or as Server-Sent Events.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from django.conf import settings
from django.db import connection, transaction

from config.metrics import KIND_LLM, TokenUsage, counting_tokens, provider_call
from permissions.models import User
from rag.answering.cache import CachedAnswer, CacheSlot, answer_cache_lookup, answer_cache_store
from rag.answering.citations import CitationFilter, clean_citations
from rag.answering.confidence import AnswerSupport, Assessment, ConfidenceFactors, answer_support
from rag.answering.conversations import turn_save
from rag.answering.extractive import INSUFFICIENT_ANSWER, Extract, extract
from rag.answering.followup import Thread, thread_for
from rag.answering.passages import Passage, Retrieval, ms_since, passages_confidence, retrieve
from rag.answering.prompt import build_prompt
from rag.answering.rendering import answer_html
from rag.models import Confidence, QueryLog
from rag.providers.base import LLMClient
from rag.providers.errors import PermanentProviderError, ProviderError
from rag.providers.llm import get_llm
from rag.providers.retry import stream_with_retries
from rag.retrieval.search import MODES as RANKINGS

logger = logging.getLogger("rag.answers")

MODE_GENERATED, MODE_EXTRACTIVE, MODE_INSUFFICIENT = "generated", "extractive", "insufficient"
MODES = (MODE_GENERATED, MODE_EXTRACTIVE, MODE_INSUFFICIENT)


@dataclass(frozen=True)
class AnswerRecord:
    """A finished answer, fresh or cached: what the `metadata` and `done` events report."""

    id: str  # the QueryLog's: the answer's id for feedback
    conversation_id: str | None  # None: kept in no conversation (the thread's `keep`)
    standalone_query: str
    answer: str
    citations: list[dict[str, Any]]
    confidence: str
    confidence_factors: ConfidenceFactors
    mode: str
    cached: bool
    passages: int
    latency: dict[str, float]
    html: str
    # An extractive answer given without asking the configured LLM: its evidence was strong enough.
    fast_path: bool = False
    # How many of the answer's passages each ranking found (vector, keyword, graph).
    rankings: dict[str, int] = field(default_factory=dict)
    # The LLM's tokens for this answer ({"prompt", "completion"}), None when no LLM wrote it.
    tokens: dict[str, int] | None = None

    def summary(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "conversationId": self.conversation_id,
            "standaloneQuery": self.standalone_query,
            "confidence": self.confidence,
            "confidenceFactors": self.confidence_factors,
            "mode": self.mode,
            "cached": self.cached,
            "fastPath": self.fast_path,
            "rankings": self.rankings,
            "tokens": self.tokens,
            "latency": self.latency,
        }

    def body(self) -> dict[str, Any]:
        """The answer as rag.answer returns it without streaming (its `data`)."""
        return {**self.summary(), "answer": self.answer, "citations": self.citations}


@dataclass(frozen=True)
class TokenEvent:
    name: ClassVar[str] = "token"
    text: str

    def payload(self) -> dict[str, Any]:
        return {"text": self.text}


@dataclass(frozen=True)
class CitationEvent:
    name: ClassVar[str] = "citation"
    citation: dict[str, Any]

    def payload(self) -> dict[str, Any]:
        return self.citation


@dataclass(frozen=True)
class MetadataEvent:
    name: ClassVar[str] = "metadata"
    record: AnswerRecord

    def payload(self) -> dict[str, Any]:
        return {**self.record.summary(), "passages": self.record.passages}


@dataclass(frozen=True)
class DoneEvent:
    name: ClassVar[str] = "done"
    record: AnswerRecord

    def payload(self) -> dict[str, Any]:
        return {**self.record.body(), "html": self.record.html}


AnswerEvent = TokenEvent | CitationEvent | MetadataEvent | DoneEvent
# A generator, not only an iterator: a reader that leaves closes it, and the answer is logged as left.
AnswerStream = Generator[AnswerEvent, None, None]


def _metered(pieces: Iterator[str], model: str) -> Iterator[str]:
    """The answer's stream, counted and timed as one LLM call (a reader who leaves early ends it as `ok`)."""
    with provider_call(KIND_LLM, model):
        yield from pieces


def _pieces(text: str) -> Iterator[str]:
    """Stream an answer the server wrote itself a line at a time."""
    yield from text.splitlines(keepends=True)


class _CitedStream:
    """Answer text as token and citation events: a `[n]` is sent once it is known to name a passage, its citation after it."""

    def __init__(
        self, citations: Mapping[int, dict[str, Any]], *, first_text_latency: dict[str, float] | None = None, started: float = 0.0
    ) -> None:
        self.citations = citations
        self.sent: list[str] = []
        # Where to note when the first text left (a fresh answer's firstTokenMs), counted from `started`.
        self._first_text_latency, self._started = first_text_latency, started

    @property
    def text(self) -> str:
        return "".join(self.sent)

    def events(self, source: Iterable[str]) -> Iterator[AnswerEvent]:
        citations = CitationFilter(set(self.citations))
        for piece in source:
            yield from self._emit(*citations.feed(piece))
        yield from self._emit(*citations.flush())

    def _emit(self, text: str, cited: list[int]) -> Iterator[AnswerEvent]:
        if text:
            if not self.sent and self._first_text_latency is not None:
                self._first_text_latency["firstTokenMs"] = ms_since(self._started)
            self.sent.append(text)
            yield TokenEvent(text)
        for n in cited:
            yield CitationEvent(self.citations[n])


def _query_log(*, user: User, thread: Thread, query: str, passages: int, sources: set[uuid.UUID], **fields: Any) -> QueryLog:
    """The answer's log row (saved as the thread's newest turn once the answer is complete)."""
    return QueryLog(
        user=user,
        team_id=user.team_id,
        query=thread.question,
        standalone_query=query if query != thread.question else "",
        passage_count=passages,
        source_documents=sorted(sources | thread.sources),
        **fields,
    )


def _turn_save(log: QueryLog, thread: Thread) -> str | None:
    """Save the answer's log as the thread's newest turn (its conversation's id), or as no conversation's without `keep`."""
    if not thread.keep:
        log.save()
        return None
    return str(turn_save(log=log, conversation=thread.conversation, replaces=thread.replaces).pk)


def _log_left(log: QueryLog, *, answer: str, started: float, latency: dict[str, float] | None = None) -> None:
    """The reader went away: the question is still recorded, but as no conversation's turn (its reader never got it)."""
    log.error, log.total_ms, log.answer = "client disconnected", ms_since(started), answer
    if latency is not None:
        log.latency = latency
    log.save()


def answer_confidence(
    passages: dict[int, Passage], *, mode: str, cited: list[int], support: AnswerSupport | None = None
) -> Assessment:
    """Confidence in the answer as made: the evidence of the passages it cites (of all of them when it
    cites none), then what the way it was made imposes (an extractive answer's `support`: what it found)."""
    assessment = passages_confidence([passages[n] for n in cited] or list(passages.values()))
    if mode == MODE_EXTRACTIVE and support is not None:
        assessment = answer_support(assessment, support)
    if mode == MODE_INSUFFICIENT:
        return assessment.overruled(Confidence.INSUFFICIENT, "No sentence of the passages answers the question")
    if not cited and mode == MODE_GENERATED:
        return assessment.overruled(Confidence.LOW, "The generated answer cites no passage, so it cannot be traced")
    if assessment.level == Confidence.INSUFFICIENT:
        return assessment.overruled(Confidence.LOW, "The answer cites only passages below the evidence threshold")
    return assessment


def answer_request(
    *,
    user: User,
    query: str,
    conversation_id: uuid.UUID | None = None,
    limit: int = 5,
    collection_id: uuid.UUID | None = None,
    document_id: uuid.UUID | None = None,
    tags: Sequence[str] = (),
    started: float | None = None,
    keep: bool,
    fresh: bool = False,
    replaces: uuid.UUID | None = None,
    include_graph: bool = True,
) -> AnswerStream:
    """One rag.answer (the API's, streamed or not, and the MCP answer tool's): `query` in its conversation, answered.

    `keep` is whether the caller may write: without it the answer starts or continues no conversation.
    `fresh` answers without reading the answer cache; `replaces` is the conversation's newest answer, which
    this one takes the place of once complete (a regenerated answer: see `thread_for`).
    Not a generator itself: a conversation, scope or index that is not there is raised here, before the first event.
    """
    started = time.perf_counter() if started is None else started
    thread = thread_for(user=user, question=query, conversation_id=conversation_id, keep=keep, replaces=replaces)
    return answer_question(
        user=user,
        query=thread.standalone,
        thread=thread,
        limit=limit,
        collection_id=collection_id,
        document_id=document_id,
        tags=tags,
        started=started,
        fresh=fresh,
        include_graph=include_graph,
    )


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
    fresh: bool = False,
    include_graph: bool = True,
) -> AnswerStream:
    """The answer to `query` (in `thread`, a conversation's follow-up: then `query` is the thread's question
    rewritten to stand alone), from the answer cache when it holds one the asker may still be given (never
    when `fresh`), else from retrieval and `answer_events` (which stores it, over what the cache held).
    Either way the answer is the thread's newest turn.

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
        fresh=fresh,
        include_graph=include_graph,
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
        include_graph=include_graph,
    )
    return answer_events(user=user, retrieval=retrieval, cache_slot=slot, thread=thread)


def cached_answer_events(*, user: User, query: str, hit: CachedAnswer, started: float, thread: Thread) -> AnswerStream:
    """A cached answer as the same events as a fresh one, logged as an answer of its own (its own id for
    feedback) and saved as the thread's newest turn."""
    latency = {**thread.latency, "cacheMs": ms_since(started)}
    log = _query_log(
        user=user,
        thread=thread,
        query=query,
        passages=hit.passages,
        sources={uuid.UUID(document) for document, _, _ in hit.sources},
        answer=hit.answer,
        mode=hit.mode,
        confidence=hit.confidence,
        citations=hit.citations,
    )
    stream = _CitedStream({c["n"]: c for c in hit.citations})
    logged = False
    try:
        yield from stream.events(_pieces(hit.answer))
        latency["totalMs"] = ms_since(started)
        log.latency, log.total_ms = latency, latency["totalMs"]
        with transaction.atomic():
            # As the search log does: the row may be lost in a crash, so its commit need not wait for the
            # WAL to reach the disk, which would be a good part of a cached answer's time.
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL synchronous_commit = off")
            conversation_id = _turn_save(log, thread)
        logged = True
        record = AnswerRecord(
            id=str(log.pk),
            conversation_id=conversation_id,
            standalone_query=query,
            answer=hit.answer,
            citations=hit.citations,
            confidence=hit.confidence,
            confidence_factors=hit.confidence_factors,
            mode=hit.mode,
            cached=True,
            passages=hit.passages,
            latency=latency,
            html=hit.html,
            rankings=hit.rankings,
        )
        yield MetadataEvent(record)
        yield DoneEvent(record)
    except GeneratorExit:
        if not logged:
            # Unlike a fresh answer's, a cached answer's log already holds the whole answer.
            _log_left(log, answer=hit.answer, started=started, latency=latency)
        raise


@dataclass
class _Plan:
    """How the answer will be made: its mode, the text's pieces as they come, and the LLM writing them (if any).

    `quotes` are the spans of the sentences an extractive answer quotes, by passage number: its citations point at them.
    """

    mode: str
    pieces: Iterator[str]
    client: LLMClient | None = None
    quotes: dict[int, tuple[int, int]] = field(default_factory=dict)
    extracted: Extract | None = None
    fast_path: bool = False
    # The LLM's tokens as they are reported (generated answers only).
    usage: TokenUsage | None = None


def _citations(passages: Mapping[int, Passage], quotes: Mapping[int, tuple[int, int]]) -> dict[int, dict[str, Any]]:
    return {n: p.citation(quotes.get(n)) for n, p in passages.items()}


def _answer_plan(retrieval: Retrieval, thread: Thread) -> _Plan:
    """Insufficient evidence says so; without an LLM the passages' own sentences answer; else the LLM streams one,
    unless the extractive answer is already as confident as RAG_EXTRACTIVE_FAST_PATH_CONFIDENCE asks (the fast path)."""
    if retrieval.confidence == Confidence.INSUFFICIENT:
        return _Plan(MODE_INSUFFICIENT, _pieces(INSUFFICIENT_ANSWER))
    client = get_llm()
    fast_path = settings.RAG_EXTRACTIVE_FAST_PATH_CONFIDENCE
    if client is None or fast_path != "off":
        extracted = extract(retrieval.query, retrieval.passages, facts=retrieval.facts)
        # No sentence of the passages answers the question: that is an insufficient answer, not an extractive one.
        mode = MODE_INSUFFICIENT if extracted.text == INSUFFICIENT_ANSWER else MODE_EXTRACTIVE
        plan = _Plan(mode, _pieces(extracted.text), quotes=extracted.quotes, extracted=extracted)
        if client is None:
            return plan
        if mode == MODE_EXTRACTIVE:
            passages = {p.n: p for p in retrieval.passages}
            _, cited = clean_citations(extracted.text, set(passages))
            level = answer_confidence(passages, mode=mode, cited=cited, support=extracted.support()).level
            if _LEVEL_ORDER.index(level) >= _LEVEL_ORDER.index(fast_path):
                plan.fast_path = True
                return plan
    messages = build_prompt(retrieval.query, retrieval.passages, facts=retrieval.facts, earlier=thread.earlier)
    usage = TokenUsage()
    pieces = _metered(
        stream_with_retries(
            lambda: client.stream(messages, max_tokens=settings.RAG_LLM_MAX_TOKENS),
            max_retries=settings.RAG_LLM_MAX_RETRIES,
            what=f"Answer with {client.model}",
            metric=(KIND_LLM, client.model),
        ),
        client.model,
    )
    return _Plan(MODE_GENERATED, counting_tokens(pieces, usage), client, usage=usage)


_LEVEL_ORDER = (Confidence.INSUFFICIENT, Confidence.LOW, Confidence.MEDIUM, Confidence.HIGH)


def answer_events(
    *, user: User, retrieval: Retrieval, cache_slot: CacheSlot | None = None, thread: Thread | None = None
) -> AnswerStream:
    """The answer as events: `token`, `citation`, then `metadata` and `done`; the query is logged as
    the newest turn of the thread's conversation (a new one without a thread).

    `retrieval` searched for the thread's standalone question. An LLM failure falls back to the
    extractive answer. If it fails after text was sent, `done` carries the extractive answer that
    supersedes what was streamed. An answer that completed as designed (no provider failure, read to
    the end) is stored in `cache_slot`.
    """
    thread = thread or Thread(question=retrieval.query, standalone=retrieval.query)
    passages = {p.n: p for p in retrieval.passages}
    log = _query_log(
        user=user,
        thread=thread,
        query=retrieval.query,
        passages=len(passages),
        sources={p.document_id for p in retrieval.passages},
    )
    plan = _answer_plan(retrieval, thread)
    mode = plan.mode
    latency = {**thread.latency, **retrieval.latency}
    generation_started = time.perf_counter()
    quotes, extracted = plan.quotes, plan.extracted
    stream = _CitedStream(_citations(passages, quotes), first_text_latency=latency, started=retrieval.started)
    logged = False
    try:
        try:
            yield from stream.events(plan.pieces)
            if mode == MODE_GENERATED and not stream.text.strip():
                assert plan.client is not None, "an answer is generated only with an LLM client"
                raise PermanentProviderError(f"{plan.client.model} returned an empty answer")
            answer = stream.text
        except ProviderError as exc:
            logger.warning(
                "Answer generation with %s failed, answering extractively: %s", plan.client.model if plan.client else "-", exc
            )
            log.error = str(exc)[:2000]
            extracted = extract(retrieval.query, retrieval.passages, facts=retrieval.facts)
            answer, quotes = extracted.text, extracted.quotes
            mode = MODE_INSUFFICIENT if answer == INSUFFICIENT_ANSWER else MODE_EXTRACTIVE
            if not stream.sent:
                stream.citations = _citations(passages, quotes)
                yield from stream.events(_pieces(answer))
        finally:
            close = getattr(plan.pieces, "close", None)
            if close:
                close()
        latency["generationMs"] = ms_since(generation_started)
        record = _answer_record(
            log,
            answer=answer,
            mode=mode,
            passages=passages,
            quotes=quotes,
            retrieval=retrieval,
            thread=thread,
            latency=latency,
            extracted=extracted if mode == MODE_EXTRACTIVE else None,
            fast_path=plan.fast_path,
            tokens=_tokens(plan.usage) if mode == MODE_GENERATED else None,
        )
        logged = True
        if cache_slot is not None and not log.error:
            _cache(cache_slot, record, retrieval)
        yield MetadataEvent(record)
        yield DoneEvent(record)
    except GeneratorExit:
        if not logged:
            log.mode = mode
            _log_left(log, answer=stream.text, started=retrieval.started)
        raise


def _answer_record(
    log: QueryLog,
    *,
    answer: str,
    mode: str,
    passages: dict[int, Passage],
    quotes: Mapping[int, tuple[int, int]],
    retrieval: Retrieval,
    thread: Thread,
    latency: dict[str, float],
    extracted: Extract | None = None,
    fast_path: bool = False,
    tokens: dict[str, int] | None = None,
) -> AnswerRecord:
    """The answer with only the citations it makes, its confidence and html, saved as the thread's newest turn."""
    answer, cited = clean_citations(answer, set(passages))
    citations = [passages[n].citation(quotes.get(n)) for n in sorted(cited)]
    assessment = answer_confidence(passages, mode=mode, cited=cited, support=extracted.support() if extracted else None)
    latency["totalMs"] = ms_since(retrieval.started)
    log.answer, log.mode, log.confidence, log.citations = answer, mode, str(assessment.level), citations
    log.latency, log.total_ms = latency, latency["totalMs"]
    conversation_id = _turn_save(log, thread)
    return AnswerRecord(
        id=str(log.pk),
        conversation_id=conversation_id,
        standalone_query=retrieval.query,
        answer=answer,
        citations=citations,
        confidence=str(assessment.level),
        confidence_factors=assessment.factors,
        mode=mode,
        cached=False,
        passages=len(passages),
        latency=latency,
        html=answer_html(answer, {c["n"]: c for c in citations}),
        fast_path=fast_path,
        rankings=_rankings(passages.values()),
        tokens=tokens,
    )


def _rankings(passages: Iterable[Passage]) -> dict[str, int]:
    """How many of `passages` each ranking found (hybrid's: vector, keyword, graph)."""
    found = [name for p in passages for name in p.found_by]
    return {name: found.count(name) for name in RANKINGS if name != "hybrid"}


def _tokens(usage: TokenUsage | None) -> dict[str, int] | None:
    if usage is None or not (usage.prompt or usage.completion):
        return None
    return {"prompt": usage.prompt, "completion": usage.completion}


def _cache(slot: CacheSlot, record: AnswerRecord, retrieval: Retrieval) -> None:
    answer_cache_store(
        slot,
        CachedAnswer(
            answer=record.answer,
            citations=record.citations,
            confidence=record.confidence,
            confidence_factors=record.confidence_factors,
            mode=record.mode,
            passages=record.passages,
            html=record.html,
            sources=[(str(p.document_id), p.version, p.title) for p in retrieval.passages],
            rankings=record.rankings,
        ),
    )


def answer_complete(events: Iterable[AnswerEvent]) -> AnswerRecord:
    """The whole answer at once (the non-streamed response), from its events."""
    for event in events:
        if isinstance(event, DoneEvent):
            return event.record
    raise AssertionError("answer_events ended without a done event")
