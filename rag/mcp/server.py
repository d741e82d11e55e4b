"""The Model Context Protocol server behind /mcp: the SDK's low-level `Server` with Cairn's tools,
served by the SDK's streamable HTTP session manager in stateless JSON mode.

gunicorn runs Django over WSGI and the SDK's transport is ASGI. In stateless JSON mode every
exchange is one POST answered by one JSON response (202 for a notification), with nothing kept
between requests — so between gunicorn's processes either — and the /mcp view can hand the body to
the transport and wait for the whole response (`McpRuntime.exchange`). Each process runs one event
loop thread with the session manager's task group started inside it once, and a pool of
`WEB_THREADS` threads for the tools: they use the ORM, which is synchronous and must not run on the
loop.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import anyio
from django.conf import settings
from django.db import close_old_connections, connections
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.types import ASGIApp, Message, Scope

from config.errors import ApplicationError, error_body
from config.middleware import current_request_id
from config.replicas import retry_on_primary
from config.threads import on_each_thread
from rag.mcp.tools import TOOLS, Caller, call

logger = logging.getLogger("rag.mcp")

# What the view puts in the ASGI scope for the tools: the caller (the token's user and scope), and
# the request's context (its request id) for the tool thread's log lines.
CALLER = "cairn.caller"
CONTEXT = "cairn.context"

INSTRUCTIONS = (
    "Cairn is a team knowledge base. Every tool sees only the documents the API token's user may read. "
    "search ranks passages for a query; answer writes a cited answer from them; read_document returns a document's "
    "text by id; list_collections lists the collections; find_entities and get_entity explore the knowledge graph "
    "of names, topics and links read from the documents. Errors come back as {error, message}: not_found means "
    "missing or not visible to you (the two look the same)."
)

server: Server = Server("cairn", instructions=INSTRUCTIONS)


@server.list_tools()
async def list_tools() -> list[types.Tool]:
    return [
        types.Tool(
            name=tool.name,
            title=tool.title,
            description=tool.description,
            inputSchema=tool.input_schema(),
            # Every tool reads (an answer is logged, and kept as a conversation only for a write-scoped token, as
            # rag.answer's are); a writing tool would need the write scope.
            annotations=types.ToolAnnotations(title=tool.title, readOnlyHint=True, openWorldHint=False),
        )
        for tool in TOOLS.values()
    ]


# Not validated against the input schema here: each tool validates with its endpoint's serializer, whose
# messages name the argument and the rule, as the API's do.
@server.call_tool(validate_input=False)
async def call_tool(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
    request = server.request_context.request
    assert request is not None, "the streamable HTTP transport passes each message's request"
    caller, context = request.scope[CALLER], request.scope[CONTEXT]
    return await asyncio.get_running_loop().run_in_executor(
        runtime().tools, context.copy().run, _call_tool, name, caller, arguments
    )


def _call_tool(name: str, caller: Caller, arguments: dict[str, Any]) -> types.CallToolResult:
    """On a tool thread: the tool's result, or its error; the connection handled as a request thread's."""
    started = time.perf_counter()
    # No request signals on this thread: honour CONN_MAX_AGE and drop broken connections, before and after.
    close_old_connections()
    try:
        body = retry_on_primary(lambda: call(name, caller=caller, arguments=arguments))
        result, outcome = _result(body), "ok"
    except ApplicationError as exc:
        result, outcome = _result(exc.body(), error=True), exc.code
    except Exception:
        logger.exception("mcp tool %s failed", name)
        message = f"An unexpected error occurred. Quote request id {current_request_id()} when reporting it."
        result, outcome = _result(error_body("server_error", message), error=True), "server_error"
    finally:
        close_old_connections()
    logger.info("mcp tool=%s user=%s outcome=%s ms=%.1f", name, caller.user.pk, outcome, (time.perf_counter() - started) * 1000)
    return result


def _result(body: dict[str, Any], *, error: bool = False) -> types.CallToolResult:
    """The body both as JSON text (what a model reads) and as structured content (what a program reads)."""
    text = json.dumps(body, ensure_ascii=False)
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], structuredContent=body, isError=error)


class Exchange:
    """One HTTP exchange with an ASGI app, held whole: the request's body in, the complete response out."""

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.status: int | None = None
        self.headers: list[tuple[str, str]] = []
        self.content = bytearray()
        self._received = False
        self._complete = asyncio.Event()

    async def run(self, app: ASGIApp, scope: Scope) -> None:
        await app(scope, self.receive, self.send)
        if self.status is None:
            raise RuntimeError("The MCP transport sent no response.")

    async def receive(self) -> Message:
        if not self._received:
            self._received = True
            return {"type": "http.request", "body": self.body, "more_body": False}
        await self._complete.wait()  # the client stays until its response is whole
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.headers = [(name.decode("latin-1"), value.decode("latin-1")) for name, value in message.get("headers", [])]
        elif message["type"] == "http.response.body":
            self.content += message.get("body", b"")
            if not message.get("more_body", False):
                self._complete.set()


class McpRuntime:
    """This process's event loop thread, running the session manager, and its tool threads."""

    def __init__(self) -> None:
        self.threads = settings.WEB_THREADS
        self.tools = ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="mcp-tool")
        # Host checks are Django's (ALLOWED_HOSTS, before the view); the SDK's DNS-rebinding guard is off.
        self.manager = StreamableHTTPSessionManager(app=server, json_response=True, stateless=True, security_settings=None)
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, name="mcp-loop", daemon=True).start()
        running: Future[None] = Future()
        asyncio.run_coroutine_threadsafe(self._serve(running), self.loop)
        running.result(timeout=30)

    async def _serve(self, running: Future[None]) -> None:
        async with self.manager.run():
            running.set_result(None)
            await anyio.sleep_forever()  # as long as the process

    def exchange(self, scope: Scope, body: bytes, *, timeout: float) -> Exchange:
        """Send one request through the transport and wait (at most `timeout` seconds) for its whole response."""
        exchange = Exchange(body)
        future = asyncio.run_coroutine_threadsafe(exchange.run(self.manager.handle_request, scope), self.loop)
        try:
            future.result(timeout)
        except TimeoutError:
            future.cancel()
            raise
        return exchange


_runtime: McpRuntime | None = None
_runtime_pid = 0
_runtime_lock = threading.Lock()


def close_tool_connections() -> None:
    """Close the tool threads' database connections (a test dropping its database needs this)."""
    if _runtime is None or _runtime_pid != os.getpid():
        return
    on_each_thread(_runtime.tools, _runtime.threads, lambda: connections.close_all(), timeout=10)


def runtime() -> McpRuntime:
    """This process's runtime, started by its first /mcp request (threads do not survive a fork)."""
    global _runtime, _runtime_pid
    with _runtime_lock:
        if _runtime is None or _runtime_pid != os.getpid():
            _runtime, _runtime_pid = McpRuntime(), os.getpid()
        return _runtime
