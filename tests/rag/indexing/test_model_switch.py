"""Changing the embedding model: teams keep being searched with the model they have until the new one covers them.

In-process (eager tasks). The fake provider stands for both models; they differ by id and
dimension, so a query embedded for the wrong model could not even be compared with the chunks.
The same story with a real Celery worker is in test_worker.py.
"""

from __future__ import annotations

import pytest
from django.core.management import call_command

from documents.models import Document
from rag.corpus import vector_index
from rag.corpus.vector_index import ensure_vector_index, vector_index_name
from rag.indexing.model_switch import switch_covered_teams
from rag.indexing.pipeline import index_documents
from rag.indexing.reconcile import reconcile, stuck
from rag.models import Chunk, ChunkSignBits, IndexJob, IndexState, IndexStatus, JobState, KeywordPosting, Mention, ServingModel
from rag.providers.embeddings import reset_provider_cache
from rag.retrieval.search import search
from rag.tasks import start_backfill
from tests.factories import DocumentFactory

OLD, NEW = "fake-embedding", "fake-embedding-v2"
OLD_DIMENSION, NEW_DIMENSION = 384, 256

TEXTS = [
    "# Owls\n\nOwls hunt mice at night in the orchard.",
    "# Bees\n\nBees pollinate apple blossoms in spring.",
    "# Foxes\n\nFoxes dig dens under the hedges.",
]


@pytest.fixture
def configure(db, settings):
    def use(model_id: str, dimension: int) -> None:
        settings.RAG_EMBEDDING_MODEL = model_id
        settings.RAG_EMBEDDING_DIMENSION = dimension
        reset_provider_cache()

    # DDL must come before the test transaction's first write (deferred FK checks pend); an index
    # an earlier test created went with its transaction, whatever the module's memo says.
    vector_index._ensured.clear()
    ensure_vector_index(OLD, OLD_DIMENSION)
    ensure_vector_index(NEW, NEW_DIMENSION)
    return use


@pytest.fixture
def indexed_with_old_model(cast, configure):
    """Three handbook documents and one private one, indexed with the old model; then the configuration names the new one."""
    documents = [
        DocumentFactory(collection=cast.handbook, created_by=cast.alice, title=t.split("\n")[0][2:], text=t) for t in TEXTS
    ]
    private = DocumentFactory(
        collection=cast.private, created_by=cast.alice, title="Salaries", text="# Salaries\n\nOwls earn more."
    )
    index_documents(document_ids=[d.pk for d in [*documents, private]])
    configure(NEW, NEW_DIMENSION)
    return [*documents, private]


def served(team) -> str:
    return ServingModel.objects.get(team=team).model_id


def test_a_team_is_recorded_with_the_model_it_is_first_indexed_with(cast):
    index_documents(document_ids=[DocumentFactory(collection=cast.handbook).pk])
    row = ServingModel.objects.get(team=cast.alice.team)
    assert (row.model_id, row.provider, row.dimension) == (OLD, "fake", OLD_DIMENSION)


def test_searches_keep_the_old_model_while_the_new_one_is_built_and_switch_when_it_covers_the_team(
    cast, api_for, indexed_with_old_model
):
    handbook = indexed_with_old_model[:3]
    result = search(user=cast.bob, query="owls hunt mice", mode="vector", threshold=0.0)
    assert result.model is not None and result.model.model_id == OLD
    assert result.hits, "never an empty page while the new model is built"
    assert {Chunk.objects.get(pk=h.chunk_id).model_id for h in result.hits} == {OLD}

    index_documents(document_ids=[d.pk for d in handbook[:2]])
    assert served(cast.alice.team) == OLD, "two of four documents are not a covered team"
    status = api_for(cast.alice).post("rag.status").json()["data"]
    assert status["model"] == OLD
    assert status["backfill"] == {"model": NEW, "done": 2, "total": 4, "failed": 0}

    index_documents(document_ids=[d.pk for d in indexed_with_old_model[2:]])
    assert served(cast.alice.team) == NEW
    result = search(user=cast.bob, query="owls hunt mice", mode="hybrid", threshold=0.0)
    assert result.model is not None and result.model.model_id == NEW
    assert result.hits and {Chunk.objects.get(pk=h.chunk_id).model_id for h in result.hits} == {NEW}
    status = api_for(cast.alice).post("rag.status").json()["data"]
    assert (status["model"], status["backfill"]) == (NEW, None)


def test_rag_status_counts_only_the_documents_the_caller_can_see(cast, api_for, indexed_with_old_model):
    assert api_for(cast.bob).post("rag.status").json()["data"]["backfill"] == {"model": NEW, "done": 0, "total": 3, "failed": 0}


def test_a_backfill_search_shows_nothing_the_user_may_not_read(cast, api_for, indexed_with_old_model):
    titles = {
        hit["document"]["title"]
        for hit in api_for(cast.bob).post("rag.search", {"query": "owls earn", "threshold": 0}).json()["data"]
    }
    assert titles and "Salaries" not in titles
    assert api_for(cast.charlie).post("rag.search", {"query": "owls earn"}).json()["error"] == "no_embeddings"


def test_an_edit_during_the_backfill_is_indexed_for_both_models(
    cast, api_for, indexed_with_old_model, django_capture_on_commit_callbacks
):
    owls = indexed_with_old_model[0]
    with django_capture_on_commit_callbacks(execute=True):
        api_for(cast.alice).post("documents.update", {"id": str(owls.pk), "text": "# Owls\n\nOwls nest in zanzibar towers."})
    for model_id in (OLD, NEW):
        assert {c.document_version for c in Chunk.objects.filter(document=owls, model_id=model_id)} == {2}, model_id
    result = search(user=cast.bob, query="zanzibar towers", mode="keyword")
    assert result.model is not None and result.model.model_id == OLD
    assert [h.document_id for h in result.hits][:1] == [owls.pk]


def test_a_title_change_during_the_backfill_renames_the_old_models_graph_too(
    cast, api_for, indexed_with_old_model, django_capture_on_commit_callbacks
):
    owls = indexed_with_old_model[0]
    index_documents(document_ids=[owls.pk])
    with django_capture_on_commit_callbacks(execute=True):
        api_for(cast.alice).post("documents.update", {"id": str(owls.pk), "title": "Barn owls"})
    for model_id in (OLD, NEW):
        names = set(
            Mention.objects.filter(document_id=owls.pk, model_id=model_id, subject=True).values_list("entity__name", flat=True)
        )
        assert names == {"Barn owls"}, model_id


def test_the_backfill_builds_the_new_model_step_by_step_then_the_team_switches(cast, indexed_with_old_model, monkeypatch):
    from rag.indexing import backfill

    monkeypatch.setattr(backfill, "BACKFILL_BATCH", 1)
    job = start_backfill()
    assert job is not None
    job.refresh_from_db()
    assert (job.backfill, job.state, job.done, job.failed, job.model_id) == (True, JobState.DONE, 4, 0, NEW)
    assert served(cast.alice.team) == NEW
    assert start_backfill() is None, "nothing is left to backfill"


def test_vectors_the_new_model_already_computed_are_reused(cast, indexed_with_old_model):
    from rag.providers.embeddings import get_embedding_provider

    index_documents(document_ids=[indexed_with_old_model[0].pk])
    copy = DocumentFactory(collection=cast.handbook, title="Owls", text=TEXTS[0])
    calls = len(get_embedding_provider().calls)
    index_documents(document_ids=[copy.pk])
    assert len(get_embedding_provider().calls) == calls


def test_cleanup_keeps_a_model_a_team_is_still_searched_with_and_removes_it_after_the_switch(
    cast, indexed_with_old_model, capsys
):
    call_command("cleanup_embeddings")
    assert "Kept model fake-embedding: 1 team(s) are still searched with it" in capsys.readouterr().out
    assert Chunk.objects.filter(model_id=OLD).exists()

    index_documents(document_ids=[d.pk for d in indexed_with_old_model])
    assert served(cast.alice.team) == NEW
    call_command("cleanup_embeddings")
    assert "obsolete model fake-embedding" in capsys.readouterr().out
    assert not Chunk.objects.filter(model_id=OLD).exists()
    assert not KeywordPosting.objects.filter(model_id=OLD).exists()
    assert not ChunkSignBits.objects.filter(model_id=OLD).exists()
    assert ChunkSignBits.objects.filter(model_id=NEW).count() == Chunk.objects.filter(model_id=NEW).count()
    assert not Mention.objects.filter(model_id=OLD).exists()
    assert not IndexStatus.objects.filter(model_id=OLD).exists()
    assert Chunk.objects.filter(model_id=NEW).count() > 0
    assert search(user=cast.bob, query="owls hunt mice", mode="hybrid", threshold=0.0).hits


def test_the_old_models_hnsw_index_goes_with_its_chunks(configure, cast, indexed_with_old_model):
    from django.db import connection

    index_documents(document_ids=[d.pk for d in indexed_with_old_model])
    call_command("cleanup_embeddings")
    indexes = connection.introspection.get_constraints(connection.cursor(), "document_embeddings")
    assert vector_index_name(OLD, OLD_DIMENSION) not in indexes
    assert vector_index_name(NEW, NEW_DIMENSION) in indexes


def test_a_document_the_new_model_failed_on_holds_the_switch_back_until_forced(cast, indexed_with_old_model, capsys):
    index_documents(document_ids=[d.pk for d in indexed_with_old_model])
    # As if the new model's provider had refused the last document: its status failed, its chunks never written.
    last = indexed_with_old_model[-1]
    Chunk.objects.filter(document=last, model_id=NEW).delete()
    IndexStatus.objects.filter(document=last, model_id=NEW).update(state=IndexState.FAILED, indexed_version=None)
    ServingModel.objects.filter(team=cast.alice.team).update(model_id=OLD, provider="fake", dimension=OLD_DIMENSION)
    assert switch_covered_teams() == []
    call_command("index_documents", "--document", str(indexed_with_old_model[0].pk))
    out = capsys.readouterr().out
    assert "1 team(s) still searched with fake-embedding" in out
    call_command("index_documents", "--document", str(indexed_with_old_model[0].pk), "--switch-now")
    assert served(cast.alice.team) == NEW


def test_recovery_and_reconciliation_leave_the_backfills_documents_to_it(cast, indexed_with_old_model):
    handbook_ids = {d.pk for d in indexed_with_old_model}
    Document.objects.filter(pk__in=handbook_ids).update(updated_at=cast.handbook.created_at)
    assert not handbook_ids & set(stuck(lease=0)), "queued every minute, they would wait beside the backfill's steps"
    report = reconcile()
    assert set(report.backfill) == handbook_ids
    assert not handbook_ids & set(report.to_reindex)


def test_index_documents_runs_the_backfill_as_a_job(cast, indexed_with_old_model, capsys):
    call_command("index_documents")
    out = capsys.readouterr().out
    assert "1 team(s) are searched with fake-embedding until fake-embedding-v2 covers them" in out
    job = IndexJob.objects.get(backfill=True)
    assert (job.state, job.done) == (JobState.DONE, 4)
    assert served(cast.alice.team) == NEW
