"""Fuzzing below the OpenAPI schema, for bench/fuzz.py: JSON-RPC bodies to /mcp, and malformed HTTP over raw sockets.

Both generate their cases with hypothesis (derandomized, so a run is repeatable) against a running
server and check every response: never a 5xx; every error under /api/ or /mcp, and every error gunicorn
answers itself, is JSON with an `X-Request-ID` (`{"error", "message"}`, or at /mcp the protocol's
JSON-RPC error object); and no tool call hides a server error in a 200.
"""

from __future__ import annotations

import json
import socket
from collections import Counter
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

MCP_ACCEPT = "application/json, text/event-stream"
API_PATHS = ["/api/documents.list", "/api/documents.create", "/api/rag.search", "/api/collections.list", "/api/nothing.here"]
JSON_RPC_INTERNAL_ERROR = -32603


@dataclass
class Tally:
    """What one phase sent and saw."""

    cases: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    # Connections closed (or reset) with no response: the request was still incomplete when the client
    # ended its side (headers with bare CR line ends never end), so there was nothing to answer yet.
    unanswered: int = 0
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def fail(self, case: object, problem: str) -> None:
        self.failures.append(f"{problem}: {repr(case)[:300]}")

    def summary(self) -> dict[str, Any]:
        return {
            "cases": self.cases,
            "statuses": dict(sorted(self.statuses.items())),
            "unanswered": self.unanswered,
            "failures": len(self.failures),
            "seconds": round(self.seconds, 1),
        }


def _run(strategy: st.SearchStrategy[Any], check: Any, cases: int) -> None:
    """Generate `cases` values of `strategy` and `check` each; failures are tallied, not raised (no shrinking)."""

    @settings(
        max_examples=cases,
        database=None,
        derandomize=True,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def run(value: Any) -> None:
        check(value)

    run()


def _problem_with_error(status: int, headers: dict[str, str], body: bytes, *, json_rpc: bool) -> str | None:
    """Why an error response is not in the one JSON shape, or None."""
    if not headers.get("content-type", "").startswith("application/json"):
        return f"{status} answered with {headers.get('content-type')!r}, not JSON"
    if not headers.get("x-request-id"):
        return f"{status} without an X-Request-ID"
    try:
        parsed = json.loads(body)
    except ValueError:
        return f"{status} whose body does not parse as JSON"
    if isinstance(parsed, dict) and set(parsed) == {"error", "message"} and isinstance(parsed["error"], str):
        return None
    if json_rpc and isinstance(parsed, dict) and parsed.get("jsonrpc") == "2.0" and isinstance(parsed.get("error"), dict):
        return None
    return f"{status} whose body is not the error shape: {body[:200]!r}"


# /mcp: JSON-RPC messages, well formed or not

_leaf = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=40)
_json = st.recursive(_leaf, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4))
_deep = st.integers(min_value=1, max_value=200_000).map(lambda depth: "[" * depth + "]" * depth)


def _mcp_bodies(tools: dict[str, list[str]]) -> st.SearchStrategy[bytes]:
    argument_names = sorted({name for names in tools.values() for name in names})
    arguments = st.dictionaries(st.sampled_from(argument_names) | st.text(max_size=8), _json, max_size=4)
    tool_call = st.fixed_dictionaries(
        {
            "jsonrpc": st.just("2.0"),
            "id": st.integers(0, 1000),
            "method": st.just("tools/call"),
            "params": st.fixed_dictionaries(
                {"name": st.sampled_from(sorted(tools)) | st.text(max_size=10), "arguments": arguments | _json}
            ),
        }
    )
    methods = st.sampled_from(
        [
            "initialize",
            "tools/list",
            "tools/call",
            "ping",
            "resources/list",
            "prompts/list",
            "notifications/initialized",
            "logging/setLevel",
        ]
    )
    message = st.fixed_dictionaries(
        {"method": methods | st.text(max_size=20)},
        optional={
            "jsonrpc": st.sampled_from(["2.0", "1.0", 2]) | st.none(),
            "id": st.integers() | st.text(max_size=10) | st.none() | st.floats(allow_nan=False),
            "params": _json,
        },
    )
    return st.one_of(
        tool_call.map(_json_bytes),
        tool_call.map(_json_bytes),  # twice: a quarter of the cases are tool calls
        message.map(_json_bytes),
        st.lists(tool_call | message, max_size=3).map(_json_bytes),  # a batch
        _deep.map(str.encode),
        st.tuples(st.sampled_from(sorted(tools)), _deep).map(_deep_tool_call),
        _json.map(_json_bytes),
        st.binary(max_size=200),
    )


def _json_bytes(value: Any) -> bytes:
    return json.dumps(value).encode()


def _deep_tool_call(pair: tuple[str, str]) -> bytes:
    """A tools/call of the named tool whose `query` argument is the nested arrays given."""
    name, nested = pair
    head = '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": ' + json.dumps(name)
    return (head + ', "arguments": {"query": ' + nested + "}}}").encode()


def fuzz_mcp(url: str, token: str, cases: int) -> Tally:
    """POST `cases` generated bodies to /mcp as `token`'s user."""
    tally = Tally()
    listed = httpx.post(
        f"{url}/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={"Authorization": f"Bearer {token}", "Accept": MCP_ACCEPT},
        timeout=30,
    ).json()
    tools = {tool["name"]: sorted(tool["inputSchema"].get("properties", {})) for tool in listed["result"]["tools"]}
    case_strategy = st.tuples(
        _mcp_bodies(tools),
        st.sampled_from([MCP_ACCEPT, "application/json", "text/event-stream", "*/*", None]),
        st.sampled_from(["application/json", "application/json; charset=utf-8", "text/plain", None]),
    )
    with httpx.Client(timeout=60) as client:

        def check(case: tuple[bytes, str | None, str | None]) -> None:
            body, accept, content_type = case
            headers = {"Authorization": f"Bearer {token}"}
            if accept:
                headers["Accept"] = accept
            if content_type:
                headers["Content-Type"] = content_type
            response = client.post(f"{url}/mcp", content=body, headers=headers)
            tally.cases += 1
            tally.statuses[response.status_code] += 1
            lowered = {name.lower(): value for name, value in response.headers.items()}
            if response.status_code >= 500:
                tally.fail(case, f"{response.status_code} {response.text[:200]}")
            elif response.status_code >= 400:
                if problem := _problem_with_error(response.status_code, lowered, response.content, json_rpc=True):
                    tally.fail(case, problem)
            elif response.status_code == 200:
                if problem := _hidden_server_error(response.content):
                    tally.fail(case, problem)

        _run(case_strategy, check, cases)
    return tally


def _hidden_server_error(body: bytes) -> str | None:
    """A 200 whose JSON-RPC answer is an internal error, or a tool's `server_error`."""
    try:
        answers = json.loads(body)
    except ValueError:
        return f"200 whose body does not parse as JSON: {body[:200]!r}"
    for answer in answers if isinstance(answers, list) else [answers]:
        if not isinstance(answer, dict):
            continue
        if isinstance(answer.get("error"), dict) and answer["error"].get("code") == JSON_RPC_INTERNAL_ERROR:
            return f"an internal JSON-RPC error: {answer['error']}"
        result = answer.get("result")
        if isinstance(result, dict) and (result.get("structuredContent") or {}).get("error") == "server_error":
            return f"a tool's server_error: {result['structuredContent']}"
    return None


# Raw sockets: what gunicorn parses before Django sees it

CONTROL = "".join(chr(c) for c in [*range(9), *range(10, 32), 127])


@st.composite
def _wire_request(draw: st.DrawFn, token: str) -> tuple[str, bytes]:
    """A request that is malformed in one or more ways; with the path it aims at."""
    fault = draw(
        st.sampled_from(["request_line", "header_size", "many_headers", "control", "framing", "chunked", "folding", "fine"])
    )
    path = draw(st.sampled_from([*API_PATHS, "/mcp"]))
    method, version = "POST", "HTTP/1.1"
    headers = [("Host", "127.0.0.1"), ("Content-Type", "application/json")]
    if draw(st.booleans()):
        headers.append(("Authorization", f"Bearer {token}"))
    body = b"{}"
    if fault == "request_line":
        method = draw(st.sampled_from(["POST", "GET", "P\x01ST", "", "POST POST", "get", "PO ST"]) | st.text(max_size=10))
        path = draw(
            st.sampled_from([path, path + "\x00", path + " x", "*", "", "/" + "a" * 5000])
            | st.text(max_size=30).map(lambda t: path + t)
        )
        version = draw(
            st.sampled_from(["HTTP/1.1", "HTTP/1.0", "HTTP/2.0", "HTTP/9.9", "HTTX/1.1", "", "http/1.1", "HTTP/1.1 x"])
        )
    elif fault == "header_size":
        headers.append(("X-Big", "a" * draw(st.integers(8_000, 40_000))))
    elif fault == "many_headers":
        headers += [(f"X-H{n}", "1") for n in range(draw(st.integers(90, 200)))]
    elif fault == "control":
        char = draw(st.sampled_from(list(CONTROL)))
        where = draw(st.sampled_from(["value", "name", "path"]))
        if where == "value":
            headers.append(("X-Control", f"a{char}b"))
        elif where == "name":
            headers.append((f"X-{char}Name", "1"))
        else:
            path = path[:5] + char + path[5:]
    elif fault == "folding":
        headers.append(("X-Folded", "a\r\n continued"))
    elif fault == "framing":
        headers += draw(
            st.lists(
                st.sampled_from(
                    [
                        ("Content-Length", "2"),
                        ("Content-Length", "-1"),
                        ("Content-Length", "abc"),
                        ("Content-Length", "1, 2"),
                        ("Content-Length", "99999999999999999999"),
                        ("Content-Length", "100"),
                        ("Transfer-Encoding", "chunked"),
                        ("Transfer-Encoding", "gzip"),
                        ("Transfer-Encoding", "brotli"),
                        ("Transfer-Encoding", "chunked, chunked"),
                        ("Transfer-Encoding", "gzip, chunked"),
                        ("Transfer-Encoding", "identity"),
                        ("Expect", "100-continue"),
                        ("Expect", "200-ok"),
                    ]
                ),
                min_size=1,
                max_size=3,
            )
        )
        body = draw(st.sampled_from([b"{}", b"", b'{"limit": 1}', b"[" * 3000]))
    elif fault == "chunked":
        headers.append(("Transfer-Encoding", "chunked"))
        body = draw(
            st.sampled_from(
                [
                    b"2\r\n{}\r\n0\r\n\r\n",
                    b"zz\r\n{}\r\n0\r\n\r\n",
                    b"-2\r\n{}\r\n0\r\n\r\n",
                    b"fffffffffffffffffff\r\n{}\r\n0\r\n\r\n",
                    b"2;\x01\r\n{}\r\n0\r\n\r\n",
                    b"2\r\n{}0\r\n\r\n",
                    b"2\r\n{}\r\n",
                    b"2\n{}\n0\n\n",
                    b"5\r\n{}\r\n0\r\n\r\n",
                ]
            )
            | st.binary(max_size=60)
        )
    if not any(name.lower() in ("content-length", "transfer-encoding") for name, _ in headers):
        headers.append(("Content-Length", str(len(body))))
    line_end = draw(st.sampled_from(["\r\n"] * 8 + ["\n", "\r"]))
    head = f"{method} {path} {version}{line_end}" + "".join(f"{name}: {value}{line_end}" for name, value in headers) + line_end
    return path, head.encode("latin-1", errors="replace") + body


@dataclass
class WireResponse:
    status: int
    headers: dict[str, str]
    body: bytes


def parse_responses(received: bytes) -> list[WireResponse]:
    """The responses in what a connection received, in order."""
    responses = []
    while received:
        head, separator, rest = received.partition(b"\r\n\r\n")
        if not separator:
            break
        status_line, *lines = head.decode("latin-1").split("\r\n")
        parts = status_line.split()
        if len(parts) < 2 or not parts[1].isdigit():
            break
        status = int(parts[1])
        headers = {name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}
        if status < 200 or status in (204, 304):
            body, received = b"", rest
        elif "content-length" in headers:
            length = int(headers["content-length"])
            body, received = rest[:length], rest[length:]
        elif headers.get("transfer-encoding") == "chunked":
            body, received = _dechunk(rest)
        else:
            body, received = rest, b""
        responses.append(WireResponse(status, headers, body))
    return responses


def _dechunk(data: bytes) -> tuple[bytes, bytes]:
    """A chunked body's content, and what follows it."""
    body = b""
    while True:
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0] or b"0", 16)
        if size == 0:
            return body, data.partition(b"\r\n")[2]
        body, data = body + data[:size], data[size + 2 :]


def exchange(url: str, request: bytes, timeout: float = 10) -> list[WireResponse] | None:
    """Send `request` over a new connection and read until the server closes it; None when it was reset."""
    address = urlsplit(url)
    received = b""
    try:
        with socket.create_connection((address.hostname, address.port), timeout=timeout) as sock:
            try:
                sock.sendall(request)
                sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass  # the server answered and closed before taking the whole request: read what it said
            while chunk := sock.recv(65536):
                received += chunk
    except (ConnectionResetError, TimeoutError):
        if not received:
            return None
    return parse_responses(received)


def fuzz_wire(url: str, token: str, cases: int) -> Tally:
    """Send `cases` generated malformed requests over raw sockets."""
    tally = Tally()

    def check(case: tuple[str, bytes]) -> None:
        path, request = case
        responses = exchange(url, request)
        tally.cases += 1
        if not responses:
            tally.unanswered += 1
            return
        api = path.startswith("/api/") or path == "/mcp"  # as config.middleware reads it
        for response in responses:
            tally.statuses[response.status] += 1
            if response.status >= 500:
                tally.fail(request[:300], f"{response.status} {response.body[:200]!r}")
            # Answered by gunicorn itself (no Server header), or under /api/ and /mcp: the JSON shape.
            elif response.status >= 400 and (api or "server" not in response.headers):
                if problem := _problem_with_error(response.status, response.headers, response.body, json_rpc=path == "/mcp"):
                    tally.fail(request[:300], problem)

    _run(_wire_request(token), check, cases)
    return tally
