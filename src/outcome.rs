//! How a failure is shown with `--json`: `error` = {kind, message, and file, row, column when
//! the error names them}. The place is read from the library errors in the cause chain, never
//! parsed out of the message (except the TOML parser's "line N, column M", which it only
//! gives as text).

use serde_json::{json, Map, Value};

/// Exit code of a command line that does not parse (unknown subcommand or flag, bad value):
/// EX_USAGE of sysexits.h, distinct from 1 (error) and 2 (a gate failed or requests failed).
pub(crate) const EXIT_USAGE: u8 = 64;

/// The `error` member for a failure of a command that parsed.
pub(crate) fn error_object(e: &anyhow::Error, message: String) -> Value {
    let mut o = Map::new();
    o.insert("kind".into(), Value::String(kind(e).into()));
    o.insert("message".into(), Value::String(message));
    if let Some((file, row, column)) = place(e) {
        o.insert("file".into(), Value::String(file));
        if let Some(r) = row {
            o.insert("row".into(), json!(r));
        }
        if let Some(c) = column {
            o.insert("column".into(), c);
        }
    }
    Value::Object(o)
}

/// The `error` member for a command line clap refused.
pub(crate) fn usage_error(e: &clap::Error) -> Value {
    let text = e.to_string();
    // clap's first line is the error; the rest is a usage hint for the terminal.
    let message = text
        .lines()
        .next()
        .unwrap_or_default()
        .trim_start_matches("error: ")
        .to_string();
    json!({"kind": "usage", "message": message})
}

fn kind(e: &anyhow::Error) -> &'static str {
    use protospread_core::CoreError;
    use protospread_sweep::SweepError;
    if protospread_engine::is_out_of_memory(e.as_ref()) {
        return "memory";
    }
    for cause in e.chain() {
        if let Some(c) = cause.downcast_ref::<CoreError>() {
            return match c {
                CoreError::Config { .. } => "config",
                CoreError::Manifest { .. } | CoreError::Parquet { .. } => "input",
                _ => "io",
            };
        }
        if let Some(s) = cause.downcast_ref::<SweepError>() {
            return match s {
                SweepError::Check(_) => "check",
                SweepError::Config(_) => "config",
                SweepError::Fs(_) | SweepError::Core(_) => "io",
                _ => "input",
            };
        }
        if cause.is::<protospread_format::FormatError>()
            || cause.is::<protospread_fetch::ImportError>()
            || cause.is::<protospread_score::ScoreError>()
            || cause.is::<protospread_fetch::CsvError>()
        {
            return "input";
        }
        if let Some(f) = cause.downcast_ref::<protospread_fetch::FetchError>() {
            use protospread_fetch::FetchError as F;
            return match f {
                F::HttpStatus { .. }
                | F::Truncated { .. }
                | F::Network { .. }
                | F::RedirectUrl { .. }
                | F::Redirect { .. } => "network",
                F::Io { .. } => "io",
                _ => "input",
            };
        }
        if cause.is::<std::io::Error>() {
            return "io";
        }
    }
    "error"
}

type Place = (String, Option<u64>, Option<Value>);

/// File, row (1-based; the line for line-based formats) and column of the first error in the
/// chain that names them.
fn place(e: &anyhow::Error) -> Option<Place> {
    use protospread_fetch::{CsvError, FetchError};
    use protospread_sweep::SweepError as W;
    e.chain().find_map(|cause| {
        if let Some(p) = record_place(cause).or_else(|| score_place(cause)) {
            return Some(p);
        }
        match cause.downcast_ref::<W>() {
            Some(W::Malformed { file, line, .. }) => {
                return Some((show(file), (*line > 0).then_some(*line as u64), None));
            }
            Some(W::Task { file, .. }) => return Some((show(file), None, None)),
            _ => {}
        }
        if let Some(FetchError::Csv { error, .. }) = cause.downcast_ref::<FetchError>() {
            return Some(csv_place(error));
        }
        if let Some(c) = cause.downcast_ref::<CsvError>() {
            return Some(csv_place(c));
        }
        if let Some(io) = cause.downcast_ref::<protospread_core::IoError>() {
            return Some((show(&io.path), None, None));
        }
        core_place(cause)
    })
}

type Cause<'a> = &'a (dyn std::error::Error + 'static);

fn show(p: &std::path::Path) -> String {
    p.display().to_string()
}

/// The place of a stored-answer record error, also inside an import error (which wraps it
/// transparently; the fetch stage boxes the import's).
fn record_place(cause: Cause<'_>) -> Option<Place> {
    use protospread_fetch::ImportError;
    use protospread_format::FormatError as A;
    let import = cause
        .downcast_ref::<ImportError>()
        .or_else(|| cause.downcast_ref::<Box<ImportError>>().map(|b| &**b));
    let record = match import {
        Some(ImportError::Format(a)) => Some(a),
        _ => cause.downcast_ref::<A>(),
    };
    match record? {
        A::Record {
            file, row, column, ..
        } => Some((show(file), Some(*row as u64), Some(json!(column)))),
        A::File { file, .. } => Some((show(file), None, None)),
        A::Arrow(_) => None,
    }
}

fn score_place(cause: Cause<'_>) -> Option<Place> {
    use protospread_score::ScoreError as S;
    match cause.downcast_ref::<S>()? {
        S::Cell {
            path, line, column, ..
        } => Some((show(path), Some(*line as u64), Some(json!(column)))),
        S::File { path, .. } | S::Parquet { path, .. } => Some((show(path), None, None)),
        _ => None,
    }
}

fn core_place(cause: Cause<'_>) -> Option<Place> {
    use protospread_core::CoreError as C;
    match cause.downcast_ref::<C>()? {
        C::Config { path, message, .. } => {
            let (row, column) = toml_position(message);
            Some((show(path), row, column.map(|c| json!(c))))
        }
        C::Manifest { path, line, .. } => Some((show(path), Some(*line as u64), None)),
        C::Parquet { path, .. } | C::Refused { path, .. } => Some((show(path), None, None)),
        C::Io(io) => Some((show(&io.path), None, None)),
        _ => None,
    }
}

fn csv_place(c: &protospread_fetch::CsvError) -> Place {
    use protospread_fetch::CsvPlace as P;
    let file = c.file.display().to_string();
    match &c.place {
        P::File => (file, None, None),
        P::Header { column, .. } => (file, Some(1), Some(json!(column))),
        P::Row { row, column, .. } => (file, Some(*row as u64), Some(json!(column))),
    }
}

/// `line N, column M` of a TOML parser message.
fn toml_position(message: &str) -> (Option<u64>, Option<u64>) {
    let number_after = |key: &str| {
        let rest = &message[message.find(key)? + key.len()..];
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    };
    (number_after("line "), number_after("column "))
}
