"""A small ClassAd subset: literal parsing, constraint evaluation and value rendering.

Enough for ``condor_q -constraint`` / ``condor_history -constraint`` / ``condor_rm -constraint`` as
backends use them: attribute references (case-insensitive), int/real/string/bool/undefined literals,
``== != < <= > >= =?= =!= && || ! + - * /``, parentheses, and the functions ``isUndefined``,
``regexp``, ``strcmp``, ``stringListMember``. Strings compare case-insensitively with ``==`` as in
real ClassAds; ``UNDEFINED`` propagates, and a constraint matches only when it evaluates to true.
"""

from __future__ import annotations

import json
import json.encoder
import re
from collections.abc import Callable
from typing import Any

UNDEFINED = None  # ClassAd UNDEFINED is represented by None
_encode_string = json.encoder.encode_basestring

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<num>\d+\.\d*(?:[eE][-+]?\d+)?|\d*\.\d+(?:[eE][-+]?\d+)?|\d+)
      | (?P<str>"(?:[^"\\]|\\.)*")
      | (?P<op>=\?=|=!=|==|!=|<=|>=|&&|\|\||[-+*/<>!(),])
      | (?P<name>[A-Za-z_][A-Za-z0-9_.]*)
    )""",
    re.VERBOSE,
)


class ClassAdError(ValueError):
    """A constraint expression that this subset cannot parse."""


def tokenize(text: str) -> list[tuple[str, str]]:
    """Split an expression into (kind, text) tokens."""
    tokens: list[tuple[str, str]] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if not match or match.end() == pos:
            raise ClassAdError(f"cannot parse expression at: {text[pos:]!r}")
        kind = match.lastgroup or ""
        tokens.append((kind, match.group(kind)))
        pos = match.end()
    return tokens


def _unquote(token: str) -> str:
    return re.sub(r"\\(.)", r"\1", token[1:-1])


def parse_literal(text: str) -> Any:
    """The value of a ClassAd literal (``42``, ``1.5``, ``"s"``, ``true``); other text is an expression.

    Expressions are returned as ``{"expr": text}`` and rendered like real tools do.
    """
    text = text.strip()
    if re.fullmatch(r"[-+]?\d+", text):
        return int(text)
    if re.fullmatch(r"[-+]?(\d+\.\d*|\.\d+)([eE][-+]?\d+)?", text):
        return float(text)
    if re.fullmatch(r'"(?:[^"\\]|\\.)*"', text):
        return _unquote(text)
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    if text.lower() == "undefined":
        return UNDEFINED
    return {"expr": text}


def unparse(value: Any) -> str:
    """A value as ClassAd source text (``-af:r``, ``-long``)."""
    if value is None:
        return "undefined"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return str(value.get("expr", ""))
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, float):
        return repr(value)
    return str(value)


def to_json(value: Any) -> Any:
    """A value as condor's JSON output shows it (expressions as ``/Expr(...)/`` strings)."""
    if isinstance(value, dict):
        return "/Expr(" + str(value.get("expr", "")) + ")/"
    return value


def autoformat(value: Any, raw: bool) -> str:
    """A value as ``-af`` prints it: strings bare unless raw, undefined as ``undefined``."""
    if raw or not isinstance(value, str):
        return unparse(value)
    return value


class _Parser:
    """Recursive-descent parser producing a closure that evaluates against an ad."""

    def __init__(self, text: str) -> None:
        self.tokens = tokenize(text)
        self.pos = 0

    def peek(self) -> str | None:
        return self.tokens[self.pos][1] if self.pos < len(self.tokens) else None

    def take(self) -> tuple[str, str]:
        if self.pos >= len(self.tokens):
            raise ClassAdError("unexpected end of expression")
        token = self.tokens[self.pos]
        self.pos += 1
        return token

    def expect(self, text: str) -> None:
        if self.take()[1] != text:
            raise ClassAdError(f"expected {text!r}")

    def parse(self) -> Callable[[dict[str, Any]], Any]:
        node = self.binary(0)
        if self.pos != len(self.tokens):
            raise ClassAdError(f"unexpected {self.peek()!r}")
        return node

    _LEVELS = (("||",), ("&&",), ("==", "!=", "=?=", "=!="), ("<", "<=", ">", ">="), ("+", "-"), ("*", "/"))

    def binary(self, level: int) -> Callable[[dict[str, Any]], Any]:
        if level == len(self._LEVELS):
            return self.unary()
        left = self.binary(level + 1)
        while self.peek() in self._LEVELS[level]:
            op = self.take()[1]
            right = self.binary(level + 1)
            left = _combine(op, left, right)
        return left

    def unary(self) -> Callable[[dict[str, Any]], Any]:
        if self.peek() == "!":
            self.take()
            inner = self.unary()
            return lambda ad: None if (v := inner(ad)) is None else (not v if isinstance(v, bool) else None)
        if self.peek() == "-":
            self.take()
            inner = self.unary()
            return lambda ad: -v if isinstance(v := inner(ad), (int, float)) and not isinstance(v, bool) else None
        return self.primary()

    def primary(self) -> Callable[[dict[str, Any]], Any]:
        kind, text = self.take()
        if text == "(":
            node = self.binary(0)
            self.expect(")")
            return node
        if kind == "num":
            value: Any = float(text) if any(c in text for c in ".eE") else int(text)
            return lambda ad: value
        if kind == "str":
            literal = _unquote(text)
            return lambda ad: literal
        if kind != "name":
            raise ClassAdError(f"unexpected {text!r}")
        lower = text.lower()
        if self.peek() == "(":
            return self.call(lower)
        if lower in ("true", "false"):
            flag = lower == "true"
            return lambda ad: flag
        if lower in ("undefined", "error"):
            return lambda ad: None
        name = lower.split(".", 1)[1] if lower.startswith(("my.", "target.")) else lower
        return lambda ad: lookup(ad, name)

    def call(self, name: str) -> Callable[[dict[str, Any]], Any]:
        self.expect("(")
        args: list[Callable[[dict[str, Any]], Any]] = []
        while self.peek() != ")":
            args.append(self.binary(0))
            if self.peek() == ",":
                self.take()
        self.expect(")")
        functions: dict[str, Callable[..., Any]] = {
            "isundefined": lambda v: v is None,
            "regexp": lambda p, s, *o: (
                None
                if p is None or s is None
                else bool(re.search(p, s, re.IGNORECASE if o and "i" in str(o[0]).lower() else 0))
            ),
            "strcmp": lambda a, b: None if a is None or b is None else (str(a) > str(b)) - (str(a) < str(b)),
            "stringlistmember": lambda item, items, *d: (
                None
                if item is None or items is None
                else str(item) in [x.strip() for x in str(items).split(d[0] if d else ",")]
            ),
        }
        if name not in functions:
            raise ClassAdError(f"unsupported function {name}()")
        function = functions[name]
        return lambda ad: function(*(arg(ad) for arg in args))


def lookup(ad: dict[str, Any], lower_name: str) -> Any:
    """Case-insensitive attribute lookup; missing attributes are UNDEFINED."""
    for key, value in ad.items():
        if key.lower() == lower_name:
            return None if isinstance(value, dict) else value
    return None


def _is_num(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _compare(op: str, a: Any, b: Any) -> Any:
    if op in ("=?=", "=!="):
        same = type(a) is type(b) and a == b or (_is_num(a) and _is_num(b) and a == b)
        return same if op == "=?=" else not same
    if a is None or b is None:
        return None
    if isinstance(a, str) and isinstance(b, str):
        a, b = a.lower(), b.lower()
    elif _is_num(a) and _is_num(b) or isinstance(a, bool) and isinstance(b, bool):
        pass
    else:
        return None  # ERROR in real ClassAds; never matches
    return {"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]


def _combine(op: str, left: Callable[[dict[str, Any]], Any], right: Callable[[dict[str, Any]], Any]) -> Any:
    if op == "&&":

        def conj(ad: dict[str, Any]) -> Any:
            a = left(ad)
            if a is False:
                return False
            b = right(ad)
            if b is False:
                return False
            return True if a is True and b is True else None

        return conj
    if op == "||":

        def disj(ad: dict[str, Any]) -> Any:
            a = left(ad)
            if a is True:
                return True
            b = right(ad)
            if b is True:
                return True
            return False if a is False and b is False else None

        return disj
    if op in ("+", "-", "*", "/"):

        def arith(ad: dict[str, Any]) -> Any:
            a, b = left(ad), right(ad)
            if not (_is_num(a) and _is_num(b)):
                return None
            if op == "/":
                if b == 0:
                    return None
                return a // b if isinstance(a, int) and isinstance(b, int) else a / b
            return {"+": a + b, "-": a - b, "*": a * b}[op]

        return arith
    return lambda ad: _compare(op, left(ad), right(ad))


def compile_constraint(text: str) -> Callable[[dict[str, Any]], bool]:
    """A predicate over ads that is true where the constraint evaluates to true."""
    node = _Parser(text).parse()
    return lambda ad: node(ad) is True


def evaluate(text: str, ad: dict[str, Any]) -> Any:
    """The value of an expression over an ad (None for UNDEFINED)."""
    return _Parser(text).parse()(ad)


def _json_value(value: Any) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "null"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return _encode_string(value)
    if isinstance(value, dict):
        return _encode_string("/Expr(" + str(value.get("expr", "")) + ")/")
    return json.dumps(value)


def dumps_ads(ads: list[dict[str, Any]]) -> str:
    """Ads in the layout of ``condor_q -json``: ``[`` / ads separated by ``,`` lines / ``]``.

    Attributes are sorted case-insensitively and indented by two spaces, one per line.
    """
    parts = []
    for ad in ads:
        body = ",\n".join(f"  {_encode_string(key)}: {_json_value(ad[key])}" for key in sorted(ad, key=str.lower))
        parts.append("{\n" + body + "\n}")
    return "[\n" + "\n,\n".join(parts) + "\n]\n"
