"""Comparison by the gold's type (answer grammar v3): dates, person names, lists and numbers with units.

The span reader and each scorer's metric compare text; these comparisons add the readings a human grader
makes without thinking, each only when the gold *is* of that type, and each on the whole committed span
(so a span that holds anything else never matches):

- **Dates** (:func:`same_date`): both sides parse with ``python-dateutil`` (the ``dates`` extra, needed by the
  QA benchmarks' ``-v3`` ids; comparing a date without it raises ``DependencyNotInstalled``) to the same
  year, month and day, *and* name the same components ("30 April 1789" = "April 30, 1789" = "1789-04-30";
  "April 1789" is not "30 April 1789"; "1789" alone is a number, not a date). A numeric date whose day and
  month could swap ("04/05/1789") is read only when both orders agree.
- **Person names** (:func:`same_name`): Unicode folding (no diacritics, case folded, ``ß`` as ``ss``,
  ``ø`` as ``o``): "Jose Marti" = "José Martí"; initials stand for a given name ("J. Madison",
  "J.F. Kennedy" = "John F. Kennedy"), but the last name is always written out and every token is there.
- **Lists** (:func:`same_list`): a gold of two or more items ("A, B", "A and B") equals an answer naming
  the same items in the same order, joined by commas, "and", "&" or semicolons, each compared as a name
  or a number (another order is another answer: "B, A" may name a different pair).
- **Numbers with units** (:func:`same_quantity`): :func:`~agentflow_env.scoring.extract.number_with_unit` on
  both sides, scientific notation included ("3.12 × 10^2 m" = "312 m"), the unit optional on the answer.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from datetime import datetime
from fractions import Fraction
from functools import lru_cache

from agentflow_env.error import DependencyNotInstalled
from agentflow_env.scoring.extract import number_with_unit, same_unit

__all__ = [
    "fold",
    "require_dates",
    "same_date",
    "same_date5",
    "same_list",
    "same_name",
    "same_name5",
    "same_quantity",
    "same_quantity5",
    "typed_equal",
]

_FOLD = str.maketrans({"ß": "ss", "ø": "o", "Ø": "o", "æ": "ae", "Æ": "ae", "œ": "oe", "đ": "d", "ł": "l", "ı": "i"})
_MONTHS = re.compile(
    r"(?i)\b(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|"
    r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\b\.?"
)
_ISO = re.compile(r"^\s*\d{4}-\d{1,2}-\d{1,2}\s*$")
_NUMERIC_DATE = re.compile(r"^\s*\d{1,2}[/.]\d{1,2}[/.]\d{4}\s*$")


_NOT_WORD = re.compile(r"[^\w\s'-]|_")


def fold(text: str) -> str:
    """``text`` folded for comparison: no diacritics, case folded, punctuation as spaces, one space."""
    return _fold(str(text))


@lru_cache(maxsize=4096)
def _fold(text: str) -> str:
    if text.isascii():  # no diacritics to take off, and casefold is lower
        text = text.lower()
    else:
        text = unicodedata.normalize("NFKD", text.translate(_FOLD))
        text = "".join(ch for ch in text if not unicodedata.combining(ch)).casefold()
    text = _NOT_WORD.sub(" ", text).replace("'", "")
    return " ".join(text.split())


# ------------------------------------------------------------------ dates
def require_dates() -> None:
    """Raise :class:`~agentflow_env.error.DependencyNotInstalled` when ``python-dateutil`` is missing."""
    try:
        import dateutil.parser  # noqa: F401
    except ImportError:
        raise DependencyNotInstalled("python-dateutil", "dates") from None


def _looks_like_date(text: str) -> bool:
    text = text.strip()
    if len(text) > 40 or not re.search(r"\d", text):
        return False
    return bool(_MONTHS.search(text) or _ISO.match(text) or _NUMERIC_DATE.match(text))


@lru_cache(maxsize=4096)
def _date_parts(text: str) -> tuple[tuple[str, int], ...] | None:
    """``(("year", 1789), ("month", 4), ("day", 30))`` for the components ``text`` names, or ``None``."""
    if not _looks_like_date(text):
        return None
    require_dates()
    from dateutil import parser

    text = re.sub(r"(?<=\d)(?:st|nd|rd|th)\b", "", text.strip().rstrip("."))
    readings = set()
    for dayfirst in (False, True) if _NUMERIC_DATE.match(text) else (False,):
        try:
            a = parser.parse(text, default=datetime(2001, 1, 1), dayfirst=dayfirst)
            b = parser.parse(text, default=datetime(2002, 2, 2), dayfirst=dayfirst)
        except (ValueError, OverflowError, TypeError):
            return None
        parts = tuple(
            (name, getattr(a, name)) for name in ("year", "month", "day") if getattr(a, name) == getattr(b, name)
        )
        readings.add(parts)
    if len(readings) != 1:
        return None  # "04/05/1789": the day and month could swap
    parts = readings.pop()
    return parts if len(parts) >= 2 and parts[0][0] == "year" else None


def same_date(prediction: str, gold: str) -> bool:
    """Both are dates naming the same components with the same values (see the module doc)."""
    g = _date_parts(gold)
    return g is not None and _date_parts(prediction) == g


# ------------------------------------------------------------------ names
def _name_tokens(text: str) -> list[tuple[str, bool]]:
    """``(token, is_initial)`` pairs: "J.F. Kennedy" -> [("j", True), ("f", True), ("kennedy", False)]."""
    out: list[tuple[str, bool]] = []
    for raw in re.split(r"\s+", unicodedata.normalize("NFKC", str(text)).strip()):
        if re.fullmatch(r"(?:[^\W\d_]\.){2,4}", raw):
            out.extend((fold(ch), True) for ch in raw.split(".") if ch)
            continue
        initial = bool(re.fullmatch(r"[^\W\d_]\.?", raw))
        token = fold(raw)
        if token:
            out.extend((t, initial) for t in token.split())
    return out


def same_name(prediction: str, gold: str) -> bool:
    """The same name once folded, or with initials for given names (see the module doc)."""
    if fold(prediction) == fold(gold) and fold(gold):
        return True
    pred, ref = _name_tokens(prediction), _name_tokens(gold)
    if len(pred) != len(ref) or len(ref) < 2 or pred[-1][1] or pred[-1][0] != ref[-1][0]:
        return False
    if re.search(r"\d", gold):
        return False
    for (p, initial), (r, _) in zip(pred, ref):
        if p != r and not (initial and r.startswith(p)):
            return False
    return True


# ------------------------------------------------------------------ lists
_LIST_SPLIT = re.compile(r"\s*(?:,\s*(?:and\s+|&\s+)?|;\s*|\s+and\s+|\s+&\s+|\n+)\s*", re.IGNORECASE)


def _items(text: str) -> list[str]:
    return [fold(p) for p in _LIST_SPLIT.split(text.strip().rstrip(".")) if fold(p)]


def same_list(prediction: str, gold: str) -> bool:
    """A gold of several items equals an answer naming the same items in the same order, joined another
    way (see the module doc)."""
    ref = _items(gold)
    if len(ref) < 2:
        return False
    pred = _items(prediction)
    if len(pred) != len(ref):
        return False
    return all(p == r or same_name(p, r) or same_quantity(p, r) for p, r in zip(pred, ref))


# ------------------------------------------------------------------ numbers with units
def same_quantity(prediction: str, gold: str) -> bool:
    """Both are one number with compatible units and equal values (the unit may be left out)."""
    g = number_with_unit(gold)
    if g is None:
        return False
    p = number_with_unit(prediction)
    return p is not None and p[0] == g[0] and same_unit(p[1], g[1])


# the symbols of a formula ("(¬A → B) ↔ (A ∨ ¬B)"): a name or a list compared by its words keeps them (grammar 8)
_FORMULA_SYMBOL = re.compile(r"[¬∧∨→←↔⇒⇔⊕⊂⊃⊆⊇∈∉∩∪=≠<>≤≥+*/^|~!()\[\]{}∀∃]")
# what makes a text a formula: a logical, set or relation operator (a date's slashes or a title's brackets do not)
_FORMULA_OPERATOR = re.compile(r"[¬∧∨→←↔⇒⇔⊕⊂⊃⊆⊇∈∉∩∪=≠<>≤≥∀∃]")


def formula_symbols(text: str) -> list[str]:
    """The formula symbols of ``text``, in order; none when it holds no logical, set or relation operator."""
    return _FORMULA_SYMBOL.findall(text) if _FORMULA_OPERATOR.search(text) else []


def typed_equal(prediction: str, golds: Iterable[str], version: int = 3, symbols: bool = False) -> bool:
    """Whether the committed span ``prediction`` equals a gold under the gold's type; from ``version`` 5 on
    also as grammar 5 compares (:func:`same_quantity5`, :func:`same_date5`, :func:`same_name5`). With ``symbols``
    (grammar 8), a gold that is a formula (two symbols or more, such as ``¬``, ``→``, ``∨``, ``(``) equals no
    answer whose symbols differ from it, in kind or in order (grammar 7 folded "(A → B) ↔ (¬A ∨ B)" to the words
    of "(¬A → B) ↔ (A ∨ ¬B)" and paid it)."""
    prediction = prediction.strip()
    if not prediction or len(prediction) > 300:
        return False
    for gold in golds:
        gold = str(gold).strip()
        if not gold:
            continue
        if symbols and len(formula_symbols(gold)) >= 2 and formula_symbols(prediction) != formula_symbols(gold):
            continue
        if same_quantity(prediction, gold) or same_date(prediction, gold):
            return True
        if same_list(prediction, gold) or (not re.search(r"\d", gold) and same_name(prediction, gold)):
            return True
        if version >= 5 and (
            same_quantity5(prediction, gold)
            or same_date5(prediction, gold)
            or (not re.search(r"\d", gold) and same_name5(prediction, gold))
        ):
            return True
    return False


# ------------------------------------------------------------------ grammar 5
# units by dimension, as a factor of the dimension's base unit: SI prefixes on the base symbol, and the
# spellings (US and UK, singular and plural) of the same units
_SI_PREFIX: dict[str, int | Fraction] = {
    "": 1,
    "k": 1000,
    "M": 10**6,
    "G": 10**9,
    "c": Fraction(1, 100),
    "m": Fraction(1, 1000),
    "µ": Fraction(1, 10**6),
    "μ": Fraction(1, 10**6),
    "n": Fraction(1, 10**9),
}
_SI_NAME_PREFIX: dict[str, int | Fraction] = {
    "": 1,
    "kilo": 1000,
    "mega": 10**6,
    "giga": 10**9,
    "centi": Fraction(1, 100),
    "milli": Fraction(1, 1000),
    "micro": Fraction(1, 10**6),
    "nano": Fraction(1, 10**9),
}
_SI_BASE = {
    "m": ("length", ("metre", "meter")),
    "g": ("mass", ("gram", "gramme")),
    "s": ("time", ("second",)),
    "L": ("volume", ("litre", "liter")),
    "l": ("volume", ()),
    "W": ("power", ("watt",)),
    "J": ("energy", ("joule",)),
    "Hz": ("frequency", ("hertz",)),
    "Pa": ("pressure", ("pascal",)),
    "N": ("force", ("newton",)),
    "V": ("voltage", ("volt",)),
}
_TEMPERATURE = {
    "°f": "°F",
    "f": "°F",
    "degf": "°F",
    "fahrenheit": "°F",
    "°c": "°C",
    "c": "°C",
    "degc": "°C",
    "celsius": "°C",
}


def _unit5(unit: str) -> tuple[str, Fraction] | None:
    """``(dimension, factor)`` of a unit written as a symbol with an SI prefix or spelled out; temperatures
    as ``("°F", 1)``; ``None`` for a unit not in the tables."""
    raw = re.sub(r"\s+", " ", unit.strip().rstrip(".")).replace("degrees ", "deg").replace("degree ", "deg")
    if raw.lower().replace(" ", "") in _TEMPERATURE:
        return _TEMPERATURE[raw.lower().replace(" ", "")], Fraction(1)
    for symbol, (dimension, names) in _SI_BASE.items():
        for prefix, factor in _SI_PREFIX.items():
            if raw == prefix + symbol:
                return dimension, Fraction(factor)
        low = raw.lower()
        for name in names:
            for prefix, factor in _SI_NAME_PREFIX.items():
                if low in (prefix + name, prefix + name + "s", prefix + name + "es"):
                    return dimension, Fraction(factor)
    return None


_QUANTITY5 = re.compile(r"^\s*(-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?)\s*([^\d\s].{0,24}?)?\s*\.?\s*$")


def same_quantity5(prediction: str, gold: str) -> bool:
    """The same quantity once units with SI prefixes and spelled units are converted ("0.33 km" = "330
    metres" = "330m"; "212 degrees F" = "212 °F"); both sides must name a unit the tables know."""
    p, g = _QUANTITY5.match(prediction), _QUANTITY5.match(gold)
    if p is None or g is None or not p.group(2) or not g.group(2):
        return False
    pu, gu = _unit5(p.group(2)), _unit5(g.group(2))
    if pu is None or gu is None or pu[0] != gu[0]:
        return False
    try:
        pv = Fraction(p.group(1).replace(",", "")) * pu[1]
        gv = Fraction(g.group(1).replace(",", "")) * gu[1]
    except (ValueError, ZeroDivisionError):
        return False
    return pv == gv


_WEEKDAY = re.compile(r"(?i)^\s*(?:mon|tues|wednes|thurs|fri|satur|sun)day\s*,?\s*")
_DOTTED_DATE = re.compile(r"^\s*(\d{1,2})\.(\d{1,2})\.(\d{4})\s*$")


def same_date5(prediction: str, gold: str) -> bool:
    """Grammar 5's dates: a weekday before the date is dropped, an abbreviated month may end in a full stop
    ("Jun. 18, 1815"), and a dotted numeric date is day first ("05.12.1890" is 5 December 1890, the
    European convention; no convention writes the month first between dots)."""
    text = _WEEKDAY.sub("", prediction)
    text = re.sub(r"(?i)\b(jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec)\.", r"\1", text)
    m = _DOTTED_DATE.match(text)
    if m is not None:
        day, month, year = (int(x) for x in m.groups())
        if not (1 <= month <= 12 and 1 <= day <= 31):
            return False
        text = f"{year:04d}-{month:02d}-{day:02d}"
    return text != prediction and same_date(text, gold)


_NAME_ABBREVIATIONS = {"st": "saint", "ste": "sainte", "mt": "mount", "ft": "fort", "pt": "port"}


def same_name5(prediction: str, gold: str) -> bool:
    """Grammar 5's names: a hyphen is a space ("Bong Joon Ho" = "Bong Joon-ho") and a place's abbreviated
    title word is spelled out ("St. Petersburg" = "Saint Petersburg")."""

    def norm(text: str) -> str:
        words = fold(text.replace("-", " ")).split()
        return " ".join(_NAME_ABBREVIATIONS.get(w, w) for w in words)

    return bool(norm(gold)) and norm(prediction) == norm(gold)
