"""Document tags: one normal form, set through documents.create/update and the admin, filtered by documents.list,
and counted by tags.list over the caller's visible documents only."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.test import Client
from pytest_django import DjangoCaptureOnCommitCallbacks

from documents.models import Document
from documents.tags import normalise_tag, normalise_tags, split_tags
from tests.conftest import Api, ApiFor, Cast
from tests.factories import CollectionFactory, DocumentFactory


def test_a_tag_is_trimmed_its_spaces_collapsed_and_lower_cased() -> None:
    assert normalise_tag("  Release   Notes ") == "release notes"
    assert normalise_tag("tab\tand\nline") == "tab and line"
    assert normalise_tag("Ünïcode") == "ünïcode"


def test_tags_are_kept_once_and_sorted() -> None:
    assert normalise_tags(["Security", "onboarding", "SECURITY "]) == ["onboarding", "security"]


@pytest.mark.parametrize(
    ("tags", "reason"),
    [
        ([""], "must not be empty"),
        (["   "], "must not be empty"),
        (["x" * 51], "at most 50 characters"),
        (["a,b"], "must not contain a comma"),
        (["right\u202eto-left"], "control characters"),
        (["bell\x07"], "control characters"),
        ([7], "must be a string"),
        ([f"t{i}" for i in range(21)], "at most 20 tags"),
    ],
)
def test_a_bad_tag_is_refused_with_its_reason(tags: list[object], reason: str) -> None:
    with pytest.raises(ValidationError) as caught:
        normalise_tags(tags)
    assert reason in " ".join(caught.value.messages)


def test_a_tag_string_is_split_on_commas() -> None:
    assert split_tags("security, onboarding,, ") == ["security", "onboarding"]


def test_alice_creates_a_tagged_document_and_reads_its_normalised_tags(cast: Cast, api_for: ApiFor) -> None:
    body = {"title": "Runbook", "text": "x", "collectionId": str(cast.handbook.id), "tags": ["Ops", " on-call ", "ops"]}
    response = api_for(cast.alice).post("documents.create", body)
    assert response.status_code == 200, response.content
    assert response.json()["data"]["tags"] == ["on-call", "ops"]
    assert Document.objects.get(pk=response.json()["data"]["id"]).tags == ["on-call", "ops"]


def test_a_document_without_tags_has_an_empty_list(cast: Cast, api_for: ApiFor) -> None:
    response = api_for(cast.alice).post("documents.create", {"title": "T", "collectionId": str(cast.handbook.id)})
    assert response.json()["data"]["tags"] == []


@pytest.mark.parametrize(
    "tags",
    [["x" * 51], ["a,b"], [""], "security", [["nested"]], [1], [f"t{i}" for i in range(21)]],
)
def test_bad_tags_are_a_validation_error(cast: Cast, api_for: ApiFor, tags: object) -> None:
    body = {"title": "T", "collectionId": str(cast.handbook.id), "tags": tags}
    response = api_for(cast.alice).post("documents.create", body)
    assert response.status_code == 400 and response.json()["error"] == "validation_error"
    assert response.json()["message"].startswith("tags")
    assert not Document.objects.exists()


def test_update_replaces_the_tags_leaves_them_when_absent_and_clears_them_with_an_empty_list(cast: Cast, api_for: ApiFor) -> None:
    doc = DocumentFactory.create(collection=cast.handbook, created_by=cast.alice, tags=["old"])
    alice = api_for(cast.alice)
    assert alice.post("documents.update", {"id": str(doc.id), "tags": ["New", "other"]}).json()["data"]["tags"] == [
        "new",
        "other",
    ]
    assert alice.post("documents.update", {"id": str(doc.id), "title": "Renamed"}).json()["data"]["tags"] == ["new", "other"]
    assert alice.post("documents.update", {"id": str(doc.id), "tags": []}).json()["data"]["tags"] == []


def test_a_tag_change_neither_bumps_the_version_nor_asks_for_indexing(
    cast: Cast, api_for: ApiFor, monkeypatch: pytest.MonkeyPatch
) -> None:
    from documents.signals import document_saved

    sent = []
    monkeypatch.setattr(document_saved, "send", lambda **kwargs: sent.append(kwargs))
    doc = DocumentFactory.create(collection=cast.handbook, created_by=cast.alice)
    data = api_for(cast.alice).post("documents.update", {"id": str(doc.id), "tags": ["ops"]}).json()["data"]
    assert data["version"] == doc.version and data["tags"] == ["ops"]
    assert sent == []


def test_bob_cannot_tag_a_document_he_only_reads(cast: Cast, api_for: ApiFor) -> None:
    doc = DocumentFactory.create(collection=cast.handbook, created_by=cast.alice)
    response = api_for(cast.bob).post("documents.update", {"id": str(doc.id), "tags": ["mine"]})
    assert response.status_code == 403
    doc.refresh_from_db()
    assert doc.tags == []


@pytest.fixture
def tagged(cast: Cast) -> dict[str, Document]:
    """Bob reads the handbook's; the private collection's and charlie's team's he does not."""
    other = CollectionFactory.create(team=cast.charlie.team)
    return {
        "guide": DocumentFactory.create(
            collection=cast.handbook, created_by=cast.alice, title="Guide", tags=["onboarding", "security"]
        ),
        "policy": DocumentFactory.create(collection=cast.handbook, created_by=cast.alice, title="Policy", tags=["security"]),
        "draft": DocumentFactory.create(
            collection=cast.handbook, created_by=cast.alice, title="Draft", tags=["security", "draft-only"], published_at=None
        ),
        "secret": DocumentFactory.create(
            collection=cast.private, created_by=cast.alice, title="Secret", tags=["security", "incident"]
        ),
        "theirs": DocumentFactory.create(collection=other, created_by=cast.charlie, title="Theirs", tags=["security", "globex"]),
    }


def listed(api: Api, **body: object) -> list[str]:
    response = api.post("documents.list", body)
    assert response.status_code == 200, response.content
    return sorted(item["title"] for item in response.json()["data"])


def test_documents_list_filters_by_every_listed_tag_within_what_the_caller_sees(
    cast: Cast, api_for: ApiFor, tagged: dict[str, Document]
) -> None:
    assert listed(api_for(cast.bob), tags=["Security"]) == ["Guide", "Policy"]
    assert listed(api_for(cast.bob), tags=["security", "onboarding"]) == ["Guide"]
    assert listed(api_for(cast.bob), tags=["incident"]) == []
    assert listed(api_for(cast.alice), tags=["security"]) == ["Draft", "Guide", "Policy", "Secret"]
    assert listed(api_for(cast.charlie), tags=["security"]) == ["Theirs"]


def test_documents_list_refuses_more_than_ten_filter_tags(cast: Cast, api_for: ApiFor) -> None:
    response = api_for(cast.bob).post("documents.list", {"tags": [f"t{i}" for i in range(11)]})
    assert response.status_code == 400 and response.json()["error"] == "validation_error"


def tag_counts(api: Api, **body: object) -> dict[str, int]:
    response = api.post("tags.list", body)
    assert response.status_code == 200, response.content
    return {tag["name"]: tag["documents"] for tag in response.json()["data"]}


def test_tags_list_counts_only_the_documents_bob_can_read(cast: Cast, api_for: ApiFor, tagged: dict[str, Document]) -> None:
    assert tag_counts(api_for(cast.bob)) == {"security": 2, "onboarding": 1}


def test_tags_list_counts_alices_private_documents_and_drafts_for_her(
    cast: Cast, api_for: ApiFor, tagged: dict[str, Document]
) -> None:
    assert tag_counts(api_for(cast.alice)) == {"security": 4, "onboarding": 1, "draft-only": 1, "incident": 1}


def test_tags_list_shows_charlie_only_his_teams_tags(cast: Cast, api_for: ApiFor, tagged: dict[str, Document]) -> None:
    assert tag_counts(api_for(cast.charlie)) == {"security": 1, "globex": 1}


def test_tags_list_leaves_out_archived_and_deleted_documents(
    cast: Cast, api_for: ApiFor, tagged: dict[str, Document], django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks
) -> None:
    alice = api_for(cast.alice)
    with django_capture_on_commit_callbacks(execute=True):
        alice.post("documents.archive", {"id": str(tagged["guide"].id)})
        alice.post("documents.delete", {"id": str(tagged["policy"].id)})
    assert tag_counts(api_for(cast.bob)) == {}


def test_tags_list_is_most_used_first_paginated_and_filtered_by_a_part_of_the_name(
    cast: Cast, api_for: ApiFor, tagged: dict[str, Document]
) -> None:
    alice = api_for(cast.alice)
    first = alice.post("tags.list", {"limit": 2}).json()
    assert [tag["name"] for tag in first["data"]] == ["security", "draft-only"]
    assert first["pagination"] == {"limit": 2, "offset": 0, "total": 4}
    assert alice.post("tags.list", {"offset": 10}).json()["pagination"]["total"] == 4
    assert tag_counts(alice, query="INC") == {"incident": 1}
    assert tag_counts(alice, query="%") == {} and tag_counts(alice, query="_") == {}


def test_tags_list_narrowed_to_a_collection_bob_cannot_see_is_404(
    cast: Cast, api_for: ApiFor, tagged: dict[str, Document]
) -> None:
    assert tag_counts(api_for(cast.bob), collectionId=str(cast.handbook.id)) == {"security": 2, "onboarding": 1}
    response = api_for(cast.bob).post("tags.list", {"collectionId": str(cast.private.id)})
    assert response.status_code == 404 and response.json()["error"] == "not_found"


def test_tags_list_needs_a_token(api_for: ApiFor) -> None:
    assert api_for(None).post("tags.list").status_code == 401


def test_the_admin_sets_tags_from_a_comma_separated_field_and_filters_by_them(
    cast: Cast, client: Client, tagged: dict[str, Document]
) -> None:
    from django.contrib.auth import get_user_model

    operator = get_user_model().objects.create_superuser(username="op", password="pw-op-12345")
    client.force_login(operator)
    doc = tagged["policy"]
    url = f"/admin/documents/document/{doc.pk}/change/"
    form = client.get(url).context["adminform"].form
    data = {name: form[name].value() or "" for name in form.fields}
    data.update(
        {
            "tags": "Compliance, SECURITY",
            "memberships-TOTAL_FORMS": "0",
            "memberships-INITIAL_FORMS": "0",
            "team": str(doc.team_id),
            "collection": str(doc.collection_id),
        }
    )
    response = client.post(url, data)
    assert response.status_code == 302, response.context["adminform"].form.errors if response.context else response
    doc.refresh_from_db()
    assert doc.tags == ["compliance", "security"]
    changelist = client.get("/admin/documents/document/", {"tag": "compliance"})
    assert [d.title for d in changelist.context["cl"].result_list] == ["Policy"]
