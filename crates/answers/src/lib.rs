//! protospread-answers
