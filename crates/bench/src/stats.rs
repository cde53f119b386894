//! Latency summaries from raw samples (the built-in runner, the raw database clients, single
//! timed requests). Percentiles are nearest-rank over every sample: exact, and cheap at the
//! sample counts a 2-core box produces (a few hundred thousand per step).

use serde::{Deserialize, Serialize};

/// Latency statistics of one step, in milliseconds.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Latency {
    pub avg: f64,
    pub median: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
    pub min: f64,
    pub max: f64,
}

/// Summarises samples given in microseconds (sorted in place). All zero when empty.
pub fn summarize_us(samples: &mut [u64]) -> Latency {
    if samples.is_empty() {
        return Latency::default();
    }
    samples.sort_unstable();
    let ms = |us: u64| us as f64 / 1000.0;
    let sum: u128 = samples.iter().map(|&v| u128::from(v)).sum();
    Latency {
        avg: sum as f64 / samples.len() as f64 / 1000.0,
        median: ms(rank(samples, 50.0)),
        p90: ms(rank(samples, 90.0)),
        p95: ms(rank(samples, 95.0)),
        p99: ms(rank(samples, 99.0)),
        min: ms(samples[0]),
        max: ms(samples[samples.len() - 1]),
    }
}

/// Nearest-rank percentile of sorted, non-empty samples.
fn rank(sorted: &[u64], p: f64) -> u64 {
    let n = sorted.len();
    let idx = ((p / 100.0) * n as f64).ceil() as usize;
    sorted[idx.clamp(1, n) - 1]
}

/// The median of a few values (repetitions of a timed request); 0 when empty.
pub fn median(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_nearest_rank() {
        let mut s: Vec<u64> = (1..=100).map(|v| v * 1000).collect();
        let l = summarize_us(&mut s);
        assert_eq!(l.median, 50.0);
        assert_eq!(l.p90, 90.0);
        assert_eq!(l.p99, 99.0);
        assert_eq!(l.min, 1.0);
        assert_eq!(l.max, 100.0);
        assert!((l.avg - 50.5).abs() < 1e-9);
        assert_eq!(summarize_us(&mut []), Latency::default());
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
