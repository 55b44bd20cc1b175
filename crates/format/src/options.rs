//! Shown options and the human scale: every item is shown with five options, numbered 1..=5
//! in the human order or reversed (`option_order`), and scored on the human 0..=4 scale.

use crate::record::OptionOrder;

/// Number of answer options shown for every item (five-point scales, shown as 1..=5).
pub const OPTIONS: u8 = 5;

/// The human value (0..=4) shown as option `option` (1..=5); `None` outside 1..=5.
pub fn option_to_value(option: i32, order: OptionOrder) -> Option<i32> {
    if !(1..=OPTIONS as i32).contains(&option) {
        return None;
    }
    Some(match order {
        OptionOrder::Human => option - 1,
        OptionOrder::Reversed => OPTIONS as i32 - option,
    })
}

/// The option number (1..=5) that shows human value `value` (0..=4); inverse of
/// [`option_to_value`].
pub fn value_to_option(value: i32, order: OptionOrder) -> Option<i32> {
    if !(0..OPTIONS as i32).contains(&value) {
        return None;
    }
    Some(match order {
        OptionOrder::Human => value + 1,
        OptionOrder::Reversed => OPTIONS as i32 - value,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reversed_and_human_mapping_every_option() {
        let expect_h = [(1, 0), (2, 1), (3, 2), (4, 3), (5, 4)];
        let expect_r = [(1, 4), (2, 3), (3, 2), (4, 1), (5, 0)];
        for (o, v) in expect_h {
            assert_eq!(option_to_value(o, OptionOrder::Human), Some(v));
            assert_eq!(value_to_option(v, OptionOrder::Human), Some(o));
        }
        for (o, v) in expect_r {
            assert_eq!(option_to_value(o, OptionOrder::Reversed), Some(v));
            assert_eq!(value_to_option(v, OptionOrder::Reversed), Some(o));
        }
        for bad in [0, 6, -1, 99] {
            assert_eq!(option_to_value(bad, OptionOrder::Human), None);
            assert_eq!(option_to_value(bad, OptionOrder::Reversed), None);
        }
    }
}
