"""Running Cairn on a developer machine or the embedded default."""

from __future__ import annotations

from .base import *
from .base import _bool

DEBUG = _bool("DEBUG", True)
