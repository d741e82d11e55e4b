"""Document tags: one normal form for every way in (API, admin, imported front matter) and every filter.

A tag is trimmed, its inner whitespace collapsed to one space and lower-cased, so "Release Notes",
" release  notes " and "RELEASE NOTES" are one tag. A document carries each tag once, sorted.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable

from django.core.exceptions import ValidationError

MAX_TAG_LENGTH = 50
MAX_TAGS_PER_DOCUMENT = 20
# Filters (rag.search, rag.answer, documents.list) match documents carrying every listed tag.
MAX_FILTER_TAGS = 10


def normalise_tag(value: object) -> str:
    """The tag's normal form; ValidationError with a reason a person can act on."""
    if not isinstance(value, str):
        raise ValidationError("each tag must be a string.")
    tag = " ".join(value.split()).lower()
    if not tag:
        raise ValidationError("a tag must not be empty.")
    if len(tag) > MAX_TAG_LENGTH:
        raise ValidationError(f"a tag has at most {MAX_TAG_LENGTH} characters ({tag[:20]!r}… has {len(tag)}).")
    if "," in tag:
        # The admin and front matter's "a, b" strings are split on commas: a comma inside a tag could not round-trip.
        raise ValidationError(f"a tag must not contain a comma ({tag!r}).")
    if any(unicodedata.category(c).startswith("C") for c in tag):
        raise ValidationError(f"a tag must not contain control characters ({tag!r}).")
    return tag


def normalise_tags(values: Iterable[object], *, limit: int = MAX_TAGS_PER_DOCUMENT) -> list[str]:
    """Each tag normalised, once, sorted; at most `limit` of them."""
    tags = sorted({normalise_tag(value) for value in values})
    if len(tags) > limit:
        raise ValidationError(f"at most {limit} tags, not {len(tags)}.")
    return tags


def split_tags(text: str) -> list[str]:
    """Tags written as one string, "security, onboarding" (front matter, forms): the non-empty parts between commas."""
    return [part for part in (piece.strip() for piece in text.split(",")) if part]
