from __future__ import annotations

import uuid

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.search import SearchVectorField
from django.db import models
from django.utils import timezone
from pgvector.django import VectorField

from documents.models import Document
from permissions.models import Team


class Chunk(models.Model):
    """One chunk of one document version, embedded by one model: what search ranks and answers cite."""

    id = models.BigAutoField(primary_key=True)
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="chunks", db_index=False)
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+", db_index=False)
    chunk_index = models.PositiveIntegerField()
    chunk_text = models.TextField()
    document_version = models.PositiveIntegerField()
    content_hash = models.CharField(max_length=64)
    model_id = models.CharField(max_length=200)
    # No fixed dimension: several models may coexist; each gets its own partial HNSW index
    # over `embedding::vector(dim)` (see rag.corpus.vector_index).
    embedding = VectorField()
    start_offset = models.PositiveIntegerField()
    end_offset = models.PositiveIntegerField()
    metadata = models.JSONField(default=dict)
    search_vector = SearchVectorField(null=True)
    doc_length = models.PositiveIntegerField(default=0, help_text="Lexemes in search_vector, for BM25.")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "document_embeddings"
        db_table_comment = "Chunks: one row per chunk of one document version and one embedding model."
        constraints = [
            models.UniqueConstraint(fields=["document", "chunk_index", "model_id"], name="unique_chunk_per_model"),
        ]
        indexes = [
            models.Index(fields=["model_id", "content_hash"], name="embedding_model_hash"),
            models.Index(fields=["team", "model_id"], name="embedding_team_model"),
        ]


class VectorOutbox(models.Model):
    """A chunk whose vector the Milvus backend must copy (or drop): written by the database in the chunk's own transaction.

    Triggers (migration 0024) add a row for every chunk inserted, deleted or rewritten, and for every chunk of a
    document moved to another collection, so no way of writing a chunk escapes it. They run only while the
    backend is milvus (rag.corpus.milvus.set_outbox_triggers). The drain (rag.indexing.vector_outbox) reads each
    chunk's current row, upserts or deletes it in Milvus, then deletes the outbox rows it carried out.
    """

    id = models.BigAutoField(primary_key=True)
    chunk_id = models.BigIntegerField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "rag_vector_outbox"
        db_table_comment = "Chunks whose vectors Milvus must copy or drop (RAG_VECTOR_BACKEND=milvus)."


class SignBitsField(models.Field):
    """A bit string of any length (`bit varying`): one bit per dimension, of whichever model's vectors."""

    description = "Bit string of any length"

    def db_type(self, connection) -> str:
        return "bit varying"


class ChunkSignBits(models.Model):
    """One chunk's embedding reduced to the signs of its dimensions (pgvector's binary_quantize): what vector search
    scans in a scope too narrow for a filtered HNSW walk, before it reranks the nearest by the full vectors.

    Written by the database as chunks are inserted (a trigger, migration 0017), like an index, so no way of writing
    a chunk misses it; deleted with the chunk. Read through one index that carries everything the scan needs (an
    index-only scan of the readable collections' rows), as keyword postings are; document and version are copied
    from the chunk so the visible documents filter them without reading chunks.
    """

    chunk = models.OneToOneField(Chunk, on_delete=models.CASCADE, primary_key=True, related_name="+")
    model_id = models.CharField(max_length=200)
    # The document's collection (kept right on a move by a trigger, migration 0017).
    collection_id = models.UUIDField()
    document_id = models.UUIDField()
    document_version = models.PositiveIntegerField()
    bits = SignBitsField()

    class Meta:
        db_table = "chunk_sign_bits"
        indexes = [
            models.Index(
                fields=["model_id", "collection_id"],
                include=["document_id", "document_version", "chunk", "bits"],
                name="sign_bits_collection",
            )
        ]


class KeywordPosting(models.Model):
    """One lexeme of one chunk's search_vector: the inverted index keyword search reads.

    Written by rag.indexing.keyword_postings.refresh_search_vectors with the chunk's keyword columns and deleted
    with the chunk. Keyword search reads only the postings of the query's lexemes, through one
    index that carries everything BM25 needs (an index-only scan); document and version are
    copied from the chunk so the visible documents filter them without reading chunks.
    """

    pk = models.CompositePrimaryKey("chunk_id", "lexeme")
    chunk = models.ForeignKey(Chunk, on_delete=models.CASCADE, related_name="+", db_index=False)
    lexeme = models.TextField()
    document_id = models.UUIDField()
    document_version = models.PositiveIntegerField()
    # The document's collection (kept right on a move by a trigger, migration 0016): the index reads only
    # the postings of the collections a viewer can read.
    collection_id = models.UUIDField()
    model_id = models.CharField(max_length=200)
    tf = models.PositiveSmallIntegerField(help_text="Occurrences of the lexeme in the chunk's keyword text.")
    length = models.PositiveIntegerField(help_text="The chunk's doc_length, for BM25's length normalisation.")

    class Meta:
        db_table = "keyword_postings"
        indexes = [
            models.Index(
                fields=["model_id", "lexeme", "collection_id"],
                include=["document_id", "document_version", "chunk", "tf", "length"],
                name="posting_lexeme_collection",
            )
        ]


class IndexState(models.TextChoices):
    PENDING = "pending", "Pending"
    CHUNKING = "chunking", "Chunking"
    EMBEDDING = "embedding", "Embedding"
    INDEXED = "indexed", "Indexed"
    FAILED = "failed", "Failed"


class IndexStatus(models.Model):
    """Where one document stands in the index of one model."""

    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="index_statuses")
    model_id = models.CharField(max_length=200)
    state = models.CharField(max_length=10, choices=IndexState.choices, default=IndexState.PENDING)
    indexed_version = models.PositiveIntegerField(null=True, blank=True)
    # SHA-256 of the text the chunks were cut from ("" when not known): reconciliation compares it with the
    # document's text, so a change that bypassed the services and made no new version is found too.
    indexed_text_hash = models.CharField(max_length=64, blank=True, default="")
    chunk_count = models.PositiveIntegerField(default=0)
    # Sum of the chunks' keyword lengths: BM25's corpus statistics come from these narrow rows.
    keyword_length = models.PositiveBigIntegerField(default=0)
    error = models.TextField(blank=True)
    attempts = models.PositiveIntegerField(default=0)
    # The last change of state; while a task chunks or embeds the document, its heartbeat.
    updated_at = models.DateTimeField(default=timezone.now)
    # While pending: when a task that will read the document was handed to the broker (none if the broker
    # was down). A pending document with one waits in the queue, and recovery leaves it there.
    queued_at = models.DateTimeField(null=True, blank=True)
    # The queue that task waits in ("" when not recorded): a task lost from an empty queue is found even while
    # another queue is long (an edit's, while an import fills the bulk queue).
    queue = models.CharField(max_length=200, blank=True, default="")

    class Meta:
        db_table = "document_index_status"
        verbose_name_plural = "index statuses"
        constraints = [models.UniqueConstraint(fields=["document", "model_id"], name="unique_status_per_model")]
        indexes = [models.Index(fields=["model_id", "state"], name="status_model_state")]


class JobState(models.TextChoices):
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"


class IndexJob(models.Model):
    """Bulk indexing work with progress (done / total / failed)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    description = models.CharField(max_length=500)
    model_id = models.CharField(max_length=200)
    backfill = models.BooleanField(
        default=False,
        help_text="Builds model_id's chunks for teams still searched with an earlier model (rag.indexing.backfill).",
    )
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    state = models.CharField(max_length=10, choices=JobState.choices, default=JobState.RUNNING)
    total = models.PositiveIntegerField(default=0)
    done = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(
        default=timezone.now, help_text="Last progress: a backfill silent for a lease is restarted."
    )
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "rag_index_job"

    def __str__(self) -> str:
        return f"{self.description} ({self.done + self.failed}/{self.total})"


class ServingModel(models.Model):
    """The embedding model a team's searches use, and how to embed a query for it.

    Normally the configured model (RAG_EMBEDDING_MODEL). When the configuration names a new model,
    the team keeps being searched with this one while the new model's chunks are built beside it,
    and moves to the new model once those cover every document this one covered
    (rag.indexing.model_switch.switch_covered_teams). A team without a row is searched with the
    configured model; its first indexing writes the row.
    """

    team = models.OneToOneField(Team, primary_key=True, on_delete=models.CASCADE, related_name="+")
    model_id = models.CharField(max_length=200)
    provider = models.CharField(
        max_length=20, help_text="The RAG_EMBEDDING_PROVIDER that embedded its chunks: queries go to it too."
    )
    dimension = models.PositiveIntegerField()
    since = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "rag_serving_model"
        db_table_comment = "Per team: the embedding model searches use (the previous one until a new model covers the team)."

    def __str__(self) -> str:
        return f"{self.model_id} ({self.provider}, {self.dimension})"


class Confidence(models.TextChoices):
    HIGH = "high", "High"
    MEDIUM = "medium", "Medium"
    LOW = "low", "Low"
    INSUFFICIENT = "insufficient", "Insufficient"


class Conversation(models.Model):
    """One user's thread of questions; its turns are the QueryLog rows that point to it."""

    # A UUID, not a sequence: a client learns nothing of other users' conversations from an id.
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+", db_index=False)
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    title = models.CharField(max_length=200, help_text="The first question, shortened.")
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now, help_text="When its last turn was answered.")

    class Meta:
        db_table = "rag_conversation"
        indexes = [models.Index(fields=["user", "-updated_at"], name="conversation_user_updated")]

    def __str__(self) -> str:
        return self.title


class QueryLog(models.Model):
    """One answered question: for analytics and feedback, and a turn of its conversation. Query text is stored; it is the user's own."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    team = models.ForeignKey(Team, null=True, on_delete=models.CASCADE, related_name="+")
    query = models.TextField()
    answer = models.TextField(blank=True)
    mode = models.CharField(max_length=20, blank=True, help_text="generated / extractive / insufficient")
    confidence = models.CharField(max_length=20, choices=Confidence.choices, blank=True)
    passage_count = models.PositiveIntegerField(default=0)
    citations = models.JSONField(default=list)
    latency = models.JSONField(default=dict)
    total_ms = models.FloatField(default=0)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    # Deleting a conversation keeps its answers here, unlinked, as every answer is kept (ratings, the admin).
    conversation = models.ForeignKey(Conversation, null=True, blank=True, on_delete=models.SET_NULL, related_name="turns")
    standalone_query = models.TextField(
        blank=True,
        help_text="The question rewritten to stand alone from the earlier turns (what was searched); empty when unchanged.",
    )
    source_documents = ArrayField(
        models.UUIDField(),
        default=list,
        blank=True,
        help_text="Every document the answer drew on: its passages' (cited or not) and those of the earlier turns it was "
        "given. The turn's answer is shown only while its user can still read them all.",
    )

    class Meta:
        db_table = "rag_query_log"
        indexes = [models.Index(fields=["team", "created_at"], name="querylog_team_created")]


class SearchLog(models.Model):
    """One rag.search (API or MCP): mode, result count and latency; the query text only with RAG_LOG_QUERIES."""

    id = models.BigAutoField(primary_key=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    team = models.ForeignKey(Team, null=True, on_delete=models.CASCADE, related_name="+")
    query = models.TextField(blank=True, help_text="Empty unless RAG_LOG_QUERIES was on.")
    mode = models.CharField(max_length=10)
    results = models.PositiveIntegerField()
    degraded = models.BooleanField(default=False, help_text="Hybrid answered by keyword only: the embedding provider failed.")
    latency = models.JSONField(default=dict)
    total_ms = models.FloatField(default=0)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "rag_search_log"
        indexes = [models.Index(fields=["created_at"], name="searchlog_created")]


class Feedback(models.Model):
    """A user's rating of one of their answers: one per answer and user (rating again updates it)."""

    # A UUID, not a sequence: a global counter would tell a client how many answers other teams rated.
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    query_log = models.ForeignKey(QueryLog, on_delete=models.CASCADE, related_name="feedback")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    rating = models.PositiveSmallIntegerField()
    comment = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "rag_feedback"
        constraints = [
            models.CheckConstraint(condition=models.Q(rating__gte=1, rating__lte=5), name="feedback_rating_1_to_5"),
            models.UniqueConstraint(fields=["query_log", "user"], name="one_feedback_per_answer_and_user"),
        ]


class EntityKind(models.TextChoices):
    DOCUMENT = "document", "Document"  # named by a document's title
    NAME = "name", "Proper name"
    TOPIC = "topic", "Heading or key phrase"
    CODE = "code", "Code identifier"
    SYMBOL = "symbol", "Symbol defined in code"  # a function, class or type a code document defines
    # Types the `llm` extractor gives (rag.indexing.graph_llm_prompt.EntityType, lower-cased).
    PERSON = "person", "Person"
    ORGANIZATION = "organization", "Organization"
    LOCATION = "location", "Location"
    PRODUCT = "product", "Product"
    TECHNOLOGY = "technology", "Technology"
    CONCEPT = "concept", "Concept"
    EVENT = "event", "Event"


# Kinds the rules give for want of knowing better: a type the `llm` extractor gives outranks them.
GENERIC_KINDS = (EntityKind.NAME, EntityKind.TOPIC)


class Entity(models.Model):
    """A thing the team's documents talk about, found by its normalised name (`key`) within one team.

    Entities carry no facts of their own: every mention and relation belongs to the chunk it was
    read from, so an entity is visible exactly when one of its mentions is. A document's title is
    an entity whose `subject` mentions are that document's own chunks.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+", db_index=False)
    key = models.CharField(max_length=200, help_text="Normalised name: case-folded words separated by single spaces.")
    # The spelling and kind of whichever chunk named it first, for operators (the admin) only: that chunk may
    # be one a viewer cannot read. A viewer sees the spelling and kind of the mentions they can read
    # (Mention.name and Mention.kind, chosen in rag.retrieval.explore).
    name = models.CharField(max_length=500, help_text="The first spelling read, in any document: shown to operators only.")
    kind = models.CharField(max_length=20, choices=EntityKind.choices)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "graph_entities"
        db_table_comment = "Knowledge-graph entities, team-scoped; visible only through a visible mention."
        verbose_name_plural = "entities"
        constraints = [models.UniqueConstraint(fields=["team", "key"], name="unique_entity_key_per_team")]

    def __str__(self) -> str:
        return self.name


class Mention(models.Model):
    """An entity named in one chunk (deleted with the chunk). Document and version are copied from the chunk
    so the graph's queries filter mentions by the visible documents without reading chunks."""

    pk = models.CompositePrimaryKey("chunk_id", "entity_id")
    chunk = models.ForeignKey(Chunk, on_delete=models.CASCADE, related_name="+", db_index=False)
    entity = models.ForeignKey(Entity, on_delete=models.CASCADE, related_name="mentions", db_index=False)
    document_id = models.UUIDField()
    document_version = models.PositiveIntegerField()
    # The document's collection (kept right on a move by a trigger, migration 0019): a hub's mentions in the
    # collections a viewer cannot read are passed over in the index, not checked one by one.
    collection_id = models.UUIDField()
    model_id = models.CharField(max_length=200)
    count = models.PositiveSmallIntegerField(default=1)
    # How this chunk spells the entity and what kind of name its words make it (a subject mention: its document's
    # title, `document`; a title-only one: the title it matched, `document`). Names and kinds shown to a viewer are
    # chosen among the mentions they can read, so a spelling only a private chunk writes is never shown.
    name = models.CharField(max_length=500)
    kind = models.CharField(max_length=20, choices=EntityKind.choices)
    # True when the chunk belongs to the document the entity names (its subject), not a mention elsewhere.
    subject = models.BooleanField(default=False)
    # True when only a document's title made these words a mention (a title match or a `/doc/<id>` link):
    # that a phrase is some document's title is the titled document's secret, so the mention counts
    # for a viewer only when they can read a document with that title (rag.retrieval.graph_policy).
    title_only = models.BooleanField(default=False)

    class Meta:
        db_table = "graph_mentions"
        indexes = [
            # In the order the graph ranks an entity's passages (its own document's first, then the ones naming
            # it most): the ranking reads an entity's visible mentions in this order and stops at the few it
            # keeps, instead of sorting all of a hub's mentions in the whole team (at 1M chunks a hybrid
            # search's graph ranking took up to 190 ms so; bench/latency.py).
            models.Index(
                fields=["entity", "model_id", "-subject", "-count", "chunk"],
                include=["document_id", "document_version", "collection_id", "title_only"],
                name="mention_entity_ranked",
            ),
            # "Is this entity the title of a document the viewer can read?": a few rows per entity.
            models.Index(
                fields=["entity", "model_id"],
                include=["document_id", "document_version"],
                condition=models.Q(subject=True),
                name="mention_entity_subject",
            ),
        ]


class Relation(models.Model):
    """source -[predicate]-> target, read from one chunk (deleted with it)."""

    id = models.BigAutoField(primary_key=True)
    chunk = models.ForeignKey(Chunk, on_delete=models.CASCADE, related_name="+")
    source = models.ForeignKey(Entity, on_delete=models.CASCADE, related_name="+", db_index=False)
    target = models.ForeignKey(Entity, on_delete=models.CASCADE, related_name="+", db_index=False)
    predicate = models.CharField(max_length=40)
    confidence = models.FloatField(default=1.0)
    weight = models.FloatField(default=1.0)
    document_id = models.UUIDField()
    document_version = models.PositiveIntegerField()
    # The document's collection (kept right on a move by a trigger, migration 0019): a hop reads an entity's
    # relations in the collections the viewer can read only, however many copies the team holds elsewhere.
    collection_id = models.UUIDField()
    model_id = models.CharField(max_length=200)
    # An end that is an entity only because it is a document's title (see Mention.title_only): the
    # relation counts only for viewers who can read a document with that title.
    source_title_only = models.BooleanField(default=False)
    target_title_only = models.BooleanField(default=False)

    class Meta:
        db_table = "graph_relations"
        indexes = [
            models.Index(
                fields=["source", "model_id", "collection_id"],
                include=["target", "weight", "document_id", "document_version", "source_title_only", "target_title_only"],
                name="relation_source_collection",
            ),
            models.Index(
                fields=["target", "model_id", "collection_id"],
                include=["source", "weight", "document_id", "document_version", "source_title_only", "target_title_only"],
                name="relation_target_collection",
            ),
        ]


class GraphExtraction(models.Model):
    """What the `llm` graph extractor read from one chunk text, validated: reused wherever that text is indexed again.

    Keyed by the text's hash, not by a chunk or a team: the facts are read from that text alone (one
    chunk per call), so any document holding the same text may reuse them, as it reuses its vector.
    """

    id = models.BigAutoField(primary_key=True)
    extractor = models.CharField(max_length=250, help_text="llm-v<prompt version>:<model>; another model or prompt reads again.")
    content_hash = models.CharField(max_length=64, help_text="The chunk's content_hash (SHA-256 of what was embedded and read).")
    facts = models.JSONField(
        help_text='{"entities": [{"name", "type"}], "relations": [{"source", "target", "predicate", "confidence"}]}'
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "graph_llm_extractions"
        db_table_comment = "Cache of the llm graph extractor's validated answers, by extractor and chunk content hash."
        constraints = [models.UniqueConstraint(fields=["extractor", "content_hash"], name="unique_extraction_per_text")]

    def __str__(self) -> str:
        return f"{self.extractor} {self.content_hash[:12]}"
