//! The recorded study (sources labelled `recorded`: replies of real models) in plain language
//! and one figure, generated from the rendered tables `reply_rules`,
//! `protocol_vs_sampling_by_rule` and `verdict_by_rule` (the same strings as their CSVs; their
//! rows labelled `recorded`, all of them at any size of the table): no number here is typed by
//! hand.

use crate::render::TextTable;
use crate::svg::{esc, text_width};
use crate::Rendered;
use std::collections::BTreeMap;
use std::fmt::Write;

/// Label of the sources this section is about.
const RECORDED: &str = "recorded";

/// The rows labelled `recorded` of table `name`, when the report has it.
fn find<'a>(tables: &'a [Rendered], name: &str) -> Option<&'a TextTable> {
    tables.iter().find(|t| t.name == name).map(|t| &t.recorded)
}

fn count(t: &str, v: &str) -> Result<u64, String> {
    v.parse()
        .map_err(|_| format!("table {t}: `{v}` is not a count"))
}

/// Readable replies of one model under one rule: (requests, readable) per mode.
#[derive(Debug, Default, Clone, Copy)]
struct Readable {
    single: (u64, u64),
    whole: (u64, u64),
}

/// Per (source, model): rule -> readable replies, rules in the table's order (strict first);
/// and per (source, model, rule): condition -> (requests, readable).
type PerModel = BTreeMap<(String, String), Vec<(String, Readable)>>;
type PerCondition = BTreeMap<(String, String), Vec<(String, Vec<(String, u64, u64)>)>>;

fn readable(tables: &[Rendered]) -> Result<(PerModel, PerCondition), String> {
    let mut per: PerModel = BTreeMap::new();
    let mut conds: PerCondition = BTreeMap::new();
    let Some(t) = find(tables, "reply_rules") else {
        return Ok((per, conds));
    };
    let [src, lab, model, cond, mode, rule, req, ok] = t.cols(
        "reply_rules",
        [
            "source",
            "label",
            "model",
            "condition",
            "mode",
            "rule",
            "requests",
            "readable_replies",
        ],
    )?;
    for r in t.rows.iter().filter(|r| r[lab] == RECORDED) {
        let key = (r[src].clone(), r[model].clone());
        let (n, k) = (
            count("reply_rules", &r[req])?,
            count("reply_rules", &r[ok])?,
        );
        let rules = per.entry(key.clone()).or_default();
        let i = match rules.iter().position(|(x, _)| *x == r[rule]) {
            Some(i) => i,
            None => {
                rules.push((r[rule].clone(), Readable::default()));
                rules.len() - 1
            }
        };
        let slot = if r[mode] == "whole" {
            &mut rules[i].1.whole
        } else {
            &mut rules[i].1.single
        };
        slot.0 += n;
        slot.1 += k;
        let by_rule = conds.entry(key).or_default();
        let j = match by_rule.iter().position(|(x, _)| *x == r[rule]) {
            Some(j) => j,
            None => {
                by_rule.push((r[rule].clone(), Vec::new()));
                by_rule.len() - 1
            }
        };
        by_rule[j].1.push((r[cond].clone(), n, k));
    }
    Ok((per, conds))
}

/// The plain-language paragraphs of the recorded study, one per recorded source (empty when
/// there is none): readable replies per model and rule, cells kept per rule x protocol set,
/// and the verdict lines.
pub(crate) fn paragraphs(tables: &[Rendered]) -> Result<Vec<String>, String> {
    let (per, _) = readable(tables)?;
    let mut by_source: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for ((source, model), rules) in &per {
        let parts: Vec<String> = rules
            .iter()
            .map(|(rule, x)| {
                format!(
                    "{rule} rule {} of {} single-item and {} of {} whole-test replies",
                    x.single.1, x.single.0, x.whole.1, x.whole.0
                )
            })
            .collect();
        by_source.entry(source).or_default().push(format!(
            "model {model}: readable under the {}",
            parts.join("; under the ")
        ));
    }
    let mut kept: BTreeMap<String, Vec<String>> = BTreeMap::new();
    if let Some(t) = find(tables, "protocol_vs_sampling_by_rule") {
        let [rule, set, src, lab, grp, cells, dropped] = t.cols(
            "protocol_vs_sampling_by_rule",
            [
                "rule",
                "protocol_set",
                "source",
                "label",
                "group",
                "cells",
                "dropped_cells",
            ],
        )?;
        for r in t.rows.iter().filter(|r| r[lab] == RECORDED) {
            let n = count("protocol_vs_sampling_by_rule", &r[cells])?;
            let d = count("protocol_vs_sampling_by_rule", &r[dropped])?;
            kept.entry(r[src].clone()).or_default().push(format!(
                "{} / {}: {n} of {} {} cells kept",
                r[rule],
                r[set],
                n + d,
                r[grp]
            ));
        }
    }
    let mut verdicts: BTreeMap<String, Vec<String>> = BTreeMap::new();
    if let Some(t) = find(tables, "verdict_by_rule") {
        let [rule, set, src, lab, crit, st] = t.cols(
            "verdict_by_rule",
            [
                "rule",
                "protocol_set",
                "source",
                "label",
                "criterion",
                "statement",
            ],
        )?;
        for r in t
            .rows
            .iter()
            .filter(|r| r[lab] == RECORDED && r[crit] == "verdict")
        {
            verdicts
                .entry(r[src].clone())
                .or_default()
                .push(format!("{} / {}: \"{}\"", r[rule], r[set], r[st]));
        }
    }
    let mut out = Vec::new();
    for (source, models) in by_source {
        let mut p = format!(
            "Source {source} (recorded, real model): {}.",
            models.join("; ")
        );
        if let Some(k) = kept.get(source) {
            let _ = write!(
                p,
                " Cells kept per reply rule / protocol set: {}.",
                k.join("; ")
            );
        }
        if let Some(v) = verdicts.get(source) {
            let _ = write!(p, " Verdict lines: {}.", v.join("; "));
        }
        out.push(p);
    }
    Ok(out)
}

/// The text that introduces the section (no figures in it).
pub(crate) const INTRO: &str = "Generated from the tables reply_rules, protocol_vs_sampling_by_rule and verdict_by_rule. A reply is readable when the rule reads every item it should answer (strict = the study's rule; lenient = a leading option number, at most one separator and a label of letters; docs/stored-answers.md). protocol_set primary = the study's ten setups (protocol_conditions); secondary_single_item = the declared SECONDARY analysis over the single-item setups only (secondary_protocol_conditions; docs/statistics.md), which a model that cannot answer a whole test in one reply can still enter. A cell is dropped when an administration it needs is incomplete (an item of the scale without a readable answer) or missing.";

/// One SVG per recorded model: the share of readable replies per condition, one bar per rule
/// (from `reply_rules`).
pub(crate) fn figures(tables: &[Rendered]) -> Result<Vec<String>, String> {
    let (_, conds) = readable(tables)?;
    let palette = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"];
    let mut out = Vec::new();
    for ((source, model), rules) in &conds {
        let mut names: Vec<&str> = Vec::new();
        for (_, cs) in rules {
            for (c, _, _) in cs {
                if !names.contains(&c.as_str()) {
                    names.push(c);
                }
            }
        }
        let (ml, mt, mb, bar) = (44.0, 64.0, 36.0, 10.0);
        // At least 560 wide for the titles; the conditions share the plot width.
        let pw = (28.0 * names.len().max(1) as f64).max(500.0);
        let group = pw / names.len().max(1) as f64;
        let gap = group - bar * rules.len() as f64;
        let subtitle = format!(
            "source {source} (recorded): share of replies readable per condition, by reply rule"
        );
        // Wide enough for the title lines and the legend.
        let w = (ml + pw + 16.0)
            .max(ml + text_width(&subtitle, "a") + 10.0)
            .max(ml + text_width(model, "t") + 10.0)
            .max(
                rules
                    .iter()
                    .enumerate()
                    .map(|(i, (r, _))| {
                        ml + 150.0 * i as f64 + 14.0 + text_width(&format!("{r} rule"), "a") + 10.0
                    })
                    .fold(0.0, f64::max),
            )
            .ceil();
        let ph = 160.0;
        let h = mt + ph + mb;
        let y = |v: f64| mt + ph - v * ph;
        let mut s = String::new();
        let _ = write!(
            s,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w:.0}\" height=\"{h:.0}\" viewBox=\"0 0 {w:.0} {h:.0}\" role=\"img\" aria-label=\"readable replies per condition and reply rule, {}\">",
            esc(model)
        );
        let _ = write!(
            s,
            "<text class=\"t\" x=\"{ml}\" y=\"16\">{}</text><text class=\"a\" x=\"{ml}\" y=\"32\">{}</text>",
            esc(model),
            esc(&subtitle)
        );
        for (i, (rule, _)) in rules.iter().enumerate() {
            let x = ml + 150.0 * i as f64;
            let _ = write!(
                s,
                "<rect x=\"{x:.2}\" y=\"40\" width=\"10\" height=\"10\" fill=\"{}\"/><text class=\"a\" x=\"{:.2}\" y=\"49\">{} rule</text>",
                palette[i % palette.len()],
                x + 14.0,
                esc(rule)
            );
        }
        for v in [0.0, 0.5, 1.0] {
            let _ = write!(
                s,
                "<line x1=\"{ml}\" x2=\"{:.2}\" y1=\"{:.2}\" y2=\"{:.2}\" stroke=\"#ddd\"/><text class=\"a\" x=\"{:.2}\" y=\"{:.2}\" text-anchor=\"end\">{:.0}%</text>",
                ml + pw,
                y(v),
                y(v),
                ml - 4.0,
                y(v) + 4.0,
                v * 100.0
            );
        }
        for (ci, c) in names.iter().enumerate() {
            let x0 = ml + group * ci as f64 + gap / 2.0;
            for (ri, (rule, cs)) in rules.iter().enumerate() {
                let Some((_, n, k)) = cs.iter().find(|(x, _, _)| x == c) else {
                    continue;
                };
                let share = if *n == 0 { 0.0 } else { *k as f64 / *n as f64 };
                let _ = write!(
                    s,
                    "<rect x=\"{:.2}\" y=\"{:.2}\" width=\"{bar}\" height=\"{:.2}\" fill=\"{}\"><title>{} {} rule: {k} of {n} readable</title></rect>",
                    x0 + bar * ri as f64,
                    y(share),
                    share * ph,
                    palette[ri % palette.len()],
                    esc(c),
                    esc(rule)
                );
            }
            let _ = write!(
                s,
                "<text class=\"a\" x=\"{:.2}\" y=\"{:.2}\" text-anchor=\"middle\">{}</text>",
                x0 + bar * rules.len() as f64 / 2.0,
                mt + ph + 14.0,
                esc(c)
            );
        }
        s.push_str("</svg>");
        out.push(s);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::test_tables::table;

    fn tables() -> Vec<Rendered> {
        let rr = [
            "source",
            "label",
            "model",
            "condition",
            "mode",
            "rule",
            "requests",
            "readable_replies",
        ];
        let pvs = [
            "rule",
            "protocol_set",
            "source",
            "label",
            "group",
            "cells",
            "dropped_cells",
        ];
        let v = [
            "rule",
            "protocol_set",
            "source",
            "label",
            "criterion",
            "statement",
        ];
        vec![
            table(
                "reply_rules",
                &rr,
                &[
                    &["rec", "recorded", "m", "S0", "single", "strict", "50", "2"],
                    &[
                        "rec", "recorded", "m", "S0", "single", "lenient", "50", "40",
                    ],
                    &["rec", "recorded", "m", "B0", "whole", "strict", "1", "0"],
                    &["rec", "recorded", "m", "B0", "whole", "lenient", "1", "1"],
                    &["sim", "simulated", "s", "S0", "single", "strict", "9", "9"],
                ],
            ),
            table(
                "protocol_vs_sampling_by_rule",
                &pvs,
                &[
                    &[
                        "strict",
                        "primary",
                        "rec",
                        "recorded",
                        "arm=local",
                        "0",
                        "5",
                    ],
                    &[
                        "lenient",
                        "secondary_single_item",
                        "rec",
                        "recorded",
                        "arm=local",
                        "4",
                        "1",
                    ],
                ],
            ),
            table(
                "verdict_by_rule",
                &v,
                &[
                    &["strict", "primary", "rec", "recorded", "median_ratio", "x"],
                    &[
                        "strict",
                        "primary",
                        "rec",
                        "recorded",
                        "verdict",
                        "no verdict: why",
                    ],
                ],
            ),
        ]
    }

    #[test]
    fn paragraph_is_built_from_the_tables() {
        let p = paragraphs(&tables()).unwrap();
        assert_eq!(
            p,
            vec!["Source rec (recorded, real model): model m: readable under the strict rule 2 of 50 single-item and 0 of 1 whole-test replies; under the lenient rule 40 of 50 single-item and 1 of 1 whole-test replies. Cells kept per reply rule / protocol set: strict / primary: 0 of 5 arm=local cells kept; lenient / secondary_single_item: 4 of 5 arm=local cells kept. Verdict lines: strict / primary: \"no verdict: why\"."]
        );
        let mut bad = tables();
        bad[0].recorded.rows[0][6] = "x".into();
        assert!(paragraphs(&bad).unwrap_err().contains("not a count"));
    }

    #[test]
    fn figure_draws_one_bar_per_condition_and_rule() {
        let f = figures(&tables()).unwrap();
        assert_eq!(f.len(), 1, "only the recorded model");
        assert_eq!(f[0].matches("<title>").count(), 4);
        assert!(f[0].contains("<title>S0 lenient rule: 40 of 50 readable</title>"));
        assert!(f[0].contains("<title>B0 strict rule: 0 of 1 readable</title>"));
    }
}
