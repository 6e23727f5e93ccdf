"""Numbers, dates, telephone numbers and characters written out in words (SSML <say-as>).

The model reads digits in running prose, but "12/07/2026" is a date only if the author says so,
and "+1 555 0100" is a phone number read digit by digit. num2words gives the words for numbers
and babel the month names, in the language in force.

num2words has no Chinese: for zh (and any language num2words lacks) numbers stay as digits,
which the model reads itself. Dates in Chinese and Japanese keep their written form
("2026年12月7日"), Korean its own ("2026년 12월 7일"): the model reads those as they stand.
"""

from __future__ import annotations

import calendar
import re
from decimal import Decimal

from babel.core import UnknownLocaleError
from babel.dates import get_month_names
from num2words import CONVERTER_CLASSES, num2words

from ownvoice.errors import InvalidInput
from ownvoice.languages import iso_code, model_language

INTERPRETATIONS = ("characters", "spell-out", "cardinal", "number", "ordinal", "date", "telephone")
DATE_FORMATS = ("mdy", "dmy", "ymd", "md", "dm", "ym", "my", "y", "m", "d")

# (thousands separators, decimal mark) as each language writes numbers; most of Europe: 1.234,5
_SEPARATORS = {
    "en": (",", "."),
    "ja": (",", "."),
    "ko": (",", "."),
    "zh": (",", "."),
    "fr": (" \u00a0\u202f", ","),
    "ru": (" \u00a0\u202f", ","),
}
_EUROPEAN_SEPARATORS = (".", ",")
# past this, Python refuses to read the digits and num2words runs out of scale names
_MAX_DIGITS = 30
_PLUS = {
    "en": "plus",
    "de": "plus",
    "fr": "plus",
    "es": "más",
    "it": "più",
    "pt": "mais",
    "ru": "плюс",
    "ja": "プラス",
    "ko": "플러스",
    "zh": "加",
}
# how a date's parts are written where the model reads digits better than num2words' words
_DIGIT_DATES = {
    "zh": ("{}年", "{}月", "{}日", ""),
    "ja": ("{}年", "{}月", "{}日", ""),
    "ko": ("{}년", "{}월", "{}일", " "),
}
_DATE_JOINERS = {"es": " de ", "pt": " de "}  # "7 de diciembre de 2026"


def say_as(text: str, interpret_as: str, language: str | None, fmt: str | None = None) -> str:
    """`text` in words as `interpret_as` says, in `language` (an ISO code or tag such as "de-DE",
    or a model language name; None: English). `fmt` is a date's field order (DATE_FORMATS).
    InvalidInput, quoting the text, if it is not what interpret_as says it is."""
    kind = interpret_as.strip().lower()
    if kind not in INTERPRETATIONS:
        raise InvalidInput(
            f"say-as interpret-as {interpret_as!r} is not supported; use one of "
            f"{', '.join(INTERPRETATIONS)}",
            param="input",
        )
    if fmt is not None and kind != "date":
        raise InvalidInput(
            f"say-as format {fmt!r} applies only to interpret-as 'date'; leave it out for {kind!r}",
            param="input",
        )
    code = language_code(language)
    if kind in ("characters", "spell-out"):
        return _characters(text)
    if kind in ("cardinal", "number"):
        return _cardinal(text, code)
    if kind == "ordinal":
        return _ordinal(text, code)
    if kind == "date":
        return _date(text, code, fmt)
    return _telephone(text, code)


def language_code(language: str | None) -> str:
    """'de-DE', 'pt_BR', 'german' -> 'de', 'pt', 'de'; None, blank or 'auto' -> 'en'. A language
    the model lacks keeps its primary subtag where num2words knows it ('nl-BE' -> 'nl')."""
    name = model_language(language)
    if name is None:
        return "en"
    code = iso_code(name)
    if code is not None:
        return code
    primary = name.split("-")[0]
    return primary if primary in CONVERTER_CLASSES else "en"


def _refuse(text: str, what: str, example: str) -> InvalidInput:
    return InvalidInput(f"say-as: {text!r} is not {what}; write it as {example}", param="input")


def _characters(text: str) -> str:
    """'ABC123' -> 'A B C 1 2 3'; words (whitespace apart) stay apart: 'AB 12' -> 'A B, 1 2'."""
    words = [" ".join(c for c in word if c.isalnum()) for word in text.split()]
    spelled = ", ".join(word for word in words if word)
    if not spelled:
        raise _refuse(text, "letters or digits to spell out", "text such as ABC123")
    return spelled


def _words(number: int | Decimal, code: str, to: str = "cardinal") -> str:
    """num2words' words for `number`, or its digits where num2words lacks the language. A form
    num2words lacks or fails at for this language (Japanese years, large Korean ordinals) falls
    back to the cardinal."""
    if code not in CONVERTER_CLASSES:
        return str(number)
    if to != "cardinal":
        try:
            return num2words(number, lang=code, to=to)
        except (NotImplementedError, ValueError, KeyError):
            pass
    try:
        return num2words(number, lang=code)
    except OverflowError:
        raise _refuse(str(number), "a number small enough to say", "characters") from None


def _parse_number(text: str, code: str) -> Decimal:
    """'1,234.5' (en), '1.234,5' (de), '1 234,5' (fr) -> Decimal; a plain '3.5' reads anywhere."""
    groups, mark = _SEPARATORS.get(code, _EUROPEAN_SEPARATORS)
    value = text.strip()
    grouped = rf"([+-]?)(\d{{1,3}}(?:[{re.escape(groups)}]\d{{3}})+|\d+)(?:{re.escape(mark)}(\d+))?"
    match = re.fullmatch(grouped, value) or re.fullmatch(r"([+-]?)(\d+)(?:\.(\d+))?", value)
    if match is None:
        example = "1,234.5" if mark == "." else "1.234,5" if groups == "." else "1 234,5"
        raise _refuse(text, "a number", f"digits with an optional sign, such as {example}")
    sign, whole, fraction = match.groups()
    digits = re.sub(r"\D", "", whole)
    if len(digits) > _MAX_DIGITS:
        raise _refuse(text, f"a number of at most {_MAX_DIGITS} digits", "characters")
    return Decimal(f"{sign}{digits}.{fraction}" if fraction else f"{sign}{digits}")


def _cardinal(text: str, code: str) -> str:
    number = _parse_number(text, code)
    # a whole number as an int: num2words would say "point zero" after a Decimal's "1234."
    return _words(int(number) if number == number.to_integral_value() else number, code)


def _ordinal(text: str, code: str) -> str:
    """'3', '3rd', '21st', '3.' (de), '1er' (fr), '3º' (es) -> the ordinal."""
    match = re.fullmatch(r"(\d{1,30})\.?[^\W\d_]{0,3}\.?", text.strip())
    if match is None:
        raise _refuse(text, "an ordinal", "digits with an optional suffix, such as 3 or 3rd")
    number = int(match.group(1))
    if code == "zh":
        return f"第{number}"  # "the 3rd", read by the model as Chinese reads it
    return _words(number, code, to="ordinal")


def _date(text: str, code: str, fmt: str | None) -> str:
    """Digits separated by / - or . in `fmt`'s order -> the date in words (or the language's
    digit form, see _DIGIT_DATES)."""
    value = text.strip()
    if re.fullmatch(r"\d+(?:[/.\-]\d+)*", value) is None:
        raise _refuse(text, "a date", "digits separated by / - or ., such as 2026-12-07")
    fields = re.split(r"[/.\-]", value)
    order = (fmt or _default_date_format(fields, code)).strip().lower()
    if order not in DATE_FORMATS:
        raise InvalidInput(
            f"say-as format {fmt!r} is not a date format; use one of {', '.join(DATE_FORMATS)}",
            param="input",
        )
    if len(fields) != len(order):
        raise _refuse(text, f"a date in the format {order!r}", f"{len(order)} fields")
    found = {letter: int(field) for letter, field in zip(order, fields, strict=True)}
    year, month, day = found.get("y"), found.get("m"), found.get("d")
    _check_date(text, year, month, day)
    if code in _DIGIT_DATES:
        return _digit_date(code, year, month, day)
    if code == "en":
        return _english_date(year, month, day)
    return _european_date(code, year, month, day)


def _default_date_format(fields: list[str], code: str) -> str:
    # a first field of four digits can only be a year (2026-12-07, 2026/12/7); Chinese,
    # Japanese and Korean write the year first too
    if len(fields[0]) == 4 or code in _DIGIT_DATES:
        return "ymd"
    return "mdy" if code == "en" else "dmy"


def _check_date(text: str, year: int | None, month: int | None, day: int | None) -> None:
    if year is not None and year > 9999:
        raise _refuse(text, "a date with a year up to 9999", "a year of four digits")
    if month is not None and not 1 <= month <= 12:
        raise _refuse(text, "a date with a month from 1 to 12", "a valid date")
    # without a year, February has 29 days (2000 was a leap year)
    last = calendar.monthrange(year or 2000, month)[1] if month else 31
    if day is not None and not 1 <= day <= last:
        raise _refuse(text, f"a date with a day from 1 to {last}", "a valid date")


def _month_name(month: int, code: str) -> str:
    try:
        return get_month_names("wide", locale=code)[month]
    except (UnknownLocaleError, ValueError):
        return get_month_names("wide", locale="en")[month]


def _english_date(year: int | None, month: int | None, day: int | None) -> str:
    """'December seventh, twenty twenty-six' (the month first, whatever the written order)."""
    said = " ".join(
        ([_month_name(month, "en")] if month else [])
        + ([_words(day, "en", "ordinal")] if day else [])
    )
    if year is None:
        return said
    spoken_year = _words(year, "en", "year")
    if not said:
        return spoken_year
    return f"{said}, {spoken_year}" if month and day else f"{said} {spoken_year}"


def _european_date(code: str, year: int | None, month: int | None, day: int | None) -> str:
    """Day, month, year: '7 Dezember 2026' in words; German says the day as an ordinal
    ('siebte'), French only the first ('premier')."""
    said = []
    if day:
        ordinal = code == "de" or (code == "fr" and day == 1)
        said.append(_words(day, code, "ordinal" if ordinal else "cardinal"))
    if month:
        said.append(_month_name(month, code))
    if year is not None:
        said.append(_words(year, code, "year"))
    return _DATE_JOINERS.get(code, " ").join(said)


def _digit_date(code: str, year: int | None, month: int | None, day: int | None) -> str:
    year_form, month_form, day_form, joiner = _DIGIT_DATES[code]
    said = [form.format(n) for form, n in ((year_form, year), (month_form, month), (day_form, day))
            if n is not None]  # fmt: skip
    return joiner.join(said)


def _telephone(text: str, code: str) -> str:
    """'+1 (555) 010-0199' -> 'plus one, five five five, zero one zero, zero one nine nine'."""
    value = text.strip()
    plus = value.startswith("+")
    body = value[1:] if plus else value
    if re.fullmatch(r"[\d\s().\-]*\d[\d\s().\-]*", body) is None:
        raise _refuse(text, "a telephone number", "digits, optionally grouped by spaces - . or ( )")
    groups = re.findall(r"\d+", body)
    said = ", ".join(" ".join(_words(int(digit), code) for digit in group) for group in groups)
    return f"{_PLUS.get(code, '+')} {said}" if plus else said
