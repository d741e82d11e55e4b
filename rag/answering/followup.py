"""Follow-up questions: the thread a question is asked in, and the question rewritten to stand alone.

"And how do I roll it back?" searches for nothing useful on its own. With an LLM configured it is
rewritten from the earlier turns by the model; without one (or when the model fails), the
content words of the previous question are added to a follow-up that refers back to it. Search, the
evidence check and the answer then use the rewritten question; the prompt also gets the earlier turns.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from django.conf import settings

from config.errors import Forbidden, InvalidQuery
from config.metrics import KIND_LLM, provider_call
from permissions.models import User
from rag.answering.conversations import Turn, conversation_get, conversation_turns
from rag.answering.extractive import STOPWORDS
from rag.answering.passages import ms_since
from rag.answering.prompt import build_rewrite_prompt
from rag.models import Conversation
from rag.providers.errors import ProviderError
from rag.providers.llm import get_llm
from rag.providers.retry import INTERACTIVE, call_with_retries

logger = logging.getLogger("rag.answers")

_WORD = re.compile(r"\w+")
# Words by which a question points back at an earlier one ("it", "those"), and openers that continue it.
_REFERRING = frozenset(
    "it its itself that this these those they them their theirs he him his she her hers ones such same former latter".split()
)
_CONTINUING = frozenset("and also but or so then plus".split())
_CONTINUING_PAIRS = frozenset({("what", "about"), ("how", "about"), ("what", "else"), ("why", "not")})
# A question with this many content words or fewer ("why?", "in production?") leans on the one before it.
_SHORT = 2
# Words of the earlier question added to a follow-up, at most.
_CONTEXT_WORDS = 8
REWRITE_MAX_TOKENS = 300
MIN_QUESTION_LENGTH = 3
# What a model may put before its rewrite despite the instructions.
_LABEL = re.compile(r"^(?:standalone|rewritten|follow-up)?\s*question\s*:\s*", re.I)


@dataclass(frozen=True)
class Thread:
    """A question with what its conversation gives it: the earlier turns and the question standing alone."""

    question: str
    standalone: str
    conversation: Conversation | None = None  # None: the answer starts a new conversation
    keep: bool = True  # False: the answer is logged but kept in no conversation (a read-scoped token's)
    earlier: tuple[Turn, ...] = ()
    latency: dict[str, float] = field(default_factory=dict)
    replaces: uuid.UUID | None = None  # the newest turn this answer takes the place of (a regenerated answer)

    @property
    def context(self) -> str:
        """What the earlier turns give the answer's prompt, as the answer cache keys it (empty for a first question)."""
        return "\n".join(f"{turn.standalone_query or turn.question}\x1f{turn.answer or ''}" for turn in self.earlier)

    @property
    def sources(self) -> set[uuid.UUID]:
        """The documents the earlier turns bring to this answer: a withheld turn brings only its question."""
        return {document for turn in self.earlier if not turn.withheld for document in turn.sources}


def thread_for(
    *,
    user: User,
    question: str,
    conversation_id: uuid.UUID | None = None,
    keep: bool = True,
    replaces: uuid.UUID | None = None,
) -> Thread:
    """The thread `question` is answered in: a new conversation, or the user's own `conversation_id` (else not_found).

    Without `keep` (a caller who may not write) the answer is kept in no conversation, so it cannot continue one.
    `replaces` is the conversation's newest turn, answered again: the turns before it are the thread's.
    """
    if conversation_id is not None and not keep:
        # Refused before the lookup, so a reader learns nothing of conversations that are not theirs.
        raise Forbidden("Continuing a conversation adds a turn to it: that needs an API token with the write scope.")
    if conversation_id is None:
        if replaces is not None:
            raise InvalidQuery("replaces: needs the conversationId of the answer it replaces.")
        return Thread(question=question, standalone=question, keep=keep)
    started = time.perf_counter()
    conversation = conversation_get(user=user, conversation_id=conversation_id)
    turns = settings.RAG_CONVERSATION_TURNS
    extra = 1 if replaces is not None else 0
    earlier = tuple(conversation_turns(user=user, conversation=conversation, last=turns + extra)) if turns + extra else ()
    if replaces is not None:
        if not earlier or earlier[-1].id != replaces:
            raise InvalidQuery("replaces: must be the newest answer of the conversation.")
        earlier = earlier[:-1]
    standalone = standalone_question(question, earlier)
    return Thread(
        question=question,
        standalone=standalone,
        conversation=conversation,
        earlier=earlier,
        latency={"rewriteMs": ms_since(started)} if earlier else {},
        replaces=replaces,
    )


def standalone_question(question: str, earlier: Sequence[Turn]) -> str:
    """`question` rewritten to be understood without `earlier`: by the LLM when one is configured, else by rule."""
    if not earlier:
        return question
    client = get_llm()
    if client is not None:
        messages = build_rewrite_prompt(question, earlier)
        try:
            with provider_call(KIND_LLM, client.model):
                text = call_with_retries(
                    lambda: "".join(client.stream(messages, max_tokens=REWRITE_MAX_TOKENS)),
                    max_retries=settings.RAG_LLM_MAX_RETRIES,
                    what=f"Follow-up rewrite with {client.model}",
                    backoff=INTERACTIVE,
                    metric=(KIND_LLM, client.model),
                )
        except ProviderError as exc:
            logger.warning("Follow-up rewrite with %s failed, rewriting by rule: %s", client.model, exc)
        else:
            rewritten = _rewritten(text)
            if rewritten is not None:
                return rewritten
            logger.warning("Follow-up rewrite with %s gave no usable question, rewriting by rule", client.model)
    return rule_rewrite(question, earlier)


def _rewritten(text: str) -> str | None:
    """The model's first line without labels or quotes, if it is a question of an acceptable length."""
    line = next((line.strip() for line in text.splitlines() if line.strip()), "")
    line = _LABEL.sub("", line).strip().strip("\"'`“”‘’").strip()
    return line if MIN_QUESTION_LENGTH <= len(line) <= settings.RAG_MAX_QUERY_LENGTH else None


def refers_back(question: str) -> bool:
    """Whether the question leans on an earlier one: it points back ("it", "those"), continues ("and ..."), or is short."""
    words = _WORD.findall(question.lower())
    if not words or words[0] in _CONTINUING or tuple(words[:2]) in _CONTINUING_PAIRS or _REFERRING.intersection(words):
        return True
    return len([w for w in words if w not in STOPWORDS]) <= _SHORT


def rule_rewrite(question: str, earlier: Sequence[Turn]) -> str:
    """A follow-up that refers back, with the content words of the previous question (itself standing alone) added."""
    if not earlier or not refers_back(question):
        return question
    previous = earlier[-1]
    asked = set(_WORD.findall(question.lower()))
    context: list[str] = []
    for word in _WORD.findall(previous.standalone_query or previous.question):
        lowered = word.lower()
        if lowered in STOPWORDS or lowered in _REFERRING or lowered in asked or lowered in {w.lower() for w in context}:
            continue
        context.append(word)
        if len(context) == _CONTEXT_WORDS:
            break
    if not context:
        return question
    added = f" ({' '.join(context)})"
    return question[: settings.RAG_MAX_QUERY_LENGTH - len(added)] + added
