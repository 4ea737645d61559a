//! Declared schemas of the audit's frames (rendered into `schemas/` and checked on write).

use frames::schema::{ColumnSpec, ColumnType::*, FrameSpec, TimeBase, col};

// Columns several frames share: every row traces to its workload, attempt and archive.
const WORKLOAD: ColumnSpec = col("workload", Str, false, "tmax or deepswe");
const ATTEMPT_ID: ColumnSpec = col("attempt_id", Str, false, "attempt id");
const ARCHIVE_ID: ColumnSpec = col(
    "archive_id",
    Str,
    false,
    "manifest id of the original archive",
);
const ARCHIVE_SHA256: ColumnSpec = col(
    "archive_sha256",
    Str,
    false,
    "SHA256 of the verified original archive",
);
const MEMBER_PREFIX: ColumnSpec = col(
    "member_prefix",
    Str,
    false,
    "attempt directory inside the archive",
);

/// `attempts.parquet`.
pub const ATTEMPTS: FrameSpec = FrameSpec {
    name: "attempts",
    doc: "One row per attempt directory found in any archive (census, pilot, included and excluded).",
    columns: &[
        WORKLOAD,
        col(
            "task_id",
            Str,
            true,
            "benchmark task id (identity file, else the directory)",
        ),
        col(
            "attempt_id",
            Str,
            false,
            "attempt (trial) id, from the attempt directory",
        ),
        col(
            "run",
            Str,
            true,
            "census or pilot (null when the identity file is unreadable)",
        ),
        ARCHIVE_ID,
        ARCHIVE_SHA256,
        MEMBER_PREFIX,
        col(
            "gen_start",
            F64,
            true,
            "generation start: identity-file mtime, UTC epoch seconds",
        )
        .time(TimeBase::EpochSeconds),
        col(
            "gen_end",
            F64,
            true,
            "generation end: completed_utc, UTC epoch seconds (null if never completed)",
        )
        .time(TimeBase::EpochSeconds),
        col(
            "gen_start_utc",
            DatetimeNs,
            true,
            "gen_start as a UTC datetime (ns)",
        )
        .time(TimeBase::TimestampNsUtc),
        col(
            "gen_end_utc",
            DatetimeNs,
            true,
            "gen_end as a UTC datetime (ns)",
        )
        .time(TimeBase::TimestampNsUtc),
        col(
            "duration_s",
            F64,
            true,
            "fixed duration d = gen_end - gen_start, seconds",
        ),
        col("n_requests", U32, false, "request-start files"),
        col(
            "n_intervals",
            U32,
            false,
            "request intervals after clipping and merging",
        ),
        col(
            "request_s",
            F64,
            false,
            "length of the union of the kept request intervals, seconds",
        ),
        col("quota_cores", F64, true, "reserved CPU cores"),
        col("quota_gib", F64, true, "reserved RAM, GiB"),
        col("n_blobs", U32, false, "image layers listed"),
        col(
            "completed_utc",
            Str,
            true,
            "completed_utc as recorded (RFC 3339)",
        )
        .time(TimeBase::Rfc3339Text),
        col("termination", Str, true, "deepswe: how the agent stopped"),
        col(
            "infra_error",
            Str,
            true,
            "deepswe: infrastructure failure text",
        ),
        col("exception_type", Str, true, "tmax: exception type"),
        col("exception_message", Str, true, "tmax: exception message"),
        col("reward", F64, true, "tmax: reward (0 = wrong answer)"),
        col("included", Bool, false, "in the workload's cohort"),
        col(
            "exclusion_reason",
            Str,
            true,
            "why not (see exclusions.parquet for the detail)",
        ),
        col("flagged", Bool, false, "kept in the cohort but flagged"),
        col("flag_reason", Str, true, "why flagged (llm_query_error)"),
    ],
};

/// `requests.parquet`.
pub const REQUESTS: FrameSpec = FrameSpec {
    name: "requests",
    doc: "One row per kept request interval (clipped to the generation lifetime and merged), every attempt with a readable identity.",
    columns: &[
        WORKLOAD,
        ATTEMPT_ID,
        col(
            "seqs",
            ListU64,
            false,
            "request sequence numbers merged into this interval",
        ),
        col(
            "start_offset_s",
            F64,
            false,
            "start, seconds after gen_start",
        )
        .time(TimeBase::AfterGenStart),
        col(
            "end_offset_s",
            F64,
            false,
            "end (exclusive), seconds after gen_start",
        )
        .time(TimeBase::AfterGenStart),
        ARCHIVE_SHA256,
        MEMBER_PREFIX,
    ],
};

/// `clipping.parquet`.
pub const CLIPPING: FrameSpec = FrameSpec {
    name: "clipping",
    doc: "One row per clip, drop, merge or timing anomaly; times are absolute UTC epoch seconds.",
    columns: &[
        WORKLOAD,
        ATTEMPT_ID,
        col("seqs", ListU64, false, "request sequence numbers concerned"),
        col(
            "raw_start",
            F64,
            true,
            "interval start before the change (null for an orphan timer)",
        )
        .time(TimeBase::EpochSeconds),
        col(
            "raw_end",
            F64,
            true,
            "interval end before the change (null for an orphan timer, or a missing timer without generation end)",
        )
        .time(TimeBase::EpochSeconds),
        col(
            "kept_start",
            F64,
            true,
            "interval start after the change (null when dropped)",
        )
        .time(TimeBase::EpochSeconds),
        col(
            "kept_end",
            F64,
            true,
            "interval end after the change (null when dropped)",
        )
        .time(TimeBase::EpochSeconds),
        col(
            "seconds_removed",
            F64,
            false,
            "request seconds removed by this change",
        ),
        col(
            "reason",
            Str,
            false,
            "missing_timer, orphan_timer, before_generation_start, after_generation_end, outside_generation or merged_overlap",
        ),
        col("included", Bool, false, "the attempt is in the cohort"),
        ARCHIVE_SHA256,
        MEMBER_PREFIX,
    ],
};

/// `exclusions.parquet`.
pub const EXCLUSIONS: FrameSpec = FrameSpec {
    name: "exclusions",
    doc: "One row per attempt not in its workload's cohort, with the reason and the evidence.",
    columns: &[
        WORKLOAD,
        ATTEMPT_ID,
        col("task_id", Str, true, "task id"),
        col("run", Str, true, "census or pilot"),
        col(
            "reason",
            Str,
            false,
            "execution_exception, infrastructure_failure, superseded_by_census, duplicate_attempt, malformed_record or missing_file",
        ),
        col("detail", Str, false, "what was found"),
        ARCHIVE_ID,
        ARCHIVE_SHA256,
        col(
            "member_path",
            Str,
            false,
            "the member (or attempt directory) that shows it",
        ),
    ],
};

/// `blobs.parquet`.
pub const BLOBS: FrameSpec = FrameSpec {
    name: "blobs",
    doc: "One row per unique compressed image layer digest listed by any attempt.",
    columns: &[
        col("digest", Str, false, "sha256:<hex>"),
        col("compressed_bytes", U64, false, "compressed size in bytes"),
        col(
            "compressed_gib",
            F64,
            false,
            "compressed size in GiB (2^30 bytes)",
        ),
    ],
};

/// `attempt_blobs.parquet`.
pub const ATTEMPT_BLOBS: FrameSpec = FrameSpec {
    name: "attempt_blobs",
    doc: "One row per (attempt, image layer) use.",
    columns: &[
        WORKLOAD,
        ATTEMPT_ID,
        col("digest", Str, false, "sha256:<hex>"),
        ARCHIVE_SHA256,
        MEMBER_PREFIX,
    ],
};

/// Every audit frame, in write order.
pub const AUDIT_FRAME_SPECS: [&FrameSpec; 6] = [
    &ATTEMPTS,
    &REQUESTS,
    &CLIPPING,
    &EXCLUSIONS,
    &BLOBS,
    &ATTEMPT_BLOBS,
];
