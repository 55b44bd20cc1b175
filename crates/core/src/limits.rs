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

/// `Err` naming `what` when `value` is outside `range`.
pub fn check_range(what: &str, value: u64, range: &RangeInclusive<u64>) -> Result<(), String> {
    if range.contains(&value) {
        Ok(())
    } else {
        Err(format!(
            "{what} = {value} is out of range: it must be between {} and {}",
            range.start(),
            range.end()
        ))
    }
}

/// Every bounded number of a configuration.
pub(crate) fn check_config(cfg: &crate::config::Config) -> Result<(), String> {
    check_range(
        "[fetch] timeout_seconds",
        cfg.fetch.timeout_seconds,
        &TIMEOUT_SECONDS_RANGE,
    )?;
    check_range("[fetch] retries", cfg.fetch.retries.into(), &RETRIES_RANGE)?;
    for t in &cfg.answers.extra_tests {
        check_range(
            &format!("[answers] extra_tests: test '{}': items", t.name),
            t.items.into(),
            &ITEMS_RANGE,
        )?;
    }
    check_range(
        "[aggregate] target_partitions",
        cfg.aggregate.target_partitions as u64,
        &PARTITIONS_RANGE,
    )?;
    let a = &cfg.administer;
    check_range(
        "[administer] concurrency",
        a.concurrency as u64,
        &CONCURRENCY_RANGE,
    )?;
    check_range(
        "[administer] timeout_seconds",
        a.timeout_seconds,
        &TIMEOUT_SECONDS_RANGE,
    )?;
    check_range("[administer] retries", a.retries.into(), &RETRIES_RANGE)?;
    check_range(
        "[administer] retry_backoff_ms",
        a.retry_backoff_ms,
        &RETRY_BACKOFF_MS_RANGE,
    )?;
    check_range(
        "[administer] max_tokens_single",
        a.max_tokens_single.into(),
        &MAX_TOKENS_RANGE,
    )?;
    check_range(
        "[administer] max_tokens_whole",
        a.max_tokens_whole.into(),
        &MAX_TOKENS_RANGE,
    )?;
    check_range(
        "[administer] st1_samples",
        a.st1_samples.into(),
        &SAMPLES_RANGE,
    )?;
    if !(a.sampled_temperature.is_finite() && (0.0..=2.0).contains(&a.sampled_temperature)) {
        return Err(format!(
            "[administer] sampled_temperature = {} is out of range: it must be between 0 and 2",
            a.sampled_temperature
        ));
    }
    check_range(
        "[sweep] num_fewshot",
        cfg.sweep.num_fewshot.into(),
        &FEWSHOT_RANGE,
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn out_of_range_names_key_and_bounds() {
        let e = super::check_range("[x] y", 0, &super::CONCURRENCY_RANGE).unwrap_err();
        assert_eq!(e, "[x] y = 0 is out of range: it must be between 1 and 256");
        super::check_range("[x] y", 256, &super::CONCURRENCY_RANGE).unwrap();
    }
}
