//! Table contracts: what a table that passes between stages holds, written once.
//!
//! A [`TableContract`] names a table, its columns (type and nullability, in file order) and the
//! key its rows are sorted by. Everything else is derived from it: the Arrow schema the writer
//! uses, the projection a plan emits ([`TableContract::projection`]), the reading stage's input
//! check ([`TableContract::check_schema`]), and the row builders of the tests. Adding a column
//! to a declaration is therefore the only edit that adds a column.

use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use std::sync::Arc;

/// The type of a contract column, as written to Parquet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnType {
    /// UTF-8 text (`Utf8`).
    Text,
    /// 32-bit signed integer.
    Int32,
    /// 64-bit signed integer.
    Int64,
    /// 64-bit float.
    Float64,
    /// Boolean.
    Boolean,
    /// A text of a few known values (a status), written as a dictionary with 8-bit keys.
    Label,
}

impl ColumnType {
    /// The Arrow type a writer uses.
    pub fn arrow(self) -> DataType {
        match self {
            ColumnType::Text => DataType::Utf8,
            ColumnType::Int32 => DataType::Int32,
            ColumnType::Int64 => DataType::Int64,
            ColumnType::Float64 => DataType::Float64,
            ColumnType::Boolean => DataType::Boolean,
            ColumnType::Label => {
                DataType::Dictionary(Box::new(DataType::Int8), Box::new(DataType::Utf8))
            }
        }
    }

    /// Whether a reader may take `t` for this type: any text encoding for text, any signed
    /// integer for integers, any float for floats (another writer's file need not use the
    /// narrowest type).
    pub fn accepts(self, t: &DataType) -> bool {
        match self {
            ColumnType::Text => {
                matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
            }
            ColumnType::Int32 | ColumnType::Int64 => matches!(
                t,
                DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64
            ),
            ColumnType::Float64 => matches!(t, DataType::Float32 | DataType::Float64),
            ColumnType::Boolean => matches!(t, DataType::Boolean),
            ColumnType::Label => match t {
                DataType::Dictionary(_, v) => ColumnType::Text.accepts(v),
                t => ColumnType::Text.accepts(t),
            },
        }
    }

    /// The name used in messages.
    pub fn name(self) -> &'static str {
        match self {
            ColumnType::Text => "text",
            ColumnType::Int32 | ColumnType::Int64 => "integer",
            ColumnType::Float64 => "float",
            ColumnType::Boolean => "boolean",
            ColumnType::Label => "text",
        }
    }
}

/// One column of a contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Column {
    /// The column name.
    pub name: &'static str,
    /// Its type.
    pub ty: ColumnType,
    /// Whether a row may leave it null.
    pub nullable: bool,
}

impl Column {
    /// A column that is never null.
    pub const fn required(name: &'static str, ty: ColumnType) -> Column {
        Column {
            name,
            ty,
            nullable: false,
        }
    }

    /// A column that may be null.
    pub const fn optional(name: &'static str, ty: ColumnType) -> Column {
        Column {
            name,
            ty,
            nullable: true,
        }
    }

    /// The Arrow field of the column.
    pub fn field(&self) -> Field {
        Field::new(self.name, self.ty.arrow(), self.nullable)
    }
}

/// A table that passes between stages: name, columns in file order, sort key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableContract {
    /// The table's name; its file is `<name>.parquet` in the writing stage's folder.
    pub name: &'static str,
    /// The stage that writes it (`fetch`, `score`, `aggregate`).
    pub stage: &'static str,
    /// Version of the layout: raised whenever a column is added, removed or changes type.
    pub version: u32,
    /// The columns in file order, as consecutive groups: tables that share a run of columns
    /// (the keys of an administration, all of another table) list the same group.
    pub parts: &'static [&'static [Column]],
    /// The columns rows are sorted by, in order (within one source where a table has many).
    pub sort_key: &'static [&'static str],
}

/// A column name not in a contract's columns, or a file that breaks a contract.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContractError {
    /// The file has no column of this name.
    #[error("column `{column}` is missing (table {table} v{version})")]
    Missing {
        /// The table.
        table: &'static str,
        /// Its layout version.
        version: u32,
        /// The column.
        column: &'static str,
    },
    /// The file's column has a type the contract does not accept.
    #[error("column `{column}` has type {found}, expected {expected} (table {table} v{version})")]
    Type {
        /// The table.
        table: &'static str,
        /// Its layout version.
        version: u32,
        /// The column.
        column: &'static str,
        /// The type in the file.
        found: DataType,
        /// The contract's type name.
        expected: &'static str,
    },
}

impl TableContract {
    /// A contract whose columns are the `parts` in order.
    pub const fn new(
        name: &'static str,
        stage: &'static str,
        version: u32,
        parts: &'static [&'static [Column]],
        sort_key: &'static [&'static str],
    ) -> TableContract {
        TableContract {
            name,
            stage,
            version,
            parts,
            sort_key,
        }
    }

    /// The number of columns (usable in constants, e.g. an array's length).
    pub const fn len(&self) -> usize {
        let (mut n, mut i) = (0, 0);
        while i < self.parts.len() {
            n += self.parts[i].len();
            i += 1;
        }
        n
    }

    /// Whether the contract has no column.
    pub const fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The name of column `i` in file order (usable in constants). Panics past the end.
    pub const fn name_at(&self, mut i: usize) -> &'static str {
        let mut p = 0;
        while p < self.parts.len() {
            if i < self.parts[p].len() {
                return self.parts[p][i].name;
            }
            i -= self.parts[p].len();
            p += 1;
        }
        panic!("column index past the end of the contract")
    }

    /// The file name, `<name>.parquet`.
    pub fn file_name(&self) -> String {
        format!("{}.parquet", self.name)
    }

    /// Every column in file order.
    pub fn columns(&self) -> Vec<Column> {
        self.parts.concat()
    }

    /// The column names in file order.
    pub fn names(&self) -> Vec<&'static str> {
        self.columns().iter().map(|c| c.name).collect()
    }

    /// The column `name`. Panics when the contract has no such column: callers name columns
    /// of the contract they hold, so a miss is a programming error that every test run hits.
    pub fn column(&self, name: &str) -> Column {
        self.columns()
            .into_iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("table {} has no column {name}", self.name))
    }

    /// The Arrow schema writers use.
    pub fn schema(&self) -> SchemaRef {
        Arc::new(Schema::new(
            self.columns().iter().map(Column::field).collect::<Vec<_>>(),
        ))
    }

    /// A SQL select list of every column in file order: a column named in `exprs` is that
    /// expression `AS` the column, every other column is selected by its (quoted) name. An
    /// entry of `exprs` that names no column of the contract panics (see [`Self::column`]).
    pub fn projection(&self, exprs: &[(&str, &str)]) -> String {
        for (name, _) in exprs {
            self.column(name);
        }
        self.columns()
            .iter()
            .map(|c| match exprs.iter().find(|(name, _)| *name == c.name) {
                Some((_, e)) => format!("{e} AS \"{}\"", c.name),
                None => format!("\"{}\"", c.name),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The sort key as (column, nulls first) pairs: a nullable key column sorts its nulls
    /// first (a whole-test request, with no item, before the test's single items).
    pub fn sorted_by(&self) -> Vec<(&'static str, bool)> {
        self.sort_key
            .iter()
            .map(|k| (*k, self.column(k).nullable))
            .collect()
    }

    /// The sort key as a SQL `ORDER BY` list ([`Self::sorted_by`]).
    pub fn order_by(&self) -> String {
        self.sorted_by()
            .iter()
            .map(|(k, nulls_first)| {
                if *nulls_first {
                    format!("\"{k}\" NULLS FIRST")
                } else {
                    format!("\"{k}\"")
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The non-nullable columns, in file order.
    pub fn required(&self) -> Vec<&'static str> {
        self.columns()
            .iter()
            .filter(|c| !c.nullable)
            .map(|c| c.name)
            .collect()
    }

    /// Check a file's schema against the contract: every column present with an accepted type
    /// ([`ColumnType::accepts`]). Extra columns are allowed (a reader selects by name).
    pub fn check_schema(&self, schema: &Schema) -> Result<(), ContractError> {
        for c in self.columns() {
            let field = schema
                .field_with_name(c.name)
                .map_err(|_| ContractError::Missing {
                    table: self.name,
                    version: self.version,
                    column: c.name,
                })?;
            if !c.ty.accepts(field.data_type()) {
                return Err(ContractError::Type {
                    table: self.name,
                    version: self.version,
                    column: c.name,
                    found: field.data_type().clone(),
                    expected: c.ty.name(),
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ColumnType::{Int32, Text};

    const AB: &[Column] = &[Column::required("a", Text), Column::optional("b", Int32)];
    const BASE: TableContract = TableContract::new("base", "score", 1, &[AB], &["a"]);
    const BY: TableContract = TableContract::new(
        "by",
        "score",
        1,
        &[&[Column::required("rule", Text)], AB],
        &["rule", "a"],
    );

    #[test]
    fn parts_make_the_columns_in_order() {
        assert_eq!(BY.names(), ["rule", "a", "b"]);
        assert_eq!(BY.required(), ["rule", "a"]);
        let s = BY.schema();
        assert!(!s.field(0).is_nullable() && s.field(2).is_nullable());
        const N: usize = BY.len();
        const LAST: &str = BY.name_at(N - 1);
        assert_eq!((N, LAST), (3, "b"));
    }

    #[test]
    fn a_nullable_key_column_sorts_its_nulls_first() {
        const KEYED: TableContract = TableContract {
            sort_key: &["a", "b"],
            ..BASE
        };
        assert_eq!(KEYED.sorted_by(), [("a", false), ("b", true)]);
        assert_eq!(KEYED.order_by(), "\"a\", \"b\" NULLS FIRST");
    }

    #[test]
    fn a_projection_names_every_column_once_in_order() {
        assert_eq!(BASE.projection(&[("b", "x + 1")]), "\"a\", x + 1 AS \"b\"");
    }

    #[test]
    #[should_panic(expected = "no column c")]
    fn a_projection_of_an_unknown_column_panics() {
        BASE.projection(&[("c", "1")]);
    }

    #[test]
    fn the_check_names_a_missing_or_mistyped_column() {
        let ok = Schema::new(vec![
            Field::new("a", DataType::Utf8View, false),
            Field::new("b", DataType::Int64, true),
            Field::new("extra", DataType::Boolean, true),
        ]);
        assert_eq!(BASE.check_schema(&ok), Ok(()));
        let missing = Schema::new(vec![Field::new("a", DataType::Utf8, false)]);
        assert_eq!(
            BASE.check_schema(&missing).unwrap_err().to_string(),
            "column `b` is missing (table base v1)"
        );
        let mistyped = Schema::new(vec![
            Field::new("a", DataType::Utf8, false),
            Field::new("b", DataType::Utf8, true),
        ]);
        assert_eq!(
            BASE.check_schema(&mistyped).unwrap_err().to_string(),
            "column `b` has type Utf8, expected integer (table base v1)"
        );
    }
}
