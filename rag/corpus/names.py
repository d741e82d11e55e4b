"""How entity names are normalised and matched, by the graph's extraction and its ranking alike."""

from __future__ import annotations

import re
import unicodedata

MAX_KEY_LENGTH = 200

_NON_WORD = re.compile(r"[\W_]+", re.UNICODE)
_STOPWORDS = frozenset(
    "a an and are as at be by for from has have he her his in is it its of on or she that the their they this to was were which who with".split()
)


def normalised_text(text: str) -> str:
    """Text in the form keys are matched in: NFKC, case-folded, words split on anything not a letter or digit."""
    return " ".join(_NON_WORD.sub(" ", unicodedata.normalize("NFKC", text).casefold()).split())


def entity_key(name: str) -> str:
    """The normalised form names are matched by (`normalised_text`, bounded)."""
    return normalised_text(name)[:MAX_KEY_LENGTH].strip()


def is_meaningful_key(key: str) -> bool:
    """A key worth matching: not empty, not only stopwords or digits, not a single letter."""
    words = key.split()
    return bool(words) and any(w not in _STOPWORDS and not w.isdigit() and len(w) > 1 for w in words)
