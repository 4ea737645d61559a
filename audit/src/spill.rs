//! The audited attempts of a run kept on disk, not in memory, until the cohort rules and the
//! frames read them back in output order: memory then holds one small key per attempt.

use crate::attempt::AuditedAttempt;
use crate::error::AuditError;
use model::WorkloadId;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// What the cohort rules and the output order need of an attempt without its record.
#[derive(Debug, Clone)]
pub struct SpillKey {
    /// Workload.
    pub workload: WorkloadId,
    /// Attempt id.
    pub attempt_id: Box<str>,
    /// Archive id.
    pub archive_id: Box<str>,
    /// Attempt directory inside the archive.
    pub member_prefix: Box<str>,
    /// A pilot attempt (superseded by the census; never a duplicate).
    pub pilot: bool,
    offset: u64,
    bytes: u32,
}

impl SpillKey {
    /// The key as the duplicate rule reads it.
    pub fn copy_key(&self) -> crate::cohort::CopyKey<'_> {
        crate::cohort::CopyKey {
            workload: self.workload,
            attempt_id: &self.attempt_id,
            archive_id: &self.archive_id,
            member_prefix: &self.member_prefix,
            pilot: self.pilot,
        }
    }

    /// The frames' row order: workload, attempt id, archive id, member prefix.
    pub fn output_order(&self, other: &Self) -> std::cmp::Ordering {
        (
            self.workload,
            &self.attempt_id,
            &self.archive_id,
            &self.member_prefix,
        )
            .cmp(&(
                other.workload,
                &other.attempt_id,
                &other.archive_id,
                &other.member_prefix,
            ))
    }
}

/// A failure of the spill file, named by the directory it lives in (the file has no name).
fn spill_error(dir: &Path, source: std::io::Error) -> AuditError {
    AuditError::Io {
        path: dir.join("(audit's temporary attempt file)"),
        source,
    }
}

/// Attempts appended in corpus order (archives in manifest order, each archive's attempts
/// sorted) to an unnamed temporary file in the run directory, read back one by one.
#[derive(Debug)]
pub struct AttemptSpill {
    file: std::io::BufWriter<std::fs::File>,
    dir: PathBuf,
    end: u64,
    keys: Vec<SpillKey>,
}

impl AttemptSpill {
    /// An empty spill in `dir` (the file has no name and vanishes with the process).
    pub fn new(dir: &Path) -> Result<Self, AuditError> {
        let file = tempfile::tempfile_in(dir).map_err(|source| AuditError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        Ok(AttemptSpill {
            file: std::io::BufWriter::with_capacity(1 << 20, file),
            dir: dir.to_path_buf(),
            end: 0,
            keys: Vec::new(),
        })
    }

    /// Append one attempt.
    pub fn push(&mut self, a: &AuditedAttempt) -> Result<(), AuditError> {
        let bytes = serde_json::to_vec(a).expect("an audited attempt serializes");
        self.file
            .write_all(&bytes)
            .map_err(|source| spill_error(&self.dir, source))?;
        self.keys.push(SpillKey {
            workload: a.workload,
            attempt_id: a.attempt_id.as_str().into(),
            archive_id: a.archive_id.as_str().into(),
            member_prefix: a.member_prefix.as_str().into(),
            pilot: a.is_pilot(),
            offset: self.end,
            bytes: u32::try_from(bytes.len()).expect("an attempt record under 4 GiB"),
        });
        self.end += bytes.len() as u64;
        Ok(())
    }

    /// Append attempts in order.
    pub fn extend(&mut self, attempts: &[AuditedAttempt]) -> Result<(), AuditError> {
        attempts.iter().try_for_each(|a| self.push(a))
    }

    /// Every attempt's key, in the order pushed.
    pub fn keys(&self) -> &[SpillKey] {
        &self.keys
    }

    /// Stop writing; the records can then be read.
    pub fn into_reader(self) -> Result<SpillReader, AuditError> {
        let file = self
            .file
            .into_inner()
            .map_err(|e| spill_error(&self.dir, e.into_error()))?;
        Ok(SpillReader {
            file,
            dir: self.dir,
            keys: self.keys,
        })
    }
}

/// The finished spill: keys in memory, records read back by position.
#[derive(Debug)]
pub struct SpillReader {
    file: std::fs::File,
    dir: PathBuf,
    keys: Vec<SpillKey>,
}

impl SpillReader {
    /// Every attempt's key, in the order pushed.
    pub fn keys(&self) -> &[SpillKey] {
        &self.keys
    }

    /// The attempt pushed `index`-th.
    pub fn read(&self, index: usize) -> Result<AuditedAttempt, AuditError> {
        let k = &self.keys[index];
        let mut buf = vec![0u8; k.bytes as usize];
        self.file
            .read_exact_at(&mut buf, k.offset)
            .map_err(|source| spill_error(&self.dir, source))?;
        serde_json::from_slice(&buf).map_err(|e| {
            spill_error(
                &self.dir,
                std::io::Error::new(std::io::ErrorKind::InvalidData, e),
            )
        })
    }

    /// Indices of the attempts in the frames' row order.
    pub fn output_order(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.keys.len()).collect();
        order.sort_by(|&a, &b| self.keys[a].output_order(&self.keys[b]).then(a.cmp(&b)));
        order
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt(workload: WorkloadId, id: &str, archive: &str, prefix: &str) -> AuditedAttempt {
        AuditedAttempt {
            workload,
            task_id: Some(format!("task-of-{id}")),
            attempt_id: id.into(),
            run: None,
            archive_id: archive.into(),
            archive_sha256: "ab".repeat(32),
            member_prefix: prefix.into(),
            gen_start: None,
            gen_end: None,
            n_requests: 3,
            quota: None,
            blobs: Vec::new(),
            result: None,
            requests: Default::default(),
            n_intervals: 2,
            request_s: 1.5,
            problem: None,
            exclusion: None,
            flag: None,
        }
    }

    /// Records read back are the records pushed, field for field (serialized the same), and
    /// the output order is (workload, attempt id, archive id, member prefix), ties kept in
    /// the order pushed.
    #[test]
    fn records_read_back_whole_and_in_output_order() {
        let dir = tempfile::tempdir().unwrap();
        let pushed = vec![
            attempt(WorkloadId::Deepswe, "b", "arc-2", "x/b/"),
            attempt(WorkloadId::Tmax, "z", "arc-1", "t/z/"),
            attempt(WorkloadId::Deepswe, "a", "arc-2", "x/a/"),
            attempt(WorkloadId::Deepswe, "b", "arc-1", "y/b/"),
            attempt(WorkloadId::Deepswe, "b", "arc-1", "x/b/"),
        ];
        let mut spill = AttemptSpill::new(dir.path()).unwrap();
        spill.extend(&pushed).unwrap();
        assert_eq!(spill.keys().len(), 5);
        let reader = spill.into_reader().unwrap();
        for (i, a) in pushed.iter().enumerate() {
            let back = reader.read(i).unwrap();
            assert_eq!(
                serde_json::to_string(&back).unwrap(),
                serde_json::to_string(a).unwrap()
            );
        }
        assert_eq!(reader.output_order(), vec![1, 2, 4, 3, 0]);
        // The file has no name: nothing is left in the directory.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
