"""Facts the rules read from sentences: who or what a sentence says is related, by which words, and the short
forms a text names a person by once it has named them in full.

Pure functions over one chunk's text and the names the rules already recognised in it (titles, proper
names, wiki links): no model, no database. A sentence "Altid ballade is a 1955 Danish drama film directed by
Gabriel Axel" gives `altid ballade -[drama film directed by]-> gabriel axel`; "He was born in Copenhagen", in the
page of a person, gives the page's subject `-[was born in]->` Copenhagen when Copenhagen is a recognised name.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

from rag.corpus.names import is_meaningful_key, normalised_text
from rag.corpus.sentences import sentences

# A predicate is the last few words before the object: the verb phrase, not the whole clause.
PREDICATE_WORDS = 4
PREDICATE_LENGTH = 40
MAX_SENTENCE_RELATIONS = 24

# Words a sentence about its page's subject starts with instead of naming it.
_PRONOUNS = frozenset("he she it they his her its their this these the".split())
# Words that start another clause: a predicate is what follows the last of them ("… and studied at").
_CLAUSE_STARTS = frozenset("and or but nor whom which who that while whereas".split())
# Between two names of a list ("A, B and C"): the later ones take the predicate of the first.
_LIST_WORDS = frozenset("and or also as well".split())
# Articles a predicate neither starts nor ends with ("a remake of", not "was a remake of the").
_ARTICLES = frozenset("a an the".split())
_DIGITS = re.compile(r"^\d+$")
_WORD = re.compile(r"(?<![\w'’-])[^\W\d_]+(?![\w-])")


def surname_aliases(text: str, names: Iterable[str]) -> dict[str, tuple[str, int]]:
    """Short forms the text uses for a person it names in full: the last word of a two- or three-word name of
    capitalised words ("Wynorski" for "Jim Wynorski"), found capitalised on its own in the text. A last word
    two of the names share, or that is one of the names itself, is nobody's alias.

    Returns alias key -> (name key, how often the alias stands alone)."""
    by_surname: dict[str, set[str]] = {}
    keys = set()
    for name in names:
        words = name.split()
        key = normalised_text(name)
        keys.add(key)
        if 2 <= len(words) <= 3 and all(word[:1].isupper() for word in words) and len(words[-1]) >= 3:
            surname = normalised_text(words[-1])
            if surname.isalpha():
                by_surname.setdefault(surname, set()).add(key)
    aliases: dict[str, tuple[str, int]] = {}
    if not by_surname:
        return aliases
    # Each word written with a capital, counted once over the text (a word joined to another by a hyphen or
    # an apostrophe before it is part of that word); a full name's own last word is taken off its count.
    capitalised = Counter(normalised_text(word) for word in _WORD.findall(text) if word[:1].isupper())
    normalised = f" {normalised_text(text)} "
    for surname, full in by_surname.items():
        if len(full) != 1 or surname in keys:
            continue
        (key,) = full
        alone = capitalised[surname] - normalised.count(f" {key} ")
        if alone > 0:
            aliases[surname] = (key, alone)
    return aliases


Index = dict[str, list[tuple[list[str], str]]]


def _index(keys: dict[str, str]) -> Index:
    """The names' words by their first word: `keys` maps a name's words (a key, or an alias) to its entity key."""
    by_first: Index = {}
    for form, key in keys.items():
        form_words = form.split()
        by_first.setdefault(form_words[0], []).append((form_words, key))
    return by_first


def _occurrences(words: list[str], by_first: Index) -> list[tuple[int, int, str]]:
    """(start, end, key) of each recognised name in the sentence's words, longest first where they overlap."""
    found: list[tuple[int, int, str]] = []
    i = 0
    while i < len(words):
        best = None
        for form_words, key in by_first.get(words[i], ()):
            if words[i : i + len(form_words)] == form_words and (best is None or len(form_words) > best[1] - best[0]):
                best = (i, i + len(form_words), key)
        if best is not None:
            found.append(best)
            i = best[1]
        else:
            i += 1
    return found


def _predicate(words: list[str]) -> str:
    """The verb phrase among the words between two names: their last few, without leading articles or numbers;
    empty unless a word of it says something ("was born in", not "in")."""
    words = [w for w in words if not _DIGITS.match(w)][-PREDICATE_WORDS:]
    while words and words[0] in _ARTICLES:
        words.pop(0)
    while words and words[-1] in _ARTICLES:
        words.pop()
    phrase = " ".join(words)
    while len(phrase) > PREDICATE_LENGTH:
        words.pop(0)
        phrase = " ".join(words)
    return phrase if is_meaningful_key(phrase) else ""


class StatementReader:
    """One chunk's sentences, split and normalised once, read for the relations they state between its names, and
    again for those each further name takes part in (`statements(extra=...)`).

    The subject is the name a sentence opens with, or, in a document about `own_key`, the document itself
    when the sentence opens with a pronoun or names nothing before its verb ("Directed by Gabriel Axel, …").
    Each later name is related to the subject by the words just before it; a name in a list ("starring A
    and B") takes the predicate of the name before it. A sentence with no words between two names relates nothing.
    `keys` maps each recognised name's key, or an alias of it, to the key; a sentence opening with
    `own_short_key` (the short form of the document's qualified title, "Ed Wood" in "Ed Wood (film)") is
    about the document.
    """

    def __init__(self, text: str, keys: dict[str, str], own_key: str | None, own_short_key: str | None = None) -> None:
        if own_key and own_short_key:
            keys = {**keys, own_short_key: own_short_key}
        self.own_key, self.own_short_key = own_key, own_short_key
        self.index = _index(keys)
        self.words = [normalised_text(sentence).split() for sentence in sentences(text)]
        self.vocabulary = [set(words) for words in self.words]

    def statements(self, extra: str | None = None) -> list[tuple[str, str, str]]:
        """The relations the sentences state; with `extra` (a key), those it takes part in, read with it as a name too."""
        index, rows = self.index, list(range(len(self.words)))
        if extra:
            first = extra.split()[0]
            index = {**self.index, first: [*self.index.get(first, ()), (extra.split(), extra)]}
            rows = [i for i in rows if first in self.vocabulary[i]]
        own_key, own_short_key = self.own_key, self.own_short_key
        found: dict[tuple[str, str, str], None] = {}
        for i in rows:
            words = self.words[i]
            names = _occurrences(words, index)
            if not names:
                continue
            if names[0][0] == 0 or (names[0][0] == 1 and words[0] == "the"):
                subject, previous_end, objects = names[0][2], names[0][1], names[1:]
                if own_key and subject == own_short_key:
                    subject = own_key
            elif own_key and (words[0] in _PRONOUNS or own_key not in {key for _, _, key in names}):
                subject, previous_end, objects = own_key, 1 if words[0] in _PRONOUNS else 0, names
            else:
                continue
            predicate = ""
            for start, end, key in objects:
                between = words[previous_end:start]
                clause = max((j for j, word in enumerate(between) if word in _CLAUSE_STARTS), default=-1)
                phrase = _predicate(between[clause + 1 :])
                if phrase:
                    predicate = phrase
                elif not all(word in _LIST_WORDS for word in between):
                    predicate = ""  # words that relate nothing ("for", a clause of its own): no relation to this name
                if predicate and key != subject and key != own_short_key and (not extra or extra in (subject, key)):
                    found[(subject, predicate, key)] = None
                previous_end = end
            if len(found) >= MAX_SENTENCE_RELATIONS:
                break
        return list(found)[:MAX_SENTENCE_RELATIONS]
