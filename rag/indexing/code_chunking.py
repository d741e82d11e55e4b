"""Code documents chunked by symbol: the file's imports and header, then each top-level definition.

A code document (documents.code) is one fenced block. Tree-sitter parses the code inside; each chunk
is whole lines of it, so a citation names the symbol's own lines (`app.py:12-30`):
- the header (package line, imports, the module's docstring and comments above the first definition);
- each top-level function, class, interface or type, with the comments and decorators above it;
- a class too long for one chunk: its opening lines, then its methods, packed in groups up to the target;
- the statements between definitions, packed together.
Anything still over the limit is cut at line ends. Languages without a grammar here, and code that does
not parse, are chunked as Markdown (rag.indexing.chunking), as any other text.

As in chunk_markdown, every chunk is a contiguous span of the document (`text == document[start:end]`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cache

import tree_sitter

from documents.code import code_body
from rag.indexing.chunking import TextChunk, TokenCounter, chunk_markdown


@cache
def _language(name: str) -> tree_sitter.Language | None:
    """The grammar for a fence's language name; each grammar package is imported when first needed."""
    if name == "python":
        import tree_sitter_python

        return tree_sitter.Language(tree_sitter_python.language())
    if name in ("javascript", "jsx"):
        import tree_sitter_javascript

        return tree_sitter.Language(tree_sitter_javascript.language())
    if name == "typescript":
        import tree_sitter_typescript

        return tree_sitter.Language(tree_sitter_typescript.language_typescript())
    if name == "tsx":
        import tree_sitter_typescript

        return tree_sitter.Language(tree_sitter_typescript.language_tsx())
    if name == "go":
        import tree_sitter_go

        return tree_sitter.Language(tree_sitter_go.language())
    if name == "java":
        import tree_sitter_java

        return tree_sitter.Language(tree_sitter_java.language())
    return None


SYMBOL_LANGUAGES = ("python", "javascript", "jsx", "typescript", "tsx", "go", "java")

# Node types, by what they are to a reader. Shared names across grammars are listed once.
_HEADER = {
    "import_statement",
    "import_from_statement",
    "future_import_statement",
    "import_declaration",
    "package_clause",
    "package_declaration",
}
_DEFINITIONS = {
    "function_definition",
    "class_definition",
    "decorated_definition",
    "function_declaration",
    "generator_function_declaration",
    "class_declaration",
    "abstract_class_declaration",
    "interface_declaration",
    "type_alias_declaration",
    "enum_declaration",
    "module",
    "internal_module",
    "method_declaration",
    "type_declaration",
    "record_declaration",
    "annotation_type_declaration",
}
_COMMENTS = {"comment", "line_comment", "block_comment", "decorator", "marker_annotation", "annotation"}
_CLASS_BODIES = {"block", "class_body", "interface_body", "enum_body", "declaration_list"}
_MEMBERS = {
    "function_definition",
    "decorated_definition",
    "method_definition",
    "method_declaration",
    "constructor_declaration",
    "method_signature",
    "abstract_method_signature",
}
# JavaScript's `const handler = () => {...}`: a definition when its value is a function or a class.
_FUNCTION_VALUES = {"arrow_function", "function_expression", "function", "class", "generator_function"}


@dataclass
class _Unit:
    """A run of whole lines (0-based, inclusive) of the code, and the symbols it defines."""

    first: int
    last: int
    symbols: list[str] = field(default_factory=list)
    kind: str = "code"  # header, symbol, code
    node: tree_sitter.Node | None = None
    parent: str = ""  # the class a group of methods belongs to


def chunk_code_document(
    text: str,
    *,
    counter: TokenCounter,
    chunk_size: int = 500,
    overlap: int = 50,
    max_tokens: int = 256,
    min_tokens: int = 32,
) -> list[TextChunk]:
    """Chunks of a document: by symbol when it is code in a language parsed here, else as Markdown."""
    chunks = _symbol_chunks(text, counter=counter, target=min(chunk_size, max_tokens), max_tokens=max_tokens)
    if chunks is not None:
        return chunks
    return chunk_markdown(
        text, counter=counter, chunk_size=chunk_size, overlap=overlap, max_tokens=max_tokens, min_tokens=min_tokens
    )


def _symbol_chunks(text: str, *, counter: TokenCounter, target: int, max_tokens: int) -> list[TextChunk] | None:
    body = code_body(text)
    if body is None or body.language not in SYMBOL_LANGUAGES:
        return None
    language = _language(body.language)
    if language is None:
        return None
    code = text[body.start : body.end]
    if not code.strip():
        return None
    tree = tree_sitter.Parser(language).parse(code.encode("utf-8"))
    if tree.root_node.has_error:
        return None  # a file that does not parse is cut as text: its "symbols" would be guesses
    lines = code.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)

    units = _top_level_units(tree.root_node, body.language)
    counts = counter.count([_unit_text(code, starts, lines, u) for u in units])
    planned: list[_Unit] = []
    for unit, tokens in zip(units, counts, strict=True):
        if tokens > target and unit.node is not None:
            planned.extend(_split_class(unit, code, starts, lines, counter, target, body.language))
        else:
            planned.append(unit)

    chunks: list[TextChunk] = []
    try:
        pieces = [(unit, piece) for unit in planned for piece in _line_pieces(unit, code, starts, lines, counter, max_tokens)]
    except _LineTooLong:
        return None  # minified code: Markdown chunking cuts inside lines
    for unit, (first, last) in pieces:
        start = body.start + starts[first]
        end = body.start + starts[last] + len(lines[last])
        chunk_text = text[start:end]
        if not chunk_text.strip():
            continue
        chunks.append(
            TextChunk(
                index=len(chunks),
                text=chunk_text,
                start=start,
                end=end,
                heading_path=[unit.parent] if unit.parent else [],
                has_code=True,
                has_table=False,
                token_count=0,
                symbols=tuple(unit.symbols),
                lines=(first + 1, last + 1),
                language=body.language,
            )
        )
    if not chunks:
        return None
    counts = counter.count([c.text for c in chunks])
    return [replace(c, token_count=n) for c, n in zip(chunks, counts, strict=True)]


def _top_level_units(root: tree_sitter.Node, language: str) -> list[_Unit]:
    """Header, definitions and the code between them, each with the comments right above it."""
    units: list[_Unit] = []
    pending: int | None = None  # first line of comments/decorators waiting for the definition below them
    for node in root.named_children:
        first, last = node.start_point.row, _last_row(node)
        if node.type in _COMMENTS:
            if pending is None:
                pending = first
            continue
        start = pending if pending is not None else first
        pending = None
        names = _defined_names(node, language)
        if node.type in _HEADER or (not units and _is_docstring(node)):
            kind = "header"
        elif names:
            kind = "symbol"
        else:
            kind = "code"
        previous = units[-1] if units else None
        if previous is not None and kind != "symbol" and previous.kind == kind:
            previous.last = last  # imports with imports, loose statements with loose statements
            continue
        units.append(_Unit(first=start, last=last, symbols=names, kind=kind, node=node if kind == "symbol" else None))
    if pending is not None:
        last_row = _last_row(root)
        if units and units[-1].kind != "symbol":
            units[-1].last = last_row
        else:
            units.append(_Unit(first=pending, last=last_row, kind="code"))
    # A header's comments above the first import (a licence, a module comment) belong to the header.
    if units and units[0].kind == "header":
        units[0].first = 0
    return units


def _last_row(node: tree_sitter.Node) -> int:
    # A node ending at column 0 ends with the newline of the line before (Python blocks do).
    row = node.end_point.row
    return row - 1 if node.end_point.column == 0 and row > node.start_point.row else row


def _is_docstring(node: tree_sitter.Node) -> bool:
    return node.type == "expression_statement" and node.named_child_count == 1 and node.named_children[0].type == "string"


def _name(node: tree_sitter.Node | None) -> str:
    if node is None:
        return ""
    field_name = node.child_by_field_name("name")
    if field_name is not None and field_name.text is not None:
        return field_name.text.decode("utf-8", errors="replace")
    return ""


def _defined_names(node: tree_sitter.Node, language: str) -> list[str]:
    """The symbols a top-level node defines: `main`, `Invoice`, `Invoice.total` (a Go method), `handler`."""
    if node.type == "decorated_definition":
        return (
            _defined_names(node.child_by_field_name("definition") or node, language)
            if node.child_by_field_name("definition")
            else []
        )
    if node.type == "export_statement":
        declaration = node.child_by_field_name("declaration")
        if declaration is not None:
            return _defined_names(declaration, language)
        value = node.child_by_field_name("value")
        return ["default"] if value is not None and value.type in _FUNCTION_VALUES else []
    if node.type == "method_declaration" and language == "go":
        receiver = node.child_by_field_name("receiver")
        owner = ""
        if receiver is not None and receiver.text is not None:
            owner = receiver.text.decode(errors="replace").strip("()").split()[-1].lstrip("*")
            owner = owner.split("[")[0]
        name = _name(node)
        return [f"{owner}.{name}" if owner else name] if name else []
    if node.type == "type_declaration":
        return [_name(spec) for spec in node.named_children if spec.type in ("type_spec", "type_alias") and _name(spec)]
    if node.type in ("lexical_declaration", "variable_declaration"):
        names = []
        for declarator in node.named_children:
            value = declarator.child_by_field_name("value")
            if declarator.type == "variable_declarator" and value is not None and value.type in _FUNCTION_VALUES:
                names.append(_name(declarator))
        return [n for n in names if n]
    if node.type in _DEFINITIONS:
        name = _name(node)
        return [name] if name else []
    return []


def _split_class(
    unit: _Unit, code: str, starts: list[int], lines: list[str], counter: TokenCounter, target: int, language: str
) -> list[_Unit]:
    """A definition over the target: its opening lines, then its members packed in groups up to the target."""
    node = unit.node
    assert node is not None
    if node.type == "decorated_definition":
        node = node.child_by_field_name("definition") or node
    if node.type == "export_statement":
        node = node.child_by_field_name("declaration") or node
    body = node.child_by_field_name("body")
    if body is None or body.type not in _CLASS_BODIES:
        return [unit]
    members: list[tuple[int, int, str]] = []  # first line (with comments above), last line, name
    pending: int | None = None
    for child in body.named_children:
        if child.type in _COMMENTS:
            pending = child.start_point.row if pending is None else pending
            continue
        if child.type in _MEMBERS:
            target_node = child.child_by_field_name("definition") if child.type == "decorated_definition" else child
            name = _name(target_node)
            first = pending if pending is not None else child.start_point.row
            members.append((first, _last_row(child), name))
        pending = None
    if not members:
        return [unit]
    owner = unit.symbols[0] if unit.symbols else ""
    groups: list[_Unit] = [_Unit(first=unit.first, last=members[0][0] - 1, symbols=list(unit.symbols), kind="symbol")]
    counts = counter.count([code[starts[a] : starts[min(b + 1, len(lines))]] for a, b, _ in members])
    current: _Unit | None = None
    tokens = 0
    for (first, last, name), count in zip(members, counts, strict=True):
        qualified = f"{owner}.{name}" if owner and name else name
        if current is not None and tokens + count <= target and first <= current.last + 2:
            current.last = last
            current.symbols.append(qualified)
            tokens += count
            continue
        current = _Unit(first=first, last=last, symbols=[qualified] if qualified else [], kind="symbol", parent=owner)
        groups.append(current)
        tokens = count
    # Lines between members not claimed (fields, blank lines) go with the member above; the class's closing
    # lines with the last group.
    for before, after in zip(groups, groups[1:], strict=False):
        before.last = max(before.last, after.first - 1)
    groups[-1].last = max(groups[-1].last, unit.last)
    return [g for g in groups if g.last >= g.first]


class _LineTooLong(Exception):
    """One line alone is over the limit."""


def _unit_text(code: str, starts: list[int], lines: list[str], unit: _Unit) -> str:
    return code[starts[unit.first] : starts[min(unit.last + 1, len(lines))]]


def _line_pieces(
    unit: _Unit, code: str, starts: list[int], lines: list[str], counter: TokenCounter, max_tokens: int
) -> list[tuple[int, int]]:
    """The unit's lines, cut at line ends into pieces of at most `max_tokens` (one piece when it fits)."""
    first, last = unit.first, min(unit.last, len(lines) - 1)
    while first <= last and not lines[first].strip():
        first += 1
    while last >= first and not lines[last].strip():
        last -= 1
    if first > last:
        return []
    if counter.count([_unit_text(code, starts, lines, _Unit(first, last))])[0] <= max_tokens:
        return [(first, last)]
    counts = counter.count(lines[first : last + 1])
    if max(counts) > max_tokens:
        raise _LineTooLong
    pieces: list[tuple[int, int]] = []
    piece_first, tokens = first, 0
    for row, count in zip(range(first, last + 1), counts, strict=True):
        if tokens + count > max_tokens and row > piece_first:
            pieces.append((piece_first, row - 1))
            piece_first, tokens = row, 0
        tokens += count
    pieces.append((piece_first, last))
    return pieces
