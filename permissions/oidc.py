"""Single sign-on with OpenID Connect: mozilla-django-oidc's code flow, Cairn's accounts.

The library runs the protocol: state, nonce and PKCE kept in the session, the code exchanged for tokens,
the ID token's signature checked against the provider's keys, the userinfo fetched. This module adds
what it leaves out: the provider's endpoints from its discovery document, the ID token's audience and
issuer, and who the person is in Cairn: the user linked to the provider's (issuer, subject), in the team
and groups the claims name. A sign-in Cairn refuses ends on a page that says why.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Mapping
from typing import Any

import jwt
import requests
from django.conf import settings
from django.contrib.auth.backends import ModelBackend
from django.core.cache import cache
from django.core.exceptions import SuspiciousOperation, ValidationError
from django.core.validators import validate_email
from django.db import IntegrityError, transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views import View
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.utils import import_from_settings
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from config.csp import with_csp
from permissions.models import ExternalIdentity, Group, GroupMembership, Team, User

logger = logging.getLogger(__name__)

DISCOVERY_CACHE_SECONDS = 3600
# mozilla-django-oidc's names for the endpoints, and the discovery document's.
_ENDPOINTS = {
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "authorization_endpoint",
    "OIDC_OP_TOKEN_ENDPOINT": "token_endpoint",
    "OIDC_OP_USER_ENDPOINT": "userinfo_endpoint",
    "OIDC_OP_JWKS_ENDPOINT": "jwks_uri",
}


class SignInRefused(Exception):
    """The provider vouched for someone Cairn does not sign in; the message tells them why."""


class ProviderUnavailable(Exception):
    """The provider could not be reached, or its discovery document is not one Cairn can use."""


def provider_configuration() -> dict[str, str]:
    """The provider's issuer and endpoints from its discovery document, fetched at most once an hour."""
    issuer = settings.OIDC_ISSUER
    key = "oidc-discovery:" + hashlib.sha256(issuer.encode()).hexdigest()
    document = cache.get(key)
    if document is None:
        document = _fetch_discovery(issuer)
        cache.set(key, document, DISCOVERY_CACHE_SECONDS)
    return document


def _fetch_discovery(issuer: str) -> dict[str, str]:
    url = issuer.rstrip("/") + "/.well-known/openid-configuration"
    try:
        response = requests.get(url, timeout=settings.OIDC_TIMEOUT)
        response.raise_for_status()
        document = response.json()
    except (requests.RequestException, ValueError) as exc:
        raise ProviderUnavailable(f"{url}: {exc}") from exc
    names = ("issuer", *_ENDPOINTS.values())
    missing = [name for name in names if not isinstance(document, dict) or not isinstance(document.get(name), str)]
    if missing:
        raise ProviderUnavailable(f"{url} lacks {', '.join(missing)}")
    if document["issuer"].rstrip("/") != issuer.rstrip("/"):
        # OpenID Connect Discovery 1.0, section 4.3: a document that names another issuer must not be used.
        raise ProviderUnavailable(f"{url} names the issuer {document['issuer']!r}, not {issuer!r}")
    return {name: document[name] for name in names}


def _setting(attr: str, *default: Any) -> Any:
    """What the library reads from settings, the provider's endpoints from its discovery document."""
    if attr in _ENDPOINTS:
        return provider_configuration()[_ENDPOINTS[attr]]
    return import_from_settings(attr, *default)


# Who the claims stand for


@transaction.atomic
def oidc_sign_in(*, issuer: str, claims: Mapping[str, Any]) -> User:
    """The user the provider's verified claims stand for: found by their link to (issuer, sub), else linked
    by an email address the provider verified, else created; in the team the claims name and, with a
    groups claim configured, in exactly the groups of that team they name. Raises SignInRefused."""
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject:
        raise SignInRefused("The provider did not say who you are.")
    team = _claimed_team(claims)
    identity = ExternalIdentity.objects.select_related("user").select_for_update().filter(issuer=issuer, subject=subject).first()
    user = identity.user if identity else _linked_or_new_user(issuer=issuer, subject=subject, claims=claims, team=team)
    if not user.is_active:
        raise SignInRefused("Your Cairn account is disabled. Ask an operator.")
    if user.team_id is None:
        user.team = team
    elif user.team_id != team.pk:
        raise SignInRefused(f"Your Cairn account belongs to another team than {team.name}. Ask an operator to move it.")
    for field, claim in (("first_name", "given_name"), ("last_name", "family_name")):
        if isinstance(claims.get(claim), str):
            setattr(user, field, claims[claim].strip()[:150])
    user.save()
    if settings.OIDC_GROUPS_CLAIM:
        _sync_groups(user=user, team=team, names=_claimed_groups(claims))
    logger.info("single sign-on: %s at %s signed in as %s (team %s)", subject, issuer, user.username, team.pk)
    return user


def _claim_text(claims: Mapping[str, Any], name: str) -> str:
    value = claims.get(name)
    if isinstance(value, list) and len(value) == 1:  # some providers send every mapped attribute as a list
        value = value[0]
    if value is None:
        return ""
    if not isinstance(value, str):
        raise SignInRefused(f"The provider's “{name}” claim must name one team.")
    return value.strip()


def _claimed_team(claims: Mapping[str, Any]) -> Team:
    name = (_claim_text(claims, settings.OIDC_TEAM_CLAIM) if settings.OIDC_TEAM_CLAIM else "") or settings.OIDC_DEFAULT_TEAM
    if not name:
        raise SignInRefused(
            f"The provider did not say which team you belong to (no “{settings.OIDC_TEAM_CLAIM}” claim). Ask your administrator."
        )
    teams = list(Team.objects.filter(name=name)[:2])
    if len(teams) > 1:
        raise SignInRefused(f"Several Cairn teams are called {name}. Ask an operator to rename one.")
    if teams:
        return teams[0]
    if not settings.OIDC_CREATE_TEAMS:
        raise SignInRefused(f"Cairn has no team called {name}. Ask an operator to create it.")
    team = Team(name=name)
    try:
        team.full_clean()
    except ValidationError as exc:
        raise SignInRefused(f"The provider's team name cannot name a Cairn team: {'; '.join(exc.messages)}") from exc
    team.save()
    return team


def _claimed_groups(claims: Mapping[str, Any]) -> set[str]:
    value = claims.get(settings.OIDC_GROUPS_CLAIM)
    if value is None:  # providers leave the claim out for someone in no group
        return set()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
        raise SignInRefused(f"The provider's “{settings.OIDC_GROUPS_CLAIM}” claim must be a list of group names.")
    return {name.strip() for name in value}


def _sync_groups(*, user: User, team: Team, names: set[str]) -> None:
    """Make the user's groups in `team` those named; groups Cairn does not have are ignored, not created."""
    wanted = set(Group.objects.filter(team=team, name__in=names).values_list("pk", flat=True))
    held = set(GroupMembership.objects.filter(user=user, group__team=team).values_list("group_id", flat=True))
    # Only what changed is written: each write makes the team's cached answers stale.
    GroupMembership.objects.filter(user=user, group_id__in=held - wanted).delete()
    for group_id in wanted - held:
        GroupMembership.objects.create(user=user, group_id=group_id)


def _linked_or_new_user(*, issuer: str, subject: str, claims: Mapping[str, Any], team: Team) -> User:
    """A first sign-in: the user who has the address the provider verified, or a new one.

    An address the provider has not verified links nothing: whoever could set it at the provider would
    take over the account that has it."""
    claimed_email = claims.get("email")
    email = claimed_email.strip() if isinstance(claimed_email, str) else ""
    verified = bool(email) and claims.get("email_verified") in (True, "true")
    holders = list(User.objects.filter(email__iexact=email)[:2]) if email else []
    if holders and not verified:
        raise SignInRefused(
            "A Cairn account already has your email address, and the provider has not verified that the address is yours. "
            "Ask an operator to link your account."
        )
    if len(holders) > 1:
        raise SignInRefused("Several Cairn accounts have your email address. Ask an operator to link yours.")
    if holders:
        user = holders[0]
        if user.is_staff or user.is_superuser:
            raise SignInRefused(
                "Operators' accounts are not linked by email address. Sign in with your password, or ask an operator to link it."
            )
        if user.external_identities.filter(issuer=issuer).exists():
            raise SignInRefused("The Cairn account with your email address is linked to another account at the provider.")
    else:
        user = User(username=_free_username(claims, email), email=_valid_email(email) if verified else "", team=team)
        user.set_unusable_password()  # signs in through the provider; an operator may set a password
        user.save()
    ExternalIdentity.objects.create(user=user, issuer=issuer, subject=subject)
    return user


def _valid_email(email: str) -> str:
    try:
        validate_email(email)
    except ValidationError:
        return ""
    return email


def _free_username(claims: Mapping[str, Any], email: str) -> str:
    """The name the provider prefers (else the address), in the characters Django allows, made unique."""
    preferred = claims.get("preferred_username")
    base = re.sub(r"[^\w.@+-]", "", preferred if isinstance(preferred, str) and preferred.strip() else email)[:140] or "user"
    candidate, n = base, 1
    while User.objects.filter(username__iexact=candidate).exists():
        n += 1
        candidate = f"{base}-{n}"
    return candidate


# The library's backend and views, fitted to Cairn


class OidcBackend(OIDCAuthenticationBackend):
    """Signs in the person the provider's ID token names; only ever for the callback's code exchange."""

    get_settings = staticmethod(_setting)

    def __init__(self) -> None:
        # Not the library's __init__, which reads the endpoints: Django makes a backend for every password
        # sign-in and every request of a signed-in user, and those must not wait on the provider.
        self.UserModel = User
        self.OIDC_RP_CLIENT_ID = settings.OIDC_RP_CLIENT_ID
        self.OIDC_RP_CLIENT_SECRET = settings.OIDC_RP_CLIENT_SECRET
        self.OIDC_RP_SIGN_ALGO = settings.OIDC_RP_SIGN_ALGO
        self.OIDC_RP_IDP_SIGN_KEY = None

    @property
    def OIDC_OP_TOKEN_ENDPOINT(self) -> str:
        return provider_configuration()["token_endpoint"]

    @property
    def OIDC_OP_USER_ENDPOINT(self) -> str:
        return provider_configuration()["userinfo_endpoint"]

    @property
    def OIDC_OP_JWKS_ENDPOINT(self) -> str:
        return provider_configuration()["jwks_uri"]

    def authenticate(self, request: HttpRequest | None, **kwargs: Any) -> User | None:
        # The callback passes the nonce it kept; a password sign-in (or a crafted ?code= on it) is not this backend's.
        if not settings.OIDC_ENABLED or "nonce" not in kwargs or "password" in kwargs:
            return None
        return super().authenticate(request, **kwargs)

    def retrieve_matching_jwk(self, token: str | bytes) -> jwt.PyJWK:
        """The provider's signing key for this token: the one its `kid` names, or the only one when it names none
        (the library requires a `kid`, which OpenID Connect leaves out where the provider has one key)."""
        header = jwt.get_unverified_header(token)
        response = requests.get(self.OIDC_OP_JWKS_ENDPOINT, timeout=settings.OIDC_TIMEOUT)
        response.raise_for_status()
        keys = [
            key
            for key in response.json().get("keys", [])
            if key.get("use", "sig") == "sig"
            and key.get("alg", header.get("alg")) == header.get("alg")
            and ("kid" not in header or key.get("kid") == header["kid"])
        ]
        if len(keys) != 1:
            raise SuspiciousOperation(f"{len(keys)} of the provider's keys match the token's, not one")
        try:
            return jwt.PyJWK(keys[0], algorithm=header.get("alg"))
        except jwt.PyJWTError as exc:
            raise SuspiciousOperation(f"the provider's key cannot be used: {exc}") from exc

    def get_payload_data(self, token: str | bytes, key: Any) -> dict[str, Any]:
        """The token's claims once its signature, expiry, audience and issuer are checked (the library skips the last two)."""
        try:
            return jwt.decode(
                token,
                key,
                algorithms=[self.OIDC_RP_SIGN_ALGO],
                audience=self.OIDC_RP_CLIENT_ID,
                issuer=provider_configuration()["issuer"],
                options={"require": ["iss", "aud", "sub"]},
            )
        except jwt.PyJWTError as exc:
            raise SuspiciousOperation(f"token refused: {exc}") from exc

    def get_or_create_user(self, access_token: str, id_token: str, payload: dict[str, Any]) -> User:
        if "exp" not in payload:
            raise SuspiciousOperation("the ID token has no expiry")
        userinfo = self.get_userinfo(access_token, id_token, payload)
        if userinfo.get("sub") != payload["sub"]:
            # OpenID Connect Core 1.0, section 5.3.2: userinfo about another subject must not be used.
            raise SuspiciousOperation("the userinfo names another subject than the ID token")
        # Some providers put claims (Entra ID's groups) in the ID token only; userinfo is the fresher.
        return oidc_sign_in(issuer=payload["iss"], claims={**payload, **userinfo})

    def get_user(self, user_id: Any) -> User | None:
        # The library's get_user skips Django's check that the user is still active.
        return ModelBackend.get_user(self, user_id)


def _sign_in_problem(request: HttpRequest, message: str, *, status: int = 403) -> HttpResponse:
    return render(request, "permissions/sign_in_problem.html", {"message": message}, status=status)


class OidcStartView(OIDCAuthenticationRequestView):
    """GET /login/sso: off to the provider's sign-in, with state, nonce and PKCE kept in the session."""

    get_settings = staticmethod(_setting)

    def __init__(self, **kwargs: Any) -> None:
        View.__init__(self, **kwargs)  # the library's __init__ reads the endpoint; this reads it at the request

    def get(self, request: HttpRequest) -> HttpResponse:
        if not settings.OIDC_ENABLED:
            raise Http404
        try:
            self.OIDC_OP_AUTH_ENDPOINT = provider_configuration()["authorization_endpoint"]
        except ProviderUnavailable as exc:
            logger.warning("single sign-on: %s", exc)
            return _sign_in_problem(request, "The sign-in provider could not be reached. Try again in a moment.", status=502)
        self.OIDC_RP_CLIENT_ID = settings.OIDC_RP_CLIENT_ID
        return super().get(request)


class OidcCallbackView(OIDCAuthenticationCallbackView):
    """GET /login/sso/callback: the provider sends the person back here with a code, or an error."""

    get_settings = staticmethod(_setting)

    def get(self, request: HttpRequest) -> HttpResponse:
        if not settings.OIDC_ENABLED:
            raise Http404
        try:
            return super().get(request)
        except SignInRefused as refusal:
            return _sign_in_problem(request, str(refusal))
        except SuspiciousOperation as exc:  # a state this browser was not given, a token that does not verify
            logger.warning("single sign-on refused: %s", exc)
            return _sign_in_problem(request, "The sign-in could not be verified. Start again.", status=400)
        except (requests.RequestException, ProviderUnavailable) as exc:
            logger.warning("single sign-on: the provider failed: %s", exc)
            return _sign_in_problem(request, "The sign-in provider could not be reached. Try again in a moment.", status=502)
        except IntegrityError:  # the same person's first sign-in, twice at once: the other one won
            return _sign_in_problem(request, "You were signing in twice at once. Start again.", status=409)
        except Exception:  # what the provider sent could not be read (a token response without a token, ...)
            logger.exception("single sign-on: the provider's answer could not be used")
            return _sign_in_problem(request, "The sign-in provider's answer could not be used. Try again.", status=502)

    def login_failure(self) -> HttpResponse:
        if self.request.GET.get("error"):
            return _sign_in_problem(self.request, "The provider did not sign you in.")
        return _sign_in_problem(self.request, "The sign-in could not be completed. Start again.", status=400)


sso_start_page = with_csp(OidcStartView.as_view())
sso_callback_page = with_csp(OidcCallbackView.as_view())
