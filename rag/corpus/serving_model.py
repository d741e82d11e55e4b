"""Which embedding model a team is searched with, and the provider that embeds its queries.

Every ranking of one search (vector, keyword, graph) reads the chunks, postings and facts of this
one model. It is the configured model (RAG_EMBEDDING_MODEL), except for a team whose documents the
configured model does not cover yet: that team keeps its earlier model (rag.models.ServingModel)
until the backfill has built the new one's chunks beside it (rag.indexing.backfill).

The fallback model (RAG_EMBEDDING_FALLBACK_MODEL) embeds what the configured model failed on while it
is down, under its own model id (rag.indexing.fallback); search ranks those chunks with that model.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from django.conf import settings

from rag.models import ServingModel
from rag.providers.base import EmbeddingProvider
from rag.providers.embeddings import get_embedding_provider


@dataclass(frozen=True)
class SearchModel:
    """An embedding model as search needs it: its id, and how to embed a query for its chunks."""

    model_id: str
    provider: str
    dimension: int

    def embedder(self) -> EmbeddingProvider:
        return get_embedding_provider(kind=self.provider, model_id=self.model_id, dimension=self.dimension)


def configured_model() -> SearchModel:
    return SearchModel(settings.RAG_EMBEDDING_MODEL, settings.RAG_EMBEDDING_PROVIDER, settings.RAG_EMBEDDING_DIMENSION)


def fallback_model() -> SearchModel | None:
    """The model indexing falls back to when the configured one fails; None when the fallback is off."""
    if not settings.RAG_EMBEDDING_FALLBACK_MODEL:
        return None
    return SearchModel(
        settings.RAG_EMBEDDING_FALLBACK_MODEL, settings.RAG_EMBEDDING_FALLBACK_PROVIDER, settings.RAG_EMBEDDING_FALLBACK_DIMENSION
    )


def serving_model(team_id: uuid.UUID | None) -> SearchModel:
    """The model `team_id` is searched with (one primary-key read per search)."""
    configured = configured_model()
    if team_id is None:
        return configured
    row = ServingModel.objects.filter(team_id=team_id).values_list("model_id", "provider", "dimension").first()
    if row is None or row[0] == configured.model_id:
        # The configured model is reached as configured today (a new key or URL applies at once).
        return configured
    return SearchModel(*row)
