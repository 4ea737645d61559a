//! Finding one member of an uncompressed tar (a raw shard) without reading the whole shard:
//! parsing 512-byte headers (ustar, PAX `path`/`size`, GNU long names), either one header at
//! a time by byte range ([`HeaderStep`]) or from a stream: every member ([`TarWalker`]) or
//! one of them ([`TarScanner`]).

use std::ops::ControlFlow;

/// Tar block size.
pub const BLOCK: u64 = 512;
/// Largest PAX or GNU long-name payload accepted.
pub const MAX_META_BYTES: u64 = 1 << 20;

/// One regular member of a tar: name and data range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberEntry {
    /// Member path.
    pub name: String,
    /// Offset of the first data byte in the tar.
    pub data_offset: u64,
    /// Data length.
    pub size: u64,
}

/// What a header block at some offset says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderStep {
    /// End of archive (a zero block).
    End,
    /// A metadata entry (PAX `x` or GNU `L`) whose payload of `size` bytes at `data_offset`
    /// must be read and applied to the next header.
    Meta {
        /// `x` or `L`.
        kind: u8,
        /// Payload offset.
        data_offset: u64,
        /// Payload length.
        size: u64,
    },
    /// An entry to skip or take; `name` and `size` are from the header alone.
    Entry {
        /// Entry type byte.
        kind: u8,
        /// Path from the header (prefix + name).
        name: String,
        /// Data offset.
        data_offset: u64,
        /// Data length.
        size: u64,
    },
}

/// Pending overrides from PAX / GNU headers for the next entry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PendingMeta {
    /// Path override.
    pub path: Option<String>,
    /// Size override.
    pub size: Option<u64>,
}

impl PendingMeta {
    /// Record a PAX (`x`) or GNU long name (`L`) payload.
    pub fn apply(&mut self, kind: u8, payload: &[u8]) {
        match kind {
            b'L' => {
                let end = payload
                    .iter()
                    .position(|b| *b == 0)
                    .unwrap_or(payload.len());
                self.path = Some(String::from_utf8_lossy(&payload[..end]).into_owned());
            }
            b'x' => {
                for ext in tar::PaxExtensions::new(payload).flatten() {
                    match ext.key() {
                        Ok("path") => {
                            if let Ok(v) = ext.value() {
                                self.path = Some(v.to_string());
                            }
                        }
                        Ok("size") => {
                            if let Some(v) = ext.value().ok().and_then(|v| v.parse().ok()) {
                                self.size = Some(v);
                            }
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
}

/// Round up to the next block.
pub fn padded(size: u64) -> u64 {
    size.div_ceil(BLOCK) * BLOCK
}

/// Parse the header block at `offset`. Errors say what is wrong with the block.
pub fn parse_header(block: &[u8; 512], offset: u64) -> Result<HeaderStep, String> {
    if block.iter().all(|b| *b == 0) {
        return Ok(HeaderStep::End);
    }
    let header = tar::Header::from_byte_slice(block);
    let stored = header
        .cksum()
        .map_err(|e| format!("tar header at byte {offset}: bad checksum field: {e}"))?;
    let computed: u32 = block
        .iter()
        .enumerate()
        .map(|(i, b)| {
            if (148..156).contains(&i) {
                32
            } else {
                *b as u32
            }
        })
        .sum();
    if stored != computed {
        return Err(format!(
            "no valid tar header at byte {offset} (checksum {stored} != {computed})"
        ));
    }
    let size = header
        .entry_size()
        .map_err(|e| format!("tar header at byte {offset}: bad size: {e}"))?;
    let kind = header.entry_type().as_byte();
    let data_offset = offset + BLOCK;
    if kind == b'x' || kind == b'L' {
        if size > MAX_META_BYTES {
            return Err(format!(
                "tar metadata entry at byte {offset} is {size} bytes, more than {MAX_META_BYTES}"
            ));
        }
        return Ok(HeaderStep::Meta {
            kind,
            data_offset,
            size,
        });
    }
    let name = String::from_utf8_lossy(&header.path_bytes()).into_owned();
    Ok(HeaderStep::Entry {
        kind,
        name,
        data_offset,
        size,
    })
}

/// Whether an entry type holds file data (regular file, old-style regular, contiguous).
pub fn is_regular(kind: u8) -> bool {
    matches!(kind, b'0' | 0 | b'7')
}

/// What a [`TarWalker`] reports while it walks a tar stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TarEvent<'a> {
    /// A regular member starts (PAX and GNU long-name overrides applied).
    MemberStart {
        /// Member path.
        name: &'a str,
        /// Data length.
        size: u64,
        /// Offset of its first data byte in the tar.
        data_offset: u64,
    },
    /// The next bytes of the current regular member.
    Data(&'a [u8]),
    /// The current regular member's data is complete (also right after the start of an
    /// empty member).
    MemberEnd,
}

/// Where a walk stands after a chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WalkStatus {
    /// Feed more bytes.
    NeedMore,
    /// The visitor asked to stop; the bytes after the stop were not consumed.
    Stopped,
    /// The end-of-archive block was read.
    End,
}

/// Walks an uncompressed tar fed in order, in chunks of any size, reporting every regular
/// member and its data to a visitor. Its state is positional: after a broken transfer the
/// same walker can be fed the bytes from [`TarWalker::offset`] on.
#[derive(Debug, Default)]
pub struct TarWalker {
    offset: u64,
    state: WalkState,
    pending: PendingMeta,
    header: Vec<u8>,
}

#[derive(Debug, Default)]
enum WalkState {
    #[default]
    Header,
    Meta {
        kind: u8,
        remaining: u64,
        buf: Vec<u8>,
        pad: u64,
    },
    Skip {
        remaining: u64,
    },
    Member {
        remaining: u64,
        pad: u64,
    },
    End,
}

impl TarWalker {
    /// A walker at byte 0.
    pub fn new() -> TarWalker {
        TarWalker::default()
    }

    /// Bytes consumed so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Whether the walk is between two entries (a tar may end there without its
    /// end-of-archive blocks).
    pub fn at_entry_boundary(&self) -> bool {
        matches!(self.state, WalkState::Header | WalkState::End) && self.header.is_empty()
    }

    /// Consume a chunk, reporting events to `visit`; an `Err` from the visitor stops the
    /// walk and is handed back, `Ok(ControlFlow::Break(()))` stops it with
    /// [`WalkStatus::Stopped`]. The inner `Err` says what is wrong with the tar.
    pub fn feed<E>(
        &mut self,
        mut chunk: &[u8],
        visit: &mut dyn FnMut(TarEvent<'_>) -> Result<ControlFlow<()>, E>,
    ) -> Result<Result<WalkStatus, String>, E> {
        while !chunk.is_empty() {
            match &mut self.state {
                WalkState::End => break,
                WalkState::Header => {
                    let take = (512 - self.header.len()).min(chunk.len());
                    self.header.extend_from_slice(&chunk[..take]);
                    chunk = &chunk[take..];
                    self.offset += take as u64;
                    if self.header.len() < 512 {
                        continue;
                    }
                    let block: [u8; 512] = self.header[..].try_into().expect("512 bytes");
                    self.header.clear();
                    let at = self.offset - BLOCK;
                    let step = match parse_header(&block, at) {
                        Ok(s) => s,
                        Err(e) => return Ok(Err(e)),
                    };
                    match step {
                        HeaderStep::End => self.state = WalkState::End,
                        HeaderStep::Meta { kind, size, .. } => {
                            self.state = WalkState::Meta {
                                kind,
                                remaining: size,
                                buf: Vec::new(),
                                pad: padded(size) - size,
                            }
                        }
                        HeaderStep::Entry {
                            kind,
                            name,
                            data_offset,
                            size,
                        } => {
                            let pending = std::mem::take(&mut self.pending);
                            let name = pending.path.unwrap_or(name);
                            let size = pending.size.unwrap_or(size);
                            if !is_regular(kind) {
                                self.state = WalkState::Skip {
                                    remaining: padded(size),
                                };
                                continue;
                            }
                            self.state = WalkState::Member {
                                remaining: size,
                                pad: padded(size) - size,
                            };
                            let start = TarEvent::MemberStart {
                                name: &name,
                                size,
                                data_offset,
                            };
                            if visit(start)?.is_break() {
                                return Ok(Ok(WalkStatus::Stopped));
                            }
                            if size == 0 {
                                self.state = WalkState::Header;
                                if visit(TarEvent::MemberEnd)?.is_break() {
                                    return Ok(Ok(WalkStatus::Stopped));
                                }
                            }
                        }
                    }
                }
                WalkState::Meta {
                    kind,
                    remaining,
                    buf,
                    pad,
                } => {
                    if *remaining > 0 {
                        let take = (*remaining).min(chunk.len() as u64) as usize;
                        buf.extend_from_slice(&chunk[..take]);
                        chunk = &chunk[take..];
                        *remaining -= take as u64;
                        self.offset += take as u64;
                    } else {
                        let take = (*pad).min(chunk.len() as u64) as usize;
                        chunk = &chunk[take..];
                        *pad -= take as u64;
                        self.offset += take as u64;
                    }
                    if *remaining == 0 && *pad == 0 {
                        let kind = *kind;
                        let payload = std::mem::take(buf);
                        self.pending.apply(kind, &payload);
                        self.state = WalkState::Header;
                    }
                }
                WalkState::Skip { remaining } => {
                    let take = (*remaining).min(chunk.len() as u64) as usize;
                    chunk = &chunk[take..];
                    *remaining -= take as u64;
                    self.offset += take as u64;
                    if *remaining == 0 {
                        self.state = WalkState::Header;
                    }
                }
                WalkState::Member { remaining, pad } => {
                    let take = (*remaining).min(chunk.len() as u64) as usize;
                    let data = &chunk[..take];
                    chunk = &chunk[take..];
                    *remaining -= take as u64;
                    self.offset += take as u64;
                    if *remaining > 0 {
                        if visit(TarEvent::Data(data))?.is_break() {
                            return Ok(Ok(WalkStatus::Stopped));
                        }
                        continue;
                    }
                    let pad = *pad;
                    self.state = if pad == 0 {
                        WalkState::Header
                    } else {
                        WalkState::Skip { remaining: pad }
                    };
                    if !data.is_empty() && visit(TarEvent::Data(data))?.is_break() {
                        return Ok(Ok(WalkStatus::Stopped));
                    }
                    if visit(TarEvent::MemberEnd)?.is_break() {
                        return Ok(Ok(WalkStatus::Stopped));
                    }
                }
            }
        }
        Ok(Ok(match self.state {
            WalkState::End => WalkStatus::End,
            _ => WalkStatus::NeedMore,
        }))
    }
}

/// Streaming search for one member: feed the tar's bytes in order; the member's data is
/// passed to a callback as it goes by. A [`TarWalker`] that watches for one name.
#[derive(Debug)]
pub struct TarScanner {
    want: String,
    walker: TarWalker,
    in_member: bool,
    found: Option<u64>,
    done: bool,
}

/// Where a scan stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScanStatus {
    /// Feed more bytes.
    NeedMore,
    /// The member's data was passed completely; `size` bytes.
    Found {
        /// Member data length.
        size: u64,
    },
    /// The tar ended without the member.
    Missing,
}

impl TarScanner {
    /// Look for member `want`.
    pub fn new(want: &str) -> TarScanner {
        TarScanner {
            want: want.to_string(),
            walker: TarWalker::new(),
            in_member: false,
            found: None,
            done: false,
        }
    }

    /// Bytes consumed so far.
    pub fn offset(&self) -> u64 {
        self.walker.offset()
    }

    /// Consume a chunk. `on_data` gets the member's data; its error stops the scan.
    /// `on_found` is told the member's size when its header is read.
    pub fn feed<E>(
        &mut self,
        chunk: &[u8],
        on_found: &mut dyn FnMut(u64) -> Result<(), E>,
        on_data: &mut dyn FnMut(&[u8]) -> Result<(), E>,
    ) -> Result<Result<ScanStatus, String>, E> {
        if !self.done {
            let (want, in_member, found, done) = (
                &self.want,
                &mut self.in_member,
                &mut self.found,
                &mut self.done,
            );
            let status = self.walker.feed(chunk, &mut |ev| {
                match ev {
                    TarEvent::MemberStart { name, size, .. } if name == want.as_str() => {
                        on_found(size)?;
                        *found = Some(size);
                        *in_member = true;
                    }
                    TarEvent::Data(d) if *in_member => on_data(d)?,
                    TarEvent::MemberEnd if *in_member => {
                        *done = true;
                        return Ok(ControlFlow::Break(()));
                    }
                    _ => {}
                }
                Ok(ControlFlow::Continue(()))
            })?;
            match status {
                Err(e) => return Ok(Err(e)),
                Ok(WalkStatus::End) => return Ok(Ok(ScanStatus::Missing)),
                Ok(WalkStatus::NeedMore) => return Ok(Ok(ScanStatus::NeedMore)),
                Ok(WalkStatus::Stopped) => {}
            }
        }
        Ok(Ok(ScanStatus::Found {
            size: self.found.unwrap_or(0),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tar with: a short ustar member, a GNU long-name member, a PAX-path member, a
    /// directory, and an empty member.
    fn sample() -> (Vec<u8>, Vec<(String, Vec<u8>)>) {
        let long = format!("deep/{}/archive.tar.zst", "x".repeat(120));
        let pax = "pax/renamed-by-pax.tar.gz".to_string();
        let members = vec![
            (
                "a.tar.gz".to_string(),
                (0..1300u32).map(|i| (i % 251) as u8).collect::<Vec<u8>>(),
            ),
            (long.clone(), vec![7u8; 513]),
            (pax.clone(), b"pax member data".to_vec()),
            ("empty.bin".to_string(), Vec::new()),
        ];
        let mut b = tar::Builder::new(Vec::new());
        let mut h = tar::Header::new_gnu();
        h.set_size(members[0].1.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        b.append_data(&mut h, &members[0].0, members[0].1.as_slice())
            .unwrap();
        let mut h = tar::Header::new_gnu();
        h.set_size(members[1].1.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        b.append_data(&mut h, &members[1].0, members[1].1.as_slice())
            .unwrap();
        // A PAX header whose path overrides the ustar name.
        b.append_pax_extensions([("path", pax.as_bytes())]).unwrap();
        let mut h = tar::Header::new_ustar();
        h.set_path("short-name").unwrap();
        h.set_size(members[2].1.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        b.append(&h, members[2].1.as_slice()).unwrap();
        let mut d = tar::Header::new_ustar();
        d.set_path("somedir/").unwrap();
        d.set_entry_type(tar::EntryType::Directory);
        d.set_size(0);
        d.set_cksum();
        b.append(&d, &[][..]).unwrap();
        let mut h = tar::Header::new_ustar();
        h.set_path("empty.bin").unwrap();
        h.set_size(0);
        h.set_cksum();
        b.append(&h, &[][..]).unwrap();
        (b.into_inner().unwrap(), members)
    }

    fn scan(tar: &[u8], want: &str, chunk: usize) -> (ScanStatus, Vec<u8>) {
        let mut s = TarScanner::new(want);
        let mut out = Vec::new();
        let mut status = ScanStatus::NeedMore;
        for c in tar.chunks(chunk) {
            status = s
                .feed::<()>(c, &mut |_| Ok(()), &mut |d| {
                    out.extend_from_slice(d);
                    Ok(())
                })
                .unwrap()
                .unwrap();
            if status != ScanStatus::NeedMore {
                break;
            }
        }
        (status, out)
    }

    #[test]
    fn scanner_finds_every_member_at_any_chunking() {
        let (tar, members) = sample();
        for chunk in [1, 7, 511, 512, 513, 4096, tar.len()] {
            for (name, data) in &members {
                let (status, out) = scan(&tar, name, chunk);
                assert_eq!(
                    status,
                    ScanStatus::Found {
                        size: data.len() as u64
                    },
                    "{name} @ {chunk}"
                );
                assert_eq!(&out, data, "{name} @ {chunk}");
            }
            assert_eq!(
                scan(&tar, "short-name", chunk).0,
                ScanStatus::Missing,
                "pax path wins"
            );
            assert_eq!(
                scan(&tar, "somedir/", chunk).0,
                ScanStatus::Missing,
                "directories are not members"
            );
            assert_eq!(scan(&tar, "nope", chunk).0, ScanStatus::Missing);
        }
    }

    #[test]
    fn walker_reports_every_regular_member_at_any_chunking() {
        let (tar, members) = sample();
        for chunk in [1, 7, 511, 512, 513, 4096, tar.len()] {
            let mut w = TarWalker::new();
            let mut got: Vec<(String, Vec<u8>)> = Vec::new();
            let mut ends = 0;
            let mut status = WalkStatus::NeedMore;
            for c in tar.chunks(chunk) {
                status = w
                    .feed::<()>(c, &mut |ev| {
                        match ev {
                            TarEvent::MemberStart { name, .. } => {
                                got.push((name.to_string(), Vec::new()))
                            }
                            TarEvent::Data(d) => got.last_mut().unwrap().1.extend_from_slice(d),
                            TarEvent::MemberEnd => ends += 1,
                        }
                        Ok(ControlFlow::Continue(()))
                    })
                    .unwrap()
                    .unwrap();
                if status == WalkStatus::End {
                    break;
                }
            }
            assert_eq!(status, WalkStatus::End, "chunk {chunk}");
            assert_eq!(got, members, "chunk {chunk}");
            assert_eq!(ends, members.len(), "chunk {chunk}");
        }
    }

    #[test]
    fn header_walk_gives_the_same_ranges_as_the_scanner() {
        let (tar, members) = sample();
        let mut pos = 0u64;
        let mut pending = PendingMeta::default();
        let mut found = Vec::new();
        loop {
            let block: [u8; 512] = tar[pos as usize..pos as usize + 512].try_into().unwrap();
            match parse_header(&block, pos).unwrap() {
                HeaderStep::End => break,
                HeaderStep::Meta {
                    kind,
                    data_offset,
                    size,
                } => {
                    pending.apply(
                        kind,
                        &tar[data_offset as usize..(data_offset + size) as usize],
                    );
                    pos = data_offset + padded(size);
                }
                HeaderStep::Entry {
                    kind,
                    name,
                    data_offset,
                    size,
                } => {
                    let p = std::mem::take(&mut pending);
                    let name = p.path.unwrap_or(name);
                    if is_regular(kind) {
                        found.push((
                            name,
                            tar[data_offset as usize..(data_offset + size) as usize].to_vec(),
                        ));
                    }
                    pos = data_offset + padded(size);
                }
            }
        }
        assert_eq!(found, members);
    }

    #[test]
    fn a_corrupt_header_is_named_by_offset() {
        let (mut tar, _) = sample();
        tar[3] ^= 0x55;
        let block: [u8; 512] = tar[..512].try_into().unwrap();
        let e = parse_header(&block, 0).unwrap_err();
        assert!(
            e.starts_with("no valid tar header at byte 0 (checksum "),
            "{e}"
        );
    }
}
