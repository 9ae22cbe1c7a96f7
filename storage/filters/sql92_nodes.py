"""What a SQL92 expression compiles to: nodes that evaluate over a message's property map.

RocketMQ's filter (`org.apache.rocketmq.filter.expression`) is a tree of Java objects whose
values are Java objects: a property is a `String` (or null when absent), a literal is an
`Integer`, `Long`, `Double`, `String` or `Boolean`, and a comparison picks its conversion
from the two values' classes at run time.  Here each node's class is known when it is
compiled (`Kind`): a property is always a string, a literal's class is its own, a negation
keeps its operand's and everything else is a Boolean.  So the conversion a comparison needs
is chosen once (sql92_comparisons.py), and evaluating a node is a few closure calls.

Values: `str`, `int` (Integer and Long), `float` (Double), `bool`, or None (SQL's unknown).
Boolean logic is three-valued, as RocketMQ's:

| A     | B     | A AND B | A OR B | NOT A |
|-------|-------|---------|--------|-------|
| TRUE  | null  | null    | TRUE   | FALSE |
| FALSE | null  | FALSE   | null   | TRUE  |
| null  | null  | null    | null   | null  |

and evaluates left to right, stopping at the first FALSE (AND) or TRUE (OR): an operand
after it is not evaluated, so it cannot throw.  A chain `a AND b AND c` is one node with
three terms (the same results and the same order as RocketMQ's nested pairs), so a long
chain does not nest deep.

The checks RocketMQ's compiler makes while it builds its tree are made here at the same
points, with the same outcome (a `Sql92ExpressionError`; the wording is ours).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Mapping

from ..errors import Sql92ExpressionError

Value = str | int | float | bool | None
Properties = Mapping[str, str]
Evaluate = Callable[[Properties], Value]

DEPTH_MAX = 100
"""Nodes nested in one expression.  Evaluation takes one Python frame per level, and the
interpreter stops at 1,000; RocketMQ's recursive parser goes thousands deep before its stack
overflows, but a real filter nests a handful (chains of AND and OR do not nest here)."""


class Kind(enum.Enum):
    """The Java class of a node's value (None aside)."""

    STRING = "String"
    INTEGER = "Integer"
    LONG = "Long"
    DOUBLE = "Double"
    BOOLEAN = "Boolean"
    NULL = "null"
    """Always null: the NULL literal, and the negation of anything not a number."""


NUMERIC = frozenset({Kind.INTEGER, Kind.LONG, Kind.DOUBLE})


class Role(enum.Enum):
    """Which of RocketMQ's expression classes a node is: its compiler's checks ask."""

    CONSTANT = "ConstantExpression"
    BOOLEAN_CONSTANT = "BooleanConstantExpression"
    """TRUE, FALSE, NULL: a constant and a boolean expression at once."""
    PROPERTY = "PropertyExpression"
    BOOLEAN = "BooleanExpression"
    NEGATION = "UnaryExpression"


@dataclasses.dataclass(frozen=True, eq=False)
class Node:
    kind: Kind
    role: Role
    evaluate: Evaluate
    text: str
    """The node as RocketMQ prints it in its compiler's messages (`(a > 5)`)."""
    depth: int = 1
    value: Value = None
    """A constant's value."""
    terms: tuple[Node, ...] = ()
    """The operands of an AND or OR chain (`chain` names which)."""
    chain: str = ""

    @property
    def constant(self) -> bool:
        return self.role in (Role.CONSTANT, Role.BOOLEAN_CONSTANT)

    @property
    def boolean(self) -> bool:
        return self.role in (Role.BOOLEAN_CONSTANT, Role.BOOLEAN)


def derived(kind: Kind, evaluate: Evaluate, text: str, *operands: Node,
            role: Role = Role.BOOLEAN) -> Node:
    """A node computed from `operands`, one level deeper than the deepest."""
    depth = 1 + max((operand.depth for operand in operands), default=0)
    if depth > DEPTH_MAX:
        raise Sql92ExpressionError(f"the expression nests deeper than {DEPTH_MAX} levels")
    return Node(kind, role, evaluate, text, depth)


def constant(kind: Kind, value: Value, text: str, *, role: Role = Role.CONSTANT) -> Node:
    return Node(kind, role, lambda properties: value, text, value=value)


def string_literal(value: str) -> Node:
    return constant(Kind.STRING, value, "'" + value.replace("'", "''") + "'")


def decimal_literal(image: str) -> Node:
    """`5`, `5L`: an Integer when it fits 32 bits, else a Long (`L` changes nothing);
    beyond 64 bits RocketMQ's `new Long(text)` throws and the expression is refused."""
    value = int(image.rstrip("lL"))
    if value <= (1 << 31) - 1:
        return constant(Kind.INTEGER, value, str(value))
    if value <= (1 << 63) - 1:
        return constant(Kind.LONG, value, str(value))
    raise Sql92ExpressionError(f"the number {image} is beyond a Java long")


def float_literal(image: str) -> Node:
    """`5.5`, `.5`, `5E10`: a Double, refused when it overflows to infinity or is below
    `Double.MIN_VALUE` (RocketMQ's check, which 0.0 itself fails: write `a > -1` or
    `a >= 0`)."""
    value = float(image)
    if value == float("inf"):
        raise Sql92ExpressionError(f"{image} is greater than the largest double")
    if value < 5e-324:
        raise Sql92ExpressionError(f"{image} is less than the smallest positive double")
    return constant(Kind.DOUBLE, value, repr(value))


def boolean_literal(value: bool | None) -> Node:
    """TRUE, FALSE, NULL."""
    text = {True: "TRUE", False: "FALSE", None: "NULL"}[value]
    return constant(Kind.NULL if value is None else Kind.BOOLEAN, value, text,
                    role=Role.BOOLEAN_CONSTANT)


def property_node(name: str) -> Node:
    """A property of the message: its value (a string), or null when it has none."""
    return Node(Kind.STRING, Role.PROPERTY, lambda properties: properties.get(name), name)


def negation(operand: Node) -> Node:
    """Unary minus: a number's negation; null for null and for anything not a number (a
    property is a string, so `-a` is always null).  The operand is still evaluated."""
    evaluate = operand.evaluate
    if operand.kind in NUMERIC:
        def negated(properties: Properties) -> Value:
            value = evaluate(properties)
            return None if value is None else -value  # type: ignore[operator]

        return derived(operand.kind, negated, f"(- {operand.text})", operand,
                       role=Role.NEGATION)

    def null(properties: Properties) -> Value:
        evaluate(properties)
        return None

    return derived(Kind.NULL, null, f"(- {operand.text})", operand, role=Role.NEGATION)


def as_boolean(node: Node) -> Node:
    """Where RocketMQ needs a boolean (AND, OR, NOT, the whole expression): a boolean node
    as it is; a bare property cast (null when absent, else FALSE: its value is a string,
    never a Boolean); anything else refused."""
    if node.boolean:
        return node
    if node.role is Role.PROPERTY:
        evaluate = node.evaluate
        return derived(Kind.BOOLEAN, lambda p: None if evaluate(p) is None else False,
                       node.text, node)
    raise Sql92ExpressionError(f"expression will not result in a boolean value: {node.text}")


def logical_not(operand: Node) -> Node:
    operand = as_boolean(operand)
    evaluate = operand.evaluate

    def negated(properties: Properties) -> Value:
        value = evaluate(properties)
        return None if value is None else not value

    return derived(Kind.BOOLEAN, negated, f"(NOT {operand.text})", operand)


def logical_chain(chain: str, left: Node, right: Node) -> Node:
    """`left AND right` or `left OR right`, merged into the chain either side already is."""
    assert chain in ("AND", "OR")
    terms = tuple(term for side in (as_boolean(left), as_boolean(right))
                  for term in (side.terms if side.chain == chain else (side,)))
    stop = chain == "OR"  # the value that decides the chain at once: TRUE for OR
    evaluators = tuple(term.evaluate for term in terms)

    def evaluate(properties: Properties) -> Value:
        unknown = False
        for term in evaluators:
            value = term(properties)
            if value is None:
                unknown = True
            elif value is stop:
                return stop
        return None if unknown else not stop

    text = f"({left.text} {'&&' if chain == 'AND' else '||'} {right.text})"
    node = derived(Kind.BOOLEAN, evaluate, text, *terms)
    return dataclasses.replace(node, terms=terms, chain=chain)
