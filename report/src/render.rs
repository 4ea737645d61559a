//! Escaping, and the HTML page: the report's Markdown rendered by pulldown-cmark (tables on,
//! raw HTML shown as text), the charts as figures, and a small stylesheet for screen and print.
//!
//! Escaping rules:
//! - [`md_text`] makes a data string plain Markdown text: it can neither create markup nor end
//!   a table cell (see its rules).
//! - [`md_code`] makes a data string the content of a code span.
//! - [`html_escape`] escapes `&`, `<`, `>`, `"` and `'` for HTML text and attribute values.
//! - [`md_to_html`] turns every raw HTML event of the Markdown into escaped text, so even a
//!   string that escaped [`md_text`] could not reach the page as markup.

use crate::charts::Figure;
use pulldown_cmark::{Alignment, CowStr, Event, Options, Parser, Tag, TagEnd};
use std::fmt::Write as _;

/// A data string as plain Markdown text, for a table cell, a list item or a paragraph:
/// - line breaks (`\n`, `\r`) become spaces and surrounding whitespace is dropped (a table
///   cell drops it anyway), so the string stays on its line;
/// - `\` `` ` `` `*` `[` `]` `<` `>` `|` `&` are backslash-escaped everywhere (no emphasis,
///   code span, link, autolink, raw HTML, entity or cell break);
/// - `_` is backslash-escaped unless its run sits between two alphanumeric characters: such
///   an intraword `_` can neither open nor close emphasis (CommonMark 6.2), so
///   `superseded_by_census` and `best_gpu` stay as they are;
/// - at the start, `#` (heading), `-` and `+` followed by a space or the end (list item), and
///   digits followed by `.` or `)` and a space or the end (ordered list item) are escaped.
pub(crate) fn md_text(s: &str) -> String {
    let chars: Vec<char> = s
        .trim()
        .chars()
        .map(|c| if matches!(c, '\n' | '\r') { ' ' } else { c })
        .collect();
    let marker_end = |i: usize| chars.get(i).is_none_or(|c| c.is_whitespace());
    // The index of a leading block marker's punctuation, if any.
    let lead = match chars.first() {
        Some('#') => Some(0),
        Some('-' | '+') if marker_end(1) => Some(0),
        Some(c) if c.is_ascii_digit() => {
            let d = chars.iter().take_while(|c| c.is_ascii_digit()).count();
            (matches!(chars.get(d), Some('.' | ')')) && marker_end(d + 1)).then_some(d)
        }
        _ => None,
    };
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '_' {
            let run = chars[i..].iter().take_while(|&&c| c == '_').count();
            let before = i.checked_sub(1).map(|k| chars[k]);
            let after = chars.get(i + run);
            let intraword = before.is_some_and(char::is_alphanumeric)
                && after.is_some_and(|c| c.is_alphanumeric());
            for _ in 0..run {
                if !intraword {
                    out.push('\\');
                }
                out.push('_');
            }
            i += run;
            continue;
        }
        if matches!(c, '\\' | '`' | '*' | '[' | ']' | '<' | '>' | '|' | '&') || lead == Some(i) {
            out.push('\\');
        }
        out.push(c);
        i += 1;
    }
    out
}

/// A data string as a code span (with its backticks): the fence is one backtick longer than
/// the longest backtick run inside, and spaces pad the content when it starts or ends with a
/// backtick or a space, so it is shown exactly (line breaks as spaces) and nothing inside is
/// markup. For a list item or paragraph, not a table cell (a `|` would still end the cell).
pub(crate) fn md_code(s: &str) -> String {
    let s: String = s
        .chars()
        .map(|c| if matches!(c, '\n' | '\r') { ' ' } else { c })
        .collect();
    let mut longest = 0;
    let mut run = 0;
    for c in s.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat(longest + 1);
    let pad = s.starts_with(['`', ' ']) || s.ends_with(['`', ' ']);
    let pad = if pad && !s.is_empty() { " " } else { "" };
    format!("{fence}{pad}{s}{pad}{fence}")
}

/// `s` escaped for HTML text and attribute values: `&`, `<`, `>`, `"`, `'`.
pub(crate) fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Does a table cell hold a number (its first word parses, e.g. `22.592 (converged)`)?
/// `None` for `-`, which fits any column.
fn numeric_cell(text: &str) -> Option<bool> {
    let t = text.trim();
    if t == "-" {
        return None;
    }
    Some(
        t.split_whitespace()
            .next()
            .is_some_and(|w| w.parse::<f64>().is_ok()),
    )
}

/// Right-align the numeric columns of the table whose events start at `events[start]`
/// (`Start(Tag::Table)`): a column is numeric when its body cells are numbers or `-`, at
/// least one a number.
fn align_numeric_columns(events: &mut [Event<'_>], start: usize) {
    let mut cells: Vec<Vec<Option<bool>>> = Vec::new();
    let (mut col, mut in_body, mut text) = (0, false, String::new());
    for ev in &events[start + 1..] {
        match ev {
            Event::End(TagEnd::Table) => break,
            Event::End(TagEnd::TableHead) => in_body = true,
            Event::Start(Tag::TableRow) => col = 0,
            Event::Start(Tag::TableCell) => text.clear(),
            Event::Text(t) | Event::Code(t) => text.push_str(t),
            Event::End(TagEnd::TableCell) => {
                if in_body {
                    if cells.len() <= col {
                        cells.resize(col + 1, Vec::new());
                    }
                    cells[col].push(numeric_cell(&text));
                }
                col += 1;
            }
            _ => {}
        }
    }
    if let Event::Start(Tag::Table(aligns)) = &mut events[start] {
        for (a, column) in aligns.iter_mut().zip(&cells) {
            let numbers = column.iter().filter(|c| **c == Some(true)).count();
            if *a == Alignment::None && numbers > 0 && !column.contains(&Some(false)) {
                *a = Alignment::Right;
            }
        }
    }
}

/// The report's Markdown as HTML (CommonMark with GitHub tables): every raw HTML event is
/// shown as escaped text, numeric table columns are right-aligned, and each table is wrapped
/// in a `div.table-wrap` (scrolls sideways on a narrow screen).
pub(crate) fn md_to_html(md: &str) -> String {
    let mut events: Vec<Event> = Parser::new_ext(md, Options::ENABLE_TABLES)
        .map(|ev| match ev {
            Event::Html(s) | Event::InlineHtml(s) => Event::Text(s),
            ev => ev,
        })
        .collect();
    let tables: Vec<usize> = (0..events.len())
        .filter(|&i| matches!(events[i], Event::Start(Tag::Table(_))))
        .collect();
    for &t in &tables {
        align_numeric_columns(&mut events, t);
    }
    // Only after the raw HTML of the Markdown became text: the wrappers are the renderer's own.
    let wrapped = events.into_iter().flat_map(|ev| match ev {
        Event::Start(Tag::Table(_)) => vec![
            Event::Html(CowStr::Borrowed("<div class=\"table-wrap\">")),
            ev,
        ],
        Event::End(TagEnd::Table) => vec![ev, Event::Html(CowStr::Borrowed("</div>\n"))],
        ev => vec![ev],
    });
    let mut out = String::new();
    pulldown_cmark::html::push_html(&mut out, wrapped);
    out
}

/// The page's stylesheet: readable tables (borders, padding, zebra rows, right-aligned
/// numbers via the cells' alignment) and charts within the text width, on screen and in print
/// (no table, table row, figure or chart split across pages where it fits on one).
const STYLE: &str = "\
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;line-height:1.45;color:#1a1a1a;background:#fff;max-width:1100px;margin:2em auto;padding:0 1em}
h1{font-size:1.6em;margin:0 0 .6em}
h2{font-size:1.3em;margin:1.6em 0 .5em;padding-bottom:.2em;border-bottom:1px solid #d0d7de}
h3{font-size:1.1em;margin:1.3em 0 .4em}
code{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.92em;background:#f3f4f6;padding:0 .25em;border-radius:3px;overflow-wrap:anywhere}
.table-wrap{overflow-x:auto;margin:.8em 0}
table{border-collapse:collapse;font-size:.9em;font-variant-numeric:tabular-nums}
th,td{border:1px solid #c4c9d0;padding:.3em .6em;vertical-align:top}
th{background:#eef1f4;font-weight:600;text-align:left}
td{text-align:left}
tbody tr:nth-child(even){background:#f7f8fa}
figure{margin:1.5em 0}
figcaption{font-weight:600;margin-bottom:.4em}
figure svg{display:block;max-width:100%;height:auto}
@media print{
body{max-width:none;margin:0;padding:0;font-size:10pt}
.table-wrap{overflow:visible}
table{font-size:8.5pt}
thead{display:table-header-group}
table,tr,figure,svg{break-inside:avoid;page-break-inside:avoid}
h2,h3{break-after:avoid;page-break-after:avoid}
figure svg{width:100%;max-width:100%;height:auto}
tbody tr:nth-child(even){background:#f2f2f2;-webkit-print-color-adjust:exact;print-color-adjust:exact}
}
";

/// The whole page: the Markdown rendered, then one figure per chart (caption escaped; the SVG
/// as plotters wrote it, its text already escaped). Self-contained: no script, link or import.
pub(crate) fn page(md: &str, figures: &[Figure]) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>agentrace report</title>\n<style>\n{STYLE}</style></head><body>\n{}",
        md_to_html(md)
    );
    for f in figures {
        let _ = writeln!(
            out,
            "<figure><figcaption>{}</figcaption>{}</figure>",
            html_escape(&f.caption),
            f.svg
        );
    }
    out.push_str("</body></html>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn md_text_leaves_plain_identifiers_alone() {
        for s in [
            "tmax",
            "repo02__issue-00002__a3",
            "superseded_by_census",
            "infra_error: sandbox lost: node preempted",
            "AgentTimeoutError: agent exceeded its wall-clock budget",
            "2000",
            "22.592 (converged)",
            "best-cache",
        ] {
            assert_eq!(md_text(s), s);
        }
    }

    #[test]
    fn md_text_escapes_markup_and_block_markers() {
        assert_eq!(md_text("*x*"), "\\*x\\*");
        assert_eq!(md_text("_x_ a_ _b"), "\\_x\\_ a\\_ \\_b");
        assert_eq!(md_text("a|b`c`\\"), "a\\|b\\`c\\`\\\\");
        assert_eq!(md_text("<b>&amp;[l](u)"), "\\<b\\>\\&amp;\\[l\\](u)");
        assert_eq!(md_text("# h"), "\\# h");
        assert_eq!(md_text("- x"), "\\- x");
        assert_eq!(md_text("12. x"), "12\\. x");
        assert_eq!(md_text("1) x"), "1\\) x");
        assert_eq!(md_text("-1.5"), "-1.5");
        assert_eq!(md_text(" a\nb\r\n"), "a b");
    }

    #[test]
    fn md_code_shows_the_string_exactly() {
        assert_eq!(
            md_code("repo05__issue-00005__a3"),
            "`repo05__issue-00005__a3`"
        );
        assert_eq!(md_code("a`b"), "``a`b``");
        assert_eq!(md_code("`x"), "`` `x ``");
        assert_eq!(md_code("a\nb"), "`a b`");
        for s in ["a`b", "`x", "x``", " y ", "<script>"] {
            let html = md_to_html(&format!("- {}", md_code(s)));
            assert_eq!(
                html,
                format!("<ul>\n<li><code>{}</code></li>\n</ul>\n", html_escape(s))
            );
        }
    }

    #[test]
    fn html_escape_escapes_all_five() {
        assert_eq!(
            html_escape("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
    }

    #[test]
    fn section_table_renders_with_header_cells_and_numeric_columns_right() {
        let md = "## T\n\n| workload | rows | seconds removed | LP bound |\n|---|---|---|---|\n| tmax | 3 | 3.000 | 5.200 (converged) |\n| deepswe | 5 | - | skipped |\n";
        let html = md_to_html(md);
        assert!(html.contains("<div class=\"table-wrap\"><table><thead><tr><th>workload</th><th style=\"text-align: right\">rows</th><th style=\"text-align: right\">seconds removed</th><th>LP bound</th></tr></thead><tbody>"), "{html}");
        assert!(html.contains("<tr><td>tmax</td><td style=\"text-align: right\">3</td><td style=\"text-align: right\">3.000</td><td>5.200 (converged)</td></tr>"), "{html}");
        assert!(html.contains("</tbody></table>\n</div>"), "{html}");
    }

    #[test]
    fn raw_html_in_markdown_is_shown_as_text() {
        let html = md_to_html("<script>alert(1)</script>\n\npara <img src=x onerror=y> end\n");
        assert!(!html.contains("<script"), "{html}");
        assert!(!html.contains("<img"), "{html}");
        assert!(
            html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
            "{html}"
        );
    }

    #[test]
    fn page_escapes_captions_and_is_self_contained() {
        let figures = [Figure {
            caption: "w<script>\"'&: chart".into(),
            svg: "<svg></svg>".into(),
        }];
        let html = page("# Title\n", &figures);
        assert!(
            html.contains(
                "<figcaption>w&lt;script&gt;&quot;&#39;&amp;: chart</figcaption><svg></svg>"
            ),
            "{html}"
        );
        for external in ["<script", "<link", "@import", "src=\"http", "href=\"http"] {
            assert!(!html.contains(external), "{external}");
        }
        assert!(html.contains("@media print"));
    }
}
