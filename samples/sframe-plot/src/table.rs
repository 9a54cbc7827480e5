// SPDX-License-Identifier: GPL-2.0

//! The table a benchmark writes: a small CSV file, comment lines naming
//! the figure, a header row, one row per variant measured.
//!
//! ```text
//! # title: manylibs start-up, mean of 20 runs in the guest
//! # unit: ms per run
//! variant,time per run
//! no auditor,3620
//! sframe-audit.so,4440
//! ```
//!
//! The first column names the rows; every other column is a series of
//! numbers (an empty cell: not measured).  Fields may be double-quoted
//! (`"a, b"`, `""` for a quote).

use anyhow::bail;
use anyhow::Context;
use anyhow::Result;

/// A parsed table.
#[derive(Debug, PartialEq)]
pub struct Table {
    pub title: String,
    pub unit: String,
    /// The series' names: the header's columns after the first.
    pub series: Vec<String>,
    /// Each row's name and its values, one per series.
    pub rows: Vec<(String, Vec<Option<f64>>)>,
}

impl Table {
    pub fn parse(text: &str) -> Result<Self> {
        let mut title = String::new();
        let mut unit = String::new();
        let mut header: Option<Vec<String>> = None;
        let mut rows = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let n = n + 1;
            if let Some(comment) = line.strip_prefix('#') {
                let comment = comment.trim();
                if let Some(v) = comment.strip_prefix("title:") {
                    title = v.trim().to_owned();
                } else if let Some(v) = comment.strip_prefix("unit:") {
                    unit = v.trim().to_owned();
                }
                continue;
            }
            if line.trim().is_empty() {
                continue;
            }
            let fields = split(line).with_context(|| format!("line {n}"))?;
            let Some(columns) = &header else {
                if fields.len() < 2 {
                    bail!("line {n}: the header needs a name column and at least one series");
                }
                header = Some(fields);
                continue;
            };
            if fields.len() != columns.len() {
                bail!(
                    "line {n}: {} fields, the header has {}",
                    fields.len(),
                    columns.len()
                );
            }
            let mut values = Vec::new();
            for field in &fields[1..] {
                let field = field.trim();
                values.push(if field.is_empty() {
                    None
                } else {
                    let v: f64 = field
                        .parse()
                        .with_context(|| format!("line {n}: {field:?} is not a number"))?;
                    if !v.is_finite() || v < 0.0 {
                        bail!("line {n}: {v} is not a finite, non-negative value");
                    }
                    Some(v)
                });
            }
            rows.push((fields[0].trim().to_owned(), values));
        }
        let Some(mut columns) = header else {
            bail!("no header row");
        };
        if rows.is_empty() {
            bail!("no rows");
        }
        columns.remove(0);
        Ok(Self {
            title,
            unit,
            series: columns.into_iter().map(|c| c.trim().to_owned()).collect(),
            rows,
        })
    }

    /// The largest value, 0 if none.
    pub fn max(&self) -> f64 {
        self.rows
            .iter()
            .flat_map(|(_, v)| v.iter().flatten())
            .fold(0.0, |a: f64, &b| a.max(b))
    }
}

/// The fields of one CSV line.
fn split(line: &str) -> Result<Vec<String>> {
    let mut fields = Vec::new();
    let mut field = String::new();
    let mut chars = line.chars().peekable();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', false) if field.trim().is_empty() => {
                field.clear();
                quoted = true;
            }
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            ('"', true) => quoted = false,
            (',', false) => fields.push(std::mem::take(&mut field)),
            (c, _) => field.push(c),
        }
    }
    if quoted {
        bail!("unterminated quote");
    }
    fields.push(field);
    Ok(fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_comments_header_and_rows() {
        let t = Table::parse(
            "# title: start-up\n# unit: ms\nvariant,fork,\"cycle, whole\"\nno module,1.5,2\n\n\"a \"\"b\"\"\",3,\n",
        )
        .unwrap();
        assert_eq!(t.title, "start-up");
        assert_eq!(t.unit, "ms");
        assert_eq!(t.series, ["fork", "cycle, whole"]);
        assert_eq!(
            t.rows,
            [
                ("no module".to_owned(), vec![Some(1.5), Some(2.0)]),
                ("a \"b\"".to_owned(), vec![Some(3.0), None]),
            ]
        );
        assert_eq!(t.max(), 3.0);
    }

    #[test]
    fn rejects_what_it_cannot_draw() {
        for (text, why) in [
            ("", "no header"),
            ("a,b\n", "no rows"),
            ("a\nx\n", "name column"),
            ("a,b\nx,1,2\n", "3 fields"),
            ("a,b\nx,fast\n", "not a number"),
            ("a,b\nx,-1\n", "non-negative"),
            ("a,b\nx,NaN\n", "finite"),
            ("a,b\n\"x,1\n", "unterminated"),
        ] {
            let err = format!("{:#}", Table::parse(text).unwrap_err());
            assert!(err.contains(why), "{text:?}: {err}");
        }
    }
}
