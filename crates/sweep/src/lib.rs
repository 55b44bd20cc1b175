//! protospread-sweep
