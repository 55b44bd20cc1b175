//! protospread-aggregate
