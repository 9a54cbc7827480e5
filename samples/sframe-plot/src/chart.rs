// SPDX-License-Identifier: GPL-2.0

//! A table as a horizontal bar chart: one group of bars per row, one bar
//! per series, each bar labelled with its value, drawn from zero so that
//! lengths compare.

use crate::table::Table;
use anyhow::anyhow;
use anyhow::Result;
use plotters::prelude::*;
use plotters::style::text_anchor::HPos;
use plotters::style::text_anchor::Pos;
use plotters::style::text_anchor::VPos;

const WIDTH: u32 = 900;
const BAR: u32 = 18;
const FONT: &str = "sans-serif";

/// The chart of `table`, as an SVG document.
pub fn svg(table: &Table) -> Result<String> {
    let rows = table.rows.len();
    let series = table.series.len();
    let legend = if series > 1 {
        20 * series as u32 + 10
    } else {
        0
    };
    let height = 70 + legend + rows as u32 * (BAR * series as u32 + 14);
    // Room for the longest row name, at plotters' estimate of about 0.6
    // of the font size per character.
    let longest = table
        .rows
        .iter()
        .map(|(n, _)| n.chars().count())
        .max()
        .unwrap_or(0);
    let names = (longest as u32 * 8 + 16).min(WIDTH / 2);
    let max = table.max();
    // Room at the right for the longest bar's label.
    let x_end = if max > 0.0 { max * 1.2 } else { 1.0 };

    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(&table.title, (FONT, 18))
            .margin(12)
            .margin_bottom(12 + legend)
            .x_label_area_size(40)
            .y_label_area_size(names)
            .build_cartesian_2d(0f64..x_end, 0f64..rows as f64)
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(0)
            .x_desc(table.unit.as_str())
            .x_label_formatter(&|v| value_text(*v))
            .label_style((FONT, 13))
            .draw()
            .map_err(plot_err)?;

        let band = 0.8 / series as f64;
        let value_style =
            TextStyle::from((FONT, 12).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
        let name_style =
            TextStyle::from((FONT, 13).into_font()).pos(Pos::new(HPos::Right, VPos::Center));
        for (i, (name, values)) in table.rows.iter().enumerate() {
            // The first row at the top.
            let top = (rows - i) as f64 - 0.1;
            for (j, value) in values.iter().enumerate() {
                let Some(value) = *value else {
                    continue;
                };
                let (y0, y1) = (top - (j + 1) as f64 * band, top - j as f64 * band);
                let colour = Palette99::pick(j).mix(0.9);
                chart
                    .draw_series([Rectangle::new([(0.0, y0), (value, y1)], colour.filled())])
                    .map_err(plot_err)?;
                let (x, y) = chart.backend_coord(&(value, (y0 + y1) / 2.0));
                root.draw(&Text::new(
                    value_text(value),
                    (x + 4, y),
                    value_style.clone(),
                ))
                .map_err(plot_err)?;
            }
            let (x, y) = chart.backend_coord(&(0.0, top - 0.4));
            root.draw(&Text::new(name.clone(), (x - 8, y), name_style.clone()))
                .map_err(plot_err)?;
        }
        if series > 1 {
            let (x, y) = (names as i32 + 12, height as i32 - legend as i32);
            for (j, name) in table.series.iter().enumerate() {
                let y = y + 20 * j as i32;
                root.draw(&Rectangle::new(
                    [(x, y), (x + 14, y + 14)],
                    Palette99::pick(j).mix(0.9).filled(),
                ))
                .map_err(plot_err)?;
                root.draw(&Text::new(
                    name.clone(),
                    (x + 20, y + 7),
                    TextStyle::from((FONT, 13).into_font()).pos(Pos::new(HPos::Left, VPos::Center)),
                ))
                .map_err(plot_err)?;
            }
        }
        root.present().map_err(plot_err)?;
    }
    Ok(svg)
}

fn plot_err<E: std::fmt::Display>(err: E) -> anyhow::Error {
    anyhow!("drawing the chart: {err}")
}

/// A value as the tables print it: thousands grouped, decimals only for
/// small values.
fn value_text(v: f64) -> String {
    if v != 0.0 && v.abs() < 10.0 {
        return format!("{v:.2}");
    }
    if v.abs() < 100.0 && v.fract() != 0.0 {
        return format!("{v:.1}");
    }
    let digits = format!("{:.0}", v.abs());
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if v < 0.0 {
        out.insert(0, '-');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_as_the_tables_print_them() {
        assert_eq!(value_text(0.0), "0");
        assert_eq!(value_text(1.017), "1.02");
        assert_eq!(value_text(45.5), "45.5");
        assert_eq!(value_text(45.0), "45");
        assert_eq!(value_text(1823.0), "1,823");
        assert_eq!(value_text(2_437_000.4), "2,437,000");
    }

    #[test]
    fn draws_every_row_series_and_value() {
        let table = Table::parse(
            "# title: fork cost\n# unit: us\nvariant,fork(),cycle\nbaseline,1823,1876\ninherited,1855,\n",
        )
        .unwrap();
        let svg = svg(&table).unwrap();
        for text in [
            "fork cost",
            "us",
            "baseline",
            "inherited",
            "fork()",
            "cycle",
            "1,823",
            "1,876",
            "1,855",
        ] {
            // plotters writes each text on a line of its own.
            assert!(
                svg.contains(&format!(">\n{text}\n</text>")),
                "{text} missing"
            );
        }
        // Three bars: the empty cell has none.  Bars are the only filled
        // rectangles with the series' opacity.
        assert_eq!(svg.matches("opacity=\"0.9\"").count(), 3 + 2, "{svg}");
    }

    #[test]
    fn longer_values_draw_longer_bars() {
        let table = Table::parse("v,x\na,100\nb,50\n").unwrap();
        let svg = svg(&table).unwrap();
        let widths: Vec<f64> = svg
            .split("<rect ")
            .filter(|r| r.contains("opacity=\"0.9\""))
            .map(|r| {
                let w = &r[r.find("width=\"").unwrap() + 7..];
                w[..w.find('"').unwrap()].parse().unwrap()
            })
            .collect();
        assert_eq!(widths.len(), 2, "{svg}");
        assert!((widths[0] / widths[1] - 2.0).abs() < 0.05, "{widths:?}");
    }
}
