//! The study's lower bounds (docs/FORMAT.md): CPU and RAM equal their ideal values (the same
//! for every schedule); the GPU and cache bounds from request lengths, durations and K.

use schedule::GridInstance;
use schedule::accounting::{
    BYTE_NS_PER_GIB_HOUR, NANO_UNIT_NS_PER_HOUR, NS_PER_HOUR, ResourceHours, free_time_products,
};

/// The study's lower bounds: CPU/RAM = their ideal values;
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
