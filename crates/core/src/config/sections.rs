//! Per-stage sections of `pipeline.toml`. Each struct is `deny_unknown_fields` and has a
//! `Default` equal to the documented defaults, so a section may be left out.

use serde::Deserialize;
use std::path::PathBuf;

/// `[fetch]`: where downloads are cached and how they are retried.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FetchSection {
    /// Cache folder for downloaded inputs; relative to the output folder when relative.
    pub cache_dir: PathBuf,
    /// Per-request timeout (connect and each read), seconds.
    pub timeout_seconds: u64,
    /// Attempts after the first for HTTP 5xx, 429 and connection errors.
    pub retries: u32,
    /// Hugging Face endpoint; the `HF_ENDPOINT` environment variable overrides it.
    pub hf_endpoint: String,
}

impl Default for FetchSection {
    fn default() -> Self {
        FetchSection {
            cache_dir: PathBuf::from("cache"),
            timeout_seconds: 30,
            retries: 2,
            hf_endpoint: "https://huggingface.co".to_string(),
        }
    }
}

/// `[score]`: owned by the score stage (scoring key, parity, norms).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ScoreSection {}

/// `[answers]`: owned by the stored-answer stage (parsing, declared conditions).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AnswersSection {}

/// `[aggregate]`: owned by the aggregate stage.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AggregateSection {}

/// `[report]`: owned by the report stage.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ReportSection {}

/// `[administer]`: owned by the administer command.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AdministerSection {}

/// `[sweep]`: owned by the delimiter-sweep study.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SweepSection {}
