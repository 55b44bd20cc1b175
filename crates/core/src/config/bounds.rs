//! The bounds of `crate::limits` applied to every bounded number of a configuration.

use crate::limits::{
    check_range, OutOfRange, CONCURRENCY_RANGE, FEWSHOT_RANGE, ITEMS_RANGE, MAX_TOKENS_RANGE,
    PARTITIONS_RANGE, RETRIES_RANGE, RETRY_BACKOFF_MS_RANGE, SAMPLES_RANGE, TIMEOUT_SECONDS_RANGE,
};

/// Every bounded number of a configuration.
pub(super) fn check_config(cfg: &super::Config) -> Result<(), OutOfRange> {
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
    check_range(
        "[sweep] num_fewshot",
        cfg.sweep.num_fewshot.into(),
        &FEWSHOT_RANGE,
    )?;
    Ok(())
}
