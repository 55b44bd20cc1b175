//! protospread-report
