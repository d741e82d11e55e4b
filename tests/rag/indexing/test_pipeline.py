"""Indexing in-process (eager tasks): chunks always match the current version of each document."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import connection

from documents.models import Document
from rag.indexing.index_status import COALESCE_SECONDS
from rag.indexing.pipeline import (
    chunk_document,
    content_hash,
    embedding_input,
    index_documents,
    swap_chunks,
)
from rag.models import Chunk, IndexState, IndexStatus
from rag.providers.embeddings import get_embedding_provider
from rag.providers.fakes import FakeEmbeddingProvider
from tests.factories import DocumentFactory

LONG_TEXT = "# Guide\n\n" + "\n\n".join(f"## Part {i}\n\n" + f"Sentence about topic {i}. " * 40 for i in range(6))


def chunks_of(document, model_id="fake-embedding"):
    return list(Chunk.objects.filter(document=document, model_id=model_id).order_by("chunk_index"))


def embedded_texts() -> list[str]:
    provider = get_embedding_provider()
    assert isinstance(provider, FakeEmbeddingProvider), "the autouse fake_providers fixture selects the fake"
    return [text for batch in provider.calls for text in batch]


def test_creating_a_document_through_the_api_indexes_it_after_commit(cast, api_for, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = api_for(cast.alice).post(
            "documents.create", {"title": "Guide", "text": LONG_TEXT, "collectionId": str(cast.handbook.id), "publish": True}
        )
    doc_id = response.json()["data"]["id"]
    rows = list(Chunk.objects.filter(document_id=doc_id).order_by("chunk_index"))
    assert len(rows) > 1
    assert [r.chunk_index for r in rows] == list(range(len(rows)))
    assert all(LONG_TEXT[r.start_offset : r.end_offset] == r.chunk_text for r in rows)
    assert rows[1].metadata["heading_path"][0] == "Guide"
    status = IndexStatus.objects.get(document_id=doc_id)
    assert (status.state, status.indexed_version, status.chunk_count) == (IndexState.INDEXED, 1, len(rows))


def test_an_edit_replaces_the_chunks_and_embeds_only_new_content(cast, api_for, django_capture_on_commit_callbacks):
    doc = DocumentFactory(collection=cast.handbook, created_by=cast.alice, text=LONG_TEXT)
    index_documents(document_ids=[doc.pk])
    before = len(embedded_texts())
    edited = LONG_TEXT + "\n\n## Appendix\n\nA brand new closing section about llamas."
    with django_capture_on_commit_callbacks(execute=True):
        api_for(cast.alice).post("documents.update", {"id": str(doc.id), "text": edited})
    rows = chunks_of(doc)
    assert {r.document_version for r in rows} == {2}
    assert any("llamas" in r.chunk_text for r in rows)
    new_calls = embedded_texts()[before:]
    assert 0 < len(new_calls) < len(rows), "unchanged chunks must reuse their vectors"


def test_a_title_change_costs_no_embedding_calls(cast, api_for, django_capture_on_commit_callbacks):
    doc = DocumentFactory(collection=cast.handbook, created_by=cast.alice, text=LONG_TEXT)
    index_documents(document_ids=[doc.pk])
    before = len(embedded_texts())
    with django_capture_on_commit_callbacks(execute=True):
        api_for(cast.alice).post("documents.update", {"id": str(doc.id), "title": "Renamed"})
        api_for(cast.alice).post("documents.add_user", {"id": str(doc.id), "userId": str(cast.bob.id)})
    assert len(embedded_texts()) == before
    assert {r.document_version for r in chunks_of(doc)} == {1}


def test_the_status_row_keeps_the_keyword_length_that_bm25_statistics_read(cast, api_for, django_capture_on_commit_callbacks):
    doc = DocumentFactory(collection=cast.handbook, created_by=cast.alice, title="Short", text=LONG_TEXT)
    index_documents(document_ids=[doc.pk])

    def lengths():
        status = IndexStatus.objects.get(document=doc)
        return status.keyword_length, sum(r.doc_length for r in chunks_of(doc))

    stored, actual = lengths()
    assert stored == actual > 0
    with django_capture_on_commit_callbacks(execute=True):
        api_for(cast.alice).post("documents.update", {"id": str(doc.id), "title": "A much longer title for this guide"})
    renamed, actual = lengths()
    assert renamed == actual > stored, "the title's words count in every chunk's length"


def test_indexing_an_indexed_document_again_is_skipped(cast):
    doc = DocumentFactory(collection=cast.handbook, text=LONG_TEXT)
    index_documents(document_ids=[doc.pk])
    result = index_documents(document_ids=[doc.pk])
    assert result.skipped == [doc.pk] and result.embedded == 0


def test_deleting_a_document_removes_its_chunks(cast, api_for, django_capture_on_commit_callbacks):
    doc = DocumentFactory(collection=cast.handbook, created_by=cast.alice, text=LONG_TEXT)
    index_documents(document_ids=[doc.pk])
    with django_capture_on_commit_callbacks(execute=True):
        api_for(cast.alice).post("documents.delete", {"id": str(doc.id)})
    assert chunks_of(doc) == [] and not IndexStatus.objects.filter(document=doc).exists()


def test_a_stale_version_is_never_swapped_in(cast):
    doc = DocumentFactory(collection=cast.handbook, text="Old text about owls.")
    stale = type(doc).objects.get(pk=doc.pk)
    type(doc).objects.filter(pk=doc.pk).update(text="New text about bats.", version=2)
    chunks = chunk_document(stale, get_embedding_provider())
    hashes = [content_hash(embedding_input(c)) for c in chunks]
    vectors = dict(zip(hashes, get_embedding_provider().embed([embedding_input(c) for c in chunks]), strict=False))
    assert swap_chunks([(stale, chunks, hashes)], vectors, "fake-embedding") == set()
    assert chunks_of(doc) == []


def test_a_permanent_provider_error_is_recorded_on_the_document(cast, settings, respx_mock):
    settings.RAG_EMBEDDING_PROVIDER = "litellm_proxy"
    settings.RAG_LITELLM_BASE_URL = "http://llm.test"
    from rag.providers.embeddings import reset_provider_cache

    reset_provider_cache()
    respx_mock.post("http://llm.test/embeddings").respond(401, json={"error": {"message": "Invalid API key"}})
    doc = DocumentFactory(collection=cast.handbook, text=LONG_TEXT)
    result = index_documents(document_ids=[doc.pk])
    status = IndexStatus.objects.get(document=doc)
    assert result.failed and status.state == IndexState.FAILED
    assert "Invalid API key" in status.error and status.attempts == 1
    assert respx_mock.calls.call_count == 1, "a permanent error is not retried"
    assert chunks_of(doc) == []


def test_a_dimension_mismatch_is_refused_with_a_clear_message(cast, settings, respx_mock):
    settings.RAG_EMBEDDING_PROVIDER = "litellm_proxy"
    settings.RAG_LITELLM_BASE_URL = "http://llm.test"
    from rag.providers.embeddings import reset_provider_cache

    reset_provider_cache()
    respx_mock.post("http://llm.test/embeddings").mock(
        side_effect=lambda request: __import__("httpx").Response(
            200,
            json={
                "data": [
                    {"index": i, "embedding": [0.1] * 1536}
                    for i in range(len(__import__("json").loads(request.content)["input"]))
                ]
            },
        )
    )
    doc = DocumentFactory(collection=cast.handbook, text="Short text.")
    index_documents(document_ids=[doc.pk])
    status = IndexStatus.objects.get(document=doc)
    assert status.state == IndexState.FAILED
    assert "1536" in status.error and "RAG_EMBEDDING_DIMENSION" in status.error


def test_index_documents_command_reports_progress_and_a_summary(cast, capsys):
    docs = DocumentFactory.create_batch(5, collection=cast.handbook, text=LONG_TEXT)
    call_command("index_documents")
    captured = capsys.readouterr()
    assert "5/5 documents" in captured.err
    # Not a terminal (a log file): whole lines, not one line redrawn with carriage returns.
    assert "\r" not in captured.err and captured.err.endswith("\n")
    assert "5 indexed or up to date, 0 failed" in captured.out
    assert all(chunks_of(d) for d in docs)
    call_command("index_documents", "--force", "--document", str(docs[0].pk))
    assert "1 reindexed" in capsys.readouterr().out


def test_reconcile_finds_and_fixes_missing_stale_and_orphaned_chunks(cast, capsys):
    missing, stale, orphan = DocumentFactory.create_batch(3, collection=cast.handbook, text=LONG_TEXT)
    index_documents(document_ids=[stale.pk, orphan.pk])
    type(stale).objects.filter(pk=stale.pk).update(text="changed behind our back", version=5)
    from django.utils import timezone

    type(orphan).objects.filter(pk=orphan.pk).update(deleted_at=timezone.now())
    call_command("reconcile_index")
    out = capsys.readouterr().out
    assert "1 missing, 1 stale, 0 failed, 2 with orphaned chunks" in out
    call_command("reconcile_index", "--fix")
    assert [r.document_version for r in chunks_of(stale)] == [5]
    assert chunks_of(missing) and chunks_of(orphan) == []
    call_command("reconcile_index")
    assert "0 missing, 0 stale, 0 failed, 0 with orphaned chunks" in capsys.readouterr().out


def test_reconcile_finds_a_text_changed_behind_its_back_at_the_same_version(cast, capsys) -> None:
    doc = DocumentFactory.create(collection=cast.handbook, text="The vault password is hunter2swordfish.")
    index_documents(document_ids=[doc.pk])
    with connection.cursor() as cursor:
        cursor.execute("UPDATE documents_document SET text = %s WHERE id = %s", ["The vault is empty.", doc.pk])
    call_command("reconcile_index")
    assert "0 missing, 1 stale, 0 failed" in capsys.readouterr().out


def test_reconcile_reindexes_a_text_changed_behind_its_back(cast, capsys) -> None:
    doc = DocumentFactory.create(collection=cast.handbook, text="The vault password is hunter2swordfish.")
    index_documents(document_ids=[doc.pk])
    with connection.cursor() as cursor:
        cursor.execute("UPDATE documents_document SET text = %s WHERE id = %s", ["The vault is empty.", doc.pk])
    call_command("reconcile_index", "--fix")
    assert [r.chunk_text for r in chunks_of(doc)] == ["The vault is empty."]
    call_command("reconcile_index")
    assert "0 missing, 0 stale, 0 failed" in capsys.readouterr().out


def test_indexing_again_is_not_skipped_when_the_text_changed_behind_its_back(cast) -> None:
    doc = DocumentFactory.create(collection=cast.handbook, text="The vault password is hunter2swordfish.")
    index_documents(document_ids=[doc.pk])
    Document.objects.filter(pk=doc.pk).update(text="The vault is empty.")
    assert index_documents(document_ids=[doc.pk]).indexed == [doc.pk]


def test_cleanup_removes_obsolete_models_only(cast, settings, capsys):
    from rag.corpus.vector_index import ensure_vector_index

    # DDL must come before this test transaction's first write (deferred FK checks pend).
    ensure_vector_index("fake-embedding-v2", 384)
    doc = DocumentFactory(collection=cast.handbook, text=LONG_TEXT)
    index_documents(document_ids=[doc.pk])
    settings.RAG_EMBEDDING_MODEL = "fake-embedding-v2"
    from rag.providers.embeddings import reset_provider_cache

    reset_provider_cache()
    index_documents(document_ids=[doc.pk])
    assert chunks_of(doc, "fake-embedding") and chunks_of(doc, "fake-embedding-v2")
    call_command("cleanup_embeddings")
    assert "obsolete model fake-embedding" in capsys.readouterr().out
    assert chunks_of(doc, "fake-embedding") == [] and chunks_of(doc, "fake-embedding-v2")


def test_saves_while_a_task_waits_coalesce_into_one_task(cast, monkeypatch):
    from rag import tasks

    queued = []
    monkeypatch.setattr(tasks.index_document_task, "apply_async", lambda args, **options: queued.append(args))
    doc = DocumentFactory(collection=cast.handbook, text="First.")
    for _ in range(3):
        tasks.enqueue_index(doc.pk)
    assert len(queued) == 1, "a task is already waiting for this document"
    # Once the task has claimed the document (it is no longer pending), a save queues afresh.
    IndexStatus.objects.filter(document=doc).update(state=IndexState.EMBEDDING)
    tasks.enqueue_index(doc.pk)
    assert len(queued) == 2
    tasks.enqueue_index(doc.pk, force=True)
    assert len(queued) == 3, "an explicit reindex always queues"


def test_a_status_pending_too_long_no_longer_holds_requests_back(cast, monkeypatch):
    from datetime import timedelta

    from django.utils import timezone

    from rag import tasks

    queued = []
    monkeypatch.setattr(tasks.index_document_task, "apply_async", lambda args, **options: queued.append(args))
    doc = DocumentFactory(collection=cast.handbook, text="First.")
    tasks.enqueue_index(doc.pk)
    IndexStatus.objects.filter(document=doc).update(updated_at=timezone.now() - timedelta(seconds=COALESCE_SECONDS + 1))
    tasks.enqueue_index(doc.pk)
    assert len(queued) == 2, "the first message may have been lost"


def test_rag_query_prints_what_a_user_may_retrieve(cast, capsys):
    visible = DocumentFactory(collection=cast.handbook, title="Owl guide", text="Owls hunt mice at night.")
    hidden = DocumentFactory(collection=cast.private, title="Secret owls", text="Owls hunt mice in secret.")
    index_documents(document_ids=[visible.pk, hidden.pk])
    call_command("rag_query", "bob", "owls hunt mice", "--threshold", "0")
    out = capsys.readouterr().out
    assert "Owl guide" in out and "Secret owls" not in out
    assert "1 result(s) for bob (hybrid)" in out
    call_command("rag_query", "alice", "owls hunt mice", "--mode", "keyword")
    assert "Secret owls" in capsys.readouterr().out


@pytest.mark.parametrize(
    "args, message",
    [
        (["nobody", "owls"], "No user named"),
        (["bob", "owls", "--limit", "99"], "--limit"),
        (["bob", "owls", "--collection", "not-a-uuid"], "not a valid id"),
        (["bob", "owls hunt"], "no_embeddings"),
    ],
)
def test_rag_query_explains_bad_arguments(cast, args, message):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match=message):
        call_command("rag_query", *args)


def test_the_admin_reindex_action_queues_a_job_with_progress(cast, client, django_capture_on_commit_callbacks):
    from rag.models import IndexJob

    docs = DocumentFactory.create_batch(3, collection=cast.handbook, text=LONG_TEXT)
    operator = type(cast.alice).objects.create_superuser("operator", password="x", team=cast.alice.team)
    client.force_login(operator)
    response = client.post(
        "/admin/documents/document/", {"action": "reindex", "_selected_action": [str(d.pk) for d in docs]}, follow=True
    )
    assert response.status_code == 200
    assert "Queued 3 document(s)" in response.content.decode()
    job = IndexJob.objects.get()
    assert (job.total, job.done, job.failed, job.state) == (3, 3, 0, "done")
    assert all(chunks_of(d) for d in docs)
    listing = client.get("/admin/documents/document/?index_state=indexed")
    assert all(d.title in listing.content.decode() for d in docs)
