"""Server-Sent Events: each event's data rendered by its output serializer; errors in the API's error shape."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator
from typing import Any, ClassVar, Protocol

from rest_framework import serializers
from rest_framework.renderers import BaseRenderer

from config.errors import ApplicationError, error_body

logger = logging.getLogger("rag.answers")

EVENT_STREAM = "text/event-stream"


class StreamEvent(Protocol):
    """An event of a stream (rag.answering.answer's answer events): its name, and its data before rendering."""

    name: ClassVar[str]

    def payload(self) -> dict[str, Any]: ...


def sse_event(event: str, data: dict) -> bytes:
    """One Server-Sent Event; JSON keeps the data on a single line."""
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False, separators=(',', ':'))}\n\n".encode()


def sse_stream(events: Iterable[StreamEvent], outputs: dict[str, type[serializers.Serializer]]) -> Iterator[bytes]:
    """Encode events, each rendered by `outputs[event.name]`; a failure once the stream has started becomes an `error` event.

    A reader who leaves (the WSGI server closes this stream when a write fails) closes `events` at once, so
    the answer stops being generated and is logged as left, not whenever the generator is collected.
    """
    try:
        for event in events:
            yield sse_event(event.name, outputs[event.name](event.payload()).data)
    except ApplicationError as exc:
        yield sse_event("error", exc.body())
    except Exception:
        logger.exception("rag.answer stream failed")
        yield sse_event("error", error_body("server_error", "The answer could not be completed."))
    finally:
        close = getattr(events, "close", None)
        if close is not None:
            close()


class EventStreamRenderer(BaseRenderer):
    """Lets clients that accept only `text/event-stream` get errors (and non-streamed answers) as events."""

    media_type = EVENT_STREAM
    format = "sse"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None) -> bytes:
        if isinstance(data, dict) and "error" in data:
            return sse_event("error", data)
        return sse_event("done", data.get("data", data) if isinstance(data, dict) else {"data": data})
