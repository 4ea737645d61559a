//! Names a record holds as one of a fixed list of static names (a schedule, an operator,
//! an objective): written from the list, read back as its entry or refused.

use serde::Deserialize;

/// A name a record holds as one of a fixed list of static names (a schedule, an operator).
/// Spelled as an alias because serde's derive borrows a field written `&'static str` from
/// the input, which a document read from a file cannot lend; such fields are read with
/// [`known_name`] instead, which also refuses a name this build does not know.
pub type StaticName = &'static str;

/// `name` as its entry of `known` (the static names a record is written from), or an error
/// naming what was read and what is known.
pub fn lookup_name(
    name: &str,
    known: impl IntoIterator<Item = &'static str>,
    what: &str,
) -> Result<&'static str, String> {
    let known: Vec<&'static str> = known.into_iter().collect();
    known
        .iter()
        .find(|k| **k == name)
        .copied()
        .ok_or_else(|| format!("unknown {what} `{name}` (known: {})", known.join(", ")))
}

/// Deserialize a string as its entry of `known` (see [`lookup_name`]).
pub fn known_name<'de, D: serde::Deserializer<'de>>(
    d: D,
    known: impl IntoIterator<Item = &'static str>,
    what: &str,
) -> Result<&'static str, D::Error> {
    let name = String::deserialize(d)?;
    lookup_name(&name, known, what).map_err(serde::de::Error::custom)
}
