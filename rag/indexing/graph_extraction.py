"""The knowledge graph's facts, read from a document's chunks by the offline `rules` extractor.

Written in the transaction that swaps a document's chunks: every mention and relation belongs to
the chunk it was read from (and goes with it), so a fact is visible exactly when its chunk is.
Nothing is merged across documents; entities are only names, shared within a team.

What the rules read from a chunk of document D:
- D's title: a `subject` mention in each of D's chunks (the chunk is about D);
- other documents' titles named in the text (an Aho-Corasick automaton over the team's titles),
  links to `/doc/<id>` and `[[Title]]` wiki links: mentions, and D -MENTIONS/LINKS_TO-> title;
- proper names, backticked code identifiers and the headings above the chunk: mentions, and
  D -MENTIONS-> them;
- the symbols a code chunk defines (rag.indexing.code_chunking: `main`, `Invoice.total`): mentions of
  kind `symbol`, and D -DEFINES-> them;
- entities that occur in the same chunk: CO_OCCURS relations between them (a bounded number).

A mention or relation end that exists only because the words are some document's title (a title
match, a `/doc/<id>` link) is flagged `title_only`: it counts only for viewers who can read a
document with that title (rag.retrieval.graph_policy).
"""

from __future__ import annotations

import itertools
import re
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

import ahocorasick
from django.db import connection
from django.db.models import Count, Max, Min

from documents.models import Document
from rag.corpus.names import entity_key, is_meaningful_key, normalised_text, short_title
from rag.corpus.text_search import TEXT_SEARCH_CONFIG
from rag.indexing.sentence_facts import StatementReader, surname_aliases
from rag.models import Chunk, Entity, EntityKind, Mention, Relation

MAX_NAME_LENGTH = 500
# Bounds that keep one chunk from writing an unbounded number of facts (a page of links, a hub).
MAX_ENTITIES_PER_CHUNK = 64
MAX_COOCCURRING = 8
TITLE_COOCCURRING = 4
# A title named in more chunks than this is linked to the first ones only when a document appears later.
MAX_LINK_CANDIDATES = 2000

PREDICATE_MENTIONS = "MENTIONS"
PREDICATE_LINKS_TO = "LINKS_TO"
PREDICATE_CO_OCCURS = "CO_OCCURS"
PREDICATE_DEFINES = "DEFINES"
# What a co-occurrence, or a relation a sentence states in its own words, weighs: half a mention.
PAIR_WEIGHT = 0.5

_DOC_LINK = re.compile(r"\(/doc/([0-9a-fA-F-]{36})[^)]*\)")
_WIKI_LINK = re.compile(r"\[\[([^\[\]\n|]{1,200})(?:\|[^\[\]\n]*)?\]\]")
_CODE = re.compile(r"`([A-Za-z_][\w.:/-]{1,79})`")
# Two or more capitalised words on one line, optionally joined by a few lower-case particles ("Duke of York").
_PROPER_NAME = re.compile(
    r"\b[A-Z][\w'’-]*[a-z0-9][\w'’-]*(?:[ \t]+(?:(?:of|de|da|von|van|der|del|la|le|du|the|and)[ \t]+)?[A-Z][\w'’-]*){1,5}"
)


# Capitalised only because a sentence or a title-cased heading starts with them: not part of a name
# ("In Arabidopsis", "However Smith", "Is Required For"). "The" stays: "The Hague", "The Organization".
_NOT_A_NAME_START = frozenset(
    """a an and are as at be by for from has have he her his in is it its of on or she that their they this to was were
    which who with we our however here these those there although after before during since when while both all each
    such many most some no not but if because thus therefore using among between within without upon under over via
    despite unlike like following given recent further moreover furthermore additionally finally overall then also""".split()
)


def title_cased_heading(line: str) -> bool:
    """A markdown heading capitalised as titles are ("# Risk Of Diabetes By The Age Of 14 Years"): its capitals
    say nothing about names. Every word of four letters or more capitalised, save the prepositions title case
    leaves lower; at least four of them. (A sentence naming several people still has a verb in lower case.)"""
    if not line.lstrip().startswith("#"):
        return False
    words = [w for w in re.findall(r"[^\W\d_][\w'’-]*", line) if len(w) >= 4 and w.casefold() not in _TITLE_LOWER]
    return len(words) >= 4 and all(word[0].isupper() for word in words)


_TITLE_LOWER = frozenset("with from into onto upon over than that without within between among through".split())


def proper_name(text: str) -> str | None:
    """A proper-name match without the sentence's opening words; None when fewer than two words are left."""
    words = text.split()
    while words and words[0].casefold() in _NOT_A_NAME_START:
        words.pop(0)
    return " ".join(words) if len(words) >= 2 else None


@dataclass
class ChunkFacts:
    """What the rules read from one chunk: entity key -> (name, kind, count), links by key, and the keys
    the chunk's own words make a name (`named`, with the kind those words make it); the others are there
    only because they are a title. `mentions` holds the entity's kind (a title outranks a name); a
    mention records the kind its chunk's own words give (`mention_kind`), which no title changes."""

    mentions: dict[str, tuple[str, str, int]] = field(default_factory=dict)
    links: set[str] = field(default_factory=set)
    named: dict[str, str] = field(default_factory=dict)
    # How often each key was found as a title (a title match or a `/doc/<id>` link), named or not.
    title_counts: Counter[str] = field(default_factory=Counter)
    # Keys of the symbols the chunk defines (a code chunk): the document DEFINES them.
    defines: set[str] = field(default_factory=set)
    # (source key, predicate, target key) its sentences state (rag.indexing.sentence_facts).
    statements: list[tuple[str, str, str]] = field(default_factory=list)

    def add(self, name: str, kind: str, count: int = 1, *, named: bool = True) -> None:
        key = entity_key(name)
        if not is_meaningful_key(key):
            return
        if not named:
            self.title_counts[key] += count
        if key in self.mentions:
            old_name, old_kind, old_count = self.mentions[key]
            if named and key not in self.named:
                # Seen as a title first: the chunk's own words name it, and they alone give its spelling and count.
                self.named[key] = kind
                self.mentions[key] = (name[:MAX_NAME_LENGTH], EntityKind.DOCUMENT, count)
            elif named or key not in self.named:
                # A title outranks a name or topic spelled the same way.
                self.mentions[key] = (old_name, EntityKind.DOCUMENT if not named else old_kind, old_count + count)
            else:
                self.mentions[key] = (old_name, EntityKind.DOCUMENT, old_count)  # a name's count never depends on titles
            return
        # Names and titles are bounded apart, so which titles exist (some private) never decides
        # which of the chunk's names are kept.
        if named and len(self.named) < MAX_ENTITIES_PER_CHUNK:
            self.named[key] = kind
        elif named or len(self.mentions) - len(self.named) >= MAX_ENTITIES_PER_CHUNK:
            return
        self.mentions[key] = (name[:MAX_NAME_LENGTH], kind, count)

    def title_only(self, key: str) -> bool:
        return key not in self.named

    def mention_kind(self, key: str) -> str:
        """The kind this chunk's own words make the key a name of; `document` when only a title made it a mention."""
        return self.named.get(key, EntityKind.DOCUMENT)

    def cooccurring(self) -> list[tuple[str, str]]:
        """CO_OCCURS pairs, bounded: among the most frequent names, and each title-only key with the top
        few names. Never between two title-only keys, so one title's presence changes no other pair."""
        by_count = sorted(self.mentions.items(), key=lambda item: (-item[1][2], item[0]))
        names = [key for key, _ in by_count if key in self.named][:MAX_COOCCURRING]
        titles = [key for key, _ in by_count if key not in self.named]
        return [*itertools.combinations(names, 2), *((t, n) for t in titles for n in names[:TITLE_COOCCURRING])]


class TitleMatcher:
    """Finds the team's document titles in text, on word boundaries, by their normalised keys."""

    def __init__(self, titles: dict[str, str]) -> None:
        self.titles = titles  # key -> title
        self._automaton = ahocorasick.Automaton()
        for key in titles:
            self._automaton.add_word(f" {key} ", key)
        if titles:
            self._automaton.make_automaton()

    def find(self, text: str) -> Counter[str]:
        if not self.titles:
            return Counter()
        return Counter(key for _, key in self._automaton.iter(f" {normalised_text(text)} "))


_matchers: dict[uuid.UUID, tuple[tuple, TitleMatcher]] = {}


def title_matcher(team_id: uuid.UUID) -> TitleMatcher:
    """The team's titles as an automaton, rebuilt only when the team's documents changed.

    A worker indexes one document per task; reading every title of a large team for each would
    make indexing cost grow with the team. Any create, rename or delete changes the state key.
    """
    live = Document.objects.filter(team_id=team_id, deleted_at__isnull=True)
    state = tuple(live.aggregate(n=Count("id"), changed=Max("updated_at")).values())
    cached = _matchers.get(team_id)
    if cached is not None and cached[0] == state:
        return cached[1]
    titles: dict[str, str] = {}
    for title in live.values_list("title", flat=True):
        key = entity_key(title)
        if is_meaningful_key(key):
            titles.setdefault(key, title)
    matcher = TitleMatcher(titles)
    _matchers[team_id] = (state, matcher)
    return matcher


@dataclass(frozen=True)
class TeamGraph:
    """What indexing a batch needs to know of a team's graph, read once per batch."""

    matcher: TitleMatcher
    # When the team's oldest chunk of the model was written: a document created after it may be
    # named by chunks that could not know its title yet (None: the team has no chunks).
    oldest_chunk: datetime | None


def team_graph(team_id: uuid.UUID, model_id: str) -> TeamGraph:
    oldest = Chunk.objects.filter(team_id=team_id, model_id=model_id).aggregate(oldest=Min("created_at"))["oldest"]
    return TeamGraph(matcher=title_matcher(team_id), oldest_chunk=oldest)


def read_chunk(
    text: str,
    heading_path: list[str],
    *,
    own_key: str,
    matcher: TitleMatcher,
    linked_titles: dict[str, str],
    symbols: list[str] | None = None,
    own_title: str = "",
) -> ChunkFacts:
    """The rules extractor on one chunk's text (pure: no database). `own_title`, the document's title (whose
    key is `own_key`), tells the sentences that name the document by a shorter form: the short form of a
    qualified title (rag.corpus.names.short_title), a person's last name."""
    facts = ChunkFacts()
    # Symbols first: a chunk's own definitions are what it is about, and are kept whatever else it names.
    for symbol in symbols or []:
        if entity_key(symbol) != own_key:
            facts.add(symbol, EntityKind.SYMBOL)
            facts.defines.add(entity_key(symbol))
    for key, count in matcher.find(text).items():
        if key != own_key:
            facts.add(matcher.titles[key], EntityKind.DOCUMENT, count, named=False)
    for match in _DOC_LINK.finditer(text):
        title = linked_titles.get(match.group(1).lower())
        if title and entity_key(title) != own_key:
            facts.add(title, EntityKind.DOCUMENT, named=False)
            facts.links.add(entity_key(title))
    # A wiki link names its target in the chunk's own words: a name, whether or not a title too (the title
    # automaton above has found it then, and made the entity a document).
    for match in _WIKI_LINK.finditer(text):
        name = match.group(1).strip()
        if entity_key(name) != own_key:
            facts.add(name, EntityKind.NAME)
            facts.links.add(entity_key(name))
    for line in text.splitlines():
        if title_cased_heading(line):
            continue  # a title-cased heading or title: it is a topic (below) or a title, not a run of names
        for match in _PROPER_NAME.finditer(line):
            name = proper_name(match.group(0))
            if name and entity_key(name) != own_key:
                facts.add(name, EntityKind.NAME)
    for match in _CODE.finditer(text):
        facts.add(match.group(1), EntityKind.CODE)
    for heading in heading_path:
        heading = heading.lstrip("#").strip()
        if entity_key(heading) != own_key:
            facts.add(heading, EntityKind.TOPIC)
    # A person named in full, then by their last name alone: the same entity, mentioned that much more.
    names = [facts.mentions[key][0] for key, kind in facts.named.items() if kind == EntityKind.NAME]
    aliases = surname_aliases(text, [*names, own_title] if own_title else names)
    for key, count in aliases.values():
        if key in facts.mentions:
            facts.add(facts.mentions[key][0], EntityKind.NAME, count)
    facts.statements = _statements(text, facts, aliases, own_key, own_title)
    return facts


def _statements(
    text: str, facts: ChunkFacts, aliases: dict[str, tuple[str, int]], own_key: str, own_title: str
) -> list[tuple[str, str, str]]:
    """The relations the chunk's sentences state between its names, then those each title-only key takes part in,
    read with the names and that one title: which other titles exist (some private) changes no statement."""
    forms = {key: key for key in facts.named} | {alias: key for alias, (key, _) in aliases.items()}
    if own_key:
        forms[own_key] = own_key
    short = short_title(own_title) if own_title else None
    reader = StatementReader(text, forms, own_key or None, entity_key(short) if short else None)
    found = reader.statements()
    for title in facts.mentions.keys() - facts.named.keys():
        found += reader.statements(extra=title)
    return found


def entities_by_key(team_id: uuid.UUID, wanted: dict[str, tuple[str, str]]) -> dict[str, uuid.UUID]:
    """Entity ids for these keys (key -> (name, kind)), created when missing; a title upgrades a name's kind."""
    if not wanted:
        return {}
    Entity.objects.bulk_create(
        [Entity(team_id=team_id, key=key, name=name, kind=kind) for key, (name, kind) in wanted.items()],
        ignore_conflicts=True,
    )
    titles = [key for key, (_, kind) in wanted.items() if kind == EntityKind.DOCUMENT]
    if titles:
        Entity.objects.filter(team_id=team_id, key__in=titles).exclude(kind=EntityKind.DOCUMENT).update(kind=EntityKind.DOCUMENT)
    return dict(Entity.objects.filter(team_id=team_id, key__in=list(wanted)).values_list("key", "id"))


def write_document_facts(*, document: Document, chunks: list[Chunk], matcher: TitleMatcher | None = None) -> None:
    """Read the graph facts of a document's freshly written chunks (call inside the swap's transaction)."""
    if not chunks:
        return
    matcher = matcher or title_matcher(document.team_id)
    own_key = entity_key(document.title)
    own_name = document.title if is_meaningful_key(own_key) else ""
    ids = {m.group(1).lower() for c in chunks for m in _DOC_LINK.finditer(c.chunk_text)}
    linked_titles = {
        str(pk): title
        for pk, title in Document.objects.filter(
            team_id=document.team_id, deleted_at__isnull=True, pk__in=_uuids(ids)
        ).values_list("pk", "title")
    }
    per_chunk = [
        read_chunk(
            c.chunk_text,
            c.metadata.get("heading_path", []),
            own_key=own_key,
            matcher=matcher,
            linked_titles=linked_titles,
            symbols=c.metadata.get("symbols"),
            own_title=own_name,
        )
        for c in chunks
    ]
    wanted = {key: (name, kind) for facts in per_chunk for key, (name, kind, _) in facts.mentions.items()}
    if own_name:
        wanted[own_key] = (own_name, EntityKind.DOCUMENT)
    entity = entities_by_key(document.team_id, wanted)
    mentions: list[Mention] = []
    relations: list[Relation] = []
    for chunk, facts in zip(chunks, per_chunk, strict=True):
        common = {
            "chunk_id": chunk.pk,
            "document_id": document.pk,
            "document_version": chunk.document_version,
            "collection_id": document.collection_id,
            "model_id": chunk.model_id,
        }
        if own_name:
            mentions.append(
                Mention(entity_id=entity[own_key], name=own_name, kind=EntityKind.DOCUMENT, count=1, subject=True, **common)
            )
        for key, (name, _, count) in facts.mentions.items():
            title_only = facts.title_only(key)
            mentions.append(
                Mention(
                    entity_id=entity[key],
                    name=name,
                    kind=facts.mention_kind(key),
                    count=min(count, 32767),
                    title_only=title_only,
                    **common,
                )
            )
            if own_name:
                predicate = (
                    PREDICATE_DEFINES
                    if key in facts.defines
                    else PREDICATE_LINKS_TO
                    if key in facts.links
                    else PREDICATE_MENTIONS
                )
                weight = float(min(count, 5)) + (1.0 if key in facts.links or key in facts.defines else 0.0)
                relations.append(
                    Relation(
                        source_id=entity[own_key],
                        target_id=entity[key],
                        predicate=predicate,
                        weight=weight,
                        target_title_only=title_only,
                        **common,
                    )
                )
                if not title_only and facts.title_counts[key]:
                    # A name that is also a title is stronger evidence, for those who may know it is a title.
                    relations.append(
                        Relation(
                            source_id=entity[own_key],
                            target_id=entity[key],
                            predicate=predicate,
                            weight=float(min(facts.title_counts[key], 5)),
                            target_title_only=True,
                            **common,
                        )
                    )
        # Co-occurrence among the chunk's most frequent entities only (a list of 64 names would be 4,000 edges), and
        # what a sentence says relates two names, in its own words ("directed by"), as strong as a co-occurrence,
        # which it also is. The document's own key is a statement's subject, never title-only.
        pairs = [*((a, PREDICATE_CO_OCCURS, b) for a, b in facts.cooccurring()), *facts.statements]
        for source, predicate, target in pairs:
            if source not in entity or target not in entity:
                continue
            relations.append(
                Relation(
                    source_id=entity[source],
                    target_id=entity[target],
                    predicate=predicate,
                    weight=PAIR_WEIGHT,
                    confidence=PAIR_WEIGHT,
                    source_title_only=source != own_key and facts.title_only(source),
                    target_title_only=target != own_key and facts.title_only(target),
                    **common,
                )
            )
    Mention.objects.bulk_create(mentions, ignore_conflicts=True)
    Relation.objects.bulk_create(relations)


def link_title_mentions(*, document: Document, model_id: str, chunks_before=None) -> int:
    """Link chunks indexed earlier that name this document's title (a document added or renamed later).

    Candidates come from the keyword postings (chunks holding every lexeme of the title), then the
    title is confirmed in the text; nothing is re-embedded. Returns how many chunks were linked.
    """
    key = entity_key(document.title)
    if not is_meaningful_key(key):
        return 0
    created_before = chunks_before or document.updated_at
    with connection.cursor() as cursor:
        cursor.execute(
            """WITH lex AS (SELECT array_agg(lexeme) AS l, count(*) AS n FROM unnest(to_tsvector(%s::regconfig, %s)))
               SELECT e.id, e.chunk_text, e.document_id, e.document_version, d.collection_id
               FROM (SELECT k.chunk_id FROM keyword_postings k, lex
                     WHERE k.model_id = %s AND k.lexeme = ANY(lex.l) AND k.document_id <> %s
                     GROUP BY k.chunk_id HAVING count(*) = max(lex.n)) c
               JOIN document_embeddings e ON e.id = c.chunk_id
               JOIN documents_document d ON d.id = e.document_id
               WHERE e.team_id = %s AND e.created_at < %s
               LIMIT %s""",
            [TEXT_SEARCH_CONFIG, document.title, model_id, document.pk, document.team_id, created_before, MAX_LINK_CANDIDATES],
        )
        candidates = [row for row in cursor.fetchall() if f" {key} " in f" {normalised_text(row[1])} "]
    if not candidates:
        return 0
    target = entities_by_key(document.team_id, {key: (document.title, EntityKind.DOCUMENT)})[key]
    subjects = dict(
        Mention.objects.filter(chunk_id__in=[c[0] for c in candidates], subject=True).values_list("chunk_id", "entity_id")
    )
    Mention.objects.bulk_create(
        [
            Mention(
                chunk_id=c,
                entity_id=target,
                document_id=d,
                document_version=v,
                collection_id=collection,
                model_id=model_id,
                name=document.title,
                kind=EntityKind.DOCUMENT,
                title_only=True,
            )
            for c, _, d, v, collection in candidates
        ],
        ignore_conflicts=True,
    )
    Relation.objects.bulk_create(
        [
            Relation(
                chunk_id=c,
                source_id=subjects[c],
                target_id=target,
                predicate=PREDICATE_MENTIONS,
                document_id=d,
                document_version=v,
                collection_id=collection,
                model_id=model_id,
                target_title_only=True,
            )
            for c, _, d, v, collection in candidates
            if c in subjects and subjects[c] != target
        ]
    )
    return len(candidates)


def rename_document_entity(*, document: Document, model_id: str) -> None:
    """A title change: the document's chunks become the subject of the new title, and earlier chunks naming it are linked."""
    chunks = list(Chunk.objects.filter(document=document, model_id=model_id, document_version=document.version))
    if not chunks:
        return
    key = entity_key(document.title)
    Mention.objects.filter(chunk_id__in=[c.pk for c in chunks], subject=True).delete()
    Relation.objects.filter(chunk_id__in=[c.pk for c in chunks]).delete()
    Mention.objects.filter(chunk_id__in=[c.pk for c in chunks]).delete()
    write_document_facts(document=document, chunks=chunks)
    if is_meaningful_key(key):
        link_title_mentions(document=document, model_id=model_id)


def delete_orphan_entities() -> int:
    """Entities no mention refers to any more (their chunks are gone)."""
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM graph_entities e WHERE NOT EXISTS (SELECT 1 FROM graph_mentions m WHERE m.entity_id = e.id)")
        return cursor.rowcount


def _uuids(values: set[str]) -> list[uuid.UUID]:
    out = []
    for value in values:
        try:
            out.append(uuid.UUID(value))
        except ValueError:
            continue
    return out
