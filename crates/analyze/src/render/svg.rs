//! A minimal SVG line-plot renderer for the report: lines, log or linear axes with ticks,
//! vertical markers and shaded bands, and a legend. No scripts, no fonts beyond the generic
//! `sans-serif`, so the output renders the same anywhere without network access.
//! [`to_png`] rasterizes a figure with resvg (pure Rust) for `--png` export.

use std::fmt::Write;
use std::sync::{Arc, OnceLock};

use resvg::tiny_skia::{Pixmap, Transform};
use resvg::usvg::fontdb::Database;

use crate::{Error, Result};

/// Series colours (colour-blind friendly, Okabe–Ito).
pub const COLORS: [&str; 8] = [
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442",
];

/// One line.
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend text.
    pub name: String,
    /// Points `(x, y)`.
    pub points: Vec<(f64, f64)>,
    /// Stroke colour.
    pub color: String,
    /// Stroke style.
    pub dash: Dash,
}

/// A line's stroke style.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dash {
    /// Solid.
    Solid,
    /// Dashed.
    Dashed,
    /// Dotted.
    Dotted,
    /// Dash and dot.
    DotDashed,
    /// Long dashes.
    Long,
    /// No line: a dot at each point (a scatter, for points that are not a series in time).
    Points,
}

impl Dash {
    /// The styles in the order runs take them ([`Dash::of_run`]).
    pub const ALL: [Dash; 5] = [
        Dash::Solid,
        Dash::Dashed,
        Dash::Dotted,
        Dash::DotDashed,
        Dash::Long,
    ];

    /// The stroke of run `i` (0-based): a different style for each of the first five runs.
    pub fn of_run(i: usize) -> Self {
        Self::ALL[i % Self::ALL.len()]
    }

    /// The SVG `stroke-dasharray` value (`none` for solid).
    pub fn pattern(self) -> &'static str {
        match self {
            Dash::Solid => "none",
            Dash::Dashed => "5 3",
            Dash::Dotted => "1.5 2.5",
            Dash::DotDashed => "7 3 1.5 3",
            Dash::Long => "12 4",
            Dash::Points => "none",
        }
    }

    fn attr(self) -> String {
        match self {
            Dash::Solid | Dash::Points => String::new(),
            d => format!(r#" stroke-dasharray="{}""#, d.pattern()),
        }
    }
}

/// A vertical marker (`x0 == x1`) or shaded band.
#[derive(Debug, Clone)]
pub struct Mark {
    /// Start.
    pub x0: f64,
    /// End.
    pub x1: f64,
    /// Colour.
    pub color: String,
}

/// An axis value formatter.
pub type Fmt = fn(f64) -> String;

/// A plot.
#[derive(Debug, Clone)]
pub struct Plot {
    /// Title.
    pub title: String,
    /// X axis label.
    pub x_label: String,
    /// Y axis label.
    pub y_label: String,
    /// Log-scaled X.
    pub x_log: bool,
    /// Log-scaled Y.
    pub y_log: bool,
    /// X tick formatter.
    pub x_fmt: Fmt,
    /// Y tick formatter.
    pub y_fmt: Fmt,
    /// Lines.
    pub series: Vec<Series>,
    /// Markers and bands.
    pub marks: Vec<Mark>,
    /// Legend entries for the marks: text and colour.
    pub mark_legend: Vec<(String, String)>,
}

const W: f64 = 760.0;
const H: f64 = 360.0;
const L: f64 = 72.0;
const R: f64 = 190.0;
const T: f64 = 34.0;
const B: f64 = 46.0;

/// Escapes text for XML.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

struct Axis {
    lo: f64,
    hi: f64,
    log: bool,
}

impl Axis {
    fn new(vals: impl Iterator<Item = f64>, log: bool, zero: bool) -> Self {
        let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
        for v in vals.filter(|v| v.is_finite() && (!log || *v > 0.0)) {
            lo = lo.min(v);
            hi = hi.max(v);
        }
        if !lo.is_finite() {
            (lo, hi) = (if log { 1.0 } else { 0.0 }, 1.0);
        }
        if log {
            lo = 10f64.powf(lo.log10().floor());
            hi = 10f64.powf(hi.log10().ceil());
            if hi <= lo {
                hi = lo * 10.0;
            }
        } else {
            if zero {
                lo = lo.min(0.0);
            }
            if hi <= lo {
                hi = lo + 1.0;
            }
            let step = nice_step((hi - lo) / 5.0);
            lo = (lo / step).floor() * step;
            hi = (hi / step).ceil() * step;
        }
        Self { lo, hi, log }
    }

    /// 0–1 position of `v`.
    fn frac(&self, v: f64) -> f64 {
        let f = if self.log {
            (v.max(self.lo).log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10())
        } else {
            (v - self.lo) / (self.hi - self.lo)
        };
        f.clamp(0.0, 1.0)
    }

    fn ticks(&self) -> Vec<f64> {
        if self.log {
            let (a, b) = (
                self.lo.log10().round() as i32,
                self.hi.log10().round() as i32,
            );
            let every = ((b - a) / 8).max(1);
            (a..=b)
                .step_by(every as usize)
                .map(|e| 10f64.powi(e))
                .collect()
        } else {
            let step = nice_step((self.hi - self.lo) / 5.0);
            let mut v = self.lo;
            let mut out = Vec::new();
            while v <= self.hi + step * 1e-9 {
                out.push(v);
                v += step;
            }
            out
        }
    }
}

fn nice_step(raw: f64) -> f64 {
    if raw <= 0.0 || !raw.is_finite() {
        return 1.0;
    }
    let mag = 10f64.powf(raw.log10().floor());
    let n = raw / mag;
    let m = if n <= 1.0 {
        1.0
    } else if n <= 2.0 {
        2.0
    } else if n <= 5.0 {
        5.0
    } else {
        10.0
    };
    m * mag
}

impl Plot {
    /// Data points plotted (lines only).
    pub fn points(&self) -> usize {
        self.series.iter().map(|s| s.points.len()).sum()
    }

    /// The SVG document.
    pub fn render(&self) -> String {
        let xs = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.0))
            .chain(self.marks.iter().flat_map(|m| [m.x0, m.x1]));
        let x = Axis::new(xs, self.x_log, !self.x_log);
        let y = Axis::new(
            self.series
                .iter()
                .flat_map(|s| s.points.iter().map(|p| p.1)),
            self.y_log,
            !self.y_log,
        );
        let (pw, ph) = (W - L - R, H - T - B);
        let px = |v: f64| L + x.frac(v) * pw;
        let py = |v: f64| T + (1.0 - y.frac(v)) * ph;
        let mut s = String::new();
        let _ = write!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" font-family="sans-serif" font-size="11">"#
        );
        let _ = write!(s, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
        let _ = write!(
            s,
            r#"<text x="{}" y="20" font-size="14" font-weight="bold">{}</text>"#,
            L,
            esc(&self.title)
        );
        for m in &self.marks {
            let (a, b) = (px(m.x0), px(m.x1));
            if (b - a).abs() < 1.0 {
                let _ = write!(
                    s,
                    r#"<line x1="{a:.1}" y1="{T}" x2="{a:.1}" y2="{:.1}" stroke="{}" stroke-opacity="0.6" stroke-width="1"/>"#,
                    T + ph,
                    m.color
                );
            } else {
                let _ = write!(
                    s,
                    r#"<rect x="{a:.1}" y="{T}" width="{:.1}" height="{ph:.1}" fill="{}" fill-opacity="0.15"/>"#,
                    b - a,
                    m.color
                );
            }
        }
        for t in x.ticks() {
            let p = px(t);
            let _ = write!(
                s,
                r##"<line x1="{p:.1}" y1="{T}" x2="{p:.1}" y2="{:.1}" stroke="#ddd"/><text x="{p:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
                T + ph,
                T + ph + 15.0,
                esc(&(self.x_fmt)(t))
            );
        }
        for t in y.ticks() {
            let p = py(t);
            let _ = write!(
                s,
                r##"<line x1="{L}" y1="{p:.1}" x2="{:.1}" y2="{p:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
                L + pw,
                L - 5.0,
                p + 4.0,
                esc(&(self.y_fmt)(t))
            );
        }
        let _ = write!(
            s,
            r##"<rect x="{L}" y="{T}" width="{pw}" height="{ph}" fill="none" stroke="#333"/>"##
        );
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            L + pw / 2.0,
            H - 8.0,
            esc(&self.x_label)
        );
        let _ = write!(
            s,
            r#"<text transform="translate(14 {:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
            T + ph / 2.0,
            esc(&self.y_label)
        );
        for se in &self.series {
            let pts: Vec<String> = se
                .points
                .iter()
                .filter(|p| p.0.is_finite() && p.1.is_finite())
                .map(|&(a, b)| format!("{:.1},{:.1}", px(a), py(b)))
                .collect();
            if se.dash == Dash::Points {
                for p in &pts {
                    let (cx, cy) = p.split_once(',').unwrap_or_default();
                    let _ = write!(
                        s,
                        r#"<circle cx="{cx}" cy="{cy}" r="3" fill="{}"/>"#,
                        se.color
                    );
                }
                continue;
            }
            let dash = se.dash.attr();
            let _ = write!(
                s,
                r#"<polyline fill="none" stroke="{}" stroke-width="1.8"{dash} points="{}"/>"#,
                se.color,
                pts.join(" ")
            );
        }
        let mut ly = T + 8.0;
        let lx = L + pw + 12.0;
        let entries = self
            .series
            .iter()
            .map(|se| (se.name.clone(), se.color.clone(), Some(se.dash)))
            .chain(
                self.mark_legend
                    .iter()
                    .map(|(n, c)| (n.clone(), c.clone(), None)),
            );
        for (name, color, line) in entries {
            if line == Some(Dash::Points) {
                let _ = write!(
                    s,
                    r#"<circle cx="{:.1}" cy="{ly:.1}" r="3.5" fill="{color}"/>"#,
                    lx + 9.0
                );
            } else if let Some(dash) = line {
                let _ = write!(
                    s,
                    r#"<line x1="{lx}" y1="{ly:.1}" x2="{:.1}" y2="{ly:.1}" stroke="{color}" stroke-width="2.5"{}/>"#,
                    lx + 18.0,
                    dash.attr()
                );
            } else {
                let _ = write!(
                    s,
                    r#"<rect x="{lx}" y="{:.1}" width="18" height="8" fill="{color}" fill-opacity="0.4"/>"#,
                    ly - 4.0
                );
            }
            let _ = write!(
                s,
                r#"<text x="{:.1}" y="{:.1}">{}</text>"#,
                lx + 24.0,
                ly + 4.0,
                esc(&name)
            );
            ly += 16.0;
        }
        s.push_str("</svg>");
        s
    }
}

/// Plots one above the other in one SVG document (panels sharing a figure and its caption).
pub fn stack(plots: &[Plot]) -> String {
    let h = H * plots.len() as f64;
    let mut s = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {h}" width="{W}" height="{h}">"#
    );
    for (k, p) in plots.iter().enumerate() {
        // The panel's own document, placed by an outer `svg`'s offset.
        let inner = p.render();
        let body = inner.strip_prefix("<svg ").unwrap_or(&inner);
        let _ = write!(s, r#"<svg x="0" y="{}" {body}"#, H * k as f64);
    }
    s.push_str("</svg>");
    s
}

/// The system's fonts, loaded once, with `sans-serif` mapped to an installed family.
fn fonts() -> Result<Arc<Database>> {
    static DB: OnceLock<Option<Arc<Database>>> = OnceLock::new();
    DB.get_or_init(|| {
        let mut db = Database::new();
        db.load_system_fonts();
        let families: Vec<String> = db
            .faces()
            .flat_map(|f| f.families.iter().map(|(name, _)| name.clone()))
            .collect();
        let sans = [
            "DejaVu Sans",
            "Liberation Sans",
            "Noto Sans",
            "FreeSans",
            "Arial",
        ]
        .into_iter()
        .map(str::to_owned)
        .find(|f| families.contains(f))
        .or_else(|| families.first().cloned())?;
        db.set_sans_serif_family(sans);
        Some(Arc::new(db))
    })
    .clone()
    .ok_or_else(|| {
        Error::Render(
            "no system fonts found for the figures' text; install one, e.g. Debian's \
             fonts-dejavu-core (scripts/install-fonts.sh)"
                .into(),
        )
    })
}

/// Rasterizes an SVG document (a report figure) to PNG at `scale` × its size, with the
/// system's fonts (pure Rust: resvg; no browser). Fails when no font is installed, rather than
/// drawing a figure without its labels.
pub fn to_png(svg: &str, scale: f32) -> Result<Vec<u8>> {
    let opt = resvg::usvg::Options {
        fontdb: fonts()?,
        ..resvg::usvg::Options::default()
    };
    let tree = resvg::usvg::Tree::from_str(svg, &opt)
        .map_err(|e| Error::Render(format!("parsing the SVG: {e}")))?;
    let scale = if scale.is_finite() && scale > 0.0 {
        scale
    } else {
        1.0
    };
    let size = tree
        .size()
        .to_int_size()
        .scale_by(scale)
        .ok_or_else(|| Error::Render(format!("bad image size at scale {scale}")))?;
    let mut pixmap = Pixmap::new(size.width(), size.height())
        .ok_or_else(|| Error::Render(format!("cannot allocate {size:?} pixels")))?;
    resvg::render(
        &tree,
        Transform::from_scale(scale, scale),
        &mut pixmap.as_mut(),
    );
    pixmap
        .encode_png()
        .map_err(|e| Error::Render(format!("encoding the PNG: {e}")))
}
