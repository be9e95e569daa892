//! The fast path of the output check: one byte scan that accepts a decision
//! or envelope written the plain way, and hands everything else to serde.
//!
//! # Why a second reader?
//!
//! serde's derive over the text costs about as much as a sixth of a whole
//! `decide-json` call through wasmtime. This scan does the same checks
//! (strict JSON, one object, every required member once, the typed members
//! of the right type) on the common shape only, in a few instructions per
//! byte. It only ever says "certainly valid": whenever it is unsure (an
//! escaped member name, a `\u` escape, deep nesting, a duplicate member, the
//! sequence form serde also takes, any error) it answers `false` and the
//! serde check in `output.rs` decides and words the error. So a text is
//! accepted exactly when serde accepts it, and a bad one gets serde's error.
//! The tests in `output.rs` hold every accepted text against serde.

/// The envelope's members, in the order of `EnvelopeShape` (at most 32).
const ENVELOPE: [&[u8]; 15] = [
    b"code",
    b"class",
    b"retryable",
    b"message",
    b"severity",
    b"category",
    b"retry_after_ms",
    b"field",
    b"allowed_values",
    b"suggested_value",
    b"hint",
    b"request_id",
    b"related_codes",
    b"docs_url",
    b"upstream",
];

/// The decision's members, in the order of `DecisionShape`.
const DECISION: [&[u8]; 8] = [
    b"action",
    b"delay_ms",
    b"attempt",
    b"max_attempts",
    b"budget_remaining_ms",
    b"reason",
    b"reason_code",
    b"envelope",
];

/// Nesting the scan follows before it leaves the text to serde (whose own
/// limit is 128).
const MAX_DEPTH: u32 = 64;

/// True only if serde's check certainly accepts `text` as an envelope
/// (`decision == false`) or a decision.
pub(crate) fn accepts(decision: bool, text: &str) -> bool {
    let mut scan = Scan {
        bytes: text.as_bytes(),
        at: 0,
    };
    scan.whitespace();
    let shape = if decision {
        scan.decision()
    } else {
        scan.envelope()
    };
    scan.whitespace();
    shape.is_some() && scan.at == scan.bytes.len()
}

/// The index of the first byte from `at` on that ends a run of plain string
/// text (`"`, `\\` or a control character), or the length of `bytes`. Eight
/// bytes at a time: most of a decision's text is inside strings.
fn plain_end(bytes: &[u8], mut at: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // Whether a byte of `word` is zero (exact for the first such byte, which
    // is all that matters: the word is then read byte by byte).
    let zero = |word: u64| word.wrapping_sub(ONES) & !word & HIGH;
    while let Some(chunk) = bytes.get(at..at + 8) {
        let mut word = [0; 8];
        word.copy_from_slice(chunk);
        let word = u64::from_le_bytes(word);
        let special = zero(word ^ (ONES * u64::from(b'"')))
            | zero(word ^ (ONES * u64::from(b'\\')))
            | (word.wrapping_sub(ONES * 0x20) & !word & HIGH);
        if special != 0 {
            break;
        }
        at += 8;
    }
    while let Some(&byte) = bytes.get(at) {
        if byte == b'"' || byte == b'\\' || byte < 0x20 {
            break;
        }
        at += 1;
    }
    at
}

/// A cursor over the text. Every method returns `None` to give up.
struct Scan<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Scan<'a> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let byte = self.peek()?;
        self.at += 1;
        Some(byte)
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        (self.next()? == byte).then_some(())
    }

    /// JSON's whitespace, as serde_json reads it.
    fn whitespace(&mut self) {
        while let Some(b' ' | b'\n' | b'\t' | b'\r') = self.peek() {
            self.at += 1;
        }
    }

    fn decision(&mut self) -> Option<()> {
        self.object(&DECISION, |scan, member| match member {
            0 => scan.string(),
            7 => scan.envelope(),
            _ => scan.value(1),
        })
    }

    fn envelope(&mut self) -> Option<()> {
        self.object(&ENVELOPE, |scan, member| match member {
            0 | 1 => scan.string(),
            2 => scan.boolean(),
            _ => scan.value(2),
        })
    }

    /// An object with each of `members` exactly once (`member` reads the
    /// value of the one at that index) and any other members.
    fn object(
        &mut self,
        members: &[&[u8]],
        mut member: impl FnMut(&mut Self, usize) -> Option<()>,
    ) -> Option<()> {
        self.eat(b'{')?;
        let mut seen: u32 = 0;
        loop {
            self.whitespace();
            let name = self.name()?;
            self.whitespace();
            self.eat(b':')?;
            self.whitespace();
            match members.iter().position(|m| *m == name) {
                Some(index) => {
                    let bit = 1 << index;
                    if seen & bit != 0 {
                        return None;
                    }
                    seen |= bit;
                    member(self, index)?;
                }
                None => self.value(2)?,
            }
            self.whitespace();
            match self.next()? {
                b',' => {}
                b'}' => break,
                _ => return None,
            }
        }
        (seen == (1 << members.len()) - 1).then_some(())
    }

    /// A member name without escapes, as its bytes.
    fn name(&mut self) -> Option<&'a [u8]> {
        self.eat(b'"')?;
        let start = self.at;
        self.at = plain_end(self.bytes, start);
        let len = self.at - start;
        self.eat(b'"')?;
        self.bytes.get(start..start + len)
    }

    /// A string; `\u` escapes are left to serde.
    fn string(&mut self) -> Option<()> {
        self.eat(b'"')?;
        loop {
            self.at = plain_end(self.bytes, self.at);
            match self.next()? {
                b'"' => return Some(()),
                b'\\' => match self.next()? {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {}
                    _ => return None,
                },
                _ => return None,
            }
        }
    }

    fn boolean(&mut self) -> Option<()> {
        if self.bytes[self.at..].starts_with(b"true") {
            self.at += 4;
            Some(())
        } else if self.bytes[self.at..].starts_with(b"false") {
            self.at += 5;
            Some(())
        } else {
            None
        }
    }

    /// Any JSON value, `depth` levels down.
    fn value(&mut self, depth: u32) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        match self.peek()? {
            b'"' => self.string(),
            b'{' => self.any_object(depth + 1),
            b'[' => self.array(depth + 1),
            b't' | b'f' => self.boolean(),
            b'n' if self.bytes[self.at..].starts_with(b"null") => {
                self.at += 4;
                Some(())
            }
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    fn any_object(&mut self, depth: u32) -> Option<()> {
        self.eat(b'{')?;
        self.whitespace();
        if self.peek()? == b'}' {
            self.at += 1;
            return Some(());
        }
        loop {
            self.whitespace();
            self.string()?;
            self.whitespace();
            self.eat(b':')?;
            self.whitespace();
            self.value(depth)?;
            self.whitespace();
            match self.next()? {
                b',' => {}
                b'}' => return Some(()),
                _ => return None,
            }
        }
    }

    fn array(&mut self, depth: u32) -> Option<()> {
        self.eat(b'[')?;
        self.whitespace();
        if self.peek()? == b']' {
            self.at += 1;
            return Some(());
        }
        loop {
            self.whitespace();
            self.value(depth)?;
            self.whitespace();
            match self.next()? {
                b',' => {}
                b']' => return Some(()),
                _ => return None,
            }
        }
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`
    fn number(&mut self) -> Option<()> {
        if self.peek() == Some(b'-') {
            self.at += 1;
        }
        match self.next()? {
            b'0' => {}
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.peek() == Some(b'.') {
            self.at += 1;
            self.digit()?;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.at += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.at += 1;
            }
            self.digit()?;
        }
        Some(())
    }

    /// At least one digit.
    fn digit(&mut self) -> Option<()> {
        self.next()?.is_ascii_digit().then(|| self.digits())
    }

    fn digits(&mut self) {
        while let Some(b'0'..=b'9') = self.peek() {
            self.at += 1;
        }
    }
}
