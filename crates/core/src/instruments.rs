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

/// Big Five personality test.
pub(crate) const BIG_FIVE: Instrument = Instrument {
    name: "big_five",
    dimensions: &["A", "C", "E", "N", "O"],
    text_scores: &[],
    items: 50,
    item_kind: ItemKind::Int,
    in_study: true,
};

/// RIASEC (Holland codes) test.
pub(crate) const RIASEC: Instrument = Instrument {
    name: "riasec",
    dimensions: &["A", "C", "E", "I", "R", "S"],
    text_scores: &["percentiles"],
    items: 60,
    item_kind: ItemKind::Int,
    in_study: true,
};

/// Dark Triad test.
pub const DARK_TRIAD: Instrument = Instrument {
    name: "dark_triad",
    dimensions: &["machiavellianism", "narcissism", "psychopathy"],
    text_scores: &[],
    items: 18,
    item_kind: ItemKind::Int,
    in_study: true,
};

/// Multiple intelligences test.
pub(crate) const MULTIPLE_INTELLIGENCES: Instrument = Instrument {
    name: "multiple_intelligences",
    dimensions: &[
        "bodily",
        "interpersonal",
        "intrapersonal",
        "linguistic",
        "logical",
        "musical",
        "naturalist",
        "spatial",
    ],
    text_scores: &[],
    items: 40,
    item_kind: ItemKind::Int,
    in_study: true,
};

/// Career match test.
pub(crate) const CAREER_MATCH: Instrument = Instrument {
    name: "career_match",
    dimensions: &["A", "C", "E", "I", "R", "S"],
    text_scores: &[],
    items: 12,
    item_kind: ItemKind::Int,
    in_study: false,
};

/// DISC test.
pub(crate) const DISC: Instrument = Instrument {
    name: "disc",
    dimensions: &["C", "D", "I", "S"],
    text_scores: &[],
    items: 12,
    item_kind: ItemKind::Int,
    in_study: false,
};

/// Enneagram test.
pub(crate) const ENNEAGRAM: Instrument = Instrument {
    name: "enneagram",
    dimensions: &["1", "2", "3", "4", "5", "6", "7", "8", "9"],
    text_scores: &[],
    items: 36,
    item_kind: ItemKind::Int,
    in_study: false,
};

/// Emotional intelligence (EQ) test.
pub(crate) const EQ: Instrument = Instrument {
    name: "eq",
    dimensions: &[
        "empathy",
        "self_awareness",
        "self_regulation",
        "social_skills",
    ],
    text_scores: &[],
    items: 10,
    item_kind: ItemKind::Int,
    in_study: false,
};

/// MBTI-style type test.
pub(crate) const MBTI: Instrument = Instrument {
    name: "mbti",
    dimensions: &["AT", "EI", "JP", "SN", "TF"],
    text_scores: &["fullType", "identity"],
    items: 60,
    item_kind: ItemKind::Int,
    in_study: false,
};

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
