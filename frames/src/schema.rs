//! Declared frame schemas: the columns each Parquet frame must have, their JSON-schema
//! rendering for `schemas/`, and a check of a written frame against its declaration.

use polars::prelude::{DataFrame, DataType, TimeUnit};
use serde_json::{Value, json};

/// A column type as users see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnType {
    /// UTF-8 string.
    Str,
    /// 64-bit float.
    F64,
    /// Unsigned 32-bit integer.
    U32,
    /// Unsigned 64-bit integer.
    U64,
    /// Signed 64-bit integer.
    I64,
    /// Boolean.
    Bool,
    /// UTC datetime, nanoseconds.
    DatetimeNs,
    /// List of unsigned 64-bit integers.
    ListU64,
}

impl ColumnType {
    fn matches(self, dt: &DataType) -> bool {
        match self {
            ColumnType::Str => matches!(dt, DataType::String),
            ColumnType::F64 => matches!(dt, DataType::Float64),
            ColumnType::U32 => matches!(dt, DataType::UInt32),
            ColumnType::U64 => matches!(dt, DataType::UInt64),
            ColumnType::I64 => matches!(dt, DataType::Int64),
            ColumnType::Bool => matches!(dt, DataType::Boolean),
            ColumnType::DatetimeNs => {
                matches!(dt, DataType::Datetime(TimeUnit::Nanoseconds, Some(tz)) if tz.as_str() == "UTC")
            }
            ColumnType::ListU64 => {
                matches!(dt, DataType::List(inner) if **inner == DataType::UInt64)
            }
        }
    }

    /// The Arrow type name (`utf8`, `float64`, `timestamp[ns, tz=UTC]`, ...), as the JSON
    /// schemas' `x-arrow-type` and the generated docs show it.
    pub fn arrow_type(self) -> &'static str {
        self.json().1
    }

    fn json(self) -> (Value, &'static str) {
        match self {
            ColumnType::Str => (json!("string"), "utf8"),
            ColumnType::F64 => (json!("number"), "float64"),
            ColumnType::U32 => (json!("integer"), "uint32"),
            ColumnType::U64 => (json!("integer"), "uint64"),
            ColumnType::I64 => (json!("integer"), "int64"),
            ColumnType::Bool => (json!("boolean"), "bool"),
            ColumnType::DatetimeNs => (json!("string"), "timestamp[ns, tz=UTC]"),
            ColumnType::ListU64 => (json!("array"), "list<uint64>"),
        }
    }
}

/// What a time column counts from, in which unit and zone: every column that holds a point
/// in time says so in its declaration, so the reference lists them all (docs/FRAMES.md,
/// "Time columns") and a reader knows which cast, if any, it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeBase {
    /// UTC epoch seconds as a 64-bit float (`float64`).
    EpochSeconds,
    /// A timestamp in nanoseconds since the epoch, zone UTC (`timestamp[ns, tz=UTC]`).
    TimestampNsUtc,
    /// Seconds after the attempt's generation start (`attempts.gen_start`).
    AfterGenStart,
    /// Seconds after the replay's time 0 (every attempt is ready at 0).
    AfterReplayStart,
    /// RFC 3339 text as the archive recorded it (UTC; a time without an offset is UTC).
    Rfc3339Text,
}

impl TimeBase {
    /// Every time base, in the reference's order.
    pub const ALL: [TimeBase; 5] = [
        TimeBase::TimestampNsUtc,
        TimeBase::EpochSeconds,
        TimeBase::AfterGenStart,
        TimeBase::AfterReplayStart,
        TimeBase::Rfc3339Text,
    ];

    /// A stable name (the frames' fingerprint and the reference use it).
    pub fn as_str(self) -> &'static str {
        match self {
            TimeBase::EpochSeconds => "epoch_seconds_utc",
            TimeBase::TimestampNsUtc => "timestamp_ns_utc",
            TimeBase::AfterGenStart => "seconds_after_gen_start",
            TimeBase::AfterReplayStart => "seconds_after_replay_start",
            TimeBase::Rfc3339Text => "rfc3339_text",
        }
    }

    /// The unit and zone in words, for the reference.
    pub fn describe(self) -> &'static str {
        match self {
            TimeBase::EpochSeconds => "seconds since 1970-01-01T00:00:00Z (UTC epoch), float64",
            TimeBase::TimestampNsUtc => {
                "nanoseconds since the UTC epoch, time zone `UTC` in the Parquet type (isAdjustedToUTC)"
            }
            TimeBase::AfterGenStart => {
                "seconds after the attempt's `gen_start` (add `gen_start` for UTC epoch seconds)"
            }
            TimeBase::AfterReplayStart => {
                "seconds after the replay's time 0, when every attempt is ready (not a wall-clock time)"
            }
            TimeBase::Rfc3339Text => {
                "RFC 3339 text as recorded in the archive (UTC when no offset)"
            }
        }
    }

    /// The column type a time of this base must have.
    pub fn column_type(self) -> ColumnType {
        match self {
            TimeBase::TimestampNsUtc => ColumnType::DatetimeNs,
            TimeBase::Rfc3339Text => ColumnType::Str,
            _ => ColumnType::F64,
        }
    }
}

/// One declared column.
#[derive(Debug, Clone, Copy)]
pub struct ColumnSpec {
    /// Name.
    pub name: &'static str,
    /// Type.
    pub ty: ColumnType,
    /// May hold nulls.
    pub nullable: bool,
    /// The allowed values, when the set is closed (empty: any).
    pub values: &'static [&'static str],
    /// What it means (units included).
    pub doc: &'static str,
    /// For a point in time: what it counts from, in which unit and zone.
    pub time: Option<TimeBase>,
}

impl ColumnSpec {
    /// The same column, declared a point in time of `base`.
    pub const fn time(mut self, base: TimeBase) -> Self {
        self.time = Some(base);
        self
    }
}

/// Shorthand for a declared column.
pub const fn col(
    name: &'static str,
    ty: ColumnType,
    nullable: bool,
    doc: &'static str,
) -> ColumnSpec {
    ColumnSpec {
        name,
        ty,
        nullable,
        values: &[],
        doc,
        time: None,
    }
}

/// Shorthand for a non-null string column with a closed set of values.
pub const fn col_in(
    name: &'static str,
    values: &'static [&'static str],
    doc: &'static str,
) -> ColumnSpec {
    ColumnSpec {
        name,
        ty: ColumnType::Str,
        nullable: false,
        values,
        doc,
        time: None,
    }
}

/// A declared frame.
#[derive(Debug, Clone, Copy)]
pub struct FrameSpec {
    /// Frame name (file stem).
    pub name: &'static str,
    /// What one row is.
    pub doc: &'static str,
    /// Columns in order.
    pub columns: &'static [ColumnSpec],
}

impl FrameSpec {
    /// The frame's file below the run directory: `<name>.parquet` (the rule, once).
    pub fn parquet_file(&self) -> String {
        format!("{}.parquet", self.name)
    }

    /// The declared column `name`, for readers: used in a `const` (as
    /// `const DIGEST: &str = BLOBS.column("digest");`), a name the frame does not declare
    /// fails to compile, so a renamed column cannot be read under its old name.
    pub const fn column(&self, name: &'static str) -> &'static str {
        let mut i = 0;
        while i < self.columns.len() {
            if const_str_eq(self.columns[i].name, name) {
                return self.columns[i].name;
            }
            i += 1;
        }
        panic!("the frame declares no such column")
    }

    /// JSON Schema (2020-12) of one row, with the Arrow type of each column.
    pub fn json_schema(&self, schema_version: u32) -> Value {
        let mut props = serde_json::Map::new();
        for c in self.columns {
            let (t, arrow) = c.ty.json();
            let ty = if c.nullable { json!([t, "null"]) } else { t };
            let mut p = json!({"type": ty, "description": c.doc, "x-arrow-type": arrow});
            if c.ty == ColumnType::ListU64 {
                p["items"] = json!({"type": "integer", "minimum": 0});
            }
            if !c.values.is_empty() {
                let mut allowed = json!(c.values);
                if c.nullable
                    && let Some(a) = allowed.as_array_mut()
                {
                    a.push(Value::Null);
                }
                p["enum"] = allowed;
            }
            if c.ty == ColumnType::DatetimeNs {
                p["format"] = json!("date-time");
            }
            if let Some(t) = c.time {
                p["x-time-base"] = json!(t.as_str());
            }
            props.insert(c.name.to_string(), p);
        }
        json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": format!("agentrace/{}.schema.json", self.name),
            "title": format!("{}.parquet (one row)", self.name),
            "description": self.doc,
            "x-frame": self.name,
            "x-schema-version": schema_version,
            "type": "object",
            "properties": props,
            "required": self.columns.iter().map(|c| c.name).collect::<Vec<_>>(),
            "additionalProperties": false,
        })
    }

    /// The frame's contract in one line per column, as a reader depends on it: name, Arrow
    /// type, nullability, closed value set and time base, in column order (the docs left
    /// out). Two declarations with the same text read the same way.
    pub fn contract_text(&self) -> String {
        let mut out = format!("frame {}\n", self.name);
        for c in self.columns {
            out.push_str(&format!(
                "  {} {} {} [{}] {}\n",
                c.name,
                c.ty.arrow_type(),
                if c.nullable { "null" } else { "not_null" },
                c.values.join(","),
                c.time.map_or("-", TimeBase::as_str)
            ));
        }
        out
    }

    /// Pretty JSON text of the schema, newline-terminated.
    pub fn json_schema_text(&self, schema_version: u32) -> String {
        serde_json::to_string_pretty(&self.json_schema(schema_version)).expect("json") + "\n"
    }

    /// Check a frame's columns (names, order, types, nulls) against the declaration.
    pub fn check(&self, df: &DataFrame) -> Result<(), String> {
        let names: Vec<String> = df
            .get_column_names()
            .iter()
            .map(|s| s.to_string())
            .collect();
        let want: Vec<&str> = self.columns.iter().map(|c| c.name).collect();
        if names != want {
            return Err(format!(
                "{}: columns {:?}, declared {:?}",
                self.name, names, want
            ));
        }
        for c in self.columns {
            let column = df.column(c.name).map_err(|e| e.to_string())?;
            if !c.ty.matches(column.dtype()) {
                return Err(format!(
                    "{}.{}: type {:?}, declared {:?}",
                    self.name,
                    c.name,
                    column.dtype(),
                    c.ty
                ));
            }
            if !c.values.is_empty()
                && let Ok(ca) = column.str()
                && let Some(bad) = ca.iter().flatten().find(|v| !c.values.contains(v))
            {
                return Err(format!(
                    "{}.{}: value `{bad}` is not one of {:?}",
                    self.name, c.name, c.values
                ));
            }
            if !c.nullable && column.null_count() > 0 {
                return Err(format!(
                    "{}.{}: {} nulls in a non-null column",
                    self.name,
                    c.name,
                    column.null_count()
                ));
            }
        }
        Ok(())
    }
}

/// `a == b`, usable in a `const fn` and a `const` assertion.
pub const fn const_str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}
