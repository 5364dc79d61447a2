//! What the HTML reports share (the skill, churn and evaluation reports): escaping, numbers, the
//! page head with its style, and line charts drawn as inline SVG with plotters, so that each
//! report is one self-contained file to open in a browser with no server.

use plotters::prelude::*;

const W: u32 = 560;
const H: u32 = 380;
const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
];

/// Escapes text for HTML.
#[must_use]
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// One series of a chart: name, points, and whether to mark the points.
pub type Series<'a> = (&'a str, Vec<(f64, f64)>, bool);

/// A point with its interval: `(x, y, low, high)`, drawn with a vertical bar from `low` to
/// `high`.
pub type IntervalPoint = (f64, f64, f64, f64);

/// One series of an interval chart: name and points.
pub type IntervalSeries<'a> = (&'a str, Vec<IntervalPoint>);

/// What [`chart`] draws: name, points `(x, y, low, high)`, and whether to mark the points.
type Drawn<'a> = (&'a str, Vec<IntervalPoint>, bool);

/// A line (and point) chart. With no point in any series it is a sentence saying so, not an
/// empty frame.
#[must_use]
pub fn line_chart(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    x: (f64, f64),
    y: (f64, f64),
    series: &[Series<'_>],
) -> String {
    let with_bars: Vec<Drawn<'_>> = series
        .iter()
        .map(|(n, pts, marks)| (*n, pts.iter().map(|&(a, b)| (a, b, b, b)).collect(), *marks))
        .collect();
    chart(title, x_desc, y_desc, x, y, &with_bars, false)
}

/// A line chart whose points carry intervals (95% confidence intervals, say), drawn as
/// vertical error bars.
#[must_use]
pub fn interval_chart(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    x: (f64, f64),
    y: (f64, f64),
    series: &[IntervalSeries<'_>],
) -> String {
    let with_marks: Vec<Drawn<'_>> = series
        .iter()
        .map(|(n, pts)| (*n, pts.clone(), true))
        .collect();
    chart(title, x_desc, y_desc, x, y, &with_marks, true)
}

/// The figure with no data: its title and why it is empty, in place of the chart.
#[must_use]
pub fn no_chart(title: &str, why: &str) -> String {
    format!(
        "<p class=\"no-chart\"><b>{}</b>: {}</p>",
        escape(title),
        escape(why)
    )
}

fn chart(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    x: (f64, f64),
    y: (f64, f64),
    series: &[Drawn<'_>],
    bars: bool,
) -> String {
    if series.iter().all(|s| s.1.is_empty()) {
        return no_chart(title, "no point to draw");
    }
    let mut svg = String::new();
    let drawn = (|| -> Result<(), Box<dyn std::error::Error + '_>> {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 16))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(52)
            .build_cartesian_2d(x.0..x.1, y.0..y.1)?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(y_desc)
            .light_line_style(RGBColor(235, 235, 235))
            .draw()?;
        for (k, (name, pts, points)) in series.iter().enumerate() {
            let c = PALETTE[k % PALETTE.len()];
            chart
                .draw_series(LineSeries::new(
                    pts.iter().map(|p| (p.0, p.1)),
                    c.stroke_width(2),
                ))?
                .label(*name)
                .legend(move |(a, b)| {
                    PathElement::new(vec![(a, b), (a + 16, b)], c.stroke_width(2))
                });
            if *points {
                chart.draw_series(pts.iter().map(|p| Circle::new((p.0, p.1), 3, c.filled())))?;
            }
            if bars {
                chart
                    .draw_series(pts.iter().map(|p| {
                        ErrorBar::new_vertical(p.0, p.2, p.1, p.3, c.stroke_width(1), 6)
                    }))?;
            }
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .draw()?;
        root.present()?;
        Ok(())
    })();
    match drawn {
        Ok(()) => svg,
        Err(e) => no_chart(title, &format!("chart not drawn: {e}")),
    }
}

/// `x` with `d` decimals, or a dash when it is not finite.
#[must_use]
pub fn decimals(x: f64, d: usize) -> String {
    if x.is_finite() {
        format!("{x:.d$}")
    } else {
        "–".into()
    }
}

/// The start of a report page: title and the shared style, up to `<body>`.
#[must_use]
pub fn page_head(title: &str) -> String {
    format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{}</title>\
         <style>body{{font-family:sans-serif;max-width:1180px;margin:2em auto;color:#222}}\
         table{{border-collapse:collapse;margin:1em 0}}td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}}\
         th{{background:#f3f3f3}}td:first-child{{text-align:left}}\
         .charts{{display:flex;flex-wrap:wrap;gap:12px;align-items:flex-start}}.wide{{overflow-x:auto}}\
         code{{background:#f6f6f6;overflow-wrap:anywhere}}</style></head><body>",
        escape(title)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_leaves_no_markup() {
        assert_eq!(
            escape(r#"<a href="x">&</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&amp;&lt;/a&gt;"
        );
    }

    #[test]
    fn decimals_rounds_and_dashes_what_is_not_finite() {
        assert_eq!(decimals(0.123_456, 3), "0.123");
        assert_eq!(decimals(2.5, 0), "2");
        assert_eq!(decimals(f64::NAN, 2), "–");
        assert_eq!(decimals(f64::INFINITY, 2), "–");
    }

    #[test]
    fn a_line_chart_is_an_svg_with_its_title_and_series() {
        let svg = line_chart(
            "Retention",
            "pool size",
            "players",
            (0.0, 10.0),
            (0.0, 1.0),
            &[("eomm", vec![(1.0, 0.2), (9.0, 0.8)], true)],
        );
        assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(80)]);
        assert!(svg.contains("Retention") && svg.contains("eomm"));
    }

    #[test]
    fn an_interval_chart_draws_its_bars_and_an_empty_one_says_so() {
        let svg = interval_chart(
            "Retained share",
            "pool size",
            "%",
            (0.0, 10.0),
            (0.0, 1.0),
            &[("eomm", vec![(1.0, 0.5, 0.4, 0.6), (9.0, 0.6, 0.5, 0.7)])],
        );
        assert!(svg.starts_with("<svg") && svg.contains("eomm"));
        // Each bar is a vertical line with two caps: more lines than the plain chart's.
        let plain = line_chart(
            "Retained share",
            "pool size",
            "%",
            (0.0, 10.0),
            (0.0, 1.0),
            &[("eomm", vec![(1.0, 0.5), (9.0, 0.6)], true)],
        );
        assert!(
            svg.matches("<polyline").count() + svg.matches("<line").count()
                > plain.matches("<polyline").count() + plain.matches("<line").count()
        );
        let empty = line_chart(
            "Waits",
            "s",
            "%",
            (0.0, 1.0),
            (0.0, 1.0),
            &[("cod", vec![], false)],
        );
        assert!(!empty.contains("<svg") && empty.contains("Waits") && empty.contains("no point"));
    }

    #[test]
    fn the_page_head_escapes_its_title() {
        let h = page_head("a < b");
        assert!(h.contains("<title>a &lt; b</title>") && h.ends_with("<body>"));
    }
}
