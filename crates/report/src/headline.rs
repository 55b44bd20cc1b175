//! The headline: per source, the verdict in words with the figures it rests on (share of
//! compared cells with protocol SD > sampling SD, median ratio, their bootstrap intervals and
//! the null-expected share, the cells the permutation tests flag), read from the `verdict`,
//! `protocol_vs_sampling`, `headline_interval` and `cell_tests_by_group` tables; nothing is
//! computed anew and every number is the string of its CSV.

use crate::Rendered;
use std::collections::BTreeMap;

/// One source's headline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Headline {
    pub(crate) source: String,
    pub(crate) label: String,
    /// The verdict line's statement.
    pub(crate) verdict: String,
    /// The share criterion: value (empty when no cell is compared) and threshold.
    pub(crate) share: (String, String),
    /// Cells with protocol SD > sampling SD and cells compared, from `protocol_vs_sampling`.
    pub(crate) counts: Option<(String, String)>,
    /// The median-ratio criterion: value (empty when none) and threshold.
    pub(crate) median_ratio: (String, String),
    /// The 95% bootstrap intervals of the share and of the median ratio and the share
    /// expected under the permutation null, in words, from `headline_interval`.
    pub(crate) interval: Option<String>,
    /// Cells tested, with p <= 0.05 and rejected by Benjamini-Hochberg, from
    /// `cell_tests_by_group` (the headline arm's group).
    pub(crate) tests: Option<(String, String, String)>,
}

impl Headline {
    /// The headline as one paragraph of plain text.
    pub(crate) fn sentence(&self) -> String {
        let value = |v: &str| {
            if v.is_empty() {
                "none".to_string()
            } else {
                v.to_string()
            }
        };
        let counts = match &self.counts {
            Some((above, compared)) => format!("{above} of {compared} compared cells, "),
            None => String::new(),
        };
        let tests = match &self.tests {
            Some((cells, p, bh)) => format!(
                " Exact permutation tests: {p} of {cells} tested cells with p <= 0.05, {bh} after Benjamini-Hochberg at q = 0.05."
            ),
            None => String::new(),
        };
        format!(
            "{} ({}): {}. Share of cells with protocol SD > sampling SD: {} ({counts}threshold {}). Median ratio protocol SD / sampling SD: {} (threshold {}). Interval: {}.{tests}",
            self.source,
            self.label,
            self.verdict,
            value(&self.share.0),
            self.share.1,
            value(&self.median_ratio.0),
            self.median_ratio.1,
            self.interval.as_deref().unwrap_or("none computed"),
        )
    }
}

/// The headline of every source of the `verdict` table, in its order (empty without one).
pub(crate) fn headlines(tables: &[Rendered]) -> Result<Vec<Headline>, String> {
    let Some(v) = tables.iter().find(|t| t.name == "verdict") else {
        return Ok(Vec::new());
    };
    let t = &v.head;
    let [src, lab, arm, crit, val, thr, st] = t.cols(
        "verdict",
        [
            "source",
            "label",
            "arm",
            "criterion",
            "value",
            "threshold",
            "statement",
        ],
    )?;
    // (source, group) -> (protocol_gt_sampling, compared_cells)
    let mut counts: BTreeMap<(&str, &str), (String, String)> = BTreeMap::new();
    if let Some(p) = tables.iter().find(|t| t.name == "protocol_vs_sampling") {
        let p = &p.head;
        let [s, g, above, compared] = p.cols(
            "protocol_vs_sampling",
            ["source", "group", "protocol_gt_sampling", "compared_cells"],
        )?;
        for r in &p.rows {
            counts.insert(
                (r[s].as_str(), r[g].as_str()),
                (r[above].clone(), r[compared].clone()),
            );
        }
    }
    let intervals = intervals(tables)?;
    // (source, group) -> (cells, p <= 0.05, BH rejected)
    let mut tested: BTreeMap<(&str, &str), (String, String, String)> = BTreeMap::new();
    if let Some(p) = tables.iter().find(|t| t.name == "cell_tests_by_group") {
        let p = &p.head;
        let [s, g, n, le, bh] = p.cols(
            "cell_tests_by_group",
            ["source", "group", "cells", "p_le_0_05", "bh_rejected"],
        )?;
        for r in &p.rows {
            tested.insert(
                (r[s].as_str(), r[g].as_str()),
                (r[n].clone(), r[le].clone(), r[bh].clone()),
            );
        }
    }
    let mut out: Vec<Headline> = Vec::new();
    for r in &t.rows {
        let at = match out
            .iter()
            .position(|h| h.source == r[src] && h.label == r[lab])
        {
            Some(i) => i,
            None => {
                out.push(Headline {
                    source: r[src].clone(),
                    label: r[lab].clone(),
                    verdict: String::new(),
                    share: Default::default(),
                    counts: counts
                        .get(&(r[src].as_str(), format!("arm={}", r[arm]).as_str()))
                        .cloned(),
                    median_ratio: Default::default(),
                    interval: intervals.get(&(r[src].clone(), r[arm].clone())).cloned(),
                    tests: tested
                        .get(&(r[src].as_str(), format!("arm={}", r[arm]).as_str()))
                        .cloned(),
                });
                out.len() - 1
            }
        };
        let h = &mut out[at];
        match r[crit].as_str() {
            "verdict" => h.verdict = r[st].clone(),
            "share_protocol_gt_sampling" => h.share = (r[val].clone(), r[thr].clone()),
            "median_ratio" => h.median_ratio = (r[val].clone(), r[thr].clone()),
            _ => {}
        }
    }
    Ok(out)
}

/// Per (source, arm) of `headline_interval`, its intervals in words; a source whose share has
/// no interval (no compared cell) has none.
fn intervals(tables: &[Rendered]) -> Result<BTreeMap<(String, String), String>, String> {
    let mut out = BTreeMap::new();
    let Some(t) = tables.iter().find(|t| t.name == "headline_interval") else {
        return Ok(out);
    };
    let t = &t.head;
    let [src, arm, lo, hi, rlo, rhi, null, reps, models] = t.cols(
        "headline_interval",
        [
            "source",
            "arm",
            "share_low",
            "share_high",
            "median_ratio_low",
            "median_ratio_high",
            "null_expected_share",
            "replicates",
            "models",
        ],
    )?;
    for r in &t.rows {
        if r[lo].is_empty() {
            continue;
        }
        let ratio = if r[rlo].is_empty() {
            "none".to_string()
        } else {
            format!("{} to {}", r[rlo], r[rhi])
        };
        let null = if r[null].is_empty() { "none" } else { &r[null] };
        out.insert(
            (r[src].clone(), r[arm].clone()),
            format!(
                "95% cluster-bootstrap interval over {} {} ({} replicates): share {} to {}, median ratio {ratio}; share expected if setups and samples were exchangeable: {null}",
                r[models],
                if r[models] == "1" { "model" } else { "models" },
                r[reps],
                r[lo],
                r[hi]
            ),
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_tables::table;

    #[test]
    fn headline_in_words_from_the_verdict_and_group_tables() {
        let h = [
            "source",
            "label",
            "arm",
            "criterion",
            "value",
            "threshold",
            "passed",
            "statement",
        ];
        let verdict = table(
            "verdict",
            &h,
            &[
                &[
                    "rec",
                    "recorded",
                    "local",
                    "share_protocol_gt_sampling",
                    "",
                    "0.800000",
                    "",
                    "s",
                ],
                &[
                    "rec",
                    "recorded",
                    "local",
                    "median_ratio",
                    "",
                    "2.000000",
                    "",
                    "m",
                ],
                &[
                    "rec",
                    "recorded",
                    "local",
                    "verdict",
                    "",
                    "",
                    "",
                    "no kept arm=local cells: no verdict",
                ],
                &[
                    "sim",
                    "simulated",
                    "api",
                    "share_protocol_gt_sampling",
                    "0.873518",
                    "0.800000",
                    "true",
                    "s",
                ],
                &[
                    "sim",
                    "simulated",
                    "api",
                    "median_ratio",
                    "2.949576",
                    "2.000000",
                    "true",
                    "m",
                ],
                &[
                    "sim",
                    "simulated",
                    "api",
                    "verdict",
                    "",
                    "",
                    "true",
                    "arm=api: protocol spread exceeds sampling noise",
                ],
            ],
        );
        let groups = table(
            "protocol_vs_sampling",
            &["source", "group", "compared_cells", "protocol_gt_sampling"],
            &[
                &["sim", "arm=api", "253", "221"],
                &["sim", "arm=cli", "0", "0"],
            ],
        );
        let hs = headlines(&[verdict.clone(), groups]).unwrap();
        assert_eq!(hs.len(), 2);
        assert_eq!(
            hs[1].sentence(),
            "sim (simulated): arm=api: protocol spread exceeds sampling noise. Share of cells with protocol SD > sampling SD: 0.873518 (221 of 253 compared cells, threshold 0.800000). Median ratio protocol SD / sampling SD: 2.949576 (threshold 2.000000). Interval: none computed."
        );
        assert_eq!(
            hs[0].sentence(),
            "rec (recorded): no kept arm=local cells: no verdict. Share of cells with protocol SD > sampling SD: none (threshold 0.800000). Median ratio protocol SD / sampling SD: none (threshold 2.000000). Interval: none computed."
        );
        let mut with = hs[1].clone();
        with.interval = Some("share 0.80 to 0.92 (95%)".into());
        assert!(with
            .sentence()
            .ends_with("Interval: share 0.80 to 0.92 (95%)."));
        let interval = table(
            "headline_interval",
            &[
                "source",
                "arm",
                "models",
                "share_low",
                "share_high",
                "median_ratio_low",
                "median_ratio_high",
                "null_expected_share",
                "replicates",
            ],
            &[
                &["rec", "local", "0", "", "", "", "", "", "2000"],
                &[
                    "sim", "api", "5", "0.800000", "0.920000", "2.5", "3.1", "0.55", "2000",
                ],
            ],
        );
        let tested = table(
            "cell_tests_by_group",
            &["source", "group", "cells", "p_le_0_05", "bh_rejected"],
            &[&["sim", "arm=api", "253", "200", "190"]],
        );
        let hs = headlines(&[verdict.clone(), interval, tested]).unwrap();
        assert!(hs[1].sentence().ends_with("Interval: 95% cluster-bootstrap interval over 5 models (2000 replicates): share 0.800000 to 0.920000, median ratio 2.5 to 3.1; share expected if setups and samples were exchangeable: 0.55. Exact permutation tests: 200 of 253 tested cells with p <= 0.05, 190 after Benjamini-Hochberg at q = 0.05."), "{}", hs[1].sentence());
        assert!(hs[0].sentence().ends_with("Interval: none computed."));
        let mut bad = verdict;
        bad.head.header[3] = "what".into();
        assert!(headlines(&[bad]).unwrap_err().contains("`criterion`"));
    }
}
