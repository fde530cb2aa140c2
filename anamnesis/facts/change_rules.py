"""The rules for what stopped holding: changes said with a negation or a past tense.

"I left Tencent", "we moved out of Boston", "I'm not with Sam anymore", "I sold my
car", "I quit smoking", "I used to be a teacher". Each match is an END draft: the
resolver ends the slot's current value (``resolve``); the new value, when the
sentence gives one ("... and now work at Moonshot AI"), comes from ``state_rules``.

A plain negation is not a change: "I don't work at Apple" says nothing ended, so
"don't ..." rules need "anymore"; "no longer" and "used to" are changes by
themselves.
"""

from __future__ import annotations

import re

from .letters import CAPITAL, LOWER, capitalised
from .predicates import RELATIONS
from .rule_parts import (
    CLAUSE_END,
    IM,
    LEAD,
    MAX_OBJECT_WORDS,
    NAME,
    NOT_RELATIVE,
    OBJ,
    PETS,
    WE,
    I,
    Rule,
    capped,
    clean,
    employer,
    fixed,
    name_of,
    named,
    phrase,
    place,
    rule,
)
from .state_rules import DIETS, JOB

_DONT = r"(?i:don't|don’t|do not)"
_ANYMORE = r"(?=[^.!?]*\b(?i:anymore|any more)\b)"
_NO_LONGER = rf"(?:(?i:no longer)|{_DONT}(?={_ANYMORE}))"
_NOT_ANYMORE = rf"(?:(?i:no longer)|(?i:not)(?={_ANYMORE}))"
# Words that say what was left: a job ("I left Tencent and now work at ...") or a home
# ("I left New York and settled in Chicago"). With both or neither, nothing is said.
_JOB_WORDS = re.compile(
    r"\b(?:work|works|working|worked|job|jobs|joined|hired|company|employer|startup|"
    r"career|position|role|team|boss|colleagues|office)\b",
    re.IGNORECASE,
)
_HOME_WORDS = re.compile(
    r"\b(?:moved|move|moving|settled|live|living|lived|relocated|relocating|city|town|"
    r"apartment|flat|house|home)\b",
    re.IGNORECASE,
)
# Verbs a generic "I no longer ..." / "I used to ..." must not end as a habit: the
# specific rules read them, or they are states of mind.
_NOT_HABIT = (
    r"(?!(?i:be|am|live|work|eat|drink|like|love|enjoy|have|own|know|think|feel|care|"
    r"remember|understand|see|need|want|believe|get|go to|want|mind|with)\b)"
)


# A verb alone says no habit ("than I used to take").
_LIGHT_VERBS = frozenset({"take", "do", "get", "make", "have", "go", "use", "wear", "play"})


def _left(match: re.Match[str]) -> tuple[str, str] | None:
    """What "I left X" ended: a job or a home, by the other words of the sentence."""
    obj = clean(match.group("obj"))
    if obj is None or not capitalised(obj):
        return None
    job = bool(_JOB_WORDS.search(match.string))
    home = bool(_HOME_WORDS.search(match.string))
    if job == home:
        return None
    return ("works_at" if job else "lives_in"), obj


def _habit(match: re.Match[str]) -> tuple[str, str] | None:
    """A habit that stopped ("smoking", "going to the gym"): a verb phrase cut at a
    clause word or a time expression."""
    cut = CLAUSE_END.sub("", " " + match.group("obj").strip()).strip()
    words = capped(cut.split(), MAX_OBJECT_WORDS)
    while words and re.fullmatch(r"for|with|to|at|on|in|of|my|the|a|an|all", words[-1], re.I):
        words.pop()
    if not words or (len(words) == 1 and words[0].lower() in _LIGHT_VERBS):
        return None
    if words[-1].lower() in ("it", "them", "him", "her", "this", "that", "one", "ones"):
        return None
    return "habit", " ".join(words)


def _possession(match: re.Match[str]) -> tuple[str, str] | None:
    """A thing no longer had: a pet, the job, or a possession; never a person."""
    obj = clean(match.group("obj"))
    if obj is None:
        return None
    head = re.sub(r"^(?:my|our|the|a|an)\s+", "", obj, flags=re.IGNORECASE).lower()
    if head in ("job", "position", "role"):
        return "works_at", ""
    if head in RELATIONS or head.split()[-1] in RELATIONS:
        return None
    if re.fullmatch(PETS, head.split()[-1]):
        return "pet", head.split()[-1]
    return "owns", obj


def _ended_pet(match: re.Match[str]) -> tuple[str, str] | None:
    name = name_of(match.group("name"))
    return ("pet", f"{match.group('pet').lower()} named {name}") if name else None


CHANGE_RULES: tuple[Rule, ...] = tuple(
    rule(pattern, build, ends=True)
    for pattern, build in (
        # job
        (
            rf"{I}\s+(?i:{LEAD})?(?i:quit|left|lost)\s+(?i:my)\s+(?i:job|position|role)\s+"
            rf"(?i:at|with)\s+{OBJ}",
            employer("works_at"),
        ),
        (
            rf"{I}\s+(?i:{LEAD})?(?i:quit|left|lost)\s+(?i:my)\s+(?i:job|position|role)\b"
            rf"(?!\s+(?i:at|with|as)\b)",
            fixed("works_at", ""),
        ),
        (
            rf"{I}(?:\s+(?i:was|got)|(?:'ve|’ve| have)\s+been)\s+(?i:laid off|fired|let go)\s+"
            rf"(?i:from|by)\s+{OBJ}",
            employer("works_at"),
        ),
        (
            rf"{I}(?:\s+(?i:was|got)|(?:'ve|’ve| have)\s+been)\s+(?i:laid off|fired|let go)\b"
            rf"(?!\s+(?i:from|by)\b)",
            fixed("works_at", ""),
        ),
        (rf"{I}\s+(?i:{LEAD})?(?i:resigned|retired)\s+from\s+{OBJ}", place("works_at")),
        (rf"{I}\s+{_NO_LONGER}\s+(?i:work)\s+(?i:at|for)\s+{OBJ}", employer("works_at")),
        (rf"{I}\s+(?i:used to)\s+(?i:work)\s+(?i:at|for)\s+{OBJ}", employer("works_at")),
        (rf"{IM}\s+(?i:{LEAD})?(?i:unemployed|between jobs|out of work)\b", fixed("works_at", "")),
        (rf"{I}\s+(?i:{LEAD})?(?i:left|quit)\s+(?P<obj>{CAPITAL}[^,.;:!?()\"\n]*)", _left),
        (
            rf"\b(?i:after|since)\s+(?i:leaving|quitting)\s+(?P<obj>{CAPITAL}[^,.;:!?()\"\n]*)",
            _left,
        ),
        (rf"{I}\s+(?i:used to be)\s+(?i:an?\s+)?{JOB}", phrase("job")),
        (rf"{IM}\s+{_NOT_ANYMORE}\s+(?i:an?\s+)?{JOB}", phrase("job")),
        # home
        (
            rf"{WE}\s+(?i:{LEAD})?(?i:moved)\s+(?i:out of|away from|from)\s+{OBJ}",
            place("lives_in"),
        ),
        (rf"{WE}\s+{_NO_LONGER}\s+(?i:live)\s+in\s+{OBJ}", place("lives_in")),
        (rf"{WE}\s+(?i:used to)\s+(?i:live)\s+in\s+{OBJ}", place("lives_in")),
        # relationships
        (
            rf"{IM}\s+{_NOT_ANYMORE}\s+(?i:with|together with|dating|married to)\s+{NAME}",
            named("partner"),
        ),
        (
            rf"{NAME}\s+and\s+I\s+(?i:{LEAD})?(?i:broke up|split up|split|separated|divorced|"
            rf"got divorced)\b",
            named("partner"),
        ),
        (
            rf"{I}\s+(?i:{LEAD})?(?i:broke up with|split up with|split from|divorced|"
            rf"separated from)\s+{NAME}",
            named("partner"),
        ),
        (
            rf"(?i:\bmy\s+ex)(?:-|\s)?(?i:husband|wife|boyfriend|girlfriend|partner|fianc[eé]e?)?"
            rf",?\s+{NAME}",
            named("partner"),
        ),
        (rf"{IM}\s+(?i:{LEAD})?(?i:single|divorced)\b", fixed("partner", "")),
        # pets
        (
            rf"(?i:\b(?:my|our)\s+(?:old\s+)?){PETS},?\s+{NAME},?\s+"
            rf"(?i:died|passed away|passed|ran away)",
            _ended_pet,
        ),
        (
            rf"(?i:\b(?:rehome|rehomed|put down|lost|gave away|give away)\s+(?:my|our)\s+)"
            rf"{PETS},?\s+{NAME}",
            _ended_pet,
        ),
        # possessions (and a pet or the job given away, sold, lost)
        (
            rf"{WE}\s+(?i:{LEAD})?(?i:sold|got rid of|gave away|gave|donated|traded in)\s+"
            rf"(?P<obj>(?i:my|our)\s+[^,.;:!?()\"\n]+)",
            _possession,
        ),
        (
            rf"{WE}\s+{_NO_LONGER}\s+(?i:have|own)\s+(?P<obj>(?i:my|a|an|the)\s+"
            rf"[^,.;:!?()\"\n]+)",
            _possession,
        ),
        # preferences
        (
            rf"{IM}\s+{_NOT_ANYMORE}\s+(?i:into|a fan of|interested in)\s+{OBJ}",
            phrase("likes"),
        ),
        (rf"{NOT_RELATIVE}{I}\s+{_NO_LONGER}\s+(?i:like|love|enjoy)\s+{OBJ}", phrase("likes")),
        (
            rf"{NOT_RELATIVE}{I}\s+(?i:used to)\s+(?i:love|like|enjoy|be into)\s+{OBJ}",
            phrase("likes"),
        ),
        # plans
        (
            rf"{WE}\s+(?i:{LEAD})?(?i:cancelled|canceled|called off)\s+{OBJ}",
            phrase("plans"),
        ),
        # health and habits
        (rf"{IM}\s+{_NOT_ANYMORE}\s+(?i:an?\s+)?{DIETS}\b", phrase("diet")),
        (
            rf"{I}(?:'ve|’ve| have)?\s+(?i:{LEAD})?(?i:quit|stopped|gave up|given up)\s+"
            rf"(?P<obj>{LOWER}+ing\b[^,.;:!?()\"\n]*)",
            _habit,
        ),
        (
            rf"{NOT_RELATIVE}{I}\s+{_NO_LONGER}\s+(?P<obj>{_NOT_HABIT}{LOWER}+\b[^,.;:!?()\"\n]*)",
            _habit,
        ),
        (
            rf"{NOT_RELATIVE}{I}\s+(?i:used to)\s+(?P<obj>{_NOT_HABIT}{LOWER}+\b[^,.;:!?()\"\n]*)",
            _habit,
        ),
    )
)
