"""Read every frame of a run directory with pyarrow (an independent Parquet reader) and
check it against the JSON schema checked in under schemas/. Prints one line per frame;
exits non-zero on the first disagreement."""
import json
import sys
from pathlib import Path

import pyarrow.parquet as pq

run_dir, schema_dir = Path(sys.argv[1]), Path(sys.argv[2])
ARROW = {
    "utf8": ("string", "large_string", "string_view"),
    "float64": ("double",),
    "uint32": ("uint32",),
    "uint64": ("uint64",),
    "int64": ("int64",),
    "bool": ("bool",),
    "timestamp[ns, tz=UTC]": ("timestamp[ns, tz=UTC]",),
    "list<uint64>": ("list<item: uint64>", "large_list<item: uint64>", "list<element: uint64>", "large_list<element: uint64>"),
}
checked = 0
for schema_file in sorted(schema_dir.glob("*.schema.json")):
    schema = json.loads(schema_file.read_text())
    frame = schema.get("x-frame")
    path = run_dir / f"{frame}.parquet"
    if frame is None or not path.exists():
        continue
    table = pq.read_table(path)
    file_meta = pq.ParquetFile(path).metadata.metadata or {}
    meta = {k.decode(): v.decode() for k, v in file_meta.items()}
    if meta.get("agentrace.frame") != frame:
        sys.exit(f"{path}: metadata frame {meta.get('agentrace.frame')!r}, expected {frame!r}")
    if meta.get("agentrace.schema_version") != str(schema["x-schema-version"]):
        sys.exit(f"{path}: schema version {meta.get('agentrace.schema_version')!r}")
    names = [f.name for f in table.schema]
    if names != schema["required"]:
        sys.exit(f"{path}: columns {names}, schema says {schema['required']}")
    for f in table.schema:
        want = schema["properties"][f.name]["x-arrow-type"]
        got = str(f.type)
        if got not in ARROW.get(want, (want,)):
            sys.exit(f"{path}: column {f.name} is {got}, schema says {want}")
        nullable = isinstance(schema["properties"][f.name]["type"], list)
        if not nullable and table.column(f.name).null_count:
            sys.exit(f"{path}: column {f.name} has nulls")
    print(f"{frame}: {table.num_rows} rows, {len(names)} columns ok")
    checked += 1
print(f"{checked} frames checked")
