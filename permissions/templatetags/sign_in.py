"""What the sign-in page offers besides a password: single sign-on, when it is configured."""

from __future__ import annotations

from typing import Any

from django import template
from django.conf import settings

register = template.Library()


@register.inclusion_tag("permissions/sso_button.html")
def sso_button(next_url: str = "") -> dict[str, Any]:
    return {"enabled": settings.OIDC_ENABLED, "provider": settings.OIDC_PROVIDER_NAME, "next": next_url}
