//! Bounds on every number that enters from pipeline.toml or the command line.
//!
//! A value outside its bound is an error naming the key, checked where the value enters, so
//! that no setting can make protospread allocate without bound, spawn without bound or wait
//! forever (issue 10, item 7). The bounds are far above any real study.

use std::ops::RangeInclusive;

/// Items of one test (`[answers] extra_tests`, instrument files). The largest real
/// questionnaire of the study has 60.
pub(crate) const ITEMS_RANGE: RangeInclusive<u64> = 1..=10_000;
/// Requests in flight (`[administer] concurrency`, `--concurrency`).
pub const CONCURRENCY_RANGE: RangeInclusive<u64> = 1..=256;
/// Timeouts in seconds (`[fetch] timeout_seconds`, `[administer] timeout_seconds`, `--timeout`).
pub const TIMEOUT_SECONDS_RANGE: RangeInclusive<u64> = 1..=86_400;
/// Retries after the first attempt (`[fetch] retries`, `[administer] retries`, `--retries`).
pub const RETRIES_RANGE: RangeInclusive<u64> = 0..=100;
/// First retry delay in milliseconds (`[administer] retry_backoff_ms`).
pub(crate) const RETRY_BACKOFF_MS_RANGE: RangeInclusive<u64> = 0..=600_000;
/// `max_tokens` of a request (`[administer] max_tokens_single`, `max_tokens_whole`).
pub(crate) const MAX_TOKENS_RANGE: RangeInclusive<u64> = 1..=1_000_000;
/// Samples of ST1 (`[administer] st1_samples`).
pub(crate) const SAMPLES_RANGE: RangeInclusive<u64> = 1..=1_000;
/// DataFusion target partitions (`[aggregate] target_partitions`; 0 = DataFusion's default).
pub(crate) const PARTITIONS_RANGE: RangeInclusive<u64> = 0..=16;
/// Few-shot examples (`[sweep] num_fewshot`).
pub(crate) const FEWSHOT_RANGE: RangeInclusive<u64> = 0..=1_000;

/// A bounded number outside its bound.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} = {value} is out of range: it must be between {} and {}", range.start(), range.end())]
pub struct OutOfRange {
    /// The key or flag that set it.
    pub what: String,
    /// The value given.
    pub value: u64,
    /// Its bound.
    pub range: RangeInclusive<u64>,
}

/// `Err` naming `what` when `value` is outside `range`.
pub fn check_range(what: &str, value: u64, range: &RangeInclusive<u64>) -> Result<(), OutOfRange> {
    if range.contains(&value) {
        Ok(())
    } else {
        Err(OutOfRange {
            what: what.to_string(),
            value,
            range: range.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn out_of_range_names_key_and_bounds() {
        let e = super::check_range("[x] y", 0, &super::CONCURRENCY_RANGE).unwrap_err();
        assert_eq!(
            e.to_string(),
            "[x] y = 0 is out of range: it must be between 1 and 256"
        );
        super::check_range("[x] y", 256, &super::CONCURRENCY_RANGE).unwrap();
    }
}
