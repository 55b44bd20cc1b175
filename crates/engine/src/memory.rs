//! Recognising a plan that ran out of its memory pool, whatever error wraps it.

use datafusion::error::DataFusionError;

/// What DataFusion's pools write when a reservation fails. Several stages keep only the text
/// of an engine error (with the file or table it concerns), so the text is matched too.
const POOL_MESSAGES: [&str; 2] = ["Resources exhausted", "Failed to allocate additional"];

/// Whether `e`, or a cause in its chain, is the engine failing to reserve memory from its
/// pool: an operator that cannot spill (a hash join's build side) or one that cannot get
/// even the memory to merge what it spilled. The remedy is a larger
/// [`crate::EngineOptions::memory_limit`], not a change to the input.
pub fn is_out_of_memory(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(e);
    while let Some(c) = cause {
        if let Some(DataFusionError::ResourcesExhausted(_)) = c
            .downcast_ref::<DataFusionError>()
            .map(DataFusionError::find_root)
        {
            return true;
        }
        let text = c.to_string();
        if POOL_MESSAGES.iter().any(|m| text.contains(m)) {
            return true;
        }
        cause = c.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("aggregate: {0}")]
    struct Wrapped(#[source] DataFusionError);

    #[derive(Debug, thiserror::Error)]
    #[error("reading answers.parquet: {0}")]
    struct AsText(String);

    #[test]
    fn pool_failures_are_recognised_through_wrappers_and_text() {
        let exhausted = || DataFusionError::ResourcesExhausted("no room for HashJoinInput".into());
        assert!(is_out_of_memory(&exhausted()));
        let nested = DataFusionError::Context("join".into(), Box::new(exhausted()));
        assert!(is_out_of_memory(&Wrapped(nested)));
        assert!(is_out_of_memory(&AsText(
            "Failed to allocate additional 10.0 MB for ExternalSorterMerge[1]".into()
        )));
        assert!(!is_out_of_memory(&Wrapped(DataFusionError::Plan(
            "no column x".into()
        ))));
        assert!(!is_out_of_memory(&AsText("row 3, column item: 19".into())));
    }
}
