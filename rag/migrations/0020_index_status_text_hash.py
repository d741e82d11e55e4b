"""Each index status keeps the hash of the text its chunks were cut from, so reconciliation can compare texts.

Until now it compared versions only, and a write that made no new version (the admin saved the model
directly; a script or a raw UPDATE still can) left chunks of an older text in search, answers and citations.

The backfill gives a status its document's current text hash only where the chunks provably are of that
text: at the document's version, as many as the status counts, each the very slice of the text its offsets
name, and nothing but white space after the last one. Every other status keeps "" and is reindexed by the
next reconciliation (vectors of unchanged passages are reused, so that costs chunking, not embedding).
"""

from django.db import migrations, models

BACKFILL = """
WITH verified AS (
  SELECT s.id, encode(sha256(convert_to(d.text, 'UTF8')), 'hex') AS text_hash
  FROM document_index_status s
  JOIN documents_document d ON d.id = s.document_id AND d.version = s.indexed_version
  CROSS JOIN LATERAL (
    SELECT count(*) AS n,
           count(*) FILTER (
             WHERE e.document_version = d.version
               AND substr(d.text, e.start_offset + 1, e.end_offset - e.start_offset) = e.chunk_text
           ) AS verbatim,
           coalesce(max(e.end_offset), 0) AS covered
    FROM document_embeddings e
    WHERE e.document_id = s.document_id AND e.model_id = s.model_id
  ) c
  WHERE c.n = s.chunk_count AND c.verbatim = c.n AND substr(d.text, c.covered + 1) !~ '[^[:space:]]'
)
UPDATE document_index_status s SET indexed_text_hash = v.text_hash FROM verified v WHERE v.id = s.id;
"""


class Migration(migrations.Migration):
    dependencies = [
        ("rag", "0019_graph_facts_collection"),
    ]

    operations = [
        migrations.AddField(
            model_name="indexstatus",
            name="indexed_text_hash",
            field=models.CharField(blank=True, default="", max_length=64),
        ),
        migrations.RunSQL(BACKFILL, migrations.RunSQL.noop),
    ]
