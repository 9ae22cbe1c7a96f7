"""SQL92 comparisons as RocketMQ 5.5.0 evaluates them: the conversion each pair of Java
classes gets (its `ComparisonExpression.__compare`), and the operators built on it.

A comparison of two values of different classes converts one to the other's class first
(`valueOf`: the number's class parses the string, as `Integer.valueOf`; `double`: the number
is read as a double; `-1`: "less than", nothing converted):

| left \\ right | String            | Integer  | Long     | Double   | Boolean  |
|--------------|-------------------|----------|----------|----------|----------|
| String       | as is             | valueOf  | valueOf  | valueOf  | valueOf  |
| Integer      | valueOf           | as is    | as longs | double   | -1       |
| Long         | valueOf           | as longs | as is    | double   | -1       |
| Double       | valueOf           | double   | double   | as is    | -1       |
| Boolean      | throws (a cast)   | -1       | -1       | -1       | as is    |

so the literal's class decides how a property is read: `a > 5` parses `a` as an Integer and
throws on `"6.5"` or `"10000000000"` (no match), `a > 5.0` parses it as a Double.  `>`,
`>=`, `<`, `<=` read two strings as doubles; `=` compares two strings as strings.

Null: `<` and its family give null when either side is null.  `=` gives TRUE when both are
null, null when only the left one is, FALSE when only the right one is (`IS NULL` is `= NULL`
without the compiler's check that refuses `a = NULL`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..errors import Sql92ExpressionError
from .java_values import (
    Sql92EvaluationError,
    compare_double,
    compare_integral,
    compare_string,
    java_boolean,
    java_double,
    java_integer,
    java_long,
)
from .sql92_nodes import (
    NUMERIC,
    Kind,
    Node,
    Properties,
    Role,
    Value,
    as_boolean,
    derived,
    logical_chain,
    logical_not,
)

Compare = Callable[[Value, Value], int]

_FROM_STRING: dict[Kind, Callable[[str], Value]] = {
    Kind.INTEGER: java_integer, Kind.LONG: java_long, Kind.DOUBLE: java_double,
    Kind.BOOLEAN: java_boolean}
_ORDERS: dict[Kind, Callable[[Value, Value], int]] = {
    Kind.STRING: compare_string,  # type: ignore[dict-item]
    Kind.INTEGER: compare_integral,  # type: ignore[dict-item]
    Kind.LONG: compare_integral,  # type: ignore[dict-item]
    Kind.DOUBLE: compare_double,  # type: ignore[dict-item]
    Kind.BOOLEAN: compare_integral}  # type: ignore[dict-item]
_ORDERED_TESTS: dict[str, Callable[[int], bool]] = {
    ">": lambda order: order > 0, ">=": lambda order: order >= 0,
    "<": lambda order: order < 0, "<=": lambda order: order <= 0}


def comparer(left: Kind, right: Kind) -> Compare:
    """`__compare(left, right)` for values of these classes (the table above)."""
    if Kind.NULL in (left, right):
        return _never
    if left is right:
        return _ORDERS[left]
    if left is Kind.BOOLEAN:
        return _class_cast if right is Kind.STRING else _less
    if left is Kind.STRING:
        convert, order = _FROM_STRING[right], _ORDERS[right]
        return lambda left_value, right_value: order(convert(left_value), right_value)  # type: ignore[arg-type]
    if right is Kind.BOOLEAN:
        return _less
    if right is Kind.STRING:
        convert, order = _FROM_STRING[left], _ORDERS[left]
        return lambda left_value, right_value: order(left_value, convert(right_value))  # type: ignore[arg-type]
    if Kind.DOUBLE in (left, right):
        return lambda left_value, right_value: compare_double(
            float(left_value), float(right_value))  # type: ignore[arg-type]
    return compare_integral  # type: ignore[return-value]  # Integer with Long


def _never(left: Value, right: Value) -> int:
    raise AssertionError("a null is never compared")


def _less(left: Value, right: Value) -> int:
    """A number against a Boolean: "less", converting nothing."""
    return -1


def _class_cast(left: Value, right: Value) -> int:
    """RocketMQ casts the Boolean on the left to a String (its code's slip): it throws."""
    raise Sql92EvaluationError("a Boolean compared with a String throws a ClassCastException")


def _doubles(left: Value, right: Value) -> int:
    return compare_double(java_double(left), java_double(right))  # type: ignore[arg-type]


def ordered(operator: str, left: Node, right: Node) -> Node:
    """`>`, `>=`, `<`, `<=`.  Neither side may be a string or boolean literal, nor a boolean
    expression (`NOT a > 5` is `(NOT a) > 5`, refused)."""
    for side in (left, right):
        if (side.constant and side.kind not in NUMERIC) or side.role is Role.BOOLEAN:
            raise Sql92ExpressionError(f"value {side.text} cannot be compared with "
                                       f"{operator}")
    test = _ORDERED_TESTS[operator]
    compare = (_doubles if left.kind is right.kind is Kind.STRING
               else comparer(left.kind, right.kind))
    left_value, right_value = left.evaluate, right.evaluate

    def evaluate(properties: Properties) -> Value:
        first = left_value(properties)
        if first is None:
            return None
        second = right_value(properties)
        if second is None:
            return None
        return test(compare(first, second))

    return derived(Kind.BOOLEAN, evaluate, f"({left.text} {operator} {right.text})", left,
                   right)


def equal(left: Node, right: Node) -> Node:
    """`=`: neither side may be the NULL literal, and TRUE or FALSE on the left of another
    literal is refused (`TRUE = 5`; `5 = TRUE` is allowed, and FALSE)."""
    for side in (left, right):
        if side.constant and side.value is None:
            raise Sql92ExpressionError(f"{side.text} cannot be compared with =; "
                                       f"write IS NULL")
    if left.role is Role.BOOLEAN_CONSTANT and right.role is Role.CONSTANT:
        raise Sql92ExpressionError(f"{left.text} cannot be compared with {right.text}")
    return _equality(left, right)


def not_equal(left: Node, right: Node) -> Node:
    """`<>`: NOT of `=`."""
    return logical_not(equal(left, right))


def is_null(operand: Node, *, negated: bool) -> Node:
    """`IS NULL` (TRUE for an absent property, FALSE otherwise: never null), `IS NOT NULL`."""
    evaluate = operand.evaluate
    if negated:
        return derived(Kind.BOOLEAN, lambda p: evaluate(p) is not None,
                       f"({operand.text} IS NOT NULL)", operand)
    return derived(Kind.BOOLEAN, lambda p: evaluate(p) is None, f"({operand.text} IS NULL)",
                   operand)


def _equality(left: Node, right: Node) -> Node:
    compare = comparer(left.kind, right.kind)
    left_value, right_value = left.evaluate, right.evaluate

    def evaluate(properties: Properties) -> Value:
        first, second = left_value(properties), right_value(properties)
        if first is None or second is None:
            if first is None and second is None:
                return True
            return None if first is None else False
        return compare(first, second) == 0

    return derived(Kind.BOOLEAN, evaluate, f"({left.text} == {right.text})", left, right)


def between(operand: Node, low: Node, high: Node, *, negated: bool) -> Node:
    """`x BETWEEN low AND high` is `x >= low AND x <= high`; two literal bounds must not be
    null nor out of order.  `x NOT BETWEEN low AND high` is `x < low OR x > high`."""
    if negated:
        return logical_chain("OR", ordered("<", operand, low), ordered(">", operand, high))
    if low.constant and high.constant:
        if low.value is None or high.value is None:
            raise Sql92ExpressionError("the bounds of BETWEEN cannot be NULL")
        try:
            order = comparer(high.kind, low.kind)(high.value, low.value)
        except Sql92EvaluationError as error:
            raise Sql92ExpressionError(f"the bounds of BETWEEN: {error}") from None
        if order < 0:
            raise Sql92ExpressionError(f"the bounds of BETWEEN are out of order: {low.text} "
                                       f"is above {high.text}")
    return logical_chain("AND", ordered(">=", operand, low), ordered("<=", operand, high))


def in_list(operand: Node, values: Sequence[str], *, negated: bool) -> Node:
    """`a IN ('x', 'y')`: a property only, string literals only; null when `a` is absent
    (NOT IN too)."""
    if operand.role is not Role.PROPERTY:
        raise Sql92ExpressionError(f"IN needs a property on its left, not {operand.text}")
    evaluate, members = operand.evaluate, frozenset(values)

    def inside(properties: Properties) -> Value:
        value = evaluate(properties)
        return None if value is None else (value in members) is not negated

    listed = ", ".join("'" + value.replace("'", "''") + "'" for value in values)
    operator = "NOT IN" if negated else "IN"
    return derived(Kind.BOOLEAN, inside, f"{operand.text} {operator} ( {listed} )", operand)


def text_test(operator: str, operand: Node, search: str, *, negated: bool) -> Node:
    """CONTAINS, STARTSWITH, ENDSWITH and their NOT forms: FALSE (never null) when the
    value is absent or not a string, and always FALSE for an empty search string (the
    operand is then not even evaluated)."""
    test: Callable[[str], bool] = {
        "CONTAINS": lambda value: search in value,
        "STARTSWITH": lambda value: value.startswith(search),
        "ENDSWITH": lambda value: value.endswith(search)}[operator]
    evaluate, is_string = operand.evaluate, operand.kind is Kind.STRING

    def matches(properties: Properties) -> Value:
        if not search:
            return False
        value = evaluate(properties)
        if value is None or not is_string:
            return False
        return test(value) is not negated  # type: ignore[arg-type]

    name = f"{'NOT ' if negated else ''}{operator}"
    return derived(Kind.BOOLEAN, matches, f"({operand.text} {name} '{search}')", operand)


def whole(node: Node) -> Node:
    """The expression as a whole must be a boolean (a bare property is cast)."""
    return as_boolean(node)
