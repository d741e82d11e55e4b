"""Exact scan or HNSW walk: chosen from the scope actually searched, and never a short page."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator

import pytest
from django.db import connection

from rag.corpus import vector_index
from rag.indexing.pipeline import index_documents
from rag.models import Chunk
from rag.retrieval import vector
from rag.retrieval.query import embed_query
from rag.retrieval.search import search
from rag.retrieval.stats import scope_index_stats
from rag.retrieval.visibility import search_scope
from tests.factories import CollectionFactory, DocumentFactory, DocumentMembershipFactory


@pytest.mark.parametrize(
    ("limit", "scope_chunks", "model_chunks", "path"),
    [
        (10, 4, 100_000, "exact"),  # one document
        (10, 200, 100_000, "exact"),  # reading 200 rows costs less than reranking 200 sign-bit neighbours
        (50, 1_000, 100_000, "signs"),  # a collection: 1% of the index, a walk would miss (recall)
        (10, 3_000, 20_000, "signs"),  # 15%: a walk would miss
        (50, 10_000, 100_000, "signs"),  # the design's user, who sees 10% of 100k chunks
        (50, 100_000, 1_000_000, "signs"),  # a user who sees 10% of a million chunks
        (10, 30_000, 100_000, "hnsw"),  # 30% of the index: 400 entries walked cost less than 30,000 sign bits
        (10, 300_000, 1_000_000, "hnsw"),  # 30% of a million
        (10, 1_000_000, 1_000_000, "hnsw"),  # everything
        (10, 300_000, 10_000_000, "hnsw"),  # 3%, but past the sign-bit scan's cap
    ],
)
def test_the_path_follows_the_scopes_size_and_its_share_of_the_index(settings, limit, scope_chunks, model_chunks, path):
    settings.RAG_EXACT_SEARCH_MAX_CHUNKS = 0
    assert vector.choose_path(limit=limit, scope_chunks=scope_chunks, model_chunks=model_chunks) == path


def test_a_longer_walk_is_weighed_against_the_sign_bits_it_would_replace(settings):
    # 30% of a 100k index: 400 entries walked by default, cheaper than 30,000 rows' sign bits and their rerank.
    settings.RAG_EXACT_SEARCH_MAX_CHUNKS = 0
    assert vector.choose_path(limit=10, scope_chunks=30_000, model_chunks=100_000) == "hnsw"
    # Gathering 300 chunks of the scope means walking 1,000 entries: the sign bits are cheaper.
    settings.RAG_HNSW_WALK_ROWS = 300
    assert vector.choose_path(limit=10, scope_chunks=30_000, model_chunks=100_000) == "signs"


def test_with_sign_bits_turned_off_a_scope_is_scanned_or_walked_whichever_reads_less(settings):
    settings.RAG_EXACT_SEARCH_MAX_CHUNKS = 0
    settings.RAG_SIGN_BITS_MAX_SHARE = 0
    assert vector.choose_path(limit=50, scope_chunks=100_000, model_chunks=1_000_000) == "hnsw"
    assert vector.choose_path(limit=10, scope_chunks=1_500, model_chunks=20_000) == "exact"  # 400 entries cost 2,000 rows
    # A narrower share than the default's quarter is still a walk's when the setting says so.
    settings.RAG_SIGN_BITS_MAX_SHARE = 0.05
    assert vector.choose_path(limit=50, scope_chunks=100_000, model_chunks=1_000_000) == "hnsw"
    assert vector.choose_path(limit=50, scope_chunks=40_000, model_chunks=1_000_000) == "signs"


def test_scopes_up_to_the_setting_are_always_scanned_exactly(settings):
    settings.RAG_EXACT_SEARCH_MAX_CHUNKS = 50_000
    assert vector.choose_path(limit=10, scope_chunks=30_000, model_chunks=100_000) == "exact"


def test_a_collection_search_is_sized_by_the_collection_not_the_team(cast, monkeypatch):
    notes = CollectionFactory(team=cast.alice.team, name="Notes")
    small = DocumentFactory(collection=notes, text="Owls hunt mice at night.")
    others = [DocumentFactory(collection=cast.handbook, text=f"Bees number {i} pollinate apple trees.") for i in range(6)]
    index_documents(document_ids=[small.pk, *(d.pk for d in others)])
    seen: list[dict] = []
    choose = vector.choose_path
    monkeypatch.setattr(vector, "choose_path", lambda **kwargs: seen.append(kwargs) or choose(**kwargs))
    search(user=cast.alice, query="owls hunt", mode="vector", collection_id=notes.pk)
    search(user=cast.alice, query="owls hunt", mode="vector", document_id=others[0].pk)
    search(user=cast.alice, query="owls hunt", mode="vector")
    assert [call["scope_chunks"] for call in seen] == [1, 1, 7]
    assert {call["model_chunks"] for call in seen} == {7}


@contextlib.contextmanager
def sent_statements() -> Iterator[list[tuple[str, list]]]:
    """The statements (SQL and parameters) the block sends to the database, in order."""
    statements: list[tuple[str, list]] = []

    def capture(execute, sql, params, many, context):
        statements.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(capture):
        yield statements


def rank_for(user, query: list[float], *, limit: int, model_chunks: int, path: vector.Path) -> list:
    """The user's visible chunks ranked for `query` by `path`, as search would call it for their whole scope."""
    scope = search_scope(user=user)
    return vector.vector_ranking(
        scope=scope,
        vector=query,
        model_id="fake-embedding",
        dimension=384,
        limit=limit,
        threshold=-1.0,
        scope_chunks=scope_index_stats(scope, model_id="fake-embedding").chunks,
        model_chunks=model_chunks,
        path=path,
    )


@pytest.fixture
def far_scope(db, cast):
    """Bob sees three notes about bees; the closest chunks to an owl question are in a collection he cannot see."""
    vector_index._ensured.clear()  # an index an earlier test made went with its transaction
    vector_index.ensure_vector_index("fake-embedding", 384)  # DDL before this test's first write
    hidden = CollectionFactory(team=cast.alice.team, name="Hidden", default_access="none")
    owls = [DocumentFactory(collection=hidden, text=f"Owls hunt mice at night, owl {i}.") for i in range(300)]
    bees = [DocumentFactory(collection=cast.handbook, text=f"Bees make honey in hive {i}.") for i in range(3)]
    index_documents(document_ids=[d.pk for d in [*owls, *bees]])
    return bees


def test_a_walk_that_gives_up_before_the_page_is_full_is_finished_by_an_exact_scan(cast, far_scope, monkeypatch):
    # A walk allowed one index entry: the owls around the query are all out of bob's scope.
    monkeypatch.setattr(vector, "ef_search", lambda limit, model_chunks=0: 1)
    monkeypatch.setattr(vector, "MAX_SCAN_TUPLES", 1)
    walked: list[int] = []
    walk = vector._walk
    monkeypatch.setattr(vector, "_walk", lambda *a, **kw: walked.append(len(rows := walk(*a, **kw))) or rows)
    hits = rank_for(cast.bob, embed_query("owls hunt mice"), limit=3, model_chunks=303, path="hnsw")
    assert walked and walked[0] < 3, "the walk itself came back short"
    assert sorted(h.document_id for h in hits) == sorted(d.pk for d in far_scope)


def test_a_walk_reads_the_hnsw_index(cast, far_scope):
    from django.db import transaction

    scope = search_scope(user=cast.alice)
    with sent_statements() as statements:
        vector._walk(
            scope,
            "[" + ",".join(["0.05"] * 384) + "]",
            model_id="fake-embedding",
            dimension=384,
            limit=10,
            gather=10,
            walk=400,
            ef=400,
        )
    settings_ = [(sql, values) for sql, values in statements if sql.startswith("SET LOCAL")]
    ((ranking, params),) = [(sql, values) for sql, values in statements if sql.startswith("WITH v AS")]
    with transaction.atomic(), connection.cursor() as cursor:
        for sql, values in settings_:
            cursor.execute(sql, values)
        cursor.execute("EXPLAIN " + ranking, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert vector_index.vector_index_name("fake-embedding", 384) in plan


def test_a_walk_gathers_the_setting_s_rows_and_keeps_the_best(cast, settings):
    vector_index._ensured.clear()  # an index an earlier test made went with its transaction
    vector_index.ensure_vector_index("fake-embedding", 384)  # DDL before this test's first write
    owls = [DocumentFactory(collection=cast.handbook, text=f"Owls hunt mice at night, owl {i}.") for i in range(60)]
    index_documents(document_ids=[d.pk for d in owls])
    settings.RAG_HNSW_WALK_ROWS = 40
    scope = search_scope(user=cast.bob)
    query = embed_query("owls hunt mice")
    rank = functools.partial(
        vector.vector_ranking,
        scope=scope,
        vector=query,
        model_id="fake-embedding",
        dimension=384,
        limit=10,
        threshold=-1.0,
        scope_chunks=scope_index_stats(scope, model_id="fake-embedding").chunks,
        model_chunks=60,
    )
    with sent_statements() as statements:
        walked = rank(path="hnsw")
    ((_, params),) = [(sql, values) for sql, values in statements if sql.startswith("WITH v AS")]
    assert params[-2:] == [40, 10], "forty gathered in scope, the best ten kept"
    exact = rank(path="exact")
    assert len(walked) == 10
    # The fake embedding ties some owls: the same ten scores, whichever of the tied chunks each path met first.
    assert [round(h.score, 6) for h in walked] == [round(h.score, 6) for h in exact]


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("RAG_HNSW_WALK_ROWS", "-1", "RAG_HNSW_WALK_ROWS must be at least 0"),
        ("RAG_HNSW_WALK_ROWS", "5001", "RAG_HNSW_WALK_ROWS must be at most 5000"),
        ("RAG_HNSW_WALK_ROWS", "far", "invalid value"),
        ("RAG_SIGN_BITS_MAX_SHARE", "1.5", "RAG_SIGN_BITS_MAX_SHARE must be between 0.0 and 1.0, got 1.5"),
        ("RAG_SIGN_BITS_MAX_SHARE", "-0.1", "RAG_SIGN_BITS_MAX_SHARE must be between 0.0 and 1.0"),
    ],
)
def test_a_bad_vector_path_setting_fails_at_start_up(name, value, message):
    from tests.test_project import run_settings

    result = run_settings("config.settings.local", DATABASE_URL="postgres://x@127.0.0.1:1/x", **{name: value})
    assert result.returncode != 0 and message in result.stderr


def test_a_sign_bit_scan_ranks_only_the_viewer_s_scope(cast, far_scope):
    """The nearest chunks to an owl question are in a collection bob cannot see: none of them is even a candidate."""
    with sent_statements() as statements:
        hits = rank_for(cast.bob, embed_query("owls hunt mice"), limit=3, model_chunks=303, path="signs")
    assert sorted(h.document_id for h in hits) == sorted(d.pk for d in far_scope)
    assert [sql for sql, _ in statements if "chunk_sign_bits" in sql], "ranked by the sign bits, not scanned exactly"
    assert not [sql for sql, _ in statements if "c AS MATERIALIZED" in sql], "no exact scan finished the page"


def test_a_sign_bit_scan_reranks_by_the_full_vectors_within_the_scope(cast):
    owls = [DocumentFactory(collection=cast.handbook, text=f"Owls hunt mice at night, owl {i}.") for i in range(60)]
    hidden = CollectionFactory(team=cast.alice.team, name="Hidden", default_access="none")
    nearest = DocumentFactory(collection=hidden, text="Owls hunt mice at night.")
    index_documents(document_ids=[nearest.pk, *(d.pk for d in owls)])
    rank = functools.partial(rank_for, cast.bob, embed_query("owls hunt mice"), limit=10, model_chunks=61)
    signs, exact = rank(path="signs"), rank(path="exact")
    assert len(signs) == 10
    assert [round(h.score, 6) for h in signs] == [round(h.score, 6) for h in exact], "the cosine, not the Hamming distance"
    assert {h.document_id for h in signs} <= {d.pk for d in owls}


def test_a_sign_bit_scan_whose_nearest_readable_rows_are_invisible_joins_the_whole_scope(cast, monkeypatch):
    """Alice's unpublished owl drafts sit in the handbook bob can read: the nearest rows of his collections are
    all hers, so the rows joined first hold nothing he may see, and the scan joins all of them instead."""
    drafts = [
        DocumentFactory(collection=cast.handbook, created_by=cast.alice, published_at=None, text=f"Owls hunt mice, draft {i}.")
        for i in range(12)
    ]
    bees = [DocumentFactory(collection=cast.handbook, text=f"Bees make honey in hive {i}.") for i in range(3)]
    index_documents(document_ids=[d.pk for d in [*drafts, *bees]])
    # The drafts point where the question does, the bees the opposite way (their sign bits follow, by trigger).
    query = embed_query("owls hunt mice")
    assert any(x > 0 for x in query)
    Chunk.objects.filter(document__in=drafts).update(embedding=query)
    Chunk.objects.filter(document__in=bees).update(embedding=[-x for x in query])
    monkeypatch.setattr(vector, "SIGN_RERANK_MIN", 3)
    monkeypatch.setattr(vector, "SIGN_RERANK_PER_HIT", 1)
    monkeypatch.setattr(vector, "SIGN_PREFILTER", 2)  # the six nearest rows first: all drafts
    with sent_statements() as statements:
        hits = rank_for(cast.bob, query, limit=3, model_chunks=15, path="signs")
    assert sorted(h.document_id for h in hits) == sorted(d.pk for d in bees)
    assert [params["bound"] for sql, params in statements if "chunk_sign_bits" in sql] == [6, None], "six first, then all"
    assert not [sql for sql, _ in statements if "c AS MATERIALIZED" in sql], "no exact scan finished the page"
    # Alice sees her drafts: the six nearest hold three of hers, and one statement is enough.
    with sent_statements() as statements:
        hits = rank_for(cast.alice, query, limit=3, model_chunks=15, path="signs")
    assert {h.document_id for h in hits} <= {d.pk for d in drafts}
    assert len([sql for sql, _ in statements if "chunk_sign_bits" in sql]) == 1


def sign_passes(statements: list[tuple[str, dict]]) -> list[tuple[float | None, int | None]]:
    """Each sign-bit pass's cutoff share (None without a cutoff) and bound."""
    return [(params.get("share"), params["bound"]) for sql, params in statements if "chunk_sign_bits" in sql]


def test_a_sign_bit_scan_sorts_only_the_rows_within_its_sample_s_cutoff(cast, monkeypatch):
    """Sixty owl notes bob can read: the nearest few of a sample set the distance the sorted rows lie within, and
    the page is the exact scan's."""
    owls = [DocumentFactory(collection=cast.handbook, text=f"Owls hunt mice at night, owl {i}.") for i in range(60)]
    index_documents(document_ids=[d.pk for d in owls])
    monkeypatch.setattr(vector, "SIGN_RERANK_MIN", 3)
    monkeypatch.setattr(vector, "SIGN_RERANK_PER_HIT", 1)
    monkeypatch.setattr(vector, "SIGN_PREFILTER", 2)  # six rows wanted of sixty: the cutoff keeps a fifth of the sample
    rank = functools.partial(rank_for, cast.bob, embed_query("owls hunt mice at night"), limit=3, model_chunks=60)
    with sent_statements() as statements:
        signs = rank(path="signs")
    assert sign_passes(statements) == [(0.2, 6)], "one pass, within the cutoff"
    (sql, params), *_ = [(sql, params) for sql, params in statements if "chunk_sign_bits" in sql]
    with connection.cursor() as cursor:  # the rows within the cutoff: at least the six wanted, not all sixty
        cursor.execute(sql.replace("ORDER BY distance, s.chunk_id LIMIT %(bound)s", "LIMIT NULL"), params)
        assert 6 <= cursor.fetchone()[-1] < 60
    exact = rank(path="exact")
    assert [round(h.score, 6) for h in signs] == [round(h.score, 6) for h in exact]
    monkeypatch.setattr(vector, "SIGN_CUTOFF_MAX_SHARE", 0.0)  # no cutoff: the same page, chunk for chunk
    with sent_statements() as statements:
        assert [h.chunk_id for h in rank(path="signs")] == [h.chunk_id for h in signs]
    assert sign_passes(statements)[0] == (None, 6)


def test_a_sign_bit_cutoff_that_keeps_too_few_rows_is_followed_by_a_pass_without_it(cast, monkeypatch):
    """The three rows nearest the question hold two of alice's drafts: a cutoff at the nearest distance keeps only
    those three, one of them bob's, so the same pass runs again without the cutoff: the page it would give alone."""
    drafts = [
        DocumentFactory(collection=cast.handbook, created_by=cast.alice, published_at=None, text=f"Owls hunt mice, draft {i}.")
        for i in range(2)
    ]
    published = DocumentFactory(collection=cast.handbook, text="Owls hunt mice.")
    others = [DocumentFactory(collection=cast.handbook, text=f"Owls nest in barn {i}.") for i in range(10)]
    index_documents(document_ids=[d.pk for d in [*drafts, published, *others]])
    query = embed_query("owls hunt mice")
    Chunk.objects.filter(document__in=[*drafts, published]).update(embedding=query)
    monkeypatch.setattr(vector, "SIGN_RERANK_MIN", 3)
    monkeypatch.setattr(vector, "SIGN_RERANK_PER_HIT", 1)
    monkeypatch.setattr(vector, "SIGN_PREFILTER", 2)
    monkeypatch.setattr(vector, "SIGN_CUTOFF_MARGIN", 0.01)  # the cutoff: the sample's nearest distance
    rank = functools.partial(rank_for, cast.bob, query, limit=3, model_chunks=13)
    with sent_statements() as statements:
        signs = rank(path="signs")
    share = 0.01 * 6 / 11
    assert sign_passes(statements) == [(share, 6), (None, 6)], "the cutoff kept three rows of six: again without it"
    assert len(signs) == 3 and signs[0].document_id == published.pk
    assert not {h.document_id for h in signs} & {d.pk for d in drafts}
    monkeypatch.setattr(vector, "SIGN_CUTOFF_MAX_SHARE", 0.0)
    assert [h.chunk_id for h in rank(path="signs")] == [h.chunk_id for h in signs]


def test_a_sign_bit_scan_reaches_a_document_shared_in_a_collection_the_viewer_cannot_read(cast, monkeypatch):
    """One of alice's private owl notes is shared with bob: the rows first read are those of his collections and of
    the shared note's, each checked against what he may see, so the shared note leads his page and her other
    private notes, nearer than anything in the handbook, are on it nowhere."""
    private = [DocumentFactory(collection=cast.private, text=f"Owls hunt mice, private {i}.") for i in range(6)]
    DocumentMembershipFactory(document=private[0], user=cast.bob)
    bees = [DocumentFactory(collection=cast.handbook, text=f"Bees make honey in hive {i}.") for i in range(6)]
    index_documents(document_ids=[d.pk for d in [*private, *bees]])
    query = embed_query("owls hunt mice")
    Chunk.objects.filter(document__in=private).update(embedding=query)
    monkeypatch.setattr(vector, "SIGN_RERANK_MIN", 3)
    monkeypatch.setattr(vector, "SIGN_RERANK_PER_HIT", 1)
    monkeypatch.setattr(vector, "SIGN_PREFILTER", 4)  # twelve rows first: all of them
    with sent_statements() as statements:
        hits = rank_for(cast.bob, query, limit=3, model_chunks=12, path="signs")
    assert hits[0].document_id == private[0].pk
    assert {h.document_id for h in hits[1:]} <= {d.pk for d in bees}
    assert [params["bound"] for sql, params in statements if "chunk_sign_bits" in sql] == [12], "the bounded pass alone"
