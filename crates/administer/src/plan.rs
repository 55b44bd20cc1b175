//! The conditions and the exact requests of an administration.
//!
//! Everything here is a pure function of the instrument files, the `[administer]` section and
//! the model id: the same inputs give the same request bodies byte for byte, which is what makes
//! resuming safe (a stored reply is reused only for an identical request body).

use crate::instrument::Instrument;
use crate::AdministerError;
use protospread_core::AdministerSection;
use serde::{Deserialize, Serialize};

// The stored-answer format owns the vocabulary; the writer uses the reader's definitions so
// the two cannot drift apart.
/// One item per request or the whole test in one request.
pub(crate) use protospread_format::Mode;
/// The built-in conditions in the study's order.
pub(crate) use protospread_format::CONDITIONS as BUILTIN;

/// How a condition administers a test.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    /// Name as stored (`S0`, `BS3`, ...).
    pub name: String,
    /// One question per request or the whole test in one request.
    pub mode: Mode,
    /// Options shown in reverse order (option 1 = the last human option).
    pub reversed: bool,
    /// Instruction id (`P1`, `P2`).
    pub instruction: String,
    /// Sampling temperature sent with every request of the condition.
    pub temperature: f64,
    /// Independent samples of each request (1 except ST1).
    pub samples: u32,
    /// Seed of the item-order shuffle (whole mode); `None` keeps the human order.
    pub shuffle_seed: Option<u64>,
}

/// The condition named `name` with the parameters of `sec`.
pub(crate) fn builtin(name: &str, sec: &AdministerSection) -> Result<Condition, AdministerError> {
    let c = |mode, reversed, instruction: &str, temperature, samples, shuffle_seed| Condition {
        name: name.to_string(),
        mode,
        reversed,
        instruction: instruction.to_string(),
        temperature,
        samples,
        shuffle_seed,
    };
    let seed = |k: usize| {
        sec.shuffle_seeds.get(k).copied().ok_or_else(|| {
            AdministerError::Config(format!(
                "[administer] shuffle_seeds has {} seeds; {name} needs a seed at position {}",
                sec.shuffle_seeds.len(),
                k + 1
            ))
        })
    };
    Ok(match name {
        "S0" | "S0r" => c(Mode::Single, false, "P1", 0.0, 1, None),
        "SR" => c(Mode::Single, true, "P1", 0.0, 1, None),
        "SP" => c(Mode::Single, false, "P2", 0.0, 1, None),
        "ST1" => c(
            Mode::Single,
            false,
            "P1",
            sec.sampled_temperature,
            sec.st1_samples,
            None,
        ),
        "B0" | "B0r" => c(Mode::Whole, false, "P1", 0.0, 1, None),
        "BS1" => c(Mode::Whole, false, "P1", 0.0, 1, Some(seed(0)?)),
        "BS2" => c(Mode::Whole, false, "P1", 0.0, 1, Some(seed(1)?)),
        "BS3" => c(Mode::Whole, false, "P1", 0.0, 1, Some(seed(2)?)),
        "BS4" => c(Mode::Whole, false, "P1", 0.0, 1, Some(seed(3)?)),
        other => {
            return Err(AdministerError::Config(format!(
                "unknown condition '{other}'; the built-in conditions are {}",
                BUILTIN.join(", ")
            )))
        }
    })
}

/// Resolve condition names, refusing duplicates.
pub fn conditions(
    names: &[String],
    sec: &AdministerSection,
) -> Result<Vec<Condition>, AdministerError> {
    let mut out: Vec<Condition> = Vec::new();
    for n in names {
        if out.iter().any(|c| &c.name == n) {
            return Err(AdministerError::Config(format!(
                "condition '{n}' is listed twice"
            )));
        }
        out.push(builtin(n, sec)?);
    }
    if out.is_empty() {
        return Err(AdministerError::Config(
            "no conditions to administer".into(),
        ));
    }
    Ok(out)
}

/// SplitMix64: a tiny generator whose every step is written down in docs/administer.md, so an
/// item order can be re-derived from its seed in any language.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Human item numbers 1..=n in the order shown under `seed`: a Fisher-Yates shuffle that, for
/// i = n-1 down to 1, swaps position i with position `splitmix64() % (i + 1)`.
pub(crate) fn shuffled_order(n: usize, seed: u64) -> Vec<u32> {
    let mut order: Vec<u32> = (1..=n as u32).collect();
    let mut state = seed;
    for i in (1..n).rev() {
        let j = (splitmix64(&mut state) % (i as u64 + 1)) as usize;
        order.swap(i, j);
    }
    order
}

/// One chat message as sent.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Message {
    /// `system` or `user`.
    pub role: String,
    /// The message text.
    pub content: String,
}

/// The chat-completions request body; field order here is the byte order sent.
#[derive(Debug, Clone, Serialize)]
struct Body<'a> {
    model: &'a str,
    messages: &'a [Message],
    temperature: f64,
    max_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    seed: Option<u64>,
    stream: bool,
}

/// The stored-answer columns (format v1) that a planned request decides, as a record holds
/// them: which administration of which test it belongs to, and how it was asked.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RequestColumns {
    /// Condition code (S0, ST1, BS1...).
    pub condition: String,
    /// 1-based sample index (ST1 has 1..=3, every other condition 1).
    pub sample: u32,
    /// Test (instrument) name.
    pub test: String,
    /// `single` or `whole`.
    pub mode: String,
    /// Human item number (single mode), else null.
    pub item: Option<u32>,
    /// Human item numbers in the order shown (whole mode), else null; written joined by `;`.
    #[serde(default, with = "item_order")]
    pub item_order: Option<Vec<u32>>,
    /// Seed of the shuffle that made `item_order` (BS1..BS4), else null.
    pub order_seed: Option<u64>,
    /// `human` or `reversed`.
    pub option_order: String,
    /// `P1` or `P2`.
    pub instruction: String,
    /// Sampling temperature sent.
    pub temperature: f64,
}

/// `item_order` as the stored-answer format writes it: the item numbers joined by `;`.
mod item_order {
    use serde::{de::Error, Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(
        order: &Option<Vec<u32>>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match order {
            Some(v) => {
                s.serialize_some(&v.iter().map(u32::to_string).collect::<Vec<_>>().join(";"))
            }
            None => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Vec<u32>>, D::Error> {
        let Some(text) = Option::<String>::deserialize(d)? else {
            return Ok(None);
        };
        text.split(';')
            .map(|n| {
                n.parse()
                    .map_err(|e| D::Error::custom(format!("item_order `{text}`: {e}")))
            })
            .collect::<Result<_, _>>()
            .map(Some)
    }
}

/// One planned request with everything the stored record needs.
#[derive(Debug, Clone)]
pub struct Planned {
    /// `model|test|condition|sample|item` (`whole` for whole-test requests).
    pub key: String,
    /// The columns of its stored record that the request decides.
    pub columns: RequestColumns,
    /// `max_tokens` sent in the body.
    pub max_tokens: u32,
    /// Seed sent in the body, if any.
    pub seed: Option<u64>,
    /// The exact request body bytes (UTF-8 JSON).
    pub body: String,
    /// sha256 of `body`.
    pub body_sha256: String,
    /// Position in the canonical order (condition order, sample, item): the stored file's order.
    pub rank: usize,
}

/// Options block: `1. text` lines in the shown order.
fn options_block(inst: &Instrument, reversed: bool) -> String {
    let shown: Vec<&String> = if reversed {
        inst.options.iter().rev().collect()
    } else {
        inst.options.iter().collect()
    };
    shown
        .iter()
        .enumerate()
        .map(|(k, o)| format!("{}. {}", k + 1, o))
        .collect::<Vec<_>>()
        .join("\n")
}

fn instruction<'a>(
    inst: &'a Instrument,
    whole: bool,
    id: &str,
) -> Result<&'a String, AdministerError> {
    let (map, table) = if whole {
        (&inst.whole_instructions, "whole_instructions")
    } else {
        (&inst.instructions, "instructions")
    };
    map.get(id).ok_or_else(|| AdministerError::Instrument {
        path: inst.path.clone(),
        message: format!("[{table}] has no {id}, which a requested condition uses"),
    })
}

/// The user message of a single-item request.
pub(crate) fn single_message(
    inst: &Instrument,
    item: u32,
    reversed: bool,
    instr: &str,
) -> Result<String, AdministerError> {
    Ok(format!(
        "{}\n\nStatement: {}\n\nOptions:\n{}",
        instruction(inst, false, instr)?,
        inst.items[item as usize - 1],
        options_block(inst, reversed)
    ))
}

/// The user message of a whole-test request; statements numbered 1..N in the shown order.
pub(crate) fn whole_message(
    inst: &Instrument,
    order: &[u32],
    reversed: bool,
    instr: &str,
) -> Result<String, AdministerError> {
    let statements = order
        .iter()
        .enumerate()
        .map(|(k, &i)| format!("{}. {}", k + 1, inst.items[i as usize - 1]))
        .collect::<Vec<_>>()
        .join("\n");
    Ok(format!(
        "{}\n\nOptions:\n{}\n\nStatements:\n{}",
        instruction(inst, true, instr)?,
        options_block(inst, reversed),
        statements
    ))
}

/// The per-request seed: the first 8 hex digits of sha256("test|condition|sample|item") as an
/// integer (below 2^32, so every server accepts it). The model id is left out so that every
/// model gets the same seeds.
pub(crate) fn request_seed(test: &str, condition: &str, sample: u32, item: &str) -> u64 {
    let h = protospread_core::sha256_hex(format!("{test}|{condition}|{sample}|{item}").as_bytes());
    u64::from_str_radix(&h[..8], 16).expect("sha256 hex digits")
}

/// Every request of `conditions` x `instruments` for `model`, in canonical order.
pub fn plan(
    model: &str,
    instruments: &[Instrument],
    conditions: &[Condition],
    sec: &AdministerSection,
) -> Result<Vec<Planned>, AdministerError> {
    let mut out = Vec::new();
    for cond in conditions {
        for inst in instruments {
            let n = inst.items.len();
            for sample in 1..=cond.samples {
                let units: Vec<Option<u32>> = match cond.mode {
                    Mode::Single => (1..=n as u32).map(Some).collect(),
                    Mode::Whole => vec![None],
                };
                for item in units {
                    let item_label = item.map_or("whole".to_string(), |i| i.to_string());
                    let (content, item_order, max_tokens) = match item {
                        Some(i) => (
                            single_message(inst, i, cond.reversed, &cond.instruction)?,
                            None,
                            sec.max_tokens_single,
                        ),
                        None => {
                            let order = match cond.shuffle_seed {
                                Some(s) => shuffled_order(n, s),
                                None => (1..=n as u32).collect(),
                            };
                            (
                                whole_message(inst, &order, cond.reversed, &cond.instruction)?,
                                Some(order),
                                sec.max_tokens_whole,
                            )
                        }
                    };
                    let seed = sec
                        .send_seed
                        .then(|| request_seed(&inst.test, &cond.name, sample, &item_label));
                    let messages = [Message {
                        role: "user".into(),
                        content,
                    }];
                    let body = serde_json::to_string(&Body {
                        model,
                        messages: &messages,
                        temperature: cond.temperature,
                        max_tokens,
                        seed,
                        stream: false,
                    })
                    .expect("request body serializes");
                    out.push(Planned {
                        key: format!("{model}|{}|{}|{sample}|{item_label}", inst.test, cond.name),
                        columns: RequestColumns {
                            condition: cond.name.clone(),
                            sample,
                            test: inst.test.clone(),
                            mode: cond.mode.as_str().to_string(),
                            item,
                            item_order,
                            order_seed: cond.shuffle_seed,
                            option_order: if cond.reversed { "reversed" } else { "human" }
                                .to_string(),
                            instruction: cond.instruction.clone(),
                            temperature: cond.temperature,
                        },
                        max_tokens,
                        seed,
                        body_sha256: protospread_core::sha256_hex(body.as_bytes()),
                        body,
                        rank: out.len(),
                    });
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn default_conditions_make_the_study_design() {
        let sec = AdministerSection::default();
        let c = conditions(&sec.conditions, &sec).unwrap();
        let single: u32 = c
            .iter()
            .filter(|c| c.mode == Mode::Single)
            .map(|c| c.samples)
            .sum();
        let whole = c.iter().filter(|c| c.mode == Mode::Whole).count();
        assert_eq!((single, whole), (7, 6));
    }

    #[test]
    fn shuffle_is_pinned() {
        // Pinned so that a change of the documented algorithm cannot pass unnoticed.
        assert_eq!(shuffled_order(5, 101), shuffled_order(5, 101));
        let o = shuffled_order(50, 101);
        let mut s = o.clone();
        s.sort();
        assert_eq!(s, (1..=50).collect::<Vec<_>>());
        assert_ne!(o, shuffled_order(50, 102));
        // Independent re-derivation of the first steps of the documented algorithm.
        let mut st = 101u64;
        let mut v: Vec<u32> = (1..=3).collect();
        for i in (1..3usize).rev() {
            st = st.wrapping_add(0x9E3779B97F4A7C15);
            let mut z = st;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
            z ^= z >> 31;
            v.swap(i, (z % (i as u64 + 1)) as usize);
        }
        assert_eq!(shuffled_order(3, 101), v);
    }

    #[test]
    fn unknown_condition_is_refused() {
        let sec = AdministerSection::default();
        let e = conditions(&["S0".into(), "XX".into()], &sec)
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown condition 'XX'"), "{e}");
    }

    proptest! {
        #[test]
        fn shuffle_is_a_permutation(n in 1usize..200, seed in any::<u64>()) {
            let mut o = shuffled_order(n, seed);
            o.sort();
            prop_assert_eq!(o, (1..=n as u32).collect::<Vec<_>>());
        }
    }
}
