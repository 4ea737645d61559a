//! What makes a file an original archive: a compressed tar, known by the first bytes of the
//! compression (gzip or Zstandard). `pipeline pin` skips every other object by these bytes,
//! and the audit reads an archive with the decoder they name.

/// Compression of an original archive, detected from its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArchiveCompression {
    /// gzip, magic `1f 8b`.
    Gzip,
    /// Zstandard, magic `28 b5 2f fd`.
    Zstd,
}

impl ArchiveCompression {
    /// The longest magic: how many leading bytes [`ArchiveCompression::detect`] needs.
    pub const MAGIC_LEN: usize = 4;

    /// Detect from the leading bytes.
    pub fn detect(head: &[u8]) -> Option<Self> {
        if head.starts_with(&[0x1f, 0x8b]) {
            Some(ArchiveCompression::Gzip)
        } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
            Some(ArchiveCompression::Zstd)
        } else {
            None
        }
    }

    /// The leading bytes (at most [`ArchiveCompression::MAGIC_LEN`]) in hex, for a message.
    pub fn describe(head: &[u8]) -> String {
        let shown = &head[..head.len().min(Self::MAGIC_LEN)];
        let hex: Vec<String> = shown.iter().map(|b| format!("{b:02x}")).collect();
        hex.join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn magic_bytes_decide() {
        assert_eq!(
            ArchiveCompression::detect(&[0x1f, 0x8b, 8, 0]),
            Some(ArchiveCompression::Gzip)
        );
        assert_eq!(
            ArchiveCompression::detect(&[0x28, 0xb5, 0x2f, 0xfd, 1]),
            Some(ArchiveCompression::Zstd)
        );
        assert_eq!(ArchiveCompression::detect(b"# README"), None);
        assert_eq!(ArchiveCompression::detect(&[0x28, 0xb5]), None);
        assert_eq!(ArchiveCompression::describe(b"# README"), "23 20 52 45");
        assert_eq!(ArchiveCompression::describe(&[0x1f]), "1f");
    }
}
