"""Query playground: the chunks and scores a query retrieves for one user, through the real search."""

from __future__ import annotations

import textwrap
import uuid

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from config.errors import ApplicationError
from documents.tags import MAX_FILTER_TAGS, normalise_tags
from permissions.models import User
from rag.retrieval.hits import Explanation
from rag.retrieval.search import MODES, search

RANKINGS = ("vector", "keyword", "graph")


class Command(BaseCommand):
    help = "Print the chunks (with scores and latency) that a query retrieves for USERNAME, as rag.search would."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("query")
        parser.add_argument("--mode", choices=MODES, default="hybrid")
        parser.add_argument("--limit", type=int, default=10)
        parser.add_argument("--threshold", type=float, default=None, help="Minimum cosine similarity (vector and hybrid)")
        parser.add_argument("--collection", help="Collection id to search in")
        parser.add_argument("--tag", action="append", default=[], help="Only documents with this tag (repeat: every one)")
        parser.add_argument("--explain", action="store_true", help="Show each hit's rank and score in every ranking")
        parser.add_argument("--width", type=int, default=160, help="Characters of each chunk to show")

    def handle(self, *args, username, query, mode, limit, threshold, collection, tag, explain, width, **options):
        user = User.objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No user named {username!r}.")
        if not 1 <= limit <= 50:
            raise CommandError("--limit must be between 1 and 50.")
        if threshold is not None and not 0 <= threshold <= 1:
            raise CommandError("--threshold must be between 0 and 1.")
        try:
            collection = uuid.UUID(collection) if collection else None
        except ValueError as exc:
            raise CommandError(f"--collection is not a valid id: {collection!r}") from exc
        try:
            tags = normalise_tags(tag, limit=MAX_FILTER_TAGS)
        except ValidationError as exc:
            raise CommandError(f"--tag: {' '.join(exc.messages)}") from exc
        try:
            result = search(
                user=user,
                query=query.strip(),
                limit=limit,
                threshold=threshold,
                mode=mode,
                collection_id=collection,
                tags=tags,
                explain=explain,
            )
        except ApplicationError as exc:
            raise CommandError(f"{exc.code}: {exc.message}") from exc
        self.stdout.write(f"{len(result.hits)} result(s) for {username} ({mode}); latency ms: {result.latency}")
        for rank, ranked in enumerate(result.ranked(), start=1):
            hit, document = ranked.hit, ranked.document
            snippet = textwrap.shorten(" ".join(hit.text.split()), width=width, placeholder=" …")
            self.stdout.write(f"{rank:>2}. {hit.score:.4f}  {document.title} [chunk {hit.chunk_index}, v{hit.version}]")
            self.stdout.write(f"    {snippet}")
            if hit.explanation is not None:
                self.stdout.write(f"    {explanation_line(hit.explanation)}")


def explanation_line(explanation: Explanation) -> str:
    """`vector #1 0.8312 · keyword #3 4.2100 · graph — · fused 0.6100 = vector 0.4155 + keyword 0.1945 + graph 0.0000`."""
    hybrid = explanation.fused is not None
    parts = []
    for name in RANKINGS:
        place = explanation.places.get(name)
        if place is not None:
            parts.append(f"{name} #{place.rank} {place.score:.4f}")
        elif hybrid:
            parts.append(f"{name} —")
    line = " · ".join(parts)
    if hybrid and explanation.contributions is not None:
        added = " + ".join(f"{name} {share:.4f}" for name, share in explanation.contributions.items())
        line += f" · fused {explanation.fused:.4f} = {added}"
    return line
