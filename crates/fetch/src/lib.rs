//! protospread-fetch
