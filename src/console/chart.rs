//! A run's rate over time as an SVG drawn on the server: a polyline of its rate points, in the page itself (no
//! script, no style attribute: its colours are the stylesheet's classes, so the CSP holds and dark mode applies).

use crate::transfer::view::RatePoint;

/// The drawing's size in its own units (the stylesheet scales it to the page's width).
const WIDTH: f64 = 600.0;
const HEIGHT: f64 = 160.0;

/// What the page needs to draw the chart and say it in words.
pub struct RateChart {
    /// `x,y` pairs of the polyline, in drawing units.
    pub points: String,
    /// The highest rate, in words (the top of the y axis).
    pub top: String,
    /// From when to when, in words.
    pub span: String,
    /// The whole chart in one sentence (its accessible name).
    pub words: String,
}

/// The chart of `history`; `None` when it has fewer than two points (nothing to draw).
pub fn rate_chart(history: &[RatePoint]) -> Option<RateChart> {
    let (first, last) = (history.first()?, history.last()?);
    if history.len() < 2 {
        return None;
    }
    let top = history.iter().map(|p| p.per_second).fold(0.0_f64, f64::max).max(1.0);
    let secs = |p: &RatePoint| (p.at - first.at).num_milliseconds() as f64 / 1000.0;
    let span_secs = secs(last).max(0.001);
    let points: Vec<String> = history
        .iter()
        .map(|p| {
            let x = secs(p) / span_secs * WIDTH;
            let y = HEIGHT - p.per_second / top * HEIGHT;
            format!("{x:.1},{y:.1}")
        })
        .collect();
    let span = format!("{} to {}", first.at.format("%H:%M:%S"), last.at.format("%H:%M:%S UTC"));
    let words = format!(
        "Messages delivered per second, {span}: highest {top:.0}/s, last {:.0}/s, {} delivered in all",
        last.per_second, last.delivered
    );
    Some(RateChart { points: points.join(" "), top: format!("{top:.0} msg/s"), span, words })
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};

    #[test]
    fn the_chart_spans_the_drawing_and_its_words_say_what_it_shows() {
        let at = |s: i64| Utc.timestamp_opt(1_800_000_000 + s, 0).unwrap();
        let history = [
            RatePoint { at: at(0), delivered: 0, per_second: 0.0 },
            RatePoint { at: at(10), delivered: 500, per_second: 50.0 },
            RatePoint { at: at(20), delivered: 750, per_second: 25.0 },
        ];
        let chart = rate_chart(&history).unwrap();
        assert_eq!(chart.points, "0.0,160.0 300.0,0.0 600.0,80.0");
        assert_eq!(chart.top, "50 msg/s");
        assert!(chart.words.contains("highest 50/s, last 25/s, 750 delivered"), "{}", chart.words);
        assert!(rate_chart(&history[..1]).is_none());
    }
}
