"""A search hit's passage as a short snippet: its best fragments, the query's words marked (PostgreSQL's ts_headline)."""

from __future__ import annotations

from collections.abc import Sequence

from config.replicas import read_connection
from rag.corpus.text_search import TEXT_SEARCH_CONFIG

# ts_headline wraps each matched word in these: private-use characters, removed from the passages first,
# so whatever a document holds can only ever be text between them.
_START, _STOP = "\ue000", "\ue001"
# ts_headline drops what its parser reads as an HTML tag; the passage's angle brackets pass through it as
# these instead, so `<div>` in a passage stays in its snippet.
_BRACKETS = {"<": "\ue002", ">": "\ue003"}
_PRIVATE = (_START, _STOP, *_BRACKETS.values())
_OPTIONS = f'StartSel={_START}, StopSel={_STOP}, MaxWords=30, MinWords=12, MaxFragments=2, FragmentDelimiter=" … "'

# A snippet as (text, matched) pieces: a template writes each as text, the matched ones inside <mark>.
Snippet = list[tuple[str, bool]]


def _any_word(lexemes: Sequence[str]) -> str:
    """A tsquery matching any of the lexemes (keyword search's OR), each quoted as tsquery input wants."""
    return " | ".join("'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'" for lexeme in lexemes)


def passage_snippets(*, query: str, passages: Sequence[str]) -> list[Snippet]:
    """Each passage's fragments that hold the query's words (stemmed as keyword search stems them), those words
    marked; a passage without them starts its snippet. One query for all the passages."""
    if not passages:
        return []
    clean = [_through_headline(p) for p in passages]
    with read_connection().cursor() as cursor:
        cursor.execute("SELECT tsvector_to_array(to_tsvector(%s::regconfig, %s))", [TEXT_SEARCH_CONFIG, query])
        lexemes = cursor.fetchone()[0]
        cursor.execute(
            """SELECT ts_headline(%s::regconfig, p.text, %s::tsquery, %s)
               FROM unnest(%s::text[]) WITH ORDINALITY AS p(text, n) ORDER BY p.n""",
            [TEXT_SEARCH_CONFIG, _any_word(lexemes), _OPTIONS, clean],
        )
        headlines = [row[0] for row in cursor.fetchall()]
    return [_pieces(headline) for headline in headlines]


def _through_headline(passage: str) -> str:
    for character in _PRIVATE:
        passage = passage.replace(character, "")
    for bracket, stand_in in _BRACKETS.items():
        passage = passage.replace(bracket, stand_in)
    return passage


def _pieces(headline: str) -> Snippet:
    for bracket, stand_in in _BRACKETS.items():
        headline = headline.replace(stand_in, bracket)
    pieces: Snippet = []
    for part in headline.split(_START):
        word, stop, rest = part.partition(_STOP)
        if stop:
            pieces.append((word, True))
            part = rest
        if part:
            pieces.append((part, False))
    return pieces
