"""Detection and parsing of each format, without a database: text and structure come through."""

from __future__ import annotations

import pytest

from documents.ingestion.detect import detect
from documents.ingestion.errors import FileRejected
from documents.ingestion.parsers import Parsed, parse
from tests.documents.ingestion.files import HTML, MARKDOWN, encrypt_pdf, make_docx, make_pdf, make_zip


def parsed(name: str, data: bytes) -> Parsed:
    return parse(name, data, detect(name, data))


def rejection(name: str, data: bytes) -> str:
    with pytest.raises(FileRejected) as caught:
        parsed(name, data)
    return caught.value.reason


def test_markdown_keeps_headings_tables_and_code_and_takes_its_title_from_the_first_heading() -> None:
    result = parsed("guides/onboarding.md", MARKDOWN.encode())
    assert result.title == "Onboarding"
    assert result.text == MARKDOWN


def test_plain_text_in_latin_1_is_decoded() -> None:
    text = "Le café de la gare ouvre à sept heures. Les employés prennent leur déjeuner à midi et demi. " * 8
    result = parsed("notes.txt", text.encode("latin-1"))
    assert "café de la gare ouvre à sept heures" in result.text


def test_plain_text_is_titled_after_its_file_name() -> None:
    assert parsed("team_notes.txt", b"Nothing special here.").title == "team notes"


def test_html_keeps_the_main_content_as_markdown_and_drops_scripts_styles_and_navigation() -> None:
    result = parsed("handbook.html", HTML.encode())
    assert result.title == "Incident handbook"
    assert "# Incident handbook" in result.text
    assert "## Severity levels" in result.text
    assert "| SEV1 | Outage |" in result.text
    assert "```\nincident declare --sev 1\n```" in result.text
    for gone in ("alert", "tracking", "injected", "color: red", "About us", "Copyright"):
        assert gone not in result.text


def test_a_pdf_keeps_its_text_per_page_and_a_map_from_offsets_to_pages() -> None:
    result = parsed("report.pdf", make_pdf([["Quarterly report", "Revenue grew."], ["Costs fell (a little)."]], title="Q3"))
    assert result.title == "Q3"
    assert result.text == "Quarterly report\nRevenue grew.\n\nCosts fell (a little)."
    assert result.page_map == [0, result.text.index("Costs")]


def test_docx_keeps_headings_lists_tables_and_code() -> None:
    result = parsed("runbook.docx", make_docx())
    assert result.title == "Deployment runbook"
    assert "# Deployment runbook" in result.text
    assert "## Rolling back" in result.text
    assert "- Page the on-call engineer." in result.text
    assert "```\n./deploy rollback --env production\n./deploy status\n```" in result.text
    assert "| Service | Owner |\n| --- | --- |\n| api | Platform |\n| web | Frontend \\| UI |" in result.text


@pytest.mark.parametrize(
    ("name", "data", "expected"),
    [
        ("really-a-pdf.txt", make_pdf([["text"]]), "pdf"),
        ("page.md", HTML.encode(), "html"),
        ("runbook.bin", make_docx(), "docx"),
        ("docs.dat", make_zip({"a.md": b"# A"}), "zip"),
        ("notes", b"# Heading\n\nplain words", "text"),
    ],
)
def test_the_type_comes_from_the_content_not_the_extension(name: str, data: bytes, expected: str) -> None:
    assert detect(name, data).format == expected


def test_an_empty_file_is_refused() -> None:
    assert rejection("empty.md", b"") == "The file is empty."
    assert rejection("blank.md", b"  \n\n ") == "The file is empty."


def test_an_image_is_an_unsupported_type() -> None:
    assert rejection("photo.md", b"\x89PNG\r\n\x1a\n" + b"\x00" * 64) == "Unsupported file type: a PNG image."


def test_unknown_binary_data_is_an_unsupported_type() -> None:
    assert rejection("blob.txt", bytes(range(256)) * 4).startswith("Unsupported file type")


def test_utf8_text_with_bytes_that_are_not_utf8_is_refused() -> None:
    damaged = "Grüße aus München.\n".encode() + b"Then \xff\xfe garbage.\n"
    assert rejection("broken.txt", damaged) == (
        "Invalid text encoding: the file is UTF-8 but byte 27 is not (invalid start byte)."
    )


def test_russian_in_windows_1251_is_decoded() -> None:
    text = "Привет, мир. Это обычный текст на русском языке, записанный в старой кодировке. " * 6
    assert "Это обычный текст" in parsed("ru.txt", text.encode("cp1251")).text


def test_a_utf8_bom_with_invalid_bytes_after_it_is_refused() -> None:
    assert rejection("bom.txt", b"\xef\xbb\xbfHello \xff\xff world").startswith("Invalid text encoding")


def test_a_corrupt_pdf_is_refused() -> None:
    assert rejection("broken.pdf", b"%PDF-1.7\n1 0 obj << /Type /Catalog /Pages 9 0 R >>\ngarbage").startswith("Corrupt PDF")


def test_an_encrypted_pdf_is_refused() -> None:
    reason = rejection("locked.pdf", encrypt_pdf(make_pdf([["Top secret"]])))
    assert reason == "The PDF is encrypted with a password; remove the password and import it again."


def test_a_scanned_pdf_without_a_text_layer_has_no_extractable_text() -> None:
    assert "no extractable text" in rejection("scan.pdf", make_pdf([[], []]))


def test_a_corrupt_docx_is_refused() -> None:
    assert rejection("broken.docx", make_zip({"[Content_Types].xml": b"<Types/>", "word/document.xml": b"<not xml"})).startswith(
        "Corrupt DOCX"
    )


def test_a_spreadsheet_is_an_unsupported_type() -> None:
    assert rejection("sheet.xlsx", make_zip({"xl/workbook.xml": b"<workbook/>"})) == "Unsupported file type: an Excel workbook."
