//! A stored-answer set of any size with the study's design, for benchmarks
//! (`protospread simulate --answers N --out FILE.parquet`, scripts/bench.sh).
//!
//! Per model: the 4 tests (168 items) under the 11 conditions, single-item mode for S0, S0r, SR,
//! SP and ST1 (three samples), whole-test mode for B0, B0r and BS1..BS4: 1,200 requests and
//! 2,184 item answers. A small share of replies is unreadable (a refusal in single mode, a
//! missing answer line in whole mode) and a few requests fail. Every random draw is a hash of
//! (seed, model, condition, sample, test, item), so the file does not depend on batch sizes,
//! and records are written in batches of at most [`BATCH_ROWS`] rows: memory stays bounded for
//! any N. The same seed and N always give the same bytes.

use crate::SimulateError;
use parquet::arrow::ArrowWriter;
use protospread_core::STORED_ANSWERS;
use protospread_format::{
    Arm, Mode, OptionOrder, RecordBuilder, RecordValues, CONDITIONS, FORMAT_VERSION, TESTS,
};
use std::path::Path;

/// Records per written batch.
pub(crate) const BATCH_ROWS: usize = 65_536;
/// Item answers per model of the design.
pub(crate) const ITEMS_PER_MODEL: u64 = 2_184;
/// Label of every generated record.
pub(crate) const BULK_LABEL: &str = "bulk";
/// Study name of every generated record.
pub(crate) const BULK_STUDY: &str = "questionnaire-protocol-sensitivity-bulk";

/// What [`write_bulk`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BulkSummary {
    /// Models written.
    pub models: u64,
    /// Records (requests).
    pub requests: u64,
    /// Item answers (a whole-test request answers every item of its test).
    pub item_answers: u64,
}

/// SplitMix64: a well-mixed 64-bit hash, so each draw depends only on its own key.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

fn draw(seed: u64, parts: &[u64]) -> u64 {
    parts.iter().fold(mix(seed), |h, p| mix(h ^ p))
}

/// Uniform in [0, 1).
fn unit(h: u64) -> f64 {
    (h >> 11) as f64 / (1u64 << 53) as f64
}

/// Item order of a whole-test request: human order for B0/B0r, a seeded shuffle for BS*.
fn item_order(n: u32, order_seed: Option<i64>) -> Vec<u32> {
    let mut v: Vec<u32> = (1..=n).collect();
    if let Some(s) = order_seed {
        for i in (1..v.len()).rev() {
            let j = (draw(s as u64, &[i as u64]) % (i as u64 + 1)) as usize;
            v.swap(i, j);
        }
    }
    v
}

/// One request of a model.
struct Request<'a> {
    model: &'a str,
    cohort: &'a str,
    condition: &'a str,
    sample: i32,
    test: &'a str,
    item: Option<u32>,
    item_order: Option<String>,
    order_seed: Option<i64>,
    reply: String,
    error: Option<&'a str>,
}

/// Append one request to the batch, with the settings its condition implies.
fn push(b: &mut RecordBuilder, r: Request<'_>) {
    b.append(&RecordValues {
        format_version: FORMAT_VERSION,
        study: BULK_STUDY,
        model: r.model,
        arm: Arm::Api,
        cohort: Some(r.cohort),
        condition: r.condition,
        sample: r.sample,
        test: r.test,
        mode: if r.item.is_some() {
            Mode::Single
        } else {
            Mode::Whole
        },
        item: r.item.map(|i| i as i32),
        item_order: r.item_order.as_deref(),
        order_seed: r.order_seed,
        option_order: if r.condition == "SR" {
            OptionOrder::Reversed
        } else {
            OptionOrder::Human
        },
        instruction: if r.condition == "SP" { "P2" } else { "P1" },
        temperature: Some(if r.condition == "ST1" { 1.0 } else { 0.0 }),
        reply: &r.reply,
        error: r.error,
        label: Some(BULK_LABEL),
    });
}

/// The option number (1..5) a model shows for an item: its trait level on the test, a shift per
/// condition, and temperature-1 noise for ST1.
fn option(seed: u64, m: u64, ci: u64, sample: i32, ti: u64, item: u32) -> u32 {
    let level = 1.0 + 3.0 * unit(draw(seed, &[m, ti, 1]));
    let shift = 1.2 * (unit(draw(seed, &[m, ti, ci, 2])) - 0.5);
    let item_dev = unit(draw(seed, &[m, ti, u64::from(item), 3])) - 0.5;
    let noise = if CONDITIONS[ci as usize] == "ST1" {
        1.5 * (unit(draw(seed, &[m, ti, ci, sample as u64, u64::from(item), 4])) - 0.5)
    } else {
        0.0
    };
    (level + shift + item_dev + noise).round().clamp(1.0, 5.0) as u32
}

/// Write `n_answers` item answers (rounded up to whole models) as a stored-answer Parquet file
/// (format v1), atomically (temporary file, then rename).
pub fn write_bulk(path: &Path, n_answers: u64, seed: u64) -> Result<BulkSummary, SimulateError> {
    if n_answers == 0 {
        return Err(SimulateError::File {
            file: path.to_path_buf(),
            message: "the number of item answers must be positive".into(),
        });
    }
    let models = n_answers.div_ceil(ITEMS_PER_MODEL);
    let tmp = path.with_extension("parquet.tmp");
    let file = fs_err::File::create(&tmp).map_err(SimulateError::Fs)?;
    let perr = |source: parquet::errors::ParquetError| SimulateError::Parquet {
        file: tmp.clone(),
        source,
    };
    let mut w = ArrowWriter::try_new(
        file,
        STORED_ANSWERS.schema(),
        Some(protospread_core::parquet_writer_properties()),
    )
    .map_err(perr)?;
    let mut cols = RecordBuilder::new();
    let mut requests = 0u64;
    // Conditions in byte order, so records come sorted by (model, condition, sample, test, item).
    let mut conds: Vec<(usize, &str)> = CONDITIONS.iter().copied().enumerate().collect();
    conds.sort_by_key(|c| c.1);
    let mut tests: Vec<(usize, (&str, u32))> = TESTS.iter().copied().enumerate().collect();
    tests.sort_by_key(|t| t.1 .0);
    for m in 0..models {
        let model = format!("bulk-model-{m:07}");
        let cohort = if m % 4 == 0 { "pilot" } else { "full" };
        for &(ci, cond) in &conds {
            let ci = ci as u64;
            let samples: &[i32] = if cond == "ST1" { &[1, 2, 3] } else { &[1] };
            let whole = cond.starts_with('B');
            for &sample in samples {
                for &(ti, (test, n)) in &tests {
                    let ti = ti as u64;
                    let failed = draw(seed, &[m, ci, sample as u64, ti, 5]).is_multiple_of(2000);
                    if whole {
                        let order_seed =
                            cond.strip_prefix("BS").and_then(|k| k.parse::<i64>().ok());
                        let order = item_order(n, order_seed);
                        let mut reply = String::with_capacity(8 * n as usize);
                        // One whole-test reply in 40 misses one answer line.
                        let skip = draw(seed, &[m, ci, sample as u64, ti, 6])
                            .is_multiple_of(40)
                            .then(|| 1 + draw(seed, &[m, ci, ti, 7]) % u64::from(n));
                        for (p, item) in order.iter().enumerate() {
                            let pos = p as u64 + 1;
                            if skip == Some(pos) {
                                continue;
                            }
                            let o = option(seed, m, ci, sample, ti, *item);
                            reply.push_str(&format!("{pos}: {o}\n"));
                        }
                        let text: Vec<String> = order.iter().map(|i| i.to_string()).collect();
                        push(
                            &mut cols,
                            Request {
                                model: &model,
                                cohort,
                                condition: cond,
                                sample,
                                test,
                                item: None,
                                item_order: Some(text.join(";")),
                                order_seed,
                                reply: if failed { String::new() } else { reply },
                                error: failed.then_some("timeout"),
                            },
                        );
                        requests += 1;
                    } else {
                        for item in 1..=n {
                            let h = draw(seed, &[m, ci, sample as u64, ti, u64::from(item), 8]);
                            // About one single-item reply in 200 is a refusal.
                            let reply = if failed {
                                String::new()
                            } else if h.is_multiple_of(200) {
                                "I'd rather not answer that.".to_string()
                            } else {
                                let o = option(seed, m, ci, sample, ti, item);
                                // SR shows the options reversed: the shown number mirrors.
                                let shown = if cond == "SR" { 6 - o } else { o };
                                shown.to_string()
                            };
                            push(
                                &mut cols,
                                Request {
                                    model: &model,
                                    cohort,
                                    condition: cond,
                                    sample,
                                    test,
                                    item: Some(item),
                                    item_order: None,
                                    order_seed: None,
                                    reply,
                                    error: failed.then_some("timeout"),
                                },
                            );
                            requests += 1;
                        }
                    }
                }
            }
            if cols.len() >= BATCH_ROWS {
                w.write(&cols.finish()?).map_err(perr)?;
            }
        }
    }
    if !cols.is_empty() {
        w.write(&cols.finish()?).map_err(perr)?;
    }
    w.close().map_err(perr)?;
    fs_err::rename(&tmp, path).map_err(SimulateError::Fs)?;
    Ok(BulkSummary {
        models,
        requests,
        item_answers: models * ITEMS_PER_MODEL,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_bytes_and_the_design_counts() {
        let d = tempfile::tempdir().unwrap();
        let (a, b) = (d.path().join("a.parquet"), d.path().join("b.parquet"));
        let s = write_bulk(&a, 3000, 7).unwrap();
        write_bulk(&b, 3000, 7).unwrap();
        assert_eq!(fs_err::read(&a).unwrap(), fs_err::read(&b).unwrap());
        assert_eq!(s.models, 2);
        assert_eq!(s.requests, 2 * 1200);
        assert_eq!(s.item_answers, 2 * 2184);
        let (_, batches) = protospread_core::read_parquet(&a).unwrap();
        let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
        assert_eq!(rows as u64, s.requests);
        assert!(write_bulk(&a, 0, 7).is_err());
    }
}
