//! The bound on worker-thread and parallel-fetch counts that every binary's `--threads` and
//! `--parallel` (and `ingest.parallel` in pipeline.yaml) share.

/// The most worker threads (or archives fetched at once) a command accepts. Results never
/// depend on the count; beyond the machine's cores more threads only cost memory and
/// start-up time (`--threads 100000` spent minutes creating threads), so a count above
/// this is refused rather than silently clamped.
pub const MAX_THREADS: usize = 256;

/// Parse a `--threads`/`--parallel` value: an integer in `1..=MAX_THREADS`, else an error
/// text that says the accepted range (clap prints it after the option's name).
pub fn parse_thread_count(s: &str) -> Result<usize, String> {
    let n: usize = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a whole number (1 to {MAX_THREADS})"))?;
    if (1..=MAX_THREADS).contains(&n) {
        Ok(n)
    } else {
        Err(format!("{n} is out of range (1 to {MAX_THREADS})"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_range_and_refuses_zero_huge_and_junk() {
        assert_eq!(parse_thread_count("1"), Ok(1));
        assert_eq!(parse_thread_count("256"), Ok(256));
        assert_eq!(
            parse_thread_count("0"),
            Err("0 is out of range (1 to 256)".to_string())
        );
        assert_eq!(
            parse_thread_count("100000"),
            Err("100000 is out of range (1 to 256)".to_string())
        );
        assert!(
            parse_thread_count("-3")
                .unwrap_err()
                .contains("not a whole number")
        );
    }
}
