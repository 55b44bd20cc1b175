//! protospread-score
