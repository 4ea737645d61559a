"""Run the recipes of docs/ANALYSIS.md verbatim and print their results as JSON.

Usage: run_recipes.py RECIPES.json OUT.json, in the directory the recipes' paths are
relative to. RECIPES.json is a list of {"name", "tool", "code"}: tool `duckdb` runs the
code as SQL in a fresh in-memory DuckDB connection (statements separated by `;`, the last
one's result kept); `polars` and `pandas` run it as Python, and the value of its last line
(an expression, as a notebook cell shows it) is the result. OUT.json maps `name/tool` to
{"columns": [...], "rows": [[...]]} or {"error": "..."}; every recipe runs, whatever an
earlier one did. Timestamps are written as ISO 8601 text, other values as JSON numbers,
strings, booleans or null.
"""
import ast
import datetime
import decimal
import json
import math
import sys
import traceback


def plain(v):
    """A cell as a JSON value."""
    if v is None:
        return None
    if isinstance(v, bool):
        return v
    if isinstance(v, int):
        return v
    if isinstance(v, float):
        return None if math.isnan(v) else v
    if isinstance(v, decimal.Decimal):
        return float(v)
    if isinstance(v, (datetime.datetime, datetime.date)):
        return v.isoformat()
    if hasattr(v, "item") and not isinstance(v, (list, tuple, dict)):
        try:
            return plain(v.item())
        except (ValueError, TypeError):
            pass
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if hasattr(v, "isoformat"):
        return v.isoformat()
    return str(v)


def table(value):
    """(columns, rows) of a recipe's result."""
    import pandas as pd
    import polars as pl

    if isinstance(value, pl.LazyFrame):
        value = value.collect()
    if isinstance(value, pl.DataFrame):
        return value.columns, [[plain(x) for x in r] for r in value.rows()]
    if isinstance(value, pd.Series):
        value = value.to_frame()
    if isinstance(value, pd.DataFrame):
        if not isinstance(value.index, pd.RangeIndex):
            value = value.reset_index()
        cols = [str(c) for c in value.columns]
        rows = [[plain(x) for x in r] for r in value.astype(object).itertuples(index=False)]
        rows = [[None if (isinstance(x, float) and math.isnan(x)) else x for x in r] for r in rows]
        return cols, rows
    if isinstance(value, dict):
        return ["key", "value"], [[plain(k), plain(v)] for k, v in value.items()]
    return ["value"], [[plain(value)]]


def run_sql(code):
    import duckdb

    con = duckdb.connect()
    try:
        statements = [s for s in split_sql(code) if s.strip()]
        cur = None
        for s in statements:
            cur = con.execute(s)
        cols = [d[0] for d in cur.description]
        return cols, [[plain(x) for x in r] for r in cur.fetchall()]
    finally:
        con.close()


def split_sql(code):
    """Statements of a SQL text, split at `;` outside quotes and comments."""
    out, cur, i, n = [], [], 0, len(code)
    quote = None
    while i < n:
        c = code[i]
        if quote:
            cur.append(c)
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
            cur.append(c)
        elif code.startswith("--", i):
            j = code.find("\n", i)
            j = n if j < 0 else j
            cur.append(code[i:j])
            i = j
            continue
        elif c == ";":
            out.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    out.append("".join(cur))
    return out


def run_python(code, name):
    tree = ast.parse(code, filename=name)
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    scope = {"__name__": "__recipe__"}
    exec(compile(tree, name, "exec"), scope)
    if last is None:
        raise ValueError("the recipe does not end with an expression (its result)")
    return table(eval(compile(last, name, "eval"), scope))


def main():
    recipes = json.load(open(sys.argv[1]))
    out = {}
    for r in recipes:
        key = f"{r['name']}/{r['tool']}"
        try:
            if r["tool"] == "duckdb":
                cols, rows = run_sql(r["code"])
            else:
                cols, rows = run_python(r["code"], key)
            out[key] = {"columns": cols, "rows": rows}
        except Exception:
            out[key] = {"error": traceback.format_exc(limit=3)}
    json.dump(out, open(sys.argv[2], "w"), indent=1)


main()
