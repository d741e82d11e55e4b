"""Code documents are cut by symbol: the header, then each definition, with the file's own line ranges."""

from __future__ import annotations

from documents.code import code_body, fence_code
from rag.indexing.chunking import TextChunk, chunk_markdown
from rag.indexing.code_chunking import chunk_code_document


class WordCounter:
    """One token a word: enough to decide what fits."""

    def count(self, texts: list[str]) -> list[int]:
        return [len(text.split()) for text in texts]


def chunks_of(source: str, language: str, max_tokens: int = 256) -> list[TextChunk]:
    text = fence_code(source, language)
    chunks = chunk_code_document(text, counter=WordCounter(), max_tokens=max_tokens)
    for chunk in chunks:
        assert text[chunk.start : chunk.end] == chunk.text, "a chunk is a span of the document"
    return chunks


def outline(chunks: list[TextChunk]) -> list[tuple[tuple[int, int] | None, tuple[str, ...]]]:
    return [(c.lines, c.symbols) for c in chunks]


PYTHON = '''"""Invoices."""
import os
from dataclasses import dataclass

# The rate.
RATE = 0.2


@dataclass
class Invoice:
    amount: float

    def total(self) -> float:
        return self.amount * (1 + RATE)

    def tax(self) -> float:
        return self.amount * RATE


def main() -> None:
    print(Invoice(3).total())
'''


def test_python_is_cut_into_its_header_constants_and_definitions() -> None:
    assert outline(chunks_of(PYTHON, "python")) == [
        ((1, 3), ()),
        ((5, 6), ()),
        ((9, 17), ("Invoice",)),
        ((20, 21), ("main",)),
    ]


def test_a_class_too_long_for_one_chunk_is_cut_into_its_methods() -> None:
    chunks = chunks_of(PYTHON, "python", max_tokens=12)
    assert outline(chunks)[2:5] == [
        ((9, 11), ("Invoice",)),
        ((13, 14), ("Invoice.total",)),
        ((16, 17), ("Invoice.tax",)),
    ]
    assert chunks[3].heading_path == ["Invoice"]


def test_small_methods_are_packed_together_up_to_the_target() -> None:
    chunks = chunks_of(PYTHON, "python", max_tokens=20)
    assert ((13, 17), ("Invoice.total", "Invoice.tax")) in outline(chunks)


JAVASCRIPT = """import { readFile } from "node:fs";

export function load(path) {
  return readFile(path);
}

export const double = (n) => n * 2;

class Cache {
  get(key) { return this.map.get(key); }
}
"""


def test_javascript_functions_arrow_constants_and_classes_are_symbols() -> None:
    assert outline(chunks_of(JAVASCRIPT, "javascript")) == [
        ((1, 1), ()),
        ((3, 5), ("load",)),
        ((7, 7), ("double",)),
        ((9, 11), ("Cache",)),
    ]


TYPESCRIPT = """import { x } from "./x";

/** Anything with an area. */
export interface Shape {
  area(): number;
}

export type Id = string;

export default function run(): number {
  return x;
}
"""


def test_typescript_interfaces_and_types_carry_their_doc_comments() -> None:
    assert outline(chunks_of(TYPESCRIPT, "typescript")) == [
        ((1, 1), ()),
        ((3, 6), ("Shape",)),
        ((8, 8), ("Id",)),
        ((10, 12), ("run",)),
    ]


GO = """package billing

import "fmt"

// Invoice is a bill.
type Invoice struct {
	Amount float64
}

// Total adds the tax.
func (i *Invoice) Total() float64 {
	return i.Amount * 1.2
}

func Print() {
	fmt.Println("x")
}
"""


def test_go_methods_are_named_by_their_receiver() -> None:
    assert outline(chunks_of(GO, "go")) == [
        ((1, 3), ()),
        ((5, 8), ("Invoice",)),
        ((10, 13), ("Invoice.Total",)),
        ((15, 17), ("Print",)),
    ]


JAVA = """package com.example;

import java.util.List;

/** A greeter. */
public class Greeter {
    private final String name;

    public Greeter(String name) { this.name = name; }

    /** Says hello. */
    public String greet() {
        return "Hello " + name;
    }
}
"""


def test_a_long_java_class_is_cut_into_its_constructor_and_methods() -> None:
    assert outline(chunks_of(JAVA, "java", max_tokens=16)) == [
        ((1, 3), ()),
        ((5, 7), ("Greeter",)),
        ((9, 9), ("Greeter.Greeter",)),
        ((11, 15), ("Greeter.greet",)),
    ]


def test_a_definition_still_over_the_limit_is_cut_at_line_ends() -> None:
    chunks = chunks_of(JAVA, "java", max_tokens=12)
    assert outline(chunks)[-2:] == [((11, 12), ("Greeter.greet",)), ((13, 15), ("Greeter.greet",))]


def test_code_that_does_not_parse_is_cut_as_text() -> None:
    text = fence_code("def broken(:\n    return )\n", "python")
    chunks = chunk_code_document(text, counter=WordCounter())
    assert chunks == chunk_markdown(text, counter=WordCounter())
    assert chunks[0].symbols == () and chunks[0].lines is None


def test_a_language_without_a_grammar_and_markdown_are_cut_as_before() -> None:
    rust = fence_code("fn main() {}\n", "rust")
    assert chunk_code_document(rust, counter=WordCounter()) == chunk_markdown(rust, counter=WordCounter())
    prose = "# Notes\n\n```python\nprint(1)\n```\n\nAfter the code.\n"
    assert code_body(prose) is None
    assert chunk_code_document(prose, counter=WordCounter()) == chunk_markdown(prose, counter=WordCounter())


def test_a_line_longer_than_the_limit_falls_back_to_cutting_inside_lines() -> None:
    text = fence_code("x = [" + ", ".join(str(n) for n in range(400)) + "]\n", "python")
    chunks = chunk_code_document(text, counter=WordCounter(), max_tokens=50)
    assert len(chunks) > 1
    assert all(c.token_count <= 50 for c in chunks)
