//! `text_in(list, text)`: whether a list of texts (an `array_agg` of one group's texts) holds
//! `text`; false for a null list or a null text. The one list lookup the plans need, without
//! DataFusion's nested-function library (a build-time feature the project leaves out).

use super::lists::span;
use arrow::array::{Array, ArrayRef, AsArray, BooleanBuilder};
use arrow::datatypes::DataType;
use datafusion::common::{exec_err, Result};
use datafusion::logical_expr::{ScalarUDF, Signature, Volatility};
use protospread_engine::plain_udf;
use std::sync::Arc;

/// The function, ready to register.
pub(super) fn udf() -> ScalarUDF {
    plain_udf(
        "text_in",
        Signature::any(2, Volatility::Immutable),
        DataType::Boolean,
        text_in,
    )
}

fn text_in(arrays: &[ArrayRef]) -> Result<ArrayRef> {
    let Some(list) = arrays[0].as_list_opt::<i32>() else {
        return exec_err!("text_in: expected a list, got {}", arrays[0].data_type());
    };
    let items = arrow::compute::cast(list.values(), &DataType::Utf8)?;
    let items = items.as_string::<i32>();
    let text = arrow::compute::cast(&arrays[1], &DataType::Utf8)?;
    let text = text.as_string::<i32>();
    let mut out = BooleanBuilder::with_capacity(list.len());
    for row in 0..list.len() {
        let found = text.is_valid(row)
            && span(list, row).any(|k| items.is_valid(k) && items.value(k) == text.value(row));
        out.append_value(found);
    }
    Ok(Arc::new(out.finish()))
}

#[cfg(test)]
mod tests {
    use protospread_engine::{Engine, EngineOptions};

    #[test]
    fn finds_a_text_only_in_its_own_groups_list() {
        let engine = Engine::new(&EngineOptions::default()).unwrap();
        engine.context().register_udf(super::udf());
        let b = engine
            .query(
                "SELECT g, text_in(l, 'b') AS b, text_in(l, 'z') AS z, text_in(l, NULL) AS n \
                 FROM (SELECT g, array_agg(x) FILTER (WHERE x <> 'skip') AS l \
                       FROM (VALUES (1, 'a'), (1, 'b'), (2, 'a'), (2, NULL), (3, 'skip')) t(g, x) \
                       GROUP BY g) ORDER BY g",
            )
            .unwrap();
        let b = arrow::compute::concat_batches(&b[0].schema(), &b).unwrap();
        let col = |i: usize| {
            arrow::array::AsArray::as_boolean(b.column(i))
                .iter()
                .collect::<Vec<_>>()
        };
        // Group 3's list is null (every row filtered out): nothing is in it.
        assert_eq!(col(1), [Some(true), Some(false), Some(false)]);
        assert_eq!(col(2), [Some(false); 3]);
        assert_eq!(col(3), [Some(false); 3]);
    }
}
