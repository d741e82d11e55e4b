"""How entity names are normalised and matched, by the graph's extraction and its ranking alike."""

from __future__ import annotations

import re
import unicodedata

MAX_KEY_LENGTH = 200

_NON_WORD = re.compile(r"[\W_]+", re.UNICODE)
_STOPWORDS = frozenset(
    "a an and are as at be by for from has have he her his in is it its of on or she that the their they this to was were which who with".split()
)


# A Latin letter's accents ("é" decomposed is "e" and a combining acute): dropped, so "Amélie" is "amelie" and
# text written without accents names it. Other scripts keep their marks (a kana's voicing mark is a letter).
_LATIN_ACCENTS = re.compile(r"(?<=[A-Za-z\u00c0-\u024f])[\u0300-\u036f]+")


def normalised_text(text: str) -> str:
    """Text in the form keys are matched in: NFKC, Latin accents dropped, case-folded, words split on anything
    not a letter or digit."""
    if not text.isascii():
        text = unicodedata.normalize("NFC", _LATIN_ACCENTS.sub("", unicodedata.normalize("NFKD", text)))
    return " ".join(_NON_WORD.sub(" ", text.casefold()).split())


def entity_key(name: str) -> str:
    """The normalised form names are matched by (`normalised_text`, bounded)."""
    return normalised_text(name)[:MAX_KEY_LENGTH].strip()


def is_meaningful_key(key: str) -> bool:
    """A key worth matching: not empty, not only stopwords or digits, not a single letter."""
    words = key.split()
    return bool(words) and any(w not in _STOPWORDS and not w.isdigit() and len(w) > 1 for w in words)


# A title's qualifier, which text naming the thing leaves out: "Ed Wood (film)", "Brown County, Kansas",
# "Bogislaw IV, Duke of Pomerania". After a comma only a short proper name qualifies (a place, a rank):
# "Genomic imprinting in development, growth, behavior" is a title that is a phrase, not a qualified name.
_QUALIFIED_TITLE = re.compile(
    r"^(?P<base>[^,()]*?\S)\s*(?:\([^()]+\)|,\s*[A-Z][\w'’.-]*(?:\s+(?:of|de|the|and|upon|on)?\s*[A-Z][\w'’.-]*){0,3})$"
)
# A name's words at most: a longer base is a phrase.
MAX_SHORT_TITLE_WORDS = 6


def short_title(title: str) -> str | None:
    """The form text names a qualified title by ("Ed Wood" for "Ed Wood (film)"), when it starts with a capital,
    is a name (`is_meaningful_key`) and is short; None for a title without a qualifier."""
    match = _QUALIFIED_TITLE.match(title.strip())
    if match is None:
        return None
    base = match.group("base").strip()
    if not base[:1].isupper() or len(base.split()) > MAX_SHORT_TITLE_WORDS or not is_meaningful_key(entity_key(base)):
        return None
    return base
