//! Content hashes: cache keys, VM-kind keys, MANIFEST sums.

/// Hex SHA-256 of a byte string (lowercase).
pub(crate) fn sha256_hex(data: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(data))
}
