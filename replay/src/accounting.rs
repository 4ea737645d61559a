//! Resource-hour accounting of SPEC 2.3: ideal values of a schedule, FIFO holding values and
//! the lower bounds, computed from exact integer sums on the nanosecond grid and converted to
//! hours once at the end.

use crate::evaluate::{Evaluation, GridInstance};
use serde::{Deserialize, Serialize};

/// Nanoseconds per hour.
const NS_PER_HOUR: f64 = 3.6e12;
/// Nano-units (of a core or GiB) times nanoseconds per unit-hour.
const NANO_UNIT_NS_PER_HOUR: f64 = 3.6e21;
/// Bytes per GiB times nanoseconds per hour.
const BYTE_NS_PER_GIB_HOUR: f64 = model::GIB * NS_PER_HOUR;

/// The four resources, in hours (core-hours, GiB-hours, GPU-hours, GiB-hours).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceHours {
    /// CPU core-hours.
    pub cpu: f64,
    /// RAM GiB-hours.
    pub ram: f64,
    /// GPU-hours.
    pub gpu: f64,
    /// Image-cache GiB-hours.
    pub cache: f64,
}

impl ResourceHours {
    /// The value of one resource by name (`cpu`, `ram`, `gpu`, `cache`).
    pub fn get(&self, resource: Resource) -> f64 {
        match resource {
            Resource::Cpu => self.cpu,
            Resource::Ram => self.ram,
            Resource::Gpu => self.gpu,
            Resource::Cache => self.cache,
        }
    }
}

/// One of the four accounted resources.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Resource {
    /// CPU cores.
    Cpu,
    /// Sandbox RAM.
    Ram,
    /// The shared inference service's GPUs.
    Gpu,
    /// The image-blob cache.
    Cache,
}

impl Resource {
    /// Every resource, in output order.
    pub const ALL: [Resource; 4] = [Resource::Cpu, Resource::Ram, Resource::Gpu, Resource::Cache];

    /// Name used in frames.
    pub fn as_str(self) -> &'static str {
        match self {
            Resource::Cpu => "cpu",
            Resource::Ram => "ram",
            Resource::Gpu => "gpu",
            Resource::Cache => "cache",
        }
    }
}

/// `sum_j quota_j * (d_j - req_j)` for cores and for GiB, nano-unit-ns: the CPU/RAM ideal
/// values, the same for every schedule.
fn free_time_products(g: &GridInstance) -> (i128, i128) {
    let mut cpu = 0i128;
    let mut ram = 0i128;
    for j in 0..g.len() {
        let free = i128::from(g.duration[j] - g.request_len[j]);
        cpu += i128::from(g.cores[j]) * free;
        ram += i128::from(g.mem[j]) * free;
    }
    (cpu, ram)
}

/// GPU-hours of a union length.
pub fn gpu_hours(gpus: u32, union_ns: i64) -> f64 {
    f64::from(gpus) * union_ns as f64 / NS_PER_HOUR
}

/// GiB-hours of a cache byte-ns sum.
pub fn cache_hours(byte_ns: u128) -> f64 {
    byte_ns as f64 / BYTE_NS_PER_GIB_HOUR
}

/// The ideal accounting of an evaluated schedule.
pub fn ideal_hours(g: &GridInstance, gpus: u32, e: &Evaluation) -> ResourceHours {
    let (cpu, ram) = free_time_products(g);
    ResourceHours {
        cpu: cpu as f64 / NANO_UNIT_NS_PER_HOUR,
        ram: ram as f64 / NANO_UNIT_NS_PER_HOUR,
        gpu: gpu_hours(gpus, e.gpu_union),
        cache: cache_hours(e.cache_byte_ns),
    }
}

/// FIFO holding: CPU/RAM held for whole attempts, GPUs for the whole batch, each blob from
/// its first use to the batch end.
pub fn holding_hours(g: &GridInstance, gpus: u32, e: &Evaluation) -> ResourceHours {
    let mut cpu = 0i128;
    let mut ram = 0i128;
    let mut first_use = vec![i64::MAX; g.blob_bytes.len()];
    for j in 0..g.len() {
        cpu += i128::from(g.cores[j]) * i128::from(g.duration[j]);
        ram += i128::from(g.mem[j]) * i128::from(g.duration[j]);
        for &b in &g.blob_ids[g.blob_first[j]..g.blob_first[j + 1]] {
            first_use[b as usize] = first_use[b as usize].min(e.starts[j]);
        }
    }
    let mut cache = 0u128;
    for (b, &bytes) in g.blob_bytes.iter().enumerate() {
        if first_use[b] != i64::MAX {
            cache += u128::from(bytes) * (e.makespan - first_use[b]) as u128;
        }
    }
    ResourceHours {
        cpu: cpu as f64 / NANO_UNIT_NS_PER_HOUR,
        ram: ram as f64 / NANO_UNIT_NS_PER_HOUR,
        gpu: gpu_hours(gpus, e.makespan),
        cache: cache_hours(cache),
    }
}

/// The lower bounds of SPEC 2.3: CPU/RAM = their ideal values;
/// GPU `= gpus * max(sum_j req_j / K, max_j req_j) / 3600`;
/// cache `= sum_b GiB_b * max(max_{j uses b} d_j, sum_{j uses b} d_j / K) / 3600`.
pub fn lower_bounds(g: &GridInstance, gpus: u32) -> ResourceHours {
    let (cpu, ram) = free_time_products(g);
    let k = g.concurrency as f64;
    let req_sum: i64 = g.request_len.iter().sum();
    let req_max = g.request_len.iter().copied().max().unwrap_or(0);
    let gpu_ns = (req_sum as f64 / k).max(req_max as f64);
    let mut d_max = vec![0i64; g.blob_bytes.len()];
    let mut d_sum = vec![0i64; g.blob_bytes.len()];
    for j in 0..g.len() {
        for &b in &g.blob_ids[g.blob_first[j]..g.blob_first[j + 1]] {
            d_max[b as usize] = d_max[b as usize].max(g.duration[j]);
            d_sum[b as usize] += g.duration[j];
        }
    }
    let mut cache = 0.0f64;
    for (b, &bytes) in g.blob_bytes.iter().enumerate() {
        let ns = (d_max[b] as f64).max(d_sum[b] as f64 / k);
        cache += bytes as f64 * ns;
    }
    ResourceHours {
        cpu: cpu as f64 / NANO_UNIT_NS_PER_HOUR,
        ram: ram as f64 / NANO_UNIT_NS_PER_HOUR,
        gpu: f64::from(gpus) * gpu_ns / NS_PER_HOUR,
        cache: cache / BYTE_NS_PER_GIB_HOUR,
    }
}
