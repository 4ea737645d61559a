//! The instance zoo (docs/ZOO.md): named demo corpora with shape knobs, listed in one
//! place, `demo/zoo.yaml` (embedded), plus the plan statistics that show what each knob did.

use crate::knobs::CorpusKnobs;
use crate::plan::{CorpusPlan, NS, plan_corpus_with};
use crate::write::write_corpus_with;
use crate::{DemoError, DemoSummary, Scale};
use model::config::ReplayCaps;
use model::{RunKind, WorkloadId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::OnceLock;

/// The zoo's parameters, embedded from `demo/zoo.yaml`.
pub const ZOO_YAML: &str = include_str!("../zoo.yaml");

/// One named instance of the zoo.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ZooInstance {
    /// Name (`pipeline demo --zoo NAME`).
    pub name: String,
    /// One line on what it is.
    pub about: String,
    /// Generator seed.
    pub seed: u64,
    /// Base scale (default full).
    #[serde(default = "full")]
    pub scale: Scale,
    /// Shape knobs (default: the demo's shape).
    #[serde(default)]
    pub knobs: CorpusKnobs,
}

fn full() -> Scale {
    Scale::Full
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ZooFile {
    instances: Vec<ZooInstance>,
}

/// A zoo that cannot be read, or a name it does not have.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ZooError {
    /// `demo/zoo.yaml` does not parse.
    #[error("demo/zoo.yaml: {0}")]
    Parse(String),
    /// An instance's knobs are refused.
    #[error("demo/zoo.yaml: instance `{name}`: {detail}")]
    Knobs {
        /// The instance.
        name: String,
        /// The refused field.
        detail: String,
    },
    /// Two instances share a name.
    #[error("demo/zoo.yaml: instance `{0}` is listed twice")]
    Duplicate(String),
    /// No instance of that name.
    #[error("no zoo instance `{name}` (known: {known})")]
    Unknown {
        /// The name asked for.
        name: String,
        /// The names the zoo has.
        known: String,
    },
}

fn parse_zoo(text: &str) -> Result<Vec<ZooInstance>, ZooError> {
    let file: ZooFile = serde_yaml::from_str(text).map_err(|e| ZooError::Parse(e.to_string()))?;
    let mut names = BTreeSet::new();
    for i in &file.instances {
        if !names.insert(i.name.clone()) {
            return Err(ZooError::Duplicate(i.name.clone()));
        }
        i.knobs.check().map_err(|detail| ZooError::Knobs {
            name: i.name.clone(),
            detail,
        })?;
    }
    Ok(file.instances)
}

/// Every instance of the zoo, in file order.
pub fn zoo() -> Result<&'static [ZooInstance], ZooError> {
    static ZOO: OnceLock<Result<Vec<ZooInstance>, ZooError>> = OnceLock::new();
    ZOO.get_or_init(|| parse_zoo(ZOO_YAML))
        .as_deref()
        .map_err(Clone::clone)
}

/// The instance called `name`.
pub fn find(name: &str) -> Result<&'static ZooInstance, ZooError> {
    let all = zoo()?;
    all.iter()
        .find(|i| i.name == name)
        .ok_or_else(|| ZooError::Unknown {
            name: name.into(),
            known: all
                .iter()
                .map(|i| i.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        })
}

impl ZooInstance {
    /// The instance's plan (no I/O).
    pub fn plan(&self) -> CorpusPlan {
        plan_corpus_with(self.scale, self.seed, &self.knobs)
    }

    /// Write the instance's corpus, manifest, `pipeline.yaml` (its caps and expectations)
    /// and `expected.json` into `out`.
    pub fn generate(&self, out: &Path) -> Result<DemoSummary, DemoError> {
        write_corpus_with(
            &self.plan(),
            out,
            self.scale,
            self.seed,
            &self.knobs,
            Some(&self.name),
        )
    }

    /// Statistics of each of its workloads' cohort (the census attempts).
    pub fn stats(&self) -> Vec<PlanStats> {
        let plan = self.plan();
        WorkloadId::ALL
            .into_iter()
            .filter(|w| self.knobs.has(*w))
            .map(|w| plan_stats(&plan, w, self.knobs.of(w).caps.resolve(w)))
            .collect()
    }
}

/// What a workload of a planned corpus looks like (census attempts, as planned: before the
/// injected timing anomalies are clipped by the audit).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanStats {
    /// The workload.
    pub workload: WorkloadId,
    /// Census attempts.
    pub attempts: usize,
    /// The caps written into `pipeline.yaml`.
    pub caps: ReplayCaps,
    /// CPU cap / (K x mean quota cores): below 1, the CPU cap keeps fewer than K running
    /// on average.
    pub cpu_tightness: f64,
    /// RAM cap / (K x mean quota GiB).
    pub ram_tightness: f64,
    /// Largest quota, cores and GiB.
    pub max_quota: [f64; 2],
    /// Median duration, s.
    pub median_duration_s: f64,
    /// 99th percentile duration, s.
    pub p99_duration_s: f64,
    /// Longest duration, s.
    pub max_duration_s: f64,
    /// Summed request time / summed duration.
    pub duty: f64,
    /// Share of attempts whose first request starts after a quarter of their duration.
    pub late_first_request: f64,
    /// Coefficient of variation of the gaps between consecutive requests (pooled).
    pub gap_cv: f64,
    /// Request duty in the last fifth of the attempts' durations / overall duty.
    pub end_duty_ratio: f64,
    /// Distinct blobs.
    pub blobs: usize,
    /// Mean blobs per attempt.
    pub blobs_per_attempt: f64,
    /// Mean blob size, MiB.
    pub mean_blob_mib: f64,
    /// Share of the summed blob bytes in the ten largest blobs.
    pub top10_blob_share: f64,
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// Statistics of workload `w`'s census attempts in `plan`.
pub fn plan_stats(plan: &CorpusPlan, w: WorkloadId, caps: ReplayCaps) -> PlanStats {
    let att: Vec<_> = plan
        .attempts
        .iter()
        .filter(|a| a.workload == w && a.run == RunKind::Census && a.completed_ns.is_some())
        .collect();
    let n = att.len().max(1) as f64;
    let mut durations = Vec::new();
    let (mut req_total, mut d_total, mut late) = (0.0, 0.0, 0usize);
    let (mut end_req, mut end_d) = (0.0, 0.0);
    let mut gaps = Vec::new();
    let mut blobs = std::collections::BTreeMap::new();
    let (mut cores, mut mem, mut max_cores, mut max_mem, mut refs) = (0.0, 0.0, 0.0f64, 0.0f64, 0);
    for a in &att {
        let start = a.gen_start_ns;
        let end = a.completed_ns.expect("completed");
        let d = (end - start) as f64;
        durations.push(d / NS as f64);
        d_total += d;
        let end_from = start as f64 + 0.8 * d;
        let mut spans: Vec<(u64, u64)> = a
            .requests
            .iter()
            .filter_map(|r| Some((r.start_ns?, r.start_ns? + r.elapsed_ns?)))
            .map(|(s, e)| (s.clamp(start, end), e.clamp(start, end)))
            .collect();
        spans.sort();
        if let Some(first) = spans.first()
            && (first.0 - start) as f64 > 0.25 * d
        {
            late += 1;
        }
        for (i, &(s, e)) in spans.iter().enumerate() {
            req_total += (e - s) as f64;
            end_req += (e as f64 - (s as f64).max(end_from)).max(0.0);
            if let Some(&(ns, _)) = spans.get(i + 1) {
                gaps.push(ns.saturating_sub(e) as f64);
            }
        }
        end_d += 0.2 * d;
        cores += a.quota.cores;
        mem += a.quota.mem_gib;
        max_cores = max_cores.max(a.quota.cores);
        max_mem = max_mem.max(a.quota.mem_gib);
        refs += a.blobs.len();
        for b in &a.blobs {
            blobs.insert(b.digest.clone(), b.compressed_bytes);
        }
    }
    durations.sort_by(f64::total_cmp);
    let mut sizes: Vec<u64> = blobs.values().copied().collect();
    sizes.sort_unstable_by(|a, b| b.cmp(a));
    let blob_bytes = sizes.iter().sum::<u64>().max(1) as f64;
    let gm = gaps.iter().sum::<f64>() / gaps.len().max(1) as f64;
    let gv = gaps.iter().map(|g| (g - gm) * (g - gm)).sum::<f64>() / gaps.len().max(1) as f64;
    let duty = req_total / d_total.max(1.0);
    let k = caps.concurrency as f64;
    PlanStats {
        workload: w,
        attempts: att.len(),
        caps,
        cpu_tightness: caps.cpu_cores / (k * cores / n),
        ram_tightness: caps.ram_gib / (k * mem / n),
        max_quota: [max_cores, max_mem],
        median_duration_s: quantile(&durations, 0.5),
        p99_duration_s: quantile(&durations, 0.99),
        max_duration_s: durations.last().copied().unwrap_or(0.0),
        duty,
        late_first_request: late as f64 / n,
        gap_cv: gv.sqrt() / gm.max(1.0),
        end_duty_ratio: (end_req / end_d.max(1.0)) / duty.max(1e-12),
        blobs: blobs.len(),
        blobs_per_attempt: refs as f64 / n,
        mean_blob_mib: blob_bytes / blobs.len().max(1) as f64 / 1_048_576.0,
        top10_blob_share: sizes.iter().take(10).sum::<u64>() as f64 / blob_bytes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_zoos_name_the_instance_and_field() {
        let dup =
            "instances:\n  - { name: a, about: x, seed: 1 }\n  - { name: a, about: y, seed: 2 }\n";
        assert_eq!(parse_zoo(dup), Err(ZooError::Duplicate("a".into())));
        let bad = "instances:\n  - { name: b, about: x, seed: 1, knobs: { tmax: { caps: { cpu_cores: 2 } } } }\n";
        match parse_zoo(bad) {
            Err(ZooError::Knobs { name, detail }) => {
                assert_eq!(name, "b");
                assert!(detail.starts_with("tmax.caps"), "{detail}");
            }
            other => panic!("{other:?}"),
        }
        let unknown =
            "instances:\n  - { name: c, about: x, seed: 1, knobs: { tmax: { speed: 2 } } }\n";
        assert!(matches!(parse_zoo(unknown), Err(ZooError::Parse(e)) if e.contains("speed")));
        assert!(matches!(find("no-such"), Err(ZooError::Unknown { .. })));
    }
}
