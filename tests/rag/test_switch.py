"""RAG_ENABLED=false: one switch. The pages say so, rag.* and graph.* answer rag_disabled, saves queue nothing,
beat's passes rest, and turning it back on indexes what changed meanwhile through the reconciliation."""

from __future__ import annotations

import pytest

from documents.models import Document
from rag import receivers, tasks
from rag.indexing.index_status import documents_awaiting_index
from rag.indexing.pipeline import index_documents
from rag.models import Chunk, IndexStatus
from tests.factories import DocumentFactory


@pytest.fixture
def off(settings):
    settings.RAG_ENABLED = False
    return settings


@pytest.mark.parametrize(
    ("url", "heading"), [("/rag", "Search and answers are turned off"), ("/graph", "The knowledge graph is turned off")]
)
def test_the_pages_say_the_feature_is_off(signed_in, cast, off, url, heading):
    response = signed_in(cast.bob).get(url)
    html = response.content.decode()
    assert response.status_code == 200
    assert heading in html and "RAG_ENABLED=false" in html
    assert 'id="query"' not in html and "<script" not in html, "nothing of the feature is loaded"


@pytest.mark.parametrize(("url", "marker"), [("/rag", 'id="query"'), ("/graph", 'id="graph"')])
def test_the_pages_work_when_the_feature_is_on(signed_in, cast, url, marker):
    html = signed_in(cast.bob).get(url).content.decode()
    assert marker in html and "turned off" not in html


@pytest.mark.parametrize(
    ("endpoint", "body"),
    [
        ("rag.search", {"query": "owls hunt"}),
        ("rag.answer", {"query": "owls hunt"}),
        ("rag.status", {}),
        ("rag.embed", {"documentId": "00000000-0000-0000-0000-000000000000"}),
        ("rag.feedback", {"answerId": "00000000-0000-0000-0000-000000000000", "rating": 3}),
        ("graph.entities", {"query": "owls"}),
        ("graph.entity", {"id": "00000000-0000-0000-0000-000000000000"}),
        ("graph.passage", {"chunkId": "00000000-0000-0000-0000-000000000000:1:0"}),
    ],
)
def test_every_rag_and_graph_endpoint_answers_rag_disabled(cast, api_for, off, endpoint, body):
    response = api_for(cast.alice).post(endpoint, body)
    assert response.status_code == 400, response.content
    assert response.json()["error"] == "rag_disabled"


def test_documents_endpoints_keep_working(cast, api_for, off):
    response = api_for(cast.alice).post("documents.create", {"title": "Still here", "collectionId": str(cast.handbook.id)})
    assert response.status_code == 200
    assert api_for(cast.bob).post("tags.list").status_code == 200


@pytest.fixture
def queued(monkeypatch):
    """What the receivers hand to Celery, by task name (nothing runs)."""
    sent: list[str] = []
    monkeypatch.setattr(tasks.index_document_task, "apply_async", lambda *a, **k: sent.append("index"))
    monkeypatch.setattr(tasks.remove_document_task, "apply_async", lambda *a, **k: sent.append("remove"))
    return sent


@pytest.fixture
def indexed(cast):
    """Two handbook documents indexed while the feature was on."""
    docs = {
        "edited": DocumentFactory(collection=cast.handbook, created_by=cast.alice, title="Owls", text="Owls hunt mice."),
        "deleted": DocumentFactory(collection=cast.handbook, created_by=cast.alice, title="Bats", text="Bats hunt moths."),
    }
    index_documents(document_ids=[d.pk for d in docs.values()])
    return docs


def changes_while_off(cast, api_for, indexed, django_capture_on_commit_callbacks) -> Document:
    """Create, edit and delete through the API, committing; the new document."""
    alice = api_for(cast.alice)
    with django_capture_on_commit_callbacks(execute=True):
        created = alice.post(
            "documents.create",
            {
                "title": "Volcanoes",
                "text": "Volcanoes erupt molten lava.",
                "collectionId": str(cast.handbook.id),
                "publish": True,
            },
        )
        alice.post("documents.update", {"id": str(indexed["edited"].id), "text": "Owls hunt voles in the meadow."})
        alice.post("documents.delete", {"id": str(indexed["deleted"].id)})
    return Document.objects.get(pk=created.json()["data"]["id"])


def test_saves_while_off_queue_nothing_and_leave_the_index_as_it_was(
    cast, api_for, indexed, off, queued, django_capture_on_commit_callbacks
):
    created = changes_while_off(cast, api_for, indexed, django_capture_on_commit_callbacks)
    assert queued == []
    assert not Chunk.objects.filter(document=created).exists() and not IndexStatus.objects.filter(document=created).exists()
    assert set(Chunk.objects.filter(document=indexed["edited"]).values_list("document_version", flat=True)) == {1}
    assert Chunk.objects.filter(document=indexed["deleted"]).exists()


def test_saves_queue_indexing_and_removal_when_on(cast, api_for, indexed, queued, django_capture_on_commit_callbacks):
    changes_while_off(cast, api_for, indexed, django_capture_on_commit_callbacks)
    assert sorted(queued) == ["index", "index", "remove"]


def test_beats_passes_and_a_starting_worker_index_nothing_while_off(
    cast, api_for, indexed, off, django_capture_on_commit_callbacks, settings
):
    created = changes_while_off(cast, api_for, indexed, django_capture_on_commit_callbacks)
    settings.RAG_INDEX_LEASE = 0  # the document counts as stuck at once
    assert tasks.reconcile_index_task() == {}
    assert tasks.recover_index_task() == 0
    receivers.recover_on_worker_start()
    assert not Chunk.objects.filter(document=created).exists()
    assert Chunk.objects.filter(document=indexed["deleted"]).exists()


def test_turning_it_back_on_indexes_what_changed_meanwhile(
    cast, api_for, indexed, off, django_capture_on_commit_callbacks, settings
):
    created = changes_while_off(cast, api_for, indexed, django_capture_on_commit_callbacks)
    settings.RAG_ENABLED = True
    # What a starting worker does (celery's worker_ready): a full reconciliation, here run eagerly.
    receivers.recover_on_worker_start()
    assert IndexStatus.objects.get(document=created).indexed_version == 1
    assert Chunk.objects.filter(document=created).exists()
    assert set(Chunk.objects.filter(document=indexed["edited"]).values_list("document_version", flat=True)) == {2}
    assert not Chunk.objects.filter(document=indexed["deleted"]).exists()
    found = api_for(cast.bob).post("rag.search", {"query": "volcanoes lava voles", "mode": "keyword"}).json()["data"]
    assert {hit["document"]["title"] for hit in found} == {"Volcanoes", "Owls"}


def test_a_title_changed_while_off_is_found_by_its_new_words_once_on(
    cast, api_for, indexed, off, queued, django_capture_on_commit_callbacks, settings
):
    with django_capture_on_commit_callbacks(execute=True):
        api_for(cast.alice).post("documents.update", {"id": str(indexed["edited"].id), "title": "Strigiformes"})
    assert queued == []
    settings.RAG_ENABLED = True
    found = api_for(cast.bob).post("rag.search", {"query": "strigiformes", "mode": "keyword"}).json()["data"]
    assert [hit["document"]["title"] for hit in found] == ["Strigiformes"]


def test_an_import_does_not_wait_for_an_index_that_is_switched_off(cast, settings):
    doc = DocumentFactory(collection=cast.handbook)
    assert documents_awaiting_index([doc.pk]) == 1
    settings.RAG_ENABLED = False
    assert documents_awaiting_index([doc.pk]) == 0
