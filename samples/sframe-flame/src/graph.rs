// SPDX-License-Identifier: GPL-2.0

//! One flame graph, SVG, drawn by inferno from folded stacks.

use crate::folded::Folded;
use anyhow::Context;
use anyhow::Result;
use inferno::flamegraph;

/// A rendered flame graph and its size in pixels.
pub struct Graph {
    pub svg: Vec<u8>,
    pub width: usize,
    pub height: usize,
}

/// Draws `folded` `width` pixels wide.  Colours follow the function name
/// (`deterministic`), so a function has the same colour in every graph of
/// a page and the eye can match them across graphs.
pub fn draw(folded: &Folded, title: &str, subtitle: &str, width: usize) -> Result<Graph> {
    let mut options = flamegraph::Options::default();
    options.title = title.to_owned();
    options.subtitle = Some(subtitle.to_owned());
    options.image_width = Some(width);
    options.deterministic = true;
    // Frames narrower than a pixel (FlameGraph's --minwidth) are left out:
    // a frame-pointer walk through code built without frame pointers
    // sometimes follows garbage for a hundred frames, and one such sample
    // would set the height of a graph whose every other stack is flat.
    options.min_width = 1.0;
    let mut svg = Vec::new();
    flamegraph::from_lines(&mut options, folded.lines(), &mut svg)
        .context("drawing the flame graph")?;
    let height = svg_height(&svg).context("the flame graph has no height")?;
    Ok(Graph { svg, width, height })
}

/// The `height` attribute of the SVG's root element, which inferno sizes
/// to the deepest stack.
fn svg_height(svg: &[u8]) -> Option<usize> {
    let text = std::str::from_utf8(svg).ok()?;
    let root = &text[text.find("<svg ")?..];
    let root = &root[..root.find('>')?];
    let value = &root[root.find(" height=\"")? + 9..];
    value[..value.find('"')?].parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(script: &str) -> Graph {
        let folded = Folded::from_perf_script(script.as_bytes()).unwrap();
        draw(&folded, "title", "subtitle", 600).unwrap()
    }

    fn sample(frames: &[&str]) -> String {
        let mut s = String::from("prog   100 [000]   10.000001: cpu-clock:\n");
        for (i, f) in frames.iter().enumerate() {
            s += &format!("\t    {:x} {f}+0x1 (/usr/bin/prog)\n", 0x1000 + i);
        }
        s + "\n"
    }

    #[test]
    fn deeper_stacks_draw_taller_graphs() {
        let flat = graph(&sample(&["leaf"]));
        let deep = graph(&sample(&[
            "leaf", "b", "c", "d", "e", "f", "main", "_start",
        ]));
        assert_eq!(flat.width, 600);
        assert!(
            deep.height > flat.height,
            "{} <= {}",
            deep.height,
            flat.height
        );
        let text = String::from_utf8(deep.svg).unwrap();
        for f in ["leaf", "main", "_start"] {
            assert!(text.contains(&format!("<title>{f} (")), "{f} not drawn");
        }
    }

    #[test]
    fn height_is_read_from_the_root_element_only() {
        let svg = br#"<?xml version="1.0"?><svg version="1.1" width="600" height="230" viewBox="0 0 600 230"><rect height="16"/></svg>"#;
        assert_eq!(svg_height(svg), Some(230));
        assert_eq!(svg_height(b"<svg width=\"1\">"), None);
    }
}
