//! Stored-answer records for tests.

use protospread_format::{Arm, Mode, OptionOrder, StoredRecord};

/// One request of model `m` (study `t`, arm `local`, no cohort, instruction P1, human option
/// order, temperature 0) to `test` of `n_items` items: item `item`, or with `None` the whole
/// test shown in human order.
pub fn local_request(
    test: &str,
    n_items: i32,
    condition: &str,
    sample: i32,
    item: Option<i32>,
    reply: &str,
) -> StoredRecord {
    StoredRecord {
        format_version: 1,
        study: "t".into(),
        model: "m".into(),
        arm: Arm::Local,
        cohort: None,
        condition: condition.into(),
        sample,
        test: test.into(),
        mode: if item.is_some() {
            Mode::Single
        } else {
            Mode::Whole
        },
        item,
        item_order: item.is_none().then(|| (1..=n_items).collect()),
        order_seed: None,
        option_order: OptionOrder::Human,
        instruction: "P1".into(),
        temperature: Some(0.0),
        reply: reply.into(),
        error: None,
        label: None,
    }
}

/// A request with the stored answers' sort key (model, condition, sample, test, item) given:
/// a [`local_request`] of model `model` to a test of one item.
pub fn keyed_request(
    model: &str,
    condition: &str,
    sample: i32,
    test: &str,
    item: Option<i32>,
) -> StoredRecord {
    StoredRecord {
        model: model.into(),
        ..local_request(test, 1, condition, sample, item, "1")
    }
}
