"""Detection and parsing of each format, without a database: text and structure come through."""

from __future__ import annotations

import inspect
import struct
import sys

import pytest
from pytest_django import Settings

from documents.ingestion.detect import detect
from documents.ingestion.errors import FileRejected
from documents.ingestion.parsers import HTML_MAX_DEPTH, Parsed, parse
from tests.documents.ingestion.files import HTML, MARKDOWN, encrypt_pdf, make_docx, make_docx_bomb, make_pdf, make_zip


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


@pytest.mark.parametrize(
    ("encoding", "text"),
    [
        ("shift_jis", "会議の議事録です。明日の予定を確認してください。東京の事務所で午後三時に会いましょう。"),
        ("euc_jp", "会議の議事録です。明日の予定を確認してください。東京の事務所で午後三時に会いましょう。"),
        ("gb18030", "这是会议记录。请确认明天的日程安排。我们下午三点在北京办公室见面。"),
        ("big5", "這是會議記錄。請確認明天的日程安排。我們下午三點在台北辦公室見面。"),
        ("euc_kr", "회의록입니다. 내일 일정을 확인해 주세요. 오후 세 시에 서울 사무실에서 만납시다."),
    ],
)
def test_east_asian_legacy_encodings_are_decoded(encoding: str, text: str) -> None:
    assert parsed("notes.txt", text.encode(encoding)).text == text


def nested_html(depth: int) -> bytes:
    return ("<html><body>" + "<div>" * depth + "Deep down." + "</div>" * depth + "</body></html>").encode()


def test_html_nested_past_the_limit_is_refused_with_the_limit() -> None:
    assert rejection("deep.html", nested_html(5000)) == "The HTML is nested more than 200 elements deep; Cairn reads at most 200."


def test_html_nested_up_to_the_limit_is_read() -> None:
    assert parsed("deep.html", nested_html(HTML_MAX_DEPTH - 2)).text == "Deep down.\n"  # html and body are two levels


def test_html_with_more_elements_than_the_limit_is_refused(settings: Settings) -> None:
    settings.IMPORT_MAX_HTML_ELEMENTS = 1000
    page = ("<html><body>" + "<p>x</p>" * 1000 + "</body></html>").encode()
    assert rejection("long.html", page) == "The HTML has more than 1,000 elements; Cairn reads at most 1,000 in one file."


def test_a_library_running_out_of_stack_is_a_reason_not_a_recursion_error() -> None:
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(len(inspect.stack()) + 100)  # markdownify needs about three frames for each level
    try:
        reason = rejection("deep.html", nested_html(150))
    finally:
        sys.setrecursionlimit(limit)
    assert reason == "The file is nested too deeply to be read."


def test_a_docx_that_expands_past_the_ratio_is_refused_before_python_docx_reads_it() -> None:
    bomb = make_docx_bomb(expanded=64 * 1024 * 1024)  # about 200 KB
    assert rejection("bomb.docx", bomb) == "The DOCX expands more than 100 times its size (a ZIP bomb?)."


def test_a_docx_past_its_expanded_size_limit_is_refused(settings: Settings) -> None:
    settings.IMPORT_MAX_DOCX_EXPANDED_SIZE = 100_000
    assert rejection("runbook.docx", make_docx()) == (
        "The DOCX expands beyond the 100,000 bytes limit for one DOCX (its parts together)."
    )


def test_a_docx_whose_headers_understate_its_sizes_is_caught_while_inflating() -> None:
    bomb = bytearray(make_docx_bomb(expanded=64 * 1024 * 1024))
    central = struct.unpack("<I", bomb[-6:-2])[0]
    for at in (22, central + 24):  # document.xml declares 1 KB, in its local header and the central directory
        struct.pack_into("<I", bomb, at, 1024)
    assert rejection("bomb.docx", bytes(bomb)).startswith("Corrupt DOCX: Bad CRC-32")
