"""Entity names, kinds and counts: a viewer is shown the graph their own documents make, whatever else the team holds.

An entity is shared by every document of the team that names it, each spelling it its own way; what a
viewer is shown of it (graph.entities, graph.entity, the MCP entity tools, the /graph page that draws
from graph.entities and graph.entity, and the facts an answer is given) comes from the passages they can
read only.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from django.db import transaction

from documents.models import Document
from permissions.models import User
from rag.answering.passages import Passage, connecting_facts
from rag.indexing.graph_extraction import rename_document_entity
from rag.indexing.pipeline import index_documents
from rag.mcp import tools
from rag.models import Chunk, Entity
from rag.retrieval.explore import entity_list
from tests.access_matrix import build_random_matrix
from tests.conftest import Api, ApiFor, Cast
from tests.factories import DocumentFactory

MODEL = "fake-embedding"

# Each name in the spellings documents write it in. The proper-name rule reads them all as the same entity
# (one key), a code identifier and a lower-case heading too (other kinds of the same key).
SPELLINGS = {
    "kestrel ops": ["Kestrel Ops", "Kestrel OPS", "KesTrel Ops", "Kestrel-OPS Unit"],
    "amber gate": ["Amber Gate", "Amber GATE", "AmBer Gate"],
    "night crew": ["Night Crew", "Night CREW", "NiGht Crew"],
    "harbor deployer": ["Harbor Deployer", "Harbor DEPLOYER", "HarBor Deployer"],
}
NAMES = sorted(SPELLINGS)


def spelt(rng: random.Random, key: str | None = None) -> str:
    return rng.choice(SPELLINGS[key or rng.choice(NAMES)])


def write_corpus(docs: list[Document], rng: random.Random) -> None:
    """Titles are some spelling of a name or a field report; texts name others as proper names, code, headings,
    wiki links and lower-case words (a title's, found only as a title)."""
    for d in docs:
        d.title = spelt(rng) if rng.random() < 0.4 else f"Field Report {rng.randint(1, 3)}"
        a, b, c = rng.sample(NAMES, 3)
        d.text = (
            f"{spelt(rng, a)} met {spelt(rng, b)} at the depot.\n\n"
            f"## {rng.choice(NAMES).capitalize()}\n\n"
            f"They ran `{c.replace(' ', '_')}` with {rng.choice(NAMES)} and [[{spelt(rng)}]]."
        )
    Document.objects.bulk_update(docs, ["title", "text"])


def shown(user: User, api: Api) -> dict[str, Any]:
    """Everything the graph shows `user` about its entities, by the API, the MCP tools and an answer's facts.

    Entity ids are replaced by their keys: a graph read again gives its entities new ids.
    """
    assert user.team_id is not None
    key_of = {str(pk): key for pk, key in Entity.objects.filter(team_id=user.team_id).values_list("id", "key")}

    def keyed(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: key_of[v] if k == "id" and v in key_of else keyed(v) for k, v in value.items()}
        if isinstance(value, list):
            return [keyed(v) for v in value]
        return value

    listed = api.post("graph.entities", {"query": "", "limit": 100})
    assert listed.status_code == 200, listed.json()
    entities = listed.json()
    assert entities["pagination"]["total"] <= 100, "one page holds every entity"
    details = []
    for entity in entities["data"]:
        detail = api.post("graph.entity", {"id": entity["id"], "limit": 100})
        assert detail.status_code == 200, detail.json()
        details.append(detail.json())
    mcp_list = tools.call("find_entities", caller=tools.Caller(user=user, can_write=False), arguments={"query": "", "limit": 100})
    mcp_details = [
        tools.call("get_entity", caller=tools.Caller(user=user, can_write=False), arguments={"id": e["id"], "limit": 100})
        for e in entities["data"]
    ]
    return {
        "graph.entities": keyed(entities),
        "graph.entity": keyed(details),
        "find_entities": keyed(mcp_list),
        "get_entity": keyed(mcp_details),
        "answer facts": answer_facts(user),
    }


def answer_facts(user: User) -> list:
    """The graph facts an answer citing every passage the user can read would be given."""
    chunks = (
        Chunk.objects.filter(document__in=Document.objects.visible_to(user), model_id=MODEL)
        .order_by("document__title", "document_id", "chunk_index")
        .values_list("pk", "document_id", "chunk_index", "chunk_text")
    )
    passages = [
        Passage(
            n=n,
            chunk_id=pk,
            document_id=document_id,
            title="",
            url="",
            version=1,
            chunk_index=index,
            start=0,
            end=len(text),
            score=1.0,
            similarity=1.0,
            text=text,
        )
        for n, (pk, document_id, index, text) in enumerate(chunks, start=1)
    ]
    return connecting_facts(passages)


def read_again_from_only(user: User) -> None:
    """Leave the team only the documents `user` can read, and read the whole graph again from them alone."""
    assert user.team_id is not None
    visible = list(Document.objects.visible_to(user).values_list("pk", flat=True))
    Document.objects.filter(team_id=user.team_id).exclude(pk__in=visible).delete()
    Document.objects.exclude(team_id=user.team_id).delete()
    Entity.objects.all().delete()  # their mentions and relations go with them
    for document in Document.objects.filter(pk__in=visible):
        rename_document_entity(document=document, model_id=MODEL)  # reads its facts again


@pytest.mark.parametrize("seed", [7, 8])
def test_every_name_kind_and_count_shown_is_that_of_a_graph_read_from_only_the_viewers_documents(
    db: None, api_for: ApiFor, seed: int
) -> None:
    """The oracle: delete what a user cannot read, drop every entity and read the graph again from the rest,
    so no spelling, kind or count of a document they cannot read can survive; nothing shown may differ."""
    users, docs, *_ = build_random_matrix(seed, documents=90)
    rng = random.Random(seed)
    write_corpus(docs, rng)
    index_documents(document_ids=[d.pk for d in docs if d.deleted_at is None])
    first_spelling = dict(Entity.objects.values_list("id", "name"))
    compared = respelt = 0
    for user in users[:8]:
        api = api_for(user)
        expected = shown(user, api)
        compared += bool(expected["graph.entities"]["data"]) and bool(expected["answer facts"])
        respelt += sum(entity.name != first_spelling[entity.id] for entity in entity_list(user=user, query="", limit=100)[0])
        with transaction.atomic():
            read_again_from_only(user)
            assert shown(user, api) == expected, f"{user.username}: documents they cannot read changed their graph"
            transaction.set_rollback(True)
    assert compared >= 4, "the oracle compared real entities and facts"
    assert respelt >= 4, "the oracle compared entities a viewer spells otherwise than the chunk that named them first"


def test_a_reader_sees_an_entity_as_their_passages_spell_it_not_as_a_private_title_does(cast: Cast, api_for: ApiFor) -> None:
    private = DocumentFactory.create(
        collection=cast.private, created_by=cast.alice, title="Kestrel-OPS", text="The night shift is run by the unit."
    )
    index_documents(document_ids=[private.pk])  # the entity is first read from the private title
    rota = DocumentFactory.create(
        collection=cast.handbook, created_by=cast.alice, title="Rota", text="Kestrel Ops covers the harbour."
    )
    index_documents(document_ids=[rota.pk])

    def kestrel(user: User) -> dict[str, Any]:
        (entity,) = api_for(user).post("graph.entities", {"query": "kestrel ops"}).json()["data"]
        return {k: entity[k] for k in ("name", "kind", "mentions", "documents")}

    assert kestrel(cast.bob) == {"name": "Kestrel Ops", "kind": "name", "mentions": 1, "documents": 1}
    assert kestrel(cast.alice) == {"name": "Kestrel-OPS", "kind": "document", "mentions": 2, "documents": 2}


def test_an_oddly_cased_guess_reads_back_in_its_own_spelling_whatever_else_exists(cast: Cast, api_for: ApiFor) -> None:
    """A writer cannot learn that a private document names something by writing a guess and reading back the spelling."""
    plans = DocumentFactory.create(
        collection=cast.private, created_by=cast.alice, title="Plans", text="Project Nightjar starts in May."
    )
    index_documents(document_ids=[plans.pk])
    guess = DocumentFactory.create(
        collection=cast.handbook, created_by=cast.alice, title="Guess", text="PRoject NightJAR starts soon."
    )
    index_documents(document_ids=[guess.pk])
    api = api_for(cast.bob)
    assert [e["name"] for e in api.post("graph.entities", {"query": "nightjar"}).json()["data"]] == ["PRoject NightJAR"]
    (guessed,) = api.post("graph.entities", {"query": "guess"}).json()["data"]
    neighbours = api.post("graph.entity", {"id": guessed["id"]}).json()["data"]["neighbours"]
    assert {n["entity"]["name"] for n in neighbours} == {"PRoject NightJAR"}
    mcp = tools.call("find_entities", caller=tools.Caller(user=cast.bob, can_write=False), arguments={"query": "nightjar"})
    assert [e["name"] for e in mcp["data"]] == ["PRoject NightJAR"]
