from __future__ import annotations

import pytest

from documents.models import Collection
from permissions.models import Access
from tests.conftest import Cast
from tests.factories import CollectionFactory


@pytest.fixture
def collection_writable_by_bob(cast: Cast) -> Collection:
    return CollectionFactory.create(team=cast.alice.team, name="Scratch", default_access=Access.READ_WRITE)
