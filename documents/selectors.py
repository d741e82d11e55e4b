"""Reads that take the viewer. Every path to a document starts from `visible_to`."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from django.db import connection
from django.db.models import Case, Count, Q, QuerySet, Value, When
from django.db.models.expressions import CombinedExpression
from django.db.models.functions import Length, Replace, Right, Substr

from config.errors import NotFound
from documents.code import CODE_HEAD, CODE_TAIL, is_code_text
from documents.models import (
    Collection,
    CollectionMembership,
    CollectionQuerySet,
    Document,
    DocumentQuerySet,
    DocumentVersion,
    ImportFile,
    ImportJob,
    Source,
)
from permissions.models import User
from permissions.policy import can_manage_collections, can_write_collection


def document_get(*, user: User, document_id: uuid.UUID, include_archived: bool = True) -> Document:
    document = (
        Document.objects.visible_to(user, include_archived=include_archived)
        .select_related("collection")
        .filter(pk=document_id)
        .first()
    )
    if document is None:
        raise NotFound("Document not found.")
    return document


def document_list(
    *, user: User, collection_id: uuid.UUID | None = None, archived: bool = False, tags: Sequence[str] = ()
) -> DocumentQuerySet:
    """The visible documents, newest change first; with `tags`, those carrying every one of them (normalised tags)."""
    qs = Document.objects.visible_to(user, include_archived=archived)
    if archived:
        qs = qs.filter(archived_at__isnull=False)
    if collection_id is not None:
        collection_get(user=user, collection_id=collection_id)
        qs = qs.filter(collection_id=collection_id)
    if tags:
        qs = qs.filter(tags__contains=list(tags))
    return qs.order_by("-updated_at", "id")


@dataclass(frozen=True)
class TagCount:
    name: str
    documents: int  # visible (not archived) documents carrying the tag


def tag_list(
    *, user: User, collection_id: uuid.UUID | None = None, query: str = "", limit: int = 50, offset: int = 0
) -> tuple[list[TagCount], int]:
    """The tags of the documents `user` can see (optionally of one collection, containing `query`), most used first,
    each with its count of those documents; and how many such tags there are. Invisible documents count nowhere."""
    documents = Document.objects.visible_to(user)
    if collection_id is not None:
        collection_get(user=user, collection_id=collection_id)
        documents = documents.filter(collection_id=collection_id)
    visible, params = documents.order_by().values("tags").query.sql_with_params()
    query = " ".join(query.split()).lower()  # as tags are written (documents.tags)
    pattern = "%" + query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    with connection.cursor() as cursor:
        cursor.execute(
            f"""SELECT t.tag, count(*) AS n, count(*) OVER () AS total
                FROM ({visible}) d, unnest(d.tags) AS t(tag)
                WHERE t.tag LIKE %s
                GROUP BY t.tag ORDER BY n DESC, t.tag LIMIT %s OFFSET %s""",
            [*params, pattern, limit, offset],
        )
        rows = cursor.fetchall()
    if rows:
        return [TagCount(name=tag, documents=n) for tag, n, _ in rows], rows[0][2]
    if offset == 0:
        return [], 0
    # A page past the end holds no row to read the total from.
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(DISTINCT t.tag) FROM ({visible}) d, unnest(d.tags) AS t(tag) WHERE t.tag LIKE %s", [*params, pattern]
        )
        return [], cursor.fetchone()[0]


def collection_get(*, user: User, collection_id: uuid.UUID) -> Collection:
    collection = Collection.objects.visible_to(user).filter(pk=collection_id).first()
    if collection is None:
        raise NotFound("Collection not found.")
    return collection


def collection_get_to_change(*, user: User, collection_id: uuid.UUID) -> Collection:
    """A collection the user may read, or any of their team's when they are a team admin (who may add to and share
    every collection, `none` ones included, without reading its documents); NotFound otherwise."""
    if can_manage_collections(user):
        collections = Collection.objects.of_team(user)
    else:
        collections = Collection.objects.visible_to(user)
    collection = collections.filter(pk=collection_id).first()
    if collection is None:
        raise NotFound("Collection not found.")
    return collection


def collection_list(*, user: User) -> CollectionQuerySet:
    return Collection.objects.visible_to(user).order_by("name", "id")


def collection_document_counts(*, user: User) -> dict[uuid.UUID, int]:
    """How many documents `user` may read (not archived) in each collection holding any: the collections' sidebar."""
    rows = Document.objects.visible_to(user).order_by().values_list("collection_id").annotate(n=Count("id"))
    return dict(rows)


def team_collection_list(*, user: User) -> CollectionQuerySet:
    """Every collection of a team admin's team, `none` ones they cannot read included (what they manage), by name,
    each with `grant_count`, how many groups and people it is shared with."""
    if not can_manage_collections(user):
        return Collection.objects.none()
    return Collection.objects.of_team(user).annotate(grant_count=Count("memberships")).order_by("name", "id")


@dataclass(frozen=True)
class Grant:
    """A membership of a collection: a person's or a group's role in it."""

    kind: str  # "user" or "group"
    id: uuid.UUID
    name: str
    role: str


def collection_grants(*, collection: Collection) -> list[Grant]:
    """Who the collection is shared with beyond its default access: groups first, then people, by name."""
    memberships = CollectionMembership.objects.filter(collection=collection).select_related("user", "group")
    groups = [Grant("group", m.group.pk, m.group.name, m.role) for m in memberships if m.group is not None]
    people = [Grant("user", m.user.pk, m.user.get_username(), m.role) for m in memberships if m.user is not None]
    return sorted(groups, key=lambda g: g.name.lower()) + sorted(people, key=lambda g: g.name.lower())


def writable_collections(*, user: User) -> list[Collection]:
    """The collections `user` may add documents to (the choice on the /import page)."""
    return [c for c in collection_list(user=user) if can_write_collection(user, c)]


def document_source(*, user: User, document_id: uuid.UUID, version: int | None = None) -> Source | None:
    """The file a document visible to `user` was imported from, at `version` or its latest; None when it was not imported."""
    return source_of(document=document_get(user=user, document_id=document_id), version=version)


def source_of(*, document: Document, version: int | None = None) -> Source | None:
    """The source of a document the caller already loaded through `visible_to` (`document_get`)."""
    sources = Source.objects.filter(document=document)
    if version is not None:
        sources = sources.filter(document_version=version)
    return sources.order_by("-document_version").first()


@dataclass(frozen=True)
class Place:
    """Where a cited offset sits in its document version: the file it was imported from, its PDF pages, its line."""

    path: str | None  # the path of the file the document was imported from; None for one written in Cairn
    page_map: tuple[int, ...]  # where each PDF page starts in the version's text; empty for other formats or versions
    line: int  # the 1-based line of the text holding the offset


def _newlines_before(offset: int) -> CombinedExpression:
    head = Substr("text", 1, offset)
    return Length(head) - Length(Replace(head, Value("\n"), Value("")))


def citation_places(*, citations: Iterable[tuple[uuid.UUID, int, int]]) -> dict[tuple[uuid.UUID, int, int], Place]:
    """The place of each (document id, version, offset): its document's source path, its version's page map, its line
    (a code document's line is the file's: documents.code).

    Callers pass passages of documents they already loaded through `visible_to`. Lines are counted in
    SQL, so no text leaves the database: from the document at its current version, else from its
    history (a version's entries share one text).
    """
    keys = list(dict.fromkeys(citations))
    if not keys:
        return {}
    rows = Source.objects.filter(document_id__in={d for d, _, _ in keys}).order_by("document_version")
    sources = {(s.document_id, s.document_version): s for s in rows.only("document_id", "document_version", "path", "page_map")}
    # A document edited after its import still came from that file: the newest import names it.
    paths = {document_id: source.path for (document_id, _), source in sources.items()}
    lines: dict[tuple[uuid.UUID, int, int], int] = {}
    for model, id_field in ((Document, "pk"), (DocumentVersion, "document_id")):
        wanted = [k for k in keys if k not in lines]
        if not wanted:
            break
        counts = {
            f"n{i}": Case(When(Q(**{id_field: d}, version=v), then=_newlines_before(offset)), default=Value(None))
            for i, (d, v, offset) in enumerate(wanted)
        }
        query = Q()
        for d, v, _ in wanted:
            query |= Q(**{id_field: d}, version=v)
        ends = {"head": Substr("text", 1, CODE_HEAD), "tail": Right("text", CODE_TAIL)}
        for row in model.objects.filter(query).values(id_field, "version", **ends, **counts):
            # A code document's first line is its fence: the file's line N is the text's line N + 1.
            shift = 1 if is_code_text(row["head"], row["tail"]) else 0
            for i, key in enumerate(wanted):
                if (row[id_field], row["version"]) == key[:2] and row[f"n{i}"] is not None:
                    lines[key] = max(1, row[f"n{i}"] + 1 - shift)
    places = {}
    for key in keys:
        source = sources.get(key[:2])
        places[key] = Place(
            path=paths.get(key[0]),
            page_map=tuple(source.page_map) if source is not None else (),
            line=lines.get(key, 1),
        )
    return places


def document_versions(*, document: Document) -> QuerySet[DocumentVersion]:
    """The history of a document the caller loaded through `visible_to` (`document_get`), newest first, without the texts."""
    return (
        DocumentVersion.objects.filter(document=document)
        .select_related("created_by")
        .defer("text")
        .order_by("-version", "-created_at", "-id")
    )


def document_version_get(*, document: Document, entry_id: uuid.UUID) -> tuple[DocumentVersion, DocumentVersion | None]:
    """One entry of the history of a document the caller may read, and the entry before it (None for the first)."""
    entries = DocumentVersion.objects.filter(document=document).select_related("created_by")
    entry = entries.filter(pk=entry_id).first()
    if entry is None:
        raise NotFound("Version not found.")
    earlier = Q(version__lt=entry.version) | Q(version=entry.version, created_at__lt=entry.created_at)
    previous = entries.filter(earlier).order_by("-version", "-created_at", "-id").first()
    return entry, previous


def document_version_at(*, user: User, document_id: uuid.UUID, version: int) -> DocumentVersion:
    """The document's title and text at `version` (its last title there), for whoever may read the document."""
    document = document_get(user=user, document_id=document_id)
    entry = DocumentVersion.objects.filter(document=document, version=version).order_by("-created_at", "-id").first()
    if entry is None:
        raise NotFound("Version not found.")
    return entry


def import_job_get(*, user: User, job_id: uuid.UUID) -> ImportJob:
    job = ImportJob.objects.visible_to(user).filter(pk=job_id).first()
    if job is None:
        raise NotFound("Job not found.")
    return job


def import_job_list(*, user: User) -> QuerySet[ImportJob]:
    return ImportJob.objects.visible_to(user).order_by("-created_at", "id")


def import_job_files(*, user: User, job: ImportJob) -> list[ImportFile]:
    """The job's file outcomes; a document link only where `user` may read the document."""
    files = list(job.files.order_by("id"))
    linked = {f.document_id for f in files if f.document_id is not None}
    readable = set(Document.objects.visible_to(user, include_archived=True).filter(pk__in=linked).values_list("pk", flat=True))
    titles = dict(Document.objects.filter(pk__in=readable).values_list("pk", "title"))
    for f in files:
        if f.document_id not in readable:
            f.document_id = None
        # ignore: ImportFileOutput renders the document's title beside the outcome; no field of the model.
        f.title = titles.get(f.document_id, "") if f.document_id else ""  # type: ignore[attr-defined]
    return files
