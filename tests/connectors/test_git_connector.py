"""The Git connector against repositories served on loopback by `git daemon` and `git http-backend`."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pytest_django import Settings

from connectors.base import ItemError, SourceError, SourceItem
from connectors.kinds import git as git_kind
from connectors.kinds.git import GitConnector
from tests.connectors.git_servers import GitDaemon, GitRepo, TokenGitServer, free_port

TOKEN = "ghp_s3cretT0kenThatMustNeverShow"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GitRepo, GitDaemon, TokenGitServer]]:
    """One repository for the module, exported by git daemon and by a token-checking HTTP server."""
    root = tmp_path_factory.mktemp("served")
    repo = GitRepo(root)
    repo.write("README.md", "# Project\n\nHow the project works.\n")
    repo.write("src/app.py", "def main() -> None:\n    print('hello')\n")
    repo.write("docs/guide.md", "# Guide\n\nRead me.\n")
    repo.write("assets/logo.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00binary")
    repo.write("data/blob.txt", b"text\x00with a NUL")
    repo.write(
        "notes/latin1.txt", "Caf\u00e9 cr\u00e8me, na\u00efve r\u00e9sum\u00e9 of the d\u00e9j\u00e0 vu.\n".encode("cp1252")
    )
    repo.write("notes/broken.txt", "caf\u00e9 ".encode() + b"then \xff\xfe broken\n")
    repo.write("big/large.txt", "x" * 5000 + "\n")
    repo.commit("First")
    daemon = GitDaemon(root).start()
    http = TokenGitServer(root, token=TOKEN).start()
    yield repo, daemon, http
    daemon.stop()
    http.stop()


@pytest.fixture(scope="module")
def git_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One mirror cache for the module, as a worker keeps one: later tests fetch only what is new."""
    return tmp_path_factory.mktemp("git-cache")


@pytest.fixture(autouse=True)
def git_settings(settings: Settings, git_cache: Path) -> None:
    settings.CONNECTORS_GIT_CACHE_DIR = str(git_cache)
    settings.CONNECTORS_LOCAL_ROOTS = []


def listing(connector: GitConnector) -> dict[str, SourceItem]:
    return {item.key: item for item in connector.items({})}


def connector(url: str, **config: Any) -> GitConnector:
    secrets = config.pop("secrets", {})
    return GitConnector.from_config({"url": url, **config}, secrets)


def source_error(source: GitConnector) -> SourceError:
    with pytest.raises(SourceError) as caught:
        listing(source)
    return caught.value


def test_it_lists_every_file_at_the_branch_head_with_its_blob_id_and_commit(served: tuple) -> None:
    repo, daemon, _ = served
    source = connector(daemon.url(), branch="main")
    items = listing(source)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo.work, capture_output=True, text=True).stdout.strip()
    assert source.cursor == head
    assert "src/app.py" in items and "docs/guide.md" in items
    blob = subprocess.run(["git", "rev-parse", "HEAD:src/app.py"], cwd=repo.work, capture_output=True, text=True).stdout.strip()
    assert items["src/app.py"].version == blob
    assert items["src/app.py"].origin == f"src/app.py@{head}"
    assert items["src/app.py"].fetch() == b"def main() -> None:\n    print('hello')\n"


def test_the_default_branch_is_the_repositorys_head(served: tuple) -> None:
    _, daemon, _ = served
    source = connector(daemon.url())
    assert "README.md" in listing(source)


def test_include_and_exclude_globs_choose_the_files(served: tuple) -> None:
    _, daemon, _ = served
    source = connector(daemon.url(), include=["docs/**", "*.py", "README.md"], exclude=["src/**"])
    assert sorted(listing(source)) == ["README.md", "docs/guide.md"]


def test_binary_oversize_and_undecodable_files_fail_alone_with_a_reason(served: tuple, settings: Settings) -> None:
    _, daemon, _ = served
    settings.IMPORT_MAX_FILE_SIZE = 4096
    items = listing(connector(daemon.url()))
    for key, reason in [
        ("assets/logo.png", "binary"),
        ("data/blob.txt", "binary"),
        ("big/large.txt", "over the 0.0 MB limit"),
        ("notes/broken.txt", "Invalid text encoding"),
    ]:
        with pytest.raises(ItemError, match=reason) as caught:
            items[key].fetch()
        assert caught.value.key == key


def test_text_in_a_legacy_encoding_is_fetched_as_utf8(served: tuple) -> None:
    _, daemon, _ = served
    items = listing(connector(daemon.url()))
    assert items["notes/latin1.txt"].fetch().decode("utf-8").startswith("Caf\u00e9 cr\u00e8me")


def test_an_unchanged_file_is_never_read(served: tuple, monkeypatch: pytest.MonkeyPatch) -> None:
    _, daemon, _ = served
    commands: list[list[str]] = []
    real_run = subprocess.run

    def spy(args: list[str], **kwargs: Any) -> subprocess.CompletedProcess:
        commands.append(list(args))
        return real_run(args, **kwargs)

    monkeypatch.setattr(git_kind.subprocess, "run", spy)
    listing(connector(daemon.url()))
    assert not [c for c in commands if "cat-file" in c]


def test_a_token_travels_in_a_header_never_in_the_address_or_arguments(served: tuple, monkeypatch: pytest.MonkeyPatch) -> None:
    _, _, http = served
    arguments: list[str] = []
    real_run = subprocess.run

    def spy(args: list[str], **kwargs: Any) -> subprocess.CompletedProcess:
        arguments.extend(args)
        return real_run(args, **kwargs)

    monkeypatch.setattr(git_kind.subprocess, "run", spy)
    source = connector(http.url(), secrets={"token": TOKEN})
    assert "README.md" in listing(source)
    assert http.authorizations[-1] == http.expected
    assert not [a for a in arguments if TOKEN in a]
    assert TOKEN not in repr(source)


def test_a_wrong_token_is_refused_without_showing_it(served: tuple) -> None:
    _, _, http = served
    error = source_error(connector(http.url(), secrets={"token": "wrong-" + TOKEN}))
    assert "refused access with the token" in error.message
    assert TOKEN not in error.message


def test_no_token_where_one_is_needed_says_so(served: tuple) -> None:
    _, _, http = served
    assert "refused access with no credentials" in source_error(connector(http.url())).message


def test_an_unreachable_host_is_a_transient_source_error() -> None:
    error = source_error(connector(f"git://127.0.0.1:{free_port()}/project.git"))
    assert "cannot be reached" in error.message
    assert error.transient


def test_a_missing_branch_is_named(served: tuple) -> None:
    _, daemon, _ = served
    error = source_error(connector(daemon.url(), branch="no-such-branch"))
    assert error.message == f"The repository {daemon.url()} has no branch 'no-such-branch'."


def test_an_address_that_is_no_repository_says_so(served: tuple) -> None:
    _, daemon, http = served
    assert "is not a Git repository" in source_error(connector(daemon.url("nothing.git"))).message
    assert "is not a Git repository" in source_error(connector(http.url("nothing.git"), secrets={"token": TOKEN})).message


@pytest.mark.parametrize(
    ("config", "secrets", "message"),
    [
        ({}, {}, "url: the repository's address is required"),
        ({"url": "https://user:pw@example.com/r.git"}, {}, "url: put no credentials in the address"),
        ({"url": "ext::sh%c%touch%/tmp/pwned"}, {}, "url: use an https://"),
        ({"url": "--upload-pack=touch /tmp/x"}, {}, "url: not a repository address"),
        ({"url": "/srv/repos/project.git"}, {}, "turned off here; an operator lists the folders sources may read"),
        ({"url": "https://example.com/r.git", "branch": "bad..name"}, {}, "branch: not a valid Git branch name"),
        ({"url": "https://example.com/r.git", "include": "*.md", "depth": 1}, {}, "Unknown Git setting: depth"),
        ({"url": "https://example.com/r.git", "include": [3]}, {}, "include: a list of path globs"),
        ({"url": "ssh://git@example.com/r.git"}, {"token": "t"}, "token: a token is sent only over http"),
        ({"url": "ssh://git@example.com/r.git"}, {"ssh_key": "hunter2"}, "ssh_key: not a private key"),
    ],
)
def test_a_bad_configuration_is_refused_naming_the_field(config: dict, secrets: dict, message: str) -> None:
    with pytest.raises(SourceError, match=message.replace("(", r"\(").replace(")", r"\)")):
        GitConnector.from_config(config, secrets)


def test_a_local_path_works_inside_the_allowed_folders_only(served: tuple, settings: Settings) -> None:
    repo, _, _ = served
    settings.CONNECTORS_LOCAL_ROOTS = [str(repo.root)]
    assert "README.md" in listing(connector(str(repo.bare)))
    assert "README.md" in listing(connector(f"file://{repo.bare}"))
    settings.CONNECTORS_LOCAL_ROOTS = [str(repo.work)]
    with pytest.raises(SourceError, match="is outside the folders this server may read"):
        connector(str(repo.bare))


def test_more_files_than_the_limit_is_refused_clearly(served: tuple, settings: Settings) -> None:
    _, daemon, _ = served
    settings.CONNECTORS_GIT_MAX_FILES = 3
    error = source_error(connector(daemon.url()))
    assert "over the limit of 3 (CONNECTORS_GIT_MAX_FILES)" in error.message


def test_it_follows_edits_renames_deletions_and_a_force_push(served: tuple) -> None:
    repo, daemon, _ = served
    repo.checkout("churn", new=True)
    repo.write("keep.md", "# Keep\n")
    repo.write("edit.md", "# Edit\n\nfirst\n")
    repo.write("old/name.md", "# Moved\n")
    repo.write("gone.md", "# Gone\n")
    repo.commit("Churn base", branch="churn")
    source = connector(daemon.url(), branch="churn", include=["*.md"], exclude=["README.md", "docs/**"])
    first = listing(source)
    assert sorted(first) == ["edit.md", "gone.md", "keep.md", "old/name.md"]

    repo.write("edit.md", "# Edit\n\nsecond\n")
    repo.rename("old/name.md", "new/name.md")
    repo.remove("gone.md")
    second_commit = repo.commit("Edit, rename, delete", branch="churn")
    second = listing(source)
    assert sorted(second) == ["edit.md", "keep.md", "new/name.md"]
    assert second["keep.md"].version == first["keep.md"].version
    assert second["edit.md"].version != first["edit.md"].version
    assert second["new/name.md"].version == first["old/name.md"].version  # the same blob: no new content
    assert source.cursor == second_commit

    repo.reset_hard("HEAD~1")  # rewrite history: the edit, rename and deletion never happened
    repo.write("rewritten.md", "# Rewritten\n")
    forced = repo.commit("Rewritten", branch="churn", force=True)
    third = listing(source)
    assert sorted(third) == ["edit.md", "gone.md", "keep.md", "old/name.md", "rewritten.md"]
    assert third["edit.md"].fetch() == b"# Edit\n\nfirst\n"
    assert source.cursor == forced
    repo.checkout("main")
