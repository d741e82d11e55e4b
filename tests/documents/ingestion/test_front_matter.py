"""Markdown front matter: its title and tags become the document's, and the block leaves the text."""

from __future__ import annotations

import pytest

from documents.ingestion.detect import detect
from documents.ingestion.errors import FileRejected
from documents.ingestion.parsers import Parsed, parse
from documents.models import Document
from tests.conftest import ApiFor, Cast
from tests.documents.ingestion.conftest import JobInfo, Upload

NOTE = "---\ntitle: Deploy checklist\ntags: [Ops, Release, ops]\nauthor: alice\n---\n\n# Steps\n\nRun the tests first.\n"


def parsed(name: str, data: str) -> Parsed:
    return parse(name, data.encode(), detect(name, data.encode()))


def test_front_matter_gives_the_title_and_normalised_tags_and_leaves_the_text() -> None:
    result = parsed("deploy.md", NOTE)
    assert (result.title, result.tags) == ("Deploy checklist", ["ops", "release"])
    assert result.text == "# Steps\n\nRun the tests first.\n"


@pytest.mark.parametrize(
    ("front", "tags"),
    [
        ("tags: security, onboarding", ["onboarding", "security"]),
        ("tags:\n  - Security\n  - 2024", ["2024", "security"]),
        ("tags: solo", ["solo"]),
        ("tags:", []),
        ("title: Only a title", None),
    ],
)
def test_tags_may_be_a_list_a_comma_separated_string_or_absent(front: str, tags: list[str] | None) -> None:
    assert parsed("a.md", f"---\n{front}\n---\nBody text.\n").tags == tags


def test_without_a_front_matter_title_the_first_heading_titles_the_document() -> None:
    result = parsed("a.md", "---\ntags: [x]\n---\n# From the heading\n\nBody.\n")
    assert result.title == "From the heading" and result.text.startswith("# From the heading")


def test_an_empty_front_matter_block_is_removed() -> None:
    assert parsed("a.md", "---\n---\nBody.\n").text == "Body.\n"


def test_a_rule_around_plain_text_is_not_front_matter() -> None:
    text = "---\nJust a paragraph between two rules.\n---\nMore text.\n"
    result = parsed("a.md", text)
    assert result.text == text and result.tags is None


def test_a_file_starting_with_something_else_keeps_its_text() -> None:
    text = "# Title\n\n---\ntags: [x]\n---\n"
    assert parsed("a.md", text).text == text


def test_invalid_yaml_fails_the_file_with_its_reason() -> None:
    with pytest.raises(FileRejected) as caught:
        parsed("a.md", "---\ntags: [unclosed\n---\nBody.\n")
    assert "front matter" in caught.value.reason and "not valid YAML" in caught.value.reason


def rejection(text: str) -> str:
    with pytest.raises(FileRejected) as caught:
        parsed("a.md", text)
    return caught.value.reason


def test_a_yaml_alias_fails_the_file_before_anything_is_built() -> None:
    assert rejection("---\nname: &who Alice\ntitle: *who\n---\nBody.\n") == (
        "The front matter (between the --- lines at the top) repeats a value with a YAML alias (*name); "
        "aliases are not allowed there."
    )


def test_an_anchor_without_an_alias_is_harmless() -> None:
    assert parsed("a.md", "---\ntitle: &t Anchored\n---\nBody.\n").title == "Anchored"


def test_a_title_that_is_a_list_fails_the_file() -> None:
    assert rejection("---\ntitle: [a, b]\n---\nBody.\n") == "The front matter's title must be text, not a list or a mapping."


def test_a_bare_number_or_date_is_a_title() -> None:
    assert parsed("a.md", "---\ntitle: 2024-05-01\n---\nBody.\n").title == "2024-05-01"


def test_nested_tags_fail_the_file() -> None:
    assert rejection("---\ntags: [[a, b], c]\n---\nBody.\n") == (
        "The front matter's tags must be a list of words or one comma-separated string."
    )


def test_front_matter_nested_too_deeply_fails_the_file() -> None:
    deep = "[" * 50 + "]" * 50
    assert rejection(f"---\nextra: {deep}\n---\nBody.\n") == (
        "The front matter (between the --- lines at the top) is nested more than 20 levels deep."
    )


def test_front_matter_longer_than_64_kb_fails_the_file() -> None:
    notes = "\n".join(f"note{n}: {'x' * 60}" for n in range(1200))
    assert rejection(f"---\n{notes}\n---\nBody.\n") == (
        "The front matter (between the --- lines at the top) is longer than 64 KB."
    )


def test_an_invalid_tag_fails_the_file_with_its_reason() -> None:
    with pytest.raises(FileRejected) as caught:
        parsed("a.md", f"---\ntags: [{'x' * 60}]\n---\nBody.\n")
    assert "tags are not valid" in caught.value.reason and "at most 50 characters" in caught.value.reason


def test_plain_text_files_have_no_front_matter() -> None:
    assert parsed("a.txt", NOTE).text == NOTE


def test_an_import_tags_its_documents_and_a_changed_file_retags_them(cast: Cast, upload: Upload) -> None:
    upload(cast.alice, cast.handbook, {"deploy.md": NOTE.encode()})
    doc = Document.objects.get(title="Deploy checklist")
    assert doc.tags == ["ops", "release"] and "author: alice" not in doc.text
    upload(cast.alice, cast.handbook, {"deploy.md": NOTE.replace("Ops, Release, ops", "security").encode()})
    doc.refresh_from_db()
    assert doc.tags == ["security"]
    assert doc.version == 1, "only the front matter changed: the text, and so the index, stay as they were"


def test_a_new_version_without_tags_keeps_the_tags_given_in_cairn(cast: Cast, upload: Upload, api_for: ApiFor) -> None:
    upload(cast.alice, cast.handbook, {"notes.md": b"# Notes\n\nFirst.\n"})
    doc = Document.objects.get(title="Notes")
    api_for(cast.alice).post("documents.update", {"id": str(doc.id), "tags": ["kept"]})
    upload(cast.alice, cast.handbook, {"notes.md": b"# Notes\n\nSecond.\n"})
    doc.refresh_from_db()
    assert doc.tags == ["kept"] and "Second" in doc.text


def test_a_file_with_bad_front_matter_fails_alone(cast: Cast, upload: Upload, job_info: JobInfo) -> None:
    job = upload(cast.alice, cast.handbook, {"bad.md": b"---\ntags: [oops\n---\nx\n", "good.md": NOTE.encode()})
    files = {f["path"]: f for f in job_info(cast.alice, job["data"]["id"])["files"]}
    assert files["bad.md"]["outcome"] == "failed" and "not valid YAML" in files["bad.md"]["reason"]
    assert files["good.md"]["outcome"] == "created"
