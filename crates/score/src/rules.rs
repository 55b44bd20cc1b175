//! The reply rules (docs/stored-answers.md, "Which replies count as an answer"): the strict
//! rule, which is the study's rule, and one lenient rule reported beside it ([`ReplyRule`]).
//!
//! ## The strict rule
//!
//! Single item: after removing leading and trailing whitespace (Unicode `White_Space`), the
//! reply must be one or more ASCII digits, optionally followed by exactly one `.` or `)`.
//! Nothing else is an answer: no words, no sign, no second number, no markup, no non-ASCII
//! digits. A reply of that shape whose number is 1..=5 is `ok`; any other number is
//! `out_of_range`; every other reply is `not_a_number`.
//!
//! Whole test: the reply is read line by line. An *answer line* is, after trimming, a shown
//! position (ASCII digits), optional spaces or tabs, one separator out of `:` `.` `)` `=` `-`,
//! and then the rest of the line, which is read by the single-item rule. Lines that do not
//! start that way are prose and are ignored, as are answer lines whose position is not
//! 1..=n. A position with no answer line is `missing_in_whole`; a position with two or more
//! answer lines is `duplicate_in_whole` (even if they agree).
//!
//! ## The lenient rule
//!
//! Single item: after removing leading and trailing whitespace, the reply must start with one
//! or more ASCII digits (the option number); then may come spaces or tabs and at most one
//! separator out of `.` `)` `:` `-`; then, optionally, a label: letters (Unicode `Alphabetic`),
//! spaces and tabs only, followed by nothing but `.`, `!` and whitespace. So `4. Moderately
//! Accurate`, `4)`, `4: Accurate`, `4 - Moderately Accurate` and `4 Very Accurate!` are read as
//! option 4; `4 or 5`, `4/5`, `4, 5`, `4.0`, `(4)`, `Answer: 4` and a `4` followed by a second
//! line are not. The label is **not** checked against the option the number names (the
//! stored-answer format does not carry the option labels that were shown), so `4. Very
//! Inaccurate` is read as 4. Number ranges and statuses are those of the strict rule.
//!
//! Whole test: the answer lines of the strict rule, with the rest of each line read by the
//! lenient single-item rule (so `1: 4. Moderately Accurate` answers position 1 with option 4).
//! Everything else (prose, missing and duplicate positions) is as under the strict rule.
//!
//! Every reply the strict rule reads is read identically by the lenient rule.
//!
//! Options are shown numbered 1..=5. With `option_order = human`, option k is human value
//! k-1; with `reversed`, option k is human value 5-k.

use protospread_format::OPTIONS;

/// Outcome of reading one item's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Status {
    /// A readable answer within the scale.
    Ok,
    /// The reply holds no number.
    NotANumber,
    /// The number is outside the option range.
    OutOfRange,
    /// The whole-test reply has no answer for this item.
    MissingInWhole,
    /// The whole-test reply answers this item twice.
    DuplicateInWhole,
    /// The request failed; there is no reply.
    RequestFailed,
}

impl Status {
    /// Every status in a fixed order.
    pub const ALL: [Status; 6] = [
        Status::Ok,
        Status::NotANumber,
        Status::OutOfRange,
        Status::MissingInWhole,
        Status::DuplicateInWhole,
        Status::RequestFailed,
    ];
    /// The name written to `parsed_answers.parquet`.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::NotANumber => "not_a_number",
            Status::OutOfRange => "out_of_range",
            Status::MissingInWhole => "missing_in_whole",
            Status::DuplicateInWhole => "duplicate_in_whole",
            Status::RequestFailed => "request_failed",
        }
    }
}

/// What was read for one item: the number as replied (when the reply had the answer shape)
/// and the status. `option` is `Some` for `ok` and for `out_of_range` (saturated at
/// `i32::MAX` for absurdly long numbers), `None` otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    /// The option number read, if any.
    pub option: Option<i32>,
    /// How the reply was read.
    pub status: Status,
}

impl Reading {
    const fn status(status: Status) -> Self {
        Reading {
            option: None,
            status,
        }
    }
}

/// A reply rule: which reply texts count as an answer. [`ReplyRule::Strict`] is the study's
/// rule and the default; [`ReplyRule::Lenient`] is reported beside it to show how much the
/// figures depend on parsing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ReplyRule {
    /// [`read_single`] / [`read_whole`].
    Strict,
    /// [`read_single_lenient`] / [`read_whole_lenient`].
    Lenient,
}

impl ReplyRule {
    /// Every rule, strict first.
    pub const ALL: [ReplyRule; 2] = [ReplyRule::Strict, ReplyRule::Lenient];

    /// The name used in pipeline.toml (`[score] reply_rules`) and in the tables.
    pub fn as_str(self) -> &'static str {
        match self {
            ReplyRule::Strict => "strict",
            ReplyRule::Lenient => "lenient",
        }
    }

    /// The rule named `name` (exact, lower case), if any.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == name)
    }

    /// Read a single-item reply by this rule.
    pub fn read_single(self, reply: &str) -> Reading {
        match self {
            ReplyRule::Strict => read_single(reply),
            ReplyRule::Lenient => read_single_lenient(reply),
        }
    }

    /// Read a whole-test reply showing `n` items by this rule.
    pub fn read_whole(self, reply: &str, n: usize) -> Vec<Reading> {
        match self {
            ReplyRule::Strict => read_whole(reply, n),
            ReplyRule::Lenient => read_whole_lenient(reply, n),
        }
    }
}

/// The reading of an option number that the rule accepted: `ok` in 1..=5, else
/// `out_of_range` (saturated at `i32::MAX`).
fn number(digits: &str) -> Reading {
    let n: i32 = match digits.as_bytes() {
        [d] if d.is_ascii_digit() => i32::from(d - b'0'),
        _ => digits.parse().unwrap_or(i32::MAX),
    };
    let status = if (1..=OPTIONS as i32).contains(&n) {
        Status::Ok
    } else {
        Status::OutOfRange
    };
    Reading {
        option: Some(n),
        status,
    }
}

/// Read a single-item reply by the strict rule.
pub fn read_single(reply: &str) -> Reading {
    let t = reply.trim();
    let body = t
        .strip_suffix('.')
        .or_else(|| t.strip_suffix(')'))
        .unwrap_or(t);
    if body.is_empty() || !body.bytes().all(|b| b.is_ascii_digit()) {
        return Reading::status(Status::NotANumber);
    }
    number(body)
}

/// Read a single-item reply by the lenient rule: a leading option number, at most one
/// separator, and at most a label of letters (not checked against the option).
pub fn read_single_lenient(reply: &str) -> Reading {
    let t = reply.trim();
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return Reading::status(Status::NotANumber);
    }
    let rest = t[digits..].trim_start_matches([' ', '\t']);
    let rest = rest
        .strip_prefix(['.', ')', ':', '-'])
        .unwrap_or(rest)
        .trim_end_matches(|c: char| c == '.' || c == '!' || c.is_whitespace());
    if !rest
        .chars()
        .all(|c| c.is_alphabetic() || c == ' ' || c == '\t')
    {
        return Reading::status(Status::NotANumber);
    }
    number(&t[..digits])
}

/// If `line` is an answer line, its shown position and the rest after the separator.
fn answer_line(line: &str) -> Option<(u64, &str)> {
    let t = line.trim();
    let digits = t.bytes().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 {
        return None;
    }
    let pos: u64 = t[..digits].parse().unwrap_or(u64::MAX);
    let rest = t[digits..].trim_start_matches([' ', '\t']);
    let mut chars = rest.chars();
    match chars.next() {
        Some(':' | '.' | ')' | '=' | '-') => Some((pos, chars.as_str())),
        _ => None,
    }
}

/// Read a whole-test reply showing `n` items by the strict rule: one [`Reading`] per shown
/// position 1..=n (index 0 is position 1).
pub fn read_whole(reply: &str, n: usize) -> Vec<Reading> {
    whole(reply, n, read_single)
}

/// Read a whole-test reply showing `n` items by the lenient rule: the strict rule's answer
/// lines, each line's answer read by [`read_single_lenient`].
pub fn read_whole_lenient(reply: &str, n: usize) -> Vec<Reading> {
    whole(reply, n, read_single_lenient)
}

fn whole(reply: &str, n: usize, read: fn(&str) -> Reading) -> Vec<Reading> {
    // Per shown position, whether an answer line was seen and the reading so far: missing
    // until the first line, that line's reading, a duplicate from the second line on. One
    // vector per reply, not one per position (the parsing ran once per request per rule).
    let mut found = vec![(false, Reading::status(Status::MissingInWhole)); n];
    for line in reply.lines() {
        if let Some((pos, rest)) = answer_line(line) {
            if pos >= 1 && pos <= n as u64 {
                let (seen, reading) = &mut found[(pos - 1) as usize];
                *reading = if *seen {
                    Reading::status(Status::DuplicateInWhole)
                } else {
                    read(rest)
                };
                *seen = true;
            }
        }
    }
    found.into_iter().map(|(_, r)| r).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ok(n: i32) -> Reading {
        Reading {
            option: Some(n),
            status: Status::Ok,
        }
    }
    fn st(s: Status) -> Reading {
        Reading::status(s)
    }

    #[test]
    fn rule_names_round_trip_and_match_the_configuration() {
        for r in ReplyRule::ALL {
            assert_eq!(ReplyRule::parse(r.as_str()), Some(r));
        }
        assert_eq!(ReplyRule::parse("Strict"), None);
        assert_eq!(
            ReplyRule::ALL.map(ReplyRule::as_str),
            protospread_core::REPLY_RULES
        );
    }

    #[test]
    fn whole_basic_shapes() {
        let r = read_whole("Here you go:\n1: 4\n2. 3\n3) 5\n\nThanks!", 3);
        assert_eq!(r, vec![ok(4), ok(3), ok(5)]);
        let r = read_whole("2 - 1\n1 = 2", 3);
        assert_eq!(r, vec![ok(2), ok(1), st(Status::MissingInWhole)]);
        let r = read_whole("1: 4\n1: 4\n2: x\n3: 9", 3);
        assert_eq!(
            r,
            vec![
                st(Status::DuplicateInWhole),
                st(Status::NotANumber),
                Reading {
                    option: Some(9),
                    status: Status::OutOfRange
                }
            ]
        );
    }

    /// Independent statement of the single-item rule, written with chars rather than
    /// slicing: trim, drop one trailing `.` or `)`, require non-empty ASCII digits.
    fn rule(s: &str) -> Option<i64> {
        let mut cs: Vec<char> = s.trim().chars().collect();
        if matches!(cs.last(), Some('.') | Some(')')) {
            cs.pop();
        }
        if cs.is_empty() || cs.iter().any(|c| !c.is_ascii_digit()) {
            return None;
        }
        Some(cs.iter().fold(0i64, |a, c| {
            (a * 10 + (*c as i64 - '0' as i64)).min(1 << 40)
        }))
    }

    proptest! {
        #[test]
        fn any_in_range_bare_number_is_read(
            n in 1i32..=5,
            zeros in 0usize..3,
            pre in "[ \t\n\r\u{a0}\u{2003}]{0,4}",
            post in "[ \t\n\r\u{a0}]{0,4}",
            suffix in prop::sample::select(vec!["", ".", ")"]),
        ) {
            let s = format!("{pre}{}{n}{suffix}{post}", "0".repeat(zeros));
            prop_assert_eq!(read_single(&s), ok(n));
        }

        #[test]
        fn nothing_outside_the_rule_is_read(s in "\\PC{0,12}|[0-9 .):a-z\u{0663}\u{ff13}-]{0,8}") {
            let got = read_single(&s);
            match rule(&s) {
                Some(v) if (1..=5).contains(&v) => prop_assert_eq!(got, ok(v as i32)),
                Some(_) => prop_assert_eq!(got.status, Status::OutOfRange),
                None => prop_assert_eq!(got, st(Status::NotANumber)),
            }
        }

        #[test]
        fn decorated_numbers_are_never_read(
            n in 1i32..=5,
            deco in prop::sample::select(vec![
                ("Answer: ", ""), ("", " - Agree"), ("(", ")"), ("**", "**"), ("", "/5"),
                ("", " or 4"), ("-", ""), ("+", ""), ("", ".0"), ("", ".."), ("'", "'"),
                ("Option ", ""), ("", " "), ("", "!"), ("#", ""),
            ]),
        ) {
            let s = format!("{}{n}{}", deco.0, deco.1);
            let r = read_single(&s);
            if deco == ("", " ") {
                prop_assert_eq!(r, ok(n));
            } else {
                prop_assert_eq!(r, st(Status::NotANumber));
            }
        }

        #[test]
        fn strict_readable_is_lenient_readable_alike(s in "\\PC{0,12}|[0-9 .):a-z\u{0663}\u{ff13}\t\n-]{0,10}") {
            let strict = read_single(&s);
            let lenient = read_single_lenient(&s);
            if strict.status != Status::NotANumber {
                prop_assert_eq!(lenient, strict);
            }
            let n = 3;
            let text = format!("1: {s}\n2: 4\n");
            let (ws, wl) = (read_whole(&text, n), read_whole_lenient(&text, n));
            for (a, b) in ws.iter().zip(&wl) {
                if a.status == Status::Ok {
                    prop_assert_eq!(a, b);
                }
            }
        }

        #[test]
        fn lenient_never_reads_an_out_of_range_leading_number(
            n in prop_oneof![0u64..1, 6u64..1_000_000],
            zeros in 0usize..3,
            pre in "[ \t\n\u{a0}]{0,3}",
            // A tail starting with a digit would make another leading number.
            tail in "([^0-9]\\PC{0,9})?",
        ) {
            let s = format!("{pre}{}{n}{tail}", "0".repeat(zeros));
            let got = read_single_lenient(&s);
            prop_assert_ne!(got.status, Status::Ok, "{:?}", s);
            if got.status == Status::OutOfRange {
                prop_assert_eq!(got.option, Some(n as i32));
            }
        }

        #[test]
        fn lenient_reads_an_in_range_number_with_any_label(
            n in 1i32..=5,
            pre in "[ \t\n\u{a0}]{0,3}",
            sep in prop::sample::select(vec!["", ".", ")", ":", "-", " .", " -", " :"]),
            label in "( [A-Za-zé]{1,8}){0,4}",
            end in prop::sample::select(vec!["", ".", "!", " ", ".\n", "!!"]),
        ) {
            let s = format!("{pre}{n}{sep}{label}{end}");
            prop_assert_eq!(read_single_lenient(&s), ok(n), "{:?}", s);
        }

        #[test]
        fn whole_reply_roundtrip(vals in prop::collection::vec(1i32..=5, 1..60), seed in 0u64..1000) {
            // Lines in a scrambled order with prose around them read back by position.
            let n = vals.len();
            let mut idx: Vec<usize> = (0..n).collect();
            let k = (seed as usize) % n;
            idx.rotate_left(k);
            let mut text = String::from("Sure, here are my answers.\n");
            for i in idx { text.push_str(&format!("{}: {}\n", i + 1, vals[i])); }
            text.push_str("Let me know if you need anything else.");
            let got = read_whole(&text, n);
            for (i, v) in vals.iter().enumerate() { prop_assert_eq!(got[i], ok(*v)); }
        }
    }
}
