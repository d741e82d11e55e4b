"""A source file imported by any path (upload, ZIP) is a code document: one fenced block, cited by the file's lines."""

from __future__ import annotations

import re

from documents.code import code_body, code_line_shift, fence_code
from documents.ingestion.detect import detect
from documents.ingestion.parsers import parse
from documents.models import Document
from tests.conftest import ApiFor, Cast, SignIn
from tests.documents.ingestion.conftest import Upload
from tests.documents.ingestion.files import make_zip

INVOICE = '''"""Invoices and their totals."""
import decimal

TAX_RATE = decimal.Decimal("0.2")


def invoice_total(amount: decimal.Decimal) -> decimal.Decimal:
    """The invoice total adds the sales tax to the net amount."""
    return amount * (1 + TAX_RATE)
'''


def test_a_python_file_is_parsed_as_one_fenced_block_titled_by_its_name() -> None:
    data = INVOICE.encode()
    detected = detect("billing/invoice.py", data)
    parsed = parse("billing/invoice.py", data, detected)
    assert detected.format == "code"
    assert parsed.title == "invoice.py"
    assert parsed.text == "```python\n" + INVOICE + "```\n"
    body = code_body(parsed.text)
    assert body is not None and parsed.text[body.start : body.end] == INVOICE
    assert code_line_shift(parsed.text) == 1


def test_the_fence_is_longer_than_any_backticks_in_the_code() -> None:
    source = 'doc = """\n```\nexample\n```\n"""\n'
    text = fence_code(source, "python")
    assert text.startswith("````python\n") and text.endswith("\n````\n")
    body = code_body(text)
    assert body is not None and text[body.start : body.end] == source


def test_a_tsx_file_opening_with_markup_is_code_not_html() -> None:
    assert detect("page.tsx", b"<html><body>{children}</body></html>\n").format == "code"


def test_an_uploaded_code_file_is_cited_by_the_functions_own_lines(
    cast: Cast, upload: Upload, api_for: ApiFor, signed_in: SignIn
) -> None:
    upload(cast.alice, cast.handbook, {"invoice.py": INVOICE.encode()})
    document = Document.objects.get()
    assert document.text.startswith("```python\n")
    response = api_for(cast.alice).post("rag.answer", {"query": "How does the invoice total add the sales tax?"})
    data = response.json()["data"]
    assert data["mode"] == "extractive"
    citation = data["citations"][0]
    assert citation["lines"] == {"start": 7, "end": 9}
    assert citation["location"] == "invoice.py:7-9"

    quote = citation["quote"]
    page = signed_in(cast.alice).get(f"{document.url}?v={document.version}&start={quote['start']}&end={quote['end']}")
    html = page.content.decode()
    assert "Cited at <code>invoice.py:7-9</code>" in html
    assert re.search(r'<pre><code class="language-python">', html), "the file is shown as a code block"
    assert '<mark id="passage" class="passage">' in html


def test_a_code_file_in_a_zip_becomes_a_code_document(cast: Cast, upload: Upload) -> None:
    upload(cast.alice, cast.handbook, {"code.zip": make_zip({"src/main.go": b"package main\n\nfunc main() {}\n"})})
    document = Document.objects.get()
    assert (document.title, document.text) == ("main.go", "```go\npackage main\n\nfunc main() {}\n```\n")


def test_a_files_symbols_are_graph_entities_only_for_those_who_may_read_it(cast: Cast, upload: Upload, api_for: ApiFor) -> None:
    upload(cast.alice, cast.private, {"invoice.py": INVOICE.encode()})
    entities = api_for(cast.alice).post("graph.entities", {"query": "invoice_total"}).json()["data"]
    assert [(e["name"], e["kind"]) for e in entities] == [("invoice_total", "symbol")]
    assert api_for(cast.bob).post("graph.entities", {"query": "invoice_total"}).json()["data"] == []
