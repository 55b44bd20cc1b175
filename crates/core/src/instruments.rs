//! The nine JobCannon instruments: file names, score columns and item counts.
//!
//! This is the single description of the human data's shape; the fetch stage builds its
//! explicit Arrow schemas from it and the scorer takes dimension names from it.

/// How the `q1..qN` cells of an instrument are typed on import.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemKind {
    /// Small integers (Int8). A non-integer cell is an import error.
    Int,
    /// Free text (no instrument uses it since career_match is typed as integers; its one row
    /// of JSON-object answers is excluded and reported on import).
    Text,
}

/// Static description of one instrument.
#[derive(Debug, Clone, Copy)]
pub struct Instrument {
    /// Short name, also the CSV file stem (`big_five` -> `big_five.csv`).
    pub name: &'static str,
    /// Integer score dimensions, in the CSV's column order (`score_<dim>`).
    pub dimensions: &'static [&'static str],
    /// Text score columns after the integer ones (`score_<name>`), e.g. RIASEC's JSON percentiles.
    pub text_scores: &'static [&'static str],
    /// Number of items `q1..qN`.
    pub items: usize,
    /// How the items are answered.
    pub item_kind: ItemKind,
    /// True for the four instruments of the questionnaire study.
    pub in_study: bool,
}

impl Instrument {
    /// An instrument outside the questionnaire study whose items are small integers (as are
    /// all nine's).
    const fn ints(
        name: &'static str,
        dimensions: &'static [&'static str],
        text_scores: &'static [&'static str],
        items: usize,
    ) -> Self {
        Instrument {
            name,
            dimensions,
            text_scores,
            items,
            item_kind: ItemKind::Int,
            in_study: false,
        }
    }

    /// The same instrument, one of the questionnaire study's.
    const fn in_study(self) -> Self {
        Instrument {
            in_study: true,
            ..self
        }
    }

    /// Column names in CSV order.
    pub fn columns(&self) -> Vec<String> {
        let mut c: Vec<String> = [
            "id",
            "created_at",
            "locale",
            "duration_seconds",
            "top_result",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        c.extend(self.dimensions.iter().map(|d| format!("score_{d}")));
        c.extend(self.text_scores.iter().map(|d| format!("score_{d}")));
        c.extend((1..=self.items).map(|i| format!("q{i}")));
        c
    }

    /// File name of the instrument's human-response CSV.
    pub fn file_name(&self) -> String {
        format!("{}.csv", self.name)
    }
}

/// The Holland codes: RIASEC's dimensions, which career match scores too.
const HOLLAND: &[&str] = &["A", "C", "E", "I", "R", "S"];

/// Big Five personality test.
pub(crate) const BIG_FIVE: Instrument =
    Instrument::ints("big_five", &["A", "C", "E", "N", "O"], &[], 50).in_study();

/// RIASEC (Holland codes) test.
pub(crate) const RIASEC: Instrument =
    Instrument::ints("riasec", HOLLAND, &["percentiles"], 60).in_study();

/// Dark Triad test.
pub const DARK_TRIAD: Instrument = Instrument::ints(
    "dark_triad",
    &["machiavellianism", "narcissism", "psychopathy"],
    &[],
    18,
)
.in_study();

/// Multiple intelligences test.
pub(crate) const MULTIPLE_INTELLIGENCES: Instrument = Instrument::ints(
    "multiple_intelligences",
    &[
        "bodily",
        "interpersonal",
        "intrapersonal",
        "linguistic",
        "logical",
        "musical",
        "naturalist",
        "spatial",
    ],
    &[],
    40,
)
.in_study();

/// Career match test.
pub(crate) const CAREER_MATCH: Instrument = Instrument::ints("career_match", HOLLAND, &[], 12);

/// DISC test.
pub(crate) const DISC: Instrument = Instrument::ints("disc", &["C", "D", "I", "S"], &[], 12);

/// Enneagram test.
pub(crate) const ENNEAGRAM: Instrument = Instrument::ints(
    "enneagram",
    &["1", "2", "3", "4", "5", "6", "7", "8", "9"],
    &[],
    36,
);

/// Emotional intelligence (EQ) test.
pub(crate) const EQ: Instrument = Instrument::ints(
    "eq",
    &[
        "empathy",
        "self_awareness",
        "self_regulation",
        "social_skills",
    ],
    &[],
    10,
);

/// MBTI-style type test.
pub(crate) const MBTI: Instrument = Instrument::ints(
    "mbti",
    &["AT", "EI", "JP", "SN", "TF"],
    &["fullType", "identity"],
    60,
);

/// All nine, study instruments first (in the study's order), then the rest alphabetically.
pub const ALL_INSTRUMENTS: &[Instrument] = &[
    BIG_FIVE,
    RIASEC,
    DARK_TRIAD,
    MULTIPLE_INTELLIGENCES,
    CAREER_MATCH,
    DISC,
    ENNEAGRAM,
    EQ,
    MBTI,
];

/// The four instruments of the questionnaire study (168 items).
pub fn study_instruments() -> impl Iterator<Item = &'static Instrument> {
    ALL_INSTRUMENTS.iter().filter(|i| i.in_study)
}

/// Look an instrument up by name.
pub fn instrument_by_name(name: &str) -> Option<&'static Instrument> {
    ALL_INSTRUMENTS.iter().find(|i| i.name == name)
}

/// The explicit Arrow schema of an imported human-response file, in CSV column order:
///
/// | column | type | null |
/// |---|---|---|
/// | `id` | Int64 | no |
/// | `created_at` | Timestamp(µs, "UTC") | no |
/// | `locale` | Utf8 | yes (blank cell) |
/// | `duration_seconds` | Int32 | yes (blank cell) |
/// | `top_result` | Utf8 | no |
/// | `score_<dim>` | Int32 | no |
/// | `score_<text>` | Utf8 | yes |
/// | `q1..qN` | Int8 (Utf8 for [`ItemKind::Text`]) | no |
pub fn instrument_schema(inst: &Instrument) -> arrow::datatypes::SchemaRef {
    use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
    let mut f = vec![
        Field::new("id", DataType::Int64, false),
        Field::new(
            "created_at",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            false,
        ),
        Field::new("locale", DataType::Utf8, true),
        Field::new("duration_seconds", DataType::Int32, true),
        Field::new("top_result", DataType::Utf8, false),
    ];
    for d in inst.dimensions {
        f.push(Field::new(format!("score_{d}"), DataType::Int32, false));
    }
    for d in inst.text_scores {
        f.push(Field::new(format!("score_{d}"), DataType::Utf8, true));
    }
    let item_type = match inst.item_kind {
        ItemKind::Int => DataType::Int8,
        ItemKind::Text => DataType::Utf8,
    };
    for i in 1..=inst.items {
        f.push(Field::new(format!("q{i}"), item_type.clone(), false));
    }
    std::sync::Arc::new(Schema::new(f))
}

#[cfg(test)]
mod tests {
    #[test]
    fn study_has_168_items() {
        assert_eq!(
            super::study_instruments().map(|i| i.items).sum::<usize>(),
            168
        );
    }
}
