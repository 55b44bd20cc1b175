//! Text columns read in place, whether they come as plain UTF-8 or as string views.

use datafusion::arrow::array::{Array, ArrayRef, AsArray, StringArray, StringViewArray};
use datafusion::arrow::datatypes::DataType;

/// A text column as it comes: plain UTF-8 (staged batches, cast arguments) or string views
/// (DataFusion's Parquet scan), read in place where a cast would copy every text.
#[derive(Debug, Clone, Copy)]
pub enum Texts<'a> {
    /// Plain UTF-8.
    Plain(&'a StringArray),
    /// String views.
    View(&'a StringViewArray),
}

impl<'a> Texts<'a> {
    /// `a` when it is plain UTF-8 or string views; `None` for any other type.
    pub fn of(a: &'a ArrayRef) -> Option<Self> {
        match a.data_type() {
            DataType::Utf8 => Some(Texts::Plain(a.as_string::<i32>())),
            DataType::Utf8View => Some(Texts::View(a.as_string_view())),
            _ => None,
        }
    }

    /// `a`, which must be plain UTF-8 or string views: for arguments whose type a function's
    /// signature fixes. Panics on any other type.
    pub fn new(a: &'a ArrayRef) -> Self {
        match a.data_type() {
            DataType::Utf8View => Texts::View(a.as_string_view()),
            _ => Texts::Plain(a.as_string::<i32>()),
        }
    }

    /// Rows.
    pub fn len(&self) -> usize {
        match self {
            Texts::Plain(a) => a.len(),
            Texts::View(a) => a.len(),
        }
    }

    /// No rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether row `i` is null.
    pub fn is_null(&self, i: usize) -> bool {
        match self {
            Texts::Plain(a) => a.is_null(i),
            Texts::View(a) => a.is_null(i),
        }
    }

    /// The text of row `i` (that of a null row is empty or arbitrary: see [`Texts::at`]).
    pub fn value(&self, i: usize) -> &'a str {
        match self {
            Texts::Plain(a) => a.value(i),
            Texts::View(a) => a.value(i),
        }
    }

    /// The text of row `i`, `None` when it is null.
    pub fn at(&self, i: usize) -> Option<&'a str> {
        (!self.is_null(i)).then(|| self.value(i))
    }
}
