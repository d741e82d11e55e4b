"""When a graph fact read from a visible chunk counts for a viewer: the SQL every graph query adds.

A chunk the viewer can read is not enough. The rules extractor also records where a chunk's words
happen to be some document's title (a title match, a `/doc/<id>` link); that those words are a title
is the titled document's secret. Such a mention, or relation end, is flagged `title_only` and counts
only when the viewer can read a document with that title (a visible `subject` mention of the same
entity). Every query over graph_mentions or graph_relations joins its rows with the visible
documents and adds these conditions, so a private title neither appears nor moves a ranking.
"""

from __future__ import annotations


def titled_document_visible(entity: str, model: str, visible: str) -> str:
    """SQL true when the entity in column `entity` is the title of a document in `visible`.

    `visible` is a FROM item of the viewer's visible documents (id, version): a CTE's name or a
    parenthesised query; `model` the model id column or placeholder the facts were read with.
    """
    # A scalar subquery with LIMIT 1, not EXISTS: the planner may turn an EXISTS into a hashed set of every
    # visible title (all the visible documents' subject mentions, per query), where this stays a few
    # index lookups for each entity it is asked about.
    return (
        f"coalesce((SELECT TRUE FROM graph_mentions title_m JOIN {visible} title_v"
        f" ON title_v.id = title_m.document_id AND title_v.version = title_m.document_version"
        f" WHERE title_m.entity_id = {entity} AND title_m.subject AND title_m.model_id = {model} LIMIT 1), FALSE)"
    )


def mention_counts(mention: str, visible: str, *, title_visible: str | None = None) -> str:
    """SQL true when the mention `mention` (an alias of graph_mentions, already joined with `visible`) counts.

    `title_visible`: an SQL boolean already computed for the mention's entity (`titled_document_visible`
    once per entity, not once per row: a hub title has thousands of mentions).
    """
    check = title_visible or titled_document_visible(f"{mention}.entity_id", f"{mention}.model_id", visible)
    return f"(NOT {mention}.title_only OR {check})"


def relation_counts(relation: str, visible: str, *, source_visible: str | None = None, target_visible: str | None = None) -> str:
    """SQL true when the relation `relation` (an alias of graph_relations, already joined with `visible`) counts.

    `source_visible` / `target_visible`: SQL booleans already computed for that end's entity, as in `mention_counts`.
    """
    source = source_visible or titled_document_visible(f"{relation}.source_id", f"{relation}.model_id", visible)
    target = target_visible or titled_document_visible(f"{relation}.target_id", f"{relation}.model_id", visible)
    return f"((NOT {relation}.source_title_only OR {source}) AND (NOT {relation}.target_title_only OR {target}))"
