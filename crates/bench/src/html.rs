//! A self-contained HTML report: tables and charts drawn by plotters as inline
//! SVG, so it opens with no network. A few lines of inline script measure each
//! chart after layout and mark the page, so a headless browser can check that
//! every chart really rendered.

use crate::report::table;
use crate::stats::{Stats, BUCKET};
use plotters::prelude::*;

pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

impl Series {
    pub fn new(name: impl Into<String>, points: Vec<(f64, f64)>) -> Series {
        Series { name: name.into(), points }
    }
}

pub struct Section {
    pub heading: String,
    pub text: String,
    /// Pre-formatted (monospace) table.
    pub table: String,
    /// SVG documents.
    pub charts: Vec<String>,
}

pub struct Report {
    pub title: String,
    /// What the run measured: a sentence, or the terminal table (several lines,
    /// kept as preformatted text).
    pub intro: String,
    /// Rows of the "how this was made" table: date, command, version, target.
    pub meta: Vec<(String, String)>,
    pub sections: Vec<Section>,
}

impl Report {
    /// A report stamped with when, by which build and by which command line it was made.
    pub fn new(title: impl Into<String>, intro: impl Into<String>, sections: Vec<Section>) -> Report {
        let date = time::OffsetDateTime::now_utc()
            .replace_nanosecond(0)
            .ok()
            .and_then(|t| t.format(&time::format_description::well_known::Rfc3339).ok())
            .unwrap_or_default();
        // The program by its name, not its path: a report must not carry one machine's directories.
        let program =
            |a: String| std::path::Path::new(&a).file_name().map_or(a.clone(), |n| n.to_string_lossy().into());
        let args = std::env::args().enumerate().map(|(i, a)| if i == 0 { program(a) } else { a });
        let command = args.map(|a| shell_word(&a)).collect::<Vec<_>>().join(" ");
        let meta = vec![
            ("Date (UTC)".to_string(), date),
            ("Command".to_string(), command),
            ("handled-bench version".to_string(), env!("CARGO_PKG_VERSION").to_string()),
        ];
        Report { title: title.into(), intro: intro.into(), meta, sections }
    }
}

/// `a` as one shell word, quoted only when it has to be.
fn shell_word(a: &str) -> String {
    if !a.is_empty() && a.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_./:=,@%+{}".contains(&b)) {
        a.to_string()
    } else {
        format!("'{}'", a.replace('\'', "'\\''"))
    }
}

/// Axis tick text a person reads: whole numbers without ".0", thousands
/// grouped, small fractions with as few decimals as they need.
pub fn tick_label(v: f64) -> String {
    if !v.is_finite() {
        return String::new();
    }
    if (v - v.round()).abs() < 1e-9 * v.abs().max(1.0) {
        return group_thousands(v.round() as i64);
    }
    let mut s = if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    };
    if s.contains('.') {
        s = s.trim_end_matches('0').trim_end_matches('.').to_string();
    }
    s
}

fn group_thousands(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 {
        format!("-{out}")
    } else {
        out
    }
}

const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

/// A line chart with points; `diagonal` adds y = x (effective vs solicited).
pub fn line_chart(title: &str, x_label: &str, y_label: &str, series: &[Series], diagonal: bool) -> String {
    chart_with_x_ticks(title, x_label, y_label, series, diagonal, &tick_label, None)
}

/// A line chart whose x ticks are named by `x_tick` (and, when given, exactly
/// `x_ticks` of them).
fn chart_with_x_ticks(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    diagonal: bool,
    x_tick: &dyn Fn(f64) -> String,
    x_ticks: Option<usize>,
) -> String {
    let mut svg = String::new();
    let axes = Axes { x_label, y_label, x_tick, x_ticks };
    if let Err(e) = draw(&mut svg, title, &axes, series, diagonal) {
        return format!("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"760\" height=\"40\"><text x=\"10\" y=\"20\">chart failed: {}</text></svg>", escape(&e));
    }
    svg
}

struct Axes<'a> {
    x_label: &'a str,
    y_label: &'a str,
    x_tick: &'a dyn Fn(f64) -> String,
    x_ticks: Option<usize>,
}

fn draw(svg: &mut String, title: &str, axes: &Axes, series: &[Series], diagonal: bool) -> Result<(), String> {
    let pts = series.iter().flat_map(|s| s.points.iter()).filter(|p| p.0.is_finite() && p.1.is_finite());
    let (mut x0, mut x1, mut y1) = (f64::INFINITY, f64::NEG_INFINITY, 0.0f64);
    for &(x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y1 = y1.max(y);
    }
    if !x0.is_finite() {
        (x0, x1) = (0.0, 1.0);
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    if diagonal {
        y1 = y1.max(x1);
    }
    let y1 = if y1 > 0.0 { y1 * 1.08 } else { 1.0 };
    let root = SVGBackend::with_string(svg, (760, 380)).into_drawing_area();
    let e = |e: &dyn std::fmt::Display| e.to_string();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(42)
        .y_label_area_size(64)
        .build_cartesian_2d(x0..x1, 0.0..y1)
        .map_err(|x| e(&x))?;
    let x_tick = |v: &f64| (axes.x_tick)(*v);
    let y_tick = |v: &f64| tick_label(*v);
    let mut mesh = chart.configure_mesh();
    mesh.x_desc(axes.x_label)
        .y_desc(axes.y_label)
        .x_label_formatter(&x_tick)
        .y_label_formatter(&y_tick)
        .light_line_style(WHITE.mix(0.0));
    if let Some(n) = axes.x_ticks {
        mesh.x_labels(n);
    }
    mesh.draw().map_err(|x| e(&x))?;
    if diagonal {
        chart
            .draw_series(LineSeries::new(vec![(x0, x0), (x1, x1)], BLACK.mix(0.4).stroke_width(1)))
            .map_err(|x| e(&x))?
            .label("solicited = effective")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK.mix(0.4)));
    }
    for (i, s) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let points: Vec<(f64, f64)> = s.points.iter().copied().filter(|p| p.0.is_finite() && p.1.is_finite()).collect();
        chart
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
            .map_err(|x| e(&x))?
            .label(s.name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        if points.len() <= 60 {
            chart.draw_series(points.iter().map(|p| Circle::new(*p, 3, color.filled()))).map_err(|x| e(&x))?;
        }
    }
    if series.len() > 1 || diagonal {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .draw()
            .map_err(|x| e(&x))?;
    }
    root.present().map_err(|x| e(&x))?;
    Ok(())
}

const QUANTILES: [f64; 9] = [0.0, 0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999, 0.9999];

/// The percentile a whole number of "nines" stands for: 0 → p0, 1 → p90,
/// 2 → p99, 3 → p99.9; no label between them.
fn nines_label(x: f64) -> String {
    let n = x.round();
    if (x - n).abs() > 1e-6 || n < 0.0 {
        return String::new();
    }
    match n as usize {
        0 => "p0".into(),
        1 => "p90".into(),
        n => format!("p99{}{}", if n > 2 { "." } else { "" }, "9".repeat(n - 2)),
    }
}

/// Latency by percentile, on a "nines" axis (p0, p90, p99, p99.9, p99.99).
pub fn percentile_chart(runs: &[&Stats]) -> String {
    let series: Vec<Series> = runs
        .iter()
        .map(|s| {
            let pts = QUANTILES
                .iter()
                .map(|q| (-(1.0f64 - q).log10(), s.latency_us.value_at_quantile(*q) as f64 / 1000.0))
                .collect();
            Series::new(s.label.clone(), pts)
        })
        .collect();
    let max_nines = -(1.0f64 - QUANTILES[QUANTILES.len() - 1]).log10();
    chart_with_x_ticks(
        "Latency by percentile",
        "percentile",
        "latency ms",
        &series,
        false,
        &nines_label,
        Some(max_nines.round() as usize + 1),
    )
}

/// The 100 ms slices worth drawing. A run rarely ends on a slice boundary: a
/// last slice covering less than half of one would show as a drop to zero.
fn drawn_slices(s: &Stats) -> &[crate::stats::Bucket] {
    let slice = BUCKET.as_secs_f64();
    let covered = ((s.elapsed_s + slice / 2.0) / slice) as usize;
    &s.series[..s.series.len().min(covered.max(1))]
}

/// Throughput, latency and sockets over time at 100 ms resolution.
pub fn series_charts(s: &Stats) -> Vec<String> {
    let slice = BUCKET.as_secs_f64();
    let t = |i: usize| (i + 1) as f64 * slice;
    let per_s = 1.0 / slice;
    let series = drawn_slices(s);
    let ok: Vec<(f64, f64)> = series.iter().enumerate().map(|(i, b)| (t(i), b.ok as f64 * per_s)).collect();
    let err: Vec<(f64, f64)> = series.iter().enumerate().map(|(i, b)| (t(i), b.errors as f64 * per_s)).collect();
    let mean: Vec<(f64, f64)> = series
        .iter()
        .enumerate()
        .filter(|(_, b)| b.ok + b.errors > 0)
        .map(|(i, b)| (t(i), b.latency_sum_us as f64 / (b.ok + b.errors) as f64 / 1000.0))
        .collect();
    let max: Vec<(f64, f64)> =
        series.iter().enumerate().map(|(i, b)| (t(i), b.latency_max_us as f64 / 1000.0)).collect();
    let over_time = |what: &str, y_label: &str, series: &[Series]| {
        line_chart(&format!("{}: {what}", s.label), "seconds", y_label, series, false)
    };
    let mut out = vec![
        over_time(
            "requests per second (100 ms slices)",
            "requests/s",
            &[Series::new("answered", ok), Series::new("errors", err)],
        ),
        over_time("latency over time", "ms", &[Series::new("mean", mean), Series::new("max", max)]),
    ];
    if s.sockets_opened > 0 {
        let sockets: Vec<(f64, f64)> = series.iter().enumerate().map(|(i, b)| (t(i), b.sockets as f64)).collect();
        out.push(over_time("client sockets in use", "sockets", &[Series::new("in use", sockets)]));
    }
    out
}

/// A section for a set of runs: table, percentile curves, and the time series
/// of up to `series_of` runs.
pub fn runs_section(heading: &str, text: &str, runs: &[Stats], series_of: usize) -> Section {
    let mut charts = Vec::new();
    let refs: Vec<&Stats> = runs.iter().filter(|s| !s.latency_us.is_empty()).take(8).collect();
    if !refs.is_empty() {
        charts.push(percentile_chart(&refs));
    }
    for s in runs.iter().take(series_of) {
        charts.extend(series_charts(s));
    }
    Section { heading: heading.into(), text: text.into(), table: table(runs), charts }
}

/// Effective vs solicited rate, and latency against the solicited rate (rate sweeps).
pub fn rate_charts(runs: &[Stats]) -> Vec<String> {
    let pts = |f: &dyn Fn(&Stats) -> f64| -> Vec<(f64, f64)> {
        runs.iter().filter_map(|s| s.solicited_rate.map(|r| (r, f(s)))).collect()
    };
    vec![
        line_chart(
            "Effective vs solicited rate",
            "solicited requests/s",
            "effective requests/s",
            &[Series::new("effective", pts(&|s| s.throughput()))],
            true,
        ),
        line_chart(
            "Latency vs solicited rate",
            "solicited requests/s",
            "ms",
            &[Series::new("mean", pts(&|s| s.latency_us.mean() / 1000.0)), Series::new("p99", pts(&|s| s.ms(0.99)))],
            false,
        ),
    ]
}

/// Throughput and latency against the number of clients, and throughput vs latency.
pub fn concurrency_charts(runs: &[Stats]) -> Vec<String> {
    let by = |f: &dyn Fn(&Stats) -> f64| -> Vec<(f64, f64)> { runs.iter().map(|s| (s.clients as f64, f(s))).collect() };
    vec![
        line_chart(
            "Throughput vs clients",
            "clients",
            "requests/s",
            &[Series::new("throughput", by(&|s| s.throughput()))],
            false,
        ),
        line_chart(
            "Latency vs clients",
            "clients",
            "ms",
            &[Series::new("p50", by(&|s| s.ms(0.5))), Series::new("p99", by(&|s| s.ms(0.99)))],
            false,
        ),
        line_chart(
            "Throughput vs latency",
            "requests/s",
            "p99 ms",
            &[Series::new("p99", runs.iter().map(|s| (s.throughput(), s.ms(0.99))).collect())],
            false,
        ),
    ]
}

pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

const CHECK_SCRIPT: &str = r#"<script>
// Mark each chart with its laid-out size so a headless browser run can check rendering.
window.addEventListener('load', function () {
  var svgs = document.querySelectorAll('figure svg'), ok = 0;
  svgs.forEach(function (s) {
    var b = s.getBBox(), n = s.querySelectorAll('path,polyline,line,circle,rect,text').length;
    s.setAttribute('data-rendered', Math.round(b.width) + 'x' + Math.round(b.height) + ':' + n);
    if (b.width > 0 && b.height > 0 && n > 0) ok++;
  });
  document.body.setAttribute('data-charts', svgs.length);
  document.body.setAttribute('data-rendered-charts', ok);
});
</script>"#;

impl Report {
    pub fn to_html(&self) -> String {
        let mut head = String::new();
        if !self.meta.is_empty() {
            head += "<table class=\"meta\">\n";
            for (k, v) in &self.meta {
                head += &format!("<tr><th scope=\"row\">{}</th><td>{}</td></tr>\n", escape(k), escape(v));
            }
            head += "</table>\n";
        }
        head += &text_block(&self.intro);
        let mut body = String::new();
        for s in &self.sections {
            body += &format!("<section><h2>{}</h2>\n", escape(&s.heading));
            body += &text_block(&s.text);
            if !s.table.is_empty() {
                body += &format!("<pre>{}</pre>\n", escape(&s.table));
            }
            for c in &s.charts {
                body += &format!("<figure>{c}</figure>\n");
            }
            body += "</section>\n";
        }
        format!(
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title>\n<style>{STYLE}</style></head>\n<body><h1>{t}</h1>\n{head}{body}{CHECK_SCRIPT}</body></html>\n",
            t = escape(&self.title),
        )
    }
}

const STYLE: &str = "body{font-family:sans-serif;max-width:1000px;margin:2em auto;padding:0 1em;color:#222}\
pre{background:#f6f6f6;padding:.6em;overflow-x:auto;font-size:12px}figure{margin:1em 0}\
table.meta{border-collapse:collapse;font-size:14px;margin:1em 0}\
table.meta th{text-align:left;padding:.2em 1em .2em 0;color:#555;font-weight:normal;vertical-align:top}\
table.meta td{font-family:monospace;word-break:break-all}";

/// A sentence as a paragraph, a multi-line terminal table as preformatted
/// text, nothing at all as nothing.
fn text_block(text: &str) -> String {
    let text = text.trim_end();
    if text.is_empty() {
        String::new()
    } else if text.contains('\n') {
        format!("<pre>{}</pre>\n", escape(text))
    } else {
        format!("<p>{}</p>\n", escape(text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Bucket;

    #[test]
    fn charts_are_svg_with_drawn_lines() {
        let svg = line_chart(
            "t",
            "x",
            "y",
            &[Series::new("a", vec![(1.0, 2.0), (2.0, 4.0)]), Series::new("b", vec![(1.0, 1.0)])],
            true,
        );
        assert!(svg.starts_with("<svg") && svg.contains("<polyline") && svg.contains("<circle"), "{svg}");
        let mut s = Stats::empty("run <1>");
        s.series = vec![Bucket { ok: 3, latency_sum_us: 300, latency_max_us: 200, ..Default::default() }; 5];
        s.latency_us.record(100).unwrap();
        let html = Report::new("T", "i", vec![runs_section("h", "", &[s], 1)]).to_html();
        assert_eq!(html.matches("<figure><svg").count(), 3);
        assert!(html.contains("run &lt;1&gt;") && !html.contains("src=\"http"));
        assert!(html.contains("<th scope=\"row\">Date (UTC)</th>") && html.contains("<th scope=\"row\">Command</th>"));
        assert!(!html.contains("<p></p>"), "no empty paragraph");
    }

    #[test]
    fn a_terminal_table_stays_preformatted() {
        let html = Report::new("T", "Phase  Rate\nhold   100\n", vec![]).to_html();
        assert!(html.contains("<pre>Phase  Rate\nhold   100</pre>"), "{html}");
        assert!(Report::new("T", "one sentence", vec![]).to_html().contains("<p>one sentence</p>"));
    }

    #[test]
    fn ticks_read_as_numbers() {
        assert_eq!(tick_label(40000.0), "40,000");
        assert_eq!(tick_label(1234567.0), "1,234,567");
        assert_eq!(tick_label(0.0), "0");
        assert_eq!(tick_label(2.5), "2.5");
        assert_eq!(tick_label(0.125), "0.125");
        assert_eq!(tick_label(150.4), "150");
        assert_eq!(nines_label(0.0), "p0");
        assert_eq!(nines_label(2.0), "p99");
        assert_eq!(nines_label(3.0), "p99.9");
        assert_eq!(nines_label(4.0), "p99.99");
        assert_eq!(nines_label(1.5), "");
    }

    #[test]
    fn a_partial_last_slice_is_not_drawn_as_a_drop() {
        let mut s = Stats::empty("r");
        // 1.03 s measured: ten whole slices and 30 ms of an eleventh.
        s.elapsed_s = 1.03;
        s.series = vec![Bucket { ok: 100, latency_sum_us: 100, latency_max_us: 1, ..Default::default() }; 10];
        s.series.push(Bucket { ok: 2, latency_sum_us: 2, latency_max_us: 1, ..Default::default() });
        assert_eq!(drawn_slices(&s).len(), 10);
        s.elapsed_s = 1.07;
        assert_eq!(drawn_slices(&s).len(), 11, "a slice more than half covered is drawn");
    }
}
