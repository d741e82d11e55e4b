"""Running Cairn on a developer machine or the embedded default."""
from __future__ import annotations

from .base import *  # noqa: F401,F403
from .base import env

DEBUG = env.bool("DEBUG", default=True)
