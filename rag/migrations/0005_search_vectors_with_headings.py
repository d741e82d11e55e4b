"""Index statuses carry the keyword length; existing chunks' keyword columns are recomputed with their headings."""

from django.db import migrations, models

# The keyword text of every chunk as the app wrote it at this migration: the title (weight A),
# the headings above the chunk that it does not itself contain (B), the chunk's text; and its
# length in lexeme occurrences, for BM25. The migration runs in one transaction, so batches would
# neither release locks nor bound the rewrite sooner: one statement lets PostgreSQL do one pass.
REFRESH_CHUNKS = """
UPDATE document_embeddings e SET search_vector = s.v, doc_length = s.n
FROM (SELECT c.id, x.v, coalesce((SELECT sum(cardinality(u.positions)) FROM unnest(x.v) u), 0) AS n
      FROM document_embeddings c JOIN documents_document d ON d.id = c.document_id,
           LATERAL (SELECT setweight(to_tsvector('english'::regconfig, d.title), 'A')
                           || setweight(to_tsvector('english'::regconfig, coalesce(
                                (SELECT string_agg(h, ' ') FROM jsonb_array_elements_text(c.metadata -> 'heading_path') h
                                 WHERE strpos(c.chunk_text, h) = 0), '')), 'B')
                           || to_tsvector('english'::regconfig, c.chunk_text) AS v) x) s
WHERE e.id = s.id
"""

# Each status's keyword length is the sum of its chunks' lengths (statuses without chunks keep 0).
REFRESH_STATUSES = """
UPDATE document_index_status s SET keyword_length = k.n
FROM (SELECT document_id, model_id, sum(doc_length) AS n FROM document_embeddings GROUP BY document_id, model_id) k
WHERE k.document_id = s.document_id AND k.model_id = s.model_id
"""


class Migration(migrations.Migration):
    dependencies = [("rag", "0004_embedding_storage_main")]

    operations = [
        migrations.AddField(
            model_name="indexstatus",
            name="keyword_length",
            field=models.PositiveBigIntegerField(default=0),
        ),
        migrations.RunSQL([REFRESH_CHUNKS, REFRESH_STATUSES], migrations.RunSQL.noop),
    ]
