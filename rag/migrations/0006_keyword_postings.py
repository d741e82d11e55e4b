"""Keyword search reads an inverted index of postings instead of every visible chunk's tsvector."""

import django.db.models.deletion
from django.db import migrations, models

# The postings of every existing chunk, from the keyword columns it already has (the same
# statement rag.keyword.refresh_search_vectors runs for the chunks it refreshes).
BACKFILL = """
INSERT INTO keyword_postings (chunk_id, lexeme, document_id, document_version, model_id, tf, length)
SELECT e.id, u.lexeme, e.document_id, e.document_version, e.model_id, least(cardinality(u.positions), 32767), e.doc_length
FROM document_embeddings e, unnest(e.search_vector) u
WHERE e.search_vector IS NOT NULL
"""


class Migration(migrations.Migration):
    dependencies = [
        ("rag", "0005_search_vectors_with_headings"),
    ]

    operations = [
        migrations.CreateModel(
            name="KeywordPosting",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "chunk_id", "lexeme", blank=True, editable=False, primary_key=True, serialize=False
                    ),
                ),
                (
                    "chunk",
                    models.ForeignKey(
                        db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name="+", to="rag.documentembedding"
                    ),
                ),
                ("lexeme", models.TextField()),
                ("document_id", models.UUIDField()),
                ("document_version", models.PositiveIntegerField()),
                ("model_id", models.CharField(max_length=200)),
                ("tf", models.PositiveSmallIntegerField(help_text="Occurrences of the lexeme in the chunk's keyword text.")),
                ("length", models.PositiveIntegerField(help_text="The chunk's doc_length, for BM25's length normalisation.")),
            ],
            options={
                "db_table": "keyword_postings",
            },
        ),
        migrations.RunSQL(BACKFILL, migrations.RunSQL.noop),
        migrations.AddIndex(
            model_name="keywordposting",
            index=models.Index(
                fields=["model_id", "lexeme"],
                include=("document_id", "document_version", "chunk", "tf", "length"),
                name="posting_lexeme_covering",
            ),
        ),
        migrations.RemoveIndex(
            model_name="documentembedding",
            name="embedding_search_vector_gin",
        ),
    ]
