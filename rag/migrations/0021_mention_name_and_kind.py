"""Each mention carries how its own chunk spells the entity and what kind of name its words make it, so a viewer
is shown an entity's spelling and kind from the passages they can read, never those of a chunk they cannot."""

from django.db import migrations, models

# Facts written before this migration recorded a spelling per entity only (the first chunk's). A subject mention
# takes its document's title; a title-only one the entity's (it is never shown: a viewer is shown the spelling of
# subject and named mentions only). A named mention takes the spelling its chunk holds: the entity's where the
# chunk's text (or a heading above it) holds it, else the first run of its text that spells the key, else the
# key itself. Reading the graph again (`index_documents --graph`) records each chunk's own spelling and kind.
BACKFILL = r"""
UPDATE graph_mentions m SET name = d.title, kind = 'document'
FROM documents_document d WHERE d.id = m.document_id AND m.subject;
UPDATE graph_mentions m SET name = e.name, kind = 'document'
FROM graph_entities e WHERE e.id = m.entity_id AND NOT m.subject AND m.title_only;
UPDATE graph_mentions m SET
    kind = CASE WHEN e.kind = 'document' THEN 'name' ELSE e.kind END,
    name = CASE WHEN strpos(t.words, e.name) > 0 THEN e.name
                ELSE coalesce(substring(t.words FROM '(?i)\m' || replace(e.key, ' ', '[^[:alnum:]]+') || '\M'), e.key) END
FROM graph_entities e, document_embeddings c,
     LATERAL (SELECT c.chunk_text || E'\n' || coalesce(
                  (SELECT string_agg(h, E'\n') FROM jsonb_array_elements_text(c.metadata -> 'heading_path') h), '') AS words) t
WHERE e.id = m.entity_id AND c.id = m.chunk_id AND NOT m.subject AND NOT m.title_only;
"""


class Migration(migrations.Migration):
    dependencies = [
        ("rag", "0020_index_status_text_hash"),
    ]

    operations = [
        migrations.AddField(
            model_name="mention",
            name="name",
            field=models.CharField(default="", max_length=500),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="mention",
            name="kind",
            field=models.CharField(
                choices=[
                    ("document", "Document"),
                    ("name", "Proper name"),
                    ("topic", "Heading or key phrase"),
                    ("code", "Code identifier"),
                    ("person", "Person"),
                    ("organization", "Organization"),
                    ("location", "Location"),
                    ("product", "Product"),
                    ("technology", "Technology"),
                    ("concept", "Concept"),
                    ("event", "Event"),
                ],
                default="name",
                max_length=20,
            ),
            preserve_default=False,
        ),
        migrations.AlterField(
            model_name="entity",
            name="name",
            field=models.CharField(
                help_text="The first spelling read, in any document: shown to operators only.", max_length=500
            ),
        ),
        migrations.RunSQL(BACKFILL, migrations.RunSQL.noop),
    ]
