"""The rules for what holds: first-person statements of state ("I live in Denver",
"my sister Emma", "I'm allergic to peanuts", "I go running every morning").

Each rule is a pattern over one sentence and a builder (``rule_parts``). The rules
for what stopped holding ("I left Tencent") are in ``change_rules``.
"""

from __future__ import annotations

import re

from .letters import CAPITAL, LOWER, MARKS, WORD, letter_or
from .rule_parts import (
    CLAUSE_END,
    END_OF_NAME,
    IM,
    LEAD,
    NAME,
    NOT_RELATIVE,
    OBJ,
    PETS,
    RELATION_WORDS,
    WE,
    WERE,
    I,
    Rule,
    activity,
    begun,
    clean,
    employer,
    favourite,
    fixed,
    named,
    pet,
    phrase,
    place,
    plan,
    possession,
    relation,
    rule,
    simple,
)

# A letter of a word, with the hyphen of "sous-chef"; with an apostrophe ("mom's");
# or a space, in a favourite's category ("ice cream flavor").
_WORD_LETTER = letter_or("-")
_ROUTINE_LETTER = letter_or("'-")
_CATEGORY_LETTER = letter_or(" ")

#: Occupations "I'm a ..." names; from common job titles (US BLS occupation groups,
#: abridged to the everyday words people use of themselves).
OCCUPATIONS = (
    "nurse|teacher|engineer|developer|programmer|designer|doctor|physician|surgeon|dentist|"
    "lawyer|attorney|accountant|analyst|consultant|manager|director|architect|chef|cook|baker|"
    "barista|bartender|waiter|waitress|pilot|firefighter|police officer|scientist|researcher|"
    "professor|lecturer|student|writer|author|journalist|editor|photographer|artist|painter|"
    "musician|singer|actor|actress|dancer|therapist|psychologist|counselor|social worker|"
    "pharmacist|veterinarian|vet|electrician|plumber|carpenter|mechanic|driver|farmer|"
    "librarian|cashier|realtor|real estate agent|entrepreneur|freelancer|intern|paralegal|"
    "paramedic|caregiver|nanny|tutor|coach|personal trainer|economist|translator|"
    "receptionist|secretary|banker|content creator|filmmaker|producer|technician|"
    "software engineer|data scientist|product manager|project manager|web developer|"
    "graphic designer|marketing manager|sales manager|professional \\w+"
)
# Words before an occupation that make it an opinion, not a job ("a big believer").
_OPINION = (
    r"(?!(?:big|huge|good|great|bad|terrible|real|total|proud|happy|little|bit|lot|decent|"
    r"better|best|horrible|awful|huge|massive|true)\b)"
)
#: An occupation with up to two words before it ("software engineer", "registered nurse").
JOB = rf"(?P<obj>(?:{_OPINION}{_WORD_LETTER}+\s+){{0,2}}?(?:{OCCUPATIONS}))\b"
#: An occupation, not captured, for rules that capture something else.
_OCCUPATION = rf"(?:(?:{_OPINION}{_WORD_LETTER}+\s+){{0,2}}?(?!student\b)(?:{OCCUPATIONS}))\b"
#: Verbs that take the speaker to an employer when a role follows ("joined Globex as
#: a staff engineer", "moved to Globex as an engineer").
_TO_EMPLOYER = r"(?i:joined|moved to|moved over to|switched to)"
#: What follows such a verb when it names an employer and a role: the employer, then
#: "as" and an occupation (without one it is a club or a city: "joined a gym").
_IN_ROLE = rf"[^,.;:!?()\"\n]+?\s+(?i:as)\s+(?i:an?\s+)?{_OCCUPATION}"
#: Conditions "I have ..." names (a closed list: "I have a cold" is not a fact).
CONDITIONS = (
    "asthma|diabetes|type [12] diabetes|arthritis|migraines|anxiety|depression|ADHD|adhd|"
    "autism|celiac disease|high blood pressure|hypertension|high cholesterol|IBS|eczema|"
    "psoriasis|insomnia|sleep apnea|PCOS|epilepsy|allergies|cancer|"
    "chronic pain|fibromyalgia|lupus|long covid|tinnitus"
)
_HOMETOWN = r"(?:hometown|home town|home country|native country)"
#: Diets a person says they are on ("I'm vegan").
DIETS = r"(?P<obj>vegetarian|vegan|pescatarian|keto|gluten-free|dairy-free|plant-based)"
# How often: what marks a routine ("every morning", "twice a week", "on Tuesdays").
_OFTEN = (
    r"(?i:(?:every|each)\s+(?:day|morning|evening|night|week|weekend|month|\w+day)|daily|"
    r"nightly|(?:once|twice|\w+ times)\s+(?:a|an|per)\s+(?:day|week|month)|"
    r"on\s+(?:weekends|weekdays|(?:mon|tues|wednes|thurs|fri|satur|sun)days)|before bed)"
)
# Verbs that do not make a routine ("I think about it every day").
_NOT_ROUTINE = (
    r"(?!(?:am|was|were|have|had|did|do not|don't|will|would|can|could|should|think|feel|"
    r"miss|love|like|enjoy|adore|hate|prefer|aim|plan|intend|tend|hope|wish|want|need|try|"
    r"see|hear|get|got|know|remember|mean|guess|make|"
    r"said|say|told|tell|went|came|made|saw|used|really|just|also|only|never|still)\b|"
    rf"{LOWER}+ed\b)"
)
# What may follow a frequency: the end of the clause, not a noun ("my daily commute").
_OFTEN_END = r"(?=\s*(?:[,.;:!?)]|$)|\s+(?:and|but|to|so|because|for|with|at|in|on|or)\b)"
_ROUTINE = (
    rf"(?P<obj>{_NOT_ROUTINE}{LOWER}+(?:\s+{_ROUTINE_LETTER}+){{0,5}}?)\s+(?:{_OFTEN}){_OFTEN_END}"
)


#: Outings and gatherings one plans or books ("a trip to Lisbon", "a family dinner").
_PLANNED = (
    r"trip|vacation|holiday|getaway|cruise|tour|flight|party|visit|wedding|dinner|picnic|"
    r"reunion|celebration|camping trip|road trip"
)

# Nouns after a pet word that make it a thing, not a pet ("a fish tank").
_PET_THINGS = r"(?i:tank|food|bed|toy|sitter|walker|house|cage|bowl|park|show|treats?|hair)\b"


def _move_plan(match: re.Match[str]) -> tuple[str, str] | None:
    obj = clean(match.group("obj"))
    return ("plans", f"move to {obj}") if obj else None


def _routine(match: re.Match[str]) -> tuple[str, str] | None:
    obj = clean(match.group("obj"), CLAUSE_END)
    if not obj or obj.lower() in ("take", "do", "get", "make", "have", "go", "use"):
        return None  # a light verb alone says nothing ("like I usually do")
    return "habit", obj


_STARTED = begun("started")


def _begun(match: re.Match[str]) -> tuple[str, str] | None:
    """An activity begun ("started playing chess"); begun with a frequency it is a
    routine ("started volunteering once a month": a habit, not an event)."""
    built = _STARTED(match)
    if built is None or not re.search(_OFTEN, match.group("obj")):
        return built
    return "habit", built[1]


#: Degree words before "fan" ("a huge fan"), not what the speaker is a fan of.
_FAN_DEGREE = r"big|huge|total|massive|die-hard|diehard|lifelong|longtime|great|true|real"
#: Things "the" names in general, not one just shown ("I love the outdoors").
_GENERIC_THE = re.compile(
    r"^the\s+(?:outdoors|beach|ocean|sea|mountains|countryside|rain|snow|sun|water|theatre|"
    r"theater|opera|ballet|cinema|movies|city|woods|forest)\b",
    re.IGNORECASE,
)
_LIKES = activity("likes")


def _taste(match: re.Match[str]) -> tuple[str, str] | None:
    """A liking said with a verb: "the X" after it is a reaction to something just
    shown or said ("I like the template", "I love the connection to nature"), not a
    taste, unless it names a thing in general ("I love the outdoors")."""
    obj = match.group("obj").strip()
    if re.match(r"the\s", obj, re.IGNORECASE) and not _GENERIC_THE.match(obj):
        return None
    return _LIKES(match)


def _said_favourite(match: re.Match[str]) -> tuple[str, str] | None:
    """ "Painting landscapes is my favorite!": the whole subject is the liking."""
    obj = match.group("obj").strip()
    if _DEICTIC_SUBJECT.match(obj):
        return None
    return "likes", obj


# Subjects that point at something said before ("This one is my favorite").
_DEICTIC_SUBJECT = re.compile(
    r"^(?:it|this|that|these|those|mine|which|what|one|he|she|they|the|his|her|their|"
    r"your|so|and|but|oh|yes|well)\b",
    re.IGNORECASE,
)


def _allergy(match: re.Match[str]) -> tuple[str, str] | None:
    obj = clean(match.group("obj"))
    if not obj:
        return None
    return "allergic_to", obj if obj.endswith("s") else f"{obj}s"


def _pet_kind(match: re.Match[str]) -> tuple[str, str] | None:
    kind = match.group("pet").lower()
    return "pet", kind + ("s" if match.group("many") else "")


STATE_RULES: tuple[Rule, ...] = (
    # identity
    rule(rf"(?i:\bmy name(?:'s|’s| is))\s+{NAME}", named("name")),
    rule(rf"(?i:\bcall me)\s+{NAME}", named("name")),
    rule(rf"{IM}\s+(?P<obj>\d{{1,3}})\s+(?i:years?\s+old)\b", simple("age")),
    rule(rf"{I}\s+(?i:just\s+)?(?i:turned)\s+(?P<obj>\d{{1,3}})\b", simple("age")),
    # home
    rule(rf"{WE}\s+(?i:{LEAD})?(?i:live|reside)\s+in\s+{OBJ}", place("lives_in")),
    rule(rf"{I}(?:'ve|’ve| have)\s+(?i:{LEAD})?(?i:lived)\s+in\s+{OBJ}", place("lives_in")),
    rule(rf"{WERE}\s+(?i:{LEAD})?(?i:living|based)\s+in\s+{OBJ}", place("lives_in")),
    rule(
        rf"{WE}\s+(?i:{LEAD})?(?i:moved|relocated)\s+(?i:back\s+)?to\s+(?!{_IN_ROLE}){OBJ}",
        place("lives_in"),
    ),
    rule(
        rf"{WE}\s+(?i:{LEAD})?(?i:moved|relocated)\s+from\s+[^,.;:!?]+?\s+to\s+{OBJ}",
        place("lives_in"),
    ),
    rule(rf"\b(?i:settled|settling)\s+(?i:down\s+)?in\s+{OBJ}", place("lives_in")),
    rule(
        rf"{WE}\s+(?i:{LEAD})?(?i:moved)\s+(?i:back\s+)?to\s+(?i:my\s+{_HOMETOWN}),\s+{OBJ}",
        place("lives_in"),
    ),
    rule(rf"(?i:\bmy\s+{_HOMETOWN}),?\s+{OBJ}", place("from")),
    rule(
        rf"{WE}\s+(?i:{LEAD})?(?i:rent)\s+(?i:an?|my|our)\s+(?:{WORD}+\s+)?"
        rf"(?i:flat|apartment|house|place|condo|studio)\s+in\s+{OBJ}",
        place("lives_in"),
    ),
    rule(rf"{IM}\s+(?i:originally\s+)?from\s+{OBJ}", place("from")),
    rule(rf"{I}\s+(?i:grew up)\s+in\s+{OBJ}", place("from")),
    # work
    rule(rf"{I}\s+(?i:{LEAD})?(?i:work)\s+(?i:at|for)\s+{OBJ}", employer("works_at")),
    rule(rf"{IM}\s+(?i:{LEAD})?(?i:working)\s+(?i:at|for)\s+{OBJ}", employer("works_at")),
    rule(rf"{I}(?:'ve|’ve| have) been (?i:working)\s+(?i:at|for)\s+{OBJ}", employer("works_at")),
    rule(
        rf"{I}\s+(?i:{LEAD})?(?i:got|landed|accepted|started|took)\s+(?i:a\s+|my\s+|the\s+)?"
        rf"(?i:new\s+)?(?i:job|position|role)\s+(?i:at|with)\s+{OBJ}",
        employer("works_at"),
    ),
    rule(
        rf"{IM}\s+(?i:{LEAD})?(?i:an?\s+)(?!student\b)(?:{OCCUPATIONS})\s+(?i:at|for)\s+{OBJ}",
        place("works_at"),
    ),
    rule(rf"{IM}\s+(?i:{LEAD})?(?i:an?\s+)student\s+at\s+{OBJ}", place("studies_at")),
    rule(rf"{I}\s+(?i:{LEAD})?(?i:teach)\s+[^,.;:!?]+?\s+at\s+{OBJ}", place("works_at")),
    rule(rf"{I}\s+(?i:{LEAD})?(?i:work|worked)\s+as\s+(?i:an?\s+)?{OBJ}", simple("job")),
    rule(
        rf"{I}\s+(?i:{LEAD})?(?i:work)\s+as\s+[^,.;:!?()\"\n]+?\s+(?i:at|for)\s+{OBJ}",
        employer("works_at"),
    ),
    rule(
        rf"{I}\s+(?i:{LEAD})?(?i:got|landed|accepted|started|took)\s+(?i:a\s+|my\s+|the\s+)?"
        rf"(?i:new\s+)?(?i:job|position|role)\s+(?i:at|with)\s+[^,.;:!?()\"\n]+?\s+(?i:as)\s+"
        rf"(?i:an?\s+)?{OBJ}",
        simple("job"),
    ),
    rule(
        rf"{I}\s+(?i:{LEAD})?{_TO_EMPLOYER}\s+(?=(?i:{_IN_ROLE}))(?P<obj>[^,.;:!?()\"\n]+?)\s+as\b",
        employer("works_at"),
    ),
    rule(
        rf"{I}\s+(?i:{LEAD})?{_TO_EMPLOYER}\s+(?=(?i:{_IN_ROLE}))[^,.;:!?()\"\n]+?\s+as\s+"
        rf"(?i:an?\s+)?{JOB}",
        simple("job"),
    ),
    rule(
        rf"{I}\s+(?i:{LEAD})?(?i:work)\s+(?i:at|for)\s+[^,.;:!?\n]+?\s+as\s+(?i:an?\s+)?{OBJ}",
        simple("job"),
    ),
    rule(rf"{IM}\s+(?i:{LEAD})?(?i:working)\s+as\s+(?i:an?\s+)?{OBJ}", simple("job")),
    rule(rf"{I}(?:'ve|’ve| have) been (?i:working)\s+as\s+(?i:an?\s+)?{OBJ}", simple("job")),
    rule(
        rf"(?i:\bmy\s+(?:new\s+)?(?:job|role|position)\s+as)\s+(?i:an?\s+)?{OBJ}",
        simple("job"),
    ),
    rule(
        rf"{I}\s+(?i:{LEAD})?(?i:started|began|took)\s+(?i:my\s+|a\s+)?(?i:new\s+)?"
        rf"(?i:job|role|position)\s+as\s+(?i:an?\s+)?{OBJ}",
        simple("job"),
    ),
    rule(rf"{I}\s+(?i:{LEAD})?(?i:started)\s+as\s+(?i:an?\s+)?{OBJ}", simple("job")),
    rule(
        rf"{I}(?:'ve|’ve| have)?\s+(?i:{LEAD})?(?i:started|began)\s+(?i:working)\s+(?i:at|for)\s+"
        rf"{OBJ}",
        employer("works_at"),
    ),
    rule(rf"{IM}\s+(?i:{LEAD})?(?i:an?\s+){JOB}", simple("job", CLAUSE_END)),
    rule(rf"{I}\s+(?i:{LEAD})?(?i:got\s+promoted\s+to)\s+(?i:an?\s+)?{OBJ}", simple("job")),
    rule(rf"{IM}\s+(?i:{LEAD})?(?i:retired)\b", fixed("job", "retired")),
    rule(rf"{I}\s+(?i:{LEAD})?(?i:study|studied)\s+(?i:at)\s+{OBJ}", place("studies_at")),
    rule(
        rf"{IM}\s+(?i:{LEAD})?(?i:studying)\s+(?:{WORD}+\s+){{0,3}}?at\s+{OBJ}",
        place("studies_at"),
    ),
    # relationships ("my sister Emma", "my husband's name is Tom", "I'm married to Tom")
    rule(rf"(?i:\bmy\s+(?P<rel>{RELATION_WORDS}))(?:,)?\s+{NAME}{END_OF_NAME}", relation),
    rule(
        rf"(?i:\bmy\s+(?P<rel>{RELATION_WORDS})(?:'s|’s)\s+name\s+is)\s+{NAME}",
        relation,
    ),
    rule(
        rf"(?i:\bmy\s+(?:new\s+)?(?P<rel>{RELATION_WORDS})\s+is\s+(?:called|named))\s+{NAME}",
        relation,
    ),
    rule(rf"(?i:\bmy\s+new\s+(?P<rel>{RELATION_WORDS})\s+is)\s+{NAME}", relation),
    rule(rf"{IM}\s+(?i:{LEAD})?(?i:married|engaged)\s+to\s+{NAME}", named("partner")),
    rule(rf"{I}\s+(?i:{LEAD})?(?i:got\s+)?(?i:married|engaged)\s+to\s+{NAME}", named("partner")),
    rule(rf"{I}\s+(?i:{LEAD})?(?i:started\s+dating|married)\s+{NAME}", named("partner")),
    rule(rf"{IM}\s+(?i:{LEAD})?(?i:dating)\s+{NAME}", named("partner")),
    # pets and possessions
    rule(
        rf"(?i:\b(?:I|we)\s+(?:have|had|got|adopted|'ve got|’ve got)\s+(?:a|an|another)\s+"
        rf"(?:new\s+)?(?:little\s+)?){PETS}(?i:,?\s+(?:named|called))\s+{NAME}",
        pet,
    ),
    rule(rf"(?i:\b(?:my|our)\s+(?:new\s+)?){PETS}(?:,)?\s+{NAME}{END_OF_NAME}", pet),
    rule(
        rf"(?i:\b(?:I|we)\s+(?:{LEAD})?(?:have|had|got|adopted|rescued|'ve got|’ve got)\b)"
        rf"[^.!?]*?,\s+(?i:an?\s+(?:[\w{MARKS}-]+\s+){{0,3}}?){PETS}"
        rf"(?i:,?\s+(?:named|called))\s+{NAME}",
        pet,
    ),
    rule(rf"(?i:\bmy\s+){PETS}(?i:(?:'s|’s)\s+name\s+is)\s+{NAME}", pet),
    rule(
        rf"(?i:\b(?:I|we)\s+(?:just\s+)?(?:have|got|adopted|'ve got|’ve got)\s+"
        rf"(?:(?:a|an)|(?P<many>two|three|four|\d+))\s+(?:new\s+)?(?:little\s+)?)"
        rf"{PETS}(?i:s)?\b(?!-|(?i:,?\s+(?:named|called))|\s+{_PET_THINGS})",
        _pet_kind,
    ),
    rule(
        rf"{WE}\s+(?i:{LEAD})?(?i:bought|purchased|ordered|picked up|own)\s+"
        rf"(?i:myself\s+)?(?P<obj>(?i:a|an|my|the|some)\s+[^,.;:!?()\"\n]+)",
        possession("owns"),
    ),
    rule(
        rf"{I}\s+(?i:{LEAD})?(?i:got)\s+(?i:myself\s+)?"
        rf"(?P<obj>(?i:a|an|my|the)\s+(?i:new)\s+(?!(?i:job|role|position)\b)[^,.;:!?()\"\n]+)",
        simple("owns"),
    ),
    # preferences
    rule(
        rf"(?i:\bmy\s+(?:all-time\s+|new\s+|absolute\s+)?fav(?:ou|o)rite)\s+(?P<cat>{_CATEGORY_LETTER}+?)"
        rf"\s+(?i:is|are|has to be|would be|right now is|these days is)\s+{OBJ}",
        favourite,
    ),
    rule(
        rf"(?i:\bmy\s+(?:all-time\s+|new\s+|absolute\s+)?fav(?:ou|o)rite)\s+"
        rf"(?P<cat>{_CATEGORY_LETTER}+?),\s+{OBJ}",
        favourite,
    ),
    rule(
        rf"{NOT_RELATIVE}{I}\s+(?i:really\s+|absolutely\s+|totally\s+|also\s+|just\s+)?"
        rf"(?i:love|like|enjoy|adore)"
        rf"\s+{OBJ}",
        _taste,
    ),
    rule(
        rf"{IM}\s+(?i:{LEAD})?(?i:an?)\s+(?:(?i:{_FAN_DEGREE})\s+)?"
        rf"(?P<obj>(?!(?i:{_FAN_DEGREE})\b)[\w{MARKS}'’-]+(?:\s+{CAPITAL}[\w{MARKS}'’-]+)?)\s+"
        rf"(?i:fan)\b(?!\s+(?i:of)\b)",
        simple("likes"),
    ),
    rule(
        rf"{I}(?:'ve|’ve| have)?\s+(?i:always\s+)?(?i:had|have|got)\s+(?i:a)\s+"
        rf"(?:(?i:real|deep|great|huge|special)\s+)?(?i:love|passion)\s+(?i:for|of)\s+"
        rf"{OBJ}",
        activity("likes"),
    ),
    rule(
        rf"^(?P<obj>(?:[\w{MARKS}'’-]+\s+){{0,5}}?[\w{MARKS}'’-]+)\s+(?i:is|are)\s+(?i:my)\s+"
        r"(?:(?i:absolute|all-time)\s+)?(?i:fav(?:ou|o)rite)\s*[.!]*$",
        _said_favourite,
    ),
    rule(
        rf"{IM}\s+(?i:{LEAD})?(?i:obsessed with|into|hooked on|keen on|passionate about|"
        rf"a big fan of|a huge fan of)"
        rf"\s+{OBJ}",
        activity("likes"),
    ),
    rule(rf"{I}(?:'ve|’ve| have)\s+(?i:{LEAD})?(?i:gotten|got)\s+into\s+{OBJ}", activity("likes")),
    rule(rf"{I}\s+(?i:{LEAD})?(?i:prefer)\s+{OBJ}", simple("likes")),
    rule(
        rf"{I}\s+(?i:really\s+)?(?i:hate|dislike|can't stand|can’t stand|don't like|don’t like)"
        rf"\s+(?![^.!?]*\b(?i:anymore|any more)\b){OBJ}",
        phrase("dislikes"),
    ),
    # plans
    rule(
        rf"{IM}\s+(?i:{LEAD})?(?i:planning|hoping|going|about)\s+to\s+{OBJ}",
        plan,
    ),
    rule(rf"{I}\s+(?i:{LEAD})?(?i:plan|intend|decided)\s+to\s+{OBJ}", plan),
    rule(rf"{WERE}\s+(?i:{LEAD})?(?i:planning)\s+to\s+{OBJ}", plan),
    rule(
        rf"(?:{WERE}\s+(?i:{LEAD})?(?i:trying to plan|planning)|{WE}\s+(?i:{LEAD})?(?i:plan|booked|"
        rf"reserved))\s+(?P<obj>(?i:a|an)\s+(?:[\w{MARKS}-]+\s+){{0,3}}?(?i:{_PLANNED})"
        rf"\b[^,.;:!?()\"\n]*)",
        plan,
    ),
    rule(
        rf"{WERE}\s+(?i:{LEAD})?(?i:moving)\s+to\s+(?P<obj>{CAPITAL}[^,.;:!?()\"\n]*)", _move_plan
    ),
    # health
    rule(rf"{IM}\s+(?i:{LEAD})?(?i:allergic)\s+to\s+{OBJ}", simple("allergic_to")),
    rule(rf"{I}\s+(?i:{LEAD})?(?i:have)\s+(?i:an?\s+)(?P<obj>{WORD}+)\s+(?i:allergy)\b", _allergy),
    rule(
        rf"{I}(?:'ve|’ve| have)?\s+(?i:{LEAD})?(?i:was\s+|been\s+|got\s+)?(?i:diagnosed)\s+with\s+"
        rf"(?i:an?\s+)?{OBJ}",
        simple("condition", CLAUSE_END),
    ),
    rule(
        rf"{I}\s+(?i:{LEAD})?(?i:have|suffer from)\s+(?P<obj>{CONDITIONS})\b", simple("condition")
    ),
    rule(rf"{I}\s+(?i:{LEAD})?(?i:suffer from)\s+{OBJ}", simple("condition", CLAUSE_END)),
    rule(
        rf"{IM}\s+(?i:{LEAD})?(?P<obj>(?i:lactose|gluten)\s+intolerant)\b",
        simple("condition"),
    ),
    rule(
        rf"{IM}\s+(?i:{LEAD})?(?i:an?\s+)?{DIETS}\b(?!\s+(?i:food|recipes?|meals?))", simple("diet")
    ),
    rule(
        rf"{I}\s+(?i:{LEAD})?(?:(?i:don't|don’t|do not|no longer|never)\s+)(?i:eat|drink)\s+{OBJ}",
        simple("avoids"),
    ),
    rule(
        rf"{I}(?:'ve|’ve| have)?\s+(?i:{LEAD})?(?i:gave up|given up|cut out)\s+(?!on\b)"
        rf"(?P<obj>(?!{WORD}+ing\b)[^,.;:!?()\"\n]+)",
        simple("avoids"),
    ),
    # routines and habits
    rule(
        rf"{I}\s+(?i:usually|always|often|regularly|normally|typically)?\s*{_ROUTINE}",
        _routine,
    ),
    rule(
        rf"{I}(?:'ve|’ve| have)\s+(?i:{LEAD})?(?i:been|started)\s+{_ROUTINE}",
        _routine,
    ),
    rule(
        rf"{I}\s+(?i:usually|always|often|regularly|normally|typically)\s+"
        rf"(?P<obj>{_NOT_ROUTINE}{LOWER}+(?:\s+{_ROUTINE_LETTER}+){{1,9}})",
        _routine,
    ),
    rule(rf"{I}\s+(?i:{LEAD})?(?i:smoke)\b", fixed("habit", "smoking")),
    # events
    rule(
        rf"{I}\s+(?i:{LEAD})?(?i:went to|visited|traveled to|travelled to|flew to)\s+{OBJ}",
        simple("visited"),
    ),
    rule(
        rf"{I}\s+(?i:{LEAD})?(?i:attended|participated in|took part in)\s+{OBJ}",
        simple("attended"),
    ),
    rule(
        rf"{WE}\s+(?i:{LEAD})?(?i:got back|came back|returned|came home)\s+from\s+"
        rf"(?:(?i:a|an|my|our)\s+(?:[\w{MARKS}-]+\s+){{0,2}}?(?i:trip|vacation|holiday|visit|journey)\s+"
        rf"(?i:to)\s+)?{OBJ}",
        place("visited"),
    ),
    rule(
        rf"{I}\s+(?i:{LEAD})?(?i:joined|rejoined|signed up for|enrolled in)\s+(?!{_IN_ROLE}){OBJ}",
        simple("started"),
    ),
    rule(
        rf"{I}(?:'ve|’ve| have)?\s+(?i:{LEAD})?(?i:started|began|took up)\s+"
        rf"(?!(?i:working|going|doing|getting|dating)\b)(?P<obj>{LOWER}+ing\b[^,.;:!?()\"\n]*)",
        _begun,
    ),
    rule(
        rf"{I}\s+(?i:{LEAD})?(?i:finished|completed|graduated from|ran)\s+{OBJ}",
        simple("finished"),
    ),
)
