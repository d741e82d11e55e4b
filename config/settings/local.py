"""Running Cairn on a developer machine or the embedded default (`make run`): production's shape, debug off unless asked for."""

from __future__ import annotations

from .base import *
