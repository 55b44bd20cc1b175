//! Stored-answer format v1: the record, its vocabularies and its fixed Arrow schema.
//!
//! The normative description is docs/stored-answers.md; this module is its implementation.

use crate::FormatError;
use arrow::array::{Array, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray};
use protospread_core::{AnswersSection, STORED_ANSWERS};
use std::collections::BTreeMap;

/// The only format version this build reads and writes.
pub const FORMAT_VERSION: i32 = 1;

/// The eleven conditions of the study, in the study's order.
pub const CONDITIONS: [&str; 11] = [
    "S0", "S0r", "SR", "SP", "ST1", "B0", "B0r", "BS1", "BS2", "BS3", "BS4",
];

/// The ten temperature-0 conditions of the protocol spread.
pub const PROTOCOL_CONDITIONS: [&str; 10] = [
    "S0", "S0r", "SR", "SP", "B0", "B0r", "BS1", "BS2", "BS3", "BS4",
];

/// The four tests of the study with their item counts (168 items).
pub const TESTS: [(&str, u32); 4] = [
    ("big_five", 50),
    ("riasec", 60),
    ("dark_triad", 18),
    ("multiple_intelligences", 40),
];

/// The two instructions of the study (P2 is a paraphrase of P1).
pub const INSTRUCTIONS: [&str; 2] = ["P1", "P2"];

/// Column names of the stored-answer format, in schema order: those of the table contract
/// [`STORED_ANSWERS`], as an array the import can index at compile time.
pub const COLUMNS: [&str; STORED_ANSWERS.len()] = {
    let mut out = [""; STORED_ANSWERS.len()];
    let mut i = 0;
    while i < out.len() {
        out[i] = STORED_ANSWERS.name_at(i);
        i += 1;
    }
    out
};

/// How the model was reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum Arm {
    /// A model behind an API with temperature control (the default of `administer`).
    #[default]
    Api,
    /// A command-line tool (no temperature control).
    Cli,
    /// A locally run model.
    Local,
}

impl Arm {
    /// Every arm, in the order of the format's documentation.
    pub const ALL: [Arm; 3] = [Arm::Api, Arm::Cli, Arm::Local];

    /// The spelling in the stored-answer format.
    pub fn as_str(self) -> &'static str {
        match self {
            Arm::Api => "api",
            Arm::Cli => "cli",
            Arm::Local => "local",
        }
    }
    /// Parses the stored-answer spelling; `None` for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "api" => Some(Arm::Api),
            "cli" => Some(Arm::Cli),
            "local" => Some(Arm::Local),
            _ => None,
        }
    }
}

/// One item per request, or the whole test in one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Mode {
    /// One item per request.
    Single,
    /// The whole test in one request.
    Whole,
}

impl Mode {
    /// The spelling in the stored-answer format.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Single => "single",
            Mode::Whole => "whole",
        }
    }
    /// Parses the stored-answer spelling; `None` for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "single" => Some(Mode::Single),
            "whole" => Some(Mode::Whole),
            _ => None,
        }
    }
}

/// Order in which the five options were shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum OptionOrder {
    /// Option k (1..=5) shows human value k-1.
    Human,
    /// Option k (1..=5) shows human value 5-k.
    Reversed,
}

impl OptionOrder {
    /// The spelling in the stored-answer format.
    pub fn as_str(self) -> &'static str {
        match self {
            OptionOrder::Human => "human",
            OptionOrder::Reversed => "reversed",
        }
    }
    /// Parses the stored-answer spelling; `None` for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "human" => Some(OptionOrder::Human),
            "reversed" => Some(OptionOrder::Reversed),
            _ => None,
        }
    }
}

/// What a record may name: built-in vocabularies plus those declared in `[answers]`.
#[derive(Debug, Clone)]
pub struct Vocabulary {
    conditions: Vec<String>,
    tests: BTreeMap<String, u32>,
    instructions: Vec<String>,
}

impl Default for Vocabulary {
    fn default() -> Self {
        Self::from_section(&AnswersSection::default())
    }
}

impl Vocabulary {
    /// Built-in names plus the declarations of `[answers]`.
    pub fn from_section(sec: &AnswersSection) -> Self {
        let mut conditions: Vec<String> = CONDITIONS.iter().map(|s| s.to_string()).collect();
        conditions.extend(sec.extra_conditions.iter().cloned());
        let mut tests: BTreeMap<String, u32> =
            TESTS.iter().map(|(n, k)| (n.to_string(), *k)).collect();
        for t in &sec.extra_tests {
            tests.insert(t.name.clone(), t.items);
        }
        let mut instructions: Vec<String> = INSTRUCTIONS.iter().map(|s| s.to_string()).collect();
        instructions.extend(sec.extra_instructions.iter().cloned());
        Vocabulary {
            conditions,
            tests,
            instructions,
        }
    }
    /// Whether `c` is a known condition code.
    pub fn has_condition(&self, c: &str) -> bool {
        self.conditions.iter().any(|x| x == c)
    }
    /// Whether `c` is a known instruction variant.
    pub fn has_instruction(&self, c: &str) -> bool {
        self.instructions.iter().any(|x| x == c)
    }
    /// Item count of a known test.
    pub fn items(&self, test: &str) -> Option<u32> {
        self.tests.get(test).copied()
    }
}

/// One stored-answer record (one request), normalized.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredRecord {
    /// Stored-answer format version (always 1).
    pub format_version: i32,
    /// Study name.
    pub study: String,
    /// Model id.
    pub model: String,
    /// How the model was run.
    pub arm: Arm,
    /// `None` when the cell was empty.
    pub cohort: Option<String>,
    /// Condition code (S0, ST1, BS1...).
    pub condition: String,
    /// 1-based sample index.
    pub sample: i32,
    /// Test (instrument) name.
    pub test: String,
    /// One item per request or the whole test.
    pub mode: Mode,
    /// Human item number, single mode only.
    pub item: Option<i32>,
    /// Human item numbers in the order shown, whole mode only.
    pub item_order: Option<Vec<i32>>,
    /// Seed of the item-order shuffle, else none.
    pub order_seed: Option<i64>,
    /// Order in which the options were shown.
    pub option_order: OptionOrder,
    /// Instruction variant (`P1` or `P2`).
    pub instruction: String,
    /// `None` when the harness could not set a temperature (e.g. the cli arm).
    pub temperature: Option<f64>,
    /// The raw reply; empty when the model replied nothing or the request failed.
    pub reply: String,
    /// Why the request failed; `Some` marks a failed request.
    pub error: Option<String>,
    /// Provenance label, if given.
    pub label: Option<String>,
}

impl StoredRecord {
    /// The key records are unique on and sorted by: (model, condition, sample, test, item),
    /// with whole-mode records (no item) before any single item.
    pub fn sort_key(&self) -> (&str, &str, i32, &str, Option<i32>) {
        (
            &self.model,
            &self.condition,
            self.sample,
            &self.test,
            self.item,
        )
    }

    /// `item_order` as written in files: human item numbers joined by `;`.
    pub fn item_order_text(&self) -> Option<String> {
        self.item_order.as_ref().map(|v| {
            v.iter()
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(";")
        })
    }
}

/// Records to one batch of the [`STORED_ANSWERS`] schema.
pub fn to_batch(records: &[StoredRecord]) -> Result<RecordBatch, FormatError> {
    let mut b = crate::RecordBuilder::new();
    for r in records {
        let item_order = r.item_order_text();
        b.append(&crate::RecordValues {
            format_version: r.format_version,
            study: &r.study,
            model: &r.model,
            arm: r.arm,
            cohort: r.cohort.as_deref(),
            condition: &r.condition,
            sample: r.sample,
            test: &r.test,
            mode: r.mode,
            item: r.item,
            item_order: item_order.as_deref(),
            order_seed: r.order_seed,
            option_order: r.option_order,
            instruction: &r.instruction,
            temperature: r.temperature,
            reply: &r.reply,
            error: r.error.as_deref(),
            label: r.label.as_deref(),
        });
    }
    Ok(b.finish()?)
}

/// Column `name` of `batch` downcast to `T`, or a file error naming the column.
pub fn column<'a, T: 'static>(
    batch: &'a RecordBatch,
    name: &str,
    file: &std::path::Path,
) -> Result<&'a T, FormatError> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<T>())
        .ok_or_else(|| FormatError::File {
            file: file.to_path_buf(),
            message: format!("column {name} is missing or has the wrong type"),
        })
}

/// Read records back from batches of [`STORED_ANSWERS`] (as written by the fetch stage).
pub fn from_batches(
    batches: &[RecordBatch],
    file: &std::path::Path,
) -> Result<Vec<StoredRecord>, FormatError> {
    let mut out = Vec::new();
    for b in batches {
        let fv = column::<Int32Array>(b, "format_version", file)?;
        let st = |n: &str| column::<StringArray>(b, n, file);
        let (study, model, arm, cohort, condition) = (
            st("study")?,
            st("model")?,
            st("arm")?,
            st("cohort")?,
            st("condition")?,
        );
        let sample = column::<Int32Array>(b, "sample", file)?;
        let (test, mode) = (st("test")?, st("mode")?);
        let item = column::<Int32Array>(b, "item", file)?;
        let item_order = st("item_order")?;
        let order_seed = column::<Int64Array>(b, "order_seed", file)?;
        let (option_order, instruction) = (st("option_order")?, st("instruction")?);
        let temperature = column::<Float64Array>(b, "temperature", file)?;
        let (reply, error, label) = (st("reply")?, st("error")?, st("label")?);
        let opt_s = |a: &StringArray, i: usize| (!a.is_null(i)).then(|| a.value(i).to_string());
        for i in 0..b.num_rows() {
            let bad = |col: &str| FormatError::Record {
                file: file.to_path_buf(),
                row: out.len() + 1,
                line: None,
                column: col.to_string(),
                message: "invalid value in normalized stored answers".to_string(),
                source: None,
            };
            let io = opt_s(item_order, i);
            out.push(StoredRecord {
                format_version: fv.value(i),
                study: study.value(i).to_string(),
                model: model.value(i).to_string(),
                arm: Arm::parse(arm.value(i)).ok_or_else(|| bad("arm"))?,
                cohort: opt_s(cohort, i),
                condition: condition.value(i).to_string(),
                sample: sample.value(i),
                test: test.value(i).to_string(),
                mode: Mode::parse(mode.value(i)).ok_or_else(|| bad("mode"))?,
                item: (!item.is_null(i)).then(|| item.value(i)),
                item_order: match io {
                    None => None,
                    Some(t) => Some(
                        t.split(';')
                            .map(|x| x.parse::<i32>().map_err(|_| bad("item_order")))
                            .collect::<Result<Vec<_>, _>>()?,
                    ),
                },
                order_seed: (!order_seed.is_null(i)).then(|| order_seed.value(i)),
                option_order: OptionOrder::parse(option_order.value(i))
                    .ok_or_else(|| bad("option_order"))?,
                instruction: instruction.value(i).to_string(),
                temperature: (!temperature.is_null(i)).then(|| temperature.value(i)),
                reply: reply.value(i).to_string(),
                error: opt_s(error, i),
                label: opt_s(label, i),
            });
        }
    }
    Ok(out)
}
