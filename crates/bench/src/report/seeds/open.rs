//! seeds/004: an open arrival rate on the customers API, the first run
//! on a fresh JVM (cold) and the next (warm).

use super::{backend, backends, failures};
use crate::fmt;
use crate::report::build::sweep_values;
use crate::report::svg::{self, Bar, BarChart, BarRow};
use crate::report::table::{Align, Table};
use crate::results::{Group, Row};

const PHASES: [(&str, &str); 2] = [("cold", "#c0392b"), ("warm", "#2e86c1")];

fn at<'a>(group: &'a Group, name: &str, rate: f64, phase: &str) -> Option<&'a Row> {
    group.rows.iter().find(|r| {
        backend(r) == name
            && r.phase.as_deref() == Some(phase)
            && r.sweep.as_ref().is_some_and(|s| s.value == rate)
    })
}

/// A row's mean latency, if it answered anything.
fn mean(row: Option<&Row>) -> Option<f64> {
    row.filter(|r| r.figures.requests > 0)
        .map(|r| r.figures.latency.avg_us)
}

pub(super) fn table(group: &Group) -> (Table, String) {
    let mut t = Table::new()
        .col("Backend", Align::Left)
        .col("rate/s", Align::Right);
    for (phase, _) in PHASES {
        t = t
            .col(&format!("{phase} mean"), Align::Right)
            .col(&format!("{phase} p95"), Align::Right)
            .col(&format!("{phase} failed/unans."), Align::Right);
    }
    t = t.col("cold ÷ warm (mean)", Align::Right);
    for rate in sweep_values(group) {
        for name in backends(group) {
            let unfit = PHASES.iter().any(|(phase, _)| {
                at(group, name, rate, phase).is_some_and(|r| !crate::window::comparable(r))
            });
            let mark = if unfit {
                crate::report::build::NOT_COMPARABLE_MARK
            } else {
                ""
            };
            let mut cells = vec![format!("{name}{mark}"), fmt::value(rate)];
            for (phase, _) in PHASES {
                match at(group, name, rate, phase) {
                    // Nothing answered: no latency to show, only what waited.
                    Some(row) if row.figures.requests == 0 => cells.extend([
                        "-".to_string(),
                        "-".to_string(),
                        format!(
                            "{}/{}",
                            failures(row),
                            fmt::count(row.figures.unanswered as f64)
                        ),
                    ]),
                    Some(row) => {
                        let l = &row.figures.latency;
                        cells.extend([
                            fmt::micros(l.avg_us),
                            fmt::micros(l.p95_us as f64),
                            format!(
                                "{}/{}",
                                failures(row),
                                fmt::count(row.figures.unanswered as f64)
                            ),
                        ]);
                    }
                    None => cells.extend(std::iter::repeat_n("-".to_string(), 3)),
                }
            }
            let cold = mean(at(group, name, rate, "cold"));
            let warm = mean(at(group, name, rate, "warm"));
            cells.push(fmt::times(
                cold.zip(warm).and_then(|(c, w)| fmt::ratio(c, w)),
            ));
            t.push(cells);
        }
    }
    let caption = "seeds/004's figure: response time at a fixed arrival rate (latency from each \
                   request's intended send time), cold = the first run on a freshly started \
                   process, warm = the run right after it; every round starts each backend \
                   afresh. failed/unans.: requests that failed (summed over the rounds) and \
                   those still unanswered when the run ended (a median); a backend marked * is \
                   not comparable (the lines under every row say why). The seed's mean response times (its chart) were much higher on the \
                   first run for every server, and at 2,000/s Grizzly's warm run was 9 ms below \
                   Spring Boot's and about half of Payara's."
        .to_string();
    (t, caption)
}

pub(super) fn chart(group: &Group) -> String {
    let mut rows = Vec::new();
    for rate in sweep_values(group) {
        for name in backends(group) {
            let bars = PHASES
                .iter()
                .filter_map(|(phase, color)| {
                    let us = mean(at(group, name, rate, phase))?;
                    Some(Bar {
                        value: us / 1000.0,
                        color: (*color).into(),
                        text: format!("{phase} {}", fmt::micros(us)),
                    })
                })
                .collect();
            rows.push(BarRow {
                label: format!("{name} @ {}/s", fmt::value(rate)),
                bars,
            });
        }
    }
    svg::bar_chart(&BarChart {
        title: format!("{}: mean latency, cold and warm (log scale)", group.title),
        x_label: "mean latency, ms (log scale)".into(),
        rows,
        legend: PHASES
            .iter()
            .map(|(p, c)| ((*p).to_string(), (*c).to_string()))
            .collect(),
        log: true,
    })
}

/// `at 2,000 req/s, mean cold -> warm: grizzly 41.2ms -> 1.10ms; ...`.
pub(super) fn line(group: &Group) -> String {
    let Some(top) = sweep_values(group).last().copied() else {
        return "no rates".into();
    };
    let parts: Vec<String> = backends(group)
        .into_iter()
        .map(|name| {
            let show = |phase| mean(at(group, name, top, phase)).map_or("-".into(), fmt::micros);
            format!("{name} {} -> {}", show("cold"), show("warm"))
        })
        .collect();
    format!(
        "at {} req/s, mean cold -> warm: {}",
        fmt::value(top),
        parts.join("; ")
    )
}
