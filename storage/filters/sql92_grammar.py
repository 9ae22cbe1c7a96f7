"""RocketMQ's SQL92 filter grammar (`SelectorParser.jj`), parsed with lark.

The parser is lark's (PyPI `lark`: maintained, pure Python, no dependencies of its own), as
an LALR(1) table built from the grammar below, rather than a parser of our own: the grammar
stays one readable table with RocketMQ's shape, parsing is linear and never recurses (deep
nesting cannot exhaust the stack while parsing), and lark's interactive parser lets `parse`
copy RocketMQ's "stop at the first token that cannot follow" rule.  lark calls the node
builders (sql92_nodes.py, sql92_comparisons.py) as it reduces each rule, so a compiler check
fails at the same point as RocketMQ's.  The grammar is RocketMQ's, precedence lowest first:

    expression  := or
    or          := and ( OR and )*
    and         := equality ( AND equality )*
    equality    := comparison ( = comparison | <> comparison | IS NULL | IS NOT NULL )*
    comparison  := unary ( > unary | >= unary | < unary | <= unary
                         | [NOT] CONTAINS 'str' | [NOT] STARTSWITH 'str' | [NOT] ENDSWITH 'str'
                         | [NOT] BETWEEN unary AND unary | [NOT] IN ( 'str' [, 'str']* ) )*
    unary       := + unary | - unary | NOT unary | primary
    primary     := literal | identifier | ( or )

so NOT binds tighter than a comparison (`NOT a > 5` is `(NOT a) > 5`, which the compiler
refuses; write `NOT (a > 5)`), and there is no arithmetic.  Tokens as RocketMQ's lexer cuts
them: keywords in any case (`and`, `Between`), identifiers `[a-zA-Z_$][a-zA-Z0-9_$]*` kept
as written (property names are case-sensitive), integers `0` or `[1-9][0-9]*` with an
optional `L`, floats `5.`, `.5`, `5.5E-3`, strings in single quotes (`''` is a quote),
`-- comment` up to a line end and `/* comment */`.  A `--` with no line end after it is not
a comment: it is two minus signs.

RocketMQ's parser never asks for the end of the input: it stops at the first token that
cannot continue the expression and ignores the rest (`a > 5 xyz` is `a > 5`, and `a > 05`
is `a > 0`), though that one token must still be a token (`a > 5 #` is refused).  `parse`
does the same: it feeds tokens until one is refused, then asks for the end there.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedToken
from lark.lexer import PatternStr

from ..errors import Sql92ExpressionError
from . import sql92_comparisons as compare
from . import sql92_nodes as nodes
from .sql92_nodes import Node

_KEYWORD_END = "(?![A-Za-z0-9_$])"
"""A keyword is a whole word: `NOTE` is an identifier (the lexer takes the longest token)."""

GRAMMAR = r"""
start: or_expr

?or_expr: and_expr
        | or_expr _OR and_expr                         -> or_
?and_expr: equality
         | and_expr _AND equality                      -> and_
?equality: comparison
         | equality "=" comparison                     -> equal
         | equality "<>" comparison                    -> not_equal
         | equality _IS _NULL                          -> is_null
         | equality _IS _NOT _NULL                     -> is_not_null
?comparison: unary
           | comparison ">" unary                      -> greater
           | comparison ">=" unary                     -> greater_equal
           | comparison "<" unary                      -> less
           | comparison "<=" unary                     -> less_equal
           | comparison _CONTAINS STRING               -> contains
           | comparison _NOT _CONTAINS STRING          -> not_contains
           | comparison _STARTSWITH STRING             -> starts_with
           | comparison _NOT _STARTSWITH STRING        -> not_starts_with
           | comparison _ENDSWITH STRING               -> ends_with
           | comparison _NOT _ENDSWITH STRING          -> not_ends_with
           | comparison _BETWEEN unary _AND unary      -> between
           | comparison _NOT _BETWEEN unary _AND unary -> not_between
           | comparison _IN "(" strings ")"            -> in_
           | comparison _NOT _IN "(" strings ")"       -> not_in
strings: STRING ("," STRING)*
?unary: primary
      | "+" unary
      | "-" unary                                      -> negate
      | _NOT unary                                     -> not_
?primary: STRING                                       -> string
        | DECIMAL                                      -> decimal
        | FLOAT                                        -> float_
        | _TRUE                                        -> true
        | _FALSE                                       -> false
        | _NULL                                        -> null
        | ID                                           -> property
        | "(" or_expr ")"

STRING: /'(?:''|[^'])*'/
FLOAT.3: /(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+/
DECIMAL.2: /0|[1-9][0-9]*[lL]?/
ID.1: /[A-Za-z_$][A-Za-z0-9_$]*/
LINE_COMMENT.5: /--[^\n\r]*(?:\r\n|\n|\r)/
BLOCK_COMMENT.5: /\/\*[^*]*\*+(?:[^*\/][^*]*\*+)*\//
SPACE: /[ \t\n\r\f]+/
%ignore SPACE
%ignore LINE_COMMENT
%ignore BLOCK_COMMENT
""" + "".join(f"_{word}.4: /{word}{_KEYWORD_END}/i\n" for word in (
    "NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS", "CONTAINS",
    "STARTSWITH", "ENDSWITH"))


def _text(token: Token) -> str:
    """A string literal's value: the quotes dropped, each `''` one quote."""
    return str(token)[1:-1].replace("''", "'")


@v_args(inline=True)
class _Build(Transformer[Token, Node]):
    """Each rule's node, built as the parser reduces it."""

    def start(self, node: Node) -> Node:
        return compare.whole(node)

    def or_(self, left: Node, right: Node) -> Node:
        return nodes.logical_chain("OR", left, right)

    def and_(self, left: Node, right: Node) -> Node:
        return nodes.logical_chain("AND", left, right)

    def equal(self, left: Node, right: Node) -> Node:
        return compare.equal(left, right)

    def not_equal(self, left: Node, right: Node) -> Node:
        return compare.not_equal(left, right)

    def is_null(self, operand: Node) -> Node:
        return compare.is_null(operand, negated=False)

    def is_not_null(self, operand: Node) -> Node:
        return compare.is_null(operand, negated=True)

    def greater(self, left: Node, right: Node) -> Node:
        return compare.ordered(">", left, right)

    def greater_equal(self, left: Node, right: Node) -> Node:
        return compare.ordered(">=", left, right)

    def less(self, left: Node, right: Node) -> Node:
        return compare.ordered("<", left, right)

    def less_equal(self, left: Node, right: Node) -> Node:
        return compare.ordered("<=", left, right)

    def contains(self, operand: Node, search: Token, negated: bool = False) -> Node:
        return compare.text_test("CONTAINS", operand, _text(search), negated=negated)

    def not_contains(self, operand: Node, search: Token) -> Node:
        return self.contains(operand, search, negated=True)

    def starts_with(self, operand: Node, search: Token, negated: bool = False) -> Node:
        return compare.text_test("STARTSWITH", operand, _text(search), negated=negated)

    def not_starts_with(self, operand: Node, search: Token) -> Node:
        return self.starts_with(operand, search, negated=True)

    def ends_with(self, operand: Node, search: Token, negated: bool = False) -> Node:
        return compare.text_test("ENDSWITH", operand, _text(search), negated=negated)

    def not_ends_with(self, operand: Node, search: Token) -> Node:
        return self.ends_with(operand, search, negated=True)

    def between(self, operand: Node, low: Node, high: Node) -> Node:
        return compare.between(operand, low, high, negated=False)

    def not_between(self, operand: Node, low: Node, high: Node) -> Node:
        return compare.between(operand, low, high, negated=True)

    def in_(self, operand: Node, values: list[str]) -> Node:
        return compare.in_list(operand, values, negated=False)

    def not_in(self, operand: Node, values: list[str]) -> Node:
        return compare.in_list(operand, values, negated=True)

    def strings(self, *tokens: Token) -> list[str]:
        return [_text(token) for token in tokens]

    def negate(self, operand: Node) -> Node:
        return nodes.negation(operand)

    def not_(self, operand: Node) -> Node:
        return nodes.logical_not(operand)

    def string(self, token: Token) -> Node:
        return nodes.string_literal(_text(token))

    def decimal(self, token: Token) -> Node:
        return nodes.decimal_literal(str(token))

    def float_(self, token: Token) -> Node:
        return nodes.float_literal(str(token))

    def true(self) -> Node:
        return nodes.boolean_literal(True)

    def false(self) -> Node:
        return nodes.boolean_literal(False)

    def null(self) -> Node:
        return nodes.boolean_literal(None)

    def property(self, token: Token) -> Node:
        return nodes.property_node(str(token))


@functools.cache
def _parser() -> Lark:
    """Built at the first parse (about 30 ms: the LALR tables), not at import; each parse
    has its own state."""
    return Lark(GRAMMAR, parser="lalr", lexer="basic", transformer=_Build())


def parse(expression: str) -> Node:
    """The compiled expression; `Sql92ExpressionError` saying where it cannot be read."""
    interactive = _parser().parse_interactive(expression)
    refused: Token | None = None
    try:
        for _ in interactive.iter_parse():
            pass
    except UnexpectedToken as error:  # RocketMQ's parser stops here and ignores the rest
        refused = error.token
    except UnexpectedCharacters as error:
        raise Sql92ExpressionError(f"lexical error at line {error.line}, column "
                                   f"{error.column}: {error.char!r} starts no token") from None
    try:
        node: Node = interactive.feed_eof(refused)  # type: ignore[no-untyped-call]
    except UnexpectedToken as error:
        raise Sql92ExpressionError(_unexpected(refused or error.token, error.expected)
                                   ) from None
    return node


def _unexpected(token: Token, expected: Iterable[str]) -> str:
    if token.type == "$END":
        found = "the end of the expression"
    else:
        found = f"{str(token)!r} at line {token.line}, column {token.column}"
    return f"encountered {found}; expected one of: {', '.join(sorted(map(_shown, expected)))}"


def _shown(terminal: str) -> str:
    """A terminal as a reader knows it: `'('` for LPAR, `NOT` for _NOT."""
    pattern = _parser().get_terminal(terminal).pattern
    return repr(pattern.value) if isinstance(pattern, PatternStr) else terminal.lstrip("_")
