//! Reading the lists a grouping gathers (`array_agg` of structs, `ps_ints`), for the
//! inference functions.

use arrow::array::{Array, ArrayRef, AsArray, Int64Array, ListArray, StringViewArray, StructArray};
use arrow::datatypes::{DataType, Field, Fields, Int64Type};
use datafusion::common::{exec_err, Result};
use datafusion::logical_expr::{ScalarUDF, Signature, Volatility};
use protospread_core::TableContract;
use protospread_engine::plain_udf;

/// `body` under `name`: a function of one list argument, returning `ret`.
pub(super) fn list_udf(
    name: &'static str,
    ret: DataType,
    body: fn(&[ArrayRef]) -> Result<ArrayRef>,
) -> ScalarUDF {
    plain_udf(name, Signature::any(1, Volatility::Immutable), ret, body)
}

/// Nullable fields of these names and types.
pub(super) fn fields(f: &[(&str, DataType)]) -> Fields {
    f.iter()
        .map(|(n, t)| Field::new(*n, t.clone(), true))
        .collect::<Vec<_>>()
        .into()
}

/// Nullable fields of the columns `names` (separated by white space) of `table`, of the types
/// it declares: a function whose result becomes those columns declares their types once, there.
pub(super) fn contract_fields(table: &TableContract, names: &str) -> Fields {
    fields(
        &names
            .split_whitespace()
            .map(|n| (n, table.column(n).ty.arrow()))
            .collect::<Vec<_>>(),
    )
}

/// A list argument of structs: the list and its struct values.
pub(super) fn list_of<'a>(a: &'a ArrayRef, what: &str) -> Result<(&'a ListArray, &'a StructArray)> {
    let Some(list) = a.as_list_opt::<i32>() else {
        return exec_err!("{what}: expected a list, got {}", a.data_type());
    };
    let Some(items) = list.values().as_struct_opt() else {
        return exec_err!("{what}: expected a list of structs");
    };
    Ok((list, items))
}

/// The integer items of list argument `a`.
pub(super) fn int_list<'a>(a: &'a ArrayRef, what: &str) -> Result<(&'a ListArray, &'a Int64Array)> {
    let Some(list) = a.as_list_opt::<i32>() else {
        return exec_err!("{what}: expected a list, got {}", a.data_type());
    };
    let Some(items) = list.values().as_primitive_opt::<Int64Type>() else {
        return exec_err!("{what}: expected a list of 64-bit integers");
    };
    Ok((list, items))
}

/// Field `name` of `items` cast to `t`.
pub(super) fn field(items: &StructArray, name: &str, t: &DataType, what: &str) -> Result<ArrayRef> {
    match items.column_by_name(name) {
        Some(c) => Ok(arrow::compute::cast(c, t)?),
        None => exec_err!("{what}: no field {name}"),
    }
}

/// Fields `names` of `items`, each cast to 64-bit integers.
pub(super) fn int_fields<const N: usize>(
    items: &StructArray,
    names: [&str; N],
    what: &str,
) -> Result<[Int64Array; N]> {
    let mut out = Vec::with_capacity(N);
    for name in names {
        let a = field(items, name, &DataType::Int64, what)?;
        out.push(a.as_primitive::<Int64Type>().clone());
    }
    Ok(out.try_into().expect("one array per name"))
}

/// String field `name` of `items` as a view array: the lists' strings arrive as views, and
/// reading them as views copies no string.
pub(super) fn strings(items: &StructArray, name: &str, what: &str) -> Result<StringViewArray> {
    Ok(field(items, name, &DataType::Utf8View, what)?
        .as_string_view()
        .clone())
}

/// The value positions of list row `row` (empty for a null list).
pub(super) fn span(list: &ListArray, row: usize) -> std::ops::Range<usize> {
    if list.is_null(row) {
        return 0..0;
    }
    let o = list.value_offsets();
    o[row] as usize..o[row + 1] as usize
}
