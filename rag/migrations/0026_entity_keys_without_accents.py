"""Entity keys lose their Latin accents ("amélie" becomes "amelie", rag.corpus.names.normalised_text): keys written
before are keyed again, and two entities of one team whose keys now agree become one (its mentions and relations
moved to the one kept; where both were named in one chunk, the kept one's mention stays)."""

import re
import unicodedata

from django.db import migrations

# The rules of rag.corpus.names as this migration was written (a later change to them must not change it).
_NON_WORD = re.compile(r"[\W_]+", re.UNICODE)
_LATIN_ACCENTS = re.compile(r"(?<=[A-Za-z\u00c0-\u024f])[\u0300-\u036f]+")
MAX_KEY_LENGTH = 200


def _key(key: str) -> str:
    text = unicodedata.normalize("NFC", _LATIN_ACCENTS.sub("", unicodedata.normalize("NFKD", key)))
    return " ".join(_NON_WORD.sub(" ", text.casefold()).split())[:MAX_KEY_LENGTH].strip()


def rekey(apps, schema_editor):
    Entity = apps.get_model("rag", "Entity")
    changed = [
        (pk, team_id, new)
        for pk, team_id, key in Entity.objects.filter(key__regex=r"[^\x01-\x7f]").values_list("pk", "team_id", "key").iterator()
        if (new := _key(key)) != key
    ]
    with schema_editor.connection.cursor() as cursor:
        for pk, team_id, new in changed:
            kept = Entity.objects.filter(team_id=team_id, key=new).values_list("pk", flat=True).first()
            if kept is None:
                Entity.objects.filter(pk=pk).update(key=new)
                continue
            cursor.execute(
                """UPDATE graph_mentions m SET entity_id = %s WHERE m.entity_id = %s
                   AND NOT EXISTS (SELECT 1 FROM graph_mentions k WHERE k.chunk_id = m.chunk_id AND k.entity_id = %s)""",
                [kept, pk, kept],
            )
            cursor.execute("DELETE FROM graph_mentions WHERE entity_id = %s", [pk])
            cursor.execute("UPDATE graph_relations SET source_id = %s WHERE source_id = %s", [kept, pk])
            cursor.execute("UPDATE graph_relations SET target_id = %s WHERE target_id = %s", [kept, pk])
            Entity.objects.filter(pk=pk).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("rag", "0025_index_status_queue"),
    ]

    # Going back keeps the new keys: the older code matches them as it would a name written without accents.
    operations = [migrations.RunPython(rekey, migrations.RunPython.noop)]
