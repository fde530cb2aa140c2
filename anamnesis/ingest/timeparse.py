"""Resolve the time expressions in a sentence against the moment it was said.

"I went to the support group yesterday", said on 8 May 2023, is an event of 7 May 2023.
``resolve(text, said_at)`` finds such expressions with a table of patterns and turns
each into a half-open date range ``[start, end)`` with a granularity. It needs no LLM
and runs at ingest speed (a few regular expressions per message). Conventions:

- weeks run Monday to Sunday; "last week" is the calendar week before the one the
  sentence was said in, "two weeks ago" the week that contains the day 14 days back;
- "last Friday" is the latest Friday strictly before the day it was said; "next
  Friday" the first strictly after; "last weekend" the latest Saturday-Sunday before
  the current week;
- a month without a year ("in May") is the latest May not after the month it was said,
  unless the sentence says "next";
- "on the 15th" is the 15th of the current month, or of the previous month when the
  15th is still to come;
- a day and month without a year ("on April 15", "by May 5") is the occurrence
  nearest to the day it was said, past or future (plans and deadlines are as common
  as reports);
- a bare weekday ("on Friday") is the latest such day before the day it was said, or
  the first after it when the sentence speaks of the future ("will", "going to",
  "plan", ...); "last August" is the latest August before the current month;
- seasons are northern-hemisphere meteorological seasons (summer is June to August;
  winter runs December to February and belongs to the year it starts in).

Every rule is a regular expression plus a resolver, registered in ``RULES`` with the
``rule`` decorator; a pattern that matches words that are not dates ("May" the name)
returns None from its resolver.

Why not ``dateparser.search.search_dates``: on LoCoMo turns it was several times slower,
and most of what it found and these rules did not was noise ("we" read as Wednesday,
"now", "one's"); its one real find ("Last Fri") is a rule here (study "Per dataset",
"Figures from the code's comments"). dateparser still parses the times callers pass in
(``normalise.parse_time``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from typing import Literal

Granularity = Literal["day", "week", "weekend", "month", "season", "year"]

MONTHS = {
    name: number
    for number, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        start=1,
    )
    for name in names
}
WEEKDAYS = {
    name: number
    for number, name in enumerate(
        ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
    )
}
NUMBER_WORDS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
    "a couple of": 2, "a couple": 2, "couple of": 2, "a few": 3, "few": 3, "several": 4,
}  # fmt: skip
UNIT_DAYS = {"day": 1, "week": 7, "month": 30, "year": 365}


@dataclass(frozen=True, slots=True)
class TimeMention:
    """One resolved expression: ``[start, end)`` in UTC, with its granularity."""

    expression: str
    start: datetime
    end: datetime
    granularity: Granularity


def _at(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def _days(first: date, count: int, expression: str, granularity: Granularity) -> TimeMention:
    return TimeMention(expression, _at(first), _at(first + timedelta(days=count)), granularity)


def _day(day: date, expression: str) -> TimeMention:
    return _days(day, 1, expression, "day")


def _week_of(day: date, expression: str) -> TimeMention:
    return _days(day - timedelta(days=day.weekday()), 7, expression, "week")


def _month(year: int, month: int, expression: str) -> TimeMention:
    following = date(year + (month == 12), month % 12 + 1, 1)
    first = date(year, month, 1)
    return _days(first, (following - first).days, expression, "month")


def _year(year: int, expression: str) -> TimeMention:
    return TimeMention(expression, _at(date(year, 1, 1)), _at(date(year + 1, 1, 1)), "year")


def _shift_months(day: date, months: int) -> tuple[int, int]:
    index = day.year * 12 + day.month - 1 + months
    return index // 12, index % 12 + 1


def _number(word: str) -> int | None:
    word = word.lower().strip()
    if word.isdigit():
        return int(word)
    return NUMBER_WORDS.get(word)


def _holiday(name: str, year: int) -> date | None:
    name = name.lower()
    fixed = {
        "christmas": (12, 25),
        "christmas eve": (12, 24),
        "new year's eve": (12, 31),
        "new year's day": (1, 1),
        "new year": (1, 1),
        "valentine's day": (2, 14),
        "halloween": (10, 31),
        "independence day": (7, 4),
        "the fourth of july": (7, 4),
    }
    if name in fixed:
        return date(year, *fixed[name])
    if name == "thanksgiving":  # fourth Thursday of November (US)
        first = date(year, 11, 1)
        return first + timedelta(days=(3 - first.weekday()) % 7 + 21)
    if name == "easter":  # anonymous Gregorian algorithm
        a, b, c = year % 19, year // 100, year % 100
        d, e = b // 4, b % 4
        g = (8 * b + 13) // 25
        h = (19 * a + b - d - g + 15) % 30
        i, k = c // 4, c % 4
        l_ = (32 + 2 * e + 2 * i - h - k) % 7
        m = (a + 11 * h + 22 * l_) // 451
        month, day = divmod(h + l_ - 7 * m + 114, 31)
        return date(year, month, day + 1)
    return None


HOLIDAYS = (
    r"christmas eve|christmas|new year's eve|new year's day|new year|valentine's day|"
    r"halloween|thanksgiving|easter|independence day|the fourth of july"
)
_MONTH = "|".join(sorted(MONTHS, key=len, reverse=True))
#: Abbreviations that are not also common words ("sat", "sun" are left out).
WEEKDAY_ABBREVIATIONS = {
    "mon": 0, "tue": 1, "tues": 1, "wed": 2, "thu": 3, "thur": 3, "thurs": 3, "fri": 4,
}  # fmt: skip
_WEEKDAY = "|".join(WEEKDAYS)
_WEEKDAY_OR_ABBREVIATION = "|".join([*WEEKDAYS, *WEEKDAY_ABBREVIATIONS])
_COUNT = r"\d+|a couple of|a couple|couple of|a few|few|several|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve"  # noqa: E501

Resolver = Callable[[re.Match[str], date], TimeMention | None]
RULES: list[tuple[re.Pattern[str], Resolver]] = []
#: Words every match of a rule holds, in lower case: one of each group (``rule``).
NEEDS: dict[re.Pattern[str], tuple[frozenset[str], ...]] = {}
#: The words of a lower-case ASCII text that ``NEEDS`` are looked up among: its runs of
#: letters, and each digit on its own.
_WORDS = re.compile(r"[a-z]+|[0-9]")

# Groups of words for ``rule``'s ``needs``: any one of a group.
_DIGITS = tuple("0123456789")
_MONTH_WORDS = tuple(MONTHS)
_WEEKDAY_WORDS = (*WEEKDAYS, *WEEKDAY_ABBREVIATIONS)
_HOLIDAY_WORDS = (
    "christmas", "new", "valentine", "halloween", "thanksgiving", "easter", "independence",
    "fourth",
)  # fmt: skip
_UNIT_WORDS = ("day", "days", "week", "weeks", "month", "months", "year", "years")
_WHICH_WORDS = ("last", "next", "this", "past")
_SEASON_WORDS = ("spring", "summer", "fall", "autumn", "winter")


def rule(pattern: str, *needs: tuple[str, ...]) -> Callable[[Resolver], Resolver]:
    """Register a resolver for a (case-insensitive, word-bounded) pattern, every match
    of which holds, as a whole word (``_WORDS``), a word of each group of ``needs``:
    ``resolve`` skips the pattern in an ASCII text that lacks one (most texts hold no
    time expression, and a few set lookups cost less than a pass of each pattern)."""

    def register(func: Resolver) -> Resolver:
        compiled = re.compile(rf"\b(?:{pattern})\b", re.IGNORECASE)
        RULES.append((compiled, func))
        NEEDS[compiled] = tuple(frozenset(group) for group in needs)
        return func

    return register


@rule(r"the day before yesterday", ("yesterday",))
def _day_before_yesterday(m: re.Match[str], said: date) -> TimeMention:
    return _day(said - timedelta(days=2), m.group(0))


@rule(r"yesterday|last night", ("yesterday", "night"))
def _yesterday(m: re.Match[str], said: date) -> TimeMention:
    return _day(said - timedelta(days=1), m.group(0))


@rule(
    r"today|tonight|this morning|this afternoon|this evening",
    ("today", "tonight", "morning", "afternoon", "evening"),
)
def _today(m: re.Match[str], said: date) -> TimeMention:
    return _day(said, m.group(0))


@rule(r"tomorrow", ("tomorrow",))
def _tomorrow(m: re.Match[str], said: date) -> TimeMention:
    return _day(said + timedelta(days=1), m.group(0))


@rule(rf"(?P<count>{_COUNT})\s+(?P<unit>day|week|month|year)s?\s+ago", ("ago",))
def _ago(m: re.Match[str], said: date) -> TimeMention | None:
    count = _number(m.group("count"))
    if count is None:
        return None
    unit = m.group("unit").lower()
    if unit == "day":
        return _day(said - timedelta(days=count), m.group(0))
    if unit == "week":
        return _week_of(said - timedelta(days=7 * count), m.group(0))
    if unit == "month":
        return _month(*_shift_months(said, -count), m.group(0))
    return _year(said.year - count, m.group(0))


@rule(
    rf"(?P<which>last|next|this|this past|this coming|past)\s+(?P<day>{_WEEKDAY_OR_ABBREVIATION})",
    _WHICH_WORDS,
    _WEEKDAY_WORDS,
)
def _relative_weekday(m: re.Match[str], said: date) -> TimeMention:
    name = m.group("day").lower()
    target = WEEKDAYS.get(name, WEEKDAY_ABBREVIATIONS.get(name, 0))
    which = m.group("which").lower()
    if which in ("next", "this coming"):
        ahead = (target - said.weekday()) % 7 or 7
        return _day(said + timedelta(days=ahead), m.group(0))
    if which == "this":  # "this Friday": the one in the current week
        return _day(said + timedelta(days=target - said.weekday()), m.group(0))
    back = (said.weekday() - target) % 7 or 7
    return _day(said - timedelta(days=back), m.group(0))


@rule(r"(?P<which>last|next|this|this past|this coming|past)\s+weekend", _WHICH_WORDS, ("weekend",))
def _weekend(m: re.Match[str], said: date) -> TimeMention:
    saturday = said + timedelta(days=5 - said.weekday())  # this week's Saturday
    which = m.group("which").lower()
    if which in ("last", "past", "this past"):
        saturday -= timedelta(days=7)
    elif which in ("next",):
        saturday += timedelta(days=7)
    return _days(saturday, 2, m.group(0), "weekend")


@rule(r"(?P<which>last|next|this)\s+(?P<unit>week|month|year)", _WHICH_WORDS, _UNIT_WORDS)
def _relative_period(m: re.Match[str], said: date) -> TimeMention:
    step = {"last": -1, "next": 1, "this": 0}[m.group("which").lower()]
    unit = m.group("unit").lower()
    if unit == "week":
        return _week_of(said + timedelta(days=7 * step), m.group(0))
    if unit == "month":
        return _month(*_shift_months(said, step), m.group(0))
    return _year(said.year + step, m.group(0))


@rule(
    rf"(?:the\s+)?(?:past|last)\s+(?:(?P<count>{_COUNT})\s+)?(?P<unit>day|week|month|year)s?"
    r"(?=\s*(?:,|\.|\?|!|$|and|or|\bi\b|\bwe\b))"
    rf"|(?:the\s+)?past\s+(?:(?P<count2>{_COUNT})\s+)?(?P<unit2>day|week|month|year)s?",
    ("past", "last"),
    _UNIT_WORDS,
)
def _trailing_period(m: re.Match[str], said: date) -> TimeMention | None:
    """ "the past month", "the last two weeks": the span up to and including today."""
    unit: Granularity = (m.group("unit") or m.group("unit2")).lower()  # type: ignore[assignment]  # the pattern admits day|week|month|year only
    word = m.group("count") or m.group("count2")
    count = 1 if word is None else _number(word)
    if count is None:
        return None
    if not word and m.group("unit") and not m.group(0).lower().startswith(("the", "past")):
        return None  # plain "last month" is the calendar month (see _relative_period)
    days = UNIT_DAYS[unit] * count
    return _days(
        said - timedelta(days=days - 1), days, m.group(0), "day" if unit == "day" else unit
    )


@rule(
    rf"(?P<day>\d{{1,2}})(?:st|nd|rd|th)?(?:\s+of)?\s+(?P<month>{_MONTH})\.?,?\s+(?P<year>\d{{4}})"
    rf"|(?P<month2>{_MONTH})\.?\s+(?P<day2>\d{{1,2}})(?:st|nd|rd|th)?,?\s+(?P<year2>\d{{4}})",
    _MONTH_WORDS,
    _DIGITS,
)
def _full_date(m: re.Match[str], said: date) -> TimeMention | None:
    day = int(m.group("day") or m.group("day2"))
    month = MONTHS[(m.group("month") or m.group("month2")).lower()]
    year = int(m.group("year") or m.group("year2"))
    try:
        return _day(date(year, month, day), m.group(0))
    except ValueError:
        return None


@rule(r"(?P<year>(?:19|20)\d{2})-(?P<month>\d{2})-(?P<day>\d{2})", _DIGITS)
def _iso_date(m: re.Match[str], said: date) -> TimeMention | None:
    try:
        return _day(
            date(int(m.group("year")), int(m.group("month")), int(m.group("day"))), m.group(0)
        )
    except ValueError:
        return None


@rule(
    rf"(?:in|during|since|by|until|of)\s+(?P<month>{_MONTH})(?:\s+(?P<year>(?:19|20)\d{{2}}))?",
    _MONTH_WORDS,
)
def _month_name(m: re.Match[str], said: date) -> TimeMention | None:
    name = m.group("month").lower()
    if name in ("may", "mar") and m.group("year") is None and not m.group(0)[:2].lower() == "in":
        return None  # "since may" / "by mar..." are too often not months
    month = MONTHS[name]
    if m.group("year"):
        return _month(int(m.group("year")), month, m.group(0))
    year = said.year if month <= said.month else said.year - 1
    return _month(year, month, m.group(0))


@rule(rf"(?P<month>{_MONTH})\.?,?\s+(?P<year>(?:19|20)\d{{2}})", _MONTH_WORDS, _DIGITS)
def _month_and_year(m: re.Match[str], said: date) -> TimeMention | None:
    word = m.group("month")
    if _is_modal_may(word):
        return None
    return _month(int(m.group("year")), MONTHS[word.lower()], m.group(0))


@rule(r"(?:in|since|during)\s+(?P<year>(?:19|20)\d{2})", _DIGITS)
def _year_only(m: re.Match[str], said: date) -> TimeMention:
    return _year(int(m.group("year")), m.group(0))


@rule(r"on the (?P<day>\d{1,2})(?:st|nd|rd|th)", _DIGITS)
def _day_of_month(m: re.Match[str], said: date) -> TimeMention | None:
    day = int(m.group("day"))
    year, month = (said.year, said.month) if day <= said.day else _shift_months(said, -1)
    try:
        return _day(date(year, month, day), m.group(0))
    except ValueError:
        return None


@rule(
    rf"(?:the\s+)?(?P<span>week|weekend|day)\s+(?P<rel>before|after)\s+(?P<holiday>{HOLIDAYS})",
    ("before", "after"),
    _HOLIDAY_WORDS,
)
def _around_holiday(m: re.Match[str], said: date) -> TimeMention | None:
    holiday = _nearest_holiday(m.group("holiday"), said)
    if holiday is None:
        return None
    span = m.group("span").lower()
    before = m.group("rel").lower() == "before"
    if span == "day":
        return _day(holiday + timedelta(days=-1 if before else 1), m.group(0))
    if span == "week":
        first = holiday - timedelta(days=7) if before else holiday + timedelta(days=1)
        return _days(first, 7, m.group(0), "week")
    saturday = holiday - timedelta(days=(holiday.weekday() - 5) % 7 or 7)
    if not before:
        saturday = holiday + timedelta(days=(5 - holiday.weekday()) % 7 or 7)
    return _days(saturday, 2, m.group(0), "weekend")


@rule(rf"(?:on|at|for|over|since|by)\s+(?P<holiday>{HOLIDAYS})", _HOLIDAY_WORDS)
def _on_holiday(m: re.Match[str], said: date) -> TimeMention | None:
    holiday = _nearest_holiday(m.group("holiday"), said)
    return _day(holiday, m.group(0)) if holiday else None


#: A date that an offset can be anchored on ("Aug 11", "5 May 2023", "Christmas").
_ANCHOR = (
    rf"(?:the\s+)?\d{{1,2}}(?:st|nd|rd|th)?(?:\s+of)?\s+(?:{_MONTH})\.?(?:,?\s+\d{{4}})?"
    rf"|(?:{_MONTH})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?"
    rf"|{HOLIDAYS}"
    r"|(?:19|20)\d{2}-\d{2}-\d{2}"
)


@rule(
    rf"(?P<count>{_COUNT})\s+(?P<unit>day|week|month)s?\s+(?P<rel>before|after)\s+"
    rf"(?P<anchor>{_ANCHOR})",
    _UNIT_WORDS,
    ("before", "after"),
)
def _offset_from_date(m: re.Match[str], said: date) -> TimeMention | None:
    """ "two weeks before Aug 11", "3 days after Christmas": the anchor date, shifted.
    A week or a month away is said loosely, so those resolve to a week or a month."""
    count = _number(m.group("count"))
    text = m.group("anchor")
    if re.fullmatch(HOLIDAYS, text, re.IGNORECASE):
        anchor = _nearest_holiday(text, said)
    else:
        anchors = resolve(text, _at(said))
        anchor = anchors[0].start.date() if anchors and anchors[0].granularity == "day" else None
    if count is None or anchor is None:
        return None
    sign = -1 if m.group("rel").lower() == "before" else 1
    unit = m.group("unit").lower()
    if unit == "day":
        return _day(anchor + timedelta(days=sign * count), m.group(0))
    if unit == "week":
        return _week_of(anchor + timedelta(days=sign * 7 * count), m.group(0))
    return _month(*_shift_months(anchor, sign * count), m.group(0))


_FUTURE = re.compile(
    r"\b(?:will|'ll|going to|gonna|plan|plans|planning|planned|next|tomorrow|upcoming|"
    r"soon|can't wait|looking forward|scheduled|due)\b",
    re.IGNORECASE,
)


def _speaks_of_future(m: re.Match[str]) -> bool:
    """Whether the sentence around a match talks about something still to come."""
    return _FUTURE.search(m.string) is not None


def _is_modal_may(word: str) -> bool:
    """Whether a month word is more likely a verb: lower-case "may" (or "mar")."""
    return word in ("may", "mar")


@rule(
    rf"(?:(?:on|by|until|till|since|before|after|from|due|starting|through)\s+)?"
    rf"(?:(?P<month>{_MONTH})\.?\s+(?P<day>\d{{1,2}})(?:st|nd|rd|th)?"
    rf"|(?:the\s+)?(?P<day2>\d{{1,2}})(?:st|nd|rd|th)?(?:\s+of)?\s+(?P<month2>{_MONTH}))"
    rf"(?!\.?,?\s+\d{{4}})",
    _MONTH_WORDS,
    _DIGITS,
)
def _day_and_month(m: re.Match[str], said: date) -> TimeMention | None:
    word = m.group("month") or m.group("month2")
    if _is_modal_may(word):
        return None
    month = MONTHS[word.lower()]
    day = int(m.group("day") or m.group("day2"))
    options = []
    for year in (said.year - 1, said.year, said.year + 1):
        try:
            options.append(date(year, month, day))
        except ValueError:
            continue
    if not options:
        return None
    return _day(min(options, key=lambda d: abs((d - said).days)), m.group(0))


@rule(rf"on\s+(?P<day>{_WEEKDAY})", _WEEKDAY_WORDS)
def _bare_weekday(m: re.Match[str], said: date) -> TimeMention:
    target = WEEKDAYS[m.group("day").lower()]
    if _speaks_of_future(m):
        return _day(said + timedelta(days=(target - said.weekday()) % 7 or 7), m.group(0))
    return _day(said - timedelta(days=(said.weekday() - target) % 7 or 7), m.group(0))


@rule(rf"(?P<which>last|next|this past)\s+(?P<month>{_MONTH})", _WHICH_WORDS, _MONTH_WORDS)
def _relative_month(m: re.Match[str], said: date) -> TimeMention | None:
    word = m.group("month")
    if _is_modal_may(word):
        return None
    month = MONTHS[word.lower()]
    if m.group("which").lower() == "next":
        return _month(said.year + (month <= said.month), month, m.group(0))
    return _month(said.year - (month >= said.month), month, m.group(0))


SEASONS = {"spring": 3, "summer": 6, "fall": 9, "autumn": 9, "winter": 12}
_SEASON = "|".join(SEASONS)


def _season(name: str, year: int, expression: str) -> TimeMention:
    """The three months from the season's first month of ``year``."""
    first = SEASONS[name.lower()]
    start = date(year, first, 1)
    end_year, end_month = _shift_months(start, 3)
    return TimeMention(expression, _at(start), _at(date(end_year, end_month, 1)), "season")


@rule(
    rf"(?P<which>last|this|next|this past|this coming|past)\s+(?P<season>{_SEASON})"
    rf"|(?:in|during|over)\s+the\s+(?P<season2>{_SEASON})(?:\s+of\s+(?P<year>(?:19|20)\d{{2}}))?"
    rf"|(?P<season3>{_SEASON})\s+(?:of\s+)?(?P<year3>(?:19|20)\d{{2}})",
    _SEASON_WORDS,
)
def _season_rule(m: re.Match[str], said: date) -> TimeMention:
    name = m.group("season") or m.group("season2") or m.group("season3")
    year = m.group("year") or m.group("year3")
    if year:
        return _season(name, int(year), m.group(0))
    seasons = [_season(name, y, m.group(0)) for y in range(said.year - 2, said.year + 2)]
    now = _at(said)
    which = (m.group("which") or "").lower()
    if which in ("next", "this coming"):
        return next(s for s in seasons if s.start > now)
    if which in ("last", "past", "this past"):
        return [s for s in seasons if s.end <= now][-1]
    current = [s for s in seasons if s.start <= now < s.end]
    if current:
        return current[0]
    if which == "this":
        return next(s for s in seasons if s.start > now)
    return [s for s in seasons if s.end <= now][-1]  # "in the summer": the latest one


def _nearest_holiday(name: str, said: date) -> date | None:
    """The holiday's date in the year that puts it closest to ``said``."""
    options = [_holiday(name, year) for year in (said.year - 1, said.year, said.year + 1)]
    dated = [d for d in options if d is not None]
    return min(dated, key=lambda d: abs((d - said).days)) if dated else None


#: The letters beyond ASCII that case-insensitive patterns take for ASCII ones ("laſt"
#: matches "last"), each as that ASCII letter (``str.translate``): a matched word so
#: translated is spelled as the pattern's own, and a text keeps its length.
ASCII_FOLDS = str.maketrans({"\u0130": "I", "\u0131": "i", "\u212a": "K", "\u017f": "s"})


def resolve(text: str, said_at: datetime) -> list[TimeMention]:
    """Every time expression in ``text`` resolved against ``said_at``, in text order.

    Overlapping matches keep the longest ("the day before yesterday" wins over
    "yesterday").
    """
    said = said_at.astimezone(UTC).date()
    # The resolvers look matched words up as the patterns spell them; the expressions
    # are given back as the text spells them.
    original, text = text, text.translate(ASCII_FOLDS)
    # Only an ASCII text skips a pattern for a word it lacks (other case folds are
    # left to the patterns).
    words = set(_WORDS.findall(text.lower())) if text.isascii() else None
    found: list[tuple[int, int, TimeMention]] = []
    for pattern, resolver in RULES:
        if words is not None and _lacks(words, NEEDS[pattern]):
            continue
        for match in pattern.finditer(text):
            try:
                mention = resolver(match, said)
            except (ValueError, OverflowError):  # "6000 years ago": outside datetime's range
                continue
            if mention is not None:
                found.append((match.start(), match.end(), mention))
    found.sort(key=lambda item: (item[0], -(item[1] - item[0])))
    kept: list[tuple[int, int, TimeMention]] = []
    for start, end, mention in found:
        if kept and start < kept[-1][1]:
            continue
        if text != original and mention.expression == text[start:end]:
            mention = replace(mention, expression=original[start:end])
        kept.append((start, end, mention))
    return [mention for _, _, mention in kept]


def _lacks(words: set[str], needs: tuple[frozenset[str], ...]) -> bool:
    """Whether ``words`` miss every word of one of the groups ``needs``."""
    for group in needs:
        if words.isdisjoint(group):
            return True
    return False
