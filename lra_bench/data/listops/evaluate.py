"""An independent ListOps evaluator: a stack machine over LRA tokens, no tree, no generator code.

Used by the tests to check every label of a generated or downloaded file against the generator's answers.
"""

from __future__ import annotations

from lra_bench.data.listops.files import tokenize


def _apply(op: str, args: list[int]) -> int:
    if not args:
        raise ValueError(f"operator {op} with no arguments")
    if op == "[MIN":
        return min(args)
    if op == "[MAX":
        return max(args)
    if op == "[SM":
        return sum(args) % 10
    if op == "[MED":
        s = sorted(args)
        mid = len(s) // 2
        return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) // 2
    raise ValueError(f"unknown operator {op!r}")


def evaluate(source: str) -> int:
    """Value of a bracketed ListOps expression (parentheses ignored, ``]`` closes an operator)."""
    stack: list[tuple[str, list[int]]] = []
    result: int | None = None
    for tok in tokenize(source):
        if tok.startswith("["):
            stack.append((tok, []))
        elif tok == "X":
            if not stack:
                raise ValueError("']' without an open operator")
            op, args = stack.pop()
            value = _apply(op, args)
            if stack:
                stack[-1][1].append(value)
            else:
                result = value
        elif tok.isdigit() and len(tok) == 1:
            if stack:
                stack[-1][1].append(int(tok))
            else:
                result = int(tok)
        else:
            raise ValueError(f"unexpected token {tok!r}")
    if stack or result is None:
        raise ValueError("unbalanced expression")
    return result
