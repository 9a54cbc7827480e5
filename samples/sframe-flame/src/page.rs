// SPDX-License-Identifier: GPL-2.0

//! The HTML page: flame graphs side by side, each an SVG file of its own
//! next to the page (`<object>`, so inferno's zoom and search work), all
//! drawn at the same width and aligned at their base, so that a shallow
//! graph stands visibly lower than a deep one.

/// One flame graph on the page.
pub struct Pane {
    /// The heading above the graph.
    pub label: String,
    /// The SVG file, relative to the page.
    pub file: String,
    pub width: usize,
    pub height: usize,
    /// A line under the graph.
    pub caption: String,
}

/// The page: a title, lines of notes, the panes in a row.
pub fn html(title: &str, notes: &[String], panes: &[Pane]) -> String {
    let mut out = String::new();
    out += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
    out += &format!("<title>{}</title>\n", escape(title));
    out += "<style>\n\
        body { font-family: sans-serif; margin: 1em; }\n\
        .panes { display: flex; align-items: flex-end; gap: 1em; }\n\
        figure { flex: 1 1 0; min-width: 0; margin: 0; }\n\
        figure object { display: block; width: 100%; height: auto; }\n\
        figcaption { margin-top: 0.3em; }\n\
        </style>\n</head>\n<body>\n";
    out += &format!("<h1>{}</h1>\n", escape(title));
    for note in notes {
        out += &format!("<p>{}</p>\n", escape(note));
    }
    out += "<div class=\"panes\">\n";
    for pane in panes {
        let file = escape(&pane.file);
        out += &format!(
            "<figure>\n<h2>{}</h2>\n\
             <object type=\"image/svg+xml\" data=\"{file}\" style=\"aspect-ratio: {} / {}\">{file}</object>\n\
             <figcaption>{} (<a href=\"{file}\">open alone</a>)</figcaption>\n</figure>\n",
            escape(&pane.label),
            pane.width,
            pane.height,
            escape(&pane.caption),
        );
    }
    out += "</div>\n</body>\n</html>\n";
    out
}

/// Text for HTML content and attribute values.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out += "&amp;",
            '<' => out += "&lt;",
            '>' => out += "&gt;",
            '"' => out += "&quot;",
            '\'' => out += "&#39;",
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pane(label: &str, file: &str, height: usize) -> Pane {
        Pane {
            label: label.to_owned(),
            file: file.to_owned(),
            width: 800,
            height,
            caption: format!("{label}: caption"),
        }
    }

    #[test]
    fn panes_in_order_with_their_aspect() {
        let page = html(
            "t <1>",
            &["a & b".to_owned()],
            &[pane("without", "a.svg", 100), pane("with", "b.svg", 400)],
        );
        assert!(page.contains("<title>t &lt;1&gt;</title>"));
        assert!(page.contains("<p>a &amp; b</p>"));
        let a = page
            .find("data=\"a.svg\" style=\"aspect-ratio: 800 / 100\"")
            .unwrap();
        let b = page
            .find("data=\"b.svg\" style=\"aspect-ratio: 800 / 400\"")
            .unwrap();
        assert!(a < b);
    }

    #[test]
    fn escapes_attribute_quotes() {
        assert_eq!(escape(r#"x"y'z"#), "x&quot;y&#39;z");
    }
}
