//! Redaction of the API key from everything a server sends back, however it is encoded.
//!
//! A server may echo the key escaped (`sk-ab\/cd`, `\u002d`), percent-encoded, as an HTML
//! entity, nested (`\\u002d` in a JSON string inside a JSON string), in another case, without
//! its prefix, or only in part. The text is decoded (repeatedly, keeping for every decoded
//! character the span of the original text it came from), and every run of decoded
//! characters that matches the key, a fragment of it at least [`MIN_FRAGMENT`] characters
//! long, or its hex or base64 form, is replaced in the original text by [`REDACTED`].

use std::collections::HashSet;

/// What replaces a secret.
pub(crate) const REDACTED: &str = "<redacted>";
/// Shortest fragment of the key that counts as the key: long enough that a reply cannot hold
/// one by chance, short enough that a key cut after its prefix or shown in part is caught.
/// A key shorter than this is matched whole.
pub(crate) const MIN_FRAGMENT: usize = 8;
/// Decoding passes (each undoes one level of escaping).
const PASSES: usize = 4;

/// A decoded character and the byte span of the original text it stands for.
#[derive(Clone, Copy)]
struct Unit {
    c: char,
    start: u32,
    end: u32,
}

/// Fragments of one form of the key (the key itself, its hex or its base64).
#[derive(Clone)]
struct Needle {
    /// Every window of `len` characters of the form (lowercased when `fold`).
    grams: HashSet<Vec<char>>,
    len: usize,
    fold: bool,
}

impl Needle {
    fn new(form: &str, min: usize, fold: bool) -> Option<Self> {
        let chars: Vec<char> = form
            .chars()
            .map(|c| if fold { fold_char(c) } else { c })
            .collect();
        if chars.is_empty() {
            return None;
        }
        let len = min.min(chars.len());
        let grams = chars.windows(len).map(<[char]>::to_vec).collect();
        Some(Needle { grams, len, fold })
    }
}

fn fold_char(c: char) -> char {
    c.to_lowercase().next().unwrap_or(c)
}

/// The key's forms to look for.
#[derive(Clone)]
pub(crate) struct Redactor {
    needles: Vec<Needle>,
}

impl Redactor {
    /// A redactor for `key` (none, or an empty key: nothing to redact).
    pub(crate) fn new(key: Option<&str>) -> Self {
        let Some(key) = key.filter(|k| !k.is_empty()) else {
            return Redactor {
                needles: Vec::new(),
            };
        };
        let mut needles: Vec<Needle> = Vec::new();
        needles.extend(Needle::new(key, MIN_FRAGMENT, true));
        needles.extend(Needle::new(&hex(key.as_bytes()), 2 * MIN_FRAGMENT, true));
        // base64 of the key at each of the three alignments it can have inside a longer
        // encoded text (a `Bearer KEY` header echoed in base64), without the edge characters
        // that depend on the neighbours.
        for shift in 0..3 {
            let mut bytes = vec![0u8; shift];
            bytes.extend_from_slice(key.as_bytes());
            let enc = base64(&bytes);
            let skip = if shift == 0 { 0 } else { shift + 1 };
            let keep = (key.len() + shift) * 4 / 3;
            if keep > skip {
                let form: String = enc.chars().take(keep).skip(skip).collect();
                needles.extend(Needle::new(&form, MIN_FRAGMENT * 4 / 3 + 2, false));
            }
        }
        Redactor { needles }
    }

    /// `text` with every occurrence of the key, in any of its forms, replaced.
    pub(crate) fn redact(&self, text: &str) -> String {
        if self.needles.is_empty() || text.is_empty() {
            return text.to_string();
        }
        if text.len() >= u32::MAX as usize {
            // Never the case for a body (capped at 16 MiB); kept correct anyway: the whole
            // text goes if it cannot be searched.
            return REDACTED.to_string();
        }
        let mut spans: Vec<(usize, usize)> = Vec::new();
        let mut view = units(text);
        for pass in 0..=PASSES {
            let chars: Vec<char> = view.iter().map(|u| u.c).collect();
            let folded: Vec<char> = chars.iter().map(|&c| fold_char(c)).collect();
            for n in &self.needles {
                mark(&view, if n.fold { &folded } else { &chars }, n, &mut spans);
            }
            // Only one view is held at a time: a 16 MiB body full of escapes stays bounded.
            match (pass < PASSES).then(|| decode_once(&view)).flatten() {
                Some(next) => view = next,
                None => break,
            }
        }
        replace_spans(text, spans)
    }
}

/// The characters of `text` with their spans (a body is at most 16 MiB, so offsets fit in
/// `u32`; a longer text is redacted in pieces by the caller).
fn units(text: &str) -> Vec<Unit> {
    text.char_indices()
        .map(|(i, c)| Unit {
            c,
            start: i as u32,
            end: (i + c.len_utf8()) as u32,
        })
        .collect()
}

/// Add the original spans of every window of `chars` (the characters of `v`, folded as `n`
/// wants) that is a fragment of `n`.
fn mark(v: &[Unit], chars: &[char], n: &Needle, spans: &mut Vec<(usize, usize)>) {
    if chars.len() < n.len {
        return;
    }
    for (i, w) in chars.windows(n.len).enumerate() {
        if n.grams.contains(w) {
            spans.push((v[i].start as usize, v[i + n.len - 1].end as usize));
        }
    }
}

/// `text` with the union of `spans` replaced, each run of overlapping or touching spans once.
fn replace_spans(text: &str, mut spans: Vec<(usize, usize)>) -> String {
    if spans.is_empty() {
        return text.to_string();
    }
    spans.sort_unstable();
    let mut out = String::with_capacity(text.len());
    let mut pos = 0;
    let mut cur = spans[0];
    for &(s, e) in &spans[1..] {
        if s <= cur.1 {
            cur.1 = cur.1.max(e);
        } else {
            out.push_str(&text[pos..cur.0]);
            out.push_str(REDACTED);
            pos = cur.1;
            cur = (s, e);
        }
    }
    out.push_str(&text[pos..cur.0]);
    out.push_str(REDACTED);
    out.push_str(&text[cur.1..]);
    out
}

fn hex_value(u: &[Unit]) -> Option<u32> {
    let s: String = u.iter().map(|u| u.c).collect();
    if s.is_empty() || !s.chars().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(&s, 16).ok()
}

/// One level of decoding: backslash escapes (`\/`, `\uXXXX`, `\u{X}`, `\xHH`, `\n`...),
/// percent-encoding and HTML character references. `None` when nothing was decoded.
fn decode_once(v: &[Unit]) -> Option<Vec<Unit>> {
    let mut out = Vec::with_capacity(v.len());
    let mut changed = false;
    let mut i = 0;
    while i < v.len() {
        match decode_at(v, i) {
            Some((c, used)) => {
                out.push(Unit {
                    c,
                    start: v[i].start,
                    end: v[i + used - 1].end,
                });
                i += used;
                changed = true;
            }
            None => {
                out.push(v[i]);
                i += 1;
            }
        }
    }
    changed.then_some(out)
}

/// The character an escape starting at `v[i]` stands for, and how many units it uses.
fn decode_at(v: &[Unit], i: usize) -> Option<(char, usize)> {
    let at = |k: usize| v.get(i + k).map(|u| u.c);
    match v[i].c {
        '\\' => {
            let next = at(1)?;
            match next {
                'u' if at(2) == Some('{') => {
                    let close = (3..12).find(|&k| at(k) == Some('}'))?;
                    let c = char::from_u32(hex_value(&v[i + 3..i + close])?)?;
                    Some((c, close + 1))
                }
                'u' if v.len() >= i + 6 => {
                    let c = char::from_u32(hex_value(&v[i + 2..i + 6])?)?;
                    Some((c, 6))
                }
                'x' if v.len() >= i + 4 => {
                    let c = char::from_u32(hex_value(&v[i + 2..i + 4])?)?;
                    Some((c, 4))
                }
                'n' => Some(('\n', 2)),
                't' => Some(('\t', 2)),
                'r' => Some(('\r', 2)),
                c if c.is_ascii_alphanumeric() => None,
                c => Some((c, 2)),
            }
        }
        '%' if v.len() >= i + 3 => {
            let b = hex_value(&v[i + 1..i + 3])?;
            (b < 0x80).then(|| (char::from(b as u8), 3))
        }
        '&' => {
            let semi = (2..12).find(|&k| at(k) == Some(';'))?;
            let body: String = v[i + 1..i + semi].iter().map(|u| u.c).collect();
            let c = if let Some(h) = body.strip_prefix("#x").or_else(|| body.strip_prefix("#X")) {
                char::from_u32(u32::from_str_radix(h, 16).ok()?)?
            } else if let Some(d) = body.strip_prefix('#') {
                char::from_u32(d.parse().ok()?)?
            } else {
                match body.as_str() {
                    "amp" => '&',
                    "quot" => '"',
                    "apos" => '\'',
                    "lt" => '<',
                    "gt" => '>',
                    "sol" => '/',
                    "hyphen" | "dash" => '-',
                    _ => return None,
                }
            };
            Some((c, semi + 1))
        }
        _ => None,
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for k in 0..=chunk.len() {
            out.push(char::from(A[((n >> (18 - 6 * k)) & 63) as usize]));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "sk-abcd9f8e7d6c5b4a3210";

    fn clean(text: &str) -> String {
        let r = Redactor::new(Some(KEY)).redact(text);
        assert!(r.contains(REDACTED), "{text} -> {r}");
        for frag in ["abcd9f8e", "9f8e7d6c", "5b4a3210", "cd9f8e7d"] {
            assert!(!r.to_lowercase().contains(frag), "{text} -> {r}");
        }
        r
    }

    #[test]
    fn the_key_is_found_however_it_is_encoded() {
        let slashed = Redactor::new(Some("sk-ab/cd9f8e7d6c5b4a3210"));
        assert_eq!(
            slashed.redact(r#"{"error":{"message":"bad key: sk-ab\/cd9f8e7d6c5b4a3210"}}"#),
            r#"{"error":{"message":"bad key: <redacted>"}}"#
        );
        clean(r#"key sk\u002dabcd9f8e7d6c5b4a3210 bad"#);
        clean(r#"key sk\\u002dabcd9f8e7d6c5b4a3210 bad"#);
        clean("key=sk%2Dabcd9f8e7d6c5b4a3210&x=1");
        clean("key=sk%252Dabcd9f8e7d6c5b4a3210&x=1");
        clean("key sk&#45;abcd9f8e7d6c5b4a3210 and &#x2d;");
        assert_eq!(clean("echo: abcd9f8e7d6c5b4a3210."), "echo: <redacted>.");
        clean("echo: SK-ABCD9F8E7D6C5B4A3210");
        clean("only part: 9f8e7d6c5b here");
        clean(&format!("hex {}", hex(KEY.as_bytes())));
        for pre in ["", "x", "Bearer "] {
            let enc = base64(format!("{pre}{KEY}").as_bytes());
            let r = Redactor::new(Some(KEY)).redact(&enc);
            assert!(
                r.contains(REDACTED) && r.len() < enc.len(),
                "{pre}: {enc} -> {r}"
            );
        }
    }

    #[test]
    fn other_text_is_left_alone() {
        let r = Redactor::new(Some(KEY));
        for t in [
            "3",
            "1: 4\n2: 5\n",
            "sk-abc is a prefix only",
            "plain text é \\u00e9 %41",
        ] {
            assert_eq!(r.redact(t), t);
        }
        assert_eq!(Redactor::new(None).redact("sk-abcd9f8e7d6c5b4a3210"), KEY);
        assert_eq!(
            Redactor::new(Some("k-1")).redact("a k-1 b"),
            "a <redacted> b"
        );
    }
}
