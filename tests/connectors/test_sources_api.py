"""sources.*: strict input, secrets that never come out, and a source seen by its owner and team admins only."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from pytest_django import Settings

from connectors.models import SyncedSource
from connectors.services import source_create
from connectors.sync import source_sync
from permissions.models import Access, Role
from tests.conftest import ApiFor, Cast
from tests.connectors.conftest import write
from tests.factories import CollectionFactory, CollectionMembershipFactory

SECRET = "s3cr3t-token-value"


def create_body(cast: Cast, root: Path, **extra: object) -> dict:
    return {
        "name": "Wiki",
        "kind": "folder",
        "collectionId": str(cast.handbook.pk),
        "config": {"path": str(root), "flavour": "files"},
        **extra,
    }


def test_a_source_is_created_synced_and_shown_without_its_secrets(
    cast: Cast, api_for: ApiFor, root: Path, django_capture_on_commit_callbacks
) -> None:
    write(root, {"guide.md": "# Guide\n\nDeploy.\n"})
    api = api_for(cast.alice)
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post("sources.create", create_body(cast, root, secrets={"token": SECRET}))
    assert response.status_code == 200, response.content
    data = response.json()["data"]
    assert (data["kind"], data["state"], data["secrets"], data["collectionName"]) == ("folder", "active", ["token"], "Handbook")
    assert SECRET not in response.content.decode()
    assert SECRET not in SyncedSource.objects.get(pk=data["id"]).secrets, "stored encrypted"

    info = api.post("sources.info", {"id": data["id"]}).json()["data"]
    assert (info["lastSync"]["stage"], info["lastSync"]["new"]) in {("indexing", 1), ("done", 1)}
    listed = api.post("sources.list").json()
    assert [s["name"] for s in listed["data"]] == ["Wiki"] and SECRET not in str(listed)
    syncs = api.post("sources.syncs", {"id": data["id"]}).json()
    assert syncs["pagination"]["total"] == 1


def test_other_people_see_no_source_and_cannot_touch_it(cast: Cast, api_for: ApiFor, root: Path) -> None:
    source = source_create(
        by=cast.alice, name="Wiki", kind="folder", config={"path": str(root)}, collection=cast.handbook, sync=False
    )
    for user in (cast.bob, cast.charlie):
        api = api_for(user)
        assert api.post("sources.list").json()["data"] == []
        for endpoint in ("sources.info", "sources.syncs", "sources.sync", "sources.pause", "sources.update", "sources.delete"):
            response = api.post(endpoint, {"id": str(source.pk)})
            assert (endpoint, response.status_code) == (endpoint, 404)
            assert "Wiki" not in response.content.decode()


def test_a_team_admin_sees_a_members_source_but_the_member_sees_only_their_own(cast: Cast, api_for: ApiFor, root: Path) -> None:
    shared = CollectionFactory.create(team=cast.alice.team, name="Shared", default_access=Access.READ_WRITE)
    source_create(by=cast.bob, name="Bob's", kind="folder", config={"path": str(root)}, collection=shared, sync=False)
    source_create(by=cast.alice, name="Alice's", kind="folder", config={"path": str(root)}, collection=cast.handbook, sync=False)
    assert [s["name"] for s in api_for(cast.alice).post("sources.list").json()["data"]] == ["Alice's", "Bob's"]
    assert [s["name"] for s in api_for(cast.bob).post("sources.list").json()["data"]] == ["Bob's"]


def test_a_source_writes_only_into_a_collection_its_owner_can_write(cast: Cast, api_for: ApiFor, root: Path) -> None:
    response = api_for(cast.bob).post("sources.create", create_body(cast, root))
    assert response.status_code == 403
    assert response.json()["message"].startswith("A source writes only into a collection its owner can write")
    hidden = api_for(cast.charlie).post("sources.create", create_body(cast, root))
    assert hidden.status_code == 404


def test_a_sync_fails_clearly_once_the_owner_lost_write_access(cast: Cast, root: Path) -> None:
    shared = CollectionFactory.create(team=cast.alice.team, name="Shared", default_access=Access.READ)
    CollectionMembershipFactory(collection=shared, user=cast.bob, role=Role.READ_WRITE)
    write(root, {"guide.md": "# Guide\n\nDeploy.\n"})
    source = source_create(by=cast.bob, name="Bob's", kind="folder", config={"path": str(root)}, collection=shared, sync=False)
    shared.memberships.filter(user=cast.bob).update(role=Role.READ)
    sync = source_sync(source=source)
    assert sync.stage == "failed"
    assert sync.error == (
        "The source's owner (bob) can no longer write to the collection “Shared”, so nothing was synced. "
        "Give them write access again, or choose a collection they can write."
    )
    assert shared.documents.count() == 0


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"path": "/etc"}, "config: path: /etc is outside the folders this server may read"),
        ({"path": "relative/dir"}, "config: path: must be an absolute path."),
        ({"path": "ROOT", "flavour": "wiki"}, "config: flavour: must be one of files, obsidian, notion, confluence, got 'wiki'."),
        ({"path": "ROOT", "branch": "main"}, "config: branch: no such field; this kind takes flavour, path."),
        ({"path": "ROOT/../.."}, "config: path: ROOT/../.. is outside the folders this server may read"),
    ],
)
def test_a_bad_configuration_is_refused_naming_the_field(
    cast: Cast, api_for: ApiFor, root: Path, config: dict, message: str
) -> None:
    config = {k: v.replace("ROOT", str(root)) if isinstance(v, str) else v for k, v in config.items()}
    response = api_for(cast.alice).post("sources.create", create_body(cast, root, config=config))
    assert response.status_code == 400
    assert response.json()["message"].startswith(message.replace("ROOT", str(root)))
    assert not SyncedSource.objects.exists()


def test_folder_sources_are_refused_while_no_root_is_allowed(
    cast: Cast, api_for: ApiFor, settings: Settings, tmp_path: Path
) -> None:
    settings.CONNECTORS_LOCAL_ROOTS = []
    response = api_for(cast.alice).post("sources.create", create_body(cast, tmp_path))
    assert response.json() == {
        "error": "validation_error",
        "message": "config: Folder sources are turned off on this server: an operator lists the folders they may read "
        "in CONNECTORS_LOCAL_ROOTS.",
    }


def test_secrets_are_merged_on_update_and_never_returned(cast: Cast, api_for: ApiFor, root: Path) -> None:
    api = api_for(cast.alice)
    source_id = api.post("sources.create", create_body(cast, root, secrets={"token": SECRET})).json()["data"]["id"]
    updated = api.post("sources.update", {"id": source_id, "secrets": {"password": "other"}, "intervalMinutes": 0})
    assert (updated.json()["data"]["secrets"], updated.json()["data"]["intervalMinutes"]) == (["password", "token"], 0)
    removed = api.post("sources.update", {"id": source_id, "secrets": {"token": ""}})
    assert removed.json()["data"]["secrets"] == ["password"]


def test_pause_resume_and_sync_now(cast: Cast, api_for: ApiFor, root: Path) -> None:
    api = api_for(cast.alice)
    source_id = api.post("sources.create", create_body(cast, root)).json()["data"]["id"]
    assert api.post("sources.pause", {"id": source_id}).json()["data"]["state"] == "paused"
    assert api.post("sources.resume", {"id": source_id}).json()["data"]["state"] == "active"
    first = api.post("sources.sync", {"id": source_id}).json()["data"]
    again = api.post("sources.sync", {"id": source_id}).json()["data"]
    assert first["stage"] == "queued" and again["id"] == first["id"], "one sync per source at a time"


def test_a_read_scoped_token_cannot_sync(cast: Cast, api_for: ApiFor, root: Path) -> None:
    source = source_create(
        by=cast.alice, name="Wiki", kind="folder", config={"path": str(root)}, collection=cast.handbook, sync=False
    )
    response = api_for(cast.alice, "read").post("sources.sync", {"id": str(source.pk)})
    assert response.status_code == 403


def test_an_upload_goes_only_to_a_zip_source(cast: Cast, api_for: ApiFor, root: Path) -> None:
    source = source_create(
        by=cast.alice, name="Wiki", kind="folder", config={"path": str(root)}, collection=cast.handbook, sync=False
    )
    response = api_for(cast.alice).client.post(
        "/api/sources.upload", {"id": str(source.pk), "file": SimpleUploadedFile("x.zip", b"PK")}, format="multipart"
    )
    assert response.json()["message"] == "file: only a ZIP export source takes an upload."
