//! The study's resource-hour accounting: ideal values of a schedule and FIFO holding values,
//! computed from exact integer sums on the nanosecond grid and converted to hours once at
//! the end. (The study's lower bounds, computed from the same sums, are in the `bounds`
//! crate.)

use crate::evaluate::{Evaluation, GridInstance};
use serde::{Deserialize, Serialize};

/// Nanoseconds per hour.
pub const NS_PER_HOUR: f64 = 3.6e12;
/// Nano-units (of a core or GiB) times nanoseconds per unit-hour.
pub const NANO_UNIT_NS_PER_HOUR: f64 = 3.6e21;
/// Bytes per GiB times nanoseconds per hour.
pub const BYTE_NS_PER_GIB_HOUR: f64 = model::GIB * NS_PER_HOUR;

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
pub fn free_time_products(g: &GridInstance) -> (i128, i128) {
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
