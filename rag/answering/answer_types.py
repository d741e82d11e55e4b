"""What kind of answer a question asks for, and where a sentence states one.

A question's expected answer type comes from its wh-word and the noun that heads what it asks
("when", "what year", "date of ..." ask for a date; "where", "which country", "place of ..." for a
place; "who" for a person; "how many" for a number; "is/are/did ..." for yes or no). A comparison
names its sides ("Who was born first, A or B?", "Are X and Y in the same country?"), and the
relation it compares by ("born" and "first": the earlier birth date).

Spans are found by their form alone, no model: dates in the ways prose writes them, numbers, names
(capitalised words) and places (names after "in", "at" or "from", or a nationality adjective).
Pure functions with no Django imports.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum


class AnswerType(StrEnum):
    DATE = "date"
    PLACE = "place"
    PERSON = "person"
    NUMBER = "number"
    YES_NO = "yes_no"
    OTHER = "other"


@dataclass(frozen=True)
class Question:
    """How a question reads: the answer type, the relation it asks about, and for a comparison its sides."""

    type: AnswerType
    # The event or attribute asked about: "birth", "death", "release", "nationality", ... (None: not one of them).
    relation: str | None = None
    # A comparison's sides ("A or B", "A and B"), as the question writes them.
    sides: tuple[str, ...] = field(default=())
    # How a comparison picks: "earlier" / "later" (dates), "more" / "less" (numbers), "same" (yes or no).
    order: str | None = None


_MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
_MONTH_ABBREVIATIONS = "Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec"
_MONTH = rf"(?:{_MONTHS}|(?:{_MONTH_ABBREVIATIONS})\.?)"
# "2 February 1345", "February 2, 1345", "February 1345", "1345" (a year of three or four digits, not a larger number).
DATE = re.compile(
    rf"\b(?:\d{{1,2}}(?:st|nd|rd|th)?\s+{_MONTH},?\s+\d{{3,4}}|{_MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{3,4}}"
    rf"|{_MONTH},?\s+\d{{3,4}}|(?<![\d,.])\d{{3,4}}(?:\s*(?:AD|BC|CE|BCE))?(?![\d,]|\.\d))\b"
)
# A number with its unit or the noun it counts ("25 days", "1,200 reels", "98%").
NUMBER = re.compile(
    r"(?<![\w.])\d[\d,]*(?:\.\d+)?(?:\s*(?:%|percent|per cent|million|billion|thousand|hundred))?"
    r"(?:\s+(?!(?:of|and|or|in|on|at|to|the|a|an|is|was|were|are|by|for|from|with)\b)[a-z]+)?"
)
# A name: capitalised words, joined by a few lower-case particles ("Duke of York", "Ludwig van Beethoven").
_NAME = r"[A-Z][\w'’.-]*(?:\s+(?:(?:of|de|da|di|von|van|der|del|la|le|du|bin|ibn|al|y)\s+)*[A-Z][\w'’.-]*)*"
NAME = re.compile(rf"(?<![\w'’-]){_NAME}")
# A place after the prepositions that introduce one, with a region after a comma ("Glen Cove, New York").
PLACE = re.compile(rf"\b(?:in|at|from|near)\s+(?:the\s+)?({_NAME}(?:,\s+{_NAME})*)")
# A nationality as prose writes one: after an article (and perhaps a year), before a noun ("an American
# director", "a 1964 Italian film", "a Hungarian-Australian director").
NATIONALITY = re.compile(r"\b(?:an|An|a|A)\s+(?:(?:\d{4}|[a-z]+)\s+)?([A-Z][a-z]+(?:an|ian|ese|ish|ic|i|ch))\b(?=-?\s*[A-Za-z])")
_ADJECTIVE = re.compile(r"^[A-Z][a-z]+(?:an|ian|ese|ish|ic|i|ch)$")

# Capitalised because they start a sentence, or common words and months: never a name on their own.
_NOT_NAMES = frozenset(
    f"""the a an he she it they his her its their this that these those there in on at by for from with of and or but
    was is are were be been has had have not no also after before during when while as which who what where
    {_MONTHS.replace("|", " ")}""".lower().split()
)

# Relations by the words that ask for them, stems first-matched; a question names one at most.
_RELATIONS = (
    ("birth", ("born", "birth", "birthplace", "older", "younger", "oldest", "youngest")),
    ("death", ("died", "die", "death", "dies", "buried", "burial", "killed")),
    ("release", ("released", "release", "came out", "come out", "published", "premiered", "recorded", "produced")),
    ("founding", ("founded", "established", "formed", "founding", "inception", "created", "built", "opened")),
    ("nationality", ("nationality", "country", "citizen", "national", "from")),
)
_EARLIER = ("first", "earlier", "older", "oldest", "before", "sooner", "less recently", "earliest")
_LATER = ("later", "last", "younger", "youngest", "more recently", "most recently", "recent", "after", "latest")
_YES_NO_START = re.compile(r"^(?:are|is|was|were|do|does|did|can|could|has|have|had|will|would|should)\b", re.I)
# A comparison's list of sides: after a comma, "out of", "between" or a colon ("..., A or B?").
_SIDE_LIST = re.compile(r"(?:,|\bout of\b|\bbetween\b|:)\s*(.+?)\s*\??\s*$", re.I)
# "Are A and B ...", "Did A and B ...", "Do both films A and B ...", "Was A or B born first?"
_YES_NO_SUBJECTS = re.compile(
    r"^(?:are|is|was|were|do|does|did|have|has)\s+(?:both\s+)?(?:the\s+)?"
    r"(?:(?:films?|movies?|songs?|albums?|books?|bands?|people|places?|players?|persons?)\s+)?(.+)$",
    re.I,
)
# Where the subjects of a yes-or-no question end and what is asked of them begins.
_PREDICATE = re.compile(
    r"\s*,?\s+(?:both\s+)?(?:(?:of|from|in|have|has|had|share|shares|originate|originated|located|born|die|died|were|are|"
    r"was|is)\s+(?:(?:from|in)\s+)?(?:the\s+)?same\b|(?:both\s+)?(?:located|originate|originated|born|died|have|has|"
    r"share)\b)",
    re.I,
)
# A side named by its relation to another ("director of film X"): the side is X.
_ROLE_OF = re.compile(r"^(?:the\s+)?[\w-]+(?:\s+[\w-]+)?\s+of\s+(?:(?:the\s+)?(?:film|song|album|book|movie)\s+)?(.+)$", re.I)


def _split_sides(text: str) -> tuple[str, ...]:
    """ "A or B" (or "A and B" when no "or"), split at the last one, each side trimmed."""
    for joiner in (" or ", " and "):
        at = text.lower().rfind(joiner)
        if at > 0:
            sides = (text[:at].strip(" ,?"), text[at + len(joiner) :].strip(" ,?"))
            return sides if all(sides) else ()
    return ()


def _yes_no_sides(text: str) -> tuple[str, ...]:
    match = _YES_NO_SUBJECTS.match(text)
    if not match:
        return ()
    subjects = match.group(1)
    if " or " in f" {subjects.lower()} ":  # "Was A or B born first?" compares, it does not ask yes or no
        end = _PREDICATE.search(subjects, subjects.lower().find(" or ") + 4)
        return _split_sides(subjects[: end.start()] if end else subjects)
    at = subjects.lower().find(" and ")
    if at < 0:
        return ()
    end = _PREDICATE.search(subjects, at + 5)
    sides = _split_sides(subjects[: end.start()] if end else subjects)
    return tuple(m.group(1) if (m := _ROLE_OF.match(side)) else side for side in sides)


def _words(text: str) -> str:
    """`text` lower-cased as words between spaces, a possessive's "'s" dropped ("Hohenberg's" is Hohenberg)."""
    words = re.findall(r"[\w'’]+", text.lower())
    return " " + " ".join(re.sub(r"['’]s?$", "", w) for w in words) + " "


def _has_any(words: str, phrases: tuple[str, ...]) -> bool:
    return any(f" {p} " in words for p in phrases)


def read_question(query: str) -> Question:
    """The answer type `query` asks for, its relation, and a comparison's sides and order."""
    text = " ".join(query.split()).strip()
    yes_no = bool(_YES_NO_START.match(text))
    sides: tuple[str, ...] = ()
    if yes_no:
        sides = _yes_no_sides(text)
    elif match := _SIDE_LIST.search(text):
        sides = _split_sides(match.group(1))
        # A side that is a whole clause ("Where was X born, or ...") is no comparison: sides are names.
        if any(len(side.split()) > 12 for side in sides):
            sides = ()
    # What the question asks is read without the names it compares ("Die Mutter" is a film, not a death).
    asked = text
    for side in sides:
        asked = asked.replace(side, " ")
    words = _words(asked)
    relation = next((name for name, cues in _RELATIONS if _has_any(words, cues)), None)
    # "Was A or B born first?" is a comparison that names its answer, not a yes-or-no question.
    if yes_no and sides and " or " in f" {text.lower()} " and _has_any(words, _EARLIER + _LATER):
        yes_no = False
    order = None
    if yes_no and sides:
        order = "same"
    elif sides:
        order = "earlier" if _has_any(words, _EARLIER) else "later" if _has_any(words, _LATER) else None
        if order is None and _has_any(words, ("more", "most", "larger", "largest", "bigger", "higher", "longer")):
            order = "more"
        elif order is None and _has_any(words, ("fewer", "less", "smaller", "lower", "shorter")):
            order = "less"
    return Question(type=_answer_type(asked, words, yes_no, relation), relation=relation, sides=sides, order=order)


def _answer_type(text: str, words: str, yes_no: bool, relation: str | None) -> AnswerType:
    if yes_no:
        return AnswerType.YES_NO
    if _has_any(words, ("how many", "how much", "how old", "how long", "how far", "how tall", "what percentage", "what number")):
        return AnswerType.NUMBER
    if words.startswith(" when ") or _has_any(
        words, ("what year", "which year", "what date", "which date", "date of", "what day", "in what year", "what century")
    ):
        return AnswerType.DATE
    if words.startswith(" where ") or _has_any(
        words,
        (
            "place of",
            "which country",
            "what country",
            "which city",
            "what city",
            "which state",
            "what state",
            "nationality",
            "what region",
            "which region",
        ),
    ):
        return AnswerType.PLACE
    # Only a question's own wh-word: "the band who ..." and "the city where ..." ask for something else.
    if words.startswith((" who ", " whom ", " whose ")):
        return AnswerType.PERSON
    return AnswerType.OTHER


# A life's range in parentheses after a name: "(3 May 1950 – 12 June 2004)", "(1341–1413)".
LIFE_RANGE = re.compile(r"\([^()]*\d{3,4}[^()\d]*?\s*[–—-]\s*[^()]*\d{3,4}[^()]*\)")


def dates(sentence: str) -> list[str]:
    return [m.group(0) for m in DATE.finditer(sentence)]


def year(date: str) -> int | None:
    """The year a date names (negative before the common era), for comparing two."""
    match = re.search(r"\d{3,4}(?!.*\d{3,4})", date)
    if not match:
        return None
    value = int(match.group(0))
    return -value if re.search(r"\b(?:BC|BCE)\b", date) else value


def date_key(date: str) -> tuple[int, int, int] | None:
    """A date as (year, month, day), the parts it does not give as 0, so two can be ordered."""
    y = year(date)
    if y is None:
        return None
    months = _MONTHS.split("|")
    month = next((i + 1 for i, m in enumerate(months) if re.search(rf"\b{m[:3]}", date)), 0)
    day_match = re.search(r"\b(\d{1,2})(?:st|nd|rd|th)?\b(?!\d)", re.sub(r"\d{3,4}", "", date))
    return (y, month, int(day_match.group(1)) if day_match and month else 0)


def names(sentence: str) -> list[str]:
    """The capitalised names in `sentence`, a leading word that is only capitalised as the sentence's first dropped."""
    found = []
    for match in NAME.finditer(sentence):
        words = match.group(0).rstrip(".,'’").split()
        while words and words[0].lower() in _NOT_NAMES:
            words = words[1:]
        while words and words[-1].lower() in _NOT_NAMES:
            words = words[:-1]
        if words:
            found.append(" ".join(words))
    return found


def places(sentence: str) -> list[str]:
    """Places as prose introduces them ("in Glen Cove, New York"), then nationality adjectives ("an American actor")."""
    found = [m.group(1).rstrip(".,") for m in PLACE.finditer(sentence)]
    found = [p for p in found if p.split()[0].lower() not in _NOT_NAMES]
    return found + nationalities(sentence)


def nationalities(sentence: str) -> list[str]:
    return [m.group(1) for m in NATIONALITY.finditer(sentence) if m.group(1).lower() not in _NOT_NAMES]


def numbers(sentence: str) -> list[str]:
    return [m.group(0).strip() for m in NUMBER.finditer(sentence)]


def number_value(text: str) -> float | None:
    match = re.search(r"\d[\d,]*(?:\.\d+)?", text)
    if not match:
        return None
    value = float(match.group(0).replace(",", ""))
    for word, factor in (("billion", 1e9), ("million", 1e6), ("thousand", 1e3)):
        if word in text:
            value *= factor
    return value


def spans(sentence: str, question: Question, *, exclude: str = "") -> list[str]:
    """The spans of `sentence` of the type `question` asks for, in order; none that `exclude` (the question) names."""
    kind = question.type
    if kind == AnswerType.DATE:
        found = dates(sentence)
    elif kind == AnswerType.NUMBER:
        found = numbers(sentence)
    elif kind == AnswerType.PLACE:
        found = places(sentence)
        if question.relation == "nationality":
            # A nationality or a country: the adjective ("Norwegian") first, then each place's broadest part.
            adjectives = nationalities(sentence)
            found = adjectives + [p.split(",")[-1].strip() for p in found if p not in adjectives]
        elif question.relation in ("birth", "death"):
            found = [p for p in found if p not in nationalities(sentence)]  # born "in" a place, not "an American"
    elif kind == AnswerType.PERSON:
        # A person is named, not described: "French" alone is no one.
        found = [n for n in names(sentence) if not (len(n.split()) == 1 and _ADJECTIVE.match(n))]
    else:
        return []
    asked = _words(exclude)
    return [s for s in found if _words(s).strip() and _words(s) not in asked]


def relation_span(sentence: str, question: Question, *, exclude: str = "") -> str | None:
    """The span of `sentence` that answers `question`'s relation, where its form says which.

    Biographies write "(born 5 May 1950 in Glen Cove)", "(1341 – 24 May 1413)", "died in Paris": a
    death asks for the date or place after "died" or after the dash of a life's range, a birth for
    the one after "born" or before the dash.
    """
    candidates = spans(sentence, question, exclude=exclude)
    if not candidates:
        return None
    if question.type in (AnswerType.DATE, AnswerType.PLACE) and question.relation in ("birth", "death"):
        cue = r"\b(?:died|death|d\.)|[–—-]\s*" if question.relation == "death" else r"\b(?:born|birth|b\.)"
        for match in re.finditer(cue, sentence):
            after = [c for c in candidates if sentence.find(c, match.end()) >= 0]
            if after:
                return min(after, key=lambda c: sentence.find(c, match.end()))
        if question.relation == "death" and question.type == AnswerType.DATE:
            return candidates[-1] if len(candidates) > 1 else None
    return candidates[0]
