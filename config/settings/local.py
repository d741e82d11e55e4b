"""Running Cairn on a developer machine or the embedded default."""
from __future__ import annotations

from .base import *  # noqa: F401,F403
from .base import _bool

DEBUG = _bool("DEBUG", True)
