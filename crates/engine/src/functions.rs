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

/// An aggregate function whose work a [`Groups`] state does: as DataFusion's groups
/// accumulator, the one path it takes for a grouping, and as the plain accumulator of one
/// group, for a query without GROUP BY.
///
/// Equality and hashing mean what they mean for an [`ArrayFunction`].
pub trait GroupsFunction:
    std::fmt::Debug + PartialEq + Eq + std::hash::Hash + Send + Sync + 'static
{
    /// The state of every group.
    type Groups: Groups;
    /// The type of its result, whatever the arguments' types.
    fn return_type(&self) -> DataType;
    /// Whether its result can be null; DataFusion's default is that it can.
    fn is_nullable(&self) -> bool {
        true
    }
    /// The columns of a partial state, in the order [`Groups::state`] gives them, each named
    /// by its suffix alone: the state of an aggregate expression prefixes them with the
    /// expression's name.
    fn state_fields(&self) -> Vec<Field>;
    /// The state of no groups.
    fn groups(&self) -> Self::Groups;
}

/// `function` as an aggregate function under `name`, accepting the arguments `signature`
/// describes.
pub fn groups_udaf<F: GroupsFunction>(
    name: &'static str,
    signature: Signature,
    function: F,
) -> AggregateUDF {
    AggregateUDF::from(GroupsUdaf {
        name,
        signature,
        function,
    })
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct GroupsUdaf<F> {
    name: &'static str,
    signature: Signature,
    function: F,
}

impl<F: GroupsFunction> AggregateUDFImpl for GroupsUdaf<F> {
    fn name(&self) -> &str {
        self.name
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(self.function.return_type())
    }
    fn is_nullable(&self) -> bool {
        self.function.is_nullable()
    }
    fn accumulator(&self, _: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(OneGroup(self.function.groups())))
    }
    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(self
            .function
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
        Ok(Box::new(Accumulate(self.function.groups())))
    }
}

/// The rows of a batch, each with its group.
#[derive(Debug, Clone, Copy)]
pub struct Rows<'a> {
    /// The arguments (or the partial states) as arrays of one length.
    pub values: &'a [ArrayRef],
    /// The group of each row.
    pub groups: &'a [usize],
    /// An aggregate's `FILTER (WHERE ...)`: only the rows it keeps count ([`Rows::counted`]).
    pub filter: Option<&'a BooleanArray>,
}

impl<'a> Rows<'a> {
    fn new(values: &'a [ArrayRef], groups: &'a [usize], filter: Option<&'a BooleanArray>) -> Self {
        Rows {
            values,
            groups,
            filter,
        }
    }

    /// Whether row `i` counts: every row does, unless the filter drops it; a null filter
    /// value drops the row, as SQL's WHERE does.
    pub fn counted(&self, i: usize) -> bool {
        self.filter.is_none_or(|f| f.is_valid(i) && f.value(i))
    }
}

/// The state of every group of a [`GroupsFunction`]: a groups accumulator less what is the
/// same for every function (making room for the groups first, a row's own partial state, the
/// plain accumulator of one group), which [`Accumulate`] adds.
pub trait Groups: Send + Sync + 'static {
    /// The state of no groups, for the same function.
    fn empty(&self) -> Self
    where
        Self: Sized;
    /// Make room for `groups` groups, a new group's state that of no rows.
    fn grow(&mut self, groups: usize);
    /// Add every row `rows` counts to its group (there is room for every group).
    fn update(&mut self, rows: Rows<'_>) -> Result<()>;
    /// Add partial states (`rows.values`, one row a state; no filter) to their groups.
    fn merge(&mut self, rows: Rows<'_>) -> Result<()>;
    /// The result of the emitted groups, which are taken out.
    fn evaluate(&mut self, emit_to: EmitTo) -> Result<ArrayRef>;
    /// The partial state of the emitted groups, which are taken out.
    fn state(&mut self, emit_to: EmitTo) -> Result<Vec<ArrayRef>>;
    /// Bytes held.
    fn size(&self) -> usize;
}

/// A [`Groups`] state as DataFusion's groups accumulator.
#[derive(Debug)]
pub struct Accumulate<G>(pub G);

impl<G: Groups> GroupsAccumulator for Accumulate<G> {
    fn update_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        opt_filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> Result<()> {
        self.0.grow(total_num_groups);
        self.0.update(Rows::new(values, group_indices, opt_filter))
    }

    fn evaluate(&mut self, emit_to: EmitTo) -> Result<ArrayRef> {
        self.0.evaluate(emit_to)
    }

    fn state(&mut self, emit_to: EmitTo) -> Result<Vec<ArrayRef>> {
        self.0.state(emit_to)
    }

    fn merge_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        total_num_groups: usize,
    ) -> Result<()> {
        self.0.grow(total_num_groups);
        self.0.merge(Rows::new(values, group_indices, None))
    }

    /// Each row a group of its own, from an empty state: a row the filter drops is a group
    /// with no rows.
    fn convert_to_state(
        &self,
        values: &[ArrayRef],
        opt_filter: Option<&BooleanArray>,
    ) -> Result<Vec<ArrayRef>> {
        let mut each = Accumulate(self.0.empty());
        let n = values.first().map_or(0, |v| v.len());
        let groups: Vec<usize> = (0..n).collect();
        each.update_batch(values, &groups, opt_filter, n)?;
        each.state(EmitTo::All)
    }

    fn size(&self) -> usize {
        self.0.size()
    }
}

/// A [`Groups`] state as the plain accumulator of one group (a query without GROUP BY).
/// Evaluating or taking the state hands the group's state out.
struct OneGroup<G>(G);

impl<G> std::fmt::Debug for OneGroup<G> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OneGroup")
    }
}

impl<G: Groups> Accumulator for OneGroup<G> {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let n = values.first().map_or(0, |v| v.len());
        self.0.grow(1);
        self.0.update(Rows::new(values, &vec![0; n], None))
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
        self.0.grow(1);
        self.0.merge(Rows::new(states, &vec![0; n], None))
    }
}
