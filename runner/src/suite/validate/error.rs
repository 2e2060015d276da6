//! [`ValidationError`]: one broken rule, at its key path.

use crate::schema::text::{non_ascii_hint, shown};

/// One broken rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValidationError {
    /// A name doesn't match its pattern.
    #[error("{what} {} is not a valid name ({pattern}){}", shown(.value, 80), non_ascii_hint(.value))]
    BadName {
        /// Key path.
        key: String,
        /// Which kind of name.
        what: &'static str,
        /// The value.
        value: String,
        /// Allowed pattern.
        pattern: &'static str,
    },
    /// Two things share a name that must be unique.
    #[error("{what} {} is used twice (first at {first})", shown(.value, 80))]
    Duplicate {
        /// Key path of the second use.
        key: String,
        /// Which kind of name.
        what: &'static str,
        /// The value.
        value: String,
        /// Key path of the first use.
        first: String,
    },
    /// A number or duration outside its limits.
    #[error("{value} is out of range (allowed: {range})")]
    OutOfRange {
        /// Key path.
        key: String,
        /// The value as written.
        value: String,
        /// Allowed range.
        range: String,
    },
    /// An address outside the subnet, or the subnet's network/broadcast address.
    #[error("{address} is not a usable host address of the suite's subnet {subnet}")]
    AddressOutsideSubnet {
        /// Key path.
        key: String,
        /// The address.
        address: String,
        /// The subnet.
        subnet: String,
    },
    /// A reference to something that doesn't exist.
    #[error("{what} {} does not exist{hint}{}", shown(.value, 80), non_ascii_hint(.value))]
    Unknown {
        /// Key path.
        key: String,
        /// What was referenced.
        what: &'static str,
        /// The reference.
        value: String,
        /// Extra help (", known: …").
        hint: String,
    },
    /// Any other rule.
    #[error("{message}")]
    Rule {
        /// Key path.
        key: String,
        /// What is wrong.
        message: String,
    },
}

impl ValidationError {
    /// The key path the error is about.
    pub fn key(&self) -> &str {
        match self {
            ValidationError::BadName { key, .. }
            | ValidationError::Duplicate { key, .. }
            | ValidationError::OutOfRange { key, .. }
            | ValidationError::AddressOutsideSubnet { key, .. }
            | ValidationError::Unknown { key, .. }
            | ValidationError::Rule { key, .. } => key,
        }
    }
}
