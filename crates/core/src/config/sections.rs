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
    /// Hosts a download may be redirected to besides the URL's own host (e.g. a CDN).
    /// Default: none, so a redirect to another host is an error.
    pub allowed_redirect_hosts: Vec<String>,
}

impl Default for FetchSection {
    fn default() -> Self {
        FetchSection {
            cache_dir: PathBuf::from("cache"),
            timeout_seconds: 30,
            retries: 2,
            hf_endpoint: "https://huggingface.co".to_string(),
            allowed_redirect_hosts: Vec::new(),
        }
    }
}

/// `[score]`: owned by the score stage (scoring key, parity, norms). Paths are relative to the
/// configuration file's folder. See docs/scoring-key.md.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ScoreSection {
    /// The scoring key: 168 rows (test,item,dimension,reverse,weight,...).
    pub key: PathBuf,
    /// Older key versions; a human row one of them reproduces is set aside with that reason.
    pub legacy_keys: PathBuf,
    /// Reviewed unexplained rows (instrument,id,note); any other unexplained row fails the stage.
    pub allowlist: PathBuf,
    /// Run the mutation sweep over every item of the key (336 re-scorings).
    pub sweep: bool,
    /// Reply rules whose readable replies the score stage counts (`reply_rules.parquet`), by
    /// name out of [`REPLY_RULES`]; `"strict"`, the study's rule, must be listed first.
    pub reply_rules: Vec<String>,
}

/// Names of the reply rules `[score] reply_rules` may list, as `protospread_score::
/// ReplyRule::as_str` spells them (a test there checks that the two lists agree).
pub const REPLY_RULES: [&str; 2] = ["strict", "lenient"];

impl ScoreSection {
    /// Check `reply_rules`: known names, no repeats, `"strict"` first.
    pub(crate) fn validate(&self) -> std::result::Result<(), String> {
        let key = "[score] reply_rules";
        for (i, r) in self.reply_rules.iter().enumerate() {
            if !REPLY_RULES.contains(&r.as_str()) {
                return Err(format!(
                    "{key}: unknown rule {r:?} (known: {})",
                    REPLY_RULES.join(", ")
                ));
            }
            if self.reply_rules[..i].contains(r) {
                return Err(format!("{key}: {r:?} is listed twice"));
            }
        }
        if self.reply_rules.first().map(String::as_str) != Some("strict") {
            return Err(format!(
                "{key}: \"strict\" (the study's rule) must be listed first"
            ));
        }
        Ok(())
    }
}

impl Default for ScoreSection {
    fn default() -> Self {
        ScoreSection {
            key: PathBuf::from("data/scoring_key.csv"),
            legacy_keys: PathBuf::from("data/scoring_key_legacy.csv"),
            allowlist: PathBuf::from("data/parity_allowlist.csv"),
            sweep: true,
            reply_rules: vec!["strict".to_string()],
        }
    }
}

/// `[answers]`: owned by the stored-answer stage (parsing, declared conditions).
///
/// The eleven conditions of the study, its four tests and the instructions P1/P2 are built in;
/// a stored-answer record naming anything else is an import error unless it is declared here.
/// See docs/stored-answers.md.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AnswersSection {
    /// Conditions beyond S0, S0r, SR, SP, ST1, B0, B0r, BS1..BS4 (e.g. `["S0sys"]`).
    pub extra_conditions: Vec<String>,
    /// Tests beyond the four of the study, each with its item count. Every item of a declared
    /// test must be in the scoring key for its scale scores to be computed.
    pub extra_tests: Vec<AnswersExtraTest>,
    /// Instruction ids beyond P1 and P2.
    pub extra_instructions: Vec<String>,
}

/// A test declared in `[answers] extra_tests`: `{ name = "hexaco", items = 60 }`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnswersExtraTest {
    /// Name as it appears in the `test` column of stored answers.
    pub name: String,
    /// Number of items, numbered 1..=items.
    pub items: u32,
}

/// `[aggregate]`: owned by the aggregate stage (see docs/statistics.md).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AggregateSection {
    /// Conditions whose administrations form the protocol set (temperature 0).
    pub protocol_conditions: Vec<String>,
    /// Conditions whose administrations form the sampling set (temperature 1 samples).
    pub sampling_conditions: Vec<String>,
    /// The protocol set of the declared secondary analysis (by default the four single-item
    /// setups): at least two, a subset of `protocol_conditions`, no repeats; empty = no
    /// secondary analysis. Its tables carry `protocol_set = "secondary_single_item"`.
    pub secondary_protocol_conditions: Vec<String>,
    /// Pairs `[first, rerun]` whose absolute difference in human SDs is reported.
    pub rerun_pairs: Vec<[String; 2]>,
    /// Nested grouping columns for the group tables: a subset of `["arm", "cohort"]`, in order.
    pub groups: Vec<String>,
    /// The arm whose cells the headline tables and the verdict use.
    pub headline_arm: String,
    /// Arms reported in the separate-arm table ("same direction" share, median range). Their
    /// cells are kept without sampling administrations (these arms have no temperature).
    pub separate_arms: Vec<String>,
    /// Protocol conditions on the "from" side of the protocol shift (single-item mode).
    pub shift_from: Vec<String>,
    /// Protocol conditions on the "to" side of the protocol shift (whole-test mode). A cell's
    /// shift is mean z over `shift_to` minus mean z over `shift_from`; "same direction" in the
    /// separate-arm table compares its sign with the headline arm's median shift of the scale.
    pub shift_to: Vec<String>,
    /// Verdict: share of cells with protocol SD > sampling SD needed (0..1).
    pub verdict_share: f64,
    /// Verdict: median ratio protocol SD / sampling SD needed.
    pub verdict_ratio: f64,
    /// Verdict: a share below this counts as "few" (unreadable replies, constant runs).
    pub verdict_few: f64,
    /// DataFusion target partitions; 0 means DataFusion's default (the number of cores).
    /// Results do not depend on it (tested); it only changes speed.
    pub target_partitions: usize,
}

impl Default for AggregateSection {
    fn default() -> Self {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        AggregateSection {
            protocol_conditions: s(&[
                "S0", "S0r", "SR", "SP", "B0", "B0r", "BS1", "BS2", "BS3", "BS4",
            ]),
            sampling_conditions: s(&["ST1"]),
            secondary_protocol_conditions: s(&["S0", "S0r", "SR", "SP"]),
            rerun_pairs: vec![
                ["S0".to_string(), "S0r".to_string()],
                ["B0".to_string(), "B0r".to_string()],
            ],
            groups: s(&["arm", "cohort"]),
            headline_arm: "api".to_string(),
            separate_arms: s(&["cli"]),
            shift_from: s(&["S0", "S0r", "SR", "SP"]),
            shift_to: s(&["B0", "B0r", "BS1", "BS2", "BS3", "BS4"]),
            verdict_share: 0.80,
            verdict_ratio: 2.0,
            verdict_few: 0.05,
            target_partitions: 0,
        }
    }
}

/// `[engine]`: the DataFusion engine shared by the score and aggregate stages (see
/// docs/performance.md). `--memory-limit` on the command line overrides `memory_limit`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EngineSection {
    /// Memory the engine may hold for sorts, joins and aggregations before it spills to disk:
    /// bytes as an integer, or a string with a unit (`"512MiB"`, `"1GiB"`).
    pub memory_limit: ByteSize,
}

impl Default for EngineSection {
    fn default() -> Self {
        EngineSection {
            memory_limit: ByteSize(1 << 30),
        }
    }
}

/// A size in bytes, written in pipeline.toml as an integer or as a string with a binary unit
/// (`B`, `KiB`, `MiB`, `GiB`, `TiB`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteSize(pub u64);

impl ByteSize {
    /// Parse `"1GiB"`, `"512 MiB"`, `"1048576"`; refuses decimal units (`GB`), fractions, zero
    /// and sizes that do not fit in 64 bits.
    pub fn parse(text: &str) -> std::result::Result<ByteSize, String> {
        let t = text.trim();
        let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        let n: u64 = num.parse().map_err(|_| {
            format!("{text:?} is not a size (write e.g. 1073741824, \"512MiB\" or \"1GiB\")")
        })?;
        let shift = match unit.trim() {
            "" | "B" => 0,
            "KiB" => 10,
            "MiB" => 20,
            "GiB" => 30,
            "TiB" => 40,
            u => {
                return Err(format!(
                    "{text:?}: unknown unit {u:?} (use B, KiB, MiB, GiB or TiB)"
                ))
            }
        };
        let bytes = n
            .checked_mul(1u64 << shift)
            .ok_or_else(|| format!("{text:?} is too large"))?;
        if bytes == 0 {
            return Err(format!("{text:?}: the size must be larger than 0"));
        }
        Ok(ByteSize(bytes))
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Int(u64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Int(n) => ByteSize::parse(&n.to_string()),
            Raw::Text(t) => ByteSize::parse(&t),
        }
        .map_err(serde::de::Error::custom)
    }
}

/// `[report]`: owned by the report stage (see docs/report.md).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ReportSection {
    /// Parquet tables of other stages rendered as CSV/Markdown/HTML too, as paths relative to
    /// the output folder (e.g. `"score/parity_summary.parquet"`). A listed file that does not
    /// exist is an error.
    pub tables: Vec<PathBuf>,
    /// Title of the HTML report.
    pub title: String,
}

impl Default for ReportSection {
    fn default() -> Self {
        ReportSection {
            tables: vec![
                PathBuf::from("score/parity_summary.parquet"),
                PathBuf::from("score/mutation_sweep.parquet"),
                PathBuf::from("score/norms.parquet"),
                PathBuf::from("score/reply_reruns.parquet"),
            ],
            title: "Protocol sensitivity of questionnaire scores".to_string(),
        }
    }
}

/// `[administer]`: owned by the administer command (see docs/administer.md).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AdministerSection {
    /// Instrument files (item texts, options, instructions); relative to pipeline.toml.
    pub instruments: Vec<PathBuf>,
    /// Conditions to administer, by name (S0, S0r, SR, SP, ST1, B0, B0r, BS1..BS4).
    pub conditions: Vec<String>,
    /// Independent samples of each ST1 request.
    pub st1_samples: u32,
    /// Temperature of ST1; every other built-in condition uses 0.
    pub sampled_temperature: f64,
    /// Item-order shuffle seeds of BS1, BS2, BS3, BS4 (in that order).
    pub shuffle_seeds: Vec<u64>,
    /// Requests in flight at once.
    pub concurrency: usize,
    /// Per-request timeout (whole request, connect to last byte), seconds.
    pub timeout_seconds: u64,
    /// Attempts after the first on HTTP 429, 5xx, timeouts and connection errors.
    pub retries: u32,
    /// First retry delay in milliseconds; doubled per attempt, capped at 60 s.
    pub retry_backoff_ms: u64,
    /// `max_tokens` of a single-item request.
    pub max_tokens_single: u32,
    /// `max_tokens` of a whole-test request.
    pub max_tokens_whole: u32,
    /// Send a per-request `seed` (derived from the request key) in the body.
    pub send_seed: bool,
}

impl Default for AdministerSection {
    fn default() -> Self {
        AdministerSection {
            instruments: vec![PathBuf::from("data/instruments/ipip50.toml")],
            conditions: [
                "S0", "S0r", "SR", "SP", "ST1", "B0", "B0r", "BS1", "BS2", "BS3", "BS4",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect(),
            st1_samples: 3,
            sampled_temperature: 1.0,
            shuffle_seeds: vec![101, 102, 103, 104],
            concurrency: 2,
            timeout_seconds: 120,
            retries: 4,
            retry_backoff_ms: 1000,
            max_tokens_single: 64,
            max_tokens_whole: 1024,
            send_seed: true,
        }
    }
}

/// `[sweep]`: owned by the delimiter-sweep study (docs/sweep.md documents every key).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SweepSection {
    /// The delimiters placed between few-shot examples, each a non-empty string. Default
    /// (ours, not the paper's unpublished list): [`default_sweep_delimiters`].
    pub delimiters: Vec<String>,
    /// Which prompt variants to build for every delimiter.
    pub variants: Vec<SweepVariant>,
    /// The sentence that names the delimiter in the `named` variant. `{delimiter}` is replaced
    /// by the delimiter shown in double quotes (`\n` and `\t` written as escapes) and
    /// `{delimiter_name}` by its English name ("newline", "comma", ...).
    pub naming_template: String,
    /// Few-shot examples per prompt, written as `num_fewshot` into every generated task.
    pub num_fewshot: u32,
    /// The per-sample metric read from lm-eval's samples files (0 or 1 per document).
    pub metric: String,
    /// Folders of lm-eval output (`--output_path`, with `--log_samples`) to ingest.
    pub lm_eval_runs: Vec<PathBuf>,
    /// Record files of `protospread sweep dictionary` (JSONL) whose results enter the sweep
    /// tables as benchmark `dictionary`.
    pub dictionary_runs: Vec<PathBuf>,
}

/// The two prompt variants of a delimiter sweep.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SweepVariant {
    /// Only the delimiter changes.
    Plain,
    /// The prompt also says which delimiter separates the examples.
    Named,
}

impl SweepVariant {
    /// Lowercase name used in task names and tables.
    pub fn as_str(self) -> &'static str {
        match self {
            SweepVariant::Plain => "plain",
            SweepVariant::Named => "named",
        }
    }
}

/// The default delimiter set: every printable non-alphanumeric ASCII character (space
/// included, 33 in all) in code-point order, then `"\n"` and `"\t"`: 35 delimiters.
pub fn default_sweep_delimiters() -> Vec<String> {
    let mut v: Vec<String> = (0x20u8..0x7f)
        .filter(|b| !b.is_ascii_alphanumeric())
        .map(|b| (b as char).to_string())
        .collect();
    v.push("\n".to_string());
    v.push("\t".to_string());
    v
}

impl Default for SweepSection {
    fn default() -> Self {
        SweepSection {
            delimiters: default_sweep_delimiters(),
            variants: vec![SweepVariant::Plain, SweepVariant::Named],
            naming_template: "The question-answer examples are separated by {delimiter}."
                .to_string(),
            num_fewshot: 5,
            metric: "acc".to_string(),
            lm_eval_runs: Vec::new(),
            dictionary_runs: Vec::new(),
        }
    }
}
