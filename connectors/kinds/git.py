"""A Git repository: every file at a branch's head, each versioned by its blob id.

The git CLI does the work, on a bare mirror per repository under CONNECTORS_GIT_CACHE_DIR: it speaks
every transport (local, http(s), ssh, git), fetches only objects it lacks, and lists a 10,000-file tree
in milliseconds. Each sync fetches the branch with a forced refspec, so a history rewritten by a force
push simply moves the head; a file is read from the mirror only when its blob id changed.

Secrets never reach a URL, an argument list (`ps`), a log or a message: the HTTPS token travels as an
`http.extraHeader` set through git's GIT_CONFIG_* environment variables, and the SSH key as a file only
the worker's user can read, deleted when the sync ends. Git runs with no system or user configuration,
no terminal prompt and only the transports this module allows.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import fnmatch
import hashlib
import os
import re
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, ClassVar
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings

from connectors.base import ConfigField, ItemError, PreviousItem, SourceError, SourceItem
from documents.ingestion.detect import decode_text
from documents.ingestion.errors import FileRejected

_CONFIG_KEYS = {"url", "branch", "include", "exclude", "username"}
_SECRET_KEYS = {"token", "ssh_key"}
_REMOTE_SCHEMES = {"http", "https", "ssh", "git"}
# user@host:path, as `git clone` reads it: ssh without a scheme.
_SCP_LIKE = re.compile(r"[\w.+-]+@[\w.-]+:(?!//).+")
# A NUL in the first 8 KB is how git itself tells a binary file.
_BINARY_PROBE = 8000
_SYMLINK_MODE = "120000"


@dataclass
class GitConnector:
    """A branch of a repository, its files filtered by path globs."""

    kind: ClassVar[str] = "git"
    label: ClassVar[str] = "Git repository"
    fields: ClassVar[tuple[ConfigField, ...]] = (
        ConfigField(
            "url",
            "Repository address",
            required=True,
            help="https://host/team/repo.git, ssh://git@host/team/repo.git, git@host:team/repo.git or git://host/repo.git.",
        ),
        ConfigField("branch", "Branch", help="Empty: the repository's default branch."),
        ConfigField(
            "include", "Include", type="lines", help="Path globs to take, one a line (docs/**, *.md); empty: every file."
        ),
        ConfigField("exclude", "Exclude", type="lines", help="Path globs to leave out, one a line (vendor/**, *.min.js)."),
        ConfigField("username", "User name", help="Sent with the token; most hosts accept any. Default: x-access-token."),
    )
    secret_fields: ClassVar[tuple[ConfigField, ...]] = (
        ConfigField("token", "Access token", help="For an https:// address: a token that may read the repository."),
        ConfigField("ssh_key", "SSH private key", help="For an ssh:// or user@host: address: the whole private key file."),
    )

    url: str
    branch: str = ""  # empty: the repository's default branch (its HEAD)
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    # The user name sent with the token (HTTP basic auth): hosts accept any for a token, some want theirs.
    username: str = "x-access-token"
    token: str = field(default="", repr=False)
    ssh_key: str = field(default="", repr=False)
    _cursor: str = field(default="", init=False)

    @classmethod
    def from_config(cls, config: Mapping[str, Any], secrets: Mapping[str, str]) -> GitConnector:
        unknown = sorted(set(config) - _CONFIG_KEYS)
        if unknown:
            raise SourceError(f"Unknown Git setting: {', '.join(unknown)} (known: {', '.join(sorted(_CONFIG_KEYS))}).")
        unknown = sorted(set(secrets) - _SECRET_KEYS)
        if unknown:
            raise SourceError(f"Unknown Git secret: {', '.join(unknown)} (known: token, ssh_key).")
        url = _check_url(config.get("url"))
        branch = config.get("branch") or ""
        if not isinstance(branch, str) or (branch and not _valid_branch(branch)):
            raise SourceError("branch: not a valid Git branch name.")
        username = config.get("username") or "x-access-token"
        if not isinstance(username, str) or ":" in username or not username.strip():
            raise SourceError("username: a user name without ':'.")
        token = secrets.get("token") or ""
        ssh_key = secrets.get("ssh_key") or ""
        if token and not url.startswith(("http://", "https://")):
            raise SourceError("token: a token is sent only over http:// or https://; use ssh_key for an SSH address.")
        if token and ("\n" in token or "\r" in token):
            raise SourceError("token: the token must be one line.")
        if ssh_key and "PRIVATE KEY" not in ssh_key:
            raise SourceError("ssh_key: not a private key (paste the whole file, BEGIN and END lines included).")
        return cls(
            url=url,
            branch=branch,
            include=_globs(config, "include"),
            exclude=_globs(config, "exclude"),
            username=username,
            token=token,
            ssh_key=ssh_key,
        )

    @property
    def cursor(self) -> str:
        return self._cursor

    def items(self, previous: Mapping[str, PreviousItem]) -> Iterator[SourceItem]:
        # The listing is read whole before the first item goes out: a failure half-way must be a
        # SourceError, never a short listing (the sync would archive the rest).
        with _Git(self) as git:
            commit = git.fetch()
            entries = git.tree(commit)
        matching = [e for e in entries if self._wanted(e.path)]
        limit = settings.CONNECTORS_GIT_MAX_FILES
        if len(matching) > limit:
            raise SourceError(
                f"The branch has {len(matching):,} files matching the globs, over the limit of {limit:,} "
                "(CONNECTORS_GIT_MAX_FILES): narrow them with include/exclude globs."
            )
        self._cursor = commit
        mirror = _mirror_path(self.url)
        for entry in matching:
            yield SourceItem(
                key=entry.path,
                name=entry.path,
                version=entry.blob,
                origin=f"{entry.path}@{commit}",
                fetch=_Reader(mirror, entry),
                title=entry.path,
                size=entry.size,
            )

    def _wanted(self, path: str) -> bool:
        if self.include and not any(_glob_match(path, g) for g in self.include):
            return False
        return not any(_glob_match(path, g) for g in self.exclude)


@dataclass(frozen=True)
class _Entry:
    path: str
    blob: str
    size: int


@dataclass(frozen=True)
class _Reader:
    """Reads one blob from the mirror, refusing what Cairn cannot import as text."""

    mirror: Path
    entry: _Entry

    def __call__(self) -> bytes:
        limit = settings.IMPORT_MAX_FILE_SIZE
        if self.entry.size > limit:
            raise ItemError(
                self.entry.path, f"the file is {_megabytes(self.entry.size)}, over the {_megabytes(limit)} limit per file."
            )
        result = _run(["git", "cat-file", "blob", self.entry.blob], cwd=self.mirror, env=_base_env())
        if result.returncode != 0:
            raise ItemError(
                self.entry.path, "the file could not be read from the repository's cache; the next sync reads it again."
            )
        data = result.stdout
        if b"\x00" in data[:_BINARY_PROBE]:
            raise ItemError(self.entry.path, "a binary file, not text.")
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            # Legacy encodings (Windows-1252, Shift-JIS...) are read as the import reads them; what reads as
            # no encoding is refused with the import's reason. Either way the document is UTF-8.
            try:
                return decode_text(data).encode("utf-8")
            except FileRejected as exc:
                raise ItemError(self.entry.path, exc.args[0] if exc.args else "not readable as text.") from exc
        return data


class _Git:
    """git commands on the repository's mirror, with the source's credentials for the fetch only."""

    def __init__(self, connector: GitConnector) -> None:
        self.connector = connector
        self.mirror = _mirror_path(connector.url)
        self._stack = contextlib.ExitStack()
        self._env: dict[str, str] = {}

    def __enter__(self) -> _Git:
        try:
            self.mirror.parent.mkdir(parents=True, exist_ok=True)
            # One sync at a time per mirror: two fetches into one repository would trip over git's lock files.
            lock = self._stack.enter_context(open(f"{self.mirror}.lock", "w"))
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (self.mirror / "HEAD").exists():
                init = ["git", "init", "--quiet", "--bare", str(self.mirror)]
                _check(_run(init, cwd=self.mirror.parent, env=_base_env()), self)
            self._env = self._fetch_env()
        except BaseException:
            self._stack.close()  # the lock and the key file: __exit__ is not called when __enter__ fails
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def _fetch_env(self) -> dict[str, str]:
        env = _base_env(allow_local=_is_local(self.connector.url))
        config: list[tuple[str, str]] = [("credential.helper", "")]
        if self.connector.token:
            pair = f"{self.connector.username}:{self.connector.token}".encode()
            config.append(("http.extraHeader", "Authorization: Basic " + base64.b64encode(pair).decode()))
        for i, (key, value) in enumerate(config):
            env[f"GIT_CONFIG_KEY_{i}"], env[f"GIT_CONFIG_VALUE_{i}"] = key, value
        env["GIT_CONFIG_COUNT"] = str(len(config))
        ssh = ["ssh", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=accept-new"]
        ssh += ["-o", f"UserKnownHostsFile={self.mirror.parent / 'known_hosts'}"]
        if self.connector.ssh_key:
            directory = self._stack.enter_context(tempfile.TemporaryDirectory(prefix="cairn-ssh-"))
            key_file = Path(directory) / "key"
            key_file.touch(mode=0o600)
            key_file.write_text(self.connector.ssh_key.strip() + "\n")
            ssh += ["-i", str(key_file), "-o", "IdentitiesOnly=yes"]
        env["GIT_SSH_COMMAND"] = " ".join(ssh)
        return env

    def fetch(self) -> str:
        """Fetch the branch (forced: a rewritten history moves the head) and return its commit."""
        branch = self.connector.branch or self._default_branch()
        ref = f"refs/heads/{branch}"
        result = _run(
            ["git", "fetch", "--quiet", "--no-tags", "--force", "--", self.connector.url, f"+{ref}:{ref}"],
            cwd=self.mirror,
            env=self._env,
            timeout=settings.CONNECTORS_GIT_TIMEOUT,
        )
        _check(result, self, branch=branch)
        commit = _run(["git", "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], cwd=self.mirror, env=_base_env())
        if commit.returncode != 0:
            raise SourceError(f"The branch {branch!r} of {self.safe_url} has no commit.")
        return commit.stdout.decode().strip()

    def _default_branch(self) -> str:
        result = _run(
            ["git", "ls-remote", "--symref", "--", self.connector.url, "HEAD"],
            cwd=self.mirror,
            env=self._env,
            timeout=settings.CONNECTORS_GIT_TIMEOUT,
        )
        _check(result, self)
        match = re.search(r"^ref: refs/heads/(\S+)\tHEAD$", result.stdout.decode(errors="replace"), re.MULTILINE)
        if match is None:
            raise SourceError(f"{self.safe_url} names no default branch (an empty repository?): set branch.")
        return match.group(1)

    def tree(self, commit: str) -> list[_Entry]:
        result = _run(["git", "ls-tree", "-r", "-z", "--long", "--full-tree", commit], cwd=self.mirror, env=_base_env())
        _check(result, self)
        entries = []
        for record in result.stdout.split(b"\x00"):
            if not record:
                continue
            meta, _, raw_path = record.partition(b"\t")
            mode, kind, blob, size = meta.decode().split()
            # Submodules (commits) and symbolic links hold no text of their own.
            if kind != "blob" or mode == _SYMLINK_MODE:
                continue
            entries.append(_Entry(path=raw_path.decode("utf-8", errors="replace"), blob=blob, size=int(size)))
        return entries

    @property
    def safe_url(self) -> str:
        return safe_url(self.connector.url)


def safe_url(url: str) -> str:
    """The URL without any user information, as messages show it."""
    parts = urlsplit(url)
    if parts.scheme and "@" in parts.netloc:
        return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
    return url


# What git says (LC_ALL=C), and what a person can do about it.
_UNREACHABLE = re.compile(
    r"Could not resolve host|Connection refused|Connection timed out|Failed to connect|unable to connect|"
    r"Network is unreachable|No route to host|unable to look up|Could not read from remote repository\.\s*$",
    re.IGNORECASE,
)
_CREDENTIALS = re.compile(
    r"Authentication failed|could not read Username|could not read Password|terminal prompts disabled|"
    r"The requested URL returned error: (401|403)|Permission denied \(publickey|Host key verification failed",
    re.IGNORECASE,
)
_NOT_A_REPOSITORY = re.compile(
    r"not a git repository|does not appear to be a git repository|Repository not found|"
    r"repository .* does not exist|repository '[^']*' not found|access denied or repository not exported|returned error: 404|not valid: is this a git repository",
    re.IGNORECASE,
)
_MISSING_BRANCH = re.compile(r"couldn't find remote ref", re.IGNORECASE)


def _check(result: subprocess.CompletedProcess[bytes], git: _Git, *, branch: str = "") -> None:
    if result.returncode == 0:
        return
    stderr = result.stderr.decode(errors="replace")
    url = git.safe_url
    if result.returncode == _TIMED_OUT:
        raise SourceError(f"Git gave up on {url} after {settings.CONNECTORS_GIT_TIMEOUT} s.", transient=True)
    if _MISSING_BRANCH.search(stderr):
        raise SourceError(f"The repository {url} has no branch {branch!r}.")
    if _CREDENTIALS.search(stderr):
        what = "the token" if git.connector.token else "the SSH key" if git.connector.ssh_key else "no credentials"
        raise SourceError(f"{url} refused access with {what}: check the token or key and that it may read the repository.")
    if _NOT_A_REPOSITORY.search(stderr):
        raise SourceError(f"{url} is not a Git repository (or it is not shared at that address).")
    if _UNREACHABLE.search(stderr):
        raise SourceError(f"{url} cannot be reached: check the address and that the host is up.", transient=True)
    if "transport" in stderr and "not allowed" in stderr:
        raise SourceError(f"{url}: that kind of address is not allowed here.")
    # Anything else: git's last line, with any secret taken out (it should hold none; this is a second lock).
    last = next((line for line in reversed(stderr.strip().splitlines()) if line.strip()), "no message")
    for secret in (git.connector.token, git.connector.ssh_key):
        if secret:
            last = last.replace(secret, "***")
    raise SourceError(f"Git could not read {url}: {last.removeprefix('fatal: ')[:300]}")


_TIMED_OUT = -999


def _run(
    args: Sequence[str], *, cwd: Path, env: Mapping[str, str], timeout: float | None = None
) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(args, cwd=cwd, env=dict(env), capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(args, _TIMED_OUT, b"", b"")


def _base_env(*, allow_local: bool = False) -> dict[str, str]:
    """git with no system or user configuration, never prompting, speaking only the allowed transports."""
    protocols = "http:https:ssh:git" + (":file" if allow_local else "")
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": tempfile.gettempdir(),
        "LC_ALL": "C",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_ASKPASS": "",
        "SSH_ASKPASS": "",
        "GIT_ALLOW_PROTOCOL": protocols,
    }


def _mirror_path(url: str) -> Path:
    """One bare mirror per repository address, whichever source or branch reads it."""
    digest = hashlib.sha256(url.encode()).hexdigest()[:24]
    return Path(settings.CONNECTORS_GIT_CACHE_DIR) / f"{digest}.git"


def _check_url(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise SourceError("url: the repository's address is required (https://, ssh://, git://, user@host:path).")
    url = value.strip()
    if url.startswith("-") or any(c.isspace() or ord(c) < 32 for c in url):
        raise SourceError("url: not a repository address.")
    parts = urlsplit(url)
    if parts.scheme in _REMOTE_SCHEMES:
        if not parts.hostname:
            raise SourceError("url: the address names no host.")
        if parts.password or (parts.username and parts.scheme in ("http", "https")):
            raise SourceError("url: put no credentials in the address; give the token as the source's secret.")
        return url
    if _SCP_LIKE.fullmatch(url):
        return url
    if parts.scheme == "file" or (not parts.scheme and url.startswith("/")):
        _check_local(Path(parts.path if parts.scheme == "file" else url))
        return url
    raise SourceError("url: use an https://, http://, ssh://, git:// or user@host:path address.")


def _check_local(path: Path) -> None:
    """A repository on the server's own disk: only inside CONNECTORS_LOCAL_ROOTS, as a folder source."""
    roots = [Path(r).resolve() for r in settings.CONNECTORS_LOCAL_ROOTS]
    if not roots:
        raise SourceError(
            "url: repositories on the server's own disk are turned off here; an operator lists the folders "
            "sources may read in CONNECTORS_LOCAL_ROOTS."
        )
    resolved = path.resolve()
    if not any(resolved == root or resolved.is_relative_to(root) for root in roots):
        raise SourceError(f"url: {path} is outside the folders this server may read.")


def _is_local(url: str) -> bool:
    return url.startswith(("/", "file://"))


def _valid_branch(name: str) -> bool:
    result = _run(["git", "check-ref-format", "--branch", name], cwd=Path(tempfile.gettempdir()), env=_base_env())
    return result.returncode == 0 and not name.startswith("-")


def _globs(config: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = config.get(key) or []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(g, str) and g.strip() for g in value):
        raise SourceError(f'{key}: a list of path globs, such as ["docs/**", "*.md"].')
    return tuple(g.strip().lstrip("/") for g in value)


def _glob_match(path: str, pattern: str) -> bool:
    """`docs/**` matches below docs/; a pattern with no slash matches a file name at any depth (as .gitignore)."""
    if "/" not in pattern:
        return fnmatch.fnmatchcase(PurePosixPath(path).name, pattern)
    return _full_match(path, pattern)


def _full_match(path: str, pattern: str) -> bool:
    """`**` as any number of directories, `*` and `?` within one (PurePath.full_match, Python 3.13)."""
    regex = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            regex += "(?:.*/)?"
            i += 3
        elif pattern.startswith("**", i):
            regex += ".*"
            i += 2
        elif pattern[i] == "*":
            regex += "[^/]*"
            i += 1
        elif pattern[i] == "?":
            regex += "[^/]"
            i += 1
        else:
            regex += re.escape(pattern[i])
            i += 1
    return re.fullmatch(regex, path) is not None


def _megabytes(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MB"
