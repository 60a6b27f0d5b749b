//! Colour: when to use it, and git's default diff colours.

use std::io::IsTerminal;

use crate::args::Color;

/// Whether `color` means colour on this stdout.
pub(crate) fn wanted(color: Color) -> bool {
    match color {
        Color::Always => true,
        Color::Never => false,
        Color::Auto => std::io::stdout().is_terminal(),
    }
}

/// `text` in `code` (an SGR parameter such as "31" for red) when `on`, else as it is.
pub(crate) fn paint(on: bool, code: &str, text: String) -> String {
    match on {
        true => format!("\x1b[{code}m{text}\x1b[m"),
        false => text,
    }
}

/// git's default diff colours: bold headers, cyan hunk ranges, red deletions, green additions.
/// Costs one pass over `text`.
pub(crate) fn colorize(text: &[u8]) -> Vec<u8> {
    const BOLD: &[u8] = b"\x1b[1m";
    const CYAN: &[u8] = b"\x1b[36m";
    const RED: &[u8] = b"\x1b[31m";
    const GREEN: &[u8] = b"\x1b[32m";
    const RESET: &[u8] = b"\x1b[m";
    let mut out = Vec::with_capacity(text.len() * 2);
    let mut in_hunk = false;
    for line in text.split_inclusive(|&b| b == b'\n') {
        let body = line.strip_suffix(b"\n").unwrap_or(line);
        in_hunk = (in_hunk || line.starts_with(b"@@")) && !line.starts_with(b"diff --git ");
        let paint = |out: &mut Vec<u8>, color: &[u8], part: &[u8]| {
            out.extend_from_slice(color);
            out.extend_from_slice(part);
            out.extend_from_slice(RESET);
        };
        match body.first() {
            Some(b'@') if in_hunk => {
                // "@@ -a,b +c,d @@" in cyan, the function context after it plain.
                let end = body[2..]
                    .windows(2)
                    .position(|w| w == b"@@")
                    .map_or(body.len(), |p| p + 4);
                paint(&mut out, CYAN, &body[..end]);
                out.extend_from_slice(&body[end..]);
            }
            Some(b'-') if in_hunk => paint(&mut out, RED, body),
            Some(b'+') if in_hunk => paint(&mut out, GREEN, body),
            _ if !in_hunk && !body.starts_with(b"Binary files ") => paint(&mut out, BOLD, body),
            _ => out.extend_from_slice(body),
        }
        if line.ends_with(b"\n") {
            out.push(b'\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::colorize;

    #[test]
    fn colorize_paints_headers_ranges_and_lines_but_not_the_function_context() {
        let diff = b"diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@ fn main\n-old\n+new\n";
        let painted = String::from_utf8(colorize(diff)).unwrap();
        assert_eq!(
            painted,
            "\x1b[1mdiff --git a/x b/x\x1b[m\n\x1b[1m--- a/x\x1b[m\n\x1b[1m+++ b/x\x1b[m\n\
             \x1b[36m@@ -1 +1 @@\x1b[m fn main\n\x1b[31m-old\x1b[m\n\x1b[32m+new\x1b[m\n"
        );
    }
}
