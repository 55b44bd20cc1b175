//! What every custom DataFusion function of the stages needs besides its own logic: the
//! `ScalarUDFImpl` and `AggregateUDFImpl` plumbing (name, signature, result type, equality),
//! and the plain accumulator of one group over a groups accumulator. A function then states
//! only what is its own: its result type, its arguments' reading, its state.

use datafusion::arrow::array::{Array, ArrayRef, BooleanArray};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::format_state_name;
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, ColumnarValue, EmitTo, GroupsAccumulator,
    ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
};
use std::sync::Arc;

/// A scalar function computed on whole argument arrays: the arguments of a batch in, one
/// result array of the same length out.
///
/// Equality and hashing say when DataFusion may take two instances for the same function (in
/// plan comparison and common subexpressions): a function holding data must compare it.
pub trait ArrayFunction:
    std::fmt::Debug + PartialEq + Eq + std::hash::Hash + Send + Sync + 'static
{
    /// The name SQL calls it by.
    fn name(&self) -> &str;
    /// The type of its result, whatever the arguments' types.
    fn return_type(&self) -> DataType;
    /// The result for every row of `args` (the arguments as arrays of one length).
    fn invoke(&self, args: &[ArrayRef]) -> Result<ArrayRef>;
}

/// `function` as a scalar function accepting the arguments `signature` describes.
pub fn array_udf<F: ArrayFunction>(function: F, signature: Signature) -> ScalarUDF {
    ScalarUDF::from(ArrayUdf {
        function,
        signature,
    })
}

/// The body of a function of [`plain_udf`]: the arguments as arrays of one length in, one
/// result array out.
type Body = Box<dyn Fn(&[ArrayRef]) -> Result<ArrayRef> + Send + Sync>;

/// A scalar function whose data, if any, is fixed when it is made: `body` under `name`,
/// returning `ret`. Its name is its identity: closures and function pointers have no reliable
/// equality, and a session holds one function per name.
pub fn plain_udf(
    name: &'static str,
    signature: Signature,
    ret: DataType,
    body: impl Fn(&[ArrayRef]) -> Result<ArrayRef> + Send + Sync + 'static,
) -> ScalarUDF {
    let body = Box::new(body);
    array_udf(Plain { name, ret, body }, signature)
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct ArrayUdf<F> {
    function: F,
    signature: Signature,
}

impl<F: ArrayFunction> ScalarUDFImpl for ArrayUdf<F> {
    fn name(&self) -> &str {
        self.function.name()
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(self.function.return_type())
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        Ok(ColumnarValue::Array(self.function.invoke(&arrays)?))
    }
}

/// A function of [`plain_udf`].
struct Plain {
    name: &'static str,
    ret: DataType,
    body: Body,
}

impl std::fmt::Debug for Plain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

impl PartialEq for Plain {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for Plain {}

impl std::hash::Hash for Plain {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name.hash(state);
    }
}

impl ArrayFunction for Plain {
    fn name(&self) -> &str {
        self.name
    }
    fn return_type(&self) -> DataType {
        self.ret.clone()
    }
    fn invoke(&self, args: &[ArrayRef]) -> Result<ArrayRef> {
        (self.body)(args)
    }
}

/// Shared data a function reads (a scoring key, norms), compared and hashed by address: two
/// functions reading the same object are the same function, and the data needs no equality
/// of its own (comparing it would cost as much as the data is large).
#[derive(Debug)]
pub struct ByAddress<T>(pub Arc<T>);

impl<T> Clone for ByAddress<T> {
    fn clone(&self) -> Self {
        ByAddress(self.0.clone())
    }
}

impl<T> PartialEq for ByAddress<T> {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl<T> Eq for ByAddress<T> {}

impl<T> std::hash::Hash for ByAddress<T> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        Arc::as_ptr(&self.0).hash(state);
    }
}

impl<T> std::ops::Deref for ByAddress<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// An aggregate function whose work a groups accumulator does: the one path DataFusion takes
/// for a grouping, and, as the plain accumulator of one group, for a query without GROUP BY.
///
/// Equality and hashing mean what they mean for an [`ArrayFunction`].
pub trait GroupsFunction:
    std::fmt::Debug + PartialEq + Eq + std::hash::Hash + Send + Sync + 'static
{
    /// The accumulator of every group.
    type Groups: Grow + 'static;
    /// The name SQL calls it by.
    fn name(&self) -> &str;
    /// The arguments it accepts.
    fn signature(&self) -> &Signature;
    /// The type of its result, whatever the arguments' types.
    fn return_type(&self) -> DataType;
    /// Whether its result can be null; DataFusion's default is that it can.
    fn is_nullable(&self) -> bool {
        true
    }
    /// The columns of a partial state, in the order the accumulator's `state` gives them,
    /// each named by its suffix alone: the state of an aggregate expression prefixes them with
    /// the expression's name.
    fn state_fields(&self) -> Vec<Field>;
    /// An accumulator with no groups yet.
    fn groups(&self) -> Self::Groups;
}

/// `function` as an aggregate function.
pub fn groups_udaf<F: GroupsFunction>(function: F) -> AggregateUDF {
    AggregateUDF::from(GroupsUdaf(function))
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct GroupsUdaf<F>(F);

impl<F: GroupsFunction> AggregateUDFImpl for GroupsUdaf<F> {
    fn name(&self) -> &str {
        self.0.name()
    }
    fn signature(&self) -> &Signature {
        self.0.signature()
    }
    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(self.0.return_type())
    }
    fn is_nullable(&self) -> bool {
        self.0.is_nullable()
    }
    fn accumulator(&self, _: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(OneGroup(self.0.groups())))
    }
    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(self
            .0
            .state_fields()
            .into_iter()
            .map(|f| {
                let name = format_state_name(args.name, f.name());
                Arc::new(Field::new(name, f.data_type().clone(), f.is_nullable()))
            })
            .collect())
    }
    fn groups_accumulator_supported(&self, _: AccumulatorArgs) -> bool {
        true
    }
    fn create_groups_accumulator(&self, _: AccumulatorArgs) -> Result<Box<dyn GroupsAccumulator>> {
        Ok(Box::new(self.0.groups()))
    }
}

/// A groups accumulator that can make room for groups with no rows yet: a query without
/// GROUP BY has its one group even when no row reached it.
pub trait Grow: GroupsAccumulator + Sync {
    /// Make room for `groups` groups, a new group's state that of no rows.
    fn grow(&mut self, groups: usize);
}

/// A groups accumulator as the plain accumulator of one group (a query without GROUP BY).
/// Evaluating or taking the state hands the group's state out.
struct OneGroup<G: Grow>(G);

impl<G: Grow> std::fmt::Debug for OneGroup<G> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OneGroup")
    }
}

impl<G: Grow> Accumulator for OneGroup<G> {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let n = values.first().map_or(0, |v| v.len());
        self.0.update_batch(values, &vec![0; n], None, 1)
    }
    fn evaluate(&mut self) -> Result<ScalarValue> {
        self.0.grow(1);
        ScalarValue::try_from_array(&self.0.evaluate(EmitTo::All)?, 0)
    }
    fn size(&self) -> usize {
        self.0.size()
    }
    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        self.0.grow(1);
        self.0
            .state(EmitTo::All)?
            .iter()
            .map(|a| ScalarValue::try_from_array(a, 0))
            .collect()
    }
    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let n = states.first().map_or(0, |v| v.len());
        self.0.merge_batch(states, &vec![0; n], 1)
    }
}

/// Whether row `i` of a batch counts: every row does, unless `opt_filter` (an aggregate's
/// `FILTER (WHERE ...)`) drops it; a null filter value drops the row, as SQL's WHERE does.
pub fn counted(opt_filter: Option<&BooleanArray>, i: usize) -> bool {
    opt_filter.is_none_or(|f| f.is_valid(i) && f.value(i))
}

/// The partial state of each row as a group of its own (a groups accumulator's
/// `convert_to_state`), from an empty accumulator `each`: a row the filter drops is a group
/// with no rows.
pub fn each_row_a_group<G: GroupsAccumulator>(
    each: &mut G,
    values: &[ArrayRef],
    opt_filter: Option<&BooleanArray>,
) -> Result<Vec<ArrayRef>> {
    let n = values.first().map_or(0, |v| v.len());
    let groups: Vec<usize> = (0..n).collect();
    each.update_batch(values, &groups, opt_filter, n)?;
    each.state(EmitTo::All)
}
