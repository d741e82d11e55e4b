"""Hand-written questions over the demo corpus, each with the sentences an extractive answer should quote.

Asked as alice, who reads the Handbook and Engineering collections (not Globex's strategy). `expected`
are the sentences that answer the question, as the answer quotes them (markup stripped); `acceptable`
are sentences that are not wrong to quote beside them (they count for precision, not for recall). A
question with nothing expected is one the corpus cannot answer: any quote is a false positive.
Used by tests/rag/answering/test_extractive_quality.py (fake embeddings) and bench/extractive.py (MiniLM).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from documents.management.commands.setup_demo import DEMO_DIR

# The demo documents alice can read.
CORPUS = [
    "handbook-onboarding.md",
    "handbook-remote.md",
    "handbook-security.md",
    "engineering-deploy.md",
    "engineering-oncall.md",
]


@dataclass(frozen=True)
class Case:
    question: str
    expected: tuple[str, ...]
    acceptable: tuple[str, ...] = field(default=())


VACATION = "Full-time employees receive 25 days of paid vacation a year, plus public holidays."
TIME_OFF = "Request time off in the HR portal at least two weeks ahead for absences longer than three days."
LAPTOP = "You get a laptop on your first day."
SSO = (
    "Sign in with single sign-on (SSO) through the company identity provider; your manager requests access to the "
    "tools your team uses."
)
RECEIPTS = "Submit receipts within 30 days."
TRAVEL = "Travel must be booked through the travel desk; economy class for flights under six hours."
CORE_HOURS = "Core hours are 10:00 to 15:00 in your local time zone, when you should be reachable on chat."
BUDGET = "Each employee has a yearly home-office budget of 500 euros for a chair, a monitor or a desk."
CLAIM = "Claim it as an expense with the receipt."
CAMERAS = "Cameras are optional."
DECISIONS = "Every meeting has an agenda shared beforehand, and decisions are written down in the meeting notes."
PASSWORDS = "Passwords must be at least 14 characters and unique per service."
PASSWORD_MANAGER = "Use the company password manager."
TWO_FACTOR = "Enable two-factor authentication everywhere it is offered."
LOST_LAPTOP = "Report a lost laptop or a suspected phishing email to security@acme.example within one hour."
INVESTIGATE = "Do not try to investigate on your own."
CUSTOMER_DATA = "Confidential | Customer data | Approved systems only"
BRANCH = "Deployments happen from the main branch through the CI pipeline."
FRIDAYS = "Never deploy on Fridays after 14:00."
APPROVALS = "Merge the pull request after two approvals."
PROMOTE = "Promote the image to production:"
ROLLBACK = "Run ./deploy rollback --env production; it restores the previous image within two minutes."
ROLLBACK_POST = "Post in #incidents when you roll back."
ROTATION = "Engineers rotate on-call weekly, starting Monday at 09:00."
PAGES = "The on-call engineer answers pages within 15 minutes, day and night."
ESCALATE = "If you cannot resolve a page within an hour, escalate to the secondary on-call, then to the engineering manager."
SEVERITY = "Severity 1 incidents page the whole team."
COMPENSATION = "Each on-call week is compensated with one extra day off, taken within the following month."

CASES = [
    Case("How many vacation days do I get?", (VACATION,)),
    Case("How far in advance do I have to request time off?", (TIME_OFF,)),
    Case("When do I get my laptop?", (LAPTOP,)),
    Case("How do I sign in to the company tools?", (SSO,)),
    Case("How long do I have to submit receipts?", (RECEIPTS,)),
    Case("Which class can I fly for work travel?", (TRAVEL,)),
    Case("When are the core hours for remote work?", (CORE_HOURS,)),
    Case("How big is the home-office budget?", (BUDGET,)),
    Case("How do I claim the home-office budget?", (CLAIM,), acceptable=(BUDGET,)),
    Case("Do I have to turn on my camera in meetings?", (CAMERAS,)),
    Case("Where are meeting decisions written down?", (DECISIONS,)),
    Case("How long must a password be?", (PASSWORDS,), acceptable=(PASSWORD_MANAGER,)),
    Case("Should I use two-factor authentication?", (TWO_FACTOR,)),
    Case("What should I do if I lose my laptop?", (LOST_LAPTOP,), acceptable=(INVESTIGATE,)),
    Case("Where may customer data be stored?", (CUSTOMER_DATA,)),
    Case("Which branch are deployments made from?", (BRANCH,)),
    Case("Can I deploy on a Friday afternoon?", (FRIDAYS,)),
    Case("How many approvals does a pull request need before merging?", (APPROVALS,)),
    Case("How do I roll back a deployment?", (ROLLBACK,), acceptable=(ROLLBACK_POST,)),
    Case("How quickly must the on-call engineer answer a page?", (PAGES,)),
    Case("When does the on-call rotation start?", (ROTATION,)),
    Case("Who do I escalate to if I cannot resolve a page?", (ESCALATE,)),
    Case("How is on-call work compensated?", (COMPENSATION,)),
    Case("Who gets paged for a severity 1 incident?", (SEVERITY,)),
    Case("How do I promote an image to production?", (PROMOTE,), acceptable=(BRANCH,)),
    # Nothing in alice's documents answers these.
    Case("What is the parental leave policy?", ()),
    Case("What is the dress code at the office?", ()),
    Case("Is there a gym membership allowance?", ()),
    Case("How large is the launch budget for the European market?", ()),
    Case("Which stock options do new employees receive?", ()),
]

_QUOTE = re.compile(r"^- (.*) \[\d+\]$")


def demo_texts() -> dict[str, str]:
    """The corpus by title (each file's first line)."""
    texts = {}
    for name in CORPUS:
        text = (DEMO_DIR / name).read_text()
        texts[text.splitlines()[0].lstrip("# ").strip()] = text
    return texts


def quoted_sentences(answer: str) -> list[str]:
    """The sentences an extractive answer quotes, without their list mark and citation."""
    return [m.group(1) for line in answer.splitlines() if (m := _QUOTE.match(line))]


@dataclass
class Score:
    quoted: int = 0
    correct: int = 0
    expected: int = 0
    found: int = 0
    # Unanswerable questions answered "not enough information", of how many.
    declined: int = 0
    unanswerable: int = 0
    misses: list[str] = field(default_factory=list)

    @property
    def precision(self) -> float:
        return self.correct / self.quoted if self.quoted else 1.0

    @property
    def recall(self) -> float:
        return self.found / self.expected if self.expected else 1.0

    def add(self, case: Case, answer: str) -> None:
        quoted = quoted_sentences(answer)
        right = set(case.expected) | set(case.acceptable)
        self.quoted += len(quoted)
        self.correct += sum(q in right for q in quoted)
        self.expected += len(case.expected)
        self.found += sum(e in quoted for e in case.expected)
        if not case.expected:
            self.unanswerable += 1
            self.declined += not quoted
        wrong = [q for q in quoted if q not in right]
        missing = [e for e in case.expected if e not in quoted]
        if wrong or missing:
            self.misses.append(f"{case.question!r}: quoted {wrong} wrongly, missed {missing}")
