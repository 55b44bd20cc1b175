//! What the parity part of the score stage computes ([`ParityRun`]), apart from the per-row
//! tables, and its JSON form.

use crate::norms::Norms;
use crate::parity::{Allowlist, Category, MutationResult, ParitySummary, RowClass};
use std::collections::BTreeMap;

/// Which rows entered the norms of one test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NormRows {
    /// Rows reproduced exactly by the current key.
    pub reproduced: usize,
    /// Of those, rows whose answer vector repeats that of a lower id (left out).
    pub duplicates: usize,
    /// Rows used: reproduced minus duplicates.
    pub used: usize,
}

/// Everything the parity part computes, apart from the per-row tables (which stream to their
/// files, see [`run_stage`]).
#[derive(Debug, Clone)]
pub struct ParityRun {
    /// Rows per instrument and (category, reason).
    pub summary: ParitySummary,
    /// Every unexplained row (allow-listed or not), sorted by (instrument, id).
    pub unexplained: Vec<RowClass>,
    /// The mutation sweep.
    pub sweep: Vec<MutationResult>,
    /// Human norms.
    pub norms: Norms,
    /// Norm rows per instrument.
    pub norm_rows: BTreeMap<String, NormRows>,
}

impl ParityRun {
    /// Items of the sweep with a change (weight doubled or reverse flipped) that breaks no
    /// reproduced row: a change the parity check would not catch.
    pub fn uncaught_mutations(&self) -> usize {
        self.sweep
            .iter()
            .filter(|m| m.weight_broken == 0 || m.reverse_broken == 0)
            .count()
    }

    /// The parity part of `score --json`: per instrument its rows, reproduced, set aside by
    /// reason and unexplained (each unexplained row with whether `allowlist` lists it); the
    /// unexplained rows not in the allow-list, stale allow-list entries, the mutation sweep
    /// and the rows of the norms.
    pub fn to_json(&self, allowlist: &Allowlist) -> serde_json::Value {
        let instruments: Vec<_> = self
            .summary
            .iter()
            .map(|(name, m)| {
                let count = |c: Category| {
                    m.iter()
                        .filter(|((k, _), _)| *k == c)
                        .map(|(_, n)| n)
                        .sum::<usize>()
                };
                let set_aside: Vec<_> = m
                    .iter()
                    .filter(|((k, _), _)| *k == Category::SetAside)
                    .map(|((_, r), n)| serde_json::json!({"reason": r, "rows": n}))
                    .collect();
                let unexplained: Vec<_> = self
                    .unexplained
                    .iter()
                    .filter(|c| &c.instrument == name)
                    .map(
                        |c| serde_json::json!({"id": c.id, "allowlisted": c.allowlisted.is_some()}),
                    )
                    .collect();
                serde_json::json!({
                    "instrument": name,
                    "rows": m.values().sum::<usize>(),
                    "reproduced": count(Category::Reproduced),
                    "set_aside": set_aside,
                    "unexplained": count(Category::Unexplained),
                    "unexplained_rows": unexplained,
                })
            })
            .collect();
        let stale = allowlist.stale(&self.unexplained);
        serde_json::json!({
            "instruments": instruments,
            "unexplained_not_allowlisted": not_allowlisted(&self.unexplained).len(),
            "stale_allowlist_entries": stale.iter().map(|(i, id)| format!("{i}:{id}")).collect::<Vec<_>>(),
            "mutation_sweep": {
                "changes": self.sweep.len() * 2,
                "uncaught": self.uncaught_mutations(),
            },
            "norms": self.norm_rows.iter().map(|(t, n)| serde_json::json!({"test": t, "reproduced": n.reproduced, "duplicates": n.duplicates, "used": n.used})).collect::<Vec<_>>(),
        })
    }
}

/// Unexplained rows that are not in the allow-list (of `classes`, e.g.
/// [`ParityRun::unexplained`]).
pub fn not_allowlisted(classes: &[RowClass]) -> Vec<&RowClass> {
    classes
        .iter()
        .filter(|c| c.category == Category::Unexplained && c.allowlisted.is_none())
        .collect()
}
