//! protospread-administer
