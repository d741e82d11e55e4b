"""The switch: when a team moves from the model it is searched with to the configured one.

A team is searched with its ServingModel (rag.corpus.serving_model). When RAG_EMBEDDING_MODEL names
a new model, the team stays on its model while the backfill (rag.indexing.backfill) builds the new
model's chunks beside the old ones, and edits are indexed for both. The team switches once the new
model covers it: every live document the old model has chunks of has the new model's chunks of
that version or a later one. Coverage is read from the status rows, so the switch is decided after
each indexing batch of the configured model (rag.indexing.pipeline.index_documents) and at every
reconciliation, by whichever process finishes the last document; the row's conditional update
makes it happen once.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import Count, Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from documents.models import Document
from rag.corpus.serving_model import SearchModel, configured_model
from rag.models import IndexState, IndexStatus, ServingModel

logger = logging.getLogger("rag.indexing")


@dataclass(frozen=True)
class Coverage:
    """How far the configured model has caught up with the documents a team's serving model covers."""

    model: str  # the configured model being built
    total: int  # documents the serving model has chunks of
    done: int  # of those, documents the configured model has chunks of, of that version or later
    failed: int  # of those not done, documents the configured model failed on


def record_first_model(team_ids: Iterable[uuid.UUID]) -> None:
    """A team indexed for the first time is searched with the configured model from then on (no-op for known teams)."""
    model = configured_model()
    ServingModel.objects.bulk_create(
        [
            ServingModel(team_id=team_id, model_id=model.model_id, provider=model.provider, dimension=model.dimension)
            for team_id in set(team_ids)
        ],
        ignore_conflicts=True,
    )


def teams_behind(team_ids: Iterable[uuid.UUID] | None = None) -> dict[uuid.UUID, SearchModel]:
    """Teams still searched with another model than the configured one, and that model."""
    rows = ServingModel.objects.exclude(model_id=configured_model().model_id)
    if team_ids is not None:
        rows = rows.filter(team_id__in=list(team_ids))
    return {
        team_id: SearchModel(model_id, provider, dimension)
        for team_id, model_id, provider, dimension in rows.values_list("team_id", "model_id", "provider", "dimension")
    }


def _to_cover(documents: QuerySet[Document], *, old: str, new: str) -> QuerySet[IndexStatus]:
    """The old model's status rows of these (live) documents, each marked `covered` when the new model has chunks as recent."""
    newer = IndexStatus.objects.filter(
        document_id=OuterRef("document_id"), model_id=new, indexed_version__gte=OuterRef("indexed_version")
    )
    return (
        IndexStatus.objects.filter(
            model_id=old, indexed_version__isnull=False, document__in=documents.filter(deleted_at__isnull=True)
        )
        .order_by()
        .annotate(covered=Exists(newer))
    )


def coverage(documents: QuerySet[Document], *, old: str) -> Coverage:
    """Coverage of `documents` (already narrowed to what the caller may count) by the configured model."""
    new = configured_model().model_id
    failed = IndexStatus.objects.filter(document_id=OuterRef("document_id"), model_id=new, state=IndexState.FAILED)
    counts = (
        _to_cover(documents, old=old, new=new)
        .annotate(new_failed=Exists(failed))
        .aggregate(
            total=Count("pk"),
            done=Count("pk", filter=Q(covered=True)),
            failed=Count("pk", filter=Q(covered=False, new_failed=True)),
        )
    )
    return Coverage(model=new, total=counts["total"], done=counts["done"], failed=counts["failed"])


def switch_covered_teams(*, team_ids: Iterable[uuid.UUID] | None = None, force: bool = False) -> list[uuid.UUID]:
    """Move every team (of `team_ids`) the configured model now covers onto it; the teams switched.

    `force` switches them whatever the coverage (documents the new model lacks drop out of search
    until indexed): for a new model that keeps failing on some documents.
    """
    new = configured_model()
    switched = []
    for team_id, old in teams_behind(team_ids).items():
        documents = Document.objects.filter(team_id=team_id)
        if not force and _to_cover(documents, old=old.model_id, new=new.model_id).filter(covered=False).exists():  # type: ignore[misc]
            continue
        # Conditional: of two processes finishing the last documents at once, one switches.
        moved = ServingModel.objects.filter(team_id=team_id, model_id=old.model_id).update(
            model_id=new.model_id, provider=new.provider, dimension=new.dimension, since=timezone.now()
        )
        if moved:
            switched.append(team_id)
            logger.info("team %s is now searched with %s (was %s)", team_id, new.model_id, old.model_id)
    return switched


def serving_models_of(document_ids: Iterable) -> dict[SearchModel, list[uuid.UUID]]:
    """For documents of teams still searched with an earlier model: that model and its documents (empty normally)."""
    ids = list(document_ids)
    behind = teams_behind(Document.objects.filter(pk__in=ids).values_list("team_id", flat=True).distinct())
    if not behind:
        return {}
    by_model: dict[SearchModel, list[uuid.UUID]] = {}
    for pk, team_id in Document.objects.filter(pk__in=ids, team_id__in=list(behind)).values_list("pk", "team_id"):
        by_model.setdefault(behind[team_id], []).append(pk)
    return by_model


def documents_lacking_configured_model() -> QuerySet[Document]:
    """Live documents of teams behind whose current version the configured model has no chunks of."""
    model_id = configured_model().model_id
    indexed = IndexStatus.objects.filter(
        document_id=OuterRef("pk"), model_id=model_id, state=IndexState.INDEXED, indexed_version=OuterRef("version")
    )
    behind = ServingModel.objects.exclude(model_id=model_id).values("team_id")
    return Document.objects.filter(team_id__in=behind, deleted_at__isnull=True).exclude(Exists(indexed))
